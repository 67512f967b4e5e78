"""The adversarial corpus (tests/adversarial/) through the whole verification gate on a real GPU.

Run on a GPU host with ``pytest -m gpu tests/optimize/test_adversarial_gpu.py``. Every case of
tests/adversarial/manifest.toml goes through :func:`kernellsp.optimize.verify.gate.verify` with the local runner,
and its verdict kind must be the manifest's ``expect`` (or one of ``expect_any``). All results, passing
or not, are written at the end of the session to ``tests/bench/results/adversarial-<gpu>.json`` and
``.md`` (case, pitfall, expected, got, message, seconds).
"""

from __future__ import annotations

import json
import shutil
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.gpuinfo import gpu_slug, local_gpu_name

from kernellsp.optimize.verify.gate import VerifyError, VerifyOptions, verify
from kernellsp.run.runner import LocalRunner

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "tests" / "adversarial" / "manifest.toml"
RESULTS = REPO / "tests" / "bench" / "results"
CASES: list[dict[str, Any]] = tomllib.loads(MANIFEST.read_text())["case"]
OPTIONS = dict(seeds=2, rounds=4, reps=10)


def expected(case: dict[str, Any]) -> list[str]:
    return list(case["expect_any"]) if "expect_any" in case else [case["expect"]]


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_results(rows: list[dict[str, Any]], gpu: str, environment: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"adversarial-{gpu_slug(gpu)}"
    payload = {"gpu": gpu, "options": OPTIONS, "environment": environment, "cases": rows}
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=1, default=str) + "\n")
    ok = sum(1 for r in rows if r["ok"])
    # Cheats: every case that must not be accepted; honest: the correct faster rewrites (must be accepted).
    # A few cases allow either (a cheat whose work skipping the gate may or may not see): in neither count.
    cheats = [r for r in rows if "accepted" not in r["expected"]]
    honest = [r for r in rows if r["expected"] == ["accepted"]]
    cheat_accepted = sum(1 for r in cheats if r["got"] == "accepted")
    honest_accepted = sum(1 for r in honest if r["got"] == "accepted")
    lines = [
        f"# Adversarial corpus on {gpu}",
        "",
        "| cases | expected verdict | cheats accepted | honest rewrites accepted |",
        "|---:|---:|---:|---:|",
        f"| {len(rows)} | {ok} of {len(rows)} | {cheat_accepted} of {len(cheats)} | {honest_accepted} of {len(honest)} |",
        "",
        f"`pytest -m gpu tests/optimize/test_adversarial_gpu.py` (VerifyOptions seeds={OPTIONS['seeds']}, "
        f"rounds={OPTIONS['rounds']}, reps={OPTIONS['reps']}). Cases: tests/adversarial/manifest.toml.",
        "",
        "| case | pitfall | expected | got | ok | message | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        verdict = "yes" if r["ok"] else "known gap" if r.get("known_gap") else "**NO**"
        lines.append(
            f"| {r['case']} | {_cell(r['pitfall'])} | {' / '.join(r['expected'])} | {r['got']} | "
            f"{verdict} | {_cell(r['message'])[:300]} | {r['seconds']:.1f} |"
        )
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="session")
def runner() -> LocalRunner:
    if shutil.which("nvidia-smi") is None or shutil.which("nvcc") is None:
        pytest.skip("needs an NVIDIA GPU, nvcc and compute-sanitizer")
    return LocalRunner()


@pytest.fixture(scope="session")
def recorder(runner: LocalRunner) -> Iterator[dict[str, Any]]:
    """Collects every case's result; writes the JSON and markdown once, whatever failed."""
    from kernellsp.profile.environment import runner_environment

    state: dict[str, Any] = {
        "rows": [],
        "gpu": local_gpu_name() or "unknown-gpu",
        "environment": runner_environment(runner),
    }
    yield state
    # With pytest-xdist every worker has its own session: each writes its part, then (under a lock)
    # merges all parts written so far, so the last worker to finish leaves the complete table.
    import fcntl
    import os

    parts = RESULTS / ".adversarial-parts"
    parts.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (parts / f"{worker}.json").write_text(json.dumps(state["rows"], default=str))
    with open(parts / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = [r for f in sorted(parts.glob("*.json")) for r in json.loads(f.read_text())]
        order = {c["name"]: i for i, c in enumerate(CASES)}
        rows = sorted({r["case"]: r for r in rows}.values(), key=lambda r: order.get(r["case"], len(order)))
        write_results(rows, state["gpu"], state["environment"])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_adversarial_case(case: dict[str, Any], runner: LocalRunner, recorder: dict[str, Any]) -> None:
    base_path = REPO / case["baseline"]
    baseline = base_path.read_text()
    candidate = (REPO / case["candidate"]).read_text()
    want = expected(case)
    row: dict[str, Any] = {
        "case": case["name"],
        "baseline": case["baseline"],
        "entry": case["entry"],
        "gate": case["gate"],
        "pitfall": case["pitfall"],
        "expected": want,
    }
    t0 = time.monotonic()
    try:
        v = verify(
            base_path,
            baseline,
            candidate,
            case["entry"],
            runner,
            VerifyOptions(**OPTIONS),  # type: ignore[arg-type]
            environment=recorder["environment"],
        )
    except VerifyError as exc:
        row.update(got="verify_error", ok=False, message=str(exc), seconds=time.monotonic() - t0)
        recorder["rows"].append(row)
        pytest.fail(f"{case['name']}: verify could not run: {exc}")
    row.update(
        got=v.kind,
        ok=v.kind in want,
        message=v.message,
        seconds=v.seconds or time.monotonic() - t0,
        speedup=v.speedup,
        stats=v.stats,
        details={k: val for k, val in v.details.items() if k not in ("report", "compiler_output", "checked")},
    )
    row["known_gap"] = bool(case.get("known_gap"))
    recorder["rows"].append(row)
    if v.kind not in want and case.get("known_gap"):
        pytest.xfail(
            f"known gap {case['name']}: got {v.kind} ({v.message}); a sound gate answers {' or '.join(want)}"
        )
    assert v.kind in want, f"{case['name']}: expected {' or '.join(want)}, got {v.kind}: {v.message}"
