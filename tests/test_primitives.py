"""The scans and sorts of ``_primitives`` against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse import _primitives

# one tile, around the tile boundaries (2048 elements), more tiles than a
# look-back window (32) and far more
SIZES = [1, 31, 2047, 2048, 2049, 4096 * 7 + 1, 2048 * 33 + 5, 1 << 16, 1_000_003, 6_000_011]


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


@pytest.mark.parametrize("device", [False, pytest.param(True, marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 8191, 8192, 8193, 3 * 8192 + 17, 100_003,
                               1_000_000])
def test_exclusive_scan_of_bytes(device, dtype, n):
    xp = __import__("cupy") if device else np
    values = np.random.default_rng(n).integers(0, 256, n).astype(np.uint8)
    got = _primitives.exclusive_scan_bytes(xp, xp.asarray(values), dtype)
    assert got.dtype == dtype and got.shape == (n + 1,)
    want = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    np.testing.assert_array_equal(got.get() if device else got, want)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_cumsum_on_the_host_is_numpy_s(n):
    values = np.arange(n, dtype=np.int64)
    np.testing.assert_array_equal(_primitives.cumsum(np, values), np.cumsum(values))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [5, 2048 * 40 + 3])
def test_scan_in_place(n):
    import cupy

    values = np.random.default_rng(n).integers(-50, 100, n).astype(np.int64)
    x = cupy.asarray(values)
    _primitives._scan_into(x, x)
    np.testing.assert_array_equal(x.get(), np.cumsum(values))


@pytest.mark.parametrize("device", [False, pytest.param(True, marks=pytest.mark.gpu)])
@pytest.mark.parametrize("n, every", [(0, 1), (1, 1), (7, 3), (3 * 2049, 2049),
                                      (3 * 40_000, 40_000), (100_003, 7), (5, 6)])
def test_scan_totals_reports_every_prefix(device, n, every):
    xp = __import__("cupy") if device else np
    values = np.random.default_rng(n + every).integers(0, 1 << 30, n).astype(np.int64)
    want = np.concatenate([[0], np.cumsum(values)])
    scan, totals = _primitives.scan_totals(xp, xp.asarray(values), every)
    np.testing.assert_array_equal(scan.get() if device else scan, want)
    assert totals == want[every::every][:n // every].tolist()


@pytest.mark.gpu
def test_scan_totals_without_mapped_host_memory(monkeypatch):
    """Where kernels cannot write host memory the totals are copied back."""
    import cupy

    from bmsparse import _readback

    monkeypatch.setattr(_readback, "host_words", lambda nwords: None)
    values = np.arange(1, 10, dtype=np.int64)
    scan, totals = _primitives.scan_totals(cupy, cupy.asarray(values), 3)
    assert totals == [6, 21, 45]
    np.testing.assert_array_equal(scan.get(), np.concatenate([[0], np.cumsum(values)]))


def random_pieces(n, seed):
    """Pieces sorted by key: 1-4 pieces a key, rows of one block split among
    them (disjoint bits), some empty, and the runs each piece's values take."""
    rng = np.random.default_rng(seed)
    keys, bitmaps = [], []
    for key in np.unique(rng.integers(0, 4 * n + 1, n).astype(np.uint64) << np.uint64(3)):
        full = int(rng.integers(0, 1 << 63)) | (1 << int(rng.integers(0, 64)))
        if rng.random() < 0.1:
            full = 0  # a key whose pieces are all empty
        cuts = sorted(int(c) for c in rng.choice(np.arange(1, 8), int(rng.integers(0, 4)),
                                                  replace=False))
        for lo, hi in zip([0, *cuts], [*cuts, 8]):
            keys.append(key)
            bitmaps.append(full & ((1 << (8 * hi)) - 1) & ~((1 << (8 * lo)) - 1))
    return np.array(keys, dtype=np.uint64), np.array(bitmaps, dtype=np.uint64)


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_merge_pieces_unions_each_key(xp, n):
    keys, bitmaps = random_pieces(n, n)
    got_keys, got_bitmaps = _primitives.merge_pieces(xp, xp.asarray(keys), xp.asarray(bitmaps))
    unions = {}
    for k, b in zip(keys.tolist(), bitmaps.tolist()):
        unions[k] = unions.get(k, 0) | b
    want = sorted((k, b) for k, b in unions.items() if b)
    got = list(zip(np.asarray(got_keys.tolist(), dtype=np.uint64).tolist(),
                   np.asarray(got_bitmaps.tolist(), dtype=np.uint64).tolist()))
    assert got == want


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int32])
@pytest.mark.parametrize("n", [0, 1, 1000])
def test_move_runs_puts_the_runs_in_turn(xp, n, dtype):
    rng = np.random.default_rng(n)
    values = (rng.standard_normal(5 * n + 3) * 100).astype(dtype)
    counts = rng.integers(0, 9, n)
    starts = np.array([rng.integers(0, values.shape[0] - c + 1) for c in counts], dtype=np.int64)
    want = np.concatenate([values[s:s + c] for s, c in zip(starts, counts)] + [values[:0]])
    for total in (None, int(counts.sum())):
        got = _primitives.move_runs(xp, xp.asarray(values), xp.asarray(starts),
                                    xp.asarray(counts), total)
        np.testing.assert_array_equal(got.get() if xp is not np else got, want)
