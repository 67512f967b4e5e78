"""Tests of the built-in tuner (kernellsp.optimize.propose.tuner) on the samples and on small kernels.

Every candidate must be in scope (kernellsp.optimize.verify.scope with the targets verify uses), differ from the
file, be new (keys unique, tried transforms and keys skipped), and build: the harness of every
candidate of a few samples is planned, generated and compiled with the real nvcc.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernellsp.findings import Finding, Severity, line_range
from kernellsp.optimize.propose.base import Candidate, ProposalContext
from kernellsp.optimize.propose.tuner import Tuner
from kernellsp.optimize.verify.scope import check_scope, edit_targets
from kernellsp.run import harness
from kernellsp.run import harness_build as hb
from kernellsp.source import spec as specmod
from kernellsp.source.model import parse_source

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
SAMPLE_FILES = sorted(p.name for p in SAMPLES.glob("*.cu"))
NVCC = shutil.which("nvcc")


def context(
    text: str,
    path: str = "k.cu",
    entry: str | None = None,
    findings: list[Finding] | None = None,
    tried: list[dict[str, object]] | None = None,
) -> ProposalContext:
    model = parse_source(text, path)
    bound = specmod.specs_from_source(model)[0]
    b = bound[0] if entry is None else next(x for x in bound if x.entry == entry)
    return ProposalContext(path, text, text, b.entry, model, b, list(findings or []), None, list(tried or []))


def sample_context(name: str, **kw: object) -> ProposalContext:
    return context((SAMPLES / name).read_text(), str(SAMPLES / name), **kw)  # type: ignore[arg-type]


def propose_all(ctx: ProposalContext) -> list[Candidate]:
    return Tuner().propose(ctx, 100)


def by_desc(cands: list[Candidate]) -> dict[str, Candidate]:
    return {c.description: c for c in cands}


def changed_lines(old: str, new: str) -> tuple[list[str], list[str], int]:
    """(removed lines, added lines, index of the first changed line), with keepends."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    ops = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    assert len(ops) == 1, ops
    _, i1, i2, j1, j2 = ops[0]
    return a[i1:i2], b[j1:j2], i1


def assert_one_line_changed(old: str, new: str) -> tuple[str, str]:
    """Exactly one line replaced (or inserted); every other byte identical. Returns (old line, new line)."""
    removed, added, at = changed_lines(old, new)
    assert len(added) == 1 and len(removed) <= 1, (removed, added)
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    assert "".join(a[:at]) == "".join(b[:at])
    assert "".join(a[at + len(removed) :]) == "".join(b[at + 1 :])
    return (removed[0] if removed else ""), added[0]


# --------------------------------------------------------------------------------------------------
# Every sample


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_candidates_are_in_scope_new_and_unique(name: str) -> None:
    ctx = sample_context(name)
    targets = edit_targets(ctx.model, ctx.entry)
    assert targets
    cands = propose_all(ctx)
    keys = [c.key for c in cands]
    assert len(keys) == len(set(keys)), keys
    assert len({c.description for c in cands}) == len(cands)
    assert len({c.text for c in cands}) == len(cands)
    for c in cands:
        assert c.proposer == "tuner"
        assert c.text != ctx.text, c.description
        # As verify checks it: the kernels the entry launches, plus the entry's own spec fields.
        r = check_scope(ctx.text, c.text, targets, str(SAMPLES / name), ctx.entry)
        assert r.ok, f"{name}: {c.description}: {r.reason}"
        cm = parse_source(c.text)
        assert not cm.syntax_errors, c.description
        # The candidate's spec still validates against the kernel.
        cb = next(b for b in specmod.specs_from_source(cm)[0] if b.entry == ctx.entry)
        errors = [
            i for i in specmod.validate_against(cb, cm.function(ctx.entry), cm) if i.severity == "error"
        ]
        assert not errors, (c.description, errors)


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_k_limits_and_tried_transforms_are_skipped(name: str) -> None:
    ctx = sample_context(name)
    cands = propose_all(ctx)
    assert Tuner().propose(ctx, 2) == cands[:2]
    for c in cands:
        # Tried by transform name (memory of earlier runs) ...
        again = propose_all(
            sample_context(name, tried=[{"transform": c.description, "verdict": "not_faster"}])
        )
        assert c.description not in {x.description for x in again}
        assert len(again) == len(cands) - 1
        # ... or by key.
        again = propose_all(sample_context(name, tried=[{"key": c.key, "verdict": "mismatch"}]))
        assert c.key not in {x.key for x in again}
    everything = [{"transform": c.description} for c in cands]
    assert propose_all(sample_context(name, tried=everything)) == []


