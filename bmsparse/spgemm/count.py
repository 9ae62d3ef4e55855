"""Stage 2 of SpGEMM: exact output bitmaps, their popcounts and offsets.

The bitmap of an output block is the OR over its pairs of the Boolean 8x8
products of the input bitmaps. One scan of the popcounts, each packed with a
flag for a non-empty bitmap, gives the offsets of each output block's values
and the places of the non-empty blocks (see :class:`Counts`). See ``count.cu``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import _kernels, _readback
from .._format import BLOCK, popcount, transpose_bitmaps
from .._primitives import exclusive_scan
from .._sputils import get_array_module

_KERNELS = "spgemm/count.cu"
_kernels.register(_KERNELS, {"bmsparse_count_bitmaps": (),
                             "bmsparse_count_tasks": (),
                             "bmsparse_count_masked_bitmaps": (),
                             "bmsparse_count_pairs": ()})

_LOW_BITS = np.uint64(0x0101010101010101)


class PairBlocks(NamedTuple):
    """Each task's two blocks as the multiply reads them (``multiply.cuh``'s
    PairRecords): one step of loads per pair instead of two (the tasks'
    indices, then the blocks). The count stage writes them while it holds
    the bitmaps.

    bitmaps : uint64 [ntasks, 2]
        A's and B's block bitmap of each task.
    columns : uint64 [ntasks, 2]
        B's bitmap transposed (a column of B's block is a row of it), then
        the two blocks' value offsets as int32 [2], A's first (operands of
        fewer than :data:`MAX_RECORD_VALUES` values: see :func:`records_fit`).
    """

    bitmaps: Any
    columns: Any

    @property
    def offsets(self) -> Any:
        """A's and B's value offset of each task (int32 [ntasks, 2], a copy)."""
        xp = get_array_module(self.columns)
        return xp.ascontiguousarray(self.columns[:, 1]).view(np.int32).reshape(-1, 2)


#: operands with this many values or more have offsets beyond int32: their
#: products read the pairs through the tasks' indices instead of PairBlocks
MAX_RECORD_VALUES = 1 << 31


def records_fit(a_nnz: int, b_nnz: int) -> bool:
    """Whether the :class:`PairBlocks` of A and B (their numbers of values)
    hold their offsets."""
    return max(a_nnz, b_nnz) < MAX_RECORD_VALUES


def pair_blocks(a_bitmaps: Any, a_offsets: Any, b_bitmaps: Any, b_offsets: Any, task_a: Any,
                task_b: Any) -> PairBlocks:
    """:class:`PairBlocks` of the tasks ``(task_a, task_b)`` (int64 [ntasks]),
    gathered: what ``count.cu`` writes on the GPU. The offsets must
    :func:`records_fit`."""
    xp = get_array_module(a_bitmaps, b_bitmaps, task_a, task_b)
    b_of_task = b_bitmaps[task_b]
    offsets = xp.stack((a_offsets[task_a], b_offsets[task_b]), axis=1).astype(np.int32)
    columns = xp.stack((transpose_bitmaps(b_of_task), offsets.view(np.uint64)[:, 0]), axis=1)
    return PairBlocks(xp.stack((a_bitmaps[task_a], b_of_task), axis=1), columns)


class Counts(NamedTuple):
    """The output bitmaps and the one scan that sizes C.

    bitmaps : uint64 [c_nblocks]
    scan : int64 [c_nblocks + 1] or None
        Exclusive scan of ``popcount(bitmap) << shift | (bitmap != 0)``: the
        values before each block in the high bits and the non-empty blocks
        before it in the low ``shift`` bits. With ``shift == 0`` (more output
        blocks than :func:`pack_shift` can pack) the scan of the popcounts.
    shift : int
    pairs : PairBlocks or None
        The tasks' blocks, when :func:`count` was given the offsets.
    total : _readback.Pending or None
        On the GPU, for an unsized task list of at least one block counted by
        tasks with a packed scan: the scan's total on its way to the host,
        summed by the count kernel (so that the host learns C's sizes while
        the GPU scans and compacts). The scan is then left to
        ``compact.drop_empty``, which scans ``sizes`` in the launch that
        drops the empty blocks: ``scan`` is None.
    sizes : int64 [c_nblocks] or None
        With ``total``: the scan's items.
    """

    bitmaps: Any
    scan: Any
    shift: int
    pairs: PairBlocks | None = None
    total: _readback.Pending | None = None
    sizes: Any = None

    def offsets(self) -> Any:
        """Value offsets (int64 [c_nblocks + 1]); ``offsets[-1]`` is nnz(C)."""
        return self.scan >> self.shift if self.shift else self.scan


def pack_shift(c_nblocks: int) -> int:
    """Low bits that hold a count of blocks next to a count of values (at most 64
    per block) in one int64 scan; 0 when both do not fit in 63 bits."""
    shift = max(c_nblocks.bit_length(), 1)
    return shift if (64 * c_nblocks).bit_length() + shift <= 63 else 0


def packed_sizes(bitmaps: Any, shift: int) -> Any:
    """``popcount(bitmaps) << shift | (bitmaps != 0)`` (int64; the popcount alone
    when ``shift`` is 0): the items of a :class:`Counts` scan."""
    xp = get_array_module(bitmaps)
    if xp is not np:
        return _packed_sizes_kernel()(bitmaps, shift)
    sizes = popcount(bitmaps)
    return (sizes << shift) | (bitmaps != 0) if shift else sizes


_PACKED_SIZES = None


def _packed_sizes_kernel() -> Any:
    global _PACKED_SIZES
    if _PACKED_SIZES is None:
        import cupy

        _PACKED_SIZES = cupy.ElementwiseKernel(
            "uint64 b, int64 shift", "int64 s",
            "s = shift ? ((long long)__popcll(b) << shift) | (long long)(b != 0)"
            " : (long long)__popcll(b)",
            "bmsparse_count_packed_sizes")
    return _PACKED_SIZES


def count(a_bitmaps: Any, b_bitmaps: Any, task_a: Any, task_b: Any,
          c_ptr: Any, c_allowed: Any = None,
          offsets: tuple[Any, Any] | None = None, listed: Any = None,
          task_block: Any = None) -> Counts:
    """Bitmaps of the output blocks, and the scan giving their value offsets and
    which are empty.

    Parameters
    ----------
    a_bitmaps, b_bitmaps : uint64 [a_nblocks], [b_nblocks]
    task_a, task_b : int64 [ntasks]
        Tasks grouped by output block (see ``tasks``).
    c_ptr : int64 [c_nblocks + 1]
        Run boundaries of each output block's tasks.
    c_allowed : uint64 [c_nblocks], optional
        The bits each output block may have (a mask's bitmaps, or
        :func:`outside_bits` for its complement).
    offsets : (int64 [a_nblocks + 1], int64 [b_nblocks + 1]), optional
        A's and B's value offsets, when :func:`records_fit`: the tasks'
        :class:`PairBlocks` are then written too, for the multiply.
    listed : int64 [1], optional
        On the GPU without ``c_allowed``: the number of output blocks, on the
        device (``tasks.TaskList.c_nblocks``), of which ``c_ptr`` holds the
        first; the blocks past it come out empty (the scan adds nothing for
        them).
    task_block : int32 [ntasks], optional
        On the GPU without ``c_allowed``: the output block of each task
        (``tasks.TaskList.task_block``); the count then runs a thread per
        task instead of per output block (the same results).

    Returns
    -------
    Counts
        A block's pairs can all have empty Boolean products; such blocks have
        an empty bitmap here and are dropped by ``compact.drop_empty``.
    """
    xp = get_array_module(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr, c_allowed)
    shift = pack_shift(c_ptr.shape[0] - 1)
    if xp is np:
        c_bitmaps = _count_numpy(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr)
        if c_allowed is not None:
            c_bitmaps &= c_allowed
        c_sizes = packed_sizes(c_bitmaps, shift)
        pairs = None if offsets is None else pair_blocks(a_bitmaps, offsets[0], b_bitmaps,
                                                         offsets[1], task_a, task_b)
        total = None
    else:
        c_bitmaps, c_sizes, pairs, total = _count_cuda(a_bitmaps, b_bitmaps, task_a, task_b,
                                                       c_ptr, c_allowed, shift, offsets,
                                                       listed, task_block)
    if total is not None:
        return Counts(c_bitmaps, None, shift, pairs, total, c_sizes)
    return Counts(c_bitmaps, exclusive_scan(xp, c_sizes), shift, pairs)


def _records(ntasks: int, offsets: tuple[Any, Any] | None) -> tuple[PairBlocks | None,
                                                                     tuple[Any, ...]]:
    """The tasks' :class:`PairBlocks` (uninitialised; None without ``offsets``)
    and the count kernels' arguments that write them: A's and B's offsets,
    then the records' arrays (null pointers without)."""
    if offsets is None:
        null = _kernels.NULL
        return None, (null, null, null, null)
    pairs = PairBlocks(*_kernels.device_arrays(((ntasks, 2), np.uint64),
                                               ((ntasks, 2), np.uint64)))
    return pairs, (*offsets, *pairs)


