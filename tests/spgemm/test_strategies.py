"""Every strategy of spgemm, forced (``spgemm.strategy`` patched, so that the
host runs each one's NumPy twins too), against a brute-force dense
reference that tracks structure, against scipy, and against each other bit
for bit (every entry is summed in one fixed order, whatever the path)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix, spgemm
from bmsparse._sputils import CUPYX_DTYPES
from tests.cases import host
from tests.helpers import RTOL, cancelling, to_device

_spgemm_module = importlib.import_module("bmsparse.spgemm")

PATHS = ("tasks", "lean", "scalar", "dense", "merge")


def forced(monkeypatch, path, a, b, **kw):
    """``spgemm(a, b, **kw)`` with the strategy ``path`` whatever the thresholds say."""
    with monkeypatch.context() as m:
        m.setattr(_spgemm_module, "strategy", lambda x, y: path)
        return spgemm(a, b, **kw)


def csr_of(c) -> sp.csr_array:
    """C (a BitmapMatrix, a scipy or a cupyx CSR) as a canonical scipy CSR on the host."""
    if isinstance(c, BitmapMatrix):
        c = c.to_scipy()  # (any dtype: cupyx's CSR holds no int32)
    c = sp.csr_array((host(c.data), host(c.indices), host(c.indptr)), shape=c.shape)
    assert c.has_canonical_format
    return c


def operand(m, n, density, rng, dtype, kind="random"):
    """(scipy CSR, structure): values away from zero, some entries stored zeros
    when ``kind`` is "zeros"; "hub row", "hub column", "diagonal", "dense"
    shape the structure."""
    structure = rng.random((m, n)) < density
    if kind == "hub row" and m:
        structure[m // 2] = True
    elif kind == "hub column" and n:
        structure[:, n // 3] = True
    elif kind == "diagonal":
        structure = np.eye(m, n, dtype=bool)
    elif kind == "dense":
        structure[:] = True
    values = rng.integers(1, 4, (m, n)) * rng.choice([-1, 1], (m, n))
    if kind == "zeros":
        values[rng.random((m, n)) < 0.3] = 0
    if np.dtype(dtype).kind in "fc":  # inexact sums: their order shows in the bits
        values = values * rng.uniform(0.5, 1.5, (m, n))
    values = values.astype(dtype)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * values[::-1, ::-1].astype(dtype) if m and n else values
    rows, cols = np.nonzero(structure)
    return sp.csr_array((values[rows, cols], (rows, cols)), shape=(m, n)), structure


def brute(a_csr, a_st, b_csr, b_st, semiring, dtype, keep_zeros=False):
    """C's structure and dense values, term by term: an entry exists where
    some j meets; plus_times (unless ``keep_zeros``) drops exact zeros."""
    struct = (a_st.astype(np.int64) @ b_st.astype(np.int64)) > 0
    if semiring in ("lor_land", "any_pair"):
        return struct, None
    if semiring == "plus_pair":
        return struct, (a_st.astype(np.int64) @ b_st.astype(np.int64)).astype(dtype)
    a, b = a_csr.toarray().astype(dtype), b_csr.toarray().astype(dtype)
    values = np.zeros(struct.shape, dtype)
    with np.errstate(all="ignore"):
        for i, k in zip(*np.nonzero(struct)):
            js = np.flatnonzero(a_st[i] & b_st[:, k])
            if semiring == "plus_times":
                values[i, k] = (a[i, js] * b[js, k]).sum()
            elif semiring == "min_plus":
                values[i, k] = (a[i, js] + b[js, k]).min()
            elif semiring == "max_plus":
                values[i, k] = (a[i, js] + b[js, k]).max()
            else:  # max_times
                values[i, k] = (a[i, js] * b[js, k]).max()
    if semiring == "plus_times" and not keep_zeros:
        struct &= values != 0
    return struct, values


def assert_matches(c, struct, values, dtype):
    c = csr_of(c)
    assert c.dtype == np.dtype(dtype), (c.dtype, dtype)
    got = np.zeros(struct.shape, bool)
    coo = c.tocoo()
    got[coo.row, coo.col] = True
    assert coo.nnz == struct.sum()
    np.testing.assert_array_equal(got, struct)
    if values is None:
        return
    dense = np.zeros(struct.shape, c.dtype)
    dense[coo.row, coo.col] = coo.data
    tol = RTOL.get(np.dtype(dtype), 1e-12) if np.dtype(dtype).kind in "fc" else 0
    np.testing.assert_allclose(dense[struct], values[struct], rtol=tol, atol=tol * 16)


def bits(c) -> tuple[bytes, ...]:
    """C's arrays as bytes, NaNs made one NaN: the sign and payload of a NaN
    made from infinities differ between the host and the GPU (x86 makes
    -nan, CUDA +nan) and carry no meaning."""
    c = csr_of(c)
    data = c.data.copy()
    if data.dtype.kind == "c":
        data.real[np.isnan(data.real)] = np.nan
        data.imag[np.isnan(data.imag)] = np.nan
    elif data.dtype.kind == "f":
        data[np.isnan(data)] = np.nan
    return (c.indptr.astype(np.int64).tobytes(), c.indices.astype(np.int64).tobytes(),
            data.tobytes())


def _result_dtype(a, b, kw) -> np.dtype:
    """C's dtype, as spgemm decides it."""
    semiring = _spgemm_module.get_semiring(kw.get("semiring", "plus_times"))
    return _spgemm_module._result_type(semiring, a.dtype, b.dtype, kw.get("dtype"))[1]


