// ct-octree: octree partitioning of particles, blocks sharing work through non-blocking queues
// (written from scratch for gpuwmm; it reimplements the communication idiom of the octree
// partitioning of Cederman and Tsigas, not their code).
//
// Idiom: a task is an octree node (first particle, particle count, level, path). Every block owns
// one lock-free queue of nodes: only its owner adds to it (at the tail), every block may take from
// it (at the head, claimed with atomicCAS, so each node is taken once). A block works as a unit:
// thread 0 takes a node from its own queue, or, when that is empty, steals from the other queues
// in turn; the whole block then either
//   - splits the node (more than leaf_size particles, level below depth): counts its particles
//     per octant, and scatters their ids, grouped by octant, into the other of two id arrays
//     (levels alternate between ids_a and ids_b); thread 0 then adds the non-empty children to its
//     own queue, or
//   - makes it a leaf: copies its particle ids into `out` and records the leaf (start, count,
//     level, path); thread 0 adds the count to `placed`.
// A child's particles are written by the block that split its parent and read by the block that
// takes the child: the queue carries them from one block to another. A block stops when `placed`
// reaches n, or after max_idle consecutive rounds that found every queue empty (a run that lost a
// node ends instead of hanging; the check then reports the missing particles).
//
// Deliberately NO fences, as in the original application: a queue item (four plain stores) is
// published by a volatile store of the tail, and taken after volatile loads of head and tail. On
// a weak memory model a thief may see the new tail and still read a stale item, or the item but
// stale particle ids.
//
// Post-condition (meta-data recorded during the run, as the paper did): every original particle
// is in the final octree exactly once (in `out`, inside a recorded leaf), in the right octant of
// every level (its Morton-code prefix is the leaf's path), every leaf is small enough or at the
// deepest level, and no block gave up, overflowed a queue or took an invalid node. ot_check is
// that post-condition as a check kernel (app.toml names it).
//
// Launch: ot_init<<<1, 1>>> (puts the root into queue 0), then ot_run<<<queues, threads>>> (one
// queue per block). Coordinates are integers in [0, 256); depth <= 8.

#define OT_WORDS 4          // a node: start, count, level, path
#define OT_COORD_BITS 8     // coordinates are integers in [0, 256); depth <= OT_COORD_BITS

// Error counters, errors[OT_ERR_*].
#define OT_ERR_OVERFLOW 0  // a queue or the leaf table was full
#define OT_ERR_BAD_NODE 1  // a node taken from a queue was out of range
#define OT_ERR_GAVE_UP 2   // a block stopped after max_idle empty rounds

// Round outcomes of thread 0, in s_state.
#define OT_NODE 0  // a node to process (in s_node)
#define OT_NONE 1  // nothing to do this round
#define OT_EXIT 2  // the block stops

struct Coords {
    const unsigned *x, *y, *z;
};

// The octant (0..7) of particle id at `level`: bit OT_COORD_BITS-1-level of x, y and z.
__device__ unsigned octant_of(Coords c, unsigned id, unsigned level)
{
    const unsigned bit = OT_COORD_BITS - 1 - level;
    return ((c.x[id] >> bit) & 1u) << 2 | ((c.y[id] >> bit) & 1u) << 1 | ((c.z[id] >> bit) & 1u);
}

extern "C" __global__ void ot_init(unsigned *items, unsigned *tail, unsigned n)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        items[0] = 0;  // the root: all n particles, level 0, empty path
        items[1] = n;
        items[2] = 0;
        items[3] = 0;
        tail[0] = 1;
    }
}

