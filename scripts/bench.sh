#!/usr/bin/env bash
# Benchmarks against a private containerd (one run, same containerd):
#   binary        the release binary's size and shared libraries;
#   cri_sequence  min/median/max of each raw CRI step for a one-container pod,
#                 then 50 pods at widths 1-16 and the best width;
#   agent_start   crilet vs the raw sequence (one pod, the two alternating
#                 with crilet running; 50 pods, against the raw sequence at
#                 cri_sequence's best width, 5 alternating runs), where each
#                 start's time goes (crilet's start-up traces: each step's
#                 runtime, queue and own time), and crilet's RSS and CPU
#                 while holding 50 pods idle;
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
#   api_requests  the API requests of an idle crilet with 5 static pods
#                 (issue 17), per second, in total and per verb and
#                 resource, against the kubelet's ~0.11/s: on a real
#                 kube-apiserver of its own (scripts/apiserver-env.sh with
#                 /tmp/crilet-bench-apiserver, ports 26443 and 22379, never
#                 the tests' 16443), as node crilet-node-1 with that node's
#                 own credentials. After a warm-up (the 5 mirror pods
#                 Running and at least CRILET_BENCH_API_WARMUP s, default
#                 60, since crilet started, so start-up writes are past) it
#                 scrapes /metrics at the start and the end of a window of
#                 CRILET_BENCH_API_WINDOW s (default 300). What it counts
#                 (scripts/api_requests.py says it in full): the rows of
#                 apiserver_request_total with system_client="" (not the
#                 server's requests to itself, such as its own identity
#                 Lease in kube-system) that name a resource (not the
#                 bench's own /metrics scrapes, and nothing else talks to
#                 this server); a WATCH counts when it starts: the watches
#                 that ended in the window (that counter counts a watch at
#                 its end) plus the change in the open ones
#                 (apiserver_longrunning_requests). Cross-checked against
#                 priority and fairness' count of requests dispatched for
#                 node identities (flow schemas system-node-high and
#                 system-nodes), which counts by who sent a request.
#   kubelet_vs_crilet  the real kubelet v1.32.13 and crilet side by side,
#                 one at a time on one containerd 1.6 (the parity harness's
#                 instance, scripts/parity-env.sh) with an API server of
#                 their own (/tmp/crilet-bench-parity-apiserver, ports 26445
#                 and 22383): 1 and 50 pods started and removed, RSS and
#                 idle CPU holding 50, RSS and CPU holding 100 pods with two
#                 exec probes each, an idle node's API requests/s; each
#                 figure for both and the ratio, and the raw CRI floor (one
#                 pod, 50 pods) with no agent (benches/kubelet_vs_crilet.rs).
#                 crilet is the release binary (CRILET_BIN).
#   soak_long     scripts/soak.sh --long on containerd 1.6, containerd 2.1
#                 and CRI-O 1.32 in turn: 100 probed pods with churn, one
#                 release crilet never killed, CRILET_BENCH_SOAK_MINUTES (30)
#                 each; its growth of RSS, descriptors and tasks.
#   fleet         scripts/fleet.sh: `crilet hollow` with CRILET_BENCH_FLEET
#                 ("500 10": nodes and pods per node) on a kube-apiserver,
#                 etcd and kube-controller-manager of its own (ports 26447
#                 and 22391): time to all Ready and Running, steady API
#                 requests per node, the API server's CPU and p99, memory
#                 per node, and the API server killed and back after 60 s.
#   parity        the differential harness (parity/) on containerd 1.6,
#                 containerd 2.1 and CRI-O 1.32, each on its own instance,
#                 against that API server; one summary line per runtime.
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
LAB_UP=() PARITY_KINDS=()
# api_requests' own API server and its crilet (the crilet's pid is in a
# file: the bench runs in a pipeline's subshell).
API_ENV=(CRILET_KUBE_TEST_DIR="${CRILET_BENCH_API_DIR:-/tmp/crilet-bench-apiserver}"
         CRILET_KUBE_TEST_PORT="${CRILET_BENCH_API_PORT:-26443}"
         CRILET_KUBE_TEST_ETCD_PORT="${CRILET_BENCH_API_ETCD_PORT:-22379}")
