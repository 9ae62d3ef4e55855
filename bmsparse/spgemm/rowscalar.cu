// rowscalar.cu - stages 1 to 3 of SpGEMM by B's scalar rows, for operands of
// one or two entries per block (power-law graphs).
//
// There the pairs of 8x8 blocks outnumber the multiplies (ca-CondMat: 13.6 M
// pairs for 4.1 M multiplies) and each output value's thread in multiply.cu
// walks all of its block's pairs, most of which give it no term. Here the
// work follows the multiplies: every entry A(r, j) of a block row meets the
// entries of B's row j, read from B in CSR form (bitmap_to_csr), as in
// Gustavson's algorithm. A thread block takes a unit, a block row i of A (B
// has at most 2^16 - 1 block columns, so one unit covers the row), and
// spreads the unit's terms over all of its threads (rs_for_windows), so a hub
// entry's long B row is every thread's work.
//
// - bmsparse_rowscalar_count: each term (r, k) ORs bit (r, k & 7) into
//   acc[k >> 3], one word of shared memory per output block column; the
//   unit's non-empty words are its blocks. Writes `sizes` as rowdense.cu
//   does (no pairs).
// - bmsparse_rowscalar_blocks: the same accumulation, then C's keys,
//   bitmaps and value offsets of the unit in column order, placed by `scan`;
//   c_ptr is written as zeros (no pairs). For structural products.
// - bmsparse_rowscalar_product: the blocks kernel, then C's values of the
//   unit, with the accumulator left in shared memory as the map column ->
//   bitmap and a second map column -> value offset in the unit: the terms
//   come again, a batch of RS_THREADS at a time, and are added into the
//   unit's values (in shared memory when they fit) in ascending j (see the
//   kernel), the order of multiply.cu and of scipy: C is bit for bit the one
//   of the other paths. Its thread blocks take the units most terms first:
// - bmsparse_rowscalar_order, between the count and the product: the units
//   in bands of their terms (the count's `sizes`), in one thread block.
//
// Arguments (csr.h style):
//   u64       a_keys[a_nblocks], a_bitmaps[a_nblocks] - blocks of A (canonical)
//   long long a_ptr[nbrows + 1]       - A's block-row pointer
//   long long nbrows, parts, span     - block rows of A, units per block row
//                                       (1), B's block columns (< 2^16; 8 bytes
//                                       of shared memory each for the count
//                                       and blocks, 12 for the product)
//   int       b_indptr[b_nrows + 1], b_indices[b_nnz] - B in CSR form
//   long long sizes[3 * nbrows]       - out of count: as rowdense.cu, but the
//                                       unit's terms in place of its pairs
//   long long scan[3 * nbrows + 1]    - exclusive scan of sizes
//   long long write_pairs             - ignored (rowdense.cu's blocks arguments)
//   u64       c_keys[c_nblocks], c_bitmaps[c_nblocks] - out / in: blocks of C
//   long long c_offsets[c_nblocks + 1] - out / in: value offsets of C's blocks
//   long long c_ptr[c_nblocks + 1]    - out: zeros
//   long long task_a, task_b, warp_block - ignored
//   long long a_offsets[a_nblocks + 1]; T a_values[a_nnz] - A's values (not
//                                       read when !S::reads_values)
//   T         b_values[b_nnz]         - B's values in CSR order (likewise)
//   long long capacity                - values of a unit summed in shared memory
//                                       (even); a unit with more sums in c_values
//   T         c_values[c_nnz]         - out: values of C
//   unsigned long long zero_values[1], zero_flag[1] - as multiply.cu
// The product kernel takes the blocks kernel's arguments, then a_offsets,
// a_values, b_values, capacity, c_values, zero_values, zero_flag, and
//   long long order[nbrows]           - the units, most terms first
//   unsigned long long next[1]        - zero: the units taken so far
// The order kernel takes
//   long long terms[nbrows]           - each unit's terms (sizes + 2 nbrows)
//   long long nbrows
//   long long order[nbrows + 1]       - out: the product's `order`, and 0 at
//                                       order[nbrows] (its `next`)
// Launch: BMSPARSE_ROWSCALAR_THREADS (512) threads per thread block (the
// order kernel: one thread block, no dynamic shared memory), any
// number of thread blocks (each loops over the units
// u = blockIdx.x + s * gridDim.x, or in the product those it takes in
// `order`); count and blocks with 8 * span bytes of
// dynamic shared memory, the product with (12 * span rounded up to 16) +
// capacity * sizeof(T).
// Work: per unit, O(terms + span / threads) steps of a thread block in
// each kernel, plus per batch of the product one round per term of the
// batch meeting an already met value.
// Deterministic: the accumulator is an OR; each value is summed in a fixed
// order, no atomics on values.
// Layout: see ../_cuda/bitmap.cuh.
// 512 threads a thread block (rowdense.cu's helpers follow): the product
// kernel's maps take 12 bytes of shared memory per block column, two thread
// blocks an SM for musae_git, and its batches wait on barriers, so warps
// come from bigger thread blocks
#ifndef BMSPARSE_ROWSCALAR_THREADS
#define BMSPARSE_ROWSCALAR_THREADS 512
#endif
#define BMSPARSE_ROWDENSE_THREADS BMSPARSE_ROWSCALAR_THREADS
// registers of the blocks and product kernels: under __launch_bounds__ alone
// ptxas gave them 32 and spilled (its choice, not a limit); two thread
// blocks an SM fit 64
#ifndef BMSPARSE_ROWSCALAR_REGISTERS
#define BMSPARSE_ROWSCALAR_REGISTERS 64
#endif
#include "rowdense.cuh"
#include "../_cuda/grid.cuh"
#include "../_cuda/semiring.cuh"

