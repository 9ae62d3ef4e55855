// spmv.cu - sparse matrix times dense vector or matrix: Y = A @ X and Y = A.T @ X.
//
// Load-balanced: one thread per block of A and column j of X, whatever the
// lengths of the block rows. The blocks are taken in row-major order for
// A @ X (bmsparse_spmv_rows, a block row is a "group") and in column-major
// order for A.T @ X (bmsparse_spmv_cols, a block column is a group: keys,
// bitmaps and offsets are then copies of A's in that order, which spmv.py
// keeps with A; the values are A's, not moved), so warp w holds positions
// [32w, 32w + 32) of the ordered block list and every warp does the same work.
//
//   1. Each thread loads the block's 8 entries of X (those it needs) and
//      its values, 8 at a time, then walks its bits in bit order (a block's
//      values are contiguous) and sums the block's 8 partial outputs:
//        rows: acc[r] += A(8I + r, 8J + c) * X(8J + c, j)
//        cols: acc[c] += A(8I + r, 8J + c) * X(8I + r, j)
//   2. Consecutive lanes of one group form a segment. A segmented inclusive
//      scan (Hillis-Steele: for d = 1, 2, 4, 8, 16, lane l with
//      l - d >= first lane of its segment sets acc = acc(lane l - d) + acc)
//      leaves the segment's sum in its last lane. Lanes past the end of the
//      block list stay through the shuffles with zero partials.
//   3. The last lane of a segment whose group lies inside the warp writes the
//      group's 8 outputs; one whose group spans warps w0..w1 (ptr[g] >> 5 !=
//      (ptr[g + 1] - 1) >> 5) writes them to the warp's carry slot 0 if the
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
//   long long nblocks               - blocks of A
//   T         x[...]                - X, element (i, j) at x[i * x_rs + j * x_cs]
//   long long k                     - columns of X (1 for a vector)
//   long long nout                  - rows of Y: A's rows (columns for cols)
//   T         y[...]                - out: Y, element (i, j) at y[i * y_rs + j * y_cs]
//   T         carry[nwarps * k * 2 * 8] - scratch: partial sums of the groups
//                                     spanning warps, nwarps = ceil(nblocks / 32);
//                                     element r of slot s of warp w, column j at
//                                     ((w * k + j) * 2 + s) * 8 + r
//   unsigned  count[nwarps * k]     - scratch, zero on entry and on exit: pieces
//                                     arrived of the group spanning warps from
//                                     warp w0, column j, at w0 * k + j
//
// Launch: max(32 * nwarps, ngroups) * k threads, 1-D grid, warp number
// w * k + j (so the k warps reading the same 32 blocks are neighbours);
// 16 * sizeof(T) bytes of dynamic shared memory per thread (step 1), and
// BMSPARSE_SPMV_THREADS threads per thread block (step 1 strides by it).
// The _unit kernels are the same for a vector in and out (k == 1, x_rs ==
// y_rs == 1), without the strides and k among their arguments: their index
// arithmetic folds to constants, which takes a quarter of the instructions off.
// They take (bm_spmv_blocks b, values, x, y): b holds keys, bitmaps, offsets,
// ptr, nblocks, nout, carry and count (spmv.cuh).
// Work: O(k * (nnz + nblocks + nout)), with O(log 32) shuffles per block and
// O(nblocks / 1024) sequential additions per lane for a group spanning warps.
// Deterministic (the atomics only count arrivals): each output is summed in a
// fixed order that depends only on A's block structure: per block in bit
// order, then the scan tree over the block's segment of a warp, then the
// warps' pieces as step 3 adds them. spmv.py's NumPy twin follows the same
// order.
// spmv_dense.cu holds the same kernels for matrices of dense blocks (step 1
// in registers); the device functions are in spmv.cuh.
// Layout: see _cuda/bitmap.cuh.
#include "spmv.cuh"

BMSPARSE_SPMV_KERNEL(bmsparse_spmv_rows, false, false)
BMSPARSE_SPMV_UNIT_KERNEL(bmsparse_spmv_rows_unit, false, false)
BMSPARSE_SPMV_KERNEL(bmsparse_spmv_cols, true, false)
BMSPARSE_SPMV_UNIT_KERNEL(bmsparse_spmv_cols_unit, true, false)
