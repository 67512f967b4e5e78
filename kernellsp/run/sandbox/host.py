"""The runner host: the sandbox's shared constants, the seccomp filter, what ``sandbox.sh facts`` reports
(:class:`HostFacts`) and the sandbox's status there (:class:`SandboxStatus`).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Literal

SandboxSetting = Literal["auto", "require", "off"]
SETTINGS: tuple[str, ...] = ("auto", "require", "off")

#: Programs that run the code under test themselves (and need /tmp and loopback sockets for it).
TOOLS = frozenset({"ncu", "compute-sanitizer", "nsys", "cuda-gdb"})

#: Exit status of a process the seccomp filter killed (bwrap reports 128 + SIGSYS).
SECCOMP_EXIT = 128 + 31

_REPORT = "__kernellsp_sandbox_report__"
_END = "__kernellsp_sandbox_end__"
_ERROR = "__kernellsp_sandbox_error__"

_INSTALL_BWRAP = "install bubblewrap there (Debian/Ubuntu: apt-get install bubblewrap; Fedora/RHEL: dnf install bubblewrap)"


def script_bytes() -> bytes:
    """The wrapper script that runs on the runner host."""
    return resources.files("kernellsp.data").joinpath("sandbox.sh").read_bytes()


# --------------------------------------------------------------------------------------------------
# seccomp


#: Per machine: (AUDIT_ARCH value, socket syscall number, io_uring_setup syscall number).
_ARCH = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425)}
_AF_BLOCKED = (2, 10, 17)  # AF_INET, AF_INET6, AF_PACKET
_RET_KILL_PROCESS = 0x80000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO_EPERM = 0x00050000 | 1


def seccomp_filter(machine: str) -> bytes | None:
    """A classic-BPF seccomp program for ``machine`` (``uname -m``), as ``bwrap --seccomp`` reads it.

    It kills the process on ``socket(AF_INET | AF_INET6 | AF_PACKET, ...)``, on any system call of
    another ABI (i386 or x32 calls would pass a filter keyed on this ABI's numbers) and makes
    ``io_uring_setup`` fail with EPERM. ``None`` for a machine it does not know.
    """
    arch = _ARCH.get(machine)
    if arch is None:
        return None
    audit, nr_socket, nr_io_uring = arch
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K

    def ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("<HBBI", code, jt, jf, k)

    prog = [
        ins(ld, 4),  # seccomp_data.arch
        ins(jeq, audit, 1, 0),
        ins(ret, _RET_KILL_PROCESS),
        ins(ld, 0),  # seccomp_data.nr
        ins(jge, 0x40000000, 0, 1),  # x32 ABI (x86_64): numbers with bit 30 set
        ins(ret, _RET_KILL_PROCESS),
        ins(jeq, nr_io_uring, 0, 1),
        ins(ret, _RET_ERRNO_EPERM),
        ins(jeq, nr_socket, 1, 0),
        ins(ret, _RET_ALLOW),
        ins(ld, 16),  # seccomp_data.args[0], low 32 bits: the address family
        ins(jeq, _AF_BLOCKED[0], 3, 0),
        ins(jeq, _AF_BLOCKED[1], 2, 0),
        ins(jeq, _AF_BLOCKED[2], 1, 0),
        ins(ret, _RET_ALLOW),
        ins(ret, _RET_KILL_PROCESS),
    ]
    return b"".join(prog)


# --------------------------------------------------------------------------------------------------
# What the runner host has


@dataclass
class HostFacts:
    """What ``sandbox.sh facts`` reports about the runner host."""

    machine: str = ""
    uid: int = -1
    homes: list[str] = field(default_factory=list)
    bwrap: str | None = None
    bwrap_version: str | None = None
    prlimit: str | None = None
    mem_bytes: int | None = None
    #: Online CPUs: a process may burn this many CPU seconds per second of wall time.
    cpus: int | None = None
    devices: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    find_printf: bool = False
    counters_admin_only: bool = False
    #: Toolchain locations (PATH and library directories, CUDA_HOME, the CUDA tools), resolved.
    toolchain: list[str] = field(default_factory=list)

    def exposed(self, extra: Sequence[str] = ()) -> list[str]:
        """Install prefixes of the toolchain that lie in a hidden home: bound read-only into the sandbox."""
        out: list[str] = []
        # /tmp is replaced by the canary tree too: a checkout or a venv under it (CI clones, pytest's tmp)
        # is exposed the same way as one in a home.
        for path in [*self.toolchain, *extra]:
            for p in exposed_prefixes(path, [*self.homes, "/tmp"]):
                if p not in out:
                    out.append(p)
        # A prefix inside another one is covered by it.
        return sorted(p for p in out if not any(q != p and _under_any(p, [q]) for q in out))

    @classmethod
    def parse(cls, text: str) -> HostFacts:
        f = cls()
        homes: list[str] = []
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if not sep:
                continue
            value = value.strip()
            if key == "home" and value:
                homes.append(value)
            else:
                f._read_field(key, value)
        if "/root" in f.dirs:
            homes.append("/root")
        # The root directory cannot be hidden; a home under it is (its path, canonical, from the script).
        seen: list[str] = []
        for h in homes:
            h = os.path.normpath(h)
            if h.startswith("/") and h != "/" and h not in seen:
                seen.append(h)
        f.homes = seen
        return f

    def _read_field(self, key: str, value: str) -> None:
        """One ``key=value`` line of the report (other than ``home``); unknown or malformed lines are skipped."""
        if key == "machine":
            self.machine = value
        elif key == "uid" and value.isdigit():
            self.uid = int(value)
        elif key == "bwrap":
            self.bwrap = value or None
        elif key == "bwrap_version":
            self.bwrap_version = value or None
        elif key == "prlimit":
            self.prlimit = value or None
        elif key == "mem_kb" and value.isdigit():
            self.mem_bytes = int(value) * 1024
        elif key == "cpus" and value.isdigit():
            self.cpus = int(value)
        elif key == "find_printf":
            self.find_printf = value == "1"
        elif key == "counters_admin_only":
            self.counters_admin_only = value == "1"
        else:
            self._read_listed(key, value)

    def _read_listed(self, key: str, value: str) -> None:
        """A line that adds to one of the lists: a device, a directory, a secret, a toolchain location."""
        if key == "device" and value.startswith("/dev/nvidia"):
            self.devices.append(value)
        elif key == "dir":
            self.dirs.append(value)
        elif key == "secret":
            self.secrets.append(value)
        elif key in ("pathdir", "libdir", "tool") and value.startswith("/"):
            self.toolchain.append(value)


def _under_any(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


#: Parts of a home that are never bound into the sandbox, even when a tool seems to live there.
_NEVER = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config",
    ".docker",
    ".kube",
    ".netrc",
    ".password-store",
    ".git-credentials",
    ".mozilla",
    ".local/share",
    ".local/state",
    ".cache",
    ".pki",
)


def exposed_prefixes(path: str, homes: Sequence[str]) -> list[str]:
    """What to bind read-only so that the tool or directory ``path`` (resolved) works inside the sandbox.

    Nothing when ``path`` is not in a hidden home. Otherwise its install prefix: ``~/miniconda3`` for
    ``~/miniconda3/bin/nvcc``, ``~/.pyenv/versions/3.11.7`` for its python; only ``bin``/``lib`` for a
    prefix that is the home itself or ``~/.local`` (whose ``share`` holds keyrings); never a
    credentials directory (``~/.ssh``, ``~/.config``, ...).
    """
    home = next((h for h in homes if _under_any(path, [h]) and path != h), None)
    if home is None:
        return []
    rel = os.path.relpath(path, home)
    if any(rel == n or rel.startswith(n + "/") for n in _NEVER):
        return []
    d = (
        os.path.dirname(path)
        if os.path.basename(os.path.dirname(path)) in ("bin", "sbin", "lib", "lib64")
        else path
    )
    if os.path.basename(d) in ("bin", "sbin", "lib", "lib64"):
        d = os.path.dirname(d)
    if d in (home, f"{home}/.local"):
        return [p for p in (f"{d}/bin", f"{d}/lib") if _under_any(path, [p])] or (
            [path] if path != home else []
        )
    return [d]


# --------------------------------------------------------------------------------------------------
# Status


@dataclass
class SandboxStatus:
    """How the code under test runs on one runner host, for doctor, the evidence and messages."""

    mode: Literal["bwrap", "unconfined", "off"]
    host: str
    reason: str = ""
    tool: str = ""
    seccomp: bool = False
    canary: bool = False
    limits: bool = False
    as_root: bool = False

    @property
    def confined(self) -> bool:
        return self.mode == "bwrap"

    def describe(self) -> str:
        """One line: what confines the code under test on this host, or that nothing does and why."""
        if self.mode == "off":
            return (
                f"UNCONFINED on {self.host}: the sandbox is turned off (KERNELLSP_SANDBOX=off); nvcc, the "
                "harness, compute-sanitizer and ncu run with the user's network, home and file system"
            )
        if self.mode == "unconfined":
            return (
                f"UNCONFINED on {self.host}: {self.reason}; nvcc, the harness, compute-sanitizer and ncu run "
                "with the user's network, home and file system (only the environment is cleaned)"
            )
        parts = [
            "no network",
            "read-only file system outside the scratch directory",
            "home and /tmp replaced",
        ]
        parts.append(
            "internet sockets killed (seccomp)"
            if self.seccomp
            else "no seccomp filter (sockets only refused)"
        )
        parts.append("decoy reads and writes named" if self.canary else "decoy reads not detectable here")
        parts.append("CPU/memory/file limits" if self.limits else "no resource limits (prlimit missing)")
        if self.as_root:
            parts.append(
                "as root without capabilities: root-owned files outside the masked ones stay readable"
            )
        return f"sandboxed on {self.host} with {self.tool}: " + ", ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "confined": self.confined, "summary": self.describe()}


class SandboxUnavailable(RuntimeError):
    """``sandbox = require`` and the runner host cannot sandbox."""
