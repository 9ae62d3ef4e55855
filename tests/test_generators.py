"""Generators: the WebBase-1M surrogate, the ESC Table 3 stencils and product_stats."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import _sputils, generators
from bmsparse.generators import (
    STRUCTURED,
    WEBBASE_1M,
    WEBBASE_1M_RTOL,
    poisson2d_5pt,
    poisson2d_9pt,
    poisson3d_7pt,
    poisson3d_27pt,
    product_stats,
    webbase_surrogate,
)


def assert_canonical_csr(a) -> None:
    """csr_array with strictly increasing column indices in every row."""
    assert isinstance(a, sp.csr_array)
    n_rows, n_cols = a.shape
    assert a.indptr[0] == 0 and a.indptr[-1] == a.nnz == a.indices.size == a.data.size
    assert np.all(np.diff(a.indptr) >= 0)
    assert a.indices.size == 0 or (a.indices.min() >= 0 and a.indices.max() < n_cols)
    row = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(a.indptr))
    assert np.all(np.diff(row * n_cols + a.indices) > 0)


# --- WebBase-1M surrogate ---------------------------------------------------

@pytest.mark.parametrize(
    ("scale", "n"),
    [(1e-7, 8), (1e-5, 10), (1e-4, 100), (0.001, 1000), (0.0123, 12_300)],
)
def test_surrogate_shape_and_format(scale, n):
    a = webbase_surrogate(scale)
    assert a.shape == (n, n)
    assert a.dtype == np.float64
    assert a.indices.dtype == a.indptr.dtype == np.int32
    assert_canonical_csr(a)
    assert np.all(a.diagonal() == 0)
    assert a.data.min() >= 0.5 and a.data.max() < 1.5


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_surrogate_dtype(dtype):
    assert webbase_surrogate(0.001, dtype=dtype).dtype == dtype


def test_surrogate_int64_indices(monkeypatch):
    monkeypatch.setattr(_sputils, "INT32_LIMIT", 100)
    a = webbase_surrogate(0.001)
    assert a.indices.dtype == a.indptr.dtype == np.int64
    assert_canonical_csr(a)


def test_surrogate_same_seed_same_matrix():
    a = webbase_surrogate(0.01, seed=7)
    b = webbase_surrogate(0.01, seed=7)
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data, b.data)


def test_surrogate_other_seed_other_matrix():
    a = webbase_surrogate(0.01, seed=7)
    b = webbase_surrogate(0.01, seed=8)
    assert a.shape == b.shape
    assert (a != b).nnz > 0.5 * a.nnz


def target_ratio(numerator: str, denominator: str) -> float:
    return WEBBASE_1M[numerator] / WEBBASE_1M[denominator]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("scale", [0.01, 0.05])
@pytest.mark.parametrize(
    ("numerator", "denominator", "rtol"),
    [
        ("nnz", "n_rows", 0.10),
        ("nnz", "blocks", 0.10),
        ("multiplies", "nnz", 0.20),
        ("multiplies", "nnz_product", 0.10),
    ],
)
def test_surrogate_ratios_scale_down(scale, seed, numerator, denominator, rtol):
    stats = product_stats(webbase_surrogate(scale, seed=seed))
    got = stats[numerator] / stats[denominator]
    assert got == pytest.approx(target_ratio(numerator, denominator), rel=rtol)


@pytest.mark.parametrize("scale", [1e-4, 0.001, 0.01])
def test_surrogate_blocks_are_dense(scale):
    stats = product_stats(webbase_surrogate(scale))
    assert 4.5 < stats["nnz_per_block"] < 7.5
    # in A @ A, few products land on the same entry, as in WebBase-1M
    assert 1.2 < stats["multiplies"] / stats["nnz_product"] < 1.5


@pytest.fixture(scope="module")
def full_surrogate_stats():
    return product_stats(webbase_surrogate(1.0))


@pytest.mark.parametrize("key", ["n_rows", "n_cols"])
def test_surrogate_full_size_exact(full_surrogate_stats, key):
    assert full_surrogate_stats[key] == WEBBASE_1M[key]


@pytest.mark.parametrize("key", sorted(WEBBASE_1M_RTOL))
def test_surrogate_full_size_matches_webbase(full_surrogate_stats, key):
    got = full_surrogate_stats[key]
    assert got == pytest.approx(WEBBASE_1M[key], rel=WEBBASE_1M_RTOL[key])


@pytest.mark.parametrize("scale", [0, -1.0, float("nan"), float("inf")])
def test_surrogate_rejects_scale(scale):
    message = f"scale must be positive and finite, got {float(scale)}"
    with pytest.raises(ValueError, match=message):
        webbase_surrogate(scale)


@pytest.mark.parametrize("scale", [1e5, 1e300])
def test_surrogate_rejects_a_scale_past_the_row_limit(scale):
    # NumPy's "Maximum allowed size exceeded" (or an attempt to allocate
    # terabytes) before: the message did not name the scale
    with pytest.raises(ValueError, match=r"scale must give at most \d+ rows .*got scale="):
        webbase_surrogate(scale)


@pytest.mark.parametrize(
    ("dtype", "name"), [(np.int64, "int64"), (bool, "bool"), (np.complex128, "complex128"),
                        # float16 rounded values up to 1.5, outside [0.5, 1.5)
                        (np.float16, "float16"), (np.longdouble, np.dtype(np.longdouble).name)]
)
def test_surrogate_rejects_dtype(dtype, name):
    with pytest.raises(TypeError, match=f"dtype must be float32 or float64, got {name}"):
        webbase_surrogate(0.001, dtype=dtype)


@pytest.mark.parametrize("scale", [True, "0.001", None])
def test_surrogate_rejects_a_scale_not_a_number(scale):
    # True built the full 1,000,005-row matrix, "0.001" a small one
    with pytest.raises(TypeError, match="scale must be a real number, got "):
        webbase_surrogate(scale)


# --- ESC Table 3 stencils ---------------------------------------------------

def brute_stencil(grid: tuple[int, ...], norm: int, diagonal: float) -> np.ndarray:
    """Dense Laplacian from pairwise grid distances; x varies fastest."""
    n = int(np.prod(grid))
    coords = np.array(np.unravel_index(np.arange(n), grid[::-1])[::-1])
    delta = coords[:, None, :] - coords[:, :, None]
    near = (np.abs(delta) <= 1).all(axis=0) & (np.count_nonzero(delta, axis=0) <= norm)
    return np.where(np.eye(n, dtype=bool), diagonal, np.where(near, -1.0, 0.0))


STENCILS = {
    "2d-5pt": (poisson2d_5pt, 1, 4.0, lambda x, y: 5 * x * y - 2 * x - 2 * y),
    "2d-9pt": (poisson2d_9pt, 2, 8.0, lambda x, y: (3 * x - 2) * (3 * y - 2)),
    "3d-7pt": (poisson3d_7pt, 1, 6.0, lambda x, y, z: 7 * x * y * z - 2 * (x * y + y * z + z * x)),
    "3d-27pt": (poisson3d_27pt, 3, 26.0, lambda x, y, z: (3 * x - 2) * (3 * y - 2) * (3 * z - 2)),
}
SMALL_GRIDS = {
    2: [(1, 1), (1, 5), (5, 1), (4, 7), (8, 8), (9, 3)],
    3: [(1, 1, 1), (2, 3, 4), (5, 4, 3), (1, 6, 1), (4, 4, 4)],
}
SMALL_CASES = [
    pytest.param(name, grid, id=f"{name}-{'x'.join(map(str, grid))}")
    for name in STENCILS
    for grid in SMALL_GRIDS[int(name[0])]
]


@pytest.mark.parametrize(("name", "grid"), SMALL_CASES)
def test_stencil_small_matches_brute_force(name, grid):
    func, norm, diagonal, nnz_formula = STENCILS[name]
    a = func(*grid)
    assert_canonical_csr(a)
    np.testing.assert_array_equal(a.toarray(), brute_stencil(grid, norm, diagonal))
    assert a.nnz == nnz_formula(*grid)


@pytest.mark.parametrize(
    ("name", "n", "nnz"),
    [
        ("2d-5pt", 1_048_576, 5_238_784),
        ("2d-9pt", 1_048_576, 9_424_900),
        ("3d-7pt", 1_030_301, 7_150_901),
        ("3d-27pt", 1_030_301, 27_270_901),
    ],
)
def test_stencil_full_size(name, n, nnz):
    a = STRUCTURED[name]()
    assert a.shape == (n, n)
    assert a.nnz == nnz
    assert a.indices.dtype == np.int32
    assert_canonical_csr(a)
    diagonal = STENCILS[name][2]
    np.testing.assert_array_equal(a.diagonal(), diagonal)
    assert np.count_nonzero(a.data == -1) == nnz - n


def test_structured_names_ESC_table_3():
    assert list(STRUCTURED) == ["2d-5pt", "2d-9pt", "3d-7pt", "3d-27pt"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("name", list(STENCILS))
def test_stencil_dtype(name, dtype):
    a = STENCILS[name][0](3, dtype=dtype)
    assert a.dtype == dtype
    assert a.diagonal()[4] == STENCILS[name][2]


def test_stencil_int64_indices(monkeypatch):
    monkeypatch.setattr(_sputils, "INT32_LIMIT", 10)
    a = poisson3d_27pt(3)
    assert a.indices.dtype == a.indptr.dtype == np.int64
    np.testing.assert_array_equal(a.toarray(), brute_stencil((3, 3, 3), 3, 26.0))


def test_stencil_rectangular_grid_defaults_to_nx():
    assert poisson3d_7pt(4, 3).shape == (48, 48)
    assert poisson2d_9pt(5).shape == (25, 25)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: poisson2d_5pt(0), ValueError, "nx must be positive, got 0"),
        (lambda: poisson2d_9pt(4, -2), ValueError, "ny must be positive, got -2"),
        (lambda: poisson3d_7pt(3, 3, 0), ValueError, "nz must be positive, got 0"),
        (lambda: poisson3d_27pt(2.5), TypeError, "nx must be an integer, got float"),
        (lambda: poisson2d_5pt(4, True), TypeError, "ny must be an integer, got bool"),
        (lambda: poisson2d_9pt(None), TypeError, "nx must be an integer, got NoneType"),
        # 2^64 points wrapped round to an empty matrix in int64
        # (named as the grid: the shape (n, 1) named before was none the user gave)
        (lambda: poisson3d_7pt(2**22, 2**21, 2**21), ValueError,
         "the grid 4194304x2097152x2097152 has 18,446,744,073,709,551,616 points, more than"),
        (lambda: poisson2d_5pt(4, dtype=np.uint8), TypeError, "dtype uint8 is not supported"),
        (lambda: poisson3d_27pt(2, dtype=bool), TypeError, "bool cannot hold the stencil's -1"),
        (lambda: poisson2d_9pt(2, dtype=str), TypeError, "dtype str is not supported"),
    ],
    ids=["nx-zero", "ny-negative", "nz-zero", "nx-float", "ny-bool", "nx-none", "overflow",
         "unsigned", "bool", "str"],
)
def test_stencil_rejects_grid(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --- product_stats ----------------------------------------------------------

def brute_stats(dense: np.ndarray, block_size: int) -> dict:
    """The statistics from a dense boolean pattern by direct counting."""
    pattern = dense.astype(bool)
    rows, cols = np.nonzero(pattern)
    blocks = len({(i // block_size, j // block_size) for i, j in zip(rows, cols)})
    stats = {
        "n_rows": pattern.shape[0],
        "n_cols": pattern.shape[1],
        "nnz": len(rows),
        "max_row_nnz": int(pattern.sum(axis=1).max(initial=0)),
        "blocks": blocks,
        "nnz_per_block": len(rows) / blocks if blocks else 0.0,
        "multiplies": None,
        "nnz_product": None,
    }
    if pattern.shape[0] == pattern.shape[1]:
        # paths i -> k -> j, counted one by one
        counts = pattern.astype(np.int64) @ pattern.astype(np.int64)
        stats["multiplies"] = int(counts.sum())
        stats["nnz_product"] = int(np.count_nonzero(counts))
    return stats


@pytest.mark.parametrize("block_size", [8, 3])
@pytest.mark.parametrize(
    ("shape", "density", "seed"),
    [
        ((0, 0), 0.0, 0),
        ((1, 1), 1.0, 0),
        ((8, 8), 0.0, 0),
        ((16, 16), 1.0, 0),
        ((37, 37), 0.1, 1),
        ((64, 64), 0.3, 2),
        ((100, 100), 0.02, 3),
        ((20, 33), 0.2, 4),
        ((33, 20), 0.2, 5),
    ],
)
def test_product_stats_matches_brute_force(shape, density, seed, block_size):
    a = sp.random_array(shape, density=density, format="csr", rng=np.random.default_rng(seed))
    assert product_stats(a, block_size=block_size) == brute_stats(a.toarray() != 0, block_size)


def test_product_stats_counts_pattern_not_values():
    # duplicates are summed, explicit zeros count, and values cancel in a @ a
    row = np.array([0, 0, 1, 1, 2, 9, 9])
    col = np.array([1, 1, 0, 2, 2, 9, 3])
    val = np.array([1.0, 1.0, 1.0, -1.0, 0.0, 2.0, 5.0])
    a = sp.coo_array((val, (row, col)), shape=(10, 10))
    pattern = np.zeros((10, 10), dtype=bool)
    pattern[row, col] = True
    assert product_stats(a) == brute_stats(pattern, 8)


@pytest.mark.parametrize("fmt", ["coo", "csc", "lil", "csr_matrix"])
def test_product_stats_any_format(fmt):
    a = sp.random_array((30, 30), density=0.1, format="csr", rng=np.random.default_rng(6))
    b = sp.csr_matrix(a) if fmt == "csr_matrix" else a.asformat(fmt)
    assert product_stats(b) == product_stats(a)


@pytest.mark.parametrize("chunk", [1, 7, 100])
def test_product_stats_chunks(monkeypatch, chunk):
    a = sp.random_array((50, 50), density=0.08, format="csr", rng=np.random.default_rng(7))
    monkeypatch.setattr(generators, "PRODUCT_CHUNK_MULTIPLIES", chunk)
    assert product_stats(a)["nnz_product"] == brute_stats(a.toarray() != 0, 8)["nnz_product"]


def test_product_stats_leaves_input_alone():
    a = sp.csr_array((np.ones(3), np.array([2, 0, 2]), np.array([0, 3, 3])), shape=(2, 3))
    before = a.indices.copy()
    assert product_stats(a)["nnz"] == 2
    np.testing.assert_array_equal(a.indices, before)


@pytest.mark.parametrize(
    ("a", "kwargs", "error", "message"),
    [
        (np.eye(3), {}, TypeError, "a must be a scipy sparse array or matrix, got ndarray"),
        (sp.coo_array(np.ones(5)), {}, ValueError, r"a must be 2-D, got shape \(5,\)"),
        (sp.eye_array(3), {"block_size": 0}, ValueError, "block_size must be positive, got 0"),
        (sp.eye_array(3), {"block_size": 2.5}, TypeError,
         "block_size must be an integer, got float"),
    ],
    ids=["dense", "1-d", "block-size", "block-size-float"],
)
def test_product_stats_rejects(a, kwargs, error, message):
    with pytest.raises(error, match=message):
        product_stats(a, **kwargs)
