"""Shared measuring code for the benchmark scripts (``webbase.py``, ``suite.py``).

``benchmarks/`` is not a package: a script puts its own folder on ``sys.path``
and imports this module, which adds the repository root at the end, so
``python benchmarks/webbase.py`` works from a checkout without installing,
while a bmsparse found first (``PYTHONPATH=old/tree``, an installed copy)
is the one measured.

What lives here:

- the device: :func:`detect_device` (GPU through CuPy, else the CPU path with
  the NumPy twins), and :func:`pin_host` (a GPU run on the fastest host core);
- timing: :class:`Clock` (CUDA events for CuPy and torch, ``perf_counter`` on
  the host) and :func:`time_call` / :func:`time_stages` (warm-up runs, then the
  median of ``repeat`` runs);
- peak memory: :class:`PeakMemory` (CuPy pool high-water through an allocator
  hook, torch's peak counter, or ``tracemalloc`` for NumPy buffers on the host);
- the operands on either side (:class:`Side`), our pipeline pieces and the
  peers (cuSPARSE through cupyx, torch.sparse, scipy);
- the correctness check :func:`check_product`, :func:`count_multiplies`, the
  memory footprint of Table 1, plain f-string tables and JSON output.
"""

from __future__ import annotations

import gc
import json
import math
import os
import statistics
import sys
import time
import traceback
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    # last: inserted first, it shadowed the tree PYTHONPATH named, and
    # comparisons of an old tree with this one measured this one twice
    sys.path.append(str(REPO_ROOT))

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

from bmsparse import STAGES, BitmapMatrix, spgemm  # noqa: E402
from bmsparse._sputils import cupy_available  # noqa: E402

MIB = float(1 << 20)

#: relative tolerance of the correctness check, by value dtype; the absolute
#: tolerance is this times the largest magnitude of the reference product
RTOL = {"float32": 1e-4, "complex64": 1e-4, "float64": 1e-10, "complex128": 1e-10}


class UserError(Exception):
    """A problem the user can fix (bad file, no network); printed as one line."""


# --- device ------------------------------------------------------------------


@dataclass
class Device:
    """Where our side runs: ``gpu`` True means CuPy on a CUDA device."""

    gpu: bool
    name: str
    note: str = ""

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"backend": "cuda" if self.gpu else "cpu", "name": self.name,
                                "note": self.note, "numpy": np.__version__,
                                "scipy": _version("scipy"), "python": sys.version.split()[0]}
        if "torch" in sys.modules:
            info["torch"] = _version("torch")
        if self.gpu:
            import cupy

            info["cupy"] = cupy.__version__
            try:
                info["cuda_runtime"] = int(cupy.cuda.runtime.runtimeGetVersion())
            except Exception:  # informational only
                info["cuda_runtime"] = None
        return info


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # informational only
        return None


