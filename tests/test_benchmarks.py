"""Smoke tests of benchmarks/webbase.py, suite.py, graph.py and timeline.py, and of their
shared code.

The scripts run as subprocesses, as a user runs them, on tiny inputs: the
"cpu" path (``--cpu``) everywhere and the "gpu" path where there is a device.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from bmsparse import STAGES
from bmsparse._sputils import cupy_available

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

sys.path.insert(0, str(BENCHMARKS))
import common  # noqa: E402


def run_script(script: str, *args: object, env: dict[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "BMSPARSE_SUITESPARSE_URL"}
    full_env.update(PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run([sys.executable, str(BENCHMARKS / script), *map(str, args)],
                          cwd=REPO, env=full_env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def path_args(request) -> list[str]:
    """Extra arguments choosing the CPU path (``--cpu``) or the GPU one."""
    return ["--cpu"] if request.param == "cpu" else []


def random_csr(m: int, n: int, nnz: int, seed: int) -> sp.csr_array:
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, m, nnz), rng.integers(0, n, nnz)
    a = sp.coo_array((rng.uniform(0.5, 1.5, nnz), (rows, cols)), shape=(m, n)).tocsr()
    a.sum_duplicates()
    return a


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- webbase.py -------------------------------------------------------------------


def test_webbase_surrogate_smoke(tmp_path, path_args):
    out = tmp_path / "webbase.json"
    proc = run_script("webbase.py", "--scale", "0.002", "--repeat", "1", "--json", out,
                      *path_args)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["label"] == "surrogate"
    assert data["matrix"]["surrogate"] is True
    assert data["matrix"]["stats"]["n_rows"] == 2000
    stages = data["table2"]["stages"]
    assert set(STAGES) | {"transfer", "conversion", "total"} <= set(stages)
    assert all(stages[s] is not None for s in (*STAGES, "conversion", "total"))
    assert stages["total"] == pytest.approx(sum(stages[s] for s in STAGES))
    assert [r["format"] for r in data["table1"]["rows"]] == [
        "COO", "CSR", "bitmap", "bitmap (paper)"]
    checks = data["correctness"]
    assert checks and all(c["match"] for c in checks)
    assert "scipy float64" in [c["against"] for c in checks]
    ours = [r for r in data["comparison"] if r["impl"] == "bmsparse"]
    assert {r["mode"].split(" (")[0] for r in ours} == {"kernels only", "end to end"}
    assert all(r["ms"] > 0 for r in ours)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines and all("surrogate" in line for line in lines)


@pytest.mark.gpu
def test_webbase_gpu_checks_cusparse(tmp_path):
    out = tmp_path / "webbase.json"
    proc = run_script("webbase.py", "--scale", "0.002", "--repeat", "1", "--no-scipy",
                      "--json", out)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["device"]["backend"] == "cuda"
    assert data["table2"]["stages"]["transfer"] is not None
    assert data["correctness"][0]["against"] == "cuSPARSE float64"
    assert all(c["match"] for c in data["correctness"])
    cusparse = [r for r in data["comparison"] if r["impl"] == "cuSPARSE"]
    assert sorted(r["dtype"] for r in cusparse) == ["float32", "float64"]
    assert all(r["ms"] is not None and r["peak_bytes"] > 0 for r in cusparse)


def test_webbase_reads_suitesparse_archive(tmp_path):
    a = random_csr(40, 40, 150, seed=1)
    folder = tmp_path / "tiny-web"
    folder.mkdir()
    scipy.io.mmwrite(folder / "tiny-web.mtx", a)
    archive = tmp_path / "tiny-web.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="tiny-web")
    out = tmp_path / "out.json"
    proc = run_script("webbase.py", "--matrix", archive, "--repeat", "1", "--warmup", "0",
                      "--cpu", "--json", out)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["label"] == "tiny-web"
    assert data["matrix"]["surrogate"] is False
    assert data["matrix"]["stats"]["nnz"] == a.nnz
    assert data["matrix"]["nnz_product"] == (a @ a).nnz
    assert data["correctness"] and all(c["match"] for c in data["correctness"])
    assert "surrogate" not in proc.stdout


@pytest.mark.parametrize("how", ["option", "env"])
def test_webbase_download_offline_fails_in_one_line(tmp_path, how):
    url = f"http://127.0.0.1:{unused_port()}/MM"
    args = ["--download", "--cache-dir", tmp_path / "cache", "--cpu"]
    env = {}
    if how == "option":
        args += ["--download-url", url]
    else:
        env["BMSPARSE_SUITESPARSE_URL"] = url
    proc = run_script("webbase.py", *args, env=env, timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    message = proc.stderr.strip()
    assert "\n" not in message
    assert message.startswith("webbase.py: error: download of ")
    assert "127.0.0.1" in message and "--matrix" in message


def test_webbase_missing_matrix_file(tmp_path):
    proc = run_script("webbase.py", "--matrix", tmp_path / "nope.mtx", "--cpu")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"webbase.py: error: --matrix {tmp_path / 'nope.mtx'}: " \
                                  "no such file"


@pytest.mark.parametrize(("script", "args", "message"), [
    ("webbase.py", ("--seed", "-1"), "--seed must be non-negative, got -1"),
    ("webbase.py", ("--json", "."), "--json must name a file, got the folder ."),
    ("suite.py", ("--json", "."), "--json must name a file, got the folder ."),
    # it skipped every product
    ("suite.py", ("--max-multiplies", "-1"), "--max-multiplies must be non-negative, got -1"),
])
def test_bad_seed_and_json_folder_are_argparse_errors(script, args, message):
    # a NumPy traceback for the seed; a folder for --json failed only after
    # the whole run, its results lost
    proc = run_script(script, *args, "--cpu")
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_webbase_corrupt_matrix_file_fails_in_one_line(tmp_path):
    # read_matrix raised EOFError for a truncated .gz, which webbase.py did
    # not catch
    path = tmp_path / "trunc.mtx.gz"
    path.write_bytes(gzip.compress(b"%%MatrixMarket matrix coordinate real general\n" * 99)[:30])
    proc = run_script("webbase.py", "--matrix", path, "--cpu")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "could not be read whole" in proc.stderr


@pytest.mark.skipif(HAVE_MATPLOTLIB, reason="matplotlib is installed")
def test_webbase_plot_without_matplotlib(tmp_path):
    proc = run_script("webbase.py", "--scale", "0.002", "--cpu", "--plot", tmp_path / "p.png")
    assert proc.returncode == 2
    assert "--plot needs matplotlib" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="matplotlib is not installed")
def test_webbase_plot_writes_png(tmp_path):
    png = tmp_path / "p.png"
    proc = run_script("webbase.py", "--scale", "0.002", "--repeat", "1", "--warmup", "0",
                      "--cpu", "--plot", png)
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- suite.py ------------------------------------------------------------------------


def test_suite_smoke(tmp_path, path_args):
    folder = tmp_path / "matrices"
    folder.mkdir()
    square = random_csr(30, 30, 120, seed=2)
    rect = random_csr(12, 7, 30, seed=3)
    scipy.io.mmwrite(folder / "square.mtx", square)
    scipy.io.mmwrite(folder / "rect.mtx", rect)
    out = tmp_path / "suite.json"
    proc = run_script("suite.py", folder, "--no-structured", "--repeat", "1", "--json", out,
                      *path_args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    rows = {r["name"]: r for r in data["rows"]}
    assert sorted(rows) == ["rect", "square"]
    assert rows["square"]["op"] == "A @ A"
    assert rows["square"]["nnz_c"] == (square @ square).nnz
    assert rows["rect"]["op"].startswith("A @ A.T")
    assert rows["rect"]["nnz_c"] == (rect @ rect.T).nnz
    assert all(r["match"] is True for r in rows.values())
    assert all(r["ours_ms"] > 0 and r["peer_ms"] > 0 for r in rows.values())
    assert data["geomean_speedup"] > 0
    assert "geometric-mean speedup over 2 matrices" in proc.stdout
    assert "A @ A.T (rectangular)" in proc.stdout


def test_suite_only_filters(tmp_path):
    folder = tmp_path / "matrices"
    folder.mkdir()
    for name, seed in (("one", 4), ("two", 5)):
        scipy.io.mmwrite(folder / f"{name}.mtx", random_csr(10, 10, 20, seed))
    out = tmp_path / "suite.json"
    proc = run_script("suite.py", folder, "--no-structured", "--only", "two,three",
                      "--repeat", "1", "--warmup", "0", "--cpu", "--json", out)
    assert proc.returncode == 0, proc.stderr
    assert [r["name"] for r in json.loads(out.read_text())["rows"]] == ["two"]
    assert "no matrix named three" in proc.stdout


def test_suite_strategy_is_recorded(tmp_path):
    folder = tmp_path / "matrices"
    folder.mkdir()
    scipy.io.mmwrite(folder / "one.mtx", random_csr(10, 10, 20, 4))
    out = tmp_path / "suite.json"
    proc = run_script("suite.py", folder, "--no-structured", "--strategy", "tasks",
                      "--repeat", "1", "--warmup", "0", "--cpu", "--json", out)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["settings"]["strategy"] == "tasks"
    assert [r["path"] for r in data["rows"]] == ["tasks"]
    assert "strategy forced to tasks (no effect on the CPU path" in proc.stdout


def test_suite_missing_folder(tmp_path):
    proc = run_script("suite.py", tmp_path / "nope", "--cpu")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"suite.py: error: {tmp_path / 'nope'}: no such folder"


# --- graph.py --------------------------------------------------------------------------


def test_graph_smoke(tmp_path, path_args):
    folder = tmp_path / "graphs"
    folder.mkdir()
    square = random_csr(50, 50, 300, seed=11)
    scipy.io.mmwrite(folder / "square.mtx", square)
    scipy.io.mmwrite(folder / "rect.mtx", random_csr(12, 7, 30, seed=12))
    out = tmp_path / "graph.json"
    proc = run_script("graph.py", folder, "--scale", "0.002", "--repeat", "1", "--json", out,
                      *path_args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    rows = {r["name"]: r for r in data["rows"]}
    assert sorted(rows) == ["rect", "square", "surrogate"]
    assert rows["rect"]["note"] == "skipped: not square (12x7)"
    pattern = (square != 0).astype(np.int64)
    assert rows["square"]["nnz_c"] == (pattern @ pattern).nnz
    sym = sp.csr_array(((pattern + pattern.T) != 0).astype(np.int64))
    sym.setdiag(0)
    sym.eliminate_zeros()
    assert rows["square"]["triangles"] == int((sym @ sym).multiply(sym).sum()) // 6
    for r in (rows["square"], rows["surrogate"]):
        assert r["structure_match"] is True
        assert r["triangles_check"] is r["bfs_check"] is r["bfs_hub_check"] is True
        assert all(r[k] > 0 for k in ("bool_ms", "f64_ms", "peer_ms", "triangles_ms",
                                      "bfs_ms", "bfs_hub_ms"))
        # the Boolean output is the float64 one without its values
        assert r["f64_bytes"] - r["bool_bytes"] == 8 * r["nnz_c"]
    assert data["targets"]["speedup_target"] == 2.0
    assert "surrogate (scale 0.002): Boolean product" in proc.stdout


def test_graph_missing_folder(tmp_path):
    proc = run_script("graph.py", tmp_path / "nope", "--cpu")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"graph.py: error: {tmp_path / 'nope'}: no such folder"


# --- timeline.py -----------------------------------------------------------------------


@pytest.mark.skipif(cupy_available(), reason="a GPU is present")
def test_timeline_without_a_gpu_fails_in_one_line():
    proc = run_script("timeline.py")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "timeline.py: needs a CUDA GPU"


@pytest.mark.gpu
def test_timeline_stamps_launches_and_syncs(tmp_path):
    path = tmp_path / "a.mtx"
    scipy.io.mmwrite(path, random_csr(600, 600, 6000, seed=3))
    ops = ("spgemm", "from_cupyx", "tocsr", "spgemm_csr", "transpose", "spmv", "spmv_t", "add")
    proc = run_script("timeline.py", "--matrix", path, *(f"--op={op}" for op in ops),
                      "--repeat", "2", "--warmup", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\nwall ") == len(ops)
    assert "sync (" in proc.stdout and "bmsparse_" in proc.stdout
    for kernel in ("bmsparse_spmv_rows", "bmsparse_spmv_cols", "bmsparse_elementwise_merge"):
        assert kernel in proc.stdout
    # the one-launch transpose: by tiles for this matrix, or by buckets
    assert "bmsparse_transpose_tiles" in proc.stdout or "bmsparse_transpose_columns" in proc.stdout


@pytest.mark.gpu
def test_timeline_of_a_structured_matrix():
    proc = run_script("timeline.py", "--matrix", "2d-5pt", "--repeat", "1", "--warmup", "0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("\n2d-5pt: spgemm (")


@pytest.mark.gpu
def test_timeline_missing_matrix_file(tmp_path):
    proc = run_script("timeline.py", "--matrix", tmp_path / "nope.mtx")
    assert proc.returncode == 1
    assert proc.stderr.strip() == \
        f"timeline.py: error: --matrix {tmp_path / 'nope.mtx'}: no such file"


# --- common.py ------------------------------------------------------------------------


def test_count_multiplies_matches_product_stats():
    from bmsparse.generators import product_stats

    a = random_csr(50, 50, 300, seed=6)
    assert common.count_multiplies(a, a) == product_stats(a)["multiplies"]


def test_count_multiplies_rectangular():
    a = random_csr(9, 5, 20, seed=7)
    pattern = (a != 0).astype(np.int64)
    # A @ A.T multiplies: every column k pairs its entries with themselves
    want = int((np.asarray(pattern.sum(axis=0)) ** 2).sum())
    assert common.count_multiplies(a, sp.csr_array(a.T)) == want


def test_check_product_drops_peer_zeros():
    c = sp.csr_array(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]))
    # the peer kept an entry that cancelled to zero, as cuSPARSE does
    peer = sp.csr_array((np.array([1.0, 0.0, 2.0, 3.0]), np.array([0, 1, 2, 1]),
                         np.array([0, 3, 4])), shape=(2, 3))
    check = common.check_product(c, peer, np.float64)
    assert check["match"] is True
    assert check["structure"] == "identical"
    assert (check["nnz"], check["peer_nnz"]) == (3, 3)


def test_check_product_reports_mismatch():
    c = random_csr(20, 20, 60, seed=9)
    wrong = c.copy()
    wrong.data[5] *= 1.001
    check = common.check_product(c, wrong, np.float64)
    assert check["match"] is False
    assert check["max_rel_err"] == pytest.approx(1e-3 / 1.001, rel=1e-6)
    assert common.describe_check(check).startswith("MISMATCH")


def test_check_product_structure_difference():
    c = random_csr(20, 20, 60, seed=10)
    missing = c.copy()
    missing.data[3] = 0.0
    check = common.check_product(c, missing, np.float64)
    assert check["match"] is False
    assert check["structure_differences"] == 1
    assert check["structure"] == "1 differing positions"


def test_peak_memory_host_sees_numpy_buffers():
    with common.PeakMemory("host") as peak:
        buf = np.ones(1 << 20)
        del buf
    assert peak.extra >= 8 << 20


def test_format_table_aligns():
    lines = common.format_table(["name", "ms"], [["a", "1.5"], ["long name", "10.25"]])
    assert lines == ["name          ms",
                     "---------  -----",
                     "a            1.5",
                     "long name  10.25"]


def test_sliced_smoke_cpu():
    # a cap far below the task list of the whole product: several slices (on
    # a GPU machine too: 1% of a tiny GPU product's peak is less than one
    # block row needs, which spgemm rightly refuses with a MemoryError)
    proc = run_script("sliced.py", "--scale", "0.002", "--fraction", "0.01", "--repeat", "1",
                      "--cpu")
    assert proc.returncode == 0, proc.stderr
    assert "bit for bit equal to the unsliced one: True" in proc.stdout
    slices = int(proc.stdout.split(" slices")[0].rsplit(" ", 1)[-1])
    assert slices > 1


@pytest.mark.parametrize(("args", "message"), [
    (("--matrix", "nope.mtx"), "sliced.py: error: [Errno 2] No such file"),
    (("--fraction", "0"), "--fraction must be positive, got 0.0"),
    (("--scale", "-1"), "--scale must be positive, got -1.0"),
    (("--repeat", "0"), "--repeat must be at least 1, got 0"),
    (("--scale", "0.002", "--fraction", "1e-9"), "sliced.py: error: "),
])
def test_sliced_refuses_in_one_line(args, message):
    # tracebacks before: a missing file, max_memory 0, webbase_surrogate's
    # ValueError, a MemoryError for a budget below one block row
    proc = run_script("sliced.py", *args, "--cpu")
    assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr, proc.stderr
    assert message in proc.stderr


def test_sliced_takes_a_rectangular_matrix(tmp_path):
    path = tmp_path / "rect.mtx"
    scipy.io.mmwrite(path, random_csr(40, 17, 120, seed=3))
    proc = run_script("sliced.py", "--matrix", path, "--fraction", "0.5", "--repeat", "1",
                      "--cpu")
    assert proc.returncode == 0, proc.stderr
    assert "A @ A.T on the CPU" in proc.stdout
    assert "bit for bit equal to the unsliced one: True" in proc.stdout


# --- ops.py ---------------------------------------------------------------------------


def test_ops_smoke(tmp_path, path_args):
    folder = tmp_path / "matrices"
    folder.mkdir()
    scipy.io.mmwrite(folder / "square.mtx", random_csr(30, 30, 120, seed=11))
    scipy.io.mmwrite(folder / "rect.mtx", random_csr(12, 7, 30, seed=12))
    out = tmp_path / "ops.json"
    proc = run_script("ops.py", folder, "--scale", "0.001", "--repeat", "1", "--warmup", "0",
                      "--json", out, *path_args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())["rows"]
    timed = [r for r in rows if r["ours_ms"] is not None]
    assert {(r["matrix"], r["op"]) for r in timed} == {
        (m, op) for m in ("surrogate", "square", "rect")
        for op in ("A @ x", "A.T @ x", "A.T", "A + B", "vstack", "hstack")}
    assert all(r["match"] is True and r["peer_ms"] > 0 and r["ratio"] > 0 for r in timed)
    assert "geometric-mean ratio of A.T @ x" in proc.stdout


def test_ops_runs_the_operations_named(tmp_path, path_args):
    folder = tmp_path / "matrices"
    folder.mkdir()
    scipy.io.mmwrite(folder / "rect.mtx", random_csr(13, 9, 40, seed=5))
    out = tmp_path / "ops.json"
    proc = run_script("ops.py", folder, "--no-corpus", "--scale", "0.001", "--repeat", "1",
                      "--warmup", "0", "--ops", "vstack, A.T", "--json", out, *path_args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["op"] for r in rows if r["ours_ms"] is not None] == ["vstack", "A.T"]
    assert all(r["match"] is True for r in rows if r["ours_ms"] is not None)
    assert "geometric-mean ratio of vstack" in proc.stdout
    assert "geometric-mean ratio of A + B" not in proc.stdout
    proc = run_script("ops.py", folder, "--ops", "vstack,A*B", "--cpu")
    assert proc.returncode == 2
    assert "unknown operation 'A*B'; choose from: A @ x, A.T @ x, A.T, A + B, vstack, " \
           "hstack" in proc.stderr


def test_ops_missing_folder(tmp_path):
    proc = run_script("ops.py", tmp_path / "nope", "--cpu")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"ops.py: error: {tmp_path / 'nope'}: no such folder"


def test_ops_says_what_it_left_out(tmp_path):
    # its notes were made and dropped: an unknown --only ran nothing, exit 0,
    # and a file that failed to read left the status 0 too
    folder = tmp_path / "matrices"
    folder.mkdir()
    scipy.io.mmwrite(folder / "one.mtx", random_csr(10, 10, 20, 4))
    proc = run_script("ops.py", folder, "--only", "three", "--repeat", "1", "--warmup", "0",
                      "--cpu")
    assert proc.returncode == 1
    assert "note: --only: no matrix named three" in proc.stdout
    assert "ops.py: error: no matrix to run" in proc.stderr
    (folder / "broken.mtx").write_text("%%MatrixMarket matrix coordinate real general\n2 2\n")
    proc = run_script("ops.py", folder, "--only", "one,broken", "--repeat", "1",
                      "--warmup", "0", "--cpu")
    assert proc.returncode == 1, proc.stdout
    assert "note: broken: " in proc.stdout


def test_time_calls_take_turns_and_a_failure_spares_the_others():
    calls = []
    clock = common.Clock("host")
    timings = common.time_calls([lambda: calls.append("a"), lambda: calls.append("b")], clock,
                                repeat=3, warmup=2)
    assert calls == ["a", "b"] * 5  # two warm-up rounds, then three timed ones
    assert [len(t.samples) for t in timings] == [3, 3]

    def broken():
        raise RuntimeError("no")

    out = common.measure_side_by_side({"ours": lambda: 7, "peer": broken}, clock, "host",
                                      repeat=2, warmup=1, keep=True)
    assert list(out) == ["ours", "peer"]
    ours, error = out["ours"]
    assert error is None and ours.result == 7 and len(ours.timing.samples) == 2
    assert out["peer"] == (None, "RuntimeError: no")


def test_the_package_on_pythonpath_is_the_one_measured(tmp_path):
    # an old tree named by PYTHONPATH comes before the checkout (common.py
    # appends the repository root): comparisons of two trees measure both
    fake = tmp_path / "bmsparse"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('the tree on PYTHONPATH')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "suite.py"), "--help"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "the tree on PYTHONPATH" in done.stderr


def test_pin_host_does_nothing_unless_wanted():
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    assert common.pin_host(False) is None
    if before is not None:
        assert os.sched_getaffinity(0) == before


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_pin_host_takes_the_fastest_allowed_core(monkeypatch):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one core: nothing to choose")
    # the second core the fastest, the others tied behind it
    speeds = {core: 50.0 for core in allowed}
    speeds[allowed[1]] = 30.0
    monkeypatch.setattr(common, "_core_speeds", lambda cores: speeds)
    try:
        note = common.pin_host(True)
        assert os.sched_getaffinity(0) == {allowed[1]}
        assert note.startswith(f"host: pinned to core {allowed[1]} of {len(allowed)}")
        assert "the slowest core 50 us" in note
        # a tie goes to the lowest core
        speeds[allowed[1]] = 50.0
        os.sched_setaffinity(0, allowed)
        common.pin_host(True)
        assert os.sched_getaffinity(0) == {allowed[0]}
    finally:
        os.sched_setaffinity(0, allowed)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_core_speeds_time_every_core_and_leave_the_process_on_one():
    allowed = sorted(os.sched_getaffinity(0))
    try:
        speeds = common._core_speeds(allowed)
        assert sorted(speeds) == allowed
        assert all(0 < t < 1e6 for t in speeds.values())
        assert len(os.sched_getaffinity(0)) == 1
    finally:
        os.sched_setaffinity(0, allowed)
