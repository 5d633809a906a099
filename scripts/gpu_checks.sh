#!/usr/bin/env bash
# Every GPU check of a release, in one go, on a machine with an NVIDIA GPU and its own
# Python (no set-up): the gpu-marked tests, the library timing check, every lab at its
# default size and the ladder at 1000. A summary and one tarball (logs + results/) go to $1.
set -uo pipefail
out=${1:?usage: scripts/gpu_checks.sh OUTPUT_DIR}
logs=$(mktemp -d)
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$logs/gpu.txt"
step() { local name=$1; shift; echo "=== $name"; ( time "$@" ) > "$logs/$name.log" 2>&1; echo "rc=$? $name" | tee -a "$out/summary.txt"; tail -n 25 "$logs/$name.log"; }
step test-gpu make test-gpu PYTHON="$py"
step bench-library "$py" -m kernelcourse bench-library --size 4096
for lab in ${LABS:-01 02 03 04 05}; do
  step "lab$lab" "$py" -m kernelcourse run-lab "$lab"
done
step lab04-1000 "$py" -m kernelcourse run-lab 04 --size 1000
cp -r results "$logs/" 2>/dev/null
tar czf "$out/gpu-run.tar.gz" -C "$logs" .
cat "$out/summary.txt"
