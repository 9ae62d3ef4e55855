"""A + B, A - B, A.multiply(B) and the scalar operators against scipy's csr_array."""

from __future__ import annotations

import operator
from functools import partial

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from bmsparse import BitmapMatrix, elementwise
from bmsparse._format import popcount
from bmsparse._primitives import exclusive_scan
from tests.cases import CASES, DTYPES, assert_dense_close, host, named, ours, random_matrix
from tests.helpers import (assert_barriers_kept_by_stream, assert_same_csr,
                           random_complex_dense, rounded_complex_product)

OPS = {"plus": operator.add, "minus": operator.sub, "times": lambda a, b: a.multiply(b),
       "star": operator.mul}


def partner(a: sp.csr_array, seed: int) -> sp.csr_array:
    """A matrix of a's shape sharing about half of a's entries, some of them exactly
    -a (so a + b cancels there) and some exactly a (so a - b does)."""
    rng = np.random.default_rng(seed)
    other = random_matrix(a.shape, 0.2, a.dtype, seed)
    coo = a.tocoo()
    pick = rng.random(coo.nnz) < 0.5
    sign = rng.choice([-1, 1], coo.nnz)[pick]
    data = coo.data[pick] if a.dtype == np.bool_ else coo.data[pick] * sign.astype(a.dtype)
    shared = sp.csr_array((data, (coo.row[pick], coo.col[pick])), shape=a.shape, dtype=a.dtype)
    # other's entries off the shared pattern, then the shared ones
    off = other.tocoo()
    keep = shared[off.row, off.col] == 0 if off.nnz else np.zeros(0, dtype=bool)
    out = sp.csr_array((np.concatenate([off.data[keep], data]),
                        (np.concatenate([off.row[keep], coo.row[pick]]),
                         np.concatenate([off.col[keep], coo.col[pick]]))),
                       shape=a.shape, dtype=a.dtype)
    out.sort_indices()
    return out


def scipy_result(op: str, a, b) -> sp.csr_array:
    out = sp.csr_array(OPS[op](a, b))
    out.sum_duplicates()
    return out


