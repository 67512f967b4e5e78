"""Build analysis with the real nvcc: resources per kernel, SASS classes per line, compiler diagnostics.

Each file is compiled for one arch to a cubin with ``-lineinfo -Xptxas -v`` in a temporary
directory under a timeout. From ptxas' verbose output we take, per entry function: registers,
spill stores/loads, stack frame (local memory), static shared memory, constant memory and barriers.
When ``nvdisasm`` is available the cubin is disassembled with line info and each source line gets
counts of instruction classes (fp64, local memory, atomics, global/shared accesses, barriers).
nvcc errors and warnings become :class:`CompilerMessage` records on their lines. Results are cached
by the content hash of the file, its local includes, the flags and the nvcc version; a build that
runs out of time is a result too (``timed_out``, cached with the limit it had), so an unchanged file
that nvcc cannot build in time is not rebuilt until the limit grows.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernellsp import cache
from kernellsp.build import toolchain
from kernellsp.source.model import SourceModel

ANALYSIS_VERSION = "build-4"
DEFAULT_ARCH = "sm_90"
DEFAULT_TIMEOUT_S = 120.0


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


@dataclass
class BuildResult:
    """Everything one build tells about a file."""

    ok: bool
    arch: str
    nvcc_version: str | None
    resources: list[KernelResources] = field(default_factory=list)
    messages: list[CompilerMessage] = field(default_factory=list)
    #: mangled function name -> {line (0-based) -> {class -> count}}
    sass_lines: dict[str, dict[int, dict[str, int]]] = field(default_factory=dict)
    sass_available: bool = False
    error: str | None = None  # environment problem (no nvcc, timeout), not a compile error
    cached: bool = False
    seconds: float = 0.0
    #: nvcc did not finish within ``timeout_s`` (``error`` says so); cached like any result.
    timed_out: bool = False
    timeout_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sass_lines"] = {k: {str(ln): v for ln, v in lines.items()} for k, lines in self.sass_lines.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BuildResult:
        return cls(
            ok=d["ok"],
            arch=d["arch"],
            nvcc_version=d.get("nvcc_version"),
            resources=[KernelResources(**r) for r in d.get("resources", [])],
            messages=[CompilerMessage(**m) for m in d.get("messages", [])],
            sass_lines={
                k: {int(ln): v for ln, v in lines.items()} for k, lines in d.get("sass_lines", {}).items()
            },
            sass_available=d.get("sass_available", False),
            error=d.get("error"),
            seconds=d.get("seconds", 0.0),
            timed_out=d.get("timed_out", False),
            timeout_s=d.get("timeout_s"),
        )


# --------------------------------------------------------------------------------------------------
# ptxas and nvcc output


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


# --------------------------------------------------------------------------------------------------
# SASS per line


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


# --------------------------------------------------------------------------------------------------
# Build


_INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)')


def include_lines(lines: list[str]) -> list[tuple[int, str, bool]]:
    """``(0-based line, name, quoted)`` of each ``#include`` directive in ``lines``."""
    out = []
    for i, text in enumerate(lines):
        if "include" in text:
            m = _INCLUDE.match(text)
            if m:
                out.append((i, m.group(1) or m.group(2), m.group(1) is not None))
    return out


def _resolve_include(owner: Path, name: str, quoted: bool, search_dirs: list[Path]) -> Path | None:
    # "x.h" looks next to the including file first, then in the -I folders; <x.h> only in the -I folders
    # (the toolkit's and the system's folders are not the project's, so they are never followed).
    for d in ([owner.parent] if quoted else []) + search_dirs:
        p = d / name
        if p.is_file():
            return p.resolve()
    return None


def include_graph(
    path: Path, lines: list[str], search_dirs: list[Path] | None = None, depth: int = 8
) -> dict[Path, int]:
    """Every project header ``path`` includes (recursively, through ``"x.h"`` next to the including file or
    ``-I`` folders), mapped to the 0-based line of ``path``'s own ``#include`` that brings it in."""
    dirs = [Path(d) for d in (search_dirs or [])]
    found: dict[Path, int] = {}
    todo: list[tuple[Path, list[str], int | None]] = [(path, lines, None)]
    while todo and depth > 0:
        depth -= 1
        nxt: list[tuple[Path, list[str], int | None]] = []
        for owner, owner_lines, top in todo:
            for ln, name, quoted in include_lines(owner_lines):
                p = _resolve_include(owner, name, quoted, dirs)
                if p is None or p in found or p == path.resolve():
                    continue
                found[p] = ln if top is None else top
                try:
                    text = p.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                nxt.append((p, text.split("\n"), found[p]))
        todo = nxt
    return found


def local_includes(
    model: SourceModel, path: Path, depth: int = 4, search_dirs: list[Path] | None = None
) -> list[Path]:
    """The project headers ``path`` includes (``"x.h"`` next to it, and through ``search_dirs``: the ``-I``
    folders), recursively, so edits to them invalidate the cache."""
    return list(include_graph(path, model.lines or model.text.split("\n"), search_dirs, depth))


class Cancelled(Exception):
    """The caller's cancel event was set while a tool ran; the tool was killed."""


