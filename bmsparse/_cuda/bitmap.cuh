// bitmap.cuh - the device-side statement of the bmsparse block layout.
//
// A matrix is cut into 8x8 blocks. A non-empty block is a key, a bitmap and
// its values (mirrors bmsparse/_format.py):
//
//   key    = block_row << 32 | block_col                       (uint64)
//   bitmap : element (r, c) of the block is bit 8*r + c        (uint64)
//
//           c=0 c=1 c=2 c=3 c=4 c=5 c=6 c=7
//     r=0 |  0   1   2   3   4   5   6   7 |   byte 0 = row 0
//     r=1 |  8   9  10  11  12  13  14  15 |   byte 1 = row 1
//     ...                                       ...
//     r=7 | 56  57  58  59  60  61  62  63 |   byte 7 = row 7
//
//   values : in bit order; bit b of block k holds
//            values[offsets[k] + value_index(bitmaps[k], b)]
//
// Bits outside the matrix shape (the padding of the last block row and
// column) are always zero.
#pragma once

typedef unsigned long long u64;

// a byte with bit 0 set, repeated in every byte: one bit per block row
#define BMSPARSE_LOW_BITS 0x0101010101010101ull

__device__ __forceinline__ int bit_of(int r, int c) { return (r << 3) | c; }

// position of `bit` among the set bits of `bitmap` (its value's index)
__device__ __forceinline__ int value_index(u64 bitmap, int bit) {
    return __popcll(bitmap & ((1ull << bit) - 1ull));
}

// the bit of `bitmap` holding value number k (0-based), by halving: the
// 64-bit step picks a half, the rest runs on 32-bit words (a 64-bit shift
// costs two instructions; the all-64-bit form took 46 per call)
__device__ __forceinline__ int nth_set_bit(u64 bitmap, int k) {
    unsigned int x = (unsigned int)bitmap;
    int pos = 0;
    int n = __popc(x);
    if (k >= n) { k -= n; pos = 32; x = (unsigned int)(bitmap >> 32); }
#pragma unroll
    for (int width = 16; width > 0; width >>= 1) {
        n = __popc(x & ((1u << width) - 1u));
        if (k >= n) { k -= n; pos += width; x >>= width; }
    }
    return pos;
}

__device__ __forceinline__ unsigned int block_row(u64 key) { return (unsigned int)(key >> 32); }
__device__ __forceinline__ unsigned int block_col(u64 key) { return (unsigned int)(key & 0xffffffffull); }
__device__ __forceinline__ u64 make_key(u64 brow, u64 bcol) { return (brow << 32) | bcol; }

