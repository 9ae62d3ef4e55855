// rowmerge.cu - stages 1 and 2 of SpGEMM by a merge per block row: the exact
// output blocks and their useful pairs, without building a full task list.
//
// A group of G lanes takes block row i of A. Lane l of the group holds the A
// blocks a0 + l + G s (s < STEPS; G and STEPS are the kernels' suffixes:
// 8 x 1, 16 x 1, 32 x 1, 32 x 2 or 32 x 4), and for each a cursor walking
// B's block row j (j = the A block's column). B's keys of a block row are
// sorted by block column k, so the group visits the output blocks C(i, k) in
// ascending k by repeatedly taking the smallest k any cursor is at (a
// reduction over the group). The cursors at that k are the pairs of C(i, k);
// the OR over the group of their Boolean products is its exact bitmap (an
// empty one is skipped), and the pairs whose product is not empty are its
// useful pairs. Then those cursors advance.
//
// A long block row would keep one group busy while the GPU idles, so a row
// is cut into `parts` ranges of `span` block columns, one group each (part
// p of row i is unit u = i * parts + p and takes k in [p span, (p + 1) span);
// its cursors start and end by binary searches in B's block rows). The
// units' outputs follow each other in key order.
//
// Two passes over the same merge:
// - bmsparse_rowmerge_count_G_STEPS writes, per block row, its number of
//   non-empty output blocks, of values and of useful pairs. One exclusive
//   scan of the three (one array) places every row's output.
// - bmsparse_rowmerge_blocks_G_STEPS writes C's keys, bitmaps and value offsets,
//   and (with write_pairs) each block's useful pairs, in ascending A block
//   (so ascending j: the task order of tasks.cu), with c_ptr. multiply.cu
//   then computes the values from them exactly as from a task list.
//
// Arguments (csr.h style):
//   u64       a_keys[a_nblocks], a_bitmaps[a_nblocks] - blocks of A (canonical)
//   long long a_ptr[nbrows + 1]       - A's block-row pointer
//   long long nbrows                  - block rows of A; none longer than
//                                       G * STEPS blocks (the caller checks)
//   long long parts, span             - units per block row, block columns per unit
//   u64       b_keys[b_nblocks], b_bitmaps[b_nblocks] - blocks of B (fewer than 2^31)
//   long long b_ptr[nbrows(B) + 1]    - B's block-row pointer
//   long long sizes[3 * n]            - out of count (n = nbrows * parts units):
//                                       unit u's blocks at [u], its values at
//                                       [n + u], its useful pairs at [2 n + u]
//   long long scan[3 * n + 1]         - exclusive scan of sizes
//   long long write_pairs             - 0: only keys, bitmaps and offsets
//   u64       c_keys[c_nblocks], c_bitmaps[c_nblocks] - out: blocks of C
//   long long c_offsets[c_nblocks + 1] - out: value offsets of C's blocks
//   long long c_ptr[c_nblocks + 1]    - out: useful pairs of block q are
//                                       [c_ptr[q], c_ptr[q + 1])
//   long long task_a[npairs], task_b[npairs] - out: A and B block of each pair
//   long long warp_block[ceil(nnz / 32)] - out (with write_pairs): where each
//                                       warp of multiply.cu starts (see
//                                       mark_warp_starts), saving it a launch
// Launch: G threads per unit (n * G threads), 1-D grid, blocks of a multiple
// of 32. Work: per unit, O(STEPS log) searches and O(output blocks * STEPS)
// group steps.
// Deterministic: every output is written by one thread at a place fixed by
// the scan and the ballots.
// Layout: see ../_cuda/bitmap.cuh.
#include "../_cuda/bitmap.cuh"
#include "../_cuda/group.cuh"

#define RM_NONE 0xffffffffu

// the cursors of one lane: A block a0 + member + G s against B's block row
// of its column. Each holds B's block at pos and the one after it, loaded a
// step ahead, so advancing a cursor waits on no load. Positions are 32-bit
// (the caller checks that B has fewer than 2^31 blocks): registers bound the
// occupancy of these latency-bound kernels.
template <int STEPS>
struct RowCursors {
    u64 a_bm[STEPS];
    unsigned int pos[STEPS];
    unsigned int end[STEPS];
    unsigned int col[STEPS];       // block column of B block pos, RM_NONE past end
    u64 b_bm[STEPS];               // its bitmap
    unsigned int next_col[STEPS];  // the same for B block pos + 1
    u64 next_bm[STEPS];
};

