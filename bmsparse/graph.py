"""Graph algorithms on bitmap block adjacency matrices.

A graph on ``n`` vertices is an ``n x n`` matrix with an edge ``i -> j``
wherever entry ``(i, j)`` is stored, explicit zeros included (a bool matrix
stores no False: ``astype(bool)`` drops zeros): a bitmap block already *is*
the graph, so most algorithms read the bitmaps only. Each is a short loop
of products over semirings (``lor_land``, ``min_plus``, masked ``plus_pair``)
and array operations, running on the host (NumPy) or on the GPU (CuPy)
wherever the matrix lives; results are arrays of the same module.

- :func:`triangle_count` - triangles of the undirected graph, without forming
  any product matrix;
- :func:`bfs_levels`, :func:`multi_source_bfs` - breadth-first levels;
- :func:`sssp` - single-source shortest paths (Bellman-Ford);
- :func:`pagerank` - PageRank by power iteration;
- :func:`connected_components` - weakly connected components (FastSV).
"""

from __future__ import annotations

import numbers
import operator
import warnings
from typing import Any

import numpy as np

from ._format import BLOCK, nblocks_along, popcount
from ._matrix import BitmapMatrix
from ._primitives import exclusive_scan
from ._select import pattern, structure, triangle_bitmaps
from ._sputils import get_array_module
from .spgemm import masked_pair_sum, spgemm

__all__ = ["bfs_levels", "connected_components", "multi_source_bfs", "pagerank", "sssp",
           "triangle_count"]


# --- input checks ----------------------------------------------------------------------


def _adjacency(a: Any) -> BitmapMatrix:
    """``a`` as a square BitmapMatrix (converted if it is anything else)."""
    if not isinstance(a, BitmapMatrix):
        a = BitmapMatrix(a)
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"a must be a square adjacency matrix, got shape {a.shape}")
    return a


def _vertex(v: Any, n: int, name: str) -> int:
    """``v`` as a vertex index in ``[0, n)``."""
    if isinstance(v, (bool, np.bool_)) or not _is_integer(v):
        raise TypeError(f"{name} must be an integer, got {v!r}")
    v = operator.index(v)
    if not 0 <= v < n:
        raise ValueError(f"{name} must be in [0, {n}), got {v}")
    return v


def _is_integer(v: Any) -> bool:
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


def _sources(a: BitmapMatrix, sources: Any) -> Any:
    """``sources`` as a 1-D int64 array on ``a``'s side, every entry in ``[0, n)``."""
    xp, n = a._xp(), a.shape[0]
    if isinstance(sources, (list, tuple, range)):
        sources = xp.asarray(_sequence_sources(sources, n))
    elif not hasattr(sources, "ndim"):
        raise TypeError(f"sources must be a sequence or 1-D array of vertices, got "
                        f"{sources!r}; use bfs_levels for one source")
    get_array_module(a.keys, sources)  # a host array for a device matrix is an error
    if sources.ndim != 1:
        raise ValueError(f"sources must be 1-D, got {sources.ndim}-D")
    if sources.dtype.kind not in "iu":
        raise TypeError(f"sources must be integers, got dtype {sources.dtype.name}")
    if sources.shape[0]:
        # sync: one read of both bounds, in the sources' own dtype (a uint64
        # past 2^63 would read as negative once cast)
        low, high = (int(x) for x in xp.stack([sources.min(), sources.max()]).tolist())
        if low < 0 or high >= n:
            raise ValueError(f"sources must be in [0, {n}), got {low if low < 0 else high}")
    return sources.astype(xp.int64, copy=False)


def _sequence_sources(sources: list | tuple | range, n: int) -> np.ndarray:
    """A sequence of sources as a NumPy array, for :func:`_sources` to check.

    ValueError for a ragged sequence (NumPy's "inhomogeneous shape" message
    names no argument) and for Python ints beyond 64 bits, which NumPy holds
    in an object array (its dtype would be named as the fault).
    """
    try:
        array = np.asarray(sources, dtype=np.int64 if len(sources) == 0 else None)
    except ValueError:
        raise ValueError("sources must be 1-D, got a ragged sequence") from None
    if array.dtype == object and all(_is_integer(v) and not isinstance(v, (bool, np.bool_))
                                     for v in sources):
        # only an integer outside int64 and uint64 makes an object array
        bad = next(v for v in map(operator.index, sources) if not 0 <= v < n)
        raise ValueError(f"sources must be in [0, {n}), got {bad}")
    return array


