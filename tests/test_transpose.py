"""Block-local transpose: against scipy, the lazy transpose, and the two twins."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from bmsparse import BitmapMatrix, _format, transpose
from bmsparse.testing import assert_equal
from tests.cases import CASES, DTYPES, host, named, ours, random_matrix
from tests.helpers import assert_barriers_kept_by_stream, assert_same_csr, run_in_threads


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_transpose_matches_scipy(case, dtype, xp):
    a = named(case, dtype)
    t = ours(a, xp).T
    assert t.shape == a.shape[::-1]
    t.check_format(full_check=True)
    assert_same_csr(t.get().to_scipy(), a.T, rtol=0)


@pytest.mark.parametrize("dtype", ["bool", "float64"])
def test_transpose_of_transpose_is_the_matrix(dtype, xp):
    a = ours(random_matrix((29, 13), 0.3, dtype, seed=1), xp)
    assert a.T.T is a
    assert_equal(a.T.copy().T, a)


def test_lazy_transpose_keeps_attributes_without_computing(monkeypatch):
    a = BitmapMatrix(random_matrix((20, 12), 0.3, "float64", seed=2))
    calls = []
    monkeypatch.setattr(transpose, "transpose", lambda *args: calls.append(1))
    t = a.T
    assert (t.shape, t.dtype, t.nnz, t.nblocks, t.on_device) == (
        (12, 20), a.dtype, a.nnz, a.nblocks, False)
    assert "12x20 BitmapMatrix" in repr(t)
    assert calls == []


def test_transpose_is_computed_once(monkeypatch):
    a = BitmapMatrix(random_matrix((20, 12), 0.3, "float64", seed=3))
    calls = []
    real = transpose.transpose

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(transpose, "transpose", spy)
    t = a.T
    t.keys, t.values, t.toarray()  # noqa: B018 - the accesses are the test
    assert calls == [1]


def test_transpose_of_a_pattern_matrix_leaves_its_nnz_uncounted(xp):
    # a pattern matrix made by an operation that did not count its entries:
    # its transpose bounds them (64 a block) rather than counting (a sync)
    a = random_matrix((37, 51), 0.2, "bool", seed=4)
    source = ours(a, xp)
    source._nnz = None
    t = source.T
    t.keys  # noqa: B018 - computes the transpose
    assert source._nnz is None
    assert_same_csr(t.get().to_scipy(), a.T, rtol=0)


def test_column_order_sorts_by_column_then_row(xp):
    a = ours(random_matrix((70, 45), 0.1, "float64", seed=4), xp)
    order = transpose.column_order(a.keys)
    keys = a.keys.get() if xp is not np else a.keys
    order = order.get() if xp is not np else order
    rows, cols = _format.block_rows_of(keys), _format.block_cols_of(keys)
    np.testing.assert_array_equal(order, np.lexsort((rows, cols)))


def test_transpose_bitmaps_moves_bit_rc_to_cr(xp):
    rng = np.random.default_rng(5)
    bitmaps = rng.integers(0, 2**63, 50, dtype=np.int64).astype(np.uint64) * np.uint64(2) + \
        rng.integers(0, 2, 50).astype(np.uint64)
    got = _format.transpose_bitmaps(xp.asarray(bitmaps))
    got = got.get() if xp is not np else got
    bits = (bitmaps[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    want_bits = bits.reshape(-1, 8, 8).transpose(0, 2, 1).reshape(-1, 64)
    want = (want_bits << np.arange(64, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
    np.testing.assert_array_equal(got, want)


def _stage(a: BitmapMatrix) -> tuple:
    """The transpose stage's outputs for ``a``: blocks of A.T, then (order, ptr)."""
    out = transpose.transpose(a.keys, a.bitmaps, a.offsets, a.values, a.nnz,
                              _format.nblocks_along(a.shape[0]),
                              _format.nblocks_along(a.shape[1]))
    column = out[4]
    return (*out[:4], *(column.arrays() if isinstance(column, transpose.ColumnPointer)
                        else column))


