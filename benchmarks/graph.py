#!/usr/bin/env python
"""Graph workloads: the Boolean product, triangle counting and BFS (issue #4).

    python benchmarks/graph.py                       # WebBase-1M surrogate + ../shared/matrices
    python benchmarks/graph.py DIR --only wiki-Vote,ca-GrQc --repeat 3 --json graph.json
    python benchmarks/graph.py --no-corpus --scale 0.5

For the WebBase-1M surrogate and every square matrix of the folder, taken as
an unweighted graph (its pattern):

- ``A @ A`` three ways: our Boolean product (``semiring="or_and"``, a bool
  pattern matrix out: keys, bitmaps, offsets), our numeric product (float64
  ones: the same blocks plus values) and cupyx float32 CSR @ CSR (cuSPARSE;
  what cupyx can do for a graph; scipy on the CPU path). Time and the bytes
  of each output (cupyx: indptr, indices, data) and their ratios. The three
  structures are checked equal. The issue's target on the surrogate: the
  Boolean product at least 2x faster than our float64 product, and its output
  at least 3x smaller.
- ``bmsparse.graph.triangle_count``: time and count, checked against scipy
  (``sum((S @ S) * S) / 6``) where that product is small enough.
- ``bmsparse.graph.bfs_levels`` from vertex 0 and from the vertex of most
  out-edges: time, levels, vertices reached, checked against
  ``scipy.sparse.csgraph.shortest_path``.

Without a GPU everything runs the NumPy twins on the host, with the
surrogate at scale 0.01 and the larger corpus graphs skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import numpy as np
import scipy.sparse as sp
from common import fmt_mib, fmt_ms, fmt_num, fmt_x
from scipy.sparse import csgraph

from bmsparse import BitmapMatrix, generators, graph, spgemm

DEFAULT_DIR = Path(os.environ.get("BMSPARSE_MATRICES")
                   or common.REPO_ROOT.parent / "shared" / "matrices")
CPU_SCALE = 0.01
#: on the CPU path, graphs whose A @ A takes more multiplies are skipped
CPU_MAX_MULTIPLIES = 5_000_000
#: triangles are checked against scipy when S @ S takes at most this many multiplies
CHECK_MAX_MULTIPLIES = 200_000_000
#: the issue's targets for the Boolean product on the WebBase-1M surrogate
TARGET_SPEEDUP = 2.0
TARGET_MEMORY = 3.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="graph.py", description="Boolean A @ A against our float64 product and cupyx "
        "float32, triangle counting and BFS, on the WebBase-1M surrogate and a folder of "
        "graphs.")
    p.add_argument("dir", nargs="?", default=None, metavar="DIR",
                   help=f"folder of graphs (default $BMSPARSE_MATRICES or {DEFAULT_DIR})")
    p.add_argument("--only", metavar="NAME[,NAME]",
                   help="run only these graphs (the surrogate is named 'surrogate')")
    p.add_argument("--no-corpus", action="store_true", help="the surrogate only")
    p.add_argument("--no-surrogate", action="store_true", help="the folder only")
    p.add_argument("--scale", type=float, default=None,
                   help=f"surrogate size relative to WebBase-1M (default 1.0 on a GPU, "
                   f"{CPU_SCALE} on the CPU path)")
    common.add_timing_args(p)
    p.add_argument("--max-multiplies", type=float, default=None,
                   help="skip graphs whose A @ A takes more multiplies (default: no limit "
                   f"on a GPU, {CPU_MAX_MULTIPLIES:,} on the CPU path)")
    args = p.parse_args(argv)
    common.check_timing_args(p, args)
    return args


def entries(args: argparse.Namespace, scale: float) -> tuple[list[tuple[str, str, Any]],
                                                             list[str]]:
    """``(name, source, loader)`` of every graph, and notes for the user."""
    out: list[tuple[str, str, Any]] = []
    notes: list[str] = []
    if not args.no_surrogate:
        out.append(("surrogate", f"generators.webbase_surrogate(scale={scale:g})",
                    lambda: generators.webbase_surrogate(scale)))
    if not args.no_corpus:
        out += common.folder_entries(args.dir, DEFAULT_DIR, notes, "only the surrogate runs")
    out = common.only(out, args.only, notes, "graph")
    return out, notes


def graph_pattern(a: Any) -> sp.csr_array:
    """The unweighted graph of ``a``: its structure with float64 ones, canonical CSR."""
    a = common.canonical_csr(a)
    return sp.csr_array((np.ones(a.nnz), a.indices, a.indptr), shape=a.shape)


def output_bytes(c: BitmapMatrix) -> int:
    return c.memory_usage()["total"]


def run_one(name: str, source: str, load: Any, side: common.Side, *, repeat: int,
            warmup: int, max_multiplies: float | None) -> dict[str, Any]:
    """One row: the three products, triangles and BFS on one graph."""
    row: dict[str, Any] = {
        "name": name, "source": source, "n": None, "nnz": None, "blocks": None,
        "multiplies": None, "nnz_c": None, "blocks_c": None,
        "bool_ms": None, "bool_bytes": None, "f64_ms": None, "f64_bytes": None,
        "peer": "cupyx float32" if side.gpu else "scipy float32", "peer_ms": None,
        "peer_bytes": None, "peer_error": None, "speedup_vs_f64": None,
        "speedup_vs_peer": None, "memory_vs_f64": None, "memory_vs_peer": None,
        "structure_match": None, "triangles": None, "triangles_ms": None,
        "triangles_check": None, "errors": {}, "note": ""}
    for key in ("bfs", "bfs_hub"):
        row.update({f"{key}_{what}": None for what in ("source", "ms", "levels", "reached",
                                                       "check")})
    a, error = common.attempt(f"{name}: read", load)
    if error is not None:
        row["errors"]["read"] = error
        return row
    if a.shape[0] != a.shape[1]:
        row["note"] = f"skipped: not square ({a.shape[0]}x{a.shape[1]})"
        return row
    a = graph_pattern(a)
    multiplies = common.count_multiplies(a, a)
    row.update(n=a.shape[0], nnz=a.nnz, multiplies=multiplies)
    if max_multiplies is not None and multiplies > max_multiplies:
        row["note"] = f"skipped: {multiplies:,} multiplies > {max_multiplies:,.0f}"
        return row
    clock, memory = side.clock, side.memory

    def on_side(m: sp.csr_array) -> BitmapMatrix:
        return BitmapMatrix.from_scipy(m, device=side.gpu)

    numeric = on_side(a)
    pattern = numeric.astype(bool)
    row["blocks"] = numeric.nblocks
    common.free_memory()

    def boolean() -> Any:
        got = common.measure(lambda: spgemm(pattern, pattern, semiring="or_and"), clock,
                             memory, repeat=repeat, warmup=warmup, keep=True)
        return got, got.result

    got, error = common.attempt(f"{name}: boolean product", boolean)
    c_bool = None
    if error is None:
        got, c_bool = got
        row.update(bool_ms=got.timing.ms, bool_bytes=output_bytes(c_bool),
                   nnz_c=c_bool.nnz, blocks_c=c_bool.nblocks)
    else:
        row["errors"]["bool"] = error
    common.free_memory()
    got, error = common.attempt(f"{name}: float64 product", lambda: common.measure(
        lambda: spgemm(numeric, numeric), clock, memory, repeat=repeat, warmup=warmup,
        keep=True))
    c_f64 = None
    if error is None:
        c_f64 = got.result
        row.update(f64_ms=got.timing.ms, f64_bytes=output_bytes(c_f64))
    else:
        row["errors"]["f64"] = error
    common.free_memory()
    if side.gpu:
        peer = common.peer_cusparse(a, a, np.float32, repeat=repeat, warmup=warmup, keep=True)
    else:
        peer = common.peer_scipy(a, a, np.float32, repeat=repeat, warmup=warmup, keep=True)
    row.update(peer_ms=peer.ms, peer_error=peer.error)
    if peer.result is not None:
        r = peer.result
        row["peer_bytes"] = r.indptr.nbytes + r.indices.nbytes + r.data.nbytes
    row.update(speedup_vs_f64=common.speedup(row["f64_ms"], row["bool_ms"]),
               speedup_vs_peer=common.speedup(row["peer_ms"], row["bool_ms"]),
               memory_vs_f64=_ratio(row["f64_bytes"], row["bool_bytes"]),
               memory_vs_peer=_ratio(row["peer_bytes"], row["bool_bytes"]))
    if c_bool is not None:
        row["structure_match"] = same_structure(c_bool, [c_f64, peer.result])
    del c_bool, c_f64, peer
    common.free_memory()

    got, error = common.attempt(f"{name}: triangle_count", lambda: common.measure(
        lambda: graph.triangle_count(pattern), clock, memory, repeat=repeat, warmup=warmup,
        keep=True))
    if error is None:
        row.update(triangles=got.result, triangles_ms=got.timing.ms)
        row["triangles_check"] = check_triangles(a, got.result)
    else:
        row["errors"]["triangles"] = error
    common.free_memory()
    # vertex 0 as the issue asks, and the vertex of most out-edges (vertex 0 of an
    # edge list is often isolated)
    hub = int(np.argmax(np.diff(a.indptr))) if a.shape[0] else 0
    for key, source in (("bfs", 0), ("bfs_hub", hub)):
        got, error = common.attempt(f"{name}: bfs_levels({source})", lambda source=source:
                                    common.measure(lambda: graph.bfs_levels(pattern, source),
                                                   clock, memory, repeat=repeat,
                                                   warmup=warmup, keep=True))
        if error is not None:
            row["errors"][key] = error
            continue
        levels = got.result if isinstance(got.result, np.ndarray) else got.result.get()
        want = csgraph.shortest_path(a, unweighted=True, directed=True, indices=source)
        row.update({f"{key}_source": source, f"{key}_ms": got.timing.ms,
                    f"{key}_levels": int(levels.max()) + 1,
                    f"{key}_reached": int((levels >= 0).sum()),
                    f"{key}_check": bool(np.array_equal(levels, np.where(np.isinf(want), -1,
                                                                          want)))})
    return row


def _ratio(theirs: int | None, ours: int | None) -> float | None:
    return None if theirs is None or not ours else theirs / ours


def same_structure(c_bool: BitmapMatrix, others: list[Any]) -> bool:
    """Our Boolean C has the structure of every other C (ours float64, the peer's)."""
    want = c_bool.get().tocsr()
    for other in others:
        if other is None:
            continue
        got = other.get().tocsr() if isinstance(other, BitmapMatrix) else sp.csr_array(other)
        got = common.canonical_csr(got)
        if not (np.array_equal(got.indptr, want.indptr)
                and np.array_equal(got.indices, want.indices)):
            return False
    return True


def check_triangles(a: sp.csr_array, count: int) -> bool | None:
    """scipy's count, ``sum((S @ S) * S) / 6``, equals ours; None when too large to run."""
    s = ((a + a.T) != 0).astype(np.int64)
    s.setdiag(0)
    s.eliminate_zeros()
    s = sp.csr_array(s)
    if common.count_multiplies(s, s) > CHECK_MAX_MULTIPLIES:
        return None
    return int((s @ s).multiply(s).sum()) // 6 == count


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = common.detect_device(force_cpu=args.cpu)
    side = common.Side(device)
    scale = args.scale if args.scale is not None else (1.0 if device.gpu else CPU_SCALE)
    max_multiplies = args.max_multiplies
    if max_multiplies is None and not device.gpu:
        max_multiplies = CPU_MAX_MULTIPLIES
    try:
        todo, notes = entries(args, scale)
    except (common.UserError, ValueError, OSError) as exc:
        print(f"graph.py: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    report = common.Report()
    if device.gpu:
        report.line(f"bmsparse graph benchmark on {device.name}: CUDA events, median of "
                    f"{args.repeat} after {args.warmup} warm-up runs")
    else:
        report.line(f"bmsparse graph benchmark, CPU path ({device.note}): NumPy twins, "
                    f"host clock, median of {args.repeat} after {args.warmup} warm-up runs")
    pinned = common.pin_host(device.gpu and not args.no_pin)
    if pinned:
        notes.append(pinned)
    if not common.begin(report, notes, todo, "graph.py", "graph"):
        return 1
    rows = common.run_each(todo, run_one, side, args, max_multiplies)

    peer = "cupyx" if device.gpu else "scipy"
    products, algorithms = [], []
    for r in rows:
        note = r["note"] or "; ".join(f"{k}: {v}" for k, v in r["errors"].items())
        if r["peer_error"]:
            note = (note + "; " if note else "") + f"{peer}: {r['peer_error']}"
        check = "" if r["structure_match"] is None else (
            "match" if r["structure_match"] else "MISMATCH")
        products.append([r["name"], fmt_num(r["n"]), fmt_num(r["nnz"]), fmt_num(r["nnz_c"]),
                         fmt_ms(r["bool_ms"]), fmt_ms(r["f64_ms"]), fmt_ms(r["peer_ms"]),
                         fmt_x(r["speedup_vs_f64"]), fmt_x(r["speedup_vs_peer"]),
                         fmt_mib(r["bool_bytes"]), fmt_mib(r["f64_bytes"]),
                         fmt_mib(r["peer_bytes"]), fmt_x(r["memory_vs_f64"]),
                         fmt_x(r["memory_vs_peer"]), check, note])
        algorithms.append([r["name"], fmt_num(r["triangles"]), fmt_ms(r["triangles_ms"]),
                           _verdict(r["triangles_check"])] + [
            x for key in ("bfs", "bfs_hub") for x in (
                fmt_num(r[f"{key}_source"]), fmt_ms(r[f"{key}_ms"]),
                fmt_num(r[f"{key}_levels"]), fmt_num(r[f"{key}_reached"]),
                _verdict(r[f"{key}_check"]))])
    report.line()
    report.table(["graph", "n", "nnz", "nnz(C)", "bool ms", "f64 ms", f"{peer} f32 ms",
                  "vs f64", f"vs {peer}", "bool MiB", "f64 MiB", f"{peer} MiB",
                  "f64/bool mem", f"{peer}/bool mem", "structure", "note"], products,
                 left=(0, 14, 15),
                 title=f"C = A @ A of the graph (pattern): ours Boolean (or_and) vs ours "
                       f"float64 vs {peer} float32; 'vs' = their time / ours Boolean; MiB = "
                       "the output's arrays")
    report.line()
    report.table(["graph", "triangles", "ms", "check"]
                 + ["source", "BFS ms", "levels", "reached", "check"] * 2, algorithms,
                 title="triangle_count (undirected, no self-loops); bfs_levels from vertex 0 "
                       "and from the vertex of most out-edges; checks against scipy (n/a: "
                       "too large to check)")
    surrogate = next((r for r in rows if r["name"] == "surrogate"), None)
    targets = None
    if surrogate is not None and surrogate["speedup_vs_f64"] is not None:
        speed_ok = surrogate["speedup_vs_f64"] >= TARGET_SPEEDUP
        memory_ok = (surrogate["memory_vs_f64"] or 0) >= TARGET_MEMORY
        targets = {"speedup_vs_f64": surrogate["speedup_vs_f64"], "speedup_target":
                   TARGET_SPEEDUP, "speedup_met": speed_ok,
                   "memory_vs_f64": surrogate["memory_vs_f64"], "memory_target":
                   TARGET_MEMORY, "memory_met": memory_ok, "scale": scale}
        report.line()
        report.line(f"surrogate (scale {scale:g}): Boolean product "
                    f"{fmt_x(surrogate['speedup_vs_f64'])} faster than our float64 product "
                    f"(target {TARGET_SPEEDUP:g}x: {'met' if speed_ok else 'NOT met'}), "
                    f"output {fmt_x(surrogate['memory_vs_f64'])} smaller (target "
                    f"{TARGET_MEMORY:g}x: {'met' if memory_ok else 'NOT met'})")
    bad = [r["name"] for r in rows if False in (r["structure_match"], r["triangles_check"],
                                                 r["bfs_check"], r["bfs_hub_check"])]
    failed = [r["name"] for r in rows if r["errors"]]
    return common.conclude(report, bad, failed, args.json, {
        "script": "graph.py", "argv": sys.argv[1:] if argv is None else argv,
        "device": device.describe(),
        "settings": {"repeat": args.repeat, "warmup": args.warmup, "scale": scale,
                     "max_multiplies": max_multiplies, "only": args.only},
        "rows": rows, "targets": targets, "mismatches": bad, "failures": failed})


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else "match" if ok else "MISMATCH"


if __name__ == "__main__":
    sys.exit(main())
