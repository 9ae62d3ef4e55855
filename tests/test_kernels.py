"""The kernel loader: sources, registration, launches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from bmsparse import _kernels
from bmsparse._format import popcount


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


class _Function:
    ptr = 0


class _LoadedKernel(_NamedKernel):
    kernel = _Function()


@pytest.mark.parametrize("tail,values", [
    # 8-byte integers (struct packs them), the extremes of each
    (np.dtype([("p", np.uint64), ("n", np.int64), ("q", np.uint64)]),
     (2**64 - 1, -2**63, 12345)),
    # a float among them (NumPy's record assignment packs them)
    (np.dtype([("p", np.uint64), ("f", np.float64), ("n", np.int64)]), (7, -0.5, -3)),
])
def test_prepared_launch_hands_the_driver_each_argument(monkeypatch, tail, values):
    # what the driver reads: argument i at the i-th address of the pointer
    # array, the fixed arguments first; each call's tail replaces the last's
    import ctypes

    seen = []

    def driver(function, gx, gy, gz, bx, by, bz, shared, stream, pointers, extra):
        addresses = np.ctypeslib.as_array(
            (ctypes.c_uint64 * (1 + len(tail.names))).from_address(pointers))
        seen.append([bytes((ctypes.c_char * 8).from_address(int(a))) for a in addresses])

    monkeypatch.setattr(_kernels, "_LAUNCH_KERNEL", driver)
    monkeypatch.setattr(_kernels, "_CONTEXT", (lambda: 1, lambda context: None))
    monkeypatch.setattr(_kernels, "_allow_shared", lambda kernel, shared_mem: None)
    launch = _kernels.PreparedLaunch(_LoadedKernel(), (np.int64(-9),), tail)
    launch(0, 1, tuple(0 for _ in values))
    launch(0, 1, values)
    want = [np.array(v, dtype=tail.fields[n][0]).tobytes() for n, v in zip(tail.names, values)]
    assert seen[-1] == [np.int64(-9).tobytes(), *want]


#: bmsparse_transpose_counts(bitmaps | order, nblocks, counts): the bitmaps
#: fixed, the rest per call
_COUNTS_TAIL = np.dtype([("order", np.uint64), ("nblocks", np.int64), ("counts", np.uint64)])


def _counts_launch(bitmaps: Any, block: int) -> Any:
    kernel = _kernels.get_kernel("transpose.cu", "bmsparse_transpose_counts")
    return _kernels.PreparedLaunch(kernel, (np.uint64(bitmaps.data.ptr),), _COUNTS_TAIL,
                                   block=block)


def _random_bitmaps(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(1, 1 << 63, n, dtype=np.uint64)


@pytest.mark.gpu
def test_prepared_launch_packs_fixed_and_tail_arguments():
    import cupy

    rng = np.random.default_rng(5)
    bitmaps = _random_bitmaps(rng, 1000)
    d_bitmaps = cupy.asarray(bitmaps)  # alive while the launch reads it
    launch = _counts_launch(d_bitmaps, 64)
    stream = cupy.cuda.get_current_stream().ptr
    for n in (1, 64, 1000):  # the fixed argument stays, the tail changes per call
        order = rng.permutation(1000)[:n]
        counts = cupy.full(n + 1, 7, dtype=cupy.int64)
        d_order = cupy.asarray(order)
        launch(stream, -(-n // 64), (d_order.data.ptr, n, counts.data.ptr))
        np.testing.assert_array_equal(counts[:n].get(), popcount(bitmaps[order]))
        assert int(counts[n]) == 7  # nothing past nblocks
    launch(stream, 0, (0, 0, 0))  # an empty grid launches nothing


@pytest.mark.gpu
def test_prepared_launch_from_threads_keeps_each_call_its_arguments():
    import threading

    import cupy

    rng = np.random.default_rng(6)
    n = 4096
    bitmaps = _random_bitmaps(rng, n)
    d_bitmaps = cupy.asarray(bitmaps)
    launch = _counts_launch(d_bitmaps, 128)
    orders = [rng.permutation(n) for _ in range(8)]
    d_orders = [cupy.asarray(order) for order in orders]
    outs = [cupy.zeros(n, dtype=cupy.int64) for _ in range(8)]
    stream = cupy.cuda.get_current_stream().ptr

    def run(t):
        for _ in range(50):
            launch(stream, n // 128, (d_orders[t].data.ptr, n, outs[t].data.ptr))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cupy.cuda.Device().synchronize()
    for order, out in zip(orders, outs):
        np.testing.assert_array_equal(out.get(), popcount(bitmaps[order]))
