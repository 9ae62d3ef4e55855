"""Reading a few integers from the device, for the host to size the next step.

Every sync of the pipeline reads a handful of sizes. ``int(x[-1])`` or
``x[idx].tolist()`` costs 22-24 us of host time on the H100 machines (CuPy
builds a host array and copies synchronously through pageable memory),
more than a kernel launch. Here the values go through a small
page-locked buffer per thread:

- :func:`read_ints` copies each value with ``cudaMemcpyAsync`` and waits on
  the current stream only (about 9 us for one value);
- :func:`host_words` hands a kernel a device-visible pointer into that
  buffer, so the kernel writes the values itself and the host only waits on
  the stream (about 2 us): the scan of the count stages reports its totals
  this way (``_primitives.scan_totals``);
- :func:`read_later` queues the copies and returns: the caller queues more
  GPU work, then waits for the copies alone (:meth:`Pending.wait`), so the
  GPU works while the host waits and then allocates what the values size.

A thread's buffer is reused by its next read: values are copied out before
returning.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import numpy as np

from . import _kernels

#: int64 words of a thread's buffer (grown when a read needs more)
_WORDS = 16
_local = threading.local()


def _buffer(nwords: int, slot: str = "words") -> np.ndarray:
    """This thread's page-locked int64 buffer ``slot`` of at least ``nwords``
    words (its address at ``_local.<slot>_ptr``)."""
    words = getattr(_local, slot, None)
    if words is None or words.shape[0] < nwords:
        import cupy

        size = max(nwords, _WORDS)
        memory = cupy.cuda.alloc_pinned_memory(8 * size)
        words = np.frombuffer(memory, dtype=np.int64, count=size)  # keeps memory alive
        setattr(_local, slot, words)
        # .ctypes builds an object per call
        setattr(_local, f"{slot}_ptr", words.ctypes.data)
    return words


def read_ints(*items: tuple[Any, int]) -> list[int]:
    """The integers ``array[index]`` of each (array, index), in one sync.

    Parameters
    ----------
    items : (cupy.ndarray, int)
        C-contiguous device arrays of 32- or 64-bit integers, and an index in
        each (negative counts from the end); NumPy arrays are read directly,
        so that the stages' host twins share the call.

    Returns
    -------
    list of int
    """
    if _on_host(items):
        return _host_ints(items)
    words = _buffer(len(items))
    _queue_copies(items, words).synchronize()
    return _decoded(words, items)


def _on_host(items: tuple[tuple[Any, int], ...]) -> bool:
    return all(isinstance(array, np.ndarray) for array, _ in items)


def _host_ints(items: tuple[tuple[Any, int], ...]) -> list[int]:
    return [int(array[index]) for array, index in items]


def _queue_copies(items: tuple[tuple[Any, int], ...], words: np.ndarray) -> Any:
    """Queue the copies of each ``array[index]`` to ``words`` on the current
    stream, and return the stream."""
    import cupy

    words[:len(items)] = 0  # a 4-byte value fills the low half of its word
    stream = cupy.cuda.get_current_stream()
    for slot, (array, index) in enumerate(items):
        _copy(array, index if index >= 0 else index + array.shape[0], 1, words, slot, stream)
    return stream


def _decoded(words: np.ndarray, items: tuple[tuple[Any, int], ...]) -> list[int]:
    """The integers :func:`_queue_copies` copied, once the copies are done."""
    return [_as_int(v, array.dtype) for v, (array, _) in zip(words[:len(items)].tolist(), items)]


class Pending:
    """Integers on their way to the host (:func:`read_later`)."""

    __slots__ = ("_items", "_words", "_event")

    def __init__(self, items: tuple[tuple[Any, int], ...], words: np.ndarray | None,
                 event: Any) -> None:
        self._items, self._words, self._event = items, words, event

    def wait(self) -> list[int]:
        """The integers, once their copies are done (not the work queued
        after them)."""
        if self._words is None:
            return _host_ints(self._items)
        self._event.synchronize()
        return _decoded(self._words, self._items)


def read_later(*items: tuple[Any, int]) -> Pending:
    """Queue the copies of :func:`read_ints`' integers and return at once; GPU
    work queued next runs while :meth:`Pending.wait` waits for the copies.

    The copies land in a page-locked buffer of their own per thread, which
    the thread's next ``read_later`` reuses: wait for one before the next.
    NumPy arrays are read at the wait.
    """
    if _on_host(items):
        return Pending(items, None, None)
    words = _buffer(len(items), "later")
    copied = _event()
    copied.record(_queue_copies(items, words))
    return Pending(items, words, copied)


def _event() -> Any:
    """This thread's CUDA event on the current device, for :func:`read_later`
    (made once: an event costs microseconds; without timing, the cheapest
    kind)."""
    if _kernels._GET_DEVICE is None:
        _kernels.bind_cupy()
    device = _kernels._GET_DEVICE()
    events = getattr(_local, "events", None)
    if events is None:
        events = _local.events = {}
    event = events.get(device)
    if event is None:
        import cupy

        event = events[device] = cupy.cuda.Event(disable_timing=True)
    return event


def read_head(a: Any, count: int) -> list[int]:
    """``a[:count]`` of an int64 / uint64 device array, in one copy and one sync
    (of a NumPy array, directly)."""
    if isinstance(a, np.ndarray):
        return [int(v) for v in a[:count]]
    import cupy

    words = _buffer(count)
    stream = cupy.cuda.get_current_stream()
    _copy(a, 0, count, words, 0, stream)
    stream.synchronize()
    values = words[:count].tolist()
    return [v % (1 << 64) for v in values] if a.dtype == np.uint64 else values


def _copy(array: Any, index: int, count: int, words: np.ndarray, slot: int,
          stream: Any) -> None:
    """Start copying ``array[index:index + count]`` to ``words[slot:]`` (one
    element per word: ``count`` must be 1 for 4-byte elements)."""
    size = array.itemsize
    if not (0 <= index and index + count <= array.shape[0] and array.dtype.kind in "iu"
            and (size == 8 or (size == 4 and count == 1))
            and array._c_contiguous):  # CuPy's attribute: .flags builds an object
        raise IndexError(f"cannot read elements [{index}, {index + count}) of a "
                         f"{array.dtype} array of shape {array.shape}")
    (array.data + size * index).copy_to_host_async(words.ctypes.data + 8 * slot,
                                                   size * count, stream)


def _as_int(word: int, dtype: np.dtype) -> int:
    """The value of ``dtype`` whose bytes fill the low end of an int64 ``word``."""
    bits = 8 * dtype.itemsize
    word %= 1 << bits
    return word - (1 << bits) if dtype.kind == "i" and word >> (bits - 1) else word


def read_last(a: Any) -> int:
    """``int(a[-1])`` by :func:`read_ints` (a sync on the GPU)."""
    return read_ints((a, -1))[0]


def host_words(nwords: int) -> int | None:
    """A pointer kernels may write ``nwords`` int64 values to, read back by
    :func:`take_words`; None where the device cannot write host memory
    (then read with :func:`read_ints`)."""
    # CuPy's functions as _kernels binds them: one small product calls this once
    if _kernels._GET_DEVICE is None:
        _kernels.bind_cupy()
    if not _maps_host_memory(_kernels._GET_DEVICE()):
        return None
    _buffer(nwords)
    return _local.words_ptr


def take_words(nwords: int) -> list[int]:
    """Wait for the current stream, then the ``nwords`` values its kernels
    wrote at :func:`host_words`."""
    if _kernels._CURRENT_STREAM is None:
        _kernels.bind_cupy()
    _kernels._CURRENT_STREAM().synchronize()
    return _buffer(nwords)[:nwords].tolist()


class HostFlag:
    """This thread's flag word in page-locked host memory, cleared: kernels
    set it to 1 with plain stores (any number of threads, no atomics across
    the bus) at ``ptr``, and :meth:`read` waits on the stream, then reads it.
    A yes/no answer, such as "did any value cancel?", in a sync without a
    copy (about 2 us against 9 for :func:`read_ints`).

    One flag per thread, reused: a new HostFlag clears the word of the last.
    """

    __slots__ = ("ptr", "_word")

    def __init__(self, word: np.ndarray, ptr: int):
        word[0] = 0
        self._word = word
        self.ptr = ptr

    def read(self) -> int:
        import cupy

        cupy.cuda.get_current_stream().synchronize()
        return int(self._word[0])


def host_flag() -> HostFlag | None:
    """This thread's :class:`HostFlag`, cleared; None where the device cannot
    write host memory (then count on the device and :func:`read_ints`)."""
    import cupy

    if not _maps_host_memory(cupy.cuda.runtime.getDevice()):
        return None
    word = getattr(_local, "flag", None)
    if word is None:
        # its own buffer, never replaced: a kernel may still hold its address
        # when the read buffer grows
        word = _local.flag = np.frombuffer(cupy.cuda.alloc_pinned_memory(8), dtype=np.int64,
                                           count=1)
        _local.flag_ptr = word.ctypes.data
    return HostFlag(word, _local.flag_ptr)


@functools.cache
def _maps_host_memory(device: int) -> bool:
    """True when kernels on ``device`` can write page-locked host memory through
    its host address: with unified addressing (every 64-bit process), the
    CUDA runtime maps all memory from cudaHostAlloc, which CuPy's pinned pool
    uses without the write-combined flag, at its host address on every
    device (runtime API, "Unified Addressing")."""
    import cupy

    properties = cupy.cuda.runtime.getDeviceProperties(device)
    return bool(properties.get("unifiedAddressing") and properties.get("canMapHostMemory"))
