// elementwise.cu - C = A + B, A - B or A.multiply(B), in one cooperative launch.
//
// The blocks of C are the union of the keys of A and B (for + and -) or
// their intersection (for multiply). Their number is not known before the
// merge, but it is bounded by a_nblocks + b_nblocks (min(a_nblocks,
// b_nblocks) for an intersection), and C's values by a_nnz + b_nnz
// (min(a_nnz, b_nnz)): the outputs are allocated with those bounds and the
// kernel reports how much it filled.
//
// Every input block is a slot: A's blocks, then (for a union) B's. A slot
// owes C the block of its key when it is A's, or B's with no twin in A. The
// passes, separated by grid barriers (_cuda/grid.cuh); one launch instead of
// about eleven (with two CuPy scans) is what makes the sum of two small
// matrices cheap, as for transpose.cu:
//   1. match: binary search of each slot's key in the other operand's keys (a
//      thread per slot, so that a warp's searches overlap), then 8 threads
//      per slot (thread r takes row r, so that no thread walks a dense block
//      alone). rank[t] is the other operand's block with the same key, or -1
//      - (number of its keys below) when there is none (a sign marks the
//      match, as in Java's binarySearch). bits[t] is the bitmap of the block
//      the slot owes: the entries whose value is not exactly zero (scipy
//      drops them, stored zeros of the operands too), computed from the
//      values now so that nothing is compacted later; for bools (no values)
//      the bitmaps combined by `combine`: OR for +, XOR for - (scipy's True -
//      True is a dropped 0), AND for multiply. 0 for a B slot with an A twin
//      (the twin owes the block) and for a block whose entries all cancel;
//   2. scan: exclusive scans over the slots of (bits != 0) and
//      popcount(bits), blocks_before and values_before: each thread block
//      sums its run of slots in pass 1, the last one to finish pass 1 scans
//      those sums (grid_barrier_then), and each thread block scans its run
//      after the sums of the runs before it;
//   3. write, 8 threads per slot (thread r writes row r): C's blocks are in
//      key order, so an owed block is at the number of C's keys below it:
//        A slot i:  blocks_before[i] + (B's owed blocks among the rank
//                   keys of B below it: blocks_before[a_nblocks + rank]
//                   - blocks_before[a_nblocks]; none for an intersection)
//        B slot j:  blocks_before[a_nblocks + j] - blocks_before[a_nblocks]
//                   + blocks_before[A's keys below it]
//      and its values likewise, by values_before. An entry present in an
//      operand takes the next value of that operand's row (values are in
//      bit order, so they are met in order), an absent one is 0.
// The number of C's blocks and values are the scans' totals: written to
// `sizes` (host memory the device can write, or null).
//
// Arguments (csr.h style):
//   u64       a_keys[a_nblocks], a_bitmaps[a_nblocks] - blocks of A (canonical)
//   long long a_offsets[a_nblocks + 1]  - value offsets of A's blocks
//   T         a_values[a_nnz]           - values of A (unused without values)
//   u64       b_keys[b_nblocks], b_bitmaps[b_nblocks], long long b_offsets[b_nblocks + 1],
//             T b_values[b_nnz]         - B
//   long long op                        - BMSPARSE_OP_PLUS, _MINUS, _TIMES, or a
//                                         comparison (C a pattern; c_values unused)
//   long long combine                   - BMSPARSE_COMBINE_OR, _XOR or _AND
//   long long values                    - 1: compute values, 0: bools (bitmaps only)
//   u64       work[4 n + 2 + 2 grid]    - scratch, n slots = a_nblocks + b_nblocks
//                                         (union) or a_nblocks (intersection):
//                                           rank[n] (as long long), bits[n],
//                                           blocks_before[n + 1], values_before[n + 1],
//                                           the thread blocks' sums [2 grid]
//   u64       bar[2]                    - the grid barrier's words, left ready by the
//                                         last launch (_kernels.barrier_words)
//   u64       c_keys[bound], c_bitmaps[bound] - out: blocks of C, bound = n or
//                                         min(a_nblocks, b_nblocks)
//   long long c_offsets[bound + 1]      - out: value offsets of C's blocks
//   T         c_values[value bound]     - out: values of C
//   long long sizes[2]                  - out, unless null: C's blocks and values
//   u64       non_finite[1]             - out, or null: set to 1 when a value of A
//                                         or B is inf or NaN (a host word cleared
//                                         beforehand, or a zeroed device word):
//                                         elementwise.py's product of floats then
//                                         runs again as a union (inf * 0 is NaN)
// Only the first c_nblocks blocks (c_nblocks + 1 offsets, c_nnz values) are
// written.
//
// Launch: a cooperative grid of BMSPARSE_ELEMENTWISE_THREADS-thread blocks,
// at most as many as are resident at once.
// Work: O(n log(a_nblocks + b_nblocks)) for the match, O(n + a_nnz + b_nnz)
// for the rest; values are combined twice (to know which are zero, then to
// write them), which costs less than compacting afterwards.
// Deterministic: every output is written by one thread, the scans are of
// integers.
// Layout: see _cuda/bitmap.cuh.
#include "_cuda/bitmap.cuh"
#include "_cuda/grid.cuh"

