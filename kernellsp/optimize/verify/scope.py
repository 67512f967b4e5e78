"""Edit scope: what a candidate rewrite may change, enforced before anything is compiled.

A candidate may change only
* the bodies of the targeted kernels (and qualifiers on their signature: ``const``,
  ``__restrict__``, ``__launch_bounds__``; parameter names, types and order stay),
* ``__device__`` helper functions (edit, add or remove),
* the structured launch fields of the targeted entries' specs: ``launch``, the default order of
  ``tunables`` values, and ``flags`` from an allow-list of semantics-preserving nvcc options,
* ``#include`` lines of a few CUDA toolkit headers (:data:`ALLOWED_INCLUDES`) added at the top of the
  file, among or right after its includes, before any code,
* for a host launcher entry, the grid and block expressions (the first two inside ``<<<...>>>``) of its
  launches of the targeted kernels, written with the launcher's own names, numbers, arithmetic and
  ``dim3(...)`` only (:func:`launch_config_violation`): no calls, no assignments, nothing that runs host
  code of its own.

Everything else — includes, macros, host code, ``main``, other kernels, the rest of every spec — must
stay the same token for token. Comments never decide scope: both files are compared without them
(:mod:`kernellsp.optimize.verify.lexical` confirms each comment the parser reports, so a comment
cannot hide code), except spec blocks, which are compared as written.

Preprocessor directives inside editable functions are judged against the baseline's
(docs/scope.md has the full rule): code-generation pragmas (``#pragma unroll``, diagnostics) may be
added anywhere; a directive the baseline has in the same kernel (or among the ``__device__`` helpers)
may be kept, moved within it or deleted; a new directive, or one whose text changed, is refused — a
``#define`` there would reach the host code and the harness that follow it. A function that holds a
directive changing what later code sees (``#define``, ``#undef``, ``#include``, other pragmas) or a
conditional that does not close inside it keeps its directives exactly as written.

Function-scope ``static``/``extern`` variables other than ``__shared__`` ones are refused too: they live
in global memory for the whole process, so they could carry a result cache or a "first launch only"
flag from one launch to the next. This makes timing tamper-proof as well, because device code cannot
reach host timers, streams or the harness.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernellsp.optimize.verify import lexical
from kernellsp.optimize.verify.skeleton import (
    Lex,
    Region,
    editable_spans,
    first_difference,
    regions_of,
    skeleton,
)
from kernellsp.source import spec as specmod
from kernellsp.source.model import Function, SourceModel, parse_source

if TYPE_CHECKING:
    from tree_sitter import Node

#: nvcc options a candidate may add through the spec's ``flags`` (they keep IEEE semantics).
ALLOWED_FLAGS = re.compile(
    r"^(-Xptxas=-O[0-3]|-Xptxas=-v|--extra-device-vectorization|-maxrregcount=\d{1,3}|--maxrregcount=\d{1,3}"
    r"|-Xptxas=--allow-expensive-optimizations=(true|false)|-lineinfo|-O[0-3])$"
)
#: Headers a candidate may add (at the top of the file, among or right after its includes): CUDA toolkit
#: headers that declare device-side facilities a rewrite needs (block-wide primitives, cooperative
#: groups, async copies, half/bfloat16 types, tensor-core fragments). They only add declarations in
#: their own names; nothing that the baseline's host code or the harness already uses changes meaning.
ALLOWED_INCLUDES = (
    "<cub/cub.cuh>",
    "<cooperative_groups.h>",
    "<cuda_pipeline.h>",
    "<cuda_fp16.h>",
    "<cuda_bf16.h>",
    "<mma.h>",
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


def _include_nodes(model: SourceModel) -> list[Node]:
    if model.tree is None:
        return []
    found: list[Node] = []
    stack = [model.tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "preproc_include":
            found.append(node)
        else:
            stack.extend(node.children)
    return sorted(found, key=lambda n: n.start_byte)


def _include_text(node: Node, data: bytes) -> tuple[str, Node | None]:
    path = node.child_by_field_name("path")
    if path is None:
        return " ".join(data[node.start_byte : node.end_byte].decode("utf-8", errors="replace").split()), None
    return "#include " + data[path.start_byte : path.end_byte].decode("utf-8", errors="replace"), path


#: What may precede an added #include at file scope: the file's header zone.
_HEADER_ZONE = frozenset(
    {"comment", "preproc_include", "preproc_def", "preproc_function_def", "preproc_call"}
)


def _added_includes(
    bm: SourceModel,
    cm: SourceModel,
    targets: set[str],
    entry: str | None,
) -> tuple[ScopeResult | None, list[tuple[int, int]]]:
    """Check the ``#include`` lines the candidate adds outside its editable regions.

    Returns the first violation, or the byte ranges of the permitted new includes (to leave out of the
    candidate's skeleton). Includes inside editable regions are directives, judged there.
    """
    bdata = bm.text.encode("utf-8", errors="replace")
    cdata = cm.text.encode("utf-8", errors="replace")

    def outside(model: SourceModel, nodes: list[Node]) -> list[Node]:
        spans = editable_spans(model, targets, entry)
        return [n for n in nodes if not any(s <= n.start_byte < e for s, e, _ in spans)]

    have = Counter(_include_text(n, bdata)[0] for n in outside(bm, _include_nodes(bm)))
    allowed = ", ".join(ALLOWED_INCLUDES)
    cut: list[tuple[int, int]] = []
    for node in outside(cm, _include_nodes(cm)):
        text, path = _include_text(node, cdata)
        if have[text] > 0:
            have[text] -= 1
            continue
        line = node.start_point[0]
        if path is None or path.type not in ("system_lib_string", "string_literal"):
            return ScopeResult.violation(
                f"the candidate adds an #include through a macro ({text!r} at line {line + 1}): only allow-listed "
                f"CUDA toolkit headers may be added, spelled out, at the top among the file's #includes ({allowed})",
                line,
            ), []
        if path.type == "string_literal":
            return ScopeResult.violation(
                f"the candidate adds a quoted include ({text!r} at line {line + 1}): local files may not be added; only "
                f"allow-listed CUDA toolkit headers in angle brackets may, at the top among the file's #includes "
                f"({allowed})",
                line,
            ), []
        header = text[len("#include ") :]
        if header not in ALLOWED_INCLUDES:
            return ScopeResult.violation(
                f"the candidate adds {text!r} (line {line + 1}), which is not among the headers a rewrite may add to "
                f"the file's #includes: {allowed}",
                line,
            ), []
        if any(
            _include_text(n, cdata)[0] == text for n in _include_nodes(cm) if n.start_byte < node.start_byte
        ):
            return ScopeResult.violation(f"the candidate includes {header} twice (line {line + 1})", line), []
        parent = node.parent
        if parent is None or parent.type != "translation_unit":
            return ScopeResult.violation(
                f"the candidate adds {text!r} inside {parent.type if parent else 'a block'} (line {line + 1}): an "
                "allow-listed header may be added only at file scope, at the top among or right after the file's "
                "#includes",
                line,
            ), []
        before = [c for c in parent.named_children if c.start_byte < node.start_byte]
        code = next((c for c in before if c.type not in _HEADER_ZONE), None)
        if code is not None:
            return ScopeResult.violation(
                f"the candidate adds {text!r} at line {line + 1}, after code (line {code.start_point[0] + 1}): an "
                "allow-listed header may be added only at the top of the file, among or right after its #includes",
                line,
            ), []
        cut.append((node.start_byte, node.end_byte))
    return None, cut


def _directive_violation(bregions: list[Region], cregions: list[Region]) -> ScopeResult | None:
    """New directives (or changed text) in the candidate's editable functions; unbalanced conditionals."""
    have: dict[str, Counter[str]] = {}
    for r in bregions:
        have.setdefault(r.label, Counter()).update(d.text for d in r.directives)
    balanced_base = {r.label for r in bregions if not lexical.conditionals_balance(r.directives)}
    for r in cregions:
        pool = have.setdefault(r.label, Counter())
        for d in r.directives:
            if pool[d.text] > 0:
                pool[d.text] -= 1
                continue
            what = (
                "new in this function"
                if r.label.startswith("kernel:")
                else "new among the __device__ helpers"
            )
            return ScopeResult.violation(
                f"preprocessor directive {d.text[:80]!r} inside an editable region ({r.label}) is {what}: only "
                "#pragma unroll / diagnostics pragmas may be added; a directive the baseline has there may be kept, "
                "moved within it or deleted, not added or changed",
                d.line,
            )
    for r in cregions:
        if not lexical.conditionals_balance(r.directives) and r.label not in balanced_base:
            line = r.directives[-1].line if r.directives else None
            return ScopeResult.violation(
                f"the preprocessor conditionals in {r.label} ({r.name}) do not balance: an #if/#ifdef must end with "
                "its #endif inside the same function, or it would decide which host code compiles",
                line,
            )
    return None


def _pragma_operator_violation(
    model: SourceModel, regions: list[Region], lex: Lex, base_ops: Counter[str]
) -> ScopeResult | None:
    """``_Pragma("...")`` in an editable function: like ``#pragma``, only code-generation pragmas are new-able."""
    for r in regions:
        for text, off in lexical.pragma_operators(lex.data, r.start, r.end, lex.comments):
            if lexical.codegen_pragma(text) or base_ops[text] > 0:
                continue
            line = lex.data[:off].count(b"\n")
            return ScopeResult.violation(
                f"_Pragma({text[:60]!r}) inside an editable region ({r.label}): only unroll / diagnostics pragmas may "
                "be added (push_macro, pop_macro, redefine_extname and the like change what later code sees)",
                line,
            )
    return None


def _editable_nodes(
    model: SourceModel,
    targets: set[str],
    pick: Callable[[Node, bytes], str | None],
) -> list[tuple[str, str, int]]:
    """``(text, region label, line)`` of each syntax node inside an editable region that ``pick`` names (returns
    its text for); a picked node's children are not searched further."""
    found: list[tuple[str, str, int]] = []
    if model.tree is None:
        return found
    spans = editable_spans(model, targets)
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
        storage = [
            c
            for c in kids
            if c.type == "storage_class_specifier"
            and data[c.start_byte : c.end_byte] in (b"static", b"extern")
        ]
        if not storage or any(data[c.start_byte : c.end_byte] == b"__shared__" for c in kids):
            return None
        return " ".join(data[node.start_byte : node.end_byte].decode("utf-8", errors="replace").split())[:80]

    return _editable_nodes(model, targets, persistent)


def check_scope(
    baseline: str,
    candidate: str,
    targets: list[str] | set[str],
    path: str = "<candidate>",
    entry: str | None = None,
) -> ScopeResult:
    """Is ``candidate`` a permitted edit of ``baseline`` for the ``targets`` kernels?

    ``entry`` names the spec'd entry when it is not itself a target (a host launcher): its spec's
    structured fields (flags, tunables order) may change too.
    """
    tset = set(targets)
    bm = parse_source(baseline, path)
    cm = parse_source(candidate, path)
    if cm.syntax_errors and not bm.syntax_errors:
        e = cm.syntax_errors[0]
        return ScopeResult.violation(
            f"the candidate does not parse (syntax error at line {e.start_line + 1})", e.start_line
        )
    for name in tset:
        bad = _target_violation(bm, cm, name)
        if bad is not None:
            return bad
    blex, clex = Lex.of(bm), Lex.of(cm)
    bad, cut = _added_includes(bm, cm, tset, entry)
    if bad is not None:
        return bad
    bregions, cregions = regions_of(bm, tset, blex), regions_of(cm, tset, clex)
    bad = _directive_violation(bregions, cregions)
    if bad is not None:
        return bad
    base_ops = Counter(
        t for r in bregions for t, _ in lexical.pragma_operators(blex.data, r.start, r.end, blex.comments)
    )
    bad = _pragma_operator_violation(cm, cregions, clex, base_ops)
    if bad is not None:
        return bad
    # Kernels outside the targets and host code must be the same token for token: compare skeletons.
    bs, _ = skeleton(bm, tset, blex, entry)
    cs, clines = skeleton(cm, tset, clex, entry, cut)
    if bs != cs:
        line = first_difference(bs, cs, clines)
        return ScopeResult.violation(
            "the candidate changes code outside the targeted kernels and their __device__ helpers "
            "(host code, includes, macros, other kernels or another spec; first difference at line "
            f"{line + 1 if line is not None else '?'})",
            line,
        )
    # Directives that change what later code sees stay where they are, in order, as written.
    bfrozen = [r for r in bregions if r.frozen]
    cfrozen = [r for r in cregions if r.frozen]
    bs, _ = skeleton(bm, tset, blex, entry, frozen=bfrozen)
    cs, clines = skeleton(cm, tset, clex, entry, cut, frozen=cfrozen)
    if bs != cs:
        line = first_difference(bs, cs, clines)
        labels = sorted({r.label for r in bfrozen + cfrozen})
        return ScopeResult.violation(
            f"the candidate moves, reorders or deletes preprocessor directives in {', '.join(labels)} that the baseline "
            "has there: a function holding #define/#undef/#include (or a conditional that does not close inside it) "
            "changes what the code after it sees, so its directives stay as written, in order",
            line,
        )
    bad = _persistent_local_violation(bm, cm, tset)
    if bad is not None:
        return bad
    bad = launch_config_violation(bm, cm, tset, entry)
    if bad is not None:
        return bad
    # Host-side functions must not have become device functions or vice versa (covered by the skeleton),
    # and a target kernel may not be turned into a host launcher (covered by kind). Now the specs.
    bad = _spec_violation(bm, cm, tset, entry)
    if bad is not None:
        return bad
    return ScopeResult(True)


#: Tokens of a launch configuration expression: identifiers, integer literals, operators and the rest.
_CONFIG_TOKEN = re.compile(r"\s*(?:([A-Za-z_]\w*)|(\d+[uUlL]*)|(<=|>=|==|!=|&&|\|\||[-+*/%(),?:<>!])|(\S))")
#: Assignments and increments anywhere in a launch configuration expression.
_CONFIG_ASSIGN = re.compile(r"\+\+|--|<<=|>>=|[-+*/%&|^]=|(?<![=!<>])=(?!=)")


def launch_config_violation(
    bm: SourceModel, cm: SourceModel, targets: set[str], entry: str | None
) -> ScopeResult | None:
    """A changed grid or block expression of a host launcher's launch that could do more than compute a size.

    Allowed: the launcher's own identifiers (its parameters and locals, as the baseline has them, read
    only), integer literals, arithmetic, comparisons, ``?:`` and ``dim3(...)``. Refused: any other call,
    assignment, increment, member access, subscript, literal string or character, lambda or cast.
    """
    if entry is None or entry in targets:
        return None
    for caller in bm.launchers(entry):
        bad = _launcher_config_violation(bm, cm, targets, caller)
        if bad is not None:
            return bad
    return None


def _launcher_config_violation(
    bm: SourceModel, cm: SourceModel, targets: set[str], entry: str
) -> ScopeResult | None:
    """:func:`launch_config_violation` for the launches in one host function ``entry``."""
    launcher = bm.function(entry)
    if launcher is None or not launcher.has_body:
        return None
    body = bm.text.encode("utf-8", errors="replace")[launcher.span.start_byte : launcher.span.end_byte]
    known = set(re.findall(r"[A-Za-z_]\w*", body.decode("utf-8", errors="replace")))
    base = [ls.config[:2] for ls in bm.launch_sites if ls.caller == entry and ls.kernel in targets]
    cand = [ls for ls in cm.launch_sites if ls.caller == entry and ls.kernel in targets]
    for i, ls in enumerate(cand):
        if i < len(base) and ls.config[:2] == base[i]:
            continue
        line = ls.span.start_line
        for text in ls.config[:2]:
            assign = _CONFIG_ASSIGN.search(text)
            if assign is not None:
                return ScopeResult.violation(
                    f"the candidate's launch of {ls.kernel} in {entry} assigns in its grid or block "
                    f"({text.strip()}: '{assign.group(0)}'): a launch configuration only computes a size",
                    line,
                )
            pos, tokens = 0, []
            while pos < len(text.rstrip()):
                m = _CONFIG_TOKEN.match(text, pos)
                if m is None:
                    break
                tokens.append(m)
                pos = m.end()
            for k, m in enumerate(tokens):
                ident, bad = m.group(1), m.group(4)
                nxt = tokens[k + 1].group(3) if k + 1 < len(tokens) else None
                if bad is not None or (
                    ident is not None and ident != "dim3" and (ident not in known or nxt == "(")
                ):
                    what = bad or ident
                    return ScopeResult.violation(
                        f"the candidate's launch of {ls.kernel} in {entry} has '{what}' in its grid or block "
                        f"({text.strip()}): a launch configuration may use {entry}'s own names, numbers, "
                        "arithmetic and dim3(...) only",
                        line,
                    )
    return None


def _target_violation(bm: SourceModel, cm: SourceModel, name: str) -> ScopeResult | None:
    """A targeted function the candidate removed, or whose kind, signature or template parameters changed."""
    bf, cf = bm.function(name), cm.function(name)
    if bf is None:
        return ScopeResult.violation(f"{name} is not defined in the baseline")
    if cf is None or not cf.has_body:
        return ScopeResult.violation(f"the candidate removed or renamed {name}")
    if bf.kind != cf.kind:
        return ScopeResult.violation(
            f"the candidate changed {name} from {bf.kind} to {cf.kind}", cf.span.start_line
        )
    if _normalise_signature(bf) != _normalise_signature(cf):
        return ScopeResult.violation(
            f"the candidate changed the signature of {name} (names, types or order of parameters); only const, "
            "__restrict__ and __launch_bounds__ may change",
            cf.span.start_line,
        )
    if (bf.template_params or "") != (cf.template_params or ""):
        return ScopeResult.violation(
            f"the candidate changed the template parameters of {name}", cf.span.start_line
        )
    return None


def _persistent_local_violation(bm: SourceModel, cm: SourceModel, tset: set[str]) -> ScopeResult | None:
    """A function-scope static/extern variable the candidate added to an editable region."""
    known = {d for d, _, _ in _persistent_locals(bm, tset)}
    for decl, label, line in _persistent_locals(cm, tset):
        if decl in known:
            continue
        return ScopeResult.violation(
            f"function-scope static/extern variable in an editable region ({label}): {decl!r}; it lives in global "
            "memory and persists across launches (a cache or first-launch flag). Use registers, __shared__ "
            "or a non-static constexpr",
            line,
        )
    return None


def _spec_violation(
    bm: SourceModel, cm: SourceModel, tset: set[str], entry: str | None
) -> ScopeResult | None:
    """A launch spec the candidate added or removed, or a change of a spec beyond its structured fields."""
    bcount = Counter(b.entry for b in specmod.specs_from_source(bm)[0])
    ccount = Counter(b.entry for b in specmod.specs_from_source(cm)[0])
    for name in sorted(ccount):
        if ccount[name] > bcount[name]:
            # A second spec (e.g. in a comment inside a helper) would give the build other flags than the gate saw.
            return ScopeResult.violation(
                f"the candidate adds a launch spec for {name}; edit the existing spec instead"
            )
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
    return None


def check_spec_change(base: specmod.KernelSpec, cand: specmod.KernelSpec) -> ScopeResult:
    """Only ``launch``, the order of ``tunables`` values and allow-listed ``flags`` may change."""
    b = base.model_dump()
    c = cand.model_dump()
    for key in b:
        if key in ("launch", "tunables", "flags"):
            continue
        if b[key] != c.get(key):
            return ScopeResult.violation(
                f"the candidate changed spec field '{key}'; only launch, tunables order and "
                "allow-listed flags may change"
            )
    if set(b["tunables"]) != set(c["tunables"]) or any(
        sorted(map(str, b["tunables"][k])) != sorted(map(str, c["tunables"][k])) for k in b["tunables"]
    ):
        return ScopeResult.violation(
            "the candidate changed the tunables' names or values (only their order, "
            "which picks the default, may change)"
        )
    for f in set(cand.flags) - set(base.flags):
        if not ALLOWED_FLAGS.match(f):
            return ScopeResult.violation(
                f"nvcc flag {f!r} is not allowed in a rewrite (allowed: -Xptxas=-O3, "
                "--extra-device-vectorization, -maxrregcount=N)"
            )
    # Removing a flag the file builds with (-DNAME, -std=..., --use_fast_math) changes macros or semantics
    # of host code and other kernels just as editing them would: only allow-listed flags may go.
    for f in sorted(set(base.flags) - set(cand.flags)):
        if not ALLOWED_FLAGS.match(f):
            return ScopeResult.violation(
                f"the candidate removed nvcc flag {f!r}; only allow-listed flags "
                "(-Xptxas=-O3, --extra-device-vectorization, -maxrregcount=N) may be "
                "added or removed"
            )
    if cand.launch is None and base.launch is not None:
        return ScopeResult.violation("the candidate removed the launch configuration")
    return ScopeResult(True)


def edit_targets(model: SourceModel, entry: str) -> list[str]:
    """The kernels a rewrite of ``entry`` may change: the entry itself, or the kernels a host launcher launches."""
    fn = model.function(entry)
    if fn is None or fn.kind == "global":
        return [entry]
    # The entry's own launches, and those of the host functions it calls (a `solve` that calls the
    # project's `launch_gemm(...)`).
    callers = set(model.launchers(entry))
    launched = sorted({s.kernel for s in model.launch_sites if s.caller in callers})
    return [k for k in launched if (f := model.function(k)) is not None and f.kind == "global"]
