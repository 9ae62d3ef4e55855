// multiply.cu - stage 3 of SpGEMM: the values of every output block.
//
// Each output entry C(8i + r, 8k + c) is, for the semiring S (semiring.cuh)
//     S-sum over the pairs (A(i, j), B(j, k)) of the block, in task order,
//       S-sum over t in row_bits(A(i, j), r) & col_bits(B(j, k), c), ascending,
//         S-mul(A(i, j)[r, t], B(j, k)[t, c])
// With plus_times that is the sum of products, in scipy's order. No FMA
// (see _kernels.COMPILE_OPTIONS): each product rounds as in scipy.
//
// One thread per output value: value v of C is computed by thread v and
// written to c_values[v], so the writes are coalesced, a thread's work is the
// real multiplies of one entry (usually one term per pair), and no lane waits
// on a row or column it does not own. The structure (c_bitmaps) is exact from
// the count stage; a thread finds its block and bit from its warp's start
// words, or from the offsets. The kernel waits on its chain of dependent
// loads (warp, block, pair, values), so the records of the pairs' blocks
// (bmsparse_multiply_records) and the warps' start words each take one step
// off it: surrogate 893 -> 778 us on an H100 (benchmarks/NOTES.md, session 28).
//
// bmsparse_multiply_warp_blocks: for each warp of 32 values, the output block
// holding its first value (so a warp starts from one load, not a search).
//   long long c_offsets[c_nblocks + 1] - value offsets of the output blocks
//   long long c_nblocks
//   long long warp_block[ceil(c_nnz / 32)] - out: block of value 32 * w
//   unsigned long long warp_starts[ceil(c_nnz / 32)] - out, or null: zeroed
//                                      beforehand, mark_warp_starts' words
// Launch: one thread per output block.
//
// bmsparse_multiply_values (csr.h style):
//   u64       a_bitmaps[a_nblocks]   - bitmaps of A
//   long long a_offsets[a_nblocks+1] - value offsets of A's blocks
//   T         a_values[a_nnz]        - values of A (not read when !S::reads_values)
//   u64       b_bitmaps[b_nblocks], long long b_offsets[b_nblocks+1], T b_values[b_nnz] - B
//   long long task_a[ntasks], task_b[ntasks] - pairs, grouped by output block
//   long long c_first[c_nblocks], c_last[c_nblocks + last_shift] - tasks of
//                                      output block q: [c_first[q], c_last[q + last_shift])
//   long long last_shift               - 0, or 1 when both are the same pointer
//                                      array (c_ptr[c_nblocks + 1] of a merge)
//   u64       c_bitmaps[c_nblocks]   - exact output bitmaps (count stage), none empty
//   long long c_offsets[c_nblocks + 1], c_nblocks - strictly increasing offsets
//   long long warp_block[nwarps]     - from bmsparse_multiply_warp_blocks (or the
//                                      merges' blocks kernels, which write it too)
//   unsigned long long warp_starts[nwarps] - the words of mark_warp_starts, or
//                                      null: the lanes' blocks found from c_offsets
//   long long c_nnz                  - number of output values
//   T         c_values[c_nnz]        - out: values of C
//   unsigned long long zero_values[1] - out: incremented by the number of values
//                                       that are exactly zero (an integer count)
//   unsigned long long zero_flag[1]  - out, or null: set to 1 when a value is
//                                      exactly zero; a plain store, so it may be
//                                      a word of host memory that the host
//                                      reads after a sync without a copy
// bmsparse_multiply_records: the same, with the pairs as records of their
// blocks (multiply.cuh's PairRecords, written by count.cu) instead of
// a_bitmaps .. task_b:
//   u64       pair_bitmaps[ntasks][2] - (A's, B's) bitmap of each pair
//   u64       pair_columns[ntasks][2] - B's bitmap transposed, and the two value
//                                      offsets as int[2] (A's, B's)
// I: the type of the index arithmetic (int when every index and size, the
// grid's threads included, fits in 31 bits; see multiply.cuh).
// Launch: one thread per output value, 1-D grid, blocks of a multiple of 32.
// Work: O(c_nnz * (pairs per block) + multiplies). Deterministic: fixed
// summation order, no atomics on values.
/// Layout: see ../_cuda/bitmap.cuh.
#include "multiply.cuh"

extern "C" __global__ void bmsparse_multiply_warp_blocks(
    const long long* __restrict__ c_offsets, long long c_nblocks,
    long long* __restrict__ warp_block, unsigned long long* __restrict__ warp_starts)
{
    const long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    mark_warp_starts(warp_block, warp_starts, q, c_offsets[q], c_offsets[q + 1] - c_offsets[q]);
}

// the arguments after the pairs, shared by both kernels
#define BMSPARSE_MULTIPLY_ARGS                                                               \
    BMSPARSE_C_BLOCKS_ARGS, T *__restrict__ c_values,                                        \
        unsigned long long *__restrict__ zero_values, unsigned long long *zero_flag
#define BMSPARSE_MULTIPLY_VALUE(pairs)                                                       \
    multiply_value<T, S, I>((I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x, pairs, a_values, \
                            b_values, c_first, c_last, last_shift, c_bitmaps, c_offsets,    \
                            c_nblocks, warp_block, warp_starts, c_nnz,                      \
                            BitmapOrder<T>{c_values}, zero_values, zero_flag)

template <typename T, typename S, typename I>
__global__ void bmsparse_multiply_values(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values,
    const u64* __restrict__ b_bitmaps, const long long* __restrict__ b_offsets,
    const T* __restrict__ b_values,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    BMSPARSE_MULTIPLY_ARGS)
{
    BMSPARSE_MULTIPLY_VALUE((PairsByIndex{a_bitmaps, a_offsets, b_bitmaps, b_offsets, task_a,
                                          task_b}));
}

template <typename T, typename S, typename I>
__global__ void bmsparse_multiply_records(
    const ulonglong2* __restrict__ pair_bitmaps, const ulonglong2* __restrict__ pair_columns,
    const T* __restrict__ a_values, const T* __restrict__ b_values, BMSPARSE_MULTIPLY_ARGS)
{
    BMSPARSE_MULTIPLY_VALUE((PairRecords{pair_bitmaps, pair_columns}));
}

// bmsparse_multiply_tiles: the same values as bmsparse_multiply_records, by
// tiles of BMSPARSE_TILE_VALUES values (multiply.cuh's multiply_tile), the
// same arguments (warp_starts not read); every index below 2^31.
// Launch: ceil(c_nnz / BMSPARSE_TILE_VALUES) blocks of BMSPARSE_TILE_THREADS.
template <typename T, typename S>
__global__ void __launch_bounds__(BMSPARSE_TILE_THREADS, 8) bmsparse_multiply_tiles(
    const ulonglong2* __restrict__ pair_bitmaps, const ulonglong2* __restrict__ pair_columns,
    const T* __restrict__ a_values, const T* __restrict__ b_values, BMSPARSE_MULTIPLY_ARGS)
{
    __shared__ TileBlocks tile;
    multiply_tile<T, S>(PairRecords{pair_bitmaps, pair_columns}, a_values, b_values, c_first,
                        c_last, last_shift, c_bitmaps, c_offsets, c_nblocks, warp_block, c_nnz,
                        BitmapOrder<T>{c_values}, zero_values, zero_flag, tile);
}
