"""COO/CSR <-> bitmap conversions: hand-drawn fixtures, brute force and scipy.

Every test that takes ``xp`` runs the NumPy twin and the CUDA kernels against
the same hand-made or brute-force expectation, so the two paths agree exactly.
Values are integer-valued, so sums of duplicates are exact in any order.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
import scipy.sparse as sp

import bmsparse._sputils as sputils
from bmsparse import BitmapMatrix, convert
from tests.helpers import assert_same_csr, scipy_product, spy_argsort

TOP = 1 << 63
ALL_ONES = (1 << 64) - 1
SUPPORTED = "bool, int32, int64, float32, float64, complex64, complex128"


def host(a):
    return a if a is None or isinstance(a, np.ndarray) else a.get()


class Fixture(NamedTuple):
    """A matrix as COO entries listed in value order, and its blocks by hand."""

    shape: tuple[int, int]
    entries: list[tuple[int, int, float]]
    keys: list[int]
    bitmaps: list[int]
    offsets: list[int]


# shape (10, 19): 2 x 3 blocks; the last block row has 6 padding rows, the last
# block column 5 padding columns ('-').
#
#              block col 0       block col 1       block col 2
#  col       0 1 2 3 4 5 6 7 | 8 9 0 1 2 3 4 5 | 6 7 8 - - - - -
#  row 0     1 . . . . . . . | . . . . . . . . | . . . - - - - -
#      1     . . . . . . . . | . . . . . . . . | . . . - - - - -
#      2     . . . . . . . . | . . . . . . . . | . 4 . - - - - -
#      3     . . . . . . . . | . . 3 . . . . . | . . . - - - - -
#      4     . . . . . . . . | . . . . . . . . | . . . - - - - -
#      5     . . . . . . . . | . . . . . . . . | . . . - - - - -
#      6     . . . . . . . . | . . . . . . . . | . . . - - - - -
#      7     . . . . . . . 2 | . . . . . . . . | . . . - - - - -
#            ----------------+-----------------+----------------
#      8     . . . . . . . . | . . . . . . . . | 5 . . - - - - -
#      9     . . . . . . . . | . . . . . . . . | . . 6 - - - - -
#     10-15  - padding -
#
# blocks (0,0): bits 0 and 63; (0,1): bit 8*3+2 = 26; (0,2): bit 8*2+1 = 17;
# (1,2): bits 0 and 8*1+2 = 10. Block (1,0) and (1,1) are empty.
GRID = Fixture(
    shape=(10, 19),
    entries=[(0, 0, 1.0), (7, 7, 2.0), (3, 10, 3.0), (2, 17, 4.0), (8, 16, 5.0), (9, 18, 6.0)],
    keys=[0, 1, 2, (1 << 32) | 2],
    bitmaps=[1 | TOP, 1 << 26, 1 << 17, 1 | (1 << 10)],
    offsets=[0, 2, 3, 4, 6],
)

# shape (8, 8), every element stored: one block, every bit set, bit 63 holds 64.
#
#        0  1  2  3  4  5  6  7
#  0     1  2  3  4  5  6  7  8
#  1     9 10 11 12 13 14 15 16
#  ...
#  7    57 58 59 60 61 62 63 64
FULL = Fixture(
    shape=(8, 8),
    entries=[(b // 8, b % 8, float(b + 1)) for b in range(64)],
    keys=[0], bitmaps=[ALL_ONES], offsets=[0, 64],
)

# shape (13, 21): 2 x 3 blocks; the only element is the last one of the
# matrix, (12, 20), in the last block (1, 2) at r = 4, c = 4: bit 8*4+4 = 36,
# the last bit of that block inside the shape.
#
#              block col 0   block col 1   block col 2
#  col         0 .. 7      | 8 .. 15     | 16 17 18 19 20 - - -
#  rows 0-7    .           | .           | .  .  .  .  .  - - -
#  ------------------------+-------------+-------------------
#  rows 8-11   .           | .           | .  .  .  .  .  - - -
#  row 12      .           | .           | .  .  .  .  7  - - -
#  rows 13-15  - padding -
LONE_LAST = Fixture(
    shape=(13, 21), entries=[(12, 20, 7.0)],
    keys=[(1 << 32) | 2], bitmaps=[1 << 36], offsets=[0, 1],
)

# shape (16, 16): 2 x 2 blocks; the only element (15, 15) is bit 63 of block (1, 1).
#
#          0 .. 7 | 8 .. 15
#  0-7     .      | .
#  -------+-------+---------
#  8-14    .      | .
#  15      .      | . ... 9
LONE_TOP = Fixture(
    shape=(16, 16), entries=[(15, 15, 9.0)],
    keys=[(1 << 32) | 1], bitmaps=[TOP], offsets=[0, 1],
)

ONE = Fixture(shape=(1, 1), entries=[(0, 0, 3.0)], keys=[0], bitmaps=[1], offsets=[0, 1])

EMPTY = Fixture(shape=(0, 0), entries=[], keys=[], bitmaps=[], offsets=[0])
EMPTY_ROWS = Fixture(shape=(0, 7), entries=[], keys=[], bitmaps=[], offsets=[0])
EMPTY_COLS = Fixture(shape=(9, 0), entries=[], keys=[], bitmaps=[], offsets=[0])
NO_ENTRIES = Fixture(shape=(30, 17), entries=[], keys=[], bitmaps=[], offsets=[0])

FIXTURES = {"grid-10x19": GRID, "full-block": FULL, "lone-last-bit": LONE_LAST,
            "lone-bit-63": LONE_TOP, "1x1": ONE, "0x0": EMPTY, "0x7": EMPTY_ROWS,
            "9x0": EMPTY_COLS, "30x17-no-entries": NO_ENTRIES}


def coo_arrays(xp, entries, dtype=np.float64):
    rows = xp.asarray(np.array([e[0] for e in entries], dtype=np.int64))
    cols = xp.asarray(np.array([e[1] for e in entries], dtype=np.int64))
    values = xp.asarray(np.array([e[2] for e in entries], dtype=dtype))
    return rows, cols, values


def assert_blocks(got, fixture, values):
    keys, bitmaps, offsets, got_values = (host(a) for a in got)
    assert keys.dtype == np.uint64 and bitmaps.dtype == np.uint64
    assert offsets.dtype == np.int64
    assert [int(k) for k in keys] == fixture.keys
    assert [int(b) for b in bitmaps] == fixture.bitmaps
    assert offsets.tolist() == fixture.offsets
    if values is None:
        assert got_values is None
    else:
        assert got_values.dtype == values.dtype
        np.testing.assert_array_equal(got_values, values)


def brute_blocks(rows, cols, values, shape):
    """Blocks by Python dicts: duplicates summed in input order."""
    blocks: dict[int, dict[int, float]] = {}
    for r, c, v in zip(rows.tolist(), cols.tolist(), values.tolist()):
        key = ((r // 8) << 32) | (c // 8)
        bit = 8 * (r % 8) + c % 8
        block = blocks.setdefault(key, {})
        block[bit] = block.get(bit, 0) + v
    keys = sorted(blocks)
    bitmaps = [sum(1 << b for b in blocks[k]) for k in keys]
    offsets = [0]
    out = []
    for k in keys:
        out.extend(blocks[k][b] for b in sorted(blocks[k]))
        offsets.append(len(out))
    return Fixture(shape, [], keys, bitmaps, offsets), np.array(out, dtype=values.dtype)


# --- COO -> bitmap -----------------------------------------------------------


@pytest.mark.parametrize("name", list(FIXTURES))
def test_coo_to_bitmap_fixtures(name, xp):
    fixture = FIXTURES[name]
    rows, cols, values = coo_arrays(xp, fixture.entries)
    got = convert.coo_to_bitmap(rows, cols, values, fixture.shape)
    assert_blocks(got, fixture, np.array([e[2] for e in fixture.entries]))


@pytest.mark.parametrize("name", list(FIXTURES))
def test_coo_to_bitmap_pattern(name, xp):
    fixture = FIXTURES[name]
    rows, cols, _ = coo_arrays(xp, fixture.entries)
    got = convert.coo_to_bitmap(rows, cols, None, fixture.shape)
    assert_blocks(got, fixture, None)


@pytest.mark.parametrize("name", ["grid-10x19", "full-block"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_coo_to_bitmap_any_input_order(name, seed, xp):
    fixture = FIXTURES[name]
    perm = np.random.default_rng(seed).permutation(len(fixture.entries))
    rows, cols, values = coo_arrays(xp, [fixture.entries[i] for i in perm])
    got = convert.coo_to_bitmap(rows, cols, values, fixture.shape)
    assert_blocks(got, fixture, np.array([e[2] for e in fixture.entries]))


# GRID again, given out of order with duplicates, plus two explicit zeros:
# (4, 4) stored as 0 (bit 36 of block (0, 0)) and (8, 17) given as 2 and -2
# (bit 1 of block (1, 2)). scipy keeps both as stored zeros; so do we.
#
#  col       0 1 2 3 4 5 6 7 | ... | 6 7 8
#  row 0     1 . . . . . . . |     | . . .
#      4     . . . . 0 . . . |     | . . .
#      7     . . . . . . . 2 |     | . . .       2 = 5 + (-3)
#  ...
#      8     . . . . . . . . |     | 5 0 .       0 = 2 + (-2)
#      9     . . . . . . . . |     | . . 6       6 = 1 + 2 + 3
DUPLICATES = [(9, 18, 1.0), (7, 7, 5.0), (8, 17, 2.0), (2, 17, 4.0), (9, 18, 2.0),
              (0, 0, 1.0), (4, 4, 0.0), (3, 10, 3.0), (8, 16, 5.0), (7, 7, -3.0),
              (8, 17, -2.0), (9, 18, 3.0)]
DUPLICATES_SUMMED = Fixture(
    shape=(10, 19), entries=[],
    keys=[0, 1, 2, (1 << 32) | 2],
    bitmaps=[1 | (1 << 36) | TOP, 1 << 26, 1 << 17, 1 | 2 | (1 << 10)],
    offsets=[0, 3, 4, 5, 8],
)
DUPLICATES_VALUES = [1, 0, 2, 3, 4, 5, 0, 6]


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "complex64",
                                   "complex128"])
def test_coo_to_bitmap_sums_duplicates_and_keeps_zeros(dtype, xp):
    rows, cols, values = coo_arrays(xp, DUPLICATES, dtype)
    got = convert.coo_to_bitmap(rows, cols, values, DUPLICATES_SUMMED.shape)
    assert_blocks(got, DUPLICATES_SUMMED, np.array(DUPLICATES_VALUES, dtype=dtype))


def test_coo_to_bitmap_pattern_merges_duplicates(xp):
    rows, cols, _ = coo_arrays(xp, DUPLICATES)
    got = convert.coo_to_bitmap(rows, cols, None, DUPLICATES_SUMMED.shape)
    assert_blocks(got, DUPLICATES_SUMMED, None)


def test_coo_to_bitmap_of_bool_values_is_the_pattern_of_the_true_ones(xp):
    rows, cols = xp.asarray(np.array([0, 1, 9, 9])), xp.asarray(np.array([3, 1, 2, 2]))
    keep = xp.asarray(np.array([True, False, True, False]))
    keys, bitmaps, offsets, values = convert.coo_to_bitmap(rows, cols, keep, (10, 4))
    want = convert.coo_to_bitmap(xp.asarray(np.array([0, 9])), xp.asarray(np.array([3, 2])),
                                 None, (10, 4))
    assert values is None
    for got, expect in zip((keys, bitmaps, offsets), want[:3]):
        np.testing.assert_array_equal(host(got), host(expect))
    with pytest.raises(ValueError, match="rows must be 1-D, got 2-D"):  # checked first
        convert.coo_to_bitmap(rows[:, None], cols[:, None], keep[:, None], (10, 4))


@pytest.mark.parametrize("shape,nnz", [((37, 53), 300), ((200, 9), 900), ((1, 1000), 400),
                                       ((1000, 1), 400), ((64, 64), 5000), ((300, 300), 50)])
def test_coo_to_bitmap_random_against_brute_force(shape, nnz, xp):
    rng = np.random.default_rng(shape[0] * 7 + nnz)
    rows = rng.integers(0, shape[0], nnz)   # with replacement: many duplicates
    cols = rng.integers(0, shape[1], nnz)
    values = rng.integers(-4, 5, nnz).astype(np.float64)
    want, want_values = brute_blocks(rows, cols, values, shape)
    got = convert.coo_to_bitmap(xp.asarray(rows), xp.asarray(cols), xp.asarray(values), shape)
    assert_blocks(got, want, want_values)


# --- bitmap -> COO / CSR -------------------------------------------------------


def fixture_blocks(xp, fixture, dtype=np.float64):
    values = np.array([e[2] for e in fixture.entries], dtype=dtype)
    return (xp.asarray(np.array(fixture.keys, dtype=np.uint64)),
            xp.asarray(np.array(fixture.bitmaps, dtype=np.uint64)),
            xp.asarray(np.array(fixture.offsets, dtype=np.int64)),
            xp.asarray(values))


@pytest.mark.parametrize("name", list(FIXTURES))
def test_bitmap_to_coo_fixtures(name, xp):
    fixture = FIXTURES[name]
    keys, bitmaps, offsets, _ = fixture_blocks(xp, fixture)
    rows, cols = convert.bitmap_to_coo(keys, bitmaps, offsets, len(fixture.entries))
    rows, cols = host(rows), host(cols)
    assert rows.dtype == np.int64 and cols.dtype == np.int64
    # fixtures list their entries in value order
    assert rows.tolist() == [e[0] for e in fixture.entries]
    assert cols.tolist() == [e[1] for e in fixture.entries]


def scipy_csr(fixture, dtype=np.float64):
    rows = np.array([e[0] for e in fixture.entries], dtype=np.int64)
    cols = np.array([e[1] for e in fixture.entries], dtype=np.int64)
    values = np.array([e[2] for e in fixture.entries], dtype=dtype)
    want = sp.csr_array((values, (rows, cols)), shape=fixture.shape)
    want.sum_duplicates()
    want.sort_indices()
    return want


def assert_csr_equal(got, want, index_dtype=np.int32):
    indptr, indices, data = (host(a) for a in got)
    assert indptr.dtype == index_dtype and indices.dtype == index_dtype
    assert data.dtype == want.dtype
    np.testing.assert_array_equal(indptr, want.indptr)
    np.testing.assert_array_equal(indices, want.indices)
    np.testing.assert_array_equal(data, want.data)


@pytest.mark.parametrize("name", list(FIXTURES))
@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128"])
def test_bitmap_to_csr_fixtures_against_scipy(name, dtype, xp):
    fixture = FIXTURES[name]
    keys, bitmaps, offsets, values = fixture_blocks(xp, fixture, dtype)
    got = convert.bitmap_to_csr(keys, bitmaps, offsets, values, fixture.shape,
                                len(fixture.entries))
    assert_csr_equal(got, scipy_csr(fixture, dtype))


@pytest.mark.parametrize("name", list(FIXTURES))
def test_bitmap_to_csr_pattern_is_bool_ones(name, xp):
    fixture = FIXTURES[name]
    keys, bitmaps, offsets, _ = fixture_blocks(xp, fixture)
    got = convert.bitmap_to_csr(keys, bitmaps, offsets, None, fixture.shape,
                                len(fixture.entries))
    assert_csr_equal(got, scipy_csr(fixture, bool))


@pytest.mark.parametrize("shape,density", [((1, 1), 1.0), ((7, 9), 0.5), ((8, 8), 1.0),
                                           ((100, 37), 0.1), ((37, 100), 0.1),
                                           ((300, 5), 0.3), ((5, 300), 0.3),
                                           ((256, 256), 0.02)])
def test_round_trip_random_against_scipy(shape, density, xp):
    rng = np.random.default_rng(shape[0] + 3 * shape[1])
    want = sp.random_array(shape, density=density, format="csr", rng=rng)
    want.data = rng.integers(-5, 6, want.nnz).astype(np.float64)   # with explicit zeros
    coo = want.tocoo()
    keys, bitmaps, offsets, values = convert.coo_to_bitmap(
        xp.asarray(coo.row), xp.asarray(coo.col), xp.asarray(coo.data), shape)
    assert_csr_equal(convert.bitmap_to_csr(keys, bitmaps, offsets, values, shape, want.nnz),
                     want)
    keys, bitmaps, offsets, values = convert.csr_to_bitmap(
        xp.asarray(want.indptr), xp.asarray(want.indices), xp.asarray(want.data), shape)
    assert_csr_equal(convert.bitmap_to_csr(keys, bitmaps, offsets, values, shape, want.nnz),
                     want)


# --- index dtype ---------------------------------------------------------------


@pytest.mark.parametrize("name,limit,index_dtype", [
    ("grid-10x19", None, np.int32),
    ("grid-10x19", 19, np.int32),    # max(nnz = 6, ncols = 19) fits
    ("grid-10x19", 18, np.int64),    # the column count does not
    ("full-block", 64, np.int32),    # max(nnz = 64, ncols = 8) fits
    ("full-block", 63, np.int64),    # nnz does not
    ("0x0", -1, np.int64),
])
def test_csr_index_dtype_follows_threshold(name, limit, index_dtype, xp, monkeypatch):
    if limit is not None:
        monkeypatch.setattr(sputils, "INT32_LIMIT", limit)
    fixture = FIXTURES[name]
    keys, bitmaps, offsets, values = fixture_blocks(xp, fixture)
    got = convert.bitmap_to_csr(keys, bitmaps, offsets, values, fixture.shape,
                                len(fixture.entries))
    assert_csr_equal(got, scipy_csr(fixture), index_dtype)


def test_csr_int64_pattern(xp, monkeypatch):
    monkeypatch.setattr(sputils, "INT32_LIMIT", 2)
    keys, bitmaps, offsets, _ = fixture_blocks(xp, GRID)
    got = convert.bitmap_to_csr(keys, bitmaps, offsets, None, GRID.shape, 6)
    assert_csr_equal(got, scipy_csr(GRID, bool), np.int64)


# --- index dtypes and errors of COO input ---------------------------------------------


@pytest.mark.parametrize("index_dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8,
                                         np.uint16, np.uint32, np.uint64])
def test_coo_to_bitmap_any_integer_index_dtype(index_dtype, xp):
    rows, cols, values = coo_arrays(xp, GRID.entries)
    got = convert.coo_to_bitmap(rows.astype(index_dtype), cols.astype(index_dtype), values,
                                GRID.shape)
    assert_blocks(got, GRID, np.array([e[2] for e in GRID.entries]))


@pytest.mark.parametrize("rows,cols,values,shape,error,match", [
    ([0, -1], [0, 1], None, (5, 3), ValueError, "negative row index -1"),
    ([0, 1], [-3, 0], None, (5, 3), ValueError, "negative column index -3"),
    ([0, 5], [0, 0], None, (5, 3), ValueError, r"row index 5 out of range for shape \(5, 3\)"),
    ([4, 0], [0, 7], None, (5, 3), ValueError,
     r"column index 7 out of range for shape \(5, 3\)"),
    ([0], [0], None, (0, 3), ValueError, r"row index 0 out of range for shape \(0, 3\)"),
    ([3, 2**40], [0, 0], np.ones(2), (2**35, 8), ValueError,
     r"row index 1099511627776 out of range for shape \(34359738368, 8\)"),
    (np.array([0.0, 1.0]), [0, 1], None, (5, 3), TypeError,
     "rows must be an integer array, got float64"),
    ([0, 1], np.array([True, False]), None, (5, 3), TypeError,
     "cols must be an integer array, got bool"),
    ([0, 1, 2], [0, 1], None, (5, 3), ValueError,
     "rows and cols must have the same length, got 3 and 2"),
    (np.array([[0, 1]]), np.array([[0, 1]]), None, (5, 3), ValueError,
     "rows must be 1-D, got 2-D"),
    ([0, 1], np.array([[0], [1]]), None, (5, 3), ValueError, "cols must be 1-D, got 2-D"),
    ([0, 1, 2], [0, 1, 2], np.ones(2), (5, 3), ValueError,
     r"values must be 1-D with one value per index, got shape \(2,\) for 3 indices"),
    ([0, 1], [0, 1], np.ones((2, 1)), (5, 3), ValueError,
     r"values must be 1-D with one value per index, got shape \(2, 1\) for 2 indices"),
    ([0, 1], [0, 1], np.ones(2, dtype=np.float16), (5, 3), TypeError,
     f"values dtype float16 is not supported; supported: {SUPPORTED}"),
    ([0, 1], [0, 1], np.ones(2, dtype=np.uint8), (5, 3), TypeError,
     f"values dtype uint8 is not supported; supported: {SUPPORTED}"),
], ids=["negative-row", "negative-col", "row-out-of-range", "col-out-of-range",
        "no-rows", "huge-shape-out-of-range", "float-rows", "bool-cols", "length-mismatch",
        "2d-rows", "2d-cols", "values-length", "2d-values", "float16-values", "uint8-values"])
def test_coo_to_bitmap_errors(rows, cols, values, shape, error, match, xp):
    rows, cols = xp.asarray(np.asarray(rows)), xp.asarray(np.asarray(cols))
    values = None if values is None else xp.asarray(values)
    with pytest.raises(error, match=match):
        convert.coo_to_bitmap(rows, cols, values, shape)


@pytest.mark.gpu
def test_coo_to_bitmap_rejects_host_and_device_mix():
    import cupy

    with pytest.raises(TypeError, match=r"operands must all be on the host \(NumPy\) or all "
                                        r"on the device \(CuPy\), got a mix"):
        convert.coo_to_bitmap(np.array([0]), cupy.asarray([0]), None, (1, 1))


# --- CSR -> bitmap ---------------------------------------------------------------------


def csr_arrays(xp, fixture, dtype=np.float64, index_dtype=np.int32):
    want = scipy_csr(fixture, dtype)
    return (xp.asarray(want.indptr.astype(index_dtype)),
            xp.asarray(want.indices.astype(index_dtype)), xp.asarray(want.data))


@pytest.mark.parametrize("name", list(FIXTURES))
def test_csr_to_bitmap_fixtures(name, xp):
    fixture = FIXTURES[name]
    got = convert.csr_to_bitmap(*csr_arrays(xp, fixture), fixture.shape)
    assert_blocks(got, fixture, np.array([e[2] for e in fixture.entries]))


@pytest.mark.parametrize("name", ["grid-10x19", "full-block", "lone-last-bit"])
def test_csr_to_bitmap_pattern(name, xp):
    fixture = FIXTURES[name]
    indptr, indices, _ = csr_arrays(xp, fixture)
    assert_blocks(convert.csr_to_bitmap(indptr, indices, None, fixture.shape), fixture, None)


@pytest.mark.parametrize("index_dtype", [np.int16, np.int32, np.int64, np.uint32, np.uint64])
def test_csr_to_bitmap_index_dtypes(index_dtype, xp):
    got = convert.csr_to_bitmap(*csr_arrays(xp, GRID, index_dtype=index_dtype), GRID.shape)
    assert_blocks(got, GRID, np.array([e[2] for e in GRID.entries]))


def test_csr_to_bitmap_unsorted_rows_with_duplicates(xp):
    # DUPLICATES as CSR: row by row, each row in input order (unsorted, repeated columns)
    order = sorted(range(len(DUPLICATES)), key=lambda i: DUPLICATES[i][0])  # stable
    entries = [DUPLICATES[i] for i in order]
    indptr = np.searchsorted([e[0] for e in entries], np.arange(11))
    got = convert.csr_to_bitmap(xp.asarray(indptr), xp.asarray(np.array([e[1] for e in entries])),
                                xp.asarray(np.array([e[2] for e in entries])), (10, 19))
    assert_blocks(got, DUPLICATES_SUMMED, np.array(DUPLICATES_VALUES, dtype=np.float64))


@pytest.mark.parametrize("indptr,indices,match", [
    ([0, 1, 2], [0, 3], r"column index 3 out of range for shape \(2, 3\)"),
    ([0, 1, 2], [0, -1], "negative column index -1"),
    ([0, 1], [0, 1], r"indptr must have length nrows \+ 1 = 3, got 2"),
], ids=["col-out-of-range", "negative-col", "short-indptr"])
def test_csr_to_bitmap_errors(indptr, indices, match, xp):
    with pytest.raises(ValueError, match=match):
        convert.csr_to_bitmap(xp.asarray(np.array(indptr)), xp.asarray(np.array(indices)),
                              xp.asarray(np.ones(len(indices))), (2, 3))


@pytest.mark.parametrize("indptr,indices,error,match", [
    (np.array([0, 1, 2]), np.array([0.0, 1.0]), TypeError,
     "indices must be an integer array, got float64"),
    (np.array([0.0, 1.0, 2.0]), np.array([0, 1]), TypeError,
     "indptr must be an integer array, got float64"),
    (np.array([1, 1, 2]), np.array([0, 1]), ValueError, "indptr"),     # does not start at 0
    (np.array([0, 2, 1]), np.array([0, 1]), ValueError, "indptr"),     # decreasing
    (np.array([0, 1, 3]), np.array([0, 1]), ValueError, "indptr"),     # ends past nnz
    # a uint64 end past 2^63 was named after a cast to int64: -1
    (np.array([0, 1, 2**64 - 1], np.uint64), np.array([0, 1]), ValueError,
     "indptr must end at the number of indices 2, got 18446744073709551615"),
], ids=["float-indices", "float-indptr", "indptr-start", "indptr-decreasing", "indptr-end",
        "indptr-end-uint64"])
def test_csr_to_bitmap_names_the_bad_argument(indptr, indices, error, match, xp):
    # a message names the argument at fault (indices, indptr), as scipy's do
    with pytest.raises(error, match=match):
        convert.csr_to_bitmap(xp.asarray(indptr), xp.asarray(indices), xp.asarray(np.ones(2)),
                              (2, 3))


def long_block_rows(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """COO entries, in CSR order, of 61 x 5000 rows of every length the GPU's
    CSR walk cuts differently: a hub row of 3,000 entries; a block row of
    eight rows of 300; one whose longest row (400 entries, columns below
    400) holds none of the columns of the next (390 entries, columns from
    4,000), so that the last window gets almost all of that row; short rows
    around them, empty ones and a partial last block row with 500 entries."""
    rng = np.random.default_rng(seed)
    m, n = 61, 5000
    lengths = rng.integers(0, 6, m)
    lengths[3], lengths[8:16], lengths[60] = 3000, 300, 500
    lengths[[20, 41, 42]] = 0
    spans = {16: (0, 400), 17: (4000, 5000)}
    rows, cols = [], []
    for r in range(m):
        lo, hi = spans.get(r, (0, n))
        count = hi - lo if r in spans else lengths[r]
        count = 390 if r == 17 else count
        picked = np.sort(rng.choice(np.arange(lo, hi), count, replace=False))
        rows.append(np.full(count, r))
        cols.append(picked)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    values = rng.integers(1, 100, rows.shape[0]).astype(np.float64)
    return rows, cols, values, (m, n)


def as_csr(xp, rows, cols, values, shape, index_dtype=np.int64):
    indptr = np.searchsorted(rows, np.arange(shape[0] + 1)).astype(index_dtype)
    return (xp.asarray(indptr), xp.asarray(cols.astype(index_dtype)),
            None if values is None else xp.asarray(values))


def spy_sorts(monkeypatch) -> list[int]:
    """Record each call of the sorting path of CSR -> bitmap (the GPU's CSR
    walk needs none for canonical rows)."""
    calls: list[int] = []
    real = convert._sorted_entries
    monkeypatch.setattr(convert, "_sorted_entries",
                        lambda *a: calls.append(a[2].shape[0]) or real(*a))
    return calls


@pytest.mark.parametrize("window", [1, 5, 32])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("pattern", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_csr_to_bitmap_long_block_rows(seed, pattern, index_dtype, window, xp, monkeypatch):
    monkeypatch.setattr(convert, "CSR_WINDOW", window)  # entries of a window of the GPU's walk
    rows, cols, values, shape = long_block_rows(seed)
    sorts = spy_sorts(monkeypatch)
    got = convert.csr_to_bitmap(*as_csr(xp, rows, cols, None if pattern else values, shape,
                                        index_dtype), shape)
    want, want_values = brute_blocks(rows, cols, values, shape)
    assert_blocks(got, want, None if pattern else want_values)
    if xp is not np:  # the host's twin sorts
        assert sorts == []


@pytest.mark.parametrize("fault", ["swap", "duplicate"])
@pytest.mark.parametrize("where", [1500, 2999, 3000 + 100])  # the hub, its end, a row of 300
def test_csr_to_bitmap_rows_out_of_order_deep_in_a_long_block_row(fault, where, xp,
                                                                  monkeypatch):
    # the walk of a cut block row assumes canonical rows: each window checks
    # a share of every row, so a fault anywhere sends the matrix to the sort
    monkeypatch.setattr(convert, "CSR_WINDOW", 7)
    rows, cols, values, shape = long_block_rows(2)
    start = int(np.searchsorted(rows, 3))  # the hub row's first entry
    at = start + where - 1
    if fault == "swap":
        cols[at], cols[at + 1] = cols[at + 1], cols[at]
    else:
        cols[at + 1] = cols[at]
    sorts = spy_sorts(monkeypatch)
    got = convert.csr_to_bitmap(*as_csr(xp, rows, cols, values, shape), shape)
    want, want_values = brute_blocks(rows, cols, values, shape)
    assert_blocks(got, want, want_values)
    assert len(sorts) == 1


@pytest.mark.parametrize("where", [0, 1777, 2999])
def test_csr_to_bitmap_column_out_of_range_in_a_long_block_row(where, xp):
    rows, cols, values, shape = long_block_rows(3)
    cols[int(np.searchsorted(rows, 3)) + where] = shape[1] + 7
    with pytest.raises(ValueError, match=r"column index 5007 out of range"):
        convert.csr_to_bitmap(*as_csr(xp, rows, cols, values, shape), shape)


@pytest.mark.parametrize("ncols", [8 * (2**32 - 2), 8 * (2**32 - 1), 2**35])
def test_csr_to_bitmap_block_columns_near_the_walks_limit(ncols, xp):
    # the GPU's walk holds block columns in 32 bits with one value reserved:
    # up to 2**32 - 2 block columns it walks, beyond it the sort takes over
    cols = np.array([0, ncols - 1, 5, ncols // 2, ncols - 9, ncols - 1])
    rows = np.array([0, 0, 1, 1, 1, 9])
    values = np.arange(1.0, 7.0)
    got = convert.csr_to_bitmap(*as_csr(xp, rows, cols, values, (10, ncols)), (10, ncols))
    want, want_values = brute_blocks(rows, cols, values, (10, ncols))
    assert_blocks(got, want, want_values)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (13, 9), (1, 1)])
def test_csr_to_bitmap_without_entries(shape, xp):
    indptr = xp.zeros(shape[0] + 1, dtype=xp.int64)
    keys, bitmaps, offsets, values = convert.csr_to_bitmap(
        indptr, xp.zeros(0, dtype=xp.int64), xp.zeros(0), shape)
    assert host(keys).shape == (0,) and host(bitmaps).shape == (0,)
    assert host(offsets).tolist() == [0] and host(values).shape == (0,)


@pytest.mark.parametrize("m,n,density", [(1, 1, 1.0), (9, 17, 0.5), (100, 3, 0.6),
                                         (1000, 1000, 0.01), (333, 4100, 0.2)])
def test_csr_to_bitmap_random_against_brute_force(m, n, density, xp):
    a = sp.random_array((m, n), density=density, format="csr", rng=m * n,
                        data_sampler=lambda size: np.arange(1, size + 1, dtype=np.float64))
    coo = a.tocoo()
    got = convert.csr_to_bitmap(xp.asarray(a.indptr), xp.asarray(a.indices),
                                xp.asarray(a.data), (m, n))
    want, want_values = brute_blocks(coo.row, coo.col, coo.data, (m, n))
    assert_blocks(got, want, want_values)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32])
@pytest.mark.parametrize("fault", [None, "start", 1, 37, 299, "end"])
def test_indptr_errors_anywhere(fault, dtype, xp):
    # 300 rows: the GPU checks a warp of items at a time; a fault in the
    # first, a middle or the last (partial) warp must each be reported
    indptr = np.arange(301) * 2
    if fault == "start":
        indptr[0] = 1
    elif fault == "end":
        indptr[-1] += 1
    elif fault is not None:
        indptr[fault] = indptr[fault + 1] + 1  # a decrease after row fault - 1
    errors = convert._indptr_errors(xp, xp.asarray(indptr.astype(dtype)), 600)
    assert int(host(errors)[0]) == (0 if fault is None else convert._INDPTR_ERROR)


# --- the sort of entries: one packed sort code, or two stable argsorts ---------------------


def corner_entries(shape):
    m, n = shape
    return [(m - 1, n - 1, 1.0), (0, n - 1, 2.0), (m // 2, n // 2, 3.0), (m - 1, 0, 4.0),
            (0, 0, 5.0), (m - 1, n - 1, 10.0), (m - 2, n - 1, 6.0)]


# The packed code holds block row, block column, bit (6) and entry number
# (3 bits for the 7 corner entries): it fits while row_bits + col_bits <= 55.
@pytest.mark.parametrize("shape,argsorts", [
    ((16, 16), 0),
    ((2**30, 2**31), 0),             # 27 + 28 + 6 + 3 = 64 bits: packed, every bit used
    ((2**30 + 1, 2**31), 2),         # 28 + 28 + 6 + 3 = 65 bits: two argsorts
    ((2**30, 2**31 + 8), 2),
    ((2**32, 2**32), 2),
    ((2**34, 2**34), 2),
    ((2**35, 2**35), 2),             # the largest shape: block indices up to 2**32 - 1
], ids=["16x16", "64-bits", "65-bits-rows", "65-bits-cols", "2^32", "2^34", "max-dim"])
def test_coo_to_bitmap_on_huge_shapes(shape, argsorts, xp, monkeypatch):
    calls = spy_argsort(monkeypatch, convert)
    entries = corner_entries(shape)
    rows, cols, values = coo_arrays(xp, entries)
    want, want_values = brute_blocks(np.asarray([e[0] for e in entries]),
                                     np.asarray([e[1] for e in entries]),
                                     np.asarray([e[2] for e in entries]), shape)
    got = convert.coo_to_bitmap(rows, cols, values, shape)
    assert len(calls) == argsorts
    assert_blocks(got, want, want_values)
    # and back: entries in value order, (block row, block col, row, col) ascending
    keys, bitmaps, offsets, _ = got
    back_rows, back_cols = convert.bitmap_to_coo(keys, bitmaps, offsets, want_values.size)
    want_entries = sorted({(r, c) for r, c, _ in entries},
                          key=lambda e: (e[0] // 8, e[1] // 8, e[0] % 8, e[1] % 8))
    assert list(zip(host(back_rows).tolist(), host(back_cols).tolist())) == want_entries


@pytest.mark.parametrize("shape,argsorts", [((40, 40), 0), ((2**35, 2**35), 2)],
                         ids=["packed", "argsort"])
def test_coo_to_bitmap_sort_paths_agree(shape, argsorts, xp, monkeypatch):
    # the same entries, in the top-left corner of a small and of a huge matrix
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 40, 2000)
    cols = rng.integers(0, 40, 2000)
    values = rng.integers(-4, 5, 2000).astype(np.float64)   # sums of duplicates are exact
    want = convert.coo_to_bitmap(rows, cols, values, (40, 40))   # the host, packed
    calls = spy_argsort(monkeypatch, convert)
    got = convert.coo_to_bitmap(xp.asarray(rows), xp.asarray(cols), xp.asarray(values), shape)
    assert len(calls) == argsorts
    for g, w in zip(got, want):
        np.testing.assert_array_equal(host(g), w)


@pytest.mark.parametrize("shape", [(1, 1), (2**35, 2**35)], ids=["packed", "argsort"])
@pytest.mark.parametrize("nduplicates", [3, 10])
def test_coo_to_bitmap_sums_duplicates_in_input_order(shape, nduplicates, xp):
    # 1e16 + 1 rounds back to 1e16, so left to right 1 + 1e16 + 1 + ... + 1 - 1e16 is 0;
    # any other grouping (1 + (1e16 - 1e16), pairwise, tree) leaves some ones
    values = np.array([1.0, 1e16] + [1.0] * (nduplicates - 3) + [-1e16])
    zeros = xp.zeros(nduplicates, dtype=xp.int64)
    _, bitmaps, _, got = convert.coo_to_bitmap(zeros, zeros, xp.asarray(values), shape)
    assert [int(b) for b in host(bitmaps)] == [1]
    assert host(got).tolist() == [0.0]


@pytest.mark.parametrize("shape,density,hub", [
    ((0, 5), 0.0, None), ((7, 9), 0.0, None), ((50, 40), 0.1, None),
    ((300, 20), 0.05, None), ((1000, 1000), 0.002, None),
    # the longest row in the first, a middle and the last (partial) warp of
    # block rows: the GPU reduces the lengths of 32 rows before one atomic
    ((4100, 800), 0.002, 3), ((4100, 800), 0.002, 300), ((4100, 800), 0.002, 512)])
def test_row_pointer_and_longest_row(shape, density, hub, xp):
    a = sp.random_array(shape, density=density, format="csr", rng=3)
    if shape[0] >= 300:  # empty block rows at the start, the middle and the end
        keep = np.ones(shape[0], dtype=bool)
        keep[:16] = keep[100:180] = keep[-20:] = False
        a = sp.csr_array(sp.diags_array(keep.astype(float)) @ a)
    if hub is not None:  # one block row holds a full row
        a = a.tolil()
        a[8 * hub, :] = 1.0
        a = sp.csr_array(a)
    m = BitmapMatrix(a)
    keys = xp.asarray(m.keys)
    nbrows = -(-shape[0] // 8)
    ptr, longest = convert.row_pointer(keys, nbrows)
    ptr = ptr.get() if hasattr(ptr, "get") else ptr
    rows = (m.keys >> np.uint64(32)).astype(np.int64)
    want = np.zeros(nbrows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=nbrows), out=want[1:])
    np.testing.assert_array_equal(ptr, want)
    assert int(longest[0]) == (int(np.diff(want).max()) if nbrows else 0)


def row_pointer_on_host(keys, nrows: int) -> tuple[np.ndarray, int]:
    ptr, longest = convert.row_pointer(host(keys), -(-nrows // 8))
    return ptr, int(longest[0])


@pytest.mark.gpu
@pytest.mark.parametrize("window", [1, 5, 32])
@pytest.mark.parametrize("seed", [0, 1])
def test_csr_walk_finds_the_row_pointer(seed, window, monkeypatch):
    # every kind of block row the walk cuts into windows; the row pointer and
    # longest block row come with the blocks, as row_pointer finds them
    import cupy

    monkeypatch.setattr(convert, "CSR_WINDOW", window)
    rows, cols, values, shape = long_block_rows(seed)
    (keys, *_), found = convert.csr_to_bitmap_rows(*as_csr(cupy, rows, cols, values, shape),
                                                   shape)
    ptr, longest = row_pointer_on_host(keys, shape[0])
    assert found is not None
    np.testing.assert_array_equal(host(found[0]), ptr)
    assert found[1] == longest


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,density", [(0, 5, 0.0), (13, 9, 0.0), (1, 1, 1.0),
                                         (1000, 1000, 0.01), (333, 4100, 0.2),
                                         (2001, 17, 0.3)])
def test_csr_walk_row_pointer_of_random_matrices(m, n, density):
    import cupy

    a = sp.random_array((m, n), density=density, format="csr", rng=m + n)
    (keys, *_), found = convert.csr_to_bitmap_rows(
        cupy.asarray(a.indptr), cupy.asarray(a.indices), cupy.asarray(a.data), (m, n))
    ptr, longest = row_pointer_on_host(keys, m)
    np.testing.assert_array_equal(host(found[0]), ptr)
    assert found[1] == longest


def test_rows_come_only_from_the_walk(xp):
    # the host's sort, and a CSR whose rows are out of order, leave them unknown
    indptr, indices = xp.asarray([0, 2, 3]), xp.asarray([5, 1, 0])
    _, found = convert.csr_to_bitmap_rows(indptr, indices, xp.ones(3), (2, 8))
    assert found is None


@pytest.mark.gpu
def test_a_fresh_matrix_multiplies_without_finding_its_rows_again(monkeypatch):
    import cupy
    import cupyx.scipy.sparse as csp

    from bmsparse import spgemm

    a = sp.random_array((500, 500), density=0.02, format="csr", rng=4)
    fresh = BitmapMatrix.from_cupyx(csp.csr_matrix(sp.csr_matrix(a)))
    monkeypatch.setattr(convert, "row_pointer", lambda *args: pytest.fail("found again"))
    c = spgemm(fresh, fresh)
    monkeypatch.undo()  # C's own rows are found when it is converted
    assert_same_csr(c.to_scipy(), scipy_product(a, a))
    cupy.cuda.Device().synchronize()


# --- the range of False entries of bool values -------------------------------------------


@pytest.mark.parametrize("rows,cols,match", [
    ([0, 7], [0, 0], r"row index 7 out of range for shape \(2, 2\)"),
    ([0, -1], [0, 0], "negative row index -1"),
    ([0, 0], [0, 9], r"column index 9 out of range for shape \(2, 2\)"),
    ([9], [0], r"row index 9 out of range for shape \(2, 2\)"),
], ids=["row-too-big", "negative-row", "col-too-big", "only-false"])
def test_coo_to_bitmap_checks_the_indices_of_false_entries(rows, cols, match, xp):
    # bool values make a pattern of their True entries, but every index is
    # checked first: a False entry out of range is bad input, as scipy says
    values = np.array([True, False][-len(rows):])
    with pytest.raises(ValueError):
        sp.coo_array((values, (np.array(rows), np.array(cols))), shape=(2, 2))
    with pytest.raises(ValueError, match=match):
        convert.coo_to_bitmap(xp.asarray(np.array(rows)), xp.asarray(np.array(cols)),
                              xp.asarray(values), (2, 2))
