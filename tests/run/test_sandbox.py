"""The sandbox for code under test (kernellsp.run.sandbox), through the runners that use it.

No GPU needed: a plain C++ program (tests/fixtures/sandbox/escape.cpp, built by nvcc, or g++ without
it) goes through exactly the wrapper the runners put around nvcc, the harness and the tools. It tries
to open internet sockets, read a key planted in a temporary ``$HOME``, write outside its scratch
directory, read secrets from the environment and from other processes, reach Unix sockets, and
outlive its timeout; every attempt must be blocked, and where the sandbox can see it, named.
The GPU parts (the harness and the verification gate inside the sandbox) are ``gpu``-marked at the end.
Needs bubblewrap (README set-up, command 2: ``apt-get install bubblewrap``).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernellsp.run import sandbox as sbx
from kernellsp.run.runner import LocalRunner, RunnerError, RunResult
from kernellsp.run.ssh import SshRunner

REPO = Path(__file__).resolve().parents[2]
ESCAPE = REPO / "tests" / "fixtures" / "sandbox" / "escape.cpp"
SECRET = "kernellsp-test-REAL-KEY-do-not-leak"
ENV_SECRET = "sk-kernellsp-test-env-secret-0123"

pytestmark = pytest.mark.skipif(not Path("/proc/self/ns/user").exists(), reason="Linux only (bubblewrap)")


def _bwrap_missing() -> str:
    return (
        ""
        if shutil.which("bwrap")
        else "bubblewrap is not installed: apt-get install bubblewrap (README set-up)"
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, session_cache_dir: Path) -> Iterator[Path]:
    """A temporary $HOME with a planted key, a toolchain directory on PATH, and an environment secret.

    Set for the whole module (the runner reads $HOME once, when it first checks the host).
    """
    h = tmp_path_factory.mktemp("home")
    (h / ".ssh").mkdir()
    (h / ".ssh" / "id_rsa").write_text(SECRET + "\n")
    (h / ".bashrc").write_text("# the user's own\n")
    tools = h / "tools" / "bin"
    tools.mkdir(parents=True)
    (tools / "kl-hello").write_text("#!/bin/sh\necho hello from a tool in the home\n")
    (tools / "kl-hello").chmod(0o755)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(h))
        mp.setenv("PATH", f"{tools}:{os.environ['PATH']}")
        mp.setenv("OPENAI_API_KEY", ENV_SECRET)
        mp.setenv("KERNELLSP_CACHE_DIR", str(session_cache_dir))
        mp.delenv("KERNELLSP_SANDBOX", raising=False)
        mp.delenv("KERNELLSP_BWRAP", raising=False)
        yield h


@pytest.fixture(scope="module")
def runner(home: Path, tmp_path_factory: pytest.TempPathFactory) -> LocalRunner:
    assert not _bwrap_missing(), _bwrap_missing()
    r = LocalRunner(scratch_root=tmp_path_factory.mktemp("scratch"))
    status = r.sandbox_status()
    assert status.confined, status.describe()
    return r


@pytest.fixture(scope="module")
def escape(runner: LocalRunner, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The escape program, built outside the sandbox (the build inside it is tested on its own below)."""
    out = tmp_path_factory.mktemp("escape-build") / "escape"
    nvcc = shutil.which("nvcc")
    cmd = [nvcc, "-O1", "-o", str(out), str(ESCAPE)] if nvcc else ["g++", "-O1", "-o", str(out), str(ESCAPE)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return out


@pytest.fixture
def workdir(runner: LocalRunner, escape: Path) -> Iterator[str]:
    wd = runner.new_workdir()
    shutil.copy2(escape, Path(wd) / "escape")
    yield wd
    runner.cleanup(wd)


def run(runner: LocalRunner, wd: str, *args: str) -> RunResult:
    return runner.run(["./escape", *args], wd, 60)


def violation(runner: LocalRunner, wd: str, *args: str) -> RunnerError:
    with pytest.raises(RunnerError) as ei:
        run(runner, wd, *args)
    assert ei.value.kind == "sandbox_violation", str(ei.value)
    assert ei.value.argv[0] == "./escape"
    return ei.value


# --------------------------------------------------------------------------------------------------
# The host check


def test_status_says_what_confines_the_code(runner: LocalRunner) -> None:
    s = runner.sandbox_status()
    assert s.mode == "bwrap" and s.confined and s.seccomp and s.canary and s.limits
    text = s.describe()
    for part in (
        "bubblewrap",
        "no network",
        "read-only file system",
        "internet sockets killed (seccomp)",
        "decoy reads and writes named",
    ):
        assert part in text, text
    assert s.to_dict()["summary"] == text
    assert (os.geteuid() == 0) == s.as_root


def test_an_ordinary_program_runs_and_writes_its_scratch(runner: LocalRunner, workdir: str) -> None:
    res = run(runner, workdir, "ok")
    assert res.returncode == 0 and res.stdout == "wrote\nok\n" and res.sandboxed
    assert res.stderr == ""  # the sandbox's own report is not part of the program's output
    assert (Path(workdir) / "out.txt").read_text().startswith("written by")
    assert not list(Path(runner.scratch_root).glob("kernellsp-canary-*")), "canary tree left behind"


def test_a_toolchain_in_the_home_stays_usable(runner: LocalRunner, workdir: str, home: Path) -> None:
    """conda's nvcc, pyenv's python, ~/cuda: the install prefixes on PATH are bound read-only."""
    res = runner.run(["kl-hello"], workdir, 30)
    assert res.returncode == 0 and res.stdout == "hello from a tool in the home\n", res.stderr
    assert f"{home}/tools" in runner._sandbox_probe()[0].facts.exposed()  # type: ignore[union-attr]


# --------------------------------------------------------------------------------------------------
# Network


@pytest.mark.parametrize("family", ["socket4", "socket6"])
def test_an_internet_socket_is_killed_and_named(runner: LocalRunner, workdir: str, family: str) -> None:
    err = violation(runner, workdir, family)
    assert err.violations[0].startswith("opened an internet socket")
    assert "seccomp" in str(err) and "escape broke the sandbox on this host" in str(err)


def test_unix_sockets_outside_are_unreachable(runner: LocalRunner, workdir: str, tmp_path: Path) -> None:
    """An ssh-agent or docker socket in /tmp, or an abstract one, is not reachable from inside."""
    path = tmp_path / "agent.sock"
    abstract = f"kernellsp-test-{os.getpid()}"
    servers = []
    for addr in (str(path), "\0" + abstract):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(addr)
        s.listen(1)
        servers.append(s)
    try:
        for target in (str(path), "@" + abstract):
            # The same program reaches both without the sandbox: the test can fail.
            plain = subprocess.run(
                [f"{workdir}/escape", "unix", target], capture_output=True, text=True, timeout=30
            )
            assert plain.stdout.strip() == "connected", plain.stdout
            res = run(runner, workdir, "unix", target)
            assert res.stdout.startswith("connect: "), res.stdout
    finally:
        for s in servers:
            s.close()


# --------------------------------------------------------------------------------------------------
# Home, keys, environment


def test_the_home_is_hidden_and_reading_a_key_is_named(runner: LocalRunner, workdir: str, home: Path) -> None:
    key = home / ".ssh" / "id_rsa"
    err = violation(runner, workdir, "read", str(key))
    assert err.violations == [f"read {key} (a decoy key: the real home is hidden)"]
    # Blocked: the program saw the decoy, never the planted key.
    assert SECRET not in str(err)
    res = subprocess.run([f"{workdir}/escape", "read", str(key)], capture_output=True, text=True, timeout=30)
    assert SECRET in res.stdout  # without the sandbox it would have


def test_a_read_hidden_by_resetting_atime_still_shows(runner: LocalRunner, workdir: str, home: Path) -> None:
    key = home / ".ssh" / "id_rsa"
    err = violation(runner, workdir, "read-reset", str(key))
    assert any(v.startswith(f"modified {key}") for v in err.violations), err.violations


def test_roots_home_is_hidden_too(runner: LocalRunner, workdir: str) -> None:
    if not Path("/root").is_dir():
        pytest.skip("no /root on this host")
    err = violation(runner, workdir, "read", "/root/.ssh/id_rsa")
    assert err.violations == ["read /root/.ssh/id_rsa (a decoy key: the real home is hidden)"]


def test_environment_secrets_are_not_visible(runner: LocalRunner, workdir: str) -> None:
    assert os.environ["OPENAI_API_KEY"] == ENV_SECRET
    res = runner.run(["./escape", "env", "OPENAI_API_KEY"], workdir, 30, env={"OPENAI_API_KEY": ENV_SECRET})
    assert res.stdout == "(unset)\n"
    # Nor through /proc: the sandbox has its own PID namespace, so this process's environ is out of reach.
    res = run(runner, workdir, "procenv", ENV_SECRET)
    assert res.stdout == "none\n"
    plain = subprocess.run(
        [f"{workdir}/escape", "procenv", ENV_SECRET], capture_output=True, text=True, timeout=30
    )
    assert plain.stdout.startswith("found"), plain.stdout  # without the sandbox: the test's own environ


# --------------------------------------------------------------------------------------------------
# Writes


def test_writing_to_tmp_is_named_and_never_lands(runner: LocalRunner, workdir: str) -> None:
    target = f"/tmp/kernellsp-sandbox-test-{os.getpid()}"
    err = violation(runner, workdir, "write", target)
    assert err.violations == [f"wrote {target} (outside its scratch directory)"]
    assert not Path(target).exists()


def test_writing_to_the_home_is_named_and_never_lands(runner: LocalRunner, workdir: str, home: Path) -> None:
    err = violation(runner, workdir, "write", str(home / ".bashrc"))
    assert err.violations == [
        f"modified {home}/.bashrc (outside its scratch directory)"
    ] or err.violations == [f"wrote {home}/.bashrc (outside its scratch directory)"]
    assert (home / ".bashrc").read_text() == "# the user's own\n"
    err = violation(runner, workdir, "write", str(home / ".ssh" / "authorized_keys"))
    assert f"wrote {home}/.ssh/authorized_keys (outside its scratch directory)" in err.violations
    assert not (home / ".ssh" / "authorized_keys").exists()


def test_the_rest_of_the_file_system_is_read_only(runner: LocalRunner, workdir: str) -> None:
    for target in (
        str(REPO / f"kernellsp-sandbox-test-{os.getpid()}"),
        "/etc/kernellsp-sandbox-test",
        f"/var/tmp/kernellsp-sandbox-test-{os.getpid()}",
    ):
        res = run(runner, workdir, "write", target)
        # A checkout under /tmp (CI clones) is hidden by the canary /tmp: its folder is not there at all.
        hidden = target.startswith("/tmp/")
        allowed = {"open: Read-only file system\n"} | (
            {"open: No such file or directory\n"} if hidden else set()
        )
        assert res.stdout in allowed, (target, res.stdout)
        assert not Path(target).exists()


# --------------------------------------------------------------------------------------------------
# Limits


def test_a_timeout_kills_everything_in_the_sandbox(runner: LocalRunner, workdir: str) -> None:
    """The child starts a session of its own (out of the runner's process group): the PID namespace ends it."""
    t0 = time.monotonic()
    with pytest.raises(RunnerError) as ei:
        runner.run(["./escape", "spawn-late", "late.txt"], workdir, 1)
    assert ei.value.kind == "timeout" and time.monotonic() - t0 < 5
    time.sleep(4)
    assert not (Path(workdir) / "late.txt").exists(), "a process of the sandbox outlived the timeout"


def test_resource_limits_are_set(runner: LocalRunner, workdir: str) -> None:
    res = runner.run(["sh", "-c", "ulimit -c; ulimit -n; ulimit -t"], workdir, 30)
    core, nofile, cpu = res.stdout.split()
    cpus = os.cpu_count() or 2
    assert core == "0" and nofile == "4096" and cpu != "unlimited" and int(cpu) <= 30 * max(2, cpus) + 60


def test_the_cpu_limit_scales_with_the_hosts_cpus() -> None:
    """RLIMIT_CPU sums every thread: racecheck uses several cores in the program under test (it was killed
    with SIGXCPU on a 16-core GPU host at twice the wall timeout)."""
    from kernellsp.run.sandbox import HostFacts, Sandbox, SandboxStatus

    def limit(text: str) -> int:
        box = Sandbox(HostFacts.parse(text), "sandbox.sh", None, "/tmp", SandboxStatus("bwrap", "local"))
        return box._cpu_limit(90)

    assert limit("cpus=16\n") == 90 * 16 + 60
    assert limit("cpus=1\n") == limit("") == 90 * 2 + 60


# --------------------------------------------------------------------------------------------------
# nvcc inside the sandbox


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) is not installed")
def test_nvcc_builds_in_the_sandbox_and_an_included_key_is_named(runner: LocalRunner, home: Path) -> None:
    """A compile cannot run code, but ``#include "~/.ssh/id_rsa"`` would copy the key into its errors."""
    nvcc = runner.require("nvcc")
    wd = runner.new_workdir()
    try:
        runner.put(
            {
                "k.cu": b"__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n",
                "bad.cu": f'#include "{home}/.ssh/id_rsa"\n__global__ void k() {{}}\n'.encode(),
            },
            wd,
        )
        res = runner.run([nvcc, "-arch=sm_90", "-c", "-o", "k.o", "k.cu"], wd, 300)
        assert res.returncode == 0 and res.sandboxed, res.stderr
        assert (Path(wd) / "k.o").stat().st_size > 0
        with pytest.raises(RunnerError) as ei:
            runner.run([nvcc, "-arch=sm_90", "-c", "-o", "bad.o", "bad.cu"], wd, 300)
        assert ei.value.kind == "sandbox_violation"
        assert f"read {home}/.ssh/id_rsa" in str(ei.value) and SECRET not in str(ei.value)
    finally:
        runner.cleanup(wd)


