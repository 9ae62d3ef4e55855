// rowdense.cuh - the passes of rowdense.cu as device functions, so that a
// kernel doing more than one stage in one launch (lean.cu) runs the same
// code: the thread block's units u = blockIdx.x, blockIdx.x + gridDim.x, ...
// Arguments and layout: see rowdense.cu.
#pragma once
#include "../_cuda/bitmap.cuh"

#ifndef BMSPARSE_ROWDENSE_THREADS
#define BMSPARSE_ROWDENSE_THREADS 256
#endif
#define RD_WARPS (BMSPARSE_ROWDENSE_THREADS / 32)
// thread blocks per SM the kernels are compiled for: at 256 threads and no
// minimum, ptxas held the blocks kernel to 64 registers and spilled; 3 gives
// it 80 (shared memory holds 2 to 8 blocks per SM, by the unit's span)
#define RD_MIN_BLOCKS 3

// the unit's accumulator (u64 acc[span]) and per-column counters (unsigned
// int aux[span]), then for the TOUCHED kernels the touched words
extern __shared__ u64 rd_shared[];

// B blocks a lane loads at once in rd_for_useful_pairs
#ifndef RD_B_BATCH
#define RD_B_BATCH 4
#endif

// a pair being placed, packed in one word: its A block less the row's first
// (rows of fewer than 2^23 blocks) above its B block (B of fewer than 2^40),
// so that packed pairs of one column compare as their A blocks do
#define RD_PAIR_SHIFT 40
#define RD_PAIR_B ((1ull << RD_PAIR_SHIFT) - 1ull)

// the blocks of B's block row j in the unit's columns [k0, k1) (k1 may
// reach 2^32: the bound key is then row j + 1's first, past the row)
__device__ __forceinline__ void rd_b_range(const u64* __restrict__ b_keys,
                                           const long long* __restrict__ b_ptr, long long j,
                                           bool whole_row, unsigned long long k0,
                                           unsigned long long k1, long long& lo,
                                           long long& hi) {
    lo = b_ptr[j];
    hi = b_ptr[j + 1];
    if (!whole_row) {
        const u64 row = make_key((u64)j, 0);
        lo += lower_bound(b_keys + lo, hi - lo, row + k0);
        hi = lo + lower_bound(b_keys + lo, hi - lo, row + k1);
    }
}

// f(a, b, k, product) for every useful pair (A block a, B block b) of the
// unit with A blocks [a_begin, a_end), k its column in the unit and product
// its Boolean product: warps take A blocks, lanes the B blocks each meets.
// A warp's next 32 A blocks (a_begin + warp, then every RD_WARPS-th) are
// read by its 32 lanes at once, bitmaps and B row ranges, and handed out by
// shuffles: one round of loads per 32 A blocks, where a block at a time
// waited for two per block (a power-law unit of hundreds of A blocks of one
// or two entries is a chain of them: benchmarks/NOTES.md, session 24)
template <typename F>
__device__ __forceinline__ void rd_for_useful_pairs(
    long long a_begin, long long a_end, bool whole_row, unsigned long long k0,
    unsigned long long k1, const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,
    const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_ptr, F f)
{
    const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31u);
    for (long long first = a_begin + warp; first < a_end; first += 32 * RD_WARPS) {
        const long long mine = first + (long long)lane * RD_WARPS;
        u64 my_bm = 0ull;
        long long my_lo = 0, my_hi = 0;
        if (mine < a_end) {
            my_bm = a_bitmaps[mine];
            rd_b_range(b_keys, b_ptr, block_col(a_keys[mine]), whole_row, k0, k1, my_lo, my_hi);
        }
        const int count = (int)min(32ll, (a_end - first + RD_WARPS - 1) / RD_WARPS);
        for (int x = 0; x < count; ++x) {
            const u64 a_bm = __shfl_sync(0xffffffffu, my_bm, x);
            const long long lo = __shfl_sync(0xffffffffu, my_lo, x);
            const long long hi = __shfl_sync(0xffffffffu, my_hi, x);
            const unsigned int a_cols = nonempty_cols(a_bm);
            const long long a = first + (long long)x * RD_WARPS;
            if (hi - lo <= 32) {
                const long long b = lo + lane;
                if (b < hi) {
                    const u64 product = bool_product_by_columns(a_bm, a_cols, b_bitmaps[b]);
                    if (product) f(a, b, block_col(b_keys[b]) - (unsigned int)k0, product);
                }
                continue;
            }
            // a long B row (a hub's): RD_B_BATCH of the lane's B blocks loaded
            // before any is used, since f's shared atomics keep the compiler
            // from overlapping one block's loads with the last one's use, and
            // a hub unit's pairs are otherwise a chain of round trips per lane
            for (long long b0 = lo + lane; b0 < hi; b0 += 32 * RD_B_BATCH) {
                u64 bm[RD_B_BATCH], key[RD_B_BATCH];
#pragma unroll
                for (int j = 0; j < RD_B_BATCH; ++j) {
                    const long long b = b0 + 32ll * j;
                    bm[j] = b < hi ? b_bitmaps[b] : 0ull;
                    key[j] = b < hi ? b_keys[b] : 0ull;
                }
#pragma unroll
                for (int j = 0; j < RD_B_BATCH; ++j) {
                    const u64 product = bool_product_by_columns(a_bm, a_cols, bm[j]);
                    if (product) f(a, b0 + 32ll * j, block_col(key[j]) - (unsigned int)k0, product);
                }
            }
        }
    }
}

