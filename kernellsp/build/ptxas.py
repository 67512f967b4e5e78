"""What ptxas and nvcc print: ptxas' verbose report of each entry function's resources (registers, spills,
stack frame, shared and constant memory, barriers) and the compilers' diagnostics as records on their lines."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass


@dataclass
class KernelResources:
    """ptxas' report for one entry function (one template instantiation)."""

    mangled: str
    registers: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    smem_static: int = 0
    cmem: int = 0
    barriers: int = 0
    cumulative_stack: int = 0


@dataclass
class CompilerMessage:
    """One nvcc/ptxas/host-compiler diagnostic."""

    severity: str  # error | warning | remark
    message: str
    line: int | None  # 0-based, None when the tool gave no line in this file
    code: str | None = None
    tool: str = "nvcc"
    #: The other file (a header) the message is about, as nvcc named it (made absolute), and its 1-based line
    #: there; ``None``: this file.
    file: str | None = None
    file_line: int | None = None


_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"ptxas info\s*: Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers(.*)")


def parse_ptxas(text: str) -> list[KernelResources]:
    """Parse ``-Xptxas -v`` output into one record per entry function (non-entries are skipped)."""
    entries: dict[str, KernelResources] = {}
    order: list[str] = []
    current_entry: str | None = None
    props_for: str | None = None
    for line in text.splitlines():
        m = _ENTRY.search(line)
        if m:
            current_entry = m.group(1)
            if current_entry not in entries:
                entries[current_entry] = KernelResources(mangled=current_entry)
                order.append(current_entry)
            continue
        m = _PROPS.search(line)
        if m:
            props_for = m.group(1)
            continue
        m = _FRAME.search(line)
        if m and props_for is not None:
            if props_for in entries:
                r = entries[props_for]
                r.stack_frame, r.spill_stores, r.spill_loads = (int(g) for g in m.groups())
            continue
        m = _USED.search(line)
        if m and current_entry is not None:
            r = entries[current_entry]
            r.registers = int(m.group(1))
            rest = m.group(2)
            for num, what in re.findall(r"(\d+) (barriers|bytes smem|bytes cumulative stack size)", rest):
                if what == "barriers":
                    r.barriers = int(num)
                elif what == "bytes smem":
                    r.smem_static = int(num)
                else:
                    r.cumulative_stack = int(num)
            r.cmem = sum(int(n) for n in re.findall(r"(\d+) bytes cmem\[\d+\]", rest))
    return [entries[k] for k in order]


_NVCC_MSG = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<sev>error|warning|remark)(?: #(?P<code>[\w-]+))?: (?P<msg>.*)$"
)
_GCC_MSG = re.compile(
    r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning): (?P<msg>.*)$"
)
# `ptxas fatal   : ...` and `ptxas /tmp/x.ptx, line 23; error   : ...` (a PTX line, not a source line).
_TOOL_MSG = re.compile(
    r"^(?P<tool>ptxas|nvcc|nvlink|cicc)\s*(?:\S[^;]*, line \d+;\s*)?(?P<sev>fatal|error|warning)\s*:\s*(?P<msg>.*)$"
)


def parse_compiler_output(text: str, source_path: str) -> list[CompilerMessage]:
    """Turn nvcc's stderr into messages; those about other files (headers) have ``line=None`` and name the
    file and its line in ``file``/``file_line``."""
    out: list[CompilerMessage] = []
    base = os.path.basename(source_path)
    for raw in text.splitlines():
        line = raw.rstrip()
        m = _NVCC_MSG.match(line) or _GCC_MSG.match(line)
        if m:
            sev = "error" if "error" in m.group("sev") else m.group("sev")
            in_file = os.path.basename(m.group("file")) == base
            msg = m.group("msg").strip()
            code = m.groupdict().get("code")
            out.append(
                CompilerMessage(
                    sev,
                    msg,
                    int(m.group("line")) - 1 if in_file else None,
                    code,
                    file=None if in_file else m.group("file"),
                    file_line=None if in_file else int(m.group("line")),
                )
            )
            continue
        m = _TOOL_MSG.match(line)
        if m:
            sev = "error" if m.group("sev") in ("fatal", "error") else "warning"
            out.append(CompilerMessage(sev, m.group("msg").strip(), None, None, m.group("tool")))
    return out
