"""Mechanical spelling variants of the recipe corpus: each must bind what the original binds.

Run from the repository root::

    python tests/recipes/spelling_variants.py [--compile] [--only TEXT ...]

For every file of ``tests/recipes/corpus/`` it writes the kernel in other spellings a user might
choose — the same computation, only written differently — and runs ``optimize --explain`` on each
(in this process). A variant passes when the same recipes bind to the same kernels with the same
bindings as on the original file (a declined original must stay declined). The canonicalisation
passes exist to make this true; a failure names the variant and the difference.

The variants (each applied alone, to every ``__global__`` and ``__device__`` function of the file):

``braces``        every brace-less ``if``/``else``/``for``/``while`` body gets braces;
``while-for``     an innermost counted ``for`` without ``continue`` becomes ``init; while (c) {…; step;}``;
``macro-index``   ``blockIdx.x * blockDim.x + threadIdx.x`` is spelled through ``#define GID_X ((int)(…))``;
``commute``       the operands of every side-effect-free ``+`` and ``*`` are swapped (association kept);
``index-temp``    each store ``p[e] = v;`` whose index is not a name first binds ``const auto o = e;``;
``helper``        a kernel's body moves into a ``__device__`` function the kernel calls;
``cg-sync``       ``__syncthreads()`` is spelled ``cg::this_thread_block().sync()``.

A variant identical to the original (nothing to rewrite) is skipped. ``--compile`` also compiles
every variant with nvcc (slow: one nvcc per variant), which shows the generator writes valid CUDA.
"""

from __future__ import annotations

import argparse
import functools
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import tree_sitter

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "recipes" / "corpus"

Variant = Callable[[str], str]


def _tree(text: str) -> tuple[tree_sitter.Tree, bytes]:
    from kernellsp.source.model import parse_source

    model = parse_source(text, "variant.cu")
    assert model.tree is not None
    return model.tree, text.encode("utf-8")


def _device_functions(text: str) -> list[tuple[tree_sitter.Node, bytes, str]]:
    """The definitions of ``__global__`` and ``__device__`` functions: (node, file bytes, kind)."""
    from kernellsp.source.model import parse_source

    model = parse_source(text, "variant.cu")
    tree, data = _tree(text)
    out: list[tuple[tree_sitter.Node, bytes, str]] = []
    for fn in model.functions:
        if fn.has_body and fn.kind in ("global", "device"):
            node = tree.root_node.descendant_for_byte_range(fn.span.start_byte, fn.span.end_byte)
            while node is not None and node.type != "function_definition":
                node = node.parent
            if node is not None:
                out.append((node, data, fn.kind))
    return out


def _walk(n: tree_sitter.Node) -> list[tree_sitter.Node]:
    out, stack = [], [n]
    while stack:
        c = stack.pop()
        out.append(c)
        stack.extend(reversed(c.children))
    return out


def _apply(data: bytes, edits: list[tuple[int, int, str]]) -> str:
    """Apply non-overlapping byte edits (outermost wins where two overlap)."""
    kept: list[tuple[int, int, str]] = []
    for s, e, t in sorted(edits, key=lambda x: (x[0], -x[1])):
        if kept and s < kept[-1][1]:
            continue
        kept.append((s, e, t))
    out = data
    for s, e, t in reversed(kept):
        out = out[:s] + t.encode("utf-8") + out[e:]
    return out.decode("utf-8")


def _txt(data: bytes, n: tree_sitter.Node) -> str:
    return data[n.start_byte : n.end_byte].decode("utf-8")


def braces(text: str) -> str:
    # Nested brace-less bodies (`for (...) if (c) x;`) get theirs in the next round.
    for _round in range(8):
        new = _braces_once(text)
        if new == text:
            break
        text = new
    return text


def _braces_once(text: str) -> str:
    edits = []
    for fn, data, _ in _device_functions(text):
        for n in _walk(fn):
            if n.type in ("if_statement", "for_statement", "while_statement", "else_clause"):
                for c in n.children:
                    if c.type.endswith("statement") and c.type not in ("compound_statement", "if_statement"):
                        edits.append((c.start_byte, c.end_byte, "{ " + _txt(data, c) + " }"))
    return _apply(data, edits) if edits else text


