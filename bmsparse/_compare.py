"""Comparisons of a bitmap matrix, as scipy.sparse's: ``A < 0.5``, ``A != B``, ...

With a scalar or another sparse matrix the result is a bool (pattern)
BitmapMatrix of the entries where the comparison holds. Where it holds for
two zeros (``A == B``, ``A <= 1``, ``A != nan``) it holds at every entry
neither operand stores, and the result is about dense: it is built anyway,
with scipy's ``SparseEfficiencyWarning``, up to ``MAX_DENSE_BLOCKS``
blocks; beyond, a MemoryError (and no warning). With a dense array the
result is the dense comparison, as scipy's.

The test runs on the stored values only: with a scalar, NumPy's or CuPy's
comparison of them; with a matrix, ``A + B``'s merge (:func:`bmsparse.
elementwise.compare`, one launch on the GPU). An entry one operand does not
store counts as a zero. Unlike scipy, a
comparison that is false at NaN is false at every NaN entry: scipy computes
``A < 1`` as the complement of ``A >= 1``, true at NaN. A scalar compares
in NumPy's promotion of it and the matrix's dtype, but an integer with an
integer (or bool) matrix compares exactly, as NumPy compares int64 with uint64.
"""

from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from ._format import BLOCK, block_cols_of, block_rows_of, nblocks_along, pack_keys
from ._matrix import BitmapMatrix, _as_operand, _as_sparse, _is_dense, _is_scalar
from ._select import pattern
from ._sputils import upcast

#: operator -> (function, the operator holding where it fails)
OPS = {"==": (operator.eq, "!="), "!=": (operator.ne, "=="), "<": (operator.lt, ">="),
       ">": (operator.gt, "<="), "<=": (operator.le, ">"), ">=": (operator.ge, "<")}
#: blocks of the largest dense result built: 3 GiB of keys, bitmaps and
#: int64 offsets (24 bytes a block; a pattern has no values). A bound on
#: entries would let a thin shape through: 2^33 x 1 is 2^30 blocks of 8
MAX_DENSE_BLOCKS = 1 << 27
#: warnings.warn's stacklevel for the caller's comparison (_dense_warning,
#: _with_scalar or _with_matrix, compare, BitmapMatrix's _compare, the operator)
_CALLER = 6


def compare(a: BitmapMatrix, other: Any, op: str) -> Any:
    """``a op other`` for ``op`` in :data:`OPS`.

    Returns
    -------
    BitmapMatrix (bool), a dense bool array, or NotImplemented
        NotImplemented for an operand that is not a number, an array or a
        sparse matrix (Python then tries the reflected comparison).

    Raises
    ------
    ValueError
        A sparse operand of another shape, or a dense one that does not
        broadcast to ``a.shape``.
    MemoryError
        The result would be dense and larger than ``MAX_DENSE_BLOCKS`` blocks
        (raised before scipy's ``SparseEfficiencyWarning``, which a result
        built gets).
    TypeError
        A number NumPy has no dtype for (a ``Fraction``, a ``Decimal``).
    """
    other = _as_operand(other)
    sparse = _as_sparse(other)
    if sparse is not None:
        return _with_matrix(a, sparse, op)
    if _is_scalar(other) or (_is_dense(other) and other.ndim == 0):
        return _with_scalar(a, other, op)
    if _is_dense(other):
        return _holds(op, a._dense_operand(other), other)
    return NotImplemented


def _with_scalar(a: BitmapMatrix, scalar: Any, op: str) -> BitmapMatrix:
    xp = a._xp()
    given = _host_scalar(scalar)
    value = _comparable(given, a.dtype)
    values = a.values if a.values is not None else xp.ones(a.nnz, dtype=bool)
    # NumPy's promotion decides the type compared in (a Python float is
    # weak, a NumPy float64 is not); CuPy's differs for NumPy scalars
    dtype = _compared_type(values.dtype, value)
    value = dtype.type(value)
    holds = _holds(op, values.astype(dtype, copy=False), value)
    if not _holds(op, dtype.type(0), value):
        return _kept(a, holds)
    _dense_warning(a.shape, op, f"a sparse matrix with {given}")
    return _all_but(_kept(a, ~holds))


def _with_matrix(a: BitmapMatrix, b: BitmapMatrix, op: str) -> BitmapMatrix:
    # A + B's merge with the comparison as its operation: one launch
    from .elementwise import check_same_shape, compare as merged

    check_same_shape(a, b)  # (before the dense result's size check)
    if not _holds(op, np.zeros((), dtype=a.dtype), np.zeros((), dtype=b.dtype)):
        return merged(a, b, op)
    _dense_warning(a.shape, op, "two sparse matrices")
    return _all_but(merged(a, b, "~" + op))


def _holds(op: str, x: Any, y: Any) -> Any:
    """``x op y``; complex operands ordered as NumPy orders them (by real
    part, then imaginary part), on the GPU too."""
    compare_op = OPS[op][0]
    if op in ("==", "!=") or not (_is_complex(x) or _is_complex(y)):
        return compare_op(x, y)
    xr, xi, yr, yi = x.real, x.imag, y.real, y.imag
    strict = operator.lt if op in ("<", "<=") else operator.gt
    # NumPy's rule: the real parts decide where they differ, unless an
    # imaginary part is NaN (then the comparison is false)
    return (strict(xr, yr) & (xi == xi) & (yi == yi)) | ((xr == yr) & compare_op(xi, yi))


