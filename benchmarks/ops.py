#!/usr/bin/env python
"""bmsparse's operations beyond SpGEMM against cupyx (scipy without a GPU).

    python benchmarks/ops.py                       # surrogate + ../shared/matrices
    python benchmarks/ops.py DIR --only bcsstk33 --repeat 5 --json ops.json
    python benchmarks/ops.py --no-corpus --scale 0.1

For the WebBase-1M surrogate (``bmsparse.generators.webbase_surrogate``) and
every matrix of the corpus folder, in float64, it times

- ``A @ x``   SpMV: ours against cupyx ``csr @ x`` (cuSPARSE);
- ``A.T @ x`` transposed SpMV: ours (no transposed copy) against cupyx
  ``a.T @ x`` (a lazy CSC, cuSPARSE's transposed SpMV);
- ``A.T``     a materialised transpose: ours (``A.T`` and its blocks, from a
  matrix with nothing cached) against cupyx ``a.T.tocsr()``, the equivalent
  that yields a usable CSR; cupyx's lazy ``a.T`` alone is reported too;
- ``A + B``   with B of the same shape and another structure (``A.T`` for a
  square A, a random matrix of the same density otherwise);
- ``vstack``, ``hstack``  ``vstack([A, B])`` and ``hstack([A, B])`` (B as
  above) against cupyx's (scipy's) with ``format="csr"``: B starts inside a
  block row (column) unless A's rows (columns) are a multiple of 8.

``--ops`` runs some of them only.

CUDA events on the GPU, the host clock on the CPU path; the median of
``--repeat`` runs after ``--warmup``, ours and the peer's taking turns run
by run (``common.time_calls``). Ratio = their time / ours (above 1:
bmsparse is faster). Every result is checked against the peer's once.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import numpy as np
import scipy.sparse as sp
from common import fmt_ms, fmt_num, fmt_x

from bmsparse import BitmapMatrix, generators

DEFAULT_DIR = Path(os.environ.get("BMSPARSE_MATRICES")
                   or common.REPO_ROOT.parent / "shared" / "matrices")
CPU_SCALE = 0.01
#: on the CPU path, corpus matrices with more stored entries are skipped
CPU_MAX_NNZ = 1_000_000
OPS = ("A @ x", "A.T @ x", "A.T", "A + B", "vstack", "hstack")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ops.py", description="SpMV, transposed SpMV, "
                                "transpose, addition and stacks: bmsparse against cupyx (or "
                                "scipy).")
    p.add_argument("dir", nargs="?", default=None, metavar="DIR",
                   help=f"folder of matrices (default $BMSPARSE_MATRICES or {DEFAULT_DIR})")
    p.add_argument("--only", metavar="NAME[,NAME]", help="run only these matrices "
                   "(\"surrogate\" names the surrogate)")
    p.add_argument("--no-corpus", action="store_true", help="the surrogate only")
    p.add_argument("--ops", metavar="OP[,OP]", type=_ops, default=OPS,
                   help="run only these operations, of: " + ", ".join(OPS))
    p.add_argument("--scale", type=float, default=None,
                   help=f"size of the surrogate (default 1.0 on a GPU, {CPU_SCALE} on the CPU)")
    common.add_timing_args(p)
    args = p.parse_args(argv)
    common.check_timing_args(p, args)
    return args


def _ops(text: str) -> tuple[str, ...]:
    """``--ops``: names of OPS, comma-separated."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in OPS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown operation {', '.join(unknown) or text!r}; "
                                         f"choose from: {', '.join(OPS)}")
    return names


def entries(args: argparse.Namespace,
            gpu: bool) -> tuple[list[tuple[str, Callable[[], Any]]], list[str]]:
    """``(name, loader)`` for every matrix to run, and notes for the user."""
    scale = args.scale if args.scale is not None else (1.0 if gpu else CPU_SCALE)
    out: list[tuple[str, Callable[[], Any]]] = [
        ("surrogate", lambda: generators.webbase_surrogate(scale, seed=0))]
    notes: list[str] = []
    if not args.no_corpus:
        out += [(name, load) for name, _, load in common.folder_entries(
            args.dir, DEFAULT_DIR, notes, "only the surrogate runs")]
    return common.only(out, args.only, notes), notes


