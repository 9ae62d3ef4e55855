// multiply.cuh - the multiply of multiply.cu as a device function of one
// output value, so that a kernel doing more than one stage in one launch
// (lean.cu) runs the same sums in the same order.
// Arguments: see multiply.cu; every lane of a warp calls with its own v, the
// warp's values consecutive from a multiple of 32. `out` says where value v
// goes: BitmapOrder (C's values, in bit order) or CsrOrder (C in CSR).
// `pairs` how the pairs come: PairsByIndex (the blocks' indices) or
// PairRecords (the blocks' bitmaps and offsets).
#pragma once
#include "../_cuda/bitmap.cuh"
#include "../_cuda/csr.cuh"
#include "../_cuda/semiring.cuh"

// C's values are written once and not read again by the kernel: stores that
// evict first, so that A's and B's values stay in L2
template <typename T>
__device__ __forceinline__ void stream_store(T* at, T value) {
    if constexpr (sizeof(T) == 8) {
        __stcs(reinterpret_cast<long long*>(at), *reinterpret_cast<const long long*>(&value));
    } else if constexpr (sizeof(T) == 4) {
        __stcs(reinterpret_cast<int*>(at), *reinterpret_cast<const int*>(&value));
    } else {
        *at = value;
    }
}

// value v of C written at v of C's values
template <typename T>
struct BitmapOrder {
    T* __restrict__ values;
    template <typename I>
    __device__ __forceinline__ I place(I v, I, u64, int) const { return v; }
    template <typename I>
    __device__ __forceinline__ void store(I at, T value) const { stream_store(values + at, value); }
};

// value v of C written to CSR arrays, its column index beside it: C's keys
// and the places of its row segments (convert.cu's scan) say where
template <typename T, typename I>
struct CsrOrder {
    struct Place { long long at; I col; };
    const u64* __restrict__ keys;
    const long long* __restrict__ brow_ptr;
    const I* __restrict__ places;
    I* __restrict__ indices;
    T* __restrict__ data;
    __device__ __forceinline__ Place place(long long, long long q, u64 bitmap, int bit) const {
        const u64 key = keys[q];
        return {csr_place(brow_ptr, places, block_row(key), q, bitmap, bit),
                (I)(((long long)block_col(key) << 3) + (bit & 7))};
    }
    __device__ __forceinline__ void store(Place p, T value) const {
        indices[p.at] = p.col;
        data[p.at] = value;
    }
};

// a block's value offset: loaded where it is needed (from its place in the
// offsets), or already in hand
template <typename I>
__device__ __forceinline__ I offset_of(const long long* __restrict__ at) { return (I)*at; }
template <typename I>
__device__ __forceinline__ I offset_of(I offset) { return offset; }

// the terms of one pair for value (r, c), added to acc in ascending inner
// index: row r of A's block (bitmap a_bm, value offset a_off; `above` masks
// the rows above r) against column c of B's block (b_bm, b_off); `terms` is
// row r of A's block AND column c of B's, not empty
template <typename T, typename S, typename I>
__device__ __forceinline__ void add_terms(T& acc, int r, int c, u64 above, unsigned int terms,
                                          u64 a_bm, I a_off, const T* __restrict__ a_values,
                                          u64 b_bm, I b_off, const T* __restrict__ b_values)
{
    if constexpr (!S::reads_values) {
        for (; terms; terms &= terms - 1u) acc = S::add(acc, T(1));
        return;
    }
    // row r of A's block is a run of its values: entry (r, t) is the run's
    // value number popc(row r below t)
    const unsigned int a_row = row_bits(a_bm, r);
    const T* a_val = a_values + (a_off + (I)__popcll(a_bm & above));
    const T* b_val = b_values + b_off;
    for (; terms; terms &= terms - 1u) {
        const int t = __ffs(terms) - 1;
        acc = S::add(acc, S::mul(a_val[__popc(a_row & ((1u << t) - 1u))],
                                 b_val[value_index(b_bm, bit_of(t, c))]));
    }
}