def _is_complex(x: Any) -> bool:
    return np.iscomplexobj(x) if not hasattr(x, "dtype") else x.dtype.kind == "c"


def _host_scalar(x: Any) -> Any:
    """A 0-d array (NumPy's or CuPy's: a sync) as the NumPy scalar of its
    dtype, which compares as the array would (NumPy's promotion keeps its
    dtype, where ``item()`` would make a Python number of it)."""
    if isinstance(x, np.ndarray):
        return x[()]
    if _is_dense(x):
        return x.get()[()]
    return x


def _comparable(scalar: Any, dtype: np.dtype) -> Any:
    """``scalar`` as the comparison takes it: an integer compared with an
    integer or bool matrix is exact, one out of the range NumPy compares in
    (the matrix's dtype; int64 for bool) infinite (every value lies on one
    side of it); a Python int past 64 bits a float for other matrices (as
    NumPy converts it); others as they are."""
    if isinstance(scalar, np.integer) and dtype.kind in "biu":
        # NumPy compares int64 with uint64 exactly, where their common
        # type (float64) rounds: as a Python int, the scalar compares exactly
        scalar = int(scalar)
    if not isinstance(scalar, int) or isinstance(scalar, bool):
        return scalar
    if dtype.kind in "biu":
        info = np.iinfo(np.int64 if dtype.kind == "b" else dtype)
        if not info.min <= scalar <= info.max:
            return float("inf") if scalar > 0 else float("-inf")
    elif not -(1 << 63) <= scalar < 1 << 64:
        return float(scalar)
    return scalar


def _compared_type(dtype: np.dtype, scalar: Any) -> np.dtype:
    """NumPy's promotion of ``dtype`` and ``scalar``: the type compared in.

    Raises
    ------
    TypeError
        A number NumPy has no dtype for (a ``Fraction``, a ``Decimal``),
        named as the other operators name it.
    """
    try:
        return np.result_type(dtype, scalar)
    except TypeError:
        upcast(scalar)  # raises the library's TypeError naming the scalar
        raise


def _efficiency_warning() -> type[Warning]:
    import scipy.sparse as sp

    return sp.SparseEfficiencyWarning


def _kept(a: BitmapMatrix, holds: Any) -> BitmapMatrix:
    """The pattern of ``a``'s stored entries where ``holds`` (bool [nnz])."""
    return pattern(a.keys, _bits_where(a, holds), a.shape)


def _bits_where(a: BitmapMatrix, flags: Any) -> Any:
    """Each block's bits whose entry has its flag (uint64 [nblocks])."""
    from .spgemm import compact

    # int32: a dtype the compaction's kernels take (bool is no value type there)
    return compact.nonzero_bits(a.bitmaps, a.offsets, flags.astype(np.int32))


def _dense_warning(shape: tuple[int, int], op: str, what: str) -> None:
    """scipy's warning that the result is about dense, or a MemoryError past
    ``MAX_DENSE_BLOCKS``, raised first (the warning would precede it, or
    hide it where warnings are errors)."""
    m, n = shape
    if nblocks_along(m) * nblocks_along(n) > MAX_DENSE_BLOCKS:
        raise MemoryError(
            f"the comparison with {op} holds at every entry not stored, so its result would "
            f"store all {m} x {n} entries; compare with {OPS[op][1]} instead (its result is "
            "sparse) and read it as the entries where this one fails")
    warnings.warn(f"Comparing {what} using {op} is inefficient. Try using {OPS[op][1]} "
                  "instead.", _efficiency_warning(), stacklevel=_CALLER)


def _all_but(fails: BitmapMatrix) -> BitmapMatrix:
    """The pattern of every entry of ``fails``'s shape but those it stores."""
    m, n = fails.shape
    xp = fails._xp()
    nbr, nbc = nblocks_along(m), nblocks_along(n)
    if not nbr * nbc:
        return fails
    blocks = xp.arange(nbr * nbc, dtype=xp.int64)
    bitmaps = xp.full(nbr * nbc, _full_block(m, n, False, False), dtype=xp.uint64)
    # the last block row and column cover the edge of the shape only
    grid = bitmaps.reshape(nbr, nbc)
    grid[-1, :] = _full_block(m, n, True, False)
    grid[:, -1] = _full_block(m, n, False, True)
    grid[-1, -1] = _full_block(m, n, True, True)
    if fails.nblocks:
        at = block_rows_of(fails.keys) * nbc + block_cols_of(fails.keys)
        bitmaps[at] &= ~fails.bitmaps
    return pattern(pack_keys(blocks // nbc, blocks % nbc), bitmaps, fails.shape)


def _full_block(m: int, n: int, last_row: bool, last_col: bool) -> np.uint64:
    """The bitmap of a block of the grid of an m x n matrix holding all it can."""
    rows = m - (nblocks_along(m) - 1) * BLOCK if last_row else BLOCK
    cols = n - (nblocks_along(n) - 1) * BLOCK if last_col else BLOCK
    return np.uint64(sum(((1 << cols) - 1) << (BLOCK * r) for r in range(rows)))
