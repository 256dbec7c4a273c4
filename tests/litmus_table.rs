//! Every row of the README's table of litmus shapes under the simulator's PTX model ("Which
//! litmus shapes the PTX model shows between threads of different blocks"), run as the README
//! says (`gpuwmm litmus <test> --backend sim`, seed 1, 3,000 launches, distance 64, volatile
//! accesses), asserting the figures it documents. For a fixed seed the simulator is
//! deterministic, so a changed figure is a changed model: update the README with the test.
//! All figures are simulator results.

use std::process::Command;

const SC_GPU_BOTH: &[&str] = &["--fence-t0", "fence.sc.gpu", "--fence-t1", "fence.sc.gpu"];
const ACQ_REL_GPU_BOTH: &[&str] = &[
    "--fence-t0",
    "fence.acq_rel.gpu",
    "--fence-t1",
    "fence.acq_rel.gpu",
];
const MEMBAR_CTA_BOTH: &[&str] = &["--fence-t0", "membar.cta", "--fence-t1", "membar.cta"];
const SC_GPU_WRITER: &[&str] = &["--fence-t0", "fence.sc.gpu"];
const SC_MODEL: &[&str] = &["--sim-model", "sc"];

/// The README's table, cell by cell: test, the column's options, weak launches of 3,000.
const TABLE: [(&str, &[&str], u64); 13] = [
    ("mp", &[], 578),
    ("mp", SC_GPU_WRITER, 571),
    ("mp", SC_GPU_BOTH, 0),
    ("mp", MEMBAR_CTA_BOTH, 575),
    ("mp", SC_MODEL, 0),
    ("sb", &[], 1_457),
    ("sb", SC_GPU_BOTH, 0),
    ("sb", ACQ_REL_GPU_BOTH, 1_447),
    ("sb", SC_MODEL, 0),
    ("lb", &[], 19),
    ("lb", SC_MODEL, 0),
    ("corr", &[], 0),
    ("corr", SC_MODEL, 0),
];

/// How many of the 3,000 launches ended in the shape's weak outcome.
fn weak_launches(test: &str, extra: &[&str]) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
        .args(["litmus", test, "--backend", "sim", "--iterations", "3000"])
        .args(["--seed", "1", "--distance", "64"])
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{test} {extra:?}: {stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("weak rate"))
        .unwrap_or_else(|| panic!("{test} {extra:?}: no weak rate in\n{stdout}"));
    // "weak rate 10.8333% (325 of 3000)"
    let count = line.split('(').nth(1).and_then(|r| r.split(' ').next());
    count
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("unreadable: {line}"))
}

/// Runs every cell of the row of `test` and compares it with the README.
fn assert_row(test: &str) {
    let cells: Vec<_> = TABLE.iter().filter(|(t, _, _)| *t == test).collect();
    assert!(!cells.is_empty(), "no row {test}");
    for (_, extra, documented) in cells {
        assert_eq!(weak_launches(test, extra), *documented, "{test} {extra:?}");
    }
}

#[test]
fn litmus_table_row_mp() {
    assert_row("mp");
}

#[test]
fn litmus_table_row_sb() {
    assert_row("sb");
}

#[test]
fn litmus_table_row_lb() {
    assert_row("lb");
}

#[test]
fn litmus_table_row_corr() {
    assert_row("corr");
}
