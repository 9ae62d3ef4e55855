"""sum, mean, max, min, count_nonzero, diagonal, trace, power, conj and dot against
scipy's csr_array; bmsparse.testing."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix
from bmsparse.testing import assert_allclose, assert_equal
from tests.cases import (CASES, DTYPES, RTOL, assert_dense_close, host, named, ours,
                         random_matrix)


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


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_sums_keep_infinite_parts(axis, dtype, xp):
    # by ones, inf * 0 made the other part NaN: 2+infj summed as nan+infj
    x = np.array([[complex(1, np.inf), 1.0, 0], [np.inf, 0, complex(0, -2)],
                  [0, complex(np.inf, np.inf), 3]], dtype=dtype)
    m = ours(sp.csr_array(x), xp)
    for got, want in ((m.sum(axis=axis), x.sum(axis=axis)),
                      (m.T.sum(axis=axis), x.T.sum(axis=axis)),
                      (m.real.sum(axis=axis, dtype=dtype), x.real.sum(axis=axis, dtype=dtype))):
        got = host(got)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_sum_with_dtype(axis):
    a = named("tall", "int32")
    got = BitmapMatrix(a).sum(axis=axis, dtype=np.float32)
    assert np.asarray(got).dtype == np.float32
    np.testing.assert_allclose(got, a.sum(axis=axis).astype(np.float32))


@pytest.mark.parametrize("dtype", ["bool", "int32", "float32"])
@pytest.mark.parametrize("axis", [0, 1])
def test_row_and_column_sums_with_dtype_accumulate_as_scipy(axis, dtype, xp):
    # an int32 accumulator wrapped -2**31 - 2**31 to 0: False for dtype=bool
    x = np.array([[-2**31, -2**31, 0], [-2**31, 0, 5], [0, 0, -3]], dtype=np.int32)
    a = sp.csr_array(x)
    got, want = ours(a, xp).sum(axis=axis, dtype=dtype), a.sum(axis=axis, dtype=dtype)
    assert_dense_close(got, want, want.dtype)


@pytest.mark.parametrize("axis", [2, -3, 1.0, "rows", True])
def test_bad_axis(axis):
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(ValueError, match=r"axis must be None, 0, 1, -2 or -1, or a tuple of them, got "):
        a.sum(axis=axis)
    with pytest.raises(ValueError, match=r"axis must be None, 0, 1, -2 or -1, or a tuple of them, got "):
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


def test_assert_allclose_with_no_tolerance_compares_integers_exactly():
    # numpy compares in float64: 2**62 + 1 and 2**62 passed as equal
    big, bigger = (BitmapMatrix(np.array([[v]], dtype=np.int64)) for v in (2**62, 2**62 + 1))
    with pytest.raises(AssertionError, match="values differ"):
        assert_allclose(bigger, big, rtol=0, atol=0)
    assert_allclose(bigger, big, rtol=1e-15)  # a tolerance is numpy's, in float64


def _scipy_extreme(a: sp.csr_array, name: str, axis, explicit: bool):
    """scipy's max / min as a dense result (its per-line result is a 1-D coo_array)."""
    out = getattr(a, name)(axis=axis, explicit=explicit)
    return out.toarray() if sp.issparse(out) else out


def with_nans(dtype) -> sp.csr_array:
    """A 10 x 12 matrix with NaNs in row 1 and column 3 (row 4 full), negative elsewhere."""
    a = random_matrix((10, 12), 0.4, dtype, seed=5).tolil()
    a[4, :] = -np.arange(1, 13)
    a[1, 7] = np.nan
    a[6, 3] = np.nan
    return sp.csr_array(a)


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [c for c in CASES if c not in ("empty", "0xn", "nx0")])
def test_max_min(case, dtype, name, axis, explicit, xp):
    a = named(case, dtype)
    got = getattr(ours(a, xp), name)(axis=axis, explicit=explicit)
    want = _scipy_extreme(a, name, axis, explicit)
    if axis is None and xp is np:
        assert isinstance(got, np.generic)
    assert_dense_close(got, np.asarray(want), dtype)


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_max_min_propagate_nan(dtype, name, axis, explicit, xp):
    a = with_nans(dtype)
    got = host(getattr(ours(a, xp), name)(axis=axis, explicit=explicit))
    want = np.asarray(_scipy_extreme(a, name, axis, explicit))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(want).any()
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize(("shape", "axis"), [((0, 0), None), ((0, 5), None), ((6, 0), None),
                                             ((0, 5), 0), ((6, 0), 1)])
