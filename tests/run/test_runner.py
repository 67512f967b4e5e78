"""kernellsp.run.runner on this host (LocalRunner; no GPU needed): scratch dirs, file transfer, the clean
environment, timeouts and cancel that kill the whole process group, the GPU lock, failure texts."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernellsp.build.nvcc import Cancelled
from kernellsp.run.process import RunnerError, classify_failure, clean_env
from kernellsp.run.runner import LocalRunner, make_runner
from kernellsp.run.ssh import SshRunner

SECRETS = {
    "OPENAI_API_KEY": "sk-test-openai-0123456789",
    "MY_TOKEN": "tok-test-abcdef",
    "AWS_SECRET_ACCESS_KEY": "aws-test-secret-xyz",
    "GITHUB_TOKEN": "ghp_test_123",
    "DB_PASSWORD": "hunter2-test",
    "SSH_AUTH_SOCK": "/tmp/test-agent.sock",
}

PRINT_ENV = [
    sys.executable,
    "-c",
    "import json, os; print(json.dumps({'cwd': os.getcwd(), 'env': dict(os.environ)}))",
]


def alive(pid: int) -> bool:
    """Is ``pid`` a live process? Zombies count as dead (PID 1 in a container may never reap them)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_dead(pid: int, within_s: float = 3.0) -> bool:
    deadline = time.monotonic() + within_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def runner(tmp_path: Path) -> LocalRunner:
    return LocalRunner(scratch_root=tmp_path)


@pytest.fixture
def workdir(runner: LocalRunner) -> Iterator[str]:
    wd = runner.new_workdir()
    yield wd
    runner.cleanup(wd)


@pytest.fixture
def plain_runner(tmp_path: Path) -> LocalRunner:
    """Without the sandbox: the process-group tests read host pids (the sandbox has its own PID namespace;
    tests/run/test_sandbox.py checks that a timeout kills everything in it)."""
    return LocalRunner(scratch_root=tmp_path, sandbox="off")


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    return SECRETS


# --------------------------------------------------------------------------------------------------
# Scratch directories and files


def test_new_workdir_is_fresh_and_cleanup_removes_it(runner: LocalRunner, tmp_path: Path) -> None:
    a, b = runner.new_workdir(), runner.new_workdir()
    assert a != b
    for wd in (a, b):
        assert Path(wd).is_dir() and Path(wd).parent == tmp_path and not any(Path(wd).iterdir())
    runner.cleanup(a)
    assert not Path(a).exists() and Path(b).is_dir()
    runner.cleanup(a)  # twice is harmless


def test_put_get_round_trip_files_and_directories(runner: LocalRunner, workdir: str, tmp_path: Path) -> None:
    files = {
        "a.txt": b"hello\n",
        "src/kernel.cu": b"__global__ void k() {}\n",
        "src/include/deep/x.cuh": b"#pragma once\n",
        "data/blob.bin": bytes(range(256)) * 64,
        "name with space.txt": b"spaces survive\n",
    }
    runner.put(files, workdir)
    for rel, data in files.items():
        assert (Path(workdir) / rel).read_bytes() == data
    dest = tmp_path / "fetched"
    got = runner.get(workdir, ["a.txt", "src", "data/blob.bin", "name with space.txt", "missing.txt"], dest)
    assert got == [dest / "a.txt", dest / "src", dest / "data/blob.bin", dest / "name with space.txt"]
    for rel, data in files.items():
        assert (dest / rel).read_bytes() == data
    assert not (dest / "missing.txt").exists()
    # Results the program wrote come back too.
    res = runner.run(["sh", "-c", "mkdir -p out/nested && echo 42 > out/nested/r.txt"], workdir, 30)
    assert res.returncode == 0
    assert runner.get(workdir, ["out"], dest) == [dest / "out"]
    assert (dest / "out/nested/r.txt").read_text() == "42\n"


# --------------------------------------------------------------------------------------------------
# Clean environment


