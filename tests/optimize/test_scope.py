"""Tests of kernellsp.optimize.verify.scope: what a candidate rewrite may change, checked before anything compiles.

Every case edits one real file (BASE below, or a sample) and runs the real parser and scope checker.
Accepted: kernel bodies, ``__device__`` helpers (edited, added above the spec block, removed),
``const``/``__restrict__``/``__launch_bounds__`` on the signature, the launch, the order of
tunables and allow-listed flags. Rejected, each with a reason that names the problem: everything
else.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernellsp.optimize.verify.scope import (
    ALLOWED_FLAGS,
    ALLOWED_INCLUDES,
    ScopeResult,
    check_scope,
    check_spec_change,
    edit_targets,
)
from kernellsp.source import spec as specmod
from kernellsp.source.model import parse_source

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

BASE = """\
#include <cuda_runtime.h>
#include <math.h>

#define SCALE 2.0f

__device__ float twice(float v) { return v * SCALE; }

/* kernellsp
sizes = { N = 4096 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-4 }
shapes = [{ N = 1000 }, { N = 1 }]
tunables = { UNROLL = [1, 2, 4] }
flags = ["-lineinfo"]
[args]
x = { dtype = "f32", dir = "in", count = "N" }
y = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void scale(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = twice(x[i]);
    }
}

__global__ void other(float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.0f;
}

template <int B>
__global__ void tk(float* y, int n)
{
    int i = blockIdx.x * B + threadIdx.x;
    if (i < n) y[i] = 1.0f;
}

void host_fn(const float* x, float* y, int n)
{
    scale<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""

SIG = "__global__ void scale(const float* x, float* y, int n)"
FIRST_STMT = "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) {"
SPEC_OPEN = "/* kernellsp"
FLAGS = 'flags = ["-lineinfo"]'


def edit(old: str, new: str, base: str = BASE) -> str:
    """``base`` with the first occurrence of ``old`` (which must be there) replaced by ``new``."""
    assert base.count(old) >= 1, old
    out = base.replace(old, new, 1)
    assert out != base
    return out


def scope(candidate: str, targets: tuple[str, ...] = ("scale",), base: str = BASE) -> ScopeResult:
    return check_scope(base, candidate, list(targets), "scope_test.cu")


def test_base_is_valid_and_identical_candidate_is_in_scope() -> None:
    model = parse_source(BASE)
    assert not model.syntax_errors
    bound = specmod.specs_from_source(model)[0]
    assert [b.entry for b in bound] == ["scale"]
    assert scope(BASE).ok
    assert scope(BASE, ("scale", "other")).ok


# --------------------------------------------------------------------------------------------------
# Accepted edits

ACCEPTED = {
    "body edit": ("y[i] = twice(x[i]);", "y[i] = 2.0f * x[i];"),
    "body rewritten as a grid-stride loop": (
        FIRST_STMT + "\n        y[i] = twice(x[i]);\n    }",
        "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {\n"
        "        y[i] = twice(x[i]);\n    }",
    ),
    "#pragma in the body": (FIRST_STMT, "#pragma unroll 4\n" + FIRST_STMT),
    "__shared__ array in the body": (FIRST_STMT, "    __shared__ float tile[256];\n" + FIRST_STMT),
    "static __shared__ array in the body": (
        FIRST_STMT,
        "    static __shared__ float tile[256];\n" + FIRST_STMT,
    ),
    "device helper edited": ("return v * SCALE;", "return SCALE * v;"),
    "device helper removed (body inlines it)": (
        "__device__ float twice(float v) { return v * SCALE; }\n",
        "",
    ),
    "new device helper above the spec block": (
        SPEC_OPEN,
        "__device__ float thrice(float v) { return 3.0f * v; }\n\n" + SPEC_OPEN,
    ),
    "helper prototypes (all declarators functions)": (
        SPEC_OPEN,
        "__device__ float thrice(float v), half_of(float v);\n\n" + SPEC_OPEN,
    ),
    "__restrict__ and const on the signature": (
        SIG,
        "__global__ void scale(const float* __restrict__ x, float* __restrict__ y, const int n)",
    ),
    "__restrict (spelling) on the signature": (
        SIG,
        "__global__ void scale(const float* __restrict x, float* y, int n)",
    ),
    "__launch_bounds__ added": (
        SIG,
        "__global__ void __launch_bounds__(256) scale(const float* x, float* y, int n)",
    ),
    "__launch_bounds__ with min blocks": (
        SIG,
        "__global__ void __launch_bounds__(256, 4) scale(const float* x, float* y, int n)",
    ),
    "launch changed in the spec": (
        'launch = { grid = "ceil_div(N, 256)", block = 256 }',
        'launch = { grid = "ceil_div(N, 128)", block = 128 }',
    ),
    "launch with dynamic shared memory": (
        'launch = { grid = "ceil_div(N, 256)", block = 256 }',
        'launch = { grid = "ceil_div(N, 512)", block = 512, smem = 2048 }',
    ),
    "tunables reordered (picks another default)": ("UNROLL = [1, 2, 4]", "UNROLL = [4, 1, 2]"),
    "allow-listed flags added": (
        FLAGS,
        'flags = ["-lineinfo", "-Xptxas=-O3", "--extra-device-vectorization", "-maxrregcount=64"]',
    ),
    "allow-listed flag removed": (FLAGS, "flags = []"),
}


@pytest.mark.parametrize("case", list(ACCEPTED))
def test_accepted_edits(case: str) -> None:
    old, new = ACCEPTED[case]
    cand = edit(old, new)
    assert not parse_source(cand).syntax_errors, case
    r = scope(cand)
    assert r.ok, f"{case}: {r.reason}"
    assert r.reason == ""


def test_several_accepted_edits_at_once() -> None:
    cand = BASE
    for case in (
        "body edit",
        "device helper edited",
        "new device helper above the spec block",
        "__launch_bounds__ added",
        "launch changed in the spec",
        "tunables reordered (picks another default)",
        "allow-listed flags added",
    ):
        old, new = ACCEPTED[case]
        cand = edit(old, new, cand)
    r = scope(cand)
    assert r.ok, r.reason


def test_template_kernel_body_may_change() -> None:
    assert scope(edit("if (i < n) y[i] = 1.0f;", "if (i < n) y[i] = 2.0f;"), ("tk",)).ok


def test_other_kernel_is_editable_when_targeted() -> None:
    cand = edit("if (i < n) y[i] = 0.0f;", "if (i < n) y[i] = -0.0f;")
    assert not scope(cand).ok
    assert scope(cand, ("scale", "other")).ok


@pytest.mark.parametrize(
    "flag",
    [
        "-Xptxas=-O3",
        "-Xptxas=-O0",
        "-Xptxas=-v",
        "--extra-device-vectorization",
        "-maxrregcount=32",
        "--maxrregcount=128",
        "-Xptxas=--allow-expensive-optimizations=true",
        "-lineinfo",
        "-O3",
    ],
)
def test_allowed_flags(flag: str) -> None:
    assert ALLOWED_FLAGS.match(flag)
    assert scope(edit(FLAGS, f'flags = ["-lineinfo", "{flag}"]')).ok


# --------------------------------------------------------------------------------------------------
# Rejected edits: each reason names the problem

OUTSIDE = "outside the targeted kernels"

REJECTED: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {
    # case: (old, new, targets, words the reason must contain)
    "include added": (
        "#include <math.h>",
        "#include <math.h>\n#include <cstdio>",
        ("scale",),
        ("'#include <cstdio>'", "not among the headers", "#includes"),
    ),
    "include removed": ("#include <math.h>\n", "", ("scale",), (OUTSIDE, "includes")),
    "macro added": (
        "#define SCALE 2.0f",
        "#define SCALE 2.0f\n#define FAST 1",
        ("scale",),
        (OUTSIDE, "macros"),
    ),
    "macro changed": ("#define SCALE 2.0f", "#define SCALE 3.0f", ("scale",), (OUTSIDE, "macros")),
    "host function edited": (
        "scale<<<(n + 255) / 256, 256>>>",
        "scale<<<(n + 127) / 128, 128>>>",
        ("scale",),
        (OUTSIDE, "host code"),
    ),
    "another kernel edited": (
        "if (i < n) y[i] = 0.0f;",
        "if (i < n) y[i] = 1.0f;",
        ("scale",),
        (OUTSIDE, "other kernels"),
    ),
    "another kernel removed": (
        "__global__ void other(float* y, int n)\n{\n    int i = blockIdx.x * blockDim.x + "
        "threadIdx.x;\n    if (i < n) y[i] = 0.0f;\n}\n",
        "",
        ("scale",),
        (OUTSIDE,),
    ),
    "file-scope __device__ variable": (
        SPEC_OPEN,
        "__device__ float g_cache[1024];\n\n" + SPEC_OPEN,
        ("scale",),
        (OUTSIDE,),
    ),
    "__device__ variable beside a helper prototype": (
        SPEC_OPEN,
        "__device__ float helper_sq(float), g_cache[1024];\n\n" + SPEC_OPEN,
        ("scale",),
        (OUTSIDE,),
    ),
    "__device__ pointer beside a helper prototype": (
        SPEC_OPEN,
        "__device__ int helper_id(int), *g_flag;\n\n" + SPEC_OPEN,
        ("scale",),
        (OUTSIDE,),
    ),
    "file-scope __constant__ variable": (
        SPEC_OPEN,
        "__constant__ float c_coef[16];\n\n" + SPEC_OPEN,
        ("scale",),
        (OUTSIDE,),
    ),
    "signature: parameter type": (
        SIG,
        "__global__ void scale(const double* x, float* y, int n)",
        ("scale",),
        ("signature of scale",),
    ),
    "signature: scalar type": (
        SIG,
        "__global__ void scale(const float* x, float* y, long n)",
        ("scale",),
        ("signature of scale",),
    ),
    "signature: pointer to value": (
        SIG,
        "__global__ void scale(const float* x, float y, int n)",
        ("scale",),
        ("signature of scale",),
    ),
    "signature: parameter name": (
        SIG,
        "__global__ void scale(const float* in, float* y, int n)",
        ("scale",),
        ("signature of scale",),
    ),
    "signature: parameter order": (
        SIG,
        "__global__ void scale(float* y, const float* x, int n)",
        ("scale",),
        ("signature of scale",),
    ),
    "signature: extra parameter": (
        SIG,
        "__global__ void scale(const float* x, float* y, int n, int m)",
        ("scale",),
        ("signature of scale",),
    ),
    "signature: parameter dropped": (
        SIG,
        "__global__ void scale(const float* x, float* y)",
        ("scale",),
        ("signature of scale",),
    ),
    "template parameters changed": (
        "template <int B>",
        "template <int B, int C>",
        ("tk",),
        ("template parameters of tk",),
    ),
    "template parameter kind changed": (
        "template <int B>",
        "template <unsigned B>",
        ("tk",),
        ("template parameters of tk",),
    ),
    "kernel turned into a device function": (
        SIG,
        SIG.replace("__global__", "__device__"),
        ("scale",),
        ("changed scale from global to device",),
    ),
    "spec sizes changed": (
        "sizes = { N = 4096 }",
        "sizes = { N = 1024 }",
        ("scale",),
        ("spec field 'sizes'",),
    ),
    "spec args changed": (
        'x = { dtype = "f32", dir = "in", count = "N" }',
        'x = { dtype = "f32", dir = "in", count = "N", dist = "ones()" }',
        ("scale",),
        ("spec field 'args'",),
    ),
    "spec arg direction changed": (
        'y = { dtype = "f32", dir = "out", count = "N" }',
        'y = { dtype = "f32", dir = "inout", count = "N" }',
        ("scale",),
        ("spec field 'args'",),
    ),
    "spec shapes changed": (
        "shapes = [{ N = 1000 }, { N = 1 }]",
        "shapes = [{ N = 1000 }]",
        ("scale",),
        ("spec field 'shapes'",),
    ),
    "spec tolerance loosened": (
        "tolerance = { rtol = 1e-4 }",
        "tolerance = { rtol = 1e-2 }",
        ("scale",),
        ("spec field 'tolerance'",),
    ),
    "spec tolerance added": (
        "tolerance = { rtol = 1e-4 }",
        "tolerance = { rtol = 1e-4, atol = 1e-3 }",
        ("scale",),
        ("spec field 'tolerance'",),
    ),
    "spec seeds added": (
        "sizes = { N = 4096 }",
        "sizes = { N = 4096 }\nseeds = 1",
        ("scale",),
        ("spec field 'seeds'",),
    ),
    "tunables values changed": (
        "UNROLL = [1, 2, 4]",
        "UNROLL = [1, 2, 8]",
        ("scale",),
        ("tunables' names or values",),
    ),
    "tunables value dropped": (
        "UNROLL = [1, 2, 4]",
        "UNROLL = [2, 4]",
        ("scale",),
        ("tunables' names or values",),
    ),
    "tunables renamed": ("UNROLL = [1, 2, 4]", "UNR = [1, 2, 4]", ("scale",), ("tunables' names or values",)),
    "flag --use_fast_math": (
        FLAGS,
        'flags = ["-lineinfo", "--use_fast_math"]',
        ("scale",),
        ("'--use_fast_math' is not allowed",),
    ),
    "flag -use_fast_math": (
        FLAGS,
        'flags = ["-lineinfo", "-use_fast_math"]',
        ("scale",),
        ("'-use_fast_math' is not allowed",),
    ),
    "flag -Xcompiler -ffast-math": (
        FLAGS,
        'flags = ["-lineinfo", "-Xcompiler -ffast-math"]',
        ("scale",),
        ("'-Xcompiler -ffast-math' is not allowed",),
    ),
    "flag -ftz=true": (
        FLAGS,
        'flags = ["-lineinfo", "-ftz=true"]',
        ("scale",),
        ("'-ftz=true' is not allowed",),
    ),
    "flag --prec-div=false": (
        FLAGS,
        'flags = ["-lineinfo", "--prec-div=false"]',
        ("scale",),
        ("'--prec-div=false' is not allowed",),
    ),
    "flag -D macro": (
        FLAGS,
        'flags = ["-lineinfo", "-DSCALE_OVERRIDE=1"]',
        ("scale",),
        ("'-DSCALE_OVERRIDE=1' is not allowed",),
    ),
    "flag -maxrregcount out of range": (
        FLAGS,
        'flags = ["-lineinfo", "-maxrregcount=2550"]',
        ("scale",),
        ("'-maxrregcount=2550' is not allowed",),
    ),
    "launch removed": (
        'launch = { grid = "ceil_div(N, 256)", block = 256 }\n',
        "",
        ("scale",),
        ("removed the launch configuration",),
    ),
    "#define in the kernel body": (
        FIRST_STMT,
        "#define SCALE2 4.0f\n" + FIRST_STMT,
        ("scale",),
        ("preprocessor directive '#define SCALE2 4.0f'", "kernel:scale"),
    ),
    "#undef in the kernel body": (
        FIRST_STMT,
        "#undef SCALE\n" + FIRST_STMT,
        ("scale",),
        ("preprocessor directive '#undef SCALE'",),
    ),
    "#include in the kernel body": (
        FIRST_STMT,
        '#include "evil.h"\n' + FIRST_STMT,
        ("scale",),
        ("preprocessor directive '#include",),
    ),
    "#define in a device helper": (
        "__device__ float twice(float v) { return v * SCALE; }",
        "__device__ float twice(float v) {\n#define SCALE 4.0f\n    return v * SCALE;\n}",
        ("scale",),
        ("preprocessor directive '#define SCALE 4.0f'", "device"),
    ),
    "function-scope static __device__ variable": (
        FIRST_STMT,
        "    static __device__ int calls = 0;\n" + FIRST_STMT,
        ("scale",),
        ("static/extern variable", "kernel:scale", "static __device__ int calls = 0;"),
    ),
    "function-scope static variable": (
        FIRST_STMT,
        "    static int calls;\n" + FIRST_STMT,
        ("scale",),
        ("static/extern variable", "static int calls;", "persists across launches"),
    ),
    "function-scope static in a device helper": (
        "__device__ float twice(float v) { return v * SCALE; }",
        "__device__ float twice(float v) { static float last; last = v; return v * SCALE; }",
        ("scale",),
        ("static/extern variable", "device"),
    ),
    "candidate does not parse": (
        "y[i] = twice(x[i]);",
        "y[i] = twice(x[i]));  {",
        ("scale",),
        ("does not parse",),
    ),
    "kernel removed": (
        BASE[BASE.index(SIG) : BASE.index("__global__ void other")],
        "",
        ("scale",),
        ("removed or renamed scale",),
    ),
    "kernel renamed": (SIG, SIG.replace("scale(", "scale2("), ("scale",), ("removed or renamed scale",)),
}


@pytest.mark.parametrize("case", list(REJECTED))
def test_rejected_edits_name_the_problem(case: str) -> None:
    old, new, targets, words = REJECTED[case]
    r = scope(edit(old, new), targets)
    assert not r.ok, case
    for w in words:
        assert w in r.reason, f"{case}: {w!r} not in {r.reason!r}"


def test_signature_and_static_rejections_carry_the_line() -> None:
    sig_line = BASE.splitlines().index(SIG)
    r = scope(edit(SIG, "__global__ void scale(const double* x, float* y, int n)"))
    assert not r.ok and r.line == sig_line
    r = scope(edit(FIRST_STMT, "    static int calls;\n" + FIRST_STMT))
    assert not r.ok and r.line == sig_line + 2  # the inserted line, right after `{`
    r = scope(edit("y[i] = twice(x[i]);", "y[i] = twice(x[i]));  {"))
    assert not r.ok and r.line is not None and r.line >= sig_line


def test_static_variable_already_in_the_baseline_is_not_held_against_the_candidate() -> None:
    base = edit(FIRST_STMT, "    static __device__ int calls;\n" + FIRST_STMT)
    cand = edit("y[i] = twice(x[i]);", "y[i] = 2.0f * x[i];", base)
    assert scope(cand, base=base).ok


def test_removing_a_non_allowed_flag_is_rejected() -> None:
    """A -D flag the file builds with changes macros for host code and other kernels when dropped."""
    base = edit(FLAGS, 'flags = ["-lineinfo", "-DSCALE_OVERRIDE=1", "--use_fast_math"]')
    r = scope(edit('"-DSCALE_OVERRIDE=1", ', "", base), base=base)
    assert not r.ok and "removed nvcc flag '-DSCALE_OVERRIDE=1'" in r.reason
    r = scope(edit(', "--use_fast_math"', "", base), base=base)
    assert not r.ok and "'--use_fast_math'" in r.reason
    # Keeping them and dropping the allow-listed one is fine; so is keeping a disallowed flag already there.
    assert scope(edit('"-lineinfo", ', "", base), base=base).ok
    assert scope(edit("--use_fast_math", '--use_fast_math", "-Xptxas=-O3', base), base=base).ok


def test_helper_between_spec_block_and_kernel_keeps_the_spec_bound() -> None:
    """A helper inserted between the spec and the kernel is a helper edit; the spec still binds to the kernel."""
    cand = edit(SIG, "__device__ float thrice(float v) { return 3.0f * v; }\n" + SIG)
    assert scope(cand).ok
    assert [b.entry for b in specmod.specs_from_source(parse_source(cand))[0]] == ["scale"]


# --------------------------------------------------------------------------------------------------
# check_spec_change directly


def _spec(**kw: object) -> specmod.KernelSpec:
    base: dict[str, object] = {
        "sizes": {"N": 4096},
        "launch": {"grid": "ceil_div(N, 256)", "block": 256},
        "args": {"x": {"dtype": "f32", "dir": "in", "count": "N"}},
        "tunables": {"B": [1, 2]},
        "flags": ["-lineinfo"],
    }
    base.update(kw)
    return specmod.KernelSpec.model_validate(base)


def test_check_spec_change() -> None:
    assert check_spec_change(_spec(), _spec()).ok
    assert check_spec_change(_spec(), _spec(launch={"grid": "ceil_div(N, 128)", "block": 128})).ok
    assert check_spec_change(_spec(), _spec(tunables={"B": [2, 1]})).ok
    assert check_spec_change(_spec(), _spec(flags=["-lineinfo", "-O3"])).ok
    r = check_spec_change(_spec(), _spec(launch=None))
    assert not r.ok and "removed the launch" in r.reason
    r = check_spec_change(_spec(), _spec(sizes={"N": 1}))
    assert not r.ok and "'sizes'" in r.reason
    r = check_spec_change(_spec(), _spec(tolerance={"rtol": 0.5}))
    assert not r.ok and "'tolerance'" in r.reason
    r = check_spec_change(_spec(), _spec(tunables={"B": [1, 2], "C": [1]}))
    assert not r.ok and "tunables" in r.reason
    r = check_spec_change(_spec(), _spec(flags=["-lineinfo", "--use_fast_math"]))
    assert not r.ok and "--use_fast_math" in r.reason
    r = check_spec_change(_spec(), _spec(entry="other"))
    assert not r.ok and "'entry'" in r.reason


# --------------------------------------------------------------------------------------------------
# Host launchers: the kernels they launch are the targets


def test_edit_targets() -> None:
    relu = (SAMPLES / "relu_launcher.cu").read_text()
    model = parse_source(relu)
    assert edit_targets(model, "solve") == ["relu_kernel"]
    assert edit_targets(model, "relu_kernel") == ["relu_kernel"]
    assert edit_targets(parse_source(BASE), "scale") == ["scale"]
    assert edit_targets(parse_source(BASE), "host_fn") == ["scale"]
    assert edit_targets(parse_source(BASE), "no_such_function") == ["no_such_function"]
    for p in sorted(SAMPLES.glob("*.cu")):
        m = parse_source(p.read_text())
        entry = specmod.specs_from_source(m)[0][0].entry
        targets = edit_targets(m, entry)
        assert targets, p.name
        assert all(m.function(t) is not None and m.function(t).kind == "global" for t in targets), p.name  # type: ignore[union-attr]


def test_host_launcher_scope() -> None:
    relu = (SAMPLES / "relu_launcher.cu").read_text()
    targets = edit_targets(parse_source(relu), "solve")
    # The launched kernel's body and qualifiers may change.
    cand = edit("output[i] = input[i] > 0.0f ? input[i] : 0.0f;", "output[i] = fmaxf(input[i], 0.0f);", relu)
    assert check_scope(relu, cand, targets).ok
    cand = edit(
        "__global__ void relu_kernel(const float* input, float* output, int N)",
        "__global__ void __launch_bounds__(256) relu_kernel(const float* __restrict__ input, "
        "float* __restrict__ output, int N)",
        relu,
    )
    assert check_scope(relu, cand, targets).ok
    # The host launcher itself is host code.
    cand = edit("    cudaDeviceSynchronize();\n", "", relu)
    r = check_scope(relu, cand, targets)
    assert not r.ok and "host code" in r.reason
    cand = edit("int threadsPerBlock = 256;", "int threadsPerBlock = 512;", relu)
    assert not check_scope(relu, cand, targets).ok
    # Its spec is not the kernel's spec: without the entry named it stays as written ...
    cand = edit("sizes = { N = 16777216 }", 'sizes = { N = 16777216 }\nflags = ["-O3"]', relu)
    r = check_scope(relu, cand, targets)
    assert not r.ok and OUTSIDE in r.reason
    # ... with the entry named (as verify and the proposers do), its structured fields follow the spec rules.
    assert check_scope(relu, cand, targets, "relu_launcher.cu", "solve").ok
    fast = edit("sizes = { N = 16777216 }", 'sizes = { N = 16777216 }\nflags = ["--use_fast_math"]', relu)
    r = check_scope(relu, fast, targets, "relu_launcher.cu", "solve")
    assert not r.ok and "'--use_fast_math' is not allowed" in r.reason
    shapes = edit("shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }]", "shapes = [{ N = 1000 }]", relu)
    r = check_scope(relu, shapes, targets, "relu_launcher.cu", "solve")
    assert not r.ok and "spec field 'shapes'" in r.reason
    # Naming the entry does not open its host code.
    r = check_scope(
        relu, edit("    cudaDeviceSynchronize();\n", "", relu), targets, "relu_launcher.cu", "solve"
    )
    assert not r.ok and "host code" in r.reason
    # The launcher is not a target itself.
    r = check_scope(relu, relu, ["solve"])
    assert r.ok  # nothing changed
    cand = edit("output[i] = input[i] > 0.0f ? input[i] : 0.0f;", "output[i] = fmaxf(input[i], 0.0f);", relu)
    assert not check_scope(relu, cand, ["solve"]).ok


LAUNCH = "relu_kernel<<<blocksPerGrid, threadsPerBlock>>>"


@pytest.mark.parametrize(
    "config",
    [
        "N, 128",
        "(N + 1023) / 1024, 1024",
        "dim3((N + 511) / 512, 1, 1), dim3(512)",
        "N > 4096 ? N / 4 : 1, threadsPerBlock",
        "blocksPerGrid / 2, threadsPerBlock * 2",
    ],
)
def test_a_host_launcher_may_change_its_launch_grid_and_block(config: str) -> None:
    relu = (SAMPLES / "relu_launcher.cu").read_text()
    targets = edit_targets(parse_source(relu), "solve")
    cand = edit(LAUNCH, f"relu_kernel<<<{config}>>>", relu)
    assert check_scope(relu, cand, targets, "relu_launcher.cu", "solve").ok


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ("N = 1, 128", "assigns"),
        ("blocksPerGrid++, 128", "assigns"),
        ("N, threadsPerBlock += 1", "assigns"),
        ("N, threadsPerBlock <<= 1", "assigns"),
        ("cudaDeviceSynchronize(), 128", "'cudaDeviceSynchronize'"),
        ('printf("x"), 128', "'printf'"),
        ("N, other_size", "'other_size'"),
        ("N, input[0]", "'['"),
        ("[&] { return N; }(), 128", "'['"),
        ("N, sizeof(float)", "'sizeof'"),
    ],
)
def test_a_launch_configuration_that_could_run_host_code_is_refused(config: str, why: str) -> None:
    relu = (SAMPLES / "relu_launcher.cu").read_text()
    targets = edit_targets(parse_source(relu), "solve")
    cand = edit(LAUNCH, f"relu_kernel<<<{config}>>>", relu)
    r = check_scope(relu, cand, targets, "relu_launcher.cu", "solve")
    assert not r.ok and why in r.reason and "launch of relu_kernel in solve" in r.reason, r.reason


def test_only_the_entry_launchers_grid_and_block_open() -> None:
    relu = (SAMPLES / "relu_launcher.cu").read_text()
    targets = edit_targets(parse_source(relu), "solve")
    # Without the entry named (a kernel entry's verification), the launch stays host code.
    cand = edit(LAUNCH, "relu_kernel<<<N, 128>>>", relu)
    r = check_scope(relu, cand, targets)
    assert not r.ok and "host code" in r.reason
    # A third configuration element (shared memory, stream) stays as written.
    cand = edit(LAUNCH, "relu_kernel<<<blocksPerGrid, threadsPerBlock, 0>>>", relu)
    assert not check_scope(relu, cand, targets, "relu_launcher.cu", "solve").ok
    # So do the launch's arguments.
    cand = edit("(input, output, N);", "(input, output, N / 2);", relu)
    assert not check_scope(relu, cand, targets, "relu_launcher.cu", "solve").ok


def test_unknown_target_is_reported() -> None:
    r = scope(BASE, ("missing",))
    assert not r.ok and "missing is not defined in the baseline" in r.reason


def test_samples_are_in_scope_of_themselves() -> None:
    for p in sorted(SAMPLES.glob("*.cu")):
        text = p.read_text()
        m = parse_source(text)
        entry = specmod.specs_from_source(m)[0][0].entry
        assert check_scope(text, text, edit_targets(m, entry), str(p), entry).ok, p.name


# --------------------------------------------------------------------------------------------------
# Holes found in review: a directive after a comment, a second spec for the entry


def test_directive_after_a_comment_is_still_a_directive() -> None:
    """``/**/ #define`` is a directive (comments are whitespace to the preprocessor): redefining the host's
    cudaDeviceSynchronize from inside the kernel would let a launcher skip its synchronisation."""
    base = (SAMPLES / "relu_launcher.cu").read_text()
    cand = base.replace(
        "int i = blockIdx.x", "/**/ #define cudaDeviceSynchronize() cudaSuccess\n    int i = blockIdx.x", 1
    )
    assert cand != base
    r = check_scope(base, cand, ["relu_kernel"], "relu_launcher.cu", "solve")
    assert not r.ok
    assert r.reason.startswith(
        "preprocessor directive '#define cudaDeviceSynchronize() cudaSuccess' inside an "
        "editable region (kernel:relu_kernel) is new in this function"
    )
    pragma = base.replace("int i = blockIdx.x", "/**/ #pragma unroll\n    int i = blockIdx.x", 1)
    assert check_scope(base, pragma, ["relu_kernel"], "relu_launcher.cu", "solve").ok


def test_a_second_spec_for_the_entry_is_refused() -> None:
    """A spec hidden in a helper's body, bound to the entry ahead of the real one, would build the candidate
    with flags the gate never saw (``--use_fast_math``, ``-D...``): every consumer takes the first spec."""
    base = (SAMPLES / "vector_add.cu").read_text()
    real = base[base.index("/* kernellsp") : base.index("*/") + 2]
    evil = real.replace("/* kernellsp", '/* kernellsp\nentry = "vector_add"').replace(
        "tunables", 'flags = ["--use_fast_math", "-DEVIL=1"]\ntunables'
    )
    at = base.index("/* kernellsp")
    cand = base[:at] + "__device__ float helper_x(float v) {\n" + evil + "\n    return v; }\n" + base[at:]
    first = specmod.entry_spec(parse_source(cand, "vector_add.cu"), "vector_add")
    assert first is not None and "--use_fast_math" in first.spec.flags  # what the build would use
    r = check_scope(base, cand, ["vector_add"], "vector_add.cu", "vector_add")
    assert (
        not r.ok
        and r.reason == "the candidate adds a launch spec for vector_add; edit the existing spec instead"
    )


# --------------------------------------------------------------------------------------------------
# Directives the baseline already has (issue 10): kept, moved within the function or deleted; never new

ARCH_BODY = (
    FIRST_STMT
    + "\n#if __CUDA_ARCH__ >= 800\n        y[i] = twice(x[i]);\n#else\n        y[i] = x[i] * SCALE;\n#endif\n    }"
)
ARCH_BASE = edit(FIRST_STMT + "\n        y[i] = twice(x[i]);\n    }", ARCH_BODY)


def test_arch_baseline_is_in_scope_of_itself() -> None:
    assert not parse_source(ARCH_BASE).syntax_errors
    assert scope(ARCH_BASE, base=ARCH_BASE).ok


ARCH_ACCEPTED = {
    "comment-only edit": ("int i = blockIdx.x", "// one thread per element\n    int i = blockIdx.x"),
    "body edit around the conditional": ("if (i < n) {", "if (i < n && n > 0) {"),
    "conditional kept, branches edited": ("y[i] = twice(x[i]);", "y[i] = 2.0f * x[i];"),
    "conditional deleted (one branch kept)": (
        "#if __CUDA_ARCH__ >= 800\n        y[i] = twice(x[i]);\n#else\n        y[i] = x[i] * SCALE;\n#endif\n",
        "        y[i] = twice(x[i]);\n",
    ),
    "conditional moved within the kernel": (
        FIRST_STMT
        + "\n#if __CUDA_ARCH__ >= 800\n        y[i] = twice(x[i]);\n#else\n        y[i] = x[i] * SCALE;\n#endif\n    }",
        "#if __CUDA_ARCH__ >= 800\n"
        + FIRST_STMT
        + "\n        y[i] = twice(x[i]);\n    }\n#else\n"
        + FIRST_STMT
        + "\n        y[i] = x[i] * SCALE;\n    }\n#endif",
    ),
    "directive written after a comment, same text": ("#else", "/* fallback */ #else"),
    "#pragma unroll added next to it": (
        "#if __CUDA_ARCH__ >= 800",
        "#pragma unroll\n#if __CUDA_ARCH__ >= 800",
    ),
    "new device helper with the comment above it": (
        SPEC_OPEN,
        "// thrice: used by the fast path\n__device__ float thrice(float v) { return 3.0f * v; }\n\n"
        + SPEC_OPEN,
    ),
}


@pytest.mark.parametrize("case", list(ARCH_ACCEPTED))
def test_directives_the_baseline_has_may_stay_move_or_go(case: str) -> None:
    old, new = ARCH_ACCEPTED[case]
    cand = edit(old, new, ARCH_BASE)
    r = scope(cand, base=ARCH_BASE)
    assert r.ok, f"{case}: {r.reason}"


ARCH_REJECTED = {
    "new conditional": (
        "int i = blockIdx.x",
        "#if __CUDA_ARCH__ >= 900\n    __nanosleep(0);\n#endif\n    int i = blockIdx.x",
        ("is new in this function", "'#if __CUDA_ARCH__ >= 900'", "kernel:scale"),
    ),
    "conditional text changed": (
        "#if __CUDA_ARCH__ >= 800",
        "#if __CUDA_ARCH__ >= 700",
        ("'#if __CUDA_ARCH__ >= 700'", "is new in this function"),
    ),
    "conditional duplicated": (
        "#else\n",
        "#else\n#if __CUDA_ARCH__ >= 800\n#endif\n",
        ("'#if __CUDA_ARCH__ >= 800'",),
    ),
    "#define inside the baseline's #if": (
        "#if __CUDA_ARCH__ >= 800\n",
        "#if __CUDA_ARCH__ >= 800\n#define FAST 1\n",
        ("'#define FAST 1'", "kernel:scale"),
    ),
    "conditional moved into a device helper": (
        "__device__ float twice(float v) { return v * SCALE; }",
        "__device__ float twice(float v) {\n#if __CUDA_ARCH__ >= 800\n    return v * SCALE;\n#else\n    return v + v;\n#endif\n}",
        ("new among the __device__ helpers", "(device)"),
    ),
    "push_macro pragma": (
        "int i = blockIdx.x",
        '#pragma push_macro("SCALE")\n    int i = blockIdx.x',
        ("'#pragma push_macro(\"SCALE\")'",),
    ),
    "_Pragma operator that renames a host symbol": (
        "int i = blockIdx.x",
        '_Pragma("redefine_extname cudaDeviceSynchronize cudaGetLastError");\n    int i = blockIdx.x',
        ("_Pragma(", "redefine_extname"),
    ),
    "directive joined by a line splice": (
        "int i = blockIdx.x",
        "\\\n#define SCALE 4.0f\n    int i = blockIdx.x",
        ("'#define SCALE 4.0f'",),
    ),
}


@pytest.mark.parametrize("case", list(ARCH_REJECTED))
def test_new_or_changed_directives_are_refused(case: str) -> None:
    old, new, words = ARCH_REJECTED[case]
    r = scope(edit(old, new, ARCH_BASE), base=ARCH_BASE)
    assert not r.ok, case
    for w in words:
        assert w in r.reason, f"{case}: {w!r} not in {r.reason!r}"


def test_unbalanced_conditionals_and_digraphs_are_found_where_the_parser_gives_up() -> None:
    """The parser reports these candidates as syntax errors; with a baseline that already has one (the parser does
    not know every CUDA construct), the gate's own scan of directives must still refuse them."""
    base = edit(
        "    scale<<<", "    const int tag = '/*'; /* the parser stumbles here */\n    scale<<<", ARCH_BASE
    )
    assert parse_source(base).syntax_errors and scope(base, base=base).ok
    for old, new, word in (
        ("#endif\n", "", "do not balance"),
        ("#if __CUDA_ARCH__ >= 800\n", "", "do not balance"),
        ("int i = blockIdx.x", "%:define SCALE 4.0f\n    int i = blockIdx.x", "'#define SCALE 4.0f'"),
        ("int i = blockIdx.x", "%:  undef SCALE\n    int i = blockIdx.x", "'#undef SCALE'"),
    ):
        r = scope(edit(old, new, base), base=base)
        assert not r.ok and word in r.reason, (new, r.reason)


