"""GPU tests for the verification gate and the loop: A/A never wins, a real win is accepted and replays.

Run with ``pytest -m gpu`` on a GPU host. The A/A study writes tests/bench/results/aa-<gpu>.json.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.gpuinfo import gpu_slug, local_gpu_name

from kernellsp.optimize.apply import apply_result, revert
from kernellsp.optimize.loop import optimize, replay
from kernellsp.optimize.propose.tuner import Tuner
from kernellsp.optimize.result import OptimizeOptions
from kernellsp.optimize.verify.gate import VerifyOptions, verify
from kernellsp.profile.environment import runner_environment
from kernellsp.run.runner import LocalRunner

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "bench" / "results"


@pytest.fixture(scope="module")
def runner() -> LocalRunner:
    if shutil.which("nvidia-smi") is None or shutil.which("compute-sanitizer") is None:
        pytest.skip("needs an NVIDIA GPU with compute-sanitizer")
    return LocalRunner()


@pytest.fixture(scope="module")
def env(runner: LocalRunner) -> dict:
    return runner_environment(runner)


def test_twenty_aa_comparisons_accept_nothing(runner: LocalRunner, env: dict) -> None:
    """The same kernel against itself, 20 times, alternating A B A B: the gate must never accept."""
    rows = []
    for name in ("vector_add.cu", "transpose_naive.cu", "softmax_row.cu", "reduce_atomic.cu"):
        path = ROOT / "samples" / name
        text = path.read_text()
        entry = {
            "vector_add.cu": "vector_add",
            "transpose_naive.cu": "transpose_naive",
            "softmax_row.cu": "softmax_row",
            "reduce_atomic.cu": "reduce_atomic",
        }[name]
        for i in range(5):
            v = verify(
                path, text, text, entry, runner, VerifyOptions(timing_only=True, rounds=5, reps=10), env
            )
            rows.append(
                {
                    "sample": name,
                    "i": i,
                    "kind": v.kind,
                    "speedup": v.stats["speedup"],
                    "ci_low": v.stats["ci_low"],
                    "ci_high": v.stats["ci_high"],
                    "baseline_ms": v.stats["baseline_median_ms"],
                }
            )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"aa-{gpu_slug(local_gpu_name())}.json").write_text(
        json.dumps({"environment": env, "comparisons": rows}, indent=1) + "\n"
    )
    assert len(rows) == 20
    assert not [r for r in rows if r["kind"] == "accepted"], rows


def test_tuner_win_is_accepted_replayed_applied_and_reverted(
    runner: LocalRunner, env: dict, tmp_path: Path
) -> None:
    src = ROOT / "samples" / "softmax_row.cu"
    work = tmp_path / "ws"
    work.mkdir()
    (work / "kernellsp.toml").write_text("")
    path = work / "softmax_row.cu"
    text = src.read_text()
    path.write_text(text)
    result = optimize(
        path,
        text,
        "softmax_row",
        runner,
        [Tuner()],
        OptimizeOptions(rounds=1, candidates=2, verify=VerifyOptions(seeds=2, rounds=4, reps=10)),
        environment=env,
    )
    assert result.accepted, (
        result.final.kind if result.final else None,
        result.stop_reason,
        [(c.description, c.verdict, c.message) for c in result.candidates],
    )
    assert result.speedup and result.speedup > 1.02
    bundle = Path(result.bundle)  # type: ignore[arg-type]
    assert (bundle / "summary.json").is_file() and (bundle / "final-verdict.json").is_file()
    v, recorded = replay(bundle, runner, VerifyOptions(seeds=2, rounds=4, reps=10))
    assert v.kind == recorded["kind"] == "accepted"
    backup = apply_result(path, result)
    assert path.read_text() == result.champion_text and backup.read_text() == text
    revert(path)
    assert path.read_text() == text
    # The committed fixture tests/fixtures/bundles/softmax_row-tuner came from such a run on the H200; CPU
    # tests pin its contents, so this test leaves it alone (copy a bundle there by hand to refresh it).
