"""Loading the package's CUDA sources as CuPy kernels.

- :func:`source` gives a ``.cu`` file's text with the package's own
  ``#include "..."`` files inlined. CuPy's compile cache hashes the source
  string but not included files, so inlining makes a header edit recompile.
- :func:`register` records which templates a file instantiates, so the
  compile test can build every name expression without a GPU.
- :func:`get_kernel` returns a RawKernel; one RawModule per file and device,
  built lazily.
- :func:`launch` launches a kernel through CuPy; :class:`PreparedLaunch`
  through the driver, with its arguments packed in a buffer kept with it
  (the launches whose host time is most of an operation's: SpMV with a
  vector, the transpose). Nothing else launches.

Importing this module compiles nothing and needs no GPU.
"""

from __future__ import annotations

import itertools
import math
import re
import struct
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np

PACKAGE_DIR = Path(__file__).resolve().parent

#: a null pointer argument, for a kernel's optional array
NULL = np.uint64(0)


def or_null(array: Any) -> Any:
    """``array``, or :data:`NULL` when it is None."""
    return NULL if array is None else array

#: dtype -> C type of the template parameter ``T``
CTYPES: dict[np.dtype, str] = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int32): "int",
    np.dtype(np.int64): "long long",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.complex64): "bm_complex<float>",
    np.dtype(np.complex128): "bm_complex<double>",
}

#: value dtypes every value kernel is instantiated for
VALUE_DTYPES: tuple[np.dtype, ...] = tuple(d for d in CTYPES if d != np.bool_)

#: index dtypes of the template parameters ``I`` and ``J`` (a second index
#: type, for a kernel whose arrays and arithmetic differ)
INDEX_DTYPES: tuple[np.dtype, ...] = (np.dtype(np.int32), np.dtype(np.int64))

#: the dtypes each template parameter is instantiated for
PARAM_DTYPES: dict[str, tuple[np.dtype, ...]] = {"T": VALUE_DTYPES, "I": INDEX_DTYPES,
                                                 "J": INDEX_DTYPES}

#: semiring functors (``_cuda/semiring.cuh``) of the template parameter ``S``;
#: a kernel with ``S`` is instantiated for the value dtypes each one supports
SEMIRING_PARAM = "S"

#: NVRTC options shared by every module. No fused multiply-add: a product
#: then rounds as scipy's does, and since entries are summed in scipy's order
#: (ascending inner index) sums that cancel exactly in scipy cancel here too
COMPILE_OPTIONS: tuple[str, ...] = ("-std=c++17", "--fmad=false")

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[ \t]*$', re.MULTILINE)

# file (relative to the package) -> {kernel name: template parameter names}
_REGISTRY: dict[str, dict[str, tuple[str, ...]]] = {}
_MODULES: dict[tuple[str, int], Any] = {}
_FUNCTIONS: dict[tuple[Any, ...], Any] = {}
#: (kernel id, threads, shared memory) -> resident thread blocks; kernels
#: are kept in _FUNCTIONS for good, so their ids stay theirs
_RESIDENT: dict[tuple[int, int, int], int] = {}
#: (kernel id, shared memory) pairs already allowed by _allow_shared
_SHARED: set[tuple[int, int]] = set()

#: cupy.ndarray, cupy.cuda.runtime.getDevice, cupy.cuda.get_current_stream
#: and cupy.cuda.alloc, bound at first use (:func:`bind_cupy`; importing CuPy
#: here would make this module need it, and reading them from CuPy at each
#: of a small product's dozen calls costs an import and three lookups).
#: ``_readback`` uses them too
_NDARRAY: Any = None
_GET_DEVICE: Any = None
_CURRENT_STREAM: Any = None
_ALLOC: Any = None
#: cupy.cuda.driver.launchKernel and launchCooperativeKernel, bound with them
#: (:class:`PreparedLaunch`)
_LAUNCH_KERNEL: Any = None
_LAUNCH_COOPERATIVE: Any = None
#: cupy.cuda.driver.ctxGetCurrent and ctxSetCurrent, bound with them
_CONTEXT: tuple[Any, Any] = (None, None)
#: cudaStreamPerThread: one handle, and in CuPy one Stream object
#: (``Stream.ptds``, the default stream under
#: CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1), that is a different stream in
#: each host thread: what is kept per stream is kept per thread for it
PER_THREAD_STREAM = 2
_local = threading.local()


