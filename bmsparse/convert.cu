// convert.cu - COO/CSR <-> bitmap conversion kernels.
//
// COO -> bitmap (the paper's COO -> BMP): the entries are sorted by
// (key, bit) with CuPy primitives; these kernels then reduce the runs of
// equal entries and of equal keys. Bitmap -> COO/CSR needs no sort: blocks
// are sorted by key and values are in bit order, so the position of every
// entry in the output follows from popcounts.
//
// Launch: one thread per item named in each kernel, 1-D grid.
// Deterministic: runs are summed sequentially in input order, no atomics.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"

// Sum of each run of duplicate entries, in input order.
//   long long order[n]         - sorting permutation of the input entries
//   T         values[n]        - input values, unsorted
//   long long run_ptr[nruns+1] - run boundaries in sorted order
//   T         out[nruns]       - out: the summed values, sorted
template <typename T>
__global__ void bmsparse_convert_sum_duplicates(
    const long long* __restrict__ order, const T* __restrict__ values,
    const long long* __restrict__ run_ptr, long long nruns, T* __restrict__ out)
{
    long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (u >= nruns) return;
    T acc = T(0);
    for (long long k = run_ptr[u]; k < run_ptr[u + 1]; ++k) acc += values[order[k]];
    out[u] = acc;
}

// Bitmap of each block from the bits of its (unique, sorted) entries.
//   long long bits[nnz]              - bit of each entry in its block
//   long long offsets[nblocks + 1]   - entries of block q: [offsets[q], offsets[q+1])
//   u64       bitmaps[nblocks]       - out
extern "C" __global__ void bmsparse_convert_block_bitmaps(
    const long long* __restrict__ bits, const long long* __restrict__ offsets,
    long long nblocks, u64* __restrict__ bitmaps)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= nblocks) return;
    u64 bitmap = 0;
    for (long long k = offsets[q]; k < offsets[q + 1]; ++k) bitmap |= 1ull << bits[k];
    bitmaps[q] = bitmap;
}

// Row and column of every entry, in value order (bitmap -> COO).
//   u64       keys[nblocks], bitmaps[nblocks]
//   long long offsets[nblocks + 1]
//   long long rows[nnz], cols[nnz] - out
extern "C" __global__ void bmsparse_convert_expand_entries(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, long long nblocks,
    long long* __restrict__ rows, long long* __restrict__ cols)
{
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= nblocks) return;
    const long long row0 = (long long)block_row(keys[q]) << 3;
    const long long col0 = (long long)block_col(keys[q]) << 3;
    long long k = offsets[q];
    for (u64 rest = bitmaps[q]; rest; rest &= rest - 1ull, ++k) {
        const int bit = __ffsll((long long)rest) - 1;
        rows[k] = row0 + (bit >> 3);
        cols[k] = col0 + (bit & 7);
    }
}

// Number of entries of every matrix row (bitmap -> CSR, first pass).
//   u64       bitmaps[nblocks]
//   long long brow_ptr[nbrows + 1] - blocks of block row i: [brow_ptr[i], brow_ptr[i+1])
//   long long nrows                - rows of the matrix
//   long long counts[nrows]        - out
extern "C" __global__ void bmsparse_convert_row_counts(
    const u64* __restrict__ bitmaps, const long long* __restrict__ brow_ptr,
    long long nrows, long long* __restrict__ counts)
{
    long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (row >= nrows) return;
    const long long i = row >> 3;
    const int r = (int)(row & 7);
    long long n = 0;
    for (long long q = brow_ptr[i]; q < brow_ptr[i + 1]; ++q) n += __popc(row_bits(bitmaps[q], r));
    counts[row] = n;
}

// Column indices and values of every matrix row (bitmap -> CSR, second pass).
// Blocks of a block row are sorted by column, so a row's entries come out sorted.
//   u64       keys[nblocks], bitmaps[nblocks]
//   long long offsets[nblocks + 1]
//   T         values[nnz]      - values of the matrix, or null for a pattern matrix
//   long long brow_ptr[nbrows + 1]
//   long long nrows
//   long long indptr[nrows + 1] - row starts (scan of the row counts)
//   I         indices[nnz]     - out
//   T         data[nnz]        - out, or null for a pattern matrix
template <typename T, typename I>
__global__ void bmsparse_convert_csr_entries(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    const long long* __restrict__ brow_ptr, long long nrows,
    const long long* __restrict__ indptr, I* __restrict__ indices, T* __restrict__ data)
{
    long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (row >= nrows) return;
    const long long i = row >> 3;
    const int r = (int)(row & 7);
    long long dst = indptr[row];
    for (long long q = brow_ptr[i]; q < brow_ptr[i + 1]; ++q) {
        const u64 bitmap = bitmaps[q];
        unsigned int bits = row_bits(bitmap, r);
        if (!bits) continue;
        const long long col0 = (long long)block_col(keys[q]) << 3;
        long long src = offsets[q] + value_index(bitmap, bit_of(r, 0));
        while (bits) {
            const int c = __ffs(bits) - 1;
            bits &= bits - 1u;
            indices[dst] = (I)(col0 + c);
            if (values) data[dst] = values[src];
            ++dst;
            ++src;
        }
    }
}
