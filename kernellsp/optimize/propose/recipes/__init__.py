"""Recipes: structural rewrites an expert would make, matched on the kernel IR, no network.

Every module of this package except ``base`` and ``proposer`` (and names starting with ``_``) is a
recipe (see :mod:`kernellsp.optimize.propose.recipes.base` for what a module declares); adding a
module adds a recipe, nothing else to register. :func:`explain` says, per recipe and kernel,
whether it matches (with its binding) or why it declines: ``kernellsp optimize FILE --explain``
prints it, the language server's diagnostics use it to say "fix available".
"""

from __future__ import annotations

import importlib
import itertools
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from types import ModuleType
from typing import Any

from kernellsp.optimize.propose.recipes.base import (
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
    contexts_for,
)
from kernellsp.source import spec as specmod
from kernellsp.source.ir.canon import Firing
from kernellsp.source.model import SourceModel

__all__ = [
    "Decline",
    "Match",
    "Recipe",
    "RecipeContext",
    "RecipeError",
    "RecipeExplanation",
    "Rewrite",
    "canonical_passes",
    "explain",
    "recipe",
    "recipes",
]

_NOT_RECIPES = {"base", "proposer"}


@dataclass
class Recipe:
    """A loaded recipe module: its metadata and its functions."""

    name: str
    archetype: str
    rules: tuple[str, ...]
    params: dict[str, list[Any]]
    doc: str
    module: ModuleType

    def match(self, ctx: RecipeContext) -> Match | Decline:
        """The module's ``match``; an exception inside it is a decline naming the bug, never a crash."""
        try:
            got = self.module.match(ctx)
        except (
            RecipeError,
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
            AssertionError,
            RecursionError,
        ) as exc:
            return Decline(f"internal error while matching ({type(exc).__name__}: {exc})", ctx.kernel.name)
        if isinstance(got, Match | Decline) and not got.kernel:
            got.kernel = ctx.kernel.name
        return got

    def points(self, ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
        """Parameter points to try, best guess first: the module's ``points`` or defaults plus one-at-a-time variations."""
        custom: Callable[[RecipeContext, Match], list[dict[str, Any]]] | None = getattr(
            self.module, "points", None
        )
        if custom is not None:
            return custom(ctx, m)
        default = {k: v[0] for k, v in self.params.items()}
        out = [default]
        for k, values in self.params.items():
            for v in values[1:]:
                out.append({**default, k: v})
        return out

    def generate(self, ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
        got: Rewrite = self.module.generate(ctx, m, params)
        return got

    @staticmethod
    def label(name: str, params: dict[str, Any]) -> str:
        """``recipe:NAME(k=v, ...)``: the candidate description memory keys on (stable across runs)."""
        inner = ", ".join(f"{k}={params[k]}" for k in sorted(params))
        return f"recipe:{name}({inner})"


@lru_cache(maxsize=1)
def _load() -> tuple[Recipe, ...]:
    import kernellsp.optimize.propose.recipes as pkg

    out: list[Recipe] = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name in _NOT_RECIPES or info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        if not all(hasattr(mod, a) for a in ("NAME", "ARCHETYPE", "RULES", "PARAMS", "match", "generate")):
            continue
        out.append(
            Recipe(
                mod.NAME, mod.ARCHETYPE, tuple(mod.RULES), dict(mod.PARAMS), (mod.__doc__ or "").strip(), mod
            )
        )
    return tuple(out)


def recipes() -> list[Recipe]:
    """Every recipe, by name."""
    return list(_load())


def recipe(name: str) -> Recipe | None:
    return next((r for r in _load() if r.name == name), None)


@dataclass
class RecipeExplanation:
    """One recipe against one kernel of an entry: matched (with its binding) or declined (with the reason)."""

    recipe: str
    archetype: str
    rules: list[str]
    entry: str
    kernel: str
    matched: bool
    binding: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    params: dict[str, list[Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "archetype": self.archetype,
            "rules": self.rules,
            "entry": self.entry,
            "kernel": self.kernel,
            "matched": self.matched,
            "binding": self.binding,
            "reason": self.reason,
            "params": self.params,
        }


def canonical_passes(model: SourceModel, entry: str, spec: specmod.BoundSpec | None = None) -> list[Firing]:
    """The canonicalisation passes that changed the entry's kernels before the recipes matched, in order."""
    ctxs = contexts_for(model, entry, spec)
    canon = ctxs[0].canon if ctxs else None
    return list(canon.fired) if canon is not None else []


def explain(model: SourceModel, entry: str, spec: specmod.BoundSpec | None = None) -> list[RecipeExplanation]:
    """Every recipe against every kernel ``entry`` may rewrite, matched or declined (never raises)."""
    ctxs = contexts_for(model, entry, spec)
    out: list[RecipeExplanation] = []
    if not ctxs:
        fn = model.function(entry)
        why = (
            f"{entry} is not defined in the file"
            if fn is None or not fn.has_body
            else f"{entry} launches no kernel defined in this file"
        )
        for r in _load():
            out.append(RecipeExplanation(r.name, r.archetype, list(r.rules), entry, "", False, reason=why))
        return out
    for ctx, r in itertools.product(ctxs, _load()):
        got = r.match(ctx)
        if isinstance(got, Match):
            out.append(
                RecipeExplanation(
                    r.name,
                    r.archetype,
                    list(r.rules),
                    entry,
                    ctx.kernel.name,
                    True,
                    binding=got.binding,
                    params=r.params,
                )
            )
        else:
            out.append(
                RecipeExplanation(
                    r.name, r.archetype, list(r.rules), entry, ctx.kernel.name, False, reason=got.reason
                )
            )
    return out
