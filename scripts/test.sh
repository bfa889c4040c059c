#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this):
#   1. cargo fmt --check, clippy with warnings denied, the layering check,
#      cargo doc with warnings denied, unit tests;
#   2. a private containerd (own root, state, socket, bridge, registry on
#      127.0.0.1:5000) brought up by scripts/containerd-up.sh, installing
#      containerd, runc, CNI plugins and busybox-static with apt-get if needed;
#   3. the integration binary against it, including the #[ignore]d tests
#      that need a runtime; then, alone, the tests that restart the agent
#      tests' runtime (`restarts_runtime` in their names);
#   4. containerd stopped and everything it left removed, pass or fail.
# Environment: CRILET_TEST_DIR (default /tmp/crilet-test).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
need_toolchain

STATE=${CRILET_TEST_DIR:-/tmp/crilet-test}
# Own bridge, CIDR and cgroup root, so a developer's other instance is untouched.
export CTRLAB_BRIDGE=crilettest0 CTRLAB_POD_CIDR=10.89.0.0/16 CTRLAB_CGROUP_ROOT=crilet-test
# containerd refreshes image-fs and snapshot usage this often (seconds).
export CTRLAB_STATS_PERIOD=1

say "cargo fmt --check"
cargo fmt --all -- --check
say "cargo clippy --all-targets -D warnings"
cargo clippy --all-targets --quiet -- -D warnings
say "layering (scripts/check-layers.sh)"
bash "$ROOT/scripts/check-layers.sh"
say "cargo doc (warnings denied: broken intra-doc links)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
say "unit tests"
cargo test --lib --bins

# Two private containerds: the CRI tests create kubelet-labelled pods, and an
# agent owns every such pod on its runtime, so the agent tests get their own.
AGENT_STATE=${CRILET_AGENT_TEST_DIR:-/tmp/crilet-agent-test}
# A third one for image/container GC: its root is a small loop-mounted ext4
# that the tests fill up.
GC_STATE=${CRILET_GC_TEST_DIR:-/tmp/crilet-gc-test}
cleanup() {
  local rc=$?
  say "stopping the private containerds"
  CTRLAB_BRIDGE=crilettest1 CTRLAB_CGROUP_ROOT=crilet-agent-test \
    bash "$ROOT/scripts/containerd-down.sh" "$AGENT_STATE" --purge || true
  CTRLAB_BRIDGE=crilettest3 CTRLAB_CGROUP_ROOT=crilet-gc-test \
    bash "$ROOT/scripts/containerd-down.sh" "$GC_STATE" --purge || true
  bash "$ROOT/scripts/containerd-down.sh" "$STATE" --purge || true
  exit $rc
}
trap cleanup EXIT
say "starting the private containerd in $STATE"
SOCK=$(bash "$ROOT/scripts/containerd-up.sh" "$STATE" --registry)
say "starting the agent tests' containerd in $AGENT_STATE"
AGENT_SOCK=$(CTRLAB_BRIDGE=crilettest1 CTRLAB_POD_CIDR=10.92.0.0/16 \
  bash "$ROOT/scripts/containerd-up.sh" "$AGENT_STATE")
say "starting the GC tests' containerd in $GC_STATE (root on a 512 MiB loop fs)"
GC_SOCK=$(CTRLAB_BRIDGE=crilettest3 CTRLAB_POD_CIDR=10.94.0.0/16 CTRLAB_CGROUP_ROOT=crilet-gc-test \
  bash "$ROOT/scripts/containerd-up.sh" "$GC_STATE" --root-fs loop:512M)

say "integration tests against unix://$SOCK and unix://$AGENT_SOCK"
CRILET_TEST_ENDPOINT="unix://$SOCK" CRILET_TEST_POD_CIDR="$CTRLAB_POD_CIDR" \
  CRILET_AGENT_TEST_ENDPOINT="unix://$AGENT_SOCK" CRILET_AGENT_TEST_DIR="$AGENT_STATE" \
  CRILET_AGENT_TEST_BRIDGE=crilettest1 CRILET_AGENT_TEST_POD_CIDR=10.92.0.0/16 \
  CRILET_GC_TEST_ENDPOINT="unix://$GC_SOCK" CRILET_GC_TEST_DIR="$GC_STATE" \
  cargo test --test integration -- --include-ignored --skip restarts_runtime

# Tests that restart the agent tests' runtime run alone, after the others.
say "integration tests that restart the runtime (restarts_runtime)"
AGENT_ENV="CTRLAB_BRIDGE=crilettest1 CTRLAB_POD_CIDR=10.92.0.0/16 CTRLAB_CGROUP_ROOT=crilet-agent-test"
CRILET_TEST_RUNTIME_RESTART="$AGENT_ENV bash $ROOT/scripts/containerd-down.sh $AGENT_STATE --keep-pods && $AGENT_ENV bash $ROOT/scripts/containerd-up.sh $AGENT_STATE" \
  CRILET_AGENT_TEST_ENDPOINT="unix://$AGENT_SOCK" CRILET_AGENT_TEST_DIR="$AGENT_STATE" \
  cargo test --test integration restarts_runtime -- --include-ignored
