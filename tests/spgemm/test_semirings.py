"""spgemm in every semiring, with and without masks, against dense references.

A dense reference puts the semiring's identity (±inf for min/max) where an
operand has no entry, reduces over j, and marks as missing the entries with
no j at all: that is the structure bmsparse must produce, never a stored
infinity.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bmsparse import BitmapMatrix, semiring, spgemm
from bmsparse.spgemm import masked_pair_sum
from bmsparse.spgemm import tasks as tasks_mod
from tests.helpers import assert_same_csr, random_csr, scipy_product, to_device

VALUE_SEMIRINGS = ["min_plus", "max_plus", "max_times"]

# every test here runs through both strategies (see conftest.py)
pytestmark = pytest.mark.usefixtures("spgemm_path")


def dense_reference(a: sp.csr_array, b: sp.csr_array, name: str) -> tuple[np.ndarray,
                                                                        np.ndarray]:
    """(values, present) of ``a (+).(x) b`` with dense arrays; values are
    meaningless where ``present`` is False."""
    pa, pb = a.toarray() != 0, b.toarray() != 0
    present = (pa.astype(np.int64) @ pb.astype(np.int64)) > 0
    va, vb = a.toarray(), b.toarray()
    both = pa[:, :, None] & pb[None, :, :]
    if name == "plus_pair":
        return both.sum(axis=1), present
    terms = va[:, :, None] + vb[None, :, :] if name.endswith("plus") else \
        va[:, :, None] * vb[None, :, :]
    if name.startswith("min"):
        values = np.where(both, terms, np.inf).min(axis=1)
    else:
        values = np.where(both, terms, -np.inf).max(axis=1)
    return values, present


def as_dense(c: BitmapMatrix) -> tuple[np.ndarray, np.ndarray]:
    s = c.to_scipy().tocoo()
    values = np.zeros(c.shape, dtype=np.float64 if c.dtype.kind != "i" else np.int64)
    present = np.zeros(c.shape, dtype=bool)
    values[s.row, s.col] = s.data
    present[s.row, s.col] = True
    return values, present


def operands(m, k, n, density, seed, dtype=np.float64):
    a = random_csr(m, k, density, seed, dtype)
    b = random_csr(k, n, density, seed + 1, dtype)
    return a, b


@pytest.mark.parametrize("name", VALUE_SEMIRINGS)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
@pytest.mark.parametrize("m,k,n,density", [(37, 29, 41, 0.2), (64, 64, 64, 0.05),
                                           (9, 70, 13, 0.5), (1, 1, 1, 1.0)])
def test_min_max_semirings_against_dense(name, dtype, m, k, n, density, xp):
    a, b = operands(m, k, n, density, seed=3, dtype=dtype)
    c = spgemm(to_device(BitmapMatrix(a), xp), to_device(BitmapMatrix(b), xp), semiring=name)
    assert c.dtype == np.dtype(dtype)
    want, want_present = dense_reference(a, b, name)
    got, got_present = as_dense(c)
    np.testing.assert_array_equal(got_present, want_present)
    np.testing.assert_array_equal(got[want_present], want[want_present].astype(dtype))


def test_min_plus_keeps_zero_and_negative_entries(xp):
    # (0 + 0) and (-1 + 1) are real path lengths, not missing entries; A and
    # B hold explicit zero edge weights
    a = sp.csr_array((np.array([0.0, -1.0]), np.array([0, 1]), np.array([0, 2, 2])),
                     shape=(2, 2))
    b = sp.csr_array((np.array([0.0, 1.0]), np.array([0, 0]), np.array([0, 1, 2])),
                     shape=(2, 2))
    c = spgemm(to_device(BitmapMatrix(a), xp), to_device(BitmapMatrix(b), xp),
               semiring="min_plus")
    got = c.to_scipy()
    assert got.nnz == 1 and got[0, 0] == 0.0


@pytest.mark.parametrize("dtype", [None, "int32"])
@pytest.mark.parametrize("operand_dtype", ["bool", "float64", "int32"])
def test_plus_pair_counts_common_neighbours(dtype, operand_dtype, xp):
    a, b = operands(45, 33, 27, 0.25, seed=11, dtype=operand_dtype)
    c = spgemm(to_device(BitmapMatrix(a), xp), to_device(BitmapMatrix(b), xp),
               semiring=semiring.plus_pair, dtype=dtype)
    assert c.dtype == np.dtype(dtype or "int64")
    want = scipy_product((a != 0).astype(np.int64), (b != 0).astype(np.int64))
    assert_same_csr(c.to_scipy(), want.astype(c.dtype))


@pytest.mark.parametrize("name", ["or_and", "lor_land", "any_pair"])
def test_structural_semirings_give_a_pattern(name, xp):
    a, b = operands(50, 40, 30, 0.1, seed=5)
    c = spgemm(to_device(BitmapMatrix(a), xp), to_device(BitmapMatrix(b), xp), semiring=name)
    assert c.dtype == np.bool_ and c.values is None
    want = scipy_product((a != 0).astype(np.int64), (b != 0).astype(np.int64)) != 0
    assert_same_csr(c.to_scipy(), want)


@pytest.mark.parametrize("name", ["plus_times", "plus_pair", "or_and", "min_plus"])
@pytest.mark.parametrize("copy_of", ["pickle", "deepcopy"])
def test_a_copied_constant_runs_as_the_constant(name, copy_of):
    # the product tells plus_times (drops zeros, bool @ bool is Boolean) and
    # plus_pair apart by identity: a copy ran as another semiring
    import copy
    import pickle

    constant = semiring.get_semiring(name)
    copied = pickle.loads(pickle.dumps(constant)) if copy_of == "pickle" \
        else copy.deepcopy(constant)
    assert copied is not constant and semiring.get_semiring(copied) is constant
    a = BitmapMatrix(np.array([[1.0, 1.0], [0.0, 2.0]]))
    b = BitmapMatrix(np.array([[1.0, 0.0], [-1.0, 3.0]]))
    if name in ("plus_pair", "or_and"):
        a, b = a.astype(bool), b.astype(bool)
    want, got = spgemm(a, b, semiring=constant), spgemm(a, b, semiring=copied)
    assert got.dtype == want.dtype and got.nnz == want.nnz
    np.testing.assert_array_equal(got.toarray(), want.toarray())


@pytest.mark.parametrize(("name", "dtype", "identity"), [
    ("plus_times", "float64", 0.0), ("min_plus", "int32", np.iinfo(np.int32).max),
    ("max_plus", "float32", -np.inf), ("lor_land", "bool", False), ("lor_land", "int64", 0),
    ("any_pair", "bool", False), ("min_plus", "bool", True), ("max_times", "bool", False)])
def test_identity_of_each_monoid(name, dtype, identity):
    got = semiring.get_semiring(name).identity(dtype)
    assert got.dtype == np.dtype(dtype) and got == identity


def test_a_structural_semiring_refuses_a_value_dtype():
    a = BitmapMatrix(np.eye(3, dtype=bool))
    with pytest.raises(TypeError, match="semiring lor_land gives a bool .* not float64"):
        spgemm(a, a, semiring="or_and", dtype=np.float64)
    assert spgemm(a, a, semiring="or_and", dtype=bool).dtype == np.bool_


def test_plus_times_keeps_zeros_the_others_never_drop():
    # 1*1 + 1*(-1) = 0: plus_times drops it as scipy does; max_plus keeps 2
    a = BitmapMatrix(np.array([[1.0, 1.0]]))
    b = BitmapMatrix(np.array([[1.0], [-1.0]]))
    assert spgemm(a, b).nnz == 0
    assert spgemm(a, b, keep_zeros=True).nnz == 1
    assert spgemm(a, b, semiring="max_plus").toarray()[0, 0] == 2.0


def test_unknown_semiring_lists_the_known_ones():
    a = BitmapMatrix(np.eye(3))
    with pytest.raises(ValueError, match=r"unknown semiring 'min_times'; known: plus_times"):
        spgemm(a, a, semiring="min_times")
    with pytest.raises(TypeError, match="semiring must be a name"):
        spgemm(a, a, semiring=3)


@pytest.mark.parametrize("custom", [
    semiring.Semiring("xor_times", "xor", "times", "XorTimes", (np.dtype(np.float64),)),
    semiring.Semiring("min_times", "min", "times", "MinTimes", (np.dtype(np.float64),)),
    # a constant with other dtypes: not the constant, so it kept zeros
    semiring.Semiring("plus_times", "plus", "times", "PlusTimes", (np.dtype(np.float64),)),
])
def test_a_semiring_that_is_no_constant_is_refused(custom, xp):
    # one of an unknown monoid raised KeyError on the host; none has a
    # functor in _cuda/semiring.cuh, so none compiles on the GPU
    a = to_device(BitmapMatrix(np.array([[1.0, 2.0], [3.0, 4.0]])), xp)
    with pytest.raises(ValueError, match=rf"unknown semiring {custom.name!r} \(a Semiring "
                                         r"that is none of bmsparse.semiring's constants\); "
                                         r"known: plus_times"):
        spgemm(a, a, semiring=custom)


def test_masked_pair_sum_needs_a_mask(xp):
    a = to_device(BitmapMatrix(np.ones((3, 3))), xp)
    with pytest.raises(TypeError, match="masked_pair_sum needs a mask, got None"):
        masked_pair_sum(a, a, None)


@pytest.mark.parametrize("name,dtype,supported", [
    ("min_plus", "bool", "int32, int64, float32, float64"),
    ("max_times", "complex128", "int32, int64, float32, float64"),
    ("plus_pair", "float64", "int32, int64"),
])
def test_unsupported_dtype_names_the_semiring(name, dtype, supported):
    a = BitmapMatrix(np.eye(3, dtype=bool if dtype == "bool" else np.float64))
    kwargs = {"dtype": dtype} if name == "plus_pair" else {}
    a = a if name == "plus_pair" else a.astype(dtype)
    with pytest.raises(TypeError, match=rf"semiring {name} does not support dtype {dtype}; "
                                        rf"supported: {supported}"):
        spgemm(a, a, semiring=name, **kwargs)


@pytest.mark.parametrize("name", ["plus_times", *VALUE_SEMIRINGS, "plus_pair", "or_and"])
@pytest.mark.parametrize("side", ["A.T @ A", "A @ A.T"])
def test_transposed_operands(name, side, xp):
    a = random_csr(43, 31, 0.15, seed=21)
    A = to_device(BitmapMatrix(a), xp)
    left, right, sa, sb = (A.T, A, a.T, a) if side == "A.T @ A" else (A, A.T, a, a.T)
    c = spgemm(left, right, semiring=name)
    if name == "plus_times":
        assert_same_csr(c.to_scipy(), scipy_product(sa, sb))
        return
    want, present = dense_reference(sp.csr_array(sa), sp.csr_array(sb), name)
    got, got_present = as_dense(c)
    np.testing.assert_array_equal(got_present, present)
    if c.values is not None:
        np.testing.assert_array_equal(got[present], want[present])


# ---- masks ------------------------------------------------------------------


def masked(values: np.ndarray, present: np.ndarray, mask: sp.csr_array,
           complement: bool) -> tuple[np.ndarray, np.ndarray]:
    # a stored zero in the mask is an entry of its structure
    allowed = np.zeros(mask.shape, dtype=bool)
    coo = mask.tocoo()
    allowed[coo.row, coo.col] = True
    keep = present & (~allowed if complement else allowed)
    return values, keep


@pytest.mark.parametrize("complement", [False, True])
@pytest.mark.parametrize("name", ["plus_times", "min_plus", "plus_pair", "or_and"])
@pytest.mark.parametrize("m,k,n,density,mask_density", [
    (37, 29, 41, 0.2, 0.3), (64, 16, 64, 0.1, 0.02), (9, 9, 9, 0.6, 1.0), (20, 20, 20, 0.2, 0.0),
])
def test_masked_product(complement, name, m, k, n, density, mask_density, xp):
    a, b = operands(m, k, n, density, seed=7)
    mask = random_csr(m, n, mask_density, seed=99)
    if mask.nnz:
        mask.data[0] = 0.0  # stored zero: still part of the structure
    c = spgemm(to_device(BitmapMatrix(a), xp), to_device(BitmapMatrix(b), xp), semiring=name,
               mask=to_device(BitmapMatrix(mask), xp), complement=complement)
    if name == "plus_times":
        full = scipy_product(a, b)
        allowed = sp.csr_array((np.ones(mask.nnz), mask.indices, mask.indptr), shape=mask.shape)
        inside = full.multiply(allowed)
        want = full - inside if complement else inside
        want = sp.csr_array(want)
        want.eliminate_zeros()
        assert_same_csr(c.to_scipy(), want)
        return
    values, present = dense_reference(a, b, name)
    _, keep = masked(values, present, mask, complement)
    got, got_present = as_dense(c)
    np.testing.assert_array_equal(got_present, keep)
    if c.values is not None:
        np.testing.assert_array_equal(got[keep], values[keep])


def test_mask_never_generates_pairs_outside_it(xp):
    # one mask block: only the pairs of output block (0, 0) are built
    a, b = operands(64, 64, 64, 0.3, seed=1)
    A, B = to_device(BitmapMatrix(a), xp), to_device(BitmapMatrix(b), xp)
    mask = to_device(BitmapMatrix(sp.csr_array(([1.0], ([3], [5])), shape=(64, 64))), xp)
    t = tasks_mod.masked_tasks(A.keys, B.keys, mask.keys)
    assert t.ntasks == 8  # block row 0 of A meets block column 0 of B at every j
    assert int(t.c_ptr[-1]) == 8 and t.c_keys.shape[0] == 1
    unmasked = tasks_mod.tasks(A.keys, B.keys, 8, 8)
    assert unmasked.ntasks == 8 * 8 * 8


def test_masked_tasks_twins_agree_with_the_unmasked_list(xp):
    # the masked list is the unmasked one restricted to the mask's blocks, same order
    a, b = operands(90, 70, 80, 0.08, seed=4)
    mask = random_csr(90, 80, 0.05, seed=8)
    A, B, M = (to_device(BitmapMatrix(x), xp) for x in (a, b, mask))
    got = tasks_mod.masked_tasks(A.keys, B.keys, M.keys)
    full = tasks_mod.tasks(A.keys, B.keys, 12, 10)
    get = (lambda x: x) if xp is np else (lambda x: x.get())
    m_keys, c_keys, c_ptr = get(M.keys), get(full.c_keys), get(full.c_ptr)
    task_a, task_b = get(full.task_a), get(full.task_b)
    want_a, want_b, counts = [], [], []
    for key in m_keys:
        q = np.searchsorted(c_keys, key)
        run = slice(c_ptr[q], c_ptr[q + 1]) if q < c_keys.shape[0] and c_keys[q] == key \
            else slice(0, 0)
        want_a.append(task_a[run])
        want_b.append(task_b[run])
        counts.append(run.stop - run.start)
    np.testing.assert_array_equal(get(got.task_a), np.concatenate(want_a))
    np.testing.assert_array_equal(get(got.task_b), np.concatenate(want_b))
    np.testing.assert_array_equal(np.diff(get(got.c_ptr)), counts)
    np.testing.assert_array_equal(get(got.c_keys), m_keys)


def test_masked_product_is_sliced_bit_for_bit(xp):
    a, b = operands(120, 100, 110, 0.08, seed=12)
    mask = random_csr(120, 110, 0.2, seed=13)
    A, B, M = (to_device(BitmapMatrix(x), xp) for x in (a, b, mask))
    whole = spgemm(A, B, mask=M)
    timings = {}
    sliced = spgemm(A, B, mask=M, max_memory=400 * tasks_mod.BYTES_PER_TASK, timings=timings)
    assert timings["slices"] > 1
    sliced, whole = sliced.get(), whole.get()
    for name in ("keys", "bitmaps", "offsets", "values"):
        np.testing.assert_array_equal(getattr(sliced, name), getattr(whole, name))


def test_mask_shape_must_match_the_product():
    a = BitmapMatrix(np.eye(4))
    with pytest.raises(ValueError, match=r"mask shape \(4, 5\) does not match the "
                                         r"product's \(4, 4\)"):
        spgemm(a, a, mask=BitmapMatrix(np.ones((4, 5))))


@pytest.mark.parametrize("n,density", [(50, 0.3), (130, 0.05), (8, 1.0), (1, 0.0)])
def test_masked_pair_sum_counts_triangles(n, density, xp):
    upper = sp.random_array((n, n), density=density, rng=np.random.default_rng(n), format="csr")
    sym = ((upper + upper.T) != 0).astype(np.int64)
    sym.setdiag(0)
    sym.eliminate_zeros()
    lower = sp.csr_array(sp.tril(sym, -1))
    L = to_device(BitmapMatrix(lower.astype(bool)), xp)
    want = int(round((sym @ sym @ sym).diagonal().sum() / 6))
    assert masked_pair_sum(L, L, L) == want


def test_masked_pair_sum_is_the_masked_plus_pair_sum(xp):
    a, b = operands(61, 47, 53, 0.2, seed=31)
    mask = random_csr(61, 53, 0.3, seed=32)
    A, B, M = (to_device(BitmapMatrix(x), xp) for x in (a, b, mask))
    c = spgemm(A, B, semiring="plus_pair", mask=M)
    assert masked_pair_sum(A, B, M) == int(c.values.sum())


def test_mask_blocks_that_no_pair_reaches(xp):
    # A is one column: output blocks (0, 0) and (0, 2) get pairs, (0, 1) and
    # (0, 3) of the mask get none (empty runs, one of them last)
    a = sp.csr_array(np.ones((8, 1)))
    b = sp.csr_array(([2.0, 3.0], ([0, 0], [1, 17])), shape=(1, 32))
    mask = sp.csr_array(np.ones((8, 32)))
    c = spgemm(to_device(BitmapMatrix(a), xp), to_device(BitmapMatrix(b), xp),
               semiring="min_plus", mask=to_device(BitmapMatrix(mask), xp))
    want = np.zeros((8, 32))
    want[:, 1], want[:, 17] = 3.0, 4.0
    assert_same_csr(c.to_scipy(), sp.csr_array(want))


def test_fused_masked_pair_counts_equal_the_staged_ones(xp):
    # one fused kernel against the masked task list followed by the count stage
    from bmsparse.spgemm import count as count_mod

    a, b = operands(70, 90, 75, 0.1, seed=41)
    mask = random_csr(70, 75, 0.1, seed=42)
    A, B, M = (to_device(BitmapMatrix(x), xp) for x in (a, b, mask))
    t = tasks_mod.masked_tasks(A.keys, B.keys, M.keys)
    staged = count_mod.pair_counts(A.bitmaps, B.bitmaps, t.task_a, t.task_b, t.c_ptr,
                                   M.bitmaps)
    fused = tasks_mod.masked_pair_counts(M.keys, M.bitmaps, A.keys, A.bitmaps, B.keys,
                                         B.bitmaps)
    get = (lambda x: x) if xp is np else (lambda x: x.get())
    np.testing.assert_array_equal(get(fused), get(staged))
    assert get(fused).sum() > 0
