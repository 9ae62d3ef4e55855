"""Each SpGEMM stage on its own, against brute force on dense 8x8 blocks.

Every stage gets brute-force inputs (not the previous stage's output), so a
failure points at one stage. With the ``xp`` fixture the NumPy twin and the
CUDA kernel are held to the same expectation: exactly for task lists, keys,
bitmaps, offsets and non-zero masks; values with ``assert_allclose`` (the GPU
fuses multiply-adds).
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np
import pytest

from bmsparse import BitmapMatrix, _readback
from bmsparse._format import nblocks_along
from bmsparse.convert import row_pointer
from tests.helpers import spy_argsort

# `import bmsparse.spgemm.tasks as tasks_mod` would not work: the attribute
# bmsparse.spgemm is the function spgemm, re-exported by bmsparse/__init__.py
from bmsparse.spgemm import compact as compact_mod  # isort: skip
from bmsparse.spgemm import count as count_mod  # isort: skip
from bmsparse.spgemm import multiply as multiply_mod  # isort: skip
from bmsparse.spgemm import tasks as tasks_mod  # isort: skip

MASK = (1 << 32) - 1
TOP = 1 << 63
ALL_ONES = (1 << 64) - 1
LAST = (1 << 32) - 1


def host(a):
    return a if isinstance(a, np.ndarray) else a.get()


# --- brute force ---------------------------------------------------------------------


def dense_block(bitmap: int) -> np.ndarray:
    """8x8 bool block: element (r, c) is bit 8r + c."""
    return np.array([(bitmap >> b) & 1 for b in range(64)], dtype=bool).reshape(8, 8)


def bitmap_of(block: np.ndarray) -> int:
    return sum(1 << b for b in range(64) if block.flat[b])


def value_block(bitmap: int, values: np.ndarray) -> np.ndarray:
    out = np.zeros(64, dtype=values.dtype)
    out[[b for b in range(64) if (bitmap >> b) & 1]] = values
    return out.reshape(8, 8)


class Tasks(NamedTuple):
    task_a: list[int]
    task_b: list[int]
    c_keys: list[int]
    c_ptr: list[int]


def brute_tasks(a_keys: list[int], b_keys: list[int]) -> Tasks:
    """Every pair A(i, j), B(j, k), in task order (A block, then B block), then
    sorted by output key (i, k) with ties in task order."""
    pairs = [(ia, ib) for ia, ka in enumerate(a_keys) for ib, kb in enumerate(b_keys)
             if ka & MASK == kb >> 32]

    def out_key(p):
        return (a_keys[p[0]] >> 32 << 32) | (b_keys[p[1]] & MASK)

    pairs.sort(key=out_key)   # list.sort is stable
    runs = Counter(out_key(p) for p in pairs)
    c_keys = sorted(runs)
    c_ptr = [0]
    for key in c_keys:
        c_ptr.append(c_ptr[-1] + runs[key])
    return Tasks([p[0] for p in pairs], [p[1] for p in pairs], c_keys, c_ptr)


def brute_count(a_bitmaps, b_bitmaps, t: Tasks) -> tuple[list[int], list[int]]:
    c_bitmaps, c_offsets = [], [0]
    for q in range(len(t.c_keys)):
        acc = np.zeros((8, 8), dtype=bool)
        for p in range(t.c_ptr[q], t.c_ptr[q + 1]):
            a = dense_block(a_bitmaps[t.task_a[p]]).astype(int)
            b = dense_block(b_bitmaps[t.task_b[p]]).astype(int)
            acc |= (a @ b) > 0
        c_bitmaps.append(bitmap_of(acc))
        c_offsets.append(c_offsets[-1] + bin(c_bitmaps[-1]).count("1"))
    return c_bitmaps, c_offsets


def brute_multiply(a: BitmapMatrix, b: BitmapMatrix, t: Tasks, c_bitmaps: list[int]):
    """Values of every output block from dense per-block products, and the bits
    whose value is non-zero."""
    values, nonzero = [], []
    for q, bitmap in enumerate(c_bitmaps):
        acc = np.zeros((8, 8), dtype=a.values.dtype)
        for p in range(t.c_ptr[q], t.c_ptr[q + 1]):
            ia, ib = t.task_a[p], t.task_b[p]
            acc += (value_block(int(a.bitmaps[ia]), a.values[a.offsets[ia]:a.offsets[ia + 1]])
                    @ value_block(int(b.bitmaps[ib]),
                                  b.values[b.offsets[ib]:b.offsets[ib + 1]]))
        bits = [bit for bit in range(64) if (bitmap >> bit) & 1]
        values.extend(acc.flat[bits])
        nonzero.append(sum(1 << bit for bit in bits if acc.flat[bit] != 0))
    return np.array(values, dtype=a.values.dtype), nonzero


# --- operands --------------------------------------------------------------------------


class Case(NamedTuple):
    m: int
    k: int
    n: int
    a_density: float
    b_density: float
    seed: int


CASES = {
    "1x1": Case(1, 1, 1, 1.0, 1.0, 0),
    "full-blocks": Case(8, 8, 8, 1.0, 1.0, 1),
    "rectangular": Case(20, 30, 25, 0.1, 0.2, 2),
    "long-inner": Case(9, 100, 17, 0.05, 0.05, 3),
    "dense": Case(40, 40, 40, 0.3, 0.3, 4),
    "many-blocks": Case(200, 200, 200, 0.004, 0.004, 5),
    "outer-product": Case(33, 1, 41, 0.5, 0.5, 6),
    "empty-a": Case(16, 16, 16, 0.0, 0.5, 7),
    "empty-b": Case(16, 16, 16, 0.5, 0.0, 8),
    "no-inner": Case(8, 0, 8, 0.0, 0.0, 9),
    "no-rows": Case(0, 8, 8, 0.0, 0.5, 10),
}
WITH_TASKS = [name for name in CASES if name not in ("empty-a", "empty-b", "no-inner",
                                                      "no-rows")]


def operand(shape, density, dtype, rng, uniform=False) -> BitmapMatrix:
    m, n = shape
    nnz = int(round(density * m * n))
    flat = rng.choice(m * n, size=nnz, replace=False) if m * n else np.zeros(0, np.int64)
    rows, cols = np.divmod(flat, max(n, 1))
    if uniform:
        values = rng.uniform(0.5, 1.5, nnz)
    else:
        # small integers: every sum is exact, and many cancel to zero
        values = rng.choice([-2, -1, 1, 2], nnz)
    values = values.astype(dtype)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.choice([-1, 0, 1], nnz)
    return BitmapMatrix.from_coo(rows, cols, values, shape)


def operands(name, dtype=np.float64, uniform=False) -> tuple[BitmapMatrix, BitmapMatrix]:
    case = CASES[name]
    rng = np.random.default_rng(case.seed)
    a = operand((case.m, case.k), case.a_density, dtype, rng, uniform)
    b = operand((case.k, case.n), case.b_density, dtype, rng, uniform)
    return a, b


def task_args(xp, a: BitmapMatrix, b: BitmapMatrix):
    return (xp.asarray(a.keys), xp.asarray(b.keys), nblocks_along(a.shape[0]),
            nblocks_along(b.shape[1]))


def assert_task_list(got, want: Tasks):
    assert got.c_nblocks is None  # sized
    task_a, task_b, c_keys, c_ptr = (host(x) for x in got[:4])
    assert (task_a.dtype, task_b.dtype, c_keys.dtype, c_ptr.dtype) == (
        np.int64, np.int64, np.uint64, np.int64)
    assert task_a.tolist() == want.task_a
    assert task_b.tolist() == want.task_b
    assert [int(k) for k in c_keys] == want.c_keys
    assert c_ptr.tolist() == want.c_ptr


# --- stage 1: tasks ---------------------------------------------------------------------


@pytest.mark.parametrize("sized", [True, False])
@pytest.mark.parametrize("name", list(CASES))
def test_tasks(name, sized, xp):
    a, b = operands(name)
    got = tasks_mod.tasks(*task_args(xp, a, b), sized=sized)
    want = brute_tasks([int(k) for k in a.keys], [int(k) for k in b.keys])
    if got.c_nblocks is not None:
        # unsized (GPU, some task): the run heads' buffers and their count on the device
        assert not sized and xp is not np and got.c_ptr.shape[0] == got.ntasks + 1
        n = int(got.c_nblocks[0])
        # and the block of each task
        lengths = np.diff(want.c_ptr)
        assert host(got.task_block).tolist() == np.repeat(np.arange(n), lengths).tolist()
        got = tasks_mod.TaskList(got.task_a, got.task_b,
                                 *tasks_mod.first_blocks(got.c_keys, got.c_ptr, n))
    assert_task_list(got, want)
    assert got.ntasks == len(want.task_a)


@pytest.mark.gpu
@pytest.mark.parametrize("by_tasks", [False, True])
@pytest.mark.parametrize("name", WITH_TASKS)
def test_count_and_drop_empty_past_the_listed_blocks(name, by_tasks):
    # tasks(sized=False): the count's arrays run to ntasks, the blocks past
    # the listed ones come out empty, and drop_empty reads the count with the
    # totals: the same blocks as the sized list's; counted by output block or
    # by task
    import cupy

    a, b = operands(name)
    args = task_args(cupy, a, b)
    unsized = tasks_mod.tasks(*args, sized=False)
    sized = tasks_mod.tasks(*args)
    assert unsized.c_nblocks is not None
    n = int(unsized.c_nblocks[0])
    ntasks = unsized.ntasks
    ops = (cupy.asarray(a.bitmaps), cupy.asarray(b.bitmaps))
    offsets = (cupy.asarray(a.offsets), cupy.asarray(b.offsets))
    padded = count_mod.count(*ops, unsized.task_a, unsized.task_b, unsized.c_ptr, None, offsets,
                             unsized.c_nblocks, unsized.task_block if by_tasks else None)
    want = count_mod.count(*ops, sized.task_a, sized.task_b, sized.c_ptr, None, offsets)
    read = host(sized.c_ptr)[-1]  # the records of the listed blocks' tasks
    for field in ("bitmaps", "offsets"):
        np.testing.assert_array_equal(host(getattr(padded.pairs, field))[:read],
                                      host(getattr(want.pairs, field))[:read], err_msg=field)
    bitmaps = host(padded.bitmaps)
    assert bitmaps.shape[0] == ntasks and not bitmaps[n:].any()
    np.testing.assert_array_equal(bitmaps[:n], host(want.bitmaps))
    # counted by tasks, the kernel sums the scan's items (read before any
    # scan) and leaves the scan to drop_empty
    assert (padded.total is not None) == by_tasks == (padded.scan is None)
    total = padded.total.wait()[0] if by_tasks else int(padded.scan[-1])
    if by_tasks:
        assert total == int(host(padded.sizes).sum())
    assert total >> padded.shift == int(want.scan[-1]) >> want.shift
    got = compact_mod.drop_empty(unsized.c_keys, padded, unsized.c_ptr, unsized.c_nblocks)
    ref = compact_mod.drop_empty(sized.c_keys, want, sized.c_ptr)
    for field in ("keys", "bitmaps", "offsets", "first", "last"):
        np.testing.assert_array_equal(host(getattr(got, field)), host(getattr(ref, field)),
                                      err_msg=field)
    assert got.nnz == ref.nnz
    # by tasks, the padded path always writes the warps' words; by blocks,
    # it is the sized path, which writes them where it drops a block
    if by_tasks or ref.warp_block is not None:
        assert_warp_words(got)
    else:
        assert got.warp_block is None and got.warp_starts is None


@pytest.mark.parametrize("mapped", [True, False])
@pytest.mark.parametrize("col_bits, task_bits, short", [(32, 0, 3), (7, 13, 3), (32, 0, 1)])
def test_run_heads_across_scan_tiles(col_bits, task_bits, short, mapped, xp, monkeypatch):
    # runs of 1 to 5,000 codes over 44 to 74 of the GPU scan's tiles (2,048
    # codes, 8 a thread): starts inside and at the edges of threads and
    # tiles, runs longer than a tile, and a last tile only partly full; with
    # runs of 1 code mostly, the GPU returns views of its buffers, else copies
    if not mapped:  # the count read back from device memory instead of host memory
        monkeypatch.setattr(_readback, "host_words", lambda nwords: None)
    rng = np.random.default_rng(col_bits + short)
    lengths = np.concatenate([rng.integers(1, short + 1, 60000),
                              [8, 8, 2048, 1, 2047, 5000, 2049], rng.integers(1, 20, 2000)])
    rng.shuffle(lengths)
    nruns, n = lengths.shape[0], int(lengths.sum())
    keys = np.sort(rng.choice(1 << 20, nruns, replace=False)).astype(np.uint64)
    tasks = np.concatenate([np.sort(rng.integers(0, 1 << task_bits, size=length))
                            for length in lengths]).astype(np.uint64)
    codes = (np.repeat(keys, lengths) << np.uint64(task_bits)) | tasks
    c_keys, c_ptr = tasks_mod.run_heads(xp.asarray(codes), col_bits, task_bits)
    row, col = keys >> np.uint64(col_bits), keys & np.uint64((1 << col_bits) - 1)
    assert host(c_keys).tolist() == ((row << np.uint64(32)) | col).tolist()
    assert host(c_ptr).tolist() == [0, *np.cumsum(lengths).tolist()]
    assert host(c_ptr)[-1] == n
    if xp is not np:  # unsized: the buffers, their count, the block of each code
        keys_buffer, ptr_buffer, c_nblocks, task_block = tasks_mod.run_heads(
            xp.asarray(codes), col_bits, task_bits, sized=False)
        assert int(c_nblocks[0]) == nruns and task_block.dtype == np.int32
        assert host(ptr_buffer)[:nruns + 1].tolist() == host(c_ptr).tolist()
        np.testing.assert_array_equal(host(task_block), np.repeat(np.arange(nruns), lengths))


def test_tasks_by_hand(xp):
    # A has blocks (0,0) (0,2) (1,1); B has blocks (0,0) (0,1) (1,1) (2,0).
    #   A(0,0) pairs with B(0,0), B(0,1)   -> tasks 0, 1 -> C(0,0), C(0,1)
    #   A(0,2) pairs with B(2,0)           -> task 2     -> C(0,0)
    #   A(1,1) pairs with B(1,1)           -> task 3     -> C(1,1)
    # sorted by output key, ties in task order: C(0,0): tasks 0, 2; C(0,1): 1; C(1,1): 3
    a_keys = np.array([0, 2, (1 << 32) | 1], dtype=np.uint64)
    b_keys = np.array([0, 1, (1 << 32) | 1, 2 << 32], dtype=np.uint64)
    got = tasks_mod.tasks(xp.asarray(a_keys), xp.asarray(b_keys), 2, 2)
    assert_task_list(got, Tasks(task_a=[0, 1, 0, 2], task_b=[0, 3, 1, 2],
                                c_keys=[0, 1, (1 << 32) | 1], c_ptr=[0, 2, 3, 4]))


@pytest.mark.parametrize("row_bound,col_bound,argsorts", [
    (1 << 32, 1 << 32, 1),          # 32 + 32 + task bits > 64: argsort
    (1 << 31, 1 << 31, 0),          # 31 + 31 + 2 = 64 bits: packed, every bit used
    ((1 << 31) + 1, 1 << 31, 1),    # 65 bits
])
def test_tasks_huge_block_indices(row_bound, col_bound, argsorts, xp, monkeypatch):
    monkeypatch.setattr(tasks_mod, "RANK_MAX_RUNS", 0)  # the GPU would merge without packing
    calls = spy_argsort(monkeypatch, tasks_mod)
    top = row_bound - 1
    right = col_bound - 1
    # A: (top, LAST), (top, 0); B: (0, right), (LAST, 0), (LAST, right), with LAST = 2**32 - 1
    # the inner index LAST must not overflow the search for B's block row j + 1
    a_keys = [top << 32, (top << 32) | LAST]
    b_keys = [right, LAST << 32, (LAST << 32) | right]
    got = tasks_mod.tasks(xp.asarray(np.array(a_keys, dtype=np.uint64)),
                          xp.asarray(np.array(b_keys, dtype=np.uint64)), row_bound, col_bound)
    assert_task_list(got, Tasks(task_a=[1, 0, 1], task_b=[1, 0, 2],
                                c_keys=[top << 32, (top << 32) | right], c_ptr=[0, 1, 3]))
    assert brute_tasks(a_keys, b_keys) == Tasks([1, 0, 1], [1, 0, 2],
                                                 [top << 32, (top << 32) | right], [0, 1, 3])
    assert len(calls) == argsorts


@pytest.mark.parametrize("name", WITH_TASKS)
@pytest.mark.parametrize("bits", [0, 2])
def test_packed_sort_and_argsort_give_the_same_tasks(name, bits, xp, monkeypatch):
    monkeypatch.setattr(tasks_mod, "RANK_MAX_RUNS", 0)  # the GPU's merge path needs no sort
    a, b = operands(name)
    args = task_args(xp, a, b)
    calls = spy_argsort(monkeypatch, tasks_mod)
    packed = tasks_mod.tasks(*args)
    assert calls == []
    monkeypatch.setattr(tasks_mod, "PACKED_SORT_BITS", bits)
    fallback = tasks_mod.tasks(*args)
    assert len(calls) == 1
    for got, want in zip(fallback[:4], packed[:4]):
        np.testing.assert_array_equal(host(got), host(want))
    assert_task_list(fallback, brute_tasks([int(k) for k in a.keys],
                                           [int(k) for k in b.keys]))


def rows_of_every_kind() -> tuple[list[int], list[int]]:
    """Block keys of A and B whose block rows of A reach every branch of the GPU
    merge (``bmsparse_tasks_rank``): light rows of up to 32 tasks and more,
    rows of 32 and 33 runs (the heavy limit), rows of many tasks, empty runs
    and rows of empty runs only; B's columns collide across runs."""
    rng = np.random.default_rng(12)
    lengths = [0] * 10 + list(rng.integers(1, 5, 30)) + list(rng.integers(8, 13, 10)) + [
        100] * 5 + [40] * 5
    b_keys = [(j << 32) | int(k) for j, n in enumerate(lengths)
              for k in np.sort(rng.choice(120, n, replace=False))]
    rows = [[10, 11, 12], [0, 10, 1, 11, 2], list(range(40, 50)), [50, 51, 52],
            list(range(10, 50)), list(range(10, 42)), list(range(10, 43)),
            list(range(10, 40)) + [55, 56], [], [53], [3, 4, 5], list(range(55, 60)),
            list(range(40, 50)) + [55, 56, 57, 58]]
    rows += [sorted(rng.choice(np.arange(10, 50), rng.integers(1, 9), replace=False))
             for _ in range(80)]
    a_keys = [(i << 32) | int(j) for i, js in enumerate(rows) for j in js]
    return a_keys, b_keys


