"""Which rules report: project and command-line selection, and suppression comments in the source.

**Selection** follows ruff: ``select`` and ``ignore`` hold rule codes or code prefixes (``KL4`` is every
KL4xx rule). For a finding's code the most specific matching entry decides (``select = ["KL4"]`` with
``ignore = ["KL404"]`` keeps every KL4xx rule but KL404; ``ignore = ["KL4"]`` with ``select =
["KL404"]`` keeps KL404 alone of them); a code no entry matches reports when ``select`` is empty (the
default: every rule) and not otherwise. The project sets them in ``kernellsp.toml`` ``[settings]``
(``select``, ``ignore``); ``--select`` on the command line replaces the project's ``select`` and
``--ignore`` adds to its ``ignore``.

**Suppression comments** silence findings where they are written, for one reason a reviewer can read
next to the code:

* ``x[i * 32] = v;  // kernellsp: ignore[KL404]``: that line (several codes: ``ignore[KL404, KL401]``;
  no brackets: every rule);
* a comment alone on its line, ``// kernellsp: ignore[KL403]``: the next line;
* ``// kernellsp: ignore-file[KL004]`` anywhere: the whole file.

A kernel-scope finding sits on the kernel's name, so a comment on (or just above) the line that names
the kernel silences it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernellsp.findings import Finding

_PREFIX = re.compile(r"^KL\d{0,3}$")
_COMMENT = re.compile(
    r"(//|/\*)\s*kernellsp:\s*ignore(?P<file>-file)?\b(?:\s*\[(?P<codes>[^\]]*)\])?", re.IGNORECASE
)
#: Every rule (a suppression comment without a code list).
ALL = "*"


class SelectionError(ValueError):
    """A select/ignore entry that names no rule; the message names the entry and where it came from."""


@dataclass(frozen=True)
class Selection:
    """``select``/``ignore`` code prefixes; the empty selection reports every rule."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()

    def enabled(self, code: str) -> bool:
        """Does ``code`` report under this selection (the most specific matching prefix decides)?"""
        best: tuple[int, bool] | None = None
        for prefixes, on in ((self.select, True), (self.ignore, False)):
            for p in prefixes:
                # At equal length ignore wins: `select = ["KL404"]`, `ignore = ["KL404"]` is off.
                if code.startswith(p) and (
                    best is None or len(p) > best[0] or (len(p) == best[0] and not on)
                ):
                    best = (len(p), on)
        if best is None:
            return not self.select
        return best[1]

    def combined(self, select: Sequence[str] | None = None, ignore: Sequence[str] = ()) -> Selection:
        """The command line over this (project) selection: ``select`` replaces, ``ignore`` adds."""
        return Selection(tuple(select) if select is not None else self.select, (*self.ignore, *ignore))

    def validate(self, known_codes: Iterable[str], command_line: bool = False) -> None:
        """Raise :class:`SelectionError` for an entry that is not a code prefix or matches no known rule, naming
        the option (``--select``) or the setting (``setting 'select'``) it came from."""
        known = sorted(known_codes)
        for kind, prefixes in (("select", self.select), ("ignore", self.ignore)):
            where = f"--{kind}" if command_line else f"setting '{kind}'"
            for p in prefixes:
                if not _PREFIX.match(p):
                    raise SelectionError(f"{where}: {p!r} is not a rule code or prefix (KL404, KL4)")
                if not any(c.startswith(p) for c in known):
                    raise SelectionError(f"{where}: {p!r} matches no rule (see `kernellsp rules`)")


def parse_codes(values: Iterable[str]) -> tuple[str, ...]:
    """``["KL404,KL401", " kl5 "]`` → ``("KL404", "KL401", "KL5")``: split on commas, upper-cased."""
    out: list[str] = []
    for v in values:
        out.extend(c.strip().upper() for c in v.split(",") if c.strip())
    return tuple(out)


@dataclass
class Suppressions:
    """Suppression comments of one file: per 0-based line and file-wide, the codes (or :data:`ALL`)."""

    lines: dict[int, set[str]] = field(default_factory=dict)
    file: set[str] = field(default_factory=set)

    def covers(self, code: str, line: int) -> bool:
        for codes in (self.file, self.lines.get(line, set())):
            if ALL in codes or any(code.startswith(c) for c in codes):
                return True
        return False


def suppressions(lines: Sequence[str]) -> Suppressions:
    """The ``kernellsp: ignore[...]`` comments of a file's lines."""
    out = Suppressions()
    for i, text in enumerate(lines):
        if "kernellsp" not in text:
            continue
        for m in _COMMENT.finditer(text):
            raw = m.group("codes")
            codes = set(parse_codes([raw])) if raw is not None else {ALL}
            codes = codes or {ALL}
            if m.group("file"):
                out.file |= codes
                continue
            alone = not text[: m.start()].strip()
            out.lines.setdefault(i + 1 if alone else i, set()).update(codes)
    return out


def unknown_codes(lines: Sequence[str], known: Iterable[str]) -> list[tuple[int, str]]:
    """``(0-based line, code)`` of each code in a suppression comment that starts no known rule code."""
    known = tuple(known)
    out = []
    for i, text in enumerate(lines):
        if "kernellsp" not in text:
            continue
        for m in _COMMENT.finditer(text):
            raw = m.group("codes")
            for code in parse_codes([raw]) if raw is not None else ():
                if not any(k.startswith(code) for k in known):
                    out.append((i, code))
    return out


def apply(
    findings: Iterable[Finding], selection: Selection | None, lines: Sequence[str] | None
) -> list[Finding]:
    """``findings`` without those the selection turns off or a suppression comment covers."""
    sup = suppressions(lines) if lines else None
    out = []
    for f in findings:
        if selection is not None and not selection.enabled(f.code):
            continue
        if sup is not None and sup.covers(f.code, f.range.start_line):
            continue
        out.append(f)
    return out
