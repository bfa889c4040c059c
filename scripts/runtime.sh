#!/usr/bin/env bash
# runtime.sh — one front for the three CRI runtimes crilet is tested on.
#
# Usage:
#   runtime.sh up   KIND STATE_DIR [--registry] [--root-fs loop:SIZE]
#   runtime.sh down KIND STATE_DIR [--keep-pods | --purge]
#   runtime.sh stop KIND STATE_DIR         (the daemon only: pods keep running)
#   runtime.sh restart KIND STATE_DIR      (stop, then up again)
#   KIND: containerd1 (Debian's containerd 1.6, scripts/containerd-up.sh),
#         containerd2 (containerd 2.1) or crio (CRI-O 1.32), both from
#         ../shared/lab and ../shared/bin (apt-get has neither).
# `up` prints the CRI socket path (the only stdout line).
#
# The instance's settings (CTRLAB_BRIDGE, CTRLAB_POD_CIDR, CTRLAB_CGROUP_ROOT,
# CTRLAB_REGISTRY_ADDR, CTRLAB_STATS_PERIOD) are taken from the environment
# at the first `up` and kept in STATE_DIR/.crilet-runtime-env, so a later
# `up`, `stop`, `restart` or `down` (from a test, say) brings back the same
# bridge, CIDR and cgroup root without being told.
#
# --root-fs loop:SIZE puts the runtime's image store on a loop-mounted ext4
# of that size (the GC tests fill it up). containerd-up.sh does that itself;
# for the lab runtimes the mount is made on STATE_DIR/root, where both keep
# their images, before their up script runs.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
LAB=$(cd "$ROOT/.." && pwd)/shared/lab

[ $# -ge 3 ] || die "usage: runtime.sh up|down|stop|restart KIND STATE_DIR [options]"
CMD=$1 KIND=$2 S=$3; shift 3
case "$KIND" in
  containerd1) UP=$ROOT/scripts/containerd-up.sh DOWN=$ROOT/scripts/containerd-down.sh ;;
  containerd2) UP=$LAB/containerd2-up.sh DOWN=$LAB/containerd2-down.sh ;;
  crio) UP=$LAB/crio-up.sh DOWN=$LAB/crio-down.sh ;;
  *) die "unknown runtime kind '$KIND' (containerd1, containerd2 or crio)" ;;
esac
[ -f "$UP" ] || die "$UP is missing (the lab scripts live in ../shared/lab)"

ENVFILE=$S/.crilet-runtime-env
VARS=(CTRLAB_BRIDGE CTRLAB_POD_CIDR CTRLAB_CGROUP_ROOT CTRLAB_REGISTRY_ADDR CTRLAB_STATS_PERIOD)
remember() {
  mkdir -p "$S"
  : >"$ENVFILE"
  for v in "${VARS[@]}"; do
    [ -n "${!v:-}" ] && printf 'export %s=%q\n' "$v" "${!v}" >>"$ENVFILE"
  done
  return 0
}
recall() { # what the environment does not set comes from the first up
  local line v
  [ -f "$ENVFILE" ] || return 0
  while read -r line; do
    v=${line#export }; v=${v%%=*}
    [ -n "${!v:-}" ] || eval "$line"
  done <"$ENVFILE"
}

root_fs() { # SPEC: mount a loop ext4 on STATE_DIR/root for the lab runtimes
  local size=${1#loop:}
  [ "${1%%:*}" = loop ] || die "--root-fs wants loop:SIZE"
  mountpoint -q "$S/root" && return 0
  mkdir -p "$S/root"
  [ -z "$(ls -A "$S/root")" ] || die "$S/root is not empty; run runtime.sh down $KIND $S --purge first"
  command -v mkfs.ext4 >/dev/null || apt-get install -y --no-install-recommends e2fsprogs >/dev/null
  rm -f "$S/rootfs.img"
  truncate -s "$size" "$S/rootfs.img"
  mkfs.ext4 -q -F -m 0 "$S/rootfs.img"
  mount -o loop "$S/rootfs.img" "$S/root"
}

# Runs the up script (with "$@"); a lab runtime's once more if it fails.
# The lab's up scripts write the daemon's PID file from the shell that then
# execs the daemon, and read a PID whose command is still "bash" as a daemon
# that died: under load they give up on a daemon that is only starting
# ("socket ... does not answer"). A second run finds it running and goes on.
up_once_more() {
  if [ "$KIND" = containerd1 ]; then bash "$UP" "$S" "$@"; return; fi
  bash "$UP" "$S" "$@" && return 0
  say "$KIND in $S did not answer at once; running its up script once more"
  sleep 3
  bash "$UP" "$S" "$@"
}

case "$CMD" in
  up)
    ARGS=() ROOTFS=""
    while [ $# -gt 0 ]; do
      case "$1" in
        --registry) ARGS+=(--registry) ;;
        --root-fs) ROOTFS=$2; shift ;;
        *) die "unknown option $1" ;;
      esac
      shift
    done
    recall
    remember
    if [ -n "$ROOTFS" ]; then
      if [ "$KIND" = containerd1 ]; then ARGS+=(--root-fs "$ROOTFS"); else root_fs "$ROOTFS"; fi
    fi
    up_once_more "${ARGS[@]}"
    ;;
  down)
    recall
    bash "$DOWN" "$S" "$@"
    # The lab scripts unmount a loop root lazily; the image file goes with STATE_DIR.
    ;;
  stop)
    recall
    bash "$DOWN" "$S" --keep-pods
    ;;
  restart)
    recall
    bash "$DOWN" "$S" --keep-pods >&2
    up_once_more >/dev/null
    ;;
  *) die "unknown command '$CMD' (up, down, stop or restart)" ;;
esac
