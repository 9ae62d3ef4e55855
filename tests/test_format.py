"""The block layout of ``_format.py`` against hand-computed values and brute force."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse import _format
from bmsparse._format import (bit_of, block_cols_of, block_rows_of, nblocks_along, pack_keys,
                              popcount, set_bits, value_index)

ALL_ONES = (1 << 64) - 1
TOP = 1 << 63
LAST = (1 << 32) - 1   # the largest block index a key can hold

# bitmaps every bit-level test runs over: the extremes, patterns and random words
SPECIAL = [0, 1, TOP, ALL_ONES, TOP | 1, 0x5555555555555555, 0xAAAAAAAAAAAAAAAA,
           0x8040201008040201, 0x00000000FFFFFFFF, 0xFFFFFFFF00000000]
RANDOM = [int(x) for x in np.random.default_rng(0).integers(
    0, ALL_ONES, size=20, dtype=np.uint64, endpoint=True)]
BITMAPS = SPECIAL + RANDOM


def host(a):
    return a if isinstance(a, np.ndarray) else a.get()


def brute_popcount(x: int) -> int:
    return bin(x).count("1")


def brute_set_bits(bitmaps: list[int]) -> tuple[list[int], list[int]]:
    owner, bits = [], []
    for i, x in enumerate(bitmaps):
        for b in range(64):
            if (x >> b) & 1:
                owner.append(i)
                bits.append(b)
    return owner, bits


@pytest.mark.parametrize("n,want", [(0, 0), (1, 1), (7, 1), (8, 1), (9, 2), (16, 2), (17, 3),
                                    (2**35, 2**32)])
def test_nblocks_along(n, want):
    assert nblocks_along(n) == want


@pytest.mark.parametrize("block_row,block_col,key", [
    (0, 0, 0),
    (0, 1, 1),
    (1, 0, 1 << 32),
    (3, 5, 0x0000000300000005),
    (0, LAST, 0x00000000FFFFFFFF),
    (LAST, 0, 0xFFFFFFFF00000000),
    (LAST, LAST, ALL_ONES),
    (LAST - 1, LAST, 0xFFFFFFFEFFFFFFFF),
    (1 << 31, (1 << 31) - 1, 0x800000007FFFFFFF),
])
@pytest.mark.parametrize("index_dtype", [np.int64, np.uint32, np.uint64])
def test_pack_keys_by_hand(block_row, block_col, key, index_dtype):
    keys = pack_keys(np.array([block_row], dtype=index_dtype),
                     np.array([block_col], dtype=index_dtype))
    assert keys.dtype == np.uint64
    assert int(keys[0]) == key
    rows, cols = block_rows_of(keys), block_cols_of(keys)
    assert rows.dtype == np.int64 and cols.dtype == np.int64
    assert (int(rows[0]), int(cols[0])) == (block_row, block_col)


def test_pack_keys_round_trip(xp):
    rng = np.random.default_rng(1)
    rows = np.concatenate([[0, LAST, LAST, 0, LAST - 1], rng.integers(0, LAST, 200,
                                                                      endpoint=True)])
    cols = np.concatenate([[0, 0, LAST, LAST, LAST], rng.integers(0, LAST, 200,
                                                                  endpoint=True)])
    keys = pack_keys(xp.asarray(rows), xp.asarray(cols))
    want = [(int(r) << 32) | int(c) for r, c in zip(rows, cols)]
    assert [int(k) for k in host(keys)] == want
    np.testing.assert_array_equal(host(block_rows_of(keys)), rows)
    np.testing.assert_array_equal(host(block_cols_of(keys)), cols)


def test_pack_keys_order_is_row_major():
    # keys sort by block row first, then block column, even at the top of the range
    rows = np.array([0, 0, 1, 1, LAST, LAST])
    cols = np.array([0, LAST, 0, LAST, 0, LAST])
    keys = pack_keys(rows, cols)
    assert np.all(keys[1:] > keys[:-1])


@pytest.mark.parametrize("row,col,bit", [
    (0, 0, 0), (0, 7, 7), (1, 0, 8), (7, 0, 56), (7, 7, 63), (3, 2, 26),
    (8, 9, 1),               # (0, 1) inside block (1, 1)
    (15, 10, 58),            # (7, 2) inside block (1, 1)
    (2**35 - 1, 2**35 - 1, 63),
    (2**34 + 4, 2**33 + 3, 35),
])
def test_bit_of(row, col, bit):
    got = bit_of(np.array([row], dtype=np.int64), np.array([col], dtype=np.int64))
    assert got.dtype == np.int64
    assert int(got[0]) == bit


def test_bit_of_every_element_of_a_block():
    r, c = np.divmod(np.arange(64, dtype=np.int64), 8)
    np.testing.assert_array_equal(bit_of(r + 80, c + 8 * 1000), np.arange(64))


@pytest.mark.parametrize("bitmap", BITMAPS, ids=[hex(b) for b in BITMAPS])
def test_popcount_one_word(bitmap, xp):
    got = popcount(xp.asarray(np.array([bitmap], dtype=np.uint64)))
    assert got.dtype == np.int64
    assert int(host(got)[0]) == brute_popcount(bitmap)


def test_popcount_array(xp):
    bitmaps = np.array(BITMAPS, dtype=np.uint64)
    got = host(popcount(xp.asarray(bitmaps)))
    assert got.tolist() == [brute_popcount(b) for b in BITMAPS]


def test_popcount_empty(xp):
    got = popcount(xp.zeros(0, dtype=xp.uint64))
    assert got.shape == (0,) and got.dtype == np.int64


@pytest.mark.parametrize("bitmaps", [
    [],
    [0],
    [1],
    [TOP],
    [ALL_ONES],
    [0, TOP, 0, 1, 0],
    [ALL_ONES, 0, ALL_ONES],
    SPECIAL,
    RANDOM,
], ids=["empty", "zero", "one", "top", "all-ones", "sparse-mix", "full-mix", "special",
        "random"])
def test_set_bits(bitmaps):
    owner, bits = set_bits(np.array(bitmaps, dtype=np.uint64))
    want_owner, want_bits = brute_set_bits(bitmaps)
    assert owner.dtype == np.int64 and bits.dtype == np.int64
    assert owner.tolist() == want_owner
    assert bits.tolist() == want_bits


def test_set_bits_big_endian_input():
    # the layout is about values, not bytes: a big-endian array means the same bitmaps
    bitmaps = [TOP | 2, 0x0100000000000080]
    owner, bits = set_bits(np.array(bitmaps, dtype=">u8"))
    assert (owner.tolist(), bits.tolist()) == brute_set_bits(bitmaps)


@pytest.mark.parametrize("bitmap", BITMAPS, ids=[hex(b) for b in BITMAPS])
def test_value_index(bitmap):
    bits = np.arange(64, dtype=np.int64)
    got = value_index(np.full(64, bitmap, dtype=np.uint64), bits)
    assert got.dtype == np.int64
    assert got.tolist() == [brute_popcount(bitmap & ((1 << b) - 1)) for b in range(64)]


def test_value_index_of_set_bits_counts_up():
    # the values of a block are in bit order: set bit number i has value index i
    bitmaps = np.array(BITMAPS, dtype=np.uint64)
    owner, bits = set_bits(bitmaps)
    got = value_index(bitmaps[owner], bits)
    want = [i for b in BITMAPS for i in range(brute_popcount(b))]
    assert got.tolist() == want


def test_layout_constants():
    # the layout the CUDA header draws: 8x8 blocks, 32-bit block indices
    assert (_format.BLOCK, _format.KEY_SHIFT) == (8, 32)
    assert _format.COL_MASK == 0xFFFFFFFF and _format.ROW_MASK == 0xFFFFFFFF00000000
    assert _format.MAX_DIM == 8 * 2**32
