"""Diagnostics end to end: open, save, close, progress, cancellation, version handling."""

# ruff: noqa: F401, F811  (pytest fixtures are imported from helpers/lsp_support.py and used as parameters)

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.lsp_support import (  # shared fixtures and helpers
    change_doc,
    client,
    client_name,
    codes,
    lsp_session,
    open_doc,
    publications,
    save_doc,
    server_env,
    strip_spec,
    wait_publications,
    wait_until,
    workspace,
)
from lsprotocol import types
from pytest_lsp import LanguageClient

from kernellsp.lsp.convert import RULES_URL


async def test_open_publishes_missing_spec(client: LanguageClient, workspace: Path) -> None:
    uri = open_doc(client, workspace / "nospec.cu", version=3)
    pub = await wait_publications(client, uri)
    assert pub.version == 3
    kl004 = [d for d in pub.diagnostics if d.code == "KL004"]
    assert len(kl004) == 1, codes(pub.diagnostics)
    d = kl004[0]
    assert d.source == "kernellsp"
    assert d.severity == types.DiagnosticSeverity.Hint
    text = (workspace / "nospec.cu").read_text().splitlines()
    line = next(i for i, t in enumerate(text) if "void vector_add(" in t)
    assert d.range.start.line == line
    assert text[line][d.range.start.character : d.range.end.character] == "vector_add"
    assert d.data["code"] == "KL004" and d.data["kernel"] == "vector_add"
    assert set(d.data) == {"code", "kernel", "evidence", "fix"}
    assert d.data["fix"] and "launch spec" in d.data["fix"].lower()
    assert d.related_information and d.related_information[0].location.range == d.range
    assert d.related_information[0].message.startswith("fix: ")
    if client.capabilities.text_document.publish_diagnostics.code_description_support:
        assert d.code_description.href == RULES_URL + "KL004-missing-launch-spec.toml"
    else:
        assert d.code_description is None


async def test_spec_sample_has_no_missing_spec(client: LanguageClient, workspace: Path) -> None:
    uri = open_doc(client, workspace / "vector_add.cu")
    pub = await wait_publications(client, uri)
    assert "KL004" not in codes(pub.diagnostics)
    # The sample's read-only pointers lack __restrict__ (KL405) whether or not nvcc ran.
    assert "KL405" in codes(pub.diagnostics)
    assert all(
        (d.source == "kernellsp" and d.code_description is None)
        or d.code_description.href.startswith(RULES_URL)
        for d in pub.diagnostics
    )


async def test_save_rechecks_the_buffer(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "vector_add.cu"
    uri = open_doc(client, path)
    await wait_publications(client, uri, 1)
    change_doc(client, uri, 2, strip_spec(path.read_text()))
    save_doc(client, uri)
    pub = await wait_publications(client, uri, 2)
    assert pub.version == 2
    assert "KL004" in codes(pub.diagnostics)


async def test_close_clears(client: LanguageClient, workspace: Path) -> None:
    uri = open_doc(client, workspace / "nospec.cu")
    pub = await wait_publications(client, uri)
    assert pub.diagnostics
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    await wait_until(lambda: len(publications(client, uri)) == 2, 10, "cleared diagnostics")
    assert len(client.diagnostics[uri]) == 0 and publications(client, uri)[-1].version is None
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=3, character=20)
        )
    )
    assert hover is None  # the cached result was dropped too


async def test_progress_begin_and_end(client: LanguageClient, workspace: Path) -> None:
    uri = open_doc(client, workspace / "nospec.cu")
    await wait_publications(client, uri)

    def ended() -> list[str]:
        return [
            t
            for t, vals in client.progress_reports.items()
            if t.startswith("kernellsp-check-") and vals and vals[-1].kind == "end"
        ]

    tokens = await wait_until(ended, 10, "progress end")
    values = client.progress_reports[tokens[0]]
    assert values[0].kind == "begin" and values[0].title == "Checking nospec.cu" and values[0].cancellable
    assert values[-1].message == "done"


async def test_user_cancel_via_progress(client_name: str, workspace: Path) -> None:
    async with lsp_session(client_name, workspace, env=server_env(KERNELLSP_TEST_JOB_DELAY="30")) as client:
        uri = open_doc(client, workspace / "nospec.cu")
        token = await wait_until(
            lambda: next((t for t, v in client.progress_reports.items() if v), None), 10, "progress begin"
        )
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        await wait_until(lambda: client.progress_reports[token][-1].kind == "end", 10, "progress end")
        assert client.progress_reports[token][-1].message == "cancelled"
        await asyncio.sleep(0.3)
        assert publications(client, uri) == []  # a cancelled check publishes nothing
