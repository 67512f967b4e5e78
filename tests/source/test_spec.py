"""Launch specs: parsing, round trip to TOML, validation against signatures with exact lines, workspace specs, drafts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernellsp.source import spec
from kernellsp.source.model import SourceModel, parse_file, parse_source
from kernellsp.source.spec import KernelSpec, SpecIssue

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "samples").glob("*.cu"))

FULL = """\
entry = "k"
reference = "k_ref"
seeds = 3
sizes = { N = 1024, M = "N * 2" }
launch = { grid = ["ceil_div(N, 16)", "M"], block = [16, 16], smem = "N * 4" }
tolerance = { rtol = 1e-05, atol = 0.0, norm_rtol = 0.001 }
shapes = [{ N = 3 }, { N = 4097 }]
tunables = { BLOCK = [128, 256], VARIANT = ["a", "b"] }
flags = ["-DUSE_X", "-maxrregcount=32"]
[args]
"weird name" = { dtype = "f32", dir = "in", count = "N", dist = "uniform(-1, 1)" }
y = { dtype = "f64", dir = "out", count = 7 }
n = { value = 2.5 }
"""


def _parse(text: str) -> KernelSpec:
    s, errors = spec.parse_spec_text(text)
    assert errors == [], errors
    assert s is not None
    return s


def test_parse_full_spec_into_the_model() -> None:
    s = _parse(FULL)
    assert s.entry == "k" and s.reference == "k_ref" and s.seeds == 3
    assert s.sizes == {"N": 1024, "M": "N * 2"}
    assert s.launch is not None
    assert (
        s.launch.grid == ["ceil_div(N, 16)", "M"] and s.launch.block == [16, 16] and s.launch.smem == "N * 4"
    )
    assert s.tolerance is not None and (s.tolerance.rtol, s.tolerance.atol, s.tolerance.norm_rtol) == (
        1e-5,
        0.0,
        1e-3,
    )
    assert s.shapes == [{"N": 3}, {"N": 4097}]
    assert s.tunables == {"BLOCK": [128, 256], "VARIANT": ["a", "b"]}
    assert s.flags == ["-DUSE_X", "-maxrregcount=32"]
    assert list(s.args) == ["weird name", "y", "n"]
    assert s.args["weird name"].is_buffer and not s.args["n"].is_buffer
    assert s.resolved_sizes() == {"BLOCK": 128, "VARIANT": "a", "N": 1024, "M": 2048}
    assert s.resolved_sizes({"N": 3})["M"] == 6
    assert spec.launch_dims(s.launch, s.resolved_sizes()) == ([64, 2048, 1], [16, 16, 1], 4096)


@pytest.mark.parametrize(
    "text",
    [
        FULL,
        'sizes = { N = 1 }\nlaunch = { grid = 1, block = 32 }\n[args]\nx = { dtype = "i8", dir = "inout", count = 1 }\n',
        'sizes = { N = 5 }\nlaunch = { grid = "N", block = [8, 4, 2], smem = 128 }\n'
        "tolerance = { atol = 1e-07 }\n[args]\nv = { value = -1 }\n",
        'sizes = { "odd key" = 1 }\nshapes = [{ "odd key" = 2 }]\n',
        "[args]\n",
    ],
)
def test_round_trip_model_to_toml_and_back(text: str) -> None:
    s = _parse(text)
    written = spec.spec_to_toml(s, include_entry=True)
    again = _parse(written)
    assert again == s
    # Writing is canonical: a second round trip reproduces the text exactly.
    assert spec.spec_to_toml(again, include_entry=True) == written


def test_round_trip_through_a_comment_block() -> None:
    s = _parse(FULL)
    block = spec.format_comment_block(s, indent="    ")
    assert block.startswith("    /* kernellsp\n") and block.endswith("    */\n")
    model = parse_source(block + "__global__ void k(float* y, int n) { }\n")
    assert len(model.spec_blocks) == 1
    back = _parse(model.spec_blocks[0].body)
    s.entry = None  # format_comment_block omits entry: the block binds to the next function
    assert back == s


# --------------------------------------------------------------------------------------------------
# Validation against the signature

KERNEL = (
    "__global__ void k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }\n"
)
X = '{ dtype = "f32", dir = "in", count = "N" }'
Y = '{ dtype = "f32", dir = "out", count = "N" }'
NV = '{ value = "N" }'


def _spec_src(
    x: str | None = X,
    y: str | None = Y,
    n: str | None = NV,
    block: str = "256",
    launch: bool = True,
    extra: str = "",
    func: str = KERNEL,
) -> str:
    lines = ["/* kernellsp", "sizes = { N = 1024 }"]
    if launch:
        lines.append(f'launch = {{ grid = "ceil_div(N, 256)", block = {block} }}')
    lines += [ln for ln in extra.split("\n") if ln]
    lines.append("[args]")
    for name, v in (("x", x), ("y", y), ("n", n)):
        if v is not None:
            lines.append(f"{name} = {v}")
    lines.append("*/")
    return "\n".join(lines) + "\n" + func


def _issues(src: str) -> tuple[list[SpecIssue], list[str]]:
    model = parse_source(src, "k.cu")
    bound, issues = spec.specs_from_source(model)
    for b in bound:
        issues += spec.validate_against(b, model.function(b.entry), model)
    return issues, src.split("\n")


def _only(issues: list[SpecIssue], fld: str) -> SpecIssue:
    hits = [i for i in issues if i.field == fld]
    assert len(hits) >= 1, f"no issue for {fld}: {[(i.field, i.message) for i in issues]}"
    return hits[0]


def test_clean_spec_has_no_issues() -> None:
    issues, _ = _issues(_spec_src())
    assert issues == []


def test_missing_argument() -> None:
    issues, lines = _issues(_spec_src(n=None))
    iss = _only(issues, "args")
    assert "missing argument(s) n" in iss.message and "(x, y, n)" in iss.message
    assert iss.severity == "error"
    assert lines[iss.line] == "[args]"


def test_extra_argument() -> None:
    issues, lines = _issues(_spec_src(extra="").replace("[args]\n", "[args]\nz = { value = 1 }\n"))
    iss = _only(issues, "args.z")
    assert "'z' is not a parameter of k" in iss.message
    assert lines[iss.line].startswith("z = ")


def test_scalar_given_dtype_and_dir() -> None:
    issues, lines = _issues(_spec_src(n='{ dtype = "i32", dir = "in", value = "N" }'))
    iss = _only(issues, "args.n")
    assert "'n' is a scalar (int): give value only" in iss.message
    assert lines[iss.line].startswith("n = ")


def test_scalar_without_value() -> None:
    issues, lines = _issues(_spec_src(n='{ dtype = "i32" }'))
    iss = _only(issues, "args.n")
    assert "needs value" in iss.message
    assert lines[iss.line].startswith("n = ")


def test_pointer_missing_count_lands_on_its_own_line() -> None:
    issues, lines = _issues(_spec_src(x='{ dtype = "f32", dir = "in" }'))
    iss = _only(issues, "args.x.count")
    assert "pointer argument 'x' needs count" in iss.message
    assert lines[iss.line].startswith("x = "), lines[iss.line]


def test_pointer_missing_field_in_table_layout_lands_on_its_header() -> None:
    src = (
        "/* kernellsp\nsizes = { N = 1024 }\nlaunch = { grid = 4, block = 256 }\n"
        '[args.x]\ndtype = "f32"\ndir = "in"\n[args.y]\ndtype = "f32"\ndir = "out"\ncount = "N"\n'
        '[args.n]\nvalue = "N"\n*/\n' + KERNEL
    )
    issues, lines = _issues(src)
    iss = _only(issues, "args.x.count")
    assert lines[iss.line] == "[args.x]"


def test_dtype_mismatch() -> None:
    issues, lines = _issues(_spec_src(x='{ dtype = "f64", dir = "in", count = "N" }'))
    iss = _only(issues, "args.x.dtype")
    assert "declared float*; expected dtype f32, got 'f64'" in iss.message
    assert lines[iss.line].startswith("x = ") and "dtype" in lines[iss.line]


def test_unknown_dtype_is_a_parse_error_on_its_line() -> None:
    issues, lines = _issues(_spec_src(y='{ dtype = "float", dir = "out", count = "N" }'))
    iss = _only(issues, "args.y.dtype")
    assert "'float'" in iss.message
    assert lines[iss.line].startswith("y = ")


def test_const_pointer_with_dir_out() -> None:
    issues, lines = _issues(_spec_src(x='{ dtype = "f32", dir = "out", count = "N" }'))
    iss = _only(issues, "args.x.dir")
    assert "'x' is const but dir = 'out'" in iss.message
    assert lines[iss.line].startswith("x = ") and "dir" in lines[iss.line]


def test_no_output_at_all_is_reported() -> None:
    issues, lines = _issues(_spec_src(y='{ dtype = "f32", dir = "in", count = "N" }'))
    iss = _only(issues, "args")
    assert "nothing to check" in iss.message
    assert lines[iss.line] == "[args]"


def test_launch_missing_for_global_kernel() -> None:
    src = _spec_src(launch=False)
    issues, lines = _issues(src)
    iss = _only(issues, "launch")
    assert "k is a __global__ kernel" in iss.message
    # There is no launch line to point at: the issue sits on the block's first line.
    assert lines[iss.line] == "/* kernellsp"


HOST = """\
extern "C" void solve(const float* x, float* y, int n)
{
    k<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""


def test_launch_given_for_host_launcher() -> None:
    # The spec sits above the host launcher, not the kernel.
    src = KERNEL + _spec_src(func=HOST)
    issues, lines = _issues(src)
    iss = _only(issues, "launch")
    assert "solve is a host launcher" in iss.message
    assert lines[iss.line].startswith("launch = ")
    issues, _ = _issues(KERNEL + _spec_src(func=HOST, launch=False))
    assert issues == []


def test_unknown_size_name_in_an_expression() -> None:
    issues, lines = _issues(_spec_src(y='{ dtype = "f32", dir = "out", count = "M * 2" }'))
    iss = _only(issues, "args.y.count")
    assert "unknown name 'M'" in iss.message
    assert lines[iss.line].startswith("y = ") and "count" in lines[iss.line]
    issues, lines = _issues(_spec_src().replace("ceil_div(N, 256)", "ceil_div(NN, 256)"))
    iss = _only(issues, "launch")
    assert "unknown name 'NN'" in iss.message and lines[iss.line].startswith("launch = ")


def test_unknown_size_in_a_shape() -> None:
    issues, lines = _issues(_spec_src(extra="shapes = [{ N = 3 }, { Q = 5 }]"))
    iss = _only(issues, "shapes.1")
    assert "'Q' is not one of sizes (N)" in iss.message
    assert lines[iss.line].startswith("shapes = ")


def test_block_over_1024_threads() -> None:
    issues, lines = _issues(_spec_src(block="[64, 32]"))
    iss = _only(issues, "launch.block")
    assert "block of 2048 threads exceeds the 1024-thread limit" in iss.message
    assert lines[iss.line].startswith("launch = ") and "block" in lines[iss.line]


def test_bad_toml_points_at_the_offending_line() -> None:
    issues, lines = _issues(_spec_src(y='{ dtype = "f32", dir = "out", count = N }'))
    assert len(issues) == 1
    iss = issues[0]
    assert iss.field == "toml" and "not valid TOML" in iss.message
    assert lines[iss.line].startswith("y = ")


def test_unknown_field() -> None:
    issues, lines = _issues(_spec_src(y='{ dtype = "f32", dir = "out", count = "N", colour = 1 }'))
    iss = _only(issues, "args.y.colour")
    assert "unknown field (known: count, dir, dist, dtype, value)" in iss.message
    assert "colour" in lines[iss.line]
    issues, lines = _issues(_spec_src(extra="color = 3"))
    iss = _only(issues, "color")
    assert "unknown field" in iss.message and "tolerance" in iss.message
    assert lines[iss.line] == "color = 3"


def test_negative_tolerance_and_bad_dist() -> None:
    issues, lines = _issues(_spec_src(extra="tolerance = { rtol = -1 }"))
    iss = _only(issues, "tolerance.rtol")
    assert "greater than or equal to 0" in iss.message and "rtol" in lines[iss.line]
    issues, lines = _issues(_spec_src(x='{ dtype = "f32", dir = "in", count = "N", dist = "gauss(0)" }'))
    iss = _only(issues, "args.x.dist")
    assert "uniform(lo, hi)" in iss.message and "dist" in lines[iss.line]


def test_spec_without_following_function() -> None:
    issues, lines = _issues("/* kernellsp\nsizes = { N = 1 }\n*/\n")
    iss = _only(issues, "entry")
    assert "not followed by a function" in iss.message
    assert lines[iss.line] == "/* kernellsp"


def test_entry_naming_a_missing_function() -> None:
    issues, lines = _issues(_spec_src(extra='entry = "nope"'))
    iss = _only(issues, "entry")
    assert "no function named 'nope'" in iss.message
    assert lines[iss.line] == 'entry = "nope"'


def test_line_comment_spec_lines() -> None:
    src = (
        "// kernellsp\n// sizes = { N = 1024 }\n"
        '// launch = { grid = "ceil_div(N, 256)", block = 256 }\n'
        "// [args]\n"
        '// x = { dtype = "f64", dir = "in", count = "N" }\n'
        f"// y = {Y}\n// n = {NV}\n" + KERNEL
    )
    issues, lines = _issues(src)
    iss = _only(issues, "args.x.dtype")
    assert lines[iss.line].startswith("// x = ")


def test_spec_skips_device_helpers_to_bind_to_the_entry() -> None:
    src = _spec_src(func="__device__ float twice(float v) { return 2 * v; }\n" + KERNEL)
    model = parse_source(src)
    bound, issues = spec.specs_from_source(model)
    assert [b.entry for b in bound] == ["k"]
    assert issues == []


# --------------------------------------------------------------------------------------------------
# Workspace specs

WS_BODY = """\
sizes = { N = 1024 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
args.x = { dtype = "f32", dir = "in", count = "N" }
args.y = { dtype = "f32", dir = "out", count = "N" }
args.n = { value = "N" }
"""


def test_workspace_specs_from_kernellsp_toml(tmp_path: Path) -> None:
    (tmp_path / "kernellsp.toml").write_text(
        f'[kernels.k]\nfile = "k.cu"\n{WS_BODY}\n[kernels.bad]\nwat = 3\n'
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "k.cu").write_text(KERNEL)
    assert spec.find_workspace_root(tmp_path / "sub" / "k.cu") == tmp_path
    specs, issues, origin = spec.load_workspace_specs(tmp_path)
    assert origin == str(tmp_path / "kernellsp.toml")
    assert set(specs) == {"k"}
    k = specs["k"]
    assert k.entry == "k" and k.sizes == {"N": 1024} and list(k.args) == ["x", "y", "n"]
    # Each issue is on its own line of kernellsp.toml (0-based: `wat = 3`), and says which file that is.
    assert [(i.field, i.line, i.path, i.entry) for i in issues] == [("wat", 9, origin, "bad")]
    assert "kernels.bad.wat: unknown field" in issues[0].message
    model = parse_source(KERNEL, str(tmp_path / "sub" / "k.cu"))
    b = spec.BoundSpec(spec=k, entry="k", origin="workspace", origin_path=origin)
    assert spec.validate_against(b, model.function("k"), model) == []


def test_workspace_specs_from_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.kernellsp.kernels.k]\n' + WS_BODY
    )
    specs, issues, origin = spec.load_workspace_specs(tmp_path)
    assert issues == [] and origin == str(tmp_path / "pyproject.toml")
    assert specs["k"].launch is not None and specs["k"].launch.block == 256


