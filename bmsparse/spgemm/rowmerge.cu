// rowmerge.cu - stages 1 and 2 of SpGEMM by a merge per block row: the exact
// output blocks and their useful pairs, without building a full task list.
//
// A group of G lanes (G = 8 or 32: the kernels' suffix) takes block row i
// of A. Lane l of the group holds the A blocks a0 + l + G s (s < steps =
// ceil(row length / G), at most RM_MAX_STEPS), and for each a cursor walking
// B's block row j (j = the A block's column). B's keys of a block row are
// sorted by block column k, so the group visits the output blocks C(i, k) in
// ascending k by repeatedly taking the smallest k any cursor is at
// (__reduce_min_sync). The cursors at that k are the pairs of C(i, k); the OR
// over the group of their Boolean products is its exact bitmap (an empty one
// is skipped), and the pairs whose product is not empty are its useful
// pairs. Then those cursors advance.
//
// Two passes over the same merge:
// - bmsparse_rowmerge_count_G writes, per block row, its number of
//   non-empty output blocks, of values and of useful pairs. One exclusive
//   scan of the three (one array) places every row's output.
// - bmsparse_rowmerge_blocks_G writes C's keys, bitmaps and value offsets,
//   and (with write_pairs) each block's useful pairs, in ascending A block
//   (so ascending j: the task order of tasks.cu), with c_ptr. multiply.cu
//   then computes the values from them exactly as from a task list.
//
// Arguments (csr.h style):
//   u64       a_keys[a_nblocks], a_bitmaps[a_nblocks] - blocks of A (canonical)
//   long long a_ptr[nbrows + 1]       - A's block-row pointer
//   long long nbrows                  - block rows of A; none longer than
//                                       G * RM_MAX_STEPS blocks (the caller checks)
//   u64       b_keys[b_nblocks], b_bitmaps[b_nblocks] - blocks of B
//   long long b_ptr[nbrows(B) + 1]    - B's block-row pointer
//   long long sizes[3 * nbrows]       - out of count: row i's blocks at [i], its
//                                       values at [nbrows + i], its useful pairs
//                                       at [2 nbrows + i]
//   long long scan[3 * nbrows + 1]    - exclusive scan of sizes
//   long long write_pairs             - 0: only keys, bitmaps and offsets
//   u64       c_keys[c_nblocks], c_bitmaps[c_nblocks] - out: blocks of C
//   long long c_offsets[c_nblocks + 1] - out: value offsets of C's blocks
//   long long c_ptr[c_nblocks + 1]    - out: useful pairs of block q are
//                                       [c_ptr[q], c_ptr[q + 1])
//   long long task_a[npairs], task_b[npairs] - out: A and B block of each pair
// Launch: G threads per block row (nbrows * G threads), 1-D grid, blocks of
// a multiple of 32. Work: per row, O(output blocks * steps) group steps.
// Deterministic: every output is written by one thread at a place fixed by
// the scan and the ballots.
// Layout: see ../_cuda/bitmap.cuh.
#include "../_cuda/bitmap.cuh"

#define RM_MAX_STEPS 4
#define RM_NONE 0xffffffffu

// the cursors of one lane: A block a[s] against B's block row of its column
struct RowCursors {
    long long a[RM_MAX_STEPS];
    u64 a_bm[RM_MAX_STEPS];
    long long pos[RM_MAX_STEPS];
    long long end[RM_MAX_STEPS];
    unsigned int col[RM_MAX_STEPS];  // block column of B block pos, RM_NONE past end
};

// the lanes of this thread's group of G
template <int G>
__device__ __forceinline__ unsigned int rm_group_mask(int lane) {
    return G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane & ~(G - 1));
}

__device__ __forceinline__ unsigned int rm_col_at(const u64* __restrict__ b_keys,
                                                  long long pos, long long end) {
    return pos < end ? block_col(b_keys[pos]) : RM_NONE;
}

