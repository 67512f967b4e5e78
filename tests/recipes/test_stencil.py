"""The stencil-tiled recipe on the samples and the corpus: binding, declining, scope and real nvcc."""

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

NAME = "stencil-tiled"
EXPECTED_DECLINES = {"stencil_3d_7point.cu": "3-D", "stencil_box_blur_u8.cu": "clamp"}
FILES = [("samples/conv1d.cu", "conv1d"), ("samples/stencil2d.cu", "stencil2d")] + [
    (f"tests/recipes/corpus/{f}", entry_of(f)) for f in files_of("stencil") if f not in EXPECTED_DECLINES
]


@pytest.mark.parametrize(("rel", "entry"), FILES, ids=[f[0].rsplit("/", 1)[1] for f in FILES])
def test_every_stencil_matches_and_every_candidate_passes_scope_and_nvcc(rel: str, entry: str) -> None:
    path = ROOT / rel
    cands = candidates(NAME, path, entry)
    assert scope_problems(path, entry, [t for _, _, t in cands]) == []
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    assert compile_errors([t for _, _, t in cands]) == []


def test_conv1d_halo_from_the_filter_loop_and_a_specialised_radius() -> None:
    _, m = match(NAME, ROOT / "samples" / "conv1d.cu", "conv1d")
    assert isinstance(m, Match), m
    assert m.binding["halo (main shape)"] == "x [-7, +7]"
    assert m.binding["filter sizes"] == "radius" and m.binding["filters"] == "filter"
    cands = candidates(NAME, ROOT / "samples" / "conv1d.cu", "conv1d")
    p, rw, _ = cands[0]
    assert p == {"per_thread": 4, "specialise": True, "vec": True}
    assert rw.launch is not None and rw.launch.grid == "ceil_div((N), 1024)" and rw.launch.block == 256
    # 16-byte tile loads from the aligned element before the halo (kl_o_input elements early), behind a run-time
    # alignment check of the input, element by element at the array's ends.
    assert "reinterpret_cast<const uint4*>(input + kl_g);" in rw.code and "& 15ull) == 0" in rw.code
    assert "kl_tile_input[kl_vtx + (j) + kl_hxl_input + kl_o_input]" in rw.code
    assert "__shared__ alignas(16) float kl_tile_input[1046];" in rw.code
    assert len(cands) == 3 and all(p["vec"] for p, _, _ in cands)
    assert "if (radius == 7)" in rw.code and "float kl_w_filter[15];" in rw.code
    assert "kl_w_filter[j + 7]" in rw.code  # the filter from registers, its index a constant once unrolled
    # Other radii (the spec's R = 3 and R = 0 shapes) take the runtime-radius tile or the global path.
    assert "kl_point_tiled" in rw.code and "kl_point(" in rw.code
    unspecialised = next(rw for p, rw, _ in cands if not p["specialise"])
    assert "radius == 7" not in unspecialised.code


def test_stencil2d_tiles_rows_and_columns() -> None:
    _, m = match(NAME, ROOT / "samples" / "stencil2d.cu", "stencil2d")
    assert isinstance(m, Match), m
    assert m.binding["dims"] == "2-D" and m.binding["halo (main shape)"] == "x [-1, +1] y [-1, +1]"
    _, rw, _ = candidates(NAME, ROOT / "samples" / "stencil2d.cu", "stencil2d")[0]
    assert rw.launch is not None and rw.launch.block == [32, 8]
    assert rw.launch.grid == ["ceil_div((NX), 32)", "ceil_div((NY), 64)"]
    assert "__shared__ float kl_tile_in[" in rw.code


def test_valid_convolution_behind_a_host_launcher_keeps_the_launch() -> None:
    _, m = match(NAME, CORPUS / "stencil_conv2d_valid_launcher.cu", "solve")
    assert isinstance(m, Match), m
    assert m.binding["halo (main shape)"] == "x [-0, +6] y [-0, +6]"
    for _, rw, _ in candidates(NAME, CORPUS / "stencil_conv2d_valid_launcher.cu", "solve"):
        assert rw.launch is None and "const int kl_vbx = blockDim.x;" in rw.code
        # The host's 16-wide block: a warp reads two tile rows, so the pitch is 16 (mod 32) words, not 22.
        assert "__shared__ float kl_tile_input[1056];" in rw.code and ") * 48 + kl_vtx" in rw.code


def test_mask_width_halves_are_divisions_in_the_halo() -> None:
    _, m = match(NAME, CORPUS / "stencil_conv1d_mask.cu", "convolution_1D_basic_kernel")
    assert isinstance(m, Match), m
    assert m.binding["halo (main shape)"] == "x [-4, +4]"


def test_pointwise_inputs_are_not_tiled() -> None:
    _, m = match(NAME, CORPUS / "stencil_jacobi_2d.cu", "jacobi_step")
    assert isinstance(m, Match), m
    assert m.binding["tiled"] == "u (f32)"  # f is read at the point only


def test_declines_name_what_is_wrong() -> None:
    text = (ROOT / "samples" / "stencil2d.cu").read_text()
    cases = {
        "in[idx - nx]": [("in[idx - nx * x]", "not at the point plus an offset")],
        "out[idx] = 0.2f": [("out[idx + 1] = out[idx - 1] + 0.2f", "read back")],
        "if (x >= nx || y >= ny) return;": [("", "not bounds-checked")],
    }
    for old, variants in cases.items():
        assert old in text
        for new, words in variants:
            _, m = match(NAME, ROOT / "x.cu", "stencil2d", text.replace(old, new))
            assert not isinstance(m, Match), new
            assert words in m.reason, (new, m.reason)


@pytest.mark.parametrize("name", sorted(EXPECTED_DECLINES))
def test_expected_declines(name: str) -> None:
    _, m = match(NAME, CORPUS / name, entry_of(name))
    assert not isinstance(m, Match)
    assert EXPECTED_DECLINES[name] in m.reason, m.reason


@pytest.mark.parametrize("name", sorted(f for f, e in MANIFEST.items() if e["archetype"] != "stencil"))
def test_other_archetypes_are_declined(name: str) -> None:
    _, m = match(NAME, CORPUS / name, entry_of(name))
    assert not isinstance(m, Match), f"{NAME} matched {name}: {m.binding}"
    assert len(m.reason) > 15