def test_clean_env_drops_secrets_and_keeps_the_allow_list(
    secrets: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/cuda/lib64")
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "1")
    env = clean_env({"KLSP_SEED": "7", "EXTRA_API_KEY": "nope"}, home="/scratch/job")
    assert not set(secrets) & set(env)
    assert "EXTRA_API_KEY" not in env and env["KLSP_SEED"] == "7"
    assert env["HOME"] == env["TMPDIR"] == "/scratch/job"
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["LD_LIBRARY_PATH"] == "/usr/local/cuda/lib64"
    assert env["PATH"] == os.environ["PATH"]
    assert env["NVIDIA_TF32_OVERRIDE"] == "1"  # an explicit setting is kept; the default is 0
    monkeypatch.delenv("NVIDIA_TF32_OVERRIDE")
    monkeypatch.delenv("PATH")
    env = clean_env()
    assert env["NVIDIA_TF32_OVERRIDE"] == "0"
    assert "/usr/local/cuda/bin" in env["PATH"].split(":")
    assert "HOME" not in env


def test_run_child_sees_no_secrets_and_home_is_the_workdir(
    runner: LocalRunner, workdir: str, secrets: dict[str, str]
) -> None:
    res = runner.run(PRINT_ENV, workdir, 60, env={"MY_TOKEN": "passed-explicitly", "KLSP_OK": "yes"})
    assert res.returncode == 0, res.stderr
    seen = json.loads(res.stdout)
    env = seen["env"]
    assert seen["cwd"] == workdir
    # TMPDIR: a directory of the command's own inside the workdir, gone when the command ends.
    assert env["HOME"] == workdir and Path(env["TMPDIR"]).parent == Path(workdir)
    assert not Path(env["TMPDIR"]).exists()
    assert env["KLSP_OK"] == "yes"
    for name, value in secrets.items():
        assert name not in env
        assert value not in res.stdout
    assert "passed-explicitly" not in res.stdout
    assert "USER" not in env and "PYTHONPATH" not in env
    # The same through env(1), the way a shell script under test would look.
    res = runner.run(["env"], workdir, 30)
    names = {ln.split("=", 1)[0] for ln in res.stdout.splitlines()}
    assert not names & set(secrets)
    assert f"HOME={workdir}" in res.stdout.splitlines()


def test_run_result_exit_code_and_streams(runner: LocalRunner, workdir: str) -> None:
    res = runner.run(["sh", "-c", "echo out; echo err >&2; exit 3"], workdir, 30)
    assert (res.returncode, res.stdout, res.stderr) == (3, "out\n", "err\n")
    assert res.output == "out\nerr\n"
    assert 0 <= res.seconds < 10


def test_run_missing_program_is_a_runner_error(runner: LocalRunner, workdir: str) -> None:
    with pytest.raises(RunnerError) as ei:
        runner.run(["/nonexistent/kernellsp-tool", "--help"], workdir, 10)
    assert ei.value.kind == "exec"
    assert "/nonexistent/kernellsp-tool" in str(ei.value)


# --------------------------------------------------------------------------------------------------
# Timeout and cancel kill the whole process group

HANG = ["sh", "-c", "echo $$ > child.pid; sleep 30 & echo $! > grandchild.pid; sleep 30; wait"]


