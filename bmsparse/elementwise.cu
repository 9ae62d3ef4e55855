// elementwise.cu - C = A + B, A - B or A.multiply(B), in three kernels.
//
// The blocks of C are the union of the keys of A and B (for + and -) or
// their intersection (for multiply). Their number is not known before the
// merge, but it is bounded by a_nblocks + b_nblocks (by min(a_nblocks,
// b_nblocks) for an intersection), and C's values by a_nnz + b_nnz: every
// output array is allocated with that bound, the first c_nblocks (c_nnz)
// entries are written, and c_sizes tells the host how many. The host reads
// c_sizes once, at the end.
//
// How a pair of blocks combines (`combine`): OR for + and - of numbers (the
// values decide which entries are zero), XOR for - of bools (scipy's
// True - True is a dropped 0), AND for multiply. A block of C is kept when
// the combined bitmap is not empty; for canonical operands (no empty
// bitmap) that drops only matched blocks of XOR and AND.
//
// 1. bmsparse_elementwise_match, one thread per input block (of A, then of
//    B for a union): binary search of the block's key in the other operand's
//    keys. rank[t] is the other operand's block with the same key, or
//    -1 - (number of its keys below) when there is none (a sign marks the
//    match, as in Java's binarySearch). step[t] is what the block adds to the
//    positions of the blocks after it, beyond its rank:
//      A block: kept - matched (union), kept (intersection);
//      B block: 1 if unmatched (B-only), -1 if matched and dropped, else 0.
// 2. (host) before = exclusive scan of step.
// 3. bmsparse_elementwise_scatter writes the blocks of C in key order. A
//    block is at the number of C keys below it:
//      kept A block i:  (union ? rank : 0) + before[i]
//        (A's kept blocks before it plus B's unmatched keys below it: B's
//        keys below minus those matched to A blocks before i)
//      B-only block j:  rank + before[a_nblocks + j] - before[a_nblocks]
//        (A's keys below it minus A's dropped ones, which are matched to B
//        blocks before j, plus B-only blocks before j)
//    c_nblocks = a_nblocks + (sum of B's steps) for a union, before[a_nblocks]
//    for an intersection.
// 4. (host) c_offsets = exclusive scan of c_counts (zero past c_nblocks).
// 5. bmsparse_elementwise_{plus,minus,times}<T>: the values; 8 threads per
//    block of C, thread r walks row r: an entry present in an operand takes
//    the next value of that operand's row (values are in bit order, so they
//    are met in order), an absent one is 0. scipy drops results that are
//    exactly zero, so the bits whose value is not zero are returned too, and
//    spgemm/compact.py removes the others when c_sizes[2] is not 0.
//
// Arguments (csr.h style):
//   u64       a_keys[a_nblocks], a_bitmaps[a_nblocks] - blocks of A (canonical)
//   long long a_offsets[a_nblocks + 1]  - value offsets of A's blocks
//   T         a_values[a_nnz]           - values of A
//   u64       b_keys[b_nblocks], b_bitmaps[b_nblocks], long long b_offsets[b_nblocks + 1],
//             T b_values[b_nnz]         - B
//   long long combine                   - BMSPARSE_COMBINE_OR, _XOR or _AND
//   long long rank[n], step[n]          - out of match: n = a_nblocks + b_nblocks
//                                         (union) or a_nblocks (intersection)
//   long long before[n + 1]             - exclusive scan of step
//   long long bound                     - length of the C block arrays:
//                                         n (union), min(a_nblocks, b_nblocks)
//   u64       c_keys[bound], c_bitmaps[bound] - out: keys, combined bitmaps of C
//   long long c_a[bound], c_b[bound]    - out: A's and B's block of each C block, or -1
//   long long c_counts[bound]           - out: popcount of c_bitmaps, 0 past c_nblocks
//   long long c_offsets[bound + 1]      - value offsets of C's blocks
//   T         c_values[value bound]     - out: values of C (a_nnz + b_nnz, or
//                                         min(a_nnz, b_nnz) for multiply)
//   u64       c_nonzero[bound]          - out: bits of c_bitmaps whose value is not zero
//   long long c_sizes[3]                - zeroed by the host; scatter writes
//                                         [0] = c_nblocks, the host copies
//                                         [1] = c_nnz, the value kernel adds
//                                         [2] = blocks holding a zero value
//
// Launch: match and scatter one thread per input block (n threads); the
// value kernels 8 threads per C block (one per block row, consecutive lanes
// of one warp), 8 * bound threads, those past c_sizes[0] leave at once.
// Work: O(n log(a_nblocks + b_nblocks)) for match, O(n) for scatter,
// O(8 * bound + a_nnz + b_nnz) for the values.
// Deterministic: every output is written by one thread; c_sizes[2] is an
// integer count.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"

