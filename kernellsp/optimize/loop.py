"""The verified rewrite loop: propose, verify, keep the fastest correct candidate, prove it again.

Branch and select: each round asks the proposer (the LLM when one is configured, the built-in tuner
otherwise, or both) for K candidates built on the current champion; each is verified against the
champion (scope, compile, correctness, sanitizer, timing); the fastest accepted one becomes the new
champion. The loop stops at the round budget, after ``patience`` rounds without gain, when the
champion is near the DRAM roofline, or when the proposers have nothing new. The final champion is
then verified from scratch against the ORIGINAL file (fresh seeds, every shape, sanitizer, A/B
timing): only that verdict decides, so tolerance drift across rounds cannot creep in.

Memory (``.kernellsp/memory.json``) records every candidate's idea, verdict and predicted vs
measured gain, so rejected ideas are not proposed again. Every run leaves an evidence bundle in
``.kernellsp/runs/``; :func:`replay` re-runs its final verdict. Applying writes the file only when it
is unchanged since the run began, after a backup in ``.kernellsp/backups/``; :func:`revert` restores it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernellsp.findings import Finding
from kernellsp.optimize.propose.base import Candidate, ProposalContext, Proposer, ProposerError
from kernellsp.optimize.verify.gate import Verdict, VerifyError, VerifyOptions, unified_diff, verify
from kernellsp.rules import engine as rulesmod
from kernellsp.run.runner import Runner
from kernellsp.source import spec as specmod
from kernellsp.source.model import parse_source

Progress = Callable[[str, float | None], None]
Event = Callable[[dict[str, Any]], None]


class OptimizeError(RuntimeError):
    """The loop could not run (no spec, runner down, nothing to propose); the message names the fix."""


@dataclass
class OptimizeOptions:
    """Budgets and gates of one optimize run."""

    rounds: int = 4
    candidates: int = 4
    patience: int = 2
    min_gain_pct: float = 2.0
    near_roofline_pct: float = 90.0
    time_budget_s: float = 1800.0
    #: Candidates verified at once (builds overlap; GPU steps take turns).
    parallel: int = 4
    #: Gates of the final verification against the original: this verdict alone decides.
    verify: VerifyOptions = field(default_factory=VerifyOptions)
    #: Seeds per candidate during the rounds (selection only; the final check uses ``verify.seeds``).
    round_seeds: int = 1
    #: Run compute-sanitizer on every round's candidates too (the final check always does).
    round_sanitize: bool = False


@dataclass
class CandidateRecord:
    """One verified candidate, for the bundle, the memory and the progress display."""

    round: int
    index: int
    key: str
    description: str
    proposer: str
    rules: list[str]
    predicted_gain_pct: float | None
    verdict: str
    message: str
    speedup_vs_champion: float | None
    seconds: float
    baseline_ms: float | None = None
    candidate_ms: float | None = None


@dataclass
class OptimizeResult:
    """What the loop produced."""

    path: str
    entry: str
    original_text: str
    champion_text: str
    accepted: bool
    final: Verdict | None
    candidates: list[CandidateRecord]
    rounds_run: int
    stop_reason: str
    bundle: str | None
    wall_s: float
    environment: dict[str, Any]
    #: The candidate chosen as champion in each round that found a gain, in order.
    winners: list[str] = field(default_factory=list)
    #: The gate settings of the final verification (``replay`` re-runs it with these).
    verify_options: dict[str, Any] = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        return self.final.speedup if self.final is not None and self.final.accepted else None

    def diff(self) -> str:
        return unified_diff(self.original_text, self.champion_text, Path(self.path).name)

    def summary(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "entry": self.entry,
            "accepted": self.accepted,
            "speedup": self.speedup,
            "final_verdict": self.final.kind if self.final else None,
            "final_message": self.final.message if self.final else None,
            "final_stats": self.final.stats if self.final else None,
            "roofline": {
                k: v for k, v in (self.final.details if self.final else {}).items() if "roofline" in k
            },
            "rounds": self.rounds_run,
            "stop_reason": self.stop_reason,
            "bundle": self.bundle,
            "winners": self.winners,
            "wall_s": self.wall_s,
            "candidates": [asdict(c) for c in self.candidates],
            "environment": self.environment,
            "verify_options": self.verify_options,
        }


# --------------------------------------------------------------------------------------------------
# Workspace state: memory, bundles, backups


def state_dir(path: Path) -> Path:
    root = specmod.find_workspace_root(path) or path.resolve().parent
    return root / ".kernellsp"


class Memory:
    """``.kernellsp/memory.json``: per file, entry and idea, what was tried and how it went."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = self._load(path)
        #: Records added since the last save (only these are written: the file may have grown meanwhile).
        self._unsaved: list[dict[str, Any]] = []

    @staticmethod
    def _load(path: Path) -> list[dict[str, Any]]:
        if not path.is_file():
            return []
        # A damaged history (it is only a record of attempts) starts afresh rather than stopping the loop.
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = None
        records = data.get("records") if isinstance(data, dict) else None
        return (
            [
                r
                for r in records
                if isinstance(r, dict) and isinstance(r.get("file"), str) and isinstance(r.get("entry"), str)
            ]
            if isinstance(records, list)
            else []
        )

    def tried(self, file: str, entry: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("file") == file and r.get("entry") == entry]

    def add(self, rec: dict[str, Any]) -> None:
        self.records.append(rec)
        self._unsaved.append(rec)

    def save(self) -> None:
        """Append this run's new records to the file as it is now, under a lock: runs of several entries of one
        workspace (``optimize --all``) save side by side, and none may drop another's records."""
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            records = self._load(self.path) + self._unsaved
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps({"version": 1, "records": records}, indent=1) + "\n")
            tmp.replace(self.path)
        self._unsaved = []
        self.records = records


