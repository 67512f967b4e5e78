"""The rewrite prompt: what the LLM proposer sends, built deterministically from a ProposalContext.

Two messages. The system message fixes the role (a CUDA performance engineer for an H100), the
strict answer format and the edit constraints that :mod:`kernellsp.optimize.verify.scope` and :mod:`kernellsp.optimize.verify.gate`
enforce anyway. The user message carries the evidence for one entry:

* the target's source and its ``__device__`` helpers (editable), the file's includes and macros
  (read-only context);
* its launch spec as TOML;
* the bottleneck summary of ``ctx.profile`` (duration, DRAM and FP32 share of peak, bottleneck,
  hot lines with their stall reasons, Nsight Compute's own recommendations);
* the rules that fired for this entry, each with its guidance text from ``rules/``;
* what was already tried and how it fared, with the instruction not to repeat rejected ideas.

``ctx.findings`` and ``ctx.profile`` describe the original text (the optimize loop checks and profiles
it once): when the champion ``ctx.text`` differs, quoted lines come from ``ctx.original_text`` and
the prompt says so. Nothing time- or environment-dependent goes into the prompt, so the same context
gives the same messages.
"""

from __future__ import annotations

from typing import Any

from kernellsp.findings import Finding
from kernellsp.optimize.propose.base import ProposalContext
from kernellsp.optimize.verify import correctness as compare
from kernellsp.rules.engine import RuleSet
from kernellsp.source import spec as specmod
from kernellsp.source.model import Function

#: At most this many fired rules, hot lines and tried ideas go into one prompt.
MAX_FINDINGS = 12
MAX_HOT_LINES = 5
MAX_TRIED = 20
MAX_NCU_RULES = 6

ANSWER_FIELDS = ("description", "rules", "predicted_gain_pct", "launch", "code")

SYSTEM_PROMPT = """\
You are an expert CUDA performance engineer. You make one kernel faster on an NVIDIA H100 \
(sm_90: 132 SMs, HBM3 at about 3.35 TB/s, 50 MB L2, up to 227 KB shared memory per block, \
65536 registers per SM) while keeping its results identical.

Answer format (strict). Reply with one JSON object and nothing else, optionally inside a single \
```json fenced block:
{"candidates": [{"description": "...", "rules": ["KL123"], "predicted_gain_pct": 10, "launch": null, "code": "..."}]}
- description: one sentence naming the idea.
- rules: the codes of the reported rules this candidate addresses (may be empty).
- predicted_gain_pct: your estimate of the kernel-time reduction, in percent (a number).
- launch: null to keep the spec's launch, or {"grid": G, "block": B, "smem": S} where each of G and \
B is an integer, an expression over the spec's sizes and tunables such as "ceil_div(N, BLOCK)", or a \
list of up to 3 of those, and S is the dynamic shared memory in bytes (optional, default 0).
- code: the complete definition of the target kernel, plus the complete definitions of the \
__device__ helper functions you add or change; nothing else.
Each candidate has exactly these five fields and is a distinct idea; order them best first.

Constraints. A candidate that breaks one is rejected before it is compiled:
1. Change only the target kernel and __device__ helper functions. Host code, main, other kernels, \
includes, macros and the launch spec stay as they are.
2. Keep the kernel's kind, name, template parameters and its parameters' names, types and order; only \
const, __restrict__ and __launch_bounds__(...) may be added or removed.
3. Change the launch configuration only through the "launch" field, never in code. The kernel must \
stay correct for every shape of the spec (guard tails and sizes that are not a multiple of the block \
or of a vector width).
4. No host code, no #include, #define or other new preprocessor directive (#pragma unroll and \
diagnostics pragmas are allowed; a directive the original already has in the kernel may stay), no global or __device__ variables at file scope; use __shared__ arrays declared \
inside the kernel (a static size, or extern __shared__ sized by the launch's smem).
5. No streams, CUDA graphs, dynamic parallelism, cooperative launches, clock or timer reads.
6. No precision downgrade beyond the spec's tolerance: no lower-precision arithmetic or storage (half, \
bf16, TF32) and no approximate intrinsics (__expf, __fdividef, fast-math) for data the spec declares \
in higher precision. Results must be identical to the original up to floating-point re-association \
(a different summation order).
7. Every launch writes every output element; inputs are never modified.
Every candidate is compiled, compared with the original on several seeds and every shape, run under \
compute-sanitizer and timed against the original: a wrong or slower candidate is discarded, so \
prefer a sound improvement to a risky one."""


