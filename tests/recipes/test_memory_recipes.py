"""The map, coalesce, reduce and histogram recipes: binding, declining, scope gate, real nvcc, explain, memory.

CPU only. Every candidate goes through the real scope gate and the real nvcc (one translation unit per
file holding every parameter point's kernel under its own name, so one nvcc run checks them all).
Whether the kernels are right and fast is the GPU gate's job (tests/bench/bench_recipes.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from kernellsp.build import nvcc
from kernellsp.optimize.propose.base import Candidate, ProposalContext, splice_kernel
from kernellsp.optimize.propose.recipes import Recipe, explain, recipe
from kernellsp.optimize.propose.recipes.base import Decline, Match, RecipeContext, contexts_for
from kernellsp.optimize.propose.recipes.proposer import RecipeProposer, parse_label
from kernellsp.optimize.verify.scope import check_scope, edit_targets
from kernellsp.source import spec as specmod
from kernellsp.source.model import parse_source

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "recipes" / "corpus"
MANIFEST = tomllib.loads((CORPUS / "manifest.toml").read_text())["files"]
NVCC = shutil.which("nvcc") is not None

#: Archetype -> the recipe of this module set that implements it.
RECIPES = {
    "map": "map-vectorize",
    "strided": "coalesce",
    "reduce": "reduce-block",
    "histogram": "histogram-shared",
}
MINE = sorted(RECIPES.values())

#: Corpus files of these archetypes that the recipe declines on purpose, with words the reason must contain.
EXPECTED_DECLINES = {
    "reduce_sum_interleaved_f32.cu": "contract",  # per-block partials: the output is one value per original block
    "reduce_sum_twopass_launcher.cu": "contract",  # block_sum writes partials; final_sum runs <<<1, 1>>>
    "reduce_sum_i32_block_serial.cu": "threadIdx.x == 0",  # thread 0 of each block loops: not an element loop
}

SAMPLES = {
    "vector_add.cu": (
        "vector_add",
        "map-vectorize",
        {"inputs": "a (f32), b (f32)", "outputs": "c (f32)", "index": "i", "bound": "n", "form": "guard"},
    ),
    "relu_launcher.cu": (
        "solve",
        "map-vectorize",
        {"inputs": "input (f32)", "outputs": "output (f32)", "bound": "N", "launch": "kept (host launcher)"},
    ),
    "saxpy_strided.cu": (
        "saxpy_strided",
        "coalesce",
        {"form": "chunk", "chunk": "chunk", "bound": "n", "inputs": "x (f32), y (f32)", "outputs": "y (f32)"},
    ),
    "reduce_atomic.cu": (
        "reduce_atomic",
        "reduce-block",
        {"op": "sum", "output": "out[0] (f32, inout)", "value": "x[i]"},
    ),
    "histogram.cu": (
        "histogram",
        "histogram-shared",
        {"bins": "bins (u32, 256 in shared memory)", "inputs": "data (u8)"},
    ),
}


def _contexts(path: Path, entry: str) -> list[RecipeContext]:
    model = parse_source(path.read_text(), str(path))
    ctxs = contexts_for(model, entry)
    assert ctxs, f"{path.name}: no kernel context for {entry}"
    return ctxs


def _match_any(name: str, path: Path, entry: str) -> tuple[RecipeContext, Match | Decline]:
    r = recipe(name)
    assert r is not None, f"recipe {name} is not loaded"
    got: tuple[RecipeContext, Match | Decline] | None = None
    for ctx in _contexts(path, entry):
        m = r.match(ctx)
        if isinstance(m, Match):
            return ctx, m
        got = got or (ctx, m)
    assert got is not None
    return got


# --------------------------------------------------------------------------------------------------
# Metadata


def test_every_recipe_module_declares_its_metadata_and_docstring() -> None:
    for name in MINE:
        r = recipe(name)
        assert r is not None
        assert r.archetype in RECIPES and RECIPES[r.archetype] == name
        assert r.rules and all(re.fullmatch(r"KL\d{3}", c) for c in r.rules)
        assert all((ROOT / "rules").glob(f"{c}-*.toml") for c in r.rules)
        assert r.params and all(isinstance(v, list) and v for v in r.params.values())
        assert "Declines" in r.doc or "declines" in r.doc


# --------------------------------------------------------------------------------------------------
# Samples


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_sample_binds_to_the_users_names(sample: str) -> None:
    entry, name, expected = SAMPLES[sample]
    _, m = _match_any(name, ROOT / "samples" / sample, entry)
    assert isinstance(m, Match), m
    for k, v in expected.items():
        assert m.binding.get(k) == v, (k, m.binding)


def test_samples_of_other_shapes_are_declined_by_all_four() -> None:
    for sample, entry in [
        ("transpose_naive.cu", "transpose_naive"),
        ("sgemm_naive.cu", "sgemm_naive"),
        ("softmax_row.cu", "softmax_row"),
        ("stencil2d.cu", "stencil2d"),
        ("layernorm.cu", "layernorm"),
    ]:
        for name in MINE:
            _, m = _match_any(name, ROOT / "samples" / sample, entry)
            assert isinstance(m, Decline) and len(m.reason) > 20, (sample, name, m)


# --------------------------------------------------------------------------------------------------
# Corpus: each recipe matches exactly the files of its archetype (but the documented declines)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_corpus_file_matched_by_its_recipe_only(name: str) -> None:
    entry = str(MANIFEST[name]["entry"])
    archetype = MANIFEST[name]["archetype"]
    for rname in MINE:
        _, m = _match_any(rname, CORPUS / name, entry)
        should = RECIPES.get(archetype) == rname and name not in EXPECTED_DECLINES
        if should:
            assert isinstance(m, Match), f"{rname} should match {name}: {m}"
        else:
            assert isinstance(m, Decline), f"{rname} should decline {name} ({archetype}): {m}"
            assert len(m.reason) > 20
            if name in EXPECTED_DECLINES and RECIPES.get(archetype) == rname:
                assert EXPECTED_DECLINES[name] in m.reason, m.reason


def test_declines_name_the_reason() -> None:
    cases = {
        ("decline_gather_indirect.cu", "map-vectorize"): "data-dependent gather",
        ("decline_debug_printf.cu", "map-vectorize"): "printf",
        ("decline_collatz_while.cu", "map-vectorize"): "data-dependent number of times",
        ("stencil_heat_1d.cu", "map-vectorize"): "neighbour",
        ("matvec_rowwise.cu", "map-vectorize"): "in a loop",
        ("strided_complex_abs_f32.cu", "map-vectorize"): "coalesce recipe",
        ("map_axpby_f32.cu", "coalesce"): "map recipe",
        ("histogram_int_mod.cu", "reduce-block"): "histogram recipe",
        ("reduce_dot_f32.cu", "histogram-shared"): "reduce recipe",
    }
    for (file, rname), words in cases.items():
        _, m = _match_any(rname, CORPUS / file, str(MANIFEST[file]["entry"]))
        assert isinstance(m, Decline) and words in m.reason, (file, rname, m)


def test_host_launched_single_thread_reduction_declines_and_global_one_binds() -> None:
    _, m = _match_any("reduce-block", CORPUS / "reduce_argmax_single_thread.cu", "argmax_kernel")
    assert isinstance(m, Match) and m.binding["accumulators"] == "best (max, best_i)"
    ctx = next(
        c
        for c in _contexts(CORPUS / "reduce_sum_twopass_launcher.cu", "solve")
        if c.kernel.name == "final_sum"
    )
    got = recipe("reduce-block").match(ctx)  # type: ignore[union-attr]
    assert isinstance(got, Decline) and "host launcher" in got.reason


def test_uncovered_launch_is_declined() -> None:
    """A spec launch with fewer threads than elements: the original leaves a tail alone, a rewrite must too."""
    text = (ROOT / "samples" / "vector_add.cu").read_text().replace('grid = "ceil_div(N, BLOCK)"', "grid = 2")
    model = parse_source(text)
    m = recipe("map-vectorize").match(contexts_for(model, "vector_add")[0])  # type: ignore[union-attr]
    assert isinstance(m, Decline) and "covered" in m.reason


# --------------------------------------------------------------------------------------------------
# Candidates: scope gate and nvcc


def _candidates(path: Path, entry: str, names: list[str]) -> list[tuple[str, dict[str, Any], str, Any]]:
    text = path.read_text()
    model = parse_source(text, str(path))
    out = []
    for ctx in contexts_for(model, entry):
        for rname in names:
            r = recipe(rname)
            assert r is not None
            m = r.match(ctx)
            if not isinstance(m, Match):
                continue
            for params in r.points(ctx, m):
                rw = r.generate(ctx, m, params)
                out.append((rname, params, splice_kernel(text, rw.kernel, rw.code, rw.launch), rw))
    return out


def _compile_all(path: Path, text: str, kernel: str, codes: list[str]) -> nvcc.BuildResult:
    """One nvcc run: the file plus every generated kernel under its own name."""
    extra = []
    for i, code in enumerate(codes):
        extra.append(re.sub(rf"\b{kernel}\s*\(", f"{kernel}__kl_point{i}(", code, count=1))
    full = text + "\n\n" + "\n\n".join(extra) + "\n"
    return nvcc.build(path, full, parse_source(full, str(path)), use_cache=False)


CANDIDATE_FILES = [("samples", f, e) for f, (e, _, _) in SAMPLES.items()] + [
    ("corpus", f, str(v["entry"])) for f, v in sorted(MANIFEST.items()) if v["archetype"] in RECIPES
]


@pytest.mark.skipif(not NVCC, reason="needs nvcc")
@pytest.mark.parametrize("case", CANDIDATE_FILES, ids=[c[1] for c in CANDIDATE_FILES])
def test_every_candidate_passes_the_scope_gate_and_compiles(case: tuple[str, str, str]) -> None:
    where, file, entry = case
    path = (ROOT / "samples" / file) if where == "samples" else (CORPUS / file)
    text = path.read_text()
    model = parse_source(text, str(path))
    cands = _candidates(path, entry, MINE)
    if file in EXPECTED_DECLINES:
        assert not cands
        return
    assert cands, f"{file}: no candidate"
    targets = edit_targets(model, entry)
    for rname, params, cand, rw in cands:
        r = check_scope(text, cand, targets, str(path), entry=entry)
        assert r.ok, f"{file} {rname} {params}: {r.reason}"
        bound = specmod.entry_spec(parse_source(cand, str(path)), entry)
        assert bound is not None and not [
            i
            for i in specmod.validate_against(bound, model.function(entry), parse_source(cand))
            if i.severity == "error"
        ]
        # The winner is the next round's baseline: no spec error anywhere in the file (the gate refuses
        # a baseline with one; a generated "// kernellsp recipe: ..." comment was once read as a spec).
        issues = specmod.specs_from_source(parse_source(cand, str(path)))[1]
        assert not [i.message for i in issues if i.severity == "error"], f"{file} {rname} {params}"
        if rw.launch is not None:
            assert bound.spec.launch == rw.launch
        else:
            assert model.function(entry).kind == "host"  # type: ignore[union-attr]
    kernel = cands[0][3].kernel
    if model.function(kernel).template_params:  # type: ignore[union-attr]
        # A template is compiled where the host code instantiates it: build each candidate file whole.
        for rname, params, cand, _ in cands:
            res = nvcc.build(path, cand, parse_source(cand, str(path)), use_cache=False)
            assert res.ok, f"{rname} {params}: " + "\n".join(m.message for m in res.messages)[:2000]
        return
    res = _compile_all(path, text, kernel, [c[3].code for c in cands])
    assert res.ok, "\n".join(m.message for m in res.messages)[:3000]
    built = {r.mangled for r in res.resources}
    for i in range(len(cands)):
        assert any(nvcc.match_kernel(mg, f"{kernel}__kl_point{i}") for mg in built), (
            f"point {i} has no ptxas report"
        )


# --------------------------------------------------------------------------------------------------
# What the rewrites contain


def test_map_rewrite_keeps_the_users_body_and_vectorises_by_dtype() -> None:
    for file, entry, e in [
        ("map_swiglu_bf16.cu", "swiglu_bf16", 8),
        ("map_u8_normalize.cu", "normalize_u8", 16),
        ("map_axpby_f32.cu", "axpby", 4),
    ]:
        cands = _candidates(CORPUS / file, entry, ["map-vectorize"])
        code = cands[0][3].code
        assert f"constexpr int kl_E = {e};" in code, file
        assert "uint4" in code and "& 15ull) == 0" in code  # 16-byte vectors, runtime alignment check
    swiglu = _candidates(CORPUS / "map_swiglu_bf16.cu", "swiglu_bf16", ["map-vectorize"])[0][3].code
    assert "float g = __bfloat162float(kl_gate);" in swiglu  # the user's statements, verbatim


def test_reduction_rewrite_shape() -> None:
    code = _candidates(ROOT / "samples" / "reduce_atomic.cu", "reduce_atomic", ["reduce-block"])[0][3].code
    assert (
        code.count("atomicAdd(") == 1 and "__shfl_down_sync(0xffffffffu" in code and "__syncthreads()" in code
    )
    argmax = _candidates(CORPUS / "reduce_argmax_single_thread.cu", "argmax_kernel", ["reduce-block"])[0]
    assert argmax[3].launch == specmod.LaunchSpec(grid=1, block=1024)
    assert "kl_s_best_i[threadIdx.x + kl_w] < best_i" in argmax[3].code  # ties keep the first index


def test_histogram_rewrite_keeps_the_global_fallback() -> None:
    code = _candidates(CORPUS / "histogram_int_mod.cu", "histogram_mod", ["histogram-shared"])[0][3].code
    assert "__shared__ int kl_bins[1][kl_NB];" in code and "constexpr int kl_NB = 64;" in code
    assert "else atomicAdd(&bins[kl_k], kl_val);" in code
    # The bin is computed from the element the rewrite loaded (the user's `data[i] % num_bins`).
    assert "kl_data % num_bins" in code


def test_host_launched_kernels_keep_launch_and_signature() -> None:
    text = (CORPUS / "map_leaky_relu_launcher.cu").read_text()
    cands = _candidates(CORPUS / "map_leaky_relu_launcher.cu", "solve", ["map-vectorize"])
    assert cands and all(c[3].launch is None for c in cands)
    new = cands[0][2]
    host = text[text.index('extern "C"') :]
    assert new.endswith(host)  # the host launcher, byte for byte
    assert (
        "template <typename T>\n__global__ void leaky_relu_kernel(const T* input, T* output, int N, T slope)"
        in new
    )
    assert (
        "min(static_cast<long long>(N), static_cast<long long>(gridDim.x) * blockDim.x)" in new
    )  # the original reached min(N, threads) elements


# --------------------------------------------------------------------------------------------------
# Explain, proposer, memory


def test_explain_lists_every_recipe_matched_or_declined() -> None:
    model = parse_source((ROOT / "samples" / "saxpy_strided.cu").read_text())
    rows = explain(model, "saxpy_strided")
    names = {r.recipe for r in rows}
    assert set(MINE) <= names
    by = {r.recipe: r for r in rows}
    assert by["coalesce"].matched and by["coalesce"].binding["chunk"] == "chunk"
    assert not by["map-vectorize"].matched and "coalesce" in by["map-vectorize"].reason
    assert all(r.reason for r in rows if not r.matched)
    assert json.loads(json.dumps([r.to_dict() for r in rows]))


def test_cli_explain_text_and_json(tmp_path: Path) -> None:
    f = tmp_path / "reduce_atomic.cu"
    f.write_text((ROOT / "samples" / "reduce_atomic.cu").read_text())
    run = [sys.executable, "-m", "kernellsp", "optimize", str(f), "--explain"]
    out = subprocess.run(run, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert re.search(r"matched +reduce-block .*output=out\[0\] \(f32, inout\)", out.stdout), out.stdout
    assert re.search(r"declined map-vectorize: the kernel uses atomics", out.stdout), out.stdout
    js = subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    data = json.loads(js.stdout)
    assert data["entry"] == "reduce_atomic"
    rb = next(r for r in data["recipes"] if r["recipe"] == "reduce-block")
    assert rb["matched"] and rb["binding"]["op"] == "sum" and rb["params"]["items"]


def test_cli_explain_a_folder_and_all(tmp_path: Path) -> None:
    """Issue 31 item 5.9: ``optimize DIR --explain`` and ``--all --explain`` explain every spec'd entry (they were
    refused); JSON is a list of the one-entry objects."""
    for name in ("reduce_atomic.cu", "vector_add.cu"):
        (tmp_path / name).write_text((ROOT / "samples" / name).read_text())
    (tmp_path / "nospec.cu").write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    run = [sys.executable, "-m", "kernellsp", "optimize", str(tmp_path), "--explain"]
    out = subprocess.run(run, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert re.search(r"reduce_atomic\.cu:reduce_atomic: .*\n(.*\n)*.*matched +reduce-block", out.stdout)
    assert re.search(r"vector_add\.cu:vector_add: .*\n(.*\n)*.*matched +map-vectorize", out.stdout)
    assert "nospec.cu" in out.stderr  # named as a note: no spec'd entry
    files = [str(tmp_path / "vector_add.cu"), str(tmp_path / "reduce_atomic.cu")]
    js = subprocess.run(
        [sys.executable, "-m", "kernellsp", "optimize", *files, "--all", "--explain", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert js.returncode == 0, js.stderr
    assert [d["entry"] for d in json.loads(js.stdout)] == ["vector_add", "reduce_atomic"]
    bad = subprocess.run([*run, "--apply"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "drop --kernel and --apply" in bad.stderr


def _proposal(path: Path, tried: list[dict[str, Any]] | None = None) -> ProposalContext:
    text = path.read_text()
    model = parse_source(text, str(path))
    bound = specmod.specs_from_source(model)[0][0]
    return ProposalContext(str(path), text, text, bound.entry, model, bound, tried=tried or [])


def test_proposer_labels_keys_and_skips_failed_points(tmp_path: Path) -> None:
    f = tmp_path / "vector_add.cu"
    f.write_text((ROOT / "samples" / "vector_add.cu").read_text())
    (tmp_path / "kernellsp.toml").write_text("")
    first = RecipeProposer().propose(_proposal(f), 4)
    assert len(first) == 4 and all(c.proposer == "recipes" for c in first)
    assert parse_label(first[0].description) == ("map-vectorize", "block=0, unroll=1")
    again = RecipeProposer().propose(_proposal(f), 4)
    assert [c.key for c in again] == [c.key for c in first]  # stable keys for memory
    tried = [{"key": first[0].key, "verdict": "not_faster"}]
    after = RecipeProposer().propose(_proposal(f, tried), 4)
    assert first[0].key not in {c.key for c in after}


def test_memory_orders_recipes_by_measured_gain(tmp_path: Path) -> None:
    """Where two recipes match, the one memory saw win on the same archetype goes first."""
    f = tmp_path / "vector_add.cu"
    f.write_text((ROOT / "samples" / "vector_add.cu").read_text())
    (tmp_path / "kernellsp.toml").write_text("")
    first = RecipeProposer().propose(_proposal(f), 4)
    # Memory from another file says the 512-thread point measured best: it moves to the front.
    label = next(c.description for c in first if "block=512" in c.description)
    mem = tmp_path / ".kernellsp" / "memory.json"
    mem.parent.mkdir()
    mem.write_text(
        json.dumps(
            {
                "version": 1,
                "records": [
                    {
                        "file": "other.cu",
                        "entry": "other",
                        "transform": label,
                        "verdict": "accepted",
                        "measured_speedup": 1.9,
                    },
                    {
                        "file": "other.cu",
                        "entry": "other",
                        "transform": first[0].description,
                        "verdict": "accepted",
                        "measured_speedup": 1.2,
                    },
                ],
            }
        )
    )
    ordered = RecipeProposer().propose(_proposal(f), 4)
    assert ordered[0].description == label


def test_default_proposers_put_recipes_first() -> None:
    from kernellsp.optimize.loop import default_proposers

    assert [p.name for p in default_proposers(None, None, "auto")] == ["recipes", "tuner"]
    assert [p.name for p in default_proposers(None, None, "recipes")] == ["recipes"]


def test_candidate_is_a_plain_candidate() -> None:
    c = RecipeProposer().propose(_proposal(ROOT / "samples" / "histogram.cu"), 1)[0]
    assert isinstance(c, Candidate) and c.rules and parse_label(c.description)[0] == "histogram-shared"  # type: ignore[index]
    assert Recipe.label("x", {"b": 1, "a": 2}) == "recipe:x(a=2, b=1)"
