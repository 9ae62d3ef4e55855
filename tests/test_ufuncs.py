"""Element-wise functions (sqrt, ..., sign, round), eliminate_zeros, maximum and
minimum, argmax and argmin, nanmax and nanmin, tocsc and asformat against
scipy's csr_array (NumPy's dense results where scipy's differ)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import SparseEfficiencyWarning

from bmsparse import BitmapMatrix
from tests.cases import CASES, DTYPES, assert_dense_close, host, named, ours, random_matrix
from tests.helpers import assert_same_csr
from tests.test_reductions import with_nans

UFUNCS = ["sqrt", "sin", "tan", "arcsin", "arcsinh", "arctan", "arctanh", "sinh", "tanh",
          "expm1", "log1p", "deg2rad", "rad2deg", "floor", "ceil", "trunc", "rint", "sign"]
#: fewer cases than CASES where many functions or arguments multiply them
#: (the whole suite has a time budget): empty, 1 x 1, not multiples of 8
#: with stored zeros, bit 63, a lone last bit
SOME_CASES = ["empty", "1x1", "dense", "full-block", "last-bit"]
INEXACT = ["float32", "float64", "complex64", "complex128"]


def assert_same_matrix(got: BitmapMatrix, want) -> None:
    """Canonical blocks, scipy's dtype, and scipy's structure (stored zeros
    included) and values."""
    got.check_format(full_check=True)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert_same_csr(got.to_scipy(), want)


def scipy_or_none(f):
    """``f()``, or None where scipy raises for the dtype (NumPy's warnings off)."""
    with np.errstate(all="ignore"):
        try:
            return f()
        except (TypeError, ValueError):
            return None


# --- sqrt, ..., sign, round ---------------------------------------------------

@pytest.mark.parametrize("name", UFUNCS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", SOME_CASES)
def test_ufunc(case, dtype, name, xp):
    a = named(case, dtype)
    m = ours(a, xp)
    want = scipy_or_none(getattr(a, name))
    if want is None:  # no NumPy loop for the dtype (floor of complex), or float16 (sqrt of bool)
        with pytest.raises(TypeError, match=rf"{name} does not support dtype {dtype}; "
                                            "supported: "):
            getattr(m, name)()
        return
    with np.errstate(all="ignore"):
        got = getattr(m, name)()
    assert_same_matrix(got, want)
    assert_same_csr(m.to_scipy(), a)  # the matrix itself is unchanged


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "rint", "sign", "sin"])
def test_ufunc_keeps_the_entries_that_become_zero(name, xp):
    a = sp.csr_array((np.array([0.25, -0.0, 0.0, 3.0, -0.5]),
                      (np.array([0, 0, 7, 8, 12]), np.array([1, 9, 7, 0, 3]))), shape=(13, 10))
    want = getattr(a, name)()
    assert want.nnz == 5 and want.count_nonzero() < 5  # scipy keeps its zeros
    assert_same_matrix(getattr(ours(a, xp), name)(), want)


@pytest.mark.parametrize("name", ["sqrt", "floor"])
def test_ufunc_of_a_lazy_transpose(name, xp):
    a = abs(named("wide", "float64"))
    assert_same_matrix(getattr(ours(a, xp).T, name)(), getattr(sp.csr_array(a.T), name)())


