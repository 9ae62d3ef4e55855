"""Stage 4 of SpGEMM: remove output entries that cancelled to exactly zero.

scipy drops exact zeros from a product (``-0.0`` too; NaN stays); so does
bmsparse unless asked to keep them. Blocks left empty are removed.

Blocks can also be empty before any value is computed: when all the pairs
of an output block have empty Boolean products (a column set of A(i, j)
that misses the row set of B(j, k)). :func:`drop_empty` removes those right
after the count stage, so the multiply never sees them. See ``compact.cu``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import _kernels, _readback
from .._format import set_bits
from .._primitives import SCAN_THREADS, cumsum, exclusive_scan, scan_state, scan_totals
from .._sputils import get_array_module
from .count import Counts, pack_shift, packed_sizes
from .multiply import warp_arrays, warp_specs
from .tasks import first_blocks, front, half_unused

_KERNELS = "spgemm/compact.cu"
_kernels.register(_KERNELS, {"bmsparse_compact_nonzero_bits": ("T",),
                             "bmsparse_compact_values": ("T",),
                             "bmsparse_compact_blocks": (),
                             "bmsparse_compact_scan_blocks": (),
                             "bmsparse_compact_settle": ()})


class Kept(NamedTuple):
    """The output blocks that :func:`drop_empty` keeps.

    keys, bitmaps : uint64 [kept]
    offsets : int64 [kept + 1]
        Unchanged values' offsets (empty blocks hold no value).
    first, last : int64 [kept]
        Task run of each kept block.
    nnz : int
        Number of output values.
    warp_block : int64 [ceil(nnz / 32)] or None
        On the GPU, when blocks were dropped: the block holding value 32 * w,
        for ``multiply.multiply``.
    warp_starts : uint64 [ceil(nnz / 32)] or None
        With ``warp_block``: where blocks start inside each warp
        (``multiply.warp_arrays``).
    """

    keys: Any
    bitmaps: Any
    offsets: Any
    first: Any
    last: Any
    nnz: int
    warp_block: Any = None
    warp_starts: Any = None


def drop_empty(c_keys: Any, counts: Counts, c_ptr: Any, listed: Any = None,
               runs: tuple[Any, Any] | None = None, scratch: bool = False) -> Kept:
    """Remove the output blocks whose bitmap is empty, before the multiply.

    Parameters
    ----------
    c_keys : uint64 [c_nblocks]
    counts : count.Counts
        The count stage's bitmaps and scan, or on the GPU its unscanned items
        and their total (``Counts.sizes``, ``Counts.total``), of an unsized
        task list's padded arrays.
    c_ptr : int64 [c_nblocks + 1]
        Task runs of the blocks.
    listed : int64 [1], optional
        On the GPU, the number of output blocks on the device
        (``tasks.TaskList.c_nblocks``): the arrays are then longer, the
        blocks past it empty (``count.count``'s ``listed``), and it is read in
        the same sync.
    runs : (int64 [n], int64 [n]), optional
        With ``Counts.total``: arrays at least as long as ``c_keys`` that are no
        longer read (the task list's ``task_a`` and ``task_b`` once the
        multiply reads the pairs' records), overwritten with the kept
        blocks' task runs (``Kept.first`` and ``Kept.last`` are views of
        them) instead of new scratch.
    scratch : bool
        With ``Counts.total``: C's blocks may stay in the padded scratch whatever
        its size (they are read by the multiply, then dropped: C is written
        in CSR), instead of being copied out when they fill less than half.

    Returns
    -------
    Kept

    Notes
    -----
    Syncs once, reading the number of values and of non-empty blocks from
    the packed scan together (twice when the scan is not packed). Where the
    count left its items unscanned (``Counts.total``), the compaction is
    queued before the sync and scans them in the same launch
    (:func:`_drop_ahead`).
    """
    xp = get_array_module(c_keys, counts.bitmaps, c_ptr)
    total = None
    if counts.scan is None:
        return _drop_ahead(c_keys, counts, c_ptr, runs, scratch)
    if listed is not None:
        # sync: the sizes of C and the number of listed blocks, in one read
        total, n = _readback.read_ints((counts.scan, -1), (listed, 0))
        c_keys, c_ptr = first_blocks(c_keys, c_ptr, n)
        # the bitmaps are C's own when nothing is dropped
        counts = Counts(front(counts.bitmaps, n), counts.scan[:n + 1], counts.shift,
                        counts.pairs)
    n = c_keys.shape[0]
    nnz, kept, rank = _sizes(xp, counts, total)
    if kept == n:
        return Kept(c_keys, counts.bitmaps, counts.offsets(), c_ptr[:-1], c_ptr[1:], nnz)
    offsets = counts.offsets() if xp is np else counts.scan
    *blocks, warp_block, warp_starts = _keep_blocks(xp, c_keys, counts.bitmaps, offsets, rank,
                                                    kept, c_ptr, counts.shift, nnz)
    return Kept(*blocks, nnz, warp_block, warp_starts)


def _drop_ahead(c_keys: Any, counts: Counts, c_ptr: Any, runs: tuple[Any, Any] | None,
                scratch: bool = False) -> Kept:
    """:func:`drop_empty` of the padded arrays of an unsized task list counted
    by tasks, on the GPU: one launch queued before the sync scans the count's
    items and writes the kept blocks to the front of scratch as long as the
    arrays (``bmsparse_compact_scan_blocks``), so that the GPU scans and
    compacts while the host waits for the sizes and then allocates C (else
    the GPU idled from the scan's end to the compaction's launch); a second
    launch then moves them to C's arrays of their exact size (unless they
    fill at least half of the scratch, which then stays C's: the rule of
    :func:`tasks.front`; always with ``scratch``) and writes the
    warps' words. The task runs go to ``runs`` when given."""
    n, shift = c_keys.shape[0], counts.shift
    memory = _kernels.alloc_blocks(n)
    t_keys, t_bitmaps, t_offsets = _kernels.block_arrays(memory, n)
    first, last = runs or _kernels.device_arrays((n, np.int64), (n, np.int64))
    _scan_blocks(c_keys, counts, c_ptr, (t_keys, t_bitmaps, t_offsets, first, last))
    # sync: the number of values and of kept blocks, while the GPU compacts
    total = counts.total.wait()[0]
    nnz, kept = total >> shift, total & ((1 << shift) - 1)
    null = _kernels.NULL
    if half_unused(kept, n) and not scratch:
        blocks = _kernels.block_arrays(_kernels.alloc_blocks(kept), kept)
        out = blocks
    else:
        blocks = _kernels.block_arrays(memory, kept, n)
        out = (null, null, null)
    warp_block, warp_starts = warp_arrays(nnz)
    settle = _kernels.get_kernel(_KERNELS, "bmsparse_compact_settle")
    _kernels.launch(settle, kept + 1, (t_keys, t_bitmaps, t_offsets, np.int64(kept), *out,
                                       warp_block, warp_starts), cast=False)
    return Kept(*blocks, _kernels.device_array(first.data, 0, kept, np.int64),
                _kernels.device_array(last.data, 0, kept, np.int64), nnz, warp_block,
                warp_starts)


