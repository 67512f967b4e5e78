"""The profile path without a GPU: real nvcc (split build), a stand-in ncu that hands back a committed H100 report.

The stand-in is a script named ``ncu`` first on PATH: it records its command line and copies
``tests/fixtures/ncu/samples-h100/vector_add.vector_add.ncu-rep`` to the ``--export`` path, so
everything around ncu (the build, the phases, the report, the rules, the cache, the debounce) runs for real.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from kernellsp.profile.ncu import ProfileOptions, cached_profile, profile_file
from kernellsp.run import harness_build as hb
from kernellsp.run.harness import RESULT_FORMAT
from kernellsp.run.runner import LocalRunner

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "tests" / "fixtures" / "ncu" / "samples-h100" / "vector_add.vector_add.ncu-rep"
ENV = {
    "gpu": "NVIDIA H100 80GB HBM3",
    "driver": "580.159.04",
    "ncu_version": "2025.3.1.0",
    "nvcc_version": "13.0",
}

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None or not REPORT.is_file(), reason="needs nvcc")


@pytest.fixture
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in ncu on PATH; returns the file where it logs its command lines (one JSON list per line)."""
    pytest.importorskip("ncu_report")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "ncu-calls.jsonl"
    script = bindir / "ncu"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, shutil, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "out = sys.argv[sys.argv.index('--export') + 1]\n"
        f"shutil.copy({str(REPORT)!r}, out + '.ncu-rep')\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KERNELLSP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KERNELLSP_NO_CACHE", raising=False)
    # The stand-in lives in a temporary directory that a sandboxed runner would not show the command.
    monkeypatch.setenv("KERNELLSP_SANDBOX", "off")
    monkeypatch.setattr(hb, "_inflight", {})
    from kernellsp.build import toolchain

    if hasattr(toolchain.find_tool, "cache_clear"):
        toolchain.find_tool.cache_clear()
    return log


@pytest.mark.slow
def test_profile_phases_cache_and_debounce(fake_ncu: Path, tmp_path: Path) -> None:
    path = tmp_path / "vector_add.cu"
    text = (REPO / "samples" / "vector_add.cu").read_text()
    path.write_text(text)
    runner = LocalRunner()
    # Nothing cached yet: the editor's first question gets no answer and starts nothing.
    assert cached_profile(path, text, runner, ProfileOptions()) is None
    from kernellsp import cache

    cache.put("env", cache.digest("env", runner.name), ENV)
    assert cached_profile(path, text, runner, ProfileOptions()) is None
    assert not fake_ncu.exists()
    t0 = time.monotonic()
    not_before = t0 + 3.0
    out = profile_file(path, text, runner, ProfileOptions(gpu_not_before=not_before), environment=ENV)
    assert not out.cached and out.kernels and out.kernels[0].name == "vector_add"
    assert any(f.code.startswith(("KL5", "KL6")) for f in out.findings)
    calls = [json.loads(line) for line in fake_ncu.read_text().splitlines()]
    assert len(calls) == 1 and "--profile-from-start" in calls[0]
    ph = out.environment["phases"]
    for k in (
        "parse_s",
        "environment_s",
        "plan_s",
        "build_s",
        "ncu_s",
        "report_s",
        "rules_s",
        "total_s",
        "build_vector_add_s",
        "debounce_wait_s",
    ):
        assert k in ph, (k, ph)
    # The build ran inside the debounce: ncu started no earlier than the deadline, and the wait was what
    # the build had left of it.
    assert ph["build_s"] + ph["debounce_wait_s"] >= 3.0 - 0.2
    # A __global__ entry builds device-only: the entry unit to a cubin, and a host harness without user code.
    assert ph["build_vector_add_cubin_s"] > 0
    assert ph["build_vector_add_host_compile_s"] > 0 and "build_vector_add_host_link_s" in ph
    assert calls[0][calls[0].index("--profile-from-start") + 2 :][:3] == [
        "./hc_vector_add",
        "--cubin",
        "vector_add.cubin",
    ]
    assert ph["total_s"] >= ph["build_s"] + ph["ncu_s"] + ph["report_s"] + ph["rules_s"]
    # The same content again: served from the cache, ncu not started.
    hit = cached_profile(path, text, runner, ProfileOptions())
    assert hit is not None and hit.cached and [f.code for f in hit.findings] == [f.code for f in out.findings]
    again = profile_file(path, text, runner, ProfileOptions(), environment=ENV)
    assert again.cached and len(fake_ncu.read_text().splitlines()) == 1
    # An edit: the build runs again (the runtime object is reused), ncu runs again.
    edited = text + "// edited\n"
    assert cached_profile(path, edited, runner, ProfileOptions()) is None
    out2 = profile_file(path, edited, runner, ProfileOptions(), environment=ENV)
    ph2 = out2.environment["phases"]
    assert not out2.cached and len(fake_ncu.read_text().splitlines()) == 2
    assert "debounce_wait_s" not in ph2
    # Only the cubin is compiled again: the host harness depends on the plan, not on the kernel's body.
    assert ph2["build_vector_add_cubin_s"] > 0 and "build_vector_add_host_cached_s" in ph2
    assert "build_vector_add_host_compile_s" not in ph2


