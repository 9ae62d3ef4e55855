"""The bitmap block layout, stated once in Python.

A matrix is cut into ``BLOCK x BLOCK`` blocks (8 x 8). A non-empty block is

- a key, ``uint64``: ``block_row << 32 | block_col``;
- a bitmap, ``uint64``: element ``(r, c)`` of the block is bit ``8 * r + c``;
- its values, in bit order (row-major inside the block).

``_cuda/bitmap.cuh`` is the device-side copy of this module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BLOCK = 8
BLOCK_SHIFT = 3
BLOCK_MASK = BLOCK - 1
KEY_SHIFT = 32
COL_MASK = (1 << KEY_SHIFT) - 1
ROW_MASK = COL_MASK << KEY_SHIFT
#: largest number of block rows or columns a key can name
MAX_BLOCKS = 1 << KEY_SHIFT
#: largest matrix dimension: block indices must fit in 32 bits
MAX_DIM = MAX_BLOCKS * BLOCK


def nblocks_along(n: int) -> int:
    """Number of blocks covering ``n`` rows or columns (the last one padded)."""
    return (n + BLOCK_MASK) >> BLOCK_SHIFT


def pack_keys(block_rows: Any, block_cols: Any) -> Any:
    """Keys ``block_row << 32 | block_col`` (uint64) from integer arrays."""
    xp = _array_module(block_rows)
    rows = block_rows.astype(xp.uint64, copy=False)
    cols = block_cols.astype(xp.uint64, copy=False)
    return (rows << xp.uint64(KEY_SHIFT)) | cols


def block_rows_of(keys: Any) -> Any:
    """Block row of each key, int64."""
    xp = _array_module(keys)
    return (keys >> xp.uint64(KEY_SHIFT)).astype(xp.int64)


def block_cols_of(keys: Any) -> Any:
    """Block column of each key, int64."""
    xp = _array_module(keys)
    return (keys & xp.uint64(COL_MASK)).astype(xp.int64)


def bit_of(rows: Any, cols: Any) -> Any:
    """Bit index ``8 * (row % 8) + col % 8`` (int64) of elements in their block."""
    return ((rows & BLOCK_MASK) << BLOCK_SHIFT) | (cols & BLOCK_MASK)


def popcount(bitmaps: Any) -> Any:
    """Number of set bits of each uint64 bitmap, int64."""
    xp = _array_module(bitmaps)
    if xp is np:
        return np.bitwise_count(bitmaps).astype(np.int64)
    return _cupy_popcount(bitmaps)


def set_bits(bitmaps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every set bit of host ``bitmaps``: (owner index, bit), in bit order, int64."""
    counts = popcount(bitmaps)
    owner = np.repeat(np.arange(bitmaps.shape[0], dtype=np.int64), counts)
    bits = np.empty(owner.shape[0], dtype=np.int64)
    starts = np.cumsum(counts) - counts
    # peel the lowest set bit off every bitmap that has one left; the k-th
    # round gives each bitmap its k-th bit, so the work is the number of bits
    live = np.flatnonzero(bitmaps)
    rest = bitmaps[live]
    k = 0
    while live.size:
        lowest = rest & (~rest + np.uint64(1))
        bits[starts[live] + k] = np.bitwise_count(lowest - np.uint64(1))
        rest &= rest - np.uint64(1)
        more = rest != 0
        live, rest, k = live[more], rest[more], k + 1
    return owner, bits


def value_index(bitmaps: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Index of each bit's value inside its block: set bits of ``bitmaps`` below ``bits``."""
    below = (np.uint64(1) << bits.astype(np.uint64)) - np.uint64(1)
    return popcount(bitmaps & below)


def transpose_bitmaps(bitmaps: Any) -> Any:
    """Each 8x8 bitmap transposed (bit ``8 * r + c`` moves to ``8 * c + r``).

    Three delta swaps, as ``transpose_bitmap`` in ``_cuda/bitmap.cuh``: the
    1x1, 2x2 and 4x4 sub-blocks swap across the diagonal.
    """
    xp = _array_module(bitmaps)
    x = bitmaps
    for shift, mask in _TRANSPOSE_SWAPS:
        s = xp.uint64(shift)
        t = (x ^ (x >> s)) & xp.uint64(mask)
        x = x ^ t ^ (t << s)
    return x


_TRANSPOSE_SWAPS = ((7, 0x00AA00AA00AA00AA), (14, 0x0000CCCC0000CCCC), (28, 0x00000000F0F0F0F0))


def _cupy_popcount(bitmaps: Any) -> Any:
    import cupy

    global _POPCOUNT_KERNEL
    if _POPCOUNT_KERNEL is None:
        _POPCOUNT_KERNEL = cupy.ElementwiseKernel(
            "uint64 x", "int64 y", "y = __popcll(x)", "bmsparse_popcount")
    return _POPCOUNT_KERNEL(bitmaps)


_POPCOUNT_KERNEL = None


def _array_module(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return np
    import cupy

    return cupy.get_array_module(a)
