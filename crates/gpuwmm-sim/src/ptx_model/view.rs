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

/// Single writes a view remembers before it folds one into its clock.
pub const POINTS: usize = 16;

/// A write known by itself: its block and number among the block's writes (what names it),
/// its location (its address) and its coherence key (its place in the location's
/// coherence order, see [`Message::co`](super::Message::co)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub block: u32,
    pub seq: u32,
    pub location: u64,
    pub co: u64,
}

impl Point {
    fn name(&self) -> (u32, u32) {
        (self.block, self.seq)
    }
}

/// A causal past: every write of block `b` up to `clock[b]`, and the single writes in
/// `points` (sorted by block and number, each newer than the clock's entry for its block, at
/// most one per location).
#[derive(Debug, PartialEq, Eq)]
pub struct View {
    clock: Box<[u32]>,
    points: Vec<Point>,
}

impl Clone for View {
    fn clone(&self) -> View {
        View {
            clock: self.clock.clone(),
            points: self.points.clone(),
        }
    }

    /// Reuses `self`'s buffers (a barrier copies one view into every thread of a block).
    fn clone_from(&mut self, source: &View) {
        if self.clock.len() == source.clock.len() {
            self.clock.copy_from_slice(&source.clock);
        } else {
            self.clock = source.clock.clone();
        }
        self.points.clone_from(&source.points);
    }
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
        self.clock[block as usize] >= seq
            || self
                .points
                .binary_search_by_key(&(block, seq), Point::name)
                .is_ok()
    }

    /// Whether the view holds no write at all.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty() && self.clock.iter().all(|&s| s == 0)
    }

    /// Adds write `seq` of `block` and every earlier write of that block.
    pub fn advance(&mut self, block: u32, seq: u32) {
        let c = &mut self.clock[block as usize];
        if *c < seq {
            *c = seq;
            self.drop_covered_points();
        }
    }

    /// Adds one write by itself. A known newer write of the same location makes it redundant
    /// (a reader that must see the newer one sees nothing older), and it replaces an older
    /// one. Past [`POINTS`] single writes, the first (lowest block, oldest there) is folded
    /// into the clock.
    pub fn add_point(&mut self, p: Point) {
        if self.clock[p.block as usize] >= p.seq {
            return;
        }
        if let Some(i) = self.points.iter().position(|q| q.location == p.location) {
            if self.points[i].co >= p.co {
                return;
            }
            self.points.remove(i);
        }
        let Err(i) = self.points.binary_search_by_key(&p.name(), Point::name) else {
            return;
        };
        self.points.insert(i, p);
        if self.points.len() > POINTS {
            let first = self.points[0];
            self.advance(first.block, first.seq);
        }
    }

    /// Adds everything `other` holds.
    pub fn join(&mut self, other: &View) {
        let mut raised = false;
        for (a, b) in self.clock.iter_mut().zip(other.clock.iter()) {
            if *a < *b {
                *a = *b;
                raised = true;
            }
        }
        if raised {
            self.drop_covered_points();
        }
        if self.holds_points_of(other) {
            return;
        }
        for &p in &other.points {
            self.add_point(p);
        }
    }

    /// Whether every single write of `other` is already in `self` (one walk over both sorted
    /// lists: joins of views that share their points are the common case).
    fn holds_points_of(&self, other: &View) -> bool {
        let mut mine = self.points.iter().map(Point::name).peekable();
        other.points.iter().all(|p| {
            if self.clock[p.block as usize] >= p.seq {
                return true;
            }
            while mine.next_if(|&q| q < p.name()).is_some() {}
            mine.next_if_eq(&p.name()).is_some()
        })
    }

    fn drop_covered_points(&mut self) {
        let clock = &self.clock;
        self.points.retain(|p| clock[p.block as usize] < p.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Write `seq` of `block`, at a location of its own.
    fn write(block: u32, seq: u32) -> Point {
        Point {
            block,
            seq,
            location: u64::from(block) << 32 | u64::from(seq),
            co: u64::from(seq),
        }
    }

    #[test]
    fn a_point_brings_only_its_own_write() {
        let mut v = View::new(2);
        v.add_point(write(0, 5));
        assert!(v.covers(0, 5));
        assert!(!v.covers(0, 4));
        assert!(!v.covers(0, 6));
    }

    #[test]
    fn the_clock_brings_every_earlier_write_of_the_block_and_absorbs_points() {
        let mut v = View::new(2);
        v.add_point(write(1, 3));
        v.advance(1, 4);
        assert!(v.covers(1, 1) && v.covers(1, 4) && !v.covers(1, 5));
        assert!(v.points.is_empty());
    }

    #[test]
    fn joining_keeps_both_sides_points_and_the_larger_clock() {
        let mut a = View::new(2);
        a.add_point(write(0, 7));
        let mut b = View::new(2);
        b.advance(0, 2);
        b.add_point(write(1, 9));
        a.join(&b);
        assert!(a.covers(0, 7) && a.covers(0, 2) && !a.covers(0, 6));
        assert!(a.covers(1, 9) && !a.covers(1, 8));
    }

    #[test]
    fn a_coherence_later_write_of_the_same_location_replaces_the_older_point() {
        let mut v = View::new(2);
        let at = |block, seq, co| Point {
            block,
            seq,
            location: 7,
            co,
        };
        v.add_point(at(0, 3, 10));
        v.add_point(at(1, 2, 12));
        assert!(v.covers(1, 2) && !v.covers(0, 3));
        // An older write of the location adds nothing.
        v.add_point(at(0, 3, 10));
        assert_eq!(v.points.len(), 1);
    }

    #[test]
    fn too_many_points_fold_the_first_into_the_clock_which_is_only_stronger() {
        let mut v = View::new(1);
        for k in (1..=POINTS as u32 + 1).rev() {
            v.add_point(write(0, 2 * k));
        }
        assert_eq!(v.points.len(), POINTS);
        // The first point (2) went into the clock, taking write 1 along.
        assert!(v.covers(0, 1) && v.covers(0, 2) && !v.covers(0, 3));
        assert!(v.covers(0, 4) && !v.covers(0, 5));
        assert!(v.covers(0, 2 * (POINTS as u32 + 1)));
    }
}