#ifndef BMSPARSE_ELEMENTWISE_THREADS
#define BMSPARSE_ELEMENTWISE_THREADS 256
#endif
#ifndef BMSPARSE_ELEMENTWISE_LOADS
#define BMSPARSE_ELEMENTWISE_LOADS 8
#endif

#define BMSPARSE_OP_PLUS 0
#define BMSPARSE_OP_MINUS 1
#define BMSPARSE_OP_TIMES 2
// comparisons (bmsparse/_compare.py): the value is 1 where the comparison
// holds, else 0, so the owed entries are where it holds; with
// BMSPARSE_OP_FAILS added, where it fails (not the opposite comparison: at
// NaN both fail). No values are written: C is a pattern.
#define BMSPARSE_OP_EQ 3
#define BMSPARSE_OP_NE 4
#define BMSPARSE_OP_LT 5
#define BMSPARSE_OP_GT 6
#define BMSPARSE_OP_LE 7
#define BMSPARSE_OP_GE 8
#define BMSPARSE_OP_FAILS 16

#define BMSPARSE_COMBINE_OR 0
#define BMSPARSE_COMBINE_XOR 1
#define BMSPARSE_COMBINE_AND 2

__device__ __forceinline__ u64 combine_bitmaps(int combine, u64 a, u64 b) {
    return combine == BMSPARSE_COMBINE_AND ? (a & b)
         : combine == BMSPARSE_COMBINE_XOR ? (a ^ b) : (a | b);
}

template <typename R>
__device__ __forceinline__ bm_complex<R> operator-(const bm_complex<R>& a, const bm_complex<R>& b) {
    return bm_complex<R>(a.re - b.re, a.im - b.im);
}

// a op b for the comparisons; complex values ordered as NumPy orders them:
// by real part where the real parts differ and no imaginary part is NaN,
// else by imaginary part where the real parts are equal
template <typename T>
__device__ __forceinline__ bool holds(int op, const T& a, const T& b) {
    switch (op) {
        case BMSPARSE_OP_EQ: return a == b;
        case BMSPARSE_OP_NE: return !(a == b);
        case BMSPARSE_OP_LT: return a < b;
        case BMSPARSE_OP_GT: return a > b;
        case BMSPARSE_OP_LE: return a <= b;
        default: return a >= b;
    }
}

template <typename R>
__device__ __forceinline__ bool holds(int op, const bm_complex<R>& a, const bm_complex<R>& b) {
    const bool equal = a.re == b.re && a.im == b.im;
    if (op == BMSPARSE_OP_EQ || op == BMSPARSE_OP_NE) return equal == (op == BMSPARSE_OP_EQ);
    const bool lower = op == BMSPARSE_OP_LT || op == BMSPARSE_OP_LE;
    const bool strict = op == BMSPARSE_OP_LT || op == BMSPARSE_OP_GT;
    const bool by_re = (lower ? a.re < b.re : a.re > b.re) && a.im == a.im && b.im == b.im;
    const bool by_im = a.re == b.re && (strict ? (lower ? a.im < b.im : a.im > b.im)
                                              : (lower ? a.im <= b.im : a.im >= b.im));
    return by_re || by_im;
}