@pytest.mark.parametrize("ndigits", [None, 0, 1, 2, -1, np.int64(1)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["empty", "tall", "dense", "full-block"])
def test_round(case, dtype, ndigits, xp):
    a = named(case, dtype)
    if dtype in INEXACT:
        a = a * 1.37  # fractions in real and imaginary parts, zeros kept
    rounded = (lambda m: round(m)) if ndigits is None else (lambda m: round(m, ndigits))
    want = scipy_or_none(lambda: rounded(a))
    if want is None:  # bool: NumPy's result is float16
        with pytest.raises(TypeError, match=f"round does not support dtype {dtype}"):
            rounded(ours(a, xp))
        return
    assert_same_matrix(rounded(ours(a, xp)), want)


def test_round_of_a_non_integer_ndigits_raises():
    a = named("tall", "float64")
    with pytest.raises(TypeError):
        round(a, 1.5)
    with pytest.raises(TypeError, match="ndigits must be an integer, got float"):
        round(BitmapMatrix(a), 1.5)


def test_ufunc_of_bool_names_the_cast():
    m = BitmapMatrix(named("tall", "bool"))
    with pytest.raises(TypeError, match=r"sqrt does not support dtype bool; supported: "
                                        r"int32, int64, float32, .*A\.astype"):
        m.sqrt()
    np.testing.assert_allclose(m.astype(np.float32).sqrt().toarray(),
                               np.sqrt(m.toarray().astype(np.float32)))


# --- eliminate_zeros ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_eliminate_zeros(case, dtype, xp):
    a = named(case, dtype)
    m = ours(a, xp)
    assert m.eliminate_zeros() is None
    want = a.copy()
    want.eliminate_zeros()
    assert_same_matrix(m, want)
    assert m.nnz == want.nnz


def test_eliminate_zeros_drops_negative_zero_and_keeps_nan(xp):
    a = sp.csr_array((np.array([-0.0, np.nan, 0.0, 2.0, 0.0]),
                      (np.array([0, 3, 8, 8, 15]), np.array([0, 9, 1, 2, 16]))), shape=(16, 17))
    m = ours(a, xp)
    m.eliminate_zeros()
    want = a.copy()
    want.eliminate_zeros()
    assert want.nnz == 2
    assert_same_matrix(m, want)
    assert m.nblocks == 2  # the blocks left empty are gone


def test_eliminate_zeros_without_zeros_keeps_the_arrays(xp):
    a = named("tall", "float64")
    a.eliminate_zeros()
    m = ours(a, xp)
    arrays = (m.keys, m.bitmaps, m.offsets, m.values)
    m.eliminate_zeros()
    assert all(x is y for x, y in zip(arrays, (m.keys, m.bitmaps, m.offsets, m.values)))


def test_eliminate_zeros_keeps_what_is_derived_valid(xp):
    a = named("square", "float64")
    assert (a.data == 0).any()
    want = a.copy()
    want.eliminate_zeros()
    m = ours(a, xp)
    x = xp.arange(1.0, 65.0)
    # derive and keep: row pointer, SpMV launches both ways, column order
    _ = m @ x, m.T @ x, m.tocsr(), m.sum(axis=0)
    lazy = m.T  # not used before: its blocks come from the new arrays
    used = m.T
    used.toarray()  # its blocks are its own now
    shared = m.astype(np.complex128, copy=False)  # shares keys, bitmaps and offsets
    m.eliminate_zeros()
    assert m.nnz == want.nnz < a.nnz
    assert_same_matrix(m, want)
    assert_dense_close(m @ x, want @ host(x), "float64")
    assert_dense_close(m.T @ x, want.T @ host(x), "float64")
    assert_dense_close(m.sum(axis=0), want.sum(axis=0), "float64")
    assert_same_matrix(lazy, sp.csr_array(want.T))
    assert_same_matrix(used, sp.csr_array(a.T))
    assert_same_matrix(shared, a.astype(np.complex128))


def test_eliminate_zeros_of_a_lazy_transpose(xp):
    a = named("wide", "int64")
    m = ours(a, xp)
    t = m.T
    t.eliminate_zeros()
    want = sp.csr_array(a.T)
    want.eliminate_zeros()
    assert want.nnz < a.nnz
    assert_same_matrix(t, want)
    assert_same_matrix(m, a)


# --- maximum and minimum -----------------------------------------------------

@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_extremum_of_two_matrices(case, dtype, name, xp):
    a = named(case, dtype)
    b = random_matrix(a.shape, 0.3, dtype, seed=1)
    want = getattr(a, name)(b)
    assert_same_matrix(getattr(ours(a, xp), name)(ours(b, xp)), want)
    assert_same_matrix(getattr(ours(b, xp), name)(ours(a, xp)), getattr(b, name)(a))


@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize(("dtype_a", "dtype_b"), [
    ("bool", "int32"), ("int32", "bool"), ("int32", "float32"), ("float32", "int64"),
    ("bool", "complex64"), ("float64", "complex64"), ("int32", "int64")])
def test_extremum_promotes_as_scipy(dtype_a, dtype_b, name, xp):
    a = named("tall", dtype_a)
    b = named("tall", dtype_b, seed=1)
    assert_same_matrix(getattr(ours(a, xp), name)(ours(b, xp)), getattr(a, name)(b))


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_extremum_with_a_library_operand(name, xp):
    a, b = named("square", "float64"), named("square", "float64", seed=1)
    other = b if xp is np else ours(b, xp).tocsr()  # scipy on the host, cupyx on the GPU
    assert_same_matrix(getattr(ours(a, xp), name)(other), getattr(a, name)(b))


@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_extremum_propagates_nan_as_numpy(dtype, name, xp):
    a = with_nans(dtype)
    b = sp.csr_array(with_nans(dtype).toarray()[::-1, ::-1])  # NaNs elsewhere
    got = getattr(ours(a, xp), name)(ours(b, xp))
    got.check_format(full_check=True)
    want = getattr(np, name)(a.toarray(), b.toarray())
    assert np.isnan(want).sum() >= 3
    np.testing.assert_array_equal(host(got.toarray()), want)  # (NaN equals NaN here)
    assert got.nnz == np.count_nonzero(want)  # no stored zeros


SCALARS = [2, -2, 0, 0.0, -1.5, 2.5, np.float32(2.5), np.float64(-1.5), np.int64(-1), True,
           False, 1j, -1j, np.nan]


@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["tall"])
def test_extremum_with_a_scalar(case, dtype, name, scalar, xp):
    a = named(case, dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        want = getattr(a, name)(scalar)
    if any(issubclass(w.category, SparseEfficiencyWarning) for w in caught):
        message = re.escape(f"taking the {name} with {scalar!r} results in a dense matrix")
        with pytest.warns(SparseEfficiencyWarning, match=message):
            got = getattr(ours(a, xp), name)(scalar)
    else:
        got = getattr(ours(a, xp), name)(scalar)
    assert_same_matrix(got, want)


@pytest.mark.parametrize("shape", [(37, 21), (21,), (1, 21), (37, 1), (2, 37, 21)])
@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", ["int32", "float64", "complex64"])
def test_extremum_with_a_dense_array(dtype, name, shape, xp):
    a = named("tall", dtype)
    d = np.random.default_rng(3).integers(-3, 4, shape).astype(np.float32)
    want = getattr(a, name)(d)
    got = getattr(ours(a, xp), name)(xp.asarray(d))
    assert isinstance(got, xp.ndarray)
    assert_dense_close(got, want, want.dtype)


def test_extremum_with_a_list():
    a = named("1x1", "float64")
    np.testing.assert_array_equal(BitmapMatrix(a).maximum([[100]]), a.maximum([[100]]))


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_extremum_of_different_shapes_raises(name, xp):
    a = named("tall", "float64")
    m = ours(a, xp)
    with pytest.raises(ValueError, match=r"inconsistent shapes \(37, 21\) and \(21, 37\)"):
        getattr(m, name)(ours(sp.csr_array(a.T), xp))
    with pytest.raises(ValueError, match=r"inconsistent shapes \(37, 21\) and \(3, 3\)"):
        getattr(m, name)(xp.ones((3, 3)))


@pytest.mark.parametrize("other", ["2", object(), None])
def test_extremum_of_an_unknown_operand_raises(other):
    with pytest.raises(TypeError, match=f"minimum: other must be a sparse matrix, a dense "
                                        f"array or a scalar, got {type(other).__name__}"):
        BitmapMatrix(named("tall", "float64")).minimum(other)


def test_extremum_of_an_unsupported_result_dtype_raises():
    a = named("tall", "bool")
    assert a.maximum(np.int8(-1)).dtype == np.int8  # scipy's; bmsparse stores no int8
    with pytest.raises(TypeError, match="result dtype int8 is not supported"):
        BitmapMatrix(a).maximum(np.int8(-1))


@pytest.mark.gpu
def test_extremum_of_host_and_device_raises():
    import cupy

    a = named("tall", "float64")
    with pytest.raises(TypeError, match="operands must all be on the host"):
        ours(a, cupy).maximum(BitmapMatrix(a))
    with pytest.raises(TypeError, match="operands must all be on the host"):
        ours(a, cupy).minimum(np.ones(a.shape))


# --- argmax and argmin -------------------------------------------------------

def stored_arg(a: sp.csr_array, name: str) -> int:
    """The flat index of the first stored extreme in row-major order (scipy
    1.17's ``argmax(explicit=True)`` returns its place among the stored entries)."""
    coo = a.tocoo()
    coo.sum_duplicates()
    place = getattr(np, name)(coo.data)
    return int(coo.row[place]) * a.shape[1] + int(coo.col[place])


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [c for c in CASES if c not in ("empty", "0xn", "nx0", "wide")])
def test_argmax_argmin(case, dtype, name, axis, explicit, xp):
    a = named(case, dtype)
    m = ours(a, xp)
    if axis is None and explicit:
        if a.nnz == 0:
            with pytest.raises(ValueError):
                getattr(a, name)(explicit=True)
            with pytest.raises(ValueError, match=f"cannot apply {name} with explicit=True to "
                                                 "a matrix with no stored entries"):
                getattr(m, name)(explicit=True)
            return
        want = stored_arg(a, name)
    else:
        want = getattr(a, name)(axis=axis, explicit=explicit)
    got = getattr(m, name)(axis=axis, explicit=explicit)
    if axis is None and xp is np:
        assert type(got) is int
    if axis is not None:
        assert host(got).dtype == np.int64
    np.testing.assert_array_equal(host(got), want)


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_of_stored_zeros_before_missing_ones(name, axis, explicit, xp):
    # [[0* -1  .  .]    0*: a stored zero, .: a missing one
    #  [ 3  0*  2  .]
    #  [ 5  .   7  .]
    #  [ .  0*  .  .]]
    a = sp.csr_array((np.array([0.0, -1, 3, 0, 2, 5, 7, 0]),
                      np.array([0, 1, 0, 1, 2, 0, 2, 1]), np.array([0, 2, 5, 7, 8])),
                     shape=(4, 4))
    if axis is None and explicit:
        want = stored_arg(a, name)
    else:
        want = getattr(a, name)(axis=axis, explicit=explicit)
        if not explicit:  # scipy's, as NumPy's on the dense matrix
            np.testing.assert_array_equal(want, getattr(np, name)(a.toarray(), axis=axis))
    got = getattr(ours(a, xp), name)(axis=axis, explicit=explicit)
    np.testing.assert_array_equal(host(got), want)


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_argmax_argmin_of_nan_as_numpy(dtype, name, axis, explicit, xp):
    a = with_nans(dtype)
    if explicit:
        # scipy's per line (the first NaN among the stored entries)
        want = stored_arg(a, name) if axis is None else getattr(a, name)(axis=axis,
                                                                         explicit=True)
    else:
        # scipy picks a missing zero over a NaN: NumPy's on the dense matrix
        want = getattr(np, name)(a.toarray(), axis=axis)
    got = getattr(ours(a, xp), name)(axis=axis, explicit=explicit)
    np.testing.assert_array_equal(host(got), want)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_of_a_lazy_transpose(name, xp):
    a = named("wide", "float64")
    m = ours(a, xp).T
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(host(getattr(m, name)(axis=axis)),
                                      getattr(sp.csr_array(a.T), name)(axis=axis))