# --------------------------------------------------------------------------------------------------
# When the host cannot sandbox: said, never silent; `require` refuses


def test_without_bwrap_the_code_runs_unconfined_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KERNELLSP_BWRAP", "none")
    r = LocalRunner(scratch_root=tmp_path)
    s = r.sandbox_status()
    assert not s.confined and s.mode == "unconfined"
    assert s.describe().startswith("UNCONFINED on this host: bubblewrap (bwrap) is not installed")
    assert "apt-get install bubblewrap" in s.describe()
    wd = r.new_workdir()
    res = r.run(["sh", "-c", "echo unconfined"], wd, 30)
    assert res.returncode == 0 and res.stdout == "unconfined\n" and not res.sandboxed
    from kernellsp.doctor import sandbox_checks

    check = sandbox_checks()[0]
    assert check.status == "warn" and check.detail.startswith("UNCONFINED") and "bubblewrap" in check.fix
    monkeypatch.setenv("KERNELLSP_SANDBOX", "require")
    strict = LocalRunner(scratch_root=tmp_path)
    with pytest.raises(RunnerError) as ei:
        strict.run(["true"], wd, 30)
    assert (
        ei.value.kind == "sandbox"
        and "KERNELLSP_SANDBOX=require" in str(ei.value)
        and "bwrap" in str(ei.value)
    )