// (the comparisons are a kernel of their own: their code in the arithmetic
// kernel took registers, spilling in long long's, 80 -> 106 in complex128's)
template <bool COMPARE, typename T>
__device__ __forceinline__ T apply_op(int op, const T& a, const T& b) {
    if constexpr (COMPARE)
        return T(holds(op & (BMSPARSE_OP_FAILS - 1), a, b) != (op >= BMSPARSE_OP_FAILS) ? 1 : 0);
    else
        return op == BMSPARSE_OP_TIMES ? a * b : op == BMSPARSE_OP_MINUS ? a - b : a + b;
}

// what the passes read and write; C: a comparison (C is a pattern)
template <typename T, bool C>
struct Merge {
    const u64* __restrict__ a_keys;
    const u64* __restrict__ a_bitmaps;
    const long long* __restrict__ a_offsets;
    const T* __restrict__ a_values;
    long long a_nblocks;
    const u64* __restrict__ b_keys;
    const u64* __restrict__ b_bitmaps;
    const long long* __restrict__ b_offsets;
    const T* __restrict__ b_values;
    long long b_nblocks;
    int op, combine, values;
    long long* rank;        // [n]
    u64* bits;              // [n]
    u64* blocks_before;     // [n + 1]
    u64* values_before;     // [n + 1]
};

// the operands' blocks of slot t: A's block (or -1) and B's (or -1), from
// its rank
template <typename T, bool C>
__device__ __forceinline__ void slot_blocks(const Merge<T, C>& m, long long t, long long rank,
                                            long long* ia, long long* ib)
{
    const bool from_a = t < m.a_nblocks;
    const long long own = from_a ? t : t - m.a_nblocks, other = rank >= 0 ? rank : -1;
    *ia = from_a ? own : other;
    *ib = from_a ? other : own;
}

// row r of op(A's block ia, B's block ib) (-1: an absent operand, all 0),
// over the columns of `row`: calls emit(c, value) in column order. The
// values of BMSPARSE_ELEMENTWISE_LOADS columns at a time are loaded first,
// so that their loads overlap: all 8 at once take twice the registers of 2,
// but were the fastest on an H100 (bcsstk33 + its transpose: 33 us against
// 45 us for 2, 49 us loading one value at a time).
template <typename T, bool C, typename Emit>
__device__ __forceinline__ void row_values(const Merge<T, C>& m, long long ia, long long ib, int r,
                                           unsigned int row, Emit emit)
{
    const u64 a_bm = ia >= 0 ? m.a_bitmaps[ia] : 0ull, b_bm = ib >= 0 ? m.b_bitmaps[ib] : 0ull;
    const unsigned int a_row = row_bits(a_bm, r), b_row = row_bits(b_bm, r);
    const T* a_val = ia >= 0 ? m.a_values + m.a_offsets[ia] + value_index(a_bm, bit_of(r, 0)) : m.a_values;
    const T* b_val = ib >= 0 ? m.b_values + m.b_offsets[ib] + value_index(b_bm, bit_of(r, 0)) : m.b_values;
#pragma unroll 1
    for (int c0 = 0; c0 < 8; c0 += BMSPARSE_ELEMENTWISE_LOADS) {
        if (!(row >> c0)) break;
        T av[BMSPARSE_ELEMENTWISE_LOADS], bv[BMSPARSE_ELEMENTWISE_LOADS];
#pragma unroll
        for (int u = 0; u < BMSPARSE_ELEMENTWISE_LOADS; ++u) {
            const int c = c0 + u;
            const unsigned int before = (1u << c) - 1u;
            av[u] = (a_row >> c) & 1u ? a_val[__popc(a_row & before)] : T(0);
            bv[u] = (b_row >> c) & 1u ? b_val[__popc(b_row & before)] : T(0);
        }
#pragma unroll
        for (int u = 0; u < BMSPARSE_ELEMENTWISE_LOADS; ++u)
            if ((row >> (c0 + u)) & 1u) emit(c0 + u, apply_op<C>(m.op, av[u], bv[u]));
    }
}

// pass 1, the search: slot t's rank
template <typename T, bool C>
__device__ __forceinline__ long long search_slot(const Merge<T, C>& m, long long t)
{
    const bool from_a = t < m.a_nblocks;
    const u64* __restrict__ other_keys = from_a ? m.b_keys : m.a_keys;
    const long long other_n = from_a ? m.b_nblocks : m.a_nblocks;
    const u64 key = from_a ? m.a_keys[t] : m.b_keys[t - m.a_nblocks];
    const long long below = lower_bound(other_keys, other_n, key);
    const long long rank = below < other_n && other_keys[below] == key ? below : -1 - below;
    m.rank[t] = rank;
    return rank;
}

