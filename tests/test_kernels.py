"""The kernel loader: sources, registration, launches."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse import _kernels


def test_source_inlines_package_headers_once():
    text = _kernels.source("spgemm/count.cu")
    assert '#include "' not in text
    assert text.count("__device__ __forceinline__ u64 bool_product(u64 a, u64 b)") == 1


@pytest.mark.parametrize("params,want", [
    ((), "bmsparse_count_bitmaps"),
    (("T",), "bmsparse_count_bitmaps<double>"),
    (("T", "I"), "bmsparse_count_bitmaps<bm_complex<float>, int>"),
])
def test_name_expression(params, want):
    types = {"T": np.float64 if len(params) == 1 else np.complex64, "I": np.int32}
    assert _kernels.name_expression("bmsparse_count_bitmaps", params, **types) == want


@pytest.mark.gpu
def test_launch_refuses_strided_arrays():
    import cupy

    kernel = _kernels.get_kernel("spgemm/compact.cu", "bmsparse_compact_values",
                                 T=np.float64)
    strided = cupy.zeros(8, dtype=cupy.uint64)[::2]
    with pytest.raises(ValueError, match="bmsparse_compact_values.*must be C-contiguous"):
        _kernels.launch(kernel, 4, (strided, strided, strided, strided, strided, 4, strided))


class _NamedKernel:
    name = "bmsparse_test"


@pytest.mark.parametrize("tail", [
    np.dtype([("x", np.uint64), ("n", np.int32)]),
    np.dtype({"names": ["x", "y"], "formats": [np.uint64, np.uint64], "offsets": [0, 12],
              "itemsize": 24}),
])
def test_prepared_launch_refuses_a_tail_off_8_bytes(tail):
    # the driver reads each argument at its own address; the buffer gives
    # each a multiple of 8 bytes
    with pytest.raises(ValueError, match="bmsparse_test.*multiple of 8 bytes"):
        _kernels.PreparedLaunch(_NamedKernel(), (), tail)


_PACKED_SOURCE = r"""
struct pair { long long a; double b; };
extern "C" __global__ void bmsparse_test_packed(int k, pair p, const double* x, double* y,
                                                long long n)
{
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = k * x[i] + p.a * p.b;
}
"""
_PAIR = np.dtype([("a", np.int64), ("b", np.float64)])
_PACKED_TAIL = np.dtype([("x", np.uint64), ("y", np.uint64), ("n", np.int64)])


@pytest.mark.gpu
def test_prepared_launch_packs_fixed_and_tail_arguments():
    import cupy

    kernel = cupy.RawKernel(_PACKED_SOURCE, "bmsparse_test_packed")
    pair = np.array([(3, 0.25)], dtype=_PAIR)[0]
    launch = _kernels.PreparedLaunch(kernel, (np.int32(-2), pair), _PACKED_TAIL, block=64)
    stream = cupy.cuda.get_current_stream().ptr
    for n in (1, 64, 1000):  # the fixed arguments stay, the tail changes per call
        x = cupy.arange(n, dtype=cupy.float64)
        y = cupy.full(n + 1, -7.0)
        launch(stream, -(-n // 64), (x.data.ptr, y.data.ptr, n))
        np.testing.assert_array_equal(y.get(), np.append(-2.0 * np.arange(n) + 0.75, -7.0))
    launch(stream, 0, (0, 0, 0))  # an empty grid launches nothing


@pytest.mark.gpu
def test_prepared_launch_from_threads_keeps_each_call_its_arguments():
    import threading

    import cupy

    kernel = cupy.RawKernel(_PACKED_SOURCE, "bmsparse_test_packed")
    pair = np.array([(1, 0.0)], dtype=_PAIR)[0]
    launch = _kernels.PreparedLaunch(kernel, (np.int32(1), pair), _PACKED_TAIL, block=128)
    n = 4096
    xs = [cupy.full(n, float(t)) for t in range(8)]
    ys = [cupy.zeros(n) for _ in range(8)]
    stream = cupy.cuda.get_current_stream().ptr

    def run(t):
        for _ in range(50):
            launch(stream, n // 128, (xs[t].data.ptr, ys[t].data.ptr, n))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cupy.cuda.Device().synchronize()
    for t, y in enumerate(ys):
        np.testing.assert_array_equal(y.get(), np.full(n, float(t)))
