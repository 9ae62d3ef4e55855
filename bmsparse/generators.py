"""Test matrices: a WebBase-1M surrogate, the ESC paper's stencils, and their statistics.

Everything here is pure NumPy/SciPy and needs no GPU. The matrices are
canonical ``scipy.sparse.csr_array`` objects (sorted column indices, no
duplicates), so they can be fed to any conversion routine as they are.

- :func:`webbase_surrogate` stands in for the SuiteSparse matrix
  ``Williams/webbase-1M``, which bmSPARSE benchmarks on but which we cannot
  download. :data:`WEBBASE_1M` holds the published figures it is tuned to.
- :func:`poisson2d_5pt`, :func:`poisson2d_9pt`, :func:`poisson3d_7pt` and
  :func:`poisson3d_27pt` are the structured matrices 1a, 1b, 2a and 2b of
  Table 3 of Dalton, Olson & Bell; :data:`STRUCTURED` names them.
- :func:`product_stats` measures what matters for ``A @ A``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import DTypeLike
from scipy.special import ndtri

from ._format import BLOCK, MAX_DIM
from ._sputils import check_dtype, get_index_dtype

__all__ = [
    "STRUCTURED",
    "WEBBASE_1M",
    "WEBBASE_1M_RTOL",
    "poisson2d_5pt",
    "poisson2d_9pt",
    "poisson3d_7pt",
    "poisson3d_27pt",
    "product_stats",
    "webbase_surrogate",
]

#: Published figures of WebBase-1M (SuiteSparse ``Williams/webbase-1M``) and of
#: ``A @ A`` on it, as reported by Zhang & Gruenwald. ``max_row_nnz`` is approximate.
WEBBASE_1M: dict[str, int | float] = {
    "n_rows": 1_000_005,
    "n_cols": 1_000_005,
    "nnz": 3_105_536,
    "blocks": 550_761,
    "nnz_per_block": 3_105_536 / 550_761,
    "multiplies": 69_524_195,
    "nnz_product": 51_111_996,
    "max_row_nnz": 4_700,
}

#: Relative tolerances within which ``webbase_surrogate(1.0)`` must match
#: :data:`WEBBASE_1M`; ``max_row_nnz`` is a soft target.
WEBBASE_1M_RTOL: dict[str, float] = {
    "nnz": 0.10,
    "blocks": 0.15,
    "multiplies": 0.20,
    "nnz_product": 0.20,
    "max_row_nnz": 0.10,
}

# Parameters of the surrogate's web model, tuned so that scale=1.0 meets
# WEBBASE_1M. Host sizes are log-normal: a page-weighted mean host size of ~55
# is what puts ~22 multiplies behind every non-zero, through the home pages.
_HOST_LOG_MEAN = 1.89
_HOST_LOG_SD = 1.2
_P_HOME = 0.85  # a page links its host's home page
_SECTION_MIN_HOST = 4  # hosts at least this large have a section page
_SECTION_FRACTION = 0.5  # share of its host a section page lists
_P_SECTION = 0.65  # a page links its host's section page
_P_NEXT = 0.17  # a page links the next page of its host
_LOCAL_RATE = 0.1  # Poisson mean of links to pages a few ids away
_LOCAL_WINDOW = 6
_LONG_RANGE_RATE = 0.16  # links to popular pages anywhere, per page
_PORTAL_RATE = 2e-5  # directory pages, per page
_PORTAL_MIN = 500
_PORTAL_MAX = 4_700  # the longest row of WebBase-1M

# Rows of the pattern product are formed in chunks of about this many
# multiplies, which bounds product_stats' peak memory. Tests lower it.
PRODUCT_CHUNK_MULTIPLIES = 1 << 25


def webbase_surrogate(
    scale: float = 1.0, *, seed: int = 0, dtype: DTypeLike = np.float64
) -> sp.csr_array:
    """Generate a web-like directed graph with the statistics of WebBase-1M.

    Pages are numbered host by host, as in a crawl sorted by URL. Hosts have
    log-normal sizes. Inside a host, pages link to the host's home page (its
    first page), which links back to every page; to a section page (the
    second page), which lists a contiguous half of the host; to the next
    page; and to pages a few ids away. About one page in six also links a
    popular page anywhere, popularity following Zipf's law, and one page in
    50,000 is a directory listing a long run of consecutive ids. The navigation links
    make dense 8×8 blocks, and the home and section pages make the
    multiplies of ``A @ A`` overlap the way they do in WebBase-1M.

    Parameters
    ----------
    scale : float, optional
        Size relative to WebBase-1M. The matrix has
        ``max(8, round(scale * 1_000_005))`` rows and columns, and the
        statistics per row stay close to those at ``scale=1.0``.
    seed : int, optional
        Seed of ``numpy.random.default_rng``.
    dtype : dtype-like, optional
        Of the values: ``float64`` (the default) or ``float32``.

    Returns
    -------
    scipy.sparse.csr_array
        Square ``(n, n)`` matrix in canonical format, with indices of
        ``get_index_dtype``'s choice and values drawn uniformly from
        ``[0.5, 1.5)``, so that products never cancel. There are no diagonal
        entries.

    Raises
    ------
    ValueError
        If `scale` is not positive and finite, or gives more than 2^35 rows.
    TypeError
        If `scale` is not a real number (a bool or a string), or `dtype` is
        not float32 or float64.

    Notes
    -----
    At ``scale=1.0`` (seed 0) the matrix has 3,131,311 non-zeros in 553,279
    non-empty 8×8 blocks, and ``A @ A`` takes 69,264,489 multiplies to
    produce 51,736,770 non-zeros: all within 1.2% of :data:`WEBBASE_1M`.
    Smaller scales keep ~3.1 non-zeros per row and ~5.7 per block; the
    multiplies per non-zero fall slowly, from 22 to 20 at ``scale=0.01`` and
    17 at ``scale=0.001``, because small graphs lack the largest hosts.
    Time and memory are O(nnz): about 0.6 s and 250 MB at ``scale=1.0``.
    The output depends only on `scale`, `seed` and `dtype`.

    Examples
    --------
    >>> a = webbase_surrogate(0.001)
    >>> a.shape
    (1000, 1000)
    >>> 2.5 < a.nnz / a.shape[0] < 3.5
    True
    """
    if isinstance(scale, (bool, np.bool_, str, bytes)) or not isinstance(scale, (
            numbers.Real, np.floating, np.integer)):
        raise TypeError(f"scale must be a real number, got {scale!r}")
    scale = float(scale)
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be positive and finite, got {scale}")
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        # (float16 rounds values up to 1.5, and no BitmapMatrix stores it)
        raise TypeError(f"dtype must be float32 or float64, got {dtype}")
    rng = np.random.default_rng(seed)
    n = max(8, round(scale * WEBBASE_1M["n_rows"]))
    if n > MAX_DIM:  # named here, before NumPy runs out of memory
        raise ValueError(f"scale must give at most {MAX_DIM} rows (a BitmapMatrix's limit), "
                         f"got scale={scale:g}")

    size = _host_sizes(n)
    size = size[rng.permutation(size.size)]
    start = np.cumsum(size) - size
    host = np.repeat(np.arange(size.size), size)
    page = np.arange(n, dtype=np.int64)
    home = start[host]
    pos = page - home
    in_host = np.repeat(size, size)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []

    # Home page: most pages link to it, and it links to all of them.
    not_home = pos > 0
    links = not_home & (rng.random(n) < _P_HOME)
    rows += [page[links], home[not_home]]
    cols += [home[links], page[not_home]]

    # Section page: lists a contiguous run of its host at a random offset.
    sectioned = np.flatnonzero(size >= _SECTION_MIN_HOST)
    run = np.rint(_SECTION_FRACTION * size[sectioned]).astype(np.int64)
    first = start[sectioned] + rng.integers(0, size[sectioned] - run + 1)
    rows.append(np.repeat(start[sectioned] + 1, run))
    cols.append(_runs(first, run))
    links = not_home & (in_host >= _SECTION_MIN_HOST) & (rng.random(n) < _P_SECTION)
    rows.append(page[links])
    cols.append(home[links] + 1)

    links = (pos + 1 < in_host) & (rng.random(n) < _P_NEXT)
    rows.append(page[links])
    cols.append(page[links] + 1)

    src = np.repeat(page, rng.poisson(_LOCAL_RATE, n))
    offset = rng.integers(1, _LOCAL_WINDOW + 1, src.size)
    offset[rng.random(src.size) < 0.5] *= -1
    target = pos[src] + offset
    links = (target >= 0) & (target < in_host[src])
    rows.append(src[links])
    cols.append(src[links] + offset[links])

    # Long-range links: rank r among popular pages is hit with probability
    # ~ 1/(r+1), which gives the power-law in-degree of the web.
    popular = rng.permutation(page[not_home])
    count = round(_LONG_RANGE_RATE * n)
    if popular.size:
        rank = np.exp(rng.random(count) * np.log(popular.size + 1)).astype(np.int64) - 1
        rows.append(rng.integers(0, n, count))
        cols.append(popular[np.minimum(rank, popular.size - 1)])

    portals = round(_PORTAL_RATE * n)
    if portals:
        longest = min(_PORTAL_MAX, n // 4)
        quantile = (np.arange(portals) + 0.5) / portals
        run = np.rint(_PORTAL_MIN * (longest / _PORTAL_MIN) ** quantile).astype(np.int64)
        run[-1] = longest
        rows.append(np.repeat(rng.integers(0, n, portals), run))
        cols.append(_runs(rng.integers(0, n - run + 1), run))

    # Sorting row-major keys leaves rows, and columns within rows, in order.
    # (np.sort beats np.unique, which hashes first, several times over.)
    keys = np.sort(np.concatenate(rows) * n + np.concatenate(cols))
    row, col = np.divmod(keys, n)
    keep = row != col
    keep[1:] &= keys[1:] != keys[:-1]
    row = row[keep]
    col = col[keep]
    index_dtype = get_index_dtype(max(n, row.size))
    indptr = np.zeros(n + 1, dtype=index_dtype)
    np.cumsum(np.bincount(row, minlength=n), out=indptr[1:])
    data = rng.uniform(0.5, 1.5, row.size).astype(dtype, copy=False)
    return sp.csr_array((data, col.astype(index_dtype), indptr), shape=(n, n))


def _host_sizes(n: int) -> np.ndarray:
    """Sizes of the hosts of an n-page surrogate, summing to n.

    Midpoint quantiles of the log-normal replace random draws, so the size
    distribution carries no sampling noise at small scales.
    """

    def quantiles(hosts: int) -> np.ndarray:
        p = (np.arange(hosts) + 0.5) / hosts
        size = np.rint(np.exp(_HOST_LOG_MEAN + _HOST_LOG_SD * ndtri(p)))
        return np.clip(size, 1, n).astype(np.int64)

    hosts = max(1, n // 8)
    for _ in range(4):
        hosts = max(1, round(hosts * n / quantiles(hosts).sum()))
    size = quantiles(hosts)
    excess = size.sum() - n
    if excess > 0:
        size = size[np.searchsorted(np.cumsum(size), excess) + 1 :]
    if size.sum() < n:
        size = np.append(size, n - size.sum())
    return size


def _runs(first: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Concatenate the ranges ``first[i] : first[i] + length[i]``."""
    ends = np.cumsum(length)
    return np.arange(ends[-1] if ends.size else 0) + np.repeat(first - (ends - length), length)


