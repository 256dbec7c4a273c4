//! What a check runs: the target (app, backend, fences, stress profile) and each run's request.
//!
//! A [`Target`] is everything a worker needs to set up, and what a journal records so that a run
//! can be replayed; a [`RunRequest`] is one run. Both serialise to JSON: the supervisor sends them
//! to its worker process that way.

use crate::apps::Size;
use crate::env::Environment;
use crate::profile::StressProfile;
use crate::ptx::passes::fences::{FenceKind, FenceSite, Granularity, SourceLine};
use crate::ptx::{AccessKind, MemoryAccess};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::backend::select::BackendChoice;
pub use crate::backend::sim::SimModel;
pub use crate::backend::BackendKind;

/// The application under test and how it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// A built-in app's name, or the name in `app_dir`'s manifest.
    pub app: String,
    /// A bring-your-own app folder (`kernel.cu` + `app.toml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_dir: Option<PathBuf>,
    pub size: Size,
    /// The backend that runs it (`--backend auto` already resolved).
    pub backend: BackendKind,
    pub sim_model: SimModel,
    /// The fence instruction inserted at chosen sites.
    pub fence_kind: FenceKind,
    /// What a fence site is: a source line or a PTX access.
    pub granularity: Granularity,
    /// The `sys` stress parameters.
    pub profile: StressProfile,
    /// Deadline of each kernel in milliseconds (a kernel still running is a timeout).
    pub deadline_ms: u64,
    /// Stress lasts about this many times the app's kernel (calibrated per environment).
    pub stress_factor: f64,
    /// Simulator only: thread-instructions per launch before it is a timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim_budget: Option<u64>,
}

impl Target {
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.deadline_ms)
    }

    /// Whether its runs can record races: on the simulator's PTX model only.
    pub fn races_recordable(&self) -> bool {
        self.backend == crate::backend::BackendKind::Sim && self.sim_model == SimModel::Ptx
    }
}

/// Default kernel deadline: 30 s, long enough for any case-study kernel on a GPU.
pub const DEFAULT_DEADLINE_MS: u64 = 30_000;
/// Default stress length relative to the app's kernel (the paper's set-up).
pub const DEFAULT_STRESS_FACTOR: f64 = 10.0;

/// Which fences the app runs with.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fences {
    /// The app's own PTX, unchanged.
    #[serde(rename = "as-is")]
    AsIs,
    /// A fence after each of these fence sites (ids from `gpuwmm ptx sites`, in the target's
    /// granularity), in addition to the fences the app already has.
    Sites(Vec<usize>),
    /// A fence after each of these sites, each of its own kind (the target's `fence_kind` does
    /// not apply).
    Kinded(BTreeMap<usize, FenceKind>),
}