def test_expected_transforms_per_sample() -> None:
    got = {name: [c.description for c in propose_all(sample_context(name))] for name in SAMPLE_FILES}
    assert got["softmax_row.cu"][:3] == ["tunable:BLOCK=128", "tunable:BLOCK=64", "tunable:BLOCK=32"]
    assert {"restrict", "launch_bounds:256", "float_literals", "flag:--extra-device-vectorization"} <= set(
        got["softmax_row.cu"]
    )
    assert {"block:128", "block:512", "block:1024"} <= set(got["conv1d.cu"])
    assert "float_literals" in got["layernorm.cu"]
    assert not any(d.startswith("block:") for d in got["vector_add.cu"])  # tunables own the block size there
    # The host launcher: restrict on the kernel it launches, the launch's block size through the launcher's
    # own grid formula, compile flags.
    assert got["relu_launcher.cu"][0] == "restrict"
    assert {"host_block:relu_kernel=128", "host_block:relu_kernel=512"} <= set(got["relu_launcher.cu"])
    assert "flag:--extra-device-vectorization" in got["relu_launcher.cu"]
    # 2-D launches of independent threads: other block shapes.
    assert {"block:32x8", "block:64x4"} <= set(got["stencil2d.cu"])


def test_findings_order_the_transforms() -> None:
    text = (SAMPLES / "softmax_row.cu").read_text()
    fn = parse_source(text).function("softmax_row")
    assert fn is not None
    line = fn.span.start_line

    def finding(code: str, **evidence: object) -> Finding:
        return Finding(
            code=code,
            severity=Severity("warning"),
            message=code,
            path="k.cu",
            range=line_range(line),
            kernel="softmax_row",
            evidence=dict(evidence),
        )

    plain = [c.description for c in propose_all(context(text))]
    assert plain[0].startswith("tunable:")
    kl401 = [c.description for c in propose_all(context(text, findings=[finding("KL401")]))]
    assert kl401[0] == "float_literals"
    kl405 = [c.description for c in propose_all(context(text, findings=[finding("KL405")]))]
    assert kl405.index("restrict") < kl405.index("tunable:BLOCK=128")
    kl103 = propose_all(context(text, findings=[finding("KL103", registers=96)]))
    descs = [c.description for c in kl103]
    assert "flag:-maxrregcount=72" in descs
    c = by_desc(kl103)["flag:-maxrregcount=72"]
    old, new = assert_one_line_changed(text, c.text)
    assert old == "" and new == 'flags = ["-maxrregcount=72"]\n'
    # A finding about another kernel changes nothing.
    other = finding("KL401").model_copy(update={"kernel": "someone_else"})
    assert [c.description for c in propose_all(context(text, findings=[other]))] == plain


# --------------------------------------------------------------------------------------------------
# Individual transforms


def test_float_literals_only_inside_the_kernel_body() -> None:
    # softmax_row with double literals in a device helper, in host code and in another kernel too.
    text = (SAMPLES / "softmax_row.cu").read_text()
    text = text.replace(
        "/* kernellsp", "__device__ float halve(float v) { return v * 0.5; }\n\n/* kernellsp", 1
    )
    text += (
        "\n__global__ void other(float* y) { y[0] = 2.5; }\n"
        "\ndouble host_scale(double v) { return v * 1.5e3; }\n"
    )
    ctx = context(text, "softmax_row.cu", entry="softmax_row")
    cand = by_desc(propose_all(ctx))["float_literals"]
    fn = ctx.model.function("softmax_row")
    assert fn is not None and fn.body_span is not None
    body = (fn.body_span.start_byte, fn.body_span.end_byte)
    a, b = text.encode(), cand.text.encode()
    inserts = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        assert op == "insert" and b[j1:j2] == b"f", (op, a[i1:i2], b[j1:j2])
        assert body[0] < i1 < body[1], i1
        inserts.append(i1)
    assert len(inserts) == 1
    assert "* (1.0f / sum)" in cand.text
    assert "return v * 0.5; }" in cand.text and "y[0] = 2.5; }" in cand.text and "v * 1.5e3; }" in cand.text
    cm = parse_source(cand.text)
    assert not cm.syntax_errors
    assert cm.function("softmax_row") is not None and cm.function("softmax_row").has_body  # type: ignore[union-attr]
    assert check_scope(text, cand.text, ["softmax_row"]).ok


