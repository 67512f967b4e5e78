"""The harness: a C++/CUDA host program that kernellsp generates to run one entry.

Design principle 2 ("the harness is ours"): the code under test never owns ``main``, never times
itself and never reports a verdict. For one entry (a ``__global__`` kernel or a host launcher) and
its launch spec, :func:`plan_harness` evaluates everything in Python (sizes, element counts,
scalar values, input distributions, grid/block/smem, for every declared shape);
:func:`generate_harness` writes a self-contained ``.cu`` file that ``#include``s the user's file by
absolute path and bakes the plan in as constant tables; :func:`harness_compile_command` builds it
with nvcc; the program runs as ``./harness --mode check|time|profile|inputs --shape K --seed S
--out DIR`` and writes only under DIR; :func:`read_result` reads ``DIR/result.json`` and the raw
buffers without numpy.

The C++ runtime (``kernellsp/data/harness_runtime.h``) is inlined ahead of the user's file so the
user's macros cannot reach it. This module mirrors its PRNG (:func:`fill_reference`), its input
hash (:func:`fnv1a64`) and its output digest (:func:`digest_bytes`) so that every file the harness
writes can be checked from Python. The file format and the CLI are documented in docs/harness.md.
"""

from __future__ import annotations

from kernellsp.run.harness.codegen import (
    PREFILLS,
    generate_harness,
    harness_argv,
    harness_compile_command,
    input_set,
    runtime_source,
    set_inputs,
)
from kernellsp.run.harness.common import (
    EXIT_BAD_ARGS,
    EXIT_CUDA_ERROR,
    EXIT_IO_ERROR,
    EXIT_OK,
    PATTERNS,
    RESULT_FORMAT,
    USER_MAIN_NAME,
    Direction,
    DistKind,
    HarnessError,
    Mode,
    Status,
)
from kernellsp.run.harness.dists import (
    DistPlan,
)
from kernellsp.run.harness.mirror import (
    count_poisoned,
    digest_bytes,
    draw,
    fill_reference,
    fnv1a64,
    launch_seed,
    mix64,
    pattern_applies,
    poison_byte,
    reference_elements,
    stream_key,
)
from kernellsp.run.harness.plan import (
    MAX_BUFFER_BYTES,
    ArgPlan,
    HarnessPlan,
    ShapePlan,
    plan_harness,
)
from kernellsp.run.harness.result import (
    BufferInfo,
    HarnessResult,
    SetBuffer,
    SetInfo,
    SnapshotInfo,
    decode_buffer,
    read_result,
)

__all__ = [
    "EXIT_BAD_ARGS",
    "EXIT_CUDA_ERROR",
    "EXIT_IO_ERROR",
    "EXIT_OK",
    "MAX_BUFFER_BYTES",
    "PATTERNS",
    "PREFILLS",
    "RESULT_FORMAT",
    "USER_MAIN_NAME",
    "ArgPlan",
    "BufferInfo",
    "Direction",
    "DistKind",
    "DistPlan",
    "HarnessError",
    "HarnessPlan",
    "HarnessResult",
    "Mode",
    "SetBuffer",
    "SetInfo",
    "ShapePlan",
    "SnapshotInfo",
    "Status",
    "count_poisoned",
    "decode_buffer",
    "digest_bytes",
    "draw",
    "fill_reference",
    "fnv1a64",
    "generate_harness",
    "harness_argv",
    "harness_compile_command",
    "input_set",
    "launch_seed",
    "mix64",
    "pattern_applies",
    "plan_harness",
    "poison_byte",
    "read_result",
    "reference_elements",
    "runtime_source",
    "set_inputs",
    "stream_key",
]
