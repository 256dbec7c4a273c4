//! cbe-dot and cbe-ht: the two "CUDA by Example" case studies, as Rust apps with CPU checks.
//!
//! Both use a global spin-lock (`atomicCAS` to take it, `atomicExch` to release it) with plain
//! accesses in the critical section and no fence before the release, so a weak memory model can
//! lose an update. Their post-conditions need more than a result word (cbe-ht walks the linked
//! lists of the table), so their host side is written here, with the reference computed on the
//! CPU, rather than as a manifest with a check kernel.

use super::{linear, replaced_texts, App, AppError, KernelSource, RunContext, Size};
use super::{PatchedFile, Unpatchable, Verdict};
use crate::backend::KernelArg;
use rand::Rng;
use std::collections::HashSet;
use std::sync::Arc;

/// Sizes of one run of cbe-dot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DotSize {
    n: usize,
    blocks: u32,
    threads: u32,
}

/// Dot product whose blocks add their partial sums into one result under a global spin-lock.
#[derive(Debug, Clone)]
pub struct CbeDot {
    source: KernelSource,
}

impl CbeDot {
    pub fn new(source: KernelSource) -> CbeDot {
        CbeDot { source }
    }

    fn size(size: Size) -> DotSize {
        match size {
            Size::Sim => DotSize {
                n: 256,
                blocks: 4,
                threads: 32,
            },
            Size::Gpu => DotSize {
                n: 1 << 20,
                blocks: 256,
                threads: 256,
            },
        }
    }
}

impl App for CbeDot {
    fn name(&self) -> &str {
        "cbe-dot"
    }

    fn description(&self) -> &str {
        "dot product; each block adds its partial sum into a global result inside a critical \
         section guarded by a custom spin-lock (atomicCAS / atomicExch)"
    }

    fn postcondition(&self) -> &str {
        "the result equals the CPU dot product exactly (inputs are small integers, so every \
         partial sum is exact in f32) and the lock is released"
    }

    fn source(&self) -> &KernelSource {
        &self.source
    }

    fn patched(&self, files: &[PatchedFile]) -> Result<Arc<dyn App>, Unpatchable> {
        Ok(Arc::new(CbeDot::new(replaced_texts(&self.source, files)?)))
    }

    fn kernels(&self, _size: Size) -> Vec<String> {
        vec!["dot".to_string()]
    }

    fn parameters(&self, size: Size) -> Vec<(String, i64)> {
        let s = CbeDot::size(size);
        vec![
            ("n".to_string(), s.n as i64),
            ("blocks".to_string(), s.blocks as i64),
            ("threads".to_string(), s.threads as i64),
        ]
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Verdict, AppError> {
        let s = CbeDot::size(ctx.size());
        let mut rng = ctx.rng();
        // Products are 1..=9, so every block's partial sum is at least 1 (a lost update always
        // shows) and every sum stays far below 2^24 (exact in f32, whatever the order).
        let a: Vec<f32> = (0..s.n).map(|_| rng.random_range(1..=3) as f32).collect();
        let b: Vec<f32> = (0..s.n).map(|_| rng.random_range(1..=3) as f32).collect();
        let expected: f64 = a.iter().zip(&b).map(|(x, y)| (x * y) as f64).sum();

        let a_buf = ctx.upload("a", &a)?;
        let b_buf = ctx.upload("b", &b)?;
        let result = ctx.alloc("result", 4)?;
        let lock = ctx.alloc("lock", 4)?;
        ctx.launch(
            "dot",
            linear(s.blocks, s.threads),
            vec![
                KernelArg::ptr(a_buf),
                KernelArg::ptr(b_buf),
                KernelArg::ptr(result),
                KernelArg::ptr(lock),
                KernelArg::I32(s.n as i32),
            ],
        )?;
        let got = ctx.download::<f32>("result", result, 1)?[0];
        let lock = ctx.download::<i32>("lock", lock, 1)?[0];
        if got as f64 != expected {
            return Ok(Verdict::fail(format!(
                "result {got} differs from the CPU dot product {expected} by {} (an update in the \
                 critical section was lost or read stale)",
                expected - got as f64
            )));
        }
        if lock != 0 {
            return Ok(Verdict::fail(format!(
                "the lock is {lock} after the kernel, not 0"
            )));
        }
        Ok(Verdict::Pass)
    }
}

/// `EMPTY` of the kernel: the end of a bucket list.
const EMPTY: u32 = u32::MAX;

/// Sizes of one run of cbe-ht.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HtSize {
    n: usize,
    buckets: usize,
    blocks: u32,
    threads: u32,
}