def thread_token() -> object:
    """An object of the calling host thread's own, for keys of what is kept
    per thread: a thread id is reused by a thread started after another
    ended, whose per-thread stream is another (and may still run)."""
    token = getattr(_local, "token", None)
    if token is None:
        token = _local.token = object()
    return token

#: dtypes of :func:`block_arrays`, built once (CuPy would convert a scalar
#: type at each array)
_UINT64, _INT64 = np.dtype(np.uint64), np.dtype(np.int64)

#: hook for tests: called with (kernel name, n, grid, block) at each launch
launch_hook: Callable[[str, int, int, int], None] | None = None


def source(path: str) -> str:
    """Text of the package file ``path`` with its quoted includes inlined."""
    return _inline(PACKAGE_DIR / path, set())


def _inline(file: Path, seen: set[Path]) -> str:
    if file in seen:  # headers use #pragma once; inlining twice would redefine
        return ""
    seen.add(file)
    text = file.read_text()

    def include(match: re.Match[str]) -> str:
        target = (file.parent / match.group(1)).resolve()
        if not target.is_file():
            raise FileNotFoundError(f"{file.name} includes missing file {match.group(1)!r}")
        return _inline(target, seen)

    return _INCLUDE.sub(include, text)


def register(path: str, templates: dict[str, tuple[str, ...]]) -> None:
    """Declare the kernels of ``path`` and the template parameters of each.

    A kernel with ``("T", "I")`` is instantiated for every combination of
    ``PARAM_DTYPES["T"]`` and ``PARAM_DTYPES["I"]``; one with ``()`` is an
    ``extern "C"`` kernel named as written.
    """
    _REGISTRY[path] = dict(templates)


def registered() -> dict[str, dict[str, tuple[str, ...]]]:
    """Every registered file with its kernels (imports the stage modules)."""
    from . import _primitives, construct, convert  # noqa: F401 - registration happens at import
    from . import elementwise, spmv, transpose  # noqa: F401
    from .spgemm import compact, count, lean, multiply, rowdense, rowmerge, rowscalar  # noqa: F401
    from .spgemm import slices, tasks  # noqa: F401

    return dict(_REGISTRY)


def name_expression(name: str, params: tuple[str, ...], **types: Any) -> str:
    """C++ name expression, e.g. ``bmsparse_multiply_values<double>``."""
    if not params:
        return name
    args = [types[p] if p == SEMIRING_PARAM else CTYPES[np.dtype(types[p])] for p in params]
    return f"{name}<{', '.join(args)}>"


def name_expressions(path: str) -> list[str]:
    """All name expressions instantiated from ``path``."""
    out = []
    for name, params in _REGISTRY[path].items():
        for combo in itertools.product(*(_param_values(p) for p in params)):
            types = dict(zip(params, combo))
            if _instantiated(types):
                out.append(name_expression(name, params, **types))
    return out


def _param_values(param: str) -> tuple[Any, ...]:
    if param == SEMIRING_PARAM:
        from .semiring import SEMIRINGS

        return tuple(sorted({s.functor for s in SEMIRINGS.values() if s.functor}))
    return PARAM_DTYPES[param]


def _instantiated(types: dict[str, Any]) -> bool:
    """False for a value dtype the kernel's semiring does not support."""
    functor = types.get(SEMIRING_PARAM)
    if functor is None or "T" not in types:
        return True
    from .semiring import SEMIRINGS

    semiring = next(s for s in SEMIRINGS.values() if s.functor == functor)
    return np.dtype(types["T"]) in semiring.dtypes


