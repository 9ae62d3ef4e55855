"""Inputs as scipy takes them: the constructor forms, setdiag and read_matrix
(host regressions found by probes against scipy.sparse)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import bmsparse
from bmsparse import BitmapMatrix


@pytest.mark.parametrize("arg", [
    ([1.0], (0, 1)),  # Python ints for index arrays
    ([1.0], (np.int64(0), np.int64(1))),
    ([1.0], (np.array(0), np.array(1))),  # 0-d arrays
    ([1.0], np.array(0), np.array([0, 1])),  # CSR, 0-d indices
    ([1.0], np.array([0]), np.array(1)),  # CSR, 0-d indptr
])
def test_inferred_shape_refuses_index_scalars_clearly(arg):
    # the shape inference met them first: AttributeError, IndexError or
    # "len() of unsized object"
    with pytest.raises(ValueError, match="1-D"):
        BitmapMatrix(arg)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, bool])
@pytest.mark.parametrize("csr", [False, True])
def test_triplets_cast_to_dtype_before_duplicates_are_summed(dtype, csr):
    # as scipy: 0.5 + 0.5 is 0 + 0 in int, 1 + -1 is True | True in bool
    values = np.array([0.5, 0.5, 1.0, -1.0, 2.7])
    rows, cols = np.array([0, 0, 1, 1, 2]), np.array([0, 0, 1, 1, 2])
    arg = (values, cols, np.array([0, 2, 4, 5])) if csr else (values, (rows, cols))
    want = sp.csr_array(arg, shape=(3, 3), dtype=dtype)
    for shape in ((3, 3), None):
        got = BitmapMatrix(arg, shape=shape, dtype=dtype)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.toarray(), want.toarray())


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0)])
def test_setdiag_main_diagonal_of_an_empty_matrix_is_a_no_op(shape):
    want = sp.csr_array(shape)
    want.setdiag(1.0)  # scipy: nothing to set, no error
    got = BitmapMatrix(shape)
    got.setdiag(1.0)
    assert got.shape == want.shape and got.nnz == want.nnz == 0
    with pytest.raises(ValueError, match="k exceeds array dimensions"):
        got.setdiag(1.0, 1 if shape[1] == 0 else -1)


def test_read_matrix_reads_unsigned_integer_matrix_market(tmp_path):
    # mmread gave int64; read_matrix refused scipy's uint64 with TypeError
    path = tmp_path / "u.mtx"
    path.write_text("%%MatrixMarket matrix coordinate unsigned-integer general\n"
                    "2 2 2\n1 1 3\n2 2 4\n")
    got = bmsparse.read_matrix(path)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.toarray(), [[3, 0], [0, 4]])
    assert bmsparse.read_matrix(path, dtype=np.float32).dtype == np.float32
