"""Where the CUDA tools are and which versions they are.

kernellsp looks for each tool on ``PATH``, then under ``$CUDA_HOME/bin`` (or ``$CUDA_PATH``), then
``/usr/local/cuda/bin``; ``nvdisasm`` is also found inside NVIDIA's ``nvidia-cuda-nvdisasm`` wheel.
Missing tools are not errors here: callers degrade (no nvcc → source-level rules only) and say so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path


class ToolMissing(RuntimeError):
    """A required tool is not installed; the message names the tool and how to get it."""


INSTALL_HINTS = {
    "nvcc": "install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads) and put its bin/ on PATH, "
    "or set CUDA_HOME",
    "ptxas": "ptxas ships with nvcc in the CUDA toolkit; put the toolkit's bin/ on PATH",
    "nvdisasm": "pip install nvidia-cuda-nvdisasm (or the CUDA toolkit) for per-line SASS findings",
    "ncu": "install Nsight Compute (ships with the CUDA toolkit) and put ncu on PATH",
    "compute-sanitizer": "compute-sanitizer ships with the CUDA toolkit; put its bin/ on PATH",
    "nvidia-smi": "install the NVIDIA driver",
}


def _candidates(name: str) -> list[Path]:
    out: list[Path] = []
    found = shutil.which(name)
    if found:
        out.append(Path(found))
    for env in ("CUDA_HOME", "CUDA_PATH"):
        base = os.environ.get(env)
        if base:
            out.append(Path(base) / "bin" / name)
    out.append(Path("/usr/local/cuda/bin") / name)
    if name == "ncu":
        out.extend(sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu"), reverse=True))
        out.extend(sorted(Path("/usr/local/cuda").glob("nsight-compute*/ncu")))
    if name == "compute-sanitizer":
        out.append(Path("/usr/local/cuda/compute-sanitizer/compute-sanitizer"))
    if name == "nvdisasm":
        try:
            import nvidia

            for base in getattr(nvidia, "__path__", []):
                out.extend(Path(base).glob("cu*/bin/nvdisasm"))
        except ImportError:
            pass
    return out


@cache
def find_tool(name: str) -> str | None:
    """Absolute path of ``name`` or ``None``. Cached per process; :func:`reset` clears it."""
    for c in _candidates(name):
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


def require(name: str) -> str:
    """Path of ``name``, or :class:`ToolMissing` with the fix."""
    p = find_tool(name)
    if p is None:
        raise ToolMissing(f"{name} not found: {INSTALL_HINTS.get(name, 'install it and put it on PATH')}")
    return p


def reset() -> None:
    """Forget cached tool locations and versions (tests change PATH)."""
    find_tool.cache_clear()
    tool_version.cache_clear()
    nvcc_gpu_codes.cache_clear()


@cache
def tool_version(name: str) -> str | None:
    """A short version string (``13.0.88``), or ``None`` when the tool is missing or silent."""
    path = find_tool(name)
    if path is None:
        return None
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(proc.stdout + proc.stderr)


def parse_version(text: str) -> str | None:
    """The version in a tool's ``--version`` output (nvcc's ``V13.0.88``, ncu's ``Version 2025.3.1.0``), else its
    last line, or ``None`` for no output."""
    m = re.search(r"release\s+([\d.]+),\s*V([\d.]+)", text)
    if m:
        return m.group(2)
    m = re.search(r"Version\s+([\d.]+)", text) or re.search(r"(\d+\.\d+(?:\.\d+)+)", text)
    return m.group(1) if m else text.strip().splitlines()[-1] if text.strip() else None


_ARCH_RE = re.compile(r"^sm_(\d{2,3})([af]?)$")


@cache
def nvcc_gpu_codes() -> frozenset[str] | None:
    """The ``sm_XX`` targets the installed nvcc builds (``nvcc --list-gpu-code``), or ``None`` without nvcc."""
    path = find_tool("nvcc")
    if path is None:
        return None
    try:
        proc = subprocess.run([path, "--list-gpu-code"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    codes = frozenset(c for c in proc.stdout.split() if _ARCH_RE.match(c))
    return codes or None


def normalise_arch(arch: str) -> str:
    """``90``, ``compute_90``, ``SM_90`` → ``sm_90`` (the spelling nvcc's ``-arch`` and kernellsp use)."""
    a = arch.strip().lower().replace("compute_", "sm_")
    return f"sm_{a}" if a.isdigit() else a


def arch_problem(arch: str) -> str | None:
    """Why nvcc cannot build for ``arch``, or ``None`` when it can.

    The installed nvcc is the judge (nvcc 13 dropped sm_70 and builds sm_103; the next one will differ):
    ``sm_XXa``/``sm_XXf`` are accepted where nvcc builds ``sm_XX``. Without nvcc only the spelling is checked.
    """
    a = normalise_arch(arch)
    m = _ARCH_RE.match(a)
    if m is None:
        return f"{arch!r} is not a GPU architecture (write it as sm_90, sm_100a, ...)"
    codes = nvcc_gpu_codes()
    if codes is None or f"sm_{m.group(1)}" in codes:
        return None
    listed = ", ".join(sorted(codes, key=lambda c: int(_ARCH_RE.match(c).group(1))))  # type: ignore[union-attr]
    return f"nvcc {tool_version('nvcc') or ''} does not build {a} (it builds {listed})".replace(
        "nvcc  ", "nvcc "
    )


@cache
def _demangled(name: str) -> str | None:
    tool = find_tool("cu++filt") or find_tool("c++filt")
    if tool is None or not name.startswith("_Z"):
        return None
    try:
        proc = subprocess.run([tool, name], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and out and out != name else None


def _skip_name(s: str, j: int) -> int:
    """Index after the length-prefixed identifier at ``j`` (``4axpy``), or ``j`` when there is none."""
    k = j
    while k < len(s) and s[k].isdigit():
        k += 1
    return k + int(s[j:k]) if k > j else j


def _template_args(mangled: str) -> str | None:
    """The mangled template arguments of the function name (``_Z4axpyIdEv...`` → ``d``, also in a namespace:
    ``_ZN2ns4axpyIdEEv...``), or ``None`` for a function that is not a template instantiation."""
    if not mangled.startswith("_Z"):
        return None
    j = 2
    if mangled.startswith("N", j):
        j += 1
        while j < len(mangled) and mangled[j].isdigit():
            j = _skip_name(mangled, j)
    else:
        j = _skip_name(mangled, j)
    if j >= len(mangled) or mangled[j] != "I":
        return None
    depth, i = 0, j
    while i < len(mangled):
        c = mangled[i]
        if c.isdigit():
            i = _skip_name(mangled, i)
            continue
        if c == "L":  # a literal (Li256E): skip to its end, its digits are not a name's length
            i = (mangled.find("E", i) + 1) or len(mangled)
            continue
        if c == "I":
            depth += 1
        elif c == "E":
            depth -= 1
            if depth == 0:
                return mangled[j + 1 : i]
        i += 1
    return None


def instantiation_uses_double(mangled: str) -> bool:
    """Is ``mangled`` a template instantiation with ``double`` among its template arguments (``axpy<double>``)?

    The instantiation's fp64 instructions are then intended, not a float kernel's promoted literal. cu++filt or
    c++filt demangles when one is installed; otherwise the mangled arguments are read (``d`` is double).
    """
    text = _demangled(mangled)
    if text is not None:
        paren = text.find("(")
        head = text[:paren] if paren >= 0 else text
        lt = head.find("<")
        return lt >= 0 and re.search(r"\bdouble\b", head[lt:]) is not None
    args = _template_args(mangled)
    j = 0
    while args is not None and j < len(args):
        c = args[j]
        if c.isdigit():  # a class name: its letters are not type codes
            j = _skip_name(args, j)
        elif c == "L":  # a literal value (Li256E): neither are its letters
            j = (args.find("E", j) + 1) or len(args)
        elif c == "d":
            return True
        else:
            j += 1
    return False


@dataclass
class GpuInfo:
    """What nvidia-smi says about GPU 0."""

    name: str
    driver: str
    memory_mib: int | None = None


def query_gpu() -> GpuInfo | str:
    """GPU 0 as nvidia-smi sees it, or a one-line reason there is none."""
    smi = find_tool("nvidia-smi")
    if smi is None:
        return "no NVIDIA driver (nvidia-smi not found)"
    try:
        proc = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi failed: {exc}"
    if proc.returncode != 0 or not proc.stdout.strip():
        return f"nvidia-smi found no GPU: {(proc.stderr or proc.stdout).strip()[:200]}"
    parts = [p.strip() for p in proc.stdout.strip().splitlines()[0].split(",")]
    mem = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
    return GpuInfo(name=parts[0], driver=parts[1] if len(parts) > 1 else "?", memory_mib=mem)