def add_timing_args(p: Any) -> None:
    """``--repeat``, ``--warmup``, ``--cpu`` and ``--json``, shared by the scripts."""
    p.add_argument("--repeat", type=int, default=7, help="timed runs, median (default 7)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    p.add_argument("--cpu", action="store_true", help="run the CPU path even with a GPU")
    p.add_argument("--json", metavar="FILE", help="write every result here")
    p.add_argument("--no-pin", action="store_true",
                   help="leave the process on the host cores the OS gives it (a GPU run "
                   "otherwise pins itself to the core that runs Python fastest)")


def check_timing_args(p: Any, args: Any) -> None:
    """Refuse ``--repeat`` below 1, and where the script has them a negative
    ``--warmup``, a ``--scale`` or ``--seed`` that is not a positive
    (non-negative) number, or a ``--json`` that names a folder (argparse's
    error)."""
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, got {args.repeat}")
    if getattr(args, "warmup", 0) < 0:
        p.error(f"--warmup must be non-negative, got {args.warmup}")
    scale = getattr(args, "scale", None)
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        p.error(f"--scale must be positive, got {scale}")
    if getattr(args, "seed", 0) < 0:
        p.error(f"--seed must be non-negative, got {args.seed}")
    json_path = getattr(args, "json", None)
    if json_path is not None and Path(json_path).is_dir():
        # found out only after the whole run, its results lost
        p.error(f"--json must name a file, got the folder {json_path}")


def detect_device(force_cpu: bool = False) -> Device:
    """The GPU when CuPy sees one (and ``force_cpu`` is False), else the CPU path."""
    import platform

    cpu_name = platform.processor() or platform.machine() or "CPU"
    if force_cpu:
        return Device(False, cpu_name, "CPU path requested (--cpu)")
    if not cupy_available():
        try:
            import cupy

            why = "CuPy sees no CUDA device"
        except Exception as exc:  # any import failure means no GPU
            why = f"CuPy is not importable ({type(exc).__name__})"
        return Device(False, cpu_name, why)
    import cupy

    try:
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # the name is informational only
        name = "CUDA device"
    return Device(True, name)


#: a pass of the host-speed calibration: this many runs of a Python loop per core
PIN_RUNS = 15


def _python_loop() -> int:
    total = 0
    for i in range(2000):
        total += i
    return total


def _core_speeds(cores: Sequence[int]) -> dict[int, float]:
    """Microseconds of :func:`_python_loop` on each core: the slower of two
    passes' medians, so that a core idle for one pass only does not win."""
    speeds: dict[int, float] = {}
    for _ in range(2):
        for core in cores:
            os.sched_setaffinity(0, {core})
            _python_loop()  # (the move to the core, then its caches)
            runs = []
            for _ in range(PIN_RUNS):
                start = time.perf_counter()
                _python_loop()
                runs.append((time.perf_counter() - start) * 1e6)
            speeds[core] = max(speeds.get(core, 0.0), statistics.median(runs))
    return speeds


def pin_host(wanted: bool) -> str | None:
    """Pin this process to the host core that runs Python fastest, where
    ``wanted`` (a GPU run without ``--no-pin``) and the OS allows it; a note
    for the report, None where nothing was done.

    Both sides of a GPU comparison spend much of a small operation's time in
    Python on one core, and on shared hosts some cores run at half speed
    (a device host, session 47: 4 of 16 cores took 1.5-2x as long for the
    same loop, and a process's host time moved with the core it ran on).
    Pinning both sides to one fast core keeps that out of the ratios.
    """
    if not wanted or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None
    try:
        speeds = _core_speeds(allowed)
    except OSError:  # a core that went away, or a sandbox that refuses
        os.sched_setaffinity(0, allowed)
        return None
    best = min(allowed, key=lambda core: (speeds[core], core))
    os.sched_setaffinity(0, {best})
    return (f"host: pinned to core {best} of {len(allowed)} (a Python loop {speeds[best]:.0f} "
            f"us there; the slowest core {max(speeds.values()):.0f} us); --no-pin to leave it")


def free_memory() -> None:
    """Drop garbage and give cached device blocks back (CuPy pool, torch cache)."""
    gc.collect()
    if "cupy" in sys.modules:
        try:
            import cupy

            cupy.cuda.runtime.deviceSynchronize()
            cupy.get_default_memory_pool().free_all_blocks()
        except Exception:  # no device, nothing cached
            pass
    if "torch" in sys.modules:
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
        except Exception:  # nothing cached
            pass


def attempt(what: str, fn: Callable[[], Any]) -> tuple[Any, str | None]:
    """``(fn(), None)``, or ``(None, "reason")`` with the traceback on stderr."""
    try:
        return fn(), None
    except Exception as exc:  # a failed measurement is reported, not fatal
        print(f"--- {what} failed:", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        free_memory()
        return None, f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:200]


# --- timing ------------------------------------------------------------------


class Clock:
    """Milliseconds between ``start()`` and ``stop()``.

    ``kind`` "cupy" and "torch" record CUDA events on the current stream
    after synchronizing the device, so work queued earlier is not counted;
    "host" reads ``time.perf_counter``.
    """

    def __init__(self, kind: str):
        if kind not in ("cupy", "torch", "host"):
            raise ValueError(f"kind must be cupy, torch or host, got {kind!r}")
        self.kind = kind

    def sync(self) -> None:
        if self.kind == "cupy":
            import cupy

            cupy.cuda.runtime.deviceSynchronize()
        elif self.kind == "torch":
            import torch

            torch.cuda.synchronize()

    def start(self) -> Any:
        self.sync()
        if self.kind == "cupy":
            import cupy

            event = cupy.cuda.Event()
            event.record()
            return event
        if self.kind == "torch":
            import torch

            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def stop(self, start: Any) -> float:
        if self.kind == "cupy":
            import cupy

            end = cupy.cuda.Event()
            end.record()
            end.synchronize()
            return float(cupy.cuda.get_elapsed_time(start, end))
        if self.kind == "torch":
            import torch

            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))
        return (time.perf_counter() - start) * 1e3


@dataclass
class Timing:
    ms: float
    samples: list[float]

    def as_dict(self) -> dict[str, Any]:
        return {"ms": self.ms, "samples": self.samples}


#: least wall time of the warm-up runs on a GPU, in ms. The GPU's clocks
#: drop while it idles (reading and converting the next matrix takes
#: seconds) and take milliseconds to come back: with two warm-up runs of a
#: 0.05 ms operation the first timed one ran at the low clocks (bcsstk33
#: ``A @ x`` measured 0.089 ms in ops.py, 0.035 ms after a longer warm-up).
#: Both sides of a comparison get the same warm-up.
WARM_MS = 30.0


def time_call(fn: Callable[[], Any], clock: Clock, *, repeat: int, warmup: int) -> Timing:
    """Median milliseconds of ``fn()`` over ``repeat`` runs after ``warmup`` runs.

    On a GPU the warm-up goes on until ``WARM_MS`` have passed too (see
    there). Each result is dropped before the next run starts, so runs do
    not pile up memory.
    """
    return time_calls([fn], clock, repeat=repeat, warmup=warmup)[0]


