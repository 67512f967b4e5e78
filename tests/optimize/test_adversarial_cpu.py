"""The adversarial corpus (tests/adversarial/), checked without a GPU.

Every candidate is a full copy of a sample with one cheating, wrong or correct edit. Here: the
manifest is well formed; every file exists and parses; every ``gate = "scope"`` case is refused by
the scope gate exactly as :func:`kernellsp.optimize.verify.gate.verify` calls it, with a reason naming the problem;
every ``gate = "gpu"`` case passes the scope gate and its launch spec, and its harness builds with the
real nvcc (the ``compile_error`` case must not); the precision-downgrade cases really fall outside the
spec's tolerance (simulated with numpy). tests/optimize/test_adversarial_gpu.py runs the GPU gates.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.common import requires_nvcc

from kernellsp.optimize.verify import correctness as compare
from kernellsp.optimize.verify.gate import VERDICTS
from kernellsp.optimize.verify.scope import check_scope, edit_targets
from kernellsp.run import harness
from kernellsp.run import harness_build as hb
from kernellsp.source import spec
from kernellsp.source.model import parse_source

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "adversarial"
MANIFEST = CORPUS / "manifest.toml"


def load_cases() -> list[dict[str, Any]]:
    return tomllib.loads(MANIFEST.read_text())["case"]


CASES = load_cases()
BY_NAME = {c["name"]: c for c in CASES}
SCOPE_CASES = [c for c in CASES if c["gate"] == "scope"]
GPU_CASES = [c for c in CASES if c["gate"] == "gpu"]


def expected(case: dict[str, Any]) -> list[str]:
    return list(case["expect_any"]) if "expect_any" in case else [case["expect"]]


def _scope(case: dict[str, Any]) -> Any:
    """The scope gate, called as verify() calls it."""
    base = (REPO / case["baseline"]).read_text()
    cand = (REPO / case["candidate"]).read_text()
    targets = edit_targets(parse_source(base, str(REPO / case["baseline"])), case["entry"])
    assert targets, f"{case['name']}: {case['entry']} launches no kernel of {case['baseline']}"
    return check_scope(base, cand, targets, str(REPO / case["baseline"]))


def _candidate_plan(case: dict[str, Any]) -> harness.HarnessPlan:
    """The candidate's harness plan, as verify() builds it (the candidate's own launch spec)."""
    path = REPO / case["candidate"]
    cmodel = parse_source(path.read_text(), str(path))
    bound = next(b for b in spec.specs_from_source(cmodel)[0] if b.entry == case["entry"])
    problems = [
        i
        for i in spec.validate_against(bound, cmodel.function(case["entry"]), cmodel)
        if i.severity == "error"
    ]
    assert not problems, f"{case['name']}: invalid launch spec: {problems[0].message}"
    return harness.plan_harness(cmodel, bound.spec, case["entry"])


# --------------------------------------------------------------------------------------------------
# The manifest


def test_manifest_is_well_formed() -> None:
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    for c in CASES:
        for key in ("name", "baseline", "candidate", "entry", "gate", "pitfall", "why"):
            assert isinstance(c.get(key), str) and c[key], f"{c.get('name')}: missing {key}"
        assert ("expect" in c) != ("expect_any" in c), f"{c['name']}: give exactly one of expect / expect_any"
        kinds = expected(c)
        assert kinds and all(k in VERDICTS for k in kinds), f"{c['name']}: unknown verdict in {kinds}"
        assert c["gate"] in ("scope", "gpu"), c["name"]
        if c["gate"] == "scope":
            assert kinds == ["scope_violation"] and c.get("scope_reason"), c["name"]
        else:
            assert "scope_violation" not in kinds, c["name"]
        assert isinstance(c.get("known_gap", False), bool), c["name"]
        assert not (c.get("known_gap") and "accepted" in kinds), f"{c['name']}: a known gap is a cheat"
        assert c["candidate"] == f"tests/adversarial/{c['name']}.cu", c["name"]
        assert c["baseline"].startswith(("samples/", "tests/adversarial/baselines/")), c["name"]
        # `sandbox`: what the sandbox names when a scope case's host code runs anyway (tests/run/test_sandbox.py).
        assert "sandbox" not in c or (
            c["gate"] == "scope" and isinstance(c["sandbox"], str) and c["sandbox"]
        ), c["name"]


def test_every_extra_baseline_is_used_and_valid() -> None:
    """Baselines outside samples/ (a kernel with #if __CUDA_ARCH__ ...) are real files that verify accepts."""
    extra = sorted(p.relative_to(REPO).as_posix() for p in (CORPUS / "baselines").glob("*.cu"))
    assert extra, "no baselines in tests/adversarial/baselines"
    used = {c["baseline"] for c in CASES}
    for rel in extra:
        assert rel in used, f"{rel} is used by no case"
        m = parse_source((REPO / rel).read_text(), rel)
        assert not m.syntax_errors
        bound = spec.specs_from_source(m)[0]
        assert bound and not [
            i for i in spec.validate_against(bound[0], m.function(bound[0].entry), m) if i.severity == "error"
        ]
        assert check_scope(m.text, m.text, edit_targets(m, bound[0].entry), rel, bound[0].entry).ok


def test_every_candidate_file_is_in_the_manifest() -> None:
    on_disk = {p.stem for p in CORPUS.glob("*.cu")}
    assert on_disk == set(BY_NAME), (
        f"not in the manifest: {on_disk - set(BY_NAME)}; missing files: {set(BY_NAME) - on_disk}"
    )


def test_corpus_size() -> None:
    wrong = [c for c in CASES if expected(c) != ["accepted"]]
    correct = [c for c in CASES if "expect" in c and c["expect"] == "accepted"]
    assert len(wrong) >= 18, len(wrong)
    assert len(correct) >= 6, len(correct)
    assert len([c for c in wrong if c["gate"] == "gpu"]) >= 12
    # Every GPU gate is exercised by at least one case.
    kinds = {k for c in CASES for k in expected(c)}
    for k in (
        "scope_violation",
        "compile_error",
        "runtime_error",
        "input_mutated",
        "unwritten_output",
        "mismatch",
        "sanitizer",
        "not_faster",
        "accepted",
    ):
        assert k in kinds, k


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_files_exist_and_parse(case: dict[str, Any]) -> None:
    base = REPO / case["baseline"]
    cand = REPO / case["candidate"]
    assert base.is_file() and cand.is_file()
    bm = parse_source(base.read_text(), str(base))
    cm = parse_source(cand.read_text(), str(cand))
    assert not bm.syntax_errors
    assert not cm.syntax_errors, f"tree-sitter: syntax error at line {cm.syntax_errors[0].start_line + 1}"
    assert cm.function(case["entry"]) is not None
    assert cand.read_text() != base.read_text()
    # A full copy of the sample: the same entry, and the baseline's first line (the file's header comment).
    assert cand.read_text().splitlines()[0] == base.read_text().splitlines()[0]


# --------------------------------------------------------------------------------------------------
# The scope gate


@pytest.mark.parametrize("case", SCOPE_CASES, ids=lambda c: c["name"])
def test_scope_cases_are_refused_with_a_reason(case: dict[str, Any]) -> None:
    r = _scope(case)
    assert not r.ok, f"{case['name']} passed the scope gate: {case['why']}"
    assert case["scope_reason"].lower() in r.reason.lower(), r.reason


@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c["name"])
def test_gpu_cases_pass_the_scope_gate_and_plan(case: dict[str, Any]) -> None:
    r = _scope(case)
    assert r.ok, f"{case['name']} would stop at the scope gate: {r.reason}"
    plan = _candidate_plan(case)
    assert plan.entry == case["entry"]


