// ls-bh: Barnes-Hut N-body simulation in several kernels per time step (written from scratch for
// gpuwmm, after the idioms of the Lonestar GPU benchmark; none of its code).
//
// One time step is five launches: bh_bbox, bh_build, bh_summarise, bh_force, bh_integrate.
//
// - bh_bbox: bounding box with a last-block reduction. Each block reduces the min/max of its
//   bodies in shared memory and writes them to partial[]; thread 0 then executes __threadfence()
//   so the partials are visible device-wide before it takes a ticket with atomicInc. The block
//   with the last ticket combines every partial (volatile loads) and initialises the root cell.
// - bh_build: octree building. Every thread inserts its bodies from the root down. An empty child
//   slot is claimed with atomicCAS(EMPTY -> body); a slot holding a body is locked with
//   atomicCAS(body -> LOCKED), and the locking thread builds, in cells nobody else can see yet, the
//   subtree that separates the two bodies (geometry, children, "not summarised" marks), executes
//   __threadfence(), and publishes the subtree by a volatile store of its top cell into the slot,
//   which also releases the lock. Other threads read slots and cell geometry through volatile
//   loads while they descend.
// - bh_summarise: centres of mass, bottom-up. Cells are numbered in allocation order, so a cell's
//   children have larger numbers; threads take cells from the last one down and spin on a child's
//   mass (negative = not ready). A finished cell writes its centre of mass, executes
//   __threadfence(), then writes its mass: the mass is the ready flag.
// - bh_force: every body walks the tree with an explicit stack; a cell whose size s and distance d
//   satisfy s^2 < theta^2 d^2 acts through its centre of mass.
// - bh_integrate: v += a dt, x += v dt.
//
// The three __threadfence() calls are the fences the idiom provides (all on the writer's side, as
// in the original benchmark); ls-bh-nf is this app with them stripped from the PTX.
//
// Bodies: pos[d*n + i] (d = 0, 1, 2), likewise vel and acc; mass[i]. Node ids: a body is its index
// i < n, a cell c is n + c. Cell c: geo[4c..4c+3] = centre x, y, z and half-size; sum[4c..4c+3] =
// centre of mass x, y, z and mass; child[8c + octant].
//
// Post-condition (bh_check): one block recomputes the same steps from the saved initial positions
// with the same device functions, the tree built and summarised by one thread (so without any
// inter-thread communication), forces in parallel over the finished tree; every final position
// must match within tol. The tree is unique for a given set of bodies and box, and sums run in
// octant order, so the reference equals a correct parallel run up to rounding.

#define BH_THREADS 256
#define EMPTY (-1)
#define LOCKED (-2)
#define MAX_DEPTH 24
#define STACK_SIZE (7 * MAX_DEPTH + 8)
#define ERR_CELLS 0  // errors[0]: the cell pool overflowed
#define ERR_TREE 1   // errors[1]: a tree deeper than MAX_DEPTH or malformed, or a stack overflow

struct Bodies {
    float *pos;
    float *vel;
    float *acc;
    const float *mass;
    unsigned n;
};

struct Tree {
    float *geo;
    float *sum;
    int *child;
    unsigned *cells;
    unsigned max_cells;
    unsigned *errors;
};

// Which octant of the cell centred at g the point (x, y, z) lies in; ties go to the lower half.
__device__ int octant_of(const float *g, float x, float y, float z)
{
    return (x > g[0] ? 1 : 0) | (y > g[1] ? 2 : 0) | (z > g[2] ? 4 : 0);
}

// The geometry of octant oct of the cell with geometry g.
__device__ void child_box(const float *g, int oct, float *out)
{
    float r = 0.5f * g[3];
    out[0] = g[0] + ((oct & 1) ? r : -r);
    out[1] = g[1] + ((oct & 2) ? r : -r);
    out[2] = g[2] + ((oct & 4) ? r : -r);
    out[3] = r;
}

// Cell c's geometry, read as another thread published it.
__device__ void load_geo(const Tree &t, unsigned c, float *g)
{
    const volatile float *vgeo = t.geo;
    for (int k = 0; k < 4; ++k) {
        g[k] = vgeo[4 * c + k];
    }
}

