"""Comparisons (A < s, A != B, A == dense, ...) against NumPy and scipy's csr_array."""

from __future__ import annotations

import operator
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix, _compare
from tests.cases import CASES, DTYPES, host, named, ours
from tests.helpers import assert_same_csr

OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
       "<=": operator.le, ">=": operator.ge}


def expected(op: str, x, y):
    """NumPy's ``x op y`` (its complex ordering warns at NaN; ours does not)."""
    with np.errstate(invalid="ignore"):
        return OPS[op](x, y)


def with_specials(a: sp.csr_array) -> sp.csr_array:
    """``a`` with a NaN and an infinity among its stored entries (floats)."""
    a = a.copy()
    if a.dtype.kind in "fc" and a.nnz >= 3:
        a.data[1] = np.nan
        a.data[2] = -np.inf
    return a


def stored(a: sp.csr_array) -> sp.csr_array:
    """Ones at every stored entry of ``a``."""
    return sp.csr_array((np.ones(a.nnz), a.indices, a.indptr), shape=a.shape)


def check_pattern(got: BitmapMatrix, want: np.ndarray) -> None:
    """``got`` is a bool matrix storing exactly the True entries of ``want``."""
    assert isinstance(got, BitmapMatrix)
    assert got.dtype == np.bool_ and got.values is None
    got.check_format(full_check=True)
    np.testing.assert_array_equal(got.get().toarray(), want)
    assert got.nnz == np.count_nonzero(want)


def zero_holds(op: str, x, y) -> bool:
    return bool(expected(op, np.zeros((), dtype=np.result_type(x)), y))


