// convert.cu - COO/CSR <-> bitmap conversion kernels.
//
// COO/CSR -> bitmap (the paper's COO -> BMP) sorts the entries by
// (block key, bit, input position):
//   1. bmsparse_convert_coo_codes / _csr_codes : a packed uint64 sort code per entry
//        brow << (col_bits + 6 + entry_bits) | bcol << (6 + entry_bits) | bit << entry_bits | e
//      and a flag word of range errors (so checking costs no extra pass);
//   2. (CuPy's keys-only sort of the codes)
//   3. bmsparse_convert_unpack_codes : key, bit, input position and the run
//      starts of equal entries and of equal blocks, per sorted position;
//   4. (scans of the run starts)
//   5. bmsparse_convert_sum_entries : the value of every distinct entry, its
//      duplicates summed in input order;
//   6. bmsparse_convert_block_heads : keys, bitmaps and offsets of the blocks.
// When the code does not fit in 64 bits, convert.py sorts with stable
// argsorts instead and steps 5 and 6 run on its output unchanged.
//
// Canonical CSR -> bitmap needs no sort either: bmsparse_convert_csr_place
// puts every entry at its final place by binary searches in the 8 rows of
// its block row, then step 6 runs as above (every entry is distinct).
//
// Bitmap -> CSR needs no sort: blocks are sorted by key and values are in bit
// order, so every entry's place follows from popcounts and one scan:
//   bmsparse_convert_segment_lengths : entries of each row of each block, numbered
//                                      in CSR order (see _cuda/csr.cuh)
//   bmsparse_convert_csr_entries     : indptr, and indices and data of every entry
//                                      (after a scan of the lengths)
//
// Launch: one thread per item named in each kernel, 1-D grid.
// Deterministic: no atomics on values; duplicates are summed in input order.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"
#include "_cuda/csr.cuh"

#define BMSPARSE_ERR_ROW_NEGATIVE 1
#define BMSPARSE_ERR_ROW_RANGE 2
#define BMSPARSE_ERR_COL_NEGATIVE 4
#define BMSPARSE_ERR_COL_RANGE 8
#define BMSPARSE_ERR_INDPTR 16
#define BMSPARSE_ERR_NOT_CANONICAL 32

__device__ __forceinline__ u64 entry_code(long long row, long long col, long long e,
                                          long long col_bits, long long entry_bits) {
    const u64 bit = (u64)bit_of((int)(row & 7), (int)(col & 7));
    return ((u64)(row >> 3) << (col_bits + 6 + entry_bits)) |
           ((u64)(col >> 3) << (6 + entry_bits)) | (bit << entry_bits) | (u64)e;
}

__device__ __forceinline__ int range_errors(long long row, long long col, long long nrows,
                                            long long ncols) {
    return (row < 0 ? BMSPARSE_ERR_ROW_NEGATIVE : 0) | (row >= nrows ? BMSPARSE_ERR_ROW_RANGE : 0) |
           (col < 0 ? BMSPARSE_ERR_COL_NEGATIVE : 0) | (col >= ncols ? BMSPARSE_ERR_COL_RANGE : 0);
}

//   I         rows[n], cols[n]  - COO indices
//   long long nrows, ncols      - shape
//   long long col_bits, entry_bits
//   u64       codes[n]          - out
//   int       errors[1]         - out: OR of BMSPARSE_ERR_* over all entries
template <typename I>
__global__ void bmsparse_convert_coo_codes(
    const I* __restrict__ rows, const I* __restrict__ cols, long long n, long long nrows,
    long long ncols, long long col_bits, long long entry_bits, u64* __restrict__ codes,
    int* __restrict__ errors)
{
    long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (e >= n) return;
    const long long row = rows[e], col = cols[e];
    const int err = range_errors(row, col, nrows, ncols);
    if (err) { atomicOr(errors, err); codes[e] = 0; return; }
    codes[e] = entry_code(row, col, e, col_bits, entry_bits);
}

