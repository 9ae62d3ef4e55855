"""Data-parallel primitives shared by the stages, on NumPy or CuPy arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _kernels

_KERNELS = "_primitives.cu"
_kernels.register(_KERNELS, {"bmsparse_scan_inclusive": ()})

#: arrays up to this length are scanned by one thread block in one launch
SMALL_SCAN = 1 << 16
_SCAN_THREADS = 1024


def cumsum(xp: Any, a: Any) -> Any:
    """Inclusive scan of an int64 array (one launch for small device arrays)."""
    if xp is np or a.shape[0] > SMALL_SCAN or a.dtype != np.int64:
        return xp.cumsum(a)
    out = xp.empty_like(a)
    _scan_into(a, out)
    return out


def _scan_into(a: Any, out: Any) -> None:
    n = a.shape[0]
    if n == 0:
        return
    kernel = _kernels.get_kernel(_KERNELS, "bmsparse_scan_inclusive")
    args = (a, np.int64(n), out)
    if _kernels.launch_hook is not None:
        _kernels.launch_hook(kernel.name, n, 1, _SCAN_THREADS)
    kernel((1,), (_SCAN_THREADS,), args)


def stable_argsort(xp: Any, a: Any) -> Any:
    """Stable sorting permutation of ``a``, int64 (CuPy's argsort is stable)."""
    if xp is np:
        return np.argsort(a, kind="stable")
    return a.argsort().astype(xp.int64, copy=False)


def run_starts(xp: Any, columns: tuple[Any, ...]) -> Any:
    """Boundaries, int64 [nruns + 1], of the runs of equal rows of sorted ``columns``.

    Syncs on the GPU (the number of runs sizes the result).
    """
    n = columns[0].shape[0]
    if n == 0:
        return xp.zeros(1, dtype=xp.int64)
    change = xp.zeros(n, dtype=bool)
    change[0] = True
    for col in columns:
        change[1:] |= col[1:] != col[:-1]
    starts = xp.flatnonzero(change)  # sync: number of runs
    return xp.concatenate([starts, xp.asarray([n])]).astype(xp.int64, copy=False)


def exclusive_scan(xp: Any, counts: Any) -> Any:
    """Offsets, int64 [n + 1]: ``[0, counts[0], counts[0] + counts[1], ...]``."""
    out = xp.zeros(counts.shape[0] + 1, dtype=xp.int64)
    if xp is np or counts.shape[0] > SMALL_SCAN or counts.dtype != np.int64:
        xp.cumsum(counts, out=out[1:])
    else:
        _scan_into(counts, out[1:])
    return out