def test_a_bwrap_that_cannot_start_is_reported_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.0-fake'; exit 0; }\n"
        "echo 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow "
        "non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("KERNELLSP_BWRAP", str(fake))
    s = LocalRunner(scratch_root=tmp_path).sandbox_status()
    assert s.mode == "unconfined"
    assert "No permissions to creating new namespace" in s.reason and "unprivileged_userns_clone" in s.reason


def test_the_setting_is_validated_and_off_is_said(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERNELLSP_SANDBOX", "sometimes")
    with pytest.raises(RunnerError) as ei:
        LocalRunner(scratch_root=tmp_path)
    assert ei.value.kind == "sandbox" and "KERNELLSP_SANDBOX='sometimes'" in str(ei.value)
    off = LocalRunner(scratch_root=tmp_path, sandbox="off").sandbox_status()
    assert off.mode == "off" and "KERNELLSP_SANDBOX=off" in off.describe()


# --------------------------------------------------------------------------------------------------
# The parts, directly


def test_seccomp_filter_programs() -> None:
    for machine in ("x86_64", "aarch64"):
        prog = sbx.seccomp_filter(machine)
        assert prog is not None and len(prog) % 8 == 0 and len(prog) // 8 == 16
    assert sbx.seccomp_filter("riscv64") is None


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("/home/u/miniconda3/bin/nvcc", ["/home/u/miniconda3"]),
        ("/home/u/miniconda3/lib", ["/home/u/miniconda3"]),
        ("/home/u/.pyenv/versions/3.11.7/bin/python3.11", ["/home/u/.pyenv/versions/3.11.7"]),
        ("/home/u/cuda-12.4", ["/home/u/cuda-12.4"]),
        ("/home/u/bin", ["/home/u/bin"]),
        ("/home/u/.local/bin", ["/home/u/.local/bin"]),
        ("/home/u/.local/bin/ncu", ["/home/u/.local/bin"]),
        ("/home/u/.ssh/bin/tool", []),
        ("/home/u/.config/tool/bin", []),
        ("/home/u/.local/share/keyrings", []),
        ("/home/u", []),
        ("/usr/local/cuda/bin", []),
    ],
)
def test_what_of_a_hidden_home_is_bound_for_the_toolchain(path: str, want: list[str]) -> None:
    assert sbx.exposed_prefixes(path, ["/home/u", "/root"]) == want


