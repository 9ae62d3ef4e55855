// _primitives.cu - a scan for small arrays in one launch.
//
// CuPy's cumsum takes several launches (about 45 us for 20,000 elements on
// an H200), more than a whole small product's kernels; one thread block
// scanning tile by tile takes one launch.
//
//   long long in[n]   - values
//   long long out[n]  - out: inclusive scan (may alias in)
//
// Launch: exactly one block of BMSPARSE_SCAN_THREADS threads.
// Work: O(n), sequential over tiles of 4 * BMSPARSE_SCAN_THREADS elements:
// meant for n up to a few tens of thousands. Deterministic (integers).
#ifndef BMSPARSE_SCAN_THREADS
#define BMSPARSE_SCAN_THREADS 1024
#endif
#define BMSPARSE_SCAN_ITEMS 4

extern "C" __global__ void __launch_bounds__(BMSPARSE_SCAN_THREADS)
bmsparse_scan_inclusive(const long long* in, long long n, long long* out)
{
    __shared__ long long warp_sums[BMSPARSE_SCAN_THREADS / 32];
    __shared__ long long carry;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    for (long long tile = 0; tile < n; tile += BMSPARSE_SCAN_THREADS * BMSPARSE_SCAN_ITEMS) {
        const long long first = tile + (long long)threadIdx.x * BMSPARSE_SCAN_ITEMS;
        long long v[BMSPARSE_SCAN_ITEMS];
        long long sum = 0;
#pragma unroll
        for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {
            v[k] = first + k < n ? in[first + k] : 0;
            sum += v[k];
        }
        // inclusive scan of the per-thread sums across the warp, then the warps
        long long x = sum;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const long long y = __shfl_up_sync(0xffffffffu, x, d);
            if (lane >= d) x += y;
        }
        if (lane == 31) warp_sums[warp] = x;
        __syncthreads();
        if (warp == 0) {
            long long w = lane < BMSPARSE_SCAN_THREADS / 32 ? warp_sums[lane] : 0;
#pragma unroll
            for (int d = 1; d < 32; d <<= 1) {
                const long long y = __shfl_up_sync(0xffffffffu, w, d);
                if (lane >= d) w += y;
            }
            if (lane < BMSPARSE_SCAN_THREADS / 32) warp_sums[lane] = w;
        }
        __syncthreads();
        long long running = carry + x - sum + (warp ? warp_sums[warp - 1] : 0);
#pragma unroll
        for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {
            running += v[k];
            if (first + k < n) out[first + k] = running;
        }
        __syncthreads();
        if (threadIdx.x == BMSPARSE_SCAN_THREADS - 1) carry = running;
        __syncthreads();
    }
}
