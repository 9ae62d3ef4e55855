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
//   u64       pair_bitmaps[ntasks][2], pair_columns[ntasks][2] - out, or
//                                      null (then the offsets are null too): each
//                                      task's (A's, B's) bitmap, then B's bitmap
//                                      transposed and the two offsets as int[2]
//                                      (below 2^31, see count.records_fit), the multiply's
//                                      PairRecords (multiply.cuh), so that the
//                                      multiply reads a pair in one step; not
//                                      written for a block the mask leaves empty
//   long long listed[1]              - (bmsparse_count_bitmaps) null, or the
//                                      number of output blocks, on the device and
//                                      at most c_nblocks (tasks.tasks(sized=False)):
//                                      the blocks past it are written empty
//
// bmsparse_count_tasks: the same, by tasks instead of by output blocks (one
// thread per output block waits on its block's pairs one after another: the
// surrogate's longest has 155). The arguments of bmsparse_count_bitmaps and
//   int       task_block[ntasks]     - output block of each task (tasks.cu's
//                                      run_heads)
//   long long ntasks
//   long long total[1]               - null, or zeroed: adds the sum of the
//                                      c_sizes written (the scan's total), so
//                                      that the host can read it before the
//                                      scan has run
// Launch: one thread per task (at least c_nblocks), blocks of a multiple of
// 32. A task's thread writes its record; the OR of a block's products is
// gathered over the warp's lanes by shuffles, with the block's tasks past
// the warp (c_ptr), and the block's first task writes its bitmap and size.
// Surrogate (H100): 120 -> 85 us (benchmarks/NOTES.md, session 29).
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
#include "../_cuda/group.cuh"

// where task_product writes the pairs' records (all null: nowhere)
struct RecordsOut {
    const long long* __restrict__ a_offsets;
    const long long* __restrict__ b_offsets;
    ulonglong2* __restrict__ bitmaps;
    ulonglong2* __restrict__ columns;
};

// the Boolean product of task t's blocks, writing the task's record where
// `records` says (both count kernels)
__device__ __forceinline__ u64 task_product(
    long long t, const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const RecordsOut& records)
{
    const long long ia = task_a[t], ib = task_b[t];
    const u64 a = a_bitmaps[ia], b = b_bitmaps[ib];
    if (records.bitmaps) {
        records.bitmaps[t] = make_ulonglong2(a, b);
        records.columns[t] = make_ulonglong2(
            transpose_bitmap(b), (u64)(unsigned int)records.a_offsets[ia]
                                     | (u64)(unsigned int)records.b_offsets[ib] << 32);
    }
    return bool_product(a, b);
}

// the OR of the pairs' Boolean products, and with `records` the pairs' blocks
// (written for every task: a second pass over the tasks of non-empty blocks
// only took the count 130 -> 159 us on the surrogate)
__device__ __forceinline__ u64 or_of_products(
    const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    long long first, long long last, const RecordsOut& records = {})
{
    u64 bitmap = 0;
    for (long long t = first; t < last; ++t)
        bitmap |= task_product(t, a_bitmaps, b_bitmaps, task_a, task_b, records);
    return bitmap;
}

// writes output block q; returns its scan item
__device__ __forceinline__ long long store_bitmap(
    long long q, u64 bitmap, long long shift, u64* __restrict__ c_bitmaps,
    long long* __restrict__ c_sizes)
{
    c_bitmaps[q] = bitmap;
    const long long size = __popcll(bitmap);
    return c_sizes[q] = shift ? (size << shift) | (bitmap != 0ull) : size;
}

// The sum of the scan items this thread block wrote, added to *total with
// one atomic per thread block (the sum of packed items packs the sums: see
// count.pack_shift). Called by every thread after init_block_total; no
// barrier at the end, where a warp that ORs a hub's tasks would hold the
// others: the last warp to arrive adds the block's sum.
struct BlockTotal {
    unsigned long long sum;
    unsigned int warps;
};

__device__ __forceinline__ void init_block_total(BlockTotal& block)
{
    if (threadIdx.x == 0) block = {0ull, 0u};
    __syncthreads();
}

__device__ __forceinline__ void add_block_total(long long item, BlockTotal& block,
                                                long long* __restrict__ total)
{
    const unsigned long long v = group_reduce<32>(
        (unsigned long long)item,
        [](unsigned long long x, unsigned long long y) { return x + y; });
    if ((threadIdx.x & 31u) == 0) {
        atomicAdd(&block.sum, v);
        __threadfence_block();  // the sum before the count of warps
        if (atomicAdd(&block.warps, 1u) == blockDim.x / 32 - 1)
            atomicAdd((unsigned long long*)total, atomicAdd(&block.sum, 0ull));
    }
}

