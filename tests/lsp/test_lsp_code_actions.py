"""Code actions end to end: "Add launch spec for KERNEL" from KL004 and from the cursor."""

# ruff: noqa: F401, F811  (pytest fixtures are imported from helpers/lsp_support.py and used as parameters)

from __future__ import annotations

from pathlib import Path

from helpers.lsp_support import (  # shared fixtures and helpers
    apply_text_edits,
    change_doc,
    client,
    client_name,
    codes,
    edits_for,
    open_doc,
    save_doc,
    spec_problems,
    wait_publications,
    workspace,
)
from lsprotocol import types
from pytest_lsp import LanguageClient


def _params(
    uri: str, line: int, diags: list[types.Diagnostic], only: list[str] | None = None, col: int = 0
) -> types.CodeActionParams:
    pos = types.Position(line=line, character=col)
    return types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=pos, end=pos),
        context=types.CodeActionContext(diagnostics=diags, only=only),
    )


async def test_add_launch_spec_from_kl004(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "nospec.cu"
    uri = open_doc(client, path)
    pub = await wait_publications(client, uri)
    kl004 = [d for d in pub.diagnostics if d.code == "KL004"]
    actions = await client.text_document_code_action_async(_params(uri, kl004[0].range.start.line, kl004))
    assert actions and len(actions) == 1
    action = actions[0]
    assert isinstance(action, types.CodeAction)
    assert action.title == "Add launch spec for vector_add"
    assert action.kind == types.CodeActionKind.QuickFix
    assert action.diagnostics and action.diagnostics[0].code == "KL004"
    assert action.command is None and action.edit is not None
    if client.capabilities.workspace.workspace_edit.document_changes:
        assert action.edit.document_changes[0].text_document.version == 1
    else:
        assert action.edit.changes is not None
    edits = edits_for(action.edit, uri)
    new_text = apply_text_edits(path.read_text(), edits)
    assert "/* kernellsp" in new_text
    assert spec_problems(new_text, "vector_add") == []
    # The editor applies it and saves: the server re-checks and KL004 is gone.
    change_doc(client, uri, 2, new_text)
    save_doc(client, uri)
    pub = await wait_publications(client, uri, 2)
    assert "KL004" not in codes(pub.diagnostics)
    assert not [d for d in pub.diagnostics if d.code == "KL003"]  # the draft spec is valid
    # And the action is no longer offered on the kernel.
    line = next(i for i, t in enumerate(new_text.splitlines()) if "void vector_add(" in t)
    after = await client.text_document_code_action_async(_params(uri, line, []))
    titles = [a.title for a in after or []]
    assert not [t for t in titles if t.startswith("Add launch spec")]
    # ...and, now that it has a spec, the verified-rewrite action is: greyed out with the reason on a machine
    # without a GPU where the client can show that, left out where it cannot (it would only fail when chosen).
    from kernellsp.profile.environment import local_gpu_problem

    disabled_ok = bool(client.capabilities.text_document.code_action.disabled_support)
    if local_gpu_problem() is None or disabled_ok:
        assert titles == ["Optimize vector_add with verified rewrite"]
    else:
        assert titles == []


async def test_offered_on_cursor_without_diagnostic(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "nospec.cu"
    uri = open_doc(client, path)
    await wait_publications(client, uri)
    body_line = next(
        i for i, t in enumerate(path.read_text().splitlines()) if t.strip() == "c[i] = a[i] + b[i];"
    )
    actions = await client.text_document_code_action_async(_params(uri, body_line, []))
    assert [a.title for a in actions] == ["Add launch spec for vector_add"]
    assert actions[0].diagnostics is None
    # Outside any kernel: nothing.
    assert not await client.text_document_code_action_async(_params(uri, 0, []))


async def test_only_filter(client: LanguageClient, workspace: Path) -> None:
    uri = open_doc(client, workspace / "nospec.cu")
    pub = await wait_publications(client, uri)
    kl004 = [d for d in pub.diagnostics if d.code == "KL004"]
    line = kl004[0].range.start.line
    assert not await client.text_document_code_action_async(_params(uri, line, kl004, only=["refactor"]))
    assert not await client.text_document_code_action_async(
        _params(uri, line, kl004, only=["source.organizeImports"])
    )
    got = await client.text_document_code_action_async(_params(uri, line, kl004, only=["quickfix"]))
    assert len(got) == 1
    got = await client.text_document_code_action_async(_params(uri, line, kl004, only=[""]))
    assert len(got) == 1


async def test_templated_kernel_spec_goes_above_template_with_indent(
    client: LanguageClient, workspace: Path
) -> None:
    path = workspace / "templated.cu"
    uri = open_doc(client, path)
    pub = await wait_publications(client, uri)
    kl004 = [d for d in pub.diagnostics if d.code == "KL004"]
    assert kl004 and kl004[0].data["kernel"] == "scale"
    actions = await client.text_document_code_action_async(_params(uri, kl004[0].range.start.line, kl004))
    (edit,) = edits_for(actions[0].edit, uri)
    lines = path.read_text().splitlines()
    template_line = next(i for i, t in enumerate(lines) if t.strip().startswith("template <typename T>"))
    assert edit.range.start == types.Position(line=template_line, character=0)
    assert edit.new_text.startswith("    /* kernellsp\n") and edit.new_text.endswith("    */\n")
    new_text = apply_text_edits(path.read_text(), [edit])
    assert spec_problems(new_text, "scale") == []


async def test_stale_diagnostic_without_data_still_works(client: LanguageClient, workspace: Path) -> None:
    """Clients that drop ``data`` (Neovim 0.7 rebuilds diagnostics) still get the action."""
    uri = open_doc(client, workspace / "nospec.cu")
    pub = await wait_publications(client, uri)
    d = next(d for d in pub.diagnostics if d.code == "KL004")
    bare = types.Diagnostic(
        range=d.range, message=d.message, severity=d.severity, code=d.code, source=d.source
    )
    actions = await client.text_document_code_action_async(_params(uri, d.range.start.line, [bare]))
    assert [a.title for a in actions] == ["Add launch spec for vector_add"]
