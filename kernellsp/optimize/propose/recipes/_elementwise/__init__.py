"""Element loops: the analysis and the code generator shared by the map and coalescing recipes.

An *element loop* is a kernel whose work splits into independent elements ``e`` in ``[0, n)``: for
each element a straight-line body reads stream inputs at ``s*e + o`` (``s`` a small constant
stride, ``0 <= o < s``), computes, and writes stream outputs at ``s*e + o``; other reads are of
buffers the kernel never writes (broadcast scalars, lookup tables). :func:`analyse` recognises the
usual ways of assigning elements to threads:

* ``guard``: one element per thread, ``e = gid`` under ``if (e < n) {...}`` or ``if (e >= n) return;``;
* ``grid-stride``: ``for (e = gid; e < n; e += blockDim.x * gridDim.x)``;
* ``2d``: ``e = row * W + col`` with ``col < W && row < H`` (linearised to ``[0, W*H)``);
* ``chunk``: thread ``t`` takes ``[t*C, (t+1)*C)`` (``for (k = 0; k < C; k++) { i = t*C + k; ... }``, the
  pointer form ``p = x + t*C; p[k]``, ``for (i = begin; i < min(begin + C, n); i++)``, ``if (i >= n) break;``).

:func:`generate` writes one kernel body for all of them: the element body becomes a lambda (the
user's statements, unchanged but for the stream accesses, which become register operands); a
grid-stride loop over 16-byte vectors loads every input stream with 128-bit loads (4 floats, 8
halves or bf16s, 16 bytes), applies the lambda per element, and stores the outputs with 128-bit
stores; a scalar tail handles ``n % E`` elements and a scalar grid-stride loop handles pointers that
are not 16-byte aligned (checked at run time). The loop is correct under any launch, so a
host-launched kernel keeps the launch its host code gives (threads past the work exit at once);
a ``__global__`` entry gets ``grid = ceil_div(n, block * E * unroll)``: one batch of vectors per
thread, which needs no SM count (the spec language has none) and has the fewest loop trips.
"""

from __future__ import annotations

from kernellsp.optimize.propose.recipes._elementwise.codegen import Reduction, elements_per_vector, generate
from kernellsp.optimize.propose.recipes._elementwise.forms import analyse
from kernellsp.optimize.propose.recipes._elementwise.launch import (
    check_coverage,
    ctype_bytes,
    launch_block,
    launch_decline,
    new_launch,
    spec_expr,
)
from kernellsp.optimize.propose.recipes._elementwise.model import ElementLoop, Form, Stream

__all__ = [
    "ElementLoop",
    "Form",
    "Reduction",
    "Stream",
    "analyse",
    "check_coverage",
    "ctype_bytes",
    "elements_per_vector",
    "generate",
    "launch_block",
    "launch_decline",
    "new_launch",
    "spec_expr",
]
