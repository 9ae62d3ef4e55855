"""bmsparse.graph against scipy.sparse.csgraph and NumPy references.

Random graphs cover directed and undirected ones, self-loops, isolated
vertices, explicitly stored zeros and sizes that are not multiples of 8;
corpus graphs (``matrices_dir()``) are the small square ones. Every test body
runs on the host and, through the ``xp`` fixture, on the GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from bmsparse import BitmapMatrix, graph
from bmsparse._readers import matrix_files, read_matrix

from .conftest import matrices_dir
from .helpers import to_device

# --- graphs ------------------------------------------------------------------------------


def random_graph(n: int, density: float, seed: int, *, directed: bool = True,
                 loops: bool = False, isolated: int = 0, zeros: bool = False) -> sp.csr_array:
    """Random weighted graph, weights in [0.5, 1.5).

    ``isolated`` vertices (chosen at random) have no edge at all; ``zeros``
    stores a tenth of the weights as explicit zeros (edges of weight 0).
    """
    rng = np.random.default_rng(seed)
    nnz = int(round(density * n * n))
    rows, cols = rng.integers(0, max(n, 1), nnz), rng.integers(0, max(n, 1), nnz)
    if not directed:
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    if not loops:
        rows, cols = rows[rows != cols], cols[rows != cols]
    if isolated:
        lonely = rng.choice(n, size=min(isolated, n), replace=False)
        keep = ~(np.isin(rows, lonely) | np.isin(cols, lonely))
        rows, cols = rows[keep], cols[keep]
    a = sp.coo_array((np.ones(rows.shape[0]), (rows, cols)), shape=(n, n)).tocsr()
    a.sum_duplicates()
    weights = rng.uniform(0.5, 1.5, a.nnz)
    if not directed:  # the same weight both ways
        upper = sp.triu(sp.csr_array((weights, a.indices, a.indptr), shape=(n, n)), format="csr")
        a = sp.csr_array(upper + sp.triu(upper, k=1).T)
        a.sum_duplicates()
        a.sort_indices()
        weights = a.data
    if zeros:
        weights = np.where(rng.random(weights.shape[0]) < 0.1, 0.0, weights)
    return sp.csr_array((weights, a.indices.copy(), a.indptr.copy()), shape=(n, n))


#: (n, density, directed, loops, isolated, zeros)
GRAPHS = {
    "1-vertex": (1, 0.0, True, False, 0, False),
    "1-vertex-loop": (1, 1.0, True, True, 0, False),
    "7-directed": (7, 0.3, True, False, 0, False),
    "8-undirected-full": (8, 1.0, False, True, 0, False),
    "13-undirected-loops": (13, 0.25, False, True, 2, False),
    "37-directed-loops-isolated": (37, 0.08, True, True, 5, False),
    "64-directed-zeros": (64, 0.05, True, False, 0, True),
    "100-undirected-sparse": (100, 0.012, False, False, 10, False),
    "203-directed": (203, 0.02, True, True, 7, True),
    "203-undirected": (203, 0.03, False, False, 0, False),
}


@pytest.fixture(params=list(GRAPHS))
def case(request) -> sp.csr_array:
    n, density, directed, loops, isolated, zeros = GRAPHS[request.param]
    return random_graph(n, density, seed=sum(map(ord, request.param)), directed=directed,
                        loops=loops, isolated=isolated, zeros=zeros)


def ours(a: sp.csr_array, xp) -> BitmapMatrix:
    return to_device(BitmapMatrix(a), xp)


def host(x):
    return x if isinstance(x, np.ndarray) else x.get()


def pattern(a: sp.csr_array) -> sp.csr_array:
    """The structure of ``a`` with ones (explicit zeros become edges too)."""
    return sp.csr_array((np.ones(a.nnz), a.indices, a.indptr), shape=a.shape)


FOLDER = matrices_dir()
FILES = matrix_files(FOLDER) if FOLDER is not None else []
#: triangle counts whose L @ L takes more multiplies run on the GPU only (the NumPy
#: twins need about 0.5 s per million on the sparse-block graphs)
CPU_TRIANGLE_MULTIPLIES = 12_000_000


@pytest.fixture(scope="module", params=[name for name, _ in FILES] or
                [pytest.param("none", marks=pytest.mark.skip(reason="no matrix corpus"))])
def corpus_graph(request) -> sp.csr_array:
    a = read_matrix(dict(FILES)[request.param])
    if a.shape[0] != a.shape[1]:
        pytest.skip(f"{request.param} is not square")
    return a


# --- references ------------------------------------------------------------------------


def ref_triangles(a: sp.csr_array) -> int:
    s = pattern(a)
    s = ((s + s.T) != 0).astype(np.int64)
    s.setdiag(0)
    s.eliminate_zeros()
    # trace(S^3) / 6, summed over the entries of S^2 under S
    return int((s @ s).multiply(s).sum()) // 6


def ref_bfs(a: sp.csr_array, source: int) -> np.ndarray:
    d = csgraph.shortest_path(pattern(a), unweighted=True, directed=True, indices=source)
    return np.where(np.isinf(d), -1, d).astype(np.int64)


def ref_pagerank(a: sp.csr_array, damping: float = 0.85, tol: float = 1e-6,
                 max_iter: int = 100) -> np.ndarray:
    """networkx.pagerank's power iteration, with scipy's product."""
    n = a.shape[0]
    m = pattern(a)
    out = np.asarray(m.sum(axis=1)).ravel()
    w = sp.csr_array(sp.diags_array(np.divide(1.0, out, out=np.zeros(n), where=out > 0)) @ m)
    dangling = out == 0
    x = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        last = x
        x = damping * (w.T @ x + last[dangling].sum() / n) + (1 - damping) / n
        if np.abs(x - last).sum() < n * tol:
            return x
    raise AssertionError("the reference did not converge")


def same_partition(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal up to relabelling: the pairs (got, want) form a bijection."""
    pairs = np.unique(np.stack([got, want]), axis=1)
    return pairs.shape[1] == np.unique(got).size == np.unique(want).size