def _rel(path: Path) -> str:
    root = specmod.find_workspace_root(path)
    try:
        return str(path.resolve().relative_to(root)) if root else path.name
    except ValueError:
        return str(path.resolve())


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------------
# The loop


def default_proposers(settings: Any, ruleset: rulesmod.RuleSet | None, which: str = "auto") -> list[Proposer]:
    """``auto``: recipes first, then the LLM when an endpoint is configured, then the tuner; or exactly one
    (``recipes``, ``llm`` or ``tuner``)."""
    from kernellsp.optimize.propose.tuner import Tuner

    out: list[Proposer] = []
    if which in ("auto", "recipes"):
        from kernellsp.optimize.propose.recipes.proposer import RecipeProposer

        out.append(RecipeProposer())
    if which in ("auto", "llm") and settings is not None and settings.llm.configured:
        from kernellsp.optimize.propose.llm import LlmProposer

        out.append(LlmProposer(settings.llm, ruleset))
    elif which == "llm":
        raise OptimizeError(
            "--proposer llm needs llm.base_url and llm.model (kernellsp.toml [settings] or "
            "KERNELLSP_LLM_BASE_URL / KERNELLSP_LLM_MODEL)"
        )
    if which in ("auto", "tuner"):
        out.append(Tuner())
    return out