def test_report_parsing_keeps_the_programs_stderr() -> None:
    stderr = (
        "prog says hi\nno newline at the end\n__kernellsp_sandbox_report__ abc\nread home0/.ssh/id_rsa\n"
        "created tmp/x\nchanged tmp/x\n__kernellsp_sandbox_end__ abc\n"
    )
    clean, lines, error = sbx.parse_report(stderr, "abc")
    assert clean == "prog says hi\nno newline at the end" and error is None
    assert lines == ["read home0/.ssh/id_rsa", "created tmp/x", "changed tmp/x"]
    # A report with another nonce (printed by the program itself) is the program's output.
    clean, lines, _ = sbx.parse_report(stderr, "other")
    assert clean == stderr and lines == []


# --------------------------------------------------------------------------------------------------
# Over ssh: the same wrapper on the GPU host


@pytest.fixture(scope="module")
def ssh_runner(sshd_server: object) -> Iterator[SshRunner]:
    from helpers import sshd

    assert isinstance(sshd_server, sshd.SshServer)
    r = SshRunner(sshd_server.target, ssh=sshd_server.ssh, extra_options=sshd_server.options)
    yield r
    r.close()


def test_ssh_runner_sandboxes_the_remote_side(ssh_runner: SshRunner, escape: Path) -> None:
    status = ssh_runner.sandbox_status()
    assert status.confined and status.seccomp and status.canary, status.describe()
    wd = ssh_runner.new_workdir()
    try:
        ssh_runner.put({"escape": escape.read_bytes()}, wd)
        assert ssh_runner.run(["chmod", "+x", "escape"], wd, 30).returncode == 0
        res = ssh_runner.run(["./escape", "ok"], wd, 30)
        assert res.returncode == 0 and res.stdout == "wrote\nok\n" and res.sandboxed and res.stderr == ""
        remote_home = status_home(ssh_runner)
        for args, want in (
            (["socket4"], "opened an internet socket"),
            (["read", f"{remote_home}/.ssh/id_rsa"], f"read {remote_home}/.ssh/id_rsa"),
            (["write", "/tmp/kernellsp-ssh-sandbox-test"], "wrote /tmp/kernellsp-ssh-sandbox-test"),
        ):
            with pytest.raises(RunnerError) as ei:
                ssh_runner.run(["./escape", *args], wd, 30)
            assert ei.value.kind == "sandbox_violation" and any(
                v.startswith(want) for v in ei.value.violations
            ), (args, str(ei.value))
        assert not Path("/tmp/kernellsp-ssh-sandbox-test").exists()
    finally:
        ssh_runner.cleanup(wd)


