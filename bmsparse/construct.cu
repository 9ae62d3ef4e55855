// construct.cu - matrices joined block by block (construct.py's bmat, vstack,
// hstack): a matrix placed at a row that is not a multiple of 8 has each
// block cut in two by rows, and the pieces meeting in one block merged.
//
//   1. bmsparse_construct_pieces : a part's blocks as pieces of the joined
//      matrix, keys shifted; at s = row % 8 > 0 rows into a block, block k
//      gives piece 2k, its rows 0..7-s as rows s..7 of the same block row
//      (bitmap << 8 s), and piece 2k + 1, its rows 8-s..7 as rows 0..s-1 of
//      the next block row (bitmap >> 8 (8 - s)); the first piece's values are
//      the first popcount of the block's, the second's the rest. At s = 0
//      block k is piece k. A piece may be empty.
//   2. (construct.py: CuPy's sort of the pieces by key; their runs of values
//      moved and the pieces of one key merged by _primitives.cu's
//      bmsparse_copy_runs and bmsparse_merge_pieces)
//
// Arguments (csr.h style):
//   u64       keys[n], bitmaps[n]  - blocks of a part
//   long long offsets[n]           - first values of the part's blocks
//   long long n                    - blocks
//   u64       shift                - what a key gains: the part's block row
//                                    and column in the joined matrix
//   long long s                    - rows into a block, 0..7
//   long long base                 - the part's first value in the joined
//                                    input values
//   u64       piece_keys[n * (s ? 2 : 1)], piece_bitmaps[...]  - out
//   long long piece_starts[...]    - out: first input value of each piece
//
// Launch: one thread per block, 1-D grid. Work: O(n). Deterministic.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"

extern "C" __global__ void bmsparse_construct_pieces(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, long long n, u64 shift, long long s,
    long long base, u64* __restrict__ piece_keys, u64* __restrict__ piece_bitmaps,
    long long* __restrict__ piece_starts)
{
    const long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (k >= n) return;
    const u64 key = keys[k] + shift, bitmap = bitmaps[k];
    const long long start = offsets[k] + base;
    if (s == 0) {
        piece_keys[k] = key;
        piece_bitmaps[k] = bitmap;
        piece_starts[k] = start;
        return;
    }
    const u64 upper = bitmap << (8 * s), lower = bitmap >> (64 - 8 * s);
    piece_keys[2 * k] = key;
    piece_bitmaps[2 * k] = upper;
    piece_starts[2 * k] = start;
    // (in the last block row a key can hold, the next wraps to block row 0:
    // that piece is empty, as no row lies below)
    piece_keys[2 * k + 1] = key + (1ull << 32);
    piece_bitmaps[2 * k + 1] = lower;
    piece_starts[2 * k + 1] = start + __popcll(upper);
}