@pytest.mark.parametrize("pointers", [False, True])
@pytest.mark.parametrize("heavy_sort,cached_runs", [(4096, 2048), (4096, 4), (0, 2048)])
@pytest.mark.parametrize("runs,most_tasks", [(0, 256), (32, 256), (32, 100), (8, 256)])
def test_tasks_rows_of_every_kind(runs, most_tasks, heavy_sort, cached_runs, pointers, xp,
                                  monkeypatch):
    # heavy rows sorted by a thread block each (their ends in shared memory or
    # not), or by one global sort
    monkeypatch.setattr(tasks_mod, "RANK_MAX_RUNS", runs)
    monkeypatch.setattr(tasks_mod, "RANK_MAX_TASKS", most_tasks)
    monkeypatch.setattr(tasks_mod, "HEAVY_SORT_TASKS", heavy_sort)
    monkeypatch.setattr(tasks_mod, "HEAVY_CACHED_RUNS", cached_runs)
    merge, merges = tasks_mod.merge, []
    monkeypatch.setattr(tasks_mod, "merge", lambda *args: merges.append(1) or merge(*args))
    a_keys, b_keys = rows_of_every_kind()
    a, b = (xp.asarray(np.array(keys, dtype=np.uint64)) for keys in (a_keys, b_keys))
    # the block-row pointers replace the searches of the keys
    ptrs = (row_pointer(a, 93)[0], row_pointer(b, 60)[0]) if pointers else None
    got = tasks_mod.tasks(a, b, 93, 120, row_pointers=ptrs)
    assert_task_list(got, brute_tasks(a_keys, b_keys))
    assert len(merges) == (xp is not np and runs > 0)


