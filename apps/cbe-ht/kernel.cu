// cbe-ht: hashtable insertion with per-bucket spin-locks (written from scratch for gpuwmm).
//
// Idiom: the table has nbuckets buckets, each a singly linked list of entries threaded through
// entry_next, with bucket_head[b] the index of the first entry (EMPTY when none). Entries come
// from a preallocated pool: a thread takes the next free index with atomicAdd(pool_next, 1).
// To insert, a thread takes the bucket's spin-lock (atomicCAS(&bucket_lock[b], 0, 1)), writes
// the entry's key and next fields and the new bucket head with plain stores after a plain load of
// the old head, and releases the lock with atomicExch(&bucket_lock[b], 0).
//
// Deliberately NO fences: the plain stores inside the critical section may become visible after
// the unlock, so the next owner of the lock can read a stale head and an insertion is lost, or
// follow a link to an entry whose fields are not yet visible.
//
// Post-condition: every key keys[0..n) is reachable from its bucket's head exactly once, each
// list has only keys that hash to its bucket, *pool_next == n and every lock is 0.
//
// Launch: 1-D grid and block, any sizes; bucket_head[*] = EMPTY, bucket_lock[*] = 0,
// *pool_next = 0 beforehand; the pool (entry_key, entry_next) holds at least n entries.
// Threads of one warp may contend for one lock: the loop below is written so that a lane only
// leaves it after its own insertion, which avoids the classic intra-warp spin-lock deadlock on
// GPUs without independent thread scheduling.

#define EMPTY 0xffffffffu

__device__ unsigned ht_hash(unsigned key, int nbuckets)
{
    key ^= key >> 16;
    key *= 0x7feb352du;
    key ^= key >> 15;
    return key % (unsigned)nbuckets;
}

extern "C" __global__ void ht_insert(const unsigned *keys, int n, unsigned *bucket_head,
                                     int *bucket_lock, unsigned *entry_key, unsigned *entry_next,
                                     unsigned *pool_next, int nbuckets)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        unsigned key = keys[i];
        unsigned bucket = ht_hash(key, nbuckets);
        unsigned entry = atomicAdd(pool_next, 1u);
        bool done = false;
        while (!done) {
            if (atomicCAS(&bucket_lock[bucket], 0, 1) == 0) {
                entry_key[entry] = key;                    // plain stores in the critical section
                entry_next[entry] = bucket_head[bucket];   // plain load of the old head
                bucket_head[bucket] = entry;
                atomicExch(&bucket_lock[bucket], 0);       // release, with no fence before it
                done = true;
            }
        }
    }
}