def test_workspace_kernellsp_toml_wins_over_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.kernellsp.kernels.k]\nsizes = { N = 1 }\n")
    (tmp_path / "kernellsp.toml").write_text("[kernels.k]\nsizes = { N = 2 }\n")
    specs, _, origin = spec.load_workspace_specs(tmp_path)
    assert specs["k"].sizes == {"N": 2} and origin is not None and origin.endswith("kernellsp.toml")


def test_workspace_bad_toml_and_no_specs(tmp_path: Path) -> None:
    assert spec.load_workspace_specs(tmp_path) == ({}, [], None)
    (tmp_path / "kernellsp.toml").write_text("[kernels.k\n")
    specs, issues, origin = spec.load_workspace_specs(tmp_path)
    assert origin is not None and origin.endswith("kernellsp.toml")
    assert specs == {} and len(issues) == 1 and "not valid TOML" in issues[0].message
    (tmp_path / "kernellsp.toml").write_text("[kernels]\nk = 3\n")
    specs, issues, _ = spec.load_workspace_specs(tmp_path)
    assert specs == {} and "kernels.k must be a table" in issues[0].message


# --------------------------------------------------------------------------------------------------
# Drafts


def _entries(model: SourceModel) -> list[str]:
    return [f.name for f in model.functions if f.has_body and f.kind in ("global", "host")]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_draft_spec_for_every_sample_entry_validates(path: Path) -> None:
    model = parse_file(path)
    names = _entries(model)
    assert names
    for name in names:
        fn = model.function(name)
        assert fn is not None
        draft = spec.draft_spec(fn, model)
        assert draft.entry == name
        assert list(draft.args) == [p.name for p in fn.params]
        assert (draft.launch is not None) == (fn.kind == "global")
        b = spec.BoundSpec(spec=draft, entry=name, origin="comment")
        errors = [i for i in spec.validate_against(b, fn, model) if i.severity == "error"]
        assert errors == [], f"{path.name}:{name}: " + "; ".join(i.message for i in errors)
        # The draft survives the trip through a comment block above the function.
        back = _parse(spec.spec_to_toml(draft, include_entry=True))
        assert back == draft


def test_draft_spec_reads_launch_site_and_types() -> None:
    src = (
        "__global__ void axpy(const double* x, double* y, double a, int n) { }\n"
        "void run(const double* x, double* y, double a, int n) { axpy<<<(n + 127) / 128, 128>>>(x, y, a, n); }\n"
    )
    model = parse_source(src)
    fn = model.function("axpy")
    assert fn is not None
    d = spec.draft_spec(fn, model)
    assert d.sizes == {"N": 1 << 20}
    assert d.args["x"].dtype == "f64" and d.args["x"].dir == "in" and d.args["x"].count == "N"
    assert d.args["y"].dir == "inout"
    assert d.args["a"].value == 1.0 and d.args["n"].value == "N"
    assert d.launch is not None and d.launch.grid == "(N + 127) / 128" and d.launch.block == "128"
