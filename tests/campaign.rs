//! `gpuwmm campaign` and `gpuwmm replay` as a user runs them, on the simulator in a temporary
//! folder: the summaries agree with the journals, a killed campaign resumes without losing a
//! row, and a journaled run (of a check, a campaign cell or a hardening's query) replays to the
//! same outcome.

use gpuwmm::check::journal::read_rows;
use gpuwmm::check::{Outcome, RunRecord};
use gpuwmm::harden::run::HardenRow;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::cli::{assert_bad_input, gpuwmm, ok, words};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const CELLS: [(&str, &str); 4] = [
    ("cbe-dot", "no-str-"),
    ("cbe-dot", "sys-str+"),
    ("cub-scan", "no-str-"),
    ("cub-scan", "sys-str+"),
];

fn campaign_args<'a>(runs: &'a str, out: &'a str) -> Vec<&'a str> {
    common::cli::campaign_args("cbe-dot,cub-scan", "no-str-,sys-str+", runs, out)
}

fn journal(out: &Path, app: &str, env: &str) -> PathBuf {
    out.join(format!("{app}-{env}.csv"))
}

/// The rows of `summary.csv`, in the order of its cells.
fn summary_rows(out: &Path) -> Vec<csv::StringRecord> {
    let mut reader = csv::Reader::from_path(out.join("summary.csv")).unwrap();
    reader.records().map(Result::unwrap).collect()
}

fn count(rows: &[RunRecord], outcome: Outcome) -> String {
    rows.iter()
        .filter(|r| r.outcome == outcome)
        .count()
        .to_string()
}

#[test]
fn a_two_by_two_campaign_writes_summaries_that_match_its_journals() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let args = campaign_args("50", "out");
    let printed = ok(&gpuwmm(&args, dir.path()));
    let out = dir.path().join("out");

    let rows = summary_rows(&out);
    assert_eq!(rows.len(), 4);
    for (row, (app, env)) in rows.iter().zip(CELLS) {
        assert_eq!((&row[0], &row[1]), (app, env));
        let runs: Vec<RunRecord> = read_rows(&journal(&out, app, env)).unwrap();
        assert_eq!(&row[2], "50");
        assert_eq!(runs.len(), 50);
        assert_eq!(&row[3], count(&runs, Outcome::Pass));
        assert_eq!(&row[4], count(&runs, Outcome::Fail));
        assert_eq!(&row[5], count(&runs, Outcome::Timeout));
        assert_eq!(&row[6], count(&runs, Outcome::Crash));
        assert!(row[11].contains("simulator"), "{row:?}");
    }
    // cbe-dot's lock has no fences: sys-str+ exposes it; cub-scan is fenced on both sides and
    // never fails (sdk-red, whose reader side has no acquire, fails now and then under PTX).
    assert_eq!(&rows[1][10], "true", "{:?}", rows[1]);
    assert_eq!((&rows[2][3], &rows[3][3]), ("50", "50"));

    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.starts_with("backend: simulator"), "{md}");
    let chart = std::fs::read_to_string(out.join("summary.svg")).unwrap();
    for label in [
        "cbe-dot no-str-",
        "cbe-dot sys-str+",
        "cub-scan no-str-",
        "cub-scan sys-str+",
    ] {
        assert!(chart.contains(label), "{label} missing from the chart");
    }
    assert!(chart.contains("backend: simulator"));
    assert!(md.contains("| app | no-str- | sys-str+ |"), "{md}");
    assert!(
        md.contains("| cub-scan | 0.0% (0/50) | 0.0% (0/50) |"),
        "{md}"
    );
    let last = md
        .lines()
        .find(|l| l.starts_with("| apps with errors / effective |"));
    assert!(last.is_some_and(|l| l.ends_with(" / 1 |")), "{md}");
    assert_eq!(printed.trim_end().lines().next(), md.lines().next());

    // Without --resume the same folder is refused, and nothing in it changes.
    let before = std::fs::read(journal(&out, "cbe-dot", "sys-str+")).unwrap();
    let again = gpuwmm(&args, dir.path());
    assert_bad_input(&again, "--resume");
    assert_eq!(
        std::fs::read(journal(&out, "cbe-dot", "sys-str+")).unwrap(),
        before
    );

    // A campaign journal is a check journal: its runs replay.
    let cell = journal(&out, "cbe-dot", "sys-str+");
    let replay = gpuwmm(&["replay", cell.to_str().unwrap(), "0"], dir.path());
    assert!(
        text(&replay.stdout).contains("reproduced"),
        "{}",
        text(&replay.stdout)
    );
}

