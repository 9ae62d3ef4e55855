// tasks.cu - stage 1 of SpGEMM: the task list, in four fused steps.
//
// CuPy's primitives compute the same thing (tasks.py keeps their NumPy
// twins), but at one launch per elementwise step their fixed cost exceeded a
// whole small product; these kernels fuse each step into one launch. The one
// sort stays CuPy's (a keys-only radix sort of packed uint64 codes).
//
//   1. bmsparse_tasks_ranges : per A block (i, j), the run [lo, lo + count) of
//                              B blocks in B's block row j (B's row pointer,
//                              or binary searches), and the scan of the counts
//   2. bmsparse_tasks_expand : per task t, its sort code
//                              (i << (col_bits + task_bits)) | (k << task_bits) | t
//   3. sort the codes. A's keys are sorted, so the tasks of a block row i
//      are already contiguous and only need sorting among themselves:
//      bmsparse_tasks_spans finds where each block row starts and how long
//      the rows are, for the segment sort of ../_primitives.cu. When block
//      rows have few A blocks and tasks, bmsparse_tasks_rank replaces steps 2
//      to 4: it ranks each block row's tasks among themselves, no sort.
//   4. bmsparse_tasks_unpack : per sorted position s, its A and B block
//   5. bmsparse_tasks_run_heads : where an output block's run starts, its
//                              c_ptr and c_keys, numbered by a scan in the
//                              same launch
//
// Launch: one thread per item named in each kernel, 1-D grid (ranges and run_heads:
// as a scan, ../_cuda/scan.cuh).
// Work: O(a_nblocks log b_nblocks + ntasks log a_nblocks). Deterministic.
// Layout: see ../_cuda/bitmap.cuh.
#include "../_cuda/bitmap.cuh"
#include "../_cuda/scan.cuh"

// first index in sorted ends[0, n) whose value is > t: the A block of task t
__device__ __forceinline__ long long owner_of(const long long* ends, long long n, long long t) {
    long long lo = 0, hi = n;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (ends[mid] <= t) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// the run [first, first + count) of B blocks in block row j of B
__device__ __forceinline__ void b_row_run(u64 j, const u64* __restrict__ b_keys,
                                          long long b_nblocks,
                                          const long long* __restrict__ b_ptr,
                                          long long& first, long long& count)
{
    if (b_ptr) {
        first = b_ptr[j];
        count = b_ptr[j + 1] - first;
        return;
    }
    first = lower_bound(b_keys, b_nblocks, j << 32);
    // the last possible key of row j is j << 32 | 0xffffffff: search past it
    // without forming (j + 1) << 32, which overflows for j = 2**32 - 1
    long long last = first;
    if (first < b_nblocks && block_row(b_keys[first]) == j) {
        long long hi = b_nblocks;
        long long l = first;
        while (l < hi) {
            const long long mid = (l + hi) >> 1;
            if (block_row(b_keys[mid]) <= j) l = mid + 1; else hi = mid;
        }
        last = l;
    }
    count = last - first;
}

// Step 1, and with `ends` the inclusive scan of the counts in the same
// launch (the task list's first steps are host-bound: a launch less is
// 30-40 us less of a product's wall time):
//   u64       a_keys[a_nblocks], b_keys[b_nblocks]
//   long long b_ptr[]           - B's block-row pointer, or null (then binary searches)
//   long long lo[a_nblocks]     - out: first B block of block row j
//   long long counts[a_nblocks] - out: number of B blocks in block row j
//   long long ends[a_nblocks]   - out, or null: inclusive scan of counts
//   long long state[1 + 3 * ntiles] - zeroed scan state (with ends)
// Launch: ntiles = ceil(a_nblocks / BMSPARSE_SCAN_TILE) thread blocks of
// BMSPARSE_SCAN_THREADS threads (../_cuda/scan.cuh), each thread ranging
// BMSPARSE_SCAN_ITEMS A blocks.
extern "C" __global__ void __launch_bounds__(BMSPARSE_SCAN_THREADS) bmsparse_tasks_ranges(
    const u64* __restrict__ a_keys, long long a_nblocks,
    const u64* __restrict__ b_keys, long long b_nblocks, const long long* __restrict__ b_ptr,
    long long* __restrict__ lo, long long* __restrict__ counts, long long* __restrict__ ends,
    long long* state, long long ntiles)
{
    __shared__ long long items[BMSPARSE_SCAN_SLOTS];
    const long long tile = ends ? scan_ticket(state) : (long long)blockIdx.x;
    const long long base = tile * BMSPARSE_SCAN_TILE;
#pragma unroll
    for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {
        const long long a = base + k * BMSPARSE_SCAN_THREADS + threadIdx.x;
        long long first = 0, count = 0;
        if (a < a_nblocks) {
            b_row_run(block_col(a_keys[a]), b_keys, b_nblocks, b_ptr, first, count);
            lo[a] = first;
            counts[a] = count;
        }
        items[scan_slot(k * BMSPARSE_SCAN_THREADS + threadIdx.x)] = count;
    }
    if (!ends) return;  // the whole grid alike
    scan_tile_items(items, tile, ntiles, state, [](int, long long) {});
#pragma unroll
    for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {
        const long long a = base + k * BMSPARSE_SCAN_THREADS + threadIdx.x;
        if (a < a_nblocks) ends[a] = items[scan_slot(k * BMSPARSE_SCAN_THREADS + threadIdx.x)];
    }
}

//   long long ends[a_nblocks]   - inclusive scan of counts
//   long long lo[a_nblocks], counts[a_nblocks]
//   u64       a_keys[a_nblocks], b_keys[b_nblocks]
//   long long ntasks
//   int       col_bits, task_bits - widths of the packed fields
//   u64       codes[ntasks]     - out: sort code of each task
extern "C" __global__ void bmsparse_tasks_expand(
    const long long* __restrict__ ends, const long long* __restrict__ lo,
    const long long* __restrict__ counts, const u64* __restrict__ a_keys,
    long long a_nblocks, const u64* __restrict__ b_keys, long long ntasks,
    long long col_bits, long long task_bits, u64* __restrict__ codes)
{
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= ntasks) return;
    const long long a = owner_of(ends, a_nblocks, t);
    const long long b = lo[a] + t - (ends[a] - counts[a]);
    const u64 i = block_row(a_keys[a]), k = block_col(b_keys[b]);
    // with task_bits = 0 the code is the bare output key (argsort path)
    codes[t] = (i << (col_bits + task_bits)) | (k << task_bits) | (task_bits ? (u64)t : 0ull);
}