@pytest.mark.gpu
@pytest.mark.parametrize("nrows", [3, 3000])
def test_block_row_figures(nrows, monkeypatch):
    # the figures that pick the sort (the spans kernel's atomics, over one
    # thread block or many), against their definitions
    import cupy

    monkeypatch.setattr(tasks_mod._primitives, "SORT_CHUNK", 12)
    monkeypatch.setattr(tasks_mod, "RANK_MAX_RUNS", 4)
    monkeypatch.setattr(tasks_mod, "RANK_MAX_TASKS", 20)
    rng = np.random.default_rng(nrows)
    a_keys = np.unique([(int(i) << 32) | int(j) for i in rng.choice(5 * nrows, nrows)
                        for j in rng.choice(40, rng.integers(1, 7))]).astype(np.uint64)
    b_keys = np.unique([(j << 32) | int(k) for j in range(40)
                        for k in rng.choice(50, rng.integers(0, 6))]).astype(np.uint64)
    a, b = cupy.asarray(a_keys), cupy.asarray(b_keys)
    lo, counts, ends, spans = tasks_mod.ranges(a, b, scan=True)
    got = tasks_mod._rows(cupy, a, ends, counts, None, spans)
    row = (a_keys >> np.uint64(32)).astype(np.int64)
    # rows: the [first, last) A blocks of each non-empty block row, as pairs
    # in any order (appended by atomics); row_first: the first task of each
    # block's row
    starts = np.flatnonzero(np.diff(row, prepend=-1))
    bounds = np.append(starts, len(row))
    assert sorted(map(tuple, host(got.rows)[:2 * got.nrows].reshape(-1, 2).tolist())) == \
        list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    first_task = (host(ends) - host(counts))[starts]
    np.testing.assert_array_equal(host(got.row_first), np.repeat(first_task, np.diff(bounds)))
    row_blocks = np.bincount(row)
    row_tasks = np.bincount(row, weights=host(counts)).astype(np.int64)
    heavy = (row_blocks > 4) | (row_tasks > 20)
    assert got.ntasks == int(host(counts).sum())
    assert got.nrows == np.count_nonzero(row_blocks) and got.max_span == row_tasks.max()
    assert got.long_tasks == row_tasks[row_tasks > 12].sum()
    assert got.heavy_rows == np.count_nonzero(heavy & (row_blocks > 0))
    assert got.heavy_tasks == row_tasks[heavy].sum()
    if nrows > 100:
        assert 0 < got.heavy_rows < got.nrows  # both kinds of row are there


