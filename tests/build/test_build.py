"""Build analysis with the real nvcc: ptxas resources, compiler messages, SASS per line, cache and timeouts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.common import requires_nvcc

from kernellsp.build import nvcc as build
from kernellsp.build import ptxas, sass, toolchain
from kernellsp.build.nvcc import BuildResult, match_kernel
from kernellsp.build.ptxas import CompilerMessage, KernelResources, parse_compiler_output
from kernellsp.source.model import parse_source

# Captured from `nvcc -arch=sm_90 -cubin -lineinfo -Xptxas -v` (CUDA 13.0.88) on RESOURCES_CU below
# plus a spilling kernel capped by __launch_bounds__(1024, 2) that calls a __noinline__ function.
PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_ZN5outer5inner3nskEPi' for 'sm_90'
ptxas info    : Function properties for _ZN5outer5inner3nskEPi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compile time = 2.455 ms
ptxas info    : Compiling entry function 'cfun' for 'sm_90'
ptxas info    : Function properties for cfun
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compile time = 0.950 ms
ptxas info    : Compiling entry function '_Z4tmplIdEvPT_' for 'sm_90'
ptxas info    : Function properties for _Z4tmplIdEvPT_
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compile time = 1.052 ms
ptxas info    : Compiling entry function '_Z4tmplIfEvPT_' for 'sm_90'
ptxas info    : Function properties for _Z4tmplIfEvPT_
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compile time = 0.611 ms
ptxas info    : Compiling entry function '_Z11with_sharedPKfPf' for 'sm_90'
ptxas info    : Function properties for _Z11with_sharedPKfPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 14 registers, used 1 barriers, 2048 bytes smem
ptxas info    : Compile time = 1.129 ms
ptxas info    : Compiling entry function '_Z11local_arrayPKiPfi' for 'sm_90'
ptxas info    : Function properties for _Z11local_arrayPKiPfi
    256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 26 registers, used 0 barriers, 256 bytes cumulative stack size
ptxas info    : Compile time = 3.832 ms
ptxas info    : Compiling entry function '_Z5plainPKfPfi' for 'sm_90'
ptxas info    : Function properties for _Z5plainPKfPfi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers
ptxas info    : Compile time = 1.454 ms
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z7spillerPKfPfi' for 'sm_90'
ptxas info    : Function properties for _Z7spillerPKfPfi
    1184 bytes stack frame, 1600 bytes spill stores, 2008 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 1184 bytes cumulative stack size
ptxas info    : Compile time = 72.402 ms
ptxas info    : Function properties for _Z12dev_noinlinePfi
    0 bytes stack frame, 0 bytes spill stores, 4 bytes spill loads
"""

# The CUDA 11/12 form of the "Used" line also reports constant banks.
PTXAS_LOG_CUDA12 = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_80'
ptxas info    : Function properties for _Z6kernelPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, 360 bytes cmem[0], 8 bytes cmem[2]
"""

RESOURCES_CU = """\
#include <cstdint>
__device__ float helper(float x) { return x * 2.0f; }

__global__ void plain(const float* __restrict__ a, float* b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = helper(a[i]);
}

__global__ void local_array(const int* idx, float* out, int n)
{
    float buf[64];
    for (int k = 0; k < 64; ++k) buf[k] = k * 1.5f;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = buf[idx[i] & 63];
}

