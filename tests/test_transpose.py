"""Block-local transpose: against scipy, the lazy transpose, and the two twins."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from bmsparse import BitmapMatrix, _format, transpose
from bmsparse.testing import assert_equal
from tests.cases import CASES, DTYPES, named, ours, random_matrix
from tests.helpers import assert_same_csr


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_transpose_matches_scipy(case, dtype, xp):
    a = named(case, dtype)
    t = ours(a, xp).T
    assert t.shape == a.shape[::-1]
    t.check_format(full_check=True)
    assert_same_csr(t.get().to_scipy(), a.T, rtol=0)


@pytest.mark.parametrize("dtype", ["bool", "float64"])
def test_transpose_of_transpose_is_the_matrix(dtype, xp):
    a = ours(random_matrix((29, 13), 0.3, dtype, seed=1), xp)
    assert a.T.T is a
    assert_equal(a.T.copy().T, a)


def test_lazy_transpose_keeps_attributes_without_computing(monkeypatch):
    a = BitmapMatrix(random_matrix((20, 12), 0.3, "float64", seed=2))
    calls = []
    monkeypatch.setattr(transpose, "transpose", lambda *args: calls.append(1))
    t = a.T
    assert (t.shape, t.dtype, t.nnz, t.nblocks, t.on_device) == (
        (12, 20), a.dtype, a.nnz, a.nblocks, False)
    assert "12x20 BitmapMatrix" in repr(t)
    assert calls == []


def test_transpose_is_computed_once(monkeypatch):
    a = BitmapMatrix(random_matrix((20, 12), 0.3, "float64", seed=3))
    calls = []
    real = transpose.transpose

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(transpose, "transpose", spy)
    t = a.T
    t.keys, t.values, t.toarray()  # noqa: B018 - the accesses are the test
    assert calls == [1]


def test_column_order_sorts_by_column_then_row(xp):
    a = ours(random_matrix((70, 45), 0.1, "float64", seed=4), xp)
    order = transpose.column_order(a.keys)
    keys = a.keys.get() if xp is not np else a.keys
    order = order.get() if xp is not np else order
    rows, cols = _format.block_rows_of(keys), _format.block_cols_of(keys)
    np.testing.assert_array_equal(order, np.lexsort((rows, cols)))


def test_transpose_bitmaps_moves_bit_rc_to_cr(xp):
    rng = np.random.default_rng(5)
    bitmaps = rng.integers(0, 2**63, 50, dtype=np.int64).astype(np.uint64) * np.uint64(2) + \
        rng.integers(0, 2, 50).astype(np.uint64)
    got = _format.transpose_bitmaps(xp.asarray(bitmaps))
    got = got.get() if xp is not np else got
    bits = (bitmaps[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    want_bits = bits.reshape(-1, 8, 8).transpose(0, 2, 1).reshape(-1, 64)
    want = (want_bits << np.arange(64, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
    np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bool", "int32", "float64", "complex128"])
@pytest.mark.parametrize("case", ["tall", "full-block", "empty", "dense"])
def test_stage_cuda_equals_numpy(case, dtype):
    import cupy

    a = BitmapMatrix(named(case, dtype))
    order = transpose.column_order(a.keys)
    want = transpose.transpose(a.keys, a.bitmaps, a.offsets, a.values, order)
    d = a.to_device()
    d_order = transpose.column_order(d.keys)
    got = transpose.transpose(d.keys, d.bitmaps, d.offsets, d.values, d_order)
    np.testing.assert_array_equal(d_order.get(), order)
    for g, w in zip(got, want, strict=True):
        if w is None:
            assert g is None
        else:
            assert isinstance(g, cupy.ndarray)
            np.testing.assert_array_equal(g.get(), w)


def test_product_with_lazy_transpose(xp):
    a = random_matrix((21, 14), 0.3, "float64", seed=6)
    b = random_matrix((21, 9), 0.3, "float64", seed=7)
    got = (ours(a, xp).T @ ours(b, xp)).get().to_scipy()
    assert_same_csr(got, sp.csr_array(a.T @ b))


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 40), n=st.integers(0, 40), density=st.floats(0, 1),
       seed=st.integers(0, 2**16), dtype=st.sampled_from(DTYPES))
def test_property_transpose_matches_scipy(m, n, density, seed, dtype):
    a = random_matrix((m, n), density, dtype, seed)
    assert_same_csr(BitmapMatrix(a).T.to_scipy(), a.T, rtol=0)