_VADD = (REPO / "samples" / "vector_add.cu").read_text()
_VADD_FIRST = "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"


@pytest.mark.parametrize(
    ("decl", "ok"),
    [
        ("    static float cache[1024];\n", False),
        ("    static const float* last_a = nullptr;\n", False),
        ("    static __device__ int flag;\n", False),
        ("    extern float elsewhere;\n", False),
        ("    for (int k = 0; k < 1; ++k) { static int inner; }\n", False),
        ("    static __shared__ float tile[32];\n", True),
        ("    __shared__ static float tile2[32];\n", True),
        ("    extern __shared__ float dyn[];\n", True),
        ("    constexpr int kTile = 32;\n", True),
        ("    const float half = 0.5f;\n", True),
    ],
)
def test_scope_refuses_function_scope_state_that_outlives_a_launch(decl: str, ok: bool) -> None:
    """Function-scope statics live in global memory for the whole process: a cache or first-launch flag."""
    cand = _VADD.replace(_VADD_FIRST, decl + _VADD_FIRST, 1)
    r = check_scope(_VADD, cand, ["vector_add"])
    assert r.ok == ok, r.reason
    if not ok:
        assert "persists across launches" in r.reason


def test_scope_refuses_a_static_inside_a_device_helper() -> None:
    helper = "__device__ float* scratch()\n{\n    static float buf[256];\n    return buf;\n}\n\n"
    cand = _VADD.replace("/* kernellsp", helper + "/* kernellsp", 1)
    r = check_scope(_VADD, cand, ["vector_add"])
    assert not r.ok and "(device)" in r.reason, r.reason