# --- block helpers -----------------------------------------------------------------------


def test_symmetric(xp, case):
    got = graph._symmetric(ours(case, xp))
    got.check_format(full_check=True)
    dense = pattern(case).toarray() != 0
    np.testing.assert_array_equal(got.get().toarray(), dense | dense.T)
    assert got.nnz == (dense | dense.T).sum()


@pytest.mark.parametrize("n", [0, 1, 8, 13])
def test_dense_row(xp, n):
    keys, bitmaps, offsets = graph._dense_row(xp, n)
    row = BitmapMatrix.from_blocks(keys, bitmaps, xp.arange(n, dtype=xp.float64), (1, n))
    np.testing.assert_array_equal(row.get().toarray(), np.arange(n, dtype=float)[None, :])
    np.testing.assert_array_equal(host(offsets), host(row.offsets))


# --- triangle_count -------------------------------------------------------------------------


def test_triangle_count(xp, case):
    assert graph.triangle_count(ours(case, xp)) == ref_triangles(case)


def test_triangle_count_of_complete_graph(xp):
    # K_13 has C(13, 3) triangles; its blocks cross the 8 x 8 grid
    a = np.ones((13, 13)) - np.eye(13)
    assert graph.triangle_count(ours(sp.csr_array(a), xp)) == 286


def test_triangle_count_ignores_direction_and_loops(xp):
    # 0 -> 1 -> 2 -> 0 and a self-loop on 1: one triangle
    a = sp.csr_array(np.array([[0, 1, 0], [0, 1, 1], [1, 0, 0]], dtype=float))
    assert graph.triangle_count(ours(a, xp)) == 1


def test_triangle_count_accepts_scipy_and_dense():
    a = random_graph(30, 0.2, seed=3, directed=False)
    want = ref_triangles(a)
    assert graph.triangle_count(a) == want
    assert graph.triangle_count(a.toarray()) == want
    assert graph.triangle_count(BitmapMatrix(a).astype(bool)) == want


def test_triangle_count_empty(xp):
    assert graph.triangle_count(ours(sp.csr_array((0, 0)), xp)) == 0