// pass 1, the bits: row r of slot t, 8 threads per slot (consecutive lanes)
// and every lane of the warp calling (`active` false past the slots): the
// bitmap the slot owes, on each of its threads
template <typename T, bool C>
__device__ __forceinline__ u64 slot_bits(const Merge<T, C>& m, long long t, long long rank, int r,
                                         bool active)
{
    u64 bits = 0;
    if (active && (t < m.a_nblocks || rank < 0)) {
        long long ia, ib;
        slot_blocks(m, t, rank, &ia, &ib);
        const u64 candidates = combine_bitmaps(m.combine, ia >= 0 ? m.a_bitmaps[ia] : 0ull,
                                               ib >= 0 ? m.b_bitmaps[ib] : 0ull);
        const unsigned int row = row_bits(candidates, r);
        if (!m.values) {
            bits = (u64)row << (r << 3);
        } else if (row) {
            row_values(m, ia, ib, r, row, [&](int c, const T& v) {
                if (!is_zero(v)) bits |= 1ull << bit_of(r, c);
            });
        }
    }
#pragma unroll
    for (int s = 1; s < 8; s <<= 1) bits |= __shfl_xor_sync(0xffffffffu, bits, s);
    if (active && r == 0) m.bits[t] = bits;
    return bits;
}

// inf or NaN among the values of A or B: flag set (a grid-stride pass over
// both after the match, where it spills nothing; in the launch, not in a
// kernel of its own before it, whose launches and read took 0.04 ms of the
// surrogate's 0.33 ms product)
// (the check is compiled only where a value can be inf or NaN)
template <typename T>
struct can_be_non_finite { static constexpr bool value = false; };
template <> struct can_be_non_finite<float> { static constexpr bool value = true; };
template <> struct can_be_non_finite<double> { static constexpr bool value = true; };
template <typename R>
struct can_be_non_finite<bm_complex<R>> { static constexpr bool value = true; };

__device__ __forceinline__ bool finite_value(float x) { return isfinite(x); }
__device__ __forceinline__ bool finite_value(double x) { return isfinite(x); }
template <typename R>
__device__ __forceinline__ bool finite_value(const bm_complex<R>& x) {
    return isfinite(x.re) && isfinite(x.im);
}

// values [0, n) with a grid-stride loop, P loads in flight a thread (a
// loop waiting on each load took 0.05 ms of the surrogate's product)
template <int P, typename T>
__device__ __forceinline__ bool any_non_finite(const T* __restrict__ values, long long n)
{
    const long long stride = gridDim.x * (long long)blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    bool found = false;
    for (; i + (P - 1) * stride < n; i += P * stride) {
        T x[P];
#pragma unroll
        for (int k = 0; k < P; ++k) x[k] = values[i + k * stride];
#pragma unroll
        for (int k = 0; k < P; ++k) found |= !finite_value(x[k]);
    }
    for (; i < n; i += stride) found |= !finite_value(values[i]);
    return found;
}

template <typename T, bool C>
__device__ void find_non_finite(const Merge<T, C>& m, u64* flag)
{
    const bool found = any_non_finite<4>(m.a_values, m.a_offsets[m.a_nblocks])
                     | any_non_finite<4>(m.b_values, m.b_offsets[m.b_nblocks]);
    if (__syncthreads_or(found) && threadIdx.x == 0) *flag = 1ull;
}

// between passes 1 and 2, by the last thread block to finish pass 1: an
// exclusive scan in place of the thread blocks' (blocks, values) sums, each
// thread adding a run of them
__device__ void scan_block_sums(u64* sums, u64* warp_sums)
{
    const long long run = (gridDim.x + blockDim.x - 1) / blockDim.x;
    const long long lo = min(threadIdx.x * run, (long long)gridDim.x);
    const long long hi = min(lo + run, (long long)gridDim.x);
    u64 blocks = 0, values = 0, total;
    for (long long b = lo; b < hi; ++b) {
        blocks += __ldcg(sums + 2 * b);
        values += __ldcg(sums + 2 * b + 1);
    }
    blocks = block_exclusive_scan(blocks, warp_sums, &total);
    values = block_exclusive_scan(values, warp_sums, &total);
    for (long long b = lo; b < hi; ++b) {
        const u64 own_blocks = __ldcg(sums + 2 * b), own_values = __ldcg(sums + 2 * b + 1);
        sums[2 * b] = blocks;
        sums[2 * b + 1] = values;
        blocks += own_blocks;
        values += own_values;
    }
}

