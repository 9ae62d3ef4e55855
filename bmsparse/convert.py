"""Conversions between COO/CSR/dense and the bitmap block format.

COO -> bitmap is the paper's COO -> BMP conversion: compute each entry's
block key and bit, sort by (key, bit), sum duplicates, then reduce the runs
of equal keys to bitmaps. Bitmap -> COO/CSR needs no sort. Every function
runs where its arrays are: NumPy on the host, CuPy (with ``convert.cu``) on
the device.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import _kernels, _primitives, _readback
from ._format import (BLOCK, BLOCK_MASK, BLOCK_SHIFT, KEY_SHIFT, bit_of, nblocks_along,
                      pack_keys, set_bits)
from ._primitives import (cumsum, exclusive_scan_bytes, sort_segments,
                          stable_argsort)
from ._sputils import check_dtype, get_array_module, get_index_dtype

_KERNELS = "convert.cu"
_kernels.register(_KERNELS, {
    "bmsparse_convert_coo_codes": ("I",),
    "bmsparse_convert_csr_codes": ("I",),
    "bmsparse_convert_unpack_codes": (),
    "bmsparse_convert_sum_entries": ("T",),
    "bmsparse_convert_block_heads": (),
    "bmsparse_convert_csr_windows": ("I",),
    "bmsparse_convert_csr_count": ("I",),
    "bmsparse_convert_csr_rows": ("I",),
    "bmsparse_convert_csr_write": ("T", "I"),
    "bmsparse_convert_expand_entries": (),
    "bmsparse_convert_segment_lengths": (),
    "bmsparse_convert_csr_entries": ("T", "I"),
    "bmsparse_convert_row_pointer": (),
    "bmsparse_convert_indptr_errors": ("I",),
})

Blocks = tuple[Any, Any, Any, Any]  # keys, bitmaps, offsets, values

def _kernel_index(*arrays: Any) -> tuple[np.dtype, tuple[Any, ...]]:
    """The index dtype the kernels take for ``arrays`` (their promoted dtype
    when it is int32 or int64, else int64) and the arrays cast to it."""
    index = np.result_type(*(a.dtype for a in arrays))
    index = index if index in _kernels.INDEX_DTYPES else np.dtype(np.int64)
    return index, tuple(a.astype(index, copy=False) for a in arrays)


def check_index(name: str, a: Any) -> None:
    """An index array must be 1-D and of an integer dtype."""
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got {a.dtype.name}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got {a.ndim}-D")


def check_coo(rows: Any, cols: Any, values: Any) -> None:
    """Validate the types and lengths of COO input (ranges are checked while sorting).

    Raises
    ------
    TypeError
        Non-integer index arrays, or an unsupported value dtype.
    ValueError
        Arrays of different lengths or dimensions.
    """
    check_index("rows", rows)
    check_index("cols", cols)
    if rows.shape != cols.shape:
        raise ValueError(f"rows and cols must have the same length, got "
                         f"{rows.shape[0]} and {cols.shape[0]}")
    check_values(values, rows.shape[0])


def check_csr(indptr: Any, indices: Any, values: Any, shape: tuple[int, int]) -> None:
    """Validate the types and lengths of CSR input (see :func:`check_indptr`
    for indptr's values; the indices' range is checked while sorting)."""
    check_index("indptr", indptr)
    check_index("indices", indices)
    check_values(values, indices.shape[0])
    if indptr.shape != (shape[0] + 1,):
        raise ValueError(f"indptr must have length nrows + 1 = {shape[0] + 1}, "
                         f"got {indptr.shape[0]}")


def check_indptr(indptr: Any, nnz: int) -> None:
    """ValueError unless ``indptr`` starts at 0, ends at ``nnz`` and never
    decreases (a sync on the GPU)."""
    message = _indptr_message(get_array_module(indptr), indptr, nnz)
    if message is not None:
        raise ValueError(message)


def check_values(values: Any, n: int) -> None:
    """Values (or None, a pattern) must be 1-D, one per index, of a supported dtype."""
    if values is None:
        return
    if values.ndim != 1 or values.shape[0] != n:
        raise ValueError(f"values must be 1-D with one value per index, got shape "
                         f"{values.shape} for {n} indices")
    check_dtype(values.dtype, "values dtype")


def coo_to_bitmap(rows: Any, cols: Any, values: Any, shape: tuple[int, int]) -> Blocks:
    """Bitmap blocks from COO triplets; duplicates are summed, order is free.

    Parameters
    ----------
    rows, cols : integer [n]
        Indices (checked here: negative or out-of-range ones raise).
    values : T [n] or None
        None for a pattern (bool) matrix; bool values make the pattern of
        their True entries (a pattern stores no False).
    shape : (int, int)

    Returns
    -------
    keys : uint64 [nblocks]
    bitmaps : uint64 [nblocks]
    offsets : int64 [nblocks + 1]
    values : T [nnz] or None

    Raises
    ------
    ValueError
        An index is negative or out of range.

    Notes
    -----
    One sort of the n entries. Duplicates are summed in input order, so the
    result is deterministic. On the GPU it syncs once.
    """
    xp = get_array_module(rows, cols, values)
    check_coo(rows, cols, values)

    def explain() -> str:  # (every entry's indices, False ones included)
        return _range_message(xp, rows, cols, shape)

    if values is not None and values.dtype == np.bool_:
        return _pattern_of_true(xp, rows, cols, values, shape, explain)
    entries = _sorted_entries(xp, rows, cols, None, shape)
    return _to_blocks(xp, entries, values, explain)


def _pattern_of_true(xp: Any, rows: Any, cols: Any, values: Any, shape: tuple[int, int],
                     explain: Callable[[], str]) -> Blocks:
    """:func:`coo_to_bitmap` of bool ``values``: the pattern of the True entries.

    The False entries are dropped, but their indices are checked too (their
    errors join the sort's error word, read in the same sync): scipy rejects
    such input, and a False entry out of range is a fault in it.
    """
    errors = _range_errors(xp, rows, cols, shape)
    *entries, sort_errors = _sorted_entries(xp, rows[values], cols[values], None, shape)
    return _to_blocks(xp, (*entries, sort_errors | errors), None, explain)


def csr_to_bitmap(indptr: Any, indices: Any, values: Any, shape: tuple[int, int]) -> Blocks:
    """Bitmap blocks from CSR arrays (any index order; duplicates are summed).

    Parameters
    ----------
    indptr : integer [nrows + 1]
    indices : integer [nnz]
    values : T [nnz] or None
    shape : (int, int)

    Returns
    -------
    keys, bitmaps, offsets, values
        As for :func:`coo_to_bitmap`.
    """
    return csr_to_bitmap_rows(indptr, indices, values, shape)[0]


#: the block-row pointer (int64 [nbrows + 1]) and the most blocks in one block row
Rows = tuple[Any, int]


def csr_to_bitmap_rows(indptr: Any, indices: Any, values: Any,
                       shape: tuple[int, int]) -> tuple[Blocks, Rows | None]:
    """:func:`csr_to_bitmap`, and what :func:`row_pointer` would give for its
    blocks when the conversion found it on the way (the GPU's walk of a
    canonical CSR, in the same sync as the block count; else None)."""
    xp = get_array_module(indptr, indices, values)
    check_csr(indptr, indices, values, shape)

    def explain() -> str:
        return _indptr_message(xp, indptr, indices.shape[0]) or _range_message(
            xp, _csr_rows(xp, indptr), indices, shape)

    if xp is not np:
        walked = _walk_canonical_csr(xp, indptr, indices, values, shape, explain)
        if walked is not None:
            return walked
    keys, bits, order, entry_heads, block_heads, errors = _sorted_entries(
        xp, None, indices, indptr, shape)
    errors = errors | _indptr_errors(xp, indptr, indices.shape[0])
    return _to_blocks(xp, (keys, bits, order, entry_heads, block_heads, errors), values,
                      explain), None


#: error bit of a CSR row whose indices are not strictly increasing (convert.cu)
_NOT_CANONICAL = 32


#: entries of a block row one group of lanes walks at most, in a window of
#: its block columns (``convert.cu``)
CSR_WINDOW = 32
#: the walk's "no block column" (``BMSPARSE_NO_BLOCK_COL``): wider matrices take the sort
_NO_BLOCK_COL = (1 << 32) - 1


def _walk_canonical_csr(xp: Any, indptr: Any, indices: Any, values: Any,
                        shape: tuple[int, int],
                        explain: Callable[[], str]) -> tuple[Blocks, Rows] | None:
    """Blocks of a canonical CSR matrix on the GPU, without a sort, and their
    :data:`Rows`; None if it is not canonical (or wider than the walk's block
    columns).

    A group of 8 lanes walks the 8 rows of a block row (or of a window of
    one, for long block rows) in step (``convert.cu``): the indptr check,
    the windows, the counting walk, a scan, the rows, one sync (the block
    count, the errors and the longest block row), the writing walk.
    """
    nnz = indices.shape[0]
    nrows, ncols = shape
    if nblocks_along(ncols) >= _NO_BLOCK_COL:
        return None
    import cupy

    index, (indptr, indices) = _kernel_index(indptr, indices)
    errors = _indptr_errors(xp, indptr, nnz)
    nbrows = nblocks_along(nrows)
    window = max(CSR_WINDOW, 1)
    capacity = nbrows + nnz // window + 1
    ntiles = -(-nbrows // _primitives.SCAN_TILE)
    # scratch in one allocation: the windows' scan state, their number and
    # the longest block row (zeroed), the windows, the blocks of each
    zeroed = 8 * (3 + 3 * ntiles)
    work = cupy.cuda.alloc(zeroed + 16 * capacity)
    work.memset_async(0, zeroed)
    nwindows = np.uint64(work.ptr + zeroed - 16)
    longest = _kernels.device_array(work, zeroed - 8, 1, np.uint64)
    windows = _kernels.device_array(work, zeroed, capacity, np.uint64)
    counts = _kernels.device_array(work, zeroed + 8 * capacity, capacity, np.int64)
    i64 = np.int64
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_csr_windows", I=index)
    _kernels.launch(kernel, ntiles * _primitives.SCAN_THREADS, (
        indptr, i64(nrows), i64(nbrows), i64(window), errors, np.uint64(work.ptr), i64(ntiles),
        windows, nwindows), block=_primitives.SCAN_THREADS, cast=False)
    walk = (indptr, indices, i64(nrows), i64(ncols), i64(window), windows, nwindows,
            i64(capacity))
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_csr_count", I=index)
    _kernels.launch(kernel, 8 * capacity, (*walk, errors, counts), cast=False)
    starts = _primitives.exclusive_scan(xp, counts)
    brow_ptr = _kernels.device_empty(nbrows + 1, np.int64)
    if nbrows == 0:
        brow_ptr.fill(0)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_csr_rows", I=index)
    _kernels.launch(kernel, capacity, (indptr, i64(nrows), i64(window), windows, nwindows,
                                       i64(capacity), errors, starts, i64(nbrows), brow_ptr,
                                       longest), cast=False)
    # sync: size, errors and the longest block row
    nblocks, error, longest_row = _readback.read_ints((starts, -1), (errors, 0), (longest, 0))
    if error == _NOT_CANONICAL:
        return None
    if error:
        raise ValueError(explain())
    keys, bitmaps, offsets = _kernels.block_arrays(_kernels.alloc_blocks(nblocks), nblocks)
    out_values = None if values is None else _kernels.device_empty(nnz, values.dtype)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_csr_write",
                                 T=np.float64 if values is None else values.dtype, I=index)
    null = _kernels.NULL
    _kernels.launch(kernel, 8 * capacity, (
        walk[0], walk[1], null if values is None else values, *walk[2:], starts, i64(nnz),
        i64(nblocks), keys, bitmaps, offsets, null if out_values is None else out_values),
        cast=False)
    return (keys, bitmaps, offsets, out_values), (brow_ptr, longest_row)


#: error bit of an indptr that does not start at 0, decreases or does not end at nnz
_INDPTR_ERROR = 16


def _indptr_errors(xp: Any, indptr: Any, nnz: int) -> Any:
    """The error word (int32 [1]) of an indptr, computed without a sync."""
    if xp is np:
        indptr = indptr.astype(np.int64)
        bad = (indptr[0] != 0) | (indptr[-1] != nnz) | (indptr[1:] < indptr[:-1]).any()
        return np.array([_INDPTR_ERROR if bad else 0], dtype=np.int32)
    # one launch: the same check by CuPy's reductions was about ten launches,
    # 150-180 us of host time on an H100 host against 5-30 us of GPU time
    errors = _kernels.device_empty(1, np.int32)
    errors.data.memset_async(0, 4)
    index, (indptr,) = _kernel_index(indptr)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_indptr_errors", I=index)
    _kernels.launch(kernel, indptr.shape[0], (indptr, indptr.shape[0] - 1, nnz, errors))
    return errors


def _indptr_message(xp: Any, indptr: Any, nnz: int) -> str | None:
    # the ends and the drops read in indptr's own dtype: a uint64 past 2^63
    # cast first read as negative (a drop named before the one there is)
    first, last = int(indptr[0]), int(indptr[-1])  # sync: error path only
    if first != 0:
        return f"indptr must start at 0, got {first}"
    if last != nnz:
        return f"indptr must end at the number of indices {nnz}, got {last}"
    drops = xp.flatnonzero(indptr[1:] < indptr[:-1])
    if drops.size:
        k = int(drops[0])
        return f"indptr must be non-decreasing, but indptr[{k}] > indptr[{k + 1}]"
    return None


def _code_widths(shape: tuple[int, int], n: int) -> tuple[int, int, int]:
    """Bits of block row, block column and entry number in a sort code."""
    return (max((nblocks_along(shape[0]) - 1).bit_length(), 1),
            max((nblocks_along(shape[1]) - 1).bit_length(), 1),
            max((n - 1).bit_length(), 1))


def _sorted_entries(xp: Any, rows: Any, cols: Any, indptr: Any,
                    shape: tuple[int, int]) -> tuple[Any, ...]:
    """Entries sorted by (key, bit, input position), with their run starts.

    Returns keys (uint64), bits, order (input positions), entry_heads,
    block_heads (int64 [n] each) and an error word (int32 [1]).
    """
    n = cols.shape[0]
    row_bits, col_bits, entry_bits = _code_widths(shape, n)
    if row_bits + col_bits + 2 * BLOCK_SHIFT + entry_bits <= 64:
        codes, errors = _codes(xp, rows, cols, indptr, shape, col_bits, entry_bits)
        return (*_unpack_codes(xp, _sort_codes(xp, codes, indptr), col_bits, entry_bits),
                errors)
    if rows is None:
        if int(_indptr_errors(xp, indptr, n)[0]):  # sync: rare path, huge shapes only
            zeros = xp.zeros(n, dtype=xp.int64)
            return (zeros.astype(xp.uint64), zeros, zeros, zeros, zeros,
                    xp.zeros(1, dtype=xp.int32))
        rows = _csr_rows(xp, indptr)
    return (*_sort_by_argsort(xp, rows, cols), _range_errors(xp, rows, cols, shape))


def _sort_codes(xp: Any, codes: Any, indptr: Any) -> Any:
    """Sorted entry codes. CSR entries are grouped by block row already (8
    rows of indptr), so only the entries of each block row need sorting."""
    if xp is np or indptr is None:
        return xp.sort(codes)
    indptr = indptr.astype(xp.int64)
    starts = xp.ascontiguousarray(indptr[:-1:BLOCK])
    spans = xp.diff(xp.append(starts, indptr[-1:]))
    long_spans = xp.where(spans > _primitives.SORT_CHUNK, spans, 0)
    stats = xp.stack([spans.max(), long_spans.sum()]) if spans.size else xp.zeros(2, xp.int64)
    max_span, long_codes = _readback.read_head(stats, 2)  # sync: picks the sort
    return sort_segments(codes, starts, max_span, long_codes)


def _csr_rows(xp: Any, indptr: Any) -> Any:
    """Row index (int64) of every CSR entry."""
    counts = xp.diff(indptr.astype(xp.int64))
    if xp is np:
        return np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)
    # cupy.repeat wants host counts; a scan of row starts does it on the device
    starts = xp.zeros(_readback.read_last(indptr) + 1, dtype=xp.int64)  # sync: nnz
    xp.add.at(starts, indptr[1:-1].astype(xp.int64), 1)
    return xp.cumsum(starts[:-1])


def _range_message(xp: Any, rows: Any, cols: Any, shape: tuple[int, int]) -> str:
    """The first range error of COO indices, with the offending index."""
    for name, idx, n in (("row", rows, shape[0]), ("column", cols, shape[1])):
        lo, hi = (int(v) for v in xp.stack([idx.min(), idx.max()]).tolist())
        if lo < 0:
            return f"negative {name} index {lo}"
        if hi >= n:
            return f"{name} index {hi} out of range for shape {shape}"
    raise AssertionError("no range error found")  # pragma: no cover


def _codes(xp, rows, cols, indptr, shape, col_bits, entry_bits):
    """Sort code (uint64 [n]) of every entry and the error word (int32 [1])."""
    n = cols.shape[0]
    if xp is np:
        if rows is None:
            if _indptr_errors(np, indptr, n)[0]:
                return np.zeros(n, dtype=np.uint64), np.zeros(1, dtype=np.int32)
            rows = _csr_rows(np, indptr)
        errors = _range_errors(np, rows, cols, shape)
        r, c = rows.astype(np.uint64), cols.astype(np.uint64)
        if errors[0]:
            return np.zeros(n, dtype=np.uint64), errors
        codes = ((r >> np.uint64(3)) << np.uint64(col_bits + 6 + entry_bits)) | (
            (c >> np.uint64(3)) << np.uint64(6 + entry_bits)) | (
            bit_of(r, c) << np.uint64(entry_bits)) | np.arange(
            n, dtype=np.uint64)
        return codes, errors
    codes = xp.empty(n, dtype=xp.uint64)
    errors = xp.zeros(1, dtype=xp.int32)
    if rows is None:
        index, (indptr, cols) = _kernel_index(indptr, cols)
        kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_csr_codes", I=index)
        _kernels.launch(kernel, n, (indptr, cols, n, shape[0], shape[1], col_bits,
                                    entry_bits, codes, errors))
    else:
        index, (rows, cols) = _kernel_index(rows, cols)
        kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_coo_codes", I=index)
        _kernels.launch(kernel, n, (rows, cols, n, shape[0], shape[1], col_bits, entry_bits,
                                    codes, errors))
    return codes, errors


def _range_errors(xp: Any, rows: Any, cols: Any, shape: tuple[int, int]) -> Any:
    """The error word (int32 [1]) of the code kernels, computed with reductions."""
    if rows.size == 0:
        return xp.zeros(1, dtype=xp.int32)
    flags = xp.stack([(rows < 0).any(), (rows >= shape[0]).any(), (cols < 0).any(),
                      (cols >= shape[1]).any()]).astype(xp.int32)
    return (flags * xp.asarray([1, 2, 4, 8], dtype=xp.int32)).sum(keepdims=True).astype(
        xp.int32)


def _unpack_codes(xp, sorted_codes, col_bits, entry_bits):
    n = sorted_codes.shape[0]
    if xp is np:
        entry = sorted_codes >> np.uint64(entry_bits)
        block = entry >> np.uint64(6)
        keys = ((block >> np.uint64(col_bits)) << np.uint64(KEY_SHIFT)) | (
            block & np.uint64((1 << col_bits) - 1))
        bits = (entry & np.uint64(63)).astype(np.int64)
        order = (sorted_codes & np.uint64((1 << entry_bits) - 1)).astype(np.int64)
        return (keys, bits, order, *_heads(np, (entry,), (block,)))
    keys = xp.empty(n, dtype=xp.uint64)
    bits, order, entry_heads, block_heads = (xp.empty(n, dtype=xp.int64) for _ in range(4))
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_unpack_codes")
    _kernels.launch(kernel, n, (sorted_codes, n, col_bits, entry_bits, keys, bits, order,
                                entry_heads, block_heads))
    return keys, bits, order, entry_heads, block_heads


def _heads(xp: Any, entry_columns: tuple[Any, ...], block_columns: tuple[Any, ...]):
    """Run-start flags (int64) of sorted entries and of sorted blocks."""
    out = []
    for columns in (entry_columns, block_columns):
        n = columns[0].shape[0]
        heads = xp.zeros(n, dtype=bool)
        if n:
            heads[0] = True
        for col in columns:
            heads[1:] |= col[1:] != col[:-1]
        out.append(heads.astype(xp.int64))
    return out


def _sort_by_argsort(xp: Any, rows: Any, cols: Any) -> tuple[Any, ...]:
    """The general path: stable argsorts of (key, bit), for any shape."""
    rows, cols = rows.astype(xp.int64, copy=False), cols.astype(xp.int64, copy=False)
    keys = pack_keys(rows >> BLOCK_SHIFT, cols >> BLOCK_SHIFT)
    bits = bit_of(rows, cols)
    by_bit = stable_argsort(xp, bits)
    order = by_bit[stable_argsort(xp, keys[by_bit])]
    keys, bits = keys[order], bits[order]
    return (keys, bits, order, *_heads(xp, (keys, bits), (keys,)))


def _to_blocks(xp: Any, entries: tuple[Any, ...], values: Any,
               explain: Callable[[], str]) -> Blocks:
    """Blocks from sorted entries: sum duplicate entries, reduce runs of keys."""
    keys, bits, order, entry_heads, block_heads, errors = entries
    entry_rank = cumsum(xp, entry_heads)
    block_rank = cumsum(xp, block_heads)
    n = keys.shape[0]
    if n:  # sync: sizes and errors
        nentries, nblocks, error = _readback.read_ints((entry_rank, -1), (block_rank, -1),
                                                       (errors, 0))
    else:
        nentries, nblocks, error = 0, 0, _readback.read_ints((errors, 0))[0]
    if error:
        raise ValueError(explain())
    if values is not None:
        values = _sum_entries(xp, order, values, entry_heads, entry_rank, nentries)
    return (*_block_heads(xp, keys, bits, entry_heads, entry_rank, block_heads, block_rank,
                          nblocks, nentries), values)


def _sum_entries(xp, order, values, entry_heads, entry_rank, nentries):
    if xp is np:
        ordered = values[order]
        if nentries == order.shape[0]:
            return ordered
        # like the kernel: each run starts from its first value and adds the
        # rest left to right (reduceat may sum pairwise)
        heads = entry_heads.astype(bool)
        out = ordered[heads]
        np.add.at(out, entry_rank[~heads] - 1, ordered[~heads])
        return out
    out = xp.empty(nentries, dtype=values.dtype)
    n = order.shape[0]
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_sum_entries", T=values.dtype)
    _kernels.launch(kernel, n, (order, values, n, entry_heads, entry_rank, out))
    return out


def _block_heads(xp, keys, bits, entry_heads, entry_rank, block_heads, block_rank, nblocks,
                 nentries):
    if xp is np:
        starts = np.flatnonzero(block_heads)
        bitmaps = (np.bitwise_or.reduceat(np.uint64(1) << bits.astype(np.uint64), starts)
                   if starts.size else np.zeros(0, dtype=np.uint64))
        offsets = np.append(entry_rank[starts] - 1, nentries).astype(np.int64)
        return keys[starts], bitmaps, offsets
    n = keys.shape[0]
    b_keys = xp.empty(nblocks, dtype=xp.uint64)
    b_bitmaps = xp.empty(nblocks, dtype=xp.uint64)
    b_offsets = xp.zeros(nblocks + 1, dtype=xp.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_block_heads")
    _kernels.launch(kernel, n, (keys, bits, n, entry_heads, entry_rank, block_heads,
                                block_rank, b_keys, b_bitmaps, b_offsets))
    return b_keys, b_bitmaps, b_offsets


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


def row_pointer(keys: Any, nbrows: int) -> tuple[Any, Any]:
    """Block-row pointer of canonical keys and the length of the longest block row.

    Parameters
    ----------
    keys : uint64 [nblocks]
        Strictly increasing block keys.
    nbrows : int
        Block rows of the matrix.

    Returns
    -------
    ptr : int64 [nbrows + 1]
        The blocks of block row i are ``[ptr[i], ptr[i + 1])``.
    longest : uint64 [1]
        The most blocks in one block row (an array: reading it is a sync).

    Notes
    -----
    On the GPU one launch (two binary searches per block row); no sync.
    """
    xp = get_array_module(keys)
    if xp is np:
        starts = np.arange(nbrows, dtype=np.uint64) << np.uint64(KEY_SHIFT)
        # the end of the last block row is nblocks: nbrows << 32 may not fit
        ptr = np.append(np.searchsorted(keys, starts), keys.shape[0]).astype(np.int64)
        longest = int(np.diff(ptr).max()) if nbrows else 0
        return ptr, np.array([longest], dtype=np.uint64)
    ptr = xp.empty(nbrows + 1, dtype=xp.int64)
    longest = xp.zeros(1, dtype=xp.uint64)
    if nbrows == 0:
        ptr[0] = keys.shape[0]  # no block rows: no blocks
        return ptr, longest
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_row_pointer")
    _kernels.launch(kernel, nbrows, (keys, keys.shape[0], nbrows, ptr, longest))
    return ptr, longest


def bitmap_to_csr(keys: Any, bitmaps: Any, offsets: Any, values: Any,
                  shape: tuple[int, int], nnz: int,
                  brow_ptr: Any = None) -> tuple[Any, Any, Any]:
    """CSR arrays (indptr, indices, data) with sorted column indices.

    ``values`` None (a pattern matrix) gives bool data of ones. Index arrays
    are int32 when every index fits, else int64. ``brow_ptr`` is the
    block-row pointer (int64 [nbrows + 1]) when known (the GPU path finds it
    otherwise). On the GPU: two launches around one scan of 8 * nblocks
    lengths, one thread per entry; no sync.
    """
    xp = get_array_module(keys, bitmaps, offsets, values)
    index_dtype = get_index_dtype(max(nnz, shape[1]))
    if xp is np:
        rows, cols = bitmap_to_coo(keys, bitmaps, offsets, nnz)
        # entries are in (block, bit) order: a stable sort by row gives CSR order
        order = np.argsort(rows, kind="stable")
        indptr = _host_indptr(rows[order], shape[0], index_dtype)
        data = np.ones(nnz, dtype=bool) if values is None else values[order]
        return indptr, cols[order].astype(index_dtype), data
    return _bitmap_to_csr_cuda(keys, bitmaps, offsets, values, shape, nnz, index_dtype,
                               brow_ptr)


def _host_indptr(sorted_rows: np.ndarray, nrows: int, index_dtype: np.dtype) -> np.ndarray:
    """CSR indptr (``index_dtype`` [nrows + 1]) of entries in rows ``sorted_rows``.

    The one array of ``nrows + 1`` words a CSR form needs, and no other: the
    counts of the rows that have entries go in place, then an in-place scan
    (a bincount of the rows and its scan added two int64 arrays of ``nrows``
    words: five times a tall, hypersparse matrix's int32 indptr).
    """
    indptr = np.zeros(nrows + 1, dtype=index_dtype)
    n = sorted_rows.shape[0]
    if n:
        starts = np.flatnonzero(np.diff(sorted_rows, prepend=-1))
        indptr[sorted_rows[starts] + 1] = np.diff(starts, append=n)
    # (the sum is at most nnz: it fits index_dtype)
    np.cumsum(indptr, out=indptr, dtype=index_dtype)
    return indptr


def csr_places(keys: Any, bitmaps: Any, nrows: int, index_dtype: np.dtype,
               brow_ptr: Any = None) -> tuple[Any, Any]:
    """Where the row segments of every block start in CSR, on the GPU.

    Parameters
    ----------
    keys, bitmaps : uint64 [nblocks]
        Canonical blocks (strictly increasing keys).
    nrows : int
        Rows of the matrix.
    index_dtype : dtype
        int32 or int64, holding the number of entries.
    brow_ptr : int64 [nbrows + 1], optional
        The block-row pointer, when known.

    Returns
    -------
    brow_ptr : int64 [nbrows + 1]
    places : index_dtype [8 * nblocks + 1]
        Exclusive scan of the segment lengths in CSR order (``_cuda/csr.cuh``):
        the first CSR index of every segment, then the number of entries.
    """
    import cupy

    nblocks = keys.shape[0]
    if brow_ptr is None:
        brow_ptr = row_pointer(keys, nblocks_along(nrows))[0]
    lengths = cupy.empty(8 * nblocks, dtype=cupy.uint8)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_segment_lengths")
    _kernels.launch(kernel, nblocks, (keys, bitmaps, brow_ptr, nblocks, lengths))
    return brow_ptr, exclusive_scan_bytes(cupy, lengths, index_dtype)


def _bitmap_to_csr_cuda(keys, bitmaps, offsets, values, shape, nnz, index_dtype, brow_ptr):
    import cupy

    nrows, nblocks = shape[0], keys.shape[0]
    brow_ptr, places = csr_places(keys, bitmaps, nrows, index_dtype, brow_ptr)
    indptr = cupy.empty(nrows + 1, dtype=index_dtype)
    indices = cupy.empty(nnz, dtype=index_dtype)
    if values is None:
        data = cupy.ones(nnz, dtype=bool)
        value_dtype, values_arg, data_arg = np.float64, np.uint64(0), np.uint64(0)
    else:
        data = cupy.empty(nnz, dtype=values.dtype)
        value_dtype, values_arg, data_arg = values.dtype, values, data
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_convert_csr_entries",
                                 T=value_dtype, I=index_dtype)
    _kernels.launch(kernel, max(32 * nblocks, nrows + 1), (
        keys, bitmaps, offsets, values_arg, brow_ptr, nblocks, nrows, places, indptr, indices,
        data_arg))
    return indptr, indices, data