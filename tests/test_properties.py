"""Property tests against scipy.sparse over random shapes, densities and dtypes.

Values are small integers (explicit zeros included), so every sum is exact in
any order and the comparisons with scipy are exact for every dtype.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bmsparse import BitmapMatrix, spgemm
from tests.helpers import assert_same_csr, scipy_product

# the xp fixture is function-scoped: one value per test, shared by its examples, which is
# what is wanted here
PROPERTY = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

dims = st.integers(0, 40)
densities = st.sampled_from([0.0, 0.01, 0.03, 0.1, 0.3, 0.6, 1.0])
dtypes = st.sampled_from(["float64", "int64", "bool"])
seeds = st.integers(0, 2**32 - 1)


def host(a):
    return a if isinstance(a, np.ndarray) else a.get()


def on(xp, m: BitmapMatrix) -> BitmapMatrix:
    return m if xp is np else m.to_device()


def random_scipy(shape, density, dtype, rng) -> sp.csr_array:
    """Random CSR with values in -3..3 (stored zeros included; bool: True only)."""
    m, n = shape
    nnz = int(rng.binomial(m * n, density)) if m * n else 0
    flat = rng.choice(m * n, size=nnz, replace=False) if nnz else np.zeros(0, np.int64)
    rows, cols = np.divmod(flat, max(n, 1))
    values = (np.ones(nnz, dtype=bool) if dtype == "bool"
              else rng.integers(-3, 4, nnz).astype(dtype))
    return sp.csr_array((values, (rows, cols)), shape=shape, dtype=dtype)


def blocks_of(c: sp.csr_array) -> int:
    """Number of 8x8 blocks holding a stored entry of ``c``."""
    coo = c.tocoo()
    return len(set(zip((coo.row // 8).tolist(), (coo.col // 8).tolist())))


@PROPERTY
@given(m=dims, k=dims, n=dims, a_density=densities, b_density=densities, dtype=dtypes,
       seed=seeds)
def test_spgemm_matches_scipy(xp, m, k, n, a_density, b_density, dtype, seed):
    rng = np.random.default_rng(seed)
    a = random_scipy((m, k), a_density, dtype, rng)
    b = random_scipy((k, n), b_density, dtype, rng)
    c = spgemm(on(xp, BitmapMatrix(a)), on(xp, BitmapMatrix(b)))
    assert c.shape == (m, n) and c.dtype == np.dtype(dtype)
    assert c.on_device == (xp is not np)
    assert_same_csr(c.to_scipy(), scipy_product(a, b), rtol=0)


@PROPERTY
@given(m=dims, k=dims, n=dims, a_density=densities, b_density=densities, dtype=dtypes,
       seed=seeds)
# a case hypothesis found: A has 2 entries, B one, and their one pair of blocks has an
# empty Boolean product
@example(m=13, k=10, n=1, a_density=0.01, b_density=0.03, dtype="float64", seed=0)
def test_spgemm_result_is_canonical(xp, m, k, n, a_density, b_density, dtype, seed):
    rng = np.random.default_rng(seed)
    a = random_scipy((m, k), a_density, dtype, rng)
    b = random_scipy((k, n), b_density, dtype, rng)
    c = spgemm(on(xp, BitmapMatrix(a)), on(xp, BitmapMatrix(b)))
    c.check_format(full_check=True)
    assert c.nblocks == blocks_of(scipy_product(a, b))


@PROPERTY
@given(m=dims, k=dims, n=dims, a_density=densities, b_density=densities,
       dtype=st.sampled_from(["float64", "int64"]), seed=seeds)
def test_spgemm_keep_zeros_keeps_the_structural_product(xp, m, k, n, a_density, b_density,
                                                        dtype, seed):
    rng = np.random.default_rng(seed)
    a = random_scipy((m, k), a_density, dtype, rng)
    b = random_scipy((k, n), b_density, dtype, rng)
    c = spgemm(on(xp, BitmapMatrix(a)), on(xp, BitmapMatrix(b)), keep_zeros=True).to_scipy()
    # the structure is the product of the stored patterns (stored zeros count);
    # products of all-ones copies have no cancellation
    ones_a = sp.csr_array((np.ones(a.nnz), a.indices, a.indptr), shape=a.shape)
    ones_b = sp.csr_array((np.ones(b.nnz), b.indices, b.indptr), shape=b.shape)
    pattern = scipy_product(ones_a, ones_b)
    np.testing.assert_array_equal(c.indptr, pattern.indptr)
    np.testing.assert_array_equal(c.indices, pattern.indices)
    dense = (a @ b).toarray()
    rows = np.repeat(np.arange(m), np.diff(c.indptr))
    np.testing.assert_array_equal(c.data, dense[rows, c.indices])


@PROPERTY
@given(m=dims, n=dims, nnz=st.integers(0, 200), dtype=dtypes, seed=seeds)
def test_from_coo_round_trip(xp, m, n, nnz, dtype, seed):
    rng = np.random.default_rng(seed)
    nnz = nnz if m * n else 0
    rows = rng.integers(0, max(m, 1), nnz)          # with repeats: duplicates
    cols = rng.integers(0, max(n, 1), nnz)
    values = (rng.random(nnz) < 0.8 if dtype == "bool"
              else rng.integers(-3, 4, nnz).astype(dtype))
    got = BitmapMatrix.from_coo(xp.asarray(rows), xp.asarray(cols), xp.asarray(values), (m, n))
    got.check_format(full_check=True)
    want = sp.coo_array((values, (rows, cols)), shape=(m, n)).tocsr()
    want.sum_duplicates()
    if dtype == "bool":
        want.eliminate_zeros()        # a pattern matrix stores no False
    assert got.dtype == np.dtype(dtype) and got.nnz == want.nnz
    assert got.nblocks == blocks_of(want)
    assert_same_csr(got.to_scipy(), want, rtol=0)
    np.testing.assert_array_equal(host(got.toarray()), want.toarray())
    assert_same_csr(got.T.to_scipy(), want.T, rtol=0)


@PROPERTY
@given(m=dims, n=dims, density=densities, dtype=dtypes, seed=seeds)
def test_scipy_round_trip(xp, m, n, density, dtype, seed):
    want = random_scipy((m, n), density, dtype, np.random.default_rng(seed))
    got = on(xp, BitmapMatrix(want))
    got.check_format(full_check=True)
    back = got.to_scipy()
    assert type(back) is sp.csr_array and back.dtype == want.dtype
    assert_same_csr(back, want, rtol=0)
    assert_same_csr(BitmapMatrix(back).to_scipy(), want, rtol=0)


@pytest.mark.parametrize("dtype", ["float64", "int64", "bool"])
def test_product_of_disjoint_block_structure_has_no_empty_block(dtype, xp):
    # A(0,0) holds (0,0) and B(0,0) holds (1,0): A's column 0 meets B's empty row 0,
    # so C = A @ B is empty although the pair (A(0,0), B(0,0)) is a task.
    #
    #   A = | 1 . |      B = | . |      C = A @ B = | . |
    #                        | 1 |
    a = BitmapMatrix(np.array([[1, 0]], dtype=dtype))
    b = BitmapMatrix(np.array([[0], [1]], dtype=dtype))
    c = spgemm(on(xp, a), on(xp, b))
    assert (c.nnz, c.nblocks) == (0, 0)
    c.check_format(full_check=True)


@PROPERTY
@given(m=dims, k=dims, n=dims, a_density=densities, b_density=densities,
       rows_per_slice=st.integers(1, 6), seed=seeds)
def test_sliced_product_is_the_unsliced_one_bit_for_bit(xp, m, k, n, a_density, b_density,
                                                         rows_per_slice, seed):
    from bmsparse.spgemm import tasks as tasks_mod

    rng = np.random.default_rng(seed)
    a = on(xp, BitmapMatrix(random_scipy((m, k), a_density, "float64", rng)))
    b = on(xp, BitmapMatrix(random_scipy((k, n), b_density, "float64", rng)))
    whole = spgemm(a, b).get()
    # a budget of a few tasks per slice; a block row too large for it must
    # raise MemoryError, never give a different result
    budget = rows_per_slice * 8 * tasks_mod.BYTES_PER_TASK
    try:
        sliced = spgemm(a, b, max_memory=budget).get()
    except MemoryError as exc:
        assert "alone needs about" in str(exc)
        return
    for name in ("keys", "bitmaps", "offsets"):
        np.testing.assert_array_equal(getattr(sliced, name), getattr(whole, name))
    np.testing.assert_array_equal(sliced.values.view(np.uint64), whole.values.view(np.uint64))


def structure(c: sp.csr_array) -> np.ndarray:
    """Dense bool array of the stored entries (stored zeros included)."""
    out = np.zeros(c.shape, dtype=bool)
    coo = c.tocoo()
    out[coo.row, coo.col] = True
    return out


@PROPERTY
@given(m=dims, k=dims, n=dims, a_density=densities, b_density=densities,
       mask_density=densities, semiring=st.sampled_from(["min_plus", "max_times",
                                                         "plus_pair", "or_and"]),
       complement=st.booleans(), seed=seeds)
def test_masked_semiring_products_match_dense(xp, m, k, n, a_density, b_density,
                                              mask_density, semiring, complement, seed):
    # small integer values (stored zeros included): every semiring is exact
    rng = np.random.default_rng(seed)
    a = random_scipy((m, k), a_density, "int64", rng)
    b = random_scipy((k, n), b_density, "int64", rng)
    mask = random_scipy((m, n), mask_density, "int64", rng)
    pa, pb = structure(a), structure(b)
    both = pa[:, :, None] & pb[None, :, :]
    allowed = ~structure(mask) if complement else structure(mask)
    present = both.any(axis=1) & allowed
    va, vb = a.toarray()[:, :, None], b.toarray()[None, :, :]
    if semiring == "min_plus":
        big = np.iinfo(np.int64).max
        want = np.where(both, va + vb, big).min(axis=1, initial=big)
    elif semiring == "max_times":
        small = np.iinfo(np.int64).min
        want = np.where(both, va * vb, small).max(axis=1, initial=small)
    else:
        want = both.sum(axis=1)
    c = spgemm(on(xp, BitmapMatrix(a)), on(xp, BitmapMatrix(b)), semiring=semiring,
               mask=on(xp, BitmapMatrix(mask)), complement=complement).get().to_scipy()
    np.testing.assert_array_equal(structure(c), present)
    if semiring != "or_and":
        coo = c.tocoo()
        np.testing.assert_array_equal(coo.data, want[coo.row, coo.col])