// add_terms for a pair given by its blocks, which it tests for terms first;
// offsets given as pointers are read only when the pair has terms
template <typename T, typename S, typename I, typename Off>
__device__ __forceinline__ void add_pair_terms(T& acc, int r, int c, u64 above, u64 a_bm,
                                               Off a_off, const T* __restrict__ a_values,
                                               u64 b_bm, Off b_off,
                                               const T* __restrict__ b_values)
{
    const unsigned int terms = row_bits(a_bm, r) & col_bits(b_bm, c);
    if (terms)
        add_terms<T, S, I>(acc, r, c, above, terms, a_bm, offset_of<I>(a_off), a_values, b_bm,
                           offset_of<I>(b_off), b_values);
}

// A pair as the indices of its two blocks (task_a, task_b): a pair's blocks
// are two steps of loads away, the indices and then the blocks.
struct PairsByIndex {
    static constexpr bool records = false;
    const u64* __restrict__ a_bitmaps;
    const long long* __restrict__ a_offsets;
    const u64* __restrict__ b_bitmaps;
    const long long* __restrict__ b_offsets;
    const long long* __restrict__ task_a;
    const long long* __restrict__ task_b;
};

// A pair as the bitmaps and value offsets of its two blocks, written where
// the blocks were read already (count.cu): one step of loads. The multiply
// waits on its chain of loads (a step is a round trip to L2 or memory), and
// this step is paid once per pair. B's bitmap comes transposed too, in the
// same 16 bytes as the offsets, so that a column of B's block is a row of
// the transpose: col_bits took 8 of the tiles kernel's 34 instructions a
// pair (ncu, surrogate). With the tiles' warp per block below, the
// surrogate's multiply stage 0.571 -> 0.543 ms and its count 0.210 -> 0.218
// (H200, session 43).
struct PairRecords {
    static constexpr bool records = true;
    const ulonglong2* __restrict__ bitmaps;    // (A's, B's) of each pair
    const ulonglong2* __restrict__ columns;    // (B's transposed, offsets: A's in the
                                               // low 32 bits, B's in the high; below 2^31)
};

// the terms of value (r, c) of the pairs [p, p1), given as records
template <typename T, typename S, typename I>
__device__ __forceinline__ void add_record_terms(T& acc, int r, int c, I p, I p1,
                                                 const PairRecords& pairs,
                                                 const T* __restrict__ a_values,
                                                 const T* __restrict__ b_values)
{
    for (; p < p1; ++p) {
        const ulonglong2 bm = __ldcs(pairs.bitmaps + p);
        const ulonglong2 columns = __ldcs(pairs.columns + p);
        const unsigned int terms = row_bits(bm.x, r) & row_bits(columns.x, c);
        // (the rows above r made here: kept across the loop, they spilled)
        if (terms)
            add_terms<T, S, I>(acc, r, c, (1ull << (r << 3)) - 1ull, terms, bm.x,
                               (I)(unsigned int)columns.y,
                               a_values, bm.y, (I)(unsigned int)(columns.y >> 32), b_values);
    }
}

// the value kernels' arguments after the pairs that say where C's blocks
// and values lie (multiply.cu, multiply_csr.cu)
#define BMSPARSE_C_BLOCKS_ARGS                                                               \
    const long long *__restrict__ c_first, const long long *__restrict__ c_last,             \
        long long last_shift, const u64 *__restrict__ c_bitmaps,                             \
        const long long *__restrict__ c_offsets, long long c_nblocks,                        \
        const long long *__restrict__ warp_block,                                            \
        const unsigned long long *__restrict__ warp_starts, long long c_nnz

