//! The journaled checker against a mock executor: answers, seeds, and resuming from a journal
//! cut anywhere.

use super::*;
use crate::check::executor::MockExecutor;
use crate::check::journal::read_rows;
use std::path::Path;

/// Site 2 is the one fence that matters: without it about one run in three fails. Keeps the
/// fences and run number of every run it is asked for.
fn mock() -> MockExecutor<Vec<(Fences, u64)>> {
    MockExecutor {
        state: Vec::new(),
        answer: |executed, r| {
            executed.push((r.fences.clone(), r.run));
            let Fences::Sites(ids) = &r.fences else {
                panic!("a hardening always names its fences");
            };
            let fails = !ids.contains(&2) && r.seed.is_multiple_of(3);
            match fails {
                true => record(r, Outcome::Fail, "lost update"),
                false => record(r, Outcome::Pass, ""),
            }
        },
    }
}

/// The record of running `r`: one stress block, 1 µs of kernel time, 1 ms in all.
fn record(r: &RunRequest, outcome: Outcome, reason: &str) -> RunRecord {
    RunRecord {
        stress_blocks: "1".into(),
        reason: reason.into(),
        kernel_us: 1.0,
        wall_ms: 1.0,
        ..RunRecord::unmeasured(r, outcome)
    }
}

fn meta(initial_iterations: u64) -> HardenMeta {
    HardenMeta {
        tool_version: "test".into(),
        started: "now".into(),
        target: crate::check::spec::test_target(),
        env: "sys-str+".parse().unwrap(),
        seed: 9,
        initial_iterations,
        max_rounds: 4,
        stable: Stop::Runs(40),
        stress: CalibratedStress {
            stress_iterations: 3,
            ..CalibratedStress::NONE
        },
        sites: (0..5).map(crate::check::spec::test_site).collect(),
        provenance: "mock".into(),
        profile_source: "test".into(),
        minimise_kinds: false,
        all_fences_first: false,
        app_hash: None,
        race_guided: false,
        race_recording: None,
    }
}

/// What one invocation did: its answered queries, result, and the runs it executed.
struct Session {
    queries: Vec<(Query, bool)>,
    result: Result<Hardened, HardenError>,
    executed: usize,
}

/// Runs (or resumes, when the journal exists) the hardening journaled at `path`.
fn session(path: &Path, meta: &HardenMeta) -> Session {
    let (mut journal, meta, done) = if path.exists() {
        Journal::resume::<HardenMeta>(path).unwrap()
    } else {
        (
            Journal::create(path, meta).unwrap(),
            meta.clone(),
            Vec::new(),
        )
    };
    let mut mock = mock();
    let mut queries = Vec::new();
    let mut progress = |p: &QueryProgress| {
        if let Some(answer) = p.answer {
            queries.push((p.query.clone(), answer));
        }
    };
    let result = harden(&mut mock, &mut journal, &meta, done, &mut progress);
    Session {
        queries,
        result,
        executed: mock.state.len(),
    }
}

/// A new journal at `path` holding `meta` and `rows`.
fn journal_with(path: &Path, meta: &HardenMeta, rows: &[HardenRow]) {
    let mut journal = Journal::<HardenRow>::create(path, meta).unwrap();
    for row in rows {
        journal.append(row).unwrap();
    }
}

