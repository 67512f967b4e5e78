"""Settings shared by the CLI and the language server.

Read, lowest precedence first, from: defaults; ``[tool.kernellsp.settings]`` of the workspace's
``pyproject.toml``; ``[settings]`` of ``kernellsp.toml``; environment variables
(``KERNELLSP_ARCH``, ``KERNELLSP_RUNNER``, ``KERNELLSP_GPU_HOST``, ``KERNELLSP_LLM_BASE_URL``,
``KERNELLSP_LLM_MODEL``, ``KERNELLSP_LLM_API_KEY_ENV``); then explicit overrides (command-line
options, LSP ``initializationOptions`` and ``workspace/configuration``). The LLM key itself is never
stored: settings name the environment variable that holds it.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class LlmSettings(BaseModel):
    """An OpenAI-compatible endpoint; no endpoint means the built-in tuner proposes rewrites."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(default=120.0, gt=0)
    max_tokens_per_run: int = Field(default=200_000, gt=0)

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)


class Settings(BaseModel):
    """Every user-facing setting."""

    model_config = ConfigDict(extra="forbid")

    arch: str = "sm_90"
    runner: Literal["local", "ssh", "none"] = "local"
    gpu_host: str | None = None
    ncu_fast_sections: list[str] = Field(default_factory=lambda: [
        "SpeedOfLight", "LaunchStats", "Occupancy", "WarpStateStats", "SourceCounters",
    ])  # fmt: skip
    ncu_deep_set: str = "full"
    profile_timeout_s: float = Field(default=300.0, gt=0)
    build_timeout_s: float = Field(default=120.0, gt=0)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    optimize_rounds: int = Field(default=4, ge=1)
    optimize_candidates: int = Field(default=4, ge=1)
    min_gain_pct: float = Field(default=2.0, ge=0)


class SettingsError(ValueError):
    """Invalid settings; the message names the file or source and the field."""


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        elif v is not None:
            out[k] = v
    return out


def _env_layer() -> dict[str, Any]:
    env = os.environ
    layer: dict[str, Any] = {}
    if env.get("KERNELLSP_ARCH"):
        layer["arch"] = env["KERNELLSP_ARCH"]
    if env.get("KERNELLSP_RUNNER"):
        layer["runner"] = env["KERNELLSP_RUNNER"]
    if env.get("KERNELLSP_GPU_HOST"):
        layer["gpu_host"] = env["KERNELLSP_GPU_HOST"]
    llm: dict[str, Any] = {}
    for key, name in (("base_url", "KERNELLSP_LLM_BASE_URL"), ("model", "KERNELLSP_LLM_MODEL"),
                      ("api_key_env", "KERNELLSP_LLM_API_KEY_ENV")):  # fmt: skip
        if env.get(name):
            llm[key] = env[name]
    if llm:
        layer["llm"] = llm
    return layer


def load_settings(workspace: Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Merge every layer and validate; raise :class:`SettingsError` naming the bad field."""
    merged: dict[str, Any] = {}
    sources: list[tuple[str, dict[str, Any]]] = []
    if workspace is not None:
        for name, getter in (
            ("pyproject.toml", lambda d: d.get("tool", {}).get("kernellsp", {}).get("settings", {})),
            ("kernellsp.toml", lambda d: d.get("settings", {})),
        ):
            p = workspace / name
            if p.is_file():
                try:
                    data = tomllib.loads(p.read_text(encoding="utf-8"))
                except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
                    raise SettingsError(f"{p}: not valid TOML: {exc}") from None
                sources.append((str(p), getter(data)))
    sources.append(("environment", _env_layer()))
    if overrides:
        sources.append(("overrides", overrides))
    for origin, layer in sources:
        merged = _deep_merge(merged, layer)
        try:
            Settings.model_validate(merged)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise SettingsError(f"{origin}: setting '{loc}': {err['msg']}") from None
    return Settings.model_validate(merged)
