"""``pragma-attach``: ``#pragma unroll N`` lines leave the body and become annotations of the loop they precede.

A pragma is a hint to the compiler, not a statement: recipes that count a body's statements or
read the statement before a loop must not meet it. The parser already sees these lines as comments
(:func:`kernellsp.source.model.parser_view`); this pass removes them from the kernel's text and keeps
``loop header -> pragma`` in its notes, where ``--explain`` shows them. Recipes regenerate loops with
their own unrolling; the tuner proposes ``#pragma unroll N`` on the original text.
"""

from __future__ import annotations

from kernellsp.source.ir.canon.unit import Change, Edit, Unit, walk

NAME = "pragma-attach"
SUMMARY = "#pragma unroll lines removed from the body and recorded as annotations of the next loop"


def run(unit: Unit) -> Change | None:
    change = Change()
    for n in walk(unit.body):
        if n.type != "comment":
            continue
        text = unit.text(n)
        if not text.lstrip().startswith("#"):
            continue
        nxt = n.next_named_sibling
        while nxt is not None and nxt.type == "comment":
            nxt = nxt.next_named_sibling
        loop = ""
        if nxt is not None and nxt.type in ("for_statement", "while_statement", "do_statement"):
            loop = unit.text(nxt).split("{")[0].split("\n")[0].strip()
        # The whole line goes, its newline too, so no blank line is left behind.
        end = n.end_byte
        if unit.data[end : end + 1] == b"\n":
            end += 1
        start = unit.data.rfind(b"\n", 0, n.start_byte) + 1
        if unit.data[start : n.start_byte].strip():
            start = n.start_byte
        change.edits.append(Edit(start, end, ""))
        change.notes.append(f"`{text.strip()}` -> {('`' + loop + '`') if loop else 'no loop follows'}")
    return change