def test_float_literals_on_the_sample_and_exponent_forms() -> None:
    text = (SAMPLES / "softmax_row.cu").read_text()
    cand = by_desc(propose_all(sample_context("softmax_row.cu")))["float_literals"]
    old, new = assert_one_line_changed(text, cand.text)
    assert old.replace("(1.0 / sum)", "(1.0f / sum)") == new
    # Exponent and leading-dot forms get a suffix; integers, existing f and hex literals do not.
    src = text.replace("float sum = 0.0f;", "float sum = 0.0f * 1e-3 + .5 * 2 + 3.f + 0x10 + 1.0E+2;")
    c2 = by_desc(propose_all(context(src)))["float_literals"]
    assert "float sum = 0.0f * 1e-3f + .5f * 2 + 3.f + 0x10 + 1.0E+2f;" in c2.text
    assert not parse_source(c2.text).syntax_errors


def test_float_literals_skips_double_kernels() -> None:
    text = (SAMPLES / "softmax_row.cu").read_text().replace("float sum = 0.0f;", "double sum = 0.0;")
    assert "float_literals" not in by_desc(propose_all(context(text)))


RESTRICT = """\
/* kernellsp
sizes = { N = 4096 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
[args]
a = { dtype = "f32", dir = "in", count = "N" }
b = { dtype = "f32", dir = "in", count = "N" }
c = { dtype = "f32", dir = "inout", count = "N" }
d = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void axpb(float* a, const float* b, float *c, float* __restrict__ d, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] += a[i] * b[i];
        d[i] = a[i];
    }
}
"""


def test_restrict_adds_restrict_and_const_on_read_only_pointers() -> None:
    cand = by_desc(propose_all(context(RESTRICT)))["restrict"]
    _, new = assert_one_line_changed(RESTRICT, cand.text)
    assert new == (
        "__global__ void axpb(const float* __restrict__ a, const float* __restrict__ b, "
        "float * __restrict__ c, float* __restrict__ d, int n)\n"
    )
    assert check_scope(RESTRICT, cand.text, ["axpb"]).ok
    fn = parse_source(cand.text).function("axpb")
    assert fn is not None
    assert [(p.name, p.is_const, p.is_restrict) for p in fn.params if p.is_pointer] == [
        ("a", True, True),
        ("b", True, True),
        ("c", False, True),
        ("d", False, True),
    ]


def test_restrict_on_samples() -> None:
    for name in SAMPLE_FILES:
        ctx = sample_context(name)
        c = by_desc(propose_all(ctx)).get("restrict")
        if c is None:
            continue
        from kernellsp.optimize.verify.scope import edit_targets

        for kernel in edit_targets(ctx.model, ctx.entry):
            fn = parse_source(c.text).function(kernel)
            assert fn is not None
            assert all(p.is_restrict for p in fn.params if p.is_pointer), name
        old, new = assert_one_line_changed(ctx.text, c.text)
        assert "__restrict__" in new and "__restrict__" not in old


def test_no_restrict_candidate_when_already_restricted() -> None:
    text = RESTRICT.replace(
        "float* a, const float* b, float *c, float* __restrict__ d",
        "const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, "
        "float* __restrict__ d",
    )
    assert "restrict" not in by_desc(propose_all(context(text)))


