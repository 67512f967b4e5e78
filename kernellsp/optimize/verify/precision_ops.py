"""Approximate math the baseline does not use: named in every verdict, refused by default.

The correctness checks compare outputs within the spec's tolerance and an error budget relative to the
baseline's own error (:mod:`kernellsp.optimize.verify.correctness_gate`), measured over a whole output.
That misses a downgrade whose error is large where it matters and small on average: a GELU whose
``tanhf`` became ``tanh.approx.f32`` (relative error up to 2^-11, where ``tanhf`` is within 2 ulp) is
off by ~1e-4 only where the argument is moderate, and the output's norm is dominated by large
arguments where ``tanh`` saturates; the norm-relative error stays near the budget's floor. So the gate
also reads what the code computes with: the PTX of each side's entry unit (the one
:mod:`kernellsp.optimize.verify.timing_reads` reads), where every intrinsic, inline ``asm`` and
header helper has become instructions.

Each instruction kind is classed by the error it can add:

* **coarse** (refused under ``precision = "strict"``, the default): hardware approximations with no
  range reduction or a large error bound (``tanh.approx``, ``sin.approx``/``cos.approx``,
  ``lg2.approx``, ``div.approx``/``div.full``, 16-bit ``ex2.approx``), conversions of fp32 values to
  TF32, f16, bf16 or 8-bit floats, tensor-core products on TF32 and tensor-core accumulation in 16 bits;
* **fine** (named, allowed): approximations within a few ulp that the CUDA math library itself is built
  from (``rsqrt.approx``, ``rcp.approx``, ``sqrt.approx``, fp32 ``ex2.approx``) and ``.ftz``
  (denormals flushed to zero) on arithmetic.

Only kinds the candidate has and the baseline does not count: a baseline's own ``__expf`` or f16 output
conversion is the user's choice. ``precision = "fast"`` allows the coarse kinds; the correctness checks
and the error budget (its factor raised to :data:`FAST_ERROR_BUDGET`) still apply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernellsp.optimize.verify.verdict import Verdict, reject

#: The error budget factor under ``precision = "fast"`` (the strict default: VerifyOptions.error_budget).
FAST_ERROR_BUDGET = 100.0
#: The settings' values.
PRECISIONS = ("strict", "fast")

_PTX_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
#: An instruction's opcode with its modifiers (``tanh.approx.f32``, ``cvt.rn.f16x2.f32``), after an optional
#: predicate guard, at the start of a PTX statement (statements end at ``;``; inline ``asm`` from headers
#: such as cuda_fp16.hpp comes in braces: ``{  cvt.rn.f16.f32 %rs1, %f1;}``).
_OPCODE = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)")
_STATEMENT_END = re.compile(r"[;{}\n]")
_FLOAT_TYPES = ("f16", "bf16", "tf32", "f32", "f64", "e4m3", "e5m2")
_NARROW = {"tf32": "TF32", "f16": "f16", "bf16": "bf16", "e4m3": "fp8 (e4m3)", "e5m2": "fp8 (e5m2)"}


@dataclass(frozen=True)
class MathKind:
    """One kind of approximate or reduced-precision math in PTX."""

    name: str
    coarse: bool
    what: str


def _classify(op: str) -> MathKind | None:
    parts = op.split(".")
    head = parts[0]
    mods = parts[1:]
    if head == "cvt" and mods and mods[-1] == "f32":
        dest = next((m.removesuffix("x2") for m in mods[:-1] if m.removesuffix("x2") in _NARROW), None)
        if dest is not None:
            return MathKind(f"f32 -> {dest}", True, f"fp32 values rounded to {_NARROW[dest]}")
        return None
    product = head == "mma" or (head == "wmma" and "mma" in mods) or (head == "wgmma" and "mma_async" in mods)
    if head in ("mma", "wmma", "wgmma") and "tf32" in mods:
        return MathKind("tensor-core TF32", True, "tensor-core products on TF32 (10-bit mantissa) operands")
    if product:
        # The first float type of a product is its result's (D), i.e. what the sums accumulate in.
        types = [m for m in mods if m in _FLOAT_TYPES]
        if types and types[0] in ("f16", "bf16"):
            return MathKind(
                f"tensor-core accumulation in {types[0]}", True, f"tensor-core sums accumulated in {types[0]}"
            )
        return None
    if "approx" in mods or (head == "div" and "full" in mods):
        kind = ".".join([head, *(m for m in mods if m in ("approx", "full", "ftz"))])
        narrow = any(m in mods for m in ("f16", "bf16", "f16x2", "bf16x2"))
        fine = head in ("rsqrt", "rcp", "sqrt") or (head == "ex2" and not narrow)
        name = kind + (".16-bit" if narrow else "")
        what = {
            "tanh": "hardware tanh (relative error up to 2^-11)",
            "sin": "hardware sine (no range reduction)",
            "cos": "hardware cosine (no range reduction)",
            "lg2": "hardware log2 (absolute error 2^-22 near 1: large relative error there)",
            "div": "approximate division (wrong for large divisors)",
            "ex2": "hardware exp2",
            "rsqrt": "hardware reciprocal square root (within 2 ulp)",
            "rcp": "hardware reciprocal",
            "sqrt": "hardware square root",
        }.get(head, f"approximate {head}")
        return MathKind(name, not fine, what)
    if "ftz" in mods and any(m in ("f32", "f32x2") for m in mods):
        return MathKind(f"{head}.ftz", False, "denormal inputs and results flushed to zero")
    return None


def math_kinds(ptx: str) -> dict[str, MathKind]:
    """The approximate and reduced-precision math kinds of a PTX text (comments left out), by name."""
    out: dict[str, MathKind] = {}
    for statement in _STATEMENT_END.split(_PTX_COMMENT.sub(" ", ptx)):
        m = _OPCODE.match(statement)
        k = _classify(m.group(1)) if m else None
        if k is not None:
            out.setdefault(k.name, k)
    return out


def added_kinds(base_ptx: str, cand_ptx: str) -> list[MathKind]:
    """Kinds the candidate's PTX has and the baseline's does not, sorted by name."""
    base = math_kinds(base_ptx)
    return sorted((k for n, k in math_kinds(cand_ptx).items() if n not in base), key=lambda k: k.name)


def verdict(
    base_ptx: str, cand_ptx: str, entry: str, precision: str, details: dict[str, object]
) -> Verdict | None:
    """``precision_downgrade`` when the candidate adds coarse kinds under ``precision = "strict"``; every added
    kind goes into ``details["approximate_math"]`` either way. None: the check passed."""
    added = added_kinds(base_ptx, cand_ptx)
    details["approximate_math"] = [{"kind": k.name, "coarse": k.coarse, "what": k.what} for k in added]
    coarse = [k for k in added if k.coarse]
    if not coarse or precision == "fast":
        return None
    named = "; ".join(f"{k.name} ({k.what})" for k in coarse)
    return reject(
        "precision_downgrade",
        entry,
        f"the candidate computes with approximate or reduced-precision math the baseline does not use: {named}. "
        "Its error can stay inside the tolerance on the checked inputs and still be far above the baseline's; "
        'set precision = "fast" in kernellsp.toml to allow it (the error budget then allows '
        f"{FAST_ERROR_BUDGET:g}x the baseline's own error)",
        kinds=[k.name for k in coarse],
    )
