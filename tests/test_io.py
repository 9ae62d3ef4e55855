"""mmread / mmwrite round trips against scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from bmsparse import BitmapMatrix, mmread, mmwrite
from tests.helpers import assert_same_csr, random_csr


@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
@pytest.mark.parametrize("dtype", ["float64", "int64", "complex128"])
def test_round_trip(tmp_path, suffix, dtype):
    a = random_csr(37, 21, 0.2, seed=5, dtype=dtype)
    path = tmp_path / f"a{suffix}"
    mmwrite(path, BitmapMatrix(a))
    got = mmread(path)
    assert isinstance(got, BitmapMatrix) and not got.on_device
    assert_same_csr(got.to_scipy(), a, rtol=0)


def test_reads_what_scipy_writes_and_keeps_stored_zeros(tmp_path):
    a = sp.coo_array((np.array([1.0, 0.0, 2.0]), (np.array([0, 3, 9]), np.array([4, 4, 0]))),
                     shape=(10, 5))
    path = tmp_path / "z.mtx"
    scipy.io.mmwrite(path, a)
    got = mmread(path)
    assert got.nnz == 3
    assert_same_csr(got.to_scipy(), a.tocsr(), rtol=0)


def test_writes_what_scipy_reads(tmp_path):
    a = random_csr(12, 12, 0.3, seed=2)
    path = tmp_path / "w.mtx"
    mmwrite(path, a, comment="from bmsparse")
    assert_same_csr(sp.csr_array(scipy.io.mmread(path)), a, rtol=0)