def test_argmax_argmin_past_int64(xp):
    # 2**35 x 2**35: flat indices up to 2**70; a row pointer would not fit in memory
    shape = (2**35, 2**35)
    m = BitmapMatrix.from_coo(xp.asarray([0, 2**34]), xp.asarray([0, 5]),
                              xp.asarray([-2.0, 3.0]), shape)
    assert m.argmax() == 2**34 * 2**35 + 5
    assert m.argmin() == 0
    assert m.argmax(explicit=True) == 2**34 * 2**35 + 5
    assert (-m).argmin() == 2**34 * 2**35 + 5
    assert (-m).argmax() == 0
    # a missing zero beats the stored entries: the first one missing
    assert BitmapMatrix.from_coo(xp.asarray([0]), xp.asarray([0]), xp.asarray([-2.0]),
                                 shape).argmax() == 1


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize(("shape", "axis", "message"), [
    ((0, 0), None, r"to an empty matrix, got shape \(0, 0\)"),
    ((0, 5), None, r"to an empty matrix, got shape \(0, 5\)"),
    ((6, 0), None, r"to an empty matrix, got shape \(6, 0\)"),
    ((0, 5), 0, r"along a zero-sized dimension: axis 0 of shape \(0, 5\)"),
    ((6, 0), -1, r"along a zero-sized dimension: axis 1 of shape \(6, 0\)")])
