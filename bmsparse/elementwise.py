"""Element-wise sums, differences and products of two bitmap matrices.

The size of C is not known before its blocks are merged, but it is bounded:
at most ``a_nblocks + b_nblocks`` blocks and ``a_nnz + b_nnz`` values (for an
intersection, the smaller of the two). Every array is allocated with that
bound, the device counts what it fills, and the host reads the counts once,
at the end (``elementwise.cu`` draws the whole scheme):

1. :func:`match_blocks` finds each block's key in the other operand (a
   binary search) and what the block adds to the positions after it.
2. An exclusive scan of that gives every block of C its position (a merge
   without a sort), and :func:`scatter_blocks` writes C's keys, its blocks
   of A and B, and the OR (XOR, AND) of their bitmaps.
3. An exclusive scan of the popcounts gives C's offsets.
4. :func:`merge_values` computes every entry, values taken by their rank in
   the block, and counts the blocks holding an exact zero.
5. :func:`read_sizes` is the one read: the number of blocks, of values and
   of blocks holding a zero. Only when there is a zero,
   ``spgemm.compact.compact`` drops it, as scipy does.

Bool (pattern) matrices need no values: their sum is the OR of the bitmaps,
their difference the XOR (scipy's ``True - True`` is a dropped 0) and their
product the AND; stages 1-3 and the read are all they take.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _kernels, _readback
from ._format import popcount, set_bits, value_index
from ._primitives import exclusive_scan
from ._sputils import get_array_module, upcast

_KERNELS = "elementwise.cu"
#: operation -> kernel
OPS = {"plus": "bmsparse_elementwise_plus", "minus": "bmsparse_elementwise_minus",
       "times": "bmsparse_elementwise_times"}
_kernels.register(_KERNELS, {"bmsparse_elementwise_match": (),
                             "bmsparse_elementwise_scatter": (),
                             **{name: ("T",) for name in OPS.values()}})

#: how the bitmaps of two blocks with the same key combine (``combine`` of
#: the kernels, ``BMSPARSE_COMBINE_*`` in elementwise.cu)
OR, XOR, AND = 0, 1, 2
_COMBINE = {OR: np.bitwise_or, XOR: np.bitwise_xor, AND: np.bitwise_and}

#: a result keeps views into its bound-sized buffers unless the unused part
#: is larger than the used part and than this many elements; then it is
#: copied to its exact size (tests lower it)
MIN_WASTE = 1 << 16


def elementwise(a: Any, b: Any, op: str) -> Any:
    """``a + b`` (op "plus"), ``a - b`` ("minus") or ``a.multiply(b)`` ("times").

    Parameters
    ----------
    a, b : BitmapMatrix
        Same shape, both on the host or both on the GPU.
    op : {"plus", "minus", "times"}

    Returns
    -------
    BitmapMatrix
        Of dtype ``numpy.result_type(a.dtype, b.dtype)``, with the structure
        of scipy's ``csr_array`` result: entries that come out exactly zero
        are dropped (stored zeros of the operands too). Its arrays may be
        views into larger buffers (the bounds C was computed in), unless
        more than half of a buffer would be unused (see ``MIN_WASTE``).

    Raises
    ------
    ValueError
        The shapes differ.
    TypeError
        One operand on the host and one on the GPU, or an unsupported dtype.

    Notes
    -----
    O((a_nblocks + b_nblocks) log + a_nnz + b_nnz) work and memory. On the
    GPU: five launches and one sync; when a result is exactly zero,
    compaction syncs twice more. Deterministic: one operation per entry.

    Examples
    --------
    >>> import numpy as np
    >>> from bmsparse import BitmapMatrix
    >>> a = BitmapMatrix(np.array([[1.0, 0], [2, 3]]))
    >>> b = BitmapMatrix(np.array([[-1.0, 4], [0, 0]]))
    >>> (a + b).toarray(), (a + b).nnz
    (array([[0., 4.],
           [2., 3.]]), 3)
    """
    from ._matrix import BitmapMatrix
    from .spgemm.compact import compact

    if a.shape != b.shape:
        raise ValueError(f"inconsistent shapes {a.shape} and {b.shape}")
    dtype = upcast(a.dtype, b.dtype)
    combine = AND if op == "times" else XOR if dtype == np.bool_ and op == "minus" else OR
    c_keys, c_a, c_b, c_bitmaps, c_offsets, c_sizes = _merge(a.keys, a.bitmaps, b.keys,
                                                             b.bitmaps, combine)
    if dtype == np.bool_:
        nc, nnz, _ = read_sizes(c_sizes, c_offsets)
        return BitmapMatrix._from_blocks(*_fit_blocks(c_keys, c_bitmaps, c_offsets, nc), None,
                                         a.shape, nnz=nnz)
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    values_bound = min(a.nnz, b.nnz) if combine == AND else a.nnz + b.nnz
    c_values, c_nonzero = merge_values(op, a.bitmaps, a.offsets, a.values, b.bitmaps,
                                       b.offsets, b.values, c_a, c_b, c_bitmaps, c_offsets,
                                       c_sizes, values_bound)
    nc, nnz, zero_blocks = read_sizes(c_sizes, c_offsets)
    if zero_blocks:
        arrays = compact(c_keys[:nc], c_bitmaps[:nc], c_offsets[:nc + 1], c_values[:nnz],
                         c_nonzero[:nc], zero_blocks)
    else:
        arrays = (*_fit_blocks(c_keys, c_bitmaps, c_offsets, nc),
                  _cut(c_values, nnz, _wasteful(nnz, c_values.shape[0])))
    return BitmapMatrix._from_blocks(*arrays, a.shape)


def _merge(a_keys: Any, a_bitmaps: Any, b_keys: Any, b_bitmaps: Any,
           combine: int) -> tuple[Any, Any, Any, Any, Any, Any]:
    """Stages 1-3: C's block arrays in bound-sized buffers, its offsets, and
    ``c_sizes`` (see :func:`scatter_blocks`); no sync."""
    xp = get_array_module(a_keys, a_bitmaps, b_keys, b_bitmaps)
    rank, step = match_blocks(a_keys, a_bitmaps, b_keys, b_bitmaps, combine)
    c_keys, c_a, c_b, c_bitmaps, c_counts, c_sizes = scatter_blocks(
        a_keys, a_bitmaps, b_keys, b_bitmaps, combine, rank, exclusive_scan(xp, step))
    return c_keys, c_a, c_b, c_bitmaps, exclusive_scan(xp, c_counts), c_sizes


def block_bound(a_nblocks: int, b_nblocks: int, combine: int) -> int:
    """The most blocks C can have: the length of its block buffers."""
    return min(a_nblocks, b_nblocks) if combine == AND else a_nblocks + b_nblocks


def match_blocks(a_keys: Any, a_bitmaps: Any, b_keys: Any, b_bitmaps: Any,
                 combine: int) -> tuple[Any, Any]:
    """Stage 1: each block's match in the other operand, and its step.

    Parameters
    ----------
    a_keys, a_bitmaps, b_keys, b_bitmaps : uint64 [a_nblocks], [b_nblocks]
        Canonical blocks of A and B.
    combine : OR, XOR or AND
        OR and XOR take the union of the keys, AND the intersection.

    Returns
    -------
    rank : int64 [n]
        For A's blocks, then (for a union) B's: the other operand's block
        with the same key, or ``-1 - (number of its keys below)``.
        ``n = a_nblocks + b_nblocks`` for a union, ``a_nblocks`` otherwise.
    step : int64 [n]
        What each block adds to the positions in C of the blocks after it,
        beyond their ranks: for A, kept - matched (union) or kept
        (intersection); for B, 1 when unmatched, -1 when matched and
        dropped (a XOR of equal bitmaps), else 0.
    """
    xp = get_array_module(a_keys, a_bitmaps, b_keys, b_bitmaps)
    if xp is np:
        return _match_numpy(a_keys, a_bitmaps, b_keys, b_bitmaps, combine)
    na, nb = a_keys.shape[0], b_keys.shape[0]
    n = na if combine == AND else na + nb
    rank = xp.empty(n, dtype=xp.int64)
    step = xp.empty(n, dtype=xp.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_elementwise_match")
    _kernels.launch(kernel, n, (a_keys, a_bitmaps, na, b_keys, b_bitmaps, nb, combine, rank,
                                step))
    return rank, step


def _match_numpy(a_keys, a_bitmaps, b_keys, b_bitmaps, combine):
    rank_a, hit_a, b_at_a = _search(b_keys, b_bitmaps, a_keys)
    kept_a = (_COMBINE[combine](a_bitmaps, b_at_a) != 0).astype(np.int64)
    if combine == AND:
        return rank_a, kept_a
    rank_b, hit_b, a_at_b = _search(a_keys, a_bitmaps, b_keys)
    dropped_b = (_COMBINE[combine](a_at_b, b_bitmaps) == 0).astype(np.int64)
    step_b = np.where(hit_b, -dropped_b, 1)
    return (np.concatenate([rank_a, rank_b]),
            np.concatenate([kept_a - hit_a, step_b]).astype(np.int64))


def _search(keys: np.ndarray, bitmaps: np.ndarray,
            query: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank (as :func:`match_blocks` encodes it), match flag and matched
    bitmap (0 for none) of each ``query`` key among ``keys``."""
    below = np.searchsorted(keys, query).astype(np.int64)
    hit = (below < keys.shape[0]) & (_at(keys, below) == query)
    return (np.where(hit, below, -1 - below), hit,
            np.where(hit, _at(bitmaps, below), np.uint64(0)))


