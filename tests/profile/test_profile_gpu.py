"""GPU tests for profiling: real ncu runs on the samples (run with ``pytest -m gpu`` on a GPU host)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from kernellsp.profile.environment import runner_environment
from kernellsp.profile.ncu import ProfileOptions, profile_file
from kernellsp.run.runner import LocalRunner

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def runner() -> LocalRunner:
    if shutil.which("nvidia-smi") is None or shutil.which("ncu") is None:
        pytest.skip("needs an NVIDIA GPU with ncu")
    return LocalRunner()


@pytest.fixture(scope="module")
def env(runner: LocalRunner) -> dict:
    return runner_environment(runner)


def _profile(runner: LocalRunner, env: dict, name: str, **kw: object):
    path = ROOT / "samples" / name
    return profile_file(path, path.read_text(), runner, ProfileOptions(**kw), environment=env)  # type: ignore[arg-type]


def _line_of(name: str, needle: str) -> int:
    lines = (ROOT / "samples" / name).read_text().splitlines()
    return next(i for i, ln in enumerate(lines) if needle in ln)


def test_environment_is_recorded(env: dict) -> None:
    assert env["gpu"] and env["driver"] and env["ncu_version"] and env["nvcc_version"]


def test_vector_add_profile_and_cache(runner: LocalRunner, env: dict) -> None:
    out = _profile(runner, env, "vector_add.cu", use_cache=True)
    assert not out.cached
    [k] = out.kernels
    assert k.name == "vector_add" and k.duration_ns and k.duration_ns > 0
    assert k.dram_pct is not None and k.dram_pct > 50, "an elementwise add of 3x64 MB is DRAM-bound"
    assert any(f.code == "KL501" for f in out.findings)
    t0 = time.monotonic()
    again = _profile(runner, env, "vector_add.cu", use_cache=True)
    assert again.cached and time.monotonic() - t0 < 1.0
    assert [f.code for f in again.findings] == [f.code for f in out.findings]


def test_transpose_flags_the_uncoalesced_store_line(runner: LocalRunner, env: dict) -> None:
    out = _profile(runner, env, "transpose_naive.cu", use_cache=False)
    store = _line_of("transpose_naive.cu", "out[")
    hits = [f for f in out.findings if f.code == "KL601"]
    assert any(f.range.start_line == store for f in hits), [
        (f.code, f.range.start_line) for f in out.findings
    ]


def test_atomic_reduction_flags_contention(runner: LocalRunner, env: dict) -> None:
    out = _profile(runner, env, "reduce_atomic.cu", use_cache=False)
    codes = {f.code for f in out.findings}
    assert "KL511" in codes or ("KL505" in codes and "KL508" in codes), codes
    [k] = out.kernels
    assert "latency" in k.bottleneck


def test_sgemm_flags_l1_bound_inner_loop(runner: LocalRunner, env: dict) -> None:
    out = _profile(runner, env, "sgemm_naive.cu", use_cache=False)
    codes = {f.code for f in out.findings}
    assert "KL503" in codes, codes
    loop = _line_of("sgemm_naive.cu", "+=")
    hot = [f for f in out.findings if f.code == "KL603"]
    assert any(abs(f.range.start_line - loop) <= 1 for f in hot), [(f.code, f.range.start_line) for f in hot]


def test_host_launcher_profiles_its_kernel(runner: LocalRunner, env: dict) -> None:
    out = _profile(runner, env, "relu_launcher.cu", use_cache=False)
    assert [k.name for k in out.kernels] == ["relu_kernel"]
    assert out.kernels[0].entry == "solve"


@pytest.mark.parametrize("name", ["transpose_naive.cu", "histogram.cu"])
def test_device_only_build_profiles_what_the_usual_build_does(
    runner: LocalRunner, env: dict, name: str
) -> None:
    """The cubin of the entry unit and a host harness without user code: same kernel, same registers, the
    same line findings as the usual build's harness (the device code is the same translation unit's)."""
    fast = _profile(runner, env, name, use_cache=False)
    usual = _profile(runner, env, name, use_cache=False, device_only=False)
    ph = fast.environment["phases"]
    label = fast.kernels[0].entry
    assert f"build_{label}_cubin_s" in ph, ph
    assert not any("device-only" in n for n in fast.notes), fast.notes
    assert f"build_{label}_cubin_s" not in usual.environment["phases"]
    assert [k.name for k in fast.kernels] == [k.name for k in usual.kernels]
    for a, b in zip(fast.kernels, usual.kernels, strict=True):
        assert a.metrics["registers_per_thread"] is not None
        for m in ("registers_per_thread", "smem_per_block_bytes", "waves"):
            assert a.metrics.get(m) == b.metrics.get(m), m
    # Findings from measured values near a threshold may flip between two runs: at most one may differ.
    fast_set = {(f.code, f.range.start_line) for f in fast.findings}
    usual_set = {(f.code, f.range.start_line) for f in usual.findings}
    assert len(fast_set ^ usual_set) <= 1, (fast_set, usual_set)
