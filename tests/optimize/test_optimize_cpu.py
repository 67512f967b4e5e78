"""The rewrite loop's workspace state without a GPU: memory, bundles, apply/backup/revert, history, replay.

Results are fabricated OptimizeResult objects (what the loop returns) around real tuner candidates;
the committed bundle tests/fixtures/bundles/softmax_row-tuner was recorded on an H200 and is
checked for consistency: its champion is in scope, its diff turns the original into the champion.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kernellsp.cli import app
from kernellsp.optimize.apply import ApplyError, apply_result, record_backup, revert, side_file
from kernellsp.optimize.evidence import Memory, _write_bundle, state_dir
from kernellsp.optimize.loop import replay
from kernellsp.optimize.propose.base import ProposalContext
from kernellsp.optimize.propose.tuner import Tuner
from kernellsp.optimize.result import CandidateRecord, OptimizeError, OptimizeOptions, OptimizeResult
from kernellsp.optimize.verify.gate import Verdict, VerifyOptions
from kernellsp.optimize.verify.scope import check_scope, edit_targets
from kernellsp.profile.environment import local_gpu_problem
from kernellsp.run.runner import LocalRunner
from kernellsp.source import spec as specmod
from kernellsp.source.model import parse_source

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
BUNDLE = REPO / "tests" / "fixtures" / "bundles" / "softmax_row-tuner"
SOFTMAX = (SAMPLES / "softmax_row.cu").read_text()


def tuner_candidate(text: str, transform: str) -> str:
    model = parse_source(text)
    bound = specmod.specs_from_source(model)[0][0]
    ctx = ProposalContext("softmax_row.cu", text, text, bound.entry, model, bound)
    return next(c.text for c in Tuner().propose(ctx, 100) if c.description == transform)


CHAMPION = tuner_candidate(SOFTMAX, "tunable:BLOCK=64")


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "kernellsp.toml").write_text("")
    (root / "softmax_row.cu").write_text(SOFTMAX)
    monkeypatch.chdir(root)
    for var in ("KERNELLSP_GPU_HOST", "KERNELLSP_RUNNER"):
        monkeypatch.delenv(var, raising=False)
    return root


def make_result(
    path: Path,
    original: str = SOFTMAX,
    champion: str = CHAMPION,
    accepted: bool = True,
    bundle: str | None = None,
) -> OptimizeResult:
    final = Verdict(
        "accepted" if accepted else "not_faster",
        accepted,
        "1.347x faster (0.5845 → 0.4335 ms; 95% CI 1.331–1.354, 4 A/B rounds)" if accepted else "no",
        "softmax_row",
        details={
            "checked": [{"seed": 0, "shape": 0}],
            "roofline_floor_ms": 0.028,
            "candidate_pct_of_roofline": 6.4,
        },
        stats={
            "speedup": 1.347,
            "ci_low": 1.331,
            "ci_high": 1.354,
            "baseline_median_ms": 0.5845,
            "candidate_median_ms": 0.4335,
        },
        environment={"gpu": "NVIDIA H200"},
    )
    cands = [
        CandidateRecord(
            1,
            0,
            "01c9ef24cbaded15",
            "tunable:BLOCK=64",
            "tuner",
            ["KL202"],
            None,
            "accepted",
            "1.347x faster",
            1.347,
            39.0,
            0.5845,
            0.4335,
        ),
        CandidateRecord(
            1,
            1,
            "abcdef0123456789",
            "restrict",
            "tuner",
            ["KL405"],
            3.0,
            "not_faster",
            "not measurably faster",
            1.001,
            20.0,
            0.5845,
            0.5839,
        ),
    ]
    return OptimizeResult(
        path=str(path),
        entry="softmax_row",
        original_text=original,
        champion_text=champion if accepted else original,
        accepted=accepted,
        final=final,
        candidates=cands,
        rounds_run=1,
        stop_reason="round budget",
        bundle=bundle,
        wall_s=65.0,
        environment={"gpu": "NVIDIA H200", "driver": "580.159.04"},
    )


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def needs_no_gpu() -> str:
    problem = local_gpu_problem()
    if problem is None:
        pytest.skip("this host has a GPU and ncu: the command would run for real")
    return problem


# --------------------------------------------------------------------------------------------------
# Memory


def test_memory_round_trip(tmp_path: Path) -> None:
    path = tmp_path / ".kernellsp" / "memory.json"
    mem = Memory(path)
    assert mem.records == [] and not path.exists()
    recs = [
        {
            "file": "softmax_row.cu",
            "entry": "softmax_row",
            "key": "k1",
            "transform": "tunable:BLOCK=64",
            "verdict": "accepted",
            "measured_speedup": 1.34,
        },
        {
            "file": "softmax_row.cu",
            "entry": "softmax_row",
            "key": "k2",
            "transform": "restrict",
            "verdict": "not_faster",
            "measured_speedup": 1.0,
        },
        {
            "file": "softmax_row.cu",
            "entry": "other",
            "key": "k3",
            "transform": "restrict",
            "verdict": "mismatch",
        },
        {
            "file": "sub/softmax_row.cu",
            "entry": "softmax_row",
            "key": "k4",
            "transform": "float_literals",
            "verdict": "accepted",
        },
    ]
    for r in recs:
        mem.add(r)
    mem.save()
    assert path.is_file() and not path.with_suffix(".tmp").exists()
    data = json.loads(path.read_text())
    assert data == {"version": 1, "records": recs}
    again = Memory(path)
    assert again.records == recs
    assert [r["key"] for r in again.tried("softmax_row.cu", "softmax_row")] == ["k1", "k2"]
    assert [r["key"] for r in again.tried("softmax_row.cu", "other")] == ["k3"]
    assert [r["key"] for r in again.tried("sub/softmax_row.cu", "softmax_row")] == ["k4"]
    assert again.tried("nothing.cu", "softmax_row") == []
    # Appending after a reload keeps what was there.
    again.add(
        {"file": "softmax_row.cu", "entry": "softmax_row", "key": "k5", "transform": "launch_bounds:256"}
    )
    again.save()
    assert len(Memory(path).tried("softmax_row.cu", "softmax_row")) == 3


def test_memory_survives_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    path.write_text("{not json")
    mem = Memory(path)
    assert mem.records == []
    mem.add({"file": "a.cu", "entry": "k", "key": "x"})
    mem.save()
    assert Memory(path).records == [{"file": "a.cu", "entry": "k", "key": "x"}]


def test_memory_feeds_the_tuner(ws: Path) -> None:
    """What memory says was tried for this file and entry is not proposed again (as the loop wires it)."""
    mem = Memory(state_dir(ws / "softmax_row.cu") / "memory.json")
    mem.add(
        {
            "file": "softmax_row.cu",
            "entry": "softmax_row",
            "key": "zzz",
            "transform": "tunable:BLOCK=128",
            "verdict": "not_faster",
        }
    )
    mem.add({"file": "softmax_row.cu", "entry": "other_kernel", "key": "yyy", "transform": "restrict"})
    mem.save()
    model = parse_source(SOFTMAX)
    bound = specmod.specs_from_source(model)[0][0]
    tried = Memory(state_dir(ws / "softmax_row.cu") / "memory.json").tried("softmax_row.cu", "softmax_row")
    ctx = ProposalContext("softmax_row.cu", SOFTMAX, SOFTMAX, "softmax_row", model, bound, tried=tried)
    descs = [c.description for c in Tuner().propose(ctx, 100)]
    assert "tunable:BLOCK=128" not in descs
    assert "restrict" in descs  # tried for another entry only


def test_state_dir_is_the_workspace_root(ws: Path) -> None:
    sub = ws / "kernels"
    sub.mkdir()
    assert state_dir(sub / "a.cu") == ws / ".kernellsp"
    assert state_dir(ws / "softmax_row.cu") == ws / ".kernellsp"


# --------------------------------------------------------------------------------------------------
# Apply, backup, revert


def backups_index(path: Path) -> list[dict[str, str]]:
    return json.loads((state_dir(path) / "backups" / "index.json").read_text())


def test_apply_writes_the_champion_and_keeps_a_byte_identical_backup(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    original_bytes = path.read_bytes()
    backup = apply_result(path, make_result(path, bundle="some/bundle"))
    assert path.read_text() == CHAMPION
    assert backup.is_file() and backup.parent == ws / ".kernellsp" / "backups"
    assert backup.name.startswith("softmax_row.cu.") and backup.suffix == ".bak"
    assert backup.read_bytes() == original_bytes
    assert not (ws / "softmax_row.cu.kernellsp-tmp").exists()
    assert not (ws / "softmax_row.kernellsp.cu").exists()
    [entry] = backups_index(path)
    assert entry["file"] == str(path.resolve()) and entry["backup"] == str(backup)
    assert entry["bundle"] == "some/bundle"
    # revert restores the original byte for byte and forgets the backup.
    restored_from = revert(path)
    assert restored_from == backup
    assert path.read_bytes() == original_bytes
    assert backups_index(path) == []
    with pytest.raises(ApplyError, match=r"no kernellsp backup of .*softmax_row\.cu"):
        revert(path)


def test_revert_refuses_when_the_file_changed_since_and_force_overrides(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    backup = apply_result(path, make_result(path))
    edited = CHAMPION + "\n// the user's own edit\n"
    path.write_text(edited)
    with pytest.raises(ApplyError) as exc:
        revert(path)
    msg = str(exc.value)
    assert "changed after kernellsp wrote it" in msg and "--force" in msg and str(backup) in msg
    assert path.read_text() == edited  # untouched
    assert len(backups_index(path)) == 1
    assert revert(path, force=True) == backup
    assert path.read_text() == SOFTMAX


def test_apply_refuses_when_the_file_changed_since_the_run_began(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    edited = SOFTMAX.replace("// pass 1", "// pass one")
    path.write_text(edited)
    with pytest.raises(ApplyError) as exc:
        apply_result(path, make_result(path))
    side = ws / "softmax_row.kernellsp.cu"
    assert "changed since the run began" in str(exc.value) and str(side) in str(exc.value)
    assert side.read_text() == CHAMPION
    assert path.read_text() == edited
    assert not (state_dir(path) / "backups").exists()


def test_apply_refuses_a_rejected_result(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    with pytest.raises(ApplyError, match="nothing to apply"):
        apply_result(path, make_result(path, accepted=False))
    assert path.read_text() == SOFTMAX


def test_revert_restores_the_newest_backup_first(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    second = tuner_candidate(CHAMPION, "restrict")
    apply_result(path, make_result(path))
    apply_result(path, make_result(path, original=CHAMPION, champion=second))
    assert path.read_text() == second
    assert len(backups_index(path)) == 2
    revert(path)
    assert path.read_text() == CHAMPION
    revert(path)
    assert path.read_text() == SOFTMAX


def test_backups_of_other_files_are_separate(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    other = ws / "other.cu"
    other.write_text("// other\n")
    record_backup(other, "// other\n", "// other v2\n", None)
    other.write_text("// other v2\n")
    apply_result(path, make_result(path))
    assert len(backups_index(path)) == 2
    revert(path)
    assert path.read_text() == SOFTMAX
    assert other.read_text() == "// other v2\n"
    revert(other)
    assert other.read_text() == "// other\n"


def test_side_file(ws: Path) -> None:
    side = side_file(ws / "softmax_row.cu", CHAMPION)
    assert side == ws / "softmax_row.kernellsp.cu" and side.read_text() == CHAMPION


def test_cli_revert(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    r = invoke("revert", "softmax_row.cu")
    assert r.exit_code == 2 and "no kernellsp backup" in r.stderr
    backup = apply_result(path, make_result(path))
    path.write_text(CHAMPION + "// edit\n")
    r = invoke("revert", "softmax_row.cu")
    assert r.exit_code == 2 and "changed after kernellsp wrote it; use --force" in r.stderr
    r = invoke("revert", "softmax_row.cu", "--force")
    assert r.exit_code == 0 and r.stdout.strip() == f"restored softmax_row.cu from {backup}"
    assert path.read_text() == SOFTMAX


# --------------------------------------------------------------------------------------------------
# history


def test_cli_history(ws: Path) -> None:
    r = invoke("history", "softmax_row.cu")
    assert r.exit_code == 0 and r.stdout.strip() == "no history for softmax_row.cu"
    mem = Memory(ws / ".kernellsp" / "memory.json")
    mem.add(
        {
            "file": "softmax_row.cu",
            "entry": "softmax_row",
            "key": "k1",
            "transform": "tunable:BLOCK=64",
            "description": "tunable:BLOCK=64",
            "proposer": "tuner",
            "verdict": "accepted",
            "predicted_gain_pct": None,
            "measured_speedup": 1.3466,
            "time": "20261121T214340Z",
        }
    )
    mem.add(
        {
            "file": "softmax_row.cu",
            "entry": "softmax_row",
            "key": "k2",
            "transform": "one warp per row",
            "description": "one warp per row",
            "proposer": "llm",
            "verdict": "mismatch",
            "predicted_gain_pct": 40.0,
            "measured_speedup": None,
            "time": "20261121T214341Z",
        }
    )
    mem.add(
        {
            "file": "other.cu",
            "entry": "k",
            "key": "k3",
            "description": "restrict",
            "proposer": "tuner",
            "verdict": "not_faster",
            "measured_speedup": 1.001,
            "time": "20261121T214342Z",
        }
    )
    mem.save()
    r = invoke("history", "softmax_row.cu")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines == [
        "20261121T214340Z softmax_row.cu:softmax_row [tuner] tunable:BLOCK=64: accepted (predicted -, measured 1.347x)",
        "20261121T214341Z softmax_row.cu:softmax_row [llm] one warp per row: mismatch (predicted 40%, measured -)",
    ]
    r = invoke("history")
    assert (
        r.exit_code == 0
        and len(r.stdout.splitlines()) == 3
        and "other.cu:k [tuner] restrict: not_faster" in r.stdout
    )


# --------------------------------------------------------------------------------------------------
# Bundles


def test_write_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "run"
    bundle.mkdir()
    path = tmp_path / "softmax_row.cu"
    result = make_result(path, bundle=str(bundle))
    _write_bundle(bundle, path, result)
    names = {p.name for p in bundle.iterdir()}
    assert names == {
        "champion.cu",
        "diff.patch",
        "final-verdict.json",
        "summary.json",
        "environment.json",
        "summary.md",
    }
    assert (bundle / "champion.cu").read_text() == CHAMPION
    assert apply_unified_diff(SOFTMAX, (bundle / "diff.patch").read_text()) == CHAMPION
    summary = json.loads((bundle / "summary.json").read_text())
    assert (
        summary["accepted"] is True and summary["final_verdict"] == "accepted" and summary["speedup"] == 1.347
    )
    assert summary["roofline"] == {"roofline_floor_ms": 0.028, "candidate_pct_of_roofline": 6.4}
    assert [c["description"] for c in summary["candidates"]] == ["tunable:BLOCK=64", "restrict"]
    assert json.loads((bundle / "final-verdict.json").read_text())["kind"] == "accepted"
    assert json.loads((bundle / "environment.json").read_text())["gpu"] == "NVIDIA H200"
    md = (bundle / "summary.md").read_text()
    assert md.startswith("# kernellsp optimize softmax_row.cu :: softmax_row\n")
    assert "Accepted: 1.347x faster" in md
    assert "| 1 | tunable:BLOCK=64 | tuner | accepted | 1.347 | 1.347x faster |" in md
    assert "| 1 | restrict | tuner | not_faster | 1.001 | not measurably faster |" in md
    # A run without a verified winner says so and keeps the original as the champion.
    rejected = make_result(path, accepted=False)
    rejected.final = None
    rejected.stop_reason = "no new candidates"
    _write_bundle(bundle, path, rejected)
    assert (bundle / "champion.cu").read_text() == SOFTMAX
    assert (bundle / "diff.patch").read_text() == ""
    assert "No verified improvement (no new candidates)." in (bundle / "summary.md").read_text()


def apply_unified_diff(original: str, patch: str) -> str:
    """Apply a unified diff (as difflib writes it) to ``original``; every context line must match."""
    src = original.splitlines(keepends=True)
    out: list[str] = []
    pos = 0
    lines = patch.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line)
        if not m:
            assert line.startswith(("--- ", "+++ ")), line
            i += 1
            continue
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
        assert start >= pos
        out += src[pos:start]
        pos = start
        i += 1
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, body = lines[i][0], lines[i][1:]
            if tag == " ":
                assert src[pos] == body, (pos, src[pos], body)
                out.append(body)
                pos += 1
            elif tag == "-":
                assert src[pos] == body, (pos, src[pos], body)
                pos += 1
            elif tag == "+":
                out.append(body)
            else:
                assert tag == "\\", lines[i]
            i += 1
    out += src[pos:]
    return "".join(out)


def test_committed_bundle_is_complete_and_consistent() -> None:
    for name in (
        "original.cu",
        "champion.cu",
        "summary.json",
        "summary.md",
        "final-verdict.json",
        "diff.patch",
        "environment.json",
    ):
        assert (BUNDLE / name).is_file(), name
    final = json.loads((BUNDLE / "final-verdict.json").read_text())
    assert final["kind"] == "accepted" and final["accepted"] is True and final["entry"] == "softmax_row"
    stats = final["stats"]
    assert stats["ci_low"] <= stats["speedup"] <= stats["ci_high"] and stats["ci_low"] > 1.02
    assert final["environment"]["gpu"] == "NVIDIA H200"
    summary = json.loads((BUNDLE / "summary.json").read_text())
    assert summary["entry"] == "softmax_row" and Path(summary["path"]).name == "softmax_row.cu"
    assert summary["accepted"] is True and summary["final_verdict"] == "accepted"
    assert summary["speedup"] == pytest.approx(stats["speedup"])
    assert summary["final_stats"] == stats
    assert {c["description"] for c in summary["candidates"]} == {"tunable:BLOCK=128", "tunable:BLOCK=64"}
    assert all(c["proposer"] == "tuner" for c in summary["candidates"])
    assert json.loads((BUNDLE / "environment.json").read_text()) == summary["environment"]
    assert "Accepted: " + final["message"] in (BUNDLE / "summary.md").read_text()
    # The original is the sample as committed.
    assert (BUNDLE / "original.cu").read_text() == SOFTMAX


def test_committed_bundle_champion_is_in_scope() -> None:
    original = (BUNDLE / "original.cu").read_text()
    champion = (BUNDLE / "champion.cu").read_text()
    assert champion != original
    targets = edit_targets(parse_source(original), "softmax_row")
    r = check_scope(original, champion, targets, "softmax_row.cu", "softmax_row")
    assert r.ok, r.reason
    # Only the default block size changed: the winner's spec picks BLOCK = 128, everything else as written.
    ospec = specmod.specs_from_source(parse_source(original))[0][0].spec
    cspec = specmod.specs_from_source(parse_source(champion))[0][0].spec
    assert cspec.tunables == {"BLOCK": [128, 256, 64, 32]}
    # The rewrite changed exactly that one line of the spec; the user's text stays byte for byte.
    changed = [(a, b) for a, b in zip(original.splitlines(), champion.splitlines(), strict=True) if a != b]
    assert changed == [
        ("tunables = { BLOCK = [256, 128, 64, 32] }", "tunables = { BLOCK = [128, 256, 64, 32] }")
    ]
    assert cspec.model_dump(exclude={"tunables"}) == ospec.model_dump(exclude={"tunables"})


def test_committed_bundle_diff_turns_the_original_into_the_champion() -> None:
    original = (BUNDLE / "original.cu").read_text()
    champion = (BUNDLE / "champion.cu").read_text()
    patch = (BUNDLE / "diff.patch").read_text()
    assert patch.startswith("--- a/softmax_row.cu\n+++ b/softmax_row.cu\n")
    assert apply_unified_diff(original, patch) == champion


def test_replay_refuses_what_is_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(OptimizeError, match="is not a kernellsp evidence bundle"):
        replay(tmp_path, LocalRunner())
    shutil.copy(BUNDLE / "summary.json", tmp_path / "summary.json")
    with pytest.raises(OptimizeError, match=r"lacks original\.\* or champion\.\*"):
        replay(tmp_path, LocalRunner())


def test_replay_of_a_tampered_bundle_is_refused_by_the_scope_gate(tmp_path: Path) -> None:
    """Replay re-verifies original vs champion: a champion edited outside the scope fails before any GPU step."""
    bundle = tmp_path / "bundle"
    shutil.copytree(BUNDLE, bundle)
    champion = (bundle / "champion.cu").read_text()
    tampered = champion.replace("rtol = 1e-3", "rtol = 0.1")
    assert tampered != champion
    (bundle / "champion.cu").write_text(tampered)
    v, recorded = replay(bundle, LocalRunner())
    assert recorded["kind"] == "accepted"
    assert v.kind == "scope_violation" and "tolerance" in v.message and v.environment == {}


def test_cli_replay_without_a_gpu_exits_2(ws: Path) -> None:
    problem = needs_no_gpu()
    r = invoke("replay", str(BUNDLE))
    assert r.exit_code == 2 and r.stdout == ""
    err = r.stderr.strip()
    assert err.startswith("error: cannot replay: no GPU here") and problem in err and "--gpu-host" in err


def test_cli_optimize_without_a_gpu_exits_2(ws: Path) -> None:
    problem = needs_no_gpu()
    r = invoke("optimize", "softmax_row.cu", "--proposer", "tuner")
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert err.startswith("error: cannot optimize: no GPU here") and problem in err
    assert (ws / "softmax_row.cu").read_text() == SOFTMAX
    assert not (ws / ".kernellsp" / "runs").exists()


def test_damaged_bundle_and_backup_index_give_clear_errors(tmp_path: Path) -> None:
    """Files kernellsp wrote that were edited or truncated fail with a message naming the file, not a traceback."""
    bundle = tmp_path / "bundle"
    shutil.copytree(BUNDLE, bundle)
    (bundle / "summary.json").write_text('{"path": "softmax_row.cu", ')
    with pytest.raises(OptimizeError, match=r"summary\.json cannot be read"):
        replay(bundle, LocalRunner())
    (bundle / "summary.json").write_text("{}")
    with pytest.raises(OptimizeError, match="lacks the entry or the path"):
        replay(bundle, LocalRunner())
    ws2 = tmp_path / "ws"
    ws2.mkdir()
    (ws2 / "kernellsp.toml").write_text("")
    f = ws2 / "k.cu"
    f.write_text("__global__ void k() {}\n")
    index = ws2 / ".kernellsp" / "backups" / "index.json"
    index.parent.mkdir(parents=True)
    index.write_text("[{")
    with pytest.raises(ApplyError, match=r"index\.json cannot be read"):
        revert(f)
    assert f.read_text() == "__global__ void k() {}\n"


# --------------------------------------------------------------------------------------------------
# Apply and revert on files that are not plain UTF-8/LF, read-only, symlinked, or damaged state


def test_apply_keeps_crlf_mode_and_follows_a_symlink(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    path.write_bytes(SOFTMAX.replace("\n", "\r\n").encode())
    path.chmod(0o640)
    link = ws / "link.cu"
    link.symlink_to(path)
    original = path.read_bytes()
    result = make_result(path)
    result.original_text, result.champion_text = SOFTMAX.replace("\n", "\r\n"), CHAMPION.replace("\n", "\r\n")
    backup = apply_result(link, result)
    assert link.is_symlink(), "the link was replaced by a copy"
    assert path.read_bytes() == CHAMPION.replace("\n", "\r\n").encode()
    assert (path.stat().st_mode & 0o777) == 0o640
    assert backup.read_bytes() == original
    assert revert(link) == backup and path.read_bytes() == original


def test_apply_latin1_file_round_trips_its_bytes(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    text = SOFTMAX.replace("// pass 1", "// pass 1 (caf\xe9)")
    path.write_bytes(text.encode("latin-1"))
    result = make_result(path)
    result.original_text, result.champion_text = text, CHAMPION + "// caf\xe9\n"
    apply_result(path, result)
    assert path.read_bytes() == (CHAMPION + "// caf\xe9\n").encode("latin-1")
    revert(path)
    assert path.read_bytes() == text.encode("latin-1")
    result.champion_text = CHAMPION + "// \u2713 not latin-1\n"
    with pytest.raises(ApplyError, match="latin-1 cannot hold"):
        apply_result(path, result)
    assert path.read_bytes() == text.encode("latin-1")


def test_apply_refuses_a_read_only_file(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    path.chmod(0o444)  # refused for root too: no write bit is a statement
    with pytest.raises(ApplyError, match="is read-only; the verified result was saved beside it"):
        apply_result(path, make_result(path))
    assert path.read_text() == SOFTMAX and (ws / "softmax_row.kernellsp.cu").read_text() == CHAMPION


def test_side_files_never_overwrite_an_earlier_result(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    first, second = side_file(path, "one\n"), side_file(path, "two\n")
    assert first.name == "softmax_row.kernellsp.cu" and second.name == "softmax_row.kernellsp-2.cu"
    assert first.read_text() == "one\n" and second.read_text() == "two\n"


def test_forced_revert_keeps_the_text_it_replaces(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    apply_result(path, make_result(path))
    path.write_text(CHAMPION + "// my later edit\n")
    revert(path, force=True)
    [kept] = (state_dir(path) / "backups").glob("softmax_row.cu.*.before-revert.bak")
    assert kept.read_text() == CHAMPION + "// my later edit\n"
    assert path.read_text() == SOFTMAX


def test_revert_of_a_deleted_file_needs_force(ws: Path) -> None:
    path = ws / "softmax_row.cu"
    apply_result(path, make_result(path))
    path.unlink()
    with pytest.raises(ApplyError, match="no longer exists; use --force"):
        revert(path)
    revert(path, force=True)
    assert path.read_text() == SOFTMAX


@pytest.mark.parametrize("content", ['[{"backup": "x"}]', '{"a": 1}', "null"])
def test_backup_index_of_the_wrong_shape_is_named(ws: Path, content: str) -> None:
    path = ws / "softmax_row.cu"
    index = state_dir(path) / "backups" / "index.json"
    index.parent.mkdir(parents=True)
    index.write_text(content)
    with pytest.raises(ApplyError, match=r"index\.json cannot be read"):
        revert(path)
    with pytest.raises(ApplyError, match=r"index\.json cannot be read"):
        apply_result(path, make_result(path))
    assert path.read_text() == SOFTMAX


@pytest.mark.parametrize("content", ["[]", '{"records": [{"file": "a.cu"}, 3]}', '{"records": 5}'])
def test_memory_of_the_wrong_shape_starts_afresh(tmp_path: Path, content: str) -> None:
    path = tmp_path / "memory.json"
    path.write_text(content)
    assert Memory(path).records == []


# --------------------------------------------------------------------------------------------------
# The loop's control flow, with the GPU gates replaced by a stand-in (they need a GPU; the real ones run
# in tests/optimize/test_verify_gpu.py): stopping near the roofline, Ctrl-C, replay with the run's own gates


def _loop(ws: Path, monkeypatch: pytest.MonkeyPatch, fake_verify: Any, **kw: Any) -> OptimizeResult:
    import kernellsp.optimize.loop as opt

    monkeypatch.setattr(opt, "verify", fake_verify)
    path = ws / "softmax_row.cu"
    return opt.optimize(
        path,
        SOFTMAX,
        "softmax_row",
        LocalRunner(),
        [Tuner()],
        OptimizeOptions(**{"rounds": 4, "candidates": 2, "parallel": 2, **kw}),
        environment={"gpu": "stand-in"},
        bundle_root=ws / ".kernellsp" / "runs",
    )


def test_loop_stops_once_the_champion_is_near_the_roofline(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_verify(path, baseline, candidate, entry, runner, options, env=None, cancel=None, progress=None):  # type: ignore[no-untyped-def]
        return Verdict(
            "accepted",
            True,
            "faster",
            entry,
            details={"candidate_pct_of_roofline": 93.0},
            stats={"speedup": 1.5, "baseline_median_ms": 1.0, "candidate_median_ms": 0.667},
        )

    result = _loop(ws, monkeypatch, fake_verify)
    assert result.stop_reason == "near the roofline" and result.rounds_run == 1
    assert result.accepted and result.verify_options["min_gain_pct"] == 2.0


@pytest.mark.parametrize(("first_pct", "verified"), [(95.0, 1), (60.0, 4)])
def test_a_round_stops_after_a_recipe_candidate_near_the_roofline(
    ws: Path, monkeypatch: pytest.MonkeyPatch, first_pct: float, verified: int
) -> None:
    """The recipes' first candidate is verified alone; at the roofline the round's others are skipped (and
    kept out of the memory), below it they are all verified."""
    import kernellsp.optimize.loop as opt
    from kernellsp.optimize.propose.recipes.proposer import RecipeProposer

    calls: list[str] = []

    def fake_verify(path, baseline, candidate, entry, runner, options, env=None, cancel=None, progress=None):  # type: ignore[no-untyped-def]
        calls.append(candidate)
        pct = first_pct if len(calls) == 1 else 70.0
        return Verdict(
            "accepted",
            True,
            "faster",
            entry,
            details={"candidate_pct_of_roofline": pct},
            stats={"speedup": 1.1, "baseline_median_ms": 1.0, "candidate_median_ms": 0.9},
        )

    monkeypatch.setattr(opt, "verify", fake_verify)
    path = ws / "vector_add.cu"
    path.write_text((SAMPLES / "vector_add.cu").read_text())
    result = opt.optimize(
        path,
        path.read_text(),
        "vector_add",
        LocalRunner(),
        [RecipeProposer()],
        OptimizeOptions(rounds=1, candidates=4, parallel=2),
        environment={"gpu": "stand-in"},
        bundle_root=ws / ".kernellsp" / "runs",
    )
    kinds = [c.verdict for c in result.candidates]
    assert len(kinds) == 4 and len(calls) == verified + 1  # + the final verification
    assert kinds == (["accepted"] + ["skipped"] * 3 if verified == 1 else ["accepted"] * 4)
    memory = json.loads((state_dir(path) / "memory.json").read_text())["records"]
    assert len(memory) == verified


def test_interrupt_cancels_the_candidates_still_verifying(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def fake_verify(path, baseline, candidate, entry, runner, options, env=None, cancel=None, progress=None):  # type: ignore[no-untyped-def]
        if not seen:
            seen.append(False)
            time.sleep(0.2)
            raise KeyboardInterrupt  # as Ctrl-C reaches the CLI while a verification runs
        deadline = (
            time.monotonic() + 20
        )  # a long verification that polls its cancel event, like the runners do
        while time.monotonic() < deadline and not cancel.is_set():
            time.sleep(0.05)
        seen.append(cancel.is_set())
        return Verdict("error", False, "cancelled", entry)

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        _loop(ws, monkeypatch, fake_verify)
    assert time.monotonic() - t0 < 5, "the interrupt waited for the other verification to finish"
    assert seen == [False, True]


def test_replay_uses_the_gates_the_run_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kernellsp.optimize.loop as opt

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "original.cu").write_text(SOFTMAX)
    result = make_result(tmp_path / "softmax_row.cu")
    result.verify_options = {"seeds": 2, "rounds": 4, "reps": 10, "min_gain_pct": 40.0}
    _write_bundle(bundle, tmp_path / "softmax_row.cu", result)
    used: list[Any] = []

    def fake_verify(path, baseline, candidate, entry, runner, options, env=None, cancel=None, progress=None):  # type: ignore[no-untyped-def]
        used.append(options)
        return Verdict("not_faster", False, "below the minimum gain", entry)

    monkeypatch.setattr(opt, "verify", fake_verify)
    replay(bundle, LocalRunner())
    assert (used[0].seeds, used[0].rounds, used[0].reps, used[0].min_gain_pct) == (2, 4, 10, 40.0)


def test_replay_reuses_the_run_seed_of_the_recorded_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every input seed of a verification derives from its run seed: replay must check the same inputs."""
    import kernellsp.optimize.loop as opt

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "original.cu").write_text(SOFTMAX)
    result = make_result(tmp_path / "softmax_row.cu")
    assert result.final is not None
    result.final.details["run_seed"] = 6072438121517465371
    result.verify_options = {"seeds": 2, "rounds": 4, "reps": 10, "min_gain_pct": 2.0, "run_seed": None}
    _write_bundle(bundle, tmp_path / "softmax_row.cu", result)
    used: list[Any] = []

    def fake_verify(path, baseline, candidate, entry, runner, options, env=None, cancel=None, progress=None):  # type: ignore[no-untyped-def]
        used.append(options)
        return Verdict("accepted", True, "faster", entry)

    monkeypatch.setattr(opt, "verify", fake_verify)
    replay(bundle, LocalRunner())
    assert used[0].run_seed == 6072438121517465371 and used[0].seeds == 2
    # An explicit seed of the caller wins over the recorded one.
    replay(bundle, LocalRunner(), VerifyOptions(run_seed=5))
    assert used[1].run_seed == 5


