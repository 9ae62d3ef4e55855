// lean.cu - a whole small product in two launches and no sync between: the
// dense accumulator's count and blocks passes (rowdense.cuh), then the
// multiply (multiply.cuh) and, when values cancel, the compaction, each
// kernel's passes separated by grid barriers (_cuda/grid.cuh), so that the
// host launches twice and syncs once.
//
// A small product is host time (benchmarks/NOTES.md, session 13): four
// launches of 8-19 us and two syncs against a few microseconds of GPU time
// each. The stages are the ones of rowdense.cu and multiply.cu, run by the
// same device functions, so C is bit for bit the one of the dense path.
//
// bmsparse_lean_blocks, with the grid's thread blocks over the units (block
// rows of A) as in rowdense.cu:
//   1. count: each unit's output blocks, values and useful pairs (`sizes`);
//   2. scan: an exclusive scan of `sizes` (`scan`) gives C's size; when C
//      does not fit in `out`, the kernel reports the bytes it needs and ends;
//   3. blocks: C's keys, bitmaps, offsets, pair pointers and pairs.
// bmsparse_lean_values, over the values (C's size read from `scan`):
//   4. multiply: a thread per value, counting values that are exactly zero;
//   5. compact (with drop_zeros, when a value is zero): the bits whose value
//      is not zero, a scan of their counts, then the kept blocks and values
//      written to a second packed region.
//
// Arguments (csr.h style):
//   RD_ARGS                              - A's and B's blocks, as rowdense.cu
//                                          (parts 1: a unit is a block row)
//   u64       a_bitmaps[a_nblocks]; long long a_offsets[a_nblocks + 1];
//   T         a_values[a_nnz]            - A (values null when the semiring
//                                          reads none); likewise B
//   long long value_size                 - sizeof(T)
//   long long drop_zeros                 - 1: drop values that are exactly zero
//   long long capacity                   - bytes of `out`, a multiple of 16
//   char      out[capacity]              - the workspace: C packed at its start
//                                          (see lean_values_at), then the pairs
//                                          (c_ptr, task_a, task_b, warp_block),
//                                          then the compacted C; `sizes` and
//                                          `scan` (6 * nbrows + 1 words) at its end
//   u64       work[4 + grid]             - zeroed once, before the first launch:
//                                          the barrier (it ends every launch as it
//                                          began), the zero count, the thread
//                                          blocks' sums
//   long long report[4]                  - out, a word of host memory each: 0 or
//                                          the bytes `out` needs, C's blocks, its
//                                          values, and the byte offset in `out` of
//                                          the packed C
//   long long mask_words                 - blocks only: 0, or the words per column
//                                          of rowdense.cu's masked blocks kernel
//                                          (its masks after the accumulator)
// Packed C at offset o: keys[c] at o, bitmaps[c] at o + 8 c, offsets[c + 1]
// at o + 16 c, values[v] at o + lean_values_at(c) (16-byte aligned, for
// complex values): the layout of _kernels.alloc_blocks, so one copy moves it.
// Launch: both cooperative, BMSPARSE_ROWDENSE_THREADS threads per thread
// block, no more thread blocks than are resident; blocks: at most one per
// unit, and (12 + 4 * mask_words) * span bytes of dynamic shared memory.
// Work: that of rowdense.cu and multiply.cu, plus O(c_nblocks + nnz) to
// compact; two grid barriers in the first kernel, one or three in the second
// when zeros are dropped.
// Deterministic: as rowdense.cu and multiply.cu; compaction only moves values.
// Layout: see ../_cuda/bitmap.cuh.
#include "../_cuda/grid.cuh"
#include "compact.cuh"
#include "multiply.cuh"
#include "rowdense.cuh"

__device__ __forceinline__ long long lean_align(long long bytes) { return (bytes + 15) & ~15ll; }

// where a packed C of c blocks starts its values, and its size
__device__ __forceinline__ long long lean_values_at(long long c) { return lean_align(24 * c + 8); }

__device__ __forceinline__ long long lean_packed(long long c, long long v, long long value_size)
{
    return lean_align(lean_values_at(c) + v * value_size);
}

