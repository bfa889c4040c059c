#!/usr/bin/env bash
# fleet.sh [NODES] [PODS] — the fleet benchmark (default 500 nodes x 10 pods):
# `crilet hollow` against one real kube-apiserver 1.32 with etcd and
# kube-controller-manager (CSR signing and approval, the node lifecycle
# controller, leader election on, as kubeadm runs it), all on this machine.
#
#   1. start: a bootstrap token and kubeadm's join RBAC; the hollow process
#      started; the time until every Node is Ready and every mirror pod
#      Running; the API server's CPU and request latency p99 meanwhile;
#   2. steady state: after FLEET_WARMUP s, the hollow nodes' API requests
#      per node per second over FLEET_WINDOW s (scripts/fleet_report.py,
#      counted from the API server's own /metrics), its CPU and p99, and
#      the hollow process's memory per node;
#   3. outage (FLEET_OUTAGE s, 0 skips it): the API server killed with -9
#      and started again after FLEET_OUTAGE s (the controller manager, which
#      loses its leadership meanwhile and exits, is started again then, as
#      its supervisor would); the time from its return until every Node is
#      Ready and every mirror pod Running, and FLEET_SETTLE s later that no
#      Node's Ready condition moved and no mirror pod was recreated.
# Prints one `fleet:` line per figure. With FLEET_CHECK=1 (the test
# command's short run) it exits non-zero when a goal is missed: all Ready
# within FLEET_GOAL_START s (120), at most 0.11 requests/s per node, back
# within 60 s with nothing flapped or recreated, at most 2 MiB per node.
#
# Environment (defaults in brackets): FLEET_DIR [/tmp/crilet-fleet] (the API
#   server's state, each node's files, the logs: kept on failure),
#   FLEET_PORT [26447], FLEET_ETCD_PORT [22391], FLEET_WARMUP [60],
#   FLEET_WINDOW [300], FLEET_OUTAGE [60], FLEET_SETTLE [60],
#   FLEET_TIMEOUT [600] (for each wait), FLEET_CRILET (a crilet binary;
#   default: the release build), FLEET_KCM_QPS (the controller manager's
#   client QPS; default its own 20), FLEET_CHECK [0], FLEET_KEEP_LOGS [0] (1:
#   keep the logs in $FLEET_DIR.logs even when every goal is met).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

NODES=${1:-500} PODS=${2:-10}
[[ "$NODES" =~ ^[1-9][0-9]*$ && "$PODS" =~ ^[0-9]+$ ]] || die "usage: fleet.sh [NODES] [PODS]"
DIR=${FLEET_DIR:-/tmp/crilet-fleet}
WARMUP=${FLEET_WARMUP:-60} WINDOW=${FLEET_WINDOW:-300} OUTAGE=${FLEET_OUTAGE:-60}
SETTLE=${FLEET_SETTLE:-60} TIMEOUT=${FLEET_TIMEOUT:-600} CHECK=${FLEET_CHECK:-0}
GOAL_START=${FLEET_GOAL_START:-120}
API_DIR=$DIR/api
API_ENV=(CRILET_KUBE_TEST_DIR="$API_DIR" CRILET_KUBE_TEST_PORT="${FLEET_PORT:-26447}"
         CRILET_KUBE_TEST_ETCD_PORT="${FLEET_ETCD_PORT:-22391}"
         CRILET_KUBE_TEST_CONTROLLERS=csrsigning,csrapproving,csrcleaner,nodelifecycle
         CRILET_KUBE_TEST_LEADER_ELECT=true CRILET_KUBE_TEST_CERT_DURATION=24h
         CRILET_KUBE_TEST_KCM_QPS="${FLEET_KCM_QPS:-}")
PREFIX=hollow
REPORT="python3 -B $ROOT/scripts/fleet_report.py"
HOLLOW_PID="" FAILED=0 MISSED=()

