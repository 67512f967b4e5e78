"""Spelling variants of every recipe-corpus file bind what the original binds (tests/recipes/spelling_variants.py).

The variants are mechanical rewrites a user might have written instead (braces, ``while`` for
``for``, an index macro with a cast, commuted operands, index temporaries, the body in a
``__device__`` helper, cooperative-groups barriers). The canonicalisation passes make the recipes
see one normal form; this test fails when a recipe depends on a spelling again.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import spelling_variants as sv

CORPUS = sv.corpus()


@pytest.mark.parametrize("variant", sorted(sv.VARIANTS))
def test_each_variant_binds_as_the_original(variant: str) -> None:
    make = sv.VARIANTS[variant]
    changed, differences = 0, []
    for name, entry in sorted(CORPUS.items()):
        text = (sv.CORPUS / name).read_text()
        new = make(text)
        if new == text:
            continue
        changed += 1
        problem = sv.difference(text, new, entry)
        if problem is not None:
            differences.append(f"{name}: {problem}")
    # Every variant rewrites a good part of the corpus: the comparison is not vacuous.
    assert changed >= 5, f"{variant} rewrote only {changed} files"
    assert not differences, "\n".join(differences)


def test_the_generator_writes_what_it_says() -> None:
    src = """__global__ void k(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i + 1] = a[i] * 2.0f;
    for (int k = 0; k < 4; ++k) __syncthreads();
}
"""
    assert "if (i < n) { b[i + 1] = a[i] * 2.0f; }" in sv.braces(src)
    assert "{ int k = 0; while (k < 4) { __syncthreads(); ++k; } }" in sv.while_for(src)
    assert "int i = GID_X;" in sv.macro_index(src)
    commuted = sv.commute(src)
    assert "int i = threadIdx.x + (blockDim.x * blockIdx.x);" in commuted
    assert "b[1 + i] = 2.0f * a[i];" in commuted
    assert "const auto o_0 = i + 1;" in sv.index_temp(
        "__global__ void k(float* b, int i) {\n    b[i + 1] = 0;\n}\n"
    )
    helper = sv.helper(src)
    assert "__device__ __forceinline__ void k_body(const float* a, float* b, int n) {" in helper
    assert "k_body(a, b, n);" in helper
    assert "cg::this_thread_block().sync()" in sv.cg_sync(src)
    # The comparison ignores line numbers and term order, nothing else.
    assert sv._binding_value("lines 3-9 (replaced)") == sv._binding_value("lines 30-38 (replaced)")
    assert sv._binding_value("alpha * acc + beta * c") == sv._binding_value("beta * c + (acc * alpha)")
    assert sv._binding_value("A (row-major)") != sv._binding_value("B (row-major)")
