"""A matrix on one GPU used while another is current (machines of two GPUs or more)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix, spgemm, spmv
from bmsparse._sputils import cupy_available
from tests.helpers import assert_same_csr, random_csr


def _gpus() -> int:
    if not cupy_available():
        return 0
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs")]

# each operation on a matrix A of GPU 0 (x0 a vector there), and scipy's
# answer; under GPU 1 it must raise the ValueError below or give that answer.
# A kernel of GPU 1 reading GPU 0's memory faults, and the fault ends the
# process's use of every GPU: nothing may launch one.
OPERATIONS = {
    "A @ x0": (lambda A, x0: A @ x0, lambda a, x: a @ x),
    "A.T @ x0": (lambda A, x0: A.T @ x0, lambda a, x: a.T @ x),
    "spmv": (lambda A, x0: spmv(A, x0), lambda a, x: a @ x),
    "A.T": (lambda A, x0: BitmapMatrix._from_blocks(A.keys, A.bitmaps, A.offsets, A.values,
                                                    A.shape).T.keys, None),
    "A @ A": (lambda A, x0: A @ A, lambda a, x: a @ a),
    "spgemm A.T": (lambda A, x0: spgemm(A.T, A), lambda a, x: a.T @ a),
    "A + A": (lambda A, x0: A + A, lambda a, x: a + a),
    "A.multiply(A)": (lambda A, x0: A.multiply(A), lambda a, x: a.multiply(a)),
    "2 * A": (lambda A, x0: 2 * A, lambda a, x: 2 * a),
    "A / 2": (lambda A, x0: A / 2, lambda a, x: a / 2),
    "-A": (lambda A, x0: -A, lambda a, x: -a),
    "abs(A)": (lambda A, x0: abs(A), lambda a, x: abs(a)),
    "A.copy()": (lambda A, x0: A.copy(), lambda a, x: a),
    "A.multiply(dense)": (lambda A, x0: A.multiply(x0), lambda a, x: a.multiply(x)),
    "A.sum(axis=0)": (lambda A, x0: A.sum(axis=0), lambda a, x: a.sum(axis=0)),
    "A.diagonal()": (lambda A, x0: A.diagonal(), lambda a, x: a.diagonal()),
    "A.tocsr()": (lambda A, x0: A.tocsr(), lambda a, x: a),
    "A.astype": (lambda A, x0: A.astype(np.float32), lambda a, x: a.astype(np.float32)),
}


def _host(x):
    """A result on the host: scipy for a sparse one, NumPy for a dense one."""
    if isinstance(x, BitmapMatrix):
        return x.get().to_scipy()
    return x.get()  # a CuPy array, or cupyx's CSR (its get() is scipy's)


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_a_matrix_of_another_gpu_is_refused_or_right(name):
    import cupy

    a = random_csr(300, 300, 0.02, seed=4)
    x = np.arange(300.0)
    with cupy.cuda.Device(0):
        A, x0 = BitmapMatrix.from_scipy(a, device=True), cupy.asarray(x)
    ours, theirs = OPERATIONS[name]
    with cupy.cuda.Device(1):
        try:
            got = ours(A, x0)
            cupy.cuda.Device(1).synchronize()
        except ValueError as error:
            # ours, or CuPy's own where its kernels come first
            assert "GPU 0 but the current device is GPU 1" in str(error) \
                or "different from the current device" in str(error), str(error)
        else:
            if theirs is not None:
                want = theirs(a, x)
                got = _host(got)
                if sp.issparse(want):
                    assert_same_csr(sp.csr_array(got), want)
                else:
                    np.testing.assert_allclose(got, want, rtol=1e-6)
    with cupy.cuda.Device(0):  # GPU 0 still works
        np.testing.assert_allclose((A @ x0).get(), a @ x, rtol=1e-12)


def test_to_device_copies_from_another_gpu():
    import cupy

    a = random_csr(300, 300, 0.02, seed=5)
    with cupy.cuda.Device(0):
        A = BitmapMatrix.from_scipy(a, device=True)
    with cupy.cuda.Device(1):
        for m, want in ((A, a), (A.T, a.T)):
            B = m.to_device()
            assert B.keys.device.id == 1 and B.to_device() is B
            assert_same_csr((B @ B).get().to_scipy(), want @ want)
            np.testing.assert_allclose((B @ cupy.ones(300)).get(), want @ np.ones(300),
                                       rtol=1e-12)
    assert A.keys.device.id == 0