def test_a_refused_last_champion_falls_back_to_the_one_before(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rounds select with fewer inputs (no structured patterns on the main shape); when the final check
    refuses the last round's winner, the previous champion gets a final check of its own and can win."""
    finals: list[str] = []
    round_opts: list[bool] = []

    def fake_verify(path, baseline, candidate, entry, runner, options, env=None, cancel=None, progress=None):  # type: ignore[no-untyped-def]
        stats = {"speedup": 1.2, "baseline_median_ms": 1.0, "candidate_median_ms": 0.83}
        if not options.main_shape_patterns:  # a round
            round_opts.append(options.sanitize_all_shapes)
            if candidate == SOFTMAX:  # the tuner's way back to the original block size
                return Verdict("not_faster", False, "the same", entry)
            return Verdict("accepted", True, "faster", entry, stats=stats)
        finals.append(candidate)
        if len(finals) == 1:
            return Verdict("mismatch", False, "wrong on the tail pattern", entry)
        return Verdict("accepted", True, "faster", entry, stats=stats)

    result = _loop(ws, monkeypatch, fake_verify, rounds=2)
    assert result.rounds_run == 2 and round_opts and not any(round_opts)
    assert len(finals) == 2 and finals[0] != finals[1] and finals[1] != SOFTMAX
    assert result.accepted and result.champion_text == finals[1] and len(result.winners) == 1
    assert {"final_verify", "final_verify_previous", "round1_verify", "round2_verify"} <= set(result.phases)


def test_rounds_share_the_gpu_and_sample_fewer_launches_the_final_keeps_every_gate() -> None:
    """A round only selects: one seed, no sanitizer, correctness runs beside the other candidates' and one
    checked launch per timing process. The final verification runs with the caller's options untouched."""
    from kernellsp.optimize.loop import _round_verify_options

    full = VerifyOptions()
    opts = OptimizeOptions(verify=full)
    r = _round_verify_options(opts)
    assert (r.seeds, r.sanitize, r.exclusive_checks, r.check_launches) == (1, False, False, 1)
    assert full.exclusive_checks and full.check_launches == 2 and full.sanitize and full.sanitize_all_shapes
    assert _round_verify_options(OptimizeOptions(verify=VerifyOptions(check_launches=0))).check_launches == 0
