// transpose.cu - the transpose of a bitmap matrix, block by block.
//
// Block (i, j) of A becomes block (j, i) of A.T: its key's halves swap, its
// bitmap is transposed (bit 8r + c moves to 8c + r) and its values move to
// the transposed bit order. The output blocks are A's blocks in
// column-major order, `order`, so the output keys come out sorted.
//
// bmsparse_transpose_columns: the whole transpose in one cooperative launch,
// its passes separated by grid barriers (_cuda/grid.cuh). Five concerns in
// one kernel, against the one-kernel-per-concern rule, because one launch
// instead of about twenty (CuPy's argsort alone is about twelve) is what
// makes the transpose of a small matrix cheap: its passes take 5-40 us of
// GPU time each and every launch 10-25 us of host time.
// The blocks are sorted by buckets: bucket (c, g) holds the blocks of block
// column c in block rows [g << group_shift, (g + 1) << group_shift), so
// that buckets follow each other in the output. transpose.py picks
// group_shift so that there are about as many buckets as blocks: a hub
// column is cut into many short buckets (a bucket per block row where the
// matrix has few block rows: nothing left to sort), and no column's sort
// holds up a thread block.
//   0. clear the counters (no memset before the launch: its barrier is the
//      stream's, _kernels.barrier_words);
//   1. count: every block adds (its value count << 32 | 1) to its bucket's
//      counter;
//   2. scan: an exclusive scan of the counters in place gives each bucket
//      its first output block (low half) and its first value (high half)
//      (scan_buckets; scan_columns, a thread a column, for counters by rows);
//   3. place: every block takes the next place of its bucket (the low half
//      is the cursor, and ends as the bucket's end), so a bucket holds its
//      blocks in no particular order;
//   4. sort: `ptr` from the columns' first buckets; a bucket's blocks are
//      put back in their order in A (which is their block-row order: A's
//      keys are sorted), written to `order` in that order, with the first
//      value of each run of the last pass (write_block). A bucket of at
//      most BMSPARSE_TRANSPOSE_SHORT blocks: a thread per block counts the
//      blocks before it; up to BMSPARSE_TRANSPOSE_WARP_RANKED: a warp, from
//      the grid's last, ranks each block against the others by shuffles;
//      longer: sorted by the thread blocks, from the first, a warp (up to
//      BMSPARSE_TRANSPOSE_MEDIUM)
//      in shared memory or the thread block, in shared memory up to
//      BMSPARSE_TRANSPOSE_SHARED, in `order` itself beyond. Sorts go by bins
//      of block rows, or a bitonic network when a bin overfills;
//   5. blocks and values: a warp per run of output blocks, in the output's
//      order, a value a lane (write_blocks_by_warps).
// `outputs` 0: passes 1-4 write `order` and `ptr` only, the column pointer
// of A.T @ x and of the task list; 1: and the blocks (no values).
//
// bmsparse_transpose_tiles: the same in one cooperative launch of four
// passes, for matrices of few block columns (transpose.py's TILE_COLUMNS):
// thread block t takes a tile of A's blocks (nblocks * t / grid up to the
// next tile's first).
//   1. count: the tile's blocks per block column, (value count << 32 | 1),
//      in shared memory (nbcols words of dynamic shared memory), written to
//      row t of `counts`;
//   2. scan: an exclusive scan of `counts` in column order (column c of
//      every tile, then column c + 1) in place, and `ptr`;
//   3. place: the tile's blocks, in A's order, take the next places of their
//      columns from row t, kept in shared memory: a warp's blocks of one
//      column by lane (__match_any_sync), the warps in turn. The blocks land
//      in A's order within each column, with no sort: `order` and the
//      first values of the runs, as pass 4 of the bucket kernel;
//   4. blocks and values, as pass 5 of the bucket kernel.
// Its `work` is a word per thread block and counts[grid * nbcols], none
// cleared; it takes no groups, group_shift, by_rows or placed.
//
// bmsparse_transpose_counts / bmsparse_transpose_outputs: the value count
// of each output block, then the last pass, for a given `order` (a sort
// made in transpose.py), for matrices beyond the one-launch kernel's limits
// (2^32 or more blocks or values, or far more block columns than blocks);
// an exclusive scan of `counts` in between gives t_offsets.
//
// Arguments (csr.h style):
//   u64       keys[nblocks], bitmaps[nblocks] - blocks of A
//   long long offsets[nblocks + 1]   - value offsets of A's blocks
//   T         values[nnz]            - values of A
//   long long nblocks, nbcols        - blocks and block columns of A
//   long long groups, group_shift    - buckets per block column, and log2 of
//                                      the block rows per bucket
//   long long by_rows                - nonzero: the counters row group after
//                                      row group (see slot())
//   long long warp_blocks            - output blocks a warp of the last pass
//                                      takes at a time (write_blocks_by_warps)
//   long long with_values            - (outputs kernel) nonzero: values to move
//   long long outputs                - see above
//   u64       bar[2]                 - the grid barrier's words, left ready by the
//                                      last launch (_kernels.barrier_words)
//   u64       work[nbcols * groups + 1 + grid] - the bucket counters and the
//                                      counts of the buckets pass 4 sorts (low
//                                      half) and ranks by warps (high half),
//                                      cleared by pass 0; the thread blocks' sums
//   long long ptr[nbcols + 1]        - out: A's blocks of block column c are
//                                      order[ptr[c]:ptr[c + 1]]
//   unsigned  placed[nblocks + 2 * (nblocks / 4 + 1)] - scratch: the blocks of
//                                      each bucket, then the buckets pass 4 sorts,
//                                      then those it ranks by warps
//   long long order[nblocks]         - out: A's block of each output block (in,
//                                      for the two-kernel path)
//   u64       t_keys[nblocks], t_bitmaps[nblocks] - out: blocks of A.T
//   long long counts[nblocks]        - out: values of each output block
//   long long t_offsets[nblocks + 1] - out: value offsets of A.T's blocks
//   T         t_values[nnz]          - out: values of A.T
//
// Launch: columns, tiles: a cooperative grid of
// BMSPARSE_TRANSPOSE_THREADS-thread blocks, at most as many as are resident
// at once; counts: one thread per output block; outputs: a warp per
// warp_blocks output blocks, whole warps.
// Work: O(nblocks + nbcols * groups + nnz), and to sort a bucket of L
// blocks O(L^2) at most 32 (in parallel), O(L) by bins, else
// O(L log^2 L); tiles: O(nblocks + grid * nbcols + nnz).
// Deterministic: values are only moved, the order is a sort.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"
#include "_cuda/grid.cuh"