def _scan_blocks(c_keys: Any, counts: Counts, c_ptr: Any, outputs: tuple[Any, ...]) -> None:
    """Launch ``bmsparse_compact_scan_blocks``: the scan of ``counts.sizes`` and
    the kept blocks written to ``outputs`` (keys, bitmaps, offsets, first,
    last) in one launch."""
    n = c_keys.shape[0]
    state, ntiles = scan_state(n)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_compact_scan_blocks")
    _kernels.launch(kernel, ntiles * SCAN_THREADS,
                    (counts.sizes, np.int64(n), np.int64(counts.shift), c_keys, counts.bitmaps,
                     c_ptr, np.uint64(state.ptr), np.int64(ntiles), *outputs),
                    block=SCAN_THREADS, cast=False)


def _sizes(xp: Any, counts: Counts, total: int | None = None) -> tuple[int, int, Any]:
    """nnz, the number of non-empty blocks, and their inclusive rank (None when
    the scan is packed: it holds them); ``total`` is the scan's last value
    when the caller has read it."""
    if total is None:
        # sync: the number of values and of non-empty blocks
        total = _readback.read_last(counts.scan)
    if counts.shift:
        return total >> counts.shift, total & ((1 << counts.shift) - 1), None
    rank = cumsum(xp, _nonempty(xp, counts.bitmaps))
    n = counts.bitmaps.shape[0]
    # sync: only past pack_shift's limit
    return total, _readback.read_last(rank) if n else 0, rank