# kubelet_vs_crilet's and parity's API server.
PARITY_API_ENV=(CRILET_KUBE_TEST_DIR=/tmp/crilet-bench-parity-apiserver
                CRILET_KUBE_TEST_PORT=26445 CRILET_KUBE_TEST_ETCD_PORT=22383)
API_CRILET_PID_FILE=""
cleanup() {
  local rc=$?
  if [ -n "$API_CRILET_PID_FILE" ] && [ -s "$API_CRILET_PID_FILE" ]; then
    kill -TERM "$(cat "$API_CRILET_PID_FILE")" 2>/dev/null || true
    sleep 2
  fi
  if want api_requests; then
    env "${API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" down >/dev/null 2>&1 || true
  fi
  bash "$ROOT/scripts/containerd-down.sh" "$STATE" --purge || true
  for entry in "${PARITY_KINDS[@]}"; do
    bash "$ROOT/scripts/parity-env.sh" down "$entry" >/dev/null 2>&1 || true
  done
  if want kubelet_vs_crilet || want parity; then
    env "${PARITY_API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" down >/dev/null 2>&1 || true
  fi
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
mount_lingering_cgroups
SOCK=$(bash "$ROOT/scripts/containerd-up.sh" "$STATE")
cargo build --release --quiet
OUT=$(mktemp -d /tmp/crilet-bench-out.XXXX)
# A copy, measured: `cargo bench` below builds target/release/crilet again
# under the bench profile. Measured like that (2026-12-07), the binary held
# 14.3 MiB of its file resident with 50 pods, the release build 10.4.
cp "$CARGO_TARGET_DIR/release/crilet" "$OUT/crilet"
export CRILET_BENCH_ENDPOINT="unix://$SOCK" CRILET_BIN="$OUT/crilet"
# The shipped binary (the release profile in Cargo.toml): its size against
# the goal of issue 16 (15 MiB) and the shared libraries it needs.
echo "== binary: $(stat -c %s "$CRILET_BIN") bytes ($(awk "BEGIN{printf \"%.1f\", $(stat -c %s "$CRILET_BIN")/1048576}") MiB; goal <= 15 MiB), needs: $(ldd "$CRILET_BIN" | awk '{print $1}' | tr '\n' ' ')"
API_CRILET_PID_FILE=$OUT/api_requests.crilet.pid

