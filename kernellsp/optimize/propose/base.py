"""What every proposer receives and returns.

A proposer reads a :class:`ProposalContext` (the current champion's text, the entry, its spec, the
findings and profile summary, and what memory says was already tried) and returns full-file
:class:`Candidate` texts. It never decides anything: every candidate still goes through the scope,
compile, correctness, sanitizer and timing gates of :mod:`kernellsp.optimize.verify.gate`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernellsp.findings import Finding
from kernellsp.source import spec as specmod
from kernellsp.source.model import SourceModel, parse_source


class ProposerError(RuntimeError):
    """A proposer could not produce candidates (LLM unreachable, budget spent); the message says why."""


@dataclass
class Candidate:
    """One proposed rewrite of the whole file."""

    text: str
    description: str
    proposer: str
    rules: list[str] = field(default_factory=list)
    predicted_gain_pct: float | None = None
    #: Stable identity of the idea (for memory: a rejected idea is not proposed again).
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            self.key = hashlib.sha256(self.text.encode()).hexdigest()[:16]


@dataclass
class ProposalContext:
    """Everything a proposer may use."""

    path: str
    text: str
    original_text: str
    entry: str
    model: SourceModel
    spec: specmod.BoundSpec
    findings: list[Finding] = field(default_factory=list)
    profile: dict[str, Any] | None = None
    tried: list[dict[str, Any]] = field(default_factory=list)
    round: int = 0

    def tried_keys(self) -> set[str]:
        return {t["key"] for t in self.tried if t.get("key")}


class Proposer(Protocol):
    """The interface of the tuner and the LLM proposer."""

    name: str

    def propose(self, ctx: ProposalContext, k: int) -> list[Candidate]:
        """Up to ``k`` new candidates (never one whose key is in ``ctx.tried_keys()``)."""
        ...


_INCLUDE = re.compile(r"\s*#\s*include\s*(<[^>]+>|\"[^\"]+\")")


def add_includes(text: str, includes: list[str]) -> str:
    """``text`` with ``#include`` lines for ``includes`` (``"<mma.h>"``) it lacks, right after the file's last
    top-of-file ``#include`` (or at the top when it has none): where the scope gate lets a rewrite add
    allow-listed toolkit headers."""
    lines = text.splitlines(keepends=True)
    # The header each line names (`#  include <mma.h>  // why` names <mma.h>).
    have = {m.group(1) for ln in lines if (m := _INCLUDE.match(ln))}
    missing = [h for h in includes if h not in have]
    if not missing:
        return text
    at = 0
    for i, ln in enumerate(lines):
        s = ln.strip()
        if _INCLUDE.match(ln):
            at = i + 1
        elif s and not s.startswith(("//", "#", "/*", "*")):
            break  # code: includes past this point are not the file's top includes
    new = "".join(f"#include {h}\n" for h in missing)
    if at > 0 and not lines[at - 1].endswith("\n"):
        new = "\n" + new
    return "".join(lines[:at]) + new + "".join(lines[at:])


def splice_kernel(
    text: str,
    entry: str,
    new_code: str,
    launch: specmod.LaunchSpec | None = None,
    host_config: tuple[str, str] | None = None,
    launcher: str | None = None,
) -> str:
    """Replace ``entry``'s definition (and the __device__ helpers the new code redefines) in ``text``.

    ``new_code`` holds the kernel definition and any ``__device__`` helpers it needs. Helpers with
    the same name as existing ones replace them; new ones go right above the kernel. When ``launch``
    is given, the entry's spec block gets that launch (the structured field; nothing else changes).
    ``host_config`` (grid, block) replaces the first two ``<<<...>>>`` expressions of every launch of
    ``entry`` in the host function ``launcher`` (what the scope gate lets a host launcher's rewrite change).
    Raises :class:`ProposerError` when the code lacks the kernel.
    """
    model = parse_source(text)
    fn = model.function(entry)
    if fn is None or not fn.has_body:
        raise ProposerError(f"{entry} is not defined in the file")
    new_model = parse_source(new_code)
    new_fn = new_model.function(entry)
    if new_fn is None or not new_fn.has_body or new_fn.kind != fn.kind:
        raise ProposerError(f"the proposed code does not define {fn.kind} function {entry}")
    data = text.encode()
    code = new_code.encode()
    edits: list[tuple[int, int, bytes]] = []
    new_helpers = [f for f in new_model.functions if f.kind == "device" and f.has_body]
    helper_texts: list[bytes] = []
    for h in new_helpers:
        hspan = h.outer_span or h.span
        htext = code[hspan.start_byte : hspan.end_byte]
        old = next(
            (f for f in model.functions if f.name == h.name and f.kind == "device" and f.has_body), None
        )
        if old is not None:
            ospan = old.outer_span or old.span
            edits.append((ospan.start_byte, ospan.end_byte, htext))
        else:
            helper_texts.append(htext)
    kspan = new_fn.outer_span or new_fn.span
    ktext = code[kspan.start_byte : kspan.end_byte]
    ospan = fn.outer_span or fn.span
    prefix = b"".join(h + b"\n\n" for h in helper_texts)
    edits.append((ospan.start_byte, ospan.end_byte, prefix + ktext))
    if launch is not None:
        bound = next((b for b in specmod.specs_from_source(model)[0] if b.entry == entry and b.block), None)
        if bound is None or bound.block is None:
            raise ProposerError(f"{entry} has no spec comment block to carry a launch change")
        # Only the launch line changes; the rest of the block stays as the user wrote it.
        patched = specmod.patch_spec_block(
            text, bound.block, {"launch": launch.model_dump(exclude_defaults=True)}
        )
        pdata = patched.encode()
        start = bound.block.span.start_byte
        end = len(pdata) - (len(data) - bound.block.span.end_byte)
        edits.append((bound.block.span.start_byte, bound.block.span.end_byte, pdata[start:end]))
    if host_config is not None:
        sites = [ls for ls in model.launch_sites if ls.kernel == entry and ls.caller == launcher]
        if launcher is None or not sites or any(len(ls.config_spans) < 2 for ls in sites):
            raise ProposerError(f"no launch of {entry} in {launcher} whose grid and block could change")
        for ls in sites:
            for span, new in zip(ls.config_spans[:2], host_config, strict=True):
                edits.append((span.start_byte, span.end_byte, new.encode()))
    # A helper placed above the kernel must not sit between the spec block and the kernel, where it
    # would capture the spec: put helpers above the spec block instead.
    if helper_texts:
        bound = next((b for b in specmod.specs_from_source(model)[0] if b.entry == entry and b.block), None)
        if bound is not None and bound.block is not None and bound.block.span.end_byte <= ospan.start_byte:
            edits = [e for e in edits if e[0] != ospan.start_byte]
            edits.append((ospan.start_byte, ospan.end_byte, ktext))
            start = bound.block.span.start_byte
            existing = next((e for e in edits if e[0] == start), None)
            if existing is not None:
                edits.remove(existing)
                edits.append((start, existing[1], prefix + existing[2]))
            else:
                edits.append((start, start, prefix))
    out = data
    for start, end, rep in sorted(edits, key=lambda e: e[0], reverse=True):
        out = out[:start] + rep + out[end:]
    return out.decode()
