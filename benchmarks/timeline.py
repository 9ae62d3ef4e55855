#!/usr/bin/env python
"""Where the wall time of one GPU call goes: host stamps against GPU progress.

    python benchmarks/timeline.py                       # surrogate: A @ A, and its steps
    python benchmarks/timeline.py --op spgemm_csr --op from_cupyx --repeat 9
    python benchmarks/timeline.py --matrix DIR/ca-CondMat.mtx.gz --op spgemm
    python benchmarks/timeline.py --matrix 3d-7pt        # a structured matrix of suite.py

At every kernel launch through ``bmsparse._kernels.launch`` and at every
host read of ``bmsparse._readback`` the script stamps the host clock and
records a CUDA event on the stream. An event completes when the GPU has
finished the work queued before it, so for each launch the table shows when
the host issued it and when the GPU got there: where the GPU's time equals
the host's, the GPU waited for Python (host-bound); where it is later, work
was queued ahead (GPU-bound). ``gpu gap`` sums, over the launches, the time
the GPU sat idle waiting for the host. CuPy's own launches (sort, cumsum)
are not stamped; they fall inside the steps around them.

Each stamp costs about 2-4 us of host time (an event record), so the call
runs a little slower than in ``webbase.py``; the median over ``--repeat``
calls of each stamp is printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

import bmsparse  # noqa: E402
from bmsparse import BitmapMatrix, _kernels, _readback, generators  # noqa: E402

#: the _readback functions that wait for the GPU (stamped as syncs, with
#: ``Pending.wait``)
SYNCS = ("read_ints", "read_head", "read_last", "take_words")


class Recorder:
    """Host stamps and CUDA events at each launch and sync of one call."""

    def __init__(self) -> None:
        import cupy

        self._cupy = cupy
        self.marks: list[tuple[str, float, Any]] = []

    def stamp(self, label: str) -> None:
        event = self._cupy.cuda.Event()
        event.record()
        self.marks.append((label, time.perf_counter(), event))

    def rows(self) -> list[tuple[str, float, float]]:
        """(label, host ms, GPU ms) of each mark after the first, from the first."""
        self._cupy.cuda.Device().synchronize()
        _, host0, gpu0 = self.marks[0]
        return [(label, (host - host0) * 1e3, self._cupy.cuda.get_elapsed_time(gpu0, event))
                for label, host, event in self.marks[1:]]


def instrument(recorder: Recorder) -> Callable[[], None]:
    """Stamp every launch and sync into ``recorder``; returns the undo."""
    _kernels.launch_hook = lambda name, n, grid, block: recorder.stamp(name)
    saved = {name: getattr(_readback, name) for name in SYNCS}

    depth = [0]  # read_last calls read_ints: one sync, stamped once

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def synced(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                depth[0] -= 1
            if depth[0] == 0:
                recorder.stamp(f"sync ({name})")
            return out
        return synced

    for name, fn in saved.items():
        setattr(_readback, name, wrap(name, fn))
    # a read queued earlier (read_later) syncs where it is waited for
    wait = _readback.Pending.wait
    _readback.Pending.wait = wrap("Pending.wait", wait)

    def undo() -> None:
        _kernels.launch_hook = None
        for name, fn in saved.items():
            setattr(_readback, name, fn)
        _readback.Pending.wait = wait

    return undo


def _fresh(a: BitmapMatrix) -> BitmapMatrix:
    """``a``'s arrays with nothing cached (its transpose is made again)."""
    return BitmapMatrix._from_blocks(a.keys, a.bitmaps, a.offsets, a.values, a.shape)


def _spgemm(a: BitmapMatrix, _: Any) -> Callable[[], Any]:
    return lambda: bmsparse.spgemm(a, a)


def _spgemm_csr(a: BitmapMatrix, _: Any) -> Callable[[], Any]:
    return lambda: bmsparse.spgemm(a, a, format="csr")


def _from_cupyx(_: BitmapMatrix, a_gpu: Any) -> Callable[[], Any]:
    return lambda: BitmapMatrix.from_cupyx(a_gpu)


def _tocsr(a: BitmapMatrix, _: Any) -> Callable[[], Any]:
    c = a @ a
    return lambda: _fresh(c).tocsr()


def _transpose(a: BitmapMatrix, _: Any) -> Callable[[], Any]:
    return lambda: _fresh(a).T.keys


