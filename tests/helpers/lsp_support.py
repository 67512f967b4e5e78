"""Shared helpers for the language-server tests (pytest-lsp end to end; no tests of its own).

``lsp_session`` starts ``python -m kernellsp serve`` as a subprocess with a test client speaking
for Neovim 0.11 or VS Code (their recorded capabilities), in a temporary workspace holding a copy
of a sample with a spec, the same kernel without its spec, and a templated kernel without one.
The client records every publishDiagnostics (``client.published``), answers
``workspace/applyEdit`` (``client.edits``) and ``client/registerCapability``, and carries the
CodeAction/Command decoding workaround for lsprotocol 2025.0.0.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Union

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from kernellsp.source import spec
from kernellsp.source.model import parse_source

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
CLIENTS = ["neovim@v0.11", "visual-studio-code"]
#: One build cache for the whole test session, never the user's.
CACHE_DIR = Path(tempfile.mkdtemp(prefix="kernellsp-test-cache-"))
atexit.register(shutil.rmtree, CACHE_DIR, ignore_errors=True)

TEMPLATED = """#include <cuda_runtime.h>

namespace ops {
    template <typename T>
    __global__ void scale(T* x, T alpha, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= alpha;
    }

    template __global__ void scale<float>(float*, float, int);
}
"""


def strip_spec(text: str) -> str:
    """The source without its ``/* kernellsp ... */`` block."""
    return re.sub(r"/\* kernellsp\n.*?\*/\n", "", text, count=1, flags=re.S)


def make_workspace(base: Path) -> Path:
    """A workspace with ``vector_add.cu`` (spec), ``nospec.cu`` (no spec) and ``templated.cu``."""
    ws = base / "ws"
    ws.mkdir()
    (ws / "kernellsp.toml").write_text("# kernellsp test workspace\n", encoding="utf-8")
    src = (SAMPLES / "vector_add.cu").read_text(encoding="utf-8")
    (ws / "vector_add.cu").write_text(src, encoding="utf-8")
    (ws / "nospec.cu").write_text(strip_spec(src), encoding="utf-8")
    (ws / "templated.cu").write_text(TEMPLATED, encoding="utf-8")
    return ws


def server_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["KERNELLSP_CACHE_DIR"] = str(CACHE_DIR)
    env.pop("KERNELLSP_TEST_JOB_DELAY", None)
    env.update(extra)
    return env


def _fix_code_action_union(client: LanguageClient) -> None:
    """lsprotocol 2025.0.0 decodes every item with a ``command`` key as Command; be precise."""
    conv = client.protocol._converter

    def hook(obj: Any, _t: Any) -> Any:
        if isinstance(obj, dict) and isinstance(obj.get("command"), str):
            return conv.structure(obj, types.Command)
        return conv.structure(obj, types.CodeAction)

    conv.register_structure_hook(Union[types.Command, types.CodeAction], hook)  # noqa: UP007


def make_client() -> LanguageClient:
    """A pytest-lsp client that also records publications, edits and registrations."""
    from pygls.protocol import default_converter

    client = LanguageClient(converter_factory=default_converter)
    client.published = []  # type: ignore[attr-defined]
    client.edits = []  # type: ignore[attr-defined]
    client.apply_edit_result = True  # type: ignore[attr-defined]

    def publish(c: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        c.diagnostics[params.uri] = params.diagnostics
        c.published.append(params)  # type: ignore[attr-defined]

    def apply_edit(
        c: LanguageClient, params: types.ApplyWorkspaceEditParams
    ) -> types.ApplyWorkspaceEditResult:
        c.edits.append(params)  # type: ignore[attr-defined]
        ok = bool(c.apply_edit_result)  # type: ignore[attr-defined]
        return types.ApplyWorkspaceEditResult(applied=ok, failure_reason=None if ok else "test says no")

    def register_capability(c: LanguageClient, params: types.RegistrationParams) -> None:
        return None

    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish
    features[types.WORKSPACE_APPLY_EDIT] = apply_edit
    features[types.CLIENT_REGISTER_CAPABILITY] = register_capability
    register_lsp_features(client, features)
    _fix_code_action_union(client)
    return client


@contextlib.asynccontextmanager
async def lsp_session(
    client_name: str,
    workspace: Path,
    *,
    env: dict[str, str] | None = None,
    init_options: dict[str, Any] | None = None,
    configuration: dict[str, Any] | None = None,
) -> AsyncIterator[LanguageClient]:
    """Start the server, initialize with ``client_name``'s capabilities; shut down afterwards."""
    client = make_client()
    if configuration is not None:
        client.set_configuration(configuration, section="kernellsp")
    await client.start_io(sys.executable, "-m", "kernellsp", "serve", env=env or server_env())
    try:
        client.init_result = await client.initialize_session(  # type: ignore[attr-defined]
            types.InitializeParams(
                capabilities=client_capabilities(client_name),
                root_uri=workspace.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)],
                initialization_options=init_options,
            )
        )
        yield client
        await asyncio.wait_for(client.shutdown_session(), 15)
    finally:
        # A server that did not exit after shutdown must not hang the test run: kill it.
        proc = getattr(client, "_server", None)
        if proc is not None and proc.returncode is None:
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
        await client.stop()


