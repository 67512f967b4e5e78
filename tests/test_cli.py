"""The `kernellsp` command line: output formats, exit codes, and bad input that must never produce a traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from helpers.common import REPO, requires_nvcc
from typer.testing import CliRunner, Result

from kernellsp import __version__
from kernellsp.build import toolchain
from kernellsp.cli import app

SCHEMA_PATH = Path(__file__).resolve().parent / "fixtures" / "sarif-schema-2.1.0.json"
FINDING_LINE = re.compile(
    r"^(?P<path>[^:\s][^:]*\.cuh?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|info|hint): "
    r"(?P<code>KL\d{3}) (?P<msg>\S.*)$"
)
SUMMARY = re.compile(r"^(No findings|\d+ findings? \(.*\)) in \d+ files? \(\d+ kernels?\)\.")

CLEAN = """\
/* kernellsp
sizes = { N = 1048576 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }]
[args]
x = { dtype = "f32", dir = "in", count = "N" }
y = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
WARN_ONLY = CLEAN.replace("if (i < n) y[i] = 2.0f * x[i];", "if (i < n) y[i] = x[i] * 0.1;")


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def run_module(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "kernellsp", *args],
        cwd=cwd,
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


def finding_lines(output: str) -> list[re.Match[str]]:
    return [m for m in (FINDING_LINE.match(ln) for ln in output.splitlines()) if m]


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(REPO)
    return REPO


# --------------------------------------------------------------------------------------------------
# Formats and exit codes


@requires_nvcc
def test_check_samples_text(in_repo: Path) -> None:
    result = invoke("check", "samples/")
    assert result.exit_code == 1
    out = result.stdout
    lines = out.strip().splitlines()
    found = finding_lines(out)
    assert len(found) == len(lines) - 1, "every line but the summary is a finding"
    assert SUMMARY.match(lines[-1]), lines[-1]
    assert f"{len(found)} findings" in lines[-1] and "in 12 files (12 kernels)" in lines[-1]
    for m in found:
        assert m.group("path").startswith("samples/")
        text = (in_repo / m.group("path")).read_text().split("\n")
        line, col = int(m.group("line")), int(m.group("col"))
        assert 1 <= line <= len(text) and 1 <= col <= len(text[line - 1]) + 1
    got = {(m.group("path"), m.group("line"), m.group("code")) for m in found}
    assert ("samples/reduce_atomic.cu", "18", "KL403") in got
    assert ("samples/transpose_naive.cu", "19", "KL404") in got
    assert ("samples/median_filter.cu", "17", "KL102") in got
    assert any(p == "samples/softmax_row.cu" and c == "KL401" for p, _, c in got)
    assert "\x1b[" not in result.output, "no colour when stdout is not a TTY"


@requires_nvcc
def test_check_samples_json_is_valid_stable_and_sorted(in_repo: Path) -> None:
    first = invoke("check", "--format", "json", "samples/")
    second = invoke("check", "-f", "json", "samples")
    assert first.exit_code == second.exit_code == 1
    assert first.stdout == second.stdout, "JSON output is stable from run to run"
    doc = json.loads(first.stdout)
    assert doc["version"] == 1 and doc["kernellsp"] == __version__
    keys = [
        (f["path"], f["range"]["start_line"], f["range"]["start_col"], f["code"]) for f in doc["findings"]
    ]
    assert keys == sorted(keys)
    assert len(doc["files"]) == 12 and all(f["error"] is None for f in doc["files"])
    assert all(f["build"]["ok"] and f["build"]["arch"] == "sm_90" for f in doc["files"])
    f0 = doc["findings"][0]
    assert f0["location"]["line"] == f0["range"]["start_line"] + 1
    assert sum(doc["summary"].values()) == len(doc["findings"])
    kernels = {k["name"]: k for f in doc["files"] for k in f["kernels"]}
    assert kernels["median_filter"]["metrics"]["stack_frame"] > 0
    # The text and JSON outputs report the same findings.
    text = invoke("check", "samples/").stdout
    assert len(finding_lines(text)) == len(doc["findings"])


@requires_nvcc
def test_check_samples_sarif_validates_against_the_schema(in_repo: Path) -> None:
    result = invoke("check", "--format", "sarif", "samples/")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    errors = sorted(
        validator_cls(schema, format_checker=validator_cls.FORMAT_CHECKER).iter_errors(doc), key=str
    )
    assert errors == [], [e.message for e in errors[:5]]
    run = doc["runs"][0]
    assert run["tool"]["driver"]["name"] == "kernellsp"
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rule_ids == sorted(set(rule_ids))
    for res in run["results"]:
        assert rule_ids[res["ruleIndex"]] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"].startswith("samples/")
        assert loc["region"]["startLine"] >= 1
        assert re.fullmatch(r"[0-9a-f]{16}:1", res["partialFingerprints"]["primaryLocationLineHash"])
    assert len(run["results"]) == len(
        json.loads(invoke("check", "-f", "json", "samples/").stdout)["findings"]
    )


@requires_nvcc
def test_fail_on_error_exits_0_with_only_warnings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("warn.cu").write_text(WARN_ONLY)
    default = invoke("check", "warn.cu")
    assert default.exit_code == 1
    assert "warn.cu:13:5: warning: KL401 line 13 of scale" in default.stdout
    assert " error " not in default.stdout
    assert invoke("check", "--fail-on", "error", "warn.cu").exit_code == 0
    assert invoke("check", "--fail-on", "warning", "warn.cu").exit_code == 1
    assert invoke("check", "--fail-on", "never", "warn.cu").exit_code == 0


@requires_nvcc
def test_clean_file_exits_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("clean.cu").write_text(CLEAN)
    result = invoke("check", "clean.cu")
    assert result.exit_code == 0, result.output
    assert result.stdout == "No findings in 1 file (1 kernel).\n"


@requires_nvcc
def test_output_file_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("warn.cu").write_text(WARN_ONLY)
    result = invoke("check", "-f", "json", "-o", "report.json", "warn.cu")
    assert result.exit_code == 1 and result.stdout == ""
    assert [f["code"] for f in json.loads(Path("report.json").read_text())["findings"]] == ["KL401"]
    bad = invoke("check", "-o", str(tmp_path / "no" / "such" / "dir" / "r.txt"), "warn.cu")
    assert bad.exit_code == 2 and "cannot write" in bad.output


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"kernellsp {__version__}\n"


def test_python_m_version() -> None:
    proc = run_module("--version")
    assert proc.returncode == 0
    assert proc.stdout == f"kernellsp {__version__}\n"


def test_doctor_names_nvcc() -> None:
    result = invoke("doctor")
    nvcc = toolchain.find_tool("nvcc")
    line = next(ln for ln in result.stdout.splitlines() if re.match(r"^\[(ok  |MISS|warn)\] nvcc ", ln))
    if nvcc is not None:
        assert line.startswith("[ok  ] nvcc") and nvcc in line
    else:
        assert line.startswith("[MISS] nvcc") and result.exit_code == 2
    # 2: kernellsp cannot check files; 1: something optional is missing ([MISS]); 0: everything is there.
    required_ok = nvcc is not None and toolchain.find_tool("ptxas") is not None
    any_missing = any(ln.startswith("[MISS]") for ln in result.stdout.splitlines())
    assert result.exit_code == (2 if not required_ok else 1 if any_missing else 0)
    for name in ("ptxas", "nvdisasm", "ncu", "gpu", "llm"):
        assert any(re.match(rf"^\[(ok  |MISS|warn)\] {name}\b", ln) for ln in result.stdout.splitlines()), (
            name
        )
    llm = next(ln for ln in result.stdout.splitlines() if re.match(r"^\[(ok  |warn)\] llm\b", ln))
    if "no endpoint" in llm:
        # Without an LLM the recipes come first, the tuner after them.
        assert "built-in recipes, then the built-in tuner" in llm


@requires_nvcc
def test_no_colour_codes_when_not_a_tty(in_repo: Path) -> None:
    proc = run_module("check", "samples/vector_add.cu", "samples/median_filter.cu")
    assert proc.returncode == 1
    assert "\x1b[" not in proc.stdout and "\x1b[" not in proc.stderr
    assert finding_lines(proc.stdout)


# --------------------------------------------------------------------------------------------------
# Bad input: a clear message, the right exit code, never a traceback


@requires_nvcc
def test_syntax_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = CLEAN.replace("if (i < n) y[i] = 2.0f * x[i];", "if (i < n) y[i] = 2.0f * x[i] +;").replace(
        "int i = blockIdx.x * blockDim.x + threadIdx.x;", "int i = blockIdx.x * blockDim.x + threadIdx.x"
    )
    Path("broken.cu").write_text(src)
    result = invoke("check", "broken.cu")
    assert result.exit_code == 1
    kl001 = [m for m in finding_lines(result.stdout) if m.group("code") == "KL001"]
    assert kl001, result.stdout
    lines = src.split("\n")
    for m in kl001:
        assert m.group("sev") == "error"
        assert m.group("msg").startswith("nvcc: ")
    assert {int(m.group("line")) for m in kl001} <= {12, 13}
    assert "x[i] +;" in lines[int(kl001[-1].group("line")) - 1]


def test_binary_garbage_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("garbage.cu").write_bytes(b"\x7fELF\x02\x01\x01\x00" + os.urandom(4096) + b"\x00" * 64)
    result = invoke("check", "garbage.cu")
    assert result.exit_code == 2
    assert "garbage.cu: error: not a text file" in result.stdout
    assert "1 file could not be checked" in result.stdout


def test_empty_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("empty.cu").write_text("")
    result = invoke("check", "empty.cu")
    assert result.exit_code == 0
    assert result.stdout == "No findings in 1 file (0 kernels).\n"


def _generated(n_kernels: int) -> str:
    one = (
        "// kernel {i}: a scaled copy with a grid-stride loop\n"
        "__global__ void gen_{i}(const float* __restrict__ a, float* __restrict__ b, int n)\n"
        "{{\n"
        "    // thread index\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    int stride = gridDim.x * blockDim.x;\n"
        "\n"
        "    for (; i < n; i += stride) {{\n"
        "        float v = a[i];\n"
        "        b[i] = v * {i}.0f + 1.0f;\n"
        "    }}\n"
        "}}\n"
        "\n"
    )
    return "".join(one.format(i=i) for i in range(n_kernels))


@requires_nvcc
@pytest.mark.slow
def test_ten_thousand_line_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = _generated(800)
    assert text.count("\n") >= 10_000
    Path("big.cu").write_text(text)
    t0 = time.monotonic()
    result = invoke("check", "--no-cache", "--format", "json", "big.cu")
    elapsed = time.monotonic() - t0
    assert elapsed < 60, f"checking a 10,000-line file took {elapsed:.1f} s"
    doc = json.loads(result.stdout)
    assert doc["files"][0]["build"]["ok"] and len(doc["files"][0]["kernels"]) == 800
    assert {f["code"] for f in doc["findings"]} == {"KL004"}  # no specs; nothing else is wrong
    expected = 1 if any(f["severity"] in ("error", "warning", "info") for f in doc["findings"]) else 0
    assert result.exit_code == expected == 0
    last = doc["findings"][-1]
    assert (last["kernel"], last["location"]["line"]) == ("gen_799", 799 * 13 + 2)


def test_unreadable_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = Path("locked.cu")
    p.write_text(CLEAN)
    p.chmod(0)
    if os.geteuid() == 0:
        # root reads files whatever their mode: make the read itself fail as it would for another user.
        real = Path.read_bytes

        def denied(self: Path) -> bytes:
            if self.name == "locked.cu":
                raise PermissionError(13, "Permission denied", str(self))
            return real(self)

        monkeypatch.setattr(Path, "read_bytes", denied)
    try:
        result = invoke("check", "locked.cu")
    finally:
        p.chmod(0o644)
    assert result.exit_code == 2
    assert "locked.cu: error: cannot read the file: permission denied" in result.stdout


def test_nonexistent_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("check", "does/not/exist.cu")
    assert result.exit_code == 2
    assert result.stderr == "error: does/not/exist.cu: no such file or directory\n"
    assert result.stdout == ""


def test_directory_without_cuda_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    result = invoke("check", str(tmp_path))
    assert result.exit_code == 2
    assert "no CUDA files (.cu, .cuh) found" in result.output


def _without_nvcc(cmd: list[str], tmp_path: Path) -> list[str]:
    """``cmd`` run so that no nvcc can be found: PATH is a bare directory, CUDA_HOME is unset (the env), and
    /usr/local/cuda/bin, which kernellsp always searches, is hidden behind an empty bind mount."""
    default = Path("/usr/local/cuda/bin")
    if not (default / "nvcc").exists():
        return cmd
    unshare, mount = shutil.which("unshare"), shutil.which("mount")
    if unshare is None or mount is None:
        pytest.skip("nvcc is in /usr/local/cuda/bin and unshare/mount are not available to hide it")
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    probe = subprocess.run([unshare, "-rm", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip("nvcc is in /usr/local/cuda/bin and user namespaces are disabled, so it cannot be hidden")
    script = f'{mount} --bind "{empty}" "{os.path.realpath(default)}" && exec "$@"'
    return [unshare, "-rm", "/bin/sh", "-c", script, "sh", *cmd]


def test_nvcc_missing_from_path(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = str(bare)
    env["KERNELLSP_CACHE_DIR"] = str(tmp_path / "cache")
    cmd = _without_nvcc([sys.executable, "-m", "kernellsp", "check", "samples/"], tmp_path)
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stderr
    assert "note: nvcc not found, so only source-level rules ran" in proc.stderr
    found = finding_lines(proc.stdout)
    codes = {m.group("code") for m in found}
    # Source-level rules still run; nothing that needs a build does.
    assert {"KL403", "KL404", "KL405"} <= codes
    assert not codes & {"KL001", "KL002", "KL101", "KL102", "KL103", "KL104", "KL402"}
    # Without SASS, fp64 falls back to the source heuristic (double literals) and still flags softmax_row.
    assert any(m.group("code") == "KL401" and m.group("path") == "samples/softmax_row.cu" for m in found)


def test_malformed_rule_file_in_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("k.cu").write_text(CLEAN)
    rules_dir = Path(".kernellsp/rules")
    rules_dir.mkdir(parents=True)
    bundled = (REPO / "rules" / "KL101-register-spills.toml").read_text()
    bad = rules_dir / "KL101-register-spills.toml"
    bad.write_text(bundled.replace("spill_stores + spill_loads > 0", "spill_storez > 0"))
    result = invoke("check", "k.cu")
    assert result.exit_code == 2
    assert result.stdout == ""
    msg = result.stderr.strip()
    assert "\n" not in msg, "one line, not wrapped at the terminal width"
    assert msg.startswith("error: malformed rule file: ")
    assert str(tmp_path / bad) in msg and "field 'when'" in msg and "unknown metric 'spill_storez'" in msg
    # A broken workspace rule also stops `kernellsp rules`.
    listed = invoke("rules")
    assert listed.exit_code == 2 and "field 'when'" in listed.output


@requires_nvcc
def test_bad_spec_gives_kl003_on_the_spec_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = CLEAN.replace('count = "N" }\nn =', 'count = "N * M" }\nn =')
    Path("spec.cu").write_text(src)
    result = invoke("check", "spec.cu")
    assert result.exit_code == 1
    kl003 = [m for m in finding_lines(result.stdout) if m.group("code") == "KL003"]
    assert kl003
    line = src.split("\n").index('y = { dtype = "f32", dir = "out", count = "N * M" }') + 1
    assert {int(m.group("line")) for m in kl003} == {line}
    assert all(m.group("sev") == "error" for m in kl003)
    assert "spec field 'args.y.count' of scale: unknown name 'M'" in kl003[0].group("msg")


def test_unknown_arch(in_repo: Path) -> None:
    result = invoke("check", "--arch", "banana", "samples/")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --arch banana: 'banana' is not a GPU architecture")
    assert result.stdout == ""


@requires_nvcc
def test_arch_is_judged_by_the_installed_nvcc(in_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # nvcc 13 dropped sm_70 and builds sm_103 / sm_100a: the error comes before any build, naming what nvcc builds.
    dropped = invoke("check", "--arch", "sm_70", "samples/vector_add.cu")
    assert dropped.exit_code == 2
    assert "does not build sm_70 (it builds sm_75" in dropped.stderr
    for arch in ("sm_103", "sm_100a"):
        ok = invoke("check", "--arch", arch, "samples/vector_add.cu")
        assert ok.exit_code in (0, 1), ok.stderr
    # A bad setting is named as the setting, not as an option the user never typed.
    monkeypatch.setenv("KERNELLSP_ARCH", "banana")
    from_env = invoke("check", "samples/vector_add.cu")
    assert from_env.exit_code == 2
    assert "the arch setting 'banana' (kernellsp.toml [settings] or KERNELLSP_ARCH)" in from_env.stderr
    assert "--arch" not in from_env.stderr


def test_unknown_format(in_repo: Path) -> None:
    result = invoke("check", "--format", "xml", "samples/")
    assert result.exit_code == 2
    assert "Invalid value for '--format'" in result.output and "'xml' is not one of" in result.output


def test_unknown_fail_on_and_bad_jobs(in_repo: Path) -> None:
    assert invoke("check", "--fail-on", "sometimes", "samples/").exit_code == 2
    assert invoke("check", "--jobs", "0", "samples/").exit_code == 2


def test_no_arguments_prints_usage() -> None:
    result = invoke()
    assert result.exit_code in (0, 2)
    assert "Usage" in result.output and "check" in result.output


# --------------------------------------------------------------------------------------------------
# Settings come from the file's workspace, as in the editor


def test_settings_of_the_files_workspace_apply_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kernellsp.toml").write_text('[settings]\narch = "sm_80"\n')
    (ws / "k.cu").write_text(CLEAN)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = invoke("check", "-f", "json", str(ws / "k.cu"))
    assert result.exit_code == 0, result.output
    [f] = json.loads(result.stdout)["files"]
    assert f["build"]["arch"] == "sm_80"
    result = invoke("check", "-f", "json", "--arch", "sm_90", str(ws / "k.cu"))  # the flag wins
    assert json.loads(result.stdout)["files"][0]["build"]["arch"] == "sm_90"
    (ws / "kernellsp.toml").write_text("[settings]\nbuild_timeout_s = -5\n")
    result = invoke("check", str(ws / "k.cu"))
    assert result.exit_code == 2
    assert "kernellsp.toml: setting 'build_timeout_s'" in result.stderr


def test_profile_save_report_destination_checked_first(tmp_path: Path, in_repo: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    result = invoke("profile", "samples/vector_add.cu", "--save-report", str(blocker / "reports"))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: --save-report {blocker / 'reports'}: ")


def test_profile_unknown_kernel_is_named_not_replaced_by_the_program(tmp_path: Path) -> None:
    from kernellsp.profile.ncu import ProfileError, ProfileOptions, profile_file
    from kernellsp.run.runner import LocalRunner

    path = REPO / "samples" / "vector_add.cu"
    with pytest.raises(ProfileError) as ei:  # raised before any runner work: no GPU needed
        profile_file(
            path,
            path.read_text() + "\nint main() { return 0; }\n",
            LocalRunner(),
            ProfileOptions(kernels=["vector_ad"], use_cache=False),
        )
    assert ei.value.kind == "no_spec"
    assert (
        str(ei.value)
        == "vector_add.cu: vector_ad: no valid launch spec for that entry (entries with one: vector_add)"
    )


def test_symlink_loops_and_broken_links_are_noted_and_the_rest_checked(tmp_path: Path) -> None:
    shutil.copy(REPO / "samples" / "vector_add.cu", tmp_path / "good.cu")
    (tmp_path / "b.cu").symlink_to("c.cu")
    (tmp_path / "c.cu").symlink_to("b.cu")
    (tmp_path / "d.cu").symlink_to("missing.cu")
    result = invoke("check", "--no-build", "--format", "json", str(tmp_path))
    assert result.exit_code in (0, 1), result.stderr
    assert {Path(f["path"]).name for f in json.loads(result.stdout)["findings"]} == {"good.cu"}
    assert "b.cu: skipped: symlink loop (b.cu -> c.cu -> b.cu)" in result.stderr
    assert "d.cu: skipped: broken symlink (d.cu -> missing.cu does not exist)" in result.stderr
    assert "internal error" not in result.stderr


def test_a_named_non_cuda_file_is_refused_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "plain.cpp").write_text("int main() { return 0; }\n")
    result = invoke("check", str(tmp_path / "plain.cpp"))
    assert result.exit_code == 2
    assert "plain.cpp: skipped: not a CUDA file" in result.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads folders whatever their mode")
def test_an_unreadable_folder_is_noted(tmp_path: Path) -> None:
    shutil.copy(REPO / "samples" / "vector_add.cu", tmp_path / "good.cu")
    locked = tmp_path / "locked"
    locked.mkdir()
    shutil.copy(REPO / "samples" / "vector_add.cu", locked / "x.cu")
    locked.chmod(0)
    try:
        result = invoke("check", "--no-build", str(tmp_path))
    finally:
        locked.chmod(0o755)
    assert "locked: folder skipped: Permission denied" in result.stderr


def test_a_bad_sandbox_setting_is_refused_by_every_command_but_doctor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KERNELLSP_SANDBOX", "banana")
    for args in (("check", "--no-build", "samples/vector_add.cu"), ("rules",), ("history",)):
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "KERNELLSP_SANDBOX='banana': expected one of auto, require, off" in result.output, args
    doctor = invoke("doctor")
    assert "[MISS] sandbox" in doctor.stdout and "Traceback" not in doctor.output
    monkeypatch.setenv("KERNELLSP_SANDBOX", "off")
    assert invoke("rules").exit_code == 0


def test_json_mode_errors_are_json_on_stdout(tmp_path: Path) -> None:
    no_spec = tmp_path / "k.cu"
    no_spec.write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    for args in (
        ("optimize", str(no_spec), "--format", "json"),
        ("verify", str(no_spec), "--candidate", str(no_spec), "--format", "json"),
        ("check", str(tmp_path / "missing.cu"), "--format", "json"),
    ):
        result = invoke(*args)
        assert result.exit_code == 2, args
        err = json.loads(result.stdout)["error"]
        assert err["exit_code"] == 2 and err["message"], args
    # Text mode keeps stdout for results: the error goes to stderr only.
    text = invoke("optimize", str(no_spec))
    assert text.exit_code == 2 and "{" not in text.stdout


def test_spec_draft_prints_writes_with_a_backup_and_reverts(tmp_path: Path) -> None:
    """Issue 31 item 5.10: the CLI drafts a launch spec as the editor's "Add launch spec" does."""

    f = tmp_path / "va.cu"
    original = re.sub(
        r"/\* kernellsp.*?\*/\n", "", (REPO / "samples" / "vector_add.cu").read_text(), flags=re.S
    )
    f.write_text(original)
    shown = invoke("spec", "draft", str(f))
    assert shown.exit_code == 0, shown.output
    assert (
        f"{f}:4: above vector_add" in shown.output
        and 'c = { dtype = "f32", dir = "out", count = "N" }' in shown.output
    )
    assert f.read_text() == original  # printing changes nothing
    written = invoke("spec", "draft", str(f), "--write")
    assert written.exit_code == 0 and "backup" in written.output, written.output
    checked = invoke("check", str(f), "--format", "json")
    assert "KL004" not in checked.output  # the inserted spec is valid: no "missing launch spec"
    assert invoke("spec", "draft", str(f)).output.strip() == f"{f}: every kernel has a launch spec"
    assert invoke("revert", str(f)).exit_code == 0 and f.read_text() == original
    bad = invoke("spec", "draft", str(f), "--kernel", "nope")
    assert bad.exit_code == 2 and "no kernel named nope (kernels: vector_add)" in bad.output
    # A latin-1 file with CRLF line ends keeps its encoding and line ends; only the block is added.
    raw = (
        original.replace("\n", "\r\n")
        .replace("// vector_add.cu", "// vector_add.cu (\u00e9t\u00e9)")
        .encode("latin-1")
    )
    f.write_bytes(raw)
    assert invoke("spec", "draft", str(f), "--write").exit_code == 0
    after = f.read_bytes()
    assert after.startswith(raw.split(b"\r\n__global__")[0]) and b"\r\nsizes = { N = " in after
    assert b"\xc3" not in after  # not re-encoded as UTF-8
    assert invoke("revert", str(f)).exit_code == 0 and f.read_bytes() == raw