#ifndef BMSPARSE_TRANSPOSE_THREADS
#define BMSPARSE_TRANSPOSE_THREADS 512
#endif
#ifndef BMSPARSE_TRANSPOSE_SHARED
#define BMSPARSE_TRANSPOSE_SHARED 8192
#endif

#ifndef BMSPARSE_TRANSPOSE_VALUE_LOADS
#define BMSPARSE_TRANSPOSE_VALUE_LOADS 4
#endif

// the blocks and values of output blocks [0, nblocks), in the output's
// order (the last pass of both one-launch kernels, and
// bmsparse_transpose_outputs), from `order` and the first value of each run
// of `per_warp` output blocks in t_offsets: warp `warp` of `nwarps` takes
// runs q0 = per_warp * warp, per_warp * (warp + nwarps), ... (per_warp a
// power of two, at most 32: fewer where blocks hold many values,
// transpose.py's warp_blocks). Lane l loads block q0 + l's source in A, its
// key, bitmap and first value, and writes the output block (stores
// coalesced); then, `with_values`, the warp moves the run's values, which
// follow each other in A.T, a value a lane: each lane's loads of A's values
// independent (BMSPARSE_TRANSPOSE_VALUE_LOADS in flight), the stores
// coalesced. A thread a row of each output block (8 a block) waited on a
// chain of three scattered loads for every block. H200, the surrogate, the
// values alone: float64 47.3 -> 34.2 us, float32 45.6 -> 30.2 (each value's
// owner found by a binary search of shuffles there; by marks, below, the
// whole kernel took the same or up to 3 us less on the FEM matrices). The
// whole warp calls it (its shuffles).
template <typename T>
__device__ void write_blocks_by_warps(const u64* __restrict__ keys,
                                      const u64* __restrict__ bitmaps,
                                      const long long* __restrict__ offsets,
                                      const T* __restrict__ values,
                                      const long long* __restrict__ order, long long nblocks,
                                      bool with_values, u64* __restrict__ t_keys,
                                      u64* __restrict__ t_bitmaps, long long* t_offsets,
                                      T* __restrict__ t_values, int per_warp, long long warp,
                                      long long nwarps)
{
    constexpr int U = BMSPARSE_TRANSPOSE_VALUE_LOADS;
    const int lane = threadIdx.x & 31;
    const long long stride = nwarps * per_warp;
    for (long long q0 = warp * per_warp; q0 < nblocks; q0 += stride) {
        const long long q = q0 + lane;
        const bool valid = lane < per_warp && q < nblocks;
        // (in a cooperative launch, order and t_offsets were written by other
        // thread blocks: loads through L2)
        const long long s = valid ? __ldcg(order + q) : 0;
        const u64 key = valid ? keys[s] : 0ull;
        const u64 bitmap = valid ? bitmaps[s] : 0ull;
        const long long in = valid && with_values ? offsets[s] : 0;
        const long long out = __ldcg(t_offsets + q0);
        const u64 t_bitmap = transpose_bitmap(bitmap);
        // the lane's first value among the run's (exclusive scan)
        const unsigned int n = (unsigned int)__popcll(bitmap);
        u64 sum;
        const unsigned int first = (unsigned int)warp_exclusive_scan(n, &sum);
        const unsigned int total = (unsigned int)sum;  // at most 32 x 64
        if (valid) {
            t_keys[q] = make_key(block_col(key), block_row(key));
            t_bitmaps[q] = t_bitmap;
            if (lane) t_offsets[q] = out + first;
        }
        if (!with_values) continue;
        for (unsigned int j0 = 0; j0 < total; j0 += 32 * U) {
            T v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const unsigned int j1 = j0 + 32 * u, j = j1 + lane;
                // the lane whose block holds value j: the last that starts at or
                // before it. Blocks hold values, so lane b holds the b-th block
                // to start: those before j1, and those marked in [j1, j]
                const bool mine = n && first >= j1 && first - j1 < 32u;
                const unsigned int marks =
                    __reduce_or_sync(0xffffffffu, mine ? 1u << (first - j1) : 0u);
                const int b = __popc(__ballot_sync(0xffffffffu, n && first < j1))
                              + __popc(marks & (0xffffffffu >> (31 - lane))) - 1;
                const u64 b_t_bitmap = __shfl_sync(0xffffffffu, t_bitmap, b);
                const u64 b_bitmap = __shfl_sync(0xffffffffu, bitmap, b);
                const long long b_in = __shfl_sync(0xffffffffu, in, b);
                const unsigned int b_first = __shfl_sync(0xffffffffu, first, b);
                if (j < total) {
                    const int bit = nth_set_bit(b_t_bitmap, (int)(j - b_first));
                    v[u] = values[b_in + value_index(b_bitmap, bit_of(bit & 7, bit >> 3))];
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const unsigned int j = j0 + 32 * u + lane;
                if (j < total) t_values[out + j] = v[u];
            }
        }
    }
}

// what both one-launch kernels write when they place a block
struct Outputs {
    int outputs;  // 0: `order` only, 1: and the blocks, 2: and the values (both
                  // by the last pass, write_blocks_by_warps)
    int per_warp;  // its runs of output blocks (a power of two)
    long long* order;
    long long* t_offsets;
};

// output block q is A's block s, its values from t_offset. The last pass
// writes the blocks in the output's order from `order` and the first value
// of each of its runs: stores here scatter, 8 bytes each to a sector of
// its own. ncu, H200, musae_git's tiles kernel: `order` alone 35 us; the
// blocks (4 arrays) and values written here, 61; by the last pass, 54
// (email-Enron 59 -> 48, the surrogate's bucket kernel 124 -> 113)
__device__ __forceinline__ void write_block(const Outputs& o, long long q, long long s,
                                            u64 t_offset)
{
    o.order[q] = s;
    if (o.outputs && (q & (o.per_warp - 1)) == 0) o.t_offsets[q] = (long long)t_offset;
}

// ---- bmsparse_transpose_columns ---------------------------------------------

