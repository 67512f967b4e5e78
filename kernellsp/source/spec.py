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
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernellsp.source import exprs
from kernellsp.source.model import CommentBlock, Function, SourceModel

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
            # pydantic prefixes a validator's own message ("Value error, expected ..."): the user wrote no Python.
            msg = re.sub(r"^(Value error|Assertion failed), ", "", err["msg"])
            if err["type"] == "extra_forbidden":
                msg = f"unknown field (known: {', '.join(_known_fields(err['loc']))})"
            elif err["type"] == "literal_error":
                got = err.get("input")
                allowed = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
                msg = f"expected {', '.join(allowed) or msg}, got {got!r}"
                if isinstance(got, str) and CTYPE_DTYPES.get(got.strip()):
                    msg += f" (the C type {got} is dtype {CTYPE_DTYPES[got.strip()][0]!r})"
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
    defs = sorted(
        (f for f in model.functions if f.has_body and f.kind in ("global", "host")),
        key=lambda f: (f.outer_span or f.span).start_line,
    )
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
            issues.append(
                SpecIssue(fld, f"{where}{' of ' + entry if entry else ''}: {msg}", line, entry=entry)
            )
        if spec is None:
            # Every problem at once: the fields pydantic refused are left out and the rest is checked against
            # the signature too (a bad dtype must not hide a missing count until it is fixed).
            fn = model.function(entry) if entry else None
            partial = _lenient_spec(block.body, [e[0] for e in errors])
            if partial is not None and fn is not None and entry is not None:
                removed = [e[0] for e in errors]
                pb = BoundSpec(
                    spec=partial, entry=entry, origin="comment", block=block, origin_path=model.path
                )
                for iss in validate_against(pb, fn, model):
                    # What the refused fields would have said is not news ("x needs dtype" after a bad dtype).
                    if not any(
                        iss.field == r or iss.field.startswith(r + ".") or r.startswith(iss.field + ".")
                        for r in removed
                    ):
                        issues.append(iss)
            continue
        if entry is None:
            issues.append(
                SpecIssue(
                    "entry", 'spec is not followed by a function; add entry = "NAME"', block.span.start_line
                )
            )
            continue
        bound.append(BoundSpec(spec=spec, entry=entry, origin="comment", block=block, origin_path=model.path))
    return bound, issues


def _lenient_spec(text: str, refused: list[str]) -> KernelSpec | None:
    """The spec ``text`` describes without the fields pydantic refused (``refused``: dotted paths), or ``None``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    return _lenient_dict(data, refused)


def _lenient_dict(data: dict[str, Any], refused: list[str]) -> KernelSpec | None:
    todo = list(refused)
    for _ in range(8):
        for loc in todo:
            parts = [p for p in loc.split(".") if p]
            node: Any = data
            for part in parts[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
                if node is None:
                    break
            if isinstance(node, dict) and parts:
                node.pop(parts[-1], None)
        try:
            return KernelSpec.model_validate(data)
        except ValidationError as exc:
            todo = [
                ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-after"))
                for e in exc.errors()
            ]
            todo = [re.sub(r"\.(str|int|float|list\[.*?\])$", "", t) for t in todo]
    return None


_TOML_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")


def _toml_key_path(raw: str) -> list[str]:
    """``kernels."my kernel".args`` → ``["kernels", "my kernel", "args"]``."""
    return [
        m.group(1) or m.group(2) or m.group(3)
        for m in re.finditer(r'\s*(?:"([^"]*)"|\'([^\']*)\'|([^.\s"\']+))\s*(?:\.|$)', raw)
    ]


def spec_tables(text: str, prefix: tuple[str, ...] = ("kernels",)) -> dict[str, CommentBlock]:
    """The ``[kernels.NAME]`` tables (with their ``[kernels.NAME.args]`` sub-tables) of a TOML text, or the
    ``NAME = {...}`` lines of a ``[kernels]`` table, as blocks whose lines are the TOML file's lines."""
    from kernellsp.source.model import Span

    lines = text.split("\n")
    rows: dict[str, list[int]] = {}
    current: str | None = None
    in_parent = False
    for i, ln in enumerate(lines):
        m = _TOML_HEADER.match(ln)
        if m and not ln.lstrip().startswith("[["):
            path = tuple(_toml_key_path(m.group(1)))
            in_parent = path == prefix
            current = path[len(prefix)] if path[: len(prefix)] == prefix and len(path) > len(prefix) else None
            if current is not None:
                rows.setdefault(current, []).append(i)
            continue
        if current is not None:
            rows[current].append(i)
        elif in_parent:
            k = re.match(r'^\s*(?:"([^"]+)"|([\w-]+))\s*=', ln)
            if k:
                rows.setdefault(k.group(1) or k.group(2), []).append(i)
    out = {}
    for entry, nums in rows.items():
        out[entry] = CommentBlock(
            "\n".join(lines[i] for i in nums), nums, Span(nums[0], 0, nums[-1], len(lines[nums[-1]])), "toml"
        )
    return out


