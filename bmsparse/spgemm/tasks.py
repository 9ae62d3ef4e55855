"""Stage 1 of SpGEMM: the task list.

Pairs every block A(i, j) with every block B(j, k) and groups the pairs by
output key (i, k). Only block keys are read, never bitmaps or values. The
steps are the paper's data-parallel primitives; on the GPU each is one fused
kernel of ``tasks.cu`` (and CuPy's sort), on the host NumPy:

1. ranges: for each A block, the run ``[lo, lo + count)`` of B blocks in B's
   block row j (binary searches of B's keys: nothing scales with the shape);
2. expand: a scan of the counts numbers the tasks; task ``t`` pairs A block
   ``a`` with B block ``lo[a] + t - start[a]`` and gets the sort code
   ``i << (col_bits + task_bits) | k << task_bits | t``;
3. sort the codes (keys only). Ties are broken by task number and A's keys
   are sorted, so an output block's pairs come in ascending j: this fixes the
   summation order of every output entry;
4. unpack: each sorted code gives back its A and B block;
5. run heads: where a code's output key differs from the one before, an
   output block starts; a scan of those starts gives ``c_ptr`` and
   ``c_keys`` (on the GPU in the same launch).

When the three fields do not fit in 64 bits, step 3 is a stable argsort of
the full output keys instead (``col_bits = 32``, ``task_bits = 0``).

With a structural mask, :func:`masked_tasks` builds the list from the
mask's blocks instead (a masked inner product): A's block row i meets B's
block column k for each mask block (i, k), so no pair landing outside the
mask is generated and nothing is sorted.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Union

import numpy as np

from .. import _kernels, _readback
from .._format import COL_MASK, KEY_SHIFT
from .. import _primitives
from .._primitives import cumsum, sort_segments, stable_argsort
from .._sputils import get_array_module
from ..transpose import column_order as block_column_order

_KERNELS = "spgemm/tasks.cu"
_kernels.register(_KERNELS, {
    "bmsparse_tasks_ranges": (),
    "bmsparse_tasks_expand": (),
    "bmsparse_tasks_unpack": (),
    "bmsparse_tasks_run_heads": (),
    "bmsparse_tasks_spans": (),
    "bmsparse_tasks_rank": (),
    "bmsparse_tasks_place_heavy": (),
    "bmsparse_tasks_sort_heavy": (),
    "bmsparse_tasks_masked_count": (),
    "bmsparse_tasks_masked_pairs": (),
    "bmsparse_tasks_count_masked_pairs": (),
})

#: on the GPU, block rows of at most this many A blocks (at most 32: a warp
#: takes a row, a run per lane) are merged without a sort; the tasks of
#: heavier rows are sorted. 0 sorts every row.
RANK_MAX_RUNS = 32

#: and of at most this many tasks (at most ``_RANK_CAP``: the warp ranks them
#: in shared memory, each against all)
RANK_MAX_TASKS = 256
_RANK_CAP = 256  # BMSPARSE_TASKS_RANK_CAP

#: when no block row has more tasks than this (at most ``_HEAVY_CAP``), the
#: heavy rows are sorted by a thread block each, in shared memory, instead of
#: by one global sort of their codes (0: always the global sort)
HEAVY_SORT_TASKS = 4096
_HEAVY_CAP = 4096  # BMSPARSE_TASKS_HEAVY_CAP
_HEAVY_THREADS = 1024  # BMSPARSE_TASKS_HEAVY_THREADS
_HEAVY_RUNS = 2048  # BMSPARSE_TASKS_HEAVY_RUNS

#: heavy rows of at most this many A blocks keep their ends in shared memory
#: for the searches of that sort (at most ``_HEAVY_RUNS``)
HEAVY_CACHED_RUNS = 2048

#: upper estimate of the device bytes the pipeline holds per task at its peak
#: (task arrays, sort codes, flags and scans, output block arrays); measured
#: peaks were 120-190 bytes per task on the WebBase surrogate, float64
BYTES_PER_TASK = 192

#: needs below this many bytes are not checked against the free device memory:
#: asking the driver costs tens of microseconds, and an allocation that fails
#: anyway is caught and the product sliced
UNCHECKED_BYTES = 1 << 30

#: a byte budget: a number, a function giving the free device memory, or None
Budget = Union[int, Callable[[], int], None]

#: threads per mask block in the masked task kernels (one warp)
_WARP = 32

#: width of the packed sort code; tests lower it to reach the argsort path
PACKED_SORT_BITS = 64


class OverBudget(MemoryError):
    """A product that would need ``needed`` bytes, more than its budget."""

    def __init__(self, what: str, needed: int, budget: int):
        super().__init__(f"{what} needs about {needed:,} bytes, more than {budget:,}")
        self.needed = needed


def check_budget(what: str, needed: int, max_bytes: Budget) -> None:
    """Raise OverBudget when ``needed`` bytes exceed ``max_bytes``."""
    if max_bytes is None or (callable(max_bytes) and needed < UNCHECKED_BYTES):
        return
    budget = max_bytes() if callable(max_bytes) else max_bytes
    if needed > budget:
        raise OverBudget(what, needed, budget)


class TaskList(NamedTuple):
    """Tasks grouped by output block.

    task_a, task_b : int64 [ntasks] - A and B block of each task, sorted by
        output key, ties in task order
    c_keys : uint64 [c_nblocks] - output block keys, strictly increasing
    c_ptr : int64 [c_nblocks + 1] - tasks of output block q are
        ``task_a[c_ptr[q]:c_ptr[q + 1]]``
    c_nblocks : int64 [1] or None - from ``tasks(..., sized=False)`` on the
        GPU: c_nblocks, on the device and not yet read; ``c_keys`` and
        ``c_ptr`` are then the ntasks-long buffers whose first c_nblocks
        (+ 1) entries are the list's (see :func:`first_blocks`)
    task_block : int32 [ntasks] or None - with ``c_nblocks`` (fewer than
        2^31 tasks): the output block of each task, for ``count.count``'s
        count by tasks
    """

    task_a: Any
    task_b: Any
    c_keys: Any
    c_ptr: Any
    c_nblocks: Any = None
    task_block: Any = None

    @property
    def ntasks(self) -> int:
        return int(self.task_a.shape[0])


def tasks(a_keys: Any, b_keys: Any, row_bound: int, col_bound: int,
          max_bytes: Budget = None, row_pointers: tuple[Any, Any] | None = None,
          sized: bool = True) -> TaskList:
    """Task list of ``A @ B`` from the block keys of A and B.

    Parameters
    ----------
    a_keys, b_keys : uint64 [a_nblocks], [b_nblocks]
        Strictly increasing block keys of A and B.
    row_bound, col_bound : int
        Number of block rows of A and of block columns of B.
    max_bytes : int or callable, optional
        Memory the product may use (a callable gives the free device memory,
        asked only for lists of ``UNCHECKED_BYTES`` or more); with more than
        ``max_bytes / BYTES_PER_TASK`` tasks, :class:`OverBudget` is raised
        before anything is allocated for them (the caller then slices the
        product).
    row_pointers : (int64 [row_bound + 1], int64 [B's block rows + 1]), optional
        The block-row pointers of A and B (``BitmapMatrix._row_pointer``),
        when known: on the GPU they replace binary searches of the keys.
    sized : bool
        False: on the GPU, leave the number of output blocks on the device
        (``TaskList.c_nblocks``) instead of syncing to read it, so that the
        count stage is queued at once (``count.count`` takes it) and one
        later sync reads it with the count's totals (``compact.drop_empty``).

    Returns
    -------
    TaskList

    Notes
    -----
    O(ntasks log ntasks) work; peak memory about 48 bytes per task. On the
    GPU it syncs twice (to size the task list and the output; once unless
    ``sized``).
    """
    xp = get_array_module(a_keys, b_keys)
    a_ptr, b_ptr = row_pointers or (None, None)
    lo, counts, ends, spans = ranges(a_keys, b_keys, b_ptr, scan=True)
    rows = _rows(xp, a_keys, ends, counts, a_ptr, spans)  # sync: size of the task list
    ntasks = rows.ntasks
    check_budget(f"the task list of {ntasks:,} tasks", ntasks * BYTES_PER_TASK, max_bytes)
    col_bits = max((col_bound - 1).bit_length(), 1)
    task_bits = max((ntasks - 1).bit_length(), 1)
    packs = max((row_bound - 1).bit_length(), 1) + col_bits + task_bits <= PACKED_SORT_BITS
    if xp is not np and 2 * rows.heavy_tasks <= ntasks and (packs or not rows.heavy_tasks):
        task_a, task_b, keys = merge(ends, lo, counts, a_keys, b_keys, rows, col_bits,
                                     task_bits)
        return TaskList(task_a, task_b, *run_heads(keys, KEY_SHIFT, 0, sized))
    if packs:
        codes = expand(ends, lo, counts, a_keys, b_keys, ntasks, col_bits, task_bits)
        sorted_codes = sort_segments(codes, rows.row_first, rows.max_span, rows.long_tasks)
        order = None
    else:
        col_bits, task_bits = KEY_SHIFT, 0
        full = expand(ends, lo, counts, a_keys, b_keys, ntasks, col_bits, task_bits)
        order = stable_argsort(xp, full)
        sorted_codes = full[order]
    task_a, task_b = unpack(sorted_codes, order, task_bits, ends, lo, counts)
    return TaskList(task_a, task_b, *run_heads(sorted_codes, col_bits, task_bits, sized))


def masked_tasks(a_keys: Any, b_keys: Any, m_keys: Any, max_bytes: Budget = None,
                 b_order: Any = None) -> TaskList:
    """Task list of ``A @ B`` restricted to the blocks of a mask.

    Parameters
    ----------
    a_keys, b_keys, m_keys : uint64 [a_nblocks], [b_nblocks], [m_nblocks]
        Strictly increasing block keys of A, B and the mask.
    max_bytes : int, optional
        As for :func:`tasks`.
    b_order : int64 [b_nblocks], optional
        B's column order (``transpose.column_order``), when already known.

    Returns
    -------
    TaskList
        Its output blocks are the mask's (``c_keys`` is ``m_keys``); a mask
        block that no pair reaches has an empty run. Each block's pairs come
        in ascending j, as in :func:`tasks`, so values are summed in the
        same order.

    Notes
    -----
    O(m_nblocks log(a_nblocks + b_nblocks) + sum over mask blocks of
    min(|A row|, |B column|) log(max(...))) work, plus a sort of B's keys
    into column order unless ``b_order`` is given. Syncs once, for the
    number of tasks.
    """
    xp = get_array_module(a_keys, b_keys, m_keys)
    bt_keys, b_order = column_order(b_keys, b_order)
    a_range, b_range = masked_ranges(m_keys, a_keys, bt_keys)
    if xp is np:  # the twin finds every pair at once; the kernels count, then write
        owner, task_a, y = _masked_matches(m_keys, a_keys, bt_keys, a_range)
        ends = np.cumsum(np.bincount(owner, minlength=m_keys.shape[0]))
        task_b = b_order[y]
    else:
        counts = masked_counts(m_keys, a_keys, bt_keys, a_range, b_range)
        ends = cumsum(xp, counts)
    ntasks = _readback.read_last(ends) if ends.shape[0] else 0  # sync: size of the task list
    check_budget(f"the masked task list of {ntasks:,} tasks", ntasks * BYTES_PER_TASK,
                 max_bytes)
    if xp is not np:
        task_a, task_b = masked_pairs(m_keys, a_keys, bt_keys, a_range, b_range, b_order,
                                      counts, ends, ntasks)
    c_ptr = xp.zeros(m_keys.shape[0] + 1, dtype=xp.int64)
    c_ptr[1:] = ends
    return TaskList(task_a, task_b, m_keys, c_ptr)


def column_order(b_keys: Any, order: Any = None) -> tuple[Any, Any]:
    """B's keys with their halves swapped (``k << 32 | j``), sorted (uint64), and
    the B block of each (int64): ``order``, or ``transpose.column_order``."""
    order = block_column_order(b_keys) if order is None else order
    shift = np.uint64(KEY_SHIFT)
    keys = b_keys[order]
    return (keys << shift) | (keys >> shift), order


def masked_ranges(m_keys: Any, a_keys: Any, bt_keys: Any) -> tuple[Any, Any]:
    """For each mask block (i, k): A's blocks of block row i and the ``bt_keys``
    entries of B's block column k, as int64 [2 * m_nblocks] (all starts, then all
    ends).

    Vectorised searches, one element per thread: inside the pair kernels each
    mask block would wait on four dependent chains of global loads.
    """
    xp = get_array_module(m_keys, a_keys, bt_keys)
    shift, low = xp.uint64(KEY_SHIFT), xp.uint64(COL_MASK)
    firsts = (m_keys >> shift) << shift
    lasts = firsts | low
    a_range = xp.concatenate([xp.searchsorted(a_keys, firsts, side="left"),
                              xp.searchsorted(a_keys, lasts, side="right")])
    firsts = m_keys << shift
    lasts = firsts | low
    b_range = xp.concatenate([xp.searchsorted(bt_keys, firsts, side="left"),
                              xp.searchsorted(bt_keys, lasts, side="right")])
    return a_range.astype(xp.int64, copy=False), b_range.astype(xp.int64, copy=False)


def masked_counts(m_keys: Any, a_keys: Any, bt_keys: Any, a_range: Any, b_range: Any) -> Any:
    """Number of pairs (int64 [m_nblocks]) of each mask block (i, k): the j that
    A's block row i and B's block column k share (GPU; the twin is
    :func:`_masked_matches`)."""
    import cupy

    n = m_keys.shape[0]
    counts = cupy.empty(n, dtype=cupy.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_tasks_masked_count")
    _kernels.launch(kernel, _WARP * n, (m_keys, n, a_keys, bt_keys, a_range, b_range, counts))
    return counts


def masked_pairs(m_keys: Any, a_keys: Any, bt_keys: Any, a_range: Any, b_range: Any,
                 b_order: Any, counts: Any, ends: Any, ntasks: int) -> tuple[Any, Any]:
    """task_a, task_b (int64 [ntasks]): the pairs of each mask block, ascending j
    (GPU; the twin is :func:`_masked_matches`)."""
    import cupy

    n = m_keys.shape[0]
    task_a = cupy.empty(ntasks, dtype=cupy.int64)
    task_b = cupy.empty(ntasks, dtype=cupy.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_tasks_masked_pairs")
    _kernels.launch(kernel, _WARP * n, (m_keys, n, a_keys, bt_keys, a_range, b_range, b_order,
                                        counts, ends, task_a, task_b))
    return task_a, task_b


def masked_pair_counts(m_keys: Any, m_bitmaps: Any, a_keys: Any, a_bitmaps: Any,
                       b_keys: Any, b_bitmaps: Any, b_order: Any = None) -> Any:
    """Per mask block, the number of (r, t, c) with A[r, t], B[t, c] and mask[r, c]
    over its pairs (int64 [m_nblocks]): :func:`masked_tasks` and
    ``count.pair_counts`` fused, so no task list is stored. ``b_order`` as
    for :func:`masked_tasks`."""
    xp = get_array_module(m_keys, m_bitmaps, a_keys, a_bitmaps, b_keys, b_bitmaps)
    bt_keys, b_order = column_order(b_keys, b_order)
    a_range, b_range = masked_ranges(m_keys, a_keys, bt_keys)
    n = m_keys.shape[0]
    if xp is np:
        from .count import pair_counts

        owner, x, y = _masked_matches(m_keys, a_keys, bt_keys, a_range)
        c_ptr = np.zeros(n + 1, dtype=np.int64)
        c_ptr[1:] = np.cumsum(np.bincount(owner, minlength=n))
        return pair_counts(a_bitmaps, b_bitmaps, x, b_order[y], c_ptr, m_bitmaps)
    c_pairs = xp.empty(n, dtype=xp.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_tasks_count_masked_pairs")
    _kernels.launch(kernel, _WARP * n, (m_keys, m_bitmaps, n, a_keys, a_bitmaps, bt_keys,
                                        b_order, b_bitmaps, a_range, b_range, c_pairs))
    return c_pairs


def _masked_matches(m_keys: np.ndarray, a_keys: np.ndarray, bt_keys: np.ndarray,
                    a_range: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (mask block, A block, bt_keys entry) with a shared j, in the kernels' order."""
    shift, low = np.uint64(KEY_SHIFT), np.uint64(COL_MASK)
    n = m_keys.shape[0]
    a0, a1 = a_range[:n], a_range[n:]
    lengths = a1 - a0
    owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
    x = np.repeat(a0 - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
    want = ((m_keys[owner] & low) << shift) | (a_keys[x] & low)
    y = np.searchsorted(bt_keys, want)
    found = y < bt_keys.shape[0]
    found[found] = bt_keys[y[found]] == want[found]
    return owner[found], x[found].astype(np.int64), y[found].astype(np.int64)


class RowStats(NamedTuple):
    """Block rows of A in the task list (the GPU's choice of sort)."""

    ntasks: int
    row_first: Any = None   # int64 [a_nblocks]: first task of each A block's row
    rows: Any = None        # int64 [2 * a_nblocks]: A blocks [a0, a1) of each row, as
    #                         pairs, in any order (the first nrows pairs)
    nrows: int = 0          # non-empty block rows
    heavy_rows: int = 0     # heavy block rows (see heavy_tasks)
    max_span: int = 0       # most tasks of one block row
    long_tasks: int = 0     # tasks of block rows longer than a sort chunk
    heavy_tasks: int = 0    # tasks of block rows of more than RANK_MAX_RUNS A blocks
    #                         or RANK_MAX_TASKS tasks


def _rows(xp: Any, a_keys: Any, ends: Any, counts: Any, a_ptr: Any,
          spans: tuple[Any, Any, Any] | None) -> RowStats:
    """Number of tasks and, on the GPU, the block-row figures that pick the sort
    (``a_ptr``: A's block-row pointer, or None; ``spans``: the spans kernel's
    outputs, zeroed stats included, as :func:`ranges` allocates them; None
    on the host)."""
    if ends.shape[0] == 0:
        return RowStats(0)
    if xp is np:
        return RowStats(int(ends[-1]))
    n = a_keys.shape[0]
    row_first, rows, stats = spans
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_tasks_spans")
    i64 = np.int64
    _kernels.launch(kernel, n, (a_keys, i64(n), ends, counts, _kernels.or_null(a_ptr),
                                i64(_primitives.SORT_CHUNK), *map(i64, _limits()), row_first,
                                rows, stats), cast=False)
    # sync: one read
    ntasks, max_span, long_tasks, heavy, nrows, heavy_rows = _readback.read_head(stats, 6)
    return RowStats(ntasks, row_first, rows, nrows, heavy_rows, max_span, long_tasks, heavy)


def _limits() -> tuple[int, int]:
    """``RANK_MAX_RUNS`` and ``RANK_MAX_TASKS`` as the rank kernel can take them."""
    return min(RANK_MAX_RUNS, _WARP), min(RANK_MAX_TASKS, _RANK_CAP)


def merge(ends: Any, lo: Any, counts: Any, a_keys: Any, b_keys: Any, rows: RowStats,
          col_bits: int, task_bits: int) -> tuple[Any, Any, Any]:
    """Sorted task_a, task_b (int64) and output keys (uint64), GPU only.

    The tasks of light block rows are ranked (a warp per row); heavy rows are
    sorted in shared memory, a thread block per row, when no row has more
    than ``HEAVY_SORT_TASKS`` tasks, else by one global sort of their codes.
    """
    n, na = rows.ntasks, a_keys.shape[0]
    in_blocks = rows.max_span <= min(HEAVY_SORT_TASKS, _HEAVY_CAP)
    # the heavy rows (or codes), then their counter: rows list them (reserve
    # ranges of codes) in any order, as the codes get sorted. The output keys
    # may become the product's (run_heads): an allocation of their own
    nheavy = rows.heavy_rows if in_blocks else rows.heavy_tasks
    task_a, task_b, heavy = _kernels.device_arrays(
        (n, np.int64), (n, np.int64), (nheavy + 1, np.int64 if in_blocks else np.uint64),
        zeroed=1)
    keys = _kernels.device_empty(n, np.uint64)
    listed, appended = heavy[:nheavy], heavy[nheavy:]
    null, i64 = _kernels.NULL, np.int64
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_tasks_rank")
    _kernels.launch(kernel, _WARP * rows.nrows, (
        ends, lo, counts, a_keys, b_keys, rows.rows, i64(rows.nrows), *map(i64, _limits()),
        i64(col_bits), i64(task_bits), task_a, task_b, keys, null if in_blocks else listed,
        appended, listed if in_blocks else null), cast=False)
    if nheavy and in_blocks:
        kernel = _kernels.get_kernel(_KERNELS, "bmsparse_tasks_sort_heavy")
        _kernels.launch(kernel, nheavy * _HEAVY_THREADS, (
            ends, lo, counts, a_keys, b_keys, rows.rows, listed,
            i64(min(HEAVY_CACHED_RUNS, _HEAVY_RUNS)), task_a, task_b, keys),
            block=_HEAVY_THREADS, cast=False)
    elif nheavy:
        listed.sort()
        kernel = _kernels.get_kernel(_KERNELS, "bmsparse_tasks_place_heavy")
        _kernels.launch(kernel, nheavy, (listed, nheavy, ends, na, lo, counts,
                                         rows.row_first, col_bits, task_bits, task_a, task_b,
                                         keys))
    return task_a, task_b, keys


def ranges(a_keys: Any, b_keys: Any, b_ptr: Any = None, scan: bool = False) -> tuple[Any, ...]:
    """First B block of block row j and their count (int64), for each A block (i, j)
    (``b_ptr``: B's block-row pointer, or None); with ``scan`` also their
    inclusive scan, ``ends`` (on the GPU in the same launch), and the spans
    kernel's outputs for :func:`_rows` (None on the host)."""
    xp = get_array_module(a_keys, b_keys)
    if xp is np:
        j = (a_keys & np.uint64(COL_MASK)) << np.uint64(KEY_SHIFT)
        lo = np.searchsorted(b_keys, j, side="left")
        hi = np.searchsorted(b_keys, j | np.uint64(COL_MASK), side="right")
        lo, counts = lo.astype(np.int64), (hi - lo).astype(np.int64)
        return (lo, counts, np.cumsum(counts), None) if scan else (lo, counts)
    import cupy

    n = a_keys.shape[0]
    # lo, counts and ends in one allocation (an ndarray costs microseconds);
    # with the scan also the spans kernel's row_first and rows, then the
    # scan's state and the spans' stats, zeroed by one memset: the host time
    # between the first two launches is time the GPU waits
    nout = 3 if scan else 2
    words, ntiles = _primitives.scan_state_words(n)
    at = 6 * n if scan else nout * n  # the state's first word
    memory = cupy.cuda.alloc(8 * max(at + words + 6 if scan else at, 1))
    out: list[Any] = [_kernels.device_array(memory, 8 * k * n, n, np.int64)
                      for k in range(nout)]
    lo, counts = out[:2]
    if scan:
        state = memory + 8 * at
        state.memset_async(0, 8 * (words + 6))
        out.append((_kernels.device_array(memory, 8 * 3 * n, n, np.int64),
                    _kernels.device_array(memory, 8 * 4 * n, 2 * n, np.int64),
                    _kernels.device_array(state, 8 * words, 6, np.uint64)))
        scan_args = (out[2], np.uint64(state.ptr))
    else:
        scan_args = (_kernels.NULL, _kernels.NULL)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_tasks_ranges")
    _kernels.launch(kernel, ntiles * _primitives.SCAN_THREADS,
                    (a_keys, np.int64(n), b_keys, np.int64(b_keys.shape[0]),
                     _kernels.or_null(b_ptr), lo, counts, *scan_args, np.int64(ntiles)),
                    block=_primitives.SCAN_THREADS, cast=False)
    return tuple(out)


def expand(ends: Any, lo: Any, counts: Any, a_keys: Any, b_keys: Any, ntasks: int,
           col_bits: int, task_bits: int) -> Any:
    """Sort code (uint64 [ntasks]) of every task."""
    xp = get_array_module(ends, lo, counts, a_keys, b_keys)
    if xp is np:
        t = np.arange(ntasks, dtype=np.int64)
        a = np.searchsorted(ends, t, side="right")
        b = lo[a] + t - (ends[a] - counts[a])
        i = a_keys[a] >> np.uint64(KEY_SHIFT)
        k = b_keys[b] & np.uint64(COL_MASK)
        codes = (i << np.uint64(col_bits + task_bits)) | (k << np.uint64(task_bits))
        return codes | t.astype(np.uint64) if task_bits else codes
    codes = xp.empty(ntasks, dtype=xp.uint64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_tasks_expand")
    _kernels.launch(kernel, ntasks, (ends, lo, counts, a_keys, a_keys.shape[0], b_keys,
                                     ntasks, col_bits, task_bits, codes))
    return codes


def unpack(sorted_codes: Any, order: Any, task_bits: int, ends: Any, lo: Any,
           counts: Any) -> tuple[Any, Any]:
    """A block and B block (int64 [ntasks] each) of the sorted tasks."""
    xp = get_array_module(sorted_codes, order, ends, lo, counts)
    n = sorted_codes.shape[0]
    if xp is np:
        t = order if order is not None else (
            sorted_codes & np.uint64((1 << task_bits) - 1)).astype(np.int64)
        a = np.searchsorted(ends, t, side="right").astype(np.int64)
        b = lo[a] + t - (ends[a] - counts[a])
        return a, b
    task_a = xp.empty(n, dtype=xp.int64)
    task_b = xp.empty(n, dtype=xp.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_tasks_unpack")
    _kernels.launch(kernel, n, (sorted_codes, order if order is not None else np.uint64(0),
                                n, task_bits, ends, ends.shape[0], lo, counts, task_a,
                                task_b))
    return task_a, task_b


def run_heads(sorted_codes: Any, col_bits: int, task_bits: int,
              sized: bool = True) -> tuple[Any, ...]:
    """``c_keys`` (uint64 [c_nblocks]) and ``c_ptr`` (int64 [c_nblocks + 1]) of
    sorted codes: an output block starts where ``code >> task_bits`` changes.

    On the GPU one launch finds and numbers the starts (see ``tasks.cu``), and
    one sync reads their number: the arrays are views of ntasks-long buffers,
    or copies when those would be more than half unused (they live as long as
    the product; :func:`first_blocks`). Unless ``sized``: no sync, the
    buffers themselves, c_nblocks on the device (int64 [1]) and the output
    block of each task (int32 [n], or None from 2^31 tasks on) come back.
    """
    xp = get_array_module(sorted_codes)
    n = sorted_codes.shape[0]
    if xp is np:
        keys = sorted_codes >> np.uint64(task_bits)
        starts = np.flatnonzero(np.append(n > 0, keys[1:] != keys[:-1]))
        keys = keys[starts]
        c_keys = ((keys >> np.uint64(col_bits)) << np.uint64(KEY_SHIFT)) | (
            keys & np.uint64((1 << col_bits) - 1))
        return c_keys, np.append(starts, n).astype(np.int64)
    if n == 0:
        return xp.empty(0, dtype=xp.uint64), xp.zeros(1, dtype=xp.int64)
    c_ptr = xp.empty(n + 1, dtype=xp.int64)
    c_keys = xp.empty(n, dtype=xp.uint64)
    state, ntiles = _primitives.scan_state(n)
    report = _readback.host_words(1) if sized else None
    on_device = xp.empty(1, dtype=xp.int64) if report is None else None
    # the count by tasks' blocks, which die with the count (its own allocation)
    task_block = _kernels.device_empty(n, np.int32) if not sized and n < 1 << 31 else None
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_tasks_run_heads")
    i64 = np.int64
    _kernels.launch(kernel, ntiles * _primitives.SCAN_THREADS, (
        sorted_codes, i64(n), i64(col_bits), i64(task_bits), np.uint64(state.ptr), i64(ntiles),
        c_ptr, c_keys, np.uint64(report) if on_device is None else on_device,
        _kernels.or_null(task_block)), block=_primitives.SCAN_THREADS, cast=False)
    if not sized:
        return c_keys, c_ptr, on_device, task_block
    # sync: the number of output blocks
    c_nblocks = _readback.take_words(1)[0] if on_device is None else _readback.read_last(
        on_device)
    return first_blocks(c_keys, c_ptr, c_nblocks)


def first_blocks(c_keys: Any, c_ptr: Any, c_nblocks: int) -> tuple[Any, Any]:
    """The first ``c_nblocks`` keys and ``c_nblocks + 1`` pointers of run
    heads' buffers (:func:`front`)."""
    return front(c_keys, c_nblocks), front(c_ptr, c_nblocks + 1)


def front(array: Any, n: int) -> Any:
    """``array[:n]``: a view, or a copy when the view would leave more than
    half of ``array`` unused (:func:`half_unused`)."""
    return array[:n].copy() if half_unused(n, array.shape[0]) else array[:n]


def half_unused(n: int, length: int) -> bool:
    """True when the first ``n`` items of an array of ``length``, kept as a
    view, would leave more than half of it unused: the rule for copying them
    out instead (musae_git: 11.3 M output blocks of 30.9 M tasks; such arrays
    live as long as the product, or as C)."""
    return 2 * n < length