def time_calls(fns: Sequence[Callable[[], Any]], clock: Clock, *, repeat: int,
               warmup: int) -> list[Timing]:
    """:func:`time_call` of several functions, their runs interleaved (one run
    of each in turn, warm-up included), so that a slow stretch of the host or
    the GPU falls on all of them rather than on whichever ran then: ops.py
    once timed one side of a 0.05 ms operation at 0.6-0.9 ms, a different
    operation in each run."""
    start, done = time.perf_counter(), 0
    while done < warmup or (warmup and clock.kind != "host"
                            and (time.perf_counter() - start) * 1e3 < WARM_MS):
        for fn in fns:
            fn()
            clock.sync()
        done += 1
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(max(1, repeat)):
        for fn, times in zip(fns, samples):
            start = clock.start()
            out = fn()
            times.append(clock.stop(start))
            del out
    return [Timing(statistics.median(times), times) for times in samples]


def time_stages(a: BitmapMatrix, b: BitmapMatrix, clock: Clock, *, repeat: int,
                warmup: int) -> dict[str, Timing]:
    """Median per-stage milliseconds of ``spgemm(a, b, timings=...)`` (``STAGES``)."""
    samples: dict[str, list[float]] = {s: [] for s in STAGES}
    for i in range(warmup + max(1, repeat)):
        timings: dict[str, float] = {}
        clock.sync()
        out = spgemm(a, b, timings=timings)
        clock.sync()
        del out
        if i >= warmup:
            for stage in STAGES:
                samples[stage].append(float(timings.get(stage, math.nan)))
    return {s: Timing(statistics.median(v), v) for s, v in samples.items()}


# --- peak memory ---------------------------------------------------------------


class PeakMemory:
    """High-water mark of allocated bytes inside a ``with`` block.

    ``kind``:

    - "cupy": CuPy's default memory pool. CuPy has no peak counter, so while
      the block runs the allocator is replaced by a hook that calls the pool's
      ``malloc`` and records the running maximum of ``pool.used_bytes()``.
      Cached free blocks are released on entry.
    - "torch": ``torch.cuda.max_memory_allocated`` after
      ``reset_peak_memory_stats``.
    - "host": ``tracemalloc``, which sees NumPy's array buffers (and so
      scipy's outputs), not memory that C++ code allocates privately.

    After the block, ``peak`` is the high-water mark, ``baseline`` the level
    on entry and ``extra = peak - baseline`` what the block needed on top of
    its inputs (its output included, if still alive at the peak).
    """

    def __init__(self, kind: str):
        if kind not in ("cupy", "torch", "host"):
            raise ValueError(f"kind must be cupy, torch or host, got {kind!r}")
        self.kind = kind
        self.baseline = 0
        self.peak = 0
        self.extra = 0
        self._high = 0
        self._pool: Any = None
        self._previous: Any = None
        self._started_tracing = False

    def __enter__(self) -> PeakMemory:
        if self.kind == "cupy":
            import cupy

            cupy.cuda.runtime.deviceSynchronize()
            pool = cupy.get_default_memory_pool()
            pool.free_all_blocks()
            self._pool = pool
            self.baseline = self._high = int(pool.used_bytes())
            get_allocator = getattr(cupy.cuda, "get_allocator", None)
            self._previous = get_allocator() if get_allocator is not None else pool.malloc

            def malloc(size: int) -> Any:
                mem = pool.malloc(size)
                used = pool.used_bytes()
                if used > self._high:
                    self._high = used
                return mem

            cupy.cuda.set_allocator(malloc)
        elif self.kind == "torch":
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.baseline = int(torch.cuda.memory_allocated())
        else:
            gc.collect()
            if not tracemalloc.is_tracing():
                tracemalloc.start()
                self._started_tracing = True
            tracemalloc.reset_peak()
            self.baseline = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.kind == "cupy":
            import cupy

            try:
                cupy.cuda.runtime.deviceSynchronize()
            finally:
                cupy.cuda.set_allocator(self._previous)
            self.peak = int(self._high)
        elif self.kind == "torch":
            import torch

            torch.cuda.synchronize()
            self.peak = int(torch.cuda.max_memory_allocated())
        else:
            self.peak = tracemalloc.get_traced_memory()[1]
            if self._started_tracing:
                tracemalloc.stop()
        self.extra = max(0, self.peak - self.baseline)


@dataclass
class Measured:
    """Median time, peak extra bytes and (optionally) the output of one call."""

    timing: Timing
    peak_bytes: int
    result: Any = None


def measure(fn: Callable[[], Any], clock: Clock, memory: str, *, repeat: int, warmup: int,
            keep: bool = False) -> Measured:
    """Time ``fn`` (warm-up, median), then run it once more inside PeakMemory.

    With ``keep``, the output of that last run is returned in ``result``.
    """
    timing = time_call(fn, clock, repeat=repeat, warmup=warmup)
    return _with_peak(fn, timing, memory, keep)