#define RS_THREADS BMSPARSE_ROWDENSE_THREADS

#define RS_ARGS                                                                         \
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,                  \
    const long long* __restrict__ a_ptr, long long nbrows, long long parts,             \
    long long span, const int* __restrict__ b_indptr, const int* __restrict__ b_indices

// A unit's terms are taken in windows, flat over the whole thread block: a
// chunk of RS_THREADS A blocks, its entries RS_THREADS at a time (an entry
// per thread: its B row), their terms RS_THREADS at a time (a term per
// thread, its entry found by a binary search of the windows' scans). A hub
// entry's long B row is then every thread's work, not one group's chain
// while the rest wait (the first form, groups of 8 lanes per A block, took
// 1.5 ms to count musae_git: benchmarks/NOTES.md, session 23).
struct rs_window {
    u64 bitmaps[RS_THREADS];        // the chunk's A blocks
    unsigned int cols[RS_THREADS];  // their block columns
    int block_end[RS_THREADS];      // inclusive scan of the blocks' entries
    int term_end[RS_THREADS];       // inclusive scan of the window's entries' terms
    int first[RS_THREADS];          // each entry's first term in b_indices
    int row[RS_THREADS];            // each entry's row in the unit
};

// index of the first of the n ends above x (ends ascending, x < ends[n - 1])
__device__ __forceinline__ int rs_owner(const int* ends, int n, int x) {
    int i = 0;  // how many ends are <= x: at most n - 1 <= RS_THREADS - 1
#pragma unroll
    for (int step = RS_THREADS / 2; step > 0; step >>= 1)
        if (i + step <= n && ends[i + step - 1] <= x) i += step;
    return i;
}

// term t of the window: its place in b_indices; e gets its entry
__device__ __forceinline__ int rs_term(const rs_window& w, int nentries, int t, int& e) {
    e = rs_owner(w.term_end, nentries, t);
    return w.first[e] + t - (e ? w.term_end[e - 1] : 0);
}

