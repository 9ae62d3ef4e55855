"""Structure-only operations on blocks: transpose, triangles, union, dense rows.

Every function takes and returns ``(keys, bitmaps)`` (or adds ``offsets``)
and works on bitmaps with block-local bit masks, so no dense array and no
COO list of the entries is ever formed. They run on NumPy or CuPy arrays
alike; :mod:`bmsparse.graph` builds its algorithms on them.
"""

from __future__ import annotations

from typing import Any

from ._format import (
    BLOCK,
    block_cols_of,
    block_rows_of,
    nblocks_along,
    pack_keys,
    popcount,
)
from ._primitives import exclusive_scan, stable_argsort
from ._sputils import get_array_module

#: bit (r, c) set for c < r: byte r holds its low r bits
STRICT_LOWER = sum(((1 << r) - 1) << (BLOCK * r) for r in range(BLOCK))
#: bit (r, r) of every row
DIAGONAL = sum(1 << (BLOCK * r + r) for r in range(BLOCK))
#: bit (r, c) set for c > r
STRICT_UPPER = (1 << 64) - 1 - STRICT_LOWER - DIAGONAL


def triangle(keys: Any, bitmaps: Any, part: str) -> tuple[Any, Any]:
    """The blocks of the strictly lower (``part="lower"``) or upper triangle.

    Off-diagonal blocks are kept or dropped whole; a diagonal block keeps the
    bits of its own strict triangle; blocks left empty are dropped.
    """
    xp = get_array_module(keys, bitmaps)
    rows, cols = block_rows_of(keys), block_cols_of(keys)
    side, inside = (rows > cols, STRICT_LOWER) if part == "lower" else (rows < cols,
                                                                         STRICT_UPPER)
    kept = xp.where(side, bitmaps, xp.where(rows == cols, bitmaps & xp.uint64(inside),
                                            xp.uint64(0)))
    nonempty = kept != 0
    return keys[nonempty], kept[nonempty]


def without_diagonal(keys: Any, bitmaps: Any) -> tuple[Any, Any]:
    """The blocks with every diagonal element (self-loop) removed."""
    xp = get_array_module(keys, bitmaps)
    on_diagonal = block_rows_of(keys) == block_cols_of(keys)
    kept = xp.where(on_diagonal, bitmaps & xp.uint64(STRICT_LOWER | STRICT_UPPER), bitmaps)
    nonempty = kept != 0
    return keys[nonempty], kept[nonempty]


def transpose_bits(bitmaps: Any) -> Any:
    """Each 8x8 bitmap transposed: bit ``8r + c`` moves to ``8c + r``.

    Three rounds of delta swaps (Hacker's Delight, ``transpose8``): 1x1, 2x2
    and 4x4 sub-blocks swap across the diagonal.
    """
    xp = get_array_module(bitmaps)
    x = bitmaps
    for shift, mask in ((7, 0x00AA00AA00AA00AA), (14, 0x0000CCCC0000CCCC),
                        (28, 0x00000000F0F0F0F0)):
        s = xp.uint64(shift)
        t = (x ^ (x >> s)) & xp.uint64(mask)
        x = x ^ t ^ (t << s)
    return x


def transpose(keys: Any, bitmaps: Any) -> tuple[Any, Any]:
    """The blocks of the transposed pattern, keys sorted again."""
    xp = get_array_module(keys, bitmaps)
    t_keys = pack_keys(block_cols_of(keys), block_rows_of(keys))
    order = stable_argsort(xp, t_keys)
    return t_keys[order], transpose_bits(bitmaps)[order]


def union(a_keys: Any, a_bitmaps: Any, b_keys: Any, b_bitmaps: Any) -> tuple[Any, Any]:
    """The blocks of the union of two patterns (each canonical): bitmaps OR'ed."""
    xp = get_array_module(a_keys, a_bitmaps, b_keys, b_bitmaps)
    keys = xp.concatenate([a_keys, b_keys])
    bitmaps = xp.concatenate([a_bitmaps, b_bitmaps])
    order = stable_argsort(xp, keys)
    keys, bitmaps = keys[order], bitmaps[order]
    # a key occurs at most twice, once from each side: the first of a pair
    # takes the second's bits and the second is dropped
    twin = keys[1:] == keys[:-1]
    merged = bitmaps[:-1] | xp.where(twin, bitmaps[1:], xp.uint64(0))
    bitmaps = xp.concatenate([merged, bitmaps[-1:]])
    first = xp.concatenate([xp.ones(min(keys.shape[0], 1), dtype=bool), ~twin])
    return keys[first], bitmaps[first]


def dense_row(xp: Any, n: int) -> tuple[Any, Any, Any]:
    """Keys, bitmaps and offsets of a 1 x n matrix holding all n entries.

    Its values are then any array of length n, in column order.
    """
    nb = nblocks_along(n)
    keys = xp.arange(nb, dtype=xp.uint64)  # block row 0: the key is the block column
    bitmaps = xp.full(nb, 0xFF, dtype=xp.uint64)
    if n % BLOCK:
        bitmaps[-1] = (1 << (n % BLOCK)) - 1
    return keys, bitmaps, exclusive_scan(xp, popcount(bitmaps))

