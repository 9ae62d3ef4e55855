"""End-to-end SpGEMM against scipy.sparse, on the host and on the GPU."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

import bmsparse
from bmsparse import BitmapMatrix, spgemm
from bmsparse.spgemm import strategy
from tests.cases import host
from tests.helpers import (assert_same_csr, random_complex_dense, random_csr,
                           rounded_complex_product, scipy_product, to_device)

# every test here runs through both strategies (see conftest.py)
pytestmark = pytest.mark.usefixtures("spgemm_path")


def run(a_csr, b_csr, xp, **kw):
    a = to_device(BitmapMatrix(a_csr), xp)
    b = to_device(BitmapMatrix(b_csr), xp)
    c = spgemm(a, b, **kw)
    assert c.on_device == (xp is not np)
    return c.to_scipy()


@pytest.mark.parametrize("m,k,n,density", [
    (1, 1, 1, 1.0),
    (7, 9, 5, 0.5),
    (8, 8, 8, 1.0),          # one full block: bit 63 set everywhere
    (16, 16, 16, 0.3),
    (50, 37, 61, 0.2),
    (1, 40, 1, 0.5),         # single row times single column
    (1, 100, 100, 0.1),      # single row
    (100, 1, 100, 0.5),      # outer product
    (200, 300, 150, 0.02),
    (513, 257, 129, 0.01),
    (1000, 1000, 1000, 0.003),
])
def test_random_shapes(m, k, n, density, xp):
    a = random_csr(m, k, density, seed=m + k)
    b = random_csr(k, n, density, seed=n + 7)
    assert_same_csr(run(a, b, xp), scipy_product(a, b))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64",
                                   "complex64", "complex128"])
def test_dtypes(dtype, xp):
    a = random_csr(70, 90, 0.1, seed=1, dtype=dtype)
    b = random_csr(90, 60, 0.1, seed=2, dtype=dtype)
    got = run(a, b, xp)
    assert got.dtype == np.dtype(dtype)
    assert_same_csr(got, scipy_product(a, b))


@pytest.mark.parametrize("da,db", [("float32", "float64"), ("int32", "float32"),
                                   ("int64", "complex64"), ("bool", "float32")])
def test_mixed_dtypes_promote_like_numpy(da, db, xp):
    a = random_csr(40, 30, 0.2, seed=3).astype(da)
    b = random_csr(30, 20, 0.2, seed=4).astype(db)
    got = run(a, b, xp)
    assert got.dtype == np.result_type(da, db)
    assert_same_csr(got, scipy_product(a.astype(got.dtype), b.astype(got.dtype)))


def test_boolean_product(xp):
    a = random_csr(90, 70, 0.05, seed=5).astype(bool)
    b = random_csr(70, 80, 0.05, seed=6).astype(bool)
    got = run(a, b, xp)
    assert got.dtype == np.bool_
    assert_same_csr(got, scipy_product(a, b))


def test_dtype_bool_casts_the_operands(xp):
    # dtype=bool ran plus_times as lor_land on the operands' structure: a
    # stored zero counted as True, though the docstring says the values are cast
    a = random_csr(40, 30, 0.2, seed=7)
    a.data[::3] = 0.0  # stored zeros
    b = random_csr(30, 50, 0.2, seed=8)
    got = run(a, b, xp, dtype=bool)
    assert got.dtype == np.bool_
    want = scipy_product(a.astype(bool), b.astype(bool))
    assert_same_csr(got, want)
    structure = a.copy()
    structure.data[:] = 1.0  # the stored zeros as entries: what came out before
    assert scipy_product(structure, b).nnz > want.nnz


@pytest.mark.parametrize(("complement", "error", "message"), [
    (True, ValueError, "complement=True needs a mask"),
    ("yes", TypeError, "complement must be a bool, got 'yes'"),
])
def test_complement_needs_a_mask_and_a_bool(complement, error, message, xp):
    a = to_device(BitmapMatrix(random_csr(20, 20, 0.2, seed=9)), xp)
    with pytest.raises(error, match=message):
        spgemm(a, a, complement=complement)


@pytest.mark.parametrize("keep_zeros", ["no", None, 1])
def test_keep_zeros_must_be_a_bool(keep_zeros, xp):
    # a truthy string ("no") kept the zeros scipy drops, silently
    a = to_device(BitmapMatrix(random_csr(20, 20, 0.2, seed=9)), xp)
    with pytest.raises(TypeError, match=re.escape(f"keep_zeros must be a bool, got "
                                                  f"{keep_zeros!r}")):
        spgemm(a, a, keep_zeros=keep_zeros)


@pytest.mark.parametrize("timings", [[], "stages", 0])
def test_timings_must_be_a_dict(timings, xp):
    # a list was cleared, the product computed, then an AttributeError raised
    a = to_device(BitmapMatrix(random_csr(20, 20, 0.2, seed=9)), xp)
    with pytest.raises(TypeError, match=re.escape(f"timings must be a dict, got "
                                                  f"{type(timings).__name__}")):
        spgemm(a, a, timings=timings)


@pytest.mark.parametrize(("dtype", "match"), [
    # named float64 while listing float64 as supported
    (">f8" if np.little_endian else "<f8", "is in non-native byte order; use numpy.float64"),
    ("foo", "dtype must be a NumPy dtype, got 'foo'"),
])
def test_dtype_that_is_not_a_native_dtype_says_so(dtype, match, xp):
    a = to_device(BitmapMatrix(random_csr(20, 20, 0.2, seed=9)), xp)
    with pytest.raises(TypeError, match=match):
        spgemm(a, a, dtype=dtype)
    with pytest.raises(TypeError, match=match):
        spgemm(a, a, semiring="lor_land", dtype=dtype)


def test_chain_of_rectangular_products(xp):
    mats = [random_csr(m, n, 0.05, seed=m * n) for m, n in
            [(30, 100), (100, 17), (17, 250), (250, 9)]]
    want = mats[0] @ mats[1] @ mats[2] @ mats[3]
    got = to_device(BitmapMatrix(mats[0]), xp)
    for m in mats[1:]:
        got = got @ to_device(BitmapMatrix(m), xp)
    assert_same_csr(got.to_scipy(), scipy_product(want, sp.eye_array(9)))


def banded(n, bandwidth, seed):
    rng = np.random.default_rng(seed)
    diags = [rng.uniform(0.5, 1.5, n - abs(d)) for d in range(-bandwidth, bandwidth + 1)]
    return sp.csr_array(sp.diags_array(diags, offsets=list(range(-bandwidth, bandwidth + 1))))


def block_diagonal(nblocks, size, seed):
    rng = np.random.default_rng(seed)
    return sp.csr_array(sp.block_diag([sp.coo_array(rng.uniform(0.5, 1.5, (size, size)))
                                       for _ in range(nblocks)]))


def power_law(n, seed):
    rng = np.random.default_rng(seed)
    degrees = np.minimum((rng.pareto(1.5, n) + 1).astype(np.int64), n)
    rows = np.repeat(np.arange(n), degrees)
    cols = (rng.zipf(1.8, rows.size) - 1) % n
    return sp.csr_array((rng.uniform(0.5, 1.5, rows.size), (rows, cols)), shape=(n, n))


@pytest.mark.parametrize("name,a", [
    ("banded-3", banded(301, 3, 1)),
    ("banded-20", banded(157, 20, 2)),
    ("block-diagonal-8", block_diagonal(20, 8, 3)),
    ("block-diagonal-5", block_diagonal(31, 5, 4)),
    ("power-law", power_law(2000, 5)),
    ("empty-rows-and-cols", sp.csr_array(sp.random_array((120, 120), density=0.05, rng=6)
                                         .multiply(np.arange(120) % 3 == 0))),
])
def test_structured(name, a, xp):
    assert_same_csr(run(a, a, xp), scipy_product(a, a))


@pytest.mark.parametrize("m,k,n", [(0, 0, 0), (0, 5, 3), (4, 0, 6), (5, 3, 0), (9, 9, 9),
                                   (0, 16, 9), (16, 0, 9), (0, 0, 9)])
def test_empty_operands(m, k, n, xp):
    a = sp.csr_array((m, k))
    b = random_csr(k, n, 0.5, seed=1) if k and n else sp.csr_array((k, n))
    got = run(a, b, xp)
    assert got.shape == (m, n) and got.nnz == 0  # run's result is C.to_scipy()


def test_pairs_with_empty_products_leave_no_block(xp, spgemm_path):
    # A's blocks use only column 0 of each block, B's only row 1: every pair
    # meets, no product has a bit
    a_csr = sp.csr_array((np.ones(4), ([0, 3, 9, 17], [0, 8, 16, 0])), shape=(24, 24))
    b_csr = sp.csr_array((np.ones(3), ([1, 9, 17], [5, 13, 2])), shape=(24, 24))
    a, b = (to_device(BitmapMatrix(m), xp) for m in (a_csr, b_csr))
    if xp is not np:
        assert strategy(a, b) == spgemm_path
    c = spgemm(a, b)
    assert c.nblocks == 0 and c.nnz == 0
    c.check_format(full_check=True)


def test_all_zero_result_from_cancellation(xp):
    a = sp.csr_array(np.array([[1.0, 1.0]]))
    b = sp.csr_array(np.array([[1.0], [-1.0]]))
    c = run(a, b, xp)
    assert c.shape == (1, 1) and c.nnz == 0


def test_partial_cancellation_is_compacted(xp):
    a = random_csr(24, 24, 0.3, seed=9)
    dense = a.toarray()
    dense[:, 5] = -dense[:, 4]   # A @ [e4 + e5] cancels column 4 + 5 contributions
    b = np.zeros((24, 24))
    b[4, 3] = b[5, 3] = 1.0
    b[4, 10] = 2.0
    a, b = sp.csr_array(dense), sp.csr_array(b)
    got = run(a, b, xp)
    assert_same_csr(got, scipy_product(a, b))
    kept = run(a, b, xp, keep_zeros=True)
    assert kept.nnz > got.nnz


def test_matmul_operator_and_scipy_operands(xp):
    a = random_csr(30, 40, 0.1, seed=1)
    b = random_csr(40, 20, 0.1, seed=2)
    ab = to_device(BitmapMatrix(a), xp)
    assert_same_csr((ab @ to_device(BitmapMatrix(b), xp)).to_scipy(), scipy_product(a, b))


def test_shape_mismatch_names_both_shapes():
    a = BitmapMatrix(random_csr(3, 5, 0.5, seed=1))
    b = BitmapMatrix(random_csr(4, 2, 0.5, seed=2))
    with pytest.raises(ValueError, match=r"k=5\),\(k=4.*\(3, 5\) and \(4, 2\)"):
        a @ b


@pytest.mark.gpu
def test_host_and_device_operands_do_not_mix():
    a = BitmapMatrix(random_csr(8, 8, 0.5, seed=1))
    with pytest.raises(TypeError, match="all be on the host .* or all on the device"):
        spgemm(a, a.to_device())


def test_timings_cover_every_stage(xp):
    a = to_device(BitmapMatrix(random_csr(64, 64, 0.1, seed=1)), xp)
    timings = {}
    spgemm(a, a, timings=timings)
    assert list(timings) == [*bmsparse.STAGES, "slices"] and timings["slices"] == 1
    assert all(t >= 0 for t in timings.values())


@pytest.mark.parametrize("bits", [20, 8])
def test_argsort_fallback_when_packed_key_does_not_fit(bits, xp, monkeypatch):
    from bmsparse.spgemm import tasks

    monkeypatch.setattr(tasks, "PACKED_SORT_BITS", bits)
    a = random_csr(200, 200, 0.05, seed=11)
    assert_same_csr(run(a, a, xp), scipy_product(a, a))


def test_deterministic_bits(xp):
    a = to_device(BitmapMatrix(power_law(3000, 1)), xp)
    first = spgemm(a, a)
    for _ in range(3):
        again = spgemm(a, a)
        assert xp.array_equal(first.keys, again.keys)
        assert xp.array_equal(first.bitmaps, again.bitmaps)
        assert xp.array_equal(first.values.view(xp.uint64), again.values.view(xp.uint64))


@pytest.mark.parametrize("chunk", [0, 2048, 64, 4])
def test_task_sort_chunks_and_long_rows(chunk, xp, monkeypatch):
    from bmsparse import _primitives

    monkeypatch.setattr(_primitives, "SORT_CHUNK", chunk)
    a = power_law(1500, 7)
    assert_same_csr(run(a, a, xp), scipy_product(a, a))


@pytest.mark.gpu
@pytest.mark.parametrize("chunk", [0, 4, 64, 512])
def test_device_conversion_segment_sort(chunk, monkeypatch):
    import cupy
    import cupyx.scipy.sparse as csp

    from bmsparse import _primitives

    monkeypatch.setattr(_primitives, "SORT_CHUNK", chunk)
    a = power_law(1500, 3)
    got = BitmapMatrix.from_cupyx(csp.csr_matrix(a))
    want = BitmapMatrix(a)
    assert cupy.asnumpy(got.keys).tolist() == want.keys.tolist()
    assert cupy.asnumpy(got.bitmaps).tolist() == want.bitmaps.tolist()
    np.testing.assert_array_equal(cupy.asnumpy(got.values), want.values)


@pytest.mark.parametrize("runs", [0, 2, 8, 32, 10**9])
@pytest.mark.parametrize("name,a", [("power-law", power_law(1200, 9)),
                                    ("banded", banded(400, 9, 3)),
                                    ("block-diagonal", block_diagonal(40, 8, 1))])
def test_task_merge_and_sort_paths(runs, name, a, xp, monkeypatch):
    from bmsparse.spgemm import tasks

    monkeypatch.setattr(tasks, "RANK_MAX_RUNS", runs)
    assert_same_csr(run(a, a, xp), scipy_product(a, a))


def test_nan_and_inf_propagate_as_in_scipy(xp):
    a = random_csr(40, 40, 0.15, seed=21)
    a.data[::7] = np.nan
    a.data[3::11] = np.inf
    a.data[5::13] = -np.inf
    with np.errstate(invalid="ignore"):  # scipy's own inf - inf
        want = scipy_product(a, a)
    assert np.isnan(want.data).any() and np.isinf(want.data).any()
    assert_same_csr(run(a, a, xp), want)


@pytest.mark.parametrize("n", [2**34, 2**35])
def test_huge_shape_with_entries_at_the_corners(n, xp):
    # block indices near 2**32 exercise the 64-bit index arithmetic of every
    # stage; CSR of such a shape would need a 2**34-long indptr, so the check
    # goes through COO
    last = n - 1
    rows = xp.asarray(np.array([0, 0, last, last, 5]))
    cols = xp.asarray(np.array([0, last, 0, last, last - 3]))
    values = xp.asarray(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    a = BitmapMatrix.from_coo(rows, cols, values, (n, n))
    c = spgemm(a, a)
    # the product of [[1, 2], [3, 4]] on the corners; row 5 meets only column last - 3
    dense_corners = np.array([[1.0, 2.0], [3.0, 4.0]]) @ np.array([[1.0, 2.0], [3.0, 4.0]])
    want = {(0, 0): dense_corners[0, 0], (0, last): dense_corners[0, 1],
            (last, 0): dense_corners[1, 0], (last, last): dense_corners[1, 1]}
    got_rows, got_cols = c._coo_indices()
    host = (lambda v: v) if xp is np else (lambda v: v.get())
    got = dict(zip(zip(host(got_rows).tolist(), host(got_cols).tolist()),
                   host(c.values).tolist()))
    assert c.shape == (n, n) and got == want
    # masked by A, whose entries hold every entry of C: the same C
    masked = spgemm(a, a, mask=a)
    got_rows, got_cols = masked._coo_indices()
    assert dict(zip(zip(host(got_rows).tolist(), host(got_cols).tolist()),
                    host(masked.values).tolist())) == want
    # nothing per block row or column was made: 2**31 would take 17 GB
    assert "row_pointer" not in a._cache and "column_pointer" not in a._cache


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_terms_round_as_scipy(dtype, xp, spgemm_path):
    # a diagonal factor on either side: every value of C is one complex
    # product, rounded part by part as scipy and the kernels round it (not
    # by NumPy's complex loops, which may fuse multiply-adds)
    d = random_complex_dense((1, 29), 1.0, dtype, seed=3)[0]
    b = random_complex_dense((29, 23), 0.5, dtype, seed=4)
    diag, other = (to_device(BitmapMatrix(sp.csr_array(x)), xp) for x in (np.diag(d), b))
    got = host((diag @ other).toarray())
    np.testing.assert_array_equal(got, rounded_complex_product(d[:, None], b))
    got = host((other.T @ diag).toarray())
    np.testing.assert_array_equal(got, rounded_complex_product(b.T, d[None, :]))
