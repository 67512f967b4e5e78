"""The split harness build: the runtime unit once per toolchain, the entry unit per change (real nvcc, no GPU)."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from kernellsp import cache
from kernellsp.build.nvcc import Cancelled
from kernellsp.run import harness as hz
from kernellsp.run import harness_build as hb
from kernellsp.run.runner import LocalRunner
from kernellsp.source import spec
from kernellsp.source.model import parse_source

REPO = Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc")
requires_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache directory and no runtime builds remembered from other tests."""
    d = tmp_path / "cache"
    # A runtime build that an earlier test started (and stopped waiting for) goes on in its thread and
    # stores its object in whatever cache directory the environment names when it ends: let it end first,
    # or it lands in this test's private cache.
    for t in threading.enumerate():
        if t.name == "kernellsp-runtime-build":
            t.join(timeout=600)
    monkeypatch.setenv("KERNELLSP_CACHE_DIR", str(d))
    monkeypatch.delenv("KERNELLSP_NO_CACHE", raising=False)
    monkeypatch.setattr(hb, "_inflight", {})
    return d


def _unit(runner: LocalRunner, sample: str, text: str | None = None) -> tuple[str, str, list[str]]:
    """A scratch dir holding ``sample``'s split entry unit as ``h.cu``; returns (workdir, sources key, flags)."""
    path = REPO / "samples" / sample
    text = text if text is not None else path.read_text()
    model = parse_source(text, str(path))
    bound = spec.specs_from_source(model)[0][0]
    plan = hz.plan_harness(model, bound.spec, bound.entry)
    files = {
        f"src/{sample}": text.encode(),
        "h.cu": hz.generate_harness(plan, f"src/{sample}", split=True).encode(),
    }
    wd = runner.new_workdir()
    runner.put(files, wd)
    return wd, cache.digest(*(f"{k}\0{v.decode()}" for k, v in sorted(files.items()))), list(bound.spec.flags)


def _build(runner: LocalRunner, wd: str, key: str, flags: list[str], **kw: object) -> hb.HarnessBuild:
    assert NVCC is not None
    return hb.build_harness(
        runner,
        wd,
        "h.cu",
        "h",
        "sm_90",
        flags,
        nvcc=NVCC,
        nvcc_version="test",
        sources_key=key,
        timeout_s=600,
        **kw,
    )  # type: ignore[arg-type]


def test_split_unit_has_the_interface_only_and_no_main() -> None:
    path = REPO / "samples" / "vector_add.cu"
    model = parse_source(path.read_text(), str(path))
    bound = spec.specs_from_source(model)[0][0]
    plan = hz.plan_harness(model, bound.spec, bound.entry)
    whole = hz.generate_harness(plan, "src/vector_add.cu")
    split = hz.generate_harness(plan, "src/vector_add.cu", split=True)
    assert "#define KERNELLSP_H_INTERFACE_ONLY 1" in split and "KERNELLSP_H_INTERFACE_ONLY 1" not in whole
    assert (
        "return kernellsp_h::run(argc, argv)" in whole and "return kernellsp_h::run(argc, argv)" not in split
    )
    unit = hb.runtime_unit_source()
    assert "return kernellsp_h::run(argc, argv)" in unit and "#define KERNELLSP_H_FP16 1" in unit


def test_host_toolchain_flags_reach_the_runtime_unit_and_nothing_else() -> None:
    flags = [
        "--use_fast_math",
        "-ccbin",
        "/opt/gcc12/bin",
        "-maxrregcount=32",
        "--compiler-bindir=/x",
        "-DN=3",
    ]
    assert hb.host_toolchain_flags(flags) == ["-ccbin", "/opt/gcc12/bin", "--compiler-bindir=/x"]
    cmd = hb.runtime_compile_command("sm_90", "nvcc", flags)
    assert "--use_fast_math" not in cmd and "-maxrregcount=32" not in cmd and "/opt/gcc12/bin" in cmd
    assert hb.runtime_key("sm_90", "nvcc", "13.0") != hb.runtime_key("sm_80", "nvcc", "13.0")
    assert hb.runtime_key("sm_90", "nvcc", "13.0") != hb.runtime_key("sm_90", "nvcc", "12.8")


