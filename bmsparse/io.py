"""Matrix Market files as BitmapMatrix, on the host."""

from __future__ import annotations

import os
from typing import Any

import scipy.io

from ._matrix import BitmapMatrix
from ._readers import read_matrix


def mmread(path: str | os.PathLike) -> BitmapMatrix:
    """Read a Matrix Market file (``.mtx``, ``.mtx.gz``, or a SuiteSparse ``.tar.gz``).

    Parameters
    ----------
    path : str or PathLike

    Returns
    -------
    BitmapMatrix
        On the host; ``.to_device()`` moves it to the GPU. Pattern files give
        float64 ones, as scipy reads them; stored zeros are kept.

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
    """
    return BitmapMatrix(read_matrix(path))


def mmwrite(path: str | os.PathLike, a: Any, *, comment: str = "") -> None:
    """Write a matrix (a BitmapMatrix or anything it accepts) as Matrix Market.

    A ``.gz`` suffix writes gzip. A BitmapMatrix on the GPU is copied to the
    host first.
    """
    m = a if isinstance(a, BitmapMatrix) else BitmapMatrix(a)
    c = m.to_scipy()
    if os.fspath(path).endswith(".gz"):
        import gzip

        with gzip.open(path, "wb") as f:
            scipy.io.mmwrite(f, c, comment=comment)
    else:
        scipy.io.mmwrite(path, c, comment=comment)