#[test]
fn an_uninterrupted_hardening_keeps_the_needed_fence_and_journals_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.csv");
    let full = session(&path, &meta(8));
    let hardened = full.result.unwrap();
    assert_eq!(hardened.insertion.fences, vec![2]);
    assert!(hardened.insertion.stable);
    let rows: Vec<HardenRow> = read_rows(&path).unwrap();
    assert_eq!(rows.len(), full.executed);
    assert_eq!(hardened.totals.runs, rows.len() as u64);
    assert_eq!(hardened.replayed, 0);
    for row in &rows {
        assert_eq!(row.seed, run_seed(run_seed(9, row.query as u64), row.run));
        assert_eq!(row.stress_iterations, 3);
    }
    // Each query stops at its first failure, or after I runs (the stable stop for the last).
    for (query, answer) in &full.queries {
        let runs: Vec<&HardenRow> = rows.iter().filter(|r| r.query == query.index).collect();
        let failures = runs.iter().filter(|r| r.outcome != Outcome::Pass).count();
        let expected_runs = query.iterations.unwrap_or(40) as usize;
        if *answer {
            assert_eq!((runs.len(), failures), (expected_runs, 0), "{query:?}");
        } else {
            assert_eq!(failures, 1, "{query:?}");
            assert_eq!(runs.last().unwrap().outcome, Outcome::Fail);
        }
    }
    let stable = full.queries.last().unwrap();
    assert_eq!((stable.0.phase, stable.0.iterations), (Phase::Stable, None));
}

#[test]
fn resuming_a_journal_cut_anywhere_gives_the_same_queries_and_result() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("full.csv");
    let full = session(&reference, &meta(8));
    let all_rows: Vec<HardenRow> = read_rows(&reference).unwrap();
    let expected = full.result.unwrap().insertion;
    for cut in [0, 1, 3, 8, 9, 20, all_rows.len() - 1, all_rows.len()] {
        let path = dir.path().join(format!("cut{cut}.csv"));
        journal_with(&path, &meta(8), &all_rows[..cut]);
        let resumed = session(&path, &meta(8));
        let hardened = resumed.result.unwrap();
        assert_eq!(hardened.insertion, expected, "cut at {cut}");
        assert_eq!(resumed.queries, full.queries, "cut at {cut}");
        assert_eq!(resumed.executed, all_rows.len() - cut, "cut at {cut}");
        assert_eq!(hardened.replayed, cut as u64);
        assert_eq!(
            read_rows::<HardenRow>(&path).unwrap(),
            all_rows,
            "cut at {cut}"
        );
    }
}

#[test]
fn a_journal_of_another_hardening_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("full.csv");
    session(&reference, &meta(8)).result.unwrap();
    let rows: Vec<HardenRow> = read_rows(&reference).unwrap();
    let other = dir.path().join("other.csv");
    journal_with(&other, &meta(16), &rows[..5]);
    let error = session(&other, &meta(16)).result.unwrap_err();
    assert!(
        matches!(error, HardenError::Journal(JournalError::Mismatch { .. })),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("at query 0,"), "{message}");
    assert!(message.contains("another hardening"), "{message}");
    // Runs out of order are refused too.
    let shuffled = dir.path().join("shuffled.csv");
    let mut swapped = rows[..3].to_vec();
    swapped.swap(0, 1);
    journal_with(&shuffled, &meta(8), &swapped);
    let error = session(&shuffled, &meta(8)).result.unwrap_err();
    assert!(
        error.to_string().contains("run 1 recorded where run 0"),
        "{error}"
    );
}