@requires_nvcc
@pytest.mark.slow
def test_runtime_compiles_once_and_entry_units_link_against_it(fresh_cache: Path) -> None:
    runner = LocalRunner()
    wd, key, flags = _unit(runner, "vector_add.cu")
    first = _build(runner, wd, key, flags)
    assert first.returncode == 0, first.output[-2000:]
    assert not first.cached and {"compile_s", "runtime_wait_s", "link_s"} <= set(first.phases)
    assert (Path(wd) / "h").is_file()
    # The entry unit holds the tables and the glue but not the runtime proper: that is the runtime object's.
    nm = shutil.which("nm")
    if nm is not None:
        unit_syms = subprocess.run([nm, "-C", str(Path(wd) / "h.o")], capture_output=True, text=True).stdout
        rt_syms = subprocess.run(
            [nm, "-C", str(Path(wd) / f"h.{hb.RUNTIME_OBJECT}")], capture_output=True, text=True
        ).stdout
        assert " T kernellsp_h::entry_launch" in unit_syms and "kernellsp_h::kShapes" in unit_syms
        assert "kernellsp_h_fill_kernel" not in unit_syms and "kernellsp_h_fill_kernel" in rt_syms
        assert " T main" in rt_syms and " T main" not in unit_syms
    runtimes = list((fresh_cache / "bin").iterdir())
    # A host launcher (another entry kind) reuses the same runtime object: only its own unit compiles.
    wd2, key2, flags2 = _unit(runner, "relu_launcher.cu")
    second = _build(runner, wd2, key2, flags2)
    assert second.returncode == 0, second.output[-2000:]
    assert second.phases["runtime_wait_s"] < 1.0
    assert len(list((fresh_cache / "bin").iterdir())) == len(runtimes) + 1  # its executable, no new runtime
    # Unchanged sources: the executable comes from the cache; an edit builds again.
    wd3, key3, flags3 = _unit(runner, "vector_add.cu")
    assert key3 == key
    again = _build(runner, wd3, key3, flags3)
    assert again.cached and again.returncode == 0 and (Path(wd3) / "h").is_file()
    text = (
        (REPO / "samples" / "vector_add.cu").read_text().replace("c[i] = a[i] + b[i]", "c[i] = b[i] + a[i]")
    )
    wd4, key4, flags4 = _unit(runner, "vector_add.cu", text)
    assert key4 != key
    edited = _build(runner, wd4, key4, flags4)
    assert edited.returncode == 0 and not edited.cached
    for d in (wd, wd2, wd3, wd4):
        runner.cleanup(d)


@requires_nvcc
@pytest.mark.slow
def test_a_compile_error_names_the_step_and_spares_the_runtime(fresh_cache: Path) -> None:
    runner = LocalRunner()
    text = (
        (REPO / "samples" / "vector_add.cu")
        .read_text()
        .replace("c[i] = a[i] + b[i];", "c[i] = a[i] + undefined_name;")
    )
    wd, key, flags = _unit(runner, "vector_add.cu", text)
    res = _build(runner, wd, key, flags)
    assert res.returncode != 0 and res.failed_step == "compile"
    assert "undefined_name" in res.output
    runner.cleanup(wd)


@requires_nvcc
@pytest.mark.slow
def test_a_cancelled_build_stops_waiting_but_the_shared_runtime_compile_finishes(fresh_cache: Path) -> None:
    runner = LocalRunner()
    assert NVCC is not None
    cancel = threading.Event()
    cancel.set()
    key, fut = hb.ensure_runtime(runner, "sm_90", NVCC, "test", 600)
    with pytest.raises(Cancelled):
        hb._wait(fut, cancel)
    assert fut.result(timeout=600).returncode == 0
    wd = runner.new_workdir()
    assert runner.bin_cache_fetch(key, hb.RUNTIME_OBJECT, wd)
    runner.cleanup(wd)


@requires_nvcc
@pytest.mark.slow
def test_no_cache_builds_everything_in_the_job_and_keeps_nothing(fresh_cache: Path) -> None:
    runner = LocalRunner()
    wd, key, flags = _unit(runner, "vector_add.cu")
    res = _build(runner, wd, key, flags, use_cache=False)
    assert res.returncode == 0, res.output[-2000:]
    assert "runtime_compile_s" in res.phases and (Path(wd) / "h").is_file()
    assert not (fresh_cache / "bin").exists() or not any((fresh_cache / "bin").iterdir())
    runner.cleanup(wd)
