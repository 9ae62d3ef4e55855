// multiply_csr.cu - stage 3 of SpGEMM writing C straight to CSR: the values
// of multiply.cu, in the same order, placed by C's row segments instead of in
// bit order. This saves the bitmap-order values and the conversion pass when
// the caller wants CSR (spgemm(..., format="csr")). Its own module, so that
// bitmap products do not compile it.
//
// bmsparse_multiply_csr, bmsparse_multiply_csr_records: their arguments are
// those of multiply.cu's bmsparse_multiply_values and
// bmsparse_multiply_records, with c_values replaced by
//   u64       c_keys[c_nblocks]      - C's block keys
//   long long brow_ptr[c_nbrows + 1] - C's block-row pointer
//   I         places[8 c_nblocks + 1] - first CSR index of every row segment
//                                      (scan of convert.cu's segment lengths)
//   long long nrows                  - rows of C
//   I         indptr[nrows + 1], indices[c_nnz] - out
//   T         data[c_nnz]            - out: the values
// J: the type of the index arithmetic, as I of multiply.cu.
// Launch: max(c_nnz, nrows + 1) threads; thread t <= nrows also writes
// indptr[t]. A warp's writes land in the CSR rows of one or two blocks:
// segments of up to 8 values, which the next blocks of the block row (the
// next warps) continue.
// Layout: see ../_cuda/bitmap.cuh.
#include "multiply.cuh"

// the arguments after the pairs, shared by both kernels
#define BMSPARSE_MULTIPLY_CSR_ARGS                                                           \
    BMSPARSE_C_BLOCKS_ARGS, const u64 *__restrict__ c_keys,                                  \
        const long long *__restrict__ brow_ptr,                                              \
        const I *__restrict__ places, long long nrows, I *__restrict__ indptr,               \
        I *__restrict__ indices, T *__restrict__ data,                                       \
        unsigned long long *__restrict__ zero_values, unsigned long long *zero_flag
#define BMSPARSE_MULTIPLY_CSR_VALUE(pairs)                                                   \
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;                  \
    if (tid <= nrows) write_indptr(brow_ptr, places, c_nblocks, nrows, tid, indptr);         \
    multiply_value<T, S, J>((J)tid, pairs, a_values, b_values, c_first, c_last, last_shift,  \
                            c_bitmaps, c_offsets, c_nblocks, warp_block, warp_starts, c_nnz, \
                            CsrOrder<T, I>{c_keys, brow_ptr, places, indices, data},        \
                            zero_values, zero_flag)

template <typename T, typename S, typename I, typename J>
__global__ void bmsparse_multiply_csr(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values,
    const u64* __restrict__ b_bitmaps, const long long* __restrict__ b_offsets,
    const T* __restrict__ b_values,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    BMSPARSE_MULTIPLY_CSR_ARGS)
{
    BMSPARSE_MULTIPLY_CSR_VALUE((PairsByIndex{a_bitmaps, a_offsets, b_bitmaps, b_offsets,
                                              task_a, task_b}));
}

template <typename T, typename S, typename I, typename J>
__global__ void bmsparse_multiply_csr_records(
    const ulonglong2* __restrict__ pair_bitmaps, const ulonglong2* __restrict__ pair_columns,
    const T* __restrict__ a_values, const T* __restrict__ b_values, BMSPARSE_MULTIPLY_CSR_ARGS)
{
    BMSPARSE_MULTIPLY_CSR_VALUE((PairRecords{pair_bitmaps, pair_columns}));
}

// bmsparse_multiply_csr_tiles: bmsparse_multiply_csr_records by tiles
// (multiply.cuh's multiply_tile; every index below 2^31), indptr written by
// a grid-stride loop. Launch: ceil(c_nnz / BMSPARSE_TILE_VALUES) blocks (at
// least one) of BMSPARSE_TILE_THREADS.
template <typename T, typename S, typename I>
__global__ void __launch_bounds__(BMSPARSE_TILE_THREADS, 8) bmsparse_multiply_csr_tiles(
    const ulonglong2* __restrict__ pair_bitmaps, const ulonglong2* __restrict__ pair_columns,
    const T* __restrict__ a_values, const T* __restrict__ b_values, BMSPARSE_MULTIPLY_CSR_ARGS)
{
    __shared__ TileBlocks tile;
    for (long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x; row <= nrows;
         row += (long long)gridDim.x * blockDim.x)
        write_indptr(brow_ptr, places, c_nblocks, nrows, row, indptr);
    if (c_nnz == 0) return;
    multiply_tile<T, S>(PairRecords{pair_bitmaps, pair_columns}, a_values, b_values, c_first,
                        c_last, last_shift, c_bitmaps, c_offsets, c_nblocks, warp_block, c_nnz,
                        CsrOrder<T, I>{c_keys, brow_ptr, places, indices, data}, zero_values,
                        zero_flag, tile);
}