/// Hashtable insertion with a spin-lock per bucket.
#[derive(Debug, Clone)]
pub struct CbeHt {
    source: KernelSource,
}

impl CbeHt {
    pub fn new(source: KernelSource) -> CbeHt {
        CbeHt { source }
    }

    fn size(size: Size) -> HtSize {
        match size {
            Size::Sim => HtSize {
                n: 128,
                buckets: 8,
                blocks: 4,
                threads: 32,
            },
            Size::Gpu => HtSize {
                n: 1 << 16,
                buckets: 1024,
                blocks: 64,
                threads: 256,
            },
        }
    }
}

/// The kernel's `ht_hash`.
pub fn ht_hash(mut key: u32, buckets: u32) -> u32 {
    key ^= key >> 16;
    key = key.wrapping_mul(0x7feb_352d);
    key ^= key >> 15;
    key % buckets
}

impl App for CbeHt {
    fn name(&self) -> &str {
        "cbe-ht"
    }

    fn description(&self) -> &str {
        "hashtable insertion into per-bucket linked lists, each bucket guarded by a custom \
         spin-lock (atomicCAS / atomicExch); entries come from a pool via atomicAdd"
    }

    fn postcondition(&self) -> &str {
        "every inserted key is in the final table exactly once, in the bucket it hashes to; the \
         pool counter equals the number of keys and every lock is released"
    }

    fn source(&self) -> &KernelSource {
        &self.source
    }

    fn patched(&self, files: &[PatchedFile]) -> Result<Arc<dyn App>, Unpatchable> {
        Ok(Arc::new(CbeHt::new(replaced_texts(&self.source, files)?)))
    }

    fn kernels(&self, _size: Size) -> Vec<String> {
        vec!["ht_insert".to_string()]
    }

    fn parameters(&self, size: Size) -> Vec<(String, i64)> {
        let s = CbeHt::size(size);
        vec![
            ("n".to_string(), s.n as i64),
            ("buckets".to_string(), s.buckets as i64),
            ("blocks".to_string(), s.blocks as i64),
            ("threads".to_string(), s.threads as i64),
        ]
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Verdict, AppError> {
        let s = CbeHt::size(ctx.size());
        let mut rng = ctx.rng();
        let mut seen = HashSet::with_capacity(s.n);
        let mut keys = Vec::with_capacity(s.n);
        while keys.len() < s.n {
            let k: u32 = rng.random();
            if k != EMPTY && seen.insert(k) {
                keys.push(k);
            }
        }

        let keys_buf = ctx.upload("keys", &keys)?;
        let head = ctx.alloc("bucket_head", s.buckets * 4)?;
        ctx.memset("bucket_head", head, 0xff)?;
        let locks = ctx.alloc("bucket_lock", s.buckets * 4)?;
        let entry_key = ctx.alloc("entry_key", s.n * 4)?;
        let entry_next = ctx.alloc("entry_next", s.n * 4)?;
        let pool_next = ctx.alloc("pool_next", 4)?;
        ctx.launch(
            "ht_insert",
            linear(s.blocks, s.threads),
            vec![
                KernelArg::ptr(keys_buf),
                KernelArg::I32(s.n as i32),
                KernelArg::ptr(head),
                KernelArg::ptr(locks),
                KernelArg::ptr(entry_key),
                KernelArg::ptr(entry_next),
                KernelArg::ptr(pool_next),
                KernelArg::I32(s.buckets as i32),
            ],
        )?;

        let heads: Vec<u32> = ctx.download("bucket_head", head, s.buckets)?;
        let locks: Vec<i32> = ctx.download("bucket_lock", locks, s.buckets)?;
        let entry_key: Vec<u32> = ctx.download("entry_key", entry_key, s.n)?;
        let entry_next: Vec<u32> = ctx.download("entry_next", entry_next, s.n)?;
        let pool_next = ctx.download::<u32>("pool_next", pool_next, 1)?[0];
        Ok(check_table(
            &keys,
            &heads,
            &locks,
            &entry_key,
            &entry_next,
            pool_next,
        ))
    }
}

/// The post-condition of cbe-ht on the downloaded table.
fn check_table(
    keys: &[u32],
    heads: &[u32],
    locks: &[i32],
    entry_key: &[u32],
    entry_next: &[u32],
    pool_next: u32,
) -> Verdict {
    if pool_next as usize != keys.len() {
        return Verdict::fail(format!(
            "pool counter is {pool_next}, expected {}",
            keys.len()
        ));
    }
    if let Some(b) = locks.iter().position(|l| *l != 0) {
        return Verdict::fail(format!(
            "lock of bucket {b} is {} after the kernel",
            locks[b]
        ));
    }
    let n = keys.len();
    let mut visited = vec![false; n];
    let mut found: HashSet<u32> = HashSet::with_capacity(n);
    for (bucket, &head) in heads.iter().enumerate() {
        let mut entry = head;
        while entry != EMPTY {
            let e = entry as usize;
            if e >= n {
                return Verdict::fail(format!(
                    "bucket {bucket} links to entry {entry}, outside the pool of {n}"
                ));
            }
            if visited[e] {
                return Verdict::fail(format!(
                    "entry {entry} is reached twice (a cycle or a shared tail in bucket {bucket})"
                ));
            }
            visited[e] = true;
            let key = entry_key[e];
            let home = ht_hash(key, heads.len() as u32) as usize;
            if home != bucket {
                return Verdict::fail(format!(
                    "bucket {bucket} holds key {key:#x} (entry {entry}), which hashes to bucket \
                     {home} (a stale entry field was read)"
                ));
            }
            if !found.insert(key) {
                return Verdict::fail(format!("key {key:#x} is in the table twice"));
            }
            entry = entry_next[e];
        }
    }
    let missing: Vec<u32> = keys
        .iter()
        .copied()
        .filter(|k| !found.contains(k))
        .collect();
    if let Some(first) = missing.first() {
        return Verdict::fail(format!(
            "{} of {n} keys are missing from the table (e.g. {first:#x}, bucket {}): an insertion \
             was lost",
            missing.len(),
            ht_hash(*first, heads.len() as u32)
        ));
    }
    // Every reached entry gave a distinct key and all n keys were reached, so the table holds
    // exactly the inserted keys.
    Verdict::Pass
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds the table a correct run of the kernel could leave: entries in order, each pushed
    /// at the head of its bucket.
    fn table(keys: &[u32], buckets: usize) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let mut heads = vec![EMPTY; buckets];
        let mut entry_key = vec![0; keys.len()];
        let mut entry_next = vec![0; keys.len()];
        for (e, &k) in keys.iter().enumerate() {
            let b = ht_hash(k, buckets as u32) as usize;
            entry_key[e] = k;
            entry_next[e] = heads[b];
            heads[b] = e as u32;
        }
        (heads, entry_key, entry_next)
    }

