# Shared by crilet's scripts: tool checks and the private containerd's
# settings. Sourced, not run.

export PATH="$HOME/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# One cargo target directory for every script and every clone: outside the
# checkout, so that a fresh clone (CI's) reuses what an earlier run built
# and only compiles what changed. Override with CARGO_TARGET_DIR; a missing
# directory is made by cargo, so a cold machine builds from nothing.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/crilet-target}

say() { echo "[crilet $(date +%H:%M:%S)] $*" >&2; }
die() { echo "[crilet] ERROR: $*" >&2; exit 1; }
# The log a runtime instance writes in its state dir DIR (crio.log or
# containerd.log, as scripts/runtime.sh starts them): prints its path, or
# fails when there is none.
runtime_log_of() {
  local f
  for f in "$1/crio.log" "$1/containerd.log"; do
    [ -f "$f" ] && echo "$f" && return 0
  done
  return 1
}

[ "$(id -u)" = 0 ] || die "run as root: the private containerd needs it"

# The Rust toolchain is the one thing the machine must bring (no toolchain
# can be downloaded here); a C linker comes from apt-get when missing.
need_toolchain() {
  command -v cargo >/dev/null || die "cargo not found: install the Rust toolchain (rustup) first"
  if ! command -v cc >/dev/null; then
    say "apt-get install gcc libc6-dev (the linker rustc needs)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends gcc libc6-dev >/dev/null 2>&1 || {
      apt-get update >/dev/null
      apt-get install -y --no-install-recommends gcc libc6-dev >/dev/null
    }
  fi
}

# cargo-deb (crates.io) builds the .deb, with dpkg-shlibdeps (dpkg-dev) for
# its Depends; systemd-analyze (systemd) and man (man-db) check what it
# installs. Installed when missing; none of them is started.
CARGO_DEB_VERSION=3.8.0
need_packaging_tools() {
  local pkgs=()
  command -v dpkg-shlibdeps >/dev/null || pkgs+=(dpkg-dev)
  command -v systemd-analyze >/dev/null || pkgs+=(systemd)
  command -v man >/dev/null || pkgs+=(man-db)
  command -v gzip >/dev/null || pkgs+=(gzip)
  if [ ${#pkgs[@]} -gt 0 ]; then
    say "apt-get install ${pkgs[*]} (packaging and its checks)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${pkgs[@]}" >/dev/null 2>&1 || {
      apt-get update >/dev/null
      apt-get install -y --no-install-recommends "${pkgs[@]}" >/dev/null
    }
  fi
  if ! cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
    say "cargo install cargo-deb $CARGO_DEB_VERSION"
    # In cargo's own scratch directory (removed afterwards), not crilet's.
    env -u CARGO_TARGET_DIR cargo install --quiet --locked cargo-deb --version "$CARGO_DEB_VERSION" >&2
  fi
}

# rsyslog, the log shipper of the integration test that tails crilet's
# container log symlinks (integration/log_shipper.rs starts a private
# rsyslogd in the foreground and stops it by PID). Installed when missing,
# never started: Debian's postinst starts the system rsyslogd through
# invoke-rc.d (or deb-systemd-invoke), which a policy-rc.d that exits 101
# forbids. One is put in place for the install unless the machine has one,
# and any rsyslogd the install started anyway is stopped, by PID.
need_log_shipper() {
  command -v rsyslogd >/dev/null && return 0
  say "apt-get install rsyslog (the log shipper test; not started)"
  local policy=/usr/sbin/policy-rc.d ours= before after pid
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# crilet scripts/lib.sh: no service starts during this install\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    ours=1
  fi
  before=$(pidof rsyslogd || true)
  export DEBIAN_FRONTEND=noninteractive
  local rc=0
  { apt-get install -y --no-install-recommends rsyslog >/dev/null 2>&1 || {
      apt-get update >/dev/null
      apt-get install -y --no-install-recommends rsyslog >/dev/null
    }; } || rc=$?
  [ -n "$ours" ] && rm -f "$policy"
  after=$(pidof rsyslogd || true)
  for pid in $after; do
    case " $before " in *" $pid "*) ;; *) say "stopping the rsyslogd the install started (pid $pid)"; kill "$pid" ;; esac
  done
  return $rc
}

# A cgroup v1 controller listed in /proc/self/cgroup but mounted nowhere: a
# hierarchy whose mount was undone (the kernel keeps it alive; an older
# scripts/parity-env.sh unmounted hugetlb so). containerd's cgroup v1
# library then cannot load any container's cgroup, and ContainerStats and
# ListPodSandboxStats carry no CPU or memory for any container on the host.
# Each such controller is mounted back on /sys/fs/cgroup/<controller>.
mount_lingering_cgroups() {
  [ -f /sys/fs/cgroup/cgroup.controllers ] && return 0 # cgroup v2 only
  local c
  for c in $(awk -F: '$2 != "" && $2 !~ /^name=/ {print $2}' /proc/self/cgroup | tr ',' ' '); do
    awk -v c="$c" '$(NF-2) == "cgroup" && ("," $NF ",") ~ ("," c ",") {found = 1} END {exit !found}' \
      /proc/self/mountinfo && continue
    say "the cgroup v1 controller $c is in use but mounted nowhere; mounting it on /sys/fs/cgroup/$c"
    mkdir -p "/sys/fs/cgroup/$c" && mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" ||
      die "could not mount the cgroup controller $c on /sys/fs/cgroup/$c"
  done
}
