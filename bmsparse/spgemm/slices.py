"""Memory-bounded SpGEMM: the product in slices of A's block rows.

Output block row i of ``A @ B`` depends on block row i of A alone, so the
product can run on contiguous ranges of A's block rows and the pieces be
concatenated. Each output block is computed exactly as in one pass (same
pairs, same order), so the result is bit for bit the unsliced one.

The plan charges each block row its task list (``tasks.BYTES_PER_TASK`` per
task, output block arrays included) and, for its values, the number of
multiplies of the row: an upper bound on its output non-zeros. The exact
size is known after a slice's count stage; a slice over budget there, or one
that runs out of device memory, is halved and retried, down to one block
row, which either fits or raises MemoryError saying what it needed.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np

from .. import _kernels
from .._matrix import BitmapMatrix
from .._sputils import check_max_memory, get_array_module, matmul_mismatch
from . import tasks

_KERNELS = "spgemm/slices.cu"
_kernels.register(_KERNELS, {"bmsparse_slices_block_needs": ()})

Product = Callable[[BitmapMatrix, BitmapMatrix, int], BitmapMatrix]


def device_budget(xp: Any, max_memory: int | None) -> int | None:
    """Bytes the product may use: ``max_memory``, capped on the GPU by free memory."""
    if xp is np:
        return max_memory
    import cupy

    free, _ = cupy.cuda.runtime.memGetInfo()
    free += cupy.get_default_memory_pool().free_bytes()
    return free if max_memory is None else min(free, max_memory)


def free_memory(xp: Any) -> Callable[[], int]:
    """:func:`device_budget` without a cap, asked of the driver at most once
    (a plain closure: wrapping a lambda in functools.cache costs a few
    microseconds per product, most of which never ask)."""
    known: list[int | None] = []

    def budget() -> int | None:
        if not known:
            known.append(device_budget(xp, None))
        return known[0]

    return budget


def plan_slices(a: BitmapMatrix, b: BitmapMatrix, max_memory: int,
                value_bytes: int = 0) -> list[tuple[int, int]]:
    """Ranges ``[first, last)`` of A's blocks, whole block rows each, within budget.

    Parameters
    ----------
    a, b : BitmapMatrix
    max_memory : int
        Bytes one slice may use.
    value_bytes : int
        Bytes charged per output value (0, the default, for a Boolean product).

    Returns
    -------
    list of (int, int)
        Consecutive block ranges covering all of A's blocks (one empty range
        for an empty A).

    Raises
    ------
    TypeError
        ``a`` or ``b`` is not a BitmapMatrix, ``max_memory`` not a number, or
        ``value_bytes`` not an integer.
    ValueError
        The inner dimensions differ, ``max_memory`` is below 1 byte, or
        ``value_bytes`` below 0.
    MemoryError
        One block row alone needs more than ``max_memory``.

    Notes
    -----
    Syncs once (the tasks of every block row come to the host).
    """
    if not isinstance(a, BitmapMatrix) or not isinstance(b, BitmapMatrix):
        raise TypeError(f"plan_slices plans a product of two BitmapMatrix operands, got "
                        f"{type(a).__name__} and {type(b).__name__}; convert them with "
                        f"BitmapMatrix(x)")
    if a.shape[1] != b.shape[0]:
        raise matmul_mismatch(a.shape, b.shape)
    if max_memory is None:
        raise TypeError("max_memory must be a number of bytes, got None")
    max_memory = check_max_memory(max_memory)
    value_bytes = _check_value_bytes(value_bytes)
    xp = get_array_module(a.keys, b.keys)
    if a.nblocks == 0:
        return [(0, 0)]
    lo, counts = tasks.ranges(a.keys, b.keys)
    need = block_needs(a.bitmaps, b.bitmaps, lo, counts, value_bytes)
    need = need.get() if xp is not np else need  # sync: the plan is made on the host
    keys = a.keys.get() if xp is not np else a.keys  # sync: as above
    rows = keys >> np.uint64(32)
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    ends = np.r_[starts[1:], a.nblocks]
    need = np.add.reduceat(need, starts)
    worst = int(np.argmax(need))
    if need[worst] > max_memory:
        raise _too_large(int(rows[starts[worst]]), int(need[worst]), max_memory)
    slices, first, used = [], 0, 0
    for start, end, bytes_ in zip(starts.tolist(), ends.tolist(), need.tolist()):
        if used and used + bytes_ > max_memory:
            slices.append((first, start))
            first, used = start, 0
        used += bytes_
    slices.append((first, a.nblocks))
    return slices


def _check_value_bytes(value_bytes: Any) -> int:
    """``value_bytes`` as a non-negative Python int (a float failed in NumPy's
    accumulation, a negative count shrank the charge)."""
    if isinstance(value_bytes, (bool, np.bool_)) or not isinstance(value_bytes, numbers.Integral):
        raise TypeError(f"value_bytes must be an integer, got {type(value_bytes).__name__}")
    if value_bytes < 0:
        raise ValueError(f"value_bytes must be at least 0, got {value_bytes}")
    return int(value_bytes)


def block_needs(a_bitmaps: Any, b_bitmaps: Any, lo: Any, counts: Any,
                value_bytes: int) -> Any:
    """Bytes charged to each A block (int64 [a_nblocks]): ``tasks.BYTES_PER_TASK``
    per task and ``value_bytes`` per scalar multiply (see ``slices.cu``)."""
    xp = get_array_module(a_bitmaps, b_bitmaps, lo, counts)
    if xp is np:
        need = counts * tasks.BYTES_PER_TASK
        if value_bytes:
            need += block_multiplies(a_bitmaps, b_bitmaps, lo, counts) * value_bytes
        return need
    n = a_bitmaps.shape[0]
    need = xp.empty(n, dtype=xp.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_slices_block_needs")
    _kernels.launch(kernel, n, (a_bitmaps, n, b_bitmaps, lo, counts, tasks.BYTES_PER_TASK,
                                value_bytes, need))
    return need


def block_multiplies(a_bitmaps: np.ndarray, b_bitmaps: np.ndarray, lo: np.ndarray,
                     counts: np.ndarray) -> np.ndarray:
    """Scalar multiplies of each A block with its B block row (int64 [a_nblocks]).

    Block A(i, j) meets rows 8j..8j+7 of B, which are B's blocks ``[lo, lo +
    counts)``: column c of A's block times the non-zeros of row 8j + c. The
    twin of ``slices.cu`` (on the GPU its prefix sums would take a few times
    the memory of B, more than a tight budget leaves).
    """
    byte_ones = np.uint64(0x0101010101010101)
    popcount8 = np.array([bin(v).count("1") for v in range(256)], dtype=np.int64)
    b_rows = np.zeros((b_bitmaps.shape[0] + 1, 8), dtype=np.int64)
    for r in range(8):
        b_rows[1:, r] = popcount8[(b_bitmaps >> np.uint64(8 * r)) & np.uint64(0xFF)]
    b_rows = np.cumsum(b_rows, axis=0)  # prefix sums over B's blocks, per local row
    run_rows = b_rows[lo + counts] - b_rows[lo]
    total = np.zeros(a_bitmaps.shape[0], dtype=np.int64)
    for c in range(8):
        # the bits of column c, one per byte, summed into the top byte
        column = ((a_bitmaps >> np.uint64(c)) & byte_ones) * byte_ones >> np.uint64(56)
        total += column.astype(np.int64) * run_rows[:, c]
    return total


def sliced_product(a: BitmapMatrix, b: BitmapMatrix, product: Product, max_memory: int,
                   output: str, value_bytes: int = 0) -> tuple[BitmapMatrix, int]:
    """``product`` over the planned slices, concatenated; and the number of slices.

    ``product(a_part, b, max_bytes)`` raises MemoryError when a slice needs
    more than ``max_bytes``. With ``output="host"`` every slice of C is copied
    to the host as soon as it is computed, so C may be larger than the device.
    """
    pieces: list[BitmapMatrix] = []
    for first, last in plan_slices(a, b, max_memory, value_bytes):
        _run(a, b, first, last, product, max_memory, output, pieces)
    xp = np if output == "host" else get_array_module(a.keys)
    count = len(pieces)
    # the product's dtype, which a semiring can make differ from A's
    return concatenate(xp, pieces, (a.shape[0], b.shape[1]), pieces[0].dtype), count


def _run(a: BitmapMatrix, b: BitmapMatrix, first: int, last: int, product: Product,
         max_memory: int, output: str, pieces: list[BitmapMatrix]) -> None:
    """One slice, halved (at a block row boundary) while it does not fit."""
    try:
        c = product(rows_of(a, first, last), b, max_memory)
    except MemoryError as exc:
        free_pool(get_array_module(a.keys))
        middle = _row_boundary(a, first, last)
        if middle is None:
            key = a.keys[first:first + 1]
            key = key.get() if not isinstance(key, np.ndarray) else key  # sync: error path
            row = int(key[0] >> np.uint64(32))
            raise _too_large(row, getattr(exc, "needed", None), max_memory) from None
        _run(a, b, first, middle, product, max_memory, output, pieces)
        _run(a, b, middle, last, product, max_memory, output, pieces)
        return
    pieces.append(c.get() if output == "host" else c)  # sync: streamed to the host


def _row_boundary(a: BitmapMatrix, first: int, last: int) -> int | None:
    """The block-row boundary nearest the middle of ``[first, last)``, if any."""
    keys = a.keys[first:last]
    keys = keys.get() if not isinstance(keys, np.ndarray) else keys  # sync: rare retry path
    rows = keys >> np.uint64(32)
    changes = np.flatnonzero(rows[1:] != rows[:-1]) + 1
    if changes.size == 0:
        return None
    return first + int(changes[np.argmin(np.abs(changes - (last - first) // 2))])


def rows_of(a: BitmapMatrix, first: int, last: int) -> BitmapMatrix:
    """A's blocks ``[first, last)`` as a matrix of A's shape (views, offsets rebased)."""
    if first == 0 and last == a.nblocks:
        return a
    base, top = (int(v) for v in (a.offsets[first], a.offsets[last]))  # sync: value range
    offsets = a.offsets[first:last + 1] - base
    values = None if a.values is None else a.values[base:top]
    return BitmapMatrix._from_blocks(a.keys[first:last], a.bitmaps[first:last], offsets, values,
                                     a.shape, a.dtype, top - base)


def concatenate(xp: Any, pieces: list[BitmapMatrix], shape: tuple[int, int],
                dtype: Any) -> BitmapMatrix:
    """Row slices of one matrix, in order, as one matrix.

    The pieces are consumed: each is released as soon as it is copied. On the
    GPU the pieces and C are briefly all on the device; when that does not
    fit, the pieces go to the host first and C is filled from there, so the
    peak is C plus one piece.
    """
    if len(pieces) == 1:
        return pieces.pop()
    try:
        return _joined(xp, pieces, shape, dtype)
    except MemoryError:
        if xp is np:
            raise
        for index, piece in enumerate(pieces):
            pieces[index] = piece.get()  # sync: the pieces wait on the host
        free_pool(xp)
        return _joined(xp, pieces, shape, dtype)


def _joined(xp: Any, pieces: list[BitmapMatrix], shape: tuple[int, int],
            dtype: Any) -> BitmapMatrix:
    """C on ``xp`` from its pieces (on either side), all allocated before any is
    consumed: a failed allocation leaves ``pieces`` whole."""
    nblocks = sum(p.nblocks for p in pieces)
    nnz = sum(p.nnz for p in pieces)
    keys = xp.empty(nblocks, dtype=xp.uint64)
    bitmaps = xp.empty(nblocks, dtype=xp.uint64)
    offsets = xp.empty(nblocks + 1, dtype=xp.int64)
    values = None if pieces[0].values is None else xp.empty(nnz, dtype=pieces[0].values.dtype)
    block, value = 0, 0
    while pieces:
        p = pieces.pop(0)
        keys[block:block + p.nblocks] = xp.asarray(p.keys)
        bitmaps[block:block + p.nblocks] = xp.asarray(p.bitmaps)
        offsets[block:block + p.nblocks] = xp.asarray(p.offsets[:-1]) + value
        if values is not None:
            values[value:value + p.nnz] = xp.asarray(p.values)
        block, value = block + p.nblocks, value + p.nnz
        del p
    offsets[nblocks] = nnz
    return BitmapMatrix._from_blocks(keys, bitmaps, offsets, values, shape, dtype, nnz)


def free_pool(xp: Any) -> None:
    """Return CuPy's cached blocks to the device (before slicing after an OOM)."""
    if xp is not np:
        xp.get_default_memory_pool().free_all_blocks()


def _too_large(row: int, needed: int | None, available: int | None) -> MemoryError:
    what = f"about {needed:,} bytes" if needed is not None else "more memory than is free"
    return MemoryError(f"spgemm: block row {row} of A alone needs {what} but only "
                       f"{available:,} bytes are available; raise max_memory or free device "
                       f"memory")