@pytest.mark.slow
def test_profile_usual_build_when_device_only_is_off(fake_ncu: Path, tmp_path: Path) -> None:
    path = tmp_path / "vector_add.cu"
    text = (REPO / "samples" / "vector_add.cu").read_text()
    path.write_text(text)
    out = profile_file(path, text, LocalRunner(), ProfileOptions(device_only=False), environment=ENV)
    ph = out.environment["phases"]
    assert out.kernels and out.kernels[0].name == "vector_add"
    assert ph["build_vector_add_compile_s"] > 0 and "build_vector_add_link_s" in ph
    assert "build_vector_add_cubin_s" not in ph
    call = json.loads(fake_ncu.read_text().splitlines()[0])
    assert "./h_vector_add" in call and "--cubin" not in call


@pytest.mark.slow
def test_a_harness_that_cannot_use_the_cubin_falls_back_to_the_usual_build(
    fake_ncu: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in ncu plays a driver without cuModuleEnumerateFunctions: the device-only harness ends with its
    "cubin entry:" launch_error and no report; the entry is then built the usual way and profiled again."""
    script = Path(os.environ["PATH"].split(os.pathsep)[0]) / "ncu"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, shutil, sys\n"
        f"open({str(fake_ncu)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "out = sys.argv[sys.argv.index('--export') + 1]\n"
        "if '--cubin' in sys.argv:\n"
        "    d = sys.argv[sys.argv.index('--out') + 1]\n"
        "    os.makedirs(d, exist_ok=True)\n"
        "    msg = 'cubin entry: the driver entry point cuModuleEnumerateFunctions is unavailable'\n"
        f"    json.dump({{'format': {RESULT_FORMAT!r}, 'status': 'launch_error', 'error': msg}}, "
        "open(os.path.join(d, 'result.json'), 'w'))\n"
        "    sys.exit(3)\n"
        f"shutil.copy({str(REPORT)!r}, out + '.ncu-rep')\n"
    )
    from kernellsp.profile import ncu as ncu_mod

    monkeypatch.setattr(ncu_mod, "_CUBIN_REFUSED", set())
    path = tmp_path / "vector_add.cu"
    text = (REPO / "samples" / "vector_add.cu").read_text()
    path.write_text(text)
    runner = LocalRunner()
    out = profile_file(path, text, runner, ProfileOptions(), environment=ENV)
    assert out.kernels and out.kernels[0].name == "vector_add"
    assert any(
        "device-only build could not run" in n and "cuModuleEnumerateFunctions" in n for n in out.notes
    )
    calls = [json.loads(line) for line in fake_ncu.read_text().splitlines()]
    assert (
        len(calls) == 2
        and "--cubin" in calls[0]
        and "--cubin" not in calls[1]
        and "./h_vector_add" in calls[1]
    )
    ph = out.environment["phases"]
    assert "build_vector_add_usual_s" in ph and "build_vector_add_usual_compile_s" in ph
    # A driver that lacks the entry points is remembered: the next profile on this runner builds the usual way.
    assert runner.name in ncu_mod._CUBIN_REFUSED
    again = profile_file(path, text + "// edited\n", runner, ProfileOptions(), environment=ENV)
    assert len(fake_ncu.read_text().splitlines()) == 3 and not again.notes
