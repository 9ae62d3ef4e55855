// tasks.cu - stage 1 of SpGEMM: the task list, in four fused steps.
//
// CuPy's primitives compute the same thing (tasks.py keeps their NumPy
// twins), but at one launch per elementwise step their fixed cost exceeded a
// whole small product; these kernels fuse each step into one launch. The one
// sort stays CuPy's (a keys-only radix sort of packed uint64 codes).
//
//   1. bmsparse_tasks_ranges : per A block (i, j), the run [lo, lo + count) of
//                              B blocks in B's block row j (binary searches)
//   2. bmsparse_tasks_expand : per task t, its sort code
//                              (i << (col_bits + task_bits)) | (k << task_bits) | t
//   3. sort the codes. A's keys are sorted, so the tasks of a block row i
//      are already contiguous and only need sorting among themselves:
//      bmsparse_tasks_spans finds where each block row starts and how long
//      the rows are, for the segment sort of ../_primitives.cu. When block
//      rows have few A blocks, bmsparse_tasks_rank replaces steps 2 to 4: it
//      merges each block row's sorted runs by binary searches, no sort.
//   4. bmsparse_tasks_unpack : per sorted position s, its A and B block and
//                              whether it starts an output block's run
//   5. bmsparse_tasks_heads  : per run start, c_ptr and c_keys
//
// Launch: one thread per item named in each kernel, 1-D grid.
// Work: O(a_nblocks log b_nblocks + ntasks log a_nblocks). Deterministic.
// Layout: see ../_cuda/bitmap.cuh.
#include "../_cuda/bitmap.cuh"

// first index in sorted ends[0, n) whose value is > t: the A block of task t
__device__ __forceinline__ long long owner_of(const long long* ends, long long n, long long t) {
    long long lo = 0, hi = n;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (ends[mid] <= t) lo = mid + 1; else hi = mid;
    }
    return lo;
}

//   u64       a_keys[a_nblocks], b_keys[b_nblocks]
//   long long lo[a_nblocks]     - out: first B block of block row j
//   long long counts[a_nblocks] - out: number of B blocks in block row j
extern "C" __global__ void bmsparse_tasks_ranges(
    const u64* __restrict__ a_keys, long long a_nblocks,
    const u64* __restrict__ b_keys, long long b_nblocks,
    long long* __restrict__ lo, long long* __restrict__ counts)
{
    long long a = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (a >= a_nblocks) return;
    const u64 j = block_col(a_keys[a]);
    const long long first = lower_bound(b_keys, b_nblocks, j << 32);
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
    lo[a] = first;
    counts[a] = last - first;
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
//   long long heads[ntasks]     - out: 1 where an output block's run starts, else 0
extern "C" __global__ void bmsparse_tasks_unpack(
    const u64* __restrict__ sorted, const long long* __restrict__ order, long long ntasks,
    long long task_bits, const long long* __restrict__ ends, long long a_nblocks,
    const long long* __restrict__ lo, const long long* __restrict__ counts,
    long long* __restrict__ task_a, long long* __restrict__ task_b,
    long long* __restrict__ heads)
{
    long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= ntasks) return;
    const u64 code = sorted[s];
    const long long t = order ? order[s] : (long long)(code & ((1ull << task_bits) - 1ull));
    const long long a = owner_of(ends, a_nblocks, t);
    task_a[s] = a;
    task_b[s] = lo[a] + t - (ends[a] - counts[a]);
    heads[s] = (s == 0 || (sorted[s - 1] >> task_bits) != (code >> task_bits)) ? 1 : 0;
}