//   u64       sorted[ntasks]    - sorted codes (or, with order, sorted full keys)
//   long long order[ntasks]     - null, or the sorting permutation (then task_bits = 0)
//   long long ends[a_nblocks], lo[a_nblocks], counts[a_nblocks]
//   long long task_a[ntasks], task_b[ntasks] - out
extern "C" __global__ void bmsparse_tasks_unpack(
    const u64* __restrict__ sorted, const long long* __restrict__ order, long long ntasks,
    long long task_bits, const long long* __restrict__ ends, long long a_nblocks,
    const long long* __restrict__ lo, const long long* __restrict__ counts,
    long long* __restrict__ task_a, long long* __restrict__ task_b)
{
    long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= ntasks) return;
    const u64 code = sorted[s];
    const long long t = order ? order[s] : (long long)(code & ((1ull << task_bits) - 1ull));
    const long long a = owner_of(ends, a_nblocks, t);
    task_a[s] = a;
    task_b[s] = lo[a] + t - (ends[a] - counts[a]);
}

// the output blocks of a run_heads thread's tasks [first, first + ITEMS):
// bit k of starts says task first + k starts a run, and `runs` runs start
// before the first; two 16-byte stores where the thread's 8 tasks all exist
__device__ __forceinline__ void write_task_blocks(int* __restrict__ task_block,
                                                  long long ntasks, long long first,
                                                  unsigned int starts, long long runs)
{
    static_assert(BMSPARSE_SCAN_ITEMS == 8, "two int4 a thread");
    int block[BMSPARSE_SCAN_ITEMS];
    int run = (int)runs - 1;
#pragma unroll
    for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) block[k] = run += (int)((starts >> k) & 1u);
    if (first + BMSPARSE_SCAN_ITEMS <= ntasks) {
        int4* out = reinterpret_cast<int4*>(task_block + first);
        out[0] = make_int4(block[0], block[1], block[2], block[3]);
        out[1] = make_int4(block[4], block[5], block[6], block[7]);
        return;
    }
    for (int k = 0; first + k < ntasks; ++k) task_block[first + k] = block[k];
}

