"""The harness's shared vocabulary: the result format, the input patterns, exit codes, the literal types,
the dtype ranges and :class:`HarnessError`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Literal

#: The ``format`` field of every result.json this module writes or reads.
RESULT_FORMAT = "kernellsp-harness/2"

#: Structured input patterns of check mode's input sets (``SEED:PATTERN``); "spec" is the spec's distribution.
PATTERNS = ("spec", "spikes", "alternating", "ramp", "wide", "tail", "offset")

#: Exit codes of the generated program.
EXIT_OK, EXIT_BAD_ARGS, EXIT_CUDA_ERROR, EXIT_IO_ERROR = 0, 2, 3, 4

#: Name the user's ``main`` gets inside the harness translation unit.
USER_MAIN_NAME = "kernellsp_user_main_"

Status = Literal["ok", "launch_error", "runtime_error", "bad_args"]
Mode = Literal["check", "time", "profile", "inputs"]
Direction = Literal["in", "out", "inout"]
DistKind = Literal["default", "uniform", "normal", "randint", "ones", "arange", "choice"]

_INT_RANGE = {
    "i8": (-(2**7), 2**7 - 1),
    "u8": (0, 2**8 - 1),
    "i16": (-(2**15), 2**15 - 1),
    "u16": (0, 2**16 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "u32": (0, 2**32 - 1),
    "i64": (-(2**63), 2**63 - 1),
    "u64": (0, 2**64 - 1),
}
_FLOAT_MAX = {
    "f16": 65504.0,
    "bf16": 3.3895313892515355e38,
    "f32": 3.4028234663852886e38,
    "f64": sys.float_info.max,
}


class HarnessError(ValueError):
    """The entry or its spec cannot be turned into a harness; the message names the problem."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems: list[str] = list(problems) or [message]
