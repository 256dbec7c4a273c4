//! Seeded mutation fuzzing of the readers of user input: the litmus-file parser, the `app.toml`
//! manifest reader, the PTX parser and the journal reader (CSV rows and JSON sidecar). Each
//! target takes the repository's own files (or a written journal) as seeds, mutates them a
//! fixed number of times with a seeded generator (byte flips, insertions of bytes that matter to
//! the format, deletions, duplicated and swapped spans, truncation), and requires every input to
//! give a value or an error, never a panic. A panic prints the seed and the input, to be kept as
//! a regression test.
//!
//! Stable Rust only (no cargo-fuzz). `GPUWMM_FUZZ_ITERATIONS` changes the count per target
//! (default 20,000; a few seconds each in a release build); the seed is fixed, so CI runs the same
//! inputs every time.

use gpuwmm::apps::manifest::Manifest;
use gpuwmm::check::journal::deserialize_rows;
use gpuwmm::check::{CheckMeta, Outcome, RunRecord};
use gpuwmm::litmus::file::parse::parse as parse_litmus;
use gpuwmm::ptx::passes::fences::{fence_sites, Granularity};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

const SEED: u64 = 27;

fn iterations() -> usize {
    std::env::var("GPUWMM_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files in `dir` (relative to the repository) whose names end with `suffix`.
fn seeds(dir: &str, suffix: &str) -> Vec<String> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    paths.sort();
    let texts: Vec<String> = paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(!texts.is_empty(), "no seeds in {dir}");
    texts
}

/// Bytes that mean something to one of the formats.
const SPECIAL: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b";",
    b"|",
    b",",
    b"{",
    b"}",
    b"[",
    b"]",
    b"(",
    b")",
    b"\"",
    b"=",
    b"==",
    b"/\\",
    b"\\/",
    b"~",
    b"%r",
    b"P9:",
    b"0x",
    b"-",
    b"99999999999999999999",
    b"4294967296",
    b".loc",
    b".file",
    b"@%p",
    b"exists",
    b"forall",
    b"$",
    b"#",
    b"\0",
    b"\xff",
    b"\xe2\x80",
    b"nan",
    b"-1",
    b"1e309",
];

/// One mutation of `input`.
fn mutate(rng: &mut ChaCha8Rng, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let len = out.len();
        let at = if len == 0 {
            0
        } else {
            rng.random_range(0..=len)
        };
        match rng.random_range(0..7) {
            0 if len > 0 => {
                let i = rng.random_range(0..len);
                out[i] ^= 1 << rng.random_range(0..8);
            }
            1 => {
                let special = SPECIAL[rng.random_range(0..SPECIAL.len())];
                out.splice(at..at, special.iter().copied());
            }
            2 if len > 0 => {
                let end = (at + rng.random_range(1..=64)).min(len);
                out.drain(at.min(end)..end);
            }
            3 if len > 0 => {
                let start = rng.random_range(0..len);
                let end = (start + rng.random_range(1..=128)).min(len);
                let span: Vec<u8> = out[start..end].to_vec();
                out.splice(at..at, span);
            }
            4 => out.truncate(at),
            5 if len > 1 => {
                let a = rng.random_range(0..len);
                let b = rng.random_range(0..len);
                out.swap(a, b);
            }
            _ => out.insert(at, rng.random()),
        }
    }
    out
}

/// Runs `target` on `iterations()` mutations of the seeds; panics are collected and reported.
fn fuzz(name: &str, seeds: &[String], target: impl Fn(&str)) {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut panics = Vec::new();
    for seed in seeds {
        if catch_unwind(AssertUnwindSafe(|| target(seed))).is_err() {
            panics.push(seed.clone());
        }
    }
    for _ in 0..iterations() {
        let seed = seeds[rng.random_range(0..seeds.len())].as_bytes();
        let bytes = mutate(&mut rng, seed);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if catch_unwind(AssertUnwindSafe(|| target(&text))).is_err() {
            panics.push(text);
        }
    }
    assert!(
        panics.is_empty(),
        "{name}: {} input(s) panicked (seed {SEED}); the first:\n{:?}",
        panics.len(),
        panics[0]
    );
}

