"""A throw-away OpenSSH server on 127.0.0.1 for the SshRunner tests (``tests/test_runner_ssh.py``).

CI needs the Debian/Ubuntu package ``openssh-server`` (``/usr/sbin/sshd``)::

    apt-get install -y openssh-server

``openssh-client`` (``ssh``, ``ssh-keygen``; a dependency of openssh-server), ``util-linux``
(``flock``) and ``coreutils`` (``timeout``) are in every Debian base image. The tests run sshd as
the current user (root in CI containers, where ``PermitRootLogin prohibit-password`` lets the
generated key in); without ``/usr/sbin/sshd`` they are skipped with that reason.

:func:`start_sshd` generates a host key and a client key with ``ssh-keygen``, writes an
``sshd_config`` (a free port on 127.0.0.1, the tmp ``authorized_keys``, ``StrictModes no``,
``UsePAM no``, a PidFile in the tmp dir), starts ``/usr/sbin/sshd -D -e -f CONFIG``, waits until
the port accepts and one key login works, and returns an :class:`SshServer`: the runner target
(``user@127.0.0.1:PORT``) and the client options that :class:`kernellsp.runner.SshRunner` takes as
``extra_options``. ``conftest.py`` wraps it in the session fixture ``sshd_server``.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")


class SshdUnavailable(Exception):
    """sshd cannot run here (the reason is the message): the tests skip."""


@dataclass
class SshServer:
    """A running sshd and what a client needs to log in."""

    port: int
    user: str
    key: Path
    config: Path
    log: Path
    proc: subprocess.Popen[bytes]
    options: list[str] = field(default_factory=list)

    @property
    def target(self) -> str:
        """``user@127.0.0.1:PORT``, the form ``--gpu-host`` and SshRunner accept."""
        return f"{self.user}@127.0.0.1:{self.port}"

    def ssh_argv(self, *remote: str) -> list[str]:
        """A plain ``ssh`` command line (no connection sharing) for checks outside the runner."""
        return ["ssh", "-o", "BatchMode=yes", *self.options, "-p", str(self.port), f"{self.user}@127.0.0.1", *remote]

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.is_file() else ""


def alive(pid: int) -> bool:
    """Is ``pid`` a live process on this host? Zombies count as dead (a container's PID 1 may not reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kernellsp-test", "-f", str(path)],
                   check=True, capture_output=True, timeout=30)  # fmt: skip


def start_sshd(tmp: Path, timeout_s: float = 20.0) -> SshServer:
    """Start sshd in ``tmp``; raise :class:`SshdUnavailable` when this host cannot run one."""
    if not SSHD.is_file():
        raise SshdUnavailable(f"{SSHD} not found: install openssh-server (apt-get install -y openssh-server)")
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise SshdUnavailable(f"{tool} not found: install openssh-client")
    # sshd's privilege-separation directory; only root can create it and only root needs it.
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    host_key, client_key = tmp / "host_ed25519", tmp / "client_ed25519"
    _keygen(host_key)
    _keygen(client_key)
    auth = tmp / "authorized_keys"
    auth.write_text(client_key.with_suffix(".pub").read_text())
    auth.chmod(0o600)
    port = free_port()
    user = getpass.getuser()
    config = tmp / "sshd_config"
    config.write_text(
        f"Port {port}\n"
        "ListenAddress 127.0.0.1\n"
        f"HostKey {host_key}\n"
        f"AuthorizedKeysFile {auth}\n"
        f"PidFile {tmp / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\n"
        "PubkeyAuthentication yes\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "StrictModes no\n"
        "UsePAM no\n"
        "PrintMotd no\n"
        "X11Forwarding no\n"
        "AllowTcpForwarding no\n"
        "MaxSessions 64\n"
        "MaxStartups 64:30:128\n"
        "LogLevel VERBOSE\n"
    )
    log = tmp / "sshd.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    options = ["-F", "/dev/null", "-i", str(client_key), "-o", "IdentitiesOnly=yes",
               "-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "LogLevel=ERROR"]  # fmt: skip
    server = SshServer(port=port, user=user, key=client_key, config=config, log=log, proc=proc, options=options)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}:\n{server.log_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                stop_sshd(server)
                raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port} within {timeout_s:.0f} s:\n"
                                   f"{server.log_text()}") from None  # fmt: skip
            time.sleep(0.05)
    res = subprocess.run(server.ssh_argv("true"), capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        stop_sshd(server)
        raise RuntimeError(f"key login to {server.target} failed (exit {res.returncode}): {res.stderr.strip()}\n"
                           f"sshd log:\n{server.log_text()}")  # fmt: skip
    return server


def stop_sshd(server: SshServer) -> None:
    """Stop the listener (sessions it forked end with their connections)."""
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.proc.wait(timeout=5)
