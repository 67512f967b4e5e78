"""Source model of a CUDA file, built with tree-sitter-cuda.

It lists kernels (``__global__``), ``__device__`` and host functions (templates included), launch
sites ``k<<<grid, block, smem, stream>>>(...)``, ``#define`` constants and the comment blocks that
hold launch specs, each with exact ranges. Ranges are 0-based lines and character columns, the
convention of LSP; the CLI adds one when it prints. Partial or broken code (an editor buffer in the
middle of an edit) yields whatever tree-sitter could recover and a list of syntax-error ranges; the
parser never raises on any input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import tree_sitter

FunctionKind = Literal["global", "device", "host", "host_device"]


@dataclass(frozen=True)
class Span:
    """A source range: 0-based lines, 0-based character columns, end exclusive; plus byte offsets."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int
    start_byte: int = 0
    end_byte: int = 0

    def contains_line(self, line: int) -> bool:
        return self.start_line <= line <= self.end_line

    def contains(self, other: Span) -> bool:
        return self.start_byte <= other.start_byte and other.end_byte <= self.end_byte


@dataclass
class Param:
    """One parameter of a function signature."""

    name: str
    type_text: str
    base_type: str
    is_pointer: bool
    is_const: bool
    is_restrict: bool
    span: Span


@dataclass
class Function:
    """A function definition (or a declaration when ``has_body`` is false)."""

    name: str
    kind: FunctionKind
    params: list[Param]
    span: Span
    name_span: Span
    body_span: Span | None
    signature_text: str
    template_params: str | None = None
    launch_bounds: str | None = None
    extern_c: bool = False
    #: Where a definition really starts (the ``template`` line when there is one): specs sit above it.
    outer_span: Span | None = None

    @property
    def is_kernel(self) -> bool:
        return self.kind == "global"

    @property
    def has_body(self) -> bool:
        return self.body_span is not None


@dataclass
class LaunchSite:
    """A ``kernel<<<...>>>(...)`` expression."""

    kernel: str
    template_args: str | None
    config: list[str]
    config_spans: list[Span]
    args: list[str]
    span: Span
    caller: str | None


@dataclass
class CommentBlock:
    """A comment block whose first word is ``kernellsp``: the text of a launch spec.

    ``body`` is the spec text with comment markers removed; ``body_lines[i]`` is the 0-based source
    line that body line ``i`` came from, so errors in the spec land on the right line.
    """

    body: str
    body_lines: list[int]
    span: Span
    #: ``toml``: a ``[kernels.NAME]`` table of kernellsp.toml/pyproject.toml (its lines are that file's).
    style: Literal["block", "line", "toml"]


@dataclass
class SourceModel:
    """Everything the rest of kernellsp needs to know about one file's text."""

    path: str
    text: str
    functions: list[Function] = field(default_factory=list)
    launch_sites: list[LaunchSite] = field(default_factory=list)
    spec_blocks: list[CommentBlock] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    #: Function-like macros: name -> (parameter names, replacement text); ``...`` stands for ``__VA_ARGS__``.
    macros: dict[str, tuple[list[str], str]] = field(default_factory=dict)
    syntax_errors: list[Span] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)
    has_main: bool = False
    tree: tree_sitter.Tree | None = None
    lines: list[str] = field(default_factory=list)

    def __getstate__(self) -> dict[str, object]:
        # Pickled to and from worker processes: the tree-sitter tree and the kernel IR cached beside it
        # (which holds tree nodes) cannot be pickled, and both are derived from ``text`` again on demand.
        state = self.__dict__.copy()
        state["tree"] = None
        state.pop("_kernel_ir_cache", None)
        return state

    @property
    def kernels(self) -> list[Function]:
        return [f for f in self.functions if f.is_kernel and f.has_body]

    def function(self, name: str) -> Function | None:
        for f in self.functions:
            if f.name == name and f.has_body:
                return f
        for f in self.functions:
            if f.name == name:
                return f
        return None

    def enclosing_function(self, line: int) -> Function | None:
        for f in self.functions:
            if f.has_body and f.span.contains_line(line):
                return f
        return None

    def launches_of(self, kernel: str) -> list[LaunchSite]:
        return [s for s in self.launch_sites if s.kernel == kernel]

    def host_calls(self, caller: str) -> list[tuple[str, list[str], int]]:
        """Calls from host function ``caller`` to other host functions of this file with a body:
        ``(callee, argument texts, byte offset of the call)``, in source order."""
        fn = self.function(caller)
        if fn is None or fn.body_span is None or self.tree is None:
            return []
        hosts = {f.name for f in self.functions if f.kind == "host" and f.has_body and f.name != caller}
        data = self.text.encode("utf-8", errors="replace")
        node = self.tree.root_node.descendant_for_byte_range(fn.body_span.start_byte, fn.body_span.end_byte)
        out: list[tuple[str, list[str], int]] = []
        stack = [node] if node is not None else []
        while stack:
            n = stack.pop()
            if n.type == "call_expression" and not any(c.type == "kernel_call_syntax" for c in n.children):
                f = n.child_by_field_name("function")
                if f is not None and f.type == "template_function":
                    f = f.child_by_field_name("name")
                name = (
                    data[f.start_byte : f.end_byte].decode("utf-8", errors="replace") if f is not None else ""
                )
                name = name.split("::")[-1]
                if name in hosts:
                    argl = n.child_by_field_name("arguments")
                    args = [
                        data[a.start_byte : a.end_byte].decode("utf-8", errors="replace")
                        for a in (argl.named_children if argl is not None else [])
                        if a.type != "comment"
                    ]
                    out.append((name, args, n.start_byte))
            stack.extend(reversed(n.children))
        return sorted(out, key=lambda c: c[2])

    def launchers(self, entry: str) -> list[str]:
        """``entry`` and the host functions of this file it calls, transitively: whoever may launch its kernels."""
        out = [entry]
        i = 0
        while i < len(out) and len(out) < 32:
            for callee, _args, _at in self.host_calls(out[i]):
                if callee not in out:
                    out.append(callee)
            i += 1
        return out