def status_home(r: SshRunner) -> str:
    sb = r._sandbox_probe()[0]
    assert sb is not None and sb.facts.homes
    return sb.facts.homes[0]


# --------------------------------------------------------------------------------------------------
# Concurrency: builds run in threads; the host check happens once


def test_the_host_check_runs_once_for_concurrent_first_uses(tmp_path: Path) -> None:
    r = LocalRunner(scratch_root=tmp_path)
    calls = []
    real = sbx.probe

    def counting(host: sbx.ProbeHost, setting: str) -> object:
        calls.append(1)
        return real(host, setting)

    wd = r.new_workdir()
    mp = pytest.MonkeyPatch()
    mp.setattr(sbx, "probe", counting)
    try:
        threads = [threading.Thread(target=r.run, args=(["true"], wd, 30)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        mp.undo()
    assert len(calls) == 1


def test_decoys_are_readable_only_by_the_user(runner: LocalRunner) -> None:
    """The canary tree is private (umask 077): another user on the host cannot tamper with it mid-run."""
    text = sbx.script_bytes().decode()
    assert "umask 077" in text
    mode = stat.S_IMODE(Path(runner._sandbox_probe()[0].script).parent.stat().st_mode)  # type: ignore[union-attr]
    assert mode & 0o077 == 0


# --------------------------------------------------------------------------------------------------
# On a GPU: the driver works in the sandbox, and the gate names what host code does there


def _gpu_runner() -> LocalRunner:
    if shutil.which("nvidia-smi") is None or shutil.which("nvcc") is None:
        pytest.skip("needs an NVIDIA GPU and nvcc")
    r = LocalRunner()
    status = r.sandbox_status()
    assert status.confined, status.describe()
    return r


@pytest.mark.gpu
def test_the_harness_runs_kernels_in_the_sandbox() -> None:
    """nvidia-smi, nvcc and the harness (check and time modes) all inside bwrap, with the GPU reachable."""
    from kernellsp.profile.environment import runner_environment
    from kernellsp.run import harness
    from kernellsp.source import spec
    from kernellsp.source.model import parse_source

    r = _gpu_runner()
    env = runner_environment(r, use_cache=False)
    assert env.get("gpu") and env.get("driver"), env
    text = (REPO / "samples" / "vector_add.cu").read_text()
    model = parse_source(text, "vector_add.cu")
    bound = spec.entry_spec(model, "vector_add")
    assert bound is not None
    plan = harness.plan_harness(model, bound.spec, "vector_add")
    wd = r.new_workdir()
    try:
        r.put(
            {
                "src/vector_add.cu": text.encode(),
                "h.cu": harness.generate_harness(plan, "src/vector_add.cu").encode(),
            },
            wd,
        )
        nvcc = r.require("nvcc")
        cmd = [
            nvcc if a == "nvcc" else a
            for a in harness.harness_compile_command("h.cu", "h", "sm_90", list(plan.flags))
        ]
        built = r.run(cmd, wd, 600)
        assert built.returncode == 0 and built.sandboxed, built.output[-2000:]
        for mode, extra in (("check", {}), ("time", {"reps": 5, "warmup": 2})):
            res = r.run(
                harness.harness_argv("./h", mode, f"out_{mode}", shape=0, seed=7, **extra),
                wd,
                120,  # type: ignore[arg-type]
                gpu_lock=True,
            )
            assert res.sandboxed
            out = harness.read_result(Path(wd) / f"out_{mode}")
            assert out.ok, (mode, out.error, res.output[-2000:])
        assert not harness.read_result(Path(wd) / "out_check").unwritten_outputs()
    finally:
        r.cleanup(wd)


def _sandbox_cases() -> list[dict[str, object]]:
    import tomllib

    cases = tomllib.loads((REPO / "tests" / "adversarial" / "manifest.toml").read_text())["case"]
    return [c for c in cases if "sandbox" in c]


@pytest.mark.gpu
@pytest.mark.parametrize("case", _sandbox_cases(), ids=lambda c: str(c["name"]))
def test_host_code_that_breaks_out_is_a_sandbox_violation(
    case: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adversarial host launchers with the scope gate bypassed: the sandbox is the second line."""
    from kernellsp.optimize.verify import gate
    from kernellsp.optimize.verify.scope import ScopeResult

    r = _gpu_runner()
    monkeypatch.setattr(gate, "check_scope", lambda *a, **k: ScopeResult(True))
    base = REPO / case["baseline"]
    v = gate.verify(
        base,
        base.read_text(),
        (REPO / case["candidate"]).read_text(),
        case["entry"],
        r,
        gate.VerifyOptions(seeds=1, rounds=2, reps=3, sanitize=False),
    )
    assert v.kind == "sandbox_violation", f"{v.kind}: {v.message}"
    assert case["sandbox"] in v.message, v.message
    assert v.environment["sandbox"]["confined"] is True
    assert not Path("/tmp/kernellsp-adversarial-dropped").exists()


def test_a_wiped_cache_sets_the_sandbox_up_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A language server outlives `rm -rf ~/.cache`: the wrapper and filter are written again, not missed."""
    monkeypatch.setenv("KERNELLSP_CACHE_DIR", str(tmp_path / "cache"))
    r = LocalRunner(scratch_root=tmp_path)
    wd = r.new_workdir()
    assert r.run(["true"], wd, 30).sandboxed
    sb = r._sandbox_probe()[0]
    assert sb is not None and Path(sb.script).is_file()
    shutil.rmtree(tmp_path / "cache")
    res = r.run(["sh", "-c", "echo again"], wd, 30)
    assert res.stdout == "again\n" and res.sandboxed
    assert Path(r._sandbox_probe()[0].script).is_file()  # type: ignore[union-attr]
