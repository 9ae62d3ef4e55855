"""Stages 1 to 3 of SpGEMM by B's scalar rows, for graphs of one or two
entries per block.

The block paths do one step per pair of blocks (A(i, j), B(j, k)). With one
or two entries per block most pairs give nothing: ca-CondMat squared meets
13.6 M pairs for 4.1 M multiplies, and each output value's thread in the
multiply walks all of its block's pairs. Here the steps are the multiplies,
as in Gustavson's algorithm: B is read in CSR form (:func:`rows`, two
launches, no sync), and a thread block per block row of A (``rowscalar.cu``)

1. counts: every entry A(r, j) meets B's row j, each term ORing its bit into
   a dense accumulator of the row's output blocks (as :mod:`.rowdense`);
2. places: the same accumulation, then C's keys, bitmaps and value offsets
   (after one scan and one sync, :func:`rowmerge.two_passes`);
3. multiplies: a warp per row of C walks the row's A entries in ascending
   inner index and adds the terms into C's values in place, so each value is
   summed in the order of :mod:`.multiply`: C is bit for bit the other
   paths'.

No pair of blocks is listed, compared or stored. :func:`chooses` says when
``spgemm`` takes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _kernels, _readback, convert
from .._format import BLOCK_SHIFT, KEY_SHIFT, nblocks_along, popcount, value_index
from .._primitives import exclusive_scan
from .._sputils import get_array_module, get_index_dtype
from ..semiring import Semiring
from . import multiply as _multiply
from . import rowdense, rowmerge
from .rowmerge import Merged

_KERNELS = "spgemm/rowscalar.cu"
_kernels.register(_KERNELS, {"bmsparse_rowscalar_count": (), "bmsparse_rowscalar_blocks": (),
                             "bmsparse_rowscalar_values": ("T", "S")})

#: threads per thread block: one warp per row of a block row
THREADS = rowdense.THREADS

#: this path is chosen when both operands have at most this many entries per
#: block on average (see :func:`chooses`). Measured on an H100 against the
#: other paths (benchmarks/NOTES.md, session 15), at float64: ca-CondMat (1.04
#: entries per block) 0.99 ms against 1.14 by the dense path, musae_git
#: (1.07) 8.3 against 8.6 by the task list; from 1.4 entries per block it
#: lost: wiki-Vote (1.43) 1.8 ms against 1.0, p2p-Gnutella31 (1.41) 0.87
#: against 0.56, squirrel (1.87) 3.0 against 2.5, email-Enron (1.98) 11.8
#: against 5.0
MAX_ENTRIES_PER_BLOCK = 1.1

#: and when no block row of A holds more than this many blocks: a hub row's
#: terms are cut among the warps of one thread block, the unit its whole
#: block row (musae_git, rows of 3,667 blocks: 8.9 ms against 8.5 by the
#: task list)
MAX_ROW_BLOCKS = rowdense.MAX_ROW_BLOCKS

#: and when B has at most this many block columns: one unit per block row,
#: with an accumulator of 8 bytes per column in shared memory
MAX_COLUMNS = rowdense.SPAN

#: bytes of shared memory the multiply may hold a block row's values in
#: (a block row with more sums them in place in global memory)
MAX_HELD_BYTES = 32 << 10

def chooses(a: Any, b: Any) -> bool:
    """True when ``a @ b`` (no mask) runs on this path.

    The rule: on the GPU, when A and B hold at most ``MAX_ENTRIES_PER_BLOCK``
    entries per block, B has at most ``MAX_COLUMNS`` block columns and a CSR
    form indexed with int32 (``BitmapMatrix.tocsr``'s choice: the kernels
    read int32), the per-block-row arrays fit
    (:func:`rowmerge.per_row_arrays_fit`) and no block row of A is longer
    than ``MAX_ROW_BLOCKS`` (the first call on a matrix reads its longest
    row, one sync; it is kept with it).
    """
    return (nblocks_along(b.shape[1]) <= MAX_COLUMNS
            and get_index_dtype(max(b.nnz, b.shape[1])) == np.int32
            and a.nnz <= MAX_ENTRIES_PER_BLOCK * a.nblocks
            and b.nnz <= MAX_ENTRIES_PER_BLOCK * b.nblocks
            and rowmerge.per_row_arrays_fit(a, b) and a._longest_row() <= MAX_ROW_BLOCKS)


def rows(b: Any, values: bool = True) -> tuple[Any, Any, Any]:
    """B in CSR form: indptr (int32 [k + 1]), indices (int32 [nnz]) and, with
    ``values``, data ([nnz], B's dtype; else None)."""
    indptr, indices, data = b._csr_arrays(values)
    return indptr, indices, data if values else None


def accumulate(a: Any, b_rows: tuple[Any, Any, Any], ncols: int,
               check: Any = None) -> Merged:
    """Output blocks of ``a @ b`` from B's rows (:func:`rows`).

    Parameters
    ----------
    a : BitmapMatrix
        (m, k).
    b_rows : (indptr, indices, data)
        B (k, n) in CSR form.
    ncols : int
        n.
    check : callable, optional
        Called with the device bytes of C's blocks before they are allocated;
        may raise (a budget check).

    Returns
    -------
    Merged
        Without pairs (``task_a`` and ``task_b`` None, ``c_ptr`` zeros).

    Notes
    -----
    On the GPU: three launches (count, scan, blocks) and one sync.
    """
    if get_array_module(a.keys, b_rows[0]) is np:
        return _accumulate_numpy(a, b_rows, ncols, check)
    span = max(nblocks_along(ncols), 1)
    nbrows = nblocks_along(a.shape[0])
    shared = 8 * span

    def launch(stage: str, args: tuple[Any, ...]) -> None:
        _launch(f"bmsparse_rowscalar_{stage}", nbrows, shared, args)

    return rowmerge.two_passes(a, b_rows[:2], 1, span, False, check, launch)


def multiply(a: Any, b_rows: tuple[Any, Any, Any], ncols: int, merged: Merged,
             semiring: Semiring, dtype: np.dtype,
             zero_flag: _readback.HostFlag | None = None) -> tuple[Any, Any]:
    """Values of C's blocks (``merged``, from :func:`accumulate`).

    Parameters
    ----------
    a : BitmapMatrix
        (m, k), values of ``dtype`` when the semiring reads them.
    b_rows : (indptr, indices, data)
        B in CSR form, data of ``dtype`` when the semiring reads values.
    ncols : int
        B's columns.
    merged : Merged
        C's blocks.
    semiring : Semiring
        Not a structural one.
    dtype : dtype
        C's.
    zero_flag : _readback.HostFlag, optional
        As :func:`multiply.multiply`'s.

    Returns
    -------
    c_values : dtype [nnz]
    zero_values : uint64 [1]
        How many values are exactly zero.

    Notes
    -----
    On the GPU: one launch, no sync.
    """
    if get_array_module(a.keys, b_rows[0]) is np:
        return _multiply_numpy(a, b_rows, merged, semiring, dtype)
    dtype = np.dtype(dtype)
    nbrows = nblocks_along(a.shape[0])
    span = max(nblocks_along(ncols), 1)
    c_values, zero_values = _multiply.value_arrays(merged.nnz, dtype)
    null = np.uint64(0)
    a_values, b_values = (a.values, b_rows[2]) if semiring.reads_values else (null, null)
    capacity = held_values(merged.nnz, nbrows, dtype)
    shared = (2 * THREADS + capacity) * dtype.itemsize + 12 * span
    _launch("bmsparse_rowscalar_values", nbrows, shared, (
        a.keys, a.bitmaps, a._row_pointer(), np.int64(nbrows), np.int64(1), np.int64(span),
        b_rows[0], b_rows[1], a.offsets, a_values, b_values, merged.c_keys, merged.c_bitmaps,
        merged.c_offsets, np.int64(merged.c_keys.shape[0]), np.int64(capacity), c_values,
        zero_values, np.uint64(0 if zero_flag is None else zero_flag.ptr)),
        T=dtype, S=semiring.functor)
    return c_values, zero_values


def held_values(nnz: int, nbrows: int, dtype: np.dtype) -> int:
    """Values of one block row the multiply sums in shared memory: four times
    the mean, even (the maps that follow are 8-byte aligned), at most
    ``MAX_HELD_BYTES``."""
    mean = -(-nnz // max(nbrows, 1))
    return min(MAX_HELD_BYTES // dtype.itemsize, 4 * mean + 1) & ~1


def _launch(name: str, nunits: int, shared: int, args: tuple[Any, ...], **types: Any) -> None:
    """A thread block per unit (block row), no more than are resident."""
    kernel = _kernels.get_kernel(_KERNELS, name, **types)
    grid = min(nunits, _kernels.resident_blocks(kernel, THREADS, shared))
    _kernels.launch(kernel, grid * THREADS, args, block=THREADS, shared_mem=shared,
                    cast=False)


def find(a: Any, b: Any, reads_values: bool,
         check: Any) -> tuple[Merged, Callable[..., tuple[Any, Any]]]:
    """C's blocks and the function that computes their values: ``spgemm``'s
    way into this path (``values(semiring, dtype, zero_flag)``)."""
    b_rows = rows(b, reads_values)
    merged = accumulate(a, b_rows, b.shape[1], check)

    def values(semiring: Semiring, dtype: np.dtype,
               zero_flag: _readback.HostFlag | None) -> tuple[Any, Any]:
        return multiply(a, b_rows, b.shape[1], merged, semiring, dtype, zero_flag)

    return merged, values


# --- the NumPy twins -------------------------------------------------------

def _terms_numpy(a: Any, b_rows: tuple[Any, Any, Any]) -> tuple[np.ndarray, ...]:
    """Every product term in the kernels' summation order: A's entries by row,
    then ascending inner index; B's row in ascending column. Returns the
    term's row and column of C, A's value index and B's CSR position
    (int64 each)."""
    indptr, indices, _ = b_rows
    a_indptr, a_inner, a_at = convert.bitmap_to_csr(
        a.keys, a.bitmaps, a.offsets, np.arange(a.nnz, dtype=np.int64), a.shape, a.nnz)
    a_inner = a_inner.astype(np.int64)
    a_row = np.repeat(np.arange(a.shape[0], dtype=np.int64), np.diff(a_indptr))
    starts, lengths = indptr[a_inner].astype(np.int64), np.diff(indptr)[a_inner]
    entry = np.repeat(np.arange(a_inner.shape[0], dtype=np.int64), lengths)
    first = np.cumsum(lengths) - lengths
    b_at = starts[entry] + np.arange(entry.shape[0], dtype=np.int64) - first[entry]
    return a_row[entry], indices[b_at].astype(np.int64), a_at[entry], b_at


def _keys_and_bits(row: np.ndarray, col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keys = ((row >> BLOCK_SHIFT).astype(np.uint64) << np.uint64(KEY_SHIFT)) \
        | (col >> BLOCK_SHIFT).astype(np.uint64)
    return keys, ((row & 7) << BLOCK_SHIFT) | (col & 7)


def _accumulate_numpy(a: Any, b_rows: tuple[Any, Any, Any], ncols: int, check: Any) -> Merged:
    row, col, _, _ = _terms_numpy(a, b_rows)
    keys, bits = _keys_and_bits(row, col)
    c_keys, block = np.unique(keys, return_inverse=True)
    c_bitmaps = np.zeros(c_keys.shape[0], dtype=np.uint64)
    np.bitwise_or.at(c_bitmaps, block, np.uint64(1) << bits.astype(np.uint64))
    if check is not None:
        check(c_keys.shape[0] * rowmerge._BLOCK_BYTES)
    c_offsets = exclusive_scan(np, popcount(c_bitmaps))
    return Merged(c_keys, c_bitmaps, c_offsets, np.zeros(c_keys.shape[0] + 1, dtype=np.int64),
                  None, None, int(c_offsets[-1]))


@np.errstate(invalid="ignore", over="ignore")  # inf * 0 is NaN, as in scipy, silently
def _multiply_numpy(a: Any, b_rows: tuple[Any, Any, Any], merged: Merged,
                    semiring: Semiring, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    row, col, a_at, b_at = _terms_numpy(a, b_rows)
    keys, bits = _keys_and_bits(row, col)
    q = np.searchsorted(merged.c_keys, keys)
    at = merged.c_offsets[q] + value_index(merged.c_bitmaps[q], bits)
    dtype = np.dtype(dtype)
    a_values = a.values if semiring.reads_values else np.empty(0, dtype=dtype)
    b_values = b_rows[2] if semiring.reads_values else np.empty(0, dtype=dtype)
    c_values = np.full(merged.nnz, semiring.identity(dtype), dtype=dtype)
    # ufunc.at accumulates in array order: the terms' order, the kernel's
    _multiply._MONOIDS[semiring.monoid].at(
        c_values, at, _multiply._terms(semiring, a_values, a_at, b_values, b_at))
    return c_values, np.array([np.count_nonzero(c_values == 0)], dtype=np.uint64)