def while_for(text: str) -> str:
    edits = []
    for fn, data, _ in _device_functions(text):
        for n in _walk(fn):
            if n.type != "for_statement":
                continue
            body = n.child_by_field_name("body")
            init = n.child_by_field_name("initializer")
            cond = n.child_by_field_name("condition")
            step = n.child_by_field_name("update")
            if body is None or cond is None or step is None or init is None:
                continue
            inner = _walk(body)
            if any(
                c.type in ("for_statement", "while_statement", "do_statement", "continue_statement")
                for c in inner
            ):
                continue
            prev = n.prev_sibling
            if prev is not None and prev.type in ("comment", "preproc_call") and "pragma" in _txt(data, prev):
                continue  # keep `#pragma unroll` attached to a for loop
            init_text = _txt(data, init).rstrip(";") + ";"
            body_text = _txt(data, body)
            if body.type == "compound_statement":
                body_text = body_text[1:-1]
            edits.append(
                (
                    n.start_byte,
                    n.end_byte,
                    f"{{ {init_text} while ({_txt(data, cond)}) {{ {body_text} {_txt(data, step)}; }} }}",
                )
            )
    return _apply(data, edits) if edits else text


_GID = re.compile(r"\bblockIdx\.x\s*\*\s*blockDim\.x\s*\+\s*threadIdx\.x\b")


def macro_index(text: str) -> str:
    edits = []
    for fn, data, _ in _device_functions(text):
        body = fn.child_by_field_name("body")
        assert body is not None
        for m in _GID.finditer(_txt(data, body)):
            s = body.start_byte + len(_txt(data, body)[: m.start()].encode("utf-8"))
            edits.append((s, s + len(m.group(0).encode("utf-8")), "GID_X"))
    if not edits:
        return text
    out = _apply(text.encode("utf-8"), edits)
    return "#define GID_X ((int)(blockIdx.x * blockDim.x + threadIdx.x))\n" + out


def _pure(data: bytes, n: tree_sitter.Node) -> bool:
    for c in _walk(n):
        if c.type in ("assignment_expression", "update_expression", "call_expression", "comma_expression"):
            return False
    return True


def commute(text: str) -> str:
    def render(data: bytes, n: tree_sitter.Node) -> str:
        op = n.child_by_field_name("operator")
        if (
            n.type == "binary_expression"
            and op is not None
            and _txt(data, op) in ("+", "*")
            and _pure(data, n)
        ):
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            assert left is not None and right is not None
            lt = render(data, left)
            if left.type == "binary_expression":
                lt = f"({lt})"  # `a + b + c` -> `c + (a + b)`: the association stays
            return f"{render(data, right)} {_txt(data, op)} {lt}"
        if not n.children:
            return _txt(data, n)
        out, at = "", n.start_byte
        for c in n.children:
            out += data[at : c.start_byte].decode("utf-8") + render(data, c)
            at = c.end_byte
        return out + data[at : n.end_byte].decode("utf-8")

    edits = []
    for fn, data, _ in _device_functions(text):
        body = fn.child_by_field_name("body")
        assert body is not None
        new = render(data, body)
        if new != _txt(data, body):
            edits.append((body.start_byte, body.end_byte, new))
    return _apply(text.encode("utf-8"), edits) if edits else text


def index_temp(text: str) -> str:
    edits = []
    k = 0
    for fn, data, _ in _device_functions(text):
        for n in _walk(fn):
            if n.type != "expression_statement" or n.parent is None or n.parent.type != "compound_statement":
                continue
            a = n.named_children[0] if n.named_children else None
            if a is None or a.type != "assignment_expression":
                continue
            lhs = a.child_by_field_name("left")
            if lhs is None or lhs.type != "subscript_expression":
                continue
            idx = lhs.child_by_field_name("index") or lhs.named_children[-1]
            if idx.type == "subscript_argument_list" and idx.named_children:
                idx = idx.named_children[0]
            if idx.type in ("identifier", "number_literal") or not _pure(data, idx):
                continue
            arr = lhs.child_by_field_name("argument")
            assert arr is not None
            name = f"o_{k}"
            k += 1
            indent = re.match(r"[ \t]*", data[data.rfind(b"\n", 0, n.start_byte) + 1 :].decode("utf-8"))
            pad = indent.group(0) if indent else ""
            edits.append(
                (
                    n.start_byte,
                    n.end_byte,
                    f"const auto {name} = {_txt(data, idx)};\n{pad}{_txt(data, arr)}[{name}]"
                    + data[lhs.end_byte : n.end_byte].decode("utf-8"),
                )
            )
    return _apply(text.encode("utf-8"), edits) if edits else text


