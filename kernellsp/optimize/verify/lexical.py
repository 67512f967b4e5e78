"""What the C preprocessor sees of a source text: where its comments are and which lines are directives.

The scope gate compares files without their comments (people and LLMs comment their code, and a
comment never reaches the compiler). That is sound only if "comment" means what the compiler means.
tree-sitter's lexer does not always agree: ``int a = '/*'; ...`` is a (multi-character) character
literal followed by code for the compiler, while tree-sitter starts a comment at ``/*`` and would hide
the code after it. So :func:`comment_ranges` scans the text as translation phases 1-3 do — line
splices (``\\`` newline) first, then string, character and raw string literals, digit separators
(``1'000``) and comments — and the scope gate drops only the comment nodes of the parse tree that
this scan confirms byte for byte. Trigraphs are not handled: C++17 removed them and nvcc's host
compilers only honour them in strict ISO modes; a trigraph makes the scanner see *more* code, never
less, so it can only make the gate stricter.

:func:`directives` lists the preprocessor directives of a byte range as the preprocessor finds them:
comments replaced by a space, splices joined, a line whose first token is ``#`` or the digraph ``%:``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_IDENT = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")
_RAW_PREFIXES = frozenset({b"R", b"u8R", b"uR", b"UR", b"LR"})


def _splice_end(data: bytes, j: int) -> int:
    """The first position at or after ``j`` that is not the start of a line splice (backslash, newline)."""
    n = len(data)
    while j < n and data[j] == 0x5C:
        if data[j + 1 : j + 2] == b"\n":
            j += 2
        elif data[j + 1 : j + 3] == b"\r\n":
            j += 3
        else:
            break
    return j


def comment_ranges(data: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` byte ranges of every comment in ``data``, as the C/C++ preprocessor finds them.

    A ``//`` comment ends before its newline (a splice continues it onto the next line); an unterminated
    ``/*`` comment runs to the end of the text.
    """
    n = len(data)
    out: list[tuple[int, int]] = []
    i = 0
    while True:
        j = _splice_end(data, i)
        if j >= n:
            return out
        c = data[j]
        if c == 0x2F:  # '/'
            k = _splice_end(data, j + 1)
            nxt = data[k] if k < n else -1
            if nxt == 0x2F:  # '//'
                m = _line_comment_end(data, k + 1)
                out.append((j, min(m, n)))
                i = m
                continue
            if nxt == 0x2A:  # '/*'
                end = _block_comment_end(data, k + 1)
                out.append((j, end))
                i = end
                continue
            i = j + 1
            continue
        if c in (0x22, 0x27):  # '"' or "'"
            i = _skip_quoted(data, j, c)
            continue
        if 0x30 <= c <= 0x39 or (c == 0x2E and _next_is_digit(data, j)):
            i = _skip_pp_number(data, j)
            continue
        if c in _IDENT or c >= 0x80:
            word, m = _read_identifier(data, j)
            q = _splice_end(data, m)
            if word in _RAW_PREFIXES and q < n and data[q] == 0x22:
                i = _skip_raw_string(data, q)
                continue
            i = m  # an encoding prefix (u8"..", L'..') is followed by its literal, scanned next
            continue
        i = j + 1


def _line_comment_end(data: bytes, m: int) -> int:
    """Where a ``//`` comment whose text starts at ``m`` ends: before its newline (a splice continues it)."""
    n = len(data)
    while True:
        m = _splice_end(data, m)
        if m >= n or data[m] == 0x0A:
            return m
        m += 1


def _block_comment_end(data: bytes, m: int) -> int:
    """The end of a ``/*`` comment whose text starts at ``m``: after its ``*/``, or the end of an unterminated one."""
    n = len(data)
    while True:
        m = _splice_end(data, m)
        if m >= n:
            return n
        if data[m] == 0x2A:
            p = _splice_end(data, m + 1)
            if p < n and data[p] == 0x2F:
                return p + 1
        m += 1


def _next_is_digit(data: bytes, j: int) -> bool:
    k = _splice_end(data, j + 1)
    return k < len(data) and 0x30 <= data[k] <= 0x39


