#!/usr/bin/env bash
# The whole GPU suite, on any host with an NVIDIA GPU, nvcc, ncu and compute-sanitizer:
#   tests/bench/run_gpu_suite.sh [--quick]
# 1. pytest -m gpu (harness, profiling, verification gate, A/A study, adversarial corpus, LSP on GPU);
# 2. the benchmark scripts that regenerate the committed tables in tests/bench/results/.
# Uses .venv/bin/python when present, else python3 (with kernellsp importable, e.g. PYTHONPATH=.).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONUNBUFFERED=1
status=0
"$PY" -m pytest -m gpu -q -p no:cacheprovider || status=1
"$PY" tests/bench/bench_profile.py --write --fixtures || status=1
"$PY" tests/bench/bench_lsp.py --write || status=1
if [ "${1:-}" != "--quick" ]; then
  "$PY" tests/bench/bench_optimize.py --write || status=1
fi
exit $status
