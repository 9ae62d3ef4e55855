// _primitives.cu - primitives CuPy lacks or makes slow.
//
// bmsparse_scan_inclusive: CuPy's cumsum takes several launches (about 45 us
// for 20,000 elements on an H200), more than a whole small product's
// kernels; one thread block scanning tile by tile takes one launch.
//   long long in[n]   - values
//   long long out[n]  - out: inclusive scan (may alias in)
// Launch: exactly one block of BMSPARSE_SCAN_THREADS threads.
// Work: O(n), sequential over tiles of 4 * BMSPARSE_SCAN_THREADS elements:
// meant for n up to a few tens of thousands. Deterministic (integers).
//
// bmsparse_sort_segment_chunks: sorts uint64 codes whose segments (runs of
// codes already ordered against each other, such as the tasks of one block
// row) are short, in shared memory, one thread block per chunk of segments.
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

#ifndef BMSPARSE_SORT_THREADS
#define BMSPARSE_SORT_THREADS 256
#endif

// first segment start >= t, or n: segment starts are non-decreasing (clamped
// to [t, n], so that malformed starts, which the caller reports, stay in bounds)
__device__ __forceinline__ long long segment_at_or_after(
    const long long* seg_starts, long long nseg, long long t, long long n) {
    if (t >= n) return n;
    long long lo = 0, hi = nseg;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (seg_starts[mid] < t) lo = mid + 1; else hi = mid;
    }
    const long long start = lo < nseg ? seg_starts[lo] : n;
    return start < t ? t : start > n ? n : start;
}

// Sort chunks of whole segments of codes, each in shared memory.
//   u64       codes[n]          - in/out; codes of different segments must already be
//                                 in order (only the codes inside a segment move)
//   long long chunk             - a chunk holds the segments that start inside its
//                                 `chunk` codes: up to 2 * chunk (the dynamic shared
//                                 memory given) when no segment is longer than chunk
//   long long seg_starts[nseg]  - first code of every segment, non-decreasing
//   char      in_long[n]        - out: 1 for the codes of a chunk too long to sort
//                                 here (left to a global sort), else 0
// Launch: one thread block of BMSPARSE_SORT_THREADS threads per chunk.
// Work: bitonic sort, O(L log^2 L) for a chunk of L codes.
extern "C" __global__ void __launch_bounds__(BMSPARSE_SORT_THREADS)
bmsparse_sort_segment_chunks(
    unsigned long long* __restrict__ codes, long long n, long long chunk,
    const long long* __restrict__ seg_starts, long long nseg, char* __restrict__ in_long)
{
    extern __shared__ unsigned long long tile[];
    const long long k = blockIdx.x;
    const long long lo = segment_at_or_after(seg_starts, nseg, k * chunk, n);
    const long long hi = segment_at_or_after(seg_starts, nseg, (k + 1) * chunk, n);
    const long long len = hi > lo ? hi - lo : 0;
    const char is_long = len > 2 * chunk;
    for (long long s = lo + threadIdx.x; s < hi; s += blockDim.x) in_long[s] = is_long;
    if (len <= 1 || is_long) return;
    int size = 2;
    while (size < len) size <<= 1;
    for (int s = threadIdx.x; s < size; s += blockDim.x) tile[s] = s < len ? codes[lo + s] : ~0ull;
    __syncthreads();
    for (int width = 2; width <= size; width <<= 1) {
        for (int stride = width >> 1; stride > 0; stride >>= 1) {
            for (int s = threadIdx.x; s < size; s += blockDim.x) {
                const int partner = s ^ stride;
                if (partner > s) {
                    const unsigned long long x = tile[s], y = tile[partner];
                    const bool ascending = (s & width) == 0;
                    if ((x > y) == ascending) { tile[s] = y; tile[partner] = x; }
                }
            }
            __syncthreads();
        }
    }
    for (int s = threadIdx.x; s < len; s += blockDim.x) codes[lo + s] = tile[s];
}