def test_codegen_pragmas_may_be_added_others_may_not() -> None:
    for pragma in (
        "#pragma unroll",
        "#pragma unroll 8",
        "#pragma nounroll",
        "#pragma nv_diag_suppress 177",
        '_Pragma("unroll 4");',
    ):
        assert scope(edit(FIRST_STMT, f"    {pragma}\n" + FIRST_STMT)).ok, pragma
    for pragma in (
        '#pragma pop_macro("SCALE")',
        "#pragma redefine_extname cudaFree cudaGetLastError",
        "#pragma once",
        "_Pragma(MACRO);",
    ):
        r = scope(edit(FIRST_STMT, f"    {pragma}\n" + FIRST_STMT))
        assert not r.ok, pragma


DEFINE_BODY = (
    FIRST_STMT.replace("    int i", "#define TILE 32\n    int i")
    + "\n        y[i] = twice(x[i]) * TILE;\n    }\n#undef TILE"
)
DEFINE_BASE = edit(FIRST_STMT + "\n        y[i] = twice(x[i]);\n    }", DEFINE_BODY)


def test_state_changing_directives_stay_as_written() -> None:
    """#define/#undef in a kernel change what the host code after it sees: kept exactly, in order."""
    assert scope(DEFINE_BASE, base=DEFINE_BASE).ok
    # The body around them may change, and so may the code between them.
    assert scope(edit("twice(x[i]) * TILE", "TILE * twice(x[i])", DEFINE_BASE), base=DEFINE_BASE).ok
    assert scope(
        edit("#define TILE 32\n", "// the tile\n#define TILE 32\n", DEFINE_BASE), base=DEFINE_BASE
    ).ok
    # Deleting the #undef would leak TILE into the host code that follows.
    r = scope(edit("\n#undef TILE", "", DEFINE_BASE), base=DEFINE_BASE)
    assert not r.ok and "moves, reorders or deletes preprocessor directives in kernel:scale" in r.reason
    # Swapping them leaks it too.
    swapped = edit(
        "#define TILE 32\n", "#undef TILE\n", edit("\n#undef TILE", "\n#define TILE 32", DEFINE_BASE)
    )
    r = scope(swapped, base=DEFINE_BASE)
    assert not r.ok and "moves, reorders or deletes" in r.reason
    # And changing the text is a new directive.
    r = scope(edit("#define TILE 32", "#define TILE 64", DEFINE_BASE), base=DEFINE_BASE)
    assert not r.ok and "'#define TILE 64'" in r.reason