def optimize(
    path: Path,
    text: str,
    entry: str,
    runner: Runner,
    proposers: list[Proposer],
    options: OptimizeOptions | None = None,
    findings: list[Finding] | None = None,
    profile: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
    on_event: Event | None = None,
    bundle_root: Path | None = None,
) -> OptimizeResult:
    """Run the loop on ``entry`` of ``path`` (whose current text is ``text``)."""
    from kernellsp.profile.ncu import runner_environment

    # Always an event: an interrupt in the caller's thread must reach the candidates verifying in the pool.
    cancel = cancel if cancel is not None else threading.Event()
    opts = options or OptimizeOptions()
    opts.verify.min_gain_pct = opts.min_gain_pct
    # Rounds only select a champion: one seed and no sanitizer keep them quick. The final verification
    # of the champion against the original runs every gate in full.
    round_opts = VerifyOptions(
        **{
            **asdict(opts.verify),
            "seeds": min(opts.round_seeds, opts.verify.seeds),
            "sanitize": opts.round_sanitize and opts.verify.sanitize,
            "sanitize_all_shapes": False,
        }
    )
    say = progress or (lambda _m, _p: None)
    emit = on_event or (lambda _e: None)
    t0 = time.monotonic()
    model = parse_source(text, str(path))
    bound = specmod.entry_spec(model, entry)
    if bound is None:
        raise OptimizeError(
            f"{entry} has no launch spec: add one above it (the 'Add launch spec' code action drafts it)"
        )
    if not proposers:
        raise OptimizeError("no proposer is available")
    env = environment or runner_environment(runner)
    # The bundle records what confined the code under test; when nothing did, the user hears it now.
    box = runner.sandbox_status()
    if not box.confined:
        say(box.describe(), None)
    env = {**env, "sandbox": box.to_dict()}
    sdir = state_dir(path)
    memory = Memory(sdir / "memory.json")
    rel = _rel(path)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    bundle = _fresh_dir((bundle_root or sdir / "runs") / f"{stamp}-{path.stem}-{entry}")
    (bundle / f"original{path.suffix}").write_text(text)
    champion = text
    champion_speedup = 1.0
    records: list[CandidateRecord] = []
    winners: list[str] = []
    stop = "round budget"
    no_gain = 0
    rounds_run = 0
    for rnd in range(1, opts.rounds + 1):
        if cancel is not None and cancel.is_set():
            stop = "cancelled"
            break
        if time.monotonic() - t0 > opts.time_budget_s:
            stop = "time budget"
            break
        rounds_run = rnd
        cmodel = parse_source(champion, str(path))
        cbound = specmod.entry_spec(cmodel, entry)
        assert cbound is not None  # the scope gate refuses a candidate without the entry's spec
        tried = memory.tried(rel, entry) + [
            {
                "key": r.key,
                "transform": r.description,
                "verdict": r.verdict,
                "description": r.description,
                "speedup": r.speedup_vs_champion,
            }
            for r in records
        ]
        ctx = ProposalContext(
            str(path), champion, text, entry, cmodel, cbound, list(findings or []), profile, tried, rnd
        )
        cands: list[Candidate] = []
        for p in proposers:
            if len(cands) >= opts.candidates:
                break
            say(f"round {rnd}: asking the {p.name} for candidates", None)
            try:
                got = p.propose(ctx, opts.candidates - len(cands))
            except ProposerError as exc:
                emit({"event": "proposer_error", "proposer": p.name, "message": str(exc)})
                continue
            keys = {c.key for c in cands}
            cands.extend(c for c in got if c.key not in keys)
        if not cands:
            stop = "no new candidates"
            break
        best: tuple[float, Candidate, Verdict] | None = None

        def check(
            i: int, cand: Candidate, base: str = champion, rnd: int = rnd, n: int = len(cands)
        ) -> tuple[Verdict, float]:
            emit(
                {
                    "event": "candidate",
                    "round": rnd,
                    "index": i,
                    "of": n,
                    "description": cand.description,
                    "proposer": cand.proposer,
                }
            )
            c0 = time.monotonic()
            label = f"round {rnd}, candidate {i + 1}/{n} ({cand.description})"
            try:
                v = verify(
                    path,
                    base,
                    cand.text,
                    entry,
                    runner,
                    round_opts,
                    env,
                    cancel,
                    lambda msg, pct: say(f"{label}: {msg}", pct),
                )
            except VerifyError as exc:
                v = Verdict("error", False, str(exc), entry)
            return v, time.monotonic() - c0

        # Candidates build in parallel; their GPU steps serialise on the runner's GPU lock.
        with ThreadPoolExecutor(max_workers=max(1, min(len(cands), opts.parallel))) as pool:
            futures = [pool.submit(check, i, cand) for i, cand in enumerate(cands)]
            try:
                outcomes = [f.result() for f in futures]
            except BaseException:
                # Ctrl-C (or any error) here: stop the running verifications now, not after they finish
                # (leaving the with-block waits for every worker).
                cancel.set()
                raise
        for i, (cand, (v, secs)) in enumerate(zip(cands, outcomes, strict=True)):
            rec = CandidateRecord(
                rnd,
                i,
                cand.key,
                cand.description,
                cand.proposer,
                cand.rules,
                cand.predicted_gain_pct,
                v.kind,
                v.message,
                v.speedup,
                secs,
                v.stats["baseline_median_ms"] if v.stats else None,
                v.stats["candidate_median_ms"] if v.stats else None,
            )
            records.append(rec)
            cdir = bundle / "candidates" / f"r{rnd}-{i}-{cand.key}"
            cdir.mkdir(parents=True, exist_ok=True)
            (cdir / f"candidate{path.suffix}").write_text(cand.text)
            (cdir / "diff.patch").write_text(unified_diff(champion, cand.text, path.name))
            (cdir / "verdict.json").write_text(json.dumps(v.to_dict(), indent=1, default=str) + "\n")
            memory.add(
                {
                    "file": rel,
                    "entry": entry,
                    "key": cand.key,
                    "transform": cand.description,
                    "description": cand.description,
                    "proposer": cand.proposer,
                    "rules": cand.rules,
                    "verdict": v.kind,
                    "message": v.message[:500],
                    "predicted_gain_pct": cand.predicted_gain_pct,
                    "measured_speedup": v.speedup,
                    "baseline": _hash(champion),
                    "time": stamp,
                    "gpu": env.get("gpu"),
                }
            )
            memory.save()
            emit(
                {
                    "event": "verdict",
                    "round": rnd,
                    "index": i,
                    "verdict": v.kind,
                    "message": v.message,
                    "speedup": v.speedup,
                    "best": champion_speedup,
                }
            )
            if v.accepted and v.speedup and (best is None or v.speedup > best[0]):
                best = (v.speedup, cand, v)
        if best is None:
            no_gain += 1
            if no_gain >= opts.patience:
                stop = f"{opts.patience} rounds without gain"
                break
            continue
        no_gain = 0
        winners.append(best[1].description)
        champion = best[1].text
        champion_speedup *= best[0]
        emit(
            {
                "event": "champion",
                "round": rnd,
                "description": best[1].description,
                "speedup": champion_speedup,
            }
        )
        roofline_pct = best[2].details.get("candidate_pct_of_roofline")
        if roofline_pct is not None and roofline_pct >= opts.near_roofline_pct:
            stop = "near the roofline"  # little left to gain; the final verification still runs
            break
    final: Verdict | None = None
    if champion != text and not (cancel is not None and cancel.is_set()):
        say("final verification of the champion against the original", None)
        fopts = opts.verify
        try:
            final = verify(
                path,
                text,
                champion,
                entry,
                runner,
                fopts,
                env,
                cancel,
                lambda m, p: say(f"final check: {m}", p),
            )
        except VerifyError as exc:
            final = Verdict("error", False, str(exc), entry)
    elif cancel is not None and cancel.is_set():
        stop = "cancelled"
    result = OptimizeResult(
        path=str(path),
        entry=entry,
        original_text=text,
        champion_text=champion if final and final.accepted else text,
        accepted=bool(final and final.accepted),
        final=final,
        candidates=records,
        rounds_run=rounds_run,
        stop_reason=stop,
        bundle=str(bundle),
        wall_s=time.monotonic() - t0,
        environment=env,
        winners=winners if final is not None and final.accepted else [],
        verify_options=asdict(opts.verify),
    )
    _write_bundle(bundle, path, result)
    return result