@pytest.mark.parametrize("name", ["softmax_row.cu", "vector_add.cu", "saxpy_strided.cu"])
def test_tunable_candidates_change_exactly_one_line(name: str) -> None:
    ctx = sample_context(name)
    tunables = ctx.spec.spec.tunables
    cands = [c for c in propose_all(ctx) if c.description.startswith("tunable:")]
    assert len(cands) == sum(len(v) - 1 for v in tunables.values())
    for c in cands:
        old, new = assert_one_line_changed(ctx.text, c.text)
        assert old.startswith("tunables =") and new.startswith("tunables =")
        tname, value = c.description[len("tunable:") :].split("=")
        cspec = specmod.specs_from_source(parse_source(c.text))[0][0].spec
        assert str(cspec.tunables[tname][0]) == value
        assert sorted(map(str, cspec.tunables[tname])) == sorted(map(str, tunables[tname]))
        # Nothing else in the spec moved.
        assert cspec.model_dump(exclude={"tunables"}) == ctx.spec.spec.model_dump(exclude={"tunables"})


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_flag_and_block_candidates_change_exactly_one_line(name: str) -> None:
    ctx = sample_context(name)
    for c in propose_all(ctx):
        if c.description.startswith("flag:"):
            old, new = assert_one_line_changed(ctx.text, c.text)
            flag = c.description[len("flag:") :]
            assert old == "" and new == f'flags = ["{flag}"]\n'
            assert new.startswith("flags =")
            cspec = specmod.specs_from_source(parse_source(c.text))[0][0].spec
            assert cspec.flags == [flag]
            assert cspec.model_dump(exclude={"flags"}) == ctx.spec.spec.model_dump(exclude={"flags"})
        elif c.description.startswith("block:"):
            old, new = assert_one_line_changed(ctx.text, c.text)
            assert old.startswith("launch =") and new.startswith("launch =")
            dims = [int(x) for x in c.description[len("block:") :].split("x")]
            cspec = specmod.specs_from_source(parse_source(c.text))[0][0].spec
            assert cspec.launch is not None
            assert cspec.launch.block == (dims[0] if len(dims) == 1 else dims)
            assert all(f", {b})" in str(cspec.launch.grid) for b in dims)
        elif c.description.startswith("launch_bounds:"):
            old, new = assert_one_line_changed(ctx.text, c.text)
            assert new == old.replace(
                f" {ctx.entry}(", f" __launch_bounds__({c.description.split(':')[1]}) {ctx.entry}("
            )


def test_flag_replaces_an_existing_flags_line() -> None:
    text = (SAMPLES / "softmax_row.cu").read_text()
    text = text.replace(
        "tunables = { BLOCK = [256, 128, 64, 32] }",
        'tunables = { BLOCK = [256, 128, 64, 32] }\nflags = ["-lineinfo", "-maxrregcount=96"]',
    )
    fn = parse_source(text).function("softmax_row")
    assert fn is not None
    kl103 = Finding(
        code="KL103",
        severity=Severity("warning"),
        message="regs",
        path="k.cu",
        range=line_range(fn.span.start_line),
        kernel="softmax_row",
        evidence={"registers": 96},
    )
    cands = by_desc(propose_all(context(text, findings=[kl103])))
    old, new = assert_one_line_changed(text, cands["flag:--extra-device-vectorization"].text)
    assert old == 'flags = ["-lineinfo", "-maxrregcount=96"]\n'
    assert new == 'flags = ["-lineinfo", "-maxrregcount=96", "--extra-device-vectorization"]\n'
    old, new = assert_one_line_changed(text, cands["flag:-maxrregcount=72"].text)
    assert new == 'flags = ["-lineinfo", "-maxrregcount=72"]\n'
    for c in cands.values():
        assert check_scope(text, c.text, ["softmax_row"]).ok, c.description
    # A flag already there is not proposed again.
    text2 = text.replace('"-lineinfo", ', '"-lineinfo", "--extra-device-vectorization", ')
    assert "flag:--extra-device-vectorization" not in by_desc(propose_all(context(text2)))