def test_a_helper_with_a_define_cannot_move_across_host_code() -> None:
    helper = "__device__ float twice(float v) { return v * SCALE; }"
    base = edit(helper, "__device__ float twice(float v) {\n#define HALF 0.5f\n    return v * SCALE;\n}")
    assert scope(base, base=base).ok
    moved_helper = base[
        base.index("__device__ float twice") : base.index("}\n", base.index("#define HALF")) + 2
    ]
    # The same helper after the host function: host_fn no longer sees HALF.
    cand = base.replace(moved_helper, "", 1) + "\n" + moved_helper
    assert cand != base
    r = scope(cand, base=base)
    assert not r.ok and "moves, reorders or deletes preprocessor directives in device" in r.reason


# --------------------------------------------------------------------------------------------------
# Comments never decide scope (issue 15 item 11); spec blocks still do


COMMENT_ACCEPTED = {
    "comment above a new device helper": (
        SPEC_OPEN,
        "// thrice(v): 3v, for the unrolled path\n"
        "__device__ float thrice(float v) { return 3.0f * v; }\n\n" + SPEC_OPEN,
    ),
    "block comment above a new device helper": (
        SPEC_OPEN,
        "/* thrice(v)\n * returns 3v\n */\n"
        "__device__ float thrice(float v) { return 3.0f * v; }\n" + SPEC_OPEN,
    ),
    "comment between spec block and kernel": (SIG, "// grid-stride version\n" + SIG),
    "comment in host code": ("    scale<<<", "    // one thread per element\n    scale<<<"),
    "comment at the end of a host line": (
        "scale<<<(n + 255) / 256, 256>>>(x, y, n);",
        "scale<<<(n + 255) / 256, 256>>>(x, y, n);  /* async */",
    ),
    "comment after a macro": ("#define SCALE 2.0f", "#define SCALE 2.0f  // the factor"),
    "comment in another kernel": ("if (i < n) y[i] = 0.0f;", "if (i < n) y[i] = 0.0f;  // clear"),
    "directive-looking lines inside a comment in the kernel": (
        FIRST_STMT,
        '    /*\n#define SCALE 9.0f\n#include "x.h"\n*/\n' + FIRST_STMT,
    ),
    "blank lines and indentation in host code": ("void host_fn(", "\n\nvoid  host_fn("),
}


