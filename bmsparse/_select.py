"""Parts of a bitmap matrix chosen entry by entry: its triangles, and the
pattern of the entries a test keeps.

A block's part is its bitmap ANDed with a mask, so nothing here sorts or
moves blocks: blocks keep their order, the empty ones are dropped, and the
values follow their bits (SpGEMM's compaction, :func:`bmsparse.spgemm.compact.compact`,
does that move on the GPU and on the host alike).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ._format import BLOCK, block_cols_of, block_rows_of, popcount
from ._matrix import BitmapMatrix
from ._primitives import exclusive_scan
from ._sputils import get_array_module


def _lower_masks() -> np.ndarray:
    """``masks[t + 8]``: the bits (r, c) of a block with ``c - r <= t``, for t
    in [-8, 7] (none for -8, all for 7)."""
    masks = np.zeros(2 * BLOCK, dtype=np.uint64)
    for t in range(-BLOCK, BLOCK):
        masks[t + BLOCK] = sum(1 << (r * BLOCK + c) for r in range(BLOCK) for c in range(BLOCK)
                               if c - r <= t)
    return masks


_LOWER_MASKS = _lower_masks()


def triangle_bitmaps(keys: Any, bitmaps: Any, k: int, lower: bool) -> Any:
    """The bits of each block on or below (``lower``) or on or above the k-th
    diagonal, where entry (i, j) lies on diagonal ``j - i``.

    Parameters
    ----------
    keys, bitmaps : uint64 [nblocks]
    k : int
        Diagonal: 0 the main one, above it positive.
    lower : bool

    Returns
    -------
    uint64 [nblocks]
        A subset of ``bitmaps`` (blocks may come out empty).
    """
    xp = get_array_module(keys, bitmaps)
    # entry (r, c) of block (i, j) lies on diagonal 8 (j - i) + c - r: it is
    # kept by tril when c - r <= k - 8 (j - i); k is clipped first, as a
    # diagonal past every block keeps all or none (and may not fit in int64)
    offset = (block_cols_of(keys) - block_rows_of(keys)) << 3
    t = min(max(k, -(1 << 62)), 1 << 62) - offset
    if not lower:
        t = t - 1  # c - r >= t + 1 is the complement of c - r <= t
    masks = xp.asarray(_LOWER_MASKS)[xp.clip(t, -BLOCK, BLOCK - 1) + BLOCK]
    return bitmaps & (masks if lower else ~masks)


def tril(a: Any, k: int = 0, format: str | None = None) -> Any:
    """The lower triangle of ``a``: its entries (i, j) with ``j - i <= k``.

    Parameters
    ----------
    a : BitmapMatrix, or anything BitmapMatrix accepts
    k : int
        The last diagonal kept: 0 the main one, -1 below it, 1 above it.
    format : str, optional
        None (or "bmp"): a BitmapMatrix; another of scipy's formats converts
        it (:meth:`BitmapMatrix.asformat`), as ``scipy.sparse.tril`` takes one.

    Returns
    -------
    BitmapMatrix, or ``format``
        Of ``a``'s shape and dtype, on ``a``'s side (host or GPU), stored
        zeros kept (as ``scipy.sparse.tril``).

    Notes
    -----
    Each block's bitmap is ANDed with one of 16 masks; the values follow
    through SpGEMM's compaction. O(nblocks + nnz), one sync on the GPU to
    size the result.
    """
    return _triangle(a, k, True).asformat(format)


def triu(a: Any, k: int = 0, format: str | None = None) -> Any:
    """The upper triangle of ``a``: its entries (i, j) with ``j - i >= k``.

    As :func:`tril` otherwise (``k`` is the first diagonal kept).
    """
    return _triangle(a, k, False).asformat(format)


def _triangle(a: Any, k: Any, lower: bool) -> BitmapMatrix:
    if not isinstance(a, BitmapMatrix):
        a = BitmapMatrix(a)
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"k must be an integer, got {type(k).__name__}") from None
    return _keep_bits(a, triangle_bitmaps(a.keys, a.bitmaps, k, lower), a.shape)


def _keep_bits(a: BitmapMatrix, kept: Any, shape: tuple[int, int]) -> BitmapMatrix:
    """The entries of ``a`` whose bits ``kept`` (uint64 [nblocks], a subset
    of its bitmaps) holds, stored zeros included, as a matrix of ``shape``:
    the values by SpGEMM's compaction, empty blocks dropped."""
    if a.values is None:
        return pattern(a.keys, kept, shape)
    from .spgemm import compact

    return BitmapMatrix._from_blocks(
        *compact.compact(a.keys, a.bitmaps, a.offsets, a.values, kept, 1), shape)


#: ``_ROW_MASKS[k]``: the bits of a block's first k rows; ``_COL_MASKS[k]``:
#: of its first k columns (k in [0, 8])
_ROW_MASKS = np.array([(1 << (BLOCK * k)) - 1 for k in range(BLOCK + 1)], dtype=np.uint64)
_COL_MASKS = np.array([((1 << k) - 1) * 0x0101010101010101 for k in range(BLOCK + 1)],
                      dtype=np.uint64)


def within_bitmaps(keys: Any, bitmaps: Any, shape: tuple[int, int]) -> Any:
    """The bits of each block inside ``shape``: entries (i, j) with i < m
    and j < n (blocks past it come out empty).

    Parameters
    ----------
    keys, bitmaps : uint64 [nblocks]
    shape : (m, n)

    Returns
    -------
    uint64 [nblocks]
    """
    xp = get_array_module(keys, bitmaps)
    m, n = shape
    # (block indices are below 2^32: 8 times one fits in int64)
    rows = xp.clip(m - (block_rows_of(keys) << 3), 0, BLOCK)
    cols = xp.clip(n - (block_cols_of(keys) << 3), 0, BLOCK)
    return bitmaps & xp.asarray(_ROW_MASKS)[rows] & xp.asarray(_COL_MASKS)[cols]


def crop(a: BitmapMatrix, shape: tuple[int, int]) -> BitmapMatrix:
    """``a``'s entries inside ``shape`` (stored zeros included), as a matrix
    of that shape: ``resize``'s when it shrinks."""
    return _keep_bits(a, within_bitmaps(a.keys, a.bitmaps, shape), shape)


def pattern(keys: Any, bitmaps: Any, shape: tuple[int, int],
            nnz: int | None = None) -> BitmapMatrix:
    """The bool (pattern) matrix of blocks ``keys`` with ``bitmaps``, some
    possibly empty (those are dropped); keys sorted and unique; ``nnz`` the
    number of set bits, when known."""
    xp = get_array_module(keys, bitmaps)
    nonempty = bitmaps != 0
    keys, bitmaps = keys[nonempty], bitmaps[nonempty]
    return BitmapMatrix._from_blocks(keys, bitmaps, exclusive_scan(xp, popcount(bitmaps)), None,
                                     shape, nnz=nnz)


def structure(a: BitmapMatrix) -> BitmapMatrix:
    """The pattern of ``a`` (every stored entry, zeros included), sharing its arrays."""
    if a.values is None:
        return a
    return BitmapMatrix._from_blocks(a.keys, a.bitmaps, a.offsets, None, a.shape)
