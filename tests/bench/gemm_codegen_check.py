"""Standalone GPU check of the matrix-product code generator (no optimize loop, no harness).

Run on a GPU host from the repository root::

    python3 tests/bench/gemm_codegen_check.py [--out DIR] [--size 4096] [--quick]

It generates kernels with :mod:`kernellsp.optimize.propose.recipes._gemm_codegen` for every layout
(A/B/C row- or column-major), with and without alpha/beta, batched, and for several tile
configurations; builds them with nvcc into one shared library (extern "C" launchers called through
ctypes on PyTorch's buffers); checks each against a float64 torch reference on odd shapes (poisoned
outputs, so an unwritten element fails) and against the naive kernel bit for bit; then times, in the
same process, cuBLAS fp32 (torch.matmul with TF32 off), the naive sample kernel and every generated
variant at SIZE^3, and the matrix-vector kernels against a device-to-device copy. Prints a table and
writes gemm-codegen-<gpu>.md/json under --out (default tests/bench/results).

This is the generator's own check; the end-to-end claim (a verified rewrite of samples/sgemm_naive.cu
through ``kernellsp optimize``) is bench_recipes' job.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.gpuinfo import gpu_slug, local_gpu_name  # noqa: E402

from kernellsp.optimize.propose.recipes import _gemm_codegen as _cg  # noqa: E402
from kernellsp.optimize.propose.recipes import _gemv_codegen as _gv  # noqa: E402

GemmBinding, GemmTile, GemvBinding, GemvTile, Operand = (
    _cg.GemmBinding,
    _cg.GemmTile,
    _gv.GemvBinding,
    _gv.GemvTile,
    _cg.Operand,
)
gemm_body, gemv_body = _cg.gemm_body, _gv.gemv_body

#: One signature for every GEMM variant, so one launcher type calls them all.
GEMM_PARAMS = (
    "const float* A, const float* B, float* C, int M, int N, int K, float alpha, float beta, int batch"
)
GEMV_PARAMS = "const float* A, const float* x, float* y, int M, int N, float alpha, float beta"

NAIVE = """
__global__ void naive_sgemm(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}
__global__ void naive_gemv(const float* A, const float* x, float* y, int M, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M) { float s = 0.0f; for (int j = 0; j < N; ++j) s += A[(long long)i * N + j] * x[j]; y[i] = s; }
}
extern "C" int launch_naive_sgemm(const float* A, const float* B, float* C, int M, int N, int K) {
    naive_sgemm<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16)>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
