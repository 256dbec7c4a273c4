//! Ending a launch whose threads spin for good, long before its instruction budget.
//!
//! A buggy lock, barrier or queue often leaves a thread spinning on a flag nobody will write
//! again. The scheduler used to notice only once the launch had run its whole instruction
//! budget (100 million thread-instructions by default, seconds per run), and a hardening or a
//! check of such an app spent most of its time in those spins. A launch is now a hang once,
//! under the PTX model, it has gone [`SPIN_WINDOW`] thread-instructions in a *steady state*:
//!
//! - no write to memory (a new message in the PTX model's histories: stores, RMWs, shared
//!   memory alike), no thread exited, arrived at a barrier or joined a warp rendezvous, no
//!   block waits to start;
//! - every thread left has been seen again at the program counter where it was first seen in
//!   that state, with the same registers and local memory (a loop that counts, or reads a
//!   clock, changes them and starts the wait over); a thread is compared only at checks where
//!   it has no deferred load or held instruction (a write those make later moves the clock).
//!
//! So nothing can write memory unless a load returns something else than it did. Memory no
//! longer changes, but the PTX model lets a load read an older write it may still read, by a
//! coin; a spin that has read the same values for a million thread-instructions reads a newer
//! one with a chance that is zero for any practical purpose. That is the one way this differs
//! from the budget: a launch the budget would have let finish in principle is a hang here.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

/// Thread-instructions a launch goes in a steady state before it is a hang.
pub const SPIN_WINDOW: u64 = 1_000_000;

/// What a launch looked like when it last changed: the PTX model's clock (messages appended)
/// and the scheduler's count of exits, barrier arrivals and rendezvous.
pub type Mark = (u32, u64);

/// A launch seen in the same state at two checks in a row.
#[derive(Debug)]
pub struct Quiet {
    /// Thread-instructions executed when it was first seen so.
    since: u64,
    /// The threads left.
    threads: Vec<Left>,
}

/// A thread left in a quiet launch.
#[derive(Debug)]
struct Left {
    thread: usize,
    /// Its program counter and state hash when first seen without deferred work.
    first: Option<(u32, u64)>,
    /// Whether it has been seen there again with the same state.
    back: bool,
}

/// Watches a launch for a steady state ([`Quiet`], module doc).
#[derive(Debug, Default)]
pub struct SpinWatch {
    last: Option<Mark>,
    quiet: Option<Quiet>,
}

/// A thread left running, as the watch sees it at a check.
pub struct Seen {
    pub thread: usize,
    pub pc: u32,
    /// Its registers' and local memory's hash; `None` while it has a deferred load or a held
    /// instruction, whose registers are not yet those of its next round.
    pub state: Option<u64>,
}

/// The hash of a thread's registers and local memory.
pub fn state_hash(registers: &[u64], local: &[u8]) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one((registers, local))
}

impl SpinWatch {
    /// Forgets what it saw: the launch cannot be in a steady state now (a block still waits to
    /// start).
    pub fn moved(&mut self) {
        self.last = None;
        self.quiet = None;
    }

    /// Whether the launch at `mark` may be steady: the same mark as at the last check. A
    /// different mark starts over.
    pub fn unchanged(&mut self, mark: Mark) -> bool {
        if self.last == Some(mark) {
            return true;
        }
        self.last = Some(mark);
        self.quiet = None;
        false
    }