def _pids(workdir: str) -> list[int]:
    deadline = time.monotonic() + 5
    while True:
        try:
            return [int((Path(workdir) / f).read_text()) for f in ("child.pid", "grandchild.pid")]
        except (FileNotFoundError, ValueError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_timeout_kills_the_process_group_quickly(plain_runner: LocalRunner, workdir: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(RunnerError) as ei:
        plain_runner.run(HANG, workdir, 1)
    elapsed = time.monotonic() - t0
    assert ei.value.kind == "timeout"
    assert "within 1 s" in str(ei.value) and "killed" in str(ei.value)
    assert 1.0 <= elapsed < 4.0
    for pid in _pids(workdir):
        assert wait_dead(pid), f"process {pid} survived the timeout"


def test_timeout_of_plain_sleep(runner: LocalRunner, workdir: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(RunnerError) as ei:
        runner.run(["sleep", "30"], workdir, 1)
    assert ei.value.kind == "timeout"
    assert time.monotonic() - t0 < 4.0


def test_cancel_raises_cancelled_and_kills_the_process_group(plain_runner: LocalRunner, workdir: str) -> None:
    cancel = threading.Event()
    timer = threading.Timer(0.5, cancel.set)
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(Cancelled):
            plain_runner.run(HANG, workdir, 60, cancel=cancel)
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 4.0
    for pid in _pids(workdir):
        assert wait_dead(pid), f"process {pid} survived the cancel"


def test_cancel_already_set_returns_promptly(runner: LocalRunner, workdir: str) -> None:
    cancel = threading.Event()
    cancel.set()
    t0 = time.monotonic()
    with pytest.raises(Cancelled):
        runner.run(["sleep", "30"], workdir, 60, cancel=cancel)
    assert time.monotonic() - t0 < 2.0


# --------------------------------------------------------------------------------------------------
# GPU lock


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
        t.join(60)
    return time.monotonic() - t0, results


def test_gpu_lock_serialises_concurrent_runs(runner: LocalRunner, workdir: str) -> None:
    wall, results = _concurrent(lambda: runner.run(["sleep", "1"], workdir, 30, gpu_lock=True))
    assert all(getattr(r, "returncode", None) == 0 for r in results), results
    assert wall >= 2.0, f"two locked 1 s runs overlapped: {wall:.2f} s"
    # Without the lock the same two runs overlap.
    wall, results = _concurrent(lambda: runner.run(["sleep", "1"], workdir, 30))
    assert all(getattr(r, "returncode", None) == 0 for r in results), results
    assert wall < 1.9


def test_shared_gpu_steps_overlap_but_never_beside_an_exclusive_one(
    runner: LocalRunner, workdir: str
) -> None:
    # Two shared steps (a baseline's check, a sanitizer tool) run side by side.
    wall, results = _concurrent(lambda: runner.run(["sleep", "1"], workdir, 30, gpu_lock="shared"))
    assert all(getattr(r, "returncode", None) == 0 for r in results), results
    assert wall < 1.9, f"two shared 1 s runs took turns: {wall:.2f} s"
    # A step that holds the GPU alone (timing) waits for a shared one, and a shared one for it.
    modes = iter(["shared", True])
    wall, results = _concurrent(lambda: runner.run(["sleep", "1"], workdir, 30, gpu_lock=next(modes)))
    assert all(getattr(r, "returncode", None) == 0 for r in results), results
    assert wall >= 2.0, f"an exclusive run overlapped a shared one: {wall:.2f} s"


@pytest.fixture
def held_gpu_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Hold the GPU lock the way another kernellsp process would (in a lock folder of this test's own)."""
    monkeypatch.setenv("KERNELLSP_GPU_LOCK_DIR", str(tmp_path))
    with open(tmp_path / "kernellsp-gpu.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def test_a_job_waiting_for_its_own_gpu_steps_reports_nothing(runner: LocalRunner, workdir: str) -> None:
    """Issue 30 item 3: the entries and candidates of one command take turns on the GPU lock; that is the job
    queueing its own steps, not a wait for the GPU, and used to print "waiting for the GPU: held by <this
    command>" once per step."""
    waits: list[str] = []
    runner.on_gpu_wait = waits.append
    try:
        wall, results = _concurrent(lambda: runner.run(["sleep", "1"], workdir, 30, gpu_lock=True), n=3)
    finally:
        runner.on_gpu_wait = None
    assert all(getattr(r, "returncode", None) == 0 for r in results), results
    assert wall >= 3.0 and waits == []


def test_a_wait_for_another_job_is_reported_once(
    runner: LocalRunner, workdir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several steps of one command waiting behind the same holder say so once, with the holder."""
    monkeypatch.setenv("KERNELLSP_GPU_LOCK_DIR", str(tmp_path))
    other = subprocess.Popen(["sleep", "30"])
    waits: list[str] = []
    runner.on_gpu_wait = waits.append
    try:
        with open(tmp_path / "kernellsp-gpu.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            record = {"label": "profile of conv.cu", "user": "ana", "host": "gpu1", "pid": other.pid}
            (tmp_path / "kernellsp-gpu.lock.holder.4242").write_text(
                json.dumps({**record, "since": time.time()})
            )
            release = threading.Timer(2.5, lambda: fcntl.flock(fh, fcntl.LOCK_UN))
            release.start()
            _wall, results = _concurrent(lambda: runner.run(["true"], workdir, 30, gpu_lock=True), n=3)
            release.join()
    finally:
        runner.on_gpu_wait = None
        other.kill()
        other.wait()
    assert all(getattr(r, "returncode", None) == 0 for r in results), results
    assert len(waits) == 1, waits
    assert waits[0].startswith("waiting for the GPU: held by profile of conv.cu (ana@gpu1, pid ")


@pytest.mark.usefixtures("held_gpu_lock")
def test_gpu_lock_busy_and_cancel_while_waiting(runner: LocalRunner, workdir: str) -> None:
    # The command's own time limit (1 s) is no limit on the wait: only the gpu_wait_timeout_s setting is.
    runner.gpu_wait_s = 1.5
    waits: list[str] = []
    runner.on_gpu_wait = waits.append
    t0 = time.monotonic()
    try:
        with pytest.raises(RunnerError) as ei:
            runner.run(["true"], workdir, 1, gpu_lock=True)
    finally:
        runner.on_gpu_wait = None
    assert ei.value.kind == "busy" and "the 1.5 s the gpu_wait_timeout_s setting allows" in str(ei.value)
    assert 1.5 <= time.monotonic() - t0 < 4.0
    # A holder that left no record (flock(1) from a shell) is still reported, once.
    assert waits == ["waiting for the GPU: held by another job (it did not say which); waited 0 s so far"]
    runner.gpu_wait_s = None
    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    try:
        with pytest.raises(Cancelled):
            runner.run(["true"], workdir, 60, cancel=cancel, gpu_lock=True)
    finally:
        timer.cancel()


# --------------------------------------------------------------------------------------------------
# Failure texts, runner selection, missing tools

NCU_COUNTERS = (
    "==PROF== Connected to process 9012 (/tmp/kernellsp-job-x/h_vector_add)\n"
    "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
    "on the target device 0. For instructions on enabling permissions and to get more information see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM\n"
    "==PROF== Disconnected from process 9012\n"
)
NO_DEVICE = (
    "==PROF== Connected to process 4242 (/tmp/kernellsp-job-x/prog)\n"
    "kinds.cu:54 no CUDA-capable device is detected\n"
    "==PROF== Disconnected from process 4242\n"
    "==ERROR== The application returned an error code (1).\n"
    "==WARNING== No kernels were profiled.\n"
)
NO_DEVICE_HARNESS = (
    "harness: cudaMalloc(&d_a, bytes) failed: cudaErrorNoDevice: no CUDA-capable device is detected\n"
)
OLD_DRIVER = "CUDA error: CUDA driver version is insufficient for CUDA runtime version\n"
PROFILER = (
    "==PROF== Connected to process 777 (/tmp/kernellsp-job-x/h_k)\n"
    "==ERROR== Failed to initialize the profiler. Check that the driver supports this GPU.\n"
    "==ERROR== An error was reported by the driver\n"
)
OK_RUN = (
    "==PROF== Connected to process 1 (/tmp/kernellsp-job-x/h_k)\n"
    '==PROF== Profiling "vector_add" - 0: 0%....50%....100% - 34 passes\n'
    "==PROF== Disconnected from process 1\n==PROF== Report: /tmp/kernellsp-job-x/prof_vector_add.ncu-rep\n"
)


def test_classify_failure_counters() -> None:
    err = classify_failure(NCU_COUNTERS)
    assert err is not None and err.kind == "counters"
    msg = str(err)
    assert "ERR_NVGPUCTRPERM" in msg
    assert "NVreg_RestrictProfilingToAdminUsers=0" in msg and "root" in msg
    assert "https://developer.nvidia.com/ERR_NVGPUCTRPERM" in msg


@pytest.mark.parametrize("text", [NO_DEVICE, NO_DEVICE_HARNESS, OLD_DRIVER])
def test_classify_failure_no_gpu(text: str) -> None:
    err = classify_failure(text)
    assert err is not None and err.kind == "no_gpu"
    assert "no usable CUDA GPU" in str(err) and "nvidia-smi" in str(err)


def test_classify_failure_profiler() -> None:
    err = classify_failure(PROFILER)
    assert err is not None and err.kind == "profiler"
    # The message quotes ncu's own last lines.
    assert "Failed to initialize the profiler" in str(err)
    assert "An error was reported by the driver" in str(err)


def test_classify_failure_ordering_and_clean_output() -> None:
    # Counter permission is the actionable one when both appear.
    err = classify_failure(NO_DEVICE + NCU_COUNTERS)
    assert err is not None and err.kind == "counters"
    assert classify_failure(OK_RUN) is None
    assert classify_failure("") is None
    assert classify_failure("==WARNING== No kernels were profiled.\n") is None


def test_make_runner() -> None:
    local = make_runner()
    assert isinstance(local, LocalRunner) and local.name == "this host"
    assert isinstance(make_runner("local"), LocalRunner)
    with pytest.raises(RunnerError) as ei:
        make_runner("none")
    assert ei.value.kind == "none" and "runner = none" in str(ei.value)
    ssh = make_runner("local", gpu_host="alice@gpu-box:2222")
    try:
        assert isinstance(ssh, SshRunner)
        assert (ssh.target, ssh.port, ssh.name) == ("alice@gpu-box", "2222", "alice@gpu-box:2222")
        assert ssh._base()[-3:] == ["-p", "2222", "alice@gpu-box"]
    finally:
        ssh.close()
    alias = make_runner("none", gpu_host="gpubox")  # a --gpu-host wins over runner = none
    try:
        assert isinstance(alias, SshRunner) and (alias.target, alias.port) == ("gpubox", None)
        assert "-p" not in alias._base()
    finally:
        alias.close()


@pytest.mark.parametrize("target", ["", "-oProxyCommand=touch /tmp/pwned", "user@host name", "host\tx"])
def test_ssh_target_is_validated(target: str) -> None:
    with pytest.raises(RunnerError) as ei:
        SshRunner(target)
    assert ei.value.kind == "bad_host"
    assert "user@host" in str(ei.value)


def test_require_missing_tool_names_the_fix(runner: LocalRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RunnerError) as ei:
        runner.require("kernellsp-no-such-tool")
    assert ei.value.kind == "no_kernellsp_no_such_tool"
    assert str(ei.value) == "kernellsp-no-such-tool not found on this host: install it there"
    monkeypatch.setattr(runner, "which", lambda tool: None)
    hints = {
        "nvcc": "install the CUDA toolkit",
        "ncu": "install Nsight Compute",
        "compute-sanitizer": "ships with the CUDA toolkit",
    }
    for tool, hint in hints.items():
        with pytest.raises(RunnerError) as ei:
            runner.require(tool)
        assert ei.value.kind == f"no_{tool.replace('-', '_')}"
        assert str(ei.value).startswith(f"{tool} not found on this host: ") and hint in str(ei.value)
        assert "PATH" in str(ei.value)


def test_require_present_tool_returns_its_path(runner: LocalRunner) -> None:
    path = runner.require("sh")
    assert Path(path).is_file() and os.access(path, os.X_OK)
    assert runner.which("sh") == path


# --------------------------------------------------------------------------------------------------
# The GPU lock file and the harness build cache


def test_gpu_lock_that_cannot_be_opened_is_named(
    runner: LocalRunner, workdir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locks = tmp_path / "locks"
    (locks / "kernellsp-gpu.lock").mkdir(parents=True)  # a directory where the lock file should be
    monkeypatch.setenv("KERNELLSP_GPU_LOCK_DIR", str(locks))
    with pytest.raises(RunnerError) as ei:
        runner.run(["true"], workdir, 5, gpu_lock=True)
    assert ei.value.kind == "lock"
    assert str(ei.value).startswith(f"cannot open the GPU lock {locks / 'kernellsp-gpu.lock'}: ")
    # A lock folder that does not exist: the message names the variable that chose it.
    monkeypatch.setenv("KERNELLSP_GPU_LOCK_DIR", str(tmp_path / "missing"))
    with pytest.raises(RunnerError, match=r"No such file or directory .*KERNELLSP_GPU_LOCK_DIR"):
        runner.run(["true"], workdir, 5, gpu_lock=True)


def test_cached_build_honours_no_cache(
    runner: LocalRunner, workdir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernellsp import cache

    monkeypatch.setenv("KERNELLSP_CACHE_DIR", str(tmp_path / "cache"))
    build = ["sh", "-c", "echo built > out; echo ran >> builds.log"]
    assert runner.cached_build("k1", build, "out", workdir, 30).returncode == 0
    assert (tmp_path / "cache" / "bin" / "k1").is_file()
    runner.cached_build("k1", build, "out", workdir, 30)  # served from the cache
    assert Path(workdir, "builds.log").read_text().count("ran") == 1
    runner.cached_build("k1", build, "out", workdir, 30, use_cache=False)  # --no-cache builds again
    monkeypatch.setenv("KERNELLSP_NO_CACHE", "1")
    runner.cached_build("k2", build, "out", workdir, 30)
    assert Path(workdir, "builds.log").read_text().count("ran") == 3
    assert not (tmp_path / "cache" / "bin" / "k2").exists(), "KERNELLSP_NO_CACHE=1 stored a binary"
    monkeypatch.delenv("KERNELLSP_NO_CACHE")
    cache.clear()  # `kernellsp cache clear` drops the binaries too
    assert not (tmp_path / "cache" / "bin").exists()


def test_tool_versions_parse_to_one_string() -> None:
    """The environment recorded with a profile (and keyed into its cache) holds version strings, never lists."""
    from kernellsp.build.toolchain import parse_version

    assert (
        parse_version(
            "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
        )
        == "13.0.88"
    )
    assert (
        parse_version(
            "NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0 (build 36398880)\n"
        )
        == "2025.3.1.0"
    )
    assert parse_version("ncu 2025.3 beta\n") == "ncu 2025.3 beta"
    assert parse_version("") is None


def test_commands_at_once_in_one_workdir_get_temporary_directories_of_their_own(
    runner: LocalRunner, workdir: str
) -> None:
    """In the sandbox every command is PID 2 and nvcc names its temporary files by PID: two builds at once in one
    TMPDIR would delete each other's files. Each command gets its own; an explicit TMPDIR is kept."""
    seen: list[str] = []

    def one() -> None:
        res = runner.run(
            ["sh", "-c", 'echo "$TMPDIR"; touch "$TMPDIR/x"; sleep 0.3; ls "$TMPDIR"'], workdir, 30
        )
        assert res.returncode == 0 and res.stdout.splitlines()[1:] == ["x"], res.output
        seen.append(res.stdout.splitlines()[0])

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 2 and all(Path(d).parent == Path(workdir) for d in seen)
    mine = Path(workdir) / "mine"
    mine.mkdir()
    res = runner.run(["sh", "-c", 'echo "$TMPDIR"'], workdir, 30, env={"TMPDIR": str(mine)})
    assert res.stdout.strip() == str(mine) and mine.is_dir()
