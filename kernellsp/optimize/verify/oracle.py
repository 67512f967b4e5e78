"""A higher-precision oracle derived from the baseline: fair judgement when the baseline itself rounds badly.

The correctness gate compares a candidate with the *baseline's* outputs. When the baseline is numerically
poor, an honest and more accurate rewrite is refused: ``atomicAdd(out, x[i])`` over 2^26 uniform(0, 1)
floats saturates near 2^24 (the true sum is about 3.4e7), so a tree reduction "mismatches"; a sequential
float dot product loses a small result to cancellation. This module builds an *oracle*: the baseline's
own source, mechanically changed to accumulate in double, and the rule by which it may rescue a mismatch.

The transformation (of the baseline's text only, never the candidate's; :func:`oracle_source`):

* (a) **float/half local accumulators** of the targeted kernels and the ``__device__`` helpers they call
  (scalar locals that :class:`kernellsp.source.ir.Accumulation` records as sum or product targets) are
  declared ``double``; the initialiser and every use stay as written (a double takes a float literal,
  converts back to float where stored). Shadowed names (declared twice in one function) and declarations
  that also declare a non-accumulator are left alone;
* (b) **float atomicAdd outputs** (``atomicAdd``/``_block``/``_system`` into a float pointer parameter of a
  ``__global__`` entry whose every use in the kernel is such an atomic's address, whose result is unused):
  each call adds its value in double into a ``__device__`` shadow array of that buffer (one slot per
  element, sized by the largest shape), and the entry kernel, renamed into a ``__device__`` body and
  called from a wrapper with the original signature, ends with a "last block" step (the threadfence
  reduction pattern): the block that finishes last rounds ``out[k] + shadow[k]`` into ``out[k]`` once per
  touched element and clears the shadows for the next launch.

Why a device-side transformation rather than a host-side numpy evaluation: the oracle then runs in the
very harness as baseline and candidate (same inputs from the same PRNG and pattern on the device, same
shapes, same input sets including the timed launches' ``S@K`` sets), whatever the kernel computes; a numpy
evaluation needs a model of each kernel shape and the Python mirror of the PRNG fills 2^26 elements one
at a time (minutes), or 256 MB of dumped inputs copied back from a remote runner. Why a double shadow
and not a double output: the output buffer's type is the harness's (float), and the kernel's signature
must stay the entry's. If nothing can be promoted there is no oracle and the gate behaves as before; if the
oracle does not build or run, the gate also behaves as before (the mismatch stands).

The acceptance rule (:func:`judge`), for one output buffer of one input set on which the candidate
mismatched the baseline: the candidate is rescued only if

1. it is within the spec's tolerance of the oracle (:func:`kernellsp.optimize.verify.correctness.compare`),
   the same standard the gate applies to the baseline when the baseline is accurate; and
2. its norm-relative error against the oracle is at most ``max(ORACLE_FACTOR x the baseline's, floor)``,
   where ``floor`` is :func:`~kernellsp.optimize.verify.correctness.budget_floor` (an honest
   re-association's error; without it a baseline that happens to equal the oracle would forbid any
   rounding). A norm, not elementwise: condition 1 already bounds every element by the tolerance, and
   the norm catches an error spread over every element (skipped or approximated work) that a per-element
   tolerance lets through. So on a set where the baseline is accurate the candidate must be as accurate
   (a half-read reduction fails there), and a candidate worse than a poor baseline is not rescued either.

The oracle only ever rescues a set the baseline comparison refused; it never rejects anything.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernellsp.optimize.verify import correctness as compare
from kernellsp.source.ir import Atomic, KernelIR, kernel_ir, walk
from kernellsp.source.model import Function, SourceModel, parse_source

if TYPE_CHECKING:
    import tree_sitter

    from kernellsp.run.harness import HarnessPlan, HarnessResult

#: Element types of a local accumulator that the oracle declares ``double`` instead.
PROMOTABLE_CTYPES = frozenset({"float", "__half", "half", "__nv_bfloat16", "nv_bfloat16"})
#: Accumulations that lose precision in a narrow type (max/min do not: they pick, never round).
PROMOTABLE_OPS = frozenset({"sum", "prod"})
ATOMIC_ADDS = frozenset({"atomicAdd", "atomicAdd_block", "atomicAdd_system"})
#: The most elements one double shadow may have (8 bytes + a 4-byte flag each: 192 MiB at most).
MAX_SHADOW_ELEMENTS = 1 << 24
#: A rescued candidate's norm error against the oracle may be at most this many times the baseline's.
ORACLE_FACTOR = 2.0
_PREFIX = "kl_oracle_"


@dataclass(frozen=True)
class Promotion:
    """A local accumulator declared ``double`` in the oracle."""

    function: str
    var: str
    ctype: str
    line: int


@dataclass(frozen=True)
class ShadowedOutput:
    """A float output whose ``atomicAdd``s accumulate into a double shadow in the oracle."""

    buffer: str
    capacity: int
    lines: tuple[int, ...]


@dataclass
class OracleSource:
    """The oracle's source text and what was changed to make it."""

    text: str
    promoted: list[Promotion] = field(default_factory=list)
    shadowed: list[ShadowedOutput] = field(default_factory=list)

    def describe(self) -> str:
        parts = [f"{p.function}: {p.ctype} {p.var} -> double" for p in self.promoted]
        parts += [f"atomicAdd into {s.buffer} accumulated in a double shadow" for s in self.shadowed]
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "promoted": [f"{p.function}.{p.var} (line {p.line + 1})" for p in self.promoted],
            "shadowed": [s.buffer for s in self.shadowed],
        }