# --- stage 2: count ---------------------------------------------------------------------


def brute_inputs(name, dtype=np.float64, uniform=False):
    a, b = operands(name, dtype, uniform)
    t = brute_tasks([int(k) for k in a.keys], [int(k) for k in b.keys])
    return a, b, t


def as_xp(xp, values, dtype):
    return xp.asarray(np.array(values, dtype=dtype))


def nonempty_blocks(counts) -> int:
    """The number of non-empty output blocks a count stage's scan reports."""
    total = int(counts.scan[-1])
    if counts.shift:
        return total & ((1 << counts.shift) - 1)
    return int(np.count_nonzero(host(counts.bitmaps)))


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("name", list(CASES))
def test_count(name, packed, xp, monkeypatch):
    if not packed:  # the scan of popcounts alone, used past 2**28 output blocks
        monkeypatch.setattr(count_mod, "pack_shift", lambda c_nblocks: 0)
    a, b, t = brute_inputs(name)
    counts = count_mod.count(
        xp.asarray(a.bitmaps), xp.asarray(b.bitmaps), as_xp(xp, t.task_a, np.int64),
        as_xp(xp, t.task_b, np.int64), as_xp(xp, t.c_ptr, np.int64))
    want_bitmaps, want_offsets = brute_count([int(x) for x in a.bitmaps],
                                             [int(x) for x in b.bitmaps], t)
    assert (counts.shift > 0) == packed
    assert nonempty_blocks(counts) == len(want_bitmaps) - want_bitmaps.count(0)
    c_bitmaps, c_offsets = host(counts.bitmaps), host(counts.offsets())
    assert c_bitmaps.dtype == np.uint64 and c_offsets.dtype == np.int64
    assert [int(x) for x in c_bitmaps] == want_bitmaps
    assert c_offsets.tolist() == want_offsets


@pytest.mark.gpu
@pytest.mark.parametrize("records", [False, True])
@pytest.mark.parametrize("hub", [1, 31, 33, 100, 700])
def test_count_by_tasks_blocks_across_warps(hub, records):
    # an output block of `hub` pairs (one A block row against B's block
    # column 0) among blocks of one to three: the count by tasks ORs what
    # lies past a warp in the block's first task, as the count by blocks
    import cupy

    rng = np.random.default_rng(hub)
    a_keys = sorted({(0 << 32) | j for j in range(hub)}
                    | {(int(i) << 32) | int(j) for i in rng.integers(1, 40, 60)
                       for j in rng.integers(0, hub + 3, 2)})
    b_keys = sorted({j << 32 for j in range(hub)}
                    | {(int(j) << 32) | int(k) for j in rng.integers(0, hub + 3, 80)
                       for k in rng.integers(1, 9, 2)})
    a_bitmaps = rng.integers(0, 2**63, len(a_keys), dtype=np.int64).astype(np.uint64)
    b_bitmaps = rng.integers(0, 2**63, len(b_keys), dtype=np.int64).astype(np.uint64)
    a_bitmaps[rng.random(len(a_keys)) < 0.3] = 1  # and products that are empty
    ka, kb = (cupy.asarray(np.array(k, dtype=np.uint64)) for k in (a_keys, b_keys))
    unsized = tasks_mod.tasks(ka, kb, 40, 9, sized=False)
    assert unsized.task_block is not None
    offsets = (cupy.arange(len(a_keys) + 1, dtype=cupy.int64) * 3,
               cupy.arange(len(b_keys) + 1, dtype=cupy.int64) * 5) if records else None
    args = (cupy.asarray(a_bitmaps), cupy.asarray(b_bitmaps), unsized.task_a, unsized.task_b,
            unsized.c_ptr, None, offsets, unsized.c_nblocks)
    got = count_mod.count(*args, unsized.task_block)
    want = count_mod.count(*args)
    n = int(unsized.c_nblocks[0])
    np.testing.assert_array_equal(host(got.bitmaps), host(want.bitmaps))
    # by tasks, the scan is left to the compaction: its items and their total
    assert got.scan is None
    np.testing.assert_array_equal(host(got.sizes), np.diff(host(want.scan)))
    assert got.total.wait() == [int(want.scan[-1])]
    assert (got.pairs is None) == (want.pairs is None) == (not records)
    if records:
        np.testing.assert_array_equal(host(got.pairs.bitmaps), host(want.pairs.bitmaps))
        np.testing.assert_array_equal(host(got.pairs.offsets), host(want.pairs.offsets))
    # and against the host's count of the sized list
    sized = tasks_mod.tasks(*(np.array(k, dtype=np.uint64) for k in (a_keys, b_keys)), 40, 9)
    ref = count_mod.count(a_bitmaps, b_bitmaps, sized.task_a, sized.task_b, sized.c_ptr)
    np.testing.assert_array_equal(host(got.bitmaps)[:n], ref.bitmaps)
    assert host(want.offsets())[-1] == ref.offsets()[-1] and not host(got.bitmaps)[n:].any()
    assert np.diff(host(sized.c_ptr)).max() >= hub


@pytest.mark.parametrize("name", WITH_TASKS)
def test_count_writes_the_pairs_blocks(name, xp):
    # each task's two bitmaps, B's transposed and the value offsets, checked
    # where the multiply reads them: the tasks of non-empty blocks
    a, b, t = brute_inputs(name)
    counts = count_mod.count(
        xp.asarray(a.bitmaps), xp.asarray(b.bitmaps), as_xp(xp, t.task_a, np.int64),
        as_xp(xp, t.task_b, np.int64), as_xp(xp, t.c_ptr, np.int64), None,
        (xp.asarray(a.offsets), xp.asarray(b.offsets)))
    bitmaps, offsets = host(counts.pairs.bitmaps), host(counts.pairs.offsets)
    assert bitmaps.dtype == np.uint64 and offsets.dtype == np.int32
    assert bitmaps.shape == offsets.shape == (len(t.task_a), 2)
    want_bitmaps, _ = brute_count([int(x) for x in a.bitmaps], [int(x) for x in b.bitmaps], t)
    read = [p for q, bitmap in enumerate(want_bitmaps) if bitmap
            for p in range(t.c_ptr[q], t.c_ptr[q + 1])]
    task_a, task_b = np.array(t.task_a, dtype=np.int64), np.array(t.task_b, dtype=np.int64)
    np.testing.assert_array_equal(bitmaps[read, 0], a.bitmaps[task_a[read]])
    np.testing.assert_array_equal(bitmaps[read, 1], b.bitmaps[task_b[read]])
    np.testing.assert_array_equal(offsets[read, 0], a.offsets[task_a[read]])
    np.testing.assert_array_equal(offsets[read, 1], b.offsets[task_b[read]])
    columns = host(counts.pairs.columns)
    assert columns.dtype == np.uint64 and columns.shape == (len(t.task_a), 2)
    transposed = [sum(1 << (8 * (bit & 7) + (bit >> 3)) for bit in range(64) if x >> bit & 1)
                  for x in (int(b.bitmaps[k]) for k in task_b[read])]
    assert [int(x) for x in columns[read, 0]] == transposed


