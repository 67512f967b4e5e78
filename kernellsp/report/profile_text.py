"""The human report of a profile: what the CLI's ``profile`` prints and the editor's "Show profile report" shows."""

from __future__ import annotations

from kernellsp.profile.ncu import ProfileOutcome


def format_outcome(outcome: ProfileOutcome, label: str, top: int = 5) -> str:
    """The human report of a profile (the CLI prints it; the editor shows it as "Show profile report")."""
    env = outcome.environment
    clock = float(env.get("clocks_under_ncu_hz") or 0) / 1e9
    out = [
        f"{label}: {env.get('gpu', '?')} (driver {env.get('driver', '?')}, ncu {env.get('ncu_version', '?')}, "
        f"SM clock under ncu {clock:.2f} GHz){' [cached]' if outcome.cached else ''}; wall {outcome.wall_s:.1f} s"
    ]
    for k in outcome.kernels:
        dur = f"{k.duration_ns / 1000:.1f} us" if k.duration_ns else "?"
        dram = f"{k.dram_pct:.0f}% of DRAM peak" if k.dram_pct is not None else "DRAM ?"
        fp32 = f"{k.fp32_pct:.1f}% of FP32 peak" if k.fp32_pct is not None else "FP32 ?"
        entry = f" (entry {k.entry})" if k.entry and k.entry != k.name else ""
        out.append(f"\n{k.name}{entry}: {dur}, {dram}, {fp32}; {k.bottleneck}")
        for f in [f for f in outcome.findings if f.kernel == k.name][:top]:
            out.append(f"  {f.range.start_line + 1:>5}: {f.severity.value} {f.code} {f.message}")
        if k.hot_lines:
            hl = ", ".join(
                f"{h['line']} ({100 * h['share']:.0f}% {h['stall'] or ''})".replace(" )", ")")
                for h in k.hot_lines[:5]
            )
            out.append(f"  hottest lines: {hl}")
    return "\n".join(out)