def _fmt_num(v: Any, fmt: str = ".1f") -> str | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return format(v, fmt)


def _fmt_share(v: Any) -> str | None:
    """A fraction (0..1) as a whole percentage."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return f"{100 * v:.0f}"


def _fmt_duration(ns: Any) -> str | None:
    if isinstance(ns, bool) or not isinstance(ns, int | float):
        return None
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.0f} ns"


def _source_of(text: str, fn: Function) -> str:
    span = fn.outer_span or fn.span
    return text.encode()[span.start_byte : span.end_byte].decode(errors="replace")


def _evolved(ctx: ProposalContext) -> bool:
    return bool(ctx.original_text) and ctx.text != ctx.original_text


def _line_text(ctx: ProposalContext, line1: int) -> str | None:
    """The stripped text of 1-based ``line1`` of the text the findings and profile describe."""
    lines = ctx.original_text.split("\n") if _evolved(ctx) else (ctx.model.lines or ctx.text.split("\n"))
    if 0 < line1 <= len(lines):
        return lines[line1 - 1].strip()
    return None


def _fence(lang: str, body: str) -> str:
    return f"```{lang}\n{body.rstrip()}\n```"


def _kernel_profiles(ctx: ProposalContext) -> list[dict[str, Any]]:
    """The profile summaries of the entry: a KernelSummary dict, or the ones in a ProfileOutcome dict."""
    p = ctx.profile
    if not p:
        return []
    if isinstance(p.get("kernels"), list):
        ks = [k for k in p["kernels"] if isinstance(k, dict)]
        mine = [k for k in ks if ctx.entry in (k.get("entry"), k.get("name"))]
        return mine or ks[:1]
    return [p]


def _profile_section(ctx: ProposalContext) -> list[str]:
    kps = _kernel_profiles(ctx)
    if not kps:
        return ["## Profile", "No profile is available: judge from the source and the static findings."]
    out = ["## Profile (Nsight Compute)"]
    if _evolved(ctx):
        out.append("(measured on the original version; line numbers and quoted lines refer to it)")
    for kp in kps:
        name = kp.get("name") or ctx.entry
        facts = []
        dur = _fmt_duration(kp.get("duration_ns"))
        if dur:
            facts.append(f"duration {dur}")
        for key, label in (("dram_pct", "DRAM"), ("fp32_pct", "FP32"), ("sm_pct", "SM")):
            v = _fmt_num(kp.get(key))
            if v is not None:
                facts.append(f"{label} {v}% of peak")
        raw_metrics = kp.get("metrics")
        metrics: dict[str, Any] = raw_metrics if isinstance(raw_metrics, dict) else {}
        for key, label in (
            ("achieved_occupancy_pct", "achieved occupancy"),
            ("theoretical_occupancy_pct", "theoretical occupancy"),
        ):
            v = _fmt_num(metrics.get(key), ".0f")
            if v is not None:
                facts.append(f"{label} {v}%")
                break
        bn = kp.get("bottleneck")
        if bn:
            facts.append(f"bottleneck: {bn}")
        out.append(f"- kernel {name}: " + ("; ".join(facts) if facts else "no metrics"))
        stall = metrics.get("dominant_stall")
        share = _fmt_share(metrics.get("dominant_stall_share"))
        if stall:
            out.append(f"- dominant warp stall: {stall}" + (f" ({share}% of stall samples)" if share else ""))
        hot = [h for h in kp.get("hot_lines") or [] if isinstance(h, dict)][:MAX_HOT_LINES]
        if hot:
            out.append("- hottest source lines (share of stall samples, dominant stall reason):")
            for h in hot:
                line = h.get("line")
                pct = _fmt_share(h.get("share"))
                why = h.get("stall")
                spct = _fmt_share(h.get("stall_share"))
                desc = ", ".join(
                    x
                    for x in (
                        f"{pct}%" if pct else None,
                        f"{why}" + (f" {spct}%" if spct else "") if why else None,
                    )
                    if x
                )
                text = _line_text(ctx, line) if isinstance(line, int) else None
                out.append(
                    f"  line {line} ({desc}): `{text}`" if text is not None else f"  line {line} ({desc})"
                )
        ncu = [r for r in kp.get("ncu_rules") or [] if isinstance(r, dict)]
        ncu.sort(key=lambda r: -(r.get("speedup_pct") or 0.0))
        if ncu:
            out.append("- Nsight Compute recommendations (estimated speedup):")
            for r in ncu[:MAX_NCU_RULES]:
                est = _fmt_num(r.get("speedup_pct"), ".0f")
                title = r.get("title") or r.get("id") or "?"
                out.append(f"  [{r.get('type') or 'OPT'}] {title}" + (f" (est. {est}%)" if est else ""))
    return out


def _entry_findings(ctx: ProposalContext, fn: Function | None, helpers: list[Function]) -> list[Finding]:
    spans = [(f.outer_span or f.span) for f in ([fn] if fn else []) + helpers]
    mine = []
    for f in ctx.findings:
        if f.kernel == ctx.entry or (
            f.kernel is None and any(s.contains_line(f.range.start_line) for s in spans)
        ):
            mine.append(f)
    mine.sort(key=lambda f: (-f.impact, -f.severity.rank, f.range.start_line, f.code))
    return mine[:MAX_FINDINGS]


def _rules_section(
    ctx: ProposalContext, rules: RuleSet, fn: Function | None, helpers: list[Function]
) -> list[str]:
    found = _entry_findings(ctx, fn, helpers)
    if not found:
        return ["## Reported rules", "No rule fired for this kernel."]
    out = ["## Reported rules (kernellsp findings for this kernel)"]
    if _evolved(ctx):
        out.append("(found in the original version; line numbers and quoted lines refer to it)")
    for f in found:
        line1 = f.range.start_line + 1
        text = _line_text(ctx, line1)
        where = f"line {line1}" + (f": `{text}`" if text else "")
        msg = " ".join(f.message.split())
        out.append(f"- {f.code} {f.severity.value} ({where}): {msg}")
    guided: list[str] = []
    seen: set[str] = set()
    for f in found:
        rule = rules.get(f.code)
        if rule is None or f.code in seen or not rule.guidance.strip():
            continue
        seen.add(f.code)
        guided.append(f"### {rule.code} {rule.title}\n{rule.guidance.strip()}\nFix: {rule.fix.strip()}")
    if guided:
        out.append("")
        out.append("## Guidance for these rules")
        out.extend(guided)
    return out


def _tried_line(t: dict[str, Any]) -> str:
    desc = " ".join(str(t.get("description") or t.get("key") or "?").split())
    verdict = t.get("verdict") if t.get("verdict") is not None else t.get("kind")
    message = t.get("message")
    if isinstance(verdict, dict):
        message = message or verdict.get("message")
        verdict = verdict.get("kind")
    sp = t.get("speedup")
    if sp is None:
        sp = t.get("measured_speedup")
    parts = [f"- {desc}"]
    if t.get("proposer"):
        parts.append(f"[{t['proposer']}]")
    parts.append(f"-> {verdict or 'unknown'}")
    sps = _fmt_num(sp, ".3f")
    if sps:
        parts.append(f"(measured {sps}x)")
    if message:
        parts.append(f": {' '.join(str(message).split())[:200]}")
    return " ".join(parts)


def _tried_section(ctx: ProposalContext) -> list[str]:
    if not ctx.tried:
        return ["## Already tried", "Nothing yet."]
    tried = ctx.tried[-MAX_TRIED:]
    out = ["## Already tried (verdicts of earlier candidates for this kernel)"]
    if len(ctx.tried) > len(tried):
        out.append(f"({len(ctx.tried) - len(tried)} older attempts omitted)")
    out.extend(_tried_line(t) for t in tried)
    out.append(
        "Do not propose a rejected idea again, not even reworded; build on accepted ones and try "
        "something different from what was rejected."
    )
    return out


def build_messages(ctx: ProposalContext, rules: RuleSet, k: int) -> list[dict[str, str]]:
    """The system and user messages asking for up to ``k`` candidates for ``ctx.entry``."""
    fn = ctx.model.function(ctx.entry)
    helpers = [f for f in ctx.model.functions if f.kind == "device" and f.has_body]
    kind = (
        {
            "global": "__global__ kernel",
            "host": "host launcher",
            "device": "__device__ function",
            "host_device": "__host__ __device__ function",
        }.get(fn.kind, fn.kind)
        if fn
        else "function"
    )
    fname = ctx.path.replace("\\", "/").rsplit("/", 1)[-1]
    k = max(1, k)
    parts: list[str] = [
        f"# Task\nMake the {kind} `{ctx.entry}` in {fname} faster. Propose up to {k} candidate"
        f"{'s' if k != 1 else ''}, each a distinct idea, in the JSON format of the instructions.",
    ]
    if ctx.round:
        parts[0] += f" This is optimization round {ctx.round}: the code below is the current best version."
    if fn is not None and fn.has_body:
        parts.append("## Kernel source (editable)\n" + _fence("cuda", _source_of(ctx.text, fn)))
    if helpers:
        parts.append(
            "## __device__ helpers (editable; redefine one to change it)\n"
            + _fence("cuda", "\n\n".join(_source_of(ctx.text, h) for h in helpers))
        )
    context_lines = [
        ln.strip()
        for ln in (ctx.model.lines or ctx.text.split("\n"))
        if ln.lstrip().startswith("#") and not ln.lstrip().startswith("#pragma")
    ]
    if context_lines:
        parts.append(
            "## File context (read-only: includes and macros)\n" + _fence("cuda", "\n".join(context_lines))
        )
    spec = ctx.spec.spec
    spec_text = specmod.spec_to_toml(spec)
    names = list(spec.sizes) + [t for t in spec.tunables if t not in spec.sizes]
    spec_part = "## Launch spec (TOML)\n" + _fence("toml", spec_text)
    notes = []
    if fn is not None and fn.kind != "global":
        notes.append(f'{ctx.entry} launches its own kernels: keep "launch": null.')
    elif ctx.spec.block is None:
        notes.append(
            'This spec lives in the workspace settings, which a rewrite cannot change: keep "launch": null.'
        )
    elif names:
        notes.append(f"Launch expressions may use: {', '.join(names)} (and ceil_div, min, max).")
    if spec.tunables:
        notes.append("Tunables take their first value by default.")
    if spec.tolerance is None:
        out_dtypes = sorted(
            {a.dtype for a in spec.args.values() if a.dir in ("out", "inout") and a.dtype in compare.DEFAULTS}
        )
        tols = ", ".join(
            f"{d}: rtol {compare.DEFAULTS[d].rtol:g}, norm rtol {compare.DEFAULTS[d].norm_rtol:g}"
            for d in out_dtypes
        )
        notes.append(
            "No tolerance is declared: outputs are compared with the defaults of their dtype"
            + (f" ({tols})" if tols else "")
            + ", which leave room for float re-association only."
        )
    if notes:
        spec_part += "\n" + " ".join(notes)
    parts.append(spec_part)
    parts.append("\n".join(_profile_section(ctx)))
    parts.append("\n".join(_rules_section(ctx, rules, fn, helpers)))
    parts.append("\n".join(_tried_section(ctx)))
    parts.append(
        f'Answer with the JSON object only: {{"candidates": [...]}} holding at most {k} '
        f"candidate{'s' if k != 1 else ''}."
    )
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def retry_messages(answer: str, error: str) -> list[dict[str, str]]:
    """What follows an unusable answer: the answer itself, then the exact parse error."""
    return [
        {"role": "assistant", "content": answer},
        {
            "role": "user",
            "content": (
                f"Your answer could not be used: {error}\n"
                "Answer again with the complete JSON object in the required format "
                '({"candidates": [{"description", "rules", "predicted_gain_pct", "launch", "code"}]}), '
                "fixing this problem; keep the constraints."
            ),
        },
    ]
