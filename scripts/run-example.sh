#!/usr/bin/env bash
# The main job on a fresh machine: build crilet, bring up a private
# containerd with locally built images (no network), and show what crilet
# sees of it with `crilet runtime-info`.
# containerd keeps running afterwards; stop it with
#   bash scripts/containerd-down.sh /tmp/crilet-example --purge
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
need_toolchain

STATE=${CRILET_EXAMPLE_DIR:-/tmp/crilet-example}
export CTRLAB_BRIDGE=criletex0 CTRLAB_POD_CIDR=10.91.0.0/16 CTRLAB_CGROUP_ROOT=crilet
say "building crilet"
cargo build --release --quiet
SOCK=$(bash scripts/containerd-up.sh "$STATE")
say "crilet runtime-info --container-runtime-endpoint unix://$SOCK"
./target/release/crilet runtime-info --container-runtime-endpoint "unix://$SOCK"
say "containerd is still running; stop it with: bash scripts/containerd-down.sh $STATE --purge"
