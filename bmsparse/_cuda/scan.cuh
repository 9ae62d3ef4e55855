// scan.cuh - one-launch scans: every tile of BMSPARSE_SCAN_TILE items has its
// own thread block, and a tile learns the sum of the tiles before it by a
// decoupled look-back. Each tile publishes its own sum as soon as it has it
// (flag 1), and its inclusive prefix once it knows it (flag 2). A tile's
// first warp reads the flags of the 32 tiles before it at a time, adding sums
// back to the nearest published prefix. Tiles take their numbers from a
// ticket in launch order, so a tile only waits for tiles that are already
// running. Used through scan_tile_items (below) by _primitives.cu's
// bmsparse_scan and tasks.cu's bmsparse_tasks_ranges, and directly by
// bmsparse_tasks_run_heads, which scans flags it computes on the fly.
//   long long state[1 + 3 * ntiles] - zeroed before the launch: the ticket,
//                                     then per tile its flag, its sum, its
//                                     inclusive prefix
// Launch: ntiles thread blocks of BMSPARSE_SCAN_THREADS threads; a thread
// owns BMSPARSE_SCAN_ITEMS consecutive items of its tile. A tile's 8-byte
// items go through shared memory at scan_slot(i), so that both the
// coalesced loads (thread t, item k * THREADS + t) and a thread's own items
// (thread t, item t * ITEMS + k) are free of bank conflicts.
#pragma once
// block_exclusive_scan
#include "grid.cuh"
#include "group.cuh"

#define BMSPARSE_SCAN_THREADS 256
#define BMSPARSE_SCAN_ITEMS 8
#define BMSPARSE_SCAN_TILE (BMSPARSE_SCAN_THREADS * BMSPARSE_SCAN_ITEMS)
// shared memory words of a tile: one word of padding every 16
#define BMSPARSE_SCAN_SLOTS (BMSPARSE_SCAN_TILE + BMSPARSE_SCAN_TILE / 16)

__device__ __forceinline__ int scan_slot(int i) { return i + (i >> 4); }

// what scan_thread_prefix tells a thread
struct ScanPrefix {
    long long thread;  // the sum of every item before this thread's first
    long long tile;    // the sum of every item before the tile's first
    long long total;   // the sum of the tile's items
};

// the sum of tiles [0, tile): run by one whole warp
__device__ __forceinline__ long long scan_look_back(long long tile, long long ntiles,
                                                    long long* state, int lane)
{
    volatile long long* flags = state + 1;
    volatile long long* sums = state + 1 + ntiles;
    volatile long long* prefixes = state + 1 + 2 * ntiles;
    long long prefix = 0;
    for (long long last = tile - 1;; last -= 32) {
        const long long j = last - lane;
        long long flag = j >= 0 ? flags[j] : 2;
        while (__any_sync(0xffffffffu, flag == 0)) {
            if (flag == 0) flag = flags[j];
        }
        __threadfence();  // the sums and prefixes read below were written before the flags
        const unsigned int known = __ballot_sync(0xffffffffu, flag == 2);
        const int stop = known ? __ffs(known) - 1 : 32;  // nearest tile with a prefix
        long long v = 0;
        if (lane < stop) v = sums[j];
        else if (lane == stop && j >= 0) v = prefixes[j];
        prefix += group_reduce<32>(v, [](long long x, long long y) { return x + y; });
        if (known) return prefix;
    }
}

// this thread block's tile, from the ticket; called by every thread
__device__ __forceinline__ long long scan_ticket(long long* state)
{
    __shared__ long long tile_number;
    if (threadIdx.x == 0) tile_number = (long long)atomicAdd((unsigned long long*)state, 1ull);
    __syncthreads();
    return tile_number;
}

// The sums before this thread's first item and before the tile's, over the
// whole grid, given `sum`, the sum of this thread's items; called by every
// thread of the tile once, after scan_ticket. (Unsigned sums inside: the
// same bits as signed ones.)
__device__ __forceinline__ ScanPrefix scan_thread_prefix(long long sum, long long tile,
                                                         long long ntiles, long long* state)
{
    __shared__ u64 warp_sums[32];
    __shared__ long long tile_prefix;
    u64 tile_sum;
    const long long before = (long long)block_exclusive_scan((u64)sum, warp_sums, &tile_sum);
    const long long total = (long long)tile_sum;
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        volatile long long* flags = state + 1;
        volatile long long* sums = state + 1 + ntiles;
        volatile long long* prefixes = state + 1 + 2 * ntiles;
        if (tile > 0 && lane == 0) {
            sums[tile] = total;
            __threadfence();
            flags[tile] = 1;
        }
        const long long prefix = tile > 0 ? scan_look_back(tile, ntiles, state, lane) : 0;
        if (lane == 0) {
            prefixes[tile] = prefix + total;
            __threadfence();
            flags[tile] = 2;
            tile_prefix = prefix;
        }
    }
    __syncthreads();
    return ScanPrefix{tile_prefix + before, tile_prefix, total};
}

// The inclusive scan, over the whole grid, of the tile's 8-byte items held in
// shared memory (`items`, BMSPARSE_SCAN_SLOTS words at scan_slot places), in
// place: thread t takes items t * ITEMS + k. f(k, running) is called for
// each of the thread's items in order, with the sum up to and including it.
// Called by every thread of the tile after scan_ticket and the items'
// stores; barriers before and after.
template <typename F>
__device__ __forceinline__ void scan_tile_items(long long* items, long long tile,
                                                long long ntiles, long long* state, F f)
{
    __syncthreads();
    long long v[BMSPARSE_SCAN_ITEMS];
    long long sum = 0;
#pragma unroll
    for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {
        v[k] = items[scan_slot(threadIdx.x * BMSPARSE_SCAN_ITEMS + k)];
        sum += v[k];
    }
    long long running = scan_thread_prefix(sum, tile, ntiles, state).thread;
#pragma unroll
    for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {
        running += v[k];
        items[scan_slot(threadIdx.x * BMSPARSE_SCAN_ITEMS + k)] = running;
        f(k, running);
    }
    __syncthreads();
}
