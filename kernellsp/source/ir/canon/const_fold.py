"""``const-fold``: named compile-time integer constants in a kernel body become their values.

Sources of the names: file-scope (and namespace-scope) ``const``/``constexpr`` integer variables and
unnamed-``enum`` enumerators, ``#define`` macros whose replacement is a constant integer expression
are not folded: every reader resolves them through :func:`kernellsp.source.ir.cexpr.file_constants`
and their names are what the user reads in a binding or a rewrite. Folded are the template arguments of a kernel template that its entry
launches with one argument list (``k<256, float><<<...>>>``: ``BLOCK`` becomes ``256``, ``T``
becomes ``float``). A name a kernel declares itself (parameter or local) keeps its meaning.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kernellsp.source.ir.canon.unit import Change, Unit, declared_name, walk
from kernellsp.source.ir.cexpr import evaluate_text, file_constants, split_args
from kernellsp.source.spec.models import DTYPE_CTYPE

if TYPE_CHECKING:
    pass

NAME = "const-fold"
SUMMARY = "file-scope constexpr/const integers, constant #define expressions and template arguments folded to values"


_NULL = ("NULL", "nullptr", "0")


def _null_tests(unit: Unit, change: Change) -> None:
    """``p != NULL``, ``p == nullptr``, ``!p`` and ``p ? a : b`` of a parameter that always gets a buffer."""
    buffers = unit.launch.buffers if unit.launch is not None else frozenset()
    if not buffers:
        return
    for n in walk(unit.body):
        if n.type == "binary_expression":
            op = unit.text(n.child_by_field_name("operator"))
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if op not in ("==", "!=") or left is None or right is None:
                continue
            sides = {unit.text(left).strip(), unit.text(right).strip()}
            ptr = next((s for s in sides if s in buffers), None)
            if ptr is not None and (sides - {ptr}) <= set(_NULL) and len(sides) == 2:
                change.replace(n, "1" if op == "!=" else "0")
                change.notes.append(f"`{unit.text(n)}`: {ptr} always gets a buffer")
        elif n.type == "conditional_expression":
            cond = n.child_by_field_name("condition")
            if cond is not None and unit.text(cond).strip("() ") in buffers:
                change.replace(cond, "1")
                change.notes.append(
                    f"`{unit.text(cond)} ? ...`: {unit.text(cond).strip('() ')} always gets a buffer"
                )


def _constant_choices(unit: Unit, change: Change) -> None:
    """``c ? a : b`` and ``if (c) ...`` whose condition is a constant (after the folds above) take their branch."""
    for n in walk(unit.body):
        if n.type != "conditional_expression":
            continue
        cond = n.child_by_field_name("condition")
        text = unit.text(cond)
        if cond is None or any(ch.isalpha() or ch == "_" for ch in text):
            continue
        v = evaluate_text(text)
        if v is None:
            continue
        branch = n.child_by_field_name("consequence" if v else "alternative")
        if branch is not None:
            change.replace(n, f"({unit.text(branch)})")
            change.notes.append(
                f"`{' '.join(unit.text(n).split())}` is always its {'first' if v else 'second'} branch"
            )
            return


def run(unit: Unit) -> Change | None:
    # `#define` constants keep their names: every reader resolves them (cexpr.file_constants), and the
    # name is what the user reads in a binding or a rewrite (`float window[MAX_WINDOW]`).
    values = {k: str(v) for k, v in file_constants(unit.model).items() if k not in unit.model.defines}
    values.update(_template_arguments(unit))
    change = Change()
    _null_tests(unit, change)
    if not change:
        _constant_choices(unit, change)
    if change:
        return change
    if not values:
        return None
    own = _own_names(unit)
    change = Change()
    done: dict[str, str] = {}
    for n in walk(unit.body):
        if n.type not in ("identifier", "type_identifier"):
            continue
        name = unit.text(n)
        if name not in values or name in own:
            continue
        p = n.parent
        if p is not None and p.type == "field_expression" and p.child_by_field_name("field") == n:
            continue
        if p is not None and p.type in ("preproc_def", "preproc_function_def", "preproc_defined"):
            continue
        change.replace(n, values[name])
        done[name] = values[name]
    change.notes.extend(f"{k} = {v}" for k, v in sorted(done.items()))
    return change


def _template_arguments(unit: Unit) -> dict[str, str]:
    """Template parameter -> argument text, when every launch of the kernel names the same arguments."""
    tp = unit.fn.template_params
    if not tp:
        return {}
    params = [p.strip() for p in split_args(tp.strip().strip("<>"))]
    names = []
    for p in params:
        m = re.search(r"([A-Za-z_]\w*)\s*(?:=.*)?$", p)
        names.append(m.group(1) if m else "")
    sites = [s for s in unit.model.launch_sites if s.kernel == unit.fn.name]
    if not sites or any(s.template_args is None for s in sites) or _deduced(unit, names, sites):
        return _types_from_buffers(unit, names)
    arg_lists = {tuple(split_args((s.template_args or "").strip().strip("<>"))) for s in sites}
    if len(arg_lists) != 1:
        return {}
    args = list(arg_lists.pop())
    out: dict[str, str] = {}
    consts = file_constants(unit.model)
    for name, arg in zip(names, args, strict=False):
        if not name:
            continue
        v = evaluate_text(arg, dict(consts), unit.model)
        out[name] = str(v) if v is not None else arg
    return out


def _deduced(unit: Unit, names: list[str], sites: list[Any]) -> bool:
    """The launches name template parameters of their own (a launcher template passing its ``T`` on)."""
    args = " ".join(s.template_args or "" for s in sites)
    return any(re.search(rf"\b{re.escape(n)}\b", args) for n in names if n)


def _types_from_buffers(unit: Unit, names: list[str]) -> dict[str, str]:
    """A type parameter is the C type of the spec buffers a pointer parameter of that type receives."""
    out: dict[str, str] = {}
    dtypes = unit.launch.dtypes if unit.launch is not None else {}
    for p in unit.fn.params:
        base = p.base_type.replace("const", "").replace("*", "").strip()
        if p.is_pointer and base in names and p.name in dtypes:
            ctype = DTYPE_CTYPE.get(dtypes[p.name])
            if ctype is not None and out.get(base, ctype) == ctype:
                out[base] = ctype
    return out


def _own_names(unit: Unit) -> set[str]:
    """Names the kernel declares itself: its parameters and locals."""
    own = {p.name for p in unit.fn.params}
    for n in walk(unit.body):
        if n.type == "declaration":
            own.update(name for name, _n, _v in declared_name(n, unit.data))
    return own
