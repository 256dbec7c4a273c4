//! The model on small shapes whose PTX verdicts follow from the specification's text.

use super::*;
use crate::litmus::file::parse::parse;
use std::path::Path;

fn run(text: &str) -> ModelOutcome {
    let test = parse(Path::new("t.litmus"), text).unwrap_or_else(|e| panic!("{e}"));
    model(&test).unwrap_or_else(|e| panic!("{e}"))
}

/// A two-thread test on x and y, threads in CTAs `ctas`, rows of `P0 | P1` cells.
fn two(ctas: (u32, u32), rows: &[&str], condition: &str) -> ModelOutcome {
    two_on("x=0; y=0;", ctas, rows, condition)
}

/// A two-thread test with the init block `init`.
fn two_on(init: &str, ctas: (u32, u32), rows: &[&str], condition: &str) -> ModelOutcome {
    let mut text = format!(
        "PTX t\n{{ {init} }}\n P0@cta {},gpu 0 | P1@cta {},gpu 0 ;\n",
        ctas.0, ctas.1
    );
    for r in rows {
        text.push_str(&format!(" {r} ;\n"));
    }
    text.push_str(&format!("exists ({condition})\n"));
    run(&text)
}

const MP: &str = "P1:r0 == 1 /\\ P1:r1 == 0";
const SB: &str = "P0:r0 == 0 /\\ P1:r1 == 0";
const LB: &str = "P0:r0 == 1 /\\ P1:r1 == 1";

#[test]
fn message_passing_needs_a_morally_strong_release_acquire_or_fences() {
    let mp = |w: &str, r: &str, ctas| {
        two(
            ctas,
            &[
                &format!("st.weak x, 1 | {r} r0, y"),
                &format!("{w} y, 1 | ld.weak r1, x"),
            ],
            MP,
        )
        .expected()
    };
    for (w, r, ctas, expected) in [
        (
            "st.relaxed.gpu",
            "ld.relaxed.gpu",
            (0, 1),
            Expected::Allowed,
        ),
        (
            "st.release.gpu",
            "ld.acquire.gpu",
            (0, 1),
            Expected::Forbidden,
        ),
        // cta scope does not include the other CTA: not morally strong, no synchronisation.
        (
            "st.release.cta",
            "ld.acquire.cta",
            (0, 1),
            Expected::Allowed,
        ),
        (
            "st.release.cta",
            "ld.acquire.cta",
            (0, 0),
            Expected::Forbidden,
        ),
    ] {
        assert_eq!(mp(w, r, ctas), expected, "{w} / {r}, CTAs {ctas:?}");
    }
    let fenced = |f: &str| {
        two(
            (0, 1),
            &[
                "st.weak x, 1 | ld.relaxed.gpu r0, y",
                &format!("{f} | {f}"),
                "st.relaxed.gpu y, 1 | ld.weak r1, x",
            ],
            MP,
        )
    };
    assert_eq!(fenced("fence.acq_rel.gpu").expected(), Expected::Forbidden);
    assert_eq!(fenced("membar.gl").expected(), Expected::Forbidden);
    assert_eq!(fenced("fence.sc.cta").expected(), Expected::Allowed);
    let weak = fenced("fence.sc.cta");
    assert_eq!(weak.sc_reachable(), ScReachable::No);
    assert_eq!(weak.weak_states().count(), 1);
}

#[test]
fn store_buffering_needs_fence_sc_not_acq_rel() {
    let sb = |f: &str| {
        two(
            (0, 1),
            &[
                "st.relaxed.gpu x, 1 | st.relaxed.gpu y, 1",
                &format!("{f} | {f}"),
                "ld.relaxed.gpu r0, y | ld.relaxed.gpu r1, x",
            ],
            SB,
        )
        .expected()
    };
    assert_eq!(sb("fence.acq_rel.gpu"), Expected::Allowed);
    assert_eq!(sb("fence.sc.gpu"), Expected::Forbidden);
    assert_eq!(sb("fence.sc.cta"), Expected::Allowed);
}

