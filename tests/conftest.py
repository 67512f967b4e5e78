"""Shared fixtures: every test runs with its own kernellsp cache, never the user's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernellsp.build import toolchain


@pytest.fixture(scope="session")
def session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the whole run, so repeated builds of the samples stay fast but never touch ~/.cache."""
    return tmp_path_factory.mktemp("kernellsp-cache")


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
