"""Matrices built from their diagonals: ``eye``, ``identity``, ``diags``, as
scipy.sparse's ``eye_array``, ``identity`` and ``diags_array``.

Each is COO triplets (one arange per diagonal) through the COO conversion,
on the host or, with ``device=True`` or CuPy diagonals, on the GPU: no
dense intermediate and no host loop over entries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._matrix import BitmapMatrix
from ._sputils import check_dtype, check_shape, get_array_module, gpu_module, operator_index

__all__ = ["diags", "eye", "identity"]


def eye(m: int, n: int | None = None, *, k: int = 0, dtype: Any = np.float64,
        device: bool = False) -> BitmapMatrix:
    """The m x n matrix with ones on its k-th diagonal, as ``scipy.sparse.eye_array``.

    Parameters
    ----------
    m, n : int
        Shape (n defaults to m).
    k : int
        Diagonal: 0 the main one, above it positive.
    dtype : dtype
        One of ``bmsparse.SUPPORTED_DTYPES``; bool makes a pattern.
    device : bool
        Build it on the GPU.

    Returns
    -------
    BitmapMatrix

    Raises
    ------
    ValueError
        ``k`` lies past the corners of the shape (``k > n`` or ``k < -m``).
    """
    shape = check_shape((m, m if n is None else n))
    k = operator_index(k, "k")
    xp = _module(device)
    dtype = check_dtype(dtype)
    return _from_diagonals([xp.ones(_length(shape, k), dtype=dtype)], [k], shape, dtype, xp)


def identity(n: int, *, dtype: Any = np.float64, device: bool = False) -> BitmapMatrix:
    """The n x n identity, as ``scipy.sparse.identity`` (see :func:`eye`)."""
    return eye(n, dtype=dtype, device=device)


def diags(diagonals: Any, *, offsets: Any = 0, shape: Any = None, dtype: Any = None,
          device: bool = False) -> BitmapMatrix:
    """A matrix from its diagonals, as ``scipy.sparse.diags_array``.

    Parameters
    ----------
    diagonals : array or sequence of arrays (or scalars)
        Diagonal number i goes on diagonal ``offsets[i]``: its first entries
        fill the diagonal (longer ones are cut, as scipy cuts them); a
        scalar or a single entry fills the whole diagonal. CuPy arrays put
        the matrix on the GPU.
    offsets : int or sequence of int
        One per diagonal, no two alike. With a single int, ``diagonals`` is
        the one diagonal when it is a scalar, an array of at most one
        dimension or a sequence starting with a number (scipy's test), else
        a sequence of one diagonal.
    shape : (int, int), optional
        Default: square, just large enough for the first diagonal.
    dtype : dtype, optional
        Default: the diagonals' common dtype (NumPy's promotion; Python ints
        give int64 and floats float64), which scipy's future default is too.
    device : bool
        Build it on the GPU (implied by CuPy diagonals).

    Returns
    -------
    BitmapMatrix
        Stored zeros of the diagonals are kept (scipy's ``dia_array`` keeps
        them too).

    Raises
    ------
    ValueError
        Offsets repeat or differ in number from the diagonals, an offset lies
        past the corners of ``shape``, or a diagonal is shorter than its
        place in it.
    """
    scalar_offsets = np.ndim(offsets) == 0
    offsets = [operator_index(k, "offsets") for k in
               ([offsets] if scalar_offsets else list(offsets))]
    diagonals = [diagonals] if scalar_offsets and _is_one_diagonal(diagonals) else \
        list(diagonals)
    if len(diagonals) != len(offsets):
        raise ValueError(f"{len(diagonals)} diagonals but {len(offsets)} offsets")
    if len(set(offsets)) != len(offsets):
        raise ValueError("offset array contains duplicate values")
    arrays = [d for d in diagonals if hasattr(d, "dtype") and np.ndim(d)]
    xp = get_array_module(*arrays) if arrays and not device else _module(device)
    diagonals = [xp.asarray(d) for d in diagonals]
    if shape is None:
        if not diagonals:
            raise ValueError("shape is required when no diagonal is given")
        size = _first_length(diagonals[0]) + abs(offsets[0])
        shape = (size, size)
    shape = check_shape(shape)
    dtype = check_dtype(xp.result_type(*diagonals) if dtype is None and diagonals
                        else np.float64 if dtype is None else dtype)
    return _from_diagonals(diagonals, offsets, shape, dtype, xp)


def _is_one_diagonal(diagonals: Any) -> bool:
    """True when ``diagonals``, given with a single offset, is that one
    diagonal: a scalar, an array of at most one dimension, or a sequence
    starting with a number (scipy's test); else it lists diagonals.

    (Not ``np.ndim``: it fails on a ragged list, and on a list of CuPy
    arrays, which refuse to become a NumPy array.)
    """
    ndim = getattr(diagonals, "ndim", None)
    if ndim is not None:
        return ndim <= 1
    if isinstance(diagonals, (list, tuple)):
        return not diagonals or _is_number(diagonals[0])
    return True


def _is_number(x: Any) -> bool:
    """A scalar or a 0-d array (NumPy's or CuPy's), not a sequence."""
    ndim = getattr(x, "ndim", None)
    return ndim == 0 if ndim is not None else not isinstance(x, (list, tuple))


def _first_length(diagonal: Any) -> int:
    if diagonal.ndim != 1:
        raise ValueError("without a shape, the first diagonal must be a 1-D array")
    return diagonal.shape[0]


def _from_diagonals(diagonals: list[Any], offsets: list[int], shape: tuple[int, int],
                    dtype: np.dtype, xp: Any) -> BitmapMatrix:
    # (an empty part first: concatenate takes no empty list)
    none = xp.zeros(0, dtype=xp.int64)
    rows, cols, values = [none], [none], [xp.zeros(0, dtype=dtype)]
    for i, (diagonal, k) in enumerate(zip(diagonals, offsets)):
        length = _length(shape, k, i)
        if diagonal.ndim > 1:
            raise ValueError(f"diagonal {i} must be 1-D or a scalar, got {diagonal.ndim}-D")
        short = diagonal.ndim == 1 and diagonal.shape[0] != 1 and diagonal.shape[0] < length
        if short:
            raise ValueError(f"diagonal {i} has {diagonal.shape[0]} entries; offset {k} of a "
                             f"{shape[0]} x {shape[1]} matrix needs {length}")
        row = xp.arange(max(-k, 0), max(-k, 0) + length, dtype=xp.int64)
        rows.append(row)
        cols.append(row + k)
        # a scalar or a single entry fills the diagonal; a longer one is cut
        values.append(xp.broadcast_to(diagonal, (length,)) if diagonal.size == 1
                      else diagonal[:length])
    values = xp.concatenate(values).astype(dtype, copy=False)
    # (bool values make a pattern of their True entries)
    return BitmapMatrix.from_coo(xp.concatenate(rows), xp.concatenate(cols), values, shape)


def _length(shape: tuple[int, int], k: int, index: int = 0) -> int:
    """Entries on diagonal k of a matrix of ``shape``; ValueError for a
    diagonal past its corners (scipy's test: one just past them is empty)."""
    m, n = shape
    length = min(m + k, n - k, m, n)
    if length < 0:
        raise ValueError(f"offset {k} (index {index}) out of bounds for shape {shape}")
    return length


def _module(device: bool) -> Any:
    return gpu_module("device=True") if device else np
