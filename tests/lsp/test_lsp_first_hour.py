"""A new user's first hour in the editor (issue 15 items 6 and 10), through the real server and recorded clients."""

# ruff: noqa: F401, F811  (pytest fixtures are imported from helpers/lsp_support.py and used as parameters)

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.lsp_support import (  # shared fixtures and helpers
    client_name,
    lsp_session,
    open_doc,
    server_env,
    strip_spec,
    wait_publications,
    wait_until,
    workspace,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException


async def test_a_broken_kernellsp_toml_is_said_once(client_name: str, workspace: Path) -> None:
    (workspace / "kernellsp.toml").write_text("[settings\narch = 'sm_90'\n", encoding="utf-8")
    async with lsp_session(client_name, workspace) as client:
        uri = open_doc(client, workspace / "vector_add.cu")
        await wait_publications(client, uri)
        await asyncio.sleep(0.5)  # anything else the open would pop up has arrived by now
        shown = [m.message for m in client.messages]
        assert len(shown) == 1, shown
        assert "kernellsp.toml: not valid TOML" in shown[0] and "keeping the previous settings" in shown[0]


async def test_show_rule_names_no_python_exception(client_name: str, workspace: Path) -> None:
    async with lsp_session(client_name, workspace) as client:
        try:
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="kernellsp.showRule", arguments=["KL999"])
            )
        except JsonRpcException as exc:
            message = str(exc)
        else:
            raise AssertionError("KL999 is no rule")
        assert "no rule 'KL999'; known: KL001" in message
        assert "ValueError" not in message and "Error:" not in message


async def _code_actions(client: object, uri: str, line: int) -> list[types.CodeAction]:
    pos = types.Position(line=line, character=0)
    got = await client.text_document_code_action_async(
        types.CodeActionParams(  # type: ignore[attr-defined]
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=pos, end=pos),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    return [a for a in got or [] if isinstance(a, types.CodeAction)]


async def test_optimize_without_a_gpu_is_offered_disabled_with_the_reason(
    client_name: str, workspace: Path
) -> None:
    # runner = none: no GPU work on this machine, whatever hardware it has.
    async with lsp_session(client_name, workspace, env=server_env(KERNELLSP_RUNNER="none")) as client:
        path = workspace / "vector_add.cu"
        uri = open_doc(client, path)
        await wait_publications(client, uri)
        line = next(i for i, t in enumerate(path.read_text().splitlines()) if "void vector_add(" in t)
        actions: list[types.CodeAction] = []
        for _ in range(100):  # the server learns there is no GPU right after start-up (in the background)
            actions = [a for a in await _code_actions(client, uri, line) if a.title.startswith("Optimize")]
            if not actions or actions[0].disabled is not None:
                break
            await asyncio.sleep(0.05)
        if client_name == "visual-studio-code":  # supports `disabled`: shown greyed out, with the reason
            assert actions and actions[0].disabled is not None
            assert (
                actions[0].disabled.reason
                == "no GPU to verify a rewrite on: profiling is off (runner = none)"
            )
        else:  # Neovim 0.11 does not: not offered at all
            assert actions == []


async def test_workspace_spec_problems_are_published_on_kernellsp_toml(
    client_name: str, workspace: Path
) -> None:
    toml = workspace / "kernellsp.toml"
    toml.write_text(
        "# specs of the workspace\n"
        "[kernels.vector_add]\n"
        "sizes = { N = 1024 }\n"
        'launch = { grid = "ceil_div(N, 256)", block = 256 }\n'
        "[kernels.vector_add.args]\n"
        'a = { dtype = "f32", dir = "in", count = "N" }\n'
        'b = { dtype = "float", dir = "in", count = "N" }\n'
        'c = { dtype = "f32", dir = "out" }\n'
        'n = { value = "N" }\n'
        "[kernels.vectr_add]\n"
        "sizes = { N = 16 }\n",
        encoding="utf-8",
    )
    nospec = workspace / "nospec.cu"
    async with lsp_session(client_name, workspace) as client:
        uri = open_doc(client, nospec)
        await wait_publications(client, uri)
        toml_uri = toml.as_uri()
        diags = await wait_until(
            lambda: client.diagnostics.get(toml_uri), 30, "diagnostics on kernellsp.toml"
        )
        got = sorted((d.range.start.line, str(d.code), d.message.split(":")[0]) for d in diags)
        assert got == [
            (6, "KL003", "kernels.vector_add.args.b.dtype"),
            (7, "KL003", "spec field 'args.c.count' of vector_add"),
            (9, "KL003", "kernels.vectr_add"),
        ], got
        assert "did you mean vector_add?" in next(d.message for d in diags if d.range.start.line == 9)
        # The kernel has a (broken) spec: no "has no launch spec" on it.
        assert not [d for d in client.diagnostics.get(uri, []) if str(d.code) == "KL004"]
        # Fixed, and saved: kernellsp.toml's diagnostics go away with the next check.
        toml.write_text(
            toml.read_text()
            .replace('"float"', '"f32"')
            .replace('dir = "out" }', 'dir = "out", count = "N" }')
            .replace("[kernels.vectr_add]\nsizes = { N = 16 }\n", ""),
            encoding="utf-8",
        )
        client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        await wait_until(
            lambda: toml_uri in client.diagnostics and not client.diagnostics[toml_uri],
            60,
            "kernellsp.toml cleared",
        )


STRUCT_KERNEL = """\
struct Params { float scale; int n; };
__global__ void scaled(const float* x, float* y, Params p)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) y[i] = p.scale * x[i];
}
"""


async def test_no_draft_for_a_struct_argument_and_the_reason(client_name: str, workspace: Path) -> None:
    path = workspace / "scaled.cu"
    path.write_text(STRUCT_KERNEL, encoding="utf-8")
    async with lsp_session(client_name, workspace) as client:
        uri = open_doc(client, path)
        await wait_publications(client, uri)
        adds = [a for a in await _code_actions(client, uri, 1) if a.title.startswith("Add launch spec")]
        if client_name == "visual-studio-code":
            assert len(adds) == 1 and adds[0].edit is None and adds[0].disabled is not None
            assert adds[0].disabled.reason.startswith(
                "scaled takes p (Params) by value, and launch specs cannot"
            )
        else:
            assert adds == []
        result = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="kernellsp.addLaunchSpec", arguments=[uri, "scaled"])
        )
        assert result["applied"] is False and "struct arguments yet" in result["reason"]
        assert client.edits == []  # type: ignore[attr-defined]
