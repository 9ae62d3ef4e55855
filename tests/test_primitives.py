"""The scans and sorts of ``_primitives`` against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse import _primitives

# one block (<= SMALL_SCAN) and spans of SCAN_SPAN above it, around the boundaries
SIZES = [1, 31, 4095, 1 << 16, (1 << 16) + 1, 4096 * 7, 4096 * 7 + 1, 8192 * 9, 8192 * 9 + 1,
         1_000_003]


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
@pytest.mark.parametrize("n", [0, 1, 64, 65, 127, 128, 129, 64 * 100, 64 * 128, 64 * 128 + 1,
                               20_000])
def test_scan_paths_at_their_limits(n, monkeypatch):
    # with one-block scans of up to 64 and spans of 100: one launch up to 64,
    # three up to 64 spans (6,400), CuPy's cumsum beyond
    import cupy

    monkeypatch.setattr(_primitives, "SMALL_SCAN", 64)
    monkeypatch.setattr(_primitives, "SCAN_SPAN", 100)
    values = np.random.default_rng(n).integers(-1 << 40, 1 << 40, n).astype(np.int64)
    got = _primitives.cumsum(cupy, cupy.asarray(values))
    np.testing.assert_array_equal(got.get(), np.cumsum(values))
    got = _primitives.exclusive_scan(cupy, cupy.asarray(values))
    np.testing.assert_array_equal(got.get(), np.concatenate([[0], np.cumsum(values)]))


@pytest.mark.gpu
def test_scan_in_place():
    import cupy

    values = np.arange(200_000, dtype=np.int64) % 7
    a = cupy.asarray(values)
    _primitives._scan_into(a, a)
    np.testing.assert_array_equal(a.get(), np.cumsum(values))


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
