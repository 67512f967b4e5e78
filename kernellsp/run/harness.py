"""The harness: a C++/CUDA host program that kernellsp generates to run one entry.

Design principle 2 ("the harness is ours"): the code under test never owns ``main``, never times
itself and never reports a verdict. For one entry (a ``__global__`` kernel or a host launcher) and
its launch spec, :func:`plan_harness` evaluates everything in Python (sizes, element counts,
scalar values, input distributions, grid/block/smem, for every declared shape);
:func:`generate_harness` writes a self-contained ``.cu`` file that ``#include``s the user's file by
absolute path and bakes the plan in as constant tables; :func:`harness_compile_command` builds it
with nvcc; the program runs as ``./harness --mode check|time|profile|inputs --shape K --seed S
--out DIR`` and writes only under DIR; :func:`read_result` reads ``DIR/result.json`` and the raw
buffers without numpy.

The C++ runtime (``kernellsp/data/harness_runtime.h``) is inlined ahead of the user's file so the
user's macros cannot reach it. This module mirrors its PRNG (:func:`fill_reference`), its input
hash (:func:`fnv1a64`) and its output digest (:func:`digest_bytes`) so that every file the harness
writes can be checked from Python. The file format and the CLI are documented in docs/harness.md.
"""

from __future__ import annotations

import array
import hashlib
import json
import math
import re
import struct
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kernellsp.source import exprs
from kernellsp.source.model import Function, Param, SourceModel
from kernellsp.source.spec import (
    DTYPE_BYTES,
    FLOAT_DTYPES,
    VECTOR_WIDTH,
    BoundSpec,
    KernelSpec,
    dtype_for_ctype,
    launch_dims,
    validate_against,
)

#: The ``format`` field of every result.json this module writes or reads.
RESULT_FORMAT = "kernellsp-harness/2"

#: Structured input patterns of check mode's input sets (``SEED:PATTERN``); "spec" is the spec's distribution.
PATTERNS = ("spec", "spikes", "alternating", "ramp", "wide", "tail")

#: Exit codes of the generated program.
EXIT_OK, EXIT_BAD_ARGS, EXIT_CUDA_ERROR, EXIT_IO_ERROR = 0, 2, 3, 4

#: Name the user's ``main`` gets inside the harness translation unit.
USER_MAIN_NAME = "kernellsp_user_main_"

Status = Literal["ok", "launch_error", "runtime_error", "bad_args"]
Mode = Literal["check", "time", "profile", "inputs"]
Direction = Literal["in", "out", "inout"]
DistKind = Literal["default", "uniform", "normal", "randint", "ones", "arange", "choice"]

