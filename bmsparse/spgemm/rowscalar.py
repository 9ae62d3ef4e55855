"""Stages 1 to 3 of SpGEMM by B's scalar rows, for graphs of one or two
entries per block.

The block paths do one step per pair of blocks (A(i, j), B(j, k)). With one
or two entries per block most pairs give nothing: ca-CondMat squared meets
13.6 M pairs for 4.1 M multiplies, and each output value's thread in the
multiply walks all of its block's pairs. Here the steps are the multiplies,
as in Gustavson's algorithm: B is read in CSR form (:func:`rows`, three
launches, no sync; kept with a small B), and a thread block per block row of
A (``rowscalar.cu``), its terms spread over all of its threads,

1. counts: every entry A(r, j) meets B's row j, each term ORing its bit into
   a dense accumulator of the row's output blocks (as :mod:`.rowdense`);
2. after the block rows' order (:func:`order`), one scan and one sync
   (:func:`rowmerge.two_passes`), in one launch:
   the same accumulation, C's keys, bitmaps and value offsets, then C's
   values, the terms added in ascending inner index, so each value is summed
   in the order of :mod:`.multiply`: C is bit for bit the other paths'
   (:func:`product`). A structural product writes the blocks alone
   (:func:`accumulate`).

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
_kernels.register(_KERNELS, {"bmsparse_rowscalar_count": (), "bmsparse_rowscalar_order": (),
                             "bmsparse_rowscalar_blocks": (),
                             "bmsparse_rowscalar_product": ("T", "S")})

#: threads per thread block (``BMSPARSE_ROWSCALAR_THREADS`` of the kernels)
THREADS = 512

#: this path is chosen when both operands have at most this many entries per
#: block on average (see :func:`chooses`). Measured on an H100 against the
#: other paths (benchmarks/NOTES.md, session 23), float64, ms: musae_git
#: (1.07 entries per block) 3.9 against 8.6 by the task list, email-Enron
#: (1.98) 4.3 against 4.8 by the dense path, squirrel (1.87) 2.1 against 2.2
MAX_ENTRIES_PER_BLOCK = 2.0

#: and when a block row's expected terms (see :func:`chooses`) are at least
#: this fraction of B's block columns: each block row also costs passes over
#: B's block columns (the accumulator), so a wide, sparse product is left to
#: the pair paths. p2p-Gnutella31 (45 expected terms, 69 in fact, against
#: 7,824 columns): 1.3 ms against 0.44 by the dense path; musae_git (470
#: expected, 7,500 in fact: a power-law graph meets far more than the even
#: spread, against 4,713 columns): 3.5 ms against 8.3 by the task list
MIN_TERMS_PER_COLUMN = 1 / 32

#: and when B has at most this many block columns: one unit per block row,
#: with an accumulator of 8 bytes per column in shared memory
MAX_COLUMNS = rowdense.SPAN

#: bytes of shared memory the product may hold a block row's values in
#: (a block row with more sums them in place in global memory)
MAX_HELD_BYTES = 16 << 10


def chooses(a: Any, b: Any) -> bool:
    """True when ``a @ b`` (no mask) runs on this path.

    The rule: on the GPU, when A and B hold at most ``MAX_ENTRIES_PER_BLOCK``
    entries per block, B has at most ``MAX_COLUMNS`` block columns and a CSR
    form indexed with int32 (``BitmapMatrix.tocsr``'s choice: the kernels
    read int32), the per-block-row arrays fit
    (:func:`rowmerge.per_row_arrays_fit`), and the terms a block row of A
    is expected to meet (``nnz(A) nnz(B) / (k m / 8)``, as if entries were
    spread evenly; power-law graphs meet more) are at least
    ``MIN_TERMS_PER_COLUMN`` of B's block columns. No sync.
    """
    span = nblocks_along(b.shape[1])
    terms = a.nnz * (b.nnz / max(b.shape[0], 1)) / max(nblocks_along(a.shape[0]), 1)
    return (span <= MAX_COLUMNS
            and get_index_dtype(max(b.nnz, b.shape[1])) == np.int32
            and a.nnz <= MAX_ENTRIES_PER_BLOCK * a.nblocks
            and b.nnz <= MAX_ENTRIES_PER_BLOCK * b.nblocks
            and terms >= MIN_TERMS_PER_COLUMN * span
            and rowmerge.per_row_arrays_fit(a, b))


#: B's CSR form (:func:`rows`) is kept with B up to this many bytes: the
#: conversion is three launches (about 0.1 ms of a small product's 0.6,
#: benchmarks/NOTES.md, session 24), and a repeated product by the same B
#: then skips it; a larger B is converted each time, so that it does not hold
#: 12 bytes per entry for as long as it lives
MAX_KEPT_ROWS_BYTES = 32 << 20


def rows(b: Any, values: bool = True) -> tuple[Any, Any, Any]:
    """B in CSR form: indptr (int32 [k + 1]), indices (int32 [nnz]) and, with
    ``values``, data ([nnz], B's dtype; else None).

    Kept with B when it takes at most ``MAX_KEPT_ROWS_BYTES`` (until one of
    B's arrays is replaced; with values, it serves a structural product too).
    """
    kept = b._derived("scalar_rows")
    if kept is not None and (kept[2] is not None or not values):
        return kept[0], kept[1], kept[2] if values else None
    indptr, indices, data = b._csr_arrays(values)
    out = indptr, indices, data if values else None
    if indptr.nbytes + indices.nbytes + (data.nbytes if values else 0) <= MAX_KEPT_ROWS_BYTES:
        b._keep("scalar_rows", out)
    return out


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
    merged, blocks, _ = _count(a, b_rows, ncols, check, False)
    blocks("bmsparse_rowscalar_blocks", 8 * _span(ncols))
    return merged


def product(a: Any, b_rows: tuple[Any, Any, Any], ncols: int,
            check: Any = None) -> tuple[Merged, Callable[..., tuple[Any, Any]]]:
    """C's blocks, and the function that computes them with their values.

    Parameters
    ----------
    a : BitmapMatrix
        (m, k).
    b_rows : (indptr, indices, data)
        B (k, n) in CSR form (:func:`rows`).
    ncols : int
        n.
    check : callable, optional
        As :func:`accumulate`'s.

    Returns
    -------
    merged : Merged
        C's blocks, as :func:`accumulate` gives them; on the GPU their arrays
        are written by ``values``: only their sizes may be read before.
    values : callable
        ``values(semiring, dtype, zero_flag=None)`` returns C's values
        (``dtype`` [nnz]) and how many are exactly zero (uint64 [1]). The
        semiring is not a structural one; A's values and B's data are of
        ``dtype`` when it reads values; ``zero_flag`` as
        :func:`multiply.multiply`'s. Call it once.

    Notes
    -----
    On the GPU: the count, order and scan launches and one sync, then
    ``values`` is one launch: the accumulation again, C's blocks, and their
    values with the accumulator as the map of each block row's output (no
    sync), the block rows taken by the free thread blocks most terms first
    (:func:`order`).
    """
    if get_array_module(a.keys, b_rows[0]) is np:
        merged = _accumulate_numpy(a, b_rows, ncols, check)

        def host_values(semiring: Semiring, dtype: np.dtype,
                        zero_flag: _readback.HostFlag | None = None) -> tuple[Any, Any]:
            return _multiply_numpy(a, b_rows, merged, semiring, np.dtype(dtype))

        return merged, host_values
    merged, blocks, units = _count(a, b_rows, ncols, check, True)

    def values(semiring: Semiring, dtype: np.dtype,
               zero_flag: _readback.HostFlag | None = None) -> tuple[Any, Any]:
        dtype = np.dtype(dtype)
        n = nblocks_along(a.shape[0])
        c_values, zero_values = _multiply.value_arrays(merged.nnz, dtype)
        null = np.uint64(0)
        a_values, b_values = (a.values, b_rows[2]) if semiring.reads_values else (null, null)
        capacity = held_values(merged.nnz, n, dtype)
        span = _span(ncols)
        blocks("bmsparse_rowscalar_product", ((12 * span + 15) & ~15) + capacity * dtype.itemsize,
               (a.offsets, a_values, b_values, np.int64(capacity), c_values, zero_values,
                np.uint64(0 if zero_flag is None else zero_flag.ptr), units, units[n:]),
               T=dtype, S=semiring.functor)
        return c_values, zero_values

    return merged, values


def _span(ncols: int) -> int:
    """Block columns of B: the units' width."""
    return max(nblocks_along(ncols), 1)


def _count(a: Any, b_rows: tuple[Any, Any, Any], ncols: int, check: Any,
           ordered: bool) -> tuple[Merged, Callable[..., None], Any]:
    """The count pass, its scan and C's arrays (:func:`rowmerge.two_passes`);
    ``blocks(kernel, shared, more_args=(), **types)``, which launches the
    blocks pass by that kernel, with the blocks arguments and ``more_args``;
    and with ``ordered`` the block rows by terms (:func:`order`, launched
    before the sync, so that it runs while the host waits), else None."""
    span = _span(ncols)
    nbrows = nblocks_along(a.shape[0])
    deferred: list[tuple[Any, ...]] = []
    units: list[Any] = [None]

    def launch(stage: str, args: tuple[Any, ...]) -> None:
        if stage == "count":
            _launch("bmsparse_rowscalar_count", nbrows, 8 * span, args)
            if ordered:
                # the count's sizes are (blocks, values, terms) per block row
                units[0] = order(args[-1][2 * nbrows:])
        else:
            deferred.append(args)

    merged = rowmerge.two_passes(a, b_rows[:2], 1, span, False, check, launch)

    def blocks(kernel: str, shared: int, more_args: tuple[Any, ...] = (), **types: Any) -> None:
        _launch(kernel, nbrows, shared, (*deferred[0], *more_args), **types)

    return merged, blocks, units[0]


def order(terms: Any) -> Any:
    """The block rows in the order the product's thread blocks take them: most
    terms first, by bands of terms (:func:`bands`), in any order within one
    (a block row's values do not depend on which thread block sums them).

    Parameters
    ----------
    terms : int64 [n]
        Each block row's terms (the count's ``sizes[2 n:]``).

    Returns
    -------
    int64 [n + 1]
        A permutation of ``range(n)``, then 0 (the product's count of block
        rows taken). On the host, the stable one (the twin).

    Notes
    -----
    On the GPU: one launch of one thread block, no sync.
    """
    xp = get_array_module(terms)
    n = terms.shape[0]
    if xp is np:
        return np.append(np.argsort(bands(terms), kind="stable"), 0)
    units = xp.empty(n + 1, dtype=xp.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_rowscalar_order")
    _kernels.launch(kernel, THREADS, (terms, np.int64(n), units), block=THREADS, cast=False)
    return units


def bands(terms: np.ndarray) -> np.ndarray:
    """The band of each block row (``rs_band`` of rowscalar.cu): the bit
    length of its terms and the two bits below the top one (the terms below
    4 a band each), numbered from the most terms: int64 [n], lower first."""
    terms = np.asarray(terms, dtype=np.int64)
    top = np.searchsorted(np.left_shift(1, np.arange(63, dtype=np.int64)), terms,
                          side="right") - 1
    shift = np.maximum(top - 2, 0)
    band = np.where(terms < 4, terms, 4 * (top - 1) + ((terms >> shift) & 3))
    return _BANDS - 1 - band


#: bands of ``order`` (``RS_BANDS`` of rowscalar.cu)
_BANDS = 256


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


def find(a: Any, b: Any, reads_values: bool, structural: bool,
         check: Any) -> tuple[Merged, Callable[..., tuple[Any, Any]] | None]:
    """C's blocks and the function that computes their values: ``spgemm``'s
    way into this path (``values(semiring, dtype, zero_flag)``; for a
    structural semiring the blocks are written here and it is not called)."""
    b_rows = rows(b, reads_values)
    if structural:
        return accumulate(a, b_rows, b.shape[1], check), None
    return product(a, b_rows, b.shape[1], check)


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