@lru_cache(maxsize=1)
def _parser() -> tree_sitter.Parser:
    import tree_sitter
    import tree_sitter_cuda

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_cuda.language()))


class _Text:
    """Byte-to-character conversion for one file (tree-sitter reports byte columns)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.line_starts = [0]
        for m in re.finditer(b"\n", data):
            self.line_starts.append(m.end())

    def col(self, row: int, byte_col: int) -> int:
        if row >= len(self.line_starts):
            return byte_col
        start = self.line_starts[row]
        return len(self.data[start : start + byte_col].decode("utf-8", errors="replace"))

    def span(self, node: tree_sitter.Node) -> Span:
        (sr, sc), (er, ec) = node.start_point, node.end_point
        return Span(sr, self.col(sr, sc), er, self.col(er, ec), node.start_byte, node.end_byte)

    def node_text(self, node: tree_sitter.Node | None) -> str:
        if node is None:
            return ""
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


# Comments and literals (skipped: what looks like a directive inside them is not one), then the two
# spellings masked for the parser: `#pragma ...` lines (continuations included) and `__align__(N)`.
_PARSER_MASK = re.compile(
    rb"(?P<skip>//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*')"
    rb"|(?P<pragma>(?m:^)[ \t]*#[ \t]*pragma\b(?:[^\n\\]|\\.|\\\n)*)"
    rb"|(?P<align>\b__align__\s*\(\s*\w+\s*\))",
    re.DOTALL,
)


def parser_view(data: bytes) -> bytes:
    """The bytes tree-sitter parses: ``data`` with the spellings its grammar refuses masked as comments.

    tree-sitter-cuda rejects a ``#pragma`` between a loop header and a brace-less body (``for (...)
    #pragma unroll for (...) ...``) and ``__align__(N)`` in a declaration, both honest CUDA. Each is
    replaced by a comment of *the same length*, so every node's byte range still addresses ``data``:
    whoever reads a node's text reads the original bytes. A pragma thus never shows up as a statement
    of a body (it is a comment node there), and the scope gate stays sound: its lexical scan of the
    original text does not confirm these "comments", so it compares them as written.
    """
    if b"pragma" not in data and b"__align__" not in data:
        return data

    def mask(m: re.Match[bytes]) -> bytes:
        raw = m.group(0)
        if m.lastgroup == "skip" or len(raw) < 4 or b"*/" in raw:
            return raw
        inner = bytes(b if b in (0x0A, 0x0D) else 0x20 for b in raw[2:-2])
        return b"/*" + inner + b"*/"

    return _PARSER_MASK.sub(mask, data)


# `// kernellsp: ignore[KL404]` is a suppression comment (kernellsp.rules.selection), not a spec.
_SPEC_HEAD = re.compile(r"^\s*kernellsp\b(?!\s*:\s*ignore)[:\s]*", re.IGNORECASE)


def parse_source(text: str, path: str = "<buffer>") -> SourceModel:
    """Build the model of ``text``. Never raises: garbage in gives an (almost) empty model."""
    model = SourceModel(path=path, text=text, lines=text.split("\n"))
    data = text.encode("utf-8", errors="replace")
    try:
        tree = _parser().parse(parser_view(data))
    except Exception:  # pragma: no cover - tree-sitter does not raise on bad input, but never trust it
        return model
    model.tree = tree
    t = _Text(data)
    _walk(tree.root_node, t, model, extern_c=False)
    _collect_errors(tree.root_node, t, model)
    _collect_comments(tree.root_node, t, model)
    model.has_main = any(f.name == "main" and f.kind == "host" and f.has_body for f in model.functions)
    return model


def parse_file(path: str | Path) -> SourceModel:
    """Read and parse a file (UTF-8 with replacement; binary garbage gives an empty-ish model)."""
    p = Path(path)
    return parse_source(p.read_text(encoding="utf-8", errors="replace"), str(p))


def _walk(node: tree_sitter.Node, t: _Text, model: SourceModel, extern_c: bool) -> None:
    stack: list[tuple[tree_sitter.Node, bool, str | None, tree_sitter.Node | None]] = [
        (c, extern_c, None, None) for c in reversed(node.children)
    ]
    while stack:
        n, ext, tmpl, tmpl_node = stack.pop()
        typ = n.type
        if typ == "function_definition":
            fn = _function(n, t, ext, tmpl, tmpl_node)
            if fn is not None:
                model.functions.append(fn)
                _launch_sites(n, t, model, fn.name)
            continue
        if (
            typ == "declaration"
            and all(d.type == "function_declarator" for d in n.children_by_field_name("declarator"))
            and any(c.type == "function_declarator" for c in n.children)
        ):
            # A prototype. `__device__ float f(float), cache[1024];` also declares a variable: it is
            # not a function's declaration (the scope gate judges it as the file-scope state it adds).
            fn = _function(n, t, ext, tmpl, tmpl_node)
            if fn is not None:
                model.functions.append(fn)
            continue
        if typ == "template_declaration":
            params = n.child_by_field_name("parameters")
            for c in reversed(n.children):
                stack.append((c, ext, t.node_text(params), n))
            continue
        if typ == "linkage_specification":
            value = n.child_by_field_name("value")
            is_c = t.node_text(value).strip('"') == "C"
            for c in reversed(n.children):
                stack.append((c, is_c or ext, tmpl, tmpl_node))
            continue
        if typ in ("preproc_def", "preproc_function_def"):
            _macro(n, t, model)
            continue
        if typ == "preproc_include":
            path_node = n.child_by_field_name("path")
            model.includes.append(t.node_text(path_node))
            continue
        if typ in ("function_definition",):
            continue
        # Descend into namespaces, preprocessor conditionals, ERROR recovery nodes, declaration lists.
        for c in reversed(n.children):
            stack.append((c, ext, None, None))


def _macro(n: tree_sitter.Node, t: _Text, model: SourceModel) -> None:
    """Record ``#define NAME value`` in :attr:`SourceModel.defines`, ``#define NAME(params) value`` in ``macros``."""
    name = n.child_by_field_name("name")
    if n.type == "preproc_def":
        if name is not None:
            model.defines[t.node_text(name)] = _without_comments(t.node_text(n.child_by_field_name("value")))
        return
    plist = n.child_by_field_name("parameters")
    value = n.child_by_field_name("value")
    if name is not None and plist is not None:
        pnames = [t.node_text(c) for c in plist.children if c.is_named or t.node_text(c) == "..."]
        model.macros[t.node_text(name)] = (pnames, _without_comments(t.node_text(value)))


