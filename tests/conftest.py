"""Shared fixtures: the array-module switch and the matrix corpus."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from bmsparse._sputils import cupy_available

HAVE_GPU = cupy_available()


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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