#define BMSPARSE_COMBINE_OR 0
#define BMSPARSE_COMBINE_XOR 1
#define BMSPARSE_COMBINE_AND 2

__device__ __forceinline__ u64 combine_bitmaps(long long combine, u64 a, u64 b) {
    return combine == BMSPARSE_COMBINE_AND ? (a & b)
         : combine == BMSPARSE_COMBINE_XOR ? (a ^ b) : (a | b);
}

extern "C" __global__ void bmsparse_elementwise_match(
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps, long long a_nblocks,
    const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps, long long b_nblocks,
    long long combine, long long* __restrict__ rank, long long* __restrict__ step)
{
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const bool unite = combine != BMSPARSE_COMBINE_AND;
    if (t >= (unite ? a_nblocks + b_nblocks : a_nblocks)) return;
    const bool from_a = t < a_nblocks;
    const long long i = from_a ? t : t - a_nblocks;
    const u64* __restrict__ other_keys = from_a ? b_keys : a_keys;
    const u64* __restrict__ other_bitmaps = from_a ? b_bitmaps : a_bitmaps;
    const long long other_n = from_a ? b_nblocks : a_nblocks;
    const u64 key = from_a ? a_keys[i] : b_keys[i];
    const long long r = lower_bound(other_keys, other_n, key);
    const bool hit = r < other_n && other_keys[r] == key;
    rank[t] = hit ? r : -1 - r;
    const u64 own = from_a ? a_bitmaps[i] : b_bitmaps[i];
    const bool kept = combine_bitmaps(combine, own, hit ? other_bitmaps[r] : 0ull) != 0ull;
    if (from_a) step[t] = (long long)kept - (long long)(unite && hit);
    else step[t] = hit ? -(long long)!kept : 1ll;
}

extern "C" __global__ void bmsparse_elementwise_scatter(
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps, long long a_nblocks,
    const u64* __restrict__ b_keys, const u64* __restrict__ b_bitmaps, long long b_nblocks,
    long long combine, const long long* __restrict__ rank, const long long* __restrict__ before,
    long long bound, u64* __restrict__ c_keys, long long* __restrict__ c_a,
    long long* __restrict__ c_b, u64* __restrict__ c_bitmaps, long long* __restrict__ c_counts,
    long long* __restrict__ c_sizes)
{
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const bool unite = combine != BMSPARSE_COMBINE_AND;
    const long long n = unite ? a_nblocks + b_nblocks : a_nblocks;
    if (t >= n) return;
    const long long c_nblocks = unite ? a_nblocks + before[n] - before[a_nblocks] : before[n];
    if (t == 0) c_sizes[0] = c_nblocks;
    // the scan of the counts runs over the whole bound: the slots no block
    // takes count 0 (bound <= n, so every slot has a thread)
    if (t >= c_nblocks && t < bound) c_counts[t] = 0;
    const long long r = rank[t];
    const bool hit = r >= 0;
    const long long below = hit ? r : -1 - r;
    long long q;
    u64 bitmap;
    if (t < a_nblocks) {
        bitmap = combine_bitmaps(combine, a_bitmaps[t], hit ? b_bitmaps[below] : 0ull);
        if (!bitmap) return;  // dropped (an intersection's unmatched block, or a XOR of equals)
        q = (unite ? below : 0) + before[t];
        c_keys[q] = a_keys[t];
        c_a[q] = t;
        c_b[q] = hit ? below : -1;
    } else {
        if (hit) return;  // its A twin writes the block
        const long long j = t - a_nblocks;
        bitmap = b_bitmaps[j];
        q = below + before[t] - before[a_nblocks];
        c_keys[q] = b_keys[j];
        c_a[q] = -1;
        c_b[q] = j;
    }
    c_bitmaps[q] = bitmap;
    c_counts[q] = __popcll(bitmap);
}

template <typename R>
__device__ __forceinline__ bm_complex<R> operator-(const bm_complex<R>& a, const bm_complex<R>& b) {
    return bm_complex<R>(a.re - b.re, a.im - b.im);
}

struct bm_op_plus {
    template <typename T> __device__ __forceinline__ static T apply(const T& a, const T& b) { return a + b; }
};