#ifndef BMSPARSE_TRANSPOSE_SHORT
#define BMSPARSE_TRANSPOSE_SHORT 6
#endif
// each list of longer buckets has nblocks / 4 + 1 places
static_assert(BMSPARSE_TRANSPOSE_SHORT >= 3, "transpose.py sizes the lists for 4");
// blocks a lane holds when a warp ranks a bucket
#ifndef BMSPARSE_TRANSPOSE_LANE_BLOCKS
#define BMSPARSE_TRANSPOSE_LANE_BLOCKS 2
#endif
#define BMSPARSE_TRANSPOSE_WARP_RANKED (32 * BMSPARSE_TRANSPOSE_LANE_BLOCKS)
#define BMSPARSE_TRANSPOSE_WARPS (BMSPARSE_TRANSPOSE_THREADS / 32)
#define BMSPARSE_TRANSPOSE_MEDIUM (BMSPARSE_TRANSPOSE_SHARED / BMSPARSE_TRANSPOSE_WARPS)
#ifndef BMSPARSE_TRANSPOSE_FEW
#define BMSPARSE_TRANSPOSE_FEW 4
#endif
// a long bucket is cut into one bin per thread by value range; bins this
// full are sorted by the bitonic network instead
#ifndef BMSPARSE_TRANSPOSE_BIN
#define BMSPARSE_TRANSPOSE_BIN 64
#endif

// what the passes read and write
struct Columns {
    const u64* __restrict__ keys;
    const u64* __restrict__ bitmaps;
    Outputs out;           // and `ptr`
    long long nbcols;
    long long groups;      // buckets per block column
    int group_shift;       // a bucket holds 2^group_shift block rows of its column
    bool by_rows;          // the counters' order, see slot()
    u64* counters;         // [nbuckets], at slot(c, g): counts, then first (value << 32 |
                           // block); from pass 3 on, the low half is the bucket's end
    unsigned int* placed;  // [nblocks]: each bucket's blocks, unsorted (pass 3)
    unsigned int* longer;  // [nblocks / 4 + 1]: the buckets of more than
                           // BMSPARSE_TRANSPOSE_WARP_RANKED blocks, in no order
                           // (pass 2), then as many places for those of more
                           // than BMSPARSE_TRANSPOSE_SHORT up to it (ranked(),
                           // not a field: the kernel's registers are full)
    u64* nlonger;          // how many: the first list's (low half), the second's
};

// ceil(n / d) in 32 bits: the counts it divides (a bucket's blocks, the
// buckets, the listed buckets) are below 2^32, and a 64-bit division is a
// call whose saved registers spilled
__device__ __forceinline__ long long ceil_div32(long long n, unsigned int d)
{
    return (unsigned int)n / d + ((unsigned int)n % d != 0u);
}

__device__ __forceinline__ u64 value_count(const Columns& k, long long s)
{
    return k.out.outputs ? (u64)__popcll(k.bitmaps[s]) : 0ull;
}

// the counter of bucket (c, g), block column c's g-th group of block rows:
// in the output's order (column after column), or, `by_rows`, row group
// after row group. Passes 1 and 3 take A's blocks in block-row order, and
// with many counters (transpose.py's ROW_GROUP_COUNTERS) their scattered
// atomics miss L2 when the blocks in flight update counters across the
// whole array; by rows they update one row group's counters, a stretch
// that stays in L2 (surrogate, 1.0 M counters: pass 1 40 -> 17 us, pass 3
// 23 -> 10). With fewer counters the output's order is better: pass 2 reads
// them in that order, and by rows a warp's loads scatter when the groups
// are many (email-Enron, 72 a column: pass 2 12 -> 21 us)
__device__ __forceinline__ long long slot(const Columns& k, long long c, long long g)
{
    return k.by_rows ? g * k.nbcols + c : c * k.groups + g;
}

__device__ __forceinline__ long long group_of(const Columns& k, u64 key)
{
    return (long long)(block_row(key) >> k.group_shift);
}

__device__ __forceinline__ long long slot_of(const Columns& k, u64 key)
{
    return slot(k, (long long)block_col(key), group_of(k, key));
}

// after pass 3: bucket (c, g)'s blocks are placed[bucket_start(c, g), bucket_end(c, g))
__device__ __forceinline__ long long bucket_end(const Columns& k, long long c, long long g)
{
    return (long long)(__ldcg(k.counters + slot(k, c, g)) & 0xffffffffull);
}

// bucket b of the output's order, b = c * groups + g, as (c, g): b is below
// 2^32 (transpose.py's bucket_shift leaves at most 2^32 - 1 buckets), so a
// 32-bit division does
__device__ __forceinline__ void bucket_at(const Columns& k, long long b, long long* c,
                                          long long* g)
{
    *c = (long long)((unsigned int)b / (unsigned int)k.groups);
    *g = b - *c * k.groups;
}

__device__ __forceinline__ long long slot_at(const Columns& k, long long b)
{
    if (!k.by_rows) return b;
    long long c, g;
    bucket_at(k, b, &c, &g);
    return slot(k, c, g);
}

// the end of the bucket before, in the output's order (column by column)
__device__ __forceinline__ long long bucket_start(const Columns& k, long long c, long long g)
{
    return g ? bucket_end(k, c, g - 1) : c ? bucket_end(k, c - 1, k.groups - 1) : 0;
}

// the first value of bucket (c, g)'s blocks in A.T
__device__ __forceinline__ u64 bucket_values(const Columns& k, long long c, long long g)
{
    return __ldcg(k.counters + slot(k, c, g)) >> 32;
}

// a warp or the whole thread block sorting one bucket together: the
// thread's place in the group, the group's size, its barrier, whether any
// thread's `p` holds, and an exclusive scan over the group
template <bool WHOLE_BLOCK>
__device__ __forceinline__ int group_rank() { return WHOLE_BLOCK ? threadIdx.x : threadIdx.x & 31; }

template <bool WHOLE_BLOCK>
__device__ __forceinline__ int group_size() { return WHOLE_BLOCK ? blockDim.x : 32; }

template <bool WHOLE_BLOCK>
__device__ __forceinline__ void group_sync()
{
    if (WHOLE_BLOCK) __syncthreads(); else __syncwarp();
}

template <bool WHOLE_BLOCK>
__device__ __forceinline__ bool group_any(bool p)
{
    return WHOLE_BLOCK ? __syncthreads_or(p) != 0 : __any_sync(0xffffffffu, p);
}

template <bool WHOLE_BLOCK>
__device__ __forceinline__ u64 group_exclusive_scan(u64 v, u64* warp_sums, u64* total)
{
    return WHOLE_BLOCK ? block_exclusive_scan(v, warp_sums, total) : warp_exclusive_scan(v, total);
}

