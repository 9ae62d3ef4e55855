// multiply.cu - stage 3 of SpGEMM: the values of every output block.
//
// Each output entry C(8i + r, 8k + c) is, for the semiring S (semiring.cuh)
//     S-sum over the pairs (A(i, j), B(j, k)) of the block, in task order,
//       S-sum over t in row_bits(A(i, j), r) & col_bits(B(j, k), c), ascending,
//         S-mul(A(i, j)[r, t], B(j, k)[t, c])
// and is written straight to its final place, c_offsets[q] + value_index.
// With plus_times that is the sum of products, in scipy's order.
// The structure (c_bitmaps) is exact from the count stage, and a row only
// visits the entries (r, t) that A holds: the work follows the real
// multiplies (times the 8 predicated columns), not 8x8x8 per pair. No FMA
// (see _kernels.COMPILE_OPTIONS): each product rounds as in scipy.
//
// Arguments (csr.h style):
//   u64       a_bitmaps[a_nblocks]   - bitmaps of A
//   long long a_offsets[a_nblocks+1] - value offsets of A's blocks
//   T         a_values[a_nnz]        - values of A (not read when !S::reads_values)
//   u64       b_bitmaps[b_nblocks], long long b_offsets[b_nblocks+1], T b_values[b_nnz] - B
//   long long task_a[ntasks], task_b[ntasks] - pairs, grouped by output block
//   long long c_first[c_nblocks], c_last[c_nblocks] - tasks of output block q:
//                                      [c_first[q], c_last[q])
//   u64       c_bitmaps[c_nblocks]   - exact output bitmaps (count stage)
//   long long c_offsets[c_nblocks+1] - value offsets of the output blocks
//   long long c_nblocks              - number of output blocks
//   T         c_values[c_nnz]        - out: values of C
//   u64       c_nonzero[c_nblocks]   - out: the bits of c_bitmaps whose value is not exactly zero
//   unsigned long long zero_blocks[1] - out: incremented for each block with a zero value
//                                       (an integer count: the same on every run)
//
// Launch: 8 threads per output block (one per block row r; the 8 are
// consecutive lanes of one warp), 1-D grid of 8 * c_nblocks threads in
// blocks of BMSPARSE_MULTIPLY_THREADS. Row r of an output block accumulates
// in 8 registers (one per column) while it walks the pairs, then writes its
// values, which are contiguous in c_values.
// Work: O(8 * ntasks + 8 * (entries of A's rows met)).
// Deterministic: fixed summation order, no atomics on values (zero_blocks is
// an integer count).
// Layout: see ../_cuda/bitmap.cuh.
#include "../_cuda/bitmap.cuh"
#include "../_cuda/semiring.cuh"

#ifndef BMSPARSE_MULTIPLY_THREADS
#define BMSPARSE_MULTIPLY_THREADS 128
#endif

// 12 blocks of 128 threads per multiprocessor caps registers at 40: measured
// on an H200, 12% faster than 48 registers on the WebBase surrogate and 16%
// on the 3D 27-point matrix, despite a few spilled bytes
template <typename T, typename S>
__global__ void __launch_bounds__(BMSPARSE_MULTIPLY_THREADS, 12) bmsparse_multiply_values(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values,
    const u64* __restrict__ b_bitmaps, const long long* __restrict__ b_offsets,
    const T* __restrict__ b_values,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const long long* __restrict__ c_first, const long long* __restrict__ c_last,
    const u64* __restrict__ c_bitmaps,
    const long long* __restrict__ c_offsets, long long c_nblocks,
    T* __restrict__ c_values, u64* __restrict__ c_nonzero,
    unsigned long long* __restrict__ zero_blocks)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long q = tid >> 3;
    if (q >= c_nblocks) return;  // the 8 threads of a block leave together
    const int r = (int)(tid & 7);
    const unsigned int group = 0xffu << (threadIdx.x & 24u);
    const u64 c_bm = c_bitmaps[q];
    const unsigned int c_row = row_bits(c_bm, r);
    T acc[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[c] = S::template identity<T>();
    if (c_row) {
        for (long long p = c_first[q]; p < c_last[q]; ++p) {
            const long long ia = task_a[p];
            const u64 a_bm = a_bitmaps[ia];
            unsigned int a_row = row_bits(a_bm, r);
            if (!a_row) continue;
            const long long ib = task_b[p];
            const u64 b_bm = b_bitmaps[ib];
            if constexpr (!S::reads_values) {
                while (a_row) {
                    const unsigned int b_row = row_bits(b_bm, __ffs(a_row) - 1);
                    a_row &= a_row - 1u;
#pragma unroll
                    for (int c = 0; c < 8; ++c) {
                        if ((b_row >> c) & 1u) acc[c] = S::add(acc[c], T(1));
                    }
                }
                continue;
            }
            const T* a_val = a_values + a_offsets[ia] + value_index(a_bm, bit_of(r, 0));
            const T* b_blk = b_values + b_offsets[ib];
            while (a_row) {
                const int t = __ffs(a_row) - 1;
                a_row &= a_row - 1u;
                const T av = *a_val++;
                const unsigned int b_row = row_bits(b_bm, t);
                const T* b_val = b_blk + value_index(b_bm, bit_of(t, 0));
#pragma unroll
                for (int c = 0; c < 8; ++c) {
                    if ((b_row >> c) & 1u) acc[c] = S::add(acc[c], S::mul(av, *b_val++));
                }
            }
        }
    }
    T* out = c_values + c_offsets[q] + value_index(c_bm, bit_of(r, 0));
    unsigned int nonzero = 0;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        if ((c_row >> c) & 1u) {
            *out++ = acc[c];
            if (!is_zero(acc[c])) nonzero |= 1u << c;
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
