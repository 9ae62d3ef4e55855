"""A @ x, A.T @ x, x @ A and A @ X against scipy; the two twins; the warp logic; the errors."""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from bmsparse import BitmapMatrix, spmv, transpose
from bmsparse import spmv as spmv_function
from bmsparse import generators
from bmsparse.spmv import column_pointer, row_pointer
from tests.cases import CASES, DTYPES, assert_dense_close, host, named, ours, random_matrix
from tests.helpers import random_complex_dense, rounded_complex_product, run_in_threads

# the module: bmsparse.spmv names the function
spmv_module = importlib.import_module("bmsparse.spmv")


def dense_operand(xp, shape, dtype, seed, order="C"):
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.integers(-3, 4, shape)
    x = np.asarray(x).astype(dtype) if np.dtype(dtype) != np.bool_ else x > 0
    return xp.asarray(np.asfortranarray(x) if order == "F" else x)


def want_of(got_dtype, value):
    return np.asarray(value).astype(got_dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_matvec(case, dtype, xp):
    a = named(case, dtype)
    x = dense_operand(xp, a.shape[1], dtype, seed=1)
    got = ours(a, xp) @ x
    want = a @ host(x)
    assert_dense_close(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_transposed_matvec(case, dtype, xp):
    a = named(case, dtype)
    x = dense_operand(xp, a.shape[0], dtype, seed=2)
    assert_dense_close(ours(a, xp).T @ x, a.T @ host(x), dtype)


def test_strided_values_set_by_a_user(xp):
    # kernels read arrays as dense, without a check at launch: setting a
    # strided view stores a contiguous copy
    a = named("tall", "float64")
    b = ours(a, xp)
    doubled = xp.repeat(b.values * 3, 2)[::2]
    assert not doubled.flags.c_contiguous
    b.values = doubled
    assert b.values.flags.c_contiguous
    x = dense_operand(xp, a.shape[1], "float64", seed=4)
    assert_dense_close(b @ x, (3 * a) @ host(x), "float64")
    y = dense_operand(xp, a.shape[0], "float64", seed=5)
    assert_dense_close(b.T @ y, (3 * a).T @ host(y), "float64")


@pytest.mark.parametrize("dtype", ["bool", "int64", "float32", "complex128"])
@pytest.mark.parametrize("case", ["tall", "wide", "full-block", "empty"])
def test_vector_times_matrix(case, dtype, xp):
    a = named(case, dtype)
    x = dense_operand(xp, a.shape[0], dtype, seed=3)
    assert_dense_close(x @ ours(a, xp), host(x) @ a, dtype)
    # and through a lazy transpose: x @ A.T is A @ x
    y = dense_operand(xp, a.shape[1], dtype, seed=4)
    assert_dense_close(y @ ours(a, xp).T, host(y) @ a.T, dtype)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", ["int32", "float64", "complex64"])
@pytest.mark.parametrize("case", ["tall", "wide", "square", "full-block", "nx0"])
def test_matrix_times_dense_matrix(case, dtype, order, xp):
    a = named(case, dtype)
    x = dense_operand(xp, (a.shape[1], 3), dtype, seed=5, order=order)
    got = ours(a, xp) @ x
    assert got.flags.c_contiguous
    assert_dense_close(got, a @ host(x), dtype)
    y = dense_operand(xp, (a.shape[0], 2), dtype, seed=6, order=order)
    assert_dense_close(ours(a, xp).T @ y, a.T @ host(y), dtype)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("case", ["tall", "square", "full-block"])
def test_dense_matrix_times_matrix(case, order, xp):
    a = named(case, "float64")
    x = dense_operand(xp, (4, a.shape[0]), "float64", seed=7, order=order)
    got = x @ ours(a, xp)
    assert got.flags.c_contiguous
    assert_dense_close(got, host(x) @ a, "float64")
    y = dense_operand(xp, (2, a.shape[1]), "float64", seed=8, order=order)
    assert_dense_close(y @ ours(a, xp).T, host(y) @ a.T, "float64")


def test_strided_vector(xp):
    a = named("tall", "float64")
    x = dense_operand(xp, 2 * a.shape[1], "float64", seed=9)[::2]
    assert_dense_close(ours(a, xp) @ x, a @ host(x), "float64")


@pytest.mark.parametrize(("a_dtype", "x_dtype"), [
    ("float32", "float64"), ("int32", "float32"), ("bool", "float64"), ("bool", "int32"),
    ("int64", "complex64"), ("float64", "bool"), ("int32", "int64")])
def test_dtype_promotion(a_dtype, x_dtype, xp):
    a = named("tall", a_dtype)
    x = dense_operand(xp, a.shape[1], x_dtype, seed=10)
    got = ours(a, xp) @ x
    want = a @ host(x)
    assert got.dtype == np.result_type(a_dtype, x_dtype) == want.dtype
    assert_dense_close(got, want, got.dtype)


def test_spmv_function_with_transpose(xp):
    a = named("wide", "float64")
    x = dense_operand(xp, a.shape[0], "float64", seed=11)
    assert_dense_close(spmv_function(ours(a, xp), x, transpose=True), a.T @ host(x), "float64")


def test_transposed_product_does_not_form_the_transpose(monkeypatch, xp):
    a = ours(named("square", "float64"), xp)
    monkeypatch.setattr(transpose, "transpose", None)  # any call would fail
    x = dense_operand(xp, a.shape[0], "float64", seed=12)
    a.T @ x  # noqa: B018 - the call is the test
    x @ a  # noqa: B018


def test_pointers_are_kept_with_the_matrix(xp):
    a = ours(named("square", "float64"), xp)
    assert row_pointer(a) is row_pointer(a)
    assert column_pointer(a)[0] is column_pointer(a)[0]
    assert column_pointer(a)[0] is a._column_order()


def test_column_blocks_are_the_blocks_in_column_order(xp):
    a = ours(named("wide", "float64"), xp)
    keys, bitmaps, offsets, ptr = spmv_module.column_blocks(a)
    assert spmv_module.column_blocks(a)[0] is keys  # kept with the matrix
    order = host(column_pointer(a)[0])
    np.testing.assert_array_equal(host(keys), host(a.keys)[order])
    np.testing.assert_array_equal(host(bitmaps), host(a.bitmaps)[order])
    np.testing.assert_array_equal(host(offsets), host(a.offsets)[order])
    assert ptr is column_pointer(a)[1]
    assert spmv_module.kernel_blocks(a, False)[0] is a.keys


def test_pointers_match_the_keys(xp):
    a = ours(named("wide", "float64"), xp)
    keys = host(a.keys)
    rows, cols = keys >> np.uint64(32), keys & np.uint64(0xFFFFFFFF)
    np.testing.assert_array_equal(host(row_pointer(a)),
                                  np.searchsorted(rows, np.arange(3), side="left"))
    order, ptr = column_pointer(a)
    np.testing.assert_array_equal(host(ptr), np.searchsorted(np.sort(cols), np.arange(10)))
    np.testing.assert_array_equal(host(order), np.lexsort((rows, cols)))


#: blocks per block row of the warp cases (a warp holds 32 consecutive blocks)
WARP_CASES = {
    # row 2: positions 3..152, warps 0 (trailing, from lane 3) to 4; row 5 spans warps 4..6
    "hub": [3, 0, 150, 1, 0, 40],
    # row 1: positions 2..1061, 34 pieces (warps 0..33): a warp's lanes add two each
    "long-hub": [2, 1060, 1],
    # rows ending at positions 32, 96 (two whole warps), 128, 129, 160 and 193
    "warp-boundaries": [32, 64, 32, 1, 0, 31, 33],
    # row 1: positions 16..79, trailing in warp 0, the whole of warp 1, leading in warp 2
    "mid-warp-64": [16, 64, 16],
    "one-block": [1],
    "empty-rows": [0, 2, 0, 0, 5, 0, 0],
    # rows 1, 5 and 6 do not fit in what their warp has left: each starts a
    # warp (lanes 30-31 of warp 0, 18-31 of warp 2 and 31 of warp 3 idle);
    # row 3 (40 blocks) goes on from lane 8 of warp 1 to lane 15 of warp 2
    "moved": [30, 5, 3, 40, 2, 31, 30],
}


def warp_matrix(name, dtype, seed=0, transposed=False) -> sp.csr_array:
    """Block row i holds WARP_CASES[name][i] blocks (block column i with ``transposed``).

    The shape is not a multiple of 8; every block has its (0, 0) element and
    up to 7 more; values are random (floats not integer-valued), so a
    different summation order would show in the last bits.
    """
    counts = WARP_CASES[name]
    rng = np.random.default_rng(seed)
    nbcols = max(counts) + 3
    m, n = 8 * len(counts) - 3, 8 * nbcols - 5
    rows, cols = [], []
    for i, count in enumerate(counts):
        for j in np.sort(rng.choice(nbcols, count, replace=False)):
            extra = rng.integers(0, 8)
            rows += [8 * i, *(8 * i + rng.integers(0, 8, extra))]
            cols += [8 * j, *(8 * j + rng.integers(0, 8, extra))]
    rows, cols = np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)
    keep = (rows < m) & (cols < n)
    rows, cols = rows[keep], cols[keep]
    if np.dtype(dtype) == np.bool_:
        values = np.ones(rows.shape[0], dtype=bool)
    elif np.dtype(dtype).kind == "f":
        values = rng.standard_normal(rows.shape[0])
    else:
        values = rng.integers(-9, 10, rows.shape[0])
    a = sp.coo_array((values, (rows, cols)), shape=(m, n)).tocsr().astype(dtype)
    a.sum_duplicates()
    return sp.csr_array(a.T) if transposed else a


def random_operand(shape, dtype, seed):
    """Random floats (integers for integer dtypes): rounding shows the summation order."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iub":
        return dense_operand(np, shape, dtype, seed)
    return rng.standard_normal(shape).astype(dtype)


def kernel_model(keys, bitmaps, offsets, values, order, ptr, warps, x2, nout):
    """The kernels of spmv.cu transcribed thread by thread (slow), with every
    write recorded: the twin must equal it bit for bit. Warp w holds
    positions warps[w].. of the list, from lane 0. Position p reads block
    ``order[p]`` of A, which the kernels read as block p of copies in that
    order (``spmv.column_blocks``): the same block."""
    k = x2.shape[1]

    def place(position):  # the position's place in the layout: 32 w + lane
        w = int(np.searchsorted(warps, position, side="right")) - 1
        return 32 * w + position - int(warps[w])

    zero = x2.dtype.type(0)
    y = np.zeros((nout, k), dtype=x2.dtype)
    writes = np.zeros((nout, k), dtype=np.int64)
    carry = {}
    for j in range(k):
        for w in range(warps.shape[0] - 1):
            acc = [[zero] * 8 for _ in range(32)]
            group = [-1] * 32
            position = [-1] * 32
            for lane in range(32):
                p = int(warps[w]) + lane
                if p >= warps[w + 1]:
                    continue
                position[lane] = p
                q = p if order is None else int(order[p])
                br, bc = int(keys[q]) >> 32, int(keys[q]) & 0xFFFFFFFF
                group[lane] = br if order is None else bc
                v = int(offsets[q])
                for bit in range(64):
                    if not (int(bitmaps[q]) >> bit) & 1:
                        continue
                    r, c = divmod(bit, 8)
                    a = x2.dtype.type(1) if values is None else values[v]
                    v += 1
                    if order is None:
                        acc[lane][r] += a * x2[8 * bc + c, j]
                    else:
                        acc[lane][c] += a * x2[8 * br + r, j]
            first = [0] * 32
            for lane in range(1, 32):
                first[lane] = lane if group[lane] != group[lane - 1] else first[lane - 1]
            d = 1
            while d < 32:
                old = [list(row) for row in acc]
                for lane in range(32):
                    if lane - first[lane] >= d:
                        acc[lane] = [old[lane - d][r] + old[lane][r] for r in range(8)]
                d *= 2
            for lane in range(32):
                g = group[lane]
                if g < 0 or (lane < 31 and group[lane + 1] == g):
                    continue
                start = place(int(ptr[g]))
                end = start + int(ptr[g + 1]) - int(ptr[g])
                assert 32 * w + lane - start == position[lane] - int(ptr[g])  # contiguous
                if start >> 5 == (end - 1) >> 5:
                    for r in range(8):
                        if 8 * g + r < nout:
                            y[8 * g + r, j] = acc[lane][r]
                            writes[8 * g + r, j] += 1
                else:
                    assert end - start > 32  # a group of at most 32 blocks never spans
                    slot = 0 if first[lane] == 0 else 1
                    assert (w, j, slot) not in carry
                    carry[w, j, slot] = acc[lane]
    for j in range(k):  # step 3's last piece to arrive, and step 4
        for i in range(nout):
            g, r = i >> 3, i & 7
            if ptr[g] == ptr[g + 1]:
                y[i, j] = zero
                writes[i, j] += 1
                continue
            start = place(int(ptr[g]))
            end = start + int(ptr[g + 1]) - int(ptr[g])
            w0, w1 = start >> 5, (end - 1) >> 5
            if w0 != w1:  # the last warp: lane l adds pieces l, l + 32, ...
                pieces = [carry[w, j, 1 if w == w0 and start & 31 else 0][r]
                          for w in range(w0, w1 + 1)]
                lanes = [zero] * 32
                for p, piece in enumerate(pieces):
                    lanes[p % 32] = lanes[p % 32] + piece
                d = 16
                while d:  # then lane l < d adds lane l + d's sum
                    lanes[:d] = [lanes[lane] + lanes[lane + d] for lane in range(d)]
                    d //= 2
                y[i, j] = lanes[0]
            else:
                continue
            writes[i, j] += 1
    np.testing.assert_array_equal(writes, 1)  # every output written exactly once
    return y


def stage_args(a, transposed, x2):
    order, ptr = column_pointer(a) if transposed else (None, row_pointer(a))
    return (a.keys, a.bitmaps, a.offsets, a.values, order, ptr, spmv_module._layout_numpy(ptr),
            x2, a.shape[1] if transposed else a.shape[0])


def cuda_stage_args(a, transposed, x):
    """The arguments of ``_spmv_cuda``: the kernels walk the blocks of
    ``kernel_blocks`` (column-major copies for ``transposed``)."""
    keys, bitmaps, offsets, ptr = spmv_module.kernel_blocks(a, transposed)
    return (keys, bitmaps, offsets, a.values, transposed, ptr,
            spmv_module.warp_layout(a, transposed), x, a.shape[1] if transposed else a.shape[0])


def random_pointer(seed, ngroups=700):
    """A group pointer (int64) whose groups are empty, short, exactly 32 or
    long, over several of the layout kernels' chunks."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([0, 0, 1, 2, 3, 5, 8, 17, 31, 32, 33, 64, 65, 200], size=ngroups)
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_layout_keeps_short_groups_in_a_warp(seed):
    ptr = random_pointer(seed)
    warps = spmv_module._layout_numpy(ptr)
    assert warps[0] == 0 and warps[-1] == ptr[-1]
    assert np.all(np.diff(warps) >= 1) and np.all(np.diff(warps) <= 32)
    lanes = 32  # lanes used in the current warp: full before the first group
    for start, end in zip(ptr[:-1].tolist(), ptr[1:].tolist()):
        w = int(np.searchsorted(warps, start, side="right")) - 1
        if end - start > 32:
            # on from where the last group ended; the warps it starts, 32 apart
            assert start - warps[w] == lanes % 32
            inside = warps[(warps > start) & (warps < end)]
            assert np.all(np.diff(inside) == 32)
            lanes = (lanes % 32 + end - start - 1) % 32 + 1
        elif end > start:  # in one warp: where the last group ended if it fits
            assert end <= warps[w + 1]
            moved = start == warps[w]
            assert moved == (lanes + end - start > 32)
            lanes = end - start if moved else lanes + end - start


def test_layout_of_the_warp_cases():
    def layout(case):
        ptr = np.concatenate([[0], np.cumsum(WARP_CASES[case])]).astype(np.int64)
        return spmv_module._layout_numpy(ptr).tolist()

    # no row of at most 32 blocks crosses a multiple of 32: the warps are
    # the list's 32 blocks at a time
    for case in ("hub", "long-hub", "warp-boundaries", "mid-warp-64"):
        total = sum(WARP_CASES[case])
        assert layout(case) == [*range(0, total, 32), total]
    # moved: warps at rows 1 (30), 3 (24 blocks in: 62), 5 (80) and 6 (111)
    assert layout("moved") == [0, 30, 62, 80, 111, 141]
    assert spmv_module._layout_numpy(np.zeros(4, dtype=np.int64)).tolist() == [0]


@pytest.mark.gpu
@pytest.mark.parametrize("ngroups", [1, 255, 256, 257, 700, 3000, -20000])
def test_layout_cuda_equals_numpy(ngroups):
    import cupy

    if ngroups > 0:
        ptr = random_pointer(ngroups, ngroups)
    else:  # a tall matrix: most block rows empty, fewer blocks than rows
        sizes = np.zeros(-ngroups, dtype=np.int64)
        sizes[::97] = np.random.default_rng(5).choice([1, 7, 40, 100], size=sizes[::97].shape)
        ptr = np.concatenate([[0], np.cumsum(sizes)])
    warps, nwarps = spmv_module._layout_cuda(cupy.asarray(ptr), int(ptr[-1]))
    want = spmv_module._layout_numpy(ptr)
    assert nwarps == want.shape[0] - 1
    np.testing.assert_array_equal(warps.get(), want)


def test_warp_cases_have_their_structure():
    a = BitmapMatrix(warp_matrix("hub", "float64"))
    np.testing.assert_array_equal(np.diff(row_pointer(a)), WARP_CASES["hub"])
    t = BitmapMatrix(warp_matrix("hub", "float64", transposed=True))
    np.testing.assert_array_equal(np.diff(column_pointer(t)[1])[:6], WARP_CASES["hub"])
    assert a.shape[0] % 8 and a.shape[1] % 8


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", ["bool", "int64", "float64", "complex128"])
@pytest.mark.parametrize("case", list(WARP_CASES))
def test_warp_cases(case, dtype, transposed, k, xp):
    # the counts are those of A's block rows for A @ x, block columns for A.T @ x
    a = warp_matrix(case, dtype, seed=1, transposed=transposed)
    want_a = a.T if transposed else a
    x = dense_operand(xp, (want_a.shape[1], k) if k > 1 else want_a.shape[1], dtype, seed=15)
    got = ours(a, xp).T @ x if transposed else ours(a, xp) @ x
    assert_dense_close(got, want_a @ host(x), dtype)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("case", ["hub", "warp-boundaries"])
def test_warp_cases_dense_matrix_times_matrix(case, order, xp):
    a = warp_matrix(case, "float64", seed=2)
    x = dense_operand(xp, (3, a.shape[0]), "float64", seed=16, order=order)
    assert_dense_close(x @ ours(a, xp), host(x) @ a, "float64")
    y = dense_operand(xp, (2, a.shape[1]), "float64", seed=17, order=order)
    assert_dense_close(y @ ours(a, xp).T, host(y) @ a.T, "float64")


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("dtype", ["bool", "int32", "float32", "float64"])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("case", [*WARP_CASES, "dense"])
def test_numpy_twin_sums_in_kernel_order(case, transposed, dtype, k):
    a = named(case, dtype) if case == "dense" else warp_matrix(case, dtype, seed=3,
                                                               transposed=transposed)
    a = BitmapMatrix(a)
    compute = "int64" if dtype == "bool" else dtype
    values = None if a.values is None else a.values.astype(compute)
    x2 = random_operand((a.shape[0] if transposed else a.shape[1], k), compute, seed=18)
    args = stage_args(a, transposed, x2)
    args = (*args[:3], values, *args[4:])
    got = spmv_module._spmv_numpy(*args)
    np.testing.assert_array_equal(got, kernel_model(*args))
    want = (a.to_scipy().T if transposed else a.to_scipy()).astype(compute) @ x2
    assert_dense_close(got, want, compute)


@pytest.mark.gpu
@pytest.mark.parametrize("dense", [False, True])  # spmv.cu's kernels or spmv_dense.cu's
@pytest.mark.parametrize("out_transposed", [False, True])
@pytest.mark.parametrize("k", [0, 1, 3])  # 0: a 1-D vector
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("case", [*WARP_CASES, "dense", "zero-nnz"])
def test_stage_cuda_equals_numpy(case, dtype, transposed, k, out_transposed, dense):
    import cupy

    a = BitmapMatrix(named(case, dtype) if case in ("dense", "zero-nnz")
                     else warp_matrix(case, dtype, seed=4, transposed=transposed))
    d = a.to_device()
    x = random_operand((a.shape[0] if transposed else a.shape[1], max(k, 1)), dtype, seed=14)
    want = spmv_module._spmv_numpy(*stage_args(a, transposed, x))
    if k == 0:
        x, want = x[:, 0], want[:, 0]
    got = spmv_module._spmv_cuda(*cuda_stage_args(d, transposed, cupy.asarray(x)),
                                 out_transposed, dense=dense)
    # the same summation order: equal bit for bit
    assert got.ndim == x.ndim
    np.testing.assert_array_equal(got.get().T if out_transposed else got.get(), want)


def kept_counters(a, transposed, dtype):
    """The counters of ``a``'s kept scratch for vectors of ``dtype`` (host copy)."""
    import cupy

    stream = cupy.cuda.get_current_stream().ptr
    kept, launch = a._cache[spmv_module._kept_key(transposed, np.dtype(dtype).char, stream)]
    assert kept == stream
    return cupy.ndarray((launch.nwarps,), dtype=cupy.uint32, memptr=launch.scratch).get()


@pytest.mark.gpu
def test_vector_products_from_a_new_thread():
    import threading

    import cupy

    # a thread that has made no CUDA runtime call has no current context: the
    # kept launches (through the driver) must make one, as CuPy's do
    a = random_matrix((300, 200), 0.05, "float64", seed=21)
    d = BitmapMatrix(a).to_device()
    x, xt = cupy.arange(200, dtype=cupy.float64), cupy.arange(300, dtype=cupy.float64)
    d @ x, d.T @ xt  # the launches kept in this thread
    got = {}

    def run():
        got["A @ x"], got["A.T @ x"], got["A.T"] = d @ x, d.T @ xt, d.T.keys
        cupy.cuda.get_current_stream().synchronize()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    np.testing.assert_allclose(got["A @ x"].get(), a @ x.get(), rtol=1e-12)
    np.testing.assert_allclose(got["A.T @ x"].get(), a.T @ xt.get(), rtol=1e-12)
    np.testing.assert_array_equal(got["A.T"].get(), BitmapMatrix(a).T.keys)


@pytest.mark.gpu
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("case", ["hub", "long-hub", "mid-warp-64", "warp-boundaries"])
def test_kept_scratch_is_left_zeroed(case, transposed):
    import cupy

    # groups spanning warps count their pieces in the kept scratch; every
    # launch must leave the counters zero, or the next call sums too early
    a = warp_matrix(case, "float64", seed=5, transposed=transposed)
    d = BitmapMatrix(a).to_device()
    x = cupy.asarray(random_operand(a.shape[0] if transposed else a.shape[1], "float64", 20))
    first = (d.T @ x if transposed else d @ x).get()
    np.testing.assert_array_equal(kept_counters(d, transposed, "float64"), 0)
    for _ in range(3):
        again = (d.T @ x if transposed else d @ x).get()
        np.testing.assert_array_equal(again, first)
    np.testing.assert_array_equal(kept_counters(d, transposed, "float64"), 0)
    want = (a.T if transposed else a) @ x.get()
    np.testing.assert_allclose(first, want, rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
def test_kept_scratch_follows_the_stream_and_dtype():
    import cupy

    a = warp_matrix("long-hub", "float64", seed=6)
    d = BitmapMatrix(a).to_device()
    x = cupy.asarray(random_operand(a.shape[1], "float64", 21))
    first = (d @ x).get()
    key = spmv_module._kept_key(False, "d", cupy.cuda.get_current_stream().ptr)
    kept = d._cache[key]
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        other = d @ x
        # another stream's launches could overlap: it gets a scratch of its own
        assert d._cache[spmv_module._kept_key(False, "d", stream.ptr)][0] == stream.ptr
        np.testing.assert_array_equal(kept_counters(d, False, "float64"), 0)
        stream.synchronize()
    np.testing.assert_array_equal(other.get(), first)
    np.testing.assert_array_equal((d @ x).get(), first)  # back on the first stream
    assert d._cache[key][0] == kept[0]
    d @ x.astype(np.complex128)  # noqa: B018 - a complex product: its own scratch
    assert sorted(key[2] for key in d._cache if key[0] == "spmv_scratch") == ["D", "d"]


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["A @ x", "A.T @ x", "x @ A", "x @ A.T"])
def test_repeated_vector_products_take_the_kept_launch(form, monkeypatch):
    import cupy

    a = warp_matrix("long-hub", "float64", seed=8)
    d = BitmapMatrix(a).to_device()
    transposed = form in ("A.T @ x", "x @ A")  # the product is by a.T
    n = a.shape[0] if transposed else a.shape[1]
    x = cupy.asarray(random_operand(n, "float64", 22))
    product = {"A @ x": lambda m, v: m @ v, "A.T @ x": lambda m, v: m.T @ v,
               "x @ A": lambda m, v: v @ m, "x @ A.T": lambda m, v: v @ m.T}[form]
    want = (a.T if transposed else a) @ x.get()
    first = product(d, x).get()
    np.testing.assert_allclose(first, want, rtol=1e-12, atol=1e-12)
    general = []
    real = spmv_module.matmul_dense
    monkeypatch.setattr(spmv_module, "matmul_dense",
                        lambda *args, **kw: general.append(args) or real(*args, **kw))
    np.testing.assert_array_equal(product(d, x).get(), first)
    assert general == []  # the kept launch, not the general path
    np.testing.assert_array_equal(product(d, x[::-1].copy()[::-1]).get(), first)
    strided = cupy.zeros(2 * n)
    strided[::2] = x
    np.testing.assert_array_equal(product(d, strided[::2]).get(), first)
    assert general == []
    # new values (what is kept goes with them, and comes back)
    d.values = d.values * 2
    np.testing.assert_array_equal(product(d, x).get(), 2 * first)
    np.testing.assert_array_equal(product(d, x).get(), 2 * first)
    general.clear()
    # what the kept launch does not take goes the general way, and is right
    got32 = product(d, x.astype(np.float32))
    assert got32.dtype == np.float64 and len(general) == 1
    np.testing.assert_allclose(got32.get(), 2 * ((a.T if transposed else a)
                                                 @ x.get().astype(np.float32)), rtol=1e-6)
    with pytest.raises(ValueError, match="mismatch"):
        product(d, x[:-1])
    d.values = d.values.astype(np.float32)  # the dtype follows the values
    got = product(d, x)
    assert got.dtype == np.float64
    rounded = a.astype(np.float32).astype(np.float64)
    want = 2 * ((rounded.T if transposed else rounded) @ x.get())
    np.testing.assert_allclose(got.get(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
def test_per_thread_default_stream_keeps_a_scratch_per_thread():
    import cupy

    # Stream.ptds is one object and one handle for every host thread, but a
    # different stream in each: the threads' launches may overlap, so each
    # thread has its own kept scratch (a shared one would mix their counts)
    a = warp_matrix("long-hub", "float64", seed=7)
    d = BitmapMatrix(a).to_device()
    xs = [cupy.asarray(random_operand(a.shape[1], "float64", 30 + i)) for i in range(4)]
    want = [a @ x.get() for x in xs]
    got, keys = {}, {}

    def run(i):
        with cupy.cuda.Stream.ptds:
            ys = [d @ xs[i] for _ in range(20)]
            keys[i] = spmv_module._kept_key(False, "d", cupy.cuda.Stream.ptds.ptr)
            cupy.cuda.Stream.ptds.synchronize()
        got[i] = [y.get() for y in ys]

    run_in_threads(run, 4, "a product")
    assert len(set(keys.values())) == 4 and all(k in d._cache for k in keys.values())
    for i in range(4):
        for y in got[i]:
            np.testing.assert_allclose(y, want[i], rtol=1e-12, atol=1e-12)


@pytest.fixture(params=["bits", "rows"])
def partials(request, monkeypatch):
    """How the GPU takes a block's partial sums, whatever its entries per
    block: bit by bit in shared memory (spmv.cu) or row by row in registers
    (spmv_dense.cu)."""
    monkeypatch.setattr(spmv_module, "DENSE_ENTRIES", 0 if request.param == "rows" else np.inf)
    return request.param


def test_dense_kernels_are_chosen_by_entries_per_block():
    dense = BitmapMatrix(named("dense", "float64"))
    assert dense.nnz >= spmv_module.DENSE_ENTRIES * dense.nblocks
    assert spmv_module.dense_blocks(dense)
    assert spmv_module.dense_blocks(dense.T)
    sparse = BitmapMatrix(warp_matrix("hub", "float64"))
    assert sparse.nnz < spmv_module.DENSE_ENTRIES * sparse.nblocks
    assert not spmv_module.dense_blocks(sparse)
    pattern = BitmapMatrix(named("dense", "bool"))
    pattern._nnz = None  # as after an operation that did not count its entries
    assert not spmv_module.dense_blocks(pattern)


@pytest.mark.gpu
@pytest.mark.parametrize("k", [0, 2])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", ["bool", "float32", "complex128"])
@pytest.mark.parametrize("case", ["hub", "mid-warp-64", "empty-rows"])
def test_both_partials_against_scipy(case, dtype, transposed, k, partials):
    import cupy

    a = warp_matrix(case, dtype, seed=7, transposed=transposed)
    want_a = a.T if transposed else a
    x = dense_operand(cupy, (want_a.shape[1], k) if k else want_a.shape[1], dtype, seed=22)
    got = ours(a, cupy).T @ x if transposed else ours(a, cupy) @ x
    assert_dense_close(got, want_a @ host(x), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("transposed", [False, True])
def test_cuda_equals_numpy_bitwise_on_hubs(transposed, partials):
    import cupy

    # power-law rows and columns: hub block columns of dozens of blocks
    a = BitmapMatrix(generators.webbase_surrogate(0.01, seed=1))
    d = a.to_device()
    x = np.random.default_rng(19).standard_normal(a.shape[0])
    want = a.T @ x if transposed else a @ x
    got = d.T @ cupy.asarray(x) if transposed else d @ cupy.asarray(x)
    np.testing.assert_array_equal(got.get(), want)
    assert want.dtype == np.float64


def test_mismatch_vector(xp):
    a = ours(named("tall", "float64"), xp)
    with pytest.raises(ValueError, match=r"matmul: dimension mismatch with signature "
                       r"\(n,k=21\),\(k=4,1\?\)->\(n,1\?\)"):
        a @ xp.ones(4)


def test_mismatch_matrix(xp):
    a = ours(named("tall", "float64"), xp)
    with pytest.raises(ValueError, match=r"\(n,k=21\),\(k=5,m\)->\(n,m\) \(got shapes "
                       r"\(37, 21\) and \(5, 2\)\)"):
        a @ xp.ones((5, 2))


def test_mismatch_vector_times_matrix(xp):
    a = ours(named("tall", "float64"), xp)
    with pytest.raises(ValueError, match=r"\(n,k=37\),\(k=3,1\?\)->\(n,1\?\)"):
        xp.ones(3) @ a


def test_mismatch_transposed(xp):
    a = ours(named("tall", "float64"), xp)
    with pytest.raises(ValueError, match=r"\(n,k=37\),\(k=21,1\?\)"):
        a.T @ xp.ones(21)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("left_shape", [(3,), (2, 3), (4, 1)])
def test_mismatch_names_the_operands_as_written(left_shape, transposed, xp):
    # x @ A is computed as A.T @ x.T, as scipy does, and the signature is
    # scipy's for that product; the shapes named are those of x and A
    a = named("tall", "float64")
    s, m = (a.T, ours(a, xp).T) if transposed else (a, ours(a, xp))
    x = xp.ones(left_shape)
    with pytest.raises(ValueError) as want:
        host(x) @ s
    with pytest.raises(ValueError) as got:
        x @ m
    assert str(got.value).startswith(str(want.value))
    assert f"(got shapes {left_shape} and {m.shape})" in str(got.value)


@pytest.mark.parametrize("dtype", ["U1", "S1", "O", "M8[D]", "m8[s]", "V4"])
@pytest.mark.parametrize("matrix_dtype", ["bool", "int64", "float64"])
def test_non_numeric_operand_names_both_dtypes(matrix_dtype, dtype):
    # as scipy's message: not a made-up result dtype or a tuple "with no dtype"
    # (host only: CuPy has no string, object, time or void arrays)
    a = named("tall", matrix_dtype)
    x, y = np.zeros(21, dtype=dtype), np.zeros((2, 37), dtype=dtype)
    with pytest.raises(TypeError):
        a @ x  # the reference refuses it too
    m = BitmapMatrix(a)
    with pytest.raises(TypeError, match="no supported conversion for types: " + re.escape(
            f"({np.dtype(matrix_dtype)!r}, {x.dtype!r})")):
        m @ x
    with pytest.raises(TypeError, match="no supported conversion for types"):
        y @ m
    with pytest.raises(TypeError, match="no supported conversion for types"):
        spmv_function(m, y.T, transpose=True)


@pytest.mark.parametrize("operand", [2, 2.5])
def test_scalar_operand(operand):
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(ValueError, match="scalar operands are not allowed, use '\\*' instead"):
        a @ operand
    with pytest.raises(ValueError, match="scalar operands are not allowed"):
        operand @ a
    # the function as its docstring says, a Python or NumPy scalar alike
    for x in (operand, np.float64(operand)):
        for flipped in (False, True):
            with pytest.raises(ValueError, match="scalar operands are not allowed"):
                spmv_function(a, x, transpose=flipped)


def test_three_dimensional_operand():
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(ValueError, match="x must be 1-D or 2-D, got 3-D"):
        a @ np.ones((21, 2, 2))


def test_unsupported_result_dtype():
    a = BitmapMatrix(named("tall", "bool"))
    with pytest.raises(TypeError, match="result dtype float16 is not supported"):
        a @ np.ones(21, dtype=np.float16)


@pytest.mark.gpu
def test_host_matrix_device_vector():
    import cupy

    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(TypeError, match="operands must all be on the host"):
        a @ cupy.ones(21)
    with pytest.raises(TypeError, match="operands must all be on the host"):
        a.to_device() @ np.ones(21)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # numpy.matrix
def test_lists_and_numpy_matrix_operands_as_scipy_takes_them():
    a = named("tall", "float64")
    m, s = BitmapMatrix(a), sp.csr_array(a)
    x, y = np.arange(21.0).tolist(), np.arange(37.0).tolist()
    left, right = np.asmatrix(np.ones((2, 37))), np.asmatrix(np.ones((21, 2)))
    for got, want in ((m @ x, s @ x), (y @ m, y @ s), (m @ right, s @ right),
                      (left @ m, left @ s)):
        assert type(got) is np.ndarray and got.shape == np.asarray(want).shape
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12)


def test_spmv_takes_what_matmul_takes():
    a = named("tall", "float64")
    want, want_t = a @ np.ones(21), a.T @ np.arange(37.0)
    np.testing.assert_allclose(spmv_function(a, np.ones(21)), want, rtol=1e-12)  # scipy's
    m = BitmapMatrix(a)
    np.testing.assert_allclose(spmv_function(m, [1.0] * 21), want, rtol=1e-12)
    # a lazy transpose, either way
    np.testing.assert_allclose(spmv_function(m.T, np.arange(37.0)), want_t, rtol=1e-12)
    np.testing.assert_allclose(spmv_function(m.T, np.ones(21), transpose=True), want,
                               rtol=1e-12)
    # (a number is a scalar operand, as for @: see test_scalar_operand)
    with pytest.raises(TypeError, match="x must be a NumPy or CuPy array, got dict"):
        spmv_function(m, {})


def test_unsupported_operand_type():
    a = BitmapMatrix(named("tall", "float64"))
    with pytest.raises(TypeError, match="unsupported operand"):
        a @ "x"


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 50), n=st.integers(0, 50), density=st.floats(0, 1),
       seed=st.integers(0, 2**16), transposed=st.booleans())
def test_property_matvec(m, n, density, seed, transposed):
    a = random_matrix((m, n), density, "float64", seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(m if transposed else n)
    ours_a = BitmapMatrix(a)
    got = ours_a.T @ x if transposed else ours_a @ x
    want = a.T @ x if transposed else a @ x
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_scipy_operand_still_multiplies_sparse():
    a = named("tall", "float64")
    got = BitmapMatrix(a) @ sp.csr_array(a.T)
    assert isinstance(got, BitmapMatrix)


def test_spmv_is_exported():
    assert spmv is spmv_function


HUGE = 2**35  # the largest dimension a matrix may have (for the empty products below)


def fail_if_called(*args):
    raise AssertionError("an empty product built a pointer over the matrix's shape")


@pytest.mark.parametrize("dtype, x_dtype, want", [("float64", "float64", "float64"),
                                                  ("int32", "float32", "float64"),
                                                  ("bool", "bool", "bool")])
def test_no_columns_skips_work_that_scales_with_the_shape(monkeypatch, dtype, x_dtype, want):
    # a product with zero columns (rows, on the left) has nothing to sum: it
    # must not build the 2**32-entry block pointer of a hypersparse matrix
    rows, cols = np.array([0, 5, HUGE - 1]), np.array([HUGE - 1, 3, 0])
    a = BitmapMatrix((np.ones(3, dtype=dtype), (rows, cols)), shape=(HUGE, HUGE))
    monkeypatch.setattr(BitmapMatrix, "_row_pointer", fail_if_called)
    monkeypatch.setattr(BitmapMatrix, "_column_pointer", fail_if_called)
    x = np.empty((HUGE, 0), dtype=x_dtype)
    for got, shape in [(a @ x, (HUGE, 0)), (a.T @ x, (HUGE, 0)), (x.T @ a, (0, HUGE)),
                       (x.T @ a.T, (0, HUGE))]:
        assert got.shape == shape
        assert got.dtype == want
        assert got.flags.c_contiguous


def test_no_columns_still_checks_shapes_and_dtypes():
    a = BitmapMatrix(np.array([[1.0, 0, 2], [0, 3, 0]]))
    with pytest.raises(ValueError, match="dimension mismatch"):
        a @ np.empty((2, 0))
    with pytest.raises(ValueError, match="dimension mismatch"):
        np.empty((0, 3)) @ a
    with pytest.raises(TypeError, match="no supported conversion"):
        a @ np.empty((3, 0), dtype="U1")
    with pytest.raises(TypeError, match="result dtype float16 is not supported"):
        BitmapMatrix(np.eye(3, dtype=bool)) @ np.empty((3, 0), dtype=np.float16)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("transposed", [False, True])
def test_complex_terms_round_as_scipy(xp, dtype, transposed):
    # one entry in each row and column: every output is one complex product,
    # rounded part by part as scipy and the kernels round it (NumPy's complex
    # loops may fuse multiply-adds)
    n = 45
    perm = np.random.default_rng(5).permutation(n)
    values = random_complex_dense((1, n), 1.0, dtype, seed=6)[0]
    a = sp.csr_array((values, (np.arange(n), perm)), shape=(n, n))
    x = random_complex_dense((1, n), 1.0, dtype, seed=7)[0]
    m = ours(a, xp)
    got = host((m.T if transposed else m) @ xp.asarray(x))
    want = np.empty(n, dtype=dtype)
    if transposed:  # output perm[i] is values[i] * x[i]
        want[perm] = rounded_complex_product(values, x)
    else:  # output i is values[i] * x[perm[i]]
        want = rounded_complex_product(values, x[perm])
    np.testing.assert_array_equal(got, want)