def test_records_fit_below_2_31_values():
    assert count_mod.records_fit(2**31 - 1, 5)
    assert not count_mod.records_fit(5, 2**31)


def test_count_by_hand(xp):
    # one output block, two pairs:
    #   A0 = (0,0) (0,7)       B0 = row 0 all ones          A0 B0 = row 0 all ones
    #   A1 = (7,3)             B1 = (3,7)                   A1 B1 = (7,7), bit 63
    #   A2 = (2,1)             B2 = (1,0)  (second block)   A2 B2 = (2,0), bit 16
    a_bitmaps = np.array([1 | (1 << 7), 1 << 59, 1 << 17], dtype=np.uint64)
    b_bitmaps = np.array([0xFF, 1 << 31, 1 << 8], dtype=np.uint64)
    counts = count_mod.count(
        xp.asarray(a_bitmaps), xp.asarray(b_bitmaps), as_xp(xp, [0, 1, 2], np.int64),
        as_xp(xp, [0, 1, 2], np.int64), as_xp(xp, [0, 2, 3], np.int64))
    assert [int(x) for x in host(counts.bitmaps)] == [0xFF | TOP, 1 << 16]
    assert host(counts.offsets()).tolist() == [0, 9, 10]


def test_count_keeps_structurally_empty_products(xp):
    # A(0,0) holds (0,0) only and B(0,0) holds (1,0) only: the pair exists, but
    # column 0 of A meets row 0 of B, which is empty
    counts = count_mod.count(
        as_xp(xp, [1], np.uint64), as_xp(xp, [1 << 8], np.uint64), as_xp(xp, [0], np.int64),
        as_xp(xp, [0], np.int64), as_xp(xp, [0, 1], np.int64))
    assert [int(x) for x in host(counts.bitmaps)] == [0]
    assert nonempty_blocks(counts) == 0  # reported, so the caller drops the block
    assert host(counts.offsets()).tolist() == [0, 0]


SPECIAL = [0, 1, TOP, ALL_ONES, TOP | 1, 0xFF, 0xFF << 56, 0x0101010101010101,
           0x8080808080808080, 0x8040201008040201, 0x0102040810204080, 0x5555555555555555]


@pytest.mark.parametrize("p_set", [0.05, 0.2, 0.5, 0.9])
def test_bool_product_random_against_dense_matmul(p_set):
    rng = np.random.default_rng(int(p_set * 100))
    bits = rng.random((300, 64)) < p_set
    words = [sum(1 << int(b) for b in np.flatnonzero(row)) for row in bits]
    a = np.array(words[:150], dtype=np.uint64)
    b = np.array(words[150:], dtype=np.uint64)
    got = count_mod.bool_product(a, b)
    assert got.dtype == np.uint64
    want = [bitmap_of((dense_block(x).astype(int) @ dense_block(y).astype(int)) > 0)
            for x, y in zip(words[:150], words[150:])]
    assert [int(x) for x in got] == want


def test_bool_product_special_bitmaps_broadcast():
    a = np.array(SPECIAL, dtype=np.uint64)
    got = count_mod.bool_product(a[:, None], a[None, :])
    assert got.shape == (len(SPECIAL), len(SPECIAL))
    want = [[bitmap_of((dense_block(x).astype(int) @ dense_block(y).astype(int)) > 0)
             for y in SPECIAL] for x in SPECIAL]
    assert [[int(v) for v in row] for row in got] == want


def test_bool_product_identity():
    identity = np.uint64(0x8040201008040201)   # bits 0, 9, 18, ..., 63: the diagonal
    x = np.array(SPECIAL, dtype=np.uint64)
    np.testing.assert_array_equal(count_mod.bool_product(identity, x), x)
    np.testing.assert_array_equal(count_mod.bool_product(x, identity), x)


# --- stage 3: multiply --------------------------------------------------------------------


def run_multiply(xp, a, b, t, c_bitmaps, c_offsets, records=False):
    """Values and nonzero bits (compact's nonzero_bits of the multiply's values);
    also checks the multiply's count of zero values.

    The multiply gets the non-empty blocks only, as in the pipeline (drop_empty
    runs first); empty blocks get no nonzero bit. With ``records`` it reads
    the pairs as ``count.PairBlocks`` (and on the GPU each warp's starts).
    """
    full = np.asarray(c_bitmaps, dtype=np.uint64)
    kept = np.flatnonzero(full)
    offsets = np.asarray(c_offsets, dtype=np.int64)
    flag = None if xp is np else _readback.host_flag()
    c_values, zero_values = multiply_mod.multiply(
        xp.asarray(a.bitmaps), xp.asarray(a.offsets), xp.asarray(a.values),
        xp.asarray(b.bitmaps), xp.asarray(b.offsets), xp.asarray(b.values),
        as_xp(xp, t.task_a, np.int64), as_xp(xp, t.task_b, np.int64),
        as_xp(xp, np.asarray(t.c_ptr[:-1])[kept], np.int64),
        as_xp(xp, np.asarray(t.c_ptr[1:])[kept], np.int64), as_xp(xp, full[kept], np.uint64),
        as_xp(xp, np.append(offsets[kept], offsets[-1]), np.int64), c_offsets[-1],
        zero_flag=flag, pairs=count_mod.pair_blocks(
            xp.asarray(a.bitmaps), xp.asarray(a.offsets), xp.asarray(b.bitmaps),
            xp.asarray(b.offsets), as_xp(xp, t.task_a, np.int64),
            as_xp(xp, t.task_b, np.int64)) if records else None)
    kept_nonzero = host(compact_mod.nonzero_bits(
        as_xp(xp, full[kept], np.uint64), as_xp(xp, np.append(offsets[kept], offsets[-1]),
                                                  np.int64), c_values))
    c_nonzero = np.zeros(full.shape[0], dtype=np.uint64)
    c_nonzero[kept] = kept_nonzero
    zeros = np.count_nonzero(host(c_values) == 0)
    assert int(zero_values[0]) == zeros
    if flag is not None:  # set exactly when a value is zero
        assert flag.read() == int(zeros > 0)
    return c_values, c_nonzero


def assert_values(got, want):
    assert got.dtype == want.dtype
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
    else:
        rtol = 1e-5 if want.dtype in (np.float32, np.complex64) else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("records", [False, True])
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "complex64",
                                   "complex128"])