_RUNTIME_PATH = Path(__file__).parent.parent / "data" / "harness_runtime.h"
#: Larger than any GPU's memory; beyond it the C++ byte count (count x element size) could also wrap.
MAX_BUFFER_BYTES = 2**40
_DIST_RE = re.compile(r"^\s*(uniform|normal|randint|ones|arange|choice)\s*\((.*)\)\s*$", re.S)
_DTYPE_CODE = {
    d: i
    for i, d in enumerate(("f16", "bf16", "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"))
}
_DIST_CODE = {"default": 0, "uniform": 1, "normal": 2, "randint": 3, "ones": 4, "arange": 5, "choice": 6}
_DIR_CODE = {"in": 0, "out": 1, "inout": 2, "scalar": 3}
_INT_RANGE = {
    "i8": (-(2**7), 2**7 - 1),
    "u8": (0, 2**8 - 1),
    "i16": (-(2**15), 2**15 - 1),
    "u16": (0, 2**16 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "u32": (0, 2**32 - 1),
    "i64": (-(2**63), 2**63 - 1),
    "u64": (0, 2**64 - 1),
}
_FLOAT_MAX = {
    "f16": 65504.0,
    "bf16": 3.3895313892515355e38,
    "f32": 3.4028234663852886e38,
    "f64": sys.float_info.max,
}
#: Files the harness itself writes in DIR; a buffer whose ``<name>.bin`` would collide gets ``arg_<name>.bin``.
_RESERVED_STEMS = frozenset({"timings", "timings_sync", "result"})


class HarnessError(ValueError):
    """The entry or its spec cannot be turned into a harness; the message names the problem."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems: list[str] = list(problems) or [message]


# --------------------------------------------------------------------------------------------------
# Plan


@dataclass(frozen=True)
class DistPlan:
    """An input distribution with its parameters evaluated for one shape.

    ``fparams`` and ``iparams`` hold the same parameters as doubles and as integers (the harness uses
    whichever the dtype and the distribution need). ``arange`` always has two: start and step.
    """

    kind: DistKind
    fparams: tuple[float, ...] = ()
    iparams: tuple[int, ...] = ()


@dataclass(frozen=True)
class ArgPlan:
    """One parameter of the entry, in signature order."""

    index: int
    name: str
    ctype: str
    base_type: str
    role: Literal["buffer", "scalar"]
    dtype: str | None
    dir: Direction | None
    dist: str | None
    vector_width: int = 1
    #: File (relative to DIR) of an out/inout buffer's contents after the launch.
    file: str | None = None
    #: File (relative to DIR) of an in/inout buffer's initial contents (``--dump-inputs``).
    in_file: str | None = None

    @property
    def is_buffer(self) -> bool:
        return self.role == "buffer"


@dataclass(frozen=True)
class ShapePlan:
    """Everything one shape needs, evaluated: shape 0 is the spec's sizes, shape k its ``shapes[k-1]``."""

    index: int
    overrides: dict[str, int]
    sizes: dict[str, exprs.Value]
    counts: dict[str, int]
    scalars: dict[str, int | float | bool]
    dists: dict[str, DistPlan]
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    smem: int | None

    def nbytes(self, arg: ArgPlan) -> int:
        """Bytes of a buffer argument in this shape."""
        return self.counts[arg.name] * DTYPE_BYTES[arg.dtype or "u8"]


@dataclass
class HarnessPlan:
    """A validated, fully evaluated plan for one entry; :func:`generate_harness` writes it as C++."""

    entry: str
    kind: Literal["global", "host"]
    source_path: str
    has_main: bool
    args: list[ArgPlan]
    shapes: list[ShapePlan]
    flags: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def arg(self, name: str) -> ArgPlan:
        """The argument called ``name``; ``KeyError`` when there is none."""
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(name)

    @property
    def buffers(self) -> list[ArgPlan]:
        return [a for a in self.args if a.is_buffer]

    @property
    def outputs(self) -> list[ArgPlan]:
        return [a for a in self.args if a.is_buffer and a.dir in ("out", "inout")]

    @property
    def inputs(self) -> list[ArgPlan]:
        return [a for a in self.args if a.is_buffer and a.dir in ("in", "inout")]

    @property
    def needs_fp16(self) -> bool:
        return any(a.dtype == "f16" for a in self.args) or any(_is_half_ctype(a.base_type) for a in self.args)

    @property
    def needs_bf16(self) -> bool:
        return any(a.dtype == "bf16" for a in self.args) or any(
            _is_bf16_ctype(a.base_type) for a in self.args
        )


def _norm_ctype(base_type: str) -> str:
    return " ".join(
        base_type.replace("const", " ").replace("volatile", " ").replace("__restrict__", " ").split()
    )


def _is_half_ctype(base_type: str) -> bool:
    return _norm_ctype(base_type) in ("__half", "half", "__half2", "half2")


def _is_bf16_ctype(base_type: str) -> bool:
    return _norm_ctype(base_type) in ("__nv_bfloat16", "nv_bfloat16", "__nv_bfloat162")


def plan_harness(
    model: SourceModel,
    spec: KernelSpec,
    entry: str,
    *,
    tunables: Mapping[str, int | str] | None = None,
) -> HarnessPlan:
    """Validate ``spec`` against ``entry`` in ``model`` and evaluate it for every shape.

    ``tunables`` (optional) replaces the default (first) value of declared tunables, for the tuner.
    Raises :class:`HarnessError` listing every problem found (template entries, overloads, dtype
    mismatches, counts that are not positive, scalars out of their C type's range, bad distributions,
    and everything :func:`kernellsp.source.spec.validate_against` reports as an error).
    """
    fn = model.function(entry)
    if fn is None:
        raise HarnessError(f"no function named {entry!r} in {model.path}")
    defs = [f for f in model.functions if f.name == entry and f.has_body]
    if len(defs) > 1:
        raise HarnessError(f"{entry} is overloaded ({len(defs)} definitions); the harness needs exactly one")
    if fn.template_params is not None:
        raise HarnessError(
            f"{entry} is a template {fn.template_params}; the harness cannot choose template arguments. "
            f"Add a non-template __global__ wrapper or a host launcher that instantiates it, and point the spec at that"
        )
    if fn.kind not in ("global", "host"):
        raise HarnessError(
            f"{entry} is a {fn.kind.replace('_', ' ')} function; an entry must be __global__ or a host launcher"
        )
    if not fn.has_body:
        raise HarnessError(
            f"{entry} is only declared in {model.path}; the harness needs its definition in this file"
        )
    if fn.name == "main":
        raise HarnessError("main cannot be an entry; name a kernel or a host launcher")
    if tunables:
        unknown = [k for k in tunables if k not in spec.tunables]
        if unknown:
            raise HarnessError(
                f"tunable(s) {', '.join(unknown)} not declared in the spec (declared: {', '.join(spec.tunables) or 'none'})"
            )
        spec = spec.model_copy(
            update={"tunables": {**spec.tunables, **{k: [v] for k, v in tunables.items()}}}
        )

    problems: list[str] = []
    bound = BoundSpec(spec=spec, entry=entry, origin="comment", origin_path=model.path)
    for issue in validate_against(bound, fn, model):
        if issue.severity == "error":
            problems.append(issue.message)
    if problems:
        raise HarnessError(_join(entry, problems), problems)

    args = _plan_args(fn, spec, problems)
    shapes: list[ShapePlan] = []
    warnings: list[str] = []
    for si, overrides in enumerate(spec.all_shapes()):
        try:
            shape = _plan_shape(si, overrides, fn, spec, args, problems, warnings)
        except OverflowError as exc:  # an integer too large for a double (a value, a distribution bound)
            problems.append(f"{'sizes' if si == 0 else f'shapes.{si - 1}'}: a number is too large: {exc}")
            continue
        if shape is not None:
            shapes.append(shape)
    if problems:
        raise HarnessError(_join(entry, problems), problems)
    return HarnessPlan(
        entry=entry,
        kind=fn.kind,
        source_path=model.path,
        has_main=model.has_main,
        args=args,
        shapes=shapes,
        flags=list(spec.flags),
        warnings=warnings,
    )


def _join(entry: str, problems: list[str]) -> str:
    if len(problems) == 1:
        return f"cannot build a harness for {entry}: {problems[0]}"
    return f"cannot build a harness for {entry}:\n" + "\n".join(f"- {p}" for p in problems)


def _plan_args(fn: Function, spec: KernelSpec, problems: list[str]) -> list[ArgPlan]:
    out: list[ArgPlan] = []
    names = [p.name for p in fn.params]
    stems: set[str] = set()
    for i, p in enumerate(fn.params):
        if not p.name:
            problems.append(
                f"parameter {i + 1} of {fn.name} has no name; name it so the spec can describe it"
            )
            continue
        if names.count(p.name) > 1:
            problems.append(f"parameter name {p.name!r} appears twice in {fn.name}")
            continue
        a = spec.args[p.name]
        base = _norm_ctype(p.base_type)
        if p.is_pointer:
            out.append(_plan_buffer(i, p, a.dtype, a.dir, a.dist, base, fn, problems, stems))
        else:
            accepted = dtype_for_ctype(p.base_type)
            out.append(
                ArgPlan(
                    index=i,
                    name=p.name,
                    ctype=p.type_text,
                    base_type=p.base_type,
                    role="scalar",
                    dtype=accepted[0] if accepted else None,
                    dir=None,
                    dist=None,
                )
            )
    return out


def _plan_buffer(
    i: int,
    p: Param,
    dtype: str | None,
    direction: str | None,
    dist: str | None,
    base: str,
    fn: Function,
    problems: list[str],
    stems: set[str],
) -> ArgPlan:
    stars = p.type_text.count("*")
    if stars > 1 or "&" in p.type_text:
        problems.append(
            f"parameter {p.name!r} of {fn.name} is declared {p.type_text!r}; the harness passes one "
            "device buffer per pointer parameter (T* or T[]), not pointers to pointers or references"
        )
    accepted = dtype_for_ctype(p.base_type)
    assert dtype is not None and direction is not None  # validate_against guarantees both
    if accepted is not None and dtype not in accepted:
        problems.append(
            f"args.{p.name}.dtype: {p.name!r} is declared {p.base_type}*; expected dtype "
            f"{' or '.join(accepted)}, got {dtype!r}"
        )
    stem = p.name if p.name not in _RESERVED_STEMS else f"arg_{p.name}"
    while stem in stems:
        stem = f"arg_{stem}"
    stems.add(stem)
    return ArgPlan(
        index=i,
        name=p.name,
        ctype=p.type_text,
        base_type=p.base_type,
        role="buffer",
        dtype=dtype,
        dir=direction,  # type: ignore[arg-type]
        dist=dist if direction != "out" else None,
        vector_width=VECTOR_WIDTH.get(base, 1),
        file=f"{stem}.bin" if direction in ("out", "inout") else None,
        in_file=f"{stem}.in.bin" if direction in ("in", "inout") else None,
    )


def _plan_shape(
    si: int,
    overrides: dict[str, int],
    fn: Function,
    spec: KernelSpec,
    args: list[ArgPlan],
    problems: list[str],
    warnings: list[str],
) -> ShapePlan | None:
    label = "sizes" if si == 0 else f"shapes[{si - 1}] {overrides}"
    try:
        names = spec.resolved_sizes(overrides)
    except exprs.ExprError as exc:
        problems.append(f"{label}: {exc}")
        return None
    for k, v in names.items():
        if isinstance(v, float) and not math.isfinite(v):
            problems.append(f"{label}: size {k} = {v} is not finite")
    counts: dict[str, int] = {}
    scalars: dict[str, int | float | bool] = {}
    dists: dict[str, DistPlan] = {}
    for a in args:
        arg_spec = spec.args[a.name]
        if a.is_buffer:
            assert arg_spec.count is not None
            try:
                c = exprs.evaluate_int(arg_spec.count, names)
            except exprs.ExprError as exc:
                problems.append(f"args.{a.name}.count ({label}): {exc}")
                continue
            if c <= 0:
                problems.append(
                    f"args.{a.name}.count = {arg_spec.count!r} evaluates to {c} for {label}; "
                    "a buffer needs a positive element count"
                )
                continue
            if c % a.vector_width:
                problems.append(
                    f"args.{a.name}.count = {c} for {label} is not a multiple of {a.vector_width} "
                    f"({a.base_type} holds {a.vector_width} scalars)"
                )
                continue
            nbytes = c * DTYPE_BYTES[a.dtype or "u8"]
            if nbytes > MAX_BUFFER_BYTES:
                problems.append(
                    f"args.{a.name}.count = {c} for {label} needs {nbytes / 2**30:,.0f} GiB; a buffer may "
                    f"hold at most {MAX_BUFFER_BYTES // 2**30} GiB (more than any GPU's memory)"
                )
                continue
            counts[a.name] = c
            if a.dir in ("in", "inout"):
                d = _plan_dist(a, arg_spec.dist, names, label, problems, warnings)
                if d is not None:
                    dists[a.name] = d
        else:
            assert arg_spec.value is not None
            try:
                v = exprs.evaluate(arg_spec.value, names)
            except exprs.ExprError as exc:
                problems.append(f"args.{a.name}.value ({label}): {exc}")
                continue
            sv = _check_scalar(a, v, label, problems)
            if sv is not None:
                scalars[a.name] = sv
    grid = block = None
    smem = None
    if fn.kind == "global":
        assert spec.launch is not None
        dims = launch_dims(spec.launch, names)
        if isinstance(dims, str):
            problems.append(f"launch ({label}): {dims}")
        else:
            g, b, smem = dims
            grid = (g[0], g[1], g[2])
            block = (b[0], b[1], b[2])
    try:
        json.dumps(names, allow_nan=False)
    except (TypeError, ValueError) as exc:
        problems.append(f"{label}: sizes cannot be written as JSON: {exc}")
    return ShapePlan(
        index=si,
        overrides=dict(overrides),
        sizes=dict(names),
        counts=counts,
        scalars=scalars,
        dists=dists,
        grid=grid,
        block=block,
        smem=smem,
    )


def _check_scalar(a: ArgPlan, v: exprs.Value, label: str, problems: list[str]) -> int | float | bool | None:
    where = f"args.{a.name}.value ({label})"
    if isinstance(v, bool):
        return v
    if not isinstance(v, int | float):
        problems.append(f"{where}: {v!r} is not a number")
        return None
    if isinstance(v, float) and not math.isfinite(v):
        problems.append(f"{where}: {v} is not finite")
        return None
    dt = a.dtype
    if dt is not None and dt in _INT_RANGE:
        if isinstance(v, float):
            if not v.is_integer():
                problems.append(f"{where}: {a.name!r} is {a.base_type} but its value is {v}, not an integer")
                return None
            v = int(v)
        lo, hi = _INT_RANGE[dt]
        if not lo <= v <= hi:
            problems.append(f"{where}: {v} does not fit {a.base_type} ({lo}..{hi})")
            return None
        return v
    if dt is not None and dt in FLOAT_DTYPES:
        if abs(float(v)) > _FLOAT_MAX[dt]:
            problems.append(f"{where}: {v} overflows {a.base_type}")
            return None
        if isinstance(v, int) and not -(2**63) <= v < 2**63:
            return float(v)
    if isinstance(v, int) and not -(2**63) <= v < 2**64:
        problems.append(f"{where}: {v} does not fit 64 bits")
        return None
    return v


def _plan_dist(
    a: ArgPlan,
    text: str | None,
    names: Mapping[str, exprs.Value],
    label: str,
    problems: list[str],
    warnings: list[str],
) -> DistPlan | None:
    assert a.dtype is not None
    where = f"args.{a.name}.dist ({label})"
    if text is None:
        return DistPlan("default")
    m = _DIST_RE.match(text)
    if m is None:
        problems.append(
            f"{where}: {text!r} is not uniform(lo, hi), normal(mean, std), randint(lo, hi), ones(), "
            "arange(), arange(start), arange(start, step) or choice(a, b, ...)"
        )
        return None
    kind: DistKind = m.group(1)  # type: ignore[assignment]
    inner = m.group(2).strip()
    raw: tuple[Any, ...] = ()
    if inner:
        try:
            val = exprs.evaluate(f"({inner},)", names)
        except exprs.ExprError as exc:
            problems.append(f"{where}: {exc}")
            return None
        raw = val if isinstance(val, tuple) else (val,)
    params: list[float | int] = []
    for x in raw:
        if isinstance(x, bool):
            x = int(x)
        if not isinstance(x, int | float) or (isinstance(x, float) and not math.isfinite(x)):
            problems.append(f"{where}: parameter {x!r} is not a finite number")
            return None
        params.append(x)
    is_int = a.dtype in _INT_RANGE
    fmax = _FLOAT_MAX.get(a.dtype, 0.0)

    def bad(msg: str) -> None:
        problems.append(f"{where}: {text!r}: {msg}")

    def integral(x: float | int) -> int | None:
        if isinstance(x, int):
            return x
        return int(x) if x.is_integer() else None

    def fits(x: int) -> bool:
        if is_int:
            lo, hi = _INT_RANGE[a.dtype]  # type: ignore[index]
            return lo <= x <= hi
        return abs(x) <= fmax

    if kind in ("uniform", "normal"):
        if len(params) != 2:
            bad(f"{kind} takes two parameters")
            return None
        p0, p1 = float(params[0]), float(params[1])
        if kind == "uniform":
            if p0 > p1:
                bad("lo must not exceed hi")
                return None
            if not math.isfinite(p1 - p0):
                bad("hi - lo overflows a double")
                return None
            if not is_int and max(abs(p0), abs(p1)) > fmax:
                bad(f"the range exceeds what {a.dtype} can hold (±{fmax:g})")
                return None
            if p0 == p1:
                warnings.append(
                    f"{where}: {text!r} makes every element equal; comparisons against it are weak"
                )
        elif p1 < 0:
            bad("std must not be negative")
            return None
        return DistPlan(kind, (p0, p1), (0, 0))
    if kind == "randint":
        if len(params) != 2:
            bad("randint takes two parameters (lo, hi), hi exclusive")
            return None
        lo_i, hi_i = integral(params[0]), integral(params[1])
        if lo_i is None or hi_i is None:
            bad("randint bounds must be integers")
            return None
        if lo_i >= hi_i:
            bad("randint needs lo < hi (hi is exclusive)")
            return None
        if not (lo_i >= -(2**63) and hi_i <= 2**63 - 1):
            bad("randint bounds must fit a signed 64-bit integer")
            return None
        if not (fits(lo_i) and fits(hi_i - 1)):
            bad(f"values {lo_i}..{hi_i - 1} do not fit {a.dtype}")
            return None
        return DistPlan(kind, (float(lo_i), float(hi_i)), (lo_i, hi_i))
    if kind == "ones":
        if params:
            bad("ones takes no parameters")
            return None
        warnings.append(f"{where}: ones() makes every element equal; comparisons against it are weak")
        return DistPlan(kind)
    if kind == "arange":
        if len(params) > 2:
            bad("arange takes at most two parameters (start, step)")
            return None
        start, step = (list(params) + [0, 1][len(params) :])[:2]
        if is_int:
            si_, st_ = integral(start), integral(step)
            if si_ is None or st_ is None or not (-(2**63) <= si_ < 2**63 and -(2**63) <= st_ < 2**63):
                bad(f"start and step must be 64-bit integers for {a.dtype}")
                return None
            return DistPlan(kind, (float(si_), float(st_)), (si_, st_))
        return DistPlan(kind, (float(start), float(step)), (0, 0))
    # choice
    if not params:
        bad("choice needs at least one value")
        return None
    ivals: list[int] = []
    for x in params:
        xi = integral(x)
        if is_int:
            if xi is None:
                bad(f"{x} is not an integer, but {a.name} is {a.dtype}")
                return None
            if not fits(xi):
                bad(f"{x} does not fit {a.dtype}")
                return None
        elif abs(float(x)) > fmax:
            bad(f"{x} does not fit {a.dtype}")
            return None
        ivals.append(xi if xi is not None and -(2**63) <= xi < 2**63 else 0)
    if len(set(params)) == 1:
        warnings.append(f"{where}: {text!r} makes every element equal; comparisons against it are weak")
    return DistPlan(kind, tuple(float(x) for x in params), tuple(ivals))


# --------------------------------------------------------------------------------------------------
# Generation


def runtime_source() -> str:
    """The C++ runtime text that every harness inlines (``kernellsp/data/harness_runtime.h``)."""
    return _RUNTIME_PATH.read_text(encoding="utf-8")


def _c_str(s: str) -> str:
    out = ['"']
    for b in s.encode("utf-8"):
        ch = chr(b)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "?":
            out.append("\\?")  # no trigraphs
        elif 0x20 <= b < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def _c_double(v: float) -> str:
    if not math.isfinite(v):
        raise HarnessError(f"cannot write the non-finite number {v} into the harness")
    return float(v).hex()


def _c_i64(v: int) -> str:
    if v == -(2**63):
        return "(-9223372036854775807LL - 1)"
    return f"{v}LL"


def _c_scalar(v: int | float | bool) -> str:
    if isinstance(v, bool):
        return f"{{kernellsp_h::SC_BOOL, {int(v)}LL, {int(v)}ULL, {_c_double(float(v))}}}"
    if isinstance(v, int):
        if v >= 2**63:
            return f"{{kernellsp_h::SC_UINT, 0LL, {v}ULL, {_c_double(float(v))}}}"
        return f"{{kernellsp_h::SC_INT, {_c_i64(v)}, {v % 2**64}ULL, {_c_double(float(v))}}}"
    return f"{{kernellsp_h::SC_FLOAT, 0LL, 0ULL, {_c_double(v)}}}"


def generate_harness(plan: HarnessPlan, source_path: str, *, split: bool = False) -> str:
    """The harness C++ text for ``plan``; it ``#include``s ``source_path``.

    ``split=True`` writes the entry unit of the split build (:mod:`kernellsp.run.harness_build`): the
    runtime's interface only and no ``main``, to be linked with the runtime unit compiled once per toolchain.

    ``source_path`` is written as given: an absolute path, or a path relative to the directory that
    will hold the generated ``.cu`` file (``#include "..."`` looks there first), which is what a
    runner that uploads ``harness.cu`` next to ``src/kernel.cu`` needs. It is never resolved
    against this process's working directory. The text is deterministic (same plan and path, same
    bytes), so it can be hashed and frozen. Build it with :func:`harness_compile_command`.
    """
    src = Path(source_path).as_posix()
    if not str(source_path).strip() or src == "." or str(source_path).endswith("/"):
        raise HarnessError(f"{source_path!r} does not name a source file")
    if any(c in src for c in '"\n\r'):
        raise HarnessError(
            f"the source path {src!r} contains a quote or a newline; the harness cannot #include it"
        )
    entry = plan.entry
    nargs = len(plan.args)
    runtime = runtime_source()
    L: list[str] = []
    w = L.append
    w(f"// Generated by kernellsp: the {RESULT_FORMAT} harness of {entry} ({plan.kind}). Do not edit.")
    w(f"// source: {src}")
    w(f"// runtime sha256: {hashlib.sha256(runtime.encode()).hexdigest()}")
    w(f"// kernellsp-harness: user-main={int(plan.has_main)}")
    w(
        "// CLI: ./harness --mode check|time|profile|inputs --shape K --seed S --out DIR [--reps R] [--warmup W]"
    )
    w(
        "//                [--poison nan|alt] [--dump-inputs] [--fresh-inputs] [--device D]   (docs/harness.md)"
    )
    for s in plan.shapes:
        w(f"//   shape {s.index}: {json.dumps(s.sizes, sort_keys=True)}")
    w(f"#define KERNELLSP_H_FP16 {int(plan.needs_fp16)}")
    w(f"#define KERNELLSP_H_BF16 {int(plan.needs_bf16)}")
    if split:
        w(
            "// Split build: the runtime proper (and main) come from the runtime unit this file is linked with."
        )
        w("#define KERNELLSP_H_INTERFACE_ONLY 1")
    w("// ---- runtime (kernellsp/data/harness_runtime.h) " + "-" * 50)
    w(runtime.rstrip("\n"))
    w("// ---- tables " + "-" * 86)
    w("namespace kernellsp_h {")
    w(f"const char* const kEntry = {_c_str(entry)};")
    w(f"const char* const kEntryKind = {_c_str(plan.kind)};")
    w(f"const char* const kSourcePath = {_c_str(src)};")
    w(f"const int kNumArgs = {nargs};")
    w("const ArgInfo kArgs[] = {")
    for a in plan.args:
        dt = _DTYPE_CODE[a.dtype] if a.is_buffer and a.dtype else -1
        d = _DIR_CODE[a.dir] if a.is_buffer and a.dir else _DIR_CODE["scalar"]
        file = _c_str(a.file) if a.file else "nullptr"
        in_file = _c_str(a.in_file) if a.in_file else "nullptr"
        w(f"    {{{_c_str(a.name)}, {_c_str(a.ctype)}, {d}, {dt}, {file}, {in_file}}},")
    w("};")
    for s in plan.shapes:
        k = s.index
        for a in plan.args:
            dp = s.dists.get(a.name)
            if dp is not None and dp.fparams:
                w(
                    f"static const double kDistF_{k}_{a.index}[] = {{{', '.join(_c_double(x) for x in dp.fparams)}}};"
                )
                w(
                    f"static const i64 kDistI_{k}_{a.index}[] = {{{', '.join(_c_i64(x) for x in dp.iparams)}}};"
                )
        counts = ", ".join(f"{s.counts.get(a.name, 0)}ULL" for a in plan.args)
        w(f"static const u64 kCounts_{k}[] = {{{counts}}};")
        scal = ", ".join(
            _c_scalar(s.scalars[a.name]) if a.name in s.scalars else "{0, 0LL, 0ULL, 0x0p+0}"
            for a in plan.args
        )
        w(f"static const Scalar kScalars_{k}[] = {{{scal}}};")
        dist_items = []
        for a in plan.args:
            dp = s.dists.get(a.name)
            if dp is None:
                dist_items.append("{0, 0, nullptr, nullptr}")
            elif dp.fparams:
                n = len(dp.fparams)
                dist_items.append(
                    f"{{{_DIST_CODE[dp.kind]}, {n}, kDistF_{k}_{a.index}, kDistI_{k}_{a.index}}}"
                )
            else:
                dist_items.append(f"{{{_DIST_CODE[dp.kind]}, 0, nullptr, nullptr}}")
        w(f"static const Dist kDists_{k}[] = {{{', '.join(dist_items)}}};")
    w(f"const int kNumShapes = {len(plan.shapes)};")
    w("const ShapeInfo kShapes[] = {")
    for s in plan.shapes:
        k = s.index
        sizes_json = json.dumps(s.sizes, allow_nan=False)
        scalars_json = json.dumps(s.scalars, allow_nan=False)
        grid = s.grid or (0, 0, 0)
        block = s.block or (0, 0, 0)
        w(
            f"    {{{_c_str(sizes_json)}, {_c_str(scalars_json)}, {{{grid[0]}u, {grid[1]}u, {grid[2]}u}}, "
            f"{{{block[0]}u, {block[1]}u, {block[2]}u}}, {s.smem or 0}ULL, kCounts_{k}, kScalars_{k}, kDists_{k}}},"
        )
    w("};")
    w("}  // namespace kernellsp_h")
    w("// ---- the code under test " + "-" * 73)
    w("// Its main (if any) is renamed so that the harness's is the only one; see docs/harness.md.")
    w("#ifndef main")
    w(f"#define main {USER_MAIN_NAME}")
    w("#endif")
    w(f"#include {_c_str(src)}")
    w("#ifdef main")
    w("#undef main")
    w("#endif")
    w("// ---- glue " + "-" * 88)
    w(_glue(plan))
    if not split:
        w("int main(int argc, char** argv) { return kernellsp_h::run(argc, argv); }")
    return "\n".join(L) + "\n"


def _glue(plan: HarnessPlan) -> str:
    """The C++ after the user's file: signature checks and the call. It names only ``kernellsp*``/``kl_*``
    identifiers and ``std::`` aliases, so macros the user's file defines (``N``, ``block``) cannot break it."""
    entry = plan.entry
    nargs = len(plan.args)
    G: list[str] = []
    w = G.append
    w("namespace kernellsp_glue {")
    w("template <class KernellspF> struct KernellspSig;")
    w("template <class KernellspR, class... KernellspA> struct KernellspSig<KernellspR (*)(KernellspA...)> {")
    w("  typedef std::tuple<KernellspA...> kernellsp_args;")
    w("  static constexpr std::size_t kernellsp_n = sizeof...(KernellspA);")
    w("};")
    w("template <class KernellspR, class... KernellspA>")
    w(
        "struct KernellspSig<KernellspR (*)(KernellspA...) noexcept> : KernellspSig<KernellspR (*)(KernellspA...)> {};"
    )
    w(f"typedef decltype(&::{entry}) KernellspFn;")
    msg = f"kernellsp harness: {entry} does not take the {nargs} parameter(s) the spec describes"
    w(f"static_assert(KernellspSig<KernellspFn>::kernellsp_n == {nargs}, {_c_str(msg)});")
    w("template <std::size_t KernellspI>")
    w(
        "using KernellspP = std::decay_t<std::tuple_element_t<KernellspI, KernellspSig<KernellspFn>::kernellsp_args>>;"
    )
    for a in plan.args:
        p = f"KernellspP<{a.index}>"
        if a.is_buffer:
            assert a.dtype is not None
            esize = DTYPE_BYTES[a.dtype]
            msg = f"kernellsp harness: parameter {a.name} of {entry} is not a pointer, but the spec gives it dtype/dir/count"
            w(f"static_assert(std::is_pointer_v<{p}>, {_c_str(msg)});")
            msg = f"kernellsp harness: the element type of {a.name} ({a.base_type}) does not fit dtype {a.dtype}"
            w(
                f"static_assert(kernellsp_h::pointee_size<{p}>() % {esize} == 0 || "
                f"{esize} % kernellsp_h::pointee_size<{p}>() == 0, {_c_str(msg)});"
            )
            for s in plan.shapes:
                nbytes = s.counts[a.name] * esize
                msg = f"kernellsp harness: shape {s.index}: {a.name} holds {nbytes} bytes, not a whole number of {a.base_type}"
                w(f"static_assert({nbytes}ULL % kernellsp_h::pointee_size<{p}>() == 0, {_c_str(msg)});")
        else:
            msg = f"kernellsp harness: scalar parameter {a.name} of {entry} ({a.ctype}) cannot be set from a number"
            w(f"static_assert(!std::is_pointer_v<{p}> && kernellsp_h::scalar_ok_v<{p}>, {_c_str(msg)});")
    w("}  // namespace kernellsp_glue")
    w("")
    w("cudaError_t kernellsp_h::entry_prepare(int kl_shape) {")
    if plan.kind == "global":
        w("  const std::size_t kl_smem = kernellsp_h::launch_smem(kl_shape);")
        w("  if (kl_smem > 48u * 1024u) {")
        w(
            f"    return cudaFuncSetAttribute(::{entry}, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kl_smem);"
        )
        w("  }")
    else:
        w("  (void)kl_shape;")
    w("  return cudaSuccess;")
    w("}")
    w("bool kernellsp_h::entry_attributes(cudaFuncAttributes* kl_attr) {")
    if plan.kind == "global":
        w(f"  return cudaFuncGetAttributes(kl_attr, ::{entry}) == cudaSuccess;")
    else:
        w("  (void)kl_attr;")
        w("  return false;")
    w("}")
    w("void kernellsp_h::entry_launch(int kl_shape, void* const* kl_ptrs) {")
    w("  (void)kl_shape;")
    w("  (void)kl_ptrs;")
    for a in plan.args:
        i = a.index
        p = f"kernellsp_glue::KernellspP<{i}>"
        if a.is_buffer:
            w(f"  {p} kl_a{i} = ({p})(kl_ptrs[{i}]);")
        else:
            w(f"  {p} kl_a{i} = kernellsp_h::scalar_arg<{p}>(kl_shape, {i});")
    call_args = ", ".join(f"kl_a{a.index}" for a in plan.args)
    if plan.kind == "global":
        w(
            f"  ::{entry}<<<kernellsp_h::launch_grid(kl_shape), kernellsp_h::launch_block(kl_shape), "
            f"kernellsp_h::launch_smem(kl_shape)>>>({call_args});"
        )
    else:
        w(
            f'  kernellsp_h::call_launcher([&]() {{ return ::{entry}({call_args}); }}, "{entry} (its return value)");'
        )
    w("}")
    return "\n".join(G)


def harness_compile_command(
    harness_cu: str,
    exe: str,
    arch: str = "sm_90",
    extra_flags: Iterable[str] = (),
    *,
    nvcc: str = "nvcc",
) -> list[str]:
    """The nvcc command line that builds a generated harness.

    ``nvcc -O3 -arch=ARCH -lineinfo [-std=c++17] EXTRA... -o EXE HARNESS.cu``. ``-std=c++17`` (the
    runtime needs it) is added unless an extra flag already picks a standard. Pass the plan's
    ``flags`` (the spec's ``flags``) in ``extra_flags``. No ``-Dmain`` is needed: the harness renames
    the user's ``main`` itself, around the ``#include`` only (docs/harness.md).
    """
    extra = list(extra_flags)
    cmd = [nvcc, "-O3", f"-arch={arch}", "-lineinfo"]
    if not any(f.startswith(("-std", "--std")) for f in extra):
        cmd.append("-std=c++17")
    cmd += extra
    cmd += ["-o", exe, harness_cu]
    return cmd


def harness_argv(
    exe: str,
    mode: Mode,
    out_dir: str | Path,
    *,
    shape: int = 0,
    seed: int = 0,
    reps: int | None = None,
    warmup: int | None = None,
    poison: Literal["nan", "alt"] = "nan",
    dump_inputs: bool = False,
    fresh_inputs: bool = False,
    device: int | None = None,
    dump_last: bool = False,
    sets: Sequence[str] | None = None,
    check_launches: int = 0,
    alloc: Literal["guard", "plain"] = "guard",
) -> list[str]:
    """The argument vector that runs a built harness (a convenience for runners).

    ``sets`` (check mode): the input sets to run, one launch each, as :func:`input_set` spells them;
    ``check_launches`` (time mode): keep the outputs of that many timed launches picked at random after
    they ran; ``alloc="plain"``: cudaMalloc without guard pages (for compute-sanitizer).
    """
    argv = [
        exe,
        "--mode",
        mode,
        "--shape",
        str(shape),
        "--seed",
        str(seed),
        "--out",
        str(out_dir),
        "--poison",
        poison,
    ]
    if reps is not None:
        argv += ["--reps", str(reps)]
    if warmup is not None:
        argv += ["--warmup", str(warmup)]
    if dump_inputs:
        argv.append("--dump-inputs")
    if fresh_inputs:
        argv.append("--fresh-inputs")
    if dump_last:
        argv.append("--dump-last")
    if sets:
        argv += ["--sets", ",".join(sets)]
    if check_launches:
        argv += ["--check-launches", str(check_launches)]
    if alloc != "guard":
        argv += ["--alloc", alloc]
    if device is not None:
        argv += ["--device", str(device)]
    return argv


def input_set(seed: int, pattern: str = "spec", *, launch: int | None = None, abs: bool = False) -> str:
    """One item of ``--sets``: ``SEED[:PATTERN][@LAUNCH][+abs]``.

    ``pattern`` is one of :data:`PATTERNS`; ``launch`` gives the inputs that time mode draws on the
    device for that launch under ``--fresh-inputs`` with ``--seed SEED`` (spec distribution only);
    ``abs`` takes ``|x|`` of every float input (the error budget's conditioning run).
    """
    if pattern not in PATTERNS:
        raise HarnessError(f"unknown input pattern {pattern!r} (one of {', '.join(PATTERNS)})")
    if launch is not None and pattern != "spec":
        raise HarnessError(
            "an input set drawn for a timing launch takes the spec's distribution, not a pattern"
        )
    text = str(seed) + ("" if pattern == "spec" else f":{pattern}")
    if launch is not None:
        text += f"@{launch}"
    return text + ("+abs" if abs else "")


# --------------------------------------------------------------------------------------------------
# Python mirror of the harness's PRNG, hash and digest

_M64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_ARG_MUL = 0xD1B54A32D192ED03
_REP_MUL = 0xA0761D6478BD642F
_TWO_PI = 6.283185307179586


def mix64(z: int) -> int:
    """splitmix64's finaliser (as in the harness)."""
    z &= _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def stream_key(seed: int, arg_index: int) -> int:
    """Key of the input stream of argument ``arg_index`` (0-based, signature order) under ``seed``."""
    return mix64((mix64((seed + _GAMMA) & _M64) + (arg_index + 1) * _ARG_MUL) & _M64)


def draw(key: int, counter: int) -> int:
    """The ``counter``-th 64-bit draw of a stream (element j uses draws 2j and 2j+1)."""
    return mix64((key + (counter + 1) * _GAMMA) & _M64)


def launch_seed(seed: int, launch: int) -> int:
    """Seed of the fresh inputs of timing launch ``launch`` (warm-ups count first), ``--fresh-inputs``."""
    return mix64(seed ^ (((launch + 1) * _REP_MUL) & _M64))


def poison_byte(dtype: str, alt: bool = False) -> int:
    """The byte repeated over every element of an ``out`` buffer before each launch."""
    if dtype in FLOAT_DTYPES:
        return 0xF7 if alt else 0xFF
    return 0x5A if alt else 0xA5


def fnv1a64(data: bytes | bytearray | memoryview) -> int:
    """64-bit FNV-1a of ``data`` (the harness's ``hash_before``/``hash_after``)."""
    h = 0xCBF29CE484222325
    for b in bytes(data):
        h = ((h ^ b) * 0x100000001B3) & _M64
    return h


def digest_bytes(data: bytes | bytearray | memoryview, dtype: str) -> int:
    """The harness's order-independent digest: sum of mix64(bits_j + (j+1)*gamma) mod 2^64."""
    esize = DTYPE_BYTES[dtype]
    raw = bytes(data)
    fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}[esize]
    vals = struct.unpack(f"<{len(raw) // esize}{fmt}", raw[: len(raw) - len(raw) % esize])
    s = 0
    for j, v in enumerate(vals):
        s += mix64((v + (j + 1) * _GAMMA) & _M64)
    return s & _M64


