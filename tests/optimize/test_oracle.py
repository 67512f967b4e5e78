"""The baseline's higher-precision oracle (kernellsp.optimize.verify.oracle), without a GPU.

The transformation on the samples (which locals become double, which float outputs get a double shadow),
its absence where nothing can be promoted, that every oracle source compiles for sm_90 through the harness's
own split build (real nvcc), the acceptance rule on synthetic numpy buffers, and the gate's use of it on
recorded results: an honest, more accurate candidate is rescued where the baseline rounds badly; a
half-read reduction and a candidate less accurate than the baseline are still refused.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from kernellsp import cache
from kernellsp.optimize.verify import correctness as compare
from kernellsp.optimize.verify import oracle
from kernellsp.run import harness
from kernellsp.run import harness_build as hb
from kernellsp.run.runner import LocalRunner
from kernellsp.source import spec
from kernellsp.source.model import parse_source

REPO = Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc")
requires_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")

CASES = {
    "samples/reduce_atomic.cu": ([], ["out"]),
    "tests/recipes/corpus/matvec_rowwise.cu": ([("gemv_rowwise", "dot")], []),
    "samples/sgemm_naive.cu": ([("sgemm_naive", "acc")], []),
    "samples/layernorm.cu": ([("layernorm", "s"), ("layernorm", "v")], []),
    "samples/softmax_row.cu": ([("softmax_row", "sum")], []),  # row_max is a max: it picks, never rounds
}

WARP_REDUCE = """#include <cuda_runtime.h>
/* kernellsp
sizes = { N = 100000 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-3 }
[args]
x = { dtype = "f32", dir = "in", count = "N" }
out = { dtype = "f32", dir = "inout", count = 4, dist = "uniform(0, 1)" }
n = { value = "N" }
*/
__device__ float warp_sum(const float* x, int i, int n)
{
    float part = 0.0f, unused = 1.0f;
    float acc = 0.0f;
    for (int j = i; j < n; j += 1 << 20) {
        acc += x[j];
    }
    (void)part; (void)unused;
    for (int off = 16; off > 0; off /= 2) {
        acc += __shfl_down_sync(0xffffffffu, acc, off);
    }
    return acc;
}