def other_operand(a: sp.csr_array) -> sp.csr_array:
    """B for A + B: A.T when square, else a random matrix of A's shape and density."""
    if a.shape[0] == a.shape[1]:
        return common.canonical_csr(a.T)
    density = a.nnz / max(a.shape[0] * a.shape[1], 1)
    b = sp.random_array(a.shape, density=density, format="csr", rng=1, dtype=np.float64)
    return common.canonical_csr(b)


def run_matrix(name: str, a: sp.csr_array, side: common.Side, *, repeat: int,
               warmup: int, ops: tuple[str, ...] = OPS) -> list[dict[str, Any]]:
    """One row per operation of ``ops``."""
    import bmsparse

    gpu = side.gpu
    xp, stacks = np, sp
    if gpu:
        import cupy
        import cupyx.scipy.sparse

        xp, stacks = cupy, cupyx.scipy.sparse
    b = other_operand(a)
    big_a = BitmapMatrix.from_scipy(a, device=gpu)
    big_b = BitmapMatrix.from_scipy(b, device=gpu)
    peer_a, peer_b = side.csr(a), side.csr(b)
    rng = np.random.default_rng(0)
    x = xp.asarray(rng.standard_normal(a.shape[1]))
    y = xp.asarray(rng.standard_normal(a.shape[0]))

    def ours_transpose() -> BitmapMatrix:
        # nothing kept with A (its column order): the transpose sorts again.
        # A's cache emptied, not a new matrix made around its arrays, whose
        # construction took 4-9 us of each time (benchmarks/NOTES.md, session 50)
        big_a._cache.clear()
        t = big_a.T
        t.keys  # noqa: B018 - the blocks are computed on first use
        return t

    cases = {
        "A @ x": (lambda: big_a @ x, lambda: peer_a @ x),
        "A.T @ x": (lambda: big_a.T @ y, lambda: peer_a.T @ y),
        "A.T": (ours_transpose, lambda: peer_a.T.tocsr()),
        "A + B": (lambda: big_a + big_b, lambda: peer_a + peer_b),
        "vstack": (lambda: bmsparse.vstack([big_a, big_b]),
                   lambda: stacks.vstack([peer_a, peer_b], format="csr")),
        "hstack": (lambda: bmsparse.hstack([big_a, big_b]),
                   lambda: stacks.hstack([peer_a, peer_b], format="csr")),
    }
    rows = []
    for op in ops:
        ours, theirs = cases[op]
        row: dict[str, Any] = {"matrix": name, "op": op, "n_rows": a.shape[0],
                               "n_cols": a.shape[1], "nnz": a.nnz, "blocks": big_a.nblocks,
                               "ours_ms": None, "peer_ms": None, "ratio": None, "match": None,
                               "note": ""}
        # both sides' runs interleaved: a slow stretch of the host lands on both
        measured = common.measure_side_by_side(
            {f"{name} {op}: bmsparse": ours, f"{name} {op}: peer": theirs}, side.clock,
            side.memory, repeat=repeat, warmup=warmup, keep=True)
        (got, error), (peer, peer_error) = measured.values()
        if got is not None:
            row["ours_ms"] = got.timing.ms
        if peer is not None:
            row["peer_ms"] = peer.timing.ms
        row["note"] = "; ".join(e for e in (error, peer_error) if e)
        row["ratio"] = common.speedup(row["peer_ms"], row["ours_ms"])
        if got is not None and peer is not None:
            row["match"] = check(got.result, peer.result)
        rows.append(row)
        common.free_memory()
    if gpu and "A.T" in ops:
        lazy = common.measure(lambda: peer_a.T, side.clock, side.memory, repeat=repeat,
                              warmup=warmup)
        rows.append({"matrix": name, "op": "A.T (cupyx lazy, no CSR)", "n_rows": a.shape[0],
                     "n_cols": a.shape[1], "nnz": a.nnz, "blocks": big_a.nblocks,
                     "ours_ms": None, "peer_ms": lazy.timing.ms, "ratio": None, "match": None,
                     "note": "cupyx a.T alone: a CSC view, no data moved"})
    return rows


