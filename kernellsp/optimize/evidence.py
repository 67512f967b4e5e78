"""The workspace's record of optimize runs: ``.kernellsp/memory.json`` (what was tried on each entry and how
it went, so rejected ideas are not proposed again) and the evidence bundle each run leaves in
``.kernellsp/runs/`` (original, champion, diff, verdicts, summary)."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernellsp.source import spec as specmod

if TYPE_CHECKING:
    from kernellsp.optimize.result import OptimizeResult


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


def _read_json(path: Path, error: type[RuntimeError]) -> Any:
    """JSON from a file kernellsp wrote; a damaged file becomes ``error`` naming it, never a traceback."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise error(f"{path} cannot be read ({exc}); it was edited or damaged") from None


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
