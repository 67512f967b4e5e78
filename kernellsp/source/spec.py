"""Launch specs: how kernellsp runs an entry (a ``__global__`` kernel or a host launcher).

A spec lives in a comment block right above its entry::

    /* kernellsp
    sizes = { N = 16777216 }
    launch = { grid = "ceil_div(N, 256)", block = 256 }
    shapes = [{ N = 1000 }]
    [args]
    x = { dtype = "f32", dir = "in", count = "N" }
    y = { dtype = "f32", dir = "out", count = "N" }
    n = { value = "N" }
    */

or in the workspace, as ``[kernels.NAME]`` tables of ``kernellsp.toml`` or
``[tool.kernellsp.kernels.NAME]`` of ``pyproject.toml``. The body is TOML; the model is pydantic;
:func:`spec_to_toml` writes it back so a code action can insert a draft. :func:`validate_against`
checks a spec against the parsed signature (count, names, pointer vs scalar, dtypes) and evaluates
every expression for every declared shape. Problems come back as :class:`SpecIssue` objects that
carry the source line of the offending field, never as exceptions.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernellsp.source import exprs
from kernellsp.source.model import CommentBlock, Function, SourceModel

DType = Literal["f16", "bf16", "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"]
DTYPES: tuple[str, ...] = ("f16", "bf16", "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")
DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2,
               "i32": 4, "u32": 4, "i64": 8, "u64": 8}  # fmt: skip
FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")

#: C/CUDA element types and the spec dtypes they accept. Vector types hold several scalars: the
#: spec counts scalars, the harness reinterprets (``float4*`` with ``count = "N"`` holds N floats).
CTYPE_DTYPES: dict[str, tuple[str, ...]] = {
    "float": ("f32",), "float2": ("f32",), "float4": ("f32",),
    "double": ("f64",), "double2": ("f64",),
    "__half": ("f16",), "half": ("f16",), "__half2": ("f16",), "half2": ("f16",),
    "__nv_bfloat16": ("bf16",), "nv_bfloat16": ("bf16",), "__nv_bfloat162": ("bf16",),
    "int": ("i32",), "int32_t": ("i32",), "signed": ("i32",), "int4": ("i32",), "int2": ("i32",),
    "unsigned": ("u32",), "unsigned int": ("u32",), "uint32_t": ("u32",), "uint": ("u32",),
    "long long": ("i64",), "long long int": ("i64",), "int64_t": ("i64",), "long": ("i64",),
    "unsigned long long": ("u64",), "uint64_t": ("u64",), "size_t": ("u64",), "unsigned long": ("u64",),
    "short": ("i16",), "int16_t": ("i16",), "unsigned short": ("u16",), "uint16_t": ("u16",),
    "char": ("i8",), "signed char": ("i8",), "int8_t": ("i8",),
    "unsigned char": ("u8",), "uint8_t": ("u8",), "uchar": ("u8",),
}  # fmt: skip
VECTOR_WIDTH = {"float2": 2, "float4": 4, "double2": 2, "int2": 2, "int4": 4, "__half2": 2, "half2": 2,
                "__nv_bfloat162": 2}  # fmt: skip

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
                "expected uniform(lo, hi), normal(mean, std), randint(lo, hi), ones(), arange() or choice(a, b, ...)"
            )
        return v

    @property
    def is_buffer(self) -> bool:
        return self.dtype is not None and self.value is None and (self.count is not None or self.dir is not None)


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
    """A problem in a spec: the field path, what is wrong, and the 0-based source line."""

    field: str
    message: str
    line: int
    severity: Literal["error", "warning"] = "error"


@dataclass
class BoundSpec:
    """A spec together with where it came from."""

    spec: KernelSpec
    entry: str
    origin: Literal["comment", "workspace"]
    block: CommentBlock | None = None
    origin_path: str | None = None
    issues: list[SpecIssue] | None = None

    def line_of(self, field: str) -> int:
        return _line_of(self.block, field) if self.block else 0


# --------------------------------------------------------------------------------------------------
# Parsing


def parse_spec_text(text: str) -> tuple[KernelSpec | None, list[tuple[str, str, int | None]]]:
    """Parse a spec body. Returns the model (or ``None``) and ``(field, message, body_line)`` errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"line (\d+)", msg)
        line = int(m.group(1)) - 1 if m else None
        return None, [("toml", f"not valid TOML: {msg}", line)]
    return spec_from_dict(data)