cleanup() {
  local rc=$?
  if [ -n "$HOLLOW_PID" ] && kill -0 "$HOLLOW_PID" 2>/dev/null; then
    kill -TERM "$HOLLOW_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$HOLLOW_PID" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$HOLLOW_PID" 2>/dev/null || true
  fi
  if [ "$rc" != 0 ] || [ "$FAILED" != 0 ] || [ "${FLEET_KEEP_LOGS:-0}" = 1 ]; then
    mkdir -p "$DIR.logs"
    cp -f "$DIR/hollow.log" "$API_DIR"/*.log "$DIR.logs/" 2>/dev/null || true
    say "logs kept in $DIR.logs (hollow.log, kube-apiserver.log, kube-controller-manager.log, etcd.log)"
  fi
  env "${API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" down >/dev/null 2>&1 || true
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT

command -v python3 >/dev/null || {
  say "apt-get install python3"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 >/dev/null
}
KUBECTL=${CRILET_KUBECTL:-$(bash "$ROOT/../shared/lab/bin.sh" kubectl)} || die "no kubectl: ../shared/lab/bin.sh kubectl failed"
if [ -n "${FLEET_CRILET:-}" ]; then CRILET=$FLEET_CRILET; else
  need_toolchain
  cargo build --release --quiet
  CRILET=$CARGO_TARGET_DIR/release/crilet
fi
[ -x "$CRILET" ] || die "no crilet binary at $CRILET"

env "${API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" down >/dev/null 2>&1 || true
rm -rf "$DIR"
mkdir -p "$DIR"
say "the API server, etcd and the controller manager in $API_DIR"
eval "$(env "${API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" up 2>"$DIR/apiserver-up.log")" ||
  { tail -20 "$DIR/apiserver-up.log" >&2; die "the API server did not start"; }
ADMIN=$CRILET_KUBE_ADMIN_KUBECONFIG
k() { "$KUBECTL" --kubeconfig "$ADMIN" "$@"; }
API_PID() { cat "$API_DIR/kube-apiserver.pid"; }

# kubeadm's join RBAC and a bootstrap token, as `kubeadm init` and `kubeadm
# token create` leave them; the bootstrap kubeconfig every node gets.
read -r ID SECRET < <(python3 -c 'import secrets as s; a = "0123456789abcdefghijklmnopqrstuvwxyz"
print("".join(s.choice(a) for _ in range(6)), "".join(s.choice(a) for _ in range(16)))')
EXPIRES=$(date -u -d '+6 hours' +%Y-%m-%dT%H:%M:%SZ)
binding() { # NAME ROLE GROUP
  printf -- '---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: "%s"}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "%s"}\nsubjects: [{kind: Group, apiGroup: rbac.authorization.k8s.io, name: "%s"}]\n' "$1" "$2" "$3"
}
{
  binding kubeadm:kubelet-bootstrap system:node-bootstrapper system:bootstrappers:kubeadm:default-node-token
  binding kubeadm:node-autoapprove-bootstrap system:certificates.k8s.io:certificatesigningrequests:nodeclient system:bootstrappers:kubeadm:default-node-token
  binding kubeadm:node-autoapprove-certificate-rotation system:certificates.k8s.io:certificatesigningrequests:selfnodeclient system:nodes
  printf -- '---\napiVersion: v1\nkind: Secret\nmetadata: {name: bootstrap-token-%s, namespace: kube-system}\ntype: bootstrap.kubernetes.io/token\nstringData: {token-id: "%s", token-secret: "%s", expiration: "%s", usage-bootstrap-authentication: "true", usage-bootstrap-signing: "true", auth-extra-groups: "system:bootstrappers:kubeadm:default-node-token"}\n' \
    "$ID" "$ID" "$SECRET" "$EXPIRES"
} | k apply -f - >/dev/null
SERVER=$(k config view --raw -o jsonpath='{.clusters[0].cluster.server}')
CA=$(k config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
cat >"$DIR/bootstrap-kubelet.conf" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kubernetes
  cluster: {server: "$SERVER", certificate-authority-data: "$CA"}
contexts:
- name: tls-bootstrap-token-user@kubernetes
  context: {cluster: kubernetes, user: tls-bootstrap-token-user}
current-context: tls-bootstrap-token-user@kubernetes
users:
- name: tls-bootstrap-token-user
  user: {token: "$ID.$SECRET"}
EOF
chmod 600 "$DIR/bootstrap-kubelet.conf"

scrape() { k get --raw /metrics >"$1"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
cores() { awk -v t="$1" -v s="$2" -v hz="$HZ" 'BEGIN{printf "%.2f", t / hz / s}'; }
ready_nodes() {
  k get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null |
    grep -c "^$PREFIX-[0-9]* True$" || true
}
running_pods() {
  k get pods -n default -l app=hollow --field-selector status.phase=Running -o name 2>/dev/null | wc -l || true
}
# Polls until all NODES are Ready and NODES*PODS mirror pods Running; prints
# the seconds since $1 (an epoch with fractions), or fails after TIMEOUT.
wait_all() {
  local since=$1 nodes pods=0 last=$(date +%s)
  while :; do
    nodes=$(ready_nodes)
    if [ "$nodes" -ge "$NODES" ]; then pods=$(running_pods); fi
    if [ "$nodes" -ge "$NODES" ] && [ "$pods" -ge $((NODES * PODS)) ]; then
      awk -v a="$since" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}'
      return 0
    fi
    local now; now=$(date +%s)
    if [ $((now - ${last:-0})) -ge 15 ]; then say "  $nodes/$NODES Nodes Ready, $pods/$((NODES * PODS)) mirror pods Running"; last=$now; fi
    if awk -v a="$since" -v b="$(date +%s.%N)" -v t="$TIMEOUT" 'BEGIN{exit !(b - a > t)}'; then
      say "timed out: $nodes/$NODES Nodes Ready, $pods/$((NODES * PODS)) mirror pods Running"
      return 1
    fi
    sleep 2
  done
}
snapshot() { # FILE
  k get nodes -o json >"$DIR/nodes.json"
  k get pods -n default -l app=hollow -o json >"$DIR/pods.json"
  $REPORT snapshot "$DIR/nodes.json" "$DIR/pods.json" >"$1"
}
miss() { MISSED+=("$1"); }

# 1. Start.
say "crilet hollow: $NODES nodes x $PODS pods ($CRILET)"
scrape "$DIR/m0"
API_T0=$(cpu_ticks "$(API_PID)")
T0=$(date +%s.%N)
"$CRILET" hollow --nodes "$NODES" --pods-per-node "$PODS" --name-prefix "$PREFIX" \
  --bootstrap-kubeconfig "$DIR/bootstrap-kubelet.conf" --state-dir "$DIR/nodes" \
  >"$DIR/hollow.log" 2>&1 &
HOLLOW_PID=$!
START=$(wait_all "$T0") || { FAILED=1; tail -20 "$DIR/hollow.log" >&2; die "the fleet did not come up"; }
T1=$(date +%s.%N)
scrape "$DIR/m1"
API_T1=$(cpu_ticks "$(API_PID)")
SPAN=$(awk -v a="$T0" -v b="$T1" 'BEGIN{print b - a}')
echo "fleet: start: all $NODES Nodes Ready and $((NODES * PODS)) mirror pods Running ${START} s after start (goal <= $GOAL_START)"
echo "fleet: start: API server CPU $(cores $((API_T1 - API_T0)) "$SPAN") cores, request p99 <= $($REPORT latency "$DIR/m0" "$DIR/m1") s"
awk -v s="$START" -v g="$GOAL_START" 'BEGIN{exit !(s > g)}' && miss "start ${START} s > $GOAL_START s"
kill -0 "$HOLLOW_PID" || { FAILED=1; die "the hollow process exited: $(tail -5 "$DIR/hollow.log")"; }

# 2. Steady state.
say "warm-up ${WARMUP} s, then a ${WINDOW} s window"
sleep "$WARMUP"
scrape "$DIR/m2"
API_T2=$(cpu_ticks "$(API_PID)") HOLLOW_T2=$(cpu_ticks "$HOLLOW_PID")
sleep "$WINDOW"
scrape "$DIR/m3"
API_T3=$(cpu_ticks "$(API_PID)") HOLLOW_T3=$(cpu_ticks "$HOLLOW_PID")
read -r RATE APF DETAIL < <($REPORT requests "$DIR/m2" "$DIR/m3" "$WINDOW" "$NODES")
echo "fleet: steady: $RATE requests/s per node (goal <= 0.11; APF cross-check $APF): $DETAIL"
echo "fleet: steady: API server CPU $(cores $((API_T3 - API_T2)) "$WINDOW") cores, request p99 <= $($REPORT latency "$DIR/m2" "$DIR/m3") s; hollow process CPU $(cores $((HOLLOW_T3 - HOLLOW_T2)) "$WINDOW") cores"
RSS_KIB=$(awk '/^VmRSS/{print $2}' "/proc/$HOLLOW_PID/status")
PER_NODE=$(awk -v r="$RSS_KIB" -v n="$NODES" 'BEGIN{printf "%.2f", r / 1024 / n}')
echo "fleet: memory: hollow process RSS $(awk -v r="$RSS_KIB" 'BEGIN{printf "%.1f", r / 1024}') MiB, ${PER_NODE} MiB per node (goal <= 2)"
awk -v r="$RATE" 'BEGIN{exit !(r > 0.11)}' && miss "steady $RATE requests/s per node > 0.11"
awk -v m="$PER_NODE" 'BEGIN{exit !(m > 2)}' && miss "memory $PER_NODE MiB per node > 2"

# 3. Outage.
if [ "$OUTAGE" != 0 ]; then
  snapshot "$DIR/before.json"
  say "kill -9 the API server; back in ${OUTAGE} s"
  kill -9 "$(API_PID)"
  sleep "$OUTAGE"
  env "${API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" up >/dev/null 2>>"$DIR/apiserver-up.log" ||
    { FAILED=1; tail -20 "$DIR/apiserver-up.log" >&2; die "the API server did not come back"; }
  T4=$(date +%s.%N)
  BACK=$(wait_all "$T4") || { FAILED=1; die "the fleet did not come back"; }
  echo "fleet: outage: every Node Ready and mirror pod Running ${BACK} s after the API server's return (goal <= 60)"
  awk -v s="$BACK" 'BEGIN{exit !(s > 60)}' && miss "back in ${BACK} s > 60 s"
  sleep "$SETTLE"
  snapshot "$DIR/after.json"
  if changed=$($REPORT compare "$DIR/before.json" "$DIR/after.json"); then
    echo "fleet: outage: no Node's Ready condition moved and no mirror pod was recreated (${SETTLE} s after)"
  else
    echo "fleet: outage: $(echo "$changed" | wc -l) changes:"
    echo "$changed" | head -20 | sed 's/^/fleet:   /'
    miss "Nodes flapped or mirror pods recreated"
  fi
fi
kill -0 "$HOLLOW_PID" || { FAILED=1; die "the hollow process exited: $(tail -5 "$DIR/hollow.log")"; }
ERRORS=$(grep -c ' ERROR ' "$DIR/hollow.log" || true)
echo "fleet: hollow log: $ERRORS error lines, $(wc -l <"$DIR/hollow.log") lines in all"
if [ ${#MISSED[@]} -gt 0 ]; then
  echo "fleet: goals missed: ${MISSED[*]}"
  FAILED=2 # keeps the logs
  if [ "$CHECK" = 1 ]; then FAILED=1; exit 1; fi
fi
