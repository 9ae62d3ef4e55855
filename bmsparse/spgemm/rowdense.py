"""Stages 1 and 2 of SpGEMM by a dense accumulator per block row of A.

A thread block takes a block row i of A (or a range of its output block
columns, a "unit"), and every pair (A(i, j), B(j, k)) of it is one lane's
work: the pair ORs its Boolean product into the bitmap of column k of an
accumulator in shared memory, one 64-bit word per output block column (the
sparse accumulator of Gustavson's algorithm, with 8x8 blocks as its
entries). The accumulator's non-empty words, read in column order, are C's
blocks; only the useful pairs (a non-empty product) are written, in
ascending A block within a block, and ``multiply`` takes them as its task
list, as it takes the row merge's (:mod:`.rowmerge`: same :class:`Merged`
output, same count / scan / blocks passes, one sync).

Unlike the row merge, whose group of lanes walks a row's output blocks one
after another, the work here is spread over the pairs, so hub rows of
power-law graphs (hundreds of A blocks, long B rows, one or two entries per
block) cost no long chain of dependent steps; and unlike the task list,
nothing proportional to the pairs is sorted or stored. See ``rowdense.cu``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _kernels
from .._format import nblocks_along
from .._sputils import get_array_module
from . import rowmerge
from .rowmerge import Merged

_KERNELS = "spgemm/rowdense.cu"
_kernels.register(_KERNELS, {**{f"bmsparse_rowdense_{stage}{form}": ()
                                for stage in ("count", "blocks") for form in ("", "_touched")},
                             "bmsparse_rowdense_blocks_masked": ()})

#: threads per thread block (``BMSPARSE_ROWDENSE_THREADS`` of the kernels)
THREADS = 256

#: block columns one accumulator holds (12 bytes each of shared memory: the
#: bitmap and a pair counter; at most 2^16 - 1); wider products cut each
#: block row into units of at most this many columns
SPAN = 8192

#: this path is chosen when B has at most this many block columns, so that a
#: block row is one unit (see :func:`chooses`). Measured on an H100
#: (benchmarks/NOTES.md, session 6): cut into two units, p2p-Gnutella31 took
#: 1.54 ms against 0.70 ms as one; cut into 16-31, the stencils and the
#: WebBase surrogate took 100 times the other paths' time (every unit scans
#: its accumulator, however few blocks its row has)
MAX_COLUMNS = SPAN

#: and when no block row of A holds more than this many blocks: one thread
#: block takes a row, so a hub row is a long chain for one SM (musae_git,
#: rows of 3,667 blocks: 10.5 ms against 8.3 ms by the task list with the
#: pairs placed by rank, 12.1 against 8.4 in steps; email-Enron, rows of
#: 757: 5.0 against 7.2). The ranks also compare up to this many pairs of
#: one output block with each other, and a unit's pairs (at most this many
#: times ``SPAN``) must stay below 2^25: the blocks kernel scans them packed
#: with the unit's blocks and values (``rd_column_item`` of rowdense.cuh)
MAX_ROW_BLOCKS = 1024


def chooses(a: Any, b: Any) -> bool:
    """True when ``a @ b`` (no mask) runs on this path.

    The rule: on the GPU, when B has at most ``MAX_COLUMNS`` block columns,
    no block row of A more than ``MAX_ROW_BLOCKS`` blocks, and neither
    operand is hypersparse (the limits of ``rowmerge.chooses``). The first
    call on a matrix reads its longest row (one sync); it is kept with it.
    """
    return (nblocks_along(b.shape[1]) <= MAX_COLUMNS and rowmerge.per_row_arrays_fit(a, b)
            and a._longest_row() <= MAX_ROW_BLOCKS)


#: the touched kernels (``rowdense.cu``), which visit only the columns of a
#: unit's accumulator that some pair reached, are chosen when a unit has at
#: least this many columns per pair it is expected to have (the mean blocks
#: per block row of A times those of B, over the parts of a row); the
#: others pass over every column of every unit, three times in the blocks
#: kernel, but do not pay the touched kernels' returning first OR per column.
#: Measured (H100, spgemm A @ A, ms, every column / touched): p2p-Gnutella31
#: (43 columns per pair) 0.575 / 0.438; email-Enron (2.8) 4.88 / 4.97,
#: wiki-Vote (0.2) 1.02 / 1.05, squirrel 2.46 / 2.46; forced onto this path,
#: add32 (16) and bayer10 (28) 0.43 / 0.46 and 0.54 / 0.61
TOUCHED_COLUMNS_PER_PAIR = 32


def touched(a: Any, b: Any, parts: int, span: int) -> bool:
    """True when ``a @ b`` takes the touched kernels (``TOUCHED_COLUMNS_PER_PAIR``)."""
    a_rows, b_rows = nblocks_along(a.shape[0]), nblocks_along(b.shape[0])
    pairs = a.nblocks / max(a_rows, 1) * (b.nblocks / max(b_rows, 1)) / parts
    return span >= TOUCHED_COLUMNS_PER_PAIR * pairs


#: the masked blocks kernel (``rowdense.cu``), which ranks each pair in its
#: output block by a mask of the row's A blocks per column instead of
#: comparing it with the block's other pairs, is chosen when those masks
#: take at most this many bytes of shared memory (4 bytes per 32 blocks of
#: A's longest row, per column). Measured (H100, spgemm A @ A, ms, ranks by
#: comparison / by masks, two rounds): squirrel (9 words) 2.53, 2.45 / 2.20,
#: 2.24; wiki-Vote (19 words, 77 KiB) 1.02, 1.00 / 0.96, 0.97; identical arrays
MASK_BYTES = 96 * 1024


def mask_words(a: Any, span: int) -> int:
    """32-bit words per column of the masked blocks kernel, or 0 when it is
    not chosen (``MASK_BYTES``)."""
    words = -(-a._longest_row() // 32)
    return words if 4 * words * span <= MASK_BYTES else 0


def shared_bytes(span: int, touched: bool = False, masks: int = 0) -> int:
    """Dynamic shared memory of a thread block of the kernels: per column a
    bitmap and a pair counter, and for the touched kernels a bit (for the
    masked blocks kernel ``masks`` words)."""
    return 12 * span + (4 * -(-span // 32) if touched else 4 * masks * span)


def accumulate(a: Any, b: Any, pairs: bool = True, check: Any = None) -> Merged:
    """Output blocks of ``a @ b`` and their useful pairs, by dense accumulators.

    Takes and returns what :func:`rowmerge.merge` does: the same arrays, so
    the host runs the merge's NumPy twin.

    Notes
    -----
    On the GPU: three launches (count, scan, blocks) and one sync; shared
    memory of 12 bytes per block column of a unit (:func:`shared_bytes`).
    """
    if get_array_module(a.keys, b.keys) is np:
        return rowmerge._merge_numpy(a, b, pairs, check)
    parts, span = column_units(nblocks_along(b.shape[1]))
    nunits = nblocks_along(a.shape[0]) * parts
    form = "_touched" if touched(a, b, parts, span) else ""
    masks = 0 if form or not pairs else mask_words(a, span)

    def launch(stage: str, args: tuple[Any, ...]) -> None:
        masked = stage == "blocks" and masks > 0
        name = f"bmsparse_rowdense_{stage}" + ("_masked" if masked else form)
        kernel = _kernels.get_kernel(_KERNELS, name)
        shared = shared_bytes(span, bool(form), masks if masked else 0)
        if masked:
            args = (*args, np.int64(masks))
        grid = min(nunits, _kernels.resident_blocks(kernel, THREADS, shared))
        _kernels.launch(kernel, grid * THREADS, args, block=THREADS, shared_mem=shared,
                        cast=False)

    return rowmerge.two_passes(a, rowmerge.block_rows(b), parts, span, pairs, check, launch)


def column_units(nbcols: int) -> tuple[int, int]:
    """(parts per block row, block columns per part): as few parts as hold
    ``nbcols`` columns in accumulators of at most ``SPAN``, evenly cut."""
    parts = max(-(-nbcols // SPAN), 1)
    return parts, max(-(-nbcols // parts), 1)
