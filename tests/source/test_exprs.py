"""The safe expression language of specs and rules: C-like arithmetic, logic, and a strict whitelist."""

from __future__ import annotations

import pytest

from kernellsp.source import exprs
from kernellsp.source.exprs import ExprError, evaluate, evaluate_int, parse


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("2 ** 10", 1024),
        ("1 << 20", 1048576),
        ("256 >> 4", 16),
        ("0xF0 & 0x3C", 0x30),
        ("8 | 1", 9),
        ("-N + 5", -3),
        ("N * N - 1", 63),
        ("7.0 / 2", 3.5),
        ("N / 2.0", 4.0),
        ("7 // 2", 3),
    ],
)
def test_arithmetic(text: str, want: float) -> None:
    assert evaluate(text, {"N": 8}) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("7 / 2", 3),
        ("-7 / 2", -3),  # C truncates toward zero; Python's // would give -4
        ("7 / -2", -3),
        ("-7 / -2", 3),
        ("1 / 3", 0),
        ("N / BLOCK", 4),
        ("(N + BLOCK - 1) / BLOCK", 4),
        ("(N + 1 + BLOCK - 1) / BLOCK", 5),
    ],
)
def test_integer_division_truncates_like_c(text: str, want: int) -> None:
    result = evaluate(text, {"N": 1024, "BLOCK": 256})
    assert result == want
    assert isinstance(result, int)


@pytest.mark.parametrize(("a", "b"), [(7, 2), (-7, 2), (7, -2), (-7, -2), (9, 3), (-1, 5)])
def test_integer_remainder_matches_c_division(a: int, b: int) -> None:
    """a == (a / b) * b + a % b must hold, as it does in C, for every sign combination."""
    q = evaluate("a / b", {"a": a, "b": b})
    r = evaluate("a % b", {"a": a, "b": b})
    assert q * b + r == a  # type: ignore[operator]
    assert abs(r) < abs(b)  # type: ignore[arg-type]
    assert r == 0 or (r > 0) == (a > 0)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("ceil_div(1000, 256)", 4),
        ("ceil_div(1024, 256)", 4),
        ("ceil_div(1025, 256)", 5),
        ("ceil_div(1, 256)", 1),
        ("ceil_div(0, 256)", 0),
        ("cdiv(N, 32)", 3),
        ("round_up(N, 32)", 96),
        ("round_up(64, 32)", 64),
        ("min(N, 16, 4)", 4),
        ("max(N, 16)", 65),
        ("abs(-3)", 3),
        ("int(3.9)", 3),
        ("log2(1024)", 10.0),
        ("sqrt(16)", 4.0),
        ("pct(1, 4)", 25.0),
        ("pct(1, 0)", 0.0),
    ],
)
def test_functions(text: str, want: float) -> None:
    assert evaluate(text, {"N": 65}) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("N > 3", True),
        ("N >= 65", True),
        ("N < 65", False),
        ("N <= 64", False),
        ("N == 65", True),
        ("N != 65", False),
        ("1 < N < 100", True),
        ("1 < N < 10", False),
        ("name == 'registers'", True),
        ("name != 'warps'", True),
        ("'reg' in name", True),
    ],
)
def test_comparisons(text: str, want: bool) -> None:
    assert evaluate(text, {"N": 65, "name": "registers"}) is want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a > 0 and b > 0", False),
        ("a > 0 or b > 0", True),
        ("not b", True),
        ("not a", False),
        ("a > 0 && b > 0", False),
        ("a > 0 || b > 0", True),
        ("!b", True),
        ("!a", False),
        ("!(a > 0)", False),
        ("a && !b", True),
        ("!a || !b", True),
        ("a != b", True),
        ("true && !false", True),
        ("false || True", True),
    ],
)
def test_logic_python_and_c_spellings(text: str, want: bool) -> None:
    assert bool(evaluate(text, {"a": 1, "b": 0})) is want


def test_short_circuit_skips_unknown_names_only_when_decided() -> None:
    assert evaluate("a == 0 and missing > 1", {"a": 1}) is False
    assert evaluate("a == 1 or missing > 1", {"a": 1}) is True
    with pytest.raises(ExprError, match="unknown name 'missing'"):
        evaluate("a == 1 and missing > 1", {"a": 1})


