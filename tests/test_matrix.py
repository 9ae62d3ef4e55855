"""BitmapMatrix: constructors, conversions, attributes and format checks."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix
from tests.cases import ours, random_matrix
from tests.helpers import assert_same_csr

TOP = 1 << 63
ALL_ONES = (1 << 64) - 1
SUPPORTED = "bool, int32, int64, float32, float64, complex64, complex128"
DTYPES = ["bool", "int32", "int64", "float32", "float64", "complex64", "complex128"]


def host(a):
    return a if a is None or isinstance(a, np.ndarray) else a.get()


def to_xp(m: BitmapMatrix, xp) -> BitmapMatrix:
    return m if xp is np else m.to_device()


# shape (10, 19): 2 x 3 blocks, 6 entries in 4 blocks (tests/test_convert.py
# draws the same grid).
#
#              block col 0       block col 1       block col 2
#  col       0 1 2 3 4 5 6 7 | 8 9 0 1 2 3 4 5 | 6 7 8 - - - - -
#  row 0     1 . . . . . . . | . . . . . . . . | . . . - - - - -
#      2     . . . . . . . . | . . . . . . . . | . 4 . - - - - -
#      3     . . . . . . . . | . . 3 . . . . . | . . . - - - - -
#      7     . . . . . . . 2 | . . . . . . . . | . . . - - - - -
#            ----------------+-----------------+----------------
#      8     . . . . . . . . | . . . . . . . . | 5 . . - - - - -
#      9     . . . . . . . . | . . . . . . . . | . . 6 - - - - -
GRID_SHAPE = (10, 19)
GRID_ROWS = [0, 7, 3, 2, 8, 9]
GRID_COLS = [0, 7, 10, 17, 16, 18]
GRID_VALUES = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
GRID_KEYS = [0, 1, 2, (1 << 32) | 2]
GRID_BITMAPS = [1 | TOP, 1 << 26, 1 << 17, 1 | (1 << 10)]
GRID_OFFSETS = [0, 2, 3, 4, 6]


def grid_scipy(dtype=np.float64) -> sp.csr_array:
    return sp.csr_array((np.array(GRID_VALUES, dtype=dtype), (GRID_ROWS, GRID_COLS)),
                        shape=GRID_SHAPE)


def grid(xp=np) -> BitmapMatrix:
    return to_xp(BitmapMatrix(grid_scipy()), xp)


def assert_grid(m: BitmapMatrix) -> None:
    assert m.shape == GRID_SHAPE and m.dtype == np.float64
    assert [int(k) for k in host(m.keys)] == GRID_KEYS
    assert [int(b) for b in host(m.bitmaps)] == GRID_BITMAPS
    assert host(m.offsets).tolist() == GRID_OFFSETS
    assert host(m.values).tolist() == GRID_VALUES


def test_grid_blocks_by_hand():
    m = grid()
    assert_grid(m)
    assert (m.nnz, m.nblocks) == (6, 4)
    assert (m.ndim, m.format, m.has_canonical_format, m.on_device) == (2, "bmp", True, False)


# --- constructors ------------------------------------------------------------------

SCIPY_FORMATS = ["csr", "csc", "coo", "bsr", "dia", "lil", "dok"]


@pytest.mark.parametrize("fmt", SCIPY_FORMATS)
@pytest.mark.parametrize("kind", ["array", "matrix"])
def test_from_scipy_formats(fmt, kind):
    base = random_matrix((21, 13), 0.3, np.float64, seed=1)
    a = (sp.csr_array(base) if kind == "array" else sp.csr_matrix(base)).asformat(fmt)
    m = BitmapMatrix(a)
    assert m.shape == (21, 13) and m.dtype == np.float64
    # scipy's own conversion is the reference (dia and lil drop stored zeros)
    assert_same_csr(m.to_scipy(), a.tocsr(), rtol=0)


def test_from_scipy_grid():
    assert_grid(BitmapMatrix(grid_scipy()))
    assert_grid(BitmapMatrix.from_scipy(grid_scipy().tocoo()))


# A non-canonical 3 x 10 CSR: row 0 lists column 9 before column 1 and column 9
# twice; row 2 holds a duplicate pair summing to zero (kept, as scipy keeps it).
#
#  col   0 1 2 3 4 5 6 7 | 8 9
#  row 0 . 2 . . . . . . | . 4      4 = 1 + 3
#  row 1 . . . . . . . . | . .
#  row 2 . . . . . 0 . . | 7 .      0 = 5 + (-5)
UNSORTED_CSR = sp.csr_array((np.array([1.0, 2.0, 3.0, 5.0, 7.0, -5.0]),
                             np.array([9, 1, 9, 5, 8, 5]), np.array([0, 3, 3, 6])),
                            shape=(3, 10))
UNSORTED_DENSE = [[0, 2, 0, 0, 0, 0, 0, 0, 0, 4], [0] * 10, [0, 0, 0, 0, 0, 0, 0, 0, 7, 0]]


@pytest.mark.parametrize("fmt", ["csr", "coo"])
def test_from_non_canonical_scipy(fmt):
    a = UNSORTED_CSR if fmt == "csr" else UNSORTED_CSR.tocoo()
    assert not UNSORTED_CSR.has_sorted_indices and a.nnz == 6
    m = BitmapMatrix(a)
    # blocks (0, 0): bits 1 and 8*2+5 = 21; (0, 1): bits 1 and 8*2+0 = 16
    assert [int(k) for k in m.keys] == [0, 1]
    assert [int(b) for b in m.bitmaps] == [(1 << 1) | (1 << 21), (1 << 1) | (1 << 16)]
    assert m.values.tolist() == [2.0, 0.0, 4.0, 7.0]
    assert m.nnz == 4
    np.testing.assert_array_equal(m.toarray(), np.array(UNSORTED_DENSE, dtype=float))


def test_from_non_canonical_scipy_csc_has_unsorted_indices():
    # the CSC of the case above, built directly with unsorted row indices and duplicates
    a = sp.csc_array((np.array([3.0, 1.0, 2.0]), np.array([7, 0, 7]), np.array([0, 0, 3])),
                     shape=(8, 2))
    assert not a.has_sorted_indices
    m = BitmapMatrix(a)
    assert [int(b) for b in m.bitmaps] == [(1 << 1) | (1 << 57)]   # (0, 1) and (7, 1)
    assert m.values.tolist() == [1.0, 5.0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_coo_triplets(dtype, xp):
    values = np.array(GRID_VALUES).astype(dtype)
    rows, cols = xp.asarray(np.array(GRID_ROWS)), xp.asarray(np.array(GRID_COLS))
    m1 = BitmapMatrix((xp.asarray(values), (rows, cols)), shape=GRID_SHAPE)
    m2 = BitmapMatrix.from_coo(rows, cols, xp.asarray(values), GRID_SHAPE)
    for m in (m1, m2):
        assert m.on_device == (xp is not np)
        assert m.dtype == np.dtype(dtype) and m.shape == GRID_SHAPE
        assert [int(k) for k in host(m.keys)] == GRID_KEYS
        assert [int(b) for b in host(m.bitmaps)] == GRID_BITMAPS
        if dtype == "bool":
            assert m.values is None
        else:
            np.testing.assert_array_equal(host(m.values), values)


def test_from_csr(xp):
    a = grid_scipy()
    m = BitmapMatrix.from_csr(xp.asarray(a.indptr), xp.asarray(a.indices), xp.asarray(a.data),
                              GRID_SHAPE)
    assert m.on_device == (xp is not np)
    assert_grid(m)


def test_from_csr_takes_lists_as_from_coo_does():
    a = grid_scipy()
    assert_grid(BitmapMatrix.from_csr(a.indptr.tolist(), a.indices.tolist(), a.data.tolist(),
                                      GRID_SHAPE))
    empty = BitmapMatrix.from_csr([0, 0, 0], [], [], (2, 3))
    assert (empty.shape, empty.nnz) == ((2, 3), 0)


@pytest.mark.parametrize("values,bitmaps", [
    (None, GRID_BITMAPS),
    ([True] * 6, GRID_BITMAPS),
    # the third CSR entry, (3, 10), is False: not stored, and block (0, 1) is gone
    ([True, True, False, True, True, True], [1 | TOP, 1 << 17, 1 | (1 << 10)]),
], ids=["none", "all-true", "one-false"])
def test_from_csr_pattern(values, bitmaps, xp):
    a = grid_scipy()
    values = None if values is None else xp.asarray(np.array(values))
    p = BitmapMatrix.from_csr(xp.asarray(a.indptr), xp.asarray(a.indices), values, GRID_SHAPE)
    assert p.dtype == np.bool_ and p.values is None
    assert [int(b) for b in host(p.bitmaps)] == bitmaps


def test_from_coo_strided_arrays(xp):
    # views with a stride (columns of an (n, 2) array, as cupy.nonzero returns its
    # indices, and a[::2]) give the same matrix as dense arrays
    rows, cols = xp.asarray(np.array(GRID_ROWS)), xp.asarray(np.array(GRID_COLS))
    stacked = xp.stack([cols, rows], axis=1)
    spread = xp.zeros(12)
    spread[::2] = xp.asarray(np.array(GRID_VALUES))
    assert not stacked[:, 1].flags.c_contiguous and not spread[::2].flags.c_contiguous
    assert_grid(BitmapMatrix.from_coo(stacked[:, 1], stacked[:, 0], spread[::2], GRID_SHAPE))


def test_from_csr_strided_arrays(xp):
    a = grid_scipy()
    indptr = xp.zeros(2 * a.indptr.size, dtype=xp.int32)
    indptr[::2] = xp.asarray(a.indptr)
    indices = xp.zeros(3 * a.indices.size, dtype=xp.int32)
    indices[::3] = xp.asarray(a.indices)
    values = xp.zeros(2 * a.nnz)
    values[1::2] = xp.asarray(a.data)
    assert_grid(BitmapMatrix.from_csr(indptr[::2], indices[::3], values[1::2], GRID_SHAPE))


def test_from_coo_python_lists_and_scalar_value():
    m = BitmapMatrix.from_coo(GRID_ROWS, GRID_COLS, 2.5, GRID_SHAPE)
    assert m.dtype == np.float64
    assert m.values.tolist() == [2.5] * 6
    assert [int(b) for b in m.bitmaps] == GRID_BITMAPS


def test_from_coo_without_values_is_a_pattern():
    m = BitmapMatrix.from_coo(np.array(GRID_ROWS), np.array(GRID_COLS), None, GRID_SHAPE)
    assert m.dtype == np.bool_ and m.values is None and m.nnz == 6
    assert [int(b) for b in m.bitmaps] == GRID_BITMAPS


def test_from_coo_bool_values_drop_false():
    # a pattern matrix stores no values: False entries are not stored
    m = BitmapMatrix.from_coo(np.array([0, 1, 2]), np.array([0, 1, 2]),
                              np.array([True, False, True]), (3, 3))
    assert m.dtype == np.bool_ and m.nnz == 2
    assert [int(b) for b in m.bitmaps] == [1 | (1 << 18)]


def test_from_coo_sums_duplicates(xp):
    rows = xp.asarray(np.array([2, 0, 2, 2]))
    cols = xp.asarray(np.array([3, 0, 3, 3]))
    m = BitmapMatrix((xp.asarray(np.array([1, 7, 2, 4])), (rows, cols)), shape=(3, 4))
    assert m.dtype == np.int64 and m.nnz == 2
    np.testing.assert_array_equal(host(m.toarray()), [[7, 0, 0, 0], [0] * 4, [0, 0, 0, 7]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_dense(dtype, xp):
    dense = random_matrix((13, 11), 0.3, dtype, seed=3, explicit_zeros=False).toarray()
    m = BitmapMatrix(xp.asarray(dense))
    assert m.on_device == (xp is not np)
    assert m.dtype == np.dtype(dtype) and m.shape == (13, 11)
    assert m.nnz == np.count_nonzero(dense)
    np.testing.assert_array_equal(host(m.toarray()), dense)
    np.testing.assert_array_equal(host(BitmapMatrix.from_dense(xp.asarray(dense)).toarray()),
                                  dense)


def test_from_dense_bool_is_a_pattern(xp):
    dense = np.zeros((9, 17), dtype=bool)
    dense[8, 16] = dense[0, 0] = dense[3, 9] = True
    m = BitmapMatrix(xp.asarray(dense))
    assert m.dtype == np.bool_ and m.values is None and m.nnz == 3
    # blocks (0, 0): bit 0; (0, 1): bit 8*3+1 = 25; (1, 2): bit 0
    assert [int(k) for k in host(m.keys)] == [0, 1, (1 << 32) | 2]
    assert [int(b) for b in host(m.bitmaps)] == [1, 1 << 25, 1]


def test_from_bool_scipy_is_a_pattern():
    a = grid_scipy().astype(bool)
    m = BitmapMatrix(a)
    assert m.dtype == np.bool_ and m.values is None and m.nnz == 6
    assert [int(b) for b in m.bitmaps] == GRID_BITMAPS


def test_from_bitmap_matrix_shares_or_copies():
    a = grid()
    same = BitmapMatrix(a)
    assert same.keys is a.keys and same.values is a.values
    copied = BitmapMatrix(a, copy=True)
    copied.values[0] = 100.0
    assert a.values[0] == 1.0


def test_constructor_dtype_argument():
    m = BitmapMatrix(grid_scipy(), dtype=np.int32)
    assert m.dtype == np.int32 and m.values.tolist() == [1, 2, 3, 4, 5, 6]


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_from_cupyx(fmt):
    import cupyx.scipy.sparse as csp

    base = random_matrix((37, 45), 0.2, np.float64, seed=4)
    cx = {"csr": csp.csr_matrix, "csc": csp.csc_matrix, "coo": csp.coo_matrix}[fmt](
        sp.csr_matrix(base).asformat(fmt))
    m = BitmapMatrix(cx)
    assert m.on_device
    assert_same_csr(m.to_scipy(), base, rtol=0)
    assert_same_csr(BitmapMatrix.from_cupyx(cx).to_scipy(), base, rtol=0)


@pytest.mark.gpu
def test_from_scipy_on_device():
    base = random_matrix((37, 45), 0.2, np.float64, seed=4)
    m = BitmapMatrix.from_scipy(base, device=True)
    assert m.on_device
    host_m = BitmapMatrix(base)
    for name in ("keys", "bitmaps", "offsets", "values"):
        np.testing.assert_array_equal(getattr(m, name).get(), getattr(host_m, name))


# --- round trips ------------------------------------------------------------------------

SHAPES = [((1, 1), 1.0), ((0, 5), 0.0), ((5, 0), 0.0), ((0, 0), 0.0), ((3, 4), 0.0),
          ((7, 9), 0.4), ((8, 8), 1.0), ((9, 17), 0.3), ((16, 16), 1.0), ((100, 37), 0.1),
          ((1, 100), 0.3), ((100, 1), 0.3), ((65, 129), 0.05)]
SHAPE_IDS = [f"{s[0]}x{s[1]}-{d}" for s, d in SHAPES]


@pytest.mark.parametrize("shape,density", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_scipy(shape, density, dtype, xp):
    want = random_matrix(shape, density, dtype, seed=sum(shape))
    m = to_xp(BitmapMatrix(want), xp)
    assert m.shape == shape and m.dtype == np.dtype(dtype) and m.nnz == want.nnz
    got = m.to_scipy()
    assert type(got) is sp.csr_array and got.dtype == np.dtype(dtype)
    assert_same_csr(got, want, rtol=0)     # values are copied, not computed: exact
    np.testing.assert_array_equal(host(m.toarray()), want.toarray())


@pytest.mark.parametrize("shape,density", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", ["bool", "int32", "float64", "complex64"])
def test_transpose(shape, density, dtype, xp):
    want = random_matrix(shape, density, dtype, seed=sum(shape) + 1)
    m = to_xp(BitmapMatrix(want), xp)
    t = m.T
    assert t.shape == shape[::-1] and t.dtype == np.dtype(dtype)
    assert t.on_device == m.on_device
    t.check_format(full_check=True)
    assert_same_csr(t.to_scipy(), want.T, rtol=0)


def test_transpose_of_grid_by_hand():
    t = grid().T
    # (r, c) -> (c, r): (0,0) (7,7) stay in block (0,0); (10,3) -> block (1,0) bit 8*2+3;
    # (17,2) -> block (2,0) bit 8*1+2; (16,8) -> block (2,1) bit 0; (18,9) -> bit 8*2+1
    assert [int(k) for k in t.keys] == [0, 1 << 32, 2 << 32, (2 << 32) | 1]
    assert [int(b) for b in t.bitmaps] == [1 | TOP, 1 << 19, 1 << 10, 1 | (1 << 17)]
    assert t.values.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_tocoo_tocsr_types_on_host():
    m = grid()
    coo, csr = m.tocoo(), m.tocsr()
    assert type(coo) is sp.coo_array and type(csr) is sp.csr_array
    assert coo.shape == csr.shape == GRID_SHAPE
    # COO entries come in value (block, bit) order
    assert coo.row.tolist() == GRID_ROWS and coo.col.tolist() == GRID_COLS
    assert coo.data.tolist() == GRID_VALUES
    assert csr.has_sorted_indices
    assert_same_csr(csr, grid_scipy(), rtol=0)


def test_pattern_tocoo_data_is_bool_ones():
    m = BitmapMatrix(grid_scipy().astype(bool))
    coo = m.tocoo()
    assert coo.dtype == np.bool_ and coo.data.tolist() == [True] * 6


@pytest.mark.gpu
def test_tocoo_tocsr_on_device():
    import cupyx.scipy.sparse as csp

    m = grid().to_device()
    coo, csr = m.tocoo(), m.tocsr()
    assert csp.issparse(coo) and coo.format == "coo"
    assert csp.issparse(csr) and csr.format == "csr"
    assert coo.row.get().tolist() == GRID_ROWS and coo.col.get().tolist() == GRID_COLS
    assert_same_csr(sp.csr_array(csr.get()), grid_scipy(), rtol=0)
    assert csp.issparse(grid().to_cupyx())
    # cupyx is told the CSR is canonical: scipy, checking the arrays, agrees
    host = csr.get()
    assert csr.has_canonical_format and csr.nnz == len(GRID_VALUES)
    assert sp.csr_array((host.data, host.indices, host.indptr), shape=host.shape).has_canonical_format


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_get_to_device_round_trip(dtype):
    a = BitmapMatrix(random_matrix((70, 33), 0.2, dtype, seed=5))
    d = a.to_device()
    assert d.on_device and d.to_device() is d
    assert "on the GPU" in repr(d)
    b = d.get()
    assert not b.on_device
    assert (b.shape, b.dtype, b.nnz, b.nblocks) == (a.shape, a.dtype, a.nnz, a.nblocks)
    for name in ("keys", "bitmaps", "offsets", "values"):
        got, want = getattr(b, name), getattr(a, name)
        if want is None:
            assert got is None
        else:
            assert isinstance(got, np.ndarray)
            np.testing.assert_array_equal(got, want)


def test_get_on_host_is_self():
    a = grid()
    assert a.get() is a


def test_copy_is_independent(xp):
    a = grid(xp)
    b = a.copy()
    for name in ("keys", "bitmaps", "offsets", "values"):
        assert getattr(b, name) is not getattr(a, name)
    b.values[0] = 100.0
    b.keys[0] = 5
    b.bitmaps[0] = 0
    b.offsets[0] = 9
    assert_grid(a)


def test_copy_of_pattern(xp):
    a = to_xp(BitmapMatrix(grid_scipy().astype(bool)), xp)
    b = a.copy()
    b.bitmaps[0] = 0
    assert b.values is None and b.dtype == np.bool_ and b.nnz == 6
    assert [int(x) for x in host(a.bitmaps)] == GRID_BITMAPS


# --- astype --------------------------------------------------------------------------------


@pytest.mark.parametrize("src,dst", [
    ("float64", "int32"), ("float64", "float32"), ("int64", "float64"), ("int32", "int64"),
    ("float64", "complex128"), ("complex64", "complex128"), ("float32", "float64"),
    ("bool", "float64"), ("bool", "int32"), ("bool", "complex64"),
])
def test_astype(src, dst, xp):
    base = random_matrix((30, 21), 0.3, src, seed=6)
    got = to_xp(BitmapMatrix(base), xp).astype(dst)
    assert got.dtype == np.dtype(dst) and got.on_device == (xp is not np)
    got.check_format(full_check=True)
    assert_same_csr(got.get().tocsr(), base.astype(dst), rtol=0)


@pytest.mark.parametrize("src", ["int32", "float64", "complex128"])
def test_astype_bool_drops_stored_zeros(src, xp):
    # scipy keeps a stored zero as a stored False; a pattern matrix cannot hold False
    base = random_matrix((30, 21), 0.3, src, seed=7)
    assert np.any(base.data == 0)
    got = to_xp(BitmapMatrix(base), xp).astype(bool)
    assert got.dtype == np.bool_ and got.values is None
    want = base.astype(bool)
    want.eliminate_zeros()
    assert got.nnz == want.nnz
    assert_same_csr(got.get().tocsr(), want)


def test_astype_same_dtype():
    a = grid()
    assert a.astype(np.float64, copy=False) is a
    b = a.astype("float64")
    assert b is not a and b.values is not a.values
    assert_grid(b)


@pytest.mark.parametrize("dtype,name", [(np.float16, "float16"), (np.uint8, "uint8"),
                                        (object, "object"), (np.int16, "int16")])
def test_astype_unsupported(dtype, name):
    with pytest.raises(TypeError, match=f"dtype {name} is not supported; supported: "
                                        f"{SUPPORTED}"):
        grid().astype(dtype)


# --- attributes ---------------------------------------------------------------------------


def test_memory_usage_by_hand():
    # 4 blocks: 4 keys, 4 bitmaps, 5 offsets of 8 bytes; 6 float64 values
    assert grid().memory_usage() == {"keys": 32, "bitmaps": 32, "offsets": 40, "values": 48,
                                     "index": 104, "index_paper": 64, "total": 152}


@pytest.mark.parametrize("dtype", DTYPES)
def test_memory_usage_is_nbytes(dtype, xp):
    m = to_xp(BitmapMatrix(random_matrix((50, 70), 0.1, dtype, seed=8)), xp)
    usage = m.memory_usage()
    assert usage["keys"] == m.keys.nbytes == 8 * m.nblocks
    assert usage["bitmaps"] == m.bitmaps.nbytes == 8 * m.nblocks
    assert usage["offsets"] == m.offsets.nbytes == 8 * (m.nblocks + 1)
    values = 0 if dtype == "bool" else m.nnz * np.dtype(dtype).itemsize
    assert usage["values"] == values
    assert usage["index"] == usage["keys"] + usage["bitmaps"] + usage["offsets"]
    assert usage["index_paper"] == usage["keys"] + usage["bitmaps"]
    assert usage["total"] == usage["index"] + values


@pytest.mark.parametrize("matrix,text", [
    (lambda: grid(), "<10x19 BitmapMatrix of dtype float64 with 6 stored elements in 4 8x8 "
                     "blocks, on the host>"),
    (lambda: BitmapMatrix(grid_scipy().astype(bool)),
     "<10x19 BitmapMatrix of dtype bool with 6 stored elements in 4 8x8 blocks, on the host>"),
    (lambda: BitmapMatrix(sp.csr_array((0, 3), dtype=np.int32)),
     "<0x3 BitmapMatrix of dtype int32 with 0 stored elements in 0 8x8 blocks, on the host>"),
], ids=["grid", "pattern", "empty"])
def test_repr(matrix, text):
    assert repr(matrix()) == text


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("case", [
    ((37, 21), "float64", (21, 37)), ((37, 21), "int32", ((3, 259),)),
    ((37, 21), "bool", (-1, 7)), ((37, 21), "complex128", ((777, -1),)),
    ((16, 16), "float32", (1, 256)), ((1, 70), "float64", (70, 1)), ((0, 5), "float64", (5, 0))],
    ids=["transposed-shape", "wide", "pattern-inferred", "one-column-inferred", "to-a-row",
         "row-to-column", "empty"])
def test_reshape_as_scipy(case, order, xp):
    shape, dtype, args = case
    a = random_matrix(shape, 0.3, dtype, seed=41)  # stored zeros included
    want = sp.csr_array(a.reshape(*args, order=order))
    got = ours(a, xp).reshape(*args, order=order)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert_same_csr(got.get().to_scipy(), want, rtol=0)


def test_reshape_checks_its_arguments(xp):
    a = ours(random_matrix((3, 4), 0.5, "float64", seed=42), xp)
    assert a.reshape(3, 4) is a and a.reshape((3, 4), copy=True) is not a
    for args, message in [(((5, 3),), r"cannot reshape array of size 12 into shape \(5, 3\)"),
                          (((-1, -1),), "can only specify one unknown dimension"),
                          (((-1, 5),), r"size 12 into shape \(-1, 5\)"),
                          (((12,),), "2-D: cannot reshape it to 1 dimensions"),
                          ((2, 2, 3), "2-D: cannot reshape it to 3 dimensions"),
                          (((2**36, 0),), "size 12")]:
        with pytest.raises(ValueError, match=message):
            a.reshape(*args)
    with pytest.raises(ValueError, match="'order' must be 'C' or 'F'"):
        a.reshape(2, 6, order="A")
    with pytest.raises(TypeError, match="shape must be a tuple of integers"):
        a.reshape(2.0, 6)
    # positions past int64: 2^35 x 2^28 entries
    with pytest.raises(ValueError, match="would not fit in int64"):
        BitmapMatrix((2**35, 2**28)).reshape(2**28, 2**35)


@pytest.mark.parametrize("shape", [(30, 15), (50, 30), (37, 5), (40, 10), (0, 21), (8, 8),
                                   (37, 21)])
@pytest.mark.parametrize("dtype", ["float64", "bool", "complex128"])
def test_resize_in_place_as_scipy(shape, dtype, xp):
    a = random_matrix((37, 21), 0.3, dtype, seed=43)  # stored zeros included
    want = a.copy()
    want.resize(shape)
    got = ours(a, xp)
    assert got.resize(*shape) is None
    assert got.shape == shape and got.dtype == want.dtype
    got.check_format(full_check=True)
    assert_same_csr(got.get().to_scipy(), want, rtol=0)


def test_resize_drops_what_a_matrix_derived_and_guards_lazy_transposes(xp):
    a = random_matrix((37, 21), 0.3, "float64", seed=44)
    m = ours(a, xp)
    x = xp.asarray(np.arange(37.0))
    m.T @ x  # noqa: B018 - derives and keeps the column order
    made = m.T
    made.keys  # noqa: B018 - its blocks made now
    lazy = m.T
    m.resize((20, 30))
    want = a.copy()
    want.resize((20, 30))
    # the column order was made again for the new shape: as a new matrix's
    got = host(m.T @ x[:20])
    np.testing.assert_array_equal(got, host(ours(want, xp).T @ x[:20]))
    np.testing.assert_allclose(got, want.T @ np.arange(20.0), rtol=1e-12)
    # a transpose made before keeps the matrix as it was, as scipy's
    assert_same_csr(made.get().to_scipy(), sp.csr_array(a.T), rtol=0)
    with pytest.raises(ValueError, match="taken before the matrix was resized to 20 x 30"):
        lazy.toarray()
    m.T.resize((10, 3))  # a lazy transpose resizes its own blocks
    with pytest.raises(ValueError, match="shape must be"):
        m.resize((-1, 3))
    # to 2^35 rows (scipy's, or a CSR's, row pointer would take 256 GiB):
    # nothing per row; the blocks are those of the 20 x 3 crop
    want.resize((20, 3))
    m.resize(2**35, 3)
    assert m.shape == (2**35, 3)
    crop = BitmapMatrix(want)
    for name in ("keys", "bitmaps", "offsets", "values"):
        np.testing.assert_array_equal(host(getattr(m, name)), getattr(crop, name))


def _stored_order(entry: tuple[int, int]) -> tuple[int, int, int, int]:
    """Where an entry lies in a BitmapMatrix's stored order: block by block
    (block rows, then block columns), each block row by row."""
    r, c = entry
    return r // 8, c // 8, r % 8, c % 8


def _printed_entries(lines: list[str]) -> list[tuple[tuple[int, int], str]]:
    out = []
    for line in lines:
        coords, value = line.strip().split("\t")
        r, c = coords.strip("()").split(", ")
        out.append(((int(r), int(c)), value))
    return out


@pytest.mark.parametrize("case", [
    ("float64", (10, 19), 6 / 190), ("float64", (100, 100), 0.1), ("bool", (60, 9), 0.2),
    ("complex128", (9, 9), 0.6), ("int32", (40, 80), 0.0), ("float32", (51, 1), 1.0)],
    ids=["few", "more-than-50", "bool", "complex", "empty", "exactly-51"])
def test_str_prints_the_stored_entries_as_scipy(case, xp):
    dtype, shape, density = case
    want = sp.csr_array(random_matrix(shape, density, dtype, seed=21))
    coo = want.tocoo()
    values = dict(zip(zip(coo.row.tolist(), coo.col.tolist()), coo.data))
    a = ours(want, xp)
    text = str(a)
    lines = text.split("\n")
    assert lines[0] == repr(a)
    if not values:
        assert lines == [repr(a)]
        return
    assert lines[1] == "  Coords\tValues"
    ordered = sorted(values, key=_stored_order)
    if len(ordered) > 50:  # scipy's maxprint: the first and last 25
        assert lines[27] == "  :\t:"
        shown = ordered[:25] + ordered[-25:]
        printed = _printed_entries(lines[2:27] + lines[28:])
    else:
        shown = ordered
        printed = _printed_entries(lines[2:])
    assert [p for p, _ in printed] == shown
    # each value as scipy prints it: str() of the NumPy scalar
    assert [v for _, v in printed] == [str(values[p]) for p in shown]


@pytest.mark.parametrize("maxprint", [0, 1, 4, 7, 60])
def test_str_shows_maxprint_entries_as_scipy(maxprint, xp):
    # scipy's maxprint, given to the constructor or set on the matrix: of
    # more entries, the first and last maxprint // 2
    want = sp.csr_array(random_matrix((30, 20), 0.1, "float64", seed=22))
    coo = want.tocoo()
    ordered = sorted(zip(coo.row.tolist(), coo.col.tolist()), key=_stored_order)
    assert len(ordered) == 60
    by_constructor = BitmapMatrix(ours(want, xp), maxprint=maxprint)
    by_attribute = ours(want, xp)
    by_attribute.maxprint = maxprint
    for a in (by_constructor, by_attribute):
        assert a.maxprint == maxprint
        lines = str(a).split("\n")
        if maxprint >= 60:
            assert [p for p, _ in _printed_entries(lines[2:])] == ordered
            continue
        half = maxprint // 2
        assert lines[2 + half] == "  :\t:" and len(lines) == 3 + 2 * half
        shown = _printed_entries(lines[2:2 + half] + lines[3 + half:])
        assert [p for p, _ in shown] == ordered[:half] + (ordered[-half:] if half else [])
    # a copy starts at 50 again, as scipy's copies do
    assert by_attribute.copy().maxprint == 50


@pytest.mark.parametrize("value, error", [(-1, ValueError), (2.5, TypeError), ("4", TypeError)])
def test_maxprint_is_a_non_negative_integer(value, error):
    a = BitmapMatrix(np.eye(3))
    with pytest.raises(error, match="maxprint"):
        a.maxprint = value
    with pytest.raises(error, match="maxprint"):
        BitmapMatrix(np.eye(3), maxprint=value)
    assert a.maxprint == 50


def test_scipys_canonical_form_methods_have_nothing_to_do(xp):
    # code written for scipy calls them; a BitmapMatrix is always canonical
    want = sp.csr_array(random_matrix((20, 13), 0.3, "float64", seed=23))
    a = ours(want, xp)
    arrays = (a.keys, a.bitmaps, a.offsets, a.values)
    assert a.has_sorted_indices and a.has_canonical_format
    assert a.sum_duplicates() is None and a.sort_indices() is None and a.prune() is None
    assert all(x is y for x, y in zip((a.keys, a.bitmaps, a.offsets, a.values), arrays))
    copy = a.sorted_indices()
    assert copy is not a and copy.keys is not a.keys
    assert_same_csr(copy.get().to_scipy(), want, rtol=0)


def test_str_of_a_hypersparse_matrix_and_a_pattern(xp):
    # only the blocks holding the shown entries are read: a shape of 2^35
    # rows builds nothing per row
    n = 2**35
    rows = xp.asarray(np.array([0, n - 1, 5]))
    cols = xp.asarray(np.array([n - 1, 0, 5]))
    a = BitmapMatrix.from_coo(rows, cols, xp.asarray(np.array([1.5, -2.0, 0.25])), (n, n))
    lines = str(a).split("\n")
    assert lines[2:] == ["  (5, 5)\t0.25", "  (0, 34359738367)\t1.5",
                         "  (34359738367, 0)\t-2.0"]
    pattern = ours(sp.csr_array(np.eye(3, dtype=bool)), xp).T  # a lazy transpose
    assert str(pattern).split("\n")[2:] == ["  (0, 0)\tTrue", "  (1, 1)\tTrue",
                                            "  (2, 2)\tTrue"]


@pytest.mark.parametrize("dense", [[[2.0]], [[0.0]], np.eye(3), np.zeros((1, 3)),
                                   np.zeros((0, 0))], ids=["1x1", "1x1-zero", "3x3", "1x3", "0x0"])
def test_truth_value_as_scipy(dense):
    # only a 1x1 matrix has one: `if A:` must not pass for any matrix
    want = sp.csr_array(np.asarray(dense))
    got = BitmapMatrix(np.asarray(dense))
    if want.shape == (1, 1):
        assert bool(got) is bool(want)
    else:
        with pytest.raises(ValueError):
            bool(want)
        with pytest.raises(ValueError, match="ambiguous"):
            bool(got)


def test_comparison_is_elementwise_and_containers_use_identity():
    a, b = BitmapMatrix(np.eye(3)), BitmapMatrix(np.eye(3))
    with pytest.warns(sp.SparseEfficiencyWarning, match="using == is inefficient"):
        assert (a == b).toarray().all()
    assert (a != b).nnz == 0
    # containers still find a matrix by identity, and it hashes
    assert a in [a] and len({a, b}) == 2 and {a: 1}[a] == 1


def test_truth_value_of_a_stored_zero_as_scipy():
    want = sp.csr_array(([0.0], ([0], [0])), shape=(1, 1))
    assert bool(BitmapMatrix(want)) is bool(want)


@pytest.mark.parametrize("shape,entries,nnz,nblocks", [
    ((8, 8), [(r, c) for r in range(8) for c in range(8)], 64, 1),
    ((16, 16), [(0, 0), (15, 15), (7, 8), (8, 7)], 4, 4),
    ((3, 3), [], 0, 0),
    ((9, 9), [(8, 8), (8, 8)], 1, 1),
])
def test_nnz_and_nblocks(shape, entries, nnz, nblocks):
    rows = np.array([e[0] for e in entries], dtype=np.int64)
    cols = np.array([e[1] for e in entries], dtype=np.int64)
    m = BitmapMatrix.from_coo(rows, cols, np.ones(len(entries)), shape)
    assert (m.nnz, m.nblocks) == (nnz, nblocks)
    p = BitmapMatrix.from_coo(rows, cols, None, shape)
    assert (p.nnz, p.nblocks) == (nnz, nblocks)


# --- check_format --------------------------------------------------------------------------


def u64(values):
    return np.array(values, dtype=np.uint64)


def i64(values):
    return np.array(values, dtype=np.int64)


# Broken variants of GRID, each breaking one invariant (shape (10, 19): block
# rows 0..1, block columns 0..2; block (1, *) has rows 2..7 of padding, block
# (*, 2) columns 3..7 of padding).
BROKEN = {
    "unsorted-keys": (u64([1, 0, 2, (1 << 32) | 2]), u64(GRID_BITMAPS), i64(GRID_OFFSETS),
                      np.arange(6.0), "keys must be strictly increasing"),
    "repeated-key": (u64([0, 1, 1, (1 << 32) | 2]), u64(GRID_BITMAPS), i64(GRID_OFFSETS),
                     np.arange(6.0), "keys must be strictly increasing"),
    "block-row-out-of-range": (u64([0, 1, 2, (2 << 32) | 2]), u64(GRID_BITMAPS),
                               i64(GRID_OFFSETS), np.arange(6.0),
                               r"key block row out of range for shape \(10, 19\)"),
    "block-col-out-of-range": (u64([0, 1, 3, (1 << 32) | 2]), u64([1 | TOP, 1 << 26, 1, 1]),
                               i64([0, 2, 3, 4, 5]), np.arange(5.0),
                               r"key block column out of range for shape \(10, 19\)"),
    "empty-bitmap": (u64(GRID_KEYS), u64([1 | TOP, 0, 1 << 17, 1 | (1 << 10)]),
                     i64([0, 2, 2, 3, 5]), np.arange(5.0), r"bitmaps must not be empty \(0\)"),
    "wrong-offsets": (u64(GRID_KEYS), u64(GRID_BITMAPS), i64([0, 1, 3, 4, 6]), np.arange(6.0),
                      r"offsets must be the exclusive scan of popcount\(bitmaps\)"),
    "offsets-not-from-0": (u64(GRID_KEYS), u64(GRID_BITMAPS), i64([1, 3, 4, 5, 7]),
                           np.arange(7.0), r"offsets\[0\] must be 0"),
    "bit-in-padding-row": (u64(GRID_KEYS), u64([1 | TOP, 1 << 26, 1 << 17, 1 | (1 << 16)]),
                           i64(GRID_OFFSETS), np.arange(6.0),   # bit 16 is row 10
                           r"bitmaps have bits outside the shape \(10, 19\)"),
    "bit-in-padding-col": (u64(GRID_KEYS), u64([1 | TOP, 1 << 26, 1 << 3, 1 | (1 << 10)]),
                           i64(GRID_OFFSETS), np.arange(6.0),   # bit 3 is column 19
                           r"bitmaps have bits outside the shape \(10, 19\)"),
    "bit-63-in-padding": (u64(GRID_KEYS), u64([1 | TOP, 1 << 26, 1 << 17, 1 | TOP]),
                          i64(GRID_OFFSETS), np.arange(6.0),
                          r"bitmaps have bits outside the shape \(10, 19\)"),
    "too-few-values": (u64(GRID_KEYS), u64(GRID_BITMAPS), i64(GRID_OFFSETS), np.arange(5.0),
                       r"offsets\[-1\] must equal the number of values"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_check_format_full_check_errors(name, xp):
    keys, bitmaps, offsets, values, match = BROKEN[name]
    m = BitmapMatrix._from_blocks(xp.asarray(keys), xp.asarray(bitmaps), xp.asarray(offsets),
                                  xp.asarray(values), GRID_SHAPE)
    m.check_format()   # the cheap checks pass: only the scans find these
    with pytest.raises(ValueError, match=match):
        m.check_format(full_check=True)


@pytest.mark.parametrize("name", ["bit-in-padding-row", "bit-in-padding-col",
                                  "bit-63-in-padding", "block-row-out-of-range"])
def test_from_blocks_rejects_broken(name, xp):
    keys, bitmaps, _, values, match = BROKEN[name]
    with pytest.raises(ValueError, match=match):
        BitmapMatrix.from_blocks(xp.asarray(keys), xp.asarray(bitmaps), xp.asarray(values),
                                 GRID_SHAPE)


@pytest.mark.parametrize("keys,bitmaps,offsets,values,error,match", [
    (i64(GRID_KEYS), u64(GRID_BITMAPS), i64(GRID_OFFSETS), np.arange(6.0), ValueError,
     "keys must be uint64, got int64"),
    (u64(GRID_KEYS), i64([1, 2, 3, 4]), i64([0, 1, 2, 3, 4]), np.arange(4.0), ValueError,
     "bitmaps must be uint64, got int64"),
    (u64([GRID_KEYS]), u64([GRID_BITMAPS]), i64(GRID_OFFSETS), np.arange(6.0), ValueError,
     "keys must be 1-D, got 2-D"),
    (u64(GRID_KEYS), u64(GRID_BITMAPS[:3]), i64(GRID_OFFSETS), np.arange(6.0), ValueError,
     "keys and bitmaps must have the same length, got 4 and 3"),
    (u64(GRID_KEYS), u64(GRID_BITMAPS), i64(GRID_OFFSETS[:4]), np.arange(6.0), ValueError,
     r"offsets must have length nblocks \+ 1 = 5, got 4"),
    (u64(GRID_KEYS), u64(GRID_BITMAPS), i64(GRID_OFFSETS), np.arange(6, dtype=np.float16),
     TypeError, f"values dtype float16 is not supported; supported: {SUPPORTED}"),
    (u64(GRID_KEYS), u64(GRID_BITMAPS), i64(GRID_OFFSETS), np.arange(6.0).reshape(6, 1),
     ValueError, "values must be 1-D, got 2-D"),
], ids=["int64-keys", "int64-bitmaps", "2d-arrays", "length-mismatch", "short-offsets",
        "float16-values", "2d-values"])
def test_check_format_cheap_errors(keys, bitmaps, offsets, values, error, match):
    m = BitmapMatrix._from_blocks(keys, bitmaps, offsets, values, GRID_SHAPE)
    with pytest.raises(error, match=match):
        m.check_format()


def test_check_format_accepts_good(xp):
    m = grid(xp)
    m.check_format()
    m.check_format(full_check=True)
    # padding bits are allowed inside the shape: the last row and column of the grid
    rows, cols = np.divmod(np.arange(190), 19)
    full = BitmapMatrix.from_coo(xp.asarray(rows), xp.asarray(cols), xp.asarray(np.ones(190)),
                                 (10, 19))
    assert [int(b) for b in host(full.bitmaps)] == [ALL_ONES, ALL_ONES, 0x0707070707070707,
                                                    0xFFFF, 0xFFFF, 0x0707]
    full.check_format(full_check=True)


def test_from_blocks_accepts_good(xp):
    values = np.array(GRID_VALUES)
    m = BitmapMatrix.from_blocks(xp.asarray(u64(GRID_KEYS)), xp.asarray(u64(GRID_BITMAPS)),
                                 xp.asarray(values), GRID_SHAPE)
    assert_grid(m)
    p = BitmapMatrix.from_blocks(xp.asarray(u64(GRID_KEYS)), xp.asarray(u64(GRID_BITMAPS)),
                                 None, GRID_SHAPE)
    assert p.dtype == np.bool_ and p.nnz == 6
    e = BitmapMatrix.from_blocks(xp.asarray(u64([])), xp.asarray(u64([])), None, (0, 0))
    assert e.nnz == 0 and e.nblocks == 0


def test_from_blocks_strided_arrays(xp):
    # every array a view with a stride: the kernels must not read them as contiguous
    keys = xp.asarray(u64([k for key in GRID_KEYS for k in (key, 7)]))[::2]
    bitmaps = xp.asarray(u64([b for bm in GRID_BITMAPS for b in (0, bm)]))[1::2]
    values = xp.asarray(np.array([v for val in GRID_VALUES for v in (val, -1.0)]))[::2]
    m = BitmapMatrix.from_blocks(keys, bitmaps, values, GRID_SHAPE)
    np.testing.assert_array_equal(host(m.toarray()), grid_scipy().toarray())
    csr = m.tocsr()
    np.testing.assert_array_equal(host(csr.indices), grid_scipy().indices)
    np.testing.assert_array_equal(host(csr.data), grid_scipy().data)


def test_from_blocks_rejects_int64_keys():
    with pytest.raises(ValueError, match="keys must be a 1-D uint64 array, got 1-D int64"):
        BitmapMatrix.from_blocks(i64(GRID_KEYS), u64(GRID_BITMAPS), np.arange(6.0),
                                 GRID_SHAPE)


def test_from_blocks_rejects_values_without_blocks(xp):
    # no blocks means no values: offsets[-1] = 0 but two values are given
    with pytest.raises(ValueError, match=r"offsets\[-1\] must equal the number of values"):
        BitmapMatrix.from_blocks(xp.asarray(u64([])), xp.asarray(u64([])),
                                 xp.asarray(np.ones(2)), (8, 8))


# --- errors of the constructors ------------------------------------------------------------


@pytest.mark.parametrize("make,name", [
    (lambda: np.ones((3, 3), dtype=np.float16), "float16"),
    (lambda: np.ones((3, 3), dtype=np.uint8), "uint8"),
    (lambda: np.array([[1, None]], dtype=object), "object"),
    (lambda: sp.csr_array(np.ones((3, 3), dtype=np.uint32)), "uint32"),
    (lambda: sp.csr_array(np.ones((3, 3), dtype=np.uint8)), "uint8"),
    (lambda: sp.coo_array(np.eye(3, dtype=np.int8)), "int8"),
], ids=["dense-float16", "dense-uint8", "dense-object", "scipy-uint32", "scipy-uint8",
        "scipy-int8"])
def test_unsupported_dtypes(make, name):
    with pytest.raises(TypeError, match=f"dtype {name} is not supported; supported: "
                                        f"{SUPPORTED}"):
        BitmapMatrix(make())


@pytest.mark.parametrize("make", [
    lambda: np.eye(3, dtype=">f8"),
    lambda: BitmapMatrix(np.eye(3)).astype(">f8"),
    lambda: (np.ones(2, dtype=">i8"), (np.array([0, 1]), np.array([0, 1]))),
], ids=["dense", "astype", "coo-values"])
def test_non_native_byte_order_is_named(make):
    # its name is "float64" too: "float64 is not supported; supported: ...,
    # float64" would contradict itself
    with pytest.raises(TypeError, match=r"dtype >[fi]8 is in non-native byte order; convert it "
                       r"with \.astype\(numpy\.(float64|int64)\)"):
        arg = make()
        BitmapMatrix(arg, shape=(2, 2)) if isinstance(arg, tuple) else BitmapMatrix(arg)


def test_from_blocks_refuses_2d_values():
    with pytest.raises(ValueError, match="values must be 1-D, got 2-D"):
        BitmapMatrix.from_blocks(u64([0]), u64([1]), np.array([[1.0]]), (8, 8))


def test_from_csr_and_from_coo_name_what_they_refuse():
    indptr, indices = np.array([0, 1, 2]), np.array([1, 0])
    with pytest.raises(TypeError, match="expected a NumPy or CuPy array, got dict"):
        BitmapMatrix.from_csr(indptr, indices, {0: 1.0, 1: 2.0}, (2, 2))
    for rows, cols, name in ((None, [0], "rows"), ([0], 3, "cols")):
        with pytest.raises(TypeError, match=f"{name} must be an integer array, got "
                           f"{type(rows if name == 'rows' else cols).__name__}"):
            BitmapMatrix.from_coo(rows, cols, [1.0], (2, 2))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # numpy.matrix
def test_nested_lists_and_numpy_matrix_build_as_scipy_does():
    d = [[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]]
    for arg in (d, np.asmatrix(d)):
        assert_same_csr(BitmapMatrix(arg).to_scipy(), sp.csr_array(arg), rtol=0)


def test_unsupported_coo_value_dtype():
    with pytest.raises(TypeError, match=f"values dtype float16 is not supported; supported: "
                                        f"{SUPPORTED}"):
        BitmapMatrix((np.ones(2, dtype=np.float16), (np.array([0, 1]), np.array([0, 1]))),
                     shape=(2, 2))


@pytest.mark.parametrize("arg,name", [
    ("abc", "str"),
    (3.0, "float"),
    (None, "NoneType"),
    ((np.ones(2), np.array([0, 1])), "tuple"),   # not (values, (rows, cols))
], ids=["string", "scalar", "none", "bad-tuple"])
def test_unsupported_input_type(arg, name):
    with pytest.raises(TypeError, match=f"cannot build a BitmapMatrix from {name}; expected"):
        BitmapMatrix(arg)


@pytest.mark.parametrize("arg,match", [
    (np.ones(3), "expected a 2-D array, got 1-D"),
    (np.ones((2, 2, 2)), "expected a 2-D array, got 3-D"),
])
def test_dense_must_be_2d(arg, match):
    with pytest.raises(ValueError, match=match):
        BitmapMatrix(arg)


def test_scipys_constructor_forms(xp):
    # scipy's csr_array((M, N)), ((data, (row, col))) and (data, indices,
    # indptr), with and without shape: the same matrices here
    rows, cols = np.array([0, 4, 4, 1]), np.array([2, 1, 1, 6])
    data = np.array([1.0, 2.0, 3.0, -1.0])
    indices, indptr = np.array([0, 3, 1]), np.array([0, 2, 2, 3])
    cases = [
        ((3, 5), {}), ((3, 5), {"dtype": np.int32}), ((np.int64(2), 9), {}),
        ((data, (rows, cols)), {}), ((data, (rows, cols)), {"shape": (6, 9)}),
        ((data[:3], indices, indptr), {}), ((data[:3], indices, indptr), {"shape": (3, 8)}),
        ((data[:3].astype(np.float16), indices, indptr), {"dtype": np.float32}),
    ]
    for arg, kwargs in cases:
        want = sp.csr_array(arg, **kwargs)
        mine = arg if xp is np or len(arg) == 2 and not isinstance(arg[1], tuple) else \
            tuple(xp.asarray(x) if isinstance(x, np.ndarray) else
                  tuple(xp.asarray(y) for y in x) for x in arg)
        got = BitmapMatrix(mine, **kwargs)
        got.check_format(full_check=True)
        assert_same_csr(got.get().to_scipy(), want)


@pytest.mark.parametrize("arg", [
    (np.ones(0), (np.zeros(0, int), np.zeros(0, int))),
    (np.ones(0), np.zeros(0, int), np.array([0, 0])),
])
def test_shape_cannot_be_inferred_without_entries(arg):
    with pytest.raises(ValueError, match="cannot infer the shape"):
        BitmapMatrix(arg)
    BitmapMatrix(arg, shape=(1, 3)).check_format(full_check=True)


@pytest.mark.parametrize("arg", [(3.0, 4), (True, 4), (3, 4, 5)])
def test_shapes_and_triples_that_are_not_are_refused(arg):
    with pytest.raises((TypeError, ValueError)):
        BitmapMatrix(arg)


@pytest.mark.parametrize("shape,match", [
    ((3, 4), r"shape \(3, 4\) does not match the input's \(10, 19\)"),
    ((19, 10), r"shape \(19, 10\) does not match the input's \(10, 19\)"),
])
def test_shape_must_match_input(shape, match):
    with pytest.raises(ValueError, match=match):
        BitmapMatrix(grid_scipy(), shape=shape)


def test_coo_triplets_out_of_shape():
    with pytest.raises(ValueError, match=r"row index 9 out of range for shape \(5, 19\)"):
        BitmapMatrix((np.array(GRID_VALUES), (np.array(GRID_ROWS), np.array(GRID_COLS))),
                     shape=(5, 19))


@pytest.mark.parametrize("make,name", [(lambda: grid_scipy(), "csr_array"),
                                       (lambda: np.ones((2, 2)), "ndarray")])
def test_from_cupyx_rejects_host_input(make, name):
    with pytest.raises(TypeError, match=f"expected a cupyx.scipy.sparse matrix, got {name}"):
        BitmapMatrix.from_cupyx(make())


def test_from_scipy_rejects_dense():
    with pytest.raises(TypeError, match="expected a scipy.sparse matrix or array, got ndarray"):
        BitmapMatrix.from_scipy(np.ones((2, 2)))


def test_longest_row_is_kept_with_the_row_pointer(xp):
    a_csr = sp.csr_array((np.ones(5), ([0, 1, 2, 17, 40], [0, 9, 30, 3, 3])), shape=(48, 32))
    a = BitmapMatrix(a_csr)
    a = a if xp is np else a.to_device()
    # block row 0 holds blocks (0, 0), (0, 1), (0, 3); row 2 one; row 5 one
    assert a._longest_row() == 3
    ptr = a._row_pointer()
    host = ptr.get() if hasattr(ptr, "get") else ptr
    np.testing.assert_array_equal(host, [0, 3, 3, 4, 4, 4, 5])
    assert a._row_pointer() is ptr  # computed once


def _gpu_found() -> bool:
    from bmsparse._sputils import cupy_available

    return cupy_available()


@pytest.mark.skipif(_gpu_found(), reason="a GPU is here: the calls below succeed")
@pytest.mark.parametrize("call", [
    lambda: BitmapMatrix(np.eye(3)).to_device(),
    lambda: BitmapMatrix(np.eye(3)).T.to_device(),
    lambda: BitmapMatrix.from_scipy(sp.csr_array(np.eye(3)), device=True),
    lambda: BitmapMatrix.from_scipy(sp.coo_array(np.eye(3)), device=True),
], ids=["to_device", "lazy-transpose", "from_scipy-csr", "from_scipy-coo"])
def test_moving_to_a_gpu_without_one_says_so(call):
    # CuPy's own error here (CI's machine) speaks of the driver's version
    with pytest.raises(RuntimeError, match=r"needs (a CUDA GPU, and CuPy (can use|finds) none|"
                       r"CuPy: install bmsparse with the extra)"):
        call()


def test_a_1d_sparse_array_is_refused_clearly():
    v = sp.coo_array(np.arange(7.0))
    a = BitmapMatrix(np.ones((5, 7)))
    for call in (lambda: BitmapMatrix(v), lambda: a @ v, lambda: a.multiply(v)):
        with pytest.raises(ValueError, match=r"a BitmapMatrix is 2-D, got a 1-D sparse array "
                                             r"of shape \(7,\); .*toarray"):
            call()


def test_from_blocks_with_bool_values_drops_the_false_ones(xp):
    # the values stored False and True where a pattern stores no values: the
    # matrix summed 2, multiplied True and listed one entry
    keys, bitmaps = xp.asarray(u64([0])), xp.asarray(u64([3]))
    m = BitmapMatrix.from_blocks(keys, bitmaps, xp.asarray([True, False]), (10, 10))
    want = sp.csr_array(([True], ([0], [0])), shape=(10, 10))
    assert m.dtype == np.bool_ and m.values is None and m.nnz == 1
    assert_same_csr(m.get().to_scipy(), want)
    assert int(m.sum()) == 1


@pytest.mark.parametrize(("change", "message"), [
    # (past the setter, which makes the dtype follow the values: as a wrong
    # construction would leave them)
    (lambda m: setattr(m, "_values", m.values.astype(np.float32)),
     "values must be of the matrix's dtype float64, got float32"),
    (lambda m: setattr(m, "_values", None), "a float64 matrix must have values, got none"),
    (lambda m: setattr(m, "_offsets", m.offsets.astype(np.float64)),
     "offsets must be a 1-D int64 array, got 1-D float64"),
])
def test_check_format_sees_block_arrays_replaced_wrongly(change, message):
    m = BitmapMatrix(np.eye(9))
    change(m)
    with pytest.raises(ValueError, match=message):
        m.check_format(full_check=True)


def test_from_blocks_names_0d_arrays_and_byte_order():
    with pytest.raises(ValueError, match="values must be 1-D, got 0-D"):
        BitmapMatrix.from_blocks(u64([0]), u64([1]), np.array(1.0), (8, 8))
    with pytest.raises(ValueError, match=r"keys must be a 1-D uint64 array, got 1-D >u8 "
                                         r"\(non-native byte order\)"):
        BitmapMatrix.from_blocks(np.array([0], ">u8"), u64([1]), None, (8, 8))


@pytest.mark.parametrize("make", [lambda: np.eye(3, dtype=np.int8),
                                  lambda: np.eye(3, dtype=np.float16),
                                  lambda: sp.csr_array(np.eye(3, dtype=np.uint16)),
                                  # COO triplets were not cast (a tuple has no astype)
                                  lambda: (np.ones(3, np.int8), (np.arange(3), np.arange(3)))])
def test_a_dtype_casts_an_input_of_a_dtype_not_stored(make):
    # as scipy does given a dtype; without one, the TypeError names the dtype
    shape = (3, 3) if isinstance(make(), tuple) else None
    got = BitmapMatrix(make(), shape=shape, dtype=np.float64)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got.toarray(), np.eye(3))
    with pytest.raises(TypeError, match="is not supported"):
        BitmapMatrix(make(), shape=shape)


def _triplets_or_csr(form: str, values: list, xp) -> tuple:
    """Two entries on the diagonal of a 2 x 2 matrix, as COO triplets or CSR
    arrays, with ``values`` a list and the indices ``xp`` arrays."""
    index = xp.asarray(np.array([0, 1]))
    return (values, (index, index)) if form == "COO" else \
        (values, index, xp.asarray(np.array([0, 1, 2])))


@pytest.mark.parametrize("form", ["COO", "CSR"])
def test_values_in_a_list_are_built_in_the_dtype_as_scipy(form, xp):
    # complex numbers in a real dtype raise, as scipy's: they were cast, their
    # imaginary parts dropped (NumPy's ComplexWarning), 3j a stored zero
    for dtype in (np.float64, np.int64):
        with pytest.raises(TypeError):
            sp.csr_array(_triplets_or_csr(form, [1 + 2j, 3j], np), dtype=dtype)
        with pytest.raises(TypeError):
            BitmapMatrix(_triplets_or_csr(form, [1 + 2j, 3j], xp), dtype=dtype)
    # real numbers are cast, as scipy casts them
    got = BitmapMatrix(_triplets_or_csr(form, [0.5, 2.5], xp), dtype=np.int64)
    want = sp.csr_array(_triplets_or_csr(form, [0.5, 2.5], np), dtype=np.int64)
    assert got.dtype == want.dtype
    assert_same_csr(got.get().to_scipy(), want, rtol=0)


def test_assigned_block_arrays_give_their_own_nnz_and_dtype(xp):
    # the setter kept the old count: nnz, max() and a pattern's toarray went
    # wrong; a lazy transpose made before kept it too
    a = sp.csr_array(np.array([[-1.0, 0, 0], [0, 0, 0]]))
    full = np.full((2, 3), -2.0)
    m, f = ours(a, xp), ours(sp.csr_array(full), xp)
    t = m.T
    m.keys, m.bitmaps, m.offsets, m.values = f.keys, f.bitmaps, f.offsets, f.values
    assert m.nnz == m.size == 6
    m.check_format(full_check=True)
    assert float(m.max()) == -2.0 and float(t.max()) == -2.0 and t.nnz == 6
    np.testing.assert_array_equal(host(t.toarray()), full.T)
    p, q = ours(sp.csr_array(np.eye(3, dtype=bool)), xp), ours(sp.csr_array(np.ones((3, 3),
                                                                                bool)), xp)
    assert p.nnz == 3
    p.keys, p.bitmaps, p.offsets = q.keys, q.bitmaps, q.offsets
    assert p.nnz == 9 and host(p.toarray()).all()
    m.values = m.values.astype(np.float32)  # the dtype follows, as scipy's follows data
    assert m.dtype == (m + m).dtype == np.float32
    with pytest.raises(TypeError, match="values dtype float16 is not supported"):
        m.values = m.values.astype(np.float16)


@pytest.mark.parametrize(("name", "value", "error", "message"), [
    ("values", np.array([1.0, 2.0]), ValueError, "values must hold the 3 entries the bitmaps "
                                                 "store, got 2"),
    ("values", np.array([[1.0, 2.0, 3.0]]), ValueError, "values must be 1-D, got 2-D"),
    ("values", np.array([True, False, True]), ValueError, "a bool matrix stores no False"),
    ("values", "abc", TypeError, "values must be an array, got str"),
    ("values", np.array([1, 2, 3], np.int8), TypeError, "values dtype int8 is not supported"),
    ("keys", np.array([0], np.int64), TypeError, "keys must be uint64, got int64"),
    ("bitmaps", None, TypeError, "bitmaps cannot be None"),
])
def test_setters_refuse_what_breaks_the_matrix(name, value, error, message, xp):
    # before, the values setter took any array: nnz from a short one, a
    # bool one with False shown by toarray() and counted by count_nonzero()
    m = ours(sp.csr_array(np.array([[1.0, 0, 2], [0, 3, 0]])), xp)
    if isinstance(value, np.ndarray):
        value = xp.asarray(value)
    with pytest.raises(error, match=message):
        setattr(m, name, value)
    assert m.nnz == 3 and m.dtype == np.float64
    m.check_format(full_check=True)


def test_values_setter_takes_lists_and_makes_all_true_bool_a_pattern(xp):
    m = ours(sp.csr_array(np.array([[1.0, 0, 2], [0, 3, 0]])), xp)
    m.values = [4.0, 5.0, 6.0]
    np.testing.assert_array_equal(host(m.toarray()), [[4.0, 0, 5.0], [0, 6.0, 0]])
    m.values = xp.ones(3, dtype=bool)
    assert m.dtype == np.bool_ and m.values is None and m.nnz == 3
    m.check_format(full_check=True)
    np.testing.assert_array_equal(host(m.toarray()), [[True, False, True],
                                                      [False, True, False]])


@pytest.mark.parametrize(("make", "message"), [
    (lambda v: BitmapMatrix.from_csr([0, 3], [1, 1, 0], v, (2, 2)),
     r"indptr must have length nrows \+ 1 = 3, got 2"),
    (lambda v: BitmapMatrix.from_csr([1, 2, 3], [0, 1, 0], v, (2, 2)),
     "indptr must start at 0, got 1"),
    (lambda v: BitmapMatrix.from_csr([0, 5, 3], [0, 1, 0], v, (2, 2)),
     r"indptr must be non-decreasing, but indptr\[1\] > indptr\[2\]"),
    (lambda v: BitmapMatrix.from_coo(np.array([[0], [1]]), np.array([[0], [1]]), v[:2, None],
                                     (2, 2)), "rows must be 1-D, got 2-D"),
    (lambda v: BitmapMatrix.from_coo([0, 1], [0, 1], v[:1], (2, 2)),
     r"values must be 1-D with one value per index, got shape \(1,\) for 2 indices"),
])
@pytest.mark.parametrize("dtype", [np.float64, np.bool_])
def test_bool_values_are_checked_as_others(make, message, dtype):
    # bool values went to their False filter first: bad input was taken, or
    # failed with NumPy's own errors
    with pytest.raises(ValueError, match=message):
        make(np.ones(3, dtype=dtype))


def test_a_dense_input_cast_keeps_the_entries_the_cast_makes_zero():
    # as scipy: an input of a dtype not stored is cast after its entries are found
    x = np.array([[0.5, 1.0], [0.0, 2.5]])
    for dt in (np.float16, np.longdouble):
        got = BitmapMatrix(x.astype(dt), dtype=np.int64)
        want = sp.csr_array(x.astype(dt), dtype=np.int64)
        assert got.nnz == want.nnz == 3
        assert_same_csr(got.to_scipy(), want)


def test_coo_triplets_of_the_wrong_arity_are_named():
    with pytest.raises(ValueError, match=r"COO triplets are \(values, \(rows, cols\)\): got 1 "
                                         "index arrays"):
        BitmapMatrix((np.ones(1), (np.zeros(1, int),)), shape=(2, 2))


def test_transpose_astype_and_dot_take_scipys_arguments(xp):
    # transpose(axes, copy) and astype(dtype, casting) raised TypeError, and
    # astype(dtype, 'unsafe') bound 'unsafe' to copy; dot scaled by a 0-d array
    a = sp.csr_array(np.array([[1.0, 0, 2], [0, 3, 0]]))
    m = ours(a, xp)
    for t, want in ((m.transpose((1, 0)), a.T), (m.transpose([1, 0], copy=True), a.T),
                    (m.T.transpose(copy=True), a)):
        assert_same_csr(t.get().to_scipy(), sp.csr_array(want))
    with pytest.raises(ValueError, match="do not take an 'axes' other than"):
        m.transpose((0, 1))
    assert m.astype(np.float32, "unsafe").dtype == np.float32
    assert m.astype(np.complex128, "safe").dtype == np.complex128
    with pytest.raises(TypeError, match="cannot cast the values from float64 to int32 by the "
                                        "rule 'safe'"):
        m.astype(np.int32, "safe")
    np.testing.assert_array_equal(host(m.dot(2.0).toarray()), (a * 2.0).toarray())
    with pytest.raises(ValueError, match="scalar operands are not allowed, use '\\*'"):
        m.dot(xp.asarray(2.0))


def test_check_format_compares_a_patterns_nnz_with_its_offsets():
    m = BitmapMatrix(np.eye(3, dtype=bool))
    m._nnz = 5
    with pytest.raises(ValueError, match=r"offsets\[-1\] must equal nnz"):
        m.check_format(full_check=True)


# --- bool values out of range, hypersparse conversions ----------------------------------


def test_from_csr_and_triplets_check_the_indices_of_false_entries(xp):
    # a False entry is not stored, but its column is still checked, as scipy does
    indptr, indices, values = np.array([0, 1, 2]), np.array([1, 5]), np.array([True, False])
    with pytest.raises(ValueError, match="indices must be < 2"):
        sp.csr_array((values, indices, indptr), shape=(2, 2)).check_format()
    with pytest.raises(ValueError, match=r"column index 5 out of range for shape \(2, 2\)"):
        BitmapMatrix.from_csr(*(xp.asarray(a) for a in (indptr, indices, values)), (2, 2))
    rows = xp.asarray(np.array([0, 1]))
    with pytest.raises(ValueError, match=r"column index 5 out of range for shape \(2, 2\)"):
        BitmapMatrix((xp.asarray(values), (rows, xp.asarray(indices))), shape=(2, 2))


#: the largest shape: a CSR form of it needs 2**35 + 1 index words
HYPERSPARSE = (2**35, 2**35)


def hypersparse_scipy(dtype=np.float64) -> sp.coo_array:
    """A few entries, an explicit zero and a duplicate in the far corners."""
    n = HYPERSPARSE[0]
    rows = np.array([n - 1, 0, n - 1, 5, 5, 2**31 + 3])
    cols = np.array([n - 1, n - 1, 0, 5, 5, 2**33 + 1])
    values = np.array([1, 2, 0, 3, 4, 5], dtype=dtype)
    return sp.coo_array((values, (rows, cols)), shape=HYPERSPARSE)


@pytest.mark.parametrize("dtype", ["bool", "float64"])
def test_nonzero_of_a_hypersparse_matrix(dtype, xp):
    # it went through the CSR form: an indptr of 2**35 + 1 words (256 GiB)
    a = hypersparse_scipy(dtype)
    m = ours(a, xp)
    want = a.copy()
    want.sum_duplicates()  # row-major order, as nonzero() gives
    for got, expected in zip(m.nonzero(), want.nonzero()):
        np.testing.assert_array_equal(host(got), expected)


def test_nonzero_is_row_major_and_skips_stored_zeros(xp):
    a = random_matrix((37, 29), 0.3, "float64", seed=5, explicit_zeros=True)
    got = ours(a, xp).nonzero()
    for g, w in zip(got, sp.csr_array(a).nonzero()):
        np.testing.assert_array_equal(host(g), w)
        assert g.dtype == np.int64


def test_asformat_dok_of_a_hypersparse_matrix():
    # scipy's COO -> DOK needs no index pointer; ours went through the CSR form
    a = hypersparse_scipy()
    got = BitmapMatrix(a).asformat("dok")
    assert isinstance(got, sp.dok_array) and got.shape == a.shape
    assert dict(got.items()) == dict(a.todok().items())


def test_tocsr_on_the_host_allocates_one_index_pointer():
    # the row counts were a bincount (nrows int64 words) and its cumsum next to
    # indptr; a tall matrix with few entries needs little more than indptr itself
    import tracemalloc

    nrows = 2**22
    a = sp.coo_array((np.ones(3), (np.array([0, 5, nrows - 1]), np.array([0, 1, 7]))),
                     shape=(nrows, 8))
    m = BitmapMatrix(a)
    tracemalloc.start()
    try:
        got = m.tocsr()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_same_csr(got, a)
    assert peak <= got.indptr.nbytes + 2**20


def test_toarray_too_big_is_a_value_error(xp):
    # NumPy refuses such a shape itself; CuPy's size overflowed (then an
    # OverflowError from the scatter)
    a = BitmapMatrix.from_coo([0, 2**33 - 1], [5, 2**33 - 2], [1.0, 2.0], (2**33, 2**33))
    a = a if xp is np else a.to_device()
    with pytest.raises(ValueError, match="array is too big: a dense 8589934592 x 8589934592 "
                                         "array of float64"):
        a.toarray()


@pytest.mark.parametrize(("make", "values"), [
    (lambda: sp.csr_array(np.array([[1.5, 0, 2], [0, 3, 0]])), lambda v: v.astype(np.float32)),
    (lambda: sp.csr_array(np.array([[1.5, 0, 2], [0, 3, 0]])), lambda v: v != 0),  # a pattern
    (lambda: sp.csr_array(np.array([[1, 0, 1], [0, 1, 0]], dtype=bool)),
     lambda v: 1j * (v + 1)),  # (the pattern's values are None)
], ids=["float32", "to-pattern", "from-pattern"])
def test_a_lazy_transpose_follows_its_sources_new_dtype(make, values, xp):
    # A.T taken before A.values is replaced computes its blocks from the new
    # values: it kept the old dtype (a float64 A.T holding float32 values, or
    # none), and toarray() cast to it
    m = ours(make(), xp)
    t = m.T
    v = m.values if m.values is not None else xp.ones(m.nnz, dtype=bool)
    m.values = values(v)
    want = m.to_scipy().T
    assert t.dtype == m.dtype == want.dtype
    assert repr(t).startswith(f"<3x2 BitmapMatrix of dtype {want.dtype.name} ")
    t.check_format(full_check=True)
    assert t.dtype == m.dtype and host(t.toarray()).dtype == want.dtype
    np.testing.assert_array_equal(host(t.toarray()), want.toarray())


@pytest.mark.parametrize(("name", "dtype"), [("keys", ">u8"), ("bitmaps", ">u8"),
                                             ("offsets", ">i8")])
def test_setters_name_a_non_native_byte_order(name, dtype):
    # "keys must be uint64, got uint64" named no difference
    m = grid()
    with pytest.raises(TypeError, match=rf"{name} .*got .*{dtype} \(non-native byte order\)"):
        setattr(m, name, getattr(m, name).astype(dtype))
    assert_grid(m)


@pytest.mark.parametrize("name", ["keys", "bitmaps", "offsets", "values"])
def test_deleting_a_block_array_is_refused_clearly(name):
    # Python's own message for a descriptor without __delete__ is "__delete__"
    m = grid()
    with pytest.raises(AttributeError, match=f"cannot delete {name}"):
        delattr(m, name)
    assert_grid(m)


def test_len_is_refused_as_scipy_refuses_it_and_rows_iterate():
    a = grid_scipy()
    with pytest.raises(TypeError, match="length is ambiguous"):
        len(a)
    with pytest.raises(TypeError, match=r"length is ambiguous; use A.nnz or A.shape\[0\]"):
        len(grid())
    # iteration goes on by rows, as scipy's (each a dense row, as A[i] is)
    rows = list(grid())
    assert len(rows) == len(list(a)) == GRID_SHAPE[0]
    np.testing.assert_array_equal(np.stack(rows), a.toarray())


# --- bmsparse.testing ----------------------------------------------------------------------


def test_testing_names_the_first_entry_stored_in_one_only():
    from bmsparse.testing import assert_equal

    a = grid_scipy()
    b = a.tolil()
    b[9, 3] = 7.0   # a new block, after the others
    b[2, 16] = 8.0  # a new entry in block (0, 2), before
    b = b.tocsr()
    # raw bitmaps ("bitmaps differ: 2888... != 2888...") named no entry
    with pytest.raises(AssertionError, match=r"keys differ, in the stored entries: 0 only in "
                                             r"actual, 2 only in desired; the first at "
                                             r"\(2, 16\), stored in desired only"):
        assert_equal(a, b)
    with pytest.raises(AssertionError, match=r"2 only in actual, 0 only in desired; the first "
                                             r"at \(2, 16\), stored in actual only"):
        assert_equal(BitmapMatrix(b).T.T, a)
    stored_zero = sp.csr_array(([0.0], ([0], [0])), shape=(1, 1))
    with pytest.raises(AssertionError, match=r"keys differ.*first at \(0, 0\), stored in "
                                             r"actual only"):
        assert_equal(stored_zero, sp.csr_array((1, 1)))
    one_block = sp.csr_array(([1.0, 2.0], ([0, 3], [0, 1])), shape=(8, 8))
    with pytest.raises(AssertionError, match=r"bitmaps differ.*1 only in actual, 1 only in "
                                             r"desired; the first at \(0, 1\), stored in "
                                             r"desired only"):
        assert_equal(one_block, sp.csr_array(([1.0, 2.0], ([0, 0], [0, 1])), shape=(8, 8)))


@pytest.mark.parametrize("tol", [None, (1e-7, 0.0)])
def test_testing_names_the_first_value_that_differs(tol):
    from bmsparse.testing import assert_allclose, assert_equal

    a = grid_scipy()
    b = a.copy()
    b[8, 16] = 5.5
    b[9, 18] = 6.5
    check = assert_equal if tol is None else lambda x, y: assert_allclose(x, y, *tol)
    with pytest.raises(AssertionError, match=r"values differ, the first at \(8, 16\)"):
        check(a, b)
    check(a, a.copy())


@pytest.mark.parametrize("order", [None, "C", "F"])
def test_toarray_order_and_out_as_scipy(xp, order):
    a = random_matrix((13, 9), 0.3, "float32", seed=6)
    m = ours(a, xp)
    got = m.toarray(order=order)
    want = a.toarray(order=order)
    assert got.flags.f_contiguous == want.flags.f_contiguous
    np.testing.assert_array_equal(got.get() if xp is not np else got, want)
    out = xp.full((13, 9), 7.0, dtype=np.float32, order=order or "C")
    assert m.todense(out=out) is out
    np.testing.assert_array_equal(out.get() if xp is not np else out, want)
    for bad in (xp.zeros((9, 13), np.float32), xp.zeros((13, 9), np.float64)):
        with pytest.raises(ValueError, match="out must be a 13 x 9 array of float32"):
            m.toarray(out=bad)
    with pytest.raises(ValueError, match="order must be"):
        m.toarray(order="K")


def test_conversions_take_scipys_copy():
    a = random_matrix((13, 9), 0.3, "float64", seed=6)
    m = BitmapMatrix(a)
    for name in ("tocsr", "tocsc", "tocoo"):
        got = getattr(m, name)(copy=True)
        assert_same_csr(sp.csr_array(got), a)


def test_toarray_takes_lower_case_order_and_refuses_order_with_out():
    m = BitmapMatrix(random_matrix((5, 4), 0.5, "float64", seed=1))
    assert m.toarray(order="f").flags.f_contiguous
    with pytest.raises(ValueError, match="give order or out, not both"):
        m.toarray(order="C", out=np.zeros((5, 4)))
