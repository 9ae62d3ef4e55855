"""Stages 1 and 2 of SpGEMM by a merge per block row, for light block rows of A.

When no block row of A holds more than ``MAX_ROW_BLOCKS`` blocks, a group of
lanes per block row (8, 16, or a warp of 32 for rows of more than 16 blocks)
merges the block rows of B it meets (their keys are sorted by block column)
and so meets every output block C(i, k) in ascending k with its pairs in
hand (``_SHAPES``). No full task list is built or sorted; only the useful pairs (those
whose Boolean product is not empty) are written, and ``multiply`` takes them
as its task list. Two passes over the same merge (``rowmerge.cu``):

1. count: per unit (a block row, or a range of block columns of one, see
   :func:`units`), its non-empty output blocks, values and useful pairs; one
   exclusive scan of the three (one array), one read of the totals;
2. blocks: C's keys, bitmaps, value offsets and useful pairs, written in
   place.

That is three launches and one sync before the multiply, where the task
list takes about eight launches and three syncs: the path for small
products, whose cost is fixed overhead, and for graphs with one or two
entries per block, whose task lists are several times their multiplies.
:func:`chooses` says which path a product takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .. import _kernels
from .._format import COL_MASK, KEY_SHIFT, nblocks_along, popcount
from .._primitives import exclusive_scan, scan_totals
from .._sputils import get_array_module

_KERNELS = "spgemm/rowmerge.cu"
#: (lanes per block row, cursors per lane) of the kernels, the narrowest
#: first: a row of up to lanes * cursors A blocks. Fewer cursors take fewer
#: registers, so more rows run at once. Measured (H100, spgemm A @ A, ms),
#: rows of 9-16 blocks by 16 lanes / a warp / 8 lanes of 2 cursors: 3d-7pt
#: (rows of up to 11) 2.15 / 2.61 / 2.76, 2d-9pt (9) 1.70 / 1.96 / 2.02
_SHAPES = ((8, 1), (16, 1), (32, 1), (32, 2), (32, 4))

_kernels.register(_KERNELS, {f"bmsparse_rowmerge_{stage}_{g}_{c}": ()
                             for stage in ("count", "blocks") for g, c in _SHAPES})

#: longest block row of A (in blocks) the merge takes: a warp's 32 lanes with
#: 4 cursors each (see ``_SHAPES``)
MAX_ROW_BLOCKS = 128

#: rows of more than ``SHORT_ROW_BLOCKS`` A blocks take 2 or 4 cursors per
#: lane, whose kernels hold 90-180 registers: with such rows, only products
#: whose A has at most ``MAX_MERGE_BLOCKS`` blocks take the merge. Measured
#: on an H100 (benchmarks/NOTES.md, session 4): the merge beat the task list
#: on every corpus matrix it can take except p2p-Gnutella31 (105,205 blocks,
#: rows of 73, 1.4 entries per block: 3.4x slower), and on all four
#: structured matrices (rows of 5-19 blocks, up to 2.4 M blocks: 1.3-1.8x
#: faster)
SHORT_ROW_BLOCKS = 32
MAX_MERGE_BLOCKS = 100_000

#: units of work (block rows, or parts of them) the merge aims at, and the
#: most parts a row is cut into (see :func:`units`). Every part searches its
#: column range in each of its B rows, so more parts cost more than they
#: save once rows are short: on an H100, cutting the 656 block rows of
#: ca-GrQc in 16 halved its count kernel, while cutting 14,325 short rows of
#: luxembourg_osm in 4 slowed it by 1.3x; this many units is about one wave
#: of groups
UNITS = 1 << 13
MAX_PARTS = 64

#: the block-row pointers this path keeps with A and B, and its per-row
#: counts, scale with the number of block rows: not for more than this, nor
#: for more than ``ROWS_PER_BLOCK`` times the blocks (hypersparse matrices,
#: whose task list scales with their blocks only)
MAX_BLOCK_ROWS = 1 << 26
ROWS_PER_BLOCK = 4

#: device bytes of one output block (key, bitmap, offset, pair pointer) and
#: of one pair
_BLOCK_BYTES = 32
_PAIR_BYTES = 16

#: RM_NONE of the kernels marks a finished cursor: no block column may equal it
_NO_COLUMN = (1 << KEY_SHIFT) - 1


def chooses(a: Any, b: Any) -> bool:
    """True when ``a @ b`` (no mask) runs on this path rather than the task list.

    The rule: on the GPU, when no block row of A is longer than
    ``SHORT_ROW_BLOCKS`` blocks, or none longer than ``MAX_ROW_BLOCKS`` and A
    has at most ``MAX_MERGE_BLOCKS`` blocks; and A and B have at most
    ``MAX_BLOCK_ROWS`` block rows and not many more than blocks
    (``ROWS_PER_BLOCK``). The first call on a matrix reads its longest row
    (one sync); it is kept with it.
    """
    if not per_row_arrays_fit(a, b):
        return False
    if nblocks_along(b.shape[1]) > _NO_COLUMN or b.nblocks >= 1 << 31:  # 32-bit positions
        return False
    longest = a._longest_row()
    if longest > MAX_ROW_BLOCKS:
        return False
    return longest <= SHORT_ROW_BLOCKS or a.nblocks <= MAX_MERGE_BLOCKS


class Merged(NamedTuple):
    """The output blocks of ``A @ B`` and their useful pairs (a compact task list).

    c_keys, c_bitmaps : uint64 [c_nblocks] - the non-empty output blocks
    c_offsets : int64 [c_nblocks + 1] - their value offsets
    c_ptr : int64 [c_nblocks + 1] - block q's pairs are ``[c_ptr[q], c_ptr[q + 1])``
    task_a, task_b : int64 [npairs] - A and B block of each pair whose Boolean
        product is not empty, in ascending A block within a block (None when
        not asked for)
    nnz : int
    warp_block : int64 [ceil(nnz / 32)] - on the GPU with the pairs, the block
        holding each value ``32 * w`` (``multiply``'s ``warp_block``); else None
    """

    c_keys: Any
    c_bitmaps: Any
    c_offsets: Any
    c_ptr: Any
    task_a: Any
    task_b: Any
    nnz: int
    warp_block: Any = None


def merge(a: Any, b: Any, pairs: bool = True, check: Any = None) -> Merged:
    """Output blocks of ``a @ b`` and their useful pairs, by the row merge.

    Parameters
    ----------
    a, b : BitmapMatrix
        Shapes (m, k) and (k, n); no block row of ``a`` longer than
        ``MAX_ROW_BLOCKS`` blocks on the GPU.
    pairs : bool
        Write the pairs (the multiply needs them; a structural product not).
    check : callable, optional
        Called with the device bytes the output needs once it is known, before
        it is allocated; may raise (a budget check).

    Returns
    -------
    Merged
        ``multiply.multiply`` takes its pairs as a task list; the sums run in
        the same order as from ``tasks.tasks`` (pairs with an empty product
        add nothing), so the values are identical.

    Notes
    -----
    On the GPU: three launches (count, scan, blocks) and one sync.
    """
    xp = get_array_module(a.keys, b.keys)
    if xp is np:
        return _merge_numpy(a, b, pairs, check)
    nbrows = nblocks_along(a.shape[0])
    group, cursors = next(shape for shape in _SHAPES if a._longest_row() <= shape[0] * shape[1])
    parts, span = units(nbrows, nblocks_along(b.shape[1]))

    def launch(stage: str, args: tuple[Any, ...]) -> None:
        _launch(f"bmsparse_rowmerge_{stage}_{group}_{cursors}", group * nbrows * parts, args)

    return two_passes(a, block_rows(b), parts, span, pairs, check, launch)


def rows_fit(m: Any) -> bool:
    """True when ``m`` has not many more block rows than blocks
    (``ROWS_PER_BLOCK``, or at most ``UNITS``): arrays per block row cost
    about what its blocks do."""
    nbrows = nblocks_along(m.shape[0])
    # at most max(ROWS_PER_BLOCK * m.nblocks, UNITS), the blocks counted only if needed
    return nbrows <= UNITS or nbrows <= ROWS_PER_BLOCK * m.nblocks


def per_row_arrays_fit(a: Any, b: Any) -> bool:
    """True on the GPU when A and B have at most ``MAX_BLOCK_ROWS`` block rows
    and :func:`rows_fit`: the condition of both per-block-row strategies
    (this one and :mod:`.rowdense`)."""
    if get_array_module(a.keys, b.keys) is np:
        return False
    # asked by each strategy in turn: no generator, and A once for A @ A
    return (nblocks_along(a.shape[0]) <= MAX_BLOCK_ROWS and rows_fit(a)
            and (b is a or nblocks_along(b.shape[0]) <= MAX_BLOCK_ROWS and rows_fit(b)))


def block_rows(b: Any) -> tuple[Any, Any, Any]:
    """B as the merges' kernels take it: keys, bitmaps, block-row pointer."""
    return b.keys, b.bitmaps, b._row_pointer()


def two_passes(a: Any, b_ops: tuple[Any, ...], parts: int, span: int, pairs: bool, check: Any,
               launch: Callable[[str, tuple[Any, ...]], None]) -> Merged:
    """The count pass, the scan of its sizes, one read, the blocks pass.

    ``launch(stage, args)`` runs the "count" or "blocks" kernel of a strategy
    whose kernels take the arguments of ``rowmerge.cu`` over units of
    ``parts`` per block row of ``span`` block columns each, B being
    ``b_ops`` (:func:`block_rows`, or another form its kernels read), without
    the launch's casts: the scalars are NumPy's, the arrays the matrices' own
    or new (a small product is a few launches and allocations, each a few
    microseconds of host time).
    """
    import cupy

    nbrows = nblocks_along(a.shape[0])
    n = nbrows * parts
    ops = (a.keys, a.bitmaps, a._row_pointer(), np.int64(nbrows), np.int64(parts),
           np.int64(span), *b_ops)
    sizes = cupy.empty(3 * n, dtype=cupy.int64)
    launch("count", (*ops, sizes))
    scan, totals = scan_totals(cupy, sizes, n)  # sync: the sizes of C, in one read
    c_nblocks, nnz, npairs = (totals[0], totals[1] - totals[0], totals[2] - totals[1]) \
        if n else (0, 0, 0)
    npairs = npairs if pairs else 0
    if check is not None:
        check(c_nblocks * _BLOCK_BYTES + npairs * _PAIR_BYTES)
    # C's keys, bitmaps and offsets in one allocation, the pairs and their
    # pointers (freed after the multiply) in another
    blocks = _kernels.alloc_blocks(c_nblocks)
    nwarps = -(-nnz // 32) if pairs else 0
    work = cupy.cuda.alloc(8 * (c_nblocks + 1 + 2 * npairs + nwarps))
    if nbrows == 0:  # no row closes the pointers (C has no block: they are [0])
        blocks.memset_async(0, 8)
        work.memset_async(0, 8)
    c_keys, c_bitmaps, c_offsets = _kernels.block_arrays(blocks, c_nblocks)
    c_ptr, task_a, task_b, warp_block = (
        _kernels.device_array(work, 8 * start, size, np.int64)
        for start, size in ((0, c_nblocks + 1), (c_nblocks + 1, npairs),
                            (c_nblocks + 1 + npairs, npairs),
                            (c_nblocks + 1 + 2 * npairs, nwarps)))
    launch("blocks", (*ops, scan, np.int64(pairs), c_keys, c_bitmaps, c_offsets, c_ptr, task_a,
                      task_b, warp_block))
    if not pairs:
        return Merged(c_keys, c_bitmaps, c_offsets, c_ptr, None, None, nnz)
    return Merged(c_keys, c_bitmaps, c_offsets, c_ptr, task_a, task_b, nnz, warp_block)


def units(nbrows: int, nbcols: int) -> tuple[int, int]:
    """How the block rows are cut: (parts per row, block columns per part).

    A group of lanes walks its unit's output blocks one after another, so a
    few long rows would leave the GPU idle: rows are cut into column ranges
    until there are about ``UNITS`` units (at most ``MAX_PARTS`` per row).
    """
    parts = 1
    while parts < MAX_PARTS and nbrows * parts < UNITS and parts < nbcols:
        parts *= 2
    span = max(-(-nbcols // parts), 1)
    return max(-(-nbcols // span), 1), span


def _launch(name: str, nthreads: int, args: tuple[Any, ...]) -> None:
    _kernels.launch(_kernels.get_kernel(_KERNELS, name), nthreads, args, cast=False)


def unit_sizes(merged: Merged, nbrows: int, parts: int, span: int) -> np.ndarray:
    """The count pass's output (int64 [3 * nbrows * parts]) from a merge's
    result: per unit (block row, part) its blocks, then its values, then its
    pairs."""
    rows = (merged.c_keys >> np.uint64(KEY_SHIFT)).astype(np.int64)
    cols = (merged.c_keys & np.uint64(COL_MASK)).astype(np.int64)
    unit, n = rows * parts + cols // span, nbrows * parts
    blocks = np.bincount(unit, minlength=n)
    values = np.bincount(unit, weights=np.diff(merged.c_offsets), minlength=n)
    pairs = np.bincount(unit, weights=np.diff(merged.c_ptr), minlength=n)
    return np.concatenate([blocks, values, pairs]).astype(np.int64)


def _merge_numpy(a: Any, b: Any, pairs: bool, check: Any) -> Merged:
    """The twin: the task list of ``tasks.tasks`` and the bitmaps of
    ``count.count``, less empty blocks and pairs with empty products."""
    from . import count, tasks

    tl = tasks.tasks(a.keys, b.keys, nblocks_along(a.shape[0]), nblocks_along(b.shape[1]))
    bitmaps = count.count(a.bitmaps, b.bitmaps, tl.task_a, tl.task_b, tl.c_ptr).bitmaps
    useful = count.bool_product(a.bitmaps[tl.task_a], b.bitmaps[tl.task_b]) != 0
    owner = np.repeat(np.arange(bitmaps.shape[0]), np.diff(tl.c_ptr))
    kept = bitmaps != 0
    per_block = np.bincount(owner[useful], minlength=bitmaps.shape[0])[kept]
    c_bitmaps = bitmaps[kept]
    c_offsets = exclusive_scan(np, popcount(c_bitmaps))
    c_ptr = exclusive_scan(np, per_block.astype(np.int64))
    if check is not None:
        check(c_bitmaps.shape[0] * _BLOCK_BYTES + (int(c_ptr[-1]) if pairs else 0) * _PAIR_BYTES)
    task_a, task_b = (tl.task_a[useful], tl.task_b[useful]) if pairs else (None, None)
    return Merged(tl.c_keys[kept], c_bitmaps, c_offsets, c_ptr, task_a, task_b,
                  int(c_offsets[-1]))
