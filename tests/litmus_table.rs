//! Every row of the README's table of litmus shapes under the simulator's PTX model ("Which
//! litmus shapes the PTX model shows between threads of different blocks"), run as the README
//! says (`gpuwmm litmus <test> --backend sim`, seed 1, 3,000 launches, distance 64, volatile
//! accesses), asserting the figures it documents. For a fixed seed the simulator is
//! deterministic, so a changed figure is a changed model: update the README with the test.
//! All figures are simulator results.

use std::process::Command;

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

fn both(fence: &'static str) -> [&'static str; 4] {
    ["--fence-t0", fence, "--fence-t1", fence]
}

const SC_MODEL: [&str; 2] = ["--sim-model", "sc"];

#[test]
fn litmus_table_row_mp() {
    assert_eq!(weak_launches("mp", &[]), 325);
    assert_eq!(weak_launches("mp", &["--fence-t0", "fence.sc.gpu"]), 306);
    assert_eq!(weak_launches("mp", &both("fence.sc.gpu")), 0);
    assert_eq!(weak_launches("mp", &both("membar.cta")), 300);
    assert_eq!(weak_launches("mp", &SC_MODEL), 0);
}

#[test]
fn litmus_table_row_sb() {
    assert_eq!(weak_launches("sb", &[]), 1_462);
    assert_eq!(weak_launches("sb", &both("fence.sc.gpu")), 0);
    assert_eq!(weak_launches("sb", &both("fence.acq_rel.gpu")), 1_413);
    assert_eq!(weak_launches("sb", &SC_MODEL), 0);
}

#[test]
fn litmus_table_row_lb() {
    assert_eq!(weak_launches("lb", &[]), 10);
    assert_eq!(weak_launches("lb", &SC_MODEL), 0);
}

#[test]
fn litmus_table_row_corr() {
    assert_eq!(weak_launches("corr", &[]), 0);
    assert_eq!(weak_launches("corr", &SC_MODEL), 0);
}
