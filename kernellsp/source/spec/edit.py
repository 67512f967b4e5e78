"""Writing specs: TOML round trip, comment blocks, drafts from a signature, in-place patches of a block."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kernellsp.source import exprs
from kernellsp.source.model import CommentBlock, Function, SourceModel
from kernellsp.source.spec.check import dtype_for_ctype
from kernellsp.source.spec.models import ArgSpec, KernelSpec, LaunchSpec

if TYPE_CHECKING:
    from kernellsp.source.draft import Draft

# --------------------------------------------------------------------------------------------------
# Writing (round trip)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        r = repr(v)
        return r if ("." in r or "e" in r or "inf" in r or "nan" in r) else r + ".0"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return (
            "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }" if v else "{}"
        )
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_value(k)


def spec_to_toml(spec: KernelSpec, include_entry: bool = False) -> str:
    """Write a spec as TOML in the canonical layout; ``parse_spec_text`` reads it back unchanged."""
    d = spec.model_dump(exclude_none=True, exclude_defaults=True)
    lines: list[str] = []
    if include_entry and spec.entry:
        lines.append(f"entry = {_toml_value(spec.entry)}")
    for key in ("reference", "seeds", "sizes", "launch", "tolerance", "shapes", "tunables", "flags"):
        if key in d and d[key] not in ({}, [], None):
            lines.append(f"{key} = {_toml_value(d[key])}")
    if spec.args:
        lines.append("[args]")
        for name, arg in spec.args.items():
            ad = arg.model_dump(exclude_none=True)
            lines.append(f"{_toml_key(name)} = {_toml_value(ad)}")
    return "\n".join(lines) + "\n"


def format_comment_block(spec: KernelSpec, indent: str = "", notes: Iterable[str] = ()) -> str:
    """A ``/* kernellsp ... */`` block holding ``spec``, ready to insert above its entry; each of ``notes`` (what a
    draft could not infer) becomes a ``# CHECK:`` comment line on top."""
    body = "".join(f"# CHECK: {n}\n" for n in notes) + spec_to_toml(spec)
    return (
        indent
        + "/* kernellsp\n"
        + "".join(indent + ln + "\n" for ln in body.rstrip("\n").split("\n"))
        + indent
        + "*/\n"
    )


def draft_block(fn: Function, model: SourceModel) -> tuple[int, str]:
    """Where a draft spec for ``fn`` goes (the 0-based line of the definition, its ``template`` line when it
    has one) and the ``/* kernellsp ... */`` block to insert there, indented like the definition: what the
    editor's "Add launch spec" and ``kernellsp spec draft`` both write."""
    start = (fn.outer_span or fn.span).start_line
    line_text = model.lines[start] if start < len(model.lines) else ""
    indent = line_text[: len(line_text) - len(line_text.lstrip())]
    draft, notes = draft_with_notes(fn, model)
    return start, format_comment_block(draft, indent, notes)


def insert_draft_blocks(text: str, blocks: Iterable[tuple[int, str]]) -> str:
    """``text`` with each ``(line, block)`` inserted before that 0-based line (the file's line endings kept)."""
    eol = "\r\n" if "\r\n" in text.split("\n", 1)[0] + "\n" else "\n"
    lines = text.splitlines(keepends=True)
    for line, block in sorted(blocks, reverse=True):  # bottom up: earlier line numbers stay valid
        lines.insert(min(line, len(lines)), block.replace("\n", eol) if eol != "\n" else block)
    return "".join(lines)


def draft_spec(fn: Function, model: SourceModel) -> KernelSpec:
    """A runnable first draft for ``fn``: :func:`draft_with_notes` without the notes."""
    return draft_with_notes(fn, model)[0]


