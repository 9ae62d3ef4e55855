"""Stage 3 of SpGEMM: the values of every output block.

With the exact output bitmaps from the count stage, every output entry is
computed by one pass over the pairs of its block and written straight to its
final place. See ``multiply.cu`` for the summation order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _kernels, _readback, convert
from .._format import BLOCK_SHIFT, set_bits, value_index
from .._sputils import get_array_module, get_index_dtype
from ..semiring import Semiring, plus_times, times
from .count import PairBlocks, bool_product

_KERNELS = "spgemm/multiply.cu"
_kernels.register(_KERNELS, {"bmsparse_multiply_warp_blocks": (),
                             "bmsparse_multiply_values": ("T", "S", "I"),
                             "bmsparse_multiply_records": ("T", "S", "I"),
                             "bmsparse_multiply_tiles": ("T", "S")})
_CSR_KERNELS = "spgemm/multiply_csr.cu"
_kernels.register(_CSR_KERNELS, {"bmsparse_multiply_csr": ("T", "S", "I", "J"),
                                 "bmsparse_multiply_csr_records": ("T", "S", "I", "J"),
                                 "bmsparse_multiply_csr_tiles": ("T", "S", "I")})
_WARP = 32

#: threads of a thread block of the multiply kernels (``_kernels.launch``'s default)
_THREADS = 256
#: values of a tile of the tiles kernels (BMSPARSE_TILE_VALUES in multiply.cuh)
TILE_VALUES = 8 * _THREADS
#: The tiles kernels take a product of records with at least TILES_LEAST_VALUES
#: values and at most one pair per TILES_VALUES_A_PAIR values; elsewhere a
#: thread per value finding its own block wins. Kernel time, H200, tiles
#: against records (pairs a value): the surrogate 580 / 706 us (0.06),
#: 2d-9pt 694 / 712 (0.40), bcsstk33 255 / 214 (0.28), email-Enron
#: 1,846 / 1,691 (1.09), mhd1280b (41 K values) 42 / 18 (0.13): see
#: benchmarks/NOTES.md, session 42.
TILES_LEAST_VALUES = 1 << 21
TILES_VALUES_A_PAIR = 8


def by_tiles(nnz: int, ntasks: int, index: np.dtype) -> bool:
    """True when the tiles kernels compute a product's values (see
    ``TILES_LEAST_VALUES``); they index in 32 bits."""
    return (index == np.int32 and nnz >= TILES_LEAST_VALUES
            and ntasks * TILES_VALUES_A_PAIR <= nnz)


def index_type(*sizes: int) -> np.dtype:
    """The dtype of the multiply kernels' index arithmetic (``I`` of
    ``multiply.cu``): int32 when every size of the product (values and
    blocks of A, B and C, tasks, the threads launched) stays below 2^31 with
    a thread block to spare, else int64. The arrays stay int64 either way.
    """
    return np.dtype(np.int32 if max(sizes) + 2 * _THREADS < 1 << 31 else np.int64)


def _index_type(a_values: Any, b_values: Any, a_offsets: Any, b_offsets: Any, task_a: Any,
                c_offsets: Any, threads: int) -> np.dtype:
    """:func:`index_type` of a product's arrays and ``threads`` launched."""
    return index_type(a_values.shape[0], b_values.shape[0], a_offsets.shape[0],
                      b_offsets.shape[0], task_a.shape[0], c_offsets.shape[0], threads)