def spec_from_dict(data: dict[str, Any]) -> tuple[KernelSpec | None, list[tuple[str, str, int | None]]]:
    """Validate a dict (from TOML) into a :class:`KernelSpec`."""
    try:
        return KernelSpec.model_validate(data), []
    except ValidationError as exc:
        errors: list[tuple[str, str, int | None]] = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-after"))
            loc = re.sub(r"\.(str|int|float|list\[.*?\])$", "", loc)
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = f"unknown field (known: {', '.join(_known_fields(err['loc']))})"
            elif err["type"] == "literal_error":
                msg = f"{msg}, got {err.get('input')!r}"
            errors.append((loc, msg, None))
        # Pydantic reports union members separately; keep one message per field.
        seen: set[str] = set()
        uniq = []
        for e in errors:
            if e[0] not in seen:
                seen.add(e[0])
                uniq.append(e)
        return None, uniq


def _known_fields(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = KernelSpec
    if len(loc) >= 2 and loc[0] == "args":
        model = ArgSpec
    elif loc and loc[0] == "launch":
        model = LaunchSpec
    elif loc and loc[0] == "tolerance":
        model = Tolerance
    return sorted(model.model_fields)


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


def entry_spec(model: SourceModel, entry: str) -> BoundSpec | None:
    """The launch spec of ``entry`` that builds and runs it: the first one bound to it in the file.

    Every consumer (the scope gate, verification, the rewrite loop) must pick the same one; the scope
    gate refuses a candidate that binds more specs to an entry than the baseline does.
    """
    return next((b for b in specs_from_source(model)[0] if b.entry == entry), None)


def specs_from_source(model: SourceModel) -> tuple[list[BoundSpec], list[SpecIssue]]:
    """Find every spec comment block and bind it to its entry (``entry =`` or the next function)."""
    bound: list[BoundSpec] = []
    issues: list[SpecIssue] = []
    # Entries are kernels or host launchers: a spec never binds to a __device__ helper in between.
    defs = sorted((f for f in model.functions if f.has_body and f.kind in ("global", "host")),
                  key=lambda f: (f.outer_span or f.span).start_line)  # fmt: skip
    for block in model.spec_blocks:
        spec, errors = parse_spec_text(block.body)
        entry: str | None = spec.entry if spec else None
        if entry is None:
            nxt = next((f for f in defs if (f.outer_span or f.span).start_line > block.span.end_line), None)
            entry = nxt.name if nxt else None
        for fld, msg, body_line in errors:
            if body_line is not None and body_line < len(block.body_lines):
                line = block.body_lines[body_line]
            else:
                line = _line_of(block, fld)
            where = f"spec field '{fld}'" if fld != "toml" else "spec"
            issues.append(SpecIssue(fld, f"{where}{' of ' + entry if entry else ''}: {msg}", line))
        if spec is None:
            continue
        if entry is None:
            issues.append(SpecIssue("entry", "spec is not followed by a function; add entry = \"NAME\"",
                                    block.span.start_line))
            continue
        bound.append(BoundSpec(spec=spec, entry=entry, origin="comment", block=block, origin_path=model.path))
    return bound, issues


def load_workspace_specs(root: Path) -> tuple[dict[str, KernelSpec], list[SpecIssue], str | None]:
    """Specs from ``kernellsp.toml`` (``[kernels.NAME]``) or ``[tool.kernellsp.kernels.NAME]``.

    Returns the specs by entry name, issues (line 0 of the file) and the file path they came from.
    """
    for name, getter in (
        ("kernellsp.toml", lambda d: d.get("kernels", {})),
        ("pyproject.toml", lambda d: d.get("tool", {}).get("kernellsp", {}).get("kernels", {})),
    ):
        p = root / name
        if not p.is_file():
            continue
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
            return {}, [SpecIssue("toml", f"{p}: not valid TOML: {exc}", 0)], str(p)
        table = getter(data)
        if not table:
            continue
        specs: dict[str, KernelSpec] = {}
        issues: list[SpecIssue] = []
        for entry, body in table.items():
            if not isinstance(body, dict):
                issues.append(SpecIssue(f"kernels.{entry}", f"{p}: kernels.{entry} must be a table", 0))
                continue
            body = dict(body)
            body.pop("file", None)
            spec, errors = spec_from_dict(body)
            for fld, msg, _ in errors:
                issues.append(SpecIssue(fld, f"{p}: kernels.{entry}.{fld}: {msg}", 0))
            if spec is not None:
                spec.entry = entry
                specs[entry] = spec
        return specs, issues, str(p)
    return {}, [], None


def find_workspace_root(path: Path) -> Path | None:
    """The nearest ancestor holding ``kernellsp.toml``, ``pyproject.toml`` or ``.kernellsp/``."""
    p = path.resolve()
    for d in [p if p.is_dir() else p.parent, *(p if p.is_dir() else p.parent).parents]:
        if (d / "kernellsp.toml").is_file() or (d / ".kernellsp").is_dir() or (d / "pyproject.toml").is_file():
            return d
    return None


# --------------------------------------------------------------------------------------------------
# Validation against the signature


def dtype_for_ctype(base_type: str) -> tuple[str, ...] | None:
    """The spec dtypes a C element type accepts, or ``None`` for a template/unknown type."""
    t = " ".join(base_type.replace("const", " ").replace("volatile", " ").replace("__restrict__", " ").split())
    # Other spellings of the same types: std::int64_t, short int, long int, unsigned long int, signed int.
    t = re.sub(r"^std::", "", t)
    t = re.sub(r"\b(short|long|signed|unsigned) int$", r"\1", t)
    return CTYPE_DTYPES.get(t)


def _launch_bounds_threads(fn: Function, names: dict[str, Any]) -> int | None:
    """The maximum threads per block of ``fn``'s ``__launch_bounds__``, when it evaluates (literal or sizes)."""
    if not fn.launch_bounds:
        return None
    try:
        return exprs.evaluate_int(fn.launch_bounds.split(",")[0].strip(), names)
    except exprs.ExprError:
        return None  # a macro or template parameter: nvcc checks it


def validate_against(bound: BoundSpec, fn: Function | None, model: SourceModel | None = None) -> list[SpecIssue]:
    """Check ``bound.spec`` against the entry's signature and evaluate every expression per shape."""
    spec = bound.spec
    out: list[SpecIssue] = []

    def add(fld: str, msg: str, severity: Literal["error", "warning"] = "error") -> None:
        out.append(SpecIssue(fld, f"spec field '{fld}' of {bound.entry}: {msg}", bound.line_of(fld), severity))

    if fn is None:
        add("entry", f"no function named {bound.entry!r} in this file")
        return out
    params = {p.name: p for p in fn.params}
    names_in_sig = [p.name for p in fn.params]
    missing = [n for n in names_in_sig if n not in spec.args]
    extra = [n for n in spec.args if n not in params]
    if missing:
        add("args", f"missing argument(s) {', '.join(missing)}; the signature is ({', '.join(names_in_sig)})")
    for n in extra:
        add(f"args.{n}", f"{n!r} is not a parameter of {fn.name}; the signature is ({', '.join(names_in_sig)})")
    if list(spec.args) != [n for n in names_in_sig if n in spec.args] and not missing and not extra:
        add("args", f"arguments must be listed in signature order ({', '.join(names_in_sig)})", "warning")

    if fn.kind == "global":
        if spec.launch is None:
            add("launch", f"{fn.name} is a __global__ kernel: give launch = {{ grid = ..., block = ... }}")
    elif fn.kind == "host":
        if spec.launch is not None:
            add("launch", f"{fn.name} is a host launcher: it launches its own kernels, so remove launch")
    else:
        add("entry", f"{fn.name} is a __device__ function; an entry must be __global__ or a host launcher")

    has_output = False
    for name, arg in spec.args.items():
        p = params.get(name)
        if p is None:
            continue
        if p.is_pointer:
            for req in ("dtype", "dir", "count"):
                if getattr(arg, req) is None:
                    add(f"args.{name}.{req}" if req != "dtype" else f"args.{name}",
                        f"pointer argument {name!r} needs {req} "
                        + {"dtype": f"(one of {', '.join(DTYPES)})", "dir": "(in, out or inout)",
                           "count": "(element count, an expression over sizes)"}[req])  # fmt: skip
            if arg.value is not None:
                add(f"args.{name}.value", f"{name!r} is a pointer: give dtype/dir/count, not value")
            accepted = dtype_for_ctype(p.base_type)
            if arg.dtype and accepted is not None and arg.dtype not in accepted:
                add(f"args.{name}.dtype", f"{name!r} is declared {p.base_type}*; expected dtype {' or '.join(accepted)}, got {arg.dtype!r}")
            if arg.dir in ("out", "inout"):
                has_output = True
                if p.is_const:
                    add(f"args.{name}.dir", f"{name!r} is const but dir = {arg.dir!r}; a const pointer is an input")
            if arg.dist and arg.dir == "out":
                add(f"args.{name}.dist", f"{name!r} is an output: its contents are poisoned, not drawn from dist", "warning")
        else:
            if arg.value is None:
                add(f"args.{name}", f"scalar argument {name!r} needs value (a number or an expression over sizes)")
            if arg.dir is not None or arg.count is not None:
                add(f"args.{name}", f"{name!r} is a scalar ({p.base_type}): give value only")
    if fn.kind in ("global", "host") and not has_output and not missing and not extra:
        add("args", "no argument has dir = \"out\" or \"inout\": there is nothing to check")

    # Evaluate sizes, counts and launch for every shape.
    for si, shape in enumerate(spec.all_shapes()):
        label = "sizes" if si == 0 else f"shapes.{si - 1}"
        try:
            names = spec.resolved_sizes(shape)
        except exprs.ExprError as exc:
            add(label, str(exc))
            continue
        for k, v in names.items():
            if isinstance(v, int | float) and not isinstance(v, bool) and v < 0:
                add(label, f"{k} = {v} is negative")
        for unknown in set(shape) - set(spec.sizes):
            add(label, f"{unknown!r} is not one of sizes ({', '.join(spec.sizes) or 'none'})")
        for name, arg in spec.args.items():
            p = params.get(name)
            if p is None:
                continue
            if p.is_pointer and arg.count is not None:
                try:
                    c = exprs.evaluate_int(arg.count, names)
                    if c <= 0:
                        add(f"args.{name}.count", f"count {arg.count!r} = {c} for {label}; it must be positive")
                    width = VECTOR_WIDTH.get(p.base_type.replace("const", "").strip(), 1)
                    if c % width:
                        add(f"args.{name}.count", f"count {c} is not a multiple of {width} ({p.base_type} holds {width})")
                except exprs.ExprError as exc:
                    add(f"args.{name}.count", f"{exc} ({label})")
            if not p.is_pointer and isinstance(arg.value, str):
                try:
                    exprs.evaluate(arg.value, names)
                except exprs.ExprError as exc:
                    add(f"args.{name}.value", f"{exc} ({label})")
        if spec.launch is not None and fn.kind == "global":
            dims = launch_dims(spec.launch, names)
            if isinstance(dims, str):
                add("launch", f"{dims} ({label})")
            else:
                grid, block, smem = dims
                threads = math.prod(block)
                if threads > 1024:
                    add("launch.block", f"block of {threads} threads exceeds the 1024-thread limit ({label})")
                bound_threads = _launch_bounds_threads(fn, names)
                if bound_threads is not None and threads > bound_threads:
                    add("launch.block", f"block of {threads} threads exceeds {fn.name}'s __launch_bounds__({bound_threads}) "
                                        f"({label}); the launch would fail")  # fmt: skip
                if any(g <= 0 for g in grid) or any(b <= 0 for b in block):
                    add("launch", f"grid {grid} and block {block} must be positive ({label})")
                if grid[0] >= 2**31 or any(g >= 65536 for g in grid[1:]):
                    add("launch.grid", f"grid {grid} exceeds CUDA's limits (x < 2^31, y and z < 65536) ({label})")
                if smem < 0 or smem > 227 * 1024:
                    add("launch.smem", f"dynamic shared memory {smem} bytes is outside 0..232448 ({label})")
    if spec.reference and model is not None and model.function(spec.reference) is None:
        add("reference", f"no function named {spec.reference!r} in this file")
    return out


def launch_dims(launch: LaunchSpec, names: dict[str, exprs.Value]) -> tuple[list[int], list[int], int] | str:
    """Evaluate grid/block/smem to integer triples, or return an error string."""
    try:
        grid = [exprs.evaluate_int(d, names) for d in launch.grid_dims()]
        block = [exprs.evaluate_int(d, names) for d in launch.block_dims()]
        smem = exprs.evaluate_int(launch.smem, names)
    except exprs.ExprError as exc:
        return str(exc)
    if not (1 <= len(grid) <= 3 and 1 <= len(block) <= 3):
        return "grid and block take 1 to 3 dimensions"
    return (grid + [1] * (3 - len(grid)), block + [1] * (3 - len(block)), smem)


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
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }" if v else "{}"
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


