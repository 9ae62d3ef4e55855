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
// Canonical CSR -> bitmap needs no sort either: a group of 8 lanes walks the
// rows of a block row in step (bmsparse_convert_csr_windows, _count and
// _write, below).
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
#include "_cuda/group.cuh"
#include "_cuda/scan.cuh"

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

// Canonical CSR -> bitmap by block rows, without a sort. A group of 8 lanes
// walks a block row, lane r holding a cursor in row 8i + r; the least block
// column under the cursors (a group reduction, _cuda/group.cuh: a warp's
// four groups walk in step) is the next block, and the lanes at it take
// their entries of it. A first walk counts the blocks, an
// exclusive scan of the counts (convert.py) places them, and a second walk
// writes keys, bitmaps, offsets and values. A block row of more than
// `window` entries (convert.py's CSR_WINDOW) is cut into windows of block
// columns, walked by a group each, so that a hub row does not hold up one
// group: the window bounds are the block columns of its longest row at
// evenly spaced entries. A group's steps are serial (a reduction, then the
// lanes' next entries), so windows are short: with 256 entries the
// surrogate's hub windows took most of the 120 + 190 us of the two walks;
// with 32, 85 + 114 (H100). Loading each row's next four entries at once
// instead of one did not help (90 + 120 against 86 + 113 us, one H200).
//   bmsparse_convert_csr_windows : the windows of every block row, numbered
//                                  by a one-launch scan (_cuda/scan.cuh)
//   bmsparse_convert_csr_count   : the blocks of every window, and the range
//                                  and order errors of the entries
//   bmsparse_convert_csr_rows    : the block-row pointer and the longest block
//                                  row, from the scan of the counts
//   bmsparse_convert_csr_write   : the blocks and values
// Work: O(nnz + blocks) and a binary search per row of a window of a cut
// block row; each entry is read twice (once more in cut block rows, checked
// separately there).
#define BMSPARSE_NO_BLOCK_COL 0xffffffffu

// windows of block row i: one per `window` entries
template <typename I>
__device__ __forceinline__ long long csr_windows(const I* indptr, long long nrows, long long i,
                                                 long long window) {
    const long long row0 = i << 3;
    const long long e = (long long)indptr[min(row0 + 8, nrows)] - (long long)indptr[row0];
    return e > window ? (e + window - 1) / window : 1;
}

//   I         indptr[nrows + 1]
//   long long nrows, nbrows, window - entries of a window (at least 1)
//   int       errors[1]        - from bmsparse_convert_indptr_errors: if set,
//                                every block row gets one window (nothing is read)
//   long long state[1 + 3 * ntiles] - zeroed (_cuda/scan.cuh); ntiles tiles of block rows
//   u64       windows[]        - out: block row << 32 | window number, per window;
//                                at most nbrows + nnz / window
//   long long nwindows[1]      - zeroed; out: their number
// Launch: ntiles thread blocks of BMSPARSE_SCAN_THREADS.
template <typename I>
__global__ void __launch_bounds__(BMSPARSE_SCAN_THREADS) bmsparse_convert_csr_windows(
    const I* __restrict__ indptr, long long nrows, long long nbrows, long long window,
    const int* errors, long long* state, long long ntiles, u64* __restrict__ windows,
    long long* __restrict__ nwindows)
{
    const long long tile = scan_ticket(state);
    const bool bad = *(volatile const int*)errors != 0;
    const long long first = tile * BMSPARSE_SCAN_TILE + threadIdx.x * BMSPARSE_SCAN_ITEMS;
    long long count[BMSPARSE_SCAN_ITEMS];
    long long sum = 0;
#pragma unroll
    for (int j = 0; j < BMSPARSE_SCAN_ITEMS; ++j) {
        count[j] = first + j >= nbrows ? 0
                 : bad ? 1 : csr_windows(indptr, nrows, first + j, window);
        sum += count[j];
    }
    const ScanPrefix prefix = scan_thread_prefix(sum, tile, ntiles, state);
    long long w = prefix.thread;
#pragma unroll
    for (int j = 0; j < BMSPARSE_SCAN_ITEMS; ++j) {
        for (long long k = 0; k < count[j]; ++k) windows[w++] = ((u64)(first + j) << 32) | (u64)k;
    }
    if (tile == ntiles - 1 && threadIdx.x == BMSPARSE_SCAN_THREADS - 1)
        *nwindows = prefix.tile + prefix.total;
}

// Errors of entry (row, col) of a CSR row whose previous entry is in
// column prev (-1 for the first): range, and strictly increasing columns
__device__ __forceinline__ int csr_entry_error(long long row, long long col, long long prev,
                                               long long nrows, long long ncols) {
    return range_errors(row, col, nrows, ncols) | (col <= prev ? BMSPARSE_ERR_NOT_CANONICAL : 0);
}

// Errors of entries [from, to) of a row starting at `begin`
template <typename I>
__device__ __forceinline__ int csr_entry_errors(const I* indices, long long begin,
                                                long long from, long long to, long long row,
                                                long long nrows, long long ncols) {
    int err = 0;
    long long prev = from > begin ? (long long)indices[from - 1] : -1;
    for (long long e = from; e < to; ++e) {
        const long long col = indices[e];
        err |= csr_entry_error(row, col, prev, nrows, ncols);
        prev = col;
    }
    return err;
}

