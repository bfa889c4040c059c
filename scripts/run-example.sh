#!/usr/bin/env bash
# The main job on a fresh machine: build crilet, bring up a private
# containerd with locally built images (no network), and run crilet on the
# example static pods in examples/static-pods. Shows what the runtime then
# holds (as crictl pods / crictl ps would) and fetches the web pod's page.
# crilet and containerd keep running afterwards; the script prints how to
# look at them and how to stop both.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
need_toolchain

STATE=${CRILET_EXAMPLE_DIR:-/tmp/crilet-example}
export CTRLAB_BRIDGE=criletex0 CTRLAB_POD_CIDR=10.91.0.0/16 CTRLAB_CGROUP_ROOT=crilet
say "building crilet"
cargo build --release --quiet
CRILET=$CARGO_TARGET_DIR/release/crilet
SOCK=$(bash scripts/containerd-up.sh "$STATE")
EP="unix://$SOCK"

# One agent per runtime: stop the one an earlier run of this script started.
if [ -f "$STATE/crilet.pid" ] && kill -0 "$(cat "$STATE/crilet.pid")" 2>/dev/null; then
  kill -TERM "$(cat "$STATE/crilet.pid")"; sleep 1
fi
say "crilet run --pod-manifest-path examples/static-pods (log: $STATE/crilet.log)"
setsid "$CRILET" run \
  --container-runtime-endpoint "$EP" \
  --pod-manifest-path "$ROOT/examples/static-pods" \
  --root-dir "$STATE/crilet-root" \
  --pod-logs-dir "$STATE/pod-logs" --container-logs-dir "$STATE/containers" \
  --cgroup-root /crilet \
  --socket "$STATE/crilet.sock" --stats-period 2s --http-address 127.0.0.1:10255 \
  </dev/null >>"$STATE/crilet.log" 2>&1 &
echo $! >"$STATE/crilet.pid"

say "waiting for the example pods (their app containers httpd and main)"
running_apps() {
  "$CRILET" runtime-info --container-runtime-endpoint "$EP" -o json 2>/dev/null |
    jq '[.containers[] | select(.state == "Running" and (.name == "httpd" or .name == "main"))] | length' ||
    echo 0
}
for _ in $(seq 150); do
  [ "$(running_apps)" -ge 2 ] && break
  sleep 0.2
done
"$CRILET" runtime-info --container-runtime-endpoint "$EP"
echo
say "GET http://127.0.0.1:8080/ (the web pod, on the node's network):"
busybox wget -qO- http://127.0.0.1:8080/ || true
echo
# Two stats samples give CPU rates; the period is 2 s here (10 s by default).
sleep 4.5
say "crilet pods / crilet stats (the agent's own API, on $STATE/crilet.sock):"
"$CRILET" pods --socket "$STATE/crilet.sock"
echo
"$CRILET" stats --socket "$STATE/crilet.sock"
cat >&2 <<MSG

Look around:
  tail -f $STATE/crilet.log                       # one line per decision
  ls $STATE/pod-logs/                             # container logs, <ns>_<name>_<uid>/<container>/<n>.log
  ls -l $STATE/containers/                        # their symlinks, <pod>_<ns>_<container>-<id>.log
                                                  # (by default /var/log/pods and /var/log/containers)
  $CRILET runtime-info --container-runtime-endpoint $EP
  $CRILET pods --socket $STATE/crilet.sock          # or stats, summary; -o json|yaml
  grpcurl -plaintext -unix $STATE/crilet.sock list                # if grpcurl is installed
  busybox wget -qO- http://127.0.0.1:10255/stats/summary          # the kubelet Summary API JSON
  crictl --runtime-endpoint $EP pods              # if crictl is installed
Edit or remove a file in examples/static-pods/ and crilet follows within a second.
Stop everything:
  kill \$(cat $STATE/crilet.pid)                  # crilet stops; pods keep running, as with the kubelet
  bash scripts/containerd-down.sh $STATE --purge  # containerd, its pods and its files
MSG
