"""The verification gate on a machine without a GPU: everything decided before the first GPU step.

``kernellsp.optimize.verify.gate.verify`` checks the edit scope and the candidate's launch before it asks the
runner for anything, so an out-of-scope candidate is refused (``scope_violation``) here with a
real LocalRunner that is never used; a baseline without a spec raises VerifyError. The CLI needs a
runner before it verifies: without a GPU and without --gpu-host it exits 2 saying so. With a
--gpu-host that is never contacted it still refuses an out-of-scope candidate with exit 1.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kernellsp.cli import app
from kernellsp.optimize.verify.gate import (
    VERDICTS,
    Verdict,
    VerifyError,
    VerifyOptions,
    unified_diff,
    verify,
    write_evidence,
)
from kernellsp.profile.environment import local_gpu_problem
from kernellsp.run.runner import LocalRunner, RunResult

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
SOFTMAX = (SAMPLES / "softmax_row.cu").read_text()
RELU = (SAMPLES / "relu_launcher.cu").read_text()
SIG = "__global__ void softmax_row(const float* x, float* y, int rows, int cols)"


class RecordingRunner(LocalRunner):
    """A real LocalRunner that records every use; the tests below expect none."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Any]] = []
        self._lock = threading.Lock()

    def _note(self, what: str, arg: Any) -> None:
        with self._lock:
            self.calls.append((what, arg))

    def new_workdir(self) -> str:
        self._note("new_workdir", None)
        return super().new_workdir()

    def put(self, files: dict[str, bytes], workdir: str) -> None:
        self._note("put", sorted(files))
        super().put(files, workdir)

    def run(
        self,
        argv: list[str],
        workdir: str,
        timeout_s: float,
        cancel: threading.Event | None = None,
        env: dict[str, str] | None = None,
        gpu_lock: bool = False,
    ) -> RunResult:
        self._note("run", argv)
        return super().run(argv, workdir, timeout_s, cancel, env, gpu_lock)

    def which(self, tool: str) -> str | None:
        self._note("which", tool)
        return super().which(tool)


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


OUT_OF_SCOPE = {
    "include added": (
        edit(SOFTMAX, "#include <math.h>", "#include <math.h>\n#include <cstdio>"),
        "not among the headers",
    ),
    "macro added": (
        edit(SOFTMAX, "#include <math.h>", "#include <math.h>\n#define expf __expf"),
        "outside the targeted kernels",
    ),
    "signature changed": (
        edit(SOFTMAX, SIG, SIG.replace("int cols", "long cols")),
        "signature of softmax_row",
    ),
    "tolerance loosened": (edit(SOFTMAX, "rtol = 1e-3", "rtol = 1e-1"), "spec field 'tolerance'"),
    "shapes dropped": (
        edit(
            SOFTMAX,
            "shapes = [{ ROWS = 1000, COLS = 100 }, { ROWS = 33, COLS = 1023 }, { ROWS = 1, COLS = 1 }]",
            "shapes = [{ ROWS = 1000, COLS = 100 }]",
        ),
        "spec field 'shapes'",
    ),
    "tunable values changed": (
        edit(SOFTMAX, "BLOCK = [256, 128, 64, 32]", "BLOCK = [1024, 128, 64, 32]"),
        "tunables' names or values",
    ),
    "fast math flag": (
        edit(SOFTMAX, "tunables = {", 'flags = ["--use_fast_math"]\ntunables = {'),
        "--use_fast_math",
    ),
    "#define in the body": (
        edit(SOFTMAX, "    int row =", "#define expf __expf\n    int row ="),
        "preprocessor directive",
    ),
    "static cache": (
        edit(SOFTMAX, "    int row =", "    static float cache[16];\n    int row ="),
        "static/extern variable",
    ),
    "does not parse": (
        edit(SOFTMAX, "if (row >= rows) return;", "if (row >= rows) return; {{"),
        "does not parse",
    ),
    "kernel removed": (SOFTMAX[: SOFTMAX.index(SIG)], "removed or renamed softmax_row"),
    "invalid launch": (edit(SOFTMAX, 'block = "BLOCK"', "block = 2048"), "launch is invalid"),
    "unknown launch name": (edit(SOFTMAX, 'block = "BLOCK"', 'block = "THREADS"'), "launch is invalid"),
}