// One window's walk, by a group of 8 lanes (lane r: row 8i + r). WRITE false:
// counts[w] = its blocks, errors added. WRITE true: its blocks written from
// block counts[w] on (the exclusive scan of the counts). A warp's four groups
// walk in step: the loop runs while any of them has a block left, and a group
// without a window (past the last) walks nothing; whole warps only leave.
template <typename T, typename I, bool WRITE>
__device__ __forceinline__ void csr_walk(
    const I* __restrict__ indptr, const I* __restrict__ indices, const T* __restrict__ values,
    long long nrows, long long ncols, long long window, const u64* __restrict__ windows,
    const long long* __restrict__ nwindows, long long capacity, int* errors,
    long long* counts, u64* __restrict__ keys, u64* __restrict__ bitmaps,
    long long* __restrict__ offsets, T* __restrict__ out_values)
{
    const long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 3;
    const int r = (int)(threadIdx.x & 7u);
    // a bad indptr (the first kernel's error) would send the walk anywhere
    const bool live = w < capacity && w < *nwindows
                      && (WRITE || !(*(volatile int*)errors & BMSPARSE_ERR_INDPTR));
    if (!WRITE && !live && w < capacity && r == 0) counts[w] = 0;
    if (!__any_sync(BMSPARSE_FULL_WARP, live)) return;
    long long i = 0, k = 0, begin = 0, end = 0, nwin = 1;
    if (live) {
        const u64 item = windows[w];
        i = (long long)(item >> 32);
        k = (long long)(item & 0xffffffffull);
        const long long row = (i << 3) + r;
        if (row < nrows) { begin = indptr[row]; end = indptr[row + 1]; }
        nwin = csr_windows(indptr, nrows, i, window);
    }
    const long long row0 = i << 3, row = row0 + r;
    // the window's block columns [lo, hi): bounds at evenly spaced entries
    // of the longest row (the first of equal ones)
    const long long longest = group_reduce<8>(((end - begin) << 3) | (7 - r),
                                              [](long long x, long long y) { return max(x, y); });
    const long long start = __shfl_sync(BMSPARSE_FULL_WARP, begin, 7 - (int)(longest & 7), 8);
    unsigned int lo = 0, hi = BMSPARSE_NO_BLOCK_COL;
    int err = 0;
    if (nwin > 1) {
        const long long len = longest >> 3;
        if (k > 0) lo = (unsigned int)((unsigned long long)indices[start + k * len / nwin] >> 3);
        if (k + 1 < nwin)
            hi = (unsigned int)((unsigned long long)indices[start + (k + 1) * len / nwin] >> 3);
        // the walks below assume canonical rows: each window checks an equal
        // share of every row's entries instead
        const long long n = end - begin;
        if (!WRITE)
            err = csr_entry_errors(indices, begin, begin + k * n / nwin,
                                   begin + (k + 1) * n / nwin, row, nrows, ncols);
    }
    long long cur = lo ? begin + count_below(indices, begin, end, (long long)lo << 3) : begin;
    // value number of the window's first entry: the block row's first, and
    // every entry of its rows before the window
    long long at = group_reduce<8>(cur - begin, [](long long x, long long y) { return x + y; });
    if (live) at += indptr[row0];
    long long prev = cur > begin ? (long long)indices[cur - 1] : -1;
    long long col = 0;
    unsigned int bc = BMSPARSE_NO_BLOCK_COL;  // block column of the next entry in the window
    auto step = [&]() {
        bc = BMSPARSE_NO_BLOCK_COL;
        if (cur >= end) return;
        col = indices[cur];
        const int e = csr_entry_error(row, col, prev, nrows, ncols);
        err |= e;
        if (e & ~BMSPARSE_ERR_NOT_CANONICAL) return;  // out of range: this lane stops
        if ((unsigned long long)col >> 3 < hi) bc = (unsigned int)(col >> 3);
    };
    step();
    long long block = WRITE && live ? counts[w] : 0;
    for (;;) {
        const unsigned int m = group_reduce<8>(bc, [](unsigned int x, unsigned int y) {
            return min(x, y);
        });
        if (!__any_sync(BMSPARSE_FULL_WARP, m != BMSPARSE_NO_BLOCK_COL)) break;
        unsigned int byte = 0;
        int n = 0;
        // this row's entries in block column m (none when the group is done:
        // then bc and m are both BMSPARSE_NO_BLOCK_COL)
        while (bc == m && m != BMSPARSE_NO_BLOCK_COL) {
            byte |= 1u << (col & 7);
            ++n;
            prev = col;
            ++cur;
            step();
        }
        if constexpr (WRITE) {
            const u64 bitmap = group_reduce<8>((u64)byte << (8 * r),
                                               [](u64 x, u64 y) { return x | y; });
            if (m != BMSPARSE_NO_BLOCK_COL) {
                if (r == 0) {
                    keys[block] = make_key((u64)i, (u64)m);
                    bitmaps[block] = bitmap;
                    offsets[block] = at;
                }
                if (out_values) {  // row r's entries of the block are a run of its values
                    T* out = out_values + at + __popcll(bitmap & ((1ull << (8 * r)) - 1ull));
                    for (int j = 0; j < n; ++j) out[j] = values[cur - n + j];
                }
                at += __popcll(bitmap);
            }
        }
        if (m != BMSPARSE_NO_BLOCK_COL) ++block;
    }
    if (!WRITE && live && r == 0) counts[w] = block;
    if (!WRITE && err) atomicOr(errors, err);
}