# --- BFS ----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_bfs_levels(xp, case, where):
    n = case.shape[0]
    source = {"first": 0, "middle": n // 2, "last": n - 1}[where]
    got = graph.bfs_levels(ours(case, xp), source)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(host(got), ref_bfs(case, source))


def test_multi_source_bfs(xp, case):
    n = case.shape[0]
    sources = np.unique(np.array([0, n // 3, n - 1, n // 2]))
    sources = np.concatenate([sources, sources[:1]])  # a repeated source
    got = host(graph.multi_source_bfs(ours(case, xp), xp.asarray(sources)))
    assert got.shape == (sources.size, n)
    for q, s in enumerate(sources):
        np.testing.assert_array_equal(got[q], ref_bfs(case, int(s)))


def test_multi_source_bfs_no_sources(xp):
    a = ours(random_graph(10, 0.2, seed=1), xp)
    got = graph.multi_source_bfs(a, [])
    assert got.shape == (0, 10)


def test_bfs_long_path(xp):
    # a path 0 -> 1 -> ... -> 99: one level per vertex
    n = 100
    a = sp.csr_array((np.ones(n - 1), (np.arange(n - 1), np.arange(1, n))), shape=(n, n))
    np.testing.assert_array_equal(host(graph.bfs_levels(ours(a, xp), 0)), np.arange(n))
    np.testing.assert_array_equal(host(graph.bfs_levels(ours(a, xp), 50)),
                                  np.r_[np.full(50, -1), np.arange(50)])


# --- SSSP ----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["first", "last"])
def test_sssp(xp, case, where):
    source = 0 if where == "first" else case.shape[0] - 1
    got = graph.sssp(ours(case, xp), source)
    assert got.dtype == np.float64
    want = csgraph.dijkstra(case, directed=True, indices=source)
    np.testing.assert_allclose(host(got), want, rtol=1e-12)


def test_sssp_negative_weights(xp):
    # a DAG (edges to higher ids only) with negative weights: no negative cycle
    a = random_graph(60, 0.1, seed=4)
    a = sp.csr_array(sp.triu(a, k=1))
    a.data -= 1.0
    want = csgraph.bellman_ford(a, directed=True, indices=0)
    np.testing.assert_allclose(host(graph.sssp(ours(a, xp), 0)), want, rtol=1e-12)


def test_sssp_pattern_has_unit_weights(xp, case):
    got = graph.sssp(ours(case, xp).astype(bool), 0)
    nonzero = case.copy()
    nonzero.eliminate_zeros()  # astype(bool) drops stored zeros, as scipy does
    want = ref_bfs(nonzero, 0).astype(float)
    np.testing.assert_array_equal(host(got), np.where(want < 0, np.inf, want))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32])
def test_sssp_weight_dtypes(xp, dtype):
    a = random_graph(40, 0.1, seed=5)
    a.data = np.round(a.data * 4)
    a = sp.csr_array(a.astype(dtype))
    want = csgraph.dijkstra(a.astype(np.float64), directed=True, indices=3)
    np.testing.assert_allclose(host(graph.sssp(ours(a, xp), 3)), want, rtol=1e-6)


def test_sssp_negative_cycle(xp):
    # 0 -> 1 -> 2 -> 1 with weight -1 on the way back: a cycle of length -0.5
    a = sp.csr_array(np.array([[0, 1.0, 0], [0, 0, 0.5], [0, -1.0, 0]]))
    with pytest.raises(ValueError, match="negative length reachable from source 0"):
        graph.sssp(ours(a, xp), 0)
    # unreachable from 2's side? 2 reaches it too; from a lone vertex it is not seen
    lone = sp.csr_array(sp.block_diag([a, sp.csr_array((1, 1))]))
    np.testing.assert_array_equal(host(graph.sssp(ours(lone, xp), 3)),
                                  [np.inf, np.inf, np.inf, 0.0])


def test_sssp_negative_self_loop(xp):
    a = sp.csr_array(np.array([[-1.0]]))
    with pytest.raises(ValueError, match="negative length reachable from source 0"):
        graph.sssp(ours(a, xp), 0)


def test_sssp_rejects_complex(xp):
    a = ours(sp.csr_array(np.array([[0, 1j], [0, 0]])), xp)
    with pytest.raises(TypeError, match="a must have real weights, got dtype complex128"):
        graph.sssp(a, 0)


# --- PageRank ------------------------------------------------------------------------------


def test_pagerank(xp, case):
    got = host(graph.pagerank(ours(case, xp)))
    np.testing.assert_allclose(got, ref_pagerank(case), rtol=1e-12, atol=1e-15)
    assert got.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("damping", [0.0, 0.5, 0.99])
def test_pagerank_damping(xp, damping):
    a = random_graph(50, 0.05, seed=6, loops=True, isolated=4)
    got = host(graph.pagerank(ours(a, xp), damping, tol=1e-10, max_iter=5000))
    np.testing.assert_allclose(got, ref_pagerank(a, damping, 1e-10, 5000), rtol=1e-10)


def test_pagerank_empty(xp):
    assert graph.pagerank(ours(sp.csr_array((0, 0)), xp)).shape == (0,)


def test_pagerank_not_converged_warns(xp):
    a = ours(random_graph(30, 0.1, seed=7), xp)
    with pytest.warns(RuntimeWarning, match="did not converge within max_iter=2"):
        graph.pagerank(a, max_iter=2)


# --- connected components -------------------------------------------------------------------


def test_connected_components(xp, case):
    n_got, got = graph.connected_components(ours(case, xp))
    n_want, want = csgraph.connected_components(case, directed=True, connection="weak")
    assert n_got == n_want
    assert same_partition(host(got), want)
    # numbered by smallest vertex, as scipy numbers them
    np.testing.assert_array_equal(host(got), want)


def test_connected_components_long_path(xp):
    # a path visited in a scrambled order: many hooking rounds
    n = 300
    order = np.random.default_rng(8).permutation(n)
    a = sp.csr_array((np.ones(n - 2), (order[:-2], order[1:-1])), shape=(n, n))
    n_got, got = graph.connected_components(ours(a, xp))
    assert n_got == 2
    assert same_partition(host(got), csgraph.connected_components(a, directed=False)[1])


def test_connected_components_empty(xp):
    n_got, labels = graph.connected_components(ours(sp.csr_array((0, 0)), xp))
    assert n_got == 0 and labels.shape == (0,)


# --- corpus ------------------------------------------------------------------------------------


def test_corpus_triangles(xp, corpus_graph):
    a = corpus_graph
    if xp is np:
        low = sp.csr_array(sp.tril(pattern(a) + pattern(a).T, k=-1))
        work = int(np.diff(sp.csc_array(low).indptr) @ np.diff(low.indptr))
        if work > CPU_TRIANGLE_MULTIPLIES:
            pytest.skip(f"{work} multiplies of L @ L is GPU-sized")
    assert graph.triangle_count(ours(a, xp)) == ref_triangles(a)


def test_corpus_bfs(xp, corpus_graph):
    a = corpus_graph
    sources = [0, a.shape[0] // 2, a.shape[0] - 1]
    got = host(graph.multi_source_bfs(ours(a, xp), sources))
    for q, s in enumerate(sources):
        np.testing.assert_array_equal(got[q], ref_bfs(a, s))


def test_corpus_components(xp, corpus_graph):
    a = corpus_graph
    n_got, labels = graph.connected_components(ours(a, xp))
    n_want, want = csgraph.connected_components(pattern(a), directed=True,
                                                connection="weak")
    assert n_got == n_want
    np.testing.assert_array_equal(host(labels), want)


def test_corpus_pagerank(xp, corpus_graph):
    a = corpus_graph
    np.testing.assert_allclose(host(graph.pagerank(ours(a, xp))), ref_pagerank(a),
                               rtol=1e-10, atol=1e-15)


def test_corpus_sssp(xp, corpus_graph):
    a = corpus_graph
    if a.dtype.kind == "c":
        pytest.skip("complex weights")
    if (a.data < 0).any():
        a = abs(a)  # dijkstra's domain; negative weights have their own test
    np.testing.assert_allclose(host(graph.sssp(ours(a, xp), 0)),
                               csgraph.dijkstra(a, directed=True, indices=0), rtol=1e-12)


# --- input checks ------------------------------------------------------------------------------


ALL = [graph.triangle_count, lambda a: graph.bfs_levels(a, 0),
       lambda a: graph.multi_source_bfs(a, [0]), lambda a: graph.sssp(a, 0), graph.pagerank,
       graph.connected_components]


@pytest.mark.parametrize("func", ALL)
def test_rejects_rectangular(func):
    with pytest.raises(ValueError, match=r"a must be a square adjacency matrix, got shape "
                       r"\(3, 4\)"):
        func(sp.csr_array((3, 4)))


@pytest.mark.parametrize("func", ALL)
def test_rejects_non_matrix(func):
    with pytest.raises(TypeError, match="cannot build a BitmapMatrix from str"):
        func("graph")


@pytest.mark.parametrize("func", [graph.bfs_levels, graph.sssp])
@pytest.mark.parametrize("source", [-1, 5])
def test_source_out_of_range(func, source):
    a = sp.csr_array(np.eye(5))
    with pytest.raises(ValueError, match=rf"source must be in \[0, 5\), got {source}"):
        func(a, source)


@pytest.mark.parametrize("func", [graph.bfs_levels, graph.sssp])
def test_source_in_empty_graph(func):
    with pytest.raises(ValueError, match=r"source must be in \[0, 0\), got 0"):
        func(sp.csr_array((0, 0)), 0)


@pytest.mark.parametrize("func", [graph.bfs_levels, graph.sssp])
@pytest.mark.parametrize("source", [1.0, "0", True])
def test_source_not_integer(func, source):
    with pytest.raises(TypeError, match=f"source must be an integer, got {source!r}"):
        func(sp.csr_array(np.eye(3)), source)


def test_unsigned_sources(xp):
    a = ours(sp.csr_array(np.eye(3)), xp)
    got = graph.multi_source_bfs(a, xp.asarray(np.array([2], np.uint64)))
    np.testing.assert_array_equal(host(got), [[-1, -1, 0]])


def test_source_numpy_integer():
    np.testing.assert_array_equal(graph.bfs_levels(np.eye(3), np.int32(2)), [-1, -1, 0])


@pytest.mark.parametrize(("sources", "error", "match"), [
    ([0, 7], ValueError, r"sources must be in \[0, 5\), got 7"),
    ([-2, 1], ValueError, r"sources must be in \[0, 5\), got -2"),
    ([[0, 1]], ValueError, "sources must be 1-D, got 2-D"),
    ([0.0, 1.0], TypeError, "sources must be integers, got dtype float64"),
    (3, TypeError, "sources must be a sequence or 1-D array of vertices, got 3"),
    # unsigned ids past 2^63 were named as negative (cast before the check)
    (np.array([2**64 - 1], np.uint64), ValueError,
     r"sources must be in \[0, 5\), got 18446744073709551615"),
    (np.array([1, 2**63], np.uint64), ValueError,
     r"sources must be in \[0, 5\), got 9223372036854775808"),
])
def test_multi_source_bfs_rejects(xp, sources, error, match):
    a = ours(sp.csr_array(np.eye(5)), xp)
    if not isinstance(sources, int):
        sources = xp.asarray(sources)
    with pytest.raises(error, match=match):
        graph.multi_source_bfs(a, sources)


@pytest.mark.parametrize(("sources", "match"), [
    # read as an object array: "sources must be integers, got dtype object"
    ([0, 2**70], r"sources must be in \[0, 5\), got 1180591620717411303424"),
    ((-2**64, 1), r"sources must be in \[0, 5\), got -18446744073709551616"),
    # NumPy's own "inhomogeneous shape" error
    ([[0], [1, 2]], "sources must be 1-D, got a ragged sequence"),
])
def test_multi_source_bfs_rejects_sequences(xp, sources, match):
    a = ours(sp.csr_array(np.eye(5)), xp)
    with pytest.raises(ValueError, match=match):
        graph.multi_source_bfs(a, sources)


@pytest.mark.gpu
def test_multi_source_bfs_rejects_mixed_sides():
    import cupy

    with pytest.raises(TypeError, match="operands must all be on the host"):
        graph.multi_source_bfs(BitmapMatrix(np.eye(3)), cupy.arange(2))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"damping": 1.5}, r"damping must be in \[0, 1\], got 1.5"),
    ({"damping": -0.1}, r"damping must be in \[0, 1\], got -0.1"),
    ({"tol": 0}, "tol must be positive, got 0.0"),
    ({"max_iter": 0}, "max_iter must be a positive integer, got 0"),
    ({"max_iter": 2.5}, "max_iter must be a positive integer, got 2.5"),
    ({"max_iter": True}, "max_iter must be a positive integer, got True"),
])
def test_pagerank_rejects(kwargs, match):
    with pytest.raises(ValueError, match=match):
        graph.pagerank(np.eye(3), **kwargs)


@pytest.mark.parametrize(("kwargs", "match"), [
    # a string was parsed by float(), a bool taken as 0 or 1
    ({"damping": "0.5"}, "damping must be a real number, got '0.5'"),
    ({"damping": True}, "damping must be a real number, got True"),
    ({"damping": 0.5j}, r"damping must be a real number, got 0.5j"),
    ({"tol": None}, "tol must be a real number, got None"),
])
def test_pagerank_rejects_non_real_parameters(kwargs, match):
    with pytest.raises(TypeError, match=match):
        graph.pagerank(np.eye(3), **kwargs)


def test_pagerank_accepts_numpy_reals(xp):
    a = ours(random_graph(13, 0.25, seed=3), xp)
    want = graph.pagerank(a, 0.85, tol=1e-6)
    got = graph.pagerank(a, np.float32(0.85), tol=np.float64(1e-6))
    np.testing.assert_allclose(host(got), host(want), rtol=1e-6)
