"""Tests for bmsparse._readers: Matrix Market, SuiteSparse archives, edge lists."""

from __future__ import annotations

import gzip
import http.server
import io
import os
import re
import socket
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from numpy.testing import assert_array_equal

from bmsparse import _readers
from bmsparse._readers import (
    download_suitesparse,
    matrix_files,
    read_manifest,
    read_matrix,
)

CORPUS = Path(os.environ.get("BMSPARSE_MATRICES")
              or Path(__file__).resolve().parents[1].parent / "shared" / "matrices")
MANIFEST_ROWS = read_manifest(CORPUS) if CORPUS.is_dir() else []
# One placeholder keeps the corpus tests collected (and reported as skipped)
# on a checkout without the shared folder.
CORPUS_PARAMS = ([pytest.param(e, id=str(e["name"])) for e in MANIFEST_ROWS]
                 or [pytest.param(None, id="no-corpus")])

FIELD_DTYPES = {"pattern": np.float64, "real": np.float64,
                "integer": np.int64, "complex": np.complex128}


def need_corpus() -> None:
    if not MANIFEST_ROWS:
        pytest.skip(f"matrix corpus not found at {CORPUS} (set BMSPARSE_MATRICES)")


def corpus_matrix(name: str) -> sp.csr_array:
    need_corpus()
    entry = next(e for e in MANIFEST_ROWS if e["name"] == name)
    return read_matrix(CORPUS / str(entry["file"]))