//   I         indptr[nrows + 1], indices[nnz] - CSR arrays
//   long long nrows, ncols, window
//   u64       windows[capacity]; long long nwindows[1] - from bmsparse_convert_csr_windows
//   long long capacity         - windows' length (nbrows + nnz / window + 1)
//   int       errors[1]        - in/out: BMSPARSE_ERR_* bits are added
//   long long counts[capacity] - out: blocks of each window (0 past nwindows)
// Launch: 8 threads per window of capacity, blocks of a multiple of 32.
template <typename I>
__global__ void bmsparse_convert_csr_count(
    const I* __restrict__ indptr, const I* __restrict__ indices, long long nrows,
    long long ncols, long long window, const u64* __restrict__ windows,
    const long long* __restrict__ nwindows, long long capacity, int* errors,
    long long* __restrict__ counts)
{
    csr_walk<double, I, false>(indptr, indices, nullptr, nrows, ncols, window, windows,
                               nwindows, capacity, errors, counts, nullptr, nullptr, nullptr,
                               nullptr);
}

// The block-row pointer and the longest block row of the walk's blocks, from
// the windows and the scan of their counts, before the sync that reads the
// block count: a product of the fresh matrix then needs neither
// bmsparse_convert_row_pointer nor a sync of its own to choose its strategy.
// A block row's windows are consecutive, so its blocks are
// [starts[w], starts[w + nwin]) for its first window w.
//   (indptr, nrows, window, windows, nwindows, capacity as for the count kernel)
//   int       errors[1]        - a bad indptr gave every block row one window
//   long long starts[capacity + 1] - exclusive scan of the count kernel's counts
//   long long nbrows
//   long long brow_ptr[nbrows + 1] - out
//   u64       longest[1]       - zeroed; out: the most blocks in one block row
// Launch: one thread per window of capacity, blocks of a multiple of 32.
template <typename I>
__global__ void bmsparse_convert_csr_rows(
    const I* __restrict__ indptr, long long nrows, long long window,
    const u64* __restrict__ windows, const long long* __restrict__ nwindows,
    long long capacity, const int* errors, const long long* __restrict__ starts,
    long long nbrows, long long* __restrict__ brow_ptr, u64* __restrict__ longest)
{
    const long long w = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    u64 length = 0;
    if (w < capacity && w < *nwindows) {
        const u64 item = windows[w];
        if ((item & 0xffffffffull) == 0) {  // the block row's first window
            const long long i = (long long)(item >> 32);
            const long long nwin = (*(volatile const int*)errors & BMSPARSE_ERR_INDPTR)
                                       ? 1 : csr_windows(indptr, nrows, i, window);
            const long long end = starts[w + nwin];
            brow_ptr[i] = starts[w];
            if (i == nbrows - 1) brow_ptr[nbrows] = end;
            length = (u64)(end - starts[w]);
        }
    }
    // one atomic a warp (one a block row on one word took 105 us on the surrogate)
    length = group_reduce<32>(length, [](u64 x, u64 y) { return max(x, y); });
    if ((threadIdx.x & 31u) == 0 && length) atomicMax(longest, length);
}

//   (the arguments of bmsparse_convert_csr_count, checked by it, and)
//   T         values[nnz]      - values, or null for a pattern matrix
//   long long starts[capacity + 1] - exclusive scan of the count kernel's counts
//   long long nnz
//   u64       keys[nblocks], bitmaps[nblocks] - out
//   long long offsets[nblocks + 1] - out
//   T         out_values[nnz]  - out, in bitmap order (unless null)
template <typename T, typename I>
__global__ void bmsparse_convert_csr_write(
    const I* __restrict__ indptr, const I* __restrict__ indices, const T* __restrict__ values,
    long long nrows, long long ncols, long long window, const u64* __restrict__ windows,
    const long long* __restrict__ nwindows, long long capacity,
    long long* __restrict__ starts, long long nnz, long long nblocks, u64* __restrict__ keys,
    u64* __restrict__ bitmaps, long long* __restrict__ offsets, T* __restrict__ out_values)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) offsets[nblocks] = nnz;
    csr_walk<T, I, true>(indptr, indices, values, nrows, ncols, window, windows, nwindows,
                         capacity, nullptr, starts, keys, bitmaps, offsets, out_values);
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
    length = group_reduce<32>(length, [](unsigned long long x, unsigned long long y) {
        return max(x, y);
    });
    if (length && (threadIdx.x & 31u) == 0u) atomicMax(longest, length);
}