def check(ours: Any, theirs: Any) -> bool:
    """Our result against the peer's: dense vectors within 1e-10, sparse ones exactly."""
    if isinstance(ours, BitmapMatrix):
        got = ours.to_scipy()
        want = sp.csr_array(theirs.get() if hasattr(theirs, "get") else theirs)
        return bool(common.check_product(got, want, np.float64)["match"])
    got, want = (v.get() if hasattr(v, "get") else np.asarray(v) for v in (ours, theirs))
    scale = float(np.abs(want).max()) if want.size else 1.0
    return bool(np.allclose(got, want, rtol=1e-10, atol=1e-10 * max(scale, 1.0)))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = common.detect_device(force_cpu=args.cpu)
    side = common.Side(device)
    try:
        todo, notes = entries(args, device.gpu)
    except common.UserError as exc:
        print(f"ops.py: error: {exc}", file=sys.stderr)
        return 1
    report = common.Report()
    peer = "cupyx (cuSPARSE)" if device.gpu else "scipy"
    where = device.name if device.gpu else f"the CPU path ({device.note})"
    report.line(f"bmsparse operations on {where} against {peer}, float64; "
                f"median of {args.repeat} after {args.warmup} warm-up runs, "
                "the two sides taking turns")
    pinned = common.pin_host(device.gpu and not args.no_pin)
    if pinned:
        notes.append(pinned)
    if not common.begin(report, notes, todo, "ops.py"):
        return 1
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    progress = common.Progress(len(todo))
    try:
        for name, load in todo:
            progress.step(name)
            a, error = common.attempt(f"{name}: read", load)
            if error is None:
                a = common.canonical_csr(a, np.float64)
                if not device.gpu and a.nnz > CPU_MAX_NNZ:
                    report.line(f"note: {name} skipped on the CPU path "
                                f"({a.nnz:,} > {CPU_MAX_NNZ:,} stored entries)")
                else:
                    rows += run_matrix(name, a, side, repeat=args.repeat, warmup=args.warmup,
                                       ops=args.ops)
            else:
                report.line(f"note: {name}: {error}")
                failures.append(name)
            progress.done()
    finally:
        progress.close()
    table = [[r["matrix"], r["op"], fmt_num(r["nnz"]), fmt_num(r["blocks"]),
              fmt_ms(r["ours_ms"]), fmt_ms(r["peer_ms"]), fmt_x(r["ratio"]),
              "" if r["match"] is None else "match" if r["match"] else "MISMATCH", r["note"]]
             for r in rows]
    report.line()
    report.table(["matrix", "op", "nnz", "blocks", "ours ms", "peer ms", "ratio", "check",
                  "note"], table, left=(0, 1, 7, 8),
                 title=f"ratio = {peer} time / ours (above 1: bmsparse is faster)")
    for op in args.ops:
        mean = common.geomean([r["ratio"] for r in rows if r["op"] == op])
        report.line(f"geometric-mean ratio of {op}: {fmt_x(mean)}")
    mismatches = [f"{r['matrix']} {r['op']}" for r in rows if r["match"] is False]
    return common.conclude(report, mismatches, failures, args.json, {
        "script": "ops.py", "device": device.describe(), "peer": peer, "rows": rows,
        "settings": {"repeat": args.repeat, "warmup": args.warmup, "scale": args.scale,
                     "ops": list(args.ops)}})


if __name__ == "__main__":
    sys.exit(main())
