"""The bundled samples: each parses, carries exactly one valid launch spec and compiles with nvcc."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernellsp.source import spec
from kernellsp.source.model import parse_file

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "samples"
SAMPLES = sorted(SAMPLES_DIR.glob("*.cu"))


def test_there_are_enough_samples() -> None:
    assert len(SAMPLES) >= 10, [p.name for p in SAMPLES]


def test_readme_lists_every_sample() -> None:
    readme = (SAMPLES_DIR / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in SAMPLES if p.name not in readme]
    assert not missing, f"samples/README.md does not mention {missing}"


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_has_one_valid_spec(path: Path) -> None:
    model = parse_file(path)
    assert not model.syntax_errors, f"{path.name}: syntax errors at {model.syntax_errors}"
    assert not model.has_main, f"{path.name}: samples have no main(); kernellsp generates the harness"
    bound, issues = spec.specs_from_source(model)
    assert len(bound) == 1, f"{path.name}: expected exactly one spec'd entry, got {[b.entry for b in bound]}"
    b = bound[0]
    fn = model.function(b.entry)
    assert fn is not None and fn.kind in ("global", "host"), f"{path.name}: bad entry {b.entry!r}"
    issues += spec.validate_against(b, fn, model)
    assert not issues, f"{path.name}: " + "; ".join(i.message for i in issues)
    # At least one correctness-only shape beyond the main one, to catch missing bounds checks.
    assert b.spec.shapes, f"{path.name}: add correctness-only shapes"


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_compiles(path: Path, tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    out = tmp_path / (path.stem + ".cubin")
    proc = subprocess.run(
        [nvcc, "-arch=sm_90", "-cubin", "-lineinfo", "-o", str(out), str(path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"{path.name} failed to compile:\n{proc.stderr}"
    assert out.is_file() and out.stat().st_size > 0


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_harness_compiles(path: Path) -> None:
    """Every sample's spec is runnable as written: kernellsp's harness for it builds with the real nvcc, the
    way verify and profile build it (the split build: the runtime object once per run, from the session's
    cache, then the sample's entry unit compiled and linked with it)."""
    from kernellsp import cache
    from kernellsp.run import harness
    from kernellsp.run.harness_build import build_harness
    from kernellsp.run.runner import LocalRunner

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    model = parse_file(path)
    b = spec.specs_from_source(model)[0][0]
    plan = harness.plan_harness(model, b.spec, b.entry)
    files = {
        f"src/{path.name}": path.read_bytes(),
        "h.cu": harness.generate_harness(plan, f"src/{path.name}", split=True).encode(),
    }
    runner = LocalRunner()
    wd = runner.new_workdir()
    runner.put(files, wd)
    key = cache.digest(*(f"{k}\0{v.decode()}" for k, v in sorted(files.items())))
    built = build_harness(
        runner,
        wd,
        "h.cu",
        "h",
        "sm_90",
        plan.flags,
        nvcc=nvcc,
        nvcc_version="test",
        sources_key=key,
        timeout_s=300,
    )
    try:
        assert built.returncode == 0, f"{path.name}: harness does not build:\n{built.output[-2000:]}"
        assert (Path(wd) / "h").is_file()
    finally:
        shutil.rmtree(wd, ignore_errors=True)
