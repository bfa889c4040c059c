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
    echo "export CRILET_KUBE_ADMIN_KUBECONFIG=${kubeconfigs[0]}"
    echo "export CRILET_KUBE_NODE_KUBECONFIG_DIR=$(dirname "${kubeconfigs[1]}")"
    ;;
  down)
    bash "$LAB/apiserver-down.sh" "$STATE" --purge
    ;;
  *)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