// the group's least `low` and greatest `high`, in place
template <bool WHOLE_BLOCK>
__device__ __forceinline__ void group_range(unsigned int* low, unsigned int* high)
{
    *low = __reduce_min_sync(0xffffffffu, *low);
    *high = __reduce_max_sync(0xffffffffu, *high);
    if (!WHOLE_BLOCK) return;
    __shared__ unsigned int block_low, block_high;
    if (threadIdx.x == 0) { block_low = 0xffffffffu; block_high = 0u; }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) { atomicMin(&block_low, *low); atomicMax(&block_high, *high); }
    __syncthreads();
    *low = block_low;
    *high = block_high;
    __syncthreads();  // before the next call resets them
}

// ascending sort of a[0, n) (shared or global memory) by a warp or the whole
// thread block: a bitonic network in its all-ascending form (the first step of each merge
// compares mirrored elements), so the elements past n of the next power of
// two act as +infinity and are never compared
template <bool WHOLE_BLOCK, typename I, typename V>
__device__ void group_sort(V* a, I n)
{
    const int rank = group_rank<WHOLE_BLOCK>(), size = group_size<WHOLE_BLOCK>();
    I width_max = 1;
    while (width_max < n) width_max <<= 1;
    const I pairs = width_max >> 1;
    for (I width = 2; width <= width_max; width <<= 1) {
        const I half = width >> 1;
        for (I p = rank; p < pairs; p += size) {
            const I i = ((p & ~(half - 1)) << 1) | (p & (half - 1));
            const I j = i ^ (width - 1);
            if (j < n && a[j] < a[i]) { const V x = a[i]; a[i] = a[j]; a[j] = x; }
        }
        group_sync<WHOLE_BLOCK>();
        for (I stride = width >> 2; stride > 0; stride >>= 1) {
            for (I p = rank; p < pairs; p += size) {
                const I i = ((p & ~(stride - 1)) << 1) | (p & (stride - 1));
                const I j = i + stride;
                if (j < n && a[j] < a[i]) { const V x = a[i]; a[i] = a[j]; a[j] = x; }
            }
            group_sync<WHOLE_BLOCK>();
        }
    }
}

// out[0, n) = in[0, n) sorted, by a warp or the whole thread block: a
// bin per thread by value range (the blocks of a bucket spread over its
// rows), then each thread sorts its bin by insertion. False, with `out`
// unsorted, when a bin holds more than BMSPARSE_TRANSPOSE_BIN values.
// `counts`: shared memory for one count per thread of the group.
template <bool WHOLE_BLOCK, typename I, typename V>
__device__ bool bin_sort(const unsigned int* in, I n, V* out, unsigned int* counts,
                         u64* warp_sums)
{
    const int rank = group_rank<WHOLE_BLOCK>(), size = group_size<WHOLE_BLOCK>();
    unsigned int low = 0xffffffffu, high = 0u;
    for (I i = rank; i < n; i += size) {
        const unsigned int v = __ldcg(in + i);
        low = min(low, v);
        high = max(high, v);
    }
    group_range<WHOLE_BLOCK>(&low, &high);
    const u64 span = (u64)(high - low) + 1ull;
    counts[rank] = 0u;
    group_sync<WHOLE_BLOCK>();
    for (I i = rank; i < n; i += size)
        atomicAdd(counts + ((__ldcg(in + i) - low) * (u64)size) / span, 1u);
    group_sync<WHOLE_BLOCK>();
    const unsigned int count = counts[rank];
    if (group_any<WHOLE_BLOCK>(count > BMSPARSE_TRANSPOSE_BIN)) return false;
    u64 total;
    const I start = (I)group_exclusive_scan<WHOLE_BLOCK>(count, warp_sums, &total);
    counts[rank] = (unsigned int)start;  // now the bin's cursor
    group_sync<WHOLE_BLOCK>();
    for (I i = rank; i < n; i += size) {
        const unsigned int v = __ldcg(in + i);
        out[atomicAdd(counts + ((v - low) * (u64)size) / span, 1u)] = v;
    }
    group_sync<WHOLE_BLOCK>();
    for (I i = start + 1; i < start + (I)count; ++i) {
        const V v = out[i];
        I j = i - 1;
        for (; j >= start && out[j] > v; --j) out[j + 1] = out[j];
        out[j + 1] = v;
    }
    group_sync<WHOLE_BLOCK>();
    return true;
}

// pass 4 for a bucket of at most BMSPARSE_TRANSPOSE_SHORT blocks: block s
// counts the blocks of its bucket that come before it, and their values
__device__ __forceinline__ void rank_in_short_bucket(const Columns& k, long long s)
{
    const u64 key = k.keys[s];
    const long long c = block_col(key), g = group_of(k, key);
    const long long lo = bucket_start(k, c, g), n = bucket_end(k, c, g) - lo;
    if (n > BMSPARSE_TRANSPOSE_SHORT) return;
    long long rank = 0;
    u64 before = 0;
    for (long long i0 = 0; i0 < n; i0 += 8) {
        unsigned int other[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) other[j] = i0 + j < n ? __ldcg(k.placed + lo + i0 + j) : ~0u;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            if (other[j] < s) {
                ++rank;
                before += value_count(k, other[j]);
            }
        }
    }
    write_block(k.out, lo + rank, s, bucket_values(k, c, g) + before);
}

// pass 4's output for bucket (c, g), its blocks sorted in a[0, n):
// each thread of the warp (thread block) writes a run of consecutive output
// blocks, after one scan of the runs' values, loading a few blocks at a
// time (the stores between would keep the compiler from moving the loads up)
template <bool WHOLE_BLOCK, typename V>
__device__ void write_sorted(const Columns& k, long long c, long long g, long long lo,
                             const V* a, long long n, u64* warp_sums)
{
    const int rank = group_rank<WHOLE_BLOCK>(), size = group_size<WHOLE_BLOCK>();
    const long long run = ceil_div32(n, (unsigned int)size);
    const long long i0 = rank * run < n ? rank * run : n;
    const long long i1 = i0 + run < n ? i0 + run : n;
    u64 sum = 0, total;
    for (long long i = i0; i < i1; ++i)
        sum += value_count(k, (long long)a[i]);
    u64 at = bucket_values(k, c, g) + group_exclusive_scan<WHOLE_BLOCK>(sum, warp_sums, &total);
    for (long long i = i0; i < i1; i += 4) {
        long long s[4];
        u64 count[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            s[u] = i + u < i1 ? (long long)a[i + u] : -1;
            count[u] = s[u] >= 0 ? value_count(k, s[u]) : 0ull;
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            if (s[u] < 0) break;
            write_block(k.out, lo + i + u, s[u], at);
            at += count[u];
        }
    }
}