@pytest.mark.parametrize("op", ["plus", "minus", "times", "star"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_matches_scipy(case, dtype, op, xp):
    a = named(case, dtype)
    b = partner(a, seed=3)
    got = OPS[op](ours(a, xp), ours(b, xp))
    got.check_format(full_check=True)
    want = scipy_result(op, a, b)
    assert got.dtype == want.dtype
    assert_same_csr(got.get().to_scipy(), want, rtol=0)


@pytest.mark.parametrize("op", ["plus", "minus", "times"])
def test_cancellations_are_dropped(op, xp):
    a = named("dense", "float64")
    b = a if op != "plus" else -a
    b = b if op != "times" else a.multiply(0.0 * a)  # stored zeros: products are 0
    got = OPS[op](ours(a, xp), ours(sp.csr_array(b), xp))
    assert (got.nnz, got.nblocks) == (0, 0)
    assert scipy_result(op, a, sp.csr_array(b)).nnz == 0


@pytest.mark.parametrize(("a_dtype", "b_dtype"), [
    ("int32", "float32"), ("bool", "int64"), ("float32", "complex64"), ("bool", "float64"),
    ("int64", "int32")])
@pytest.mark.parametrize("op", ["plus", "minus", "times"])
def test_mixed_dtypes(a_dtype, b_dtype, op, xp):
    a = named("tall", a_dtype)
    b = partner(named("tall", b_dtype), seed=4)
    got = OPS[op](ours(a, xp), ours(b, xp))
    want = scipy_result(op, a, b)
    assert got.dtype == want.dtype
    assert_same_csr(got.get().to_scipy(), want, rtol=0)


@pytest.mark.parametrize("op", ["plus", "minus", "times"])
def test_scipy_operand(op):
    a, b = named("tall", "float64"), partner(named("tall", "float64"), seed=5)
    assert_same_csr(OPS[op](BitmapMatrix(a), b).to_scipy(), scipy_result(op, a, b), rtol=0)


@pytest.mark.parametrize("op", ["plus", "minus", "star"])
@pytest.mark.parametrize("dtype", ["bool", "float64"])
def test_scipy_operand_on_the_left(dtype, op, xp):
    # scipy's sparse array gives way to ours: `s - A` must be the difference
    # in that order (not -(A - s): a bool matrix has no negation), and `*`
    # element-wise, as between two sparse arrays
    a, b = named("tall", dtype), partner(named("tall", dtype), seed=6)
    got = OPS[op](b, ours(a, xp)) if xp is np else OPS[op](ours(b, xp), ours(a, xp))
    assert_same_csr(host(got).to_scipy(), scipy_result(op, b, a), rtol=0)


@pytest.mark.parametrize("kind", ["csr_matrix", "coo_matrix"])
def test_scipy_matrix_on_the_left_of_star_is_a_product(kind):
    # for scipy's *_matrix classes `*` is the matrix product: theirs gives
    # way to ours, which must then multiply, not take the element-wise product
    a, b = named("square", "float64"), partner(named("square", "float64"), seed=7)
    left = getattr(sp, kind)(b)
    want = sp.csr_array(left * sp.csr_array(a))
    assert_same_csr((left * BitmapMatrix(a)).to_scipy(), want)
    # and a sparse array on the left keeps `*` element-wise
    assert_same_csr((sp.csr_array(b) * BitmapMatrix(a)).to_scipy(), b.multiply(a), rtol=0)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # numpy.matrix
@pytest.mark.parametrize("op", ["plus", "minus", "times", "star"])
def test_numpy_matrix_and_lists_act_as_arrays(op):
    a = named("tall", "float64")
    d = np.arange(a.shape[0] * a.shape[1], dtype=np.float64).reshape(a.shape)
    for other in (np.asmatrix(d), d.tolist()):
        got, want = OPS[op](BitmapMatrix(a), other), OPS[op](sp.csr_array(a), d)
        got, want = (x.toarray() if sp.issparse(x) or isinstance(x, BitmapMatrix)
                     else np.asarray(x) for x in (got, want))
        np.testing.assert_array_equal(got, want)
        assert not isinstance(got, np.matrix)


@pytest.mark.parametrize("other", ["x", None, object()], ids=["str", "none", "object"])
def test_multiply_by_what_it_does_not_take_raises(other):
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(TypeError, match="multiply: other must be a sparse matrix, a dense "
                       f"array or a scalar, got {type(other).__name__}"):
        a.multiply(other)


@pytest.mark.parametrize("alpha", [2, -1.5, 0, 0.0, 1j, np.float32(3), True, False])
@pytest.mark.parametrize("dtype", DTYPES)
def test_scalar_multiply_keeps_structure(dtype, alpha, xp):
    a = named("dense", dtype)
    for got in (alpha * ours(a, xp), ours(a, xp) * alpha, ours(a, xp).multiply(alpha)):
        want = a * alpha
        assert got.dtype == want.dtype
        if want.dtype == np.bool_ and not alpha:
            assert got.nnz == 0  # a pattern matrix cannot store False
        else:
            assert_same_csr(got.get().to_scipy(), want, rtol=0)


@pytest.mark.parametrize("alpha", [2, 0.5, -3.0, 1j])
@pytest.mark.parametrize("dtype", DTYPES)
def test_divide_by_scalar(dtype, alpha, xp):
    a = named("dense", dtype)
    got, want = ours(a, xp) / alpha, a / alpha
    assert got.dtype == want.dtype
    assert_same_csr(got.get().to_scipy(), want, rtol=0)


def test_divide_by_zero():
    with pytest.raises(ZeroDivisionError):
        BitmapMatrix(named("tall", "float64")) / 0


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "bool"])
def test_negative_and_abs(dtype, xp):
    a = named("dense", dtype)
    got = -ours(a, xp)
    assert got.dtype == a.dtype
    assert_same_csr(got.get().to_scipy(), -a, rtol=0)
    got = abs(ours(a, xp))
    assert got.dtype == abs(a).dtype
    # |x + iy| is rounded differently by CuPy's and NumPy's complex abs (1 ulp);
    # for real dtypes it is exact
    exact = np.dtype(dtype).kind != "c"
    assert_same_csr(got.get().to_scipy(), abs(a), rtol=0 if exact else None)


def test_abs_of_bool_is_itself(xp):
    a = named("tall", "bool")
    assert_same_csr(abs(ours(a, xp)).get().to_scipy(), abs(a), rtol=0)


def test_negating_bool_raises():
    with pytest.raises(NotImplementedError, match="negating a boolean sparse array is not "
                       "supported"):
        -BitmapMatrix(named("tall", "bool"))


@pytest.mark.parametrize("shape", [(37, 21), (1, 21), (37, 1), (21,), ()])
@pytest.mark.parametrize("dtype", ["bool", "int32", "float64", "complex128"])
def test_multiply_dense_keeps_structure(dtype, shape, xp):
    a = named("tall", dtype)
    rng = np.random.default_rng(6)
    dense = rng.integers(-2, 3, shape).astype("float64")
    got = ours(a, xp).multiply(xp.asarray(dense))
    want = sp.csr_array(a.multiply(dense))
    assert got.dtype == want.dtype
    if got.dtype == np.bool_:
        want.eliminate_zeros()
    assert_same_csr(got.get().to_scipy(), want, rtol=0)


def test_divide_by_dense(xp):
    a = named("tall", "float64")
    dense = np.arange(1.0, 22.0)
    got = ours(a, xp) / xp.asarray(dense)
    assert_same_csr(got.get().to_scipy(), sp.csr_array(a / dense), rtol=0)


