#!/usr/bin/env bash
# Record the probe report tests/fixtures/ncu/fast-<gpu>.ncu-rep on a GPU host (NVIDIA GPU, nvcc, ncu):
#   tests/bench/record_probe.sh [OUT_DIR]     # default tests/fixtures/ncu
# The same program and command as ../shared/reference/h100-probe/README.md's fast.ncu-rep:
# tests/fixtures/ncu/kinds.cu (six probe kernels, one launch each) built in /src/probe when that is
# writable (the path the reference reports record), else in a temp dir; the report records it.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$repo/tests/fixtures/ncu}
gpu=$(PYTHONPATH="$repo/tests" python3 -c 'from helpers.gpuinfo import local_gpu_name; print(local_gpu_name())')
[ -n "$gpu" ] || { echo "record_probe.sh: no NVIDIA GPU here (nvidia-smi gave no name)" >&2; exit 2; }
slug=$(PYTHONPATH="$repo/tests" python3 -c 'import sys; from helpers.gpuinfo import gpu_slug; print(gpu_slug(sys.argv[1]))' "$gpu")
dir=/src/probe
mkdir -p "$dir" 2>/dev/null && [ -w "$dir" ] || dir=$(mktemp -d)
cp "$repo/tests/fixtures/ncu/kinds.cu" "$dir/"
cd "$dir"
nvcc -O3 -arch=sm_90 -lineinfo -o kinds kinds.cu -lcublas
t0=$(date +%s.%N)
ncu --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section SourceCounters \
    --import-source yes -o "fast-$slug" -f ./kinds
t1=$(date +%s.%N)
mkdir -p "$out"
cp "fast-$slug.ncu-rep" "$out/"
echo "$gpu: $out/fast-$slug.ncu-rep, ncu ran $(python3 -c "print(round($t1 - $t0, 1))") s (${dir}/kinds)"
