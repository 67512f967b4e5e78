"""The optimize quick fix, showProfile and background profiling, end to end without a GPU.

On a machine without a GPU the features must degrade with one clear message: the optimize code
action is still offered for spec'd entries (it is cheap), running it says why it cannot run and
changes nothing, showProfile says there is no profile yet, and background profiling announces once
that it is off. The GPU path is covered by tests/lsp/test_lsp_gpu.py.
"""

# ruff: noqa: F401, F811  (pytest fixtures are imported from helpers/lsp_support.py and used as parameters)

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.lsp_support import client, client_name, open_doc, wait_publications, wait_until, workspace
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="checks the no-GPU behaviour")


def _actions(client: LanguageClient, uri: str, line: int, only: list[str] | None = None):  # type: ignore[no-untyped-def]
    pos = types.Position(line=line, character=0)
    return client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=pos, end=pos),
            context=types.CodeActionContext(diagnostics=[], only=only),
        )
    )


async def test_optimize_action_offered_for_specd_entry(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "vector_add.cu"
    uri = open_doc(client, path)
    await wait_publications(client, uri)
    line = next(i for i, ln in enumerate(path.read_text().splitlines()) if "__global__" in ln)
    actions = await _actions(client, uri, line)
    opt = [
        a
        for a in actions
        if isinstance(a, types.CodeAction) and a.title == "Optimize vector_add with verified rewrite"
    ]
    from kernellsp.profile.environment import local_gpu_problem

    no_gpu = local_gpu_problem()
    if no_gpu is not None and not client.capabilities.text_document.code_action.disabled_support:
        assert opt == []  # no GPU and no way to grey it out: not offered (it would only fail when chosen)
        return
    assert len(opt) == 1
    if no_gpu is not None:
        assert opt[0].disabled is not None and opt[0].disabled.reason.startswith(
            "no GPU to verify a rewrite on: "
        )
    assert opt[0].command is not None and opt[0].command.command == "kernellsp.optimize"
    assert list(opt[0].command.arguments or []) == [uri, "vector_add"]
    assert opt[0].edit is None  # long work runs through the command, never as an inline edit
    # Not offered for a kernel without a spec, and not when the client asks only for other kinds.
    nospec = open_doc(client, workspace / "nospec.cu")
    await wait_publications(client, nospec)
    titles = [a.title for a in await _actions(client, nospec, 2)]
    assert not [t for t in titles if t.startswith("Optimize")]
    only_source = await _actions(client, uri, line, only=[types.CodeActionKind.Source])
    assert not only_source


async def test_optimize_without_gpu_says_why_and_changes_nothing(
    client: LanguageClient, workspace: Path
) -> None:
    path = workspace / "vector_add.cu"
    before = path.read_text()
    uri = open_doc(client, path)
    await wait_publications(client, uri)
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kernellsp.optimize", arguments=[uri, "vector_add"])
    )
    assert result["accepted"] is False and "no GPU" in result["reason"]
    assert client.edits == []
    assert path.read_text() == before
    await wait_until(
        lambda: [m for m in client.messages if "cannot optimize vector_add" in m.message],
        10,
        "the optimize message",
    )


async def test_show_profile_and_background_profiling_off(client: LanguageClient, workspace: Path) -> None:
    uri = open_doc(client, workspace / "vector_add.cu")
    await wait_publications(client, uri)
    text = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kernellsp.showProfile", arguments=[uri])
    )
    assert text.startswith("no profile yet")
    await wait_until(
        lambda: [m for m in client.log_messages if "background profiling is off" in m.message],
        10,
        "the profiling-off note",
    )
    uri2 = open_doc(client, workspace / "nospec.cu")
    await wait_publications(client, uri2)
    notes = [m for m in client.log_messages if "background profiling is off" in m.message]
    assert len(notes) == 1, "the note is shown once per session"


def test_show_profile_action_kinds() -> None:
    """The "Show profile report" action: none before a profile, a quick fix on profile diagnostics."""
    from kernellsp.lsp.features.optimize import show_profile_action

    pos = types.Position(line=3, character=0)
    rng = types.Range(start=pos, end=pos)
    prof = types.Diagnostic(range=rng, message="line 4: uncoalesced", code="KL601", source="kernellsp")
    static = types.Diagnostic(range=rng, message="restrict", code="KL405", source="kernellsp")
    assert show_profile_action("file:///x.cu", False, [prof], None) is None
    a = show_profile_action("file:///x.cu", True, [prof, static], None)
    assert a is not None and a.kind == types.CodeActionKind.QuickFix and a.diagnostics == [prof]
    assert a.command is not None and a.command.command == "kernellsp.showProfile"
    b = show_profile_action("file:///x.cu", True, [static], None)
    assert b is not None and b.kind == types.CodeActionKind.Source and b.diagnostics is None
    assert show_profile_action("file:///x.cu", True, [static], [types.CodeActionKind.QuickFix]) is None
