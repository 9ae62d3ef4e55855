// rowdense.cu - stages 1 and 2 of SpGEMM by a dense accumulator per block
// row (Gustavson's sparse accumulator, one bitmap per output block column):
// the exact output blocks and their useful pairs, without a task list.
//
// A thread block takes a unit: block row i of A and a range [k0, k0 + span)
// of output block columns (a row is cut into `parts` such ranges when B has
// more block columns than the accumulator holds). Its warps take the row's A
// blocks, its lanes the blocks of B's block row j that fall in the range, so
// every pair (A(i, j), B(j, k)) of the unit is one lane's work, whatever the
// lengths of the rows: no chain of dependent steps, unlike the row merge.
// Each pair ORs its Boolean product into acc[k - k0] in shared memory; the
// non-zero entries of acc, read in column order, are C's blocks of the unit.
//
// - bmsparse_rowdense_count writes, per unit, its non-empty output blocks,
//   values and useful pairs (pairs whose product is not empty). One
//   exclusive scan of the three (one array) places every unit's output, as
//   for the row merge (rowmerge.cu: same `sizes` and `scan` layout).
// - bmsparse_rowdense_blocks writes C's keys, bitmaps, value offsets and
//   pair pointers, then (with write_pairs) each block's useful pairs in
//   ascending A block - the task order of tasks.cu, so multiply.cu sums in
//   the same order as on the other paths. Every pair first takes a free
//   place in its column's range by an atomic cursor (any order), then moves
//   to its rank among that column's pairs, counted by comparing it with
//   each of them (at most MAX_ROW_BLOCKS of rowdense.py): two walks over
//   the pairs and three barriers per unit. Session 6's kernel placed them
//   in steps of one A block per warp (3-5x the count kernel on the
//   power-law graphs); steps of 64 A blocks by 64-bit masks were 1.1-1.4x
//   slower than the ranks on the power-law graphs and no faster elsewhere
//   (H100, session 7; benchmarks/NOTES.md).
// - bmsparse_rowdense_blocks_masked: the blocks kernel with a mask per
//   column of the unit's A blocks meeting it (mask_words 32-bit words
//   each, after the counters in shared memory): a pair's rank is the
//   popcount of its column's mask below its A block, so each pair is
//   written once, to its place (rowdense.cuh, MASKED). rowdense.py chooses.
// - bmsparse_rowdense_count_touched / _blocks_touched: the same, keeping a
//   bitmap of the unit's touched columns so that the passes over the
//   accumulator visit those only (rowdense.cuh, TOUCHED): for units of few
//   output blocks in a wide accumulator. rowdense.py chooses.
//
// Arguments (csr.h style):
//   u64       a_keys[a_nblocks], a_bitmaps[a_nblocks] - blocks of A (canonical)
//   long long a_ptr[nbrows + 1]       - A's block-row pointer
//   long long nbrows                  - block rows of A
//   long long parts, span             - units per block row, block columns per
//                                       unit (span * 12 bytes of dynamic shared
//                                       memory, and 4 * ceil(span / 32) more for
//                                       the touched kernels; span < 2^16)
//   u64       b_keys[b_nblocks], b_bitmaps[b_nblocks] - blocks of B
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
//   long long warp_block[ceil(nnz / 32)] - out (with write_pairs): as rowmerge.cu
// Launch: BMSPARSE_ROWDENSE_THREADS threads per thread block, any number of
// thread blocks (each loops over the units u = blockIdx.x + s * gridDim.x).
// Work: per unit, O(pairs + span / threads) (touched: O(pairs + span /
// (32 threads) + output blocks)) plus, per B block row met when
// parts > 1, two binary searches; the blocks kernel walks the pairs twice and
// compares each pair with those of its column (the sum of the squares of the
// columns' pairs).
// Deterministic: the accumulator is an OR; every output ends at a place
// fixed by the scans and the ranks, not by timing.
// Layout: see ../_cuda/bitmap.cuh.
#include "rowdense.cuh"

// the kernels of one form: _touched (TOUCHED, see rowdense.cuh) or not
#define RD_KERNELS(SUFFIX, TOUCHED)                                                       \
    extern "C" __global__ void __launch_bounds__(BMSPARSE_ROWDENSE_THREADS, RD_MIN_BLOCKS) \
    bmsparse_rowdense_count##SUFFIX(RD_ARGS, long long* __restrict__ sizes)               \
    {                                                                                     \
        rd_count_units<TOUCHED>(a_keys, a_bitmaps, a_ptr, nbrows, parts, span, b_keys,     \
                                b_bitmaps, b_ptr, sizes);                                 \
    }                                                                                     \
    extern "C" __global__ void __launch_bounds__(BMSPARSE_ROWDENSE_THREADS, RD_MIN_BLOCKS) \
    bmsparse_rowdense_blocks##SUFFIX(                                                     \
        RD_ARGS, const long long* __restrict__ scan, long long write_pairs,               \
        u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps,                            \
        long long* __restrict__ c_offsets, long long* __restrict__ c_ptr,                 \
        long long* __restrict__ task_a, long long* __restrict__ task_b,                   \
        long long* __restrict__ warp_block)                                               \
    {                                                                                     \
        rd_blocks_units<TOUCHED>(a_keys, a_bitmaps, a_ptr, nbrows, parts, span, b_keys,    \
                                 b_bitmaps, b_ptr, scan, write_pairs, c_keys, c_bitmaps,  \
                                 c_offsets, c_ptr, task_a, task_b, warp_block);           \
    }

RD_KERNELS(, false)
RD_KERNELS(_touched, true)

extern "C" __global__ void __launch_bounds__(BMSPARSE_ROWDENSE_THREADS, RD_MIN_BLOCKS)
bmsparse_rowdense_blocks_masked(
    RD_ARGS, const long long* __restrict__ scan, long long write_pairs,
    u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps, long long* __restrict__ c_offsets,
    long long* __restrict__ c_ptr, long long* __restrict__ task_a,
    long long* __restrict__ task_b, long long* __restrict__ warp_block, long long mask_words)
{
    rd_blocks_units<false, true>(a_keys, a_bitmaps, a_ptr, nbrows, parts, span, b_keys,
                                 b_bitmaps, b_ptr, scan, write_pairs, c_keys, c_bitmaps,
                                 c_offsets, c_ptr, task_a, task_b, warp_block, mask_words);
}
