#!/usr/bin/env bash
# Makes build/text-order.txt, the order build.rs links the release binary's
# functions in: those an agent runs first, most often run first, so that the
# code a running agent touches shares few pages (the kernel maps a binary's
# code 64 KiB around each page touched; see docs/performance.md).
#
# It builds the release binary, starts a private containerd 1.6 and a real
# kube-apiserver of its own, and runs the binary under valgrind's callgrind
# through an agent's ordinary life: start-up, the TLS connection to the API
# server, the kubelet's HTTPS server and read-only port, static pods started
# (plain, on the host and on the pod network, exec- and httpGet-probed, one
# with an init container, one crashing into back-off), their mirror pods and
# statuses, CRILET_TEXT_ORDER_IDLE seconds idle (default 90: relists, sweeps,
# stats, the Lease, probes), a scrape of the stats and metrics, the stats and
# pods the CLI reads, SIGTERM; then a
# second life that adopts the running pods, and half the manifests removed.
# scripts/text_order.py then names the functions whose instructions ran from
# the link map build.rs writes.
#
# Run it again when the code has moved on: names the file has that the code
# no longer has are skipped, and new code goes after the ordered part, so a
# stale file costs memory, never correctness. Not part of the test command.
#
# Usage: scripts/text-order.sh   (as root; about 10 minutes)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
need_toolchain

W=${CRILET_TEXT_ORDER_DIR:-/tmp/crilet-text-order}
IDLE=${CRILET_TEXT_ORDER_IDLE:-90}
# The kubelet's server and read-only port, as the benches and nodes run them.
PORT=26471 READ_ONLY_PORT=26472
API_ENV=(CRILET_KUBE_TEST_DIR="$W/apiserver" CRILET_KUBE_TEST_PORT=26470 CRILET_KUBE_TEST_ETCD_PORT=22470)
export CTRLAB_BRIDGE=criletorder0 CTRLAB_POD_CIDR=10.93.0.0/16 CTRLAB_CGROUP_ROOT=crilet-order
PID=""
cleanup() {
  local rc=$?
  if [ -n "$PID" ]; then kill -TERM "$PID" 2>/dev/null || true; sleep 3; fi
  env "${API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" down >/dev/null 2>&1 || true
  bash "$ROOT/scripts/containerd-down.sh" "$W/containerd" --purge >/dev/null 2>&1 || true
  exit $rc
}
trap cleanup EXIT

command -v valgrind >/dev/null || {
  say "apt-get install valgrind"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends valgrind >/dev/null
}
rm -rf "$W" && mkdir -p "$W/manifests"
say "building the release binary and its link map"
cargo build --release --quiet
map=$(ls -t "$CARGO_TARGET_DIR"/release/build/crilet-*/out/crilet.map | head -1)
cp "$CARGO_TARGET_DIR/release/crilet" "$W/crilet"
cp "$map" "$W/crilet.map"

mount_lingering_cgroups
sock=$(bash "$ROOT/scripts/containerd-up.sh" "$W/containerd" 2>"$W/containerd-up.log")
eval "$(env "${API_ENV[@]}" bash "$ROOT/scripts/apiserver-env.sh" up 2>"$W/apiserver-up.log")"
crictl=$(bash "$ROOT/../shared/lab/bin.sh" crictl)
node=crilet-node-1

pod() { # NAME EXTRA-CONTAINER-YAML [EXTRA-SPEC-YAML]; HOSTNET=false: on the pod network
  printf '%s\n' "apiVersion: v1" "kind: Pod" "metadata:" "  name: $1" "spec:" \
    "  hostNetwork: ${HOSTNET:-true}" "  terminationGracePeriodSeconds: 1" "${3:-}" "  containers:" \
    "  - name: main" "    image: docker.io/library/busybox:latest" \
    "    imagePullPolicy: IfNotPresent" "$2" >"$W/manifests/$1.yaml"
}
exec_probe='      exec:
        command: ["true"]
      periodSeconds: 5'
