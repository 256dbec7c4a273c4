//! Races recorded on the simulator for a hardening whose backend records none (a GPU, or the
//! stand-in driver): the same app's PTX runs on the simulator's PTX model, at the simulator's
//! size, so that the scope rule, the race rule and the partner pass hold there too.
//!
//! The two builds of one app may number their sites differently (an app's per-size defines
//! can change its code). A fence set names the hardening's sites; [`SiteMapped`] runs it at the
//! simulator's sites of the same function and source line (the n-th site of a line for the
//! n-th). What the runs record names source lines, which [`super::communication`] maps back
//! to the hardening's sites.

use crate::backend::BackendKind;
use crate::check::calibrate::Calibration;
use crate::check::outcome::RunRecord;
use crate::check::spec::{CalibrationRequest, Fences, RunRequest, SiteSummary, Target};
use crate::check::{ExecError, Executor};
use crate::ptx::passes::fences::FenceSite;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Where a hardening whose backend records no races records them: the simulator's target (PTX
/// model, simulator size) and the stress iterations calibrated there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaceRecording {
    pub target: Target,
    pub stress_iterations: u32,
}

impl RaceRecording {
    /// `communication recorded on the simulator (PTX model), runs on cuda`.
    pub fn describe(runs_on: BackendKind) -> String {
        format!(
            "communication recorded on the simulator (PTX model), runs on {}",
            runs_on.name()
        )
    }
}

/// The hardening's site ids to the recording simulator's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteMap {
    to_recorder: BTreeMap<usize, usize>,
}

/// What pairs two builds' sites: function, source file and line.
type SiteKey = (String, Option<String>, Option<u32>);

impl SiteMap {
    /// Pairs each of `sites` with the site of `recorder` at the same function and source line,
    /// the n-th of that line with the n-th; a site without a partner gets no fence there.
    pub fn between(sites: &[SiteSummary], recorder: &[SiteSummary]) -> SiteMap {
        let mut by_key: HashMap<SiteKey, Vec<usize>> = HashMap::new();
        for site in recorder {
            by_key.entry(key(site)).or_default().push(site.id);
        }
        let mut seen: HashMap<SiteKey, usize> = HashMap::new();
        let mut to_recorder = BTreeMap::new();
        for site in sites {
            let k = key(site);
            let n = seen.entry(k.clone()).or_insert(0);
            if let Some(&id) = by_key.get(&k).and_then(|ids| ids.get(*n)) {
                to_recorder.insert(site.id, id);
            }
            *n += 1;
        }
        SiteMap { to_recorder }
    }

    /// `fences` at the recorder's sites.
    pub fn fences(&self, fences: &Fences) -> Fences {
        let at = |id: &usize| self.to_recorder.get(id).copied();
        match fences {
            Fences::AsIs => Fences::AsIs,
            Fences::Sites(ids) => Fences::Sites(ids.iter().filter_map(at).collect()),
            Fences::Kinded(kinds) => Fences::Kinded(
                kinds
                    .iter()
                    .filter_map(|(id, kind)| Some((at(id)?, *kind)))
                    .collect(),
            ),
        }
    }

    /// The sites of the hardening with no partner in the recorder.
    pub fn unpaired<'s>(&self, sites: &'s [SiteSummary]) -> Vec<&'s SiteSummary> {
        sites
            .iter()
            .filter(|s| !self.to_recorder.contains_key(&s.id))
            .collect()
    }
}

fn key(site: &SiteSummary) -> SiteKey {
    (site.function.clone(), site.file.clone(), site.line)
}

/// The simulator executor that records races for a hardening, asked with the hardening's site
/// ids.
pub struct SiteMapped {
    executor: Box<dyn Executor>,
    map: SiteMap,
}

impl SiteMapped {
    pub fn new(executor: Box<dyn Executor>, map: SiteMap) -> SiteMapped {
        SiteMapped { executor, map }
    }

    fn mapped(&self, request: &RunRequest) -> RunRequest {
        RunRequest {
            fences: self.map.fences(&request.fences),
            ..request.clone()
        }
    }
}

impl Executor for SiteMapped {
    fn provenance(&self) -> String {
        self.executor.provenance()
    }

    fn records_races(&self) -> bool {
        self.executor.records_races()
    }

    fn sites(&self) -> Result<Vec<FenceSite>, ExecError> {
        self.executor.sites()
    }

    fn calibrate(
        &mut self,
        request: &CalibrationRequest,
        measured: &mut dyn FnMut(u32, f64),
    ) -> Result<Calibration, ExecError> {
        let request = CalibrationRequest {
            fences: self.map.fences(&request.fences),
            ..request.clone()
        };
        self.executor.calibrate(&request, measured)
    }

    fn execute(&mut self, request: &RunRequest) -> Result<RunRecord, ExecError> {
        let request = self.mapped(request);
        self.executor.execute(&request)
    }

    fn parallelism(&self) -> usize {
        self.executor.parallelism()
    }

    fn execute_many(&mut self, requests: &[RunRequest]) -> Vec<Result<RunRecord, ExecError>> {
        let requests: Vec<RunRequest> = requests.iter().map(|r| self.mapped(r)).collect();
        self.executor.execute_many(&requests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::passes::fences::FenceKind;

    fn site(id: usize, line: Option<u32>) -> SiteSummary {
        SiteSummary {
            id,
            function: "k".into(),
            file: line.map(|_| "kernel.cu".into()),
            line,
            ptx: Vec::new(),
            frames: Vec::new(),
            fence_after: Vec::new(),
        }
    }

    /// The GPU build has an extra site (a line the simulator's defines compile away) and two
    /// accesses on line 20; each fence goes to the simulator's site of the same line, the
    /// second access of line 20 to the second.
    #[test]
    fn a_fence_set_goes_to_the_same_source_lines_in_the_other_build() {
        let gpu = [
            site(0, Some(10)),
            site(1, Some(12)),
            site(2, Some(20)),
            site(3, Some(20)),
        ];
        let sim = [site(0, Some(10)), site(1, Some(20)), site(2, Some(20))];
        let map = SiteMap::between(&gpu, &sim);
        assert_eq!(
            map.fences(&Fences::Sites(vec![0, 1, 3])),
            Fences::Sites(vec![0, 2])
        );
        let kinded = Fences::Kinded([(2, FenceKind::AcqRelGpu)].into());
        assert_eq!(
            map.fences(&kinded),
            Fences::Kinded([(1, FenceKind::AcqRelGpu)].into())
        );
        let unpaired: Vec<usize> = map.unpaired(&gpu).iter().map(|s| s.id).collect();
        assert_eq!(unpaired, [1]);
    }
}
