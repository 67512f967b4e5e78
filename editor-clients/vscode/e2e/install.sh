#!/usr/bin/env bash
# Install what the VS Code end-to-end test drives: code-server 4.100.3 (VS Code 1.100.3, the last
# release for Node 20) and playwright-core (no browser download: the test uses Debian's chromium).
#
#   editor-clients/vscode/e2e/install.sh DIR
#
# installs into DIR/node_modules with DIR/npm-cache as npm's cache, and does nothing when DIR already
# holds both at the pinned versions. Needs node 20, npm, and (as root: apt-get install) libkrb5-dev
# and ripgrep. Three workarounds make the install work offline (only the npm registry reachable);
# see /work/shared/reference/editors.md §2.1 in the project notes:
#   1. kerberos builds from source against gssapi.h: libkrb5-dev.
#   2. @vscode/ripgrep's postinstall downloads rg from GitHub: its cache is pre-seeded with Debian's rg.
#   3. node-pty's postinstall runs `npx node-gyp`: npm_config_yes=true lets npx proceed.
set -euo pipefail

CODE_SERVER_VERSION=4.100.3
PLAYWRIGHT_VERSION=1.65.1
RIPGREP_PKG_VERSION=1.15.11

dir=${1:?usage: install.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

installed() {
  node -e 'const [d, n, v] = process.argv.slice(1); const p = require(d + "/node_modules/" + n + "/package.json");
           process.exit(p.version === v ? 0 : 1)' "$dir" "$1" "$2" 2>/dev/null
}
if installed code-server "$CODE_SERVER_VERSION" && installed playwright-core "$PLAYWRIGHT_VERSION" \
   && [ -x "$dir/node_modules/.bin/code-server" ]; then
  echo "code-server $CODE_SERVER_VERSION and playwright-core $PLAYWRIGHT_VERSION already in $dir"
  exit 0
fi

for tool in node npm rg; do
  command -v "$tool" >/dev/null || { echo "install.sh: $tool not found (apt-get install nodejs npm ripgrep)" >&2; exit 2; }
done
[ -e /usr/include/gssapi/gssapi.h ] || [ -e /usr/include/gssapi.h ] \
  || { echo "install.sh: gssapi.h not found (apt-get install libkrb5-dev)" >&2; exit 2; }

# Workaround 2: @vscode/ripgrep looks in <os.tmpdir()>/vscode-ripgrep-cache-<version>/ first.
tmp=$(node -p 'require("os").tmpdir()')
rg_cache="$tmp/vscode-ripgrep-cache-$RIPGREP_PKG_VERSION"
rg_tar="$rg_cache/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
if [ ! -s "$rg_tar" ]; then
  mkdir -p "$rg_cache"
  stage=$(mktemp -d)
  cp "$(command -v rg)" "$stage/rg"
  tar -C "$stage" -czf "$rg_tar" rg
  rm -rf "$stage"
fi

cd "$dir"
[ -f package.json ] || echo '{"name": "kernellsp-vscode-e2e", "private": true}' > package.json
unsafe=()
[ "$(id -u)" = 0 ] && unsafe=(--unsafe-perm)
# Workaround 3 (npm_config_yes); --foreground-scripts shows the native builds' output on failure.
npm_config_yes=true npm install --no-audit --no-fund --foreground-scripts --loglevel=error "${unsafe[@]}" \
  --cache "$dir/npm-cache" "code-server@$CODE_SERVER_VERSION" "playwright-core@$PLAYWRIGHT_VERSION" >"$dir/install.log" 2>&1 \
  || { tail -40 "$dir/install.log" >&2; echo "install.sh: npm install failed (full log: $dir/install.log)" >&2; exit 1; }
echo "installed code-server $CODE_SERVER_VERSION and playwright-core $PLAYWRIGHT_VERSION in $dir"
