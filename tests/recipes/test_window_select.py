"""The window-select recipe: median filters by rank selection in registers (binding, declining, the rule, nvcc)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from memcommon import NVCC, ROOT, candidates, compile_errors, match, scope_problems

from kernellsp.optimize.propose.recipes.base import Decline, Match

NAME = "window-select"
MEDIAN = ROOT / "samples" / "median_filter.cu"

# Another spelling: a 3x3 median on a 2-D launch, a fixed-size window filled by two nested loops with
# an index counter, a bubble sort through a temporary, the middle element read by a constant.
MEDIAN3X3 = """\
#include <cuda_runtime.h>
/* kernellsp
sizes = { W = 1024, H = 768 }
launch = { grid = ["ceil_div(W, 16)", "ceil_div(H, 16)"], block = [16, 16] }
shapes = [{ W = 5, H = 3 }]
[args]
img = { dtype = "f32", dir = "in", count = "W * H" }
res = { dtype = "f32", dir = "out", count = "W * H" }
width = { value = "W" }
height = { value = "H" }
*/
__global__ void median3x3(const float* img, float* res, int width, int height)
{
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    float v[9];
    int k = 0;
    for (int dy = -1; dy <= 1; dy++) {
        for (int dx = -1; dx <= 1; dx++) {
            int yy = min(max((int)y + dy, 0), height - 1);
            int xx = min(max((int)x + dx, 0), width - 1);
            v[k++] = img[yy * width + xx];
        }
    }
    for (int a = 0; a < 9; a++) {
        for (int b = 0; b < 8 - a; b++) {
            if (v[b] > v[b + 1]) {
                float t = v[b];
                v[b] = v[b + 1];
                v[b + 1] = t;
            }
        }
    }
    res[y * width + x] = v[4];
}
"""


# A third spelling: u8 pixels behind a host launcher, the size first, a size_t index, a 5-wide window gathered
# with a plain index, a selection sort (swap through a temporary), the middle read through a #define.
DESPECKLE_U8 = """\
#include <cuda_runtime.h>
#define TAPS 5
#define MID (TAPS / 2)
__global__ void despeckle(size_t len, unsigned char* dst, const unsigned char* src)
{
    size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= len) return;
    unsigned char taps[TAPS];
    for (int t = 0; t < TAPS; t++) {
        long q = (long)p + t - MID;
        taps[t] = src[q < 0 ? 0 : (q >= (long)len ? (long)len - 1 : q)];
    }
    for (int a = 0; a < TAPS - 1; a++) {
        int lo = a;
        for (int b = a + 1; b < TAPS; b++) {
            if (taps[b] < taps[lo]) lo = b;
        }
        unsigned char t = taps[a];
        taps[a] = taps[lo];
        taps[lo] = t;
    }
    dst[p] = taps[MID];
}
/* kernellsp
sizes = { N = 1048576 }
shapes = [{ N = 7 }, { N = 1 }]
[args]
n = { value = "N" }
out = { dtype = "u8", dir = "out", count = "N" }
in = { dtype = "u8", dir = "in", count = "N" }
*/
extern "C" void run_despeckle(size_t n, unsigned char* out, const unsigned char* in)
{
    despeckle<<<(unsigned)((n + 127) / 128), 128>>>(n, out, in);
}
"""


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
    assert "if (radius == 7)" in code and "#pragma unroll\n        for (int j = -r; j <= r; ++j)" in code
    assert "(window[kl_b] < window[kl_a]) || (kl_b < kl_a && window[kl_b] == window[kl_a])" in code
    # Other radii run the user's insertion sort, verbatim.
    assert "while (b >= 0 && window[b] > v)" in code.split("} else {")[-1]
    assert cands[0][1].launch is None  # the spec's launch is kept


def test_another_spelling_matches_without_specialising(tmp_path: Path) -> None:
    path = _write(tmp_path, MEDIAN3X3)
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
    text = MEDIAN3X3.replace("for (int a = 0; a < 9; a++) {", "for (int a = 0; a < k - 1; a++) {").replace(
        "for (int b = 0; b < 8 - a; b++) {", "for (int b = 0; b < k - 1 - a; b++) {"
    )
    _, m = match(NAME, _write(tmp_path, text), "median3x3")
    assert isinstance(m, Match), m
    assert m.binding["selected"] == "v[4] of k"


def test_a_host_launched_u8_selection_sort_binds_through_its_defines(tmp_path: Path) -> None:
    path = _write(tmp_path, DESPECKLE_U8)
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


def test_every_candidate_compiles(tmp_path: Path) -> None:
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    texts = [t for _, _, t in candidates(NAME, MEDIAN, "median_filter")]
    texts += [t for _, _, t in candidates(NAME, _write(tmp_path, MEDIAN3X3), "median3x3")]
    texts += [t for _, _, t in candidates(NAME, _write(tmp_path, DESPECKLE_U8, "d.cu"), "run_despeckle")]
    assert compile_errors(texts) == []
