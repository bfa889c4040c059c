#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this):
#   1. cargo fmt --check, clippy with warnings denied, the layering check,
#      cargo doc with warnings denied, unit tests (and the scripts' Python
#      tests), the integration tests that need no runtime (once: they do not
#      depend on it); the .deb built from this
#      checkout and checked in a scratch root (scripts/check-package.sh);
#   2. the integration binary's #[ignore]d tests, those that need a
#      runtime, once per CRI runtime: containerd 1.6 (apt-get), containerd 2.1
#      and CRI-O 1.32 (../shared/bin, started by ../shared/lab through
#      scripts/runtime.sh), each with private instances (own root, state,
#      socket, bridge, CIDR and cgroup root) and the loopback registry on
#      127.0.0.1:5000;
#   3. the tests that check what a real API server decides run against the
#      real kube-apiserver 1.32 (scripts/apiserver-env.sh) in each pass;
#   4. the churn-and-kill soak (scripts/soak.sh), CRILET_SOAK_MINUTES long
#      (default 2), against a containerd 1.6 of its own;
#   5. every instance and the API server stopped and everything they left
#      removed, pass or fail.
# Each cargo test pass ends with its five slowest tests and their times.
# Environment: CRILET_TEST_DIR (default /tmp/crilet-test), CRILET_TEST_RUNTIMES
# (default "containerd1 containerd2 crio"), CRILET_SOAK_MINUTES (default 2),
# CARGO_TARGET_DIR (default /var/tmp/crilet-target, scripts/lib.sh: shared
# by every clone, so a second run builds only what changed),
# CRILET_TEST_TIMES_DIR (default /tmp/crilet-test-times: each pass's output).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
need_toolchain

STATE=${CRILET_TEST_DIR:-/tmp/crilet-test}
# containerd refreshes image-fs and snapshot usage this often (seconds).
export CTRLAB_STATS_PERIOD=1

say "cargo fmt --check"
cargo fmt --all -- --check
say "cargo clippy --all-targets -D warnings"
cargo clippy --all-targets --quiet -- -D warnings
say "layering (scripts/check-layers.sh)"
bash "$ROOT/scripts/check-layers.sh"
say "docs: relative links in README.md and docs/ (scripts/check-docs.py)"
python3 -B "$ROOT/scripts/check-docs.py"
say "cargo doc (warnings denied: broken intra-doc links)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet

# Per-test times: libtest's --report-time ("test NAME ... ok <1.2s>"). It is
# unstable, so the test binary (and only it: through a cargo runner, which
# is not part of what cargo compiles, so nothing is rebuilt or built
# differently) gets RUSTC_BOOTSTRAP=1. cargo-nextest would time tests too,
# but it runs each test in a process of its own, and the integration tests
# serialise on process-wide locks (AGENT_LOCK, GC_LOCK) and share OnceLock
# fixtures. Each pass's output is kept in $TIMES.
TIMES=${CRILET_TEST_TIMES_DIR:-/tmp/crilet-test-times}
mkdir -p "$TIMES"
timed_test() { # PASS CARGO-TEST-ARGS... (ending in libtest's arguments after --)
  local pass=$1 rc=0
  shift
  cargo test --config "target.'cfg(all())'.runner = ['env', 'RUSTC_BOOTSTRAP=1']" \
    "$@" -Z unstable-options --report-time 2>&1 | tee "$TIMES/$pass.log" || rc=$?
  python3 -B "$ROOT/scripts/slowest_tests.py" --title "[$pass]" "$TIMES/$pass.log" >&2 || true
  return $rc
}

say "unit tests"
timed_test units --lib --bins --
say "the scripts' own unit tests (python3 -m unittest: the soak's invariants, the api_requests bench's counting, the slowest-tests report)"
python3 -B -m unittest discover -s "$ROOT/scripts" -p '*_test.py'
# The integration tests that are not #[ignore]d need no runtime and no API
# server (bad endpoints, the API server double's own tests, manifest
# parsing against a local server): the same in every pass, so they run once
# here, without the per-runtime variables; the runtime passes below run the
# #[ignore]d ones only.
say "integration tests that need no runtime (once)"
timed_test integration-no-runtime --test integration --
say "the Debian package: build, install into a scratch root, check (scripts/check-package.sh)"
bash "$ROOT/scripts/check-package.sh"

