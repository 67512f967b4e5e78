"""The language server on a GPU host: save → line-level profile diagnostics; the optimize quick fix
applies a verified edit. Records the transcript (requests, notifications, final diff) under
tests/bench/results/lsp-transcript-<gpu>.md. Run with ``pytest -m gpu``.
"""

from __future__ import annotations

import difflib
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.gpuinfo import gpu_slug, local_gpu_name
from helpers.lsp_support import (
    apply_text_edits,
    edits_for,
    lsp_session,
    open_doc,
    publications,
    save_doc,
    wait_until,
)
from lsprotocol import types

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "bench" / "results"
PROFILE_CODES = {
    "KL501",
    "KL502",
    "KL503",
    "KL504",
    "KL505",
    "KL506",
    "KL507",
    "KL508",
    "KL509",
    "KL510",
    "KL511",
    "KL590",
    "KL601",
    "KL602",
    "KL603",
    "KL604",
}


def _gpu() -> str:
    if shutil.which("nvidia-smi") is None or shutil.which("ncu") is None:
        pytest.skip("needs an NVIDIA GPU with ncu")
    return local_gpu_name()


async def test_save_profiles_and_optimize_applies_a_verified_edit(tmp_path: Path) -> None:
    gpu = _gpu()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kernellsp.toml").write_text("")
    path = ws / "softmax_row.cu"
    original = (ROOT / "samples" / "softmax_row.cu").read_text()
    path.write_text(original)
    log: list[dict[str, Any]] = []
    t0 = time.monotonic()

    def note(kind: str, **data: Any) -> None:
        log.append({"t_s": round(time.monotonic() - t0, 3), "kind": kind, **data})

    config = {"budgets": {"optimizeRounds": 1, "optimizeCandidates": 2}}
    async with lsp_session("neovim@v0.11", ws, configuration=config) as client:
        note("request", method="initialize", client="neovim@v0.11")
        uri = open_doc(client, path)
        note("notification", method="textDocument/didOpen", uri=path.name)
        await wait_until(lambda: publications(client, uri), 120, "static diagnostics")
        static = publications(client, uri)[0]
        note(
            "notification",
            method="textDocument/publishDiagnostics",
            layer="static",
            codes=sorted({str(d.code) for d in static.diagnostics}),
        )
        save_doc(client, uri)
        note("notification", method="textDocument/didSave")

        def profiled() -> Any:
            for p in publications(client, uri):
                if PROFILE_CODES & {str(d.code) for d in p.diagnostics}:
                    return p
            return None

        prof = await wait_until(profiled, 300, "profile diagnostics")
        line_diags = [d for d in prof.diagnostics if str(d.code) in PROFILE_CODES]
        note(
            "notification",
            method="textDocument/publishDiagnostics",
            layer="static+profile",
            diagnostics=[
                {"code": str(d.code), "line": d.range.start.line + 1, "message": d.message[:160]}
                for d in line_diags
            ],
        )
        assert any(str(d.code) in ("KL601", "KL603", "KL604", "KL602") for d in line_diags), (
            "a line-level finding"
        )
        report = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="kernellsp.showProfile", arguments=[uri])
        )
        note(
            "request", method="workspace/executeCommand", command="kernellsp.showProfile", result=report[:800]
        )
        assert "softmax_row" in report
        line = next(i for i, t in enumerate(original.splitlines()) if "void softmax_row(" in t)
        pos = types.Position(line=line, character=0)
        actions = await client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(start=pos, end=pos),
                context=types.CodeActionContext(diagnostics=[]),
            )
        )
        titles = [a.title for a in actions or []]
        note("request", method="textDocument/codeAction", line=line + 1, titles=titles)
        opt = next(a for a in actions if a.title == "Optimize softmax_row with verified rewrite")
        result = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command=opt.command.command, arguments=list(opt.command.arguments or [])
            )
        )
        note("request", method="workspace/executeCommand", command="kernellsp.optimize", result=result)
        progress = {
            str(k): [getattr(v, "message", None) or getattr(v, "title", None) for v in vs]
            for k, vs in client.progress_reports.items()
        }
        note("notification", method="$/progress", reports=progress)
        for m in client.messages:
            note("notification", method="window/showMessage", message=m.message)
        assert result["accepted"] is True and result["applied"] is True, result
        assert result["speedup"] > 1.0
        assert len(client.edits) == 1
        new_text = apply_text_edits(original, edits_for(client.edits[0].edit, uri))
        diff = "".join(
            difflib.unified_diff(
                original.splitlines(True), new_text.splitlines(True), "a/softmax_row.cu", "b/softmax_row.cu"
            )
        )
        note("request", method="workspace/applyEdit", label=client.edits[0].label)
        assert diff
    RESULTS.mkdir(parents=True, exist_ok=True)
    slug = gpu_slug(gpu)
    (RESULTS / f"lsp-transcript-{slug}.json").write_text(
        json.dumps({"gpu": gpu, "events": log, "diff": diff}, indent=1, default=str) + "\n"
    )
    md = [
        f"# Language server on {gpu}: save → profile diagnostics → verified rewrite",
        "",
        "Client: pytest-lsp with Neovim 0.11's capabilities; server `python -m kernellsp serve`; "
        "settings `budgets.optimizeRounds = 1`, `optimizeCandidates = 2` (tuner, no LLM).",
        "",
        "| t (s) | kind | what |",
        "|---:|---|---|",
    ]
    for e in log:
        what = {k: v for k, v in e.items() if k not in ("t_s", "kind")}
        md.append(f"| {e['t_s']:.1f} | {e['kind']} | `{json.dumps(what, default=str)[:600]}` |")
    md += ["", "## Final diff applied through workspace/applyEdit", "", "```diff", diff.rstrip(), "```", ""]
    (RESULTS / f"lsp-transcript-{slug}.md").write_text("\n".join(md))
