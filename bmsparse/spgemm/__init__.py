"""SpGEMM on bitmap blocks, in the paper's four stages.

1. :func:`~bmsparse.spgemm.tasks.tasks` - pair blocks A(i, j) with B(j, k),
   group the pairs by output key (i, k) (with a mask,
   :func:`~bmsparse.spgemm.tasks.masked_tasks`: only pairs landing in it);
2. :func:`~bmsparse.spgemm.count.count` - exact output bitmaps, offsets;
   (1 and 2 together, without a mask: :func:`~bmsparse.spgemm.rowdense.accumulate`,
   a dense accumulator per block row, for B of few block columns, or
   :func:`~bmsparse.spgemm.rowmerge.merge`, a merge per block row, for short
   block rows; 1 to 3 for graphs of about one entry per block:
   :mod:`~bmsparse.spgemm.rowscalar`, by B's scalar rows;)
3. :func:`~bmsparse.spgemm.multiply.multiply` - output values, in a semiring;
4. :func:`~bmsparse.spgemm.compact.compact` - drop exact zeros.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .. import _readback
from .._format import nblocks_along
from .._matrix import BitmapMatrix
from .._sputils import (SUPPORTED_DTYPES, check_cupyx_dtype, check_max_memory, csr_from_arrays,
                        get_array_module, matmul_mismatch, upcast)
from ..semiring import Semiring, get_semiring, plus_pair, plus_times
from . import compact, count, lean, multiply, rowdense, rowmerge, rowscalar, slices, tasks

#: names of the timed stages, in order
STAGES = ("tasks", "count", "multiply", "compact")

_BOOL, _INT64 = np.dtype(np.bool_), np.dtype(np.int64)

#: the supported dtypes that NumPy promotes with themselves to themselves
#: (the very object): ``upcast(d, d)`` of each, for the common A @ A
_PROMOTES_TO_ITSELF: dict[np.dtype, np.dtype] = {
    d: d for d in SUPPORTED_DTYPES if np.result_type(d, d) is d}



def spgemm(a: Any, b: Any, *, semiring: str | Semiring = "plus_times", mask: Any = None,
           complement: bool = False, dtype: Any = None, keep_zeros: bool = False,
           timings: dict[str, float] | None = None, max_memory: int | None = None,
           output: str = "device", format: str = "bitmap") -> Any:
    """Sparse matrix product ``a @ b`` of two bitmap matrices, in a semiring.

    Parameters
    ----------
    a, b : BitmapMatrix, or anything BitmapMatrix accepts
        Both on the host or both on the same GPU; shapes (m, k) and (k, n).
    semiring : str or Semiring
        ``"plus_times"`` (the arithmetic product), ``"min_plus"``,
        ``"max_plus"``, ``"max_times"``, ``"plus_pair"`` (counts of common
        j), ``"lor_land"`` / ``"or_and"`` or ``"any_pair"`` (reachability:
        a bool pattern C, from the bitmaps alone). See :mod:`bmsparse.semiring`.
    mask : BitmapMatrix, or anything BitmapMatrix accepts, optional
        Structural mask of shape (m, n): only the entries where it has an
        entry (stored zeros included) are computed; pairs that land only
        outside it are never generated.
    complement : bool
        Compute only the entries where ``mask`` has none.
    dtype : dtype, optional
        dtype of C: the operands' values are cast to it (default: NumPy's
        promotion of theirs). For ``plus_pair`` the count dtype, int64 by
        default or int32.
    keep_zeros : bool
        Keep output entries that summed to exactly zero (scipy drops them,
        and so does the default ``plus_times``; other semirings keep every
        entry their structure has).
    timings : dict, optional
        Filled with the milliseconds spent in each stage (``STAGES``),
        measured with CUDA events on the GPU and a host clock on the CPU,
        summed over slices, and with ``"slices"``, the number of slices.
    max_memory : int, optional
        Bytes the product may use. The product then runs in slices of A's
        block rows whose task lists and output values fit (see ``slices``;
        with ``output="device"`` the assembled C comes on top). Without it, a
        product that runs out of device memory is retried that way within
        the free memory.
    output : {"device", "host"}
        Where C is assembled. "host" copies each slice of C to the host as
        soon as it is computed, for outputs larger than the device.
    format : {"bitmap", "csr"}
        C as a BitmapMatrix, or in CSR as :meth:`BitmapMatrix.tocsr` gives
        it (cupyx ``csr_matrix`` on the GPU, scipy ``csr_array`` on the host).
        With "csr" the task-list and merge strategies write C's values
        straight to their CSR places: C in bitmap form is never made, which
        saves its values' memory and the conversion pass.

    Returns
    -------
    BitmapMatrix, or CSR with ``format="csr"``
        (m, n), on the same side as the operands, dtype promoted as NumPy
        does; bool @ bool is a Boolean (pattern) product.

    Raises
    ------
    ValueError
        The inner dimensions differ, the mask's shape is not (m, n),
        ``complement`` is True without a mask, the semiring is unknown, or
        ``output`` or ``format`` is unknown.
    TypeError
        One operand on the host and one on the GPU, ``dtype`` not a
        native-order dtype or one the semiring does not support,
        ``complement`` or ``keep_zeros`` not a bool, ``timings`` not a dict,
        or with ``format="csr"`` on the GPU a dtype that cupyx.scipy.sparse
        does not support.
    MemoryError
        On the GPU, one block row of A alone does not fit (the message says
        how much it needed and how much was available); on the host,
        NumPy's own when an array does not fit.

    Notes
    -----
    Deterministic: every output entry is summed in a fixed order (its pairs
    by ascending inner block index, then ascending inner index), so repeated
    runs give identical bits, sliced or not, by either strategy.

    Three strategies find the pairs (:func:`strategy`): products whose B has
    few block columns take dense accumulators per block row
    (:func:`rowdense.chooses`), others whose block rows of A are short the
    row merge (:func:`rowmerge.chooses`); both sync twice (three times when
    zeros are dropped). Small products of the first kind run it in one
    launch and one sync (:mod:`.lean`; ``timings`` then counts it all as the
    count stage); graphs of one or two entries per block go by B's scalar
    rows instead of pairs of blocks (:func:`rowscalar.chooses`; the count
    stage then includes B's CSR form, the multiply stage the blocks' second
    pass). The rest build a task list, which syncs 3
    to 5 times to size intermediate arrays (twice before the multiply; once
    more with a mask).
    """
    a, b = _operands(a, b)
    if a.shape[1] != b.shape[0]:
        raise matmul_mismatch(a.shape, b.shape)
    if output not in ("device", "host"):
        raise ValueError(f"output must be 'device' or 'host', got {output!r}")
    if format not in ("bitmap", "csr"):
        raise ValueError(f"format must be 'bitmap' or 'csr', got {format!r}")
    max_memory = check_max_memory(max_memory)
    asked = get_semiring(semiring)
    m = _check_mask(mask, (a.shape[0], b.shape[1]))
    _check_complement(complement, m)
    _check_bool(keep_zeros, "keep_zeros")
    _check_timings(timings)
    xp = get_array_module(a.keys, b.keys, None if m is None else m.keys)
    sr, dtype = _result_type(asked, a.dtype, b.dtype, dtype)
    csr = format == "csr"
    if csr and xp is not np and output == "device":
        check_cupyx_dtype(dtype, "format='bitmap' or another dtype")
    # plus_times cast to bool runs as lor_land, which reads no values: the
    # cast drops the zeros that would otherwise count as structure
    if sr.reads_values or asked is plus_times:
        # astype(copy=False) returns a matrix already of C's dtype as it is
        # (C's dtype is a supported one: its check raises nothing)
        if a.dtype != dtype:
            a = a.astype(dtype, copy=False)
        if b.dtype != dtype:
            b = b.astype(dtype, copy=False)
    drop_zeros = sr is plus_times and not keep_zeros
    # C's values, and their compacted copy when zeros are dropped
    value_bytes = 0 if sr.structural else dtype.itemsize * (2 if drop_zeros else 1)

    def product(a_part: BitmapMatrix, b_part: BitmapMatrix,
                max_bytes: tasks.Budget = None, csr: bool = False) -> Any:
        stage_ms: dict[str, float] | None = {} if timings is not None else None
        c = _product(a_part, b_part, sr, dtype, _mask_rows(m, a_part, a), complement,
                     drop_zeros, stage_ms, max_bytes, value_bytes, csr=csr)
        if timings is not None:
            for stage, ms in stage_ms.items():
                timings[stage] = timings.get(stage, 0.0) + ms
        return c

    if timings is not None:
        timings.clear()
    if m is None and max_memory is None and output == "device":
        path = strategy(a, b)
        if path == "lean" and not sr.structural:
            c = _lean(a, b, sr, dtype, drop_zeros, timings, xp)
            if c is not None:
                return _in_format(c, csr)
        find = _FINDERS.get(path)
        c = None if find is None else _merged(a, b, sr, dtype, drop_zeros, timings,
                                               value_bytes, find, csr)
        if c is not None:
            return _in_format(c, csr)
    if max_memory is None and (output == "device" or xp is np):
        try:
            # the task count, known at the task stage's first sync, is checked
            # against free memory before the task list is allocated
            c, nslices = product(a, b, None if xp is np else slices.free_memory(xp), csr), 1
        except MemoryError:
            budget = slices.device_budget(xp, None)
            if budget is None:
                raise  # the host's own: no free-memory figure to slice within
            slices.free_pool(xp)
            c, nslices = slices.sliced_product(a, b, product, budget, output, value_bytes)
    else:
        budget = slices.device_budget(xp, max_memory)
        c, nslices = slices.sliced_product(a, b, product, budget, output, value_bytes)
    if timings is not None:
        timings["slices"] = nslices
    return _in_format(c, csr)


def _operands(a: Any, b: Any) -> tuple[BitmapMatrix, BitmapMatrix]:
    """Both operands as BitmapMatrix; one conversion when ``b`` is ``a`` (A @ A)."""
    a_bm = a if isinstance(a, BitmapMatrix) else BitmapMatrix(a)
    if b is a:
        return a_bm, a_bm
    return a_bm, b if isinstance(b, BitmapMatrix) else BitmapMatrix(b)


def _in_format(c: Any, csr: bool) -> Any:
    """C as asked: the BitmapMatrix itself, or its CSR (unless already CSR)."""
    return c.tocsr() if csr and isinstance(c, BitmapMatrix) else c


def strategy(a: BitmapMatrix, b: BitmapMatrix) -> str:
    """How an unmasked, unsliced ``a @ b`` runs: "lean" (:mod:`.lean`, the
    dense path in one launch, for small products with values; "dense" for
    structural ones), "scalar" (:mod:`.rowscalar`, by B's scalar rows),
    "dense" (:mod:`.rowdense`), "merge" (:mod:`.rowmerge`) or "tasks" (the
    task list)."""
    if lean.chooses(a, b):
        return "lean"
    if rowscalar.chooses(a, b):
        return "scalar"
    if rowdense.chooses(a, b):
        return "dense"
    if rowmerge.chooses(a, b):
        return "merge"
    return "tasks"


def _by_pairs(accumulate: Any) -> Any:
    """A finder of :func:`_merged_product` from one of the merges
    (``rowdense.accumulate``, ``rowmerge.merge``): C's blocks with their
    useful pairs, and the functions computing their values with
    :func:`multiply.multiply` and :func:`multiply.multiply_csr`."""

    def find(a: BitmapMatrix, b: BitmapMatrix, reads_values: bool, structural: bool,
             check: Any) -> tuple[Any, Any, Any]:
        merged = accumulate(a, b, not structural, check)
        pairs = (a.bitmaps, a.offsets, a.values, b.bitmaps, b.offsets, b.values,
                 merged.task_a, merged.task_b, merged.c_ptr, None)

        def values(sr: Semiring, dtype: np.dtype, flag: Any) -> tuple[Any, Any]:
            return multiply.multiply(*pairs, merged.c_bitmaps, merged.c_offsets, merged.nnz,
                                     sr, dtype, merged.warp_block, flag)

        def values_csr(sr: Semiring, dtype: np.dtype, flag: Any) -> tuple[Any, ...]:
            return multiply.multiply_csr(*pairs, merged.c_keys, merged.c_bitmaps,
                                         merged.c_offsets, merged.nnz,
                                         (a.shape[0], b.shape[1]), sr, dtype,
                                         merged.warp_block, flag)

        return merged, values, values_csr

    return find


def _by_rows(a: BitmapMatrix, b: BitmapMatrix, reads_values: bool, structural: bool,
             check: Any) -> tuple[Any, Any, None]:
    """The finder of :func:`_merged_product` for :mod:`.rowscalar` (no CSR writer)."""
    return (*rowscalar.find(a, b, reads_values, structural, check), None)


_FINDERS = {"lean": _by_pairs(rowdense.accumulate), "scalar": _by_rows,
            "dense": _by_pairs(rowdense.accumulate), "merge": _by_pairs(rowmerge.merge)}


def _lean(a: BitmapMatrix, b: BitmapMatrix, sr: Semiring, dtype: np.dtype, drop_zeros: bool,
          timings: dict[str, float] | None, xp: Any) -> BitmapMatrix | None:
    """C by the lean path, timed as one count stage; None when it does not
    fit its workspace or device memory (the dense path then runs). ``xp`` is
    the operands' module."""
    # a product run for its host time: no clock unless timings are asked for
    clock = None if timings is None else _StageClock(xp, timings)
    if clock is not None:
        clock.lap("tasks")
    try:
        c = lean.product(a, b, sr, dtype, drop_zeros)
    except MemoryError:
        slices.free_pool(xp)
        return None
    if clock is not None:
        for stage in ("count", "multiply", "compact"):
            clock.lap(stage)
        clock.finish()
        if c is not None:
            timings["slices"] = 1
    return c


def _result_type(sr: Semiring, a_dtype: np.dtype, b_dtype: np.dtype,
                 dtype: Any) -> tuple[Semiring, np.dtype]:
    """The semiring actually run and C's dtype; TypeError if it does not support it."""
    if dtype is not None:
        dtype = _as_dtype(dtype)
    if sr.structural:
        if dtype is not None and dtype != _BOOL:
            raise TypeError(f"semiring {sr.name} gives a bool (pattern) result, not "
                            f"{dtype.name}; for counts use 'plus_pair', or cast "
                            f"the result with astype()")
        return sr, _BOOL
    if sr is plus_pair:
        dtype = _INT64 if dtype is None else dtype
    else:
        if dtype is None and a_dtype is b_dtype and _PROMOTES_TO_ITSELF.get(a_dtype) is a_dtype:
            dtype = a_dtype  # upcast's answer, without its promotion and checks
        elif dtype is None:
            dtype = upcast(a_dtype, b_dtype)
        if sr is plus_times and dtype == _BOOL:
            return get_semiring("lor_land"), dtype  # bool @ bool: the Boolean product
    if dtype not in sr.dtypes:
        raise TypeError(f"semiring {sr.name} does not support dtype {dtype.name}; supported: "
                        f"{', '.join(d.name for d in sr.dtypes)}")
    return sr, dtype


def _as_dtype(dtype: Any) -> np.dtype:
    """The ``dtype`` argument as a NumPy dtype; TypeError when it is none, or in
    non-native byte order (C is stored in native order, and the semiring's
    message would name the dtype as one it supports)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a NumPy dtype, got {dtype!r}") from None
    if not dt.isnative:
        raise TypeError(f"dtype {dt.str} is in non-native byte order; use numpy.{dt.name}")
    return dt


def _check_bool(value: Any, name: str) -> None:
    """TypeError unless ``value`` is a bool (a truthy string such as "no" is no flag)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")


def _check_timings(timings: Any) -> None:
    """``timings`` is None or a dict: it is cleared, then filled after the stages
    run (anything else failed only then, with the product computed)."""
    if timings is not None and not isinstance(timings, dict):
        raise TypeError(f"timings must be a dict, got {type(timings).__name__}")


def _check_complement(complement: Any, mask: BitmapMatrix | None) -> None:
    """``complement`` is a bool, and True only with a mask."""
    _check_bool(complement, "complement")
    if complement and mask is None:
        raise ValueError("complement=True needs a mask: it computes the entries the "
                         "mask does not have")


def _check_mask(mask: Any, shape: tuple[int, int]) -> BitmapMatrix | None:
    if mask is None:
        return None
    m = mask if isinstance(mask, BitmapMatrix) else BitmapMatrix(mask)
    if m.shape != shape:
        raise ValueError(f"mask shape {m.shape} does not match the product's {shape}")
    return m


def _mask_rows(m: BitmapMatrix | None, a_part: BitmapMatrix,
               a: BitmapMatrix) -> BitmapMatrix | None:
    """The mask's blocks in the block rows of a slice of A (all of it when unsliced)."""
    if m is None or a_part is a or a_part.nblocks == 0:
        return m
    xp = get_array_module(m.keys)
    shift = xp.uint64(32)
    first, last = a_part.keys[:1] >> shift, a_part.keys[-1:] >> shift
    lo = xp.searchsorted(m.keys, first << shift, side="left")
    hi = xp.searchsorted(m.keys, (last << shift) | xp.uint64(0xFFFFFFFF), side="right")
    lo, hi = _readback.read_ints((lo, 0), (hi, 0))  # sync: the mask's range
    return slices.rows_of(m, lo, hi)


def _product(a: BitmapMatrix, b: BitmapMatrix, sr: Semiring, dtype: np.dtype,
             mask: BitmapMatrix | None, complement: bool, drop_zeros: bool,
             timings: dict[str, float] | None, max_bytes: tasks.Budget = None,
             value_bytes: int = 0, csr: bool = False) -> Any:
    """The four stages; MemoryError if the task list, or after the count stage the
    task list and ``value_bytes`` per output value, would need more than
    ``max_bytes``. With ``csr``, C comes in CSR (``BitmapMatrix.tocsr``'s type)."""
    xp = get_array_module(a.keys, b.keys)
    shape = (a.shape[0], b.shape[1])
    clock = _StageClock(xp, timings)

    task_list, c_allowed = _task_list(a, b, mask, complement, max_bytes)
    clock.lap("tasks")
    # the pairs' blocks are written for the multiply, where there is one
    records = not sr.structural and count.records_fit(_most_values(a), _most_values(b))
    counts = count.count(a.bitmaps, b.bitmaps, task_list.task_a, task_list.task_b,
                         task_list.c_ptr, c_allowed, (a.offsets, b.offsets) if records else None,
                         task_list.c_nblocks, task_list.task_block)
    task_list = task_list._replace(task_block=None)  # not kept to the peak
    pair_blocks = counts.pairs
    # with the pairs' records, the multiply reads the task list's task_a and
    # task_b for their length only: they may hold the kept blocks' task runs
    # (and in CSR, C's blocks are read by the multiply only: no copy of them)
    c_keys, c_bitmaps, c_offsets, c_first, c_last, nnz, *warps = compact.drop_empty(
        task_list.c_keys, counts, task_list.c_ptr, task_list.c_nblocks,
        None if pair_blocks is None else (task_list.task_a, task_list.task_b),
        csr and not sr.structural)
    del counts  # the bitmaps and scan before dropping empty blocks: not kept to the peak
    # a fixed budget covers the task list too; free memory may have been read
    # after the task list was allocated, so only the values are checked against it
    listed = 0 if callable(max_bytes) else task_list.ntasks * tasks.BYTES_PER_TASK
    tasks.check_budget("the product", listed + _output_bytes(nnz, c_keys.shape[0], value_bytes,
                                                              csr and not sr.structural),
                       max_bytes)
    clock.lap("count")
    if sr.structural:
        clock.lap("multiply")
        clock.lap("compact")
        clock.finish()
        return BitmapMatrix._from_blocks(c_keys, c_bitmaps, c_offsets, None, shape, nnz=nnz)
    flag = _zero_flag(xp, drop_zeros)
    pairs = (a.bitmaps, a.offsets, a.values, b.bitmaps, b.offsets, b.values,
             task_list.task_a, task_list.task_b, c_first, c_last)
    if csr:
        *arrays, zero_values = multiply.multiply_csr(*pairs, c_keys, c_bitmaps, c_offsets, nnz,
                                                     shape, sr, dtype, warps[0], flag,
                                                     pair_blocks, warps[1])
        clock.lap("multiply")
        return _csr_result(xp, arrays, shape, (flag or zero_values) if drop_zeros else None,
                           clock)
    c_values, zero_values = multiply.multiply(*pairs, c_bitmaps, c_offsets, nnz, sr, dtype,
                                              warps[0], flag, pair_blocks, warps[1])
    clock.lap("multiply")
    if drop_zeros:
        c_keys, c_bitmaps, c_offsets, c_values = compact.compact(
            c_keys, c_bitmaps, c_offsets, c_values, None, flag or zero_values)
    clock.lap("compact")
    clock.finish()
    return BitmapMatrix._from_blocks(c_keys, c_bitmaps, c_offsets, c_values, shape)


def _most_values(m: BitmapMatrix) -> int:
    """``m.nnz``, or a bound where counting would sync (a pattern matrix)."""
    return 64 * m.nblocks if m.values is None else int(m.values.shape[0])


def _output_bytes(nnz: int, c_nblocks: int, value_bytes: int, csr: bool) -> int:
    """Bytes of C's values (``value_bytes`` each), and in CSR of its column
    indices and the places of its row segments (8 bytes each at most)."""
    if not csr or not value_bytes:
        return nnz * value_bytes
    return nnz * (value_bytes + 8) + 8 * 8 * c_nblocks


def _csr_result(xp: Any, arrays: list[Any], shape: tuple[int, int], zeros: Any,
                clock: _StageClock) -> Any:
    """C in CSR from ``multiply.multiply_csr``'s arrays, without its exact zeros
    when ``zeros`` (its zero count or flag) is given."""
    # made before the compaction's sync, while the GPU still multiplies: most
    # products drop nothing, and C is then ready when the sync returns
    c = csr_from_arrays(xp, *arrays, shape)
    if zeros is not None:
        kept = compact.compact_csr(*arrays, zeros)
        if kept[2] is not arrays[2]:
            c = csr_from_arrays(xp, *kept, shape)
    clock.lap("compact")
    clock.finish()
    return c


def _merged(a: BitmapMatrix, b: BitmapMatrix, sr: Semiring, dtype: np.dtype,
            drop_zeros: bool, timings: dict[str, float] | None, value_bytes: int,
            find: Any, csr: bool = False) -> Any:
    """C by ``find`` (a value of ``_FINDERS``: C's blocks, and the functions
    that compute their values, in bit order and in CSR or None), or None
    when it does not fit in the free device memory: the task-list path then
    slices the product. A failed allocation anywhere in it counts, not only
    the checks. With ``csr``, C in CSR where ``find`` writes it."""
    xp = get_array_module(a.keys, b.keys)
    try:
        c = _merged_product(xp, a, b, sr, dtype, drop_zeros, timings, value_bytes, find, csr)
    except MemoryError:
        slices.free_pool(xp)
        return None
    if timings is not None:
        timings["slices"] = 1  # after the stages, in the order spgemm documents
    return c


def _merged_product(xp: Any, a: BitmapMatrix, b: BitmapMatrix, sr: Semiring,
                    dtype: np.dtype, drop_zeros: bool, timings: dict[str, float] | None,
                    value_bytes: int, find: Any, csr: bool) -> Any:
    clock = _StageClock(xp, timings)
    clock.lap("tasks")  # none apart: the pairs are found while counting
    budget = slices.free_memory(xp)
    merged, values, values_csr = find(
        a, b, sr.reads_values, sr.structural,
        lambda need: tasks.check_budget("the product", need, budget))
    csr = csr and values_csr is not None and not sr.structural
    tasks.check_budget("the product", _output_bytes(merged.nnz, merged.c_keys.shape[0],
                                                    value_bytes, csr), budget)
    clock.lap("count")
    shape = (a.shape[0], b.shape[1])
    if csr:
        flag = _zero_flag(xp, drop_zeros)
        *arrays, zeros = values_csr(sr, dtype, flag)
        clock.lap("multiply")
        return _csr_result(xp, arrays, shape, (flag or zeros) if drop_zeros else None, clock)
    if sr.structural:
        c = BitmapMatrix._from_blocks(merged.c_keys, merged.c_bitmaps, merged.c_offsets, None,
                                      shape, nnz=merged.nnz)
        clock.lap("multiply")
    else:
        flag = _zero_flag(xp, drop_zeros)
        c_values, zeros = values(sr, dtype, flag)
        clock.lap("multiply")
        arrays = (merged.c_keys, merged.c_bitmaps, merged.c_offsets, c_values)
        if drop_zeros:
            arrays = compact.compact(*arrays[:3], c_values, None, flag or zeros)
        c = BitmapMatrix._from_blocks(*arrays, shape)
    clock.lap("compact")
    clock.finish()
    return c


def _zero_flag(xp: Any, drop_zeros: bool) -> _readback.HostFlag | None:
    """The flag the multiply sets when a value cancels, where zeros are
    dropped on a GPU that writes host memory: reading it is a sync without a
    copy (the count on the device is the fallback)."""
    return _readback.host_flag() if drop_zeros and xp is not np else None


def _task_list(a: BitmapMatrix, b: BitmapMatrix, mask: BitmapMatrix | None,
               complement: bool, max_bytes: tasks.Budget) -> tuple[tasks.TaskList, Any]:
    """The task list and the bits each output block may have (None: all)."""
    if mask is not None and not complement:
        # the output blocks are the mask's, in its order
        # B's column order is kept with B: repeated masked products sort it once
        return (tasks.masked_tasks(a.keys, b.keys, mask.keys, max_bytes, b._column_order()),
                mask.bitmaps)
    # the block-row pointers (kept with the matrices) replace binary searches,
    # unless a matrix is hypersparse: its pointer would scale with its shape
    # (34 GB for 2^35 rows holding five entries), the task list with its blocks
    pointers = tuple(m._row_pointer() if rowmerge.rows_fit(m) else None
                     for m in (a, b)) if a.on_device else None
    # unmasked, the count stage is queued before the number of output blocks
    # is read (with the count's totals, in one sync): a sync less
    task_list = tasks.tasks(a.keys, b.keys, nblocks_along(a.shape[0]),
                            nblocks_along(b.shape[1]), max_bytes, pointers, sized=mask is not None)
    if mask is None:
        return task_list, None
    return task_list, count.outside_bits(task_list.c_keys, mask.keys, mask.bitmaps)


def masked_pair_sum(a: Any, b: Any, mask: Any) -> int:
    """Sum of ``plus_pair(A @ B)`` over the entries of ``mask``, without forming C.

    That is the number of (i, j, k) with A[i, j], B[j, k] and mask[i, k] all
    present. With L the strictly lower triangle of an undirected graph's
    adjacency, ``masked_pair_sum(L, L, L)`` is its number of triangles.

    Parameters
    ----------
    a, b, mask : BitmapMatrix, or anything BitmapMatrix accepts
        Shapes (m, k), (k, n), (m, n); structure only (values are ignored).

    Returns
    -------
    int

    Notes
    -----
    Pairs are found from the mask's blocks as in :func:`tasks.masked_tasks`
    and each contributes ``popcount`` of its 8 masked rank-1 products, in one
    kernel: no task list and no C is stored. Exact (integer) and
    deterministic. Syncs once.

    Examples
    --------
    >>> import numpy as np
    >>> from bmsparse import BitmapMatrix
    >>> from bmsparse.spgemm import masked_pair_sum
    >>> L = BitmapMatrix(np.tril(np.ones((4, 4), dtype=bool), -1))  # K4
    >>> masked_pair_sum(L, L, L)
    4
    """
    a = a if isinstance(a, BitmapMatrix) else BitmapMatrix(a)
    b = b if isinstance(b, BitmapMatrix) else BitmapMatrix(b)
    if a.shape[1] != b.shape[0]:
        raise matmul_mismatch(a.shape, b.shape)
    if mask is None:  # (None means "no mask" to spgemm, not here)
        raise TypeError("masked_pair_sum needs a mask, got None")
    m = _check_mask(mask, (a.shape[0], b.shape[1]))
    get_array_module(a.keys, b.keys, m.keys)  # TypeError for a host/device mix
    c_pairs = tasks.masked_pair_counts(m.keys, m.bitmaps, a.keys, a.bitmaps, b.keys, b.bitmaps,
                                       b._column_order())
    return int(c_pairs.sum()) if c_pairs.shape[0] else 0  # sync: the count


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

__all__ = ["STAGES", "masked_pair_sum", "plan_slices", "spgemm", "strategy"]