def multiply(a_bitmaps: Any, a_offsets: Any, a_values: Any,
             b_bitmaps: Any, b_offsets: Any, b_values: Any,
             task_a: Any, task_b: Any, c_first: Any, c_last: Any,
             c_bitmaps: Any, c_offsets: Any, nnz: int, semiring: Semiring = plus_times,
             dtype: Any = None, warp_block: Any = None,
             zero_flag: _readback.HostFlag | None = None, pairs: PairBlocks | None = None,
             warp_starts: Any = None) -> tuple[Any, Any]:
    """Values of the output blocks, and how many are exactly zero.

    Arrays on the GPU must be C-contiguous, as the pipeline's are (the
    kernel is launched without checking them).

    Parameters
    ----------
    a_bitmaps, a_offsets, a_values : uint64 [a_nblocks], int64 [a_nblocks + 1], T [a_nnz]
    b_bitmaps, b_offsets, b_values : likewise for B (same dtype T)
        The values may be None for a semiring that does not read them.
    task_a, task_b : int64 [ntasks]
    c_first, c_last : int64 [c_nblocks]
        Task run ``[c_first[q], c_last[q])`` of output block q. With
        ``c_last`` None, ``c_first`` is a pointer array (int64 [c_nblocks + 1],
        the runs follow each other): run ``[c_first[q], c_first[q + 1])``.
    c_bitmaps : uint64 [c_nblocks]
        None empty (``compact.drop_empty`` has run): the GPU kernel finds a
        value's block from strictly increasing offsets.
    c_offsets : int64 [c_nblocks + 1]
    nnz : int
        ``c_offsets[-1]``, already on the host.
    semiring : Semiring
        Any but the structural ones (whose C has no values).
    dtype : dtype, optional
        T, when the semiring does not read values; else ``a_values.dtype``.
    warp_block : int64 [ceil(nnz / 32)], optional
        On the GPU, the output block holding each value ``32 * w``, when the
        caller wrote it already (the merges' blocks kernels do); else one
        more launch computes it.
    zero_flag : _readback.HostFlag, optional
        On the GPU, also set when a value is exactly zero, so that the
        caller learns whether to compact without copying ``zero_values``.
    pairs : count.PairBlocks, optional
        The tasks' blocks (``count.count`` writes them): read instead of
        going through ``task_a`` and ``task_b``, one step of loads less per
        pair.
    warp_starts : uint64 [ceil(nnz / 32)], optional
        With ``warp_block``, where blocks start inside each warp
        (:func:`warp_arrays`): a warp then finds its values' blocks without
        reading ``c_offsets``. Computed with ``warp_block`` when both are
        missing and ``pairs`` is given.

    Returns
    -------
    c_values : T [nnz]
    zero_values : uint64 [1]
        Number of values that are exactly zero (0: nothing to compact).

    Notes
    -----
    One GPU thread per output value (see ``multiply.cu``); no sync.
    """
    xp = get_array_module(a_bitmaps, a_values, b_bitmaps, b_values, task_a, c_bitmaps)
    dtype = np.dtype(a_values.dtype if semiring.reads_values else dtype)
    if not semiring.reads_values:
        a_values = b_values = xp.empty(0, dtype=dtype)
    if xp is np:
        if c_last is None:
            c_first, c_last = c_first[:-1], c_first[1:]
        if pairs is None:
            tasks = (a_bitmaps[task_a], b_bitmaps[task_b], a_offsets[task_a],
                     b_offsets[task_b])
        else:
            offsets = pairs.offsets.astype(np.int64)
            tasks = (pairs.bitmaps[:, 0], pairs.bitmaps[:, 1], offsets[:, 0], offsets[:, 1])
        return _multiply_numpy(*tasks, a_values, b_values, c_first, c_last, c_bitmaps,
                               c_offsets, nnz, semiring)
    c_nblocks = c_bitmaps.shape[0]
    if warp_block is None:
        warp_block, warp_starts = _warp_blocks(c_offsets, c_nblocks, nnz, pairs is not None)
    c_values, zero_values = value_arrays(nnz, a_values.dtype)
    index = _index_type(a_values, b_values, a_offsets, b_offsets, task_a, c_offsets, nnz)
    last_shift = 1 if c_last is None else 0
    kernel, threads = _values_kernel(False, pairs, nnz, task_a.shape[0], index, nnz,
                                     T=a_values.dtype, S=semiring.functor)
    # launched without the casts (20 arguments): the scalars made NumPy's here
    _kernels.launch(kernel, threads, (
        *_pair_arguments(pairs, a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values,
                         task_a, task_b),
        c_first, c_first if c_last is None else c_last, np.int64(last_shift), c_bitmaps,
        c_offsets, np.int64(c_nblocks), warp_block, _kernels.or_null(warp_starts),
        np.int64(nnz), c_values, zero_values,
        np.uint64(0 if zero_flag is None else zero_flag.ptr)), block=_THREADS, cast=False)
    return c_values, zero_values


