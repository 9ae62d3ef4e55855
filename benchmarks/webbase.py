#!/usr/bin/env python
"""Square WebBase-1M with bmsparse and its peers; print the paper's tables beside ours.

    python benchmarks/webbase.py                      # the surrogate, full size on a GPU
    python benchmarks/webbase.py --matrix webbase-1M.tar.gz
    python benchmarks/webbase.py --download           # fetch it from SuiteSparse first
    python benchmarks/webbase.py --scale 0.1 --repeat 3 --json out.json --plot out.png

Prints the input's figures, Table 1 (memory footprint of COO, CSR and
bitmap), Table 2 (runtime breakdown: transfer, conversion, the four SpGEMM
stages, total), a comparison with cuSPARSE (float32 and float64), torch.sparse
and scipy, and a correctness check of our C against theirs.

Without a file it runs on ``bmsparse.generators.webbase_surrogate`` and every
result line carries the word "surrogate". Without a GPU it runs bmsparse's
NumPy twins against scipy at scale 0.01 (unless ``--scale`` is given).
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

from bmsparse import STAGES, BitmapMatrix, generators
from bmsparse._readers import download_suitesparse, read_matrix

#: Table 1 of the paper (MiB): all bytes and index bytes of WebBase-1M, float64
PAPER_TABLE1 = {"COO": (47.39, 23.69), "CSR": (39.35, 15.66), "bitmap (paper)": (32.10, 8.40)}

#: Table 2 of the paper (ms, GTX Titan); its total is the four SpGEMM stages
PAPER_TABLE2 = {"transfer": 14.963, "conversion": 78.108, "tasks": 67.517, "count": 64.514,
                "multiply": 172.126, "compact": 12.982, "total": 317.139}

STAGE_NAMES = {"transfer": "host -> device transfer (COO)", "conversion": "COO -> bitmap",
               "tasks": "task generation", "count": "counting",
               "multiply": "block multiplication", "compact": "compaction",
               "total": "total (the four stages)"}

EXTRA_NAMES = {"transfer_csr": "host -> device transfer (CSR)",
               "conversion_csr": "CSR -> bitmap (from_cupyx)",
               "spgemm_call": "spgemm call, timed whole",
               "to_csr": "bitmap -> CSR (C.tocsr())",
               "end_to_end": "end to end from CSR (CSR->bmp, spgemm writing CSR)"}

CPU_SCALE = 0.01
SCIPY_REPEAT_ON_GPU = 3
ENV_URL = "BMSPARSE_SUITESPARSE_URL"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="webbase.py", description="Square WebBase-1M (or its surrogate) with bmsparse "
        "and its peers, and print the paper's tables beside ours.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--matrix", metavar="PATH",
                     help="a local WebBase-1M: .mtx, .mtx.gz or the collection's .tar.gz")
    src.add_argument("--download", action="store_true",
                     help="fetch Williams/webbase-1M from the SuiteSparse Matrix Collection")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="download cache (default ~/.cache/bmsparse)")
    p.add_argument("--download-url", help=argparse.SUPPRESS)
    p.add_argument("--scale", type=float, default=None,
                   help="size of the surrogate relative to WebBase-1M (default 1.0 on a GPU, "
                   f"{CPU_SCALE} on the CPU path)")
    p.add_argument("--seed", type=int, default=0, help="seed of the surrogate (default 0)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    common.add_timing_args(p)
    p.add_argument("--no-scipy", action="store_true", help="skip scipy on the CPU")
    p.add_argument("--plot", metavar="FILE.png", help="draw the breakdown and the comparison")
    args = p.parse_args(argv)
    common.check_timing_args(p, args)
    return args


# --- input --------------------------------------------------------------------------


def load_input(args: argparse.Namespace, scale: float) -> dict[str, Any]:
    """The matrix to square, its label and where it came from."""
    dtype = np.dtype(args.dtype)
    if args.matrix or args.download:
        if args.download:
            url = args.download_url or os.environ.get(ENV_URL) or None
            try:
                path = download_suitesparse("Williams", "webbase-1M", args.cache_dir,
                                            base_url=url)
            except (ConnectionError, OSError, ValueError) as exc:
                raise common.UserError(" ".join(str(exc).split())) from None
        else:
            path = Path(args.matrix)
            if not path.is_file():
                raise common.UserError(f"--matrix {args.matrix}: no such file")
        try:
            a = read_matrix(path)
        except (OSError, ValueError) as exc:
            raise common.UserError(f"cannot read {path}: {' '.join(str(exc).split())}") from None
        if a.dtype.kind == "c":
            raise common.UserError(f"{path} is complex; webbase.py squares real matrices "
                                   "(benchmarks/suite.py takes complex ones)")
        label = common.matrix_label(path)
        return {"a": common.canonical_csr(a, dtype), "label": label, "surrogate": False,
                "source": str(path), "scale": None}
    a = generators.webbase_surrogate(scale, seed=args.seed, dtype=dtype)
    return {"a": common.canonical_csr(a, dtype), "label": "surrogate", "surrogate": True,
            "source": f"bmsparse.generators.webbase_surrogate(scale={scale:g}, "
                      f"seed={args.seed})", "scale": scale}


def targets() -> dict[str, Any]:
    get = getattr(generators, "surrogate_targets", None)
    return dict(get() if callable(get) else generators.WEBBASE_1M)


# --- our side -----------------------------------------------------------------------


def measure_ours(side: common.Side, a: sp.csr_array, b: sp.csr_array, *, repeat: int,
                 warmup: int, full: bool) -> dict[str, Any]:
    """Our pipeline on ``a @ b``: with ``full`` the whole breakdown, else kernels and e2e.

    Returns a dict of Timing/Measured objects, ``usage`` (memory_usage of
    A), ``c`` (our C on the host, when ``full``) and ``errors``.
    """
    out: dict[str, Any] = {"errors": {}}
    clock = side.clock
    same = b is a

    def step(name: str, fn: Any) -> Any:
        value, error = common.attempt(f"bmsparse {a.dtype.name} {name}", fn)
        if error is not None:
            out["errors"][name] = error
        return value

    coo = a.tocoo()
    if full and side.gpu:
        out["transfer"] = step("transfer", lambda: common.time_call(
            lambda: side.transfer_coo(coo), clock, repeat=repeat, warmup=warmup))
        out["transfer_csr"] = step("transfer_csr", lambda: common.time_call(
            lambda: side.transfer_csr(a), clock, repeat=repeat, warmup=warmup))
    operands = step("transfer", lambda: side.transfer_coo(coo))
    if operands is None:
        return out
    rows, cols, data = operands
    if full:
        out["conversion"] = step("conversion", lambda: common.time_call(
            lambda: BitmapMatrix.from_coo(rows, cols, data, a.shape), clock, repeat=repeat,
            warmup=warmup))
    big_a = step("conversion", lambda: BitmapMatrix.from_coo(rows, cols, data, a.shape))
    rows = cols = data = operands = None  # the device copies are not needed any more
    a_csr = step("csr", lambda: side.csr(a))
    b_csr = a_csr if same else step("csr", lambda: side.csr(b))
    if big_a is None or a_csr is None or b_csr is None:
        return out
    big_b = big_a if same else step("conversion_b", lambda: side.bitmap_from_csr(b_csr))
    if big_b is None:
        return out
    out["usage"] = big_a.memory_usage()
    out["nblocks"] = big_a.nblocks
    if full:
        out["conversion_csr"] = step("conversion_csr", lambda: common.time_call(
            lambda: side.bitmap_from_csr(a_csr), clock, repeat=repeat, warmup=warmup))
        out["stages"] = step("stages", lambda: common.time_stages(
            big_a, big_b, clock, repeat=repeat, warmup=warmup))
    kernels = step("spgemm", lambda: common.ours_kernels(
        side, big_a, big_b, repeat=repeat, warmup=warmup, keep=full))
    out["kernels"] = kernels
    if full and kernels is not None:
        c = kernels.result
        kernels.result = None
        out["nnz_c"] = c.nnz
        out["to_csr"] = step("to_csr", lambda: common.time_call(
            lambda: c.tocsr(), clock, repeat=repeat, warmup=warmup))
        out["c"] = step("to_host", lambda: side.to_host(c))
        c = None
    big_a = big_b = None
    common.free_memory()
    out["end_to_end"] = step("end_to_end", lambda: common.ours_end_to_end(
        side, a_csr, b_csr, repeat=repeat, warmup=warmup))
    common.free_memory()
    return out


def _ms(x: Any) -> float | None:
    if x is None:
        return None
    timing = getattr(x, "timing", x)
    return timing.ms


# --- main ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("webbase.py: error: --plot needs matplotlib, which is not installed "
                  "(pip install matplotlib)", file=sys.stderr)
            return 2
    device = common.detect_device(force_cpu=args.cpu)
    scale = args.scale if args.scale is not None else (1.0 if device.gpu else CPU_SCALE)
    try:
        inp = load_input(args, scale)
    except common.UserError as exc:
        print(f"webbase.py: error: {exc}", file=sys.stderr)
        return 1
    a: sp.csr_array = inp["a"]
    label = inp["label"]
    report = common.Report(label)
    dtype = np.dtype(args.dtype)
    square = a.shape[0] == a.shape[1]
    b = a if square else common.canonical_csr(a.T)
    op = "A @ A" if square else "A @ A.T"
    side = common.Side(device)
    repeat, warmup = args.repeat, args.warmup

    report.line(f"bmsparse WebBase-1M benchmark: C = {op}, {dtype.name}, input "
                f"{inp['source']}")
    if device.gpu:
        report.line(f"device: {device.name} (CuPy; times from CUDA events, median of {repeat} "
                    f"after {warmup} warm-up runs)")
        pinned = common.pin_host(not args.no_pin)
        if pinned:
            report.line(pinned)
    else:
        why = f" ({device.note})" if device.note else ""
        scale_note = (f"; surrogate at scale {scale:g}"
                      + (" (pass --scale to change)" if args.scale is None else "")
                      if inp["surrogate"] else "")
        report.line(f"CPU path: no GPU{why}; bmsparse runs its NumPy twins on the host "
                    f"against scipy{scale_note}; host clock, median of {repeat} after "
                    f"{warmup} warm-up runs")
    if inp["surrogate"] is False and args.scale is not None:
        report.line("note: --scale applies to the surrogate only; ignored for a file")
    if not square:
        report.line(f"note: the matrix is {a.shape[0]}x{a.shape[1]}, not square: "
                    "computing A @ A.T instead of A @ A")

    # --- the input's figures
    stats = generators.product_stats(a)
    multiplies = common.count_multiplies(a, b)
    if stats.get("multiplies") is None:  # product_stats counts A @ A only
        stats["multiplies"] = multiplies
    published = targets()
    show_targets = inp["surrogate"] or "webbase" in label.lower()
    keys = [("n_rows", "rows", ","), ("n_cols", "columns", ","), ("nnz", "nnz", ","),
            ("blocks", "blocks (8x8)", ","), ("nnz_per_block", "nnz per block", ".2f"),
            ("max_row_nnz", "max nnz in a row", ","), ("multiplies", f"multiplies of {op}", ","),
            ("nnz_product", f"nnz({op})", ",")]
    rows = []
    for key, name, spec in keys:
        row = [name, fmt_num(stats.get(key), spec)]
        if show_targets:
            target = published.get(key)
            if inp["surrogate"]:
                if key == "max_row_nnz" or target is None:
                    row.append("-")  # not proportional to the size
                elif key == "nnz_per_block":
                    row.append(fmt_num(target, spec))
                else:
                    row.append(fmt_num(target * scale, ",.0f"))
            row.append(fmt_num(target, spec))
        rows.append(row)
    header = ["input", "achieved" if inp["surrogate"] else "measured"]
    if show_targets:
        header += (["WebBase-1M x scale"] if inp["surrogate"] else []) + ["WebBase-1M"]
    report.line()
    report.table(header, rows, title="The matrix" + (
        " (surrogate vs the published figures of WebBase-1M; max row nnz is approximate)"
        if inp["surrogate"] else ""))

    # --- our side, the --dtype first with the whole breakdown
    free = common.free_memory
    free()
    ours = {dtype.name: measure_ours(side, a, b, repeat=repeat, warmup=warmup, full=True)}
    other = np.dtype(np.float32 if dtype == np.float64 else np.float64)
    if device.gpu:
        a2 = a.astype(other)
        b2 = a2 if square else b.astype(other)
        ours[other.name] = measure_ours(side, a2, b2, repeat=repeat, warmup=warmup, full=False)
        del a2, b2
    main_run = ours[dtype.name]
    c_ours = main_run.pop("c", None)

    # --- Table 1
    table1 = []
    if "usage" in main_run:
        for row in common.footprint(a, main_run["usage"]):
            paper = PAPER_TABLE1.get(row["format"])
            row.update(all_mib=row["all_bytes"] / common.MIB,
                       index_mib=row["index_bytes"] / common.MIB,
                       paper_all_mib=paper[0] if paper else None,
                       paper_index_mib=paper[1] if paper else None)
            table1.append(row)
        report.line()
        report.table(
            ["format", "all MiB", "index MiB", "paper all", "paper index", "arrays counted"],
            [[r["format"], fmt_mib(r["all_bytes"]), fmt_mib(r["index_bytes"]),
              "-" if r["paper_all_mib"] is None else f"{r['paper_all_mib']:.2f}",
              "-" if r["paper_index_mib"] is None else f"{r['paper_index_mib']:.2f}",
              r["what"]] for r in table1], left=(0, 5),
            title=f"Table 1: memory footprint of A ({a.dtype.name} values; the paper's "
                  "figures are for the real WebBase-1M, float64)")

    # --- Table 2
    stage_t = main_run.get("stages") or {}
    stages: dict[str, float | None] = {
        "transfer": _ms(main_run.get("transfer")),
        "conversion": _ms(main_run.get("conversion"))}
    for s in STAGES:
        stages[s] = stage_t[s].ms if s in stage_t else None
    four = [stages[s] for s in STAGES]
    stages["total"] = sum(four) if all(v is not None for v in four) else None
    extra = {k: _ms(main_run.get(k)) for k in EXTRA_NAMES if k != "spgemm_call"}
    extra["spgemm_call"] = _ms(main_run.get("kernels"))
    extra = {k: extra[k] for k in EXTRA_NAMES}
    rows = [[STAGE_NAMES[k], fmt_ms(v) if v is not None or device.gpu or k != "transfer"
             else "n/a (host)", fmt_num(PAPER_TABLE2.get(k), ".3f")] for k, v in stages.items()]
    extra_names = dict(EXTRA_NAMES)
    if not device.gpu:
        extra_names["conversion_csr"] = "CSR -> bitmap (from_scipy)"
    rows += [[extra_names[k], fmt_ms(v) if v is not None or device.gpu or k != "transfer_csr"
              else "n/a (host)", "-"] for k, v in extra.items()]
    report.line()
    report.table(["step", "ours ms", "paper ms (GTX Titan)"], rows,
                 title=f"Table 2: runtime breakdown, {dtype.name} (median of {repeat}"
                       f"{', CUDA events' if device.gpu else ', host clock, NumPy twins'})")

    # --- peers
    peers: list[common.PeerRun] = []
    keep_dtype = dtype.name
    for name, peer in (("cuSPARSE", common.peer_cusparse), ("torch.sparse", common.peer_torch)):
        for dt in ("float32", "float64"):
            peers.append(peer(a, b, dt, repeat=repeat, warmup=warmup, keep=dt == keep_dtype)
                         if device.gpu else
                         common.PeerRun(name, dt, error="no CUDA device (CPU path)"))
    if args.no_scipy:
        peers.append(common.PeerRun("scipy", dtype.name, memory="host",
                                    error="skipped (--no-scipy)"))
    else:
        s_repeat = min(repeat, SCIPY_REPEAT_ON_GPU) if device.gpu else repeat
        s_warmup = min(warmup, 1) if device.gpu else warmup
        peers.append(common.peer_scipy(a, b, dtype, repeat=s_repeat, warmup=s_warmup,
                                       keep=True))

    # --- comparison
    comparison = []
    memory_kind = "device" if device.gpu else "host"
    for dt, run in ours.items():
        for mode, key in (("kernels only (bmp -> bmp)", "kernels"),
                          ("end to end (CSR -> CSR)", "end_to_end")):
            got = run.get(key)
            error = run["errors"].get("spgemm" if key == "kernels" else key)
            comparison.append({
                "impl": "bmsparse", "mode": mode, "dtype": dt, "ms": _ms(got),
                "gflops": common.gflops(multiplies, _ms(got)),
                "peak_bytes": got.peak_bytes if got is not None else None,
                "peak_memory": memory_kind, "error": error})
    for peer in peers:
        row = peer.as_dict(multiplies)
        mine = ours.get(peer.dtype)
        row["mode"] = "CSR @ CSR" + (f" ({peer.note})" if peer.note else "")
        row["speedup_kernels"] = common.speedup(peer.ms, _ms(mine.get("kernels")) if mine
                                                else None)
        row["speedup_end_to_end"] = common.speedup(peer.ms, _ms(mine.get("end_to_end"))
                                                   if mine else None)
        comparison.append(row)
    rows = []
    for r in comparison:
        name = f"{r['impl']} {r['mode']}"
        if r["ms"] is None:
            rows.append([name, r["dtype"], "n/a", "", "", "", "",
                         f"n/a: {r.get('error') or 'not measured'}"])
            continue
        peak = fmt_mib(r["peak_bytes"]) + (" (host)" if r["peak_memory"] == "host"
                                           and device.gpu else "")
        ours_row = r["impl"] == "bmsparse"
        rows.append([name, r["dtype"], fmt_ms(r["ms"]), fmt_num(r["gflops"], ".2f"), peak,
                     "" if ours_row else fmt_x(r.get("speedup_kernels")),
                     "" if ours_row else fmt_x(r.get("speedup_end_to_end")),
                     r.get("error") or ""])
    report.line()
    report.table(["implementation", "dtype", "time ms", "GFLOP/s", "peak MiB",
                  "speedup kernels", "speedup e2e", "note"], rows, left=(0, 1, 7),
                 title=f"Comparison: C = {op}, {multiplies:,} multiplies, GFLOP/s = "
                       "2 x multiplies / time; peak = memory above the inputs, output "
                       "included; speedup = their time / ours (same dtype)")

    # --- correctness
    checks = []
    report.line()
    if c_ours is None:
        report.line("Correctness: no C of ours to check (see the errors above)")
    else:
        report.line(f"Correctness of our C ({dtype.name}, nnz {c_ours.nnz:,}):")
        for peer in peers:
            if peer.result is None:
                continue
            check = common.check_product(c_ours, peer.result, dtype)
            check["against"] = f"{peer.impl} {peer.dtype}"
            checks.append(check)
            report.line(f"  vs {check['against']}: {common.describe_check(check)}")
            peer.result = None
        if not checks:
            report.line("  no peer produced a C to compare with")

    errors = {dt: run["errors"] for dt, run in ours.items() if run["errors"]}
    for dt, errs in errors.items():
        for name, why in errs.items():
            report.line(f"error: bmsparse {dt} {name}: {why}")

    result = {
        "script": "webbase.py", "argv": sys.argv[1:] if argv is None else argv,
        "label": label, "device": device.describe(),
        "settings": {"repeat": repeat, "warmup": warmup, "dtype": dtype.name},
        "matrix": {"label": label, "surrogate": inp["surrogate"], "source": inp["source"],
                   "scale": inp["scale"], "dtype": dtype.name, "operation": op,
                   "stats": stats, "nblocks": main_run.get("nblocks"),
                   "nnz_product": main_run.get("nnz_c"),
                   "targets": published if show_targets else None},
        "table1": {"unit": "MiB", "rows": table1},
        "table2": {"unit": "ms", "dtype": dtype.name, "stages": stages, "extra": extra,
                   "paper": PAPER_TABLE2,
                   "samples": {s: stage_t[s].samples for s in stage_t}},
        "comparison": comparison,
        "correctness": checks,
        "errors": errors,
    }
    if args.json:
        common.write_json(args.json, result)
        report.line(f"wrote {args.json}")
    if args.plot:
        _, plot_error = common.attempt("plot", lambda: plot(args.plot, result))
        if plot_error is None:
            report.line(f"wrote {args.plot}")
        else:
            report.line(f"plot failed: {plot_error}")
    failed = bool(errors) or any(not c["match"] for c in checks)
    return 1 if failed else 0


def plot(path: str, result: dict[str, Any]) -> None:
    """The runtime breakdown beside the paper's, and the time of every implementation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    label = result["label"]
    stages = result["table2"]["stages"]
    names = [k for k in ("transfer", "conversion", *STAGES) if stages.get(k) is not None]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    y = np.arange(len(names))
    left.barh(y - 0.2, [stages[k] for k in names], height=0.4, label=f"ours ({label})")
    left.barh(y + 0.2, [PAPER_TABLE2.get(k, 0.0) for k in names], height=0.4,
              label="paper (GTX Titan)")
    left.set_yticks(y, [STAGE_NAMES[k] for k in names])
    left.invert_yaxis()
    left.set_xlabel("ms")
    left.set_title(f"Runtime breakdown, {result['table2']['dtype']}")
    left.legend()
    rows = [r for r in result["comparison"] if r.get("ms")]
    y = np.arange(len(rows))
    colors = ["tab:blue" if r["impl"] == "bmsparse" else "tab:gray" for r in rows]
    right.barh(y, [r["ms"] for r in rows], color=colors)
    right.set_yticks(y, [f"{r['impl']} {r['mode'].split(' (')[0]} {r['dtype']}" for r in rows])
    right.invert_yaxis()
    right.set_xscale("log")
    if rows:
        right.set_xlim(left=min(r["ms"] for r in rows) / 2)
    right.set_xlabel("ms (log scale)")
    right.set_title(f"C = {result['matrix']['operation']} on {label}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