def poisson2d_5pt(
    nx: int = 1024, ny: int | None = None, *, dtype: DTypeLike = np.float64
) -> sp.csr_array:
    """Five-point finite-difference Laplacian on an ``nx × ny`` grid (ESC Table 3, 1a).

    Parameters
    ----------
    nx : int, optional
        Grid points along x, the fastest-varying index. The default gives
        the full-size matrix of the paper.
    ny : int, optional
        Grid points along y; `nx` when omitted.
    dtype : dtype-like, optional
        Type of the values, ``float64`` by default.

    Returns
    -------
    scipy.sparse.csr_array
        Canonical ``(nx*ny, nx*ny)`` matrix with 4 on the diagonal and -1 for
        each of the four neighbours, and ``5*nx*ny - 2*nx - 2*ny``
        non-zeros. Row ``x + nx*y`` belongs to grid point ``(x, y)``.

    Raises
    ------
    TypeError
        If a grid size is not an integer, or the dtype is not a supported
        numeric one (bool cannot hold -1).
    ValueError
        If a grid size is not positive, or the grid has more than 2^35 points.

    Notes
    -----
    At full size, 1024², n = 1,048,576 and nnz = 5,238,784.

    Examples
    --------
    >>> poisson2d_5pt(3).toarray()[4]
    array([ 0., -1.,  0., -1.,  4., -1.,  0., -1.,  0.])
    """
    return _stencil(_grid(nx=nx, ny=ny), 1, 4, dtype)


