"""SARIF for GitHub code scanning, with every rule family firing, validated against the SARIF 2.1.0 schema.

One workspace makes the static families fire through the real nvcc (KL0xx build and spec, KL1xx resources,
KL2xx launch, KL3xx hazards, KL4xx memory and precision); the profile families (KL5xx kernel, KL6xx line,
KL590 ncu's own rules) come from the real H100 report of ``saxpy_strided`` in ``tests/fixtures/ncu``.
The document must validate against the official schema (tests/fixtures/sarif-schema-2.1.0.json), and each
rule's tags must be unique (they were ``['cuda', 'hazard', 'hazard']`` for hazard and spec rules).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from helpers.common import SAMPLES_DIR, requires_nvcc

from kernellsp.check import CheckOptions, FileReport, check_paths
from kernellsp.profile import load_report
from kernellsp.profile.findings import profile_findings
from kernellsp.report.findings import format_sarif, sarif_tags
from kernellsp.rules.engine import load_rules
from kernellsp.source.model import parse_file
from kernellsp.source.spec import specs_from_source

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "tests" / "fixtures" / "sarif-schema-2.1.0.json"
H100 = ROOT / "tests" / "fixtures" / "ncu" / "samples-h100"

SPEC = """/* kernellsp
sizes = { N = 1048576 }
launch = { grid = "ceil_div(N, BLOCK)", block = BLOCK }
shapes = [{ N = 1000 }]
[args]
x = { dtype = "DTYPE", dir = "in", count = "N" }
y = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
"""
SCALE = """__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    BODY
}
"""
BLOCKSUM = """__global__ void blocksum(const float* __restrict__ x, float* __restrict__ y, int n)
{
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            s[threadIdx.x] += s[threadIdx.x + stride];
            __syncthreads();
        }
    }
    if (i < n) y[i] = s[0];
}
"""


def _scale(block: int = 256, dtype: str = "f32", body: str = "if (i < n) y[i] = 2.0f * x[i];") -> str:
    return SPEC.replace("BLOCK", str(block)).replace("DTYPE", dtype) + SCALE.replace("BODY", body)


def _workspace(ws: Path) -> None:
    ws.mkdir()
    files = {
        "build_error.cu": _scale(body="if (i < n) y[i] = 2.0f * x[i] +;"),  # KL001
        "warning.cu": _scale(body="int unused_counter = 0;\n    if (i < n) y[i] = 2.0f * x[i];"),  # KL002
        "bad_spec.cu": _scale(dtype="f64"),  # KL003
        "launch.cu": _scale(block=100),  # KL201
        "hazard.cu": BLOCKSUM,  # KL301, KL004
    }
    for name, text in files.items():
        (ws / name).write_text(text)
    for sample in ("median_filter", "reduce_atomic", "layernorm"):  # KL102/KL402, KL403, KL401 (+ KL405)
        shutil.copy(SAMPLES_DIR / f"{sample}.cu", ws / f"{sample}.cu")
    shutil.copy(H100 / "saxpy_strided.cu", ws / "saxpy_strided.cu")  # KL404, and the profile below


@requires_nvcc
def test_sarif_with_every_rule_family_validates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    _workspace(ws)
    monkeypatch.chdir(ws)
    report = check_paths([Path(".")], CheckOptions(use_cache=False))
    # The profile families, from the real H100 report of saxpy_strided.
    src = Path("saxpy_strided.cu")
    model = parse_file(src)
    bound = {b.entry: b for b in specs_from_source(model)[0]}
    prof = load_report(next(H100.glob("saxpy_strided.*.ncu-rep")), sass=False)
    found, _ = profile_findings(
        prof, model, str(src), load_rules(None), bound, {k.name: "saxpy_strided" for k in prof.kernels}
    )
    report.files.append(FileReport(path=str(src), findings=found, model=model))

    codes = {f.code for f in report.findings}
    families = {c[:3] for c in codes}
    assert families >= {"KL0", "KL1", "KL2", "KL3", "KL4", "KL5", "KL6"}, sorted(codes)
    assert {"KL001", "KL002", "KL003", "KL004", "KL301", "KL590"} <= codes, sorted(codes)

    doc = json.loads(format_sarif(report, load_rules(None)))
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    errors = sorted(validator(schema, format_checker=validator.FORMAT_CHECKER).iter_errors(doc), key=str)
    assert errors == [], [e.message for e in errors[:5]]

    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} == codes
    for r in rules:
        tags = r["properties"]["tags"]
        assert len(tags) == len(set(tags)), (r["id"], tags)
        assert tags[0] == "cuda" and tags[1] in ("correctness", "performance")
    by_id = {r["id"]: r["properties"]["tags"] for r in rules}
    assert by_id["KL301"] == ["cuda", "correctness", "hazard"]
    assert by_id["KL003"] == ["cuda", "correctness", "spec"]
    assert by_id["KL601"] == ["cuda", "performance", "memory", "profile"]
    assert len(run["results"]) == len(report.findings)
    assert all(
        res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith(".cu")
        for res in run["results"]
    )


def test_every_rule_has_unique_tags() -> None:
    ruleset = load_rules(None)
    for code in ruleset.rules:
        tags = sarif_tags(ruleset.rules[code])
        assert len(tags) == len(set(tags)), (code, tags)
