// spmv.cu - sparse matrix times dense vector or matrix: Y = A @ X and Y = A.T @ X.
//
// Load-balanced: one thread per block of A and column j of X, whatever the
// lengths of the block rows. The blocks are taken in row-major order for
// A @ X (a block row is a "group") and in column-major order through
// `order` for A.T @ X (a block column is a group; no transposed copy of A is
// made), so warp w holds positions [32w, 32w + 32) of the ordered block list
// and every warp does the same work. One cooperative launch,
// bmsparse_spmv_multiply: steps 1-3, a grid barrier (_cuda/grid.cuh), step 4
// (one launch, not two: a launch costs more host time than a small SpMV
// takes on the GPU).
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
//   4. After the grid barrier, one thread per output element: an empty
//      group's outputs are 0; a group spanning warps w0..w1 sums its pieces
//      sequentially, w0's slot (0 if the group starts at lane 0, else 1) then
//      slot 0 of w0 + 1, ..., w1. Other outputs were written by step 3.
//
// Arguments (csr.h style):
//   u64       keys[nblocks], bitmaps[nblocks] - blocks of A
//   long long offsets[nblocks + 1]  - value offsets of A's blocks
//   T         values[nnz]           - values of A, or null: every value is 1 (bool A)
//   long long order[nblocks]        - A's blocks in column-major order (A.T @ X),
//                                     or null (A @ X)
//   long long ptr[ngroups + 1]      - blocks of block row (column) g:
//                                     positions [ptr[g], ptr[g + 1]) of A (of `order`)
//   long long nblocks               - blocks of A
//   T         x[...]                - X, element (i, j) at x[i * x_rs + j * x_cs]
//   long long k                     - columns of X (1 for a vector)
//   long long nout                  - rows of Y: A's rows (columns for cols)
//   T         y[...]                - out: Y, element (i, j) at y[i * y_rs + j * y_cs]
//   T         carry[nwarps * k * 2 * 8] - scratch: partial sums of
//                                     the groups spanning warps, nwarps = ceil(nblocks / 32);
//                                     element r of slot s of warp w, column j at
//                                     ((w * k + j) * 2 + s) * 8 + r
//   u64       bar[2]                - zeroed: the grid barrier
//
// Launch: a cooperative grid of BMSPARSE_SPMV_THREADS-thread blocks, at most
// as many as are resident at once; steps 1-3 stride over the warp numbers
// w * k + j (so the k warps reading the same 32 blocks are neighbours),
// step 4 over the output elements, (i, j) at j * nout + i.
// Work: O(k * (nnz + nblocks + nout)), with O(log 32) shuffles per block and
// O(nblocks / 32) sequential additions for a group spanning warps.
// Deterministic, no atomics: each output is summed in a fixed order that
// depends only on A's block structure: per block in bit order, then the
// scan tree over the block's segment of a warp, then the warps' pieces in
// warp order. spmv.py's NumPy twin follows the same order.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"
#include "_cuda/grid.cuh"

#ifndef BMSPARSE_SPMV_THREADS
#define BMSPARSE_SPMV_THREADS 256
#endif

#define BMSPARSE_FULL_WARP 0xffffffffu

// a load through L2 (the L1 line may be stale: another thread block wrote it)
template <typename T>
__device__ __forceinline__ T load_cg(const T* p) { return __ldcg(p); }

template <typename R>
__device__ __forceinline__ bm_complex<R> load_cg(const bm_complex<R>* p) {
    const R* parts = reinterpret_cast<const R*>(p);
    return bm_complex<R>(__ldcg(parts), __ldcg(parts + 1));
}

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

// what the passes read and write (see the arguments above)
template <typename T>
struct Spmv {
    const u64* __restrict__ keys;
    const u64* __restrict__ bitmaps;
    const long long* __restrict__ offsets;
    const T* __restrict__ values;
    const long long* __restrict__ order;  // null: A @ X (rows)
    const long long* __restrict__ ptr;
    long long nblocks;
    const T* __restrict__ x;
    long long x_rs, x_cs, k, nout;
    T* __restrict__ y;
    long long y_rs, y_cs;
    T* carry;
};

