//! The weak-memory state: per-thread store buffers and per-block stale-value caches.
//!
//! Only global memory is weak; the rules that decide *when* entries are pushed, drained and
//! invalidated live in `exec.rs` and `sched.rs` (and are documented in `mod.rs`). This file holds
//! the two data structures and the operations that keep them coherent:
//!
//! - [`StoreBuffer`]: a thread's pending global stores, oldest first. An entry may drain only if
//!   no older entry of the same buffer overlaps it (FIFO per address), so a thread's stores to one
//!   location reach memory in program order, while stores to different locations may reach it in
//!   any order. Loads of the owning thread see the buffer (byte-wise newest store wins).
//! - [`StaleCache`]: values the threads of one block have read from global memory. A weak load
//!   may be served from it instead of memory. It only ever holds the newest value the block has
//!   observed for a location (every read from memory refreshes it, every write to memory by the
//!   block evicts it), so serving from it never lets a thread read a value older than one it has
//!   already seen: coherence (CoRR, CoWR) is preserved.

use super::memory::GlobalMemory;

/// A buffered global store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub addr: u64,
    pub size: u64,
    pub value: u64,
}

fn overlaps(a_addr: u64, a_size: u64, b_addr: u64, b_size: u64) -> bool {
    a_addr < b_addr + b_size && b_addr < a_addr + a_size
}

impl Pending {
    fn overlaps(&self, addr: u64, size: u64) -> bool {
        overlaps(self.addr, self.size, addr, size)
    }

    /// `value` (the `size` bytes at `addr`) with the bytes this store covers replaced.
    fn patch(&self, addr: u64, size: u64, mut value: u64) -> u64 {
        let lo = self.addr.max(addr);
        let hi = (self.addr + self.size).min(addr + size);
        for b in lo..hi {
            let byte = (self.value >> (8 * (b - self.addr))) & 0xff;
            let shift = 8 * (b - addr);
            value = (value & !(0xff << shift)) | (byte << shift);
        }
        value
    }
}

/// One thread's pending global stores, oldest first.
#[derive(Debug, Clone, Default)]
pub struct StoreBuffer {
    entries: Vec<Pending>,
}

impl StoreBuffer {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn push(&mut self, p: Pending) {
        self.entries.push(p);
    }

    /// Whether some pending store overlaps `[addr, addr + size)`.
    #[inline]
    pub fn overlaps(&self, addr: u64, size: u64) -> bool {
        self.entries.iter().any(|e| e.overlaps(addr, size))
    }

    /// What a load of the owning thread sees: `memory` (the value in memory) overlaid with the
    /// buffered stores, newest last.
    #[inline]
    pub fn forward(&self, addr: u64, size: u64, memory: u64) -> u64 {
        let mut value = memory;
        for e in &self.entries {
            if e.overlaps(addr, size) {
                value = if e.addr == addr && e.size == size {
                    e.value
                } else {
                    e.patch(addr, size, value)
                };
            }
        }
        value
    }

    /// Drains the entry near index `pick` that may drain first (the oldest entry overlapping it,
    /// transitively), writing it to memory. Returns the drained store.
    pub fn drain_one(&mut self, pick: usize, mem: &mut GlobalMemory) -> Option<Pending> {
        if self.entries.is_empty() {
            return None;
        }
        let mut i = pick.min(self.entries.len() - 1);
        while let Some(j) = (0..i).find(|&j| {
            let e = self.entries[i];
            self.entries[j].overlaps(e.addr, e.size)
        }) {
            i = j;
        }
        let e = self.entries.remove(i);
        // The address was checked when the store executed.
        let _ = mem.write(e.addr, e.size, e.value);
        Some(e)
    }