def test_multiply(name, dtype, records, xp):
    a, b, t = brute_inputs(name, dtype)
    c_bitmaps, c_offsets = brute_count([int(x) for x in a.bitmaps],
                                       [int(x) for x in b.bitmaps], t)
    c_values, c_nonzero = run_multiply(xp, a, b, t, c_bitmaps, c_offsets, records)
    want_values, want_nonzero = brute_multiply(a, b, t, c_bitmaps)
    assert_values(host(c_values), want_values)
    # integer-valued inputs: every sum is exact, so the zero mask is exact too
    assert host(c_nonzero).dtype == np.uint64
    assert [int(x) for x in host(c_nonzero)] == want_nonzero


@pytest.mark.gpu
@pytest.mark.parametrize("records", [False, True])
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", ["int64", "float64", "complex64"])
def test_multiply_index_arithmetic_widths_agree(name, dtype, records, monkeypatch):
    # the kernel's 32-bit index arithmetic (every product of the tests and
    # the corpus) against the 64-bit one that larger products take
    import cupy

    a, b, t = brute_inputs(name, dtype)
    c_bitmaps, c_offsets = brute_count([int(x) for x in a.bitmaps],
                                       [int(x) for x in b.bitmaps], t)
    widths = []
    for dtype_of_index in (np.int32, np.int64):
        monkeypatch.setattr(multiply_mod, "index_type",
                            lambda *sizes, d=dtype_of_index: np.dtype(d))
        c_values, c_nonzero = run_multiply(cupy, a, b, t, c_bitmaps, c_offsets, records)
        widths.append((host(c_values), c_nonzero))
    (narrow, narrow_nonzero), (wide, wide_nonzero) = widths
    assert narrow.tobytes() == wide.tobytes()
    np.testing.assert_array_equal(narrow_nonzero, wide_nonzero)


def force_tiles(monkeypatch, tiles: bool) -> None:
    """Every product of records by the tiles kernels, or none."""
    monkeypatch.setattr(multiply_mod, "TILES_LEAST_VALUES", 0 if tiles else 1 << 62)
    monkeypatch.setattr(multiply_mod, "TILES_VALUES_A_PAIR", 0)


def launched(monkeypatch, run):
    """``run()`` and the names of the kernels it launched."""
    from bmsparse import _kernels

    names: list[str] = []
    monkeypatch.setattr(_kernels, "launch_hook", lambda name, *_: names.append(name))
    try:
        return run(), names
    finally:
        monkeypatch.setattr(_kernels, "launch_hook", None)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "complex64",
                                   "complex128"])
def test_multiply_by_tiles(name, dtype, monkeypatch):
    import cupy

    force_tiles(monkeypatch, True)
    a, b, t = brute_inputs(name, dtype)
    c_bitmaps, c_offsets = brute_count([int(x) for x in a.bitmaps],
                                       [int(x) for x in b.bitmaps], t)
    (c_values, c_nonzero), names = launched(monkeypatch, lambda: run_multiply(
        cupy, a, b, t, c_bitmaps, c_offsets, records=True))
    assert ("bmsparse_multiply_tiles" in " ".join(names)) == (c_offsets[-1] > 0), names
    want_values, want_nonzero = brute_multiply(a, b, t, c_bitmaps)
    assert_values(host(c_values), want_values)
    assert [int(x) for x in host(c_nonzero)] == want_nonzero


def test_tile_values_are_the_kernels():
    # the launch's grid (multiply.py) and the kernel's tile (multiply.cuh) agree
    import re
    from pathlib import Path

    source = (Path(multiply_mod.__file__).parent / "multiply.cuh").read_text()
    threads = int(re.search(r"#define BMSPARSE_TILE_THREADS (\d+)", source).group(1))
    per_thread = int(re.search(r"#define BMSPARSE_TILE_VALUES \((\d+) \* BMSPARSE_TILE_THREADS\)",
                               source).group(1))
    assert multiply_mod._THREADS == threads
    assert multiply_mod.TILE_VALUES == per_thread * threads


def test_by_tiles_takes_large_products_of_few_pairs_a_value():
    many = multiply_mod.TILES_LEAST_VALUES
    few_pairs = many // multiply_mod.TILES_VALUES_A_PAIR
    assert multiply_mod.by_tiles(many, few_pairs, np.dtype(np.int32))
    assert not multiply_mod.by_tiles(many, few_pairs + 1, np.dtype(np.int32))
    assert not multiply_mod.by_tiles(many - 1, 0, np.dtype(np.int32))
    assert not multiply_mod.by_tiles(many, few_pairs, np.dtype(np.int64))


def test_multiply_index_type_is_32_bit_below_2_31():
    assert multiply_mod.index_type(0, 5, 1 << 30) == np.int32
    assert multiply_mod.index_type((1 << 31) - 10_000) == np.int32
    assert multiply_mod.index_type((1 << 31) - 1) == np.int64
    assert multiply_mod.index_type(1, 1 << 40) == np.int64


@pytest.mark.parametrize("name", WITH_TASKS)
def test_multiply_uniform_values(name, xp):
    a, b, t = brute_inputs(name, np.float64, uniform=True)
    c_bitmaps, c_offsets = brute_count([int(x) for x in a.bitmaps],
                                       [int(x) for x in b.bitmaps], t)
    c_values, c_nonzero = run_multiply(xp, a, b, t, c_bitmaps, c_offsets)
    want_values, _ = brute_multiply(a, b, t, c_bitmaps)
    assert_values(host(c_values), want_values)
    # positive values: nothing cancels
    assert [int(x) for x in host(c_nonzero)] == c_bitmaps


@pytest.mark.gpu
@pytest.mark.parametrize("spgemm_path", ["tasks"], indirect=True)
@pytest.mark.parametrize("fit", [True, False])
@pytest.mark.parametrize("format", ["bitmap", "csr"])
def test_product_reads_the_pairs_blocks_where_offsets_fit(format, fit, spgemm_path,
                                                          monkeypatch):
    # operands whose offsets pass int32 go by the tasks' indices instead
    from bmsparse import _kernels, spgemm

    if not fit:
        monkeypatch.setattr(count_mod, "MAX_RECORD_VALUES", 1)
    a, b = operands("rectangular")
    names: list[str] = []
    monkeypatch.setattr(_kernels, "launch_hook", lambda name, *_: names.append(name))
    got = spgemm(a.to_device(), b.to_device(), format=format)
    monkeypatch.setattr(_kernels, "launch_hook", None)
    records = [name for name in names if "multiply" in name and "records" in name]
    assert len(records) == (1 if fit else 0), names
    got = got.get() if format == "csr" else got.get().to_scipy()
    want = a.to_scipy() @ b.to_scipy()
    np.testing.assert_array_equal(got.toarray(), want.toarray())


@pytest.mark.parametrize("a_value,b_value,kept", [
    (2.0, 3.0, True),
    (-1.0, 0.0, False),          # -0.0 is an exact zero, as scipy has it
    (0.0, 5.0, False),
    (np.nan, 1.0, True),         # NaN is not zero
    (np.inf, 0.0, True),         # inf * 0 is NaN
    (1e-300, 1e-300, False),     # underflows to zero
])
def test_multiply_zero_mask_by_hand(a_value, b_value, kept, xp):
    # A(0,0) = [[a]] at bit 0; B(0,0) = [[b]] at bit 0; one task, one output value
    one = BitmapMatrix._from_blocks(np.zeros(1, np.uint64), np.ones(1, np.uint64),
                                    np.array([0, 1]), np.array([a_value]), (1, 1))
    other = BitmapMatrix._from_blocks(np.zeros(1, np.uint64), np.ones(1, np.uint64),
                                      np.array([0, 1]), np.array([b_value]), (1, 1))
    t = Tasks([0], [0], [0], [0, 1])
    with np.errstate(invalid="ignore"):   # inf * 0 warns on the host, as numpy's matmul does
        c_values, c_nonzero = run_multiply(xp, one, other, t, [1], [0, 1])
    np.testing.assert_array_equal(host(c_values), [a_value * b_value])
    assert [int(x) for x in host(c_nonzero)] == [1 if kept else 0]


