// slices.cu - the memory plan of a sliced SpGEMM: what each A block costs.
//
// Block A(i, j) pairs with the B blocks of B's block row j, a run [lo, lo +
// count) of B's blocks. It is charged bytes_per_task for each pair (the task
// list and the output block arrays) and value_bytes for each scalar multiply
// it takes part in: column c of A(i, j) times the non-zeros of row c of each
// B(j, k). The multiplies bound the output non-zeros from above.
//
// Arguments (csr.h style):
//   u64       a_bitmaps[a_nblocks]   - bitmaps of A
//   long long a_nblocks
//   u64       b_bitmaps[b_nblocks]   - bitmaps of B
//   long long lo[a_nblocks]          - first B block of each A block's run
//   long long counts[a_nblocks]      - length of the run (number of tasks)
//   long long bytes_per_task
//   long long value_bytes            - 0 skips the multiplies (Boolean products)
//   long long need[a_nblocks]        - out: bytes charged to each A block
//
// Launch: one thread per A block, 1-D grid.
// Work: O(ntasks). Deterministic.
// Layout: see ../_cuda/bitmap.cuh.
#include "../_cuda/bitmap.cuh"

extern "C" __global__ void bmsparse_slices_block_needs(
    const u64* __restrict__ a_bitmaps, long long a_nblocks, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ lo, const long long* __restrict__ counts,
    long long bytes_per_task, long long value_bytes, long long* __restrict__ need)
{
    long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (x >= a_nblocks) return;
    long long total = counts[x] * bytes_per_task;
    if (value_bytes) {
        const u64 a = a_bitmaps[x];
        int column[8];
        #pragma unroll
        for (int c = 0; c < 8; ++c) column[c] = __popcll((a >> c) & BMSPARSE_LOW_BITS);
        long long multiplies = 0;
        for (long long y = lo[x], end = lo[x] + counts[x]; y < end; ++y) {
            const u64 b = b_bitmaps[y];
            #pragma unroll
            for (int c = 0; c < 8; ++c) {
                multiplies += column[c] * __popcll((b >> (8 * c)) & 0xFFull);
            }
        }
        total += multiplies * value_bytes;
    }
    need[x] = total;
}