// the lanes of this thread's group of G
template <int G>
__device__ __forceinline__ unsigned int rm_group_mask(int lane) {
    return G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane & ~(G - 1));
}

// The reductions over this lane's group of G, called by every lane of the
// warp at once: the loops below keep a warp's groups in step (a group done
// with its row goes round with k = RM_NONE, doing nothing), see
// _cuda/group.cuh. A warp of one group reduces by REDUX.
#define RM_GROUP_REDUCE(NAME, OP, WARP_REDUCE)                                           \
    template <int G>                                                                    \
    __device__ __forceinline__ unsigned int NAME(unsigned int x) {                      \
        if constexpr (G == 32)                                                          \
            return WARP_REDUCE(BMSPARSE_FULL_WARP, x);                                  \
        else                                                                            \
            return group_reduce<G>(x, [](unsigned int u, unsigned int v) { return OP(u, v); }); \
    }
__device__ __forceinline__ unsigned int rm_min(unsigned int x, unsigned int y) { return min(x, y); }
__device__ __forceinline__ unsigned int rm_or(unsigned int x, unsigned int y) { return x | y; }
__device__ __forceinline__ unsigned int rm_add(unsigned int x, unsigned int y) { return x + y; }
RM_GROUP_REDUCE(rm_group_min, rm_min, __reduce_min_sync)
RM_GROUP_REDUCE(rm_group_or, rm_or, __reduce_or_sync)
RM_GROUP_REDUCE(rm_group_add, rm_add, __reduce_add_sync)
#undef RM_GROUP_REDUCE

__device__ __forceinline__ void rm_load(const u64* __restrict__ b_keys,
                                        const u64* __restrict__ b_bitmaps, unsigned int pos,
                                        unsigned int end, unsigned int& col, u64& bm) {
    col = RM_NONE;
    bm = 0;
    if (pos < end) {
        col = block_col(b_keys[pos]);
        bm = b_bitmaps[pos];
    }
}

// first position in [lo, hi) of b_keys whose block column is at least k
__device__ __forceinline__ unsigned int rm_first_col(const u64* __restrict__ b_keys,
                                                     unsigned int lo, unsigned int hi,
                                                     unsigned long long k) {
    while (lo < hi) {
        const unsigned int mid = lo + ((hi - lo) >> 1);
        if (block_col(b_keys[mid]) < k) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// open the cursors of a lane on the block columns [k0, k1) of unit's row
template <int G, int STEPS>
__device__ __forceinline__ void rm_open(
    RowCursors<STEPS>& cur, long long a0, long long a1, int member,
    unsigned long long k0, unsigned long long k1, bool whole_row,
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,
    const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_ptr)
{
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
        const long long a = a0 + member + (long long)G * s;
        cur.a_bm[s] = 0;
        cur.pos[s] = cur.end[s] = 0;
        if (a < a1) {
            const long long j = block_col(a_keys[a]);
            cur.a_bm[s] = a_bitmaps[a];
            unsigned int lo = (unsigned int)b_ptr[j], hi = (unsigned int)b_ptr[j + 1];
            if (!whole_row) {
                lo = rm_first_col(b_keys, lo, hi, k0);
                hi = rm_first_col(b_keys, lo, hi, k1);
            }
            cur.pos[s] = lo;
            cur.end[s] = hi;
        }
        rm_load(b_keys, b_bitmaps, cur.pos[s], cur.end[s], cur.col[s], cur.b_bm[s]);
        rm_load(b_keys, b_bitmaps, cur.pos[s] + 1, cur.end[s], cur.next_col[s], cur.next_bm[s]);
    }
}

// the smallest block column any cursor of the group is at (RM_NONE: all
// done); every lane of the warp calls it
template <int G, int STEPS>
__device__ __forceinline__ unsigned int rm_next_col(const RowCursors<STEPS>& cur) {
    unsigned int m = RM_NONE;
#pragma unroll
    for (int s = 0; s < STEPS; ++s) m = min(m, cur.col[s]);
    return rm_group_min<G>(m);
}

// bitmap of C(i, k), the OR over the group of the products of the pairs at
// k (none at k = RM_NONE); `useful` gets bit s for each of this lane's pairs
// whose product has a bit. Every lane of the warp calls it
template <int G, int STEPS>
__device__ __forceinline__ u64 rm_bitmap(const RowCursors<STEPS>& cur, unsigned int k,
                                         unsigned int& useful) {
    u64 bm = 0;
    useful = 0;
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
        if (cur.col[s] == k && k != RM_NONE) {
            const u64 product = bool_product(cur.a_bm[s], cur.b_bm[s]);
            bm |= product;
            useful |= (unsigned int)(product != 0ull) << s;
        }
    }
    const unsigned int lo = rm_group_or<G>((unsigned int)bm);
    const unsigned int hi = rm_group_or<G>((unsigned int)(bm >> 32));
    return ((u64)hi << 32) | lo;
}