# Three terms 1, 1e16, -1e16 summed left to right give (1 + 1e16) - 1e16 = 0,
# since 1e16 + 1 rounds to 1e16; summed right to left they give 1.
#   across tasks:   A(0,0) A(0,1) A(0,2) hold 1, 1e16, -1e16 at (0,0); B(j,0) hold 1 at (0,0)
#   inside a block: A(0,0) row 0 = [1, 1e16, -1e16]; B(0,0) column 0 = [1, 1, 1]
ORDER_CASES = {
    "across-tasks": (BitmapMatrix._from_blocks(
        np.array([0, 1, 2], np.uint64), np.ones(3, np.uint64), np.array([0, 1, 2, 3]),
        np.array([1.0, 1e16, -1e16]), (1, 24)), BitmapMatrix._from_blocks(
        np.array([0, 1 << 32, 2 << 32], np.uint64), np.ones(3, np.uint64),
        np.array([0, 1, 2, 3]), np.ones(3), (24, 1)), Tasks([0, 1, 2], [0, 1, 2], [0], [0, 3])),
    "inside-a-block": (BitmapMatrix._from_blocks(
        np.zeros(1, np.uint64), np.array([0b111], np.uint64), np.array([0, 3]),
        np.array([1.0, 1e16, -1e16]), (1, 3)), BitmapMatrix._from_blocks(
        np.zeros(1, np.uint64), np.array([1 | (1 << 8) | (1 << 16)], np.uint64),
        np.array([0, 3]), np.ones(3), (3, 1)), Tasks([0], [0], [0], [0, 1])),
}


@pytest.mark.parametrize("name", list(ORDER_CASES))
def test_multiply_sums_in_task_then_inner_order(name, xp):
    a, b, t = ORDER_CASES[name]
    c_values, c_nonzero = run_multiply(xp, a, b, t, [1], [0, 1])
    assert host(c_values).tolist() == [0.0]
    assert [int(x) for x in host(c_nonzero)] == [0]


# --- stage 4: compact ---------------------------------------------------------------------

# Three output blocks after multiply, with their zero values:
#   block 0, key 5:          bits 0, 1, 3 hold 1, 0, 2   -> bit 1 is dropped
#   block 1, key 9:          bit 63 holds 0              -> the block is dropped
#   block 2, key (1, 1):     bits 10, 20 hold 3, 4       -> kept as it is
COMPACT_IN = ([5, 9, (1 << 32) | 1], [0b1011, TOP, (1 << 10) | (1 << 20)], [0, 3, 4, 6],
              [1, 0, 2, 0, 3, 4], [0b1001, 0, (1 << 10) | (1 << 20)])
COMPACT_OUT = ([5, (1 << 32) | 1], [0b1001, (1 << 10) | (1 << 20)], [0, 2, 4], [1, 2, 3, 4])


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("zeros_known", [True, False])
@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "complex128"])
def test_compact_by_hand(dtype, zeros_known, packed, xp, monkeypatch):
    if not packed:
        monkeypatch.setattr(compact_mod, "pack_shift", lambda n: 0)
    keys, bitmaps, offsets, values, nonzero = COMPACT_IN
    # the zero count as the multiply leaves it on the device, or already read
    zeros = 2 if zeros_known else as_xp(xp, [2], np.uint64)
    got = compact_mod.compact(as_xp(xp, keys, np.uint64), as_xp(xp, bitmaps, np.uint64),
                              as_xp(xp, offsets, np.int64), as_xp(xp, values, dtype),
                              as_xp(xp, nonzero, np.uint64), zeros)
    keys, bitmaps, offsets, values = (host(x) for x in got)
    assert [int(k) for k in keys] == COMPACT_OUT[0]
    assert [int(b) for b in bitmaps] == COMPACT_OUT[1]
    assert offsets.dtype == np.int64 and offsets.tolist() == COMPACT_OUT[2]
    assert values.dtype == np.dtype(dtype) and values.tolist() == COMPACT_OUT[3]


def test_compact_everything_dropped(xp):
    got = compact_mod.compact(as_xp(xp, [3, 4], np.uint64), as_xp(xp, [1, 6], np.uint64),
                              as_xp(xp, [0, 1, 3], np.int64), as_xp(xp, [0, 0, 0], np.float64),
                              as_xp(xp, [0, 0], np.uint64), as_xp(xp, [2], np.uint64))
    keys, bitmaps, offsets, values = (host(x) for x in got)
    assert keys.size == bitmaps.size == values.size == 0
    assert offsets.tolist() == [0]


def counted(xp, bitmaps, packed):
    """A count stage's result for these output bitmaps, packed or not."""
    bitmaps = np.array(bitmaps, dtype=np.uint64)
    sizes = np.bitwise_count(bitmaps).astype(np.int64)
    shift = count_mod.pack_shift(bitmaps.size) if packed else 0
    if shift:
        sizes = (sizes << shift) | (bitmaps != 0)
    scan = np.concatenate([[0], np.cumsum(sizes)])
    return count_mod.Counts(xp.asarray(bitmaps), xp.asarray(scan), shift)


@pytest.mark.parametrize("packed", [True, False])
def test_drop_empty_blocks_before_the_multiply(xp, packed):
    # block 1 is empty (its pairs' products were empty): dropped with its task
    # run, the others keep their offsets (an empty block holds no value)
    keys, bitmaps, offsets, first, last, nnz, *_ = compact_mod.drop_empty(
        as_xp(xp, [3, 4, 7], np.uint64), counted(xp, [1, 0, 6], packed),
        as_xp(xp, [0, 2, 3, 5], np.int64))
    keys, bitmaps, offsets, first, last = (host(x) for x in (keys, bitmaps, offsets, first,
                                                             last))
    assert keys.tolist() == [3, 7] and bitmaps.tolist() == [1, 6]
    assert offsets.tolist() == [0, 1, 3] and nnz == 3
    assert first.tolist() == [0, 3] and last.tolist() == [2, 5]


@pytest.mark.parametrize("packed", [True, False])
def test_drop_empty_finds_the_block_of_each_warp(xp, packed):
    # kept blocks of 20, 30, 64 and 1 values: values 0, 32, 64, 96 lie in
    # kept blocks 0, 1, 2, 2, which the multiply's warps start from
    full = 2**64 - 1
    bitmaps = [(1 << 20) - 1, 0, (1 << 30) - 1, full, 0, 1 << 63]
    n = len(bitmaps)
    got = compact_mod.drop_empty(as_xp(xp, list(range(n)), np.uint64),
                                 counted(xp, bitmaps, packed),
                                 as_xp(xp, list(range(n + 1)), np.int64))
    offsets = host(got.offsets)
    assert offsets.tolist() == [0, 20, 50, 114, 115] and got.nnz == 115
    if xp is np:
        assert got.warp_block is None and got.warp_starts is None  # the host needs none
    else:
        assert host(got.warp_block).tolist() == [0, 1, 2, 2]
        assert_warp_words(got)