// The output blocks of the sorted tasks: a run starts where a task's key
// differs from the one before, and the one-launch scan of those starts
// (../_cuda/scan.cuh) numbers the runs in the same pass, so no flags or
// ranks are stored.
//   u64       sorted[ntasks]    - as for unpack: the key of a task is code >> task_bits,
//                                 its block row key >> col_bits, its block column the
//                                 low col_bits of the key
//   long long ntasks, col_bits, task_bits
//   long long state[1 + 3 * ntiles], ntiles - the scan's (zeroed), ceil(ntasks /
//                                 BMSPARSE_SCAN_TILE)
//   long long c_ptr[ntasks + 1] - out: first task of run q (q < c_nblocks), and
//                                 c_ptr[c_nblocks] = ntasks
//   u64       c_keys[ntasks]    - out: key of output block q (q < c_nblocks)
//   long long report[1]         - out: c_nblocks (may be page-locked host memory)
//   int       task_block[ntasks] - out, or null: the output block of each task
//                                 (ntasks < 2^31), for count.cu's count by tasks
extern "C" __global__ void __launch_bounds__(BMSPARSE_SCAN_THREADS) bmsparse_tasks_run_heads(
    const u64* __restrict__ sorted, long long ntasks, long long col_bits, long long task_bits,
    long long* state, long long ntiles, long long* __restrict__ c_ptr,
    u64* __restrict__ c_keys, long long* report, int* __restrict__ task_block)
{
    __shared__ u64 keys[BMSPARSE_SCAN_SLOTS];
    __shared__ short starts_at[BMSPARSE_SCAN_TILE];  // the tile's run starts, in order
    const long long tile = scan_ticket(state);
    const long long base = tile * BMSPARSE_SCAN_TILE;
#pragma unroll
    for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {  // coalesced, through shared memory
        const int i = k * BMSPARSE_SCAN_THREADS + threadIdx.x;
        keys[scan_slot(i)] = base + i < ntasks ? sorted[base + i] >> task_bits : 0;
    }
    __syncthreads();
    // this thread's tasks are [first, first + ITEMS); bit k: task first + k starts a run
    const int own = threadIdx.x * BMSPARSE_SCAN_ITEMS;
    const long long first = base + own;
    u64 before = own ? keys[scan_slot(own - 1)] : base ? sorted[base - 1] >> task_bits : 0;
    unsigned int starts = 0;
#pragma unroll
    for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {
        const u64 key = keys[scan_slot(own + k)];
        if (first + k < ntasks && (first + k == 0 || key != before)) starts |= 1u << k;
        before = key;
    }
    const ScanPrefix prefix = scan_thread_prefix(__popc(starts), tile, ntiles, state);
    if (task_block) write_task_blocks(task_block, ntasks, first, starts, prefix.thread);
    // the starts listed in shared memory, then written out coalesced
    for (int h = (int)(prefix.thread - prefix.tile); starts; starts &= starts - 1u, ++h)
        starts_at[h] = (short)(own + __ffs(starts) - 1);
    __syncthreads();
    const u64 col_mask = (1ull << col_bits) - 1ull;
    for (int h = threadIdx.x; h < prefix.total; h += BMSPARSE_SCAN_THREADS) {
        const int i = starts_at[h];
        const u64 key = keys[scan_slot(i)];
        c_ptr[prefix.tile + h] = base + i;
        c_keys[prefix.tile + h] = make_key(key >> col_bits, key & col_mask);
    }
    if (tile == ntiles - 1 && threadIdx.x == 0) {
        c_ptr[prefix.tile + prefix.total] = ntasks;
        *report = prefix.tile + prefix.total;
    }
}

// a block row the rank kernel leaves to a sort: spans counts what rank lists
__device__ __forceinline__ bool heavy_row(long long runs, long long tasks, long long max_runs,
                                          long long max_tasks) {
    return runs > max_runs || tasks > max_tasks;
}

// over a warp, into lane 0: the maximum of v[0], the sums of v[1..3]
__device__ __forceinline__ void reduce_spans(unsigned long long v[4]) {
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        v[0] = max(v[0], __shfl_down_sync(0xffffffffu, v[0], d));
#pragma unroll
        for (int k = 1; k < 4; ++k) v[k] += __shfl_down_sync(0xffffffffu, v[k], d);
    }
}