// pass 5: C (c blocks, v values, packed at `out`) less its values that are
// exactly zero and the blocks left empty, packed at `out + at`; reports it.
// `scratch` holds 3 c + 1 words. Not inlined, so that its registers do not
// count against the multiply's (it spilled into the multiply's loop)
template <typename T>
__device__ __noinline__ void lean_compact(char* out, long long c, long long at,
                                          long long* scratch, u64* bar, u64* block_sums,
                                          u64* warp_sums, long long* report)
{
    const u64* c_keys = (const u64*)out;
    const u64* c_bitmaps = c_keys + c;
    const long long* c_offsets = (const long long*)(c_bitmaps + c);
    const T* c_values = (const T*)(out + lean_values_at(c));
    // per block: its kept bits, and kept values << 32 | (any kept), which
    // scan into compact.cu's packed offsets (shift 32)
    long long* keep_sizes = scratch;
    long long* keep_scan = keep_sizes + c;
    u64* keep_bits = (u64*)(keep_scan + c + 1);
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long nthreads = gridDim.x * (long long)blockDim.x;
    for (long long q = tid; q < c; q += nthreads) {
        const u64 keep =
            nonzero_bits<true>(__ldcg(c_bitmaps + q), c_values + __ldcg(c_offsets + q));
        keep_bits[q] = keep;
        keep_sizes[q] = ((long long)__popcll(keep) << 32) | (long long)(keep != 0ull);
    }
    grid_barrier(bar);
    grid_exclusive_scan(keep_sizes, c, keep_scan, bar, block_sums, warp_sums);
    grid_barrier(bar);
    const long long kept = __ldcg(keep_scan + c);
    const long long kc = kept & 0xffffffffll, kv = kept >> 32;
    u64* k_keys = (u64*)(out + at);
    long long* k_offsets = (long long*)(k_keys + 2 * kc);
    T* k_values = (T*)(out + at + lean_values_at(kc));
    for (long long q = tid; q < c; q += nthreads) {
        keep_block<true>(q, c_keys, keep_bits, keep_scan, nullptr, 32, nullptr, c, k_keys,
                         k_keys + kc, k_offsets, nullptr, nullptr);
        copy_kept<true>(__ldcg(c_bitmaps + q), __ldcg(keep_bits + q),
                        c_values + __ldcg(c_offsets + q), k_values + (__ldcg(keep_scan + q) >> 32));
    }
    if (tid == 0) {
        report[1] = kc;
        report[2] = kv;
        report[3] = at;
    }
}

// where C and its pairs lie in `out` (the same in both kernels): from the
// scan of the units' sizes, C's blocks c, values v and pairs p
struct LeanLayout {
    long long c, v, p;
    long long packed;     // C packed at 0, up to here
    long long pairs_end;  // then c_ptr, task_a, task_b, warp_block, up to here
    long long need;       // bytes of `out` the product needs
};

__device__ __forceinline__ LeanLayout lean_layout(const long long* scan, long long n,
                                                  long long value_size, long long drop_zeros)
{
    LeanLayout l;
    l.c = __ldcg(scan + n);
    l.v = __ldcg(scan + 2 * n) - l.c;
    l.p = __ldcg(scan + 3 * n) - __ldcg(scan + 2 * n);
    l.packed = lean_packed(l.c, l.v, value_size);
    l.pairs_end = lean_align(l.packed + 8 * (l.c + 1 + 2 * l.p + ((l.v + 31) >> 5)));
    l.need = l.pairs_end + (drop_zeros ? l.packed : 0) + 8 * (6 * n + 1);
    return l;
}

// the count's sizes and their scan, at the end of `out`
__device__ __forceinline__ long long* lean_sizes(char* out, long long capacity, long long n)
{
    return (long long*)(out + capacity) - (6 * n + 1);
}

// passes 1-3 (value_size: bytes of one value of C)
extern "C" __global__ void __launch_bounds__(BMSPARSE_ROWDENSE_THREADS, RD_MIN_BLOCKS)
bmsparse_lean_blocks(RD_ARGS, long long value_size, long long drop_zeros, long long capacity,
                     char* out, u64* work, long long* report, long long mask_words)
{
    __shared__ u64 warp_sums[32];
    const long long n = nbrows * parts;
    long long* sizes = lean_sizes(out, capacity, n);
    long long* scan = sizes + 3 * n;
    rd_count_units<false>(a_keys, a_bitmaps, a_ptr, nbrows, parts, span, b_keys, b_bitmaps,
                          b_ptr, sizes);
    grid_barrier(work);
    grid_exclusive_scan(sizes, 3 * n, scan, work, work + 4, warp_sums);
    grid_barrier(work);
    const LeanLayout l = lean_layout(scan, n, value_size, drop_zeros);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        work[2] = 0;  // the zero count, for bmsparse_lean_values
        report[0] = l.need > capacity ? l.need : 0;
        report[1] = l.c;
        report[2] = l.v;
        report[3] = 0;
    }
    if (l.need > capacity) return;  // every thread block alike
    u64* c_keys = (u64*)out;
    long long* c_ptr = (long long*)(out + l.packed);
    // pairs ranked by masks where they fit (rowdense.cu's masked blocks kernel)
