"""The declarative rule matrix: one TOML file per rule, evaluated over named metrics.

A rule file (``rules/KL101-register-spills.toml``) holds its metadata on top — stable ``code``,
``name``, ``title``, ``severity``, ``scope`` (``kernel`` or ``line``), ``category`` — then the
``when`` condition in kernellsp's safe expression language, a ``message`` template that quotes
metric values (``{spill_stores}``, ``{occupancy_pct:.0f}``), a ``fix`` hint and ``guidance`` text
(the expert explanation that also feeds the rewrite prompt). Built-in rules (compiler messages,
spec problems) have ``emitter`` instead of ``when``. Bundled rules live in the repository's
``rules/``; a workspace's ``.kernellsp/rules/`` adds rules or overrides bundled ones by code.

Loading validates everything (unknown fields, unknown metric names, bad expressions, bad format
specs) and raises :class:`RuleError` naming the file and the field.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kernellsp.findings import Severity
from kernellsp.rules import registry as metrics
from kernellsp.source import exprs

CODE_RE = re.compile(r"^KL\d{3}$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::([^{}]*))?\}")

Emitter = Literal[
    "nvcc-error",
    "nvcc-warning",
    "build-timeout",
    "spec-error",
    "missing-spec",
    "ncu-rule",
    "source-encoding",
    "suppression-code",
]


class RuleError(ValueError):
    """A malformed rule file; the message names the file and the field."""


class Rule(BaseModel):
    """One rule, as written in its TOML file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    name: str
    title: str
    severity: Severity
    scope: Literal["kernel", "line", "file"]
    category: str
    message: str
    fix: str
    guidance: str
    when: str | None = None
    emitter: Emitter | None = None
    #: Expression for ranking (expected share of kernel time this fixes, percent); profile rules.
    impact: str | None = None
    source: Literal["static", "profile"] = "static"
    references: list[str] = Field(default_factory=list)
    #: Path of the file it came from (set by the loader, not written in the file).
    origin: str = ""

    @field_validator("code")
    @classmethod
    def _check_code(cls, v: str) -> str:
        # A field validator, so the error names the field 'code' rather than the whole file.
        if not CODE_RE.match(v):
            raise ValueError(f"code {v!r} must look like KL123")
        return v

    @model_validator(mode="after")
    def _check(self) -> Rule:
        if (self.when is None) == (self.emitter is None):
            raise ValueError("give exactly one of 'when' (a condition) or 'emitter' (a built-in source)")
        return self

    def metric_names(self) -> set[str]:
        names: set[str] = set()
        if self.when:
            names |= exprs.parse(self.when).names
        if self.impact:
            names |= exprs.parse(self.impact).names
        for m in _PLACEHOLDER.finditer(self.message):
            names.add(m.group(1))
        return names


_KNOWN_PLACEHOLDERS_BUILTIN = {"message", "kernel", "field", "tool", "code_text"}


def _validate_names(rule: Rule, path: Path) -> None:
    if rule.emitter is not None:
        for m in _PLACEHOLDER.finditer(rule.message):
            if m.group(1) not in _KNOWN_PLACEHOLDERS_BUILTIN:
                raise RuleError(
                    f"{path}: field 'message': unknown placeholder {{{m.group(1)}}} for a built-in rule "
                    f"(known: {', '.join(sorted(_KNOWN_PLACEHOLDERS_BUILTIN))})"
                )
        return
    for fld, text in (("when", rule.when), ("impact", rule.impact)):
        if text is None:
            continue
        try:
            names = exprs.parse(text).names
        except exprs.ExprError as exc:
            raise RuleError(f"{path}: field '{fld}': {exc}") from None
        for n in sorted(names):
            _check_metric(n, rule, path, fld)
    for m in _PLACEHOLDER.finditer(rule.message):
        _check_metric(m.group(1), rule, path, "message")
        spec = m.group(2)
        if spec:
            # Valid if it formats some kind of metric value: an integer (`d`, `x`), a float, a name.
            for sample in (1, 1.5, "x"):
                try:
                    format(sample, spec)
                    break
                except ValueError:
                    continue
            else:
                raise RuleError(f"{path}: field 'message': bad format spec {spec!r} for {m.group(1)}")


def _check_metric(name: str, rule: Rule, path: Path, fld: str) -> None:
    d = metrics.get(name)
    if d is None:
        close = [m.name for m in metrics.all_metrics() if m.name.startswith(name[:4])][:5]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise RuleError(f"{path}: field '{fld}': unknown metric {name!r}{hint}")
    if rule.scope == "kernel" and d.scope == "line":
        raise RuleError(f"{path}: field '{fld}': {name!r} is a line metric but the rule's scope is kernel")


