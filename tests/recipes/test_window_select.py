"""The window-select recipe: median filters by rank selection in registers (binding, declining, the rule, nvcc)."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest
from memcommon import (
    CORPUS,
    NVCC,
    ROOT,
    candidates,
    compile_errors,
    entry_of,
    files_of,
    match,
    scope_problems,
)

from kernellsp.optimize.propose.recipes.base import Decline, Match

NAME = "window-select"
MEDIAN = ROOT / "samples" / "median_filter.cu"
# Two more spellings in the corpus: a 2-D 3x3 bubble-sort median, and a host-launched u8 selection sort.
MEDIAN3X3 = CORPUS / "window_median3x3_f32.cu"
DESPECKLE_U8 = CORPUS / "window_despeckle_u8_launcher.cu"


def _write(tmp_path: Path, text: str, name: str = "k.cu") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_the_median_sample_binds_its_window_and_specialises_the_radius() -> None:
    _, m = match(NAME, MEDIAN, "median_filter")
    assert isinstance(m, Match), m
    assert m.binding["window"] == "float window[MAX_WINDOW] (31)"
    assert m.binding["selected"] == "window[count / 2] of count"
    assert m.binding["specialised"] == "radius == 7"
    cands = candidates(NAME, MEDIAN, "median_filter")
    assert [p for p, _, _ in cands] == [{"order": "asc"}, {"order": "desc"}]
    code = cands[0][1].code
    assert "if (radius == 7)" in code and re.search(
        r"#pragma unroll\n *for \(int j = -r; j <= r; \+\+j\)", code
    )
    assert "(window[kl_b] < window[kl_a]) || (kl_b < kl_a && window[kl_b] == window[kl_a])" in code
    # Other radii run the user's insertion sort, verbatim.
    assert "while (b >= 0 && window[b] > v)" in code.split("} else {")[-1]
    assert cands[0][1].launch is None  # the spec's launch is kept


def test_another_spelling_matches_without_specialising() -> None:
    path = MEDIAN3X3
    _, m = match(NAME, path, "median3x3")
    assert isinstance(m, Match), m
    assert m.binding["selected"] == "v[4] of k" and "specialised" not in m.binding
    cands = candidates(NAME, path, "median3x3")
    code = cands[0][1].code
    assert "if (" not in code.split("{", 1)[1].split("\n")[1]  # no specialisation branch: the window is fixed
    assert "v[b] > v[b + 1]" not in code  # the bubble sort is gone
    assert scope_problems(path, "median3x3", [t for _, _, t in cands]) == []


def test_the_count_is_the_gathers_counter_not_a_sort_passes_bound(tmp_path: Path) -> None:
    """A bubble sort whose passes run to ``k - 1``: the selection still counts all ``k`` gathered elements."""
    text = (
        MEDIAN3X3.read_text()
        .replace("for (int a = 0; a < 9; a++) {", "for (int a = 0; a < k - 1; a++) {")
        .replace("for (int b = 0; b < 8 - a; b++) {", "for (int b = 0; b < k - 1 - a; b++) {")
    )
    _, m = match(NAME, _write(tmp_path, text), "median3x3")
    assert isinstance(m, Match), m
    assert m.binding["selected"] == "v[4] of k"


def test_a_host_launched_u8_selection_sort_binds_through_its_defines() -> None:
    path = DESPECKLE_U8
    _, m = match(NAME, path, "run_despeckle")
    assert isinstance(m, Match), m
    assert (
        m.binding["window"] == "unsigned char taps[TAPS] (5)" and m.binding["selected"] == "taps[MID] of TAPS"
    )
    cands = candidates(NAME, path, "run_despeckle")
    code = cands[0][1].code
    assert "kl_selected" in code and "if (taps[b] < taps[lo])" not in code
    assert scope_problems(path, "run_despeckle", [t for _, _, t in cands]) == []


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_the_rank_rule_picks_the_element_a_stable_sort_places(order: str) -> None:
    """The generated comparison, mirrored: the element of rank k is the k-th of a stable sort, bit for bit
    (ties, signed zeros and repeated values included)."""
    rng = random.Random(7)
    for _ in range(400):
        n = rng.randint(1, 31)
        w = [rng.choice([0.0, -0.0, 1.5, -2.0, rng.uniform(-1, 1)]) for _ in range(n)]
        k = rng.randrange(n)

        def before(b: int, a: int, w: list[float] = w) -> bool:
            return (w[b] < w[a]) if order == "asc" else (w[b] > w[a])

        ranks = [sum(before(b, a) or (b < a and w[b] == w[a]) for b in range(n)) for a in range(n)]
        assert sorted(ranks) == list(range(n))  # a permutation: exactly one element has rank k
        got = w[ranks.index(k)]
        # Python's sort is stable, like the insertion sort it replaces (descending: ties keep their order).
        want = (
            sorted(w)[k] if order == "asc" else [w[i] for i in sorted(range(n), key=lambda i: (-w[i], i))][k]
        )
        assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want), (w, k)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("window[b + 1] = v;", "window[b + 1] = v * 2.0f;"),  # stores a value that is no element
        ("float v = window[a];", "float v = window[a] + 1.0f;"),  # a temporary that holds no element
        ("--b;", "--b; n--;"),  # changes a variable of the kernel
        ("out[i] = window[count / 2];", "out[i] = window[(int)window[0] & 3];"),  # index from the contents
        ("int b = a - 1;", "int b = a - 1; out[a] = 0.0f;"),  # writes global memory
    ],
)
def test_declines_a_region_that_does_more_than_permute(tmp_path: Path, old: str, new: str) -> None:
    text = MEDIAN.read_text()
    assert old in text
    _, m = match(NAME, _write(tmp_path, text.replace(old, new, 1)), "median_filter")
    assert isinstance(m, Decline), m


def test_declines_when_the_number_of_gathered_elements_is_not_known(tmp_path: Path) -> None:
    text = MEDIAN.read_text().replace(
        "window[count++] = in[idx];", "window[count] = in[idx];\n        count += 1;"
    )
    _, m = match(NAME, _write(tmp_path, text), "median_filter")
    assert isinstance(m, Decline) and "how many elements the gather leaves in window" in m.reason, m


def test_declines_kernels_without_a_window() -> None:
    for rel, entry in (("samples/vector_add.cu", "vector_add"), ("samples/conv1d.cu", "conv1d")):
        _, m = match(NAME, ROOT / rel, entry)
        assert isinstance(m, Decline) and "local array" in m.reason, (rel, m)


def test_every_candidate_compiles() -> None:
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    texts = [t for _, _, t in candidates(NAME, MEDIAN, "median_filter")]
    for f in files_of("window"):
        texts += [t for _, _, t in candidates(NAME, CORPUS / f, entry_of(f))]
    assert len(texts) >= 6 and compile_errors(texts) == []