#[test]
fn load_buffering_is_allowed_without_dependencies_and_forbidden_with_them() {
    // Both threads load, then store what (or whatever) they loaded to the other's location.
    let lb = |loads: &str, stores: &str| two((0, 1), &[loads, stores], LB);
    let relaxed_loads = "ld.relaxed.gpu r0, x | ld.relaxed.gpu r1, y";
    let plain = lb(relaxed_loads, "st.relaxed.gpu y, 1 | st.relaxed.gpu x, 1");
    assert_eq!(plain.expected(), Expected::Allowed);
    assert_eq!(plain.sc_reachable(), ScReachable::No);
    let data = lb(relaxed_loads, "st.relaxed.gpu y, r0 | st.relaxed.gpu x, r1");
    // No value 1 is ever written: no-thin-air leaves only zeros.
    assert_eq!(data.expected(), Expected::Forbidden);
    let acquire_loads = "ld.acquire.gpu r0, x | ld.acquire.gpu r1, y";
    let lb_acquire = |st: &str| lb(acquire_loads, &format!("{st} y, 1 | {st} x, 1")).expected();
    // An acquire orders nothing without a release pattern to synchronise with.
    assert_eq!(lb_acquire("st.relaxed.gpu"), Expected::Allowed);
    assert_eq!(lb_acquire("st.release.gpu"), Expected::Forbidden);
}

#[test]
fn coherence_of_reads_holds_for_morally_strong_accesses_only() {
    let corr = |r: &str, ctas| {
        two(
            ctas,
            &[
                &format!("st.relaxed.gpu x, 1 | {r} r0, x"),
                &format!(" | {r} r1, x"),
            ],
            MP,
        )
        .expected()
    };
    assert_eq!(corr("ld.relaxed.gpu", (0, 1)), Expected::Forbidden);
    assert_eq!(corr("ld.weak", (0, 1)), Expected::Allowed);
    assert_eq!(corr("ld.relaxed.cta", (0, 1)), Expected::Allowed);
    assert_eq!(corr("ld.relaxed.cta", (0, 0)), Expected::Forbidden);
}

fn iriw(reads: &str, fence: &str) -> Expected {
    let text = format!(
        "PTX iriw\n{{ x=0; y=0; }}\n P0@cta 0,gpu 0 | P1@cta 1,gpu 0 | P2@cta 2,gpu 0 | P3@cta 3,gpu 0 ;\n \
         st.relaxed.gpu x, 1 | {reads} r0, x | st.relaxed.gpu y, 1 | {reads} r0, y ;\n \
         | {fence} | | {fence} ;\n | {reads} r1, y | | {reads} r1, x ;\n\
         exists (P1:r0 == 1 /\\ P1:r1 == 0 /\\ P3:r0 == 1 /\\ P3:r1 == 0)\n"
    );
    run(&text).expected()
}

#[test]
fn independent_reads_of_independent_writes_need_fence_sc() {
    assert_eq!(iriw("ld.acquire.gpu", ""), Expected::Allowed);
    assert_eq!(
        iriw("ld.relaxed.gpu", "fence.acq_rel.gpu"),
        Expected::Allowed
    );
    assert_eq!(iriw("ld.relaxed.gpu", "fence.sc.gpu"), Expected::Forbidden);
}

#[test]
fn cta_scoped_atomics_from_two_ctas_can_lose_an_update() {
    let inc = |scope: &str, ctas| {
        two(
            ctas,
            &[&format!(
                "atom.relaxed.{scope}.add r0, x, 1 | atom.relaxed.{scope}.add r0, x, 1"
            )],
            "x == 1",
        )
        .expected()
    };
    assert_eq!(inc("gpu", (0, 1)), Expected::Forbidden);
    assert_eq!(inc("cta", (0, 1)), Expected::Allowed);
    assert_eq!(inc("cta", (0, 0)), Expected::Forbidden);
}

#[test]
fn sequential_consistency_states_are_always_allowed() {
    let o = two(
        (0, 0),
        &[
            "st.weak x, 1 | ld.weak r0, y",
            "st.weak y, 1 | ld.weak r1, x",
        ],
        MP,
    );
    assert!(o.sc.is_subset(&o.allowed));
    assert_eq!(o.sc.len(), 3);
    assert_eq!(o.allowed.len(), 4);
    assert!(
        o.report().contains("Observation t Sometimes 1 3"),
        "{}",
        o.report()
    );
}