def run_tool(
    cmd: list[str],
    timeout_s: float,
    cwd: Path | None = None,
    cancel: threading.Event | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a tool, killing it on timeout (``subprocess.TimeoutExpired``) or when ``cancel`` is set."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            out, err = proc.communicate(timeout=0.1)
            return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            if cancel is not None and cancel.is_set():
                _kill(proc)
                raise Cancelled(cmd[0]) from None
            if time.monotonic() > deadline:
                _kill(proc)
                raise subprocess.TimeoutExpired(cmd, timeout_s) from None


def _kill(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.communicate()


def build(
    path: Path,
    text: str,
    model: SourceModel,
    arch: str = DEFAULT_ARCH,
    extra_flags: list[str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    use_cache: bool = True,
    cancel: threading.Event | None = None,
    search_dirs: list[Path] | None = None,
) -> BuildResult:
    """Compile ``text`` (the current content of ``path``) and analyse the result.

    ``search_dirs`` are the ``-I`` folders among ``extra_flags``: headers found there are part of the cache
    key. A header (``.cuh``) is compiled as a translation unit of its own that includes it, so its syntax
    and its templates' declarations are checked like a ``.cu`` file's.
    """
    flags = list(extra_flags or [])
    nvcc = toolchain.find_tool("nvcc")
    if nvcc is None:
        return BuildResult(ok=False, arch=arch, nvcc_version=None, error=toolchain.INSTALL_HINTS["nvcc"])
    nvcc_version = toolchain.tool_version("nvcc")
    nvdisasm = toolchain.find_tool("nvdisasm")
    includes = local_includes(model, path, search_dirs=search_dirs)
    inc_bytes = b"".join(p.read_bytes() for p in includes if p.is_file())
    # nvcc reads these from the environment, so they change the build as much as the flags do.
    env_flags = [os.environ.get(v, "") for v in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")]
    key = cache.digest(
        ANALYSIS_VERSION,
        nvcc,
        nvcc_version,
        arch,
        " ".join(flags),
        str(path.resolve().parent),
        path.name,
        text,
        inc_bytes,
        "sass" if nvdisasm else "nosass",
        *env_flags,
    )
    if use_cache:
        hit = cache.get("build", key)
        # A cached timeout stands for this limit or a lower one; a higher limit tries again.
        if hit is not None and not (hit.get("timed_out") and timeout_s > (hit.get("timeout_s") or 0.0)):
            res = BuildResult.from_dict(hit)
            res.cached = True
            return res
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernellsp-build-") as tmp:
        tmpdir = Path(tmp)
        # Compile the buffer text, not the file on disk: the editor may hold unsaved changes.
        src = tmpdir / path.name
        src.write_text(text, encoding="utf-8")
        unit = src
        if path.suffix not in (".cu", ".cpp", ".cc", ".cxx"):
            # A header: compile a unit that includes it (found next to it first, so the buffer's text wins).
            unit = tmpdir / "kernellsp_header_unit.cu"
            unit.write_text(f'#include "{path.name}"\n', encoding="utf-8")
        cubin = tmpdir / "out.cubin"
        cmd = [
            nvcc,
            f"-arch={arch}",
            "-cubin",
            "-lineinfo",
            "-Xptxas",
            "-v",
            "-I",
            str(path.resolve().parent),
            *flags,
            "-o",
            str(cubin),
            str(unit),
        ]
        try:
            proc = run_tool(cmd, timeout_s, cwd=tmpdir, cancel=cancel)
        except subprocess.TimeoutExpired:
            result = BuildResult(
                ok=False,
                arch=arch,
                nvcc_version=nvcc_version,
                timed_out=True,
                timeout_s=timeout_s,
                error=f"nvcc did not finish within {timeout_s:g} s on {path.name}, so no register, spill "
                "or occupancy data (source-level rules still ran); raise the build timeout "
                "(build_timeout_s in kernellsp.toml [settings], kernellsp.budgets.buildTimeoutS "
                "in the editor) or split the file",
                seconds=time.monotonic() - t0,
            )
            if use_cache:
                cache.put("build", key, result.to_dict())
            return result
        except OSError as exc:
            return BuildResult(
                ok=False, arch=arch, nvcc_version=nvcc_version, error=f"cannot run nvcc: {exc}"
            )
        output = proc.stdout + "\n" + proc.stderr
        messages = parse_compiler_output(proc.stderr + "\n" + proc.stdout, str(src))
        for m in messages:
            if m.file is not None and not os.path.isabs(m.file):
                m.file = str((tmpdir / m.file).resolve())
        if proc.returncode != 0 and not any(m.severity == "error" for m in messages):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            messages.append(CompilerMessage("error", "nvcc failed: " + " | ".join(tail), None))
        result = BuildResult(
            ok=proc.returncode == 0,
            arch=arch,
            nvcc_version=nvcc_version,
            resources=parse_ptxas(output),
            messages=messages,
        )
        if result.ok and nvdisasm and cubin.is_file():
            try:
                dis = run_tool([nvdisasm, "-c", "-g", str(cubin)], timeout_s, cancel=cancel)
                if dis.returncode == 0:
                    result.sass_lines = parse_nvdisasm(dis.stdout, str(src))
                    result.sass_available = True
            except (OSError, subprocess.TimeoutExpired):
                pass
    result.seconds = time.monotonic() - t0
    if use_cache and result.error is None:
        cache.put("build", key, result.to_dict())
    return result


def match_kernel(mangled: str, name: str) -> bool:
    """Does the mangled (or extern "C") symbol ``mangled`` belong to the source function ``name``?"""
    if mangled == name:
        return True
    if name not in mangled:  # cheap pre-check: files with thousands of kernels match K x R pairs
        return False
    # The Itanium ABI writes each name component as <length><identifier>; the length pins the match.
    return (
        mangled.startswith("_Z") and re.search(rf"(?<!\d){len(name)}{re.escape(name)}", mangled) is not None
    )
