// cccl-scan: single-pass inclusive prefix sum whose inter-block communication is NVIDIA's own:
// CUB's decoupled look-back (cub::ScanTileState + cub::TilePrefixCallbackOp from the CCCL headers
// of the pinned nvidia-cuda-cccl-cu12 wheel). gpuwmm wrote only the block-local part (loading,
// a shared-memory scan of the block, writing the output) and the post-condition.
//
// Idiom: decoupled look-back. Each block takes its logical tile number from an atomic counter
// (dynamic tile ordering, so a tile only waits for tiles owned by blocks already running). The
// block scans its tile; then the first warp hands the tile's aggregate to CUB's
// TilePrefixCallbackOp, which
//   - publishes the aggregate as the tile's PARTIAL value (ScanTileState::SetPartial),
//   - reads the status words of the 32 preceding tiles, spinning while any is INVALID
//     (ScanTileState::WaitForValid), then their PARTIAL or INCLUSIVE values, reduces them with a
//     warp reduction, and slides the window further back until it meets an INCLUSIVE tile,
//   - publishes the tile's INCLUSIVE prefix (ScanTileState::SetInclusive).
// Tile 0 has no predecessor and publishes its INCLUSIVE prefix directly, as CUB's AgentScan does.
//
// Which ScanTileState: the two-word form, ScanTileState<int, false>: status words, partial values
// and inclusive values in three arrays. CUB uses it for value types that do not fit beside the
// status in one 16-byte word; for int it would pick the single-word form (status and value
// packed in one 8-byte vector access), whose message is one access and has nothing to order.
// The two-word form is message passing proper, and CUB orders it:
//   writer (SetPartial/SetInclusive): st.global.cg value, then st.release.gpu status;
//   reader (WaitForValid): ld.relaxed.gpu status, __threadfence() (membar.gl), ld.global.cg value.
// The strip-fences pass removes the reader's membar.gl (cccl-scan-nf) and leaves the writer's
// st.release: the reader may then read a value older than the status it saw.
//
// Post-condition: out[i] == in[0] + ... + in[i] for every i < n (integers). scan_check is that
// post-condition as a check kernel: one thread recomputes the sum sequentially and writes
// status[0] = 0 on success, or 1 with status[1] = the first wrong index, status[2] = out there,
// status[3] = the expected value.
//
// Launch: scan_init over at least `tiles` threads, in blocks of at least 32 threads (CUB's
// InitializeStatus marks the 32 padding entries from block 0); scan with a 1-D grid of
// tiles = ceil(n / (blockDim.x * SCAN_ITEMS)) blocks of a multiple of 32 threads, at most
// SCAN_THREADS. tile_status, tile_partial and tile_inclusive hold tiles + 32 words (CUB's padding
// before tile 0, which the look-back window reads as out-of-bounds tiles).

#include <cub/agent/single_pass_scan_operators.cuh>

#define SCAN_THREADS 256
#define SCAN_ITEMS 4

using TileState = cub::ScanTileState<int, false>;
using Sum = ::cuda::std::plus<>;
using PrefixOp = cub::TilePrefixCallbackOp<int, Sum, TileState>;

// The tile state over three caller-provided arrays (each tiles + 32 words), laid out as
// TileState::Init would lay them out in one temporary allocation.
__device__ TileState tile_state(unsigned *tile_status, int *tile_partial, int *tile_inclusive)
{
    TileState state;
    state.d_tile_status = tile_status;
    state.d_tile_partial = tile_partial;
    state.d_tile_inclusive = tile_inclusive;
    return state;
}

extern "C" __global__ void scan_init(unsigned *tile_status, int *tile_partial, int *tile_inclusive,
                                     unsigned *tile_counter, int tiles)
{
    tile_state(tile_status, tile_partial, tile_inclusive).InitializeStatus(tiles);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        *tile_counter = 0;
    }
}

extern "C" __global__ void scan(const int *in, int *out, unsigned *tile_status, int *tile_partial,
                                int *tile_inclusive, unsigned *tile_counter, int n)
{
    __shared__ int totals[SCAN_THREADS];
    __shared__ unsigned s_tile;
    __shared__ int s_exclusive;
    __shared__ typename PrefixOp::TempStorage prefix_storage;

    if (threadIdx.x == 0) {
        s_tile = atomicAdd(tile_counter, 1u);  // dynamic tile ordering
    }
    __syncthreads();
    const int tile = (int)s_tile;
    const int base = (tile * (int)blockDim.x + (int)threadIdx.x) * SCAN_ITEMS;

    int items[SCAN_ITEMS];
    int total = 0;
    for (int k = 0; k < SCAN_ITEMS; ++k) {
        items[k] = base + k < n ? in[base + k] : 0;
        total += items[k];
    }

    // Inclusive scan of the thread totals (Hillis-Steele) in shared memory.
    totals[threadIdx.x] = total;
    __syncthreads();
    for (unsigned offset = 1; offset < blockDim.x; offset *= 2) {
        int add = threadIdx.x >= offset ? totals[threadIdx.x - offset] : 0;
        __syncthreads();
        totals[threadIdx.x] += add;
        __syncthreads();
    }
    const int aggregate = totals[blockDim.x - 1];

    // Inter-block part: CUB's code from here to the barrier.
    TileState state = tile_state(tile_status, tile_partial, tile_inclusive);
    if (tile == 0) {
        if (threadIdx.x == 0) {
            state.SetInclusive(0, aggregate);
            s_exclusive = 0;
        }
    } else if (threadIdx.x < 32) {  // the whole first warp runs the look-back
        PrefixOp prefix_op(state, prefix_storage, Sum{}, tile);
        const int exclusive = prefix_op(aggregate);  // valid in lane 0
        if (threadIdx.x == 0) {
            s_exclusive = exclusive;
        }
    }
    __syncthreads();

    int running = s_exclusive + totals[threadIdx.x] - total;  // exclusive prefix of this thread
    for (int k = 0; k < SCAN_ITEMS; ++k) {
        running += items[k];
        if (base + k < n) {
            out[base + k] = running;
        }
    }
}

extern "C" __global__ void scan_check(const int *in, const int *out, int n, int *status)
{
    int sum = 0;
    for (int i = 0; i < n; ++i) {
        sum += in[i];
        if (out[i] != sum) {
            status[0] = 1;
            status[1] = i;
            status[2] = out[i];
            status[3] = sum;
            return;
        }
    }
    status[0] = 0;
}