// The queue operations are written out in the kernel body, not in helper functions: fence sites
// are source lines of the kernel (inlined code counts as the line of its call), so every access
// of the idiom gets a line of its own.
extern "C" __global__ void ot_run(const unsigned *x, const unsigned *y, const unsigned *z,
                                  unsigned *ids_a, unsigned *ids_b, unsigned *items,
                                  unsigned *head, unsigned *tail, unsigned *out, unsigned *leaves,
                                  unsigned *leaf_count, unsigned *placed, unsigned *errors,
                                  unsigned n, unsigned depth, unsigned leaf_size,
                                  unsigned capacity, unsigned max_leaves, unsigned max_idle)
{
    __shared__ unsigned s_state;
    __shared__ unsigned s_node[OT_WORDS];
    __shared__ unsigned s_count[8];
    __shared__ unsigned s_first[8];
    __shared__ unsigned s_cursor[8];
    const Coords coords = {x, y, z};
    const unsigned queues = gridDim.x;
    const unsigned home = blockIdx.x;
    volatile unsigned *vhead = head;
    volatile unsigned *vtail = tail;
    unsigned idle = 0;  // thread 0: consecutive rounds that found every queue empty
    for (;;) {
        if (threadIdx.x == 0) {
            // Take the head node of the own queue, else of the next non-empty one.
            unsigned state = OT_NONE;
            for (unsigned k = 0; k < queues && state == OT_NONE; ++k) {
                const unsigned q = (home + k) % queues;
                for (;;) {
                    const unsigned h = vhead[q];
                    const unsigned t = vtail[q];
                    if (h >= t) {
                        break;  // empty
                    }
                    const unsigned *slot = &items[(q * capacity + h) * OT_WORDS];
                    const unsigned node_start = slot[0];
                    const unsigned node_count = slot[1];
                    const unsigned node_level = slot[2];
                    const unsigned node_path = slot[3];
                    if (atomicCAS(&head[q], h, h + 1) == h) {  // else another block took it
                        s_node[0] = node_start;
                        s_node[1] = node_count;
                        s_node[2] = node_level;
                        s_node[3] = node_path;
                        state = OT_NODE;
                        break;
                    }
                }
            }
            if (state == OT_NODE) {
                idle = 0;
                const bool valid = s_node[1] <= n && s_node[0] <= n - s_node[1] &&
                                   s_node[2] <= depth;
                if (!valid) {
                    atomicAdd(&errors[OT_ERR_BAD_NODE], 1u);
                    state = OT_NONE;
                }
            } else if (*(volatile unsigned *)placed >= n) {
                state = OT_EXIT;
            } else if (++idle >= max_idle) {
                atomicAdd(&errors[OT_ERR_GAVE_UP], 1u);
                state = OT_EXIT;
            }
            s_state = state;
        }
        if (threadIdx.x < 8) {
            s_count[threadIdx.x] = 0;
        }
        __syncthreads();
        const unsigned state = s_state;
        if (state == OT_EXIT) {
            break;
        }
        if (state == OT_NONE) {
            __syncthreads();  // s_state is read by all before thread 0 writes it again
            continue;
        }
        const unsigned start = s_node[0], count = s_node[1], level = s_node[2], path = s_node[3];
        const unsigned *src = level % 2 == 0 ? ids_a : ids_b;
        unsigned *dst = level % 2 == 0 ? ids_b : ids_a;
        if (count <= leaf_size || level == depth) {
            for (unsigned i = threadIdx.x; i < count; i += blockDim.x) {
                out[start + i] = src[start + i];
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                const unsigned leaf = atomicAdd(leaf_count, 1u);
                if (leaf < max_leaves) {
                    leaves[leaf * OT_WORDS + 0] = start;
                    leaves[leaf * OT_WORDS + 1] = count;
                    leaves[leaf * OT_WORDS + 2] = level;
                    leaves[leaf * OT_WORDS + 3] = path;
                } else {
                    atomicAdd(&errors[OT_ERR_OVERFLOW], 1u);
                }
                atomicAdd(placed, count);
            }
            continue;
        }
        // Split: count per octant, offsets, scatter the ids grouped by octant.
        for (unsigned i = threadIdx.x; i < count; i += blockDim.x) {
            atomicAdd(&s_count[octant_of(coords, src[start + i], level)], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned first = start;
            for (int o = 0; o < 8; ++o) {
                s_first[o] = first;
                s_cursor[o] = first;
                first += s_count[o];
            }
        }
        __syncthreads();
        for (unsigned i = threadIdx.x; i < count; i += blockDim.x) {
            const unsigned id = src[start + i];
            dst[atomicAdd(&s_cursor[octant_of(coords, id, level)], 1u)] = id;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            // Add the non-empty children to the tail of the own queue (only its owner adds).
            for (unsigned o = 0; o < 8; ++o) {
                if (s_count[o] > 0) {
                    const unsigned t = vtail[home];
                    if (t >= capacity) {
                        atomicAdd(&errors[OT_ERR_OVERFLOW], 1u);
                        continue;
                    }
                    unsigned *slot = &items[(home * capacity + t) * OT_WORDS];
                    slot[0] = s_first[o];
                    slot[1] = s_count[o];
                    slot[2] = level + 1;
                    slot[3] = path * 8 + o;
                    vtail[home] = t + 1;  // publish, with no __threadfence() before it
                }
            }
        }
        __syncthreads();  // s_count is read by thread 0 above before it is reset
    }
}

// status[0]: 0 = pass, else the code of the first violation; status[1..3] say where.
extern "C" __global__ void ot_check(const unsigned *x, const unsigned *y, const unsigned *z,
                                    const unsigned *out, const unsigned *leaves,
                                    const unsigned *leaf_count, const unsigned *errors,
                                    unsigned *seen, unsigned n, unsigned depth,
                                    unsigned leaf_size, unsigned max_leaves, unsigned *status)
{
    const Coords coords = {x, y, z};
    const unsigned count_of_leaves = *leaf_count < max_leaves ? *leaf_count : max_leaves;
    for (unsigned leaf = 0; leaf < count_of_leaves; ++leaf) {
        const unsigned *l = &leaves[leaf * OT_WORDS];
        const unsigned start = l[0], count = l[1], level = l[2], path = l[3];
        if (count > n || start > n - count || level > depth ||
            (count > leaf_size && level < depth)) {
            status[0] = 2;
            status[1] = leaf;
            status[2] = count;
            status[3] = level;
            return;
        }
        for (unsigned i = start; i < start + count; ++i) {
            const unsigned id = out[i];
            if (id >= n || seen[id] != 0) {
                status[0] = 3;
                status[1] = i;
                status[2] = id;
                return;
            }
            seen[id] = 1;
            unsigned prefix = 0;
            for (unsigned lv = 0; lv < level; ++lv) {
                prefix = prefix * 8 + octant_of(coords, id, lv);
            }
            if (prefix != path) {
                status[0] = 4;
                status[1] = id;
                status[2] = prefix;
                status[3] = path;
                return;
            }
        }
    }
    for (unsigned id = 0; id < n; ++id) {
        if (seen[id] == 0) {
            status[0] = 1;
            status[1] = id;
            return;
        }
    }
    for (unsigned e = 0; e < 3; ++e) {
        if (errors[e] != 0) {
            status[0] = 5 + e;
            status[1] = errors[e];
            return;
        }
    }
    status[0] = 0;
}