struct bm_op_minus {
    template <typename T> __device__ __forceinline__ static T apply(const T& a, const T& b) { return a - b; }
};

struct bm_op_times {
    template <typename T> __device__ __forceinline__ static T apply(const T& a, const T& b) { return a * b; }
};

template <typename Op, typename T>
__device__ __forceinline__ void merge_values(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values,
    const u64* __restrict__ b_bitmaps, const long long* __restrict__ b_offsets,
    const T* __restrict__ b_values,
    const long long* __restrict__ c_a, const long long* __restrict__ c_b,
    const u64* __restrict__ c_bitmaps, const long long* __restrict__ c_offsets,
    long long* c_sizes, T* __restrict__ c_values, u64* __restrict__ c_nonzero)
{
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long q = tid >> 3;
    if (q >= c_sizes[0]) return;  // the 8 threads of a block leave together
    const int r = (int)(tid & 7);
    const unsigned int group = 0xffu << (threadIdx.x & 24u);
    const long long ia = c_a[q], ib = c_b[q];
    const u64 a_bm = ia >= 0 ? a_bitmaps[ia] : 0ull;
    const u64 b_bm = ib >= 0 ? b_bitmaps[ib] : 0ull;
    const u64 c_bm = c_bitmaps[q];
    const unsigned int a_row = row_bits(a_bm, r), b_row = row_bits(b_bm, r);
    const unsigned int c_row = row_bits(c_bm, r);
    const T* a_val = ia >= 0 ? a_values + a_offsets[ia] + value_index(a_bm, bit_of(r, 0)) : a_values;
    const T* b_val = ib >= 0 ? b_values + b_offsets[ib] + value_index(b_bm, bit_of(r, 0)) : b_values;
    T* out = c_values + c_offsets[q] + value_index(c_bm, bit_of(r, 0));
    unsigned int nonzero = 0;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        const bool in_a = (a_row >> c) & 1u, in_b = (b_row >> c) & 1u;
        const T av = in_a ? *a_val++ : T(0);
        const T bv = in_b ? *b_val++ : T(0);
        if ((c_row >> c) & 1u) {
            const T v = Op::apply(av, bv);
            *out++ = v;
            if (!is_zero(v)) nonzero |= 1u << c;
        }
    }
    u64 block_nonzero = (u64)nonzero << (r << 3);
#pragma unroll
    for (int s = 1; s < 8; s <<= 1) block_nonzero |= __shfl_xor_sync(group, block_nonzero, s);
    if (r == 0) {
        c_nonzero[q] = block_nonzero;
        if (block_nonzero != c_bm) atomicAdd((unsigned long long*)(c_sizes + 2), 1ull);
    }
}

// one kernel per operation, so each compiles its operation inline
template <typename T>
__global__ void bmsparse_elementwise_plus(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_offsets, const T* __restrict__ b_values,
    const long long* __restrict__ c_a, const long long* __restrict__ c_b,
    const u64* __restrict__ c_bitmaps, const long long* __restrict__ c_offsets,
    long long* c_sizes, T* __restrict__ c_values, u64* __restrict__ c_nonzero)
{
    merge_values<bm_op_plus, T>(a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values, c_a,
                                c_b, c_bitmaps, c_offsets, c_sizes, c_values, c_nonzero);
}

template <typename T>
__global__ void bmsparse_elementwise_minus(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_offsets, const T* __restrict__ b_values,
    const long long* __restrict__ c_a, const long long* __restrict__ c_b,
    const u64* __restrict__ c_bitmaps, const long long* __restrict__ c_offsets,
    long long* c_sizes, T* __restrict__ c_values, u64* __restrict__ c_nonzero)
{
    merge_values<bm_op_minus, T>(a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values, c_a,
                                 c_b, c_bitmaps, c_offsets, c_sizes, c_values, c_nonzero);
}

template <typename T>
__global__ void bmsparse_elementwise_times(
    const u64* __restrict__ a_bitmaps, const long long* __restrict__ a_offsets,
    const T* __restrict__ a_values, const u64* __restrict__ b_bitmaps,
    const long long* __restrict__ b_offsets, const T* __restrict__ b_values,
    const long long* __restrict__ c_a, const long long* __restrict__ c_b,
    const u64* __restrict__ c_bitmaps, const long long* __restrict__ c_offsets,
    long long* c_sizes, T* __restrict__ c_values, u64* __restrict__ c_nonzero)
{
    merge_values<bm_op_times, T>(a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values, c_a,
                                 c_b, c_bitmaps, c_offsets, c_sizes, c_values, c_nonzero);
}
