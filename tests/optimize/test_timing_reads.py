"""The device-code check of the gate (kernellsp.optimize.verify.timing_reads), with the real nvcc.

Code that reads clocks, timers or its placement can behave one way under the checks and another in
the user's runs. The check compiles each side's entry unit to PTX exactly as the gate does and
refuses registers the candidate reads and the baseline does not. Every adversarial case of that
class is refused here; no honest control of the corpus is (no false alarm).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from helpers.common import requires_nvcc

from kernellsp.build import toolchain
from kernellsp.optimize.verify import timing_reads
from kernellsp.run import harness
from kernellsp.run.runner import LocalRunner
from kernellsp.source import spec
from kernellsp.source.model import parse_source

REPO = Path(__file__).resolve().parents[2]
CASES = tomllib.loads((REPO / "tests" / "adversarial" / "manifest.toml").read_text())["case"]
TIMING = [c for c in CASES if c.get("expect") == "timing_dependent"]
HONEST = [c for c in CASES if c.get("expect") == "accepted"]


def _side_ptx(
    runner: LocalRunner, wd: str, who: str, path: Path, text: str, entry: str
) -> tuple[str | None, str]:
    """Lay out one side as the gate does (``WHO/harness.cu`` + ``WHO/src/NAME``) and read its PTX."""
    model = parse_source(text, str(path))
    bound = spec.entry_spec(model, entry)
    assert bound is not None
    plan = harness.plan_harness(model, bound.spec, entry)
    runner.put(
        {
            f"{who}/src/{path.name}": text.encode(),
            f"{who}/harness.cu": harness.generate_harness(plan, f"src/{path.name}", split=True).encode(),
        },
        wd,
    )
    nvcc = toolchain.find_tool("nvcc")
    assert nvcc is not None
    return timing_reads.read_ptx(runner, f"{wd}/{who}", nvcc, "sm_90", list(plan.flags), 300.0)


def _verdict(case: dict[str, Any]) -> Any:
    runner = LocalRunner()
    wd = runner.new_workdir()
    try:
        base_path, cand_path = REPO / case["baseline"], REPO / case["candidate"]
        base = _side_ptx(runner, wd, "base", base_path, base_path.read_text(), case["entry"])
        # The candidate sits where the baseline's file is (the gate verifies it in place of the user's file).
        cand = _side_ptx(runner, wd, "cand", base_path, cand_path.read_text(), case["entry"])
        return timing_reads.verdict(base, cand, case["entry"])
    finally:
        runner.cleanup(wd)


def test_registers_are_read_from_ptx_not_from_comments() -> None:
    ptx = """
    // mov.u64 %rd1, %globaltimer;   (a comment)
    mov.u64 %rd2, %clock64;
    mov.u32 %r1, %smid;
    mov.u32 %r2, %laneid;
    mov.u32 %r3, %tid.x;
    /* %warpid */
    """
    assert timing_reads.registers_read(ptx) == {"clock64", "smid"}
    assert timing_reads.added_reads("mov.u64 %rd2, %clock64;", ptx) == ["smid"]


def test_the_ptx_command_targets_one_architecture() -> None:
    flags = [
        "-gencode",
        "arch=compute_80,code=sm_80",
        "--generate-code=arch=compute_90,code=sm_90",
        "-DX=1",
        "-O2",
    ]
    cmd = timing_reads.ptx_command("nvcc", "sm_90", flags, "harness.cu", "out.ptx")
    assert "-gencode" not in cmd and not any("generate-code" in c for c in cmd)
    assert cmd[-4:] == ["-ptx", "-o", "out.ptx", "harness.cu"] and "-arch=sm_90" in cmd
    assert "-DX=1" in cmd and "-O2" in cmd


@requires_nvcc
@pytest.mark.parametrize("case", TIMING, ids=[c["name"] for c in TIMING])
def test_code_reading_clocks_or_placement_is_refused(case: dict[str, Any]) -> None:
    v = _verdict(case)
    assert v is not None and v.kind == "timing_dependent", v
    assert v.details["registers"] and "the baseline does not" in v.message


@requires_nvcc
def test_no_honest_control_reads_a_timing_register() -> None:
    assert len(HONEST) >= 6
    refused = [(c["name"], v.message) for c in HONEST if (v := _verdict(c)) is not None]
    assert not refused, refused


def test_the_corpus_has_cases_of_the_class() -> None:
    assert len(TIMING) >= 3
    assert {c["pitfall"] for c in TIMING} >= {"sanitizer evasion by timing", "placement-dependent code"}
