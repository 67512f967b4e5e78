"""Planning: an entry and its spec validated and evaluated, for every shape, into a :class:`HarnessPlan`."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from kernellsp.run.harness.common import _FLOAT_MAX, _INT_RANGE, Direction, HarnessError
from kernellsp.run.harness.dists import DistPlan, _plan_dist
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

#: Larger than any GPU's memory; beyond it the C++ byte count (count x element size) could also wrap.
MAX_BUFFER_BYTES = 2**40
#: Files the harness itself writes in DIR; a buffer whose ``<name>.bin`` would collide gets ``arg_<name>.bin``.
_RESERVED_STEMS = frozenset({"timings", "timings_sync", "result"})


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
    fn = _entry_function(model, entry)
    assert fn.kind in ("global", "host")  # _entry_function refuses the other kinds
    if tunables:
        spec = _with_tunables(spec, tunables)

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


def _entry_function(model: SourceModel, entry: str) -> Function:
    """The one definition of ``entry`` in ``model``; :class:`HarnessError` when it cannot be an entry."""
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
    return fn


def _with_tunables(spec: KernelSpec, tunables: Mapping[str, int | str]) -> KernelSpec:
    """``spec`` with ``tunables`` as the default (first) values of its declared tunables."""
    unknown = [k for k in tunables if k not in spec.tunables]
    if unknown:
        raise HarnessError(
            f"tunable(s) {', '.join(unknown)} not declared in the spec (declared: {', '.join(spec.tunables) or 'none'})"
        )
    return spec.model_copy(update={"tunables": {**spec.tunables, **{k: [v] for k, v in tunables.items()}}})


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
            c = _plan_count(a, arg_spec.count, names, label, problems)
            if c is None:
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
    grid, block, smem = _plan_launch(fn, spec, names, label, problems)
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


def _plan_count(
    a: ArgPlan, count: str | int, names: Mapping[str, exprs.Value], label: str, problems: list[str]
) -> int | None:
    """The element count of buffer ``a`` in one shape; None after a problem."""
    try:
        c = exprs.evaluate_int(count, names)
    except exprs.ExprError as exc:
        problems.append(f"args.{a.name}.count ({label}): {exc}")
        return None
    if c <= 0:
        problems.append(
            f"args.{a.name}.count = {count!r} evaluates to {c} for {label}; "
            "a buffer needs a positive element count"
        )
        return None
    if c % a.vector_width:
        problems.append(
            f"args.{a.name}.count = {c} for {label} is not a multiple of {a.vector_width} "
            f"({a.base_type} holds {a.vector_width} scalars)"
        )
        return None
    nbytes = c * DTYPE_BYTES[a.dtype or "u8"]
    if nbytes > MAX_BUFFER_BYTES:
        problems.append(
            f"args.{a.name}.count = {c} for {label} needs {nbytes / 2**30:,.0f} GiB; a buffer may "
            f"hold at most {MAX_BUFFER_BYTES // 2**30} GiB (more than any GPU's memory)"
        )
        return None
    return c


def _plan_launch(
    fn: Function, spec: KernelSpec, names: dict[str, exprs.Value], label: str, problems: list[str]
) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None, int | None]:
    """Grid, block and dynamic shared memory of a ``__global__`` entry in one shape; all None for a launcher."""
    if fn.kind != "global":
        return None, None, None
    assert spec.launch is not None
    dims = launch_dims(spec.launch, names)
    if isinstance(dims, str):
        problems.append(f"launch ({label}): {dims}")
        return None, None, None
    g, b, smem = dims
    return (g[0], g[1], g[2]), (b[0], b[1], b[2]), smem


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
