"""save_npz / load_npz: round trips in the bitmap form, scipy's files, bad files."""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.sparse as sp

import bmsparse
from bmsparse import BitmapMatrix, load_npz, save_npz
from bmsparse.testing import assert_equal
from tests.cases import DTYPES, ours, random_matrix
from tests.helpers import assert_same_csr


@pytest.mark.parametrize("compressed", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (37, 21), (64, 64), (9, 70)])
def test_round_trip_keeps_blocks_and_stored_zeros(tmp_path, xp, shape, dtype, compressed):
    a = random_matrix(shape, 0.3 if shape != (1, 1) else 1.0, dtype, seed=3)
    m = ours(a, xp)
    path = tmp_path / "a.npz"
    save_npz(path, m, compressed=compressed)
    got = load_npz(path, device=xp is not np)
    assert got.on_device == (xp is not np)
    assert got.dtype == m.dtype and got.shape == m.shape
    assert_equal(got, m)  # the same blocks, bitmaps and values
    assert_same_csr(got.get().to_scipy(), a, rtol=0)


def test_file_objects_and_what_the_constructor_takes():
    a = random_matrix((20, 30), 0.2, "float32", seed=1)
    buf = io.BytesIO()
    save_npz(buf, a)  # a scipy matrix: converted first
    buf.seek(0)
    assert_same_csr(load_npz(buf).to_scipy(), a, rtol=0)


def test_a_hypersparse_matrix_saves_its_blocks_only(tmp_path):
    n = 1 << 35
    m = BitmapMatrix.from_coo(np.array([0, n - 1]), np.array([n - 1, 5]), np.array([1.5, -2.0]),
                              (n, n))
    save_npz(tmp_path / "h.npz", m)
    assert (tmp_path / "h.npz").stat().st_size < 4096
    got = load_npz(tmp_path / "h.npz")
    assert_equal(got, m)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bsr", "dia"])
@pytest.mark.parametrize("kind", [sp.csr_array, sp.csr_matrix])
def test_reads_what_scipy_saves(tmp_path, fmt, kind):
    a = random_matrix((24, 16), 0.3, "float64", seed=4)
    path = tmp_path / "s.npz"
    sp.save_npz(path, kind(a).asformat(fmt))
    got = load_npz(path)
    want = sp.csr_array(kind(a).asformat(fmt))
    want.sum_duplicates()
    assert_same_csr(got.to_scipy(), want, rtol=0)


def test_bad_files_are_refused_clearly(tmp_path):
    np.save(tmp_path / "one.npy", np.arange(3))
    with pytest.raises(ValueError, match="one array"):
        load_npz(tmp_path / "one.npy")
    np.savez(tmp_path / "other.npz", x=np.arange(3))
    with pytest.raises(ValueError, match="holds no sparse matrix"):
        load_npz(tmp_path / "other.npz")
    (tmp_path / "text.npz").write_text("not a file of NumPy's")
    with pytest.raises(ValueError, match="is no .npz file"):
        load_npz(tmp_path / "text.npz")


def test_inconsistent_or_later_files_are_refused(tmp_path):
    m = BitmapMatrix(random_matrix((16, 16), 0.3, "float64", seed=2))
    good = {"format": np.bytes_(b"bmp"), "version": np.int64(1),
            "shape": np.array([16, 16]), "keys": m.keys, "bitmaps": m.bitmaps,
            "values": m.values}
    cases = {
        "later": (dict(good, version=np.int64(2)), "version 2"),
        "unsorted": (dict(good, keys=m.keys[::-1].copy()), "strictly increasing"),
        "short": (dict(good, values=m.values[:-1]), "values"),
        "outside": (dict(good, shape=np.array([16, 9])), "shape"),
        "no keys": ({k: v for k, v in good.items() if k != "keys"}, "lacks keys"),
    }
    for name, (arrays, match) in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.npz"
        np.savez(path, **arrays)
        with pytest.raises(ValueError, match=match):
            load_npz(path)


def test_exported_from_the_package():
    assert bmsparse.save_npz is save_npz and bmsparse.load_npz is load_npz


def _bmp_file(path, **changes):
    m = BitmapMatrix(sp.csr_array(np.eye(16)))
    arrays = {"format": np.bytes_(b"bmp"), "version": np.int64(1),
              "shape": np.array([16, 16]), "keys": m.keys, "bitmaps": m.bitmaps,
              "values": m.values}
    arrays.update(changes)
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("version", [np.float64(1.5), np.bool_(True), np.bytes_(b"1"),
                                     np.array([1, 1])])
def test_a_version_that_is_not_the_integer_1_is_refused(tmp_path, version):
    with pytest.raises(ValueError, match="version"):
        load_npz(_bmp_file(tmp_path / "v.npz", version=version))


@pytest.mark.parametrize("shape", [np.int64(16), np.array([True, True]),
                                   np.array([[16, 16]])])
def test_a_shape_that_is_no_pair_of_integers_is_refused(tmp_path, shape):
    m = BitmapMatrix(sp.csr_array(np.eye(1)))
    path = _bmp_file(tmp_path / "s.npz", shape=shape, keys=m.keys, bitmaps=m.bitmaps,
                     values=m.values)
    with pytest.raises(ValueError, match="shape"):
        load_npz(path)


@pytest.mark.parametrize("change", ["no data", "no shape", "format int", "format lil",
                                    "0-d shape"])
def test_malformed_scipy_files_raise_value_error(tmp_path, change):
    a = sp.csr_array(np.eye(4))
    arrays = {"format": np.bytes_(b"csr"), "shape": np.array(a.shape), "data": a.data,
              "indices": a.indices, "indptr": a.indptr}
    if change.startswith("no "):
        del arrays[change[3:]]
    else:
        arrays.update({"format int": {"format": np.int64(3)},
                       "format lil": {"format": np.bytes_(b"lil")},
                       "0-d shape": {"shape": np.int64(4)}}[change])
    np.savez(tmp_path / "s.npz", **arrays)
    with pytest.raises(ValueError, match="holds no sparse matrix"):
        load_npz(tmp_path / "s.npz")
