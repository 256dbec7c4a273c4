// sdk-red: single-pass reduction with a "last block" ticket (written from scratch for gpuwmm).
//
// Idiom: each block reduces its slice of `in` in shared memory and thread 0 writes the block's
// partial sum to partial[blockIdx.x]; it then executes __threadfence() so the partial sum is
// visible device-wide before it takes a ticket with atomicInc(counter, gridDim.x - 1). The block
// that draws the last ticket (gridDim.x - 1) reads every partial sum through volatile loads, writes
// the total to *out, and resets *counter to 0 for the next launch (atomicInc already wraps it).
//
// The fence is the one the idiom needs: without it (the sdk-red-nf variant, made by the
// strip-fences pass) the last block may read a stale partial sum.
//
// Post-condition: *out == sum over i < n of in[i] (exact for the host's integer-valued inputs),
// and *counter == 0.
//
// Launch: 1-D grid, 1-D block of a power of two threads, at most RED_THREADS, *counter = 0
// beforehand; partial holds at least gridDim.x floats.
//
// reduce_check is the post-condition as a check kernel (app.toml names it): launched with one
// thread after the app, it adds in[] up sequentially and writes 0 to status[0] on success,
// 1 if *out is wrong (status[1] = *out, status[2] = the expected sum, both as integers), or 2 if
// *counter was not reset (status[1] = *counter).

#define RED_THREADS 256

extern "C" __global__ void reduce(const float *in, float *partial, float *out, unsigned *counter,
                                  int n)
{
    __shared__ float cache[RED_THREADS];
    __shared__ bool is_last;

    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        sum += in[i];
    }
    cache[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            cache[threadIdx.x] += cache[threadIdx.x + stride];
        }
        __syncthreads();
    }

    if (threadIdx.x == 0) {
        partial[blockIdx.x] = cache[0];
        __threadfence();  // publish the partial sum before taking a ticket
        unsigned ticket = atomicInc(counter, gridDim.x - 1);
        is_last = (ticket == gridDim.x - 1);
    }
    __syncthreads();

    if (is_last && threadIdx.x == 0) {
        const volatile float *vpartial = partial;
        float total = 0.0f;
        for (unsigned b = 0; b < gridDim.x; ++b) {
            total += vpartial[b];
        }
        *out = total;
        *counter = 0;
    }
}

extern "C" __global__ void reduce_check(const float *in, const float *out, const unsigned *counter,
                                        int n, int *status)
{
    float expected = 0.0f;
    for (int i = 0; i < n; ++i) {
        expected += in[i];
    }
    if (*out != expected) {
        status[0] = 1;
        status[1] = (int)*out;
        status[2] = (int)expected;
    } else if (*counter != 0) {
        status[0] = 2;
        status[1] = (int)*counter;
    } else {
        status[0] = 0;
    }
}