//   u64       a_keys[a_nblocks]; long long ends[a_nblocks], counts[a_nblocks]
//   long long a_ptr[]           - A's block-row pointer, or null (then binary searches)
//   long long chunk             - the segment sort's chunk, in tasks
//   long long max_runs, max_tasks - block rows of more A blocks or more tasks are "heavy":
//                                 sorted, not merged
//   long long row_first[a_nblocks] - out: first task of the block row of each A block
//                                 (non-decreasing: the segments of the sort)
//   long long rows[2 * a_nblocks] - out: the A blocks [a0, a1) of each non-empty block
//                                 row, as pairs a0, a1, in any order (appended)
//   u64       stats[6]          - out: the number of tasks (ends[a_nblocks - 1]); the
//                                 most tasks of one block row; the tasks of block rows
//                                 longer than a chunk; the tasks of heavy block rows;
//                                 the block rows; the heavy block rows (atomics, one
//                                 per thread block after a reduction, one per warp for
//                                 the rows: one address for all rows would serialise
//                                 them). Zeroed by the caller; read on the host in one
//                                 copy.
extern "C" __global__ void bmsparse_tasks_spans(
    const u64* __restrict__ a_keys, long long a_nblocks, const long long* __restrict__ ends,
    const long long* __restrict__ counts, const long long* __restrict__ a_ptr, long long chunk,
    long long max_runs, long long max_tasks, long long* __restrict__ row_first,
    long long* __restrict__ rows,
    unsigned long long* __restrict__ stats)
{
    __shared__ unsigned long long warp_sums[4][32];
    long long a = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    unsigned long long v[4] = {0, 0, 0, 0};  // span, long tasks, heavy tasks, heavy rows
    long long a0 = -1, a1 = 0;
    if (a == a_nblocks - 1) stats[0] = (unsigned long long)ends[a];
    if (a < a_nblocks) {
        const u64 i = block_row(a_keys[a]);
        a0 = a_ptr ? a_ptr[i] : lower_bound(a_keys, a_nblocks, i << 32);
        const long long first = ends[a0] - counts[a0];
        row_first[a] = first;
        if (a == a0) {  // the row's first block
            a1 = a_ptr ? a_ptr[i + 1]
                 : i == 0xffffffffull ? a_nblocks : lower_bound(a_keys, a_nblocks, (i + 1) << 32);
            v[0] = (unsigned long long)(ends[a1 - 1] - first);
            v[1] = v[0] > (unsigned long long)chunk ? v[0] : 0;
            v[3] = heavy_row(a1 - a0, (long long)v[0], max_runs, max_tasks);
            v[2] = v[3] ? v[0] : 0;
        }
    }
    const unsigned int starts = __ballot_sync(0xffffffffu, a == a0);
    unsigned long long at = 0;
    if (lane == 0 && starts) at = atomicAdd(stats + 4, (unsigned long long)__popc(starts));
    at = __shfl_sync(0xffffffffu, at, 0) + __popc(starts & ((1u << lane) - 1u));
    if (a == a0) {
        rows[2 * at] = a0;
        rows[2 * at + 1] = a1;
    }
    reduce_spans(v);
    if (lane == 0) {
#pragma unroll
        for (int k = 0; k < 4; ++k) warp_sums[k][threadIdx.x >> 5] = v[k];
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        const bool valid = threadIdx.x < (blockDim.x + 31) / 32;
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = valid ? warp_sums[k][threadIdx.x] : 0;
        reduce_spans(v);
        if (threadIdx.x == 0) {
            if (v[0]) atomicMax(stats + 1, v[0]);
            if (v[1]) atomicAdd(stats + 2, v[1]);
            if (v[2]) atomicAdd(stats + 3, v[2]);
            if (v[3]) atomicAdd(stats + 5, v[3]);
        }
    }
}

// Place every task at its sorted position without sorting: the tasks of a
// block row are runs, one per A block (i, j), each sorted by k (B's block row
// j is); a task's rank in the merged row is the number of the row's tasks
// whose (k, run) comes first (ties go to the run of the smaller j, that is,
// the earlier task). A warp takes a block row, its runs one per lane, so no
// task searches for its A block, and ranks the row's tasks in shared memory,
// each against all. Rows of more than max_runs (at most 32) A blocks or more
// than max_tasks (at most BMSPARSE_TASKS_RANK_CAP) tasks are heavy: with
// heavy_rows, each is listed there for bmsparse_tasks_sort_heavy; without,
// their tasks write their packed sort code (as bmsparse_tasks_expand) to
// heavy_codes, a range the row reserves with one atomic (the codes are
// distinct and get sorted, so rows may come in any order).
//   long long ends[a_nblocks], lo[a_nblocks], counts[a_nblocks]
//   u64       a_keys[a_nblocks], b_keys[b_nblocks]
//   long long rows[2 * nrows]   - the A blocks [a0, a1) of each block row, from spans
//   long long max_runs, max_tasks, col_bits, task_bits
//   long long task_a[ntasks], task_b[ntasks] - out: in sorted order (light rows)
//   u64       keys[ntasks]      - out: output key of each sorted task (light rows)
//   u64       heavy_codes[nheavy] - out: sort codes of the tasks of heavy rows (without
//                                 heavy_rows)
//   unsigned long long nheavy[1] - in/out: codes reserved, or rows listed, so far (from 0)
//   long long heavy_rows[]      - out: the heavy rows (indices into rows), or null
// Launch: a warp per block row, BMSPARSE_TASKS_RANK_THREADS threads per thread block.
// Work: O(sum over light rows of tasks^2 / 32 + tasks * 5 shuffles).
#define BMSPARSE_TASKS_RANK_THREADS 256
#define BMSPARSE_TASKS_RANK_CAP 256

