"""The scans and sorts of ``_primitives`` against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse import _primitives

# one block (<= SMALL_SCAN) and CuPy's scan above it, around the boundaries
SIZES = [1, 31, 4095, 1 << 16, (1 << 16) + 1, 4096 * 7, 4096 * 7 + 1, 1_000_003]


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", ["random", "ones", "zeros", "large"])
def test_cumsum_matches_numpy(n, kind):
    import cupy

    rng = np.random.default_rng(n)
    values = {"random": rng.integers(0, 100, n), "ones": np.ones(n, np.int64),
              "zeros": np.zeros(n, np.int64),
              "large": rng.integers(0, 1 << 40, n)}[kind].astype(np.int64)
    got = _primitives.cumsum(cupy, cupy.asarray(values))
    np.testing.assert_array_equal(got.get(), np.cumsum(values))


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
def test_exclusive_scan_matches_numpy(n):
    import cupy

    values = np.random.default_rng(n).integers(0, 64, n).astype(np.int64)
    got = _primitives.exclusive_scan(cupy, cupy.asarray(values))
    np.testing.assert_array_equal(got.get(), np.concatenate([[0], np.cumsum(values)]))


@pytest.mark.parametrize("n", [0, 1, 5])
def test_cumsum_on_the_host_is_numpy_s(n):
    values = np.arange(n, dtype=np.int64)
    np.testing.assert_array_equal(_primitives.cumsum(np, values), np.cumsum(values))
