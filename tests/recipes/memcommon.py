"""Shared helpers of the memory-recipe tests (transpose, row reductions, stencils): CPU only, real parts.

Every candidate is spliced into the file the way the proposer does it, checked by the real scope gate
and compiled by the real nvcc (``-arch=sm_90 -c``, several files at once). Whether the kernels compute
the right numbers fast is the GPU check's job (tests/bench/memrecipes_check.py, bench_recipes.py).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernellsp.optimize.propose.base import splice_kernel
from kernellsp.optimize.propose.recipes import Recipe, recipe
from kernellsp.optimize.propose.recipes.base import Decline, Match, RecipeContext, Rewrite, contexts_for
from kernellsp.optimize.verify.scope import check_scope, edit_targets
from kernellsp.source.model import parse_source
from kernellsp.source.spec import specs_from_source

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "recipes" / "corpus"
MANIFEST: dict[str, dict[str, Any]] = tomllib.loads((CORPUS / "manifest.toml").read_text())["files"]
NVCC = shutil.which("nvcc")


def files_of(archetype: str) -> list[str]:
    return sorted(f for f, e in MANIFEST.items() if e["archetype"] == archetype)


def entry_of(name: str) -> str:
    return str(MANIFEST[name]["entry"])


def the_recipe(name: str) -> Recipe:
    r = recipe(name)
    assert r is not None, f"recipe {name} is not loaded"
    return r


def match(
    recipe_name: str, path: Path, entry: str, text: str | None = None
) -> tuple[RecipeContext, Match | Decline]:
    """The recipe against the first kernel ``entry`` may rewrite."""
    src = text if text is not None else path.read_text()
    model = parse_source(src, str(path))
    ctxs = contexts_for(model, entry)
    assert ctxs, f"{path.name}: no kernel context for {entry}"
    return ctxs[0], the_recipe(recipe_name).match(ctxs[0])


def candidates(recipe_name: str, path: Path, entry: str) -> list[tuple[dict[str, Any], Rewrite, str]]:
    """``(params, rewrite, spliced file text)`` for every parameter point of a matching recipe."""
    text = path.read_text()
    ctx, m = match(recipe_name, path, entry, text)
    assert isinstance(m, Match), f"{path.name}: {m.reason}"
    r = the_recipe(recipe_name)
    out = []
    for p in r.points(ctx, m):
        rw = r.generate(ctx, m, p)
        launcher = ctx.entry if ctx.host_launched else None
        out.append((p, rw, splice_kernel(text, rw.kernel, rw.code, rw.launch, rw.host_config, launcher)))
    assert out, f"{path.name}: no parameter points"
    return out


def scope_problems(path: Path, entry: str, texts: list[str]) -> list[str]:
    """The scope gate's reasons for every candidate text it refuses."""
    base = path.read_text()
    targets = edit_targets(parse_source(base, str(path)), entry)
    out = []
    for t in texts:
        res = check_scope(base, t, targets, str(path), entry)
        if not res.ok:
            out.append(res.reason)
        # The candidate becomes the next round's baseline: its specs must read back without an error (a
        # comment starting with "kernellsp" in the generated code was once read as a broken spec).
        out += [
            f"spec: {i.message} (line {i.line})"
            for i in specs_from_source(parse_source(t, str(path)))[1]
            if i.severity == "error"
        ]
    return out


def compile_errors(texts: list[str]) -> list[str]:
    """nvcc's errors for every text that does not compile (sm_90, device code only, in parallel)."""
    assert NVCC is not None
    work = Path(tempfile.mkdtemp(prefix="kl-memrecipes-"))

    def build(it: tuple[int, str]) -> str:
        i, t = it
        src = work / f"c{i}.cu"
        src.write_text(t)
        cp = subprocess.run(
            [NVCC, "-arch=sm_90", "-std=c++17", "-c", "-o", str(work / f"c{i}.o"), str(src)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        return "" if cp.returncode == 0 else f"candidate {i}: {cp.stderr[-1500:]}"

    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            return [e for e in pool.map(build, enumerate(texts)) if e]
    finally:
        shutil.rmtree(work, ignore_errors=True)
