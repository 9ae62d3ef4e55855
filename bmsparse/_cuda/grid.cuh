// grid.cuh - helpers for kernels that do several passes in one launch.
//
// grid_barrier: every thread of the grid waits until every thread has
// reached it, and sees their writes after it (a grid of one thread block:
// __syncthreads only). Only for a cooperative launch
// (_kernels.launch(..., cooperative=True)): the driver then guarantees that
// every thread block of the grid is resident at once, so a block spinning
// here cannot keep a block that has yet to arrive from running.
//   u64 bar[2] - zeroed once, before the first launch that uses them:
//                arrivals, then the generation. Each block's arrival is one
//                atomic add to bar[0] (release at GPU scope) whose top bit
//                flips at the last arrival, its other bits back to zero
//                (arrival_add); the blocks wait for the flip, then acquire.
//                So the words are ready for the next barrier as the last
//                block arrives, with no reset, no second atomic and no
//                sequentially consistent fence (__threadfence) on the way:
//                ncu, H100, the tiles transpose kernel (three barriers),
//                musae_git 55.4 -> 48.7 us, the bucket kernel on
//                p2p-Gnutella31 43.6 -> 33.3 (benchmarks/NOTES.md, session 50)
// Data written before a barrier by other blocks is read after it with
// __ldcg (through L2, not a possibly stale L1 line) or atomics.
// grid_barrier_then(bar, last): the same, and the last thread block to arrive
// runs last() with all its threads (the other blocks' writes visible to them)
// before any block leaves (they wait for the generation to move): a step for
// one thread block between two passes, such as a scan of the thread blocks'
// sums, without a second barrier.
//
// block_exclusive_scan / warp_exclusive_scan: exclusive scan of one u64 per
// thread over the thread block (the whole warp), in thread order, and the
// total.
#pragma once

typedef unsigned long long u64;

// atomics and loads of the barrier's words with the PTX memory model's
// release and acquire at GPU scope (sm_70 on). A release is cumulative: it
// orders the writes of every thread of the block that __syncthreads ordered
// before it.
__device__ __forceinline__ u64 add_release(u64* p, u64 v)
{
    u64 old;
    asm volatile("atom.add.release.gpu.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
    return old;
}

__device__ __forceinline__ u64 add_acq_rel(u64* p, u64 v)
{
    u64 old;
    asm volatile("atom.add.acq_rel.gpu.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
    return old;
}

__device__ __forceinline__ u64 load_relaxed(const u64* p)
{
    u64 v;
    asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ u64 load_acquire(const u64* p)
{
    u64 v;
    asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// a block's arrival: block 0 adds 2^63 - (gridDim.x - 1), every other block
// 1. The adds sum to 2^63, and every partial sum of them stays below it, so
// bar[0]'s top bit flips at the last arrival, whatever their order
__device__ __forceinline__ u64 arrival_add()
{
    return blockIdx.x == 0 ? (1ull << 63) - (gridDim.x - 1ull) : 1ull;
}

__device__ __forceinline__ void grid_barrier(u64* bar)
{
    __syncthreads();
    if (gridDim.x == 1) return;  // (global writes before __syncthreads are visible after it)
    if (threadIdx.x == 0) {
        const u64 old = add_release(bar, arrival_add());
        // a sleep between polls: the kernel polling without one (through
        // grid_barrier_then's form) was 3 us slower (musae_git, H100)
        while (((load_relaxed(bar) ^ old) >> 63) == 0) __nanosleep(32);
        (void)load_acquire(bar);
    }
    __syncthreads();
}

template <typename F>
__device__ __forceinline__ void grid_barrier_then(u64* bar, F last)
{
    __shared__ bool is_last;
    __syncthreads();
    if (gridDim.x == 1) {
        // one thread block: its barrier is the grid's (global writes before
        // __syncthreads are visible to the block after it), without the
        // atomics that cost a small kernel microseconds each
        last();
        __syncthreads();
        return;
    }
    u64* generation = bar + 1;
    u64 seen = 0;
    if (threadIdx.x == 0) {
        // (the generation moves only after every block has arrived, this one too)
        seen = load_relaxed(generation);
        const u64 add = arrival_add();
        const u64 old = add_acq_rel(bar, add);
        is_last = ((old ^ (old + add)) >> 63) != 0;
    }
    __syncthreads();
    if (is_last) {
        last();
        __syncthreads();
        if (threadIdx.x == 0) add_release(generation, 1ull);
    } else if (threadIdx.x == 0) {
        while (load_relaxed(generation) == seen) __nanosleep(32);
        (void)load_acquire(generation);
    }
    __syncthreads();
}

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