// A fresh cell with geometry g: no children, not summarised.
__device__ void init_cell(const Tree &t, unsigned c, const float *g)
{
    for (int k = 0; k < 4; ++k) {
        t.geo[4 * c + k] = g[k];
    }
    for (int k = 0; k < 8; ++k) {
        t.child[8 * c + k] = EMPTY;
    }
    t.sum[4 * c + 3] = -1.0f;
}

// The root cell (cell 0) around the box [lo, hi]; the pool restarts after it.
__device__ void init_root(const Tree &t, const float *lo, const float *hi)
{
    float g[4];
    float half = 0.0f;
    for (int d = 0; d < 3; ++d) {
        g[d] = 0.5f * (lo[d] + hi[d]);
        half = fmaxf(half, 0.5f * (hi[d] - lo[d]));
    }
    g[3] = half * 1.001f + 1e-6f;
    init_cell(t, 0, g);
    *t.cells = 1;
}

// Builds, in fresh cells, the subtree below octant oct of cell `parent` that separates body
// `old` (in the slot now) from body `body`; returns the node to publish in the slot.
__device__ int split(const Bodies &b, const Tree &t, unsigned parent, int oct, int old, int body,
                     int depth)
{
    float pg[4], g[4];
    load_geo(t, parent, pg);
    child_box(pg, oct, g);
    int top = EMPTY;
    int link = -1;  // the slot of the previous new cell that the next one hangs from
    for (;;) {
        unsigned c = atomicAdd(t.cells, 1u);
        if (++depth > MAX_DEPTH || c >= t.max_cells) {
            atomicAdd(&t.errors[c >= t.max_cells ? ERR_CELLS : ERR_TREE], 1u);
            if (top == EMPTY) {
                return old;  // `body` is lost; the error fails the check
            }
            t.child[link] = old;
            return top;
        }
        init_cell(t, c, g);
        int node = (int)(b.n + c);
        if (top == EMPTY) {
            top = node;
        } else {
            t.child[link] = node;
        }
        int oa = octant_of(g, b.pos[old], b.pos[b.n + old], b.pos[2 * b.n + old]);
        int ob = octant_of(g, b.pos[body], b.pos[b.n + body], b.pos[2 * b.n + body]);
        if (oa != ob) {
            t.child[8 * c + oa] = old;
            t.child[8 * c + ob] = body;
            return top;
        }
        link = 8 * c + oa;
        float next[4];
        child_box(g, oa, next);
        for (int k = 0; k < 4; ++k) {
            g[k] = next[k];
        }
    }
}

// Inserts body i into the tree, descending from the root.
__device__ void insert_body(const Bodies &b, const Tree &t, unsigned i)
{
    float x = b.pos[i], y = b.pos[b.n + i], z = b.pos[2 * b.n + i];
    unsigned cell = 0;
    int depth = 0;
    for (;;) {
        float g[4];
        load_geo(t, cell, g);
        int oct = octant_of(g, x, y, z);
        volatile int *slot = &t.child[8 * cell + oct];
        int ch = *slot;
        if (ch == LOCKED) {
            continue;  // another thread is splitting this slot
        }
        if (ch >= (int)b.n) {
            unsigned next = (unsigned)ch - b.n;
            // Cells are allocated after their parents: anything else is a corrupted tree, and
            // following it could loop.
            if (next <= cell || next >= t.max_cells || ++depth > MAX_DEPTH) {
                atomicAdd(&t.errors[ERR_TREE], 1u);
                return;
            }
            cell = next;
            continue;
        }
        if (ch == EMPTY) {
            if (atomicCAS((int *)slot, EMPTY, (int)i) == EMPTY) {
                return;
            }
            continue;
        }
        if (atomicCAS((int *)slot, ch, LOCKED) != ch) {
            continue;
        }
        int top = split(b, t, cell, oct, ch, (int)i, depth);
        __threadfence();  // the new cells' geometry and children before the pointer to them
        *slot = top;      // publish and unlock
        return;
    }
}

