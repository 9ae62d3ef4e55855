"""Sparse matrix times dense vector or matrix: ``A @ x``, ``A.T @ x``, ``x @ A``.

A group of ``lanes`` threads owns one block row of A (one block column for
``A.T @ x``) and one column of X; each lane sums its share of the blocks in
registers and a butterfly of shuffles adds the lanes' sums. ``A.T @ x``
reads A's blocks in column-major order through a permutation computed once
per matrix (:func:`bmsparse.transpose.column_order`) and kept with it, so
no transposed copy is made. See ``spmv.cu``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _kernels
from ._format import BLOCK, BLOCK_MASK, BLOCK_SHIFT, KEY_SHIFT, block_cols_of, \
    block_rows_of, nblocks_along, set_bits
from ._sputils import get_array_module, matmul_mismatch, upcast

_KERNELS = "spmv.cu"
_kernels.register(_KERNELS, {"bmsparse_spmv_rows": ("T",), "bmsparse_spmv_cols": ("T",)})
_THREADS = 256  # BMSPARSE_SPMV_THREADS
MAX_LANES = 32


def spmv(a: Any, x: Any, *, transpose: bool = False) -> Any:
    """``a @ x`` (or ``a.T @ x``) for a dense vector or matrix ``x``.

    Parameters
    ----------
    a : BitmapMatrix
        Shape (m, n).
    x : NumPy or CuPy array, on the same side as ``a``
        Shape (n,) or (n, k) ((m,) or (m, k) with ``transpose``), any
        memory order.
    transpose : bool
        Multiply by ``a.T`` without forming it.

    Returns
    -------
    array
        Shape (m,) or (m, k) ((n,) or (n, k) with ``transpose``), C-ordered,
        of dtype ``numpy.result_type(a.dtype, x.dtype)``; a bool matrix acts
        as ones, and bool @ bool is a Boolean product.

    Raises
    ------
    ValueError
        ``x`` is a scalar or has more than 2 dimensions, or the inner
        dimensions differ (scipy's message).
    TypeError
        ``a`` and ``x`` are on different sides, or the result dtype is not
        supported.

    Notes
    -----
    O(k * (nnz + nblocks)) work; no sync. The first call with ``transpose``
    sorts the block columns once (O(nblocks)) and keeps the permutation with
    ``a``. Deterministic: every output is summed in a fixed order, which
    depends only on ``a``'s shape and block count (through ``lanes``), not on
    the run.

    Examples
    --------
    >>> import numpy as np
    >>> from bmsparse import BitmapMatrix, spmv
    >>> a = BitmapMatrix(np.array([[1.0, 0, 2], [0, 3, 0]]))
    >>> spmv(a, np.array([1.0, 1.0, 1.0]))
    array([3., 3.])
    >>> spmv(a, np.array([1.0, 2.0]), transpose=True)
    array([1., 6., 2.])
    """
    return matmul_dense(a, x, transpose, False)


def matmul_dense(a: Any, x: Any, transpose: bool, out_transposed: bool) -> Any:
    """``a @ x`` or ``a.T @ x``; with ``out_transposed`` the result is written
    as its transpose (C-ordered), which is ``x.T @ a`` for ``x @ a``."""
    xp = get_array_module(a.keys, x)
    if x.ndim == 0:
        raise ValueError("scalar operands are not allowed, use '*' instead")
    if x.ndim > 2:
        raise ValueError(f"x must be 1-D or 2-D, got {x.ndim}-D")
    shape = a.shape[::-1] if transpose else a.shape
    if x.shape[0] != shape[1]:
        raise matmul_mismatch(shape, x.shape)
    dtype = upcast(a.dtype, x.dtype)
    # bool @ bool counts in int64 and compares with 0: a Boolean product
    compute = np.dtype(np.int64) if dtype == np.bool_ else dtype
    values = None if a.dtype == np.bool_ else a.values.astype(compute, copy=False)
    x2 = (x if x.ndim == 2 else x.reshape(-1, 1)).astype(compute, copy=False)
    if transpose:
        order, ptr = column_pointer(a)
    else:
        order, ptr = None, row_pointer(a)
    ngroups = ptr.shape[0] - 1
    lanes = lanes_for(a.nblocks, ngroups)
    args = (a.keys, a.bitmaps, a.offsets, values, order, ptr, lanes, x2, shape[0])
    y = _spmv_numpy(*args) if xp is np else _spmv_cuda(*args, out_transposed)
    if xp is np and out_transposed:
        y = np.ascontiguousarray(y.T)
    if x.ndim == 1:
        y = y.reshape(-1)
    return y.astype(dtype) if dtype == np.bool_ else y


def lanes_for(nblocks: int, ngroups: int) -> int:
    """Threads per block row (column): the power of two at most the mean
    number of blocks per group, between 1 and 32."""
    mean = nblocks // max(ngroups, 1)
    return 1 << min(max(mean.bit_length() - 1, 0), MAX_LANES.bit_length() - 1)


def row_pointer(a: Any) -> Any:
    """Block-row pointer (int64 [nbrows + 1]) of ``a``, computed once and kept with it."""
    ptr = a._cache.get("row_pointer")
    if ptr is None:
        xp = get_array_module(a.keys)
        starts = xp.arange(nblocks_along(a.shape[0]), dtype=xp.uint64) << xp.uint64(KEY_SHIFT)
        # the end of the last block row is nblocks: nbrows << 32 may not fit
        ptr = xp.concatenate([xp.searchsorted(a.keys, starts),
                              xp.asarray([a.nblocks])]).astype(xp.int64)
        a._cache["row_pointer"] = ptr
    return ptr


def column_pointer(a: Any) -> tuple[Any, Any]:
    """``a``'s column-major block order and its block-column pointer
    (int64 [nblocks], int64 [nbcols + 1]), computed once and kept with it."""
    from .transpose import column_order

    cached = a._cache.get("column_pointer")
    if cached is None:
        xp = get_array_module(a.keys)
        order = a._cache.get("column_order")
        if order is None:
            order = a._cache["column_order"] = column_order(a.keys)
        cols = block_cols_of(a.keys)[order]
        ptr = xp.searchsorted(cols, xp.arange(nblocks_along(a.shape[1]) + 1,
                                              dtype=xp.int64)).astype(xp.int64)
        cached = a._cache["column_pointer"] = (order, ptr)
    return cached


def _strides(x2: Any) -> tuple[Any, int, int]:
    """A C-contiguous base array of ``x2`` and the element strides of (row, column)."""
    n, k = x2.shape
    if x2.flags.c_contiguous:
        return x2, k, 1
    if x2.flags.f_contiguous:
        return x2.T, 1, n
    import cupy

    return cupy.ascontiguousarray(x2), k, 1


def _spmv_cuda(keys, bitmaps, offsets, values, order, ptr, lanes, x2, nout, out_transposed):
    import cupy

    k = x2.shape[1]
    base, x_rs, x_cs = _strides(x2)
    if out_transposed:
        y = cupy.empty((k, nout), dtype=x2.dtype)
        y_rs, y_cs = 1, nout
    else:
        y = cupy.empty((nout, k), dtype=x2.dtype)
        y_rs, y_cs = k, 1
    ngroups = ptr.shape[0] - 1
    null = np.uint64(0)
    values = null if values is None else values
    if order is None:
        kernel = _kernels.get_kernel(_KERNELS, "bmsparse_spmv_rows", T=x2.dtype)
        args = (keys, bitmaps, offsets, values, ptr)
    else:
        kernel = _kernels.get_kernel(_KERNELS, "bmsparse_spmv_cols", T=x2.dtype)
        args = (keys, bitmaps, offsets, values, order, ptr)
    _kernels.launch(kernel, ngroups * k * lanes, (*args, ngroups, lanes, base, x_rs, x_cs, k,
                                                  nout, y, y_rs, y_cs), block=_THREADS)
    return y


@np.errstate(invalid="ignore", over="ignore")  # inf * 0 is NaN, as in scipy, silently
def _spmv_numpy(keys, bitmaps, offsets, values, order, ptr, lanes, x2, nout):
    # every entry in value order (block, then bit), which within a block row
    # (or column: keys are sorted by row) is the order a lane meets them
    owner, bit = set_bits(bitmaps)
    a = np.ones(owner.shape[0], dtype=x2.dtype) if values is None else values
    if order is None:
        group, slot = block_rows_of(keys)[owner], owner
        out_row = bit >> BLOCK_SHIFT
        in_row = (block_cols_of(keys)[owner] << BLOCK_SHIFT) | (bit & BLOCK_MASK)
    else:
        position = np.empty(order.shape[0], dtype=np.int64)
        position[order] = np.arange(order.shape[0], dtype=np.int64)
        group, slot = block_cols_of(keys)[owner], position[owner]
        out_row = bit & BLOCK_MASK
        in_row = (block_rows_of(keys)[owner] << BLOCK_SHIFT) | (bit >> BLOCK_SHIFT)
    ngroups = ptr.shape[0] - 1
    lane = (slot - ptr[group]) % lanes
    partial = np.zeros((ngroups, lanes, BLOCK, x2.shape[1]), dtype=x2.dtype)
    # add.at accumulates in array order: each lane's order in the kernel
    np.add.at(partial, (group, lane, out_row), a[:, None] * x2[in_row])
    # the butterfly: lane l adds lane l + d's sum to its own, d = lanes/2, ..., 1
    d = lanes >> 1
    while d:
        partial = partial[:, :d] + partial[:, d:2 * d]
        d >>= 1
    return partial[:, 0].reshape(ngroups * BLOCK, x2.shape[1])[:nout]
