// spmv.cu - sparse matrix times dense vector or matrix: Y = A @ X and Y = A.T @ X.
//
// Load-balanced: one thread per block of A and column j of X, whatever the
// lengths of the block rows. The blocks are taken in row-major order for
// A @ X (bmsparse_spmv_rows, a block row is a "group") and in column-major
// order for A.T @ X (bmsparse_spmv_cols, a block column is a group: keys,
// bitmaps and offsets are then copies of A's in that order, which spmv.py
// keeps with A; the values are A's, not moved). Warp w holds positions
// [warps[w], warps[w + 1]) of the ordered block list, at most 32, from lane
// 0 (the layout below: a group of at most 32 blocks lies in one warp), so
// every warp does about the same work. A lane's place in the layout is
// 32 w + lane; a group's blocks are contiguous there as in the list.
//
//   1. Each thread loads the block's 8 entries of X (those it needs) and
//      its values, 8 at a time, then walks its bits in bit order (a block's
//      values are contiguous) and sums the block's 8 partial outputs:
//        rows: acc[r] += A(8I + r, 8J + c) * X(8J + c, j)
//        cols: acc[c] += A(8I + r, 8J + c) * X(8I + r, j)
//   2. Consecutive lanes of one group form a segment. A segmented inclusive
//      scan (Hillis-Steele: for d = 1, 2, 4, 8, 16, lane l with
//      l - d >= first lane of its segment sets acc = acc(lane l - d) + acc)
//      leaves the segment's sum in its last lane. Lanes past the warp's
//      blocks stay through the shuffles with zero partials.
//   3. The last lane of a segment whose group lies inside the warp writes the
//      group's 8 outputs; one whose group (of more than 32 blocks) spans
//      warps w0..w1 (those of its first and last places in the layout)
//      writes them to the warp's carry slot 0 if the
//      segment starts at lane 0 (leading, or the whole warp), else slot 1
//      (trailing), and counts its arrival at count[w0 * k + j]. The warp of
//      the last of the w1 - w0 + 1 pieces to arrive (threadfence reduction:
//      write, __threadfence, atomicAdd) zeroes the count and sums them:
//      piece 0 is w0's slot (0 if the group starts at lane 0, else 1), piece
//      i > 0 slot 0 of warp w0 + i; lane l adds pieces l, l + 32, ... in
//      order, then lane l < d adds lane l + d's sum for d = 16, 8, 4, 2, 1
//      (skipping d >= the number of pieces: it would add zeros), and lane 0
//      writes the group's outputs.
//   4. Thread t < ngroups * k (ngroups = ceil(nout / 8)), as group g = t mod
//      ngroups of column j = t / ngroups: an empty group's outputs are 0.
//   One launch, no grid barrier: every output is written exactly once.
//
// Arguments (csr.h style):
//   u64       keys[nblocks], bitmaps[nblocks] - blocks of A, in row-major
//                                     order (cols: column-major)
//   long long offsets[nblocks]      - value offsets of those blocks in `values`
//   T         values[nnz]           - values of A, or null: every value is 1 (bool A)
//   long long ptr[ngroups + 1]      - blocks of block row (column) g:
//                                     positions [ptr[g], ptr[g + 1]) of the list
//   long long warps[nwarps + 1]     - the layout: warp w's first position
//                                     (warps[nwarps]: nblocks)
//   long long nwarps                - warps of the layout
//   T         x[...]                - X, element (i, j) at x[i * x_rs + j * x_cs]
//   long long k                     - columns of X (1 for a vector)
//   long long nout                  - rows of Y: A's rows (columns for cols)
//   T         y[...]                - out: Y, element (i, j) at y[i * y_rs + j * y_cs]
//   T         carry[nwarps * k * 2 * 8] - scratch: partial sums of the groups
//                                     spanning warps;
//                                     element r of slot s of warp w, column j at
//                                     ((w * k + j) * 2 + s) * 8 + r
//   unsigned  count[nwarps * k]     - scratch, zero on entry and on exit: pieces
//                                     arrived of the group spanning warps from
//                                     warp w0, column j, at w0 * k + j
//
// Launch: max(32 * nwarps, ngroups) * k threads, 1-D grid, warp number
// w * k + j (so the k warps reading the same blocks are neighbours);
// 16 * sizeof(T) bytes of dynamic shared memory per thread (step 1), and
// BMSPARSE_SPMV_THREADS threads per thread block (step 1 strides by it).
// The _unit kernels are the same for a vector in and out (k == 1, x_rs ==
// y_rs == 1), without the strides and k among their arguments: their index
// arithmetic folds to constants, which takes a quarter of the instructions off.
// They take (bm_spmv_blocks b, values, x, y): b holds keys, bitmaps, offsets,
// ptr, warps, nwarps, nout, carry and count (spmv.cuh).
// Work: O(k * (nnz + nblocks + nout)), with O(log 32) shuffles per block and
// O(nblocks / 1024) sequential additions per lane for a group spanning warps.
// Deterministic (the atomics only count arrivals): each output is summed in a
// fixed order that depends only on A's block structure: per block in bit
// order, then the scan tree over the block's segment of a warp (which for a
// group inside a warp depends on its number of blocks only), then the
// warps' pieces as step 3 adds them. spmv.py's NumPy twin follows the same
// order, over the same layout.
// spmv_dense.cu holds the same kernels for matrices of dense blocks (step 1
// in registers); the device functions are in spmv.cuh.
// Layout: see _cuda/bitmap.cuh.
#include "spmv.cuh"

