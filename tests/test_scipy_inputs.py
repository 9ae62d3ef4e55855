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


@pytest.mark.parametrize("build", [
    lambda: BitmapMatrix.from_coo(np.array(0), np.array(1), np.array([1.0]), (2, 2)),
    lambda: BitmapMatrix.from_coo(np.array([0]), np.array(1), np.array([1.0]), (2, 2)),
    lambda: BitmapMatrix((np.array(1.0), (np.array(0), np.array(1))), shape=(2, 2)),
    lambda: BitmapMatrix.from_csr(np.array([0, 1, 1]), np.array(1), np.array([1.0]), (2, 2)),
    lambda: BitmapMatrix.from_csr(np.array([0, 1, 1]), np.array([1]), np.array(1.0), (2, 2)),
    lambda: BitmapMatrix.from_csr(np.array(0), np.zeros(0, np.int64), np.zeros(0), (0, 2)),
])
def test_0d_index_and_csr_value_arrays_are_refused(build):
    # ascontiguousarray made a 0-d array 1-D before the rank was checked:
    # the 0-d input was taken as one entry (scipy refuses it)
    with pytest.raises(ValueError, match="must be 1-D, got 0-D"):
        build()


def test_from_coo_scalar_values_still_broadcast():
    m = BitmapMatrix.from_coo(np.array([0, 1]), np.array([1, 0]), np.array(2.0), (2, 2))
    np.testing.assert_array_equal(m.toarray(), [[0, 2], [2, 0]])


def test_uint64_indptr_past_2_63_names_its_drop():
    # the drops were looked for in int64, where 2^63 + 5 reads as negative:
    # the message named indptr[0] > indptr[1], which is not so
    indptr = np.array([0, 2**63 + 5, 1], dtype=np.uint64)
    with pytest.raises(ValueError, match=r"indptr\[1\] > indptr\[2\]"):
        BitmapMatrix.from_csr(indptr, np.array([1], np.uint64), np.array([1.0]), (2, 2))


@pytest.mark.parametrize("axes", [1, np.array([1, 0])])
def test_transpose_refuses_axes_that_are_not_a_sequence(axes):
    # an int gave "'int' object is not iterable" (scipy: ValueError)
    with pytest.raises(ValueError, match="axes"):
        BitmapMatrix(np.eye(3)).transpose(axes)


@pytest.mark.parametrize("arg", [
    ([1.0], (["a"], [0])),
    ([1.0], ([0], np.array(["b"]))),
    ([1.0], ["x"], [0, 1]),
])
def test_inferred_shape_refuses_indices_that_are_not_integers(arg):
    # max() of string indices raised NumPy's UFuncTypeError, naming no argument
    with pytest.raises(TypeError, match="must be integer arrays, got str"):
        BitmapMatrix(arg)
