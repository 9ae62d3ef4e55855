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
//   2. (CuPy's sort of the pieces by key, construct.py; a scan of the counts)
//   3. bmsparse_construct_copy_runs : each piece's run of values to its place
//      in the joined values (the pieces in key order, one block's pieces in
//      row order: their values follow each other in bit order).
//   4. bmsparse_construct_merge_pieces : at the first piece of each run of one
//      key, the union of the run's bitmaps (their rows are disjoint) and
//      whether it has bits: the joined matrix's blocks.
//
// Arguments (csr.h style):
//   u64       keys[n], bitmaps[n]  - blocks of a part (1), pieces sorted by
//                                    key (4)
//   long long offsets[n]           - first values of the part's blocks (1)
//   long long n                    - blocks (1), pieces (3, 4)
//   u64       shift                - what a key gains: the part's block row
//                                    and column in the joined matrix (1)
//   long long s                    - rows into a block, 0..7 (1)
//   long long base                 - the part's first value in the joined
//                                    input values (1)
//   u64       piece_keys[n * (s ? 2 : 1)], piece_bitmaps[...]  - out (1)
//   long long piece_starts[...]    - out: first input value of each piece (1)
//   long long starts[n], dest[n]   - first input value and first output value
//                                    of each sorted piece (3)
//   T         values[...], out[...] - input values, out: the joined values (3)
//   u64       unions[n]            - out: the union at a run's first piece (4)
//   unsigned char heads[n]         - out: 1 at a run's first piece with bits (4)
//
// Launch: one thread per block (1) or piece (3, 4), 1-D grid.
// Work: O(n) (1, 4: a run is the pieces of one block, at most 2 a part),
// O(n + nnz) (3). Deterministic: no atomics.
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

template <typename T>
__global__ void bmsparse_construct_copy_runs(
    const long long* __restrict__ starts, const u64* __restrict__ bitmaps,
    const long long* __restrict__ dest, long long n, const T* __restrict__ values,
    T* __restrict__ out)
{
    const long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (p >= n) return;
    const T* from = values + starts[p];
    T* to = out + dest[p];
    const int count = __popcll(bitmaps[p]);
    for (int i = 0; i < count; ++i) to[i] = from[i];
}

extern "C" __global__ void bmsparse_construct_merge_pieces(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps, long long n,
    u64* __restrict__ unions, unsigned char* __restrict__ heads)
{
    const long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (p >= n) return;
    const u64 key = keys[p];
    if (p > 0 && keys[p - 1] == key) {
        heads[p] = 0;
        return;
    }
    u64 all = 0;
    for (long long q = p; q < n && keys[q] == key; ++q) all |= bitmaps[q];
    unions[p] = all;
    heads[p] = all != 0;
}
