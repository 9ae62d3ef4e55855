"""Data-parallel primitives shared by the stages, on NumPy or CuPy arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _kernels, _readback
from ._sputils import get_array_module

_KERNELS = "_primitives.cu"
_kernels.register(_KERNELS, {"bmsparse_scan": (), "bmsparse_scan_bytes": ("I",),
                             "bmsparse_sort_segment_chunks": (), "bmsparse_copy_runs": ("T",),
                             "bmsparse_merge_pieces": ()})

#: threads and elements per thread block of the one-launch scans (``_cuda/scan.cuh``)
SCAN_THREADS = 256
SCAN_TILE = SCAN_THREADS * 8
#: items per tile of the scan of bytes
_BYTE_TILE = SCAN_THREADS * 32


def cumsum(xp: Any, a: Any) -> Any:
    """Inclusive scan of an int64 array (one launch on the device)."""
    if xp is np or a.dtype != np.int64:
        return xp.cumsum(a)
    out = xp.empty_like(a)
    _scan_into(a, out)
    return out


def _scan_into(a: Any, out: Any, shift: int = 0, report: int | None = None,
               every: int = 0) -> None:
    """``out[shift:] = cumsum(a)`` for int64 device arrays, ``out[0] = 0`` with
    shift 1 (with shift 0 ``out`` may be ``a``); with ``every``, the sums of
    ``a[:every]``, ``a[:2 * every]``, ... are also written at ``report``."""
    n = a.shape[0]
    if n == 0:
        if shift:
            out[:1] = 0
        return
    state, ntiles = scan_state(n)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_scan")
    i64 = np.int64
    # NumPy scalars, launched without the casts: a scan sits in every small product
    _kernels.launch(kernel, ntiles * SCAN_THREADS,
                    (a if a._c_contiguous else a.copy(), i64(n), out, np.uint64(state.ptr),
                     i64(ntiles), i64(shift), np.uint64(report or 0),
                     i64(every if report else 0)),
                    block=SCAN_THREADS, cast=False)


def scan_state(n: int, tile: int = SCAN_TILE) -> tuple[Any, int]:
    """The zeroed state of a one-launch scan of ``n`` items in tiles of ``tile``
    (``_cuda/scan.cuh``), as raw device memory (a ticket, then 3 words per
    tile), and its tiles."""
    import cupy

    nwords, ntiles = scan_state_words(n, tile)
    state = cupy.cuda.alloc(8 * nwords)
    state.memset_async(0, 8 * nwords)
    return state, ntiles


def scan_state_words(n: int, tile: int = SCAN_TILE) -> tuple[int, int]:
    """The int64 words of :func:`scan_state`'s state, and its tiles (for a
    caller that allocates and zeroes it with other arrays)."""
    ntiles = -(-n // tile)
    return 1 + 3 * ntiles, ntiles


def stable_argsort(xp: Any, a: Any) -> Any:
    """Stable sorting permutation of ``a``, int64 (CuPy's argsort is stable)."""
    if xp is np:
        return np.argsort(a, kind="stable")
    return a.argsort().astype(xp.int64, copy=False)


def exclusive_scan(xp: Any, counts: Any) -> Any:
    """Offsets, int64 [n + 1]: ``[0, counts[0], counts[0] + counts[1], ...]``."""
    if xp is np or counts.dtype != np.int64:
        out = xp.zeros(counts.shape[0] + 1, dtype=xp.int64)
        xp.cumsum(counts, out=out[1:])
    else:
        out = xp.empty(counts.shape[0] + 1, dtype=xp.int64)
        _scan_into(counts, out, shift=1)
    return out


def exclusive_scan_bytes(xp: Any, counts: Any, dtype: Any) -> Any:
    """:func:`exclusive_scan` of uint8 ``counts`` (contiguous) into ``dtype``
    (int32 or int64) [n + 1], whose caller knows the total fits; one launch
    on the device."""
    out = xp.empty(counts.shape[0] + 1, dtype=dtype)
    if xp is np or counts.shape[0] == 0:
        out[0] = 0
        xp.cumsum(counts, dtype=out.dtype, out=out[1:])
        return out
    n = counts.shape[0]
    state, ntiles = scan_state(n, _BYTE_TILE)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_scan_bytes", I=out.dtype)
    _kernels.launch(kernel, ntiles * SCAN_THREADS,
                    (counts, np.int64(n), out, np.uint64(state.ptr), np.int64(ntiles)),
                    block=SCAN_THREADS, cast=False)
    return out


def scan_totals(xp: Any, counts: Any, every: int) -> tuple[Any, list[int]]:
    """:func:`exclusive_scan` and, read to the host, its values at ``every``,
    ``2 * every``, ... (up to ``counts.shape[0]``): the sizes the caller
    allocates next.

    Syncs once; on the GPU the scan writes those values straight to host
    memory (``_readback.host_words``), so the sync costs no copy.
    """
    n = counts.shape[0]
    ntotals = n // every if every > 0 else 0
    if xp is np or counts.dtype != np.int64 or n == 0:
        out = exclusive_scan(xp, counts)
        return out, [int(v) for v in out[every::every][:ntotals].tolist()] if ntotals else []
    out = xp.empty(n + 1, dtype=xp.int64)
    report = _readback.host_words(ntotals)
    _scan_into(counts, out, shift=1, report=report, every=every)
    if report is None:
        return out, _readback.read_ints(*((out, k * every) for k in range(1, ntotals + 1)))
    return out, _readback.take_words(ntotals)


#: codes per chunk of the segment sort (a thread block holds up to twice
#: that); segments longer than a chunk go to a global sort. Tests lower it,
#: and 0 sorts everything globally.
SORT_CHUNK = 512
_SORT_THREADS = 256


def sort_segments(codes: Any, seg_starts: Any, max_span: int, long_codes: int) -> Any:
    """Sort uint64 ``codes`` whose segments are already ordered against each other.

    Parameters
    ----------
    codes : uint64 [n]
        Sorted in place on the GPU (a new array on the host).
    seg_starts : int64 [nseg]
        First code of every segment, non-decreasing (repeats allowed).
    max_span, long_codes : int
        Length of the longest segment, and the number of codes in segments
        longer than ``SORT_CHUNK``.

    Returns
    -------
    uint64 [n]

    Notes
    -----
    Short segments are sorted in shared memory, a chunk of whole segments per
    thread block; the codes of long segments get one global sort together
    (their segments are disjoint and ordered, so that sorts each). When most
    codes are in long segments, one global sort of everything is cheaper.
    Syncs once when long segments exist.
    """
    xp = get_array_module(codes)
    n = codes.shape[0]
    if xp is np:
        return np.sort(codes)
    if n == 0 or SORT_CHUNK == 0 or 2 * long_codes > n:
        codes.sort()
        return codes
    chunk = min(SORT_CHUNK, max(32, 1 << max(max_span - 1, 0).bit_length()))
    in_long = xp.empty(n, dtype=xp.int8)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_sort_segment_chunks")
    _kernels.launch(kernel, -(-n // chunk) * _SORT_THREADS,
                    (codes, n, chunk, seg_starts, seg_starts.shape[0], in_long),
                    block=_SORT_THREADS, shared_mem=2 * chunk * 8)
    if max_span > chunk:
        positions = xp.flatnonzero(in_long)  # sync: how many codes the long chunks hold
        if positions.size:
            codes[positions] = xp.sort(codes[positions])
    return codes


def ranges(xp: Any, starts: Any, counts: Any, total: int | None = None) -> tuple[Any, Any]:
    """Every index of the ranges ``[starts[p], starts[p] + counts[p])`` in
    turn, with its range ``p`` (int64 arrays): (p, index). O(total + ranges);
    one sync on the GPU (the total, unless the caller knows it)."""
    if counts.shape[0] == 0:
        empty = xp.zeros(0, dtype=xp.int64)
        return empty, empty
    counts = counts.astype(xp.int64, copy=False)
    ends = xp.cumsum(counts)
    if total is None:
        total = _readback.read_last(ends)  # sync: the output's size
    firsts = ends - counts
    places = xp.arange(total, dtype=xp.int64)
    if xp is np:
        # the range of place e is the last to start at or before e: one less
        # than the number of ranges starting there (empty ones included,
        # which come before the range that fills the place)
        owner = np.cumsum(np.bincount(firsts, minlength=total + 1)[:total]) - 1
    else:
        # the first to end after e: CuPy's bincount syncs (for its length)
        owner = xp.searchsorted(ends, places, side="right")
    return owner, starts[owner] + (places - firsts[owner])


def move_runs(xp: Any, values: Any, starts: Any, counts: Any, total: int | None = None,
              dest: Any = None) -> Any:
    """The runs ``values[starts[p]:starts[p] + counts[p]]`` one after another
    (int64 ``starts`` and ``counts`` [n]; ``total`` values in all): on the GPU
    a thread copies each run (bmsparse_copy_runs), on the host
    :func:`ranges` gathers them. ``dest``: the exclusive scan of ``counts``
    where the caller has it (a block list's offsets). One sync on the GPU
    unless ``total`` is given."""
    if xp is np:
        return values[ranges(np, starts, counts, total)[1]]
    counts = counts.astype(xp.int64, copy=False)
    if dest is None:
        dest = exclusive_scan(xp, counts)
    if total is None:
        total = _readback.read_last(dest)  # sync: the output's size
    out = xp.empty(total, dtype=values.dtype)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_copy_runs", T=values.dtype)
    _kernels.launch(kernel, starts.shape[0], (starts, counts, dest, starts.shape[0], values, out))
    return out


def merge_pieces(xp: Any, keys: Any, bitmaps: Any) -> tuple[Any, Any]:
    """Blocks from pieces of blocks sorted by key (uint64 [n] each) whose bits
    within one key are disjoint: each key that has bits once, with the union
    of its pieces' bitmaps (empty pieces drop out). One sync on the GPU (the
    number of blocks; bmsparse_merge_pieces)."""
    n = keys.shape[0]
    if n == 0:
        return keys, bitmaps
    if xp is not np:
        unions, heads = _kernels.device_arrays((n, np.uint64), (n, np.uint8))
        _kernels.launch(_kernels.get_kernel(_KERNELS, "bmsparse_merge_pieces"), n,
                        (keys, bitmaps, n, unions, heads))
        first = xp.flatnonzero(heads)  # sync: the number of blocks
        return keys[first], unions[first]
    heads = np.ones(n, dtype=bool)
    heads[1:] = keys[1:] != keys[:-1]
    first = np.flatnonzero(heads)
    # disjoint bitmaps' union is their sum: a difference of running sums
    # (modulo 2**64, exact) between a key's first and last pieces
    total = np.cumsum(bitmaps, dtype=np.uint64)
    last = np.append(first[1:], n) - 1
    unions = total[last] - total[first] + bitmaps[first]
    live = unions != 0
    return keys[first[live]], unions[live]