@pytest.mark.parametrize("case", list(COMMENT_ACCEPTED))
def test_comments_never_decide_scope(case: str) -> None:
    old, new = COMMENT_ACCEPTED[case]
    r = scope(edit(old, new))
    assert r.ok, f"{case}: {r.reason}"


COMMENT_REJECTED = {
    "code behind a comment in host code": (
        "scale<<<(n + 255) / 256, 256>>>(x, y, n);",
        "/* launch */ scale<<<(n + 127) / 128, 128>>>(x, y, n);",
    ),
    "comment that swallows a host line (line splice)": ("    scale<<<", "    // see below \\\n    scale<<<"),
    "comment joins a directive to code": ("#define SCALE 2.0f\n", "#define SCALE 2.0f /*\n*/ + 1.0f\n"),
    "newline removed after a directive": ("#include <math.h>\n\n#define", "#include <math.h> /* */ #define"),
    "another kernel's spec block": (
        "__global__ void other(float* y, int n)",
        "/* kernellsp\nsizes = { N = 8 }\n*/\n__global__ void other(float* y, int n)",
    ),
    "a spec-looking line comment run": ("void host_fn(", "// kernellsp\n// sizes = { N = 8 }\nvoid host_fn("),
}


@pytest.mark.parametrize("case", list(COMMENT_REJECTED))
def test_comments_do_not_hide_changes(case: str) -> None:
    old, new = COMMENT_REJECTED[case]
    r = scope(edit(old, new))
    assert not r.ok, case


