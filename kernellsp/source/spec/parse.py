"""Parsing spec text and binding spec comment blocks to their entries."""

from __future__ import annotations

import re
import tomllib
from typing import Any

from pydantic import BaseModel, ValidationError

from kernellsp.source.model import SourceModel
from kernellsp.source.spec.check import validate_against
from kernellsp.source.spec.models import (
    CTYPE_DTYPES,
    ArgSpec,
    BoundSpec,
    KernelSpec,
    LaunchSpec,
    SpecIssue,
    Tolerance,
    _line_of,
)

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
                    # What the refused fields would have said is not news ("x needs dtype" after a bad dtype);
                    # an issue of a field further up ("args: missing argument(s) y, n") still is.
                    if not any(
                        iss.field == r
                        or iss.field.startswith(r + ".")
                        or (r.startswith(iss.field + ".") and "." not in r[len(iss.field) + 1 :])
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