# --------------------------------------------------------------------------------------------------
# The transformation


Edit = tuple[int, int, str]  # (start byte, end byte, replacement)


def oracle_source(baseline: str, path: str, entry: str, plan: HarnessPlan) -> OracleSource | None:
    """The baseline with its float accumulations in double, or ``None`` when nothing can be promoted."""
    from kernellsp.optimize.verify.scope import edit_targets

    model = parse_source(baseline, path)
    functions = _functions_reached(model, edit_targets(model, entry))
    edits: list[Edit] = []
    promoted: list[Promotion] = []
    for fn in functions:
        ir = kernel_ir(model, fn)
        if ir is not None:
            found = _local_promotions(ir)
            edits += [e for e, _ in found if e is not None]
            promoted += [p for _, p in found]
    shadowed: list[ShadowedOutput] = []
    entry_fn = model.function(entry)
    entry_ir = kernel_ir(model, entry_fn) if entry_fn is not None and plan.kind == "global" else None
    if entry_ir is not None:
        atomics = _shadowable_atomics(entry_ir, plan)
        if atomics:
            edits, shadowed = _wrap_entry(entry_ir, atomics, edits, plan)
    if not promoted and not shadowed:
        return None
    text = _apply(model.text.encode("utf-8", errors="replace"), edits).decode("utf-8", errors="replace")
    return OracleSource(text, promoted, shadowed)


def _functions_reached(model: SourceModel, targets: list[str]) -> list[Function]:
    """The targeted kernels and, transitively, the ``__device__`` helpers with a body that they call."""
    seen: dict[str, Function] = {}
    todo = list(targets)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        fn = model.function(name)
        if fn is None or not fn.has_body or (fn.kind not in ("global", "device", "host_device")):
            continue
        seen[name] = fn
        ir = kernel_ir(model, fn)
        todo += sorted(ir.calls) if ir is not None else []
    return list(seen.values())


