// count.cu - stage 2 of SpGEMM: the exact bitmap of every output block.
//
// The bitmap of C(i, k) is the OR, over its pairs (A(i, j), B(j, k)), of the
// Boolean 8x8 products of their bitmaps (bool_product in bitmap.cuh). No
// values are read, so the structure of C is exact before any arithmetic and
// the values of C can be written straight into their final place.
//
// Arguments (csr.h style):
//   u64       a_bitmaps[a_nblocks]   - bitmaps of A
//   u64       b_bitmaps[b_nblocks]   - bitmaps of B
//   long long task_a[ntasks]         - A block of each task, grouped by output block
//   long long task_b[ntasks]         - B block of each task
//   long long c_ptr[c_nblocks + 1]   - tasks of output block q: [c_ptr[q], c_ptr[q + 1])
//   long long c_nblocks              - number of output blocks
//   u64       c_bitmaps[c_nblocks]   - out: bitmap of each output block
//   long long c_nnz[c_nblocks]       - out: popcount of each output bitmap
//   unsigned long long empty_blocks[1] - out: incremented for each empty bitmap (the
//                                      pairs of a block can all have empty products)
//
// Launch: one thread per output block, 1-D grid.
// Work: O(ntasks) bitwise operations. Deterministic (no atomics).
// Layout: see ../_cuda/bitmap.cuh.
#include "../_cuda/bitmap.cuh"

extern "C" __global__ void bmsparse_count_bitmaps(
    const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const long long* __restrict__ c_ptr, long long c_nblocks,
    u64* __restrict__ c_bitmaps, long long* __restrict__ c_nnz,
    unsigned long long* __restrict__ empty_blocks)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    u64 bitmap = 0;
    for (long long t = c_ptr[q]; t < c_ptr[q + 1]; ++t) {
        bitmap |= bool_product(a_bitmaps[task_a[t]], b_bitmaps[task_b[t]]);
    }
    c_bitmaps[q] = bitmap;
    c_nnz[q] = __popcll(bitmap);
    if (!bitmap) atomicAdd(empty_blocks, 1ull);
}
