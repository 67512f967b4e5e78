-- kernellsp for Neovim 0.11+: put this directory on 'runtimepath', then `vim.lsp.enable('kernellsp')`.
-- Override fields with `vim.lsp.config('kernellsp', { ... })` (merged over this table).

---@type vim.lsp.Config
return {
  -- `kernellsp` on PATH, else pipx's / pip --user's bin folder ($PIPX_BIN_DIR, ~/.local/bin).
  cmd = { require('kernellsp').server_path(), 'serve' },
  filetypes = { 'cuda' },
  root_markers = { 'kernellsp.toml', 'pyproject.toml', '.git' },
  -- Sent as initializationOptions: the same keys as `settings.kernellsp` below.
  init_options = {},
  -- Answers workspace/configuration (section "kernellsp"). Unset keys fall back to the workspace's
  -- kernellsp.toml / [tool.kernellsp.settings], then to the defaults. Keys (camelCase):
  --   arch = 'sm_90', runner = 'local' | 'ssh' | 'none', gpuHost = 'user@host',
  --   ncu = { fastSections = { ... }, deepSet = 'full', timeoutS = 300 },
  --   llm = { baseUrl = '...', model = '...', apiKeyEnv = 'OPENAI_API_KEY', timeoutS = 120, maxTokensPerRun = 200000 },
  --   budgets = { buildTimeoutS = 120, profileTimeoutS = 300, optimizeRounds = 4, optimizeCandidates = 4, minGainPct = 2 },
  --   checkOnChange = false, debounceMs = 500
  settings = { kernellsp = {} },
  -- Buffer-local :KernellspCheck, :KernellspRule {code}, :KernellspAddLaunchSpec {kernel}.
  on_attach = function(_, bufnr)
    local ok, kernellsp = pcall(require, 'kernellsp')
    if ok then
      kernellsp.create_commands(bufnr)
    end
  end,
}
