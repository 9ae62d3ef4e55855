"""Host-side reading of sparse matrix files into SciPy.

Pure NumPy/SciPy and the standard library: nothing here touches a GPU. The
readers turn the files found in the wild (Matrix Market, SuiteSparse
collection archives, SNAP-style edge lists) into canonical
``scipy.sparse.csr_array`` objects that the rest of the package and the
benchmarks start from.
"""

from __future__ import annotations

import csv
import gzip
import http.client
import inspect
import io
import os
import re
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zlib
from pathlib import Path, PurePosixPath
from typing import IO, Any

import numpy as np
import scipy.io
import scipy.sparse as sp

from ._format import MAX_DIM

__all__ = [
    "SUITESPARSE_URL",
    "download_suitesparse",
    "matrix_files",
    "read_manifest",
    "read_matrix",
]

PathLike = str | os.PathLike

#: base URL of the SuiteSparse collection's Matrix Market archives;
#: ``download_suitesparse`` reads it at call time, so tests can point it elsewhere
SUITESPARSE_URL = "https://suitesparse-collection-website.herokuapp.com/MM"

MANIFEST = "MANIFEST.tsv"

# Order matters: the longest suffixes come first so "x.mtx.gz" is not taken
# for an edge list and "x.tar.gz" is not taken for a gzipped something else.
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
_MTX_SUFFIXES = (".mtx.gz", ".mtx")
_EDGE_SUFFIXES = tuple(
    s + gz for s in (".txt", ".csv", ".tsv", ".edges", ".el") for gz in (".gz", ""))

#: what read_matrix accepts, for error messages
SUPPORTED_FORMS = ("Matrix Market .mtx/.mtx.gz, SuiteSparse archive .tar.gz/.tgz, "
                   "edge list .txt/.csv/.tsv/.edges/.el (optionally .gz)")

# Tab-separated files that describe a matrix folder; never matrices themselves.
_NOT_MATRICES = frozenset({MANIFEST.lower(), "provenance.tsv"})

_MANIFEST_INTS = ("rows", "cols", "nnz")

_DOWNLOAD_TIMEOUT = 30.0
_CHUNK = 1 << 20

# A comment or blank line, with its line end, anywhere after the leading
# block. Rare, so only searched for when '#' or '%' occurs at all or the line
# count disagrees with the numbers parsed.
_JUNK_LINES = re.compile(rb"^[ \t\r]*(?:[#%][^\n]*)?(?:\n|\Z)", re.MULTILINE)


def _split_suffix(path: Path) -> tuple[str, str, str] | None:
    """(kind, stem, suffix) of a supported file name, or None."""
    lower = path.name.lower()
    for kind, suffixes in (("archive", _ARCHIVE_SUFFIXES), ("mtx", _MTX_SUFFIXES),
                           ("edges", _EDGE_SUFFIXES)):
        for suffix in suffixes:
            if lower.endswith(suffix) and len(lower) > len(suffix):
                return kind, path.name[: -len(suffix)], suffix
    return None


