"""Indexing of a BitmapMatrix, ``A[key]``, as scipy's ``csr_array`` indexes.

Keys: integers (negative ones count from the end), slices (any step),
integer arrays, lists and ranges (any order, repeats), boolean masks (of one axis,
or of the whole matrix; dense or sparse), ``Ellipsis``, and tuples of two of
these; a single key indexes rows. Index arrays are NumPy arrays for a matrix on the host
and CuPy arrays for one on the GPU; lists are taken on both sides.

Results, as scipy's, except where scipy returns a 1-D sparse array:

- two integers: the element, a NumPy scalar of the matrix's dtype on the
  host, a 0-d CuPy array on the GPU (no sync, as CuPy's own indexing);
- an integer with a slice or a 1-D array: a dense 1-D array in the
  matrix's library and dtype (scipy: a 1-D ``coo_array``);
- two arrays are paired element by element, as scipy pairs them: 1-D
  arrays (or a mask of the whole matrix) give a dense 1-D array (scipy's
  too), 2-D ones a BitmapMatrix of their broadcast shape without its zeros
  (scipy builds it from the dense values); ``A[np.ix_(rows, cols)]`` (a
  column of rows) selects the submatrix;
- an integer with a 2-D array: a BitmapMatrix of the array's shape;
- otherwise the BitmapMatrix of the selected rows and columns, in order
  and with repeats, explicitly stored zeros kept.

Differences from scipy 1.17, decided here: no ``None`` (``numpy.newaxis``)
in a key; index arrays of a float dtype raise IndexError (scipy truncates
``[1.5]`` to ``[1]``), and so do float and NumPy bool scalars (scipy:
ValueError); an array with a slice of step other than 1 selects the
submatrix (scipy 1.17 raises ValueError); results are canonical (scipy's may
have unsorted column indices).

Paths and their cost (nblocks blocks; on the GPU the same NumPy code runs
on CuPy arrays, with no kernels of its own):

- ``A[i, j]``: one binary search of the keys, a bit test and a popcount:
  O(log nblocks), no sync.
- a row with a slice of step at most 8 (``A[i]``, ``A[i, a:b]``): its
  blocks in the slice's span are consecutive, found by two binary
  searches; O(log nblocks + blocks + len), one sync on the GPU (their
  number).
- a column with a slice of step at most 8 (``A[:, j]``, ``A[a:b, j]``): a
  binary search per block row, O(len / 8 * log nblocks + len), no sync.
- paired arrays, an integer with an array, a line with a longer step: a
  binary search per element, O(len * log nblocks), no sync.
- ``A[a:b]`` (rows, step 1): only the blocks of block rows ``a // 8`` to
  ``(b - 1) // 8`` are read, found by two binary searches. When ``a`` is a
  multiple of 8 and ``b`` one too (or the last row) the result is slices of
  the arrays, keys shifted. Otherwise each block splits into its rows
  ``a % 8`` to 7 (the tail of its values, bitmap order being row-major) and
  its rows 0 to ``a % 8 - 1`` (the head), which join the tails of the block
  row before: a stable sort of the two sorted runs of pieces (a merge for
  NumPy's timsort). O(blocks + nnz of the result); a few syncs on the GPU
  (sizes).
- other row selections (k rows by arrays or a step other than 1): every
  block of each selected row's block row is read (two binary searches find
  them), its 8-bit row becomes a piece of an output block, and a stable
  sort of the p non-empty pieces by output key orders the values.
  O(k log nblocks + blocks read + p log p + nnz of the result).
- columns are then selected from the selected rows: their blocks are
  filtered by block column (O(blocks)); whole block columns (bounds
  multiples of 8) are the result as they are; otherwise the blocks kept
  are expanded to entries, matched to the columns (by arithmetic for a
  slice, by binary searches of the sorted columns for an array, repeats
  expanded) and rebuilt with :meth:`BitmapMatrix.from_coo` (a sort of the
  entries).

Index arrays on the GPU are read once (their least and largest values) for
the bounds check, and boolean masks once for their number of True.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from . import _readback, convert
from ._format import (BLOCK, BLOCK_SHIFT, COL_MASK, KEY_SHIFT, bit_of, block_cols_of,
                      block_rows_of, nblocks_along, pack_keys, popcount)
from ._primitives import exclusive_scan, merge_pieces, move_runs, ranges, stable_argsort
from ._sputils import get_array_module

#: one axis of a validated key: an index, a range of indices (a slice), or an
#: int64 array of non-negative indices (1-D or 2-D)
Axis = Any

_KEY_TYPES = ("only integers, slices (`:`), ellipsis (`...`) and integer or boolean arrays "
              "are valid indices")


def getitem(a: Any, key: Any) -> Any:
    """``a[key]`` (see the module's docstring for keys and results).

    Parameters
    ----------
    a : BitmapMatrix
    key : int, slice, array, list, Ellipsis, or a tuple of two of these

    Returns
    -------
    scalar, dense 1-D array or BitmapMatrix

    Raises
    ------
    IndexError
        An index out of range, a key of an unsupported type, a mask of the
        wrong length, arrays that do not broadcast, or a result of more
        than two dimensions.
    TypeError
        An index array on the other side than the matrix (NumPy for CuPy).
    ValueError
        A slice step of zero.
    """
    xp = a._xp()
    row, col = _validate(key, a.shape, xp, a.keys)
    if isinstance(row, int):
        if isinstance(col, int):
            return _element(a, xp, row, col)
        if isinstance(col, range):
            return _row_line(a, xp, row, col)
        return _paired(a, xp, xp.full(col.shape, row, dtype=xp.int64), col, keep=col.ndim == 2)
    if isinstance(col, int):
        if isinstance(row, range):
            return _column_line(a, xp, row, col)
        return _paired(a, xp, row, xp.full(row.shape, col, dtype=xp.int64), keep=row.ndim == 2)
    if isinstance(row, range) or isinstance(col, range):
        if getattr(row, "ndim", 1) == 2 or getattr(col, "ndim", 1) == 2:
            raise IndexError("indexing with a 2-D array and a slice gives a 3-D result; a "
                             "BitmapMatrix is 2-D")
        return _submatrix(a, xp, row, col)
    if row.ndim == 2 and row.shape[1] == 1 and (col.ndim == 1 or col.shape[0] == 1):
        # a column of rows and a row of columns (numpy.ix_): scipy's outer indexing
        return _submatrix(a, xp, row[:, 0], col.reshape(-1))
    if row.ndim == 1 and col.ndim == 1:
        return _paired(a, xp, *xp.broadcast_arrays(row, col), keep=False)
    row, col = xp.broadcast_arrays(row, col)
    # scipy builds this result from the dense values: its zeros are dropped
    values = _paired(a, xp, row, col, keep=False)
    return type(a).from_dense(values)


# --- the key -----------------------------------------------------------------


def _validate(key: Any, shape: tuple[int, int], xp: Any, probe: Any) -> tuple[Axis, Axis]:
    """The row and column parts of ``key``: ints in range, ranges, or int64
    arrays of valid non-negative indices on ``xp`` (``probe``: an array of
    the matrix, for the host/device check)."""
    items = () if key is Ellipsis else key if isinstance(key, tuple) else (key,)
    parts: list[Any] = []
    ellipsis = None
    ndim = 0
    for item in items:
        if item is Ellipsis:
            if ellipsis is not None:
                raise IndexError("an index can only have a single ellipsis ('...')")
            ellipsis = len(parts)
            continue
        part = _part(item, xp, probe, shape)
        if isinstance(part, tuple):  # a sparse mask of the whole matrix, as its indices
            parts.extend(part)
            ndim += 2
            continue
        parts.append(part)
        ndim += part.ndim if _is_mask(part) else 1
    if ndim > 2:
        raise IndexError(f"too many indices for a 2-D matrix: {ndim} were indexed")
    fill = [slice(None)] * (2 - ndim)
    parts = parts + fill if ellipsis is None else parts[:ellipsis] + fill + parts[ellipsis:]
    axes: list[Axis] = []
    for part in parts:
        axis = len(axes)
        if isinstance(part, slice):
            axes.append(range(*part.indices(shape[axis])))
        elif isinstance(part, int):
            if not -shape[axis] <= part < shape[axis]:
                raise _out_of_range(part, axis, shape[axis])
            axes.append(part % shape[axis])
        elif _is_mask(part):
            if part.shape != shape[axis:axis + part.ndim]:
                raise IndexError(f"boolean index of shape {part.shape} does not match the "
                                 f"matrix along axis {axis}: its shape is {shape}")
            axes.extend(i.astype(xp.int64, copy=False) for i in xp.nonzero(part))
        else:
            axes.append(_in_range(xp, part, axis, shape[axis]))
    row, col = axes
    arrays = [x.shape for x in axes if not isinstance(x, (int, range))]
    if len(arrays) == 2:
        try:
            np.broadcast_shapes(*arrays)
        except ValueError:
            raise IndexError("shape mismatch: indexing arrays could not be broadcast together "
                             f"with shapes {arrays[0]} {arrays[1]}") from None
    return row, col


def _part(item: Any, xp: Any, probe: Any, shape: tuple[int, int]) -> Any:
    """One item of a key: an int, a slice, an index or mask array on ``xp``
    (a 1-D sparse mask as a dense one), or a pair of index arrays (a sparse
    mask of the whole matrix)."""
    if isinstance(item, slice):
        return item
    if item is None:
        raise IndexError("None (numpy.newaxis) in an index is not supported: a BitmapMatrix "
                         "is 2-D; to keep an axis use a slice of length 1, A[i:i + 1]")
    if isinstance(item, (int, np.integer)):  # (bool too, as scipy: True is 1)
        return operator.index(item)
    if getattr(item, "format", None) is not None and hasattr(item, "nonzero"):
        return _sparse_mask(item, xp, probe, shape)
    if isinstance(item, (list, tuple, range)):
        try:
            arr = np.asarray(item)
        except ValueError as exc:  # ragged
            raise IndexError(f"invalid index: {exc}") from None
        if xp is not np:
            arr = xp.asarray(arr)
    elif isinstance(item, np.ndarray) or type(item).__module__.startswith("cupy"):
        get_array_module(probe, item)  # (TypeError for a NumPy index of a GPU matrix)
        # (a numpy.matrix stays 2-D under reshape and indexing: a plain array)
        arr = np.asarray(item) if isinstance(item, np.ndarray) else item
    else:
        try:
            return operator.index(item)
        except TypeError:
            raise IndexError(f"{_KEY_TYPES}, got {type(item).__name__}") from None
    if arr.ndim == 0:
        if arr.dtype.kind in "iu":
            return int(arr)  # sync: a 0-d CuPy index is read once, as CuPy reads it
        raise IndexError(f"{_KEY_TYPES}, got a 0-d array of dtype {arr.dtype.name}")
    if arr.dtype.kind not in "iub":
        if arr.size:
            raise IndexError("arrays used as indices must be of integer (or boolean) type, "
                             f"got {arr.dtype.name}")
        arr = arr.astype(xp.int64)  # [] is an empty index, as scipy and NumPy take it
    if arr.dtype.kind != "b" and arr.ndim > 2:
        raise IndexError(f"index arrays must be 1-D or 2-D, got {arr.ndim}-D")
    return arr


def _sparse_mask(item: Any, xp: Any, probe: Any, shape: tuple[int, int]) -> Any:
    """A sparse boolean mask: the (row, column) index arrays of one of the
    matrix's shape, or the dense mask of a 1-D one (a mask of one axis)."""
    if item.dtype != np.bool_:
        raise IndexError("indexing with a sparse matrix is only supported for a boolean "
                         "mask of the matrix's shape or of one axis, got dtype "
                         f"{item.dtype.name}")
    if item.ndim == 1:
        # scipy's 1-D sparse arrays mask one axis, as a dense mask does: its
        # length is checked against that axis with the dense masks
        mask = item.toarray()
        get_array_module(probe, mask)  # (TypeError for a NumPy mask of a GPU matrix)
        return mask
    if tuple(item.shape) != shape:
        raise IndexError(f"boolean index of shape {tuple(item.shape)} does not match the "
                         f"matrix's shape {shape}")
    rows, cols = item.nonzero()
    get_array_module(probe, rows)
    return rows.astype(xp.int64), cols.astype(xp.int64)


def _is_mask(part: Any) -> bool:
    return getattr(part, "dtype", None) == np.bool_


def _in_range(xp: Any, idx: Any, axis: int, size: int) -> Any:
    """``idx`` as int64 indices in ``[0, size)``; IndexError naming the first
    bound it crosses. One sync on the GPU (its least and largest values)."""
    if idx.size == 0:
        return idx.astype(xp.int64)
    if idx.dtype.itemsize < 4:  # (the read takes 32- and 64-bit words)
        idx = idx.astype(xp.int64)
    bounds = xp.stack([idx.min(), idx.max()])
    # sync: an index out of range raises, as scipy does, before any work
    low, high = _readback.read_ints((bounds, 0), (bounds, 1))
    if high >= size:
        raise _out_of_range(high, axis, size)
    if low < -size:
        raise _out_of_range(low, axis, size)
    idx = idx.astype(xp.int64)
    return xp.where(idx < 0, idx + size, idx) if low < 0 else idx


def _out_of_range(index: int, axis: int, size: int) -> IndexError:
    return IndexError(f"index {index} is out of bounds for axis {axis} with size {size}")


# --- elements and lines (dense results) ----------------------------------------


def _element(a: Any, xp: Any, i: int, j: int) -> Any:
    """``a[i, j]``: a NumPy scalar, or a 0-d CuPy array (no sync)."""
    return _paired(a, xp, xp.full(1, i, dtype=xp.int64), xp.full(1, j, dtype=xp.int64),
                   keep=False)[0]


def _paired(a: Any, xp: Any, rows: Any, cols: Any, keep: bool) -> Any:
    """The elements ``(rows[p], cols[p])`` (int64 arrays of one shape): a
    dense array of that shape in the matrix's dtype, zeros where nothing is
    stored; with ``keep`` a BitmapMatrix of that (2-D) shape holding the
    stored ones, zeros included."""
    values, present = lookup(a, xp, rows.reshape(-1), cols.reshape(-1))
    if keep:
        at = xp.flatnonzero(present)
        r, c = xp.divmod(at, max(rows.shape[1], 1))
        return type(a).from_coo(r, c, None if values is None else values[at], rows.shape)
    return (present if values is None else values).reshape(rows.shape)


def lookup(a: Any, xp: Any, rows: Any, cols: Any) -> tuple[Any, Any]:
    """Values (None for bool; zeros where nothing is stored) and presence
    (bool) of the elements ``(rows[p], cols[p])``, 1-D int64 in range: a
    binary search of the keys each."""
    index, present = places(a, xp, rows, cols)
    return _picked(a, xp, index, present), present


def places(a: Any, xp: Any, rows: Any, cols: Any) -> tuple[Any, Any]:
    """Where the elements ``(rows[p], cols[p])`` (1-D int64, in range) are
    among ``a``'s values (int64, meaningful where present), and whether they
    are stored (bool): a binary search of the keys each."""
    nblocks = a.nblocks
    if nblocks == 0:
        return xp.zeros(rows.shape, dtype=xp.int64), xp.zeros(rows.shape, dtype=bool)
    keys = a.keys
    wanted = pack_keys(rows >> BLOCK_SHIFT, cols >> BLOCK_SHIFT)
    # (a key past the last block is clipped onto it, and then not found)
    pos = xp.minimum(xp.searchsorted(keys, wanted), nblocks - 1)
    bitmap = xp.where(keys[pos] == wanted, a.bitmaps[pos], xp.uint64(0))
    return _places_at(a, xp, pos, bitmap, bit_of(rows, cols))


def _places_at(a: Any, xp: Any, pos: Any, bitmap: Any, bit: Any) -> tuple[Any, Any]:
    """Value index and presence of bit ``bit`` of blocks ``pos`` whose
    bitmaps are ``bitmap`` (0 for a block not stored); arrays broadcast
    together."""
    bit = bit.astype(xp.uint64)
    present = ((bitmap >> bit) & xp.uint64(1)).astype(bool)
    index = a.offsets[pos] + popcount(bitmap & ((xp.uint64(1) << bit) - xp.uint64(1)))
    return index, present


def _picked(a: Any, xp: Any, index: Any, present: Any) -> Any:
    """``a``'s values at ``index`` where ``present``, zeros elsewhere (None for bool)."""
    if a.values is None:
        return None
    if a.values.shape[0] == 0:  # (nothing stored: no value to pick from)
        return xp.zeros(present.shape, dtype=a.dtype)
    picked = a.values[xp.where(present, index, 0)]
    return xp.where(present, picked, xp.zeros((), dtype=a.dtype))


def _values_at(a: Any, xp: Any, pos: Any, bitmap: Any, bit: Any) -> tuple[Any, Any]:
    """Values (None for bool) and presence of bit ``bit`` of blocks ``pos``
    whose bitmaps are ``bitmap`` (0 for a block not stored); arrays
    broadcast together."""
    index, present = _places_at(a, xp, pos, bitmap, bit)
    return _picked(a, xp, index, present), present


def _row_line(a: Any, xp: Any, i: int, cols: range) -> Any:
    """Row ``i`` at columns ``cols``, dense 1-D: the row's blocks in the
    columns' span are consecutive (two binary searches); one sync on the
    GPU (their number)."""
    if len(cols) == 0 or a.nblocks == 0 or abs(cols.step) > BLOCK:
        return _paired(a, xp, xp.full(len(cols), i, dtype=xp.int64), _arange(xp, cols),
                       keep=False)
    first, last = min(cols[0], cols[-1]), max(cols[0], cols[-1])
    bc0, bc1 = first >> BLOCK_SHIFT, last >> BLOCK_SHIFT
    keys = a.keys
    br = i >> BLOCK_SHIFT
    lo = xp.searchsorted(keys, xp.full(1, (br << KEY_SHIFT) | bc0, dtype=xp.uint64))
    hi = xp.searchsorted(keys, xp.full(1, (br << KEY_SHIFT) | bc1, dtype=xp.uint64),
                         side="right")
    bounds = xp.concatenate([lo, hi]).astype(xp.int64)
    lo, hi = _readback.read_ints((bounds, 0), (bounds, 1))  # sync: the blocks' count
    pos = xp.arange(lo, hi, dtype=xp.int64)
    bits = ((i & (BLOCK - 1)) << BLOCK_SHIFT) + xp.arange(BLOCK, dtype=xp.int64)
    values, present = _values_at(a, xp, pos[:, None], a.bitmaps[lo:hi, None], bits[None, :])
    width = bc1 - bc0 + 1
    line = xp.zeros((width, BLOCK), dtype=present.dtype if values is None else a.dtype)
    # each block's 8 columns at its place in the span
    line[block_cols_of(keys[lo:hi]) - bc0] = present if values is None else values
    return _take_range(line.reshape(-1), cols, bc0 << BLOCK_SHIFT)


def _column_line(a: Any, xp: Any, rows: range, j: int) -> Any:
    """Column ``j`` at rows ``rows``, dense 1-D: a binary search per block
    row; no sync."""
    if len(rows) == 0 or a.nblocks == 0 or abs(rows.step) > BLOCK:
        return _paired(a, xp, _arange(xp, rows), xp.full(len(rows), j, dtype=xp.int64),
                       keep=False)
    first, last = min(rows[0], rows[-1]), max(rows[0], rows[-1])
    br = xp.arange(first >> BLOCK_SHIFT, (last >> BLOCK_SHIFT) + 1, dtype=xp.int64)
    wanted = pack_keys(br, xp.full(br.shape, j >> BLOCK_SHIFT, dtype=xp.int64))
    keys = a.keys
    pos = xp.minimum(xp.searchsorted(keys, wanted), keys.shape[0] - 1)
    bitmap = xp.where(keys[pos] == wanted, a.bitmaps[pos], xp.uint64(0))
    bits = (xp.arange(BLOCK, dtype=xp.int64) << BLOCK_SHIFT) + (j & (BLOCK - 1))
    values, present = _values_at(a, xp, pos[:, None], bitmap[:, None], bits[None, :])
    dense = present if values is None else values
    return _take_range(dense.reshape(-1), rows, (first >> BLOCK_SHIFT) << BLOCK_SHIFT)


def _take_range(line: Any, where: range, base: int) -> Any:
    """``line[k - base for k in where]``, a copy (``where`` non-empty)."""
    stop = where.stop - base
    return line[where.start - base:stop if stop >= 0 else None:where.step].copy()


def _arange(xp: Any, r: range) -> Any:
    return xp.arange(r.start, r.stop, r.step, dtype=xp.int64)


# --- submatrices -----------------------------------------------------------------


def _submatrix(a: Any, xp: Any, rows: Axis, cols: Axis) -> Any:
    """The BitmapMatrix of rows ``rows`` and columns ``cols`` (ranges or 1-D
    int64 arrays), in their order and with their repeats."""
    m, n = a.shape
    shape = (len(rows), len(cols))
    if 0 in shape:
        return _empty(a, xp, shape)
    all_rows = isinstance(rows, range) and rows == range(m)
    all_cols = isinstance(cols, range) and cols == range(n)
    if all_rows and all_cols:
        return a.copy()
    if all_rows:
        picked = a
    elif isinstance(rows, range) and (rows.step == 1 or len(rows) == 1):
        picked = _row_range(a, xp, rows[0], rows[0] + len(rows))
    elif isinstance(rows, range) and len(rows) > BLOCK * a.nblocks:
        # more rows than could hold an entry (a reversed or strided range of a
        # hypersparse matrix): each entry's row is mapped by arithmetic
        picked = _stepped_rows(a, xp, rows)
    else:
        picked = _take_rows(a, xp, rows if not isinstance(rows, range) else _arange(xp, rows))
    return picked if all_cols else _take_columns(picked, xp, cols)


def _empty(a: Any, xp: Any, shape: tuple[int, int]) -> Any:
    values = None if a.values is None else xp.zeros(0, dtype=a.dtype)
    return type(a)._from_blocks(xp.zeros(0, dtype=xp.uint64), xp.zeros(0, dtype=xp.uint64),
                                xp.zeros(1, dtype=xp.int64), values, shape, a.dtype, 0)


def _row_range(a: Any, xp: Any, r0: int, r1: int) -> Any:
    """Rows ``r0 <= r < r1`` (``r0 < r1``): only the blocks of their block rows are read."""
    n = a.shape[1]
    keys, bitmaps, offsets, values = a.keys, a.bitmaps, a.offsets, a.values
    br0, br1 = r0 >> BLOCK_SHIFT, (r1 - 1) >> BLOCK_SHIFT
    lo = xp.searchsorted(keys, xp.full(1, br0 << KEY_SHIFT, dtype=xp.uint64))
    hi = xp.searchsorted(keys, xp.full(1, (br1 << KEY_SHIFT) | COL_MASK, dtype=xp.uint64),
                         side="right")
    bounds = xp.concatenate([lo, hi, offsets[lo], offsets[hi]]).astype(xp.int64)
    lo, hi, v0, v1 = _readback.read_ints(*((bounds, k) for k in range(4)))  # sync: sizes
    shape = (r1 - r0, n)
    shift = xp.uint64(br0 << KEY_SHIFT)
    s = r0 & (BLOCK - 1)
    if s == 0 and (r1 % BLOCK == 0 or r1 == a.shape[0]):
        # whole block rows (or the last, whose padding is clear): slices
        return type(a)._from_blocks(
            keys[lo:hi] - shift, bitmaps[lo:hi].copy(), offsets[lo:hi + 1] - v0,
            None if values is None else values[v0:v1].copy(), shape, a.dtype, v1 - v0)
    block_keys, block_bitmaps, first = keys[lo:hi] - shift, bitmaps[lo:hi], offsets[lo:hi]
    out_row = block_rows_of(block_keys)
    bc = block_cols_of(block_keys)
    nrows_out = nblocks_along(shape[0])
    # rows past r1 fall in the last output block row: its low `limit` rows stay
    limit = shape[0] - BLOCK * (nrows_out - 1)
    last_mask = xp.uint64((1 << (BLOCK * limit)) - 1) if limit < BLOCK else None
    below = xp.uint64((1 << (BLOCK * s)) - 1)
    # rows s.. of a block are the high bits, the tail of its values: output
    # rows 0..7-s of the same output block row
    tails = (block_bitmaps >> xp.uint64(BLOCK * s), out_row,
             first + popcount(block_bitmaps & below))
    pieces = [_cut(xp, *tails, bc, nrows_out, last_mask)]
    if s:
        # rows ..s-1 are the head of its values, output rows 8-s.. of the
        # output block row before
        heads = ((block_bitmaps & below) << xp.uint64(BLOCK * (BLOCK - s)), out_row - 1, first)
        pieces.append(_cut(xp, *heads, bc, nrows_out, last_mask))
    else:
        pieces.append(tuple(x[:0] for x in pieces[0]))
    return _join(a, xp, pieces[0], pieces[1], shape)


def _cut(xp: Any, bitmap: Any, out_row: Any, start: Any, bc: Any, nrows_out: int,
         last_mask: Any) -> tuple[Any, Any, Any, Any]:
    """Pieces of blocks in output block rows ``out_row`` (int64): those in
    range and non-empty, cut to the output's last row, as (key, bitmap,
    first value, count)."""
    if last_mask is not None:
        bitmap = xp.where(out_row == nrows_out - 1, bitmap & last_mask, bitmap)
    keep = xp.flatnonzero((bitmap != 0) & (out_row >= 0) & (out_row < nrows_out))
    bitmap = bitmap[keep]
    # (a cut drops the last rows of a piece: the end of its values)
    return pack_keys(out_row[keep], bc[keep]), bitmap, start[keep], popcount(bitmap)


def _join(a: Any, xp: Any, tails: tuple[Any, ...], heads: tuple[Any, ...],
          shape: tuple[int, int]) -> Any:
    """The output blocks of two lists of pieces, each sorted by key with
    unique keys; where keys meet, the tail's rows come first (lower rows).
    A stable sort of the two runs: a merge for NumPy's timsort, one radix
    sort on the GPU."""
    merged = [xp.concatenate([t, h]) for t, h in zip(tails, heads)]
    order = stable_argsort(xp, merged[0])
    keys, bitmaps, starts, counts = (x[order] for x in merged)
    return _blocks(a, xp, *merge_pieces(xp, keys, bitmaps), starts, counts, shape)


def _blocks(a: Any, xp: Any, keys: Any, bitmaps: Any, starts: Any, counts: Any,
            shape: tuple[int, int]) -> Any:
    """A BitmapMatrix of canonical ``keys`` and ``bitmaps`` whose values are
    the matrix's runs ``[starts[p], starts[p] + counts[p])`` in turn."""
    offsets = exclusive_scan(xp, popcount(bitmaps))
    values = None if a.values is None else move_runs(xp, a.values, starts, counts)
    return type(a)._from_blocks(keys, bitmaps, offsets, values, shape, a.dtype)


def _take_rows(a: Any, xp: Any, rows: Any) -> Any:
    """Rows ``rows`` (1-D int64, any order, repeats), all columns."""
    shape = (rows.shape[0], a.shape[1])
    if a.nblocks == 0:
        return _empty(a, xp, shape)
    keys, bitmaps, offsets = a.keys, a.bitmaps, a.offsets
    br = rows >> BLOCK_SHIFT
    lo = xp.searchsorted(keys, pack_keys(br, xp.zeros_like(br)))
    hi = xp.searchsorted(keys, pack_keys(br, xp.full(br.shape, COL_MASK, dtype=xp.int64)),
                         side="right")
    row, block = ranges(xp, lo.astype(xp.int64), (hi - lo).astype(xp.int64))
    shift = ((rows[row] & (BLOCK - 1)) << BLOCK_SHIFT).astype(xp.uint64)
    byte = (bitmaps[block] >> shift) & xp.uint64(0xFF)
    keep = xp.flatnonzero(byte)
    row, block, shift, byte = row[keep], block[keep], shift[keep], byte[keep]
    # each non-empty 8-bit row of a block is one row of an output block: a
    # stable sort by output key keeps rows in order inside each block
    out_keys = pack_keys(row >> BLOCK_SHIFT, block_cols_of(keys[block]))
    piece = byte << ((row & (BLOCK - 1)) << BLOCK_SHIFT).astype(xp.uint64)
    starts = offsets[block] + popcount(bitmaps[block] & ((xp.uint64(1) << shift)
                                                          - xp.uint64(1)))
    order = stable_argsort(xp, out_keys)
    out_keys, piece, starts = out_keys[order], piece[order], starts[order]
    counts = popcount(piece)
    if out_keys.shape[0] == 0:
        return _empty(a, xp, shape)
    return _blocks(a, xp, *merge_pieces(xp, out_keys, piece), starts, counts, shape)


def _stepped_rows(a: Any, xp: Any, rows: range) -> Any:
    """Rows ``rows`` (a range), all columns, from the entries: O(nnz), not
    O(len(rows)); one sync on the GPU (the entries kept)."""
    r, c = a._coo_indices()  # in value order
    place, off = xp.divmod(r - rows.start, rows.step)
    kept = xp.flatnonzero((off == 0) & (place >= 0) & (place < len(rows)))
    values = None if a.values is None else a.values[kept]
    return type(a).from_coo(place[kept], c[kept], values, (len(rows), a.shape[1]))


def _take_columns(a: Any, xp: Any, cols: Axis) -> Any:
    """Columns ``cols`` (a range or 1-D int64 array, any order, repeats) of
    ``a``, all rows."""
    n = a.shape[1]
    shape = (a.shape[0], len(cols))
    keys, bitmaps, offsets = a.keys, a.bitmaps, a.offsets
    bc = block_cols_of(keys)
    span = isinstance(cols, range) and (abs(cols.step) <= BLOCK or len(cols) == 1)
    if span:
        # every block column in the span holds a column wanted
        first, last = min(cols[0], cols[-1]), max(cols[0], cols[-1])
        keep = xp.flatnonzero((bc >= first >> BLOCK_SHIFT) & (bc <= last >> BLOCK_SHIFT))
        if (cols.step == 1 or len(cols) == 1) and first % BLOCK == 0 and (
                (last + 1) % BLOCK == 0 or last + 1 == n):
            # whole block columns (or the last, whose padding is clear): the
            # blocks kept are the result
            kept = bitmaps[keep]
            out_keys = pack_keys(block_rows_of(keys[keep]), bc[keep] - (first >> BLOCK_SHIFT))
            return _blocks(a, xp, out_keys, kept, offsets[keep], popcount(kept), shape)
    elif isinstance(cols, range):
        # a longer step: the block columns it meets, by arithmetic (O(blocks),
        # not O(len(cols))): the first column at or past a block's first
        up = cols if cols.step > 0 else cols[::-1]
        lo = bc.astype(xp.int64) << BLOCK_SHIFT
        k = xp.maximum(-((up.start - lo) // up.step), 0)
        keep = xp.flatnonzero((k < len(up)) & (up.start + k * up.step < lo + BLOCK))
    else:
        keep = xp.flatnonzero(_among(xp, bc, xp.unique(cols >> BLOCK_SHIFT), nblocks_along(n)))
    # the blocks of the block columns wanted, expanded to their entries
    kept = bitmaps[keep]
    counts = popcount(kept)
    kept_offsets = exclusive_scan(xp, counts)
    nnz = _readback.read_last(kept_offsets)  # sync: the entries' count
    rows, ecols = convert.bitmap_to_coo(keys[keep], kept, kept_offsets, nnz)
    value_at = ranges(xp, offsets[keep], counts, nnz)[1]
    if isinstance(cols, range):
        # a column's place in a range is arithmetic (and unique)
        step = cols.step if len(cols) > 1 else 1
        place, off = xp.divmod(ecols - cols.start, step)
        entry = xp.flatnonzero((off == 0) & (place >= 0) & (place < len(cols)))
        place = place[entry]
    else:
        # each entry once per place its column has in `cols`
        order = stable_argsort(xp, cols)
        ordered = cols[order]
        left = xp.searchsorted(ordered, ecols, side="left")
        right = xp.searchsorted(ordered, ecols, side="right")
        entry, place = ranges(xp, left, right - left)
        place = order[place]
    values = None if a.values is None else a.values[value_at[entry]]
    return type(a).from_coo(rows[entry], place, values, shape)


def _among(xp: Any, x: Any, sorted_set: Any, bound: int) -> Any:
    """Whether each of ``x`` is in ``sorted_set`` (sorted, unique, non-empty;
    all in ``[0, bound)``): a table of ``bound`` flags where that is no larger
    than ``x``, else a binary search each."""
    if bound <= 4 * x.shape[0] + 4096:
        table = xp.zeros(bound, dtype=bool)
        table[sorted_set] = True
        return table[x]
    at = xp.minimum(xp.searchsorted(sorted_set, x), sorted_set.shape[0] - 1)
    return sorted_set[at] == x