#[test]
fn a_repeated_campaign_writes_a_new_folder_and_resume_finds_the_newest_unfinished() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let args = words("campaign --apps cbe-dot --envs no-str- --runs 5 --backend sim");
    for _ in 0..2 {
        ok(&gpuwmm(&args, dir.path()));
    }
    let first = dir.path().join("results/campaign/sim-seed1");
    let second = dir.path().join("results/campaign/sim-seed1-2");
    for out in [&first, &second] {
        assert!(out.join("summary.csv").is_file(), "{}", out.display());
        let runs: Vec<RunRecord> = read_rows(&journal(out, "cbe-dot", "no-str-")).unwrap();
        assert_eq!(runs.len(), 5);
    }
    // The first is cut back to 2 runs before its summary, as a kill leaves it: --resume takes it
    // rather than the newer, finished one.
    let cell = journal(&first, "cbe-dot", "no-str-");
    let lines: Vec<String> = complete_lines(&cell)
        .lines()
        .take(3)
        .map(String::from)
        .collect();
    std::fs::write(&cell, lines.join("\n") + "\n").unwrap();
    std::fs::remove_file(first.join("summary.csv")).unwrap();
    let resumed = gpuwmm(&[&args[..], &["--resume"]].concat(), dir.path());
    ok(&resumed);
    assert!(
        text(&resumed.stderr).contains("continuing results/campaign/sim-seed1 "),
        "{}",
        text(&resumed.stderr)
    );
    assert_eq!(read_rows::<RunRecord>(&cell).unwrap().len(), 5);
    assert!(first.join("summary.csv").is_file());
    assert!(!dir.path().join("results/campaign/sim-seed1-3").exists());
}

/// Bug: `campaign --resume` with fewer `--apps` wrote a new plan without the left-out app, whose
/// unfinished cells then dropped out of the summary and of `--collect` without a word.
#[test]
fn campaign_resume_with_other_apps_or_envs_is_refused_rather_than_dropping_cells() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let plan = words("campaign --apps cbe-dot,cub-scan --envs no-str- --runs 2 --backend sim");
    ok(&gpuwmm(
        &[&plan[..], &["--out", "out"]].concat(),
        dir.path(),
    ));
    let before = std::fs::read_to_string(dir.path().join("out/plan.json")).unwrap();
    let fewer = words("campaign --apps cbe-dot --envs no-str- --backend sim --out out --resume");
    assert_bad_input(
        &gpuwmm(&fewer, dir.path()),
        "its plan has --apps cbe-dot,cub-scan, not cbe-dot",
    );
    let other =
        words("campaign --apps cbe-dot,cub-scan --envs sys-str+ --backend sim --out out --resume");
    assert_bad_input(
        &gpuwmm(&other, dir.path()),
        "its plan has --envs no-str-, not sys-str+",
    );
    let after = std::fs::read_to_string(dir.path().join("out/plan.json")).unwrap();
    assert_eq!(before, after, "a refused resume rewrote the plan");
    let same = [&plan[..], &["--out", "out", "--resume"]].concat();
    ok(&gpuwmm(&same, dir.path()));
}

/// Complete lines of a file (a row a kill cut short is not one).
fn complete_lines(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let end = text.rfind('\n').map_or(0, |i| i + 1);
    text[..end].to_string()
}