def compared(op: str, left, right):
    """``left op right``, the efficiency warning (expected where the result is
    about dense) caught."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.SparseEfficiencyWarning)
        return OPS[op](left, right)


SCALARS = [0, 1, -2, 0.5, -0.5, np.nan, np.inf, True]


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_with_scalars_against_numpy_and_scipy(xp, dtype, op):
    a = with_specials(named("tall", dtype, seed=3))
    dense = a.toarray()
    mat = ours(a, xp)
    for s in SCALARS:
        want = expected(op, dense, s)
        dense_result = zero_holds(op, dense, s)
        if dense_result:
            with pytest.warns(sp.SparseEfficiencyWarning, match=f"using {op} is inefficient"):
                got = OPS[op](mat, s)
        else:
            got = OPS[op](mat, s)
            # where the result is sparse, scipy agrees entry for entry
            assert_same_csr(got.get().to_scipy(), expected(op, a, s))
        check_pattern(got, want)


@pytest.mark.parametrize("case", CASES)
def test_with_scalars_every_shape(xp, case):
    a = with_specials(named(case, "float64", seed=5))
    mat = ours(a, xp)
    for op in OPS:
        for s in (0, 0.5, -1.5, np.nan):
            check_pattern(compared(op, mat, s), expected(op, a.toarray(), s))


@pytest.mark.parametrize("op", list(OPS))
def test_reflected_and_numpy_scalars(xp, op):
    a = named("square", "float64", seed=2)
    mat = ours(a, xp)
    for s in (np.float64(0.25), np.int32(-1), np.array(0.25), xp.asarray(0.25)):
        want = expected(op, a.toarray(), host(s))
        check_pattern(compared(op, mat, s), want)
        # s op A is A op' s with the mirrored operator, as for numbers
        check_pattern(compared(op, s, mat), expected(op, host(s), a.toarray()))


@pytest.mark.parametrize("dtype", ["int32", "int64", "float64", "bool"])
def test_scalars_past_64_bits(xp, dtype):
    a = named("dense", dtype, seed=1)
    mat = ours(a, xp)
    # (NumPy compares bool arrays with such ints only as integers)
    dense = a.toarray().astype(np.int64) if dtype == "bool" else a.toarray()
    # (2**63 and 2**64 - 1 fit NumPy's uint64 but not the int64 NumPy takes a
    # bool matrix's ints in)
    for s in (2**63, 2**64 - 1, 2**70, -(2**63) - 1, -(2**70)):
        for op in OPS:
            check_pattern(compared(op, mat, s), expected(op, dense, s))


@pytest.mark.parametrize("op", ["<", ">", "<=", ">="])
def test_complex_ordering_as_numpy(xp, op):
    rng = np.random.default_rng(7)
    d = (rng.integers(-2, 3, (12, 10)) + 1j * rng.integers(-2, 3, (12, 10))).astype(complex)
    d[rng.random(d.shape) < 0.4] = 0
    d[0, 0], d[1, 1], d[2, 2] = complex(1, np.nan), complex(np.nan, 0), complex(0, 1)
    mat = ours(sp.csr_array(d), xp)
    for s in (0, 1, 1j, -1j, 1 + 1j, complex(0, np.nan)):
        check_pattern(compared(op, mat, s), expected(op, d, s))
    other = d[::-1].copy()
    check_pattern(compared(op, mat, ours(sp.csr_array(other), xp)), expected(op, d, other))


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("int32", "float32"),
                                    ("bool", "int64"), ("complex128", "float64"),
                                    ("bool", "bool")])
def test_two_matrices_against_numpy_and_scipy(xp, dtypes, op):
    a = with_specials(named("tall", dtypes[0], seed=11))
    b = named("tall", dtypes[1], seed=12)
    # b shares some of a's entries, with a's own values: equal there
    shared = sp.csr_array(a.multiply(named("tall", "bool", seed=13)))
    if b.dtype.kind != "c":
        shared = shared.real
    b = sp.csr_array((b - b.multiply(shared.astype(bool)) + shared).astype(dtypes[1]))
    want = expected(op, a.toarray(), b.toarray())
    if zero_holds(op, a.dtype.type(0), b.dtype.type(0)):
        with pytest.warns(sp.SparseEfficiencyWarning, match="two sparse matrices"):
            got = OPS[op](ours(a, xp), ours(b, xp))
    else:
        got = OPS[op](ours(a, xp), ours(b, xp))
        if "complex128" not in dtypes or op in ("==", "!="):
            assert_same_csr(got.get().to_scipy(), expected(op, a, b))
    check_pattern(got, want)


def test_two_matrices_every_shape(xp):
    for case in CASES:
        a, b = named(case, "float64", seed=1), named(case, "float64", seed=2)
        for op in OPS:
            check_pattern(compared(op, ours(a, xp), ours(b, xp)),
                          expected(op, a.toarray(), b.toarray()))


def test_with_a_scipy_matrix_on_the_host():
    a, b = named("square", "float64", seed=1), named("square", "float64", seed=2)
    check_pattern(BitmapMatrix(a) != b, a.toarray() != b.toarray())


def test_with_dense_arrays_is_dense(xp):
    a = named("wide", "float64", seed=4)
    mat = ours(a, xp)
    dense = a.toarray()
    rng = np.random.default_rng(0)
    for other in (rng.integers(-1, 2, a.shape).astype(float), dense[:1], dense[:, :1]):
        for op in OPS:
            got = OPS[op](mat, xp.asarray(other))
            assert type(got) is type(xp.asarray(other)) and got.dtype == np.bool_
            np.testing.assert_array_equal(host(got), expected(op, dense, other))
    with pytest.raises(ValueError, match="inconsistent shapes"):
        mat < xp.ones((2, 3))  # noqa: B015


def test_shape_mismatch_is_a_value_error(xp):
    a, b = ours(named("tall", "float64"), xp), ours(named("wide", "float64"), xp)
    for op in OPS:
        with pytest.raises(ValueError, match=r"inconsistent shapes \(37, 21\) and \(9, 70\)"):
            OPS[op](a, b)


def test_non_numbers_are_not_compared(xp):
    mat = ours(named("tall", "float64"), xp)
    with pytest.raises(TypeError, match="not supported"):
        mat < "x"  # noqa: B015
    with pytest.raises(TypeError, match="not supported"):
        mat >= None  # noqa: B015
    assert (mat == "x") is False  # Python's fallback: identity


def test_dense_results_past_the_limit_are_refused(xp, monkeypatch):
    mat = ours(sp.csr_array((2**20, 2**20)), xp)
    with pytest.raises(MemoryError, match="compare with != instead"):
        compared("==", mat, 0)
    # a thin shape of few entries a block: 2^33 x 1 is 2^30 blocks (24 GiB)
    thin = BitmapMatrix((2**33, 1))
    with pytest.raises(MemoryError, match="all 8589934592 x 1 entries"):
        compared(">=", thin if xp is np else thin.to_device(), 0)
    # "tall", 37 x 21, is 5 x 3 blocks
    monkeypatch.setattr(_compare, "MAX_DENSE_BLOCKS", 5 * 3 - 1)
    a = ours(named("tall", "float64"), xp)
    with pytest.raises(MemoryError, match="all 37 x 21 entries; compare with > instead"):
        compared("<=", a, 1)
    monkeypatch.setattr(_compare, "MAX_DENSE_BLOCKS", 5 * 3)
    check_pattern(compared("<=", a, 1), named("tall", "float64").toarray() <= 1)


def test_pattern_matrices(xp):
    a = named("square", "bool", seed=6)
    mat = ours(a, xp)
    for op in OPS:
        for s in (0, 1, True, False, 0.5, 2):
            check_pattern(compared(op, mat, s), expected(op, a.toarray(), s))


def test_scalars_keep_numpys_promotion(xp):
    # a float64 scalar (NumPy's or a 0-d array) compares a float32 matrix in
    # float64, a Python float in float32: 0.1 stored as float32 is above 0.1
    a = sp.csr_array(np.array([[0.1, 0], [0, 1]], dtype=np.float32))
    mat = ours(a, xp)
    for s in (np.float64(0.1), np.array(0.1), xp.asarray(0.1), 0.1, np.float32(0.1)):
        check_pattern(mat > s, a.toarray() > host(s)[()] if hasattr(s, "shape") else
                      a.toarray() > s)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_matrices_compare_exactly_with_uint64_scalars(xp, dtype):
    # NumPy compares int64 with uint64 exactly; their common type, float64,
    # would round 2**63 - 1 up to 2**63
    info = np.iinfo(dtype)
    d = np.array([[info.max, 0, 5], [0, info.min, info.max - 1]], dtype=dtype)
    mat = ours(sp.csr_array(d), xp)
    scalars = [np.uint64(2**63), np.uint64(2**63 - 1), np.uint64(2**64 - 1), np.uint64(5),
               np.array(2**63, dtype=np.uint64), np.uint64(info.max), np.int64(info.max - 1)]
    for s in scalars:
        for op in OPS:
            check_pattern(compared(op, mat, s), expected(op, d, s))


#: the far-apart places of the 2**33 x 2**33 matrices below
HYPER_N = 2**33
HYPER_AT = [(0, HYPER_N - 1), (5, 7), (2**32, 3), (HYPER_N - 1, 0)]


def hypersparse(xp, values) -> BitmapMatrix:
    """A 2**33 x 2**33 matrix storing ``values`` at ``HYPER_AT``."""
    rows, cols = np.array(HYPER_AT).T
    mat = BitmapMatrix.from_coo(rows, cols, values, (HYPER_N, HYPER_N))
    return mat if xp is np else mat.to_device()


def test_hypersparse_results_stay_small_and_dense_ones_are_refused(xp):
    a_values, b_values = np.array([1.0, -2.0, np.nan, 0.0]), np.array([1.0, 3.0, 0.0, -1.0])
    a, b = hypersparse(xp, a_values), hypersparse(xp, b_values)
    for op, other, want in (("!=", b, expected("!=", a_values, b_values)),
                            ("<", b, expected("<", a_values, b_values)),
                            (">", 0, expected(">", a_values, 0)),
                            ("!=", 0, expected("!=", a_values, 0))):
        got = OPS[op](a, other)
        assert got.shape == a.shape and got.nnz == np.count_nonzero(want) <= got.nblocks * 64
        rows, cols = (host(x) for x in got.nonzero())
        assert sorted(zip(rows, cols)) == sorted(p for p, w in zip(HYPER_AT, want) if w)
    # the refusal comes first: no "inefficient" warning for a result never
    # built (the suite turns warnings into errors, which would hide it)
    for op, other in (("==", b), (">=", b), ("<=", 1), ("!=", np.nan), ("==", 0)):
        with pytest.raises(MemoryError, match=f"compare with {_compare.OPS[op][1]} instead"):
            OPS[op](a, other)


def test_dense_result_warning_names_the_caller_and_the_scalar(xp):
    mat = ours(named("tall", "float64", seed=1), xp)
    ints = ours(named("tall", "int32", seed=1), xp)
    for m, s in ((mat, 1), (mat, np.float32(0.5)), (ints, 2**64), (ints, 0.5)):
        with pytest.warns(sp.SparseEfficiencyWarning, match=f"with {s} using <= is") as record:
            m <= s  # noqa: B015
        with pytest.warns(sp.SparseEfficiencyWarning, match=f"with {s} using <= is") as more:
            s >= m  # noqa: B015
        with pytest.warns(sp.SparseEfficiencyWarning, match="two sparse matrices") as most:
            m == m  # noqa: B015
        assert [w.filename for w in [*record, *more, *most]] == [__file__] * 3


def test_numbers_without_a_numpy_dtype_are_named(xp):
    mat = ours(named("tall", "float64"), xp)
    for s in (Fraction(1, 2), Decimal("0.5")):
        for op in OPS:
            with pytest.raises(TypeError, match=f"{type(s).__name__} .* has no NumPy dtype"):
                OPS[op](mat, s)


@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128", "bool"])
def test_merge_of_comparisons_and_their_failures(xp, dtype):
    # the merge's comparisons cover the union of the structures; "~op" is
    # where op fails there, which at NaN is not the opposite comparison
    from bmsparse import elementwise

    a = with_specials(named("square", dtype, seed=21))
    b = with_specials(named("square", dtype, seed=22))
    union = (stored(a) + stored(b)).toarray() != 0  # stored zeros and NaN included
    for op in OPS:
        holds = expected(op, a.toarray(), b.toarray())
        check_pattern(elementwise.compare(ours(a, xp), ours(b, xp), op), holds & union)
        check_pattern(elementwise.compare(ours(a, xp), ours(b, xp), "~" + op), ~holds & union)
