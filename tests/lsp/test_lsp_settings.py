"""Settings end to end: initializationOptions, workspace/configuration, live changes, errors."""

# ruff: noqa: F401, F811  (pytest fixtures are imported from helpers/lsp_support.py and used as parameters)

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.lsp_support import (  # shared fixtures and helpers
    change_doc,
    client_name,
    lsp_session,
    make_client,
    open_doc,
    publications,
    server_env,
    strip_spec,
    wait_publications,
    wait_until,
    workspace,
)
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from kernellsp.lsp.config import ConfigError, resolve, to_overrides


async def _arch(client: LanguageClient, uri: str) -> str:
    summary = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kernellsp.checkFile", arguments=[uri])
    )
    return str(summary["arch"])


async def _hover_kernel(client: LanguageClient, uri: str, path: Path) -> str:
    line = next(i for i, t in enumerate(path.read_text().splitlines()) if "void vector_add(" in t)
    col = path.read_text().splitlines()[line].index("vector_add") + 2
    h = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=col),
        )
    )
    return h.contents.value if h else ""


def _did_change_configuration(client: LanguageClient, settings: object = None) -> None:
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=settings))


async def test_initialization_options(client_name: str, workspace: Path) -> None:
    async with lsp_session(client_name, workspace, init_options={"arch": "sm_80"}) as client:
        uri = open_doc(client, workspace / "vector_add.cu")
        await wait_publications(client, uri)
        assert await _arch(client, uri) == "sm_80"


async def test_configuration_pull_wins_over_init_options(client_name: str, workspace: Path) -> None:
    async with lsp_session(
        client_name, workspace, init_options={"arch": "sm_80"}, configuration={"arch": "sm_86"}
    ) as client:
        uri = open_doc(client, workspace / "vector_add.cu")
        await wait_publications(client, uri)
        assert await _arch(client, uri) == "sm_86"


async def test_workspace_file_settings(client_name: str, workspace: Path) -> None:
    (workspace / "kernellsp.toml").write_text('[settings]\narch = "sm_75"\n')
    async with lsp_session(client_name, workspace) as client:
        uri = open_doc(client, workspace / "vector_add.cu")
        await wait_publications(client, uri)
        assert await _arch(client, uri) == "sm_75"


async def test_change_applies_without_restart(client_name: str, workspace: Path) -> None:
    async with lsp_session(client_name, workspace, configuration={"arch": "sm_90"}) as client:
        path = workspace / "vector_add.cu"
        uri = open_doc(client, path)
        await wait_publications(client, uri, 1)
        assert "sm_90" in await _hover_kernel(client, uri, path)
        client.set_configuration({"arch": "sm_80"}, section="kernellsp")
        _did_change_configuration(client)
        await wait_publications(client, uri, 2)  # recomputed without any save
        assert "sm_80" in await _hover_kernel(client, uri, path)
        # The same settings again: nothing to redo.
        _did_change_configuration(client)
        await asyncio.sleep(0.5)
        assert len(publications(client, uri)) == 2


async def test_pushed_settings_without_configuration_support(workspace: Path) -> None:
    caps = client_capabilities("neovim@v0.11")
    caps.workspace.configuration = False
    client = make_client()
    await client.start_io(__import__("sys").executable, "-m", "kernellsp", "serve", env=server_env())
    try:
        await client.initialize_session(
            types.InitializeParams(capabilities=caps, root_uri=workspace.as_uri())
        )
        path = workspace / "vector_add.cu"
        uri = open_doc(client, path)
        await wait_publications(client, uri, 1)
        _did_change_configuration(client, {"kernellsp": {"arch": "sm_80"}})
        await wait_publications(client, uri, 2)
        assert await _arch(client, uri) == "sm_80"
        await client.shutdown_session()
    finally:
        await client.stop()


async def test_invalid_settings_keep_previous(client_name: str, workspace: Path) -> None:
    async with lsp_session(client_name, workspace, configuration={"arch": "sm_80"}) as client:
        uri = open_doc(client, workspace / "vector_add.cu")
        await wait_publications(client, uri, 1)
        for bad, field in (
            ({"arch": "sm_80", "budgets": {"buildTimeoutS": -1}}, "kernellsp.budgets.buildTimeoutS"),
            ({"arch": "sm_1"}, "kernellsp.arch"),
            ({"archh": "sm_90"}, "kernellsp.archh"),
            ({"llm": {"baseURL": "http://x"}}, "kernellsp.llm.baseURL"),
            ({"runner": "cloud"}, "kernellsp.runner"),
        ):
            client.messages.clear()
            client.set_configuration(bad, section="kernellsp")
            _did_change_configuration(client)
            await wait_until(lambda: client.messages, 10, f"a message about {field}")
            await asyncio.sleep(0.2)
            assert len(client.messages) == 1, [m.message for m in client.messages]
            msg = client.messages[0]
            assert msg.type == types.MessageType.Error and field in msg.message, msg.message
            assert "keeping the previous settings" in msg.message
        assert len(publications(client, uri)) == 1  # nothing was re-checked
        assert await _arch(client, uri) == "sm_80"


async def test_check_on_change_is_debounced(client_name: str, workspace: Path) -> None:
    async with lsp_session(
        client_name, workspace, configuration={"checkOnChange": True, "debounceMs": 300}
    ) as client:
        path = workspace / "vector_add.cu"
        src = path.read_text()
        uri = open_doc(client, path)
        await wait_publications(client, uri, 1)
        for v in range(2, 7):
            change_doc(client, uri, v, strip_spec(src) if v % 2 == 0 else src)
            await asyncio.sleep(0.05)
        pub = await wait_publications(client, uri, 2)
        await asyncio.sleep(0.6)
        assert len(publications(client, uri)) == 2
        assert pub.version == 6 and "KL004" in [d.code for d in pub.diagnostics]


def test_mapping_unit() -> None:
    assert to_overrides(
        {
            "gpuHost": "h",
            "ncu": {"fastSections": ["A"], "timeoutS": 9},
            "llm": {"baseUrl": "u", "apiKeyEnv": "K"},
            "budgets": {"minGainPct": 1},
            "trace": {"server": "off"},
            "checkOnChange": True,
            "arch": None,
        }
    ) == {
        "gpu_host": "h",
        "ncu_fast_sections": ["A"],
        "profile_timeout_s": 9,
        "llm": {"base_url": "u", "api_key_env": "K"},
        "min_gain_pct": 1,
    }
    settings, opts = resolve(None, {"arch": "compute_80", "debounceMs": 50})
    assert settings.arch == "sm_80" and opts.debounce_ms == 50 and not opts.check_on_change
    for bad in ({"ncu": 3}, {"debounceMs": -1}, {"checkOnChange": "yes"}, {"budgets": {"optimizeRounds": 0}}):
        try:
            resolve(None, bad)
        except ConfigError as exc:
            assert str(exc).startswith("kernellsp."), exc
        else:
            raise AssertionError(f"{bad} was accepted")
