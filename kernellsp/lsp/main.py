"""Start the language server: logging set-up and the stdio or TCP transport (``kernellsp serve``).

In stdio mode stdout belongs to the protocol: the server writes LSP messages to the real stdout
and ``sys.stdout`` is pointed at stderr, so a stray ``print`` in any library cannot corrupt the
stream. Logs go to stderr or to ``--log-file``. The process ends cleanly when the client sends
``exit``, closes stdin or sends SIGTERM; jobs are cancelled and their child processes killed on the
way out.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(log_file: Path | None, level: str = "info") -> None:
    """Log to ``log_file`` (appending) or stderr; pygls' per-message chatter only at debug."""
    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8")
        if log_file is not None
        else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    lvl = getattr(logging, level.upper(), logging.INFO)
    root.setLevel(lvl)
    logging.getLogger("pygls").setLevel(logging.DEBUG if lvl <= logging.DEBUG else logging.WARNING)


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (an editor stopping its client by force): leave like on ``exit``, cleaning up."""
    raise SystemExit(0)


def run(
    tcp: bool = False,
    host: str = "127.0.0.1",
    port: int = 2087,
    log_file: Path | None = None,
    log_level: str = "info",
) -> int:
    """Run the server until the client goes away; returns the process exit code."""
    setup_logging(log_file, log_level)
    from kernellsp.lsp import create_server

    server = create_server()
    # Before any worker process exists: a SIGTERM that arrives while they start must still clean them up.
    signal.signal(signal.SIGTERM, _terminate)
    # The worker processes (a forkserver that imports the core) start now, while the client is still
    # sending initialize: the first didOpen, right after it, then finds a worker ready.
    server.jobs.processes.warm()
    log = logging.getLogger("kernellsp.lsp")
    if tcp:
        log.info("kernellsp language server listening on %s:%d", host, port)
        server.start_tcp(host, port)
        return 0
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but LSP may reach the real stdout
    log.info("kernellsp language server on stdio")
    server.start_io(sys.stdin.buffer, protocol_out)
    log.info("kernellsp language server stopped")
    _leave_if_stuck(0)
    return 0


def _leave_if_stuck(code: int, grace_s: float = 2.0) -> None:
    """Exit now if a thread is still blocked after the server stopped (pygls' stdin reader waits in
    ``readline`` while the client keeps stdin open, e.g. after SIGTERM); normal exit would join it."""
    deadline = time.monotonic() + grace_s
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    for t in others:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in others if t.is_alive()]
    if stuck:
        logging.getLogger("kernellsp.lsp").info("leaving without waiting for %s", ", ".join(stuck))
        logging.shutdown()
        os._exit(code)
