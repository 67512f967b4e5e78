"""The matmul and matvec recipes on the sample and the corpus: binding, declining, scope and real nvcc.

CPU only: every candidate is checked by the real scope gate and compiled by the real nvcc (one
translation unit per file holding every parameter point's kernel under its own name, so ptxas reports
each). Whether the kernels compute the right numbers fast is the GPU bench's and the gate's job
(tests/bench/gemm_codegen_check.py, tests/bench/bench_recipes.py).
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from kernellsp.build import nvcc
from kernellsp.optimize.propose.base import splice_kernel
from kernellsp.optimize.propose.recipes import _gemm_codegen as cg
from kernellsp.optimize.propose.recipes import _gemv_codegen as gv
from kernellsp.optimize.propose.recipes import explain, recipe
from kernellsp.optimize.propose.recipes.base import Match, RecipeContext, contexts_for
from kernellsp.optimize.propose.recipes.matmul import oriented
from kernellsp.optimize.verify.scope import check_scope, edit_targets
from kernellsp.source import spec as specmod
from kernellsp.source.model import parse_source

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "recipes" / "corpus"
MANIFEST = tomllib.loads((CORPUS / "manifest.toml").read_text())["files"]
NVCC = shutil.which("nvcc") is not None

PRODUCT_FILES = sorted(f for f, e in MANIFEST.items() if e["archetype"] in ("matmul", "matvec"))
OTHER_FILES = sorted(f for f, e in MANIFEST.items() if e["archetype"] not in ("matmul", "matvec"))
RECIPE = {"matmul": "matmul-tiled", "matvec": "matvec-bandwidth"}

#: Corpus products the fp32 recipes decline on purpose, with the words the reason must contain.
EXPECTED_DECLINES = {
    # 16-bit operands: the matmul-tensorcore recipe's (tests/recipes/test_matmul_tensorcore.py).
    "matmul_f16_f32acc.cu": "f16/bf16",
    "matmul_bf16_nt_alpha_beta.cu": "f16/bf16",
    "matmul_i8_i32.cu": "cast",  # (int32_t) casts: an integer product
}


def _context(path: Path, entry: str) -> RecipeContext:
    model = parse_source(path.read_text(), str(path))
    ctxs = contexts_for(model, entry)
    assert ctxs, f"{path.name}: no kernel context for {entry}"
    return ctxs[0]


def _entry(name: str) -> str:
    return str(MANIFEST[name]["entry"])


def _match(recipe_name: str, path: Path, entry: str) -> tuple[RecipeContext, Any]:
    ctx = _context(path, entry)
    r = recipe(recipe_name)
    assert r is not None, f"recipe {recipe_name} is not loaded"
    return ctx, r.match(ctx)


# --------------------------------------------------------------------------------------------------
# Binding


def test_sample_sgemm_binds_row_major_names_and_spec_launch() -> None:
    _, m = _match("matmul-tiled", ROOT / "samples" / "sgemm_naive.cu", "sgemm_naive")
    assert isinstance(m, Match), m
    b: cg.GemmBinding = m.data.binding
    assert (b.a.name, b.a.layout, b.a.ld) == ("A", "row", "K")
    assert (b.b.name, b.b.layout, b.b.ld) == ("B", "row", "N")
    assert (b.c.name, b.c.layout, b.c.ld) == ("C", "row", "N")
    assert (b.m, b.n, b.k) == ("M", "N", "K")
    assert b.epilogue == "{acc}" and b.batch is None
    assert (m.data.m_spec, m.data.n_spec) == ("(M)", "(N)")


def test_column_major_alpha_beta_binds_leading_dimensions_and_epilogue() -> None:
    _, m = _match("matmul-tiled", CORPUS / "matmul_colmajor_lda.cu", "sgemm_nn_colmajor")
    assert isinstance(m, Match), m
    b: cg.GemmBinding = m.data.binding
    # A column-major C is bound as its row-major transpose C^T = B^T A^T (A is always the factor that
    # moves with C's non-contiguous coordinate); orientation BA is the problem as the BLAS call states it.
    assert [(o.name, o.layout, o.ld) for o in (b.a, b.b, b.c)] == [
        ("B", "row", "ldb"),
        ("A", "row", "lda"),
        ("C", "row", "ldc"),
    ]
    assert b.epilogue == "alpha * {acc} + beta * {c}"
    assert (b.m, b.n, b.k) == ("n", "m", "k")
    t = oriented(b, "BA")
    assert [(o.name, o.layout, o.ld) for o in (t.a, t.b, t.c)] == [
        ("A", "col", "lda"),
        ("B", "col", "ldb"),
        ("C", "col", "ldc"),
    ]
    assert (t.m, t.n, t.k) == ("m", "n", "k")


def test_linear_layer_binds_transposed_weight_and_bias_start() -> None:
    _, m = _match("matmul-tiled", CORPUS / "matmul_linear_abt.cu", "linear_forward")
    assert isinstance(m, Match), m
    b: cg.GemmBinding = m.data.binding
    assert (b.b.name, b.b.layout, b.b.ld) == ("weight", "col", "K")
    assert b.init == "bias[{j}]"


def test_index_macro_is_expanded_and_a_transposed_binds_column_major() -> None:
    _, m = _match("matmul-tiled", CORPUS / "matmul_at_b.cu", "matmul_tn")
    assert isinstance(m, Match), m
    b: cg.GemmBinding = m.data.binding
    assert (b.a.layout, b.a.ld, b.b.layout, b.c.layout) == ("col", "M", "row", "row")


def test_uncoalesced_thread_mapping_and_one_d_block_split_both_bind() -> None:
    for name in ("matmul_sgemm_uncoalesced.cu", "matmul_sgemm_coalesced_1d_block.cu"):
        _, m = _match("matmul-tiled", CORPUS / name, _entry(name))
        assert isinstance(m, Match), (name, m)
        b = m.data.binding
        assert (b.a.layout, b.b.layout, b.c.layout) == ("row", "row", "row"), name
        assert b.epilogue == "alpha * {acc} + beta * {c}", name


def test_batched_product_binds_strides_of_blockidx_z() -> None:
    _, m = _match("matmul-tiled", CORPUS / "matmul_batched_z.cu", "bmm_naive")
    assert isinstance(m, Match), m
    b: cg.GemmBinding = m.data.binding
    assert b.batch == "batch"
    assert {b.a.batch_stride, b.b.batch_stride, b.c.batch_stride} == {"K * M", "K * N", "M * N"}
    assert m.data.batch_spec == "(BATCH)"


def test_outer_batch_loop_binds_as_a_batch() -> None:
    text = (ROOT / "samples" / "sgemm_naive.cu").read_text()
    text = text.replace("int M, int N, int K)", "int M, int N, int K, int nb)")
    text = text.replace('K = { value = "K" }', 'K = { value = "K" }\nnb = { value = "2" }')
    body_old = (
        "        float acc = 0.0f;\n        for (int k = 0; k < K; ++k) {\n"
        "            acc += A[row * K + k] * B[k * N + col];\n        }\n        C[row * N + col] = acc;\n"
    )
    body_new = (
        "        for (int b = 0; b < nb; ++b) {\n            float acc = 0.0f;\n"
        "            for (int k = 0; k < K; ++k) acc += A[b * M * K + row * K + k] * B[k * N + col];\n"
        "            C[b * M * N + row * N + col] = acc;\n        }\n"
    )
    assert body_old in text
    text = text.replace(body_old, body_new)
    model = parse_source(text, "outer.cu")
    ctx = contexts_for(model, "sgemm_naive")[0]
    m = recipe("matmul-tiled").match(ctx)  # type: ignore[union-attr]
    assert isinstance(m, Match), m
    b: cg.GemmBinding = m.data.binding
    assert b.batch == "nb" and b.a.batch_stride == "K * M" and b.b.batch_stride == "0"


def test_host_launcher_keeps_the_host_block() -> None:
    _, m = _match("matmul-tiled", CORPUS / "matmul_1d_launcher.cu", "solve")
    assert isinstance(m, Match), m
    assert m.data.host_block == 256


def test_matvec_layouts() -> None:
    want = {
        "matvec_rowwise.cu": ("row", "cols"),
        "matvec_colmajor.cu": ("col", "lda"),
        "matvec_transposed.cu": ("col", "N"),
        "matvec_gemv_launcher.cu": ("row", "N"),
    }
    for name, (layout, ld) in want.items():
        _, m = _match("matvec-bandwidth", CORPUS / name, _entry(name))
        assert isinstance(m, Match), (name, m)
        assert (m.data.binding.a.layout, m.data.binding.a.ld) == (layout, ld), name
    _, m = _match("matvec-bandwidth", CORPUS / "matvec_gemv_launcher.cu", "solve")
    assert isinstance(m, Match)
    assert m.data.binding.epilogue == "alpha * {acc} + beta * {c}" and m.data.host_block == 256


@pytest.mark.parametrize("name", PRODUCT_FILES)
def test_every_corpus_product_matches_its_recipe_or_declines_with_the_expected_reason(name: str) -> None:
    arche = MANIFEST[name]["archetype"]
    _, m = _match(RECIPE[arche], CORPUS / name, _entry(name))
    if name in EXPECTED_DECLINES:
        assert not isinstance(m, Match)
        assert EXPECTED_DECLINES[name] in m.reason, m.reason
    else:
        assert isinstance(m, Match), f"{name}: {m.reason}"


def test_matmul_and_matvec_tell_each_other_apart() -> None:
    _, m = _match("matmul-tiled", CORPUS / "matvec_rowwise.cu", "gemv_rowwise")
    assert not isinstance(m, Match) and "matvec" in m.reason
    _, m = _match("matvec-bandwidth", ROOT / "samples" / "sgemm_naive.cu", "sgemm_naive")
    assert not isinstance(m, Match) and "matmul" in m.reason


@pytest.mark.parametrize("name", OTHER_FILES)
def test_non_products_are_declined_with_a_reason(name: str) -> None:
    model = parse_source((CORPUS / name).read_text(), name)
    rows = [r for r in explain(model, _entry(name)) if r.recipe in RECIPE.values()]
    assert rows
    for r in rows:
        assert not r.matched, f"{r.recipe} matched {name}: {r.binding}"
        assert len(r.reason) > 15, r.reason


def test_declines_name_what_is_wrong() -> None:
    text = (ROOT / "samples" / "sgemm_naive.cu").read_text()
    cases = {
        "acc += A[row * K + k] * B[k * N + col];": (
            "acc += A[row * K + k] * B[k * N + col]; __syncthreads();",
            "synchronises",
        ),
        "C[row * N + col] = acc;": ("C[row * N + col] = acc; C[0] = 1.0f;", "writes 2 places"),
        "for (int k = 0; k < K; ++k)": ("for (int k = 1; k < K; ++k)", "starts at 1"),
        "A[row * K + k] * B": ("A[row * K + k * k] * B", "not linear"),
    }
    for old, (new, words) in cases.items():
        assert old in text
        model = parse_source(text.replace(old, new), "x.cu")
        got = recipe("matmul-tiled").match(contexts_for(model, "sgemm_naive")[0])  # type: ignore[union-attr]
        assert not isinstance(got, Match), new
        assert words in got.reason, (new, got.reason)


# --------------------------------------------------------------------------------------------------
# Candidates: scope gate and nvcc


def _candidates(recipe_name: str, path: Path, entry: str) -> list[tuple[dict[str, Any], str, str]]:
    """(point, candidate file text, generated kernel code) for every point of the recipe on ``path``."""
    text = path.read_text()
    ctx, m = _match(recipe_name, path, entry)
    assert isinstance(m, Match), m.reason
    r = recipe(recipe_name)
    assert r is not None
    out = []
    pts = r.points(ctx, m)
    assert pts, f"{path.name}: no parameter point survived"
    for p in pts:
        rw = r.generate(ctx, m, p)
        out.append((p, splice_kernel(text, rw.kernel, rw.code, rw.launch), rw.code))
    return out


def _compile_all(path: Path, kernel: str, codes: list[str]) -> nvcc.BuildResult:
    """One nvcc run: the file plus every code under its own kernel name."""
    text = path.read_text()
    extra = [
        re.sub(rf"\b{re.escape(kernel)}(?=\s*\()", f"{kernel}__kl_point{i}", c, count=1)
        for i, c in enumerate(codes)
    ]
    full = text + "\n\n" + "\n".join(extra)
    return nvcc.build(path, full, parse_source(full, str(path)), use_cache=False)


CANDIDATE_CASES = [("matmul-tiled", ROOT / "samples" / "sgemm_naive.cu", "sgemm_naive")] + [
    (RECIPE[MANIFEST[f]["archetype"]], CORPUS / f, _entry(f))
    for f in PRODUCT_FILES
    if f not in EXPECTED_DECLINES
]


@pytest.mark.skipif(not NVCC, reason="needs nvcc")
@pytest.mark.parametrize("case", CANDIDATE_CASES, ids=[c[1].name for c in CANDIDATE_CASES])
def test_every_candidate_passes_the_scope_gate_and_compiles(case: tuple[str, Path, str]) -> None:
    recipe_name, path, entry = case
    text = path.read_text()
    model = parse_source(text, str(path))
    targets = edit_targets(model, entry)
    cands = _candidates(recipe_name, path, entry)
    for p, cand, _ in cands:
        sc = check_scope(text, cand, targets, entry=entry)
        assert sc.ok, f"{path.name} {p}: {sc.reason}"
        # The candidate becomes the next round's baseline and, applied, the user's file: its specs read back
        # without an error (the generated "// kernellsp matmul recipe: ..." comment once read as a broken spec,
        # so every tuner candidate built on the champion was refused).
        bad = [
            i.message
            for i in specmod.specs_from_source(parse_source(cand, str(path)))[1]
            if i.severity == "error"
        ]
        assert not bad, f"{path.name} {p}: {bad}"
    kernel = targets[0]
    fn = model.function(kernel)
    assert fn is not None
    if fn.template_params:
        # Renamed template kernels would have no instantiation: compile each candidate file as it is.
        for p, cand, _ in cands[:2]:
            res = nvcc.build(path, cand, parse_source(cand, str(path)), use_cache=False)
            assert res.ok, f"{path.name} {p}: {[str(x) for x in res.messages][:3]}"
        return
    res = _compile_all(path, kernel, [c for _, _, c in cands])
    assert res.ok, f"{path.name}: {[str(x) for x in res.messages if x.severity == 'error'][:3]}"
    built = {r.mangled for r in res.resources}
    for i in range(len(cands)):
        assert any(nvcc.match_kernel(mg, f"{kernel}__kl_point{i}") for mg in built), (
            f"point {i} has no ptxas report"
        )


@pytest.mark.skipif(not NVCC, reason="needs nvcc")
def test_sample_candidate_keeps_bit_exact_summation_order_in_the_source() -> None:
    """The generated inner product accumulates ``acc += a * b`` in k order (what makes it bit-identical)."""
    (_, cand, code), *_ = _candidates("matmul-tiled", ROOT / "samples" / "sgemm_naive.cu", "sgemm_naive")
    assert "kl_acc[kl_r][kl_c] += kl_fa[kl_r] * kl_fb[kl_c];" in code
    bound = specmod.entry_spec(parse_source(cand), "sgemm_naive")
    assert bound is not None and bound.spec.launch is not None
    assert bound.spec.launch.block == 256
    assert "ceil_div((M), 128) * ceil_div((N), 128)" in str(bound.spec.launch.grid)


# --------------------------------------------------------------------------------------------------
# Generator


def test_tile_problems_are_named() -> None:
    assert cg.GemmTile().problems() == []
    assert "multiple of warp tile" in cg.GemmTile(bm=96).problems()[0]
    assert any("lanes" in p for p in cg.GemmTile(wm=32, wn=32).problems())
    assert any("48 KB" in p for p in cg.GemmTile(bk=32, stages=4).problems())
    with pytest.raises(ValueError, match="BK=6"):
        cg.gemm_body(_binding(), cg.GemmTile(bk=6))


def _binding(**kw: Any) -> cg.GemmBinding:
    base: dict[str, Any] = {
        "entry": "k",
        "signature": "__global__ void k(const float* A, const float* B, float* C, int M, int N, int K)",
        "m": "M",
        "n": "N",
        "k": "K",
        "a": cg.Operand("A", "row", "K"),
        "b": cg.Operand("B", "row", "N"),
        "c": cg.Operand("C", "row", "N"),
    }
    base.update(kw)
    return cg.GemmBinding(**base)


def test_launch_bounds_inserted_or_replaced() -> None:
    assert (
        cg.launch_bounds("__global__ void k(int n)", 256, 2)
        == "__global__ __launch_bounds__(256, 2) void k(int n)"
    )
    assert cg.launch_bounds("__global__ void __launch_bounds__(64) k(int n)", 128, 0) == (
        "__global__ void __launch_bounds__(128) k(int n)"
    )


def test_generated_kernels_parse_for_every_layout_and_pipeline() -> None:
    from kernellsp.optimize.propose.recipes.matmul import TILES

    for la in ("row", "col"):
        for lb in ("row", "col"):
            for lc in ("row", "col"):
                for t in TILES.values():
                    b = _binding(
                        a=cg.Operand("A", la, "K"),
                        b=cg.Operand("B", lb, "K"),
                        c=cg.Operand("C", lc, "M"),
                        epilogue="alpha * {acc} + beta * {c}",
                        init="bias[{j}]",
                    )
                    for loop in (False, True):
                        code = cg.gemm_body(b, t, tile_loop=loop)
                        assert not parse_source(code).syntax_errors, (la, lb, lc, t)
    for lay in ("row", "col"):
        gb = gv.GemvBinding(
            "g",
            "__global__ void g(const float* A, const float* x, float* y, int M, int N)",
            "M",
            "N",
            cg.Operand("A", lay, "N"),
            "x",
            "y",
            epilogue="2.0f * {acc} + {c}",
        )
        assert not parse_source(gv.gemv_body(gb, gv.GemvTile())).syntax_errors


def test_orientation_swaps_roles_and_round_trips() -> None:
    from kernellsp.optimize.propose.recipes.matmul import oriented

    b = _binding(init="bias[{j}] + r[{i}]")
    t = oriented(b, "BA")
    assert (t.a.name, t.a.layout, t.b.name, t.b.layout, t.c.layout) == ("B", "col", "A", "col", "col")
    assert (t.m, t.n) == ("N", "M") and t.init == "bias[{i}] + r[{j}]"
    assert oriented(t, "BA") == b


def test_a_loop_start_or_step_it_cannot_read_is_quoted_in_the_decline() -> None:
    text = (ROOT / "samples" / "sgemm_naive.cu").read_text()
    for new, words in (
        ("for (int k = min(0, M); k < K; ++k)", "starts at `int k = min(0, M)`, not 0"),
        ("for (int k = 0; k < K; k += min(1, M))", "steps by `k += min(1, M)`, not 1"),
    ):
        model = parse_source(text.replace("for (int k = 0; k < K; ++k)", new), "x.cu")
        got = recipe("matmul-tiled").match(contexts_for(model, "sgemm_naive")[0])  # type: ignore[union-attr]
        assert not isinstance(got, Match) and words in got.reason, (new, got.reason)
