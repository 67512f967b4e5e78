#!/usr/bin/env bash
# Build the extension and install the end-to-end test's tools; idempotent and quick when done.
#
#   editor-clients/vscode/e2e/prepare.sh CACHE_DIR
#
# 1. `npm ci` in editor-clients/vscode when node_modules is missing or older than package-lock.json
#    (npm's cache in CACHE_DIR/npm-cache), then `npm run package`: type check, esbuild bundle,
#    kernellsp.vsix (vsce 3.9).
# 2. e2e/install.sh CACHE_DIR/vscode-e2e: code-server 4.100.3 and playwright-core, once.
set -euo pipefail
cache=${1:?usage: prepare.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)

cd "$here"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error --cache "$cache/npm-cache" >"$cache/extension-npm-ci.log" 2>&1 \
    || { tail -30 "$cache/extension-npm-ci.log" >&2; echo "prepare.sh: npm ci failed" >&2; exit 1; }
fi
npm run --silent package >"$cache/extension-package.log" 2>&1 \
  || { tail -30 "$cache/extension-package.log" >&2; echo "prepare.sh: npm run package failed" >&2; exit 1; }
echo "built $here/kernellsp.vsix"
"$here/e2e/install.sh" "$cache/vscode-e2e"