@pytest.mark.parametrize("case", list(OUT_OF_SCOPE))
def test_out_of_scope_candidate_is_refused_without_touching_the_runner(case: str) -> None:
    candidate, words = OUT_OF_SCOPE[case]
    runner = RecordingRunner()
    messages: list[str] = []
    v = verify(
        Path("softmax_row.cu"),
        SOFTMAX,
        candidate,
        "softmax_row",
        runner,
        VerifyOptions(),
        progress=lambda m, _p: messages.append(m),
    )
    assert v.kind == "scope_violation" and v.kind in VERDICTS
    assert not v.accepted
    assert words in v.message, v.message
    assert v.entry == "softmax_row"
    assert v.stats is None and v.speedup is None
    assert v.environment == {}  # not even the GPU/driver query ran
    assert v.seconds >= 0
    assert runner.calls == [], runner.calls
    assert messages == []
    json.dumps(v.to_dict())


def test_scope_violation_records_the_line() -> None:
    candidate = edit(SOFTMAX, SIG, SIG.replace("int cols", "long cols"))
    v = verify(Path("softmax_row.cu"), SOFTMAX, candidate, "softmax_row", RecordingRunner())
    assert v.details["line"] == SOFTMAX.splitlines().index(SIG) + 1  # 1-based, as everywhere else


def test_host_launcher_edits_are_refused() -> None:
    runner = RecordingRunner()
    no_sync = edit(RELU, "    cudaDeviceSynchronize();\n", "")
    v = verify(Path("relu_launcher.cu"), RELU, no_sync, "solve", runner)
    assert v.kind == "scope_violation" and "host code" in v.message
    spec_edit = edit(RELU, "shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }]", "shapes = [{ N = 1000 }]")
    v = verify(Path("relu_launcher.cu"), RELU, spec_edit, "solve", runner)
    assert v.kind == "scope_violation" and "spec field 'shapes'" in v.message
    fast = edit(
        RELU, "sizes = { N = 16777216 }", 'sizes = { N = 16777216 }\nflags = ["-Xcompiler -ffast-math"]'
    )
    v = verify(Path("relu_launcher.cu"), RELU, fast, "solve", runner)
    assert v.kind == "scope_violation" and "'-Xcompiler -ffast-math' is not allowed" in v.message
    assert runner.calls == []


def test_no_spec_raises_verify_error() -> None:
    base = SOFTMAX[: SOFTMAX.index("/* kernellsp")] + SOFTMAX[SOFTMAX.index("*/\n") + 3 :]
    assert "kernellsp" not in base.split("\n", 1)[1]
    cand = edit(base, "* (1.0 / sum);", "* (1.0f / sum);")
    runner = RecordingRunner()
    with pytest.raises(
        VerifyError,
        match=r"softmax_row has no launch spec in the file; add one \(kernellsp check shows KL004\)",
    ):
        verify(Path("softmax_row.cu"), base, cand, "softmax_row", runner)
    with pytest.raises(VerifyError, match="has no launch spec"):
        verify(Path("softmax_row.cu"), base, base, "softmax_row", runner)
    assert runner.calls == []


def test_invalid_baseline_spec_raises_verify_error() -> None:
    base = edit(SOFTMAX, 'count = "ROWS * COLS" }\nrows', 'count = "ROWS * COLS" }\nrowz')
    with pytest.raises(VerifyError, match="the launch spec of softmax_row is invalid"):
        verify(Path("softmax_row.cu"), base, base, "softmax_row", RecordingRunner())


