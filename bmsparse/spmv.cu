// spmv.cu - sparse matrix times dense vector or matrix: Y = A @ X and Y = A.T @ X.
//
// Load-balanced: one thread per block of A and column j of X, whatever the
// lengths of the block rows. The blocks are taken in row-major order for
// A @ X (bmsparse_spmv_rows, a block row is a "group") and in column-major
// order through `order` for A.T @ X (bmsparse_spmv_cols, a block column is
// a group; no transposed copy of A is made), so warp w holds positions
// [32w, 32w + 32) of the ordered block list and every warp does the same work.
//
//   1. Each thread loads the block's 8 entries of X (those it needs) and
//      its values, 8 at a time, then walks its bits in bit order (a block's
//      values are contiguous) and sums the block's 8 partial outputs:
//        rows: acc[r] += A(8I + r, 8J + c) * X(8J + c, j)
//        cols: acc[c] += A(8I + r, 8J + c) * X(8I + r, j)
//   2. Consecutive lanes of one group form a segment. A segmented inclusive
//      scan (Hillis-Steele: for d = 1, 2, 4, 8, 16, lane l with
//      l - d >= first lane of its segment sets acc = acc(lane l - d) + acc)
//      leaves the segment's sum in its last lane. Lanes past the end of the
//      block list stay through the shuffles with zero partials.
//   3. The last lane of a segment whose group lies inside the warp writes the
//      group's 8 outputs; one whose group spans warps w0..w1 (ptr[g] >> 5 !=
//      (ptr[g + 1] - 1) >> 5) writes them to the warp's carry slot 0 if the
//      segment starts at lane 0 (leading, or the whole warp), else slot 1
//      (trailing), and counts its arrival at count[w0 * k + j]. The warp of
//      the last of the w1 - w0 + 1 pieces to arrive (threadfence reduction:
//      write, __threadfence, atomicAdd) zeroes the count and sums them: piece 0 is w0's slot (0
//      if the group starts at lane 0, else 1), piece i > 0 slot 0 of warp
//      w0 + i; lane l adds pieces l, l + 32, ... in order, then lane l < d
//      adds lane l + d's sum for d = 16, 8, 4, 2, 1, and lane 0 writes the
//      group's outputs.
//   4. Thread t < ngroups * k (ngroups = ceil(nout / 8)), as group g = t mod
//      ngroups of column j = t / ngroups: an empty group's outputs are 0.
//   One launch, no grid barrier: every output is written exactly once.
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
//   T         carry[nwarps * k * 2 * 8] - scratch: partial sums of the groups
//                                     spanning warps, nwarps = ceil(nblocks / 32);
//                                     element r of slot s of warp w, column j at
//                                     ((w * k + j) * 2 + s) * 8 + r
//   unsigned  count[nwarps * k]     - scratch, zero on entry and on exit: pieces
//                                     arrived of the group spanning warps from
//                                     warp w0, column j, at w0 * k + j
//
// Launch: max(32 * nwarps, ngroups) * k threads, 1-D grid, warp number
// w * k + j (so the k warps reading the same 32 blocks are neighbours);
// 2 * 8 * sizeof(T) bytes of dynamic shared memory per thread (step 1).
// The _unit kernels are the same for a vector in and out (k == 1, x_rs ==
// y_rs == 1), without the strides and k among their arguments: their index
// arithmetic folds to constants, which takes a quarter of the instructions off.
// Work: O(k * (nnz + nblocks + nout)), with O(log 32) shuffles per block and
// O(nblocks / 1024) sequential additions per lane for a group spanning warps.
// Deterministic (the atomics only count arrivals): each output is summed in a
// fixed order that depends only on A's block structure: per block in bit
// order, then the scan tree over the block's segment of a warp, then the
// warps' pieces as step 3 adds them. spmv.py's NumPy twin follows the same
// order.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"

#ifndef BMSPARSE_SPMV_THREADS
#define BMSPARSE_SPMV_THREADS 256
#endif

#define BMSPARSE_FULL_WARP 0xffffffffu