def test_tuner_builds_on_the_champion() -> None:
    """Round 2 starts from the round-1 winner: the original tunable order is gone, its transform too."""
    first = by_desc(propose_all(sample_context("softmax_row.cu")))["tunable:BLOCK=64"]
    text = (SAMPLES / "softmax_row.cu").read_text()
    model = parse_source(first.text)
    b = specmod.specs_from_source(model)[0][0]
    ctx = ProposalContext(
        "softmax_row.cu",
        first.text,
        text,
        "softmax_row",
        model,
        b,
        tried=[{"key": first.key, "transform": first.description}],
    )
    descs = [c.description for c in propose_all(ctx)]
    assert "tunable:BLOCK=64" not in descs
    assert {"tunable:BLOCK=256", "tunable:BLOCK=128", "tunable:BLOCK=32"} <= set(descs)
    for c in propose_all(ctx):
        assert check_scope(first.text, c.text, ["softmax_row"]).ok
        assert check_scope(text, c.text, ["softmax_row"]).ok


# --------------------------------------------------------------------------------------------------
# Every candidate's harness builds with the real nvcc


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
def test_every_candidate_harness_compiles(tmp_path: Path, harness_runtime_object: Path) -> None:
    jobs = []
    runtime = harness_runtime_object
    work = [
        (name, sample_context(name), propose_all(sample_context(name)))
        for name in ("softmax_row.cu", "conv1d.cu")
    ]
    assert all(len(cands) >= 5 for _, _, cands in work)
    # The restrict rewrite of `float *c` (no space after the star) must still name the parameter c.
    rctx = context(RESTRICT)
    work.append(("axpb.cu", rctx, [by_desc(propose_all(rctx))["restrict"]]))
    for name, ctx, cands in work:
        for i, c in enumerate(cands):
            d = tmp_path / f"{Path(name).stem}-{i}"
            d.mkdir()
            src = d / name
            src.write_text(c.text)
            model = parse_source(c.text, str(src))
            b = next(x for x in specmod.specs_from_source(model)[0] if x.entry == ctx.entry)
            plan = harness.plan_harness(model, b.spec, ctx.entry)
            assert plan.flags == b.spec.flags
            if c.description.startswith("tunable:BLOCK="):
                assert plan.shapes[0].block == (int(c.description.split("=")[1]), 1, 1)
            # The split build verify uses: the entry unit compiled and linked with the runtime object built once.
            (d / "harness.cu").write_text(harness.generate_harness(plan, name, split=True))
            nvcc = NVCC or "nvcc"
            cmds = [
                hb.unit_compile_command("harness.cu", "h.o", "sm_90", plan.flags, nvcc),
                hb.link_command(["h.o", str(runtime)], "h", "sm_90", plan.flags, nvcc),
            ]
            jobs.append((f"{name}: {c.description}", cmds, d))

    def build(job: tuple[str, list[list[str]], Path]) -> tuple[str, int, str]:
        label, cmds, cwd = job
        for cmd in cmds:
            proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                break
        return label, proc.returncode, proc.stderr[-2000:]

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = list(pool.map(build, jobs))
    failed = [r for r in results if r[1] != 0]
    assert not failed, failed
    assert all((j[2] / "h").is_file() for j in jobs)


# --------------------------------------------------------------------------------------------------
# Candidates the verification would only throw away are not proposed


def test_block_sizes_stay_within_launch_bounds() -> None:
    text = (SAMPLES / "conv1d.cu").read_text()
    bounded = text.replace("__global__ void conv1d(", "__global__ void __launch_bounds__(256) conv1d(", 1)
    assert bounded != text
    descs = [c.description for c in Tuner().propose(context(bounded, "conv1d.cu"), 50)]
    assert "block:128" in descs and "block:512" not in descs and "block:1024" not in descs
    # The check names the same problem in a hand-written spec (KL003 on the launch).
    model = parse_source(bounded.replace("block = 256", "block = 512"), "conv1d.cu")
    [b] = specmod.specs_from_source(model)[0]
    issues = specmod.validate_against(b, model.function("conv1d"), model)
    assert any(i.field == "launch.block" and "__launch_bounds__(256)" in i.message for i in issues)