def _read_identifier(data: bytes, j: int) -> tuple[bytes, int]:
    n = len(data)
    word = bytearray()
    m = j
    while True:
        m = _splice_end(data, m)
        if m >= n or not (data[m] in _IDENT or data[m] >= 0x80):
            return bytes(word), m
        word.append(data[m])
        m += 1


def _skip_pp_number(data: bytes, j: int) -> int:
    """End of a preprocessing number: digits, identifier characters, '.', exponent signs, digit separators."""
    n = len(data)
    m = j + 1
    prev = data[j]
    while True:
        m = _splice_end(data, m)
        if m >= n:
            return m
        c = data[m]
        if c in _IDENT or c == 0x2E or c >= 0x80:
            prev = c
            m += 1
            continue
        if c in (0x2B, 0x2D) and prev in b"eEpP":
            prev = c
            m += 1
            continue
        if c == 0x27:  # digit separator: only when a digit or identifier character follows
            k = _splice_end(data, m + 1)
            if k < n and data[k] in _IDENT:
                prev = data[k]
                m = k + 1
                continue
        return m


def _skip_quoted(data: bytes, j: int, quote: int) -> int:
    """End of a string or character literal starting at ``j`` (an unterminated one ends at its newline)."""
    n = len(data)
    m = j + 1
    while True:
        m = _splice_end(data, m)
        if m >= n:
            return n
        c = data[m]
        if c == 0x5C:  # an escape: the next logical character is part of the literal
            m = _splice_end(data, m + 1) + 1
            continue
        if c == quote:
            return m + 1
        if c == 0x0A:
            return m
        m += 1


def _skip_raw_string(data: bytes, q: int) -> int:
    """End of a raw string literal whose opening quote is at ``q`` (splices are not processed inside it)."""
    open_paren = data.find(b"(", q + 1, q + 18)
    if open_paren < 0:
        return q + 1  # not a valid raw string; the compiler rejects it, scan on as code
    delim = data[q + 1 : open_paren]
    close = data.find(b")" + delim + b'"', open_paren + 1)
    return len(data) if close < 0 else close + len(delim) + 2


# --------------------------------------------------------------------------------------------------
# Directives


#: Conditional-inclusion directives: they only choose which lines of the same function compile.
CONDITIONALS = frozenset({"if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif"})
_OPENERS = frozenset({"if", "ifdef", "ifndef"})
_MIDDLES = frozenset({"elif", "elifdef", "elifndef", "else"})
#: ``#pragma`` forms that only steer code generation or diagnostics of the code around them. Every
#: other pragma may change state seen by later code (``push_macro``/``pop_macro`` restore macros,
#: ``redefine_extname`` renames host symbols), so it is a directive like any other.
_CODEGEN_PRAGMA = re.compile(
    r"(unroll|nounroll|nv_diag_(suppress|warning|error|default|once)|diag_(suppress|warning|error|default|once)"
    r"|nv_diagnostic)\b"
)


@dataclass(frozen=True)
class Directive:
    """One preprocessor directive: normalised text (``#define X 1``), its name (``define``), 0-based line."""

    text: str
    name: str
    line: int

    @property
    def conditional(self) -> bool:
        return self.name in CONDITIONALS


def codegen_pragma(body: str) -> bool:
    """Is ``body`` (the text after ``#pragma`` or inside ``_Pragma("...")``) a code-generation/diagnostics pragma?"""
    return _CODEGEN_PRAGMA.match(body.strip()) is not None


