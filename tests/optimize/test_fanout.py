"""optimize --all's fan-out (kernellsp.optimize.fanout): one entry's failure stays that entry's."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kernellsp.optimize import fanout
from kernellsp.optimize.result import OptimizeError, OptimizeOptions
from kernellsp.run.runner import LocalRunner, RunnerError


def test_a_failing_entry_neither_cancels_the_others_nor_hides_its_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The loop sets its run's cancel event when a candidate fails (to stop that entry's other candidates) and
    re-raises: that used to be the fan-out's own event, so every other entry ended "cancelled"."""
    seen: dict[str, bool] = {}

    def fake_optimize(
        path: Path, text: str, entry: str, runner: Any, *a: Any, cancel: threading.Event, **k: Any
    ) -> Any:
        if entry == "bad":
            cancel.set()  # what the loop does when a candidate's verification raises
            raise RunnerError("runner", "the GPU host went away")
        time.sleep(0.6)  # the bad entry has failed meanwhile
        seen[entry] = cancel.is_set()
        raise OptimizeError(f"{entry} ran to its end")

    monkeypatch.setattr(fanout, "optimize", fake_optimize)
    jobs = [fanout.EntryJob(tmp_path / "k.cu", name, "") for name in ("bad", "good1", "good2")]
    outcomes = fanout.optimize_all(
        jobs, LocalRunner(), lambda _j: [], lambda _j: OptimizeOptions(), parallel=3
    )
    assert [o.message for o in outcomes] == [
        "the GPU host went away",
        "good1 ran to its end",
        "good2 ran to its end",
    ]
    assert seen == {"good1": False, "good2": False}
    # The caller's cancel still stops every entry.
    stop = threading.Event()
    stop.set()
    cancelled = fanout.optimize_all(
        jobs, LocalRunner(), lambda _j: [], lambda _j: OptimizeOptions(), cancel=stop
    )
    assert [o.verdict for o in cancelled] == ["cancelled"] * 3