def workspace_tables(path: str | Path) -> dict[str, CommentBlock]:
    """:func:`spec_tables` of a workspace spec file (kernellsp.toml or pyproject.toml); empty when unreadable."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return {}
    return _workspace_tables(str(p), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=16)
def _workspace_tables(path: str, _mtime: int, _size: int) -> dict[str, CommentBlock]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    prefix = ("tool", "kernellsp", "kernels") if Path(path).name == "pyproject.toml" else ("kernels",)
    return spec_tables(text, prefix)


def load_workspace_specs(root: Path) -> tuple[dict[str, KernelSpec], list[SpecIssue], str | None]:
    """Specs from ``kernellsp.toml`` (``[kernels.NAME]``) or ``[tool.kernellsp.kernels.NAME]``.

    Returns the specs by entry name, issues (each on its line of that file: ``SpecIssue.path``) and the
    file path they came from.
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
            m = re.search(r"at line (\d+)", str(exc))
            return (
                {},
                [SpecIssue("toml", f"not valid TOML: {exc}", int(m.group(1)) - 1 if m else 0, path=str(p))],
                str(p),
            )
        table = getter(data)
        if not table:
            continue
        tables = workspace_tables(p)
        specs: dict[str, KernelSpec] = {}
        issues: list[SpecIssue] = []
        for entry, body in table.items():
            block = tables.get(entry)
            if not isinstance(body, dict):
                issues.append(
                    SpecIssue(
                        f"kernels.{entry}",
                        f"kernels.{entry} must be a table",
                        block.span.start_line if block else 0,
                        path=str(p),
                        entry=entry,
                    )
                )
                continue
            body = dict(body)
            body.pop("file", None)
            spec, errors = spec_from_dict(body)
            for fld, msg, _ in errors:
                issues.append(
                    SpecIssue(
                        fld,
                        f"kernels.{entry}.{fld}: {msg}",
                        _line_of(block, fld) if block else 0,
                        path=str(p),
                        entry=entry,
                    )
                )
            if spec is not None:
                spec.entry = entry
                specs[entry] = spec
        return specs, issues, str(p)
    return {}, [], None


_CUDA_DEF = re.compile(r'(?:__global__|extern\s+"C")[^;{}()]*?\b([A-Za-z_]\w*)\s*\(')


