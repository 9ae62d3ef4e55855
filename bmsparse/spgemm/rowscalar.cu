// rowscalar.cu - stages 1 to 3 of SpGEMM by B's scalar rows, for operands of
// one or two entries per block (power-law graphs).
//
// There the pairs of 8x8 blocks outnumber the multiplies (ca-CondMat: 13.6 M
// pairs for 4.1 M multiplies) and each output value's thread in multiply.cu
// walks all of its block's pairs, most of which give it no term. Here the
// work follows the multiplies: every entry A(r, j) of a block row meets the
// entries of B's row j, read from B in CSR form (bitmap_to_csr), as in
// Gustavson's algorithm. A thread block takes a unit, a block row i of A (B
// has at most 2^16 - 1 block columns, so one unit covers the row).
//
// - bmsparse_rowscalar_count: each term (r, k) ORs bit (r, k & 7) into
//   acc[k >> 3], one word of shared memory per output block column; the
//   unit's non-empty words are its blocks. Writes `sizes` as rowdense.cu
//   does (no pairs).
// - bmsparse_rowscalar_blocks: the same accumulation, then C's keys,
//   bitmaps and value offsets of the unit in column order, placed by `scan`;
//   c_ptr is written as zeros (no pairs).
// - bmsparse_rowscalar_values: the unit's rows of C are cut into items (a
//   row, or a range of block columns of a row holding more than an eighth
//   of the unit's terms), which its warps take in turn. A warp walks its
//   row's A entries in ascending inner index j, 32 terms at a time, and adds
//   them into C's values (in shared memory when the unit's fit), at each
//   value's position found from per-unit maps column -> bitmap, offset in
//   shared memory. Lanes meeting one value add in lane order and __syncwarp
//   orders the batches, so every value is summed in ascending j, the order
//   of multiply.cu and of scipy: C is bit for bit the one of the other paths.
//
// Arguments (csr.h style):
//   u64       a_keys[a_nblocks], a_bitmaps[a_nblocks] - blocks of A (canonical)
//   long long a_ptr[nbrows + 1]       - A's block-row pointer
//   long long nbrows, parts, span     - block rows of A, units per block row
//                                       (1), B's block columns (< 2^16; 8 bytes
//                                       of shared memory each for the count
//                                       and blocks, 4 for the values)
//   int       b_indptr[b_nrows + 1], b_indices[b_nnz] - B in CSR form
//   long long sizes[3 * nbrows]       - out of count: as rowdense.cu (pairs 0)
//   long long scan[3 * nbrows + 1]    - exclusive scan of sizes
//   long long write_pairs             - ignored (rowdense.cu's blocks arguments)
//   u64       c_keys[c_nblocks], c_bitmaps[c_nblocks] - out / in: blocks of C
//   long long c_offsets[c_nblocks + 1] - out / in: value offsets of C's blocks
//   long long c_ptr[c_nblocks + 1]    - out: zeros
//   long long task_a, task_b, warp_block - ignored
//   long long a_offsets[a_nblocks + 1]; T a_values[a_nnz] - A's values (not
//                                       read when !S::reads_values)
//   T         b_values[b_nnz]         - B's values in CSR order (likewise)
//   long long c_nblocks
//   long long capacity                - values of a unit summed in shared memory
//                                       (even); a unit with more sums in c_values
//   T         c_values[c_nnz]         - out: values of C
//   unsigned long long zero_values[1], zero_flag[1] - as multiply.cu
// Launch: BMSPARSE_ROWDENSE_THREADS (256: 8 warps) threads per thread block,
// any number of thread blocks (each loops over the units
// u = blockIdx.x + s * gridDim.x); the values kernel with
// (2 * 256 + capacity) * sizeof(T) + 12 * span bytes of dynamic shared memory.
// Work: per unit, O(multiplies + span / threads) in the count and blocks;
// in the values, per item O(A blocks of the unit + its terms / 32) steps of a
// warp, plus two binary searches per entry in a row cut into ranges.
// Deterministic: the accumulator is an OR; each value is summed in a fixed
// order by one warp, no atomics on values.
// Layout: see ../_cuda/bitmap.cuh.
#include "rowdense.cuh"
#include "../_cuda/semiring.cuh"

// lanes that share one A entry's B row in the count and blocks passes: rows
// of B in these graphs hold a few entries to a few thousand. (Threads each
// walking their entries' rows, with the rows of more than 32 entries queued
// for the whole thread block, took 1.1-1.9x longer: benchmarks/NOTES.md.)
#define RS_GROUP 8

#define RS_ARGS                                                                         \
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,                  \
    const long long* __restrict__ a_ptr, long long nbrows, long long parts,             \
    long long span, const int* __restrict__ b_indptr, const int* __restrict__ b_indices

