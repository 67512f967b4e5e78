"""Both editor clients find a server installed with pipx / pip --user when it is not on the editor's PATH
(issue 31 item 5.1: an editor started from a desktop menu often lacks ~/.local/bin)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VSCODE = REPO / "editor-clients" / "vscode"
NEOVIM = REPO / "editor-clients" / "neovim"


def _user_bin(home: Path) -> Path:
    exe = home / ".local" / "bin" / "kernellsp"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    return exe


def _bare_path() -> str:
    """PATH without any folder that holds a kernellsp executable (the test's venv has one)."""
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(d for d in dirs if d and not (Path(d) / "kernellsp").exists())


def test_vscode_finds_the_pipx_executable(tmp_path: Path) -> None:
    esbuild = VSCODE / "node_modules" / ".bin" / "esbuild"
    node = shutil.which("node")
    if node is None or not esbuild.exists():
        pytest.skip("needs node and the extension's node_modules (editor-clients/vscode/e2e/prepare.sh)")
    bundle = tmp_path / "server.js"
    subprocess.run(
        [
            str(esbuild),
            str(VSCODE / "src" / "server.ts"),
            "--bundle",
            "--platform=node",
            f"--outfile={bundle}",
        ],
        check=True,
        capture_output=True,
    )
    home = tmp_path / "home"
    exe = _user_bin(home)
    script = f"console.log(JSON.stringify(require({json.dumps(str(bundle))}).findServer('', [])))"
    env = {**os.environ, "HOME": str(home), "PATH": _bare_path()}
    env.pop("PIPX_BIN_DIR", None)
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, env=env, check=True)
    got = json.loads(out.stdout)
    assert got["found"] == {"command": str(exe), "args": ["serve"], "via": "user bin"}
    assert "PATH: no kernellsp executable" in got["tried"]
    exe.unlink()
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, env=env, check=True)
    assert "found" not in json.loads(out.stdout)


def test_neovim_finds_the_pipx_executable(tmp_path: Path) -> None:
    nvim = shutil.which("nvim")
    if nvim is None:
        pytest.skip("nvim not on PATH")
    home = tmp_path / "home"
    exe = _user_bin(home)
    lua = "io.write(require('kernellsp').server_path())"
    nvbin = tmp_path / "nvbin"  # nvim alone (its own folder may hold a kernellsp, e.g. the test venv's bin)
    nvbin.mkdir()
    (nvbin / "nvim").symlink_to(nvim)
    env = {**os.environ, "HOME": str(home), "PATH": os.pathsep.join([str(nvbin), _bare_path()])}
    env.pop("PIPX_BIN_DIR", None)
    out = subprocess.run(
        [
            str(nvbin / "nvim"),
            "--headless",
            "--clean",
            "--cmd",
            f"set rtp+={NEOVIM}",
            "-c",
            f"lua {lua}",
            "-c",
            "qa!",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (out.stdout + out.stderr).strip().endswith(str(exe)), out