def test_conditional_expression_and_none_propagation() -> None:
    assert evaluate("256 if big else 128", {"big": True}) == 256
    assert evaluate("256 if big else 128", {"big": False}) == 128
    # A metric that is absent (None) makes arithmetic None and comparisons false, never an exception.
    assert evaluate("x + 1", {"x": None}) is None
    assert evaluate("x > 1", {"x": None}) is False
    assert evaluate("defined(x)", {"x": None}) is False
    assert evaluate("defined(x)", {"x": 3}) is True


@pytest.mark.parametrize("text", ["N + 1", "ceil_div(N, 256)", "max(N, M)"])
def test_unknown_names_raise(text: str) -> None:
    with pytest.raises(ExprError, match="unknown name"):
        evaluate(text, {})


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("x.__class__", "attribute access ('.__class__')"),
        ("x.__class__.__mro__", "attribute access"),
        ("(1).real", "attribute access"),
        ("a[0]", "indexing"),
        ("'abc'[1:]", "indexing"),
        ("lambda: 1", "a lambda is not allowed"),
        ("__import__('os')", "unknown function '__import__'"),
        ("eval('1')", "unknown function 'eval'"),
        ("open('/etc/passwd')", "unknown function 'open'"),
        ("max(a=1, b=2)", "keyword arguments"),
        ("ceil_div(N, b=2)", "keyword arguments"),
        ("[x for x in (1, 2)]", "a comprehension"),
        ("{1: 2}", "a dictionary"),
        ("f'{x}'", "an f-string"),
        ("(x := 3)", "an assignment"),
        ("x.y(1)", "can be called, not 'x.y'"),
        ("(lambda: 1)()", "can be called, not 'lambda: 1'"),
        # An injection attempt is named as what it is, never as "unknown function '?'".
        ("__import__('os').system('id')", "can be called, not \"__import__('os').system\""),
    ],
)
def test_disallowed_constructs_raise(text: str, why: str) -> None:
    with pytest.raises(ExprError) as info:
        parse(text)
    assert why in str(info.value)


@pytest.mark.parametrize("text", ["", "   ", "1 +", "(1", "if x", "a b"])
def test_unparseable_raises(text: str) -> None:
    with pytest.raises(ExprError):
        parse(text)


@pytest.mark.parametrize("text", ["1 / 0", "N % 0", "ceil_div(N, 0)", "2 ** 100", "1 + 'a'"])
def test_bad_operations_raise_expr_error_not_python_errors(text: str) -> None:
    with pytest.raises(ExprError):
        evaluate(text, {"N": 5})


def test_names_property_lists_free_names_but_not_functions() -> None:
    e = parse("ceil_div(N, BLOCK) * M + max(K, 2) > limit && !flag")
    assert e.names == frozenset({"N", "BLOCK", "M", "K", "limit", "flag"})
    assert parse("1 + 2").names == frozenset()
    assert parse("spill_stores + spill_loads > 0").names == {"spill_stores", "spill_loads"}


def test_parse_keeps_source_text_and_is_reusable() -> None:
    e = parse("  N * 2 ")
    assert e.text == "N * 2"
    assert e.evaluate({"N": 3}) == 6
    assert e.evaluate({"N": 10}) == 20


def test_numbers_pass_through_evaluate() -> None:
    assert evaluate(5, {}) == 5
    assert evaluate(2.5, {}) == 2.5
    assert evaluate(True, {}) is True


def test_evaluate_int() -> None:
    assert evaluate_int("N * 4", {"N": 3}) == 12
    assert evaluate_int("N / 2.0", {"N": 8}) == 4
    assert evaluate_int(7, {}) == 7
    with pytest.raises(ExprError, match="not an integer"):
        evaluate_int("N / 2.0", {"N": 3})
    with pytest.raises(ExprError, match="not a number"):
        evaluate_int("N > 2", {"N": 3})
    with pytest.raises(ExprError, match="not a number"):
        evaluate_int("x", {"x": None})


def test_function_whitelist_is_what_the_docs_promise() -> None:
    for name in ("ceil_div", "cdiv", "round_up", "min", "max", "defined"):
        assert name in exprs.FUNCTIONS
    for name in ("eval", "exec", "open", "__import__", "getattr", "print"):
        assert name not in exprs.FUNCTIONS
