"""The transpose of a bitmap matrix, block by block (no COO round trip).

Block (i, j) becomes block (j, i) with its bitmap transposed, and its values
move inside the block to the transposed bit order. Keys sorted by (block
row, block column) are put in (block column, block row) order by a stable
sort of the 32-bit block columns alone: the column-major block order, which
the transposed products of :mod:`bmsparse.spmv` reuse. See ``transpose.cu``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _kernels
from ._format import (BLOCK_SHIFT, COL_MASK, block_cols_of, block_rows_of, pack_keys,
                      popcount, set_bits, transpose_bitmaps, value_index)
from ._primitives import exclusive_scan, stable_argsort
from ._sputils import get_array_module

_KERNELS = "transpose.cu"
_kernels.register(_KERNELS, {"bmsparse_transpose_blocks": (),
                             "bmsparse_transpose_values": ("T",)})


def column_order(keys: Any) -> Any:
    """Permutation (int64 [nblocks]) putting blocks in (block column, block row) order.

    Keys are sorted by row, so a stable sort of the block columns (32-bit:
    half the radix passes of a sort of the swapped 64-bit keys) is enough.
    """
    xp = get_array_module(keys)
    return stable_argsort(xp, (keys & xp.uint64(COL_MASK)).astype(xp.uint32))


def transpose(keys: Any, bitmaps: Any, offsets: Any, values: Any,
              order: Any) -> tuple[Any, Any, Any, Any]:
    """Blocks of the transpose.

    Parameters
    ----------
    keys, bitmaps : uint64 [nblocks]
    offsets : int64 [nblocks + 1]
    values : T [nnz] or None
    order : int64 [nblocks]
        :func:`column_order` of ``keys``.

    Returns
    -------
    t_keys, t_bitmaps : uint64 [nblocks]
    t_offsets : int64 [nblocks + 1]
    t_values : T [nnz] or None

    Notes
    -----
    O(nblocks + nnz) work after the sort; no sync. Values are only moved.
    """
    xp = get_array_module(keys, bitmaps, offsets, values, order)
    if xp is np:
        return _transpose_numpy(keys, bitmaps, offsets, values, order)
    return _transpose_cuda(keys, bitmaps, offsets, values, order)


def _transpose_cuda(keys, bitmaps, offsets, values, order):
    import cupy

    nblocks = keys.shape[0]
    t_keys = cupy.empty(nblocks, dtype=cupy.uint64)
    t_bitmaps = cupy.empty(nblocks, dtype=cupy.uint64)
    counts = cupy.empty(nblocks, dtype=cupy.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_transpose_blocks")
    _kernels.launch(kernel, nblocks, (keys, bitmaps, order, nblocks, t_keys, t_bitmaps, counts))
    t_offsets = exclusive_scan(cupy, counts)
    if values is None:
        return t_keys, t_bitmaps, t_offsets, None
    t_values = cupy.empty_like(values)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_transpose_values", T=values.dtype)
    _kernels.launch(kernel, 8 * nblocks, (bitmaps, offsets, values, order, nblocks, t_bitmaps,
                                          t_offsets, t_values))
    return t_keys, t_bitmaps, t_offsets, t_values


def _transpose_numpy(keys, bitmaps, offsets, values, order):
    s_keys, s_bitmaps = keys[order], bitmaps[order]
    t_keys = pack_keys(block_cols_of(s_keys), block_rows_of(s_keys))
    t_bitmaps = transpose_bitmaps(s_bitmaps)
    t_offsets = exclusive_scan(np, popcount(s_bitmaps))
    if values is None:
        return t_keys, t_bitmaps, t_offsets, None
    # every output entry (r, t) of block q reads entry (t, r) of A's block order[q]
    owner, bit = set_bits(t_bitmaps)
    source = order[owner]
    a_bit = ((bit & 7) << BLOCK_SHIFT) | (bit >> BLOCK_SHIFT)
    return t_keys, t_bitmaps, t_offsets, values[offsets[source]
                                                + value_index(bitmaps[source], a_bit)]