def _with_peak(fn: Callable[[], Any], timing: Timing, memory: str, keep: bool) -> Measured:
    """``timing`` and the peak memory of one more run of ``fn`` (its output with ``keep``)."""
    free_memory()
    with PeakMemory(memory) as peak:
        out = fn()
    return Measured(timing, peak.extra, out if keep else None)


def measure_side_by_side(fns: dict[str, Callable[[], Any]], clock: Clock, memory: str, *,
                         repeat: int, warmup: int,
                         keep: bool = False) -> dict[str, tuple[Measured | None, str | None]]:
    """:func:`measure` of each function, their runs interleaved (:func:`time_calls`).

    Each is first run once on its own (:func:`attempt`): one that fails is
    reported as ``(None, reason)`` and the others are still timed.
    """
    out: dict[str, tuple[Measured | None, str | None]] = {}
    ready = {}
    for what, fn in fns.items():
        _, error = attempt(what, fn)
        if error is None:
            ready[what] = fn
        else:
            out[what] = (None, error)
    timings, error = attempt(" and ".join(ready), lambda: time_calls(
        list(ready.values()), clock, repeat=repeat, warmup=warmup))
    for k, (what, fn) in enumerate(ready.items()):
        out[what] = attempt(what, lambda fn=fn, k=k: _with_peak(fn, timings[k], memory, keep)) \
            if timings is not None else (None, error)
    return {what: out[what] for what in fns}


# --- operands on either side -------------------------------------------------------


class Side:
    """Our operands and pipeline on the GPU (CuPy) or on the host (NumPy twins)."""

    def __init__(self, device: Device):
        self.gpu = device.gpu
        self.clock = Clock("cupy" if self.gpu else "host")
        self.memory = "cupy" if self.gpu else "host"

    def transfer_coo(self, coo: sp.coo_array) -> tuple[Any, Any, Any]:
        """The COO arrays on our side (host -> device copies on the GPU)."""
        rows, cols, data = coo.row, coo.col, coo.data
        if not self.gpu:
            return rows, cols, data
        import cupy

        return cupy.asarray(rows), cupy.asarray(cols), cupy.asarray(data)

    def transfer_csr(self, a: sp.csr_array) -> tuple[Any, Any, Any]:
        """The CSR arrays (indptr, indices, data) on our side."""
        if not self.gpu:
            return a.indptr, a.indices, a.data
        import cupy

        return cupy.asarray(a.indptr), cupy.asarray(a.indices), cupy.asarray(a.data)

    def csr(self, a: sp.csr_array) -> Any:
        """``a`` as a CSR matrix of our side: cupyx ``csr_matrix`` or the scipy array."""
        if not self.gpu:
            return a
        return device_csr(a)

    def bitmap_from_csr(self, m: Any) -> BitmapMatrix:
        """CSR -> bitmap on our side (``from_cupyx`` on the GPU)."""
        return BitmapMatrix.from_cupyx(m) if self.gpu else BitmapMatrix.from_scipy(m)

    def to_host(self, c: BitmapMatrix) -> sp.csr_array:
        """Our C as scipy CSR on the host (converted on the device, then copied)."""
        if self.gpu:
            return sp.csr_array(c.tocsr().get())
        return sp.csr_array(c.tocsr())


def device_csr(a: sp.csr_array) -> Any:
    """A cupyx ``csr_matrix`` holding a copy of the canonical scipy CSR ``a``."""
    import cupy
    import cupyx.scipy.sparse as csp

    m = csp.csr_matrix((cupy.asarray(a.data), cupy.asarray(a.indices), cupy.asarray(a.indptr)),
                       shape=a.shape)
    try:
        m.has_canonical_format = True  # it came from canonical scipy CSR; spares a check
    except Exception:  # older cupyx: the check runs once, in warm-up
        pass
    return m


def canonical_csr(a: Any, dtype: Any = None) -> sp.csr_array:
    """``a`` as a canonical scipy ``csr_array`` (int32 indices when they fit)."""
    a = sp.csr_array(a, copy=True)
    if dtype is not None and a.dtype != np.dtype(dtype):
        a = a.astype(dtype)
    a.sum_duplicates()
    a.sort_indices()
    limit = np.iinfo(np.int32).max
    if max(a.nnz, a.shape[0], a.shape[1]) < limit and a.indices.dtype != np.int32:
        a = sp.csr_array((a.data, a.indices.astype(np.int32), a.indptr.astype(np.int32)),
                         shape=a.shape)
    return a


def count_multiplies(a: sp.csr_array, b: sp.csr_array) -> int:
    """Scalar products ``a @ b`` takes: sum over k of nnz(a[:, k]) * nnz(b[k, :])."""
    col_nnz = np.bincount(a.indices, minlength=a.shape[1]).astype(np.int64)
    row_nnz = np.diff(b.indptr).astype(np.int64)
    return int(col_nnz @ row_nnz)