# api_requests SOCKET: crilet's API requests at idle (see the header).
api_requests() {
  local dir=$OUT/api_requests.d node=crilet-node-1 pods=${CRILET_BENCH_API_PODS:-5}
  local window=${CRILET_BENCH_API_WINDOW:-300} warmup=${CRILET_BENCH_API_WARMUP:-60}
  local kubectl out i t0 running=0 pid ta tb
  # The counter's own tests first: a figure from a broken parser is worse than none.
  out=$(python3 -B -m unittest discover -s "$ROOT/scripts" -p api_requests_test.py 2>&1) ||
    { echo "$out" >&2; die "scripts/api_requests_test.py failed"; }
  kubectl=$(bash "$ROOT/../shared/lab/bin.sh" kubectl)
  # A fresh server: no Node, Lease or mirror pod of an earlier run.
  env "${API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" down >/dev/null 2>&1 || true
  eval "$(env "${API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" up 2>"$OUT/api_requests.apiserver-up.log")"
  export KUBECONFIG=$CRILET_KUBE_ADMIN_KUBECONFIG
  mkdir -p "$dir/manifests"
  for i in $(seq -w 1 "$pods"); do
    printf '%s\n' "apiVersion: v1" "kind: Pod" "metadata:" "  name: idle-$i" "spec:" \
      "  hostNetwork: true" "  terminationGracePeriodSeconds: 1" "  containers:" "  - name: main" \
      "    image: docker.io/library/busybox:latest" "    imagePullPolicy: IfNotPresent" \
      '    command: [sleep, "3600000"]' >"$dir/manifests/idle-$i.yaml"
  done
  CRILET_LOG=${CRILET_LOG:-info} "$CRILET_BIN" run --port 0 --container-runtime-endpoint "unix://$1" \
    --pod-manifest-path "$dir/manifests" --kubeconfig "$CRILET_KUBE_NODE_KUBECONFIG_DIR/kubeconfig-$node" \
    --hostname-override "$node" --cgroup-root /crilet-bench --node-ip 127.0.0.1 \
    --root-dir "$dir/root" --pod-logs-dir "$dir/pod-logs" --container-logs-dir "$dir/containers" \
    --socket "$dir/crilet.sock" >"$dir/crilet.log" 2>&1 &
  pid=$!
  echo "$pid" >"$API_CRILET_PID_FILE"
  t0=$(date +%s)
  # Warm-up: every mirror pod Running, and long enough that start-up is past.
  while :; do
    kill -0 "$pid" 2>/dev/null || { tail -20 "$dir/crilet.log" >&2; die "api_requests: crilet exited"; }
    running=$("$kubectl" get pods -A --field-selector "spec.nodeName=$node" \
      -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' 2>/dev/null | grep -c '^Running$' || true)
    if [ "${running:-0}" -ge "$pods" ] && [ $(($(date +%s) - t0)) -ge "$warmup" ]; then break; fi
    [ $(($(date +%s) - t0)) -lt 600 ] || die "api_requests: $running of $pods mirror pods Running after 600 s"
    sleep 2
  done
  echo "== api_requests: warm-up $(($(date +%s) - t0)) s ($running mirror pods Running), then a ${window} s window"
  # Each scrape's time is the middle of its call.
  scrape() { # FILE -> the time it was taken, in s
    local a b
    a=$(date +%s.%N); "$kubectl" get --raw /metrics >"$1"; b=$(date +%s.%N)
    awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", (a+b)/2}'
  }
  ta=$(scrape "$dir/metrics.before")
  sleep "$window"
  tb=$(scrape "$dir/metrics.after")
  kill -0 "$pid" 2>/dev/null || die "api_requests: crilet exited during the window"
  echo "== api_requests: crilet's API requests at idle, $pods pods, node $node, over $(awk -v a="$ta" -v b="$tb" 'BEGIN{printf "%.1f", b-a}') s (kube-apiserver 1.32, apiserver_request_total)"
  python3 -B "$ROOT/scripts/api_requests.py" "$dir/metrics.before" "$dir/metrics.after" \
    "$(awk -v a="$ta" -v b="$tb" 'BEGIN{print b-a}')" 0.11
  echo "   (the kubelet: ~0.11/s, a Lease PUT every 10 s and a status PATCH on a change or every 5 min)"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  : >"$API_CRILET_PID_FILE"
  env "${API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" down >/dev/null 2>&1 || true
}
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
  if want api_requests; then api_requests "$SOCK" | tee "$OUT/api_requests"; fi
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
# kubelet_vs_crilet and parity: the real kubelet beside crilet (see the header).
with_parity() { # KIND COMMAND...: COMMAND with the parity instance of KIND and the API server up
  local kind=$1 rc=0 kube parity
  shift
  PARITY_KINDS+=("$kind")
  kube=$(env "${PARITY_API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" up 2>"$OUT/parity-apiserver-up.log")
  parity=$(bash "$ROOT/scripts/parity-env.sh" up "$kind" 2>"$OUT/parity-$kind-up.log")
  env $(sed -n 's/^export //p' <<<"$kube") $(sed -n 's/^export //p' <<<"$parity") \
    CRILET_CRICTL="$(bash "$ROOT/../shared/lab/bin.sh" crictl)" \
    CRILET_KUBECTL="$(bash "$ROOT/../shared/lab/bin.sh" kubectl)" "$@" || rc=$?
  bash "$ROOT/scripts/parity-env.sh" down "$kind" >/dev/null 2>&1 || true
  return $rc
}
if want kubelet_vs_crilet; then
  with_parity containerd1 cargo bench --quiet --bench kubelet_vs_crilet | tee "$OUT/kubelet_vs_crilet"
fi
if want parity; then
  parity_bin=$(cargo test --test parity --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "parity":
        print(m["executable"])')
  for kind in containerd1 containerd2 crio; do
    kind_wanted "$kind" || continue
    with_parity "$kind" "$parity_bin" --ignored --exact kubelet_and_crilet_agree_over_the_corpus \
      --nocapture >"$OUT/parity-$kind" 2>&1 || true
    echo "== parity [$kind]: $(grep -E '^parity \[.*differences' "$OUT/parity-$kind" || echo "did not finish, see $OUT/parity-$kind")"
  done
fi
# The long-lived soak (scripts/soak.sh --long, the release binary) on each
# runtime, one after another: CRILET_BENCH_SOAK_MINUTES (30) each.
if want soak_long; then
  for kind in containerd1 containerd2 crio; do
    kind_wanted "$kind" || continue
    rc=0
    SOAK_RUNTIME=$kind SOAK_CRILET="$CRILET_BIN" SOAK_DIR=/tmp/crilet-bench-soak-long \
      SOAK_BRIDGE=criletbench9 SOAK_POD_CIDR=10.97.0.0/16 SOAK_CGROUP_ROOT=crilet-bench-soak \
      bash "$ROOT/scripts/soak.sh" --long "${CRILET_BENCH_SOAK_MINUTES:-30}" \
      >"$OUT/soak_long-$kind" 2>&1 || rc=$?
    echo "== soak_long [$kind]: $(grep -E '^soak-long:' "$OUT/soak_long-$kind" || echo "did not finish (status $rc), see $OUT/soak_long-$kind")"
  done
fi
# The fleet benchmark (scripts/fleet.sh): hollow nodes on their own API server.
if want fleet; then
  rc=0
  # shellcheck disable=SC2086 # "NODES PODS"
  FLEET_CRILET="$CRILET_BIN" bash "$ROOT/scripts/fleet.sh" ${CRILET_BENCH_FLEET:-500 10} \
    >"$OUT/fleet" 2>&1 || rc=$?
  grep -E '^fleet:' "$OUT/fleet" | sed 's/^/== /' || true
  [ "$rc" = 0 ] || echo "== fleet: did not finish (status $rc), see $OUT/fleet"
fi
pick() { # FILE PATTERN -> the first matching line, squeezed
  grep -m1 -- "$2" "$1" 2>/dev/null | tr -s ' ' | sed 's/^ //' || true
}
# The table, when one of its benches ran.
want cri_sequence || want agent_start || want footprint || want stats_api || want events || exit 0
echo
echo "== agent_start, stats_api and events per runtime (one run, same machine) =="
for kind in containerd1 containerd2 crio; do
  kind_wanted "$kind" || continue
  echo "-- $kind"
  echo "   cri_sequence $(pick "$OUT/$kind.cri_sequence" 'best width')"
  echo "   agent_start  one pod: $(pick "$OUT/$kind.agent_start" 'ratio of medians')"
  echo "   agent_start  50 pods: $(sed -n '/^2\. /,$p' "$OUT/$kind.agent_start" 2>/dev/null | pick /dev/stdin 'ratio of medians')"
  echo "   agent_start  50 pods idle: $(pick "$OUT/$kind.agent_start" 'max RSS'), $(pick "$OUT/$kind.agent_start" 'CPU  ')"
  echo "   footprint    $(pick "$OUT/$kind.footprint" 'first CRI call  ')"
  echo "   footprint    $(pick "$OUT/$kind.footprint" 'start-up  ')"
  echo "   footprint    $(pick "$OUT/$kind.footprint" 'RSS idle  ')"
  echo "   footprint    $(pick "$OUT/$kind.footprint" 'idle CPU')"
  echo "   footprint    crilet pods $(pick "$OUT/$kind.footprint" 'wall  ')"
  echo "   stats_api    $(pick "$OUT/$kind.stats_api" 'GetPodStats')"
  echo "   stats_api    $(pick "$OUT/$kind.stats_api" '/stats/summary')"
  if [ -f "$OUT/$kind.events" ]; then
    awk '/^ *(events|relist) *\(/{m=$1} /exit -> restart started/{sub(/^ */,""); print "   events       " m ": " $0}' "$OUT/$kind.events"
    grep -E '^ *(events|relist) +crilet CPU' "$OUT/$kind.events" | sed 's/^ */   idle 100 pods /' || true
  fi
  echo "   events       $(pick "$OUT/$kind.events" 'burst of')"
done
