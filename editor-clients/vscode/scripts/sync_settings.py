#!/usr/bin/env python3
"""Write ``contributes.configuration`` of package.json from kernellsp's settings schema.

    python3 scripts/sync_settings.py           # rewrite package.json
    python3 scripts/sync_settings.py --check   # exit 1 when package.json is out of date

The server's settings come from ``kernellsp settings-schema`` (the JSON schema generated from the
settings model, :func:`kernellsp.lsp.config.section_schema`): every leaf of that nested schema
becomes one flat VS Code setting (``kernellsp.budgets.minGainPct``), which VS Code hands back as the
same nested ``kernellsp`` section the server reads. Only the client's own settings (where the
server is, protocol tracing) are written here. Run it with an interpreter that has kernellsp
installed (the repository's ``.venv/bin/python``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

PACKAGE_JSON = Path(__file__).resolve().parent.parent / "package.json"

#: Settings of the VS Code client itself (never sent to the server: see CLIENT_KEYS in src/extension.ts).
CLIENT_SETTINGS: dict[str, dict[str, Any]] = {
    "kernellsp.server.path": {
        "type": "string",
        "default": "",
        "scope": "machine-overridable",
        "markdownDescription": "The `kernellsp` executable (or a Python interpreter with kernellsp installed, "
        "or a virtual environment directory). Empty: the workspace's `.venv`, then `PATH`.",
    },
    "kernellsp.trace.server": {
        "type": "string",
        "enum": ["off", "messages", "verbose"],
        "default": "off",
        "scope": "window",
        "description": "Log the LSP messages between VS Code and the kernellsp server in the kernellsp output.",
    },
}

_KEEP = ("type", "default", "enum", "items", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _flatten(schema: dict[str, Any], prefix: str, out: dict[str, dict[str, Any]]) -> None:
    for key, prop in schema.get("properties", {}).items():
        name = f"{prefix}.{key}"
        if prop.get("type") == "object" and "properties" in prop:
            _flatten(prop, name, out)
            continue
        entry = {k: prop[k] for k in _KEEP if k in prop}
        entry["description"] = prop.get("description", "")
        entry["scope"] = "resource"
        out[name] = entry


def configuration(schema: dict[str, Any]) -> dict[str, Any]:
    """VS Code's ``contributes.configuration`` for the server schema plus the client's own settings."""
    props: dict[str, dict[str, Any]] = {}
    _flatten(schema, "kernellsp", props)
    props.update(CLIENT_SETTINGS)
    for order, entry in enumerate(props.values()):
        entry["order"] = order
    return {"title": "kernellsp", "properties": props}


def server_schema() -> dict[str, Any]:
    try:
        from kernellsp.lsp.config import section_schema
    except ImportError as exc:
        sys.exit(f"sync_settings.py: cannot import kernellsp ({exc}); run it with the project's .venv/bin/python")
    return section_schema()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when package.json differs")
    args = parser.parse_args()
    text = PACKAGE_JSON.read_text(encoding="utf-8")
    manifest = json.loads(text)
    manifest.setdefault("contributes", {})["configuration"] = configuration(server_schema())
    new = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    if args.check:
        if new != text:
            print(f"{PACKAGE_JSON}: contributes.configuration is out of date with `kernellsp settings-schema`; "
                  "run editor-clients/vscode/scripts/sync_settings.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        PACKAGE_JSON.write_text(new, encoding="utf-8")
        print(f"updated {PACKAGE_JSON}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
