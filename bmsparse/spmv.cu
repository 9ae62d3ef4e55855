// spmv.cu - sparse matrix times dense vector or matrix: Y = A @ X and Y = A.T @ X.
//
// Load-balanced: one thread per block of A and column j of X, whatever the
// lengths of the block rows. The blocks are taken in row-major order for
// A @ X (bmsparse_spmv_rows, a block row is a "group") and in column-major
// order through `order` for A.T @ X (bmsparse_spmv_cols, a block column is
// a group; no transposed copy of A is made), so warp w holds positions
// [32w, 32w + 32) of the ordered block list and every warp does the same work.
//
//   1. Each thread walks its block's bits in bit order (a block's values are
//      contiguous) and sums the block's 8 partial outputs in registers:
//        rows: acc[r] += A(8I + r, 8J + c) * X(8J + c, j)
//        cols: acc[c] += A(8I + r, 8J + c) * X(8I + r, j)
//   2. Consecutive lanes of one group form a segment. A segmented inclusive
//      scan (Hillis-Steele: for d = 1, 2, 4, 8, 16, lane l with
//      l - d >= first lane of its segment sets acc = acc(lane l - d) + acc)
//      leaves the segment's sum in its last lane. Lanes past the end of the
//      block list stay through the shuffles with zero partials.
//   3. The last lane of a segment whose group lies inside the warp writes the
//      group's 8 outputs; one whose group spans warps (ptr[g] >> 5 !=
//      (ptr[g + 1] - 1) >> 5) writes them to the warp's carry slot 0 if the
//      segment starts at lane 0 (leading, or the whole warp), else slot 1
//      (trailing).
//   bmsparse_spmv_add_carries: 4. one thread per output element: an empty
//      group's outputs are 0; a group spanning warps w0..w1 sums its pieces
//      sequentially, w0's slot (0 if the group starts at lane 0, else 1) then
//      slot 0 of w0 + 1, ..., w1. Other outputs were written by step 3.
//
// Arguments (csr.h style):
//   u64       keys[nblocks], bitmaps[nblocks] - blocks of A
//   long long offsets[nblocks + 1]  - value offsets of A's blocks
//   T         values[nnz]           - values of A, or null: every value is 1 (bool A)
//   long long order[nblocks]        - (cols only) A's blocks in column-major order
//   long long ptr[ngroups + 1]      - blocks of block row (column) g:
//                                     positions [ptr[g], ptr[g + 1]) of A (of `order`)
//   long long nblocks               - blocks of A
//   T         x[...]                - X, element (i, j) at x[i * x_rs + j * x_cs]
//   long long k                     - columns of X (1 for a vector)
//   long long nout                  - rows of Y: A's rows (columns for cols)
//   T         y[...]                - out: Y, element (i, j) at y[i * y_rs + j * y_cs]
//   T         carry[nwarps * k * 2 * 8] - out (in for add_carries): partial sums of
//                                     the groups spanning warps, nwarps = ceil(nblocks / 32);
//                                     element r of slot s of warp w, column j at
//                                     ((w * k + j) * 2 + s) * 8 + r
//
// Launch: rows / cols: 32 * nwarps * k threads, 1-D grid, warp number
// w * k + j (so the k warps reading the same 32 blocks are neighbours);
// add_carries: nout * k threads, element (i, j) at j * nout + i.
// Work: O(k * (nnz + nblocks + nout)), with O(log 32) shuffles per block and
// O(nblocks / 32) sequential additions for a group spanning warps.
// Deterministic, no atomics: each output is summed in a fixed order that
// depends only on A's block structure: per block in bit order, then the
// scan tree over the block's segment of a warp, then the warps' pieces in
// warp order. spmv.py's NumPy twin follows the same order.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"

#ifndef BMSPARSE_SPMV_THREADS
#define BMSPARSE_SPMV_THREADS 256
#endif

#define BMSPARSE_FULL_WARP 0xffffffffu

template <typename T>
__device__ __forceinline__ T shfl_up(T x, int d) {
    return __shfl_up_sync(BMSPARSE_FULL_WARP, x, d);
}

template <typename R>
__device__ __forceinline__ bm_complex<R> shfl_up(bm_complex<R> x, int d) {
    return bm_complex<R>(__shfl_up_sync(BMSPARSE_FULL_WARP, x.re, d),
                         __shfl_up_sync(BMSPARSE_FULL_WARP, x.im, d));
}