extern "C" int launch_naive_gemv(const float* A, const float* x, float* y, int M, int N) {
    naive_gemv<<<(M + 255) / 256, 256>>>(A, x, y, M, N);
    return (int)cudaGetLastError();
}
"""


def ld(which: str, layout: str) -> str:
    # A is M x K, B is K x N, C is M x N; the leading dimension is the other extent.
    return {
        ("A", "row"): "K",
        ("A", "col"): "M",
        ("B", "row"): "N",
        ("B", "col"): "K",
        ("C", "row"): "N",
        ("C", "col"): "M",
    }[(which, layout)]


def gemm_variants(quick: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    base = GemmTile()
    tiles = {
        "t128x128k8mb2": base,
        "t128x128k8mb1": replace(base, min_blocks=1),
        "t128x128k16mb1": replace(base, bk=16, min_blocks=1),
        "t128x128k16mb2": replace(base, bk=16, min_blocks=2),
        "t128x128k8w32x64": replace(base, wm=32, wn=64),
        "t128x128k8g1": replace(base, group=1),
        "t128x64k8mb2": replace(base, bn=64, wm=64, wn=32, min_blocks=2),
        "t64x128k8mb2": replace(base, bm=64, wm=32, wn=64, min_blocks=2),
        "t128x128k16w32x64mb1": replace(base, bk=16, wm=32, wn=64, min_blocks=1),
        "t128x128k8s3mb2": replace(base, stages=3),
        "t128x128k8s4mb2": replace(base, stages=4),
        "t128x128k8s3mb1": replace(base, stages=3, min_blocks=1),
        "t128x128k16s2mb2": replace(base, bk=16, stages=2),
        "t128x128k16s2mb1": replace(base, bk=16, stages=2, min_blocks=1),
        "t128x64k16s3mb2": replace(base, bn=64, bk=16, stages=3),
    }
    if quick:
        tiles = {k: tiles[k] for k in list(tiles)[:2]}
    for tname, tile in tiles.items():
        out.append(
            {
                "name": f"rrr_{tname}",
                "layouts": ("row", "row", "row"),
                "epi": "{acc}",
                "batch": False,
                "tile": tile,
                "perf": True,
            }
        )
    # Every layout through both pipelines (register prefetch, cp.async): their edge paths differ.
    for pipe, best in (("regs", tiles["t128x128k8mb2"]), ("s3", replace(base, stages=3))):
        for lay in (
            ("col", "row", "row"),
            ("row", "col", "row"),
            ("col", "col", "row"),
            ("row", "row", "col"),
            ("col", "col", "col"),
        ):
            out.append(
                {
                    "name": "".join(x[0] for x in lay) + "_" + pipe,
                    "layouts": lay,
                    "epi": "{acc}",
                    "batch": False,
                    "tile": best,
                    "perf": True,
                }
            )
        out.append(
            {
                "name": "rrr_alphabeta_" + pipe,
                "layouts": ("row", "row", "row"),
                "epi": "alpha * {acc} + beta * {c}",
                "batch": False,
                "tile": best,
                "perf": True,
            }
        )
        out.append(
            {
                "name": "rrr_batched_" + pipe,
                "layouts": ("row", "row", "row"),
                "epi": "{acc}",
                "batch": True,
                "tile": best,
                "perf": False,
            }
        )
    return out


def gemm_source(v: dict[str, Any]) -> str:
    la, lb, lc = v["layouts"]
    bs = {"A": "(long long)M * K", "B": "(long long)K * N", "C": "(long long)M * N"} if v["batch"] else {}
    b = GemmBinding(
        entry=v["name"],
        signature=f"__global__ void {v['name']}({GEMM_PARAMS})",
        m="M",
        n="N",
        k="K",
        a=Operand("A", la, ld("A", la), batch_stride=bs.get("A", "0")),
        b=Operand("B", lb, ld("B", lb), batch_stride=bs.get("B", "0")),
        c=Operand("C", lc, ld("C", lc), batch_stride=bs.get("C", "0")),
        epilogue=v["epi"],
        batch="batch" if v["batch"] else None,
    )
    t: Any = v["tile"]
    code = gemm_body(b, t)
    nb = "batch" if v["batch"] else "1"
    code += (
        f'extern "C" int launch_{v["name"]}({GEMM_PARAMS}) {{\n'
        f"    unsigned tiles = ((M + {t.bm - 1}) / {t.bm}) * ((N + {t.bn - 1}) / {t.bn}) * {nb};\n"
        f"    {v['name']}<<<tiles, {t.threads}>>>(A, B, C, M, N, K, alpha, beta, batch);\n"
        f"    return (int)cudaGetLastError();\n}}\n"
    )
    return code


def gemv_variants() -> list[dict[str, Any]]:
    return [
        {"name": "gemv_row_w8u4", "layout": "row", "tile": GemvTile(warps=8, unroll=4), "epi": "{acc}"},
        {"name": "gemv_row_w4u8", "layout": "row", "tile": GemvTile(warps=4, unroll=8), "epi": "{acc}"},
        {"name": "gemv_row_ab", "layout": "row", "tile": GemvTile(), "epi": "alpha * {acc} + beta * {c}"},
        {
            "name": "gemv_col_c32s32",
            "layout": "col",
            "tile": GemvTile(cols_per_block=32, splits=32),
            "epi": "{acc}",
        },
        {
            "name": "gemv_col_c64s16",
            "layout": "col",
            "tile": GemvTile(cols_per_block=64, splits=16),
            "epi": "{acc}",
        },
        {
            "name": "gemv_col_c128s8",
            "layout": "col",
            "tile": GemvTile(cols_per_block=128, splits=8),
            "epi": "{acc}",
        },
        {"name": "gemv_col_ab", "layout": "col", "tile": GemvTile(), "epi": "alpha * {acc} + beta * {c}"},
    ]


def gemv_source(v: dict[str, Any]) -> str:
    lay = v["layout"]
    b = GemvBinding(
        entry=v["name"],
        signature=f"__global__ void {v['name']}({GEMV_PARAMS})",
        m="M",
        n="N",
        a=Operand("A", lay, "N" if lay == "row" else "M"),
        x="x",
        y="y",
        epilogue=v["epi"],
    )
    t: Any = v["tile"]
    code = gemv_body(b, t)
    if lay == "row":
        grid, block = f"(M + {t.warps - 1}) / {t.warps}", t.threads
    else:
        grid, block = f"(M + {t.cols_per_block - 1}) / {t.cols_per_block}", (t.cols_per_block // 4) * t.splits
    code += (
        f'extern "C" int launch_{v["name"]}({GEMV_PARAMS}) {{\n'
        f"    int g = {grid}; if (g > 65535) g = 65535;\n"
        f"    {v['name']}<<<g, {block}>>>(A, x, y, M, N, alpha, beta);\n"
        f"    return (int)cudaGetLastError();\n}}\n"
    )
    return code


def build(src: str, work: Path) -> tuple[ctypes.CDLL, dict[str, str]]:
    cu = work / "gen.cu"
    cu.write_text("#include <cuda_runtime.h>\n" + src)
    so = work / "gen.so"
    proc = subprocess.run(
        [
            "nvcc",
            "-O3",
            "-arch=sm_90",
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-Xptxas",
            "-v",
            "-o",
            str(so),
            str(cu),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        print(proc.stderr[-6000:])
        raise SystemExit("nvcc failed")
    res: dict[str, str] = {}
    cur = None
    for line in proc.stderr.splitlines():
        m = re.search(r"Compiling entry function '_Z\d+(\w+?)P", line)
        if m:
            cur = m.group(1)
        m = re.search(r"Used (\d+) registers.*?(\d+) bytes smem", line)
        if m and cur:
            res[cur] = f"{m.group(1)} regs, {m.group(2)} B smem" + res.get(cur, "")
        m = re.search(r"(\d+) bytes spill stores", line)
        if m and cur and m.group(1) != "0":
            res[cur] = res.get(cur, "") + f", {m.group(1)} B spills"
    # Where local memory is touched (spills): LDL/STL counts per kernel from the SASS, when cuobjdump is there.
    try:
        sass = subprocess.run(
            ["cuobjdump", "-sass", str(so)], capture_output=True, text=True, timeout=120
        ).stdout
    except (OSError, subprocess.SubprocessError):
        sass = ""
    fn = None
    counts: dict[str, list[int]] = {}
    for line in sass.splitlines():
        m = re.search(r"Function : _Z\d+(\w+?)P", line)
        if m:
            fn = m.group(1)
            counts[fn] = [0, 0, 0]
        elif fn is not None:
            for i, op in enumerate(("LDL", "STL", "FFMA")):
                if re.search(rf"\b{op}\b", line):
                    counts[fn][i] += 1
    for k, (ldl, stl, ffma) in counts.items():
        res[k] = res.get(k, "") + f", SASS {ffma} FFMA {ldl} LDL {stl} STL"
    return ctypes.CDLL(str(so)), res


def main() -> int:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests" / "bench" / "results"))
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    gv = gemm_variants(args.quick)
    mv = gemv_variants()
    src = NAIVE + "".join(gemm_source(v) for v in gv) + "".join(gemv_source(v) for v in mv)
    with tempfile.TemporaryDirectory() as tmp:
        lib, resources = build(src, Path(tmp))
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "gemm-codegen-source.cu").write_text(src)
    P = ctypes.c_void_p
    I = ctypes.c_int  # noqa: E741
    F = ctypes.c_float

    def ptr(t: Any) -> ctypes.c_void_p:
        return P(t.data_ptr())

    def mat(layout: str, rows: int, cols: int, batch: int = 1) -> tuple[Any, Any]:
        """(storage tensor, logical rows x cols view) of a batch of matrices in the layout."""
        if layout == "row":
            s = torch.randn(batch, rows, cols, device=dev)
            return s, s
        s = torch.randn(batch, cols, rows, device=dev)
        return s, s.transpose(1, 2)

    def run_gemm(
        v: dict[str, Any],
        A: Any,
        B: Any,
        C: Any,
        M: int,
        N: int,
        K: int,
        alpha: float,
        beta: float,
        batch: int,
    ) -> None:
        fn = getattr(lib, f"launch_{v['name']}")
        err = fn(ptr(A), ptr(B), ptr(C), I(M), I(N), I(K), F(alpha), F(beta), I(batch))
        if err:
            raise RuntimeError(f"{v['name']}: launch error {err}")

    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    # ---- correctness: odd shapes, every variant ----
    shapes = [
        (100, 77, 33),
        (1, 1023, 5),
        (129, 1, 300),
        (67, 45, 33),
        (257, 131, 1000),
        (128, 128, 8),
        (1000, 1001, 129),
    ]
    for v in gv:
        la, lb, lc = v["layouts"]
        worst = 0.0
        for M, N, K in shapes:
            batch = 3 if v["batch"] else 1
            As, Al = mat(la, M, K, batch)
            Bs, Bl = mat(lb, K, N, batch)
            Cs, Cl = mat(lc, M, N, batch)
            alpha, beta = (1.5, -0.75) if "beta" in v["epi"] else (1.0, 0.0)
            c_old = Cl.double().clone()
            if "{c}" not in v["epi"]:
                Cs.fill_(float("nan"))
            run_gemm(v, As, Bs, Cs, M, N, K, alpha, beta, batch)
            torch.cuda.synchronize()
            ref = Al.double() @ Bl.double()
            if "{c}" in v["epi"]:
                ref = alpha * ref + beta * c_old
            got = Cl.double()
            if torch.isnan(got).any():
                failures.append(f"{v['name']} {M}x{N}x{K}: unwritten (NaN) outputs")
                continue
            err = ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()
            worst = max(worst, err)
            if err > 1e-5:
                failures.append(f"{v['name']} {M}x{N}x{K}: relative error {err:.2e}")
        v["max_rel_err"] = worst
    for v in mv:
        worst = 0.0
        for M, N in [(100, 77), (1, 1023), (129, 1), (1000, 4099), (4096, 4096), (5, 3)]:
            if v["layout"] == "row":
                As = torch.randn(M, N, device=dev)
                Al = As
            else:
                As = torch.randn(N, M, device=dev)
                Al = As.t()
            x = torch.randn(N, device=dev)
            y = torch.randn(M, device=dev)
            y_old = y.double().clone()
            ab = "beta" in v["epi"]
            if not ab:
                y.fill_(float("nan"))
            alpha, beta = (1.5, -0.75) if ab else (1.0, 0.0)
            err_code = getattr(lib, f"launch_{v['name']}")(
                ptr(As), ptr(x), ptr(y), I(M), I(N), F(alpha), F(beta)
            )
            if err_code:
                raise RuntimeError(f"{v['name']}: launch error {err_code}")
            torch.cuda.synchronize()
            ref = Al.double() @ x.double()
            if ab:
                ref = alpha * ref + beta * y_old
            if torch.isnan(y).any():
                failures.append(f"{v['name']} {M}x{N}: unwritten (NaN) outputs")
                continue
            err = ((y.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
            worst = max(worst, err)
            if err > 1e-5:
                failures.append(f"{v['name']} {M}x{N}: relative error {err:.2e}")
        v["max_rel_err"] = worst

    # ---- bitwise agreement with the naive kernel (same summation order) ----
    M, N, K = 1000, 1001, 129
    A = torch.randn(M, K, device=dev)
    B = torch.randn(K, N, device=dev)
    Cn = torch.empty(M, N, device=dev)
    Cg = torch.empty(M, N, device=dev)
    lib.launch_naive_sgemm(ptr(A), ptr(B), ptr(Cn), I(M), I(N), I(K))
    bitwise = True
    for v in gv:
        if v["layouts"] == ("row", "row", "row") and v["epi"] == "{acc}" and not v["batch"]:
            run_gemm(v, A, B, Cg, M, N, K, 1.0, 0.0, 1)
            torch.cuda.synchronize()
            if not torch.equal(Cn, Cg):
                bitwise = False
                failures.append(f"{v['name']}: not bitwise equal to the naive kernel")

    # ---- timing ----
    def timeit(fn: Any, reps: int, warm: int = 2) -> float:
        for _ in range(warm):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1))
        return statistics.median(ts)

    S = args.size
    flops = 2.0 * S * S * S
    A = torch.randn(S, S, device=dev)
    B = torch.randn(S, S, device=dev)
    C = torch.empty(S, S, device=dev)
    t_cublas = timeit(lambda: torch.matmul(A, B, out=C), 20, 3)
    t_naive = timeit(lambda: lib.launch_naive_sgemm(ptr(A), ptr(B), ptr(C), I(S), I(S), I(S)), 3, 1)
    rows.append({"kernel": "cuBLAS fp32 (torch.matmul, TF32 off)", "ms": t_cublas})
    rows.append({"kernel": "naive sgemm (samples/sgemm_naive.cu body)", "ms": t_naive})
    for v in gv:
        if not v["perf"]:
            continue
        t = timeit(lambda v=v: run_gemm(v, A, B, C, S, S, S, 1.0, 0.5, 1), 20, 3)
        rows.append(
            {"kernel": v["name"], "ms": t, "res": resources.get(v["name"], ""), "err": v["max_rel_err"]}
        )
    t_cublas2 = timeit(lambda: torch.matmul(A, B, out=C), 20, 3)
    for r in rows:
        r["tflops"] = flops / (r["ms"] * 1e-3) / 1e12
        r["pct_cublas"] = 100.0 * min(t_cublas, t_cublas2) / r["ms"]
        r["x_naive"] = t_naive / r["ms"]
    # matvec vs copy bandwidth
    Mv = Nv = 16384
    Am = torch.randn(Mv, Nv, device=dev)
    xv = torch.randn(Nv, device=dev)
    yv = torch.empty(Mv, device=dev)
    src_buf = torch.empty(Mv * Nv // 2, device=dev)
    dst_buf = torch.empty_like(src_buf)
    t_copy = timeit(lambda: dst_buf.copy_(src_buf), 20, 3)
    copy_bw = 2 * src_buf.numel() * 4 / (t_copy * 1e-3)  # read + write bytes of a copy
    mv_rows: list[dict[str, Any]] = []
    t_nv = timeit(lambda: lib.launch_naive_gemv(ptr(Am), ptr(xv), ptr(yv), I(Mv), I(Nv)), 5, 1)
    mv_rows.append({"kernel": "naive gemv (thread per row)", "ms": t_nv})
    for v in mv:
        fn = getattr(lib, f"launch_{v['name']}")
        t = timeit(lambda fn=fn: fn(ptr(Am), ptr(xv), ptr(yv), I(Mv), I(Nv), F(1.0), F(0.5)), 20, 3)
        mv_rows.append(
            {"kernel": v["name"], "ms": t, "res": resources.get(v["name"], ""), "err": v["max_rel_err"]}
        )
    for r in mv_rows:
        bw = (Mv * Nv + Nv + Mv) * 4 / (r["ms"] * 1e-3)
        r["GBps"] = bw / 1e9
        r["pct_copy"] = 100.0 * bw / copy_bw

    gpu = local_gpu_name()
    lines = [
        f"# GEMM code generator check on {gpu}",
        "",
        f"{S}^3 fp32; cuBLAS {t_cublas:.3f} ms / {t_cublas2:.3f} ms (before/after the variants); "
        f"generated kernel bitwise equal to the naive kernel at 1000x1001x129: {bitwise}",
        "",
        "| kernel | ms | TFLOP/s | % cuBLAS | x naive | resources | max rel err (odd shapes) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kernel']} | {r['ms']:.3f} | {r['tflops']:.1f} | {r['pct_cublas']:.1f} | "
            f"{r['x_naive']:.1f} | {r.get('res', '')} | {r.get('err', float('nan')):.1e} |"
        )
    lines += [
        "",
        f"matvec {Mv}x{Nv} fp32; copy bandwidth {copy_bw / 1e9:.0f} GB/s (read+write, {t_copy:.3f} ms)",
        "",
        "| kernel | ms | GB/s | % copy | resources | max rel err |",
        "|---|---|---|---|---|---|",
    ]
    for r in mv_rows:
        lines.append(
            f"| {r['kernel']} | {r['ms']:.3f} | {r['GBps']:.0f} | {r['pct_copy']:.1f} | {r.get('res', '')} | "
            f"{r.get('err', float('nan')):.1e} |"
        )
    lines += ["", "failures: " + ("none" if not failures else "; ".join(failures))]
    text = "\n".join(lines) + "\n"
    print(text)
    slug = gpu_slug(gpu)
    out = Path(args.out)
    (out / f"gemm-codegen-{slug}.md").write_text(text)
    (out / f"gemm-codegen-{slug}.json").write_text(
        json.dumps(
            {
                "gpu": gpu,
                "size": S,
                "cublas_ms": [t_cublas, t_cublas2],
                "bitwise_vs_naive": bitwise,
                "gemm": rows,
                "gemv": mv_rows,
                "copy_GBps": copy_bw / 1e9,
                "failures": failures,
            },
            indent=1,
            default=str,
        )
    )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