def test_argmax_argmin_of_an_empty_axis_raise(shape, axis, message, name):
    a = sp.csr_array(shape, dtype=np.float64)
    with pytest.raises(ValueError):
        getattr(a, name)(axis=axis)
    with pytest.raises(ValueError, match=f"cannot apply {name} {message}"):
        getattr(BitmapMatrix(a), name)(axis=axis)


@pytest.mark.parametrize(("shape", "axis"), [((0, 5), 1), ((6, 0), 0)])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_along_a_non_empty_axis_of_an_empty_matrix(name, shape, axis, xp):
    a = sp.csr_array(shape, dtype=np.float64)
    got = host(getattr(ours(a, xp), name)(axis=axis))
    want = getattr(a, name)(axis=axis)
    assert got.shape == want.shape == (0,)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [-1, -2])
def test_argmax_argmin_of_a_negative_axis(axis, name):
    a = named("tall", "float64")
    np.testing.assert_array_equal(getattr(BitmapMatrix(a), name)(axis=axis),
                                  getattr(a, name)(axis=axis))


@pytest.mark.parametrize("name", ["argmax", "argmin", "nanmax", "nanmin"])
def test_bad_axis_raises(name):
    with pytest.raises(ValueError, match=r"axis must be None, 0, 1, -2 or -1, or a tuple of them, got 2"):
        getattr(BitmapMatrix(named("tall", "float64")), name)(axis=2)


