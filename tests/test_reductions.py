"""sum, count_nonzero and diagonal against scipy's csr_array; bmsparse.testing."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse import BitmapMatrix
from bmsparse.testing import assert_allclose, assert_equal
from tests.cases import CASES, DTYPES, assert_dense_close, named, ours


@pytest.mark.parametrize("axis", [None, 0, 1, -1, -2])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_sum(case, dtype, axis, xp):
    a = named(case, dtype)
    got, want = ours(a, xp).sum(axis=axis), a.sum(axis=axis)
    if axis is None and xp is np:
        assert isinstance(got, np.generic)
    assert_dense_close(got, want, want.dtype)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_sum_of_lazy_transpose(axis, xp):
    a = named("wide", "float64")
    assert_dense_close(ours(a, xp).T.sum(axis=axis), a.T.sum(axis=axis), "float64")


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_sum_with_dtype(axis):
    a = named("tall", "int32")
    got = BitmapMatrix(a).sum(axis=axis, dtype=np.float32)
    assert np.asarray(got).dtype == np.float32
    np.testing.assert_allclose(got, a.sum(axis=axis).astype(np.float32))


@pytest.mark.parametrize("axis", [2, -3, 1.0, "rows", True])
def test_bad_axis(axis):
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(ValueError, match=r"axis must be None, 0, 1, -2 or -1, got "):
        a.sum(axis=axis)
    with pytest.raises(ValueError, match=r"axis must be None, 0, 1, -2 or -1, got "):
        a.count_nonzero(axis=axis)


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["dense", "tall", "full-block", "empty", "nx0"])
def test_count_nonzero_skips_stored_zeros(case, dtype, axis, xp):
    a = named(case, dtype)
    got, want = ours(a, xp).count_nonzero(axis=axis), a.count_nonzero(axis=axis)
    if axis is None and xp is np:
        assert isinstance(got, int)
    assert_dense_close(got, np.asarray(want, dtype=np.int64), "int64")


def test_count_nonzero_with_explicit_zeros():
    a = named("dense", "float64")
    assert (a.data == 0).any()  # the case holds stored zeros
    assert BitmapMatrix(a).count_nonzero() == a.count_nonzero() < a.nnz


@pytest.mark.parametrize("k", [0, 1, -1, 5, -7, 20, -40, 69, -36, 100, 2**70, -2**70,
                               np.int64(3)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_diagonal(case, dtype, k, xp):
    a = named(case, dtype)
    assert_dense_close(ours(a, xp).diagonal(k), a.diagonal(k), dtype)


@pytest.mark.parametrize("k", [1.5, "1", None])
def test_diagonal_of_a_non_integer_k_raises(k):
    a = named("tall", "float64")
    with pytest.raises(TypeError):
        a.diagonal(k)
    with pytest.raises(TypeError, match="k must be an integer"):
        BitmapMatrix(a).diagonal(k)


def test_assert_equal_accepts_equal_matrices(xp):
    a = ours(named("tall", "float64"), xp)
    assert_equal(a, a.copy())
    assert_equal(a, named("tall", "float64"))
    assert_allclose(a * 1.0000001, a, rtol=1e-6)


@pytest.mark.parametrize(("other", "message"), [
    (lambda a: a.T, r"shapes differ: \(21, 37\) and \(37, 21\)"),
    (lambda a: a.astype(np.float32), "dtypes differ: float32 and float64"),
    (lambda a: a - 0 * a, "keys differ|bitmaps differ"),  # drops the stored zeros
    (lambda a: a * 2.0, "values differ")])
def test_assert_equal_names_the_difference(other, message):
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(AssertionError, match=message):
        assert_equal(other(a), a)


def test_assert_allclose_names_values():
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(AssertionError, match="values differ"):
        assert_allclose(a * 1.1, a, rtol=1e-3)
