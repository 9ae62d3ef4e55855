"""The row-merge strategy of spgemm (``spgemm/rowmerge.py``) against scipy and
against the task-list pipeline, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix, spgemm
from bmsparse.semiring import get_semiring
from bmsparse.spgemm import _FINDERS, _merged, _product, rowdense, rowmerge, slices, tasks
from bmsparse.spgemm.count import bool_product
from tests.helpers import assert_same_csr, random_csr, scipy_product, to_device


@pytest.fixture(autouse=True)
def no_dense_accumulators(monkeypatch):
    """spgemm takes the row merge where it can, not the dense accumulators first."""
    monkeypatch.setattr(rowdense, "MAX_COLUMNS", -1)


def with_row_of(nblocks: int, seed: int) -> sp.csr_array:
    """A 24 x (8 * nblocks) matrix whose block row 1 holds ``nblocks`` blocks
    (one entry in each), block row 0 a few, block row 2 none."""
    rng = np.random.default_rng(seed)
    n = 8 * nblocks
    rows = np.concatenate([8 + rng.integers(0, 8, nblocks), rng.integers(0, 8, 3)])
    cols = np.concatenate([8 * np.arange(nblocks) + rng.integers(0, 8, nblocks),
                           rng.integers(0, n, 3)])
    vals = rng.uniform(0.5, 1.5, rows.shape[0])
    a = sp.csr_array((vals, (rows, cols)), shape=(24, n))
    a.sum_duplicates()
    return a


def brute_pairs(a: BitmapMatrix, b: BitmapMatrix) -> list[tuple[int, int, int, int]]:
    """(block row i, block col k, A block, B block) of every pair whose Boolean
    product is not empty, by trying all pairs of blocks."""
    out = []
    for x, (ka, bma) in enumerate(zip(a.keys.tolist(), a.bitmaps.tolist())):
        for y, (kb, bmb) in enumerate(zip(b.keys.tolist(), b.bitmaps.tolist())):
            if ka & 0xFFFFFFFF == kb >> 32 and bool_product(np.uint64(bma), np.uint64(bmb)):
                out.append((ka >> 32, kb & 0xFFFFFFFF, x, y))
    return sorted(out)


def twin_on_host(a: BitmapMatrix, b: BitmapMatrix, pairs: bool = True) -> rowmerge.Merged:
    return rowmerge.merge(a.get() if a.on_device else a, b.get() if b.on_device else b, pairs)


def random_operands(seed: int) -> tuple[BitmapMatrix, BitmapMatrix]:
    """A (m, k) and B (k, n) on the GPU, of random shapes below 400 and
    densities of 0.2-10%."""
    rng = np.random.default_rng(seed)
    m, k, n = (int(v) for v in rng.integers(1, 400, 3))
    a_csr = random_csr(m, k, float(rng.uniform(0.002, 0.1)), seed=seed)
    b_csr = random_csr(k, n, float(rng.uniform(0.002, 0.1)), seed=seed + 50)
    return BitmapMatrix(a_csr).to_device(), BitmapMatrix(b_csr).to_device()


FIELDS = ("c_keys", "c_bitmaps", "c_offsets", "c_ptr", "task_a", "task_b")


def assert_same_merged(got: rowmerge.Merged, want: rowmerge.Merged, pairs: bool = True) -> None:
    """A GPU result equals the twin's, and its warp starts are multiply's."""
    for field in FIELDS[:4] + (FIELDS[4:] if pairs else ()):
        np.testing.assert_array_equal(getattr(got, field).get(), getattr(want, field))
    assert got.nnz == want.nnz
    if not pairs:
        assert got.task_a is None and got.task_b is None and got.warp_block is None
        return
    # value 32 w lies in block q: offsets[q] <= 32 w < offsets[q + 1]
    starts = np.arange(0, want.nnz, 32)
    want_warps = np.searchsorted(want.c_offsets, starts, side="right") - 1
    np.testing.assert_array_equal(got.warp_block.get(), want_warps)


def test_twin_pairs_blocks_and_sizes():
    a_csr, b_csr = random_csr(90, 70, 0.05, seed=1), random_csr(70, 50, 0.05, seed=2)
    a, b = BitmapMatrix(a_csr), BitmapMatrix(b_csr)
    got = rowmerge.merge(a, b)
    want = BitmapMatrix(scipy_product(a_csr, b_csr))
    np.testing.assert_array_equal(got.c_keys, want.keys)
    np.testing.assert_array_equal(got.c_bitmaps, want.bitmaps)
    np.testing.assert_array_equal(got.c_offsets, want.offsets)
    assert got.nnz == want.nnz
    owner = np.repeat(np.arange(got.c_keys.shape[0]), np.diff(got.c_ptr))
    found = sorted(zip((got.c_keys[owner] >> np.uint64(32)).tolist(),
                       (got.c_keys[owner] & np.uint64(0xFFFFFFFF)).tolist(),
                       got.task_a.tolist(), got.task_b.tolist()))
    assert found == brute_pairs(a, b)
    # within a block, ascending A block (the task order)
    for q in range(got.c_keys.shape[0]):
        assert np.all(np.diff(got.task_a[got.c_ptr[q]:got.c_ptr[q + 1]]) > 0)
    sizes = rowmerge.unit_sizes(got, 12, 1, 7)
    rows = (want.keys >> np.uint64(32)).astype(np.int64)
    np.testing.assert_array_equal(sizes[:12], np.bincount(rows, minlength=12))
    np.testing.assert_array_equal(sizes[12:24], np.bincount(rows, np.diff(want.offsets), 12))
    assert sizes[24:].sum() == len(brute_pairs(a, b))
    # cut in parts of 2 block columns: every unit holds its own blocks
    cut = rowmerge.unit_sizes(got, 12, 4, 2)
    cols = (want.keys & np.uint64(0xFFFFFFFF)).astype(np.int64)
    np.testing.assert_array_equal(cut[:48], np.bincount(rows * 4 + cols // 2, minlength=48))
    np.testing.assert_array_equal(cut[:48].reshape(12, 4).sum(axis=1), sizes[:12])


@pytest.mark.parametrize("nbrows,nbcols,want", [
    (1 << 20, 1000, (1, 1000)),   # enough rows: whole rows
    (100, 1000, (63, 16)),        # few rows: 64 parts of 16 columns; 63 cover them
    (5000, 3, (2, 2)),            # 2 parts; no part narrower than a column
    (3, 0, (1, 1)),               # no columns at all
    (1000, 30, (15, 2)),          # 16 parts of 2 columns: 15 cover them
    (3, 50, (50, 1)),             # 64 parts would be narrower than a column
])
def test_units(nbrows, nbcols, want, monkeypatch):
    monkeypatch.setattr(rowmerge, "UNITS", 8192)
    assert rowmerge.units(nbrows, nbcols) == want


def test_twin_through_spgemm_stages_matches_scipy():
    a_csr, b_csr = random_csr(60, 80, 0.08, seed=3), random_csr(80, 40, 0.08, seed=4)
    a, b = BitmapMatrix(a_csr), BitmapMatrix(b_csr)
    c = _merged(a, b, get_semiring("plus_times"), np.dtype(np.float64), True, None, 16,
                _FINDERS["merge"])
    assert_same_csr(c.to_scipy(), scipy_product(a_csr, b_csr))


def test_check_sees_the_need_before_c_is_allocated():
    a = BitmapMatrix(random_csr(40, 40, 0.1, seed=3))
    seen = []

    def check(need):
        seen.append(need)
        raise tasks.OverBudget("the product", need, 0)

    with pytest.raises(MemoryError):
        rowmerge.merge(a, a, True, check)
    want = rowmerge.merge(a, a)
    assert seen == [32 * want.c_keys.shape[0] + 16 * want.task_a.shape[0]]


def test_host_never_chooses_the_merge():
    a = BitmapMatrix(random_csr(20, 20, 0.2, seed=4))
    assert not rowmerge.chooses(a, a)


# --- on the GPU --------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("nblocks", [1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 96, 97,
                                     128])
def test_row_lengths_around_the_lanes(nblocks):
    """Every lane count and cursors per lane of the three group widths, up to
    the limit: the kernels give the twin's arrays, and C is scipy's."""
    a_csr = with_row_of(nblocks, seed=nblocks)
    b_csr = random_csr(a_csr.shape[1], 70, 0.05, seed=nblocks + 1)
    a = BitmapMatrix(a_csr).to_device()
    b = BitmapMatrix(b_csr).to_device()
    assert a._longest_row() == nblocks
    assert rowmerge.chooses(a, b)
    assert_same_merged(rowmerge.merge(a, b), twin_on_host(a, b))
    assert_same_csr(spgemm(a, b).to_scipy(), scipy_product(a_csr, b_csr))


@pytest.mark.gpu
@pytest.mark.parametrize("units", [1, 1 << 16])  # whole rows; rows cut in parts
@pytest.mark.parametrize("seed", range(6))
def test_random_products_match_the_twin(seed, units, monkeypatch):
    monkeypatch.setattr(rowmerge, "UNITS", units)
    a, b = random_operands(seed)
    if not rowmerge.chooses(a, b):
        pytest.skip("a block row longer than the merge takes")
    pairs = bool(seed % 2)
    assert_same_merged(rowmerge.merge(a, b, pairs), twin_on_host(a, b, pairs), pairs)


@pytest.mark.gpu
def test_longer_rows_take_the_task_list():
    a = BitmapMatrix(with_row_of(rowmerge.MAX_ROW_BLOCKS + 1, seed=5)).to_device()
    b = BitmapMatrix(random_csr(a.shape[1], 30, 0.05, seed=6)).to_device()
    assert not rowmerge.chooses(a, b)
    assert_same_csr(spgemm(a, b).to_scipy(), scipy_product(a.to_scipy(), b.to_scipy()))


@pytest.mark.gpu
def test_cancellation_is_dropped_like_scipy():
    a_csr = sp.csr_array(np.array([[1.0, 1.0, 0], [0, 2.0, 1.0]]))
    b_csr = sp.csr_array(np.array([[1.0, 0], [-1.0, 3.0], [2.0, -6.0]]))
    a, b = (BitmapMatrix(m).to_device() for m in (a_csr, b_csr))
    assert rowmerge.chooses(a, b)
    got = spgemm(a, b)
    assert_same_csr(got.to_scipy(), scipy_product(a_csr, b_csr))
    assert got.nnz == 1  # C[0, 0], C[1, 0] and C[1, 1] cancel to 0 and are dropped
    kept = spgemm(a, b, keep_zeros=True)
    assert kept.nnz == 4


@pytest.mark.gpu
def test_over_free_memory_falls_back_to_the_task_list(monkeypatch):
    a = BitmapMatrix(random_csr(64, 64, 0.1, seed=7)).to_device()
    monkeypatch.setattr(tasks, "UNCHECKED_BYTES", 0)
    monkeypatch.setattr(slices, "free_memory", lambda xp: (lambda: 1))
    pt = get_semiring("plus_times")
    assert _merged(a, a, pt, np.dtype(np.float64), True, None, 16, _FINDERS["merge"]) is None
    assert_same_csr(spgemm(a, a).to_scipy(), scipy_product(a.to_scipy(), a.to_scipy()))


@pytest.mark.gpu
def test_out_of_memory_in_the_multiply_falls_back(monkeypatch):
    """An allocation failing after the merge (here the multiply's) is a
    MemoryError like the checks: the task-list path takes the product."""
    from bmsparse.spgemm import multiply

    a_csr = random_csr(64, 64, 0.1, seed=13)
    a = BitmapMatrix(a_csr).to_device()
    assert rowmerge.chooses(a, a)

    def no_memory(*args, **kwargs):
        raise MemoryError("out of memory (simulated)")

    real = multiply.multiply
    calls = []

    def first_fails(*args, **kwargs):
        calls.append(1)
        return no_memory() if len(calls) == 1 else real(*args, **kwargs)

    monkeypatch.setattr(multiply, "multiply", first_fails)
    assert_same_csr(spgemm(a, a).to_scipy(), scipy_product(a_csr, a_csr))
    assert len(calls) == 2  # the merge's, then the task list's


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["merge", "dense", "scalar"])
@pytest.mark.parametrize("name", ["plus_times", "min_plus", "plus_pair", "lor_land",
                                  "any_pair"])
def test_semirings_identical_to_the_task_list(name, path):
    a = BitmapMatrix(random_csr(120, 90, 0.06, seed=8)).to_device()
    b = BitmapMatrix(random_csr(90, 110, 0.06, seed=9)).to_device()
    sr = get_semiring(name)
    dtype = np.dtype(bool if sr.structural else np.int64 if name == "plus_pair"
                     else np.float64)
    if sr.reads_values:
        a, b = a.astype(dtype), b.astype(dtype)
    got = _merged(a, b, sr, dtype, False, None, 0, _FINDERS[path])
    want = _product(a, b, sr, dtype, None, False, False, None)
    for field in ("keys", "bitmaps", "offsets"):
        np.testing.assert_array_equal(getattr(got, field).get(), getattr(want, field).get())
    assert got.nnz == want.nnz
    assert (got.values is None) == (want.values is None)
    if got.values is not None:
        np.testing.assert_array_equal(got.values.get(), want.values.get())  # identical bits


@pytest.mark.gpu
def test_corpus_like_graph_through_spgemm():
    """A power-law pattern with a hub column: the merge must agree with scipy."""
    rng = np.random.default_rng(10)
    n = 3000
    rows = rng.integers(0, n, 20000)
    cols = np.where(rng.random(20000) < 0.1, 7, rng.zipf(1.6, 20000) % n)
    a_csr = sp.csr_array((rng.uniform(-1, 1, 20000), (rows, cols)), shape=(n, n))
    a_csr.sum_duplicates()
    a = to_device(BitmapMatrix(a_csr), __import__("cupy"))
    if not rowmerge.chooses(a, a):
        pytest.skip("the random graph grew a block row longer than the merge takes")
    assert_same_csr(spgemm(a, a).to_scipy(), scipy_product(a_csr, a_csr))


@pytest.mark.gpu
def test_many_blocks_take_the_task_list_unless_rows_are_short(monkeypatch):
    a = BitmapMatrix(with_row_of(40, seed=11)).to_device()
    b = BitmapMatrix(random_csr(a.shape[1], 30, 0.05, seed=12)).to_device()
    assert rowmerge.chooses(a, b)
    monkeypatch.setattr(rowmerge, "MAX_MERGE_BLOCKS", a.nblocks - 1)
    assert not rowmerge.chooses(a, b)
    monkeypatch.setattr(rowmerge, "SHORT_ROW_BLOCKS", 40)
    assert rowmerge.chooses(a, b)


@pytest.mark.gpu
def test_hypersparse_operands_take_the_task_list():
    """Per-row arrays would dwarf a product of a few blocks in many rows."""
    n = 8 * 200_000
    a_csr = sp.csr_array((np.ones(3), ([5, 70_000, n - 1], [9, 11, 12])), shape=(n, n))
    a = BitmapMatrix(a_csr).to_device()
    assert not rowmerge.chooses(a, a)
    assert_same_csr(spgemm(a, a).to_scipy(), scipy_product(a_csr, a_csr))
    small = BitmapMatrix(a_csr[:8 * 4096, :8 * 4096]).to_device()
    assert rowmerge.chooses(small, small)  # few rows: the bound is UNITS rows