def poisson2d_9pt(
    nx: int = 1024, ny: int | None = None, *, dtype: DTypeLike = np.float64
) -> sp.csr_array:
    """Nine-point finite-element Laplacian on an ``nx × ny`` grid (ESC Table 3, 1b).

    Parameters
    ----------
    nx : int, optional
        Grid points along x, the fastest-varying index. The default gives
        the full-size matrix of the paper.
    ny : int, optional
        Grid points along y; `nx` when omitted.
    dtype : dtype-like, optional
        Type of the values, ``float64`` by default.

    Returns
    -------
    scipy.sparse.csr_array
        Canonical ``(nx*ny, nx*ny)`` matrix with 8 on the diagonal and -1 for
        each of the eight neighbours, and ``(3*nx - 2) * (3*ny - 2)``
        non-zeros. Row ``x + nx*y`` belongs to grid point ``(x, y)``.

    Raises
    ------
    TypeError
        If a grid size is not an integer, or the dtype is not a supported
        numeric one (bool cannot hold -1).
    ValueError
        If a grid size is not positive, or the grid has more than 2^35 points.

    Notes
    -----
    At full size, 1024², n = 1,048,576 and nnz = 9,424,900.
    """
    return _stencil(_grid(nx=nx, ny=ny), 2, 8, dtype)