def read_matrix(path: PathLike, *, symmetrize: bool = False,
                canonical: bool = True) -> sp.csr_array | sp.coo_array:
    """Read a sparse matrix file into a canonical CSR array.

    Parameters
    ----------
    path : str or os.PathLike
        One of:

        - Matrix Market ``.mtx`` or gzipped ``.mtx.gz``. Symmetric,
          skew-symmetric and Hermitian storage is expanded; ``pattern``
          becomes float64 ones, ``integer`` int64, ``real`` float64 and
          ``complex`` complex128.
        - SuiteSparse collection archive ``NAME.tar.gz`` / ``NAME.tgz``. The
          member ``NAME/NAME.mtx`` (basename equal to its top folder name plus
          ``.mtx``; for a member outside any folder, the archive's name plus
          ``.mtx``) is read, else the largest ``.mtx`` member; extra members
          such as ``NAME/NAME_b.mtx`` are ignored. The archive is streamed,
          never extracted to disk.
        - Edge list ``.txt``, ``.csv``, ``.tsv``, ``.edges`` or ``.el``, each
          optionally gzipped (``.txt.gz``, ...): one ``src dst`` or
          ``src dst weight`` per line, separated by whitespace, tabs or
          commas. Lines starting with ``#`` or ``%``, blank lines and a
          non-numeric first line (a header such as ``node_id<TAB>node_id``)
          are skipped; CRLF line ends are fine. Node ids are used directly as
          0-based indices, so the shape is ``(max id + 1, max id + 1)``.
          Values are the weight column, else 1.0, as float64.
    symmetrize : bool, optional
        Return ``A + A.T`` on the union of the patterns of ``A`` and ``A.T``
        (entries that cancel are kept as explicit zeros). For an edge list
        every value is then 1.0, so the result is the undirected graph's
        adjacency pattern. Needs a square matrix.
    canonical : bool, optional
        False: a Matrix Market ``.mtx``/``.mtx.gz`` file comes back as scipy
        reads it, a ``coo_array`` with duplicates not yet summed, whose
        memory does not grow with the shape (a CSR's row pointer does).

    Returns
    -------
    csr_array, shape (m, n)
        Canonical CSR: sorted column indices, duplicates summed. Explicitly
        stored zeros are kept, so ``nnz`` counts stored entries.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the extension is not one of the supported forms, the contents do
        not parse (a truncated or corrupt compressed file too), an archive
        holds no ``.mtx`` member, or ``symmetrize`` is asked of a rectangular
        matrix.

    Notes
    -----
    Edge lists are parsed with one vectorized ``numpy.fromstring`` call over
    the whole text, and each line's fields counted in one more pass over the
    bytes (a line with a field too many or too few would shift the rest). 4
    million ``src dst`` lines take about 1.5 s, and half of that is building
    the CSR. With a weight column they take about 4 s, because every number
    must then be parsed as a float. Comment or blank lines after the first
    edge add a regex pass of about 1 s. Peak memory is about twice the
    file's text plus a few arrays of ``nnz`` 8-byte elements.
    Duplicate edges are summed. Matrix Market files are read by
    ``scipy.io.mmread``. Dense Matrix Market ``array`` files are converted
    with their zeros dropped, since a dense file stores no pattern.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "g.csv"
    >>> _ = f.write_text("src,dst\\n0,1\\n0,1\\n2,0\\n")
    >>> a = read_matrix(f)
    >>> a.shape, a.nnz, a.toarray()[0, 1]
    ((3, 3), 2, np.float64(2.0))
    >>> read_matrix(f, symmetrize=True).toarray()
    array([[0., 1., 1.],
           [1., 0., 0.],
           [1., 0., 0.]])
    """
    path = Path(os.fspath(path))
    split = _split_suffix(path)
    if split is None:
        raise ValueError(f"path {str(path)!r} has an unsupported extension; "
                         f"supported: {SUPPORTED_FORMS}")
    kind, _, suffix = split
    opener = gzip.open if suffix.endswith(".gz") else open
    try:
        if kind == "archive":
            a = _read_archive(path)
        elif kind == "mtx":
            a = read_mm(path, canonical or symmetrize)[0]
        else:
            with opener(path, "rb") as f:
                a = _read_edge_list(f.read(), str(path))
    except (EOFError, tarfile.TarError, zlib.error, gzip.BadGzipFile) as exc:
        raise _unreadable(path, exc) from exc
    if symmetrize:
        a = _symmetrize(a, str(path), ones=(kind == "edges"))
    return a


_MMREAD_SPARRAY = "spmatrix" in inspect.signature(scipy.io.mmread).parameters


def is_archive(path: PathLike) -> bool:
    """Whether :func:`read_matrix` reads ``path`` as a SuiteSparse archive (by its name)."""
    split = _split_suffix(Path(os.fsdecode(path)))
    return split is not None and split[0] == "archive"


def read_mm(path: PathLike | IO, canonical: bool = True) -> tuple[Any, list[bytes]]:
    """A Matrix Market file whatever its name (gzip known by its first two
    bytes), or an open file, as :func:`read_matrix` gives an ``.mtx`` one,
    and its banner's words (see :func:`mm_banner`).

    Raises
    ------
    ValueError
        The file's first line is no ``%%MatrixMarket`` banner, or its
        contents do not parse (a truncated or corrupt gzip file too).
    """
    if hasattr(path, "read"):
        return _read_mm_stream(path, canonical)
    path = Path(os.fsdecode(path))
    with open(path, "rb") as raw:
        zipped = raw.read(2) == b"\x1f\x8b"
    try:
        with (gzip.open if zipped else open)(path, "rb") as f:
            return _read_mm_banner(f, str(path), canonical)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise _unreadable(path, exc) from exc