// The unit's terms (A blocks [a0, a1)) window by window, in the order of
// A's entries (block, then bit: for one row of C, ascending inner index j),
// then of B's row: entry(slot, block, bitmap, bit) for each entry of a
// window, by the thread of that slot, then window(entries, terms) by every
// thread; barriers around both, so the window's arrays are stable in it.
template <typename E, typename W>
__device__ __forceinline__ void rs_for_windows(long long a0, long long a1,
                                               const u64* __restrict__ a_keys,
                                               const u64* __restrict__ a_bitmaps,
                                               const int* __restrict__ b_indptr,
                                               rs_window& w, E entry, W window)
{
    for (long long base = a0; base < a1; base += RS_THREADS) {
        const long long a = base + threadIdx.x;
        const u64 bm = a < a1 ? a_bitmaps[a] : 0ull;
        const int nblocks = (int)min((long long)RS_THREADS, a1 - base);
        long long nentries;
        const int before = (int)rd_block_scan(__popcll(bm), nentries);
        w.bitmaps[threadIdx.x] = bm;
        w.cols[threadIdx.x] = a < a1 ? block_col(a_keys[a]) : 0u;
        w.block_end[threadIdx.x] = before + __popcll(bm);
        __syncthreads();
        for (int e0 = 0; e0 < (int)nentries; e0 += RS_THREADS) {
            const int e = e0 + (int)threadIdx.x;
            int first = 0, length = 0, row = 0;
            if (e < (int)nentries) {
                const int b = rs_owner(w.block_end, nblocks, e);
                const u64 owner = w.bitmaps[b];
                const int bit = nth_set_bit(owner, e - (b ? w.block_end[b - 1] : 0));
                const long long j = ((long long)w.cols[b] << 3) + (bit & 7);
                first = b_indptr[j];
                length = b_indptr[j + 1] - first;
                row = bit >> 3;
                entry((int)threadIdx.x, base + b, owner, bit);
            }
            long long nterms;
            const int start = (int)rd_block_scan(length, nterms);
            w.term_end[threadIdx.x] = start + length;
            w.first[threadIdx.x] = first;
            w.row[threadIdx.x] = row;
            __syncthreads();
            window(min(RS_THREADS, (int)nentries - e0), (int)nterms);
            __syncthreads();
        }
    }
}

// the unit's accumulator filled with its terms, RS_UNROLL terms a thread
// at a time (their loads in flight together); returns how many terms; ends
// with a barrier if the unit has A blocks (else it has written nothing)
#define RS_UNROLL 4
__device__ __forceinline__ long long rs_accumulate(u64* acc, long long a0, long long a1,
                                              const u64* __restrict__ a_keys,
                                              const u64* __restrict__ a_bitmaps,
                                              const int* __restrict__ b_indptr,
                                              const int* __restrict__ b_indices, rs_window& w)
{
    long long terms = 0;
    rs_for_windows(a0, a1, a_keys, a_bitmaps, b_indptr, w,
                   [](int, long long, u64, int) {},
                   [&](int nentries, int nterms) {
        terms += nterms;
        for (int t0 = (int)threadIdx.x; t0 < nterms; t0 += RS_UNROLL * RS_THREADS) {
            int k[RS_UNROLL], row[RS_UNROLL];
#pragma unroll
            for (int i = 0; i < RS_UNROLL; ++i) {
                const int t = t0 + i * RS_THREADS;
                k[i] = -1;
                if (t < nterms) {
                    int e;
                    k[i] = __ldg(b_indices + rs_term(w, nentries, t, e));
                    row[i] = w.row[e];
                }
            }
#pragma unroll
            for (int i = 0; i < RS_UNROLL; ++i) {
                // the 32-bit half of the word (little-endian): a 64-bit OR in
                // shared memory is no single instruction
                const int bit = bit_of(row[i], k[i] & 7);
                if (k[i] >= 0)
                    atomicOr(reinterpret_cast<unsigned int*>(acc + (k[i] >> 3)) + (bit >> 5),
                             1u << (bit & 31));
            }
        }
    });
    return terms;
}

#define RS_ACCUMULATE(acc, u)                                                          \
    rs_accumulate(acc, a_ptr[u], a_ptr[(u) + 1], a_keys, a_bitmaps, b_indptr, b_indices, w)

