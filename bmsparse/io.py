"""Matrix Market files as BitmapMatrix, on the host."""

from __future__ import annotations

import gzip
import os
from typing import Any

import scipy.io

from ._matrix import BitmapMatrix
from ._readers import mm_banner, read_matrix
from ._sputils import check_dtype


def mmread(path: str | os.PathLike, *, dtype: Any = None) -> BitmapMatrix:
    """Read a Matrix Market file (``.mtx``, ``.mtx.gz``, or a SuiteSparse ``.tar.gz``).

    Parameters
    ----------
    path : str or PathLike
    dtype : dtype, optional
        Cast the values to it. Matrix Market stores no width, so by default
        ``integer`` files give int64, ``real`` float64 and ``complex``
        complex128; ``dtype`` restores what was written (values written from
        float32 or complex64 read back exactly).

    Returns
    -------
    BitmapMatrix
        On the host; ``.to_device()`` moves it to the GPU. A ``pattern``
        ``.mtx``/``.mtx.gz`` file gives a bool (pattern) matrix, as
        :func:`mmwrite` writes one (a pattern member of an archive gives
        float64 ones, as scipy reads it); stored zeros are kept (but by
        ``dtype=bool``: a bool matrix stores no False).

    Raises
    ------
    TypeError
        ``dtype`` is not supported.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, tempfile, os
    >>> from bmsparse import BitmapMatrix, mmread, mmwrite
    >>> path = os.path.join(tempfile.mkdtemp(), "a.mtx")
    >>> mmwrite(path, BitmapMatrix(sp.csr_array(np.eye(3))))
    >>> mmread(path).toarray()
    array([[1., 0., 0.],
           [0., 1., 0.],
           [0., 0., 1.]])
    >>> mmwrite(path, BitmapMatrix(np.eye(2, dtype=bool)))
    >>> mmread(path)
    <2x2 BitmapMatrix of dtype bool with 2 stored elements in 1 8x8 blocks, on the host>
    """
    dtype = None if dtype is None else check_dtype(dtype)
    # as scipy reads it (COO): a CSR's row pointer would grow with the rows
    a = read_matrix(path, canonical=False)
    if dtype is None and _is_pattern(path):
        dtype = bool
    m = BitmapMatrix(a)
    return m if dtype is None else m.astype(dtype, copy=False)


def _is_pattern(path: str | os.PathLike) -> bool:
    """True for a ``.mtx`` or ``.mtx.gz`` file whose banner says ``pattern``."""
    name = os.fspath(path).lower()
    if not name.endswith((".mtx", ".mtx.gz")):
        return False
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rb") as f:
        banner = mm_banner(f)
    return banner is not None and banner[2] == b"pattern"


def mmwrite(path: str | os.PathLike, a: Any, *, comment: str | None = "") -> None:
    """Write a matrix (a BitmapMatrix or anything it accepts) as Matrix Market.

    A ``.gz`` suffix writes gzip. A bool matrix is written as ``pattern``,
    integers as ``integer``, floats as ``real`` and complex as ``complex``.
    A BitmapMatrix on the GPU is copied to the host first.
    """
    m = a if isinstance(a, BitmapMatrix) else BitmapMatrix(a)
    c = m.to_scipy()
    field = "pattern" if m.dtype == bool else None
    # opened here, not by scipy: scipy 1.17's writer given a path it cannot
    # open (a missing folder) returns without an error and writes nothing
    opener = gzip.open if os.fspath(path).lower().endswith(".gz") else open
    with opener(path, "wb") as f:
        if field == "pattern" and c.nnz == 0:
            # scipy writes an empty matrix as "real" whatever the field: it
            # would read back as float64
            lines = ["%%MatrixMarket matrix coordinate pattern general",
                     *(f"%{line}" for line in (comment or "").splitlines()),
                     f"{c.shape[0]} {c.shape[1]} 0", ""]
            f.write("\n".join(lines).encode())
        else:
            scipy.io.mmwrite(f, c, comment=comment, field=field)