// Centre of mass and mass of cell c, once all its child cells are summarised; `count` cells are
// in use. A child that is not a later cell in use (a corrupted tree) is counted as an error and
// skipped rather than waited for, so the wait always ends.
__device__ void summarise_cell(const Bodies &b, const Tree &t, unsigned c, unsigned count)
{
    const volatile int *vchild = t.child;
    volatile float *vsum = t.sum;
    float m = 0.0f, sx = 0.0f, sy = 0.0f, sz = 0.0f;
    for (int k = 0; k < 8; ++k) {
        int ch = vchild[8 * c + k];
        if (ch == EMPTY) {
            continue;
        }
        if (ch < 0 || (ch >= (int)b.n && ((unsigned)ch - b.n <= c || (unsigned)ch - b.n >= count))) {
            atomicAdd(&t.errors[ERR_TREE], 1u);
            continue;
        }
        float cm, x, y, z;
        if (ch < (int)b.n) {
            cm = b.mass[ch];
            x = b.pos[ch];
            y = b.pos[b.n + ch];
            z = b.pos[2 * b.n + ch];
        } else {
            unsigned d = (unsigned)ch - b.n;
            while ((cm = vsum[4 * d + 3]) < 0.0f) {
                // wait until the child cell is summarised
            }
            x = vsum[4 * d];
            y = vsum[4 * d + 1];
            z = vsum[4 * d + 2];
        }
        m += cm;
        sx += cm * x;
        sy += cm * y;
        sz += cm * z;
    }
    float inv = 1.0f / m;
    vsum[4 * c] = sx * inv;
    vsum[4 * c + 1] = sy * inv;
    vsum[4 * c + 2] = sz * inv;
    __threadfence();  // the centre of mass before the mass that says it is ready
    vsum[4 * c + 3] = m;
}

// Adds the pull of mass m at offset (dx, dy, dz) to a.
__device__ void pull(float dx, float dy, float dz, float m, float eps2, float *a)
{
    float d2 = dx * dx + dy * dy + dz * dz + eps2;
    float inv = 1.0f / sqrtf(d2);
    float s = m * inv * inv * inv;
    a[0] += dx * s;
    a[1] += dy * s;
    a[2] += dz * s;
}

// The acceleration of body i, by a walk of the summarised tree. `stack` is this thread's
// STACK_SIZE words of global scratch (thread-private; the simulator has no local arrays).
__device__ void force_on(const Bodies &b, const Tree &t, unsigned i, float theta2, float eps2,
                         int *stack)
{
    float x = b.pos[i], y = b.pos[b.n + i], z = b.pos[2 * b.n + i];
    float a[3] = {0.0f, 0.0f, 0.0f};
    int sp = 0;
    stack[sp++] = (int)b.n;  // the root
    while (sp > 0) {
        int node = stack[--sp];
        if (node < (int)b.n) {
            if (node != (int)i) {
                pull(b.pos[node] - x, b.pos[b.n + node] - y, b.pos[2 * b.n + node] - z,
                     b.mass[node], eps2, a);
            }
            continue;
        }
        unsigned c = (unsigned)node - b.n;
        float dx = t.sum[4 * c] - x, dy = t.sum[4 * c + 1] - y, dz = t.sum[4 * c + 2] - z;
        float size = 2.0f * t.geo[4 * c + 3];
        if (size * size < theta2 * (dx * dx + dy * dy + dz * dz)) {
            pull(dx, dy, dz, t.sum[4 * c + 3], eps2, a);
            continue;
        }
        for (int k = 7; k >= 0; --k) {
            int ch = t.child[8 * c + k];
            if (ch == EMPTY) {
                continue;
            }
            // As in summarise_cell: only later cells, so a corrupted tree cannot loop the walk.
            if (ch < 0 || (ch >= (int)b.n &&
                           ((unsigned)ch - b.n <= c || (unsigned)ch - b.n >= t.max_cells))) {
                atomicAdd(&t.errors[ERR_TREE], 1u);
                continue;
            }
            if (sp == STACK_SIZE) {
                atomicAdd(&t.errors[ERR_TREE], 1u);
                break;
            }
            stack[sp++] = ch;
        }
    }
    for (int d = 0; d < 3; ++d) {
        b.acc[d * b.n + i] = a[d];
    }
}