def _assert_stages_equal(got: tuple, want: tuple) -> None:
    import cupy

    for g, w in zip(got, want, strict=True):
        if w is None:
            assert g is None
        else:
            assert isinstance(g, cupy.ndarray)
            np.testing.assert_array_equal(g.get(), w)


@pytest.fixture(autouse=True)
def fresh_plans():
    """Plans of the one-launch kernels are kept per size: tests that patch
    what makes them (bucket_shift, ROW_GROUP_COUNTERS, the TILE_ constants)
    need their own."""
    transpose._plan.cache_clear()
    yield
    transpose._plan.cache_clear()


#: block rows per bucket of the one-launch kernel: a bucket per column (no
#: cuts), a few hundred, or transpose.py's choice (about a block each)
BUCKET_ROWS = {"column": 40, "512-rows": 9, "chosen": None}


def _set_bucket_rows(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    shift = BUCKET_ROWS[name]
    if shift is not None:
        monkeypatch.setattr(transpose, "bucket_shift", lambda *args: shift)


@pytest.fixture(params=["by column", "by rows"])
def counters(request, monkeypatch):
    """The bucket kernel (not the tiles kernel, which would take most
    matrices here), its counters in the output's order, or row group after
    row group (every matrix here has fewer buckets than
    ``ROW_GROUP_COUNTERS``, which picks the second). By rows, the scan goes
    a thread a column up to 64 groups (a column's buckets), else a thread a
    bucket: the column-length tests reach both."""
    monkeypatch.setattr(transpose, "TILE_COLUMNS", 0)
    if request.param == "by rows":
        monkeypatch.setattr(transpose, "ROW_GROUP_COUNTERS", 0)
    return request.param


#: tiles of the tiles kernel: one for the whole matrix (its passes in
#: rounds of a thread block), 8 blocks each (as many tiles as are resident:
#: thread blocks scanning several groups of columns), or transpose.py's
TILES = {"one tile": 1 << 40, "8 blocks": 8, "chosen": None}


@pytest.fixture(params=TILES)
def tiles(request, monkeypatch):
    """The tiles kernel for every matrix of at most ``TILE_COLUMNS`` block
    columns, whatever its values and tiles."""
    monkeypatch.setattr(transpose, "TILE_VALUES", 64)
    monkeypatch.setattr(transpose, "TILE_COUNTERS", 1 << 40)
    monkeypatch.setattr(transpose, "TILE_MOST_BLOCKS", 1 << 40)
    if TILES[request.param] is not None:
        monkeypatch.setattr(transpose, "TILE_BLOCKS", TILES[request.param])
    return request.param


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bool", "int32", "float64", "complex128"])
@pytest.mark.parametrize("case", ["tall", "full-block", "empty", "dense", "wide"])
def test_tiles_equal_numpy(case, dtype, tiles):
    a = BitmapMatrix(named(case, dtype))
    _assert_stages_equal(_stage(a.to_device()), _stage(a))


@pytest.mark.gpu
@pytest.mark.parametrize("clustered", [False, True], ids=["spread", "clustered"])
@pytest.mark.parametrize("dtype", ["bool", "float64"])
def test_tiles_place_columns_of_every_length(dtype, clustered, tiles):
    # a warp's blocks of one column (up to all 32 lanes) take their places
    # together, the warps of a thread block in turn, tile after tile
    lengths = [1, 0, 6, 7, 31, 32, 33, 500, 8192, 8193, 9000, 2, 64, 65, 63, 128, 129]
    a = BitmapMatrix(_column_lengths_matrix(lengths, dtype, seed=8, clustered=clustered))
    d = a.to_device()
    _assert_stages_equal(_stage(d), _stage(a))
    assert_same_csr(d.T.get().to_scipy(), a.to_scipy().T, rtol=0)


@pytest.mark.gpu
def test_tiles_count_more_columns_than_48_kib_hold(tiles):
    # 8 bytes a block column: 7,000 need shared memory past the 48 KiB a
    # launch gets without opting in
    lengths = [(7 * j) % 5 for j in range(7_000)]
    a = BitmapMatrix(_column_lengths_matrix(lengths, "float64", seed=13))
    _assert_stages_equal(_stage(a.to_device()), _stage(a))


@pytest.mark.gpu
def test_column_pointer_alone_by_tiles(tiles):
    a = BitmapMatrix(_column_lengths_matrix([3, 40, 0, 1, 700] * 20, "float64", seed=9))
    nbrows = _format.nblocks_along(a.shape[0])
    order, ptr = transpose.column_pointer(a.keys, nbrows, 100)
    d_order, d_ptr = transpose.column_pointer(a.to_device().keys, nbrows, 100)
    np.testing.assert_array_equal(d_order.get(), order)
    np.testing.assert_array_equal(d_ptr.get(), ptr)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["tiles", "buckets"])
