// cbe-dot: dot product with a global spin-lock (written from scratch for gpuwmm).
//
// Idiom: each block reduces its partial sum of a[i] * b[i] in shared memory; thread 0 of the
// block then takes a global spin-lock (atomicCAS(lock, 0, 1) to acquire, atomicExch(lock, 0) to
// release) and adds the partial sum into *result with a plain load and a plain store.
//
// Deliberately NO fence between the critical-section update and the unlock: on a weak memory
// model the store to *result may become visible after the lock is released, so another block can
// read a stale *result and an addition is lost. gpuwmm must find the missing fence.
//
// Post-condition: *result == sum over i < n of a[i] * b[i] (up to float rounding; the host uses
// small integer-valued inputs so the sum is exact), and *lock == 0.
//
// Launch: 1-D grid, 1-D block of 2^k <= DOT_THREADS threads; *result = *lock = 0 beforehand.

#define DOT_THREADS 256

extern "C" __global__ void dot(const float *a, const float *b, float *result, int *lock, int n)
{
    __shared__ float cache[DOT_THREADS];

    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        sum += a[i] * b[i];
    }
    cache[threadIdx.x] = sum;
    __syncthreads();

    // Tree reduction in shared memory; blockDim.x is a power of two no larger than DOT_THREADS.
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            cache[threadIdx.x] += cache[threadIdx.x + stride];
        }
        __syncthreads();
    }

    if (threadIdx.x == 0) {
        while (atomicCAS(lock, 0, 1) != 0) {
            // spin until the lock is ours
        }
        *result = *result + cache[0];  // plain load + plain store inside the critical section
        atomicExch(lock, 0);           // release, with no __threadfence() before it (the bug)
    }
}