def _real(x: Any, name: str) -> float:
    """``x`` as a float; TypeError unless it is a real number (a NumPy one, or a
    0-d real array, included): ``float()`` alone parses strings and takes bools."""
    real = isinstance(x, numbers.Real) or (
        getattr(x, "ndim", None) == 0 and getattr(x, "dtype", None) is not None
        and x.dtype.kind in "iuf")
    if isinstance(x, (bool, np.bool_)) or not real:
        raise TypeError(f"{name} must be a real number, got {x!r}")
    return float(x)


def _symmetric(a: BitmapMatrix) -> BitmapMatrix:
    """The pattern of ``a`` or ``a.T``: the undirected graph (bool + bool is the
    union of the patterns, a merge of keys)."""
    edges = structure(a)
    return edges + edges.T


def _dense_row(xp: Any, n: int) -> tuple[Any, Any, Any]:
    """Keys, bitmaps and offsets of a 1 x n matrix holding all n entries.

    Its values are then any array of length n, in column order.
    """
    nb = nblocks_along(n)
    keys = xp.arange(nb, dtype=xp.uint64)  # block row 0: the key is the block column
    bitmaps = xp.full(nb, 0xFF, dtype=xp.uint64)
    if n % BLOCK:
        bitmaps[-1] = (1 << (n % BLOCK)) - 1
    return keys, bitmaps, exclusive_scan(xp, popcount(bitmaps))


# --- triangles -----------------------------------------------------------------------


def triangle_count(a: Any) -> int:
    """Number of triangles of the undirected graph of ``a``.

    The graph has an edge ``{i, j}`` when ``a`` stores ``(i, j)`` or
    ``(j, i)``, for ``i != j``: the pattern is symmetrized and self-loops are
    ignored, so a directed ``a`` counts the triangles of its underlying
    undirected graph.

    Parameters
    ----------
    a : BitmapMatrix, or anything BitmapMatrix accepts
        Square adjacency matrix of any dtype; only its structure is read.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        ``a`` is not square.

    Notes
    -----
    With ``L`` the strictly lower triangle of the symmetrized pattern, every
    triangle ``i > j > k`` is one ``j`` with ``L[i, j]`` and ``L[j, k]`` under
    ``L[i, k]``: the count is ``masked_pair_sum(L, L, L)``, which sums the
    masked Boolean products of the blocks without forming ``L @ L``. ``L`` is
    built on keys and bitmaps (a block-local transpose, a merge of keys and
    bit masks on the diagonal blocks), never through COO. Exact (integer
    arithmetic); a few syncs.

    Examples
    --------
    >>> import numpy as np
    >>> from bmsparse.graph import triangle_count
    >>> square_with_diagonal = np.array([[0, 1, 1, 1],
    ...                                  [0, 0, 1, 0],
    ...                                  [0, 0, 0, 1],
    ...                                  [0, 0, 0, 0]])
    >>> triangle_count(square_with_diagonal)
    2
    """
    a = _adjacency(a)
    undirected = _symmetric(a)
    low = pattern(undirected.keys, triangle_bitmaps(undirected.keys, undirected.bitmaps, -1, True),
                  a.shape)
    return int(masked_pair_sum(low, low, low))


# --- breadth-first search ----------------------------------------------------------------


def bfs_levels(a: Any, source: int) -> Any:
    """Breadth-first level of every vertex from ``source``.

    Parameters
    ----------
    a : BitmapMatrix, or anything BitmapMatrix accepts
        Square adjacency matrix: an edge ``i -> j`` for every stored
        ``(i, j)``. Only the structure is read.
    source : int
        The start vertex, in ``[0, n)``.

    Returns
    -------
    int64 array [n]
        Number of edges on a shortest path from ``source``; 0 for the source
        itself and -1 for a vertex it does not reach. NumPy for a host
        matrix, CuPy for a device one.

    Raises
    ------
    ValueError
        ``a`` is not square, or ``source`` is out of range.
    TypeError
        ``source`` is not an integer.

    Notes
    -----
    The frontier is a dense bool vector ``f`` and a level is the Boolean
    matrix-vector product ``f @ A`` (:func:`bmsparse.spmv` with
    ``transpose=True``, through A's cached column order), keeping the
    vertices not yet reached: O(nnz + n) work and one sync per level, with no
    sparse frontier to build. :func:`multi_source_bfs` keeps the frontiers
    of many searches sparse instead.

    Examples
    --------
    >>> import numpy as np
    >>> from bmsparse.graph import bfs_levels
    >>> path = np.array([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]])
    >>> bfs_levels(path, 0)
    array([ 0,  1,  2, -1])
    """
    from .spmv import spmv

    a = _adjacency(a)
    n = a.shape[0]
    source = _vertex(source, n, "source")
    xp = a._xp()
    adjacency = structure(a)
    levels = xp.full(n, -1, dtype=xp.int64)
    levels[source] = 0
    frontier = xp.zeros(n, dtype=bool)
    frontier[source] = True
    level = 0
    while True:  # one Boolean matrix-vector product per level
        level += 1
        frontier = spmv(adjacency, frontier, transpose=True) & (levels < 0)
        if not bool(frontier.any()):  # sync: the search ends when no vertex is new
            return levels
        levels = xp.where(frontier, level, levels)


