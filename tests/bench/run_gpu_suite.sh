#!/usr/bin/env bash
# The whole GPU suite, on any host with an NVIDIA GPU, nvcc, ncu and compute-sanitizer:
#   tests/bench/run_gpu_suite.sh [--quick]
# 1. pytest -m gpu (harness, profiling, verification gate, A/A study, adversarial corpus, LSP on GPU);
# 2. the benchmark scripts that regenerate the committed tables in tests/bench/results/ and the real
#    reports under tests/fixtures/ncu/ (the probe program and every sample, per GPU model).
# The ssh parts (tests/test_runner_ssh*.py, bench_ssh.py) start an sshd on 127.0.0.1: Debian's
# openssh-server, or on a host without OpenSSH a bundle made by tests/ssh_bundle.sh on a Debian machine,
# named by KERNELLSP_TEST_SSH_BUNDLE=/abs/path.
# Uses .venv/bin/python when present, else python3 (with kernellsp importable, e.g. PYTHONPATH=.).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONUNBUFFERED=1
status=0
"$PY" -m pytest -m gpu -q -p no:cacheprovider || status=1
tests/bench/record_probe.sh || status=1
"$PY" tests/bench/bench_profile.py --write --fixtures || status=1
if [ -x /usr/sbin/sshd ] || [ -n "${KERNELLSP_TEST_SSH_BUNDLE:-}" ]; then
  "$PY" tests/bench/bench_ssh.py --write || status=1
else
  echo "bench_ssh.py skipped: no /usr/sbin/sshd and no KERNELLSP_TEST_SSH_BUNDLE (see tests/ssh_bundle.sh)" >&2
fi
"$PY" tests/bench/bench_lsp.py --write || status=1
"$PY" tests/bench/bench_verify.py --write || status=1
# The pool runner on this host's GPUs (needs the cluster extra: pip install 'kernellsp[cluster]').
if "$PY" -c "import distributed" 2>/dev/null; then
  "$PY" tests/bench/bench_pool.py --write || status=1
else
  echo "bench_pool.py skipped: Dask is not installed (pip install 'kernellsp[cluster]')" >&2
fi
"$PY" tests/bench/bench_ncu_sections.py --write || status=1
if [ "${1:-}" != "--quick" ]; then
  "$PY" tests/bench/bench_optimize.py --write || status=1
fi
exit $status