def helper(text: str) -> str:
    edits = []
    for fn, data, kind in _device_functions(text):
        if kind != "global":
            continue
        decl = fn.child_by_field_name("declarator")
        body = fn.child_by_field_name("body")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        if decl is None or body is None:
            continue
        params = decl.child_by_field_name("parameters")
        name_node = decl.child_by_field_name("declarator")
        if params is None or name_node is None:
            continue
        names = []
        for p in params.named_children:
            ids = [c for c in _walk(p) if c.type == "identifier"]
            if not ids:
                break
            names.append(_txt(data, ids[-1]))
        else:
            kname = _txt(data, name_node)
            start = fn.start_byte
            if fn.parent is not None and fn.parent.type == "template_declaration":
                continue  # a template kernel: its helper would need the same template head
            helper_text = (
                f"__device__ __forceinline__ void {kname}_body{_txt(data, params)} {_txt(data, body)}\n\n"
            )
            edits.append((start, start, helper_text))
            edits.append((body.start_byte, body.end_byte, f"{{\n    {kname}_body({', '.join(names)});\n}}"))
    return _apply(text.encode("utf-8"), edits) if edits else text


def cg_sync(text: str) -> str:
    if "__syncthreads()" not in text:
        return text
    head = "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
    return head + re.sub(r"\b__syncthreads\(\)", "cg::this_thread_block().sync()", text)


VARIANTS: dict[str, Variant] = {
    "braces": braces,
    "while-for": while_for,
    "macro-index": macro_index,
    "commute": commute,
    "index-temp": index_temp,
    "helper": helper,
    "cg-sync": cg_sync,
}


_LINES = re.compile(r"\blines? \d+(?:-\d+)?")
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d*)?[fF]?|\S")


def _binding_value(value: str) -> str:
    """A binding value as compared across spellings: source line numbers left out (a variant may add
    lines above the kernel) and the tokens as a multiset (a description such as ``beta * C[i,j] +
    alpha * acc`` names the same terms in whichever order and grouping the kernel wrote them)."""
    return " ".join(sorted(t for t in _TOKEN.findall(_LINES.sub("lines", value)) if t not in "()"))


@functools.lru_cache(maxsize=256)
def bindings(text: str, entry: str) -> tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]:
    """(recipe, kernel, binding) of every recipe that binds, sorted (cached: each original is compared
    with several variants)."""
    from kernellsp.optimize.propose.recipes import explain
    from kernellsp.source.model import parse_source

    model = parse_source(text, "variant.cu")
    got = []
    for e in explain(model, entry):
        if e.matched:
            got.append(
                (
                    e.recipe,
                    e.kernel,
                    tuple(sorted((k, _binding_value(str(v))) for k, v in (e.binding or {}).items())),
                )
            )
    return tuple(sorted(got))


def corpus() -> dict[str, str]:
    """Corpus file name -> entry."""
    files = tomllib.loads((CORPUS / "manifest.toml").read_text())["files"]
    return {name: meta["entry"] for name, meta in files.items()}


def difference(text: str, new: str, entry: str) -> str | None:
    """``None`` when the variant ``new`` binds as the original ``text`` (or is it); else the difference."""
    if new == text:
        return None
    want, got = bindings(text, entry), bindings(new, entry)
    if want == got:
        return None
    lost = [w for w in want if w not in got]
    extra = [g for g in got if g not in want]
    return f"lost {lost} gained {extra}"


def compiles(text: str, nvcc: str) -> str | None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "v.cu"
        src.write_text(text)
        r = subprocess.run(
            [nvcc, "-arch=sm_90", "-std=c++17", "-c", str(src), "-o", str(Path(tmp) / "v.o")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        return None if r.returncode == 0 else r.stderr.strip().splitlines()[0][:200]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--compile", action="store_true", help="compile every variant with nvcc")
    ap.add_argument("--only", nargs="*", help="corpus files whose name contains one of these")
    ap.add_argument("--variant", nargs="*", choices=sorted(VARIANTS), help="only these variants")
    args = ap.parse_args()
    nvcc = shutil.which("nvcc") if args.compile else None
    if args.compile and nvcc is None:
        print("error: --compile needs nvcc on PATH", file=sys.stderr)
        return 2
    files = corpus()
    if args.only:
        files = {k: v for k, v in files.items() if any(o in k for o in args.only)}
    t0 = time.perf_counter()
    failures = checked = 0
    for name, entry in sorted(files.items()):
        text = (CORPUS / name).read_text()
        for variant, make in VARIANTS.items():
            if args.variant and variant not in args.variant:
                continue
            new = make(text)
            if new == text:
                continue
            checked += 1
            problem = difference(text, new, entry)
            if problem is None and nvcc is not None:
                err = compiles(new, nvcc)
                problem = f"does not compile: {err}" if err else None
            if problem is not None:
                failures += 1
                print(f"{name:44} {variant:12} {problem}")
    print(
        f"{checked} variants of {len(files)} files: {failures} bind differently; {time.perf_counter() - t0:.1f} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
