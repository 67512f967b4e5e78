"""Paths and markers shared by the test modules, whatever folder of ``tests/`` they live in."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernellsp.build import toolchain

#: The repository root.
REPO = Path(__file__).resolve().parents[2]
#: ``tests/``: the shared fixtures (``fixtures/``), the adversarial corpus, the recipe corpus.
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
SAMPLES_DIR = REPO / "samples"

requires_nvcc = pytest.mark.skipif(
    toolchain.find_tool("nvcc") is None, reason="nvcc (CUDA toolkit) is not installed"
)
