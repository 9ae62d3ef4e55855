"""What a matrix derives from its blocks and keeps, and the stream that made it.

A BitmapMatrix keeps arrays it derives from its blocks (the block-row
pointer, the column-major order, the blocks in that order, a small B's
scalar rows) and, for a lazy transpose, its own blocks. They are made on
the stream of the first call that needs them and then read by calls on any
stream. A user may use one matrix from several streams at once (its blocks
are only read), but cannot see when a derived array was made: so a call on
another stream that reads one first makes its stream wait for the one that
made it.

The wait is on an event recorded on the maker stream when another stream
first reads (everything queued there so far, the array included): nothing
is recorded while a single stream uses the matrix, the usual case. The
per-thread default stream (``Stream.ptds``) is one object for every host
thread but a different stream in each, where an event recorded later from
another thread would land on the wrong stream: there it is recorded when
the array is made. So is a lazy transpose's, whose blocks are read many
times per operation: once its event has passed, the matrix drops the check
(:meth:`Made.done`).
"""

from __future__ import annotations

from typing import Any

from . import _kernels


def _stream() -> tuple[Any, Any]:
    """The current stream and its key: the handle, or for the per-thread
    default stream the handle and the host thread."""
    if _kernels._CURRENT_STREAM is None:
        _kernels.bind_cupy()
    stream = _kernels._CURRENT_STREAM()
    ptr = stream.ptr
    return stream, (ptr, _kernels.thread_token()) if ptr == _kernels.PER_THREAD_STREAM else ptr


class Made:
    """``value``, made by work queued on the current stream (device arrays),
    or on the host (``device=False``): nothing to wait for. ``recorded``:
    record the event at once (see :meth:`done`)."""

    __slots__ = ("value", "stream", "key", "device", "event", "per_thread")

    def __init__(self, value: Any, device: bool, recorded: bool = False) -> None:
        self.value = value
        self.stream = self.key = self.event = None
        self.per_thread = False
        if not device:
            return
        self.stream, self.key = _stream()
        self.device = _kernels._GET_DEVICE()
        self.per_thread = isinstance(self.key, tuple)
        if self.per_thread or recorded:
            self.event = self._record()

    def _record(self) -> Any:
        import cupy

        if _kernels._GET_DEVICE() == self.device:
            event = cupy.cuda.Event(block=False, disable_timing=True)
        else:  # (an event is recorded on a stream of its own device)
            with cupy.cuda.Device(self.device):
                event = cupy.cuda.Event(block=False, disable_timing=True)
        event.record(self.stream)
        return event

    def done(self) -> bool:
        """True once the work that made the value has run (known only with
        an event recorded when it was made): no stream need wait for it."""
        return self.event is not None and self.event.done

    def ready(self) -> Any:
        """The value, once the current stream's next work is ordered after
        the work that made it."""
        if self.stream is None:
            return self.value
        # the common case first, the maker reading
        if _kernels._CURRENT_STREAM() is self.stream and not self.per_thread:
            return self.value
        stream, key = _stream()
        if key == self.key:
            return self.value
        # every read from another stream waits (a wait on a finished event
        # costs a call): a handle or a thread id seen before may be reused
        if self.event is None:
            self.event = self._record()
        stream.wait_event(self.event)
        return self.value
