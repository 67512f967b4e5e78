"""The transpose-tiled recipe on the sample and the corpus: binding, declining, scope and real nvcc."""

from __future__ import annotations

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
from kernellsp.source.ir import kernel_ir
from kernellsp.source.model import parse_source

NAME = "transpose-tiled"
FILES = [("samples/transpose_naive.cu", "transpose_naive")] + [
    (f"tests/recipes/corpus/{f}", entry_of(f)) for f in files_of("transpose")
]


@pytest.mark.parametrize(("rel", "entry"), FILES, ids=[f[0].rsplit("/", 1)[1] for f in FILES])
def test_every_transpose_matches_and_every_candidate_passes_scope_and_nvcc(rel: str, entry: str) -> None:
    path = ROOT / rel
    cands = candidates(NAME, path, entry)
    assert scope_problems(path, entry, [t for _, _, t in cands]) == []
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    assert compile_errors([t for _, _, t in cands]) == []


def test_sample_binds_coordinates_and_gets_a_tiled_launch_per_point() -> None:
    _, m = match(NAME, ROOT / "samples" / "transpose_naive.cu", "transpose_naive")
    assert isinstance(m, Match), m
    assert m.binding["input"] == "in (f32)" and m.binding["output"] == "out"
    assert m.binding["input contiguous along"] == "gid.x < cols"
    assert m.binding["output contiguous along"] == "gid.y < rows"
    cands = candidates(NAME, ROOT / "samples" / "transpose_naive.cu", "transpose_naive")
    blocks = {p["rows_per_thread"]: rw.launch.block for p, rw, _ in cands if rw.launch is not None}
    assert blocks == {4: [32, 8], 8: [32, 4], 2: [32, 16]}
    _, rw, _ = cands[0]
    assert rw.launch is not None and rw.launch.grid == ["ceil_div((COLS), 32)", "ceil_div((ROWS), 32)"]
    # The padded tile and the user's own extents (edges the tile does not divide).
    assert "kl_tile[32][33]" in rw.code and "kl_a < kl_na && kl_b < kl_nb" in rw.code


def test_one_d_launch_split_with_div_and_mod_is_the_same_transpose() -> None:
    _, m = match(NAME, CORPUS / "transpose_1d_divmod.cu", "transpose1d")
    assert isinstance(m, Match), m
    assert m.binding["input contiguous along"] == "(gid.x) % C < C"
    assert m.binding["output contiguous along"] == "(gid.x) / C < R"


def test_nchw_to_nhwc_folds_h_and_w_and_batches_n() -> None:
    _, m = match(NAME, CORPUS / "transpose_nchw_to_nhwc.cu", "nchw_to_nhwc")
    assert isinstance(m, Match), m
    t = m.data
    assert str(t.a.extent) == "H*W" and str(t.b.extent) == "C"
    assert [str(c.extent) for c in t.batch] == ["N"]
    cands = candidates(NAME, CORPUS / "transpose_nchw_to_nhwc.cu", "nchw_to_nhwc")
    launch = cands[0][1].launch
    assert launch is not None and launch.grid[2] == "min(((N)), 65535)"  # type: ignore[index]


def test_half_launcher_keeps_the_host_block_and_pads_for_two_byte_banks() -> None:
    cands = candidates(NAME, CORPUS / "transpose_half_launcher.cu", "solve")
    assert len(cands) == 1
    _, rw, _ = cands[0]
    assert rw.launch is None  # host code launches: the launch stays as written
    assert "__half kl_tile[16][18]" in rw.code  # 18 halves = 9 words: an odd number of banks


def test_declines_name_what_is_wrong() -> None:
    text = (ROOT / "samples" / "transpose_naive.cu").read_text()
    cases = {
        "out[x * rows + y] = in[y * cols + x];": [
            ("out[y * cols + x] = in[y * cols + x];", "same coordinate"),
            ("out[x * rows + y] = 2.0f * in[y * cols + x];", "not a plain copy"),
            ("out[x * rows + y] = in[y * cols + x]; out[0] = 0.0f;", "one load and one store"),
        ],
        "if (x < cols && y < rows)": [("if (x < cols && y < rows && x != 3)", "not a bounds check")],
    }
    for old, variants in cases.items():
        assert old in text
        for new, words in variants:
            _, m = match(NAME, ROOT / "x.cu", "transpose_naive", text.replace(old, new))
            assert not isinstance(m, Match), new
            assert words in m.reason, (new, m.reason)


@pytest.mark.parametrize("name", sorted(f for f, e in MANIFEST.items() if e["archetype"] != "transpose"))
def test_other_archetypes_are_declined(name: str) -> None:
    _, m = match(NAME, CORPUS / name, entry_of(name))
    assert not isinstance(m, Match), f"{NAME} matched {name}: {m.binding}"
    assert len(m.reason) > 15


def test_divmod_atoms_are_opt_in() -> None:
    """Other recipes read ``ir.poly`` without atoms: ``i / C`` must stay unknown (None) for them."""
    model = parse_source((CORPUS / "transpose_1d_divmod.cu").read_text())
    ir = kernel_ir(model, "transpose1d")
    assert ir is not None
    store = ir.stores()[0]
    assert store.index is None
    from kernellsp.optimize.propose.recipes._memshape import access_index

    got = access_index(ir, store)
    assert got is not None and {s.split("(")[0] for s in got.symbols()} == {"R", "div", "mod"}