// first index in sorted keys[0, n) whose value is >= x (n if none)
__device__ __forceinline__ long long lower_bound(const u64* keys, long long n, u64 x) {
    long long lo = 0, hi = n;
    while (lo < hi) {
        const long long mid = lo + ((hi - lo) >> 1);
        if (keys[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// warp_block[w] = q for every warp w whose first value (32 w) is one of
// output block q's values [v, v + count): where multiply.cu's warps start.
// With warp_starts (zeroed beforehand; null: not written), also what lets a
// warp find every lane's block and place without reading C's offsets
// (multiply.cuh): bit 32 + d of warp_starts[w] is set when a block starts at
// value 32 w + d (0 < d < 32), and its low bits hold how many of block q's
// values come before 32 w. The blocks starting inside a warp share its word,
// hence the ORs (a warp's owner reading its followers' offsets instead took
// the compaction 59 -> 124 us on the surrogate, against 74 with the ORs).
__device__ __forceinline__ void mark_warp_starts(long long* warp_block,
                                                 unsigned long long* warp_starts, long long q,
                                                 long long v, long long count) {
    for (long long w = (v + 31) >> 5; (w << 5) < v + count; ++w) {
        warp_block[w] = q;
        if (warp_starts && (w << 5) > v)
            atomicOr(warp_starts + w, (unsigned long long)((w << 5) - v));
    }
    if (warp_starts && count && (v & 31))
        atomicOr(warp_starts + (v >> 5), 1ull << (32 + (v & 31)));
}

__device__ __forceinline__ void mark_warp_starts(long long* warp_block, long long q, long long v,
                                                 long long count) {
    mark_warp_starts(warp_block, nullptr, q, v, count);
}

// bits of row r of a block, as an 8-bit mask over columns
__device__ __forceinline__ unsigned int row_bits(u64 bitmap, int r) {
    return (unsigned int)(bitmap >> (r << 3)) & 0xffu;
}

// bits of column c of a block, as an 8-bit mask over rows: the multiply
// moves bit 8*k of the shifted bitmap to bit 56 + k with no carries
__device__ __forceinline__ unsigned int col_bits(u64 bitmap, int c) {
    return (unsigned int)((((bitmap >> c) & BMSPARSE_LOW_BITS) * 0x0102040810204080ull) >> 56);
}

// rows of a block holding a bit, as an 8-bit mask (bit 0 of each byte is
// first made the OR of its byte)
__device__ __forceinline__ unsigned int nonempty_rows(u64 bitmap) {
    bitmap |= bitmap >> 4;
    bitmap |= bitmap >> 2;
    bitmap |= bitmap >> 1;
    return col_bits(bitmap, 0);
}

// columns of a block holding a bit, as an 8-bit mask: the OR of its rows
__device__ __forceinline__ unsigned int nonempty_cols(u64 bitmap) {
    bitmap |= bitmap >> 32;
    bitmap |= bitmap >> 16;
    bitmap |= bitmap >> 8;
    return (unsigned int)bitmap & 0xffu;
}

// Step t of a Boolean 8x8 product: column t of a spread over its rows,
// ANDed with row t of b repeated in every row.
__device__ __forceinline__ u64 bool_product_step(u64 a, u64 b, int t) {
    const u64 a_col = ((a >> t) & BMSPARSE_LOW_BITS) * 0xffull;
    const u64 b_row = ((b >> (t << 3)) & 0xffull) * BMSPARSE_LOW_BITS;
    return a_col & b_row;
}

// Boolean 8x8 product: row r of the result is the OR of the rows t of b for
// which a has (r, t).
__device__ __forceinline__ u64 bool_product(u64 a, u64 b) {
    u64 c = 0;
#pragma unroll
    for (int t = 0; t < 8; ++t) c |= bool_product_step(a, b, t);
    return c;
}

// bool_product(a, b) by steps over a's non-empty columns t only (cols is
// nonempty_cols(a)), for a warp whose lanes share one A block: the steps
// are then the same for every lane. The blocks of graphs hold one or two
// entries, for which the eight unrolled steps (about 15 instructions each,
// two 64-bit multiplies) cost several times this. Where each lane has its
// own A block (the row merge, the task list's count), the uneven trip counts
// cost more than they save: the stencils' count stage was 1.3-1.5x slower
// (H100, session 12).
__device__ __forceinline__ u64 bool_product_by_columns(u64 a, unsigned int cols, u64 b) {
    u64 c = 0;
    for (; cols; cols &= cols - 1u) c |= bool_product_step(a, b, __ffs(cols) - 1);
    return c;
}

// 8x8 bit-matrix transpose by three delta swaps
__device__ __forceinline__ u64 transpose_bitmap(u64 x) {
    u64 t;
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;  x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull; x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull; x ^= t ^ (t << 28);
    return x;
}

// Minimal complex type: the values array of a complex64/complex128 matrix is
// (re, im) pairs, as NumPy and CuPy lay them out.
template <typename R>
struct bm_complex {
    R re, im;
    __device__ __forceinline__ bm_complex() : re(0), im(0) {}
    __device__ __forceinline__ bm_complex(R r) : re(r), im(0) {}
    __device__ __forceinline__ bm_complex(R r, R i) : re(r), im(i) {}
    __device__ __forceinline__ bm_complex& operator+=(const bm_complex& o) {
        re += o.re; im += o.im; return *this;
    }
};

template <typename R>
__device__ __forceinline__ bm_complex<R> operator*(const bm_complex<R>& a, const bm_complex<R>& b) {
    return bm_complex<R>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}

template <typename R>
__device__ __forceinline__ bm_complex<R> operator+(const bm_complex<R>& a, const bm_complex<R>& b) {
    return bm_complex<R>(a.re + b.re, a.im + b.im);
}

template <typename T>
__device__ __forceinline__ bool is_zero(const T& x) { return x == T(0); }

template <typename R>
__device__ __forceinline__ bool is_zero(const bm_complex<R>& x) { return x.re == R(0) && x.im == R(0); }