def count_poisoned(data: bytes | bytearray | memoryview, dtype: str, alt: bool = False) -> int:
    """Elements whose bytes all still equal the poison byte (never written by the entry)."""
    esize = DTYPE_BYTES[dtype]
    pat = bytes([poison_byte(dtype, alt)]) * esize
    raw = bytes(data)
    return sum(1 for j in range(0, len(raw) - esize + 1, esize) if raw[j : j + esize] == pat)


def _floor(v: float) -> float:
    return float(math.floor(v)) if math.isfinite(v) else v


def _round_half_away(v: float) -> float:
    f = _floor(v)
    d = v - f
    if d > 0.5:
        return f + 1.0
    if d < 0.5:
        return f
    return f + 1.0 if v >= 0.0 else f


def _to_f32(v: float) -> float:
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def _pack(dtype: str, int_path: bool, fv: float, iv: int) -> bytes:
    if dtype == "f64":
        return struct.pack("<d", fv)
    if dtype == "f32":
        return struct.pack("<f", _to_f32(fv))
    if dtype == "f16":
        f = _to_f32(fv)
        try:
            return struct.pack("<e", f)
        except OverflowError:
            return struct.pack("<H", 0xFC00 if f < 0 else 0x7C00)
    if dtype == "bf16":
        (bits,) = struct.unpack("<I", struct.pack("<f", _to_f32(fv)))
        return struct.pack("<H", ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF)
    size = DTYPE_BYTES[dtype]
    lo, hi = _INT_RANGE[dtype]
    if int_path:
        u = iv & ((1 << (8 * size)) - 1)
    else:
        dlo, dhi = float(lo), float(hi)
        if dtype in ("i64", "u64"):
            dhi = 2.0**63 if dtype == "i64" else 2.0**64
        if fv != fv:
            x = 0
        elif fv <= dlo:
            x = lo
        elif fv >= dhi:
            x = hi
        else:
            x = int(fv)
        u = x & ((1 << (8 * size)) - 1)
    return u.to_bytes(size, "little")


