"""The editors' settings schema is generated from the settings model, and VS Code's package.json follows it.

CPU only: no node needed. ``kernellsp settings-schema`` prints :func:`kernellsp.lsp.config.section_schema`;
``editor-clients/vscode/scripts/sync_settings.py`` writes ``contributes.configuration`` from it; the
committed package.json must be what the script writes today.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
from typer.testing import CliRunner

from kernellsp.cli import app
from kernellsp.lsp.config import FIELD_MAP, SERVER_KEYS, resolve, section_schema, to_overrides
from kernellsp.settings import EDITOR_ALIASES, Settings, editor_paths

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "editor-clients" / "vscode"


def _defaults(schema: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, prop in schema["properties"].items():
        out[key] = _defaults(prop) if prop.get("type") == "object" else prop["default"]
    return out


def test_committed_package_json_matches_generated_schema() -> None:
    proc = subprocess.run(
        [sys.executable, str(VSCODE / "scripts" / "sync_settings.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    props = json.loads((VSCODE / "package.json").read_text())["contributes"]["configuration"]["properties"]
    # Every server setting is there, under its editor path, with the model's default.
    defaults = Settings().model_dump()
    for editor, snake in editor_paths().items():
        if editor in EDITOR_ALIASES:
            continue
        value: Any = defaults
        for part in snake:
            value = value[part]
        assert props["kernellsp." + ".".join(editor)]["default"] == value
    for key in SERVER_KEYS:
        assert f"kernellsp.{key}" in props


def test_cli_prints_the_schema() -> None:
    res = CliRunner().invoke(app, ["settings-schema"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == section_schema()


def test_schema_defaults_are_the_model_defaults_and_the_server_accepts_them() -> None:
    schema = section_schema()
    section = _defaults(schema)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(section, schema)
    settings, options = resolve(None, section)
    assert settings == Settings()
    assert (options.check_on_change, options.debounce_ms) == (False, 500)
    # The schema's closed objects and the server agree on what is unknown.
    bad = {**section, "budgets": {**section["budgets"], "minGain": 3}}
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
    try:
        to_overrides(bad)
    except ValueError as exc:
        assert "kernellsp.budgets.minGain" in str(exc)
    else:
        raise AssertionError("the server accepted an unknown setting")


def test_every_model_field_has_an_editor_path_and_a_description() -> None:
    snake_paths = set(FIELD_MAP.values())
    for name, info in Settings.model_fields.items():
        assert info.description, f"Settings.{name} has no description (it is the user documentation)"
        if name not in ("llm", "pool"):  # sections: their fields have the paths
            assert (name,) in snake_paths, name
    schema = section_schema()
    assert schema["properties"]["llm"]["properties"]["apiKeyEnv"]["default"] == "OPENAI_API_KEY"
    assert schema["properties"]["runner"]["enum"] == ["local", "ssh", "pool", "none"]
    assert schema["properties"]["pool"]["properties"]["scheduler"]["default"] == "local"
