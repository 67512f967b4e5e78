"""Settings shared by the CLI and the language server.

Read, lowest precedence first, from: defaults; ``[tool.kernellsp.settings]`` of the workspace's
``pyproject.toml``; ``[settings]`` of ``kernellsp.toml``; environment variables
(``KERNELLSP_ARCH``, ``KERNELLSP_RUNNER``, ``KERNELLSP_GPU_HOST``, ``KERNELLSP_POOL_SCHEDULER``, ``KERNELLSP_LLM_BASE_URL``,
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
    """An OpenAI-compatible endpoint; without one the built-in recipes, then the tuner, propose rewrites."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible endpoint for rewrites (e.g. http://localhost:8000/v1); "
        "unset: the built-in recipes, then the tuner, propose rewrites.",
    )
    model: str | None = Field(default=None, description="Model name at that endpoint.")
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="Name of the environment variable that holds the endpoint's API key (the key itself is "
        "never stored in settings).",
    )
    timeout_s: float = Field(
        default=120.0, gt=0, description="Timeout of one request to the endpoint, seconds."
    )
    max_tokens_per_run: int = Field(
        default=200_000, gt=0, description="Token budget of one optimize run (prompt and answer tokens)."
    )

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)


class PoolSettings(BaseModel):
    """Where ``runner = "pool"`` verifies candidates: a Dask cluster of GPU workers (docs/cluster.md)."""

    model_config = ConfigDict(extra="forbid")

    scheduler: str = Field(
        default="local",
        description='The Dask scheduler of the pool: "local" starts one worker per GPU of this host (dask-cuda\'s '
        "LocalCUDACluster), or an address such as tcp://gpu-head:8786 (dask-cuda-worker on each GPU host, or "
        "dask-jobqueue on Slurm/PBS). Needs pip install 'kernellsp[cluster]'.",
    )
    gpus: list[str] = Field(
        default_factory=list,
        description='For scheduler "local": the GPUs to start workers on, as indices or UUIDs (empty: every GPU '
        "of this host). A cluster at an address uses the workers it has.",
    )
    gpu_model: str | None = Field(
        default=None,
        description="Verify only on workers whose GPU name contains this (e.g. H100); unset: the model with the "
        "most workers. Verdicts are only ever compared between GPUs of one model.",
    )
    connect_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="How long to wait for the scheduler and its first GPU worker, seconds.",
    )


def _editor(path: str) -> dict[str, Any]:
    """Where a setting sits in an editor's ``kernellsp`` section when not at its camelCase name."""
    return {"editor": path}


class Settings(BaseModel):
    """Every user-facing setting.

    The descriptions are the user documentation: :func:`editor_schema` turns this model into the
    JSON schema of the editors' ``kernellsp`` section (VS Code's settings come from it).
    """

    model_config = ConfigDict(extra="forbid")

    arch: str = Field(
        default="sm_90",
        description="Target GPU architecture for builds and occupancy (sm_80, sm_90, sm_100a, ...; the installed nvcc decides which it builds).",
    )
    runner: Literal["local", "ssh", "pool", "none"] = Field(
        default="local",
        description="Where builds and runs for profiling and rewrites happen: local (this host's GPU), ssh "
        "(the GPU host in gpuHost), pool (rewrites verified on the GPUs of a Dask cluster, see pool; profiling "
        "then needs local or ssh), none (static findings only).",
    )
    gpu_host: str | None = Field(
        default=None, description="user@host of the GPU machine, for runner ssh (or to profile remotely)."
    )
    ncu_fast_sections: list[str] = Field(
        default_factory=lambda: [
            "SpeedOfLight",
            "LaunchStats",
            "Occupancy",
            "WarpStateStats",
            "SourceCounters",
        ],
        description="Nsight Compute sections of the quick profile that runs after each save.",
        json_schema_extra=_editor("ncu.fastSections"),
    )
    ncu_deep_set: str = Field(
        default="full",
        description="Nsight Compute section set of a deep profile (profile --deep).",
        json_schema_extra=_editor("ncu.deepSet"),
    )
    profile_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="Timeout of one profile run, seconds.",
        json_schema_extra=_editor("budgets.profileTimeoutS"),
    )
    build_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="Timeout of one nvcc build, seconds.",
        json_schema_extra=_editor("budgets.buildTimeoutS"),
    )
    include_dirs: list[str] = Field(
        default_factory=list,
        description="Include folders for nvcc (-I), relative to the workspace root or absolute; added to those "
        "of compile_commands.json.",
    )
    defines: list[str] = Field(
        default_factory=list,
        description="Preprocessor definitions for nvcc (-D), as NAME or NAME=VALUE; added to those of "
        "compile_commands.json.",
    )
    extra_flags: list[str] = Field(
        default_factory=list,
        description="Further nvcc flags for every build (e.g. -std=c++20, --expt-relaxed-constexpr); flags that "
        "choose the output or the target (-o, -c, -arch, -gencode) are refused.",
    )
    compile_commands: str | None = Field(
        default=None,
        description="Path of the compile_commands.json to read include folders and defines from (relative to the "
        "workspace root); unset: the nearest compile_commands.json (or build/compile_commands.json) above the file, "
        'as clangd finds it; "none": do not read one.',
    )
    select: list[str] = Field(
        default_factory=list,
        description="Rules to report: codes or code prefixes (KL4 = every KL4xx rule); empty: every rule. The most "
        "specific entry of select and ignore decides.",
    )
    ignore: list[str] = Field(
        default_factory=list,
        description="Rules never to report: codes or code prefixes (KL404, KL5).",
    )
    gpu_wait_timeout_s: float = Field(
        default=0.0,
        ge=0,
        description="How long a GPU step waits for the GPU while another kernellsp job (any user's, local or over "
        "ssh) holds it, seconds; 0: as long as it takes (the wait shows who holds the GPU and can be cancelled).",
        json_schema_extra=_editor("budgets.gpuWaitTimeoutS"),
    )
    llm: LlmSettings = Field(default_factory=LlmSettings, description="The LLM proposer's endpoint.")
    pool: PoolSettings = Field(default_factory=PoolSettings, description="The GPU pool of runner = pool.")
    optimize_rounds: int = Field(
        default=4,
        ge=1,
        description="Rounds of the optimize loop (each proposes and verifies candidates).",
        json_schema_extra=_editor("budgets.optimizeRounds"),
    )
    optimize_candidates: int = Field(
        default=4,
        ge=1,
        description="Candidates per optimize round.",
        json_schema_extra=_editor("budgets.optimizeCandidates"),
    )
    min_gain_pct: float = Field(
        default=2.0,
        ge=0,
        description="A rewrite is accepted only when the lower bound of its speedup's confidence interval clears "
        "this gain, percent.",
        json_schema_extra=_editor("budgets.minGainPct"),
    )
    precision: Literal["strict", "fast"] = Field(
        default="strict",
        description="What a rewrite may compute with: strict refuses approximate or reduced-precision math the "
        "original does not use (tanh.approx, __sinf, __fdividef, TF32 or 16-bit conversions of fp32 data); fast "
        "allows it, still within the spec's tolerance, with an error budget of 100x the original's own error "
        "(strict: 10x).",
        json_schema_extra=_editor("optimize.precision"),
    )


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
    if env.get("KERNELLSP_POOL_SCHEDULER"):
        layer["pool"] = {"scheduler": env["KERNELLSP_POOL_SCHEDULER"]}
    llm: dict[str, Any] = {}
    for key, name in (
        ("base_url", "KERNELLSP_LLM_BASE_URL"),
        ("model", "KERNELLSP_LLM_MODEL"),
        ("api_key_env", "KERNELLSP_LLM_API_KEY_ENV"),
    ):
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
            # Every bad setting of the layer at once, not one per run.
            found = "; ".join(
                f"setting '{'.'.join(str(p) for p in err['loc'])}': {err['msg']}" for err in exc.errors()
            )
            raise SettingsError(f"{origin}: {found}") from None
    return Settings.model_validate(merged)


