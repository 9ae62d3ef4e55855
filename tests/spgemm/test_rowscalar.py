"""SpGEMM by B's scalar rows (``spgemm/rowscalar.py``): C's blocks equal the
other paths', its values are bit for bit the dense path's, and scipy's."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix, spgemm
from bmsparse.semiring import get_semiring
from bmsparse.spgemm import lean, rowmerge, rowscalar, strategy
from tests.cases import host
from tests.helpers import assert_same_csr, cancelling, random_csr, scipy_product


def graph(n: int, seed: int, hubs: int = 3, degree: float = 4.0) -> sp.csr_array:
    """A directed graph of about one entry per block, with a few hub rows and
    columns (power-law-like)."""
    rng = np.random.default_rng(seed)
    m = int(degree * n)
    rows, cols = rng.integers(0, n, m), rng.integers(0, n, m)
    hub = rng.integers(0, n, hubs)
    spokes = rng.integers(0, n, (2, hubs * n // 4))
    rows = np.concatenate([rows, np.repeat(hub, n // 4), spokes[0]])
    cols = np.concatenate([cols, spokes[1], np.repeat(hub, n // 4)])
    values = rng.integers(-3, 4, rows.shape[0]).astype(np.float64) + rng.random(rows.shape[0])
    a = sp.csr_array((values, (rows, cols)), shape=(n, n))
    a.sum_duplicates()
    return a


def by_rows(a: BitmapMatrix, b: BitmapMatrix, semiring: str = "plus_times",
            dtype=np.float64) -> tuple[rowmerge.Merged, np.ndarray, np.ndarray]:
    """C's blocks and values by this path's product (GPU or twins); C's
    blocks by its accumulation alone (the structural products') are checked
    to be the same."""
    sr = get_semiring(semiring)
    b_rows = rowscalar.rows(b, sr.reads_values)
    merged, compute = rowscalar.product(a, b_rows, b.shape[1])
    values, zeros = compute(sr, np.dtype(dtype))
    alone = rowscalar.accumulate(a, b_rows, b.shape[1])
    for field in ("c_keys", "c_bitmaps", "c_offsets", "c_ptr"):
        np.testing.assert_array_equal(host(getattr(alone, field)), host(getattr(merged, field)))
    assert alone.nnz == merged.nnz
    return merged, values, zeros


# --- the twins, in CI ---------------------------------------------------------


@pytest.mark.parametrize("shape,density,seed", [
    ((1, 1, 1), 1.0, 0), ((7, 9, 5), 0.5, 1), ((50, 37, 61), 0.05, 2), ((130, 90, 70), 0.02, 3),
    ((64, 64, 64), 0.3, 4), ((9, 0, 4), 0.0, 5)])
def test_twins_give_scipys_product(shape, density, seed):
    m, k, n = shape
    a_csr = random_csr(m, k, density, seed=seed) if k else sp.csr_array((m, k))
    b_csr = random_csr(k, n, density, seed=seed + 7) if k else sp.csr_array((k, n))
    a, b = BitmapMatrix(a_csr), BitmapMatrix(b_csr)
    merged, values, zeros = by_rows(a, b)
    want = rowmerge._merge_numpy(a, b, False, None)
    for field in ("c_keys", "c_bitmaps", "c_offsets"):
        np.testing.assert_array_equal(getattr(merged, field), getattr(want, field))
    c = BitmapMatrix._from_blocks(merged.c_keys, merged.c_bitmaps, merged.c_offsets, values,
                                  (m, n))
    c.check_format(full_check=True)
    assert int(zeros[0]) == np.count_nonzero(values == 0)
    assert_same_csr(c.to_scipy(), scipy_product(a_csr, b_csr))


@pytest.mark.parametrize("semiring,dtype", [("min_plus", np.float64), ("max_times", np.float32),
                                            ("plus_pair", np.int64)])
def test_twins_in_semirings(semiring, dtype):
    a_csr = graph(90, seed=4).astype(dtype)
    a = BitmapMatrix(a_csr)
    merged, values, _ = by_rows(a, a, semiring, dtype)
    c = BitmapMatrix._from_blocks(merged.c_keys, merged.c_bitmaps, merged.c_offsets, values,
                                  a.shape)
    want = spgemm(a, a, semiring=semiring)  # the host's task list and multiply twins
    np.testing.assert_array_equal(c.keys, want.keys)
    np.testing.assert_array_equal(c.values, want.values)


def test_twins_sum_in_the_multiplys_order():
    # the task list's multiply sums each value by ascending inner index, as here
    a_csr = graph(200, seed=5, hubs=5)
    a = BitmapMatrix(a_csr)
    merged, values, _ = by_rows(a, a)
    want = spgemm(a, a, keep_zeros=True)
    np.testing.assert_array_equal(merged.c_keys, want.keys)
    np.testing.assert_array_equal(values, want.values)


def test_chooses_only_on_the_gpu_and_sparse_blocks():
    a = BitmapMatrix(graph(4000, seed=6, hubs=0, degree=2.0))
    assert a.nnz <= rowscalar.MAX_ENTRIES_PER_BLOCK * a.nblocks
    assert not rowscalar.chooses(a, a)  # on the host: the task list
    dense = BitmapMatrix(random_csr(64, 64, 0.9, seed=6))
    assert dense.nnz > rowscalar.MAX_ENTRIES_PER_BLOCK * dense.nblocks


@pytest.mark.parametrize("degree,wanted", [(8.0, True), (0.5, False)])
def test_chooses_by_the_terms_a_block_row_meets(degree, wanted, monkeypatch):
    # the rule's arithmetic, the GPU-only condition lifted: a graph of
    # `degree` entries a row meets about 8 degree^2 terms a block row, against
    # n / 8 block columns of B; at degree 0.5 (p2p-Gnutella31-like) far fewer
    # than 1/32 of them
    monkeypatch.setattr(rowmerge, "per_row_arrays_fit", lambda a, b: True)
    n = 4000
    a = BitmapMatrix(graph(n, seed=7, hubs=0, degree=degree))
    assert a.nnz <= rowscalar.MAX_ENTRIES_PER_BLOCK * a.nblocks
    expected = a.nnz * (a.nnz / n) / (n / 8)
    assert (expected >= rowscalar.MIN_TERMS_PER_COLUMN * n / 8) == wanted
    assert rowscalar.chooses(a, a) == wanted


def test_rows_are_kept_with_a_small_b(monkeypatch):
    b = BitmapMatrix(graph(300, seed=4))
    indptr, indices, data = rowscalar.rows(b)
    assert rowscalar.rows(b)[0] is indptr and rowscalar.rows(b, False)[1] is indices
    assert rowscalar.rows(b, False)[2] is None
    want = b.to_scipy()
    np.testing.assert_array_equal(indptr, want.indptr)
    np.testing.assert_array_equal(indices, want.indices)
    np.testing.assert_array_equal(data, want.data)
    # new values: the kept rows go with the old ones
    b.values = b.values * 2
    np.testing.assert_array_equal(rowscalar.rows(b)[2], 2 * want.data)
    monkeypatch.setattr(rowscalar, "MAX_KEPT_ROWS_BYTES", 0)
    fresh = BitmapMatrix(graph(300, seed=4))
    assert rowscalar.rows(fresh)[0] is not rowscalar.rows(fresh)[0]


def test_bands_follow_the_terms():
    # every count below 4 a band of its own, then bands whose members differ
    # by less than 1.25x, fewer terms never in an earlier band
    terms = np.unique(np.concatenate([
        np.arange(0, 5000), np.int64(1) << np.arange(2, 63),
        (np.int64(1) << np.arange(3, 63)) - 1,
        np.random.default_rng(0).integers(0, 1 << 62, 5000)]))
    bands = rowscalar.bands(terms)
    assert bands.min() >= 0 and bands.max() < 256
    assert np.all(np.diff(bands) <= 0)
    for band in np.unique(bands):
        members = terms[bands == band]
        if members[0] < 4:
            assert members.shape[0] == 1
        else:
            assert members[-1] < 1.25 * members[0]


def test_order_takes_the_most_terms_first():
    terms = np.random.default_rng(1).integers(0, 3000, 999) ** 2
    units = rowscalar.order(terms)
    assert units[-1] == 0
    np.testing.assert_array_equal(np.sort(units[:-1]), np.arange(999))
    assert np.all(np.diff(rowscalar.bands(terms)[units[:-1]]) >= 0)
    assert np.all(np.diff(terms[units[:-1]]) <= 0.25 * terms[units[:-1]][1:])


# --- on the GPU -----------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 1, 700, 40_000])
def test_order_kernel_makes_the_twins_bands(n):
    import cupy

    rng = np.random.default_rng(n)
    terms = np.concatenate([rng.integers(0, 1 << 40, n // 2), rng.integers(0, 9, n - n // 2)])
    got = cupy.asnumpy(rowscalar.order(cupy.asarray(terms)))
    want = rowscalar.order(terms)
    assert got[-1] == 0
    np.testing.assert_array_equal(np.sort(got[:-1]), np.arange(n))
    # any order within a band: the same bands in the same places
    bands = rowscalar.bands(terms)
    np.testing.assert_array_equal(bands[got[:-1]], bands[want[:-1]])


def gpu_path(monkeypatch):
    """This path for every product whose B fits it, and not the lean one."""
    monkeypatch.setattr(lean, "MAX_BLOCKS", -1)
    monkeypatch.setattr(rowscalar, "MAX_ENTRIES_PER_BLOCK", float("inf"))
    monkeypatch.setattr(rowscalar, "MIN_TERMS_PER_COLUMN", 0)


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(6))
def test_kernels_are_the_twins(seed):
    rng = np.random.default_rng(seed)
    m, k, n = (int(v) for v in rng.integers(1, 700, 3))
    a_csr = random_csr(m, k, float(rng.uniform(0.002, 0.08)), seed=seed)
    b_csr = random_csr(k, n, float(rng.uniform(0.002, 0.08)), seed=seed + 50)
    a, b = BitmapMatrix(a_csr), BitmapMatrix(b_csr)
    want, want_values, want_zeros = by_rows(a, b)
    got, got_values, got_zeros = by_rows(a.to_device(), b.to_device())
    for field in ("c_keys", "c_bitmaps", "c_offsets"):
        np.testing.assert_array_equal(host(getattr(got, field)), getattr(want, field))
    assert got.nnz == want.nnz
    np.testing.assert_array_equal(host(got_values), want_values)  # the same order: same bits
    assert int(host(got_zeros)[0]) == int(want_zeros[0])


@pytest.mark.gpu
@pytest.mark.parametrize("n,hubs", [(300, 2), (2000, 6), (9000, 4)])
def test_hub_rows_match_the_dense_path(n, hubs, monkeypatch):
    a_csr = graph(n, seed=n, hubs=hubs)
    a = BitmapMatrix(a_csr).to_device()
    gpu_path(monkeypatch)
    assert strategy(a, a) == "scalar"
    got = spgemm(a, a)
    monkeypatch.setattr(rowscalar, "MAX_ENTRIES_PER_BLOCK", -1)
    assert strategy(a, a) == "dense"
    want = spgemm(a, a)
    for field in ("keys", "bitmaps", "offsets", "values"):
        np.testing.assert_array_equal(host(getattr(got, field)), host(getattr(want, field)))
    got.check_format(full_check=True)
    assert_same_csr(got.to_scipy(), scipy_product(a_csr, a_csr))


@pytest.mark.gpu
@pytest.mark.parametrize("keep_zeros", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128, np.int64])
def test_cancellations_are_compacted(dtype, keep_zeros, monkeypatch):
    a_csr = cancelling(300, seed=3, density=0.03, extra=0.01).astype(dtype)
    a = BitmapMatrix(a_csr).to_device()
    gpu_path(monkeypatch)
    assert strategy(a, a) == "scalar"
    got = spgemm(a, a, keep_zeros=keep_zeros)
    got.check_format(full_check=True)
    want = scipy_product(a_csr, a_csr)  # scipy drops the zeros
    if keep_zeros:
        assert got.nnz > want.nnz
        kept = got.to_scipy()
        kept.eliminate_zeros()
        assert_same_csr(kept, want)
    else:
        assert_same_csr(got.to_scipy(), want)


@pytest.mark.gpu
@pytest.mark.parametrize("semiring,dtype", [("min_plus", np.float64), ("max_times", np.float32),
                                            ("plus_pair", np.int64), ("plus_pair", np.int32),
                                            ("lor_land", bool)])
def test_semirings_match_the_host(semiring, dtype, monkeypatch):
    a_csr = graph(500, seed=8).astype(dtype)
    a = BitmapMatrix(a_csr)
    want = spgemm(a, a, semiring=semiring)
    d = a.to_device()
    gpu_path(monkeypatch)
    assert strategy(d, d) == "scalar"
    got = spgemm(d, d, semiring=semiring)
    for field in ("keys", "bitmaps", "offsets"):
        np.testing.assert_array_equal(host(getattr(got, field)), getattr(want, field))
    if want.values is not None:
        np.testing.assert_array_equal(host(got.values), want.values)


@pytest.mark.gpu
def test_timings_and_empty_rows(monkeypatch):
    # rows of A with no entry, rows of B with none, and a block row of C empty
    a_csr = sp.csr_array((np.arange(1.0, 5.0), ([0, 3, 17, 40], [5, 9, 30, 2])), shape=(48, 40))
    b_csr = sp.csr_array((np.arange(1.0, 4.0), ([5, 9, 2], [1, 33, 39])), shape=(40, 44))
    a, b = BitmapMatrix(a_csr).to_device(), BitmapMatrix(b_csr).to_device()
    gpu_path(monkeypatch)
    assert strategy(a, b) == "scalar"
    timings = {}
    c = spgemm(a, b, timings=timings)
    assert set(timings) >= {"tasks", "count", "multiply", "compact"} and timings["slices"] == 1
    c.check_format(full_check=True)
    assert_same_csr(c.to_scipy(), scipy_product(a_csr, b_csr))
