"""Shared fixtures: every test runs with its own kernellsp cache, never the user's."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernellsp.build import toolchain


def pytest_configure(config: pytest.Config) -> None:
    """GPU tests spread over a host's GPUs: with ``KERNELLSP_TEST_GPUS=N`` and pytest-xdist, worker gwK
    sees GPU K mod N only, and takes that GPU's own lock (the lock is per host otherwise, so workers on
    different GPUs would wait for each other). Set before anything in the worker touches CUDA."""
    gpus = os.environ.get("KERNELLSP_TEST_GPUS", "")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if gpus.isdigit() and int(gpus) > 1 and worker.startswith("gw"):
        k = int(worker[2:]) % int(gpus)
        os.environ["CUDA_VISIBLE_DEVICES"] = str(k)
        os.environ["KERNELLSP_GPU_LOCK_DIR"] = lock_dir = f"/tmp/kernellsp-gpu-{k}"
        os.makedirs(lock_dir, exist_ok=True)


@pytest.fixture(scope="session")
def session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the whole run, so repeated builds of the samples stay fast but never touch ~/.cache. With
    pytest-xdist the workers share it (the run's base folder holds each worker's own), so a build one worker
    made (the harness runtime object, a sample's check) is not made again by the others."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "kernellsp-cache"
        shared.mkdir(exist_ok=True)
        return shared
    return tmp_path_factory.mktemp("kernellsp-cache")


@pytest.fixture(scope="session")
def harness_runtime_object(session_cache_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The harness runtime object (``kl_runtime.o``, sm_90) that verify's split build links every entry unit
    with, compiled once per run through the harness build's own cache (about a minute of nvcc on a 2-core
    machine), so every test that builds harnesses shares it."""
    from kernellsp.run import harness_build as hb
    from kernellsp.run.runner import LocalRunner

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELLSP_CACHE_DIR", str(session_cache_dir))
        mp.delenv("KERNELLSP_NO_CACHE", raising=False)
        runner = LocalRunner()
        key, fut = hb.ensure_runtime(runner, "sm_90", nvcc, "test", 900)
        res = fut.result()
        assert res.returncode == 0, res.output[-2000:]
        out = tmp_path_factory.mktemp("harness-runtime")
        assert runner.bin_cache_fetch(key, hb.RUNTIME_OBJECT, str(out))
    return out / hb.RUNTIME_OBJECT


@pytest.fixture(autouse=True)
def _isolated_cache(monkeypatch: pytest.MonkeyPatch, session_cache_dir: Path) -> Iterator[None]:
    monkeypatch.setenv("KERNELLSP_CACHE_DIR", str(session_cache_dir))
    monkeypatch.delenv("KERNELLSP_NO_CACHE", raising=False)
    monkeypatch.delenv("KERNELLSP_RULES_DIR", raising=False)
    yield
    # A test that changed PATH or CUDA_HOME must not leave stale tool locations behind.
    toolchain.reset()


# --- sshd for tests/run/test_runner_ssh.py (the server itself: tests/helpers/sshd.py) ---


@pytest.fixture(scope="session")
def sshd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real OpenSSH server on 127.0.0.1 with a throw-away key (skips without /usr/sbin/sshd)."""
    from helpers import sshd  # tests/helpers/sshd.py; tests/ is on sys.path (rootdir conftest)

    try:
        server = sshd.start_sshd(tmp_path_factory.mktemp("sshd"))
    except sshd.SshdUnavailable as exc:
        pytest.skip(str(exc))
    yield server
    sshd.stop_sshd(server)