@pytest.mark.parametrize("op", ["plus", "minus"])
def test_add_dense_gives_dense(op, xp):
    a = named("tall", "int64")
    dense = np.arange(37 * 21).reshape(37, 21)
    assert_dense_close(OPS[op](ours(a, xp), xp.asarray(dense)), OPS[op](a, dense), "int64")
    assert_dense_close(OPS[op](xp.asarray(dense), ours(a, xp)), OPS[op](dense, a), "int64")


@pytest.mark.parametrize("op", ["plus", "minus"])
def test_add_zero_is_a_copy(op):
    a = BitmapMatrix(named("tall", "float64"))
    got = OPS[op](a, 0)
    assert got is not a
    assert_same_csr(got.to_scipy(), a.to_scipy(), rtol=0)
    assert_same_csr(OPS[op](0, a).to_scipy(), OPS[op](0, named("tall", "float64")), rtol=0)


@pytest.mark.parametrize(("op", "message"), [
    ("plus", "adding a nonzero scalar to a sparse array is not supported"),
    ("minus", "subtracting a nonzero scalar from a sparse array is not supported")])
def test_nonzero_scalar_raises(op, message):
    with pytest.raises(NotImplementedError, match=message):
        OPS[op](BitmapMatrix(named("tall", "float64")), 1.5)


@pytest.mark.parametrize("op", ["plus", "minus", "times"])
def test_inconsistent_shapes(op):
    a, b = BitmapMatrix(named("tall", "float64")), BitmapMatrix(named("wide", "float64"))
    with pytest.raises(ValueError, match=r"inconsistent shapes \(37, 21\) and \(9, 70\)"):
        OPS[op](a, b)


@pytest.mark.parametrize("shape", [(1, 21), (21,), (37, 1), (1, 1), (37, 21)])
def test_dense_operands_broadcast_in_add_and_subtract(shape, xp):
    # as scipy: a dense row, column or 1x1 broadcasts to the matrix's shape
    # (only equal shapes were taken before); the result is dense
    a = named("tall", "float64")
    m = ours(a, xp)
    d = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape)
    for got, want in ((m + xp.asarray(d), a + d), (m - xp.asarray(d), a - d),
                      (xp.asarray(d) + m, d + a), (xp.asarray(d) - m, d - a)):
        assert isinstance(got, xp.ndarray) and got.shape == want.shape
        np.testing.assert_array_equal(host(got), want)


def test_inconsistent_dense_shapes():
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(ValueError, match=r"inconsistent shapes \(37, 21\) and \(21, 37\)"):
        a + np.ones((21, 37))
    with pytest.raises(ValueError, match=r"inconsistent shapes \(37, 21\) and \(2, 37, 21\)"):
        a - np.ones((2, 37, 21))
    with pytest.raises(ValueError, match=r"inconsistent shapes \(37, 21\) and \(3, 21\)"):
        a.multiply(np.ones((3, 21)))


def test_dense_that_broadcasts_the_matrix_raises():
    a = BitmapMatrix(named("tall", "float64")[[0]])
    with pytest.raises(NotImplementedError, match=r"multiplying a \(1, 21\) matrix by a "
                       r"dense \(4, 21\) array broadcasts it to \(4, 21\)"):
        a.multiply(np.ones((4, 21)))


@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("int32", "int32"),
                                    ("float32", "float32"), ("bool", "float64"),
                                    ("int64", "float32"), ("complex128", "complex128")])
def test_divide_by_sparse_is_dense_as_scipy(dtypes, xp):
    # every entry's quotient: NaN where neither stores one (0 / 0), inf where
    # only A does; stored zeros count as zeros
    a = random_matrix((37, 21), 0.3, dtypes[0], seed=31)
    b = random_matrix((37, 21), 0.3, dtypes[1], seed=32)
    want = a / b
    assert isinstance(want, np.ndarray)
    got = ours(a, xp) / ours(b, xp)
    assert isinstance(got, xp.ndarray)
    assert got.dtype == want.dtype
    assert np.isnan(want).any()
    got = host(got)
    if want.dtype.kind == "c":
        # a complex x / 0 is NumPy's (inf + infj, nan + nanj), or CuPy's,
        # where scipy's C++ division gives nan + nanj, or nan + 0j where
        # neither stores; and NumPy's and CuPy's complex division round apart
        finite = b.toarray() != 0
        np.testing.assert_array_equal(np.isfinite(got), finite)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-15)
    else:
        np.testing.assert_array_equal(got, want)


