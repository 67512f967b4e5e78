"""The rowreduce-warp-block recipe on the samples and the corpus: binding, declining, scope and real nvcc."""

from __future__ import annotations

from pathlib import Path

import pytest
from memcommon import (
    CORPUS,
    MANIFEST,
    NVCC,
    ROOT,
    candidates,
    compile_errors,
    entry_of,
    files_of,
    match,
    scope_problems,
)

from kernellsp.optimize.propose.recipes.base import Match

NAME = "rowreduce-warp-block"
#: Corpus row reductions the recipe declines on purpose, with the words the reason must contain.
EXPECTED_DECLINES = {"rowreduce_middle_dim.cu": "stride C"}
#: Files of other archetypes that are row reductions too (a row-wise dot product is one).
ALSO_ROWS = {"matvec_rowwise.cu", "matvec_gemv_launcher.cu"}
FILES = [("samples/softmax_row.cu", "softmax_row"), ("samples/layernorm.cu", "layernorm")] + [
    (f"tests/recipes/corpus/{f}", entry_of(f)) for f in files_of("rowreduce") if f not in EXPECTED_DECLINES
]


@pytest.mark.parametrize(("rel", "entry"), FILES, ids=[f[0].rsplit("/", 1)[1] for f in FILES])
def test_every_row_reduction_matches_and_every_candidate_passes_scope_and_nvcc(rel: str, entry: str) -> None:
    path = ROOT / rel
    cands = candidates(NAME, path, entry)
    assert scope_problems(path, entry, [t for _, _, t in cands]) == []
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    assert compile_errors([t for _, _, t in cands]) == []


def test_softmax_sample_warp_per_row_with_the_row_in_registers_and_float_literals() -> None:
    _, m = match(NAME, ROOT / "samples" / "softmax_row.cu", "softmax_row")
    assert isinstance(m, Match), m
    assert m.binding["form"] == "one thread per row"
    assert m.binding["reductions"] == "row_max (max), sum (sum)"
    assert m.binding["cached rows"] == "x (float)" and m.binding["passes"] == "3"
    cands = candidates(NAME, ROOT / "samples" / "softmax_row.cu", "softmax_row")
    p, rw, _ = cands[0]
    assert p == {"layout": "warp", "threads": 256, "vec": 1}  # 1024 columns: a warp per row
    assert rw.launch is not None and rw.launch.grid == "ceil_div((ROWS), 8)" and rw.launch.block == 256
    assert "kl_warp_max_float" in rw.code and "kl_warp_sum_float" in rw.code
    assert "if ((long long)(cols) <= 1024)" in rw.code  # the cached path; longer rows stream
    assert "(1.0f / sum)" in rw.code and "(1.0 / sum)" not in rw.code  # no fp64 left in the loop
    # The max loop starts at 1 with the first element as its start value: kept, then combined.
    assert "if (j < (1)) continue;" in rw.code and "kl_init_row_max" in rw.code


def test_layernorm_sample_block_per_row_trees_are_removed() -> None:
    _, m = match(NAME, ROOT / "samples" / "layernorm.cu", "layernorm")
    assert isinstance(m, Match), m
    assert m.binding["form"] == "one block per row"
    assert m.binding["shared trees removed"] == "partial, partial"
    for _, rw, _ in candidates(NAME, ROOT / "samples" / "layernorm.cu", "layernorm"):
        assert "partial" not in rw.code.split("{", 1)[1] or "kl_part" in rw.code
        assert "__shared__ float partial" not in rw.code
        assert "1e-5f" in rw.code


def test_long_rows_get_a_block_per_row_and_short_ones_a_warp() -> None:
    pts = [p for p, _, _ in candidates(NAME, CORPUS / "rowreduce_rmsnorm_block_f32.cu", "rmsnorm_kernel")]
    assert all(p["layout"] == "block" for p in pts)  # 4096 columns, no row count in the kernel
    pts = [p for p, _, _ in candidates(NAME, CORPUS / "rowreduce_row_sum.cu", "row_sum")]
    assert pts[0]["layout"] == "warp"


def test_row_index_on_the_y_axis_is_remapped() -> None:
    cands = candidates(NAME, CORPUS / "rowreduce_row_max.cu", "rowmax_kernel")
    _, rw, _ = cands[0]
    assert "kl_vbid * kl_vbdim + kl_vtid" in rw.code or "kl_vtid" in rw.code
    assert rw.launch is not None and isinstance(rw.launch.grid, str)  # a 1-D grid over rows


