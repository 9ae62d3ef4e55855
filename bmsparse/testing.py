"""Assertions on BitmapMatrix for tests: same blocks, same values."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._format import popcount


def assert_equal(actual: Any, desired: Any) -> None:
    """Assert two matrices are equal: shape, dtype, blocks, and values exactly.

    Values compare as ``numpy.testing.assert_array_equal`` compares them:
    NaN equals NaN (a complex one any other) and -0.0 equals 0.0; not bit
    for bit.

    Parameters
    ----------
    actual, desired : BitmapMatrix, or anything BitmapMatrix accepts
        On the host or the GPU (each is copied to the host to compare).

    Raises
    ------
    AssertionError
        Naming what differs: the shapes, the dtypes, the entries stored in
        one only (how many, and the first's row and column), or the values
        (NumPy's report, with the first's row and column).

    Examples
    --------
    >>> import numpy as np
    >>> from bmsparse import BitmapMatrix
    >>> from bmsparse.testing import assert_equal
    >>> a = BitmapMatrix(np.eye(3))
    >>> assert_equal(a.T.T, a)
    """
    _compare(actual, desired, None)


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 0.0) -> None:
    """Assert the same shape, dtype and blocks, and values within tolerances.

    Parameters
    ----------
    actual, desired : BitmapMatrix, or anything BitmapMatrix accepts
    rtol, atol : float
        As for ``numpy.testing.assert_allclose``, which compares in float64:
        integer values with both 0 are compared exactly instead (int64s past
        2^53 would round alike).

    Raises
    ------
    AssertionError
        Naming what differs: the shapes, the dtypes, the entries stored in
        one only (how many, and the first's row and column), or the values
        (NumPy's report, with the first's row and column).
    """
    _compare(actual, desired, (rtol, atol))


def _compare(actual: Any, desired: Any, tolerances: tuple[float, float] | None) -> None:
    from ._matrix import BitmapMatrix

    a, d = (m.get() if isinstance(m, BitmapMatrix) else BitmapMatrix(m).get()
            for m in (actual, desired))
    if a.shape != d.shape:
        raise AssertionError(f"shapes differ: {a.shape} and {d.shape}")
    if a.dtype != d.dtype:
        raise AssertionError(f"dtypes differ: {a.dtype.name} and {d.dtype.name}")
    problem = _structure_problem(a, d)
    if problem is not None:
        raise AssertionError(problem)
    for name in ("keys", "bitmaps", "offsets"):  # (offsets: a matrix broken by hand)
        np.testing.assert_array_equal(getattr(a, name), getattr(d, name),
                                      err_msg=f"{name} differ")
    if a.values is None:
        return
    # integers with no tolerance compare exactly, as without tolerances
    exact = tolerances is None or (a.dtype.kind in "iu" and not any(tolerances))
    try:
        if exact:
            np.testing.assert_array_equal(a.values, d.values, err_msg="values differ")
        else:
            np.testing.assert_allclose(a.values, d.values, rtol=tolerances[0],
                                       atol=tolerances[1], err_msg="values differ")
    except AssertionError as exc:
        # NumPy names positions in the values array (block order): name the
        # entry's row and column too
        where = _first_value_mismatch(a, d, None if exact else tolerances)
        if where is None:
            raise
        raise AssertionError(str(exc).replace("values differ",
                                              f"values differ, the first at {where}", 1)) \
            from None


def _entry(key: int, bit: int) -> tuple[int, int]:
    """(row, column) of bit ``bit`` of the block with key ``key``."""
    return (key >> 32) * 8 + bit // 8, (key & 0xFFFFFFFF) * 8 + bit % 8


def _structure_problem(a: Any, d: Any) -> str | None:
    """What differs between the stored entries of ``a`` and ``d`` (host
    matrices of one shape): how many each stores alone, and the first in
    block order; None when they store the same entries."""
    keys = np.union1d(a.keys, d.keys)  # sorted, as the keys
    bits = []
    for m in (a, d):
        full = np.zeros(keys.shape[0], dtype=np.uint64)
        full[np.searchsorted(keys, m.keys)] = m.bitmaps
        bits.append(full)
    only = [bits[0] & ~bits[1], bits[1] & ~bits[0]]
    differ = np.flatnonzero(only[0] | only[1])
    if differ.shape[0] == 0:
        return None
    counts = [int(popcount(o).sum()) for o in only]
    q = differ[0]
    word = int(only[0][q] | only[1][q])
    bit = (word & -word).bit_length() - 1  # the lowest: the first in the block
    side = "actual" if int(only[0][q]) >> bit & 1 else "desired"
    which = "bitmaps" if np.array_equal(a.keys, d.keys) else "keys"  # (the arrays' names)
    return (f"{which} differ, in the stored entries: {counts[0]} only in actual, {counts[1]} "
            f"only in desired; the first at {_entry(int(keys[q]), bit)}, stored in {side} only")


def _first_value_mismatch(a: Any, d: Any,
                          tolerances: tuple[float, float] | None) -> tuple[int, int] | None:
    """(row, column) of the first value that differs (the structures are
    equal), as NumPy's assertion tells equal apart (None: exactly); None if
    none is found."""
    x, y = a.values, d.values
    if tolerances is None:
        with np.errstate(invalid="ignore"):
            bad = (x != y) & ~(np.isnan(x) & np.isnan(y)) if a.dtype.kind in "fc" else x != y
    else:
        bad = ~np.isclose(x, y, rtol=tolerances[0], atol=tolerances[1], equal_nan=True)
    where = np.flatnonzero(bad)
    if where.shape[0] == 0:
        return None
    rows, cols = a._coo_indices()
    return int(rows[where[0]]), int(cols[where[0]])