/// `.gpu` scope includes the threads of one GPU only, `.cta` those of one CTA of one GPU (CTA 0
/// of GPU 0 is not CTA 0 of GPU 1), `.sys` every thread: message passing between GPUs needs
/// `.sys`.
#[test]
fn threads_on_two_gpus_synchronise_only_at_system_scope() {
    let mp = |scope: &str| {
        let text = format!(
            "PTX g\n{{ x=0; y=0; }}\n P0@cta 0,gpu 0 | P1@cta 0,gpu 1 ;\n \
             st.weak x, 1 | ld.acquire.{scope} r0, y ;\n \
             st.release.{scope} y, 1 | ld.weak r1, x ;\n\
             exists ({MP})\n"
        );
        run(&text).expected()
    };
    assert_eq!(mp("cta"), Expected::Allowed);
    assert_eq!(mp("gpu"), Expected::Allowed);
    assert_eq!(mp("sys"), Expected::Forbidden);
}

#[test]
fn proxy_aliases_are_refused() {
    let alias = parse(Path::new("t.litmus"), "PTX a\n{\nx=0;\ny @ surface aliases x;\n}\n P0@cta 0,gpu 0 ;\n st.weak x, 1 ;\nexists (x == 1)\n").unwrap();
    let r = model(&alias).unwrap_err();
    assert_eq!(
        (r.line, r.reason.contains("proxy aliases")),
        (4, true),
        "{r}"
    );
}

/// Regression: a spin lock whose acquire is an exchange in a loop ran out of memory (each
/// unrolled exchange gave the values of the lock a new provenance, and every coherence order
/// of its writes was tried). Acquire/release makes the critical sections exclusive; relaxed
/// ones lose an update.
#[test]
fn a_spin_lock_taken_by_exchange_loops_is_modelled_and_needs_acquire_and_release() {
    let lock = |acquire: &str, release: &str| {
        let rows = [
            "LC00: | LC10:".to_string(),
            format!("atom.{acquire}.gpu.exch r0, m, 1 | atom.{acquire}.gpu.exch r0, m, 1"),
            "bne r0, 0, LC00 | bne r0, 0, LC10".to_string(),
            "ld.weak r1, x | ld.weak r1, x".to_string(),
            "add r1, r1, 1 | add r1, r1, 1".to_string(),
            "st.weak x, r1 | st.weak x, r1".to_string(),
            format!("st.{release}.gpu m, 0 | st.{release}.gpu m, 0"),
        ];
        let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
        two_on("m=0; x=0;", (0, 1), &rows, "x == 1")
    };
    let exclusive = lock("acquire", "release");
    assert_eq!(exclusive.expected(), Expected::Forbidden);
    assert_eq!(exclusive.allowed, BTreeSet::from([vec![2]]));
    let racy = lock("relaxed", "relaxed");
    assert_eq!(racy.expected(), Expected::Allowed);
    assert_eq!(racy.allowed, BTreeSet::from([vec![1], vec![2]]));
}

/// A thread that swaps a flag in a loop until it reads what another thread swapped in: the
/// exchanges of one location by threads of one CTA are morally strong, so Atomicity chains
/// them; every execution that ends within the loop bound is found.
#[test]
fn exchange_loops_on_one_location_end_with_the_value_the_last_exchange_wrote() {
    let rows = [
        "LC00: | LC10:",
        "atom.relaxed.gpu.exch r0, f, 1 | atom.relaxed.gpu.exch r1, f, 2",
        "bne r0, 2, LC01 | bne r1, 1, LC11",
        "goto LC02 | goto LC12",
        "LC01: | LC11:",
        "goto LC00 | goto LC10",
        "LC02: | LC12:",
    ];
    let o = two_on("f=0;", (0, 0), &rows, "f == 0");
    assert_eq!(o.expected(), Expected::Forbidden);
    // Whoever swaps last leaves its value, and read the other's: both end.
    assert_eq!(o.allowed, BTreeSet::from([vec![1], vec![2]]));
}

/// Regression: a test without barriers in which no execution ends (two threads each waiting to
/// take a lock the other holds) had its row blamed on a rendezvous barrier.
#[test]
fn a_test_whose_every_execution_spins_forever_says_so_not_barrier_deadlock() {
    let rows = [
        "LC00: | LC10:",
        "atom.relaxed.gpu.exch r0, m, 1 | atom.relaxed.gpu.exch r1, m, 1",
        "bne r0, 0, LC00 | bne r1, 0, LC10",
    ];
    let o = two_on("m=0;", (0, 0), &rows, "m == 1");
    assert!(o.allowed.is_empty() && o.sc.is_empty());
    assert_eq!(
        o.sc_reachable(),
        ScReachable::NoFinalState("no-final-state(no execution ends within the loop bound)".into())
    );
}