def _at(a: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``a[index]`` with ``index`` clipped into ``a`` (zeros when ``a`` is empty)."""
    if a.shape[0] == 0:
        return np.zeros(index.shape, dtype=a.dtype)
    return a[np.minimum(index, a.shape[0] - 1)]


def scatter_blocks(a_keys: Any, a_bitmaps: Any, b_keys: Any, b_bitmaps: Any, combine: int,
                   rank: Any, before: Any) -> tuple[Any, Any, Any, Any, Any, Any]:
    """Stage 2: write C's blocks in key order into buffers of the bound's length.

    Parameters
    ----------
    a_keys, a_bitmaps, b_keys, b_bitmaps, combine
        As for :func:`match_blocks`.
    rank : int64 [n]
        From :func:`match_blocks`.
    before : int64 [n + 1]
        Exclusive scan of its ``step``.

    Returns
    -------
    c_keys, c_bitmaps : uint64 [bound]
        C's keys and combined bitmaps (see :func:`block_bound`).
    c_a, c_b : int64 [bound]
        A's and B's block of each block of C, -1 where the operand has none.
    c_counts : int64 [bound]
        The popcount of each bitmap, 0 past C's blocks.
    c_sizes : int64 [3]
        ``[c_nblocks, 0, 0]``; :func:`merge_values` counts the blocks
        holding an exact zero at ``[2]`` (``[1]`` is unused: :func:`read_sizes`
        reads the number of values from the offsets). Only the first ``c_nblocks`` entries of the other
        arrays (but all of ``c_counts``) are defined.
    """
    xp = get_array_module(a_keys, a_bitmaps, b_keys, b_bitmaps, rank, before)
    na, nb = a_keys.shape[0], b_keys.shape[0]
    bound = block_bound(na, nb, combine)
    if xp is np:
        return _scatter_numpy(a_keys, a_bitmaps, b_keys, b_bitmaps, combine, rank, before,
                              bound)
    c_keys = xp.empty(bound, dtype=xp.uint64)
    c_a = xp.empty(bound, dtype=xp.int64)
    c_b = xp.empty(bound, dtype=xp.int64)
    c_bitmaps = xp.empty(bound, dtype=xp.uint64)
    c_counts = xp.empty(bound, dtype=xp.int64)
    c_sizes = xp.zeros(3, dtype=xp.int64)
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_elementwise_scatter")
    _kernels.launch(kernel, rank.shape[0], (a_keys, a_bitmaps, na, b_keys, b_bitmaps, nb,
                                            combine, rank, before, bound, c_keys, c_a, c_b,
                                            c_bitmaps, c_counts, c_sizes))
    return c_keys, c_a, c_b, c_bitmaps, c_counts, c_sizes


def _scatter_numpy(a_keys, a_bitmaps, b_keys, b_bitmaps, combine, rank, before, bound):
    na, n = a_keys.shape[0], rank.shape[0]
    union = combine != AND
    c_keys = np.zeros(bound, dtype=np.uint64)
    c_a = np.full(bound, -1, dtype=np.int64)
    c_b = np.full(bound, -1, dtype=np.int64)
    c_bitmaps = np.zeros(bound, dtype=np.uint64)
    hit = rank >= 0
    below = np.where(hit, rank, -1 - rank)
    hit_a, below_a = hit[:na], below[:na]
    bitmaps = _COMBINE[combine](a_bitmaps, np.where(hit_a, _at(b_bitmaps, below_a),
                                                    np.uint64(0)))
    kept = np.flatnonzero(bitmaps)
    q = (below_a[kept] if union else 0) + before[kept]
    c_keys[q], c_a[q], c_bitmaps[q] = a_keys[kept], kept, bitmaps[kept]
    c_b[q] = np.where(hit_a, below_a, -1)[kept]
    if union:
        only = np.flatnonzero(~hit[na:])
        q = below[na + only] + before[na + only] - before[na]
        c_keys[q], c_b[q], c_bitmaps[q] = b_keys[only], only, b_bitmaps[only]
    c_nblocks = na + before[n] - before[na] if union else before[n]
    c_sizes = np.array([c_nblocks, 0, 0], dtype=np.int64)
    return c_keys, c_a, c_b, c_bitmaps, popcount(c_bitmaps), c_sizes


def merge_values(op: str, a_bitmaps: Any, a_offsets: Any, a_values: Any, b_bitmaps: Any,
                 b_offsets: Any, b_values: Any, c_a: Any, c_b: Any, c_bitmaps: Any,
                 c_offsets: Any, c_sizes: Any, values_bound: int) -> tuple[Any, Any]:
    """Stage 4: values of C's entries and which of them are not zero.

    Parameters
    ----------
    op : {"plus", "minus", "times"}
    a_bitmaps, a_offsets, a_values : uint64 [a_nblocks], int64 [a_nblocks + 1], T [a_nnz]
    b_bitmaps, b_offsets, b_values : likewise for B (same dtype T)
    c_a, c_b, c_bitmaps : [bound], from :func:`scatter_blocks`
    c_offsets : int64 [bound + 1]
        Exclusive scan of its ``c_counts``.
    c_sizes : int64 [3]
        From :func:`scatter_blocks`; ``c_sizes[0]`` bounds the work, and the
        number of blocks holding an exact zero is added to ``c_sizes[2]``.
    values_bound : int
        At least ``c_offsets[-1]`` (known on the host without a sync).

    Returns
    -------
    c_values : T [values_bound]
        ``op(a, b)`` for every entry of ``c_bitmaps``, an absent operand
        being 0; defined up to ``c_offsets[-1]``.
    c_nonzero : uint64 [bound]
        The bits of ``c_bitmaps`` whose value is not exactly zero; defined
        for C's blocks.
    """
    xp = get_array_module(a_bitmaps, a_values, b_bitmaps, b_values, c_a, c_bitmaps, c_sizes)
    args = (a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values, c_a, c_b,
            c_bitmaps, c_offsets, c_sizes, values_bound)
    if xp is np:
        return _merge_values_numpy(op, *args)
    return _merge_values_cuda(op, *args)


def _merge_values_cuda(op, a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values,
                       c_a, c_b, c_bitmaps, c_offsets, c_sizes, values_bound):
    import cupy

    bound = c_bitmaps.shape[0]
    c_values = cupy.empty(values_bound, dtype=a_values.dtype)
    c_nonzero = cupy.empty(bound, dtype=cupy.uint64)
    kernel = _kernels.get_kernel(_KERNELS, OPS[op], T=a_values.dtype)
    _kernels.launch(kernel, 8 * bound, (
        a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values, c_a, c_b, c_bitmaps,
        c_offsets, c_sizes, c_values, c_nonzero))
    return c_values, c_nonzero


_NUMPY_OPS = {"plus": np.add, "minus": np.subtract, "times": np.multiply}


@np.errstate(invalid="ignore", over="ignore")  # inf - inf is NaN, as in scipy, silently
def _merge_values_numpy(op, a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values,
                        c_a, c_b, c_bitmaps, c_offsets, c_sizes, values_bound):
    from .spgemm.compact import nonzero_bits

    nc, nnz = int(c_sizes[0]), int(c_offsets[-1])
    owner, bit = set_bits(c_bitmaps[:nc])
    operands = []
    for src, bitmaps, offsets, values in ((c_a, a_bitmaps, a_offsets, a_values),
                                          (c_b, b_bitmaps, b_offsets, b_values)):
        block = src[owner]
        bm = np.where(block >= 0, _at(bitmaps, block), np.uint64(0))
        present = ((bm >> bit.astype(np.uint64)) & np.uint64(1)).astype(bool)
        out = np.zeros(nnz, dtype=values.dtype)
        where = np.flatnonzero(present)
        out[where] = values[offsets[block[where]] + value_index(bm[where], bit[where])]
        operands.append(out)
    c_values = np.zeros(values_bound, dtype=a_values.dtype)
    c_values[:nnz] = _NUMPY_OPS[op](*operands)
    c_nonzero = np.zeros(c_bitmaps.shape[0], dtype=np.uint64)
    c_nonzero[:nc] = nonzero_bits(c_bitmaps[:nc], c_offsets[:nc + 1], c_values[:nnz])
    c_sizes[2] += np.count_nonzero(c_nonzero[:nc] != c_bitmaps[:nc])
    return c_values, c_nonzero


def read_sizes(c_sizes: Any, c_offsets: Any) -> tuple[int, int, int]:
    """Stage 5: the number of C's blocks, of its values and of its blocks
    holding an exact zero (0 before :func:`merge_values`), in one read."""
    # sync: the sizes of C and whether a value is to be dropped, in one read
    nc, nnz, zero_blocks = _readback.read_ints((c_sizes, 0), (c_offsets, -1), (c_sizes, 2))
    return nc, nnz, zero_blocks


def _fit_blocks(c_keys: Any, c_bitmaps: Any, c_offsets: Any,
                nc: int) -> tuple[Any, Any, Any]:
    """The first ``nc`` blocks of the bound-sized block buffers."""
    copy = _wasteful(nc, c_keys.shape[0])
    return _cut(c_keys, nc, copy), _cut(c_bitmaps, nc, copy), _cut(c_offsets, nc + 1, copy)


def _wasteful(used: int, bound: int) -> bool:
    """True when the unused part of a buffer is larger than both the used
    part and ``MIN_WASTE``: a result should not hold twice its memory."""
    return bound - used > max(used, MIN_WASTE)


def _cut(buffer: Any, n: int, copy: bool) -> Any:
    """``buffer[:n]``, a view or an exact-size copy."""
    view = buffer[:n]
    return view.copy() if copy else view