// the lane holding the run of row-relative task s: the last run starting at
// or before s (runs start in order; an empty run is followed by the one that
// holds s). Every lane of the warp must call it.
__device__ __forceinline__ int run_of(long long s, long long start, int nruns) {
    int r = 0;
#pragma unroll
    for (int step = 16; step > 0; step >>= 1) {
        const int c = r + step;
        const long long at = __shfl_sync(0xffffffffu, start, c & 31);
        if (c < nruns && at <= s) r = c;
    }
    return r;
}

extern "C" __global__ void __launch_bounds__(BMSPARSE_TASKS_RANK_THREADS)
bmsparse_tasks_rank(
    const long long* __restrict__ ends, const long long* __restrict__ lo,
    const long long* __restrict__ counts, const u64* __restrict__ a_keys,
    const u64* __restrict__ b_keys, const long long* __restrict__ rows, long long nrows,
    long long max_runs, long long max_tasks, long long col_bits, long long task_bits,
    long long* __restrict__ task_a, long long* __restrict__ task_b, u64* __restrict__ keys,
    u64* __restrict__ heavy_codes, unsigned long long* __restrict__ nheavy,
    long long* __restrict__ heavy_rows)
{
    __shared__ u64 items[BMSPARSE_TASKS_RANK_THREADS / 32][BMSPARSE_TASKS_RANK_CAP];
    const long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (w >= nrows) return;  // the same for the whole warp
    const long long a0 = rows[2 * w], a1 = rows[2 * w + 1];
    const long long first = ends[a0] - counts[a0];
    const long long total = ends[a1 - 1] - first;
    const u64 i = block_row(a_keys[a0]);
    const bool heavy = heavy_row(a1 - a0, total, max_runs, max_tasks);
    if (heavy && heavy_rows) {
        if (lane == 0) heavy_rows[atomicAdd(nheavy, 1ull)] = w;
        return;
    }
    unsigned long long base = 0;
    if (heavy) {
        if (lane == 0 && total) base = atomicAdd(nheavy, (unsigned long long)total);
        base = __shfl_sync(0xffffffffu, base, 0);
    }
    u64* mine = items[threadIdx.x >> 5];
    // 32 runs at a time (a light row has one such group): each task's k
    for (long long q0 = a0; q0 < a1; q0 += 32) {
        const long long q = q0 + lane;
        long long n = 0, l = 0, start = 0;
        if (q < a1) { n = counts[q]; l = lo[q]; start = ends[q] - n - first; }
        const int nruns = (int)min(a1 - q0, 32ll);
        const long long from = __shfl_sync(0xffffffffu, start, 0);
        const long long to = __shfl_sync(0xffffffffu, start + n, nruns - 1);
        for (long long s0 = from; s0 < to; s0 += 32) {
            const long long s = s0 + lane;
            const int r = run_of(s, start, nruns);
            const long long rs = __shfl_sync(0xffffffffu, start, r);
            const long long rl = __shfl_sync(0xffffffffu, l, r);
            if (s >= to) continue;
            const u64 k = block_col(b_keys[rl + s - rs]);
            if (heavy)
                heavy_codes[base + s] = (i << (col_bits + task_bits)) | (k << task_bits)
                                        | (u64)(first + s);
            else
                mine[s] = (k << 5) | (u64)r;  // r < 32: the run breaks ties
        }
    }
    if (heavy) return;
    __syncwarp();
    for (long long s = lane; s < total; s += 32) {
        const u64 item = mine[s];
        int rank = 0;
        for (int x = 0; x < (int)total; ++x) rank += mine[x] < item;
        const long long q = a0 + (long long)(item & 31);
        const long long at = first + rank;
        task_a[at] = q;
        task_b[at] = lo[q] + s - (ends[q] - counts[q] - first);
        keys[at] = make_key(i, item >> 5);
    }
}