def _local_promotions(ir: KernelIR) -> list[tuple[Edit | None, Promotion]]:
    """Each promoted local with the edit of its declaration (its type becomes ``double``; None: made by another)."""
    targets = {a.var for a in ir.accumulations if a.op in PROMOTABLE_OPS}
    out: list[tuple[Edit | None, Promotion]] = []
    promotions: list[Promotion] = []
    done: set[int] = set()
    for name in sorted(targets):
        var = ir.locals.get(name)
        if var is None or var.shadowed or var.is_pointer or var.is_array or var.shared:
            continue
        tnode = var.decl.child_by_field_name("type")
        ctype = ir.text(tnode)
        # `float acc = 0, scale = 2;` would turn scale into a double too: all declarators must be accumulators.
        if (
            tnode is None
            or ctype not in PROMOTABLE_CTYPES
            or not set(_declarator_names(ir, var.decl)) <= targets
        ):
            continue
        promotion = Promotion(ir.name, name, ctype, var.decl.start_point[0])
        if tnode.start_byte in done:  # `float a = 0, b = 0;`: one edit of the shared type
            promotions.append(promotion)
            continue
        done.add(tnode.start_byte)
        out.append(((tnode.start_byte, tnode.end_byte, "double"), promotion))
    return out + [(None, p) for p in promotions]


def _declarator_names(ir: KernelIR, decl: tree_sitter.Node) -> list[str]:
    names = []
    for d in decl.children_by_field_name("declarator"):
        target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
        names.append(ir.text(target) if target is not None and target.type == "identifier" else "")
    return names


def _shadowable_atomics(ir: KernelIR, plan: HarnessPlan) -> dict[str, list[Atomic]]:
    """Float output buffers of the entry written only by ``atomicAdd`` (result unused): buffer -> its calls."""
    by_buffer: dict[str, list[Atomic]] = {}
    for at in ir.atomics:
        t = at.target
        if at.func in ATOMIC_ADDS and t is not None and t.space == "global" and not at.result_used:
            by_buffer.setdefault(t.base, []).append(at)
    out: dict[str, list[Atomic]] = {}
    for name, calls in by_buffer.items():
        p = ir.param(name)
        arg = next((a for a in plan.args if a.name == name), None)
        if (
            p is None
            or p.ctype != "float"
            or arg is None
            or arg.dtype != "f32"
            or arg.dir not in ("out", "inout")
        ):
            continue
        if _capacity(plan, name) > MAX_SHADOW_ELEMENTS or not _only_atomic_addresses(ir, name, calls):
            continue
        out[name] = calls
    return out


def _capacity(plan: HarnessPlan, name: str) -> int:
    return max((sp.counts.get(name, 0) for sp in plan.shapes), default=0)


def _only_atomic_addresses(ir: KernelIR, name: str, calls: list[Atomic]) -> bool:
    """Every use of parameter ``name`` in the body lies inside the address of one of ``calls``: no load, store,
    alias or helper call can see the float buffer while its sum lives in the shadow."""
    spans = []
    for at in calls:
        args = _call_args(ir, at.node)
        if len(args) != 2:
            return False
        spans.append((args[0].start_byte, args[0].end_byte))
    for n in walk(ir.body):
        inside = any(s <= n.start_byte and n.end_byte <= e for s, e in spans)
        if n.type == "identifier" and ir.text(n) == name and not inside:
            return False
    return True


def _call_args(ir: KernelIR, call: tree_sitter.Node) -> list[tree_sitter.Node]:
    args = call.child_by_field_name("arguments")
    return [c for c in args.named_children if c.type != "comment"] if args is not None else []


