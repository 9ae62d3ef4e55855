"""Test helpers: random and structured matrices, comparison against scipy."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from bmsparse import BitmapMatrix

RTOL = {np.dtype(np.float32): 1e-4, np.dtype(np.complex64): 1e-4}


def random_csr(m: int, n: int, density: float, seed: int, dtype=np.float64) -> sp.csr_array:
    """Random m x n CSR with values away from zero (no accidental cancellation)."""
    rng = np.random.default_rng(seed)
    a = sp.random_array((m, n), density=density, format="csr", rng=rng, dtype=np.float64)
    a.data = rng.uniform(0.5, 1.5, a.nnz) * rng.choice([-1.0, 1.0], a.nnz)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * a
    elif np.dtype(dtype).kind in "iu":
        a.data = np.round(a.data * 3)
    return sp.csr_array(a.astype(dtype))


def to_device(a: BitmapMatrix, xp) -> BitmapMatrix:
    return a if xp is np else a.to_device()


def assert_same_csr(got: sp.csr_array, want, rtol: float | None = None) -> None:
    """Exact structure and values within dtype tolerance; explicit zeros count."""
    want = sp.csr_array(want)
    want.sum_duplicates()
    want.sort_indices()
    assert got.shape == want.shape
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    if got.dtype == np.bool_ or got.dtype.kind in "iu":
        np.testing.assert_array_equal(got.data, want.data)
    else:
        tol = rtol if rtol is not None else RTOL.get(got.dtype, 1e-12)
        finite = np.abs(want.data[np.isfinite(want.data)])
        scale = finite.max() if finite.size else 1.0
        np.testing.assert_allclose(got.data, want.data, rtol=tol, atol=tol * scale)


def scipy_product(a, b) -> sp.csr_array:
    """scipy's a @ b in canonical form (scipy drops exact zeros)."""
    c = sp.csr_array(a @ b)
    c.sum_duplicates()
    c.sort_indices()
    return c


def spy_argsort(monkeypatch, module) -> list[int]:
    """Record the length of every ``stable_argsort`` call made through ``module``."""
    calls: list[int] = []
    real = module.stable_argsort

    def spy(xp, a):
        calls.append(a.shape[0])
        return real(xp, a)

    monkeypatch.setattr(module, "stable_argsort", spy)
    return calls


def cancelling(n: int, seed: int, density: float = 0.08,
               extra: float = 0.02) -> sp.csr_array:
    """A square matrix whose square has entries that cancel exactly: column
    2 t + 1 of each row is minus column 2 t, and row 2 t + 1 equals row 2 t,
    so entries (i, k) sum +x and -x; ``extra`` of the entries do not cancel."""
    rng = np.random.default_rng(seed)
    half = rng.integers(1, 5, (n, n // 2)) * (rng.random((n, n // 2)) < density)
    dense = np.empty((n, n))
    dense[:, 0::2], dense[:, 1::2] = half, -half
    dense[1::2] = dense[0::2]
    dense[rng.random((n, n)) < extra] += 1.0
    return sp.csr_array(dense)


def barrier_words_at(pointer: int) -> np.ndarray:
    """The two uint64 words (arrivals, generation) of a grid barrier at
    device ``pointer``."""
    import cupy

    memory = cupy.cuda.UnownedMemory(pointer, 16, None)
    return cupy.ndarray((2,), cupy.uint64, cupy.cuda.MemoryPointer(memory, 0)).get()


def assert_barriers_kept_by_stream(compute: Callable[[], None]) -> None:
    """Run ``compute`` (a cooperative launch of several thread blocks that
    checks its own result) three times on each of two streams, twice in turn,
    and check that the launches' barrier words are each stream's own, reused,
    and left ready: no arrivals counted (the top bit of the arrivals word
    flips at each barrier; grid.cuh)."""
    import cupy

    from bmsparse import _kernels

    here = _kernels.barrier_words()
    assert _kernels.barrier_words() == here
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    pointers = []
    for stream in streams * 2:  # each stream twice, the other's launches between
        with stream:
            pointers.append(_kernels.barrier_words())
            for _ in range(3):
                compute()
    assert pointers[:2] == pointers[2:] and len({here, *pointers}) == 3
    for pointer in pointers[:2]:
        arrivals, _ = barrier_words_at(pointer)
        assert int(arrivals) & ((1 << 63) - 1) == 0
    assert int(barrier_words_at(here)[0]) & ((1 << 63) - 1) == 0


def run_in_threads(run: Callable[[int], None], n: int, what: str) -> None:
    """``run(i)`` in ``n`` host threads at once, each to its end (at most 120
    s: a hang fails the test, naming ``what``)."""
    import threading

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), f"{what} did not finish"


def rounded_complex_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a * b`` (complex NumPy arrays, broadcast) as scipy and the kernels
    round it: ``(ar br - ai bi) + (ar bi + ai br) j`` in real arithmetic,
    each product rounded; NumPy's own complex loops may fuse multiply-adds."""
    want = np.zeros(np.broadcast_shapes(a.shape, b.shape), dtype=np.result_type(a, b))
    want.real += a.real * b.real
    want.real -= a.imag * b.imag
    want.imag += a.real * b.imag
    want.imag += a.imag * b.real
    return want


def random_complex_dense(shape: tuple[int, int], density: float, dtype, seed: int) -> np.ndarray:
    """Dense complex array with independent random real and imaginary parts
    at ``density`` of its places, zeros elsewhere."""
    rng = np.random.default_rng(seed)
    d = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    d[rng.random(shape) >= density] = 0
    return d