// I: the type of the kernel's index arithmetic, int where every index and
// size fits in 31 bits (the host checks, see multiply.py's index_type), else
// long long. The arrays stay 64-bit; with int every address is one
// IMAD.WIDE instead of a 64-bit add pair, which was about a third of the
// instructions (ncu, surrogate: 315 warp instructions per 32 values).
// AHEAD: each pair's blocks are loaded one pair ahead and its indices two,
// so that a value's chain of loads is about one round trip per pair instead
// of three: for launches whose longest thread is the kernel's time (lean.cu,
// a small product in one wave of threads). It costs instructions and
// registers, which a product of many waves pays for (multiply.cu: without).
// warp_starts: mark_warp_starts' words, or null to find the lanes' blocks
// from C's offsets (one more step of loads).
template <typename T, typename S, typename I, typename Out, typename Pairs,
          bool AHEAD = false>
__device__ __forceinline__ void multiply_value(
    I v, const Pairs& pairs, const T* __restrict__ a_values, const T* __restrict__ b_values,
    const long long* __restrict__ c_first, const long long* __restrict__ c_last,
    long long last_shift, const u64* __restrict__ c_bitmaps,
    const long long* __restrict__ c_offsets, long long c_nblocks,
    const long long* __restrict__ warp_block,
    const unsigned long long* __restrict__ warp_starts, long long c_nnz,
    const Out& out, unsigned long long* __restrict__ zero_values,
    unsigned long long* zero_flag)
{
    static_assert(!(AHEAD && Pairs::records), "AHEAD loads pairs by index");
    const I nnz = (I)c_nnz;
    const I warp_first = v & ~(I)31;
    if (warp_first >= nnz) return;  // whole warps leave together
    const int lane = (int)(threadIdx.x & 31u);
    const I q0 = (I)__ldcs(warp_block + (warp_first >> 5));
    I q;
    int index;  // of value v in block q
    if (warp_starts) {
        // the starts at or before this lane: their number is the lane's
        // block after q0, the last the block's first lane
        const u64 word = __ldcs(warp_starts + (warp_first >> 5));
        const unsigned int starts = (unsigned int)(word >> 32) & (0xffffffffu >> (31 - lane));
        q = q0 + __popc(starts);
        index = starts ? lane - (31 - __clz(starts)) : (int)(unsigned int)word + lane;
    } else {
        // The blocks starting inside this warp's 32 values: lane k reads the
        // offset of block q0 + 1 + k; as offsets strictly increase, the set of
        // distances (offset - warp_first) < 32 marks where blocks start, and a
        // lane's block is q0 plus the starts at or before it.
        const I base0 = (I)c_offsets[q0];
        const I next = q0 + 1 + lane <= (I)c_nblocks ? (I)c_offsets[q0 + 1 + lane] : nnz + 32;
        const I distance = next - warp_first;  // at least 1: value warp_first is block q0's
        const unsigned int starts = __reduce_or_sync(0xffffffffu,
                                                     distance < 32 ? 1u << distance : 0u);
        const int before = __popc(starts & (0xffffffffu >> (31 - lane)));  // starts at <= lane
        const I start = __shfl_sync(0xffffffffu, next, (before + 31) & 31);
        q = q0 + before;
        index = (int)(v - (before ? start : base0));
    }
    const unsigned int live = __ballot_sync(0xffffffffu, v < nnz);
    if (v >= nnz) return;
    const u64 c_bm = __ldcs(c_bitmaps + q);
    const int bit = nth_set_bit(c_bm, index);
    const int r = bit >> 3, c = bit & 7;
    // loaded before the sum, so that its loads overlap the pairs'
    const auto at = out.place(v, q, c_bm, bit);
    // the bits of A's rows above r: where row r's values start in a block
    const u64 above = (1ull << (r << 3)) - 1ull;
    T acc = S::template identity<T>();
    const I p1 = (I)__ldcs(c_last + q + (I)last_shift);
    I p = (I)__ldcs(c_first + q);
    if constexpr (Pairs::records) {
        add_record_terms<T, S, I>(acc, r, c, p, p1, pairs, a_values, b_values);
    } else if constexpr (AHEAD) {
        const auto& [a_bitmaps, a_offsets, b_bitmaps, b_offsets, task_a, task_b] = pairs;
        // in hand while pair p's terms are added: its blocks, and the
        // indices of pair p + 1; loads past the last pair read pair p again
        I ia = 0, ib = 0, ia_next = 0, ib_next = 0, a_off = 0, b_off = 0;
        u64 a_bm = 0ull, b_bm = 0ull;
        if (p < p1) {
            ia = (I)task_a[p], ib = (I)task_b[p];
            const I p_next = p + 1 < p1 ? p + 1 : p;
            ia_next = (I)task_a[p_next], ib_next = (I)task_b[p_next];
            a_bm = a_bitmaps[ia], b_bm = b_bitmaps[ib];
            if constexpr (S::reads_values) a_off = (I)a_offsets[ia], b_off = (I)b_offsets[ib];
        }
        for (; p < p1; ++p) {
            const u64 a_bm_next = a_bitmaps[ia_next], b_bm_next = b_bitmaps[ib_next];
            I a_off_next = 0, b_off_next = 0;
            if constexpr (S::reads_values)
                a_off_next = (I)a_offsets[ia_next], b_off_next = (I)b_offsets[ib_next];
            const I p_after = p + 2 < p1 ? p + 2 : p;
            const I ia_after = (I)task_a[p_after], ib_after = (I)task_b[p_after];
            add_pair_terms<T, S, I>(acc, r, c, above, a_bm, a_off, a_values, b_bm, b_off,
                                    b_values);
            a_bm = a_bm_next, b_bm = b_bm_next, a_off = a_off_next, b_off = b_off_next;
            ia_next = ia_after, ib_next = ib_after;
        }
    } else {
        const auto& [a_bitmaps, a_offsets, b_bitmaps, b_offsets, task_a, task_b] = pairs;
        for (; p < p1; ++p) {
            const I ia = (I)task_a[p], ib = (I)task_b[p];
            add_pair_terms<T, S, I>(acc, r, c, above, a_bitmaps[ia], a_offsets + ia, a_values,
                                    b_bitmaps[ib], b_offsets + ib, b_values);
        }
    }
    out.store(at, acc);
    const unsigned int zeros = __ballot_sync(live, is_zero(acc));
    if (zeros && lane == __ffs(live) - 1) {
        atomicAdd(zero_values, (unsigned long long)__popc(zeros));
        if (zero_flag) *zero_flag = 1ull;
    }
}

