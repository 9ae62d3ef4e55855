"""A @ x, A.T @ x, x @ A and A @ X against scipy; the two twins; the errors."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from bmsparse import BitmapMatrix, spmv, transpose
from bmsparse import spmv as spmv_function
from bmsparse.spmv import column_pointer, lanes_for, row_pointer
from tests.cases import CASES, DTYPES, assert_dense_close, host, named, ours, random_matrix

# the module: bmsparse.spmv names the function
spmv_module = importlib.import_module("bmsparse.spmv")


def dense_operand(xp, shape, dtype, seed, order="C"):
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.integers(-3, 4, shape)
    x = np.asarray(x).astype(dtype) if np.dtype(dtype) != np.bool_ else x > 0
    return xp.asarray(np.asfortranarray(x) if order == "F" else x)


def want_of(got_dtype, value):
    return np.asarray(value).astype(got_dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_matvec(case, dtype, xp):
    a = named(case, dtype)
    x = dense_operand(xp, a.shape[1], dtype, seed=1)
    got = ours(a, xp) @ x
    want = a @ host(x)
    assert_dense_close(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_transposed_matvec(case, dtype, xp):
    a = named(case, dtype)
    x = dense_operand(xp, a.shape[0], dtype, seed=2)
    assert_dense_close(ours(a, xp).T @ x, a.T @ host(x), dtype)


@pytest.mark.parametrize("dtype", ["bool", "int64", "float32", "complex128"])
@pytest.mark.parametrize("case", ["tall", "wide", "full-block", "empty"])
def test_vector_times_matrix(case, dtype, xp):
    a = named(case, dtype)
    x = dense_operand(xp, a.shape[0], dtype, seed=3)
    assert_dense_close(x @ ours(a, xp), host(x) @ a, dtype)
    # and through a lazy transpose: x @ A.T is A @ x
    y = dense_operand(xp, a.shape[1], dtype, seed=4)
    assert_dense_close(y @ ours(a, xp).T, host(y) @ a.T, dtype)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", ["int32", "float64", "complex64"])
@pytest.mark.parametrize("case", ["tall", "wide", "square", "full-block", "nx0"])
def test_matrix_times_dense_matrix(case, dtype, order, xp):
    a = named(case, dtype)
    x = dense_operand(xp, (a.shape[1], 3), dtype, seed=5, order=order)
    got = ours(a, xp) @ x
    assert got.flags.c_contiguous
    assert_dense_close(got, a @ host(x), dtype)
    y = dense_operand(xp, (a.shape[0], 2), dtype, seed=6, order=order)
    assert_dense_close(ours(a, xp).T @ y, a.T @ host(y), dtype)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("case", ["tall", "square", "full-block"])
def test_dense_matrix_times_matrix(case, order, xp):
    a = named(case, "float64")
    x = dense_operand(xp, (4, a.shape[0]), "float64", seed=7, order=order)
    got = x @ ours(a, xp)
    assert got.flags.c_contiguous
    assert_dense_close(got, host(x) @ a, "float64")
    y = dense_operand(xp, (2, a.shape[1]), "float64", seed=8, order=order)
    assert_dense_close(y @ ours(a, xp).T, host(y) @ a.T, "float64")


def test_strided_vector(xp):
    a = named("tall", "float64")
    x = dense_operand(xp, 2 * a.shape[1], "float64", seed=9)[::2]
    assert_dense_close(ours(a, xp) @ x, a @ host(x), "float64")


@pytest.mark.parametrize(("a_dtype", "x_dtype"), [
    ("float32", "float64"), ("int32", "float32"), ("bool", "float64"), ("bool", "int32"),
    ("int64", "complex64"), ("float64", "bool"), ("int32", "int64")])
def test_dtype_promotion(a_dtype, x_dtype, xp):
    a = named("tall", a_dtype)
    x = dense_operand(xp, a.shape[1], x_dtype, seed=10)
    got = ours(a, xp) @ x
    want = a @ host(x)
    assert got.dtype == np.result_type(a_dtype, x_dtype) == want.dtype
    assert_dense_close(got, want, got.dtype)


def test_spmv_function_with_transpose(xp):
    a = named("wide", "float64")
    x = dense_operand(xp, a.shape[0], "float64", seed=11)
    assert_dense_close(spmv_function(ours(a, xp), x, transpose=True), a.T @ host(x), "float64")


def test_transposed_product_does_not_form_the_transpose(monkeypatch, xp):
    a = ours(named("square", "float64"), xp)
    monkeypatch.setattr(transpose, "transpose", None)  # any call would fail
    x = dense_operand(xp, a.shape[0], "float64", seed=12)
    a.T @ x  # noqa: B018 - the call is the test
    x @ a  # noqa: B018


def test_pointers_are_kept_with_the_matrix(xp):
    a = ours(named("square", "float64"), xp)
    assert row_pointer(a) is row_pointer(a)
    assert column_pointer(a)[0] is column_pointer(a)[0]
    assert column_pointer(a)[0] is a._column_order()


def test_pointers_match_the_keys(xp):
    a = ours(named("wide", "float64"), xp)
    keys = host(a.keys)
    rows, cols = keys >> np.uint64(32), keys & np.uint64(0xFFFFFFFF)
    np.testing.assert_array_equal(host(row_pointer(a)),
                                  np.searchsorted(rows, np.arange(3), side="left"))
    order, ptr = column_pointer(a)
    np.testing.assert_array_equal(host(ptr), np.searchsorted(np.sort(cols), np.arange(10)))
    np.testing.assert_array_equal(host(order), np.lexsort((rows, cols)))


@pytest.mark.parametrize(("nblocks", "ngroups", "lanes"), [
    (0, 0, 1), (0, 5, 1), (5, 10, 1), (10, 5, 2), (31, 4, 4), (80, 10, 8), (10**6, 10, 32)])
def test_lanes_for(nblocks, ngroups, lanes):
    assert lanes_for(nblocks, ngroups) == lanes


@pytest.mark.parametrize("lanes", [1, 2, 8, 32])
@pytest.mark.parametrize("transposed", [False, True])
def test_numpy_twin_any_lanes(lanes, transposed):
    a = BitmapMatrix(named("dense", "float64"))
    x = np.random.default_rng(13).standard_normal((a.shape[0] if transposed else a.shape[1], 2))
    order, ptr = column_pointer(a) if transposed else (None, row_pointer(a))
    got = spmv_module._spmv_numpy(a.keys, a.bitmaps, a.offsets, a.values, order, ptr, lanes,
                                  x, a.shape[1] if transposed else a.shape[0])
    want = (a.to_scipy().T if transposed else a.to_scipy()) @ x
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("lanes", [1, 4, 8, 32])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_stage_cuda_equals_numpy(dtype, transposed, lanes):
    import cupy

    a = BitmapMatrix(named("dense", dtype))
    d = a.to_device()
    nout = a.shape[1] if transposed else a.shape[0]
    x = dense_operand(np, (a.shape[0] if transposed else a.shape[1], 3), dtype, seed=14)
    order, ptr = column_pointer(a) if transposed else (None, row_pointer(a))
    d_order, d_ptr = column_pointer(d) if transposed else (None, row_pointer(d))
    want = spmv_module._spmv_numpy(a.keys, a.bitmaps, a.offsets, a.values, order, ptr, lanes,
                                   x, nout)
    got = spmv_module._spmv_cuda(d.keys, d.bitmaps, d.offsets, d.values, d_order, d_ptr, lanes,
                                 cupy.asarray(x), nout, False)
    # the same summation order: equal bit for bit
    np.testing.assert_array_equal(got.get(), want)


def test_mismatch_vector(xp):
    a = ours(named("tall", "float64"), xp)
    with pytest.raises(ValueError, match=r"matmul: dimension mismatch with signature "
                       r"\(n,k=21\),\(k=4,1\?\)->\(n,1\?\)"):
        a @ xp.ones(4)


def test_mismatch_matrix(xp):
    a = ours(named("tall", "float64"), xp)
    with pytest.raises(ValueError, match=r"\(n,k=21\),\(k=5,m\)->\(n,m\) \(got shapes "
                       r"\(37, 21\) and \(5, 2\)\)"):
        a @ xp.ones((5, 2))


def test_mismatch_vector_times_matrix(xp):
    a = ours(named("tall", "float64"), xp)
    with pytest.raises(ValueError, match=r"\(n,k=37\),\(k=3,1\?\)->\(n,1\?\)"):
        xp.ones(3) @ a


def test_mismatch_transposed(xp):
    a = ours(named("tall", "float64"), xp)
    with pytest.raises(ValueError, match=r"\(n,k=37\),\(k=21,1\?\)"):
        a.T @ xp.ones(21)


@pytest.mark.parametrize("operand", [2, 2.5])
def test_scalar_operand(operand):
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(ValueError, match="scalar operands are not allowed, use '\\*' instead"):
        a @ operand
    with pytest.raises(ValueError, match="scalar operands are not allowed"):
        operand @ a


def test_three_dimensional_operand():
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(ValueError, match="x must be 1-D or 2-D, got 3-D"):
        a @ np.ones((21, 2, 2))


def test_unsupported_result_dtype():
    a = BitmapMatrix(named("tall", "bool"))
    with pytest.raises(TypeError, match="result dtype float16 is not supported"):
        a @ np.ones(21, dtype=np.float16)


@pytest.mark.gpu
def test_host_matrix_device_vector():
    import cupy

    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(TypeError, match="operands must all be on the host"):
        a @ cupy.ones(21)
    with pytest.raises(TypeError, match="operands must all be on the host"):
        a.to_device() @ np.ones(21)


def test_unsupported_operand_type():
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(TypeError, match="unsupported operand"):
        a @ "x"


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 50), n=st.integers(0, 50), density=st.floats(0, 1),
       seed=st.integers(0, 2**16), transposed=st.booleans())
def test_property_matvec(m, n, density, seed, transposed):
    a = random_matrix((m, n), density, "float64", seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(m if transposed else n)
    ours_a = BitmapMatrix(a)
    got = ours_a.T @ x if transposed else ours_a @ x
    want = a.T @ x if transposed else a @ x
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_scipy_operand_still_multiplies_sparse():
    a = named("tall", "float64")
    got = BitmapMatrix(a) @ sp.csr_array(a.T)
    assert isinstance(got, BitmapMatrix)


def test_spmv_is_exported():
    assert spmv is spmv_function
