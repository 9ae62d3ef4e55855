"""Named matrices for the operator tests (transpose, spmv, element-wise, reductions).

Shapes cover: empty, 1 x 1, 0 x n and n x 0, shapes that are not multiples
of 8, rectangular, one full 8 x 8 block (64 values, bit 63 set) and a lone
element in the last bit of a block.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from bmsparse import BitmapMatrix

DTYPES = ["bool", "int32", "int64", "float32", "float64", "complex64", "complex128"]

#: tolerance of float results whose summation order differs from scipy's
RTOL = {"float32": 1e-5, "complex64": 1e-5, "float64": 1e-12, "complex128": 1e-12}


def random_matrix(shape, density, dtype, seed, explicit_zeros=True) -> sp.csr_array:
    """Canonical scipy CSR with small integer-valued entries, plus a few stored zeros."""
    m, n = shape
    rng = np.random.default_rng(seed)
    nnz = int(round(density * m * n))
    flat = rng.choice(m * n, size=nnz, replace=False) if m * n else np.zeros(0, np.int64)
    rows, cols = np.divmod(flat, max(n, 1))
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        values = np.ones(nnz, dtype=bool)
    else:
        values = (rng.integers(1, 9, nnz) * rng.choice([-1, 1], nnz)).astype(dtype)
        if dtype.kind == "f":
            values = values + rng.uniform(-0.4, 0.4, nnz).astype(dtype)
        if dtype.kind == "c":
            values = values + 1j * rng.integers(-5, 6, nnz).astype(dtype)
        if explicit_zeros:
            values[rng.random(nnz) < 0.1] = 0
    out = sp.csr_array((values, (rows, cols)), shape=shape, dtype=dtype)
    out.sort_indices()
    return out


def full_block(dtype) -> sp.csr_array:
    """An 11 x 9 matrix whose first 8 x 8 block is full (bit 63 set), plus (10, 8)."""
    d = np.zeros((11, 9))
    d[:8, :8] = np.arange(1, 65).reshape(8, 8)
    d[10, 8] = 7
    return sp.csr_array(d.astype(dtype))


def last_bit(dtype) -> sp.csr_array:
    """A lone element at (15, 7): the last bit of block (1, 0)."""
    d = np.zeros((16, 9))
    d[15, 7] = 3
    return sp.csr_array(d.astype(dtype))


#: name -> (shape, density) of the random cases
SHAPES = {
    "empty": ((0, 0), 0.0),
    "0xn": ((0, 5), 0.0),
    "nx0": ((6, 0), 0.0),
    "1x1": ((1, 1), 1.0),
    "zero-nnz": ((13, 11), 0.0),
    "tall": ((37, 21), 0.2),
    "wide": ((9, 70), 0.15),
    "square": ((64, 64), 0.08),
    "dense": ((17, 23), 0.9),
}


def named(name: str, dtype, seed: int = 0) -> sp.csr_array:
    """The case ``name``: one of SHAPES, "full-block" or "last-bit"."""
    if name == "full-block":
        return full_block(dtype)
    if name == "last-bit":
        return last_bit(dtype)
    shape, density = SHAPES[name]
    return random_matrix(shape, density, dtype, seed)


CASES = [*SHAPES, "full-block", "last-bit"]


def ours(a: sp.csr_array, xp) -> BitmapMatrix:
    m = BitmapMatrix(a)
    return m if xp is np else m.to_device()


def host(x):
    """A NumPy copy of a NumPy or CuPy array (or a scalar)."""
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def assert_dense_close(got, want, dtype) -> None:
    """Equal for bool and integers, within RTOL of the largest magnitude for floats."""
    got, want = host(got), np.asarray(want)
    assert got.shape == want.shape
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    name = np.dtype(dtype).name
    if name not in RTOL:
        np.testing.assert_array_equal(got, want)
    else:
        scale = float(np.abs(want).max()) if want.size else 1.0
        np.testing.assert_allclose(got, want, rtol=RTOL[name], atol=RTOL[name] * max(scale, 1.0))