def multi_source_bfs(a: Any, sources: Any) -> Any:
    """Breadth-first levels from several sources at once.

    Parameters
    ----------
    a : BitmapMatrix, or anything BitmapMatrix accepts
        Square adjacency matrix: an edge ``i -> j`` for every stored
        ``(i, j)``. Only the structure is read.
    sources : sequence or 1-D integer array [s]
        Start vertices in ``[0, n)``; repeats are allowed.

    Returns
    -------
    int64 array [s, n]
        Row ``q`` holds the levels from ``sources[q]``: -1 where unreached.

    Raises
    ------
    ValueError
        ``a`` is not square, ``sources`` is not 1-D (a ragged sequence
        included), or a source is out of range.
    TypeError
        ``sources`` is not integers.

    Notes
    -----
    The frontier of all searches is one ``s x n`` pattern matrix ``F``, and
    a level is ``F = (F lor.land A)`` masked with the complement of the
    visited pattern, so each search steps only into vertices it has not
    seen, and the product reads bitmaps only. The visited pattern grows by
    a union of blocks. Work per level is the block task list of ``F @ A``;
    the loop runs once per level (the eccentricity of the farthest source,
    plus one), with a few syncs per level. Memory: the ``s x n`` level array
    plus the frontier and visited patterns.

    Examples
    --------
    >>> import numpy as np
    >>> from bmsparse.graph import multi_source_bfs
    >>> cycle = np.roll(np.eye(4, dtype=bool), 1, axis=1)  # 0 -> 1 -> 2 -> 3 -> 0
    >>> multi_source_bfs(cycle, [0, 2])
    array([[0, 1, 2, 3],
           [2, 3, 0, 1]])
    """
    a = _adjacency(a)
    xp = a._xp()
    n = a.shape[0]
    sources = _sources(a, sources)
    s = sources.shape[0]
    levels = xp.full((s, n), -1, dtype=xp.int64)
    if s == 0:
        return levels
    starts = xp.arange(s, dtype=xp.int64)
    levels[starts, sources] = 0
    adjacency = structure(a)
    frontier = BitmapMatrix.from_coo(starts, sources, None, (s, n))
    visited = frontier
    level = 0
    while frontier.nblocks:  # one product per level
        level += 1
        frontier = spgemm(frontier, adjacency, semiring="or_and", mask=visited,
                          complement=True)
        rows, cols = frontier._coo_indices()
        levels[rows, cols] = level
        visited = visited + frontier  # bool patterns: their union
    return levels


# --- shortest paths ------------------------------------------------------------------------


