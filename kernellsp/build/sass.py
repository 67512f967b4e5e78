"""SASS per source line: ``nvdisasm``'s listing of a cubin built with ``-lineinfo``, read into counts of
instruction classes (fp64, local memory, atomics, global/shared accesses, barriers...) per line."""

from __future__ import annotations

import os
import re


def sass_class(opcode: str) -> list[str]:
    """Instruction classes of one SASS opcode (``DFMA``, ``LDG.E.128``, ``REDG.E.ADD.F32...``)."""
    op = opcode.upper()
    head = op.split(".")[0]
    classes: list[str] = []
    if head in ("DADD", "DMUL", "DFMA", "DSETP", "DMNMX", "DMMA") or (
        head in ("F2F", "I2F", "F2I", "MUFU") and ".F64" in op
    ):
        classes.append("fp64")
    if head in ("LDL", "STL"):
        classes.append("local_" + ("ld" if head == "LDL" else "st"))
    if head in ("ATOM", "ATOMG", "RED", "REDG"):
        classes.append("atomic_global")
    if head == "ATOMS":
        classes.append("atomic_shared")
    if head in ("LDG", "LD"):
        classes.append("global_ld")
    if head in ("STG", "ST"):
        classes.append("global_st")
    if head in ("LDS", "LDSM"):
        classes.append("shared_ld")
    if head == "STS":
        classes.append("shared_st")
    if head == "BAR":
        classes.append("barrier")
    if head in ("HMMA", "HGMMA", "IMMA", "QGMMA"):
        classes.append("tensor")
    if head in ("FFMA", "FADD", "FMUL"):
        classes.append("fp32")
    if head == "MUFU":
        classes.append("sfu")
    return classes


_SECTION = re.compile(r"^//-+ \.text\.(\S+)\s+-+")
_LINEINFO = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')
_INSN = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def parse_nvdisasm(text: str, source_path: str) -> dict[str, dict[int, dict[str, int]]]:
    """Per function, per 0-based line of ``source_path``: instruction class counts (``total`` too).

    Code inlined from headers (``atomicAdd``'s ``.hpp``) is charged to the last line of the user's
    file seen in that function, which is the call site.
    """
    base = os.path.basename(source_path)
    out: dict[str, dict[int, dict[str, int]]] = {}
    func: str | None = None
    line: int | None = None
    # nvdisasm prints a line comment only when the location changes, also across sections: a
    # function whose first instructions share the previous function's last location has none.
    carried: int | None = None
    for raw in text.splitlines():
        m = _SECTION.match(raw)
        if m:
            func = m.group(1)
            out.setdefault(func, {})
            line = carried
            continue
        m = _LINEINFO.match(raw)
        if m:
            if os.path.basename(m.group(1)) == base:
                line = carried = int(m.group(2)) - 1
            else:
                carried = None
            continue
        if func is None or line is None:
            continue
        m = _INSN.match(raw)
        if not m:
            continue
        counts = out[func].setdefault(line, {})
        counts["total"] = counts.get("total", 0) + 1
        for cls in sass_class(m.group(1)):
            counts[cls] = counts.get(cls, 0) + 1
    return out