def draft_with_notes(fn: Function, model: SourceModel) -> tuple[KernelSpec, list[str]]:
    """A first draft for ``fn`` from its signature, its launch sites and its indexing, and what it could not infer.

    Scalars named like sizes (``n``, ``N``, ``rows``) become sizes; every pointer gets a dtype from its C type,
    a direction from how the kernel uses it (``const`` or only read: ``in``; only written: ``out``; else
    ``inout``) and a count from the largest index it is used at (:mod:`kernellsp.source.draft`). The launch
    comes from the first launch site when its expressions only use the kernel's own scalar parameters,
    otherwise from the kernel's indexing (a 2-D grid for a kernel indexed by ``.y``). Size values keep each
    buffer a few MiB. The notes name what could not be inferred (the block shows them as ``# CHECK:``).
    """
    from kernellsp.source import draft as drafting

    scalars = [p for p in fn.params if not p.is_pointer]
    size_names = []
    for p in scalars:
        if dtype_for_ctype(p.base_type) and dtype_for_ctype(p.base_type)[0].startswith(("i", "u")):  # type: ignore[index]
            size_names.append(p.name)
    upper: dict[str, str] = {}
    for n in size_names:
        upper[n] = n.upper() if n.upper() not in upper.values() else n
    inferred = drafting.infer(fn, model, upper)
    notes = list(inferred.notes)
    sizes, multi = _draft_sizes(size_names, upper, inferred, notes)
    first = next(iter(sizes), None)
    if first is None:
        sizes["N"] = 1 << 20
        first = "N"
        if any(p.is_pointer for p in fn.params):
            notes.append(
                "sizes: the kernel has no integer size parameter; N is a guess for the element counts"
            )
    args = _draft_args(fn, upper, inferred, first, notes)
    launch = _draft_launch(fn, model, inferred, upper, first) if fn.kind == "global" else None
    # A correctness shape of sizes that divide no block: 1000 for a 1-D extent, odd sides for a matrix.
    if len(sizes) == 1 or not multi:
        shapes = [{first: 1000}]
    else:
        shapes = [{k: (100, 77, 33, 129, 5)[i % 5] for i, k in enumerate(sizes)}]
    return KernelSpec(entry=fn.name, sizes=sizes, launch=launch, args=args, shapes=shapes), notes


def _draft_sizes(
    size_names: list[str], upper: dict[str, str], inferred: Draft, notes: list[str]
) -> tuple[dict[str, int | str], set[str]]:
    """The sizes' values, and the sizes that meet another size in one count (matrix sides)."""
    sizes: dict[str, int | str] = {}
    # Size values that keep each buffer a few MiB: a matrix side (it meets another size in one count, or spans a
    # 2-D grid) 2048, a 1-D extent 1 << 20; a size that only bounds a loop or a small buffer (a filter radius) 64.
    names_in = lambda text: set(re.findall(r"[A-Za-z_]\w*", text))  # noqa: E731
    multi = {
        n for c in inferred.counts.values() for n in names_in(c) if len(names_in(c) & set(upper.values())) > 1
    }
    extents = {n for g in inferred.grid or [] for n in names_in(g)} - {"ceil_div"}
    for n in size_names:
        u = upper[n]
        if u in multi or (u in extents and len(inferred.grid or []) > 1):
            sizes[u] = 2048
        elif u in extents or inferred.grid is None:
            sizes[u] = 1 << 20
        else:
            sizes[u] = 64
            notes.append(
                f"sizes.{u}: 64 is a guess ({n} bounds no buffer and no grid axis kernellsp could read)"
            )
    return sizes, multi


def _draft_args(
    fn: Function, upper: dict[str, str], inferred: Draft, first: str, notes: list[str]
) -> dict[str, ArgSpec]:
    """Every parameter: a pointer as a buffer, a size parameter as its size, any other scalar as 1."""
    args: dict[str, ArgSpec] = {}
    for p in fn.params:
        if p.is_pointer:
            accepted = dtype_for_ctype(p.base_type) or ("f32",)
            if dtype_for_ctype(p.base_type) is None:
                notes.append(
                    f"args.{p.name}.dtype: {p.base_type} is not a type kernellsp knows; f32 is a guess"
                )
            direction = "in" if p.is_const else inferred.dirs.get(p.name, "inout")
            args[p.name] = ArgSpec(dtype=accepted[0], dir=direction, count=inferred.counts.get(p.name, first))  # type: ignore[arg-type]
        elif p.name in upper:
            args[p.name] = ArgSpec(value=upper[p.name])
        else:
            accepted = dtype_for_ctype(p.base_type) or ("f32",)
            args[p.name] = ArgSpec(value=1.0 if accepted[0].startswith(("f", "bf")) else 1)
    return args


