"""Element-wise sums, differences and products of two bitmap matrices.

1. :func:`merge_blocks` pairs the blocks of A and B by key: a union for
   ``A + B`` and ``A - B``, an intersection for ``A.multiply(B)``; each block
   of C learns its block of A and of B and the OR (AND) of their bitmaps.
2. :func:`merge_values` computes every entry, values taken by their rank in
   the block (``elementwise.cu``).
3. ``spgemm.compact.compact`` drops results that are exactly zero, as scipy
   does.

Bool (pattern) matrices need no values: their sum is the OR of the bitmaps,
their difference the XOR (scipy's ``True - True`` is a dropped 0) and their
product the AND.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _kernels
from ._format import popcount, set_bits, value_index
from ._primitives import exclusive_scan
from ._sputils import get_array_module, upcast

_KERNELS = "elementwise.cu"
#: operation -> kernel
OPS = {"plus": "bmsparse_elementwise_plus", "minus": "bmsparse_elementwise_minus",
       "times": "bmsparse_elementwise_times"}
_kernels.register(_KERNELS, {name: ("T",) for name in OPS.values()})


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
        are dropped (stored zeros of the operands too).

    Raises
    ------
    ValueError
        The shapes differ.
    TypeError
        One operand on the host and one on the GPU, or an unsupported dtype.

    Notes
    -----
    O((a_nblocks + b_nblocks) log + a_nnz + b_nnz) work. On the GPU it syncs
    twice (the size of C; whether a zero is dropped), and twice more when
    one is. Deterministic: one operation per entry.

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
    xp = get_array_module(a.keys, b.keys)
    dtype = upcast(a.dtype, b.dtype)
    union = op != "times"
    c_keys, c_a, c_b, c_bitmaps, nnz = merge_blocks(a.keys, a.bitmaps, b.keys, b.bitmaps,
                                                    union)
    if dtype == np.bool_:
        if op == "minus":
            # True - True is 0 and dropped; True - False and False - True are True
            c_bitmaps = _pad(xp, a.bitmaps)[c_a] ^ _pad(xp, b.bitmaps)[c_b]
            kept = c_bitmaps != 0
            c_keys, c_bitmaps = c_keys[kept], c_bitmaps[kept]
        return BitmapMatrix._from_blocks(c_keys, c_bitmaps, exclusive_scan(xp, popcount(
            c_bitmaps)), None, a.shape)
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    c_offsets = exclusive_scan(xp, popcount(c_bitmaps))
    c_values, c_nonzero, zero_blocks = merge_values(
        op, a.bitmaps, a.offsets, a.values, b.bitmaps, b.offsets, b.values, c_a, c_b,
        c_bitmaps, c_offsets, nnz)
    c_keys, c_bitmaps, c_offsets, c_values = compact(c_keys, c_bitmaps, c_offsets, c_values,
                                                     c_nonzero, zero_blocks)
    return BitmapMatrix._from_blocks(c_keys, c_bitmaps, c_offsets, c_values, a.shape)


def merge_blocks(a_keys: Any, a_bitmaps: Any, b_keys: Any, b_bitmaps: Any,
                 union: bool) -> tuple[Any, Any, Any, Any, int]:
    """The blocks of C: the union (or intersection) of A's and B's keys.

    Parameters
    ----------
    a_keys, a_bitmaps, b_keys, b_bitmaps : uint64 [a_nblocks], [b_nblocks]
        Canonical blocks of A and B.
    union : bool
        True: every key of A or B. False: the keys of both whose bitmaps
        intersect.

    Returns
    -------
    c_keys : uint64 [c_nblocks]
        Sorted.
    c_a, c_b : int64 [c_nblocks]
        A's and B's block of each C block, -1 where the operand has none.
    c_bitmaps : uint64 [c_nblocks]
        The OR (AND) of the operands' bitmaps.
    nnz : int
        The number of their bits.

    Notes
    -----
    Each key finds its rank in the other operand by binary search; a key's
    place in C is its rank in its own operand plus the number of keys of the
    other operand before it that C takes from there (a merge without a
    sort). One sync reads the sizes.
    """
    xp = get_array_module(a_keys, a_bitmaps, b_keys, b_bitmaps)
    na, nb = a_keys.shape[0], b_keys.shape[0]
    rank_a = xp.searchsorted(b_keys, a_keys).astype(xp.int64)  # B blocks before each A block
    a_match = _matches(xp, b_keys, rank_a, a_keys)
    # B's bitmap at each A block (0 where B has none)
    b_at_a = xp.where(a_match, _pad(xp, b_bitmaps)[xp.minimum(rank_a, nb)], xp.uint64(0))
    if union:
        rank_b = xp.searchsorted(a_keys, b_keys).astype(xp.int64)
        b_only = ~_matches(xp, a_keys, rank_b, b_keys)
        b_only_before = exclusive_scan(xp, b_only.astype(xp.int64))
        # A's blocks in C: those of A before them, plus the B-only blocks before them
        a_pos = xp.arange(na, dtype=xp.int64) + rank_a - exclusive_scan(
            xp, a_match.astype(xp.int64))[:-1]
        b_pos = rank_b + b_only_before[:-1]
        # sync: the size of C and of its values, in one read
        extra, nnz = (int(v) for v in xp.stack([
            b_only_before[-1], _bit_count(xp, a_bitmaps | b_at_a) + _bit_count(xp, b_bitmaps)
            - _bit_count(xp, b_at_a)]).tolist())
        nc = na + extra
        # dump slot nc takes the writes of the blocks that C takes from the other side
        c_keys = xp.empty(nc + 1, dtype=xp.uint64)
        c_a = xp.full(nc + 1, -1, dtype=xp.int64)
        c_b = xp.full(nc + 1, -1, dtype=xp.int64)
        b_slot = xp.where(b_only, b_pos, nc)
        c_keys[a_pos] = a_keys
        c_keys[b_slot] = b_keys
        c_a[a_pos] = xp.arange(na, dtype=xp.int64)
        c_b[b_slot] = xp.arange(nb, dtype=xp.int64)
        c_b[xp.where(a_match, a_pos, nc)] = rank_a
        c_keys, c_a, c_b = c_keys[:nc], c_a[:nc], c_b[:nc]
        c_bitmaps = _pad(xp, a_bitmaps)[c_a] | _pad(xp, b_bitmaps)[c_b]
        return c_keys, c_a, c_b, c_bitmaps, nnz
    both = a_bitmaps & b_at_a
    hit = both != 0
    before = exclusive_scan(xp, hit.astype(xp.int64))
    # sync: the size of C and of its values, in one read
    nc, nnz = (int(v) for v in xp.stack([before[-1], _bit_count(xp, both)]).tolist())
    slot = xp.where(hit, before[:-1], nc)
    c_a = xp.empty(nc + 1, dtype=xp.int64)
    c_a[slot] = xp.arange(na, dtype=xp.int64)
    c_a = c_a[:nc]
    c_b = rank_a[c_a]
    return a_keys[c_a], c_a, c_b, a_bitmaps[c_a] & b_bitmaps[c_b], nnz


def _bit_count(xp: Any, bitmaps: Any) -> Any:
    """Total set bits of ``bitmaps``, an int64 0-d array (no sync)."""
    return popcount(bitmaps).sum() if bitmaps.shape[0] else xp.zeros((), dtype=xp.int64)


def _matches(xp: Any, keys: Any, rank: Any, query: Any) -> Any:
    """True where ``keys[rank] == query`` (rank may be ``len(keys)``: no match)."""
    return (rank < keys.shape[0]) & (_pad(xp, keys)[xp.minimum(rank, keys.shape[0])] == query)


def _pad(xp: Any, a: Any) -> Any:
    """``a`` with a zero appended, so that index -1 (or ``len(a)``) reads 0."""
    return xp.concatenate([a, xp.zeros(1, dtype=a.dtype)])


def merge_values(op: str, a_bitmaps: Any, a_offsets: Any, a_values: Any, b_bitmaps: Any,
                 b_offsets: Any, b_values: Any, c_a: Any, c_b: Any, c_bitmaps: Any,
                 c_offsets: Any, nnz: int) -> tuple[Any, Any, Any]:
    """Values of C's entries and which of them are not zero.

    Parameters
    ----------
    op : {"plus", "minus", "times"}
    a_bitmaps, a_offsets, a_values : uint64 [a_nblocks], int64 [a_nblocks + 1], T [a_nnz]
    b_bitmaps, b_offsets, b_values : likewise for B (same dtype T)
    c_a, c_b, c_bitmaps : from :func:`merge_blocks`
    c_offsets : int64 [c_nblocks + 1]
    nnz : int
        ``c_offsets[-1]``, known on the host.

    Returns
    -------
    c_values : T [nnz]
        ``op(a, b)`` for every entry of ``c_bitmaps``, an absent operand being 0.
    c_nonzero : uint64 [c_nblocks]
        The bits of ``c_bitmaps`` whose value is not exactly zero.
    zero_blocks : uint64 [1]
        Number of blocks with a value that is exactly zero.
    """
    xp = get_array_module(a_bitmaps, a_values, b_bitmaps, b_values, c_a, c_bitmaps)
    args = (a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values, c_a, c_b,
            c_bitmaps, c_offsets, nnz)
    if xp is np:
        return _merge_values_numpy(op, *args)
    return _merge_values_cuda(op, *args)


def _merge_values_cuda(op, a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values,
                       c_a, c_b, c_bitmaps, c_offsets, nnz):
    import cupy

    c_nblocks = c_bitmaps.shape[0]
    c_values = cupy.empty(nnz, dtype=a_values.dtype)
    c_nonzero = cupy.empty(c_nblocks, dtype=cupy.uint64)
    zero_blocks = cupy.zeros(1, dtype=cupy.uint64)
    kernel = _kernels.get_kernel(_KERNELS, OPS[op], T=a_values.dtype)
    _kernels.launch(kernel, 8 * c_nblocks, (
        a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values, c_a, c_b, c_bitmaps,
        c_offsets, c_nblocks, c_values, c_nonzero, zero_blocks))
    return c_values, c_nonzero, zero_blocks


_NUMPY_OPS = {"plus": np.add, "minus": np.subtract, "times": np.multiply}


@np.errstate(invalid="ignore", over="ignore")  # inf - inf is NaN, as in scipy, silently
def _merge_values_numpy(op, a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values,
                        c_a, c_b, c_bitmaps, c_offsets, nnz):
    owner, bit = set_bits(c_bitmaps)
    operands = []
    for src, bitmaps, offsets, values in ((c_a, a_bitmaps, a_offsets, a_values),
                                          (c_b, b_bitmaps, b_offsets, b_values)):
        block = src[owner]
        bm = _pad(np, bitmaps)[block]
        present = ((bm >> bit.astype(np.uint64)) & np.uint64(1)).astype(bool)
        out = np.zeros(nnz, dtype=values.dtype)
        where = np.flatnonzero(present)
        out[where] = values[offsets[block[where]] + value_index(bm[where], bit[where])]
        operands.append(out)
    c_values = _NUMPY_OPS[op](*operands)
    keep = c_values != 0
    c_nonzero = np.zeros(c_bitmaps.shape[0], dtype=np.uint64)
    np.bitwise_or.at(c_nonzero, owner[keep], np.uint64(1) << bit[keep].astype(np.uint64))
    zero_blocks = np.array([np.count_nonzero(c_nonzero != c_bitmaps)], dtype=np.uint64)
    return c_values, c_nonzero, zero_blocks
