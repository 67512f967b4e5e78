"""Wrapping one command in bubblewrap (:class:`Sandbox`, :func:`bwrap_args`) and reading the wrapper's report
after it ran (:func:`parse_report`).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kernellsp.run.sandbox.host import (
    _END,
    _ERROR,
    _REPORT,
    SECCOMP_EXIT,
    TOOLS,
    HostFacts,
    SandboxStatus,
    _under_any,
)


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
