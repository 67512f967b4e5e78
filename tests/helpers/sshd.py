"""A throw-away OpenSSH server on 127.0.0.1 for the SshRunner tests (``tests/run/test_runner_ssh.py``).

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
(``user@127.0.0.1:PORT``) and the client options that :class:`kernellsp.run.ssh.SshRunner` takes as
``extra_options``. ``conftest.py`` wraps it in the session fixture ``sshd_server``.

On a host without OpenSSH (the lent GPU machine) set ``KERNELLSP_TEST_SSH_BUNDLE`` to a directory
made by ``tests/ssh_bundle.sh`` on a Debian host: sshd, ssh and ssh-keygen then come from there and
run through its own glibc loader; sshd gets ``-r`` (no re-exec: a re-exec would bypass that loader),
and when this host has no ``sshd`` privilege-separation user, sshd sees one through nss_wrapper and a
copy of ``/etc/passwd`` in the tmp dir (``/etc`` is not touched).
"""

from __future__ import annotations

import contextlib
import getpass
import grp
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")
BUNDLE_ENV = "KERNELLSP_TEST_SSH_BUNDLE"


@dataclass(frozen=True)
class OpenSsh:
    """Where the server and client programs come from: the system's, or a bundle's wrappers."""

    sshd: Path
    ssh: str
    keygen: str
    bundle: Path | None = None


def openssh() -> OpenSsh:
    """The OpenSSH to use: ``$KERNELLSP_TEST_SSH_BUNDLE``'s when set, else the system's."""
    bundle = os.environ.get(BUNDLE_ENV)
    if bundle:
        b = Path(bundle).resolve()
        if not (b / "bin" / "sshd").is_file():
            raise SshdUnavailable(
                f"{BUNDLE_ENV}={bundle} holds no bin/sshd: make it with tests/ssh_bundle.sh"
            )
        return OpenSsh(b / "bin" / "sshd", str(b / "bin" / "ssh"), str(b / "bin" / "ssh-keygen"), b)
    return OpenSsh(SSHD, "ssh", "ssh-keygen")


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
    ssh: str = "ssh"

    @property
    def target(self) -> str:
        """``user@127.0.0.1:PORT``, the form ``--gpu-host`` and SshRunner accept."""
        return f"{self.user}@127.0.0.1:{self.port}"

    def ssh_argv(self, *remote: str) -> list[str]:
        """A plain ``ssh`` command line (no connection sharing) for checks outside the runner."""
        return [
            self.ssh,
            "-o",
            "BatchMode=yes",
            *self.options,
            "-p",
            str(self.port),
            f"{self.user}@127.0.0.1",
            *remote,
        ]

    def client_wrapper(self, directory: Path) -> Path:
        """Write ``directory/ssh``: the client with this server's key and options, for PATH (what a user's
        ~/.ssh/config does for ``kernellsp --gpu-host``). It runs the client by absolute path, so a
        wrapper named ``ssh`` never finds itself on PATH."""
        directory.mkdir(parents=True, exist_ok=True)
        client = shutil.which(self.ssh) or self.ssh
        wrapper = directory / "ssh"
        wrapper.write_text(
            "#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in [client, *self.options]) + ' "$@"\n'
        )
        wrapper.chmod(0o755)
        return wrapper

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


def _keygen(keygen: str, path: Path) -> None:
    subprocess.run(
        [keygen, "-q", "-t", "ed25519", "-N", "", "-C", "kernellsp-test", "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=30,
    )


def _without_sshd(path: str) -> str:
    """The lines of a passwd/group file, less any ``sshd`` entry, newline-terminated."""
    return "".join(
        f"{ln}\n" for ln in Path(path).read_text().splitlines() if ln and not ln.startswith("sshd:")
    )


def _privsep_user_env(bundle: Path, tmp: Path) -> dict[str, str]:
    """Environment that gives a root sshd its ``sshd`` user when this host has none (nss_wrapper)."""
    if os.geteuid() != 0:
        return {}  # sshd run by another user needs no privilege-separation user
    try:
        pwd.getpwnam("sshd")
        return {}
    except KeyError:
        pass
    ids = {p.pw_uid for p in pwd.getpwall()} | {g.gr_gid for g in grp.getgrall()}
    uid = next(i for i in range(60000, 65000) if i not in ids)
    passwd, group = tmp / "passwd", tmp / "group"
    passwd.write_text(_without_sshd("/etc/passwd") + f"sshd:x:{uid}:{uid}::/run/sshd:/usr/sbin/nologin\n")
    group.write_text(_without_sshd("/etc/group") + f"sshd:x:{uid}:\n")
    return {
        "KERNELLSP_SSHD_PRELOAD": str(bundle / "lib" / "libnss_wrapper.so"),
        "NSS_WRAPPER_PASSWD": str(passwd),
        "NSS_WRAPPER_GROUP": str(group),
    }


def start_sshd(tmp: Path, timeout_s: float = 20.0) -> SshServer:
    """Start sshd in ``tmp``; raise :class:`SshdUnavailable` when this host cannot run one."""
    tools = openssh()
    if not tools.sshd.is_file():
        raise SshdUnavailable(
            f"{tools.sshd} not found: install openssh-server (apt-get install -y openssh-server), "
            f"or set {BUNDLE_ENV} to a directory made by tests/ssh_bundle.sh"
        )
    for tool in (tools.ssh, tools.keygen):
        if shutil.which(tool) is None:
            raise SshdUnavailable(f"{tool} not found: install openssh-client")
    # sshd's privilege-separation directory; only root can create it and only root needs it.
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    host_key, client_key = tmp / "host_ed25519", tmp / "client_ed25519"
    _keygen(tools.keygen, host_key)
    _keygen(tools.keygen, client_key)
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
        "AcceptEnv CUDA_VISIBLE_DEVICES\n"
    )
    log = tmp / "sshd.log"
    argv = [str(tools.sshd), "-D", "-e", "-f", str(config)]
    env = dict(os.environ)
    if tools.bundle is not None:
        argv.append("-r")
        env.update(_privsep_user_env(tools.bundle, tmp))
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            argv,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    options = [
        "-F",
        "/dev/null",
        "-i",
        str(client_key),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "LogLevel=ERROR",
    ]
    server = SshServer(
        port=port,
        user=user,
        key=client_key,
        config=config,
        log=log,
        proc=proc,
        options=options,
        ssh=tools.ssh,
    )
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
                raise RuntimeError(
                    f"sshd did not listen on 127.0.0.1:{port} within {timeout_s:.0f} s:\n{server.log_text()}"
                ) from None
            time.sleep(0.05)
    res = subprocess.run(server.ssh_argv("true"), capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        stop_sshd(server)
        raise RuntimeError(
            f"key login to {server.target} failed (exit {res.returncode}): {res.stderr.strip()}\n"
            f"sshd log:\n{server.log_text()}"
        )
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
