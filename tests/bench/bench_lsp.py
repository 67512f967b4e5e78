"""Benchmark: language-server latency, measured from a real client over stdio.

    python tests/bench/bench_lsp.py --write [--runs 3]

Per run, in a fresh workspace with a copy of samples/vector_add.cu and a fresh cache (a new server):

* ``open_to_static_s``: didOpen → the first (static) diagnostics, nothing cached (nvcc + nvdisasm);
* ``open_to_profile_s`` (GPU): didOpen → profile diagnostics, on a machine where kernellsp never ran:
  the harness runtime object (built once per toolchain, in the background from the server's start) is
  part of it;
* ``save_to_profile_s`` (GPU): an edit (a comment line appended), then didSave → profile diagnostics
  of the new text: the steady state of the edit loop (the entry unit compiles, ncu runs);
* ``resave_cached_s`` (GPU): didSave of the unchanged text → its profile diagnostics again (the
  content-hash cache: no build, no GPU work, no debounce);
* ``reopen_to_static_s``: didClose, didOpen again in the same server (the build is cached);
* ``open_to_static_warm_s``: a second server on the same cache, didOpen → static diagnostics.

The GPU runs also record the profile's own phase breakdown (build, debounce wait, ncu, report, rules)
from the server's cache. Writes tests/bench/results/lsp-latency-<machine>.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.gpuinfo import gpu_slug, local_gpu_name  # noqa: E402  (tests/helpers/gpuinfo.py)
from helpers.lsp_support import change_doc, lsp_session, open_doc, publications, save_doc  # noqa: E402
from lsprotocol import types  # noqa: E402

PROFILE = ("KL5", "KL6")
#: The profile phases the table shows (kernellsp.profile.ncu.profile_file's environment.phases).
PHASES = ("build_s", "debounce_wait_s", "ncu_s", "report_s", "rules_s", "total_s")


async def _profiled(client: Any, uri: str, after: int, version: int, t: float, what: str) -> float:
    """Seconds from ``t`` until a publication (past the first ``after``) of ``version`` carries profile findings.

    Layers carry their version: a publication of ``version`` holds profile findings only once the profile
    of that very text is in."""
    while True:
        pubs = publications(client, uri)[after:]
        if any(
            p.version == version and any(str(d.code).startswith(PROFILE) for d in p.diagnostics) for p in pubs
        ):
            return time.monotonic() - t
        if time.monotonic() - t > 300:
            raise TimeoutError(what)
        await asyncio.sleep(0.005)


async def _static(client: Any, uri: str, after: int, t: float) -> float:
    while len(publications(client, uri)) <= after:
        if time.monotonic() - t > 120:
            raise TimeoutError("static diagnostics")
        await asyncio.sleep(0.005)
    return time.monotonic() - t


async def one_run(gpu: bool) -> dict[str, float]:
    ws = Path(tempfile.mkdtemp(prefix="kernellsp-bench-lsp-"))
    (ws / "kernellsp.toml").write_text("")
    path = ws / "vector_add.cu"
    shutil.copy(ROOT / "samples" / "vector_add.cu", path)
    cache = tempfile.mkdtemp(prefix="kernellsp-bench-lsp-cache-")
    env = {**os.environ, "KERNELLSP_CACHE_DIR": cache}
    out: dict[str, float] = {}
    text = path.read_text()
    async with lsp_session("neovim@v0.11", ws, env=env) as client:
        t = time.monotonic()
        uri = open_doc(client, path)
        out["open_to_static_s"] = await _static(client, uri, 0, t)
        if gpu:
            out["open_to_profile_s"] = await _profiled(client, uri, 0, 1, t, "open → profile")
            # An edit the user could make (a comment at the end: every cache misses, no line moves), then save.
            text += "// edited\n"
            change_doc(client, uri, 2, text)
            n = len(publications(client, uri))
            t = time.monotonic()
            save_doc(client, uri)
            out["save_to_profile_s"] = await _profiled(client, uri, n, 2, t, "save → profile")
            n = len(publications(client, uri))
            t = time.monotonic()
            save_doc(client, uri)
            out["resave_cached_s"] = await _profiled(client, uri, n, 2, t, "re-save → profile")
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        await asyncio.sleep(0.2)
        n = len(publications(client, uri))
        t = time.monotonic()
        open_doc(client, path, version=3, text=text)
        out["reopen_to_static_s"] = await _static(client, uri, n, t)
    async with lsp_session("neovim@v0.11", ws, env=env) as client:
        t = time.monotonic()
        uri = open_doc(client, path, text=text)
        out["open_to_static_warm_s"] = await _static(client, uri, 0, t)
    if gpu:
        out.update(_profile_phases(cache))
    shutil.rmtree(ws, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    return out


def _profile_keys(cache_dir: str) -> set[str]:
    import diskcache

    with diskcache.Cache(cache_dir) as c:
        return {k for k in c.iterkeys() if isinstance(k, str) and k.startswith("profile:")}


def _profile_phases(cache_dir: str, before: set[str] | None = None) -> dict[str, float]:
    """The phases of the profile the server stored since ``before`` (the profile keys then), or of the last one
    stored (one server, one file: the edited text's, the re-save being a cache hit)."""
    import json

    import diskcache

    last: dict[str, Any] = {}
    with diskcache.Cache(cache_dir) as c:
        for key in c.iterkeys():  # insertion order
            if isinstance(key, str) and key.startswith("profile:") and (before is None or key not in before):
                last = json.loads(c[key])
    phases = last.get("environment", {}).get("phases", {})
    return {f"phase_{k}": float(v) for k, v in phases.items() if k in PHASES}


async def every_sample(names: list[str]) -> list[dict[str, Any]]:
    """One server over a workspace holding every sample, one cache: per sample, didOpen → profile diagnostics,
    an edit + didSave → profile diagnostics of the new text, and a re-save of it (the runtime object is built
    once, during the first sample's open, as in an editor session that opens several files)."""
    ws = Path(tempfile.mkdtemp(prefix="kernellsp-bench-lsp-all-"))
    (ws / "kernellsp.toml").write_text("")
    cache = tempfile.mkdtemp(prefix="kernellsp-bench-lsp-cache-")
    env = {**os.environ, "KERNELLSP_CACHE_DIR": cache}
    rows = []
    async with lsp_session("neovim@v0.11", ws, env=env) as client:
        for name in names:
            path = ws / name
            shutil.copy(ROOT / "samples" / name, path)
            text = path.read_text()
            row: dict[str, Any] = {"sample": name}
            t = time.monotonic()
            uri = open_doc(client, path)
            row["open_to_profile_s"] = await _profiled(client, uri, 0, 1, t, f"{name}: open → profile")
            text += "// edited\n"
            change_doc(client, uri, 2, text)
            n = len(publications(client, uri))
            known = _profile_keys(cache)  # the edited text's profile is the one stored after these
            t = time.monotonic()
            save_doc(client, uri)
            row["save_to_profile_s"] = await _profiled(client, uri, n, 2, t, f"{name}: save → profile")
            n = len(publications(client, uri))
            t = time.monotonic()
            save_doc(client, uri)
            row["resave_cached_s"] = await _profiled(client, uri, n, 2, t, f"{name}: re-save → profile")
            row.update(_profile_phases(cache, known))
            rows.append(row)
            print(name, {k: round(v, 2) for k, v in row.items() if isinstance(v, float)}, flush=True)
    shutil.rmtree(ws, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    return rows


def _samples_table(gpu_name: str, rows: list[dict[str, Any]]) -> str:
    keys = ["open_to_profile_s", "save_to_profile_s", "resave_cached_s"]
    keys += [f"phase_{k}" for k in PHASES if all(f"phase_{k}" in r for r in rows)]
    lines = [
        f"# Language-server latency on every sample ({gpu_name})",
        "",
        "Client over stdio (pytest-lsp, Neovim 0.11 capabilities), one server and one cache for a workspace "
        f"holding every sample, opened one after the other; host {platform.node()}. Columns (seconds): "
        "`open_to_profile` didOpen → profile diagnostics (the first sample's includes the harness runtime "
        "object's one-time build); `save_to_profile` an edit (a comment appended) + didSave → profile "
        "diagnostics of the new text; `resave_cached` didSave of the unchanged text → its profile diagnostics "
        "(content-hash cache); `phase_*` the edited text's profile as the server recorded it. Run: "
        "`tests/bench/bench_lsp.py --every-sample --write`.",
        "",
        "| sample | " + " | ".join(k.removesuffix("_s") for k in keys) + " |",
        "|---|" + "---:|" * len(keys),
    ]
    for r in rows:
        lines.append(f"| {r['sample']} | " + " | ".join(f"{r[k]:.2f}" for k in keys) + " |")
    lines.append(
        "| median | " + " | ".join(f"{statistics.median(r[k] for r in rows):.2f}" for k in keys) + " |"
    )
    lines.append("| max | " + " | ".join(f"{max(r[k] for r in rows):.2f}" for k in keys) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    ap.add_argument(
        "--every-sample",
        action="store_true",
        help="save → profile on every bundled sample in one server (GPU only): lsp-samples-<gpu>.md",
    )
    args = ap.parse_args()
    gpu_name = ""
    if shutil.which("ncu"):
        gpu_name = local_gpu_name()
    if args.every_sample:
        if not gpu_name:
            print("--every-sample needs ncu and a GPU", file=sys.stderr)
            return 2
        names = sorted(p.name for p in (ROOT / "samples").glob("*.cu"))
        table = _samples_table(gpu_name, asyncio.run(every_sample(names)))
        print(table)
        if args.write:
            (ROOT / "tests" / "bench" / "results" / f"lsp-samples-{gpu_slug(gpu_name)}.md").write_text(table)
        return 0
    runs = [asyncio.run(one_run(bool(gpu_name))) for _ in range(args.runs)]
    keys = ["open_to_static_s", "reopen_to_static_s", "open_to_static_warm_s"]
    if gpu_name:
        keys += ["open_to_profile_s", "save_to_profile_s", "resave_cached_s"]
        keys += [f"phase_{k}" for k in PHASES if all(f"phase_{k}" in r for r in runs)]
    where = gpu_name or f"CPU only ({os.cpu_count()} cores)"
    lines = [
        f"# Language-server latency ({where})",
        "",
        f"Client over stdio (pytest-lsp, Neovim 0.11 capabilities), samples/vector_add.cu, fresh cache and a new "
        f"server per run, host {platform.node()}, load average {os.getloadavg()[0]:.2f}. Columns (seconds): "
        "`open_to_static` didOpen → static diagnostics with nothing cached; `reopen_to_static` didClose + "
        "didOpen in the same server; `open_to_static_warm` a second server on the same cache"
        + (
            "; `open_to_profile` didOpen → profile diagnostics on a machine where kernellsp never ran (the "
            "harness runtime object, built once per toolchain from the server's start, is included); "
            "`save_to_profile` an edit (a comment appended) + didSave → profile diagnostics of the new text "
            "(the entry unit's device-only compile to a cubin, the host harness coming from the binary cache, "
            "the 0.5 s debounce overlapping it, ncu's fast set, the report, the "
            "rules); `resave_cached` didSave of the unchanged text → its profile diagnostics (content-hash "
            "cache); `phase_*` the edited text's profile as the server recorded it (build = the entry unit's "
            "cubin compile, debounce_wait = what was left of the 0.5 s after the build, ncu = the "
            "profiler run, report = reading the .ncu-rep, rules = findings; total = profile_file end to end)"
            if gpu_name
            else ""
        )
        + ".",
        "",
        "| run | " + " | ".join(k.removesuffix("_s") for k in keys) + " |",
        "|---|" + "---:|" * len(keys),
    ]
    for i, r in enumerate(runs, 1):
        lines.append(f"| {i} | " + " | ".join(f"{r[k]:.2f}" for k in keys) + " |")
    lines.append(
        "| median | " + " | ".join(f"{statistics.median(r[k] for r in runs):.2f}" for k in keys) + " |"
    )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        slug = gpu_slug(gpu_name)
        (ROOT / "tests" / "bench" / "results" / f"lsp-latency-{slug}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