// The tasks of heavy rows of at most BMSPARSE_TASKS_HEAVY_CAP tasks, a thread
// block per row, sorted in shared memory instead of by a global sort: each
// task's code (k, its index in the row) in task order, a bitonic sort, then
// the tasks at their places. A task's A block is found by a binary search of
// the row's ends, held in shared memory when the row has at most runs_cap
// A blocks.
//   long long ends[a_nblocks], lo[a_nblocks], counts[a_nblocks]
//   u64       a_keys[a_nblocks], b_keys[b_nblocks]
//   long long rows[2 * nrows]   - from spans
//   long long heavy_rows[]      - the rows to sort (indices into rows), from rank
//   long long runs_cap          - at most BMSPARSE_TASKS_HEAVY_RUNS
//   long long task_a[ntasks], task_b[ntasks]; u64 keys[ntasks] - out, at their places
// Launch: BMSPARSE_TASKS_HEAVY_THREADS threads per heavy row.
#define BMSPARSE_TASKS_HEAVY_THREADS 1024
#define BMSPARSE_TASKS_HEAVY_CAP 4096
#define BMSPARSE_TASKS_HEAVY_RUNS 2048
#define BMSPARSE_TASKS_HEAVY_SHIFT 12  // log2 of the cap: the index field of a code

// the run (A block of the row, from 0) holding row-relative task s, and its first task
__device__ __forceinline__ long long heavy_run(const long long* row_ends, bool cached,
                                               const long long* ends, long long a0,
                                               long long first, long long nruns, long long s,
                                               long long* start) {
    long long l = 0, h = nruns;
    while (l < h) {
        const long long mid = (l + h) >> 1;
        const long long e = cached ? row_ends[mid] : ends[a0 + mid] - first;
        if (e <= s) l = mid + 1; else h = mid;
    }
    *start = l ? (cached ? row_ends[l - 1] : ends[a0 + l - 1] - first) : 0;
    return l;
}

extern "C" __global__ void __launch_bounds__(BMSPARSE_TASKS_HEAVY_THREADS)
bmsparse_tasks_sort_heavy(
    const long long* __restrict__ ends, const long long* __restrict__ lo,
    const long long* __restrict__ counts, const u64* __restrict__ a_keys,
    const u64* __restrict__ b_keys, const long long* __restrict__ rows,
    const long long* __restrict__ heavy_rows, long long runs_cap,
    long long* __restrict__ task_a, long long* __restrict__ task_b, u64* __restrict__ keys)
{
    __shared__ u64 codes[BMSPARSE_TASKS_HEAVY_CAP];
    __shared__ long long row_ends[BMSPARSE_TASKS_HEAVY_RUNS];
    const long long w = heavy_rows[blockIdx.x];
    const long long a0 = rows[2 * w], a1 = rows[2 * w + 1];
    const long long first = ends[a0] - counts[a0];
    const int total = (int)(ends[a1 - 1] - first);
    const long long nruns = a1 - a0;
    const bool cached = nruns <= runs_cap;
    for (long long r = threadIdx.x; cached && r < nruns; r += blockDim.x)
        row_ends[r] = ends[a0 + r] - first;
    __syncthreads();
    int size = 1;
    while (size < total) size <<= 1;
    for (int s = threadIdx.x; s < size; s += blockDim.x) {
        u64 code = ~0ull;  // padding sorts last
        if (s < total) {
            long long start;
            const long long r = heavy_run(row_ends, cached, ends, a0, first, nruns, s, &start);
            code = ((u64)block_col(b_keys[lo[a0 + r] + s - start]) << BMSPARSE_TASKS_HEAVY_SHIFT)
                   | (u64)s;
        }
        codes[s] = code;
    }
    __syncthreads();
    for (int len = 2; len <= size; len <<= 1) {
        for (int stride = len >> 1; stride > 0; stride >>= 1) {
            for (int x = threadIdx.x; x < size / 2; x += blockDim.x) {
                const int p = 2 * x - (x & (stride - 1));  // pairs (p, p + stride)
                const u64 u = codes[p], v = codes[p + stride];
                if ((u > v) == ((p & len) == 0)) { codes[p] = v; codes[p + stride] = u; }
            }
            __syncthreads();
        }
    }
    const u64 i = block_row(a_keys[a0]);
    for (int s = threadIdx.x; s < total; s += blockDim.x) {
        const u64 code = codes[s];
        const long long t = (long long)(code & ((1ull << BMSPARSE_TASKS_HEAVY_SHIFT) - 1ull));
        long long start;
        const long long r = heavy_run(row_ends, cached, ends, a0, first, nruns, t, &start);
        task_a[first + s] = a0 + r;
        task_b[first + s] = lo[a0 + r] + t - start;
        keys[first + s] = make_key(i, code >> BMSPARSE_TASKS_HEAVY_SHIFT);
    }
}

