"""Robustness end to end: malformed requests, huge files, save storms, crashes, disconnects, shutdown."""

# ruff: noqa: F401, F811  (pytest fixtures are imported from helpers/lsp_support.py and used as parameters)

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from helpers.lsp_support import (  # shared fixtures and helpers
    big_source,
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
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import LanguageClient


def send_raw_request(client: LanguageClient, method: str, params: Any) -> asyncio.Future[Any]:
    """Send a request with arbitrary (possibly invalid) params, bypassing the typed API."""
    msg_id = f"raw-{uuid.uuid4().hex[:8]}"
    fut: Future[Any] = Future()
    client.protocol._request_futures[msg_id] = fut
    client.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return asyncio.wrap_future(fut)


async def test_invalid_code_action_params_get_an_error_response(
    client: LanguageClient, workspace: Path
) -> None:
    uri = open_doc(client, workspace / "nospec.cu")
    await wait_publications(client, uri)
    bad = {
        "textDocument": {"uri": uri},
        "range": {"start": {"line": 14, "character": 0}, "end": {"line": 14, "character": 0}},
        "context": {"diagnostics": [{"code": "KL004"}]},  # what Neovim 0.7's user_data holds
    }
    for _ in range(3):
        with pytest.raises(JsonRpcInvalidParams, match="textDocument/codeAction"):
            await asyncio.wait_for(send_raw_request(client, "textDocument/codeAction", bad), 5)
    await asyncio.sleep(0.2)
    shown = [m for m in client.messages if "Invalid params" in m.message]
    assert len(shown) == 1, [m.message for m in client.messages]  # one concise line, not one per request
    assert len(shown[0].message) < 400
    # The server is fine: a valid request still works.
    ok = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(
                start=types.Position(line=5, character=0), end=types.Position(line=5, character=0)
            ),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    assert [a.title for a in ok] == ["Add launch spec for vector_add"]


async def test_huge_file(client: LanguageClient, workspace: Path) -> None:
    text = big_source(workspace)
    assert text.count("\n") >= 10_000
    big = workspace / "big.cu"
    big.write_text(text)
    uri = open_doc(client, big)
    pub = await wait_publications(client, uri, timeout=120)
    n_kernels = text.count("__global__")
    assert sum(1 for d in pub.diagnostics if d.code == "KL004") == n_kernels
    assert max(d.range.start.line for d in pub.diagnostics) > 9_900


async def test_ten_saves_in_a_second_publish_only_the_last(client_name: str, workspace: Path) -> None:
    async with lsp_session(client_name, workspace, env=server_env(KERNELLSP_TEST_JOB_DELAY="0.5")) as client:
        path = workspace / "vector_add.cu"
        src = path.read_text()
        uri = open_doc(client, path, version=1)
        t0 = time.monotonic()
        for v in range(2, 12):
            change_doc(client, uri, v, src if v % 2 else strip_spec(src))  # the last (v=11) keeps the spec
            save_doc(client, uri)
            await asyncio.sleep(0.08)
        assert time.monotonic() - t0 < 1.5
        pub = await wait_publications(client, uri, 1)
        await asyncio.sleep(1.0)  # anything stale would have arrived by now
        pubs = publications(client, uri)
        assert len(pubs) == 1, [p.version for p in pubs]
        assert pub.version == 11 and "KL004" not in codes(pub.diagnostics)
        ends = [v[-1].message for v in client.progress_reports.values() if v and v[-1].kind == "end"]
        assert ends.count("done") == 1 and ends.count("cancelled") >= 1, ends


async def test_crashing_job_reports_once_and_server_survives(client_name: str, workspace: Path) -> None:
    rules = workspace / ".kernellsp" / "rules"
    rules.mkdir(parents=True)
    bad = rules / "KL999-broken.toml"
    bad.write_text('code = "KL999"\nname = "broken"\n')  # missing required fields: loading raises
    async with lsp_session(client_name, workspace) as client:
        uri = open_doc(client, workspace / "nospec.cu")
        await wait_until(lambda: client.messages, 30, "an error message")
        await asyncio.sleep(0.3)
        assert len(client.messages) == 1, [m.message for m in client.messages]
        msg = client.messages[0]
        assert msg.type == types.MessageType.Error
        assert msg.message.startswith("kernellsp: Checking nospec.cu failed: RuleError:")
        assert "KL999-broken.toml" in msg.message and "\n" not in msg.message
        assert any("Traceback" in m.message for m in client.log_messages)  # details for the log
        assert publications(client, uri) == []
        # Fix the rule directory and save: the server is still there and publishes.
        bad.unlink()
        save_doc(client, uri)
        pub = await wait_publications(client, uri)
        assert "KL004" in codes(pub.diagnostics)


async def test_close_cancels_running_job(client_name: str, workspace: Path) -> None:
    async with lsp_session(client_name, workspace, env=server_env(KERNELLSP_TEST_JOB_DELAY="30")) as client:
        uri = open_doc(client, workspace / "nospec.cu")
        token = await wait_until(
            lambda: next((t for t, v in client.progress_reports.items() if v), None), 10, "progress begin"
        )
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        await wait_until(lambda: client.progress_reports[token][-1].kind == "end", 5, "progress end")
        assert client.progress_reports[token][-1].message == "cancelled"
        pubs = await wait_until(lambda: publications(client, uri), 5, "the clearing publication")
        assert len(pubs) == 1 and len(pubs[0].diagnostics) == 0


async def test_shutdown_cancels_jobs_promptly(client_name: str, workspace: Path) -> None:
    async with lsp_session(client_name, workspace, env=server_env(KERNELLSP_TEST_JOB_DELAY="60")) as client:
        open_doc(client, workspace / "nospec.cu")
        open_doc(client, workspace / "vector_add.cu")
        await wait_until(lambda: sum(1 for v in client.progress_reports.values() if v) == 2, 10, "two jobs")
        t0 = time.monotonic()
        await asyncio.wait_for(client.shutdown_async(None), 10)
        assert time.monotonic() - t0 < 4
        ends = [v[-1].message for v in client.progress_reports.values()]
        assert ends == ["cancelled", "cancelled"]
        client.exit(None)
        await asyncio.wait_for(client._server.wait(), 10)
        client.capabilities = None  # the session is over: nothing left for the context manager to shut down


# ------------------------------------------------------------------------------------------------
# Disconnect: a raw stdio session, so the test controls the pipes.


def _frame(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _tools_mentioning(needle: str) -> list[int]:
    """CUDA tool processes (nvcc and its children) whose command line mentions ``needle``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmd and any(t in cmd for t in ("nvcc", "cicc", "ptxas", "nvdisasm")):
            out.append(int(d.name))
    return out


def test_stdin_close_exits_cleanly_and_kills_nvcc(workspace: Path, tmp_path: Path) -> None:
    from kernellsp.build import toolchain

    have_nvcc = toolchain.find_tool("nvcc") is not None
    big = workspace / "big.cu"
    big.write_text(big_source(workspace, salt=uuid.uuid4().hex))  # a new text: the build is not cached
    env = server_env(KERNELLSP_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernellsp", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(
            _frame(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": {}},
                }
            )
        )
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        proc.stdin.write(
            _frame(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didOpen",
                    "params": {
                        "textDocument": {
                            "uri": big.as_uri(),
                            "languageId": "cuda",
                            "version": 1,
                            "text": big.read_text(),
                        }
                    },
                }
            )
        )
        proc.stdin.flush()
        needle = str(workspace)
        if have_nvcc:  # wait until nvcc compiles the buffer
            deadline = time.monotonic() + 30
            while not _tools_mentioning(needle) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _tools_mentioning(needle), "nvcc never started"
        else:
            time.sleep(1.0)
        t0 = time.monotonic()
        proc.stdin.close()
        rc = proc.wait(timeout=10)
        assert rc == 0
        assert time.monotonic() - t0 < 5
        time.sleep(0.2)
        assert _tools_mentioning(needle) == [], "a child process outlived the server"
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stdout_carries_only_lsp(workspace: Path) -> None:
    """Everything on stdout is a framed JSON-RPC message."""
    proc = subprocess.run(
        [sys.executable, "-m", "kernellsp", "serve"],
        input=_frame(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}},
            }
        )
        + _frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        + _frame({"jsonrpc": "2.0", "method": "exit"}),
        capture_output=True,
        timeout=30,
        env=server_env(),
    )
    data = proc.stdout
    msgs = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        assert head.startswith(b"Content-Length: "), data[:200]
        n = int(head.split(b"\r\n")[0].split(b": ")[1])
        msgs.append(json.loads(rest[:n]))
        data = rest[n:]
    assert [m.get("id") for m in msgs if "id" in m] == [1, 2]
    assert msgs[0]["result"]["serverInfo"]["name"] == "kernellsp"
    assert proc.returncode == 0


def test_tcp_mode_and_log_file(workspace: Path, tmp_path: Path) -> None:
    """``serve --tcp`` (for debugging) speaks LSP on a socket and logs to ``--log-file``.

    The client sends ``exit`` right behind ``shutdown``, without waiting for its answer: the server must still
    exit with 0 (the shutdown request came first), which pygls alone gets wrong when the shutdown handler is
    asynchronous (KernelLspProtocol marks the shutdown on receipt)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_file = tmp_path / "server.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernellsp",
            "serve",
            "--tcp",
            "--port",
            str(port),
            "--log-file",
            str(log_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(),
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        with conn:
            conn.sendall(
                _frame(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}},
                    }
                )
            )
            buf = b""
            while b"serverInfo" not in buf:
                chunk = conn.recv(65536)
                assert chunk, "connection closed before the initialize response"
                buf += chunk
            conn.sendall(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
            conn.sendall(_frame({"jsonrpc": "2.0", "method": "exit"}))
            assert proc.wait(timeout=15) == 0
        out = proc.stdout.read() if proc.stdout else b""
        assert out == b""
        assert f"listening on 127.0.0.1:{port}" in log_file.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_killed_server_leaves_no_processes(sig: str, workspace: Path) -> None:
    """Editors stop servers with SIGTERM (and worse): worker processes must not outlive the server."""
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "kernellsp", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=server_env(),
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(
            _frame(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}},
                }
            )
        )
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        nospec = workspace / "nospec.cu"
        proc.stdin.write(
            _frame(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didOpen",
                    "params": {
                        "textDocument": {
                            "uri": nospec.as_uri(),
                            "languageId": "cuda",
                            "version": 1,
                            "text": nospec.read_text(),
                        }
                    },
                }
            )
        )
        proc.stdin.flush()
        deadline = time.monotonic() + 20
        while len(_descendants(proc.pid)) < 2 and time.monotonic() < deadline:  # forkserver + a worker
            time.sleep(0.05)
        family = _descendants(proc.pid)
        assert len(family) >= 2, family
        os.kill(proc.pid, getattr(signal, sig))
        rc = proc.wait(timeout=10)
        assert rc == (0 if sig == "SIGTERM" else -signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not all(_gone(p) for p in family) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(_gone(p) for p in family), [p for p in family if not _gone(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