def test_divide_sparse_operands_of_either_kind(xp):
    a = random_matrix((37, 21), 0.3, "float64", seed=33)
    b = random_matrix((37, 21), 0.3, "float64", seed=34)
    want = a / b
    if xp is np:
        theirs_a, theirs_b = a, b
    else:
        import cupyx.scipy.sparse as csp

        theirs_a, theirs_b = csp.csr_matrix(a), csp.csr_matrix(b)
    np.testing.assert_array_equal(host(ours(a, xp) / theirs_b), want)
    np.testing.assert_array_equal(host(theirs_a / ours(b, xp)), want)


def test_divide_by_a_complex_sparse_matrix_keeps_numpys_dtype(xp):
    # scipy writes the quotient into the real numerator's dtype (dropping the
    # imaginary part); NumPy's promotion gives complex
    a = random_matrix((9, 9), 0.5, "float64", seed=35)
    b = random_matrix((9, 9), 0.5, "complex128", seed=36)
    got = ours(a, xp) / ours(b, xp)
    assert got.dtype == np.complex128
    with np.errstate(divide="ignore", invalid="ignore"):
        want = a.toarray() / b.toarray()
    np.testing.assert_allclose(host(got), want, rtol=1e-15, equal_nan=True)


def test_divide_by_sparse_checks_shapes_and_operands(xp):
    a = ours(named("tall", "float64"), xp)
    with pytest.raises(ValueError, match=r"inconsistent shapes \(37, 21\) and \(21, 37\)"):
        a / a.T
    # as scipy's: a scalar or a dense array over a sparse matrix is refused
    for numerator in (2, xp.ones((37, 21))):
        with pytest.raises(TypeError, match="unsupported operand"):
            numerator / a


@pytest.mark.gpu
def test_host_and_device_operands_raise():
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(TypeError, match="operands must all be on the host"):
        a + a.to_device()
    import cupy

    with pytest.raises(TypeError, match="operands must all be on the host"):
        a.multiply(cupy.ones((37, 21)))


def pattern(xp, keys, bitmaps):
    """Blocks of a bool matrix: (keys, bitmaps, offsets, None)."""
    keys, bitmaps = xp.asarray(keys, dtype=xp.uint64), xp.asarray(bitmaps, dtype=xp.uint64)
    return keys, bitmaps, exclusive_scan(xp, popcount(bitmaps)), None


def merge(xp, a_blocks, b_blocks, op, combine):
    """The stages on the host or the GPU: C's keys, bitmaps and offsets, its
    nnz, and the stages' arrays."""
    merge = elementwise._merge_numpy if xp is np else partial(elementwise._merge_cuda,
                                                              stages=True)
    keys, bitmaps, offsets, _, nnz, stages = merge(a_blocks, b_blocks, op, combine)
    return keys, bitmaps, offsets, nnz, stages


