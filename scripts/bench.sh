#!/usr/bin/env bash
# Benchmarks against a private containerd (one run, same containerd):
#   binary        the release binary's size and shared libraries;
#   cri_sequence  min/median/max of each raw CRI step for a one-container pod,
#                 then 50 pods at widths 1-16 and the best width;
#   agent_start   crilet vs the raw sequence (one pod; 50 pods, against the
#                 raw sequence at cri_sequence's best width, 5 alternating
#                 runs), and crilet's RSS and CPU while holding 50 pods idle;
#   footprint     (per runtime, below) spawn -> first CRI call (20 runs);
#                 RSS and VmHWM through the start of 100 pods and idle, idle
#                 CPU; `crilet pods` wall time (20 runs) (CRILET_BENCH_PODS,
#                 CRILET_BENCH_IDLE_SECS);
#   mirror_start  manifest written -> mirror pod Running on the API double;
#   stats_api     GetPodStats p50/p99 and req/s (4 clients, unix socket) and
#                 /stats/summary latency with 100 pods sampled, beside one
#                 ListPodSandboxStats call for the same pods.
#   gc_select     image GC detection + selection, 10 000 images, 1 000 containers.
#   logs          container log reads of a 10 MiB CRI log: tail, full read, follow lag and CPU.
#   probes        crilet's CPU and RSS (and containerd's, its shims', the pods')
#                 with 100 pods without probes, then 100 pods each probed by
#                 httpGet every 1 s and exec every 10 s (CRILET_BENCH_PODS,
#                 CRILET_BENCH_WINDOW_SECS).
#   events        container exit -> restart created/started with container
#                 events and with relist (--feature-gates EventedPLEG=false),
#                 20 pods each; crilet's idle CPU with 100 pods in both modes
#                 (CRILET_BENCH_EVENT_PODS, CRILET_BENCH_PODS,
#                 CRILET_BENCH_WINDOW_SECS, default 120). On containerd 1.6,
#                 which has no events, both modes relist.
# Then, per runtime (containerd 1.6 again, containerd 2.1 and CRI-O 1.32 by
# scripts/runtime.sh): the width sweep (unless done above), agent_start at
# that width, footprint, stats_api and events, and one table of the three
# runtimes' figures (CRILET_BENCH_RUNTIMES_ONLY=1 runs only this part).
# CRILET_BENCH_ONLY="cri_sequence agent_start footprint" runs only the named
# benches (the binary line always prints), e.g. issue 16's figures alone;
# CRILET_BENCH_KINDS="crio" only those runtimes in the per-runtime part.
# Usage: scripts/bench.sh [ITERATIONS]   (default 20 for cri_sequence, 10 for agent_start)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
need_toolchain

STATE=${CRILET_BENCH_DIR:-/tmp/crilet-bench}
export CTRLAB_BRIDGE=criletbench0 CTRLAB_POD_CIDR=10.90.0.0/16 CTRLAB_CGROUP_ROOT=crilet-bench
LAB_UP=()
cleanup() {
  local rc=$?
  bash "$ROOT/scripts/containerd-down.sh" "$STATE" --purge || true
  local entry
  for entry in "${LAB_UP[@]}"; do
    bash "$ROOT/scripts/runtime.sh" down "${entry%% *}" "${entry#* }" --purge >/dev/null 2>&1 || true
  done
  exit $rc
}
trap cleanup EXIT
want() { # BENCH -> whether CRILET_BENCH_ONLY (empty: all) names it
  [ -z "${CRILET_BENCH_ONLY:-}" ] || [[ " ${CRILET_BENCH_ONLY//,/ } " == *" $1 "* ]]
}
bench() { # BENCH -> cargo bench of it, when wanted
  if want "$1"; then cargo bench --quiet --bench "$1"; fi
}
SOCK=$(bash "$ROOT/scripts/containerd-up.sh" "$STATE")
cargo build --release --quiet
export CRILET_BENCH_ENDPOINT="unix://$SOCK" CRILET_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/crilet"
# The shipped binary (the release profile in Cargo.toml): its size against
# the goal of issue 16 (15 MiB) and the shared libraries it needs.
echo "== binary: $(stat -c %s "$CRILET_BIN") bytes ($(awk "BEGIN{printf \"%.1f\", $(stat -c %s "$CRILET_BIN")/1048576}") MiB; goal <= 15 MiB), needs: $(ldd "$CRILET_BIN" | awk '{print $1}' | tr '\n' ' ')"
OUT=$(mktemp -d /tmp/crilet-bench-out.XXXX)
if [ -z "${CRILET_BENCH_RUNTIMES_ONLY:-}" ]; then
  SEQ_OUT=$OUT/containerd1.cri_sequence
  CRILET_BENCH_ITERATIONS="${1:-20}" bench cri_sequence | tee "$SEQ_OUT"
  # agent_start compares crilet with the raw sequence at its best width.
  export CRILET_BENCH_WIDTH
  CRILET_BENCH_WIDTH=$(awk '/^best width/{print $3}' "$SEQ_OUT")
  CRILET_BENCH_WIDTH=${CRILET_BENCH_WIDTH:-4}
  echo "== the raw sequence's width for agent_start: $CRILET_BENCH_WIDTH"
  CRILET_BENCH_ITERATIONS="${1:-10}" bench agent_start
  bench mirror_start
  bench stats_api
  bench gc_select
  bench logs
  bench probes