def _element(d: DistPlan, dtype: str, j: int, key: int) -> tuple[bool, float, int]:
    is_float = dtype in FLOAT_DTYPES
    f, i = d.fparams, d.iparams
    if d.kind == "uniform":
        fv = f[0] + (f[1] - f[0]) * ((draw(key, 2 * j) >> 11) * 2.0**-53)
        return False, (fv if is_float else _floor(fv)), 0
    if d.kind == "normal":
        u1 = float((draw(key, 2 * j) >> 11) + 1) * 2.0**-53
        u2 = (draw(key, 2 * j + 1) >> 11) * 2.0**-53
        z = math.sqrt(-2.0 * math.log(u1)) * math.cos(_TWO_PI * u2)
        fv = f[0] + f[1] * z
        return False, (fv if is_float else _round_half_away(fv)), 0
    if d.kind == "randint":
        rng = (i[1] - i[0]) & _M64
        u = (i[0] + ((draw(key, 2 * j) * rng) >> 64)) & _M64
        iv = u - (1 << 64) if u >= 1 << 63 else u
        return True, float(iv), iv
    if d.kind == "ones":
        return True, 1.0, 1
    if d.kind == "arange":
        if is_float:
            return False, f[0] + float(j) * f[1], 0
        u = (i[0] + j * i[1]) & _M64
        return True, 0.0, u - (1 << 64) if u >= 1 << 63 else u
    if d.kind == "choice":
        k = (draw(key, 2 * j) * len(f)) >> 64
        return True, f[k], i[k]
    if is_float:
        return False, -1.0 + 2.0 * ((draw(key, 2 * j) >> 11) * 2.0**-53), 0
    iv = (draw(key, 2 * j) * 100) >> 64
    return True, float(iv), iv


