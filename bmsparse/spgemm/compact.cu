// compact.cu - stage 4 of SpGEMM: drop output entries that summed to exactly zero.
//
// Entries whose bit is set in c_bitmaps but not in c_nonzero are removed; the
// others keep their order. Runs only when the multiply stage found a zero:
// bmsparse_compact_nonzero_bits finds the bits to keep and sizes them, a
// scan places them, and bmsparse_compact_values writes the kept blocks and
// values. bmsparse_compact_blocks alone also drops the blocks the count
// stage left empty (and carries their task runs); on the task list's padded
// arrays, bmsparse_compact_scan_blocks does so with the count's scan in the
// same launch, and bmsparse_compact_settle then gives C's blocks their exact
// size and writes the multiply's warp words (compact.drop_empty).
//
// Launch: one thread per output block, 1-D grid (the scan_blocks kernel: a
// thread block per scan tile).
// Work: O(nnz). Deterministic.
// Layout: see ../_cuda/bitmap.cuh.
#include "compact.cuh"
#include "../_cuda/scan.cuh"

// The bits of each block whose value is not exactly zero (when the multiply
// stage counted zeros; it does not keep per-bit results), and the items of
// the packed scan that sizes the result (count.cu's c_sizes).
//   u64       c_bitmaps[c_nblocks]; long long c_offsets[c_nblocks + 1]; T c_values[c_nnz]
//   long long c_nblocks, shift
//   u64       c_nonzero[c_nblocks]  - out: subset of c_bitmaps
//   long long sizes[c_nblocks]      - out: popcount(c_nonzero) << shift | (c_nonzero != 0),
//                                     or the popcount alone when shift is 0
template <typename T>
__global__ void bmsparse_compact_nonzero_bits(
    const u64* __restrict__ c_bitmaps, const long long* __restrict__ c_offsets,
    const T* __restrict__ c_values, long long c_nblocks, long long shift,
    u64* __restrict__ c_nonzero, long long* __restrict__ sizes)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    const u64 keep = nonzero_bits<false>(c_bitmaps[q], c_values + c_offsets[q]);
    c_nonzero[q] = keep;
    const long long size = __popcll(keep);
    sizes[q] = shift ? (size << shift) | (long long)(keep != 0ull) : size;
}

// Keep the blocks whose new bitmap is not empty, in order.
//   u64       c_keys[c_nblocks], new_bitmaps[c_nblocks]
//   long long new_offsets[c_nblocks + 1] - value offsets with the dropped values gone;
//                                        with shift, the count stage's packed scan:
//                                        offset << shift | non-empty blocks before
//   long long rank[c_nblocks]            - inclusive scan of (new_bitmaps != 0), or
//                                        null with shift
//   long long shift
//   long long c_ptr[c_nblocks + 1]       - task runs of the blocks, or null
//   u64       out_keys[kept], out_bitmaps[kept]; long long out_offsets[kept + 1] - out
//   long long out_first[kept], out_last[kept] - out: the kept blocks' task runs
//                                        (unless c_ptr is null)
//   long long warp_block[ceil(nnz / 32)] - out, or null: the kept block holding
//                                        value 32 * w (multiply.cu's
//                                        bmsparse_multiply_warp_blocks, one launch
//                                        less before the multiply)
//   unsigned long long warp_starts[ceil(nnz / 32)] - out (zeroed beforehand), or
//                                        null: mark_warp_starts' words
// Launch: one thread per block, 1-D grid. Work: O(c_nblocks).
extern "C" __global__ void bmsparse_compact_blocks(
    const u64* __restrict__ c_keys, const u64* __restrict__ new_bitmaps,
    const long long* __restrict__ new_offsets, const long long* __restrict__ rank,
    long long shift, const long long* __restrict__ c_ptr, long long c_nblocks,
    u64* __restrict__ out_keys,
    u64* __restrict__ out_bitmaps, long long* __restrict__ out_offsets,
    long long* __restrict__ out_first, long long* __restrict__ out_last,
    long long* __restrict__ warp_block, unsigned long long* __restrict__ warp_starts)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    const long long d = keep_block<false>(q, c_keys, new_bitmaps, new_offsets, rank, shift, c_ptr,
                                          c_nblocks, out_keys, out_bitmaps, out_offsets,
                                          out_first, out_last);
    if (warp_block && d >= 0)
        mark_warp_starts(warp_block, warp_starts, d, new_offsets[q] >> shift,
                         __popcll(new_bitmaps[q]));
}

