"""kernellsp's language server: a thin pygls adapter over the core (the core never imports pygls).

Layout:

* :mod:`~kernellsp.lsp.server`: the server object, shared state, error and shutdown policy;
* :mod:`~kernellsp.lsp.jobs`: background jobs (one per URI and kind, cancel-on-newer, progress);
* :mod:`~kernellsp.lsp.procpool`: worker processes with shared cancel flags, for CPU-heavy steps;
* :mod:`~kernellsp.lsp.worker`: the steps that run there (check a buffer, parse a buffer);
* :mod:`~kernellsp.lsp.config`: editor settings (camelCase) → core settings;
* :mod:`~kernellsp.lsp.convert`: findings → diagnostics, position encodings, rule links;
* :mod:`~kernellsp.lsp.features`: one module per feature (settings, diagnostics, code actions,
  hover, commands, profile, optimize, workspace, status, lifecycle), each with ``register(server)``;
* :mod:`~kernellsp.lsp.main`: logging and transports for ``kernellsp serve``.

``create_server()`` builds a server with every feature; ``kernellsp serve`` starts it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the package stays light: worker processes import kernellsp.lsp.worker only
    from kernellsp.lsp.server import KernelLspServer


def create_server() -> KernelLspServer:
    """A new server with every feature registered."""
    from kernellsp.lsp.features import (
        code_actions,
        commands,
        diagnostics,
        hover,
        lifecycle,
        optimize,
        profile,
        settings,
        status,
        workspace,
    )
    from kernellsp.lsp.server import KernelLspServer

    server = KernelLspServer()
    for feature in (
        settings,
        diagnostics,
        code_actions,
        hover,
        commands,
        profile,
        optimize,
        workspace,
        status,
        lifecycle,
    ):
        feature.register(server)
    return server


__all__ = ["create_server"]