// The error word of an indptr: BMSPARSE_ERR_INDPTR unless it starts at 0,
// never decreases and ends at nnz.
//   I         indptr[nrows + 1]
//   long long nrows, nnz
//   int       errors[1]         - zeroed by the host; out
// Launch: one thread per item of indptr, 1-D grid, blocks of a multiple of 32.
template <typename I>
__global__ void bmsparse_convert_indptr_errors(const I* __restrict__ indptr, long long nrows,
                                               long long nnz, int* __restrict__ errors)
{
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    bool bad = false;
    if (i <= nrows) {
        const long long at = indptr[i];
        bad = (i == 0 && at != 0) || (i == nrows && at != nnz)
              || (i < nrows && (long long)indptr[i + 1] < at);
    }
    // one atomic per warp with a bad item: a garbage indptr is bad everywhere
    if (__ballot_sync(0xffffffffu, bad) && (threadIdx.x & 31u) == 0u)
        atomicOr(errors, BMSPARSE_ERR_INDPTR);
}

//   I         indptr[nrows + 1], indices[nnz] - CSR arrays
//   (others as for the COO codes)
template <typename I>
__global__ void bmsparse_convert_csr_codes(
    const I* __restrict__ indptr, const I* __restrict__ indices, long long nnz,
    long long nrows, long long ncols, long long col_bits, long long entry_bits,
    u64* __restrict__ codes, int* __restrict__ errors)
{
    long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (e >= nnz) return;
    // the row of entry e: the last row whose start is <= e
    long long lo = 0, hi = nrows;
    while (lo < hi) {
        const long long mid = (lo + hi + 1) >> 1;
        if ((long long)indptr[mid] <= e) lo = mid; else hi = mid - 1;
    }
    const long long col = indices[e];
    const int err = range_errors(lo, col, nrows, ncols);
    if (err) { atomicOr(errors, err); codes[e] = 0; return; }
    codes[e] = entry_code(lo, col, e, col_bits, entry_bits);
}

//   u64       sorted[n]           - sorted codes
//   long long col_bits, entry_bits
//   u64       keys[n]             - out: block key of each sorted entry
//   long long bits[n], order[n]   - out: its bit and its input position
//   long long entry_heads[n], block_heads[n] - out: 1 where a run of equal entries / keys starts
extern "C" __global__ void bmsparse_convert_unpack_codes(
    const u64* __restrict__ sorted, long long n, long long col_bits, long long entry_bits,
    u64* __restrict__ keys, long long* __restrict__ bits, long long* __restrict__ order,
    long long* __restrict__ entry_heads, long long* __restrict__ block_heads)
{
    long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= n) return;
    const u64 code = sorted[s];
    const u64 entry = code >> entry_bits;
    const u64 block = entry >> 6;
    keys[s] = make_key(block >> col_bits, block & ((1ull << col_bits) - 1ull));
    bits[s] = (long long)(entry & 63ull);
    order[s] = (long long)(code & ((1ull << entry_bits) - 1ull));
    const u64 prev = s ? sorted[s - 1] >> entry_bits : ~entry;
    entry_heads[s] = prev != entry;
    block_heads[s] = (prev >> 6) != block || s == 0;
}

//   long long order[n]           - input position of each sorted entry
//   T         values[n]          - input values
//   long long entry_heads[n], entry_rank[n] - run starts and their inclusive scan
//   T         out[nentries]      - out: summed value of each distinct entry
template <typename T>
__global__ void bmsparse_convert_sum_entries(
    const long long* __restrict__ order, const T* __restrict__ values, long long n,
    const long long* __restrict__ entry_heads, const long long* __restrict__ entry_rank,
    T* __restrict__ out)
{
    long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= n || !entry_heads[s]) return;
    T acc = values[order[s]];
    for (long long k = s + 1; k < n && !entry_heads[k]; ++k) acc += values[order[k]];
    out[entry_rank[s] - 1] = acc;
}

