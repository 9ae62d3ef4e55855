"""SpGEMM on bitmap blocks, in the paper's four stages.

1. :func:`~bmsparse.spgemm.tasks.tasks` - pair blocks A(i, j) with B(j, k),
   group the pairs by output key (i, k);
2. :func:`~bmsparse.spgemm.count.count` - exact output bitmaps, offsets;
3. :func:`~bmsparse.spgemm.multiply.multiply` - output values;
4. :func:`~bmsparse.spgemm.compact.compact` - drop exact zeros.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .._format import nblocks_along
from .._matrix import BitmapMatrix
from .._sputils import get_array_module, matmul_mismatch, upcast
from . import compact, count, multiply, slices, tasks

#: names of the timed stages, in order
STAGES = ("tasks", "count", "multiply", "compact")


def spgemm(a: Any, b: Any, *, keep_zeros: bool = False,
           timings: dict[str, float] | None = None, max_memory: int | None = None,
           output: str = "device") -> BitmapMatrix:
    """Sparse matrix product ``a @ b`` of two bitmap matrices.

    Parameters
    ----------
    a, b : BitmapMatrix, or anything BitmapMatrix accepts
        Both on the host or both on the same GPU; shapes (m, k) and (k, n).
    keep_zeros : bool
        Keep output entries that summed to exactly zero (scipy drops them,
        and so does the default).
    timings : dict, optional
        Filled with the milliseconds spent in each stage (``STAGES``),
        measured with CUDA events on the GPU and a host clock on the CPU,
        summed over slices, and with ``"slices"``, the number of slices.
    max_memory : int, optional
        Bytes the product may use. The product then runs in slices of A's
        block rows whose task lists fit (see ``slices``). Without it, a
        product that runs out of device memory is retried that way within
        the free memory.
    output : {"device", "host"}
        Where C is assembled. "host" copies each slice of C to the host as
        soon as it is computed, for outputs larger than the device.

    Returns
    -------
    BitmapMatrix
        (m, n), on the same side as the operands, dtype promoted as NumPy
        does; bool @ bool is a Boolean (pattern) product.

    Raises
    ------
    ValueError
        The inner dimensions differ, or ``output`` is unknown.
    TypeError
        One operand on the host and one on the GPU, or an unsupported dtype.
    MemoryError
        One block row of A alone does not fit (the message says how much it
        needed and how much was available).

    Notes
    -----
    Deterministic: every output entry is summed in a fixed order (its pairs
    by ascending inner block index, then ascending inner index), so repeated
    runs give identical bits, sliced or not. On the GPU the call syncs 4 to 6
    times to size intermediate arrays.
    """
    a = a if isinstance(a, BitmapMatrix) else BitmapMatrix(a)
    b = b if isinstance(b, BitmapMatrix) else BitmapMatrix(b)
    if a.shape[1] != b.shape[0]:
        raise matmul_mismatch(a.shape, b.shape)
    if output not in ("device", "host"):
        raise ValueError(f"output must be 'device' or 'host', got {output!r}")
    xp = get_array_module(a.keys, b.keys)
    dtype = upcast(a.dtype, b.dtype)
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)

    def product(a_part: BitmapMatrix, b_part: BitmapMatrix,
                max_bytes: int | None = None) -> BitmapMatrix:
        stage_ms: dict[str, float] | None = {} if timings is not None else None
        c = _product(a_part, b_part, keep_zeros, stage_ms, max_bytes)
        if timings is not None:
            for stage, ms in stage_ms.items():
                timings[stage] = timings.get(stage, 0.0) + ms
        return c

    if timings is not None:
        timings.clear()
    if max_memory is None and (output == "device" or xp is np):
        try:
            # the task count, known at the task stage's first sync, is checked
            # against free memory before the task list is allocated
            c, nslices = product(a, b, None if xp is np else slices.device_budget(xp, None)), 1
        except MemoryError:
            slices.free_pool(a)
            c, nslices = slices.sliced_product(a, b, product, slices.device_budget(xp, None),
                                               output)
    else:
        budget = slices.device_budget(xp, max_memory)
        c, nslices = slices.sliced_product(a, b, product, budget, output)
    if timings is not None:
        timings["slices"] = nslices
    return c


def _product(a: BitmapMatrix, b: BitmapMatrix, keep_zeros: bool,
             timings: dict[str, float] | None, max_bytes: int | None = None) -> BitmapMatrix:
    """The four stages on operands of one dtype; MemoryError if the task list
    alone would need more than ``max_bytes``."""
    xp = get_array_module(a.keys, b.keys)
    dtype = a.dtype
    shape = (a.shape[0], b.shape[1])
    clock = _StageClock(xp, timings)

    task_list = tasks.tasks(a.keys, b.keys, nblocks_along(a.shape[0]),
                            nblocks_along(b.shape[1]), max_bytes)
    clock.lap("tasks")
    c_bitmaps, c_offsets, empty_blocks = count.count(
        a.bitmaps, b.bitmaps, task_list.task_a, task_list.task_b, task_list.c_ptr)
    c_keys, c_bitmaps, c_offsets, c_first, c_last, nnz = compact.drop_empty(
        task_list.c_keys, c_bitmaps, c_offsets, task_list.c_ptr, empty_blocks)
    clock.lap("count")
    if dtype == np.bool_:
        clock.lap("multiply")
        clock.lap("compact")
        clock.finish()
        return BitmapMatrix._from_blocks(c_keys, c_bitmaps, c_offsets, None, shape, nnz=nnz)
    c_values, c_nonzero, zero_blocks = multiply.multiply(
        a.bitmaps, a.offsets, a.values, b.bitmaps, b.offsets, b.values, task_list.task_a,
        task_list.task_b, c_first, c_last, c_bitmaps, c_offsets, nnz)
    clock.lap("multiply")
    if not keep_zeros:
        c_keys, c_bitmaps, c_offsets, c_values = compact.compact(
            c_keys, c_bitmaps, c_offsets, c_values, c_nonzero, zero_blocks)
    clock.lap("compact")
    clock.finish()
    return BitmapMatrix._from_blocks(c_keys, c_bitmaps, c_offsets, c_values, shape)


class _StageClock:
    """Per-stage milliseconds: CUDA events on the GPU, perf_counter on the host."""

    def __init__(self, xp: Any, timings: dict[str, float] | None):
        self._out = timings
        self._gpu = xp is not np
        self._marks: list[tuple[str, Any]] = []
        if timings is not None:
            self._marks.append(("", self._now()))

    def _now(self) -> Any:
        if self._gpu:
            import cupy

            event = cupy.cuda.Event()
            event.record()
            return event
        return time.perf_counter()

    def lap(self, stage: str) -> None:
        if self._out is not None:
            self._marks.append((stage, self._now()))

    def finish(self) -> None:
        if self._out is None:
            return
        for (_, start), (stage, end) in zip(self._marks, self._marks[1:]):
            if self._gpu:
                import cupy

                end.synchronize()  # sync: only when timings were asked for
                self._out[stage] = cupy.cuda.get_elapsed_time(start, end)
            else:
                self._out[stage] = (end - start) * 1e3


plan_slices = slices.plan_slices

__all__ = ["STAGES", "plan_slices", "spgemm"]
