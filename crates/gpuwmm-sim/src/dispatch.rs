//! When the blocks of a launch join it: all at once, or one after another.
//!
//! A GPU dispatches a grid's blocks in order as SM resources free up, so a block can start after
//! an earlier one has done much of its work, or all of it. Work that a later block then finds
//! finished (an earlier tile's published prefix, a filled queue) is read in ways that blocks
//! started together rarely produce: with all blocks starting at once, the simulator never showed
//! that cccl-scan's final `SetInclusive` needs ordering, which PTX requires. So a launch is
//! staggered with some probability: block `b` joins a random number of scheduling steps after
//! block `b - 1`, up to [`MAX_GAP_STEPS_PER_THREAD`] per thread of a block, or at once when no
//! thread that has joined can run. Stressing blocks, whose ids follow the application's, join
//! after it in the same way, as a GPU would dispatch them; the plan does not depend on where the
//! application's blocks end, so a launch ended with the application schedules as one that is not.
//!
//! The plan is drawn from its own stream of the launch's generator, so a launch that is not
//! staggered schedules exactly as it did before staggering existed.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Most scheduling steps between two blocks' starts, per thread of a block: a block can join
/// after the one before it has run up to about 64 quanta per thread, which is all of a small
/// tile's work (cccl-scan's look-back of 32 threads needs about 30: with at most 16 per thread
/// its unordered final `SetInclusive` failed 0 of 300 runs, at 64 it fails 47 of 300).
pub const MAX_GAP_STEPS_PER_THREAD: u64 = 64;

/// The generator stream the plan is drawn from (the scheduler uses stream 0).
const DISPATCH_STREAM: u64 = 0x6469_7370;

/// The scheduling step at which each of a launch's `blocks` blocks of `per_block` threads joins
/// it: all 0, or (with `stagger_probability`) 0 for block 0 and then each a random gap after the
/// one before. `rng` is the launch's generator; it is not advanced.
pub fn start_steps(
    blocks: u32,
    per_block: u32,
    stagger_probability: f64,
    rng: &ChaCha8Rng,
) -> Vec<u64> {
    let mut own = rng.clone();
    own.set_stream(DISPATCH_STREAM);
    if blocks < 2 || !own.random_bool(stagger_probability.clamp(0.0, 1.0)) {
        return vec![0; blocks as usize];
    }
    let max_gap = MAX_GAP_STEPS_PER_THREAD * u64::from(per_block.max(1));
    let mut start = 0;
    (0..blocks)
        .map(|b| {
            if b > 0 {
                start += own.random_range(0..=max_gap);
            }
            start
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn plans(probability: f64) -> Vec<Vec<u64>> {
        (0..200)
            .map(|seed| start_steps(4, 32, probability, &ChaCha8Rng::seed_from_u64(seed)))
            .collect()
    }

    #[test]
    fn without_stagger_every_block_starts_at_once() {
        assert!(plans(0.0).iter().all(|p| p == &[0, 0, 0, 0]));
    }

    #[test]
    fn a_staggered_plan_starts_blocks_in_order_within_the_gap() {
        let max_gap = MAX_GAP_STEPS_PER_THREAD * 32;
        for plan in plans(1.0) {
            assert_eq!(plan[0], 0);
            assert!(plan
                .windows(2)
                .all(|w| w[0] <= w[1] && w[1] - w[0] <= max_gap));
        }
        assert!(plans(1.0).iter().any(|p| p[3] > 2 * max_gap));
    }

    #[test]
    fn about_half_the_launches_stagger_at_probability_one_half() {
        let staggered = plans(0.5).iter().filter(|p| p[3] > 0).count();
        assert!((70..=130).contains(&staggered), "{staggered} of 200");
    }

    #[test]
    fn the_plan_does_not_advance_the_launch_generator() {
        let rng = ChaCha8Rng::seed_from_u64(3);
        let before = rng.clone();
        start_steps(8, 64, 1.0, &rng);
        assert_eq!(rng, before);
        assert_eq!(start_steps(1, 64, 1.0, &rng), [0]);
    }
}