extern "C" __global__ void __launch_bounds__(BMSPARSE_ROWDENSE_THREADS)
bmsparse_rowscalar_count(RS_ARGS, long long* __restrict__ sizes)
{
    __shared__ rs_window w;
    u64* acc = rd_shared;
    rd_clear_all<false>(acc, nullptr, span);
    __syncthreads();
    for (long long u = blockIdx.x; u < nbrows; u += gridDim.x) {
        const long long terms = RS_ACCUMULATE(acc, u);
        rd_write_sizes<false>(acc, span, nbrows, u, terms, sizes);
    }
}

// one thread closes C's pointers (blocks and product kernels)
__device__ __forceinline__ void rs_close(long long n, const long long* __restrict__ scan,
                                         long long* __restrict__ c_offsets,
                                         long long* __restrict__ c_ptr) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && n > 0) {
        const long long c_nblocks = scan[n];
        c_offsets[c_nblocks] = scan[2 * n] - c_nblocks;
        c_ptr[c_nblocks] = 0;
    }
}

// C's blocks of unit u from its closed accumulator, in column order, placed
// by `scan`: RS_THREADS columns at a time, a thread per column, so the
// stores of a warp are adjacent (a thread per run of columns stored 32
// scattered words per instruction: 0.64 ms of musae_git's 0.99). col_at,
// when not null, gets each block's value offset in the unit; CLEAR clears
// the accumulator as it is read. The stores follow the last tile's barriers:
// a thread reads its own columns only, and what reads col_at waits on a
// barrier of its own.
template <bool CLEAR>
__device__ __forceinline__ void rs_write_blocks(u64* acc, int* col_at, long long span,
                                                long long n, long long u,
                                                const long long* __restrict__ scan,
                                                u64* __restrict__ c_keys,
                                                u64* __restrict__ c_bitmaps,
                                                long long* __restrict__ c_offsets,
                                                long long* __restrict__ c_ptr)
{
    long long q = scan[u], v = scan[n + u] - scan[n];
    const long long v0 = v;
    for (long long c0 = 0; c0 < span; c0 += RS_THREADS) {
        const long long c = c0 + threadIdx.x;
        const u64 bm = c < span ? acc[c] : 0ull;
        if (CLEAR && bm) acc[c] = 0ull;
        long long total;
        const long long before = rd_block_scan(rd_column_item(bm, 0u), total);
        if (bm) {
            const long long at = q + rd_item_blocks(before);
            const long long value = v + rd_item_values(before);
            c_keys[at] = make_key((u64)u, (u64)c);
            c_bitmaps[at] = bm;
            c_offsets[at] = value;
            c_ptr[at] = 0;
            if (col_at) col_at[c] = (int)(value - v0);
        }
        q += rd_item_blocks(total);
        v += rd_item_values(total);
    }
}

// The units the product takes first: bands of terms, by the terms' bit
// length and the two bits below the top one (the units of one band differ by
// less than 1.25x; the terms below 4 are bands of their own), most terms
// first. Which thread block sums a unit does not change its values, so the
// order within a band is free.
#define RS_BANDS 256
static_assert(RS_BANDS <= RS_THREADS, "the bands are scanned a thread each");

__device__ __forceinline__ int rs_band(long long terms)
{
    if (terms < 4) return RS_BANDS - 1 - (int)terms;
    const int top = 63 - __clzll(terms);  // at least 2
    return RS_BANDS - 1 - (4 * (top - 1) + (int)((terms >> (top - 2)) & 3));
}

extern "C" __global__ void __launch_bounds__(RS_THREADS)
bmsparse_rowscalar_order(const long long* __restrict__ terms, long long n,
                         long long* __restrict__ order)
{
    __shared__ unsigned long long at[RS_BANDS];
    __shared__ u64 warp_sums[32];
    const int x = (int)threadIdx.x;
    for (int b = x; b < RS_BANDS; b += RS_THREADS) at[b] = 0;
    __syncthreads();
    for (long long u = x; u < n; u += RS_THREADS) atomicAdd(&at[rs_band(terms[u])], 1ull);
    __syncthreads();
    u64 total;
    const u64 before = block_exclusive_scan(x < RS_BANDS ? at[x] : 0ull, warp_sums, &total);
    if (x < RS_BANDS) at[x] = before;
    __syncthreads();
    for (long long u = x; u < n; u += RS_THREADS)
        order[atomicAdd(&at[rs_band(terms[u])], 1ull)] = u;
    if (x == 0) order[n] = 0;  // the product's count of units taken
}

