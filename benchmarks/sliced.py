"""Memory-bounded SpGEMM: A @ A in slices of A's block rows under a memory cap.

Squares the WebBase-1M surrogate (or ``--matrix``) once unsliced and once
with ``max_memory`` set to a fraction of what the unsliced product needs,
checks that both results are bit for bit equal, and prints the slice count,
the times and the peak memory of each (GPU; the CPU path runs at a reduced
scale).

    python benchmarks/sliced.py [--fraction 0.1] [--scale 1.0] [--output host] [--cpu]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import numpy as np  # noqa: E402

from bmsparse import BitmapMatrix, generators, spgemm  # noqa: E402
from bmsparse._readers import read_matrix  # noqa: E402
from bmsparse._sputils import cupy_available  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", help="a matrix file instead of the surrogate")
    parser.add_argument("--scale", type=float, default=None,
                        help="surrogate scale (default 1 on a GPU, 0.01 on the CPU)")
    parser.add_argument("--fraction", type=float, default=0.1,
                        help="max_memory as a fraction of the unsliced peak (default 0.1)")
    parser.add_argument("--output", choices=("device", "host"), default="device")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpu", action="store_true", help="run the CPU path even with a GPU")
    args = parser.parse_args(argv)
    common.check_timing_args(parser, args)
    if not (math.isfinite(args.fraction) and args.fraction > 0):
        parser.error(f"--fraction must be positive, got {args.fraction}")
    gpu = cupy_available() and not args.cpu
    scale = args.scale if args.scale is not None else (1.0 if gpu else 0.01)
    label = args.matrix or f"surrogate (scale {scale})"
    try:
        a = read_matrix(args.matrix) if args.matrix else generators.webbase_surrogate(scale)
    except (OSError, ValueError) as exc:
        print(f"sliced.py: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    m = BitmapMatrix.from_scipy(a, device=gpu) if gpu else BitmapMatrix(a)
    # A @ A.T for a rectangular A, as the other scripts
    b, product = (m, "A @ A") if m.shape[0] == m.shape[1] else (m.T, "A @ A.T")
    clock = common.Clock("cupy" if gpu else "host")
    memory = "cupy" if gpu else "host"

    whole = common.measure(lambda: spgemm(m, b), clock, memory, repeat=args.repeat,
                           warmup=1, keep=True)
    budget = max(int(whole.peak_bytes * args.fraction), 1)
    info: dict[str, float] = {}
    try:
        sliced = common.measure(lambda: spgemm(m, b, max_memory=budget, output=args.output,
                                               timings=info),
                                clock, memory, repeat=args.repeat, warmup=1, keep=True)
    except MemoryError as exc:  # one block row needs more than the budget
        print(f"sliced.py: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    same = _same_bits(whole.result, sliced.result)
    print(f"{label}: {product} on {'the GPU' if gpu else 'the CPU'}, "
          f"nnz(C) = {whole.result.nnz:,}")
    print(f"  unsliced: {whole.timing.ms:9.3f} ms, peak {whole.peak_bytes / 2**20:9.1f} MiB")
    print(f"  max_memory = {args.fraction:g} x that peak = {budget / 2**20:.1f} MiB "
          f"(output: {args.output if gpu else 'host'})")
    print(f"  sliced:   {sliced.timing.ms:9.3f} ms, peak {sliced.peak_bytes / 2**20:9.1f} MiB, "
          f"{int(info['slices'])} slices")
    print(f"  sliced result bit for bit equal to the unsliced one: {same}")
    return 0 if same else 1


def _same_bits(x: BitmapMatrix, y: BitmapMatrix) -> bool:
    x, y = x.get(), y.get()
    return (x.shape == y.shape and np.array_equal(x.keys, y.keys)
            and np.array_equal(x.bitmaps, y.bitmaps) and np.array_equal(x.offsets, y.offsets)
            and np.array_equal(x.values.view(np.uint8), y.values.view(np.uint8)))


if __name__ == "__main__":
    raise SystemExit(main())
