"""The ssh runner: a remote GPU host reached over one shared ssh master connection (``ControlMaster``).

Files go up with ``tar | ssh tar -x``, commands run in a remote scratch directory under the host's
sandbox and GPU lock, and results come back the same way (:class:`SshRunner`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kernellsp.build.nvcc import Cancelled
from kernellsp.run.gpu_lock import _LOCK_BUSY, _LOCK_NAME, GpuHolder, GpuLock, parse_holders
from kernellsp.run.process import _ENV_KEEP, _RC_MARK, _SECRET, RunnerError, RunResult, _killpg
from kernellsp.run.runner import _NOT_SHOWN, HostRunner, sandbox_setting

#: A wait over ssh asks the host this often (each ask is one round trip on the shared connection).
_SSH_LOCK_POLL_S = 2.0


#: A Unix socket path holds at most 107 bytes on Linux (103 on macOS); ssh appends ".XXXXXXXXXXXXXXXX"
#: to the ControlPath while it creates the socket.
_MAX_CONTROL_DIR = 103 - len("/kernellsp-ssh-XXXXXXXX/cm") - 17


def _socket_dir() -> str:
    """Where the ssh control socket's directory goes: the temp dir, or /tmp when that path is too long for a socket
    (macOS's per-user TMPDIR under /var/folders, a deep TMPDIR in CI)."""
    tmp = tempfile.gettempdir()
    return tmp if len(tmp) <= _MAX_CONTROL_DIR or not os.path.isdir("/tmp") else "/tmp"


class SshRunner(HostRunner):
    """A remote GPU host reached with ssh (``user@host`` or an ssh config alias; ``host:port`` allowed)."""

    #: The host's GPU lock, the one a local runner there takes too (:func:`gpu_lock_dir`).
    gpu_lock_name: str = _LOCK_NAME

    def __init__(
        self,
        target: str,
        ssh: str = "ssh",
        connect_timeout_s: int = 10,
        extra_options: list[str] | None = None,
        sandbox: str | None = None,
    ) -> None:
        if not target or target.startswith("-") or any(c.isspace() for c in target):
            raise RunnerError("bad_host", f"--gpu-host {target!r}: expected user@host or an ssh alias")
        self.target, self.port = self._split_port(target)
        self.name = target
        self.ssh = ssh
        self.connect_timeout_s = connect_timeout_s
        self.extra_options = list(extra_options or [])
        self._control_dir = tempfile.mkdtemp(prefix="kernellsp-ssh-", dir=_socket_dir())
        self._control = os.path.join(self._control_dir, "cm")
        self._which_cache: dict[str, str | None] = {}
        self._remote_root: str | None = None
        self.sandbox = sandbox_setting(sandbox)

    @staticmethod
    def _split_port(target: str) -> tuple[str, str | None]:
        """``user@host:2222`` → (``user@host``, ``2222``); ssh aliases never contain a colon."""
        m = re.fullmatch(r"(.+):(\d+)", target)
        return (m.group(1), m.group(2)) if m else (target, None)

    def _base(self) -> list[str]:
        opts = [
            self.ssh,
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={self.connect_timeout_s}",
            "-o",
            "ControlMaster=auto",
            "-o",
            f"ControlPath={self._control}",
            "-o",
            "ControlPersist=120",
            "-o",
            "ServerAliveInterval=15",
            *self.extra_options,
        ]
        if self.port:
            opts += ["-p", self.port]
        return [*opts, self.target]

    def _ssh(
        self,
        remote_cmd: str,
        timeout_s: float,
        stdin: bytes | None = None,
        cancel: threading.Event | None = None,
        on_abort: Callable[[], object] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``remote_cmd``; on cancel or timeout ``on_abort`` runs first (it kills the remote job: killing
        the local ssh alone leaves it running, and a multiplexed session keeps our pipes open until it ends)."""
        argv = [*self._base(), remote_cmd]
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise RunnerError(
                "no_ssh", f"cannot run {self.ssh}: {exc.strerror or exc} (install an ssh client)"
            ) from None
        deadline = time.monotonic() + timeout_s
        pending = stdin
        while True:
            try:
                out, err = proc.communicate(input=pending, timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pending = None
                cancelled = cancel is not None and cancel.is_set()
                if cancelled or time.monotonic() > deadline:
                    if on_abort is not None:
                        with contextlib.suppress(RunnerError, Cancelled, OSError):
                            on_abort()
                    _killpg(proc)  # type: ignore[arg-type]
                    if cancelled:
                        raise Cancelled("ssh") from None
                    raise RunnerError(
                        "timeout",
                        f"command on {self.name} did not finish within {timeout_s:.0f} s and was killed",
                    ) from None
        res = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if res.returncode == 255:
            msg = err.decode(errors="replace").strip()
            raise RunnerError(
                "unreachable",
                f"cannot reach {self.name} over ssh: {msg.splitlines()[-1] if msg else 'exit 255'} "
                "(check the host name, that sshd runs there, and that key-based login works: "
                f"`{self._manual_ssh()} true`)",
            )
        return res

    def _manual_ssh(self) -> str:
        """The plain ssh command that reaches the host (for messages: ``ssh -p 2222 user@host``)."""
        return f"ssh {'-p ' + self.port + ' ' if self.port else ''}{self.target}"

    def root(self) -> str:
        if self._remote_root is None:
            res = self._ssh('d="${TMPDIR:-/tmp}/kernellsp-$(id -u)"; mkdir -p "$d" && cd "$d" && pwd', 60)
            if res.returncode != 0:
                raise RunnerError(
                    "remote",
                    f"cannot create a scratch directory on {self.name}: "
                    f"{res.stderr.decode(errors='replace').strip()}",
                )
            self._remote_root = res.stdout.decode().strip()
        return self._remote_root

    def new_workdir(self) -> str:
        wd = f"{self.root()}/job-{uuid.uuid4().hex[:12]}"
        res = self._ssh(f"mkdir -p {shlex.quote(wd)}", 60)
        if res.returncode != 0:
            raise RunnerError("remote", f"cannot create {wd} on {self.name}")
        return wd

    def put(self, files: dict[str, bytes], workdir: str) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for rel, data in files.items():
                info = tarfile.TarInfo(rel)
                info.size = len(data)
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(data))
        res = self._ssh(f"cd {shlex.quote(workdir)} && tar -xzf -", 300, stdin=buf.getvalue())
        if res.returncode != 0:
            raise RunnerError(
                "copy", f"copying files to {self.name} failed: {res.stderr.decode(errors='replace').strip()}"
            )

    def get(self, workdir: str, rel_paths: list[str], dest: Path) -> list[Path]:
        quoted = " ".join(shlex.quote(r) for r in rel_paths)
        cmd = (
            f'cd {shlex.quote(workdir)} && for p in {quoted}; do [ -e "$p" ] && printf \'%s\\0\' "$p"; done | '
            "xargs -0 -r tar -czf - --"
        )
        res = self._ssh(cmd, 600)
        if res.returncode != 0:
            raise RunnerError(
                "copy",
                f"fetching results from {self.name} failed: {res.stderr.decode(errors='replace').strip()}",
            )
        dest.mkdir(parents=True, exist_ok=True)
        out: list[Path] = []
        if not res.stdout:
            return out
        with tarfile.open(fileobj=io.BytesIO(res.stdout), mode="r:gz") as tar:
            for m in tar.getmembers():
                if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isfile() or m.isdir()):
                    continue
                tar.extract(m, dest, filter="data")
            out = [dest / r for r in rel_paths if (dest / r).exists()]
        return out

    def _run_unwrapped(
        self,
        argv: list[str],
        workdir: str,
        timeout_s: float,
        cancel: threading.Event | None,
        env: dict[str, str] | None,
        gpu_lock: GpuLock,
        label: str,
    ) -> RunResult:
        # Remote environment: the login PATH plus CUDA's usual place, HOME in the scratch dir, no secrets
        # (ssh does not forward ours; SendEnv is not used).
        assigns = [
            f"HOME={shlex.quote(workdir)}",
            'TMPDIR="$kl_tmp"',
            "NVIDIA_TF32_OVERRIDE=0",
            'PATH="$PATH:/usr/local/cuda/bin"',
        ]
        # The remote host's own CUDA settings (which GPU, where the driver libraries are) pass through, as
        # the local runner keeps this host's: ${VAR+"VAR=$VAR"} is one word when set, nothing when unset.
        assigns += [
            f'${{{k}+"{k}=${k}"}}' for k in _ENV_KEEP if k not in ("PATH", "NVIDIA_TF32_OVERRIDE", "TERM")
        ]
        for k, v in (env or {}).items():
            if not _SECRET.search(k) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
                assigns.append(f"{k}={shlex.quote(v)}")
        cmd = " ".join(shlex.quote(a) for a in argv)
        # A temporary directory per command (see LocalRunner: nvcc names its temporary files by PID, and in the
        # sandbox every command has the same one), the workdir itself when it cannot be made.
        wq = shlex.quote(workdir)
        body = (
            f"cd {wq} && {{ kl_tmp=$(mktemp -d {wq}/.tmp-XXXXXX 2>/dev/null) || kl_tmp={wq}; }} && "
            f"env -i {' '.join(assigns)} {cmd}; kl_rc=$?; "
            f'[ "$kl_tmp" = {wq} ] || rm -rf "$kl_tmp"; exit $kl_rc'
        )
        if gpu_lock:
            # The host's one GPU lock (the local runner's too: see gpu_lock_dir), waited for here with progress; the
            # job then takes it for real (a job that slips in between only makes this wait again, in the flock).
            lock = f'"${{KERNELLSP_GPU_LOCK_DIR:-/tmp}}"/{shlex.quote(self.gpu_lock_name)}'
            mode = "-s " if gpu_lock == "shared" else ""
            self._wait_remote_lock(lock, cancel, mode)
            rec = shlex.quote(json.dumps(self.job_label))
            holder = (
                f'h={lock}.holder.$(id -u); printf \'{{"label": %s, "user": "%s", "host": "%s", "pid": %s, '
                f'"since": %s}}\\n\' {rec} "$(id -un)" "$(hostname)" $$ "$(date +%s)" > "$h.$$" && '
                f'chmod 644 "$h.$$" && mv -f "$h.$$" "$h"; trap \'rm -f "$h"\' EXIT; '
            )
            body = (
                f"flock {mode}-E {_LOCK_BUSY} -w {int(timeout_s)} {lock} sh -c {shlex.quote(holder + body)}"
            )
        # The lock wait (up to timeout_s) must not eat into the command's own time limit.
        limit = int(timeout_s) * (2 if gpu_lock else 1) + 5
        # `timeout` leads its own process group (pid recorded for cancel) and SIGKILLs all of it, itself
        # included. The command's status travels as a marker on stderr, so that neither a job killed by a
        # signal nor a program exiting 255 reads as ssh's own exit 255 (unreachable).
        pidfile = shlex.quote(f"{self.root()}/run-{uuid.uuid4().hex[:12]}.pid")
        inner = f"echo $$ > {pidfile}; exec timeout -s KILL {limit} sh -c {shlex.quote(body)}"
        remote = f"sh -c {shlex.quote(inner)}; echo {_RC_MARK}$? >&2; rm -f {pidfile}"
        t0 = time.monotonic()
        kill = f"p=$(cat {pidfile} 2>/dev/null) && kill -KILL -- -$p $p 2>/dev/null; rm -f {pidfile}"
        res = self._ssh(remote, limit + 25, cancel=cancel, on_abort=lambda: self._ssh(kill, 15))
        out, err = res.stdout.decode(errors="replace"), res.stderr.decode(errors="replace")
        rc = res.returncode
        m = re.search(rf"{_RC_MARK}(\d+)\n?\Z", err)
        if m:
            rc, err = int(m.group(1)), err[: m.start()]
        rr = RunResult(rc, out, err, time.monotonic() - t0)
        if gpu_lock and rc == _LOCK_BUSY and not out and not err:
            # Another job took the lock between the wait and this command: wait in line again.
            return self._run_unwrapped(argv, workdir, timeout_s, cancel, env, gpu_lock, label)
        if rc == 137 and rr.seconds >= timeout_s:  # killed by `timeout`; an earlier SIGKILL is a crash
            raise RunnerError(
                "timeout",
                f"{label} on {self.name} did not finish within {timeout_s:.0f} s "
                "and was killed (a hanging kernel?)",
            )
        return rr

    def _wait_remote_lock(self, lock: str, cancel: threading.Event | None, mode: str = "") -> None:
        """Until the host's GPU lock is free: ask every few seconds, report who holds it, honour cancel and
        ``gpu_wait_s``."""
        probe = (
            f'L={lock}; if flock {mode}-n -E {_LOCK_BUSY} "$L" true; then echo FREE; else for f in "$L".holder.*; do '
            '[ -f "$f" ] || continue; p=$(sed -n \'s/.*"pid": *\\([0-9]*\\).*/\\1/p\' "$f"); '
            '[ -n "$p" ] && [ -d "/proc/$p" ] && cat "$f"; done; fi'
        )
        with self._taking_lock():
            self._wait_remote_lock_loop(probe, cancel)

    def _wait_remote_lock_loop(self, probe: str, cancel: threading.Event | None) -> None:
        t0 = time.monotonic()
        shown: str | None = _NOT_SHOWN
        holder: GpuHolder | None = None
        while True:
            res = self._ssh(probe, 60, cancel=cancel)
            text = res.stdout.decode(errors="replace")
            if res.returncode == 0 and text.startswith("FREE"):
                return
            if res.returncode not in (0, _LOCK_BUSY):
                raise RunnerError(
                    "lock",
                    f"cannot take the GPU lock on {self.name}: "
                    f"{res.stderr.decode(errors='replace').strip() or 'flock failed'} "
                    "(is util-linux's flock installed there?)",
                )
            now = time.monotonic()
            holder = parse_holders([text])
            if self.gpu_wait_s is not None and now - t0 > self.gpu_wait_s:
                raise self._gpu_wait_expired(now - t0, holder)
            who = holder.describe() if holder is not None else None
            if who != shown:
                shown = who
                self._gpu_waiting(holder, f" on {self.name}", now - t0)
            if cancel is not None and cancel.wait(_SSH_LOCK_POLL_S):
                raise Cancelled("gpu lock")
            if cancel is None:
                time.sleep(_SSH_LOCK_POLL_S)

    def _sandbox_install(self, files: dict[str, bytes]) -> dict[str, str]:
        d = f"{self.root()}/sandbox"
        out: dict[str, str] = {}
        for name, data in files.items():
            path = f"{d}/{name}"
            # Content-named files: written once per host, atomically (a half-written script never runs).
            tmp = f"{path}.{uuid.uuid4().hex[:6]}"
            cmd = (
                f"mkdir -p {shlex.quote(d)} && chmod 700 {shlex.quote(d)} && {{ test -f {shlex.quote(path)} || "
                f"{{ cat > {shlex.quote(tmp)} && mv -f {shlex.quote(tmp)} {shlex.quote(path)}; }}; }}"
            )
            res = self._ssh(cmd, 60, stdin=data)
            if res.returncode != 0:
                raise OSError(
                    f"cannot write {path} on {self.name}: {res.stderr.decode(errors='replace').strip()}"
                )
            out[name] = path
        return out

    def _sandbox_facts(self, script: str) -> str:
        res = self._ssh(f"sh {shlex.quote(script)} facts", 60)
        return res.stdout.decode(errors="replace")

    def _sandbox_canary_root(self) -> str:
        return self.root()

    def _sandbox_trial(self, argv: list[str], workdir: str, timeout_s: float) -> tuple[int, str, str]:
        res = self._run_unwrapped(argv, workdir, timeout_s, None, None, False, "sandbox trial")
        return res.returncode, res.stdout, res.stderr

    def which(self, tool: str) -> str | None:
        if tool not in self._which_cache:
            res = self._ssh(f'PATH="$PATH:/usr/local/cuda/bin"; command -v {shlex.quote(tool)}', 60)
            path = res.stdout.decode().strip()
            self._which_cache[tool] = path if res.returncode == 0 and path else None
        return self._which_cache[tool]

    def _bin_cache_get(self, key: str, out_rel: str, workdir: str) -> bool:
        src = f"{self.root()}/bin/{key}"
        res = self._ssh(
            f"test -f {shlex.quote(src)} && cp -p {shlex.quote(src)} {shlex.quote(workdir + '/' + out_rel)}",
            60,
        )
        return res.returncode == 0

    def _bin_cache_put(self, key: str, out_rel: str, workdir: str) -> None:
        d = f"{self.root()}/bin"
        self._ssh(
            f"mkdir -p {shlex.quote(d)} && cp -p {shlex.quote(workdir + '/' + out_rel)} {shlex.quote(d + '/' + key)}",
            60,
        )

    def cleanup(self, workdir: str) -> None:
        if workdir.startswith(self.root() + "/job-"):
            self._ssh(f"rm -rf {shlex.quote(workdir)}", 120)

    def close(self) -> None:
        """End the shared ssh connection."""
        # Best effort: a master that is already gone, or an ssh that hangs, must not fail the caller's exit.
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                [self.ssh, "-o", f"ControlPath={self._control}", "-O", "exit", self.target],
                capture_output=True,
                timeout=10,
            )
        shutil.rmtree(self._control_dir, ignore_errors=True)
