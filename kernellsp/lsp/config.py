"""Editor settings (the ``kernellsp`` section) → core :class:`~kernellsp.settings.Settings`.

Editors send camelCase JSON, through ``initializationOptions`` and ``workspace/configuration``::

    {
      "arch": "sm_90", "runner": "local", "gpuHost": null,
      "ncu": {"fastSections": [...], "deepSet": "full"},
      "llm": {"baseUrl": "...", "model": "...", "apiKeyEnv": "OPENAI_API_KEY", "timeoutS": 120,
              "maxTokensPerRun": 200000},
      "budgets": {"buildTimeoutS": 120, "profileTimeoutS": 300, "optimizeRounds": 4,
                  "optimizeCandidates": 4, "minGainPct": 2},
      "checkOnChange": false, "debounceMs": 500
    }

:func:`to_overrides` maps this to the override dict of :func:`kernellsp.settings.load_settings`
(``None`` values mean "unset" and are dropped); :func:`resolve` builds the settings and names the
offending camelCase field when something is wrong. ``checkOnChange``/``debounceMs`` belong to
the server alone (:class:`ServerOptions`). Client-side keys (``trace``; ``server``, where VS Code
keeps the server's path) are ignored. The paths come from the settings model
(:func:`kernellsp.settings.editor_paths`; ``ncu.timeoutS`` is an alias of ``budgets.profileTimeoutS``),
and :func:`section_schema` is the section's JSON schema (``kernellsp settings-schema``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernellsp.build.toolchain import arch_problem, normalise_arch
from kernellsp.settings import (
    EDITOR_ALIASES,
    Settings,
    SettingsError,
    editor_paths,
    editor_schema,
    load_settings,
)

#: camelCase path in the editor section → snake_case path in :class:`Settings`, generated from the model
#: (:func:`kernellsp.settings.editor_paths`), with the aliases older clients send.
FIELD_MAP: dict[tuple[str, ...], tuple[str, ...]] = editor_paths()
_SECTIONS = {p[0] for p in FIELD_MAP if len(p) > 1}
#: Keys the server itself reads; and keys that belong to the editor client.
SERVER_KEYS = {"checkOnChange", "debounceMs"}
CLIENT_KEYS = {"trace", "server"}
_REVERSE = {v: k for k, v in FIELD_MAP.items() if k not in EDITOR_ALIASES}


class ConfigError(ValueError):
    """An invalid editor setting; the message names the field as the user wrote it."""


@dataclass(frozen=True)
class ServerOptions:
    """Settings of the language server itself (not of the core)."""

    check_on_change: bool = False
    debounce_ms: int = 500


#: The JSON schema of the server-only keys (:class:`ServerOptions`), merged into :func:`section_schema`.
SERVER_SCHEMA: dict[str, dict[str, Any]] = {
    "checkOnChange": {
        "type": "boolean",
        "default": False,
        "description": "Also check while typing (after debounceMs without edits), not only on open and save.",
    },
    "debounceMs": {
        "type": "integer",
        "minimum": 0,
        "default": 500,
        "description": "Delay of checkOnChange after the last edit, milliseconds.",
    },
}


def section_schema() -> dict[str, Any]:
    """The JSON schema of the whole ``kernellsp`` section the server reads (core settings + server keys).

    What ``kernellsp settings-schema`` prints and VS Code's ``contributes.configuration`` is generated from.
    Client-side keys (:data:`CLIENT_KEYS`) belong to each client and are not in it.
    """
    schema = editor_schema()
    schema["properties"].update(SERVER_SCHEMA)
    return schema


def _label(path: tuple[str, ...]) -> str:
    return "kernellsp." + ".".join(path)


def merge(*layers: dict[str, Any] | None) -> dict[str, Any]:
    """Deep-merge editor sections; later layers win, ``None`` values do not override."""
    out: dict[str, Any] = {}
    for layer in layers:
        if not layer:
            continue
        for k, v in layer.items():
            if isinstance(v, dict) and isinstance(out.get(k), dict):
                out[k] = merge(out[k], v)
            elif v is not None:
                out[k] = v
    return out


def to_overrides(section: dict[str, Any]) -> dict[str, Any]:
    """Map an editor section to the snake_case override dict; unknown keys raise :class:`ConfigError`."""
    if not isinstance(section, dict):
        raise ConfigError(f"kernellsp: settings must be an object, got {type(section).__name__}")
    out: dict[str, Any] = {}
    known_top = sorted({p[0] for p in FIELD_MAP} | SERVER_KEYS)
    for key, value in section.items():
        if key in SERVER_KEYS or key in CLIENT_KEYS or value is None:
            continue
        if key in _SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{_label((key,))}: expected an object, got {type(value).__name__}")
            known = sorted(p[1] for p in FIELD_MAP if p[0] == key)
            for sub, v in value.items():
                target = FIELD_MAP.get((key, sub))
                if target is None:
                    raise ConfigError(f"{_label((key, sub))}: unknown setting (known: {', '.join(known)})")
                if v is not None:
                    _put(out, target, v)
            continue
        target = FIELD_MAP.get((key,))
        if target is None:
            raise ConfigError(f"{_label((key,))}: unknown setting (known: {', '.join(known_top)})")
        _put(out, target, value)
    return out


def _put(out: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    d = out
    for p in path[:-1]:
        d = d.setdefault(p, {})
    d[path[-1]] = value


def server_options(section: dict[str, Any]) -> ServerOptions:
    """The server-only options of a section, validated."""
    check = section.get("checkOnChange")
    debounce = section.get("debounceMs")
    if check is not None and not isinstance(check, bool):
        raise ConfigError(f"kernellsp.checkOnChange: expected true or false, got {check!r}")
    if debounce is not None and (
        isinstance(debounce, bool) or not isinstance(debounce, int | float) or debounce < 0
    ):
        raise ConfigError(f"kernellsp.debounceMs: expected a number of milliseconds >= 0, got {debounce!r}")
    return ServerOptions(
        check_on_change=bool(check) if check is not None else False,
        debounce_ms=int(debounce) if debounce is not None else 500,
    )


_SETTINGS_ERR = re.compile(r"^overrides: setting '([^']*)': (.*)$", re.S)


def resolve(workspace: Path | None, section: dict[str, Any]) -> tuple[Settings, ServerOptions]:
    """Build the settings for ``workspace`` with the editor ``section`` on top.

    Raises :class:`ConfigError` naming the field (``kernellsp.budgets.buildTimeoutS``) for editor
    settings, or the file and field for a broken ``kernellsp.toml``/``pyproject.toml``.
    """
    opts = server_options(section)
    overrides = to_overrides(section)
    try:
        settings = load_settings(workspace, overrides)
    except SettingsError as exc:
        msg = str(exc)
        m = _SETTINGS_ERR.match(msg)
        if m:
            snake = tuple(p for p in m.group(1).split(".") if p)
            camel = _REVERSE.get(snake) or _REVERSE.get(snake[:2]) or _REVERSE.get(snake[:1]) or snake
            raise ConfigError(f"{_label(camel)}: {m.group(2)}") from None
        raise ConfigError(msg) from None
    arch = normalise_arch(settings.arch)
    problem = arch_problem(arch)
    if problem is not None:
        raise ConfigError(f"kernellsp.arch: {problem}")
    if arch != settings.arch:
        settings = settings.model_copy(update={"arch": arch})
    return settings, opts
