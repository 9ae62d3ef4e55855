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
// the count stage; a thread finds its block and bit from the offsets.
//
// bmsparse_multiply_warp_blocks: for each warp of 32 values, the output block
// holding its first value (so a warp starts from one load, not a search).
//   long long c_offsets[c_nblocks + 1] - value offsets of the output blocks
//   long long c_nblocks
//   long long warp_block[ceil(c_nnz / 32)] - out: block of value 32 * w
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
//   long long c_nnz                  - number of output values
//   T         c_values[c_nnz]        - out: values of C
//   unsigned long long zero_values[1] - out: incremented by the number of values
//                                       that are exactly zero (an integer count)
//   unsigned long long zero_flag[1]  - out, or null: set to 1 when a value is
//                                      exactly zero; a plain store, so it may be
//                                      a word of host memory that the host
//                                      reads after a sync without a copy
// Launch: one thread per output value, 1-D grid, blocks of a multiple of 32.
// Work: O(c_nnz * (pairs per block) + multiplies). Deterministic: fixed
// summation order, no atomics on values.
// Layout: see ../_cuda/bitmap.cuh.
#include "../_cuda/bitmap.cuh"
#include "../_cuda/semiring.cuh"

extern "C" __global__ void bmsparse_multiply_warp_blocks(
    const long long* __restrict__ c_offsets, long long c_nblocks,
    long long* __restrict__ warp_block)
{
    const long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    mark_warp_starts(warp_block, q, c_offsets[q], c_offsets[q + 1] - c_offsets[q]);
}

template <typename T, typename S>
__global__ void bmsparse_multiply_values(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values,
    const u64* __restrict__ b_bitmaps, const long long* __restrict__ b_offsets,
    const T* __restrict__ b_values,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const long long* __restrict__ c_first, const long long* __restrict__ c_last,
    long long last_shift, const u64* __restrict__ c_bitmaps,
    const long long* __restrict__ c_offsets, long long c_nblocks,
    const long long* __restrict__ warp_block, long long c_nnz,
    T* __restrict__ c_values, unsigned long long* __restrict__ zero_values,
    unsigned long long* zero_flag)
{
    const long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x;
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
    c_values[v] = acc;
    const unsigned int zeros = __ballot_sync(live, is_zero(acc));
    if (zeros && lane == __ffs(live) - 1) {
        atomicAdd(zero_values, (unsigned long long)__popc(zeros));
        if (zero_flag) *zero_flag = 1ull;
    }
}
