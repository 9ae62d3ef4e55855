// csr.cuh - where a block's entries go in CSR, for every kernel that writes
// CSR from blocks (convert.cu's bitmap -> CSR, and the multiply writing C
// straight to CSR).
//
// The entries of row r of block q of block row i (a "segment", at most 8
// entries) are contiguous in CSR, after those of the earlier blocks' row r
// and of rows 8i .. 8i + r - 1 of block row i. So the segments are numbered
// in CSR order, (block row i, row r, block q):
//   segment(i, r, q) = 8 brow_ptr[i] + r len_i + (q - brow_ptr[i]),
//   len_i = brow_ptr[i + 1] - brow_ptr[i],
// and one exclusive scan of the segment lengths in that numbering ("places",
// 8 nblocks + 1 items of the CSR index type I) gives every segment's first place in CSR, and every
// row's start (its first segment's, or for a row of an empty block row the
// place where it would be).
#pragma once
#include "bitmap.cuh"

__device__ __forceinline__ long long csr_segment(const long long* __restrict__ brow_ptr,
                                                 long long i, long long q, int r) {
    const long long first = brow_ptr[i];
    return 8 * first + r * (brow_ptr[i + 1] - first) + (q - first);
}

// the CSR index of entry `bit` of block q (block row i, bitmap `bitmap`)
template <typename I>
__device__ __forceinline__ long long csr_place(const long long* __restrict__ brow_ptr,
                                               const I* __restrict__ places,
                                               long long i, long long q, u64 bitmap, int bit) {
    const int r = bit >> 3, c = bit & 7;
    return (long long)places[csr_segment(brow_ptr, i, q, r)] + __popc(row_bits(bitmap, r) & ((1u << c) - 1u));
}

// indptr[row] for row <= nrows of a matrix of nblocks blocks
template <typename I>
__device__ __forceinline__ void write_indptr(const long long* __restrict__ brow_ptr,
                                             const I* __restrict__ places,
                                             long long nblocks, long long nrows, long long row,
                                             I* __restrict__ indptr) {
    const long long i = row >> 3;
    // row nrows starts past every entry: the scan's last item
    const long long at = row == nrows ? 8 * nblocks
                                      : csr_segment(brow_ptr, i, brow_ptr[i], (int)(row & 7));
    indptr[row] = places[at];
}