#[test]
fn resume_of_a_killed_campaign_finishes_every_cell_and_keeps_earlier_rows() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let out = dir.path().join("out");
    let first = journal(&out, CELLS[0].0, CELLS[0].1);
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
        .args(campaign_args("200", "out"))
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while complete_lines(&first).lines().count() < 3 {
        assert!(Instant::now() < deadline, "no rows in {}", first.display());
        assert!(child.try_wait().unwrap().is_none(), "ended before the kill");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !out.join("summary.csv").exists(),
        "killed after it finished"
    );
    let before: Vec<String> = CELLS
        .iter()
        .map(|(app, env)| complete_lines(&journal(&out, app, env)))
        .collect();

    let mut args = campaign_args("200", "out");
    args.push("--resume");
    ok(&gpuwmm(&args, dir.path()));

    for ((app, env), earlier) in CELLS.iter().zip(&before) {
        let path = journal(&out, app, env);
        let runs: Vec<u64> = read_rows::<RunRecord>(&path)
            .unwrap()
            .iter()
            .map(|r| r.run)
            .collect();
        assert_eq!(runs, (0..200).collect::<Vec<_>>(), "{app} {env}");
        let now = std::fs::read_to_string(&path).unwrap();
        assert!(now.starts_with(earlier.as_str()), "{app} {env} lost rows");
    }
    assert!(before[0].lines().count() >= 3);
    let rows = summary_rows(&out);
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| &r[2] == "200"), "{rows:?}");
}

#[test]
fn replay_reproduces_a_pass_and_a_fail_and_rejects_what_is_not_there() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let check = words("check cbe-dot --env sys-str+ --runs 200 --backend sim");
    ok(&gpuwmm(&check, dir.path()));
    let path = dir
        .path()
        .join("results/check/cbe-dot-sys-str+-sim-seed1.csv");
    let rows: Vec<RunRecord> = read_rows(&path).unwrap();
    let pass = rows.iter().find(|r| r.outcome == Outcome::Pass).unwrap();
    let fails: Vec<&RunRecord> = rows.iter().filter(|r| r.outcome.is_error()).collect();
    assert!(fails.len() >= 2, "cbe-dot should fail under sys-str+");
    for record in [pass, fails[0], fails[fails.len() - 1]] {
        let run = record.run.to_string();
        let stdout = ok(&gpuwmm(
            &["replay", path.to_str().unwrap(), &run],
            dir.path(),
        ));
        assert!(stdout.contains(&format!("run {run}\n")), "{stdout}");
        assert!(stdout.contains(&format!("seed          {}", record.seed)));
        assert!(
            stdout.contains(&format!("recorded      {}", record.outcome)),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("replayed      {}", record.outcome)),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("reproduced: {}", record.outcome)),
            "{stdout}"
        );
        assert!(stdout.contains("the simulator replays a run exactly"));
    }

    let missing = gpuwmm(&["replay", path.to_str().unwrap(), "200"], dir.path());
    assert_bad_input(&missing, "run 200 is not in");
    let nowhere = gpuwmm(&["replay", "no/such.csv", "0"], dir.path());
    assert_eq!(nowhere.status.code(), Some(2));
}

#[test]
fn replay_says_which_journals_it_supports() {
    let tune_like = "round,sites,outcome\n0,1 2,stable\n";
    let (dir, _journal) = common::file_in_temp_dir("other.csv", tune_like);
    std::fs::write(
        dir.path().join("other.json"),
        r#"{"kind": "tune", "app": "cbe-dot"}"#,
    )
    .unwrap();
    let out = gpuwmm(&["replay", "other.csv", "0"], dir.path());
    assert_bad_input(&out, "not a check, campaign or harden journal");
}

