//! The PTX model (`litmus model`) and the generated families (`litmus generate`) end to end:
//! the model agrees with every published verdict of `../shared/litmus/ptx` it can express; the
//! generator's expected.csv is the model's; a fixed sample of generated tests run on the
//! simulator never reaches a state the model forbids; files with proxy aliases are refused one
//! by one. Run results here are simulator results.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::cli::{gpuwmm, gpuwmm_in_repo, ok};

/// Generated tests in the simulator sample: every `SAMPLE_STEP`-th row of expected.csv.
const SAMPLE_STEP: usize = 11;
/// Executions of each sampled test.
const SAMPLE_EXECUTIONS: &str = "10000";

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn suite() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/litmus/ptx");
    if dir.join("expected.csv").is_file() {
        Some(dir)
    } else {
        gpuwmm::toolchain::report_test_skip(&format!("no litmus suite at {}", dir.display()));
        None
    }
}

/// The summary line of `litmus model TESTS --expect CSV`.
fn model_summary(tests: &Path, csv: &Path) -> String {
    let out = gpuwmm_in_repo(&[
        "litmus",
        "model",
        tests.to_str().unwrap(),
        "--expect",
        csv.to_str().unwrap(),
        "--quiet",
    ]);
    let text = ok(&out);
    let summary = text.lines().find(|l| l.contains(" tests: agree "));
    summary
        .unwrap_or_else(|| panic!("no summary line in\n{text}"))
        .to_string()
}

#[test]
fn model_agrees_with_every_expressible_shared_verdict() {
    let suite = common::or_skip!(suite());
    let summary = model_summary(&suite.join("tests"), &suite.join("expected.csv"));
    assert!(summary.contains("DISAGREE 0"), "{summary}");
    assert!(!summary.contains("sc_reachable differs"), "{summary}");
    // Every test is expressed, those on two GPUs included.
    assert!(summary.contains("not modelled 0"), "{summary}");
    let agree: usize = summary
        .split("agree ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.parse().ok())
        .expect("an agreement count");
    assert!(agree >= 96, "{summary}");
}

/// The project's own litmus files (`tests/litmus/`): their verdicts, written from the PTX
/// axioms, are the model's too.
#[test]
fn model_agrees_with_every_verdict_of_the_projects_own_files() {
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/litmus");
    let summary = model_summary(&own, &own.join("expected.csv"));
    assert_eq!(summary, "88 tests: agree 88, DISAGREE 0, not modelled 0");
}

/// Writes the families into a fresh folder, `gen`.
fn generated() -> tempfile::TempDir {
    generated_with(&[])
}

/// Writes the families, generated with `options`, into a fresh folder, `gen`.
fn generated_with(options: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["litmus", "generate", "--out", "gen"];
    args.extend(options);
    let out = gpuwmm(&args, dir.path());
    let text = ok(&out);
    assert!(text.contains(" tests in "), "{text}");
    dir
}

fn csv_tests(csv: &Path) -> Vec<String> {
    let mut reader = csv::Reader::from_path(csv).unwrap();
    reader
        .records()
        .map(|r| r.unwrap().get(0).unwrap().to_string())
        .collect()
}

#[test]
fn generated_expected_csv_is_the_models_and_the_same_on_every_run() {
    let (a, b) = (generated(), generated());
    let csv_a = std::fs::read_to_string(a.path().join("gen/expected.csv")).unwrap();
    let csv_b = std::fs::read_to_string(b.path().join("gen/expected.csv")).unwrap();
    assert_eq!(csv_a, csv_b);
    assert!(csv_tests(&a.path().join("gen/expected.csv")).len() >= 5000);
    let out = gpuwmm(
        &[
            "litmus",
            "model",
            "gen",
            "--expect",
            "gen/expected.csv",
            "--quiet",
        ],
        a.path(),
    );
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        &text[text.len().saturating_sub(2000)..]
    );
    assert!(
        text.contains("DISAGREE 0, not modelled 0"),
        "{}",
        &text[text.len() - 300..]
    );
}

/// Simulator against model on a fixed sample of the generated tests: no state the model
/// forbids may ever show. Prints how many weak-only allowed states the simulator reached.
#[test]
fn generated_sample_on_the_simulator_reaches_no_forbidden_state() {
    simulator_sample_reaches_no_forbidden_state(&generated(), 500);
}

/// The same for the families with their threads on two GPUs, where gpu-scope orderings no
/// longer reach every thread.
#[test]
fn generated_sample_across_gpus_on_the_simulator_reaches_no_forbidden_state() {
    let dir = generated_with(&["--across-gpus"]);
    simulator_sample_reaches_no_forbidden_state(&dir, 300);
}