_WIDE_BINADES = {"f16": 10, "bf16": 24, "f32": 24, "f64": 48}


def _pattern_applies(d: DistPlan, dtype: str, pattern: str = "spikes") -> tuple[bool, int, int] | None:
    """None when ``pattern`` leaves this buffer to the spec's fill; else (integral, lo, range)."""
    is_float = dtype in FLOAT_DTYPES
    if pattern == "tail":  # far out in the tails: only a normal distribution reaches there
        return (False, 0, 0) if is_float and d.kind == "normal" else None
    if d.kind == "randint":
        return True, d.iparams[0], (d.iparams[1] - d.iparams[0]) & _M64
    if d.kind == "default" and not is_float:
        return True, 0, 100
    if is_float and d.kind in ("default", "uniform", "normal"):
        return False, 0, 0
    return None


def pattern_applies(d: DistPlan, dtype: str, pattern: str = "spikes") -> bool:
    """Whether ``pattern`` changes a buffer of ``dtype`` drawn from ``d`` (else it keeps the spec's fill)."""
    return _pattern_applies(d, dtype, pattern) is not None


def _pattern_float(pat: str, j: int, count: int, dtype: str, lo: float, hi: float, key: int) -> float:
    x1, x2 = draw(key, 2 * j), draw(key, 2 * j + 1)
    u = (x1 >> 11) * 2.0**-53
    c = lo if lo > 0.0 else hi if hi < 0.0 else 0.0
    up, dn = hi - c, c - lo
    s = 1.0 if up >= dn else -1.0
    big, small = (up, dn) if up >= dn else (dn, up)
    spike = c + s * (big * (0.5 + 0.5 * u))
    v = c
    if pat == "tail":
        if (x2 * 64) >> 64 != 0:
            return c
        mean, sd = 0.5 * (lo + hi), (hi - lo) / 6.0
        far = sd * math.ldexp(1.0 + u, 2 + ((((x2 << 8) & _M64) * 6) >> 64))
        t = mean + far if x2 & 1 else mean - far
        m = _FLOAT_MAX[dtype]
        return -m if t < -m else m if t > m else t
    if pat == "spikes":
        if (x2 * 64) >> 64 == 0:
            v = spike
    elif pat == "alternating":
        if (draw(key, 2 * (j & ~1) + 1) * 32) >> 64 == 0:
            v = spike if j % 2 == 0 else c - s * (small * (0.25 + 0.25 * u))
    elif pat == "ramp":
        if (x2 >> 11) * 2.0**-53 < (float(j) + 0.5) / float(count) * 0.0625:
            v = spike
    elif (x2 * 64) >> 64 == 0:  # wide
        low = x2 | (1 << _WIDE_BINADES[dtype])
        e = (low & -low).bit_length() - 1
        mag = math.ldexp(0.5 + 0.5 * u, -e)
        v = c - s * (small * mag) if small > 0.0 and (x2 >> 48) & 7 == 0 else c + s * (big * mag)
    return lo if v < lo else hi if v > hi else v


