//! `gpuwmm tune` end to end on the simulator, with budgets small enough for CI: the files it
//! writes, honest fallbacks where the simulator shows no structure, resume, and refusals.

use gpuwmm::profile::StressProfile;
use gpuwmm::tune::TuneRow;
use std::path::Path;
use std::process::Output;

mod common;
use common::cli::{gpuwmm, words, SMALL_TUNE};

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// [`SMALL_TUNE`] with seed 7, then `extra`.
fn small(extra: &[&str]) -> Vec<String> {
    let seeded = SMALL_TUNE.iter().chain(&["--seed=7"]);
    seeded.chain(extra).map(|s| s.to_string()).collect()
}

fn run(args: &[String], dir: &Path) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    gpuwmm(&args, dir)
}

/// The small tuning and `extra`, in `dir`, into `t/` with its profile at `profile`; it must
/// succeed. Returns its output and the profile.
fn tune_into_t(dir: &Path, profile: &str, extra: &[&str]) -> (Output, StressProfile) {
    let into = ["--out", "t", "--profile-out", profile];
    let args = small(&[&into[..], extra].concat());
    let out = run(&args, dir);
    assert!(out.status.success(), "{}", text(&out));
    (out, StressProfile::load(&dir.join(profile)).unwrap())
}

#[test]
fn tune_on_the_simulator_writes_a_labelled_profile_journal_summary_and_charts() {
    let dir = tempfile::tempdir().unwrap();
    let (out, profile) = tune_into_t(dir.path(), "sim.toml", &["--max-threads", "128"]);
    let report = text(&out);
    assert!(report.contains("simulator"), "{report}");

    assert!(profile.is_tuned());
    assert_eq!(profile.chip, "sim");
    let device = profile.provenance.device.clone().unwrap();
    assert!(device.contains("not hardware"), "{device}");
    assert!(profile.provenance.note.unwrap().contains("seed 7"));

    let rows: Vec<TuneRow> =
        gpuwmm::check::journal::read_rows(&dir.path().join("t/tune.csv")).unwrap();
    let stage = |s: u8| rows.iter().filter(|r| r.stage == s).count();
    assert_eq!(stage(1), 3 * 2 * 4);
    assert_eq!(stage(3), 3 * 2 * 2);
    assert!(rows.iter().all(|r| r.executions == 6 && r.weak <= 6));
    // MP and SB show weak behaviour on the simulator; LB never does (README).
    let weak = |t: &str| {
        rows.iter()
            .filter(|r| r.test.name() == t)
            .map(|r| r.weak)
            .sum::<u64>()
    };
    // seed 7 measured 41 (SB) and 13 (MP) weak executions over the stage rows
    assert!((30..=52).contains(&weak("sb")), "sb {}", weak("sb"));
    assert!((8..=18).contains(&weak("mp")), "mp {}", weak("mp"));
    assert_eq!(weak("lb"), 0);

    let summary = std::fs::read_to_string(dir.path().join("t/summary.md")).unwrap();
    assert!(
        summary.contains("| critical patch size (words) |"),
        "{summary}"
    );
    assert!(summary.contains("simulator"));
    for chart in ["patches.svg", "sequences.svg", "spread.svg"] {
        let svg = std::fs::read_to_string(dir.path().join("t").join(chart)).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("not hardware"),
            "{chart}"
        );
    }
}

#[test]
fn an_interrupted_tuning_resumes_and_refuses_other_budgets() {
    let dir = tempfile::tempdir().unwrap();
    let first = run(
        &small(&["--out", "t", "--profile-out", "p.toml"]),
        dir.path(),
    );
    assert!(first.status.success(), "{}", text(&first));
    let journal = dir.path().join("t/tune.csv");
    // Cut the journal back to its first five cells, as a kill would leave it.
    let full = std::fs::read_to_string(&journal).unwrap();
    let kept: Vec<&str> = full.lines().take(6).collect();
    std::fs::write(&journal, kept.join("\n") + "\n").unwrap();

    let refused = |args: &[&str], says: &str| {
        let out = run(&small(args), dir.path());
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(says), "{}", text(&out));
    };
    refused(
        &["--out", "t", "--profile-out", "p.toml"],
        "t/tune.csv exists",
    );
    // A new tuning may not replace another's profile without --force.
    refused(&["--out", "t2", "--profile-out", "p.toml"], "p.toml exists");
    // QA: a folder as --profile-out failed only after the whole tuning ("Is a directory").
    std::fs::create_dir(dir.path().join("folder")).unwrap();
    let into_folder = words("--out t3 --profile-out folder --force");
    refused(&into_folder, "folder is a folder");
    assert!(
        !dir.path().join("t3/tune.csv").exists(),
        "refused before tuning"
    );

    let resumed = run(
        &small(&words("--out t --profile-out p.toml --resume --force")),
        dir.path(),
    );
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert!(text(&resumed).contains("5 configurations recorded"));
    assert_eq!(
        std::fs::read_to_string(&journal).unwrap(),
        full,
        "same cells, same seeds, same counts"
    );

    let mut other_budgets = small(&["--out", "t", "--profile-out", "q.toml", "--resume"]);
    let at = other_budgets
        .iter()
        .position(|a| a == "--executions")
        .unwrap();
    other_budgets[at + 1] = "7".into();
    let other = run(&other_budgets, dir.path());
    assert_eq!(other.status.code(), Some(2), "{}", text(&other));
    assert!(text(&other).contains("records another tuning"));
}