def test_max_min_of_an_empty_axis_raise(shape, axis, name):
    a = sp.csr_array(shape, dtype=np.float64)
    with pytest.raises(ValueError, match="zero-size array"):
        getattr(a, name)(axis=axis)
    with pytest.raises(ValueError, match="zero-size array to reduction operation"):
        getattr(BitmapMatrix(a), name)(axis=axis)


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_along_a_non_empty_axis_of_an_empty_matrix(name, xp):
    a = sp.csr_array((0, 5), dtype=np.float64)
    got = getattr(ours(a, xp), name)(axis=1)
    assert host(got).shape == (0,)
    assert_dense_close(got, _scipy_extreme(a, name, 1, False), "float64")


@pytest.mark.parametrize("axis", [None, 0, 1, -2])
@pytest.mark.parametrize("dtype", [None, "float32", "complex128"])
@pytest.mark.parametrize("matrix_dtype", DTYPES)
@pytest.mark.parametrize("case", ["tall", "wide", "dense", "zero-nnz", "1x1"])
def test_mean(case, matrix_dtype, dtype, axis, xp):
    a = named(case, matrix_dtype)
    if dtype == "float32" and a.dtype.kind == "c":
        dtype = "complex64"  # (a cast to real warns)
    want = a.mean(axis=axis, dtype=dtype)
    got = ours(a, xp).mean(axis=axis, dtype=dtype)
    if axis is None and xp is np:
        assert isinstance(got, np.generic)
    # float32 and complex64 matrices average in their own precision
    precision = "float32" if matrix_dtype in ("float32", "complex64") else want.dtype
    assert_dense_close(got, np.asarray(want), precision)


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("case", ["empty", "0xn", "nx0"])
def test_mean_of_no_entries_is_nan(case, axis, xp):
    a = named(case, "int32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "Mean of empty slice"
        want = np.mean(a.toarray(), axis=axis)
    got = host(ours(a, xp).mean(axis=axis))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("n", [2, 3, -1, 0.5, -2.5, np.float32(2), True])
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "complex64"])
def test_power(dtype, n, xp):
    a = named("tall", dtype)
    if dtype.startswith("int") and isinstance(n, int) and n < 0:
        with pytest.raises(ValueError, match="negative integer powers"):
            a.power(n)
        with pytest.raises(ValueError, match="negative integer powers"):
            ours(a, xp).power(n)
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        want = a.power(n)
        got = ours(a, xp).power(n)
    got.check_format(full_check=True)
    assert got.dtype == want.dtype
    assert_same_csr_pattern(got, want)
    np.testing.assert_allclose(host(got.tocsr().data) if xp is np else got.get().tocsr().data,
                               want.data, rtol=RTOL.get(want.dtype.name, 0), equal_nan=True)


def assert_same_csr_pattern(got: BitmapMatrix, want: sp.csr_array) -> None:
    csr = got.to_scipy()
    np.testing.assert_array_equal(csr.indptr, want.indptr)
    np.testing.assert_array_equal(csr.indices, want.indices)


def test_power_with_dtype():
    a = named("tall", "int32")
    got, want = BitmapMatrix(a).power(2, dtype=np.float32), a.power(2, dtype=np.float32)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got.toarray(), want.toarray())


@pytest.mark.parametrize(("n", "message"), [(0, "zero power is not supported"),
                                             (np.ones(2), "input is not scalar")])
def test_power_refuses_what_scipy_refuses(n, message):
    a = named("tall", "float64")
    with pytest.raises(NotImplementedError):
        a.power(n)
    with pytest.raises(NotImplementedError, match=message):
        BitmapMatrix(a).power(n)


def test_power_of_a_string_raises():
    with pytest.raises(NotImplementedError, match="input is not scalar"):
        BitmapMatrix(named("tall", "float64")).power("2")


def test_power_of_bool_names_the_cast():
    a = named("tall", "bool")
    assert a.power(2).dtype == np.int8  # scipy's; bmsparse stores no int8
    with pytest.raises(TypeError, match=r"int8 is not supported"):
        BitmapMatrix(a).power(2)
    np.testing.assert_array_equal(BitmapMatrix(a).astype(np.int32).power(2).toarray(),
                                  a.power(2).toarray())