__device__ void integrate_body(const Bodies &b, unsigned i, float dt)
{
    for (int d = 0; d < 3; ++d) {
        b.vel[d * b.n + i] += b.acc[d * b.n + i] * dt;
        b.pos[d * b.n + i] += b.vel[d * b.n + i] * dt;
    }
}

__device__ Bodies bodies(float *pos, float *vel, float *acc, const float *mass, unsigned n)
{
    Bodies b = {pos, vel, acc, mass, n};
    return b;
}

__device__ Tree tree(float *geo, float *sum, int *child, unsigned *cells, unsigned max_cells,
                     unsigned *errors)
{
    Tree t = {geo, sum, child, cells, max_cells, errors};
    return t;
}

// Keeps the initial positions for the check.
extern "C" __global__ void bh_save(const float *pos, float *pos0, unsigned n)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < 3 * n;
         i += blockDim.x * gridDim.x) {
        pos0[i] = pos[i];
    }
}

extern "C" __global__ void bh_bbox(const float *pos, float *partial, unsigned *ticket, float *geo,
                                   float *sum, int *child, unsigned *cells, unsigned n)
{
    __shared__ float lo[3][BH_THREADS];
    __shared__ float hi[3][BH_THREADS];
    __shared__ bool is_last;
    unsigned tid = threadIdx.x;
    for (int d = 0; d < 3; ++d) {
        lo[d][tid] = 3.0e38f;
        hi[d][tid] = -3.0e38f;
    }
    for (unsigned i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) {
        for (int d = 0; d < 3; ++d) {
            lo[d][tid] = fminf(lo[d][tid], pos[d * n + i]);
            hi[d][tid] = fmaxf(hi[d][tid], pos[d * n + i]);
        }
    }
    __syncthreads();
    // blockDim.x is a power of two no larger than BH_THREADS.
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            for (int d = 0; d < 3; ++d) {
                lo[d][tid] = fminf(lo[d][tid], lo[d][tid + stride]);
                hi[d][tid] = fmaxf(hi[d][tid], hi[d][tid + stride]);
            }
        }
        __syncthreads();
    }
    if (tid == 0) {
        for (int d = 0; d < 3; ++d) {
            partial[6 * blockIdx.x + d] = lo[d][0];
            partial[6 * blockIdx.x + 3 + d] = hi[d][0];
        }
        __threadfence();  // this block's partial box before its ticket
        unsigned t = atomicInc(ticket, gridDim.x - 1);  // wraps to 0 for the next step
        is_last = (t == gridDim.x - 1);
    }
    __syncthreads();
    if (is_last && tid == 0) {
        const volatile float *vpartial = partial;
        float blo[3] = {3.0e38f, 3.0e38f, 3.0e38f};
        float bhi[3] = {-3.0e38f, -3.0e38f, -3.0e38f};
        for (unsigned k = 0; k < gridDim.x; ++k) {
            for (int d = 0; d < 3; ++d) {
                blo[d] = fminf(blo[d], vpartial[6 * k + d]);
                bhi[d] = fmaxf(bhi[d], vpartial[6 * k + 3 + d]);
            }
        }
        init_root(tree(geo, sum, child, cells, 1, 0), blo, bhi);
    }
}

extern "C" __global__ void bh_build(float *pos, float *geo, float *sum, int *child,
                                    unsigned *cells, unsigned *errors, unsigned n,
                                    unsigned max_cells)
{
    Bodies b = bodies(pos, 0, 0, 0, n);
    Tree t = tree(geo, sum, child, cells, max_cells, errors);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        insert_body(b, t, i);
    }
}

extern "C" __global__ void bh_summarise(float *pos, const float *mass, float *geo, float *sum,
                                        int *child, unsigned *cells, unsigned *errors, unsigned n,
                                        unsigned max_cells)
{
    Bodies b = bodies(pos, 0, 0, mass, n);
    Tree t = tree(geo, sum, child, cells, max_cells, errors);
    int count = (int)min(*cells, max_cells);
    int total = (int)(blockDim.x * gridDim.x);
    for (int c = count - 1 - (int)(blockIdx.x * blockDim.x + threadIdx.x); c >= 0; c -= total) {
        summarise_cell(b, t, (unsigned)c, (unsigned)count);
    }
}

