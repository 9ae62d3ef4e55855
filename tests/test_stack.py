"""bmat, vstack, hstack, block_diag and kron against scipy.sparse's."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import bmsparse
from tests.cases import DTYPES, ours, random_matrix
from tests.helpers import assert_same_csr


def on_side(m, xp):
    assert m.on_device == (xp is not np)
    m.check_format(full_check=True)
    return m.get().to_scipy()


def grid_of(shapes, dtype, seed=0):
    """scipy CSR matrices of ``shapes`` (None stays None), some stored zeros."""
    return [[None if s is None else random_matrix(s, 0.3, dtype, seed + 10 * i + j)
             for j, s in enumerate(row)] for i, row in enumerate(shapes)]


def ours_grid(grid, xp):
    return [[None if m is None else ours(m, xp) for m in row] for row in grid]


GRIDS = {
    # every offset a multiple of 8: joined block by block
    "aligned": [[(8, 16), (8, 5)], [(24, 16), (24, 5)]],
    "aligned-none": [[(16, 8), None, (16, 3)], [None, (8, 40), (8, 3)]],
    # column offsets off the blocks: through COO
    "unaligned": [[(5, 7), (5, 9)], [(11, 7), (11, 9)]],
    "unaligned-none": [[(3, 3), None], [None, (10, 17)]],
    "column": [[(9, 4)], [(8, 4)], [(0, 4)], [(17, 4)]],
    # rows off the blocks, columns on them: blocks cut by rows
    "rows-off": [[(5, 8), (5, 3)], [(11, 8), (11, 3)], [(2, 8), None]],
    "one-row-parts": [[(1, 20)]] * 11 + [[(3, 20)]],
    "one-part-moved": [[(3, 24), None], [(21, 24), (21, 9)]],
    "empty-parts": [[(0, 0), (0, 5)], [(6, 0), (6, 5)]],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(GRIDS))
def test_bmat_against_scipy(xp, name, dtype):
    grid = grid_of(GRIDS[name], dtype)
    got = bmsparse.bmat(ours_grid(grid, xp))
    assert_same_csr(on_side(got, xp), sp.bmat(grid, format="csr"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [[8, 16, 3], [5, 8, 11], [0, 7]])
def test_vstack_against_scipy(xp, rows, dtype):
    parts = [random_matrix((r, 13), 0.3, dtype, seed) for seed, r in enumerate(rows)]
    got = bmsparse.vstack([ours(p, xp) for p in parts])
    assert_same_csr(on_side(got, xp), sp.vstack(parts, format="csr"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [[8, 16, 3], [5, 8, 11], [0, 7]])
def test_hstack_against_scipy(xp, cols, dtype):
    parts = [random_matrix((10, c), 0.3, dtype, seed) for seed, c in enumerate(cols)]
    got = bmsparse.hstack([ours(p, xp) for p in parts])
    assert_same_csr(on_side(got, xp), sp.hstack(parts, format="csr"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [[(8, 8), (16, 24)], [(3, 5), (7, 2), (0, 4), (9, 9)]])
def test_block_diag_against_scipy(xp, shapes, dtype):
    parts = [random_matrix(s, 0.4, dtype, seed) for seed, s in enumerate(shapes)]
    got = bmsparse.block_diag([ours(p, xp) for p in parts])
    assert_same_csr(on_side(got, xp), sp.block_diag(parts, format="csr"))


@pytest.mark.parametrize("dtypes", [("float64", "int32"), ("bool", "float32"),
                                    ("int64", "complex64"), ("bool", "bool")])
def test_stacks_promote_as_numpy(xp, dtypes):
    a, b = (random_matrix((8, 6), 0.4, d, seed) for seed, d in enumerate(dtypes))
    got = bmsparse.vstack([ours(a, xp), ours(b, xp)])
    assert got.dtype == np.result_type(*dtypes)
    assert_same_csr(on_side(got, xp), sp.vstack([a, b], format="csr"))
    got = bmsparse.hstack([ours(a, xp), ours(b, xp)], dtype=np.complex128)
    assert_same_csr(on_side(got, xp), sp.hstack([a, b], format="csr", dtype=np.complex128))


def test_stacks_take_what_the_constructor_takes():
    a = random_matrix((8, 6), 0.4, "float64", 0)
    dense = np.arange(12.0).reshape(2, 6)
    got = bmsparse.vstack([a, dense, bmsparse.BitmapMatrix(a)])
    assert_same_csr(got.to_scipy(), sp.vstack([a, sp.csr_array(dense), a], format="csr"))


@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("int32", "float32"),
                                    ("bool", "bool"), ("complex128", "int64")])
@pytest.mark.parametrize("shapes", [((3, 4), (5, 2)), ((8, 8), (8, 8)), ((0, 3), (2, 2)),
                                    ((4, 9), (1, 1))])
def test_kron_against_scipy(xp, shapes, dtypes):
    a = random_matrix(shapes[0], 0.4, dtypes[0], 1)
    b = random_matrix(shapes[1], 0.5, dtypes[1], 2)
    got = bmsparse.kron(ours(a, xp), ours(b, xp))
    # (scipy's COO route, as format="csr" takes it: stored zeros kept; an
    # empty operand gives scipy float64, ours NumPy's promotion as always)
    want = sp.kron(a, b, format="csr").astype(np.result_type(*dtypes))
    assert_same_csr(on_side(got, xp), want)


def test_kron_of_stencils_is_the_2d_laplacian():
    n = 10
    t = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(n, n), format="csr")
    eye = sp.eye_array(n, format="csr")
    want = sp.csr_array(sp.kron(t, eye) + sp.kron(eye, t))
    got = bmsparse.kron(t, eye) + bmsparse.kron(eye, t)
    assert_same_csr(got.to_scipy(), want)


def test_shapes_that_do_not_line_up_are_refused_as_scipy_words_it():
    a, b = random_matrix((4, 3), 0.5, "float64", 0), random_matrix((5, 3), 0.5, "float64", 1)
    for ours_call, scipy_call in ((bmsparse.hstack, sp.hstack), (bmsparse.vstack, sp.vstack)):
        pair = [a, b] if ours_call is bmsparse.hstack else [a, b.T]
        with pytest.raises(ValueError) as want:
            scipy_call([p.tocoo() for p in pair])  # (its CSR shortcut words it otherwise)
        with pytest.raises(ValueError) as got:
            ours_call(pair)
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize("blocks", [[], [None, None], np.eye(2), [[None], [1.0]]])
def test_bad_grids_are_refused(blocks):
    with pytest.raises((ValueError, TypeError)):
        bmsparse.bmat(blocks)


def test_ragged_grid_and_empty_lists_are_refused():
    a = random_matrix((4, 4), 0.5, "float64", 0)
    with pytest.raises(ValueError, match="rows differ in length"):
        bmsparse.bmat([[a, a], [a]])
    for call in (bmsparse.vstack, bmsparse.hstack, bmsparse.block_diag):
        with pytest.raises(ValueError, match="at least one matrix"):
            call([])


def test_host_and_device_parts_are_refused():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    a = random_matrix((8, 8), 0.5, "float64", 0)
    with pytest.raises(TypeError, match="all on the host"):
        bmsparse.vstack([bmsparse.BitmapMatrix(a), bmsparse.BitmapMatrix(a).to_device()])


def test_all_none_grid_rows_are_empty_as_in_scipy():
    a = random_matrix((8, 5), 0.5, "float64", 0)
    grid = [[a, None], [None, None]]
    assert_same_csr(bmsparse.bmat(grid).to_scipy(), sp.bmat(grid, format="csr"))


@pytest.mark.parametrize("dtype", ["float64", "complex128", "int32", "bool"])
@pytest.mark.parametrize("seed", range(4))
def test_parts_at_any_row_join_by_their_blocks(xp, seed, dtype, monkeypatch):
    # parts of 0-20 rows, some of full blocks, in grid columns 24 and 5 wide:
    # their blocks are cut by rows and merged, never their entries sorted
    rng = np.random.default_rng(seed)
    parts = [random_matrix((int(rng.integers(0, 21)), 24), float(rng.choice([0.1, 0.5, 1.0])),
                           dtype, 100 * seed + i) for i in range(int(rng.integers(2, 9)))]
    grid = [[p, random_matrix((p.shape[0], 5), 0.4, dtype, 7 + i) if i % 3 else None]
            for i, p in enumerate(parts)]
    monkeypatch.setattr(bmsparse.construct, "_join_entries", None)  # fails if called
    for got, want in ((bmsparse.vstack([ours(p, xp) for p in parts]),
                       sp.vstack(parts, format="csr")),
                      (bmsparse.bmat([[None if m is None else ours(m, xp) for m in row]
                                      for row in grid]),
                       sp.bmat(grid, format="csr"))):
        assert_same_csr(on_side(got, xp), want)


def test_a_cut_block_in_the_last_block_row_names_no_other(xp):
    # the lower half of a block in block row 2**32 - 1 has no rows, and its
    # key wraps to block row 0, where the first part has a block
    n = bmsparse._format.MAX_DIM
    top = sp.coo_array((np.array([1.0, 2.0]), (np.array([0, 2]), np.array([5, 5]))),
                       shape=(3, 16))
    below = sp.coo_array((np.array([3.0, 4.0, 5.0]), (np.array([0, n - 8, n - 4]),
                                                      np.array([5, 5, 6]))), shape=(n - 3, 16))
    mats = [bmsparse.BitmapMatrix.from_coo(p.row, p.col, p.data, p.shape) for p in (top, below)]
    if xp is not np:
        mats = [m.to_device() for m in mats]
    got = bmsparse.vstack(mats)
    got.check_format(full_check=True)
    c = got.get().tocoo()
    order = np.lexsort((c.col, c.row))
    np.testing.assert_array_equal(c.row[order], [0, 2, 3, n - 5, n - 1])
    np.testing.assert_array_equal(c.col[order], [5, 5, 5, 5, 6])
    np.testing.assert_array_equal(c.data[order], [1.0, 2.0, 3.0, 4.0, 5.0])


def test_empty_parts_at_the_last_row_a_key_can_name(xp):
    # an empty part at row 2**35 (or column) has no block whose key could
    # name it: it adds nothing
    n = bmsparse._format.MAX_DIM

    def coo(rows, cols, shape):
        m = bmsparse.BitmapMatrix.from_coo(np.array(rows, dtype=np.int64),
                                           np.array(cols, dtype=np.int64),
                                           np.ones(len(rows)), shape)
        return m if xp is np else m.to_device()

    a = coo([n - 1], [3], (n, 8))
    for got in (bmsparse.vstack([a, coo([], [], (0, 8))]),
                bmsparse.vstack([coo([], [], (8, 8)), coo([n - 9], [3], (n - 8, 8)),
                                 coo([], [], (0, 8))]),
                bmsparse.block_diag([a, coo([], [], (0, 3))])):
        got.check_format(full_check=True)
        c = got.get().tocoo()
        assert got.shape[0] == n and got.nnz == 1
        assert (c.row.tolist(), c.col.tolist(), c.data.tolist()) == ([n - 1], [3], [1.0])
    b = coo([n - 6], [3], (n - 5, n))
    got = bmsparse.block_diag([b, coo([], [], (0, 0))])
    assert got.shape == (n - 5, n) and got.get().tocoo().row.tolist() == [n - 6]


def test_a_matrix_below_empty_rows(xp):
    empty, a = sp.csr_array((5, 16)), random_matrix((29, 16), 0.3, "float64", 7)
    got = bmsparse.vstack([ours(empty, xp), ours(a, xp)])
    assert_same_csr(on_side(got, xp), sp.vstack([empty, a], format="csr"))


def test_hypersparse_parts_stack_by_their_blocks(xp):
    n = (1 << 33) + 5
    rows, cols = np.array([0, 3, n - 1]), np.array([n - 1, 7, 2])
    parts = [sp.coo_array((np.array([1.0, -2.0, 3.0]), (rows, cols)), shape=(n, n)),
             sp.coo_array((np.array([4.0, 5.0]), (rows[:2], cols[:2])), shape=(n, n))]
    mats = [bmsparse.BitmapMatrix.from_coo(p.row, p.col, p.data, p.shape) for p in parts]
    if xp is not np:
        mats = [m.to_device() for m in mats]
    got = bmsparse.vstack(mats)
    got.check_format(full_check=True)
    want = sp.vstack(parts, format="coo")
    c = got.get().tocoo()
    mine, theirs = np.lexsort((c.col, c.row)), np.lexsort((want.col, want.row))
    np.testing.assert_array_equal(c.row[mine], want.row[theirs])
    np.testing.assert_array_equal(c.col[mine], want.col[theirs])
    np.testing.assert_array_equal(c.data[mine], want.data[theirs])


@pytest.mark.parametrize("rows", [8, 3])  # block by block, then through COO
def test_stacks_to_bool_drop_zeros_as_astype(rows):
    # a stored zero casts to False: a pattern holds no entry there
    a = sp.csr_array((np.array([0.0, 2.0]), (np.array([0, 1]), np.array([0, 1]))),
                     shape=(rows, 8))
    want = bmsparse.BitmapMatrix(a).astype(bool).toarray()
    for got in (bmsparse.vstack([a, a], dtype=bool), bmsparse.bmat([[a, None], [None, a]],
                                                                  dtype=bool),
                bmsparse.block_diag([a, a], dtype=bool)):
        assert got.dtype == np.bool_ and got.nnz == 2
        np.testing.assert_array_equal(got.toarray()[:rows, :8], want)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bmp", None])
def test_constructors_take_scipys_format(xp, fmt):
    # code written for scipy names an output format: converted as asformat does
    a = random_matrix((10, 8), 0.4, "float64", 1)
    b = random_matrix((6, 8), 0.4, "float64", 2)
    device = xp is not np
    calls = [
        (bmsparse.vstack([ours(a, xp), ours(b, xp)], fmt), sp.vstack([a, b], format="csr")),
        (bmsparse.hstack([ours(a, xp), ours(a, xp)], fmt), sp.hstack([a, a], format="csr")),
        (bmsparse.bmat([[ours(a, xp)], [ours(b, xp)]], fmt), sp.bmat([[a], [b]], format="csr")),
        (bmsparse.block_diag([ours(a, xp), ours(b, xp)], fmt),
         sp.block_diag([a, b], format="csr")),
        (bmsparse.kron(ours(b, xp), ours(a, xp), fmt), sp.kron(b, a, format="csr")),
        (bmsparse.eye(5, 7, k=1, format=fmt, device=device), sp.eye_array(5, 7, k=1, format="csr")),
        # (cupyx stores no int32: float32 for the GPU's conversions)
        (bmsparse.identity(6, "float32", fmt, device=device),
         sp.identity(6, "float32", format="csr")),
        (bmsparse.diags([1.0, 2.0], offsets=[0, 2], shape=(4, 4), format=fmt, device=device),
         sp.diags_array([1.0, 2.0], offsets=[0, 2], shape=(4, 4), format="csr")),
        (bmsparse.tril(ours(a, xp), -1, fmt), sp.tril(a, -1, format="csr")),
        (bmsparse.triu(ours(a, xp), 2, fmt), sp.triu(a, 2, format="csr")),
    ]
    for got, want in calls:
        if fmt in (None, "bmp"):
            assert isinstance(got, bmsparse.BitmapMatrix)
            got = got.get().to_scipy()
        else:
            assert got.format == fmt
            got = sp.csr_array(got.get() if device else got)
        assert_same_csr(sp.csr_array(got), want)