template <int G>
__device__ __forceinline__ void rm_open(
    RowCursors& cur, long long a0, long long a1, int member,
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,
    const u64* __restrict__ b_keys, const long long* __restrict__ b_ptr)
{
#pragma unroll
    for (int s = 0; s < RM_MAX_STEPS; ++s) {
        const long long a = a0 + member + (long long)G * s;
        cur.a[s] = a;
        cur.a_bm[s] = 0;
        cur.pos[s] = cur.end[s] = 0;
        if (a < a1) {
            const long long j = block_col(a_keys[a]);
            cur.a_bm[s] = a_bitmaps[a];
            cur.pos[s] = b_ptr[j];
            cur.end[s] = b_ptr[j + 1];
        }
        cur.col[s] = rm_col_at(b_keys, cur.pos[s], cur.end[s]);
    }
}

// the smallest block column any cursor of the group is at (RM_NONE: all done)
__device__ __forceinline__ unsigned int rm_next_col(const RowCursors& cur, unsigned int group) {
    unsigned int m = RM_NONE;
#pragma unroll
    for (int s = 0; s < RM_MAX_STEPS; ++s) m = min(m, cur.col[s]);
    return __reduce_min_sync(group, m);
}

// bitmap of C(i, k), the OR over the group of the products of the pairs at
// k; `useful` gets bit s for each of this lane's pairs whose product has a bit
__device__ __forceinline__ u64 rm_bitmap(const RowCursors& cur, unsigned int k,
                                         unsigned int group, const u64* __restrict__ b_bitmaps,
                                         unsigned int& useful) {
    u64 bm = 0;
    useful = 0;
#pragma unroll
    for (int s = 0; s < RM_MAX_STEPS; ++s) {
        if (cur.col[s] == k) {
            const u64 product = bool_product(cur.a_bm[s], b_bitmaps[cur.pos[s]]);
            bm |= product;
            useful |= (unsigned int)(product != 0ull) << s;
        }
    }
    const unsigned int lo = __reduce_or_sync(group, (unsigned int)bm);
    const unsigned int hi = __reduce_or_sync(group, (unsigned int)(bm >> 32));
    return ((u64)hi << 32) | lo;
}

__device__ __forceinline__ void rm_advance(RowCursors& cur, unsigned int k,
                                           const u64* __restrict__ b_keys) {
#pragma unroll
    for (int s = 0; s < RM_MAX_STEPS; ++s) {
        if (cur.col[s] == k) cur.col[s] = rm_col_at(b_keys, ++cur.pos[s], cur.end[s]);
    }
}

template <int G>
__device__ __forceinline__ void rm_count(
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,
    const long long* __restrict__ a_ptr, long long nbrows,
    const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_ptr, long long* __restrict__ sizes)
{
    const long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / G;
    if (i >= nbrows) return;  // whole groups leave together
    const int lane = (int)(threadIdx.x & 31u), member = lane & (G - 1);
    const unsigned int group = rm_group_mask<G>(lane);
    RowCursors cur;
    rm_open<G>(cur, a_ptr[i], a_ptr[i + 1], member, a_keys, a_bitmaps, b_keys, b_ptr);
    long long blocks = 0, values = 0;
    unsigned int pairs = 0;  // this lane's useful pairs
    for (unsigned int k = rm_next_col(cur, group); k != RM_NONE; k = rm_next_col(cur, group)) {
        unsigned int useful;
        const u64 bm = rm_bitmap(cur, k, group, b_bitmaps, useful);
        blocks += bm != 0ull;
        values += __popcll(bm);
        pairs += __popc(useful);
        rm_advance(cur, k, b_keys);
    }
    pairs = __reduce_add_sync(group, pairs);
    if (member == 0) {
        sizes[i] = blocks;
        sizes[nbrows + i] = values;
        sizes[2 * nbrows + i] = pairs;
    }
}