fi

# agent_start, footprint, stats_api and events on each runtime, then one table of them.
per_runtime() { # KIND SOCKET
  local b width=${CRILET_BENCH_WIDTH:-}
  # agent_start's 50 pods race the raw sequence at its best width on this
  # runtime: sweep it here unless the first part did so on this one.
  if [ "$1" != containerd1 ] || [ -z "$width" ]; then
    CRILET_BENCH_ENDPOINT="unix://$2" CRILET_BENCH_ITERATIONS="${ITER:-10}" bench cri_sequence | tee "$OUT/$1.cri_sequence"
    width=$(awk '/^best width/{print $3}' "$OUT/$1.cri_sequence")
    width=${width:-${CRILET_BENCH_WIDTH:-4}}
  fi
  for b in agent_start footprint stats_api events; do
    CRILET_BENCH_WIDTH=$width \
    CRILET_BENCH_ENDPOINT="unix://$2" CRILET_BENCH_ITERATIONS="${ITER:-10}" bench $b | tee "$OUT/$1.$b"
  done
}
ITER=${1:-10}
# CRILET_BENCH_KINDS="containerd1 containerd2 crio" (the default) picks the runtimes.
kind_wanted() { [[ " ${CRILET_BENCH_KINDS:-containerd1 containerd2 crio} " == *" $1 "* ]]; }
if kind_wanted containerd1; then per_runtime containerd1 "$SOCK"; fi
for kind in containerd2 crio; do
  kind_wanted "$kind" || continue
  dir=/tmp/crilet-bench-$kind
  LAB_UP+=("$kind $dir")
  sock=$(CTRLAB_BRIDGE=criletbench${#LAB_UP[@]} CTRLAB_POD_CIDR=10.$((120 + ${#LAB_UP[@]})).0.0/16 \
    CTRLAB_CGROUP_ROOT=crilet-bench bash "$ROOT/scripts/runtime.sh" up "$kind" "$dir")
  per_runtime "$kind" "$sock"
  bash "$ROOT/scripts/runtime.sh" down "$kind" "$dir" --purge >/dev/null 2>&1 || true
done
pick() { # FILE PATTERN -> the first matching line, squeezed
  grep -m1 -- "$2" "$1" 2>/dev/null | tr -s ' ' | sed 's/^ //' || true
}
echo
echo "== agent_start, stats_api and events per runtime (one run, same machine) =="
for kind in containerd1 containerd2 crio; do
  kind_wanted "$kind" || continue
  echo "-- $kind"
  echo "   cri_sequence $(pick "$OUT/$kind.cri_sequence" 'best width')"
  echo "   agent_start  one pod: $(pick "$OUT/$kind.agent_start" 'ratio of medians')"
  echo "   agent_start  50 pods idle: $(pick "$OUT/$kind.agent_start" 'CPU  ')"
  echo "   agent_start  50 pods: $(pick "$OUT/$kind.agent_start" 'ratio of medians   [0-9.]*  (goal')"
  echo "   footprint    $(pick "$OUT/$kind.footprint" 'first CRI call  ')"
  echo "   footprint    $(pick "$OUT/$kind.footprint" 'start-up  ')"
  echo "   footprint    $(pick "$OUT/$kind.footprint" 'RSS idle  ')"
  echo "   footprint    $(pick "$OUT/$kind.footprint" 'idle CPU')"
  echo "   footprint    crilet pods $(pick "$OUT/$kind.footprint" 'wall  ')"
  echo "   stats_api    $(pick "$OUT/$kind.stats_api" 'GetPodStats')"
  echo "   stats_api    $(pick "$OUT/$kind.stats_api" '/stats/summary')"
  awk '/^ *(events|relist) *\(/{m=$1} /exit -> restart started/{sub(/^ */,""); print "   events       " m ": " $0}' "$OUT/$kind.events"
  grep -E '^ *(events|relist) +crilet CPU' "$OUT/$kind.events" | sed 's/^ */   idle 100 pods /'
done