def _count_cuda(a_bitmaps: Any, b_bitmaps: Any, task_a: Any, task_b: Any, c_ptr: Any,
                c_allowed: Any, shift: int, offsets: tuple[Any, Any] | None,
                listed: Any, task_block: Any) -> tuple[Any, Any, PairBlocks | None, Any]:
    """C's bitmaps, the scan's items, the records, and the items' sum being
    read (``Counts.total``; None unless counted by tasks with ``listed``,
    a packed scan and a block)."""
    c_nblocks = c_ptr.shape[0] - 1
    # C's bitmaps may become the product's: an allocation of their own
    c_bitmaps = _kernels.device_empty(c_nblocks, np.uint64)
    threads = c_nblocks
    total = None
    if c_allowed is None and task_block is not None:
        kernel = _kernels.get_kernel(_KERNELS, "bmsparse_count_tasks")
        threads = task_a.shape[0]  # at least c_nblocks
        args = (a_bitmaps, b_bitmaps, task_a, task_b, task_block, np.int64(threads), c_ptr)
        if listed is not None and shift and c_nblocks:
            total = _kernels.device_arrays((1, np.int64), zeroed=1)[0]
        tail = (_kernels.or_null(listed), _kernels.or_null(total))
    elif c_allowed is None:
        kernel = _kernels.get_kernel(_KERNELS, "bmsparse_count_bitmaps")
        args, tail = (a_bitmaps, b_bitmaps, task_a, task_b, c_ptr), (_kernels.or_null(listed),)
    else:
        kernel = _kernels.get_kernel(_KERNELS, "bmsparse_count_masked_bitmaps")
        args, tail = (a_bitmaps, b_bitmaps, task_a, task_b, c_ptr, c_allowed), ()
    # the sizes die with the scan, the records after the multiply
    c_sizes = _kernels.device_empty(c_nblocks, np.int64)
    pairs, records = _records(task_a.shape[0], offsets)
    _kernels.launch(kernel, threads, (*args, np.int64(c_nblocks), np.int64(shift), c_bitmaps,
                                        c_sizes, *records, *tail), cast=False)
    return c_bitmaps, c_sizes, pairs, None if total is None else _readback.read_later((total, 0))


