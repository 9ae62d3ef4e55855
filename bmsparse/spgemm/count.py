"""Stage 2 of SpGEMM: exact output bitmaps, their popcounts and offsets.

The bitmap of an output block is the OR over its pairs of the Boolean 8x8
products of the input bitmaps; a scan of the popcounts gives the offsets of
each output block's values. See ``count.cu``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _kernels
from .._format import BLOCK, popcount
from .._primitives import exclusive_scan
from .._sputils import get_array_module

_KERNELS = "spgemm/count.cu"
_kernels.register(_KERNELS, {"bmsparse_count_bitmaps": ()})

_LOW_BITS = np.uint64(0x0101010101010101)


def count(a_bitmaps: Any, b_bitmaps: Any, task_a: Any, task_b: Any,
          c_ptr: Any) -> tuple[Any, Any, Any]:
    """Bitmaps and value offsets of the output blocks.

    Parameters
    ----------
    a_bitmaps, b_bitmaps : uint64 [a_nblocks], [b_nblocks]
    task_a, task_b : int64 [ntasks]
        Tasks grouped by output block (see ``tasks``).
    c_ptr : int64 [c_nblocks + 1]
        Run boundaries of each output block's tasks.

    Returns
    -------
    c_bitmaps : uint64 [c_nblocks]
    c_offsets : int64 [c_nblocks + 1]
        Exclusive scan of the popcounts; ``c_offsets[-1]`` is nnz(C).
    empty_blocks : uint64 [1]
        Number of empty output bitmaps: a block's pairs can all have empty
        Boolean products, and such blocks must be dropped.
    """
    xp = get_array_module(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr)
    if xp is np:
        c_bitmaps = _count_numpy(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr)
        c_nnz = popcount(c_bitmaps)
        empty_blocks = np.array([np.count_nonzero(c_bitmaps == 0)], dtype=np.uint64)
    else:
        c_bitmaps, c_nnz, empty_blocks = _count_cuda(a_bitmaps, b_bitmaps, task_a, task_b,
                                                     c_ptr)
    return c_bitmaps, exclusive_scan(xp, c_nnz), empty_blocks


def _count_cuda(a_bitmaps: Any, b_bitmaps: Any, task_a: Any, task_b: Any,
                c_ptr: Any) -> tuple[Any, Any]:
    import cupy

    c_nblocks = c_ptr.shape[0] - 1
    c_bitmaps = cupy.empty(c_nblocks, dtype=cupy.uint64)
    c_nnz = cupy.empty(c_nblocks, dtype=cupy.int64)
    empty_blocks = cupy.zeros(1, dtype=cupy.uint64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_count_bitmaps")
    _kernels.launch(kernel, c_nblocks, (a_bitmaps, b_bitmaps, task_a, task_b, c_ptr,
                                        c_nblocks, c_bitmaps, c_nnz, empty_blocks))
    return c_bitmaps, c_nnz, empty_blocks


def bool_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Boolean 8x8 products of bitmap arrays ``a`` and ``b`` (uint64)."""
    c = np.zeros(np.broadcast(a, b).shape, dtype=np.uint64)
    for t in range(BLOCK):  # the 8 inner indices of one block, not the data
        a_col = ((a >> np.uint64(t)) & _LOW_BITS) * np.uint64(0xFF)
        b_row = ((b >> np.uint64(BLOCK * t)) & np.uint64(0xFF)) * _LOW_BITS
        c |= a_col & b_row
    return c


def _count_numpy(a_bitmaps: np.ndarray, b_bitmaps: np.ndarray, task_a: np.ndarray,
                 task_b: np.ndarray, c_ptr: np.ndarray) -> np.ndarray:
    products = bool_product(a_bitmaps[task_a], b_bitmaps[task_b])
    if products.size == 0:
        return np.zeros(c_ptr.shape[0] - 1, dtype=np.uint64)
    return np.bitwise_or.reduceat(products, c_ptr[:-1])
