"""The skeleton of a CUDA file for the scope gate (:mod:`kernellsp.optimize.verify.scope`): its tokens outside the
editable regions (targeted kernels, their ``__device__`` helpers, spec blocks), so that two files compare token for
token, with comments and whitespace left out, and the editable regions with the directives they hold."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernellsp.optimize.verify import lexical
from kernellsp.source import spec as specmod
from kernellsp.source.model import SourceModel

if TYPE_CHECKING:
    from tree_sitter import Node


def editable_spans(
    model: SourceModel, targets: set[str], entry: str | None = None
) -> list[tuple[int, int, str]]:
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
    if entry is not None and entry not in targets:
        # A host launcher's launches of the targeted kernels: their grid and block expressions may change
        # (scope.launch_config_violation says with what).
        callers = set(model.launchers(entry))
        for ls in model.launch_sites:
            if ls.caller in callers and ls.kernel in targets:
                spans.extend((sp.start_byte, sp.end_byte, "launch-config") for sp in ls.config_spans[:2])
    spans.sort()
    merged: list[tuple[int, int, str]] = []
    for s in spans:
        if merged and s[0] < merged[-1][1]:
            prev = merged[-1]
            merged[-1] = (prev[0], max(prev[1], s[1]), prev[2])
        else:
            merged.append(s)
    return merged


@dataclass
class Lex:
    """A file's bytes, the comments the preprocessor sees, and the parse-tree comments it confirms."""

    data: bytes
    comments: list[tuple[int, int]]
    confirmed: set[tuple[int, int]]
    spec_spans: list[tuple[int, int]]

    @classmethod
    def of(cls, model: SourceModel) -> Lex:
        data = model.text.encode("utf-8", errors="replace")
        comments = lexical.comment_ranges(data)
        return cls(
            data, comments, set(comments), [(b.span.start_byte, b.span.end_byte) for b in model.spec_blocks]
        )

    def macro_body(self, start: int, end: int) -> str:
        """A macro's replacement text (the parser keeps a ``//`` comment in it): comments and the blanks around
        them become one space, ends stripped. Other whitespace stays (it may sit inside a string literal)."""
        body = bytearray(self.data[start:end])
        for cs, ce in self.comments:
            if ce > start and cs < end:
                a, b = max(cs, start) - start, min(ce, end) - start
                body[a:b] = b"\x00" * (b - a)
        text = re.sub(rb"[ \t]*\x00+[ \t]*", b" ", bytes(body)).strip()
        return text.decode("utf-8", errors="replace")

    def droppable(self, node: Node) -> bool:
        """A comment node that is really a comment (confirmed by the lexical scan) and not part of a spec block."""
        if (node.start_byte, node.end_byte) not in self.confirmed:
            return False
        return not any(s <= node.start_byte and node.end_byte <= e for s, e in self.spec_spans)


@dataclass
class Region:
    """One editable function and the directives in it."""

    label: str  # kernel:NAME or device (helpers are pooled: they may be split, merged, renamed)
    name: str
    start: int
    end: int
    directives: list[lexical.Directive]

    @property
    def frozen(self) -> bool:
        """Its directives change what later code sees, so they stay as written (and where they are)."""
        return any(not d.conditional for d in self.directives) or not lexical.conditionals_balance(
            self.directives
        )


def regions_of(model: SourceModel, targets: set[str], lex: Lex) -> list[Region]:
    out: list[Region] = []
    for fn in model.functions:
        outer = fn.outer_span or fn.span
        if fn.kind == "global" and fn.name in targets and fn.has_body:
            label = f"kernel:{fn.name}"
        elif fn.kind == "device":
            label = "device"
        else:
            continue
        found = lexical.directives(lex.data, outer.start_byte, outer.end_byte, lex.comments, outer.start_line)
        out.append(Region(label, fn.name, outer.start_byte, outer.end_byte, found))
    return out


def leaves(model: SourceModel) -> list[Node]:
    if model.tree is None:
        return []
    found: list[Node] = []
    stack = [model.tree.root_node]
    while stack:
        node = stack.pop()
        if node.child_count == 0:
            found.append(node)
        else:
            stack.extend(reversed(node.children))
    return found