def gflops(multiplies: int, ms: float | None) -> float | None:
    """2 * multiplies / time, in GFLOP/s (None without a time)."""
    if ms is None or not ms > 0:
        return None
    return 2.0 * multiplies / (ms * 1e6)


def speedup(theirs: float | None, ours: float | None) -> float | None:
    """Their time over ours: above 1 means bmsparse is faster."""
    if theirs is None or ours is None or not ours > 0:
        return None
    return theirs / ours


def geomean(values: Sequence[float | None]) -> float | None:
    good = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not good:
        return None
    return math.exp(sum(math.log(v) for v in good) / len(good))


# --- our pipeline ------------------------------------------------------------------


def ours_kernels(side: Side, a: BitmapMatrix, b: BitmapMatrix, *, repeat: int, warmup: int,
                 keep: bool = False) -> Measured:
    """bmsparse kernels only: BitmapMatrix in, BitmapMatrix out."""
    return measure(lambda: spgemm(a, b), side.clock, side.memory, repeat=repeat,
                   warmup=warmup, keep=keep)


def ours_end_to_end(side: Side, a_csr: Any, b_csr: Any, *, repeat: int,
                    warmup: int) -> Measured:
    """CSR -> bitmap, then spgemm writing C in CSR (``format="csr"``), all on
    our side (``b_csr`` may be ``a_csr``)."""

    def run() -> Any:
        a = side.bitmap_from_csr(a_csr)
        b = a if b_csr is a_csr else side.bitmap_from_csr(b_csr)
        return spgemm(a, b, format="csr")

    return measure(run, side.clock, side.memory, repeat=repeat, warmup=warmup)


# --- peers ------------------------------------------------------------------------


@dataclass
class PeerRun:
    """One peer at one dtype: median ms, peak extra bytes, its C on the host, or why not."""

    impl: str
    dtype: str
    ms: float | None = None
    samples: list[float] | None = None
    peak_bytes: int | None = None
    memory: str = "device"
    error: str | None = None
    result: sp.csr_array | None = None
    note: str = ""

    def as_dict(self, multiplies: int) -> dict[str, Any]:
        return {"impl": self.impl, "dtype": self.dtype, "ms": self.ms, "samples": self.samples,
                "gflops": gflops(multiplies, self.ms), "peak_bytes": self.peak_bytes,
                "peak_memory": self.memory, "error": self.error, "note": self.note}


def peer_cusparse(a: sp.csr_array, b: sp.csr_array, dtype: Any, *, repeat: int, warmup: int,
                  keep: bool = False) -> PeerRun:
    """cuSPARSE SpGEMM through cupyx.scipy.sparse: CSR @ CSR on the device."""
    dtype = np.dtype(dtype)
    run = PeerRun("cuSPARSE", dtype.name)
    try:
        import cupyx.scipy.sparse  # noqa: F401
    except Exception as exc:  # reported as n/a
        run.error = f"cupyx not importable ({type(exc).__name__})"
        return run

    def go() -> PeerRun:
        product, to_host = cusparse_call(a, b, dtype)
        got = measure(product, Clock("cupy"), "cupy", repeat=repeat, warmup=warmup, keep=keep)
        run.ms, run.samples, run.peak_bytes = got.timing.ms, got.timing.samples, got.peak_bytes
        if keep:
            run.result = to_host(got.result)
        return run

    _, run.error = attempt(f"cuSPARSE {dtype.name}", go)
    free_memory()
    return run


def cusparse_call(a: sp.csr_array, b: sp.csr_array,
                  dtype: Any) -> tuple[Callable[[], Any], Callable[[Any], sp.csr_array]]:
    """cuSPARSE's ``a @ b`` (cupyx CSR on the device, ``b`` may be ``a``) as a
    call to time, and the function bringing its result to the host."""
    da = device_csr(a.astype(dtype, copy=False))
    db = da if b is a else device_csr(b.astype(dtype, copy=False))
    return (lambda: da @ db), (lambda c: sp.csr_array(c.get()))


def scipy_call(a: sp.csr_array, b: sp.csr_array,
               dtype: Any) -> tuple[Callable[[], Any], Callable[[Any], sp.csr_array]]:
    """scipy's ``a @ b`` on the host, as :func:`cusparse_call` gives cuSPARSE's."""
    a2 = a.astype(dtype, copy=False)
    b2 = a2 if b is a else b.astype(dtype, copy=False)
    return (lambda: a2 @ b2), sp.csr_array


_TORCH_DTYPES = ("float32", "float64", "complex64", "complex128")