// pass 2: exclusive scans of (bits != 0) and popcount(bits) over the
// thread block's run of slots [lo, hi), after the (blocks, values) of the
// runs before it; the thread block ending the slots writes the totals
template <typename T, bool C>
__device__ void scan_slots(const Merge<T, C>& m, long long n, long long lo, long long hi,
                           u64 blocks, u64 values, u64* warp_sums, long long* c_offsets,
                           long long* sizes)
{
    u64 total;
    for (long long t0 = lo; t0 < hi; t0 += blockDim.x) {
        const long long t = t0 + threadIdx.x;
        const u64 bits = t < hi ? __ldcg(m.bits + t) : 0ull;
        const u64 at_block = blocks + block_exclusive_scan(bits != 0ull, warp_sums, &total);
        blocks += total;
        const u64 at_value = values + block_exclusive_scan(__popcll(bits), warp_sums, &total);
        values += total;
        if (t < hi) {
            m.blocks_before[t] = at_block;
            m.values_before[t] = at_value;
        }
    }
    if (hi == n && lo < hi && threadIdx.x == 0) {
        m.blocks_before[n] = blocks;
        m.values_before[n] = values;
        c_offsets[blocks] = (long long)values;
        if (sizes) {
            sizes[0] = (long long)blocks;
            sizes[1] = (long long)values;
        }
    }
}

// pass 3: C's block and values owed by slot t (written by 8 threads, r its row)
template <typename T, bool C>
__device__ __forceinline__ void write_slot(const Merge<T, C>& m, long long t, int r,
                                           u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps,
                                           long long* __restrict__ c_offsets,
                                           T* __restrict__ c_values)
{
    const u64 bits = __ldcg(m.bits + t);
    if (!bits) return;
    const long long rank = __ldcg(m.rank + t);
    const long long na = m.a_nblocks, below = rank >= 0 ? rank : -1 - rank;
    // its rank among its own operand's owed blocks, plus the other's below its key
    u64 q, offset;
    if (t < na) {
        q = __ldcg(m.blocks_before + t);
        offset = __ldcg(m.values_before + t);
        if (m.combine != BMSPARSE_COMBINE_AND) {
            q += __ldcg(m.blocks_before + na + below) - __ldcg(m.blocks_before + na);
            offset += __ldcg(m.values_before + na + below) - __ldcg(m.values_before + na);
        }
    } else {
        q = __ldcg(m.blocks_before + t) - __ldcg(m.blocks_before + na)
            + __ldcg(m.blocks_before + below);
        offset = __ldcg(m.values_before + t) - __ldcg(m.values_before + na)
                 + __ldcg(m.values_before + below);
    }
    if (r == 0) {
        c_keys[q] = t < na ? m.a_keys[t] : m.b_keys[t - na];
        c_bitmaps[q] = bits;
        c_offsets[q] = (long long)offset;
    }
    const unsigned int row = row_bits(bits, r);
    if (C || !m.values || !row) return;  // (a comparison's C is a pattern)
    long long ia, ib;
    slot_blocks(m, t, rank, &ia, &ib);
    T* out = c_values + offset + value_index(bits, bit_of(r, 0));
    row_values(m, ia, ib, r, row, [&](int, const T& v) { *out++ = v; });
}

// the kernels' arguments (see the top of the file)
#define BMSPARSE_ELEMENTWISE_PARAMS                                                        \
    const u64* __restrict__ a_keys, const u64* __restrict__ a_bitmaps,                     \
        const long long* __restrict__ a_offsets, const T* __restrict__ a_values,           \
        long long a_nblocks, const u64* __restrict__ b_keys,                               \
        const u64* __restrict__ b_bitmaps, const long long* __restrict__ b_offsets,        \
        const T* __restrict__ b_values, long long b_nblocks, long long op,                 \
        long long combine, long long values, u64* work, u64* bar,                          \
        u64* __restrict__ c_keys, u64* __restrict__ c_bitmaps,                             \
        long long* __restrict__ c_offsets, T* __restrict__ c_values, long long* sizes,    \
        u64* non_finite

