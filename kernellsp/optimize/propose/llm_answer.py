"""The answer's JSON, before any of it is read as a candidate: the one JSON object of a model's answer (the
whole text, or its one ```json fenced block), and the type checks :class:`~kernellsp.optimize.propose.llm.LlmProposer`
applies to its fields. Every problem is an :class:`AnswerError` whose message goes back to the model."""

from __future__ import annotations

import json
import math
import re
from typing import Any

_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)\r?\n[ \t]*```", re.S)


class AnswerError(ValueError):
    """The model's answer cannot be used; the message is sent back to the model verbatim."""


def is_number(v: Any) -> bool:
    if not isinstance(v, int | float) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer too large for a float is not a usable number here
        return False


def type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(v), type(v).__name__)


def is_dim(v: Any) -> bool:
    return (isinstance(v, str) and v.strip() != "") or (isinstance(v, int) and not isinstance(v, bool))


def extract_json(content: str) -> Any:
    """The JSON value of an answer: the whole text, or the body of its one fenced block."""
    s = content.strip()
    if not s:
        raise AnswerError("the answer is empty; reply with the JSON object")
    if s.startswith("{"):
        body = s
    else:
        fences = list(_FENCE.finditer(s))
        if len(fences) > 1:
            raise AnswerError(
                f"the answer holds {len(fences)} fenced blocks; give one JSON object, "
                "optionally inside a single ```json block"
            )
        if not fences:
            raise AnswerError(
                f"the answer is not a JSON object (it begins with {s[:40]!r}); reply with the "
                "JSON object only"
            )
        if fences[0].group(1).lower() not in ("", "json"):
            raise AnswerError(
                f"the fenced block is marked {fences[0].group(1)!r}; it must be a ```json block "
                "holding the JSON object"
            )
        body = fences[0].group(2)
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise AnswerError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise AnswerError(f"not valid JSON: {exc}") from None
    except RecursionError:
        raise AnswerError("not valid JSON: nested too deeply") from None