// rd_for_useful_pairs over the unit's A blocks, with the kernels' arguments
#define RD_FOR_USEFUL_PAIRS(f)                                                          \
    rd_for_useful_pairs(a0, a1, whole_row, k0, k1, a_keys, a_bitmaps, b_keys, b_bitmaps, \
                        b_ptr, f)

// block-wide sum of x (every thread receives it); the trailing barrier lets
// the caller reuse shared memory
__device__ __forceinline__ long long rd_block_sum(long long x) {
    __shared__ long long warp_sums[RD_WARPS];
    const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31u);
    for (int d = 16; d > 0; d >>= 1) x += __shfl_xor_sync(0xffffffffu, x, d);
    if (lane == 0) warp_sums[warp] = x;
    __syncthreads();
    long long total = 0;
#pragma unroll
    for (int w = 0; w < RD_WARPS; ++w) total += warp_sums[w];
    __syncthreads();
    return total;
}

// block-wide exclusive scan of x in thread order; `total` gets the sum
__device__ __forceinline__ long long rd_block_scan(long long x, long long& total) {
    __shared__ long long warp_sums[RD_WARPS];
    const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31u);
    long long inclusive = x;
    for (int d = 1; d < 32; d <<= 1) {
        const long long left = __shfl_up_sync(0xffffffffu, inclusive, d);
        if (lane >= d) inclusive += left;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    long long before = 0;
    total = 0;
#pragma unroll
    for (int w = 0; w < RD_WARPS; ++w) {
        before += w < warp ? warp_sums[w] : 0;
        total += warp_sums[w];
    }
    __syncthreads();
    return before + inclusive - x;
}

// this thread's contiguous share [c0, c1) of the unit's `width` columns, so
// that reading them in thread order reads them in column order
__device__ __forceinline__ void rd_share(long long width, long long& c0, long long& c1) {
    const long long per = (width + BMSPARSE_ROWDENSE_THREADS - 1) / BMSPARSE_ROWDENSE_THREADS;
    c0 = min(width, per * (long long)threadIdx.x);
    c1 = min(width, c0 + per);
}

// The touched kernels (TOUCHED) also keep a bitmap of the unit's columns
// whose accumulator became non-zero, one bit per column in 32-bit words
// after the counters (shared_bytes of rowdense.py), and visit only those:
// a unit of few output blocks in a wide accumulator (p2p-Gnutella31: about
// 70 of 7,824 columns) then reads and clears O(span / 32 + blocks) words,
// not O(span). The first OR into a column must return the old word, which
// costs the units of many pairs per column (email-Enron), hence two forms.
__device__ __forceinline__ long long rd_words(long long span) { return (span + 31) >> 5; }

// the shared memory past the counters: the touched words (TOUCHED) or the
// masks (MASKED, below), never both
__device__ __forceinline__ unsigned int* rd_touched(long long span) {
    return reinterpret_cast<unsigned int*>(reinterpret_cast<unsigned char*>(rd_shared) +
                                           12 * span);
}

