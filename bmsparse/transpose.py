"""The transpose of a bitmap matrix, block by block (no COO round trip).

Block (i, j) becomes block (j, i) with its bitmap transposed, and its values
move inside the block to the transposed bit order. The output blocks are A's
blocks in column-major order: A's keys are sorted by (block row, block
column), so sorting the blocks of each block column by their index in A is
enough. That order and the block-column pointer, the column pointer of A,
are what the transposed products of :mod:`bmsparse.spmv` and the task list
use too; the matrix keeps them. See ``transpose.cu``.

On the GPU one cooperative launch does it all: for a matrix of few block
columns and few values a block (the graphs), a stable counting sort of the
blocks by tiles of A (each tile counts its columns in shared memory); for
others, a counting sort of the blocks by buckets of rows of each block
column; then the blocks and the values of A.T. Past their limits (2^32
blocks or values, or block columns far outnumbering blocks) a sort of the
block columns and three launches do.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np

from . import _kernels
from ._format import (BLOCK_SHIFT, COL_MASK, block_cols_of, block_rows_of, pack_keys,
                      popcount, set_bits, transpose_bitmaps, value_index)
from ._primitives import exclusive_scan, stable_argsort
from ._sputils import get_array_module

_KERNELS = "transpose.cu"
_kernels.register(_KERNELS, {"bmsparse_transpose_columns": ("T",),
                             "bmsparse_transpose_tiles": ("T",),
                             "bmsparse_transpose_counts": (),
                             "bmsparse_transpose_outputs": ("T",)})
THREADS = 512  # BMSPARSE_TRANSPOSE_THREADS
#: the one-launch kernel keeps counts of blocks and of values in the two
#: halves of a uint64, and allocates a counter per block column: beyond
#: these, the sort path
_MAX_COUNT = (1 << 32) - 1
_MAX_COLUMNS_PER_BLOCK = 8
_MIN_COLUMNS = 1 << 20
#: the one-launch kernel cuts block columns into buckets of 2^g block rows,
#: at most this many per block of A in all (see :func:`bucket_shift`)
BUCKETS_PER_BLOCK = 2
#: from this many buckets on (4 MiB of counters), the one-launch kernel keeps
#: their counters row group after row group, where its scattered atomics
#: stay in L2 (``slot`` in transpose.cu). H100, GPU time of the whole
#: kernel: surrogate (1.0 M buckets) 203-207 -> 175-176 us; by rows with
#: fewer buckets, 3-6% slower (email-Enron 330 K, musae_git 350 K, bcsstk33,
#: p2p-Gnutella31, wiki-Vote)
ROW_GROUP_COUNTERS = 1 << 19
#: the last pass of both one-launch kernels (the blocks and values of A.T,
#: in its order): a warp takes as many consecutive output blocks as hold
#: about this many values (a power of two of them, at most 32; see
#: :func:`warp_blocks`), and moves them a value a lane. The bucket kernel
#: has a warp for each such run where it can (a thread per block or bucket
#: for the other passes). H200, `A.T` in a loop, us, against a pass of 8
#: threads an output block: surrogate 136.4 -> 124.4 (ncu: transpose.cu's
#: write_blocks_by_warps)
WARP_VALUES = 256
#: The tiles kernel (bmsparse_transpose_tiles) cuts A's blocks into one tile
#: per thread block and counts a tile's blocks per block column in shared
#: memory (8 bytes a column, up to TILE_COLUMNS columns), then scans a
#: count per tile and column (tiles x block columns). Its tiles have at
#: least TILE_BLOCKS blocks, and are fewer where the counts would outnumber
#: the blocks TILE_COUNTERS times; past TILE_MOST_BLOCKS blocks a tile, or
#: TILE_VALUES values a block on average, the bucket kernel is faster. ncu,
#: H200, against the bucket kernel: see benchmarks/NOTES.md, session 37;
#: since both end with the same last pass, TILE_VALUES 64 would take
#: Groebner_id2003_aug from 34.3 to 30.1 us, but mhd1280b from 26.3 to 36.3
#: and bayer10 from 30.7 to 37.3 (session 46). Where it takes A, it has as
#: many tiles as leave TILE_GRID_COUNTERS counts per block (still at least
#: TILE_BLOCKS blocks a tile, all resident): more warps for the count and
#: place passes, which wait on memory, against more counts to scan. ncu,
#: H200, us, against the grid TILE_COUNTERS gives (session 47): musae_git
#: 53.4 -> 48.9, email-Enron 47.8 -> 46.9, ca-CondMat 37.7 -> 40.0; with 4
#: counts a block, email-Enron 51.4 and ca-CondMat 38.3
TILE_COLUMNS = 1 << 14
TILE_BLOCKS = 512
TILE_COUNTERS = 3
TILE_GRID_COUNTERS = 6
TILE_MOST_BLOCKS = 2048
TILE_VALUES = 6


def column_order(keys: Any) -> Any:
    """Permutation (int64 [nblocks]) putting blocks in (block column, block row) order.

    Keys are sorted by row, so a stable sort of the block columns (32-bit:
    half the radix passes of a sort of the swapped 64-bit keys) is enough.
    """
    xp = get_array_module(keys)
    return stable_argsort(xp, (keys & xp.uint64(COL_MASK)).astype(xp.uint32))


def column_pointer(keys: Any, nbrows: int, nbcols: int) -> tuple[Any, Any]:
    """A's blocks in column-major order and its block-column pointer.

    Parameters
    ----------
    keys : uint64 [nblocks]
        C-contiguous.
    nbrows, nbcols : int
        Block rows and block columns of A.

    Returns
    -------
    order : int64 [nblocks]
        :func:`column_order` of ``keys``.
    ptr : int64 [nbcols + 1]
        The blocks of block column c are ``order[ptr[c]:ptr[c + 1]]``.
    """
    xp = get_array_module(keys)
    if xp is not np and _one_launch(keys.shape[0], 0, nbcols):
        return _columns_cuda(keys, None, None, None, nbrows, nbcols)[4]
    order = column_order(keys)
    cols = block_cols_of(keys)[order]
    ptr = xp.searchsorted(cols, xp.arange(nbcols + 1, dtype=xp.int64)).astype(xp.int64)
    return order, ptr


def transpose(keys: Any, bitmaps: Any, offsets: Any, values: Any, nnz: int, nbrows: int,
              nbcols: int, column: tuple[Any, Any] | None = None) -> tuple[Any, ...]:
    """Blocks of the transpose.

    Parameters
    ----------
    keys, bitmaps : uint64 [nblocks]
    offsets : int64 [nblocks + 1]
    values : T [nnz] or None
        One matrix's arrays: on one device and C-contiguous, as a
        BitmapMatrix's are (only the keys are checked; the GPU kernel is
        launched without checking).
    nnz : int
        Values of A (``offsets[-1]``), or a bound of them (64 a block) when
        they are not known on the host: the one-launch kernel needs fewer
        than 2^32.
    nbrows, nbcols : int
        Block rows and block columns of A.
    column : (order, ptr), optional
        :func:`column_pointer` of ``keys``, when already known (the
        one-launch kernel makes it again: it costs nothing more there).

    Returns
    -------
    t_keys, t_bitmaps : uint64 [nblocks]
    t_offsets : int64 [nblocks + 1]
    t_values : T [nnz] or None
    column : (order, ptr), ColumnPointer or None
        :func:`column_pointer` of ``keys``, to keep with A: from the
        one-launch kernel a :class:`ColumnPointer` (arrays once read); None
        for a :func:`hypersparse` A, whose pointer would scale with its shape.

    Notes
    -----
    O(nblocks + nbcols + nnz) work and the sort of each block column; no
    sync. Values are only moved.
    """
    # (one matrix's arrays, on one device: the keys tell which)
    xp = get_array_module(keys)
    if xp is not np and _one_launch(keys.shape[0], nnz, nbcols):
        return _columns_cuda(keys, bitmaps, offsets, values, nbrows, nbcols, lazy=True)
    if column is not None:
        order = column[0]
    elif hypersparse(keys.shape[0], nbcols):
        order = column_order(keys)
    else:
        column = column_pointer(keys, nbrows, nbcols)
        order = column[0]
    if xp is np:
        return (*_transpose_numpy(keys, bitmaps, offsets, values, order), column)
    return (*_transpose_cuda(keys, bitmaps, offsets, values, order), column)


def _one_launch(nblocks: int, nnz: int, nbcols: int) -> bool:
    """True when the one-launch kernel takes A (see ``_MAX_COUNT``)."""
    return (nblocks <= _MAX_COUNT and nnz <= _MAX_COUNT and not hypersparse(nblocks, nbcols)
            and nbcols <= _MAX_COUNT)


def hypersparse(nblocks: int, nbcols: int) -> bool:
    """True when A's block columns far outnumber its blocks: a block-column
    pointer (``nbcols + 1`` words) would cost more than the blocks, so the
    transpose places blocks by their column order alone."""
    return nbcols > max(_MAX_COLUMNS_PER_BLOCK * nblocks, _MIN_COLUMNS)


def bucket_shift(nblocks: int, nbrows: int, nbcols: int) -> int:
    """log2 of the block rows in a bucket of the one-launch kernel.

    The least g that leaves at most ``BUCKETS_PER_BLOCK * nblocks`` buckets
    of 2^g block rows (or one bucket per column): buckets are what that
    kernel sorts, so a hub column is cut into short sorts and a matrix of
    few block rows needs none (a bucket per block row); the buckets' counters
    are zeroed and scanned. There are at most 2^32 - 1 buckets: the kernel
    numbers them in 32 bits.
    """
    most_groups = max(min(BUCKETS_PER_BLOCK * nblocks, _MAX_COUNT) // max(nbcols, 1), 1)
    least_rows = -(-max(nbrows, 1) // most_groups)
    return (least_rows - 1).bit_length()


def warp_blocks(nblocks: int, nvalues: int | None) -> int:
    """Output blocks a warp of the last pass takes at a time: the largest
    power of two up to 32 whose blocks hold at most ``WARP_VALUES`` values
    on average (at least 1)."""
    blocks = 32
    while blocks > 1 and nvalues is not None and blocks * nvalues > WARP_VALUES * nblocks:
        blocks //= 2
    return blocks


_SIZES = ("nblocks", "nbcols", "groups", "group_shift", "by_rows", "warp_blocks", "outputs")


def _arguments(*names: str) -> np.dtype:
    """The arguments of a one-launch kernel, as packed by its
    :class:`_kernels.PreparedLaunch` (pointers as uint64)."""
    return np.dtype([(name, np.int64 if name in _SIZES else np.uint64) for name in names])


_HEADS = ("keys", "bitmaps", "offsets", "values")
_TAILS = ("t_keys", "t_bitmaps", "t_offsets", "t_values")
_COLUMNS_ARGS = _arguments(*_HEADS, *_SIZES, "bar", "work", "ptr", "placed", "order",
                           *_TAILS)
_TILES_ARGS = _arguments(*_HEADS, "nblocks", "nbcols", "warp_blocks", "outputs", "bar", "work",
                         "ptr", "order", *_TAILS)


class _Plan(NamedTuple):
    """What a launch of bmsparse_transpose_columns needs but its arrays."""

    launch: Any  # _kernels.PreparedLaunch
    grid: int
    tiles: bool  # bmsparse_transpose_tiles (else bmsparse_transpose_columns)
    # the kernel's arguments between A's arrays and `outputs`: nblocks,
    # nbcols, for the bucket kernel groups, group_shift and by_rows, and
    # warp_blocks
    sizes: tuple[int, ...]
    placed: int  # the bucket kernel's `placed`: its byte in the scratch
    scratch: int  # bytes of scratch in all (none zeroed: the kernels clear
    # what they count in, and their barrier is the stream's)


@functools.lru_cache(maxsize=64)
def _plan(nblocks: int, nbrows: int, nbcols: int, nvalues: int | None, dtype: np.dtype,
          device: int) -> _Plan:
    """The plan of ``_columns_cuda`` for these sizes on ``device`` (the
    current one), kept for the matrices transposed last: it took a few
    microseconds of a small transpose's host time."""
    per_warp = warp_blocks(nblocks, nvalues)
    if 0 < nbcols <= TILE_COLUMNS and (nvalues is None or nvalues <= TILE_VALUES * nblocks):
        kernel = _kernels.get_kernel(_KERNELS, "bmsparse_transpose_tiles", T=dtype)
        shared = 8 * nbcols
        most = min(_kernels.resident_blocks(kernel, THREADS, shared), -(-nblocks // TILE_BLOCKS))
        grid = min(most, TILE_COUNTERS * nblocks // nbcols)
        if grid > 0 and grid * TILE_MOST_BLOCKS >= nblocks:
            grid = min(most, max(grid, TILE_GRID_COUNTERS * nblocks // nbcols))
            # the thread blocks' sums and the tiles' counts
            launch = _kernels.PreparedLaunch(kernel, (), _TILES_ARGS, block=THREADS,
                                             shared_mem=shared, cooperative=True)
            return _Plan(launch, grid, True, (nblocks, nbcols, per_warp), 0,
                         8 * (grid + grid * nbcols))
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_transpose_columns", T=dtype)
    shift = bucket_shift(nblocks, nbrows, nbcols)
    groups = max(-(-nbrows >> shift), 1)
    nbuckets = nbcols * groups
    # a thread per block or bucket (the passes' loops), or a warp per run of
    # the last pass, at most all resident
    threads = max(nblocks, nbuckets)
    if nvalues is not None:
        threads = max(threads, 32 * -(-nblocks // per_warp))
    grid = min(_kernels.resident_blocks(kernel, THREADS), max(-(-threads // THREADS), 1))
    # the bucket counters and the counts of the listed buckets (cleared by
    # the kernel), the thread blocks' sums, then `placed` and the two lists
    # of the buckets pass 4 sorts or ranks by warps (more than
    # BMSPARSE_TRANSPOSE_SHORT = 6 blocks each: nblocks / 4 + 1 places each
    # leave room for a SHORT of 3)
    placed = 8 * (nbuckets + 1 + grid)
    launch = _kernels.PreparedLaunch(kernel, (), _COLUMNS_ARGS, block=THREADS, cooperative=True)
    return _Plan(launch, grid, False,
                 (nblocks, nbcols, groups, shift, int(nbuckets >= ROW_GROUP_COUNTERS), per_warp),
                 placed,
                 placed + 4 * (nblocks + 2 * (nblocks // 4 + 1)))


class ColumnPointer:
    """A's column order and pointer (:func:`column_pointer`) as the one-launch
    kernel wrote them, made arrays when first read: a transpose whose
    products never read them makes no array object (about 2 us each)."""

    __slots__ = ("_memory", "_nblocks", "_nbcols", "_arrays")

    def __init__(self, memory: Any, nblocks: int, nbcols: int) -> None:
        self._memory, self._nblocks, self._nbcols = memory, nblocks, nbcols
        self._arrays: tuple[Any, Any] | None = None

    def arrays(self) -> tuple[Any, Any]:
        """(order int64 [nblocks], ptr int64 [nbcols + 1])."""
        if self._arrays is None:
            self._arrays = (_kernels.device_array(self._memory, 0, self._nblocks, _kernels._INT64),
                            _kernels.device_array(self._memory, 8 * self._nblocks,
                                                  self._nbcols + 1, _kernels._INT64))
        return self._arrays


def _columns_cuda(keys, bitmaps, offsets, values, nbrows, nbcols, lazy=False):
    """``bmsparse_transpose_columns``: (t_keys, t_bitmaps, t_offsets, t_values,
    column), the first four None without ``bitmaps``; ``column`` (order, ptr),
    or with ``lazy`` a :class:`ColumnPointer`. The arrays must be
    C-contiguous (a BitmapMatrix's are): the launch does not check them."""
    nblocks = keys.shape[0]
    if _kernels._GET_DEVICE is None:
        _kernels.bind_cupy()
    plan = _plan(nblocks, nbrows, nbcols, None if values is None else values.shape[0],
                 np.dtype(np.float64) if values is None else values.dtype,
                 _kernels._GET_DEVICE())
    # raw memory (an ndarray costs microseconds), the arrays made after the
    # launch, while the kernel runs; one allocation per group that lives and
    # dies together: the scratch; A's column order and pointer; A.T's blocks
    # and values (after its index arrays, at a multiple of 256 bytes)
    work = _kernels._ALLOC(plan.scratch)
    column = _kernels._ALLOC(8 * (nblocks + nbcols + 1))
    at_values = -(-8 * (3 * nblocks + 1) // 256) * 256
    blocks = None if bitmaps is None else _kernels._ALLOC(
        at_values + (0 if values is None else values.nbytes))
    # a flag, not null pointers, tells the kernel which outputs to write
    outputs = 0 if blocks is None else 1 if values is None else 2
    t_blocks = (0, 0, 0, 0) if blocks is None else \
        (blocks.ptr, blocks.ptr + 8 * nblocks, blocks.ptr + 16 * nblocks,  # block_arrays'
         0 if values is None else blocks.ptr + at_values)
    heads = (keys.data.ptr, 0 if bitmaps is None else bitmaps.data.ptr,
             0 if bitmaps is None else offsets.data.ptr, 0 if values is None else values.data.ptr)
    placed = () if plan.tiles else (work.ptr + plan.placed,)
    plan.launch(_kernels._CURRENT_STREAM().ptr, plan.grid, (
        *heads, *plan.sizes, outputs, _kernels.barrier_words(), work.ptr,
        column.ptr + 8 * nblocks, *placed, column.ptr, *t_blocks))
    pointer = ColumnPointer(column, nblocks, nbcols)
    kept = pointer if lazy else pointer.arrays()
    if blocks is None:
        return None, None, None, None, kept
    return (*_kernels.block_arrays(blocks, nblocks),
            None if values is None else _kernels.device_array(blocks, at_values, values.shape[0],
                                                              values.dtype), kept)


def _transpose_cuda(keys, bitmaps, offsets, values, order):
    import cupy

    nblocks = keys.shape[0]
    counts = cupy.empty(nblocks, dtype=cupy.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_transpose_counts")
    _kernels.launch(kernel, nblocks, (bitmaps, order, nblocks, counts))
    t_offsets = exclusive_scan(cupy, counts)
    t_keys = cupy.empty(nblocks, dtype=cupy.uint64)
    t_bitmaps = cupy.empty(nblocks, dtype=cupy.uint64)
    # (a pattern matrix: no values to read or write, of any type)
    t_values = None if values is None else cupy.empty_like(values)
    moved = (cupy.empty(0, cupy.float64),) * 2 if values is None else (values, t_values)
    per_warp = warp_blocks(nblocks, None if values is None else values.shape[0])
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_transpose_outputs", T=moved[0].dtype)
    _kernels.launch(kernel, 32 * -(-nblocks // per_warp),
                    (keys, bitmaps, offsets, moved[0], order, nblocks, int(values is not None),
                     per_warp, t_keys, t_bitmaps, t_offsets, moved[1]))
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
