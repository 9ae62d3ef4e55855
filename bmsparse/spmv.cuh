// spmv.cuh - the device functions of spmv.cu, shared with spmv_dense.cu,
// whose kernels take a block's partial sums in registers instead (one module
// each, so that a program multiplying only sparse blocks by vectors does not
// compile the dense kernels' unrolled walks).
// Arguments, steps and layout: see spmv.cu.
#pragma once
#include "_cuda/bitmap.cuh"
#include "_cuda/group.cuh"

// Threads a thread block (spmv.py's _THREADS). 128 against 256, the same
// 64 registers and occupancy: ncu, H200, us, A.T @ x / A @ x, the surrogate
// 41.3 / 40.6 -> 39.0 / 38.6, email-Enron 19.1 / 19.3 -> 17.4 / 17.8,
// musae_git 21.0 / 18.9 -> 19.7 / 18.0, ca-CondMat 16.0 / 15.5 -> 14.8 /
// 14.4, bcsstk33 (dense kernels) within 0.2 (session 47)
#ifndef BMSPARSE_SPMV_THREADS
#define BMSPARSE_SPMV_THREADS 128
#endif
// thread blocks per SM the kernels are compiled for: 8 of 128 threads, as 4
// of 256 before. With that many the driver's compiler gives them 64
// registers (48 without a minimum): fewer warps are active (38% against
// 47%), but each waits less. ncu on an H100, us, A @ x / A.T @ x: the
// surrogate 64.9 / 66.5 -> 58.6 / 60.2, email-Enron 24.8 / 29.1 -> 23.2 /
// 26.7, bcsstk33 (dense kernels) 15.8 / 20.8 -> 13.3 / 14.8; with 5 of 256
// (48 registers) as without, with 6 (40, spilling) slower, with 3 (78
// registers) the surrogate 41 -> 46 us (H200, session 47)
#ifndef BMSPARSE_SPMV_MIN_BLOCKS
#define BMSPARSE_SPMV_MIN_BLOCKS 8
#endif

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

// The bits of x as W, a type of its size (a copy the compiler keeps in
// registers).
template <typename W, typename T>
__device__ __forceinline__ W bits_of(const T& x) {
    static_assert(sizeof(W) == sizeof(T), "bits_of: sizes differ");
    W w;
    memcpy(&w, &x, sizeof(W));
    return w;
}

// Y's rows row0 .. row0 + 7 (those below nout) of one column, yj[i * y_rs].
// Eight contiguous outputs of 4 or 8 bytes whose start is 16-byte aligned go
// out in 16-byte stores (2 or 4 of them against 8): the L2 sees fewer,
// fuller requests.
template <typename T>
__device__ __forceinline__ void store_outputs(const T (&s)[8], long long row0, long long nout,
                                              T* __restrict__ yj, long long y_rs)
{
    T* const out = yj + row0 * y_rs;
    if (y_rs == 1 && row0 + 8 <= nout && ((size_t)out & 15u) == 0u) {
        if constexpr (sizeof(T) == 4) {
            uint4* dst = reinterpret_cast<uint4*>(out);
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                dst[q] = make_uint4(bits_of<unsigned int>(s[4 * q]),
                                    bits_of<unsigned int>(s[4 * q + 1]),
                                    bits_of<unsigned int>(s[4 * q + 2]),
                                    bits_of<unsigned int>(s[4 * q + 3]));
            }
            return;
        }
        if constexpr (sizeof(T) == 8) {
            ulonglong2* dst = reinterpret_cast<ulonglong2*>(out);
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                dst[q] = make_ulonglong2(bits_of<unsigned long long>(s[2 * q]),
                                         bits_of<unsigned long long>(s[2 * q + 1]));
            }
            return;
        }
    }
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        if (row0 + r < nout) yj[(row0 + r) * y_rs] = s[r];
    }
}

// The pieces of a group spanning warps, summed by the whole warp into lane
// 0's s; start and end are the group's places in the layout (32 w + lane
// for warp w: see combine_and_store). Piece 0 is the first warp's slot (0
// if the group starts at its lane 0, else 1), piece i > 0 slot 0 of warp
// w0 + i. Lane l sums pieces l, l + 32, ... in order, then the lanes' sums
// are added by halving (lane l takes lane l + d's, d = 16, 8, 4, 2, 1).
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
    // lanes npieces.. hold +0 (no lane's sum is -0: each starts from +0), and
    // adding +0 changes nothing: the halvings that would only add those are
    // skipped (most groups spanning warps have 2 pieces: one halving of 5)
    for (int d = 16; d > 0; d >>= 1) {
        if (d >= npieces) continue;
#pragma unroll
        for (int r = 0; r < 8; ++r) s[r] = s[r] + shfl_down(s[r], d);
    }
}

