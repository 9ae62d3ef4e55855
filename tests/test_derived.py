"""What a matrix derives and keeps is ready for calls on any stream (bmsparse._derived)."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse import BitmapMatrix
from bmsparse.spgemm import rowscalar
from bmsparse.spmv import column_blocks

from .helpers import random_csr

# each kept array, as a call reads it: (name, the array)
KEPT = {
    "row pointer": lambda m: m._row_pointer(),
    "column pointer": lambda m: m._column_pointer()[1],
    "column order": lambda m: m._column_order(),
    "column-major keys": lambda m: column_blocks(m)[0],
    "scalar rows": lambda m: rowscalar.rows(m)[1],
    "lazy transpose's keys": lambda m: m.T.keys,
}


def test_kept_values_are_made_once_on_the_host():
    m = BitmapMatrix(random_csr(40, 30, 0.2, seed=1))
    for name, read in KEPT.items():
        if name == "lazy transpose's keys":
            continue
        first = read(m)
        assert read(m) is first, name  # kept, not made again
    m.keys = m.keys.copy()  # replacing an array drops what derives from it
    assert m._derived("row_pointer") is None and not m._cache


_SPIN = r"""
extern "C" __global__ void spin(long long ns, int* flag)
{
    long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
    *(volatile int*)flag = 1;
}
extern "C" __global__ void probe(const int* flag, int* out)
{
    *out = *(const volatile int*)flag;
}
"""


@pytest.mark.gpu
@pytest.mark.parametrize("name", KEPT)
def test_a_stream_reading_what_another_made_waits_for_it(name):
    import cupy

    module = cupy.RawModule(code=_SPIN)
    spin, probe = module.get_function("spin"), module.get_function("probe")
    a = random_csr(300, 260, 0.05, seed=2)
    read = KEPT[name]
    want = cupy.asnumpy(read(BitmapMatrix(a).to_device()))
    d = BitmapMatrix(a).to_device()
    if name == "lazy transpose's keys":
        t = d.T  # one lazy transpose, made by the first to read it

        def read(_):
            return t.keys
    flag = cupy.zeros(2, dtype=cupy.int32)
    cupy.cuda.Device().synchronize()
    maker = cupy.cuda.Stream(non_blocking=True)
    reader = cupy.cuda.Stream(non_blocking=True)
    with maker:
        # the maker is held up for 0.3 s: what it makes is queued behind
        spin((1,), (1,), (np.int64(300_000_000), flag))
        spun = maker.record()
        read(d)
        # else the making synced and the test below could not fail
        assert not spun.done, "making the array waited for the host"
    with reader:
        got = read(d).copy()
        probe((1,), (1,), (flag, flag[1:]))
    reader.synchronize()
    assert int(flag[1].get()) == 1, "the reader did not wait for the maker"
    np.testing.assert_array_equal(cupy.asnumpy(got), want)
