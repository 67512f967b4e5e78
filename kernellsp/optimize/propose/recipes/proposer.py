"""The recipe proposer: every matching recipe, several parameter points each, ordered by memory.

For each kernel the entry may rewrite, each recipe that matches yields candidates at its parameter
points (items per thread, vector width, block size...). The loop verifies them side by side and
keeps the fastest (branch and select). Recipes are ordered by what the workspace memory says they
measured on kernels of the same archetype (best verified speedup first; ones that only failed last),
and each recipe's points by what the same parameters measured before. Candidate descriptions are
``recipe:NAME(k=v, ...)`` and keys hash that label with the baseline text, so memory records are
stable across runs: a point that failed on this exact baseline is not proposed again.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from kernellsp.optimize.propose.base import (
    Candidate,
    ProposalContext,
    ProposerError,
    add_includes,
    splice_kernel,
)
from kernellsp.optimize.propose.recipes import Recipe, RecipeError, recipes
from kernellsp.optimize.propose.recipes.base import Match, RecipeContext, contexts_for
from kernellsp.source import exprs

_LABEL = re.compile(r"^recipe:([\w.-]+)\((.*)\)$")


def parse_label(description: str) -> tuple[str, str] | None:
    """``(recipe name, params text)`` of a candidate description written by this proposer."""
    m = _LABEL.match(description or "")
    return (m.group(1), m.group(2)) if m else None


def memory_records(path: str) -> list[dict[str, Any]]:
    """Every memory record of the workspace that holds ``path`` (all files: recipes learn across kernels)."""
    from kernellsp.optimize.evidence import Memory, state_dir

    try:
        return Memory(state_dir(Path(path)) / "memory.json").records
    except OSError:
        return []


def recipe_scores(records: list[dict[str, Any]], gpu: str | None = None) -> dict[str, tuple[float, int, int]]:
    """Per recipe name: (best measured speedup when accepted, accepted count, failed count), optionally one GPU's."""
    out: dict[str, tuple[float, int, int]] = {}
    for r in records:
        parsed = parse_label(str(r.get("transform") or r.get("description") or ""))
        if parsed is None or (gpu and r.get("gpu") and r.get("gpu") != gpu):
            continue
        best, ok, bad = out.get(parsed[0], (0.0, 0, 0))
        sp = r.get("measured_speedup")
        if r.get("verdict") == "accepted" and isinstance(sp, int | float):
            out[parsed[0]] = (max(best, float(sp)), ok + 1, bad)
        elif r.get("verdict") == "outpaced":
            # A sibling of the round's winner, slower than it: says nothing against the recipe.
            out[parsed[0]] = (best, ok, bad)
        else:
            out[parsed[0]] = (best, ok, bad + 1)
    return out


class RecipeProposer:
    """Implements :class:`kernellsp.optimize.propose.base.Proposer` over the recipe library."""

    name = "recipes"

    def __init__(self, only: list[str] | None = None) -> None:
        self.only = set(only) if only else None

    def _ordered(self, ctx: ProposalContext) -> list[Recipe]:
        lib = [r for r in recipes() if self.only is None or r.name in self.only]
        scores = recipe_scores(memory_records(ctx.path))
        by_arch: dict[str, float] = {}
        for r in lib:
            s = scores.get(r.name)
            if s is not None:
                by_arch[r.archetype] = max(by_arch.get(r.archetype, 0.0), s[0])

        def key(r: Recipe) -> tuple[float, float, str]:
            best, ok, bad = scores.get(r.name, (0.0, 0, 0))
            # Unknown recipes sit between proven ones (by their speedup) and ones that only ever failed.
            own = best if ok else (0.5 if bad else 1.0)
            return (-own, -by_arch.get(r.archetype, 1.0), r.name)

        return sorted(lib, key=key)

    def propose(self, ctx: ProposalContext, k: int) -> list[Candidate]:
        """Up to ``k`` candidates: the best-ranked recipes' points, interleaved so each matching recipe gets a slot."""
        rctxs = contexts_for(ctx.model, ctx.entry, ctx.spec)
        if not rctxs:
            return []
        failed = {
            t.get("key") for t in ctx.tried if t.get("key") and t.get("verdict") not in ("accepted", None)
        }
        tried_now = {t.get("key") for t in ctx.tried if t.get("key")}
        base_hash = hashlib.sha256(ctx.text.encode()).hexdigest()[:16]
        records = memory_records(ctx.path)
        streams: list[list[tuple[Recipe, RecipeContext, Match, dict[str, Any]]]] = []
        for r in self._ordered(ctx):
            for rctx in rctxs:
                got = r.match(rctx)
                if not isinstance(got, Match):
                    continue
                pts = r.points(rctx, got)
                streams.append([(r, rctx, got, p) for p in _order_points(r, pts, records)])
        out: list[Candidate] = []
        seen_text: set[str] = set()
        # Round-robin across recipes: the first candidate of each matching recipe before the second of any.
        while streams and len(out) < k:
            nxt: list[list[tuple[Recipe, RecipeContext, Match, dict[str, Any]]]] = []
            for stream in streams:
                if len(out) >= k:
                    break
                while stream:
                    r, rctx, m, params = stream.pop(0)
                    cand = self._candidate(ctx, r, rctx, m, params, base_hash)
                    if cand is None or cand.key in failed or cand.text in seen_text:
                        continue
                    if cand.key in tried_now and cand.key not in failed:
                        continue
                    seen_text.add(cand.text)
                    out.append(cand)
                    break
                if stream:
                    nxt.append(stream)
            streams = nxt
        return out

    def _candidate(
        self,
        ctx: ProposalContext,
        r: Recipe,
        rctx: RecipeContext,
        m: Match,
        params: dict[str, Any],
        base_hash: str,
    ) -> Candidate | None:
        try:
            rw = r.generate(rctx, m, params)
            text = splice_kernel(
                ctx.text,
                rw.kernel,
                rw.code,
                rw.launch,
                rw.host_config,
                (rctx.launch_site.caller if rctx.launch_site is not None else rctx.entry)
                if rctx.host_launched
                else None,
            )
            text = add_includes(text, rw.includes)
        except (RecipeError, ProposerError, exprs.ExprError, ValueError):
            return None
        if text == ctx.text:
            return None
        label = Recipe.label(r.name, params)
        key = hashlib.sha256(f"{label}|{rctx.kernel.name}|{base_hash}".encode()).hexdigest()[:16]
        return Candidate(text=text, description=label, proposer=self.name, rules=list(r.rules), key=key)


def _order_points(
    r: Recipe, points: list[dict[str, Any]], records: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The recipe's points, those that measured best before (any kernel) first; the recipe's own order otherwise."""
    best: dict[str, float] = {}
    for rec in records:
        parsed = parse_label(str(rec.get("transform") or ""))
        sp = rec.get("measured_speedup")
        if (
            parsed
            and parsed[0] == r.name
            and rec.get("verdict") == "accepted"
            and isinstance(sp, int | float)
        ):
            best[parsed[1]] = max(best.get(parsed[1], 0.0), float(sp))
    if not best:
        return points

    def key(ip: tuple[int, dict[str, Any]]) -> tuple[float, int]:
        i, p = ip
        inner = Recipe.label(r.name, p)[len("recipe:") + len(r.name) + 1 : -1]
        return (-best.get(inner, 0.0), i)

    return [p for _, p in sorted(enumerate(points), key=key)]