template <typename T, bool C>
__device__ __forceinline__ void merge(BMSPARSE_ELEMENTWISE_PARAMS)
{
    __shared__ u64 warp_sums[32];
    const bool unite = combine != BMSPARSE_COMBINE_AND;
    const long long n = unite ? a_nblocks + b_nblocks : a_nblocks;
    Merge<T, C> m = {a_keys, a_bitmaps, a_offsets, a_values, a_nblocks,
                     b_keys, b_bitmaps, b_offsets, b_values, b_nblocks,
                     (int)op, (int)combine, (int)values,
                     (long long*)work, work + n, work + 2 * n, work + 3 * n + 1};
    u64* block_sums = work + 4 * n + 2;
    // each thread block matches and scans one run of slots
    const long long run = (n + gridDim.x - 1) / gridDim.x;
    const long long lo = min(blockIdx.x * run, n), hi = min(lo + run, n);

    // 1. match, by chunks of BMSPARSE_ELEMENTWISE_THREADS slots: a thread per
    // slot searches (the searches overlap), then 8 threads per slot (so that
    // no thread walks a dense block alone), 32 slots at a time. The bounds are
    // the same for the whole thread block, so whole warps shuffle.
    __shared__ long long ranks[BMSPARSE_ELEMENTWISE_THREADS];
    u64 blocks = 0, nvalues = 0, total;
    for (long long t0 = lo; t0 < hi; t0 += blockDim.x) {
        const long long t = t0 + threadIdx.x, chunk = min(hi - t0, (long long)blockDim.x);
        if (t < hi) ranks[threadIdx.x] = search_slot(m, t);
        __syncthreads();
        for (int c0 = 0; c0 < chunk; c0 += blockDim.x / 8) {
            const int c = c0 + threadIdx.x / 8;
            const bool active = c < chunk;
            const u64 bits = slot_bits(m, t0 + c, active ? ranks[c] : 0, threadIdx.x & 7, active);
            if (active && (threadIdx.x & 7) == 0) {
                blocks += bits != 0ull;
                nvalues += __popcll(bits);
            }
        }
        __syncthreads();  // before the next chunk's ranks
    }
    if constexpr (!C && can_be_non_finite<T>::value)
        if (non_finite) find_non_finite(m, non_finite);
    block_exclusive_scan(blocks, warp_sums, &total);
    if (threadIdx.x == 0) block_sums[2 * blockIdx.x] = total;
    block_exclusive_scan(nvalues, warp_sums, &total);
    if (threadIdx.x == 0) block_sums[2 * blockIdx.x + 1] = total;
    grid_barrier_then(bar, [&] { scan_block_sums(block_sums, warp_sums); });
    // 2. scan
    scan_slots(m, n, lo, hi, __ldcg(block_sums + 2 * blockIdx.x),
               __ldcg(block_sums + 2 * blockIdx.x + 1), warp_sums, c_offsets, sizes);
    grid_barrier(bar);
    // 3. write (the stride is a multiple of 8: a slot's threads stay together)
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long nthreads = gridDim.x * (long long)blockDim.x;
    for (long long i = tid; i < 8 * n; i += nthreads)
        write_slot(m, i >> 3, (int)(i & 7), c_keys, c_bitmaps, c_offsets, c_values);
}

#define BMSPARSE_ELEMENTWISE_ARGS                                                          \
    a_keys, a_bitmaps, a_offsets, a_values, a_nblocks, b_keys, b_bitmaps, b_offsets,       \
        b_values, b_nblocks, op, combine, values, work, bar, c_keys, c_bitmaps, c_offsets, \
        c_values, sizes, non_finite

template <typename T>
__global__ void __launch_bounds__(BMSPARSE_ELEMENTWISE_THREADS)
    bmsparse_elementwise_merge(BMSPARSE_ELEMENTWISE_PARAMS)
{
    merge<T, false>(BMSPARSE_ELEMENTWISE_ARGS);
}

// the comparisons: C's pattern only (c_values is not written)
template <typename T>
__global__ void __launch_bounds__(BMSPARSE_ELEMENTWISE_THREADS)
    bmsparse_elementwise_compare(BMSPARSE_ELEMENTWISE_PARAMS)
{
    merge<T, true>(BMSPARSE_ELEMENTWISE_ARGS);
}
