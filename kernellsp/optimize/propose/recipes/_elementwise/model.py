"""What the element-loop analysis finds: the element loop and its streams."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from kernellsp.optimize.propose.recipes.base import RecipeContext
from kernellsp.source.ir import Access, Atomic, Poly

if TYPE_CHECKING:
    import tree_sitter


Form = Literal["guard", "grid-stride", "2d", "3d", "chunk"]
_EXIT_TYPES = ("return_statement", "break_statement", "continue_statement", "goto_statement")


@dataclass
class Stream:
    """A pointer accessed at ``stride*e + offset`` for element ``e``."""

    param: str
    ctype: str
    stride: int
    reads: set[int] = field(default_factory=set)
    writes: set[int] = field(default_factory=set)
    #: Some write happens only on some paths of the body: the old values are loaded first.
    conditional_write: bool = False
    accesses: list[tuple[Access, int]] = field(default_factory=list)

    @property
    def loaded(self) -> bool:
        return bool(self.reads) or self.conditional_write

    def slot(self, offset: int) -> str:
        return f"kl_{self.param}" + (f"_{offset}" if self.stride > 1 else "")


@dataclass
class ElementLoop:
    """What :func:`analyse` found; :func:`generate` turns it into code."""

    form: Form
    body: list[tree_sitter.Node]
    prelude: list[tree_sitter.Node]
    element: Poly
    bound: Poly
    bound_text: str
    streams: list[Stream]
    #: Declarations the lambda starts with: the user's index variables in terms of ``kl_i``.
    redefine: list[str]
    replace: dict[int, str]
    #: Chunk form: the chunk size (elements per thread) as C text and polynomial.
    chunk: Poly | None = None
    chunk_text: str | None = None
    #: Names the user gave the element index (for --explain).
    index_names: list[str] = field(default_factory=list)
    #: Reductions: the atomics that combine each element's value into one address.
    atomics: list[Atomic] = field(default_factory=list)

    def binding(self, ctx: RecipeContext) -> dict[str, str]:
        ins = [s.param for s in self.streams if s.reads]
        outs = [s.param for s in self.streams if s.writes]
        dts = {s.param: (ctx.dtype(s.param) or s.ctype) for s in self.streams}
        out = {
            "form": self.form,
            "index": ", ".join(self.index_names) or str(self.element),
            "bound": self.bound_text,
            "inputs": ", ".join(f"{p} ({dts[p]})" for p in ins) or "none",
            "outputs": ", ".join(f"{p} ({dts[p]})" for p in outs),
        }
        strided = [f"{s.param} x{s.stride}" for s in self.streams if s.stride > 1]
        if strided:
            out["interleaved"] = ", ".join(strided)
        if self.chunk_text:
            out["chunk"] = self.chunk_text
        out["launch"] = "kept (host launcher)" if ctx.host_launched else "spec launch field"
        return out
