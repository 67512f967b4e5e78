"""Approximate and reduced-precision math in the candidate's PTX (kernellsp.optimize.verify.precision_ops)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernellsp.optimize.verify import precision_ops
from kernellsp.optimize.verify.verdict import VERDICTS

REPO = Path(__file__).resolve().parents[2]
ADV = REPO / "tests" / "adversarial"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


def _ptx(tmp_path: Path, src: str, name: str = "k.cu") -> str:
    f = tmp_path / name
    f.write_text(src)
    out = tmp_path / (name + ".ptx")
    subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-o", str(out), str(f)], check=True, capture_output=True)
    return out.read_text()


def _one(expr: str, head: str = "") -> str:
    return (
        head + "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
        "__global__ void k(const float* a, float* o) {\n"
        f"  float x = a[threadIdx.x], y = a[threadIdx.x + 32];\n  o[threadIdx.x] = {expr};\n}}\n"
    )


@needs_nvcc
@pytest.mark.parametrize(
    ("expr", "coarse", "fine"),
    [
        ("tanhf(x)", [], ["ex2.approx.ftz", "rcp.approx.ftz"]),  # the math library's own building blocks
        ("__tanhf(x)", ["tanh.approx"], []),
        ("__sinf(x)", ["sin.approx"], []),
        ("__logf(x)", ["lg2.approx"], []),
        ("__fdividef(x, y)", ["div.approx"], []),
        ("rsqrtf(x)", [], ["rsqrt.approx"]),
        ("__expf(x)", [], ["ex2.approx"]),
        ("__half2float(__float2half(x))", ["f32 -> f16"], []),
        ("__bfloat162float(__float2bfloat16(x))", ["f32 -> bf16"], []),
        ("x / y", [], []),
    ],
)
def test_real_ptx_kinds_against_an_ieee_baseline(
    tmp_path: Path, expr: str, coarse: list[str], fine: list[str]
) -> None:
    base = _ptx(tmp_path, _one("x + y"), "base.cu")
    added = precision_ops.added_kinds(base, _ptx(tmp_path, _one(expr)))
    assert [k.name for k in added if k.coarse] == coarse
    assert [k.name for k in added if not k.coarse] == fine


@needs_nvcc
def test_a_kind_the_baseline_has_is_not_added(tmp_path: Path) -> None:
    """The user's own __fdividef or f16 conversion is theirs: a candidate keeping it adds nothing."""
    base = _ptx(tmp_path, _one("__fdividef(x, y) + __half2float(__float2half(y))"), "base.cu")
    cand = _ptx(tmp_path, _one("__half2float(__float2half(x)) + __fdividef(y, x)"))
    assert precision_ops.added_kinds(base, cand) == []


def test_tensor_core_products_and_conversions_by_their_types() -> None:
    ptx = "\n".join(
        [
            "\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1}, {%r1}, {%r2}, {%f2};",
            "\twmma.mma.sync.aligned.row.col.m16n16k16.f16.f16 {%r1}, {%r2}, {%r3}, {%r4};",
            "\tmma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1}, {%r1}, {%r2}, {%f2};",
            "\twmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r1}, [%rd1];",
            "\tcvt.rna.tf32.f32 %r5, %f5;",
            "\tcvt.rn.f16x2.f32 %r6, %f6, %f7;",
            "\tcvt.f32.f16 %f8, %rs1;",
            "\t@%p1 add.ftz.f32 %f9, %f9, %f10;",
            "// tanh.approx.f32 in a comment is not an instruction",
        ]
    )
    kinds = precision_ops.math_kinds(ptx)
    assert sorted(kinds) == [
        "add.ftz",
        "f32 -> f16",
        "f32 -> tf32",
        "tensor-core TF32",
        "tensor-core accumulation in f16",
    ]
    assert [n for n, k in sorted(kinds.items()) if not k.coarse] == ["add.ftz"]


@needs_nvcc
def test_verdict_strict_refuses_fast_allows_and_both_name_it(tmp_path: Path) -> None:
    base = _ptx(tmp_path, (ADV / "baselines" / "gelu_rows.cu").read_text(), "base.cu")
    cand = _ptx(tmp_path, (ADV / "gelu_rows_tanh_approx_asm.cu").read_text())
    details: dict[str, object] = {}
    v = precision_ops.verdict(base, cand, "gelu_rows", "strict", details)
    assert v is not None and v.kind == "precision_downgrade" and v.kind in VERDICTS
    assert "tanh.approx" in v.message and 'precision = "fast"' in v.message
    assert details["approximate_math"] == [
        {"kind": "tanh.approx", "coarse": True, "what": "hardware tanh (relative error up to 2^-11)"}
    ]
    fast: dict[str, object] = {}
    assert precision_ops.verdict(base, cand, "gelu_rows", "fast", fast) is None
    assert fast["approximate_math"] == details["approximate_math"]
    honest = _ptx(tmp_path, (ADV / "gelu_rows_coalesced.cu").read_text(), "honest.cu")
    assert precision_ops.verdict(base, honest, "gelu_rows", "strict", {}) is None