extern "C" __global__ void bmsparse_count_bitmaps(
    const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const long long* __restrict__ c_ptr, long long c_nblocks, long long shift,
    u64* __restrict__ c_bitmaps, long long* __restrict__ c_sizes,
    const long long* __restrict__ a_offsets, const long long* __restrict__ b_offsets,
    ulonglong2* __restrict__ pair_bitmaps, ulonglong2* __restrict__ pair_columns,
    const long long* __restrict__ listed)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    if (listed && q >= *listed) {  // past the list's blocks: empty, size 0
        store_bitmap(q, 0ull, shift, c_bitmaps, c_sizes);
        return;
    }
    const u64 bitmap = or_of_products(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr[q], c_ptr[q + 1],
                                      {a_offsets, b_offsets, pair_bitmaps, pair_columns});
    store_bitmap(q, bitmap, shift, c_bitmaps, c_sizes);
}

// Task t of bmsparse_count_tasks, for a whole warp of 32 consecutive tasks
// (t past ntasks: none): writes its record; returns whether it is its
// block's first task, and then its block q and the block's bitmap.
__device__ __forceinline__ bool count_task(
    long long t, const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const int* __restrict__ task_block, long long ntasks, const long long* __restrict__ c_ptr,
    const RecordsOut& records, int& q, u64& bitmap)
{
    const int lane = (int)(threadIdx.x & 31u);
    const bool in = t < ntasks;
    q = -1;
    u64 product = 0;
    if (in) {
        q = task_block[t];
        product = task_product(t, a_bitmaps, b_bitmaps, task_a, task_b, records);
    }
    // the products of this task and the block's next tasks in the warp (a
    // block's tasks are consecutive: the lane d on holds the OR of
    // [lane + d, lane + 2d) of its block, which is this lane's block if q is)
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const u64 next = __shfl_down_sync(0xffffffffu, product, d);
        const int next_q = __shfl_down_sync(0xffffffffu, q, d);
        if (lane + d < 32 && next_q == q) product |= next;
    }
    const int before = __shfl_up_sync(0xffffffffu, q, 1);
    const bool first = in && (lane ? before != q : t == 0 || task_block[t - 1] != q);
    // The warp's last block may go on past the warp: where it starts in this
    // warp, the whole warp ORs in its tasks past the warp, 32 at a time (one
    // thread's loop over them took the surrogate's count to 104 us, against 85)
    const int last = __shfl_sync(0xffffffffu, q, 31);
    const int last_lane = __ffs(__ballot_sync(0xffffffffu, q == last)) - 1;
    if (last >= 0 && __shfl_sync(0xffffffffu, first, last_lane)) {
        u64 more = 0;
        for (long long u = t + 32, end = c_ptr[last + 1]; u < end; u += 32)
            more |= task_product(u, a_bitmaps, b_bitmaps, task_a, task_b, RecordsOut{});
        const unsigned int low = __reduce_or_sync(0xffffffffu, (unsigned int)more);
        const unsigned int high = __reduce_or_sync(0xffffffffu, (unsigned int)(more >> 32));
        if (lane == last_lane) product |= (u64)high << 32 | low;
    }
    bitmap = product;
    return first;
}

extern "C" __global__ void bmsparse_count_tasks(
    const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const int* __restrict__ task_block, long long ntasks,
    const long long* __restrict__ c_ptr, long long c_nblocks, long long shift,
    u64* __restrict__ c_bitmaps, long long* __restrict__ c_sizes,
    const long long* __restrict__ a_offsets, const long long* __restrict__ b_offsets,
    ulonglong2* __restrict__ pair_bitmaps, ulonglong2* __restrict__ pair_columns,
    const long long* __restrict__ listed, long long* __restrict__ total)
{
    __shared__ BlockTotal block;
    if (total) init_block_total(block);
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int q;
    u64 bitmap;
    long long item = 0;
    if (count_task(t, a_bitmaps, b_bitmaps, task_a, task_b, task_block, ntasks, c_ptr,
                   {a_offsets, b_offsets, pair_bitmaps, pair_columns}, q, bitmap))
        item = store_bitmap(q, bitmap, shift, c_bitmaps, c_sizes);
    // past the list's blocks (tasks.tasks(sized=False)): empty, size 0
    if (listed && t < c_nblocks && t >= *listed) store_bitmap(t, 0ull, shift, c_bitmaps, c_sizes);
    if (total) add_block_total(item, block, total);
}

extern "C" __global__ void bmsparse_count_masked_bitmaps(
    const u64* __restrict__ a_bitmaps, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ task_a, const long long* __restrict__ task_b,
    const long long* __restrict__ c_ptr, const u64* __restrict__ c_allowed, long long c_nblocks,
    long long shift, u64* __restrict__ c_bitmaps, long long* __restrict__ c_sizes,
    const long long* __restrict__ a_offsets, const long long* __restrict__ b_offsets,
    ulonglong2* __restrict__ pair_bitmaps, ulonglong2* __restrict__ pair_columns)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    const u64 allowed = c_allowed[q];
    // a block the mask leaves empty is dropped: its records are never read
    const u64 bitmap = allowed ? or_of_products(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr[q],
                                                c_ptr[q + 1], {a_offsets, b_offsets,
                                                               pair_bitmaps, pair_columns})
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