def unknown_workspace_entries(
    root: Path, origin: str | None, specs: dict[str, KernelSpec], max_files: int = 4000
) -> list[SpecIssue]:
    """A ``[kernels.NAME]`` table whose NAME no CUDA file of the workspace defines (a mistyped kernel name is
    otherwise ignored in silence), with the nearest kernel names as suggestions; a ``file = "..."`` it names
    must exist and define NAME."""
    import difflib
    import os

    if origin is None:
        return []
    tables = workspace_tables(origin)
    names = set(specs) | set(tables)
    if not names:
        return []
    texts: dict[Path, str] = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [
            d
            for d in dirs
            if not d.startswith(".") and d not in ("node_modules", "__pycache__", "build", "dist")
        ]
        for f in files:
            if f.endswith((".cu", ".cuh")) and len(texts) < max_files:
                fp = Path(dirpath) / f
                try:
                    if fp.stat().st_size <= 8 * 1024 * 1024:
                        texts[fp] = fp.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
    defined = {m.group(1) for t in texts.values() for m in _CUDA_DEF.finditer(t)}
    out: list[SpecIssue] = []
    raw = _raw_workspace_tables(origin)
    for name in sorted(names):
        block = tables.get(name)
        line = block.span.start_line if block else 0
        body = raw.get(name)
        file = body.get("file") if isinstance(body, dict) else None
        if isinstance(file, str):
            fp = (root / file).resolve()
            if not fp.is_file():
                out.append(
                    SpecIssue(
                        "file",
                        f"kernels.{name}.file: no such file {file!r} (relative to {root})",
                        _line_of(block, "file") if block else line,
                        path=origin,
                        entry=name,
                    )
                )
                continue
            text = texts.get(fp)
            if text is None:
                try:
                    text = fp.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
            if not re.search(rf"\b{re.escape(name)}\s*\(", text):
                out.append(
                    SpecIssue(
                        "file",
                        f"kernels.{name}: {file} defines no function named {name}",
                        line,
                        path=origin,
                        entry=name,
                    )
                )
            continue
        if any(re.search(rf"\b{re.escape(name)}\s*[(<]", t) for t in texts.values()):
            continue
        close = difflib.get_close_matches(name, sorted(defined), n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        out.append(
            SpecIssue(
                "kernels",
                f"kernels.{name}: no kernel or host launcher named {name} in the CUDA files "
                f"under {root}, so this spec is never used{hint}",
                line,
                path=origin,
                entry=name,
            )
        )
    return out


def partial_workspace_issues(origin: str, entry: str, model: SourceModel) -> list[SpecIssue]:
    """For a workspace spec pydantic refused: the signature check of the rest of it (so every problem shows at
    once), without what the refused fields would have said."""
    body = _raw_workspace_tables(origin).get(entry)
    fn = model.function(entry)
    if not isinstance(body, dict) or fn is None:
        return []
    body = {k: v for k, v in body.items() if k != "file"}
    _, errors = spec_from_dict(body)
    removed = [e[0] for e in errors]
    partial = _lenient_dict(body, removed) if removed else None
    if partial is None:
        return []
    pb = BoundSpec(
        spec=partial,
        entry=entry,
        origin="workspace",
        origin_path=origin,
        table=workspace_tables(origin).get(entry),
    )
    return [
        i
        for i in validate_against(pb, fn, model)
        if not any(
            i.field == r or i.field.startswith(r + ".") or r.startswith(i.field + ".") for r in removed
        )
    ]


def _raw_workspace_tables(origin: str) -> dict[str, Any]:
    p = Path(origin)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
        return {}
    table = (
        data.get("tool", {}).get("kernellsp", {}).get("kernels", {})
        if p.name == "pyproject.toml"
        else data.get("kernels", {})
    )
    return table if isinstance(table, dict) else {}


def find_workspace_root(path: Path) -> Path | None:
    """The nearest ancestor holding ``kernellsp.toml``, ``pyproject.toml`` or ``.kernellsp/``."""
    p = path.resolve()
    for d in [p if p.is_dir() else p.parent, *(p if p.is_dir() else p.parent).parents]:
        if (
            (d / "kernellsp.toml").is_file()
            or (d / ".kernellsp").is_dir()
            or (d / "pyproject.toml").is_file()
        ):
            return d
    return None


# --------------------------------------------------------------------------------------------------
# Validation against the signature


def dtype_for_ctype(base_type: str) -> tuple[str, ...] | None:
    """The spec dtypes a C element type accepts, or ``None`` for a template/unknown type."""
    t = " ".join(
        base_type.replace("const", " ").replace("volatile", " ").replace("__restrict__", " ").split()
    )
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


def validate_against(
    bound: BoundSpec, fn: Function | None, model: SourceModel | None = None
) -> list[SpecIssue]:
    """Check ``bound.spec`` against the entry's signature and evaluate every expression per shape."""
    spec = bound.spec
    out: list[SpecIssue] = []

    def add(fld: str, msg: str, severity: Literal["error", "warning"] = "error") -> None:
        out.append(
            SpecIssue(
                fld,
                f"spec field '{fld}' of {bound.entry}: {msg}",
                bound.line_of(fld),
                severity,
                path=bound.issue_path,
                entry=bound.entry,
            )
        )

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
        add(
            f"args.{n}",
            f"{n!r} is not a parameter of {fn.name}; the signature is ({', '.join(names_in_sig)})",
        )
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
                    add(
                        f"args.{name}.{req}" if req != "dtype" else f"args.{name}",
                        f"pointer argument {name!r} needs {req} "
                        + {
                            "dtype": f"(one of {', '.join(DTYPES)})",
                            "dir": "(in, out or inout)",
                            "count": "(element count, an expression over sizes)",
                        }[req],
                    )
            if arg.value is not None:
                add(f"args.{name}.value", f"{name!r} is a pointer: give dtype/dir/count, not value")
            accepted = dtype_for_ctype(p.base_type)
            if arg.dtype and accepted is not None and arg.dtype not in accepted:
                add(
                    f"args.{name}.dtype",
                    f"{name!r} is declared {p.base_type}*; expected dtype {' or '.join(accepted)}, got {arg.dtype!r}",
                )
            if arg.dir in ("out", "inout"):
                has_output = True
                if p.is_const:
                    add(
                        f"args.{name}.dir",
                        f"{name!r} is const but dir = {arg.dir!r}; a const pointer is an input",
                    )
            if arg.dist and arg.dir == "out":
                add(
                    f"args.{name}.dist",
                    f"{name!r} is an output: its contents are poisoned, not drawn from dist",
                    "warning",
                )
        elif dtype_for_ctype(p.base_type) is None and f"{p.name} ({p.base_type.strip()})" in _struct_params(
            fn, model.text if model is not None else ""
        ):
            add(
                f"args.{name}",
                f"{name!r} is a {p.base_type.strip()} passed by value: launch specs cannot describe "
                "struct arguments yet; add a host launcher that builds it from pointers and scalars, "
                "and put the spec on the launcher",
            )
        else:
            if arg.value is None:
                add(
                    f"args.{name}",
                    f"scalar argument {name!r} needs value (a number or an expression over sizes)",
                )
            if arg.dir is not None or arg.count is not None:
                add(f"args.{name}", f"{name!r} is a scalar ({p.base_type}): give value only")
    if fn.kind in ("global", "host") and not has_output and not missing and not extra:
        add("args", 'no argument has dir = "out" or "inout": there is nothing to check')

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
                        add(
                            f"args.{name}.count",
                            f"count {arg.count!r} = {c} for {label}; it must be positive",
                        )
                    width = VECTOR_WIDTH.get(p.base_type.replace("const", "").strip(), 1)
                    if c % width:
                        add(
                            f"args.{name}.count",
                            f"count {c} is not a multiple of {width} ({p.base_type} holds {width})",
                        )
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
                    add(
                        "launch.block",
                        f"block of {threads} threads exceeds {fn.name}'s __launch_bounds__({bound_threads}) "
                        f"({label}); the launch would fail",
                    )
                if any(g <= 0 for g in grid) or any(b <= 0 for b in block):
                    add("launch", f"grid {grid} and block {block} must be positive ({label})")
                if grid[0] >= 2**31 or any(g >= 65536 for g in grid[1:]):
                    add(
                        "launch.grid",
                        f"grid {grid} exceeds CUDA's limits (x < 2^31, y and z < 65536) ({label})",
                    )
                if smem < 0 or smem > 227 * 1024:
                    add("launch.smem", f"dynamic shared memory {smem} bytes is outside 0..232448 ({label})")
    if spec.reference and model is not None and model.function(spec.reference) is None:
        add("reference", f"no function named {spec.reference!r} in this file")
    return out


def _struct_params(fn: Function, source_text: str) -> list[str]:
    from kernellsp.source.draft import struct_params

    return struct_params(fn, source_text)


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

    sizes: dict[str, int | str] = {}
    args: dict[str, ArgSpec] = {}
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
    first = next(iter(sizes), None)
    if first is None:
        sizes["N"] = 1 << 20
        first = "N"
        if any(p.is_pointer for p in fn.params):
            notes.append(
                "sizes: the kernel has no integer size parameter; N is a guess for the element counts"
            )
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
    launch = None
    if fn.kind == "global":
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
    # A correctness shape of sizes that divide no block: 1000 for a 1-D extent, odd sides for a matrix.
    if len(sizes) == 1 or not multi:
        shapes = [{first: 1000}]
    else:
        shapes = [{k: (100, 77, 33, 129, 5)[i % 5] for i, k in enumerate(sizes)}]
    return KernelSpec(entry=fn.name, sizes=sizes, launch=launch, args=args, shapes=shapes), notes


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
