"""The dense-accumulator strategy of spgemm (``spgemm/rowdense.py``) against
its NumPy twin (the row merge's), scipy and the task list, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix, spgemm
from bmsparse.spgemm import lean, rowdense, rowmerge, rowscalar, strategy
from tests.helpers import assert_same_csr, random_csr, scipy_product
from tests.spgemm.test_rowmerge import (FIELDS, assert_same_merged, brute_pairs,
                                        random_operands, twin_on_host, with_row_of)


@pytest.fixture(autouse=True, params=["every column", "touched columns", "masked ranks"])
def dense_path_without_lean(request, monkeypatch):
    """spgemm here runs the dense path itself, not its one-launch form nor
    the scalar rows; each test with each form of its kernels (passes over
    every column of a unit's accumulator or over its touched ones; pairs
    ranked by comparisons or by masks of A blocks)."""
    monkeypatch.setattr(lean, "MAX_BLOCKS", -1)
    monkeypatch.setattr(rowscalar, "MAX_ENTRIES_PER_BLOCK", -1)
    monkeypatch.setattr(rowdense, "TOUCHED_COLUMNS_PER_PAIR",
                        0 if request.param == "touched columns" else float("inf"))
    monkeypatch.setattr(rowdense, "MASK_BYTES", 1 << 62 if request.param == "masked ranks" else 0)


def test_touched_kernels_for_few_pairs_per_column(monkeypatch):
    """The rule: columns of a unit against the pairs it is expected to have."""
    monkeypatch.setattr(rowdense, "TOUCHED_COLUMNS_PER_PAIR", 8)
    # 800 block rows of about 2 blocks each: ~4 pairs per row, 800 columns
    sparse = BitmapMatrix(random_csr(6400, 6400, 4e-5, seed=4))
    assert 1.5 < sparse.nblocks / 800 < 2.5
    assert rowdense.touched(sparse, sparse, 1, 800)
    assert not rowdense.touched(sparse, sparse, 1, 16)
    # a row cut into parts has fewer pairs per unit
    assert rowdense.touched(sparse, sparse, 40, 20)
    dense = BitmapMatrix(random_csr(800, 800, 0.2, seed=5))  # every block of 100 x 100
    assert not rowdense.touched(dense, dense, 1, 100)


def test_a_units_pairs_fit_the_packed_scan():
    # the blocks kernel packs a column's block, values and pairs in one word
    # (rowdense.cuh, rd_column_item): blocks below 2^16, values below 2^22,
    # pairs below 2^25 a unit
    assert rowdense.SPAN < 1 << 16 and 64 * rowdense.SPAN < 1 << 22
    assert rowdense.MAX_ROW_BLOCKS * rowdense.SPAN < 1 << 25


def test_shared_bytes():
    assert rowdense.shared_bytes(1) == 12
    assert rowdense.shared_bytes(1, True) == 16
    assert rowdense.shared_bytes(32, True) == 12 * 32 + 4
    assert rowdense.shared_bytes(33, True) == 12 * 33 + 8
    assert rowdense.shared_bytes(10, masks=3) == 12 * 10 + 4 * 3 * 10


def test_mask_words(monkeypatch):
    monkeypatch.setattr(rowdense, "MASK_BYTES", 4 * 3 * 100)
    a = BitmapMatrix(with_row_of(65, seed=1))  # a row of 65 blocks: 3 words
    assert rowdense.mask_words(a, 100) == 3
    assert rowdense.mask_words(a, 101) == 0
    assert rowdense.mask_words(BitmapMatrix(with_row_of(64, seed=1)), 100) == 2


@pytest.mark.parametrize("nbcols,want", [
    (0, (1, 1)), (1, (1, 1)), (4096, (1, 4096)), (4097, (2, 2049)), (12_000, (3, 4000))])
def test_column_units(nbcols, want, monkeypatch):
    monkeypatch.setattr(rowdense, "SPAN", 4096)
    assert rowdense.column_units(nbcols) == want


def test_host_runs_the_twin_and_never_chooses_it():
    a_csr, b_csr = random_csr(90, 70, 0.05, seed=1), random_csr(70, 50, 0.05, seed=2)
    a, b = BitmapMatrix(a_csr), BitmapMatrix(b_csr)
    assert not rowdense.chooses(a, b)
    assert strategy(a, b) == "tasks"
    got, want = rowdense.accumulate(a, b), rowmerge.merge(a, b)
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
    owner = np.repeat(np.arange(got.c_keys.shape[0]), np.diff(got.c_ptr))
    found = sorted(zip((got.c_keys[owner] >> np.uint64(32)).tolist(),
                       (got.c_keys[owner] & np.uint64(0xFFFFFFFF)).tolist(),
                       got.task_a.tolist(), got.task_b.tolist()))
    assert found == brute_pairs(a, b)


# --- on the GPU --------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("nblocks", [1, 7, 8, 9, 16, 17, 33, 130, 600, 1024])
def test_row_lengths_around_the_warps(nblocks):
    """A block row of 1 to 1,024 A blocks, one per warp up to 128 per warp:
    the kernels give the twin's arrays, and C is scipy's."""
    a_csr = with_row_of(nblocks, seed=nblocks)
    b_csr = random_csr(a_csr.shape[1], 70, 0.05, seed=nblocks + 1)
    a, b = BitmapMatrix(a_csr).to_device(), BitmapMatrix(b_csr).to_device()
    assert strategy(a, b) == "dense"
    assert_same_merged(rowdense.accumulate(a, b), twin_on_host(a, b))
    assert_same_csr(spgemm(a, b).to_scipy(), scipy_product(a_csr, b_csr))


@pytest.mark.gpu
@pytest.mark.parametrize("span", [1, 3, 64, 4096])  # 1 and 3: many units per row
@pytest.mark.parametrize("seed", range(6))
def test_random_products_match_the_twin(seed, span, monkeypatch):
    monkeypatch.setattr(rowdense, "SPAN", span)
    a, b = random_operands(seed)
    pairs = bool(seed % 2)
    assert_same_merged(rowdense.accumulate(a, b, pairs), twin_on_host(a, b, pairs), pairs)


@pytest.mark.gpu
@pytest.mark.parametrize("span", [2, 4096])
def test_long_b_rows_and_a_hub_column(span, monkeypatch):
    """B rows of hundreds of blocks (many lanes' turns) and an A column that
    every row meets: many pairs per output block, from many warps at once."""
    monkeypatch.setattr(rowdense, "SPAN", span)
    rng = np.random.default_rng(3)
    n = 2000
    rows = np.concatenate([rng.integers(0, n, 30_000), np.full(n // 4, 3)])  # a hub row
    cols = np.concatenate([np.where(rng.random(30_000) < 0.2, 5, rng.integers(0, n, 30_000)),
                           4 * np.arange(n // 4)])
    a_csr = sp.csr_array((rng.uniform(-1, 1, rows.shape[0]), (rows, cols)), shape=(n, n))
    a_csr.sum_duplicates()
    a = BitmapMatrix(a_csr).to_device()
    assert a._longest_row() > rowmerge.MAX_ROW_BLOCKS
    assert_same_merged(rowdense.accumulate(a, a), twin_on_host(a, a))
    assert_same_csr(spgemm(a, a).to_scipy(), scipy_product(a_csr, a_csr))


@pytest.mark.gpu
@pytest.mark.parametrize("nblocks", [33, 1024])
def test_one_column_met_by_every_block_of_a_row(nblocks):
    """Every A block of the long row pairs with B's block column 0: one output
    block of ``nblocks`` pairs, ranked among each other, beside short ones."""
    a_csr = with_row_of(nblocks, seed=nblocks + 7)
    k = a_csr.shape[1]
    rng = np.random.default_rng(nblocks)
    rows = np.concatenate([np.arange(k), rng.integers(0, k, 3 * k)])
    cols = np.concatenate([np.arange(k) % 8, rng.integers(8, 200, 3 * k)])
    b_csr = sp.csr_array((rng.uniform(-1, 1, rows.shape[0]), (rows, cols)), shape=(k, 200))
    b_csr.sum_duplicates()
    a, b = BitmapMatrix(a_csr).to_device(), BitmapMatrix(b_csr).to_device()
    assert strategy(a, b) == "dense"
    got = rowdense.accumulate(a, b)
    assert np.diff(got.c_ptr.get()).max() >= nblocks
    assert_same_merged(got, twin_on_host(a, b))
    assert_same_csr(spgemm(a, b).to_scipy(), scipy_product(a_csr, b_csr))


@pytest.mark.gpu
def test_b_without_columns():
    a = BitmapMatrix(random_csr(30, 20, 0.2, seed=4)).to_device()
    b = BitmapMatrix(sp.csr_array((20, 0))).to_device()
    c = rowdense.accumulate(a, b)
    assert c.c_keys.shape == (0,) and c.nnz == 0 and c.c_ptr.get().tolist() == [0]


@pytest.mark.gpu
def test_wide_b_or_long_rows_take_another_path(monkeypatch):
    a = BitmapMatrix(random_csr(64, 64, 0.1, seed=7)).to_device()
    assert strategy(a, a) == "dense"
    monkeypatch.setattr(rowdense, "MAX_COLUMNS", 7)
    assert strategy(a, a) == "merge"
    monkeypatch.setattr(rowdense, "MAX_COLUMNS", 8)
    assert strategy(a, a) == "dense"
    monkeypatch.setattr(rowdense, "MAX_ROW_BLOCKS", a._longest_row() - 1)
    assert strategy(a, a) == "merge"
