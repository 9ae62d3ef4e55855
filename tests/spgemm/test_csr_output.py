"""spgemm(..., format="csr"): C written straight to CSR, against scipy and
against the bitmap product's own CSR, through every strategy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix, _sputils, spgemm
from bmsparse.spgemm import multiply, strategy
from tests.helpers import assert_same_csr, random_csr, scipy_product, to_device

pytestmark = pytest.mark.usefixtures("spgemm_path")

#: the strategies whose values the CSR writer computes (the others convert C)
WRITES_CSR = ("dense", "merge", "tasks")


def arrays(c) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """indptr, indices, data of a CSR result on the host, in their own dtypes
    (scipy's constructor may narrow them), checked to be of its side's library."""
    if not isinstance(c, sp.csr_array):
        import cupyx.scipy.sparse as csp

        assert isinstance(c, csp.csr_matrix)
        return c.indptr.get(), c.indices.get(), c.data.get()
    return c.indptr, c.indices, c.data


def on_host(c) -> sp.csr_array:
    indptr, indices, data = arrays(c)
    return sp.csr_array((data, indices, indptr), shape=c.shape)


def product(a_csr, b_csr, xp, monkeypatch=None, **kw):
    """C in CSR, C.tocsr() of the bitmap product, and whether the CSR writer ran."""
    a = to_device(BitmapMatrix(a_csr), xp)
    b = to_device(BitmapMatrix(b_csr), xp)
    calls = []
    if monkeypatch is not None:
        real = multiply.multiply_csr
        monkeypatch.setattr(multiply, "multiply_csr",
                            lambda *args, **kws: calls.append(1) or real(*args, **kws))
    c = spgemm(a, b, format="csr", **kw)
    assert c.has_sorted_indices and c.has_canonical_format
    assert on_host(c).has_canonical_format  # scipy's own check of the arrays
    return c, spgemm(a, b, **kw).tocsr(), bool(calls), strategy(a, b)


def assert_identical(got, want) -> None:
    """Same arrays, dtypes and bits: the CSR writer sums as the bitmap multiply."""
    assert got.shape == want.shape
    for name, g, w in zip(("indptr", "indices", "data"), arrays(got), arrays(want)):
        assert g.dtype == w.dtype, name
        np.testing.assert_array_equal(g, w, err_msg=name)


@pytest.mark.parametrize("m,k,n,density", [
    (1, 1, 1, 1.0), (8, 8, 8, 1.0), (50, 37, 61, 0.2), (100, 1, 100, 0.5),
    (513, 257, 129, 0.01), (1000, 1000, 1000, 0.003),
    (300, 300, 300, 0.0),   # no entry at all
    (64, 640, 64, 0.05),    # rows of many blocks
])
def test_csr_format_equals_scipy(m, k, n, density, xp, spgemm_path, monkeypatch):
    a = random_csr(m, k, density, seed=m + k)
    b = random_csr(k, n, density, seed=n + 7)
    got, bitmap, wrote, path = product(a, b, xp, monkeypatch)
    assert_same_csr(on_host(got), scipy_product(a, b))
    assert_identical(got, bitmap)
    if xp is not np and a.nnz and path in WRITES_CSR:
        assert wrote


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_csr_format_dtypes(dtype, xp):
    a = random_csr(70, 90, 0.1, seed=1, dtype=dtype)
    b = random_csr(90, 60, 0.1, seed=2, dtype=dtype)
    got, bitmap, _, _ = product(a, b, xp)
    assert got.dtype == np.dtype(dtype)
    assert_same_csr(on_host(got), scipy_product(a, b))
    assert_identical(got, bitmap)


def test_csr_format_drops_exact_zeros_unless_kept(xp, monkeypatch):
    a = random_csr(40, 40, 0.3, seed=9)
    dense = a.toarray()
    dense[:, 5] = -dense[:, 4]   # column 4 + 5 contributions cancel
    b = np.zeros((40, 40))
    b[4, 3] = b[5, 3] = 1.0
    b[4, 10] = 2.0
    b[4, 33] = b[5, 33] = -1.0   # cancels in another block column
    a, b = sp.csr_array(dense), sp.csr_array(b)
    got, bitmap, _, _ = product(a, b, xp, monkeypatch)
    assert_same_csr(on_host(got), scipy_product(a, b))
    assert_identical(got, bitmap)
    kept, kept_bitmap, _, _ = product(a, b, xp, keep_zeros=True)
    assert kept.nnz > got.nnz
    assert_identical(kept, kept_bitmap)
    whole = sp.csr_array(np.array([[1.0, 1.0]])) @ sp.csr_array(np.array([[1.0], [-1.0]]))
    got, _, _, _ = product(sp.csr_array(np.array([[1.0, 1.0]])),
                           sp.csr_array(np.array([[1.0], [-1.0]])), xp)
    assert got.shape == whole.shape and got.nnz == 0 and arrays(got)[0].tolist() == [0, 0]


def test_csr_format_int64_indices(xp, monkeypatch):
    monkeypatch.setattr(_sputils, "INT32_LIMIT", 50)
    a = random_csr(90, 80, 0.1, seed=3)
    b = random_csr(80, 70, 0.1, seed=4)
    got, bitmap, _, _ = product(a, b, xp)
    if xp is np:  # cupyx's constructor narrows index arrays whose contents fit int32
        indptr, indices, _ = arrays(got)
        assert indices.dtype == np.int64 and indptr.dtype == np.int64
    assert_same_csr(on_host(got), scipy_product(a, b))
    assert_identical(got, bitmap)


def test_csr_format_wide_index_arithmetic(xp, monkeypatch):
    # the kernels' 64-bit index arithmetic (products past 2^31 values or
    # blocks) writes what the 32-bit one does
    a = random_csr(300, 200, 0.05, seed=12)
    b = random_csr(200, 250, 0.05, seed=13)
    _, narrow, _, _ = product(a, b, xp)
    monkeypatch.setattr(multiply, "index_type", lambda *sizes: np.dtype(np.int64))
    wide, wide_bitmap, _, _ = product(a, b, xp)
    assert_identical(wide, narrow)
    assert_identical(wide_bitmap, narrow)


@pytest.mark.parametrize("semiring", ["min_plus", "max_times", "or_and"])
def test_csr_format_semirings(semiring, xp):
    a = random_csr(60, 50, 0.15, seed=5)
    b = random_csr(50, 70, 0.15, seed=6)
    got, bitmap, _, _ = product(a, b, xp, semiring=semiring)
    assert_identical(got, bitmap)
    assert got.nnz == scipy_product(abs(a), abs(b)).nnz  # positive values: no cancellation


@pytest.mark.parametrize("complement", [False, True])
def test_csr_format_masked(complement, xp):
    a = random_csr(45, 40, 0.2, seed=7)
    b = random_csr(40, 50, 0.2, seed=8)
    mask = to_device(BitmapMatrix(random_csr(45, 50, 0.2, seed=99)), xp)
    got, bitmap, _, _ = product(a, b, xp, mask=mask, complement=complement)
    assert_identical(got, bitmap)


def test_csr_format_sliced_and_on_the_host(xp):
    a = random_csr(400, 400, 0.02, seed=11)
    budget, timings = 10**6, {}
    got, bitmap, _, _ = product(a, a, xp, max_memory=budget, timings=timings)
    assert timings["slices"] > 1
    assert_identical(got, bitmap)
    assert_same_csr(on_host(got), scipy_product(a, a))
    host = spgemm(to_device(BitmapMatrix(a), xp), to_device(BitmapMatrix(a), xp),
                  max_memory=budget, output="host", format="csr")
    assert isinstance(host, sp.csr_array)
    assert_identical(host, bitmap)


def test_csr_format_squares_a_csr_operand(xp):
    a = random_csr(120, 120, 0.05, seed=12)
    a_in = a
    if xp is not np:
        import cupyx.scipy.sparse as csp

        a_in = csp.csr_matrix(a)
    got = on_host(spgemm(a_in, a_in, format="csr"))
    assert_same_csr(on_host(got), scipy_product(a, a))


def test_unknown_format_is_a_value_error(xp):
    a = to_device(BitmapMatrix(random_csr(8, 8, 0.5, seed=1)), xp)
    with pytest.raises(ValueError, match="format must be 'bitmap' or 'csr', got 'coo'"):
        spgemm(a, a, format="coo")


@pytest.mark.gpu
def test_csr_format_of_a_dtype_cupyx_cannot_hold():
    a = BitmapMatrix(random_csr(16, 16, 0.3, seed=1, dtype="int64")).to_device()
    with pytest.raises(TypeError, match="cupyx.scipy.sparse does not support dtype int64"):
        spgemm(a, a, format="csr")
    host = spgemm(a, a, format="csr", output="host", max_memory=10**9)
    assert_same_csr(host, scipy_product(a.to_scipy(), a.to_scipy()))


@pytest.mark.gpu
@pytest.mark.parametrize("spgemm_path", ["tasks"], indirect=True)
@pytest.mark.parametrize("format", ["bitmap", "csr"])
@pytest.mark.parametrize("semiring", ["plus_times", "min_plus"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "complex64"])
@pytest.mark.parametrize("m,k,n,density", [
    (4000, 4000, 4000, 3e-4),   # blocks of one or two values: tiles of many chunks
    (600, 600, 600, 0.05),      # full blocks: a tile holds 32
    (1000, 700, 900, 0.01),
])
def test_tiles_give_the_bits_of_a_thread_per_value(m, k, n, density, dtype, semiring, format,
                                                   spgemm_path, monkeypatch):
    # multiply.by_tiles: the tiles kernels (bitmap and CSR order) against the
    # records kernels, which sum in the same order
    if semiring == "min_plus" and dtype == "complex64":
        pytest.skip("min_plus takes no complex values")
    if format == "csr" and dtype == "int64":
        pytest.skip("cupyx.scipy.sparse holds no int64")
    from tests.spgemm.test_stages import force_tiles, launched

    a = BitmapMatrix(random_csr(m, k, density, seed=1, dtype=dtype)).to_device()
    b = BitmapMatrix(random_csr(k, n, density, seed=2, dtype=dtype)).to_device()
    out = []
    for tiles in (False, True):
        force_tiles(monkeypatch, tiles)
        got, names = launched(monkeypatch, lambda: spgemm(a, b, semiring=semiring,
                                                          format=format))
        assert any("tiles" in name for name in names) == tiles, names
        out.append(got.get())
    by_values, by_tiles = out
    if format == "csr":
        for x, y in ((by_values.indptr, by_tiles.indptr), (by_values.indices, by_tiles.indices),
                     (by_values.data, by_tiles.data)):
            assert x.tobytes() == y.tobytes()
    else:
        for x, y in zip((by_values.keys, by_values.bitmaps, by_values.offsets, by_values.values),
                        (by_tiles.keys, by_tiles.bitmaps, by_tiles.offsets, by_tiles.values)):
            assert x.tobytes() == y.tobytes()
    if semiring == "plus_times":
        got = by_tiles if format == "csr" else by_tiles.to_scipy()
        assert_same_csr(sp.csr_array(got), scipy_product(a.get().to_scipy(), b.get().to_scipy()))
