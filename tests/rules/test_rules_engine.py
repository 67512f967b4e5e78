"""The rule matrix engine: bundled rules, validation of rule files, workspace overrides, safe rendering."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernellsp.cli import app
from kernellsp.rules import engine as rules
from kernellsp.rules.engine import Rule, RuleError, load_rule_file, load_rules

BUNDLED = rules.bundled_rules_dir()
RULE_FILES = sorted(BUNDLED.glob("*.toml"))

VALID = """\
code = "KL950"
name = "big-blocks"
title = "Blocks of 512 threads or more"
severity = "info"
scope = "kernel"
category = "launch"
when = "block_size >= 512"
message = "{kernel} launches {block_size} threads per block ({block_source})"
fix = "Consider smaller blocks."
guidance = "Large blocks leave fewer scheduling choices."
"""


def _write(d: Path, name: str, text: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text(text, encoding="utf-8")
    return p


def test_bundled_rules_load() -> None:
    rs = load_rules(None)
    codes = set(rs.rules)
    static = {
        "KL001",
        "KL002",
        "KL003",
        "KL004",
        "KL101",
        "KL102",
        "KL103",
        "KL104",
        "KL201",
        "KL202",
        "KL301",
        "KL302",
        "KL303",
        "KL401",
        "KL402",
        "KL403",
        "KL404",
        "KL405",
    }
    assert static <= codes
    assert len(codes) == len(RULE_FILES)
    assert [r.code for r in rs.sorted()] == sorted(codes)
    assert rs.by_emitter("nvcc-error") is rs.get("KL001")
    assert rs.by_emitter("missing-spec") is rs.get("KL004")
    assert {r.code for r in rs.conditional("kernel")} >= {
        "KL101",
        "KL102",
        "KL103",
        "KL104",
        "KL201",
        "KL202",
        "KL405",
    }
    assert {r.code for r in rs.conditional("line")} >= {
        "KL301",
        "KL302",
        "KL303",
        "KL401",
        "KL402",
        "KL403",
        "KL404",
    }


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_every_rule_file_is_complete(path: Path) -> None:
    rule = load_rule_file(path)
    assert path.name.startswith(rule.code + "-"), "file name starts with the rule's code"
    for fld in ("code", "name", "title", "message", "fix", "guidance", "category"):
        assert getattr(rule, fld).strip(), f"{path.name}: empty {fld}"
    assert len(" ".join(rule.guidance.split())) >= 80, f"{path.name}: guidance should explain, not just name"
    assert rule.origin == str(path)
    assert (rule.when is None) != (rule.emitter is None)
    assert rule.severity.value in ("error", "warning", "info", "hint")


def test_cli_rules_lists_every_rule() -> None:
    result = CliRunner().invoke(app, ["rules"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == len(RULE_FILES)
    kl101 = next(ln for ln in lines if ln.startswith("KL101"))
    assert kl101.split()[:4] == ["KL101", "warning", "kernel", "static"]
    assert "register-spills: Registers spill to local memory" in kl101
    assert any(ln.startswith("KL004  hint") for ln in lines)


def test_cli_rules_show() -> None:
    result = CliRunner().invoke(app, ["rules", "show", "kl101"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("KL101 register-spills: Registers spill to local memory\n")
    assert "  when:     spill_stores + spill_loads > 0" in out
    assert "severity: warning" in out and "scope: kernel" in out
    assert "ptxas ran out of registers" in out  # guidance
    assert "see https://docs.nvidia.com/" in out
    assert "KL101-register-spills.toml" in out
    result = CliRunner().invoke(app, ["rules", "show", "KL001"])
    assert "  emitter:  nvcc-error" in result.output
    result = CliRunner().invoke(app, ["rules", "show", "KL999"])
    assert result.exit_code == 2
    assert "no rule 'KL999'" in result.output


# --------------------------------------------------------------------------------------------------
# Malformed rule files


@pytest.mark.parametrize(
    ("mutate", "field", "why"),
    [
        (
            lambda t: t.replace('title = "Blocks of 512 threads or more"\n', ""),
            "title",
            "required field is missing",
        ),
        (lambda t: t + 'colour = "red"\n', "colour", "unknown field"),
        (
            lambda t: t.replace('"block_size >= 512"', '"block_sise >= 512"'),
            "when",
            "unknown metric 'block_sise'",
        ),
        (
            lambda t: t.replace('"block_size >= 512"', '"unguarded_accesses > 0"'),
            "when",
            "'unguarded_accesses' is a line metric but the rule's scope is kernel",
        ),
        (lambda t: t.replace('"block_size >= 512"', '"block_size >= "'), "when", "cannot parse"),
        (
            lambda t: t.replace('"block_size >= 512"', '"block_size.__class__"'),
            "when",
            "attribute access ('.__class__') is not allowed",
        ),
        (lambda t: t.replace('"block_size >= 512"', "\"__import__('os')\""), "when", "unknown function"),
        (lambda t: t.replace("{block_size}", "{block_size:%%}"), "message", "bad format spec '%%'"),
        (lambda t: t.replace("{block_source}", "{nope}"), "message", "unknown metric 'nope'"),
        (lambda t: t.replace('"KL950"', '"KL95"'), "code", "must look like KL123"),
        (lambda t: t.replace('"KL950"', '"XX950"'), "code", "must look like KL123"),
        (lambda t: t.replace('"info"', '"fatal"'), "severity", "Input should be"),
        (
            lambda t: t.replace('"kernel"', '"file"', 1).replace('when = "block_size >= 512"\n', ""),
            "(file)",
            "exactly one of 'when'",
        ),
        (lambda t: t.replace('"kernel"', '"module"', 1), "scope", "Input should be"),
    ],
    ids=[
        "missing-title",
        "unknown-field",
        "unknown-metric",
        "line-metric-in-kernel-rule",
        "bad-expression",
        "attribute-in-when",
        "call-in-when",
        "bad-format-spec",
        "unknown-placeholder",
        "short-code",
        "bad-prefix",
        "bad-severity",
        "neither-when-nor-emitter",
        "bad-scope",
    ],
)
def test_malformed_rule_file_names_file_and_field(tmp_path: Path, mutate, field: str, why: str) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, "KL950-big.toml", mutate(VALID))
    with pytest.raises(RuleError) as info:
        load_rule_file(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: field '{field}'"), msg
    assert why in msg


def test_bad_toml_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "KL950-big.toml", VALID.replace('severity = "info"', "severity = info"))
    with pytest.raises(RuleError) as info:
        load_rule_file(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: not valid TOML")
    assert "line 4" in msg


def test_unreadable_rule_file(tmp_path: Path) -> None:
    path = tmp_path / "KL950-big.toml"
    path.write_bytes(b'code = "\xff\xfe"\n')
    with pytest.raises(RuleError, match="cannot read"):
        load_rule_file(path)


def test_valid_format_specs_load(tmp_path: Path) -> None:
    text = VALID.replace("{block_size}", "{block_size:d} ({block_size:>6}, {block_size:#x})").replace(
        "{block_source}", "{block_source:>10}"
    )
    rule = load_rule_file(_write(tmp_path, "KL950-big.toml", text))
    assert rules.render(rule.message, {"kernel": "k", "block_size": 512, "block_source": "spec"}) == (
        "k launches 512 (   512, 0x200) threads per block (      spec)"
    )


def test_duplicate_code_in_one_directory(tmp_path: Path) -> None:
    d = tmp_path / "ws" / ".kernellsp" / "rules"
    _write(d, "KL950-a.toml", VALID)
    _write(d, "KL950-b.toml", VALID.replace('name = "big-blocks"', 'name = "big-blocks-2"'))
    with pytest.raises(RuleError) as info:
        load_rules(tmp_path / "ws")
    msg = str(info.value)
    assert msg.startswith(f"{d / 'KL950-b.toml'}: field 'code'")
    assert "KL950 is also used by" in msg and "KL950-a.toml" in msg


def test_workspace_rules_with_an_error_fail_the_whole_load(tmp_path: Path) -> None:
    d = tmp_path / "ws" / ".kernellsp" / "rules"
    _write(d, "KL950-big.toml", VALID.replace("block_size >= 512", "registerz > 1"))
    with pytest.raises(RuleError, match="unknown metric 'registerz'"):
        load_rules(tmp_path / "ws")


def test_builtin_rule_placeholders_are_checked(tmp_path: Path) -> None:
    text = (
        (BUNDLED / "KL001-compile-error.toml")
        .read_text()
        .replace('message = "{message}"', 'message = "{oops}"')
    )
    with pytest.raises(RuleError, match=r"field 'message': unknown placeholder \{oops\}"):
        load_rule_file(_write(tmp_path, "KL001-x.toml", text))


# --------------------------------------------------------------------------------------------------
# Workspace overrides, seen through `kernellsp check`

KERNEL = """\
/* kernellsp
sizes = { N = 100000 }
launch = { grid = "ceil_div(N, 512)", block = 512 }
shapes = [{ N = 1000 }]
[args]
x = { dtype = "f32", dir = "in", count = "N" }
y = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void scale(const float* x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


def test_workspace_rules_override_and_add(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    _write(ws, "k.cu", KERNEL)
    monkeypatch.chdir(ws)
    runner = CliRunner()
    before = runner.invoke(app, ["check", "--no-build", "k.cu"])
    assert before.exit_code == 1, before.output
    assert "k.cu:10:17: info: KL405 scale only reads x" in before.output
    assert "KL950" not in before.output

    d = ws / ".kernellsp" / "rules"
    kl405 = (BUNDLED / "KL405-readonly-not-restrict.toml").read_text(encoding="utf-8")
    kl405 = kl405.replace('severity = "info"', 'severity = "error"')
    kl405 = kl405.replace('message = "{kernel} only reads', 'message = "TEAM POLICY: {kernel} only reads')
    _write(d, "KL405-team.toml", kl405)
    _write(d, "KL950-big.toml", VALID)
    after = runner.invoke(app, ["check", "--no-build", "k.cu"])
    assert after.exit_code == 1, after.output
    assert "k.cu:10:17: error: KL405 TEAM POLICY: scale only reads x" in after.output
    assert "k.cu:10:17: info: KL950 scale launches 512 threads per block (spec)" in after.output
    rs = load_rules(ws)
    assert rs.get("KL405") is not None and rs.get("KL405").origin == str(d / "KL405-team.toml")  # type: ignore[union-attr]
    assert rs.get("KL101") is not None and rs.get("KL101").origin.startswith(str(BUNDLED))  # type: ignore[union-attr]

    listed = runner.invoke(app, ["rules"])
    assert "KL950  info" in listed.output and "KL405  error" in listed.output

    # With --fail-on error, the overridden severity now decides the exit code.
    _write(d, "KL405-team.toml", kl405.replace('severity = "error"', 'severity = "hint"'))
    relaxed = runner.invoke(app, ["check", "--no-build", "--fail-on", "warning", "k.cu"])
    assert relaxed.exit_code == 0, relaxed.output
    assert "hint: KL405 TEAM POLICY" in relaxed.output


# --------------------------------------------------------------------------------------------------
# Evaluation and rendering


def test_applies_and_missing_inputs() -> None:
    rule = Rule.model_validate(tomllib.loads(VALID))
    assert rules.applies(rule, {"block_size": 1024})
    assert not rules.applies(rule, {"block_size": 256})
    assert not rules.applies(rule, {}), "a rule whose metrics are absent stays silent"
    assert not rules.applies(rule, {"block_size": None})
    assert not rules.applies(rule, {"block_size": "spec"}), "a type error is silence, not a crash"


def test_render_fills_placeholders() -> None:
    out = rules.render(
        "{kernel}: {occupancy_pct:.0f}% ({spill}) {flag} {missing}",
        {"kernel": "k", "occupancy_pct": 37.5, "spill": 0, "flag": True},
    )
    assert out == "k: 38% (0) yes ?"
    assert rules.render("{x:.2f}", {"x": "not a number"}) == "not a number"


class _Boom:
    def __format__(self, spec: str) -> str:  # pragma: no cover - must never be reached via attributes
        raise AssertionError("render reached into an object")

    def __getattr__(self, name: str) -> str:
        raise AssertionError(f"render evaluated attribute {name}")


def test_render_never_evaluates_attribute_access_or_indexing() -> None:
    values = {"kernel": "k", "obj": _Boom(), "items": [1, 2]}
    template = "{kernel.__class__} {kernel.__class__.__mro__} {items[0]} {obj.secret} {kernel!r} {kernel}"
    out = rules.render(template, values)
    assert out == "{kernel.__class__} {kernel.__class__.__mro__} {items[0]} {obj.secret} {kernel!r} k"
    assert "<class" not in out


def test_rule_with_attribute_placeholder_loads_but_renders_literally(tmp_path: Path) -> None:
    text = VALID.replace("({block_source})", "({kernel.__class__})")
    rule = load_rule_file(_write(tmp_path, "KL950-big.toml", text))
    out = rules.render(rule.message, {"kernel": "k", "block_size": 512})
    assert out == "k launches 512 threads per block ({kernel.__class__})"


def test_impact() -> None:
    rule = Rule.model_validate({**tomllib.loads(VALID), "impact": "block_size / 10"})
    assert rules.impact(rule, {"block_size": 1000}) == 100.0
    assert rules.impact(rule, {}) == 0.0
    assert rules.impact(Rule.model_validate(tomllib.loads(VALID)), {"block_size": 1}) == 0.0