@pytest.mark.parametrize("dtype", DTYPES)
def test_conjugate(dtype, xp):
    a = named("tall", dtype)
    m = ours(a, xp)
    for got in (m.conj(), m.conjugate()):
        assert got.dtype == a.dtype
        assert got is not m
        np.testing.assert_array_equal(host(got.toarray()), a.conj().toarray())
    if a.dtype.kind != "c":
        assert m.conj(copy=False) is m


@pytest.mark.parametrize("other", ["vector", "matrix", "sparse", "scalar"])
def test_dot(other, xp):
    a = named("square", "float64")
    b = named("square", "float64", seed=1)
    operand = {"vector": np.arange(64.0), "matrix": np.ones((64, 3)), "sparse": b,
               "scalar": 2.5}[other]
    want = a.dot(operand)
    mine = operand if other == "scalar" else ours(b, xp) if other == "sparse" \
        else xp.asarray(operand)
    got = ours(a, xp).dot(mine)
    got = got.toarray() if isinstance(got, BitmapMatrix) else got
    want = want.toarray() if sp.issparse(want) else want
    assert_dense_close(got, want, "float64")


@pytest.mark.parametrize("offset", [0, 1, -3, 40, -80])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["tall", "wide", "square", "full-block", "empty"])
def test_trace(case, dtype, offset, xp):
    a = named(case, dtype)
    got, want = ours(a, xp).trace(offset), a.trace(offset)
    assert_dense_close(got, np.asarray(want), np.asarray(want).dtype)


@pytest.mark.parametrize("offset", [0, 1, 2, -(2**35 - 1), 2**35 - 1, 2**35, -2**40])
@pytest.mark.parametrize("dtype", DTYPES)
def test_trace_of_a_hypersparse_matrix(dtype, offset, xp):
    # its diagonal, 2**35 entries, would take 256 GiB: the trace sums the stored entries on it
    n = 2**35
    rows = np.array([0, 1, 3, 5, n - 1, n - 1])
    cols = np.array([0, 2, 3, 7, 0, n - 1])
    values = np.array([3, 5, -2, 4, 7, 1]).astype(dtype)  # (bool: all True)
    m = BitmapMatrix.from_coo(xp.asarray(rows), xp.asarray(cols), xp.asarray(values), (n, n))
    # the rest of the diagonal is zeros, which add nothing to NumPy's sum of it
    want = np.sum(values[cols - rows == offset])
    got = host(m.trace(offset))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("offset", [1.5, "1", None])
def test_trace_of_a_non_integer_offset_names_it(offset):
    a = named("tall", "float64")
    with pytest.raises(TypeError):
        a.trace(offset)
    with pytest.raises(TypeError, match=r"offset must be an integer, got "):
        BitmapMatrix(a).trace(offset)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["tall", "dense", "zero-nnz", "last-bit", "empty"])
def test_nonzero_size_and_todense(case, dtype, xp):
    a = named(case, dtype)
    m = ours(a, xp)
    rows, cols = m.nonzero()
    want_rows, want_cols = a.nonzero()
    np.testing.assert_array_equal(host(rows), want_rows)
    np.testing.assert_array_equal(host(cols), want_cols)
    assert m.size == a.size
    np.testing.assert_array_equal(host(m.todense()), a.todense())


@pytest.mark.parametrize("part", ["real", "imag"])
@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "bool"])
def test_real_and_imag(dtype, part, xp):
    a = named("tall", dtype)
    m = ours(a, xp)
    got, want = getattr(m, part), getattr(a, part)
    got.check_format(full_check=True)
    assert got.dtype == want.dtype and got.nnz == want.nnz
    np.testing.assert_array_equal(host(got.toarray()), want.toarray())
    got.values[...] = 7  # a copy: the matrix keeps its values
    np.testing.assert_array_equal(host(m.toarray()), a.toarray())


def test_real_and_imag_of_bool():
    a = named("tall", "bool")
    np.testing.assert_array_equal(BitmapMatrix(a).real.toarray(), a.real.toarray())
    imag = BitmapMatrix(a).imag
    assert imag.dtype == np.bool_ and imag.nnz == 0  # scipy stores False; a pattern cannot


@pytest.mark.parametrize("n", [2, 3, 0.5])
def test_pow_is_elementwise_as_for_scipy_arrays(n, xp):
    a = abs(named("tall", "float64"))
    got, want = ours(a, xp) ** n, a ** n
    np.testing.assert_allclose(host(got.toarray()), want.toarray(), rtol=1e-12)
