"""Reading sizes back from the device (``_readback``) against the arrays read whole."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse import _readback

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.uint32])
def test_read_ints_of_every_dtype(dtype):
    import cupy

    info = np.iinfo(dtype)
    values = np.array([info.min, info.max, 0, 1, info.max // 3], dtype=dtype)
    a = cupy.asarray(values)
    got = _readback.read_ints((a, 0), (a, 1), (a, -3), (a, -2), (a, 4))
    assert got == [int(v) for v in values]


def test_read_ints_of_many_arrays_and_views():
    import cupy

    arrays = [cupy.arange(k, k + 40, dtype=cupy.int64) for k in range(20)]
    views = [a[5:] for a in arrays]  # contiguous views start past their buffer's start
    assert _readback.read_ints(*((v, k) for k, v in enumerate(views))) == \
        [k + 5 + k for k in range(20)]


def test_read_head_reads_a_prefix():
    import cupy

    a = cupy.asarray(np.array([3, 1 << 63, 7, 9], dtype=np.uint64))
    assert _readback.read_head(a, 3) == [3, 1 << 63, 7]
    assert _readback.read_last(a) == 9
    assert _readback.read_last(np.array([4, 5])) == 5


def test_read_later_reads_before_the_work_queued_after_it():
    # the copies are queued at read_later, so they read the values from
    # before the work queued next; that work has run by the time the array
    # is read again
    import cupy

    a = cupy.asarray(np.array([4, -9, 1 << 40], dtype=np.int64))
    b = cupy.zeros(3, dtype=cupy.int32)
    pending = _readback.read_later((a, 1), (b, 1), (a, -1))
    a.fill(0)
    b[1] = 77
    assert pending.wait() == [-9, 0, 1 << 40]
    assert a.get().tolist() == [0, 0, 0] and int(b[1]) == 77
    host = np.array([3, 5])
    pending = _readback.read_later((host, -1))
    host[-1] = 6  # NumPy arrays are read at the wait
    assert pending.wait() == [6]


@pytest.mark.parametrize("bad", ["index", "float", "int16", "strided"])
def test_read_ints_rejects_what_it_cannot_read(bad):
    import cupy

    a = cupy.arange(10, dtype=cupy.int64)
    item = {"index": (a, 10), "float": (a.astype(cupy.float64), 0),
            "int16": (a.astype(cupy.int16), 0), "strided": (a[::2], 1)}[bad]
    with pytest.raises(IndexError, match="cannot read"):
        _readback.read_ints(item)


def test_kernels_write_the_host_words():
    import cupy

    pointer = _readback.host_words(3)
    if pointer is None:
        pytest.skip("this device cannot write page-locked host memory")
    values = cupy.asarray(np.array([5, -6, 7], dtype=np.int64))
    copy = cupy.RawKernel(r"""
        extern "C" __global__ void copy(const long long* x, long long* out) {
            out[threadIdx.x] = x[threadIdx.x];
        }""", "copy")
    copy((1,), (3,), (values, np.uint64(pointer)))
    assert _readback.take_words(3) == [5, -6, 7]


@pytest.mark.parametrize("store", [0, 1])
def test_host_flag_reads_what_a_kernel_stored(store):
    import cupy

    flag = _readback.host_flag()
    if flag is None:
        pytest.skip("this device cannot write page-locked host memory")
    setter = cupy.RawKernel(r"""
        extern "C" __global__ void set(long long store, unsigned long long* flag) {
            if (store) *flag = 1ull;
        }""", "set")
    setter((1,), (32,), (np.int64(store), np.uint64(flag.ptr)))
    assert flag.read() == store
    # a new flag starts cleared, whatever the last one read
    assert _readback.host_flag().read() == 0
