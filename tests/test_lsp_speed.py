"""Language-server latency paths: a client that answers ``workspace/configuration`` with ``null``."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import client_capabilities
from test_lsp_support import make_client, make_workspace, open_doc, publications, server_env


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