// ORs a pair's product into column k's accumulator
template <bool TOUCHED>
__device__ __forceinline__ void rd_accumulate(u64* acc, unsigned int* touched, unsigned int k,
                                              u64 product) {
    if constexpr (TOUCHED) {
        if (!atomicOr(acc + k, product)) atomicOr(touched + (k >> 5), 1u << (k & 31u));
    } else {
        atomicOr(acc + k, product);
    }
}

// f(c) for every column c of the unit (with TOUCHED, every touched one),
// strided over the threads; with TOUCHED the thread then zeroes the words
// it read (no other thread reads them in the same loop)
template <bool TOUCHED, typename F>
__device__ __forceinline__ void rd_each_column(unsigned int* touched, long long span, F f) {
    if constexpr (TOUCHED) {
        for (long long w = threadIdx.x; w < rd_words(span); w += BMSPARSE_ROWDENSE_THREADS) {
            for (unsigned int bits = touched[w]; bits; bits &= bits - 1u)
                f((w << 5) + __ffs(bits) - 1);
            touched[w] = 0u;
        }
    } else {
        for (long long c = threadIdx.x; c < span; c += BMSPARSE_ROWDENSE_THREADS) f(c);
    }
}

// f(c) for this thread's contiguous share of the unit's columns (with
// TOUCHED, of its touched columns), in column order: read in thread order,
// the unit's columns come in column order
template <bool TOUCHED, typename F>
__device__ __forceinline__ void rd_my_columns(const unsigned int* touched, long long span, F f) {
    long long lo, hi;
    if constexpr (TOUCHED) {
        rd_share(rd_words(span), lo, hi);
        for (long long w = lo; w < hi; ++w) {
            for (unsigned int bits = touched[w]; bits; bits &= bits - 1u)
                f((w << 5) + __ffs(bits) - 1);
        }
    } else {
        rd_share(span, lo, hi);
        for (long long c = lo; c < hi; ++c) f(c);
    }
}

// zeroes the accumulator (and the counters with `aux`, the touched words with TOUCHED)
template <bool TOUCHED>
__device__ __forceinline__ void rd_clear_all(u64* acc, unsigned int* aux, long long span) {
    for (long long c = threadIdx.x; c < span; c += BMSPARSE_ROWDENSE_THREADS) {
        acc[c] = 0;
        if (aux) aux[c] = 0;
    }
    if constexpr (TOUCHED) {
        unsigned int* touched = rd_touched(span);
        for (long long w = threadIdx.x; w < rd_words(span); w += BMSPARSE_ROWDENSE_THREADS)
            touched[w] = 0u;
    }
}

#define RD_ARGS                                                                         \
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,                  \
    const long long* __restrict__ a_ptr, long long nbrows, long long parts,             \
    long long span, const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps,  \
    const long long* __restrict__ b_ptr

// the unit's row and column range; the range is cut at B's last column by
// the keys themselves, so k1 may pass it. (A 64-bit division is about 40
// instructions a warp, paid by every warp of every unit: none for whole rows)
#define RD_UNIT(u)                                                                      \
    const long long i = parts == 1 ? (u) : (u) / parts;                                 \
    const unsigned long long k0 = (unsigned long long)(((u) - i * parts) * span);      \
    const unsigned long long k1 = k0 + (unsigned long long)span;                        \
    const bool whole_row = parts == 1;                                                  \
    const long long a0 = a_ptr[i], a1 = a_ptr[i + 1]


// a column's block (0 or 1), values and pairs in one word, so that one block
// scan of the unit's columns places all three (three scans were about a
// fifth of the blocks kernel's instructions on p2p-Gnutella31, and four
// barriers a unit): blocks in bits 0-15 (span < 2^16), values in bits 16-37
// (at most 64 a column), pairs above (fewer than 2^25 a unit: see
// rowdense.py's MAX_ROW_BLOCKS)
__device__ __forceinline__ long long rd_column_item(u64 bm, unsigned int pairs) {
    return (long long)(bm != 0ull) | ((long long)__popcll(bm) << 16) | ((long long)pairs << 38);
}
__device__ __forceinline__ long long rd_item_blocks(long long p) { return p & 0xffff; }
__device__ __forceinline__ long long rd_item_values(long long p) { return (p >> 16) & 0x3fffff; }
__device__ __forceinline__ long long rd_item_pairs(long long p) { return p >> 38; }