// The multiply by tiles: a thread block takes TILE_VALUES consecutive values
// of C, loads the bitmaps, value offsets and pair runs of their output blocks
// once (coalesced, TILE_BLOCKS at a time) into shared memory, and a warp per
// block writes the (block, bit) of each of its values into the tile's slots,
// a lane per bit. A thread per value then sums as multiply_value does, in the
// same order, but finds its block and bit in two shared loads: no warp
// words, no nth_set_bit, no scattered loads of C's blocks. Products of few
// pairs a value gain most (the surrogate 706 -> 580 us, H200; see
// multiply.py's by_tiles for where it loses). A thread per block row writing
// its row's slots in a loop took 13% of the instructions, its lanes waiting
// on the longest row (ncu, session 43).
#define BMSPARSE_TILE_THREADS 256
#define BMSPARSE_TILE_VALUES (8 * BMSPARSE_TILE_THREADS)
#define BMSPARSE_TILE_BLOCKS 256
// slots before and after the tile's: a block may start up to 63 values
// before the tile or end up to 64 after it, and its slots are written
// without a test
#define BMSPARSE_TILE_MARGIN 64

struct TileBlocks {
    u64 bitmaps[BMSPARSE_TILE_BLOCKS];
    int offsets[BMSPARSE_TILE_BLOCKS + 1];  // value offset less the tile's first value
    int first[BMSPARSE_TILE_BLOCKS];        // pair run
    int last[BMSPARSE_TILE_BLOCKS];
    // (block of the chunk << 6) | bit, a value each, from -TILE_MARGIN
    int slots[BMSPARSE_TILE_VALUES + 2 * BMSPARSE_TILE_MARGIN];
};

