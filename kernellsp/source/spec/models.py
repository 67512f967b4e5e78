"""The spec models (pydantic) with the dtype tables they check against, and the issues a spec can have."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kernellsp.source import exprs
from kernellsp.source.model import CommentBlock

DType = Literal["f16", "bf16", "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"]
DTYPES: tuple[str, ...] = ("f16", "bf16", "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")
DTYPE_BYTES = {
    "f16": 2,
    "bf16": 2,
    "f32": 4,
    "f64": 8,
    "i8": 1,
    "u8": 1,
    "i16": 2,
    "u16": 2,
    "i32": 4,
    "u32": 4,
    "i64": 8,
    "u64": 8,
}
FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")

#: The C type a buffer of each spec dtype holds (what a kernel declares its elements with).
DTYPE_CTYPE = {
    "f16": "__half",
    "bf16": "__nv_bfloat16",
    "f32": "float",
    "f64": "double",
    "i8": "signed char",
    "u8": "unsigned char",
    "i16": "short",
    "u16": "unsigned short",
    "i32": "int",
    "u32": "unsigned int",
    "i64": "long long",
    "u64": "unsigned long long",
}

#: C/CUDA element types and the spec dtypes they accept. Vector types hold several scalars: the
#: spec counts scalars, the harness reinterprets (``float4*`` with ``count = "N"`` holds N floats).
CTYPE_DTYPES: dict[str, tuple[str, ...]] = {
    "float": ("f32",),
    "float2": ("f32",),
    "float4": ("f32",),
    "double": ("f64",),
    "double2": ("f64",),
    "__half": ("f16",),
    "half": ("f16",),
    "__half2": ("f16",),
    "half2": ("f16",),
    "__nv_bfloat16": ("bf16",),
    "nv_bfloat16": ("bf16",),
    "__nv_bfloat162": ("bf16",),
    "int": ("i32",),
    "int32_t": ("i32",),
    "signed": ("i32",),
    "int4": ("i32",),
    "int2": ("i32",),
    "unsigned": ("u32",),
    "unsigned int": ("u32",),
    "uint32_t": ("u32",),
    "uint": ("u32",),
    "long long": ("i64",),
    "long long int": ("i64",),
    "int64_t": ("i64",),
    "long": ("i64",),
    "unsigned long long": ("u64",),
    "uint64_t": ("u64",),
    "size_t": ("u64",),
    "unsigned long": ("u64",),
    "short": ("i16",),
    "int16_t": ("i16",),
    "unsigned short": ("u16",),
    "uint16_t": ("u16",),
    "char": ("i8",),
    "signed char": ("i8",),
    "int8_t": ("i8",),
    "unsigned char": ("u8",),
    "uint8_t": ("u8",),
    "uchar": ("u8",),
}
VECTOR_WIDTH = {
    "float2": 2,
    "float4": 4,
    "double2": 2,
    "int2": 2,
    "int4": 4,
    "__half2": 2,
    "half2": 2,
    "__nv_bfloat162": 2,
}

_DIST_RE = re.compile(r"^\s*(uniform|normal|randint|ones|arange|choice)\s*\((.*)\)\s*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ArgSpec(_Strict):
    """One argument of the entry: a buffer (``dtype``, ``dir``, ``count``) or a scalar (``value``)."""

    dtype: DType | None = None
    dir: Literal["in", "out", "inout"] | None = None
    count: str | int | None = None
    dist: str | None = None
    value: str | int | float | None = None

    @field_validator("dist")
    @classmethod
    def _check_dist(cls, v: str | None) -> str | None:
        if v is None:
            return v
        m = _DIST_RE.match(v)
        if not m:
            raise ValueError(
                "expected uniform(lo, hi), normal(mean, std), randint(lo, hi), ones(), arange() or choice(a, b, ...), "
                f"got {v!r}"
            )
        return v

    @property
    def is_buffer(self) -> bool:
        return (
            self.dtype is not None and self.value is None and (self.count is not None or self.dir is not None)
        )


Dim = str | int


class LaunchSpec(_Strict):
    """Grid, block and dynamic shared memory of a ``__global__`` entry; each dim an expression."""

    grid: Dim | list[Dim]
    block: Dim | list[Dim]
    smem: Dim = 0

    def grid_dims(self) -> list[Dim]:
        return self.grid if isinstance(self.grid, list) else [self.grid]

    def block_dims(self) -> list[Dim]:
        return self.block if isinstance(self.block, list) else [self.block]


class Tolerance(_Strict):
    """Comparison tolerances: element-wise ``|got - want| <= atol + rtol * |want|`` and a norm bound."""

    rtol: float | None = Field(default=None, ge=0)
    atol: float | None = Field(default=None, ge=0)
    norm_rtol: float | None = Field(default=None, ge=0)


class KernelSpec(_Strict):
    """A complete launch spec for one entry."""

    entry: str | None = None
    sizes: dict[str, int | str] = Field(default_factory=dict)
    launch: LaunchSpec | None = None
    args: dict[str, ArgSpec] = Field(default_factory=dict)
    tolerance: Tolerance | None = None
    shapes: list[dict[str, int]] = Field(default_factory=list)
    tunables: dict[str, list[int | str]] = Field(default_factory=dict)
    reference: str | None = None
    seeds: int | None = Field(default=None, ge=1, le=64)
    #: Extra nvcc flags the file needs to build (``-DUSE_X``); never flags that change semantics.
    flags: list[str] = Field(default_factory=list)

    def resolved_sizes(self, shape: dict[str, int] | None = None) -> dict[str, exprs.Value]:
        """Sizes with one shape's overrides and tunable defaults, each expression evaluated in order."""
        names: dict[str, exprs.Value] = {}
        for k, vals in self.tunables.items():
            if vals:
                names[k] = vals[0]
        raw: dict[str, int | str] = dict(self.sizes)
        if shape:
            raw.update(shape)
        for k, v in raw.items():
            names[k] = exprs.evaluate(v, names) if isinstance(v, str) else v
        return names

    def all_shapes(self) -> list[dict[str, int]]:
        """The main shape (``{}``) followed by the correctness-only shapes."""
        return [{}, *self.shapes]