// unit u's sizes from its closed accumulator (`sizes` as rowdense.cu: its
// blocks, values and `pairs`); clears the accumulator. OWN_PAIRS: `pairs`
// is this thread's share (fewer than 2^25 in all), summed with the blocks
// and values in one block sum; else the unit's total
template <bool TOUCHED, bool OWN_PAIRS = false>
__device__ __forceinline__ void rd_write_sizes(u64* acc, long long span, long long n,
                                               long long u, long long pairs,
                                               long long* __restrict__ sizes)
{
    long long items = OWN_PAIRS ? rd_column_item(0ull, (unsigned int)pairs) : 0;
    rd_each_column<TOUCHED>(rd_touched(span), span, [&](long long c) {
        items += rd_column_item(acc[c], 0u);
        acc[c] = 0;
    });
    items = rd_block_sum(items);  // its barriers also end the clearing
    if (threadIdx.x == 0) {
        sizes[u] = rd_item_blocks(items);
        sizes[n + u] = rd_item_values(items);
        sizes[2 * n + u] = OWN_PAIRS ? rd_item_pairs(items) : pairs;
    }
}

// bmsparse_rowdense_count's pass; leaves the accumulator cleared
template <bool TOUCHED>
__device__ __forceinline__ void rd_count_units(RD_ARGS, long long* __restrict__ sizes)
{
    u64* acc = rd_shared;
    unsigned int* touched = rd_touched(span);
    const long long n = nbrows * parts;
    rd_clear_all<TOUCHED>(acc, nullptr, span);
    __syncthreads();
    for (long long u = blockIdx.x; u < n; u += gridDim.x) {
        RD_UNIT(u);
        long long useful = 0;
        RD_FOR_USEFUL_PAIRS([&](long long, long long, unsigned int k, u64 product) {
            rd_accumulate<TOUCHED>(acc, touched, k, product);
            ++useful;
        });
        __syncthreads();  // the accumulation closed
        rd_write_sizes<TOUCHED, true>(acc, span, n, u, useful, sizes);
    }
}

// The masked blocks kernel (MASKED) keeps, per column of the unit, a mask of
// the unit's A blocks that meet it (`mask_words` 32-bit words per column,
// after the counters; bit x: A block a0 + x). A pair's rank among its
// column's pairs in ascending A block is then the popcount of the mask below
// its A block: it is written straight to its place, without the placement by
// cursors, the ranks by comparison (O(n^2) per column: squirrel's ~50 pairs
// per output block) and the rewrite.

// zeroes the masked blocks kernel's masks (`words` per column)
__device__ __forceinline__ void rd_clear_masks(unsigned int* masks, long long span,
                                               long long words) {
    for (long long w = threadIdx.x; w < span * words; w += BMSPARSE_ROWDENSE_THREADS)
        masks[w] = 0u;
}

