"""Launch specs: how kernellsp runs an entry (a ``__global__`` kernel or a host launcher).

A spec lives in a comment block right above its entry::

    /* kernellsp
    sizes = { N = 16777216 }
    launch = { grid = "ceil_div(N, 256)", block = 256 }
    shapes = [{ N = 1000 }]
    [args]
    x = { dtype = "f32", dir = "in", count = "N" }
    y = { dtype = "f32", dir = "out", count = "N" }
    n = { value = "N" }
    */

or in the workspace, as ``[kernels.NAME]`` tables of ``kernellsp.toml`` or
``[tool.kernellsp.kernels.NAME]`` of ``pyproject.toml``. The body is TOML; the model is pydantic;
:func:`spec_to_toml` writes it back so a code action can insert a draft. :func:`validate_against`
checks a spec against the parsed signature (count, names, pointer vs scalar, dtypes) and evaluates
every expression for every declared shape. Problems come back as :class:`SpecIssue` objects that
carry the source line of the offending field, never as exceptions.
"""

from __future__ import annotations

from kernellsp.source.spec.check import dtype_for_ctype, launch_dims, validate_against
from kernellsp.source.spec.edit import (
    draft_block,
    draft_spec,
    draft_with_notes,
    format_comment_block,
    insert_draft_blocks,
    patch_spec_block,
    spec_to_toml,
)
from kernellsp.source.spec.models import (
    CTYPE_DTYPES,
    DTYPE_BYTES,
    DTYPE_CTYPE,
    DTYPES,
    FLOAT_DTYPES,
    VECTOR_WIDTH,
    ArgSpec,
    BoundSpec,
    Dim,
    DType,
    KernelSpec,
    LaunchSpec,
    SpecIssue,
    Tolerance,
)
from kernellsp.source.spec.parse import entry_spec, parse_spec_text, spec_from_dict, specs_from_source
from kernellsp.source.spec.workspace import (
    find_workspace_root,
    load_workspace_specs,
    partial_workspace_issues,
    spec_tables,
    unknown_workspace_entries,
    workspace_tables,
)

__all__ = [
    "CTYPE_DTYPES",
    "DTYPES",
    "DTYPE_BYTES",
    "DTYPE_CTYPE",
    "FLOAT_DTYPES",
    "VECTOR_WIDTH",
    "ArgSpec",
    "BoundSpec",
    "DType",
    "Dim",
    "KernelSpec",
    "LaunchSpec",
    "SpecIssue",
    "Tolerance",
    "draft_block",
    "draft_spec",
    "draft_with_notes",
    "dtype_for_ctype",
    "entry_spec",
    "find_workspace_root",
    "format_comment_block",
    "insert_draft_blocks",
    "launch_dims",
    "load_workspace_specs",
    "parse_spec_text",
    "partial_workspace_issues",
    "patch_spec_block",
    "spec_from_dict",
    "spec_tables",
    "spec_to_toml",
    "specs_from_source",
    "unknown_workspace_entries",
    "validate_against",
    "workspace_tables",
]