// bmsparse_compact_blocks with the count stage's scan in the same launch: the
// packed scan of `sizes` (count.cu's c_sizes, one look-back pass of
// ../_cuda/scan.cuh) gives each kept block its place and value offset, which
// the tile writes at once (the scan is never stored: a launch, the scan's
// stores and the compaction's reloads of it and of every bitmap less).
//   long long sizes[c_nblocks]           - packed scan items (shift > 0): a block
//                                        is kept where the item's bit 0 is set
//   long long c_nblocks, shift
//   u64       c_keys[c_nblocks], c_bitmaps[c_nblocks]; long long c_ptr[c_nblocks + 1]
//   long long state[1 + 3 * ntiles], ntiles - zeroed look-back state (scan.cuh)
//   out_keys .. out_last                 - as bmsparse_compact_blocks' (at least
//                                        kept long; out_offsets kept + 1)
// Launch: ntiles thread blocks of BMSPARSE_SCAN_THREADS threads.
extern "C" __global__ void __launch_bounds__(BMSPARSE_SCAN_THREADS) bmsparse_compact_scan_blocks(
    const long long* __restrict__ sizes, long long c_nblocks, long long shift,
    const u64* __restrict__ c_keys, const u64* __restrict__ c_bitmaps,
    const long long* __restrict__ c_ptr, long long* state, long long ntiles,
    u64* __restrict__ out_keys, u64* __restrict__ out_bitmaps,
    long long* __restrict__ out_offsets, long long* __restrict__ out_first,
    long long* __restrict__ out_last)
{
    __shared__ long long items[BMSPARSE_SCAN_SLOTS];
    const long long tile = scan_ticket(state);
    const long long base = tile * BMSPARSE_SCAN_TILE;
    long long own[BMSPARSE_SCAN_ITEMS];  // the items at this thread's coalesced places
#pragma unroll
    for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {
        const long long i = base + k * BMSPARSE_SCAN_THREADS + threadIdx.x;
        own[k] = i < c_nblocks ? sizes[i] : 0;
        items[scan_slot(k * BMSPARSE_SCAN_THREADS + threadIdx.x)] = own[k];
    }
    scan_tile_items(items, tile, ntiles, state, [](int, long long) {});
    const long long low = (1ll << shift) - 1;
#pragma unroll
    for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {
        const long long i = base + k * BMSPARSE_SCAN_THREADS + threadIdx.x;
        if (i >= c_nblocks) continue;
        const long long inclusive = items[scan_slot(k * BMSPARSE_SCAN_THREADS + threadIdx.x)];
        if (i == c_nblocks - 1) out_offsets[inclusive & low] = inclusive >> shift;
        if (!(own[k] & 1)) continue;  // an empty block
        const long long before = inclusive - own[k];
        put_kept<false>(before & low, c_keys[i], c_bitmaps[i], before >> shift, c_ptr + i,
                        out_keys, out_bitmaps, out_offsets, out_first, out_last);
    }
}

// C's blocks where bmsparse_compact_scan_blocks wrote them at the front of
// padded scratch (queued before the sync that reads how many it keeps: see
// compact.drop_empty), and the multiply's warp words.
//   u64       t_keys[kept], t_bitmaps[kept]; long long t_offsets[kept + 1] - the
//                                        kept blocks in the scratch
//   long long kept
//   u64       out_keys[kept], out_bitmaps[kept]; long long out_offsets[kept + 1] -
//                                        out, or null: the scratch stays C's
//   long long warp_block[ceil(nnz / 32)] - out: see bmsparse_compact_blocks
//   unsigned long long warp_starts[ceil(nnz / 32)] - out, zeroed beforehand
// Launch: kept + 1 threads, 1-D grid. Work: O(kept + nnz / 32).
extern "C" __global__ void bmsparse_compact_settle(
    const u64* __restrict__ t_keys, const u64* __restrict__ t_bitmaps,
    const long long* __restrict__ t_offsets, long long kept, u64* __restrict__ out_keys,
    u64* __restrict__ out_bitmaps, long long* __restrict__ out_offsets,
    long long* __restrict__ warp_block, unsigned long long* __restrict__ warp_starts)
{
    const long long d = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (d > kept) return;
    const long long v = t_offsets[d];
    if (out_offsets) out_offsets[d] = v;
    if (d == kept) return;
    const u64 bitmap = t_bitmaps[d];
    if (out_keys) {
        out_keys[d] = t_keys[d];
        out_bitmaps[d] = bitmap;
    }
    mark_warp_starts(warp_block, warp_starts, d, v, __popcll(bitmap));
}

// bmsparse_compact_blocks (no task runs) and the kept values, in one pass:
// the arguments are those of both kernels, plus
//   u64       c_bitmaps[c_nblocks]       - bitmaps before compaction (the new ones
//                                        are c_nonzero)
//   long long c_offsets[c_nblocks + 1]   - value offsets before compaction
//   T         c_values[c_nnz]            - values before compaction
//   T         new_values[new_nnz]        - out: the kept values
template <typename T>
__global__ void bmsparse_compact_values(
    const u64* __restrict__ c_keys, const u64* __restrict__ c_bitmaps,
    const u64* __restrict__ c_nonzero, const long long* __restrict__ c_offsets,
    const long long* __restrict__ new_offsets, const long long* __restrict__ rank,
    long long shift, const T* __restrict__ c_values, long long c_nblocks,
    u64* __restrict__ out_keys, u64* __restrict__ out_bitmaps,
    long long* __restrict__ out_offsets, T* __restrict__ new_values)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= c_nblocks) return;
    keep_block<false>(q, c_keys, c_nonzero, new_offsets, rank, shift, nullptr, c_nblocks, out_keys,
               out_bitmaps, out_offsets, nullptr, nullptr);
    copy_kept<false>(c_bitmaps[q], c_nonzero[q], c_values + c_offsets[q],
                     new_values + (new_offsets[q] >> shift));
}