// Steps 2 and 3 for one warp, every lane present: `group` is the lane's block
// row (column), or -1 past the warp's blocks; p the lane's position in the
// block list. A group's blocks are contiguous in the layout too, so its
// first block's place there is the lane's, 32 w + lane, less p - ptr[group].
template <typename T>
__device__ __forceinline__ void combine_and_store(
    T (&acc)[8], long long group, long long p, const long long* __restrict__ ptr,
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
    long long start = 0, end = 0;  // the group's places in the layout
    if (group >= 0 && (lane == 31 || next != group)) {
        const long long listed = __ldg(ptr + group);
        start = (w << 5) + lane - (p - listed);
        end = start + (__ldg(ptr + group + 1) - listed);
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
    if (__ldg(ptr + g) != __ldg(ptr + g + 1)) return;
    const T zeros[8] = {};
    store_outputs(zeros, g << 3, nout, y + j * y_cs, y_rs);
}

// The x entries a block reads, xb[e * xs] for each of its non-empty columns
// (rows for cols) e, loaded together; 0 for the others.
template <typename T, bool Cols>
__device__ __forceinline__ void block_x(T (&xe)[8], u64 bitmap, const T* __restrict__ xb,
                                        long long xs)
{
    const unsigned int used = Cols ? nonempty_rows(bitmap) : nonempty_cols(bitmap);
#pragma unroll
    for (int e = 0; e < 8; ++e) xe[e] = ((used >> e) & 1u) ? xb[e * xs] : T(0);
}

// Step 1: acc[o] = sum of A(r, c) * xb[i * xs] over the block's bits in bit
// order, o = r and i = c (rows) or o = c and i = r (cols); the values at vb
// (null: every value is 1). The block's x entries and up to 8 values at a time
// are loaded together before any is used. Registers cannot be indexed at run
// time, so the 8 x entries and the 8 sums live in shared memory, this
// thread's at s[e * BMSPARSE_SPMV_THREADS] and s[(8 + e) * ...], each bit
// reaching them by its position: one load or store where a choice among 8
// registers took 8 selects, which a warp paid at each bit where any of its
// lanes changed row. Bits come row by row, so one of the two stays in a
// register until the row changes: rows keep the row's running sum (written
// to its output then), cols the row's x entry (read then). The bits are
// walked in two 32-bit halves (rows 0-3, then 4-7): a 64-bit find-first-set
// and clear cost three times the instructions. The sums are the same, in the
// same order.
template <typename T, bool Cols>
__device__ __forceinline__ void block_partials(
    T (&acc)[8], u64 bitmap, const T* __restrict__ vb, const T* __restrict__ xb, long long xs,
    T* __restrict__ s)
{
    constexpr int stride = BMSPARSE_SPMV_THREADS;  // the launch's block size
    T* __restrict__ entries = s;
    T* __restrict__ sums = s + 8 * stride;
    T xe[8];
    block_x<T, Cols>(xe, bitmap, xb, xs);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        entries[e * stride] = xe[e];
        if (Cols) sums[e * stride] = T(0);
    }
    const int n = __popcll(bitmap);
    unsigned int bits = (unsigned int)bitmap;              // the half being walked
    unsigned int high = (unsigned int)(bitmap >> 32);      // rows 4-7, until walked
    int half = 0;  // the first bit of `bits`: 0, then 32
    int row = -1;  // the row of the bits walked last
    T run = T(0);  // rows: the running sum of that row; cols: its x entry
    for (int base = 0; base < n; base += 8) {
        T a[8];
#pragma unroll
        for (int t = 0; t < 8; ++t) a[t] = base + t < n ? (vb ? vb[base + t] : T(1)) : T(0);
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            if (base + t < n) {
                if (!bits) {
                    bits = high;
                    high = 0u;
                    half = 32;
                }
                const int bit = half + __ffs(bits) - 1;
                bits &= bits - 1u;
                const int r = bit >> 3, c = bit & 7;
                if (r != row) {
                    if (Cols) {
                        run = entries[r * stride];
                    } else {
                        if (row >= 0) sums[row * stride] = run;
                        run = T(0);
                    }
                    row = r;
                }
                if (Cols) sums[c * stride] += a[t] * run;
                else run += a[t] * entries[c * stride];
            }
        }
    }
    if (!Cols && row >= 0) sums[row * stride] = run;
    // rows: a row without bits was never written
    const unsigned int written = Cols ? 0xffu : nonempty_rows(bitmap);
#pragma unroll
    for (int o = 0; o < 8; ++o) acc[o] = ((written >> o) & 1u) ? sums[o * stride] : T(0);
}