    /// Drains every entry overlapping `[addr, addr + size)` in program order (before an atomic on
    /// that location). Calls `drained` for each.
    pub fn drain_overlapping(
        &mut self,
        addr: u64,
        size: u64,
        mem: &mut GlobalMemory,
        mut drained: impl FnMut(&Pending),
    ) {
        while let Some(i) = self.entries.iter().position(|e| e.overlaps(addr, size)) {
            if let Some(e) = self.drain_one(i, mem) {
                drained(&e);
            }
        }
    }

    /// Drains everything in program order (a gpu/sys fence, a release, the end of the kernel).
    pub fn drain_all(&mut self, mem: &mut GlobalMemory, mut drained: impl FnMut(&Pending)) {
        for e in self.entries.drain(..) {
            let _ = mem.write(e.addr, e.size, e.value);
            drained(&e);
        }
    }
}

/// Values recently read from global memory by one block.
#[derive(Debug, Clone, Default)]
pub struct StaleCache {
    entries: Vec<Pending>,
}

/// How many locations a block's stale cache remembers.
const STALE_CAPACITY: usize = 64;

impl StaleCache {
    /// The cached value of exactly this location.
    #[inline]
    pub fn lookup(&self, addr: u64, size: u64) -> Option<u64> {
        self.entries
            .iter()
            .find(|e| e.addr == addr && e.size == size)
            .map(|e| e.value)
    }

    pub fn is_full(&self) -> bool {
        self.entries.len() >= STALE_CAPACITY
    }

    /// Records a value just read from memory (the newest the block has seen).
    pub fn observe(&mut self, addr: u64, size: u64, value: u64, victim: usize) {
        self.entries
            .retain(|e| !(e.overlaps(addr, size) && !(e.addr == addr && e.size == size)));
        if let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| e.addr == addr && e.size == size)
        {
            e.value = value;
            return;
        }
        if self.entries.len() >= STALE_CAPACITY {
            self.entries.swap_remove(victim % STALE_CAPACITY);
        }
        self.entries.push(Pending { addr, size, value });
    }

    /// Forgets every location overlapping this range (the block wrote it).
    pub fn evict(&mut self, addr: u64, size: u64) {
        if !self.entries.is_empty() {
            self.entries.retain(|e| !e.overlaps(addr, size));
        }
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarding_is_bytewise_newest() {
        let mut b = StoreBuffer::default();
        b.push(Pending {
            addr: 0x100,
            size: 4,
            value: 0x1111_1111,
        });
        b.push(Pending {
            addr: 0x101,
            size: 1,
            value: 0x22,
        });
        assert_eq!(b.forward(0x100, 4, 0), 0x1111_2211);
        assert_eq!(
            b.forward(0x100, 8, 0xffff_ffff_0000_0000),
            0xffff_ffff_1111_2211
        );
        assert_eq!(b.forward(0x200, 4, 7), 7);
    }

    #[test]
    fn drains_are_fifo_per_address() {
        let mut mem = GlobalMemory::default();
        let (_, a) = mem.alloc(64);
        let mut b = StoreBuffer::default();
        for (addr, value) in [(a, 1), (a + 8, 2), (a, 3)] {
            b.push(Pending {
                addr,
                size: 4,
                value,
            });
        }
        // Picking the newest store to `a` drains the oldest one first.
        assert_eq!(b.drain_one(2, &mut mem).unwrap().value, 1);
        assert_eq!(mem.read(a, 4), Ok(1));
        assert_eq!(b.drain_one(1, &mut mem).unwrap().value, 3);
        assert_eq!(b.drain_one(0, &mut mem).unwrap().value, 2);
        assert!(b.is_empty());
    }

    #[test]
    fn stale_cache_keeps_the_newest_observation() {
        let mut c = StaleCache::default();
        c.observe(0x10, 4, 1, 0);
        c.observe(0x10, 4, 2, 0);
        assert_eq!(c.lookup(0x10, 4), Some(2));
        c.observe(0x10, 8, 5, 0);
        assert_eq!(c.lookup(0x10, 4), None);
        c.evict(0x14, 1);
        assert_eq!(c.lookup(0x10, 8), None);
    }
}
