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
//   long long a_offsets[a_nblocks + 1], b_offsets[b_nblocks + 1] - value
//                                      offsets of A's and B's blocks, or null
//   u64       pair_bitmaps[ntasks][2], int pair_offsets[ntasks][2] - out, or
//                                      null (then the offsets are null too): each
//                                      task's (A's, B's) bitmap and offset (below
//                                      2^31, see count.records_fit), the multiply's
//                                      PairRecords (multiply.cuh), so that the
//                                      multiply reads a pair in one step; not
//                                      written for a block the mask leaves empty
//   long long listed[1]              - (bmsparse_count_bitmaps) null, or the
//                                      number of output blocks, on the device and
//                                      at most c_nblocks (tasks.tasks(sized=False)):
//                                      the blocks past it are written empty
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

// where or_of_products writes the pairs' records (all null: nowhere)
struct RecordsOut {
    const long long* __restrict__ a_offsets;
    const long long* __restrict__ b_offsets;
    ulonglong2* __restrict__ bitmaps;
    int2* __restrict__ offsets;
};

// the OR of the pairs' Boolean products, and with `records` the pairs' blocks
// (written for every task: a second pass over the tasks of non-empty blocks
// only took the count 130 -> 159 us on the surrogate)
__device__ __forceinline__ u64 or_of_products(
    const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    long long first, long long last, const RecordsOut& records = {})
{
    u64 bitmap = 0;
    for (long long t = first; t < last; ++t) {
        const long long ia = task_a[t], ib = task_b[t];
        const u64 a = a_bitmaps[ia], b = b_bitmaps[ib];
        bitmap |= bool_product(a, b);
        if (records.bitmaps) {
            records.bitmaps[t] = make_ulonglong2(a, b);
            records.offsets[t] =
                make_int2((int)records.a_offsets[ia], (int)records.b_offsets[ib]);
        }
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
    u64* __restrict__ c_bitmaps, long long* __restrict__ c_sizes,
    const long long* __restrict__ a_offsets, const long long* __restrict__ b_offsets,
    ulonglong2* __restrict__ pair_bitmaps, int2* __restrict__ pair_offsets,
    const long long* __restrict__ listed)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    if (listed && q >= *listed) {  // past the list's blocks: empty, size 0
        store_bitmap(q, 0ull, shift, c_bitmaps, c_sizes);
        return;
    }
    const u64 bitmap = or_of_products(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr[q], c_ptr[q + 1],
                                      {a_offsets, b_offsets, pair_bitmaps, pair_offsets});
    store_bitmap(q, bitmap, shift, c_bitmaps, c_sizes);
}

extern "C" __global__ void bmsparse_count_masked_bitmaps(
    const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const long long* __restrict__ c_ptr, const u64* __restrict__ c_allowed, long long c_nblocks,
    long long shift, u64* __restrict__ c_bitmaps, long long* __restrict__ c_sizes,
    const long long* __restrict__ a_offsets, const long long* __restrict__ b_offsets,
    ulonglong2* __restrict__ pair_bitmaps, int2* __restrict__ pair_offsets)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    const u64 allowed = c_allowed[q];
    // a block the mask leaves empty is dropped: its records are never read
    const u64 bitmap = allowed ? or_of_products(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr[q],
                                                c_ptr[q + 1], {a_offsets, b_offsets,
                                                               pair_bitmaps, pair_offsets})
                                     & allowed
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
