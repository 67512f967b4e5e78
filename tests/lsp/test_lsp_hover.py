"""Hover end to end, and the server's responsiveness while a heavy check runs."""

# ruff: noqa: F401, F811  (pytest fixtures are imported from helpers/lsp_support.py and used as parameters)

from __future__ import annotations

import time
import uuid
from pathlib import Path

from helpers.lsp_support import (
    big_source,
    change_doc,
    client,
    client_name,
    open_doc,
    wait_publications,
    wait_until,
    workspace,
)
from lsprotocol import types
from pytest_lsp import LanguageClient

from kernellsp.build import toolchain


def _pos(path: Path, needle: str, offset: int = 0) -> types.Position:
    lines = path.read_text().splitlines()
    line = next(i for i, t in enumerate(lines) if needle in t)
    return types.Position(line=line, character=lines[line].index(needle) + offset)


async def _hover(client: LanguageClient, uri: str, pos: types.Position) -> types.Hover | None:
    return await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=pos)
    )


async def test_hover_on_kernel_name(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "vector_add.cu"
    uri = open_doc(client, path)
    await wait_publications(client, uri)
    h = await _hover(client, uri, _pos(path, "vector_add(const", 3))
    assert h is not None and h.contents.kind == types.MarkupKind.Markdown
    text = h.contents.value
    assert "**vector_add** (`__global__`, sm_90)" in text
    assert "launch spec: yes" in text
    assert "block: 256 threads (from spec)" in text
    if toolchain.find_tool("nvcc") is not None:
        assert "registers:" in text and "occupancy:" in text and "spills:" in text
    # The kernel's line also carries KL405, so the rule follows the kernel summary.
    assert "**KL405**" in text and "**Fix:**" in text


async def test_hover_on_diagnostic_line(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "nospec.cu"
    uri = open_doc(client, path)
    await wait_publications(client, uri)
    h = await _hover(client, uri, _pos(path, "__global__"))
    text = h.contents.value
    assert "**KL004** Kernel has no launch spec" in text
    assert "**Fix:**" in text and "Add launch spec" in text
    assert "kernellsp generates a harness from the spec" in text  # the rule's guidance
    assert "launch spec: no" not in text  # the cursor is on `__global__`, not on the name
    assert await _hover(client, uri, types.Position(line=1, character=3)) is None  # `#include`


async def test_hover_after_an_unchecked_edit_follows_the_buffer(
    client: LanguageClient, workspace: Path
) -> None:
    """Edits without a new check (no save, checkOnChange off) move the kernel; hover answers for the buffer as it
    is, and shows no findings whose lines belong to the checked text."""
    path = workspace / "vector_add.cu"
    uri = open_doc(client, path)
    await wait_publications(client, uri)
    old = _pos(path, "vector_add(const", 3)
    change_doc(client, uri, 2, "// one\n// two\n// three\n" + path.read_text())
    moved = types.Position(line=old.line + 3, character=old.character)
    h = await _hover(client, uri, moved)
    assert h is not None and "**vector_add** (`__global__`, sm_90)" in h.contents.value
    assert "**KL405**" not in h.contents.value  # the finding belongs to the checked version's lines
    stale = await _hover(client, uri, old)
    assert stale is None or "**vector_add**" not in stale.contents.value


async def test_requests_stay_fast_while_a_heavy_check_runs(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "nospec.cu"
    uri = open_doc(client, path)
    await wait_publications(client, uri)
    big = workspace / "big.cu"
    big.write_text(big_source(workspace, salt=uuid.uuid4().hex))  # not in the build cache
    big_uri = open_doc(client, big)

    def big_job_running() -> bool:
        return any(
            v and v[0].title == "Checking big.cu" and v[-1].kind != "end"
            for v in client.progress_reports.values()
        )

    await wait_until(big_job_running, 10, "the big check to start")
    kernel = _pos(path, "vector_add(const", 2)
    ca = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=kernel, end=kernel),
        context=types.CodeActionContext(diagnostics=[]),
    )
    # One untimed round first: the first request of a session also builds the server's message converters.
    await _hover(client, uri, kernel)
    await client.text_document_code_action_async(ca)
    hover_s, action_s = [], []
    for _ in range(15):
        t0 = time.perf_counter()
        h = await _hover(client, uri, kernel)
        hover_s.append(time.perf_counter() - t0)
        assert h is not None
        t0 = time.perf_counter()
        actions = await client.text_document_code_action_async(ca)
        action_s.append(time.perf_counter() - t0)
        assert [a.title for a in actions] == ["Add launch spec for vector_add"]
    print(f"hover max {max(hover_s) * 1000:.1f} ms, codeAction max {max(action_s) * 1000:.1f} ms")
    assert big_job_running(), "the heavy check ended before the measurement did"
    assert max(hover_s) < 0.1, f"hover took up to {max(hover_s) * 1000:.0f} ms"
    assert max(action_s) < 0.1, f"codeAction took up to {max(action_s) * 1000:.0f} ms"
    await wait_publications(client, big_uri, timeout=120)