def test_a_comment_the_parser_misreads_is_compared_as_code() -> None:
    """tree-sitter reads ``'/*'`` as the start of a comment; the compiler reads a character literal and code.

    A baseline that already has such a line parses with an error, so the candidate may too; if the gate
    dropped the parser's "comment", the host code behind it could change unseen.
    """
    base = edit("    scale<<<", "    const int tag = '/*'; cudaDeviceSynchronize(); /* sync */\n    scale<<<")
    assert parse_source(base).syntax_errors  # the parser is confused: the premise of the test
    cand = edit("cudaDeviceSynchronize();", "cudaGetLastError();", base)
    r = scope(cand, base=base)
    assert not r.ok and OUTSIDE in r.reason
    assert scope(base, base=base).ok


def test_non_target_spec_blocks_are_compared_as_written() -> None:
    base = edit(
        "__global__ void other(float* y, int n)",
        '/* kernellsp\nsizes = { N = 64 }\nlaunch = { grid = 1, block = 64 }\n[args]\ny = { dtype = "f32", '
        'dir = "out", count = "N" }\nn = { value = "N" }\n*/\n__global__ void other(float* y, int n)',
    )
    assert scope(base, base=base).ok
    r = scope(edit("sizes = { N = 64 }", "sizes = { N = 32 }", base), base=base)
    assert not r.ok and OUTSIDE in r.reason
    # A comment next to it is still just a comment.
    assert scope(
        edit(
            "/* kernellsp\nsizes = { N = 64 }",
            "// the zeroing kernel\n/* kernellsp\nsizes = { N = 64 }",
            base,
        ),
        base=base,
    ).ok


