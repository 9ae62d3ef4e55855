"""setdiag against scipy's csr_array.setdiag."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix
from tests.cases import DTYPES, ours, random_matrix
from tests.helpers import assert_same_csr


def on_host(m):
    m.check_format(full_check=True)
    return m.get().to_scipy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,k", [((9, 9), 0), ((9, 9), 3), ((9, 9), -8), ((5, 17), 2),
                                     ((17, 5), -4), ((17, 5), 4), ((1, 1), 0), ((16, 16), 15)])
@pytest.mark.parametrize("kind", ["scalar", "zero", "long", "short"])
def test_setdiag_against_scipy(xp, dtype, shape, k, kind):
    a = random_matrix(shape, 0.4, dtype, seed=3)
    length = min(shape[0] + min(k, 0), shape[1] - max(k, 0))
    rng = np.random.default_rng(1)
    values = {"scalar": 3, "zero": 0, "long": rng.integers(-4, 5, length + 3),
              "short": rng.integers(1, 5, max(length - 2, 1))}[kind]
    values = values if np.ndim(values) == 0 else values.astype(dtype)
    want = a.copy()
    want.setdiag(values, k)
    got = ours(a, xp)
    got.setdiag(values if np.ndim(values) == 0 else xp.asarray(values), k)
    if np.dtype(dtype) == np.bool_:
        want.eliminate_zeros()  # (a bool matrix stores no False)
    assert_same_csr(on_host(got), want)


def test_setdiag_then_eliminate_zeros_drops_self_loops(xp):
    a = random_matrix((40, 40), 0.2, "float64", seed=5, explicit_zeros=False)
    a = sp.csr_array(a + sp.eye_array(40))
    got = ours(a, xp)
    got.setdiag(0)
    got.eliminate_zeros()
    want = a.copy()
    want.setdiag(0)
    want.eliminate_zeros()
    assert_same_csr(on_host(got), want)
    assert not np.any(on_host(got).diagonal())


def test_setdiag_drops_what_the_matrix_derived(xp):
    a = ours(random_matrix((24, 24), 0.3, "float64", seed=2), xp)
    x = xp.ones(24)
    before = a @ x  # keeps a row pointer and launches
    t = a.T
    a.setdiag(7.0)
    want = random_matrix((24, 24), 0.3, "float64", seed=2)
    want.setdiag(7.0)
    got = a @ x
    np.testing.assert_allclose(got.get() if hasattr(got, "get") else got, want @ np.ones(24))
    assert not np.allclose(got.get() if hasattr(got, "get") else got,
                           before.get() if hasattr(before, "get") else before)
    # a lazy transpose taken before and not yet used computes from the new arrays
    assert_same_csr(on_host(t), sp.csr_array(want.T))


def test_setdiag_refuses_what_scipy_refuses():
    a = BitmapMatrix(random_matrix((4, 6), 0.5, "float64", seed=0))
    for k in (6, -4):
        with pytest.raises(ValueError, match="k exceeds array dimensions"):
            a.setdiag(1.0, k)
    with pytest.raises(ValueError, match="1-D"):
        a.setdiag(np.ones((2, 2)))
    with pytest.raises(TypeError, match="k must be an integer"):
        a.setdiag(1.0, 1.5)
