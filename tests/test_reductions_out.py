"""Reductions as NumPy's functions call them (``numpy.sum(A)`` passes
``out=None``), and scipy's ``out`` argument of sum, mean, max, min, argmax
and argmin; against scipy's csr_array, on the host."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix
from tests.cases import host


def _pair(xp=np):
    x = np.array([[1.0, 0, 2], [0, 0, 3], [4, 5, 0]])
    return sp.csr_array(x), BitmapMatrix.from_scipy(sp.csr_array(x), device=xp is not np)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_numpy_reductions_of_a_matrix_match_scipy(name, axis):
    # numpy.sum(A) calls A.sum(axis=None, dtype=None, out=None): a TypeError
    # without ``out``; numpy.argmax fell back to the 0-d object array and
    # returned 0 (the flat argmax is 7)
    a, b = _pair()
    want = getattr(np, name)(a, axis=axis)
    want = want.toarray() if sp.issparse(want) else want
    got = getattr(np, name)(b, axis=axis)
    np.testing.assert_array_equal(got, want)
    assert np.asarray(got).dtype == np.asarray(want).dtype


@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_sum_and_mean_fill_out_as_scipy(xp, name, axis):
    a, b = _pair(xp)
    shape = () if axis is None else (3,)
    # (scipy 1.17 returns out; some versions return a new array for axis=None)
    want, got = np.zeros(shape, np.float32), xp.zeros(shape, np.float32)
    want = np.asarray(getattr(a, name)(axis, None, want), dtype=np.float32)
    assert getattr(b, name)(axis, None, got) is got
    np.testing.assert_array_equal(host(got), want)
    assert got.dtype == np.float32


def test_out_on_the_other_side_is_refused(xp):
    _, b = _pair(xp)
    other = np.zeros(3) if xp is not np else None
    if other is None:
        cupy = pytest.importorskip("cupy")
        try:
            other = cupy.zeros(3)
        except Exception:  # no device: nothing on the other side
            pytest.skip("no CUDA device")
    with pytest.raises(TypeError, match="in the matrix's library"):
        b.sum(axis=0, out=other)


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_sum_and_mean_refuse_an_out_of_another_shape(name):
    a, b = _pair()
    with pytest.raises(ValueError, match="out dimensions do not match shape"):
        getattr(a, name)(axis=0, out=np.zeros(4))
    with pytest.raises(ValueError, match=r"out has shape \(4,\); the result's is \(3,\)"):
        getattr(b, name)(axis=0, out=np.zeros(4))


@pytest.mark.parametrize("name", ["max", "min", "nanmax", "nanmin", "argmax", "argmin"])
def test_extremes_take_out_none_and_refuse_an_array(name):
    a, b = _pair()
    want = getattr(a, name)(0, None)
    np.testing.assert_array_equal(getattr(b, name)(0, None),
                                  want.toarray() if sp.issparse(want) else want)
    with pytest.raises(ValueError, match="does not support an 'out' parameter"):
        getattr(a, name)(axis=0, out=np.zeros(3))
    with pytest.raises(ValueError, match="does not support an 'out' parameter"):
        getattr(b, name)(axis=0, out=np.zeros(3))


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "argmax", "argmin", "nanmax"])
@pytest.mark.parametrize("axis", [(0, 1), (1, 0), (-2, -1), (0,), (1,), (-1,)])
def test_tuple_axes_as_scipy(xp, name, axis):
    a, b = _pair(xp)
    want = getattr(a, name)(axis=axis)
    want = want.toarray() if sp.issparse(want) else want
    # (the GPU's sums may differ from scipy's in the last bit: another order)
    np.testing.assert_allclose(host(getattr(b, name)(axis=axis)), want, rtol=1e-15, atol=0)


@pytest.mark.parametrize("axis", [(0, 0), (1, -1), (0, None), ((0,), 1), (0, 2)])
def test_tuple_axes_naming_an_axis_twice_or_none_are_refused(axis):
    _, b = _pair()
    with pytest.raises(ValueError, match="axis must"):
        b.sum(axis=axis)