# -------------------------------------------------------------------------------------------------
# The editors' ``kernellsp`` section: camelCase, grouped (``ncu.fastSections``, ``budgets.minGainPct``)

#: Extra editor paths that older clients send; they map to the same setting as the documented path.
EDITOR_ALIASES: dict[tuple[str, ...], tuple[str, ...]] = {("ncu", "timeoutS"): ("profile_timeout_s",)}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _editor_fields(
    model: type[BaseModel], prefix: tuple[str, ...], snake: tuple[str, ...]
) -> list[tuple[tuple[str, ...], tuple[str, ...], Any]]:
    """(editor path, settings path, field info) for every leaf setting of ``model``."""
    out = []
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        editor = tuple(str(extra["editor"]).split(".")) if "editor" in extra else (*prefix, _camel(name))
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out += _editor_fields(annotation, editor, (*snake, name))
        else:
            out.append((editor, (*snake, name), info))
    return out


def editor_paths() -> dict[tuple[str, ...], tuple[str, ...]]:
    """Editor path (camelCase) → :class:`Settings` path (snake_case), aliases included."""
    paths = {editor: snake for editor, snake, _ in _editor_fields(Settings, (), ())}
    return {**paths, **EDITOR_ALIASES}


def editor_schema() -> dict[str, Any]:
    """The JSON schema of an editor's ``kernellsp`` section, generated from :class:`Settings`.

    Types, bounds, enums and descriptions come from pydantic's ``model_json_schema``; defaults from
    a default :class:`Settings` (so ``default_factory`` values appear too); nesting from the editor
    paths. Every object is closed (``additionalProperties: false``), like the model.
    """
    full = Settings.model_json_schema()
    defaults = Settings().model_dump()
    root: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kernellsp settings",
        "description": "The kernellsp section of an editor's settings (camelCase); the workspace's "
        "kernellsp.toml [settings] and pyproject.toml [tool.kernellsp.settings] apply underneath.",
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    for editor, snake, _info in _editor_fields(Settings, (), ()):
        props = full["properties"]
        prop: dict[str, Any] = {}
        for i, part in enumerate(snake):
            prop = props[part]
            if "$ref" in prop and i < len(snake) - 1:
                props = full["$defs"][prop["$ref"].rsplit("/", 1)[-1]]["properties"]
        leaf = {k: v for k, v in prop.items() if k not in ("title", "editor")}
        if "anyOf" in leaf:  # Optional[X] → {"type": [X, "null"]}
            types_ = [t["type"] for t in leaf.pop("anyOf")]
            leaf["type"] = types_
        value: Any = defaults
        for part in snake:
            value = value[part]
        leaf["default"] = value
        node = root
        for part in editor[:-1]:
            node = node["properties"].setdefault(
                part, {"type": "object", "properties": {}, "additionalProperties": False}
            )
        node["properties"][editor[-1]] = dict(sorted(leaf.items()))
    return root
