"""Canonicalisation: small, named, semantics-preserving passes that turn a kernel's spelling into one normal form.

Recipes (and the kernel facts rules read) match *what a kernel computes*; users spell the same
computation in many ways: an index behind a macro or a ``__device__`` helper, a declaration far
from its first assignment, ``if (i >= n) return;``, ``cg::this_thread_block().sync()``, a
``#pragma unroll`` between a loop header and its body, a guard the launch already implies. As in
compilers (MLIR canonicalisation, numba's rewrite passes), the fix is to normalise first and match
the normal form, so that a new spelling costs one pass and one test instead of a patch in every
recipe.

Each pass is a module of this package that declares ``NAME`` (stable, printed by ``optimize
--explain``), ``SUMMARY`` (one line) and ``run(unit) -> Change | None``: given one kernel of the
current text (:class:`~kernellsp.source.ir.canon.unit.Unit`), it returns byte-range edits inside that
kernel's definition and one note per thing it changed. :func:`canonicalize` runs the passes in
:data:`PASS_ORDER` over every kernel an entry may rewrite, re-parsing after each change, until no
pass changes anything (a fixed point; bounded rounds). The result is still CUDA source: the
canonical text compiles, and recipes generate code from it that replaces the kernel in the
*original* file (the scope gate and every verification gate judge that candidate as always). A pass
whose output does not parse is dropped and recorded, never applied.

Passes change only kernel bodies: signatures, host code, helpers and specs stay as written, so a
recipe's binding (parameter names, the launcher's names) is the user's own.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import Change, Edit, Unit, definition_node
from kernellsp.source.ir.launch import KernelLaunch, launch_model
from kernellsp.source.model import SourceModel, parse_source

if TYPE_CHECKING:
    from kernellsp.source import spec as specmod

__all__ = [
    "PASS_ORDER",
    "Canonical",
    "Change",
    "Edit",
    "Firing",
    "Unit",
    "canonicalize",
    "pass_summaries",
]

#: Pass modules in the order they run (each round runs them all, until none fires).
PASS_ORDER = (
    "arch_select",
    "pragma_attach",
    "const_fold",
    "cast_form",
    "launch_dims",
    "inline_helpers",
    "collectives",
    "structured_exits",
    "loop_form",
    "flat_blocks",
    "ssa_locals",
    "update_fold",
    "forward_subst",
    "uniform_atoms",
    "digits",
    "launch_guards",
    "parallel_loops",
    "register_promote",
    "reroll",
)
_MAX_ROUNDS = 6


@dataclass(frozen=True)
class Firing:
    """One pass changed one kernel: what it did, in a sentence per change."""

    name: str
    kernel: str
    notes: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.name}: " + "; ".join(self.notes)


@dataclass
class Canonical:
    """The canonical form of a file for one entry: the re-parsed model and the passes that fired."""

    original: SourceModel
    model: SourceModel
    fired: list[Firing] = field(default_factory=list)
    #: Passes whose output did not parse (dropped): pass name -> kernel.
    dropped: list[tuple[str, str]] = field(default_factory=list)
    launches: dict[str, KernelLaunch] = field(default_factory=dict)

    def fired_for(self, kernel: str) -> list[Firing]:
        return [f for f in self.fired if f.kernel == kernel]


@dataclass(frozen=True)
class CanonPass:
    name: str
    summary: str
    module: ModuleType

    def run(self, unit: Unit) -> Change | None:
        got: Change | None = self.module.run(unit)
        return got


@lru_cache(maxsize=1)
def passes() -> tuple[CanonPass, ...]:
    """The passes, in pipeline order."""
    out = []
    for mod_name in PASS_ORDER:
        mod = importlib.import_module(f"{__name__}.{mod_name}")
        out.append(CanonPass(mod.NAME, mod.SUMMARY, mod))
    return tuple(out)


def pass_summaries() -> list[tuple[str, str]]:
    """``(name, summary)`` of every pass, in order (``optimize --explain`` and the docs list them)."""
    return [(p.name, p.summary) for p in passes()]


def canonicalize(
    model: SourceModel,
    entry: str | None = None,
    bound: specmod.BoundSpec | None = None,
    kernels: list[str] | None = None,
    only: set[str] | None = None,
) -> Canonical:
    """The canonical form of ``model`` for ``entry`` (cached on the model for the default pass set).

    ``kernels`` are the kernels to normalise (default: every kernel ``entry`` launches, or every
    kernel of the file without an entry); ``only`` restricts the passes (tests run one at a time).
    """
    key = (entry, tuple(kernels or ()), tuple(sorted(only)) if only else None, id(bound))
    cache: dict[object, Canonical] | None = getattr(model, "_canon_cache", None)
    if cache is None:
        cache = {}
        setattr(model, "_canon_cache", cache)  # noqa: B010 - derived data cached beside the text
    if key not in cache:
        cache[key] = _canonicalize(model, entry, bound, kernels, only)
    return cache[key]


def _canonicalize(
    model: SourceModel,
    entry: str | None,
    bound: specmod.BoundSpec | None,
    kernels: list[str] | None,
    only: set[str] | None,
) -> Canonical:
    launches = launch_model(model, entry, bound) if entry else {}
    if kernels is None:
        kernels = list(launches) if launches else [k.name for k in model.kernels]
        if entry is not None and not launches:
            fn = model.function(entry)
            kernels = [entry] if fn is not None and fn.kind == "global" else _launched(model, entry)
    out = Canonical(model, model, launches=launches)
    todo = [p for p in passes() if only is None or p.name in only]
    if model.tree is None:
        return out
    cur = model
    for _ in range(_MAX_ROUNDS):
        changed = False
        for p in todo:
            for kname in kernels:
                nxt = _run_pass(p, cur, kname, launches.get(kname), out)
                if nxt is not None:
                    cur = nxt
                    changed = True
        if not changed:
            break
    out.model = cur
    return out


def _launched(model: SourceModel, entry: str) -> list[str]:
    names: list[str] = []
    for s in model.launch_sites:
        if s.caller in model.launchers(entry) and s.kernel not in names:
            k = model.function(s.kernel)
            if k is not None and k.has_body:
                names.append(s.kernel)
    return names


def _run_pass(
    p: CanonPass, cur: SourceModel, kname: str, launch: KernelLaunch | None, out: Canonical
) -> SourceModel | None:
    """Run one pass on one kernel; the re-parsed model when it changed something, else ``None``."""
    fn = next((f for f in cur.functions if f.name == kname and f.kind == "global" and f.has_body), None)
    if fn is None:
        return None
    node = definition_node(cur, fn)
    body = node.child_by_field_name("body") if node is not None else None
    if node is None or body is None:
        return None
    data = cur.text.encode("utf-8", errors="replace")
    unit = Unit(cur, fn, node, body, data, launch)
    try:
        change = p.run(unit)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError):
        out.dropped.append((p.name, kname))
        return None
    if not change:
        return None
    new = _apply(data, change.edits, body.start_byte, node.end_byte)
    if new is None or new == data:
        return None
    text = new.decode("utf-8", errors="replace")
    nxt = parse_source(text, cur.path)
    if len(nxt.syntax_errors) > len(cur.syntax_errors) or not any(
        f.name == kname and f.kind == "global" and f.has_body for f in nxt.functions
    ):
        out.dropped.append((p.name, kname))
        return None
    out.fired.append(Firing(p.name, kname, tuple(change.notes) or ("changed",)))
    return nxt


def _apply(data: bytes, edits: list[Edit], lo: int, hi: int) -> bytes | None:
    """``data`` with ``edits`` applied; ``None`` when an edit leaves ``[lo, hi)`` or two edits overlap."""
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    last = lo
    for e in ordered:
        if e.start < last or e.end > hi or e.start > e.end:
            return None
        last = e.end
    out = data
    for e in reversed(ordered):
        out = out[: e.start] + e.text.encode("utf-8") + out[e.end :]
    return out