/// Runs every `SAMPLE_STEP`-th test of `dir/gen` (at least `least` of them) on the simulator
/// against the model's verdicts: 0 UNSOUND, every test comparable.
fn simulator_sample_reaches_no_forbidden_state(dir: &tempfile::TempDir, least: usize) {
    let rows = csv_tests(&dir.path().join("gen/expected.csv"));
    let sample: Vec<String> = rows
        .iter()
        .step_by(SAMPLE_STEP)
        .map(|t| format!("gen/{t}"))
        .collect();
    assert!(sample.len() >= least, "{} sampled", sample.len());
    let mut args = vec![
        "litmus",
        "run",
        "--backend",
        "sim",
        "--seed",
        "26",
        "--executions",
        SAMPLE_EXECUTIONS,
    ];
    args.extend(["--expect", "gen/expected.csv"]);
    args.extend(sample.iter().map(String::as_str));
    let out = gpuwmm(&args, dir.path());
    let text = stdout(&out);
    let summary = text
        .lines()
        .rev()
        .find(|l| l.contains(" tests: ok "))
        .unwrap_or("no summary");
    eprintln!("simulator sample: {summary}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{summary}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(summary.contains("UNSOUND 0"), "{summary}");
    assert!(summary.contains("not comparable 0"), "{summary}");
}

const ALIASED: &str = "PTX alias\n{\nx=0;\ny @ texture aliases x;\n}\n P0@cta 0,gpu 0 ;\n st.weak x, 1 ;\nexists (x == 1)\n";
const MP: &str = "PTX MP\n{ x=0; y=0; }\n P0@cta 0,gpu 0 | P1@cta 1,gpu 0 ;\n st.weak x, 1 | ld.acquire.gpu r0, y ;\n st.release.gpu y, 1 | ld.weak r1, x ;\nexists (P1:r0 == 1 /\\ P1:r1 == 0)\n";

#[test]
fn proxy_alias_line_is_refused_per_test_and_the_others_still_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("alias.litmus"), ALIASED).unwrap();
    std::fs::write(dir.path().join("mp.litmus"), MP).unwrap();
    let run = gpuwmm(
        &[
            "litmus",
            "run",
            ".",
            "--backend",
            "sim",
            "--executions",
            "50",
        ],
        dir.path(),
    );
    let text = ok(&run);
    assert!(
        text.contains("alias.litmus:4: `y @ texture aliases x` is not supported: proxy aliases"),
        "{text}"
    );
    assert!(text.contains("Test MP Allowed"), "{text}");
    let model = gpuwmm(&["litmus", "model", "."], dir.path());
    let text = stdout(&model);
    assert_eq!(model.status.code(), Some(0), "{text}");
    assert!(
        text.contains("proxy aliases") && text.contains("Test MP Allowed"),
        "{text}"
    );
}

#[test]
fn a_malformed_expected_csv_is_bad_input_and_a_disagreement_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mp.litmus"), MP).unwrap();
    // `litmus model mp.litmus` against an expected.csv with one row for it, `mp.litmus,<row>`.
    let model_against = |name: &str, row: &str| {
        let csv = format!("test,expected,sc_reachable\nmp.litmus,{row}\n");
        std::fs::write(dir.path().join(name), csv).unwrap();
        gpuwmm(
            &["litmus", "model", "mp.litmus", "--expect", name],
            dir.path(),
        )
    };
    let out = model_against("bad.csv", "maybe,no");
    common::cli::assert_bad_input(&out, "bad.csv:2");
    let out = model_against("wrong.csv", "allowed,no");
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("DISAGREES"));
    let out = model_against("right.csv", "forbidden,no");
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// A test past `--max-candidates` is refused by itself, naming the option; within the default
/// the same exchange-loop lock is modelled (the model once ran out of memory on it).
#[test]
fn a_test_past_max_candidates_is_refused_naming_the_option() {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/litmus/Lock+exch-loop+acquire-release-cross-cta.litmus");
    let lock = lock.to_str().unwrap();
    let small = gpuwmm_in_repo(&["litmus", "model", "--max-candidates", "10", lock]);
    let text = ok(&small);
    assert!(
        text.contains("more than 10 candidate executions (raise --max-candidates"),
        "{text}"
    );
    let whole = gpuwmm_in_repo(&["litmus", "model", lock]);
    let text = ok(&whole);
    assert!(
        text.contains("expected forbidden, sc_reachable no"),
        "{text}"
    );
}