def _wrap_entry(
    ir: KernelIR, atomics: dict[str, list[Atomic]], edits: list[Edit], plan: HarnessPlan
) -> tuple[list[Edit], list[ShadowedOutput]]:
    """The entry's body moves into ``kl_oracle_body_ENTRY`` (its atomics redirected to the shadows); the
    kernel keeps its signature and calls the body, then the last-block step."""
    body = ir.body
    inner = [e for e in edits if body.start_byte <= e[0] and e[1] <= body.end_byte]
    outer = [e for e in edits if e not in inner]
    for name, calls in atomics.items():
        for at in calls:
            addr, value = _call_args(ir, at.node)
            inner.append(
                (
                    at.node.start_byte,
                    at.node.end_byte,
                    f"{_PREFIX}add_{name}({_PREFIX}base_{name}, ({ir.text(addr)}), (double)({ir.text(value)}))",
                )
            )
    body_text = _apply(
        ir.data[body.start_byte : body.end_byte],
        [(s - body.start_byte, e - body.start_byte, r) for s, e, r in inner],
    ).decode()
    shadowed = [
        ShadowedOutput(n, _capacity(plan, n), tuple(at.node.start_point[0] for at in c))
        for n, c in atomics.items()
    ]
    params = _param_list(ir)
    bases = ", ".join(f"float* {_PREFIX}base_{s.buffer}" for s in shadowed)
    names = ", ".join(p.name for p in ir.params)
    prelude = "\n".join(
        [_shadow_code(s) for s in shadowed]
        + [
            _finish_code(ir.name, shadowed),
            f"__device__ void {_PREFIX}body_{ir.name}({bases}, {params})\n{body_text}\n\n",
        ]
    )
    start = ir.fn.outer_span.start_byte if ir.fn.outer_span is not None else ir.fn.span.start_byte
    call_bases = ", ".join(s.buffer for s in shadowed)
    wrapper = (
        f"{{\n    {_PREFIX}body_{ir.name}({call_bases}, {names});\n"
        f"    {_PREFIX}finish_{ir.name}({call_bases});\n}}"
    )
    outer += [(start, start, prelude), (body.start_byte, body.end_byte, wrapper)]
    return outer, shadowed


def _param_list(ir: KernelIR) -> str:
    """The entry's parameter list as written (between its parentheses)."""
    sig = ir.fn.signature_text
    m = re.search(rf"\b{re.escape(ir.name)}\s*\(", sig)
    if m is None:
        raise ValueError(f"cannot find the parameter list of {ir.name}")
    depth, i = 1, m.end()
    while depth and i < len(sig):
        depth += {"(": 1, ")": -1}.get(sig[i], 0)
        i += 1
    return sig[m.end() : i - 1]


def _shadow_code(s: ShadowedOutput) -> str:
    b = s.buffer
    return f"""// kernellsp oracle: the double shadow of {b}: its atomicAdds accumulate here, rounded into {b} once.
__device__ double {_PREFIX}shadow_{b}[{s.capacity}];
__device__ unsigned int {_PREFIX}touched_{b}[{s.capacity}];
__device__ __forceinline__ float {_PREFIX}add_{b}(const float* kl_base, const float* kl_addr, double kl_v) {{
    const long long kl_k = (long long)(kl_addr - kl_base);
    if (kl_k < 0 || kl_k >= {s.capacity}LL) __trap();  // outside {b}: the oracle run fails instead of guessing
    atomicAdd(&{_PREFIX}shadow_{b}[kl_k], kl_v);
    if (((volatile unsigned int*){_PREFIX}touched_{b})[kl_k] == 0u) atomicExch(&{_PREFIX}touched_{b}[kl_k], 1u);
    return 0.0f;
}}
"""


def _finish_code(entry: str, shadowed: list[ShadowedOutput]) -> str:
    """The last block to finish rounds every touched shadow into its float output once, and clears it."""
    done = f"{_PREFIX}blocks_done_{entry}"
    params = ", ".join(f"float* {_PREFIX}out_{s.buffer}" for s in shadowed)
    loops = "\n".join(
        f"""    for (long long kl_k = kl_t; kl_k < {s.capacity}LL; kl_k += kl_nt) {{
        if (atomicExch(&{_PREFIX}touched_{s.buffer}[kl_k], 0u) != 0u) {{
            const double kl_sum = __longlong_as_double((long long)atomicExch(
                (unsigned long long*)&{_PREFIX}shadow_{s.buffer}[kl_k], 0ull));
            {_PREFIX}out_{s.buffer}[kl_k] = (float)((double){_PREFIX}out_{s.buffer}[kl_k] + kl_sum);
        }}
    }}"""
        for s in shadowed
    )
    return f"""__device__ unsigned long long {done};
__device__ void {_PREFIX}finish_{entry}({params}) {{
    __shared__ unsigned int kl_last;
    __threadfence();  // this thread's shadow updates, before the block counts itself done
    __syncthreads();
    const bool kl_lead = threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
    if (kl_lead) {{
        const unsigned long long kl_blocks = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
        kl_last = atomicAdd(&{done}, 1ull) == kl_blocks - 1ull;
    }}
    __syncthreads();
    if (!kl_last) return;
    __threadfence();
    const long long kl_t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const long long kl_nt = (long long)blockDim.x * blockDim.y * blockDim.z;
{loops}
    if (kl_lead) {done} = 0ull;  // the next launch counts from zero again
}}
"""