def load_rule_file(path: Path) -> Rule:
    """Load and validate one rule file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"{path}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleError(f"{path}: cannot read: {exc}") from None
    try:
        rule = Rule.model_validate({**data, "origin": str(path)})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(file)"
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] == "extra_forbidden":
            msg = f"unknown field (known: {', '.join(sorted(set(Rule.model_fields) - {'origin'}))})"
        raise RuleError(f"{path}: field '{loc}': {msg}") from None
    _validate_names(rule, path)
    return rule


def bundled_rules_dir() -> Path:
    """``$KERNELLSP_RULES_DIR``, else the repository's ``rules/`` (a source checkout), else the copy
    the build puts into the package (``kernellsp/data/rules``, see ``setup.py``)."""
    env = os.environ.get("KERNELLSP_RULES_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent  # kernellsp/
    for cand in (here.parent / "rules", here / "data" / "rules"):
        if cand.is_dir():
            return cand
    return here.parent / "rules"


@dataclass
class RuleSet:
    """Rules by code, plus where each came from."""

    rules: dict[str, Rule]

    def get(self, code: str) -> Rule | None:
        return self.rules.get(code)

    def by_emitter(self, emitter: str) -> Rule | None:
        return next((r for r in self.rules.values() if r.emitter == emitter), None)

    def conditional(self, scope: str, source: str = "static") -> list[Rule]:
        return [r for r in self.rules.values() if r.when and r.scope == scope and r.source == source]

    def sorted(self) -> list[Rule]:
        return [self.rules[c] for c in sorted(self.rules)]


def load_rules(workspace: Path | None = None, extra_dirs: Iterable[Path] = ()) -> RuleSet:
    """Bundled rules, then ``extra_dirs``, then ``<workspace>/.kernellsp/rules`` (later wins by code)."""
    bundled = bundled_rules_dir()
    if not (bundled.is_dir() and any(bundled.glob("*.toml"))):
        # Silence here would read as "no findings" on every file: an install without its rules is broken.
        raise RuleError(
            f"no bundled rule files in {bundled}: this kernellsp installation is incomplete "
            "(reinstall it, or set KERNELLSP_RULES_DIR to a folder of rule files)"
        )
    dirs = [bundled, *extra_dirs]
    if workspace is not None:
        dirs.append(workspace / ".kernellsp" / "rules")
    return _load_dirs(tuple(str(d) for d in dirs), _mtimes(dirs))


def _mtimes(dirs: list[Path]) -> tuple[float, ...]:
    out: list[float] = []
    for d in dirs:
        if d.is_dir():
            out.extend(p.stat().st_mtime for p in sorted(d.glob("*.toml")))
            out.append(float(len(list(d.glob("*.toml")))))
    return tuple(out)


@lru_cache(maxsize=16)
def _load_dirs(dirs: tuple[str, ...], _stamp: tuple[float, ...]) -> RuleSet:
    rules: dict[str, Rule] = {}
    for d in dirs:
        p = Path(d)
        if not p.is_dir():
            continue
        seen_here: dict[str, Path] = {}
        for f in sorted(p.glob("*.toml")):
            rule = load_rule_file(f)
            if rule.code in seen_here:
                raise RuleError(f"{f}: field 'code': {rule.code} is also used by {seen_here[rule.code]}")
            seen_here[rule.code] = f
            rules[rule.code] = rule
    return RuleSet(rules)


# --------------------------------------------------------------------------------------------------
# Evaluation


def applies(rule: Rule, values: Mapping[str, Any]) -> bool:
    """Does ``rule`` fire for ``values``? Rules whose inputs are missing stay silent."""
    assert rule.when is not None
    expr = exprs.parse(rule.when)
    if not expr.names <= values.keys():
        return False
    try:
        return bool(expr.evaluate(values))
    except exprs.ExprError:
        return False


def impact(rule: Rule, values: Mapping[str, Any]) -> float:
    """The rule's ranking value for ``values`` (0 when it has none or it cannot be computed)."""
    if not rule.impact:
        return 0.0
    try:
        v = exprs.parse(rule.impact).evaluate(values)
    except exprs.ExprError:
        return 0.0
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


def render(template: str, values: Mapping[str, Any]) -> str:
    """Fill ``{name}`` / ``{name:fmt}`` placeholders; never reaches attributes or indices."""

    def sub(m: re.Match[str]) -> str:
        v = values.get(m.group(1))
        if v is None:
            return "?"
        spec = m.group(2) or ""
        if isinstance(v, bool):
            return "yes" if v else "no"
        try:
            return format(v, spec)
        except (ValueError, TypeError):
            return str(v)

    return _PLACEHOLDER.sub(sub, template)
