#!/usr/bin/env bash
# Benchmarks against a private containerd (one run, same containerd):
#   cri_sequence  min/median/max of each raw CRI step for a one-container pod;
#   agent_start   crilet vs the raw sequence (one pod; 50 pods), and crilet's
#                 RSS and CPU while holding 50 pods idle;
#   mirror_start  manifest written -> mirror pod Running on the API double;
#   stats_api     GetPodStats p50/p99 and req/s (4 clients, unix socket) and
#                 /stats/summary latency with 100 pods sampled, beside one
#                 ListPodSandboxStats call for the same pods.
#   gc_select     image GC detection + selection, 10 000 images, 1 000 containers.
#   probes        crilet's CPU and RSS (and containerd's, its shims', the pods')
#                 with 100 pods without probes, then 100 pods each probed by
#                 httpGet every 1 s and exec every 10 s (CRILET_BENCH_PODS,
#                 CRILET_BENCH_WINDOW_SECS).
#   events        container exit -> restart created/started with container
#                 events and with relist (--feature-gates EventedPLEG=false),
#                 20 pods each; crilet's idle CPU with 100 pods in both modes
#                 (CRILET_BENCH_EVENT_PODS, CRILET_BENCH_PODS,
#                 CRILET_BENCH_WINDOW_SECS, default 120). On containerd 1.6,
#                 which has no events, both modes relist; point
#                 CRILET_BENCH_ENDPOINT at containerd 2 or CRI-O to compare.
# Usage: scripts/bench.sh [ITERATIONS]   (default 20 for cri_sequence, 10 for agent_start)
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
cargo build --release --quiet
export CRILET_BENCH_ENDPOINT="unix://$SOCK" CRILET_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/crilet"
CRILET_BENCH_ITERATIONS="${1:-20}" cargo bench --quiet --bench cri_sequence
CRILET_BENCH_ITERATIONS="${1:-10}" cargo bench --quiet --bench agent_start
cargo bench --quiet --bench mirror_start
cargo bench --quiet --bench stats_api
cargo bench --quiet --bench gc_select
cargo bench --quiet --bench probes
cargo bench --quiet --bench events