def block_matrix(blocks, dtype, seed: int) -> sp.csr_array:
    """A 37 x 40 matrix (5 x 5 blocks, the last block row padded) with random
    entries in exactly the 8x8 blocks ``blocks`` (block row, block column)."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((40, 40))
    for r, c in blocks:
        tile = rng.integers(1, 5, (8, 8)) * rng.choice([-1, 1], (8, 8))
        tile[rng.random((8, 8)) < 0.6] = 0
        tile[r % 8, c % 8] = 3  # not empty, even where the random draw is
        dense[8 * r:8 * r + 8, 8 * c:8 * c + 8] = tile
    return sp.csr_array(dense[:37].astype(dtype))


# Block layouts of A and B on the 5 x 5 block grid (A, B, or both: X):
#   disjoint         identical        a-empty    b-empty    a-at-ends  b-at-ends
#   A . . . .        X . . . .        . . . . .  A . . . .  A . . . .  B . . . .
#   . B . . .        . X . . .        B . . . .  . . . . .  . . B X .  . . A X .
#   . . A . .        . . . . X        . . . . .  . . . A .  . . . B .  . . . A .
#   . . . B .        . . . . .        . . . B .  . . . . .  . . . . .  . . . . .
#   . . . . A        . . . . .        . . . . .  . . . . .  . . . . A  . . . . B
LAYOUTS = {
    "disjoint": ([(0, 0), (2, 2), (4, 4)], [(1, 1), (3, 3)]),
    "identical": ([(0, 0), (1, 1), (2, 4)], [(0, 0), (1, 1), (2, 4)]),
    "a-empty": ([], [(1, 0), (3, 3)]),
    "b-empty": ([(0, 0), (2, 3)], []),
    "a-at-ends": ([(0, 0), (1, 3), (4, 4)], [(1, 2), (1, 3), (2, 3)]),
    "b-at-ends": ([(1, 2), (1, 3), (2, 3)], [(0, 0), (1, 3), (4, 4)]),
}


@pytest.mark.parametrize("op", ["plus", "minus", "times"])
@pytest.mark.parametrize("dtype", ["bool", "int64", "float64"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_block_layouts(layout, dtype, op, xp):
    a_blocks, b_blocks = LAYOUTS[layout]
    a, b = block_matrix(a_blocks, dtype, seed=1), block_matrix(b_blocks, dtype, seed=2)
    got = OPS[op](ours(a, xp), ours(b, xp))
    got.check_format(full_check=True)
    want = scipy_result(op, a, b)
    assert got.dtype == want.dtype
    assert (got.nnz, got.values is None) == (want.nnz, dtype == "bool")
    assert got.offsets.shape == (got.nblocks + 1,)
    assert_same_csr(got.get().to_scipy(), want, rtol=0)


@pytest.mark.parametrize("op", ["minus", "plus", "times"])
@pytest.mark.parametrize("dtype", ["bool", "int64", "float64"])
def test_identical_keys(dtype, op, xp):
    a = ours(block_matrix(LAYOUTS["identical"][0], dtype, seed=1), xp)
    got = OPS[op](a, a)
    got.check_format(full_check=True)
    if op == "minus":  # everything cancels (True - True too): an empty result
        assert (got.nblocks, got.nnz, got.keys.shape, got.offsets.tolist()) == (0, 0, (0,), [0])
    else:
        assert (got.nblocks, got.nnz) == (a.nblocks, a.nnz)
        assert_same_csr(got.get().to_scipy(), scipy_result(op, a.get().to_scipy(),
                                                           a.get().to_scipy()), rtol=0)


@pytest.mark.parametrize("op", ["plus", "minus", "times"])
def test_both_empty(op, xp):
    a = ours(block_matrix([], "int64", seed=1), xp)
    got = OPS[op](a, a)
    got.check_format(full_check=True)
    assert (got.shape, got.nblocks, got.nnz) == ((37, 40), 0, 0)


def allocated(arr) -> int:
    """Bytes of the allocation ``arr`` lives in (a view's base)."""
    if isinstance(arr, np.ndarray):
        return (arr if arr.base is None else arr.base).nbytes
    return arr.data.mem.size


def test_result_is_a_view_into_the_bound(xp):
    # A + A: as many blocks and values as A, half of the bound a + b
    a = ours(random_matrix((37, 21), 0.3, "int64", seed=8, explicit_zeros=False), xp)
    got = a + a
    got.check_format(full_check=True)
    assert (got.nblocks, got.nnz) == (a.nblocks, a.nnz)
    assert allocated(got.keys) >= 8 * 2 * a.nblocks
    assert allocated(got.values) >= 8 * 2 * a.nnz
    assert_same_csr(got.get().to_scipy(), 2 * a.get().to_scipy(), rtol=0)


def test_mostly_unused_bound_is_copied(monkeypatch, xp):
    monkeypatch.setattr(elementwise, "MIN_WASTE", 0)
    # A: 100 diagonal blocks; B: the first of them and 99 blocks above the
    # diagonal. A.multiply(B) has one block and one value of bounds of 100
    eye = sp.eye_array(800, format="csr", dtype=np.int64)
    rows = np.r_[0, 8 * np.arange(99)]
    b = sp.csr_array((np.full(100, 3), (rows, np.r_[0, rows[1:] + 8])), shape=(800, 800))
    got = ours(eye, xp).multiply(ours(b, xp))
    got.check_format(full_check=True)
    assert (got.nblocks, got.nnz) == (1, 1)
    for arr in (got.keys, got.bitmaps, got.offsets, got.values):
        # a copy of its own size (CuPy's pool allocates 512 bytes at least)
        assert allocated(arr) <= max(arr.nbytes, 512)
    assert_same_csr(got.get().to_scipy(), scipy_result("times", eye, b), rtol=0)


@pytest.mark.parametrize(("combine", "want"), [
    # keys 1, 3, 5 | 3, 4, 5, 9; bitmaps of A 1, 2, 6 and of B 1, 8, 4, 16:
    # rank, bits, blocks_before, values_before; C's keys, bitmaps, offsets
    (elementwise.OR, ([-1, 0, 2, 1, -3, 2, -4], [1, 3, 6, 0, 8, 0, 16],
                      [0, 1, 2, 3, 3, 4, 4, 5], [0, 1, 3, 5, 5, 6, 6, 7],
                      [1, 3, 4, 5, 9], [1, 3, 8, 6, 16], [0, 1, 3, 4, 6, 7])),
    (elementwise.XOR, ([-1, 0, 2, 1, -3, 2, -4], [1, 3, 2, 0, 8, 0, 16],
                       [0, 1, 2, 3, 3, 4, 4, 5], [0, 1, 3, 4, 4, 5, 5, 6],
                       [1, 3, 4, 5, 9], [1, 3, 8, 2, 16], [0, 1, 3, 4, 5, 6])),
    (elementwise.AND, ([-1, 0, 2], [0, 0, 4], [0, 0, 0, 1], [0, 0, 0, 1], [5], [4], [0, 1])),
])
def test_match_scan_write(combine, want, xp):
    a_blocks = pattern(xp, [1, 3, 5], [1, 2, 6])
    b_blocks = pattern(xp, [3, 4, 5, 9], [1, 8, 4, 16])
    op = "times" if combine == elementwise.AND else "plus"
    keys, bitmaps, offsets, nnz, stages = merge(xp, a_blocks, b_blocks, op, combine)
    assert [host(x).tolist() for x in stages] == list(want[:4])
    assert [host(x).tolist() for x in (keys, bitmaps, offsets)] == list(want[4:])
    assert nnz == want[6][-1]


def test_xor_of_equal_bitmaps_drops_the_block(xp):
    # keys 2, 7 | 2, 5, 7: block 2 is equal in both, so it is dropped from A - B of bools
    a_blocks = pattern(xp, [2, 7], [5, 1])
    b_blocks = pattern(xp, [2, 5, 7], [5, 2, 3])
    keys, bitmaps, offsets, nnz, (rank, bits, *_) = merge(xp, a_blocks, b_blocks, "minus",
                                                          elementwise.XOR)
    assert [host(rank).tolist(), host(bits).tolist()] == [[0, 2, 0, -2, 1], [0, 2, 0, 2, 0]]
    assert [host(x).tolist() for x in (keys, bitmaps, offsets)] == [[5, 7], [2, 2], [0, 1, 2]]
    assert nnz == 2


def test_bits_drop_zero_values(xp):
    # A: key 0 holds 1 (bit 0) and a stored 0 (bit 1); key 1 holds 2 (bit 0).
    # B: key 1 holds -2 (bit 0) and 5 (bit 3). A + B: key 0 keeps bit 0 only,
    # key 1 only bit 3 (2 - 2 cancels)
    a_blocks = (xp.asarray([0, 1], dtype=xp.uint64), xp.asarray([3, 1], dtype=xp.uint64),
                xp.asarray([0, 2, 3]), xp.asarray([1.0, 0.0, 2.0]))
    b_blocks = (xp.asarray([1], dtype=xp.uint64), xp.asarray([9], dtype=xp.uint64),
                xp.asarray([0, 2]), xp.asarray([-2.0, 5.0]))
    merge = elementwise._merge_numpy if xp is np else partial(elementwise._merge_cuda,
                                                              stages=True)
    keys, bitmaps, offsets, values, nnz, (rank, bits, *_) = merge(
        a_blocks, b_blocks, "plus", elementwise.OR)
    assert [host(rank).tolist(), host(bits).tolist()] == [[-1, 0, 1], [1, 8, 0]]
    assert nnz == 2
    assert [host(keys).tolist(), host(bitmaps).tolist(), host(offsets).tolist(),
            host(values).tolist()] == [[0, 1], [1, 8], [0, 1, 2], [1.0, 5.0]]


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["plus", "minus", "times"])
@pytest.mark.parametrize("dtype", ["bool", "int32", "int64", "float32", "float64",
                                   "complex128"])
