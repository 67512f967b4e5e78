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
def test_sample_harness_compiles(path: Path, tmp_path: Path) -> None:
    """Every sample's spec is runnable as written: kernellsp's harness for it builds with the real nvcc."""
    from kernellsp.run import harness

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    model = parse_file(path)
    b = spec.specs_from_source(model)[0][0]
    plan = harness.plan_harness(model, b.spec, b.entry)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / path.name).write_text(path.read_text())
    (tmp_path / "h.cu").write_text(harness.generate_harness(plan, f"src/{path.name}"))
    cmd = harness.harness_compile_command("h.cu", "h", "sm_90", plan.flags, nvcc=nvcc)
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{path.name}: harness does not build:\n{proc.stderr[-2000:]}"