__global__ void with_shared(const float* in, float* out)
{
    __shared__ float tile[512];
    tile[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = tile[511 - threadIdx.x];
}

template <typename T>
__global__ void tmpl(T* p) { p[threadIdx.x] += T(1); }
template __global__ void tmpl<double>(double*);
template __global__ void tmpl<float>(float*);

namespace outer { namespace inner {
__global__ void nsk(int* p) { p[0] = 1; }
} }

extern "C" __global__ void cfun(int* p) { atomicAdd(p, 1); }
"""


def test_parse_ptxas_real_log() -> None:
    res = ptxas.parse_ptxas(PTXAS_LOG)
    by = {r.mangled: r for r in res}
    # Entry functions only, in the order ptxas compiled them; the __noinline__ helper is skipped.
    assert [r.mangled for r in res] == [
        "_ZN5outer5inner3nskEPi",
        "cfun",
        "_Z4tmplIdEvPT_",
        "_Z4tmplIfEvPT_",
        "_Z11with_sharedPKfPf",
        "_Z11local_arrayPKiPfi",
        "_Z5plainPKfPfi",
        "_Z7spillerPKfPfi",
    ]
    assert by["_Z5plainPKfPfi"] == KernelResources("_Z5plainPKfPfi", registers=10)
    assert by["_Z11with_sharedPKfPf"] == KernelResources(
        "_Z11with_sharedPKfPf", registers=14, smem_static=2048, barriers=1
    )
    assert by["_Z11local_arrayPKiPfi"] == KernelResources(
        "_Z11local_arrayPKiPfi", registers=26, stack_frame=256, cumulative_stack=256
    )
    sp = by["_Z7spillerPKfPfi"]
    assert (sp.registers, sp.stack_frame, sp.spill_stores, sp.spill_loads) == (32, 1184, 1600, 2008)
    assert "_Z12dev_noinlinePfi" not in by


def test_parse_ptxas_cmem_and_empty_input() -> None:
    (r,) = ptxas.parse_ptxas(PTXAS_LOG_CUDA12)
    assert (r.mangled, r.registers, r.cmem) == ("_Z6kernelPf", 10, 368)
    assert ptxas.parse_ptxas("") == []
    assert ptxas.parse_ptxas("garbage\n\x00\nptxas info    : Used 3 registers\n") == []


def test_parse_compiler_output_nvcc_style() -> None:
    # Real nvcc (EDG front end) output, as printed for /tmp/x/k.cu and a header it includes.
    text = (
        '/tmp/x/k.cu(3): error: identifier "undefined_call" is undefined\n'
        "      undefined_call(1);\n"
        "      ^\n\n"
        'k.cu(12): warning #177-D: variable "unused" was declared but never referenced\n'
        '/tmp/x/hdr.h(1): error: identifier "undefined_in_header" is undefined\n'
        'Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"\n'
        '1 error detected in the compilation of "k.cu".\n'
    )
    msgs = parse_compiler_output(text, "/somewhere/else/k.cu")
    assert msgs == [
        CompilerMessage("error", 'identifier "undefined_call" is undefined', 2, None),
        CompilerMessage("warning", 'variable "unused" was declared but never referenced', 11, "177-D"),
        # A header's message names the header and its line: check puts it on the #include that brings it in.
        CompilerMessage(
            "error",
            'identifier "undefined_in_header" is undefined',
            None,
            None,
            file="/tmp/x/hdr.h",
            file_line=1,
        ),
    ]


def test_parse_compiler_output_gcc_and_tool_style() -> None:
    text = (
        "k.cu:1:10: fatal error: missing_header.h: No such file or directory\n"
        "    1 | #include <missing_header.h>\n"
        "k.cu:7: warning: something without a column\n"
        "other.h:4:2: error: in a header\n"
        "ptxas /tmp/tmpxft_00002b16_00000000-6_ptx.ptx, line 23; error   : Unknown modifier '.instr'\n"
        "ptxas fatal   : Ptx assembly aborted due to errors\n"
        "nvlink error   : Undefined reference to '_Z1gv'\n"
    )
    msgs = parse_compiler_output(text, "k.cu")
    assert [(m.severity, m.line, m.tool) for m in msgs] == [
        ("error", 0, "nvcc"),
        ("warning", 6, "nvcc"),
        ("error", None, "nvcc"),
        ("error", None, "ptxas"),
        ("error", None, "ptxas"),
        ("error", None, "nvlink"),
    ]
    assert msgs[0].message == "missing_header.h: No such file or directory"
    assert (msgs[2].message, msgs[2].file, msgs[2].file_line) == ("in a header", "other.h", 4)
    assert msgs[3].message == "Unknown modifier '.instr'"
    assert msgs[4].message == "Ptx assembly aborted due to errors"


def test_sass_class() -> None:
    assert sass.sass_class("DFMA") == ["fp64"]
    assert sass.sass_class("F2F.F64.F32") == ["fp64"]
    assert sass.sass_class("LDL.64") == ["local_ld"]
    assert sass.sass_class("STL") == ["local_st"]
    assert sass.sass_class("REDG.E.ADD.F32.FTZ.RN.STRONG.GPU") == ["atomic_global"]
    assert sass.sass_class("ATOMS.ADD") == ["atomic_shared"]
    assert sass.sass_class("LDG.E.128") == ["global_ld"]
    assert sass.sass_class("BAR.SYNC.DEFER_BLOCKING") == ["barrier"]
    assert sass.sass_class("MUFU.EX2") == ["sfu"]
    assert sass.sass_class("IMAD.WIDE") == []


@pytest.mark.parametrize(
    ("mangled", "name", "want"),
    [
        ("_Z5plainPKfPfi", "plain", True),
        ("_Z5plainPKfPfi", "plai", False),
        ("_Z5plainPKfPfi", "lain", False),
        ("_Z4tmplIfEvPT_", "tmpl", True),
        ("_Z4tmplIdEvPT_", "tmpl", True),
        ("_ZN5outer5inner3nskEPi", "nsk", True),
        ("_ZN5outer5inner3nskEPi", "inner", True),  # a namespace component also matches by name
        ("_ZN5outer5inner3nskEPi", "sk", False),
        ("cfun", "cfun", True),
        ("cfun", "cfu", False),
        ("cfun2", "cfun", False),
        ("_Z11with_sharedPKfPf", "shared", False),
        ("_Z11local_arrayPKiPfi", "local_array", True),
        ("_Z13tiled_kernel2ILi16EEvPf", "tiled_kernel2", True),
        ("_Z13tiled_kernel2ILi16EEvPf", "tiled_kernel", False),
    ],
)
def test_match_kernel(mangled: str, name: str, want: bool) -> None:
    assert match_kernel(mangled, name) is want


# --------------------------------------------------------------------------------------------------
# With the real tools


@pytest.fixture(scope="module")
def resources_build(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    if toolchain.find_tool("nvcc") is None:
        pytest.skip("nvcc is not installed")
    d = tmp_path_factory.mktemp("build")
    path = d / "res.cu"
    path.write_text(RESOURCES_CU)
    return build.build(path, RESOURCES_CU, parse_source(RESOURCES_CU, str(path)), use_cache=False)


def _res(result: BuildResult, name: str) -> KernelResources:
    hits = [r for r in result.resources if match_kernel(r.mangled, name)]
    assert len(hits) == 1, (name, [r.mangled for r in result.resources])
    return hits[0]


@requires_nvcc
def test_build_reports_resources(resources_build: BuildResult) -> None:
    r = resources_build
    assert r.ok and r.error is None and not r.cached and r.messages == []
    assert r.arch == "sm_90" and r.nvcc_version
    assert len(r.resources) == 7
    plain = _res(r, "plain")
    assert 4 <= plain.registers <= 32 and plain.stack_frame == 0 and plain.smem_static == 0
    local = _res(r, "local_array")
    assert local.stack_frame >= 64 * 4, "a 64-float array indexed at run time lives in local memory"
    assert local.spill_stores == 0 and local.spill_loads == 0
    shared = _res(r, "with_shared")
    assert shared.smem_static == 512 * 4 and shared.barriers == 1
    assert {x.mangled for x in r.resources if match_kernel(x.mangled, "tmpl")} == {
        "_Z4tmplIdEvPT_",
        "_Z4tmplIfEvPT_",
    }
    assert _res(r, "cfun").mangled == "cfun"
    assert _res(r, "nsk").mangled == "_ZN5outer5inner3nskEPi"


@requires_nvcc
def test_build_sass_lines(resources_build: BuildResult) -> None:
    r = resources_build
    assert r.sass_available, "nvdisasm (nvidia-cuda-nvdisasm) is part of the test extras"
    lines = RESOURCES_CU.split("\n")
    shared = r.sass_lines["_Z11with_sharedPKfPf"]
    barrier_lines = [ln for ln, c in shared.items() if c.get("barrier")]
    assert [lines[ln].strip() for ln in barrier_lines] == ["__syncthreads();"]
    # Both template instantiations get SASS on the template's line, the second one too (nvdisasm
    # prints no new line marker when a function starts on the previous function's last line).
    tmpl_line = next(i for i, t in enumerate(lines) if "p[threadIdx.x] += T(1)" in t)
    assert r.sass_lines["_Z4tmplIdEvPT_"][tmpl_line].get("fp64", 0) >= 1
    assert r.sass_lines["_Z4tmplIfEvPT_"][tmpl_line].get("fp32", 0) >= 1
    assert r.sass_lines["_Z4tmplIfEvPT_"][tmpl_line].get("fp64", 0) == 0
    # The atomic inlined from device_atomic_functions.hpp is charged to the call site.
    cfun_line = next(i for i, t in enumerate(lines) if "atomicAdd(p, 1)" in t)
    assert r.sass_lines["cfun"][cfun_line].get("atomic_global", 0) >= 1
    local_lines = {
        lines[ln].strip()
        for ln, c in r.sass_lines["_Z11local_arrayPKiPfi"].items()
        if c.get("local_ld") or c.get("local_st")
    }
    assert "if (i < n) out[i] = buf[idx[i] & 63];" in local_lines


@requires_nvcc
def test_parse_nvdisasm_on_real_output(tmp_path: Path) -> None:
    nvcc, nvdisasm = toolchain.find_tool("nvcc"), toolchain.find_tool("nvdisasm")
    assert nvcc is not None and nvdisasm is not None, "nvdisasm comes with the test extras"
    src = tmp_path / "dis.cu"
    src.write_text(
        "__global__ void dbl(const float* x, float* y, int n)\n"
        "{\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) {\n"
        "        y[i] = x[i] * 0.1;\n"
        "    }\n"
        "}\n"
    )
    cubin = tmp_path / "dis.cubin"
    subprocess.run(
        [nvcc, "-arch=sm_90", "-cubin", "-lineinfo", "-o", str(cubin), str(src)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    out = subprocess.run(
        [nvdisasm, "-c", "-g", str(cubin)], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    assert '//## File "' in out
    lines = sass.parse_nvdisasm(out, str(src))
    assert list(lines) == ["_Z3dblPKfPfi"]
    per_line = lines["_Z3dblPKfPfi"]
    assert per_line[4]["fp64"] >= 2  # F2F.F64.F32, DMUL, F2F.F32.F64
    assert per_line[4]["global_ld"] == 1 and per_line[4]["global_st"] == 1
    assert all(c.get("fp64", 0) == 0 for ln, c in per_line.items() if ln != 4)
    assert sum(c["total"] for c in per_line.values()) >= 10
    # Another file name: nothing of it is charged to lines of this one.
    assert sass.parse_nvdisasm(out, str(tmp_path / "other.cu")) == {"_Z3dblPKfPfi": {}}


BAD_CU = """\
__global__ void k(float* a)
{
    int unused = 3;
    a[0] = undefined_thing;
}
"""


@requires_nvcc
def test_compile_errors_become_messages_on_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "bad.cu"
    r = build.build(path, BAD_CU, parse_source(BAD_CU), use_cache=False)
    assert not r.ok and r.error is None
    assert r.resources == [] and not r.sass_available
    errors = [m for m in r.messages if m.severity == "error"]
    warnings = [m for m in r.messages if m.severity == "warning"]
    assert [(m.line, m.message) for m in errors] == [(3, 'identifier "undefined_thing" is undefined')]
    assert [(m.line, m.code) for m in warnings] == [(2, "177-D")]


@requires_nvcc
def test_build_compiles_the_buffer_not_the_file(tmp_path: Path) -> None:
    path = tmp_path / "buf.cu"
    path.write_text(BAD_CU)  # what is on disk does not compile ...
    good = "__global__ void k(float* a) { a[0] = 1.0f; }\n"
    r = build.build(path, good, parse_source(good), use_cache=False)  # ... but the buffer does
    assert r.ok and [x.mangled for x in r.resources] == ["_Z1kPf"]


@requires_nvcc
def test_local_includes_are_found(tmp_path: Path) -> None:
    (tmp_path / "hdr.h").write_text(
        '#include "deeper.h"\n__device__ int helper(int x) { return x + DEEP; }\n'
    )
    (tmp_path / "deeper.h").write_text("#define DEEP 3\n")
    text = '#include "hdr.h"\n#include <cuda_runtime.h>\n__global__ void k(int* p) { p[0] = helper(1); }\n'
    path = tmp_path / "inc.cu"
    model = parse_source(text, str(path))
    assert build.local_includes(model, path) == [
        (tmp_path / "hdr.h").resolve(),
        (tmp_path / "deeper.h").resolve(),
    ]
    r = build.build(path, text, model, use_cache=False)
    assert r.ok, r.messages


@requires_nvcc
def test_cache_hit_on_second_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELLSP_CACHE_DIR", str(tmp_path / "cache"))
    text = "__global__ void cached_k(float* a) { a[threadIdx.x] = 2.0f; }\n"
    path = tmp_path / "c.cu"
    model = parse_source(text, str(path))
    first = build.build(path, text, model)
    assert first.ok and not first.cached
    second = build.build(path, text, model)
    assert second.cached
    assert second.resources == first.resources and second.sass_lines == first.sass_lines
    # Any change to the text, the flags or the arch is a different key.
    changed = text.replace("2.0f", "3.0f")
    assert not build.build(path, changed, parse_source(changed)).cached
    assert not build.build(path, text, model, extra_flags=["-DX=1"]).cached
    assert not build.build(path, text, model, arch="sm_80").cached
    assert build.build(path, text, model, arch="sm_80").cached
    # use_cache=False neither reads nor is confused by the cache.
    assert not build.build(path, text, model, use_cache=False).cached


@requires_nvcc
def test_round_trip_of_cached_result(resources_build: BuildResult) -> None:
    back = BuildResult.from_dict(resources_build.to_dict())
    assert back.resources == resources_build.resources
    assert back.sass_lines == resources_build.sass_lines
    assert back.messages == resources_build.messages


@requires_nvcc
def test_timeout_is_an_error_not_an_exception(tmp_path: Path) -> None:
    path = tmp_path / "slow.cu"
    r = build.build(path, RESOURCES_CU, parse_source(RESOURCES_CU), use_cache=False, timeout_s=0.001)
    assert not r.ok
    assert r.error is not None and "nvcc did not finish within 0.001 s on slow.cu" in r.error
    assert "build_timeout_s" in r.error and r.timed_out
    assert r.resources == []


def test_response_files_are_expanded_relative_to_the_entry_directory(tmp_path: Path) -> None:
    """``--options-file F``, ``--options-file=F``, ``-optf F`` and ``@F`` (CMake's Makefile generator passes the
    include folders that way), nested, quoted; a missing file is dropped."""
    from kernellsp.build.flags import compile_command_flags

    (tmp_path / "inc a").mkdir()
    (tmp_path / "rsp").mkdir()
    (tmp_path / "rsp" / "includes.rsp").write_text('-I"inc a" --options-file=rsp/defs.rsp\n')
    (tmp_path / "rsp" / "defs.rsp").write_text("-DUSE_X=1 -isystem sys\n")
    (tmp_path / "more.rsp").write_text("-std=c++17")
    argv = ["nvcc", "--options-file", "rsp/includes.rsp", "@more.rsp", "-optf", "gone.rsp", "-c", "k.cu"]
    args, dirs = compile_command_flags(argv, tmp_path)
    inc, sys_inc = str((tmp_path / "inc a").resolve()), str((tmp_path / "sys").resolve())
    assert args == ["-I", inc, "-DUSE_X=1", "-isystem", sys_inc, "-std=c++17"]
    assert dirs == [Path(inc), Path(sys_inc)]
