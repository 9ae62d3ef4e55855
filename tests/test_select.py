"""tril / triu and the block masks under them, against scipy and NumPy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import bmsparse
from bmsparse import BitmapMatrix
from bmsparse._select import _LOWER_MASKS, pattern, triangle_bitmaps
from tests.cases import CASES, DTYPES, named, ours
from tests.helpers import assert_same_csr

DIAGONALS = [-100, -9, -8, -7, -3, -1, 0, 1, 2, 7, 8, 9, 100]


def test_lower_masks_hold_the_bits_on_or_below_each_diagonal():
    r, c = np.divmod(np.arange(64), 8)
    for t in range(-8, 8):
        want = sum(1 << int(b) for b in np.flatnonzero(c - r <= t))
        assert int(_LOWER_MASKS[t + 8]) == want, t


@pytest.mark.parametrize("lower", [True, False])
def test_triangle_bitmaps_against_numpy(xp, lower):
    a = named("square", "bool", seed=4)
    mat = ours(a, xp)
    for k in DIAGONALS:
        kept = triangle_bitmaps(mat.keys, mat.bitmaps, k, lower)
        got = pattern(mat.keys, kept, a.shape).get().toarray()
        want = (np.tril if lower else np.triu)(a.toarray(), k)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_tril_triu_against_scipy(xp, case, dtype):
    a = named(case, dtype, seed=8)  # stored zeros included: scipy keeps them
    mat = ours(a, xp)
    for k in DIAGONALS:
        for ours_f, theirs in ((bmsparse.tril, sp.tril), (bmsparse.triu, sp.triu)):
            got = ours_f(mat, k)
            assert isinstance(got, BitmapMatrix) and got.on_device == mat.on_device
            assert got.dtype == a.dtype and got.shape == a.shape
            got.check_format(full_check=True)
            assert_same_csr(got.get().to_scipy(), theirs(a, k).tocsr())


def test_diagonals_past_every_entry(xp):
    a = named("dense", "float64", seed=3)
    mat = ours(a, xp)
    for k in (2**70, np.int64(2**62), -(2**70)):
        assert bmsparse.tril(mat, k).nnz == (a.nnz if k > 0 else 0)
        assert bmsparse.triu(mat, k).nnz == (0 if k > 0 else a.nnz)


def test_triangles_of_scipy_input_and_default_diagonal():
    a = named("tall", "float64", seed=2)
    assert_same_csr(bmsparse.tril(a).to_scipy(), sp.tril(a).tocsr())
    # (a dense input stores no zeros)
    assert_same_csr(bmsparse.triu(a.toarray()).to_scipy(), sp.triu(sp.csr_array(a.toarray())).tocsr())


def test_diagonal_must_be_an_integer():
    mat = BitmapMatrix(named("tall", "float64"))
    for k in (1.0, "1", None):
        with pytest.raises(TypeError, match="k must be an integer"):
            bmsparse.tril(mat, k)
