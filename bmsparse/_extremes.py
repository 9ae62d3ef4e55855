"""max and min of a bitmap matrix (argmax, argmin, nanmax and nanmin too),
over all entries or each row or column.

As scipy.sparse: the entries that are not stored count as zeros wherever a
line (or the matrix) has any, unless ``explicit``; NaN propagates as in
``numpy.maximum`` (``nanmax`` and ``nanmin`` skip it, as ``numpy.fmax``);
complex values compare lexicographically (real part, then imaginary part),
as NumPy orders them.

Each line's extreme comes from one sort of its stored values (two stable
argsorts: by value, then by line), so the result does not depend on the
order of the blocks. The index of the extreme is the first entry of the
line (in CSR order) that equals it, found by a scan and a binary search.
On NumPy or CuPy arrays alike; no sync on the GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._primitives import exclusive_scan, stable_argsort

_EMPTY = "zero-size array to reduction operation {} which has no identity"


def extreme(a: Any, axis: int | None, largest: bool, explicit: bool,
            skip_nan: bool = False) -> Any:
    """``a.max(axis)`` (``largest``) or ``a.min(axis)``; with ``skip_nan``,
    ``a.nanmax(axis)`` or ``a.nanmin(axis)``.

    Parameters
    ----------
    a : BitmapMatrix
    axis : {None, 0, 1}
        Checked by the caller.
    largest : bool
    explicit : bool
        Only stored entries count (scipy's ``explicit=True``).
    skip_nan : bool
        NaN is skipped (``numpy.fmax``), unless a line (the matrix) holds
        nothing else: it is then NaN, or zero where a zero is not stored.

    Returns
    -------
    scalar, or 1-D array of length n (axis 0) or m (axis 1)
        In the matrix's dtype: a NumPy scalar on the host (a 0-d CuPy array
        on the GPU), else an array in the matrix's library.

    Raises
    ------
    ValueError
        The reduced axis (any axis, for ``axis=None``) has length 0.
    """
    xp = a._xp()
    name = "maximum" if largest else "minimum"
    m, n = a.shape
    along = m * n if axis is None else a.shape[axis]
    if along == 0:
        raise ValueError(_EMPTY.format(name))
    zero = xp.zeros((), dtype=a.dtype)
    if axis is None:
        stored = a.nnz
        if stored == 0:
            return zero[()] if xp is np else zero
        if a.values is None:
            # a pattern: every stored entry is True
            out = xp.asarray(True) if largest or explicit or stored == along \
                else xp.asarray(False)
        else:
            values = a.values
            if skip_nan and values.dtype.kind in "fc":
                nan = xp.isnan(values)
                values = xp.where(nan, _beyond_all(xp, a.dtype, largest), values)
            out = values.max() if largest else values.min()
            if skip_nan and values.dtype.kind in "fc":
                out = xp.where(nan.all(), xp.asarray(np.nan, dtype=a.dtype), out)
            if stored < along and not explicit:
                out = _combine(xp, largest, skip_nan)(out, zero)
        return out[()] if xp is np else out
    rows, cols = a._coo_indices()
    lines = rows if axis == 1 else cols
    return _line_extremes(xp, lines, a.values, a.shape[1 - axis], along, largest, explicit,
                          a.dtype, skip_nan)


def _line_extremes(xp: Any, lines: Any, values: Any, nlines: int, along: int, largest: bool,
                   explicit: bool, dtype: np.dtype, skip_nan: bool = False) -> Any:
    """Extreme of each line's stored ``values`` (None: all True), int64 ``lines``
    giving each value's line, with the line's missing entries as zeros
    (``along`` entries a line) unless ``explicit``; lines with nothing stored
    give zero. With ``skip_nan``, NaN is skipped as :func:`extreme` skips it."""
    counts = xp.bincount(lines, minlength=nlines)
    present = counts > 0
    if values is None:
        out = present if largest or explicit else counts == along
        return out.astype(dtype, copy=False)
    inexact = values.dtype.kind in "fc"
    if inexact:
        nan = xp.isnan(values)
        # lines holding a NaN (NaN propagates), or nothing else (skip_nan)
        counted = ~nan if skip_nan else nan
        counted = xp.bincount(lines, weights=counted.astype(np.float64), minlength=nlines)
        nan_lines = present & (counted == 0) if skip_nan else counted > 0
        if skip_nan:
            values = xp.where(nan, _beyond_all(xp, dtype, largest), values)
    by_value = stable_argsort(xp, values)
    order = by_value[stable_argsort(xp, lines[by_value])]
    starts = exclusive_scan(xp, counts)
    # an empty line points at a valid place; its result is replaced below
    at = (starts[1:] - 1) if largest else starts[:-1]
    picked = values[order[xp.clip(at, 0, max(values.shape[0] - 1, 0))]] if values.shape[0] \
        else xp.zeros(nlines, dtype=dtype)
    if inexact:
        picked = xp.where(nan_lines, xp.asarray(np.nan, dtype=dtype), picked)
    zero = xp.zeros((), dtype=dtype)
    out = xp.where(present, picked, zero)
    if not explicit:
        partial = present & (counts < along)
        out = xp.where(partial, _combine(xp, largest, skip_nan)(out, zero), out)
    return out.astype(dtype, copy=False)


def _combine(xp: Any, largest: bool, skip_nan: bool) -> Any:
    """The ufunc that takes the extreme of two values."""
    if skip_nan:
        return xp.fmax if largest else xp.fmin
    return xp.maximum if largest else xp.minimum


def _beyond_all(xp: Any, dtype: np.dtype, largest: bool) -> Any:
    """A value no larger (``largest``; else no smaller) than any value but
    NaN of an inexact ``dtype``: it stands in for the NaN that is skipped."""
    inf = -np.inf if largest else np.inf
    return xp.asarray(complex(inf, inf) if dtype.kind == "c" else inf, dtype=dtype)


def arg_extreme(a: Any, axis: int | None, largest: bool, explicit: bool) -> Any:
    """``a.argmax(axis)`` (``largest``) or ``a.argmin(axis)``.

    Parameters
    ----------
    a : BitmapMatrix
    axis : {None, 0, 1}
        Checked by the caller.
    largest, explicit : bool
        As for :func:`extreme`.

    Returns
    -------
    int, or int64 [n] (axis 0) / [m] (axis 1)
        For ``axis=None`` the row-major flat index ``i * n + j``: a Python int
        on the host (a 0-d int64 CuPy array on the GPU, without a sync, but
        for m * n past int64); per column or row, the row or column index,
        0 for a line with nothing stored when ``explicit``. Ties go to the
        first index; NaN is the extreme wherever a line holds one (as
        ``numpy.argmax``; scipy picks a missing zero over it).

    Raises
    ------
    ValueError
        The matrix or the reduced axis is empty, or nothing is stored with
        ``explicit`` and ``axis=None``.
    """
    xp = a._xp()
    name = "argmax" if largest else "argmin"
    m, n = a.shape
    if axis is not None:
        if a.shape[axis] == 0:
            raise ValueError(f"cannot apply {name} along a zero-sized dimension: axis {axis} "
                             f"of shape {a.shape}")
        # the lines as the rows of a CSR: of A (axis 1) or of A.T (axis 0)
        ptr, index, data = (a if axis == 1 else a.T)._csr_arrays()
        ptr, nnz = ptr.astype(xp.int64, copy=False), data.shape[0]
        if nnz == 0:
            return xp.zeros(ptr.shape[0] - 1, dtype=xp.int64)
        lines = _lines(xp, ptr, nnz)
        # an entry is before its line's first missing one if its index is its rank
        prefix = index == xp.arange(nnz, dtype=xp.int64) - ptr[lines]
        full = ptr[1:] - ptr[:-1] == a.shape[axis]
        place, zero, first = _first_extremes(xp, ptr, lines, data, prefix, full, largest,
                                             explicit)
        return xp.where(zero, first, index[place].astype(xp.int64))
    if m == 0 or n == 0:
        raise ValueError(f"cannot apply {name} to an empty matrix, got shape {a.shape}")
    nnz = a.nnz
    if nnz == 0:
        if explicit:
            raise ValueError(f"cannot apply {name} with explicit=True to a matrix with no "
                             "stored entries")
        return 0 if xp is np else xp.zeros((), dtype=xp.int64)
    return _flat_arg_extreme(xp, a, largest, explicit)


def _flat_arg_extreme(xp: Any, a: Any, largest: bool, explicit: bool) -> Any:
    """:func:`arg_extreme` for ``axis=None``, of a matrix with stored entries:
    reductions over the entries in block order (no sort, and no CSR, whose
    row pointer a hypersparse matrix could not hold)."""
    m, n = a.shape
    nnz = a.nnz
    rows, cols = a._coo_indices()
    data = a._data()
    best = extreme(a, None, largest, True)
    match = data == best
    if data.dtype.kind in "fc":
        match |= xp.isnan(data) & xp.isnan(best)
    # the first match in row-major order: its row, then its column there
    last = np.iinfo(np.int64).max
    top = xp.where(match, rows, last).min()
    left = xp.where(match & (rows == top), cols, last).min()
    if explicit or nnz == m * n:
        row, col = top, left
    else:
        # the first missing entry: in the first row that is not full, which
        # is at most nnz // n (the rows after it are counted together, then dropped)
        limit = nnz // n + 1
        counts = xp.bincount(xp.minimum(rows, limit), minlength=limit + 1)[:limit]
        row = xp.argmax(counts < n)
        # its first column not stored is at most nnz (the rest land on nnz + 1)
        stored = xp.zeros(nnz + 2, dtype=bool)
        stored[xp.where((rows == row) & (cols <= nnz), cols, nnz + 1)] = True
        col = xp.argmin(stored)
        beats = _beyond_zero(xp, xp.asarray(best), largest)
        if data.dtype.kind in "fc":
            beats |= xp.isnan(best)
        first = (top < row) | ((top == row) & (left < col))
        zero = ~beats & ((best != 0) | ~first)
        row, col = xp.where(zero, row, top), xp.where(zero, col, left)
    if xp is np:
        return int(row) * n + int(col)
    if m * n <= np.iinfo(np.int64).max:
        return row.astype(xp.int64) * n + col.astype(xp.int64)
    # sync: a flat index past int64, exact as a Python int (as scipy's)
    row, col = (int(v) for v in xp.stack([row, col]).astype(xp.int64).tolist())
    return row * n + col


def _lines(xp: Any, ptr: Any, nnz: int) -> Any:
    """The line (int64) of each of ``nnz`` entries, from the line pointer ``ptr``
    (without the sync of ``convert._csr_rows``)."""
    return xp.searchsorted(ptr[1:], xp.arange(nnz, dtype=xp.int64), side="right")


def _first_extremes(xp: Any, ptr: Any, lines: Any, data: Any, prefix: Any, full: Any,
                    largest: bool, explicit: bool) -> tuple[Any, Any, Any]:
    """Where each line's argmax (``largest``) or argmin is.

    Parameters
    ----------
    ptr : int64 [nlines + 1]
        Line pointer of the entries, which are in line order and, inside a
        line, in index order (CSR).
    lines : int64 [nnz]
    data : [nnz]
    prefix : bool [nnz]
        Entries whose index is their rank in their line: the stored run
        before the line's first missing index.
    full : bool [nlines]
        Lines with no missing entry.

    Returns
    -------
    place : int64 [nlines]
        The line's first stored entry equal to its stored extreme (NaN if
        any), clipped into ``data`` for an empty line.
    zero : bool [nlines]
        True where the first missing entry (a zero) is the answer instead.
    first : int64 [nlines]
        The line's first missing index (0 for an empty line).
    """
    nnz = data.shape[0]
    starts = ptr[:-1]
    present = ptr[1:] > starts
    best = _line_extremes(xp, lines, data, ptr.shape[0] - 1, 0, largest, True, data.dtype)
    at_best = best[lines]
    match = data == at_best
    if data.dtype.kind in "fc":
        match |= xp.isnan(data) & xp.isnan(at_best)
    matches = exclusive_scan(xp, match.astype(xp.int64))
    # the first match at or after the line's start: ties go to the first index
    place = xp.minimum(xp.searchsorted(matches[1:], matches[starts] + 1), nnz - 1)
    run = exclusive_scan(xp, prefix.astype(xp.int64))
    first = run[ptr[1:]] - run[starts]
    if explicit:
        return place, ~present, first
    beats = _beyond_zero(xp, best, largest)
    if data.dtype.kind in "fc":
        beats |= xp.isnan(best)
    # a tie with zero goes to the first of the stored entry and the missing one
    tie = (best == 0) & (first <= place - starts)
    return place, ~present | (~full & ~beats & ((best != 0) | tie)), first


def _beyond_zero(xp: Any, v: Any, largest: bool) -> Any:
    """``v > 0`` (``largest``) or ``v < 0``, complex values compared as NumPy
    orders them (real part, then imaginary part)."""
    if v.dtype.kind != "c":
        return v > 0 if largest else v < 0
    re, im = v.real, v.imag
    if largest:
        return (re > 0) | ((re == 0) & (im > 0))
    return (re < 0) | ((re == 0) & (im < 0))
