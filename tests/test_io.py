"""mmread / mmwrite round trips against scipy."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from bmsparse import BitmapMatrix, mmread, mmwrite
from bmsparse._readers import _MMREAD_SPARRAY
from bmsparse.testing import assert_equal
from tests.helpers import assert_same_csr, random_csr


@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
@pytest.mark.parametrize("dtype", ["float64", "int64", "complex128"])
def test_round_trip(tmp_path, suffix, dtype):
    a = random_csr(37, 21, 0.2, seed=5, dtype=dtype)
    path = tmp_path / f"a{suffix}"
    mmwrite(path, BitmapMatrix(a))
    got = mmread(path)
    assert isinstance(got, BitmapMatrix) and not got.on_device
    assert_same_csr(got.to_scipy(), a, rtol=0)


def test_reads_what_scipy_writes_and_keeps_stored_zeros(tmp_path):
    a = sp.coo_array((np.array([1.0, 0.0, 2.0]), (np.array([0, 3, 9]), np.array([4, 4, 0]))),
                     shape=(10, 5))
    path = tmp_path / "z.mtx"
    scipy.io.mmwrite(path, a)
    got = mmread(path)
    assert got.nnz == 3
    assert_same_csr(got.to_scipy(), a.tocsr(), rtol=0)


def test_writes_what_scipy_reads(tmp_path):
    a = random_csr(12, 12, 0.3, seed=2)
    path = tmp_path / "w.mtx"
    mmwrite(path, a, comment="from bmsparse")
    # scipy 1.18 deprecates mmread's default (a coo_matrix) when spmatrix is not given
    read = scipy.io.mmread(path, spmatrix=False) if _MMREAD_SPARRAY else scipy.io.mmread(path)
    assert_same_csr(sp.csr_array(read), a, rtol=0)


FIELDS = {"bool": b"pattern", "int32": b"integer", "int64": b"integer", "float32": b"real",
          "float64": b"real", "complex64": b"complex", "complex128": b"complex"}
#: what a file of each dtype reads back as without ``dtype``
READ_DTYPES = {"bool": "bool", "int32": "int64", "int64": "int64", "float32": "float64",
               "float64": "float64", "complex64": "complex128", "complex128": "complex128"}


def banner(path) -> bytes:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.readline()


@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
@pytest.mark.parametrize("dtype", list(FIELDS))
def test_round_trip_every_dtype(tmp_path, suffix, dtype):
    from tests.cases import named

    a = BitmapMatrix(named("tall", dtype))
    path = tmp_path / f"a{suffix}"
    mmwrite(path, a)
    assert banner(path).split()[3] == FIELDS[dtype]
    got = mmread(path)
    assert got.dtype == READ_DTYPES[dtype]
    assert_same_csr(got.to_scipy(), a.to_scipy().astype(READ_DTYPES[dtype]), rtol=1e-6)
    # float32 and complex64 values are written exactly: they read back bit for bit
    from bmsparse.testing import assert_equal

    assert_equal(mmread(path, dtype=dtype), a)


@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
def test_empty_and_full_block_round_trip(tmp_path, suffix):
    from bmsparse.testing import assert_equal
    from tests.cases import named

    for i, case in enumerate(["empty", "0xn", "full-block", "last-bit"]):
        a = BitmapMatrix(named(case, "float64"))
        path = tmp_path / f"{i}{suffix}"
        mmwrite(path, a)
        assert_equal(mmread(path), a)


@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
@pytest.mark.parametrize("case", ["empty", "0xn", "zero-nnz"])
@pytest.mark.parametrize("dtype", list(FIELDS))
def test_empty_matrix_is_written_in_its_field(tmp_path, suffix, case, dtype):
    # scipy writes an empty matrix as "real" whatever field it is given: a
    # bool, integer or complex one would read back as float64
    from bmsparse.testing import assert_equal
    from tests.cases import named

    a = BitmapMatrix(named(case, dtype))
    path = tmp_path / f"a{suffix}"
    mmwrite(path, a, comment="two\nlines")
    assert banner(path).split()[3] == FIELDS[dtype]
    got = mmread(path)
    assert got.dtype == READ_DTYPES[dtype]
    assert_equal(got, a.astype(READ_DTYPES[dtype]))
    want = scipy.io.mmread(gzip.open(path) if suffix == ".mtx.gz" else path)
    assert want.shape == a.shape and want.nnz == 0


@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
def test_mmwrite_to_a_missing_folder_raises(tmp_path, suffix):
    # scipy's own writer, given this path, writes nothing and raises nothing
    path = tmp_path / "missing" / f"a{suffix}"
    with pytest.raises(FileNotFoundError):
        mmwrite(path, BitmapMatrix(random_csr(5, 4, 0.5, seed=1)))
    assert not path.exists()


def test_mmread_unsupported_dtype(tmp_path):
    path = tmp_path / "a.mtx"
    mmwrite(path, random_csr(5, 5, 0.3, seed=1))
    with pytest.raises(TypeError, match="dtype float16 is not supported"):
        mmread(path, dtype=np.float16)


@pytest.mark.gpu
def test_device_matrix_is_written(tmp_path):
    a = BitmapMatrix(random_csr(20, 11, 0.3, seed=3)).to_device()
    path = tmp_path / "d.mtx.gz"
    mmwrite(path, a)
    assert_same_csr(mmread(path).to_scipy(), a.to_scipy(), rtol=0)


VECTOR_FILE = "%%MatrixMarket vector coordinate real general\n3 1\n1 1\n"
NO_ROWS_FILE = "%%MatrixMarket matrix array integer general\n% none\n0 3\n"


def _write_as(tmp_path, text: str, form: str):
    """``text`` as a file of ``form``: .mtx, .mtx.gz, or the member of a .tar.gz."""
    import tarfile

    if form == ".tar.gz":
        member = tmp_path / "v.mtx"
        member.write_text(text)
        path = tmp_path / "v.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            tar.add(member, arcname="v/v.mtx")
        return path
    path = tmp_path / f"v{form}"
    opener = gzip.open if form.endswith(".gz") else open
    with opener(path, "wt") as f:
        f.write(text)
    return path


def _mmread_in_a_process(path) -> str:
    """What ``mmread(path)`` prints in a process of its own (ValueError's
    message, or the matrix), then "after"; the process must end normally."""
    import subprocess
    import sys

    code = ("import bmsparse\n"
            "try:\n"
            f"    print(bmsparse.mmread({str(path)!r}))\n"
            "except ValueError as e:\n"
            "    print('ValueError:', e)\n"
            "print('after')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, (run.returncode, run.stderr)
    assert run.stdout.rstrip().endswith("after")
    return run.stdout


@pytest.mark.parametrize("form", [".mtx", ".mtx.gz", ".tar.gz"])
def test_a_file_scipy_refuses_raises_and_the_process_goes_on(tmp_path, form):
    # scipy's reader seeked the stream that read_matrix had closed when it
    # was freed after the error: the process aborted (scipy 1.17)
    out = _mmread_in_a_process(_write_as(tmp_path, VECTOR_FILE, form))
    assert "ValueError: Vector Matrix Market files not supported" in out


@pytest.mark.parametrize("form", [".mtx", ".mtx.gz", ".tar.gz"])
def test_a_dense_file_of_no_rows_reads_as_an_empty_matrix(tmp_path, form):
    # scipy 1.17's reader divides by zero on it: SIGFPE, the process died
    out = _mmread_in_a_process(_write_as(tmp_path, NO_ROWS_FILE, form))
    assert "<0x3 BitmapMatrix of dtype int64 with 0 stored elements" in out


def test_an_upper_case_gz_suffix_is_written_and_read_as_gzip(tmp_path):
    path = tmp_path / "A.MTX.GZ"
    a = BitmapMatrix(random_csr(9, 7, 0.3, seed=4))
    mmwrite(path, a)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert_same_csr(mmread(path).to_scipy(), a.to_scipy(), rtol=0)


def test_mmread_of_a_very_tall_sparse_file_grows_with_its_entries(tmp_path):
    # a CSR's row pointer of 10^8 rows (about 2 GB in all) before this; the
    # blocks of two entries now
    import tracemalloc

    path = tmp_path / "t.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real general\n"
                    "100000000 100000000 3\n1 1 1\n1 1 2\n99999999 5 -1\n")
    tracemalloc.start()
    try:
        got = mmread(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak
    want = scipy.io.mmread(path)  # COO: its CSR would be the 2 GB again
    assert got.shape == want.shape and got.nnz == 2
    np.testing.assert_array_equal(got.tocoo().data, [3.0, -1.0])
    np.testing.assert_array_equal(got.tocoo().row, [0, 99999998])


def test_a_none_comment_is_no_comment(tmp_path):
    for a in (BitmapMatrix(random_csr(5, 4, 0.5, seed=1)),
              BitmapMatrix(sp.csr_array((3, 4), dtype=bool))):
        path = tmp_path / "c.mtx"
        mmwrite(path, a, comment=None)
        assert b"None" not in path.read_bytes()
        assert_same_csr(mmread(path).to_scipy(), a.to_scipy(), rtol=0)


@pytest.mark.parametrize("n", [2, 3, 99, 150])
def test_small_square_patterns_and_upper_zeros_are_written(tmp_path, n):
    # scipy's inferred symmetry negated bools below 100 rows (TypeError, the
    # file left empty) and, ignoring stored zeros, dropped an upper one
    rng = np.random.default_rng(n)
    dense = rng.random((n, n)) < 0.3
    dense |= dense.T  # an undirected graph: symmetric
    g = BitmapMatrix(dense)
    zeros = BitmapMatrix(sp.csr_array((np.array([0.0, 2.0]), (np.array([0, 1]),
                                                                np.array([1, 0]))),
                                      shape=(n, n)))
    for a, name in ((g, "g.mtx"), (zeros, "z.mtx")):
        mmwrite(tmp_path / name, a)
        assert banner(tmp_path / name).split()[4] == b"general"
        got = mmread(tmp_path / name)
        assert got.nnz == a.nnz
        assert_equal(got, a)


def test_a_hypersparse_matrix_is_written_as_it_is_read(tmp_path):
    # mmwrite went through a CSR whose row pointer has a word a row (MemoryError)
    path = tmp_path / "h.mtx"
    scipy.io.mmwrite(path, sp.coo_array(([1.5], ([2**33 - 1], [3])), shape=(2**33, 2**33)))
    mmwrite(tmp_path / "again.mtx", mmread(path))
    got = scipy.io.mmread(tmp_path / "again.mtx")
    assert got.shape == (2**33, 2**33) and got.nnz == 1 and got.row[0] == 2**33 - 1


def test_unsigned_integer_files(tmp_path):
    path = tmp_path / "u.mtx"
    path.write_text("%%MatrixMarket matrix coordinate unsigned-integer general\n2 2 1\n1 2 5\n")
    got = mmread(path)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.toarray(), [[0, 5], [0, 0]])
    assert mmread(path, dtype=np.float32).dtype == np.float32
    path.write_text("%%MatrixMarket matrix coordinate unsigned-integer general\n"
                    f"2 2 1\n1 2 {2**64 - 1}\n")
    with pytest.raises(TypeError, match="unsigned integers past int64: pass a dtype"):
        mmread(path)
    assert mmread(path, dtype=np.float64).toarray()[0, 1] == float(2**64 - 1)


def test_any_name_reads_by_its_banner(tmp_path):
    # mmread chose by suffix: a file mmwrite wrote as .dat was refused, a
    # pattern .txt read as float64, an edge list as a matrix
    a = BitmapMatrix(np.eye(3, dtype=bool))
    for name in ("a.dat", "a.txt", ".mtx"):
        mmwrite(tmp_path / name, a)
        assert_equal(mmread(tmp_path / name), a)
    mmwrite(str(tmp_path / "b.mtx.gz").encode(), a)
    assert_equal(mmread(str(tmp_path / "b.mtx.gz").encode()), a)
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n1 2\n")
    with pytest.raises(ValueError, match="is not a Matrix Market file"):
        mmread(edges)


def test_mmwrite_refuses_archive_names_and_leaves_files_on_bad_arguments(tmp_path):
    a = BitmapMatrix(np.eye(3))
    for name in ("a.tar.gz", "a.TGZ"):
        with pytest.raises(ValueError, match="would read back as a SuiteSparse archive"):
            mmwrite(tmp_path / name, a)
    keep = tmp_path / "keep.mtx"
    keep.write_text("kept")
    with pytest.raises(TypeError, match="comment must be a str or None, got int"):
        mmwrite(keep, a, comment=5)
    assert keep.read_text() == "kept"


def test_read_matrix_reads_edge_lists_and_matrix_market(tmp_path):
    import bmsparse
    from bmsparse._readers import read_matrix as reference

    (tmp_path / "g.txt").write_text("# a SNAP graph\n0\t3\n3\t1\n1\t1\n2\t0\n")
    want = reference(tmp_path / "g.txt")
    got = bmsparse.read_matrix(tmp_path / "g.txt")
    assert isinstance(got, BitmapMatrix) and got.shape == (4, 4)
    assert_same_csr(got.to_scipy(), want, rtol=0)
    undirected = bmsparse.read_matrix(str(tmp_path / "g.txt"), symmetrize=True, dtype=bool)
    assert undirected.dtype == bool
    np.testing.assert_array_equal(undirected.toarray(), undirected.toarray().T)
    a = random_csr(12, 9, 0.3, seed=4)
    scipy.io.mmwrite(tmp_path / "a.mtx", a)
    assert_same_csr(bmsparse.read_matrix(tmp_path / "a.mtx").to_scipy(), a, rtol=0)
    with pytest.raises(FileNotFoundError):
        bmsparse.read_matrix(tmp_path / "missing.txt")


def test_mmread_and_mmwrite_take_open_files(tmp_path):
    import io

    a = random_csr(12, 9, 0.3, seed=7)
    text = io.StringIO()
    mmwrite(text, BitmapMatrix(a), comment="to a text stream")
    binary = io.BytesIO()
    mmwrite(binary, BitmapMatrix(a), comment="to a text stream")
    assert text.getvalue().encode() == binary.getvalue() != b""
    for stream in (io.StringIO(text.getvalue()), io.BytesIO(binary.getvalue()),
                   io.BytesIO(gzip.compress(binary.getvalue()))):
        assert_same_csr(mmread(stream).to_scipy(), a, rtol=0)
    with open(tmp_path / "a.mtx", "wb") as f:
        mmwrite(f, BitmapMatrix(a))
    with open(tmp_path / "a.mtx", "rb") as f:
        assert_same_csr(mmread(f).to_scipy(), a, rtol=0)
    pattern = io.BytesIO()
    mmwrite(pattern, BitmapMatrix(a).astype(bool))
    pattern.seek(0)
    assert mmread(pattern).dtype == bool
    with pytest.raises(ValueError, match="is not a Matrix Market file"):
        mmread(io.BytesIO(b"0 1\n1 2\n"))
