"""max and min of a bitmap matrix, over all entries or each row or column.

As scipy.sparse: the entries that are not stored count as zeros wherever a
line (or the matrix) has any, unless ``explicit``; NaN propagates as in
``numpy.maximum``; complex values compare lexicographically (real part,
then imaginary part), as NumPy orders them.

Each line's extreme comes from one sort of its stored values (two stable
argsorts: by value, then by line), so the result does not depend on the
order of the blocks. On NumPy or CuPy arrays alike; no sync on the GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._primitives import exclusive_scan, stable_argsort

_EMPTY = "zero-size array to reduction operation {} which has no identity"


def extreme(a: Any, axis: int | None, largest: bool, explicit: bool) -> Any:
    """``a.max(axis)`` (``largest``) or ``a.min(axis)``.

    Parameters
    ----------
    a : BitmapMatrix
    axis : {None, 0, 1}
        Checked by the caller.
    largest : bool
    explicit : bool
        Only stored entries count (scipy's ``explicit=True``).

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
            out = a.values.max() if largest else a.values.min()
            if stored < along and not explicit:
                out = getattr(xp, name)(out, zero)
        return out[()] if xp is np else out
    rows, cols = a._coo_indices()
    lines = rows if axis == 1 else cols
    return _line_extremes(xp, lines, a.values, a.shape[1 - axis], along, largest, explicit,
                          a.dtype)


def _line_extremes(xp: Any, lines: Any, values: Any, nlines: int, along: int, largest: bool,
                   explicit: bool, dtype: np.dtype) -> Any:
    """Extreme of each line's stored ``values`` (None: all True), int64 ``lines``
    giving each value's line, with the line's missing entries as zeros
    (``along`` entries a line) unless ``explicit``; lines with nothing stored
    give zero."""
    counts = xp.bincount(lines, minlength=nlines)
    present = counts > 0
    if values is None:
        out = present if largest or explicit else counts == along
        return out.astype(dtype, copy=False)
    by_value = stable_argsort(xp, values)
    order = by_value[stable_argsort(xp, lines[by_value])]
    starts = exclusive_scan(xp, counts)
    # an empty line points at a valid place; its result is replaced below
    at = (starts[1:] - 1) if largest else starts[:-1]
    picked = values[order[xp.clip(at, 0, max(values.shape[0] - 1, 0))]] if values.shape[0] \
        else xp.zeros(nlines, dtype=dtype)
    if values.dtype.kind in "fc":
        nan = xp.bincount(lines, weights=xp.isnan(values).astype(np.float64),
                          minlength=nlines) > 0
        picked = xp.where(nan, xp.asarray(np.nan, dtype=dtype), picked)
    zero = xp.zeros((), dtype=dtype)
    out = xp.where(present, picked, zero)
    if not explicit:
        partial = present & (counts < along)
        out = xp.where(partial, getattr(xp, "maximum" if largest else "minimum")(out, zero), out)
    return out.astype(dtype, copy=False)