// Step 1 as block_partials, for dense blocks: the walk goes row by row with
// r and c known at compile time, so the sums and the x entries stay in
// registers and a row's values are loaded together before any is used. The
// same sums in the same order (each in bit order); faster where blocks hold
// many entries (bcsstk33, 22 a block: 15 -> 11 us), slower where they hold few,
// whose rows the unrolled walk mostly skips.
template <typename T, bool Cols>
__device__ __forceinline__ void dense_block_partials(
    T (&acc)[8], u64 bitmap, const T* __restrict__ vb, const T* __restrict__ xb, long long xs)
{
    T xe[8];
    block_x<T, Cols>(xe, bitmap, xb, xs);
    int v = 0;  // the row's first value
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const unsigned int bits = (unsigned int)(bitmap >> (8 * r)) & 0xffu;
        if (!bits) continue;
        T a[8];
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            a[c] = ((bits >> c) & 1u) ? (vb ? vb[v + __popc(bits & ((1u << c) - 1u))] : T(1))
                                      : T(0);
        }
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            if ((bits >> c) & 1u) {
                if (Cols) acc[c] += a[c] * xe[r];
                else acc[r] += a[c] * xe[c];
            }
        }
        v += __popc(bits);
    }
}

// The whole kernel. Unit: a vector in and out (k == 1, x_rs == y_rs == 1),
// so that the index arithmetic folds to constants. Dense: step 1 by
// dense_block_partials, without shared memory.
template <typename T, bool Cols, bool Unit, bool Dense>
__device__ __forceinline__ void spmv(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    const long long* __restrict__ ptr, const long long* __restrict__ warps, long long nwarps,
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
    if (warp >= nwarps * k) return;  // whole warps leave together
    const long long w = k == 1 ? warp : warp / k;
    const long long j = warp - w * k;
    // __ldg here and below: the _unit kernels' pointers come in a struct,
    // whose members carry no __restrict__ to put them on the read-only path
    const long long p = __ldg(warps + w) + (threadIdx.x & 31u);
    T acc[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) acc[r] = T(0);
    long long group = -1;
    if (p < __ldg(warps + w + 1)) {
        const u64 key = __ldg(keys + p);
        const u64 bitmap = __ldg(bitmaps + p);
        const long long v = __ldg(offsets + p);
        const T* vb = values ? values + v : nullptr;
        const T* xj = x + j * x_cs;
        const long long in0 = (long long)(Cols ? block_row(key) : block_col(key)) << 3;
        group = Cols ? block_col(key) : block_row(key);
        if (Dense) {
            dense_block_partials<T, Cols>(acc, bitmap, vb, xj + in0 * x_rs, x_rs);
        } else {
            extern __shared__ __align__(16) unsigned char spmv_shared[];
            block_partials<T, Cols>(acc, bitmap, vb, xj + in0 * x_rs, x_rs,
                                    reinterpret_cast<T*>(spmv_shared) + threadIdx.x);
        }
    }
    combine_and_store(acc, group, p, ptr, w, j, k, nout, y, y_rs, y_cs, carry, count);
}

// A kernel of the family bmsparse_spmv_{rows,cols}[_dense].
#define BMSPARSE_SPMV_KERNEL(NAME, COLS, DENSE) \
    template <typename T> \
    __global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS, BMSPARSE_SPMV_MIN_BLOCKS) NAME( \
        const u64* __restrict__ keys, const u64* __restrict__ bitmaps, \
        const long long* __restrict__ offsets, const T* __restrict__ values, \
        const long long* __restrict__ ptr, const long long* __restrict__ warps, \
        long long nwarps, const T* __restrict__ x, long long x_rs, long long x_cs, long long k, \
        long long nout, T* __restrict__ y, long long y_rs, long long y_cs, \
        T* __restrict__ carry, unsigned int* __restrict__ count) \
    { \
        spmv<T, COLS, false, DENSE>(keys, bitmaps, offsets, values, ptr, warps, nwarps, x, x_rs, \
                                    x_cs, k, nout, y, y_rs, y_cs, carry, count); \
    }

// The arguments of a _unit kernel that stay with the matrix: all but the
// values, x and y, in one struct passed by value, which spmv.py packs once
// per matrix and dtype as the fixed argument of its kept launch
// (_UNIT_BLOCKS, the same layout of nine 8-byte fields: it says what the
// struct saved when CuPy launched it).
struct bm_spmv_blocks {
    const u64* keys;
    const u64* bitmaps;
    const long long* offsets;
    const long long* ptr;
    const long long* warps;
    long long nwarps;
    long long nout;
    void* carry;
    unsigned int* count;
};

// A kernel of the family bmsparse_spmv_{rows,cols}_unit[_dense]: a vector in
// and out (k == 1, x_rs == y_rs == 1).
#define BMSPARSE_SPMV_UNIT_KERNEL(NAME, COLS, DENSE) \
    template <typename T> \
    __global__ void __launch_bounds__(BMSPARSE_SPMV_THREADS, BMSPARSE_SPMV_MIN_BLOCKS) NAME( \
        const bm_spmv_blocks b, const T* __restrict__ values, const T* __restrict__ x, \
        T* __restrict__ y) \
    { \
        spmv<T, COLS, true, DENSE>(b.keys, b.bitmaps, b.offsets, values, b.ptr, b.warps, \
                                   b.nwarps, x, 1, 0, 1, b.nout, y, 1, 0, \
                                   static_cast<T*>(b.carry), b.count); \
    }