def test_launcher_without_kernels_raises_verify_error() -> None:
    text = """\
/* kernellsp
sizes = { N = 16 }
[args]
x = { dtype = "f32", dir = "inout", count = "N" }
n = { value = "N" }
*/
extern "C" void solve(float* x, int n)
{
    cudaMemset(x, 0, n * sizeof(float));
}
"""
    with pytest.raises(VerifyError, match=r"solve launches no kernel defined in solve\.cu"):
        verify(Path("solve.cu"), text, text, "solve", RecordingRunner())


# --------------------------------------------------------------------------------------------------
# write_evidence


def test_write_evidence(tmp_path: Path) -> None:
    candidate = OUT_OF_SCOPE["tolerance loosened"][0]
    v = verify(Path("softmax_row.cu"), SOFTMAX, candidate, "softmax_row", RecordingRunner())
    bundle = tmp_path / "evidence" / "nested"
    write_evidence(bundle, Path("softmax_row.cu"), SOFTMAX, candidate, v)
    assert sorted(p.name for p in bundle.iterdir()) == [
        "baseline.cu",
        "candidate.cu",
        "diff.patch",
        "verdict.json",
    ]
    assert (bundle / "baseline.cu").read_text() == SOFTMAX
    assert (bundle / "candidate.cu").read_text() == candidate
    diff = (bundle / "diff.patch").read_text()
    assert diff == unified_diff(SOFTMAX, candidate, "softmax_row.cu")
    assert diff.startswith("--- a/softmax_row.cu\n+++ b/softmax_row.cu\n")
    assert (
        "-tolerance = { rtol = 1e-3, atol = 1e-6 }" in diff
        and "+tolerance = { rtol = 1e-1, atol = 1e-6 }" in diff
    )
    data = json.loads((bundle / "verdict.json").read_text())
    assert data["kind"] == "scope_violation" and data["accepted"] is False
    assert data["message"] == v.message and data["entry"] == "softmax_row"
    # An accepted verdict with stats and raw timings round-trips too.
    ok = Verdict(
        "accepted",
        True,
        "1.100x faster",
        "softmax_row",
        details={"checked": [{"seed": 0}]},
        stats={"speedup": 1.1, "ci_low": 1.05, "ci_high": 1.15},
        environment={"gpu": "NVIDIA H200"},
        timings={"rounds": {"base": [{"timings_ms": [1.0]}]}},
    )
    write_evidence(bundle, Path("softmax_row.cu"), SOFTMAX, SOFTMAX, ok)
    data = json.loads((bundle / "verdict.json").read_text())
    assert data == ok.to_dict()
    assert (bundle / "diff.patch").read_text() == ""


# --------------------------------------------------------------------------------------------------
# The CLI


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kernellsp.toml").write_text("")
    (ws / "softmax_row.cu").write_text(SOFTMAX)
    (ws / "cand.cu").write_text(OUT_OF_SCOPE["tolerance loosened"][0])
    monkeypatch.chdir(ws)
    for var in ("KERNELLSP_GPU_HOST", "KERNELLSP_RUNNER"):
        monkeypatch.delenv(var, raising=False)
    return ws


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def test_cli_verify_without_a_gpu_exits_2_naming_it(workspace: Path) -> None:
    problem = local_gpu_problem()
    if problem is None:
        pytest.skip("this host has a GPU and ncu: the CLI would verify for real")
    # An in-scope candidate (the baseline itself) needs the GPU gates: exit 2, naming why there is none.
    (workspace / "same.cu").write_text(SOFTMAX)
    r = invoke("verify", "softmax_row.cu", "--candidate", "same.cu")
    assert r.exit_code == 2
    assert r.stdout == ""
    err = r.stderr.strip()
    assert err.startswith("error: cannot verify: no GPU here")
    assert problem in err
    assert "--gpu-host" in err and "gpu_host setting" in err
    assert "scope_violation" not in r.output
    # What the CPU can decide is decided first: an out-of-scope candidate is refused without a GPU (exit 1).
    r = invoke("verify", "softmax_row.cu", "--candidate", "cand.cu")
    assert r.exit_code == 1 and "scope_violation" in r.output


