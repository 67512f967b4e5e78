"""A new user's first hour (issue 15): each rough edge reproduced with the exact input, through the real CLI and
the real nvcc, plus the walk-through on the samples and on a CMake-style project (tests/fixtures/cmake_project)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.common import REPO, requires_nvcc
from typer.testing import CliRunner, Result

from kernellsp.build import toolchain
from kernellsp.cli import app

FIXTURE = REPO / "tests" / "fixtures" / "cmake_project"
#: gcc's layout: `path:line:col: severity: CODE message` (issue 15 item 9).
FINDING = re.compile(
    r"^(?P<path>[^:\s][^:]*):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|info|hint): "
    r"(?P<code>KL\d{3}) (?P<msg>.*)$"
)


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def findings(result: Result) -> list[tuple[str, int, str, str]]:
    """``(file name, line, code, message)`` of each finding line of a text report."""
    out = []
    for ln in result.stdout.splitlines():
        m = FINDING.match(ln)
        if m:
            out.append((Path(m["path"]).name, int(m["line"]), m["code"], m["msg"]))
    return out


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------------
# Item 1: broken files never pass silently


@requires_nvcc
def test_a_broken_header_and_a_kernel_less_file_are_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "helpers.cuh", "#pragma once\n__device__ inline float sq(float x) { return x * x }\n")
    write(tmp_path / "dev.cu", "__device__ float twice(float x)\n{\n    return 2.0f * x\n}\n")
    write(tmp_path / "host.cu", '#include <cstdio>\nint main() { std::printf("%d\\n", 1) return 0; }\n')
    result = invoke("check", ".")
    assert result.exit_code == 1, result.output
    got = {(name, line, code) for name, line, code, _ in findings(result)}
    # The header is compiled in a unit of its own and its error sits on its own line; the files without a
    # kernel are compiled as they are.
    assert ("helpers.cuh", 2, "KL001") in got
    assert ("dev.cu", 4, "KL001") in got  # nvcc notices the missing ';' at the closing brace
    assert ("host.cu", 2, "KL001") in got
    assert "No findings" not in result.stdout


@requires_nvcc
def test_a_good_header_and_host_only_file_stay_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "ok.cuh", "#pragma once\ntemplate <typename T>\n__device__ T sq(T x) { return x * x; }\n"
    )
    write(
        tmp_path / "main.cu",
        '#include "ok.cuh"\n#include <cstdio>\nint main() { std::printf("hi\\n"); return 0; }\n',
    )
    result = invoke("check", ".")
    assert result.exit_code == 0, result.output
    assert "No findings in 2 files" in result.stdout


@requires_nvcc
def test_invalid_utf8_is_a_finding_not_silence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "latin.cu").write_bytes(b"// caf\xe9\n__device__ float f(float x) { return x; }\n")
    result = invoke("check", "latin.cu")
    assert result.exit_code == 1
    [(name, line, code, msg)] = findings(result)
    assert (name, line, code) == ("latin.cu", 1, "KL006")
    assert "byte 0xe9 at column 7 is not UTF-8" in msg
    (tmp_path / "wide.cu").write_bytes("__global__ void k() {}\n".encode("utf-16"))
    result = invoke("check", "wide.cu")
    assert result.exit_code == 2
    assert "the file is UTF-16; nvcc and kernellsp read UTF-8" in result.stdout


# --------------------------------------------------------------------------------------------------
# Items 3 and 6: include paths, defines, compile_commands.json; a header's error at the #include line

HEADER_USER = """\
#include <cstdio>
#include "helpers.cuh"

