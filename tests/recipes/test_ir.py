"""The kernel IR (kernellsp.source.ir) on many spellings: index mapping, guards, loops, accesses, accumulations."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kernellsp.source.ir import KernelIR, Poly, fold_gid, kernel_ir
from kernellsp.source.model import parse_source

ROOT = Path(__file__).resolve().parents[2]
GID = Poly.sym("gid.x")


def _ir(body: str, params: str = "const float* x, float* y, int n", name: str = "k") -> KernelIR:
    src = f"#define NB 64\n__global__ void {name}({params})\n{{\n{body}\n}}\n"
    ir = kernel_ir(parse_source(src), name)
    assert ir is not None
    return ir


# -- polynomials ---------------------------------------------------------------------------------


def test_poly_algebra_and_affine_split() -> None:
    row, n, col = Poly.sym("row"), Poly.sym("N"), Poly.sym("col")
    p = row * n + col + 3
    split = p.split(["row", "col"])
    assert split is not None
    coeffs, rest = split
    assert coeffs == {"row": n, "col": Poly.const(1)} and rest == Poly.const(3)
    assert (row * row).split(["row"]) is None  # not affine
    assert p.coeff("row") == n and p.coeff("N") == row
    assert (p - p) == Poly() and (p * 0) == Poly.const(0)
    assert p.subs("row", Poly.const(2)) == n * 2 + col + 3


def test_fold_gid_with_common_factor_and_either_order() -> None:
    bi, bd, ti = Poly.sym("blockIdx.x"), Poly.sym("blockDim.x"), Poly.sym("threadIdx.x")
    c = Poly.sym("chunk")
    assert fold_gid(bd * bi + ti) == GID
    assert fold_gid((bi * bd + ti) * c + 1) == GID * c + 1
    assert fold_gid(bi * bd) == bi * bd  # no threadIdx: not a global index


# -- index mapping -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "decl",
    [
        "int i = blockIdx.x * blockDim.x + threadIdx.x;",
        "int i = threadIdx.x + blockDim.x * blockIdx.x;",
        "const int i = threadIdx.x + blockIdx.x * blockDim.x;",
        "unsigned int i = blockDim.x * blockIdx.x + threadIdx.x;",
        "size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;",
        "long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;",
        "int tid = threadIdx.x; int bid = blockIdx.x; int i = bid * blockDim.x + tid;",
        "int bs = blockDim.x; int i = __umul24(blockIdx.x, bs) + threadIdx.x;",
        "int i = (blockIdx.x << 8) + threadIdx.x;",
    ],
)
def test_global_index_spellings(decl: str) -> None:
    ir = _ir(f"{decl}\n if (i < n) y[i] = x[i];")
    if "<< 8" in decl:
        # Only equal to gid when the block has 256 threads: kept as the literal polynomial.
        assert ir.index_vars["i"] == Poly.sym("blockIdx.x") * 256 + Poly.sym("threadIdx.x")
        return
    assert ir.gid_vars == {"i": "x"} or ir.gid_vars.get("i") == "x"
    assert ir.index_vars["i"] == GID
    store = ir.stores()[0]
    assert (store.base, store.index) == ("y", GID)


def test_two_d_mapping_and_row_major_index() -> None:
    ir = _ir(
        "int col = blockIdx.x * blockDim.x + threadIdx.x;\n int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
        " if (row < h && col < w) y[row * w + col] = x[row * w + col];",
        "const float* x, float* y, int w, int h",
    )
    assert ir.gid_vars == {"col": "x", "row": "y"}
    idx = ir.stores()[0].index
    assert idx == Poly.sym("w") * Poly.sym("gid.y") + GID
    split = idx.split(["gid.x", "gid.y"]) if idx is not None else None
    assert split is not None and split[0]["gid.y"] == Poly.sym("w")


# -- guards -------------------------------------------------------------------------------------------


def test_guard_spellings() -> None:
    early = _ir("int i = blockIdx.x * blockDim.x + threadIdx.x;\n if (i >= n) return;\n y[i] = x[i];")
    g = early.stores()[0].guards
    assert [(gd.kind, str(gd.conds[0])) for gd in g] == [("return", "gid.x < n")]
    assert g[0].conds[0].bounds_above(GID) == Poly.sym("n")

    compound = _ir("int i = blockIdx.x * blockDim.x + threadIdx.x;\n if (i < n && x[i] > 0.0f) y[i] = x[i];")
    conds = compound.stores()[0].guards[0].conds
    assert str(conds[0]) == "gid.x < n" and len(conds) == 2

    demorgan = _ir(
        "int i = blockIdx.x * blockDim.x + threadIdx.x;\n if (i >= n || n <= 0) return;\n y[i] = 1.0f;"
    )
    got = demorgan.stores()[0].guards[0]
    assert got.exact and [c.op for c in got.conds] == ["<", ">"]

    le = _ir("int i = blockIdx.x * blockDim.x + threadIdx.x;\n if (i <= n - 1) y[i] = x[i];")
    assert le.stores()[0].guards[0].conds[0].bounds_above(GID) == Poly.sym("n")


def test_else_branch_and_ternary_guards() -> None:
    ir = _ir(
        "int i = blockIdx.x * blockDim.x + threadIdx.x;\n if (i >= n) { } else { y[i] = i < 5 ? x[i] : 0.0f; }"
    )
    store = ir.stores()[0]
    assert store.guards[0].kind == "else" and str(store.guards[0].conds[0]) == "gid.x < n"
    load = ir.loads("x")[0]
    assert [g.kind for g in load.guards] == ["else", "ternary"]


# -- loops --------------------------------------------------------------------------------------------


def test_grid_stride_loops_for_and_while() -> None:
    f = _ir(
        "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = x[i];"
    )
    assert f.loops[0].grid_stride == "x" and f.loops[0].bound() == Poly.sym("n")
    w = _ir(
        "int i = threadIdx.x + blockIdx.x * blockDim.x;\n int stride = blockDim.x * gridDim.x;\n"
        " while (i < n) { y[i] = x[i]; i += stride; }"
    )
    lp = w.loops[0]
    assert (lp.kind, lp.var, lp.grid_stride) == ("while", "i", "x")
    assert w.stores()[0].index == Poly.sym("i")


def test_chunk_loop_access_is_affine_in_thread_and_counter() -> None:
    ir = _ir(
        "int t = blockIdx.x * blockDim.x + threadIdx.x;\n int start = t * chunk;\n"
        " for (int k = 0; k < chunk; ++k) { int i = start + k; if (i < n) y[i] = 2.0f * x[i]; }",
        "const float* x, float* y, int n, int chunk",
    )
    lp = ir.loops[0]
    assert (lp.var, lp.start, lp.step, lp.bound()) == ("k", Poly(), Poly.const(1), Poly.sym("chunk"))
    idx = ir.stores()[0].index
    assert idx == Poly.sym("chunk") * GID + Poly.sym("k")
    split = idx.split(["gid.x", "k"]) if idx is not None else None
    assert split is not None and split[0] == {"gid.x": Poly.sym("chunk"), "k": Poly.const(1)}


def test_local_pointer_offsets_fold_into_indices() -> None:
    ir = _ir(
        "int t = blockIdx.x * blockDim.x + threadIdx.x;\n const float* p = x + t * 4;\n float* q = &y[t * 4];\n"
        " for (int j = 0; j < 4; ++j) q[j] = p[j] + *(p + 1);"
    )
    assert ir.stores()[0].index == GID * 4 + Poly.sym("j")
    assert {str(a.index) for a in ir.loads("x")} == {"4*gid.x + j", "4*gid.x + 1"}


# -- accumulations and atomics ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stmt", "op"),
    [
        ("acc += x[i];", "sum"),
        ("acc = acc + x[i];", "sum"),
        ("acc = x[i] + acc;", "sum"),
        ("acc = fmaxf(acc, x[i]);", "max"),
        ("acc = max(x[i], acc);", "max"),
        ("acc = x[i] > acc ? x[i] : acc;", "max"),
        ("acc = acc < x[i] ? acc : x[i];", "min"),
        ("acc *= x[i];", "prod"),
    ],
)
def test_accumulation_spellings(stmt: str, op: str) -> None:
    ir = _ir(f"float acc = 0.0f;\n for (int i = 0; i < n; i++) {{ {stmt} }}\n *y = acc;")
    assert [(a.var, a.op) for a in ir.accumulations] == [("acc", op)]
    assert "x[i]" in ir.accumulations[0].value_text
    assert ir.accumulations[0].loops[0].var == "i"


def test_argmax_compare_select_records_companion() -> None:
    ir = _ir(
        "float best = x[0]; int arg = 0;\n for (int i = 1; i < n; i++) { if (x[i] > best) { best = x[i]; arg = i; } }\n"
        " *y = best;"
    )
    (a,) = ir.accumulations
    assert (a.var, a.op, a.companions) == ("best", "max", {"arg": "i"})


def test_atomics_targets_values_and_used_results() -> None:
    ir = _ir(
        "int i = blockIdx.x * blockDim.x + threadIdx.x;\n if (i < n) { atomicAdd(y, x[i]); atomicMax(&bins[3], 1);"
        " int old = atomicAdd(&bins[(int)x[i]], 1); }",
        "const float* x, float* y, int* bins, int n",
    )
    a, b, c = ir.atomics
    assert (a.func, a.op, a.target.base if a.target else None, str(a.target.index) if a.target else None) == (
        "atomicAdd",
        "sum",
        "y",
        "0",
    )
    assert a.value_text == "x[i]" and not a.result_used
    assert b.op == "max" and b.target is not None and b.target.index == Poly.const(3)
    assert c.result_used and c.target is not None and c.target.index is None  # data-dependent bin
    # The atomic's subscript is the atomic target, not an extra load.
    assert [x.base for x in ir.loads()] == ["x", "x"]


def test_shared_and_local_arrays_are_not_global() -> None:
    ir = _ir(
        "__shared__ float tile[256]; float r[4];\n int t = threadIdx.x;\n tile[t] = x[t]; __syncthreads();\n"
        " r[0] = tile[255 - t]; y[t] = r[0];"
    )
    spaces = {(a.base, a.space) for a in ir.accesses}
    assert ("tile", "shared") in spaces and ("r", "local") in spaces and ("x", "global") in spaces
    assert ir.barriers


def test_broken_code_never_raises() -> None:
    for src in ["__global__ void k(float* y) { int i = ; y[i] = }", "__global__ void k() { for (;;) }", ""]:
        model = parse_source(src)
        for fn in model.kernels:
            kernel_ir(model, fn)


def test_ir_of_every_sample_is_fast() -> None:
    """The IR runs inside `kernellsp check`: all samples (with every kernel) in well under a second."""
    models = [parse_source(p.read_text(), str(p)) for p in sorted((ROOT / "samples").glob("*.cu"))]
    t0 = time.perf_counter()
    count = 0
    for m in models:
        for fn in m.kernels:
            assert kernel_ir(m, fn) is not None
            count += 1
    assert count >= 10
    assert time.perf_counter() - t0 < 1.0
