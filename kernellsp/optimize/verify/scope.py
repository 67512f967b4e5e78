"""Edit scope: what a candidate rewrite may change, enforced before anything is compiled.

A candidate may change only
* the bodies of the targeted kernels (and qualifiers on their signature: ``const``,
  ``__restrict__``, ``__launch_bounds__``; parameter names, types and order stay),
* ``__device__`` helper functions (edit, add or remove),
* the structured launch fields of the targeted entries' specs: ``launch``, the default order of
  ``tunables`` values, and ``flags`` from an allow-list of semantics-preserving nvcc options.

Everything else — includes, macros, host code, ``main``, other kernels, the rest of every spec — must
stay byte-identical. Preprocessor directives other than ``#pragma`` inside editable regions are
refused too: a ``#define`` there would reach the host code and the harness that follow it. So are
function-scope ``static``/``extern`` variables other than ``__shared__`` ones: they live in global
memory for the whole process, so they could carry a result cache or a "first launch only" flag from
one launch to the next. This makes timing tamper-proof as well, because device code cannot reach
host timers, streams or the harness.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernellsp.source import spec as specmod
from kernellsp.source.model import Function, SourceModel, parse_source

if TYPE_CHECKING:
    from tree_sitter import Node

#: nvcc options a candidate may add through the spec's ``flags`` (they keep IEEE semantics).
ALLOWED_FLAGS = re.compile(
    r"^(-Xptxas=-O[0-3]|-Xptxas=-v|--extra-device-vectorization|-maxrregcount=\d{1,3}|--maxrregcount=\d{1,3}"
    r"|-Xptxas=--allow-expensive-optimizations=(true|false)|-lineinfo|-O[0-3])$"
)
_QUALIFIERS = re.compile(r"\b(const|__restrict__|__restrict|restrict)\b|__launch_bounds__\s*\([^)]*\)")


@dataclass
class ScopeResult:
    """``ok`` or the first violation, described for the user and the proposer."""

    ok: bool
    reason: str = ""
    line: int | None = None

    @classmethod
    def violation(cls, reason: str, line: int | None = None) -> ScopeResult:
        return cls(False, reason, line)


def _normalise_signature(fn: Function) -> tuple[str, tuple[tuple[str, str, bool], ...]]:
    params = tuple(
        (p.name, " ".join(_QUALIFIERS.sub(" ", p.base_type).split()), p.is_pointer) for p in fn.params
    )
    return fn.name, params


def _editable_spans(model: SourceModel, targets: set[str], entry: str | None = None) -> list[tuple[int, int, str]]:
    """Byte ranges (start, end, label) that may differ: target kernels, device helpers, target specs."""
    spans: list[tuple[int, int, str]] = []
    for fn in model.functions:
        outer = fn.outer_span or fn.span
        if fn.kind == "global" and fn.name in targets and fn.has_body:
            spans.append((outer.start_byte, outer.end_byte, f"kernel:{fn.name}"))
        elif fn.kind in ("device",):
            spans.append((outer.start_byte, outer.end_byte, "device"))
    bound, _ = specmod.specs_from_source(model)
    for b in bound:
        if (b.entry in targets or b.entry == entry) and b.block is not None:
            spans.append((b.block.span.start_byte, b.block.span.end_byte, f"spec:{b.entry}"))
    spans.sort()
    merged: list[tuple[int, int, str]] = []
    for s in spans:
        if merged and s[0] < merged[-1][1]:
            prev = merged[-1]
            merged[-1] = (prev[0], max(prev[1], s[1]), prev[2])
        else:
            merged.append(s)
    return merged


def _skeleton(model: SourceModel, targets: set[str], entry: str | None = None) -> tuple[bytes, list[tuple[str, bytes]]]:
    """The file with editable regions cut out (device helpers dropped, targets replaced by markers)."""
    data = model.text.encode("utf-8", errors="replace")
    out = bytearray()
    regions: list[tuple[str, bytes]] = []
    pos = 0
    for start, end, label in _editable_spans(model, targets, entry):
        out += data[pos:start]
        if label != "device":
            out += f"\x00{label}\x00".encode()
        regions.append((label, data[start:end]))
        pos = end
    out += data[pos:]
    # Removing device helpers leaves blank lines that may differ in number; collapse whitespace-only runs.
    text = re.sub(rb"\n[ \t]*(?=\n)", b"\n", bytes(out))
    text = re.sub(rb"\n{2,}", b"\n", text)
    return text, regions


def _first_diff_line(a: bytes, b: bytes) -> int:
    al, bl = a.split(b"\n"), b.split(b"\n")
    for i, (x, y) in enumerate(zip(al, bl, strict=False)):
        if x != y:
            return i
    return min(len(al), len(bl))


def _directive_in(region: bytes) -> str | None:
    for raw in region.split(b"\n"):
        line = raw.strip()
        if line.startswith(b"#") and not line.startswith(b"#pragma"):
            return line.decode("utf-8", errors="replace")[:80]
    return None


def _editable_nodes(model: SourceModel, targets: set[str], pick: Callable[[Node, bytes], str | None],
                    ) -> list[tuple[str, str, int]]:  # fmt: skip
    """``(text, region label, line)`` of each syntax node inside an editable region that ``pick`` names (returns
    its text for); a picked node's children are not searched further."""
    found: list[tuple[str, str, int]] = []
    if model.tree is None:
        return found
    spans = _editable_spans(model, targets)
    data = model.text.encode("utf-8", errors="replace")
    stack = [model.tree.root_node]
    while stack:
        node = stack.pop()
        text = pick(node, data)
        if text is None:
            stack.extend(node.children)
            continue
        for start, end, label in spans:
            if start <= node.start_byte and node.end_byte <= end:
                found.append((text, label, node.start_point[0]))
                break
    return sorted(found, key=lambda f: f[2])