def _fresh_dir(want: Path) -> Path:
    """``want``, or ``want-2``, ``want-3``... whichever does not exist yet, created: runs that start in the same
    second on files of one name (``optimize --all`` over ``a/k.cu`` and ``b/k.cu``) never share a bundle."""
    want.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        d = want if n == 1 else want.with_name(f"{want.name}-{n}")
        try:
            d.mkdir()
            return d
        except FileExistsError:
            n += 1


def _write_bundle(bundle: Path, path: Path, result: OptimizeResult) -> None:
    (bundle / f"champion{path.suffix}").write_text(result.champion_text)
    (bundle / "diff.patch").write_text(result.diff())
    if result.final is not None:
        (bundle / "final-verdict.json").write_text(
            json.dumps(result.final.to_dict(), indent=1, default=str) + "\n"
        )
    (bundle / "summary.json").write_text(json.dumps(result.summary(), indent=1, default=str) + "\n")
    (bundle / "environment.json").write_text(json.dumps(result.environment, indent=1, default=str) + "\n")
    lines = [f"# kernellsp optimize {Path(result.path).name} :: {result.entry}", ""]
    if result.accepted and result.final is not None:
        lines.append(f"Accepted: {result.final.message}")
    else:
        lines.append(
            f"No verified improvement ({result.final.kind + ': ' + result.final.message if result.final else result.stop_reason})."
        )
    lines += [
        "",
        f"Stop: {result.stop_reason}; rounds {result.rounds_run}; wall {result.wall_s:.1f} s",
        "",
        "| round | candidate | proposer | verdict | speedup vs champion | message |",
        "|---|---|---|---|---:|---|",
    ]
    for c in result.candidates:
        sp = f"{c.speedup_vs_champion:.3f}" if c.speedup_vs_champion else ""
        lines.append(
            f"| {c.round} | {c.description} | {c.proposer} | {c.verdict} | {sp} | {c.message[:160]} |"
        )
    (bundle / "summary.md").write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------------------