// pass 4 for a bucket of more than BMSPARSE_TRANSPOSE_SHORT blocks, sorted
// into `sorted` by a warp (up to BMSPARSE_TRANSPOSE_MEDIUM blocks, in its
// slice of shared memory) or by the whole thread block (in shared memory
// when the bucket fits `tile`, else in `order` itself: a sort in global
// memory is several times slower, the surrogate's longest column of 7,861
// blocks took 100 us as one bucket): by bins of block rows, else by the bitonic
// network
template <bool WHOLE_BLOCK, typename I, typename V>
__device__ void sort_bucket(const Columns& k, long long c, long long g, long long lo, I n,
                            V* sorted, unsigned int* counts, u64* warp_sums)
{
    if (!bin_sort<WHOLE_BLOCK>(k.placed + lo, n, sorted, counts, warp_sums)) {
        for (I i = group_rank<WHOLE_BLOCK>(); i < n; i += group_size<WHOLE_BLOCK>())
            sorted[i] = __ldcg(k.placed + lo + i);
        group_sync<WHOLE_BLOCK>();
        group_sort<WHOLE_BLOCK>(sorted, n);
    }
    write_sorted<WHOLE_BLOCK>(k, c, g, lo, sorted, (long long)n, warp_sums);
    group_sync<WHOLE_BLOCK>();  // `sorted` is reused
}

// a bucket of pass 4's lists: its column and group, and its blocks
// placed[lo, lo + n)
struct ListedBucket {
    long long c, g, lo, n;
};

__device__ __forceinline__ ListedBucket listed_bucket(const Columns& k, long long b)
{
    ListedBucket x;
    bucket_at(k, b, &x.c, &x.g);
    x.lo = bucket_start(k, x.c, x.g);
    x.n = bucket_end(k, x.c, x.g) - x.lo;
    return x;
}