def poisson3d_7pt(
    nx: int = 101,
    ny: int | None = None,
    nz: int | None = None,
    *,
    dtype: DTypeLike = np.float64,
) -> sp.csr_array:
    """Seven-point finite-difference Laplacian on an ``nx × ny × nz`` grid (ESC Table 3, 2a).

    Parameters
    ----------
    nx : int, optional
        Grid points along x, the fastest-varying index. The default gives
        the full-size matrix of the paper.
    ny, nz : int, optional
        Grid points along y and z; `nx` when omitted.
    dtype : dtype-like, optional
        Type of the values, ``float64`` by default.

    Returns
    -------
    scipy.sparse.csr_array
        Canonical ``(nx*ny*nz, nx*ny*nz)`` matrix with 6 on the diagonal and
        -1 for each of the six neighbours, and
        ``7*nx*ny*nz - 2*(nx*ny + ny*nz + nz*nx)`` non-zeros. Row
        ``x + nx*(y + ny*z)`` belongs to grid point ``(x, y, z)``.

    Raises
    ------
    TypeError
        If a grid size is not an integer, or the dtype is not a supported
        numeric one (bool cannot hold -1).
    ValueError
        If a grid size is not positive, or the grid has more than 2^35 points.

    Notes
    -----
    At full size, 101³, n = 1,030,301 and nnz = 7,150,901.
    """
    return _stencil(_grid(nx=nx, ny=ny, nz=nz), 1, 6, dtype)


def poisson3d_27pt(
    nx: int = 101,
    ny: int | None = None,
    nz: int | None = None,
    *,
    dtype: DTypeLike = np.float64,
) -> sp.csr_array:
    """27-point finite-element Laplacian on an ``nx × ny × nz`` grid (ESC Table 3, 2b).

    Parameters
    ----------
    nx : int, optional
        Grid points along x, the fastest-varying index. The default gives
        the full-size matrix of the paper.
    ny, nz : int, optional
        Grid points along y and z; `nx` when omitted.
    dtype : dtype-like, optional
        Type of the values, ``float64`` by default.

    Returns
    -------
    scipy.sparse.csr_array
        Canonical ``(nx*ny*nz, nx*ny*nz)`` matrix with 26 on the diagonal and
        -1 for each of the 26 neighbours, and
        ``(3*nx - 2) * (3*ny - 2) * (3*nz - 2)`` non-zeros. Row
        ``x + nx*(y + ny*z)`` belongs to grid point ``(x, y, z)``.

    Raises
    ------
    TypeError
        If a grid size is not an integer, or the dtype is not a supported
        numeric one (bool cannot hold -1).
    ValueError
        If a grid size is not positive, or the grid has more than 2^35 points.

    Notes
    -----
    At full size, 101³, n = 1,030,301 and nnz = 27,270,901. Building it
    takes about 1 GB of temporaries.
    """
    return _stencil(_grid(nx=nx, ny=ny, nz=nz), 3, 26, dtype)