def get_kernel(path: str, name: str, **types: Any) -> Any:
    """RawKernel ``name`` of file ``path``, instantiated for ``types``.

    Memoized per device: small products launch a dozen kernels, and looking
    one up must cost far less than launching it (the key as called is tried
    first; the normalised one only on a miss).
    """
    if _GET_DEVICE is None:
        bind_cupy()
    device = _GET_DEVICE()
    fast: tuple[Any, ...] | None = (path, name, device, *types.items())
    try:
        kernel = _FUNCTIONS.get(fast)
    except TypeError:  # an unhashable way of naming a dtype: the normalised key only
        kernel, fast = None, None
    if kernel is not None:
        return kernel
    key = (path, name, device, *sorted((k, v if k == SEMIRING_PARAM else np.dtype(v).str)
                                       for k, v in types.items()))
    kernel = _FUNCTIONS.get(key)
    if kernel is None:
        module = _MODULES.get((path, device))
        if module is None:
            import cupy

            module = cupy.RawModule(code=source(path), options=COMPILE_OPTIONS,
                                    name_expressions=name_expressions(path))
            _MODULES[(path, device)] = module
        kernel = module.get_function(name_expression(name, _REGISTRY[path][name], **types))
        _FUNCTIONS[key] = kernel
    if fast is not None:
        _FUNCTIONS[fast] = kernel
    return kernel


def launch(kernel: Any, n: int, args: tuple[Any, ...], block: int = 256,
           shared_mem: int = 0, cooperative: bool = False, cast: bool = True) -> None:
    """Launch ``kernel`` with one thread per item of ``n`` (nothing if 0).

    Python ints become ``long long`` and Python floats ``double``, so every
    scalar argument has the exact C type the kernel declares; array arguments
    must be C-contiguous. ``cast=False`` skips both steps (about 4 us for 16
    arguments) for a caller whose scalars are already NumPy scalars of the
    declared types and whose arrays are contiguous by construction. ``shared_mem``
    bytes of dynamic shared memory are given to each thread block (above
    48 KiB with the kernel's static shared memory, its limit is raised first).
    ``cooperative`` launches so that every thread block is resident at once
    (``cuLaunchCooperativeKernel``; an error, not a hang, when the grid is
    larger than :func:`resident_blocks`): the condition of a grid barrier.
    """
    if n <= 0:
        return
    if cast:
        args = _cast(kernel, args)
    grid = (n + block - 1) // block
    if launch_hook is not None:
        launch_hook(kernel.name, n, grid, block)
    if shared_mem and (id(kernel), shared_mem) not in _SHARED:  # no call once allowed
        _allow_shared(kernel, shared_mem)
    if cooperative:
        kernel.kernel((grid,), (block,), args, shared_mem, None, True)
    else:
        kernel((grid,), (block,), args, shared_mem=shared_mem)


#: struct's codes of the tail fields PreparedLaunch packs without NumPy
#: (little-endian 8-byte integers; the GPUs CUDA runs on are little-endian)
_PACK_CODES = {"u8": "Q", "i8": "q"}