// pass 4 for the buckets longer than BMSPARSE_TRANSPOSE_WARP_RANKED (listed
// by pass 2): thread block t takes the listed buckets t, t + grid, t + 2 grid,
// ..., up to one per thread at a time, hands the medium ones to its warps
// and sorts the long ones itself. With at most BMSPARSE_TRANSPOSE_FEW
// buckets it sorts all of them itself, one after the other: a warp's sort
// is a chain of several loads per lane for every 32 blocks, which the
// thread block's runs in one or a few rounds (surrogate 208 -> 194 us in
// all, email-Enron, whose few buckets are short, 88 -> 92).
__device__ void sort_longer_buckets(const Columns& k, long long listed, unsigned int* tile,
                                    unsigned int* lists, u64* warp_sums)
{
    unsigned int* medium = lists;
    unsigned int* longer = lists + BMSPARSE_TRANSPOSE_THREADS;
    unsigned int* bin_counts = lists + 2 * BMSPARSE_TRANSPOSE_THREADS;
    __shared__ int nmedium, nlonger;
    const int warp = threadIdx.x >> 5;
    const long long mine = blockIdx.x < listed
        ? (unsigned int)(listed - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    const long long most_medium = mine <= BMSPARSE_TRANSPOSE_FEW ? BMSPARSE_TRANSPOSE_WARP_RANKED
                                                                 : BMSPARSE_TRANSPOSE_MEDIUM;
    for (long long first = 0; first < mine; first += blockDim.x) {
        if (threadIdx.x == 0) nmedium = nlonger = 0;
        __syncthreads();
        if (first + threadIdx.x < mine) {
            const long long b = __ldcg(k.longer + blockIdx.x + (first + threadIdx.x) * gridDim.x);
            if (listed_bucket(k, b).n > most_medium)
                longer[atomicAdd(&nlonger, 1)] = (unsigned int)b;
            else
                medium[atomicAdd(&nmedium, 1)] = (unsigned int)b;
        }
        __syncthreads();
        for (int m = warp; m < nmedium; m += BMSPARSE_TRANSPOSE_WARPS) {
            const ListedBucket x = listed_bucket(k, medium[m]);
            sort_bucket<false>(k, x.c, x.g, x.lo, (int)x.n,
                               tile + warp * BMSPARSE_TRANSPOSE_MEDIUM, bin_counts + warp * 32,
                               nullptr);
        }
        __syncthreads();
        // (the warps' bin counts are free again)
        for (int m = 0; m < nlonger; ++m) {
            const ListedBucket x = listed_bucket(k, longer[m]);
            if (x.n <= BMSPARSE_TRANSPOSE_SHARED)
                sort_bucket<true>(k, x.c, x.g, x.lo, x.n, tile, bin_counts, warp_sums);
            else  // order[lo + i] is written as it already is
                sort_bucket<true>(k, x.c, x.g, x.lo, x.n, k.out.order + x.lo, bin_counts,
                                  warp_sums);
        }
        __syncthreads();
    }
}

// pass 4 for a bucket of more than BMSPARSE_TRANSPOSE_SHORT and at most
// BMSPARSE_TRANSPOSE_WARP_RANKED blocks, by one warp: lane l holds blocks l,
// l + 32, ... of the bucket and ranks each against all the others, which
// come round by shuffles with their value counts. A lane loads its blocks
// once (the short rank loads the whole bucket for each of its blocks) and no
// barrier holds the warp (a thread block's sort does: with buckets of 33-64
// blocks sorted by thread blocks one after another, a fifth of the kernel's
// stall samples on email-Enron were at the grid barrier after this pass).
// ncu, H200, the whole kernel, us, with buckets of 7-64 blocks ranked so
// (BMSPARSE_TRANSPOSE_SHORT 32 -> 6): email-Enron 88 -> 61, musae_git 96
// -> 79, the surrogate 163 -> 145, bcsstk33 and p2p-Gnutella31 -1 us,
// luxembourg_osm and wiki-Vote the same, ca-GrQc +1; up to 128 blocks
// (BMSPARSE_TRANSPOSE_LANE_BLOCKS 4), 2-5 us slower.
__device__ void rank_in_warp(const Columns& k, const ListedBucket& x)
{
    constexpr int E = BMSPARSE_TRANSPOSE_LANE_BLOCKS;
    const int lane = threadIdx.x & 31;
    // 32-bit each: the kernel has 64 registers, and with 64-bit ranks and
    // the blocks kept whole it spilled more
    unsigned int s[E], count[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const long long i = lane + 32 * e;
        s[e] = i < x.n ? __ldcg(k.placed + x.lo + i) : ~0u;  // none: above every block
    }
#pragma unroll
    for (int e = 0; e < E; ++e) count[e] = s[e] != ~0u ? (unsigned int)value_count(k, s[e]) : 0u;
    // (a bucket here has at most 32 E blocks of at most 64 values)
    unsigned int rank[E] = {}, before[E] = {};
    for (int f = 0; f < E && 32 * f < x.n; ++f) {
        for (int from = 0; from < 32; ++from) {
            const unsigned int other = __shfl_sync(0xffffffffu, s[f], from);
            const unsigned int other_count = __shfl_sync(0xffffffffu, count[f], from);
#pragma unroll
            for (int e = 0; e < E; ++e) {
                if (other < s[e]) {
                    ++rank[e];
                    before[e] += other_count;
                }
            }
        }
    }
    const u64 first = bucket_values(k, x.c, x.g);
#pragma unroll
    for (int e = 0; e < E; ++e) {
        if (s[e] != ~0u) write_block(k.out, x.lo + rank[e], s[e], first + before[e]);
    }
}

// the second list of pass 2: the buckets of more than BMSPARSE_TRANSPOSE_SHORT
// and at most BMSPARSE_TRANSPOSE_WARP_RANKED blocks
__device__ __forceinline__ unsigned int* ranked(const Columns& k, long long nblocks)
{
    return k.longer + nblocks / 4 + 1;
}

// pass 4 for the buckets of the second list: the grid's warps take them in
// turn from the last warp down, away from the thread blocks that
// sort_longer_buckets gives the first list to (from the first up)
__device__ void rank_listed_by_warps(const Columns& k, long long nblocks, long long listed)
{
    const long long nwarps = (long long)gridDim.x * (blockDim.x >> 5);
    const long long warp = nwarps - 1 - ((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5);
    for (long long i = warp; i < listed; i += nwarps)
        rank_in_warp(k, listed_bucket(k, __ldcg(ranked(k, nblocks) + i)));
}

// pass 2's lists: bucket b of n blocks joins the first (more than
// BMSPARSE_TRANSPOSE_WARP_RANKED blocks) or the second (more than
// BMSPARSE_TRANSPOSE_SHORT); one atomic a warp for both, on one word (an
// atomic a bucket queued there). Called by whole warps.
__device__ __forceinline__ void list_bucket(const Columns& k, long long nblocks, long long b,
                                            u64 n)
{
    const bool first = n > BMSPARSE_TRANSPOSE_WARP_RANKED;
    const bool second = !first && n > BMSPARSE_TRANSPOSE_SHORT;
    const unsigned int firsts = __ballot_sync(0xffffffffu, first);
    const unsigned int seconds = __ballot_sync(0xffffffffu, second);
    if (!(firsts | seconds)) return;
    const int lane = threadIdx.x & 31;
    u64 at = 0;
    if (lane == 0)
        at = atomicAdd(k.nlonger, ((u64)__popc(seconds) << 32) | (u64)__popc(firsts));
    at = __shfl_sync(0xffffffffu, at, 0);
    const unsigned int below = (1u << lane) - 1u;
    if (first) k.longer[(at & 0xffffffffull) + __popc(firsts & below)] = (unsigned int)b;
    if (second) ranked(k, nblocks)[(at >> 32) + __popc(seconds & below)] = (unsigned int)b;
}

// pass 2: exclusive scan of the bucket counters in place, in the output's
// order (bucket b = c * groups + g), each thread block scanning an equal
// run of buckets after the sum of the runs before it; the buckets pass 4
// sorts are listed
__device__ void scan_buckets(const Columns& k, long long nblocks, long long nbuckets, u64* bar,
                             u64* block_sums, u64* warp_sums)
{
    const long long run = ceil_div32(nbuckets, gridDim.x);
    const long long lo = blockIdx.x * run;
    const long long hi = lo + run < nbuckets ? lo + run : nbuckets;
    u64 sum = 0, total;
    for (long long b = lo + threadIdx.x; b < hi; b += blockDim.x)
        sum += __ldcg(k.counters + slot_at(k, b));
    u64 before = grid_blocks_before(sum, bar, block_sums, warp_sums);
    for (long long b0 = lo; b0 < hi; b0 += blockDim.x) {
        const long long b = b0 + threadIdx.x;
        u64* counter = k.counters + (b < hi ? slot_at(k, b) : 0);
        const u64 v = b < hi ? __ldcg(counter) : 0ull;
        const u64 at = before + block_exclusive_scan(v, warp_sums, &total);
        if (b < hi) *counter = at;
        list_bucket(k, nblocks, b, v & 0xffffffffull);
        before += total;
    }
}

// column c (0 past nbcols) of a row-major array of nbcols columns summed
// over rows [t0, t1), LOADS loads in flight: the tiles' counts, or the
// bucket counters by rows (row g: group g)
template <int LOADS>
__device__ __forceinline__ u64 column_sum(const u64* counts, long long nbcols, long long c,
                                          long long t0, long long t1)
{
    u64 sum = 0;
    for (long long t = t0; c < nbcols && t < t1; t += LOADS) {
#pragma unroll
        for (int u = 0; u < LOADS; ++u)
            if (t + u < t1) sum += __ldcg(counts + (t + u) * nbcols + c);
    }
    return sum;
}

// pass 2 with the counters by rows (slot()) and at most
// BMSPARSE_TRANSPOSE_COLUMN_GROUPS groups: the same scan, a thread a block
// column and its groups, so that a warp's loads of a group's counters are
// consecutive (scan_buckets' threads take consecutive buckets, which by rows
// lie nbcols counters apart)
#ifndef BMSPARSE_TRANSPOSE_COLUMN_GROUPS
#define BMSPARSE_TRANSPOSE_COLUMN_GROUPS 64
#endif
__device__ void scan_columns(const Columns& k, long long nblocks, u64* bar, u64* block_sums,
                             u64* warp_sums)
{
    const long long run = ceil_div32(k.nbcols, gridDim.x);
    const long long lo = blockIdx.x * run;
    const long long hi = lo + run < k.nbcols ? lo + run : k.nbcols;
    u64 sum = 0, total;
    for (long long c = lo + threadIdx.x; c < hi; c += blockDim.x)
        sum += column_sum<4>(k.counters, k.nbcols, c, 0, k.groups);
    u64 before = grid_blocks_before(sum, bar, block_sums, warp_sums);
    for (long long c0 = lo; c0 < hi; c0 += blockDim.x) {
        const long long c = c0 + threadIdx.x;
        const bool mine = c < hi;
        u64 at = before + block_exclusive_scan(
            mine ? column_sum<4>(k.counters, k.nbcols, c, 0, k.groups) : 0ull, warp_sums, &total);
        for (long long g = 0; g < k.groups; ++g) {
            u64* counter = k.counters + g * k.nbcols + (mine ? c : 0);
            const u64 v = mine ? __ldcg(counter) : 0ull;
            if (mine) *counter = at;
            list_bucket(k, nblocks, c * k.groups + g, v & 0xffffffffull);
            at += v;
        }
        before += total;
    }
}

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_TRANSPOSE_THREADS) bmsparse_transpose_columns(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    long long nblocks, long long nbcols, long long groups, long long group_shift,
    long long by_rows, long long warp_blocks,
    long long outputs, u64* bar, u64* work, long long* ptr, unsigned int* placed,
    long long* order,
    u64* t_keys, u64* t_bitmaps, long long* t_offsets, T* t_values)
{
    __shared__ unsigned int tile[BMSPARSE_TRANSPOSE_SHARED];
    __shared__ unsigned int lists[3 * BMSPARSE_TRANSPOSE_THREADS];  // pass 4's
    __shared__ u64 warp_sums[32];
    const long long nbuckets = nbcols * groups;
    u64* block_sums = work + nbuckets + 1;
    // a flag, not null pointers, says which outputs are wanted: an empty
    // array's pointer is null too
    Columns k = {keys, bitmaps, {(int)outputs, (int)warp_blocks, order, t_offsets},
                 nbcols, groups, (int)group_shift, by_rows != 0,
                 work, placed, placed + nblocks, work + nbuckets};
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long nthreads = gridDim.x * (long long)blockDim.x;

    // 0. clear
    for (long long i = tid; i <= nbuckets; i += nthreads) work[i] = 0ull;
    grid_barrier(bar);
    // 1. count
    for (long long s = tid; s < nblocks; s += nthreads)
        atomicAdd(k.counters + slot_of(k, keys[s]), (value_count(k, s) << 32) | 1ull);
    grid_barrier(bar);
    // 2. scan
    if (k.by_rows && groups <= BMSPARSE_TRANSPOSE_COLUMN_GROUPS)
        scan_columns(k, nblocks, bar, block_sums, warp_sums);
    else
        scan_buckets(k, nblocks, nbuckets, bar, block_sums, warp_sums);
    grid_barrier(bar);
    // 3. place: the low halves are the buckets' cursors (a bucket's last
    // place is below 2^32, so they never carry into the high halves)
    for (long long s = tid; s < nblocks; s += nthreads) {
        const u64 at = atomicAdd(k.counters + slot_of(k, keys[s]), 1ull);
        placed[at & 0xffffffffull] = (unsigned int)s;
    }
    grid_barrier(bar);
    // 4. sort and write (the counters' high halves still hold the buckets'
    // first values); a column starts with its first bucket
    for (long long c = tid; c <= nbcols; c += nthreads)
        ptr[c] = c < nbcols ? bucket_start(k, c, 0) : nblocks;
    // the warps' ranks first: a listed bucket is a longer chain of loads than
    // a short one (email-Enron 65.6 -> 62.0 us with a bucket of up to 8
    // ranked by a thread)
    const u64 listed = __ldcg(k.nlonger);
    rank_listed_by_warps(k, nblocks, (long long)(listed >> 32));
    for (long long s = tid; s < nblocks; s += nthreads) rank_in_short_bucket(k, s);
    sort_longer_buckets(k, (long long)(listed & 0xffffffffull), tile, lists, warp_sums);
    if (outputs == 0) return;
    if (tid == 0) t_offsets[nblocks] = offsets[nblocks];
    grid_barrier(bar);
    // 5. blocks and values
    write_blocks_by_warps(keys, bitmaps, offsets, values, order, nblocks, outputs == 2, t_keys,
                          t_bitmaps, t_offsets, t_values, (int)warp_blocks, tid >> 5,
                          nthreads >> 5);
}

// ---- bmsparse_transpose_tiles ------------------------------------------------

// the first of tile t's blocks: nblocks * t / tiles (below 2^32 * 2^16)
__device__ __forceinline__ long long tile_start(long long nblocks, long long t)
{
    return nblocks * t / gridDim.x;
}

// pass 1 of the tiles: `column` (shared, nbcols words) counts the tile's
// blocks per block column, (value count << 32 | 1), and becomes row t of
// `counts`
__device__ void count_tile(const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
                           long long lo, long long hi, long long nbcols, bool with_values,
                           u64* column, u64* counts)
{
    for (long long c = threadIdx.x; c < nbcols; c += blockDim.x) column[c] = 0ull;
    __syncthreads();
    for (long long s = lo + threadIdx.x; s < hi; s += blockDim.x) {
        const u64 n = with_values ? (u64)__popcll(bitmaps[s]) : 0ull;
        atomicAdd(column + block_col(keys[s]), (n << 32) | 1ull);
    }
    __syncthreads();
    u64* row = counts + blockIdx.x * nbcols;
    for (long long c = threadIdx.x; c < nbcols; c += blockDim.x) row[c] = column[c];
}

// pass 2 of the tiles: exclusive scan of `counts` (tiles x nbcols, row
// after row) in place, in column order (column c of every tile before c +
// 1): counts[t][c] becomes the first output block (low half) and value
// (high half) of tile t's blocks of column c, and ptr[c] the column's first
// block. A thread block takes a run of groups of 32 columns; in a group, lane
// l of warp w sums column l over the w-th run of tiles.
// `part`: shared memory for 32 values per warp.
__device__ void scan_tiles(u64* counts, long long nblocks, long long nbcols, long long* ptr,
                           u64* bar, u64* block_sums, u64* warp_sums, u64* part)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    const long long tiles = gridDim.x;
    const long long ngroups = (nbcols + 31) >> 5;
    const long long run = (ngroups + gridDim.x - 1) / gridDim.x;
    const long long g0 = min(ngroups, blockIdx.x * run), g1 = min(ngroups, g0 + run);
    const long long per_warp = (tiles + nwarps - 1) / nwarps;
    const long long t0 = min(tiles, warp * per_warp), t1 = min(tiles, t0 + per_warp);
    u64 sum = 0;
    for (long long g = g0; g < g1; ++g)
        sum += column_sum<8>(counts, nbcols, (g << 5) + lane, t0, t1);
    u64 before = grid_blocks_before(sum, bar, block_sums, warp_sums);
    for (long long g = g0; g < g1; ++g) {
        const long long c = (g << 5) + lane;
        // (a thread block of one group summed it above)
        part[warp * 32 + lane] = g1 - g0 == 1 ? sum : column_sum<8>(counts, nbcols, c, t0, t1);
        __syncthreads();
        if (warp == 0) {
            u64 column = 0;  // column c's sum over the warps' runs before each
            for (int w = 0; w < nwarps; ++w) {
                const u64 x = part[w * 32 + lane];
                part[w * 32 + lane] = column;
                column += x;
            }
            u64 group;
            const u64 first = before + warp_exclusive_scan(column, &group);
            for (int w = 0; w < nwarps; ++w) part[w * 32 + lane] += first;
            if (c < nbcols) ptr[c] = (long long)(first & 0xffffffffull);
            if (lane == 0) warp_sums[0] = group;
        }
        __syncthreads();
        u64 at = part[warp * 32 + lane];
        for (long long t = t0; c < nbcols && t < t1; t += 8) {
            u64 v[8];
#pragma unroll
            for (int u = 0; u < 8; ++u)
                v[u] = t + u < t1 ? __ldcg(counts + (t + u) * nbcols + c) : 0ull;
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                if (t + u < t1) counts[(t + u) * nbcols + c] = at;
                at += v[u];
            }
        }
        before += warp_sums[0];
        __syncthreads();  // part and warp_sums are reused
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) ptr[nbcols] = nblocks;
}

