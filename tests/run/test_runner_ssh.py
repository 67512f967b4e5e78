"""kernellsp.run.ssh.SshRunner against a real OpenSSH server on 127.0.0.1 (``tests/helpers/sshd.py``).

The "remote" host is this machine reached through sshd, so the remote side sees this host's tools
(nvcc yes, nvidia-smi no) and remote pids can be checked in /proc here. Skipped without
``/usr/sbin/sshd`` (CI: ``apt-get install -y openssh-server``).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import sshd

from kernellsp.build.nvcc import Cancelled
from kernellsp.profile.environment import runner_environment
from kernellsp.profile.ncu import ProfileError, ProfileOptions, profile_file
from kernellsp.run.gpu_lock import gpu_lock_dir
from kernellsp.run.runner import RunnerError
from kernellsp.run.ssh import SshRunner

REPO = Path(__file__).resolve().parents[2]
SECRETS = {
    "OPENAI_API_KEY": "sk-test-openai-0123456789",
    "MY_TOKEN": "tok-test-abcdef",
    "AWS_SECRET_ACCESS_KEY": "aws-test-secret-xyz",
}


@pytest.fixture(scope="module")
def runner(sshd_server: sshd.SshServer) -> Iterator[SshRunner]:
    r = SshRunner(sshd_server.target, ssh=sshd_server.ssh, extra_options=sshd_server.options)
    yield r
    r.close()


@pytest.fixture
def workdir(runner: SshRunner) -> Iterator[str]:
    wd = runner.new_workdir()
    yield wd
    runner.cleanup(wd)


@pytest.fixture(scope="module")
def plain(sshd_server: sshd.SshServer) -> Iterator[SshRunner]:
    """Without the sandbox: the kill tests read host pids (the sandbox has its own PID namespace;
    tests/run/test_sandbox.py checks that a timeout kills everything in it) and the reuse test times ssh alone."""
    r = SshRunner(sshd_server.target, ssh=sshd_server.ssh, extra_options=sshd_server.options, sandbox="off")
    yield r
    r.close()


def _wait_dead(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while sshd.alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _connections(server: sshd.SshServer) -> int:
    return server.log_text().count("Connection from 127.0.0.1")


# --------------------------------------------------------------------------------------------------
# Scratch directories and files


def test_target_and_scratch_root(runner: SshRunner, sshd_server: sshd.SshServer, workdir: str) -> None:
    assert runner.name == sshd_server.target and runner.port == str(sshd_server.port)
    root = runner.root()
    assert Path(root).name.startswith("kernellsp-") and workdir.startswith(root + "/job-")
    assert Path(workdir).is_dir()  # the remote host is this one
    other = runner.new_workdir()
    assert other != workdir
    runner.cleanup(other)
    assert not Path(other).exists()
    runner.cleanup("/tmp")  # outside the scratch root: refused silently
    assert Path("/tmp").is_dir()


def test_put_get_round_trip_with_nested_dirs(runner: SshRunner, workdir: str, tmp_path: Path) -> None:
    files = {
        "a.txt": b"hello\n",
        "src/kernel.cu": b"__global__ void k() {}\n",
        "src/include/deep/x.cuh": b"#pragma once\n",
        "data/blob.bin": bytes(range(256)) * 4096,
        "dir with space/f'q.txt": b"quoted\n",
        "empty.txt": b"",
    }
    runner.put(files, workdir)
    for rel, data in files.items():
        assert (Path(workdir) / rel).read_bytes() == data
    dest = tmp_path / "fetched"
    got = runner.get(
        workdir, ["a.txt", "src", "data/blob.bin", "dir with space", "empty.txt", "missing.txt"], dest
    )
    assert got == [
        dest / "a.txt",
        dest / "src",
        dest / "data/blob.bin",
        dest / "dir with space",
        dest / "empty.txt",
    ]
    for rel, data in files.items():
        assert (dest / rel).read_bytes() == data
    assert not (dest / "missing.txt").exists()
    # Only missing paths: nothing to fetch, no error.
    assert runner.get(workdir, ["nope", "also/nope"], tmp_path / "empty") == []
    # Results written remotely come back.
    res = runner.run(
        ["sh", "-c", "mkdir -p out/nested/deeper && echo 42 > out/nested/deeper/r.txt"], workdir, 30
    )
    assert res.returncode == 0, res.stderr
    assert runner.get(workdir, ["out"], dest) == [dest / "out"]
    assert (dest / "out/nested/deeper/r.txt").read_text() == "42\n"


# --------------------------------------------------------------------------------------------------
# Running


def test_remote_run_sees_no_secrets_and_home_is_workdir(
    runner: SshRunner, workdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    res = runner.run(
        ["sh", "-c", "pwd; env"], workdir, 30, env={"MY_TOKEN": "passed-explicitly", "KLSP_OK": "yes"}
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == workdir
    env = dict(ln.split("=", 1) for ln in lines[1:] if "=" in ln)
    # TMPDIR: a directory of the command's own inside the workdir, removed when the command ends.
    assert env["HOME"] == workdir and env["TMPDIR"].startswith(f"{workdir}/.tmp-")
    assert runner.run(["sh", "-c", f"ls -d {env['TMPDIR']}"], workdir, 30).returncode != 0
    assert env["KLSP_OK"] == "yes" and env["NVIDIA_TF32_OVERRIDE"] == "0"
    assert "/usr/local/cuda/bin" in env["PATH"].split(":")
    for name, value in SECRETS.items():
        assert name not in env and value not in res.stdout
    assert "passed-explicitly" not in res.stdout
    # The remote login's own variables do not reach the program either (env -i).
    assert not {"SSH_CONNECTION", "SSH_CLIENT", "USER", "LOGNAME", "MAIL"} & set(env)


def test_remote_exit_status_and_streams(runner: SshRunner, workdir: str) -> None:
    res = runner.run(["sh", "-c", "echo out; echo err >&2; exit 3"], workdir, 30)
    assert (res.returncode, res.stdout, res.stderr) == (3, "out\n", "err\n")
    res = runner.run(["sh", "-c", "printf 'no newline' >&2"], workdir, 30)
    assert (res.returncode, res.stderr) == (0, "no newline")
    # A program that exits 255 is not an unreachable host.
    res = runner.run(["sh", "-c", "echo bye >&2; exit 255"], workdir, 30)
    assert (res.returncode, res.stderr) == (255, "bye\n")
    # Killed by a signal (not by the timeout): a crash with the shell's 128+n status, not a timeout.
    res = runner.run(["sh", "-c", "kill -KILL $$"], workdir, 30)
    assert res.returncode == 137
    res = runner.run(["sh", "-c", "kill -SEGV $$"], workdir, 30)
    assert res.returncode == 139


def test_compile_cuda_remotely_and_fetch_the_cubin(runner: SshRunner, workdir: str, tmp_path: Path) -> None:
    if runner.which("nvcc") is None:
        pytest.skip("nvcc is not installed on this host (the ssh 'remote')")
    nvcc = runner.require("nvcc")
    src = (
        b"__global__ void scale(float* x, float a, int n) {\n"
        b"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] *= a;\n}\n"
    )
    runner.put({"src/scale.cu": src}, workdir)
    res = runner.run(
        [nvcc, "-arch=sm_90", "-cubin", "-lineinfo", "-o", "scale.cubin", "src/scale.cu"], workdir, 300
    )
    assert res.returncode == 0, res.output
    got = runner.get(workdir, ["scale.cubin"], tmp_path)
    assert got == [tmp_path / "scale.cubin"]
    blob = got[0].read_bytes()
    assert blob[:4] == b"\x7fELF" and b"scale" in blob


def test_which_and_require_missing_tool(runner: SshRunner, sshd_server: sshd.SshServer) -> None:
    assert runner.which("kernellsp-no-such-tool") is None
    with pytest.raises(RunnerError) as ei:
        runner.require("kernellsp-no-such-tool")
    assert ei.value.kind == "no_kernellsp_no_such_tool"
    assert str(ei.value) == f"kernellsp-no-such-tool not found on {sshd_server.target}: install it there"
    assert runner.which("sh") in ("/usr/bin/sh", "/bin/sh")
    if runner.which("ncu") is None:
        with pytest.raises(RunnerError) as ei:
            runner.require("ncu")
        assert ei.value.kind == "no_ncu"
        assert sshd_server.target in str(ei.value) and "install Nsight Compute there" in str(ei.value)


def test_unreachable_host_fails_fast_and_names_the_fix(sshd_server: sshd.SshServer) -> None:
    port = sshd.free_port()  # nothing listens there
    target = f"{sshd_server.user}@127.0.0.1:{port}"
    r = SshRunner(target, ssh=sshd_server.ssh, connect_timeout_s=5, extra_options=sshd_server.options)
    try:
        t0 = time.monotonic()
        with pytest.raises(RunnerError) as ei:
            r.new_workdir()
        assert time.monotonic() - t0 < 15
        assert ei.value.kind == "unreachable"
        msg = str(ei.value)
        assert f"cannot reach {target} over ssh" in msg
        assert "Connection refused" in msg
        # The suggested command must work as typed: ssh takes the port as -p, not as host:port.
        assert "sshd runs there" in msg and f"`ssh -p {port} {sshd_server.user}@127.0.0.1 true`" in msg
        with pytest.raises(RunnerError) as ei:
            r.which("nvcc")
        assert ei.value.kind == "unreachable"
    finally:
        r.close()


def test_wrong_key_is_unreachable_with_the_reason(sshd_server: sshd.SshServer, tmp_path: Path) -> None:
    key = tmp_path / "other_key"
    subprocess.run(
        [sshd.openssh().keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30
    )
    opts = [o if o != str(sshd_server.key) else str(key) for o in sshd_server.options]
    r = SshRunner(sshd_server.target, ssh=sshd_server.ssh, connect_timeout_s=5, extra_options=opts)
    try:
        with pytest.raises(RunnerError) as ei:
            r.root()
        assert ei.value.kind == "unreachable"
        assert "Permission denied" in str(ei.value) and "key-based login" in str(ei.value)
    finally:
        r.close()


HANG = ["sh", "-c", "echo $$ > child.pid; sleep 300 & echo $! > grandchild.pid; sleep 300; wait"]


def _remote_pids(runner: SshRunner, workdir: str) -> list[int]:
    res = runner.run(["cat", "child.pid", "grandchild.pid"], workdir, 30)
    assert res.returncode == 0, res.stderr
    return [int(x) for x in res.stdout.split()]


def test_timeout_kills_the_remote_process_group(plain: SshRunner, workdir: str) -> None:
    runner = plain
    t0 = time.monotonic()
    with pytest.raises(RunnerError) as ei:
        runner.run(HANG, workdir, 1)
    elapsed = time.monotonic() - t0
    assert ei.value.kind == "timeout", str(ei.value)
    assert "did not finish within 1 s" in str(ei.value) and runner.name in str(ei.value)
    assert elapsed < 15  # the remote `timeout` fires at timeout + 5 s
    pids = _remote_pids(runner, workdir)
    assert len(pids) == 2
    for pid in pids:
        assert _wait_dead(pid), f"remote process {pid} survived the timeout"
    # The connection is still fine afterwards.
    assert runner.run(["true"], workdir, 30).returncode == 0


def test_cancel_kills_the_remote_process_group(plain: SshRunner, workdir: str) -> None:
    runner = plain
    cancel = threading.Event()
    timer = threading.Timer(1.0, cancel.set)
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(Cancelled):
            runner.run(HANG, workdir, 120, cancel=cancel)
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 6
    for pid in _remote_pids(runner, workdir):
        assert _wait_dead(pid), f"remote process {pid} survived the cancel"
    # No per-run pid file is left behind in the scratch root.
    assert not list(Path(runner.root()).glob("run-*.pid"))


def _concurrent(fn, n: int = 2) -> tuple[float, list[object]]:  # type: ignore[no-untyped-def]
    results: list[object] = [None] * n

    def work(i: int) -> None:
        try:
            results[i] = fn()
        except BaseException as exc:  # surfaced by the caller's asserts
            results[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return time.monotonic() - t0, results


def test_gpu_lock_serialises_remote_runs(runner: SshRunner, workdir: str) -> None:
    runner.root()  # the master connection exists before the threads start
    wall, results = _concurrent(lambda: runner.run(["sleep", "1"], workdir, 30, gpu_lock=True))
    assert all(getattr(r, "returncode", None) == 0 for r in results), results
    assert wall >= 2.0, f"two locked 1 s runs overlapped: {wall:.2f} s"
    # The host's one lock, the local runner's too (a local and an ssh job on one GPU queue on it).
    assert Path(gpu_lock_dir(), "kernellsp-gpu.lock").is_file()
    wall, results = _concurrent(lambda: runner.run(["sleep", "1"], workdir, 30))
    assert all(getattr(r, "returncode", None) == 0 for r in results), results
    assert wall < 1.9


def test_shared_remote_steps_overlap_but_never_beside_an_exclusive_one(
    runner: SshRunner, workdir: str
) -> None:
    runner.root()
    # 2 s runs: an ssh round trip on a loaded CI host can add most of a second to one of them.
    wall, results = _concurrent(lambda: runner.run(["sleep", "2"], workdir, 30, gpu_lock="shared"))
    assert all(getattr(r, "returncode", None) == 0 for r in results), results
    assert wall < 3.8, f"two shared 2 s runs took turns: {wall:.2f} s"
    modes = iter(["shared", True])
    wall, results = _concurrent(lambda: runner.run(["sleep", "2"], workdir, 30, gpu_lock=next(modes)))
    assert all(getattr(r, "returncode", None) == 0 for r in results), results
    assert wall >= 4.0, f"an exclusive run overlapped a shared one: {wall:.2f} s"


def test_gpu_lock_busy_is_reported(runner: SshRunner, workdir: str, sshd_server: sshd.SshServer) -> None:
    lock = f"{gpu_lock_dir()}/kernellsp-gpu.lock"
    # Another job holds the lock for 4 s (flock(1) on the same file, started over its own connection).
    holder = subprocess.Popen(sshd_server.ssh_argv(f"flock {shlex.quote(lock)} sleep 4"))
    waits: list[str] = []
    runner.on_gpu_wait = waits.append
    try:
        time.sleep(1.0)
        t0 = time.monotonic()
        runner.gpu_wait_s = 1.0  # only the user's setting ends a wait
        with pytest.raises(RunnerError) as ei:
            runner.run(["true"], workdir, 1, gpu_lock=True)
        assert ei.value.kind == "busy" and "gpu_wait_timeout_s" in str(ei.value)
        assert time.monotonic() - t0 < 10
        assert waits and waits[0].startswith(f"waiting for the GPU on {runner.name}: held by another job")
        runner.gpu_wait_s = None
        # A waiter with enough patience gets the GPU once the holder is done, and keeps its own time limit.
        res = runner.run(["sh", "-c", "sleep 1; echo ran"], workdir, 6, gpu_lock=True)
        assert (res.returncode, res.stdout) == (0, "ran\n")
    finally:
        holder.wait(30)


def test_connection_is_reused(sshd_server: sshd.SshServer) -> None:
    r = SshRunner(sshd_server.target, ssh=sshd_server.ssh, extra_options=sshd_server.options, sandbox="off")
    try:
        before = _connections(sshd_server)
        wd = r.new_workdir()
        sock = Path(r._control)
        assert sock.exists() and stat.S_ISSOCK(sock.stat().st_mode), (
            "no ControlMaster socket after the first call"
        )
        after_first = _connections(sshd_server)
        assert after_first - before == 1
        n = 5
        t0 = time.monotonic()
        for _ in range(n):
            assert r.run(["true"], wd, 30).returncode == 0
        reused_s = time.monotonic() - t0
        assert _connections(sshd_server) == after_first, "runs opened new TCP connections"
        t0 = time.monotonic()
        for _ in range(n):
            subprocess.run(sshd_server.ssh_argv("true"), check=True, capture_output=True, timeout=30)
        fresh_s = time.monotonic() - t0
        assert _connections(sshd_server) == after_first + n
        print(f"{n} runs over the shared connection {reused_s:.2f} s, {n} fresh logins {fresh_s:.2f} s")
        assert reused_s < fresh_s, (
            f"{n} runs over the shared connection {reused_s:.2f} s, {n} fresh logins {fresh_s:.2f} s"
        )
        r.cleanup(wd)
    finally:
        r.close()
    assert not Path(r._control_dir).exists()


# --------------------------------------------------------------------------------------------------
# Profiling over ssh on a host without a GPU


def _jobs(runner: SshRunner) -> set[str]:
    return {p.name for p in Path(runner.root()).glob("job-*")}


def test_runner_environment_without_gpu(runner: SshRunner) -> None:
    if runner.which("nvidia-smi") is not None:
        pytest.skip("this host has nvidia-smi")
    before = _jobs(runner)
    with pytest.raises(RunnerError) as ei:
        runner_environment(runner)
    assert ei.value.kind == "no_gpu"
    msg = str(ei.value)
    assert msg.startswith(f"no GPU on {runner.name}: nvidia-smi not found there")
    assert "NVIDIA driver" in msg and "--gpu-host" in msg
    assert _jobs(runner) == before  # the scratch dir it made is gone


def test_profile_file_without_gpu_says_so(runner: SshRunner) -> None:
    if runner.which("nvidia-smi") is not None:
        pytest.skip("this host has nvidia-smi")
    path = REPO / "samples" / "vector_add.cu"
    before = _jobs(runner)
    with pytest.raises((ProfileError, RunnerError)) as ei:
        profile_file(path, path.read_text(), runner, ProfileOptions(use_cache=False))
    assert ei.value.kind == "no_gpu"
    assert str(ei.value).startswith(f"no GPU on {runner.name}: ")
    assert "Traceback" not in str(ei.value)
    assert _jobs(runner) == before


def test_remote_json_round_trip_of_args(runner: SshRunner, workdir: str) -> None:
    """Arguments with quotes, spaces and shell metacharacters reach the program unchanged."""
    args = ["a b", "it's", '"dq"', "$HOME", "`id`", "x;y", "*", ""]
    res = runner.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", *args], workdir, 30
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == args


def test_cli_gpu_host_leaves_no_ssh_master_behind(sshd_server: sshd.SshServer, tmp_path: Path) -> None:
    """`kernellsp profile --gpu-host` closes its shared connection on exit (ControlPersist would keep it 120 s).

    The ``ssh`` on PATH is a wrapper adding the test key, as a user's ~/.ssh/config would; TMPDIR puts
    the control socket's directory under tmp_path, so this run's master is told apart from the others.
    """
    wrap = sshd_server.client_wrapper(tmp_path / "bin").parent
    tmp = Path(tempfile.mkdtemp(prefix="kl-", dir="/tmp"))  # short: the socket path must fit in 107 bytes
    env = {
        **os.environ,
        "PATH": f"{wrap}:{os.environ['PATH']}",
        "TMPDIR": str(tmp),
        "KERNELLSP_CACHE_DIR": str(tmp_path / "cache"),
    }
    if shutil.which("nvidia-smi") is not None:
        pytest.skip("this host has a GPU: the command would profile instead of failing fast")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernellsp",
            "profile",
            str(REPO / "samples" / "vector_add.cu"),
            "--gpu-host",
            sshd_server.target,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(f"error: no GPU on {sshd_server.target}: nvidia-smi not found there"), (
        res.stderr
    )
    assert "Traceback" not in res.stderr
    assert _connections(sshd_server) > 0
    deadline = time.monotonic() + 5
    while _ssh_processes_under(tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    lingering = _ssh_processes_under(tmp)
    for pid in lingering:  # do not leave it running when the assertion fails
        os.kill(pid, signal.SIGTERM)
    assert not lingering, "an ssh master outlived the command"
    assert not list(tmp.glob("kernellsp-ssh-*")), "the control directory was left behind"
    shutil.rmtree(tmp, ignore_errors=True)


def test_long_tmpdir_still_gets_a_control_socket(
    sshd_server: sshd.SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TMPDIR too long for a Unix socket path (macOS's /var/folders/..., deep CI dirs) falls back to /tmp."""
    deep = tmp_path / ("d" * 60) / ("e" * 40)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    r = SshRunner(sshd_server.target, ssh=sshd_server.ssh, extra_options=sshd_server.options)
    try:
        assert r._control_dir.startswith("/tmp/kernellsp-ssh-") and len(r._control) + 17 <= 103
        assert r.root()
    finally:
        r.close()
    assert not Path(r._control_dir).exists()