    /// At a check where [`SpinWatch::unchanged`] held: notes the threads left (`seen`) and says
    /// whether the launch has now been steady for [`SPIN_WINDOW`] thread-instructions, having
    /// executed `executed`.
    pub fn steady_for_good(&mut self, executed: u64, seen: Vec<Seen>) -> bool {
        let Some(quiet) = self.quiet.as_mut() else {
            let threads = seen.into_iter().map(|s| Left {
                thread: s.thread,
                first: s.state.map(|h| (s.pc, h)),
                back: false,
            });
            self.quiet = Some(Quiet {
                since: executed,
                threads: threads.collect(),
            });
            return false;
        };
        // Under one mark no thread exited, so the threads left are the same, in the same order.
        let same_threads = seen.len() == quiet.threads.len()
            && seen
                .iter()
                .zip(&quiet.threads)
                .all(|(s, l)| s.thread == l.thread);
        if !same_threads {
            self.quiet = None;
            return false;
        }
        for (now, left) in seen.into_iter().zip(&mut quiet.threads) {
            let Some(state) = now.state else {
                continue;
            };
            match left.first {
                None => left.first = Some((now.pc, state)),
                Some((pc, _)) if pc != now.pc => {}
                Some((_, first)) if first == state => left.back = true,
                // Round the same loop with other registers: it counts, or reads a clock.
                Some(_) => {
                    self.quiet = None;
                    return false;
                }
            }
        }
        quiet.threads.iter().all(|l| l.back) && executed - quiet.since >= SPIN_WINDOW
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARK: Mark = (5, 1);

    fn seen(states: &[(usize, u32, u64)]) -> Vec<Seen> {
        let seen = states.iter().map(|&(thread, pc, state)| Seen {
            thread,
            pc,
            state: Some(state),
        });
        seen.collect()
    }

    /// A watch that saw the launch at [`MARK`] twice, the second time with `first`, at 0.
    fn quiet_from(first: Vec<Seen>) -> SpinWatch {
        let mut watch = SpinWatch::default();
        assert!(!watch.unchanged(MARK));
        assert!(watch.unchanged(MARK));
        assert!(!watch.steady_for_good(0, first));
        watch
    }

    /// The next check, still at [`MARK`]: whether the launch spins for good.
    fn check(watch: &mut SpinWatch, executed: u64, now: Vec<Seen>) -> bool {
        assert!(watch.unchanged(MARK));
        watch.steady_for_good(executed, now)
    }

    /// A thread seen again at its first pc with the same state, for the whole window: a hang.
    #[test]
    fn a_thread_back_where_it_was_with_the_same_state_for_the_window_spins_for_good() {
        let mut watch = quiet_from(seen(&[(0, 10, 7)]));
        // Elsewhere in its loop: not yet seen again where it was.
        assert!(!check(&mut watch, SPIN_WINDOW + 200, seen(&[(0, 12, 9)])));
        // Back, but the window has not passed since it went quiet.
        assert!(!check(&mut watch, SPIN_WINDOW - 1, seen(&[(0, 10, 7)])));
        assert!(check(&mut watch, SPIN_WINDOW, seen(&[(0, 10, 7)])));
    }

    /// A loop that counts (or reads a clock) comes back with other registers: it starts over.
    #[test]
    fn a_thread_back_at_its_pc_with_other_registers_is_not_steady() {
        let mut watch = quiet_from(seen(&[(0, 10, 7)]));
        assert!(!check(&mut watch, SPIN_WINDOW * 2, seen(&[(0, 10, 8)])));
        // It starts over from there.
        assert!(!check(&mut watch, SPIN_WINDOW * 2, seen(&[(0, 10, 8)])));
        assert!(!check(&mut watch, SPIN_WINDOW * 3 - 1, seen(&[(0, 10, 8)])));
        assert!(check(&mut watch, SPIN_WINDOW * 3, seen(&[(0, 10, 8)])));
    }

    /// A write, an exit or a barrier (another mark) starts the wait over.
    #[test]
    fn a_new_mark_starts_the_wait_over() {
        let mut watch = quiet_from(seen(&[(0, 10, 7)]));
        assert!(!watch.unchanged((6, 1)));
        assert!(watch.unchanged((6, 1)));
        assert!(!watch.steady_for_good(SPIN_WINDOW * 2, seen(&[(0, 10, 7)])));
    }

    /// A thread with deferred work is not compared; one first seen so is noted when it has none.
    #[test]
    fn a_thread_with_deferred_work_is_compared_only_without_it() {
        let busy = |pc| {
            let state = None;
            vec![Seen {
                thread: 0,
                pc,
                state,
            }]
        };
        let mut watch = quiet_from(busy(10));
        assert!(!check(&mut watch, SPIN_WINDOW, seen(&[(0, 11, 7)])));
        assert!(!check(&mut watch, SPIN_WINDOW * 2, busy(11)));
        assert!(check(&mut watch, SPIN_WINDOW * 2, seen(&[(0, 11, 7)])));
    }

    /// Every thread left must have come back; one that has not keeps the launch going.
    #[test]
    fn one_thread_not_yet_back_keeps_the_launch_going() {
        let mut watch = quiet_from(seen(&[(0, 10, 7), (1, 20, 3)]));
        let (first_back, second_elsewhere) = (
            seen(&[(0, 10, 7), (1, 21, 4)]),
            seen(&[(0, 11, 1), (1, 20, 3)]),
        );
        assert!(!check(&mut watch, SPIN_WINDOW * 2, first_back));
        assert!(check(&mut watch, SPIN_WINDOW * 2, second_elsewhere));
    }
}
