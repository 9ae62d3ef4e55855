"""Shared fixtures: the array-module switch and the matrix corpus."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np
import pytest

from bmsparse._sputils import cupy_available

HAVE_GPU = cupy_available()


def pytest_collection_modifyitems(config, items):
    _keep_shard(config, items)
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _keep_shard(config, items) -> None:
    """Keep the i-th of n shards when ``BMSPARSE_SHARD=i/n`` is set.

    Slow runs (the GPU suite under compute-sanitizer) are split into n
    processes that run side by side. A test's shard is a hash of its id:
    taking every n-th test put the slow parameter of each pair in one shard.
    """
    shard = os.environ.get("BMSPARSE_SHARD")
    if not shard:
        return
    try:
        index, count = (int(part) for part in shard.split("/"))
    except ValueError:
        raise pytest.UsageError(f"BMSPARSE_SHARD must look like 'i/n', got {shard!r}") from None
    if not 0 <= index < count:
        raise pytest.UsageError(f"BMSPARSE_SHARD={shard!r}: need 0 <= i < n")
    mine = [zlib.crc32(item.nodeid.encode()) % count == index for item in items]
    kept = [item for item, keep in zip(items, mine) if keep]
    dropped = [item for item, keep in zip(items, mine) if not keep]
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept


@pytest.fixture(params=["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
def xp(request):
    """numpy or cupy: one test body checks both twins."""
    if request.param == "numpy":
        return np
    import cupy

    return cupy


def matrices_dir() -> Path | None:
    """The shared matrix corpus, or None when it is absent."""
    env = os.environ.get("BMSPARSE_MATRICES")
    path = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "matrices"
    return path if path.is_dir() else None
