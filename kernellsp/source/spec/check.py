"""Validation of a spec against the entry's signature, and the launch dimensions of a spec."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, Literal

from kernellsp.source import exprs
from kernellsp.source.model import Function, Param, SourceModel
from kernellsp.source.spec.models import (
    CTYPE_DTYPES,
    DTYPES,
    VECTOR_WIDTH,
    ArgSpec,
    BoundSpec,
    KernelSpec,
    LaunchSpec,
    SpecIssue,
)

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


#: Adds one issue on a field: ``add(field, message, severity="error")``.
_Add = Callable[..., None]


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
    missing, extra = _check_arg_names(add, spec, fn, params)
    _check_entry_kind(add, spec, fn)

    has_output = False
    for name, arg in spec.args.items():
        p = params.get(name)
        if p is None:
            continue
        if p.is_pointer:
            has_output = _check_pointer_arg(add, name, arg, p) or has_output
        else:
            _check_scalar_arg(add, name, arg, p, fn, model)
    if fn.kind in ("global", "host") and not has_output and not missing and not extra:
        add("args", 'no argument has dir = "out" or "inout": there is nothing to check')

    # Evaluate sizes, counts and launch for every shape.
    for si, shape in enumerate(spec.all_shapes()):
        _check_shape(add, spec, fn, params, shape, "sizes" if si == 0 else f"shapes.{si - 1}")
    if spec.reference and model is not None and model.function(spec.reference) is None:
        add("reference", f"no function named {spec.reference!r} in this file")
    return out


def _check_arg_names(
    add: _Add, spec: KernelSpec, fn: Function, params: dict[str, Param]
) -> tuple[list[str], list[str]]:
    """Every parameter described once, in signature order; returns the missing and the extra names."""
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
    return missing, extra


def _check_entry_kind(add: _Add, spec: KernelSpec, fn: Function) -> None:
    """A kernel needs a launch, a host launcher must not have one, a ``__device__`` function is no entry."""
    if fn.kind == "global":
        if spec.launch is None:
            add("launch", f"{fn.name} is a __global__ kernel: give launch = {{ grid = ..., block = ... }}")
    elif fn.kind == "host":
        if spec.launch is not None:
            add("launch", f"{fn.name} is a host launcher: it launches its own kernels, so remove launch")
    else:
        add("entry", f"{fn.name} is a __device__ function; an entry must be __global__ or a host launcher")


def _check_pointer_arg(add: _Add, name: str, arg: ArgSpec, p: Param) -> bool:
    """A buffer argument: dtype, dir and count given, dtype matching the C type; returns whether it is an output."""
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
    is_output = False
    if arg.dir in ("out", "inout"):
        is_output = True
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
    return is_output


def _check_scalar_arg(
    add: _Add, name: str, arg: ArgSpec, p: Param, fn: Function, model: SourceModel | None
) -> None:
    """A scalar argument: a value only; a struct passed by value cannot be described yet."""
    if dtype_for_ctype(p.base_type) is None and f"{p.name} ({p.base_type.strip()})" in _struct_params(
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


def _check_shape(
    add: _Add, spec: KernelSpec, fn: Function, params: dict[str, Param], shape: dict[str, int], label: str
) -> None:
    """One shape (``label``: ``sizes`` or ``shapes.I``): its sizes, every count and value, and the launch."""
    try:
        names = spec.resolved_sizes(shape)
    except exprs.ExprError as exc:
        add(label, str(exc))
        return
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
            _check_count(add, name, arg.count, p, names, label)
        if not p.is_pointer and isinstance(arg.value, str):
            try:
                exprs.evaluate(arg.value, names)
            except exprs.ExprError as exc:
                add(f"args.{name}.value", f"{exc} ({label})")
    if spec.launch is not None and fn.kind == "global":
        _check_launch(add, spec.launch, fn, names, label)


def _check_count(
    add: _Add, name: str, count: str | int, p: Param, names: dict[str, exprs.Value], label: str
) -> None:
    """A buffer's count evaluates to a positive whole number of its C elements."""
    try:
        c = exprs.evaluate_int(count, names)
        if c <= 0:
            add(
                f"args.{name}.count",
                f"count {count!r} = {c} for {label}; it must be positive",
            )
        width = VECTOR_WIDTH.get(p.base_type.replace("const", "").strip(), 1)
        if c % width:
            add(
                f"args.{name}.count",
                f"count {c} is not a multiple of {width} ({p.base_type} holds {width})",
            )
    except exprs.ExprError as exc:
        add(f"args.{name}.count", f"{exc} ({label})")


def _check_launch(
    add: _Add, launch: LaunchSpec, fn: Function, names: dict[str, exprs.Value], label: str
) -> None:
    """The launch evaluates within CUDA's limits and the kernel's ``__launch_bounds__``."""
    dims = launch_dims(launch, names)
    if isinstance(dims, str):
        add("launch", f"{dims} ({label})")
        return
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
