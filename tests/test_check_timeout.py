"""A build that runs out of time is a finding naming the limit and the setting, cached like any result."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from kernellsp.check import CheckOptions, check_text
from kernellsp.rules.engine import load_rules

REPO = Path(__file__).resolve().parents[1]
requires_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


@requires_nvcc
def test_a_timed_out_build_is_a_cached_finding_until_the_limit_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELLSP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KERNELLSP_NO_CACHE", raising=False)
    path = tmp_path / "vector_add.cu"
    text = (REPO / "samples" / "vector_add.cu").read_text()
    path.write_text(text)
    ruleset = load_rules(None)
    # nvcc cannot even start in 10 ms: the build times out.
    first = check_text(path, text, CheckOptions(build_timeout_s=0.01), ruleset)
    assert first.build is not None and first.build.timed_out and not first.build.cached
    kl005 = [f for f in first.findings if f.code == "KL005"]
    assert len(kl005) == 1 and kl005[0].range.start_line == 0
    msg = kl005[0].message
    assert "0.01 s" in msg and "build_timeout_s" in msg and "buildTimeoutS" in msg
    # Source-level rules still ran (the missing-spec hint is not about the build).
    assert not any(f.code.startswith("KL1") for f in first.findings)
    # Unchanged text, same limit: the timeout is remembered, nvcc does not run again.
    t = time.monotonic()
    again = check_text(path, text, CheckOptions(build_timeout_s=0.01), ruleset)
    assert again.build is not None and again.build.cached and again.build.timed_out
    assert [f.message for f in again.findings if f.code == "KL005"] == [msg]
    assert time.monotonic() - t < 5
    # A higher limit builds for real and replaces the cached timeout.
    built = check_text(path, text, CheckOptions(build_timeout_s=300), ruleset)
    assert built.build is not None and built.build.ok and not built.build.timed_out and not built.build.cached
    assert not any(f.code == "KL005" for f in built.findings)
    assert any("registers" in k.metrics for k in built.kernels)
    cached = check_text(path, text, CheckOptions(build_timeout_s=0.01), ruleset)
    assert cached.build is not None and cached.build.ok and cached.build.cached


def test_the_timeout_rule_is_bundled() -> None:
    rule = load_rules(None).by_emitter("build-timeout")
    assert rule is not None and rule.code == "KL005" and rule.severity.value == "warning"
    assert "buildTimeoutS" in rule.fix