def _read_mm_stream(stream: Any, canonical: bool) -> tuple[Any, list[bytes]]:
    """:func:`read_mm` of an open file (binary or text, gzipped or not),
    read whole first: scipy's reader needs a stream it can seek."""
    data = stream.read()
    if isinstance(data, str):
        data = data.encode()
    name = getattr(stream, "name", repr(stream))
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise _unreadable(Path(str(name)), exc) from exc
    return _read_mm_banner(io.BytesIO(data), str(name), canonical)


def _read_mm_banner(f: IO[bytes], name: str, canonical: bool) -> tuple[Any, list[bytes]]:
    banner = mm_banner(f)
    if banner is None:
        raise ValueError(f"{name!r} is not a Matrix Market file: its first line "
                         f"is no '%%MatrixMarket matrix ...' banner")
    f.seek(0)
    return _read_mm(f, canonical), banner


def _unreadable(path: Path, exc: Exception) -> ValueError:
    """The error of a truncated or corrupt compressed file: its contents do not parse."""
    return ValueError(f"{str(path)!r} could not be read whole ({type(exc).__name__}: "
                      f"{exc}); is the file truncated or corrupt?")


def _read_mm(f: IO[bytes], canonical: bool = True) -> sp.csr_array | sp.coo_array:
    """Matrix Market from an open binary stream, as canonical CSR (else as
    scipy reads it: COO, whose size does not grow with the shape)."""
    empty = _no_rows_array(f)
    if empty is not None:
        shape, dtype = empty
        return sp.csr_array(shape, dtype=dtype)
    m = _mmread(f)
    if isinstance(m, np.ndarray):
        return sp.csr_array(m)
    if not canonical:
        return m
    # tocsr sums duplicates but, unlike eliminate_zeros, keeps stored zeros
    a = sp.csr_array(m.tocsr())
    a.sum_duplicates()
    return a


def mm_banner(f: IO[bytes]) -> list[bytes] | None:
    """The lower-cased words after ``%%MatrixMarket`` on the stream's next
    line (object, format, field, symmetry), or None when it is no banner."""
    words = f.readline(1024).lower().split()
    return words[1:] if len(words) >= 5 and words[0] == b"%%matrixmarket" else None


def _no_rows_array(f: IO[bytes]) -> tuple[tuple[int, int], np.dtype] | None:
    """(shape, dtype) of a dense ``array`` file of no rows, else None; the
    stream is left where it was. scipy 1.17's reader divides by zero on one
    (SIGFPE: the process dies)."""
    if not f.seekable():
        return None
    start = f.tell()
    try:
        banner = mm_banner(f)
        if banner is None or banner[1] != b"array":
            return None
        line = f.readline(1024)
        while line and (not line.strip() or line.lstrip().startswith(b"%")):
            line = f.readline(1024)
        size = line.split()
        if len(size) < 2 or int(size[0]) != 0:
            return None
        dtype = {b"integer": np.int64, b"complex": np.complex128}.get(banner[2], np.float64)
        return (0, int(size[1])), np.dtype(dtype)
    except ValueError:  # not numbers: scipy's reader names what is wrong
        return None
    finally:
        f.seek(start)


def _mmread(f: IO[bytes]) -> Any:
    """``scipy.io.mmread`` of an open stream, its errors raised without the
    process aborting."""
    error = None
    try:
        # scipy >= 1.17 can return a sparse array directly (and warns without the flag)
        return scipy.io.mmread(f, spmatrix=False) if _MMREAD_SPARRAY else scipy.io.mmread(f)
    except Exception as exc:  # noqa: BLE001 - raised again below, unchanged
        # scipy's reader, kept alive by the traceback, seeks the stream when
        # it is freed: freed here, leaving this block, while the stream is
        # open (freed after its `with` has closed it, the seek's error aborts
        # the process, scipy 1.17)
        error = exc.with_traceback(None)
    raise error


