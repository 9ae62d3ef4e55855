"""A @ A on every matrix of the shared corpus, against scipy (skipped without it)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix, spgemm
from bmsparse._readers import matrix_files, read_matrix
from tests.conftest import matrices_dir
from tests.helpers import assert_same_csr, scipy_product, to_device

FOLDER = matrices_dir()
FILES = matrix_files(FOLDER) if FOLDER is not None else []
#: above this many multiplies the NumPy twin takes too long for CI; the GPU runs them all
CPU_MULTIPLIES = 8_000_000


def multiplies(a, b) -> int:
    return int(np.dot(np.diff(sp.csc_array(a).indptr), np.diff(sp.csr_array(b).indptr)))


@pytest.fixture(scope="module", params=[name for name, _ in FILES] or
                [pytest.param("none", marks=pytest.mark.skip(reason="no matrix corpus"))])
def corpus_matrix(request):
    path = dict(FILES)[request.param]
    return request.param, read_matrix(path)


def test_round_trip(corpus_matrix, xp):
    _, a = corpus_matrix
    got = to_device(BitmapMatrix(a), xp).to_scipy()
    assert_same_csr(got, a, rtol=0)


def test_square_product(corpus_matrix, xp):
    name, a = corpus_matrix
    b = a if a.shape[0] == a.shape[1] else sp.csr_array(a.T)
    if xp is np and multiplies(a, b) > CPU_MULTIPLIES:
        pytest.skip(f"{name}: {multiplies(a, b)} multiplies is GPU-sized")
    ab = to_device(BitmapMatrix(a), xp)
    bb = to_device(BitmapMatrix(b), xp)
    got = spgemm(ab, bb).to_scipy()
    assert_same_csr(got, scipy_product(a, b))
