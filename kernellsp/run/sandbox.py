"""The sandbox for code under test: nvcc builds, the harness, compute-sanitizer and ncu runs.

Candidates come from an LLM or from anyone (``verify --candidate``), a host-launcher entry is host
code, and the language server profiles whatever file is opened. So every command a runner starts
for a file runs inside bubblewrap (``bwrap``, the unprivileged sandbox of Flatpak, packaged by every
distribution) on the runner host, local or over ssh:

* no network: a new network namespace holds only loopback; a seccomp filter kills a process that
  creates an internet socket (``AF_INET``/``AF_INET6``/``AF_PACKET``), so the attempt is seen, not
  just refused (exit 159 = 128 + SIGSYS); ``io_uring`` (which can open sockets past seccomp) is off;
* writes only in the scratch directory: the root file system is bound read-only, ``/run``,
  ``/var/tmp`` and ``/home`` are empty read-only tmpfs, every capability is dropped (root too);
* no home, no keys: the user's home directories (``$HOME``, the passwd entry's, ``/root``) and
  ``/tmp`` are replaced by a *canary* tree that kernellsp creates per run, with decoy keys in it
  (``~/.ssh/id_rsa`` ...); a decoy read, or anything created, changed or deleted in it, is a named
  violation after the run (``kernellsp/data/sandbox.sh`` compares inode, ctime and atime to the
  nanosecond: resetting a file's atime moves its ctime). Well-known root-only secrets
  (``/etc/shadow``, ``/etc/ssh``, ...) are masked for root, who keeps file ownership;
* no secrets in the environment (the runners pass a short allow-list) and no view of other
  processes: a new PID namespace and ``/proc``, so ``/proc/<parent>/environ`` is out of reach;
* resource limits (``prlimit``): CPU seconds, data size, file size, open files, no core dumps; the
  wall-clock timeout kills the whole PID namespace (``--die-with-parent``).

The GPU stays usable: ``/dev/nvidia*`` are bound into the minimal ``/dev``, ``/sys`` and the driver's
libraries are visible read-only. Tool runs (``ncu``, ``compute-sanitizer``) get a private writable
``/tmp`` (they keep lock files and IPC there) and no seccomp filter (they talk to their target over
loopback sockets); the network namespace still confines them.

Whether bwrap works is found out at run time, once per runner host (:func:`probe`): not installed,
unprivileged user namespaces disabled, a seccomp-less kernel, a container that forbids mounts.
Where it cannot run, the code runs **unconfined** and :class:`SandboxStatus` says so — in
``kernellsp doctor``, in every verdict's evidence (``environment.sandbox``) and in the verify
progress; the ``sandbox`` setting ``require`` refuses to run anything unconfined. docs/sandbox.md
has the design, what is detected and what is only blocked.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Literal, Protocol

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


# --------------------------------------------------------------------------------------------------
# Wrapping one command


@dataclass
class Prepared:
    """A wrapped command and what is needed to read its report."""

    argv: list[str]
    nonce: str
    homes: list[str]
    tool_mode: bool
    seccomp: bool


@dataclass
class Limits:
    """Resource limits of one sandboxed command."""

    cpu_s: int
    data_bytes: int | None
    file_bytes: int = 16 << 30
    open_files: int = 4096


@dataclass
class Sandbox:
    """Wraps commands for one runner host (paths are on that host)."""

    facts: HostFacts
    script: str
    filter_path: str | None
    canary_root: str
    status: SandboxStatus
    #: Resolves a path on the runner host (symlinks followed); only a local runner can.
    resolve: Callable[[str], str] | None = None

    def wrap(self, argv: list[str], workdir: str, timeout_s: float, seccomp: bool | None = None) -> Prepared:
        """``argv`` as it runs in the sandbox, with ``workdir`` its only writable directory."""
        tool_mode = os.path.basename(argv[0]) in TOOLS if argv else False
        use_seccomp = (self.filter_path is not None and not tool_mode) if seccomp is None else seccomp
        nonce = uuid.uuid4().hex
        canary = f"{self.canary_root.rstrip('/')}/kernellsp-canary-{nonce[:12]}"
        homes = self.facts.homes
        # The program as named (a venv's bin/python is a symlink whose directory must be visible) and as
        # resolved (the interpreter it points to).
        extra: list[str] = []
        if argv and argv[0].startswith("/"):
            extra.append(os.path.normpath(argv[0]))
            if self.resolve is not None:
                extra.append(self.resolve(argv[0]))
        exposed = self.facts.exposed(extra)
        mkdirs = _mount_points([*homes, *exposed, workdir], homes, tool_mode)
        limits = Limits(cpu_s=self._cpu_limit(timeout_s), data_bytes=self._data_limit())
        cmd = [
            "sh",
            self.script,
            "run",
            nonce,
            canary,
            self.filter_path if use_seccomp and self.filter_path else "-",
            str(len(homes)),
            *mkdirs,
            "--",
            *self._prlimit(limits),
            *bwrap_args(self.facts, workdir, f"{canary}/tree", tool_mode, use_seccomp, exposed),
            *argv,
        ]
        return Prepared(cmd, nonce, list(homes), tool_mode, use_seccomp)

    def _cpu_limit(self, timeout_s: float) -> int:
        # RLIMIT_CPU counts every thread of the process: compute-sanitizer's racecheck burns several cores
        # in the program under test, so a limit of twice the wall timeout killed honest kernels (SIGXCPU)
        # on a 16-core host. The wall timeout bounds the run; this only stops a runaway past it.
        return int(timeout_s * max(2, self.facts.cpus or 2)) + 60

    def _data_limit(self) -> int | None:
        mem = self.facts.mem_bytes
        # Three quarters of the host's memory: a runaway allocation fails in the program, not the host.
        return None if mem is None else max(4 << 30, mem * 3 // 4)

    def _prlimit(self, limits: Limits) -> list[str]:
        if not self.facts.prlimit:
            return []
        out = [
            self.facts.prlimit,
            f"--cpu={limits.cpu_s}",
            f"--fsize={limits.file_bytes}",
            f"--nofile={limits.open_files}",
            "--core=0",
        ]
        if limits.data_bytes is not None:
            out.append(f"--data={limits.data_bytes}")
        return [*out, "--"]

    def finish(self, prepared: Prepared, returncode: int, stderr: str) -> tuple[str, list[str]]:
        """The program's own stderr and the violations its run left (named for the user)."""
        clean, lines, error = parse_report(stderr, prepared.nonce)
        if error is not None:
            raise SandboxError(f"the sandbox on {self.status.host} could not start: {error}")
        # A directory whose entries were created or deleted is "changed" too; name the entries only.
        paths = [ln.partition(" ")[2] for ln in lines]
        lines = [
            ln
            for ln, p in zip(lines, paths, strict=True)
            if not (ln.startswith("changed ") and any(q.startswith(p + "/") for q in paths))
        ]
        violations = [_describe(line, prepared.homes) for line in lines]
        if prepared.seccomp and returncode == SECCOMP_EXIT:
            violations.insert(
                0,
                "opened an internet socket (AF_INET/AF_INET6/AF_PACKET): killed by the sandbox's "
                "seccomp filter",
            )
        return clean, violations


