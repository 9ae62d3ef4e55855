"""The lean path of spgemm (``spgemm/lean.py``): the dense path in one launch,
bit for bit the dense path's C, and scipy's."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix, spgemm
from bmsparse.semiring import get_semiring
from bmsparse.spgemm import lean, rowdense, rowscalar, strategy
from tests.helpers import assert_same_csr, cancelling, random_csr, scipy_product


@pytest.fixture(autouse=True)
def without_scalar_rows(monkeypatch):
    """Products here leave the lean path for the dense one, not the scalar rows."""
    monkeypatch.setattr(rowscalar, "MAX_ENTRIES_PER_BLOCK", -1)


def product_pair(a: BitmapMatrix, b: BitmapMatrix, monkeypatch, **kw):
    """C by the lean path and by the dense path."""
    assert strategy(a, b) == "lean"
    got = spgemm(a, b, **kw)
    with monkeypatch.context() as m:
        m.setattr(lean, "MAX_BLOCKS", -1)
        assert strategy(a, b) == "dense"
        want = spgemm(a, b, **kw)
    return got, want


def assert_identical(got: BitmapMatrix, want: BitmapMatrix) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype and got.nnz == want.nnz
    for field in ("keys", "bitmaps", "offsets", "values"):
        g, w = getattr(got, field), getattr(want, field)
        np.testing.assert_array_equal(g.get() if hasattr(g, "get") else g,
                                      w.get() if hasattr(w, "get") else w)
    got.check_format(full_check=True)


def test_host_runs_the_twins():
    a_csr = cancelling(40, seed=1)
    a = BitmapMatrix(a_csr)
    assert not lean.chooses(a, a)  # on the GPU only
    c = lean.product(a, a, get_semiring("plus_times"), np.dtype(np.float64), True)
    assert_same_csr(c.to_scipy(), scipy_product(a_csr, a_csr))
    kept = lean.product(a, a, get_semiring("plus_times"), np.dtype(np.float64), False)
    assert kept.nnz > c.nnz


# --- on the GPU --------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(8))
def test_random_products_are_the_dense_paths(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    m, k, n = (int(v) for v in rng.integers(1, 500, 3))
    a_csr = random_csr(m, k, float(rng.uniform(0.002, 0.1)), seed=seed)
    b_csr = random_csr(k, n, float(rng.uniform(0.002, 0.1)), seed=seed + 50)
    a, b = BitmapMatrix(a_csr).to_device(), BitmapMatrix(b_csr).to_device()
    got, want = product_pair(a, b, monkeypatch)
    assert_identical(got, want)
    assert_same_csr(got.to_scipy(), scipy_product(a_csr, b_csr))


@pytest.mark.gpu
@pytest.mark.parametrize("keep_zeros", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128, np.int64])
def test_cancellations_are_compacted(dtype, keep_zeros, monkeypatch):
    a_csr = cancelling(120, seed=3).astype(dtype)
    a = BitmapMatrix(a_csr).to_device()
    got, want = product_pair(a, a, monkeypatch, keep_zeros=keep_zeros)
    assert_identical(got, want)
    exact = (a_csr @ a_csr).tocsr()
    exact.sum_duplicates()
    if keep_zeros:
        assert got.nnz > np.count_nonzero(exact.data)
    else:
        assert_same_csr(got.to_scipy(), scipy_product(a_csr, a_csr))


@pytest.mark.gpu
def test_everything_cancels():
    a = BitmapMatrix(sp.csr_array(np.array([[1.0, 1.0]]))).to_device()
    b = BitmapMatrix(sp.csr_array(np.array([[1.0], [-1.0]]))).to_device()
    assert strategy(a, b) == "lean"
    c = spgemm(a, b)
    assert c.shape == (1, 1) and c.nnz == 0 and c.nblocks == 0
    c.check_format(full_check=True)


@pytest.mark.gpu
@pytest.mark.parametrize("semiring,dtype", [("min_plus", np.float64), ("max_times", np.float32),
                                            ("plus_pair", np.int64), ("plus_pair", np.int32)])
def test_other_semirings_are_the_dense_paths(semiring, dtype, monkeypatch):
    a_csr = random_csr(300, 280, 0.03, seed=11)
    b_csr = random_csr(280, 310, 0.03, seed=12)
    a, b = BitmapMatrix(a_csr).to_device(), BitmapMatrix(b_csr).to_device()
    got, want = product_pair(a, b, monkeypatch, semiring=semiring, dtype=dtype)
    assert_identical(got, want)


@pytest.mark.gpu
def test_structural_products_take_the_dense_path(monkeypatch):
    a_csr = random_csr(100, 100, 0.05, seed=13)
    a = BitmapMatrix(a_csr).to_device()
    launched = []
    monkeypatch.setattr(lean, "product", lambda *args: launched.append(args))
    c = spgemm(a, a, semiring="lor_land")
    assert not launched and c.dtype == np.bool_
    want = scipy_product(a_csr, a_csr)
    assert c.nnz == want.nnz


@pytest.mark.gpu
def test_more_block_rows_than_the_grid(monkeypatch):
    """Thousands of block rows: units, scans and values over many thread
    blocks, each scanning a run of several units."""
    n = 40_000
    a_csr = sp.diags_array([np.full(n - 3, 0.5), np.full(n, 2.0), np.full(n - 5, -1.0)],
                           offsets=[-3, 0, 5], format="csr")
    a = BitmapMatrix(a_csr).to_device()
    got, want = product_pair(a, a, monkeypatch)
    assert_identical(got, want)
    assert_same_csr(got.to_scipy(), scipy_product(a_csr, a_csr))


@pytest.mark.gpu
def test_the_workspace_grows_and_c_owns_its_memory(monkeypatch):
    monkeypatch.setattr(lean._local, "space", None, raising=False)
    monkeypatch.setattr(lean, "_FIRST_WORKSPACE", 1 << 16)
    small = BitmapMatrix(random_csr(50, 50, 0.05, seed=14)).to_device()
    big_csr = random_csr(2000, 2000, 0.01, seed=15)
    big = BitmapMatrix(big_csr).to_device()
    c_small = spgemm(small, small)
    first = lean._local.space.capacity
    want_small = c_small.to_scipy()
    c_big = spgemm(big, big)  # needs more than 64 KiB: a second launch
    assert lean._local.space.capacity > first
    assert_same_csr(c_big.to_scipy(), scipy_product(big_csr, big_csr))
    spgemm(big, big)  # overwrites the workspace: C's are copies
    assert_same_csr(c_small.to_scipy(), want_small)
    assert_same_csr(c_big.to_scipy(), scipy_product(big_csr, big_csr))


@pytest.mark.gpu
def test_beyond_the_workspace_the_dense_path_runs(monkeypatch):
    monkeypatch.setattr(lean._local, "space", None, raising=False)
    monkeypatch.setattr(lean, "MAX_WORKSPACE", 1 << 16)
    a_csr = random_csr(2000, 2000, 0.01, seed=16)
    a = BitmapMatrix(a_csr).to_device()
    assert strategy(a, a) == "lean"
    assert lean.product(a, a, get_semiring("plus_times"), np.dtype(np.float64), True) is None
    assert strategy(a, a) == "dense"  # remembered: no second count that overflows
    timings = {}
    c = spgemm(a, a, timings=timings)
    assert_same_csr(c.to_scipy(), scipy_product(a_csr, a_csr))
    assert timings["multiply"] > 0  # the dense path's multiply, timed on its own
    b = BitmapMatrix(a_csr).to_device()  # another B: tried again
    assert strategy(a, b) == "lean"


@pytest.mark.gpu
def test_timings_count_the_launch_as_the_count_stage():
    a = BitmapMatrix(random_csr(200, 200, 0.05, seed=17)).to_device()
    timings = {}
    spgemm(a, a, timings=timings)
    assert set(timings) == {"tasks", "count", "multiply", "compact", "slices"}
    assert timings["count"] > 0 and timings["slices"] == 1


@pytest.mark.gpu
def test_large_operands_do_not_take_it(monkeypatch):
    a = BitmapMatrix(random_csr(200, 200, 0.05, seed=18)).to_device()
    assert strategy(a, a) == "lean"
    monkeypatch.setattr(lean, "MAX_BLOCKS", a.nblocks - 1)
    assert strategy(a, a) == "dense"
    monkeypatch.setattr(lean, "MAX_BLOCKS", a.nblocks)
    monkeypatch.setattr(rowdense, "MAX_COLUMNS", 1)
    assert strategy(a, a) != "lean"


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(0, 0, 0), (0, 5, 3)])
def test_a_product_of_no_rows_is_left_to_another_path(shape):
    # chooses() never takes one; called anyway, the kernels (which write C's
    # last offset from a block row) left an unwritten offset: a C whose
    # offsets[0] was whatever the pool held (a later tocsr read far out of
    # bounds)
    import cupy

    m, k, n = shape
    garbage = cupy.full(1 << 20, 0x7F, dtype=cupy.uint8)
    del garbage
    a = BitmapMatrix(sp.csr_array((m, k))).to_device()
    b = BitmapMatrix(sp.csr_array((k, n))).to_device()
    assert not lean.chooses(a, b)
    assert lean.product(a, b, get_semiring("plus_times"), np.dtype(np.float64), True) is None