# The integration suite runs once per runtime: Debian's containerd 1.6, then
# containerd 2.1 and CRI-O 1.32 from ../shared (CRILET_TEST_RUNTIMES picks
# some). Each run gets three private instances: one for the CRI tests, one
# for the agent tests (an agent owns every kubelet-labelled pod on its
# runtime) and one for image/container GC, whose image store is a small
# loop-mounted ext4 the tests fill up. The containerd 1.6 CRI instance also
# serves the loopback registry (127.0.0.1:5000) every runtime pulls from,
# so it stays up for the whole run.
RUNTIMES=${CRILET_TEST_RUNTIMES:-containerd1 containerd2 crio}
RT="$ROOT/scripts/runtime.sh"
# The operator's crictl (not packaged for Debian 12): from ../shared/bin.
CRILET_CRICTL=$(bash "$ROOT/../shared/lab/bin.sh" crictl) || die "no crictl: ../shared/lab/bin.sh crictl failed"
export CRILET_CRICTL
CRILET_KUBECTL=$(bash "$ROOT/../shared/lab/bin.sh" kubectl) || die "no kubectl: ../shared/lab/bin.sh kubectl failed"
export CRILET_KUBECTL
export CTRLAB_REGISTRY_ADDR=127.0.0.1:5000
UP_NOW=()
instances() { # KIND -> "dir bridge cidr cgroup-root" for cri, agent and gc
  case "$1" in
    containerd1) echo "$STATE crilettest0 10.89.0.0/16 crilet-test
${CRILET_AGENT_TEST_DIR:-/tmp/crilet-agent-test} crilettest1 10.92.0.0/16 crilet-agent-test
${CRILET_GC_TEST_DIR:-/tmp/crilet-gc-test} crilettest3 10.94.0.0/16 crilet-gc-test" ;;
    containerd2) echo "/tmp/crilet-c2-test crilettest10 10.101.0.0/16 crilet-test
/tmp/crilet-c2-agent crilettest11 10.102.0.0/16 crilet-agent-test
/tmp/crilet-c2-gc crilettest12 10.103.0.0/16 crilet-gc-test" ;;
    crio) echo "/tmp/crilet-crio-test crilettest13 10.104.0.0/16 crilet-test