def _draft_launch(
    fn: Function, model: SourceModel, inferred: Draft, upper: dict[str, str], first: str
) -> LaunchSpec:
    """The first launch site's configuration when it reads only the kernel's size parameters, else the indexing's."""
    if inferred.grid is not None and inferred.block is not None:
        one = len(inferred.grid) == 1
        launch = LaunchSpec(
            grid=inferred.grid[0] if one else list(inferred.grid),
            block=inferred.block[0] if one else list(inferred.block),
        )
    else:
        launch = LaunchSpec(grid=f"ceil_div({first}, 256)", block=256)
    for site in model.launches_of(fn.name):
        if len(site.config) >= 2 and _only_literals(site.config[:2], set(upper.values()) | set(upper)):
            g, b = (_upper_names(c, upper) for c in site.config[:2])
            launch = LaunchSpec(grid=g, block=b)
            break
    return launch


def _only_literals(exprs_text: Iterable[str], allowed: set[str]) -> bool:
    for e in exprs_text:
        try:
            names = exprs.parse(e).names
        except exprs.ExprError:
            return False
        if names - allowed:
            return False
    return True


def _upper_names(e: str, upper: dict[str, str]) -> str:
    return re.sub(r"\b([A-Za-z_]\w*)\b", lambda m: upper.get(m.group(1), m.group(1)), e)


def patch_spec_block(text: str, block: CommentBlock, updates: dict[str, Any]) -> str:
    """Rewrite top-level keys of a spec comment block in place; every other byte stays as written.

    ``updates`` maps a top-level key (``launch``, ``tunables``, ``flags``) to its new value (``None``
    deletes the key). A key on one line is replaced on that line; a missing key is inserted above
    the ``[args]`` table (or at the end of the block) with the block's own line prefix. Rewrites of
    the launch configuration therefore change one line, not the whole spec.
    """
    lines = text.split("\n")
    body = block.body.split("\n")
    prefix = ""
    for i, b in enumerate(body):
        if b.strip() and i < len(block.body_lines):
            src = lines[block.body_lines[i]]
            prefix = (
                src[: len(src) - len(src.lstrip())] if block.style == "block" else src[: src.find("//") + 3]
            )
            m = re.match(r"^(\s*\*\s?)", src)
            if block.style == "block" and m:
                prefix = m.group(1)
            break
    inserts: list[str] = []
    deletes: set[int] = set()
    for key, value in updates.items():
        pat = re.compile(rf"^(\s*){re.escape(key)}\s*=")
        idx = next((i for i, b in enumerate(body) if pat.match(b)), None)
        if idx is not None and idx < len(block.body_lines):
            ln = block.body_lines[idx]
            src = lines[ln]
            m = re.search(rf"\b{re.escape(key)}\s*=", src)
            if m is None:
                continue
            tail = ""
            close = src.find("*/", m.end())
            if close >= 0:
                tail = " " + src[close:]
            if value is None:
                deletes.add(ln)
            else:
                lines[ln] = src[: m.start()] + f"{_toml_key(key)} = {_toml_value(value)}" + tail
        elif value is not None:
            inserts.append(f"{prefix}{_toml_key(key)} = {_toml_value(value)}")
    if inserts:
        args_idx = next((i for i, b in enumerate(body) if re.match(r"^\s*\[args", b)), None)
        if args_idx is not None and args_idx < len(block.body_lines):
            at = block.body_lines[args_idx]
        else:
            at = block.span.end_line if block.style == "block" else block.span.end_line + 1
        lines[at:at] = inserts
        deletes = {d + len(inserts) if d >= at else d for d in deletes}
    return "\n".join(ln for i, ln in enumerate(lines) if i not in deletes)