def _read_archive(path: Path) -> sp.csr_array:
    """The main matrix of a SuiteSparse ``.tar.gz``, streamed."""
    # Stream mode ("r|*") decompresses once, front to back; random access
    # ("r:gz") would decompress the whole archive to list it and again to seek.
    stem = _split_suffix(path)[1]  # type: ignore[index]
    candidates: list[tuple[int, str]] = []
    with tarfile.open(path, mode="r|*") as tar:
        for member in tar:
            parts = [p for p in PurePosixPath(member.name).parts if p != "."]
            if not member.isfile() or not parts or not parts[-1].lower().endswith(".mtx"):
                continue
            # NAME/NAME.mtx as the collection packs it; a flat archive has no
            # top folder, so its own name stands in
            folder = parts[0] if len(parts) > 1 else stem
            if parts[-1] == folder + ".mtx":
                return _read_member(tar, member)
            candidates.append((member.size, member.name))
    if not candidates:
        raise ValueError(f"archive {str(path)!r} holds no .mtx file")
    largest = max(candidates)[1]
    with tarfile.open(path, mode="r|*") as tar:
        for member in tar:
            if member.name == largest:
                return _read_member(tar, member)
    raise ValueError(f"archive {str(path)!r} changed while it was read")  # pragma: no cover


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> sp.csr_array:
    """The Matrix Market member of an archive read in stream mode."""
    with tar.extractfile(member) as f:  # type: ignore[union-attr]
        # read whole first: scipy's reader seeks its stream on an error, and
        # a stream-mode member cannot seek (the process aborts)
        return _read_mm(io.BytesIO(f.read()))


def _is_number(token: bytes) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _read_edge_list(data: bytes, source: str) -> sp.csr_array:
    """Parse the text of an edge list; ``source`` names it in errors."""
    # a UTF-8 byte order mark would make the first edge read as a header
    data = data.removeprefix(b"\xef\xbb\xbf")
    if data.lstrip()[:14].lower() == b"%%matrixmarket":
        # a Matrix Market file saved as .txt: the size line would read as an
        # edge (a banner in any case: scipy's reader wants this one)
        return _read_mm(io.BytesIO(b"%%MatrixMarket" + data.lstrip()[14:]))
    # Commas become spaces so one whitespace-separated parse covers csv too;
    # '\r' is whitespace to fromstring, so CRLF needs nothing. The same length
    # keeps offsets valid in ``raw``, which error messages quote.
    raw, data = data, data.replace(b",", b" ")

    # Skip the leading comments, blank lines and at most one header line in
    # Python: they are few, and only the first data line decides the layout.
    pos, lineno, header_seen, first = 0, 0, False, None
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        line = data[pos:end].strip()
        lineno += 1
        if line and not line.startswith((b"#", b"%")):
            tokens = line.split()
            # only the first token decides, so "0 1 # note" is a bad edge,
            # not a header that silently swallows it
            if _is_number(tokens[0]):
                first = tokens
                break
            if header_seen:
                raise ValueError(f"{source}: line {lineno}: expected 'src dst' or "
                                 f"'src dst weight', got {_quote(raw[pos:end])}")
            header_seen = True
        pos = end + 1
    if first is None:
        return sp.csr_array((0, 0), dtype=np.float64)
    ncols = len(first)
    if ncols not in (2, 3):
        raise ValueError(f"{source}: line {lineno}: an edge list has 2 columns "
                         f"(src dst) or 3 (src dst weight), got {ncols}")

    body, original = data[pos:], raw[pos:]
    if b"#" in body or b"%" in body:
        body = _JUNK_LINES.sub(b"", body)
    # int64 parses ids exactly and three times faster than float64; a weight
    # column or ids written as "3.0" need the float parse.
    numbers = None
    if ncols == 2:
        try:
            numbers = np.fromstring(body, dtype=np.int64, sep=" ")
        except ValueError:
            pass
    if numbers is None:
        try:
            numbers = np.fromstring(body, dtype=np.float64, sep=" ")
        except ValueError:
            raise (_bad_line(original, source, lineno - 1, ncols)
                   or ValueError(f"{source}: could not parse the edge list as "
                                 f"numbers")) from None
    # A line with a missing or extra field shifts every later number, which a
    # flat parse cannot see, and the total count can miss (an extra field and
    # a missing one, or an extra one and a blank line): every line's fields
    # are counted
    lines = _edge_lines(body, ncols)
    if lines is None or numbers.size != lines * ncols:
        raise (_bad_line(original, source, lineno - 1, ncols)
               or ValueError(f"{source}: could not parse the edge list as "
                             f"{ncols} columns of numbers"))
    numbers = numbers.reshape(-1, ncols)
    ids = numbers[:, :2]
    if ids.size and ids.max() >= MAX_DIM:
        # (before the float ids are cast: 1e20 would wrap to a negative id)
        row = int(np.argmax((ids >= MAX_DIM).any(axis=1)))
        raise ValueError(f"{source}: node ids must be below {MAX_DIM} (the largest "
                         f"dimension a matrix may have), got {ids[row].tolist()} in edge "
                         f"{row} (0-based, comments not counted)")
    if ids.dtype.kind == "f":
        bad = ~np.isfinite(ids) | (ids != np.floor(ids))
        if bad.any():
            row = int(np.argmax(bad.any(axis=1)))
            raise ValueError(f"{source}: node ids must be integers, got "
                             f"{tuple(float(i) for i in ids[row])} in edge {row} "
                             f"(0-based, comments not counted)")
        ids = ids.astype(np.int64)
    if ids.size and ids.min() < 0:
        row = int(np.argmax((ids < 0).any(axis=1)))
        raise ValueError(f"{source}: node ids must be non-negative, got "
                         f"{tuple(int(i) for i in ids[row])} in edge {row} "
                         f"(0-based, comments not counted)")
    values = (numbers[:, 2].astype(np.float64) if ncols == 3
              else np.ones(len(numbers), dtype=np.float64))
    n = int(ids.max()) + 1
    # tocsr sums duplicate edges and sorts the column indices
    a = sp.coo_array((values, (ids[:, 0], ids[:, 1])), shape=(n, n)).tocsr()
    a.sum_duplicates()
    return a