# Apply, revert, replay


class ApplyError(RuntimeError):
    """The result could not be written; the user's file is untouched."""


def _read_json(path: Path, error: type[RuntimeError]) -> Any:
    """JSON from a file kernellsp wrote; a damaged file becomes ``error`` naming it, never a traceback."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise error(f"{path} cannot be read ({exc}); it was edited or damaged") from None


def side_file(path: Path, text: str) -> Path:
    """Save a verified result next to ``path`` (``NAME.kernellsp.cu``, or ``NAME.kernellsp-2.cu`` ... when that
    exists: an earlier result is never overwritten) when it cannot be applied."""
    side = path.with_name(path.stem + ".kernellsp" + path.suffix)
    n = 2
    while side.exists():
        side = path.with_name(f"{path.stem}.kernellsp-{n}{path.suffix}")
        n += 1
    encoding = _encoding_of(path) if path.exists() else "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        encoding = "utf-8"
    _write_text(side, text, encoding)
    return side


def _read_user_text(path: Path) -> str:
    """The file's text exactly as the CLI and the editor read it (line endings kept, latin-1 fallback)."""
    from kernellsp.check import read_source

    text, err = read_source(path)
    if text is None:
        raise ApplyError(f"{path}: {err}")
    return text


def _encoding_of(path: Path) -> str:
    """How :func:`_read_user_text` decoded the file: UTF-8, or latin-1 for bytes that are not UTF-8."""
    try:
        path.read_bytes().decode("utf-8")
        return "utf-8"
    except (UnicodeDecodeError, OSError):
        return "latin-1"


def _write_bytes(path: Path, data: bytes, like: Path | None = None) -> None:
    """Write atomically (temp file + rename), keeping ``like``'s permission bits."""
    tmp = path.with_name(path.name + ".kernellsp-tmp")
    tmp.write_bytes(data)
    if like is not None and like.exists():
        shutil.copymode(like, tmp)
    tmp.replace(path)


def _write_text(path: Path, text: str, encoding: str = "utf-8", like: Path | None = None) -> None:
    """Write ``text`` byte for byte (no newline translation) in ``encoding``, atomically."""
    _write_bytes(path, text.encode(encoding), like)


def _backup_entries(index: Path) -> list[dict[str, Any]]:
    """The backup index, checked: a list of records naming the file, its backup and the written text's hash."""
    entries = _read_json(index, ApplyError) if index.is_file() else []
    keys = ("file", "backup", "written_hash")
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and all(isinstance(e.get(k), str) for k in keys) for e in entries
    ):
        raise ApplyError(
            f"{index} cannot be read (expected a list of backup records); it was edited or damaged"
        )
    return entries


def record_backup(
    path: Path, original: str, written: str, bundle: str | None, encoding: str = "utf-8"
) -> Path:
    """Keep ``original`` (in the file's ``encoding``) in ``.kernellsp/backups`` and note what replaced it
    (for :func:`revert`)."""
    backups = state_dir(path) / "backups"
    backups.mkdir(parents=True, exist_ok=True)
    index = backups / "index.json"
    entries = _backup_entries(index)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    backup = backups / f"{path.name}.{stamp}.bak"
    _write_text(backup, original, encoding)
    entries.append(
        {
            "file": str(path.resolve()),
            "backup": str(backup),
            "written_hash": _hash(written),
            "bundle": bundle,
            "time": stamp,
        }
    )
    _write_text(index, json.dumps(entries, indent=1) + "\n")
    return backup