// --- the layout of the warps (spmv.py's warp_layout) -----------------------
//
// The block list cut into warps of at most 32 positions so that a group of
// at most 32 blocks lies in one warp, greedily in list order: such a group
// that does not fit in what is left of the current warp starts the next one
// (the lanes left are idle); a longer group goes on from where the last one
// ended, over as many warps as it needs. The fill of the current warp, f in
// 1..32 (32: full, as before the first group), is a sequential scan, taken
// over chunks of BMSPARSE_SPMV_LAYOUT_CHUNK groups in three launches:
//   1. bmsparse_spmv_layout_chunks: warp c walks chunk c from each of the 32
//      fills at once (lane l from f = l + 1) and writes
//      chunks[32 c + l] = warps started << 6 | fill at the end;
//   2. bmsparse_spmv_layout_chain (one warp): from f = 32 and no warp, chunk
//      by chunk, starts[c] = warps started before chunk c << 6 | fill at its
//      start; starts[nchunks] the totals, and warps[total] = nblocks;
//   3. bmsparse_spmv_layout_warps: warp c walks chunk c again from
//      starts[c] and writes warps[i] = the first list position of warp i
//      for each warp i it starts.
// Arguments: long long ptr[ngroups + 1] (groups' list positions, as the
// SpMV kernels'), chunks[32 * nchunks], starts[nchunks + 1], warps[at most
// ngroups + ceil(nblocks / 32) + 1]. Launch: a warp per chunk (1 and 3), one
// warp (2).

#ifndef BMSPARSE_SPMV_LAYOUT_CHUNK
#define BMSPARSE_SPMV_LAYOUT_CHUNK 256
#endif

// The fill after a group of n blocks from fill f; `started` gets the warps
// it starts (0 for a group that fits).
__device__ __forceinline__ int layout_step(int f, long long n, long long& started)
{
    if (n > 32) {  // lanes from the start of the current warp, or a new one
        const long long lanes = (f == 32 ? 0 : f) + n;
        const long long more = (lanes - 1) >> 5;
        started = more + (f == 32 ? 1 : 0);
        return (int)(lanes - (more << 5));
    }
    if (n == 0 || f + n <= 32) {
        started = 0;
        return f + (int)n;
    }
    started = 1;
    return (int)n;
}

// Lane l's group of the batch of 32 from g: its size and list position (0
// and -1 past the chunk's end, g1).
__device__ __forceinline__ void layout_batch(const long long* __restrict__ ptr, long long g,
                                             long long g1, long long& n, long long& start)
{
    const long long mine = g + (threadIdx.x & 31u);
    n = 0;
    start = -1;
    if (mine < g1) {
        start = ptr[mine];
        n = ptr[mine + 1] - start;
    }
}