__global__ void k(float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sq(y[i]) * SCALE;
}
"""


@requires_nvcc
def test_include_dirs_and_defines_from_the_command_line_and_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "include" / "helpers.cuh",
        "#pragma once\n__device__ inline float sq(float x) { return x * x; }\n",
    )
    write(tmp_path / "src" / "k.cu", HEADER_USER)
    bare = invoke("check", "src", "--ignore", "KL004")
    assert bare.exit_code == 1
    assert [(n, ln, c) for n, ln, c, _ in findings(bare)] == [("k.cu", 2, "KL001")]
    assert "helpers.cuh: No such file or directory" in bare.stdout
    flagged = invoke("check", "src", "--ignore", "KL004", "-I", "include", "-D", "SCALE=2.0f")
    assert flagged.exit_code == 0, flagged.output
    # The same through kernellsp.toml [settings]; relative folders are the workspace root's.
    write(
        tmp_path / "kernellsp.toml",
        '[settings]\ninclude_dirs = ["include"]\ndefines = ["SCALE=2.0f"]\nignore = ["KL004"]\n',
    )
    assert invoke("check", "src").exit_code == 0
    # The flags are part of the cache key: a different define rebuilds and its error shows.
    broken = invoke("check", "src", "-D", "SCALE=undefined_name")
    assert broken.exit_code == 1 and 'identifier "undefined_name" is undefined' in broken.stdout
    # Flags kernellsp sets itself are refused by name.
    write(tmp_path / "kernellsp.toml", '[settings]\nextra_flags = ["-arch=sm_80"]\n')
    refused = invoke("check", "src")
    assert (
        refused.exit_code == 2 and "setting 'extra_flags': '-arch=sm_80' is kernellsp's own" in refused.output
    )


@requires_nvcc
def test_a_header_error_is_reported_at_the_include_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "include" / "inner.cuh",
        "#pragma once\n\n__device__ inline float bad(float x) { return x }\n",
    )
    write(
        tmp_path / "include" / "helpers.cuh",
        '#pragma once\n#include "inner.cuh"\n__device__ inline float sq(float x) { return x * x; }\n',
    )
    write(tmp_path / "src" / "k.cu", HEADER_USER)
    result = invoke("check", "src/k.cu", "-I", "include", "-D", "SCALE=1", "--ignore", "KL004")
    [(name, line, code, msg)] = findings(result)
    # inner.cuh is included through helpers.cuh, which k.cu includes on line 2.
    assert (name, line, code) == ("k.cu", 2, "KL001")
    assert msg == 'nvcc: in ../include/inner.cuh:3: expected a ";"'


@requires_nvcc
def test_nvcc_prepend_flags_are_part_of_the_cache_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "include" / "helpers.cuh",
        "#pragma once\n__device__ inline float sq(float x) { return x * x; }\n",
    )
    write(tmp_path / "src" / "k.cu", HEADER_USER)
    assert invoke("check", "src", "--ignore", "KL004").exit_code == 1  # cached: the header is not found
    monkeypatch.setenv("NVCC_PREPEND_FLAGS", f"-I{tmp_path / 'include'} -DSCALE=3")
    assert invoke("check", "src", "--ignore", "KL004").exit_code == 0


def compile_commands(project: Path) -> None:
    """build/compile_commands.json as CMake 3.25 writes it for the fixture (nvcc as the CUDA compiler)."""
    build = project / "build"
    build.mkdir(exist_ok=True)
    entries = []
    for name, target in (
        ("reduce", "kldemo"),
        ("axpy", "kldemo"),
        ("transpose", "kldemo"),
        ("main", "kldemo_main"),
    ):
        src = project / "src" / f"{name}.cu"
        entries.append(
            {
                "directory": str(build),
                "command": f"/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DKLDEMO_BLOCK=256 "
                f"-I{project / 'include'}  --generate-code=arch=compute_90,code=[compute_90,sm_90] -x cu "
                f"-c {src} -o CMakeFiles/{target}.dir/src/{name}.cu.o",
                "file": str(src),
            }
        )
    (build / "compile_commands.json").write_text(json.dumps(entries, indent=2), encoding="utf-8")


def check_project(project: Path, monkeypatch: pytest.MonkeyPatch) -> Result:
    monkeypatch.chdir(project)
    return invoke("check", "src", "include")


#: The walk-through's findings on the fixture: the naive transpose's column store, and nothing else (no
#: KL403 on the reductions that do one atomic per block, no KL401 on axpy<float> beside axpy<double>).
EXPECTED = [("transpose.cu", 17, "KL404")]


@requires_nvcc
def test_cmake_project_with_compile_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "proj"
    shutil.copytree(FIXTURE, project)
    without = check_project(project, monkeypatch)
    assert without.exit_code == 1
    assert any(
        c == "KL001" and "kldemo/config.cuh: No such file or directory" in m
        for _, _, c, m in findings(without)
    )
    compile_commands(project)
    result = check_project(project, monkeypatch)
    assert [(n, ln, c) for n, ln, c, _ in findings(result)] == EXPECTED, result.output
    assert "in 6 files (4 kernels)" in result.stdout
    # The headers have no entry: they take the flags of the nearest entry (the error says the define is there).
    assert "KLDEMO_BLOCK is not defined" not in result.stdout


@requires_nvcc
@pytest.mark.skipif(
    shutil.which("cmake") is None or shutil.which("ninja") is None, reason="needs cmake and ninja"
)
@pytest.mark.parametrize("generator", ["Ninja", "Unix Makefiles"])
def test_cmake_project_with_the_real_cmake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, generator: str
) -> None:
    """Both generators' compile_commands.json: Ninja's lists -I folders, the Makefile generator's passes them in
    a response file (--options-file CMakeFiles/<target>.dir/includes_CUDA.rsp), which is read too (issue 31
    item 5.2: it was ignored, so the project's header was "not found")."""
    if shutil.which("ninja" if generator == "Ninja" else "make") is None:
        pytest.skip(f"no build tool for CMake's {generator} generator here")
    project = tmp_path / "proj"
    shutil.copytree(FIXTURE, project)
    nvcc = toolchain.find_tool("nvcc")
    proc = subprocess.run(
        [
            "cmake",
            "-S",
            ".",
            "-B",
            "build",
            "-G",
            generator,
            "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
            f"-DCMAKE_CUDA_COMPILER={nvcc}",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        pytest.skip(f"cmake could not configure a CUDA project here: {proc.stderr[-500:]}")
    result = check_project(project, monkeypatch)
    assert [(n, ln, c) for n, ln, c, _ in findings(result)] == EXPECTED, result.output
    # The whole tree: CMake's own probe sources in build/ are not checked, and the note says so.
    everything = invoke("check", ".")
    assert [(n, ln, c) for n, ln, c, _ in findings(everything)] == EXPECTED, everything.output
    assert "build: folder skipped (build output); name it to check its CUDA files" in everything.output


# --------------------------------------------------------------------------------------------------
# Item 9: rule selection and suppression comments

STRIDED = """\
/* kernellsp
sizes = { N = 4096 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
[args]
x = { dtype = "f32", dir = "in", count = "N * 32" }
y = { dtype = "f32", dir = "out", count = "N * 32" }
n = { value = "N" }
*/
__global__ void gather(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i * 32] = x[i * 32] * 0.1;
}
"""


def codes_of(result: Result) -> list[str]:
    return [c for _, _, c, _ in findings(result)]


@requires_nvcc
def test_select_and_ignore_on_the_command_line_and_in_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "g.cu", STRIDED)
    assert sorted(codes_of(invoke("check", "g.cu"))) == ["KL401", "KL404"]
    assert codes_of(invoke("check", "g.cu", "--select", "KL401")) == ["KL401"]
    assert codes_of(invoke("check", "g.cu", "--ignore", "kl404")) == ["KL401"]
    # The most specific entry decides: every KL4xx rule but KL404.
    assert codes_of(invoke("check", "g.cu", "--select", "KL4", "--ignore", "KL404")) == ["KL401"]
    clean = invoke("check", "g.cu", "--ignore", "KL401,KL404")
    assert clean.exit_code == 0 and "No findings" in clean.stdout
    write(tmp_path / "kernellsp.toml", '[settings]\nignore = ["KL404"]\n')
    assert codes_of(invoke("check", "g.cu")) == ["KL401"]
    # --select replaces the project's select, --ignore adds to its ignore.
    assert codes_of(invoke("check", "g.cu", "--ignore", "KL401")) == []
    write(tmp_path / "kernellsp.toml", '[settings]\nselect = ["KL9"]\n')
    bad = invoke("check", "g.cu")
    assert bad.exit_code == 2 and "setting 'select': 'KL9' matches no rule" in bad.output
    (tmp_path / "kernellsp.toml").unlink()
    typo = invoke("check", "g.cu", "--ignore", "404")
    assert typo.exit_code == 2 and "--ignore: '404' is not a rule code or prefix" in typo.output


@requires_nvcc
def test_suppression_comments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    line = "    if (i < n) y[i * 32] = x[i * 32] * 0.1;"
    write(tmp_path / "same.cu", STRIDED.replace(line, line + "  // kernellsp: ignore[KL404]"))
    assert codes_of(invoke("check", "same.cu")) == ["KL401"]
    write(tmp_path / "above.cu", STRIDED.replace(line, "    // kernellsp: ignore[KL401, KL404]\n" + line))
    assert codes_of(invoke("check", "above.cu")) == []
    write(tmp_path / "all.cu", STRIDED.replace(line, line + " /* kernellsp: ignore */"))
    assert codes_of(invoke("check", "all.cu")) == []
    write(tmp_path / "file.cu", "// kernellsp: ignore-file[KL4]\n" + STRIDED)
    assert codes_of(invoke("check", "file.cu")) == []
    # A comment about another rule, or on another line, silences nothing.
    write(tmp_path / "other.cu", STRIDED.replace(line, line + "  // kernellsp: ignore[KL101]"))
    assert sorted(codes_of(invoke("check", "other.cu"))) == ["KL401", "KL404"]
    # A code no rule has silences nothing and says so (KL007 on the comment's line); a known prefix is fine.
    write(tmp_path / "typo.cu", STRIDED.replace(line, line + "  // kernellsp: ignore[KL4O4, KL9999, KL4]"))
    typo = invoke("check", "typo.cu")
    assert codes_of(typo) == ["KL007", "KL007"]
    assert "`kernellsp: ignore[KL4O4]` names no rule" in typo.stdout
    assert "`kernellsp: ignore[KL9999]` names no rule" in typo.stdout
    assert all(ln == STRIDED.splitlines().index(line) + 1 for _, ln, _, _ in findings(typo))


# --------------------------------------------------------------------------------------------------
# Item 4: no KL403 on the reduction KL403 recommends, no KL401 from another instantiation's fp64


@requires_nvcc
def test_kl403_and_kl401_on_good_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = (REPO / "tests" / "fixtures" / "first_hour_reductions.cu").read_text(encoding="utf-8")
    write(tmp_path / "red.cu", src)
    got = [
        (ln, c, m.split(":")[0]) for _, ln, c, m in findings(invoke("check", "red.cu", "--ignore", "KL004"))
    ]
    # Only the naive kernel (every thread's atomic on one address) is flagged; the shared-memory tree, CUB's
    # BlockReduce and the warp shuffle with `if (lane != 0) return;` issue one atomic per block or warp, and
    # axpy<float> has no fp64 of its own (axpy<double>'s is intended).
    naive = src.splitlines().index("    if (i < n) atomicAdd(out, x[i]);") + 1
    assert got == [(naive, "KL403", "atomic on out in sum_naive")]
    # A double literal in the template is the float instantiation's fp64: KL401 is still there for it.
    write(tmp_path / "red2.cu", src.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] * 0.1 + y[i];"))
    got2 = [c for _, _, c, _ in findings(invoke("check", "red2.cu", "--ignore", "KL004,KL403"))]
    assert got2 == ["KL401"]


# --------------------------------------------------------------------------------------------------
# Item 6: doctor's exit code and arch; replay and verify check what the CPU can before asking for a GPU


def test_doctor_exit_codes_and_a_bad_arch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNELLSP_ARCH", "banana")
    result = invoke("doctor")
    arch = next(ln for ln in result.stdout.splitlines() if ln.startswith("[") and "] arch " in ln)
    assert (
        arch.startswith("[MISS] arch")
        and "KERNELLSP_ARCH 'banana': 'banana' is not a GPU architecture" in arch
    )
    assert result.exit_code == 2
    monkeypatch.delenv("KERNELLSP_ARCH")
    write(tmp_path / "kernellsp.toml", "[settings\n")
    broken = invoke("doctor")
    assert broken.exit_code == 2
    assert any(
        ln.startswith("[MISS] settings") and "not valid TOML" in ln for ln in broken.stdout.splitlines()
    )
    (tmp_path / "kernellsp.toml").unlink()
    plain = invoke("doctor")
    lines = plain.stdout.splitlines()
    missing = [ln for ln in lines if ln.startswith("[MISS]")]
    if toolchain.find_tool("nvcc") is not None:
        assert any(ln.startswith("[ok  ] arch") and "sm_90" in ln for ln in lines)
        assert plain.exit_code == (1 if missing else 0)


def test_replay_of_a_missing_bundle_names_the_bundle(tmp_path: Path) -> None:
    result = invoke("replay", str(tmp_path / "nonexistent"))
    assert result.exit_code == 2
    assert "no such evidence bundle" in result.output and "GPU" not in result.output


def test_verify_checks_the_scope_before_asking_for_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNELLSP_RUNNER", "none")  # no GPU here, whatever the machine has
    base = (REPO / "samples" / "vector_add.cu").read_text(encoding="utf-8")
    write(tmp_path / "vector_add.cu", base)
    write(tmp_path / "renamed.cu", base.replace("vector_add", "vector_sum"))
    result = invoke("verify", "vector_add.cu", "--candidate", "renamed.cu")
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("scope_violation: the candidate removed or renamed vector_add")
    as_json = json.loads(invoke("verify", "vector_add.cu", "-c", "renamed.cu", "--format", "json").stdout)
    assert as_json["kind"] == "scope_violation"
    assert (
        json.loads(invoke("verify", "vector_add.cu", "-c", "renamed.cu", "--json").stdout)["kind"]
        == "scope_violation"
    )
    # A candidate the CPU cannot fault reaches the GPU gates, which say why they cannot run.
    same = invoke("verify", "vector_add.cu", "--candidate", "vector_add.cu")
    assert same.exit_code == 2 and "cannot verify: profiling is off (runner = none)" in same.output
    sarif = invoke("verify", "vector_add.cu", "-c", "renamed.cu", "--format", "sarif")
    assert sarif.exit_code == 2 and "verify prints text or json" in sarif.output


# --------------------------------------------------------------------------------------------------
# Item 9: --help


def test_help_shows_no_bool_placeholders() -> None:
    for command in ("check", "profile", "optimize", "verify", "doctor"):
        text = invoke(command, "--help").stdout
        assert "<bool>" not in text, command
        assert "--format" in text or command == "doctor", command
    check_help = " ".join(
        invoke("check", "--help").stdout.split()
    )  # the help is wrapped at the terminal width
    for needle in (
        "--select",
        "--ignore",
        "--include-dir",
        "kernellsp: ignore[KL404]",
        "compile_commands.json",
    ):
        assert needle in check_help, needle
    assert "Exit 0 when everything is there" in " ".join(invoke("doctor", "--help").stdout.split())
    shown = invoke("rules", "show", "KL404").stdout
    assert (
        '`// kernellsp: ignore[KL404]` on the line or the line above; ignore = ["KL404"] in kernellsp.toml'
        in shown
    )


# --------------------------------------------------------------------------------------------------
# Items 6 and 8: spec messages, all at once, on the spec's own lines (kernellsp.toml's too)

BAD_SPEC = """\
/* kernellsp
sizes = { N = 1024 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
[args]
x = { dtype = "float", dir = "in", count = "N", dist = "uniformm(0, 1)" }
y = { dtype = "f32", dir = "out" }
n = { value = "__import__('os').system('id')" }
*/
__global__ void k(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""


def test_spec_errors_come_all_at_once_and_read_well(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "k.cu", BAD_SPEC)
    result = invoke("check", "k.cu", "--no-build")
    got = [(ln, c, m) for _, ln, c, m in findings(result)]
    msgs = {ln: m for ln, c, m in got if c == "KL003"}
    assert sorted(msgs) == [5, 6, 7], got
    # The dtype, the distribution, the missing count and the injection: every problem of the spec at once.
    assert [m for ln, c, m in got if ln == 5 and c == "KL003"] == [
        "spec field 'args.x.dtype' of k: expected f16, bf16, f32, f64, i8, u8, i16, u16, i32, u32, i64, u64, "
        "got 'float' (the C type float is dtype 'f32')",
        "spec field 'args.x.dist' of k: expected uniform(lo, hi), normal(mean, std), randint(lo, hi), ones(), "
        "arange() or choice(a, b, ...), got 'uniformm(0, 1)'",
    ]
    assert (
        msgs[6]
        == "spec field 'args.y.count' of k: pointer argument 'y' needs count (element count, an expression over sizes)"
    )
    assert (
        "only the functions abs, cdiv" in msgs[7]
        and "can be called, not \"__import__('os').system\"" in msgs[7]
    )
    assert "Value error" not in result.stdout and "'?'" not in result.stdout
    # The kernel has a spec, a broken one: no "has no launch spec" besides.
    assert "KL004" not in [c for _, c, _ in got]


def test_values_the_harness_would_refuse_are_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    src = (
        BAD_SPEC.replace('"float"', '"f32"')
        .replace('"uniformm(0, 1)"', '"uniform(5, -5)"')
        .replace('dir = "out" }', 'dir = "out", count = "N" }')
        .replace("\"__import__('os').system('id')\"", "2.5")
    )
    write(tmp_path / "k.cu", src)
    got = {ln: m for _, ln, c, m in findings(invoke("check", "k.cu", "--no-build")) if c == "KL003"}
    assert got[5] == "spec of k: args.x.dist (sizes): 'uniform(5, -5)': lo must not exceed hi"
    assert got[7] == "spec of k: args.n.value (sizes): 'n' is int but its value is 2.5, not an integer"
    write(
        tmp_path / "k.cu",
        src.replace('"uniform(5, -5)"', '"normal(0, -1)"').replace("value = 2.5", 'value = "N"'),
    )
    got = {ln: m for _, ln, c, m in findings(invoke("check", "k.cu", "--no-build")) if c == "KL003"}
    assert got == {5: "spec of k: args.x.dist (sizes): 'normal(0, -1)': std must not be negative"}


def test_workspace_spec_problems_sit_on_kernellsp_toml_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    kernel = BAD_SPEC[BAD_SPEC.index("*/\n") + 3 :]
    write(tmp_path / "src" / "k.cu", kernel)
    write(
        tmp_path / "kernellsp.toml",
        "[settings]\n"
        'arch = "sm_90"\n'
        "\n"
        "[kernels.k]\n"
        "sizes = { N = 1024 }\n"
        'launch = { grid = "ceil_div(N, 256)", block = 256 }\n'
        "[kernels.k.args]\n"
        'x = { dtype = "float", dir = "in", count = "N" }\n'
        'y = { dtype = "f32", dir = "out" }\n'
        'n = { value = "N" }\n'
        "\n"
        "[kernels.kk]\n"
        "sizes = { N = 16 }\n",
    )
    result = invoke("check", "src", "--no-build")
    got = [(name, ln, c, m.split(":")[0]) for name, ln, c, m in findings(result)]
    assert got == [
        ("kernellsp.toml", 8, "KL003", "kernels.k.args.x.dtype"),
        ("kernellsp.toml", 9, "KL003", "spec field 'args.y.count' of k"),
        ("kernellsp.toml", 12, "KL003", "kernels.kk"),
        ("k.cu", 1, "KL405", "k only reads x, declared without const __restrict__"),
    ], result.stdout
    assert "did you mean k?" in result.stdout
    # A fixed table binds and runs its checks; `file = ...` must name a file that defines the kernel.
    toml = (tmp_path / "kernellsp.toml").read_text()
    toml = toml.replace('"float"', '"f32"').replace('dir = "out" }', 'dir = "out", count = "N" }')
    write(
        tmp_path / "kernellsp.toml",
        toml.replace("[kernels.kk]\nsizes = { N = 16 }\n", "").replace(
            "[kernels.k]\n", '[kernels.k]\nfile = "src/other.cu"\n'
        ),
    )
    got = [(name, ln, c) for name, ln, c, _ in findings(invoke("check", "src", "--no-build"))]
    assert got == [("kernellsp.toml", 5, "KL003"), ("k.cu", 1, "KL405")]


# --------------------------------------------------------------------------------------------------
# Item 5: the "Add launch spec" draft is a spec the user can keep


def _draft(name: str) -> tuple[str, list[str], object, object]:
    from kernellsp.source import spec
    from kernellsp.source.model import parse_source

    text = (REPO / "tests" / "fixtures" / "first_hour_drafts.cu").read_text(encoding="utf-8")
    model = parse_source(text, "drafts.cu")
    fn = model.function(name)
    assert fn is not None
    draft, notes = spec.draft_with_notes(fn, model)
    return spec.format_comment_block(draft, "", notes), notes, draft, (fn, model)


def test_the_draft_of_a_tiled_matmul_reads_its_indexing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernellsp.source import spec

    block, notes, draft, (fn, model) = _draft("matmul_tiled")
    assert notes == []
    assert isinstance(draft, spec.KernelSpec) and draft.launch is not None
    # 2-D, the 32x32 tile the kernel indexes with, each axis over the size its guard names.
    assert draft.launch.grid == ["ceil_div(N, 32)", "ceil_div(M, 32)"] and draft.launch.block == [32, 32]
    assert {k: (a.dir, a.count) for k, a in draft.args.items() if a.count} == {
        "A": ("in", "M * K"),
        "B": ("in", "N * K"),
        "C": ("out", "M * N"),
    }
    assert draft.sizes == {"M": 2048, "N": 2048, "K": 2048}
    bound = spec.BoundSpec(spec=draft, entry="matmul_tiled", origin="comment")
    assert [i.message for i in spec.validate_against(bound, fn, model) if i.severity == "error"] == []  # type: ignore[arg-type]
    # Inserted above the kernel, the file checks clean of spec errors.
    src = (REPO / "tests" / "fixtures" / "first_hour_drafts.cu").read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "mm.cu",
        src.replace("__global__ void matmul_tiled", block + "__global__ void matmul_tiled"),
    )
    assert "KL003" not in [c for _, _, c, _ in findings(invoke("check", "mm.cu", "--no-build"))]


def test_a_draft_says_what_it_could_not_infer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block, notes, _draft_spec, _ = _draft("histogram")
    assert notes == ["count of bins: its index 'bin' (line 31) is not a polynomial kernellsp can bound"]
    assert block.splitlines()[1] == "# CHECK: " + notes[0]
    # The CHECK comment is TOML: the block still parses and validates.
    src = (REPO / "tests" / "fixtures" / "first_hour_drafts.cu").read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "h.cu", src.replace("__global__ void histogram", block + "__global__ void histogram"))
    assert "KL003" not in [c for _, _, c, _ in findings(invoke("check", "h.cu", "--no-build"))]


def test_a_struct_argument_is_not_supported_yet_and_says_so() -> None:
    from kernellsp.source import spec
    from kernellsp.source.draft import draft_problem

    _block, _notes, draft, (fn, model) = _draft("scaled")
    problem = draft_problem(fn)  # type: ignore[arg-type]
    assert problem is not None and problem.startswith(
        "scaled takes p (Params) by value, and launch specs cannot"
    )
    assert "host launcher" in problem
    # A hand-written spec that gives it a value is told the same, not "2 is not a struct".
    bound = spec.BoundSpec(spec=draft, entry="scaled", origin="comment")  # type: ignore[arg-type]
    msgs = [i.message for i in spec.validate_against(bound, fn, model)]  # type: ignore[arg-type]
    assert any(
        "'p' is a Params passed by value: launch specs cannot describe struct arguments yet" in m
        for m in msgs
    )


# --------------------------------------------------------------------------------------------------
# Every problem of a spec and of kernellsp.toml at once (issue 31, item 5.6)

SPEC_MISSING_ARGS = """/* kernellsp
sizes = { N = 1024 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
[args]
x = { dtype = "f33", dir = "sideways", count = "M" }
*/
__global__ void k(float* x, float* y, int n) {
    int i = threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""


def test_every_spec_and_settings_problem_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "k.cu", SPEC_MISSING_ARGS)
    got = [m for _, _, c, m in findings(invoke("check", "--no-build", "k.cu")) if c == "KL003"]
    # A bad dtype, dir and count, and the arguments the spec forgot: four errors in one run.
    assert len(got) == 4, got
    assert any("missing argument(s) y, n" in m for m in got), got
    assert (
        any("'f33'" in m for m in got)
        and any("'sideways'" in m for m in got)
        and any("'M'" in m for m in got)
    )
    write(tmp_path / "kernellsp.toml", '[settings]\nrunner = "moon"\ngpu_wait_timeout_s = "soon"\n')
    bad = invoke("check", "--no-build", "k.cu")
    assert bad.exit_code == 2
    assert "setting 'runner'" in bad.output and "setting 'gpu_wait_timeout_s'" in bad.output
    write(tmp_path / "kernellsp.toml", '[settings]\narch = "sm_1"\nselect = ["KL9"]\n')
    bad = invoke("check", "--no-build", "k.cu")
    assert bad.exit_code == 2
    assert "'KL9' matches no rule" in bad.output and "'sm_1' is not a GPU architecture" in bad.output