def directives(
    data: bytes,
    start: int,
    end: int,
    comments: list[tuple[int, int]],
    first_line: int = 0,
) -> list[Directive]:
    """The directives of ``data[start:end]`` as the preprocessor sees them, ``comments`` being ranges in ``data``.

    Each comment becomes one space (translation phase 3), so ``int q; /*\\n*/ #define Y`` is one line
    with code before the ``#`` and holds no directive, while ``/**/ #define Y`` does. Line splices join
    lines. Code-generation pragmas (``#pragma unroll``, diagnostics) are left out: they may be added
    anywhere. ``first_line`` is the 0-based line of ``start``, for the lines reported.
    """
    view = bytearray()
    line_of: list[int] = []
    line = first_line
    pos = start

    def copy(upto: int) -> None:
        nonlocal line
        for b in data[pos:upto]:
            view.append(b)
            line_of.append(line)
            if b == 0x0A:
                line += 1

    for cs, ce in sorted(comments):
        if ce <= start or cs >= end:
            continue
        cs, ce = max(cs, start), min(ce, end)
        if cs < pos:
            continue
        copy(cs)
        view.append(0x20)
        line_of.append(line)
        line += data[cs:ce].count(b"\n")
        pos = ce
    copy(end)
    out: list[Directive] = []
    cur = bytearray()
    cur_line: int | None = None
    i = 0
    n = len(view)
    while i <= n:
        if i < n and view[i] == 0x5C and view[i + 1 : i + 2] == b"\n":
            i += 2
            continue
        if i < n and view[i] == 0x5C and view[i + 1 : i + 3] == b"\r\n":
            i += 3
            continue
        if i == n or view[i] == 0x0A:
            if cur_line is not None:
                d = _directive_of(bytes(cur).rstrip(b"\r").decode("utf-8", errors="replace"), cur_line)
                if d is not None:
                    out.append(d)
            cur = bytearray()
            cur_line = None
            i += 1
            continue
        if cur_line is None:
            cur_line = line_of[i]
        cur.append(view[i])
        i += 1
    return out


def _directive_of(line: str, line_no: int) -> Directive | None:
    s = line.lstrip(" \t\f\v")
    if s.startswith("%:"):
        s = "#" + s[2:]
    if not s.startswith("#"):
        return None
    body = " ".join(s[1:].split())
    name = re.match(r"[A-Za-z_]\w*|\d+|", body).group(0)  # type: ignore[union-attr]
    if name == "":
        return None if not body else Directive("#" + body, "?", line_no)  # '#' alone is the null directive
    if name.isdigit():  # a GNU line marker (# 12 "file") sets line numbers like #line
        name = "line"
    if name == "pragma" and codegen_pragma(body[len("pragma") :]):
        return None
    return Directive("#" + body, name, line_no)


def conditionals_balance(found: list[Directive]) -> bool:
    """Does every ``#if``/``#ifdef``/``#ifndef`` in ``found`` end (``#endif``) within it, with no stray ``#else``/``#endif``?"""
    depth = 0
    for d in found:
        if d.name in _OPENERS:
            depth += 1
        elif d.name in _MIDDLES:
            if depth == 0:
                return False
        elif d.name == "endif":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


_PRAGMA_OP = re.compile(rb"\b_Pragma\s*\(\s*(?:u8|u|U|L)?R?\"((?:[^\"\\]|\\.)*)\"", re.S)


def pragma_operators(
    data: bytes, start: int, end: int, comments: list[tuple[int, int]]
) -> list[tuple[str, int]]:
    """``(pragma text, byte offset in data)`` of each ``_Pragma("...")`` operator in ``data[start:end]`` outside comments.

    A ``_Pragma`` whose argument is not a plain string literal (a macro, a concatenation) cannot be
    judged and is returned with the text ``<not a string literal>``.
    """
    region = bytearray(data[start:end])
    for cs, ce in comments:
        if ce <= start or cs >= end:
            continue
        a, b = max(cs, start) - start, min(ce, end) - start
        region[a:b] = b" " * (b - a)
    # Join line splices, remembering where each byte came from.
    text = bytearray()
    origin: list[int] = []
    buf = bytes(region)
    i = 0
    while i < len(buf):
        j = _splice_end(buf, i)
        if j != i:
            i = j
            continue
        text.append(buf[i])
        origin.append(start + i)
        i += 1
    found = [
        (m.group(1).decode("utf-8", errors="replace"), origin[m.start()]) for m in _PRAGMA_OP.finditer(text)
    ]
    seen = {off for _, off in found}
    found += [
        ("<not a string literal>", origin[m.start()])
        for m in re.finditer(rb"\b_Pragma\b", text)
        if origin[m.start()] not in seen
    ]
    return found
