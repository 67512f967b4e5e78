"""The pool runner on a real GPU: a one-GPU local pool gives the local runner's verdicts (issue 16).

``pool.scheduler = "local"`` starts dask-cuda's LocalCUDACluster when it is installed, otherwise distributed's
own cluster with one worker pinned by CUDA_VISIBLE_DEVICES. The same candidates, the same run seed (the same
inputs), the options of an optimize round: the verdict kinds must agree, the pool's verdict must come from the
worker's GPU (the same one, on a one-GPU host) and carry its raw timing samples. The benchmark with the added
latency per candidate is tests/bench/bench_pool.py (tests/bench/results/pool-h100.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.common import SAMPLES_DIR
from helpers.gpuinfo import local_gpu_name

from kernellsp.optimize.verify.gate import VerifyOptions, verify
from kernellsp.run.runner import LocalRunner

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(300)]
distributed = pytest.importorskip("distributed")
ADVERSARIAL = Path(__file__).resolve().parents[1] / "adversarial"


@pytest.fixture(scope="module")
def pool_runner() -> Iterator[object]:
    if not local_gpu_name():
        pytest.skip("needs an NVIDIA GPU")
    from kernellsp.run.pool import Pool

    pool = Pool("local", connect_timeout_s=120)
    try:
        yield pool.runner()
    finally:
        pool.close()


@pytest.mark.parametrize(
    ("sample", "candidate", "expected"),
    [
        ("vector_add.cu", "vector_add_skip_tail.cu", "unwritten_output"),
        ("saxpy_strided.cu", "saxpy_coalesced.cu", "accepted"),
    ],
)
def test_a_one_gpu_local_pool_gives_the_local_runners_verdict(
    pool_runner: object, sample: str, candidate: str, expected: str
) -> None:
    path = SAMPLES_DIR / sample
    baseline, cand = path.read_text(), (ADVERSARIAL / candidate).read_text()
    entry = path.stem
    opts = dataclasses.replace(VerifyOptions(), seeds=1, sanitize=False, run_seed=20261124)
    local = verify(path, baseline, cand, entry, LocalRunner(), opts)
    pooled = verify(path, baseline, cand, entry, pool_runner, opts)  # type: ignore[arg-type]
    assert local.kind == pooled.kind == expected, (local.message, pooled.message)
    assert pooled.details["run_seed"] == local.details["run_seed"] == 20261124
    assert pooled.environment["gpu"] == local_gpu_name() and pooled.environment["pool"]["worker"].startswith(
        "tcp://"
    )
    if expected == "accepted":
        assert pooled.timings["rounds"]["cand"] and pooled.stats and pooled.stats["ci_low"] > 1.02