def sssp(a: Any, source: int) -> Any:
    """Shortest path lengths from ``source`` (Bellman-Ford on ``min_plus``).

    Parameters
    ----------
    a : BitmapMatrix, or anything BitmapMatrix accepts
        Square matrix of edge weights: an edge ``i -> j`` of weight
        ``a[i, j]`` for every stored entry (a stored zero is an edge of
        weight 0). Weights may be negative. A bool (pattern) matrix has unit
        weights.
    source : int
        The start vertex, in ``[0, n)``.

    Returns
    -------
    float64 array [n]
        Length of a shortest path from ``source``; ``inf`` where unreached.

    Raises
    ------
    ValueError
        ``a`` is not square, ``source`` is out of range, or a cycle of
        negative length is reachable from ``source``.
    TypeError
        ``source`` is not an integer, or ``a`` is complex.

    Notes
    -----
    Round ``k`` relaxes the edges out of the vertices whose distance fell in
    round ``k - 1``: ``d = F min.plus A`` with ``F`` the ``1 x n`` matrix of
    those vertices and their distances. After round ``k`` every distance is
    the shortest over walks of at most ``k`` edges, so without a negative
    cycle nothing falls after round ``n - 1``; a fall in round ``n`` raises.
    Work per round is the block task list of ``F @ A``; rounds are at most
    ``n`` and usually the number of edges of the longest shortest path. Only
    negative cycles reachable from ``source`` are detected (scipy's
    ``bellman_ford`` rejects any). Weights are cast to float64.

    Examples
    --------
    >>> import numpy as np
    >>> from bmsparse.graph import sssp
    >>> w = np.array([[0, 4.0, 1.0], [0, 0, 0], [0, 2.0, 0]])
    >>> sssp(w, 0)
    array([0., 3., 1.])
    """
    a = _adjacency(a)
    source = _vertex(source, a.shape[0], "source")
    if a.dtype.kind == "c":
        raise TypeError(f"a must have real weights, got dtype {a.dtype.name}")
    xp = a._xp()
    n = a.shape[0]
    weights = a.astype(np.float64, copy=False)
    dist = xp.full(n, np.inf)
    dist[source] = 0.0
    frontier = BitmapMatrix.from_coo(xp.zeros(1, dtype=xp.int64),
                                     xp.full(1, source, dtype=xp.int64), xp.zeros(1), (1, n))
    for _ in range(n):  # Bellman-Ford: no distance falls after round n - 1
        relaxed = spgemm(frontier, weights, semiring="min_plus")
        _, cols = relaxed._coo_indices()
        better = relaxed.values < dist[cols]
        cols, values = cols[better], relaxed.values[better]
        if cols.shape[0] == 0:  # sync: the size of a boolean selection
            return dist
        dist[cols] = values
        frontier = BitmapMatrix.from_coo(xp.zeros_like(cols), cols, values, (1, n))
    raise ValueError(f"a has a cycle of negative length reachable from source {source}")


# --- PageRank ------------------------------------------------------------------------------


def pagerank(a: Any, damping: float = 0.85, *, tol: float = 1e-6,
             max_iter: int = 100) -> Any:
    """PageRank of every vertex, by power iteration (networkx's convention).

    Parameters
    ----------
    a : BitmapMatrix, or anything BitmapMatrix accepts
        Square adjacency matrix: an edge ``i -> j`` for every stored
        ``(i, j)``. Only the structure is read (edges are unweighted).
    damping : float
        Probability of following an edge, in ``[0, 1]``.
    tol : float
        Stop when the L1 change of the ranks is below ``n * tol``.
    max_iter : int
        Most iterations.

    Returns
    -------
    float64 array [n]
        Ranks, summing to 1.

    Raises
    ------
    ValueError
        ``a`` is not square, or a parameter is out of range.
    TypeError
        ``damping`` or ``tol`` is not a real number.

    Warns
    -----
    RuntimeWarning
        The ranks did not converge within ``max_iter`` iterations (the last
        iterate is returned; networkx raises instead).

    Notes
    -----
    From ``r = 1 / n``, each iteration is::

        r = damping * (A_out^T r + sum(r[dangling]) / n) + (1 - damping) / n

    where ``A_out`` divides each row of the pattern by its out-degree
    (self-loops count) and a dangling vertex (out-degree 0) links to every
    vertex. This is ``networkx.pagerank`` with no weights, personalization
    or start vector. One sparse matrix-vector product (``x @ A``) and one
    sync per iteration.

    Examples
    --------
    >>> import numpy as np
    >>> from bmsparse.graph import pagerank
    >>> star = np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]])
    >>> pagerank(star).round(4)
    array([0.4865, 0.2568, 0.2568])
    """
    a = _adjacency(a)
    damping, tol = _real(damping, "damping"), _real(tol, "tol")
    if not 0.0 <= damping <= 1.0:
        raise ValueError(f"damping must be in [0, 1], got {damping}")
    if not tol > 0.0:
        raise ValueError(f"tol must be positive, got {tol}")
    if isinstance(max_iter, (bool, np.bool_)) or not _is_integer(max_iter) \
            or operator.index(max_iter) < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    xp = a._xp()
    n = a.shape[0]
    if n == 0:
        return xp.zeros(0)
    adjacency = structure(a)  # a pattern matrix multiplies as ones
    out_degree = adjacency.count_nonzero(axis=1).astype(np.float64)
    dangling = out_degree == 0
    inverse = xp.where(dangling, 0.0, 1.0 / xp.where(dangling, 1.0, out_degree))
    ranks = xp.full(n, 1.0 / n)
    err = np.inf
    for _ in range(operator.index(max_iter)):
        spread = (ranks * inverse) @ adjacency
        lost = xp.where(dangling, ranks, 0.0).sum()
        new = damping * (spread + lost / n) + (1.0 - damping) / n
        err = float(xp.abs(new - ranks).sum())  # sync: the convergence test
        ranks = new
        if err < n * tol:
            return ranks
    warnings.warn(f"pagerank did not converge within max_iter={max_iter} iterations "
                  f"(L1 change {err:.3g} >= n * tol = {n * tol:.3g})", RuntimeWarning,
                  stacklevel=2)
    return ranks


