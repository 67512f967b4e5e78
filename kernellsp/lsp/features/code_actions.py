"""Code actions: "Add launch spec for KERNEL" (quickfix).

Offered for each ``KL004`` diagnostic in the request's context and whenever the range touches a
kernel that has no launch spec. The action carries the edit itself: a draft spec
(:func:`kernellsp.source.spec.draft_spec`) written as a ``/* kernellsp ... */`` comment block
(:func:`kernellsp.source.spec.format_comment_block`) inserted above the kernel's definition, above its
``template`` line when it has one, with the definition's indentation and the document's line
endings. Everything comes from the cached check (or a quick parse of a small buffer, see
:meth:`KernelLspServer.model_for`), so the handler answers in milliseconds; clients ask on every
cursor move. ``context.only`` is honoured.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types
from pygls.capabilities import get_capability

from kernellsp.lsp.convert import SOURCE
from kernellsp.lsp.server import KernelLspServer
from kernellsp.source import spec
from kernellsp.source.draft import draft_problem
from kernellsp.source.model import Function, SourceModel

log = logging.getLogger(__name__)

MISSING_SPEC_CODE = "KL004"
KINDS = [types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite, types.CodeActionKind.Source]


def kind_requested(only: list[str] | None, kind: str) -> bool:
    """Does ``kind`` fall under one of the ``context.only`` kinds (hierarchical, "" = all)?"""
    if not only:
        return True
    return any(o == "" or kind == o or kind.startswith(o + ".") for o in only)


def has_spec(model: SourceModel, name: str) -> bool:
    """Is a comment spec bound to kernel ``name`` in this model?"""
    bound, _ = spec.specs_from_source(model)
    return any(b.entry == name for b in bound)


def launch_spec_text_edit(fn: Function, model: SourceModel, eol: str = "\n") -> types.TextEdit:
    """The insertion of a draft spec above ``fn`` (above ``template`` when templated)."""
    start, block = spec.draft_block(fn, model)
    if eol != "\n":
        block = block.replace("\n", eol)
    pos = types.Position(line=start, character=0)
    return types.TextEdit(range=types.Range(start=pos, end=pos), new_text=block)


def workspace_edit(
    ls: KernelLspServer, uri: str, version: int | None, edit: types.TextEdit
) -> types.WorkspaceEdit:
    """A WorkspaceEdit in the form the client supports: versioned ``documentChanges`` or ``changes``."""
    if get_capability(ls.client_capabilities, "workspace.workspace_edit.document_changes", False):
        ident = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
        return types.WorkspaceEdit(
            document_changes=[types.TextDocumentEdit(text_document=ident, edits=[edit])]
        )
    return types.WorkspaceEdit(changes={uri: [edit]})


def eol_of(model: SourceModel) -> str:
    """The document's line ending (CRLF if its first line ends with one)."""
    first = model.text.find("\n")
    return "\r\n" if first > 0 and model.text[first - 1] == "\r" else "\n"


def _kernel_name(d: types.Diagnostic) -> str | None:
    data: Any = d.data
    if isinstance(data, dict) and isinstance(data.get("kernel"), str):
        return str(data["kernel"])
    return None


def code_actions(ls: KernelLspServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    """Offer "Add launch spec for KERNEL" for KL004 diagnostics and spec-less kernels under the cursor,
    and "Optimize ENTRY with verified rewrite" for spec'd entries (:mod:`.optimize`)."""
    from kernellsp.lsp.features.optimize import optimize_actions

    rewrite = optimize_actions(ls, params)
    if not kind_requested(list(params.context.only or []), types.CodeActionKind.QuickFix):
        return rewrite or None
    uri = params.text_document.uri
    found = ls.model_for(uri)
    if found is None:
        return None
    version, model = found
    doc = ls.workspace.get_text_document(uri)
    stale = version != doc.version
    if stale and not get_capability(
        ls.client_capabilities, "workspace.workspace_edit.document_changes", False
    ):
        return rewrite or None  # a stale model without a versioned edit could insert at the wrong line
    start_line, end_line = params.range.start.line, params.range.end.line

    specced = {b.entry for b in spec.specs_from_source(model)[0]}
    wanted: dict[str, list[types.Diagnostic]] = {}
    for d in params.context.diagnostics or []:
        if str(d.code) != MISSING_SPEC_CODE or (d.source not in (None, SOURCE)):
            continue
        name = _kernel_name(d)
        if name is None:  # clients that drop ``data``: the kernel whose name the range covers
            fn_at = next((f for f in model.kernels if f.name_span.start_line == d.range.start.line), None)
            name = fn_at.name if fn_at else None
        if name is not None:
            wanted.setdefault(name, []).append(d)
    for fn in model.kernels:
        outer = fn.outer_span or fn.span
        if outer.start_line <= end_line and start_line <= fn.span.end_line:
            wanted.setdefault(fn.name, [])

    eol = eol_of(model)
    preferred = bool(
        get_capability(ls.client_capabilities, "text_document.code_action.is_preferred_support", False)
    )
    actions: list[types.CodeAction] = []
    disabled_ok = bool(
        get_capability(ls.client_capabilities, "text_document.code_action.disabled_support", False)
    )
    for name, diags in wanted.items():
        target = model.function(name)
        if target is None or not target.is_kernel or not target.has_body or name in specced:
            continue
        problem = draft_problem(target, model.text)
        if problem is not None:
            # A draft would fail on save (a struct argument): say why instead, greyed out, where the client can.
            if disabled_ok:
                actions.append(
                    types.CodeAction(
                        title=f"Add launch spec for {name}",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=diags or None,
                        disabled=types.CodeActionDisabled(reason=problem),
                    )
                )
            continue
        edit = launch_spec_text_edit(target, model, eol)
        actions.append(
            types.CodeAction(
                title=f"Add launch spec for {name}",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=diags or None,
                is_preferred=True if preferred and diags else None,
                edit=workspace_edit(ls, uri, version, edit),
            )
        )
    return actions + rewrite


def register(ls: KernelLspServer) -> None:
    """Register the code action provider."""
    ls.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=KINDS))(
        code_actions
    )