def peer_torch(a: sp.csr_array, b: sp.csr_array, dtype: Any, *, repeat: int, warmup: int,
               keep: bool = False) -> PeerRun:
    """torch.sparse CSR @ CSR on CUDA (``torch.sparse.mm``), if torch is importable."""
    dtype = np.dtype(dtype)
    run = PeerRun("torch.sparse", dtype.name)
    try:
        import torch
    except Exception as exc:  # optional peer
        run.error = f"torch not importable ({type(exc).__name__})"
        return run
    if dtype.name not in _TORCH_DTYPES:
        run.error = f"dtype {dtype.name} not benchmarked with torch"
        return run
    try:
        if not torch.cuda.is_available():
            run.error = "torch sees no CUDA device"
            return run
    except Exception as exc:  # a broken CUDA setup is reported
        run.error = f"torch.cuda failed ({type(exc).__name__}: {exc})"
        return run
    torch_dtype = getattr(torch, dtype.name)
    dev = torch.device("cuda")

    def tensor(m: sp.csr_array, index_dtype: Any) -> Any:
        crow = torch.from_numpy(np.ascontiguousarray(m.indptr, dtype=index_dtype)).to(dev)
        col = torch.from_numpy(np.ascontiguousarray(m.indices, dtype=index_dtype)).to(dev)
        val = torch.from_numpy(np.ascontiguousarray(m.data, dtype=dtype)).to(dev)
        return torch.sparse_csr_tensor(crow, col, val, size=tuple(m.shape), dtype=torch_dtype,
                                       device=dev)

    def go() -> PeerRun:
        # cuSPARSE's SpGEMM wants 32-bit indices; torch may convert int64 itself
        problems = []
        for index_dtype in (np.int32, np.int64):
            try:
                ta = tensor(a, index_dtype)
                tb = ta if b is a else tensor(b, index_dtype)
                torch.sparse.mm(ta, tb)
                torch.cuda.synchronize()
                break
            except Exception as exc:  # try the other index type
                problems.append(f"{np.dtype(index_dtype).name}: {type(exc).__name__}: "
                                f"{' '.join(str(exc).split())[:120]}")
                ta = tb = None
                free_memory()
        else:
            raise RuntimeError("; ".join(problems))
        run.note = f"{np.dtype(index_dtype).name} indices"
        got = measure(lambda: torch.sparse.mm(ta, tb), Clock("torch"), "torch", repeat=repeat,
                      warmup=warmup, keep=keep)
        run.ms, run.samples, run.peak_bytes = got.timing.ms, got.timing.samples, got.peak_bytes
        if keep:
            c = got.result
            if c.layout != torch.sparse_csr:
                c = c.to_sparse_csr()
            run.result = sp.csr_array((c.values().cpu().numpy(), c.col_indices().cpu().numpy(),
                                       c.crow_indices().cpu().numpy()), shape=tuple(c.shape))
        return run

    _, run.error = attempt(f"torch.sparse {dtype.name}", go)
    free_memory()
    return run


def peer_scipy(a: sp.csr_array, b: sp.csr_array, dtype: Any, *, repeat: int, warmup: int,
               keep: bool = False) -> PeerRun:
    """scipy.sparse CSR @ CSR on the host (one thread); peak memory from tracemalloc."""
    dtype = np.dtype(dtype)
    run = PeerRun("scipy", dtype.name, memory="host")
    product, to_host = scipy_call(a, b, dtype)

    def go() -> PeerRun:
        got = measure(product, Clock("host"), "host", repeat=repeat, warmup=warmup, keep=keep)
        run.ms, run.samples, run.peak_bytes = got.timing.ms, got.timing.samples, got.peak_bytes
        if keep:
            run.result = to_host(got.result)
        return run

    _, run.error = attempt(f"scipy {dtype.name}", go)
    return run


# --- correctness ---------------------------------------------------------------------


