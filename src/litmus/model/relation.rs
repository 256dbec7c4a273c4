//! Binary relations over the events of one candidate execution, as one 64-bit row per event.
//!
//! Litmus executions have a few dozen events, so a row of bits per event makes union,
//! composition, closure and the acyclicity checks of the axioms a handful of word operations.

/// The most events one execution may have.
pub const MAX_EVENTS: usize = 64;

/// A relation over events `0..n`: bit `b` of row `a` means `a -> b`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    rows: Vec<u64>,
}

impl Relation {
    pub fn empty(n: usize) -> Relation {
        debug_assert!(n <= MAX_EVENTS);
        Relation { rows: vec![0; n] }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.iter().all(|r| *r == 0)
    }

    pub fn add(&mut self, a: usize, b: usize) {
        self.rows[a] |= 1 << b;
    }

    pub fn has(&self, a: usize, b: usize) -> bool {
        self.rows[a] >> b & 1 == 1
    }

    /// The events `a` relates to.
    pub fn row(&self, a: usize) -> u64 {
        self.rows[a]
    }

    pub fn intersect_with(&mut self, other: &Relation) {
        for (r, o) in self.rows.iter_mut().zip(&other.rows) {
            *r &= o;
        }
    }

    pub fn union_with(&mut self, other: &Relation) {
        for (r, o) in self.rows.iter_mut().zip(&other.rows) {
            *r |= o;
        }
    }

    /// `self ; other`.
    pub fn then(&self, other: &Relation) -> Relation {
        let rows = self
            .rows
            .iter()
            .map(|&row| bits(row).fold(0, |acc, z| acc | other.rows[z]))
            .collect();
        Relation { rows }
    }

    /// The transitive closure (Warshall).
    pub fn closure(&self) -> Relation {
        let mut rows = self.rows.clone();
        for k in 0..rows.len() {
            let via = rows[k];
            for row in rows.iter_mut() {
                if *row >> k & 1 == 1 {
                    *row |= via;
                }
            }
        }
        Relation { rows }
    }

    /// Whether some event relates to itself.
    pub fn reflexive_somewhere(&self) -> bool {
        self.rows.iter().enumerate().any(|(a, r)| r >> a & 1 == 1)
    }

    pub fn acyclic(&self) -> bool {
        !self.closure().reflexive_somewhere()
    }

    /// Whether `self ; other` relates some event to itself, without building it.
    pub fn cycle_with(&self, other: &Relation) -> bool {
        (0..self.rows.len()).any(|a| bits(self.rows[a]).any(|z| other.has(z, a)))
    }
}

/// The set bits of a word, lowest first.
pub fn bits(mut word: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if word == 0 {
            return None;
        }
        let b = word.trailing_zeros() as usize;
        word &= word - 1;
        Some(b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closure_of_a_chain_relates_its_ends_and_a_loop_is_a_cycle() {
        let mut r = Relation::empty(3);
        r.add(0, 1);
        r.add(1, 2);
        assert!(r.closure().has(0, 2));
        assert!(r.acyclic());
        r.add(2, 0);
        assert!(!r.acyclic());
    }

    #[test]
    fn composition_follows_both_steps() {
        let mut a = Relation::empty(3);
        a.add(0, 1);
        let mut b = Relation::empty(3);
        b.add(1, 2);
        let c = a.then(&b);
        assert!(c.has(0, 2) && !c.has(0, 1));
        let mut back = Relation::empty(3);
        back.add(2, 0);
        assert!(c.cycle_with(&back));
        assert!(!c.cycle_with(&a));
    }
}
