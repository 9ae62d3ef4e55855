"""The lean path: a whole small product in one launch and one sync.

A small product costs host time, not GPU time: the dense path
(:mod:`.rowdense`, then :mod:`.multiply`) is four launches of 8-19 us and
two syncs around a few microseconds of kernels. Here two cooperative
launches (``lean.cu``) run the same passes, separated by grid barriers: the
dense accumulator's count, a scan and its blocks pass, then the multiply
and, when values cancel, the compaction (a kernel of its own, for the
threads in flight the multiply needs). C is written into a workspace kept
for the next product (per thread, device and stream); the kernels write C's
size to host memory, one sync reads it, and one copy moves C into memory of
its own size. C is bit for bit the dense path's.

:func:`chooses` picks it for products the dense path takes whose operands
have at most ``MAX_BLOCKS`` blocks each; the workspace grows up to
``MAX_WORKSPACE`` bytes. A product whose C turns out larger runs the dense
path instead (its count, done here, is then repeated); A remembers that B
(by ``id``), so the same product takes the dense path at once next time.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .. import _kernels, _readback
from .._format import nblocks_along
from .._matrix import BitmapMatrix
from .._sputils import get_array_module
from ..semiring import Semiring
from . import compact, multiply, rowdense, rowmerge

_KERNELS = "spgemm/lean.cu"
_kernels.register(_KERNELS, {"bmsparse_lean_blocks": (), "bmsparse_lean_values": ("T", "S")})

#: operands of at most this many blocks each take the lean path (when the
#: dense path would take the product); see benchmarks/NOTES.md, session 14
MAX_BLOCKS = 1 << 15

#: bytes the workspace may grow to: C, its pairs and its compacted copy, and
#: the count's sizes (a product needing more takes the dense path)
MAX_WORKSPACE = 32 << 20

#: bytes of a new workspace
_FIRST_WORKSPACE = 1 << 20

_local = threading.local()

#: the kernels' ``long long`` arguments as NumPy scalars, built once where
#: small (building one costs a few hundred nanoseconds of host time)
_INT64 = tuple(np.int64(v) for v in range(1 << 10))


def chooses(a: Any, b: Any) -> bool:
    """True when ``a @ b`` (no mask, a semiring with values) takes this path:
    on the GPU, when both operands have at most
    ``MAX_BLOCKS`` blocks and A at least one block row, and the dense path
    would take it (:func:`rowdense.chooses`)."""
    if a.nblocks > MAX_BLOCKS or b.nblocks > MAX_BLOCKS or a.shape[0] <= 0:
        return False
    too_large = a._derived("lean_need")  # set by product, rarely
    return ((too_large is None or too_large.get(id(b), 0) <= MAX_WORKSPACE)
            and rowdense.chooses(a, b))


def product(a: BitmapMatrix, b: BitmapMatrix, semiring: Semiring, dtype: np.dtype,
            drop_zeros: bool) -> BitmapMatrix | None:
    """``a @ b`` in ``semiring``, or None when C needs more than ``MAX_WORKSPACE``
    or the device cannot write host memory (the caller takes the dense path).

    Parameters
    ----------
    a, b : BitmapMatrix
        Shapes (m, k) and (k, n), values already of ``dtype`` when the
        semiring reads them; on the GPU, a product :func:`chooses` takes.
    semiring : Semiring
        Not a structural one (C has values).
    dtype : dtype
        C's.
    drop_zeros : bool
        Drop the entries that are exactly zero.

    Returns
    -------
    BitmapMatrix or None
        (m, n). On the host, the dense path's NumPy twins in turn (the row
        merge's, the multiply's, the compaction's).

    Notes
    -----
    On the GPU: two launches, one sync and one device-to-device copy; four
    launches and two syncs when the workspace first has to grow. The blocks
    pass ranks pairs by masks of A's blocks where they fit
    (:func:`rowdense.mask_words`, from A's longest row, which
    :func:`chooses` has read).
    """
    shape = (a.shape[0], b.shape[1])
    if get_array_module(a.keys, b.keys) is np:
        return _product_numpy(a, b, semiring, dtype, drop_zeros, shape)
    if not shape[0]:
        # (outside chooses(): the kernels write C's last offset from a block
        # row, so a C of no rows would keep an unwritten one; the caller
        # takes another path)
        return None
    import cupy

    threads = rowdense.THREADS
    nbrows = nblocks_along(shape[0])
    span = rowdense.column_units(nblocks_along(shape[1]))[1]
    # from A's longest row, read (and kept with A) by rowdense.chooses
    masks = rowdense.mask_words(a, span)
    shared = rowdense.shared_bytes(span, False, masks)
    blocks = _kernels.get_kernel(_KERNELS, "bmsparse_lean_blocks")
    values = _kernels.get_kernel(_KERNELS, "bmsparse_lean_values", T=dtype, S=semiring.functor)
    grids = (min(nbrows, _kernels.resident_blocks(blocks, threads, shared)),
             # a thread per value where the GPU holds them (C has 2-11 times
             # A's values in the corpus's small products): fewer threads than
             # values take rounds, one after the other
             min(-(-16 * (a.nnz + b.nnz) // threads) + 1,
                 _kernels.resident_blocks(values, threads)))
    a_bitmaps, b_bitmaps = a.bitmaps, b.bitmaps
    operands = (a.offsets, a.values, b.offsets, b.values) if semiring.reads_values \
        else (_kernels.NULL,) * 4
    nbrows_arg = _int64(nbrows)
    head = (a.keys, a_bitmaps, a._row_pointer(), nbrows_arg, _INT64[1], _int64(span),
            *rowmerge.block_rows(b))
    flag = _INT64[1] if drop_zeros else _INT64[0]  # the kernels test it for non-zero
    value_size, masks_arg = _int64(dtype.itemsize), _int64(masks)
    need = 8 * (6 * nbrows + 1)
    while True:
        space, report = _workspace(need, max(grids)), _readback.host_words(4)
        if space is None or report is None:
            # kept with A, so that the next a @ b goes to the dense path at
            # once (not after a count that finds C too large again)
            too_large = a._derived("lean_need")
            if too_large is None:
                too_large = a._keep("lean_need", {}, device=False)
            too_large[id(b)] = need
            return None
        tail = space.arguments(report)
        _kernels.launch(blocks, grids[0] * threads, (*head, value_size, flag, *tail, masks_arg),
                        block=threads, shared_mem=shared, cooperative=True, cast=False)
        _kernels.launch(values, grids[1] * threads,
                        (a_bitmaps, operands[0], operands[1], b_bitmaps, operands[2],
                         operands[3], nbrows_arg, flag, *tail),
                        block=threads, cooperative=True, cast=False)
        need, c_nblocks, nnz, at = _readback.take_words(4)  # sync: C's size
        if not need:
            break
    values_at = _values_at(c_nblocks)
    size = values_at + nnz * dtype.itemsize
    memory = cupy.cuda.alloc(size)
    runtime = cupy.cuda.runtime
    # on the workspace's stream (key[1]), the current one
    runtime.memcpyAsync(memory.ptr, space.out.ptr + at, size, runtime.memcpyDeviceToDevice,
                        space.key[1])
    c_values = _kernels.device_array(memory, values_at, nnz, dtype)
    return BitmapMatrix._from_blocks(*_kernels.block_arrays(memory, c_nblocks), c_values, shape,
                                     nnz=nnz)


def _int64(value: int) -> np.int64:
    """``np.int64(value)``, from :data:`_INT64` where it holds it."""
    return _INT64[value] if 0 <= value < len(_INT64) else np.int64(value)


def _values_at(c_nblocks: int) -> int:
    """Byte offset of the values in a packed C (``lean_values_at`` of lean.cu)."""
    return (24 * c_nblocks + 8 + 15) & ~15


class _Workspace:
    """A thread's device memory for the kernels: ``out`` (``capacity`` bytes)
    and ``work`` (the barrier, the zero count and ``grid`` thread blocks' sums,
    zeroed once)."""

    def __init__(self, capacity: int, grid: int, key: tuple[int, int]):
        import cupy

        self.key, self.capacity, self.grid = key, capacity, grid
        self.out = cupy.cuda.alloc(capacity)
        self.work = cupy.cuda.alloc(8 * (4 + grid))
        self.work.memset_async(0, 8 * (4 + grid))
        self._report: int | None = None
        self._arguments: tuple[Any, ...] = ()

    def arguments(self, report: int) -> tuple[Any, ...]:
        """The kernels' last arguments: ``capacity``, ``out``, ``work`` and
        ``report`` (from :func:`_readback.host_words`), as NumPy scalars built
        once per report buffer."""
        if report != self._report:
            self._arguments = (np.int64(self.capacity), np.uint64(self.out.ptr),
                               np.uint64(self.work.ptr), np.uint64(report))
            self._report = report
        return self._arguments


def _workspace(need: int, grid: int) -> _Workspace | None:
    """This thread's workspace on the current device and stream, with at least
    ``need`` bytes and room for ``grid`` thread blocks; None beyond
    ``MAX_WORKSPACE``. A workspace serves one stream: C is copied out of it
    on that stream, after which the next kernel there may overwrite it."""
    import cupy

    if need > MAX_WORKSPACE:
        return None
    key = (cupy.cuda.runtime.getDevice(), cupy.cuda.get_current_stream().ptr)
    space = getattr(_local, "space", None)
    if space is None or space.key != key or space.capacity < need or space.grid < grid:
        capacity = max(need, _FIRST_WORKSPACE, 0 if space is None or space.key != key
                       else space.capacity)
        # whole 64 KiB steps, so that a growing product reallocates rarely
        capacity = min(-(-capacity // (1 << 16)) << 16, MAX_WORKSPACE)
        grid = max(grid, 0 if space is None else space.grid)
        _local.space = None  # the old one goes back to the pool first
        space = _local.space = _Workspace(capacity, grid, key)
    return space


def _product_numpy(a: BitmapMatrix, b: BitmapMatrix, semiring: Semiring, dtype: np.dtype,
                   drop_zeros: bool, shape: tuple[int, int]) -> BitmapMatrix:
    merged = rowmerge._merge_numpy(a, b, True, None)
    c_values, zeros = multiply.multiply(
        a.bitmaps, a.offsets, a.values, b.bitmaps, b.offsets, b.values, merged.task_a,
        merged.task_b, merged.c_ptr, None, merged.c_bitmaps, merged.c_offsets, merged.nnz,
        semiring, dtype)
    arrays = (merged.c_keys, merged.c_bitmaps, merged.c_offsets, c_values)
    if drop_zeros:
        arrays = compact.compact(*arrays, None, zeros)
    return BitmapMatrix._from_blocks(*arrays, shape)