template <int G>
__device__ __forceinline__ void rm_blocks(
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,
    const long long* __restrict__ a_ptr, long long nbrows,
    const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_ptr, const long long* __restrict__ scan,
    long long write_pairs, u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps,
    long long* __restrict__ c_offsets, long long* __restrict__ c_ptr,
    long long* __restrict__ task_a, long long* __restrict__ task_b)
{
    const long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / G;
    if (i >= nbrows) return;
    const int lane = (int)(threadIdx.x & 31u), member = lane & (G - 1);
    const unsigned int group = rm_group_mask<G>(lane);
    // where row i's output starts: its first block, value and pair
    long long q = scan[i];
    long long v = scan[nbrows + i] - scan[nbrows];
    long long p = scan[2 * nbrows + i] - scan[2 * nbrows];
    if (i == 0 && member == 0) {  // one thread closes the pointers
        const long long c_nblocks = scan[nbrows];
        c_offsets[c_nblocks] = scan[2 * nbrows] - scan[nbrows];
        c_ptr[c_nblocks] = scan[3 * nbrows] - scan[2 * nbrows];
    }
    RowCursors cur;
    rm_open<G>(cur, a_ptr[i], a_ptr[i + 1], member, a_keys, a_bitmaps, b_keys, b_ptr);
    const unsigned int below = (1u << lane) - 1u;  // lanes before this one
    for (unsigned int k = rm_next_col(cur, group); k != RM_NONE; k = rm_next_col(cur, group)) {
        unsigned int useful;
        const u64 bm = rm_bitmap(cur, k, group, b_bitmaps, useful);
        if (bm) {
            if (member == 0) {
                c_keys[q] = make_key((u64)i, (u64)k);
                c_bitmaps[q] = bm;
                c_offsets[q] = v;
                c_ptr[q] = p;
            }
            // the useful pairs in ascending A block: s, then lane
#pragma unroll
            for (int s = 0; s < RM_MAX_STEPS; ++s) {
                const bool mine = (useful >> s) & 1u;
                const unsigned int at = __ballot_sync(group, mine) & group;
                if (write_pairs && mine) {
                    const long long t = p + __popc(at & below);
                    task_a[t] = cur.a[s];
                    task_b[t] = cur.pos[s];
                }
                p += __popc(at);
            }
            ++q;
            v += __popcll(bm);
        }
        rm_advance(cur, k, b_keys);
    }
}

// the kernels, for groups of 8 lanes (rows of up to 32 blocks) and of 32

#define RM_COUNT_ARGS                                                                   \
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,                  \
    const long long* __restrict__ a_ptr, long long nbrows,                              \
    const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps,                  \
    const long long* __restrict__ b_ptr, long long* __restrict__ sizes
#define RM_BLOCKS_ARGS                                                                  \
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,                  \
    const long long* __restrict__ a_ptr, long long nbrows,                              \
    const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps,                  \
    const long long* __restrict__ b_ptr, const long long* __restrict__ scan,            \
    long long write_pairs, u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps,       \
    long long* __restrict__ c_offsets, long long* __restrict__ c_ptr,                   \
    long long* __restrict__ task_a, long long* __restrict__ task_b

extern "C" __global__ void bmsparse_rowmerge_count_8(RM_COUNT_ARGS) {
    rm_count<8>(a_keys, a_bitmaps, a_ptr, nbrows, b_keys, b_bitmaps, b_ptr, sizes);
}

extern "C" __global__ void bmsparse_rowmerge_count_32(RM_COUNT_ARGS) {
    rm_count<32>(a_keys, a_bitmaps, a_ptr, nbrows, b_keys, b_bitmaps, b_ptr, sizes);
}

extern "C" __global__ void bmsparse_rowmerge_blocks_8(RM_BLOCKS_ARGS) {
    rm_blocks<8>(a_keys, a_bitmaps, a_ptr, nbrows, b_keys, b_bitmaps, b_ptr, scan, write_pairs,
                 c_keys, c_bitmaps, c_offsets, c_ptr, task_a, task_b);
}

extern "C" __global__ void bmsparse_rowmerge_blocks_32(RM_BLOCKS_ARGS) {
    rm_blocks<32>(a_keys, a_bitmaps, a_ptr, nbrows, b_keys, b_bitmaps, b_ptr, scan, write_pairs,
                  c_keys, c_bitmaps, c_offsets, c_ptr, task_a, task_b);
}
