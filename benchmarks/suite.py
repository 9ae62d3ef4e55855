#!/usr/bin/env python
"""bmsparse against cuSPARSE (or scipy without a GPU) over a folder of matrices.

    python benchmarks/suite.py                      # ../shared/matrices + the structured ones
    python benchmarks/suite.py DIR --only bcsstk33,crack --repeat 3 --json suite.json
    python benchmarks/suite.py DIR --no-structured
    python benchmarks/suite.py --strategy tasks     # A/B: the task list everywhere

Every Matrix Market or edge-list file of the folder (``MANIFEST.tsv`` names
them when present) is squared, ``A @ A``; a rectangular one is multiplied by
its transpose, ``A @ A.T``, and its row says so. Values are float64, or
complex128 for complex matrices. The four structured matrices of Table 3 of
the ESC paper (``bmsparse.generators.STRUCTURED``) follow, full size on a
GPU and small on the CPU path.

A row per matrix: name, n, nnz, blocks, nnz per block, multiplies, nnz(C),
our time (kernels only: BitmapMatrix in, BitmapMatrix out), the peer's time
(cuSPARSE CSR @ CSR through cupyx; scipy on CPU-only machines; the two
sides' runs take turns, ``common.time_calls``), speedup,
peak memory of both, the strategy our product took ("lean": dense
accumulators in one launch, for small products, "scalar": by B's scalar
rows, "dense": dense accumulators per block row, "merge": the row merge, "tasks": the task list;
see ``bmsparse.spgemm.strategy``) and
whether the products match. The geometric mean of
the speedups closes the table.
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
from common import fmt_mib, fmt_ms, fmt_num, fmt_x

from bmsparse import BitmapMatrix, generators
from bmsparse.spgemm import lean, rowdense, rowmerge, rowscalar, spgemm, strategy

DEFAULT_DIR = Path(os.environ.get("BMSPARSE_MATRICES")
                   or common.REPO_ROOT.parent / "shared" / "matrices")

#: grid sizes of the structured matrices on the CPU path (the full ones take
#: hours with the NumPy twins)
CPU_GRID = {"2d-5pt": 64, "2d-9pt": 64, "3d-7pt": 16, "3d-27pt": 16}
CPU_GRID_DEFAULT = 16

#: on the CPU path, matrices whose product takes more multiplies are skipped
#: (the NumPy twins do about 2 million a second)
CPU_MAX_MULTIPLIES = 5_000_000


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="suite.py", description="bmsparse against cuSPARSE (or scipy without a GPU) "
        "over every matrix of a folder and the structured matrices of the ESC paper.")
    p.add_argument("dir", nargs="?", default=None, metavar="DIR",
                   help="folder of .mtx / edge-list files (default $BMSPARSE_MATRICES or "
                   f"{DEFAULT_DIR})")
    p.add_argument("--only", metavar="NAME[,NAME]", help="run only these matrices")
    p.add_argument("--no-structured", action="store_true",
                   help="skip the structured matrices of ESC Table 3")
    common.add_timing_args(p)
    p.add_argument("--strategy", choices=("auto", "lean", "scalar", "dense", "merge", "tasks"),
                   default="auto",
                   help="auto: bmsparse's own choice (default); lean: the one-launch dense "
                   "path wherever its workspace holds C; scalar: B's scalar rows wherever "
                   "B has few enough block columns; dense: dense accumulators "
                   "everywhere (not in one launch); merge: the row merge wherever its kernels can run (rows of at "
                   "most 128 blocks), else the task list; tasks: the task list everywhere. "
                   "For A/B runs of the strategies; the GPU only")
    p.add_argument("--max-multiplies", type=float, default=None,
                   help="skip products with more multiplies (default: no limit on a GPU, "
                   f"{CPU_MAX_MULTIPLIES:,} on the CPU path)")
    args = p.parse_args(argv)
    common.check_timing_args(p, args)
    if args.max_multiplies is not None and not args.max_multiplies >= 0:
        p.error(f"--max-multiplies must be non-negative, got {args.max_multiplies:g}")
    return args


def entries(args: argparse.Namespace,
            gpu: bool) -> tuple[list[tuple[str, str, Callable]], list[str]]:
    """``(name, source, loader)`` for every matrix to run, and notes for the user."""
    notes = []
    out: list[tuple[str, str, Callable]] = []
    out += common.folder_entries(args.dir, DEFAULT_DIR, notes,
                                 "only the structured matrices run")
    if not args.no_structured:
        for name, make in generators.STRUCTURED.items():
            if gpu:
                out.append((name, f"generators.STRUCTURED[{name!r}]() (full size)", make))
            else:
                nx = CPU_GRID.get(name, CPU_GRID_DEFAULT)
                out.append((name, f"generators.STRUCTURED[{name!r}]({nx}) (CPU path: small "
                            "grid)", lambda make=make, nx=nx: make(nx)))
    out = common.only(out, args.only, notes)
    return out, notes


def run_one(name: str, source: str, load: Callable, side: common.Side, *, repeat: int,
            warmup: int, max_multiplies: float | None) -> dict[str, Any]:
    """One row: read, square (or A @ A.T), time ours and the peer, compare."""
    row: dict[str, Any] = {"name": name, "source": source, "op": None, "dtype": None,
                           "n_rows": None, "n_cols": None, "nnz": None, "blocks": None,
                           "nnz_per_block": None, "multiplies": None, "nnz_c": None,
                           "ours_ms": None, "ours_gflops": None, "ours_peak_bytes": None,
                           "peer": "cuSPARSE" if side.gpu else "scipy", "peer_ms": None,
                           "peer_peak_bytes": None, "peer_error": None, "speedup": None,
                           "match": None, "check": None, "error": None, "note": "", "path": None}
    a, error = common.attempt(f"{name}: read", load)
    if error is not None:
        row["error"] = f"read: {error}"
        return row
    dtype = np.dtype(np.complex128 if a.dtype.kind == "c" else np.float64)
    a = common.canonical_csr(a, dtype)
    square = a.shape[0] == a.shape[1]
    b = a if square else common.canonical_csr(a.T)
    row.update(op="A @ A" if square else "A @ A.T (rectangular)", dtype=dtype.name,
               n_rows=a.shape[0], n_cols=a.shape[1], nnz=a.nnz,
               multiplies=common.count_multiplies(a, b))
    if max_multiplies is not None and row["multiplies"] > max_multiplies:
        row["note"] = (f"skipped: {row['multiplies']:,} multiplies > --max-multiplies "
                       f"{max_multiplies:,.0f}")
        return row

    def operands() -> tuple[BitmapMatrix, BitmapMatrix]:
        big_a = BitmapMatrix.from_scipy(a, device=side.gpu)
        big_b = big_a if square else BitmapMatrix.from_scipy(b, device=side.gpu)
        row["blocks"] = big_a.nblocks
        row["nnz_per_block"] = a.nnz / big_a.nblocks if big_a.nblocks else 0.0
        row["path"] = strategy(big_a, big_b)
        return big_a, big_b

    common.free_memory()
    ours, error = common.attempt(f"{name}: bmsparse", operands)
    peer_name = row["peer"]
    peer_call, peer_error = common.attempt(f"{name}: {peer_name}", lambda: (
        common.cusparse_call if side.gpu else common.scipy_call)(a, b, dtype))
    calls = {}
    if ours is not None:
        calls["bmsparse"] = lambda ops=ours: spgemm(*ops)
    if peer_call is not None:
        calls[peer_name] = peer_call[0]
    # ours and the peer's runs take turns: a slow stretch of the host lands on both
    measured = common.measure_side_by_side(calls, side.clock, side.memory, repeat=repeat,
                                           warmup=warmup, keep=True)
    del ours, calls  # our operands (cuSPARSE's go with peer_call)
    common.free_memory()
    got, error = measured.get("bmsparse", (None, error))
    c = None
    if error is not None:
        row["error"] = f"bmsparse: {error}"
    else:
        c = side.to_host(got.result)
        row.update(ours_ms=got.timing.ms, ours_peak_bytes=got.peak_bytes, nnz_c=c.nnz,
                   ours_gflops=common.gflops(row["multiplies"], got.timing.ms))
    theirs, peer_error = measured.get(peer_name, (None, peer_error))
    peer_c = None if theirs is None else peer_call[1](theirs.result)
    row.update(peer_ms=None if theirs is None else theirs.timing.ms,
               peer_peak_bytes=None if theirs is None else theirs.peak_bytes,
               peer_error=peer_error, speedup=common.speedup(
                   None if theirs is None else theirs.timing.ms, row["ours_ms"]))
    if c is not None and peer_c is not None:
        check = common.check_product(c, peer_c, dtype)
        row["check"] = check
        row["match"] = check["match"]
    return row


def force_strategy(name: str) -> None:
    """Override the strategies' limits (``bmsparse.spgemm.strategy``) for an A/B run."""
    if name == "auto":
        return
    lean.MAX_BLOCKS = 1 << 62 if name == "lean" else -1
    rowscalar.MAX_ENTRIES_PER_BLOCK = float("inf") if name == "scalar" else -1
    if name == "scalar":
        rowscalar.MIN_TERMS_PER_COLUMN = 0
    if name in ("lean", "dense"):
        rowdense.MAX_COLUMNS = 1 << 62
    elif name in ("merge", "tasks"):
        rowdense.MAX_COLUMNS = -1
    if name == "tasks":
        rowmerge.MAX_ROW_BLOCKS = -1
    elif name == "merge":
        rowmerge.MAX_MERGE_BLOCKS = 1 << 62


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = common.detect_device(force_cpu=args.cpu)
    side = common.Side(device)
    max_multiplies = args.max_multiplies
    if max_multiplies is None and not device.gpu:
        max_multiplies = CPU_MAX_MULTIPLIES
    try:
        todo, notes = entries(args, device.gpu)
    except (common.UserError, ValueError, OSError) as exc:
        print(f"suite.py: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    force_strategy(args.strategy)
    report = common.Report()
    peer_name = "cuSPARSE (cupyx CSR @ CSR)" if device.gpu else "scipy (CPU)"
    if device.gpu:
        report.line(f"bmsparse suite on {device.name}: ours (kernels only, BitmapMatrix in "
                    f"and out) vs {peer_name}; CUDA events, median of {args.repeat} after "
                    f"{args.warmup} warm-up runs, the two sides taking turns")
    else:
        report.line(f"bmsparse suite, CPU path ({device.note}): bmsparse's NumPy twins vs "
                    f"{peer_name}; host clock, median of {args.repeat} after {args.warmup} "
                    "warm-up runs; structured matrices on small grids")
    if args.strategy != "auto":
        report.line(f"note: strategy forced to {args.strategy}"
                    + ("" if device.gpu else " (no effect on the CPU path: it has one)"))
    pinned = common.pin_host(device.gpu and not args.no_pin)
    if pinned:
        notes.append(pinned)
    if not common.begin(report, notes, todo, "suite.py"):
        return 1

    rows = common.run_each(todo, run_one, side, args, max_multiplies)

    table = []
    for r in rows:
        n = (fmt_num(r["n_rows"]) if r["n_rows"] == r["n_cols"]
             else f"{fmt_num(r['n_rows'])}x{fmt_num(r['n_cols'])}")
        match = ("" if r["match"] is None else "match" if r["match"] else "MISMATCH")
        note = r["error"] or r["note"] or (f"{r['peer']}: {r['peer_error']}"
                                           if r["peer_error"] else "")
        if r["op"] and r["op"] != "A @ A":
            note = f"{r['op']}" + (f"; {note}" if note else "")
        table.append([r["name"], r["dtype"] or "", n, fmt_num(r["nnz"]), fmt_num(r["blocks"]),
                      fmt_num(r["nnz_per_block"], ".2f"), fmt_num(r["multiplies"]),
                      fmt_num(r["nnz_c"]), fmt_ms(r["ours_ms"]), fmt_ms(r["peer_ms"]),
                      fmt_x(r["speedup"]), fmt_mib(r["ours_peak_bytes"]),
                      fmt_mib(r["peer_peak_bytes"]), r["path"] or "", match, note])
    peer_short = "cuSPARSE" if device.gpu else "scipy"
    report.line()
    report.table(["matrix", "dtype", "n", "nnz", "blocks", "nnz/blk", "multiplies", "nnz(C)",
                  "ours ms", f"{peer_short} ms", "speedup", "ours MiB", f"{peer_short} MiB",
                  "path", "check", "note"], table, left=(0, 1, 13, 14, 15),
                 title=f"C = A @ A (A @ A.T for rectangular A); speedup = {peer_short} time / "
                       "ours; MiB = peak memory above the inputs, output included"
                       + ("" if device.gpu else " (host, tracemalloc)"))
    mean = common.geomean([r["speedup"] for r in rows])
    counted = sum(1 for r in rows if r["speedup"])
    report.line(f"geometric-mean speedup over {counted} matrices: {fmt_x(mean)}")
    mismatches = [r["name"] for r in rows if r["match"] is False]
    failures = [r["name"] for r in rows if r["error"]]
    return common.conclude(report, mismatches, failures, args.json, {
        "script": "suite.py", "argv": sys.argv[1:] if argv is None else argv,
        "device": device.describe(), "peer": peer_name,
        "settings": {"repeat": args.repeat, "warmup": args.warmup,
                     "max_multiplies": max_multiplies, "strategy": args.strategy,
                     "dir": str(Path(args.dir) if args.dir else DEFAULT_DIR),
                     "structured": not args.no_structured, "only": args.only},
        "rows": rows, "geomean_speedup": mean, "mismatches": mismatches,
        "failures": failures})


if __name__ == "__main__":
    sys.exit(main())
