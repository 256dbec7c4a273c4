//! The host side of the harness control block.
//!
//! A kernel instrumented by [`crate::ptx::passes::harness`] reads everything that varies from run
//! to run from one block of global memory: the application's launch geometry, the thread
//! randomisation (a block permutation and per-block warp permutations), and the stress
//! parameters (iterations, scratchpad, `sys` locations, seed). Keeping all of it in memory rather
//! than in the PTX lets one instrumented, JIT-compiled module serve a whole campaign. This module
//! builds that block from a few parameters and a seed, deterministically, and lays it out as
//! [`layout`] says.
//!
//! `sys` locations are the *first word* of `spread` distinct patches chosen at random, as in the
//! paper's tuning (section 3.3: "the first location in each critical patch-sized region"); the
//! paper found stressing any word of a patch about equally effective.

pub use crate::backend::Dim3;
pub use crate::ptx::passes::harness::layout;
use rand::seq::{index, SliceRandom};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

/// Threads per warp: warps are permuted as a whole.
pub const WARP_SIZE: u32 = 32;
/// The largest control block built, in words (1 GiB), so that absurd inputs fail cleanly.
pub const MAX_WORDS: u64 = 1 << 28;
/// The largest 1-D grid a launch may have.
pub const MAX_GRID_X: u64 = (1 << 31) - 1;

/// What one run's control block is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ControlParams {
    /// The application's grid and block, as it would be launched natively.
    pub app_grid: (u32, u32, u32),
    pub app_block: (u32, u32, u32),
    pub stress_blocks: u32,
    /// Thread randomisation (`+` environments); identity permutations when false.
    pub randomise: bool,
    pub seed: u64,
    pub stress_iterations: u32,
    /// Scratchpad size in 32-bit words.
    pub scratch_words: u32,
    /// Number of `sys` locations (0 when the strategy does not use them).
    pub spread: u32,
    /// Critical patch size in words.
    pub patch_words: u32,
    /// Device address of the scratchpad.
    pub scratch_address: u64,
}

/// Parameters that no control block can be built from.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum ControlError {
    #[error("the application grid {0:?} has a zero dimension")]
    EmptyGrid((u32, u32, u32)),
    #[error("the application block {0:?} has a zero dimension")]
    EmptyBlock((u32, u32, u32)),
    #[error("{0} is too large")]
    TooLarge(&'static str),
    #[error("the patch size must be at least one word when spread > 0")]
    ZeroPatch,
    #[error(
        "spread {spread} needs as many distinct patches of {patch_words} words, but the \
         scratchpad of {scratch_words} words holds {patches}"
    )]
    SpreadTooLarge {
        spread: u32,
        patch_words: u32,
        scratch_words: u32,
        patches: u32,
    },
    #[error("stress location {location} is outside the scratchpad of {scratch_words} words")]
    LocationOutside { location: u32, scratch_words: u32 },
}

/// One run's control block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlBlock {
    pub params: ControlParams,
    /// Real linear block id → virtual linear block id.
    pub block_perm: Vec<u32>,
    /// `app_blocks` rows of `warps_per_block` entries: for virtual block `b`, row `b` maps a real
    /// warp to the virtual warp it runs. A partial last warp always maps to itself.
    pub warp_perm: Vec<u32>,
    /// The `sys` locations: scratchpad word indices, each the start of a distinct patch.
    pub locations: Vec<u32>,
}

/// Independent random streams, so that turning randomisation on or off keeps the locations.
const BLOCK_STREAM: u64 = 1;
const WARP_STREAM: u64 = 2;
const LOCATION_STREAM: u64 = 3;

fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

fn product(dims: (u32, u32, u32)) -> u64 {
    dims.0 as u64 * dims.1 as u64 * dims.2 as u64
}

impl ControlBlock {
    /// Builds the control block of one run; the same parameters give the same block.
    pub fn new(params: &ControlParams) -> Result<ControlBlock, ControlError> {
        check(params)?;
        let mut block = ControlBlock {
            params: *params,
            block_perm: Vec::new(),
            warp_perm: Vec::new(),
            locations: locations(params)?,
        };
        block.block_perm = (0..block.app_blocks()).collect();
        let (warps, full) = (block.warps_per_block(), block.block_threads() / WARP_SIZE);
        block.warp_perm = (0..block.app_blocks()).flat_map(|_| 0..warps).collect();
        if params.randomise {
            block
                .block_perm
                .shuffle(&mut rng(params.seed, BLOCK_STREAM));
            let mut rng = rng(params.seed, WARP_STREAM);
            for row in block.warp_perm.chunks_mut(warps as usize) {
                row[..full as usize].shuffle(&mut rng);
            }
        }
        Ok(block)
    }

