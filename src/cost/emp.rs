//! Where `emp`'s fences come from: the result of a hardening.
//!
//! A harden result is read from its journal (`x.csv`, whose sidecar `x.json` holds the result
//! once the hardening ended), from that sidecar, or from what `harden --json` printed. `--emp
//! auto` takes the newest finished, stable result for the app (or its `-nf` variant) on the same
//! backend from a folder of harden journals.

use super::variant::EmpFences;
use super::CostError;
use crate::check::journal::meta_path;
use crate::check::{BackendKind, Target};
use crate::ptx::passes::fences::{FenceKind, Granularity};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The arguments of the `gpuwmm harden` that `--emp auto` runs for app `name` when it finds no
/// hardening: everything of `target` that changes what is hardened (an `--app-dir`, the size,
/// the fence kind and granularity, the stress profile file, the stress factor, the deadline, the
/// simulator's model and budget) and the seed, so it hardens the app that is measured.
pub fn harden_args(target: &Target, profile: Option<&Path>, seed: u64, name: &str) -> Vec<String> {
    let granularity = target.granularity.name();
    let mut args: Vec<String> = [
        "harden",
        name,
        "--backend",
        target.backend.name(),
        "--sim-model",
        target.sim_model.name(),
        "--size",
        target.size.name(),
        "--fence-kind",
        &target.fence_kind.to_string(),
        "--granularity",
        granularity,
        "--stress-factor",
        &target.stress_factor.to_string(),
        "--deadline",
        &format!("{}ms", target.deadline_ms),
        "--seed",
        &seed.to_string(),
    ]
    .map(str::to_string)
    .to_vec();
    let paths = [
        ("--app-dir", target.app_dir.as_deref()),
        ("--profile", profile),
    ];
    for (option, path) in paths {
        if let Some(path) = path {
            args.push(option.to_string());
            args.push(path.display().to_string());
        }
    }
    if let Some(budget) = target.sim_budget {
        args.extend(["--sim-budget".to_string(), budget.to_string()]);
    }
    args
}

/// What `cost` needs of a hardening.
#[derive(Debug, Clone, PartialEq)]
pub struct HardenResult {
    /// The app hardened (for an app with fences of its own, usually its `-nf` variant).
    pub app: String,
    pub backend: BackendKind,
    pub stable: bool,
    pub fence_kind: FenceKind,
    pub fences: EmpFences,
}

/// The parts of harden's result document read here.
#[derive(Debug, Deserialize)]
struct Document {
    app: String,
    backend: BackendKind,
    stable: bool,
    fence_kind: FenceKind,
    #[serde(default)]
    granularity: Option<Granularity>,
    fences: Vec<Fence>,
}

#[derive(Debug, Deserialize)]
struct Fence {
    site: usize,
    kind: FenceKind,
    /// The site's accesses (absent from documents written before harden recorded them).
    #[serde(default)]
    ptx: Option<Vec<String>>,
}

/// A harden sidecar: the result plus the target it was found for, and every candidate site.
#[derive(Debug, Deserialize)]
struct Sidecar {
    target: SidecarTarget,
    #[serde(default)]
    sites: Vec<SidecarSite>,
    result: Option<Document>,
}