def all_paths(monkeypatch, a, b, **kw):
    """C by every strategy, in bitmap and in CSR form, and sliced (a bound
    that takes several slices where A has several block rows)."""
    out = {}
    # (cupyx holds no int32 or bool CSR: format="csr" refuses them on the GPU)
    csr = not a.on_device or _result_dtype(a, b, kw) in CUPYX_DTYPES
    for path in PATHS:
        out[path] = forced(monkeypatch, path, a, b, **kw)
        if csr:
            out[path + " csr"] = forced(monkeypatch, path, a, b, format="csr", **kw)
    for budget in (1 << 12, 1 << 15):
        try:
            out[f"sliced {budget}"] = spgemm(a, b, max_memory=budget, **kw)
        except MemoryError:  # one block row alone over the bound
            pass
    return out


SHAPES = [(0, 0, 0), (0, 5, 3), (6, 0, 4), (5, 3, 0), (1, 17, 20), (20, 1, 17), (9, 13, 1),
          (8, 8, 8), (23, 37, 29)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("semiring,dtype", [
    ("plus_times", np.float64), ("plus_times", np.int32), ("plus_times", np.complex64),
    ("min_plus", np.float32), ("max_plus", np.int64), ("max_times", np.float64),
    ("plus_pair", np.int64), ("lor_land", np.float64), ("any_pair", np.int32)])
def test_every_strategy_every_semiring(shape, semiring, dtype, xp, monkeypatch):
    m, k, n = shape
    rng = np.random.default_rng(sum(shape) + len(semiring))
    kind = ("hub row", "hub column", "zeros", "random")[sum(shape) % 4]
    a_csr, a_st = operand(m, k, 0.3, rng, dtype, kind)
    b_csr, b_st = operand(k, n, 0.3, rng, dtype, "hub column" if kind == "hub row" else kind)
    out_dtype = {"plus_pair": np.int64, "lor_land": np.bool_, "any_pair": np.bool_}.get(
        semiring, dtype)
    struct, values = brute(a_csr, a_st, b_csr, b_st, semiring, out_dtype)
    a, b = to_device(BitmapMatrix(a_csr), xp), to_device(BitmapMatrix(b_csr), xp)
    out = all_paths(monkeypatch, a, b, semiring=semiring)
    want = bits(out["tasks"])
    for name, c in out.items():
        assert_matches(c, struct, values, out_dtype)
        assert bits(c) == want, name


@pytest.mark.parametrize("kind", ["hub row", "diagonal", "dense", "zeros"])
@pytest.mark.parametrize("a_dtype,b_dtype", [
    (np.bool_, np.bool_), (np.bool_, np.int32), (np.int32, np.float32), (np.int64, np.float32),
    (np.float32, np.complex64), (np.float64, np.complex64), (np.int32, np.complex128),
    (np.bool_, np.complex64)])
def test_mixed_dtypes_every_strategy(kind, a_dtype, b_dtype, xp, monkeypatch):
    rng = np.random.default_rng(len(kind))
    a_csr, a_st = operand(19, 26, 0.25, rng, a_dtype, kind if kind != "dense" else "random")
    b_csr, b_st = operand(26, 23, 0.25, rng, b_dtype, kind)
    dtype = np.result_type(a_dtype, b_dtype)
    if dtype == np.bool_:  # the Boolean product: stored False entries do not count
        a_st, b_st = a_st & (a_csr.toarray() != 0), b_st & (b_csr.toarray() != 0)
        struct, values = brute(a_csr, a_st, b_csr, b_st, "lor_land", dtype)
    else:
        struct, values = brute(a_csr, a_st, b_csr, b_st, "plus_times", dtype)
    a, b = to_device(BitmapMatrix(a_csr), xp), to_device(BitmapMatrix(b_csr), xp)
    out = all_paths(monkeypatch, a, b)
    want = bits(out["tasks"])
    for name, c in out.items():
        assert_matches(c, struct, values, dtype)
        assert bits(c) == want, name


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("keep_zeros", [False, True])
def test_cancellation_every_strategy(dtype, keep_zeros, xp, monkeypatch):
    c_csr = cancelling(40, seed=3).astype(dtype)
    st = np.zeros(c_csr.shape, bool)
    st[c_csr.tocoo().row, c_csr.tocoo().col] = True
    struct, values = brute(c_csr, st, c_csr, st, "plus_times", dtype, keep_zeros)
    a = to_device(BitmapMatrix(c_csr), xp)
    out = all_paths(monkeypatch, a, a, keep_zeros=keep_zeros)
    want = bits(out["tasks"])
    scipy_c = sp.csr_array(c_csr @ c_csr)
    scipy_c.eliminate_zeros()
    for name, c in out.items():
        assert_matches(c, struct, values, dtype)
        assert bits(c) == want, name
        if not keep_zeros:
            assert csr_of(c).nnz == scipy_c.nnz


@pytest.mark.parametrize("semiring", ["plus_times", "min_plus", "max_plus", "max_times"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_nan_and_inf_every_strategy(semiring, dtype, xp, monkeypatch):
    if semiring != "plus_times" and np.dtype(dtype).kind == "c":
        pytest.skip("no ordering of complex values")
    rng = np.random.default_rng(7)
    a_csr, a_st = operand(18, 25, 0.35, rng, dtype)
    b_csr, b_st = operand(25, 22, 0.35, rng, dtype)
    a_csr.data[rng.random(a_csr.nnz) < 0.1] = np.nan
    b_csr.data[rng.random(b_csr.nnz) < 0.1] = np.inf
    b_csr.data[rng.random(b_csr.nnz) < 0.1] = -np.inf
    struct, values = brute(a_csr, a_st, b_csr, b_st, semiring, dtype)
    a, b = to_device(BitmapMatrix(a_csr), xp), to_device(BitmapMatrix(b_csr), xp)
    out = all_paths(monkeypatch, a, b, semiring=semiring)
    want = bits(out["tasks"])
    for name, c in out.items():
        got = csr_of(c)
        coo = got.tocoo()
        found = np.zeros(struct.shape, bool)
        found[coo.row, coo.col] = True
        np.testing.assert_array_equal(found, struct)
        dense = np.zeros(struct.shape, dtype)
        dense[coo.row, coo.col] = coo.data
        np.testing.assert_allclose(dense[struct], values[struct], rtol=1e-5, equal_nan=True)
        assert bits(c) == want, name
    if semiring == "plus_times":
        with np.errstate(all="ignore"):
            scipy_c = sp.csr_array(a_csr @ b_csr)
        scipy_c.eliminate_zeros()
        assert csr_of(out["tasks"]).nnz == scipy_c.nnz


@pytest.mark.parametrize("complement", [False, True])
@pytest.mark.parametrize("mask_density", [0.0, 0.2, 1.0])
@pytest.mark.parametrize("semiring,dtype", [
    ("plus_times", np.float64), ("min_plus", np.int32), ("plus_pair", np.int64),
    ("lor_land", np.float32)])
def test_masks_sliced_and_on_the_host(complement, mask_density, semiring, dtype, xp):
    rng = np.random.default_rng(int(10 * mask_density) + complement)
    a_csr, a_st = operand(45, 30, 0.2, rng, dtype, "hub row")
    b_csr, b_st = operand(30, 37, 0.2, rng, dtype, "hub column")
    m_csr, m_st = operand(45, 37, mask_density, rng, np.float64, "zeros")
    out_dtype = {"plus_pair": np.int64, "lor_land": np.bool_}.get(semiring, dtype)
    struct, values = brute(a_csr, a_st, b_csr, b_st, semiring, out_dtype)
    struct &= ~m_st if complement else m_st
    a, b = to_device(BitmapMatrix(a_csr), xp), to_device(BitmapMatrix(b_csr), xp)
    mask = to_device(BitmapMatrix(m_csr), xp)
    kw = dict(semiring=semiring, mask=mask, complement=complement)
    results = [spgemm(a, b, **kw)]
    if xp is np or _result_dtype(a, b, kw) in CUPYX_DTYPES:  # (as all_paths)
        results.append(spgemm(a, b, format="csr", **kw))
    for budget in (1 << 12, 1 << 14):
        for output in ("device", "host"):
            timings = {}
            try:
                results.append(spgemm(a, b, max_memory=budget, output=output,
                                      timings=timings, **kw))
            except MemoryError:
                continue
    want = bits(results[0])
    for c in results:
        assert_matches(c, struct, values, out_dtype)
        assert bits(c) == want


@pytest.mark.parametrize("dims", [(5, 13, 1, 22, 9), (17, 3, 30, 1, 11), (9, 16, 9, 8, 3)])
def test_rectangular_chains_every_strategy(dims, xp, monkeypatch):
    rng = np.random.default_rng(sum(dims))
    mats = [operand(dims[i], dims[i + 1], 0.4, rng, np.float64)[0] for i in range(len(dims) - 1)]
    want = mats[0]
    for mat in mats[1:]:
        want = sp.csr_array(want @ mat)
    want.eliminate_zeros()
    want.sort_indices()
    for path in PATHS:
        got = to_device(BitmapMatrix(mats[0]), xp)
        for mat in mats[1:]:
            got = forced(monkeypatch, path, got, to_device(BitmapMatrix(mat), xp))
        got = csr_of(got)
        assert got.shape == want.shape and got.nnz == want.nnz
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_allclose(got.data, want.data, rtol=1e-12)
