// compact.cuh - the per-block steps of compact.cu as device functions, so
// that lean.cu compacts with the same code in the launch that computed the
// values. FRESH: the inputs were written by other thread blocks of the same
// launch (before a grid barrier), so they are read through L2
// (_cuda/grid.cuh, fresh_load).
// Layout: see ../_cuda/bitmap.cuh.
#pragma once
#include "../_cuda/bitmap.cuh"
#include "../_cuda/grid.cuh"

// the bits of `bitmap` whose value (values[0, popcount)) is not exactly zero
template <bool FRESH, typename T>
__device__ __forceinline__ u64 nonzero_bits(u64 bitmap, const T* __restrict__ values)
{
    u64 keep = 0;
    for (u64 rest = bitmap; rest; rest &= rest - 1ull, ++values)
        if (!is_zero(fresh_load<FRESH>(values))) keep |= rest & (~rest + 1ull);  // lowest bit left
    return keep;
}

// the values of `bitmap` whose bit is in `keep`, in order, to out[0, popcount(keep))
template <bool FRESH, typename T>
__device__ __forceinline__ void copy_kept(u64 bitmap, u64 keep, const T* __restrict__ values,
                                          T* __restrict__ out)
{
    for (u64 rest = bitmap; rest; rest &= rest - 1ull, ++values)
        if (keep & rest & (~rest + 1ull)) *out++ = fresh_load<FRESH>(values);
}

// kept block d of C: its key, bitmap and first value, and where `run` is not
// null (c_ptr + q) its task run [run[0], run[1])
template <bool FRESH>
__device__ __forceinline__ void put_kept(
    long long d, u64 key, u64 bitmap, long long offset, const long long* __restrict__ run,
    u64* __restrict__ out_keys, u64* __restrict__ out_bitmaps,
    long long* __restrict__ out_offsets, long long* __restrict__ out_first,
    long long* __restrict__ out_last)
{
    out_keys[d] = key;
    out_bitmaps[d] = bitmap;
    out_offsets[d] = offset;
    if (run) {
        out_first[d] = fresh_load<FRESH>(run);
        out_last[d] = fresh_load<FRESH>(run + 1);
    }
}

// block q of bmsparse_compact_blocks (arguments: see compact.cu): kept, in
// order, where its new bitmap is not empty; its new place, or -1
template <bool FRESH>
__device__ __forceinline__ long long keep_block(
    long long q, const u64* __restrict__ c_keys, const u64* __restrict__ new_bitmaps,
    const long long* __restrict__ new_offsets, const long long* __restrict__ rank,
    long long shift, const long long* __restrict__ c_ptr, long long c_nblocks,
    u64* __restrict__ out_keys, u64* __restrict__ out_bitmaps,
    long long* __restrict__ out_offsets, long long* __restrict__ out_first,
    long long* __restrict__ out_last)
{
    const long long low = (1ll << shift) - 1;
    if (q == c_nblocks - 1) {
        const long long end = fresh_load<FRESH>(new_offsets + c_nblocks);
        out_offsets[shift ? end & low : fresh_load<FRESH>(rank + q)] = end >> shift;
    }
    const u64 bitmap = fresh_load<FRESH>(new_bitmaps + q);
    if (!bitmap) return -1;
    const long long d =
        shift ? fresh_load<FRESH>(new_offsets + q) & low : fresh_load<FRESH>(rank + q) - 1;
    put_kept<FRESH>(d, fresh_load<FRESH>(c_keys + q), bitmap,
                    fresh_load<FRESH>(new_offsets + q) >> shift, c_ptr ? c_ptr + q : nullptr,
                    out_keys, out_bitmaps, out_offsets, out_first, out_last);
    return d;
}