impl Fences {
    /// `as-is`, or the sorted site ids separated by spaces (`none` for no site).
    pub fn label(&self) -> String {
        match self {
            Fences::AsIs => "as-is".to_string(),
            Fences::Sites(ids) if ids.is_empty() => "none".to_string(),
            Fences::Sites(ids) => ids
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(" "),
            Fences::Kinded(kinds) if kinds.is_empty() => "none".to_string(),
            Fences::Kinded(kinds) => kinds
                .iter()
                .map(|(id, kind)| format!("{id}@{kind}"))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// Reads what [`Fences::label`] writes.
impl std::str::FromStr for Fences {
    type Err = String;

    fn from_str(label: &str) -> Result<Fences, String> {
        match label.trim() {
            "as-is" => Ok(Fences::AsIs),
            "none" => Ok(Fences::Sites(Vec::new())),
            kinded if kinded.contains('@') => kinded
                .split_whitespace()
                .map(|token| {
                    let (id, kind) = token
                        .split_once('@')
                        .ok_or_else(|| format!("'{token}' names no fence kind (`id@kind`)"))?;
                    let id = id
                        .parse()
                        .map_err(|_| format!("'{id}' is not a fence site id"))?;
                    Ok((id, kind.parse::<FenceKind>()?))
                })
                .collect::<Result<BTreeMap<usize, FenceKind>, String>>()
                .map(Fences::Kinded),
            ids => ids
                .split_whitespace()
                .map(|id| {
                    id.parse()
                        .map_err(|_| format!("'{id}' is not a fence site id"))
                })
                .collect::<Result<Vec<usize>, String>>()
                .map(Fences::Sites),
        }
    }
}

/// One run of the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    pub run: u64,
    pub seed: u64,
    pub env: Environment,
    pub fences: Fences,
    /// Stress loop iterations (from calibration); ignored without stress.
    pub stress_iterations: u32,
    /// Record races (simulator): the record then carries them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub races: bool,
}

/// A request to calibrate stress iterations for an environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationRequest {
    pub env: Environment,
    pub fences: Fences,
    pub seed: u64,
}

/// The seed of run `run` of a check seeded with `master`: a SplitMix64 step, so that
/// neighbouring runs get unrelated seeds and any run can be recomputed.
pub fn run_seed(master: u64, run: u64) -> u64 {
    let mut z = master.wrapping_add(run.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A simulator target for unit tests of the drivers (their executors are mocks: nothing is
/// compiled or run).
/// A candidate fence site as a journal records it: enough to report a fence without the
/// compiler, and to tell whether a site id still names the same accesses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteSummary {
    pub id: usize,
    pub function: String,
    /// The source file and line (of the outermost call, for inlined code), when the PTX has line
    /// info.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The site's access instructions, as PTX text.
    pub ptx: Vec<String>,
    /// Per access (in the order of `ptx`), its inlining chain, outermost frame first: where a
    /// patch must put the fence for code inlined from a helper. Empty in journals made before it
    /// was recorded, and left out of comparisons (`ptx` and `line` name the site).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<Vec<SourceLine>>,
    /// The accesses (indices into `ptx`) the site's fence follows: the last of each run of them
    /// (`gpuwmm_ptx::passes::fences::fence_points`). Empty in journals made before: a fence then
    /// followed every access ([`SiteSummary::fenced_accesses`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fence_after: Vec<usize>,
}

impl From<&FenceSite> for SiteSummary {
    fn from(site: &FenceSite) -> SiteSummary {
        SiteSummary {
            id: site.id,
            function: site.function.clone(),
            file: site.source.as_ref().map(|s| s.file.clone()),
            line: site.source.as_ref().map(|s| s.line),
            ptx: site.accesses.iter().map(|a| a.ptx.clone()).collect(),
            frames: site.accesses.iter().map(|a| a.frames.clone()).collect(),
            fence_after: (site.accesses.iter().enumerate())
                .filter(|(_, a)| a.fenced)
                .map(|(i, _)| i)
                .collect(),
        }
    }
}

impl SiteSummary {
    /// The accesses the site's fence follows (indices into `ptx`): `fence_after`, or every
    /// access for a journal made before it was recorded.
    pub fn fenced_accesses(&self) -> Vec<usize> {
        match self.fence_after.is_empty() {
            true => (0..self.ptx.len()).collect(),
            false => self.fence_after.clone(),
        }
    }

    /// How many of the site's accesses write: stores, atomics and reductions.
    pub fn writes(&self) -> usize {
        (self.ptx.iter())
            .filter_map(|p| MemoryAccess::of_opcode(p.split_whitespace().next()?))
            .filter(|a| a.kind != AccessKind::Load)
            .count()
    }

    /// Where the site is and what it accesses, for messages.
    pub fn describe(&self) -> String {
        let place = match (&self.file, self.line) {
            (Some(file), Some(line)) => format!(" at {file}:{line}"),
            _ => String::new(),
        };
        format!("in {}{place} ({})", self.function, self.ptx.join("; "))
    }
}

/// How the app's sites `now` differ from the sites a journal `recorded`, in words (`None` when
/// they are the same). Fences are named by site id, so a journal made before the compiler or the
/// site finder changed would put its fences at other accesses if it were resumed or replayed.
/// The source file's path is left out: it is where the checkout lies, not what the site is.
pub fn changed_sites(recorded: &[SiteSummary], now: &[SiteSummary]) -> Option<String> {
    let same = |was: &SiteSummary, is: &SiteSummary| {
        (was.id, &was.function, was.line, &was.ptx) == (is.id, &is.function, is.line, &is.ptx)
    };
    if let Some((was, is)) = recorded.iter().zip(now).find(|(was, is)| !same(was, is)) {
        return Some(format!(
            "site {} was {}, and is now {}",
            was.id,
            was.describe(),
            is.describe()
        ));
    }
    let moved =
        |(was, is): &(&SiteSummary, &SiteSummary)| was.fenced_accesses() != is.fenced_accesses();
    if let Some((was, is)) = recorded.iter().zip(now).find(moved) {
        return Some(format!(
            "site {}'s fence went after its accesses {:?}, and now goes after {:?}: a fence \
             goes after each run of a line's accesses, where the patch can put it, no longer \
             after each access",
            was.id,
            was.fenced_accesses(),
            is.fenced_accesses()
        ));
    }
    (recorded.len() != now.len()).then(|| {
        format!(
            "the journal has {} sites, the app now has {}",
            recorded.len(),
            now.len()
        )
    })
}

#[cfg(test)]
pub(crate) fn test_target() -> Target {
    serde_json::from_value(serde_json::json!({
        "app": "cbe-dot", "size": "sim", "backend": "sim", "sim_model": "weak",
        "fence_kind": "fence.sc.gpu", "granularity": "source-line",
        "profile": {"chip": "sim", "patch_words": 32, "sequence": "ld", "spread": 2},
        "deadline_ms": 1000, "stress_factor": 10.0
    }))
    .expect("a valid target")
}

#[cfg(test)]
pub(crate) fn test_site(id: usize) -> SiteSummary {
    SiteSummary {
        id,
        function: "k".into(),
        file: Some("k.cu".into()),
        line: Some(10 + id as u32),
        ptx: vec!["st.global.u32 [%rd1], %r1".into()],
        frames: Vec::new(),
        fence_after: vec![0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_labels_read_back() {
        for fences in [
            Fences::AsIs,
            Fences::Sites(vec![]),
            Fences::Sites(vec![0, 2, 5]),
        ] {
            assert_eq!(fences.label().parse::<Fences>(), Ok(fences));
        }
        assert!("0 x".parse::<Fences>().unwrap_err().contains("'x'"));
    }

    #[test]
    fn run_seeds_are_distinct_and_reproducible() {
        let seeds: std::collections::HashSet<u64> = (0..10_000).map(|r| run_seed(1, r)).collect();
        assert_eq!(seeds.len(), 10_000);
        assert_eq!(run_seed(7, 42), run_seed(7, 42));
        assert_ne!(run_seed(7, 42), run_seed(8, 42));
    }

    #[test]
    fn fence_labels() {
        assert_eq!(Fences::AsIs.label(), "as-is");
        assert_eq!(Fences::Sites(vec![]).label(), "none");
        assert_eq!(Fences::Sites(vec![0, 3]).label(), "0 3");
    }

    #[test]
    fn the_same_sites_are_no_change_wherever_the_checkout_lies() {
        let sites: Vec<SiteSummary> = (0..3).map(test_site).collect();
        assert_eq!(changed_sites(&sites, &sites.clone()), None);
        let mut moved_checkout = sites.clone();
        moved_checkout[0].file = Some("/elsewhere/k.cu".into());
        assert_eq!(changed_sites(&sites, &moved_checkout), None);
    }

    /// A journal recorded when a fence followed every access of a site: resuming it where a
    /// line's fence now goes after its last access only would mix two placements in one search.
    /// Sites whose fences stay where they were (one access, or every access a run) still match.
    #[test]
    fn a_site_whose_fence_now_goes_after_fewer_of_its_accesses_is_a_change() {
        let mut old = test_site(0);
        old.ptx.push("ld.global.u32 %r2, [%rd2]".into());
        old.fence_after.clear();
        let mut now = old.clone();
        now.fence_after = vec![1];
        let message = changed_sites(&[old.clone()], &[now.clone()]).unwrap();
        assert!(message.contains("after its accesses [0, 1], and now goes after [1]"));
        now.fence_after = vec![0, 1];
        assert_eq!(changed_sites(&[old.clone()], &[now]), None);
        let single = test_site(1);
        let mut single_old = single.clone();
        single_old.fence_after.clear();
        assert_eq!(changed_sites(&[single_old], &[single]), None);
    }

    #[test]
    fn a_site_that_moved_or_vanished_is_a_change_named_by_its_id() {
        let recorded: Vec<SiteSummary> = (0..3).map(test_site).collect();
        let mut moved = recorded.clone();
        moved[1].line = Some(99);
        let message = changed_sites(&recorded, &moved).unwrap();
        assert!(
            message.starts_with("site 1 was in k at k.cu:11 ("),
            "{message}"
        );
        assert!(
            message.contains("is now in k at k.cu:99 (st.global"),
            "{message}"
        );
        let mut other_access = recorded.clone();
        other_access[2].ptx = vec!["ld.global.u32 %r2, [%rd2]".into()];
        let message = changed_sites(&recorded, &other_access).unwrap();
        assert!(
            message.contains("now in k at k.cu:12 (ld.global.u32"),
            "{message}"
        );
        assert_eq!(
            changed_sites(&recorded, &recorded[..2]).as_deref(),
            Some("the journal has 3 sites, the app now has 2")
        );
    }
}