@pytest.fixture(params=CLIENTS)
def client_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)


@pytest_asyncio.fixture
async def client(client_name: str, workspace: Path) -> AsyncIterator[LanguageClient]:
    """A server session in ``workspace`` for each client flavour."""
    async with lsp_session(client_name, workspace) as c:
        yield c


async def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.02)


def open_doc(client: LanguageClient, path: Path, version: int = 1, text: str | None = None) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri,
                language_id="cuda",
                version=version,
                text=path.read_text(encoding="utf-8") if text is None else text,
            )
        )
    )
    return uri


def change_doc(client: LanguageClient, uri: str, version: int, text: str) -> None:
    """Replace the whole buffer (a full-content change)."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def save_doc(client: LanguageClient, uri: str) -> None:
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


def publications(client: LanguageClient, uri: str) -> list[types.PublishDiagnosticsParams]:
    return [p for p in client.published if p.uri == uri]  # type: ignore[attr-defined]


async def wait_publications(
    client: LanguageClient, uri: str, n: int = 1, timeout: float = 60.0
) -> types.PublishDiagnosticsParams:
    """Wait until ``uri`` has had ``n`` publications; return the last."""
    await wait_until(lambda: len(publications(client, uri)) >= n, timeout, f"{n} publication(s) for {uri}")
    return publications(client, uri)[-1]


def codes(diags: Sequence[types.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diags)


def apply_text_edits(text: str, edits: Sequence[types.TextEdit]) -> str:
    """Apply LSP text edits (positions in code points: ASCII sources) to ``text``."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln))

    def off(p: types.Position) -> int:
        return offsets[min(p.line, len(lines))] + p.character

    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: off(e.range.start)] + e.new_text + text[off(e.range.end) :]
    return text


def edits_for(edit: types.WorkspaceEdit, uri: str) -> list[types.TextEdit]:
    """The text edits of ``uri`` in a WorkspaceEdit (``changes`` or ``documentChanges``)."""
    out: list[Any] = []
    if edit.changes:
        out.extend(edit.changes.get(uri, []))
    for dc in edit.document_changes or []:
        if isinstance(dc, types.TextDocumentEdit) and dc.text_document.uri == uri:
            out.extend(dc.edits)
    return out


def spec_problems(text: str, kernel: str) -> list[str]:
    """Errors of ``kernel``'s spec in ``text`` (empty: it has one and it validates)."""
    model = parse_source(text, "check.cu")
    bound, issues = spec.specs_from_source(model)
    mine = [b for b in bound if b.entry == kernel]
    if not mine:
        return [f"no spec bound to {kernel}"]
    problems = [i.message for i in issues]
    for b in mine:
        problems += [
            i.message
            for i in spec.validate_against(b, model.function(kernel), model)
            if i.severity == "error"
        ]
    return problems


def big_source(workspace: Path, lines: int = 10_000, salt: str = "") -> str:
    body = strip_spec((workspace / "vector_add.cu").read_text()).split("\n", 1)[1]
    parts = [f"#include <cuda_runtime.h>\n// {salt}\n"]
    i = 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(body.replace("vector_add", f"vector_add_{i}") + "// filler\n" * 6)
        i += 1
    return "".join(parts)