extern "C" __global__ void bmsparse_spmv_layout_chunks(
    const long long* __restrict__ ptr, long long ngroups, long long* __restrict__ chunks)
{
    const long long c = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const long long g0 = c * BMSPARSE_SPMV_LAYOUT_CHUNK;
    if (g0 >= ngroups) return;
    const long long g1 = min(g0 + BMSPARSE_SPMV_LAYOUT_CHUNK, ngroups);
    int f = (int)(threadIdx.x & 31u) + 1;
    long long total = 0;
    for (long long g = g0; g < g1; g += 32) {
        long long mine, unused;
        layout_batch(ptr, g, g1, mine, unused);
        for (int t = 0; t < 32; ++t) {
            long long started;
            f = layout_step(f, __shfl_sync(BMSPARSE_FULL_WARP, mine, t), started);
            total += started;
        }
    }
    chunks[(c << 5) + (threadIdx.x & 31u)] = (total << 6) | f;
}

extern "C" __global__ void bmsparse_spmv_layout_chain(
    const long long* __restrict__ chunks, long long nchunks, const long long* __restrict__ ptr,
    long long ngroups, long long* __restrict__ starts, long long* __restrict__ warps)
{
    const int lane = (int)(threadIdx.x & 31u);
    int f = 32;
    long long total = 0;
    constexpr int ahead = 8;  // rows loaded before the chain walks them
    for (long long c0 = 0; c0 < nchunks; c0 += ahead) {
        long long rows[ahead];
#pragma unroll
        for (int i = 0; i < ahead; ++i) {
            rows[i] = c0 + i < nchunks ? chunks[((c0 + i) << 5) + lane] : 0;
        }
#pragma unroll
        for (int i = 0; i < ahead; ++i) {
            if (c0 + i < nchunks) {
                if (lane == 0) starts[c0 + i] = (total << 6) | f;
                const long long e = __shfl_sync(BMSPARSE_FULL_WARP, rows[i], f - 1);
                total += e >> 6;
                f = (int)(e & 63);
            }
        }
    }
    if (lane == 0) {
        starts[nchunks] = (total << 6) | f;
        warps[total] = ptr[ngroups];
    }
}

extern "C" __global__ void bmsparse_spmv_layout_warps(
    const long long* __restrict__ ptr, long long ngroups, const long long* __restrict__ starts,
    long long* __restrict__ warps)
{
    const long long c = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const long long g0 = c * BMSPARSE_SPMV_LAYOUT_CHUNK;
    if (g0 >= ngroups) return;
    const long long g1 = min(g0 + BMSPARSE_SPMV_LAYOUT_CHUNK, ngroups);
    const int lane = (int)(threadIdx.x & 31u);
    const long long at = starts[c];
    int f = (int)(at & 63);
    long long next = at >> 6;  // the next warp to start
    for (long long g = g0; g < g1; g += 32) {
        long long mine, start;
        layout_batch(ptr, g, g1, mine, start);
        for (int t = 0; t < 32; ++t) {
            // a group longer than a warp goes on from lane f: its first warp
            // to start begins 32 - f blocks in
            const long long skip = f == 32 ? 0 : 32 - f;
            long long started;
            f = layout_step(f, __shfl_sync(BMSPARSE_FULL_WARP, mine, t), started);
            if (lane == t) {
                for (long long i = 0; i < started; ++i) {
                    warps[next + i] = start + (mine > 32 ? skip + (i << 5) : 0);
                }
            }
            next += started;
        }
    }
}

// --- the SpMV kernels -------------------------------------------------------

BMSPARSE_SPMV_KERNEL(bmsparse_spmv_rows, false, false)
BMSPARSE_SPMV_UNIT_KERNEL(bmsparse_spmv_rows_unit, false, false)
BMSPARSE_SPMV_KERNEL(bmsparse_spmv_cols, true, false)
BMSPARSE_SPMV_UNIT_KERNEL(bmsparse_spmv_cols_unit, true, false)
