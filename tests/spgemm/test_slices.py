"""Memory-bounded SpGEMM: slices of A's block rows give the unsliced result, bit for bit."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from bmsparse import BitmapMatrix, spgemm
from bmsparse.semiring import plus_times
from bmsparse.spgemm import rowdense, rowmerge, slices
from bmsparse.spgemm import tasks as tasks_mod
from tests.helpers import assert_same_csr, random_csr, scipy_product, to_device
from tests.spgemm.test_spgemm import power_law

# the package's spgemm attribute is the function; the module holds _product
spgemm_mod = importlib.import_module("bmsparse.spgemm")


@pytest.fixture(autouse=True)
def task_list_path(monkeypatch):
    """Slicing is the task-list path's: products here never take the row merge
    or the dense accumulators (their own fallback to this path is tested in
    test_rowmerge.py)."""
    monkeypatch.setattr(rowmerge, "MAX_ROW_BLOCKS", -1)
    monkeypatch.setattr(rowdense, "MAX_COLUMNS", -1)


def same_bits(xp, got: BitmapMatrix, want: BitmapMatrix) -> None:
    assert got.shape == want.shape and got.nnz == want.nnz
    host = (lambda a: a) if xp is np else (lambda a: a.get())
    for name in ("keys", "bitmaps", "offsets"):
        np.testing.assert_array_equal(host(getattr(got, name)), host(getattr(want, name)))
    np.testing.assert_array_equal(host(got.values).view(np.uint64),
                                  host(want.values).view(np.uint64))


def operands(xp):
    a = power_law(1500, 4)
    return a, to_device(BitmapMatrix(a), xp)


def test_plan_covers_whole_block_rows_within_budget(xp):
    a, m = operands(xp)
    budget = 40 * tasks_mod.BYTES_PER_TASK
    plan = slices.plan_slices(m, m, budget)
    assert plan[0][0] == 0 and plan[-1][1] == m.nblocks
    assert all(prev[1] == nxt[0] for prev, nxt in zip(plan, plan[1:]))
    keys = m.keys if xp is np else m.keys.get()
    rows = keys >> np.uint64(32)
    for first, last in plan[1:]:
        assert rows[first] != rows[first - 1]   # a slice starts a block row
    assert len(plan) > 5


@pytest.mark.parametrize("value_bytes", [0, 16])
def test_block_needs_charge_tasks_and_scalar_products(xp, value_bytes):
    a, m = operands(xp)
    b = power_law(1500, 7)
    mb = to_device(BitmapMatrix(b), xp)
    lo, counts = tasks_mod.ranges(m.keys, mb.keys)
    got = slices.block_needs(m.bitmaps, mb.bitmaps, lo, counts, value_bytes)
    got, counts = (got, counts) if xp is np else (got.get(), counts.get())
    # reference: every stored A[r, c] meets the non-zeros of B's row c
    coo = a.tocoo()
    row_nnz = np.diff(b.tocsr().indptr)
    keys = (coo.row.astype(np.uint64) // 8 << np.uint64(32)) | (coo.col.astype(np.uint64) // 8)
    block = np.searchsorted(m.keys if xp is np else m.keys.get(), keys)
    multiplies = np.bincount(block, weights=row_nnz[coo.col], minlength=m.nblocks)
    want = counts * tasks_mod.BYTES_PER_TASK + multiplies.astype(np.int64) * value_bytes
    np.testing.assert_array_equal(got, want)


def test_every_slice_holds_its_budget(xp, monkeypatch):
    # what each slice actually needs once counted (tasks and values) stays
    # within max_memory, and the plan is not so coarse that it retries
    a, m = operands(xp)
    budget = 300 * tasks_mod.BYTES_PER_TASK
    real = spgemm_mod._product
    calls = []

    def recorded(a_part, b_part, sr, dtype, mask, complement, drop_zeros, timings, max_bytes,
                 value_bytes, csr=False):
        assert not csr  # a slice is a BitmapMatrix
        c = real(a_part, b_part, sr, dtype, mask, complement, drop_zeros, timings, max_bytes,
                 value_bytes)
        lo, counts = tasks_mod.ranges(a_part.keys, b_part.keys)
        ntasks = int(counts.sum())
        calls.append(ntasks * tasks_mod.BYTES_PER_TASK + c.nnz * value_bytes)
        return c

    monkeypatch.setattr(spgemm_mod, "_product", recorded)
    timings = {}
    spgemm(m, m, max_memory=budget, timings=timings)
    assert len(calls) == timings["slices"] > 1
    assert max(calls) <= budget


@pytest.mark.parametrize("budget_tasks", [80, 400, 10**9])
def test_sliced_product_is_bit_identical(budget_tasks, xp):
    a, m = operands(xp)
    whole = spgemm(m, m)
    timings = {}
    got = spgemm(m, m, max_memory=budget_tasks * tasks_mod.BYTES_PER_TASK, timings=timings)
    same_bits(xp, got, whole)
    assert (timings["slices"] > 1) == (budget_tasks < 10**9)
    assert_same_csr(got.to_scipy(), scipy_product(a, a))


def test_one_block_row_too_large_raises_memory_error(xp):
    _, m = operands(xp)
    with pytest.raises(MemoryError, match=r"block row \d+ of A alone needs about [\d,]+ bytes "
                                          r"but only 100 bytes are available"):
        spgemm(m, m, max_memory=100)


def test_output_on_the_host(xp):
    a, m = operands(xp)
    got = spgemm(m, m, max_memory=200 * tasks_mod.BYTES_PER_TASK, output="host")
    assert not got.on_device
    same_bits(np, got, spgemm(m, m).get())


@pytest.mark.gpu
def test_pieces_wait_on_the_host_when_c_and_its_pieces_do_not_fit(monkeypatch):
    # the first attempt to allocate C next to its pieces runs out of memory:
    # the pieces move to the host and C is filled from there, bit for bit
    import cupy

    _, m = operands(cupy)
    whole = spgemm(m, m)
    real, failures = slices._joined, []

    def first_fails(xp, pieces, *args):
        if not failures:
            failures.append(len(pieces))
            raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 0)
        assert all(not p.on_device for p in pieces)
        return real(xp, pieces, *args)

    monkeypatch.setattr(slices, "_joined", first_fails)
    timings = {}
    got = spgemm(m, m, max_memory=200 * tasks_mod.BYTES_PER_TASK, timings=timings)
    assert failures == [timings["slices"]] and timings["slices"] > 1
    assert got.on_device
    same_bits(cupy, got, whole)


def test_unknown_output_is_refused():
    m = BitmapMatrix(random_csr(8, 8, 0.5, seed=1))
    with pytest.raises(ValueError, match="output must be 'device' or 'host', got 'disk'"):
        spgemm(m, m, output="disk")


@pytest.mark.parametrize("max_memory,error,match", [
    ("1e9", TypeError, "max_memory must be a number of bytes, got str"),
    (True, TypeError, "max_memory must be a number of bytes, got bool"),
    (-5, ValueError, "max_memory must be at least 1 byte, got -5"),
    (0, ValueError, "max_memory must be at least 1 byte, got 0"),
    (float("nan"), ValueError, "max_memory must be at least 1 byte, got nan"),
])
def test_bad_max_memory_is_refused(max_memory, error, match):
    m = BitmapMatrix(random_csr(8, 8, 0.5, seed=1))
    with pytest.raises(error, match=match):
        spgemm(m, m, max_memory=max_memory)
    with pytest.raises(error, match=match):
        slices.plan_slices(m, m, max_memory)


@pytest.mark.parametrize(("value_bytes", "error", "match"), [
    (8.5, TypeError, "value_bytes must be an integer, got float"),
    ("8", TypeError, "value_bytes must be an integer, got str"),
    (True, TypeError, "value_bytes must be an integer, got bool"),
    (-8, ValueError, "value_bytes must be at least 0, got -8"),
])
def test_plan_slices_checks_value_bytes(value_bytes, error, match, xp):
    # a float crashed in a ufunc; a negative count shrank the charge
    m = to_device(BitmapMatrix(random_csr(40, 40, 0.2, seed=1)), xp)
    with pytest.raises(error, match=match):
        slices.plan_slices(m, m, 10**6, value_bytes)


def test_plan_slices_checks_its_operands():
    a = BitmapMatrix(random_csr(8, 300, 0.5, seed=1))
    b = BitmapMatrix(random_csr(20, 8, 0.5, seed=2))
    with pytest.raises(ValueError, match=r"dimension mismatch .* \(8, 300\) and \(20, 8\)"):
        slices.plan_slices(a, b, 10**6)
    with pytest.raises(TypeError, match="two BitmapMatrix operands, got csr_array"):
        slices.plan_slices(random_csr(8, 300, 0.5, seed=1), a.T, 10**6)
    with pytest.raises(TypeError, match="max_memory must be a number of bytes, got None"):
        slices.plan_slices(a, a.T, None)


def test_max_memory_may_be_a_float():
    a = random_csr(40, 40, 0.2, seed=2)
    m = BitmapMatrix(a)
    assert_same_csr(spgemm(m, m, max_memory=1e9).to_scipy(), a @ a)


def test_out_of_memory_halves_the_slice(xp, monkeypatch):
    # a product of more than 60 blocks of A "runs out of memory": the retry
    # halves slices at block-row boundaries until each fits
    a, m = operands(xp)
    whole = spgemm(m, m)
    real = spgemm_mod._product

    def small_only(a_part, b_part, *args, **kwargs):
        if a_part.nblocks > 60:
            raise MemoryError("out of memory (simulated)")
        return real(a_part, b_part, *args, **kwargs)

    monkeypatch.setattr(spgemm_mod, "_product", small_only)
    if xp is np:
        monkeypatch.setattr(slices, "device_budget", lambda xp, max_memory: 10**12)
    timings = {}
    same_bits(xp, spgemm(m, m, timings=timings), whole)
    assert timings["slices"] > m.nblocks // 60


def test_out_of_memory_on_a_single_block_row_says_so(xp, monkeypatch):
    _, m = operands(xp)

    def never(*args, **kwargs):
        raise MemoryError("out of memory (simulated)")

    monkeypatch.setattr(spgemm_mod, "_product", never)
    monkeypatch.setattr(slices, "device_budget", lambda xp, max_memory: 12345)
    with pytest.raises(MemoryError, match="block row 0 of A alone needs more memory than is "
                                          "free but only 12,345 bytes are available"):
        spgemm(m, m)


def test_out_of_memory_on_the_host_is_numpys_own(monkeypatch):
    # with no budget to slice within, the retry raised "TypeError: max_memory
    # must be a number of bytes, got None" over the MemoryError
    _, m = operands(np)

    def never(*args, **kwargs):
        raise MemoryError("Unable to allocate 64.0 GiB (simulated)")

    monkeypatch.setattr(spgemm_mod, "_product", never)
    with pytest.raises(MemoryError, match=r"Unable to allocate 64.0 GiB \(simulated\)"):
        spgemm(m, m)


def test_task_list_larger_than_free_memory_is_sliced_before_allocation(xp, monkeypatch):
    # free memory below the whole task list: the task stage refuses at its
    # first sync and the product runs in slices
    _, m = operands(xp)
    whole = spgemm(m, m)
    monkeypatch.setattr(slices, "device_budget",
                        lambda xp, max_memory: 300 * tasks_mod.BYTES_PER_TASK)
    monkeypatch.setattr(tasks_mod, "UNCHECKED_BYTES", 0)  # check even this small a list
    if xp is np:  # the host path has no free-memory check: give it one
        real = spgemm_mod._product
        # max_bytes is the last positional argument but one, value_bytes the last
        monkeypatch.setattr(spgemm_mod, "_product", lambda *args, **kw: real(
            *args[:-2], 300 * tasks_mod.BYTES_PER_TASK, args[-1], **kw))
    timings = {}
    same_bits(xp, spgemm(m, m, timings=timings), whole)
    assert timings["slices"] > 1


def test_free_memory_is_asked_only_for_large_needs():
    asked = []

    def free() -> int:
        asked.append(1)
        return 10**12

    tasks_mod.check_budget("small", tasks_mod.UNCHECKED_BYTES - 1, free)
    assert not asked
    tasks_mod.check_budget("large", tasks_mod.UNCHECKED_BYTES, free)
    assert asked == [1]
    with pytest.raises(tasks_mod.OverBudget, match="huge needs about 1,000,000,000,000,000 "
                                                   "bytes, more than 1,000,000,000,000"):
        tasks_mod.check_budget("huge", 10**15, free)
    with pytest.raises(MemoryError, match="needs about 101 bytes, more than 100"):
        tasks_mod.check_budget("a number", 101, 100)  # a number is always checked


def test_free_memory_is_checked_against_the_values_still_to_allocate(xp, monkeypatch):
    # free memory read after the task list exists already excludes it: only
    # the values count against it, while a fixed budget covers both
    _, m = operands(xp)
    whole = spgemm(m, m)
    value_bytes = 64  # a charge per value, large enough that the values outweigh the tasks
    values = whole.nnz * value_bytes
    listed = int(tasks_mod.ranges(m.keys, m.keys)[1].sum()) * tasks_mod.BYTES_PER_TASK
    monkeypatch.setattr(tasks_mod, "UNCHECKED_BYTES", 0)
    args = (m, m, plus_times, np.dtype(np.float64), None, False, True, None)
    same_bits(xp, spgemm_mod._product(*args, lambda: values, value_bytes), whole)
    with pytest.raises(tasks_mod.OverBudget):
        spgemm_mod._product(*args, lambda: values - 1, value_bytes)
    with pytest.raises(tasks_mod.OverBudget):
        spgemm_mod._product(*args, listed + values - 1, value_bytes)
    same_bits(xp, spgemm_mod._product(*args, listed + values, value_bytes), whole)


def test_free_memory_is_read_once_per_product(monkeypatch):
    calls = []
    monkeypatch.setattr(slices, "device_budget", lambda xp, max_memory: calls.append(1) or 5)
    free = slices.free_memory(np)
    assert (free(), free(), calls) == (5, 5, [1])


def test_task_stage_refuses_a_list_larger_than_max_bytes(xp):
    _, m = operands(xp)
    with pytest.raises(MemoryError, match=r"the task list of [\d,]+ tasks needs about "
                                          r"[\d,]+ bytes, more than 1,000"):
        tasks_mod.tasks(m.keys, m.keys, 1 << 20, 1 << 20, max_bytes=1000)