    /// The block with `sys` stress at exactly `locations` (scratchpad word indices) instead of
    /// random patches: tuning chooses where stress lands. Stressing thread `t` takes
    /// `locations[t % locations.len()]`, so the threads are split evenly over them.
    pub fn at_locations(mut self, locations: Vec<u32>) -> Result<ControlBlock, ControlError> {
        let scratch_words = self.params.scratch_words;
        if let Some(&location) = locations.iter().find(|&&l| l >= scratch_words) {
            return Err(ControlError::LocationOutside {
                location,
                scratch_words,
            });
        }
        self.params.spread = locations.len() as u32;
        check(&self.params)?;
        self.locations = locations;
        Ok(self)
    }

    /// Number of application blocks, `nctaid.x * nctaid.y * nctaid.z`.
    pub fn app_blocks(&self) -> u32 {
        product(self.params.app_grid) as u32
    }

    /// Threads per block, `ntid.x * ntid.y * ntid.z`.
    pub fn block_threads(&self) -> u32 {
        product(self.params.app_block) as u32
    }

    /// Warps per block, the last one possibly partial.
    pub fn warps_per_block(&self) -> u32 {
        self.block_threads().div_ceil(WARP_SIZE)
    }

    /// The real launch of the instrumented kernel: a 1-D grid of application and stressing
    /// blocks, and a 1-D block of the application's threads per block.
    pub fn launch_grid(&self) -> (Dim3, Dim3) {
        let blocks = self.app_blocks() + self.params.stress_blocks;
        ((blocks, 1, 1), (self.block_threads(), 1, 1))
    }

    /// The virtual `(%ctaid, %tid)` that the instrumented kernel computes for a thread of an
    /// application block, given its real block and thread ids; `None` past the application.
    pub fn virtual_ids(&self, real_block: u32, real_thread: u32) -> Option<(Dim3, Dim3)> {
        if real_block >= self.app_blocks() || real_thread >= self.block_threads() {
            return None;
        }
        let block = self.block_perm[real_block as usize];
        let row = (block * self.warps_per_block()) as usize;
        let warp = self.warp_perm[row + (real_thread / WARP_SIZE) as usize];
        let thread = warp * WARP_SIZE + real_thread % WARP_SIZE;
        Some((
            decompose(block, self.params.app_grid),
            decompose(thread, self.params.app_block),
        ))
    }

    /// The block as little-endian `u32` words.
    pub fn words(&self) -> Vec<u32> {
        let mut words = self.header();
        words.extend(&self.block_perm);
        words.extend(&self.warp_perm);
        words.extend(&self.locations);
        words
    }

    /// The bytes to copy to the device: [`Self::words`], little-endian.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.words().iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn header(&self) -> Vec<u32> {
        let p = &self.params;
        let block_perm = layout::HEADER_WORDS;
        let warp_perm = block_perm + self.block_perm.len() as u32;
        let locations = warp_perm + self.warp_perm.len() as u32;
        let mut header = vec![0u32; layout::HEADER_WORDS as usize];
        let fields = [
            (layout::APP_BLOCKS, self.app_blocks()),
            (layout::NCTAID_X, p.app_grid.0),
            (layout::NCTAID_Y, p.app_grid.1),
            (layout::NCTAID_Z, p.app_grid.2),
            (layout::NTID_X, p.app_block.0),
            (layout::NTID_Y, p.app_block.1),
            (layout::NTID_Z, p.app_block.2),
            (layout::BLOCK_THREADS, self.block_threads()),
            (layout::WARPS_PER_BLOCK, self.warps_per_block()),
            (layout::STRESS_BLOCKS, p.stress_blocks),
            (layout::STRESS_ITERATIONS, p.stress_iterations),
            (layout::SCRATCH_WORDS, p.scratch_words),
            (layout::SPREAD, p.spread),
            (layout::PATCH_WORDS, p.patch_words),
            (layout::SEED_LO, p.seed as u32),
            (layout::SEED_HI, (p.seed >> 32) as u32),
            (layout::SCRATCH_ADDRESS, p.scratch_address as u32),
            (
                layout::SCRATCH_ADDRESS + 1,
                (p.scratch_address >> 32) as u32,
            ),
            (layout::BLOCK_PERM_OFFSET, block_perm),
            (layout::WARP_PERM_OFFSET, warp_perm),
            (layout::LOCATIONS_OFFSET, locations),
            (layout::RANDOMISED, p.randomise as u32),
            (layout::LAYOUT_VERSION, layout::VERSION),
        ];
        for (word, value) in fields {
            header[word as usize] = value;
        }
        header
    }
}

