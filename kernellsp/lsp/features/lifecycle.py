"""Lifecycle: a ``shutdown`` request cancels every job and kills their child processes.

pygls runs this handler before its own (which cancels in-flight requests). Jobs get their cancel
events set (worker threads kill nvcc within a tenth of a second) and their tasks cancelled; the
handler waits a few seconds for them so progress bars end and no child process outlives the
server. An ``exit`` that arrives before that answer (a client that does not wait for it) is held until the
cancellation is done (:meth:`KernelLspProtocol.handle_message`), and ends with code 0: the shutdown was
received. ``exit`` and a closed stdin end the transport, which calls
:meth:`KernelLspServer.shutdown` (the same cancellation, synchronously).
"""

from __future__ import annotations

import logging

from lsprotocol import types

from kernellsp.lsp.server import KernelLspServer

log = logging.getLogger(__name__)

SHUTDOWN_WAIT_S = 3.0


async def shutdown(ls: KernelLspServer, params: None) -> None:
    """Cancel all jobs and wait (briefly) for them before the server answers ``shutdown``."""
    n = len(ls.jobs.jobs())
    try:
        await ls.jobs.shutdown(SHUTDOWN_WAIT_S)
    finally:
        ls.shutdown_done.set()
    log.info("shutdown: cancelled %d job(s)", n)


def register(ls: KernelLspServer) -> None:
    """Register the shutdown hook."""
    ls.feature(types.SHUTDOWN)(shutdown)
