//! Simulated global memory: the device allocations (buffers and module variables).
//!
//! Every allocation gets its own byte vector at a fresh, never reused device address, so an
//! access outside all live allocations (out of bounds, after `free`, a wild pointer) is detected
//! and becomes a `Fault` rather than corrupting a neighbour. Addresses grow upwards from
//! [`GLOBAL_BASE`], far from the windows that generic addressing uses for shared and local memory.

/// Where the first global allocation starts.
pub const GLOBAL_BASE: u64 = 0x7000_0000_0000;

/// Gap left between allocations so that small overruns fault.
const GUARD_GAP: u64 = 256;

#[derive(Debug)]
struct Alloc {
    start: u64,
    data: Vec<u8>,
    live: bool,
}

/// Why an access failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemFault {
    Unmapped,
    Misaligned,
}

impl MemFault {
    /// What the faulting address is, in a fault's words.
    pub fn describe(self) -> &'static str {
        match self {
            MemFault::Unmapped => "outside every allocation",
            MemFault::Misaligned => "misaligned",
        }
    }
}

/// All global allocations of a backend.
#[derive(Debug)]
pub struct GlobalMemory {
    allocs: Vec<Alloc>,
    next: u64,
}

impl Default for GlobalMemory {
    fn default() -> Self {
        GlobalMemory {
            allocs: Vec::new(),
            next: GLOBAL_BASE,
        }
    }
}

impl GlobalMemory {
    /// Allocates `bytes` zeroed bytes, 256-byte aligned; returns (index, address).
    pub fn alloc(&mut self, bytes: usize) -> (u64, u64) {
        let start = self.next;
        self.next = (start + bytes as u64 + GUARD_GAP).div_ceil(256) * 256;
        self.allocs.push(Alloc {
            start,
            data: vec![0; bytes],
            live: true,
        });
        ((self.allocs.len() - 1) as u64, start)
    }

    /// Frees allocation `id`; false if it was not live.
    pub fn free(&mut self, id: u64) -> bool {
        match self.allocs.get_mut(id as usize) {
            Some(a) if a.live => {
                a.live = false;
                a.data = Vec::new();
                true
            }
            _ => false,
        }
    }

    /// The live allocation `id` as bytes.
    pub fn bytes_mut(&mut self, id: u64) -> Option<&mut [u8]> {
        self.allocs
            .get_mut(id as usize)
            .filter(|a| a.live)
            .map(|a| a.data.as_mut_slice())
    }

    /// Allocation index and offset of `[addr, addr + size)`.
    #[inline]
    fn locate(&self, addr: u64, size: u64) -> Result<(usize, usize), MemFault> {
        // Sizes are powers of two: a mask, not a division, on every access.
        let misaligned = match size.is_power_of_two() {
            true => addr & (size - 1) != 0,
            false => !addr.is_multiple_of(size),
        };
        if misaligned {
            return Err(MemFault::Misaligned);
        }
        let i = self.allocs.partition_point(|a| a.start <= addr);
        let a = i
            .checked_sub(1)
            .and_then(|i| self.allocs.get(i).map(|a| (i, a)));
        match a {
            Some((i, a)) if a.live && addr - a.start + size <= a.data.len() as u64 => {
                Ok((i, (addr - a.start) as usize))
            }
            _ => Err(MemFault::Unmapped),
        }
    }

    /// The bytes from `addr` to the end of its live allocation.
    pub fn bytes_from(&self, addr: u64) -> Result<&[u8], MemFault> {
        let (i, off) = self.locate(addr, 1)?;
        Ok(&self.allocs[i].data[off..])
    }

    /// Checks that an access of `size` bytes at `addr` is valid.
    pub fn check(&self, addr: u64, size: u64) -> Result<(), MemFault> {
        self.locate(addr, size).map(|_| ())
    }

    /// Reads `size` (1, 2, 4 or 8) bytes, little-endian.
    #[inline]
    pub fn read(&self, addr: u64, size: u64) -> Result<u64, MemFault> {
        let (i, off) = self.locate(addr, size)?;
        Ok(read_le(&self.allocs[i].data[off..off + size as usize]))
    }

    /// Writes the low `size` bytes of `value`.
    #[inline]
    pub fn write(&mut self, addr: u64, size: u64, value: u64) -> Result<(), MemFault> {
        let (i, off) = self.locate(addr, size)?;
        write_le(&mut self.allocs[i].data[off..off + size as usize], value);
        Ok(())
    }
}

/// Little-endian bytes to a value.
#[inline]
pub fn read_le(bytes: &[u8]) -> u64 {
    let mut v = [0u8; 8];
    v[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(v)
}

/// A value to little-endian bytes (as many as `out` holds).
#[inline]
pub fn write_le(out: &mut [u8], value: u64) {
    let n = out.len();
    out.copy_from_slice(&value.to_le_bytes()[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_separate_and_checked() {
        let mut m = GlobalMemory::default();
        let (a, at) = m.alloc(16);
        let (_, bt) = m.alloc(8);
        assert!(bt >= at + 16 + GUARD_GAP);
        m.write(at + 4, 4, 0xdead_beef).unwrap();
        assert_eq!(m.read(at + 4, 4), Ok(0xdead_beef));
        assert_eq!(m.read(at + 16, 4), Err(MemFault::Unmapped));
        assert_eq!(m.read(at + 2, 4), Err(MemFault::Misaligned));
        assert_eq!(m.read(at - 4, 4), Err(MemFault::Unmapped));
        assert!(m.free(a));
        assert_eq!(m.read(at, 4), Err(MemFault::Unmapped));
        assert!(!m.free(a));
    }
}