//   u64       keys[n]; long long bits[n] - per sorted entry
//   long long entry_heads[n], entry_rank[n] - null when every entry is distinct
//   long long block_heads[n], block_rank[n]
//   u64       b_keys[nblocks], b_bitmaps[nblocks] - out
//   long long b_offsets[nblocks + 1] - out
extern "C" __global__ void bmsparse_convert_block_heads(
    const u64* __restrict__ keys, const long long* __restrict__ bits, long long n,
    const long long* __restrict__ entry_heads, const long long* __restrict__ entry_rank,
    const long long* __restrict__ block_heads, const long long* __restrict__ block_rank,
    u64* __restrict__ b_keys, u64* __restrict__ b_bitmaps, long long* __restrict__ b_offsets)
{
    long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= n) return;
    if (s == n - 1) b_offsets[block_rank[s]] = entry_rank ? entry_rank[s] : n;
    if (!block_heads[s]) return;
    const long long q = block_rank[s] - 1;
    u64 bitmap = 1ull << bits[s];
    for (long long k = s + 1; k < n && !block_heads[k]; ++k) bitmap |= 1ull << bits[k];
    b_keys[q] = keys[s];
    b_bitmaps[q] = bitmap;
    b_offsets[q] = entry_rank ? entry_rank[s] - 1 : s;
}

// entries of indices[first, last) (sorted) below x
template <typename I>
__device__ __forceinline__ long long count_below(const I* indices, long long first,
                                                 long long last, long long x) {
    long long lo = first, hi = last;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if ((long long)indices[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo - first;
}

// Canonical CSR -> bitmap: each entry's place in bitmap order, found by binary
// searches in the 8 rows of its block row:
//   place = (entries of the block row in earlier blocks, all 8 rows)
//         + (entries of this block in earlier rows) + (earlier in this row)
//   I         indptr[nrows + 1], indices[nnz] - canonical CSR (checked: a row
//                                 that is not strictly increasing sets an error bit)
//   T         values[nnz]        - values, or null for a pattern matrix
//   int       errors[1]          - in/out: if set on entry (a bad indptr), nothing
//                                 is read; BMSPARSE_ERR_* bits are added
//   T         out_values[nnz]    - out, in bitmap order (unless null)
//   u64       keys[nnz]; long long bits[nnz], heads[nnz] - out, in bitmap order: each
//                                 entry's block key and bit, and 1 where a block starts
// Work: O(nnz * 16 log(row length)).
template <typename T, typename I>
__global__ void bmsparse_convert_csr_place(
    const I* __restrict__ indptr, const I* __restrict__ indices, const T* __restrict__ values,
    long long nnz, long long nrows, long long ncols, int* __restrict__ errors,
    T* __restrict__ out_values, u64* __restrict__ keys, long long* __restrict__ bits,
    long long* __restrict__ heads)
{
    long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (e >= nnz) return;
    if (*(volatile int*)errors) return;  // a bad indptr: searches could leave the arrays
    // the row of entry e: the last row whose start is <= e
    long long lo = 0, hi = nrows - 1;
    while (lo < hi) {
        const long long mid = (lo + hi + 1) >> 1;
        if ((long long)indptr[mid] <= e) lo = mid; else hi = mid - 1;
    }
    const long long row = lo, col = indices[e];
    const int err = range_errors(row, col, nrows, ncols);
    if (err) { atomicOr(errors, err); return; }
    const long long row_start = indptr[row];
    if (e > row_start && (long long)indices[e - 1] >= col) {
        atomicOr(errors, BMSPARSE_ERR_NOT_CANONICAL);
        return;
    }
    const long long row0 = row & ~7ll, row1 = min(row0 + 8, nrows), b = col >> 3;
    long long place = indptr[row0], before_in_block = 0;
    for (long long rr = row0; rr < row1; ++rr) {
        const long long first = indptr[rr], last = indptr[rr + 1];
        const long long below = count_below(indices, first, last, b << 3);
        place += below;
        if (rr < row) before_in_block += count_below(indices, first, last, (b + 1) << 3) - below;
        else if (rr == row) before_in_block += e - first - below;
    }
    place += before_in_block;
    if (out_values) out_values[place] = values[e];
    keys[place] = make_key((u64)(row >> 3), (u64)b);
    bits[place] = bit_of((int)(row & 7), (int)(col & 7));
    heads[place] = before_in_block == 0;
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

// Bitmap -> CSR: the lengths of the row segments of every block (numbered in
// CSR order, see _cuda/csr.cuh), one scan of them (convert.py), then every
// entry written to its place.

//   u64       keys[nblocks], bitmaps[nblocks]
//   long long brow_ptr[nbrows + 1] - blocks of block row i: [brow_ptr[i], brow_ptr[i+1])
//   long long nblocks
//   unsigned char lengths[8 * nblocks] - out: entries of each segment (0-8), by
//                                   segment number
// Launch: one thread per block.
extern "C" __global__ void bmsparse_convert_segment_lengths(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ brow_ptr, long long nblocks,
    unsigned char* __restrict__ lengths)
{
    const long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (q >= nblocks) return;
    const long long i = block_row(keys[q]);
    const u64 bitmap = bitmaps[q];
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        lengths[csr_segment(brow_ptr, i, q, r)] = (unsigned char)__popc(row_bits(bitmap, r));
    }
}

//   u64       keys[nblocks], bitmaps[nblocks]
//   long long offsets[nblocks + 1]
//   T         values[nnz]        - values, or null for a pattern matrix
//   long long brow_ptr[nbrows + 1], nblocks, nrows
//   I         places[8 * nblocks + 1] - exclusive scan of the segment lengths
//   I         indptr[nrows + 1]  - out
//   I         indices[nnz]       - out
//   T         data[nnz]          - out, or null for a pattern matrix
// Launch: max(32 * nblocks, nrows + 1) threads: a warp per block, lane l
// writing its bits l and l + 32; thread t <= nrows also writes indptr[t].
template <typename T, typename I>
__global__ void bmsparse_convert_csr_entries(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    const long long* __restrict__ offsets, const T* __restrict__ values,
    const long long* __restrict__ brow_ptr, long long nblocks, long long nrows,
    const I* __restrict__ places, I* __restrict__ indptr, I* __restrict__ indices,
    T* __restrict__ data)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (tid <= nrows) write_indptr(brow_ptr, places, nblocks, nrows, tid, indptr);
    const long long q = tid >> 5;
    if (q >= nblocks) return;
    const int lane = (int)(threadIdx.x & 31u);
    const u64 key = keys[q], bitmap = bitmaps[q];
    const long long i = block_row(key), col0 = (long long)block_col(key) << 3;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int bit = lane + 32 * half;
        if (!((bitmap >> bit) & 1ull)) continue;
        const long long dst = csr_place(brow_ptr, places, i, q, bitmap, bit);
        indices[dst] = (I)(col0 + (bit & 7));
        if (values) data[dst] = values[offsets[q] + value_index(bitmap, bit)];
    }
}