# --- nanmax and nanmin -------------------------------------------------------

def _dense(x):
    return x.toarray() if sp.issparse(x) else np.asarray(x)


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["nanmax", "nanmin"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["1x1", "zero-nnz", "tall", "dense"])
def test_nanmax_nanmin(case, dtype, name, axis, explicit, xp):
    a = named(case, dtype)
    got = getattr(ours(a, xp), name)(axis=axis, explicit=explicit)
    if axis is None and xp is np:
        assert isinstance(got, np.generic)
    assert_dense_close(got, _dense(getattr(a, name)(axis=axis, explicit=explicit)), dtype)


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["nanmax", "nanmin"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_nanmax_nanmin_skip_nan(dtype, name, axis, explicit, xp):
    # with_nans, plus a column (5) and a row (8) that hold only NaNs and a
    # stored NaN in every entry of row 9
    a = with_nans(dtype).tolil()
    a[:, 5] = 0
    a[2, 5] = a[7, 5] = np.nan
    a[8, :] = 0
    a[8, 4] = np.nan
    a[9, :] = np.nan
    a = sp.csr_array(a)
    want = _dense(getattr(a, name)(axis=axis, explicit=explicit))
    got = host(getattr(ours(a, xp), name)(axis=axis, explicit=explicit))
    if explicit and axis is not None:
        assert np.isnan(want).any()  # lines of NaNs only (a line that misses one gives 0)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_nanmax_of_only_nans():
    a = sp.csr_array(np.full((2, 3), np.nan))
    assert np.isnan(a.nanmax()) and np.isnan(BitmapMatrix(a).nanmax())
    assert np.isnan(BitmapMatrix(a).nanmin(explicit=True))


# --- tocsc and asformat ------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_tocsc(case, dtype, xp):
    a = named(case, dtype)
    m = ours(a, xp)
    if xp is not np and dtype.startswith("int"):
        with pytest.raises(TypeError, match=f"does not support dtype {dtype}"):
            m.tocsc()
        return
    got = m.tocsc()
    if xp is np:
        assert isinstance(got, sp.csc_array)
    else:
        import cupyx.scipy.sparse as csp

        assert isinstance(got, csp.csc_matrix)
        got = got.get()
    want = a.tocsc()
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.has_sorted_indices
    for part in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(got, part), getattr(want, part))


@pytest.mark.parametrize("format", [None, "bmp", "csr", "csc", "coo", "bsr", "dia", "dok",
                                    "lil", "array", "dense"])