def compact(c_keys: Any, c_bitmaps: Any, c_offsets: Any, c_values: Any,
            c_nonzero: Any, zeros: Any) -> tuple[Any, Any, Any, Any]:
    """Keep only the entries whose value is not exactly zero.

    Parameters
    ----------
    c_keys, c_bitmaps : uint64 [c_nblocks]
    c_offsets : int64 [c_nblocks + 1]
    c_values : T [nnz]
    c_nonzero : uint64 [c_nblocks] or None
        Subset of ``c_bitmaps``: the entries to keep; None to find them from
        the values (see :func:`nonzero_bits`).
    zeros : uint64 [1], _readback.HostFlag or int
        Non-zero when something is to be dropped (a count of zero values or
        of blocks holding one, or a flag the multiply set); an int when the
        caller already read it.

    Returns
    -------
    keys, bitmaps, offsets, values
        The compacted blocks, in the same order; the inputs themselves when
        nothing is dropped.

    Notes
    -----
    On the GPU it syncs once to learn whether anything is dropped (unless
    ``zeros`` is an int), and once more to size the result when something is:
    the kept values and blocks come from one scan, as in the count stage.
    """
    xp = get_array_module(c_keys, c_bitmaps, c_offsets, c_values, c_nonzero)
    if not _anything_to_drop(zeros):
        return c_keys, c_bitmaps, c_offsets, c_values
    shift = pack_shift(c_keys.shape[0])
    if c_nonzero is None:
        c_nonzero, sizes = nonzero_sizes(c_bitmaps, c_offsets, c_values, shift)
    else:
        sizes = packed_sizes(c_nonzero, shift)
    n = c_keys.shape[0]
    if shift and n:
        # sync: the kept values and blocks, written to host memory by the scan
        scan, (total,) = scan_totals(xp, sizes, n)
        kept_counts = Counts(c_nonzero, scan, shift)
        new_nnz, kept, rank = _sizes(xp, kept_counts, total)
    else:
        kept_counts = Counts(c_nonzero, exclusive_scan(xp, sizes), shift)
        new_nnz, kept, rank = _sizes(xp, kept_counts)
    if xp is not np:
        return _compact_cuda(c_keys, c_bitmaps, c_nonzero, c_offsets, kept_counts.scan, rank,
                             shift, c_values, kept, new_nnz)
    values = _compact_numpy(c_bitmaps, c_nonzero, c_values)
    return (*_keep_blocks(xp, c_keys, c_nonzero, kept_counts.offsets(), rank, kept), values)


def compact_csr(indptr: Any, indices: Any, data: Any, zeros: Any) -> tuple[Any, Any, Any]:
    """:func:`compact` of C in CSR (``multiply.multiply_csr``'s output).

    Parameters
    ----------
    indptr : I [m + 1]
    indices : I [nnz]
    data : T [nnz]
    zeros : uint64 [1], _readback.HostFlag or int
        As :func:`compact`.

    Returns
    -------
    indptr, indices, data
        Without the exact zeros (NaN stays); the inputs when nothing is dropped.

    Notes
    -----
    Syncs once to learn whether anything is dropped. Exact cancellations are
    rare, so what is dropped is found with the array library's own scans.
    """
    if not _anything_to_drop(zeros):
        return indptr, indices, data
    xp = get_array_module(indptr, indices, data)
    keep = data != 0
    kept_before = xp.zeros(data.shape[0] + 1, dtype=np.int64)
    xp.cumsum(keep, out=kept_before[1:])
    return kept_before[indptr].astype(indptr.dtype), indices[keep], data[keep]


def _anything_to_drop(zeros: Any) -> int:
    if isinstance(zeros, int):
        return zeros
    # sync: most products drop nothing
    if isinstance(zeros, _readback.HostFlag):
        return zeros.read()
    return _readback.read_last(zeros)


def nonzero_bits(c_bitmaps: Any, c_offsets: Any, c_values: Any) -> Any:
    """The bits (uint64 [c_nblocks]) of each block whose value is not exactly zero."""
    return nonzero_sizes(c_bitmaps, c_offsets, c_values, 0)[0]


