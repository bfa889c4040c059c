#!/usr/bin/env bash
# soak.sh [MINUTES] — the churn-and-kill soak (default 10 minutes).
# soak.sh --long [MINUTES] — the long-lived soak (default 30 minutes):
#   scripts/soak_long.py, one release crilet never killed, 100 probed pods
#   (a crash loop, a flapping probe, a tenth of the manifests edited each
#   minute), its RSS, descriptors, threads and live tasks sampled every
#   10 s; fails on growth after the warm-up (5 min). SOAK_RUNTIME picks the
#   runtime, SOAK_LONG_ARGS adds soak_long.py options (e.g. "--pods 30
#   --warmup-minutes 0.75" for the test command's 2-minute version).
#
# Starts its own containerd 1.6 (scripts/runtime.sh, images imported from
# the lab's offline OCI layouts: no registry needed), builds crilet (debug)
# and runs scripts/soak.py: 30 manifests added, edited and removed every
# 200 ms, crilet killed with -9 and restarted every 5-20 s, containerd
# killed with -9 and restarted every 60 s; after each quiet period the
# invariants of scripts/soak_check.py are checked. Exits non-zero on any
# violation, printing each. Everything it started is stopped and removed on
# exit, pass or fail (by PID); on failure crilet's and containerd's logs are
# kept in $SOAK_DIR.logs.
#
# Environment (defaults in brackets):
#   SOAK_DIR [/tmp/crilet-soak]  the runtime in $SOAK_DIR/rt, crilet's
#                                manifests and root dir in $SOAK_DIR/agent
#   SOAK_BRIDGE [crilettest16]  SOAK_POD_CIDR [10.107.0.0/16]
#   SOAK_CGROUP_ROOT [crilet-soak]
#   SOAK_CRILET   a crilet binary to use instead of building one
#   CRILET_CRICTL crictl (default: ../shared/lab/bin.sh crictl)
#   SOAK_SEED     replay a run's random choices (the seed is printed)
#   SOAK_ARGS     more soak.py options, e.g. "--churn-seconds 20"
#   SOAK_RUNTIME [containerd1]  containerd1, containerd2 or crio (--long;
#                 the churn-and-kill soak restarts containerd 1.6 only)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

LONG=0
if [ "${1:-}" = --long ]; then LONG=1; shift; fi
MINUTES=${1:-$([ $LONG = 1 ] && echo 30 || echo 10)}
[[ "$MINUTES" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "usage: soak.sh [--long] [MINUTES]"
KIND=${SOAK_RUNTIME:-containerd1}
case $KIND in containerd1) ;; containerd2|crio) [ $LONG = 1 ] || die "the churn-and-kill soak runs on containerd1 only (SOAK_RUNTIME=$KIND)" ;;
  *) die "unknown SOAK_RUNTIME '$KIND'" ;; esac
DIR=${SOAK_DIR:-/tmp/crilet-soak}
RT_DIR=$DIR/rt AGENT_DIR=$DIR/agent
export CTRLAB_BRIDGE=${SOAK_BRIDGE:-crilettest16}
export CTRLAB_POD_CIDR=${SOAK_POD_CIDR:-10.107.0.0/16}
export CTRLAB_CGROUP_ROOT=${SOAK_CGROUP_ROOT:-crilet-soak}
RT="$ROOT/scripts/runtime.sh"

command -v python3 >/dev/null || {
  say "apt-get install python3"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 >/dev/null
}
# crictl from ../shared/bin, unless test.sh (or the caller) names one.
say "the soaks' own tests (scripts/soak_check_test.py, scripts/soak_long_test.py)"
for t in soak_check_test.py soak_long_test.py; do
  out=$(python3 -B -m unittest discover -s "$ROOT/scripts" -p "$t" 2>&1) ||
    { echo "$out" >&2; die "scripts/$t failed"; }
done
CRICTL=${CRILET_CRICTL:-$(bash "$ROOT/../shared/lab/bin.sh" crictl)} || die "no crictl: ../shared/lab/bin.sh crictl failed"
if [ -n "${SOAK_CRILET:-}" ]; then
  CRILET=$SOAK_CRILET
else
  need_toolchain
  if [ $LONG = 1 ]; then
    say "cargo build --release --bin crilet"
    cargo build --quiet --release --bin crilet
    CRILET=$CARGO_TARGET_DIR/release/crilet
  else
    say "cargo build --bin crilet (debug)"
    cargo build --quiet --bin crilet
    CRILET=$CARGO_TARGET_DIR/debug/crilet
  fi
fi
[ -x "$CRILET" ] || die "no crilet binary at $CRILET"

SOAK_PID=""
cleanup() {
  local rc=$? pid
  trap - EXIT INT TERM
  # soak.py kills its crilet when told to stop; the pid file covers a kill -9.
  if [ -n "$SOAK_PID" ] && kill -0 "$SOAK_PID" 2>/dev/null; then
    kill -TERM "$SOAK_PID" 2>/dev/null || true
    wait "$SOAK_PID" 2>/dev/null || true
  fi
  pid=$(cat "$AGENT_DIR/crilet.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = crilet ]; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  if [ "$rc" != 0 ]; then
    mkdir -p "$DIR.logs"
    cp -f "$AGENT_DIR/crilet.log" $(runtime_log_of "$RT_DIR") "$DIR.logs/" 2>/dev/null || true
    say "soak failed ($rc): crilet's and the runtime's logs are in $DIR.logs"
  fi
  bash "$RT" down "$KIND" "$RT_DIR" --purge >/dev/null 2>&1 || say "could not stop the soak's containerd in $RT_DIR"
  rm -rf "$AGENT_DIR"
  rmdir "$DIR" 2>/dev/null || true
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A previous run that was killed hard may have left its instance behind.
bash "$RT" down "$KIND" "$RT_DIR" --purge >/dev/null 2>&1 || true
rm -rf "$AGENT_DIR"
mkdir -p "$AGENT_DIR"
say "starting $KIND in $RT_DIR (bridge $CTRLAB_BRIDGE, $CTRLAB_POD_CIDR, cgroup root $CTRLAB_CGROUP_ROOT)"
SOCKET=$(bash "$RT" up "$KIND" "$RT_DIR")
if [ $LONG = 1 ]; then
  say "long-lived soak for $MINUTES minute(s) against unix://$SOCKET"
  # shellcheck disable=SC2086 # SOAK_LONG_ARGS is a list of options
  python3 -B "$ROOT/scripts/soak_long.py" --minutes "$MINUTES" --dir "$AGENT_DIR" --socket "$SOCKET" \
    --crilet "$CRILET" --crictl "$CRICTL" --cgroup-root "$CTRLAB_CGROUP_ROOT" \
    ${SOAK_SEED:+--seed "$SOAK_SEED"} ${SOAK_LONG_ARGS:-} &
  SOAK_PID=$!
  wait "$SOAK_PID"
  exit 0
fi
say "soak for $MINUTES minute(s) against unix://$SOCKET"
# shellcheck disable=SC2086 # SOAK_ARGS is a list of options
python3 -B "$ROOT/scripts/soak.py" --minutes "$MINUTES" --dir "$AGENT_DIR" --socket "$SOCKET" \
  --runtime-dir "$RT_DIR" --runtime-script "$RT" --crilet "$CRILET" --crictl "$CRICTL" \
  --cgroup-root "$CTRLAB_CGROUP_ROOT" ${SOAK_SEED:+--seed "$SOAK_SEED"} ${SOAK_ARGS:-} &
# In the background, so that a TERM or INT reaches the cleanup at once.
SOAK_PID=$!
wait "$SOAK_PID"
