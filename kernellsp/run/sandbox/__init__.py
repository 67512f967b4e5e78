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

from kernellsp.run.sandbox.host import (
    SECCOMP_EXIT,
    SETTINGS,
    TOOLS,
    HostFacts,
    SandboxSetting,
    SandboxStatus,
    SandboxUnavailable,
    exposed_prefixes,
    script_bytes,
    seccomp_filter,
)
from kernellsp.run.sandbox.probing import (
    ProbeHost,
    probe,
)
from kernellsp.run.sandbox.wrap import (
    Limits,
    Prepared,
    Sandbox,
    SandboxError,
    bwrap_args,
    parse_report,
)

__all__ = [
    "SECCOMP_EXIT",
    "SETTINGS",
    "TOOLS",
    "HostFacts",
    "Limits",
    "Prepared",
    "ProbeHost",
    "Sandbox",
    "SandboxError",
    "SandboxSetting",
    "SandboxStatus",
    "SandboxUnavailable",
    "bwrap_args",
    "exposed_prefixes",
    "parse_report",
    "probe",
    "script_bytes",
    "seccomp_filter",
]