// The tasks of heavy rows, once their codes are sorted, to their places: a
// heavy row holds the contiguous range of tasks starting at row_first, and
// its codes are a contiguous range of the sorted ones (the row is their high
// bits), so sorted code h goes to row_first + h - (first sorted code of its row).
//   u64       sorted[nheavy]    - sorted codes of the heavy tasks
//   long long ends[a_nblocks], lo[a_nblocks], counts[a_nblocks]
//   long long row_first[a_nblocks] - first task of each A block's row (from spans)
//   long long col_bits, task_bits
//   long long task_a[ntasks], task_b[ntasks]; u64 keys[ntasks] - out, at their places
extern "C" __global__ void bmsparse_tasks_place_heavy(
    const u64* __restrict__ sorted, long long nheavy, const long long* __restrict__ ends,
    long long a_nblocks, const long long* __restrict__ lo, const long long* __restrict__ counts,
    const long long* __restrict__ row_first, long long col_bits, long long task_bits,
    long long* __restrict__ task_a, long long* __restrict__ task_b, u64* __restrict__ keys)
{
    long long h = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (h >= nheavy) return;
    const u64 code = sorted[h];
    const long long t = (long long)(code & ((1ull << task_bits) - 1ull));
    const long long a = owner_of(ends, a_nblocks, t);
    // the first sorted code of this row: the codes below h that share its high bits
    const u64 row_bits = code >> (col_bits + task_bits);
    long long l = 0, r = h;
    while (l < r) {
        const long long mid = (l + r) >> 1;
        if ((sorted[mid] >> (col_bits + task_bits)) < row_bits) l = mid + 1; else r = mid;
    }
    const long long s = row_first[a] + h - l;
    const u64 key = code >> task_bits;
    task_a[s] = a;
    task_b[s] = lo[a] + t - (ends[a] - counts[a]);
    keys[s] = make_key(key >> col_bits, key & ((1ull << col_bits) - 1ull));
}

// ---- masked task lists: pairs generated from the mask's blocks ---------------
//
// With a structural mask M, output block (i, k) can only be one of M's
// blocks, so the pairs are found from them (a masked inner product) and no
// pair that lands outside M is ever generated: A's block row i and B's block
// column k, both sorted by j, are intersected by walking the shorter and
// searching the longer. B's column order is bt_keys = B's keys with their
// halves swapped (k << 32 | j), sorted, and b_order maps it back to B.
// Launch: one warp (32 consecutive threads) per mask block, thread blocks of
// a multiple of 32 threads.
//
//   u64       m_keys[m_nblocks]       - mask block keys, increasing
//   u64       a_keys[a_nblocks]       - keys of A
//   u64       bt_keys[b_nblocks]      - swapped keys of B, increasing
//   long long a_range[2 * m_nblocks]  - A blocks of mask block q's row: [a_range[q],
//                                       a_range[m_nblocks + q])
//   long long b_range[2 * m_nblocks]  - bt_keys entries of its column, likewise
//   long long b_order[b_nblocks]      - B block of each bt_keys entry
//   long long counts[m_nblocks]       - out (count): pairs of each mask block
//   long long ends[m_nblocks]         - inclusive scan of counts
//   long long task_a[ntasks], task_b[ntasks] - out (pairs): the pairs, by mask
//                                       block, ascending j within one

// One warp per mask block (row, col): calls emit(rank, x, y) for every A
// block x of the row and bt_keys entry y of the column with the same j, rank
// being its place in ascending j; returns the number of matches. The lanes
// take 32 consecutive entries of the shorter list at a time and binary-search
// the longer, so a hub row costs its length / 32 steps, not its length.
template <typename Emit>
__device__ __forceinline__ long long intersect_row_col(
    const u64* __restrict__ a_keys, const u64* __restrict__ bt_keys, long long a0, long long a1,
    long long b0, long long b1, u64 row, u64 col, int lane, Emit emit)
{
    const u64 a_first_key = row << 32, b_first_key = col << 32;
    const bool walk_a = a1 - a0 <= b1 - b0;
    const u64* walk = walk_a ? a_keys : bt_keys;
    const u64* search = walk_a ? bt_keys : a_keys;
    const long long w0 = walk_a ? a0 : b0, w1 = walk_a ? a1 : b1;
    const long long s0 = walk_a ? b0 : a0, s1 = walk_a ? b1 : a1;
    const u64 search_prefix = walk_a ? b_first_key : a_first_key;
    long long found = 0;
    for (long long base = w0; base < w1; base += 32) {  // uniform across the warp
        const long long w = base + lane;
        long long pos = -1;
        if (w < w1) {
            const u64 want = search_prefix | block_col(walk[w]);
            const long long p = s0 + lower_bound(search + s0, s1 - s0, want);
            if (p < s1 && search[p] == want) pos = p;
        }
        const unsigned int hits = __ballot_sync(0xffffffffu, pos >= 0);
        if (pos >= 0) {
            const long long rank = found + __popc(hits & ((1u << lane) - 1u));
            if (walk_a) emit(rank, w, pos); else emit(rank, pos, w);
        }
        found += __popc(hits);
    }
    return found;
}