def test_cli_verify_scope_violation_with_an_uncontacted_gpu_host(workspace: Path) -> None:
    """With --gpu-host the runner exists; the scope gate refuses before ssh is ever started."""
    r = invoke(
        "verify",
        "softmax_row.cu",
        "--candidate",
        "cand.cu",
        "--gpu-host",
        "nobody@gpu.invalid",
        "--evidence",
        "ev",
    )
    assert r.exit_code == 1, r.output
    first = r.stdout.splitlines()[0]
    assert first.startswith("scope_violation: the candidate changed spec field 'tolerance'")
    assert json.loads((workspace / "ev" / "verdict.json").read_text())["kind"] == "scope_violation"
    r = invoke("verify", "softmax_row.cu", "-c", "cand.cu", "--gpu-host", "nobody@gpu.invalid", "--json")
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert data["kind"] == "scope_violation" and data["accepted"] is False and data["environment"] == {}


def test_cli_verify_argument_errors(workspace: Path) -> None:
    r = invoke("verify", "softmax_row.cu", "--candidate", "missing.cu")
    assert r.exit_code == 2 and "missing.cu: no such file" in r.stderr
    r = invoke("verify", "nope.cu", "--candidate", "cand.cu")
    assert r.exit_code == 2 and "nope.cu: no such file" in r.stderr
    r = invoke("verify", "softmax_row.cu", "--candidate", "cand.cu", "--kernel", "other")
    assert r.exit_code == 2 and "other has no launch spec" in r.stderr and "softmax_row" in r.stderr
    r = invoke("verify", "softmax_row.cu")
    assert r.exit_code == 2 and "--candidate" in r.output


# --------------------------------------------------------------------------------------------------
# The pieces of the hardened gate that need no GPU: the error budget, the input seeds, the sanitizer plan


