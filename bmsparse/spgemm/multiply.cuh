// multiply.cuh - the multiply of multiply.cu as a device function of one
// output value, so that a kernel doing more than one stage in one launch
// (lean.cu) runs the same sums in the same order.
// Arguments: see multiply.cu; every lane of a warp calls with its own v, the
// warp's values consecutive from a multiple of 32. `out` says where value v
// goes: BitmapOrder (C's values, in bit order) or CsrOrder (C in CSR).
#pragma once
#include "../_cuda/bitmap.cuh"
#include "../_cuda/csr.cuh"
#include "../_cuda/semiring.cuh"

// value v of C written at v of C's values
template <typename T>
struct BitmapOrder {
    T* __restrict__ values;
    __device__ __forceinline__ long long place(long long v, long long, u64, int) const {
        return v;
    }
    __device__ __forceinline__ void store(long long at, T value) const { values[at] = value; }
};

// value v of C written to CSR arrays, its column index beside it: C's keys
// and the places of its row segments (convert.cu's scan) say where
template <typename T, typename I>
struct CsrOrder {
    struct Place { long long at; I col; };
    const u64* __restrict__ keys;
    const long long* __restrict__ brow_ptr;
    const I* __restrict__ places;
    I* __restrict__ indices;
    T* __restrict__ data;
    __device__ __forceinline__ Place place(long long, long long q, u64 bitmap, int bit) const {
        const u64 key = keys[q];
        return {csr_place(brow_ptr, places, block_row(key), q, bitmap, bit),
                (I)(((long long)block_col(key) << 3) + (bit & 7))};
    }
    __device__ __forceinline__ void store(Place p, T value) const {
        indices[p.at] = p.col;
        data[p.at] = value;
    }
};

template <typename T, typename S, typename Out>
__device__ __forceinline__ void multiply_value(
    long long v, const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values,
    const u64* __restrict__ b_bitmaps, const long long* __restrict__ b_offsets,
    const T* __restrict__ b_values,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const long long* __restrict__ c_first, const long long* __restrict__ c_last,
    long long last_shift, const u64* __restrict__ c_bitmaps,
    const long long* __restrict__ c_offsets, long long c_nblocks,
    const long long* __restrict__ warp_block, long long c_nnz,
    const Out& out, unsigned long long* __restrict__ zero_values,
    unsigned long long* zero_flag)
{
    const long long warp_first = v & ~31ll;
    if (warp_first >= c_nnz) return;  // whole warps leave together
    const int lane = (int)(threadIdx.x & 31u);
    // The blocks starting inside this warp's 32 values: lane k reads the
    // offset of block q0 + 1 + k; as offsets strictly increase, the set of
    // distances (offset - warp_first) < 32 marks where blocks start, and a
    // lane's block is q0 plus the starts at or before it.
    const long long q0 = warp_block[warp_first >> 5];
    const long long base0 = c_offsets[q0];
    const long long next = q0 + 1 + lane <= c_nblocks ? c_offsets[q0 + 1 + lane] : c_nnz + 32;
    const long long distance = next - warp_first;
    unsigned int starts = distance < 32 ? 1u << distance : 0u;
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) starts |= __shfl_xor_sync(0xffffffffu, starts, s);
    const int before = __popc(starts & (0xffffffffu >> (31 - lane)));  // starts at <= lane
    const long long start = __shfl_sync(0xffffffffu, next, (before + 31) & 31);
    const unsigned int live = __ballot_sync(0xffffffffu, v < c_nnz);
    if (v >= c_nnz) return;
    const long long q = q0 + before;
    const long long first_value = before ? start : base0;
    const u64 c_bm = c_bitmaps[q];
    const int bit = nth_set_bit(c_bm, (int)(v - first_value));
    const int r = bit >> 3, c = bit & 7;
    // loaded before the sum, so that its loads overlap the pairs'
    const auto at = out.place(v, q, c_bm, bit);
    T acc = S::template identity<T>();
    const long long p1 = c_last[q + last_shift];
    for (long long p = c_first[q]; p < p1; ++p) {
        const long long ia = task_a[p], ib = task_b[p];
        const u64 a_bm = a_bitmaps[ia], b_bm = b_bitmaps[ib];
        unsigned int terms = row_bits(a_bm, r) & col_bits(b_bm, c);
        if (!terms) continue;
        if constexpr (!S::reads_values) {
            for (; terms; terms &= terms - 1u) acc = S::add(acc, T(1));
            continue;
        }
        const T* a_val = a_values + a_offsets[ia];
        const T* b_val = b_values + b_offsets[ib];
        for (; terms; terms &= terms - 1u) {
            const int t = __ffs(terms) - 1;
            acc = S::add(acc, S::mul(a_val[value_index(a_bm, bit_of(r, t))],
                                     b_val[value_index(b_bm, bit_of(t, c))]));
        }
    }
    out.store(at, acc);
    const unsigned int zeros = __ballot_sync(live, is_zero(acc));
    if (zeros && lane == __ffs(live) - 1) {
        atomicAdd(zero_values, (unsigned long long)__popc(zeros));
        if (zero_flag) *zero_flag = 1ull;
    }
}
