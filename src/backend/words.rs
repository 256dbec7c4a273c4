//! Host values and their little-endian images in device memory.
//!
//! Backends move bytes; drivers, apps and tests think in `u32`, `i32`, `f32` and `u64` words.
//! This is the one place that converts between the two, and [`read_buffer`] reads a whole
//! buffer back as words.

use super::{Backend, Buffer, Result};

/// A host value with a fixed little-endian device representation.
pub trait Word: Copy + Default {
    const BYTES: usize;
    fn put(self, out: &mut Vec<u8>);
    /// Reads from exactly `Self::BYTES` bytes.
    fn get(bytes: &[u8]) -> Self;
}

macro_rules! word {
    ($t:ty, $n:expr) => {
        impl Word for $t {
            const BYTES: usize = $n;
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                let mut a = [0u8; $n];
                a.copy_from_slice(&bytes[..$n]);
                <$t>::from_le_bytes(a)
            }
        }
    };
}

word!(u8, 1);
word!(u32, 4);
word!(i32, 4);
word!(f32, 4);
word!(u64, 8);

/// The bytes of `data`, element after element.
pub fn to_bytes<T: Word>(data: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() * T::BYTES);
    for &x in data {
        x.put(&mut out);
    }
    out
}

/// The elements of `bytes` (a trailing partial element is ignored).
pub fn from_bytes<T: Word>(bytes: &[u8]) -> Vec<T> {
    bytes.chunks_exact(T::BYTES).map(T::get).collect()
}

/// The whole of `buffer`, read back as elements of `T`.
pub fn read_buffer<T: Word, B: Backend + ?Sized>(
    backend: &mut B,
    buffer: Buffer,
) -> Result<Vec<T>> {
    let mut bytes = vec![0u8; buffer.bytes];
    backend.copy_out(buffer, 0, &mut bytes)?;
    Ok(from_bytes(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::{Device, MemoryModel, SimBackend, SimConfig};

    #[test]
    fn round_trip() {
        let v = [1.5f32, -2.0, 16777216.0];
        assert_eq!(from_bytes::<f32>(&to_bytes(&v)), v);
        let u = [u64::MAX, 7];
        assert_eq!(from_bytes::<u64>(&to_bytes(&u)), u);
        assert_eq!(to_bytes(&[1u32]), vec![1, 0, 0, 0]);
    }

    #[test]
    fn a_buffer_reads_back_as_the_words_copied_in() {
        let mut sim = SimBackend::new(SimConfig::new(MemoryModel::Sc, 0));
        let buffer = sim.alloc(12).unwrap();
        sim.copy_in(buffer, 0, &to_bytes(&[7u32, u32::MAX, 0x0102_0304]))
            .unwrap();
        let words: Vec<u32> = read_buffer(&mut sim, buffer).unwrap();
        assert_eq!(words, [7, u32::MAX, 0x0102_0304]);
        let dyn_backend: &mut dyn Backend = &mut sim;
        let halves: Vec<u64> = read_buffer(dyn_backend, buffer).unwrap();
        assert_eq!(halves, [(u64::from(u32::MAX) << 32) | 7]);
    }
}