// f applied to each real part of x (re and im of a complex value): the warp
// shuffles and __ldcg take scalars only
template <typename T, typename F>
__device__ __forceinline__ T by_parts(T x, F f) {
    return f(x);
}

template <typename R, typename F>
__device__ __forceinline__ bm_complex<R> by_parts(bm_complex<R> x, F f) {
    return bm_complex<R>(f(x.re), f(x.im));
}

template <typename T>
__device__ __forceinline__ T shfl_up(T x, int d) {
    return by_parts(x, [d](auto v) { return __shfl_up_sync(BMSPARSE_FULL_WARP, v, d); });
}

template <typename T>
__device__ __forceinline__ T shfl_down(T x, int d) {
    return by_parts(x, [d](auto v) { return __shfl_down_sync(BMSPARSE_FULL_WARP, v, d); });
}

// A load from L2, past this SM's L1: another SM wrote the value. Its parts
// are read where they lie (by_parts would take a copy).
template <typename T>
__device__ __forceinline__ T load_cg(const T* p) {
    return __ldcg(p);
}

template <typename R>
__device__ __forceinline__ bm_complex<R> load_cg(const bm_complex<R>* p) {
    return bm_complex<R>(__ldcg(&p->re), __ldcg(&p->im));
}

// Y's rows row0 .. row0 + 7 (those below nout) of one column, yj[i * y_rs].
template <typename T>
__device__ __forceinline__ void store_outputs(const T (&s)[8], long long row0, long long nout,
                                              T* __restrict__ yj, long long y_rs)
{
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        if (row0 + r < nout) yj[(row0 + r) * y_rs] = s[r];
    }
}

// The pieces of a group spanning warps, summed by the whole warp into lane
// 0's s: piece 0 is the first warp's slot (0 if the group starts at its lane
// 0, else 1), piece i > 0 slot 0 of warp w0 + i. Lane l sums pieces l,
// l + 32, ... in order, then the lanes' sums are added by halving (lane l
// takes lane l + d's, d = 16, 8, 4, 2, 1).
template <typename T>
__device__ __forceinline__ void sum_pieces(T (&s)[8], long long start, long long end,
                                           long long j, long long k, const T* __restrict__ carry)
{
    const int lane = (int)(threadIdx.x & 31u);
    const long long w0 = start >> 5, npieces = ((end - 1) >> 5) - w0 + 1;
#pragma unroll
    for (int r = 0; r < 8; ++r) s[r] = T(0);
    for (long long i = lane; i < npieces; i += 32) {
        const int slot = i == 0 && (start & 31) ? 1 : 0;
        const T* piece = carry + (((w0 + i) * k + j) * 2 + slot) * 8;
#pragma unroll
        for (int r = 0; r < 8; ++r) s[r] += load_cg(piece + r);
    }
    for (int d = 16; d > 0; d >>= 1) {
#pragma unroll
        for (int r = 0; r < 8; ++r) s[r] = s[r] + shfl_down(s[r], d);
    }
}

