"""Probing a runner host once: whether bubblewrap works there, and the :class:`~kernellsp.run.sandbox.wrap.Sandbox`
or the reason it runs unconfined (:func:`probe`).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from typing import Protocol

from kernellsp.run.sandbox.host import _INSTALL_BWRAP, HostFacts, SandboxStatus, script_bytes, seccomp_filter
from kernellsp.run.sandbox.wrap import Sandbox


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