class SandboxError(RuntimeError):
    """The sandbox wrapper itself failed (not the program in it)."""


def _mount_points(targets: list[str], homes: list[str], tool_mode: bool) -> list[str]:
    """Directories to create in the canary tree so that bwrap's mount points there are not "writes".

    (A file bound there gets its directory; bwrap creates the file itself, which the report ignores.)
    """
    out: list[str] = []
    for t in targets:
        t = os.path.normpath(t)
        if not tool_mode and _under_any(t, ["/tmp"]) and t != "/tmp":
            out.append("tmp/" + os.path.relpath(t, "/tmp"))
        for i, h in enumerate(homes):
            if _under_any(t, [h]) and t != h:
                out.append(f"home{i}/" + os.path.relpath(t, h))
    return out


def bwrap_args(
    facts: HostFacts, workdir: str, tree: str, tool_mode: bool, seccomp: bool, exposed: Sequence[str] = ()
) -> list[str]:
    """The bubblewrap command line for ``workdir`` with the canary ``tree`` (docs/sandbox.md, "Mounts")."""
    assert facts.bwrap is not None
    a = [
        facts.bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    for d in facts.devices:
        a += ["--dev-bind", d, d]
    hidden = [d for d in ("/home", "/run", "/var/tmp") if d in facts.dirs]
    for d in hidden:
        a += ["--tmpfs", d]
    # /tmp first: a home (or the scratch directory) may lie under it and is bound over it next.
    a += ["--tmpfs", "/tmp"] if tool_mode else ["--bind", f"{tree}/tmp", "/tmp"]
    for i, home in enumerate(facts.homes):
        a += ["--bind", f"{tree}/home{i}", home]
    for p in exposed:
        a += ["--ro-bind", p, p]
    for s in facts.secrets:
        if _under_any(s, facts.homes) or _under_any(s, hidden):
            continue
        # A directory gets an empty tmpfs, a file /dev/null; both read-only after the remounts below.
        a += ["--tmpfs", s] if s in _SECRET_DIRS else ["--ro-bind", "/dev/null", s]
    a += ["--bind", workdir, workdir]
    for d in hidden:
        a += ["--remount-ro", d]
    for s in facts.secrets:
        if s in _SECRET_DIRS and not _under_any(s, facts.homes) and not _under_any(s, hidden):
            a += ["--remount-ro", s]
    a += ["--chdir", workdir]
    if seccomp:
        a += ["--seccomp", "9"]
    return [*a, "--"]


_SECRET_DIRS = frozenset(
    {
        "/etc/ssh",
        "/etc/sudoers.d",
        "/var/lib/docker",
        "/var/lib/containers",
        "/var/lib/kubelet",
        "/var/lib/sss",
    }
)


def parse_report(stderr: str, nonce: str) -> tuple[str, list[str], str | None]:
    """Split the wrapper's report off ``stderr``: (the program's stderr, report lines, wrapper error)."""
    err = re.search(rf"^{_ERROR} {nonce} (.*)$", stderr, re.M)
    if err:
        return stderr[: err.start()], [], err.group(1)
    m = re.search(rf"\n{_REPORT} {nonce}\n(.*?)^{_END} {nonce}\n?", stderr, re.M | re.S)
    if not m:
        return stderr, [], None
    lines = [ln for ln in m.group(1).splitlines() if ln.strip()]
    return stderr[: m.start()] + stderr[m.end() :], lines, None


def _describe(line: str, homes: list[str]) -> str:
    """``read home0/.ssh/id_rsa`` → ``read /root/.ssh/id_rsa (a decoy: ...)``, in the sandboxed program's terms."""
    verb, _, rel = line.partition(" ")
    head, _, rest = rel.partition("/")
    if head == "tmp":
        where = "/tmp" + ("/" + rest if rest else "")
    elif head.startswith("home") and head[4:].isdigit() and int(head[4:]) < len(homes):
        where = homes[int(head[4:])] + ("/" + rest if rest else "")
    else:
        where = rel
    what = {
        "read": "read",
        "listed": "listed",
        "created": "wrote",
        "changed": "modified",
        "deleted": "deleted",
    }.get(verb, verb)
    note = " (a decoy key: the real home is hidden)" if verb == "read" else " (outside its scratch directory)"
    return f"{what} {where}{note}"


# --------------------------------------------------------------------------------------------------
# Probing a host


class ProbeHost(Protocol):
    """What :func:`probe` needs from a runner."""

    name: str

    def _sandbox_install(self, files: dict[str, bytes]) -> dict[str, str]: ...
    def _sandbox_facts(self, script: str) -> str: ...
    def _sandbox_canary_root(self) -> str: ...
    def _sandbox_resolver(self) -> Callable[[str], str] | None: ...
    def _sandbox_trial(self, argv: list[str], workdir: str, timeout_s: float) -> tuple[int, str, str]: ...
    def new_workdir(self) -> str: ...
    def cleanup(self, workdir: str) -> None: ...


def probe(host: ProbeHost, setting: str) -> tuple[Sandbox | None, SandboxStatus]:
    """Find out whether bwrap confines code on ``host``: run a trial in the full sandbox, then without seccomp.

    The trial reads a decoy key through the sandbox, so it also shows whether such reads are detected.
    """
    if setting == "off":
        return None, SandboxStatus("off", host.name)
    script = script_bytes()
    digest = hashlib.sha256(script).hexdigest()[:12]
    try:
        paths = host._sandbox_install({f"sandbox-{digest}.sh": script})
        facts = HostFacts.parse(host._sandbox_facts(paths[f"sandbox-{digest}.sh"]))
    except (OSError, RuntimeError) as exc:
        return None, SandboxStatus("unconfined", host.name, f"the sandbox's host check failed ({exc})")
    if not facts.bwrap:
        return None, SandboxStatus(
            "unconfined", host.name, f"bubblewrap (bwrap) is not installed ({_INSTALL_BWRAP})"
        )
    if not facts.find_printf:
        return None, SandboxStatus(
            "unconfined",
            host.name,
            "the sandbox needs GNU find (findutils) to check its canary files; install findutils",
        )
    filt = seccomp_filter(facts.machine)
    filter_path = None
    if filt is not None:
        name = f"seccomp-{facts.machine}-{hashlib.sha256(filt).hexdigest()[:12]}.bpf"
        with contextlib.suppress(OSError, RuntimeError):
            filter_path = host._sandbox_install({name: filt})[name]
    sb = Sandbox(
        facts,
        paths[f"sandbox-{digest}.sh"],
        filter_path,
        host._sandbox_canary_root(),
        SandboxStatus(
            "bwrap",
            host.name,
            tool=facts.bwrap_version or "bwrap",
            limits=bool(facts.prlimit),
            as_root=facts.uid == 0,
        ),
        host._sandbox_resolver(),
    )
    decoy = f"{facts.homes[0]}/.ssh/id_rsa" if facts.homes else "/dev/null"
    failure = ""
    for with_seccomp in [True, False] if filter_path else [False]:
        try:
            wd = host.new_workdir()
        except (OSError, RuntimeError) as exc:
            return None, SandboxStatus(
                "unconfined", host.name, f"no scratch directory for the sandbox's trial run ({exc})"
            )
        p = sb.wrap(["/bin/sh", "-c", 'cat "$1" >/dev/null', "sh", decoy], wd, 30, seccomp=with_seccomp)
        try:
            rc, _out, err = host._sandbox_trial(p.argv, wd, 30)
            clean, violations = sb.finish(p, rc, err)
        except (OSError, RuntimeError) as exc:
            failure = str(exc)
            continue
        finally:
            host.cleanup(wd)
        if rc != 0:
            failure = _last_line(clean) or f"exit {rc}"
            continue
        sb.status.seccomp = with_seccomp
        sb.status.canary = any(v.startswith(f"read {decoy}") for v in violations)
        if not with_seccomp:
            sb.filter_path = None
        return sb, sb.status
    return None, SandboxStatus(
        "unconfined", host.name, f"bwrap cannot start a sandbox here: {failure}{_hint(failure)}"
    )


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _hint(failure: str) -> str:
    low = failure.lower()
    if "user namespace" in low or "uid map" in low or "no permissions to creat" in low:
        return (
            " (unprivileged user namespaces are off: sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
            "24.04 kernel.apparmor_restrict_unprivileged_userns=0; in a container, allow user namespaces)"
        )
    if "mount" in low or "operation not permitted" in low:
        return " (this container or kernel forbids the mounts bwrap needs)"
    return ""
