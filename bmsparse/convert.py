"""Conversions between COO/CSR/dense and the bitmap block format.

COO -> bitmap is the paper's COO -> BMP conversion: compute each entry's
block key and bit, sort by (key, bit), sum duplicates, then reduce the runs
of equal keys to bitmaps. Bitmap -> COO/CSR needs no sort. Every function
runs where its arrays are: NumPy on the host, CuPy (with ``convert.cu``) on
the device.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _kernels
from ._format import (BLOCK_MASK, BLOCK_SHIFT, KEY_SHIFT, bit_of, nblocks_along, pack_keys,
                      set_bits)
from ._primitives import exclusive_scan, run_starts, stable_argsort
from ._sputils import check_dtype, get_array_module, get_index_dtype

_KERNELS = "convert.cu"
_kernels.register(_KERNELS, {
    "bmsparse_convert_sum_duplicates": ("T",),
    "bmsparse_convert_block_bitmaps": (),
    "bmsparse_convert_expand_entries": (),
    "bmsparse_convert_row_counts": (),
    "bmsparse_convert_csr_entries": ("T", "I"),
})

Blocks = tuple[Any, Any, Any, Any]  # keys, bitmaps, offsets, values


def check_coo(rows: Any, cols: Any, values: Any, shape: tuple[int, int]) -> tuple[Any, Any]:
    """Validate COO input and return the indices as int64 arrays.

    Raises
    ------
    TypeError
        Non-integer index arrays, or an unsupported value dtype.
    ValueError
        Arrays of different lengths or dimensions, or an index out of range.
    """
    xp = get_array_module(rows, cols, values)
    for name, a in (("rows", rows), ("cols", cols)):
        if a.dtype.kind not in "iu":
            raise TypeError(f"{name} must be an integer array, got {a.dtype.name}")
        if a.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got {a.ndim}-D")
    if rows.shape != cols.shape:
        raise ValueError(f"rows and cols must have the same length, got "
                         f"{rows.shape[0]} and {cols.shape[0]}")
    if values is not None:
        if values.ndim != 1 or values.shape[0] != rows.shape[0]:
            raise ValueError(f"values must be 1-D with one value per index, got shape "
                             f"{values.shape} for {rows.shape[0]} indices")
        check_dtype(values.dtype, "values dtype")
    rows = rows.astype(xp.int64, copy=False)
    cols = cols.astype(xp.int64, copy=False)
    if rows.size:
        # sync: one read for all four bounds
        lo_r, hi_r, lo_c, hi_c = (int(v) for v in xp.stack(
            [rows.min(), rows.max(), cols.min(), cols.max()]).tolist())
        for name, lo, hi, n in (("row", lo_r, hi_r, shape[0]), ("column", lo_c, hi_c, shape[1])):
            if lo < 0:
                raise ValueError(f"negative {name} index {lo}")
            if hi >= n:
                raise ValueError(f"{name} index {hi} out of range for shape {shape}")
    return rows, cols


def coo_to_bitmap(rows: Any, cols: Any, values: Any, shape: tuple[int, int]) -> Blocks:
    """Bitmap blocks from COO triplets; duplicates are summed, order is free.

    Parameters
    ----------
    rows, cols : int64 [n]
        Checked indices (see :func:`check_coo`).
    values : T [n] or None
        None for a pattern (bool) matrix.
    shape : (int, int)

    Returns
    -------
    keys : uint64 [nblocks]
    bitmaps : uint64 [nblocks]
    offsets : int64 [nblocks + 1]
    values : T [nnz] or None

    Notes
    -----
    One sort of the n entries. Duplicates are summed in input order, so the
    result is deterministic. On the GPU it syncs twice (run counts).
    """
    xp = get_array_module(rows, cols, values)
    keys = pack_keys(rows >> BLOCK_SHIFT, cols >> BLOCK_SHIFT)
    bits = bit_of(rows, cols)
    order = _entry_order(xp, keys, bits, shape)
    keys, bits = keys[order], bits[order]
    entry_ptr = run_starts(xp, (keys, bits))
    if values is not None:
        values = (values[order] if entry_ptr.shape[0] - 1 == order.shape[0]
                  else _sum_duplicates(xp, order, values, entry_ptr))
    firsts = entry_ptr[:-1]
    keys, bits = keys[firsts], bits[firsts]
    offsets = run_starts(xp, (keys,))
    bitmaps = _block_bitmaps(xp, bits, offsets)
    return keys[offsets[:-1]], bitmaps, offsets, values


def _entry_order(xp: Any, keys: Any, bits: Any, shape: tuple[int, int]) -> Any:
    """Stable permutation sorting entries by (key, bit)."""
    row_bits = max((nblocks_along(shape[0]) - 1).bit_length(), 1)
    col_bits = max((nblocks_along(shape[1]) - 1).bit_length(), 1)
    if row_bits + col_bits + 2 * BLOCK_SHIFT <= 64:
        rows = keys >> xp.uint64(KEY_SHIFT)
        cols = keys & xp.uint64((1 << KEY_SHIFT) - 1)
        code = (rows << xp.uint64(col_bits + 2 * BLOCK_SHIFT)) | (
            cols << xp.uint64(2 * BLOCK_SHIFT)) | bits.astype(xp.uint64)
        return stable_argsort(xp, code)
    by_bit = stable_argsort(xp, bits)
    return by_bit[stable_argsort(xp, keys[by_bit])]


def _sum_duplicates(xp: Any, order: Any, values: Any, entry_ptr: Any) -> Any:
    if xp is np:
        return np.add.reduceat(values[order], entry_ptr[:-1]).astype(values.dtype, copy=False)
    nruns = entry_ptr.shape[0] - 1
    out = xp.empty(nruns, dtype=values.dtype)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_sum_duplicates", T=values.dtype)
    _kernels.launch(kernel, nruns, (order, values, entry_ptr, nruns, out))
    return out


def _block_bitmaps(xp: Any, bits: Any, offsets: Any) -> Any:
    nblocks = offsets.shape[0] - 1
    if xp is np:
        if nblocks == 0:
            return np.zeros(0, dtype=np.uint64)
        return np.bitwise_or.reduceat(np.uint64(1) << bits.astype(np.uint64), offsets[:-1])
    bitmaps = xp.empty(nblocks, dtype=xp.uint64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_block_bitmaps")
    _kernels.launch(kernel, nblocks, (bits, offsets, nblocks, bitmaps))
    return bitmaps


def bitmap_to_coo(keys: Any, bitmaps: Any, offsets: Any, nnz: int) -> tuple[Any, Any]:
    """Row and column (int64 [nnz]) of every entry, in value order."""
    xp = get_array_module(keys, bitmaps, offsets)
    if xp is np:
        owner, bit = set_bits(bitmaps)
        brow = (keys[owner] >> np.uint64(KEY_SHIFT)).astype(np.int64)
        bcol = (keys[owner] & np.uint64((1 << KEY_SHIFT) - 1)).astype(np.int64)
        return (brow << BLOCK_SHIFT) | (bit >> BLOCK_SHIFT), (bcol << BLOCK_SHIFT) | (
            bit & BLOCK_MASK)
    rows = xp.empty(nnz, dtype=xp.int64)
    cols = xp.empty(nnz, dtype=xp.int64)
    nblocks = keys.shape[0]
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_expand_entries")
    _kernels.launch(kernel, nblocks, (keys, bitmaps, offsets, nblocks, rows, cols))
    return rows, cols


def bitmap_to_csr(keys: Any, bitmaps: Any, offsets: Any, values: Any,
                  shape: tuple[int, int], nnz: int) -> tuple[Any, Any, Any]:
    """CSR arrays (indptr, indices, data) with sorted column indices.

    ``values`` None (a pattern matrix) gives bool data of ones. Index arrays
    are int32 when every index fits, else int64.
    """
    xp = get_array_module(keys, bitmaps, offsets, values)
    index_dtype = get_index_dtype(max(nnz, shape[1]))
    if xp is np:
        rows, cols = bitmap_to_coo(keys, bitmaps, offsets, nnz)
        # entries are in (block, bit) order: a stable sort by row gives CSR order
        order = np.argsort(rows, kind="stable")
        indptr = np.zeros(shape[0] + 1, dtype=index_dtype)
        np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
        data = np.ones(nnz, dtype=bool) if values is None else values[order]
        return indptr, cols[order].astype(index_dtype), data
    return _bitmap_to_csr_cuda(keys, bitmaps, offsets, values, shape, nnz, index_dtype)


def _bitmap_to_csr_cuda(keys, bitmaps, offsets, values, shape, nnz, index_dtype):
    import cupy

    nrows = shape[0]
    # one search per block row start; the end of the last is nblocks, since
    # (nbrows << 32) may not fit in 64 bits
    brow_starts = cupy.arange(nblocks_along(nrows), dtype=cupy.uint64) << cupy.uint64(KEY_SHIFT)
    brow_ptr = cupy.concatenate([cupy.searchsorted(keys, brow_starts),
                                 cupy.asarray([keys.shape[0]])]).astype(cupy.int64)
    counts = cupy.empty(nrows, dtype=cupy.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_row_counts")
    _kernels.launch(kernel, nrows, (bitmaps, brow_ptr, nrows, counts))
    indptr = exclusive_scan(cupy, counts)
    indices = cupy.empty(nnz, dtype=index_dtype)
    if values is None:
        data = cupy.ones(nnz, dtype=bool)
        value_dtype, values_arg, data_arg = np.float64, np.uint64(0), np.uint64(0)
    else:
        data = cupy.empty(nnz, dtype=values.dtype)
        value_dtype, values_arg, data_arg = values.dtype, values, data
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_csr_entries",
                                 T=value_dtype, I=index_dtype)
    _kernels.launch(kernel, nrows, (keys, bitmaps, offsets, values_arg, brow_ptr, nrows,
                                    indptr, indices, data_arg))
    return indptr.astype(index_dtype, copy=False), indices, data