@pytest.mark.parametrize("dtype", ["bool", "int64", "float64", "complex64"])
def test_asformat(dtype, format):
    a = named("tall", dtype)
    m = BitmapMatrix(a)
    got = m.asformat(format)
    if format in (None, "bmp"):
        assert got is m
        copy = m.asformat(format, copy=True)
        assert copy is not m and copy.keys is not m.keys
        assert_same_matrix(copy, a)
        return
    want = a.asformat(format)
    assert type(got) is type(want)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(_dense(got), _dense(want))


@pytest.mark.parametrize("format", ["bsr", "dia", "dok", "lil"])
@pytest.mark.parametrize("dtype", ["bool", "int64", "float64", "complex64"])
def test_to_a_host_only_format_as_scipy(dtype, format):
    # A.tobsr() ... A.tolil(), as code written for scipy calls them
    a = named("tall", dtype)
    got = getattr(BitmapMatrix(a), "to" + format)()
    want = getattr(a, "to" + format)()
    assert type(got) is type(want) and got.dtype == want.dtype
    np.testing.assert_array_equal(_dense(got), _dense(want))


def test_tobsr_takes_scipys_blocksize():
    a = named("tall", "float64")[:36]  # (36 x 21: rows and columns divided by 4 and 3)
    got = BitmapMatrix(a).tobsr(blocksize=(4, 3))
    want = a.tobsr(blocksize=(4, 3))
    assert got.blocksize == want.blocksize == (4, 3)
    np.testing.assert_array_equal(got.toarray(), want.toarray())


@pytest.mark.parametrize("format", ["csr", "csc", "coo", "array", "dense"])
def test_asformat_on_the_gpu(format, xp):
    a = named("tall", "float64")
    got = ours(a, xp).asformat(format)
    dense = got if format in ("array", "dense") else got.toarray()
    np.testing.assert_array_equal(host(dense), a.toarray())


@pytest.mark.parametrize("format", ["CSR", "bsc", "matrix"])
def test_asformat_of_an_unknown_format_raises(format):
    a = named("tall", "float64")
    with pytest.raises(ValueError):
        a.asformat(format)
    with pytest.raises(ValueError, match=f"format {format!r} is unknown; use one of None, 'bmp'"):
        BitmapMatrix(a).asformat(format)


@pytest.mark.gpu
def test_asformat_of_a_host_only_format_on_the_gpu_raises():
    import cupy

    m = ours(named("tall", "float64"), cupy)
    with pytest.raises(ValueError, match=r"format 'lil' is not one cupyx.scipy.sparse converts"):
        m.asformat("lil")
    for format in ("bsr", "dia", "dok", "lil"):
        with pytest.raises(ValueError, match=f"format {format!r} is not one cupyx"):
            getattr(m, "to" + format)()


@pytest.mark.parametrize("convert", [lambda m: m.tocoo(), lambda m: m.asformat("coo", copy=True)])
def test_coo_arrays_are_their_own(convert, xp):
    # the block arrays are never written: a COO form's values are a copy
    a = named("wide", "float64")
    m = ours(a, xp)
    coo = convert(m)
    coo.data[:] = 7
    np.testing.assert_array_equal(host(m.toarray()), a.toarray())
    assert float(m.sum()) == pytest.approx(a.sum())


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_dense_result_warning_points_at_the_caller(name):
    m = BitmapMatrix(named("wide", "float64"))
    with pytest.warns(SparseEfficiencyWarning) as caught:
        getattr(m, name)(1 if name == "maximum" else -1)
    assert caught[0].filename == __file__


@pytest.mark.parametrize("op", [
    lambda m, s: m * s, lambda m, s: s * m, lambda m, s: m / s, lambda m, s: m.multiply(s),
    lambda m, s: m.maximum(s), lambda m, s: m.minimum(s)])
@pytest.mark.parametrize("scalar", ["fraction", "decimal"])
def test_scalars_without_a_numpy_dtype_are_named(scalar, op):
    from decimal import Decimal
    from fractions import Fraction

    s = Fraction(1, 2) if scalar == "fraction" else Decimal("0.5")
    m = BitmapMatrix(named("wide", "float64"))
    with pytest.raises(TypeError, match=f"{type(s).__name__} .* has no NumPy dtype; use a "
                                        r"Python or NumPy int, float or complex"):
        op(m, s)