/// A test whose enumeration passes the budget is refused, naming why, rather than running on
/// with no end in sight (a four-CTA exchange lock had not ended after 5 minutes).
#[test]
fn a_test_past_the_candidate_budget_is_refused_not_run_for_ever() {
    let text = "PTX lock\n{ m=0; }\n P0@cta 0,gpu 0 | P1@cta 1,gpu 0 ;\n \
        LC00: | LC10: ;\n \
        atom.acquire.gpu.exch r0, m, 1 | atom.acquire.gpu.exch r0, m, 1 ;\n \
        bne r0, 0, LC00 | bne r0, 0, LC10 ;\n \
        st.release.gpu m, 0 | st.release.gpu m, 0 ;\nexists (m == 1)\n";
    let test = parse(Path::new("t.litmus"), text).unwrap();
    let program = program::build(&test).unwrap();
    let observed = test.observed();
    let whole = explore::allowed(&program, &observed).unwrap();
    assert!(whole.candidates > 10, "{}", whole.candidates);
    assert_eq!(
        explore::allowed_within(&program, &observed, 10).unwrap_err(),
        explore::TooBig::Candidates
    );
}

/// Regression (a relaxed RMW that reads a weak write was forbidden to be read by a thread whose
/// release that weak write's thread had acquired): observation order starts at a write, so a
/// reader of the RMW's write orders after it only the RMW's write, not its read. Shape: T2 reads
/// x then releases y; T0 acquires y, then writes x = 1; T1's RMW adds 2 to x, reading T0's write;
/// T2's read of x returns the RMW's 3. Allowed when T0's write is weak (the RMW's read observes
/// nothing); forbidden when it is morally strong with the RMW (observation then runs through
/// the RMW to T2's read, which precedes T0's write in causality), and forbidden for T2 to read
/// T0's write itself.
#[test]
fn an_rmw_reading_a_weak_write_does_not_order_its_read_after_its_own_readers() {
    let chain = |t0_store: &str, t2_reads: u32| {
        let text = format!(
            "PTX chain\n{{ x=0; y=0; }}\n P0@cta 0,gpu 0 | P1@cta 0,gpu 0 | P2@cta 0,gpu 0 ;\n \
             ld.acquire.gpu r0, y | atom.relaxed.gpu.add r1, x, 2 | ld.relaxed.gpu r2, x ;\n \
             {t0_store} x, 1 | | st.release.gpu y, 1 ;\n\
             exists (P0:r0 == 1 /\\ P2:r2 == {t2_reads})\n"
        );
        run(&text).expected()
    };
    assert_eq!(chain("st.weak", 3), Expected::Allowed);
    assert_eq!(chain("st.relaxed.gpu", 3), Expected::Forbidden);
    assert_eq!(chain("st.weak", 1), Expected::Forbidden);
}

/// Regression (held-out Dat3M tests `SB+bar-dyn-reg-const` and a reduction of it): a third
/// thread of the CTA that stores and exits without reaching the barrier held it up for ever in
/// the SC rendezvous, so the model said no execution ends (`no-final-state`) and called the SC
/// state weak, while the simulator finished every run. PTX's `exit` releases a barrier of every
/// thread of the CTA whose only missing threads have exited; a quorum barrier still waits.
#[test]
fn a_barrier_of_the_whole_cta_goes_on_when_the_threads_it_waits_for_have_exited() {
    let text = |bar: &str| {
        format!(
            "PTX t\n{{ x=0; y=0; z=0; }}\n P0@cta 0,gpu 0 | P1@cta 0,gpu 0 | P2@cta 0,gpu 0 ;\n \
             st.weak x, 1 | st.weak y, 1 | st.weak z, 1 ;\n \
             {bar} | {bar} | ;\n \
             ld.weak r0, y | ld.weak r1, x | ;\nexists (P0:r0 == 0 \\/ P1:r1 == 0)\n"
        )
    };
    let whole = run(&text("bar.cta.sync 1"));
    assert_eq!(whole.sc, BTreeSet::from([vec![1, 1]]));
    assert_eq!(whole.sc_reachable(), ScReachable::No);
    assert_eq!(whole.expected(), Expected::Forbidden);
    // A quorum of three that the exited thread never joins is not met.
    let quorum = run(&text("bar.cta.sync 1, 1, 3"));
    assert!(quorum.sc.is_empty());
}
