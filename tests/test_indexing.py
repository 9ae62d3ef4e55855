"""A[key] (bmsparse._indexing) against scipy's csr_array indexing."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix, _indexing, convert
from tests.cases import DTYPES, host, named, ours, random_matrix

# cases of at least one row and column (every key below is valid for them)
CASES = ["tall", "wide", "square", "dense", "1x1", "zero-nnz", "full-block", "last-bit"]


def on(xp, key):
    """``key`` with its NumPy arrays on ``xp``'s side (lists stay lists)."""
    if isinstance(key, tuple):
        return tuple(on(xp, k) for k in key)
    return xp.asarray(key) if isinstance(key, np.ndarray) else key


def assert_same(got, want, xp, dtype) -> None:
    """``got`` (ours) is scipy's result ``want``: a scalar of the dtype (a 0-d
    CuPy array on the GPU), a dense 1-D array where scipy has a 1-D sparse
    array or an ndarray, else a canonical BitmapMatrix on the same side with
    the same stored entries, stored zeros included."""
    dtype = np.dtype(dtype)
    if np.ndim(want) == 0 and not sp.issparse(want):
        if xp is np:
            assert isinstance(got, np.generic)
        else:
            assert isinstance(got, xp.ndarray) and got.ndim == 0
        assert got.dtype == dtype
        assert host(got)[()] == want
        return
    if sp.issparse(want) and want.ndim == 2:
        assert isinstance(got, BitmapMatrix)
        assert got.on_device == (xp is not np)
        assert got.shape == want.shape and got.dtype == dtype
        got.check_format(full_check=True)
        mine = got.get().to_scipy()
        want = sp.csr_array(want)
        want.sum_duplicates()
        want.sort_indices()
        np.testing.assert_array_equal(mine.indptr, want.indptr)
        np.testing.assert_array_equal(mine.indices, want.indices)
        np.testing.assert_array_equal(mine.data, want.data)
        assert mine.data.dtype == dtype
        return
    want = want.toarray() if sp.issparse(want) else np.asarray(want)
    assert want.ndim == 1
    assert isinstance(got, xp.ndarray) and got.ndim == 1
    assert got.dtype == dtype
    np.testing.assert_array_equal(host(got), want)


def check(a: sp.csr_array, key, xp) -> None:
    assert_same(ours(a, xp)[on(xp, key)], a[key], xp, a.dtype)