def test_host_launcher_relaunches_a_block_per_row_first_then_keeps_the_launch() -> None:
    path = CORPUS / "rowreduce_softmax_launcher.cu"
    _, m = match(NAME, path, "solve")
    assert isinstance(m, Match) and m.binding["launch"].startswith(
        "a block per row through the launcher's launch (grid N)"
    )
    cands = candidates(NAME, path, "solve")
    # First: the launcher's grid becomes the row count (its own argument N), a block of 128 threads per row
    # (rows of 1,024 at the main shape); nothing else of the host code changes.
    p, rw, text = cands[0]
    assert p["layout"] == "relaunch" and rw.host_config == ("N", "128") and rw.launch is None
    assert "softmax_rows<<<N, 128>>>(input, output, N, D);" in text
    assert "int blocks = (N + threads - 1) / threads;" in text
    assert "a block of 128 threads per row" in rw.code and "kl_block_sum_float" in rw.code
    # Then the host's own launch: each warp runs the 32 rows of its lanes.
    for p, rw, text in cands[1:]:
        assert p["layout"] == "host" and rw.launch is None and rw.host_config is None
        assert "for (int kl_k = 0; kl_k < 32; ++kl_k)" in rw.code
        assert "softmax_rows<<<blocks, threads>>>" in text
    assert scope_problems(path, "solve", [t for _, _, t in cands]) == []
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    assert compile_errors([cands[0][2]]) == []


def test_bf16_rows_accumulate_in_the_users_float() -> None:
    _, rw, _ = candidates(NAME, CORPUS / "rowreduce_rmsnorm_bf16.cu", "rmsnorm_bf16")[0]
    assert "__nv_bfloat16 kl_row_x[" in rw.code and "kl_warp_sum_float" in rw.code


def test_declines_name_what_is_wrong() -> None:
    text = (ROOT / "samples" / "softmax_row.cu").read_text()
    cases = {
        "sum += expf(x[row * cols + j] - row_max);": [
            ("sum += expf(x[row * cols + j] - row_max); row_max = sum;", "carries state"),
            ("sum += expf(x[row * cols + 2 * j] - row_max);", "stride"),
        ],
        "for (int j = 1; j < cols; ++j) {": [("for (int j = 1; j < cols - 1; ++j) {", "different lengths")],
        "if (row >= rows) return;": [("", "not bounds-checked")],
    }
    for old, variants in cases.items():
        assert old in text
        for new, words in variants:
            _, m = match(NAME, ROOT / "x.cu", "softmax_row", text.replace(old, new))
            assert not isinstance(m, Match), new
            assert words in m.reason, (new, m.reason)


@pytest.mark.parametrize("name", sorted(EXPECTED_DECLINES))
def test_expected_declines(name: str) -> None:
    _, m = match(NAME, CORPUS / name, entry_of(name))
    assert not isinstance(m, Match)
    assert EXPECTED_DECLINES[name] in m.reason, m.reason


@pytest.mark.parametrize(
    "name", sorted(f for f, e in MANIFEST.items() if e["archetype"] != "rowreduce" and f not in ALSO_ROWS)
)
def test_other_archetypes_are_declined(name: str) -> None:
    _, m = match(NAME, CORPUS / name, entry_of(name))
    assert not isinstance(m, Match), f"{NAME} matched {name}: {m.binding}"
    assert len(m.reason) > 15


def test_layernorm_column_vectors_load_with_the_row_before_the_first_reduction() -> None:
    _, m = match(NAME, ROOT / "samples" / "layernorm.cu", "layernorm")
    assert isinstance(m, Match), m
    assert m.binding["column vectors"] == "gamma (float), beta (float)"
    by_cols = {
        p.get("columns", "l1"): rw.code
        for p, rw, _ in candidates(NAME, ROOT / "samples" / "layernorm.cu", "layernorm")
    }
    reg, l1 = by_cols["registers"], by_cols["l1"]
    # Loaded up front (before the mean's all-reduce), and read from registers in the normalising pass.
    assert reg.index("kl_row_gamma[") < reg.index("kl_block_sum_float(s)")
    assert "* kl_row_gamma[" in reg and "+ kl_row_beta[" in reg
    assert "kl_row_gamma" not in l1 and "gamma[j]" in l1


def _column_vectors_of_layernorm_with(tmp_path: Path, old: str, new: str) -> str:
    """The "column vectors" binding of the layernorm sample with ``old`` replaced by ``new``."""
    src = (ROOT / "samples" / "layernorm.cu").read_text()
    assert old in src
    path = tmp_path / "layernorm_variant.cu"
    path.write_text(src.replace(old, new))
    _, m = match(NAME, path, "layernorm")
    assert isinstance(m, Match), m
    return m.binding["column vectors"]


def test_a_vector_read_at_two_offsets_stays_in_l1(tmp_path: Path) -> None:
    # gamma read at two offsets (j and cols + j: one register copy cannot stand for both); beta still is.
    got = _column_vectors_of_layernorm_with(
        tmp_path, "* gamma[j] + beta[j]", "* (gamma[j] + gamma[cols + j]) + beta[j]"
    )
    assert got == "beta (float)"


def test_a_vector_read_under_a_condition_in_the_loop_stays_in_l1(tmp_path: Path) -> None:
    # gamma only read for the first half of the row: it may hold fewer elements than the row, so it is never
    # loaded ahead for the whole row; beta still is.
    got = _column_vectors_of_layernorm_with(
        tmp_path,
        "yr[j] = (xr[j] - mean) * inv_std * gamma[j] + beta[j];",
        "float g = 1.0f;\n        if (j < cols / 2) g = gamma[j];\n        yr[j] = (xr[j] - mean) * inv_std * g + beta[j];",
    )
    assert got == "beta (float)"
