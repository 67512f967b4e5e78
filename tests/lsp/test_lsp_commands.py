"""Commands end to end: addLaunchSpec (workspace/applyEdit), showRule, checkFile."""

# ruff: noqa: F401, F811  (pytest fixtures are imported from helpers/lsp_support.py and used as parameters)

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.lsp_support import (  # shared fixtures and helpers
    apply_text_edits,
    client,
    client_name,
    edits_for,
    open_doc,
    publications,
    spec_problems,
    wait_publications,
    workspace,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient


async def _run(client: LanguageClient, command: str, *args: object) -> object:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=list(args))
    )


async def test_commands_advertised(client: LanguageClient) -> None:
    cmds = client.init_result.capabilities.execute_command_provider.commands
    assert sorted(cmds) == [
        "kernellsp.addLaunchSpec",
        "kernellsp.cancelJob",
        "kernellsp.checkFile",
        "kernellsp.checkWorkspace",
        "kernellsp.optimize",
        "kernellsp.revert",
        "kernellsp.showProfile",
        "kernellsp.showRule",
        "kernellsp.status",
    ]


async def test_add_launch_spec_applies_edit(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "nospec.cu"
    uri = open_doc(client, path)
    result = await _run(client, "kernellsp.addLaunchSpec", uri, "vector_add")
    assert result == {"applied": True, "reason": None}
    assert len(client.edits) == 1
    params = client.edits[0]
    assert params.label == "Add launch spec for vector_add"
    new_text = apply_text_edits(path.read_text(), edits_for(params.edit, uri))
    assert spec_problems(new_text, "vector_add") == []


async def test_add_launch_spec_refusals(client: LanguageClient, workspace: Path) -> None:
    uri = open_doc(client, workspace / "vector_add.cu")
    result = await _run(client, "kernellsp.addLaunchSpec", uri, "vector_add")
    assert result == {"applied": False, "reason": "vector_add already has a launch spec"}
    result = await _run(client, "kernellsp.addLaunchSpec", uri, "nope")
    assert result["applied"] is False and "no __global__ kernel named 'nope'" in result["reason"]
    assert client.edits == []
    # The editor refuses the edit: the command says so and the user is told once.
    uri2 = open_doc(client, workspace / "nospec.cu")
    client.apply_edit_result = False
    result = await _run(client, "kernellsp.addLaunchSpec", uri2, "vector_add")
    assert result == {"applied": False, "reason": "test says no"}
    assert [m.message for m in client.messages if "could not add a launch spec" in m.message]


async def test_show_rule(client: LanguageClient) -> None:
    text = await _run(client, "kernellsp.showRule", "kl101")
    assert text.startswith("KL101 ")
    assert "fix:" in text and "when:" in text
    with pytest.raises(JsonRpcException, match="no rule 'KL999'"):
        await _run(client, "kernellsp.showRule", "KL999")


async def test_check_file(client: LanguageClient, workspace: Path) -> None:
    uri = open_doc(client, workspace / "nospec.cu", version=7)
    await wait_publications(client, uri)
    summary = await _run(client, "kernellsp.checkFile", uri)
    assert summary["uri"] == uri and summary["version"] == 7 and summary["cancelled"] is False
    assert summary["byCode"]["KL004"] == 1
    assert summary["findings"] == sum(summary["bySeverity"].values())
    assert summary["kernels"][0]["name"] == "vector_add" and summary["kernels"][0]["hasSpec"] is False
    assert summary["arch"] == "sm_90"
    assert len(publications(client, uri)) == 2  # the command published too


async def test_bad_command_arguments_get_an_error(client: LanguageClient) -> None:
    with pytest.raises(JsonRpcException):
        await _run(client, "kernellsp.addLaunchSpec", "only-one-argument")
