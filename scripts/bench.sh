#!/usr/bin/env bash
# Benchmarks against a private containerd: prints min/median/max per CRI step.
# Usage: scripts/bench.sh [ITERATIONS]   (default 20)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
need_toolchain

STATE=${CRILET_BENCH_DIR:-/tmp/crilet-bench}
export CTRLAB_BRIDGE=criletbench0 CTRLAB_POD_CIDR=10.90.0.0/16 CTRLAB_CGROUP_ROOT=crilet-bench
cleanup() {
  local rc=$?
  bash "$ROOT/scripts/containerd-down.sh" "$STATE" --purge || true
  exit $rc
}
trap cleanup EXIT
SOCK=$(bash "$ROOT/scripts/containerd-up.sh" "$STATE")
CRILET_BENCH_ENDPOINT="unix://$SOCK" CRILET_BENCH_ITERATIONS="${1:-20}" \
  cargo bench --bench cri_sequence
