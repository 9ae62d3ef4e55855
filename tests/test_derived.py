"""What a matrix derives and keeps is ready for calls on any stream (bmsparse._derived)."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse import BitmapMatrix
from bmsparse.spgemm import rowscalar
from bmsparse.spmv import column_blocks

from .helpers import assert_same_csr, random_csr


def _transposes_column_pointer(m: BitmapMatrix):
    """The column pointer a transpose of ``m`` keeps with it (made by the
    first call: the transpose's kernel writes it)."""
    if "column_pointer" not in m._cache:
        m.T.keys  # noqa: B018 - a made transpose
    return m._column_pointer()[1]


# each kept array, as a call reads it: (name, the array)
KEPT = {
    "row pointer": lambda m: m._row_pointer(),
    "column pointer": lambda m: m._column_pointer()[1],
    "column pointer of a transpose": _transposes_column_pointer,
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


def _pickled(m):
    import pickle

    return pickle.loads(pickle.dumps(m))


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "copy"])
def test_pickles_and_copies_derive_again(how, xp):
    # what is kept is bound to streams and launches (a kept SpMV launch
    # holds a lock, device entries a stream): copies start without it
    import copy

    duplicate = {"pickle": _pickled, "deepcopy": copy.deepcopy, "copy": copy.copy}[how]
    a = random_csr(60, 50, 0.1, seed=3)
    m = BitmapMatrix(a)
    m = m if xp is np else m.to_device()
    x, y = xp.ones(50), xp.ones(60)
    t = m.T
    t.keys  # noqa: B018 - a made lazy transpose
    for _ in range(2):
        m @ x, m.T @ y, t @ y
    assert m._cache
    dup_m, dup_t = duplicate(m), duplicate(t)
    for dup in (dup_m, dup_t):
        assert not dup._cache and dup._made is None
    for got, want in ((dup_m @ x, a @ np.ones(50)), (dup_m.T @ y, a.T @ np.ones(60)),
                      (dup_t @ y, a.T @ np.ones(60))):
        np.testing.assert_allclose(got if xp is np else got.get(), want, rtol=1e-12)


@pytest.mark.gpu
def test_a_made_transpose_reads_free_once_it_has_run():
    # its blocks are read about 18 times per small product: once the
    # transpose has run, no stream check is left on them
    import cupy

    a = random_csr(300, 260, 0.05, seed=6)
    t = BitmapMatrix(a).to_device().T
    t.keys  # noqa: B018 - made: an event recorded after the launch
    assert t._made is not None and t._made.event is not None
    cupy.cuda.get_current_stream().synchronize()
    t.bitmaps  # noqa: B018 - the first read after it has run settles it
    assert t._made is None
    assert_same_csr(t.get().to_scipy(), a.T, rtol=0)


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


#: how the maker and the reader get their streams: two CuPy streams in this
#: thread; the per-thread default stream (one Stream object, a different
#: stream in each host thread) of two live threads; or of a thread started
#: after the maker's ended, which may have the maker's thread id (the
#: maker's making stays short: an ended thread's cooperative launches free
#: their barrier words by cudaFree, which waits for the device)
STREAMS = ["two streams", "two threads", "a thread after another"]


@pytest.mark.gpu
@pytest.mark.parametrize("streams", STREAMS)
@pytest.mark.parametrize("name", KEPT)
def test_a_stream_reading_what_another_made_waits_for_it(name, streams):
    from concurrent.futures import ThreadPoolExecutor

    import cupy

    if streams == "a thread after another" and name not in ("row pointer", "scalar rows"):
        pytest.skip("its making launches cooperatively")
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
    if streams == "two streams":
        maker = cupy.cuda.Stream(non_blocking=True)
        reader = cupy.cuda.Stream(non_blocking=True)
        pools = []
        in_maker = in_reader = lambda fn: fn()  # noqa: E731
    else:
        maker = reader = cupy.cuda.Stream.ptds
        pools = [ThreadPoolExecutor(1), ThreadPoolExecutor(1)]
        in_maker = lambda fn: pools[0].submit(fn).result(timeout=60)  # noqa: E731
        in_reader = lambda fn: pools[1].submit(fn).result(timeout=60)  # noqa: E731

    def allocate():
        # before: an allocation the pool must ask the driver for (cudaMalloc)
        # would wait for the whole device, the spin included
        with reader:
            return cupy.empty(want.shape, want.dtype)

    def make():
        with maker:
            # the maker is held up for 0.3 s: what it makes is queued behind
            spin((1,), (1,), (np.int64(300_000_000), flag))
            spun = maker.record()
            read(d)
            # else the making synced and the test below could not fail
            assert not spun.done, "making the array waited for the host"
        return spun

    def use():
        with reader:
            got[...] = read(d)
            probe((1,), (1,), (flag, flag[1:]))
            return reader.record()

    try:
        got = in_reader(allocate)
        cupy.cuda.Device().synchronize()
        spun = in_maker(make)
        if streams == "a thread after another":
            pools[0].shutdown()
            pools[1].shutdown()
            pools[1] = ThreadPoolExecutor(1)
        used = in_reader(use)
        # the spin over before the reader's work was even queued: a host
        # this slow (threads started under compute-sanitizer) cannot tell
        late = spun.done
        used.synchronize()
    finally:
        for pool in pools:
            pool.shutdown()
    assert int(flag[1].get()) == 1, "the reader did not wait for the maker"
    np.testing.assert_array_equal(cupy.asnumpy(got), want)
    if late:
        pytest.skip("the host took longer than the spin: whether the reader waited is unknown")