class PreparedLaunch:
    """Launches of ``kernel`` whose arguments are packed in one buffer kept
    with it, through the driver (``cuLaunchKernel``) rather than CuPy's
    RawKernel call.

    CuPy builds an object per argument at each call; here a call writes its
    arguments into the buffer (``struct.pack_into`` of one tuple where they
    are all 8-byte integers, else NumPy's record assignment) and makes one
    driver call. The first arguments, ``fixed``, are packed once.

    Parameters
    ----------
    kernel : cupy.RawKernel
    fixed : tuple
        The first arguments, each a NumPy scalar (a structured ``np.void``
        included) of the exact type the kernel declares: no cast is made.
    tail : numpy.dtype
        A structured dtype with a field per later argument, of the types the
        kernel declares (pointers as uint64; a struct by value as a nested
        structured dtype), each field at a multiple of 8 bytes.
    block, shared_mem :
        Threads and bytes of dynamic shared memory a thread block.
    cooperative : bool
        A cooperative launch (``cuLaunchCooperativeKernel``), as in
        :func:`launch`.

    Notes
    -----
    The buffer is shared by every call: a lock keeps a call's arguments its
    own until the driver has copied them (at the launch).
    """

    __slots__ = ("name", "block", "shared_mem", "_function", "_context", "_cooperative",
                 "_tail", "_pack", "_tail_at", "_pointers", "_buffers", "_lock")

    def __init__(self, kernel: Any, fixed: tuple[Any, ...], tail: np.dtype, block: int = 256,
                 shared_mem: int = 0, cooperative: bool = False) -> None:
        import threading

        for name in tail.names:
            field, offset = tail.fields[name][:2]
            if offset % 8 or field.itemsize % 8:
                raise ValueError(f"{kernel.name}: argument {name!r} of the tail must take a "
                                 "multiple of 8 bytes at a multiple of 8 bytes")
        if _LAUNCH_KERNEL is None:
            bind_cupy()
        _allow_shared(kernel, shared_mem)
        self.name, self.block, self.shared_mem = kernel.name, block, shared_mem
        self._function = kernel.kernel.ptr  # the CUfunction, alive with its module
        self._context = _CONTEXT[0]()  # the context it was loaded in (the device's primary)
        self._cooperative = cooperative
        # each fixed argument at a multiple of 8 bytes, then the tail
        sizes = [-(-np.asarray(a).itemsize // 8) for a in fixed]
        starts = [0, *itertools.accumulate(sizes)]
        params = np.zeros(starts[-1] + tail.itemsize // 8, dtype=np.uint64)
        raw = params.view(np.uint8)
        for a, start in zip(fixed, starts):
            item = np.asarray(a).reshape(1).view(np.uint8)
            raw[8 * start:8 * start + item.size] = item
        self._tail = params[starts[-1]:].view(tail)
        # a tail of 8-byte integers is packed by struct: 0.3-2 us less per call
        # than NumPy's record assignment (a device host: SpMV's 3 fields, the
        # transpose's 16-20 and the merge's 21)
        codes = "".join(_PACK_CODES.get(tail.fields[n][0].str[1:], "?") for n in tail.names)
        self._pack = None if "?" in codes or tail.itemsize != 8 * len(codes) \
            else struct.Struct("<" + codes).pack_into
        self._tail_at = 8 * starts[-1]
        base = params.ctypes.data
        addresses = [base + 8 * s for s in starts[:-1]]
        addresses += [base + 8 * starts[-1] + tail.fields[n][1] for n in tail.names]
        self._buffers = (params, np.array(addresses, dtype=np.uint64))
        self._pointers = self._buffers[1].ctypes.data
        self._lock = threading.Lock()

    def __call__(self, stream: int, grid: int, tail: tuple[Any, ...]) -> None:
        """Launch ``grid`` thread blocks on ``stream`` (a CUstream handle),
        with ``tail`` as the later arguments (pointers as ints); none for 0."""
        if grid <= 0:
            return
        if launch_hook is not None:
            launch_hook(self.name, grid * self.block, grid, self.block)
        current = _CONTEXT[0]()
        if current != self._context:
            # a thread that has made no runtime call has no context (the driver
            # call would fail), or another device's is current: ours for the
            # launch, as CuPy's launch makes its own, and theirs back after
            _CONTEXT[1](self._context)
        try:
            with self._lock:
                if self._pack is not None:
                    self._pack(self._buffers[0], self._tail_at, *tail)
                else:
                    self._tail[0] = tail
                if self._cooperative:
                    _LAUNCH_COOPERATIVE(self._function, grid, 1, 1, self.block, 1, 1,
                                        self.shared_mem, stream, self._pointers)
                else:
                    _LAUNCH_KERNEL(self._function, grid, 1, 1, self.block, 1, 1,
                                   self.shared_mem, stream, self._pointers, 0)
        finally:
            if current and current != self._context:
                _CONTEXT[1](current)


def device_array(memory: Any, start: int, size: int, dtype: Any) -> Any:
    """A CuPy array (1-D, ``size`` elements of ``dtype``) at byte ``start``
    of raw ``memory`` (a ``cupy.cuda.MemoryPointer``), which it keeps alive.

    About 1 us where ``cupy.empty`` costs 3-5: the arrays of one small
    operation come from one allocation.
    """
    if _NDARRAY is None:
        bind_cupy()
    # positional arguments: CuPy's constructor parses keywords slowly
    return _NDARRAY((size,), dtype, memory + start if start else memory)


def device_arrays(*specs: tuple[Any, Any], zeroed: int = 0) -> list[Any]:
    """Uninitialised CuPy arrays of ``(shape, dtype)`` each, in one raw
    allocation, each starting at a multiple of 256 bytes; the last ``zeroed``
    of them zeroed (one memset). One allocation costs about what each
    ``cupy.empty`` does; the arrays keep all of it alive, so they should be
    arrays that die together.
    """
    import cupy

    if _NDARRAY is None:
        bind_cupy()
    starts, end = [], 0
    for shape, dtype in specs:
        starts.append(end)
        size = shape if isinstance(shape, int) else math.prod(shape)
        end += -(-size * np.dtype(dtype).itemsize // 256) * 256
    memory = cupy.cuda.alloc(end)
    if zeroed and end > starts[-zeroed]:
        (memory + starts[-zeroed]).memset_async(0, end - starts[-zeroed])
    return [_NDARRAY(shape if isinstance(shape, tuple) else (shape,), dtype,
                     memory + start if start else memory)
            for (shape, dtype), start in zip(specs, starts)]


def device_empty(size: int, dtype: Any) -> Any:
    """``cupy.empty(size, dtype)`` as :func:`device_array` over its own raw
    allocation (about 2 us against 3-5)."""
    import cupy

    dtype = np.dtype(dtype)
    return device_array(cupy.cuda.alloc(size * dtype.itemsize), 0, size, dtype)


def alloc_blocks(capacity: int) -> Any:
    """Raw memory for the keys, bitmaps and offsets of up to ``capacity``
    blocks (:func:`block_arrays`), which live and die together."""
    import cupy

    return cupy.cuda.alloc(8 * (3 * capacity + 1))


def block_arrays(memory: Any, n: int, capacity: int | None = None) -> tuple[Any, Any, Any]:
    """keys, bitmaps (uint64 [n]) and offsets (int64 [n + 1]) in ``memory``
    from :func:`alloc_blocks` (``capacity``, default n)."""
    capacity = n if capacity is None else capacity
    return (device_array(memory, 0, n, _UINT64),
            device_array(memory, 8 * capacity, n, _UINT64),
            device_array(memory, 16 * capacity, n + 1, _INT64))


def _cast(kernel: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``args`` with Python scalars as NumPy ones; a strided array is an error."""
    if _NDARRAY is None:
        bind_cupy()
    cast = []
    for a in args:
        kind = type(a)
        # exact types first: this runs for every argument of every launch
        if kind is int or kind is bool:
            a = np.int64(a)
        elif kind is float:
            a = np.float64(a)
        elif isinstance(a, _NDARRAY):
            # CuPy's own attribute (.flags builds an object per call)
            if not a._c_contiguous:
                _not_contiguous(kernel)
        elif isinstance(a, (bool, int)) and not isinstance(a, np.generic):
            a = np.int64(a)
        elif isinstance(a, float) and not isinstance(a, np.generic):
            a = np.float64(a)
        cast.append(a)
    return tuple(cast)


def bind_cupy() -> None:
    """Bind :data:`_NDARRAY`, :data:`_GET_DEVICE`, :data:`_CURRENT_STREAM`,
    :data:`_ALLOC` and the driver's launches, at the first call that needs CuPy."""
    global _NDARRAY, _GET_DEVICE, _CURRENT_STREAM, _ALLOC, _LAUNCH_KERNEL, \
        _LAUNCH_COOPERATIVE, _CONTEXT
    import cupy

    _NDARRAY, _GET_DEVICE = cupy.ndarray, cupy.cuda.runtime.getDevice
    _CURRENT_STREAM, _ALLOC = cupy.cuda.get_current_stream, cupy.cuda.alloc
    _LAUNCH_KERNEL = cupy.cuda.driver.launchKernel
    _LAUNCH_COOPERATIVE = cupy.cuda.driver.launchCooperativeKernel
    _CONTEXT = (cupy.cuda.driver.ctxGetCurrent, cupy.cuda.driver.ctxSetCurrent)


def barrier_words() -> int:
    """Device pointer to the two uint64 words of a grid barrier
    (``_cuda/grid.cuh``) for launches on the current stream and device.

    Zeroed once, when first asked for, and never again: every launch that
    uses them leaves them ready for the next (the arrivals count back to
    zero as the last thread block arrives; the generation only counts up;
    ``_cuda/grid.cuh``), so a cooperative launch needs no memset for its
    barrier (about 6 us of host time). Launches on one stream run one after another and may share
    them; each stream object has its own, freed with it by ``cudaFree``,
    which waits for the device. The per-thread default stream is one object
    for every host thread but runs each thread's launches on its own stream,
    which may overlap: there each thread has its own words.
    """
    if _CURRENT_STREAM is None:
        bind_cupy()
    stream = _CURRENT_STREAM()
    device = _GET_DEVICE()
    owner = (_local if stream.ptr == PER_THREAD_STREAM else stream).__dict__
    words = owner.get("_bmsparse_barriers")
    if words is None:
        words = owner.setdefault("_bmsparse_barriers", {})
    memory = words.get(device)
    if memory is None:
        import cupy

        # not from the pool: a pooled block could be handed on while a
        # launch of the stream still spins on it
        memory = cupy.cuda.memory.Memory(16)
        cupy.cuda.runtime.memset(memory.ptr, 0, 16)
        # two threads asking at once get the same words (setdefault is atomic)
        memory = words.setdefault(device, memory)
    return memory.ptr


def _not_contiguous(kernel: Any) -> None:
    # a kernel reads a pointer as a dense array: a strided view (for example a
    # column of cupy.nonzero's result) would be read wrongly
    raise ValueError(f"{kernel.name}: array arguments must be C-contiguous")


def _allow_shared(kernel: Any, shared_mem: int) -> None:
    """Let ``kernel`` take ``shared_mem`` bytes of dynamic shared memory:
    beyond 48 KiB in all (static shared memory included) a kernel must opt
    in, for its launches and for the occupancy calculator alike."""
    key = (id(kernel), shared_mem)
    if not shared_mem or key in _SHARED:  # the attributes are driver calls
        return
    if shared_mem + kernel.shared_size_bytes > 48 * 1024 \
            and kernel.max_dynamic_shared_size_bytes < shared_mem:
        kernel.max_dynamic_shared_size_bytes = shared_mem
    _SHARED.add(key)


def resident_blocks(kernel: Any, block: int, shared_mem: int = 0) -> int:
    """Thread blocks of ``block`` threads of ``kernel``, each with
    ``shared_mem`` bytes of dynamic shared memory, resident at once on the
    current device (the occupancy calculator's figure: threads, registers,
    shared memory and the runtime's reserve), memoized."""
    key = (id(kernel), block, shared_mem)
    count = _RESIDENT.get(key)
    if count is None:
        import cupy

        _allow_shared(kernel, shared_mem)
        func = kernel.kernel
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            func.ptr, block, shared_mem)
        device = cupy.cuda.Device()
        count = _RESIDENT[key] = max(per_sm, 1) * device.attributes["MultiProcessorCount"]
    return count
