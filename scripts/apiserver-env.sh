#!/usr/bin/env bash
# The real kube-apiserver (1.32, Node+RBAC authorization, NodeRestriction) for
# the integration tests that check what a real API server decides: mirror pods,
# their owner references and deletion, the Node, its Lease and status writes.
#
#   apiserver-env.sh up     start it (idempotent; a re-run while up takes ~0.3 s)
#                           and print the tests' environment on stdout, as
#                           `export NAME=value` lines:  eval "$(... up)"
#   apiserver-env.sh down   stop it and remove everything it kept (--purge)
#
# Beside it runs kube-controller-manager (v1.32, ../shared/bin) with only the
# CSR controllers (csrsigning, csrapproving, csrcleaner), signing with the
# lab's CA: the TLS bootstrap tests need a real signer and approver, and no
# other controller touches what the tests hold. Its certificates live
# CRILET_KUBE_TEST_CERT_DURATION (default 3m; the signer backdates them 5
# minutes, so a node rotates 0.6-2.2 min after each issue). Its pid file
# and log are STATE/kube-controller-manager.{pid,log}. The fleet benchmark
# (scripts/fleet.sh) adds the node lifecycle controller and kubeadm's leader
# election: CRILET_KUBE_TEST_CONTROLLERS, CRILET_KUBE_TEST_LEADER_ELECT, and
# CRILET_KUBE_TEST_KCM_QPS (its client's QPS, burst twice that; default
# kube-controller-manager's 20 and 30).
# `up` again restarts whichever of them is not running, data kept.
#
# It wraps the team lab's apiserver-up.sh/apiserver-down.sh (lab/README.md,
# "A real Kubernetes API server"). The lab creates node credentials only for
# the names given at start, so the tests' node names are listed here, once:
# each test that runs an agent claims one of them by name
# (integration/kube.rs), so tests never share a Node or its pods.
#
# Environment: CRILET_KUBE_TEST_DIR (default /tmp/crilet-apiserver-test),
#   CRILET_KUBE_TEST_PORT (16443), CRILET_KUBE_TEST_ETCD_PORT (12379; the
#   peer port is one more), CRILET_LAB_DIR (default ../shared/lab from the
#   project root).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

STATE=${CRILET_KUBE_TEST_DIR:-/tmp/crilet-apiserver-test}
PORT=${CRILET_KUBE_TEST_PORT:-16443}
ETCD_PORT=${CRILET_KUBE_TEST_ETCD_PORT:-12379}
LAB=${CRILET_LAB_DIR:-$ROOT/../shared/lab}
# Keep in step with integration/kube.rs (NODES). crilet-parity is the
# parity harness's node (parity/lab.rs), which the kubelet and crilet take
# in turn; no integration test claims it.
NODES=(crilet-node-1 crilet-node-2 crilet-node-3 crilet-node-4 crilet-node-5
       crilet-node-6 crilet-node-7 crilet-node-8 crilet-node-9 crilet-node-10
       crilet-node-11 crilet-node-12 crilet-node-13 crilet-node-14 crilet-node-15
       crilet-node-16 crilet-node-17 crilet-node-18 crilet-parity)

KCM_PID=$STATE/kube-controller-manager.pid
kcm_running() { [ -f "$KCM_PID" ] && kill -0 "$(cat "$KCM_PID")" 2>/dev/null &&
  grep -q -- "--cluster-signing-cert-file=$STATE/pki/ca.crt" "/proc/$(cat "$KCM_PID")/cmdline" 2>/dev/null; }

# The controller manager of this API server (ADMIN: its kubeconfig), once.
start_controller_manager() {
  kcm_running && return 0
  local kcm
  kcm=$(bash "$LAB/bin.sh" kube-controller-manager) || die "no kube-controller-manager in ../shared/bin"
  # Arguments are NUL-separated in /proc/PID/cmdline: kcm_running greps one.
  setsid "$kcm" --kubeconfig="$1" \
    --controllers="${CRILET_KUBE_TEST_CONTROLLERS:-csrsigning,csrapproving,csrcleaner}" \
    --cluster-signing-cert-file="$STATE/pki/ca.crt" \
    --cluster-signing-key-file="$STATE/pki/ca.key" \
    --cluster-signing-duration="${CRILET_KUBE_TEST_CERT_DURATION:-3m}" \
    --secure-port=0 --leader-elect="${CRILET_KUBE_TEST_LEADER_ELECT:-false}" \
    ${CRILET_KUBE_TEST_KCM_QPS:+--kube-api-qps="$CRILET_KUBE_TEST_KCM_QPS" --kube-api-burst="$((CRILET_KUBE_TEST_KCM_QPS * 2))"} \
    </dev/null >>"$STATE/kube-controller-manager.log" 2>&1 &
  echo $! >"$KCM_PID"
  sleep 0.5
  kcm_running || die "kube-controller-manager exited at once: $(tail -5 "$STATE/kube-controller-manager.log")"
}

stop_controller_manager() {
  [ -f "$KCM_PID" ] || return 0
  local pid; pid=$(cat "$KCM_PID")
  if kcm_running; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$KCM_PID"
}

[ -x "$LAB/apiserver-up.sh" ] || die "no $LAB/apiserver-up.sh: set CRILET_LAB_DIR to the lab's directory"

case "${1:-}" in
  up)
    args=()
    for n in "${NODES[@]}"; do args+=(--node "$n"); done
    # stdout: the admin kubeconfig, then one kubeconfig per node.
    mapfile -t kubeconfigs < <(bash "$LAB/apiserver-up.sh" "$STATE" \
      --port "$PORT" --etcd-port "$ETCD_PORT" "${args[@]}")
    [ "${#kubeconfigs[@]}" -eq $((${#NODES[@]} + 1)) ] ||
      die "apiserver-up.sh printed ${#kubeconfigs[@]} kubeconfigs, expected $((${#NODES[@]} + 1))"
    for k in "${kubeconfigs[@]}"; do [ -f "$k" ] || die "apiserver-up.sh printed $k, which does not exist"; done
    start_controller_manager "${kubeconfigs[0]}"
    echo "export CRILET_KUBE_ADMIN_KUBECONFIG=${kubeconfigs[0]}"
    echo "export CRILET_KUBE_NODE_KUBECONFIG_DIR=$(dirname "${kubeconfigs[1]}")"
    ;;
  down)
    stop_controller_manager
    bash "$LAB/apiserver-down.sh" "$STATE" --purge
    ;;
  *)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