# --------------------------------------------------------------------------------------------------
# Harness builds with the real nvcc


@pytest.fixture(scope="module")
def builds(
    tmp_path_factory: pytest.TempPathFactory, harness_runtime_object: Path
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every gpu-gate candidate's harness, built the way verify builds it (the split build: the runtime object
    once, then each candidate's entry unit compiled and linked with it), in parallel."""
    out = tmp_path_factory.mktemp("adversarial-builds")

    def build(case: dict[str, Any]) -> tuple[str, subprocess.CompletedProcess[str]]:
        plan = _candidate_plan(case)
        h = out / f"{case['name']}_harness.cu"
        h.write_text(harness.generate_harness(plan, str(REPO / case["candidate"]), split=True))
        obj, exe = str(out / f"{case['name']}.o"), str(out / case["name"])
        res = subprocess.run(
            hb.unit_compile_command(str(h), obj, "sm_90", list(plan.flags)),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if res.returncode != 0:
            return case["name"], res
        link = hb.link_command([obj, str(harness_runtime_object)], exe, "sm_90", list(plan.flags))
        return case["name"], subprocess.run(link, capture_output=True, text=True, timeout=600)

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(pool.map(build, GPU_CASES))


@requires_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c["name"])
def test_gpu_cases_compile_as_a_harness(case: dict[str, Any], builds: dict[str, Any]) -> None:
    res = builds[case["name"]]
    if expected(case) == ["compile_error"]:
        assert res.returncode != 0, "the compile_error candidate compiled"
        assert "error" in res.stderr.lower()
    else:
        assert res.returncode == 0, res.stderr[-2000:]


# --------------------------------------------------------------------------------------------------
# The precision downgrades really exceed the spec's tolerance (numpy model of the kernels)


def _bf16(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Round float32 to bfloat16 (nearest even), as round_to_bf16() in the candidates does."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    return r.astype(np.uint32).view(np.float32)


def _tolerance(sample: str, entry: str) -> compare.Tolerance:
    path = REPO / sample
    bound = next(
        b for b in spec.specs_from_source(parse_source(path.read_text(), str(path)))[0] if b.entry == entry
    )
    return compare.resolve_tolerance("f32", bound.spec.tolerance)


def test_bf16_sgemm_is_outside_the_tolerance() -> None:
    rng = np.random.default_rng(0)
    m = n = k = 1024  # half the main size keeps the test fast; the error grows with sqrt(K)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    got = (_bf16(a).astype(np.float64) @ _bf16(b).astype(np.float64)).astype(np.float32)
    mm = compare.compare(
        "C", "f32", got.tobytes(), want.tobytes(), _tolerance("samples/sgemm_naive.cu", "sgemm_naive")
    )
    assert mm is not None and mm.bad_elements > 0.01 * m * n, mm


def test_bf16_softmax_is_outside_the_tolerance() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0, 3, (512, 1024)).astype(np.float32)

    def softmax(v: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        e = np.exp(v.astype(np.float64) - v.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)

    tol = _tolerance("samples/softmax_row.cu", "softmax_row")
    mm = compare.compare("y", "f32", softmax(_bf16(x)).tobytes(), softmax(x).tobytes(), tol)
    assert mm is not None and mm.bad_elements > 0.01 * x.size, mm
    zeros = compare.compare("y", "f32", np.zeros_like(x).tobytes(), softmax(x).tobytes(), tol)
    assert zeros is not None  # softmax_zeros


def _layernorm(
    x: np.ndarray[Any, Any],
    gamma: np.ndarray[Any, Any],
    beta: np.ndarray[Any, Any],
    one_pass: bool = False,
    half_z: bool = False,
) -> np.ndarray[Any, Any]:
    """layernorm.cu in numpy (fp32 where the kernels are fp32); the candidates' variants as flags."""
    x32 = x.astype(np.float32)
    mean = x32.mean(axis=1, dtype=np.float32, keepdims=True)
    if one_pass:
        var = np.maximum(
            (x32 * x32).mean(axis=1, dtype=np.float32, keepdims=True) - mean * mean, np.float32(0)
        )
    else:
        var = ((x32 - mean) ** 2).mean(axis=1, dtype=np.float32, keepdims=True)
    z = ((x32 - mean) / np.sqrt(var + np.float32(1e-5))).astype(np.float32)
    if half_z:
        z = z.astype(np.float16).astype(np.float32)
    return (z * gamma + beta).astype(np.float32)


def test_layernorm_half_output_is_outside_the_tolerance() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, (256, 2048)).astype(np.float32)
    g, b = rng.uniform(-1, 1, 2048).astype(np.float32), rng.uniform(-1, 1, 2048).astype(np.float32)
    tol = _tolerance("samples/layernorm.cu", "layernorm")
    mm = compare.compare(
        "y", "f32", _layernorm(x, g, b, half_z=True).tobytes(), _layernorm(x, g, b).tobytes(), tol
    )
    assert mm is not None and mm.bad_elements > 0.005 * x.size, mm


def test_one_pass_variance_hides_behind_zero_mean_inputs() -> None:
    """layernorm_one_pass_variance (a known gap): right on the spec's normal(0, 1) rows, wrong on offset rows."""
    rng = np.random.default_rng(4)
    g, b = rng.uniform(-1, 1, 2048).astype(np.float32), rng.uniform(-1, 1, 2048).astype(np.float32)
    tol = _tolerance("samples/layernorm.cu", "layernorm")
    x = rng.normal(0, 1, (256, 2048)).astype(np.float32)
    assert (
        compare.compare(
            "y", "f32", _layernorm(x, g, b, one_pass=True).tobytes(), _layernorm(x, g, b).tobytes(), tol
        )
        is None
    )
    offset = (x + 1000.0).astype(np.float32)  # e.g. a structured input with a large mean
    mm = compare.compare(
        "y", "f32", _layernorm(offset, g, b, one_pass=True).tobytes(), _layernorm(offset, g, b).tobytes(), tol
    )
    assert mm is not None and mm.bad_elements > 0.5 * x.size, mm


def test_softmax_max_from_a_prefix_hides_behind_the_spec_distribution() -> None:
    """softmax_max_from_prefix (a known gap): right on normal(0, 3) rows, NaN where a ramp outgrows exp's range."""

    def softmax(v: np.ndarray[Any, Any], prefix: int | None = None) -> np.ndarray[Any, Any]:
        v = v.astype(np.float32)
        m = (v[:, :prefix] if prefix else v).max(axis=1, keepdims=True)
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(v - m, dtype=np.float32)
            return (e / e.sum(axis=1, keepdims=True, dtype=np.float32)).astype(np.float32)

    tol = _tolerance("samples/softmax_row.cu", "softmax_row")
    x = np.random.default_rng(5).normal(0, 3, (512, 1024)).astype(np.float32)
    assert compare.compare("y", "f32", softmax(x, 32).tobytes(), softmax(x).tobytes(), tol) is None
    ramp = np.tile(np.arange(1024, dtype=np.float32), (8, 1))
    mm = compare.compare("y", "f32", softmax(ramp, 32).tobytes(), softmax(ramp).tobytes(), tol)
    assert mm is not None, "a ramp row should overflow exp"


def test_off_by_one_reduction_hides_in_the_main_shape_only() -> None:
    tol = _tolerance("samples/reduce_atomic.cu", "reduce_atomic")
    rng = np.random.default_rng(1)
    for n, caught in ((4194304, False), (1, True)):
        x = rng.uniform(0, 1, n)
        init = 0.5
        want = np.array([init + x.sum()], dtype=np.float32)
        got = np.array([init + x[1:].sum()], dtype=np.float32)
        mm = compare.compare("out", "f32", got.tobytes(), want.tobytes(), tol)
        assert (mm is not None) == caught, (n, mm)
