// grid.cuh - helpers for kernels that do several passes in one launch.
//
// grid_barrier: every thread of the grid waits until every thread has
// reached it, and sees their writes after it (a grid of one thread block:
// __syncthreads only). Only for a cooperative launch
// (_kernels.launch(..., cooperative=True)): the driver then guarantees that
// every thread block of the grid is resident at once, so a block spinning
// here cannot keep a block that has yet to arrive from running.
//   u64 bar[2] - zeroed before the launch: arrivals, then the generation.
//                The last block to arrive resets the arrivals and moves the
//                generation on, so one pair serves any number of barriers.
// Data written before a barrier by other blocks is read after it with
// __ldcg (through L2, not a possibly stale L1 line) or atomics.
// grid_barrier_then(bar, last): the same, and the last thread block to arrive
// runs last() with all its threads (the other blocks' writes visible to them)
// before any block leaves: a step for one thread block between two passes,
// such as a scan of the thread blocks' sums, without a second barrier.
//
// block_exclusive_scan / warp_exclusive_scan: exclusive scan of one u64 per
// thread over the thread block (the whole warp), in thread order, and the
// total.
#pragma once

typedef unsigned long long u64;

template <typename F>
__device__ __forceinline__ void grid_barrier_then(u64* bar, F last)
{
    __shared__ bool is_last;
    __syncthreads();
    if (gridDim.x == 1) {
        // one thread block: its barrier is the grid's (global writes before
        // __syncthreads are visible to the block after it), without the
        // fences and atomics that cost a small kernel microseconds each
        last();
        __syncthreads();
        return;
    }
    volatile u64* generation = bar + 1;
    u64 seen = 0;
    if (threadIdx.x == 0) {
        seen = *generation;
        // the fence is cumulative: the block's writes, made visible to this
        // thread by __syncthreads, are ordered before the arrival
        __threadfence();
        is_last = atomicAdd(bar, 1ull) == gridDim.x - 1ull;
    }
    __syncthreads();
    if (is_last) {
        __threadfence();
        last();
        __syncthreads();
        if (threadIdx.x == 0) {
            atomicExch(bar, 0ull);
            __threadfence();
            atomicAdd(bar + 1, 1ull);
        }
    } else if (threadIdx.x == 0) {
        while (*generation == seen) __nanosleep(32);
    }
    if (threadIdx.x == 0) __threadfence();
    __syncthreads();
}

__device__ __forceinline__ void grid_barrier(u64* bar) { grid_barrier_then(bar, [] {}); }

// `warp_sums` is shared memory for 32 values; every thread of the block calls
__device__ __forceinline__ u64 block_exclusive_scan(u64 v, u64* warp_sums, u64* total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    u64 x = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const u64 y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        u64 w = lane < nwarps ? warp_sums[lane] : 0ull;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const u64 y = __shfl_up_sync(0xffffffffu, w, d);
            if (lane >= d) w += y;
        }
        warp_sums[lane] = w;  // inclusive over warps
    }
    __syncthreads();
    const u64 before = (warp > 0 ? warp_sums[warp - 1] : 0ull) + x - v;
    *total = warp_sums[31];
    __syncthreads();  // warp_sums is reused by the next call
    return before;
}

__device__ __forceinline__ u64 warp_exclusive_scan(u64 v, u64* total)
{
    const int lane = threadIdx.x & 31;
    u64 x = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const u64 y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x += y;
    }
    *total = __shfl_sync(0xffffffffu, x, 31);
    return x - v;
}

// a load of data that other thread blocks of the same launch may have
// written before a grid barrier (FRESH): through L2, never a stale L1 line
// or the read-only path that `const __restrict__` lets the compiler take
template <bool FRESH, typename V>
__device__ __forceinline__ V fresh_load(const V* p)
{
    if constexpr (!FRESH) {
        return *p;
    } else if constexpr (sizeof(V) == 16) {  // complex values: __ldcg has no overload
        const longlong2 w = __ldcg((const longlong2*)p);
        V v;
        memcpy(&v, &w, 16);
        return v;
    } else if constexpr (sizeof(V) == 8) {
        const long long w = __ldcg((const long long*)p);
        V v;
        memcpy(&v, &w, 8);
        return v;
    } else {
        static_assert(sizeof(V) == 4, "fresh_load: 4, 8 or 16 bytes");
        const int w = __ldcg((const int*)p);
        V v;
        memcpy(&v, &w, 4);
        return v;
    }
}

// the sum of `sum` over the thread blocks before this one (the threads'
// values summed per block, published in block_sums, one word per thread
// block), after a grid barrier: the second level of a grid-wide scan whose
// thread blocks scan runs of their own. `warp_sums`: shared memory for 32
// values.
__device__ __forceinline__ u64 grid_blocks_before(u64 sum, u64* bar, u64* block_sums,
                                                  u64* warp_sums)
{
    u64 total, before = 0;
    block_exclusive_scan(sum, warp_sums, &total);
    if (threadIdx.x == 0) block_sums[blockIdx.x] = total;
    grid_barrier(bar);
    for (long long t = threadIdx.x; t < blockIdx.x; t += blockDim.x)
        before += __ldcg(block_sums + t);
    block_exclusive_scan(before, warp_sums, &before);  // the sum over the thread block
    return before;
}

// exclusive scan of in[0, n) into out[0, n], and out[n] = the total, by the
// whole grid: each thread block scans an equal run after the sum of the runs
// before it. One grid barrier inside; the caller's next barrier makes out
// visible to every block. `block_sums`: one word per thread block;
// `warp_sums`: shared memory for 32 values.
__device__ void grid_exclusive_scan(const long long* in, long long n, long long* out, u64* bar,
                                    u64* block_sums, u64* warp_sums)
{
    const long long run = (n + gridDim.x - 1) / gridDim.x;
    const long long lo = min(n, (long long)blockIdx.x * run), hi = min(n, lo + run);
    u64 sum = 0, total;
    for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) sum += (u64)__ldcg(in + i);
    u64 before = grid_blocks_before(sum, bar, block_sums, warp_sums);
    for (long long i0 = lo; i0 < hi; i0 += blockDim.x) {
        const long long i = i0 + threadIdx.x;
        const u64 v = i < hi ? (u64)__ldcg(in + i) : 0ull;
        const u64 at = before + block_exclusive_scan(v, warp_sums, &total);
        if (i < hi) out[i] = (long long)at;
        before += total;
    }
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) out[n] = (long long)before;
}
