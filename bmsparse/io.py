"""Matrices in files, on the host: Matrix Market (``mmread``, ``mmwrite``)
and NumPy's ``.npz`` (``save_npz``, ``load_npz``: the bitmap form itself, or
scipy.sparse's files)."""

from __future__ import annotations

import gzip
import io
import os
from typing import Any

import numpy as np
import scipy.io
import scipy.sparse

from ._matrix import BitmapMatrix
from ._readers import is_archive, read_mm
from ._readers import read_matrix as read_matrix_file
from ._sputils import check_dtype, gpu_module


def mmread(path: str | bytes | os.PathLike, *, dtype: Any = None) -> BitmapMatrix:
    """Read a Matrix Market file (of any name, gzipped or not) or a
    SuiteSparse ``.tar.gz`` / ``.tgz`` archive holding one.

    Parameters
    ----------
    path : str, bytes, PathLike or open file
        A file opened for reading (binary or text, gzipped or not) is read
        whole from where it is.
    dtype : dtype, optional
        Cast the values to it. Matrix Market stores no width, so by default
        ``integer`` files give int64, ``real`` float64 and ``complex``
        complex128; ``dtype`` restores what was written (values written from
        float32 or complex64 read back exactly). ``unsigned-integer`` files
        give int64 when every value fits (else pass a dtype).

    Returns
    -------
    BitmapMatrix
        On the host; ``.to_device()`` moves it to the GPU. A ``pattern``
        file gives a bool (pattern) matrix, as :func:`mmwrite` writes one (a
        pattern member of an archive gives float64 ones, as scipy reads it);
        stored zeros are kept (but by ``dtype=bool``: a bool matrix stores
        no False).

    Raises
    ------
    ValueError
        The file is no Matrix Market file (its first line is no
        ``%%MatrixMarket`` banner), or does not parse.
    TypeError
        ``dtype`` is not supported, or an ``unsigned-integer`` file holds a
        value past int64 and no ``dtype`` was given.

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
    stream = hasattr(path, "read")
    path = path if stream else os.fsdecode(path)
    # as scipy reads it (COO): a CSR's row pointer would grow with the rows
    if not stream and is_archive(path):
        a = read_matrix_file(path, canonical=False)
    else:
        a, banner = read_mm(path, canonical=False)
        if dtype is None and banner[2] == b"pattern":
            dtype = np.dtype(bool)
    name = getattr(path, "name", repr(path)) if stream else path
    return BitmapMatrix(a, dtype=_unsigned_as_int64(a, dtype, name))


def _unsigned_as_int64(a: Any, dtype: Any, path: str) -> Any:
    """``dtype``, or int64 where it is None and scipy read an
    ``unsigned-integer`` file as uint64 (no matrix stores it)."""
    if dtype is None and a.dtype.kind == "u":
        if a.nnz and a.data.max() > np.iinfo(np.int64).max:
            raise TypeError(f"{path!r} holds unsigned integers past int64: pass a dtype "
                            f"(float64 keeps their magnitude)")
        return np.dtype(np.int64)
    return dtype


def read_matrix(path: str | bytes | os.PathLike, *, symmetrize: bool = False,
                dtype: Any = None, device: bool = False) -> BitmapMatrix:
    """Read any matrix file of the kinds SuiteSparse and SNAP publish: a
    Matrix Market file (gzipped or not), a SuiteSparse ``.tar.gz`` archive,
    or an edge list (``.txt``, ``.csv``, ``.tsv``, ``.edges``, ``.el``,
    optionally gzipped: ``src dst [weight]`` a line, ``#`` / ``%`` comments
    and a header line skipped, node ids used as 0-based indices).

    Parameters
    ----------
    path : str, bytes or PathLike
    symmetrize : bool
        The undirected graph: ``A + A.T`` over the union of the two
        patterns (an edge list's values are then all 1.0).
    dtype : dtype, optional
        Cast the values to it. By default an edge list gives float64, and a
        Matrix Market file int64, float64 or complex128 by its field, a
        ``pattern`` one float64 ones (as the benchmarks read the corpus;
        :func:`mmread` gives it as a bool pattern).
    device : bool
        Put the matrix on the GPU.

    Returns
    -------
    BitmapMatrix

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        An unknown suffix, contents that do not parse, or ``symmetrize`` of a
        rectangular matrix.
    TypeError
        ``dtype`` is not supported, or an ``unsigned-integer`` file holds a
        value past int64 and no ``dtype`` was given (as :func:`mmread`).
    """
    dtype = None if dtype is None else check_dtype(dtype)
    path = os.fsdecode(path)
    a = read_matrix_file(path, symmetrize=symmetrize)
    # an unsigned-integer Matrix Market file as mmread gives it
    m = BitmapMatrix(a, dtype=_unsigned_as_int64(a, dtype, path))
    return m.to_device() if device else m


def mmwrite(path: str | bytes | os.PathLike, a: Any, *, comment: str | None = "") -> None:
    """Write a matrix (a BitmapMatrix or anything it accepts) as Matrix Market.

    ``path`` may be a file open for writing (binary or text: the matrix is
    written at its position, uncompressed). A ``.gz`` suffix writes gzip. A bool matrix is written as ``pattern``,
    integers as ``integer``, floats as ``real`` and complex as ``complex``,
    every entry stored (``general``: no symmetry is inferred, so stored zeros
    and every pattern survive). A BitmapMatrix on the GPU is copied to the
    host first; the entries go out as COO, whose size does not grow with the
    shape.

    Raises
    ------
    ValueError
        ``path`` names a ``.tar.gz`` / ``.tgz`` archive (it would read back
        as one).
    TypeError
        ``comment`` is not a str or None.
    FileNotFoundError
        ``path``'s folder does not exist.
    """
    if comment is not None and not isinstance(comment, str):
        raise TypeError(f"comment must be a str or None, got {type(comment).__name__}")
    stream = hasattr(path, "write")
    path = path if stream else os.fsdecode(path)
    if not stream and is_archive(path):
        raise ValueError(f"mmwrite writes .mtx or .mtx.gz files; {path!r} would read back "
                         f"as a SuiteSparse archive")
    m = a if isinstance(a, BitmapMatrix) else BitmapMatrix(a)
    c = m.get().tocoo()
    if stream:
        buffer = io.BytesIO()
        _write_mm(buffer, c, comment)
        data = buffer.getvalue()
        path.write(data.decode() if isinstance(path, io.TextIOBase) else data)
        return
    # everything checked before the file is opened: an error must not leave
    # it emptied. Opened here, not by scipy: scipy 1.17's writer given a path
    # it cannot open (a missing folder) returns without an error
    opener = gzip.open if path.lower().endswith(".gz") else open
    with opener(path, "wb") as f:
        _write_mm(f, c, comment)


def _write_mm(f: Any, c: Any, comment: str | None) -> None:
    """COO ``c`` (scipy's) as Matrix Market into the binary stream ``f``; a
    bool matrix as ``pattern``, every entry as ``general``."""
    if c.nnz == 0:
        # scipy writes an empty matrix as "real" whatever the field: a bool,
        # integer or complex one would read back as float64
        field = ("pattern" if c.dtype == bool else "integer" if c.dtype.kind in "iu"
                 else "complex" if c.dtype.kind == "c" else "real")
        lines = [f"%%MatrixMarket matrix coordinate {field} general",
                 *(f"%{line}" for line in (comment or "").splitlines()),
                 f"{c.shape[0]} {c.shape[1]} 0", ""]
        f.write("\n".join(lines).encode())
    else:
        # "general": scipy's inferred symmetry ignores stored zeros (an
        # upper one was dropped) and, below 100 rows, negates bools
        scipy.io.mmwrite(f, c, comment=comment, field="pattern" if c.dtype == bool else None,
                         symmetry="general")


#: the version of the .npz layout :func:`save_npz` writes (a later one is
#: refused by :func:`load_npz` rather than misread)
NPZ_VERSION = 1


def save_npz(file: Any, a: Any, compressed: bool = True) -> None:
    """Save a matrix to a ``.npz`` file in its bitmap form, as
    ``scipy.sparse.save_npz`` saves CSR: :func:`load_npz` reads it back with
    no conversion (a large graph converted once, then loaded as blocks).

    Parameters
    ----------
    file : str, PathLike or file
        NumPy's ``savez`` adds ``.npz`` to a name without it.
    a : BitmapMatrix, or what ``BitmapMatrix()`` takes
        One on the GPU is copied to the host first.
    compressed : bool
        ``numpy.savez_compressed`` (smaller, slower) or ``numpy.savez``.

    Notes
    -----
    The file holds ``format`` (``b"bmp"``), ``version``, ``shape``, ``keys``,
    ``bitmaps`` and, unless ``a`` is a pattern (bool), ``values``: the
    arrays of :class:`BitmapMatrix` less its offsets, which are recounted.
    """
    m = (a if isinstance(a, BitmapMatrix) else BitmapMatrix(a)).get()
    arrays = {"format": np.bytes_(b"bmp"), "version": np.int64(NPZ_VERSION),
              "shape": np.array(m.shape, dtype=np.int64), "keys": m.keys,
              "bitmaps": m.bitmaps}
    if m.values is not None:
        arrays["values"] = m.values
    (np.savez_compressed if compressed else np.savez)(file, **arrays)


def load_npz(file: Any, *, device: bool = False) -> BitmapMatrix:
    """Load a matrix that :func:`save_npz` (or ``scipy.sparse.save_npz``) saved.

    Parameters
    ----------
    file : str, PathLike or file
    device : bool
        Put the matrix on the GPU.

    Returns
    -------
    BitmapMatrix
        Its arrays checked as :meth:`BitmapMatrix.from_blocks` checks them
        (a file is input like any other). A scipy file (CSR, CSC, COO, BSR,
        DIA) is converted, stored zeros kept.

    Raises
    ------
    ValueError
        The file is no ``.npz`` of a sparse matrix, its arrays are
        inconsistent, or it was written by a later layout.
    """
    try:
        loaded = np.load(file, allow_pickle=False)
    except ValueError as exc:  # (a pickle, or no NumPy file at all)
        raise ValueError(f"{file!r} is no .npz file: {exc}") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise ValueError(f"{file!r} holds one array (.npy), not a sparse matrix")
    with loaded:
        if "format" not in loaded:
            raise ValueError(f"{file!r} holds no sparse matrix (an .npz file of "
                             f"bmsparse.save_npz or scipy.sparse.save_npz)")
        fmt = loaded["format"].item()
        if fmt in (b"bmp", "bmp"):
            return _from_npz(loaded, file, device)
    if hasattr(file, "seek"):
        file.seek(0)
    try:
        a = scipy.sparse.load_npz(file)
    except (KeyError, AttributeError, TypeError, NotImplementedError) as exc:
        # scipy's reader meets a missing array (KeyError), a format that is
        # no string or names lil / dok, or a shape that is no pair with
        # errors of its own: a file like any other input is refused clearly
        raise ValueError(f"{file!r} holds no sparse matrix scipy.sparse.load_npz "
                         f"reads: {type(exc).__name__}: {exc}") from None
    m = BitmapMatrix(a)
    return m.to_device() if device else m


def _from_npz(loaded: Any, file: Any, device: bool) -> BitmapMatrix:
    """The BitmapMatrix of a :func:`save_npz` file's arrays (moved to the GPU
    first with ``device``: the checks and the offsets run faster there)."""
    version = loaded["version"] if "version" in loaded else None
    # (int() would take 1.5, True or b"1" for version 1, and fail obscurely
    # on an array of several)
    if version is not None:
        version = version.item() if version.dtype.kind in "iu" and version.size == 1 \
            else repr(version.tolist())
    if version != NPZ_VERSION:
        raise ValueError(f"{file!r} has bitmap layout version {version}; this bmsparse "
                         f"reads version {NPZ_VERSION} (save it again with a bmsparse that "
                         f"reads it, through scipy.sparse.save_npz if need be)")
    missing = {"shape", "keys", "bitmaps"} - set(loaded.files)
    if missing:
        raise ValueError(f"{file!r} lacks {', '.join(sorted(missing))}")
    shape = loaded["shape"]
    if shape.ndim != 1 or shape.dtype.kind not in "iu":
        # (a 0-d one would fail as no iterable, a bool pair pass as (1, 1))
        raise ValueError(f"{file!r}: shape must be a 1-D integer array, got "
                         f"{shape.ndim}-D {shape.dtype.name}")
    arrays = [loaded[name] if name in loaded else None for name in ("keys", "bitmaps", "values")]
    if device:
        xp = gpu_module("load_npz(device=True)")
        arrays = [None if x is None else xp.asarray(x) for x in arrays]
    return BitmapMatrix.from_blocks(*arrays, tuple(shape.tolist()))