#: the bytes that separate fields: whitespace (commas are spaces by then)
_BLANK = np.zeros(256, dtype=bool)
_BLANK[[ord(c) for c in " \t\n\r\v\f"]] = True


def _edge_lines(text: bytes, ncols: int) -> int | None:
    """The lines of ``text`` that are not blank, or None when one of them
    holds other than ``ncols`` whitespace-separated fields (vectorized: a
    pass over the bytes, about a third of the parse's time)."""
    b = np.frombuffer(text, dtype=np.uint8)
    if b.size == 0:
        return 0
    blank = _BLANK[b]
    starts = ~blank  # a field starts after a blank or at the text's start
    starts[1:] &= blank[:-1]
    firsts = np.concatenate(([0], np.flatnonzero(b == ord("\n")) + 1))
    fields = np.add.reduceat(starts, firsts[firsts < b.size], dtype=np.int64)
    used = fields != 0
    return None if (fields[used] != ncols).any() else int(used.sum())


def _bad_line(body: bytes, source: str, lines_before: int,
              ncols: int) -> ValueError | None:
    """Error for the first malformed line, or None; slow, so only run on doubt."""
    for i, raw in enumerate(body.split(b"\n"), start=lines_before + 1):
        line = raw.strip()
        if not line or line.startswith((b"#", b"%")):
            continue
        tokens = line.replace(b",", b" ").split()
        if len(tokens) != ncols or not all(_is_number(t) for t in tokens):
            layout = "src dst weight" if ncols == 3 else "src dst"
            return ValueError(f"{source}: line {i}: expected {ncols} numbers "
                              f"({layout}) like the first edge, got {_quote(line)}")
    return None


def _quote(line: bytes) -> str:
    """A line of the file as it reads in an error message."""
    return repr(line.strip().decode(errors="replace"))


