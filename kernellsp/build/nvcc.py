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
from kernellsp.build.ptxas import CompilerMessage, KernelResources, parse_compiler_output, parse_ptxas
from kernellsp.build.sass import parse_nvdisasm
from kernellsp.source.model import SourceModel

ANALYSIS_VERSION = "build-4"
DEFAULT_ARCH = "sm_90"
DEFAULT_TIMEOUT_S = 120.0


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
