// multiply.cu - stage 3 of SpGEMM: the values of every output block.
//
// Each output entry C(8i + r, 8k + c) is
//     sum over the pairs (A(i, j), B(j, k)) of the block, in task order,
//       sum over t in row_bits(A(i, j), r) & col_bits(B(j, k), c), ascending,
//         A(i, j)[r, t] * B(j, k)[t, c]
// and is written straight to its final place, c_offsets[q] + value_index.
// The structure (c_bitmaps) is exact from the count stage, so only the set
// bits of each output block are visited: the work follows the real
// multiplies, not 8x8x8 per pair.
//
// Arguments (csr.h style):
//   u64       a_bitmaps[a_nblocks]   - bitmaps of A
//   long long a_offsets[a_nblocks+1] - value offsets of A's blocks
//   T         a_values[a_nnz]        - values of A
//   u64       b_bitmaps[b_nblocks], long long b_offsets[b_nblocks+1], T b_values[b_nnz] - B
//   long long task_a[ntasks], task_b[ntasks] - pairs, grouped by output block
//   long long c_ptr[c_nblocks + 1]   - tasks of output block q
//   u64       c_bitmaps[c_nblocks]   - exact output bitmaps (count stage)
//   long long c_offsets[c_nblocks+1] - value offsets of the output blocks
//   long long c_nblocks              - number of output blocks
//   T         c_values[c_nnz]        - out: values of C
//   u64       c_nonzero[c_nblocks]   - out: the bits of c_bitmaps whose value is not exactly zero
//
// Launch: one thread per output block, 1-D grid.
// Work: O(multiplies). Deterministic: fixed summation order, no atomics.
// Layout: see ../_cuda/bitmap.cuh.
#include "../_cuda/bitmap.cuh"

template <typename T>
__global__ void bmsparse_multiply_values(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values,
    const u64* __restrict__ b_bitmaps, const long long* __restrict__ b_offsets,
    const T* __restrict__ b_values,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const long long* __restrict__ c_ptr, const u64* __restrict__ c_bitmaps,
    const long long* __restrict__ c_offsets, long long c_nblocks,
    T* __restrict__ c_values, u64* __restrict__ c_nonzero)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    const long long first = c_ptr[q], last = c_ptr[q + 1];
    long long out = c_offsets[q];
    u64 nonzero = 0;
    for (u64 rest = c_bitmaps[q]; rest; rest &= rest - 1ull) {
        const int bit = __ffsll((long long)rest) - 1;
        const int r = bit >> 3, c = bit & 7;
        T acc = T(0);
        for (long long p = first; p < last; ++p) {
            const long long ia = task_a[p], ib = task_b[p];
            const u64 a_bm = a_bitmaps[ia], b_bm = b_bitmaps[ib];
            unsigned int inner = row_bits(a_bm, r) & col_bits(b_bm, c);
            if (!inner) continue;
            const T* a_row = a_values + a_offsets[ia];
            const T* b_blk = b_values + b_offsets[ib];
            while (inner) {
                const int t = __ffs(inner) - 1;
                inner &= inner - 1u;
                acc += a_row[value_index(a_bm, bit_of(r, t))] * b_blk[value_index(b_bm, bit_of(t, c))];
            }
        }
        if (!is_zero(acc)) nonzero |= 1ull << bit;
        c_values[out++] = acc;
    }
    c_nonzero[q] = nonzero;
}