template <int STEPS>
__device__ __forceinline__ void rm_advance(RowCursors<STEPS>& cur, unsigned int k,
                                           const u64* __restrict__ b_keys,
                                           const u64* __restrict__ b_bitmaps) {
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
        if (cur.col[s] == k) {
            cur.col[s] = cur.next_col[s];
            cur.b_bm[s] = cur.next_bm[s];
            ++cur.pos[s];
            rm_load(b_keys, b_bitmaps, cur.pos[s] + 1, cur.end[s], cur.next_col[s],
                    cur.next_bm[s]);
        }
    }
}

// the unit of this thread's group: its block row i and column range [k0, k1),
// and its A blocks [a0, a1); a group past the last unit (`valid` false) has
// none, and goes round its warp's loop with nothing to do
struct RowUnit {
    long long u, i, a0, a1;
    unsigned long long k0, k1;
    bool whole_row, valid;
};

// false where the whole warp is past the last unit (it leaves: the loops'
// collectives name the whole warp)
template <int G>
__device__ __forceinline__ bool rm_unit(const long long* __restrict__ a_ptr, long long nbrows,
                                        long long parts, long long span, RowUnit& unit) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long n = nbrows * parts;
    if ((t & ~31ll) / G >= n) return false;
    unit.u = t / G;
    unit.valid = unit.u < n;
    unit.i = !unit.valid ? 0 : parts == 1 ? unit.u : unit.u / parts;
    const long long p = unit.valid ? unit.u - unit.i * parts : 0;
    unit.whole_row = parts == 1;
    unit.k0 = (unsigned long long)(p * span);
    unit.k1 = unit.k0 + (unsigned long long)span;
    unit.a0 = unit.valid ? a_ptr[unit.i] : 0;
    unit.a1 = unit.valid ? a_ptr[unit.i + 1] : 0;
    return true;
}

template <int G, int STEPS>
__device__ __forceinline__ void rm_count(
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,
    const long long* __restrict__ a_ptr, long long nbrows, long long parts, long long span,
    const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_ptr, long long* __restrict__ sizes)
{
    RowUnit unit;
    if (!rm_unit<G>(a_ptr, nbrows, parts, span, unit)) return;
    const long long n = nbrows * parts;
    const int lane = (int)(threadIdx.x & 31u), member = lane & (G - 1);
    RowCursors<STEPS> cur;
    rm_open<G, STEPS>(cur, unit.a0, unit.a1, member, unit.k0, unit.k1, unit.whole_row, a_keys,
                      a_bitmaps, b_keys, b_bitmaps, b_ptr);
    long long blocks = 0, values = 0;
    unsigned int pairs = 0;  // this lane's useful pairs
    for (unsigned int k = rm_next_col<G>(cur); __any_sync(0xffffffffu, k != RM_NONE);
         k = rm_next_col<G>(cur)) {
        unsigned int useful;
        const u64 bm = rm_bitmap<G>(cur, k, useful);
        blocks += bm != 0ull;
        values += __popcll(bm);
        pairs += __popc(useful);
        if (k != RM_NONE) rm_advance(cur, k, b_keys, b_bitmaps);
    }
    pairs = rm_group_add<G>(pairs);
    if (member == 0 && unit.valid) {
        sizes[unit.u] = blocks;
        sizes[n + unit.u] = values;
        sizes[2 * n + unit.u] = pairs;
    }
}