def _apply(data: bytes, edits: list[Edit]) -> bytes:
    """``data`` with every (start, end, replacement) applied; edits must not overlap."""
    out = data
    for start, end, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + text.encode() + out[end:]
    return out


# --------------------------------------------------------------------------------------------------
# The acceptance rule


@dataclass
class Judgement:
    """Whether a candidate that mismatched the baseline is rescued by the oracle, and the numbers why."""

    rescued: bool
    baseline_error: float
    candidate_error: float
    allowed_error: float
    #: The candidate against the oracle under the spec's tolerance (None: within it).
    mismatch: compare.Mismatch | None

    def describe(self) -> str:
        if self.mismatch is not None:
            return f"against the higher-precision oracle too: {self.mismatch.describe()}"
        if not self.rescued:
            return (
                f"against the higher-precision oracle its norm-relative error is {self.candidate_error:.3g}, "
                f"above {self.allowed_error:.3g} ({ORACLE_FACTOR:g}x the baseline's {self.baseline_error:.3g}): "
                "less accurate than the baseline"
            )
        return (
            f"rescued by the higher-precision oracle: error {self.candidate_error:.3g} against the baseline's "
            f"{self.baseline_error:.3g}"
        )


def judge(
    dtype: str,
    candidate: bytes,
    baseline: bytes,
    oracle: bytes,
    tol: compare.Tolerance,
    factor: float = ORACLE_FACTOR,
) -> Judgement:
    """The acceptance rule of the module docstring, on raw output bytes of one buffer and input set."""
    base_err = compare.norm_rel_error(dtype, baseline, oracle)
    cand_err = compare.norm_rel_error(dtype, candidate, oracle)
    allowed = max(factor * base_err, compare.budget_floor(dtype) or 0.0)
    mm = compare.compare("oracle", dtype, candidate, oracle, tol)
    return Judgement(mm is None and cand_err <= allowed, base_err, cand_err, allowed, mm)


# --------------------------------------------------------------------------------------------------
# Running it: built once per verification, lazily, its runs cached per (shape, input sets)


class OracleRuns:
    """The oracle binary of one verification: ``build`` is asked at most once (on the first mismatch that asks;
    it may wait for a compile already under way) and ``run(shape, sets)`` gives its check-mode result (None
    when it failed); results are cached."""

    def __init__(
        self,
        source: OracleSource,
        build: Callable[[], str | None],
        run: Callable[[int, list[str]], tuple[HarnessResult | None, str | None]],
    ) -> None:
        self.source = source
        self._build = build
        self._run = run
        self.built: bool | None = None
        #: Why the oracle cannot be used (a build or run failure); None while it can.
        self.problem: str | None = None
        self._results: dict[tuple[int, tuple[str, ...]], HarnessResult | None] = {}

    def outputs(self, shape: int, sets: list[str]) -> HarnessResult | None:
        if self.built is None:
            self.problem = self._build()
            self.built = self.problem is None
        if not self.built:
            return None
        key = (shape, tuple(sets))
        if key not in self._results:
            res, problem = self._run(shape, sets)
            self._results[key] = res
            self.problem = problem if res is None else self.problem
        return self._results[key]
