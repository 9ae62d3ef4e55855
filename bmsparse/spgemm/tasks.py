"""Stage 1 of SpGEMM: the task list.

Pairs every block A(i, j) with every block B(j, k) and groups the pairs by
output key (i, k). Only block keys are read, never bitmaps or values. Built
from data-parallel primitives (searchsorted, cumsum, sort), as in the paper:

1. for each A block, the range ``[lo, hi)`` of B blocks in B's block row j
   (two searches of B's keys, so no array scales with the matrix shape);
2. expand: task ``t`` pairs A block ``task_a[t]`` with B block ``task_b[t]``;
3. sort the tasks by output key, ties in task order. A's keys are sorted, so
   within one output block the pairs come in ascending j: this fixes the
   summation order of every output entry;
4. reduce by key: the unique output keys ``c_keys`` and the boundaries
   ``c_ptr`` of each output block's run of tasks.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._format import COL_MASK, KEY_SHIFT, ROW_MASK
from .._primitives import run_starts, stable_argsort
from .._sputils import get_array_module


#: width of the packed sort key; tests lower it to reach the argsort path
PACKED_SORT_BITS = 64


class TaskList(NamedTuple):
    """Tasks grouped by output block.

    task_a, task_b : int64 [ntasks] - A and B block of each task, sorted by
        output key (stable)
    c_keys : uint64 [c_nblocks] - output block keys, strictly increasing
    c_ptr : int64 [c_nblocks + 1] - tasks of output block q are
        ``task_a[c_ptr[q]:c_ptr[q + 1]]``
    """

    task_a: Any
    task_b: Any
    c_keys: Any
    c_ptr: Any

    @property
    def ntasks(self) -> int:
        return int(self.task_a.shape[0])


def tasks(a_keys: Any, b_keys: Any, row_bound: int, col_bound: int) -> TaskList:
    """Task list of ``A @ B`` from the block keys of A and B.

    Parameters
    ----------
    a_keys, b_keys : uint64 [a_nblocks], [b_nblocks]
        Strictly increasing block keys of A and B.
    row_bound, col_bound : int
        Number of block rows of A and of block columns of B (every block row
        of A and block column of B is below them).

    Returns
    -------
    TaskList

    Notes
    -----
    O(ntasks log ntasks) work; peak memory about 40 bytes per task. On the
    GPU it syncs twice (to size the task list and the output).
    """
    xp = get_array_module(a_keys, b_keys)
    lo, counts = _b_row_ranges(xp, a_keys, b_keys)
    task_a, task_b = _expand(xp, lo, counts)
    c_full = (a_keys[task_a] & xp.uint64(ROW_MASK)) | (b_keys[task_b] & xp.uint64(COL_MASK))
    order = _sort_order(xp, c_full, row_bound, col_bound)
    task_a = task_a[order]
    task_b = task_b[order]
    c_full = c_full[order]
    c_ptr = run_starts(xp, (c_full,))
    c_keys = c_full[c_ptr[:-1]]
    return TaskList(task_a, task_b, c_keys, c_ptr)


def _b_row_ranges(xp: Any, a_keys: Any, b_keys: Any) -> tuple[Any, Any]:
    """First B block of block row j and their count, for each A block (i, j)."""
    j = (a_keys & xp.uint64(COL_MASK)) << xp.uint64(KEY_SHIFT)
    lo = xp.searchsorted(b_keys, j, side="left")
    # (j + 1) << 32 would overflow for j = 2**32 - 1; the last key of row j is
    # j << 32 | 0xFFFFFFFF instead
    hi = xp.searchsorted(b_keys, j | xp.uint64(COL_MASK), side="right")
    return lo.astype(xp.int64, copy=False), (hi - lo).astype(xp.int64, copy=False)


def _expand(xp: Any, lo: Any, counts: Any) -> tuple[Any, Any]:
    """task_a repeats A block a ``counts[a]`` times; task_b walks its B row."""
    ends = xp.cumsum(counts)
    ntasks = int(ends[-1]) if ends.size else 0  # sync: size of the task list
    t = xp.arange(ntasks, dtype=xp.int64)
    task_a = xp.searchsorted(ends, t, side="right").astype(xp.int64, copy=False)
    task_b = lo[task_a] + (t - (ends[task_a] - counts[task_a]))
    return task_a, task_b


def _sort_order(xp: Any, c_full: Any, row_bound: int, col_bound: int) -> Any:
    """Stable sorting permutation of the output keys.

    When block row, block column and task number fit together in 64 bits,
    they are packed into one uint64 and sorted without payload (a keys-only
    radix sort is the cheapest sort CuPy offers); otherwise a stable argsort.
    """
    n = c_full.shape[0]
    if n == 0:
        return xp.zeros(0, dtype=xp.int64)
    row_bits = max((row_bound - 1).bit_length(), 1)
    col_bits = max((col_bound - 1).bit_length(), 1)
    task_bits = max((n - 1).bit_length(), 1)
    if row_bits + col_bits + task_bits > PACKED_SORT_BITS:
        return stable_argsort(xp, c_full)
    rows = c_full >> xp.uint64(KEY_SHIFT)
    cols = c_full & xp.uint64(COL_MASK)
    packed = (rows << xp.uint64(col_bits + task_bits)) | (cols << xp.uint64(task_bits)) | \
        xp.arange(n, dtype=xp.uint64)
    packed = xp.sort(packed)
    return (packed & xp.uint64((1 << task_bits) - 1)).astype(xp.int64)


