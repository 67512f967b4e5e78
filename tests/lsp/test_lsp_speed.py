"""Language-server latency paths: a client that answers ``workspace/configuration`` with ``null``."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.lsp_support import (
    change_doc,
    lsp_session,
    make_client,
    make_workspace,
    open_doc,
    publications,
    save_doc,
    server_env,
)
from lsprotocol import types
from pytest_lsp import client_capabilities


async def _first_diagnostics_with(answer: Any, tmp_path: Path) -> tuple[float, list[types.ShowMessageParams]]:
    """Open vector_add.cu with a client whose ``workspace/configuration`` handler returns ``answer``."""
    ws = make_workspace(tmp_path)
    client = make_client()
    shown: list[types.ShowMessageParams] = []
    client.protocol.fm.features[types.WORKSPACE_CONFIGURATION] = lambda _params: answer
    client.protocol.fm.features[types.WINDOW_SHOW_MESSAGE] = shown.append
    await client.start_io(sys.executable, "-m", "kernellsp", "serve", env=server_env())
    try:
        await client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("neovim@v0.11"),
                root_uri=ws.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=ws.as_uri(), name=ws.name)],
            )
        )
        t = time.monotonic()
        uri = open_doc(client, ws / "vector_add.cu")
        while not publications(client, uri):
            if time.monotonic() - t > 60:
                raise TimeoutError("no diagnostics")
            await asyncio.sleep(0.01)
        elapsed = time.monotonic() - t
        await asyncio.wait_for(client.shutdown_session(), 15)
    finally:
        await client.stop()
    return elapsed, shown


@pytest.mark.parametrize("answer", [None, [None], "not a list"], ids=["null", "list-of-null", "garbage"])
async def test_an_unreadable_configuration_answer_is_no_settings_without_a_popup(
    answer: Any, tmp_path: Path
) -> None:
    """``null`` (or an answer of the wrong shape) means "no settings": no 'Invalid Params' pop-up about our own
    request, and the check does not wait for the 5 s configuration timeout."""
    elapsed, shown = await _first_diagnostics_with(answer, tmp_path)
    assert not shown, shown
    assert elapsed < 4.5, (
        f"the first diagnostics took {elapsed:.1f} s: the check waited for the configuration"
    )


# --------------------------------------------------------------------------------------------------
# Save → profile without a GPU: stand-ins for nvidia-smi and ncu, everything else real

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "tests" / "fixtures" / "ncu" / "samples-h100" / "vector_add.vector_add.ncu-rep"
PROFILE_CODES = ("KL5", "KL6")


def _stand_ins(bindir: Path, log: Path) -> None:
    """``nvidia-smi`` answering kernellsp's two queries like an H100, ``ncu`` handing back the committed report."""
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text(
        "#!/usr/bin/env python3\n"
        "import sys\n"
        "q = next((a.split('=', 1)[1] for a in sys.argv if a.startswith('--query-gpu=')), '')\n"
        "vals = {'name': 'NVIDIA H100 80GB HBM3', 'driver_version': '580.159.04', 'memory.total': '81559',\n"
        "        'clocks.sm': '1980', 'clocks.max.sm': '1980', 'clocks.mem': '2619', 'clocks.max.mem': '2619'}\n"
        "print(', '.join(vals.get(k, '0') for k in q.split(',')))\n"
    )
    ncu = bindir / "ncu"
    ncu.write_text(
        "#!/usr/bin/env python3\n"
        "import json, shutil, sys\n"
        "if '--version' in sys.argv:\n"
        "    print('NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 1)')\n"
        "    sys.exit(0)\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "out = sys.argv[sys.argv.index('--export') + 1]\n"
        f"shutil.copy({str(REPORT)!r}, out + '.ncu-rep')\n"
    )
    for f in (smi, ncu):
        f.chmod(0o755)


def _ncu_calls(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


async def _profiled(client: Any, uri: str, after: int, version: int, timeout: float = 120.0) -> float:
    t = time.monotonic()
    while True:
        pubs = publications(client, uri)[after:]
        if any(
            p.version == version and any(str(d.code).startswith(PROFILE_CODES) for d in p.diagnostics)
            for p in pubs
        ):
            return time.monotonic() - t
        if time.monotonic() - t > timeout:
            raise TimeoutError(f"no profile diagnostics for version {version}")
        await asyncio.sleep(0.01)


@pytest.mark.slow
async def test_save_profiles_once_per_content_with_the_check_not_after_it(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    if not REPORT.is_file() or shutil.which("nvcc") is None:
        pytest.skip("needs nvcc and the committed H100 report")
    bindir, log = tmp_path / "bin", tmp_path / "ncu-calls.jsonl"
    _stand_ins(bindir, log)
    ws = make_workspace(tmp_path)
    path = ws / "vector_add.cu"
    env = server_env(
        PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}",
        KERNELLSP_CACHE_DIR=str(tmp_path / "cache"),
        KERNELLSP_SANDBOX="off",
    )
    async with lsp_session("neovim@v0.11", ws, env=env) as client:
        uri = open_doc(client, path)
        await _profiled(client, uri, 0, 1)
        assert _ncu_calls(log) == 1
        # An edit, then two saves of the same text at once: one profile (the second save keeps the running job).
        text = path.read_text() + "// edited\n"
        change_doc(client, uri, 2, text)
        n = len(publications(client, uri))
        save_doc(client, uri)
        save_doc(client, uri)
        took = await _profiled(client, uri, n, 2)
        assert _ncu_calls(log) == 2, "the same content was profiled twice"
        assert took < 60
        # The unchanged text again: the cache answers, no build, no ncu, no debounce.
        n = len(publications(client, uri))
        t = time.monotonic()
        save_doc(client, uri)
        await _profiled(client, uri, n, 2)
        assert time.monotonic() - t < 5 and _ncu_calls(log) == 2
        # A burst of saves of different texts: only the newest reaches ncu (the older jobs are cancelled
        # while they build, before the debounce lets them at the GPU).
        change_doc(client, uri, 3, text + "// 3\n")
        save_doc(client, uri)
        change_doc(client, uri, 4, text + "// 4\n")
        n = len(publications(client, uri))
        save_doc(client, uri)
        await _profiled(client, uri, n, 4)
        await asyncio.sleep(1.0)
        assert _ncu_calls(log) == 3
