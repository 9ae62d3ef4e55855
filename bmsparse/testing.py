"""Assertions on BitmapMatrix for tests: same blocks, same values."""

from __future__ import annotations

from typing import Any

import numpy as np


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
        Naming the first array that differs.

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
        Naming the first array that differs.
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
    for name in ("keys", "bitmaps", "offsets"):
        np.testing.assert_array_equal(getattr(a, name), getattr(d, name),
                                      err_msg=f"{name} differ")
    if a.values is None:
        return
    if tolerances is None or (a.dtype.kind in "iu" and not any(tolerances)):
        np.testing.assert_array_equal(a.values, d.values, err_msg="values differ")
    else:
        np.testing.assert_allclose(a.values, d.values, rtol=tolerances[0], atol=tolerances[1],
                                   err_msg="values differ")