def check_product(ours: sp.csr_array, theirs: sp.csr_array, dtype: Any) -> dict[str, Any]:
    """Compare our C with a peer's C: shape, structure, then values.

    Both are made canonical (duplicates summed, indices sorted) and stored
    zeros are dropped: cuSPARSE keeps entries that cancel to zero, we and
    scipy drop them. Values match when every ``|ours - theirs| <= rtol *
    |theirs| + rtol * max|theirs|`` (``rtol`` from ``RTOL``). Entries that are
    in one structure only count as differences of their full value, so a
    value that summed to a tiny non-zero on one side and exactly zero on the
    other still matches within that tolerance; ``structure`` then says
    "near-zero differences" rather than "identical".
    """
    dtype = np.dtype(dtype)
    rtol = RTOL.get(dtype.name, 1e-10)
    got = canonical_csr(ours)
    want = canonical_csr(theirs)
    got.eliminate_zeros()
    want.eliminate_zeros()
    out: dict[str, Any] = {"shape": list(got.shape), "peer_shape": list(want.shape),
                           "nnz": int(got.nnz), "peer_nnz": int(want.nnz), "rtol": rtol,
                           "max_abs_err": None, "max_rel_err": None, "structure": "",
                           "structure_differences": None, "match": False}
    if got.shape != want.shape:
        out["structure"] = "shapes differ"
        return out
    scale = float(np.abs(want.data).max()) if want.nnz else 1.0
    atol = rtol * (scale if scale > 0 else 1.0)
    same = (np.array_equal(got.indptr, want.indptr)
            and np.array_equal(got.indices, want.indices))
    if same:
        diff = np.abs(got.data.astype(np.result_type(got.dtype, want.dtype))
                      - want.data)
        ref = np.abs(want.data)
        out["structure_differences"] = 0
        out["structure"] = "identical"
        out["max_abs_err"] = float(diff.max(initial=0.0))
        nonzero = ref > 0
        out["max_rel_err"] = float((diff[nonzero] / ref[nonzero]).max(initial=0.0))
        out["match"] = bool(np.all(diff <= rtol * ref + atol))
        return out
    # different structures: count the positions in one pattern only, and
    # compare values through the difference matrix (scipy drops exact zeros)
    ones_got = sp.csr_array((np.ones(got.nnz, np.int8), got.indices, got.indptr),
                            shape=got.shape)
    ones_want = sp.csr_array((np.ones(want.nnz, np.int8), want.indices, want.indptr),
                             shape=want.shape)
    only = ones_got - ones_want
    only.eliminate_zeros()
    out["structure_differences"] = int(only.nnz)
    diff = abs(got - want)
    out["max_abs_err"] = float(diff.max()) if diff.nnz else 0.0
    out["match"] = out["max_abs_err"] <= atol
    out["structure"] = ("near-zero differences" if out["match"]
                        else f"{only.nnz} differing positions")
    return out


def describe_check(check: dict[str, Any]) -> str:
    """One line: match/MISMATCH with the numbers."""
    verdict = "match" if check["match"] else "MISMATCH"
    parts = [f"nnz {check['nnz']:,} vs {check['peer_nnz']:,}", f"structure {check['structure']}"]
    if check["shape"] != check["peer_shape"]:
        parts.insert(0, f"shape {tuple(check['shape'])} vs {tuple(check['peer_shape'])}")
    if check["max_rel_err"] is not None:
        parts.append(f"max rel err {check['max_rel_err']:.2e}")
    if check["max_abs_err"] is not None:
        parts.append(f"max abs err {check['max_abs_err']:.2e}")
    parts.append(f"rtol {check['rtol']:.0e}")
    return f"{verdict} ({', '.join(parts)})"


# --- memory footprint (Table 1) ------------------------------------------------------


def footprint(a: sp.csr_array, usage: dict[str, int]) -> list[dict[str, Any]]:
    """Bytes of COO, CSR and bitmap forms of ``a``, from the arrays actually allocated.

    COO is ``a.tocoo()`` (row, col, data); CSR is indptr, indices, data;
    ``usage`` is ``BitmapMatrix.memory_usage()``.
    """
    coo = a.tocoo()
    coo_index = coo.row.nbytes + coo.col.nbytes
    csr_index = a.indptr.nbytes + a.indices.nbytes
    values = usage["values"]
    return [
        {"format": "COO", "what": f"row, col {coo.row.dtype.name} + data",
         "all_bytes": coo_index + coo.data.nbytes, "index_bytes": coo_index},
        {"format": "CSR", "what": f"indptr, indices {a.indices.dtype.name} + data",
         "all_bytes": csr_index + a.data.nbytes, "index_bytes": csr_index},
        {"format": "bitmap", "what": "keys + bitmaps + offsets + values (as stored)",
         "all_bytes": usage["index"] + values, "index_bytes": usage["index"]},
        {"format": "bitmap (paper)", "what": "keys + bitmaps + values (paper's count)",
         "all_bytes": usage["index_paper"] + values, "index_bytes": usage["index_paper"]},
    ]


# --- printing and output ---------------------------------------------------------------


def fmt_ms(ms: float | None) -> str:
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return "n/a"
    return f"{ms:,.3f}" if ms < 1000 else f"{ms:,.1f}"


def fmt_num(x: float | int | None, spec: str = ",") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return format(x, spec)


def fmt_mib(nbytes: float | None) -> str:
    return "n/a" if nbytes is None else f"{nbytes / MIB:,.2f}"


def fmt_x(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


class Report:
    """Prints lines to stdout, each prefixed with a label ("surrogate" for the surrogate)."""

    def __init__(self, label: str = "", stream: Any = None):
        self.label = label
        self.stream = stream

    def line(self, text: str = "") -> None:
        if text and self.label:
            text = f"{self.label} | {text}"
        print(text, file=self.stream or sys.stdout, flush=True)

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]],
              title: str | None = None, left: Sequence[int] = (0,)) -> None:
        """A plain-text table; columns in ``left`` are left-aligned, the others right."""
        if title:
            self.line(title)
        for text in format_table(header, rows, left):
            self.line(text)


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]],
                 left: Sequence[int] = (0,)) -> list[str]:
    """Lines of a plain-text table (f-strings only; no tabulate)."""
    cells = [[str(h) for h in header]] + [[str(c) for c in row] for row in rows]
    ncols = max(len(r) for r in cells)
    cells = [r + [""] * (ncols - len(r)) for r in cells]
    widths = [max(len(r[i]) for r in cells) for i in range(ncols)]

    def fmt(row: list[str]) -> str:
        parts = [c.ljust(w) if i in left else c.rjust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        return "  ".join(parts).rstrip()

    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells[1:]]
    return lines