def test_error_budget_refuses_a_half_read_reduction_that_the_tolerance_lets_through() -> None:
    """Issue 10's class 2: sum half of a uniform(0, 1) input and double it. Within rtol 1e-3 of the sequential
    float32 sum (what an atomics baseline computes), but far above the baseline's own error; a pairwise
    (tree) sum of the same inputs, an honest rewrite, stays inside the budget without any extra run."""
    import numpy as np

    from kernellsp.optimize.verify import correctness as compare
    from kernellsp.source.spec import Tolerance

    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, 1 << 22).astype(np.float32)
    sequential = np.cumsum(x, dtype=np.float32)[-1:]  # the baseline: one add after the other
    pairwise = np.array([np.sum(x, dtype=np.float32)], dtype=np.float32)
    half = np.array([2 * np.sum(x[: x.size // 2], dtype=np.float32)], dtype=np.float32)
    tol = compare.resolve_tolerance("f32", Tolerance(rtol=1e-3, atol=1e-3))
    for cand in (pairwise, half):
        assert (
            compare.compare("out", "f32", cand.tobytes(), sequential.tobytes(), tol) is None
        )  # both inside the spec
    honest = compare.norm_rel_error("f32", pairwise.tobytes(), sequential.tobytes())
    cheat = compare.norm_rel_error("f32", half.tobytes(), sequential.tobytes())
    assert compare.within_quick_budget("f32", honest)
    assert not compare.within_quick_budget("f32", cheat)
    # The baseline's own error on these inputs: no spread between runs (deterministic), no cancellation.
    assert cheat > compare.error_budget("f32", conditioning=1.0, spread=0.0)
    # A nondeterministic baseline as noisy as the cheat's error moves the budget with it (no false refusal).
    assert cheat < compare.error_budget("f32", conditioning=1.0, spread=cheat)
    # Cancellation: an honest re-association of terms summing to 1/1000 of their magnitudes errs 1000x more.
    assert compare.error_budget("f32", conditioning=1000.0, spread=0.0) == pytest.approx(
        1000 * compare.error_budget("f32", 1.0, 0.0)
    )
    assert compare.error_budget("i32", 1.0, 0.0) == float("inf") and compare.within_quick_budget("u8", 1.0)
    assert compare.error_budget("f32", 1.0, 0.0, factor=0) == float("inf")


def test_input_seeds_derive_from_the_run_seed() -> None:
    from kernellsp.optimize.verify.correctness_gate import _describe_set
    from kernellsp.optimize.verify.session import derive_seed

    seeds = [derive_seed(12345, k) for k in range(300)]
    assert len(set(seeds)) == 300 and all(0 <= s < 2**63 for s in seeds)
    assert seeds == [derive_seed(12345, k) for k in range(300)]  # replay: same run seed, same inputs
    assert derive_seed(12346, 0) != seeds[0]
    assert _describe_set("17") == "seed 17"
    assert _describe_set("17:spikes") == "seed 17, spikes pattern"
    assert _describe_set("17@12") == "the inputs of timed launch 12 (seed 17)"
    assert _describe_set("17@12+abs") == "the inputs of timed launch 12 (seed 17)"
    assert _describe_set("17~previous") == "seed 17, outputs holding an earlier call's results"
    assert _describe_set("17:ramp~garbage") == "seed 17, ramp pattern, outputs holding finite garbage"


def test_sanitizer_plan_covers_every_distinct_shape_with_the_tools_that_apply() -> None:
    from kernellsp.optimize.verify.sanitizer_gate import _sanitizer_plan
    from kernellsp.run import harness
    from kernellsp.source import spec
    from kernellsp.source.model import parse_source

    def plan_of(text: str, entry: str) -> harness.HarnessPlan:
        model = parse_source(text, "k.cu")
        bound = spec.entry_spec(model, entry)
        assert bound is not None
        return harness.plan_harness(model, bound.spec, entry)

    softmax = plan_of(SOFTMAX, "softmax_row")
    full = _sanitizer_plan(softmax, VerifyOptions(), SOFTMAX, 0)
    assert [s for s, _ in full] == sorted(range(4), key=lambda i: sum(softmax.shapes[i].counts.values()))
    assert all(tools == ["memcheck"] for _, tools in full)  # no shared memory, no barrier: memcheck only
    assert _sanitizer_plan(softmax, VerifyOptions(sanitize_all_shapes=False), SOFTMAX, 0) == full[:1]
    with_smem = _sanitizer_plan(softmax, VerifyOptions(), SOFTMAX + "\n// __syncthreads();\n", 1024)
    assert all(tools == ["memcheck", "racecheck", "synccheck"] for _, tools in with_smem)
    relu = plan_of(RELU, next(f.name for f in parse_source(RELU, "r.cu").functions if f.kind == "host"))
    assert all(
        tools[0] == "memcheck" and "racecheck" in tools and "initcheck" in tools
        for _, tools in _sanitizer_plan(relu, VerifyOptions(), RELU, 0)
    )
    twice = SOFTMAX.replace("{ ROWS = 1, COLS = 1 }]", "{ ROWS = 1, COLS = 1 }, { ROWS = 1000, COLS = 100 }]")
    dup = plan_of(twice, "softmax_row")
    assert (
        len(dup.shapes) == 5 and len(_sanitizer_plan(dup, VerifyOptions(), twice, 0)) == 4
    )  # sizes deduplicated


def _sanitizer_session(harness_run: Any) -> Any:
    """A verification session as the sanitizer gate sees it, its harness runs answered by ``harness_run``."""
    from types import SimpleNamespace

    return SimpleNamespace(
        runner=SimpleNamespace(which=lambda _n: "/cs"),
        cand_static_smem=1024,
        run_seed=7,
        drawn_shapes={},
        harness_run=harness_run,
        run=lambda *_a, **_k: SimpleNamespace(output=""),
        runs=[],
    )


def test_hazard_checks_are_bounded_on_heavy_shapes_only_after_passing_a_smaller_one() -> None:
    """racecheck on a 4096^3 main shape runs for many minutes: once it passed on a smaller shape, a larger
    shape gets hazard_check_budget_s and is recorded as bounded; on the first shape running out is a refusal."""
    from types import SimpleNamespace

    from kernellsp.optimize.verify.sanitizer_gate import _sanitizer_plan, sanitize
    from kernellsp.run import harness
    from kernellsp.run.runner import RunnerError
    from kernellsp.source import spec
    from kernellsp.source.model import parse_source

    text = SOFTMAX + "\n// __syncthreads();\n"
    model = parse_source(text, "k.cu")
    bound = spec.entry_spec(model, "softmax_row")
    assert bound is not None
    plan = harness.plan_harness(model, bound.spec, "softmax_row")
    order = [shape for shape, _ in _sanitizer_plan(plan, VerifyOptions(), text, 1024)]
    heavy, smallest = order[-1], order[0]
    calls: list[tuple[str, int, float]] = []

    def harness_run(
        exe: str, mode: str, shape: int, seed: int, wrapper: list[str], timeout: float, **_: object
    ) -> tuple[object, object, str]:
        tool = wrapper[wrapper.index("--tool") + 1]
        calls.append((tool, shape, timeout))
        if tool == "racecheck" and shape in slow:
            raise RunnerError("timeout", "took too long")
        ok = SimpleNamespace(ok=True, error=None)
        return SimpleNamespace(returncode=0, output="========= ERROR SUMMARY: 0 errors"), ok, ""

    session = _sanitizer_session(harness_run)
    opts = VerifyOptions(sanitizer_timeout_s=300, hazard_check_budget_s=60)

    slow = {heavy}
    details: dict = {}
    assert sanitize(session, "softmax_row", plan, opts, lambda *_: None, text, details) is None  # type: ignore[arg-type]
    bounded = [(d["tool"], d["shape"], d["bounded"]) for d in details["sanitizer"] if d.get("bounded")]
    assert bounded == [("racecheck", heavy, "stopped after 60 s (hazard_check_budget_s)")]
    assert ("racecheck", smallest, 300) in calls and ("racecheck", heavy, 60) in calls
    assert ("memcheck", heavy, 300) in calls  # memcheck is never bounded

    slow, calls = {smallest}, []
    verdict = sanitize(session, "softmax_row", plan, opts, lambda *_: None, text, {})  # type: ignore[arg-type]
    assert verdict is not None and verdict.kind == "timeout"

    # The correctness runs measured the heavy shape's fastest launch at 5 ms: under racecheck that is past the
    # budget (HAZARD_SLOWDOWN), so the bounded run is not started at all (it could not have reported).
    slow, calls = set(), []
    session.runs = [
        {
            "exe": "h_cand",
            "mode": "check",
            "tool": None,
            "shape": heavy,
            "sets": 4,
            "fastest_launch_s": 0.005,
        },
        {
            "exe": "h_cand",
            "mode": "check",
            "tool": None,
            "shape": heavy,
            "sets": 1,
            "fastest_launch_s": 0.006,
        },
        {
            "exe": "h_cand",
            "mode": "check",
            "tool": None,
            "shape": smallest,
            "sets": 4,
            "fastest_launch_s": 1e-6,
        },
    ]
    details = {}
    assert sanitize(session, "softmax_row", plan, opts, lambda *_: None, text, details) is None  # type: ignore[arg-type]
    skipped = [(d["tool"], d["shape"]) for d in details["sanitizer"] if "not started" in d.get("bounded", "")]
    assert ("racecheck", heavy) in skipped
    assert ("racecheck", heavy, 60) not in calls and ("memcheck", heavy, 300) in calls
    assert ("racecheck", smallest, 300) in calls  # the first shape always runs, whatever its cost

    # One correctness run with a fast launch among slow ones: the fastest counts, so the check runs.
    slow, calls = set(), []
    session.runs[1]["fastest_launch_s"] = 1e-4
    details = {}
    assert sanitize(session, "softmax_row", plan, opts, lambda *_: None, text, details) is None  # type: ignore[arg-type]
    assert ("racecheck", heavy, 60) in calls
    assert not [d for d in details["sanitizer"] if "not started" in d.get("bounded", "")]


def test_sanitizer_tools_run_side_by_side_in_shared_mode_and_report_in_plan_order() -> None:
    """The tools of a shape run at once, each holding the GPU in shared mode; the smallest shape goes first (a
    larger shape's hazard tools need to know it passed), and the first failing run in plan order is reported."""
    from types import SimpleNamespace

    from kernellsp.optimize.verify.sanitizer_gate import _sanitizer_plan, sanitize
    from kernellsp.run import harness
    from kernellsp.source import spec
    from kernellsp.source.model import parse_source

    text = SOFTMAX + "\n// __syncthreads();\n"
    model = parse_source(text, "k.cu")
    bound = spec.entry_spec(model, "softmax_row")
    assert bound is not None
    plan = harness.plan_harness(model, bound.spec, "softmax_row")
    planned = _sanitizer_plan(plan, VerifyOptions(), text, 1024)
    smallest = planned[0][0]
    lock = threading.Lock()
    running, peak, started = [0], [0], []
    failing: set[tuple[str, int]] = set()

    def harness_run(
        exe: str, mode: str, shape: int, seed: int, wrapper: list[str], gpu: object, **_: object
    ) -> tuple[object, object, str]:
        assert gpu == "shared"
        tool = wrapper[wrapper.index("--tool") + 1]
        with lock:
            started.append((tool, shape))
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        errors = 1 if (tool, shape) in failing else 0
        out = SimpleNamespace(ok=True, error=None)
        return (
            SimpleNamespace(
                returncode=86 if errors else 0, output=f"========= ERROR SUMMARY: {errors} errors"
            ),
            out,
            "",
        )

    session = _sanitizer_session(harness_run)
    details: dict = {}
    assert sanitize(session, "softmax_row", plan, VerifyOptions(), lambda *_: None, text, details) is None  # type: ignore[arg-type]
    assert peak[0] > 1, "the tools took turns"
    wanted = [(t, shape) for shape, tools in planned for t in tools]
    assert [(d["tool"], d["shape"]) for d in details["sanitizer"]] == wanted
    # Every run of the smallest shape started before any run of a larger one.
    first_wave = [j for j in wanted if j[1] == smallest]
    assert set(started[: len(first_wave)]) == set(first_wave)

    # Two failures in the second wave: the first in plan order is the one reported.
    later = [j for j in wanted if j[1] != smallest]
    failing = {later[1], later[-1]}
    started.clear()
    v = sanitize(session, "softmax_row", plan, VerifyOptions(), lambda *_: None, text, {})  # type: ignore[arg-type]
    assert v is not None and v.kind == "sanitizer"
    assert f"{later[1][0]} found errors on shape {later[1][1]}" in v.message
    # A failure in the first wave stops before the second starts.
    failing = {first_wave[0]}
    started.clear()
    v = sanitize(session, "softmax_row", plan, VerifyOptions(), lambda *_: None, text, {})  # type: ignore[arg-type]
    assert v is not None and v.kind == "sanitizer" and set(started) == set(first_wave)


def test_background_work_of_a_verification_finishes_before_its_scratch_directory_goes(tmp_path: Path) -> None:
    """The oracle compiles in the background from the start of a verification; timing waits for it (settle)
    and so does the end of the verification, so nothing writes into a removed scratch directory."""
    from kernellsp.optimize.verify.session import Session
    from kernellsp.run.runner import LocalRunner

    s = Session(LocalRunner(scratch_root=tmp_path), VerifyOptions(), None)
    wd = Path(s.wd)
    done: list[bool] = []

    def slow_write() -> str:
        time.sleep(0.3)
        (wd / "oracle").mkdir()
        done.append(True)
        return "built"

    fut = s.background(slow_write)
    s.settle()
    assert done and fut.result() == "built"
    fut = s.background(lambda: time.sleep(0.3) or "again")
    s.close()
    assert fut.done() and fut.result() == "again" and not wd.exists()
