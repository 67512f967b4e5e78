"""The pool runner on a real Dask cluster without a GPU (kernellsp.run.pool, kernellsp.optimize.fanout).

A real scheduler and three worker processes (nanny-managed, as dask-cuda-worker runs them): ``a0`` and ``a1``
report a "Test GPU A" (sm_90), ``b0`` a "Test GPU B" (sm_80), through tests/helpers/pool_support.py's stand-in for
nvidia-smi. On the workers runs everything that needs no GPU (the scope gate, harness planning, both
harnesses built with the real nvcc on the worker's pinned runner); the GPU steps are the stand-in of
tests/helpers/pool_support.py. Checked: grouping by model, the verdict and its evidence coming back, the arch of
the worker's GPU, progress, cancellation reaching the running task, a worker killed mid-verification (the
candidate re-runs elsewhere; killed every time: an error, never a verdict), ``optimize --all`` across the
pool, and the messages without Dask or without a scheduler. The GPU half: tests/run/test_pool_gpu.py.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from helpers import pool_support  # noqa: E402  (tests/helpers/pool_support.py: runs in the worker processes too)
from helpers.common import SAMPLES_DIR, requires_nvcc  # noqa: E402

from kernellsp.build.nvcc import Cancelled  # noqa: E402
from kernellsp.optimize import fanout  # noqa: E402
from kernellsp.optimize.evidence import Memory, state_dir  # noqa: E402
from kernellsp.optimize.propose.tuner import Tuner  # noqa: E402
from kernellsp.optimize.result import OptimizeOptions  # noqa: E402
from kernellsp.optimize.verify import gate  # noqa: E402
from kernellsp.run.pool import Pool, describe_workers  # noqa: E402
from kernellsp.run.pool_worker import PoolError  # noqa: E402
from kernellsp.run.runner import RunnerError, make_runner  # noqa: E402
from kernellsp.settings import load_settings  # noqa: E402

pytestmark = pytest.mark.timeout(120)

VECTOR_ADD = (SAMPLES_DIR / "vector_add.cu").read_text()
#: A correct edit of the entry's kernel (the scope gate lets it through; it builds).
CONST_EDIT = VECTOR_ADD.replace(
    "int i = blockIdx.x * blockDim.x + threadIdx.x;", "const int i = blockIdx.x * blockDim.x + threadIdx.x;"
)


@pytest.fixture(scope="module")
def cluster(session_cache_dir: Path) -> Iterator[distributed.SpecCluster]:
    import dask

    # One death per task is forgiven, the second is final (the default 3 would make the test slow).
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        env = {"KERNELLSP_CACHE_DIR": str(session_cache_dir)}
        workers = {
            name: {"cls": distributed.Nanny, "options": {"nthreads": 1, "env": env}}
            for name in ("a0", "a1", "b0")
        }
        c = distributed.SpecCluster(
            workers=workers,
            silence_logs=logging.ERROR,
            scheduler={
                "cls": distributed.Scheduler,
                "options": {"dashboard": False, "dashboard_address": ":0"},
            },
        )
    try:
        yield c
    finally:
        c.close()


def _pool(cluster: distributed.SpecCluster, **verify_kw: object) -> Pool:
    fn = functools.partial(pool_support.verify_until_gpu, **verify_kw)
    return Pool(cluster.scheduler_address, probe=pool_support.fake_probe, verify_fn=fn, connect_timeout_s=30)


@pytest.fixture
def vector_add(tmp_path: Path) -> Path:
    p = tmp_path / "vector_add.cu"
    p.write_text(VECTOR_ADD)
    return p


def test_workers_are_grouped_by_gpu_model(cluster: distributed.SpecCluster) -> None:
    pool = _pool(cluster)
    try:
        workers = pool.workers()
        assert sorted(w.name for w in workers) == ["a0", "a1", "b0"]
        groups = pool.groups()
        assert {m: sorted(w.name for w in ws) for m, ws in groups.items()} == {
            "Test GPU A": ["a0", "a1"],
            "Test GPU B": ["b0"],
        }
        # The runner of the pool binds to the largest group; each group's environment is a worker's own.
        runner = pool.runner()
        assert runner.model == "Test GPU A"
        env = runner.environment()
        assert env["gpu"] == "Test GPU A" and env["arch"] == "sm_90" and env["pool"]["gpus"] == 2
        assert env["nvcc_version"], "the worker's nvcc version is recorded"
        assert runner.for_model("Test GPU B").environment()["arch"] == "sm_80"
        lines = describe_workers(workers)
        assert any("Test GPU B (sm_80, GPU-test-b0)" in ln for ln in lines)
        assert not any(ln.startswith("warning") for ln in lines)
        pool.gpu_model = "GPU B"  # pool.gpu_model keeps only the matching workers
        assert list(pool.groups()) == ["Test GPU B"]
    finally:
        pool.close()


@requires_nvcc
def test_a_verification_runs_on_a_worker_of_its_model_and_its_verdict_comes_back(
    cluster: distributed.SpecCluster, vector_add: Path
) -> None:
    pool = _pool(cluster)
    try:
        runner = pool.runner("Test GPU B")
        said: list[str] = []
        v = gate.verify(
            vector_add,
            VECTOR_ADD,
            CONST_EDIT,
            "vector_add",
            runner,
            gate.VerifyOptions(arch="sm_90"),
            progress=lambda m, _p: said.append(m),
        )
        assert v.kind == "accepted" and v.speedup == pool_support.simulated_speedup(VECTOR_ADD, CONST_EDIT)
        # Built with the real nvcc, for the worker's GPU (sm_80), whatever the caller's options said.
        assert v.details["arch"] == "sm_80"
        assert v.details["built"]["base"] > 100_000 and v.details["built"]["cand"] > 100_000
        assert v.environment["gpu"] == "Test GPU B" and v.environment["gpu_uuid"] == "GPU-test-b0"
        assert v.environment["pool"]["worker"] in {w.address for w in pool.groups()["Test GPU B"]}
        assert v.timings["rounds"]["cand"], "the raw samples come back with the verdict"
        assert "building baseline and candidate" in said and "GPU steps (stand-in)" in said
        # A candidate that does not compile: the real nvcc on the worker says so.
        broken = CONST_EDIT.replace("c[i] = a[i] + b[i];", "c[i] = a[i] + b[i] + not_declared_anywhere;")
        assert broken != CONST_EDIT
        v = gate.verify(vector_add, VECTOR_ADD, broken, "vector_add", runner)
        assert v.kind == "compile_error" and "error" in v.message
        # A scope violation is decided on the client: no task, no worker.
        outside = VECTOR_ADD + "\nint added_host_function() { return 1; }\n"
        v = gate.verify(vector_add, VECTOR_ADD, outside, "vector_add", runner)
        assert v.kind == "scope_violation" and "pool" not in v.environment
    finally:
        pool.close()


def test_cancel_reaches_the_running_task_and_frees_the_gpu(
    cluster: distributed.SpecCluster, vector_add: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "cancel-seen"
    pool = _pool(cluster, build=False, gpu_seconds=60, cancel_marker=str(marker))
    try:
        runner = pool.runner("Test GPU B")  # one worker: the next verification needs it free
        cancel = threading.Event()
        started = threading.Event()
        outcome: list[object] = []

        def run() -> None:
            try:
                outcome.append(
                    gate.verify(
                        vector_add,
                        VECTOR_ADD,
                        CONST_EDIT,
                        "vector_add",
                        runner,
                        cancel=cancel,
                        progress=lambda m, _p: started.set() if "GPU" in m else None,
                    )
                )
            except Cancelled as exc:
                outcome.append(exc)

        t = threading.Thread(target=run)
        t.start()
        assert started.wait(30), "the task reached its GPU step"
        t0 = time.monotonic()
        cancel.set()
        t.join(10)
        assert isinstance(outcome[0], Cancelled) and time.monotonic() - t0 < 3
        for _ in range(100):  # the worker kills its step within about a second
            if marker.exists():
                break
            time.sleep(0.05)
        assert marker.exists(), "the cancel flag reached the task on the worker"
        pool.verify_fn = functools.partial(pool_support.verify_until_gpu, build=False, gpu_seconds=0.05)
        t0 = time.monotonic()
        v = gate.verify(vector_add, VECTOR_ADD, CONST_EDIT, "vector_add", runner)
        assert v.kind == "accepted" and time.monotonic() - t0 < 20  # not after the cancelled task's 60 s
    finally:
        pool.close()


def test_a_worker_dying_mid_verification_reruns_the_candidate_elsewhere(
    cluster: distributed.SpecCluster, vector_add: Path, tmp_path: Path
) -> None:
    died = tmp_path / "died"
    pool = _pool(cluster, build=False, die_once=str(died))
    try:
        v = gate.verify(vector_add, VECTOR_ADD, CONST_EDIT, "vector_add", pool.runner("Test GPU A"))
        assert died.exists(), "the first attempt killed its worker"
        assert v.kind == "accepted" and v.environment["pool"]["worker"] != died.read_text()
        assert v.environment["gpu"] == "Test GPU A"  # re-run on the same model only
    finally:
        pool.close()


def test_a_candidate_that_kills_every_worker_gets_an_error_not_a_verdict(
    cluster: distributed.SpecCluster, vector_add: Path
) -> None:
    pool = _pool(cluster, build=False, die_always=True)
    try:
        with pytest.raises(gate.VerifyError, match="killed the worker running it"):
            gate.verify(vector_add, VECTOR_ADD, CONST_EDIT, "vector_add", pool.runner("Test GPU B"))
        for _ in range(300):  # the nanny restarts it (the next test needs it back)
            if "Test GPU B" in pool.groups():
                break
            time.sleep(0.1)
        assert "Test GPU B" in pool.groups()
    finally:
        pool.close()


def test_optimize_all_fans_entries_out_across_the_pool(
    cluster: distributed.SpecCluster, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kernellsp.toml").write_text("")
    for name in ("vector_add.cu", "saxpy_strided.cu"):
        (ws / name).write_text((SAMPLES_DIR / name).read_text())
    (ws / "sub").mkdir()
    (ws / "sub" / "saxpy_strided.cu").write_text((SAMPLES_DIR / "saxpy_strided.cu").read_text())
    from kernellsp.source.files import collect_files

    jobs, notes = fanout.find_entries(collect_files([ws]))
    assert notes == []
    assert sorted(j.label.replace(str(ws) + "/", "") for j in jobs) == [
        "saxpy_strided.cu:saxpy_strided",
        "sub/saxpy_strided.cu:saxpy_strided",
        "vector_add.cu:vector_add",
    ]
    pool = _pool(cluster, build=False, gpu_seconds=0.05)
    runner = pool.runner()
    done: list[str] = []
    try:
        outcomes = fanout.optimize_all(
            jobs,
            runner,
            lambda _j: [Tuner()],
            lambda _j: OptimizeOptions(rounds=1, candidates=2, parallel=2),
            on_done=lambda o: done.append(o.entry),
        )
    finally:
        pool.close()
    assert len(done) == 3 and [o.entry for o in outcomes] == [j.entry for j in jobs]
    # Three entries over a pool of 2 "A" GPUs and 1 "B" GPU: the third goes to B.
    assert sorted(o.gpu or "" for o in outcomes) == ["Test GPU A", "Test GPU A", "Test GPU B"]
    for o in outcomes:
        assert o.verdict == "accepted" and o.accepted and o.speedup and o.speedup >= 1.05, o
        assert o.baseline_ms == 1.0 and o.best_ms is not None and o.best_ms < 1.0
        bundle = Path(o.bundle or "")
        verdicts = [json.loads(p.read_text()) for p in bundle.glob("candidates/*/verdict.json")]
        assert len(verdicts) == 2 and all(v["environment"]["gpu"] == o.gpu for v in verdicts), [
            (o.gpu, v["environment"]) for v in verdicts
        ]
        final = json.loads((bundle / "final-verdict.json").read_text())
        assert final["environment"]["pool"]["worker"].startswith("tcp://")
    # Runs of one workspace saved side by side: every candidate's record is in memory.
    records = Memory(state_dir(ws / "vector_add.cu") / "memory.json").records
    assert len(records) == 6 and {r["file"] for r in records} == {
        "vector_add.cu",
        "saxpy_strided.cu",
        "sub/saxpy_strided.cu",
    }
    text = fanout.summary_text(outcomes, 12.0)
    assert text.splitlines()[0].split()[:3] == ["entry", "GPU", "baseline"]
    assert "3 of 3 entries faster (verified); 12.0 s in all" in text
    doc = json.loads(fanout.summary_json(outcomes, 12.0))
    assert doc["totals"]["accepted"] == 3 and doc["entries"][0]["speedup"] == outcomes[0].speedup
    page = fanout.summary_html(outcomes, "t", 12.0)
    assert page.count("<tr class='ok'>") == 3


def test_assign_groups_balances_jobs_per_gpu() -> None:
    jobs = [fanout.EntryJob(Path(f"{i}.cu"), "k", "") for i in range(5)]
    assert fanout._assign_groups(jobs, {"A": 2, "B": 1}) == ["A", "A", "B", "A", "A"]


def test_pool_settings_and_runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "kernellsp.toml").write_text(
        '[settings]\nrunner = "pool"\n[settings.pool]\ngpus = ["0", "2"]\n'
    )
    monkeypatch.setenv("KERNELLSP_POOL_SCHEDULER", "tcp://10.0.0.5:8786")
    s = load_settings(tmp_path)
    assert s.runner == "pool" and s.pool.gpus == ["0", "2"] and s.pool.scheduler == "tcp://10.0.0.5:8786"
    runner = make_runner(s.runner, settings=s)  # connects on first use only
    assert runner.name.startswith("pool tcp://10.0.0.5:8786")
    with pytest.raises(RunnerError, match="runs no single commands: profiling"):
        runner.new_workdir()
    # Without Dask: what to install.
    monkeypatch.setitem(sys.modules, "distributed", None)
    monkeypatch.delitem(sys.modules, "kernellsp.run.pool")
    with pytest.raises(RunnerError, match=r"pip install 'kernellsp\[cluster\]'"):
        make_runner("pool", settings=s)


def test_an_unreachable_scheduler_is_named(tmp_path: Path) -> None:
    pool = Pool("tcp://127.0.0.1:9", connect_timeout_s=1)
    with pytest.raises(PoolError, match=re.escape("cannot reach the Dask scheduler at tcp://127.0.0.1:9")):
        pool.workers()


def test_cli_optimize_all_and_doctor_with_an_unreachable_pool(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / "kernellsp.toml").write_text(
        '[settings]\nrunner = "pool"\n[settings.pool]\n'
        'scheduler = "tcp://127.0.0.1:9"\nconnect_timeout_s = 1\n'
    )
    (tmp_path / "a.cu").write_text(VECTOR_ADD)
    (tmp_path / "b.cu").write_text(VECTOR_ADD)
    exe = [sys.executable, "-m", "kernellsp"]
    res = subprocess.run([*exe, "optimize", "a.cu", "b.cu"], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 2 and "add --all" in res.stderr
    res = subprocess.run([*exe, "optimize", ".", "--all"], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 2 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in res.stderr
    res = subprocess.run([*exe, "doctor"], cwd=tmp_path, capture_output=True, text=True)
    assert "[MISS] pool" in res.stdout and "cannot reach the Dask scheduler" in res.stdout


@requires_nvcc
def test_a_local_pool_without_dask_cuda_runs_the_real_gate_on_its_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vector_add: Path
) -> None:
    """``pool.scheduler = "local"``: the production path up to the GPU. One worker pinned to GPU 0 (distributed's
    own cluster when dask-cuda is not installed), found by nvidia-smi (a stand-in script here, the only
    stand-in), running the gate itself: the real build, then the first GPU step fails as on any host without a
    GPU, and that error comes back as the gate's own VerifyError."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(
        "#!/bin/sh\necho '0, GPU-0000-test, NVIDIA H100 80GB HBM3, 9.0, 580.00, 81559, 1980, 1980, "
        "2619, 2619'\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")  # the worker starts with this PATH
    pool = Pool("local", connect_timeout_s=60)
    try:
        pool.client()
        try:
            import dask_cuda  # noqa: F401
        except ImportError:
            assert pool.cluster_kind.startswith("distributed SpecCluster, one pinned worker per GPU")
        (w,) = pool.workers()
        assert w.gpu is not None and w.gpu.uuid == "GPU-0000-test" and w.gpu.arch == "sm_90"
        runner = pool.runner()
        assert runner.environment()["gpu"] == "NVIDIA H100 80GB HBM3"
        with pytest.raises(gate.VerifyError, match="baseline"):
            gate.verify(
                vector_add,
                VECTOR_ADD,
                CONST_EDIT,
                "vector_add",
                runner,
                gate.VerifyOptions(seeds=1, sanitize=False),
            )
    finally:
        pool.close()