def _spmv(a: BitmapMatrix, _: Any, transpose: bool = False) -> Callable[[], Any]:
    import cupy

    x = cupy.ones(a.shape[0 if transpose else 1])
    t = a.T if transpose else a
    return lambda: t @ x


def _spmv_t(a: BitmapMatrix, a_gpu: Any) -> Callable[[], Any]:
    return _spmv(a, a_gpu, transpose=True)


def _add(a: BitmapMatrix, _: Any) -> Callable[[], Any]:
    b = _fresh(a).T if a.shape[0] == a.shape[1] else a
    b.keys  # noqa: B018 - the blocks of the transpose, made once
    return lambda: a + b


#: what can be timed: a function of (A, A's cupyx CSR) giving the call, as
#: ops.py and webbase.py time them (A.T from a matrix with nothing cached;
#: A + B with B = A.T, or A for a rectangular A)
OPS: dict[str, Callable[[BitmapMatrix, Any], Callable[[], Any]]] = {
    "spgemm": _spgemm, "spgemm_csr": _spgemm_csr, "from_cupyx": _from_cupyx, "tocsr": _tocsr,
    "transpose": _transpose, "spmv": _spmv, "spmv_t": _spmv_t, "add": _add}


def timeline(fn: Callable[[], Any], repeat: int, warmup: int) -> list[tuple[str, float, float]]:
    """Median host and GPU times of each stamp of ``fn`` over ``repeat`` calls
    (the labels of the first call; calls whose sequence differs are dropped)."""
    import cupy

    for _ in range(warmup):
        fn()
    runs: list[list[tuple[str, float, float]]] = []
    for _ in range(repeat):
        cupy.cuda.Device().synchronize()
        recorder = Recorder()
        undo = instrument(recorder)
        try:
            recorder.stamp("start")
            fn()
            recorder.stamp("end")
        finally:
            undo()
        runs.append(recorder.rows())
    labels = [label for label, _, _ in runs[0]]
    same = [r for r in runs if [label for label, _, _ in r] == labels]
    return [(label, statistics.median(r[i][1] for r in same),
             statistics.median(r[i][2] for r in same)) for i, label in enumerate(labels)]


def print_timeline(title: str, rows: list[tuple[str, float, float]]) -> None:
    print(f"\n{title}")
    print(f"{'step':<44} {'host ms':>8} {'gpu ms':>8} {'lead ms':>8}")
    gap, last_gpu = 0.0, 0.0
    for label, host, gpu in rows:
        # the GPU reached this mark no earlier than the host issued it; when it
        # reached it at that moment, it had been idle since the previous mark
        if gpu - host < 0.005 and not label.startswith("sync"):
            gap += max(gpu - last_gpu, 0.0)
        last_gpu = gpu
        print(f"{label[:44]:<44} {host:8.3f} {gpu:8.3f} {gpu - host:8.3f}")
    total = rows[-1][2] if rows else 0.0
    print(f"wall {total:.3f} ms; GPU waiting on the host, at most {gap:.3f} ms")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="timeline.py", description=__doc__.splitlines()[0])
    p.add_argument("--matrix", help="a Matrix Market or edge-list file, or the name of a "
                   "structured matrix (" + ", ".join(generators.STRUCTURED) + "; default: "
                   "the WebBase-1M surrogate)")
    p.add_argument("--op", action="append", choices=tuple(OPS),
                   help="what to time (repeatable; default spgemm)")
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args(argv)
    device = common.detect_device()
    if not device.gpu:
        print("timeline.py: needs a CUDA GPU", file=sys.stderr)
        return 1
    if args.matrix in generators.STRUCTURED:
        a_host, name = generators.STRUCTURED[args.matrix](), args.matrix
    elif args.matrix:
        from bmsparse._readers import read_matrix

        if not Path(args.matrix).is_file():
            print(f"timeline.py: error: --matrix {args.matrix}: no such file", file=sys.stderr)
            return 1
        a_host, name = read_matrix(args.matrix), Path(args.matrix).name
    else:
        a_host, name = generators.webbase_surrogate(1.0, seed=0), "surrogate"
    a_host = common.canonical_csr(a_host, "float64")
    a_gpu = common.device_csr(a_host)
    a = BitmapMatrix.from_cupyx(a_gpu)
    for op in args.op or ["spgemm"]:
        print_timeline(f"{name}: {op} ({device.name}, median of {args.repeat})",
                       timeline(OPS[op](a, a_gpu), args.repeat, args.warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