def mm_bytes(a: sp.sparray | np.ndarray, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    scipy.io.mmwrite(buf, a, **kwargs)
    return buf.getvalue()


def write_archive(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def assert_same(got: sp.csr_array, expected: sp.sparray) -> None:
    assert isinstance(got, sp.csr_array)
    assert got.has_canonical_format
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    assert got.nnz == expected.nnz
    assert_array_equal(got.toarray(), expected.toarray())


#   0 1 2 3 4
# 0 . 1 . . .
# 1 2 . . 0      <- explicit zero at (1, 3)
# 2 . . 3 . .
# 3 . . . . 4.5
SMALL = sp.coo_array((np.array([1.0, 2.0, 0.0, 3.0, 4.5]),
                      (np.array([0, 1, 1, 2, 3]), np.array([1, 0, 3, 2, 4]))),
                     shape=(4, 5))


# ---------------------------------------------------------------- real corpus

@pytest.mark.parametrize("entry", CORPUS_PARAMS)
def test_corpus_matches_manifest(entry: dict | None) -> None:
    need_corpus()
    a = read_matrix(CORPUS / entry["file"])
    assert isinstance(a, sp.csr_array)
    assert a.has_canonical_format
    assert a.shape == (entry["rows"], entry["cols"])
    assert a.nnz == entry["nnz"]
    assert a.dtype == FIELD_DTYPES[entry["field"]]


def test_corpus_matrix_files_lists_the_manifest() -> None:
    need_corpus()
    pairs = matrix_files(CORPUS)
    assert [name for name, _ in pairs] == sorted(str(e["name"]) for e in MANIFEST_ROWS)
    assert all(path.is_file() for _, path in pairs)
    on_disk = {p.name for p in CORPUS.iterdir()
               if _readers._split_suffix(p) and p.name not in ("MANIFEST.tsv", "PROVENANCE.tsv")}
    assert {path.name for _, path in pairs} == on_disk


def test_corpus_hermitian_is_expanded_with_the_conjugate() -> None:
    a = corpus_matrix("mhd1280b")
    assert abs(a - a.conj().T).max() == 0
    assert abs(a - a.T).max() > 0


def test_corpus_explicit_zeros_are_kept() -> None:
    # NOTES.md: zenios stores 25877 zeros (counted after symmetric expansion)
    assert np.count_nonzero(corpus_matrix("zenios").data == 0) == 25877


@pytest.mark.parametrize(("name", "self_loops"), [("squirrel", 140), ("ca-GrQc", 12)])
def test_corpus_self_loops(name: str, self_loops: int) -> None:
    assert np.count_nonzero(corpus_matrix(name).diagonal()) == self_loops


def test_corpus_edge_list_ids_are_not_relabelled() -> None:
    # wiki-Vote ids start at 3: rows 0..2 exist but are empty
    a = corpus_matrix("wiki-Vote")
    assert a.indptr[3] == 0
    assert (a.data == 1).all()


def test_corpus_symmetrize_undirected_edge_list() -> None:
    need_corpus()
    a = corpus_matrix("musae_git")
    s = read_matrix(CORPUS / "musae_git_edges.csv", symmetrize=True)
    assert (s != s.T).nnz == 0
    assert (s.data == 1).all()
    # each pair is stored once and there are no self-loops
    assert s.nnz == 2 * a.nnz


# ------------------------------------------------------------ Matrix Market

MM_CASES = {
    "real": (SMALL, {}),
    "integer": (sp.coo_array(SMALL.toarray().astype(np.int64) * 3), {}),
    "complex": (sp.coo_array(SMALL.toarray() * (1 - 2j)), {}),
    "pattern": (sp.coo_array(SMALL.toarray() != 0).astype(np.float64), {"field": "pattern"}),
    "symmetric": (sp.coo_array(np.array([[1.0, 2.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 5.0]])),
                  {"symmetry": "symmetric"}),
    "hermitian": (sp.coo_array(np.array([[1.0, 2 + 1j], [2 - 1j, 0]])), {"symmetry": "hermitian"}),
    "empty": (sp.coo_array((3, 2)), {}),
}


@pytest.mark.parametrize("case", sorted(MM_CASES))
@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz", ".MTX.GZ"])
def test_matrix_market_round_trip(tmp_path: Path, case: str, suffix: str) -> None:
    expected, kwargs = MM_CASES[case]
    data = mm_bytes(expected, **kwargs)
    path = tmp_path / f"m{suffix}"
    path.write_bytes(gzip.compress(data) if suffix.lower().endswith(".gz") else data)
    assert_same(read_matrix(path), expected.tocsr())


def test_matrix_market_sums_duplicates_and_keeps_zeros(tmp_path: Path) -> None:
    path = tmp_path / "dup.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real general\n"
                    "3 3 5\n1 1 1.5\n1 1 2.5\n2 3 0\n3 2 -1\n3 2 1\n")
    a = read_matrix(path)
    assert a.has_canonical_format
    assert a.nnz == 3  # (0,0), and the stored zero (1,2) and the cancelled (2,1)
    assert_array_equal(a.toarray(), [[4.0, 0, 0], [0, 0, 0], [0, 0, 0]])


def test_matrix_market_dense_array_file(tmp_path: Path) -> None:
    path = tmp_path / "dense.mtx"
    path.write_bytes(mm_bytes(np.array([[1.0, 0.0], [0.0, 4.0]])))
    assert_same(read_matrix(path), sp.csr_array(np.array([[1.0, 0.0], [0.0, 4.0]])))


def test_matrix_market_symmetrize_keeps_cancellations(tmp_path: Path) -> None:
    #   . 1 .        . 0 .      (0,1) and (1,0) cancel but stay stored
    #  -1 . 2   ->   0 . 2
    #   . . 3        . 2 6
    path = tmp_path / "s.mtx"
    path.write_bytes(mm_bytes(sp.coo_array(np.array([[0, 1.0, 0], [-1, 0, 2], [0, 0, 3]]))))
    s = read_matrix(path, symmetrize=True)
    assert s.has_canonical_format
    assert s.nnz == 5
    assert_array_equal(s.toarray(), [[0, 0, 0], [0, 0, 2], [0, 2, 6]])


# ---------------------------------------------------- SuiteSparse archives

@pytest.mark.parametrize("suffix", [".tar.gz", ".tgz"])
def test_archive_reads_the_main_member(tmp_path: Path, suffix: str) -> None:
    main = mm_bytes(SMALL)
    # the right-hand side comes first in the archive and is larger, so neither
    # order nor size can pick the main matrix by accident
    extra = mm_bytes(sp.coo_array(np.arange(1.0, 41.0).reshape(8, 5)))
    path = tmp_path / f"NAME{suffix}"
    write_archive(path, {"NAME/NAME_b.mtx": extra, "NAME/NAME.mtx": main,
                         "NAME/README.txt": b"not a matrix\n"})
    assert_same(read_matrix(path), SMALL.tocsr())


def test_flat_archive_reads_the_member_named_like_it(tmp_path: Path) -> None:
    path = tmp_path / "NAME.tar.gz"
    big = sp.coo_array(np.arange(1.0, 41.0).reshape(8, 5))
    write_archive(path, {"big.mtx": mm_bytes(big), "NAME.mtx": mm_bytes(SMALL)})
    assert_same(read_matrix(path), SMALL.tocsr())


def test_archive_without_main_member_reads_the_largest(tmp_path: Path) -> None:
    big = sp.coo_array(np.arange(1.0, 41.0).reshape(8, 5))
    path = tmp_path / "other.tar.gz"
    write_archive(path, {"X/a.mtx": mm_bytes(SMALL), "X/b.mtx": mm_bytes(big),
                         "X/c.mtx": mm_bytes(sp.coo_array((1, 1)))})
    assert_same(read_matrix(path), big.tocsr())


# ---------------------------------------------------------------- edge lists

# name: (file name, file bytes, shape, [(src, dst, value), ...] after summing)
EDGE_CASES = {
    "spaces": ("g.txt", b"0 1\n1 2\n", (3, 3), [(0, 1, 1), (1, 2, 1)]),
    "tabs-crlf": ("g.txt", b"0\t1\r\n2\t0\r\n", (3, 3), [(0, 1, 1), (2, 0, 1)]),
    "csv-crlf-no-header": ("g.csv", b"0,3\r\n1,2\r\n", (4, 4), [(0, 3, 1), (1, 2, 1)]),
    "comments": ("g.txt", b"# Nodes: 3\n% other\n  # indented\n0 1\n# middle\n1 2\n% end",
                 (3, 3), [(0, 1, 1), (1, 2, 1)]),
    "text-header": ("g.txt", b"node_id\tnode_id\n3\t1\n", (4, 4), [(3, 1, 1)]),
    "header-after-comments": ("g.csv", b"# c\nsrc,dst,weight\n0,1,0.5\n", (2, 2),
                              [(0, 1, 0.5)]),
    "weights": ("g.tsv", b"0\t1\t2.5\n1\t0\t-1e-3\n", (2, 2), [(0, 1, 2.5), (1, 0, -1e-3)]),
    "weight-zero-kept": ("g.txt", b"0 1 0\n1 1 1\n", (2, 2), [(0, 1, 0), (1, 1, 1)]),
    "duplicates-summed": ("g.edges", b"0 1\n0 1\n1 0\n0 1\n", (2, 2), [(0, 1, 3), (1, 0, 1)]),
    "weighted-duplicates-summed": ("g.el", b"2 1 1.5\n2 1 2\n", (3, 3), [(2, 1, 3.5)]),
    "blank-lines": ("g.txt", b"\n0 1\n\n   \n1 2\n\n\n", (3, 3), [(0, 1, 1), (1, 2, 1)]),
    "no-final-newline": ("g.txt", b"0 1\n5 4", (6, 6), [(0, 1, 1), (5, 4, 1)]),
    "float-ids": ("g.txt", b"1.0 2.0\n", (3, 3), [(1, 2, 1)]),
    "self-loop": ("g.txt", b"0 0\n", (1, 1), [(0, 0, 1)]),
    "leading-spaces": ("g.txt", b"  0   1  \n\t1 0\n", (2, 2), [(0, 1, 1), (1, 0, 1)]),
    "empty": ("g.txt", b"", (0, 0), []),
    "only-comments": ("g.txt", b"# nothing\n% here\n", (0, 0), []),
    "header-only": ("g.csv", b"src,dst\r\n", (0, 0), []),
    "unsorted": ("g.txt", b"2 2\n0 2\n2 0\n0 1\n", (3, 3),
                 [(0, 1, 1), (0, 2, 1), (2, 0, 1), (2, 2, 1)]),
    "gzipped": ("g.txt.gz", gzip.compress(b"# c\r\n0\t1\r\n0\t1\r\n"), (2, 2), [(0, 1, 2)]),
    "gzipped-csv": ("g.csv.gz", gzip.compress(b"a,b\n1,0\n"), (2, 2), [(1, 0, 1)]),
}


def edge_matrix(shape: tuple[int, int], triples: list) -> sp.csr_array:
    if not triples:
        return sp.csr_array(shape, dtype=np.float64)
    r, c, v = zip(*triples, strict=True)
    return sp.coo_array((np.array(v, dtype=np.float64), (r, c)), shape=shape).tocsr()


@pytest.mark.parametrize("case", list(EDGE_CASES))
def test_edge_list(tmp_path: Path, case: str) -> None:
    name, data, shape, triples = EDGE_CASES[case]
    path = tmp_path / name
    path.write_bytes(data)
    assert_same(read_matrix(path), edge_matrix(shape, triples))


@pytest.mark.parametrize("case", ["weights", "duplicates-summed", "unsorted", "empty"])
def test_edge_list_symmetrize_gives_ones_on_the_union(tmp_path: Path, case: str) -> None:
    name, data, shape, triples = EDGE_CASES[case]
    path = tmp_path / name
    path.write_bytes(data)
    pattern = {(r, c) for r, c, _ in triples} | {(c, r) for r, c, _ in triples}
    assert_same(read_matrix(path, symmetrize=True),
                edge_matrix(shape, [(r, c, 1.0) for r, c in pattern]))


def test_edge_list_large_random(tmp_path: Path) -> None:
    # enough lines that a parse that shifted by one field would show
    rng = np.random.default_rng(42)
    edges = rng.integers(0, 5000, size=(50_000, 2))
    weights = rng.integers(1, 100, size=len(edges)).astype(np.float64) / 4
    path = tmp_path / "big.csv.gz"
    lines = "".join(f"{s},{d},{w}\r\n" for (s, d), w in zip(edges, weights, strict=True))
    path.write_bytes(gzip.compress(("# generated\r\nsrc,dst,w\r\n" + lines).encode()))
    n = int(edges.max()) + 1
    expected = sp.coo_array((weights, (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
    got = read_matrix(path)
    assert got.shape == expected.shape and got.nnz == expected.nnz
    assert_array_equal(got.indices, expected.indices)
    np.testing.assert_allclose(got.data, expected.data, rtol=1e-15)


@pytest.mark.parametrize("prefix", [b"", b"\xef\xbb\xbf", b"  \n"], ids=["plain", "bom", "space"])
@pytest.mark.parametrize("lower", [False, True], ids=["banner", "lower-case-banner"])
def test_edge_list_holding_matrix_market(tmp_path: Path, prefix: bytes, lower: bool) -> None:
    # a lower-case banner, a byte order mark or a blank line first: read as an
    # edge list before, the size line an edge and the indices 0-based
    text = mm_bytes(SMALL)
    if lower:
        text = text.replace(b"%%MatrixMarket", b"%%matrixmarket", 1)
    path = tmp_path / "g.txt"
    path.write_bytes(prefix + text)
    assert_same(read_matrix(path), SMALL.tocsr())


def test_edge_list_after_a_byte_order_mark(tmp_path: Path) -> None:
    # the mark made the first edge read as a header, and dropped it
    path = tmp_path / "g.csv"
    path.write_bytes(b"\xef\xbb\xbf0,1\n1,2\n")
    assert_same(read_matrix(path), edge_matrix((3, 3), [(0, 1, 1.0), (1, 2, 1.0)]))


# ------------------------------------------------------------------- errors

ERROR_CASES = {
    "extension": ("m.dat", b"0 1\n", ValueError, r"has an unsupported extension; supported: "),
    "bare-gz": ("m.gz", b"", ValueError, r"m\.gz'? has an unsupported extension"),
    "four-columns": ("g.txt", b"0 1 2 3\n", ValueError,
                     r"g\.txt: line 1: an edge list has 2 columns \(src dst\) or 3 .*got 4"),
    "one-column": ("g.txt", b"# c\n7\n", ValueError, r"line 2: .*got 1"),
    "missing-field": ("g.txt", b"0 1\n2\n3 4\n", ValueError,
                      r"line 2: expected 2 numbers \(src dst\) like the first edge, got '2'"),
    "extra-field": ("g.txt", b"0 1\n2 3 4\n5 6\n", ValueError,
                    r"line 2: expected 2 numbers \(src dst\) like the first edge, got '2 3 4'"),
    "text-in-body": ("g.csv", b"src,dst\n0,1\nfoo,1\n", ValueError,
                     r"line 3: expected 2 numbers \(src dst\) like the first edge, got 'foo,1'"),
    "trailing-comment": ("g.txt", b"0 1\n2 3 # why\n", ValueError,
                         (r"line 2: expected 2 numbers \(src dst\) like the first edge, "
                          r"got '2 3 # why'")),
    "first-line-comment": ("g.txt", b"0 1 # why\n", ValueError, r"line 1: .* got 4"),
    "second-header": ("g.csv", b"a,b\r\nc,d\r\n0,1\r\n", ValueError,
                      r"line 2: expected 'src dst' or 'src dst weight', got 'c,d'"),
    "negative-id": ("g.txt", b"0 1\n-1 2\n", ValueError,
                    r"node ids must be non-negative, got \(-1, 2\) in edge 1"),
    "fractional-id": ("g.txt", b"0 1 1\n0.5 1 2\n", ValueError,
                      r"node ids must be integers, got \(0\.5, 1\.0\) in edge 1"),
    "nan-id": ("g.txt", b"nan 1\n", ValueError, r"node ids must be integers, got \(nan, 1\.0\)"),
    # past the largest dimension: a clear error, not scipy allocating an
    # indptr of 728 TiB, an OverflowError, or 1e20 wrapping to a negative id
    "huge-id": ("g.txt", b"0 1\n0 99999999999999\n", ValueError,
                r"node ids must be below 34359738368 .*got \[0, 99999999999999\] in edge 1"),
    "int64-max-id": ("g.txt", b"0 9223372036854775807\n", ValueError,
                     r"node ids must be below 34359738368 .*in edge 0"),
    "float-huge-id": ("g.txt", b"0 1 2.5\n1e20 1 1\n", ValueError,
                      r"node ids must be below 34359738368 .*got \[1e\+20, 1\.0\] in edge 1"),
    "archive-without-mtx": ("x.tar.gz", None, ValueError, r"x\.tar\.gz'? holds no \.mtx file"),
    # an extra field on two lines and a blank line made the count come out
    # right: read as the wrong graph before; an extra and a missing one too
    "extra-fields-and-blank": ("g.txt", b"0 1\n1 2 5\n3 4 6\n\n", ValueError,
                               r"line 2: expected 2 numbers .* got '1 2 5'"),
    "extra-and-missing": ("g.txt", b"0 1\n1 2 3\n4\n", ValueError,
                          r"line 2: expected 2 numbers .* got '1 2 3'"),
    # truncated or corrupt compressed files: EOFError / tarfile.ReadError before
    "truncated-gz": ("g.txt.gz", gzip.compress(b"0 1\n" * 1000)[:40], ValueError,
                     r"could not be read whole \(EOFError"),
    "not-a-tar": ("x.tar.gz", b"not a tar", ValueError, r"could not be read whole \(ReadError"),
}


def test_read_manifest_after_a_byte_order_mark(tmp_path: Path) -> None:
    # a spreadsheet's mark made the header's first column '\ufeffname': refused
    (tmp_path / "MANIFEST.tsv").write_bytes(
        b"\xef\xbb\xbfname\tfile\trows\tcols\tnnz\ng\tg.txt\t3\t3\t2\n")
    assert read_manifest(tmp_path) == [
        {"name": "g", "file": "g.txt", "rows": 3, "cols": 3, "nnz": 2}]


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_read_matrix_errors(tmp_path: Path, case: str) -> None:
    name, data, error, match = ERROR_CASES[case]
    path = tmp_path / name
    if data is None:
        write_archive(path, {"x/README.txt": b"hello\n"})
    else:
        path.write_bytes(data)
    with pytest.raises(error, match=match):
        read_matrix(path)


def test_unsupported_extension_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "m.npz"
    with pytest.raises(ValueError, match=re.escape(f"path {str(path)!r} has an unsupported")):
        read_matrix(path)


@pytest.mark.parametrize("name", ["none.mtx", "none.mtx.gz", "none.tar.gz", "none.txt",
                                  "none.csv.gz"])
def test_missing_file(tmp_path: Path, name: str) -> None:
    with pytest.raises(FileNotFoundError, match=re.escape(name)):
        read_matrix(tmp_path / name)


def test_symmetrize_needs_a_square_matrix(tmp_path: Path) -> None:
    path = tmp_path / "r.mtx"
    path.write_bytes(mm_bytes(SMALL))
    with pytest.raises(ValueError, match=r"symmetrize needs a square matrix, got shape \(4, 5\)"):
        read_matrix(path, symmetrize=True)


# ------------------------------------------------------------ manifests

MANIFEST_TEXT = ("name\tfile\tcategory\trows\tcols\tnnz\tfield\n"
                 "zeta\tz.txt\tsocial\t3\t3\t2\tpattern\r\n"
                 "alpha\ta.mtx.gz\tfem\t4\t5\t5\treal\n\n")


def test_read_manifest(tmp_path: Path) -> None:
    (tmp_path / "MANIFEST.tsv").write_text(MANIFEST_TEXT)
    assert read_manifest(tmp_path) == [
        {"name": "zeta", "file": "z.txt", "category": "social", "rows": 3, "cols": 3,
         "nnz": 2, "field": "pattern"},
        {"name": "alpha", "file": "a.mtx.gz", "category": "fem", "rows": 4, "cols": 5,
         "nnz": 5, "field": "real"},
    ]


def test_read_manifest_missing(tmp_path: Path) -> None:
    assert read_manifest(tmp_path) == []


@pytest.mark.parametrize(("text", "match"), [
    ("name\tfile\trows\nm\tm.mtx\tmany\n",
     r"MANIFEST\.tsv: line 2: rows must be an integer, got 'many'"),
    ("name\tfile\tnnz\nm\tm.mtx\n", r"line 2: nnz must be an integer, got ''"),
    ("name\tfile\nm\tm.mtx\textra\n", r"line 2: expected at most 2 tab-separated fields, got 3"),
])
def test_read_manifest_errors(tmp_path: Path, text: str, match: str) -> None:
    (tmp_path / "MANIFEST.tsv").write_text(text)
    with pytest.raises(ValueError, match=match):
        read_manifest(tmp_path)


def test_matrix_files_from_manifest(tmp_path: Path) -> None:
    (tmp_path / "MANIFEST.tsv").write_text(MANIFEST_TEXT)
    (tmp_path / "unlisted.mtx").write_bytes(mm_bytes(SMALL))
    assert matrix_files(tmp_path) == [("alpha", tmp_path / "a.mtx.gz"),
                                      ("zeta", tmp_path / "z.txt")]


def test_matrix_files_without_manifest(tmp_path: Path) -> None:
    for name in ["b.mtx.gz", "a.mtx", "c.tar.gz", "d.TXT", "e.csv.gz", "f.tgz", "g.el",
                 "PROVENANCE.tsv", "NOTES.md", "h.npz", "x.gz"]:
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "folder.txt").mkdir()
    assert matrix_files(tmp_path) == [
        (stem, tmp_path / name) for stem, name in
        [("a", "a.mtx"), ("b", "b.mtx.gz"), ("c", "c.tar.gz"), ("d", "d.TXT"),
         ("e", "e.csv.gz"), ("f", "f.tgz"), ("g", "g.el")]]


def test_matrix_files_manifest_without_file_column(tmp_path: Path) -> None:
    (tmp_path / "MANIFEST.tsv").write_text("name\trows\nm\t3\n")
    match = r"must name the columns name and file, got \['name', 'rows'\]"
    with pytest.raises(ValueError, match=match):
        matrix_files(tmp_path)


# ------------------------------------------------------------ downloads

@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep urllib from sending localhost requests to a configured proxy."""
    for var in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)


@pytest.fixture
def closed_port_url(no_proxy: None) -> str:
    """An http URL on localhost where nothing listens: refused at once, offline too."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/MM"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_root(tmp_path: Path, no_proxy: None):
    """A local HTTP server over a folder: (folder, base URL)."""
    root = tmp_path / "www"
    root.mkdir()

    def handler(*args, **kwargs):
        return _QuietHandler(*args, directory=str(root), **kwargs)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_download_unreachable(tmp_path: Path, closed_port_url: str) -> None:
    url = f"{closed_port_url}/Williams/webbase-1M.tar.gz"
    with pytest.raises(ConnectionError) as info:
        download_suitesparse("Williams", "webbase-1M", tmp_path, base_url=closed_port_url,
                             timeout=5)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"download of {url} failed: ")
    assert re.search(r"refused|Errno", message)
    assert message.endswith("download webbase-1M.tar.gz by hand and pass its path "
                            "instead (the benchmark takes --matrix PATH)")
    assert list((tmp_path / "Williams").iterdir()) == []  # no partial file left


def test_download_module_url_is_read_at_call_time(tmp_path: Path, closed_port_url: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_readers, "SUITESPARSE_URL", closed_port_url + "/")
    with pytest.raises(ConnectionError, match=re.escape(f"{closed_port_url}/G/n.tar.gz failed")):
        download_suitesparse("G", "n", tmp_path, timeout=5)


def test_download_cache_hit_needs_no_network(tmp_path: Path, closed_port_url: str) -> None:
    cached = tmp_path / "Williams" / "webbase-1M.tar.gz"
    cached.parent.mkdir()
    cached.write_bytes(b"\x1f\x8bcached")
    assert download_suitesparse("Williams", "webbase-1M", tmp_path,
                                base_url=closed_port_url) == cached
    assert cached.read_bytes() == b"\x1f\x8bcached"


def test_download_default_cache_dir(tmp_path: Path, closed_port_url: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    cached = tmp_path / ".cache" / "bmsparse" / "G" / "n.tar.gz"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"\x1f\x8b")
    assert download_suitesparse("G", "n", base_url=closed_port_url) == cached


def test_download_over_http_then_read(tmp_path: Path, http_root: tuple[Path, str]) -> None:
    root, base_url = http_root
    source = root / "Grp" / "NAME.tar.gz"
    source.parent.mkdir()
    write_archive(source, {"NAME/NAME.mtx": mm_bytes(SMALL)})
    cache = tmp_path / "cache"
    path = download_suitesparse("Grp", "NAME", cache, base_url=base_url)
    assert path == cache / "Grp" / "NAME.tar.gz"
    assert path.read_bytes() == source.read_bytes()
    assert [p.name for p in path.parent.iterdir()] == ["NAME.tar.gz"]
    assert_same(read_matrix(path), SMALL.tocsr())


@pytest.mark.parametrize(("served", "match"), [
    pytest.param(None, r"failed: HTTP 404 File not found; download NAME\.tar\.gz by hand",
                 id="404"),
    pytest.param(b"<html>oops</html>",
                 r"failed: the server sent b'<h'\.\.\., not gzip data; download",
                 id="not-gzip"),
])
def test_download_bad_response(tmp_path: Path, http_root: tuple[Path, str],
                               served: bytes | None, match: str) -> None:
    root, base_url = http_root
    if served is not None:
        (root / "Grp").mkdir()
        (root / "Grp" / "NAME.tar.gz").write_bytes(served)
    cache = tmp_path / "cache"
    with pytest.raises(ConnectionError, match=match):
        download_suitesparse("Grp", "NAME", cache, base_url=base_url)
    assert list((cache / "Grp").iterdir()) == []


@pytest.mark.parametrize(("group", "name", "error", "match"), [
    ("Williams", "", ValueError,
     r"name must be a SuiteSparse matrix name without path separators, got ''"),
    ("..", "x", ValueError, r"group must be a SuiteSparse group name .*got '\.\.'"),
    ("a/b", "x", ValueError, r"got 'a/b'"),
    ("G", 5, TypeError, r"name must be a str, got int"),
])
def test_download_bad_names(tmp_path: Path, group: object, name: object, error: type,
                            match: str) -> None:
    with pytest.raises(error, match=match):
        download_suitesparse(group, name, tmp_path)  # type: ignore[arg-type]
