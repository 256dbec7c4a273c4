//! Every harness output assembles with ptxas for sm_70, sm_80 and sm_90, and the stress loops
//! keep exactly their accesses in SASS.
//!
//! ptxas is found through `GPUWMM_PTXAS` (falling back to the wheel-installed path used on the
//! development machine), nvdisasm through `GPUWMM_NVDISASM`. Absent tools skip the test with a
//! printed `skipped:` line, unless `GPUWMM_REQUIRE_TOOLS=1`, which makes their absence a failure.

use gpuwmm::ptx::passes::harness::{harness, HarnessOptions};
use gpuwmm::ptx::passes::stress::{parse_sequence, sequence_to_string, StressStrategy};
use gpuwmm::ptx::{parse, print, Module};
use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURES: [(&str, &str); 6] = [
    ("harness_small.ptx", "small"),
    ("cbe_dot.ptx", "dot"),
    ("cbe_ht.ptx", "ht_insert"),
    ("sdk_red.ptx", "reduce"),
    ("shapes.ptx", "shapes"),
    ("dot_inlined.ptx", "dot"),
];

const ARCHS: [&str; 3] = ["sm_70", "sm_80", "sm_90"];

/// A tool from `env`, else `fallback`; `None` (after printing `skipped:`) when neither exists.
fn tool(env: &str, fallback: &str) -> Option<PathBuf> {
    let path = std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(fallback));
    if path.is_file() {
        return Some(path);
    }
    let required = std::env::var("GPUWMM_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{} not found (set {env}), but GPUWMM_REQUIRE_TOOLS=1",
        path.display()
    );
    println!("skipped: {} not found (set {env})", path.display());
    None
}

fn ptxas() -> Option<PathBuf> {
    tool(
        "GPUWMM_PTXAS",
        "/tmp/cudatools/t/nvidia/cuda_nvcc/bin/ptxas",
    )
}

fn nvdisasm() -> Option<PathBuf> {
    tool(
        "GPUWMM_NVDISASM",
        "/tmp/cudatools/t/nvidia/cu13/bin/nvdisasm",
    )
}

fn fixture(name: &str) -> Module {
    let path = format!("{}/tests/fixtures/ptx/{name}", env!("CARGO_MANIFEST_DIR"));
    parse(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn sys(sigma: &str) -> StressStrategy {
    StressStrategy::Sys {
        sequence: parse_sequence(sigma).unwrap(),
    }
}

/// Assembles `ptx` for `arch` into `cubin`; the error is ptxas's output.
fn assemble(ptxas: &Path, ptx: &str, arch: &str, dir: &Path, cubin: &Path) -> Result<(), String> {
    let input = dir.join("in.ptx");
    std::fs::write(&input, ptx).unwrap();
    let output = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-o")
        .arg(cubin)
        .arg(&input)
        .output()
        .unwrap();
    match output.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&output.stderr).into_owned()),
    }
}

#[test]
fn every_harness_output_assembles_for_every_arch() {
    let Some(ptxas) = ptxas() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cubin = dir.path().join("out.cubin");
    let mut failures = Vec::new();
    for (file, kernel) in FIXTURES {
        let module = fixture(file);
        for stress in [
            StressStrategy::None,
            sys("ld st"),
            sys("st2 ld3"),
            StressStrategy::Rand,
            StressStrategy::Cache,
        ] {
            let ptx = print(
                &harness(
                    &module,
                    kernel,
                    &HarnessOptions {
                        stress: stress.clone(),
                    },
                )
                .unwrap(),
            );
            for arch in ARCHS {
                if let Err(log) = assemble(&ptxas, &ptx, arch, dir.path(), &cubin) {
                    failures.push(format!("{file} {stress} {arch}:\n{log}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// SASS of the harnessed `shapes` kernel (it has no volatile accesses of its own).
fn sass(ptxas: &Path, nvdisasm: &Path, stress: StressStrategy, arch: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let cubin = dir.path().join("out.cubin");
    let ptx =
        print(&harness(&fixture("shapes.ptx"), "shapes", &HarnessOptions { stress }).unwrap());
    assemble(ptxas, &ptx, arch, dir.path(), &cubin).unwrap();
    let output = Command::new(nvdisasm).arg(&cubin).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The volatile (`.STRONG.SYS`) global accesses in SASS, in program order, as `ld`/`st`.
fn strong_accesses(sass: &str) -> String {
    let ops: Vec<&str> = sass
        .lines()
        .filter(|l| l.contains(".STRONG.SYS"))
        .filter_map(|l| match (l.contains("LDG."), l.contains("STG.")) {
            (true, false) => Some("ld"),
            (false, true) => Some("st"),
            _ => None,
        })
        .collect();
    ops.join(" ")
}

#[test]
fn stress_accesses_survive_in_sass() {
    let (Some(ptxas), Some(nvdisasm)) = (ptxas(), nvdisasm()) else {
        return;
    };
    for arch in ["sm_80", "sm_90"] {
        for sigma in [
            "ld st",
            "st",
            "ld",
            "ld3 st ld",
            "st2 ld2",
            "ld st2 ld st",
            "ld5",
        ] {
            let expected = sequence_to_string(&parse_sequence(sigma).unwrap());
            let code = sass(&ptxas, &nvdisasm, sys(sigma), arch);
            assert_eq!(
                strong_accesses(&code),
                expected,
                "{arch} σ = {sigma}\n{code}"
            );
        }
        for (stress, expected) in [
            (StressStrategy::Rand, "ld st"),
            (StressStrategy::Cache, "ld st"),
            (StressStrategy::None, ""),
        ] {
            let code = sass(&ptxas, &nvdisasm, stress.clone(), arch);
            assert_eq!(strong_accesses(&code), expected, "{arch} {stress}\n{code}");
        }
    }
}