def _pattern_int_offset(pat: str, j: int, rng: int, key: int) -> int:
    x1, x2 = draw(key, 2 * j), draw(key, 2 * j + 1)
    if pat == "spikes":
        return (x1 * rng) >> 64 if (x2 * 64) >> 64 == 0 else 0
    if pat == "alternating":
        q = max(rng // 4, 1)
        return rng - 1 - ((x1 * q) >> 64) if j % 2 == 0 else (x1 * q) >> 64
    if pat == "ramp":
        return j % rng
    bits = min(rng.bit_length() - 1, 63)
    r = rng >> ((x1 * (bits + 1)) >> 64)
    return (x2 * max(r, 1)) >> 64


def _pattern_range(d: DistPlan, dtype: str) -> tuple[float, float]:
    if d.kind == "uniform":
        return d.fparams[0], d.fparams[1]
    if d.kind == "normal":
        w, m = 3.0 * d.fparams[1], _FLOAT_MAX[dtype]
        return max(d.fparams[0] - w, -m), min(d.fparams[0] + w, m)
    return -1.0, 1.0


def _abs_bytes(data: bytearray, esize: int) -> None:
    for k in range(esize - 1, len(data), esize):
        data[k] &= 0x7F


def fill_reference(
    plan: HarnessPlan,
    shape: int,
    seed: int,
    name: str,
    *,
    launch: int | None = None,
    pattern: str = "spec",
    abs: bool = False,
) -> bytes:
    """The initial bytes of input buffer ``name`` that the harness uploads for ``shape`` and ``seed``.

    Bit-identical to the harness's host fill for every distribution except ``normal``, whose
    ``log``/``cos`` come from the platform's libm (identical on the same host, within an ulp elsewhere).
    ``launch`` gives the device fill of that timing launch under ``--fresh-inputs`` (where ``normal``
    uses the GPU's libm and may differ in the last bit). ``pattern`` and ``abs`` give the input set
    ``SEED:PATTERN[+abs]`` of check mode (:func:`input_set`). Pure Python: meant for small shapes and tests.
    """
    a = plan.arg(name)
    if not a.is_buffer or a.dir not in ("in", "inout"):
        raise HarnessError(f"{name!r} is not an input buffer of {plan.entry}")
    if pattern not in PATTERNS:
        raise HarnessError(f"unknown input pattern {pattern!r}")
    sp = plan.shapes[shape]
    d = sp.dists[name]
    assert a.dtype is not None
    key = stream_key(seed if launch is None else launch_seed(seed, launch), a.index)
    applies = _pattern_applies(d, a.dtype, pattern) if pattern != "spec" else None
    count = sp.counts[name]
    lo, hi = _pattern_range(d, a.dtype) if applies is not None and not applies[0] else (0.0, 0.0)
    out = bytearray()
    for j in range(count):
        if applies is None:
            int_path, fv, iv = _element(d, a.dtype, j, key)
        elif applies[0]:
            u = (applies[1] + _pattern_int_offset(pattern, j, applies[2], key)) & _M64
            iv = u - (1 << 64) if u >= 1 << 63 else u
            int_path, fv = True, float(iv)
        else:
            int_path, fv, iv = False, _pattern_float(pattern, j, count, a.dtype, lo, hi, key), 0
        out += _pack(a.dtype, int_path and a.dtype not in FLOAT_DTYPES, fv, iv)
    if abs and a.dtype in FLOAT_DTYPES:
        _abs_bytes(out, DTYPE_BYTES[a.dtype])
    return bytes(out)


# --------------------------------------------------------------------------------------------------
# Reading results


def _pick_typecode(size: int, signed: bool) -> str:
    for code in "bhilq" if signed else "BHILQ":
        if array.array(code).itemsize == size:
            return code
    raise HarnessError(f"this Python has no {size}-byte array type")  # pragma: no cover


_ARRAY_CODE = {
    "f32": "f",
    "f64": "d",
    "i8": "b",
    "u8": "B",
    "i16": _pick_typecode(2, True),
    "u16": _pick_typecode(2, False),
    "i32": _pick_typecode(4, True),
    "u32": _pick_typecode(4, False),
    "i64": _pick_typecode(8, True),
    "u64": _pick_typecode(8, False),
}


def decode_buffer(data: bytes | bytearray | memoryview, dtype: str) -> array.array[Any]:
    """Little-endian raw bytes of ``dtype`` as an :class:`array.array`; f16 and bf16 widen to ``'f'``."""
    raw = bytes(data)
    esize = DTYPE_BYTES[dtype]
    if len(raw) % esize:
        raise HarnessError(f"{len(raw)} bytes is not a whole number of {dtype} elements")
    if dtype == "f16":
        return array.array("f", struct.unpack(f"<{len(raw) // 2}e", raw))
    if dtype == "bf16":
        n = len(raw) // 2
        wide = struct.pack(f"<{n}I", *(h << 16 for h in struct.unpack(f"<{n}H", raw)))
        return array.array("f", struct.unpack(f"<{n}f", wide))
    arr = array.array(_ARRAY_CODE[dtype])
    arr.frombytes(raw)
    if sys.byteorder != "little":
        arr.byteswap()
    return arr


@dataclass
class BufferInfo:
    """One buffer argument as the harness reports it in result.json."""

    name: str
    index: int
    ctype: str
    dtype: str
    dir: Direction
    count: int
    bytes: int
    file: str | None = None
    input_file: str | None = None
    hash_before: int | None = None
    hash_after: int | None = None
    digest: int | None = None
    unwritten: int | None = None
    poison_byte: int | None = None
    rep_digests: list[int] | None = None
    rep_unwritten: list[int] | None = None
    #: Placed against a guard page (the canary bytes beside it are checked after every launch).
    guarded: bool = False
    #: Canary bytes beside the buffer found changed: writes out of bounds that missed the guard page.
    guard_damage: int | None = None

    @property
    def mutated(self) -> bool:
        """An ``in`` buffer whose bytes changed during the run (both hashes known and different)."""
        return (
            self.hash_before is not None
            and self.hash_after is not None
            and self.hash_before != self.hash_after
        )


def _hex_or_none(v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, str):
        return int(v, 16)
    return int(v)


@dataclass
class SetBuffer:
    """What one input set did to one buffer (check mode): its output file or, for an ``in`` buffer, whether it changed."""

    file: str | None = None
    input_file: str | None = None
    hash_before: int | None = None
    digest: int | None = None
    unwritten: int | None = None
    mutated: bool | None = None


@dataclass
class SetInfo:
    """One input set of a check-mode run (``--sets``): one launch on inputs ``spec`` = SEED[:PATTERN][@LAUNCH][+abs]."""

    index: int
    spec: str
    seed: int
    pattern: str
    launch: int | None
    abs: bool
    buffers: dict[str, SetBuffer]


@dataclass
class SnapshotInfo:
    """The outputs of one timed launch, picked at random after it ran (``--check-launches``)."""

    index: int
    launch: int
    input_seed: int
    buffers: dict[str, SetBuffer]


@dataclass
class HarnessResult:
    """``DIR/result.json`` of one harness run, with helpers that read the raw files next to it."""

    out_dir: Path
    status: Status
    error: str | None
    mode: str | None
    entry: str
    entry_kind: str
    source: str
    shape: int | None
    seed: int
    poison: str
    sizes: dict[str, Any] | None
    scalars: dict[str, Any] | None
    grid: list[int] | None
    block: list[int] | None
    smem: int | None
    device: dict[str, Any] | None
    kernel_attrs: dict[str, Any] | None
    buffers: list[BufferInfo]
    timings_ms: list[float]
    timings_sync_ms: list[float]
    warmup: int
    reps: int
    fresh_inputs: bool
    l2_flush_bytes: int
    persisting_l2_limit_set: bool
    persisting_l2_error: str | None
    pad_bytes: int
    raw: dict[str, Any]
    sets: list[SetInfo] = field(default_factory=list)
    snapshots: list[SnapshotInfo] = field(default_factory=list)
    #: ``{"kind": "guard" | "plain" | "none", "granularity": bytes, "error": why guard pages were not used}``.
    alloc: dict[str, Any] = field(default_factory=dict)
    #: ``{"done", "bytes_per_sm", "sms_covered", "sm_count", "error"}``: shared memory poisoned before each launch.
    smem_poison: dict[str, Any] = field(default_factory=dict)
    #: Device-to-device copy bandwidth measured in time mode (read + written bytes per second).
    copy_bandwidth: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def read_set_bytes(self, index: int, name: str) -> bytes:
        """The raw bytes of out/inout buffer ``name`` after the launch of input set ``index`` (check mode)."""
        sb = self.sets[index].buffers.get(name)
        if sb is None or sb.file is None:
            raise HarnessError(f"set {index} wrote no output file for {name!r}")
        return self._read_exact(sb.file, self.buffer(name).bytes)

    def read_snapshot_bytes(self, index: int, name: str) -> bytes:
        """The raw bytes of out/inout buffer ``name`` after the timed launch kept as snapshot ``index``."""
        sb = self.snapshots[index].buffers.get(name)
        if sb is None or sb.file is None:
            raise HarnessError(f"snapshot {index} has no file for {name!r}")
        return self._read_exact(sb.file, self.buffer(name).bytes)

    def guard_damage(self) -> dict[str, int]:
        """Buffers whose guard canaries changed: bytes written out of bounds (guard pages only)."""
        return {b.name: b.guard_damage for b in self.buffers if b.guard_damage}

    def buffer(self, name: str) -> BufferInfo:
        """The buffer called ``name``; :class:`HarnessError` when the result has none."""
        for b in self.buffers:
            if b.name == name:
                return b
        raise HarnessError(
            f"result has no buffer {name!r} (buffers: {', '.join(b.name for b in self.buffers)})"
        )

    def read_bytes(self, name: str) -> bytes:
        """The raw bytes of out/inout buffer ``name`` after the launch (check mode)."""
        b = self.buffer(name)
        if b.file is None:
            raise HarnessError(f"buffer {name!r} was not written in this run (mode {self.mode}, dir {b.dir})")
        return self._read_exact(b.file, b.bytes)

    def read_input_bytes(self, name: str) -> bytes:
        """The initial bytes of in/inout buffer ``name`` (written with ``--dump-inputs`` or ``--mode inputs``)."""
        b = self.buffer(name)
        if b.input_file is None:
            raise HarnessError(f"the inputs of {name!r} were not dumped (run with --dump-inputs)")
        return self._read_exact(b.input_file, b.bytes)

    def read_buffer(self, name: str) -> array.array[Any]:
        """Out/inout buffer ``name`` as an :class:`array.array` (f16/bf16 widened to float32)."""
        return decode_buffer(self.read_bytes(name), self.buffer(name).dtype)

    def read_input(self, name: str) -> array.array[Any]:
        """In/inout buffer ``name``'s initial contents as an :class:`array.array`."""
        return decode_buffer(self.read_input_bytes(name), self.buffer(name).dtype)

    def read_list(self, name: str) -> list[float] | list[int]:
        """Out/inout buffer ``name`` as a Python list."""
        return self.read_buffer(name).tolist()

    def as_numpy(self, name: str, *, inputs: bool = False) -> Any:
        """The buffer as a numpy array (f16 as float16, bf16 widened to float32); needs numpy."""
        try:
            import numpy as np
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise HarnessError("as_numpy needs numpy; use read_buffer for an array.array instead") from exc
        b = self.buffer(name)
        raw = self.read_input_bytes(name) if inputs else self.read_bytes(name)
        if b.dtype == "bf16":
            return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        np_dtype = {
            "f16": "<f2",
            "f32": "<f4",
            "f64": "<f8",
            "i8": "i1",
            "u8": "u1",
            "i16": "<i2",
            "u16": "<u2",
            "i32": "<i4",
            "u32": "<u4",
            "i64": "<i8",
            "u64": "<u8",
        }[b.dtype]
        return np.frombuffer(raw, dtype=np_dtype)

    def read_timings(self) -> array.array[Any]:
        """``DIR/timings.bin`` (float64 milliseconds per timed repetition)."""
        raw = (self.out_dir / "timings.bin").read_bytes()
        arr = array.array("d")
        arr.frombytes(raw[: len(raw) - len(raw) % 8])
        if sys.byteorder != "little":
            arr.byteswap()
        return arr

    def mutated_inputs(self) -> list[str]:
        """Names of ``in`` buffers whose contents changed during the run."""
        return [b.name for b in self.buffers if b.mutated]

    def unwritten_outputs(self) -> dict[str, int]:
        """Out buffers with elements still holding the poison pattern after the launch (check mode)."""
        return {b.name: b.unwritten for b in self.buffers if b.unwritten}

    def _read_exact(self, file: str, nbytes: int) -> bytes:
        p = self.out_dir / file
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise HarnessError(f"cannot read {p}: {exc}") from exc
        if len(data) != nbytes:
            raise HarnessError(f"{p} holds {len(data)} bytes; result.json says {nbytes}")
        return data


def read_result(out_dir: str | Path) -> HarnessResult:
    """Read ``out_dir/result.json`` (format ``kernellsp-harness/2``).

    Raises :class:`HarnessError` when the file is missing (the program crashed or was killed before
    it finished), is not JSON, or has another format.
    """
    d = Path(out_dir)
    p = d / "result.json"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HarnessError(f"{p} does not exist: the harness crashed, was killed or never ran") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"cannot read {p}: {exc}") from exc
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise HarnessError(f"{p} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != RESULT_FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise HarnessError(f"{p} has format {got!r}; expected {RESULT_FORMAT!r}")
    if data.get("status") not in ("ok", "launch_error", "runtime_error", "bad_args"):
        raise HarnessError(f"{p}: unknown status {data.get('status')!r}")
    try:
        buffers = [
            BufferInfo(
                name=b["name"],
                index=int(b.get("index", -1)),
                ctype=b.get("ctype", ""),
                dtype=b["dtype"],
                dir=b["dir"],
                count=int(b["count"]),
                bytes=int(b.get("bytes", int(b["count"]) * DTYPE_BYTES[b["dtype"]])),
                file=b.get("file"),
                input_file=b.get("input_file"),
                hash_before=_hex_or_none(b.get("hash_before")),
                hash_after=_hex_or_none(b.get("hash_after")),
                digest=_hex_or_none(b.get("digest")),
                unwritten=b.get("unwritten"),
                poison_byte=b.get("poison_byte"),
                rep_digests=[int(x, 16) for x in b["rep_digests"]]
                if b.get("rep_digests") is not None
                else None,
                rep_unwritten=[int(x) for x in b["rep_unwritten"]]
                if b.get("rep_unwritten") is not None
                else None,
                guarded=bool(b.get("guarded", False)),
                guard_damage=b.get("guard_damage"),
            )
            for b in data.get("buffers") or []
        ]

        def set_buffers(entries: Any) -> dict[str, SetBuffer]:
            return {
                name: SetBuffer(
                    file=v.get("file"),
                    input_file=v.get("input_file"),
                    hash_before=_hex_or_none(v.get("hash_before")),
                    digest=_hex_or_none(v.get("digest")),
                    unwritten=v.get("unwritten"),
                    mutated=v.get("mutated"),
                )
                for name, v in (entries or {}).items()
            }

        sets = [
            SetInfo(
                index=int(s["index"]),
                spec=str(s["spec"]),
                seed=int(s["seed"]),
                pattern=str(s["pattern"]),
                launch=None if s.get("launch") is None else int(s["launch"]),
                abs=bool(s.get("abs", False)),
                buffers=set_buffers(s.get("buffers")),
            )
            for s in data.get("sets") or []
        ]
        snapshots = [
            SnapshotInfo(
                index=int(s["index"]),
                launch=int(s["launch"]),
                input_seed=int(s["input_seed"]),
                buffers=set_buffers(s.get("buffers")),
            )
            for s in data.get("snapshots") or []
        ]
        bw = data.get("copy_bandwidth_bytes_per_s")
        return HarnessResult(
            out_dir=d,
            status=data["status"],
            error=data.get("error"),
            mode=data.get("mode"),
            entry=data.get("entry", ""),
            entry_kind=data.get("entry_kind", ""),
            source=data.get("source", ""),
            shape=data.get("shape"),
            seed=int(data.get("seed") or 0),
            poison=data.get("poison", "nan"),
            sizes=data.get("sizes"),
            scalars=data.get("scalars"),
            grid=data.get("grid"),
            block=data.get("block"),
            smem=data.get("smem"),
            device=data.get("device"),
            kernel_attrs=data.get("kernel_attrs"),
            buffers=buffers,
            timings_ms=[float("nan") if t is None else float(t) for t in data.get("timings_ms") or []],
            timings_sync_ms=[
                float("nan") if t is None else float(t) for t in data.get("timings_sync_ms") or []
            ],
            warmup=int(data.get("warmup") or 0),
            reps=int(data.get("reps") or 0),
            fresh_inputs=bool(data.get("fresh_inputs", False)),
            l2_flush_bytes=int(data.get("l2_flush_bytes") or 0),
            persisting_l2_limit_set=bool(data.get("persisting_l2_limit_set", False)),
            persisting_l2_error=data.get("persisting_l2_error"),
            pad_bytes=int(data.get("pad_bytes") or 0),
            raw=data,
            sets=sets,
            snapshots=snapshots,
            alloc=dict(data.get("alloc") or {}),
            smem_poison=dict(data.get("smem_poison") or {}),
            copy_bandwidth=float(bw) if bw else None,
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise HarnessError(f"{p}: malformed result ({type(exc).__name__}: {exc})") from exc