// steps 1-3 for A @ X: warp number `warp` (of nwarps * k), every lane present
template <typename T>
__device__ __forceinline__ void multiply_rows(const Spmv<T>& s, long long warp)
{
    const long long w = warp / s.k;
    const long long j = warp - w * s.k;
    const long long q = (w << 5) | (threadIdx.x & 31u);
    T acc[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) acc[r] = T(0);
    long long group = -1;
    if (q < s.nblocks) {
        const u64 key = s.keys[q];
        const u64 bitmap = s.bitmaps[q];
        const T* xj = s.x + j * s.x_cs;
        const long long col0 = (long long)block_col(key) << 3;
        long long v = s.offsets[q];
        group = block_row(key);
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            for (unsigned int bits = row_bits(bitmap, r); bits; bits &= bits - 1u) {
                const int c = __ffs(bits) - 1;
                const T a = s.values ? s.values[v] : T(1);
                ++v;
                acc[r] += a * xj[(col0 + c) * s.x_rs];
            }
        }
    }
    combine_and_store(acc, group, s.ptr, w, j, s.k, s.nout, s.y, s.y_rs, s.y_cs, s.carry);
}

// steps 1-3 for A.T @ X
template <typename T>
__device__ __forceinline__ void multiply_cols(const Spmv<T>& s, long long warp)
{
    const long long w = warp / s.k;
    const long long j = warp - w * s.k;
    const long long p = (w << 5) | (threadIdx.x & 31u);
    T acc[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[c] = T(0);
    long long group = -1;
    if (p < s.nblocks) {
        const long long q = s.order[p];
        const u64 key = s.keys[q];
        const u64 bitmap = s.bitmaps[q];
        const T* xj = s.x + j * s.x_cs;
        const long long row0 = (long long)block_row(key) << 3;
        long long v = s.offsets[q];
        group = block_col(key);
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            const unsigned int bits = row_bits(bitmap, r);
            if (!bits) continue;
            const T xr = xj[(row0 + r) * s.x_rs];
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                if ((bits >> c) & 1u) {
                    const T a = s.values ? s.values[v] : T(1);
                    ++v;
                    acc[c] += a * xr;
                }
            }
        }
    }
    combine_and_store(acc, group, s.ptr, w, j, s.k, s.nout, s.y, s.y_rs, s.y_cs, s.carry);
}

// step 4 for output element `e` (of nout * k): the carries were written by
// other thread blocks before the grid barrier, so they are read through L2
template <typename T>
__device__ __forceinline__ void add_carries(const Spmv<T>& s, long long e)
{
    const long long j = e / s.nout;
    const long long i = e - j * s.nout;
    const long long g = i >> 3;
    const int r = (int)(i & 7);
    const long long start = s.ptr[g], end = s.ptr[g + 1];
    T* out = s.y + i * s.y_rs + j * s.y_cs;
    if (start == end) {
        *out = T(0);
        return;
    }
    const long long w0 = start >> 5, w1 = (end - 1) >> 5;
    if (w0 == w1) return;  // written by step 3
    const long long stride = 2 * 8 * s.k;  // from slot 0 of warp w to slot 0 of warp w + 1
    const T* piece = s.carry + (w0 * s.k + j) * 2 * 8 + r;
    T sum = load_cg(piece + ((start & 31) ? 8 : 0));
    // sequential, in warp order; the loads do not depend on sum, so they overlap
#pragma unroll 8
    for (long long w = w0 + 1; w <= w1; ++w) {
        piece += stride;
        sum += load_cg(piece);
    }
    *out = sum;
}

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS) bmsparse_spmv_multiply(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    const long long* __restrict__ order, const long long* __restrict__ ptr, long long nblocks,
    const T* __restrict__ x, long long x_rs, long long x_cs, long long k,
    long long nout, T* __restrict__ y, long long y_rs, long long y_cs, T* carry, u64* bar)
{
    const Spmv<T> s = {keys, bitmaps, offsets, values, order, ptr, nblocks, x, x_rs, x_cs, k,
                       nout, y, y_rs, y_cs, carry};
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long nthreads = gridDim.x * (long long)blockDim.x;
    const long long nwarps = (nblocks + 31) >> 5;
    // whole warps step together: the stride is a multiple of 32 threads
    for (long long warp = tid >> 5; warp < nwarps * k; warp += nthreads >> 5) {
        if (order) multiply_cols(s, warp);
        else multiply_rows(s, warp);
    }
    grid_barrier(bar);
    for (long long e = tid; e < nout * k; e += nthreads) add_carries(s, e);
}