def outside_bits(c_keys: Any, m_keys: Any, m_bitmaps: Any) -> Any:
    """The bits (uint64 [c_nblocks]) a complemented mask lets each output block
    have: those the mask's block at its key does not have.

    Parameters
    ----------
    c_keys : uint64 [c_nblocks]
        Output block keys, increasing.
    m_keys, m_bitmaps : uint64 [m_nblocks]
        The mask's blocks.
    """
    xp = get_array_module(c_keys, m_keys, m_bitmaps)
    if m_keys.shape[0] == 0:
        return xp.full(c_keys.shape[0], np.uint64(0xFFFFFFFFFFFFFFFF), dtype=xp.uint64)
    pos = xp.minimum(xp.searchsorted(m_keys, c_keys), m_keys.shape[0] - 1)
    inside = xp.where(m_keys[pos] == c_keys, m_bitmaps[pos], xp.uint64(0))
    # bits outside the shape are never set by a product, so ~ needs no clipping
    return ~inside


def pair_counts(a_bitmaps: Any, b_bitmaps: Any, task_a: Any, task_b: Any, c_ptr: Any,
                c_allowed: Any) -> Any:
    """Per output block, the number of (r, t, c) with A[r, t], B[t, c] and (r, c) allowed.

    Parameters
    ----------
    a_bitmaps, b_bitmaps, task_a, task_b, c_ptr
        As for :func:`count`.
    c_allowed : uint64 [c_nblocks]

    Returns
    -------
    int64 [c_nblocks]
        The masked ``plus_pair`` sums of the blocks, without their values.
    """
    xp = get_array_module(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr, c_allowed)
    c_nblocks = c_ptr.shape[0] - 1
    if xp is np:
        return _pair_counts_numpy(a_bitmaps, b_bitmaps, task_a, task_b, c_ptr, c_allowed)
    c_pairs = xp.empty(c_nblocks, dtype=xp.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_count_pairs")
    _kernels.launch(kernel, c_nblocks, (a_bitmaps, b_bitmaps, task_a, task_b, c_ptr, c_allowed,
                                        c_nblocks, c_pairs))
    return c_pairs


def _rank_one(a: np.ndarray, b: np.ndarray, t: int) -> np.ndarray:
    """Bits (r, c) with a[r, t] and b[t, c]: column t of ``a`` times row t of ``b``."""
    a_col = ((a >> np.uint64(t)) & _LOW_BITS) * np.uint64(0xFF)
    b_row = ((b >> np.uint64(BLOCK * t)) & np.uint64(0xFF)) * _LOW_BITS
    return a_col & b_row


def bool_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Boolean 8x8 products of bitmap arrays ``a`` and ``b`` (uint64)."""
    c = np.zeros(np.broadcast(a, b).shape, dtype=np.uint64)
    for t in range(BLOCK):  # the 8 inner indices of one block, not the data
        c |= _rank_one(a, b, t)
    return c


def _pair_counts_numpy(a_bitmaps: np.ndarray, b_bitmaps: np.ndarray, task_a: np.ndarray,
                       task_b: np.ndarray, c_ptr: np.ndarray,
                       c_allowed: np.ndarray) -> np.ndarray:
    owner = np.repeat(np.arange(c_ptr.shape[0] - 1), np.diff(c_ptr))
    a, b, allowed = a_bitmaps[task_a], b_bitmaps[task_b], c_allowed[owner]
    pairs = np.zeros(task_a.shape[0], dtype=np.int64)
    for t in range(BLOCK):  # the 8 inner indices of one block, not the data
        pairs += popcount(_rank_one(a, b, t) & allowed)
    c_pairs = np.zeros(c_ptr.shape[0] - 1, dtype=np.int64)
    np.add.at(c_pairs, owner, pairs)  # bincount's weights would round above 2**53
    return c_pairs


def _count_numpy(a_bitmaps: np.ndarray, b_bitmaps: np.ndarray, task_a: np.ndarray,
                 task_b: np.ndarray, c_ptr: np.ndarray) -> np.ndarray:
    products = bool_product(a_bitmaps[task_a], b_bitmaps[task_b])
    out = np.zeros(c_ptr.shape[0] - 1, dtype=np.uint64)
    # a masked task list can have empty runs, where reduceat would not give 0
    filled = c_ptr[1:] > c_ptr[:-1]
    if products.size:
        out[filled] = np.bitwise_or.reduceat(products, c_ptr[:-1][filled])
    return out
