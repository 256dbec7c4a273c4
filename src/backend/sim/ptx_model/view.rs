//! What a thread of the PTX model knows to have happened before it: a [`View`].
//!
//! It exists because PTX's causality order has two kinds of members that a per-block vector
//! clock alone cannot tell apart. A write that reaches a thread through synchronisation (a
//! release read by an acquire, a barrier, two `fence.sc` in fence-SC order) brings everything
//! before it; a write that the thread (or a thread that synchronised with it later) merely
//! *observed* with a morally strong read brings only itself (causality is base causality, or
//! observation followed by base causality: never program order before an observation). A view
//! is therefore a clock, for the first kind, plus a few single writes, the *points*, for the
//! second. Points that do not fit are folded into the clock, which takes the writer's earlier
//! writes along: stronger than PTX, never weaker.

/// Single writes a view remembers before it folds the oldest into its clock.
pub const POINTS: usize = 16;

/// A write named by its block and its number among the block's writes.
type Point = (u32, u32);

/// A causal past: every write of block `b` up to `clock[b]`, and the single writes in
/// `points` (each newer than the clock's entry for its block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    clock: Box<[u32]>,
    points: Vec<Point>,
}

impl View {
    /// Nothing known, over `blocks` blocks.
    pub fn new(blocks: usize) -> View {
        View {
            clock: vec![0; blocks].into_boxed_slice(),
            points: Vec::new(),
        }
    }

    /// Whether write `seq` of `block` is in the view.
    pub fn covers(&self, block: u32, seq: u32) -> bool {
        self.clock[block as usize] >= seq || self.points.contains(&(block, seq))
    }

    /// Whether the view holds no write at all.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty() && self.clock.iter().all(|&s| s == 0)
    }

    /// Adds write `seq` of `block` and every earlier write of that block.
    pub fn advance(&mut self, block: u32, seq: u32) {
        let c = &mut self.clock[block as usize];
        *c = (*c).max(seq);
        self.drop_covered_points();
    }

    /// Adds write `seq` of `block` by itself. Past [`POINTS`] single writes, the oldest
    /// is folded into the clock.
    pub fn add_point(&mut self, block: u32, seq: u32) {
        if self.covers(block, seq) {
            return;
        }
        self.points.push((block, seq));
        if self.points.len() > POINTS {
            let (b, s) = self.points.remove(0);
            self.advance(b, s);
        }
    }

    /// Adds everything `other` holds.
    pub fn join(&mut self, other: &View) {
        for (a, b) in self.clock.iter_mut().zip(other.clock.iter()) {
            *a = (*a).max(*b);
        }
        self.drop_covered_points();
        for &(b, s) in &other.points {
            self.add_point(b, s);
        }
    }

    fn drop_covered_points(&mut self) {
        let clock = &self.clock;
        self.points.retain(|&(b, s)| clock[b as usize] < s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_brings_only_its_own_write() {
        let mut v = View::new(2);
        v.add_point(0, 5);
        assert!(v.covers(0, 5));
        assert!(!v.covers(0, 4));
        assert!(!v.covers(0, 6));
    }

    #[test]
    fn the_clock_brings_every_earlier_write_of_the_block_and_absorbs_points() {
        let mut v = View::new(2);
        v.add_point(1, 3);
        v.advance(1, 4);
        assert!(v.covers(1, 1) && v.covers(1, 4) && !v.covers(1, 5));
        assert!(v.points.is_empty());
    }

    #[test]
    fn joining_keeps_both_sides_points_and_the_larger_clock() {
        let mut a = View::new(2);
        a.add_point(0, 7);
        let mut b = View::new(2);
        b.advance(0, 2);
        b.add_point(1, 9);
        a.join(&b);
        assert!(a.covers(0, 7) && a.covers(0, 2) && !a.covers(0, 6));
        assert!(a.covers(1, 9) && !a.covers(1, 8));
    }

    #[test]
    fn too_many_points_fold_the_oldest_into_the_clock_which_is_only_stronger() {
        let mut v = View::new(1);
        for s in (2..=2 * (POINTS as u32 + 1)).step_by(2) {
            v.add_point(0, s);
        }
        assert_eq!(v.points.len(), POINTS);
        // The oldest point (2) went into the clock, taking write 1 along.
        assert!(v.covers(0, 1) && v.covers(0, 2) && !v.covers(0, 3));
        assert!(v.covers(0, 2 * (POINTS as u32 + 1)));
    }
}