def test_cli_optimize_all_prints_the_table_and_writes_the_page(
    cluster: distributed.SpecCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's --all over the pool (its runner is the test's: the workers' GPU steps are the stand-in)."""
    from typer.testing import CliRunner

    from kernellsp import cli, cli_support

    (tmp_path / "kernellsp.toml").write_text('[settings]\nrunner = "pool"\n')
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "vector_add.cu").write_text(VECTOR_ADD)
    (tmp_path / "k" / "notes.txt").write_text("not CUDA")
    pool = _pool(cluster, build=False, gpu_seconds=0.05)
    # The runner is made in cli_support (_require_runner): the pool stands in for the one the settings name.
    monkeypatch.setattr(cli_support, "_make_runner", lambda _s, _job="": (pool.runner(), None))
    monkeypatch.chdir(tmp_path)
    try:
        res = CliRunner().invoke(
            cli.app,
            [
                "optimize",
                "k",
                "--all",
                "--proposer",
                "tuner",
                "--rounds",
                "1",
                "--candidates",
                "2",
                "--html",
                "summary.html",
            ],
        )
        assert res.exit_code == 0, res.output
        table = res.stdout.splitlines()
        assert table[0].split()[:2] == ["entry", "GPU"] and table[1].startswith("k/vector_add.cu:vector_add")
        assert "accepted" in table[1] and "1 of 1 entries faster (verified)" in res.stdout
        page = (tmp_path / "summary.html").read_text()
        assert "<tr class='ok'>" in page and "vector_add" in page
        res = CliRunner().invoke(
            cli.app,
            [
                "optimize",
                "k",
                "--all",
                "--proposer",
                "tuner",
                "--rounds",
                "1",
                "--candidates",
                "1",
                "--format",
                "json",
            ],
        )
        doc = json.loads(res.stdout)
        assert doc["entries"][0]["entry"] == "vector_add" and doc["runner"].startswith("pool tcp://")
        res = CliRunner().invoke(cli.app, ["optimize", "k", "--all", "--kernel", "vector_add"])
        assert res.exit_code == 2 and "drop --kernel" in res.output
    finally:
        pool.close()


def test_an_entry_whose_every_candidate_errored_is_an_error_row_with_the_reason() -> None:
    from kernellsp.optimize.result import CandidateRecord, OptimizeResult

    rec = CandidateRecord(
        1,
        0,
        "k",
        "tunable:BLOCK=128",
        "tuner",
        [],
        None,
        "error",
        "the baseline fails on shape 3: no CUDA-capable device",
        None,
        1.0,
    )
    res = OptimizeResult(
        "a.cu", "k", "", "", False, None, [rec], 1, "2 rounds without gain", None, 1.0, {"gpu": "G"}
    )
    job = fanout.EntryJob(Path("a.cu"), "k", "")
    o = fanout.outcome_of(job, res, None, 1.0)
    assert o.verdict == "error" and "no CUDA-capable device" in o.message and o.gpu == "G"
    text = fanout.summary_text([o])
    assert "1 could not run" in text and text.splitlines()[-1].endswith("no CUDA-capable device")
