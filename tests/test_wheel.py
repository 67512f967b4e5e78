"""The wheel works without the source tree: it ships every rule, and `check` agrees with the checkout.

Builds the wheel from this repository as pip does for users (an isolated build environment from the
package index, as in README's set-up), installs it with ``--target``
into a temporary folder and runs ``python -I -S`` with only that folder and the environment's
site-packages on ``sys.path``, so neither the editable install's finder nor the checkout can supply
``kernellsp`` or ``rules/``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from helpers.common import REPO, SAMPLES_DIR, requires_nvcc

RULE_FILES = sorted(p.name for p in (REPO / "rules").glob("*.toml"))


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("kernellsp-*.whl")
    target = out / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    return target


def _run_installed(target: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # -I -S: no user site, no .pth files (the editable finder lives in one), no cwd on sys.path.
    paths = [str(target), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    boot = f"import sys; sys.path[:0] = {paths!r}; sys.argv[0] = 'kernellsp'; from kernellsp.cli import main; main()"
    env = {k: v for k, v in os.environ.items() if k != "KERNELLSP_RULES_DIR"}
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", boot, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_wheel_contains_every_rule_file(installed_wheel: Path) -> None:
    (wheel,) = installed_wheel.parent.glob("kernellsp-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(
        Path(n).name for n in names if n.startswith("kernellsp/data/rules/") and n.endswith(".toml")
    )
    assert shipped == RULE_FILES


def test_installed_rules_lists_every_rule(installed_wheel: Path, tmp_path: Path) -> None:
    res = _run_installed(installed_wheel, "rules", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for name in RULE_FILES:
        assert name.split("-")[0] in res.stdout


def test_installed_without_rules_is_an_error_not_silence(installed_wheel: Path, tmp_path: Path) -> None:
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(installed_wheel, broken)
    shutil.rmtree(broken / "kernellsp" / "data" / "rules")
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    res = _run_installed(broken, "check", "k.cu", cwd=tmp_path)
    assert res.returncode == 2
    assert "no bundled rule files" in res.stdout + res.stderr


@requires_nvcc
def test_installed_check_matches_the_checkout(installed_wheel: Path, tmp_path: Path) -> None:
    def findings(res: subprocess.CompletedProcess[str]) -> list[tuple[str, str, int]]:
        data = json.loads(res.stdout)
        return sorted((Path(f["path"]).name, f["code"], f["range"]["start_line"]) for f in data["findings"])

    installed = _run_installed(installed_wheel, "check", "--format", "json", str(SAMPLES_DIR), cwd=tmp_path)
    editable = subprocess.run(
        [sys.executable, "-m", "kernellsp", "check", "--format", "json", str(SAMPLES_DIR)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == editable.returncode, installed.stderr
    assert findings(installed) and findings(installed) == findings(editable)
