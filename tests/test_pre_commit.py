"""The pre-commit hook, run by the real ``pre-commit run --all-files`` in a throw-away repository.

The hook repository is a git clone of this repository whose last commit holds the working tree's
``.pre-commit-hooks.yaml`` and the installable package (so the test checks what is in the tree, committed
or not); pre-commit clones it by path at that commit and builds the hook's virtual environment with pip,
through the index this machine is configured with (pip.conf, ``PIP_*``). The clone and pre-commit's
cache live in the CI cache (``.ci/cache`` or ``$KERNELLSP_CI_CACHE``), and the snapshot commit is
deterministic, so a second run with the same tree reuses the environment.

A file with a warning (KL401, a double literal in a float kernel) fails the hook with the finding in its
output; once fixed, the hook passes; files that are not CUDA are never passed to it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.common import requires_nvcc

ROOT = Path(__file__).resolve().parent.parent
#: What pre-commit needs from this repository: the hook manifest and an installable package.
HOOK_PATHS = [
    ".pre-commit-hooks.yaml",
    "pyproject.toml",
    "setup.py",
    "MANIFEST.in",
    "README.md",
    "kernellsp",
    "rules",
]
GIT_ENV = {
    "GIT_AUTHOR_NAME": "kernellsp test",
    "GIT_AUTHOR_EMAIL": "test@kernellsp.invalid",
    "GIT_COMMITTER_NAME": "kernellsp test",
    "GIT_COMMITTER_EMAIL": "test@kernellsp.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}
KERNEL = """\
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * SCALE;
}
"""


def _git(*args: str, cwd: Path) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120, env={**os.environ, **GIT_ENV}
    )
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


def _hook_repo(cache: Path) -> tuple[Path, str]:
    """A clone of this repository with the working tree's hook files committed on top; (path, commit)."""
    clone = cache / "pre-commit-hook-repo"
    if not (clone / ".git").is_dir():
        shutil.rmtree(clone, ignore_errors=True)
        _git("clone", "-q", "--no-checkout", str(ROOT), str(clone), cwd=cache)
    head = _git("rev-parse", "HEAD", cwd=ROOT)
    _git("fetch", "-q", str(ROOT), head, cwd=clone)
    _git("checkout", "-q", "-f", "--detach", head, cwd=clone)
    for rel in HOOK_PATHS:
        target = clone / rel
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    files = _git("ls-files", "-co", "--exclude-standard", "--", *HOOK_PATHS, cwd=ROOT).splitlines()
    for rel in files:
        src = ROOT / rel
        if src.is_file():
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / rel)
    _git("add", "-A", "--", *HOOK_PATHS, cwd=clone)
    if _git("status", "--porcelain", cwd=clone):
        _git("commit", "-q", "-m", "working tree snapshot for the pre-commit test", cwd=clone)
    return clone, _git("rev-parse", "HEAD", cwd=clone)


def _pre_commit(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "pre-commit"
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "pre_commit"]
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never", **GIT_ENV}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [*argv, *(args or ("run", "--all-files"))],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


@requires_nvcc
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_pre_commit_hook_runs_kernellsp_check(tmp_path: Path) -> None:
    pytest.importorskip("pre_commit", reason="pre-commit is in the test extras")
    if shutil.which("git") is None:
        pytest.skip("git not found")
    cache = Path(os.environ.get("KERNELLSP_CI_CACHE") or ROOT / ".ci" / "cache")
    cache.mkdir(parents=True, exist_ok=True)
    hook_repo, rev = _hook_repo(cache)

    project = tmp_path / "project"
    project.mkdir()
    _git("init", "-q", cwd=project)
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_repo}\n    rev: {rev}\n    hooks:\n      - id: kernellsp\n"
    )
    (project / "scale.cu").write_text(KERNEL.replace("SCALE", "0.1"))  # a double literal: KL401 (warning)
    (project / "notes.txt").write_text("not CUDA: never checked\n")
    _git("add", ".", cwd=project)

    failed = _pre_commit(project, cache / "pre-commit-home")
    out = failed.stdout + failed.stderr
    assert failed.returncode == 1, out
    assert "kernellsp (CUDA kernel findings)" in out and "Failed" in out, out
    assert "scale.cu:4:" in out and "warning: KL401" in out, out
    assert "notes.txt" not in out

    (project / "scale.cu").write_text(KERNEL.replace("SCALE", "0.1f"))
    _git("add", ".", cwd=project)
    passed = _pre_commit(project, cache / "pre-commit-home")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "kernellsp (CUDA kernel findings)" in passed.stdout and "Passed" in passed.stdout
    # The hook's own environment carries nvdisasm (issue 31 item 5.4), where kernellsp finds it.
    envs = list(
        (cache / "pre-commit-home").glob("repo*/py_env-*/lib/python*/site-packages/nvidia/cu*/bin/nvdisasm")
    )
    assert envs, "the hook's environment has no nvdisasm"
    assert "nvdisasm not found" not in out
    # Environments of earlier snapshots (older commits of this repository) go; this one stays for the next run.
    _pre_commit(project, cache / "pre-commit-home", "gc")