def _json_default(x: Any) -> Any:
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (Path, np.dtype)):
        return str(x)
    raise TypeError(f"cannot write {type(x).__name__} to JSON")


def _clean(x: Any) -> Any:
    """NaN and infinity become None, so the file is strict JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def write_json(path: str | os.PathLike, data: dict[str, Any]) -> None:
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_clean(json.loads(json.dumps(data, default=_json_default))), indent=2,
                      allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")


def begin(report: Report, notes: Sequence[str], todo: Sequence[Any], script: str,
          what: str = "matrix") -> bool:
    """Put ``notes`` in the report; False, after an error line on stderr, when
    ``todo`` is empty (the script then exits 1)."""
    for note in notes:
        report.line(f"note: {note}")
    if todo:
        return True
    print(f"{script}: error: no {what} to run", file=sys.stderr)
    return False


def conclude(report: Report, mismatches: Sequence[str], failures: Sequence[str],
             json_path: str | None, record: dict[str, Any]) -> int:
    """Report the mismatches and failures, write ``record`` to ``json_path`` when
    given, and return the script's exit status (1 when anything went wrong)."""
    if mismatches:
        report.line(f"MISMATCH: {', '.join(mismatches)}")
    if failures:
        report.line(f"failed: {', '.join(failures)}")
    if json_path:
        write_json(json_path, record)
        report.line(f"wrote {json_path}")
    return 1 if mismatches or failures else 0


def matrix_label(path: str | os.PathLike) -> str:
    """A matrix file's name without its extension (``webbase-1M.tar.gz`` -> ``webbase-1M``)."""
    name = Path(os.fspath(path)).name
    for suffix in (".tar.gz", ".tgz", ".mtx.gz", ".mtx", ".txt.gz", ".txt", ".csv.gz", ".csv",
                   ".tsv.gz", ".tsv", ".edges.gz", ".edges", ".el.gz", ".el"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


class Progress:
    """A progress bar on stderr: tqdm when installed, else one plain line per step."""

    def __init__(self, total: int, enabled: bool = True):
        self.total = total
        self.count = 0
        self.enabled = enabled
        self._bar: Any = None
        self._start = time.perf_counter()
        if enabled:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, file=sys.stderr, unit="matrix")
            except Exception:  # tqdm is optional
                self._bar = None

    def step(self, name: str) -> None:
        """Announce the matrix about to run."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_description(name)
        else:
            elapsed = time.perf_counter() - self._start
            print(f"[{self.count + 1}/{self.total}] {name} ... ({elapsed:.1f} s elapsed)",
                  file=sys.stderr, flush=True)

    def done(self) -> None:
        self.count += 1
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def folder_entries(dir_arg: str | None, default: Path, notes: list[str],
                   without: str) -> list[tuple[str, str, Callable[[], Any]]]:
    """``(name, path, loader)`` for the matrices of ``dir_arg`` (or ``default``).

    A missing ``dir_arg`` is an error; a missing default folder only adds the
    note ``no folder ...: {without}``.
    """
    from bmsparse._readers import matrix_files, read_matrix

    folder = Path(dir_arg) if dir_arg else default
    if folder.is_dir():
        return [(name, str(path), lambda path=path: read_matrix(path))
                for name, path in matrix_files(folder)]
    if dir_arg:
        raise UserError(f"{folder}: no such folder")
    notes.append(f"no folder {folder}: {without}")
    return []


def only(entries: list[tuple[Any, ...]], names: str | None, notes: list[str],
         noun: str = "matrix") -> list[tuple[Any, ...]]:
    """The entries named in ``--only`` (comma-separated), noting unknown names."""
    if not names:
        return entries
    wanted = [w.strip() for w in names.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in {e[0] for e in entries}]
    if unknown:
        notes.append(f"--only: no {noun} named {', '.join(unknown)}")
    return [e for e in entries if e[0] in wanted]


def run_each(todo: list[tuple[str, str, Callable[[], Any]]], run_one: Callable[..., Any],
             side: Any, args: Any, max_multiplies: int | None) -> list[Any]:
    """``run_one(name, source, load, side, ...)`` for each entry, with a progress bar."""
    progress = Progress(len(todo))
    rows = []
    try:
        for name, source, load in todo:
            progress.step(name)
            rows.append(run_one(name, source, load, side, repeat=args.repeat,
                                warmup=args.warmup, max_multiplies=max_multiplies))
            progress.done()
    finally:
        progress.close()
    return rows