def test_spec_candidates_read_back_as_intended() -> None:
    """A spec written as a [launch] table: a patch that cannot express the new launch yields no candidate
    rather than a file whose spec no longer parses."""
    inline = (SAMPLES / "conv1d.cu").read_text()
    line = 'launch = { grid = "ceil_div(N, 256)", block = 256 }\n'
    end = inline.index("*/", inline.index(line))
    text = (
        inline[:end].replace(line, "", 1)
        + '[launch]\ngrid = "ceil_div(N, 256)"\nblock = 256\n'
        + inline[end:]
    )
    assert specmod.entry_spec(parse_source(text, "conv1d.cu"), "conv1d") is not None
    cands = Tuner().propose(context(text, "conv1d.cu"), 50)
    assert cands  # the qualifier and flag transforms still apply
    for cand in cands:
        model = parse_source(cand.text, "conv1d.cu")
        b = specmod.entry_spec(model, "conv1d")
        assert b is not None, cand.description
        assert not [
            i for i in specmod.validate_against(b, model.function("conv1d"), model) if i.severity == "error"
        ]


RESTRICT_SPELLINGS = """/* kernellsp
sizes = { N = 4096 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
[args]
a = { dtype = "f32", dir = "in", count = "2 * N" }
d = { dtype = "f32", dir = "out", count = "2 * N" }
n = { value = "N" }
*/
__global__ void pairs(const float2 * __restrict a, float2 * __restrict d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = make_float2(a[i].y, a[i].x);
}
"""


def test_every_restrict_spelling_reads_as_restrict() -> None:
    # `float2 * __restrict d` once became `* __restrict__ __restrict d`, which does not parse.
    fn = parse_source(RESTRICT_SPELLINGS).function("pairs")
    assert fn is not None and all(p.is_restrict for p in fn.params if p.is_pointer)
    assert "restrict" not in by_desc(propose_all(context(RESTRICT_SPELLINGS)))


@pytest.mark.skipif(not NVCC, reason="needs nvcc")
@pytest.mark.parametrize(
    ("name", "prefix"),
    [("relu_launcher.cu", "host_block:"), ("relu_launcher.cu", "restrict"), ("stencil2d.cu", "block:32x")],
)
def test_launch_transforms_pass_the_scope_gate_and_compile(name: str, prefix: str, tmp_path: Path) -> None:
    from kernellsp.build import nvcc

    ctx = sample_context(name)
    cands = [c for c in propose_all(ctx) if c.description.startswith(prefix)]
    assert cands, [c.description for c in propose_all(ctx)]
    for c in cands[:2]:
        sc = check_scope(ctx.text, c.text, edit_targets(ctx.model, ctx.entry), entry=ctx.entry)
        assert sc.ok, (c.description, sc.reason)
        res = nvcc.build(tmp_path / name, c.text, parse_source(c.text, name), use_cache=False)
        assert res.ok, (c.description, [str(m) for m in res.messages if m.severity == "error"][:2])
    if prefix == "host_block:":
        # The launcher's own grid formula, its block spelled as the new size.
        assert any("relu_kernel<<<((N + 128 - 1) / 128), 128>>>" in c.text for c in cands)


ALIASED = """/* kernellsp
sizes = { N = 4096 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
[args]
inp = { dtype = "f32", dir = "in", count = "N" }
out = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void shifted(float* out, float* inp, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float* row = inp + i;
    if (i < n) out[i] = row[0] * 2.0f;
}
"""


@pytest.mark.skipif(not NVCC, reason="needs nvcc")
def test_restrict_adds_no_const_a_local_pointer_cannot_take(tmp_path: Path) -> None:
    # `float* row = inp + i;` does not compile once `inp` is `const float*`: restrict only, no const.
    from kernellsp.build import nvcc

    c = by_desc(propose_all(context(ALIASED)))["restrict"]
    assert "float* __restrict__ inp" in c.text and "const float* __restrict__ inp" not in c.text
    res = nvcc.build(tmp_path / "a.cu", c.text, parse_source(c.text, "a.cu"), use_cache=False)
    assert res.ok, [str(m) for m in res.messages if m.severity == "error"][:2]