// f(k, bit) for every term of block row i of A (A blocks [a0, a1)): k the
// term's output block column, bit its place in that block; groups of
// RS_GROUP lanes take A blocks, their lanes the entries of B's row j
template <typename F>
__device__ __forceinline__ void rs_for_terms(long long a0, long long a1,
                                             const u64* __restrict__ a_keys,
                                             const u64* __restrict__ a_bitmaps,
                                             const int* __restrict__ b_indptr,
                                             const int* __restrict__ b_indices, F f)
{
    const int group = (int)(threadIdx.x / RS_GROUP), lane = (int)(threadIdx.x % RS_GROUP);
    for (long long a = a0 + group; a < a1; a += BMSPARSE_ROWDENSE_THREADS / RS_GROUP) {
        const long long j0 = (long long)block_col(a_keys[a]) << 3;
        for (u64 bm = a_bitmaps[a]; bm; bm &= bm - 1ull) {
            const int bit = __ffsll((long long)bm) - 1;
            const long long j = j0 + (bit & 7);
            const int p1 = b_indptr[j + 1];
            for (int p = b_indptr[j] + lane; p < p1; p += RS_GROUP) {
                const int k = b_indices[p];
                f((unsigned int)k >> 3, bit_of(bit >> 3, k & 7));
            }
        }
    }
}

// the unit's accumulator filled with its terms; the barrier closes it
#define RS_ACCUMULATE(acc, u)                                                          \
    rs_for_terms(a_ptr[u], a_ptr[(u) + 1], a_keys, a_bitmaps, b_indptr, b_indices,     \
                 [&](unsigned int k, int bit) { atomicOr(acc + k, 1ull << bit); });    \
    __syncthreads()

extern "C" __global__ void __launch_bounds__(BMSPARSE_ROWDENSE_THREADS)
bmsparse_rowscalar_count(RS_ARGS, long long* __restrict__ sizes)
{
    u64* acc = rd_shared;
    for (long long c = threadIdx.x; c < span; c += BMSPARSE_ROWDENSE_THREADS) acc[c] = 0;
    __syncthreads();
    for (long long u = blockIdx.x; u < nbrows; u += gridDim.x) {
        RS_ACCUMULATE(acc, u);
        rd_write_sizes<false>(acc, span, nbrows, u, 0, sizes);
    }
}

extern "C" __global__ void __launch_bounds__(BMSPARSE_ROWDENSE_THREADS)
bmsparse_rowscalar_blocks(RS_ARGS, const long long* __restrict__ scan, long long,
                          u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps,
                          long long* __restrict__ c_offsets, long long* __restrict__ c_ptr,
                          long long*, long long*, long long*)
{
    u64* acc = rd_shared;
    const long long n = nbrows;
    for (long long c = threadIdx.x; c < span; c += BMSPARSE_ROWDENSE_THREADS) acc[c] = 0;
    if (blockIdx.x == 0 && threadIdx.x == 0 && n > 0) {  // one thread closes the pointers
        const long long c_nblocks = scan[n];
        c_offsets[c_nblocks] = scan[2 * n] - c_nblocks;
        c_ptr[c_nblocks] = 0;
    }
    __syncthreads();
    for (long long u = blockIdx.x; u < n; u += gridDim.x) {
        RS_ACCUMULATE(acc, u);
        // C's blocks of the unit: the non-empty entries of acc in column order
        long long c0, c1;
        rd_share(span, c0, c1);
        long long blocks = 0, values = 0;
        for (long long c = c0; c < c1; ++c) {
            const u64 bm = acc[c];
            blocks += bm != 0ull;
            values += __popcll(bm);
        }
        long long total;
        long long q = scan[u] + rd_block_scan(blocks, total);
        long long v = scan[n + u] - scan[n] + rd_block_scan(values, total);
        for (long long c = c0; c < c1; ++c) {
            const u64 bm = acc[c];
            if (!bm) continue;
            acc[c] = 0;
            c_keys[q] = make_key((u64)u, (u64)c);
            c_bitmaps[q] = bm;
            c_offsets[q] = v;
            c_ptr[q] = 0;
            ++q;
            v += __popcll(bm);
        }
        __syncthreads();
    }
}

#define RS_FULL 0xffffffffu

// inclusive sum of x over lanes 0..lane
__device__ __forceinline__ int rs_warp_scan(int x) {
    const int lane = (int)(threadIdx.x & 31u);
    for (int d = 1; d < 32; d <<= 1) {
        const int left = __shfl_up_sync(RS_FULL, x, d);
        if (lane >= d) x += left;
    }
    return x;
}

