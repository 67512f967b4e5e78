"""Workspace and status commands end to end: checkWorkspace, revert, status (+ notification), cancelJob."""

# ruff: noqa: F401, F811  (pytest fixtures are imported from helpers/lsp_support.py and used as parameters)

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.lsp_support import client, client_name, open_doc, publications, workspace
from lsprotocol import types
from pytest_lsp import LanguageClient

from kernellsp.optimize.apply import record_backup


async def _run(client: LanguageClient, command: str, *args: object) -> Any:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=list(args))
    )


async def test_check_workspace_publishes_unopened_files(client: LanguageClient, workspace: Path) -> None:
    pushed: list[Any] = []
    client.feature("kernellsp/status")(lambda params: pushed.append(params))
    (workspace / ".hidden").mkdir()
    (workspace / ".hidden" / "skip.cu").write_text("__global__ void k() {}\n")
    result = await _run(client, "kernellsp.checkWorkspace")
    assert result["files"] == 3 and not result["cancelled"], result
    assert result["byCode"].get("KL004") == 2 and result["findings"] == sum(result["bySeverity"].values())
    for name in ("vector_add.cu", "nospec.cu", "templated.cu"):
        assert publications(client, (workspace / name).as_uri()), f"no diagnostics published for {name}"
    nospec = client.diagnostics[(workspace / "nospec.cu").as_uri()]
    assert "KL004" in [d.code for d in nospec]
    assert not publications(client, (workspace / ".hidden" / "skip.cu").as_uri())
    # The status bar learnt that the workspace check ran (pushed when it started).
    kinds = [[j["kind"] for j in _attrs(p)["jobs"]] for p in pushed]
    assert ["check-workspace"] in kinds, pushed


def _attrs(params: Any) -> dict[str, Any]:
    """pygls hands custom notifications over as an attribute object; make it a dict."""
    if isinstance(params, dict):
        return params
    out = {k: getattr(params, k) for k in dir(params) if not k.startswith("_")}
    out["jobs"] = [
        j if isinstance(j, dict) else {k: getattr(j, k) for k in dir(j) if not k.startswith("_")}
        for j in out.get("jobs", [])
    ]
    return out


async def test_status_and_cancel(client: LanguageClient) -> None:
    status = await _run(client, "kernellsp.status")
    assert status["runner"] == "local" and status["gpuHost"] is None and status["jobs"] == []
    gpu = status["gpu"]
    assert isinstance(gpu["ready"], bool)
    assert gpu["ready"] == (gpu["problem"] is None), gpu
    assert await _run(client, "kernellsp.cancelJob", "file:///nothing.cu", "optimize") == {"cancelled": 0}


async def test_revert_restores_the_backup(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "vector_add.cu"
    uri = path.as_uri()
    refused = await _run(client, "kernellsp.revert", uri)
    assert refused["reverted"] is False and "no kernellsp backup" in refused["message"]
    original = path.read_text()
    rewritten = original.replace("c[i] = a[i] + b[i];", "c[i] = b[i] + a[i];")
    record_backup(path, original, rewritten, None)  # what an applied rewrite leaves behind
    path.write_text(rewritten)
    open_doc(client, path, text=rewritten)
    done = await _run(client, "kernellsp.revert", uri)
    assert done["reverted"] is True, done
    assert path.read_text() == original


async def test_revert_refuses_unsaved_changes(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "vector_add.cu"
    original = path.read_text()
    record_backup(path, original, original + "// rewritten\n", None)
    path.write_text(original + "// rewritten\n")
    open_doc(client, path, text=original + "// rewritten and edited\n")
    res = await _run(client, "kernellsp.revert", path.as_uri())
    assert res["reverted"] is False and "unsaved changes" in res["message"]
    assert path.read_text() == original + "// rewritten\n"


async def test_show_profile_html_form(client: LanguageClient, workspace: Path) -> None:
    uri = open_doc(client, workspace / "vector_add.cu")
    res = await _run(client, "kernellsp.showProfile", uri, "html")
    assert res["html"] is None and res["message"].startswith("no profile yet")
    assert (await _run(client, "kernellsp.showProfile", uri)).startswith("no profile yet")