extern "C" __global__ void __maxnreg__(BMSPARSE_ROWSCALAR_REGISTERS)
bmsparse_rowscalar_blocks(RS_ARGS, const long long* __restrict__ scan, long long,
                          u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps,
                          long long* __restrict__ c_offsets, long long* __restrict__ c_ptr,
                          long long*, long long*, long long*)
{
    __shared__ rs_window w;
    u64* acc = rd_shared;
    rd_clear_all<false>(acc, nullptr, span);
    rs_close(nbrows, scan, c_offsets, c_ptr);
    __syncthreads();
    for (long long u = blockIdx.x; u < nbrows; u += gridDim.x) {
        RS_ACCUMULATE(acc, u);
        rs_write_blocks<true>(acc, nullptr, span, nbrows, u, scan, c_keys, c_bitmaps, c_offsets,
                              c_ptr);
    }
}

// Values: the unit's C blocks are mapped by column in shared memory (bitmap,
// value offset in the unit), its values summed in shared memory when they
// are at most `capacity` (else in place in c_values). The window's terms
// come RS_THREADS at a time, term t0 + x to thread x. Terms of one batch
// meeting one value (one row of C, two entries j) are added in thread
// order: each term finds its value's slot in a hash table of the batch
// (linear probing, twice as many slots as terms), and in each round the
// lowest pending thread of every slot adds its term; batches are closed by
// barriers. So each value is summed in ascending j, the order of
// multiply.cu and of scipy: C is bit for bit the one of the other paths.
#define RS_SLOTS (2 * RS_THREADS)
#define RS_NONE 0x7fffffff

// the slot of value `at` in the batch's table
__device__ __forceinline__ int rs_slot(int* keys, int at) {
    int s = (int)(((unsigned int)at * 2654435761u) >> 12) & (RS_SLOTS - 1);
    for (;;) {
        const int old = atomicCAS(keys + s, -1, at);
        if (old == -1 || old == at) return s;
        s = (s + 1) & (RS_SLOTS - 1);
    }
}