#[test]
fn the_litmus_file_parser_never_panics() {
    let seeds = seeds("tests/litmus", ".litmus");
    fuzz("litmus", &seeds, |text| {
        let _ = parse_litmus(Path::new("fuzz.litmus"), text);
    });
}

#[test]
fn the_manifest_reader_never_panics() {
    let mut seeds = Vec::new();
    for app in [
        "sdk-red",
        "cub-scan",
        "ct-octree",
        "tpo-tm",
        "ls-bh",
        "cccl-scan",
    ] {
        seeds.extend(std::fs::read_to_string(
            repo().join("apps").join(app).join("app.toml"),
        ));
    }
    for fixture in ["handoff-block", "handoff-grid", "broken"] {
        let path = repo()
            .join("tests/fixtures/apps")
            .join(fixture)
            .join("app.toml");
        seeds.push(std::fs::read_to_string(path).unwrap());
    }
    fuzz("manifest", &seeds, |text| {
        let _ = Manifest::parse(Path::new("fuzz/app.toml"), text);
    });
}

#[test]
fn the_ptx_parser_never_panics() {
    let seeds: Vec<String> = seeds("tests/fixtures/ptx", ".ptx")
        .into_iter()
        .filter(|t| t.len() < 64 * 1024)
        .collect();
    fuzz("ptx", &seeds, |text| {
        if let Ok(module) = gpuwmm::ptx::parse(text) {
            let _ = fence_sites(&module, Granularity::SourceLine);
            let _ = gpuwmm::ptx::print(&module);
        }
    });
}

/// A check journal of three runs and its sidecar, as the tool writes them.
fn journal_seeds() -> (String, String) {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for (run, outcome) in [(0, Outcome::Pass), (1, Outcome::Fail), (2, Outcome::Crash)] {
        writer
            .serialize(RunRecord {
                run,
                seed: 1000 + run,
                env: "sys-str+".parse().unwrap(),
                stress_blocks: "3 5".into(),
                stress_iterations: 64,
                outcome,
                reason: if run == 0 {
                    String::new()
                } else {
                    "fail, \"quoted\"".into()
                },
                kernel_us: 12.5,
                wall_ms: 1.25,
                races: None,
            })
            .unwrap();
    }
    let rows = String::from_utf8(writer.into_inner().unwrap()).unwrap();
    // A real sidecar, from a one-run check on the simulator (needs NVRTC; `{}` without it).
    let dir = tempfile::tempdir().unwrap();
    let made = gpuwmm::toolchain::tools_for_tests().is_some()
        && std::process::Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
            .args(["check", "cbe-dot", "--backend", "sim", "--runs", "1"])
            .args(["--journal", "j.csv"])
            .current_dir(dir.path())
            .output()
            .is_ok_and(|o| o.status.success());
    let sidecar = match made {
        true => std::fs::read_to_string(dir.path().join("j.json")).unwrap(),
        false => "{}".to_string(),
    };
    if made {
        serde_json::from_str::<CheckMeta>(&sidecar).expect("the seed sidecar reads back");
    }
    (rows, sidecar)
}

#[test]
fn the_journal_reader_never_panics() {
    let (rows, sidecar) = journal_seeds();
    assert_eq!(
        deserialize_rows::<RunRecord, _>(&mut csv::Reader::from_reader(rows.as_bytes()))
            .unwrap()
            .len(),
        3,
        "the seed journal reads back"
    );
    fuzz("journal rows", &[rows], |text| {
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let _ = deserialize_rows::<RunRecord, _>(&mut reader);
    });
    fuzz("journal sidecar", &[sidecar], |text| {
        let _ = serde_json::from_str::<CheckMeta>(text);
    });
}