    #[test]
    fn hash_matches_the_kernel_formula() {
        // key ^= key >> 16; key *= 0x7feb352d; key ^= key >> 15 (all mod 2^32)
        let mut k: u32 = 0x1234_5678;
        k ^= k >> 16;
        k = k.wrapping_mul(0x7feb352d);
        k ^= k >> 15;
        assert_eq!(ht_hash(0x1234_5678, 7), k % 7);
    }

    #[test]
    fn table_check_accepts_a_good_table_and_names_each_fault() {
        let keys: Vec<u32> = (0..40).map(|i| i * 7919 + 3).collect();
        let (heads, ek, en) = table(&keys, 4);
        let locks = vec![0; 4];
        assert_eq!(
            check_table(&keys, &heads, &locks, &ek, &en, 40),
            Verdict::Pass
        );

        // A lost insertion: the last entry's bucket head still points past it.
        let (mut h2, ek2, en2) = table(&keys, 4);
        let b = ht_hash(keys[39], 4) as usize;
        h2[b] = en2[39];
        let v = check_table(&keys, &h2, &locks, &ek2, &en2, 40);
        assert!(v.to_string().contains("1 of 40 keys are missing"), "{v}");

        // A stale key field.
        let (h3, mut ek3, en3) = table(&keys, 4);
        ek3[39] = 0;
        let v = check_table(&keys, &h3, &locks, &ek3, &en3, 40);
        assert!(!v.is_pass());

        // A cycle.
        let (h4, ek4, mut en4) = table(&keys, 4);
        let head = h4[b] as usize;
        en4[head] = head as u32;
        let v = check_table(&keys, &h4, &locks, &ek4, &en4, 40);
        assert!(v.to_string().contains("reached twice"), "{v}");

        // An out-of-pool link, a held lock, a wrong pool counter.
        let (mut h5, ek5, en5) = table(&keys, 4);
        h5[0] = 1000;
        assert!(check_table(&keys, &h5, &locks, &ek5, &en5, 40)
            .to_string()
            .contains("outside the pool"));
        assert!(!check_table(&keys, &heads, &[0, 1, 0, 0], &ek, &en, 40).is_pass());
        assert!(!check_table(&keys, &heads, &locks, &ek, &en, 39).is_pass());
    }
}
