"""Benchmark: the ssh runner against the local runner on the same GPU (ssh to 127.0.0.1).

Run on a GPU host from the repository root (OpenSSH there, or a bundle from ``tests/ssh_bundle.sh``)::

    KERNELLSP_TEST_SSH_BUNDLE=$PWD/.sshbundle PYTHONPATH=.:tests python tests/bench/bench_ssh.py --write

It starts a throw-away sshd on 127.0.0.1 (``tests/helpers/sshd.py``), then per sample profiles the file with
the fast set through :class:`~kernellsp.run.runner.LocalRunner` and through
:class:`~kernellsp.run.ssh.SshRunner` (cold cache both times: nvcc build, ncu, report fetched back),
and prints the wall time of each and whether both found the same findings (code and line). Last, the
committed evidence bundle ``tests/fixtures/bundles/softmax_row-tuner`` is replayed through each
runner (correctness on fresh inputs, sanitizer, paired timing). Writes
``tests/bench/results/ssh-<gpu>.md`` and ``.json`` with ``--write``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from helpers import sshd  # noqa: E402  (tests/helpers/sshd.py)
from helpers.gpuinfo import gpu_slug  # noqa: E402  (tests/helpers/gpuinfo.py)

from kernellsp.optimize.loop import replay  # noqa: E402
from kernellsp.optimize.verify.gate import VerifyOptions  # noqa: E402
from kernellsp.profile.environment import runner_environment  # noqa: E402
from kernellsp.profile.ncu import ProfileOptions, profile_file  # noqa: E402
from kernellsp.run.runner import LocalRunner, Runner  # noqa: E402
from kernellsp.run.ssh import SshRunner  # noqa: E402

DEFAULT_SAMPLES = [
    "vector_add.cu",
    "transpose_naive.cu",
    "reduce_atomic.cu",
    "sgemm_naive.cu",
    "relu_launcher.cu",
]
BUNDLE = ROOT / "tests" / "fixtures" / "bundles" / "softmax_row-tuner"


def profile_once(runner: Runner, env: dict[str, Any], name: str) -> dict[str, Any]:
    path = ROOT / "samples" / name
    t0 = time.monotonic()
    out = profile_file(path, path.read_text(), runner, ProfileOptions(use_cache=False), environment=env)
    wall = time.monotonic() - t0
    return {
        "wall_s": wall,
        "findings": sorted(f"{f.code} L{f.range.start_line + 1}" for f in out.findings if f.code != "KL590"),
        "duration_us": [(k.duration_ns or 0) / 1000 for k in out.kernels],
    }


def cli_over_ssh(server: sshd.SshServer, name: str) -> dict[str, Any]:
    """``kernellsp profile --gpu-host TARGET`` as a user runs it: the ``ssh`` on PATH is a wrapper adding the
    test key and options (what a user's ~/.ssh/config does)."""
    wrap = server.client_wrapper(Path(tempfile.mkdtemp(prefix="kernellsp-bench-sshwrap-"))).parent
    env = {
        **os.environ,
        "PATH": f"{wrap}:{os.environ.get('PATH', '')}",
        "KERNELLSP_CACHE_DIR": tempfile.mkdtemp(prefix="kernellsp-bench-cache-"),
    }
    path = ROOT / "samples" / name
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernellsp",
            "profile",
            str(path),
            "--gpu-host",
            server.target,
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    wall = time.monotonic() - t0
    findings: list[str] = []
    if proc.returncode in (0, 1) and proc.stdout.strip().startswith("{"):
        data = json.loads(proc.stdout)
        findings = sorted(
            f"{f['code']} L{f['range']['start_line'] + 1}" for f in data["findings"] if f["code"] != "KL590"
        )
    return {
        "sample": name,
        "target": server.target,
        "exit": proc.returncode,
        "wall_s": wall,
        "findings": findings,
        "stderr_tail": proc.stderr.strip()[-400:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true")
    ap.add_argument(
        "--no-replay", action="store_true", help="skip the bundle replay (about a minute per runner)"
    )
    ap.add_argument("samples", nargs="*")
    args = ap.parse_args()
    # Cold builds on both sides: a fresh local cache (profiles and harness binaries), and the remote binary
    # cache emptied below (the GPU tests may have filled it just before).
    os.environ["KERNELLSP_CACHE_DIR"] = tempfile.mkdtemp(prefix="kernellsp-bench-cache-")
    server = sshd.start_sshd(Path(tempfile.mkdtemp(prefix="kernellsp-bench-sshd-")))
    try:
        local = LocalRunner()
        remote = SshRunner(server.target, ssh=server.ssh, extra_options=server.options)
        t0 = time.monotonic()
        renv = runner_environment(remote)
        first_connect = time.monotonic() - t0
        wd = remote.new_workdir()
        remote.run(["rm", "-rf", f"{remote.root()}/bin"], wd, 60)
        remote.cleanup(wd)
        lenv = runner_environment(local)
        rows = []
        for name in args.samples or DEFAULT_SAMPLES:
            a = profile_once(local, lenv, name)
            b = profile_once(remote, renv, name)
            rows.append(
                {"sample": name, "local": a, "ssh": b, "same_findings": a["findings"] == b["findings"]}
            )
            print(
                f"{name}: local {a['wall_s']:.1f} s, ssh {b['wall_s']:.1f} s, same findings: "
                f"{a['findings'] == b['findings']}",
                flush=True,
            )
        cli = cli_over_ssh(server, args.samples[0] if args.samples else "transpose_naive.cu")
        print(f"CLI --gpu-host: exit {cli['exit']}, {cli['wall_s']:.1f} s, {cli['findings']}", flush=True)
        replays: dict[str, Any] = {}
        if not args.no_replay:
            for label, runner in (("local", local), ("ssh", remote)):
                t1 = time.monotonic()
                v, _ = replay(BUNDLE, runner, VerifyOptions(seeds=2, rounds=4, reps=10))
                stats = v.stats or {}
                replays[label] = {
                    "verdict": v.kind,
                    "speedup": v.speedup,
                    "wall_s": time.monotonic() - t1,
                    "ci": [stats.get("ci_low"), stats.get("ci_high")],
                }
                print(f"replay via {label}: {v.kind} {v.speedup}", flush=True)
        remote.close()
    finally:
        sshd.stop_sshd(server)
    gpu = str(lenv.get("gpu", "?"))
    slug = gpu_slug(gpu)
    local_cli = next((r["local"]["findings"] for r in rows if r["sample"] == cli["sample"]), None)
    cli["same_findings_as_local"] = local_cli == cli["findings"] if local_cli is not None else None
    text = render(rows, replays, lenv, renv, first_connect, server.ssh, cli)
    print(text)
    if args.write:
        out = ROOT / "tests" / "bench" / "results"
        (out / f"ssh-{slug}.md").write_text(text)
        data = {
            "environment_local": lenv,
            "environment_ssh": renv,
            "first_connect_s": first_connect,
            "rows": rows,
            "cli": cli,
            "replay": replays,
        }
        (out / f"ssh-{slug}.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    ok = all(r["same_findings"] for r in rows) and all(r["verdict"] == "accepted" for r in replays.values())
    ok = ok and cli["exit"] in (0, 1) and cli["same_findings_as_local"] is not False
    return 0 if ok else 1


def render(
    rows: list[dict[str, Any]],
    replays: dict[str, Any],
    lenv: dict[str, Any],
    renv: dict[str, Any],
    first_connect: float,
    ssh: str,
    cli: dict[str, Any],
) -> str:
    lines = [
        f"# The ssh runner against the local runner ({lenv.get('gpu', '?')})",
        "",
        f"One GPU host reaching itself: sshd on 127.0.0.1 (tests/helpers/sshd.py), client `{Path(ssh).name}` with connection "
        f"sharing (ControlMaster); host {platform.node()}, driver {lenv.get('driver', '?')}, ncu "
        f"{lenv.get('ncu_version', '?')}, nvcc {lenv.get('nvcc_version', '?')}. The ssh side saw GPU "
        f"{renv.get('gpu', '?')}, driver {renv.get('driver', '?')}. First connection and environment probe over ssh: "
        f"{first_connect:.2f} s.",
        "",
        "`kernellsp profile` (fast set, cold cache: harness build with nvcc, ncu, report read back) per runner; "
        "findings compared by code and line (KL590, ncu's own rules, left out). Per sample the local run goes first; "
        "each runner builds the harness cold (the local build cache and the remote one are separate), so a "
        "difference of a second or two either way is nvcc/ncu start-up noise, not ssh.",
        "",
        "| sample | local wall (s) | ssh wall (s) | ssh overhead (s) | kernel duration local / ssh (us) | same findings | findings |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        a, b = r["local"], r["ssh"]
        dur = " / ".join(f"{x:.1f}" for x in (a["duration_us"][:1] + b["duration_us"][:1]))
        lines.append(
            f"| {r['sample']} | {a['wall_s']:.1f} | {b['wall_s']:.1f} | {b['wall_s'] - a['wall_s']:+.1f} | {dur} | "
            f"{'yes' if r['same_findings'] else 'NO'} | {', '.join(b['findings'])} |"
        )
    same = {
        True: "the same findings as the local runner",
        False: "DIFFERENT findings from the local runner",
        None: "(no local run to compare)",
    }[cli["same_findings_as_local"]]
    lines += [
        "",
        f"CLI as a user runs it: `kernellsp profile samples/{cli['sample']} --gpu-host {cli['target']} --format json` "
        f"exited {cli['exit']} in {cli['wall_s']:.1f} s with {same}: {', '.join(cli['findings']) or '-'} (its harness "
        "binary came from the remote build cache: the ssh runner profiled the same file just before).",
    ]
    if replays:
        lines += [
            "",
            "Replay of `tests/fixtures/bundles/softmax_row-tuner` (original vs champion: correctness on fresh "
            "inputs, compute-sanitizer, paired timing):",
            "",
            "| runner | verdict | speedup | 95% CI | wall (s) |",
            "|---|---|---:|---|---:|",
        ]
        for label, v in replays.items():
            ci = v.get("ci")
            ci_s = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci and None not in ci else "-"
            sp = f"{v['speedup']:.3f}x" if v.get("speedup") else "-"
            lines.append(f"| {label} | {v['verdict']} | {sp} | {ci_s} | {v['wall_s']:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
