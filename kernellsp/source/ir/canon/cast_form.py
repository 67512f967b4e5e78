"""``cast-form``: every conversion of a scalar written as a C cast ``(T)(e)``.

``static_cast<float>(x)``, ``float(x)`` and ``(float)x`` convert the same way for arithmetic types;
readers (the product analysis reading an initial value ``static_cast<T>(0)``, the IR's polynomial
reader) meet one spelling. ``reinterpret_cast``, ``const_cast``, casts of pointers and functional
casts of class types (``dim3(...)``, ``float2(...)``) are left alone.
"""

from __future__ import annotations

import re

from kernellsp.source.ir.canon.unit import Change, Unit, walk

NAME = "cast-form"
SUMMARY = "static_cast<T>(e) and functional casts T(e) of scalar types written as C casts (T)(e)"

_SCALARS = frozenset(
    [
        "int",
        "unsigned",
        "float",
        "double",
        "long",
        "short",
        "char",
        "bool",
        "size_t",
        "uint",
        "int32_t",
        "uint32_t",
        "int64_t",
        "uint64_t",
        "int8_t",
        "uint8_t",
        "int16_t",
        "uint16_t",
        "half",
        "__half",
        "__nv_bfloat16",
        "ptrdiff_t",
    ]
)


def _scalar(unit: Unit, type_text: str) -> bool:
    words = type_text.replace("const", " ").split()
    tparams = set(re.findall(r"(?:typename|class)\s+(\w+)", unit.fn.template_params or ""))
    return bool(words) and "*" not in type_text and all(w in _SCALARS or w in tparams for w in words)


def run(unit: Unit) -> Change | None:
    change = Change()
    for n in walk(unit.body):
        if n.type != "call_expression":
            continue
        f = n.child_by_field_name("function")
        args = n.child_by_field_name("arguments")
        inner = [c for c in args.named_children if c.type != "comment"] if args is not None else []
        if f is None or len(inner) != 1:
            continue
        ftext = unit.text(f)
        m = re.fullmatch(r"static_cast\s*<\s*([^<>]+?)\s*>", ftext)
        ctype = m.group(1) if m else (ftext if f.type in ("identifier", "primitive_type") else None)
        if ctype is None or not _scalar(unit, ctype):
            continue
        change.replace(n, f"(({ctype})({unit.text(inner[0])}))")
        change.notes.append(f"`{' '.join(unit.text(n).split())}` -> (({ctype})(...))")
        return change  # one at a time: casts nest
    return None