/// The all-fences query before the search changes none of the search's runs: the same
/// queries (one index later), the same seeds, the same fences kept. Guards the results of
/// hardenings made before the query existed (the `-nf` apps' among them).
#[test]
fn the_all_fences_query_leaves_the_search_and_its_seeds_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let without = session(&dir.path().join("a.csv"), &meta(8));
    let with_meta = HardenMeta {
        all_fences_first: true,
        ..meta(8)
    };
    let with = session(&dir.path().join("b.csv"), &with_meta);
    let (first, search) = with.queries.split_first().unwrap();
    assert_eq!(first.0.phase, Phase::All);
    assert_eq!(first.0.fences, vec![0, 1, 2, 3, 4]);
    assert!(first.1);
    let shifted: Vec<(Query, bool)> = without
        .queries
        .iter()
        .map(|(q, a)| {
            let mut q = q.clone();
            q.index += 1;
            (q, *a)
        })
        .collect();
    assert_eq!(search, &shifted[..]);
    let hardened = with.result.unwrap();
    assert_eq!(
        hardened.insertion.fences,
        without.result.unwrap().insertion.fences
    );
    assert!(hardened.every_fence_failed.is_none());
    let rows_a: Vec<HardenRow> = read_rows(&dir.path().join("a.csv")).unwrap();
    let rows_b: Vec<HardenRow> = read_rows(&dir.path().join("b.csv")).unwrap();
    let searched_b: Vec<(usize, u64, Outcome)> = rows_b
        .iter()
        .filter(|r| r.phase != Phase::All)
        .map(|r| (r.query - 1, r.seed, r.outcome))
        .collect();
    let searched_a: Vec<(usize, u64, Outcome)> = rows_a
        .iter()
        .map(|r| (r.query, r.seed, r.outcome))
        .collect();
    assert_eq!(searched_b, searched_a);
}

/// An app that fails whatever its fences stops after query 0, which says so.
#[test]
fn a_failure_with_every_fence_stops_the_hardening_at_query_0() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.csv");
    let meta = HardenMeta {
        all_fences_first: true,
        ..meta(8)
    };
    let mut journal = Journal::create(&path, &meta).unwrap();
    let mut always_failing = MockExecutor {
        state: 0u64,
        answer: |count: &mut u64, r: &RunRequest| {
            *count += 1;
            record(r, Outcome::Fail, "warp raced")
        },
    };
    let mut asked = Vec::new();
    let mut progress = |p: &QueryProgress| {
        if p.answer.is_some() {
            asked.push(p.query.phase);
        }
    };
    let hardened = harden(
        &mut always_failing,
        &mut journal,
        &meta,
        Vec::new(),
        &mut progress,
    )
    .unwrap();
    let failed = hardened.every_fence_failed.unwrap();
    assert_eq!(
        (failed.query, failed.phase, failed.fences),
        (0, Phase::All, 5)
    );
    assert_eq!((failed.run, failed.reason.as_str()), (0, "warp raced"));
    assert_eq!(asked, [Phase::All]);
    assert_eq!(always_failing.state, 1);
    assert_eq!(hardened.totals.first_error.unwrap().2, "warp raced");
    let rows: Vec<HardenRow> = read_rows(&path).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].query, rows[0].phase), (0, Phase::All));
}

/// Regression: an app whose every site was fenced and still failed its stability check now
/// and then (the data and the flag written on one line, whose fence goes after both) went on
/// for every round left and ended "more --max-rounds may help". The search now stops at that
/// check and names its failing run, the one that says no fence set at these sites is stable.
#[test]
fn a_stability_failure_with_every_fence_stops_the_hardening_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.csv");
    let meta = meta(4);
    let mut journal = Journal::create(&path, &meta).unwrap();
    // Every run with fewer than all five fences fails; with all five, the 31st run does.
    let mut rarely_failing = MockExecutor {
        state: 0u64,
        answer: |_: &mut u64, r: &RunRequest| {
            let all = matches!(&r.fences, Fences::Sites(ids) if ids.len() == 5);
            match all && r.run != 30 {
                true => record(r, Outcome::Pass, ""),
                false => record(r, Outcome::Fail, "stale flag"),
            }
        },
    };
    let hardened = harden(
        &mut rarely_failing,
        &mut journal,
        &meta,
        Vec::new(),
        &mut |_| {},
    )
    .unwrap();
    assert!(!hardened.insertion.stable);
    assert_eq!(hardened.insertion.rounds, 1);
    let failed = hardened.every_fence_failed.unwrap();
    assert_eq!(
        (failed.phase, failed.fences, failed.run),
        (Phase::Stable, 5, 30)
    );
    assert_eq!(failed.query + 1, hardened.insertion.queries);
    assert_eq!(failed.reason, "stale flag");
}
