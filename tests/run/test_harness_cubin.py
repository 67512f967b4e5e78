"""The device-only build: which entries it serves, the host unit without user code, real nvcc (no GPU)."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from kernellsp import cache
from kernellsp.run import harness as hz
from kernellsp.run import harness_build as hb
from kernellsp.run.harness.cubin import cubin_compile_command, cubin_unsupported, host_type, unsupported_flag
from kernellsp.run.runner import LocalRunner
from kernellsp.source import spec
from kernellsp.source.model import parse_source

REPO = Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc")
requires_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")


def _plan(text: str, name: str = "k.cu") -> tuple[hz.HarnessPlan, object, list[str]]:
    model = parse_source(text, name)
    bound = spec.specs_from_source(model)[0][0]
    return hz.plan_harness(model, bound.spec, bound.entry), model, list(bound.spec.flags)


@pytest.mark.parametrize(
    ("ctype", "host"),
    [
        ("const float* __restrict__", "void*"),
        ("float *", "void*"),
        ("MyStruct*", "void*"),
        ("const unsigned char* __restrict", "void*"),
        ("int", "int"),
        ("const int", "int"),
        ("unsigned", "unsigned int"),
        ("size_t", "std::size_t"),
        ("std::size_t", "std::size_t"),
        ("const uint32_t", "std::uint32_t"),
        ("long long", "long long"),
        ("double", "double"),
        ("Params", None),
        ("float&", None),
        ("half", None),
        ("real_t", None),
    ],
)
def test_host_type_spells_builtins_and_any_pointer(ctype: str, host: str | None) -> None:
    assert host_type(ctype) == host


def test_flags_that_only_steer_device_code_are_kept() -> None:
    assert (
        unsupported_flag(["-DN=4", "-Xptxas", "-v", "--use_fast_math", "-std=c++17", "-maxrregcount=64"])
        is None
    )
    assert unsupported_flag(["-I", "include", "-lineinfo", "-O3"]) is None
    assert unsupported_flag(["-DX", "-rdc=true"]) == "-rdc=true"
    assert unsupported_flag(["-lcublas"]) == "-lcublas"
    assert unsupported_flag(["-Xcompiler", "-fopenmp"]) == "-Xcompiler"


SPEC = """/* kernellsp
sizes = { N = 1000 }
launch = { grid = "ceil_div(N, 256)", block = "256" }
[args]
x = { dtype = "f32", dir = "inout", count = "N" }
n = { value = "N" }
*/
"""


def test_what_needs_the_usual_build_says_why() -> None:
    plain = SPEC + "__global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1; }\n"
    plan, model, flags = _plan(plain)
    assert cubin_unsupported(plan, model, flags) is None
    assert "-rdc" in str(cubin_unsupported(plan, model, ["-rdc=true"]))
    templ = (
        SPEC
        + "template <class T>\n__global__ void k(T* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1; }\n"
    )
    templ += "template __global__ void k<float>(float*, int);\n"
    model = parse_source(templ, "k.cu")
    fn = model.function("k")
    assert fn is not None and fn.template_params is not None
    assert "template" in str(cubin_unsupported(plan, model, []))
    overloaded = plain + "__global__ void k(double* x, int n) {}\n"
    assert "2 definitions" in str(cubin_unsupported(plan, parse_source(overloaded, "k.cu"), []))


def test_samples_and_corpus_kernels_mostly_build_device_only() -> None:
    """Every __global__ entry of the samples and the recipe corpus that the glue can spell goes device-only; host
    launchers never do (their host code runs)."""
    served, launchers, other = 0, 0, []
    files = sorted((REPO / "samples").glob("*.cu")) + sorted(
        (REPO / "tests" / "recipes" / "corpus").glob("*.cu")
    )
    for path in files:
        model = parse_source(path.read_text(), str(path))
        for bound in spec.specs_from_source(model)[0]:
            try:
                plan = hz.plan_harness(model, bound.spec, bound.entry)
            except hz.HarnessError:
                continue
            why = cubin_unsupported(plan, model, list(bound.spec.flags))
            if plan.kind == "host":
                assert why is not None and why.startswith("a host launcher")
                launchers += 1
            elif why is None:
                served += 1
                unit = hz.generate_harness(plan, f"src/{path.name}", cubin=True)
                assert '#include "src/' not in unit and "cubin_launch" in unit
            else:
                other.append(f"{path.name}: {why}")
    assert served >= 40 and launchers >= 5, (served, launchers, other)
    assert len(other) <= served // 4, other


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for t in threading.enumerate():
        if t.name == "kernellsp-runtime-build":
            t.join(timeout=600)
    monkeypatch.setenv("KERNELLSP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KERNELLSP_NO_CACHE", raising=False)
    monkeypatch.setattr(hb, "_inflight", {})
    return tmp_path / "cache"


@requires_nvcc
@pytest.mark.slow
def test_host_unit_links_with_the_runtime_and_the_entry_unit_compiles_to_a_cubin(fresh_cache: Path) -> None:
    assert NVCC is not None
    sample = REPO / "samples" / "histogram.cu"
    text = sample.read_text()
    plan, model, flags = _plan(text, str(sample))
    assert cubin_unsupported(plan, model, flags) is None
    runner = LocalRunner()
    wd = runner.new_workdir()
    try:
        host = hz.generate_harness(plan, f"src/{sample.name}", cubin=True)
        runner.put(
            {
                f"src/{sample.name}": text.encode(),
                "h.cu": hz.generate_harness(plan, f"src/{sample.name}", split=True).encode(),
                "hc.cu": host.encode(),
            },
            wd,
        )
        built = hb.build_harness(
            runner,
            wd,
            "hc.cu",
            "hc",
            "sm_90",
            flags,
            nvcc=NVCC,
            nvcc_version="test",
            sources_key=cache.digest(host),
            timeout_s=600,
        )
        assert built.returncode == 0, built.output
        res = runner.run(cubin_compile_command("h.cu", "e.cubin", "sm_90", flags, NVCC), wd, 600)
        assert res.returncode == 0, res.output
        cubin = Path(wd) / "e.cubin"
        assert cubin.read_bytes()[:4] == b"\x7fELF"
        # Without a GPU the harness stops at the device; the arguments (--cubin among them) parse.
        run = subprocess.run(
            [str(Path(wd) / "hc"), "--cubin", str(cubin), "--mode", "profile", "--out", str(Path(wd) / "o")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        result = hz.read_result(Path(wd) / "o")
        assert result.status != "bad_args", (run.returncode, result.error)
    finally:
        runner.cleanup(wd)
