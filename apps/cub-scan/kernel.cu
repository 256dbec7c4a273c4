// cub-scan: single-pass inclusive prefix sum with chained tile prefixes (written from scratch for
// gpuwmm; it reimplements the idea of a single-pass scan, not CUB's code).
//
// Idiom: message passing between consecutive tiles. Each block takes its logical tile number from
// an atomic counter (dynamic tile ordering: a tile only ever waits for tiles that an already
// running block owns, so no schedule of blocks can deadlock it). The block loads SCAN_ITEMS
// elements per thread, scans the thread totals in shared memory, and thread 0 then
//   - waits until the predecessor tile's flag is set (volatile spin), fence (1), reads the
//     predecessor's inclusive prefix;
//   - publishes its own inclusive prefix (value), fence (2), then sets its own flag.
// Finally every thread writes its elements plus the tile's exclusive prefix.
//
// Fences: (2) orders the published value before the flag (writer side of message passing); (1)
// orders the flag read before the value read (reader side). Without them (the cub-scan-nf variant,
// made by the strip-fences pass) a tile may see the flag but read a stale prefix, and every later
// element of the output is wrong.
//
// scan_init resets the tile flags and the tile counter; the app launches it before scan (a
// previous run leaves them set).
//
// Post-condition: out[i] == in[0] + ... + in[i] for every i < n (integers). scan_check is that
// post-condition as a check kernel (app.toml names it): one thread recomputes the sum
// sequentially and writes status[0] = 0 on success, or 1 with status[1] = the first wrong index,
// status[2] = out there, status[3] = the expected value.
//
// Launch: scan_init with any grid; scan with a 1-D grid of tiles = ceil(n / (blockDim.x *
// SCAN_ITEMS)) blocks and a 1-D block of at most SCAN_THREADS threads; tile_prefix and tile_flag
// hold at least gridDim.x words.

#define SCAN_THREADS 256
#define SCAN_ITEMS 4

extern "C" __global__ void scan_init(unsigned *tile_flag, unsigned *tile_counter, int tiles)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < tiles; i += blockDim.x * gridDim.x) {
        tile_flag[i] = 0;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        *tile_counter = 0;
    }
}

extern "C" __global__ void scan(const int *in, int *out, int *tile_prefix, unsigned *tile_flag,
                                unsigned *tile_counter, int n)
{
    __shared__ int totals[SCAN_THREADS];
    __shared__ unsigned s_tile;
    __shared__ int s_prefix;

    if (threadIdx.x == 0) {
        s_tile = atomicAdd(tile_counter, 1u);  // dynamic tile ordering
    }
    __syncthreads();
    const unsigned tile = s_tile;
    const int base = ((int)tile * (int)blockDim.x + (int)threadIdx.x) * SCAN_ITEMS;

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

    if (threadIdx.x == 0) {
        const volatile unsigned *vflag = tile_flag;
        const volatile int *vprefix = tile_prefix;
        int prefix = 0;
        if (tile > 0) {
            while (vflag[tile - 1] == 0) {
                // wait for the predecessor tile
            }
            __threadfence();  // (1) read the flag before the value
            prefix = vprefix[tile - 1];
        }
        tile_prefix[tile] = prefix + totals[blockDim.x - 1];  // publish the value ...
        __threadfence();                                      // (2) ... before the flag
        ((volatile unsigned *)tile_flag)[tile] = 1;
        s_prefix = prefix;
    }
    __syncthreads();

    int running = s_prefix + totals[threadIdx.x] - total;  // exclusive prefix of this thread
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