def test_barrier_is_the_streams_and_left_ready(kernel, monkeypatch):
    # no memset before the one-launch kernels: their barrier words are kept
    # with the stream, zeroed once (the bucket kernel clears its counters itself)
    import cupy

    if kernel == "buckets":
        monkeypatch.setattr(transpose, "TILE_COLUMNS", 0)
    a = BitmapMatrix(_column_lengths_matrix([3, 40, 0, 1, 700] * 20, "float64", seed=10))
    plan = transpose._plan(a.nblocks, _format.nblocks_along(a.shape[0]), 100, a.nnz,
                           np.dtype(np.float64), cupy.cuda.runtime.getDevice())
    assert plan.tiles is (kernel == "tiles") and plan.grid > 1
    want, d_a = a.to_scipy().T, a.to_device()
    assert_barriers_kept_by_stream(
        lambda: assert_same_csr(d_a.T.get().to_scipy(), want, rtol=0))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["tiles", "buckets"])
def test_per_thread_default_stream_gives_each_thread_its_barrier(kernel, monkeypatch):
    # Stream.ptds is one object and one handle for every host thread, but a
    # different stream in each: transposes of several threads may run at
    # once, and one pair of barrier words between them would mix their
    # arrivals (a barrier let through early, or never)
    import cupy

    from bmsparse import _kernels

    if kernel == "buckets":
        monkeypatch.setattr(transpose, "TILE_COLUMNS", 0)
    host = [BitmapMatrix(_column_lengths_matrix([3, 40, 0, 1, 700] * 20, "float64", seed=s))
            for s in range(4)]
    want = [h.to_scipy().T for h in host]
    device = [h.to_device() for h in host]
    words, got = {}, {}

    def run(i):
        with cupy.cuda.Stream.ptds:
            words[i] = (_kernels.barrier_words(), _kernels.barrier_words())
            # fresh matrices: each .T is a new transpose
            ts = [BitmapMatrix._from_blocks(device[i].keys, device[i].bitmaps,
                                            device[i].offsets, device[i].values,
                                            device[i].shape).T for _ in range(10)]
            for t in ts:
                t.keys  # noqa: B018 - the launch
            cupy.cuda.Stream.ptds.synchronize()
        got[i] = [t.get().to_scipy() for t in ts]

    run_in_threads(run, 4, "a transpose")
    assert all(a == b for a, b in words.values()) and len({a for a, _ in words.values()}) == 4
    for i in range(4):
        for g in got[i]:
            assert_same_csr(g, want[i], rtol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("nblocks, nbcols, nvalues, tiles", [
    # email-Enron: 121 tiles of about 1,500 blocks (on a GPU of 91 or more
    # resident thread blocks of 512 threads: an H100, an H200)
    (185_272, 4_587, 367_662, True),
    (116_165, 651, 217_073, True),  # squirrel
    (718, 106, 4_089, True),  # young1c: two tiles
    (553_279, 125_001, 3_131_311, False),  # the surrogate: too many columns
    (105_205, 7_824, 147_892, False),  # p2p-Gnutella31: tiles too long
    (26_933, 1_093, 591_904, False),  # bcsstk33: 22 values a block
    (0, 10, 0, False),
])
def test_plan_takes_tiles_for_graphs_of_few_columns(nblocks, nbcols, nvalues, tiles):
    plan = transpose._plan(nblocks, nbcols, nbcols, nvalues, np.dtype(np.float64), 0)
    assert plan.tiles is tiles


@pytest.mark.gpu
@pytest.mark.parametrize("buckets", ["one-launch by column", "one-launch", "sort"])
@pytest.mark.parametrize("dtype", ["bool", "int32", "float64", "complex128"])
@pytest.mark.parametrize("case", ["tall", "full-block", "empty", "dense", "wide"])
def test_stage_cuda_equals_numpy(case, dtype, buckets, counters, monkeypatch):
    if buckets == "sort":
        monkeypatch.setattr(transpose, "_one_launch", lambda *args: False)
    elif buckets == "one-launch by column":
        _set_bucket_rows(monkeypatch, "column")
    a = BitmapMatrix(named(case, dtype))
    _assert_stages_equal(_stage(a.to_device()), _stage(a))


@pytest.mark.parametrize("nblocks, nbrows, nbcols", [
    (0, 0, 0), (1, 1, 1), (10, 1, 5), (100, 1000, 1000), (553_279, 125_001, 125_001),
    (185_272, 4_587, 4_587), (15_000, 788, 788), (5, 1000, 50), (2**33, 2**30, 3)])
def test_bucket_shift_is_the_least_within_the_budget(nblocks, nbrows, nbcols):
    shift = transpose.bucket_shift(nblocks, nbrows, nbcols)
    budget = max(min(transpose.BUCKETS_PER_BLOCK * nblocks, 2**32 - 1), nbcols)

    def buckets(g: int) -> int:
        return nbcols * max(-(-nbrows // 2**g), 1)

    assert shift >= 0
    assert buckets(shift) <= budget
    assert shift == 0 or buckets(shift - 1) > budget


def _column_lengths_matrix(lengths: list[int], dtype: str, seed: int,
                           clustered: bool = False) -> sp.csr_array:
    """A matrix whose block column j has blocks in ``lengths[j]`` random
    block rows (``clustered``: the first rows and the last of 64 times as
    many), each holding a few random entries."""
    rng = np.random.default_rng(seed)
    nbrows = max(lengths) * (64 if clustered else 1)
    rows, cols = [], []
    for j, length in enumerate(lengths):
        if clustered:
            brows = np.append(np.arange(length - 1), nbrows - 1) if length else np.arange(0)
        else:
            brows = rng.choice(nbrows, size=length, replace=False)
        for _ in range(2):
            rows.append(brows * 8 + rng.integers(0, 8, length))
            cols.append(j * 8 + rng.integers(0, 8, length))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    data = rng.integers(1, 9, rows.shape[0]).astype(dtype)
    return sp.csr_array((data, (rows, cols)), shape=(8 * nbrows, 8 * len(lengths)))


@pytest.mark.gpu
@pytest.mark.parametrize("buckets", BUCKET_ROWS)
@pytest.mark.parametrize("clustered", [False, True], ids=["spread", "clustered"])
@pytest.mark.parametrize("dtype", ["bool", "float64"])
def test_one_launch_sorts_columns_of_every_length(dtype, clustered, buckets, counters,
                                                  monkeypatch):
    # a thread ranks a block in a bucket of up to 6, a warp the blocks of a
    # bucket of up to 64; the few longer buckets are sorted by thread
    # blocks (the warps' path: the next test), in shared memory up to
    # BMSPARSE_TRANSPOSE_SHARED; by bins of block rows when spread, by the
    # bitonic network when clustered (one bin overfull). A bucket per column
    # reaches every length; cut, columns span several buckets.
    _set_bucket_rows(monkeypatch, buckets)
    lengths = [1, 0, 6, 7, 31, 32, 33, 500, 8192, 8193, 9000, 2, 64, 65, 63, 128, 129]
    a = BitmapMatrix(_column_lengths_matrix(lengths, dtype, seed=8, clustered=clustered))
    d = a.to_device()
    _assert_stages_equal(_stage(d), _stage(a))
    np.testing.assert_array_equal(np.diff(_stage(a)[5]), lengths)
    assert_same_csr(d.T.get().to_scipy(), a.to_scipy().T, rtol=0)


@pytest.mark.gpu
def test_one_launch_sorts_many_medium_buckets_by_warps(counters, monkeypatch):
    # more buckets of over 64 blocks (those the thread blocks take) than
    # BMSPARSE_TRANSPOSE_FEW (4) per thread block: the warps sort the medium
    # ones side by side
    from bmsparse import _kernels

    kernel = _kernels.get_kernel("transpose.cu", "bmsparse_transpose_columns", T=np.float64)
    grid = _kernels.resident_blocks(kernel, transpose.THREADS)
    lengths = [65 + (7 * j) % 200 for j in range(5 * grid)]
    _set_bucket_rows(monkeypatch, "column")
    a = BitmapMatrix(_column_lengths_matrix(lengths, "float64", seed=11))
    _assert_stages_equal(_stage(a.to_device()), _stage(a))


@pytest.mark.gpu
def test_one_launch_ranks_more_buckets_by_warps_than_it_has_warps(counters, monkeypatch):
    # buckets of 7 to 64 blocks are ranked by a warp each, the grid's warps
    # taking them in turn: more of them than warps
    from bmsparse import _kernels

    kernel = _kernels.get_kernel("transpose.cu", "bmsparse_transpose_columns", T=np.float64)
    nwarps = _kernels.resident_blocks(kernel, transpose.THREADS) * transpose.THREADS // 32
    lengths = [7 + (5 * j) % 58 for j in range(nwarps + 100)]
    _set_bucket_rows(monkeypatch, "column")
    a = BitmapMatrix(_column_lengths_matrix(lengths, "float64", seed=12))
    _assert_stages_equal(_stage(a.to_device()), _stage(a))


@pytest.mark.parametrize("nblocks, nvalues, want", [
    (553_279, 3_131_311, 32),  # the surrogate: 5.7 values a block
    (21_086, 173_670, 16), (5_117, 83_883, 8), (10, 640, 4), (1, 64, 4),
    (10, 10, 32), (0, 0, 32), (7, None, 32)])
def test_warp_blocks_hold_about_warp_values(nblocks, nvalues, want):
    blocks = transpose.warp_blocks(nblocks, nvalues)
    assert blocks == want
    if nvalues:
        assert blocks * nvalues <= transpose.WARP_VALUES * nblocks
        assert blocks == 32 or 2 * blocks * nvalues > transpose.WARP_VALUES * nblocks


def _value_counts_matrix(dtype: str, seed: int) -> sp.csr_array:
    """Blocks of every value count from 1 to 64, a run of 70 full blocks and
    blocks of one value between them, on a diagonal of blocks with a few
    blocks off it: 1,224 blocks of 33 values on average, so the last pass
    takes runs of 4 blocks (warp_blocks), of 4 to 256 values each."""
    rng = np.random.default_rng(seed)
    counts = np.concatenate([np.arange(1, 65), np.full(70, 64), np.ones(40, int),
                             rng.integers(1, 65, 1_000)])
    nb = counts.shape[0]
    brows = np.concatenate([np.arange(nb), rng.integers(0, nb, 50)])
    bcols = np.concatenate([np.arange(nb), rng.integers(0, nb, 50)])
    counts = np.concatenate([counts, rng.integers(1, 65, 50)])
    rows, cols = [], []
    for i, j, n in zip(brows, bcols, counts):
        bits = rng.choice(64, size=n, replace=False)
        rows.append(8 * i + bits // 8)
        cols.append(8 * j + bits % 8)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    data = rng.integers(1, 99, rows.shape[0]).astype(dtype)
    if np.dtype(dtype).kind == "c":
        data = data + 1j * rng.integers(1, 99, rows.shape[0])
    return sp.csr_array((data, (rows, cols)), shape=(8 * nb, 8 * nb))


@pytest.mark.gpu
@pytest.mark.parametrize("grid", ["resident", "one thread block"])
@pytest.mark.parametrize("path", ["one launch", "two kernels"])
@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128"])
def test_values_move_by_warps_of_every_load(dtype, path, grid, monkeypatch):
    # the last pass: a warp takes a run of output blocks at a time, writes
    # them, and moves their values a value a lane, 4 loads in flight a lane;
    # with one thread block of the bucket kernel (16 warps) each warp takes
    # about 19 runs
    from bmsparse import _kernels

    monkeypatch.setattr(transpose, "TILE_COLUMNS", 0)
    if path == "two kernels":
        monkeypatch.setattr(transpose, "_one_launch", lambda *args: False)
        if grid != "resident":
            pytest.skip("the two-kernel path launches a warp per run")
    elif grid != "resident":
        monkeypatch.setattr(_kernels, "resident_blocks", lambda *args: 1)
    a = BitmapMatrix(_value_counts_matrix(dtype, seed=13))
    _assert_stages_equal(_stage(a.to_device()), _stage(a))
    assert_same_csr(a.to_device().T.get().to_scipy(), a.to_scipy().T, rtol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("buckets", BUCKET_ROWS)
def test_column_pointer_alone_equals_numpy(buckets, counters, monkeypatch):
    _set_bucket_rows(monkeypatch, buckets)
    a = BitmapMatrix(_column_lengths_matrix([3, 40, 0, 1, 700], "float64", seed=9))
    nbrows = _format.nblocks_along(a.shape[0])
    order, ptr = transpose.column_pointer(a.keys, nbrows, 5)
    d_order, d_ptr = transpose.column_pointer(a.to_device().keys, nbrows, 5)
    np.testing.assert_array_equal(d_order.get(), order)
    np.testing.assert_array_equal(d_ptr.get(), ptr)


def test_transpose_keeps_the_column_pointer_with_the_source(xp):
    a = ours(_column_lengths_matrix([3, 40, 0, 1, 700], "float64", seed=10), xp)
    t = a.T
    t.keys  # noqa: B018 - computes the transpose
    order, ptr = a._column_pointer()
    assert a._column_pointer()[0] is order  # kept as arrays once read
    keys = host(a.keys)
    rows, cols = _format.block_rows_of(keys), _format.block_cols_of(keys)
    np.testing.assert_array_equal(host(order), np.lexsort((rows, cols)))
    np.testing.assert_array_equal(host(ptr), np.searchsorted(cols[host(order)], np.arange(6)))


@pytest.mark.parametrize("n", [2**34, 2**35])
def test_transpose_of_a_hypersparse_matrix_makes_nothing_per_column(n, xp):
    # a block-column pointer of 2**31 or 2**32 words (17 or 34 GB) for five
    # entries: the blocks are placed by their column order alone
    last = n - 1
    rows = np.array([0, 0, last // 2, last // 2, 5])
    cols = np.array([0, last, 0, last, last - 3])
    values = np.arange(1.0, 6.0)
    a = BitmapMatrix.from_coo(xp.asarray(rows), xp.asarray(cols), xp.asarray(values),
                              (n // 2, n))
    t = a.T
    got_rows, got_cols = (host(x) for x in t._coo_indices())
    got = dict(zip(zip(got_rows.tolist(), got_cols.tolist()), host(t.values).tolist()))
    assert t.shape == (n, n // 2)
    assert got == dict(zip(zip(cols.tolist(), rows.tolist()), values.tolist()))
    assert "column_pointer" not in a._cache
    # the column order alone is what a masked product needs of B
    order = host(a._column_order())
    np.testing.assert_array_equal(order, np.lexsort((_format.block_rows_of(host(a.keys)),
                                                     _format.block_cols_of(host(a.keys)))))
    assert "column_pointer" not in a._cache


def test_product_with_lazy_transpose(xp):
    a = random_matrix((21, 14), 0.3, "float64", seed=6)
    b = random_matrix((21, 9), 0.3, "float64", seed=7)
    got = (ours(a, xp).T @ ours(b, xp)).get().to_scipy()
    assert_same_csr(got, sp.csr_array(a.T @ b))


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 40), n=st.integers(0, 40), density=st.floats(0, 1),
       seed=st.integers(0, 2**16), dtype=st.sampled_from(DTYPES))
def test_property_transpose_matches_scipy(m, n, density, seed, dtype):
    a = random_matrix((m, n), density, dtype, seed)
    assert_same_csr(BitmapMatrix(a).T.to_scipy(), a.T, rtol=0)