# --------------------------------------------------------------------------------------------------
# Allow-listed toolkit headers (issue 11 item 5)

INCLUDES = "#include <cuda_runtime.h>\n#include <math.h>\n"


@pytest.mark.parametrize(
    "header",
    [
        "<cub/cub.cuh>",
        "<cooperative_groups.h>",
        "<cuda_pipeline.h>",
        "<cuda_fp16.h>",
        "<cuda_bf16.h>",
        "<mma.h>",
    ],
)
def test_allow_listed_header_may_be_added_at_the_top(header: str) -> None:
    for where, old, new in (
        ("after the includes", INCLUDES, INCLUDES + f"#include {header}\n"),
        (
            "among the includes",
            INCLUDES,
            f"#include <cuda_runtime.h>\n#include {header}\n#include <math.h>\n",
        ),
        ("first", INCLUDES, f"#include {header}\n" + INCLUDES),
        (
            "after the macro below the includes",
            "#define SCALE 2.0f\n",
            f"#define SCALE 2.0f\n#include {header}\n",
        ),
    ):
        r = scope(edit(old, new))
        assert r.ok, f"{header} {where}: {r.reason}"
    assert ALLOWED_INCLUDES.count(header) == 1


INCLUDE_REJECTED = {
    "another system header": (
        INCLUDES,
        INCLUDES + "#include <cstdio>\n",
        ("'#include <cstdio>'", "not among the headers"),
    ),
    "a toolkit header off the list": (
        INCLUDES,
        INCLUDES + "#include <cuda/std/chrono>\n",
        ("not among the headers",),
    ),
    "quoted include": (INCLUDES, INCLUDES + '#include "cub/cub.cuh"\n', ("quoted include",)),
    "quoted absolute path": (INCLUDES, INCLUDES + '#include "/root/.ssh/id_rsa"\n', ("quoted include",)),
    "include with a macro": (INCLUDES, INCLUDES + "#include SCALE_HEADER\n", ("through a macro",)),
    "spaces inside the brackets": (
        INCLUDES,
        INCLUDES + "#include < cuda_fp16.h >\n",
        ("not among the headers",),
    ),
    "added after code": ("void host_fn(", "#include <cuda_fp16.h>\nvoid host_fn(", ("after code",)),
    "added after the first device helper": (
        "/* kernellsp",
        "#include <mma.h>\n/* kernellsp",
        ("after code",),
    ),
    "added inside a file-scope conditional": (
        INCLUDES,
        INCLUDES + "#ifdef __CUDACC__\n#include <cuda_fp16.h>\n#endif\n",
        ("inside preproc_ifdef",),
    ),
    "added twice": (INCLUDES, INCLUDES + "#include <cuda_fp16.h>\n#include <cuda_fp16.h>\n", ("twice",)),
    "added inside the kernel": (
        FIRST_STMT,
        "#include <cuda_fp16.h>\n" + FIRST_STMT,
        ("'#include <cuda_fp16.h>'", "kernel:scale"),
    ),
    "a baseline include swapped for an allowed one": (
        "#include <math.h>\n",
        "#include <cuda_fp16.h>\n",
        (OUTSIDE,),
    ),
}