@pytest.mark.gpu
@pytest.mark.parametrize("runs, scratch", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("kept_every", [1, 2, 3, 50, 0])
def test_drop_empty_of_padded_arrays_queued_before_the_sync(kept_every, runs, scratch):
    # an unsized task list's arrays (tasks(sized=False)) counted by tasks:
    # the blocks past the listed ones are empty, as are some listed ones;
    # the count left its items unscanned, with their total on its way to the
    # host, and one launch queued before the sync scans them (over 11 scan
    # tiles) and compacts into scratch as long as the arrays; then C's
    # blocks are copied out (fewer than half kept) or stay in it, and the
    # warps' words are written: against the host's drop_empty. kept_every 0:
    # nothing kept, C has no value. With runs, the task runs go to the
    # given buffers (here longer than the arrays, full of garbage). With
    # scratch, C's blocks stay in the scratch however few
    import cupy

    n, listed = 22000, 19000
    rng = np.random.default_rng(kept_every)
    bitmaps = rng.integers(1, 2**63, n, dtype=np.uint64) | np.uint64(1)
    bitmaps[listed:] = 0
    if kept_every:
        bitmaps[np.arange(n) % kept_every != 0] = 0
        bitmaps[7] = np.uint64(2**64 - 1)  # a full block: warps inside one block
    else:
        bitmaps[:] = 0
    keys = np.arange(10, 10 + n, dtype=np.uint64)
    c_ptr = np.arange(n + 1, dtype=np.int64) * 2
    buffers = tuple(cupy.full(n + 5, -7, dtype=cupy.int64) for _ in range(2)) if runs else None
    counts = counted(cupy, bitmaps, True)
    counts = counts._replace(scan=None, sizes=cupy.diff(counts.scan),
                             total=_readback.read_later((counts.scan, -1)))
    got = compact_mod.drop_empty(cupy.asarray(keys), counts,
                                 cupy.asarray(c_ptr), cupy.asarray([listed], dtype=np.int64),
                                 buffers, scratch)
    want = compact_mod.drop_empty(keys, counted(np, bitmaps, True), c_ptr)
    if runs:
        assert got.first.data.ptr == buffers[0].data.ptr
        assert got.last.data.ptr == buffers[1].data.ptr
    # the scratch holds keys, then bitmaps, then offsets, each n long
    in_scratch = got.bitmaps.data.ptr - got.keys.data.ptr == 8 * n
    assert in_scratch == (scratch or 2 * len(want.keys) >= n)
    for field in ("keys", "bitmaps", "offsets", "first", "last"):
        np.testing.assert_array_equal(host(getattr(got, field)), getattr(want, field),
                                      err_msg=field)
    assert got.nnz == want.nnz == int(np.bitwise_count(bitmaps).sum())
    assert_warp_words(got)


@pytest.mark.parametrize("n, copied", [(0, True), (4, True), (5, False), (10, False)])
def test_front_copies_what_would_leave_most_of_the_array_unused(n, copied, xp):
    # the first n of 10 items: a view while it uses half of the array or
    # more, else a copy (the dropped tail would live as long as C)
    array = xp.arange(10, dtype=xp.int64)
    got = tasks_mod.front(array, n)
    assert host(got).tolist() == list(range(n))
    assert xp.shares_memory(got, array) == (not copied)


def assert_warp_words(kept: compact_mod.Kept) -> None:
    """``kept``'s warp words (on the GPU) against their definition."""
    offsets = host(kept.offsets)
    want = np.searchsorted(offsets, np.arange(0, kept.nnz, 32), side="right") - 1
    assert host(kept.warp_block).tolist() == want.tolist()
    assert host(kept.warp_starts).tolist() == warp_words(offsets, kept.nnz)


def warp_words(offsets: np.ndarray, nnz: int) -> list[int]:
    """multiply.warp_arrays' starts of blocks at ``offsets`` (strictly
    increasing, the last nnz), from their definition."""
    words = []
    for first in range(0, nnz, 32):
        q0 = np.searchsorted(offsets, first, side="right") - 1
        starts = sum(1 << (32 + int(o) - first) for o in offsets[:-1] if first < o < first + 32)
        words.append(starts | (first - int(offsets[q0])))
    return words


@pytest.mark.parametrize("packed", [True, False])
def test_drop_empty_without_empty_blocks_keeps_the_arrays(xp, packed):
    keys, counts = as_xp(xp, [3, 7], np.uint64), counted(xp, [1, 6], packed)
    got = compact_mod.drop_empty(keys, counts, as_xp(xp, [0, 2, 5], np.int64))
    assert got[0] is keys and got[1] is counts.bitmaps and got[5] == 3
    assert host(got[2]).tolist() == [0, 1, 3]
    assert host(got[3]).tolist() == [0, 2] and host(got[4]).tolist() == [2, 5]


def test_compact_nothing_dropped_returns_the_inputs(xp):
    args = (as_xp(xp, [3, 4], np.uint64), as_xp(xp, [1, 6], np.uint64),
            as_xp(xp, [0, 1, 3], np.int64), as_xp(xp, [1, 2, 3], np.float64),
            as_xp(xp, [1, 6], np.uint64), as_xp(xp, [0], np.uint64))
    got = compact_mod.compact(*args)
    assert all(g is a for g, a in zip(got, args[:4]))


# --- the CUDA kernels against their NumPy twins, intermediate by intermediate --------------


@pytest.mark.gpu
@pytest.mark.parametrize("runs", [0, 32])
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", ["int64", "float32", "float64", "complex128"])
def test_cuda_intermediates_equal_numpy(name, dtype, runs, monkeypatch):
    monkeypatch.setattr(tasks_mod, "RANK_MAX_RUNS", runs)  # sorted or merged task lists
    import cupy

    a, b = operands(name, dtype)
    results = {}
    for xp in (np, cupy):
        t = tasks_mod.tasks(*task_args(xp, a, b))
        counts = count_mod.count(
            xp.asarray(a.bitmaps), xp.asarray(b.bitmaps), t.task_a, t.task_b, t.c_ptr)
        kept = compact_mod.drop_empty(t.c_keys, counts, t.c_ptr)
        c_values, zero_values = multiply_mod.multiply(
            xp.asarray(a.bitmaps), xp.asarray(a.offsets), xp.asarray(a.values),
            xp.asarray(b.bitmaps), xp.asarray(b.offsets), xp.asarray(b.values),
            t.task_a, t.task_b, kept[3], kept[4], kept[1], kept[2], kept[5])
        c_nonzero = compact_mod.nonzero_bits(kept[1], kept[2], c_values)
        out = compact_mod.compact(kept[0], kept[1], kept[2], c_values, None, zero_values)
        results[xp.__name__] = dict(
            scan=counts.scan, zero_values=zero_values, task_a=t.task_a, task_b=t.task_b,
            c_keys=t.c_keys, c_ptr=t.c_ptr, c_bitmaps=counts.bitmaps,
            c_first=kept[3], c_last=kept[4], c_nonzero=c_nonzero, c_values=c_values,
            keys=out[0], bitmaps=out[1], offsets=out[2], values=out[3])
    want, got = results["numpy"], results["cupy"]
    for key in want:
        g, w = host(got[key]), want[key]
        assert g.dtype == w.dtype, key
        if key in ("c_values", "values"):
            assert_values(g, w)
        else:
            np.testing.assert_array_equal(g, w, err_msg=key)