extern "C" __global__ void bh_force(float *pos, float *acc, const float *mass, float *geo,
                                    float *sum, int *child, unsigned *errors, int *stacks,
                                    unsigned n, unsigned max_cells, float theta2, float eps2)
{
    Bodies b = bodies(pos, 0, acc, mass, n);
    Tree t = tree(geo, sum, child, 0, max_cells, errors);
    unsigned me = blockIdx.x * blockDim.x + threadIdx.x;
    for (unsigned i = me; i < n; i += blockDim.x * gridDim.x) {
        force_on(b, t, i, theta2, eps2, stacks + STACK_SIZE * me);
    }
}

extern "C" __global__ void bh_integrate(float *pos, float *vel, const float *acc, unsigned n,
                                        float dt)
{
    Bodies b = bodies(pos, vel, (float *)acc, 0, n);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        integrate_body(b, i, dt);
    }
}

// The post-condition, run by one block after the app: see the top of this file. status[0]:
// 0 pass; 1 the app's cell pool overflowed; 2 the app's tree was too deep or malformed; 3 a final position
// differs from the reference (status[1] = body, status[2] = axis, status[3] = difference as f32
// bits); 4 the reference itself overflowed (inputs too clustered for max_cells/MAX_DEPTH).
extern "C" __global__ void bh_check(const float *pos, const float *pos0, float *rpos, float *rvel,
                                    float *racc, const float *mass, float *geo, float *sum,
                                    int *child, unsigned *cells, unsigned *errors,
                                    unsigned *rerrors, int *stacks, unsigned n, unsigned max_cells,
                                    unsigned steps, float theta2, float eps2, float dt, float tol,
                                    unsigned *status)
{
    unsigned tid = threadIdx.x;
    Bodies b = bodies(rpos, rvel, racc, mass, n);
    Tree t = tree(geo, sum, child, cells, max_cells, rerrors);
    for (unsigned i = tid; i < 3 * n; i += blockDim.x) {
        rpos[i] = pos0[i];
        rvel[i] = 0.0f;
    }
    __syncthreads();
    for (unsigned s = 0; s < steps; ++s) {
        if (tid == 0) {
            float lo[3] = {3.0e38f, 3.0e38f, 3.0e38f};
            float hi[3] = {-3.0e38f, -3.0e38f, -3.0e38f};
            for (unsigned i = 0; i < n; ++i) {
                for (int d = 0; d < 3; ++d) {
                    lo[d] = fminf(lo[d], rpos[d * n + i]);
                    hi[d] = fmaxf(hi[d], rpos[d * n + i]);
                }
            }
            init_root(t, lo, hi);
            for (unsigned i = 0; i < n; ++i) {
                insert_body(b, t, i);
            }
            unsigned count = min(*cells, max_cells);
            for (int c = (int)count - 1; c >= 0; --c) {
                summarise_cell(b, t, (unsigned)c, count);
            }
        }
        __syncthreads();
        for (unsigned i = tid; i < n; i += blockDim.x) {
            force_on(b, t, i, theta2, eps2, stacks + STACK_SIZE * tid);
        }
        __syncthreads();
        for (unsigned i = tid; i < n; i += blockDim.x) {
            integrate_body(b, i, dt);
        }
        __syncthreads();
    }
    if (tid != 0) {
        return;
    }
    unsigned code = 0, w1 = 0, w2 = 0, w3 = 0;
    if (errors[ERR_CELLS] != 0) {
        code = 1;
        w1 = errors[ERR_CELLS];
    } else if (errors[ERR_TREE] != 0) {
        code = 2;
        w1 = errors[ERR_TREE];
    } else if (rerrors[ERR_CELLS] != 0 || rerrors[ERR_TREE] != 0) {
        code = 4;
        w1 = rerrors[ERR_CELLS];
        w2 = rerrors[ERR_TREE];
    } else {
        for (unsigned k = 0; k < 3 * n && code == 0; ++k) {
            float diff = fabsf(pos[k] - rpos[k]);
            if (!(diff <= tol)) {
                code = 3;
                w1 = k % n;
                w2 = k / n;
                w3 = __float_as_uint(diff);
            }
        }
    }
    status[0] = code;
    status[1] = w1;
    status[2] = w2;
    status[3] = w3;
}