def _values_kernel(csr: bool, pairs: PairBlocks | None, nnz: int, ntasks: int,
                   index: np.dtype, threads: int, **types: Any) -> tuple[Any, int]:
    """The kernel computing C's values, and the threads to launch: by the
    tasks' indices (no ``pairs``), by tiles (:func:`by_tiles`) or by the
    pairs' records, one thread per value (``threads``).

    ``index`` is the type of the kernels' index arithmetic (``I`` of
    multiply.cu, ``J`` of multiply_csr.cu); ``types`` the other parameters.
    """
    path, name = (_CSR_KERNELS, "bmsparse_multiply_csr") if csr else (_KERNELS,
                                                                      "bmsparse_multiply")
    arithmetic = {"J" if csr else "I": index}
    if pairs is None:
        return (_kernels.get_kernel(path, name if csr else name + "_values", **types,
                                    **arithmetic), threads)
    if by_tiles(nnz, ntasks, index):
        return (_kernels.get_kernel(path, name + "_tiles", **types),
                -(-nnz // TILE_VALUES) * _THREADS)
    return _kernels.get_kernel(path, name + "_records", **types, **arithmetic), threads


def _pair_arguments(pairs: PairBlocks | None, a_bitmaps: Any, a_offsets: Any, a_values: Any,
                    b_bitmaps: Any, b_offsets: Any, b_values: Any, task_a: Any,
                    task_b: Any) -> tuple[Any, ...]:
    """The value kernels' arguments up to the task runs."""
    if pairs is not None:
        return (pairs.bitmaps, pairs.columns, a_values, b_values)
    return (a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values, task_a, task_b)


def multiply_csr(a_bitmaps: Any, a_offsets: Any, a_values: Any,
                 b_bitmaps: Any, b_offsets: Any, b_values: Any,
                 task_a: Any, task_b: Any, c_first: Any, c_last: Any, c_keys: Any,
                 c_bitmaps: Any, c_offsets: Any, nnz: int, shape: tuple[int, int],
                 semiring: Semiring = plus_times, dtype: Any = None, warp_block: Any = None,
                 zero_flag: _readback.HostFlag | None = None, pairs: PairBlocks | None = None,
                 warp_starts: Any = None) -> tuple[Any, Any, Any, Any]:
    """:func:`multiply` with C written in CSR: its values placed by row, beside
    their column indices, instead of in bit order.

    Parameters
    ----------
    c_keys : uint64 [c_nblocks]
        C's block keys (canonical).
    shape : (int, int)
        C's shape.
    others
        As :func:`multiply`.

    Returns
    -------
    indptr, indices : I [m + 1], I [nnz]
        I is int32 when every index fits, else int64 (as ``BitmapMatrix.tocsr``).
    data : T [nnz]
    zero_values : uint64 [1]
        As :func:`multiply`: exact zeros are still in the CSR arrays.

    Notes
    -----
    On the GPU the values go straight to their CSR places (``multiply_csr.cu``),
    after one scan of C's row segments (``convert.csr_places``): the
    bitmap-order values and the pass converting them are never made. On the
    host, :func:`multiply` then ``convert.bitmap_to_csr``. No sync.
    """
    xp = get_array_module(a_bitmaps, a_values, b_bitmaps, b_values, task_a, c_bitmaps)
    if xp is np:
        c_values, zero_values = multiply(a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets,
                                         b_values, task_a, task_b, c_first, c_last,
                                         c_bitmaps, c_offsets, nnz, semiring, dtype,
                                         pairs=pairs)
        return (*convert.bitmap_to_csr(c_keys, c_bitmaps, c_offsets, c_values, shape, nnz),
                zero_values)
    import cupy

    dtype = np.dtype(a_values.dtype if semiring.reads_values else dtype)
    if not semiring.reads_values:
        a_values = b_values = cupy.empty(0, dtype=dtype)
    if warp_block is None:
        warp_block, warp_starts = _warp_blocks(c_offsets, c_bitmaps.shape[0], nnz,
                                               pairs is not None)
    nrows = shape[0]
    index_dtype = get_index_dtype(max(nnz, shape[1]))
    brow_ptr, places = convert.csr_places(c_keys, c_bitmaps, nrows, index_dtype)
    indptr = cupy.empty(nrows + 1, dtype=index_dtype)
    indices = cupy.empty(nnz, dtype=index_dtype)
    data, zero_values = value_arrays(nnz, dtype)
    index = _index_type(a_values, b_values, a_offsets, b_offsets, task_a, c_offsets,
                        max(nnz, nrows + 1))
    kernel, threads = _values_kernel(True, pairs, nnz, task_a.shape[0], index,
                                     max(nnz, nrows + 1), T=dtype, S=semiring.functor,
                                     I=index_dtype)
    last_shift = 1 if c_last is None else 0
    _kernels.launch(kernel, threads, (
        *_pair_arguments(pairs, a_bitmaps, a_offsets, a_values, b_bitmaps, b_offsets, b_values,
                         task_a, task_b),
        c_first, c_first if c_last is None else c_last, np.int64(last_shift), c_bitmaps,
        c_offsets, np.int64(c_bitmaps.shape[0]), warp_block, _kernels.or_null(warp_starts),
        np.int64(nnz), c_keys, brow_ptr, places, np.int64(nrows), indptr, indices, data,
        zero_values, np.uint64(0 if zero_flag is None else zero_flag.ptr)), cast=False)
    return indptr, indices, data, zero_values


def _warp_blocks(c_offsets: Any, c_nblocks: int, nnz: int, starts: bool) -> tuple[Any, Any]:
    """The output block of every warp's first value (int64 [ceil(nnz / 32)]),
    and with ``starts`` the warps' starts (:func:`warp_arrays`; else None)."""
    import cupy

    if starts:
        warp_block, warp_starts = warp_arrays(nnz)
    else:
        warp_block, warp_starts = cupy.empty(-(-nnz // _WARP), dtype=cupy.int64), None
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_multiply_warp_blocks")
    _kernels.launch(kernel, c_nblocks, (c_offsets, c_nblocks, warp_block,
                                        _kernels.or_null(warp_starts)))
    return warp_block, warp_starts


def warp_arrays(nnz: int) -> tuple[Any, Any]:
    """Uninitialised ``warp_block`` (int64 [ceil(nnz / 32)]) and zeroed
    ``warp_starts`` (uint64, as many), in one allocation, on the GPU.

    Word w of ``warp_starts`` holds in bit 32 + d that a block starts at value
    32 w + d (0 < d < 32), and in its low bits how many values of block
    ``warp_block[w]`` come before 32 w (``mark_warp_starts`` in bitmap.cuh):
    a lane finds its value's block and place from the two words alone.
    """
    return tuple(_kernels.device_arrays(*warp_specs(nnz), zeroed=1))


def warp_specs(nnz: int) -> tuple[tuple[int, np.dtype], ...]:
    """``(shape, dtype)`` of :func:`warp_arrays`, for a caller that allocates
    them with other arrays (``_kernels.device_arrays``; the starts last, zeroed)."""
    nwarps = -(-nnz // _WARP)
    return (nwarps, np.dtype(np.int64)), (nwarps, np.dtype(np.uint64))


def value_arrays(nnz: int, dtype: np.dtype) -> tuple[Any, Any]:
    """C's values (``dtype`` [nnz], uninitialised) and a zeroed counter of
    those exactly zero (uint64 [1]), on the GPU."""
    import cupy

    # in one allocation (cupy.zeros is an allocation and a launch); the
    # counter, 8 bytes, lives as long as C
    at = -(-nnz * dtype.itemsize // 8) * 8
    memory = cupy.cuda.alloc(at + 8)
    (memory + at).memset_async(0, 8)
    return (_kernels.device_array(memory, 0, nnz, dtype),
            _kernels.device_array(memory, at, 1, np.uint64))


@np.errstate(invalid="ignore", over="ignore")  # inf * 0 is NaN, as in scipy, silently
def _multiply_numpy(a_bitmaps, b_bitmaps, a_starts, b_starts, a_values, b_values, c_first,
                    c_last, c_bitmaps, c_offsets, nnz, semiring):
    # a_bitmaps .. b_starts: each task's blocks and their value offsets.
    # Enumerate every product term (task p, A entry (r, t), B entry (t, c))
    # in the kernel's order: by task, then A bit, then B bit. Tasks outside
    # every run (of blocks dropped as empty) have empty products: no term.
    lengths = c_last - c_first
    c_of_task = np.full(a_bitmaps.shape[0], -1, dtype=np.int64)
    in_runs = np.repeat(c_first - np.cumsum(lengths) + lengths, lengths) + np.arange(
        lengths.sum())
    c_of_task[in_runs] = np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)
    # only tasks with a term: in a run, with a non-empty Boolean product (most
    # tasks of sparse blocks have none); task order is kept
    live = np.flatnonzero(c_of_task >= 0)
    live = live[bool_product(a_bitmaps[live], b_bitmaps[live]) != 0]
    term_task, a_bit = set_bits(a_bitmaps[live])
    term_task = live[term_task]
    r, t = a_bit >> BLOCK_SHIFT, a_bit & 7
    b_row = (b_bitmaps[term_task] >> (t << BLOCK_SHIFT).astype(np.uint64)) & np.uint64(0xFF)
    # expand each A entry by the B entries in row t of its paired block
    term_a, c_col = set_bits(b_row)
    term_task, r, t = term_task[term_a], r[term_a], t[term_a]
    a_pos = a_starts[term_task] + value_index(a_bitmaps[term_task], (r << BLOCK_SHIFT) | t)
    b_pos = b_starts[term_task] + value_index(b_bitmaps[term_task], (t << BLOCK_SHIFT) | c_col)
    q = c_of_task[term_task]
    c_bit = (r << BLOCK_SHIFT) | c_col
    # a mask can leave bits of a product out of C: their terms are not computed
    kept = ((c_bitmaps[q] >> c_bit.astype(np.uint64)) & np.uint64(1)).astype(bool)
    a_pos, b_pos, q, c_bit = a_pos[kept], b_pos[kept], q[kept], c_bit[kept]
    c_pos = c_offsets[q] + value_index(c_bitmaps[q], c_bit)
    # ufunc.at accumulates in array order, which is the kernel's (task, t) order
    c_values = np.full(nnz, semiring.identity(a_values.dtype), dtype=a_values.dtype)
    _MONOIDS[semiring.monoid].at(c_values, c_pos, _terms(semiring, a_values, a_pos, b_values,
                                                         b_pos))
    zero_values = np.array([np.count_nonzero(c_values == 0)], dtype=np.uint64)
    return c_values, zero_values


_MONOIDS = {"plus": np.add, "min": np.minimum, "max": np.maximum}


def _terms(semiring: Semiring, a_values: np.ndarray, a_pos: np.ndarray,
           b_values: np.ndarray, b_pos: np.ndarray) -> np.ndarray:
    """``mul(A entry, B entry)`` of every product term."""
    if semiring.binaryop == "pair":
        return np.ones(a_pos.shape[0], dtype=a_values.dtype)
    a, b = a_values[a_pos], b_values[b_pos]
    return times(a, b) if semiring.binaryop == "times" else a + b