def _symmetrize(a: sp.csr_array, source: str, *, ones: bool) -> sp.csr_array:
    """``A + A.T`` on the union pattern; explicit zeros and cancellations stay."""
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"symmetrize needs a square matrix, got shape "
                         f"{a.shape} from {source}")
    # Going through COO rather than ``a + a.T`` because scipy's addition
    # drops zero results, which would lose stored zeros from the pattern.
    coo = a.tocoo()
    rows = np.concatenate([coo.row, coo.col])
    cols = np.concatenate([coo.col, coo.row])
    data = np.concatenate([coo.data, coo.data])
    s = sp.coo_array((data, (rows, cols)), shape=a.shape).tocsr()
    s.sum_duplicates()
    if ones:
        s.data[:] = 1
    return s


def read_manifest(folder: PathLike) -> list[dict[str, str | int]]:
    """Parse the ``MANIFEST.tsv`` of a matrix folder.

    Parameters
    ----------
    folder : str or os.PathLike
        Folder holding ``MANIFEST.tsv``: tab-separated, with a header line
        naming the columns (``name``, ``file``, ``category``, ``rows``,
        ``cols``, ``nnz``, ``field``, ...).

    Returns
    -------
    list of dict
        One dict per data line, keyed by the header. ``rows``, ``cols`` and
        ``nnz`` are ints; every other value is the stripped string. ``[]``
        when the folder has no ``MANIFEST.tsv``.

    Raises
    ------
    ValueError
        If a line has more fields than the header, or ``rows``, ``cols`` or
        ``nnz`` is not an integer.
    """
    path = Path(os.fspath(folder)) / MANIFEST
    try:
        text = path.read_text(encoding="utf-8-sig")  # (a spreadsheet's byte order mark)
    except FileNotFoundError:
        return []
    entries: list[dict[str, str | int]] = []
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t",
                            quoting=csv.QUOTE_NONE)
    for row in reader:
        lineno = reader.line_num
        if None in row:
            raise ValueError(f"{path}: line {lineno}: expected at most "
                             f"{len(reader.fieldnames or ())} tab-separated "
                             f"fields, got {len(row) - 1 + len(row[None])}")
        if not any(v and v.strip() for v in row.values()):
            continue
        entry: dict[str, str | int] = {}
        for key, value in row.items():
            value = (value or "").strip()
            if key in _MANIFEST_INTS:
                try:
                    entry[key] = int(value)
                except ValueError:
                    raise ValueError(f"{path}: line {lineno}: {key} must be "
                                     f"an integer, got {value!r}") from None
            else:
                entry[key] = value
        entries.append(entry)
    return entries


def matrix_files(folder: PathLike) -> list[tuple[str, Path]]:
    """List the matrices of a folder as ``(name, path)`` pairs.

    Parameters
    ----------
    folder : str or os.PathLike
        A matrix folder.

    Returns
    -------
    list of (str, pathlib.Path)
        Sorted by name. With a ``MANIFEST.tsv``, one pair per manifest line,
        named by its ``name`` column, with ``path = folder / file`` (the file
        is not checked to exist). Without one, every file whose extension
        ``read_matrix`` supports, named by the file name minus that extension
        (``ca-CondMat.mtx.gz`` -> ``ca-CondMat``); ``MANIFEST.tsv`` and
        ``PROVENANCE.tsv`` are skipped although ``.tsv`` is an edge-list
        extension.

    Raises
    ------
    ValueError
        As ``read_manifest``, or if the manifest lacks a ``name`` or ``file``
        column.
    """
    folder = Path(os.fspath(folder))
    entries = read_manifest(folder)
    if entries:
        missing = [k for k in ("name", "file") if k not in entries[0]]
        if missing:
            raise ValueError(f"{folder / MANIFEST}: the header must name the "
                             f"columns name and file, got {sorted(entries[0])}")
        pairs = [(str(e["name"]), folder / str(e["file"])) for e in entries]
    else:
        pairs = []
        for p in folder.iterdir():
            split = _split_suffix(p)
            if split is not None and p.is_file() and p.name.lower() not in _NOT_MATRICES:
                pairs.append((split[1], p))
    return sorted(pairs, key=lambda pair: (pair[0], str(pair[1])))