def _ssh_processes_under(tmp: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(tmp) in cmd and sshd.alive(int(proc.name)):  # "ssh: TMP/.../cm [mux]" once backgrounded
            pids.append(int(proc.name))
    return pids


def test_remote_cuda_settings_pass_through(sshd_server: sshd.SshServer, tmp_path: Path) -> None:
    """The remote host's own CUDA_VISIBLE_DEVICES reaches the program (a multi-GPU host picks its GPU that way);
    the test sshd accepts it from the client (AcceptEnv), as a host's login environment would set it."""
    show = ["sh", "-c", 'echo "${CUDA_VISIBLE_DEVICES-unset}"']
    for opts, expected in (([], "unset"), (["-o", "SetEnv=CUDA_VISIBLE_DEVICES=3"], "3")):
        r = SshRunner(sshd_server.target, ssh=sshd_server.ssh, extra_options=[*sshd_server.options, *opts])
        try:
            wd = r.new_workdir()
            res = r.run(show, wd, 30)
            r.cleanup(wd)
        finally:
            r.close()
        assert res.returncode == 0 and res.stdout.strip() == expected, res


def test_a_local_and_an_ssh_job_queue_on_one_gpu_lock(
    runner: SshRunner, workdir: str, tmp_path: Path
) -> None:
    """Issue 15 item 12: the GPU host's local runner and an ssh runner to it take the same lock and wait in line,
    each shown who holds the GPU (job, user@host, since when), with no time limit but the user's setting."""
    from kernellsp.run.runner import LocalRunner

    local = LocalRunner(sandbox="off")
    local.job_label = "optimize of softmax.cu"
    runner.job_label = "verify of layernorm.cu"
    local_waits: list[str] = []
    ssh_waits: list[str] = []
    local.on_gpu_wait = local_waits.append
    runner.on_gpu_wait = ssh_waits.append
    runner.root()
    t0 = time.monotonic()
    # The local job holds the GPU for 3 s; the ssh job's own time limit is 1 s, yet it waits and then runs.
    first = threading.Thread(target=lambda: local.run(["sleep", "3"], str(tmp_path), 30, gpu_lock=True))
    first.start()
    time.sleep(0.5)
    res = runner.run(["sh", "-c", "echo after"], workdir, 1, gpu_lock=True)
    first.join(30)
    assert (res.returncode, res.stdout) == (0, "after\n")
    assert time.monotonic() - t0 >= 3.0
    assert ssh_waits and "held by optimize of softmax.cu (" in ssh_waits[0] and " since " in ssh_waits[0]
    # And the other way round: the ssh job holds it, the local one waits and says who holds it.
    second = threading.Thread(target=lambda: runner.run(["sleep", "3"], workdir, 30, gpu_lock=True))
    second.start()
    time.sleep(1.5)
    t1 = time.monotonic()
    local.run(["true"], str(tmp_path), 1, gpu_lock=True)
    second.join(30)
    assert time.monotonic() - t1 >= 1.0
    assert local_waits and "held by verify of layernorm.cu (" in local_waits[0]
    runner.on_gpu_wait = None
