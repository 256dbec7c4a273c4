//! Which threads a scope includes. PTX scopes nest: a CTA inside a GPU inside the system. The
//! model asks, for a pair of threads, the narrowest scope that holds both (their *tier*), and
//! whether an operation's scope reaches that far; released views and fence-SC frontiers are
//! kept per tier. Blocks run on one GPU unless the launch places them on several (litmus tests
//! across GPUs, [`Device::place_on_gpus`](crate::device::Device::place_on_gpus)); then `.gpu`
//! reaches only the blocks of the same GPU and `.sys` reaches all.

use crate::isa::Reach;

/// The narrowest scope that holds two threads: their CTA, their GPU, or only the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    Cta = 0,
    Gpu = 1,
    Sys = 2,
}

/// Every tier, narrowest first.
pub const TIERS: [Tier; 3] = [Tier::Cta, Tier::Gpu, Tier::Sys];

/// The tiers an ordering (fence, release, acquire) at `reach` takes part in, narrowest first:
/// its own block's always, and every wider one its scope includes.
pub fn tiers_of(reach: Reach) -> impl Iterator<Item = Tier> {
    TIERS
        .into_iter()
        .filter(move |t| *t == Tier::Cta || t.within(reach))
}

impl Tier {
    /// Whether a strong operation at `reach` includes a thread of this tier.
    pub fn within(self, reach: Reach) -> bool {
        match reach {
            Reach::Weak => false,
            Reach::Cta => self == Tier::Cta,
            Reach::Gpu => self <= Tier::Gpu,
            Reach::Sys => true,
        }
    }
}

/// Which GPU each block of a launch runs on: block `b` on `cycle[b % cycle.len()]` (a launch of
/// several litmus instances repeats one instance's placement), every block on GPU 0 when the
/// cycle is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gpus {
    cycle: Vec<u32>,
}

impl Gpus {
    /// Blocks placed by `cycle`; a cycle naming one GPU is the same as none.
    pub fn new(cycle: &[u32]) -> Gpus {
        let one = cycle.windows(2).all(|w| w[0] == w[1]);
        Gpus {
            cycle: if one { Vec::new() } else { cycle.to_vec() },
        }
    }

    /// Whether every block runs on one GPU.
    pub fn is_one(&self) -> bool {
        self.cycle.is_empty()
    }

    /// The GPU block `block` runs on.
    pub fn of(&self, block: u32) -> u32 {
        match self.cycle.len() {
            0 => 0,
            n => self.cycle[block as usize % n],
        }
    }

    /// The tier of a thread of block `a` and one of block `b`.
    pub fn tier(&self, a: u32, b: u32) -> Tier {
        if a == b {
            Tier::Cta
        } else if self.of(a) == self.of(b) {
            Tier::Gpu
        } else {
            Tier::Sys
        }
    }

    /// The key of the fence-SC frontier of `tier` that block `block` joins: its block, its
    /// GPU, or the system's one.
    pub fn group(&self, tier: Tier, block: u32) -> (Tier, u32) {
        match tier {
            Tier::Cta => (tier, block),
            Tier::Gpu => (tier, self.of(block)),
            Tier::Sys => (tier, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_gpu_puts_every_pair_of_blocks_in_the_gpu_tier() {
        for gpus in [Gpus::default(), Gpus::new(&[3, 3])] {
            assert_eq!(gpus.tier(4, 4), Tier::Cta);
            assert_eq!(gpus.tier(4, 5), Tier::Gpu);
        }
    }

    #[test]
    fn blocks_on_other_gpus_meet_only_at_sys_scope() {
        let gpus = Gpus::new(&[0, 1]);
        // instance 1's blocks 2 and 3 repeat instance 0's placement
        assert_eq!((gpus.of(2), gpus.of(3)), (0, 1));
        assert_eq!(gpus.tier(0, 2), Tier::Gpu);
        assert_eq!(gpus.tier(0, 1), Tier::Sys);
        assert!(!Tier::Sys.within(Reach::Gpu) && Tier::Sys.within(Reach::Sys));
        assert!(Tier::Gpu.within(Reach::Gpu) && !Tier::Gpu.within(Reach::Cta));
        assert!(!Tier::Cta.within(Reach::Weak) && Tier::Cta.within(Reach::Cta));
    }
}