// Steps 2 and 3 for one warp, every lane present: `group` is the lane's block
// row (column), or -1 past the end of the block list.
template <typename T>
__device__ __forceinline__ void combine_and_store(
    T (&acc)[8], long long group, const long long* __restrict__ ptr,
    long long w, long long j, long long k, long long nout,
    T* __restrict__ y, long long y_rs, long long y_cs, T* __restrict__ carry,
    unsigned int* __restrict__ count)
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
    // the segment's last lane writes its group's outputs, or its piece
    bool last = false;
    long long start = 0, end = 0;
    if (group >= 0 && (lane == 31 || next != group)) {
        start = ptr[group];
        end = ptr[group + 1];
        const long long w0 = start >> 5, w1 = (end - 1) >> 5;
        if (w0 == w1) {
            store_outputs(acc, group << 3, nout, y + j * y_cs, y_rs);
        } else {
            T* slot = carry + ((w * k + j) * 2 + (first == 0 ? 0 : 1)) * 8;
#pragma unroll
            for (int r = 0; r < 8; ++r) slot[r] = acc[r];
            // the last of the group's pieces to arrive has its warp sum them
            __threadfence();
            last = atomicAdd(count + w0 * k + j, 1u) == (unsigned int)(w1 - w0);
            // nothing counts there again in this launch: zero for the next
            // one, so that a kept scratch needs no memset
            if (last) count[w0 * k + j] = 0u;
        }
    }
    unsigned int lasts = __ballot_sync(BMSPARSE_FULL_WARP, last);
    if (!lasts) return;
    // the counting lane's fence, then __syncwarp (which orders memory among
    // the warp's lanes): every lane reads the pieces after the last write
    __threadfence();
    __syncwarp();
    while (lasts) {  // at most two: the warp's leading and trailing segments
        const int owner = __ffs(lasts) - 1;
        lasts &= lasts - 1u;
        const long long g = __shfl_sync(BMSPARSE_FULL_WARP, group, owner);
        const long long g_start = __shfl_sync(BMSPARSE_FULL_WARP, start, owner);
        const long long g_end = __shfl_sync(BMSPARSE_FULL_WARP, end, owner);
        sum_pieces(acc, g_start, g_end, j, k, carry);
        if (lane == 0) store_outputs(acc, g << 3, nout, y + j * y_cs, y_rs);
    }
}

// Step 4 for thread `tid`: the outputs of an empty group are 0 (no lane has
// its segment).
template <typename T>
__device__ __forceinline__ void zero_empty_group(
    long long tid, const long long* __restrict__ ptr, long long k, long long nout,
    T* __restrict__ y, long long y_rs, long long y_cs)
{
    const long long ngroups = (nout + 7) >> 3;
    if (tid >= ngroups * k) return;
    const long long j = k == 1 ? 0 : tid / ngroups;  // a 64-bit division is long
    const long long g = tid - j * ngroups;
    if (ptr[g] != ptr[g + 1]) return;
    const T zeros[8] = {};
    store_outputs(zeros, g << 3, nout, y + j * y_cs, y_rs);
}

// Step 1: acc[o] = sum of A(r, c) * xb[i * xs] over the block's bits in bit
// order, o = r and i = c (rows) or o = c and i = r (cols); the values at vb
// (null: every value is 1). The block's x entries and up to 8 values at a time
// are loaded together before any is used. Shared memory holds the entries
// and the sums (this thread's 8 of each at sx[e * stride], sacc[e * stride]):
// a bit's position indexes them, and registers cannot be indexed at run time.
template <typename T, bool Cols>
__device__ __forceinline__ void block_partials(
    T (&acc)[8], u64 bitmap, const T* __restrict__ vb, const T* __restrict__ xb, long long xs,
    T* __restrict__ sx, T* __restrict__ sacc, int stride)
{
    const unsigned int used = Cols ? nonempty_rows(bitmap) : nonempty_cols(bitmap);
    T xe[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) xe[e] = ((used >> e) & 1u) ? xb[e * xs] : T(0);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        sx[e * stride] = xe[e];
        sacc[e * stride] = T(0);
    }
    const int n = __popcll(bitmap);
    u64 bits = bitmap;
    for (int base = 0; base < n; base += 8) {
        T a[8];
#pragma unroll
        for (int t = 0; t < 8; ++t) a[t] = base + t < n ? (vb ? vb[base + t] : T(1)) : T(0);
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            if (bits) {
                const int bit = __ffsll((long long)bits) - 1;
                bits &= bits - 1ull;
                const int o = Cols ? (bit & 7) : (bit >> 3);
                const int i = Cols ? (bit >> 3) : (bit & 7);
                sacc[o * stride] += a[t] * sx[i * stride];
            }
        }
    }
#pragma unroll
    for (int o = 0; o < 8; ++o) acc[o] = sacc[o * stride];
}

