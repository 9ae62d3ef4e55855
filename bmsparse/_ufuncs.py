"""Element-wise functions of a bitmap matrix, as scipy.sparse's ``csr_array`` has them.

- The NumPy functions with ``f(0) == 0`` (``sqrt``, ``sin``, ..., ``sign``)
  and ``round(A, ndigits)`` map the stored values and keep the structure,
  stored zeros included (entries that become zero stay stored), as scipy's.
- ``maximum`` and ``minimum`` with a sparse operand take the union of the
  two structures (absent entries are zeros) and, like scipy's, drop the
  entries that come out zero; with a scalar they keep this matrix's
  structure, less its zeros, or (a scalar that makes every absent entry
  nonzero) build the dense result with a ``SparseEfficiencyWarning``.

Everything is composed of array operations and the existing stages
(:func:`bmsparse.elementwise.elementwise` merges the structures), so one
code path runs on NumPy and CuPy arrays.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from ._sputils import SUPPORTED_DTYPES, get_array_module, operator_index, upcast

if TYPE_CHECKING:
    from ._matrix import BitmapMatrix


@functools.lru_cache(maxsize=None)
def _result_dtype(name: str, dtype: np.dtype) -> np.dtype | None:
    """NumPy's result dtype of ``numpy.<name>`` on ``dtype`` when it is one we
    store, else None (NumPy has no loop, or the result is float16 or int8)."""
    try:
        # f(0) == 0 for every function here: no floating-point warning
        out = getattr(np, name)(np.zeros(1, dtype=dtype)).dtype
    except TypeError:
        return None
    return out if out in SUPPORTED_DTYPES else None


def apply(a: BitmapMatrix, name: str, decimals: int = 0) -> BitmapMatrix:
    """``numpy.<name>`` (``numpy.around`` for "around") of ``a``'s stored values.

    Parameters
    ----------
    a : BitmapMatrix
    name : str
        A NumPy (and CuPy) function with ``f(0) == 0``.
    decimals : int
        For "around" only.

    Returns
    -------
    BitmapMatrix
        ``a``'s structure (copied), stored zeros included, with the values
        in NumPy's result dtype for ``a.dtype`` (float64 for the integer
        matrices of the transcendental functions, as scipy's).

    Raises
    ------
    TypeError
        NumPy has no such function for ``a.dtype`` (``floor`` of complex
        values, ``sign`` of bool), or its result is a dtype a BitmapMatrix
        does not store (float16 for ``sqrt`` of bool; scipy raises
        ValueError there).
    """
    result = _result_dtype(name, a.dtype)
    if result is None:
        supported = [d.name for d in SUPPORTED_DTYPES if _result_dtype(name, d) is not None]
        what = "round" if name == "around" else name
        raise TypeError(f"{what} does not support dtype {a.dtype.name}; supported: "
                        f"{', '.join(supported)}; cast the matrix first (A.astype(...))")
    if result == np.bool_:
        # (floor, ceil and trunc of bool: f(True) is True, and a pattern stores no False)
        return a.copy()
    xp = a._xp()
    values = a._data()
    if values.dtype != result:
        # cast first, as NumPy's loop does: CuPy's own choice of loop for a
        # bool or integer input could differ
        values = values.astype(result)
    out = _around(xp, values, decimals) if name == "around" else getattr(xp, name)(values)
    return a._with_values(out.astype(result, copy=False))


def around(a: BitmapMatrix, ndigits: Any) -> BitmapMatrix:
    """``round(a, ndigits)``: the values rounded as ``numpy.around`` rounds them."""
    decimals = 0 if ndigits is None else operator_index(ndigits, "ndigits")
    return apply(a, "around", decimals)


def _around(xp: Any, values: Any, decimals: int) -> Any:
    """``numpy.around(values, decimals)`` by NumPy's own steps (its
    ``PyArray_Round``), on either library: ``rint(x * 10**d) / 10**d`` in the
    values' precision (float32 stays float32), real and imaginary parts
    apart, integers through float64. ``cupy.around`` rounds float32 ties
    differently (20.55 to 20.5 where NumPy gives 20.6)."""
    dtype = values.dtype
    if dtype.kind == "c":
        parts = values.view(np.dtype(dtype.char.lower()))  # (re, im) pairs
        return _around(xp, parts, decimals).view(dtype)
    if dtype.kind in "iu":
        if decimals >= 0:
            return values.copy()
        scale = np.float64(_power_of_ten(-decimals))
        return (xp.rint(values / scale) * scale).astype(dtype)
    scale = dtype.type(_power_of_ten(abs(decimals)))
    if decimals >= 0:
        return xp.rint(values * scale) / scale
    return xp.rint(values / scale) * scale


def _power_of_ten(n: int) -> float:
    """``10.0 ** n`` as NumPy's ``power_of_ten`` computes it (past 1e9 by
    repeated products, which can differ from ``10.0 ** n`` in the last bit)."""
    if n < 9:
        return (1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8)[n]
    out = 1e9
    for _ in range(n - 9):
        out *= 10.0
        if out == np.inf:  # (ndigits=10**9 would loop for minutes in Python)
            break
    return out


def _function(name: str, note: str = "") -> Any:
    """The method ``A.<name>()``: :func:`apply` of ``numpy.<name>``."""

    def method(self: BitmapMatrix) -> BitmapMatrix:
        return apply(self, name)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Element-wise ``numpy.{name}`` of the stored values{note}."
    return method


class ElementwiseFunctions:
    """The element-wise functions of :class:`~bmsparse.BitmapMatrix` that act
    on the stored values only (``f(0) == 0``), as scipy's sparse arrays have them.

    Each returns a new matrix of the same shape and structure, stored zeros
    included (an entry that becomes zero stays stored, as in scipy), with the
    values in NumPy's result dtype: the transcendental functions, ``rint``,
    ``deg2rad`` and ``rad2deg`` give float64 for int32 and int64 matrices
    and keep float32, float64, complex64 and complex128; ``floor``,
    ``ceil``, ``trunc`` and ``sign`` keep the dtype. Where NumPy has no
    function for the dtype (``floor`` of complex values, ``sign`` of bool) or
    its result is a dtype bmsparse does not store (float16: ``sqrt`` of
    bool), a TypeError says so (scipy raises TypeError and ValueError).
    On the host NumPy warns for invalid values (``sqrt(-1)``) as it does
    for scipy; CuPy does not.
    """

    sqrt = _function("sqrt")
    sin = _function("sin")
    tan = _function("tan")
    arcsin = _function("arcsin")
    arcsinh = _function("arcsinh")
    arctan = _function("arctan")
    arctanh = _function("arctanh")
    sinh = _function("sinh")
    tanh = _function("tanh")
    expm1 = _function("expm1")
    log1p = _function("log1p")
    deg2rad = _function("deg2rad", " (real dtypes only)")
    rad2deg = _function("rad2deg", " (real dtypes only)")
    floor = _function("floor", " (real dtypes only)")
    ceil = _function("ceil", " (real dtypes only)")
    trunc = _function("trunc", " (real dtypes only)")
    rint = _function("rint")
    sign = _function("sign", " (``z / |z|`` for complex values; not for bool)")

    def __round__(self, ndigits: int | None = None) -> BitmapMatrix:
        """``round(A, ndigits)``: ``numpy.around`` of the stored values, as scipy's.

        The dtype is kept; a bool matrix raises TypeError (NumPy's result is
        float16; scipy raises ValueError). ``ndigits`` None is 0, a negative
        one rounds to tens, hundreds, ...; TypeError if it is not an integer.
        """
        return around(self, ndigits)

    def maximum(self, other: Any) -> Any:
        """Element-wise maximum with a sparse matrix, a dense array or a scalar.

        Parameters
        ----------
        other : BitmapMatrix, scipy/cupyx sparse matrix, dense array or scalar
            A sparse operand has this shape; a dense one broadcasts with it.

        Returns
        -------
        BitmapMatrix or dense array
            A sparse or scalar operand gives a BitmapMatrix in scipy's result
            dtype (``numpy.result_type``), canonical as scipy's: the union of
            the structures with absent entries as zeros, the entries that come
            out zero dropped (stored zeros too). A scalar with ``max(0, s) != 0``
            (positive, or NaN) makes every entry nonzero: the result is built
            dense and stored whole, with a ``SparseEfficiencyWarning`` (as
            scipy does). A dense operand gives a dense array in the matrix's
            library (as scipy's ``numpy.maximum(A.todense(), other)``).

        Raises
        ------
        ValueError
            The shapes differ (sparse) or do not broadcast (dense).
        TypeError
            Host and device operands are mixed, ``other`` is none of these, or
            the result's dtype is not one a BitmapMatrix stores.

        Notes
        -----
        NaN propagates as in ``numpy.maximum``, whichever operand holds it
        (scipy's sparse result keeps its first operand's value there).
        Sparse operands: one merge of the block structures
        (:func:`bmsparse.elementwise.elementwise`), then one sync to size the
        result without its zeros.
        """
        return extremum(self, other, True)

    def minimum(self, other: Any) -> Any:
        """Element-wise minimum; see :meth:`maximum` (a scalar with
        ``min(0, s) != 0``, negative or NaN, gives a dense result)."""
        return extremum(self, other, False)


def extremum(a: BitmapMatrix, other: Any, largest: bool) -> Any:
    """``a.maximum(other)`` (``largest``) or ``a.minimum(other)``."""
    from ._matrix import _as_operand, _as_sparse, _is_dense, _is_scalar

    name = "maximum" if largest else "minimum"
    other = _as_operand(other)
    if _is_scalar(other):
        return _with_scalar(a, other, name)
    sparse = _as_sparse(other)
    if sparse is not None:
        return _with_sparse(a, sparse, name)
    if _is_dense(other):
        from .elementwise import broadcast_shape

        xp = get_array_module(a._block_source().keys, other)
        broadcast_shape(a.shape, other.shape)  # (ValueError: inconsistent shapes)
        return getattr(xp, name)(a.toarray(), other)
    raise TypeError(f"{name}: other must be a sparse matrix, a dense array or a scalar, "
                    f"got {type(other).__name__}")


def _with_scalar(a: BitmapMatrix, scalar: Any, name: str) -> BitmapMatrix:
    """``a.maximum(scalar)`` or ``a.minimum(scalar)``, as scipy computes them."""
    from ._matrix import BitmapMatrix

    dtype = upcast(a.dtype, scalar)
    op = getattr(a._xp(), name)
    # (the scalar in the result's dtype: CuPy's promotion of Python scalars
    # has differed from NumPy's between versions)
    value = dtype.type(scalar)
    if getattr(np, name)(0, scalar):
        from scipy.sparse import SparseEfficiencyWarning

        warnings.warn(f"taking the {name} with {scalar!r} results in a dense matrix",
                      SparseEfficiencyWarning, stacklevel=4)  # (maximum, extremum, here)
        return BitmapMatrix.from_dense(op(a.toarray().astype(dtype, copy=False), value))
    values = op(a._data().astype(dtype, copy=False), value)
    if dtype == np.bool_:
        # max(x, False) is x, min(x, False) is False: from_coo drops False
        return BitmapMatrix.from_coo(*a._coo_indices(), values, a.shape)
    out = a._with_values(values)
    out.eliminate_zeros()
    return out


def _with_sparse(a: BitmapMatrix, b: BitmapMatrix, name: str) -> BitmapMatrix:
    """``a.maximum(b)`` or ``a.minimum(b)`` of two BitmapMatrix of one shape."""
    from ._matrix import BitmapMatrix
    from .elementwise import check_same_shape, elementwise

    check_same_shape(a, b)
    dtype = upcast(a.dtype, b.dtype)
    if dtype == np.bool_:
        # patterns: the maximum is the union (OR), the minimum the intersection (AND)
        return elementwise(a, b, "plus" if name == "maximum" else "times")
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    # the union of the structures, stored zeros included, is the sum of the
    # patterns (the merge ORs their bitmaps); each operand's values then go
    # to their places in it, zeros elsewhere
    union = elementwise(_pattern(a), _pattern(b), "plus")
    values = getattr(a._xp(), name)(_spread(a, union), _spread(b, union))
    out = BitmapMatrix._from_blocks(union.keys, union.bitmaps, union.offsets, values, a.shape)
    out.eliminate_zeros()
    return out


def _pattern(a: BitmapMatrix) -> BitmapMatrix:
    """``a``'s structure, stored zeros included, as a bool matrix sharing its arrays."""
    return type(a)._from_blocks(a.keys, a.bitmaps, a.offsets, None, a.shape, np.bool_, a.nnz)


def _spread(a: BitmapMatrix, union: BitmapMatrix) -> Any:
    """``a``'s values at their places among the entries of ``union``, a
    pattern whose structure contains ``a``'s; zeros elsewhere (dtype of
    ``a``, [union.nnz])."""
    from ._indexing import places

    xp = a._xp()
    rows, cols = a._coo_indices()  # in value order
    out = xp.zeros(union.nnz, dtype=a.dtype)
    out[places(union, xp, rows, cols)[0]] = a.values
    return out
