// transpose.cu - the transpose of a bitmap matrix, block by block.
//
// Block (i, j) of A becomes block (j, i) of A.T: its key's halves swap, its
// bitmap is transposed (bit 8r + c moves to 8c + r) and its values move to
// the transposed bit order. The output blocks are A's blocks in
// column-major order, `order` (a stable sort of the block columns, made in
// transpose.py), so the output keys come out sorted.
//
//   bmsparse_transpose_blocks : key, bitmap and value count of every output block
//   (an exclusive scan of the counts gives t_offsets)
//   bmsparse_transpose_values : the values of every output block
//
// Arguments (csr.h style):
//   u64       keys[nblocks], bitmaps[nblocks] - blocks of A
//   long long offsets[nblocks + 1]   - value offsets of A's blocks
//   T         values[nnz]            - values of A
//   long long order[nblocks]         - A's block of each output block (column-major order)
//   u64       t_keys[nblocks], t_bitmaps[nblocks] - out: blocks of A.T
//   long long counts[nblocks]        - out: values of each output block
//   long long t_offsets[nblocks + 1] - value offsets of A.T's blocks
//   T         t_values[nnz]          - out: values of A.T
//
// Launch: one thread per output block for the blocks; 8 threads per output
// block for the values (thread r writes row r of the transposed block, which
// is column r of A's block, so its outputs are contiguous).
// Work: O(nblocks + nnz). Deterministic: values are only moved.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"

extern "C" __global__ void bmsparse_transpose_blocks(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ order, long long nblocks,
    u64* __restrict__ t_keys, u64* __restrict__ t_bitmaps, long long* __restrict__ counts)
{
    const long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= nblocks) return;
    const long long s = order[q];
    const u64 key = keys[s], bitmap = bitmaps[s];
    t_keys[q] = make_key(block_col(key), block_row(key));
    t_bitmaps[q] = transpose_bitmap(bitmap);
    counts[q] = __popcll(bitmap);
}

template <typename T>
__global__ void bmsparse_transpose_values(
    const u64* __restrict__ bitmaps, const long long* __restrict__ offsets,
    const T* __restrict__ values, const long long* __restrict__ order, long long nblocks,
    const u64* __restrict__ t_bitmaps, const long long* __restrict__ t_offsets,
    T* __restrict__ t_values)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long q = tid >> 3;
    if (q >= nblocks) return;
    const int r = (int)(tid & 7);
    const long long s = order[q];
    const u64 bitmap = bitmaps[s], t_bitmap = t_bitmaps[q];
    const T* in = values + offsets[s];
    T* out = t_values + t_offsets[q] + value_index(t_bitmap, bit_of(r, 0));
    // row r of the transposed block holds column r of A's block, row t of A
    // becoming column t
    for (unsigned int rows = row_bits(t_bitmap, r); rows; rows &= rows - 1u) {
        const int t = __ffs(rows) - 1;
        *out++ = in[value_index(bitmap, bit_of(t, r))];
    }
}