// pass 3 of the tiles: the tile's blocks, in A's order, take the next
// places of their columns (`column`, shared, loaded from row t of
// `counts`). A warp's blocks of one column rank among themselves by lane
// (__match_any_sync); the warps of the thread block take their columns'
// places in turn. So the blocks land in A's order within each column:
// stably, with no sort. `outputs` as for bmsparse_transpose_columns (the
// blocks and values are the last pass's). Each round loads the next
// round's blocks before its barriers.
__device__ void place_tile(const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
                           long long lo, long long hi, long long nbcols, const Outputs& out,
                           u64* column, const u64* counts, unsigned int* lane_values)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    const u64* row = counts + blockIdx.x * nbcols;
    for (long long c = threadIdx.x; c < nbcols; c += blockDim.x) column[c] = __ldcg(row + c);
    long long s = lo + threadIdx.x;
    u64 key = s < hi ? keys[s] : 0ull;
    u64 bitmap = s < hi && out.outputs ? bitmaps[s] : 0ull;
    __syncthreads();
    for (; s - threadIdx.x < hi; s += blockDim.x) {
        const bool valid = s < hi;
        const long long next = s + blockDim.x;
        const u64 next_key = next < hi ? keys[next] : 0ull;
        const u64 next_bitmap = next < hi && out.outputs ? bitmaps[next] : 0ull;
        const unsigned int c = valid ? block_col(key) : 0xffffffffu;
        const unsigned int peers = __match_any_sync(0xffffffffu, c);
        const unsigned int below = peers & ((1u << lane) - 1u);
        const unsigned int n = (unsigned int)__popcll(bitmap);
        lane_values[threadIdx.x] = n;
        __syncwarp();
        unsigned int before = 0;  // the values of this column's blocks in lanes below
        for (unsigned int m = below; m; m &= m - 1u)
            before += lane_values[(threadIdx.x & ~31) + __ffs(m) - 1];
        // the column's highest lane takes the places of its blocks in the warp
        const bool last = valid && (peers >> lane) == 1u;
        u64 base = 0;
        for (int w = 0; w < nwarps; ++w) {
            if (w == warp && last) {
                base = column[c];
                column[c] = base + (((u64)(before + n) << 32) | (u64)__popc(peers));
            }
            __syncthreads();
        }
        base = __shfl_sync(0xffffffffu, base, 31 - __clz(peers));
        if (valid) {
            const long long q = (long long)(base & 0xffffffffull) + __popc(below);
            const u64 t_offset = (base >> 32) + before;
            write_block(out, q, s, t_offset);
        }
        key = next_key;
        bitmap = next_bitmap;
    }
}

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_TRANSPOSE_THREADS) bmsparse_transpose_tiles(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    long long nblocks, long long nbcols, long long warp_blocks, long long outputs, u64* bar,
    u64* work, long long* ptr,
    long long* order, u64* t_keys, u64* t_bitmaps, long long* t_offsets, T* t_values)
{
    extern __shared__ u64 column[];  // [nbcols]
    __shared__ u64 warp_sums[32];
    __shared__ u64 part[BMSPARSE_TRANSPOSE_THREADS];
    __shared__ unsigned int lane_values[BMSPARSE_TRANSPOSE_THREADS];
    u64* block_sums = work;
    u64* counts = work + gridDim.x;
    const long long lo = tile_start(nblocks, blockIdx.x);
    const long long hi = tile_start(nblocks, blockIdx.x + 1);
    // 1. count
    count_tile(keys, bitmaps, lo, hi, nbcols, outputs != 0, column, counts);
    grid_barrier(bar);
    // 2. scan
    scan_tiles(counts, nblocks, nbcols, ptr, bar, block_sums, warp_sums, part);
    grid_barrier(bar);
    // 3. place
    const Outputs out = {(int)outputs, (int)warp_blocks, order, t_offsets};
    place_tile(keys, bitmaps, lo, hi, nbcols, out, column, counts, lane_values);
    if (outputs == 0) return;
    if (blockIdx.x == 0 && threadIdx.x == 0) t_offsets[nblocks] = offsets[nblocks];
    grid_barrier(bar);
    // 4. blocks and values
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    write_blocks_by_warps(keys, bitmaps, offsets, values, order, nblocks, outputs == 2, t_keys,
                          t_bitmaps, t_offsets, t_values, (int)warp_blocks, tid >> 5,
                          (gridDim.x * (long long)blockDim.x) >> 5);
}

// ---- the two-kernel path -----------------------------------------------------

extern "C" __global__ void bmsparse_transpose_counts(
    const u64* __restrict__ bitmaps, const long long* __restrict__ order, long long nblocks,
    long long* __restrict__ counts)
{
    const long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q < nblocks) counts[q] = __popcll(bitmaps[order[q]]);
}

template <typename T>
__global__ void bmsparse_transpose_outputs(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    const long long* __restrict__ order, long long nblocks, long long with_values,
    long long warp_blocks, u64* __restrict__ t_keys, u64* __restrict__ t_bitmaps,
    long long* __restrict__ t_offsets, T* __restrict__ t_values)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    write_blocks_by_warps(keys, bitmaps, offsets, values, order, nblocks, with_values != 0,
                          t_keys, t_bitmaps, t_offsets, t_values, (int)warp_blocks, tid >> 5,
                          (gridDim.x * (long long)blockDim.x) >> 5);
}