def format_comment_block(spec: KernelSpec, indent: str = "") -> str:
    """A ``/* kernellsp ... */`` block holding ``spec``, ready to insert above its entry."""
    body = spec_to_toml(spec)
    return indent + "/* kernellsp\n" + "".join(indent + ln + "\n" for ln in body.rstrip("\n").split("\n")) + indent + "*/\n"


def draft_spec(fn: Function, model: SourceModel) -> KernelSpec:
    """A runnable first draft for ``fn`` derived from its signature and its launch sites.

    Scalars named like sizes (``n``, ``N``, ``rows``) become sizes; every pointer gets a dtype from
    its C type, ``dir = "in"`` when const and ``"inout"`` otherwise (the conservative choice: the
    harness then checks the whole buffer), and a count of the first size. The launch comes from the
    first launch site when its expressions only use the kernel's own scalar parameters, otherwise a
    1-D grid over the first size with 256 threads.
    """
    sizes: dict[str, int | str] = {}
    args: dict[str, ArgSpec] = {}
    scalars = [p for p in fn.params if not p.is_pointer]
    size_names = []
    for p in scalars:
        if dtype_for_ctype(p.base_type) and dtype_for_ctype(p.base_type)[0].startswith(("i", "u")):  # type: ignore[index]
            size_names.append(p.name)
    for n in size_names:
        sizes[n.upper() if n.upper() not in sizes else n] = 1 << 20
    first = next(iter(sizes), None)
    if first is None:
        sizes["N"] = 1 << 20
        first = "N"
    upper = {n: n.upper() for n in size_names}
    for p in fn.params:
        if p.is_pointer:
            accepted = dtype_for_ctype(p.base_type) or ("f32",)
            args[p.name] = ArgSpec(dtype=accepted[0], dir="in" if p.is_const else "inout", count=first)  # type: ignore[arg-type]
        elif p.name in upper:
            args[p.name] = ArgSpec(value=upper[p.name])
        else:
            accepted = dtype_for_ctype(p.base_type) or ("f32",)
            args[p.name] = ArgSpec(value=1.0 if accepted[0].startswith(("f", "bf")) else 1)
    launch = None
    if fn.kind == "global":
        launch = LaunchSpec(grid=f"ceil_div({first}, 256)", block=256)
        for site in model.launches_of(fn.name):
            if len(site.config) >= 2 and _only_literals(site.config[:2], set(upper.values()) | set(upper)):
                g, b = (_upper_names(c, upper) for c in site.config[:2])
                launch = LaunchSpec(grid=g, block=b)
                break
    return KernelSpec(entry=fn.name, sizes=sizes, launch=launch, args=args, shapes=[{first: 1000}])


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
            prefix = src[: len(src) - len(src.lstrip())] if block.style == "block" else src[: src.find("//") + 3]
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