def download_suitesparse(group: str, name: str, cache_dir: PathLike | None = None, *,
                         base_url: str | None = None,
                         timeout: float = _DOWNLOAD_TIMEOUT) -> Path:
    """Fetch a SuiteSparse collection archive into a local cache.

    Parameters
    ----------
    group, name : str
        The collection's group and matrix name, e.g. ``"Williams"`` and
        ``"webbase-1M"``.
    cache_dir : str or os.PathLike, optional
        Cache folder; default ``~/.cache/bmsparse``. The archive is stored as
        ``cache_dir/group/name.tar.gz``.
    base_url : str, optional
        Replaces the module constant ``SUITESPARSE_URL``; the archive's URL is
        ``{base_url}/{group}/{name}.tar.gz``.
    timeout : float, optional
        Seconds to wait for the connection and for each read.

    Returns
    -------
    pathlib.Path
        The cached ``.tar.gz``, ready for ``read_matrix``. When it is already
        there, it is returned without any network access.

    Raises
    ------
    ValueError
        If ``group`` or ``name`` is empty or contains a path separator or
        ``..``.
    ConnectionError
        On any network failure, or if the server sends something that is not
        gzip data. The one-line message gives the URL, the reason, and asks
        to download the file by hand and pass its path (the benchmark's
        ``--matrix PATH``).

    Notes
    -----
    The download goes to a temporary file in the cache folder that is
    renamed into place only when complete, so an interrupted download never
    leaves a truncated archive that would later be taken for a cache hit.
    """
    for arg, value in (("group", group), ("name", name)):
        if not isinstance(value, str):
            raise TypeError(f"{arg} must be a str, got {type(value).__name__}")
        if not value or "/" in value or "\\" in value or value in (".", ".."):
            what = "matrix" if arg == "name" else "group"
            raise ValueError(f"{arg} must be a SuiteSparse {what} name without "
                             f"path separators, got {value!r}")
    root = (Path(os.fspath(cache_dir)).expanduser() if cache_dir is not None
            else Path.home() / ".cache" / "bmsparse")
    target = root / group / f"{name}.tar.gz"
    if target.is_file() and target.stat().st_size > 0:
        return target
    base = (SUITESPARSE_URL if base_url is None else base_url).rstrip("/")
    url = f"{base}/{urllib.parse.quote(group)}/{urllib.parse.quote(name)}.tar.gz"

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            _fetch(url, out, timeout, target.name)
        with open(tmp, "rb") as f:
            magic = f.read(2)
        if magic != b"\x1f\x8b":
            raise _download_error(url, f"the server sent {magic!r}..., not gzip data",
                                  target.name)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


# What urllib and http.client raise when the network, DNS, TLS or the server
# fails; URLError, HTTPError and socket timeouts are all OSError.
_NETWORK_ERRORS = (OSError, http.client.HTTPException)


def _fetch(url: str, out: IO[bytes], timeout: float, filename: str) -> None:
    """Copy ``url`` into ``out``; only network failures become ConnectionError."""
    try:
        response = urllib.request.urlopen(url, timeout=timeout)
    except _NETWORK_ERRORS as exc:
        if isinstance(exc, urllib.error.HTTPError):
            exc.close()  # it holds the response's socket
        raise _download_error(url, exc, filename) from exc
    with response:
        while True:
            try:
                chunk = response.read(_CHUNK)
            except _NETWORK_ERRORS as exc:
                raise _download_error(url, exc, filename) from exc
            if not chunk:
                break
            # outside the try: a full disk is an OSError but not a network failure
            out.write(chunk)


def _download_error(url: str, reason: BaseException | str, filename: str) -> ConnectionError:
    """The one-line ConnectionError for a failed download."""
    if isinstance(reason, urllib.error.HTTPError):
        why = f"HTTP {reason.code} {reason.reason}"
    elif isinstance(reason, urllib.error.URLError):
        why = str(reason.reason)
    elif isinstance(reason, TimeoutError):
        why = f"timed out ({reason})" if str(reason) else "timed out"
    elif isinstance(reason, BaseException):
        why = f"{type(reason).__name__}: {reason}"
    else:
        why = reason
    message = (f"download of {url} failed: {why}; download {filename} by hand "
               f"and pass its path instead (the benchmark takes --matrix PATH)")
    return ConnectionError(" ".join(message.split()))