// Tile blockIdx.x of C's values; every index below 2^31 (the host checks).
// C's blocks q0 .. q1 (inclusive) hold the tile's values; they are taken
// TILE_BLOCKS at a time, so that a tile of many small blocks still fits.
template <typename T, typename S, typename Out>
__device__ __forceinline__ void multiply_tile(
    const PairRecords& pairs, const T* __restrict__ a_values, const T* __restrict__ b_values,
    const long long* __restrict__ c_first, const long long* __restrict__ c_last,
    long long last_shift, const u64* __restrict__ c_bitmaps,
    const long long* __restrict__ c_offsets, long long c_nblocks,
    const long long* __restrict__ warp_block, long long c_nnz, const Out& out,
    unsigned long long* __restrict__ zero_values, unsigned long long* zero_flag,
    TileBlocks& tile)
{
    constexpr int NT = BMSPARSE_TILE_THREADS, NB = BMSPARSE_TILE_BLOCKS;
    const int tid = (int)threadIdx.x;
    const int nnz = (int)c_nnz;
    const int v0 = (int)blockIdx.x * BMSPARSE_TILE_VALUES;
    const int n = nnz - v0 < BMSPARSE_TILE_VALUES ? nnz - v0 : BMSPARSE_TILE_VALUES;
    // the block of value v0 + TILE_VALUES is the first block of a warp
    const int q1 = v0 + n < nnz ? (int)__ldcs(warp_block + ((v0 + n) >> 5)) : (int)c_nblocks - 1;
    const int qa = (int)__ldcs(warp_block + (v0 >> 5));
    int* slots = tile.slots + BMSPARSE_TILE_MARGIN;
    unsigned int zeros = 0;
    for (int q0 = qa; q0 <= q1; q0 += NB) {
        const int nb = q1 - q0 + 1 < NB ? q1 - q0 + 1 : NB;
        if (q0 != qa) __syncthreads();  // the last chunk's values are done with the slots
        for (int i = tid; i <= nb; i += NT) {
            const int q = q0 + i;
            tile.offsets[i] = (int)__ldcs(c_offsets + q) - v0;
            if (i < nb) {
                tile.bitmaps[i] = __ldcs(c_bitmaps + q);
                tile.first[i] = (int)__ldcs(c_first + q);
                tile.last[i] = (int)__ldcs(c_last + q + (int)last_shift);
            }
        }
        __syncthreads();
        // the chunk's values in the tile: [lo, hi)
        const int lo = tile.offsets[0] > 0 ? tile.offsets[0] : 0;
        const int hi = tile.offsets[nb] < n ? tile.offsets[nb] : n;
        // lane k takes bits k and k + 32 of the warp's blocks
        for (int i = tid >> 5; i < nb; i += NT / 32) {
            const int lane = tid & 31;
            const unsigned int below = (1u << lane) - 1u;
            const u64 bitmap = tile.bitmaps[i];
            const unsigned int low = (unsigned int)bitmap, high = (unsigned int)(bitmap >> 32);
            const int at = tile.offsets[i];
            if ((low >> lane) & 1u) slots[at + __popc(low & below)] = (i << 6) | lane;
            if ((high >> lane) & 1u)
                slots[at + __popc(low) + __popc(high & below)] = (i << 6) | 32 | lane;
        }
        __syncthreads();
        for (int at0 = lo; at0 < hi; at0 += NT) {
            const int at = at0 + tid;
            T acc = S::template identity<T>();
            if (at < hi) {
                const int slot = slots[at];
                const int b = slot >> 6, bit = slot & 63, r = bit >> 3, c = bit & 7;
                add_record_terms<T, S, int>(acc, r, c, tile.first[b], tile.last[b], pairs,
                                            a_values, b_values);
                out.store(out.place(v0 + at, q0 + b, tile.bitmaps[b], bit), acc);
            }
            zeros += __popc(__ballot_sync(0xffffffffu, at < hi && is_zero(acc)));
        }
    }
    if (zeros && (tid & 31) == 0) {
        atomicAdd(zero_values, (unsigned long long)zeros);
        if (zero_flag) *zero_flag = 1ull;
    }
}
