"""Element-wise sums, differences and products of two bitmap matrices.

Every input block is a *slot*: A's blocks, then (for a union) B's. A slot
owes C the block of its key when it is A's, or B's with no twin in A; C's
blocks are therefore in key order without a sort. The size of C is not known
before the merge, but it is bounded: at most ``a_nblocks + b_nblocks`` blocks
and ``a_nnz + b_nnz`` values (for an intersection, the smaller of the two).
Outputs are allocated with that bound and the device reports how much it
filled (``elementwise.cu`` draws the whole scheme):

1. :func:`match_blocks` finds each slot's key in the other operand (a binary
   search) and the bitmap of the block it owes: the entries whose value is
   not exactly zero, so that nothing is compacted afterwards (scipy drops
   exact zeros, stored zeros of the operands too).
2. :func:`scan_slots`: exclusive scans of the owed blocks and of their
   values give every block of C its place and its offset.
3. :func:`write_blocks` writes C's keys, bitmaps, offsets and values.

On the GPU one cooperative launch does the three stages (the NumPy functions
are their host twins) and writes C's sizes to host memory: one launch and
one sync in all.

Bool (pattern) matrices need no values: their sum is the OR of the bitmaps,
their difference the XOR (scipy's ``True - True`` is a dropped 0) and their
product the AND.

A product takes the intersection of the structures (an entry absent from
one operand makes a 0), unless an operand holds an ``inf`` or a NaN: then it
takes the union, as scipy's, where that value times the absent 0 is a NaN
that C keeps. Finding out costs a reduction and a sync on the GPU, for
floats and complex values only.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from . import _kernels, _readback
from ._format import popcount, set_bits, value_index
from ._primitives import exclusive_scan
from ._sputils import get_array_module, upcast
from .semiring import times

_KERNELS = "elementwise.cu"
_kernels.register(_KERNELS, {"bmsparse_elementwise_merge": ("T",),
                             "bmsparse_elementwise_compare": ("T",)})
THREADS = 256  # BMSPARSE_ELEMENTWISE_THREADS

#: operation -> ``op`` of the kernel (``BMSPARSE_OP_*``)
OPS = {"plus": 0, "minus": 1, "times": 2}
_NUMPY_OPS = {"plus": np.add, "minus": np.subtract, "times": times}

#: comparison -> its op in the compare kernel (``BMSPARSE_OP_EQ`` ...); the
#: same prefixed with "~" is where it fails (``BMSPARSE_OP_FAILS`` added):
#: not the opposite comparison, as both fail at NaN
_COMPARISONS = {"==": (3, np.equal), "!=": (4, np.not_equal), "<": (5, np.less),
                ">": (6, np.greater), "<=": (7, np.less_equal), ">=": (8, np.greater_equal)}
_FAILS = 16
for _name, (_code, _function) in _COMPARISONS.items():
    OPS[_name], OPS["~" + _name] = _code, _code + _FAILS
    _NUMPY_OPS[_name] = _NUMPY_OPS["~" + _name] = _function


def is_comparison(op: str) -> bool:
    """True for the ops of :func:`compare` (C a pattern, no values)."""
    return OPS[op] >= _COMPARISONS["=="][0]

#: how the bitmaps of two blocks with the same key combine (``combine`` of
#: the kernel, ``BMSPARSE_COMBINE_*``)
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
    GPU: one launch and one sync (a product of floats or complex values: the
    launch also looks for inf and NaN, and where it finds one, the merge runs
    again as a union). Deterministic: one operation per entry.

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

    check_same_shape(a, b)
    dtype = upcast(a.dtype, b.dtype)
    combine = AND if op == "times" else XOR if dtype == np.bool_ and op == "minus" else OR
    if dtype != np.bool_:
        a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    a_blocks, b_blocks = _blocks(a, dtype), _blocks(b, dtype)
    xp = get_array_module(*a_blocks[:3], *b_blocks[:3])
    merge = _merge_numpy if xp is np else _merge_cuda
    # inf * 0 and nan * 0 are NaN: an entry absent from the other operand
    # gives one, which scipy keeps (finite values times 0 are dropped), so a
    # product holding inf or NaN takes the union
    check = combine == AND and dtype.kind in "fc"
    keys, bitmaps, offsets, values, nnz, _ = merge(a_blocks, b_blocks, op, combine,
                                                   check_finite=check)
    return BitmapMatrix._from_blocks(keys, bitmaps, offsets, values, a.shape, nnz=nnz)


def check_same_shape(a: Any, b: Any) -> None:
    """ValueError, as scipy words it, unless the two matrices have one shape."""
    if a.shape != b.shape:
        raise ValueError(f"inconsistent shapes {a.shape} and {b.shape}")


def compare(a: Any, b: Any, op: str) -> Any:
    """The pattern of the entries where ``a op b`` holds, over the union of
    the two structures (an entry one operand does not store is a 0).

    Parameters
    ----------
    a, b : BitmapMatrix
        Same shape, both on the host or both on the GPU.
    op : {"==", "!=", "<", ">", "<=", ">="}, or one of them after "~"
        "~<=" is where ``a <= b`` fails (at NaN, so does ``a > b``).

    Returns
    -------
    BitmapMatrix
        bool, no values. The values are compared in NumPy's promotion of the
        two dtypes (bool as int32), complex ones ordered as NumPy orders them.

    Notes
    -----
    :func:`elementwise`'s merge (one cooperative launch and one sync on the
    GPU) with the comparison as its operation, writing no values.
    """
    from ._matrix import BitmapMatrix

    check_same_shape(a, b)
    dtype = np.result_type(a.dtype, b.dtype)
    if dtype == np.bool_:
        dtype = np.dtype(np.int32)  # (a pattern's entries are ones)
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    a_blocks, b_blocks = _blocks(a, dtype), _blocks(b, dtype)
    xp = get_array_module(*a_blocks[:3], *b_blocks[:3])
    merge = _merge_numpy if xp is np else _merge_cuda
    keys, bitmaps, offsets, _, nnz, _ = merge(a_blocks, b_blocks, op, OR)
    return BitmapMatrix._from_blocks(keys, bitmaps, offsets, None, a.shape, nnz=nnz)


def broadcast_shape(shape: tuple[int, ...], other: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast of two shapes, computed on the integers.

    ``numpy.broadcast_shapes`` refuses shapes of more than ``2**63`` entries
    (those of hypersparse matrices), which a 1x1 operand still broadcasts to.

    Raises
    ------
    ValueError
        The shapes do not broadcast.
    """
    ndim = max(len(shape), len(other))
    out = []
    for dims in zip((1,) * (ndim - len(shape)) + tuple(shape),
                    (1,) * (ndim - len(other)) + tuple(other)):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise ValueError(f"inconsistent shapes {tuple(shape)} and {tuple(other)}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _blocks(a: Any, dtype: np.dtype) -> tuple[Any, Any, Any, Any]:
    """(keys, bitmaps, offsets, values) of ``a``, values None for bools."""
    return a.keys, a.bitmaps, a.offsets, None if dtype == np.bool_ else a.values


def block_bound(a_nblocks: int, b_nblocks: int, combine: int) -> int:
    """The most blocks C can have: the length of its block buffers."""
    return min(a_nblocks, b_nblocks) if combine == AND else a_nblocks + b_nblocks


def _bounds(a_blocks: tuple, b_blocks: tuple, combine: int) -> tuple[int, int, int]:
    """Slots, block bound and value bound of C."""
    na, nb = a_blocks[0].shape[0], b_blocks[0].shape[0]
    n = na if combine == AND else na + nb
    if a_blocks[3] is None:
        return n, block_bound(na, nb, combine), 0
    a_nnz, b_nnz = a_blocks[3].shape[0], b_blocks[3].shape[0]
    return n, block_bound(na, nb, combine), min(a_nnz, b_nnz) if combine == AND else a_nnz + b_nnz


def _merge_cuda(a_blocks, b_blocks, op, combine, stages=False, check_finite=False):
    """``bmsparse_elementwise_merge``: as :func:`_merge_numpy`; the stages'
    arrays (views into the launch's scratch) only with ``stages``, else None.
    With ``check_finite`` the launch also looks for inf and NaN in the
    values, and where it finds one the merge runs again as a union.

    Memory is allocated raw and C's arrays are made once its sizes are known:
    on the GPU an ndarray (a view too) costs 3-5 us, as much as the whole
    kernel for small matrices.
    """
    import cupy

    n, bound, values_bound = _bounds(a_blocks, b_blocks, combine)
    values = a_blocks[3]
    # the operands' values, and C's (none for a comparison: C is a pattern)
    out_values = None if is_comparison(op) else values
    blocks = _kernels.alloc_blocks(bound)  # C's keys, bitmaps and offsets
    c_values = None if out_values is None else cupy.cuda.alloc(values.itemsize * values_bound)
    if n == 0:
        blocks.memset_async(0, 8)
        empty = (cupy.empty(0, cupy.int64), cupy.empty(0, cupy.uint64),
                 cupy.zeros(1, cupy.uint64), cupy.zeros(1, cupy.uint64))
        return _device_blocks(blocks, c_values, out_values, 0, 0, 0, 0) + (
            empty if stages else None,)
    if _kernels._GET_DEVICE is None:
        _kernels.bind_cupy()
    launch, resident = _launch(is_comparison(op), np.dtype(np.float64) if values is None
                               else values.dtype, _kernels._GET_DEVICE())
    grid = min(resident, -(-8 * n // THREADS))
    # rank, bits, the two scans, the thread blocks' sums (no memset: the
    # barrier is the stream's)
    nwork = 4 * n + 2 + 2 * grid
    work = cupy.cuda.alloc(8 * (nwork + 1))  # and a non-finite flag where no host one
    report = _readback.host_words(2)
    flag = _readback.host_flag() if check_finite else None  # cleared
    flag_ptr = 0 if flag is None else flag.ptr
    if check_finite and flag is None:
        flag_ptr = work.ptr + 8 * nwork
        (work + 8 * nwork).memset_async(0, 8)
    na, nb = a_blocks[0].shape[0], b_blocks[0].shape[0]
    null = 0
    # the operands' arrays are their own, contiguous (a BitmapMatrix's)
    launch(_kernels._CURRENT_STREAM().ptr, grid, (
        *(x.data.ptr for x in a_blocks[:3]), null if values is None else values.data.ptr, na,
        *(x.data.ptr for x in b_blocks[:3]), null if values is None else b_blocks[3].data.ptr,
        nb, OPS[op], combine, int(values is not None), work.ptr, _kernels.barrier_words(),
        blocks.ptr, blocks.ptr + 8 * bound, blocks.ptr + 16 * bound,
        null if c_values is None else c_values.ptr, report or 0, flag_ptr))
    device_flag = 0
    if report is None:
        # sync: the sizes of C, its scans' totals (and the flag)
        words = _kernels.device_array(work, 0, nwork + 1, np.uint64)
        nc, nnz, device_flag = _readback.read_ints((words, 3 * n), (words, 4 * n + 1),
                                                   (words, nwork))
    else:
        nc, nnz = _readback.take_words(2)  # sync: the sizes of C, written by the kernel
    non_finite = check_finite and (flag.read() if flag is not None else device_flag)
    if non_finite:
        # inf * 0 is NaN: the union instead (rare, so run again)
        return _merge_cuda(a_blocks, b_blocks, op, OR, stages)
    if stages:
        stages = tuple(_kernels.device_array(work, 8 * start, size, dtype)
                       for start, size, dtype in ((0, n, cupy.int64), (n, n, cupy.uint64),
                                                  (2 * n, n + 1, cupy.uint64),
                                                  (3 * n + 1, n + 1, cupy.uint64)))
    return _device_blocks(blocks, c_values, out_values, bound, values_bound, nc, nnz) + (
        stages or None,)


#: the merge kernels' arguments, packed by a PreparedLaunch (pointers as uint64)
_MERGE_ARGS = np.dtype([(name, np.int64 if name in ("a_nblocks", "b_nblocks", "op", "combine",
                                                    "values") else np.uint64)
                        for name in ("a_keys", "a_bitmaps", "a_offsets", "a_values",
                                     "a_nblocks", "b_keys", "b_bitmaps", "b_offsets",
                                     "b_values", "b_nblocks", "op", "combine", "values",
                                     "work", "bar", "c_keys", "c_bitmaps", "c_offsets",
                                     "c_values", "sizes", "non_finite")])


@functools.lru_cache(maxsize=32)
def _launch(compare: bool, dtype: np.dtype, device: int) -> tuple[Any, int]:
    """The merge (or compare) kernel's launch for ``dtype`` on ``device`` (the
    current one), and its thread blocks resident at once. A launch of its 21
    arguments through CuPy took microseconds of a small sum's time."""
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_elementwise_compare" if compare
                                 else "bmsparse_elementwise_merge", T=dtype)
    return (_kernels.PreparedLaunch(kernel, (), _MERGE_ARGS, block=THREADS, cooperative=True),
            _kernels.resident_blocks(kernel, THREADS))


def _device_blocks(blocks, c_values, values, bound, values_bound, nc, nnz):
    """C's keys, bitmaps, offsets, values (None for bools) and nnz, as arrays
    in the raw buffers of :func:`_merge_cuda`, exact-size copies where a
    buffer would be mostly unused."""
    copy = _wasteful(nc, bound)
    out = [a.copy() if copy else a for a in _kernels.block_arrays(blocks, nc, bound)]
    if values is None:
        return (*out, None, nnz)
    c_values = _kernels.device_array(c_values, 0, nnz, values.dtype)
    return (*out, c_values.copy() if _wasteful(nnz, values_bound) else c_values, nnz)


def _merge_numpy(a_blocks, b_blocks, op, combine, check_finite=False):
    """The three stages on the host; with ``check_finite``, a union where
    the values hold inf or NaN.

    Returns
    -------
    keys, bitmaps, offsets, values, nnz
        C's arrays (``values`` None for bools), views into the buffers of
        :func:`write_blocks` unless most of a buffer is unused (then
        exact-size copies).
    stages : (rank, bits, blocks_before, values_before)
        Of :func:`match_blocks` and :func:`scan_slots`.
    """
    if check_finite and not (np.isfinite(a_blocks[3]).all() and np.isfinite(b_blocks[3]).all()):
        combine = OR
    n, bound, values_bound = _bounds(a_blocks, b_blocks, combine)
    rank, bits = match_blocks(a_blocks, b_blocks, op, combine)
    blocks_before, values_before = scan_slots(bits)
    c_keys, c_bitmaps, c_offsets, c_values, nc, nnz = write_blocks(
        a_blocks, b_blocks, op, combine, rank, bits, blocks_before, values_before, bound,
        values_bound)
    copy = _wasteful(nc, bound)
    values = None if c_values is None else _cut(c_values, nnz, _wasteful(nnz, values_bound))
    return (_cut(c_keys, nc, copy), _cut(c_bitmaps, nc, copy), _cut(c_offsets, nc + 1, copy),
            values, nnz, (rank, bits, blocks_before, values_before))


def match_blocks(a_blocks: tuple, b_blocks: tuple, op: str,
                 combine: int) -> tuple[np.ndarray, np.ndarray]:
    """Stage 1 (host): each slot's match in the other operand and the bitmap it owes.

    Parameters
    ----------
    a_blocks, b_blocks : (keys, bitmaps, offsets, values)
        uint64 [nblocks], uint64 [nblocks], int64 [nblocks + 1], T [nnz] or
        None (bools): canonical blocks of A and B.
    op : {"plus", "minus", "times"} or a comparison of :func:`compare`
    combine : OR, XOR or AND
        How the bitmaps of blocks with the same key combine; OR and XOR
        take the union of the keys, AND the intersection.

    Returns
    -------
    rank : int64 [n]
        For A's blocks, then (for a union) B's: the other operand's block
        with the same key, or ``-1 - (number of its keys below)``.
        ``n = a_nblocks + b_nblocks`` for a union, ``a_nblocks`` otherwise.
    bits : uint64 [n]
        The bitmap of the block of C the slot owes: its entries whose value
        is not exactly zero (the combined bitmaps, for bools); 0 for a B
        slot with an A twin and for a block that cancels.
    """
    a_keys, b_keys = a_blocks[0], b_blocks[0]
    na = a_keys.shape[0]
    rank = _search(b_keys, a_keys)
    owes = np.ones(na, dtype=bool)
    if combine != AND:
        rank_b = _search(a_keys, b_keys)
        rank, owes = np.concatenate([rank, rank_b]), np.concatenate([owes, rank_b < 0])
    ia, ib = _slot_blocks(rank, na)
    bits = np.where(owes, _COMBINE[combine](_bitmap_of(a_blocks, ia), _bitmap_of(b_blocks, ib)),
                    np.uint64(0))
    if a_blocks[3] is None:
        return rank, bits
    _, bit, v = _slot_values(bits, ia, ib, a_blocks, b_blocks, op)
    # the kept bits of each slot are distinct, so their sum is their OR
    kept = np.where(v != 0, np.uint64(1) << bit.astype(np.uint64), np.uint64(0))
    counts = popcount(bits)
    starts = np.cumsum(counts) - counts
    nonzero = np.zeros(bits.shape[0], dtype=np.uint64)
    nonzero[counts > 0] = np.add.reduceat(kept, starts[counts > 0]) if kept.size else 0
    return rank, nonzero


def scan_slots(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stage 2 (host): exclusive scans (int64 [n + 1]) of the slots' owed
    blocks (``bits != 0``) and of their values (``popcount(bits)``)."""
    return (exclusive_scan(np, (bits != 0).astype(np.int64)),
            exclusive_scan(np, popcount(bits)))


def write_blocks(a_blocks: tuple, b_blocks: tuple, op: str, combine: int, rank: np.ndarray,
                 bits: np.ndarray, blocks_before: np.ndarray, values_before: np.ndarray,
                 bound: int, values_bound: int) -> tuple[Any, ...]:
    """Stage 3 (host): C's blocks in key order, in buffers of the bounds' lengths.

    Parameters
    ----------
    a_blocks, b_blocks, op, combine
        As for :func:`match_blocks`.
    rank, bits
        From :func:`match_blocks`.
    blocks_before, values_before
        From :func:`scan_slots`.
    bound, values_bound : int
        Lengths of the block and value buffers (:func:`block_bound`; the
        values of A and B, their minimum for an intersection).

    Returns
    -------
    c_keys, c_bitmaps : uint64 [bound]
    c_offsets : int64 [bound + 1]
    c_values : T [values_bound] or None
        Defined for C's ``nc`` blocks, ``nc + 1`` offsets and ``nnz`` values.
    nc, nnz : int
    """
    na, n = a_blocks[0].shape[0], rank.shape[0]
    below = np.where(rank >= 0, rank, -1 - rank)
    from_a = np.arange(n) < na

    def place(before: np.ndarray) -> np.ndarray:
        # a slot's rank among its operand's owed blocks, plus the other's below its key
        if combine == AND:
            return before[:n]
        mid = before[na]
        return np.where(from_a, before[:n] + before[np.minimum(na + below, n)] - mid,
                        before[:n] - mid + before[np.minimum(below, na)])

    owed = np.flatnonzero(bits)
    q, offset = place(blocks_before)[owed], place(values_before)[owed]
    nc, nnz = int(blocks_before[n]), int(values_before[n])
    c_keys = np.empty(bound, dtype=np.uint64)
    c_bitmaps = np.empty(bound, dtype=np.uint64)
    c_offsets = np.empty(bound + 1, dtype=np.int64)
    c_keys[q] = np.concatenate([a_blocks[0], b_blocks[0]])[owed]
    c_bitmaps[q] = bits[owed]
    c_offsets[q] = offset
    c_offsets[nc] = nnz
    if a_blocks[3] is None or is_comparison(op):
        return c_keys, c_bitmaps, c_offsets, None, nc, nnz
    ia, ib = _slot_blocks(rank, na)
    owner, bit, v = _slot_values(bits[owed], ia[owed], ib[owed], a_blocks, b_blocks, op)
    c_values = np.zeros(values_bound, dtype=a_blocks[3].dtype)
    c_values[offset[owner] + value_index(bits[owed][owner], bit)] = v
    return c_keys, c_bitmaps, c_offsets, c_values, nc, nnz


def _search(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The rank (as :func:`match_blocks` encodes it) of each ``query`` key among ``keys``."""
    below = np.searchsorted(keys, query).astype(np.int64)
    hit = (below < keys.shape[0]) & (_at(keys, below) == query)
    return np.where(hit, below, -1 - below)


def _slot_blocks(rank: np.ndarray, na: int) -> tuple[np.ndarray, np.ndarray]:
    """A's and B's block (-1: none) of every slot."""
    own = np.arange(rank.shape[0], dtype=np.int64)
    other = np.where(rank >= 0, rank, -1)
    from_a = own < na
    return np.where(from_a, own, other), np.where(from_a, other, own - na)


def _bitmap_of(blocks: tuple, block: np.ndarray) -> np.ndarray:
    """The bitmaps of ``block`` (0 where it is -1)."""
    return np.where(block >= 0, _at(blocks[1], block), np.uint64(0))


def _at(a: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``a[index]`` with ``index`` clipped into ``a`` (zeros when ``a`` is empty)."""
    if a.shape[0] == 0:
        return np.zeros(index.shape, dtype=a.dtype)
    return a[np.clip(index, 0, a.shape[0] - 1)]


@np.errstate(invalid="ignore", over="ignore")  # inf - inf is NaN, as in scipy, silently
def _slot_values(bits: np.ndarray, ia: np.ndarray, ib: np.ndarray, a_blocks: tuple,
                 b_blocks: tuple, op: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``op(a, b)`` at every set bit of ``bits`` (slot, bit), in bit order: the
    slot, the bit and the value, an absent operand being 0."""
    owner, bit = set_bits(bits)
    v = _NUMPY_OPS[op](_value_at(a_blocks, ia[owner], bit), _value_at(b_blocks, ib[owner], bit))
    if v.dtype == np.bool_:  # a comparison: 1 where it holds (fails, after "~"), as the kernel
        v = v != op.startswith("~")
    return owner, bit, v


def _value_at(blocks: tuple, block: np.ndarray, bit: np.ndarray) -> np.ndarray:
    """The value at ``bit`` of each ``block`` (0 where absent or -1)."""
    _, _, offsets, values = blocks
    bm = _bitmap_of(blocks, block)
    where = np.flatnonzero((bm >> bit.astype(np.uint64)) & np.uint64(1))
    out = np.zeros(bit.shape[0], dtype=values.dtype)
    out[where] = values[offsets[block[where]] + value_index(bm[where], bit[where])]
    return out


def _wasteful(used: int, bound: int) -> bool:
    """True when the unused part of a buffer is larger than both the used
    part and ``MIN_WASTE``: a result should not hold twice its memory."""
    return bound - used > max(used, MIN_WASTE)


def _cut(buffer: Any, n: int, copy: bool) -> Any:
    """``buffer[:n]``, a view or an exact-size copy."""
    view = buffer[:n]
    return view.copy() if copy else view
