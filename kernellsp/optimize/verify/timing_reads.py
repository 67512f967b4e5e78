"""Device code that reads clocks, timers or where it runs: refused unless the baseline reads the same.

A kernel's result must not depend on when or where it runs. Code that reads ``%clock64`` or
``%globaltimer`` can tell a run under compute-sanitizer (instrumented, many times slower) from a
normal one and behave differently there — a barrier that exists only while the sanitizer watches, a
shortcut taken only when the clock says nobody checks; code that reads ``%smid`` or ``%warpid`` can
behave differently on the SM the checks happened to use. Every gate observes the candidate under
some particular timing and placement, so such a read makes their verdicts say nothing about the
user's runs.

The check reads the PTX of each side's entry unit (``nvcc -ptx``, the build's own flags and the
target architecture), where every path into device code ends: intrinsics (``clock64()``,
``__globaltimer()``), inline ``asm``, helpers from headers. A register the baseline already reads is
the user's own business (a profiling counter) and stays allowed.
"""

from __future__ import annotations

import re
import tempfile
import threading
from pathlib import Path

from kernellsp.optimize.verify.session import first_line
from kernellsp.optimize.verify.verdict import Verdict, VerifyError, reject
from kernellsp.run.harness import harness_compile_command
from kernellsp.run.runner import Runner

#: PTX special registers whose value depends on time, placement or the launch's identity. ``%laneid``,
#: ``%tid`` and the like are fixed by the launch configuration and stay allowed.
TIMING_REGISTERS = (
    "clock",
    "clock_hi",
    "clock64",
    "globaltimer",
    "globaltimer_lo",
    "globaltimer_hi",
    "smid",
    "nsmid",
    "warpid",
    "nwarpid",
    "gridid",
    *(f"pm{i}" for i in range(8)),
    *(f"pm{i}_64" for i in range(8)),
)

_REGISTER = re.compile(r"%(" + "|".join(sorted(TIMING_REGISTERS, key=len, reverse=True)) + r")\b")
_PTX_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
#: Flags that choose target architectures: ``-ptx`` takes exactly one, the one the gates run on.
_ARCH_FLAGS = ("-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code", "--gpu-code")


def registers_read(ptx: str) -> set[str]:
    """The timing and placement registers a PTX text reads (comments left out)."""
    return {m.group(1) for m in _REGISTER.finditer(_PTX_COMMENT.sub(" ", ptx))}


def ptx_command(nvcc: str, arch: str, flags: list[str], unit: str, out: str) -> list[str]:
    """The entry unit's build command (:func:`harness_compile_command`) emitting PTX for ``arch`` only."""
    kept: list[str] = []
    skip = False
    for f in flags:
        if skip:
            skip = False
            continue
        if f in _ARCH_FLAGS:
            skip = True
            continue
        if f.startswith(tuple(a + "=" for a in _ARCH_FLAGS)):
            continue
        kept.append(f)
    cmd = harness_compile_command(unit, out, arch, kept, nvcc=nvcc)
    return [*cmd[:-3], "-ptx", "-o", out, unit]


def read_ptx(
    runner: Runner,
    workdir: str,
    nvcc: str,
    arch: str,
    flags: list[str],
    timeout_s: float,
    cancel: threading.Event | None = None,
    unit: str = "harness.cu",
) -> tuple[str | None, str]:
    """The PTX of ``workdir/unit`` (compiled on the runner), or ``None`` and the compiler's output."""
    out = "entry_unit.ptx"
    res = runner.run(ptx_command(nvcc, arch, flags, unit, out), workdir, timeout_s, cancel)
    if res.returncode != 0:
        return None, res.output
    with tempfile.TemporaryDirectory(prefix="kernellsp-ptx-") as tmp:
        got = runner.get(workdir, [out], Path(tmp))
        if not got:
            return None, f"{out} was not written"
        return got[0].read_text(errors="replace"), ""


def added_reads(base_ptx: str, cand_ptx: str) -> list[str]:
    """Timing and placement registers the candidate reads and the baseline does not, sorted."""
    return sorted(registers_read(cand_ptx) - registers_read(base_ptx))


def describe(added: list[str]) -> str:
    regs = ", ".join(f"%{r}" for r in added)
    return (
        f"the candidate's device code reads {regs}, which the baseline does not: code that reads clocks or "
        "its placement can behave differently under the checks (compute-sanitizer slows it down; the checks "
        "run on particular SMs) than in your runs, so no verdict about it would hold"
    )


def verdict(base: tuple[str | None, str], cand: tuple[str | None, str], entry: str) -> Verdict | None:
    """``timing_dependent`` (or ``compile_error``) from both sides' :func:`read_ptx`; None: the check passed.

    Raises :class:`VerifyError` when the baseline's PTX cannot be produced (nothing can be judged then).
    """
    (base_ptx, base_err), (cand_ptx, cand_err) = base, cand
    if base_ptx is None:
        raise VerifyError(f"the baseline's PTX could not be generated: {first_line(base_err)}")
    if cand_ptx is None:
        return reject(
            "compile_error", entry, f"the candidate's PTX could not be generated: {first_line(cand_err)}"
        )
    added = added_reads(base_ptx, cand_ptx)
    if added:
        return reject("timing_dependent", entry, describe(added), registers=added)
    return None
