"""The kernel loader: sources, registration, launches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from bmsparse import _kernels
from bmsparse._format import popcount
from tests.helpers import barrier_words_at


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


# every block publishes a value a round, then reads every block's: a barrier
# that let a block through early shows as a value of another round.
# grid_barrier_then's last() writes a word that every block reads after it
_BARRIER_PROBE = r'''
extern "C" __global__ void barrier_probe(u64* bar, long long rounds, long long* slots,
                                         unsigned long long* wrong)
{
    const long long blocks = gridDim.x;
    grid_barrier(bar);  // (an odd count of barriers a launch)
    for (long long r = 0; r < rounds; ++r) {
        if (threadIdx.x == 0) slots[blockIdx.x] = r * blocks + blockIdx.x;
        if (r & 1) {
            grid_barrier(bar);
        } else {
            grid_barrier_then(bar, [&] { if (threadIdx.x == 0) slots[blocks] = r; });
            if (threadIdx.x == 0 && __ldcg(slots + blocks) != r) atomicAdd(wrong, 1ull);
        }
        for (long long b = threadIdx.x; b < blocks; b += blockDim.x)
            if (__ldcg(slots + b) != r * blocks + b) atomicAdd(wrong, 1ull);
        grid_barrier(bar);  // every read of this round before the next round's writes
    }
}
'''


@pytest.mark.gpu
def test_grid_barriers_hold_every_block_and_leave_their_words_ready():
    import cupy

    kernel = cupy.RawKernel(_kernels.source("_cuda/grid.cuh") + _BARRIER_PROBE,
                            "barrier_probe", options=_kernels.COMPILE_OPTIONS)
    grid = _kernels.resident_blocks(kernel, 128)  # every block resident
    assert grid > 1
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        words = _kernels.barrier_words()
        before = barrier_words_at(words)
        slots = cupy.zeros(grid + 1, dtype=cupy.int64)
        wrong = cupy.zeros(1, dtype=cupy.uint64)
        for rounds in (7, 8, 1):  # odd, even and one: the top bit flips each barrier
            _kernels.launch(kernel, grid * 128, (words, rounds, slots, wrong), block=128,
                            cooperative=True)
        stream.synchronize()
        arrivals, generation = barrier_words_at(words)
    assert int(wrong.get()[0]) == 0
    # ready for the next launch: no arrival counted; the generation moved by
    # each grid_barrier_then (the even rounds), the top bit by every barrier
    assert int(arrivals) & ((1 << 63) - 1) == 0
    assert int(generation) - int(before[1]) == 4 + 4 + 1
    barriers = (1 + 7 + 7) + (1 + 8 + 8) + (1 + 1 + 1)
    assert (int(arrivals) ^ int(before[0])) >> 63 == barriers & 1
