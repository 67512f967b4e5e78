"""The ssh runner end to end on a GPU host: profile and verify through ssh to localhost (``pytest -m gpu``).

The GPU machine reaches itself over ssh: a real OpenSSH server on 127.0.0.1 (``tests/helpers/sshd.py``; on a
host without OpenSSH, ``KERNELLSP_TEST_SSH_BUNDLE`` points at a bundle made by
``tests/ssh_bundle.sh``) and :class:`kernellsp.run.ssh.SshRunner` with the test key. Everything the
remote side does — harness generation is local, but the nvcc build, ncu, the harness runs, the lock
and the scratch directories — happens in the ssh session, whose environment is the runner's clean
one, not this process's. The results must match what the local runner finds on the same GPU.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import sshd

from kernellsp.optimize.loop import replay
from kernellsp.optimize.verify.gate import VerifyOptions
from kernellsp.profile.environment import runner_environment
from kernellsp.profile.ncu import ProfileError, ProfileOptions, profile_file
from kernellsp.run.runner import LocalRunner, RunnerError
from kernellsp.run.ssh import SshRunner

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def remote(sshd_server: sshd.SshServer) -> Iterator[SshRunner]:
    if shutil.which("nvidia-smi") is None or shutil.which("ncu") is None:
        pytest.skip("needs an NVIDIA GPU with ncu")
    r = SshRunner(sshd_server.target, ssh=sshd_server.ssh, extra_options=sshd_server.options)
    yield r
    r.close()


def _line_of(name: str, needle: str) -> int:
    lines = (ROOT / "samples" / name).read_text().splitlines()
    return next(i for i, ln in enumerate(lines) if needle in ln)


def test_remote_environment_is_this_gpu(remote: SshRunner) -> None:
    env = runner_environment(remote)
    local = runner_environment(LocalRunner())
    assert env["gpu"] == local["gpu"] and env["driver"] == local["driver"]
    assert env["ncu_version"] == local["ncu_version"] and env["nvcc_version"] == local["nvcc_version"]
    assert env["runner"] == remote.name


def test_profile_over_ssh_finds_the_uncoalesced_store(remote: SshRunner, tmp_path: Path) -> None:
    path = ROOT / "samples" / "transpose_naive.cu"
    out = profile_file(
        path, path.read_text(), remote, ProfileOptions(use_cache=False, save_report_dir=tmp_path)
    )
    assert out.environment["runner"] == remote.name
    [k] = out.kernels
    assert k.name == "transpose_naive" and k.duration_ns and k.duration_ns > 0
    store = _line_of("transpose_naive.cu", "out[")
    assert [f.range.start_line for f in out.findings if f.code == "KL601"] == [store]
    # The .ncu-rep came back over ssh and reads here.
    assert [Path(p).suffix for p in out.reports] == [".ncu-rep"] and Path(out.reports[0]).is_file()


def test_profile_over_ssh_host_launcher(remote: SshRunner) -> None:
    path = ROOT / "samples" / "relu_launcher.cu"
    out = profile_file(path, path.read_text(), remote, ProfileOptions(use_cache=False))
    assert [k.entry for k in out.kernels] == ["solve"] and out.kernels[0].duration_ns


def test_kernel_crash_over_ssh_is_named(remote: SshRunner, tmp_path: Path) -> None:
    src = (ROOT / "samples" / "vector_add.cu").read_text()
    body_start = src.index("{", src.index("__global__")) + 1
    crashing = src[:body_start] + "\n    __trap();\n" + src[body_start:]
    path = tmp_path / "vector_add.cu"
    path.write_text(crashing)
    with pytest.raises((ProfileError, RunnerError)) as ei:
        profile_file(path, crashing, remote, ProfileOptions(use_cache=False))
    msg = str(ei.value)
    # A failure of the run itself, named as such: not a build error, not a missing spec.
    assert ei.value.kind not in ("build", "no_spec"), msg
    assert "Traceback" not in msg


def test_replay_bundle_over_ssh_is_accepted(remote: SshRunner) -> None:
    """The committed softmax_row win, re-verified (correctness, sanitizer, timing) through ssh."""
    bundle = ROOT / "tests" / "fixtures" / "bundles" / "softmax_row-tuner"
    verdict, recorded = replay(bundle, remote, VerifyOptions(seeds=2, rounds=4, reps=10))
    assert recorded["kind"] == "accepted"
    assert verdict.kind == "accepted" and verdict.accepted, (verdict.message, verdict.details)
    assert verdict.environment.get("runner") == remote.name
    assert verdict.speedup is not None and verdict.speedup > 1.2