template <typename T, typename S>
__global__ void __maxnreg__(BMSPARSE_ROWSCALAR_REGISTERS)
bmsparse_rowscalar_product(RS_ARGS, const long long* __restrict__ scan, long long,
                           u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps,
                           long long* __restrict__ c_offsets, long long* __restrict__ c_ptr,
                           long long*, long long*, long long*,
                           const long long* __restrict__ a_offsets,
                           const T* __restrict__ a_values, const T* __restrict__ b_values,
                           long long capacity, T* __restrict__ c_values,
                           unsigned long long* __restrict__ zero_values,
                           unsigned long long* zero_flag, const long long* __restrict__ order,
                           unsigned long long* next)
{
    __shared__ rs_window w;
    __shared__ long long taken;
    // raw bytes: a T with constructors (complex) cannot be a __shared__ array
    __shared__ __align__(16) unsigned char entry_bytes[RS_THREADS * sizeof(T)];
    T* entry_value = reinterpret_cast<T*>(entry_bytes);
    __shared__ int slot_key[RS_SLOTS];
    __shared__ int slot_first[2][RS_SLOTS];  // by round parity: the lowest pending thread
    // dynamic shared memory: the accumulator (then C's bitmap of each block
    // column), the value offset in the unit of each column's block (written
    // for the unit's blocks only), the unit's values (capacity, 16-byte aligned)
    u64* acc = rd_shared;
    int* col_at = (int*)(acc + span);
    T* held = (T*)((unsigned char*)rd_shared + ((12 * span + 15) & ~15ll));
    const int x = (int)threadIdx.x;
    const long long n = nbrows;
    unsigned long long zeros = 0;
    for (long long c = x; c < span; c += RS_THREADS) acc[c] = 0;
    rs_close(n, scan, c_offsets, c_ptr);
    for (;;) {
        // the units in `order` (most terms first), each to the next thread
        // block free: a static share left the thread blocks 2.3x (musae_git)
        // to 2.8x (squirrel) apart in terms, longest first at most 1.6x
        if (x == 0) taken = (long long)atomicAdd(next, 1ull);
        __syncthreads();  // (the last unit's barriers closed its reads of `taken`)
        if (taken >= n) break;
        const long long u = order[taken];
        RS_ACCUMULATE(acc, u);
        rs_write_blocks<false>(acc, col_at, span, n, u, scan, c_keys, c_bitmaps, c_offsets,
                               c_ptr);
        const u64* col_bitmap = acc;
        const long long v0 = scan[n + u] - scan[n], nv = scan[n + u + 1] - scan[n + u];
        T* sums = nv <= capacity ? held : c_values + v0;
        for (long long v = x; v < nv; v += RS_THREADS) sums[v] = S::template identity<T>();
        // (the windows' first scan is a barrier: the maps and acc are ready)
        rs_for_windows(a_ptr[u], a_ptr[u + 1], a_keys, a_bitmaps, b_indptr, w,
                       [&](int slot, long long a, u64 bm, int bit) {
            if constexpr (S::reads_values)
                entry_value[slot] = a_values[a_offsets[a] + value_index(bm, bit)];
        }, [&](int nentries, int nterms) {
            // each batch loads the next one's terms before its barriers,
            // which the loads then overlap
            int k_next = 0, e_next = 0;
            T b_next = S::template identity<T>();
            auto load = [&](int t) {
                if (t < nterms) {
                    const int p = rs_term(w, nentries, t, e_next);
                    k_next = b_indices[p];
                    if constexpr (S::reads_values) b_next = b_values[p];
                }
            };
            load(x);
            for (int t0 = 0; t0 < nterms; t0 += RS_THREADS) {
                const bool live = t0 + x < nterms;
                const int k = k_next, e = e_next;
                const T b_value = b_next;
                load(t0 + RS_THREADS + x);
                int at = 0;
                T term = S::template identity<T>();
                if (live) {
                    at = col_at[k >> 3] + value_index(col_bitmap[k >> 3], bit_of(w.row[e], k & 7));
                    if constexpr (S::reads_values)
                        term = S::mul(entry_value[e], b_value);
                    else
                        term = S::mul(T(1), T(1));
                }
                slot_key[x] = slot_key[x + RS_THREADS] = -1;
                slot_first[0][x] = slot_first[0][x + RS_THREADS] = RS_NONE;
                slot_first[1][x] = slot_first[1][x + RS_THREADS] = RS_NONE;
                __syncthreads();
                const int s = live ? rs_slot(slot_key, at) : 0;
                bool pending = live;
                if (pending) atomicMin(&slot_first[0][s], x);
                for (int parity = 0;; parity ^= 1) {
                    __syncthreads();  // the round's minima are in
                    if (pending) {
                        if (slot_first[parity][s] == x) {
                            sums[at] = S::add(sums[at], term);
                            pending = false;
                        } else {
                            slot_first[parity ^ 1][s] = RS_NONE;  // the next round's
                        }
                    }
                    // most batches meet no value twice: done after one round
                    if (!__syncthreads_or(pending)) break;
                    if (pending) atomicMin(&slot_first[parity ^ 1][s], x);
                }
            }
        });
        for (long long v = x; v < nv; v += RS_THREADS) {
            const T value = sums[v];
            zeros += is_zero(value);
            if (sums == held) c_values[v0 + v] = value;
        }
        __syncthreads();  // the maps are read no more
        for (long long c = x; c < span; c += RS_THREADS) acc[c] = 0;
        __syncthreads();
    }
    if (zeros) {
        atomicAdd(zero_values, zeros);
        if (zero_flag) *zero_flag = 1ull;
    }
}