def _parsed_directives(model: SourceModel, targets: set[str]) -> list[tuple[str, str, int]]:
    """Preprocessor directives (other than ``#pragma``) the parser finds inside an editable region.

    The line-based check misses a directive that follows a comment (``/**/ #define ...`` is still a
    directive: comments are whitespace to the preprocessor); the parse tree does not.
    """

    def directive(node: Node, data: bytes) -> str | None:
        if not node.type.startswith("preproc_") or node.type in ("preproc_arg", "preproc_params"):
            return None
        text = data[node.start_byte : node.end_byte].decode("utf-8", errors="replace").strip()
        if text.startswith("#pragma"):
            return None
        return text.splitlines()[0][:80] if text else node.type

    return _editable_nodes(model, targets, directive)


def _persistent_locals(model: SourceModel, targets: set[str]) -> list[tuple[str, str, int]]:
    """Function-scope ``static``/``extern`` variable (not ``__shared__``) inside an editable region.

    Such a variable lives in global device memory for the whole process, so it survives from one
    launch to the next: a result cache keyed on pointers or a "skip the work after the first launch"
    flag, which the harness's per-launch poisoning cannot see for ``inout`` buffers or replayed copies.
    Returns (declaration text, region label, line) of each.
    """

    def persistent(node: Node, data: bytes) -> str | None:
        if node.type != "declaration":
            return None
        kids = node.children
        storage = [c for c in kids if c.type == "storage_class_specifier"
                   and data[c.start_byte : c.end_byte] in (b"static", b"extern")]  # fmt: skip
        if not storage or any(data[c.start_byte : c.end_byte] == b"__shared__" for c in kids):
            return None
        return " ".join(data[node.start_byte : node.end_byte].decode("utf-8", errors="replace").split())[:80]

    return _editable_nodes(model, targets, persistent)


