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
//   long long shift                  - see c_sizes
//   u64       c_bitmaps[c_nblocks]   - out: bitmap of each output block
//   long long c_sizes[c_nblocks]     - out: popcount << shift | (bitmap != 0), or the
//                                      popcount alone when shift is 0; one scan of
//                                      these gives the value offsets and which blocks
//                                      are empty (the pairs of a block can all have
//                                      empty products)
//
// bmsparse_count_masked_bitmaps takes one more argument and keeps only the
// bits a mask allows:
//   u64       c_allowed[c_nblocks]   - bits output block q may have (the mask's
//                                      bitmap, or its complement)
//
// bmsparse_count_pairs counts instead of ORing (the masked plus_pair sum,
// e.g. triangles, without materialising C):
//   u64       c_allowed[c_nblocks]   - as above
//   long long c_pairs[c_nblocks]     - out: number of (r, t, c) with A(i, j)[r, t],
//                                      B(j, k)[t, c] and bit (r, c) allowed, over
//                                      the block's pairs
//
// Launch: one thread per output block, 1-D grid.
// Work: O(ntasks) bitwise operations. Deterministic.
// Layout: see ../_cuda/bitmap.cuh.
#include "../_cuda/bitmap.cuh"

__device__ __forceinline__ u64 or_of_products(
    const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    long long first, long long last)
{
    u64 bitmap = 0;
    for (long long t = first; t < last; ++t) {
        bitmap |= bool_product(a_bitmaps[task_a[t]], b_bitmaps[task_b[t]]);
    }
    return bitmap;
}

__device__ __forceinline__ void store_bitmap(
    long long q, u64 bitmap, long long shift, u64* __restrict__ c_bitmaps,
    long long* __restrict__ c_sizes)
{
    c_bitmaps[q] = bitmap;
    const long long size = __popcll(bitmap);
    c_sizes[q] = shift ? (size << shift) | (bitmap != 0ull) : size;
}

extern "C" __global__ void bmsparse_count_bitmaps(
    const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const long long* __restrict__ c_ptr, long long c_nblocks, long long shift,
    u64* __restrict__ c_bitmaps, long long* __restrict__ c_sizes)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    const u64 bitmap = or_of_products(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr[q], c_ptr[q + 1]);
    store_bitmap(q, bitmap, shift, c_bitmaps, c_sizes);
}

extern "C" __global__ void bmsparse_count_masked_bitmaps(
    const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const long long* __restrict__ c_ptr, const u64* __restrict__ c_allowed, long long c_nblocks,
    long long shift, u64* __restrict__ c_bitmaps, long long* __restrict__ c_sizes)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    const u64 allowed = c_allowed[q];
    const u64 bitmap = allowed ? or_of_products(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr[q],
                                                c_ptr[q + 1]) & allowed
                               : 0;
    store_bitmap(q, bitmap, shift, c_bitmaps, c_sizes);
}

extern "C" __global__ void bmsparse_count_pairs(
    const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const long long* __restrict__ c_ptr, const u64* __restrict__ c_allowed, long long c_nblocks,
    long long* __restrict__ c_pairs)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    const u64 allowed = c_allowed[q];
    long long pairs = 0;
    for (long long p = c_ptr[q]; allowed && p < c_ptr[q + 1]; ++p) {
        const u64 a = a_bitmaps[task_a[p]], b = b_bitmaps[task_b[p]];
        // term t: rows r with A(r, t) times columns c with B(t, c), inside the mask
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            const u64 a_col = ((a >> t) & BMSPARSE_LOW_BITS) * 0xffull;
            const u64 b_row = ((b >> (t << 3)) & 0xffull) * BMSPARSE_LOW_BITS;
            pairs += __popcll(a_col & b_row & allowed);
        }
    }
    c_pairs[q] = pairs;
}