# --- connected components --------------------------------------------------------------


def connected_components(a: Any) -> tuple[int, Any]:
    """Weakly connected components: the components of the undirected graph.

    Parameters
    ----------
    a : BitmapMatrix, or anything BitmapMatrix accepts
        Square adjacency matrix; an edge in either direction joins two
        vertices. Only the structure is read.

    Returns
    -------
    n_components : int
    labels : int64 array [n]
        Component of each vertex, numbered ``0 .. n_components - 1`` in the
        order of their smallest vertex (as
        ``scipy.sparse.csgraph.connected_components(a, directed=False)``
        numbers them).

    Raises
    ------
    ValueError
        ``a`` is not square.

    Notes
    -----
    FastSV (Zhang, Azad & Hu, 2020), a Shiloach-Vishkin variant in linear
    algebra: every vertex holds a parent ``f``; each iteration takes
    ``mngf = gf min.plus S``, the smallest grandparent among the neighbours
    (``S`` the symmetrized pattern with zero weights, ``gf = f[f]``), and
    hooks with it (``f[f[u]] = min(f[f[u]], mngf[u])``, ``f = min(f, mngf,
    gf)``) until the grandparents stop changing. Iterations are
    ``O(log n)`` in practice, each a product of a dense ``1 x n`` row with
    ``S``, a sort of ``n`` pairs for the hooking (no atomics) and a few
    syncs. Deterministic: all reductions are minima.

    Examples
    --------
    >>> import numpy as np
    >>> from bmsparse.graph import connected_components
    >>> a = np.zeros((5, 5)); a[0, 2] = a[3, 4] = 1
    >>> connected_components(a)
    (3, array([0, 1, 0, 2, 2]))
    """
    a = _adjacency(a)
    xp = a._xp()
    n = a.shape[0]
    undirected = _symmetric(a)
    zero_weights = BitmapMatrix._from_blocks(undirected.keys, undirected.bitmaps,
                                             undirected.offsets,
                                             xp.zeros(undirected.nnz, dtype=xp.int64),
                                             a.shape)
    row_keys, row_bitmaps, row_offsets = _dense_row(xp, n)
    parent = xp.arange(n, dtype=xp.int64)
    grandparent = parent.copy()
    while True:  # FastSV: O(log n) iterations in practice
        row = BitmapMatrix._from_blocks(row_keys, row_bitmaps, row_offsets, grandparent,
                                        (1, n))
        reached = spgemm(row, zero_weights, semiring="min_plus")
        _, cols = reached._coo_indices()
        # a vertex without neighbours gets n, which no minimum takes
        neighbours = xp.full(n, n, dtype=xp.int64)
        neighbours[cols] = reached.values
        hooked = parent.copy()
        _scatter_min(xp, hooked, parent, neighbours)  # stochastic hooking
        parent = xp.minimum(xp.minimum(hooked, neighbours), grandparent)
        new_grandparent = parent[parent]
        if bool((new_grandparent == grandparent).all()):  # sync: the stopping test
            break
        grandparent = new_grandparent
    while True:  # shortcut to the roots (usually done already)
        root = parent[parent]
        if bool((root == parent).all()):  # sync: the stopping test
            break
        parent = root
    roots, labels = xp.unique(parent, return_inverse=True)
    return int(roots.shape[0]), labels.reshape(n).astype(xp.int64, copy=False)


def _scatter_min(xp: Any, out: Any, index: Any, values: Any) -> None:
    """``out[index] = min(out[index], values)`` with repeated indices, in place.

    By a sort of (index, value) pairs rather than atomics, the same on both
    sides: the first pair of each index holds its minimum.
    """
    order = xp.lexsort(xp.stack([values, index]))
    index, values = index[order], values[order]
    first = xp.concatenate([xp.ones(min(index.shape[0], 1), dtype=bool),
                            index[1:] != index[:-1]])
    index, values = index[first], values[first]
    out[index] = xp.minimum(out[index], values)