// The whole kernel. Unit: a vector in and out (k == 1, x_rs == y_rs == 1),
// so that the index arithmetic folds to constants.
template <typename T, bool Cols, bool Unit>
__device__ __forceinline__ void spmv(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    const long long* __restrict__ order, const long long* __restrict__ ptr, long long nblocks,
    const T* __restrict__ x, long long x_rs, long long x_cs, long long k,
    long long nout, T* __restrict__ y, long long y_rs, long long y_cs, T* __restrict__ carry,
    unsigned int* __restrict__ count)
{
    if (Unit) {
        k = 1;
        x_rs = y_rs = 1;
        x_cs = y_cs = 0;
    }
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    zero_empty_group(tid, ptr, k, nout, y, y_rs, y_cs);
    const long long warp = tid >> 5;
    const long long nwarps = (nblocks + 31) >> 5;
    if (warp >= nwarps * k) return;  // whole warps leave together
    const long long w = k == 1 ? warp : warp / k;
    const long long j = warp - w * k;
    const long long p = (w << 5) | (threadIdx.x & 31u);
    T acc[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) acc[r] = T(0);
    long long group = -1;
    if (p < nblocks) {
        const long long q = Cols ? order[p] : p;
        const u64 key = keys[q];
        const u64 bitmap = bitmaps[q];
        const long long v = offsets[q];
        const T* vb = values ? values + v : nullptr;
        const T* xj = x + j * x_cs;
        extern __shared__ __align__(16) unsigned char spmv_shared[];
        T* sx = reinterpret_cast<T*>(spmv_shared) + threadIdx.x;
        const long long in0 = (long long)(Cols ? block_row(key) : block_col(key)) << 3;
        group = Cols ? block_col(key) : block_row(key);
        block_partials<T, Cols>(acc, bitmap, vb, xj + in0 * x_rs, x_rs, sx,
                                sx + 8 * blockDim.x, blockDim.x);
    }
    combine_and_store(acc, group, ptr, w, j, k, nout, y, y_rs, y_cs, carry, count);
}

#define BMSPARSE_SPMV_PARAMS \
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps, \
    const long long* __restrict__ offsets, const T* __restrict__ values
#define BMSPARSE_SPMV_TAIL \
    const long long* __restrict__ ptr, long long nblocks, \
    const T* __restrict__ x, long long x_rs, long long x_cs, long long k, \
    long long nout, T* __restrict__ y, long long y_rs, long long y_cs, T* __restrict__ carry, \
    unsigned int* __restrict__ count
#define BMSPARSE_SPMV_ARGS \
    ptr, nblocks, x, x_rs, x_cs, k, nout, y, y_rs, y_cs, carry, count
// the _unit kernels take no strides and no k: each launch argument costs
// CuPy about 0.4 us of host time
#define BMSPARSE_SPMV_UNIT_TAIL \
    const long long* __restrict__ ptr, long long nblocks, const T* __restrict__ x, \
    long long nout, T* __restrict__ y, T* __restrict__ carry, unsigned int* __restrict__ count
#define BMSPARSE_SPMV_UNIT_ARGS \
    ptr, nblocks, x, 1, 0, 1, nout, y, 1, 0, carry, count

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS) bmsparse_spmv_rows(
    BMSPARSE_SPMV_PARAMS, BMSPARSE_SPMV_TAIL)
{
    spmv<T, false, false>(keys, bitmaps, offsets, values, nullptr, BMSPARSE_SPMV_ARGS);
}

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS) bmsparse_spmv_rows_unit(
    BMSPARSE_SPMV_PARAMS, BMSPARSE_SPMV_UNIT_TAIL)
{
    spmv<T, false, true>(keys, bitmaps, offsets, values, nullptr, BMSPARSE_SPMV_UNIT_ARGS);
}

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS) bmsparse_spmv_cols(
    BMSPARSE_SPMV_PARAMS, const long long* __restrict__ order, BMSPARSE_SPMV_TAIL)
{
    spmv<T, true, false>(keys, bitmaps, offsets, values, order, BMSPARSE_SPMV_ARGS);
}

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS) bmsparse_spmv_cols_unit(
    BMSPARSE_SPMV_PARAMS, const long long* __restrict__ order, BMSPARSE_SPMV_UNIT_TAIL)
{
    spmv<T, true, true>(keys, bitmaps, offsets, values, order, BMSPARSE_SPMV_UNIT_ARGS);
}