def check_scope(baseline: str, candidate: str, targets: list[str] | set[str], path: str = "<candidate>",
                entry: str | None = None) -> ScopeResult:  # fmt: skip
    """Is ``candidate`` a permitted edit of ``baseline`` for the ``targets`` kernels?

    ``entry`` names the spec'd entry when it is not itself a target (a host launcher): its spec's
    structured fields (flags, tunables order) may change too.
    """
    tset = set(targets)
    bm = parse_source(baseline, path)
    cm = parse_source(candidate, path)
    if cm.syntax_errors and not bm.syntax_errors:
        e = cm.syntax_errors[0]
        return ScopeResult.violation(f"the candidate does not parse (syntax error at line {e.start_line + 1})",
                                     e.start_line)  # fmt: skip
    for name in tset:
        bf, cf = bm.function(name), cm.function(name)
        if bf is None:
            return ScopeResult.violation(f"{name} is not defined in the baseline")
        if cf is None or not cf.has_body:
            return ScopeResult.violation(f"the candidate removed or renamed {name}")
        if bf.kind != cf.kind:
            return ScopeResult.violation(f"the candidate changed {name} from {bf.kind} to {cf.kind}", cf.span.start_line)
        if _normalise_signature(bf) != _normalise_signature(cf):
            return ScopeResult.violation(
                f"the candidate changed the signature of {name} (names, types or order of parameters); only const, "
                "__restrict__ and __launch_bounds__ may change", cf.span.start_line)  # fmt: skip
        if (bf.template_params or "") != (cf.template_params or ""):
            return ScopeResult.violation(f"the candidate changed the template parameters of {name}", cf.span.start_line)
    # Kernels outside the targets and host code must be identical: compare skeletons.
    bs, _ = _skeleton(bm, tset, entry)
    cs, cregions = _skeleton(cm, tset, entry)
    if bs != cs:
        line = _first_diff_line(bs, cs)
        return ScopeResult.violation(
            "the candidate changes code outside the targeted kernels and their __device__ helpers "
            f"(host code, includes, macros, other kernels or another spec; first difference near skeleton line {line + 1})",
        )  # fmt: skip
    for label, region in cregions:
        d = _directive_in(region)
        if d is not None:
            return ScopeResult.violation(f"preprocessor directive {d!r} inside an editable region ({label}); only #pragma is allowed")
    for d, label, line in _parsed_directives(cm, tset):
        return ScopeResult.violation(f"preprocessor directive {d!r} inside an editable region ({label}); only #pragma "
                                     "is allowed", line)  # fmt: skip
    known = {d for d, _, _ in _persistent_locals(bm, tset)}
    for decl, label, line in _persistent_locals(cm, tset):
        if decl in known:
            continue
        return ScopeResult.violation(
            f"function-scope static/extern variable in an editable region ({label}): {decl!r}; it lives in global "
            "memory and persists across launches (a cache or first-launch flag). Use registers, __shared__ "
            "or a non-static constexpr", line)  # fmt: skip
    # Host-side functions must not have become device functions or vice versa (covered by the skeleton),
    # and a target kernel may not be turned into a host launcher (covered by kind). Now the specs.
    bcount = Counter(b.entry for b in specmod.specs_from_source(bm)[0])
    ccount = Counter(b.entry for b in specmod.specs_from_source(cm)[0])
    for name in sorted(ccount):
        if ccount[name] > bcount[name]:
            # A second spec (e.g. in a comment inside a helper) would give the build other flags than the gate saw.
            return ScopeResult.violation(f"the candidate adds a launch spec for {name}; edit the existing spec instead")
    for name in tset | ({entry} if entry else set()):
        bspec = specmod.entry_spec(bm, name)
        if bspec is None:
            continue
        cspec = specmod.entry_spec(cm, name)
        if cspec is None:
            return ScopeResult.violation(f"the candidate removed the launch spec of {name}")
        r = check_spec_change(bspec.spec, cspec.spec)
        if not r.ok:
            return r
    return ScopeResult(True)


def check_spec_change(base: specmod.KernelSpec, cand: specmod.KernelSpec) -> ScopeResult:
    """Only ``launch``, the order of ``tunables`` values and allow-listed ``flags`` may change."""
    b = base.model_dump()
    c = cand.model_dump()
    for key in b:
        if key in ("launch", "tunables", "flags"):
            continue
        if b[key] != c.get(key):
            return ScopeResult.violation(f"the candidate changed spec field '{key}'; only launch, tunables order and "
                                         "allow-listed flags may change")  # fmt: skip
    if set(b["tunables"]) != set(c["tunables"]) or any(
        sorted(map(str, b["tunables"][k])) != sorted(map(str, c["tunables"][k])) for k in b["tunables"]
    ):
        return ScopeResult.violation("the candidate changed the tunables' names or values (only their order, "
                                     "which picks the default, may change)")  # fmt: skip
    for f in set(cand.flags) - set(base.flags):
        if not ALLOWED_FLAGS.match(f):
            return ScopeResult.violation(f"nvcc flag {f!r} is not allowed in a rewrite (allowed: -Xptxas=-O3, "
                                         "--extra-device-vectorization, -maxrregcount=N)")  # fmt: skip
    # Removing a flag the file builds with (-DNAME, -std=..., --use_fast_math) changes macros or semantics
    # of host code and other kernels just as editing them would: only allow-listed flags may go.
    for f in sorted(set(base.flags) - set(cand.flags)):
        if not ALLOWED_FLAGS.match(f):
            return ScopeResult.violation(f"the candidate removed nvcc flag {f!r}; only allow-listed flags "
                                         "(-Xptxas=-O3, --extra-device-vectorization, -maxrregcount=N) may be "
                                         "added or removed")  # fmt: skip
    if cand.launch is None and base.launch is not None:
        return ScopeResult.violation("the candidate removed the launch configuration")
    return ScopeResult(True)


def edit_targets(model: SourceModel, entry: str) -> list[str]:
    """The kernels a rewrite of ``entry`` may change: the entry itself, or the kernels a host launcher launches."""
    fn = model.function(entry)
    if fn is None or fn.kind == "global":
        return [entry]
    launched = sorted({s.kernel for s in model.launch_sites if s.caller == entry})
    return [k for k in launched if (f := model.function(k)) is not None and f.kind == "global"]