// bmsparse_rowdense_blocks's pass; clears the accumulator and counters
// first, and leaves them cleared
template <bool TOUCHED, bool MASKED = false>
__device__ __forceinline__ void rd_blocks_units(
    RD_ARGS, const long long* __restrict__ scan, long long write_pairs,
    u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps, long long* __restrict__ c_offsets,
    long long* __restrict__ c_ptr, long long* __restrict__ task_a,
    long long* __restrict__ task_b, long long* __restrict__ warp_block,
    long long mask_words = 0)
{
    static_assert(!(TOUCHED && MASKED), "the touched words and the masks share their place");
    u64* acc = rd_shared;
    unsigned int* aux = (unsigned int*)(rd_shared + span);
    unsigned int* touched = rd_touched(span);
    unsigned int* masks = touched;  // the same place: TOUCHED and MASKED exclude each other
    const long long n = nbrows * parts;
    rd_clear_all<TOUCHED>(acc, aux, span);
    if constexpr (MASKED) rd_clear_masks(masks, span, mask_words);
    if (blockIdx.x == 0 && threadIdx.x == 0 && n > 0) {  // one thread closes the pointers
        const long long c_nblocks = __ldcg(scan + n);
        c_offsets[c_nblocks] = __ldcg(scan + 2 * n) - c_nblocks;
        c_ptr[c_nblocks] = __ldcg(scan + 3 * n) - __ldcg(scan + 2 * n);
    }
    __syncthreads();
    for (long long u = blockIdx.x; u < n; u += gridDim.x) {
        RD_UNIT(u);
        RD_FOR_USEFUL_PAIRS([&](long long a, long long, unsigned int k, u64 product) {
            rd_accumulate<TOUCHED>(acc, touched, k, product);
            atomicAdd(aux + k, 1u);
            if constexpr (MASKED) {
                const unsigned int x = (unsigned int)(a - a0);
                atomicOr(masks + k * mask_words + (x >> 5), 1u << (x & 31u));
            }
        });
        __syncthreads();
        // C's blocks of the unit: the non-empty entries of acc in column order
        long long items = 0;
        rd_my_columns<TOUCHED>(touched, span, [&](long long c) {
            items += rd_column_item(acc[c], aux[c]);
        });
        long long all;
        const long long before = rd_block_scan(items, all);
        const long long total = rd_item_pairs(all);
        // (the scan is read through L2: lean.cu writes it in the same launch)
        long long q = __ldcg(scan + u) + rd_item_blocks(before);
        long long v = __ldcg(scan + n + u) - __ldcg(scan + n) + rd_item_values(before);
        const long long p0 = __ldcg(scan + 2 * n + u) - __ldcg(scan + 2 * n);
        long long p = rd_item_pairs(before);  // from p0
        rd_my_columns<TOUCHED>(touched, span, [&](long long c) {
            const u64 bm = acc[c];
            if (!bm) return;
            c_keys[q] = make_key((u64)i, k0 + (u64)c);
            c_bitmaps[q] = bm;
            c_offsets[q] = v;
            c_ptr[q] = p0 + p;
            if (write_pairs) mark_warp_starts(warp_block, q, v, __popcll(bm));
            const unsigned int np = aux[c];
            aux[c] = (unsigned int)p;  // from here on: the column's next free pair
            acc[c] = (u64)p;           // and its first
            ++q;
            v += __popcll(bm);
            p += np;
        });
        __syncthreads();
        if (MASKED && write_pairs && total > 0) {
            // every useful pair straight to its place: its column's first
            // pair, then its rank by the column's mask
            RD_FOR_USEFUL_PAIRS([&](long long a, long long b, unsigned int k, u64) {
                const unsigned int x = (unsigned int)(a - a0);
                const unsigned int* mask = masks + k * mask_words;
                unsigned int rank = __popc(mask[x >> 5] & ((1u << (x & 31u)) - 1u));
                for (unsigned int w = 0; w < (x >> 5); ++w) rank += __popc(mask[w]);
                const long long t = p0 + (long long)aux[k] + rank;
                task_a[t] = a;
                task_b[t] = b;
            });
        } else if (write_pairs && total > 0) {
            // every useful pair takes a free place of its column in any order,
            // as (A block - a0) << RD_PAIR_SHIFT | B block, ...
            RD_FOR_USEFUL_PAIRS([&](long long a, long long b, unsigned int k, u64) {
                task_b[p0 + atomicAdd(aux + k, 1u)] =
                    (long long)(((u64)(a - a0) << RD_PAIR_SHIFT) | (u64)b);
            });
            __syncthreads();
            // ... then goes to its rank in ascending A block among its column's
            // pairs (one A block meets a column once: the ranks are distinct)
            for (long long t = p0 + threadIdx.x; t < p0 + total; t += BMSPARSE_ROWDENSE_THREADS) {
                const u64 pair = (u64)task_b[t];
                const unsigned int k =
                    block_col(b_keys[pair & RD_PAIR_B]) - (unsigned int)k0;
                const long long s0 = p0 + (long long)acc[k], s1 = p0 + aux[k];
                long long rank = 0;
                for (long long s = s0; s < s1; ++s) rank += (u64)task_b[s] < pair;
                task_a[s0 + rank] = (long long)pair;
            }
            __syncthreads();
            for (long long t = p0 + threadIdx.x; t < p0 + total; t += BMSPARSE_ROWDENSE_THREADS) {
                const u64 pair = (u64)task_a[t];
                task_a[t] = a0 + (long long)(pair >> RD_PAIR_SHIFT);
                task_b[t] = (long long)(pair & RD_PAIR_B);
            }
        }
        // acc and aux (and the touched words) back to zero for the next unit
        if constexpr (MASKED) __syncthreads();  // the masks were read just above
        rd_each_column<TOUCHED>(touched, span, [&](long long c) {
            acc[c] = 0;
            aux[c] = 0;
        });
        if constexpr (MASKED) rd_clear_masks(masks, span, mask_words);
        __syncthreads();
    }
}