@pytest.mark.parametrize("case", ["dense", "tall", "square", "empty", "zero-nnz"])
def test_stages_cuda_equal_numpy(case, dtype, op):
    a = BitmapMatrix(named(case, dtype))
    b = BitmapMatrix(partner(named(case, dtype), seed=7))
    combine = (elementwise.AND if op == "times" else
               elementwise.XOR if dtype == "bool" and op == "minus" else elementwise.OR)
    blocks = [elementwise._blocks(x, np.dtype(dtype)) for x in (a, b, a.to_device(),
                                                                 b.to_device())]
    want = elementwise._merge_numpy(blocks[0], blocks[1], op, combine)
    got = elementwise._merge_cuda(blocks[2], blocks[3], op, combine, stages=True)
    nnz = want[4]
    assert got[4] == nnz
    if case == "dense" and op != "times" and dtype != "bool":  # partner() makes cancellations
        assert nnz < (abs(a.to_scipy()) + abs(b.to_scipy())).nnz
    for g, w in zip(got[5], want[5], strict=True):
        np.testing.assert_array_equal(g.get().astype(w.dtype), w)
    for g, w in zip(got[:4], want[:4], strict=True):
        if w is None:  # bools have no values
            assert g is None
        else:
            np.testing.assert_array_equal(g.get(), w)