/// Splits a linear id into x, y, z for the extent `dims`, x fastest.
fn decompose(linear: u32, dims: (u32, u32, u32)) -> (u32, u32, u32) {
    let x = linear % dims.0;
    let rest = linear / dims.0;
    (x, rest % dims.1, rest / dims.1)
}

/// Rejects parameters whose block could not be built or launched.
fn check(p: &ControlParams) -> Result<(), ControlError> {
    let (grid, block) = (p.app_grid, p.app_block);
    if grid.0 == 0 || grid.1 == 0 || grid.2 == 0 {
        return Err(ControlError::EmptyGrid(grid));
    }
    if block.0 == 0 || block.1 == 0 || block.2 == 0 {
        return Err(ControlError::EmptyBlock(block));
    }
    if product(grid) + p.stress_blocks as u64 > MAX_GRID_X {
        return Err(ControlError::TooLarge(
            "the grid of application and stressing blocks",
        ));
    }
    if product(block) > u32::MAX as u64 {
        return Err(ControlError::TooLarge("the application block"));
    }
    let warps = product(block).div_ceil(WARP_SIZE as u64);
    let words = layout::HEADER_WORDS as u64 + product(grid) * (1 + warps) + p.spread as u64;
    if words > MAX_WORDS {
        return Err(ControlError::TooLarge("the control block"));
    }
    Ok(())
}