@dataclass
class SpecIssue:
    """A problem in a spec: the field path, what is wrong, and the 0-based source line.

    ``path`` is the file the line is in when it is not the checked source (a workspace spec's
    kernellsp.toml or pyproject.toml); ``entry`` is the entry the spec is for, when known.
    """

    field: str
    message: str
    line: int
    severity: Literal["error", "warning"] = "error"
    path: str | None = None
    entry: str | None = None


@dataclass
class BoundSpec:
    """A spec together with where it came from."""

    spec: KernelSpec
    entry: str
    origin: Literal["comment", "workspace"]
    block: CommentBlock | None = None
    origin_path: str | None = None
    issues: list[SpecIssue] | None = None
    #: A workspace spec's ``[kernels.NAME]`` table (lines of ``origin_path``), so its issues land on the TOML line.
    table: CommentBlock | None = None

    def line_of(self, field: str) -> int:
        """The line of ``field`` in the spec's own text: the comment block's (this file) or the table's (the TOML)."""
        return _line_of(self.block or self.table, field) if (self.block or self.table) else 0

    @property
    def issue_path(self) -> str | None:
        """Where this spec's issues are: ``None`` for the checked file, else the workspace's TOML file."""
        return self.origin_path if self.origin == "workspace" else None


def _line_of(block: CommentBlock | None, field: str) -> int:
    """The source line of ``field`` (dotted path) in a comment block; the block's first line if unknown."""
    if block is None:
        return 0
    parts = [p for p in field.split(".") if p and not p.isdigit()]
    lines = block.body.split("\n")
    best: int | None = None
    start = 0
    for want in parts:
        pat = re.compile(rf"(^|[\s{{,\[.]){re.escape(want)}\s*=|^\s*\[(\w+\.)*{re.escape(want)}\]")
        end = len(lines)
        if best is not None and 0 < lines[best].count("{") == lines[best].count("}"):
            # The parent is an inline table closed on its own line: a sub-field it lacks is not on
            # a later line (`x = { dtype = "f32" }` missing count must not land on `y = {..count..}`).
            end = best + 1
        elif best is not None and re.match(r"^\s*\[", lines[best]):
            # The parent is a [table] header: its sub-fields end at the next header.
            end = next((i for i in range(best + 1, len(lines)) if re.match(r"^\s*\[", lines[i])), len(lines))
        hit = next((i for i in range(start, end) if pat.search(lines[i])), None)
        if hit is not None:
            best = start = hit
    if best is None or best >= len(block.body_lines):
        return block.span.start_line
    return block.body_lines[best]