template <int G, int STEPS>
__device__ __forceinline__ void rm_blocks(
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,
    const long long* __restrict__ a_ptr, long long nbrows, long long parts, long long span,
    const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_ptr, const long long* __restrict__ scan,
    long long write_pairs, u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps,
    long long* __restrict__ c_offsets, long long* __restrict__ c_ptr,
    long long* __restrict__ task_a, long long* __restrict__ task_b,
    long long* __restrict__ warp_block)
{
    RowUnit unit;
    if (!rm_unit<G>(a_ptr, nbrows, parts, span, unit)) return;
    const long long n = nbrows * parts, u = unit.u;
    const int lane = (int)(threadIdx.x & 31u), member = lane & (G - 1);
    const unsigned int group = rm_group_mask<G>(lane);
    // where the unit's output starts: its first block, value and pair
    long long q = 0, v = 0, p = 0;
    if (unit.valid) {
        q = scan[u];
        v = scan[n + u] - scan[n];
        p = scan[2 * n + u] - scan[2 * n];
    }
    if (u == 0 && member == 0) {  // one thread closes the pointers
        const long long c_nblocks = scan[n];
        c_offsets[c_nblocks] = scan[2 * n] - scan[n];
        c_ptr[c_nblocks] = scan[3 * n] - scan[2 * n];
    }
    RowCursors<STEPS> cur;
    rm_open<G, STEPS>(cur, unit.a0, unit.a1, member, unit.k0, unit.k1, unit.whole_row, a_keys,
                      a_bitmaps, b_keys, b_bitmaps, b_ptr);
    const unsigned int below = (1u << lane) - 1u;  // lanes before this one
    for (unsigned int k = rm_next_col<G>(cur); __any_sync(0xffffffffu, k != RM_NONE);
         k = rm_next_col<G>(cur)) {
        unsigned int useful;
        const u64 bm = rm_bitmap<G>(cur, k, useful);
        // the useful pairs in ascending A block: s, then lane (ballots of the
        // whole warp, outside the group's branch)
        unsigned int at[STEPS];
#pragma unroll
        for (int s = 0; s < STEPS; ++s)
            at[s] = __ballot_sync(0xffffffffu, (useful >> s) & 1u) & group;
        if (bm) {
            if (member == 0) {
                c_keys[q] = make_key((u64)unit.i, (u64)k);
                c_bitmaps[q] = bm;
                c_offsets[q] = v;
                c_ptr[q] = p;
                if (write_pairs) mark_warp_starts(warp_block, q, v, __popcll(bm));
            }
#pragma unroll
            for (int s = 0; s < STEPS; ++s) {
                if (write_pairs && ((useful >> s) & 1u)) {
                    const long long t = p + __popc(at[s] & below);
                    task_a[t] = unit.a0 + member + (long long)G * s;
                    task_b[t] = cur.pos[s];
                }
                p += __popc(at[s]);
            }
            ++q;
            v += __popcll(bm);
        }
        if (k != RM_NONE) rm_advance(cur, k, b_keys, b_bitmaps);
    }
}

// the kernels: bmsparse_rowmerge_{count,blocks}_G_STEPS, G lanes of STEPS
// cursors each per block row, for rows of up to G * STEPS blocks

#define RM_COUNT_ARGS                                                                   \
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,                  \
    const long long* __restrict__ a_ptr, long long nbrows, long long parts,             \
    long long span, const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps,  \
    const long long* __restrict__ b_ptr, long long* __restrict__ sizes
#define RM_BLOCKS_ARGS                                                                  \
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,                  \
    const long long* __restrict__ a_ptr, long long nbrows, long long parts,             \
    long long span, const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps,  \
    const long long* __restrict__ b_ptr, const long long* __restrict__ scan,            \
    long long write_pairs, u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps,       \
    long long* __restrict__ c_offsets, long long* __restrict__ c_ptr,                   \
    long long* __restrict__ task_a, long long* __restrict__ task_b,                    \
    long long* __restrict__ warp_block

#define RM_KERNELS(G, STEPS)                                                            \
    extern "C" __global__ void bmsparse_rowmerge_count_##G##_##STEPS(RM_COUNT_ARGS) {     \
        rm_count<G, STEPS>(a_keys, a_bitmaps, a_ptr, nbrows, parts, span, b_keys,         \
                           b_bitmaps, b_ptr, sizes);                                      \
    }                                                                                     \
    extern "C" __global__ void bmsparse_rowmerge_blocks_##G##_##STEPS(RM_BLOCKS_ARGS) {   \
        rm_blocks<G, STEPS>(a_keys, a_bitmaps, a_ptr, nbrows, parts, span, b_keys,        \
                            b_bitmaps, b_ptr, scan, write_pairs, c_keys, c_bitmaps,       \
                            c_offsets, c_ptr, task_a, task_b, warp_block);                \
    }

RM_KERNELS(8, 1)
RM_KERNELS(16, 1)
RM_KERNELS(32, 1)
RM_KERNELS(32, 2)
RM_KERNELS(32, 4)