// Steps 2 and 3 for one warp, every lane present: `group` is the lane's block
// row (column), or -1 past the end of the block list.
template <typename T>
__device__ __forceinline__ void combine_and_store(
    T (&acc)[8], long long group, const long long* __restrict__ ptr,
    long long w, long long j, long long k, long long nout,
    T* __restrict__ y, long long y_rs, long long y_cs, T* __restrict__ carry)
{
    const int lane = (int)(threadIdx.x & 31u);
    const long long prev = __shfl_up_sync(BMSPARSE_FULL_WARP, group, 1);
    const long long next = __shfl_down_sync(BMSPARSE_FULL_WARP, group, 1);
    const unsigned int heads = __ballot_sync(BMSPARSE_FULL_WARP, lane == 0 || prev != group);
    // the highest head at or below this lane (lane 0 is always a head)
    const unsigned int at_or_below = lane == 31 ? BMSPARSE_FULL_WARP : (2u << lane) - 1u;
    const int first = 31 - __clz((int)(heads & at_or_below));
    for (int d = 1; d < 32; d <<= 1) {
        const bool add = lane - first >= d;
        // no lane adds at this distance: none will at a larger one
        if (!__any_sync(BMSPARSE_FULL_WARP, add)) break;
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            const T left = shfl_up(acc[r], d);
            if (add) acc[r] = left + acc[r];
        }
    }
    if (group < 0 || (lane != 31 && next == group)) return;  // not the segment's last lane
    const long long start = ptr[group], end = ptr[group + 1];
    if ((start >> 5) == ((end - 1) >> 5)) {
        const long long row0 = group << 3;
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            if (row0 + r < nout) y[(row0 + r) * y_rs + j * y_cs] = acc[r];
        }
    } else {
        T* slot = carry + ((w * k + j) * 2 + (first == 0 ? 0 : 1)) * 8;
#pragma unroll
        for (int r = 0; r < 8; ++r) slot[r] = acc[r];
    }
}

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS) bmsparse_spmv_rows(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    const long long* __restrict__ ptr, long long nblocks,
    const T* __restrict__ x, long long x_rs, long long x_cs, long long k,
    long long nout, T* __restrict__ y, long long y_rs, long long y_cs, T* __restrict__ carry)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long warp = tid >> 5;
    const long long nwarps = (nblocks + 31) >> 5;
    if (warp >= nwarps * k) return;  // whole warps leave together
    const long long w = warp / k;
    const long long j = warp - w * k;
    const long long q = (w << 5) | (threadIdx.x & 31u);
    T acc[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) acc[r] = T(0);
    long long group = -1;
    if (q < nblocks) {
        const u64 key = keys[q];
        const u64 bitmap = bitmaps[q];
        const T* xj = x + j * x_cs;
        const long long col0 = (long long)block_col(key) << 3;
        long long v = offsets[q];
        group = block_row(key);
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
    combine_and_store(acc, group, ptr, w, j, k, nout, y, y_rs, y_cs, carry);
}

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS) bmsparse_spmv_cols(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    const long long* __restrict__ order, const long long* __restrict__ ptr, long long nblocks,
    const T* __restrict__ x, long long x_rs, long long x_cs, long long k,
    long long nout, T* __restrict__ y, long long y_rs, long long y_cs, T* __restrict__ carry)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long warp = tid >> 5;
    const long long nwarps = (nblocks + 31) >> 5;
    if (warp >= nwarps * k) return;  // whole warps leave together
    const long long w = warp / k;
    const long long j = warp - w * k;
    const long long p = (w << 5) | (threadIdx.x & 31u);
    T acc[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[c] = T(0);
    long long group = -1;
    if (p < nblocks) {
        const long long q = order[p];
        const u64 key = keys[q];
        const u64 bitmap = bitmaps[q];
        const T* xj = x + j * x_cs;
        const long long row0 = (long long)block_row(key) << 3;
        long long v = offsets[q];
        group = block_col(key);
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
    combine_and_store(acc, group, ptr, w, j, k, nout, y, y_rs, y_cs, carry);
}

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS) bmsparse_spmv_add_carries(
    const long long* __restrict__ ptr, const T* __restrict__ carry, long long k,
    long long nout, T* __restrict__ y, long long y_rs, long long y_cs)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (tid >= nout * k) return;
    const long long j = tid / nout;
    const long long i = tid - j * nout;
    const long long g = i >> 3;
    const int r = (int)(i & 7);
    const long long start = ptr[g], end = ptr[g + 1];
    T* out = y + i * y_rs + j * y_cs;
    if (start == end) {
        *out = T(0);
        return;
    }
    const long long w0 = start >> 5, w1 = (end - 1) >> 5;
    if (w0 == w1) return;  // written by rows / cols
    const long long stride = 2 * 8 * k;  // from slot 0 of warp w to slot 0 of warp w + 1
    const T* piece = carry + (w0 * k + j) * 2 * 8 + r;
    T s = piece[(start & 31) ? 8 : 0];
    // sequential, in warp order; the loads do not depend on s, so they overlap
#pragma unroll 8
    for (long long w = w0 + 1; w <= w1; ++w) {
        piece += stride;
        s += *piece;
    }
    *out = s;
}
