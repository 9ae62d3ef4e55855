// spmv.cu - sparse matrix times dense vector or matrix: Y = A @ X and Y = A.T @ X.
//
// A group of `lanes` threads (a power of two up to 32, inside one warp) owns
// one block row of A (bmsparse_spmv_rows) or one block column
// (bmsparse_spmv_cols) and one column j of X. Lane l takes the blocks
// l, l + lanes, l + 2 * lanes, ... of its block row (column), and for each
// walks the block's bits in bit order, accumulating the 8 rows (columns) of
// the output in registers:
//   rows: acc[r] += A(8i + r, 8J + c) * X(8J + c, j)
//   cols: acc[c] += A(8I + r, 8j + c) * X(8I + r, j)
// A butterfly of shuffles (xor lanes/2, ..., 1, each lane adding its
// partner's sum to its own) then gives every lane of the group the 8 totals,
// and lane r % lanes writes output r. The block column of A.T @ X is read
// through `order`, A's blocks in column-major order, so no transposed copy
// of A is made. A block's values are contiguous, so a lane reads them
// sequentially; X is read at the block's 8 columns (rows).
//
// Arguments (csr.h style):
//   u64       keys[nblocks], bitmaps[nblocks] - blocks of A
//   long long offsets[nblocks + 1]  - value offsets of A's blocks
//   T         values[nnz]           - values of A, or null: every value is 1 (bool A)
//   long long order[nblocks]        - (cols only) A's blocks in column-major order
//   long long ptr[ngroups + 1]      - blocks of block row (column) g:
//                                     [ptr[g], ptr[g + 1]) of A (of `order`)
//   long long ngroups               - block rows (columns) of A
//   long long lanes                 - threads per group: 1, 2, 4, 8, 16 or 32
//   T         x[...]                - X, element (i, j) at x[i * x_rs + j * x_cs]
//   long long k                     - columns of X (1 for a vector)
//   long long nout                  - rows of Y: A's rows (columns for cols)
//   T         y[...]                - out: Y, element (i, j) at y[i * y_rs + j * y_cs]
//
// Launch: ngroups * k * lanes threads, 1-D grid, groups ordered by (block
// row, j) so that the groups of one block row read the same blocks.
// Work: O(k * (nnz + nblocks + ngroups * lanes)).
// Deterministic: every output is summed in a fixed order (per lane in block
// and bit order, then the butterfly); no atomics. The order depends on
// `lanes`, which spmv.py derives from the shape and block count only.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"

#ifndef BMSPARSE_SPMV_THREADS
#define BMSPARSE_SPMV_THREADS 256
#endif

template <typename T>
__device__ __forceinline__ T shfl_xor(unsigned int mask, T x, int d) {
    return __shfl_xor_sync(mask, x, d);
}

template <typename R>
__device__ __forceinline__ bm_complex<R> shfl_xor(unsigned int mask, bm_complex<R> x, int d) {
    return bm_complex<R>(__shfl_xor_sync(mask, x.re, d), __shfl_xor_sync(mask, x.im, d));
}

// the `lanes` threads of this thread's group, as a mask over its warp
__device__ __forceinline__ unsigned int group_mask(int lanes) {
    return lanes == 32 ? 0xffffffffu
                       : ((1u << lanes) - 1u) << ((threadIdx.x & 31u) & ~(unsigned int)(lanes - 1));
}

// every lane gets the group's sums: lane l adds lane l ^ d's partial sum to its own
template <typename T>
__device__ __forceinline__ void butterfly(T (&acc)[8], int lanes) {
    const unsigned int mask = group_mask(lanes);
    for (int d = lanes >> 1; d > 0; d >>= 1) {
#pragma unroll
        for (int r = 0; r < 8; ++r) acc[r] += shfl_xor(mask, acc[r], d);
    }
}

template <typename T>
__device__ __forceinline__ void write_outputs(const T (&acc)[8], int lane, int lanes,
                                              long long first, long long nout, long long j,
                                              T* y, long long y_rs, long long y_cs) {
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        if ((r & (lanes - 1)) == lane && first + r < nout) y[(first + r) * y_rs + j * y_cs] = acc[r];
    }
}

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS) bmsparse_spmv_rows(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    const long long* __restrict__ ptr, long long ngroups, long long lanes,
    const T* __restrict__ x, long long x_rs, long long x_cs, long long k,
    long long nout, T* __restrict__ y, long long y_rs, long long y_cs)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long group = tid / lanes;
    const long long i = group / k;
    if (i >= ngroups) return;  // the lanes of a group leave together
    const int lane = (int)(tid & (lanes - 1));
    const long long j = group - i * k;
    const T* xj = x + j * x_cs;
    T acc[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) acc[r] = T(0);
    for (long long q = ptr[i] + lane; q < ptr[i + 1]; q += lanes) {
        const u64 bitmap = bitmaps[q];
        const long long col0 = (long long)block_col(keys[q]) << 3;
        long long v = offsets[q];
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            for (unsigned int bits = row_bits(bitmap, r); bits; bits &= bits - 1u) {
                const int c = __ffs(bits) - 1;
                const T a = values ? values[v] : T(1);
                ++v;
                acc[r] += a * xj[(col0 + c) * x_rs];
            }
        }
    }
    butterfly(acc, (int)lanes);
    write_outputs(acc, lane, (int)lanes, i << 3, nout, j, y, y_rs, y_cs);
}

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS) bmsparse_spmv_cols(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    const long long* __restrict__ order, const long long* __restrict__ ptr, long long ngroups,
    long long lanes, const T* __restrict__ x, long long x_rs, long long x_cs, long long k,
    long long nout, T* __restrict__ y, long long y_rs, long long y_cs)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long group = tid / lanes;
    const long long jb = group / k;
    if (jb >= ngroups) return;  // the lanes of a group leave together
    const int lane = (int)(tid & (lanes - 1));
    const long long j = group - jb * k;
    const T* xj = x + j * x_cs;
    T acc[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[c] = T(0);
    for (long long p = ptr[jb] + lane; p < ptr[jb + 1]; p += lanes) {
        const long long q = order[p];
        const u64 bitmap = bitmaps[q];
        const long long row0 = (long long)block_row(keys[q]) << 3;
        long long v = offsets[q];
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            const unsigned int bits = row_bits(bitmap, r);
            if (!bits) continue;
            const T xr = xj[(row0 + r) * x_rs];
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                if ((bits >> c) & 1u) {
                    const T a = values ? values[v] : T(1);
                    ++v;
                    acc[c] += a * xr;
                }
            }
        }
    }
    butterfly(acc, (int)lanes);
    write_outputs(acc, lane, (int)lanes, jb << 3, nout, j, y, y_rs, y_cs);
}