#[derive(Debug, Deserialize)]
struct SidecarSite {
    id: usize,
    ptx: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct SidecarTarget {
    granularity: Granularity,
}

fn bad(path: &Path, message: impl Into<String>) -> CostError {
    CostError::EmpResult {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Reads a harden result from a journal, its sidecar or `harden --json` output.
pub fn read_harden_result(path: &Path) -> Result<HardenResult, CostError> {
    let json_path = match path.extension().and_then(|e| e.to_str()) {
        Some("csv") => meta_path(path),
        _ => path.to_path_buf(),
    };
    let text = std::fs::read_to_string(&json_path)
        .map_err(|e| bad(&json_path, format!("cannot read: {e}")))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| bad(&json_path, format!("line {}: not JSON: {e}", e.line())))?;
    let (document, granularity, mut accesses) = if value.get("target").is_some() {
        let sidecar: Sidecar = serde_json::from_value(value)
            .map_err(|e| bad(&json_path, format!("not a harden journal's sidecar: {e}")))?;
        let document = sidecar.result.ok_or_else(|| {
            bad(
                &json_path,
                "the hardening has not finished (no result yet): finish it with \
                 `gpuwmm harden … --resume`",
            )
        })?;
        let sites = sidecar.sites.into_iter().map(|s| (s.id, s.ptx)).collect();
        (document, sidecar.target.granularity, sites)
    } else {
        let document: Document = serde_json::from_value(value)
            .map_err(|e| bad(&json_path, format!("not a harden result: {e}")))?;
        let granularity = document.granularity.unwrap_or_default();
        (document, granularity, BTreeMap::new())
    };
    for fence in &document.fences {
        if let Some(ptx) = &fence.ptx {
            accesses.insert(fence.site, ptx.clone());
        }
    }
    let fences: BTreeMap<usize, FenceKind> =
        document.fences.iter().map(|f| (f.site, f.kind)).collect();
    accesses.retain(|id, _| fences.contains_key(id));
    Ok(HardenResult {
        app: document.app,
        backend: document.backend,
        stable: document.stable,
        fence_kind: document.fence_kind,
        fences: EmpFences {
            granularity,
            fences,
            accesses,
            source: path.display().to_string(),
        },
    })
}

/// The newest finished, stable harden result in `dir` for one of `apps` on `backend`, by the
/// journal's modification time.
pub fn newest_harden_result(
    dir: &Path,
    apps: &[String],
    backend: BackendKind,
) -> Option<(PathBuf, HardenResult)> {
    let mut journals: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "csv"))
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .collect();
    journals.sort();
    journals.into_iter().rev().find_map(|(_, path)| {
        let result = read_harden_result(&path).ok()?;
        let fits = result.stable && result.backend == backend && apps.contains(&result.app);
        fits.then_some((path, result))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_emp_auto_passes_app_dir_size_profile_fence_kind_and_granularity_to_harden() {
        let mut target = crate::check::spec::test_target();
        target.app_dir = Some(PathBuf::from("/apps/mine"));
        target.size = crate::apps::Size::Gpu;
        target.fence_kind = FenceKind::MembarCta;
        target.granularity = Granularity::Instruction;
        target.sim_budget = Some(5000);
        let args = harden_args(&target, Some(Path::new("p.toml")), 7, "mine");
        let line = args.join(" ");
        assert!(line.starts_with("harden mine --backend sim"), "{line}");
        for expected in [
            "--app-dir /apps/mine",
            "--size gpu",
            "--profile p.toml",
            "--fence-kind membar.cta",
            "--granularity instruction",
            "--seed 7",
            "--sim-budget 5000",
        ] {
            assert!(line.contains(expected), "{expected} not in {line}");
        }
    }

    /// An empty harden journal `h.csv` in `dir` with `sidecar` as its `h.json`.
    fn journal_with_sidecar(dir: &Path, sidecar: &str) -> PathBuf {
        let journal = dir.join("h.csv");
        std::fs::write(&journal, "").unwrap();
        std::fs::write(dir.join("h.json"), sidecar).unwrap();
        journal
    }

    #[test]
    fn a_json_document_names_its_fences_and_defaults_to_line_sites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.json");
        std::fs::write(
            &path,
            r#"{"app": "cbe-dot", "backend": "sim", "stable": true, "fence_kind": "fence.sc.gpu",
                "fences": [{"site": 0, "kind": "fence.acq_rel.gpu"}, {"site": 4, "kind": "fence.sc.gpu"}],
                "rounds": 2}"#,
        )
        .unwrap();
        let r = read_harden_result(&path).unwrap();
        assert_eq!(r.app, "cbe-dot");
        assert_eq!(r.fences.granularity, Granularity::SourceLine);
        assert_eq!(
            r.fences.fences,
            BTreeMap::from([(0, FenceKind::AcqRelGpu), (4, FenceKind::ScGpu)])
        );
    }

    #[test]
    fn the_accesses_of_the_chosen_sites_come_from_the_sidecar_or_the_document() {
        let dir = tempfile::tempdir().unwrap();
        let journal = journal_with_sidecar(
            dir.path(),
            r#"{"target": {"granularity": "instruction"},
                "sites": [{"id": 0, "function": "k", "ptx": ["st.global.u32 [%rd1], 1"]},
                          {"id": 1, "function": "k", "ptx": ["ld.global.u32 %r1, [%rd2]"]}],
                "result": {"app": "cbe-dot", "backend": "sim", "stable": true,
                           "fence_kind": "fence.sc.gpu",
                           "fences": [{"site": 1, "kind": "fence.sc.gpu"}]}}"#,
        );
        let from_sidecar = read_harden_result(&journal).unwrap().fences.accesses;
        let only_site_1 = BTreeMap::from([(1, vec!["ld.global.u32 %r1, [%rd2]".to_string()])]);
        assert_eq!(from_sidecar, only_site_1);
        let document = dir.path().join("d.json");
        std::fs::write(
            &document,
            r#"{"app": "cbe-dot", "backend": "sim", "stable": true, "fence_kind": "fence.sc.gpu",
                "fences": [{"site": 1, "kind": "fence.sc.gpu",
                            "ptx": ["ld.global.u32 %r1, [%rd2]"]}]}"#,
        )
        .unwrap();
        assert_eq!(
            read_harden_result(&document).unwrap().fences.accesses,
            only_site_1
        );
    }

    #[test]
    fn an_unfinished_hardening_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let journal = journal_with_sidecar(
            dir.path(),
            r#"{"target": {"granularity": "instruction"}, "seed": 1}"#,
        );
        let e = read_harden_result(&journal).unwrap_err().to_string();
        assert!(
            e.contains("has not finished") && e.contains("h.json"),
            "{e}"
        );
        assert_eq!(
            newest_harden_result(dir.path(), &["x".into()], BackendKind::Sim),
            None
        );
    }

    #[test]
    fn malformed_json_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        std::fs::write(&path, "{\n\"app\": ,\n}").unwrap();
        let e = read_harden_result(&path).unwrap_err().to_string();
        assert!(e.contains("bad.json") && e.contains("line 2"), "{e}");
    }
}