@pytest.mark.skipif(not NVCC, reason="needs nvcc")
def test_unroll_annotates_innermost_counted_loops(tmp_path: Path) -> None:
    from kernellsp.build import nvcc

    for name in ("conv1d.cu", "softmax_row.cu", "sgemm_naive.cu"):
        ctx = sample_context(name)
        cands = by_desc(propose_all(ctx))
        c = cands["unroll:4"]
        diff = [
            ln
            for ln in difflib.unified_diff(ctx.text.splitlines(), c.text.splitlines(), lineterm="", n=0)
            if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---"))
        ]
        assert diff and all(ln[1:].strip() == "#pragma unroll 4" for ln in diff), (name, diff)
        sc = check_scope(ctx.text, c.text, edit_targets(ctx.model, ctx.entry), entry=ctx.entry)
        assert sc.ok, (name, sc.reason)
        res = nvcc.build(tmp_path / name, c.text, parse_source(c.text, name), use_cache=False)
        assert res.ok, (name, [str(m) for m in res.messages if m.severity == "error"][:2])
        # Annotated loops are not annotated again.
        again = context(c.text, str(SAMPLES / name))
        assert "unroll:8" not in by_desc(propose_all(again))
    # No counted loop with an unknown trip count: nothing to annotate.
    assert "unroll:4" not in by_desc(propose_all(sample_context("vector_add.cu")))


def test_launch_bounds_with_min_blocks_where_registers_limit_occupancy() -> None:
    text = (SAMPLES / "conv1d.cu").read_text()
    entry = sample_context("conv1d.cu").entry
    f = Finding(
        code="KL103",
        severity=Severity("warning"),
        message="registers limit occupancy",
        path="k.cu",
        range=line_range(1),
        kernel=entry,
        evidence={"registers": 96},
    )
    plain = by_desc(propose_all(sample_context("conv1d.cu")))
    assert not any(d.startswith("launch_bounds:") and "," in d for d in plain)
    cands = by_desc(propose_all(context(text, str(SAMPLES / "conv1d.cu"), findings=[f])))
    lb = [d for d in cands if d.startswith("launch_bounds:") and "," in d]
    assert lb, list(cands)
    bs, min_blocks = (int(x) for x in lb[0].split(":")[1].split(","))
    assert bs * min_blocks >= 2048 or min_blocks == 32
    assert f"__launch_bounds__({bs}, {min_blocks})" in cands[lb[0]].text


SMEM_TILE = """#define TILE 32
/* kernellsp
sizes = { W = 1024, H = 1024 }
launch = { grid = ["W // 32", "H // 32"], block = [32, 32] }
shapes = [{ W = 64, H = 96 }]
[args]
in = { dtype = "f32", dir = "in", count = "W * H" }
out = { dtype = "f32", dir = "out", count = "W * H" }
w = { value = "W" }
h = { value = "H" }
*/
__global__ void transpose_tile(const float* in, float* out, int w, int h) {
    __shared__ float tile[TILE][TILE];
    __shared__ float flat[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * w + x];
    flat[threadIdx.y][threadIdx.x] = 0.0f;
    __syncthreads();
    float* row = flat[threadIdx.x];
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    out[y * h + x] = tile[threadIdx.x][threadIdx.y] + row[0];
}
"""


@pytest.mark.skipif(not NVCC, reason="needs nvcc")
def test_smem_pad_pads_tiles_indexed_only_in_two_dimensions(tmp_path: Path) -> None:
    from kernellsp.build import nvcc

    ctx = context(SMEM_TILE)
    c = by_desc(propose_all(ctx))["smem_pad"]
    assert "__shared__ float tile[TILE][TILE + 1];" in c.text
    # `flat[threadIdx.x]` is a row pointer: its row length is visible to code, so it keeps it.
    assert "__shared__ float flat[TILE][TILE];" in c.text
    sc = check_scope(ctx.text, c.text, edit_targets(ctx.model, ctx.entry), entry=ctx.entry)
    assert sc.ok, sc.reason
    res = nvcc.build(tmp_path / "t.cu", c.text, parse_source(c.text, "t.cu"), use_cache=False)
    assert res.ok, [str(m) for m in res.messages if m.severity == "error"][:2]
    # Padded once: the padded tile (33 columns) is not padded again.
    assert "smem_pad" not in by_desc(propose_all(context(c.text)))