def apply_result(path: Path, result: OptimizeResult) -> Path:
    """Write the champion to ``path`` if the file still holds the original text; return the backup path.

    A symlink is followed (the file it names is edited); the file's mode is kept; a read-only file (no write
    permission, or no write bit at all) is refused: replacing it would only need the directory's.
    """
    if not result.accepted:
        raise ApplyError("nothing to apply: no candidate passed every gate")
    path = path.resolve()
    current = _read_user_text(path)
    if current != result.original_text:
        side = side_file(path, result.champion_text)
        raise ApplyError(
            f"{path} changed since the run began; the verified result was saved beside it as {side}"
        )
    if (
        not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222
    ):  # no write bit: read-only even for root
        side = side_file(path, result.champion_text)
        raise ApplyError(f"{path} is read-only; the verified result was saved beside it as {side}")
    encoding = _encoding_of(path)
    try:
        result.champion_text.encode(encoding)
    except UnicodeEncodeError:
        side = side_file(path, result.champion_text)
        raise ApplyError(
            f"{path} is {encoding} text and the result has characters {encoding} cannot hold; it was "
            f"saved beside it (UTF-8) as {side}"
        ) from None
    backup = record_backup(path, current, result.champion_text, result.bundle, encoding)
    _write_text(path, result.champion_text, encoding, like=path)
    return backup


def revert(path: Path, force: bool = False) -> Path:
    """Restore the newest backup of ``path``; refuses if the file changed since kernellsp wrote it.

    With ``force`` the text being replaced is kept too (``NAME.TIME.before-revert.bak`` beside the backups).
    """
    path = path.resolve()
    index = state_dir(path) / "backups" / "index.json"
    entries = _backup_entries(index)
    mine = [e for e in entries if e["file"] == str(path)]
    if not mine:
        raise ApplyError(f"no kernellsp backup of {path} (nothing was applied to it)")
    last = mine[-1]
    if not Path(last["backup"]).is_file():
        raise ApplyError(f"the backup {last['backup']} of {path} is gone; nothing to restore")
    if path.exists():
        current = _read_user_text(path)
        if _hash(current) != last["written_hash"]:
            if not force:
                raise ApplyError(
                    f"{path} changed after kernellsp wrote it; use --force to restore {last['backup']} anyway"
                )
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            shutil.copy2(path, index.parent / f"{path.name}.{stamp}.before-revert.bak")
    elif not force:
        raise ApplyError(f"{path} no longer exists; use --force to restore {last['backup']} there")
    _write_bytes(path, Path(last["backup"]).read_bytes(), like=path if path.exists() else None)
    entries.remove(last)
    _write_text(index, json.dumps(entries, indent=1) + "\n")
    return Path(last["backup"])


def replay(
    bundle: Path, runner: Runner, options: VerifyOptions | None = None, progress: Progress | None = None
) -> tuple[Verdict, dict[str, Any]]:
    """Re-run the final verdict of a bundle (original vs champion); returns the new verdict and the recorded one."""
    summary_p = bundle / "summary.json"
    if not summary_p.is_file():
        raise OptimizeError(f"{bundle} is not a kernellsp evidence bundle (no summary.json)")
    summary = _read_json(summary_p, OptimizeError)
    orig = next(bundle.glob("original.*"), None)
    champ = next(bundle.glob("champion.*"), None)
    if orig is None or champ is None:
        raise OptimizeError(f"{bundle} lacks original.* or champion.*")
    verdict_p = bundle / "final-verdict.json"
    recorded = _read_json(verdict_p, OptimizeError) if verdict_p.is_file() else {}
    if not isinstance(summary, dict) or "entry" not in summary or "path" not in summary:
        raise OptimizeError(f"{summary_p} lacks the entry or the path of the run")
    src_name = Path(summary["path"]).name
    if options is None and isinstance(summary.get("verify_options"), dict):
        # The gates as the run used them (seeds, rounds, minimum gain), so the verdicts are comparable.
        known = VerifyOptions.__dataclass_fields__
        options = VerifyOptions(**{k: v for k, v in summary["verify_options"].items() if k in known})
    options = options if options is not None else VerifyOptions()
    details = recorded.get("details") if isinstance(recorded, dict) else None
    if options.run_seed is None and isinstance(details, dict) and isinstance(details.get("run_seed"), int):
        # The same inputs as the recorded verdict: every input seed derives from the run seed.
        options = replace(options, run_seed=details["run_seed"])
    # Verify in a scratch copy named like the original file, next to nothing else.
    v = verify(
        Path(src_name),
        orig.read_text(),
        champ.read_text(),
        summary["entry"],
        runner,
        options,
        progress=progress,
    )
    return v, recorded