/tmp/crilet-crio-agent crilettest14 10.105.0.0/16 crilet-agent-test
/tmp/crilet-crio-gc crilettest15 10.106.0.0/16 crilet-gc-test" ;;
    *) die "unknown runtime '$1' in CRILET_TEST_RUNTIMES" ;;
  esac
}
down_all() {
  local entry kind dir
  for entry in "${UP_NOW[@]}"; do
    kind=${entry%% *} dir=${entry#* }
    bash "$RT" down "$kind" "$dir" --purge >/dev/null 2>&1 || say "could not stop $kind in $dir"
  done
  UP_NOW=()
}
cleanup() {
  local rc=$?
  say "stopping the private runtimes and the API server"
  down_all
  bash "$ROOT/scripts/apiserver-env.sh" down >/dev/null 2>&1 || say "could not stop the API server"
  exit $rc
}
trap cleanup EXIT
up() { # KIND DIR BRIDGE CIDR CGROUP_ROOT [options]: the socket goes to $SOCKET
  # (not to stdout: a $(...) subshell would lose UP_NOW, and the cleanup with it)
  local kind=$1 dir=$2
  UP_NOW+=("$kind $dir")
  SOCKET=$(CTRLAB_BRIDGE=$3 CTRLAB_POD_CIDR=$4 CTRLAB_CGROUP_ROOT=$5 bash "$RT" up "$kind" "$dir" "${@:6}")
}

say "starting the real kube-apiserver (scripts/apiserver-env.sh)"
eval "$(bash "$ROOT/scripts/apiserver-env.sh" up)"
say "starting containerd 1.6 with the loopback registry in $STATE"
up containerd1 "$STATE" crilettest0 10.89.0.0/16 crilet-test --registry
SOCK=$SOCKET
REGISTRY_UP=("${UP_NOW[@]}")
for kind in $RUNTIMES; do
  mapfile -t I < <(instances "$kind")
  read -r CRI_DIR CRI_BR CRI_CIDR CRI_CG <<<"${I[0]}"
  read -r AGENT_DIR AGENT_BR AGENT_CIDR AGENT_CG <<<"${I[1]}"
  read -r GC_DIR GC_BR GC_CIDR GC_CG <<<"${I[2]}"
  say "[$kind] starting the CRI, agent and GC instances"
  if [ "$kind" = containerd1 ]; then CRI_SOCK=$SOCK; else
    up "$kind" "$CRI_DIR" "$CRI_BR" "$CRI_CIDR" "$CRI_CG"; CRI_SOCK=$SOCKET; fi
  up "$kind" "$AGENT_DIR" "$AGENT_BR" "$AGENT_CIDR" "$AGENT_CG"; AGENT_SOCK=$SOCKET
  up "$kind" "$GC_DIR" "$GC_BR" "$GC_CIDR" "$GC_CG" --root-fs loop:512M; GC_SOCK=$SOCKET
  say "[$kind] integration tests that need a runtime (#[ignore]d) against unix://$CRI_SOCK, unix://$AGENT_SOCK and unix://$GC_SOCK"
  t0=$(date +%s)
  CRILET_TEST_RUNTIME=$kind \
    CRILET_TEST_ENDPOINT="unix://$CRI_SOCK" CRILET_TEST_POD_CIDR="$CRI_CIDR" \
    CRILET_AGENT_TEST_ENDPOINT="unix://$AGENT_SOCK" CRILET_AGENT_TEST_DIR="$AGENT_DIR" \
    CRILET_AGENT_TEST_BRIDGE="$AGENT_BR" CRILET_AGENT_TEST_POD_CIDR="$AGENT_CIDR" \
    CRILET_GC_TEST_ENDPOINT="unix://$GC_SOCK" CRILET_GC_TEST_DIR="$GC_DIR" \
    timed_test "integration-$kind" --test integration -- --ignored
  say "[$kind] integration tests passed in $(( $(date +%s) - t0 )) s"
  # Keep only the registry's containerd between runtimes.
  keep=()
  for entry in "${UP_NOW[@]}"; do
    if [ "$entry" = "${REGISTRY_UP[0]}" ]; then keep+=("$entry"); continue; fi
    bash "$RT" down "${entry%% *}" "${entry#* }" --purge >/dev/null 2>&1 || say "could not stop $entry"
  done
  UP_NOW=("${keep[@]}")
done

# The soak brings up (and purges) its own containerd 1.6, on a bridge, CIDR,
# cgroup root and directory no other instance here uses.
say "churn-and-kill soak, ${CRILET_SOAK_MINUTES:-2} minute(s) (scripts/soak.sh)"
# It runs the debug crilet the integration tests ran (CARGO_BIN_EXE_crilet,
# which cargo links to $CARGO_TARGET_DIR/debug/crilet): its own
# `cargo build --bin crilet` would build a second debug crilet, and again 34
# of its dependencies, whose features differ without the dev-dependencies
# (tokio's test-util, hyper's server), about two minutes here for the same code.
SOAK_CRILET=$CARGO_TARGET_DIR/debug/crilet \
  SOAK_DIR=/tmp/crilet-soak SOAK_BRIDGE=crilettest16 SOAK_POD_CIDR=10.107.0.0/16 \
  SOAK_CGROUP_ROOT=crilet-soak SOAK_ARGS="--churn-seconds 20" \
  bash "$ROOT/scripts/soak.sh" "${CRILET_SOAK_MINUTES:-2}"