@pytest.mark.gpu
def test_gpu_path_launches_one_kernel(monkeypatch):
    import cupy

    from bmsparse import _kernels

    a = BitmapMatrix(random_matrix((300, 200), 0.05, "float64", seed=9,
                                   explicit_zeros=False)).to_device()
    b = BitmapMatrix(random_matrix((300, 200), 0.05, "float64", seed=10,
                                   explicit_zeros=False)).to_device()
    a + b  # compile first
    names: list[str] = []
    monkeypatch.setattr(_kernels, "launch_hook", lambda name, *_: names.append(name))
    got = a + b
    assert len(names) == 1 and "elementwise_merge" in names[0], names
    assert isinstance(got.values, cupy.ndarray)
    assert_same_csr(got.get().to_scipy(), scipy_result("plus", a.get().to_scipy(),
                                                       b.get().to_scipy()), rtol=0)


@pytest.mark.gpu
def test_barrier_is_the_streams_and_left_ready():
    # no memset before the merge: its barrier words are the stream's
    from bmsparse import _kernels

    a = BitmapMatrix(random_matrix((300, 200), 0.05, "float64", seed=11))
    b = BitmapMatrix(partner(a.to_scipy(), seed=12))
    kernel = _kernels.get_kernel(elementwise._KERNELS, "bmsparse_elementwise_merge",
                                 T=np.float64)
    # several thread blocks, so that the barrier is a grid's, not __syncthreads
    assert min(_kernels.resident_blocks(kernel, elementwise.THREADS),
               8 * (a.nblocks + b.nblocks) // elementwise.THREADS) > 1
    want = scipy_result("minus", a.to_scipy(), b.to_scipy())
    d_a, d_b = a.to_device(), b.to_device()
    assert_barriers_kept_by_stream(
        lambda: assert_same_csr((d_a - d_b).get().to_scipy(), want, rtol=0))


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 40), n=st.integers(0, 40), density=st.floats(0, 1),
       seed=st.integers(0, 2**16), op=st.sampled_from(["plus", "minus", "times"]),
       dtype=st.sampled_from(["bool", "int64", "float64"]))
def test_property_matches_scipy(m, n, density, seed, op, dtype):
    a = random_matrix((m, n), density, dtype, seed)
    b = partner(a, seed + 1)
    got = OPS[op](BitmapMatrix(a), BitmapMatrix(b))
    assert_same_csr(got.to_scipy(), scipy_result(op, a, b), rtol=0)


@pytest.mark.parametrize("star", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_product_of_non_finite_and_absent_is_nan(dtype, star, xp):
    # scipy's product is over the union of the structures: where one operand
    # has no entry it is a 0, and inf * 0 or nan * 0 is a NaN that it keeps
    # (a finite value times 0 is a dropped zero)
    d = np.zeros((11, 10))
    d[0, :4] = [np.inf, -np.inf, np.nan, 2.0]
    d[9, 9] = np.inf
    a = sp.csr_array(d.astype(dtype))
    b = sp.csr_array(np.eye(11, 10, dtype=dtype))  # one shared entry, (0, 0)
    for x, y in ((a, b), (b, a)):
        got = OPS["star" if star else "times"](ours(x, xp), ours(y, xp))
        got.check_format(full_check=True)
        want = scipy_result("times", x, y)
        assert want.nnz == 4  # (0, 0) to (0, 2) and (9, 9); 2 * 0 is dropped
        assert_same_csr(got.get().to_scipy(), want, rtol=0)


@pytest.mark.parametrize("other", [None, object(), "x"], ids=["none", "object", "str"])
def test_reflected_subtraction_of_what_it_does_not_take_raises(other):
    # Python's own TypeError, naming both operands (not one about negating
    # NotImplemented)
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for -: "
                       f"'{type(other).__name__}' and 'BitmapMatrix'"):
        other - a


def test_nonzero_scalar_minus_matrix_raises():
    with pytest.raises(NotImplementedError, match="subtracting a sparse array from a nonzero "
                       "scalar is not supported"):
        1.5 - BitmapMatrix(named("tall", "float64"))


def hypersparse(xp) -> BitmapMatrix:
    """A 2**33 x 2**33 float64 matrix of three entries (no dense form fits)."""
    n = 2**33
    rows, cols = np.array([0, 5, n - 1]), np.array([n - 1, 7, n - 1])
    m = BitmapMatrix.from_coo(rows, cols, np.array([1.0, -2.0, 3.0]), (n, n))
    return m if xp is np else m.to_device()


@pytest.mark.parametrize("shape", [(1, 1), (1,), ()])
def test_multiply_hypersparse_by_dense_scalar(shape, xp):
    # a 1x1 broadcasts to any shape, even one with more than 2**63 entries
    # (numpy.broadcast_shapes refuses those)
    a = hypersparse(xp)
    got = a.multiply(xp.full(shape, 2.0)).get()
    # (no CSR of this shape fits: its row pointer would have 2**33 + 1 entries)
    rows, cols = a.get()._coo_indices()
    want = sp.coo_array((2.0 * a.get()._data(), (rows, cols)), shape=a.shape)
    got_rows, got_cols = got._coo_indices()
    np.testing.assert_array_equal(got_rows, want.row)
    np.testing.assert_array_equal(got_cols, want.col)
    np.testing.assert_array_equal(got._data(), want.data)