__global__ void reduce_warp(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = warp_sum(x, i, n);
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&out[blockIdx.x % 4], s);
    }
}
"""


def _plan(text: str, path: str) -> tuple[harness.HarnessPlan, spec.BoundSpec]:
    model = parse_source(text, path)
    bound = spec.specs_from_source(model)[0][0]
    return harness.plan_harness(model, bound.spec, bound.entry), bound


def _oracle(text: str, path: str = "k.cu") -> oracle.OracleSource | None:
    plan, bound = _plan(text, path)
    return oracle.oracle_source(text, path, bound.entry, plan)


# --------------------------------------------------------------------------------------------------
# The transformation


@pytest.mark.parametrize("sample", list(CASES))
def test_the_oracle_promotes_float_accumulations_of_the_baseline(sample: str) -> None:
    text = (REPO / sample).read_text()
    src = _oracle(text, sample)
    assert src is not None
    promoted, shadowed = CASES[sample]
    assert [(p.function, p.var) for p in src.promoted] == promoted
    assert [s.buffer for s in src.shadowed] == shadowed
    for _fn, var in promoted:
        assert f"double {var} = 0.0f;" in src.text and f"float {var} = 0.0f;" not in src.text
    assert src.describe() and src.to_dict()["shadowed"] == shadowed


def test_a_float_atomic_output_accumulates_in_a_double_shadow_behind_the_original_signature() -> None:
    text = (REPO / "samples/reduce_atomic.cu").read_text()
    src = _oracle(text, "reduce_atomic.cu")
    assert src is not None and src.shadowed[0].capacity == 1
    t = src.text
    assert (
        "__global__ void reduce_atomic(const float* x, float* out, int n)\n{\n    kl_oracle_body_reduce_atomic(out, x, out, n);"
        in t
    )
    assert "kl_oracle_add_out(kl_oracle_base_out, (out), (double)(x[i]));" in t
    assert "atomicAdd(out, x[i])" not in t and "__device__ double kl_oracle_shadow_out[1];" in t
    assert "kl_oracle_finish_reduce_atomic(out);" in t


def test_helpers_and_shadows_together_and_what_is_left_alone() -> None:
    src = _oracle(WARP_REDUCE)
    assert src is not None
    # acc (in the helper) is promoted; `part, unused` share a declaration with a non-accumulator: left alone.
    assert [(p.function, p.var) for p in src.promoted] == [("warp_sum", "acc")]
    assert "double acc = 0.0f;" in src.text and "float part = 0.0f, unused = 1.0f;" in src.text
    assert [(s.buffer, s.capacity) for s in src.shadowed] == [("out", 4)]
    # The buffer is also read, stored, or the atomic's result is used: no shadow (it would see a stale float).
    for edit in ("float s = warp_sum(x, i, n) + out[0];", "out[1] = 0.0f; float s = warp_sum(x, i, n);"):
        other = _oracle(WARP_REDUCE.replace("float s = warp_sum(x, i, n);", edit))
        assert other is not None and not other.shadowed and other.promoted
    pair = _oracle(
        WARP_REDUCE.replace(
            "float part = 0.0f, unused = 1.0f;",
            "float part = 0.0f, unused = 1.0f;\n    float p2 = 0.0f, q2 = 0.0f;\n    p2 += x[i]; q2 += x[i];",
        )
    )
    assert pair is not None and {(p.function, p.var) for p in pair.promoted} == {
        ("warp_sum", v) for v in ("acc", "p2", "q2")
    }
    assert "double p2 = 0.0f, q2 = 0.0f;" in pair.text
    used = _oracle(
        WARP_REDUCE.replace(
            "atomicAdd(&out[blockIdx.x % 4], s);", "float old = atomicAdd(&out[0], s); (void)old;"
        )
    )
    assert used is not None and not used.shadowed


def test_no_oracle_when_nothing_can_be_promoted() -> None:
    assert _oracle((REPO / "samples/vector_add.cu").read_text(), "vector_add.cu") is None
    # Integer sums lose nothing; a max never rounds.
    ints = WARP_REDUCE.replace("float acc = 0.0f;", "int acc = 0;").replace(
        "atomicAdd(&out[blockIdx.x % 4], s);", "out[blockIdx.x % 4] = s;"
    )
    assert _oracle(ints) is None


@requires_nvcc
@pytest.mark.slow
def test_every_oracle_source_compiles_through_the_harness_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELLSP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KERNELLSP_NO_CACHE", raising=False)
    monkeypatch.setattr(hb, "_inflight", {})
    assert NVCC is not None
    runner = LocalRunner()
    sources = [(sample, (REPO / sample).read_text()) for sample in CASES] + [("warp_reduce.cu", WARP_REDUCE)]
    for sample, text in sources:
        plan, bound = _plan(text, sample)
        src = oracle.oracle_source(text, sample, bound.entry, plan)
        assert src is not None
        name = Path(sample).name
        files = {
            f"src/{name}": src.text.encode(),
            "h.cu": harness.generate_harness(plan, f"src/{name}", split=True).encode(),
        }
        wd = runner.new_workdir()
        runner.put(files, wd)
        key = cache.digest(*(f"{k}\0{v.decode()}" for k, v in sorted(files.items())))
        built = hb.build_harness(
            runner,
            wd,
            "h.cu",
            "h_oracle",
            "sm_90",
            list(bound.spec.flags),
            nvcc=NVCC,
            nvcc_version="test",
            sources_key=key,
            timeout_s=600,
        )
        assert built.returncode == 0, f"{sample}: {built.output[-3000:]}"
        runner.cleanup(wd)


# --------------------------------------------------------------------------------------------------
# The acceptance rule

TOL = compare.resolve_tolerance("f32", spec.Tolerance(rtol=1e-3, atol=1e-3))


def _f32(*v: float) -> bytes:
    return np.array(v, dtype=np.float32).tobytes()


def _sums(n: int, seed: int = 3) -> dict[str, float]:
    """A uniform(0, 1) reduction of n floats: exact, sequential float (atomics), pairwise float (tree), half x 2."""
    x = np.random.default_rng(seed).uniform(0, 1, n).astype(np.float32)
    return {
        "exact": float(np.sum(x, dtype=np.float64)),
        "sequential": float(np.cumsum(x, dtype=np.float32)[-1]),
        "tree": float(np.sum(x, dtype=np.float32)),
        "half": 2.0 * float(np.sum(x[: n // 2], dtype=np.float32)),
    }


def test_an_honest_more_accurate_candidate_is_rescued_where_the_baseline_saturates() -> None:
    # What a float atomicAdd over 2^26 uniform(0, 1) values gives: stuck near 2^24 (the true sum is ~3.4e7).
    exact = 33_554_432.0 + 1234.5
    j = oracle.judge("f32", _f32(exact * (1 + 3e-7)), _f32(16_777_216.0), _f32(exact), TOL)
    assert j.rescued and j.mismatch is None and j.baseline_error > 0.4 and j.candidate_error < 1e-6
    assert "rescued" in j.describe()


def test_a_half_read_reduction_is_not_rescued_where_the_baseline_is_accurate() -> None:
    s = _sums(1 << 12)
    assert (
        compare.compare("out", "f32", _f32(s["half"]), _f32(s["sequential"]), TOL) is not None
    )  # it mismatched
    j = oracle.judge("f32", _f32(s["half"]), _f32(s["sequential"]), _f32(s["exact"]), TOL)
    assert not j.rescued and j.mismatch is not None and "oracle" in j.describe()
    # Even under a tolerance loose enough for it, it is far less accurate than the baseline: refused.
    loose = compare.resolve_tolerance("f32", spec.Tolerance(rtol=1e-2, atol=1e-2, norm_rtol=1e-2))
    j = oracle.judge("f32", _f32(s["half"]), _f32(s["sequential"]), _f32(s["exact"]), loose)
    assert (
        j.mismatch is None and not j.rescued and j.candidate_error > oracle.ORACLE_FACTOR * j.baseline_error
    )
    assert "less accurate than the baseline" in j.describe()
    # The honest tree sum on the same inputs would have been fine.
    assert oracle.judge("f32", _f32(s["tree"]), _f32(s["sequential"]), _f32(s["exact"]), TOL).rescued


def test_a_candidate_less_accurate_than_a_poor_baseline_is_not_rescued() -> None:
    exact = np.linspace(1.0, 2.0, 64)
    base = exact * (1 + 1e-4)  # 1e-4 off: poor, but inside a loose tolerance
    cand = exact * (1 - 8e-4)  # 8x worse, still inside it
    loose = compare.resolve_tolerance("f32", spec.Tolerance(rtol=1e-2, atol=1e-2, norm_rtol=1e-2))
    j = oracle.judge("f32", _f32(*cand), _f32(*base), _f32(*exact), loose)
    assert j.mismatch is None and not j.rescued
    # Within the factor of the baseline's error it is: rounding differently, not worse.
    assert oracle.judge("f32", _f32(*(exact * (1 - 1.5e-4))), _f32(*base), _f32(*exact), loose).rescued


def test_a_baseline_equal_to_the_oracle_still_allows_an_honest_rounding() -> None:
    exact = np.linspace(-3.0, 5.0, 101).astype(np.float32)
    j = oracle.judge("f32", _f32(*(exact * (1 + 2e-7))), exact.tobytes(), exact.tobytes(), TOL)
    assert j.baseline_error == 0.0 and j.rescued  # the floor: an honest re-association's error


# --------------------------------------------------------------------------------------------------
# The gate on recorded results (no GPU): _check_shape with a session whose harness runs are canned


class Recorded:
    """A check-mode result: per input set, the output buffers."""

    def __init__(self, sets: list[dict[str, bytes]]) -> None:
        self.ok, self.error, self.kernel_attrs, self.alloc, self.sizes = (
            True,
            None,
            {},
            {"kind": "guard"},
            {"N": 1},
        )
        self._sets = sets
        self.sets = [
            SimpleNamespace(
                seed=k,
                pattern="spec",
                buffers={
                    n: SimpleNamespace(mutated=False, unwritten=0, digest=hash(b)) for n, b in s.items()
                },
            )
            for k, s in enumerate(sets)
        ]

    def guard_damage(self) -> dict[str, int]:
        return {}

    def read_set_bytes(self, i: int, name: str) -> bytes:
        return self._sets[i][name]


def _gate_check(
    base: list[float], cand: list[float], oracle_out: list[float] | None, build_problem: str | None = None
) -> tuple[Any, dict[str, Any], list[str]]:
    """_check_shape on one float output ``out`` with one input set per value; returns (verdict, details, calls)."""
    from kernellsp.optimize.verify.correctness_gate import _check_shape
    from kernellsp.optimize.verify.gate import VerifyOptions

    calls: list[str] = []
    results = {
        "h_base": Recorded([{"out": _f32(v)} for v in base]),
        "h_cand": Recorded([{"out": _f32(v)} for v in cand]),
    }

    def harness_run(exe: str, mode: str, shape: int, seed: int, **_: Any) -> tuple[Any, Any, str]:
        calls.append(exe)
        return SimpleNamespace(returncode=0, output=""), results[exe], ""

    def build() -> str | None:
        calls.append("build")
        return build_problem

    def run(shape: int, sets: list[str]) -> tuple[Any, str | None]:
        calls.append("h_oracle")
        assert oracle_out is not None
        return Recorded([{"out": _f32(v)} for v in oracle_out]), None

    runs = None
    if oracle_out is not None:
        src = oracle.OracleSource("", [oracle.Promotion("k", "acc", "float", 3)])
        runs = oracle.OracleRuns(src, build, run)
    session = SimpleNamespace(harness_run=harness_run, oracle=runs, cand_static_smem=0, phase_s={})
    bspec = SimpleNamespace(spec=SimpleNamespace(tolerance=spec.Tolerance(rtol=1e-3, atol=1e-3)))
    outputs = [SimpleNamespace(name="out", dtype="f32")]
    sets = [harness.input_set(k) for k in range(len(base))]
    details: dict[str, Any] = {"checked": []}
    v, _ = _check_shape(session, "k", outputs, bspec, 1, sets, len(sets), details, VerifyOptions(), [])  # type: ignore[arg-type]
    return v, details, calls


def test_the_gate_rescues_an_honest_candidate_and_records_it() -> None:
    s = _sums(1 << 12)
    exact = 33_554_432.0
    v, details, calls = _gate_check(
        [s["sequential"], 16_777_216.0, 16_777_216.0],
        [s["sequential"], exact * (1 + 1e-7), exact],
        [s["exact"], exact, exact],
    )
    assert v is None and len(details["checked"]) == 3
    assert [(r["set"], r["rescued"]) for r in details["oracle"]] == [("1", True), ("2", True)]
    assert details["oracle"][0]["baseline_error"] > 0.4 and details["oracle"][0]["candidate_error"] < 1e-6
    assert details["oracle_source"]["promoted"] == ["k.acc (line 4)"]
    assert (
        calls.count("build") == 1 and calls.count("h_oracle") == 1
    )  # built once, run once for the shape's sets


def test_the_gate_refuses_a_cheat_and_never_builds_the_oracle_without_a_mismatch() -> None:
    s = _sums(1 << 12)
    v, details, _ = _gate_check([s["sequential"]], [s["half"]], [s["exact"]])
    assert v is not None and v.kind == "mismatch" and "against the higher-precision oracle too" in v.message
    assert details["oracle"][0]["rescued"] is False
    v, details, calls = _gate_check([s["sequential"]], [s["tree"]], [s["exact"]])
    assert v is None and "build" not in calls and "oracle" not in details  # agreed with the baseline already


def test_the_gate_without_a_usable_oracle_refuses_as_before() -> None:
    v, _, _ = _gate_check([16_777_216.0], [33_554_432.0], None)
    assert v is not None and v.kind == "mismatch" and "oracle" not in v.message
    v, _, calls = _gate_check(
        [16_777_216.0], [33_554_432.0], [33_554_432.0], build_problem="the oracle does not build: x"
    )
    assert (
        v is not None
        and v.kind == "mismatch"
        and "oracle was not available: the oracle does not build" in v.message
    )
    assert "h_oracle" not in calls