#: The structured matrices of ESC Table 3 by name; each callable returns the
#: full-size matrix.
STRUCTURED: dict[str, Callable[[], sp.csr_array]] = {
    "2d-5pt": poisson2d_5pt,
    "2d-9pt": poisson2d_9pt,
    "3d-7pt": poisson3d_7pt,
    "3d-27pt": poisson3d_27pt,
}


def _grid(**sizes: int | None) -> tuple[int, ...]:
    """Validate grid sizes, fastest-varying first; a missing size is the first one."""
    names = list(sizes)
    grid = []
    for name in names:
        size = sizes[name]
        if size is None and grid:
            size = grid[0]
        if isinstance(size, (bool, np.bool_)) or not isinstance(size, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {type(size).__name__}")
        if size < 1:
            raise ValueError(f"{name} must be positive, got {size}")
        grid.append(int(size))
    return tuple(grid)


def _stencil(grid: Sequence[int], norm: int, diagonal: float, dtype: DTypeLike) -> sp.csr_array:
    """Laplacian coupling grid points whose offsets have at most `norm` non-zero components.

    ``norm=1`` gives the 5- and 7-point stencils and ``norm=len(grid)`` the
    9- and 27-point ones. Off-diagonal values are -1.
    """
    ndim = len(grid)
    # Python ints: a product past int64 wrapped round (to 0: an empty matrix)
    n = math.prod(grid)
    if n > MAX_DIM:
        raise ValueError(f"the grid {'x'.join(map(str, grid))} has {n:,} points, more than a "
                         f"BitmapMatrix's {MAX_DIM:,} rows")
    dtype = check_dtype(dtype)
    if dtype == np.bool_:
        raise TypeError("dtype bool cannot hold the stencil's -1 entries; use a numeric dtype")
    # Offsets in lexicographic order, slowest axis first, are ascending in
    # their linear offset, so each row's columns come out sorted.
    offsets = np.array(np.meshgrid(*[[-1, 0, 1]] * ndim, indexing="ij")).reshape(ndim, -1).T
    offsets = offsets[np.count_nonzero(offsets, axis=1) <= norm][:, ::-1]  # fastest axis first
    strides = np.cumprod([1, *grid[:-1]])
    linear = offsets @ strides

    valid = np.ones((n, len(offsets)), dtype=bool)
    coordinate = np.arange(n)
    for axis, size in enumerate(grid):
        # inside[c + 1, i]: coordinate i + c is on the grid
        inside = np.ones((3, size), dtype=bool)
        inside[0, 0] = inside[2, -1] = False
        x = coordinate % size
        coordinate //= size
        valid &= inside[offsets[:, axis] + 1][:, x].T
    row_nnz = np.count_nonzero(valid, axis=1)
    nnz = int(row_nnz.sum())
    index_dtype = get_index_dtype(max(n, nnz))
    indptr = np.zeros(n + 1, dtype=index_dtype)
    np.cumsum(row_nnz, out=indptr[1:])
    indices = (np.arange(n, dtype=index_dtype)[:, None] + linear.astype(index_dtype))[valid]
    values = np.where(linear == 0, diagonal, -1).astype(dtype)
    data = np.broadcast_to(values, valid.shape)[valid]
    return sp.csr_array((data, indices, indptr), shape=(n, n))


def product_stats(a: Any, *, block_size: int = BLOCK) -> dict[str, int | float | None]:
    """Measure a sparse matrix and the work and output of ``a @ a``.

    Parameters
    ----------
    a : scipy sparse array or matrix, shape (n_rows, n_cols)
        Any format. Duplicates are summed first; explicitly stored zeros
        count as entries, since only the pattern matters.
    block_size : int, optional
        Edge of the square blocks counted in ``"blocks"``, ``BLOCK`` (8) by
        default.

    Returns
    -------
    dict
        ``n_rows``, ``n_cols``, ``nnz`` (stored entries), ``max_row_nnz``;
        ``blocks``, the number of ``block_size × block_size`` blocks, aligned
        at multiples of `block_size`, that hold at least one entry;
        ``nnz_per_block`` (0.0 when there are no blocks); ``multiplies``, the
        scalar products ``a @ a`` takes, ``sum_k nnz(a[:, k]) * nnz(a[k, :])``;
        and ``nnz_product``, the number of entries of the pattern of
        ``a @ a``. The last two are None unless `a` is square.

    Raises
    ------
    TypeError
        If `a` is not a scipy sparse array or matrix, or `block_size` not an
        integer.
    ValueError
        If `a` is not 2-D or `block_size` is not positive.

    Notes
    -----
    Time is O(nnz log nnz + multiplies). `a` is not modified. The pattern
    product is formed with scipy, one byte per value, in row chunks of about
    :data:`PRODUCT_CHUNK_MULTIPLIES` multiplies, so the peak memory of a
    chunk stays below ~5 bytes per multiply. On the WebBase-1M surrogate the
    whole call takes about 1.3 s; on ``poisson3d_27pt()``, whose product has
    124 million entries, about 5 s.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> stats = product_stats(sp.eye_array(16, format="csr"))
    >>> stats["blocks"], stats["multiplies"], stats["nnz_product"]
    (2, 16, 16)
    """
    if not sp.issparse(a):
        raise TypeError(f"a must be a scipy sparse array or matrix, got {type(a).__name__}")
    if a.ndim != 2:
        raise ValueError(f"a must be 2-D, got shape {a.shape}")
    (block_size,) = _grid(block_size=block_size)  # a positive integer
    a = sp.csr_array(a)
    if not a.has_canonical_format:
        a = a.copy()
        a.sum_duplicates()
    n_rows, n_cols = a.shape
    indptr = a.indptr.astype(np.int64)
    indices = a.indices.astype(np.int64)
    row_nnz = np.diff(indptr)

    # Within a row the block columns are sorted, so dropping repeats there
    # shrinks the global sort to roughly one key per (row, block).
    block_col = indices // block_size
    row = np.repeat(np.arange(n_rows, dtype=np.int64), row_nnz)
    new = np.ones(indices.size, dtype=bool)
    new[1:] = (block_col[1:] != block_col[:-1]) | (row[1:] != row[:-1])
    n_block_cols = -(-n_cols // block_size)
    keys = np.sort((row[new] // block_size) * n_block_cols + block_col[new])
    blocks = int(np.count_nonzero(np.diff(keys))) + (keys.size > 0)

    stats: dict[str, int | float | None] = {
        "n_rows": n_rows,
        "n_cols": n_cols,
        "nnz": int(a.nnz),
        "max_row_nnz": int(row_nnz.max(initial=0)),
        "blocks": blocks,
        "nnz_per_block": a.nnz / blocks if blocks else 0.0,
        "multiplies": None,
        "nnz_product": None,
    }
    if n_rows != n_cols:
        return stats
    col_nnz = np.bincount(indices, minlength=n_cols)
    stats["multiplies"] = int(row_nnz @ col_nnz)

    pattern = sp.csr_array((np.ones(a.nnz, dtype=bool), a.indices, a.indptr), shape=a.shape)
    # work[i]: multiplies of the rows before row i
    work = np.concatenate([[0], np.cumsum(row_nnz[indices])])[indptr]
    chunks = np.arange(1, work[-1] // PRODUCT_CHUNK_MULTIPLIES + 1) * PRODUCT_CHUNK_MULTIPLIES
    bounds = np.unique(np.concatenate([[0], np.searchsorted(work, chunks), [n_rows]]))
    stats["nnz_product"] = sum(
        int((pattern[lo:hi] @ pattern).nnz) for lo, hi in zip(bounds[:-1], bounds[1:])
    )
    return stats