// The block-row pointer of canonical keys, and the longest block row.
//   u64       keys[nblocks]       - strictly increasing block keys
//   long long nblocks, nbrows
//   long long ptr[nbrows + 1]     - out: blocks of block row i are [ptr[i], ptr[i + 1])
//   unsigned long long longest[1] - zeroed by the host; out: the most blocks in a row
// Launch: one thread per block row (two binary searches each), 1-D grid,
// blocks of a multiple of 32.
extern "C" __global__ void bmsparse_convert_row_pointer(
    const u64* __restrict__ keys, long long nblocks, long long nbrows,
    long long* __restrict__ ptr, unsigned long long* __restrict__ longest)
{
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    unsigned long long length = 0;
    if (i < nbrows) {
        // the first key of block row i and of i + 1; the last row ends at
        // nblocks, since (nbrows << 32) may not fit in 64 bits
        const long long lo = lower_bound(keys, nblocks, (u64)i << 32);
        const long long end = i + 1 < nbrows
            ? lo + lower_bound(keys + lo, nblocks - lo, (u64)(i + 1) << 32) : nblocks;
        ptr[i] = lo;
        if (i + 1 == nbrows) ptr[nbrows] = nblocks;
        length = (unsigned long long)(end - lo);
    }
    // one atomic per warp: on one word, one per block row queued for 70-100 us
    // (a web graph's 125,000 block rows, H100)
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) length = max(length, __shfl_xor_sync(0xffffffffu, length, s));
    if (length && (threadIdx.x & 31u) == 0u) atomicMax(longest, length);
}