extern "C" __global__ void bmsparse_tasks_masked_count(
    const u64* __restrict__ m_keys, long long m_nblocks,
    const u64* __restrict__ a_keys, const u64* __restrict__ bt_keys,
    const long long* __restrict__ a_range, const long long* __restrict__ b_range,
    long long* __restrict__ counts)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long q = tid >> 5;
    if (q >= m_nblocks) return;  // the 32 lanes of a mask block leave together
    const int lane = (int)(tid & 31);
    const u64 key = m_keys[q];
    const long long n = intersect_row_col(
        a_keys, bt_keys, a_range[q], a_range[m_nblocks + q], b_range[q], b_range[m_nblocks + q],
        block_row(key), block_col(key), lane, [](long long, long long, long long) {});
    if (lane == 0) counts[q] = n;
}

extern "C" __global__ void bmsparse_tasks_masked_pairs(
    const u64* __restrict__ m_keys, long long m_nblocks,
    const u64* __restrict__ a_keys, const u64* __restrict__ bt_keys,
    const long long* __restrict__ a_range, const long long* __restrict__ b_range,
    const long long* __restrict__ b_order,
    const long long* __restrict__ counts, const long long* __restrict__ ends,
    long long* __restrict__ task_a, long long* __restrict__ task_b)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long q = tid >> 5;
    if (q >= m_nblocks) return;
    const int lane = (int)(tid & 31);
    const u64 key = m_keys[q];
    const long long first = ends[q] - counts[q];
    intersect_row_col(a_keys, bt_keys, a_range[q], a_range[m_nblocks + q], b_range[q],
                      b_range[m_nblocks + q], block_row(key), block_col(key), lane,
                      [&](long long rank, long long x, long long y) {
                          task_a[first + rank] = x;
                          task_b[first + rank] = b_order[y];
                      });
}

// The masked plus_pair sum of each mask block without any task list: the
// warp of mask block q walks its pairs as above and adds, for each, the
// popcount of the 8 rank-1 Boolean products inside the mask's bitmap (the
// count stage's bmsparse_count_pairs, fused), so nothing is stored per pair.
//   u64       m_bitmaps[m_nblocks]    - the mask's bitmaps
//   u64       a_bitmaps[a_nblocks], b_bitmaps[b_nblocks]
//   long long c_pairs[m_nblocks]      - out: number of (r, t, c) with A[r, t], B[t, c]
//                                       and bit (r, c) of the mask, over the pairs
extern "C" __global__ void bmsparse_tasks_count_masked_pairs(
    const u64* __restrict__ m_keys, const u64* __restrict__ m_bitmaps, long long m_nblocks,
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,
    const u64* __restrict__ bt_keys, const long long* __restrict__ b_order,
    const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ a_range, const long long* __restrict__ b_range,
    long long* __restrict__ c_pairs)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long q = tid >> 5;
    if (q >= m_nblocks) return;
    const int lane = (int)(tid & 31);
    const u64 key = m_keys[q], allowed = m_bitmaps[q];
    long long pairs = 0;
    intersect_row_col(a_keys, bt_keys, a_range[q], a_range[m_nblocks + q], b_range[q],
                      b_range[m_nblocks + q], block_row(key), block_col(key), lane,
                      [&](long long, long long x, long long y) {
                          const u64 a = a_bitmaps[x], b = b_bitmaps[b_order[y]];
#pragma unroll
                          for (int t = 0; t < 8; ++t) {
                              const u64 a_col = ((a >> t) & BMSPARSE_LOW_BITS) * 0xffull;
                              const u64 b_row = ((b >> (t << 3)) & 0xffull) * BMSPARSE_LOW_BITS;
                              pairs += __popcll(a_col & b_row & allowed);
                          }
                      });
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) pairs += __shfl_xor_sync(0xffffffffu, pairs, s);
    if (lane == 0) c_pairs[q] = pairs;
}