def nonzero_sizes(c_bitmaps: Any, c_offsets: Any, c_values: Any,
                  shift: int) -> tuple[Any, Any]:
    """:func:`nonzero_bits` and their :func:`count.packed_sizes` (int64), in one pass."""
    xp = get_array_module(c_bitmaps, c_offsets, c_values)
    if xp is np:
        owner, bit = set_bits(c_bitmaps)
        keep = c_values != 0
        out = np.zeros(c_bitmaps.shape[0], dtype=np.uint64)
        np.bitwise_or.at(out, owner[keep], np.uint64(1) << bit[keep].astype(np.uint64))
        return out, packed_sizes(out, shift)
    n = c_bitmaps.shape[0]
    out = xp.empty(n, dtype=xp.uint64)
    sizes = xp.empty(n, dtype=xp.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_compact_nonzero_bits", T=c_values.dtype)
    _kernels.launch(kernel, n, (c_bitmaps, c_offsets, c_values, n, shift, out, sizes))
    return out, sizes


def _nonempty(xp: Any, bitmaps: Any) -> Any:
    """1 where a bitmap is not empty, else 0 (int64)."""
    if xp is np:
        return (bitmaps != 0).astype(np.int64)
    return _nonempty_kernel()(bitmaps)


_NONEMPTY = None


def _nonempty_kernel() -> Any:
    # one launch instead of a comparison and a cast
    global _NONEMPTY
    if _NONEMPTY is None:
        import cupy

        _NONEMPTY = cupy.ElementwiseKernel("uint64 b", "int64 f", "f = b != 0",
                                           "bmsparse_compact_nonempty")
    return _NONEMPTY


def _keep_blocks(xp: Any, c_keys: Any, new_bitmaps: Any, new_offsets: Any, rank: Any,
                 kept: int, c_ptr: Any = None, shift: int = 0,
                 nnz: int | None = None) -> tuple[Any, ...]:
    """Keys, bitmaps and offsets of the blocks whose new bitmap is not empty,
    and when ``c_ptr`` is given their task runs (first, last), ``Kept.warp_block``
    and ``Kept.warp_starts`` (None on the host); ``nnz``, their number of
    values, comes with ``c_ptr``, which the GPU needs (only
    :func:`drop_empty` runs this there).

    ``rank`` is the inclusive scan of ``new_bitmaps != 0`` and ``kept`` its
    last value, known on the host. On the GPU with ``shift``, ``new_offsets``
    is a packed scan (``count.Counts``) that holds the ranks, and ``rank`` is
    None.
    """
    if xp is np:
        keep = np.flatnonzero(new_bitmaps)
        out = (c_keys[keep], new_bitmaps[keep],
               np.append(new_offsets[keep], new_offsets[-1]).astype(np.int64))
        return out if c_ptr is None else (*out, c_ptr[keep], c_ptr[keep + 1], None, None)
    n = c_keys.shape[0]
    # C's blocks in one allocation; the kernel writes every offset (the last
    # by block n - 1's thread: n > 0 here, as a block is dropped)
    out_keys, out_bitmaps, out_offsets = _kernels.block_arrays(_kernels.alloc_blocks(kept), kept)
    # the task runs and the warps' words, which die after the multiply
    first, last, warp_block, warp_starts = _kernels.device_arrays(
        (kept, np.int64), (kept, np.int64), *warp_specs(nnz), zeroed=1)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_compact_blocks")
    _kernels.launch(kernel, n, (c_keys, new_bitmaps, new_offsets, _kernels.or_null(rank),
                                np.int64(shift), c_ptr, np.int64(n), out_keys, out_bitmaps,
                                out_offsets, first, last, warp_block, warp_starts), cast=False)
    return out_keys, out_bitmaps, out_offsets, first, last, warp_block, warp_starts


def _compact_cuda(c_keys, c_bitmaps, c_nonzero, c_offsets, new_offsets, rank, shift,
                  c_values, kept, new_nnz):
    """The kept blocks and values, in one launch."""
    # C's keys, bitmaps and offsets in one raw allocation, its values in
    # another; the kernel writes every offset, the last by the last block's
    # thread
    c_nblocks = c_bitmaps.shape[0]
    blocks = _kernels.alloc_blocks(kept)
    if not c_nblocks:  # no thread writes the one offset
        blocks.memset_async(0, 8)
    out_keys, out_bitmaps, out_offsets = _kernels.block_arrays(blocks, kept)
    new_values = _kernels.device_empty(new_nnz, c_values.dtype)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_compact_values", T=c_values.dtype)
    _kernels.launch(kernel, c_nblocks, (
        c_keys, c_bitmaps, c_nonzero, c_offsets, new_offsets,
        np.uint64(0) if rank is None else rank, np.int64(shift), c_values, np.int64(c_nblocks),
        out_keys, out_bitmaps, out_offsets, new_values))
    return out_keys, out_bitmaps, out_offsets, new_values


def _compact_numpy(c_bitmaps: np.ndarray, c_nonzero: np.ndarray,
                   c_values: np.ndarray) -> np.ndarray:
    owner, bit = set_bits(c_bitmaps)
    kept = (c_nonzero[owner] >> bit.astype(np.uint64)) & np.uint64(1)
    return c_values[kept.astype(bool)]
