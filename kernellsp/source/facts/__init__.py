"""Source-level analysis of kernel bodies: the facts static rules reason about.

For each kernel this walks the tree-sitter body once and computes:

* **thread dependence** (taint): which local variables depend on ``threadIdx`` (and, separately,
  on any index: ``threadIdx`` or ``blockIdx``), through declarations, assignments and loads;
* **barriers under divergent control**: ``__syncthreads()`` inside a branch or loop whose
  condition depends on the thread, or after a thread-dependent early ``return``;
* **unguarded accesses**: subscripts of pointer parameters indexed by a thread-dependent value
  with no enclosing condition (``if``, loop condition, ``?:``, early return) over that value;
* **atomics on one address**: ``atomic*`` calls whose address does not depend on ``threadIdx``;
* **strided access**: the index's step per ``threadIdx.x`` (a numeric probe of the index
  expression with the kernel's local definitions substituted);
* **local arrays indexed at run time**, **double-precision literals and declarations**, and
  **read-only pointers** lacking ``const``/``__restrict__``.

Everything is best effort over partial code: unknown constructs make a detector stay silent, never
raise.
"""

from __future__ import annotations

from kernellsp.source.facts.body import INDEX_BUILTINS, THREAD_BUILTINS
from kernellsp.source.facts.kernel import (
    ATOMICS,
    BARRIERS,
    KernelFacts,
    LineFacts,
    analyse,
    analyse_kernel,
    as_line_metrics,
)

__all__ = [
    "ATOMICS",
    "BARRIERS",
    "INDEX_BUILTINS",
    "THREAD_BUILTINS",
    "KernelFacts",
    "LineFacts",
    "analyse",
    "analyse_kernel",
    "as_line_metrics",
]