//   u64       sorted[ntasks]    - as for unpack
//   long long heads[ntasks], rank[ntasks] - run starts and their inclusive scan
//   long long col_bits, task_bits
//   long long c_ptr[c_nblocks + 1] - out (c_ptr[c_nblocks] = ntasks)
//   u64       c_keys[c_nblocks]    - out
extern "C" __global__ void bmsparse_tasks_heads(
    const u64* __restrict__ sorted, const long long* __restrict__ heads,
    const long long* __restrict__ rank, long long ntasks, long long col_bits,
    long long task_bits, long long* __restrict__ c_ptr, u64* __restrict__ c_keys)
{
    long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= ntasks) return;
    if (s == ntasks - 1) c_ptr[rank[s]] = ntasks;
    if (!heads[s]) return;
    const long long q = rank[s] - 1;
    const u64 key = sorted[s] >> task_bits;
    c_ptr[q] = s;
    c_keys[q] = make_key(key >> col_bits, key & ((1ull << col_bits) - 1ull));
}

//   u64       a_keys[a_nblocks]; long long ends[a_nblocks], counts[a_nblocks]
//   long long chunk             - the segment sort's chunk, in tasks
//   long long row_a0[a_nblocks], row_a1[a_nblocks] - out: the A blocks [a0, a1) of
//                                 the block row of each A block
//   long long row_first[a_nblocks] - out: first task of that block row (non-decreasing:
//                                 the segments of the sort)
//   long long max_runs          - block rows of more A blocks are "heavy": sorted, not merged
//   u64       stats[4]          - out: the number of tasks (ends[a_nblocks - 1]); the
//                                 most tasks of one block row; the tasks of block rows
//                                 longer than a chunk; the tasks of heavy block rows
//                                 (atomics, one per thread block after a reduction: one
//                                 address for all rows would serialise them). Zeroed
//                                 by the caller; read on the host in one copy.
extern "C" __global__ void bmsparse_tasks_spans(
    const u64* __restrict__ a_keys, long long a_nblocks, const long long* __restrict__ ends,
    const long long* __restrict__ counts, long long chunk, long long max_runs,
    long long* __restrict__ row_a0,
    long long* __restrict__ row_a1, long long* __restrict__ row_first,
    unsigned long long* __restrict__ stats)
{
    __shared__ unsigned long long warp_sums[3][32];
    long long a = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    unsigned long long v[3] = {0, 0, 0};  // span, long tasks, heavy tasks
    if (a == a_nblocks - 1) stats[0] = (unsigned long long)ends[a];
    if (a < a_nblocks) {
        const u64 i = block_row(a_keys[a]);
        const long long a0 = lower_bound(a_keys, a_nblocks, i << 32);
        const long long a1 = i == 0xffffffffull ? a_nblocks
                                                : lower_bound(a_keys, a_nblocks, (i + 1) << 32);
        const long long first = ends[a0] - counts[a0];
        row_a0[a] = a0;
        row_a1[a] = a1;
        row_first[a] = first;
        if (a + 1 == a1) {  // the row's last block
            v[0] = (unsigned long long)(ends[a] - first);
            v[1] = v[0] > (unsigned long long)chunk ? v[0] : 0;
            v[2] = a1 - a0 > max_runs ? v[0] : 0;
        }
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        v[0] = max(v[0], __shfl_down_sync(0xffffffffu, v[0], d));
        v[1] += __shfl_down_sync(0xffffffffu, v[1], d);
        v[2] += __shfl_down_sync(0xffffffffu, v[2], d);
    }
    if ((threadIdx.x & 31) == 0) {
#pragma unroll
        for (int k = 0; k < 3; ++k) warp_sums[k][threadIdx.x >> 5] = v[k];
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        const bool valid = threadIdx.x < (blockDim.x + 31) / 32;
#pragma unroll
        for (int k = 0; k < 3; ++k) v[k] = valid ? warp_sums[k][threadIdx.x] : 0;
#pragma unroll
        for (int d = 16; d > 0; d >>= 1) {
            v[0] = max(v[0], __shfl_down_sync(0xffffffffu, v[0], d));
            v[1] += __shfl_down_sync(0xffffffffu, v[1], d);
            v[2] += __shfl_down_sync(0xffffffffu, v[2], d);
        }
        if (threadIdx.x == 0) {
            if (v[0]) atomicMax(stats + 1, v[0]);
            if (v[1]) atomicAdd(stats + 2, v[1]);
            if (v[2]) atomicAdd(stats + 3, v[2]);
        }
    }
}