#[test]
fn given_values_skip_their_stages_and_bad_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let given = ["--patch-words", "2", "--sequence", "ld st2"];
    let (_, profile) = tune_into_t(dir.path(), "p.toml", &given);
    assert_eq!(
        (profile.patch_words, profile.sequence.as_str()),
        (2, "ld st st")
    );
    let rows: Vec<TuneRow> =
        gpuwmm::check::journal::read_rows(&dir.path().join("t/tune.csv")).unwrap();
    assert!(rows.iter().all(|r| r.stage == 3 && r.patch_words == 2));

    let bad = run(
        &small(&["--patch-words", "2", "--sequence", "ld xx"]),
        dir.path(),
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("--sequence 'ld xx'"), "{}", text(&bad));
    let alone = run(&small(&["--sequence", "ld"]), dir.path());
    assert_eq!(
        alone.status.code(),
        Some(2),
        "--sequence needs --patch-words"
    );
}

/// The folders under `dir/results/tune`, sorted by name.
fn tune_folders(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("results/tune"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Bug: a Slurm tuning job killed after it wrote its profile, and requeued, resumed with
/// `--resume` and stopped at "p.toml exists": the profile it had written itself was refused.
#[test]
fn a_resumed_tuning_writes_its_own_profile_again_and_refuses_another() {
    let dir = tempfile::tempdir().unwrap();
    let (_, written) = tune_into_t(dir.path(), "p.toml", &[]);
    let profile = dir.path().join("p.toml");
    let text_of = |p: &Path| std::fs::read_to_string(p).unwrap();
    let first = text_of(&profile);
    let (resumed, again) = tune_into_t(dir.path(), "p.toml", &["--resume"]);
    assert!(
        text(&resumed).contains("configurations recorded"),
        "{}",
        text(&resumed)
    );
    assert_eq!(again, written);
    assert_eq!(
        text_of(&profile),
        first,
        "the same tuning writes the same profile"
    );
    // A profile that another tuning wrote (another start) is still refused.
    std::fs::write(&profile, first.replace("date = \"", "date = \"1999")).unwrap();
    let other = run(
        &small(&words("--out t --profile-out p.toml --resume")),
        dir.path(),
    );
    assert_eq!(other.status.code(), Some(2), "{}", text(&other));
    assert!(text(&other).contains("p.toml exists"), "{}", text(&other));
}

#[test]
fn a_repeated_tuning_writes_a_new_folder_and_resume_finds_the_unfinished_one() {
    let dir = tempfile::tempdir().unwrap();
    let nothing = run(&small(&["--resume", "--profile-out", "p.toml"]), dir.path());
    assert_eq!(nothing.status.code(), Some(2), "{}", text(&nothing));
    assert!(
        text(&nothing).contains("nothing to resume"),
        "{}",
        text(&nothing)
    );
    for _ in 0..2 {
        let out = run(&small(&["--profile-out", "p.toml", "--force"]), dir.path());
        assert!(out.status.success(), "{}", text(&out));
    }
    let names = tune_folders(dir.path());
    assert_eq!(names.len(), 2, "{names:?}");
    // `sim-<date>` and `sim-<date>-2` (unless the date changed in between).
    assert!(names[0].starts_with("sim-") && names[0].len() == "sim-2025-01-01".len());
    if names[1].starts_with(&names[0]) {
        assert_eq!(names[1], format!("{}-2", names[0]));
    }
    // The older one is cut back as a kill would leave it (no summary, five cells): --resume
    // without --out finds it, not the newer finished one, and completes it.
    let older = dir.path().join("results/tune").join(&names[0]);
    let journal = older.join("tune.csv");
    let full = std::fs::read_to_string(&journal).unwrap();
    let kept: Vec<&str> = full.lines().take(6).collect();
    std::fs::write(&journal, kept.join("\n") + "\n").unwrap();
    std::fs::remove_file(older.join("summary.md")).unwrap();
    let resumed = run(
        &small(&["--resume", "--profile-out", "p.toml", "--force"]),
        dir.path(),
    );
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert!(
        text(&resumed).contains(&format!("continuing results/tune/{} ", names[0])),
        "{}",
        text(&resumed)
    );
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), full);
    assert!(older.join("summary.md").is_file());
    assert_eq!(tune_folders(dir.path()), names);
}
