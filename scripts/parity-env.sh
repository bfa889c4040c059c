#!/usr/bin/env bash
# parity-env.sh — the surroundings of the differential harness (parity/): a
# runtime instance of its own and a node IP the kubelet accepts.
#
#   parity-env.sh up KIND     start them (idempotent) and print the harness's
#                             environment on stdout, as `export NAME=value`
#                             lines (eval "$(... up crio)")
#   parity-env.sh down KIND   stop them and remove what they left
#   parity-env.sh keep-logs KIND DIR
#                             copy the runtime's and the agents' logs to
#                             DIR/parity-KIND-*.log before a `down`
#   KIND: containerd1, containerd2 or crio.
#
# Why an instance of its own: the kubelet removes every kubelet-labelled pod
# it does not know on its runtime, so no other test may share it. Each kind
# has its own directory, bridge, CIDR, cgroup root, node IP and ports, so the
# three can run at once.
#
# Why an interface of its own: the kubelet reports node addresses (and so a
# host-network pod's podIP, the managed /etc/hosts and the env of
# status.podIP) only for a node IP that is on a host interface and is not
# loopback. The runtime's bridge gets its address only when a pod-network
# pod first runs, so the harness gives the node an address of its own: a
# /32 on a bridge with no ports (this kernel has no dummy driver), which
# carries no traffic off the machine.
#
# CRI-O: root here lacks CAP_SYS_RESOURCE and CRI-O does not restrict
# oom_score_adj as containerd does, so the instance runs everything under
# the lab's "runc-restrict-oom" handler (a drop-in making it the default);
# both agents then run node-critical pods, as on containerd.
#
# The API server is the caller's: CRILET_KUBE_ADMIN_KUBECONFIG and
# CRILET_KUBE_NODE_KUBECONFIG_DIR (scripts/apiserver-env.sh), with a
# credential for the node crilet-parity.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
case "$#:${1:-}" in
  2:up | 2:down | 3:keep-logs) ;;
  *) die "usage: parity-env.sh up|down KIND, or keep-logs KIND DIR" ;;
esac
CMD=$1 KIND=$2
case "$KIND" in
  containerd1) N=17 ;;
  containerd2) N=18 ;;
  crio) N=19 ;;
  *) die "unknown runtime kind '$KIND' (containerd1, containerd2 or crio)" ;;
esac
DIR=/tmp/crilet-par-$KIND          # CRI-O: at most 28 characters (attach sockets)
RUN=/tmp/crilet-parity-run-$KIND
BRIDGE=crilettest$N CIDR=10.$((91 + N)).0.0/16 CGROUP=crilet-parity-$KIND
NODE_IF=crilet-pnode$N NODE_IP=10.111.$N.1 PORT=$((10430 + N * 10))
RT="$ROOT/scripts/runtime.sh"

case "$CMD" in
  up)
    if [ "$KIND" = crio ]; then
      mkdir -p "$DIR/crio.conf.d"
      printf '[crio.runtime]\ndefault_runtime = "runc-restrict-oom"\n' >"$DIR/crio.conf.d/50-crilet-parity.conf"
    fi
    # A cgroup v1 host mounts every controller its kernel has (systemd does);
    # this machine leaves hugetlb unmounted, and then every container the
    # kubelet asks CRI-O for fails ("cannot set hugetlb limit"): it sends a
    # hugepage limit for each page size the kernel has, controller or not.
    # The harness compares the agents on a node as nodes are, so the
    # hierarchy is mounted, and stays mounted: unmounted, the kernel keeps
    # the hierarchy (still listed in /proc/self/cgroup) with no mount point,
    # and containerd's cgroup v1 library then loads no container's cgroup
    # (no CPU or memory in ContainerStats for any container on the host;
    # mount_lingering_cgroups in lib.sh repairs that state).
    mount_lingering_cgroups
    if [ ! -f /sys/fs/cgroup/cgroup.controllers ] && [ ! -d /sys/fs/cgroup/hugetlb ] &&
      awk '$1 == "hugetlb" && $4 == 1 {found = 1} END {exit !found}' /proc/cgroups; then
      mkdir /sys/fs/cgroup/hugetlb && mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb ||
        die "could not mount the hugetlb cgroup controller on /sys/fs/cgroup/hugetlb"
    fi
    SOCK=$(CTRLAB_BRIDGE=$BRIDGE CTRLAB_POD_CIDR=$CIDR CTRLAB_CGROUP_ROOT=$CGROUP bash "$RT" up "$KIND" "$DIR")
    ip link show "$NODE_IF" >/dev/null 2>&1 || ip link add "$NODE_IF" type bridge
    ip addr show dev "$NODE_IF" | grep -q " $NODE_IP/32 " || ip addr add "$NODE_IP/32" dev "$NODE_IF"
    ip link set "$NODE_IF" up
    cat <<EOF
export CRILET_PARITY_RUNTIME=$KIND
export CRILET_PARITY_ENDPOINT=unix://$SOCK
export CRILET_PARITY_DIR=$RUN
export CRILET_PARITY_CGROUP_ROOT=$CGROUP
export CRILET_PARITY_NODE_IP=$NODE_IP
export CRILET_PARITY_PORT=$PORT
EOF
    ;;
  down)
    # A kubelet the harness left running (it stops its own): by its pid file.
    [ -d "$RUN/kubelet" ] && bash "$ROOT/../shared/lab/kubelet-down.sh" "$RUN/kubelet" --purge
    # The host directory the harness bind-mounted shared, and what its
    # pods mounted under it (Bidirectional), deepest first.
    awk -v d="$RUN/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
    bash "$RT" down "$KIND" "$DIR" --purge >/dev/null 2>&1 || say "could not stop the $KIND parity instance in $DIR"
    ip link del "$NODE_IF" 2>/dev/null || true
    for c in /sys/fs/cgroup/*/; do
      [ -d "$c$CGROUP" ] && find "$c$CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    rm -rf "$RUN"
    ;;
  keep-logs)
    if log=$(runtime_log_of "$DIR"); then
      cp -f "$log" "$3/parity-$KIND-runtime.log"
    fi
    for f in "$RUN"/{crilet,crilet-takeover,kubelet/kubelet}.log; do
      [ -f "$f" ] || continue
      cp -f "$f" "$3/parity-$KIND-$(basename "$f")"
    done
    ;;
  *) die "usage: parity-env.sh up|down KIND, or keep-logs KIND DIR" ;;
esac