#[test]
fn replay_of_a_harden_journal_reruns_a_query_run_with_that_query_fences() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    // On the store-buffer model, which records no races: on the PTX model the races keep
    // cbe-dot's fences without a query, so no run of its hardening fails.
    let harden = gpuwmm(
        &words("harden cbe-dot --backend sim --sim-model weak --stable-runs 100 --journal h.csv"),
        dir.path(),
    );
    // The summary names the first failing run and how to replay it.
    let summary = ok(&harden);
    let hint = summary
        .lines()
        .find_map(|l| l.split_once("replay it with: gpuwmm "))
        .map(|(_, command)| command.to_string())
        .unwrap_or_else(|| panic!("no replay hint in:\n{summary}"));
    let args: Vec<&str> = hint.split_whitespace().collect();
    let rows: Vec<HardenRow> = read_rows(&dir.path().join("h.csv")).unwrap();
    let first = rows.iter().find(|r| r.outcome.is_error()).unwrap();
    let expected = [
        "replay",
        "h.csv",
        &first.run.to_string(),
        "--query",
        &first.query.to_string(),
    ];
    assert_eq!(args, expected);

    let out = ok(&gpuwmm(&args, dir.path()));
    assert!(
        out.contains(&format!("fences        {}", first.fences)),
        "{out}"
    );
    assert!(out.contains("reproduced: fail"), "{out}");

    // A passing run of the last query that passed replays as a pass.
    let last = rows.iter().rev().find(|r| !r.outcome.is_error()).unwrap();
    let (run, query) = (last.run.to_string(), last.query.to_string());
    let replay = gpuwmm(&["replay", "h.csv", &run, "--query", &query], dir.path());
    assert!(text(&replay.stdout).contains("reproduced: pass"));

    // A failing run of a fence-kind query runs with each site's kind and replays as a fail.
    // Under the PTX model harden no longer tries a CTA-scoped kind at a site that talks across
    // CTAs (scope from communication), so the failing kind query comes from the store-buffer
    // model, where a cta fence drains nothing.
    let kinds = "harden cbe-dot --backend sim --sim-model weak --minimise-kind on --stable-runs 100 --journal k.csv";
    ok(&gpuwmm(&words(kinds), dir.path()));
    let kind_rows: Vec<HardenRow> = read_rows(&dir.path().join("k.csv")).unwrap();
    let kinded = kind_rows
        .iter()
        .find(|r| r.fences.contains('@') && r.outcome.is_error())
        .expect(
            "a failing kind query (fence.acq_rel.cta cannot hand cbe-dot's lock across blocks)",
        );
    let (run, query) = (kinded.run.to_string(), kinded.query.to_string());
    let replay = gpuwmm(&["replay", "k.csv", &run, "--query", &query], dir.path());
    let out = text(&replay.stdout);
    assert!(
        out.contains(&format!("fences        {}", kinded.fences)),
        "{out}"
    );
    assert!(out.contains("reproduced: fail"), "{out}");

    // Without --query, or with a query that has no such run, it says what is wrong.
    let no_query = gpuwmm(&["replay", "h.csv", "0"], dir.path());
    assert_bad_input(&no_query, "--query");
    let absent = gpuwmm(&["replay", "h.csv", "0", "--query", "999"], dir.path());
    assert_bad_input(&absent, "query 999");
}

/// The simulator fallback note was printed twice by a campaign: once when the campaign read
/// its settings and again by its first cell.
#[test]
fn a_campaign_that_falls_back_to_the_simulator_says_so_once() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let args = words("campaign --apps cbe-dot --envs no-str- --runs 2 --backend auto --out o");
    let output = gpuwmm(&args, dir.path());
    ok(&output);
    let stderr = text(&output.stderr);
    let notes = stderr.matches("note: running on the simulator").count();
    // With a driver (a GPU, or the stand-in CI's library) there is no fallback and no note.
    let fell_back = text(&output.stdout).contains("backend: simulator");
    assert_eq!(notes, usize::from(fell_back), "{stderr}");
}