def skeleton(
    model: SourceModel,
    targets: set[str],
    lex: Lex,
    entry: str | None = None,
    cut: list[tuple[int, int]] | None = None,
    frozen: list[Region] | None = None,
) -> tuple[list[str], list[int]]:
    """The file outside its editable regions as tokens, with the 0-based line of each.

    Tokens are the parse tree's leaves, so whitespace and comments (confirmed ones, spec blocks
    excepted) do not count; between two tokens stands ``"\\n"`` when a line ends there (directives end
    at line ends), ``" "`` for other separation. A targeted kernel or spec stands as one marker; device
    helpers and the ``cut`` ranges (allowed new includes) vanish. ``frozen`` regions put their directive
    list in the skeleton where they are, so those directives cannot move across host code or change.
    """
    spans = [*editable_spans(model, targets, entry), *((s, e, "device") for s, e in (cut or []))]
    spans.sort()
    data = lex.data
    w = _Tokens(data)
    done_spans: set[int] = set()
    frozen_at = {r.start: r for r in frozen or []}

    for leaf in leaves(model):
        k = next(
            (i for i, (s, e, _) in enumerate(spans) if s <= leaf.start_byte and leaf.end_byte <= e and s < e),
            None,
        )
        if k is not None:
            s, e, label = spans[k]
            if k not in done_spans:
                done_spans.add(k)
                _emit_span(w, s, e, label, leaf.start_point[0], frozen_at)
            w.prev_end = max(w.prev_end, e)
            continue
        if leaf.type == "comment" and lex.droppable(leaf):
            w.gap(leaf.start_byte)
            w.separate()
            w.prev_end = leaf.end_byte
            continue
        w.gap(leaf.start_byte)
        text = data[leaf.start_byte : leaf.end_byte].decode("utf-8", errors="replace")
        if leaf.type == "preproc_arg":
            text = lex.macro_body(leaf.start_byte, leaf.end_byte)
        elif leaf.is_missing:
            text = f"<missing {leaf.type}>"
        w.emit(text, leaf.start_point[0])
        w.prev_end = leaf.end_byte
    return w.toks, w.lines


class _Tokens:
    """The skeleton being written: its tokens, their lines, and the separator pending before the next one."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.toks: list[str] = []
        self.lines: list[int] = []
        self.pending = ""
        self.prev_end = 0

    def gap(self, upto: int) -> None:
        g = self.data[self.prev_end : upto]
        if not g:
            return
        if g.strip():
            self.emit("gap:" + g.decode("utf-8", errors="replace"), -1)
        elif b"\n" in g:
            self.pending = "\n"
        elif self.pending != "\n":
            self.pending = " "

    def emit(self, tok: str, line: int) -> None:
        if self.pending and self.toks:
            self.toks.append(self.pending)
            self.lines.append(line)
        self.pending = ""
        self.toks.append(tok)
        self.lines.append(line)

    def separate(self) -> None:
        if self.pending != "\n":
            self.pending = " "


def _emit_span(w: _Tokens, s: int, e: int, label: str, line: int, frozen_at: dict[int, Region]) -> None:
    """An editable span, once: its marker (none for device helpers) and the directives of frozen regions in it."""
    w.gap(s)
    if label != "device":
        w.emit(f"\x00{label}\x00", line)
    for r in sorted((r for st, r in frozen_at.items() if s <= st < e), key=lambda r: r.start):
        w.emit(
            f"\x00directives of {r.label}: " + " | ".join(d.text for d in r.directives) + "\x00",
            line,
        )
    w.separate()


def first_difference(a: list[str], b: list[str], b_lines: list[int]) -> int | None:
    """The candidate's 0-based line where the token lists first differ."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return next((ln for ln in b_lines[i:] if ln >= 0), None)
    if len(a) == len(b):
        return None
    return next((ln for ln in b_lines[len(a) :] if ln >= 0), b_lines[-1] if b_lines else None)