#define LEAN_BLOCKS_ARGS                                                                \
    a_keys, a_bitmaps, a_ptr, nbrows, parts, span, b_keys, b_bitmaps, b_ptr, scan, 1,   \
        c_keys, c_keys + l.c, (long long*)(c_keys + 2 * l.c), c_ptr, c_ptr + l.c + 1,   \
        c_ptr + l.c + 1 + l.p, c_ptr + l.c + 1 + 2 * l.p, mask_words
    if (mask_words)
        rd_blocks_units<false, true>(LEAN_BLOCKS_ARGS);
    else
        rd_blocks_units<false, false>(LEAN_BLOCKS_ARGS);
#undef LEAN_BLOCKS_ARGS
}

// passes 4-5, after bmsparse_lean_blocks on the same `out`: a kernel of its
// own, since the multiply wants many threads in flight (a thread per value
// walks its block's pairs) and the passes above hold 80 registers a thread.
// A small product's values are one or two waves of threads, so the kernel
// takes as long as its longest thread's chain of loads: the multiply loads
// each pair ahead (multiply.cuh, AHEAD), with the registers of
// BMSPARSE_LEAN_VALUES_BLOCKS thread blocks per SM. At 8 per SM (32
// registers, the grid then twice as large) without loading ahead, the
// kernel took 1.0-1.7x as long on the corpus (benchmarks/NOTES.md, session 24)
#ifndef BMSPARSE_LEAN_VALUES_BLOCKS
#define BMSPARSE_LEAN_VALUES_BLOCKS 4
#endif
#ifndef BMSPARSE_LEAN_AHEAD
#define BMSPARSE_LEAN_AHEAD true
#endif
template <typename T, typename S>
__global__ void __launch_bounds__(BMSPARSE_ROWDENSE_THREADS, BMSPARSE_LEAN_VALUES_BLOCKS)
bmsparse_lean_values(const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
                     const T* __restrict__ a_values, const u64* __restrict__ b_bitmaps,
                     const long long* __restrict__ b_offsets, const T* __restrict__ b_values,
                     long long nbrows, long long drop_zeros, long long capacity, char* out,
                     u64* work, long long* report)
{
    __shared__ u64 warp_sums[32];
    unsigned long long* zeros = work + 2;
    const long long* scan = lean_sizes(out, capacity, nbrows) + 3 * nbrows;
    const LeanLayout l = lean_layout(scan, nbrows, sizeof(T), drop_zeros);
    if (l.need > capacity) return;
    const u64* c_bitmaps = (const u64*)out + l.c;
    const long long* c_offsets = (const long long*)out + 2 * l.c;
    T* c_values = (T*)(out + lean_values_at(l.c));
    long long* c_ptr = (long long*)(out + l.packed);
    const long long* task_a = c_ptr + l.c + 1;
    const long long* task_b = task_a + l.p;
    // a thread block's threads take the same steps, so warps stay whole; the
    // arithmetic is 32-bit (multiply.cuh): operands of at most 32K blocks
    // and a C within the workspace keep every index far below 2^31
    const int nthreads = gridDim.x * blockDim.x;
    for (int first = blockIdx.x * blockDim.x; first < l.v; first += nthreads)
        multiply_value<T, S, int, BitmapOrder<T>, PairsByIndex, BMSPARSE_LEAN_AHEAD>(
            first + (int)threadIdx.x,
            PairsByIndex{a_bitmaps, a_offsets, b_bitmaps, b_offsets, task_a, task_b}, a_values,
            b_values, c_ptr, c_ptr, 1, c_bitmaps, c_offsets, l.c, task_b + l.p, nullptr, l.v,
            BitmapOrder<T>{c_values}, zeros, nullptr);
    if (!drop_zeros) return;
    grid_barrier(work);
    if (__ldcg(zeros) == 0) return;
    // the pairs' memory is free again: 3 c + 1 words fit in it, since every
    // block has a pair
    lean_compact<T>(out, l.c, l.pairs_end, c_ptr, work, work + 4, warp_sums, report);
}
