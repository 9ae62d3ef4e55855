"""Sparse matrix times dense vector or matrix: ``A @ x``, ``A.T @ x``, ``x @ A``.

Load-balanced: one thread per block of A (and column of X), a warp per run
of at most 32 consecutive blocks of the block list, whatever the lengths of
the block rows. The runs are cut so that a block row of at most 32 blocks
lies in one warp (:func:`warp_layout`, computed once per matrix). The blocks of one block row within a warp are
summed by a segmented scan of shuffles; a block row of more than 32 blocks
leaves one partial sum per warp, which the warp of the last of them to
finish adds: one launch, no sync. ``A.T @ x`` reads A's blocks in
column-major order: on the GPU from copies of A's keys, bitmaps and value
offsets in that order, made once per matrix (:func:`column_blocks`) and
kept with it; A's values are read where they are, so no transposed copy is
made. See ``spmv.cu``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from . import _kernels, _readback
from ._format import BLOCK, BLOCK_MASK, BLOCK_SHIFT, block_cols_of, block_rows_of, \
    set_bits
from ._sputils import check_device, get_array_module, matmul_mismatch, upcast
from .semiring import times

_KERNELS = "spmv.cu"
_DENSE_KERNELS = "spmv_dense.cu"  # the same kernels for dense blocks, named ..._dense
for _path, _suffix in ((_KERNELS, ""), (_DENSE_KERNELS, "_dense")):
    _kernels.register(_path, {f"bmsparse_spmv_{order}{unit}{_suffix}": ("T",)
                              for order in ("rows", "cols") for unit in ("", "_unit")}
                      | ({f"bmsparse_spmv_layout_{step}": () for step in ("chunks", "chain", "warps")}
                         if _path == _KERNELS else {}))
#: groups a warp walks in the layout's first and last passes
#: (BMSPARSE_SPMV_LAYOUT_CHUNK)
LAYOUT_CHUNK = 256
_THREADS = 128  # BMSPARSE_SPMV_THREADS
#: mean entries per block from which a block's partial sums are taken row by
#: row in registers (the ``_dense`` kernels) rather than bit by bit through
#: shared memory; both sum in the same order. Measured (H100, GPU time):
#: bcsstk33 (22 a block) 15 -> 11 us, the surrogate (5.7) 54 -> 60 us
DENSE_ENTRIES = 12
WARP = 32


def spmv(a: Any, x: Any, *, transpose: bool = False) -> Any:
    """``a @ x`` (or ``a.T @ x``) for a dense vector or matrix ``x``.

    Parameters
    ----------
    a : BitmapMatrix, or anything it takes (a scipy or cupyx sparse matrix)
        Shape (m, n).
    x : NumPy or CuPy array (or a list), on the same side as ``a``
        Shape (n,) or (n, k) ((m,) or (m, k) with ``transpose``), any
        memory order.
    transpose : bool
        Multiply by ``a.T`` without forming it.

    Returns
    -------
    array
        Shape (m,) or (m, k) ((n,) or (n, k) with ``transpose``), C-ordered,
        of dtype ``numpy.result_type(a.dtype, x.dtype)``; a bool matrix acts
        as ones, and bool @ bool is a Boolean product.

    Raises
    ------
    ValueError
        ``x`` is a scalar or has more than 2 dimensions, or the inner
        dimensions differ (scipy's message).
    TypeError
        ``x`` is not an array or not of numbers (scipy's message), ``a`` and
        ``x`` are on different sides, or the result dtype is not supported.

    Notes
    -----
    O(k * (nnz + nblocks + m + n)) work, O(k * nblocks / 2) temporary values; no
    sync but on the first call per matrix and direction, which cuts the block
    list into warps (:func:`warp_layout`: O(nblocks / 32 + m / 8) work, three
    launches and a sync on the GPU; kept with ``a``, 8 bytes a warp). The
    first call with ``transpose`` sorts the block columns once (O(nblocks))
    and keeps the permutation with ``a``, and on the GPU a copy of ``a``'s
    keys, bitmaps and value offsets in that order (24 bytes a block, a third
    of a float64 matrix of 6 entries a block); for a vector the temporary
    values are kept with ``a`` too (one set per dtype, for the stream last
    used), which saves an allocation and a memset per call. Deterministic:
    every output is summed in a fixed order, which depends only on ``a``'s
    block structure (each block in bit order, a fixed tree over its block
    row's blocks within each warp of the layout, then those pieces in warp
    order), not on the run; the NumPy path sums in the same order.

    Examples
    --------
    >>> import numpy as np
    >>> from bmsparse import BitmapMatrix, spmv
    >>> a = BitmapMatrix(np.array([[1.0, 0, 2], [0, 3, 0]]))
    >>> spmv(a, np.array([1.0, 1.0, 1.0]))
    array([3., 3.])
    >>> spmv(a, np.array([1.0, 2.0]), transpose=True)
    array([1., 6., 2.])
    """
    from ._matrix import BitmapMatrix, _as_operand, _is_scalar

    a = a if isinstance(a, BitmapMatrix) else BitmapMatrix(a)
    x = _as_operand(x)
    if _is_scalar(x):  # as A @ x decides it
        raise ValueError("scalar operands are not allowed, use '*' instead")
    if not hasattr(x, "ndim"):
        raise TypeError(f"x must be a NumPy or CuPy array, got {type(x).__name__}")
    source = a._transpose_of  # a lazy transpose: its source's blocks, the other way
    if source is not None:
        return matmul_dense(source, x, not transpose, False)
    return matmul_dense(a, x, transpose, False)


def matmul_dense(a: Any, x: Any, transpose: bool, out_transposed: bool, *,
                 left: bool = False) -> Any:
    """``a @ x`` or ``a.T @ x``; with ``out_transposed`` the result is written
    as its transpose (C-ordered), which is ``x.T @ a`` for ``x @ a``.
    ``left``: the product was written ``x.T @ b``, ``b`` the transpose of the
    matrix multiplied here (``a.T``, or ``a`` with ``transpose``), which only
    the error message tells."""
    if x.ndim == 0:
        raise ValueError("scalar operands are not allowed, use '*' instead")
    if x.ndim > 2:
        raise ValueError(f"x must be 1-D or 2-D, got {x.ndim}-D")
    shape = a.shape[::-1] if transpose else a.shape
    if x.shape[0] != shape[1]:
        # (for x @ m, computed as m.T @ x.T, the shapes as written)
        raise matmul_mismatch(shape, x.shape, (x.shape[::-1], shape[::-1]) if left else None)
    if type(x) is _kernels._NDARRAY and x.ndim == 1 and x.dtype == a.dtype \
            and a.dtype.kind != "b" and type(a.keys) is _kernels._NDARRAY:
        # a device vector of the matrix's dtype, the common case: no dtype
        # steps (its host time is most of a small product's)
        check_device(a.keys, x)
        return _launch_kept(a, transpose, x, shape[0], a.values)
    xp = get_array_module(a.keys, x)
    a_dtype, x_dtype = a.dtype, x.dtype
    if x_dtype.kind not in "biufc":
        # before promotion, which names no input: it fails or makes a
        # string or time dtype no product has
        raise TypeError(f"no supported conversion for types: ({a_dtype!r}, {x_dtype!r})")
    dtype = a_dtype if a_dtype == x_dtype else upcast(a_dtype, x_dtype)
    if x.ndim == 2 and x.shape[1] == 0:
        # no columns, no sums: the block pointer and warp layout below scale
        # with the shape (32 GiB of pointer for 2**35 hypersparse rows)
        return xp.zeros((0, shape[0]) if out_transposed else (shape[0], 0), dtype=dtype)
    # bool @ bool counts in int64 and compares with 0: a Boolean product
    boolean = dtype.kind == "b"
    compute = _kernels._INT64 if boolean else dtype
    values = None if a_dtype.kind == "b" else a.values
    if values is not None and a_dtype != compute:
        values = values.astype(compute)
    if x_dtype != compute:
        x = x.astype(compute)
    if xp is not np and (x.ndim == 1 or x.shape[1] == 1):
        # a vector or one column: the launch kept with the matrix
        y = _launch_kept(a, transpose, x.reshape(-1), shape[0], values)
        if x.ndim == 2:
            y = y.reshape((1, shape[0]) if out_transposed else (shape[0], 1))
    elif xp is np:
        order, ptr = column_pointer(a) if transpose else (None, row_pointer(a))
        y = _spmv_numpy(a.keys, a.bitmaps, a.offsets, values, order, ptr,
                        warp_layout(a, transpose)[0], x if x.ndim == 2 else x.reshape(-1, 1),
                        shape[0])
        y = np.ascontiguousarray(y.T) if out_transposed else y
        y = y.reshape(-1) if x.ndim == 1 else y
    else:
        keys, bitmaps, offsets, ptr = kernel_blocks(a, transpose)
        y = _spmv_cuda(keys, bitmaps, offsets, values, transpose, ptr, warp_layout(a, transpose),
                       x, shape[0], out_transposed, dense_blocks(a))
    return y.astype(dtype) if boolean else y


def dense_blocks(a: Any) -> bool:
    """True when ``a`` holds at least ``DENSE_ENTRIES`` entries per block on
    average: the GPU takes its blocks' partial sums by spmv_dense.cu. False
    for a pattern matrix whose nnz is not known yet (counting is a sync)."""
    source = a._block_source()  # a lazy transpose has its source's blocks
    return source._nnz is not None and source._nnz >= DENSE_ENTRIES * source.keys.shape[0]


def row_pointer(a: Any) -> Any:
    """Block-row pointer (int64 [nbrows + 1]) of ``a``, computed once and kept with it."""
    return a._row_pointer()


def column_pointer(a: Any) -> tuple[Any, Any]:
    """``a``'s column-major block order and its block-column pointer
    (int64 [nblocks], int64 [nbcols + 1]), computed once and kept with it."""
    return a._column_pointer()


def column_blocks(a: Any) -> tuple[Any, Any, Any, Any]:
    """``a``'s keys, bitmaps and value offsets in column-major order, and its
    block-column pointer (uint64, uint64, int64 [nblocks]; int64 [nbcols + 1]),
    computed once and kept with it.

    The kernels of ``A.T @ x`` read them in that order: from copies, each
    warp's 32 blocks are one contiguous read, where through the permutation
    they were 32 scattered ones after a read of the permutation itself (ncu,
    H100, surrogate: 60 -> 49 us, with the kernel changes of the same commit).
    """
    kept = a._derived("column_blocks")
    if kept is None:
        order, ptr = column_pointer(a)
        kept = a._keep("column_blocks", (a.keys[order], a.bitmaps[order], a.offsets[order], ptr))
    return kept


def kernel_blocks(a: Any, transpose: bool) -> tuple[Any, Any, Any, Any]:
    """The block list the kernels walk, and its pointer: ``a``'s keys, bitmaps,
    offsets and block-row pointer, or with ``transpose`` :func:`column_blocks`."""
    if transpose:
        return column_blocks(a)
    return a.keys, a.bitmaps, a.offsets, row_pointer(a)


def warp_layout(a: Any, transpose: bool) -> tuple[Any, int]:
    """The warps that the kernels cut :func:`kernel_blocks` into, computed
    once (on the GPU with one sync) and kept with ``a``: the first list
    position of each (int64 [nwarps + 1], the last the number of blocks) and
    nwarps.

    Greedily in list order, a block row (column) of at most 32 blocks lies
    in one warp: one that does not fit in what the current warp has left
    starts the next (the lanes left are idle); a longer one goes on from
    where the last ended. Warps of 32 consecutive blocks cut short block
    rows too, whose pieces the last warp to finish sums after fences and
    counters, at the end of 16 K of the surrogate's 17 K warps: with 7% more
    warps, ncu on an H200, us, ``A @ x`` / ``A.T @ x``: surrogate 48.5 /
    45.2 -> 40.2 / 40.7, email-Enron 20.6 / 19.8 -> 19.2 / 18.7,
    luxembourg_osm 9.7 / 9.5 -> 8.4 / 8.4; where most blocks lie in longer
    rows, a little slower (musae_git 18.3 / 19.0 -> 18.8 / 20.8, wiki-Vote
    10.3 / 9.7 -> 10.9 / 10.3).
    """
    key = ("warp_layout", transpose)
    kept = a._derived(key)
    if kept is None:
        ptr = column_pointer(a)[1] if transpose else row_pointer(a)
        if isinstance(ptr, np.ndarray):
            warps = _layout_numpy(ptr)
            kept = warps, warps.shape[0] - 1
        else:
            kept = _layout_cuda(ptr, a.keys.shape[0])
        a._keep(key, kept)
    return kept


def _layout_cuda(ptr: Any, nblocks: int) -> tuple[Any, int]:
    """:func:`warp_layout` of the groups of ``ptr`` (int64 [ngroups + 1], on
    the GPU): three launches and one sync (spmv.cu)."""
    import cupy

    ngroups = ptr.shape[0] - 1
    if nblocks == 0:
        return cupy.zeros(1, dtype=np.int64), 0
    nchunks = -(-ngroups // LAYOUT_CHUNK)
    # a non-empty group starts n // 32 + 1 warps at most: a tall matrix's
    # empty block rows take no room
    bound = min(ngroups, nblocks) + -(-nblocks // WARP) + 1
    int64 = _kernels._INT64
    chunks, starts, warps = _kernels.device_arrays((WARP * nchunks, int64), (nchunks + 1, int64),
                                                   (bound, int64))
    get = _kernels.get_kernel
    _kernels.launch(get(_KERNELS, "bmsparse_spmv_layout_chunks"), WARP * nchunks,
                    (ptr, ngroups, chunks))
    _kernels.launch(get(_KERNELS, "bmsparse_spmv_layout_chain"), WARP,
                    (chunks, nchunks, ptr, ngroups, starts, warps), block=WARP)
    _kernels.launch(get(_KERNELS, "bmsparse_spmv_layout_warps"), WARP * nchunks,
                    (ptr, ngroups, starts, warps))
    nwarps = _readback.read_ints((starts, nchunks))[0] >> 6
    return warps[:nwarps + 1].copy(), nwarps


def _layout_numpy(ptr: np.ndarray) -> np.ndarray:
    """:func:`warp_layout` of the groups of ``ptr`` (int64 [ngroups + 1]) on
    the host, one group at a time: the layout kernels' twin."""
    warps, fill = [], WARP  # the current warp's used lanes: full before the first group
    sizes = np.diff(ptr)
    nonempty = np.flatnonzero(sizes)  # empty groups change nothing
    for start, n in zip(ptr[nonempty].tolist(), sizes[nonempty].tolist()):
        if n > WARP:  # on from lane `fill` (a new warp when it is full)
            skip = 0 if fill == WARP else WARP - fill
            warps.extend(range(start + skip, start + n, WARP))
            fill = (n - skip - 1) % WARP + 1
        elif fill + n > WARP:
            warps.append(start)
            fill = n
        else:
            fill += n
    warps.append(int(ptr[-1]))
    return np.array(warps, dtype=np.int64)


def _scratch_bytes(nwarps: int, k: int, dtype: np.dtype) -> tuple[int, int]:
    """Bytes of the kernel's scratch for ``k`` columns, and where its
    partial sums start: a counter per warp and column, then two slots of 8
    partial sums per warp and column (its leading and trailing block row)."""
    head = -(-(nwarps * k * 4) // 16) * 16
    return head + nwarps * k * 2 * BLOCK * dtype.itemsize, head


def _kept_key(transpose: bool, char: str, stream: int) -> tuple[Any, ...]:
    """The key of a matrix's kept vector launch (its ``_cache``) for vectors
    of dtype ``char`` on ``stream`` (a handle): the per-thread default
    stream's is the thread's."""
    return ("spmv_scratch", transpose, char,
            _kernels.thread_token() if stream == _kernels.PER_THREAD_STREAM else None)


def kept_product(m: Any, x: Any, transpose: bool) -> Any:
    """``m @ x`` (``m.T @ x`` with ``transpose``) by the launch kept with
    ``m``'s blocks (:func:`_launch_kept`), where ``x`` is a CuPy vector of
    ``m``'s dtype (not bool) on the current device and a launch is kept for
    it and the current stream: a repeated product's short path. None where
    it does not apply (the first product, any other operand or stream, a
    mismatch to report): :func:`matmul_dense` then checks, keeps and runs.

    The operators call it before anything else: the general path's layers
    took 11 us of a warm product's 59 us of event time on the surrogate
    (H200, host caches cold after cupyx's call: ``A.T @ x`` 59.0 us, the
    kept launch alone 47.6; 54.5 through this path).
    """
    source = m._transpose_of  # a lazy transpose: its source's blocks, the other way
    a, transpose = (m, transpose) if source is None else (source, not transpose)
    dtype = x.dtype
    if x.ndim != 1 or dtype != a._dtype or dtype.kind == "b":
        return None
    if a._made is not None:  # arrays made on a stream: what reading them does
        a._arrays()
    stream = _kernels._CURRENT_STREAM().ptr
    kept = a._cache.get(_kept_key(transpose, dtype.char, stream))
    if kept is None or kept[0] != stream:
        return None
    unit = kept[1]
    if x.shape[0] != a._shape[0 if transpose else 1] or x.data.device_id != unit.device \
            or _kernels._GET_DEVICE() != unit.device:
        return None
    return _run_unit(unit, a._values, x, stream)


def _launch_kept(a: Any, transpose: bool, x: Any, nout: int, values: Any) -> Any:
    """``a @ x`` (``a.T @ x``) for a vector ``x``: y (1-D, new); ``values``
    are ``a``'s, as the kernel reads them (None for a pattern matrix).

    The launch but for the values, x and y (:func:`_unit_launch`) is kept
    with ``a`` per dtype: building the arguments, the scalars and the
    kernel's name took about a third of a small ``A.T @ x``'s host time, and
    the scratch's counters are zeroed once (every launch leaves them zero).
    It is kept for one stream, as launches on one stream cannot overlap and
    on two could: on another stream a new one replaces it (the old scratch
    goes back to the pool of its own stream, behind its launches). The
    per-thread default stream is one handle for every host thread but a
    different stream in each: there each thread keeps its own.
    """
    if _kernels._CURRENT_STREAM is None:
        _kernels.bind_cupy()
    stream = _kernels._CURRENT_STREAM().ptr
    key = _kept_key(transpose, x.dtype.char, stream)
    kept = a._cache.get(key)
    if kept is None or kept[0] != stream:
        kept = a._cache[key] = (stream, _unit_launch(*kernel_blocks(a, transpose),
                                                     warp_layout(a, transpose), transpose,
                                                     nout, x.dtype, dense_blocks(a)))
    return _run_unit(kept[1], values, x, stream)


#: the struct bm_spmv_blocks of spmv.cuh: a _unit kernel's arguments but the
#: values, x and y, passed by value as one argument. CuPy's host time grows
#: with the number of arguments: y's allocation and the launch took 22.9 us
#: with 11 arguments, 15.3 with the struct and 3 arrays (H100 host, the two
#: alternating in one process; 14.8 against 10.5 in another). Launched
#: through the driver with the struct packed once (_kernels.PreparedLaunch)
#: rather than by CuPy: 12.3-12.9 -> 9.0-11.0 us (H200 host, same process)
_UNIT_BLOCKS = np.dtype([("keys", np.uint64), ("bitmaps", np.uint64), ("offsets", np.uint64),
                         ("ptr", np.uint64), ("warps", np.uint64), ("nwarps", np.int64),
                         ("nout", np.int64), ("carry", np.uint64), ("count", np.uint64)])
#: the arguments a _unit kernel takes after the struct: values, x and y
_UNIT_TAIL = np.dtype([("values", np.uint64), ("x", np.uint64), ("y", np.uint64)])


class _UnitLaunch(NamedTuple):
    """A launch of a ``_unit`` kernel, to be given the values, x and y."""

    launch: Any  # _kernels.PreparedLaunch: _UNIT_BLOCKS by value, then _UNIT_TAIL
    grid: int
    nout: int
    nwarps: int
    scratch: Any  # cupy.cuda.MemoryPointer: the counters, then the carry
    device: int  # the GPU of the arrays and the scratch
    arrays: tuple[Any, ...]  # keys, bitmaps, offsets, ptr, warps: the launch points into them


def _unit_launch(keys, bitmaps, offsets, ptr, layout, cols, nout, dtype, dense) -> _UnitLaunch:
    """A launch of a ``_unit`` kernel (a vector in and out) for
    :func:`_run_unit`, with scratch of its own. The blocks are in column-major
    order with ``cols`` (:func:`kernel_blocks`), cut by ``layout``
    (:func:`warp_layout`)."""
    warps, nwarps = layout
    scratch, head = _new_scratch(nwarps, 1, dtype)
    blocks = np.array([(keys.data.ptr, bitmaps.data.ptr, offsets.data.ptr, ptr.data.ptr,
                        warps.data.ptr, nwarps, nout, scratch.ptr + head, scratch.ptr)],
                      dtype=_UNIT_BLOCKS)[0]
    launch = _kernels.PreparedLaunch(_kernel(cols, True, dense, dtype), (blocks,), _UNIT_TAIL,
                                     block=_THREADS, shared_mem=_shared_mem(dense, dtype))
    return _UnitLaunch(launch, -(-_threads(nwarps, ptr) // _THREADS), nout, nwarps, scratch,
                       scratch.device_id, (keys, bitmaps, offsets, ptr, warps))


def _run_unit(unit: _UnitLaunch, values: Any, x: Any, stream: int) -> Any:
    """y = the product of ``unit`` with ``values`` (None: every value is 1)
    and the vector ``x``, launched on ``stream`` (a CUstream handle)."""
    base = x if x._c_contiguous else x.copy()  # CuPy's attribute: no object
    memory = _kernels._ALLOC(unit.nout * x.dtype.itemsize)
    # every array is the matrix's own, contiguous base or new
    unit.launch(stream, unit.grid, (0 if values is None else values.data.ptr, base.data.ptr,
                                    memory.ptr))
    # y's array object after the launch, while the kernel runs: 4-5 us less
    # per call before it (H100, .data/ab49.py in benchmarks/NOTES.md)
    return _kernels._NDARRAY((unit.nout,), x.dtype, memory)


def _kernel(cols: bool, unit: bool, dense: bool, dtype: np.dtype) -> Any:
    """The kernel of the family bmsparse_spmv_{rows,cols}[_unit][_dense]."""
    name = ("bmsparse_spmv_cols" if cols else "bmsparse_spmv_rows") + ("_unit" if unit else "") \
        + ("_dense" if dense else "")
    return _kernels.get_kernel(_DENSE_KERNELS if dense else _KERNELS, name, T=dtype)


def _shared_mem(dense: bool, dtype: np.dtype) -> int:
    """Dynamic shared memory of a thread block: 16 values a thread (spmv.cu)."""
    return 0 if dense else 2 * BLOCK * _THREADS * dtype.itemsize


def _new_scratch(nwarps: int, k: int, dtype: np.dtype) -> tuple[Any, int]:
    """Raw memory for the kernel's scratch, its counters zeroed (one
    allocation: an ndarray costs microseconds), and the byte where its
    partial sums start (:func:`_scratch_bytes`)."""
    if _kernels._ALLOC is None:
        _kernels.bind_cupy()
    size, head = _scratch_bytes(nwarps, k, dtype)
    scratch = _kernels._ALLOC(size)
    if head:
        scratch.memset_async(0, head)
    return scratch, head


def _threads(nwarps: int, ptr: Any) -> int:
    """Threads of a launch for one column: a lane per place of the layout's
    warps, and at least one per group (each zeroes its empty group's outputs)."""
    return max(nwarps * WARP, ptr.shape[0] - 1)


def _strides(x: Any) -> tuple[Any, int, int, int]:
    """A C-contiguous base array of ``x`` (2-D), the element strides of (row,
    column) and the number of columns."""
    n, k = x.shape
    if x.flags.c_contiguous:
        return x, k, 1, k
    if x.flags.f_contiguous:
        return x.T, 1, n, k
    import cupy

    return cupy.ascontiguousarray(x), k, 1, k


def _spmv_cuda(keys, bitmaps, offsets, values, cols, ptr, layout, x, nout, out_transposed,
               dense=False):
    """Y (C-ordered; 1-D for a vector ``x``) on the GPU, with scratch made for
    the call, over the blocks of :func:`kernel_blocks` (column-major with
    ``cols``) cut by ``layout`` (:func:`warp_layout`); ``dense``: by the
    kernels of spmv_dense.cu (the same sums)."""
    import cupy

    if x.ndim == 1 or x.shape[1] == 1:
        # a vector in and out: the kernel whose index arithmetic is constant
        y = _run_unit(_unit_launch(keys, bitmaps, offsets, ptr, layout, cols, nout, x.dtype,
                                   dense), values, x.reshape(-1), _kernels._CURRENT_STREAM().ptr)
        return y if x.ndim == 1 else y.reshape((1, nout) if out_transposed else (nout, 1))
    base, x_rs, x_cs, k = _strides(x)
    if out_transposed:
        y = cupy.empty((k, nout), dtype=x.dtype)
        y_rs, y_cs = 1, nout
    else:
        y = cupy.empty((nout, k), dtype=x.dtype)
        y_rs, y_cs = k, 1
    warps, nwarps = layout
    scratch, head = _new_scratch(nwarps, k, x.dtype)
    i64 = np.int64
    args = (keys, bitmaps, offsets, _kernels.or_null(values), ptr, warps, i64(nwarps), base,
            i64(x_rs), i64(x_cs), i64(k), i64(nout), y, i64(y_rs), i64(y_cs),
            np.uint64(scratch.ptr + head), np.uint64(scratch.ptr))
    # every array is the matrix's own, contiguous base or new: no cast step
    _kernels.launch(_kernel(cols, False, dense, x.dtype),
                    _threads(nwarps, ptr) * k, args,
                    block=_THREADS, shared_mem=_shared_mem(dense, x.dtype), cast=False)
    return y


@np.errstate(invalid="ignore", over="ignore")  # inf * 0 is NaN, as in scipy, silently
def _spmv_numpy(keys, bitmaps, offsets, values, order, ptr, warps, x2, nout):
    nblocks, k = keys.shape[0], x2.shape[1]
    nwarps = warps.shape[0] - 1
    # 1. each block's 8 partial sums, entries in bit order (add.at adds in
    # array order), at the block's place in the layout: lane i - warps[w] of
    # warp w for position i of the row- or column-major list
    owner, bit = set_bits(bitmaps)
    a = np.ones(owner.shape[0], dtype=x2.dtype) if values is None else values
    place = np.arange(nblocks, dtype=np.int64) + np.repeat(
        WARP * np.arange(nwarps, dtype=np.int64) - warps[:-1], np.diff(warps))
    if order is None:
        group, position = block_rows_of(keys), place[owner]
        out_row = bit >> BLOCK_SHIFT
        in_row = (block_cols_of(keys)[owner] << BLOCK_SHIFT) | (bit & BLOCK_MASK)
    else:
        group = block_cols_of(keys)[order]
        position = np.empty(nblocks, dtype=np.int64)
        position[order] = place
        position = position[owner]
        out_row = bit & BLOCK_MASK
        in_row = (block_rows_of(keys)[owner] << BLOCK_SHIFT) | (bit >> BLOCK_SHIFT)
    acc = np.zeros((nwarps * WARP, BLOCK, k), dtype=x2.dtype)
    np.add.at(acc, (position, out_row), times(a[:, None], x2[in_row]))
    acc = acc.reshape(nwarps, WARP, BLOCK, k)
    # 2. the segmented scan of each warp: lane l adds lane l - d's sum to its
    # own when both are in its segment, d = 1, 2, 4, 8, 16 (lanes past the
    # warp's blocks: group -1)
    lane_group = np.full(nwarps * WARP, -1, dtype=np.int64)
    lane_group[place] = group
    lane_group = lane_group.reshape(nwarps, WARP)
    lane = np.arange(WARP)
    head = np.ones((nwarps, WARP), dtype=bool)
    head[:, 1:] = lane_group[:, 1:] != lane_group[:, :-1]
    first = np.maximum.accumulate(np.where(head, lane, 0), axis=1)
    d = 1
    while d < WARP:
        add = (lane - first >= d)[:, d:, None, None]
        acc[:, d:] = np.where(add, acc[:, :-d] + acc[:, d:], acc[:, d:])
        d <<= 1
    # 3. and 4.: the segments' last lanes in layout order, which is group
    # order: a group inside a warp gets its one sum, an empty one 0
    last = np.ones((nwarps, WARP), dtype=bool)
    last[:, :-1] = lane_group[:, :-1] != lane_group[:, 1:]
    last &= lane_group >= 0
    ngroups = ptr.shape[0] - 1
    y = np.zeros((ngroups, BLOCK, k), dtype=x2.dtype)
    pieces, groups = acc[last], lane_group[last]
    y[groups] = pieces  # a spanning group's last piece, replaced below
    _sum_pieces(y, pieces, groups)
    return y.reshape(ngroups * BLOCK, k)[:nout]


def _sum_pieces(y: np.ndarray, pieces: np.ndarray, groups: np.ndarray) -> None:
    """Step 3 for the groups spanning warps, as their last warp adds their
    pieces (in layout order): lane l sums pieces l, l + 32, ... from 0, then
    lane l takes lane l + d's sum for d = 16, 8, 4, 2, 1."""
    first = np.searchsorted(groups, groups)
    index = np.arange(groups.shape[0]) - first
    spanning = np.isin(groups, groups[index > 0])
    if not spanning.any():
        return
    spans, which = np.unique(groups[spanning], return_inverse=True)
    index, pieces = index[spanning], pieces[spanning]
    lanes = np.zeros((spans.shape[0], WARP) + pieces.shape[1:], dtype=pieces.dtype)
    for chunk in range(int(index.max()) // WARP + 1):
        now = index // WARP == chunk  # (span, lane) pairs unique within a chunk
        lanes[which[now], index[now] % WARP] += pieces[now]
    d = WARP // 2
    while d:
        lanes[:, :d] = lanes[:, :d] + lanes[:, d:2 * d]
        d //= 2
    y[spans] = lanes[:, 0]
