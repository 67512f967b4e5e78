"""Settings: ``initializationOptions``, ``workspace/configuration`` and live changes.

The editor's ``kernellsp`` section (camelCase, see :mod:`kernellsp.lsp.config`) is read from
``initializationOptions`` during ``initialize``, pulled with ``workspace/configuration`` in
``initialized`` and again on ``workspace/didChangeConfiguration`` (or taken from that
notification's ``settings`` when the client cannot be asked). A change applies at once: open
documents are checked again. Invalid settings produce one ``window/showMessage`` naming the field,
and the previous settings stay in force.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from lsprotocol import types
from pygls.capabilities import get_capability

from kernellsp.lsp.config import ConfigError, merge, resolve
from kernellsp.lsp.features.diagnostics import recheck_open_documents
from kernellsp.lsp.server import KernelLspServer

log = logging.getLogger(__name__)

SECTION = "kernellsp"
CLIENT_REQUEST_TIMEOUT_S = 5.0


def _section_of(value: Any) -> dict[str, Any]:
    """Accept both the bare section and ``{"kernellsp": {...}}``."""
    if not isinstance(value, dict):
        return {}
    inner = value.get(SECTION)
    return inner if isinstance(inner, dict) else value


def apply_settings(ls: KernelLspServer) -> bool | None:
    """Rebuild the settings from the stored sections; returns whether they changed.

    On invalid settings, tells the user once (naming the field), keeps the previous settings and
    returns ``None``. The same problem is not shown again (start-up resolves the settings several times:
    initialize, its fallback, the first configuration pull) until the settings were valid in between.
    """
    merged = merge(ls.init_section, ls.config_section)
    try:
        settings, options = resolve(ls.workspace_root(), merged)
    except ConfigError as exc:
        log.warning("invalid settings: %s", exc)
        if ls.settings_error_shown != str(exc):
            ls.settings_error_shown = str(exc)
            ls.notify(
                f"kernellsp: invalid setting {exc}; keeping the previous settings", types.MessageType.Error
            )
        return None
    ls.settings_error_shown = None
    changed = settings != ls.settings or options != ls.options
    ls.settings, ls.options = settings, options
    if changed:
        log.info("settings: %s; server options: %s", settings.model_dump(), options)
    return changed


async def pull_configuration(ls: KernelLspServer) -> bool:
    """Ask the client for the ``kernellsp`` section; returns False when it could not be asked."""
    if not get_capability(ls.client_capabilities, "workspace.configuration", False):
        return False
    root = ls.workspace_root()
    item = types.ConfigurationItem(section=SECTION, scope_uri=root.as_uri() if root else None)
    try:
        result = await asyncio.wait_for(
            ls.workspace_configuration_async(types.ConfigurationParams(items=[item])),
            CLIENT_REQUEST_TIMEOUT_S,
        )
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("workspace/configuration failed: %s", exc)
        return False
    value = result[0] if result else None
    ls.config_section = value if isinstance(value, dict) else {}
    return True


def initialize(ls: KernelLspServer, params: types.InitializeParams) -> None:
    """Read ``initializationOptions`` and compute the first settings before capabilities go out."""
    ls.init_section = _section_of(params.initialization_options)
    if apply_settings(ls) is None:
        # Bad init options: fall back to the workspace files alone (or the defaults).
        ls.init_section = {}
        apply_settings(ls)


async def initialized(ls: KernelLspServer, params: types.InitializedParams) -> None:
    """Start a worker process, pull the configuration, release waiting checks, register for changes."""
    ls.jobs.processes.warm()
    try:
        if await pull_configuration(ls):
            apply_settings(ls)
    finally:
        ls.settings_ready.set()
    from kernellsp.lsp.features.profile import warm_up

    warm_up(ls)
    if get_capability(
        ls.client_capabilities, "workspace.did_change_configuration.dynamic_registration", False
    ):
        reg = types.Registration(
            id=str(uuid.uuid4()),
            method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
            register_options=types.DidChangeConfigurationRegistrationOptions(section=SECTION),
        )
        try:
            await asyncio.wait_for(
                ls.client_register_capability_async(types.RegistrationParams(registrations=[reg])),
                CLIENT_REQUEST_TIMEOUT_S,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("could not register for configuration changes: %s", exc)


async def did_change_configuration(ls: KernelLspServer, params: types.DidChangeConfigurationParams) -> None:
    """Apply changed settings without a restart and re-check the open documents."""
    if not await pull_configuration(ls):
        pushed = _section_of(params.settings)
        if not pushed and params.settings is None:
            return
        ls.config_section = pushed
    if apply_settings(ls):
        n = recheck_open_documents(ls)
        log.info("settings changed; re-checking %d document(s)", n)


def register(ls: KernelLspServer) -> None:
    """Register the lifecycle hooks that carry settings."""
    ls.feature(types.INITIALIZE)(initialize)
    ls.feature(types.INITIALIZED)(initialized)
    ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