@pytest.mark.parametrize("op", ["plus", "minus"])
def test_dense_result_too_large_is_not_called_inconsistent(op, xp):
    # (1, 1) broadcasts to the shape: the dense result is what cannot be made
    a = hypersparse(xp)
    with pytest.raises(ValueError) as info:
        OPS[op](a, xp.ones((1, 1)))
    assert "inconsistent shapes" not in str(info.value)
    with pytest.raises(ValueError, match=r"inconsistent shapes \(8589934592, 8589934592\) "
                       r"and \(1, 3\)"):
        OPS[op](a, xp.ones((1, 3)))


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_extremum_with_dense_too_large_is_not_called_inconsistent(name, xp):
    a = hypersparse(xp)
    with pytest.raises(ValueError) as info:
        getattr(a, name)(xp.ones((1, 1)))
    assert "inconsistent shapes" not in str(info.value)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_finite_values_that_sum_past_the_largest_float_take_the_exact_test(dtype, xp):
    # a quick test for inf and NaN by a sum, which finite
    # values can overflow: the product must still take the intersection
    # (scipy's structure), and an inf must still take the union
    big = np.finfo(np.dtype(dtype).type(0).real.dtype).max
    a = sp.csr_array(np.array([[big, big, 0.0], [0.0, 1.0, 0.0]], dtype=dtype))
    b = sp.csr_array(np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0]], dtype=dtype))
    for x, y in ((a, b), (b, a)):
        got = ours(x, xp).multiply(ours(y, xp))
        assert_same_csr(got.get().to_scipy(), sp.csr_array(x.multiply(y)))
    c = a.copy()
    c.data[2] = np.inf
    with np.errstate(invalid="ignore"):
        want = sp.csr_array(c.multiply(b))
    got = ours(c, xp).multiply(ours(b, xp))
    assert_same_csr(got.get().to_scipy(), want)


@pytest.mark.gpu
def test_product_checks_values_with_a_device_flag(monkeypatch):
    # a device that cannot write host memory (no host words, no host flag):
    # the inf / NaN flag is a word of the launch's scratch, read with C's
    # sizes, and cleared first (scratch is filled with ones here, as a
    # reused pool block may hold anything)
    import cupy

    from bmsparse import _readback

    monkeypatch.setattr(_readback, "_maps_host_memory", lambda device: False)
    alloc = cupy.cuda.alloc

    def dirty(size):
        memory = alloc(size)
        memory.memset(0xFF, size)
        return memory

    monkeypatch.setattr(cupy.cuda, "alloc", dirty)
    unions = []
    merge = elementwise._merge_cuda

    def spy(a_blocks, b_blocks, op, combine, *args, **kwargs):
        unions.append(combine == elementwise.OR)
        return merge(a_blocks, b_blocks, op, combine, *args, **kwargs)

    monkeypatch.setattr(elementwise, "_merge_cuda", spy)
    a, b = named("tall", "float64"), named("tall", "float64", seed=1)
    got = ours(a, cupy).multiply(ours(b, cupy))
    assert unions == [False]  # finite values: no second merge as a union
    assert_same_csr(got.get().to_scipy(), sp.csr_array(a.multiply(b)), rtol=0)
    a.data[0] = np.inf
    got = ours(a, cupy).multiply(ours(b, cupy))
    assert unions == [False, False, True]
    with np.errstate(invalid="ignore"):
        want = sp.csr_array(a.multiply(b))
    assert_same_csr(got.get().to_scipy(), want, rtol=0)


def test_pattern_times_dense_complex_multiplies_as_numpy(xp):
    # a bool matrix's entries are True: True * (inf + 1j) is inf + nanj in
    # NumPy and scipy (and in our scalar product), not inf + 1j
    a = sp.csr_array(np.array([[True, False, True]]))
    other = np.array([[complex(np.inf, 1), 2, complex(1, np.nan)]])
    with np.errstate(invalid="ignore"):
        want = (a * other).toarray()
        got = ours(a, xp) * xp.asarray(other)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.get().toarray(), want)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_products_round_as_scipy_and_the_kernels(xp, dtype):
    # each entry of A.multiply(B) is one complex product, rounded part by
    # part; NumPy's complex loops fuse multiply-adds on hosts that have
    # them, which the host path must not inherit
    a = random_complex_dense((37, 29), 0.6, dtype, seed=1)
    b = random_complex_dense((37, 29), 0.6, dtype, seed=2)
    got = ours(sp.csr_array(a), xp).multiply(ours(sp.csr_array(b), xp))
    np.testing.assert_array_equal(host(got.toarray()), rounded_complex_product(a, b))
