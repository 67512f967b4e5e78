"""The GPU lock: one job at a time per GPU, whoever starts it (a local job, one that came over ssh, a pool
worker's): where the lock file is, who holds it, and what a waiter is told.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

#: How a command holds the GPU: ``False`` not at all (builds); ``True`` alone (timing, ncu: nothing else may
#: run on the GPU meanwhile); ``"shared"`` beside other shared steps but never beside one that holds it alone
#: (runs whose verdict does not depend on the GPU being quiet: a trusted baseline's outputs, compute-sanitizer
#: tools, a round's correctness checks). ``flock`` shared and exclusive modes on the same lock file.
GpuLock = bool | Literal["shared"]

_LOCK_NAME = "kernellsp-gpu.lock"
_LOCK_BUSY = 75  # flock -E: the GPU lock was not free in time


# --------------------------------------------------------------------------------------------------
# The GPU lock: one job at a time per GPU, whoever starts it (steps that may share the GPU take it in
# shared mode, :data:`GpuLock`; they still never run beside a step that holds it alone)
#
# Every kernellsp on the GPU host takes the same lock file, ``/tmp/kernellsp-gpu.lock``
# (``$KERNELLSP_GPU_LOCK_DIR`` moves it): a local job, a job that came over ssh, another user's, an
# editor's and a CI run's all queue on it (the ssh runner's lock used to be in its own per-user
# scratch folder, so a local and an ssh job on one GPU ran together). The holder writes who it is
# beside the lock (``kernellsp-gpu.lock.holder.<uid>``: what job, which user and host, since when), so
# a waiter shows "waiting for the GPU: held by optimize of softmax.cu (ana@gpu1) since 14:02" instead
# of failing. A waiter waits as long as it takes, cancellably; ``gpu_wait_timeout_s`` (a setting,
# 0 = no limit) is the only time limit on the wait.

#: Whether the holder record of a waiter's view is re-read (seconds); the wait itself polls every 0.1 s.
_HOLDER_POLL_S = 1.0


def gpu_lock_dir() -> str:
    """Where GPU lock files are: ``$KERNELLSP_GPU_LOCK_DIR`` or ``/tmp`` (the same for every user and runner,
    never ``$TMPDIR``, which differs between a user's shell, an editor and an ssh session)."""
    return os.environ.get("KERNELLSP_GPU_LOCK_DIR") or "/tmp"


@dataclass
class GpuHolder:
    """Who holds a GPU lock: the job's label, user, host, process and since when (epoch seconds)."""

    label: str
    user: str
    host: str
    pid: int
    since: float

    def describe(self) -> str:
        when = time.strftime("%H:%M", time.localtime(self.since))
        return f"held by {self.label} ({self.user}@{self.host}, pid {self.pid}) since {when}"

    def is_process(self, pid: int) -> bool:
        """Whether this record is process ``pid`` of this host (a job's own step holding the lock)."""
        import socket

        return self.pid == pid and self.host == socket.gethostname()


def _holder_json(label: str) -> str:
    import getpass
    import socket

    return json.dumps(
        {
            "label": label,
            "user": getpass.getuser(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": time.time(),
        }
    )


def parse_holders(texts: list[str]) -> GpuHolder | None:
    """The newest holder among holder records (JSON lines); ``None`` when there is none."""
    best: GpuHolder | None = None
    for text in texts:
        for line in text.splitlines():
            try:
                d = json.loads(line)
                h = GpuHolder(
                    str(d["label"]), str(d["user"]), str(d["host"]), int(d["pid"]), float(d["since"])
                )
            except (ValueError, KeyError, TypeError):
                continue
            if best is None or h.since > best.since:
                best = h
    return best


def _local_holder(lock_path: Path) -> GpuHolder | None:
    texts = []
    for f in lock_path.parent.glob(lock_path.name + ".holder.*"):
        with contextlib.suppress(OSError):
            text = f.read_text(encoding="utf-8")
            h = parse_holders([text])
            # A record whose process is gone is stale (a job killed with SIGKILL cannot remove it).
            if h is not None and os.path.exists(f"/proc/{h.pid}"):
                texts.append(text)
    return parse_holders(texts)


def _waiting_message(holder: GpuHolder | None, where: str, waited_s: float) -> str:
    who = holder.describe() if holder is not None else "held by another job (it did not say which)"
    return f"waiting for the GPU{where}: {who}; waited {waited_s:.0f} s so far"