// Place every task at its sorted position without sorting: the tasks of a
// block row are runs, one per A block (i, j), each sorted by k (B's block row
// j is); a task's rank in the merged row is its index in its run plus, for
// every other run, how many of its keys come first (ties go to the run of the
// smaller j, that is, the earlier task). A thread loops over the runs of its
// row, so rows of more than max_runs A blocks are left to a sort: their tasks
// append their packed sort code (as bmsparse_tasks_expand) to heavy_codes, in
// any order (the codes are distinct and get sorted).
//   long long ends[a_nblocks], lo[a_nblocks], counts[a_nblocks]
//   u64       a_keys[a_nblocks], b_keys[b_nblocks]
//   long long row_a0[a_nblocks], row_a1[a_nblocks], row_first[a_nblocks] - from spans
//   long long max_runs, col_bits, task_bits
//   long long task_a[ntasks], task_b[ntasks] - out: in sorted order (light rows)
//   u64       keys[ntasks]      - out: output key of each sorted task (light rows)
//   u64       heavy_codes[nheavy] - out: sort codes of the tasks of heavy rows
//   unsigned long long nheavy[1] - in/out: codes appended so far (starts at 0)
// Work: O(sum over light block rows of tasks * A blocks * log(B blocks per row)).
extern "C" __global__ void bmsparse_tasks_rank(
    const long long* __restrict__ ends, const long long* __restrict__ lo,
    const long long* __restrict__ counts, const u64* __restrict__ a_keys, long long a_nblocks,
    const u64* __restrict__ b_keys, long long ntasks, const long long* __restrict__ row_a0,
    const long long* __restrict__ row_a1, const long long* __restrict__ row_first,
    long long max_runs, long long col_bits, long long task_bits,
    long long* __restrict__ task_a, long long* __restrict__ task_b, u64* __restrict__ keys,
    u64* __restrict__ heavy_codes, unsigned long long* __restrict__ nheavy)
{
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= ntasks) return;
    const long long a = owner_of(ends, a_nblocks, t);
    const long long idx = t - (ends[a] - counts[a]);
    const long long b = lo[a] + idx;
    const u64 k = block_col(b_keys[b]);
    if (row_a1[a] - row_a0[a] > max_runs) {
        heavy_codes[atomicAdd(nheavy, 1ull)] =
            ((u64)block_row(a_keys[a]) << (col_bits + task_bits)) | (k << task_bits) | (u64)t;
        return;
    }
    long long rank = idx;
    for (long long q = row_a0[a]; q < row_a1[a]; ++q) {
        const long long n = counts[q];
        if (q == a || n == 0) continue;
        const u64 target = ((u64)block_col(a_keys[q]) << 32) | k;
        const u64* run = b_keys + lo[q];
        // keys of run q before ours: < target, or <= target for an earlier run
        long long l = 0, h = n;
        while (l < h) {
            const long long mid = (l + h) >> 1;
            if (run[mid] < target || (q < a && run[mid] == target)) l = mid + 1; else h = mid;
        }
        rank += l;
    }
    const long long s = row_first[a] + rank;
    task_a[s] = a;
    task_b[s] = b;
    keys[s] = make_key(block_row(a_keys[a]), k);
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

//   u64       keys[ntasks]      - output keys of the sorted tasks
//   long long heads[ntasks]     - out: 1 where an output block's run starts, else 0
extern "C" __global__ void bmsparse_tasks_key_heads(
    const u64* __restrict__ keys, long long ntasks, long long* __restrict__ heads)
{
    long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= ntasks) return;
    heads[s] = (s == 0 || keys[s - 1] != keys[s]) ? 1 : 0;
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
