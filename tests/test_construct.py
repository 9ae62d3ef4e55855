"""eye, identity and diags against scipy.sparse's eye_array, identity and diags_array."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import bmsparse
from tests.cases import DTYPES, host
from tests.helpers import assert_same_csr


def on_side(m, xp):
    assert m.on_device == (xp is not np)
    m.check_format(full_check=True)
    return m.get().to_scipy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(5, None, 0), (3, 7, 2), (7, 3, -2), (4, 4, 4), (4, 4, -4),
                                   (0, 3, 0), (3, 0, 0), (17, 17, -9), (20, 13, 8), (1, 1, 0)])
def test_eye_against_scipy(xp, m, n, k, dtype):
    got = bmsparse.eye(m, n, k=k, dtype=dtype, device=xp is not np)
    assert_same_csr(on_side(got, xp), sp.eye_array(m, n, k=k, dtype=dtype, format="csr"))


def test_identity_against_scipy(xp):
    for dtype in ("float64", "bool", "int32"):
        got = bmsparse.identity(11, dtype=dtype, device=xp is not np)
        assert_same_csr(on_side(got, xp), sp.identity(11, dtype=dtype, format="csr"))


def test_eye_past_the_corners_is_refused():
    for k in (5, -5):
        with pytest.raises(ValueError, match=f"offset {k} .* out of bounds"):
            bmsparse.eye(4, k=k)
        with pytest.raises(ValueError, match="out of bounds"):
            sp.eye_array(4, k=k)  # scipy's rule, which this follows
    with pytest.raises(TypeError, match="k must be an integer"):
        bmsparse.eye(4, k=1.0)


def scipy_diags(diagonals, offsets, shape, dtype):
    # scipy's future default dtype (the diagonals'), given explicitly
    return sp.diags_array(diagonals, offsets=offsets, shape=shape, dtype=dtype, format="csr")


@pytest.mark.parametrize("dtype", ["int64", "float32", "float64", "complex128", "bool"])
def test_diags_against_scipy(xp, dtype):
    rng = np.random.default_rng(0)
    cases = [
        ([rng.integers(-3, 4, 12)], [0], None),
        ([rng.integers(-3, 4, 12), rng.integers(-3, 4, 11), rng.integers(-3, 4, 9)],
         [0, 1, -3], None),
        ([rng.integers(-3, 4, 30)], [5], (9, 40)),       # longer than its place: cut
        ([rng.integers(1, 4, 1), rng.integers(-3, 4, 20)], [-2, 2], (20, 20)),  # one entry
        ([rng.integers(-3, 4, 3)], [-17], (20, 5)),
    ]
    for diagonals, offsets, shape in cases:
        arrays = [xp.asarray(d.astype(dtype)) for d in diagonals]
        got = bmsparse.diags(arrays, offsets=offsets, shape=shape)
        assert got.dtype == np.dtype(dtype)
        want = scipy_diags([d.astype(dtype) for d in diagonals], offsets, shape, dtype)
        # scipy's dia_array keeps zeros (its nnz counts them); its CSR drops them
        got_csr = on_side(got, xp)
        got_csr.eliminate_zeros()
        assert_same_csr(got_csr, want)
        # (its DIA form keeps them: its nnz counts every entry on a diagonal)
        kept = sp.diags_array([d.astype(dtype) for d in diagonals], offsets=offsets,
                              shape=shape, dtype=dtype, format="dia").nnz
        assert got.nnz == (want.nnz if dtype == "bool" else kept)


def test_diags_of_scalars_lists_and_default_dtype(xp):
    device = xp is not np
    got = bmsparse.diags([2.0, -1.0, -1.0], offsets=[0, 1, -1], shape=(6, 6), device=device)
    want = scipy_diags([2.0, -1.0, -1.0], [0, 1, -1], (6, 6), np.float64)
    assert_same_csr(on_side(got, xp), want)
    assert bmsparse.diags([1, 2, 3], device=device).dtype == np.int64
    assert bmsparse.diags([[1, 2, 3]], offsets=[1], device=device).shape == (4, 4)
    assert host(bmsparse.diags(xp.asarray([1.0, 0.0, 3.0])).values).tolist() == [1.0, 0.0, 3.0]


def test_diags_refusals():
    with pytest.raises(ValueError, match="duplicate"):
        bmsparse.diags([[1, 2], [3, 4]], offsets=[0, 0])
    with pytest.raises(ValueError, match="diagonal 0 has 2 entries; offset 1 of a 4 x 4 "
                                         "matrix needs 3"):
        bmsparse.diags([1, 2], offsets=1, shape=(4, 4))
    with pytest.raises(ValueError, match="1 diagonals but 2 offsets"):
        bmsparse.diags([[1, 2]], offsets=[0, 1])
    with pytest.raises(ValueError, match="out of bounds"):
        bmsparse.diags([1, 2], offsets=5, shape=(3, 3))
    with pytest.raises(TypeError, match="offsets must be an integer"):
        bmsparse.diags([1, 2], offsets=0.5)
    with pytest.raises(TypeError, match="dtype"):
        bmsparse.diags(np.ones(3, dtype=np.int8))


def test_diags_one_offset_tells_one_diagonal_from_several(xp):
    device = xp is not np
    # as scipy: with one offset, a sequence of numbers is the diagonal; a
    # sequence of sequences (ragged or not) lists diagonals, one allowed
    for diagonals in ([[1, 2, 3], [4, 5]], [[1, 2], [3, 4]], [xp.asarray([1, 2]), [3]]):
        with pytest.raises(ValueError, match="2 diagonals but 1 offsets"):
            bmsparse.diags(diagonals, offsets=0, device=device)
        with pytest.raises(ValueError, match="Different number of diagonals and offsets"):
            sp.diags_array([host(d) for d in diagonals], offsets=0)
    want = scipy_diags([[1, 2, 3]], [1], None, np.int64)
    for diagonals in ([1, 2, 3], xp.asarray([1, 2, 3]), [xp.asarray([1, 2, 3])], [[1, 2, 3]]):
        for k in (1, np.int64(1), np.array(1)):
            got = bmsparse.diags(diagonals, offsets=k, device=device)
            assert_same_csr(on_side(got, xp), want)