# keys as functions of the shape (m, n), valid for m, n >= 1
KEYS = {
    "int": lambda m, n: m // 2,
    "negative int": lambda m, n: -1,
    "tuple of one": lambda m, n: (m - 1,),
    "numpy int": lambda m, n: np.int32(m // 3),
    "0-d array": lambda m, n: np.array(m // 2),
    "element": lambda m, n: (m // 2, n // 3),
    "element, negative": lambda m, n: (-1, -n),
    "element, last": lambda m, n: (m - 1, n - 1),
    "all": lambda m, n: slice(None),
    "rows from 1": lambda m, n: slice(1, None),
    "rows, middle": lambda m, n: slice(m // 3, 2 * m // 3 + 1),
    "rows 8:16": lambda m, n: slice(8, 16),
    "rows 0:8": lambda m, n: slice(0, 8),
    "rows 3:-2": lambda m, n: slice(3, -2),
    "rows 7:9": lambda m, n: slice(7, 9),
    "rows 5:21": lambda m, n: slice(5, 21),
    "rows, empty": lambda m, n: slice(5, 2),
    "rows step 2": lambda m, n: slice(None, None, 2),
    "rows reversed": lambda m, n: slice(None, None, -1),
    "rows step -3": lambda m, n: slice(m - 1, 0, -3),
    "rows step 9": lambda m, n: slice(1, None, 9),
    "row, all": lambda m, n: (m // 2, slice(None)),
    "row, some": lambda m, n: (m // 2, slice(1, n - 1)),
    "row, reversed": lambda m, n: (-1, slice(None, None, -1)),
    "row, 0:10": lambda m, n: (m // 2, slice(0, 10)),
    "row, 9:20": lambda m, n: (max(-m, -2), slice(9, 20)),
    "row, 15:5:-1": lambda m, n: (m // 3, slice(15, 5, -1)),
    "row, step 11": lambda m, n: (0, slice(None, None, 11)),
    "row, step -3": lambda m, n: (m - 1, slice(None, 2, -3)),
    "column": lambda m, n: (slice(None), n // 2),
    "column, step 2": lambda m, n: (slice(1, None, 2), -1),
    "column, step -9": lambda m, n: (slice(None, None, -9), 0),
    "column, rows 6:13": lambda m, n: (slice(6, 13), n - 1),
    "Ellipsis": lambda m, n: Ellipsis,
    "Ellipsis, column": lambda m, n: (Ellipsis, n // 2),
    "row, Ellipsis": lambda m, n: (m // 2, Ellipsis),
    "row list": lambda m, n: [m - 1, 0, 0, m // 2],
    "row array": lambda m, n: np.array([m // 2, -1, 0, m - 1]),
    "row array, empty": lambda m, n: np.array([], dtype=np.int64),
    "empty list": lambda m, n: [],
    "row mask": lambda m, n: np.arange(m) % 3 == 0,
    "row mask list": lambda m, n: [bool(i % 2) for i in range(m)],
    "column list": lambda m, n: (slice(None), [n - 1, 0, 0, n // 2]),
    "column array uint8": lambda m, n: (slice(None), np.array([0, n - 1, n // 2], np.uint8)),
    "column mask": lambda m, n: (slice(None), np.arange(n) % 4 != 1),
    "columns 8:": lambda m, n: (slice(None), slice(8, None)),
    "columns 0:16": lambda m, n: (slice(None), slice(0, 16)),
    "columns 3:": lambda m, n: (slice(None), slice(3, None)),
    "columns 8:13": lambda m, n: (slice(None), slice(8, 13)),
    "columns reversed": lambda m, n: (slice(None), slice(None, None, -1)),
    "columns step 3": lambda m, n: (slice(None), slice(1, None, 3)),
    "rows and columns": lambda m, n: (slice(3, m - 1), slice(2, n - 3)),
    "rows and columns 8:16": lambda m, n: (slice(8, 16), slice(8, None)),
    "rows and columns, steps": lambda m, n: (slice(None, None, 3), slice(None, None, -2)),
    "rows, column list": lambda m, n: (slice(1, m), [n - 1, 0, n - 1]),
    "row list, columns": lambda m, n: ([m - 1, 0, m - 1], slice(2, None)),
    "paired masks": lambda m, n: (np.arange(m) < min(m, n, 3), np.arange(n) < min(m, n, 3)),
    "row, column list": lambda m, n: (m // 2, [0, n - 1, 0]),
    "row, column mask": lambda m, n: (-1, np.arange(n) % 3 == 0),
    "row list, column": lambda m, n: ([m - 1, 0, m - 1], n // 2),
    "row, empty list": lambda m, n: (0, []),
    "paired": lambda m, n: ([m - 1, 0, m // 2, 0], [0, n - 1, n // 3, 0]),
    "paired, broadcast": lambda m, n: ([m - 1], [0, n - 1, n // 3]),
    "paired, empty": lambda m, n: ([], []),
    "mask of the matrix": lambda m, n: np.arange(m * n).reshape(m, n) % 3 == 1,
    "outer (ix_)": lambda m, n: np.ix_([m - 1, 0, m // 2, 0], [0, n - 1, n // 3, 0]),
    "outer, row of columns": lambda m, n: (np.array([[m - 1], [0]]), np.array([[n - 1, 0, 0]])),
    "inner 2-D": lambda m, n: (np.array([[0, m - 1], [m // 2, 0]]),
                               np.array([[n - 1, 0], [0, n // 2]])),
    "inner 2-D, broadcast": lambda m, n: ([0, m - 1], [[0], [n - 1]]),
    "row, 2-D columns": lambda m, n: (m // 2, [[0, n - 1], [n // 2, 0]]),
    "2-D rows, column": lambda m, n: ([[0, m - 1], [m // 2, 0]], -1),
    "python bool": lambda m, n: (True, 0) if m > 1 else (0, False),
}


@pytest.mark.parametrize("name", KEYS)
@pytest.mark.parametrize("case", CASES)
def test_key(case, name, xp):
    a = named(case, "float64")
    check(a, KEYS[name](*a.shape), xp)


DTYPE_KEYS = ["element", "element, last", "row, some", "column", "rows 3:-2", "rows 8:16",
              "rows step -3", "columns 3:", "rows and columns", "row list", "paired",
              "inner 2-D", "row, 2-D columns", "outer (ix_)"]


@pytest.mark.parametrize("name", DTYPE_KEYS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["dense", "full-block"])
def test_dtypes(case, dtype, name, xp):
    a = named(case, dtype)
    check(a, KEYS[name](*a.shape), xp)


def test_stored_zeros_are_kept(xp):
    a = named("dense", "float64")
    assert (a.data == 0).any()
    for key in [slice(3, 11), (slice(None), slice(5, 19)), [4, 1, 4], (slice(None), [7, 2]),
                np.ix_([4, 0], [3, 2, 1]), (2, [[0, 1], [2, 3]])]:
        got = ours(a, xp)[on(xp, key)]
        assert got.nnz == sp.csr_array(a[key]).nnz
        check(a, key, xp)


def test_bool_elements_are_numpy_bools():
    a = named("dense", "bool")
    m = BitmapMatrix(a)
    rows, cols = a.nonzero()
    assert m[int(rows[0]), int(cols[0])] is np.True_
    empty = np.argwhere(~a.toarray())[0]
    assert m[int(empty[0]), int(empty[1])] is np.False_


@pytest.mark.parametrize("case", ["empty", "0xn", "nx0"])
def test_empty_shapes(case, xp):
    a = named(case, "float64")
    m, n = a.shape
    keys = [slice(None), slice(2, 5), [], (slice(None), []), (slice(None), slice(None, None, -1)),
            Ellipsis, ([], slice(None))]
    if n:
        keys += [(slice(None), 0), (slice(None), [0, 0]), (slice(None), slice(0, 8))]
    if m:
        keys += [(0, slice(None)), (0, []), [m - 1, 0], slice(0, 8)]
    for key in keys:
        check(a, key, xp)


@pytest.mark.parametrize("step", [2, -1, -3, 10])
@pytest.mark.parametrize("rows", [[5, 0, 5, 30], np.arange(37) % 4 == 0])
def test_array_with_a_strided_slice(rows, step, xp):
    # scipy 1.17 raises ValueError here ("cannot reshape"); ours is the
    # submatrix, scipy's two-step result
    a = named("tall", "float64")
    assert_same(ours(a, xp)[on(xp, (rows, slice(1, None, step)))],
                a[rows][:, slice(1, None, step)], xp, a.dtype)
    assert_same(ours(a, xp)[on(xp, (slice(None, None, step), rows[:21] if isinstance(
        rows, np.ndarray) else [1, 20, 1]))],
        a[::step][:, rows[:21] if isinstance(rows, np.ndarray) else [1, 20, 1]], xp, a.dtype)


def test_lazy_transpose(xp):
    a = named("wide", "float64")
    m = ours(a, xp).T
    for key in [3, (4, 5), slice(10, 30), (slice(None), [1, 8, 1]), (slice(None), 7)]:
        assert_same(m[on(xp, key)], a.T[key], xp, a.dtype)


def test_sparse_masks(xp):
    a = named("dense", "int64")
    mask = sp.csr_array(a.toarray() % 3 == 0)
    want = a[mask]
    assert_same(ours(a, xp)[ours(mask, xp)], want, xp, a.dtype)
    if xp is np:
        assert_same(BitmapMatrix(a)[mask], want, xp, a.dtype)


SPARSE_1D_KEYS = {
    "rows": lambda m, n: sp.coo_array(np.arange(m) % 3 == 0),
    "rows, none": lambda m, n: sp.coo_array(np.zeros(m, bool)),
    "columns": lambda m, n: (slice(1, None), sp.coo_array(np.arange(n) % 4 != 1)),
    "row, columns": lambda m, n: (2, sp.coo_array(np.arange(n) % 4 != 1)),
    "paired": lambda m, n: (sp.coo_array(np.arange(m) < 2), sp.coo_array(np.arange(n) < 2)),
}


@pytest.mark.parametrize("name", SPARSE_1D_KEYS)
def test_1d_sparse_masks(name):
    # scipy takes a 1-D sparse bool array as the mask of one axis, as a dense one
    a = named("dense", "int64")
    key = SPARSE_1D_KEYS[name](*a.shape)
    assert_same(BitmapMatrix(a)[key], a[key], np, a.dtype)


def test_results_are_copies():
    a = named("square", "float64")
    m = BitmapMatrix(a)
    for key in [slice(None), slice(0, 16), (slice(None), slice(0, 8))]:
        got = m[key]
        assert got is not m
        for name in ("keys", "bitmaps", "offsets", "values"):
            assert not np.shares_memory(getattr(got, name), getattr(m, name))


def test_iteration_gives_dense_rows():
    a = named("tall", "int32")
    rows = list(BitmapMatrix(a))
    assert len(rows) == a.shape[0]
    np.testing.assert_array_equal(np.stack(rows), a.toarray())


def test_gpu_element_is_a_0d_array(xp):
    a = named("square", "complex128")
    got = ours(a, xp)[5, 6]
    if xp is not np:
        assert isinstance(got, xp.ndarray) and got.shape == ()
    assert host(got)[()] == a[5, 6]


# --- the efficient paths ---------------------------------------------------------


# shape (10, 50): 7 x 2 blocks, 4 entries in 3 blocks
#
#  block col   0    1    2    3    4    5    6
#  row 0-7     x    .    .    .    .    x    .      (3, 2) = 1, (3, 44) = 2, (5, 12) = 3
#                   x                                (in block col 1)
#  row 8-9     .    .    .    .    .    .    x      (9, 49) = 4
SPARSE_ROWS = sp.csr_array(([1.0, 2.0, 3.0, 4.0], ([3, 3, 5, 9], [2, 44, 12, 49])),
                           shape=(10, 50))


@pytest.mark.parametrize("key", [(3, slice(0, 10)), (3, slice(0, 20)), (3, slice(8, 16)),
                                 (5, slice(0, 9)), (3, slice(17, 1, -1)), (9, slice(40, None)),
                                 (slice(None), 44), (slice(2, 10), 49)])
def test_lines_skip_other_blocks(key, xp):
    # a row's window of blocks reaches past the slice's last block column
    # where a block column in it is empty
    check(SPARSE_ROWS, key, xp)


def test_columns_expand_only_their_block_columns(monkeypatch):
    expanded = []
    real = convert.bitmap_to_coo

    def spy(keys, bitmaps, offsets, nnz):
        expanded.append(nnz)
        return real(keys, bitmaps, offsets, nnz)

    m = BitmapMatrix(SPARSE_ROWS)
    monkeypatch.setattr(convert, "bitmap_to_coo", spy)
    got = m[:, [44, 2, 44]]
    monkeypatch.undo()
    assert expanded == [2]  # block columns 0 and 5, not 1 or 6
    assert_same(got, SPARSE_ROWS[:, [44, 2, 44]], np, "float64")


def refuse_conversions(monkeypatch) -> list[int]:
    """Fail on any conversion of a whole matrix; record the sizes of the
    value gathers of the indexing module."""
    def refuse(*args, **kwargs):
        raise AssertionError("the whole matrix was converted")

    monkeypatch.setattr(convert, "bitmap_to_coo", refuse)
    monkeypatch.setattr(convert, "bitmap_to_csr", refuse)
    monkeypatch.setattr(BitmapMatrix, "from_coo", classmethod(refuse))
    sizes = []
    ranges, move_runs = _indexing.ranges, _indexing.move_runs

    def spy_ranges(xp, starts, counts, total=None):
        owner, index = ranges(xp, starts, counts, total)
        sizes.append(index.shape[0])
        return owner, index

    def spy_runs(xp, values, starts, counts, total=None):
        out = move_runs(xp, values, starts, counts, total)
        sizes.append(out.shape[0])
        return out

    monkeypatch.setattr(_indexing, "ranges", spy_ranges)
    monkeypatch.setattr(_indexing, "move_runs", spy_runs)
    return sizes


@pytest.fixture(scope="module")
def large() -> sp.csr_array:
    return random_matrix((40_000, 301), 0.005, "float64", seed=3)


@pytest.mark.parametrize("rows", [(1000, 1064), (1003, 1057), (1001, 1002), (39_990, 40_000),
                                  (39_983, 39_999)])
def test_row_slice_reads_only_its_rows(large, rows, monkeypatch, xp):
    m = ours(large, xp)
    sizes = refuse_conversions(monkeypatch)
    got = m[slice(*rows)]
    monkeypatch.undo()
    assert_same(got, large[slice(*rows)], xp, large.dtype)
    # values were only gathered for the result's own entries
    assert sum(sizes) <= got.nnz


@pytest.mark.parametrize("key", [4321, (4321, slice(7, 290)), (-1, slice(None, None, -1)),
                                 (slice(100, 900), 77), (4321, 300), (slice(None), -1)])
def test_lines_and_elements_read_no_conversion(large, key, monkeypatch, xp):
    m = ours(large, xp)
    sizes = refuse_conversions(monkeypatch)
    got = m[key]
    monkeypatch.undo()
    assert_same(got, large[key], xp, large.dtype)
    assert sizes == []


# --- random keys -------------------------------------------------------------------


def random_part(rng, size):
    kind = rng.integers(6)
    if kind == 0 and size:
        return int(rng.integers(-size, size))
    if kind == 1:
        pick = [None, *range(-size - 3, size + 3)]
        step = int(rng.choice([1, 1, 2, 3, 7, 8, 9, 20, -1, -2, -5, -9]))
        return slice(rng.choice(pick), rng.choice(pick), rng.choice([None, step]))
    if kind == 2 and size:
        return rng.integers(-size, size, int(rng.integers(0, 12)))
    if kind == 3:
        return rng.random(size) < 0.4
    if kind == 4 and size:
        return [int(i) for i in rng.integers(0, size, int(rng.integers(1, 6)))]
    return slice(None)


def random_key(rng, shape):
    row = random_part(rng, shape[0])
    if rng.random() < 0.2:
        return row
    return row, random_part(rng, shape[1])


def is_array(part) -> bool:
    return isinstance(part, (list, np.ndarray))


def reference(a, key):
    """scipy's ``a[key]``; for an array with a slice of step other than 1
    (where scipy 1.17 raises ValueError) its two-step submatrix."""
    if isinstance(key, tuple) and is_array(key[0]) and isinstance(key[1], slice) \
            and key[1].step not in (None, 1):
        return a[key[0]][:, key[1]]
    return a[key]


@pytest.mark.parametrize("seed", range(40))
def test_random_keys(seed, xp):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(0, 40, 2))
    dtype = DTYPES[seed % len(DTYPES)]
    a = random_matrix(shape, float(rng.uniform(0, 0.5)), dtype, seed)
    m = ours(a, xp)
    for _ in range(25):
        key = random_key(rng, shape)
        try:
            want = reference(a, key)
        except IndexError:
            with pytest.raises(IndexError):
                m[on(xp, key)]
            continue
        assert_same(m[on(xp, key)], want, xp, dtype)


# --- errors ----------------------------------------------------------------------


@pytest.mark.parametrize(("key", "match"), [
    (9, r"index 9 is out of bounds for axis 0 with size 9"),
    (-10, r"index -10 is out of bounds for axis 0 with size 9"),
    ((0, 70), r"index 70 is out of bounds for axis 1 with size 70"),
    ((0, -71), r"index -71 is out of bounds for axis 1 with size 70"),
    (2**70, r"index 1180591620717411303424 is out of bounds for axis 0"),
    ([0, 9], r"index 9 is out of bounds for axis 0 with size 9"),
    (np.array([-10, 1]), r"index -10 is out of bounds for axis 0 with size 9"),
    ((slice(None), np.array([3, 2**63], dtype=np.uint64)),
     r"index 9223372036854775808 is out of bounds for axis 1 with size 70"),
    ((slice(None), [[0], [70]]), r"index 70 is out of bounds for axis 1 with size 70"),
    ((1, 2, 3), r"too many indices for a 2-D matrix: 3 were indexed"),
    ((Ellipsis, 1, Ellipsis), r"an index can only have a single ellipsis"),
    (None, r"None \(numpy.newaxis\) in an index is not supported"),
    ((None, 1), r"None \(numpy.newaxis\) in an index is not supported"),
    (1.0, r"only integers, slices .* are valid indices, got float"),
    ("1", r"only integers, slices .* are valid indices, got str"),
    (np.True_, r"only integers, slices .* are valid indices, got (numpy\.)?bool"),
    (np.array(1.0), r"got a 0-d array of dtype float64"),
    ([1.5], r"arrays used as indices must be of integer \(or boolean\) type, got float64"),
    (np.array([1.0]), r"must be of integer \(or boolean\) type, got float64"),
    ([[0, 1], [1]], r"invalid index"),
    (np.zeros((1, 1, 1), int), r"index arrays must be 1-D or 2-D, got 3-D"),
    (np.ones(8, bool), r"boolean index of shape \(8,\) does not match the matrix along axis 0"),
    ((slice(None), np.ones(9, bool)), r"boolean index of shape \(9,\) does not match .* axis 1"),
    (np.ones((9, 69), bool), r"boolean index of shape \(9, 69\) does not match"),
    ((np.ones((9, 70), bool), 1), r"too many indices"),
    (([0, 1], [0, 1, 2]), r"shape mismatch: indexing arrays could not be broadcast together "
                          r"with shapes \(2,\) \(3,\)"),
    ((np.ones(9, bool), np.ones(70, bool)), r"shape mismatch"),
    ([[0, 1], [1, 2]], r"indexing with a 2-D array and a slice gives a 3-D result"),
    ((slice(None), [[0], [1]]), r"a 2-D array and a slice gives a 3-D result"),
])
def test_bad_keys(key, match, xp):
    m = ours(named("wide", "float64"), xp)
    with pytest.raises(IndexError, match=match):
        m[on(xp, key)]


def test_zero_step(xp):
    m = ours(named("wide", "float64"), xp)
    with pytest.raises(ValueError, match=r"slice step cannot be zero"):
        m[::0]


def test_sparse_keys_that_are_not_masks():
    m = BitmapMatrix(named("wide", "float64"))
    with pytest.raises(IndexError, match=r"only supported for a boolean mask .* got dtype "
                                         r"float64"):
        m[named("wide", "float64")]
    with pytest.raises(IndexError, match=r"boolean index of shape \(9, 69\) does not match the "
                                         r"matrix's shape \(9, 70\)"):
        m[sp.csr_array(np.ones((9, 69), bool))]
    with pytest.raises(IndexError, match=r"boolean index of shape \(8,\) does not match the "
                                         r"matrix along axis 0"):
        m[sp.coo_array(np.ones(8, bool))]


@pytest.mark.gpu
def test_index_arrays_on_the_other_side():
    import cupy

    a = named("wide", "float64")
    with pytest.raises(TypeError, match=r"on the host \(NumPy\) or all on the device"):
        BitmapMatrix(a)[cupy.asarray([1, 2])]
    with pytest.raises(TypeError, match=r"on the host \(NumPy\) or all on the device"):
        BitmapMatrix(a).to_device()[:, np.array([1, 2])]
    with pytest.raises(TypeError, match=r"on the host \(NumPy\) or all on the device"):
        BitmapMatrix(a).to_device()[sp.csr_array(a.toarray() > 0)]
    with pytest.raises(TypeError, match=r"on the host \(NumPy\) or all on the device"):
        BitmapMatrix(a).to_device()[sp.coo_array(np.ones(a.shape[0], bool))]


def test_setitem_raises():
    m = BitmapMatrix(named("wide", "float64"))
    with pytest.raises(TypeError, match=r"BitmapMatrix does not support item assignment: .*"
                                        r"to_scipy\(\)"):
        m[0, 0] = 1.0


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # numpy.matrix
@pytest.mark.parametrize("key", [
    (1, [[3, 4]]),
    ([[1], [2]], [3, 4]),
    ([[1], [2]], 3),
    ([[0, 2]], [[1, 3]]),
])
def test_numpy_matrix_keys(key):
    # a numpy.matrix stays 2-D under reshape: taken as its plain array, as scipy takes it
    key = tuple(np.matrix(k) if isinstance(k, list) and isinstance(k[0], list) else k
                for k in key)
    a = sp.csr_array(np.arange(30.0).reshape(5, 6))
    assert_same(ours(a, np)[key], a[key], np, a.dtype)  # (check's `on` would make arrays)


@pytest.mark.parametrize("key", [
    (slice(None, None, -3), slice(None)),
    (slice(None, None, 2), slice(0, 20)),
    (slice(60, 2, -7), slice(None, None, -9)),
    (slice(None), slice(None, None, 11)),
    (slice(3, None, 5), slice(50, 0, -13)),
])
def test_strided_ranges_of_few_blocks(key, xp):
    # more rows selected than the blocks could hold (rows mapped entry by
    # entry), and column steps past a block (block columns by arithmetic)
    rng = np.random.default_rng(5)
    rows, cols = rng.integers(0, 70, 6), rng.integers(0, 90, 6)
    a = sp.csr_array(sp.coo_array((rng.standard_normal(6), (rows, cols)), shape=(70, 90)))
    a.data[0] = 0.0  # a stored zero is kept
    check(a, key, xp)


@pytest.mark.parametrize("key,rows,cols", [
    ((slice(None, None, -1), slice(None)), "reversed", "all"),
    ((slice(None, None, 2), slice(0, 8)), "even", "first"),
    ((slice(0, 8), slice(None, None, 9)), "first", "ninth"),
    ((slice(None), slice(None, None, 9)), "all", "ninth"),
])
def test_strided_ranges_of_a_hypersparse_matrix(key, rows, cols, xp):
    # O(entries) and O(blocks), not O(rows) or O(columns): 2^33 of each
    n = 1 << 33
    r = np.array([0, 18, n - 1])
    c = np.array([0, 9, n - 2])
    a = BitmapMatrix.from_coo(xp.asarray(r), xp.asarray(c), xp.asarray([1.0, 2.0, 3.0]),
                              (n, n))
    row_map = {"all": lambda i: i, "reversed": lambda i: n - 1 - i,
               "even": lambda i: i // 2 if i % 2 == 0 else None,
               "first": lambda i: i if i < 8 else None}[rows]
    col_map = {"all": lambda j: j, "first": lambda j: j if j < 8 else None,
               "ninth": lambda j: j // 9 if j % 9 == 0 else None}[cols]
    want = {(row_map(i), col_map(j)): v for i, j, v in zip(r, c, [1.0, 2.0, 3.0])
            if row_map(i) is not None and col_map(j) is not None}
    got = a[key]
    got_rows, got_cols = (host(x) for x in got._coo_indices())
    assert dict(zip(zip(got_rows.tolist(), got_cols.tolist()),
                    host(got.values).tolist())) == want
    assert got.shape == (len(range(n)[key[0]]), len(range(n)[key[1]]))


@pytest.mark.parametrize("key", [range(3), (range(3), 1), (range(4, 0, -2), range(1, 5, 3)),
                                 (1, range(-1, -4, -1)), (slice(None), range(5, 0, -2))])
def test_range_keys_act_as_index_arrays(key, xp):
    # as scipy and NumPy take a range: its indices, negative ones from the end
    a = sp.csr_array(np.arange(30.0).reshape(5, 6))
    assert_same(ours(a, xp)[key], a[key], xp, a.dtype)