// the lane holding flat item f of the warp's items, each lane's count ending
// at `end` (its inclusive scan): the first lane whose end passes f (31 past
// the last item); its first item is at `start`
__device__ __forceinline__ int rs_owner(int end, int f, int& start) {
    int lo = 0;
#pragma unroll
    for (int step = 16; step > 0; step >>= 1) {
        if (__shfl_sync(RS_FULL, end, lo + step - 1) <= f) lo += step;
    }
    const int before = __shfl_sync(RS_FULL, end, lo > 0 ? lo - 1 : 0);
    start = lo > 0 ? before : 0;
    return lo;
}

// first index in sorted x[0, n) whose value is >= v (n if none)
__device__ __forceinline__ int rs_lower_bound(const int* __restrict__ x, int n, int v) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (x[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// How the unit's rows are cut for the warps: row r's terms (the lengths of
// the B rows its entries meet) over an eighth of the unit's give it that
// many parts, ranges of block columns (a hub row would otherwise be one
// warp's chain while seven wait); an empty row none. parts[r] gets the
// exclusive scan, parts[8] the total. Ends with a barrier.
__device__ __forceinline__ void rs_row_parts(long long a0, long long a1,
                                             const u64* __restrict__ a_bitmaps,
                                             const u64* __restrict__ a_keys,
                                             const int* __restrict__ b_indptr, int* parts)
{
    __shared__ long long row_terms[8];
    const int r = (int)(threadIdx.x >> 5);  // warp r sums row r's terms
    long long terms = 0;
    for (long long a = a0 + (threadIdx.x & 31u); a < a1; a += 32) {
        const long long j0 = (long long)block_col(a_keys[a]) << 3;
        for (unsigned int row = row_bits(a_bitmaps[a], r); row; row &= row - 1u) {
            const long long j = j0 + __ffs(row) - 1;
            terms += b_indptr[j + 1] - b_indptr[j];
        }
    }
    for (int d = 16; d > 0; d >>= 1) terms += __shfl_xor_sync(RS_FULL, terms, d);
    if ((threadIdx.x & 31u) == 0) row_terms[r] = terms;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long total = 0;
        for (int i = 0; i < 8; ++i) total += row_terms[i];
        const long long share = (total + 7) / 8;
        int sum = 0;
        for (int i = 0; i < 8; ++i) {
            parts[i] = sum;
            sum += row_terms[i] ? (int)((row_terms[i] + share - 1) / share) : 0;
        }
        parts[8] = sum;
    }
    __syncthreads();
}

// Values: the unit's C blocks are mapped by column in shared memory (bitmap,
// value offset in the unit), its values summed in shared memory when they
// are at most `capacity` (else in place in c_values). Warp r walks row r's
// A entries 32 A blocks at a time: their entries are spread one per lane,
// and those entries' terms (B's rows) 32 at a time, one per lane, in
// ascending j. Lanes whose terms meet one value (two entries j, one k) add
// them in lane order, by the lowest of them: each value is summed in
// ascending j.
template <typename T, typename S>
__global__ void __launch_bounds__(BMSPARSE_ROWDENSE_THREADS)
bmsparse_rowscalar_values(RS_ARGS, const long long* __restrict__ a_offsets,
                          const T* __restrict__ a_values, const T* __restrict__ b_values,
                          const u64* __restrict__ c_keys, const u64* __restrict__ c_bitmaps,
                          const long long* __restrict__ c_offsets, long long c_nblocks,
                          long long capacity, T* __restrict__ c_values,
                          unsigned long long* __restrict__ zero_values,
                          unsigned long long* zero_flag)
{
    // dynamic shared memory: each warp's 32 terms and 32 entry values, the
    // unit's values (capacity), then per block column its C bitmap and the
    // value offset of its block in the unit (written for the unit's blocks only)
    T* terms = (T*)rd_shared + (threadIdx.x & ~31u);
    T* entry_values = (T*)rd_shared + BMSPARSE_ROWDENSE_THREADS + (threadIdx.x & ~31u);
    T* held = (T*)rd_shared + 2 * BMSPARSE_ROWDENSE_THREADS;
    u64* col_bitmap = (u64*)(held + capacity);
    int* col_at = (int*)(col_bitmap + span);
    __shared__ long long unit_blocks[2];
    __shared__ int row_parts[9];  // exclusive scan of the rows' parts, then the total
    const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31u);
    unsigned long long zeros = 0;
    for (long long u = blockIdx.x; u < nbrows; u += gridDim.x) {
        if (threadIdx.x < 2) unit_blocks[threadIdx.x] =
            lower_bound(c_keys, c_nblocks, make_key((u64)u + threadIdx.x, 0));
        __syncthreads();
        const long long q0 = unit_blocks[0], q1 = unit_blocks[1];
        const long long v0 = c_offsets[q0], nv = c_offsets[q1] - v0;
        for (long long q = q0 + threadIdx.x; q < q1; q += BMSPARSE_ROWDENSE_THREADS) {
            const unsigned int c = block_col(c_keys[q]);
            col_bitmap[c] = c_bitmaps[q];
            col_at[c] = (int)(c_offsets[q] - v0);
        }
        T* acc = nv <= capacity ? held : c_values + v0;
        for (long long v = threadIdx.x; v < nv; v += BMSPARSE_ROWDENSE_THREADS)
            acc[v] = S::template identity<T>();
        const long long a1 = a_ptr[u + 1];
        rs_row_parts(a_ptr[u], a1, a_bitmaps, a_keys, b_indptr, row_parts);
        for (int item = warp; item < row_parts[8]; item += BMSPARSE_ROWDENSE_THREADS / 32) {
            // item: part `part` of `parts` of row r, its block columns [c_lo, c_hi)
            int r = 0;
            while (row_parts[r + 1] <= item) ++r;
            const int part = item - row_parts[r], parts = row_parts[r + 1] - row_parts[r];
            const int k_lo = (int)(8 * (span * part / parts));
            const int k_hi = (int)(8 * (span * (part + 1) / parts));
            for (long long base = a_ptr[u]; base < a1; base += 32) {
                // the row's entries among 32 A blocks, one lane's each
                const long long a = base + lane;
                const u64 a_bm = a < a1 ? a_bitmaps[a] : 0ull;
                const unsigned int row = row_bits(a_bm, r);
                const int entry_end = rs_warp_scan(__popc(row));
                const int entries = __shfl_sync(RS_FULL, entry_end, 31);
                for (int e0 = 0; e0 < entries; e0 += 32) {
                    // entry e0 + lane: its A value and B row
                    int start;
                    const int owner = rs_owner(entry_end, e0 + lane, start);
                    const unsigned int owner_row = __shfl_sync(RS_FULL, row, owner);
                    const u64 owner_bm = __shfl_sync(RS_FULL, a_bm, owner);
                    int p0 = 0, length = 0;
                    if (e0 + lane < entries) {
                        const int t = nth_set_bit((u64)owner_row, e0 + lane - start);
                        const long long oa = base + owner;
                        const long long j = ((long long)block_col(a_keys[oa]) << 3) + t;
                        p0 = b_indptr[j];
                        length = b_indptr[j + 1] - p0;
                        if (parts > 1) {  // the part's columns of B's row j
                            const int skip = rs_lower_bound(b_indices + p0, length, k_lo);
                            p0 += skip;
                            length = rs_lower_bound(b_indices + p0, length - skip, k_hi);
                        }
                        if constexpr (S::reads_values)
                            entry_values[lane] = a_values[a_offsets[oa] + value_index(owner_bm,
                                                                                     bit_of(r, t))];
                    }
                    __syncwarp();
                    const int term_end = rs_warp_scan(length);
                    const int nterms = __shfl_sync(RS_FULL, term_end, 31);
                    for (int f0 = 0; f0 < nterms; f0 += 32) {
                        // term f0 + lane
                        int first;
                        const int e = rs_owner(term_end, f0 + lane, first);
                        const int p = __shfl_sync(RS_FULL, p0, e) + (f0 + lane - first);
                        const bool live = f0 + lane < nterms;
                        int at = -1;
                        if (live) {
                            const int k = b_indices[p];
                            at = col_at[k >> 3] + value_index(col_bitmap[k >> 3], bit_of(r, k & 7));
                            if constexpr (S::reads_values)
                                terms[lane] = S::mul(entry_values[e], b_values[p]);
                            else
                                terms[lane] = S::mul(T(1), T(1));
                        }
                        const unsigned int peers = __match_any_sync(RS_FULL, at);
                        __syncwarp();
                        if (live && __ffs(peers) - 1 == lane) {
                            T x = acc[at];
                            for (unsigned int m = peers; m; m &= m - 1u)
                                x = S::add(x, terms[__ffs(m) - 1]);
                            acc[at] = x;
                        }
                        __syncwarp();  // the next terms come after these adds
                    }
                }
            }
        }
        __syncthreads();
        for (long long v = threadIdx.x; v < nv; v += BMSPARSE_ROWDENSE_THREADS) {
            const T x = acc[v];
            zeros += is_zero(x);
            if (acc == held) c_values[v0 + v] = x;
        }
        __syncthreads();  // the maps and unit_blocks are the next unit's
    }
    if (zeros) {
        atomicAdd(zero_values, zeros);
        if (zero_flag) *zero_flag = 1ull;
    }
}