/// `spread` distinct random patches, each given by its first word.
fn locations(p: &ControlParams) -> Result<Vec<u32>, ControlError> {
    if p.spread == 0 {
        return Ok(Vec::new());
    }
    if p.patch_words == 0 {
        return Err(ControlError::ZeroPatch);
    }
    let patches = p.scratch_words / p.patch_words;
    if p.spread > patches {
        return Err(ControlError::SpreadTooLarge {
            spread: p.spread,
            patch_words: p.patch_words,
            scratch_words: p.scratch_words,
            patches,
        });
    }
    let mut rng = rng(p.seed, LOCATION_STREAM);
    let chosen = index::sample(&mut rng, patches as usize, p.spread as usize);
    Ok(chosen
        .into_iter()
        .map(|patch| patch as u32 * p.patch_words)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn params() -> ControlParams {
        ControlParams {
            app_grid: (4, 3, 1),
            app_block: (10, 5, 2),
            stress_blocks: 5,
            randomise: true,
            seed: 42,
            stress_iterations: 1000,
            scratch_words: 64 * 32,
            spread: 8,
            patch_words: 32,
            scratch_address: 0x7f00_1234_5678_9a00,
        }
    }

    #[test]
    fn stress_can_be_placed_at_chosen_locations() {
        let block = ControlBlock::new(&params()).unwrap();
        let placed = block.clone().at_locations(vec![5, 7, 2047]).unwrap();
        assert_eq!(placed.locations, [5, 7, 2047]);
        let words = placed.words();
        assert_eq!(words[layout::SPREAD as usize], 3);
        let at = words[layout::LOCATIONS_OFFSET as usize] as usize;
        assert_eq!(&words[at..], [5, 7, 2047]);
        assert_eq!(
            block.at_locations(vec![1, 2048]).unwrap_err(),
            ControlError::LocationOutside {
                location: 2048,
                scratch_words: 2048
            }
        );
    }

    fn is_permutation(values: &[u32]) -> bool {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        sorted.iter().copied().eq(0..values.len() as u32)
    }

    #[test]
    fn permutations_are_permutations() {
        let block = ControlBlock::new(&params()).unwrap();
        assert_eq!(block.block_perm.len(), 12);
        assert!(is_permutation(&block.block_perm));
        assert_eq!(block.warps_per_block(), 4);
        for row in block.warp_perm.chunks(4) {
            assert!(is_permutation(row));
        }
        assert_ne!(
            block.block_perm,
            (0..12).collect::<Vec<_>>(),
            "seed 42 shuffles"
        );
    }

    #[test]
    fn partial_last_warp_stays_in_place() {
        // 100 threads: three full warps and a partial one of 4 threads.
        let block = ControlBlock::new(&params()).unwrap();
        assert!(block.warp_perm.chunks(4).all(|row| row[3] == 3));
        let moved = block
            .warp_perm
            .chunks(4)
            .filter(|row| row[..3] != [0, 1, 2])
            .count();
        assert!(moved > 0, "full warps are shuffled");
    }

    #[test]
    fn identity_without_randomisation() {
        let block = ControlBlock::new(&ControlParams {
            randomise: false,
            ..params()
        })
        .unwrap();
        assert_eq!(block.block_perm, (0..12).collect::<Vec<_>>());
        assert!(block.warp_perm.chunks(4).all(|row| row == [0, 1, 2, 3]));
        assert_eq!(block.virtual_ids(7, 33), Some(((3, 1, 0), (3, 3, 0))));
        let randomised = ControlBlock::new(&params()).unwrap();
        assert_eq!(
            block.locations, randomised.locations,
            "locations use their own stream"
        );
    }

    #[test]
    fn virtual_ids_cover_every_thread_once() {
        let block = ControlBlock::new(&params()).unwrap();
        let mut seen = HashSet::new();
        for b in 0..block.app_blocks() {
            for t in 0..block.block_threads() {
                let (vb, vt) = block.virtual_ids(b, t).unwrap();
                let linear = vt.0 + 10 * (vt.1 + 5 * vt.2);
                assert_eq!(linear % 32, t % 32, "lanes are kept");
                assert!(seen.insert((vb, vt)));
            }
        }
        assert_eq!(seen.len(), 1200);
        assert_eq!(block.virtual_ids(12, 0), None);
    }

    #[test]
    fn same_seed_same_bytes_other_seed_other_bytes() {
        let a = ControlBlock::new(&params()).unwrap().to_bytes();
        let b = ControlBlock::new(&params()).unwrap().to_bytes();
        let c = ControlBlock::new(&ControlParams {
            seed: 43,
            ..params()
        })
        .unwrap()
        .to_bytes();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn locations_are_distinct_patch_starts() {
        let block = ControlBlock::new(&params()).unwrap();
        assert_eq!(block.locations.len(), 8);
        assert!(block.locations.iter().all(|l| l % 32 == 0 && *l < 64 * 32));
        let distinct: HashSet<_> = block.locations.iter().collect();
        assert_eq!(distinct.len(), 8);
    }

    #[test]
    fn layout_of_the_bytes() {
        let block = ControlBlock::new(&params()).unwrap();
        let words = block.words();
        let bytes = block.to_bytes();
        assert_eq!(bytes.len(), words.len() * 4);
        assert_eq!(words.len(), 24 + 12 + 12 * 4 + 8);
        let word = |w: u32| words[w as usize];
        assert_eq!(word(layout::APP_BLOCKS), 12);
        assert_eq!(word(layout::BLOCK_THREADS), 100);
        assert_eq!(word(layout::LAYOUT_VERSION), layout::VERSION);
        let at = layout::byte_offset(layout::SCRATCH_ADDRESS) as usize;
        assert_eq!(at % 8, 0);
        let address = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        assert_eq!(address, 0x7f00_1234_5678_9a00);
        let bp = word(layout::BLOCK_PERM_OFFSET) as usize;
        assert_eq!(&words[bp..bp + 12], &block.block_perm[..]);
        let wp = word(layout::WARP_PERM_OFFSET) as usize;
        assert_eq!(&words[wp..wp + 48], &block.warp_perm[..]);
        let loc = word(layout::LOCATIONS_OFFSET) as usize;
        assert_eq!(&words[loc..], &block.locations[..]);
    }

    #[test]
    fn launch_is_one_dimensional() {
        let block = ControlBlock::new(&params()).unwrap();
        assert_eq!(block.launch_grid(), ((17, 1, 1), (100, 1, 1)));
    }

    #[test]
    fn bad_parameters_are_errors() {
        let bad = |p: ControlParams| ControlBlock::new(&p).unwrap_err();
        assert!(matches!(
            bad(ControlParams {
                app_grid: (0, 1, 1),
                ..params()
            }),
            ControlError::EmptyGrid(_)
        ));
        assert!(matches!(
            bad(ControlParams {
                app_block: (1, 0, 1),
                ..params()
            }),
            ControlError::EmptyBlock(_)
        ));
        assert!(matches!(
            bad(ControlParams {
                spread: 65,
                ..params()
            }),
            ControlError::SpreadTooLarge { patches: 64, .. }
        ));
        assert_eq!(
            bad(ControlParams {
                patch_words: 0,
                ..params()
            }),
            ControlError::ZeroPatch
        );
        assert!(matches!(
            bad(ControlParams {
                app_grid: (1 << 30, 4, 1),
                ..params()
            }),
            ControlError::TooLarge(_)
        ));
        assert!(matches!(
            bad(ControlParams {
                app_grid: (1 << 23, 1, 1),
                app_block: (1024, 1, 1),
                ..params()
            }),
            ControlError::TooLarge(_)
        ));
        let none = ControlBlock::new(&ControlParams {
            spread: 0,
            patch_words: 0,
            scratch_words: 0,
            ..params()
        });
        assert!(none.unwrap().locations.is_empty());
    }
}
