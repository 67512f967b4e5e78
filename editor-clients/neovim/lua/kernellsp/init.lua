-- kernellsp client helpers for Neovim 0.7 and later.
--
--   require('kernellsp').setup({ settings = { kernellsp = { arch = 'sm_80' } } })
--
-- On 0.11+ this registers the config with vim.lsp.config() (merged over lsp/kernellsp.lua) and calls
-- vim.lsp.enable('kernellsp'). On 0.8-0.10 it starts the server with vim.lsp.start() from a FileType
-- autocmd; on 0.7 with vim.lsp.start_client() + vim.lsp.buf_attach_client(), one client per root.
-- Buffer-local commands: :KernellspCheck, :KernellspRule {code}, :KernellspAddLaunchSpec {kernel}.
local M = {}

--- The server executable: `kernellsp` on PATH, else where `pipx install` and `pip install --user` put it
--- ($PIPX_BIN_DIR, ~/.local/bin: often not on the PATH of an editor started from a desktop menu).
function M.server_path()
  if vim.fn.executable('kernellsp') == 1 then
    return 'kernellsp'
  end
  local home = vim.env.HOME
  for _, dir in ipairs({ vim.env.PIPX_BIN_DIR or '', home and (home .. '/.local/bin') or '' }) do
    if dir ~= '' and vim.fn.executable(dir .. '/kernellsp') == 1 then
      return dir .. '/kernellsp'
    end
  end
  return 'kernellsp'
end

M.defaults = {
  name = 'kernellsp',
  cmd = { M.server_path(), 'serve' },
  filetypes = { 'cuda' },
  root_markers = { 'kernellsp.toml', 'pyproject.toml', '.git' },
  init_options = {},
  settings = { kernellsp = {} },
}

local function deep_extend(a, b)
  return vim.tbl_deep_extend('force', a, b or {})
end

local uv = vim.uv or vim.loop
local clients_by_root = {} -- 0.7: client id per root directory

--- The nearest ancestor of the buffer's file holding one of `markers` (the file's directory if none).
function M.root_dir(bufnr, markers)
  local name = vim.api.nvim_buf_get_name(bufnr)
  local dir = vim.fn.fnamemodify(name ~= '' and name or vim.fn.getcwd(), ':p:h')
  local d = dir
  while d and d ~= '' do
    for _, m in ipairs(markers) do
      if uv.fs_stat(d .. '/' .. m) then
        return d
      end
    end
    local parent = vim.fn.fnamemodify(d, ':h')
    if parent == d then
      break
    end
    d = parent
  end
  return dir
end

local function client_of(bufnr)
  local get = vim.lsp.get_clients or vim.lsp.get_active_clients
  for _, c in ipairs(get({ bufnr = bufnr })) do
    if c.name == 'kernellsp' then
      return c
    end
  end
end

local function exec(bufnr, command, arguments, on_result)
  local client = client_of(bufnr)
  if not client then
    vim.notify('kernellsp: no language server attached to this buffer', vim.log.levels.WARN)
    return
  end
  local params = { command = command, arguments = arguments }
  local function handler(err, result)
    if err then
      vim.notify('kernellsp: ' .. (err.message or tostring(err)), vim.log.levels.ERROR)
    elseif on_result then
      on_result(result)
    end
  end
  if vim.fn.has('nvim-0.11') == 1 then
    client:request('workspace/executeCommand', params, handler, bufnr)
  else
    client.request('workspace/executeCommand', params, handler, bufnr)
  end
end

--- Buffer-local user commands (called on attach).
function M.create_commands(bufnr)
  local uri = vim.uri_from_bufnr(bufnr)
  vim.api.nvim_buf_create_user_command(bufnr, 'KernellspCheck', function()
    exec(bufnr, 'kernellsp.checkFile', { uri }, function(r)
      if r.cancelled then
        return
      end
      local s = r.bySeverity or {}
      vim.notify(string.format('kernellsp: %d finding%s: %d error, %d warning, %d info, %d hint (%s, %.1f s)',
        r.findings, r.findings == 1 and '' or 's', s.error or 0, s.warning or 0, s.info or 0, s.hint or 0,
        r.arch or '?', r.seconds or 0))
    end)
  end, { desc = 'kernellsp: check this file now' })
  vim.api.nvim_buf_create_user_command(bufnr, 'KernellspRule', function(o)
    exec(bufnr, 'kernellsp.showRule', { o.args }, function(text)
      vim.notify(text)
    end)
  end, { nargs = 1, desc = 'kernellsp: show a rule (e.g. KL101)' })
  vim.api.nvim_buf_create_user_command(bufnr, 'KernellspAddLaunchSpec', function(o)
    exec(bufnr, 'kernellsp.addLaunchSpec', { uri, o.args })
  end, { nargs = 1, desc = 'kernellsp: insert a draft launch spec above a kernel' })
end

local function with_attach(cfg)
  local user = cfg.on_attach
  cfg.on_attach = function(client, bufnr)
    M.create_commands(bufnr)
    if user then
      user(client, bufnr)
    end
  end
  return cfg
end

--- Start (or reuse) the server for a buffer on 0.7-0.10.
function M.start(bufnr, config)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local cfg = with_attach(deep_extend(M.defaults, config))
  cfg.root_dir = cfg.root_dir or M.root_dir(bufnr, cfg.root_markers)
  cfg.root_markers, cfg.filetypes = nil, nil
  if vim.lsp.start then -- 0.8+
    return vim.lsp.start(cfg, { bufnr = bufnr })
  end
  local id = clients_by_root[cfg.root_dir]
  if not id or not vim.lsp.get_client_by_id(id) then
    cfg.workspace_folders = { { uri = vim.uri_from_fname(cfg.root_dir), name = cfg.root_dir } }
    id = vim.lsp.start_client(cfg)
    clients_by_root[cfg.root_dir] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

--- Set up kernellsp. `config` overrides the defaults (cmd, settings, init_options, on_attach, ...).
function M.setup(config)
  config = config or {}
  if vim.lsp.config and vim.lsp.enable and config.use_enable ~= false then -- 0.11+
    local cfg = with_attach(deep_extend(M.defaults, config))
    cfg.name, cfg.use_enable = nil, nil
    vim.lsp.config('kernellsp', cfg)
    vim.lsp.enable('kernellsp')
    return
  end
  local filetypes = config.filetypes or M.defaults.filetypes
  local group = vim.api.nvim_create_augroup('kernellsp', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = filetypes,
    callback = function(args)
      M.start(args.buf, config)
    end,
  })
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(filetypes, vim.bo[buf].filetype) then
      M.start(buf, config)
    end
  end
end

return M