def _without_comments(value: str) -> str:
    """A macro's replacement text without the comments tree-sitter leaves in it (``#define TX 8 // x``)."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", value, flags=re.DOTALL).strip()


def _collect_errors(root: tree_sitter.Node, t: _Text, model: SourceModel) -> None:
    """ERROR and MISSING nodes anywhere in the tree, function bodies included, in source order."""
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "ERROR" or n.is_missing:
            model.syntax_errors.append(t.span(n))
        if n.has_error:
            stack.extend(reversed(n.children))


def _function(
    n: tree_sitter.Node,
    t: _Text,
    extern_c: bool,
    tmpl: str | None,
    tmpl_node: tree_sitter.Node | None,
) -> Function | None:
    kinds = {c.type for c in n.children}
    declarator = n.child_by_field_name("declarator")
    # Walk through pointer/reference declarators to the function declarator (functions returning T*).
    while declarator is not None and declarator.type != "function_declarator":
        inner = declarator.child_by_field_name("declarator")
        if inner is None:
            declarator = next((c for c in declarator.children if c.type == "function_declarator"), None)
            break
        declarator = inner
    if declarator is None:
        return None
    name_node = declarator.child_by_field_name("declarator")
    if name_node is None:
        return None
    name = t.node_text(name_node)
    # Qualified names (ns::f, Class::f): the last component names the function.
    name = name.split("::")[-1].strip()
    if not re.fullmatch(r"[A-Za-z_~][A-Za-z0-9_]*", name or ""):
        return None
    kind: FunctionKind
    if "__global__" in kinds:
        kind = "global"
    elif "__device__" in kinds and "__host__" in kinds:
        kind = "host_device"
    elif "__device__" in kinds:
        kind = "device"
    else:
        kind = "host"
    params: list[Param] = []
    plist = declarator.child_by_field_name("parameters")
    if plist is not None:
        for p in plist.children:
            if p.type in ("parameter_declaration", "optional_parameter_declaration"):
                param = _param(p, t)
                if param is not None:
                    params.append(param)
    body = n.child_by_field_name("body")
    lb = next((c for c in n.children if c.type == "launch_bounds"), None)
    lb_text = None
    if lb is not None:
        lb_src = t.node_text(lb)
        lb_text = lb_src[lb_src.find("(") + 1 : lb_src.rfind(")")].strip() if "(" in lb_src else lb_src
    sig_end = body.start_byte if body is not None else n.end_byte
    sig = t.data[n.start_byte : sig_end].decode("utf-8", errors="replace").strip()
    outer = t.span(tmpl_node) if tmpl_node is not None else t.span(n)
    return Function(
        name=name,
        kind=kind,
        params=params,
        span=t.span(n),
        name_span=t.span(name_node),
        body_span=t.span(body) if body is not None and body.type == "compound_statement" else None,
        signature_text=sig,
        template_params=tmpl,
        launch_bounds=lb_text,
        extern_c=extern_c,
        outer_span=outer,
    )


def _param(p: tree_sitter.Node, t: _Text) -> Param | None:
    text = t.node_text(p)
    if text.strip() in ("void", "..."):
        return None
    is_pointer = False
    is_restrict = False
    name = ""
    d = p.child_by_field_name("declarator")
    node = d
    while node is not None:
        if node.type in ("pointer_declarator", "array_declarator", "abstract_pointer_declarator"):
            is_pointer = True
        if node.type == "reference_declarator":
            pass
        for c in node.children:
            if c.type == "type_qualifier" and "restrict" in t.node_text(c):
                is_restrict = True
        if node.type == "identifier":
            name = t.node_text(node)
            break
        nxt = node.child_by_field_name("declarator")
        if nxt is None:
            nxt = next(
                (
                    c
                    for c in node.children
                    if c.type
                    in ("identifier", "pointer_declarator", "reference_declarator", "array_declarator")
                ),
                None,
            )
        node = nxt
    type_node = p.child_by_field_name("type")
    base = t.node_text(type_node).strip()
    is_const = any(c.type == "type_qualifier" and t.node_text(c) == "const" for c in p.children)
    # Every spelling: `__restrict__`, `__restrict` (tree-sitter: an MS pointer modifier) and C99 `restrict`.
    if re.search(r"\b(__restrict__|__restrict|restrict)\b", text):
        is_restrict = True
    type_text = text[: len(text) - len(name)].strip() if name and text.endswith(name) else text
    return Param(
        name=name,
        type_text=" ".join(type_text.split()),
        base_type=base,
        is_pointer=is_pointer,
        is_const=is_const,
        is_restrict=is_restrict,
        span=t.span(p),
    )


def _launch_sites(fn_node: tree_sitter.Node, t: _Text, model: SourceModel, caller: str) -> None:
    stack = [fn_node]
    while stack:
        n = stack.pop()
        if n.type == "call_expression":
            cfg = next((c for c in n.children if c.type == "kernel_call_syntax"), None)
            if cfg is not None:
                fnode = n.child_by_field_name("function") or n.children[0]
                targs = None
                if fnode.type == "template_function":
                    targs_node = fnode.child_by_field_name("arguments")
                    targs = t.node_text(targs_node)
                    fnode = fnode.child_by_field_name("name") or fnode
                kname = t.node_text(fnode).split("::")[-1]
                cfg_nodes = [c for c in cfg.children if c.is_named]
                argl = n.child_by_field_name("arguments")
                args = [t.node_text(a) for a in argl.children if a.is_named] if argl is not None else []
                model.launch_sites.append(
                    LaunchSite(
                        kernel=kname,
                        template_args=targs,
                        config=[t.node_text(c) for c in cfg_nodes],
                        config_spans=[t.span(c) for c in cfg_nodes],
                        args=args,
                        span=t.span(n),
                        caller=caller,
                    )
                )
        stack.extend(reversed(n.children))


def _collect_comments(root: tree_sitter.Node, t: _Text, model: SourceModel) -> None:
    comments: list[tree_sitter.Node] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "comment":
            comments.append(n)
            continue
        stack.extend(reversed(n.children))
    comments.sort(key=lambda c: c.start_byte)
    i = 0
    while i < len(comments):
        c = comments[i]
        raw = t.node_text(c)
        if raw.startswith("/*"):
            block = _block_comment(raw, c.start_point[0])
            if block is not None:
                body, lines = block
                model.spec_blocks.append(CommentBlock(body, lines, t.span(c), "block"))
            i += 1
            continue
        # A run of consecutive // lines whose first line starts with "kernellsp".
        first = raw[2:]
        if not _SPEC_HEAD.match(first):
            i += 1
            continue
        run = [c]
        j = i + 1
        while j < len(comments):
            nxt = comments[j]
            if t.node_text(nxt).startswith("//") and nxt.start_point[0] == run[-1].start_point[0] + 1:
                run.append(nxt)
                j += 1
            else:
                break
        body_lines: list[str] = []
        line_nums: list[int] = []
        for k, rc in enumerate(run):
            txt = t.node_text(rc)[2:]
            if txt.startswith(" "):
                txt = txt[1:]
            if k == 0:
                txt = _SPEC_HEAD.sub("", txt, count=1)
                if not txt.strip():
                    continue
            body_lines.append(txt)
            line_nums.append(rc.start_point[0])
        span = Span(
            run[0].start_point[0],
            t.col(run[0].start_point[0], run[0].start_point[1]),
            run[-1].end_point[0],
            t.col(run[-1].end_point[0], run[-1].end_point[1]),
            run[0].start_byte,
            run[-1].end_byte,
        )
        model.spec_blocks.append(CommentBlock("\n".join(body_lines), line_nums, span, "line"))
        i = j


def _block_comment(raw: str, first_line: int) -> tuple[str, list[int]] | None:
    inner = raw[2:-2] if raw.endswith("*/") else raw[2:]
    if not _SPEC_HEAD.match(inner):
        return None
    lines = inner.split("\n")
    out: list[str] = []
    nums: list[int] = []
    for k, line in enumerate(lines):
        if k == 0:
            line = _SPEC_HEAD.sub("", line, count=1)
            if not line.strip():
                continue
        else:
            # Strip the decorative " * " column many people keep in block comments.
            m = re.match(r"^\s*\*(?!/)\s?", line)
            if m:
                line = line[m.end() :]
        out.append(line)
        nums.append(first_line + k)
    # Common indentation is cosmetic; TOML does not care but round-trips look cleaner without it.
    indents = [len(x) - len(x.lstrip()) for x in out if x.strip()]
    cut = min(indents) if indents else 0
    body = [x[cut:] if len(x) >= cut else x.lstrip() for x in out]
    # Drop blank (or whitespace-only) lines at both ends from the text and the line map alike, so
    # body line i always came from source line nums[i].
    first = next((i for i, x in enumerate(body) if x.strip()), len(body))
    last = max((i for i, x in enumerate(body) if x.strip()), default=first - 1)
    return "\n".join(body[first : last + 1]), nums[first : last + 1]


def node_at(model: SourceModel, line: int, col: int) -> tree_sitter.Node | None:
    """The smallest named node at a position (0-based line, byte column), or ``None``."""
    if model.tree is None:
        return None
    return model.tree.root_node.named_descendant_for_point_range((line, col), (line, col))