for i in 1 2 3 4 5 6; do pod "plain-$i" '    command: [sleep, "3600"]'; done
# Pods on the pod network (the CNI's IPs in the sandbox status), as most
# of a node's pods are.
for i in 1 2 3 4; do HOSTNET=false pod "net-$i" '    command: [sleep, "3600"]'; done
for i in 1 2 3 4 5 6; do
  pod "probed-$i" "    command: [sleep, \"3600\"]
    livenessProbe:
$exec_probe
    readinessProbe:
$exec_probe"
done
pod http '    command: [sh, -c, "mkdir -p /w && echo ok >/w/index.html && exec httpd -f -p 18091 -h /w"]
    readinessProbe:
      httpGet:
        port: 18091
      periodSeconds: 5
    lifecycle:
      postStart:
        exec:
          command: ["true"]'
pod init '    command: [sleep, "3600"]' '  initContainers:
  - name: setup
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["true"]'
pod crash '    command: [sh, -c, "echo bye; exit 3"]'

# One life of crilet under callgrind, every instruction's address kept:
# SNIPPET runs between its start and its SIGTERM.
life() { # NAME SNIPPET
  valgrind --tool=callgrind --dump-instr=yes --dump-line=no \
    --callgrind-out-file="$W/callgrind.$1" "$W/crilet" run \
    --address 127.0.0.1 --port "$PORT" --http-address "127.0.0.1:$READ_ONLY_PORT" \
    --container-runtime-endpoint "unix://$sock" --pod-manifest-path "$W/manifests" \
    --kubeconfig "$CRILET_KUBE_NODE_KUBECONFIG_DIR/kubeconfig-$node" --hostname-override "$node" \
    --node-ip 127.0.0.1 --cgroup-root /crilet-order --root-dir "$W/root" \
    --pod-logs-dir "$W/pod-logs" --container-logs-dir "$W/containers" \
    --socket "$W/crilet.sock" >"$W/crilet.$1.log" 2>&1 &
  PID=$!
  eval "$2"
  kill -TERM "$PID"
  wait "$PID" 2>/dev/null || true
  PID=""
}
scrape() { # what a cluster reads of a node: its stats and metrics, and the authenticated port
  local path
  for path in /stats/summary /metrics /metrics/resource /pods /healthz; do
    curl -s -o /dev/null "http://127.0.0.1:$READ_ONLY_PORT$path" || true
  done
  curl -sk -o /dev/null "https://127.0.0.1:$PORT/healthz" || true
}
all_up() { # every manifest's sandbox ready
  local t0 up want
  t0=$(date +%s) want=$(ls "$W/manifests" | wc -l)
  while :; do
    kill -0 "$PID" 2>/dev/null || { tail -20 "$W"/crilet.*.log >&2; die "crilet exited"; }
    up=$("$crictl" -r "unix://$sock" pods -q --state ready 2>/dev/null | wc -l)
    [ "$up" -ge "$want" ] && break
    [ $(($(date +%s) - t0)) -lt 900 ] || die "$up of $want sandboxes ready after 900 s"
    sleep 5
  done
}
say "a first life under callgrind: start-up, $(ls "$W/manifests" | wc -l) pods started, $IDLE s idle"
life start 'all_up; sleep "$IDLE"
  scrape
  for cmd in pods stats "logs plain-1-$node"; do
    "$W/crilet" $cmd --socket "$W/crilet.sock" >/dev/null 2>&1 || true
  done'
say "a second life: the running pods adopted, 30 s idle, half the manifests removed"
life adopt 'all_up; sleep 30; rm -f "$W/manifests"/plain-* "$W/manifests/crash.yaml"; sleep 60'
mkdir -p "$ROOT/build"
python3 -B "$ROOT/scripts/text_order.py" /crilet "$W/crilet.map" "$W"/callgrind.start "$W"/callgrind.adopt \
  >"$ROOT/build/text-order.txt"
say "wrote build/text-order.txt ($(wc -l <"$ROOT/build/text-order.txt") functions)"
