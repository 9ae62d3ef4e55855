// elementwise.cu - the values of C = A + B, A - B or A.multiply(B).
//
// elementwise.py merges the block keys first (a union for + and -, an
// intersection for multiply) and gives every block q of C its block of A
// and of B (c_a[q], c_b[q], -1 where the operand has none) and the OR (AND)
// of their bitmaps. Here thread r of block q walks row r of the block: an
// entry present in an operand takes the next value of that operand's row
// (values are in bit order, so they are met in order), an absent one is 0;
// every entry of c_bitmaps gets op(a, b). scipy drops results that are
// exactly zero, so the bits whose value is not zero are returned too, and
// compaction (spgemm/compact.py) removes the others.
//
// Arguments (csr.h style):
//   u64       a_bitmaps[a_nblocks]     - bitmaps of A
//   long long a_offsets[a_nblocks + 1] - value offsets of A's blocks
//   T         a_values[a_nnz]          - values of A
//   u64       b_bitmaps[b_nblocks], long long b_offsets[b_nblocks + 1], T b_values[b_nnz] - B
//   long long c_a[c_nblocks], c_b[c_nblocks] - A's and B's block of each C block, or -1
//   u64       c_bitmaps[c_nblocks]     - OR (AND for multiply) of the operands' bitmaps
//   long long c_offsets[c_nblocks + 1] - value offsets of C's blocks
//   long long c_nblocks
//   T         c_values[c_nnz]          - out: values of C
//   u64       c_nonzero[c_nblocks]     - out: bits of c_bitmaps whose value is not zero
//   unsigned long long zero_blocks[1]  - out: incremented for each block with a zero value
//
// Launch: 8 threads per C block (one per block row, consecutive lanes of one
// warp), 1-D grid of 8 * c_nblocks threads.
// Work: O(8 * c_nblocks + a_nnz + b_nnz).
// Deterministic: one operation per entry; zero_blocks is an integer count.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"

template <typename R>
__device__ __forceinline__ bm_complex<R> operator-(const bm_complex<R>& a, const bm_complex<R>& b) {
    return bm_complex<R>(a.re - b.re, a.im - b.im);
}

struct bm_op_plus {
    template <typename T> __device__ __forceinline__ static T apply(const T& a, const T& b) { return a + b; }
};

struct bm_op_minus {
    template <typename T> __device__ __forceinline__ static T apply(const T& a, const T& b) { return a - b; }
};

struct bm_op_times {
    template <typename T> __device__ __forceinline__ static T apply(const T& a, const T& b) { return a * b; }
};

template <typename Op, typename T>
__device__ __forceinline__ void merge_values(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values,
    const u64* __restrict__ b_bitmaps, const long long* __restrict__ b_offsets,
    const T* __restrict__ b_values,
    const long long* __restrict__ c_a, const long long* __restrict__ c_b,
    const u64* __restrict__ c_bitmaps, const long long* __restrict__ c_offsets,
    long long c_nblocks, T* __restrict__ c_values, u64* __restrict__ c_nonzero,
    unsigned long long* __restrict__ zero_blocks)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long q = tid >> 3;
    if (q >= c_nblocks) return;  // the 8 threads of a block leave together
    const int r = (int)(tid & 7);
    const unsigned int group = 0xffu << (threadIdx.x & 24u);
    const long long ia = c_a[q], ib = c_b[q];
    const u64 a_bm = ia >= 0 ? a_bitmaps[ia] : 0ull;
    const u64 b_bm = ib >= 0 ? b_bitmaps[ib] : 0ull;
    const u64 c_bm = c_bitmaps[q];
    const unsigned int a_row = row_bits(a_bm, r), b_row = row_bits(b_bm, r);
    const unsigned int c_row = row_bits(c_bm, r);
    const T* a_val = ia >= 0 ? a_values + a_offsets[ia] + value_index(a_bm, bit_of(r, 0)) : a_values;
    const T* b_val = ib >= 0 ? b_values + b_offsets[ib] + value_index(b_bm, bit_of(r, 0)) : b_values;
    T* out = c_values + c_offsets[q] + value_index(c_bm, bit_of(r, 0));
    unsigned int nonzero = 0;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        const bool in_a = (a_row >> c) & 1u, in_b = (b_row >> c) & 1u;
        const T av = in_a ? *a_val++ : T(0);
        const T bv = in_b ? *b_val++ : T(0);
        if ((c_row >> c) & 1u) {
            const T v = Op::apply(av, bv);
            *out++ = v;
            if (!is_zero(v)) nonzero |= 1u << c;
        }
    }
    u64 block_nonzero = (u64)nonzero << (r << 3);
#pragma unroll
    for (int s = 1; s < 8; s <<= 1) block_nonzero |= __shfl_xor_sync(group, block_nonzero, s);
    if (r == 0) {
        c_nonzero[q] = block_nonzero;
        if (block_nonzero != c_bm) atomicAdd(zero_blocks, 1ull);
    }
}

// one kernel per operation, so each compiles its operation inline
template <typename T>
__global__ void bmsparse_elementwise_plus(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_offsets, const T* __restrict__ b_values,
    const long long* __restrict__ c_a, const long long* __restrict__ c_b,
    const u64* __restrict__ c_bitmaps, const long long* __restrict__ c_offsets,
    long long c_nblocks, T* __restrict__ c_values, u64* __restrict__ c_nonzero,
    unsigned long long* __restrict__ zero_blocks)
{
    merge_values<bm_op_plus, T>(a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values, c_a,
                                c_b, c_bitmaps, c_offsets, c_nblocks, c_values, c_nonzero,
                                zero_blocks);
}

template <typename T>
__global__ void bmsparse_elementwise_minus(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_offsets, const T* __restrict__ b_values,
    const long long* __restrict__ c_a, const long long* __restrict__ c_b,
    const u64* __restrict__ c_bitmaps, const long long* __restrict__ c_offsets,
    long long c_nblocks, T* __restrict__ c_values, u64* __restrict__ c_nonzero,
    unsigned long long* __restrict__ zero_blocks)
{
    merge_values<bm_op_minus, T>(a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values, c_a,
                                c_b, c_bitmaps, c_offsets, c_nblocks, c_values, c_nonzero,
                                zero_blocks);
}

template <typename T>
__global__ void bmsparse_elementwise_times(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_offsets, const T* __restrict__ b_values,
    const long long* __restrict__ c_a, const long long* __restrict__ c_b,
    const u64* __restrict__ c_bitmaps, const long long* __restrict__ c_offsets,
    long long c_nblocks, T* __restrict__ c_values, u64* __restrict__ c_nonzero,
    unsigned long long* __restrict__ zero_blocks)
{
    merge_values<bm_op_times, T>(a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values, c_a,
                                c_b, c_bitmaps, c_offsets, c_nblocks, c_values, c_nonzero,
                                zero_blocks);
}