@pytest.mark.parametrize("case", list(INCLUDE_REJECTED))
def test_other_includes_are_refused(case: str) -> None:
    old, new, words = INCLUDE_REJECTED[case]
    r = scope(edit(old, new))
    assert not r.ok, case
    for w in words:
        assert w in r.reason, f"{case}: {w!r} not in {r.reason!r}"


def test_an_added_header_keeps_the_rest_compared() -> None:
    """The allowed include is left out of the comparison, nothing else: a host edit beside it is still refused."""
    cand = edit(INCLUDES, INCLUDES + "#include <cooperative_groups.h>\n")
    assert scope(cand).ok
    r = scope(edit("scale<<<(n + 255) / 256, 256>>>", "scale<<<1, 1>>>", cand))
    assert not r.ok and OUTSIDE in r.reason


def test_add_includes_puts_headers_where_the_scope_gate_lets_a_rewrite_add_them() -> None:
    """A recipe's allow-listed header goes right after the file's top includes (or on top when it has none),
    once, and the result passes the scope gate; a header the file has is not added again."""
    from kernellsp.optimize.propose.base import add_includes

    body = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"
    spec = '/* kernellsp\nsizes = { N = 32 }\nlaunch = { grid = 1, block = 32 }\n[args]\nx = { dtype = "f32", dir = "out", count = "N" }\n*/\n'
    cases = {
        "top includes": "// license\n#include <cuda_runtime.h>\n#include <cstdio>\n\n" + spec + body,
        "no includes": spec + body,
        "no newline after the last include": "#include <cuda_runtime.h>",
    }
    for what, text in cases.items():
        out = add_includes(text, ["<mma.h>", "<cuda_fp16.h>"])
        assert out.count("#include <mma.h>") == 1 and out.count("#include <cuda_fp16.h>") == 1, what
        assert (
            out.replace("#include <mma.h>\n", "")
            .replace("#include <cuda_fp16.h>\n", "")
            .replace("\n#include", "#include")
            .strip()
            == text.replace("\n#include", "#include").strip()
        ), what
    text = cases["top includes"]
    out = add_includes(text, ["<mma.h>"])
    lines = out.splitlines()
    assert lines.index("#include <mma.h>") == lines.index("#include <cstdio>") + 1
    assert check_scope(text, out, ["k"], entry="k").ok
    assert add_includes(out, ["<mma.h>"]) == out
    # A header the file already names, however the directive is spaced or commented, is not added again.
    spaced = "#  include <mma.h>  // tensor cores\n#include <cuda_fp16.h>\n" + body
    assert add_includes(spaced, ["<mma.h>", "<cuda_fp16.h>"]) == spaced
