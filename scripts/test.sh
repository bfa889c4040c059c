#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this):
#   1. cargo fmt --check, clippy with warnings denied, the layering check,
#      the docs' relative links, cargo doc with warnings denied, unit tests
#      (and the scripts' Python tests), the integration tests that need no
#      runtime (once: they do not depend on it);
#   2. then, side by side, each writing to a file of its own in $TIMES that
#      is printed whole when it ends:
#      - the .deb built from this checkout and checked in a scratch root
#        (scripts/check-package.sh);
#      - the integration binary's #[ignore]d tests, those that need a
#        runtime, once per CRI runtime, the three passes at once:
#        containerd 1.6 (apt-get), containerd 2.1 and CRI-O 1.32
#        (../shared/bin, started by ../shared/lab through scripts/runtime.sh),
#        each with private instances (own root, state, socket, bridge, CIDR
#        and cgroup root), its own real kube-apiserver 1.32
#        (scripts/apiserver-env.sh) for the tests that check what a real API
#        server decides, and the loopback registry on 127.0.0.1:5000;
#      - the churn-and-kill soak (scripts/soak.sh), CRILET_SOAK_MINUTES long
#        (default 2), against a containerd 1.6 of its own;
#   3. then the differential harness (parity/, scripts/parity-env.sh): the
#      corpus under the real kubelet v1.32.13 and under crilet, compared,
#      on containerd 1.6 and CRI-O 1.32 side by side (CRILET_PARITY_RUNTIMES);
#   4. the short fleet run (scripts/fleet.sh 50 5, goals checked): 50
#      hollow nodes on an API server and controller manager of their own;
#   5. every instance and API server stopped and everything they left
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
say "the scripts' own unit tests (python3 -m unittest: the soak's invariants, the api_requests and fleet benches' counting, the slowest-tests report)"
python3 -B -m unittest discover -s "$ROOT/scripts" -p '*_test.py'
# The integration tests that are not #[ignore]d need no runtime and no API
# server (bad endpoints, the API server double's own tests, manifest
# parsing against a local server): the same in every pass, so they run once
# here, without the per-runtime variables; the runtime passes below run the
# #[ignore]d ones only.
say "integration tests that need no runtime (once)"
timed_test integration-no-runtime --test integration --
say "the parity harness's own tests (normalizing, comparing, the accepted list; no runtime)"
timed_test parity-no-runtime --test parity --
# Everything from here on runs side by side: the package check (a release
# build, mostly one core for minutes), the runtime passes (mostly waiting on
# runtimes, back-offs and outage windows) and the soak. Each writes its
# output to a file in $TIMES, printed whole when it ends. The apt-get and
# cargo installs they need happen first, one at a time.
need_packaging_tools
need_log_shipper
JOBS=() JOB_NAMES=()
job() { # NAME COMMAND...: runs in the background, output to $TIMES/NAME.log
  local name=$1
  shift
  ("$@") >"$TIMES/$name.log" 2>&1 &
  JOBS+=($!) JOB_NAMES+=("$name")
}
say "the Debian package: build, install into a scratch root, check (scripts/check-package.sh; in the background, niced)"
job package nice -n 10 bash "$ROOT/scripts/check-package.sh"

# The integration binary's #[ignore]d tests run once per runtime: Debian's
# containerd 1.6, containerd 2.1 and CRI-O 1.32 from ../shared
# (CRILET_TEST_RUNTIMES picks some), all three at once. Each pass gets its
# own kube-apiserver (own etcd, ports and state dir, so the passes' tests
# can claim the same node names) and three private runtime instances: one
# for the CRI tests, one for the agent tests (an agent owns every
# kubelet-labelled pod on its runtime, and sweeps the pod cgroups under its
# cgroup root it does not know, so no two instances share a root) and one
# for image/container GC, whose image store is a small loop-mounted ext4 the
# tests fill up. The containerd 1.6 CRI instance also serves the loopback
# registry (127.0.0.1:5000) every runtime pulls from.
RUNTIMES=${CRILET_TEST_RUNTIMES:-containerd1 containerd2 crio}
RT="$ROOT/scripts/runtime.sh"
# The operator's crictl (not packaged for Debian 12): from ../shared/bin.
CRILET_CRICTL=$(bash "$ROOT/../shared/lab/bin.sh" crictl) || die "no crictl: ../shared/lab/bin.sh crictl failed"
export CRILET_CRICTL
CRILET_KUBECTL=$(bash "$ROOT/../shared/lab/bin.sh" kubectl) || die "no kubectl: ../shared/lab/bin.sh kubectl failed"
export CRILET_KUBECTL
export CTRLAB_REGISTRY_ADDR=127.0.0.1:5000
UP_NOW=() APISERVERS=() PARITY_UP=()
instances() { # KIND -> "dir bridge cidr cgroup-root" for cri, agent and gc
  case "$1" in
    containerd1) echo "$STATE crilettest0 10.89.0.0/16 crilet-test
${CRILET_AGENT_TEST_DIR:-/tmp/crilet-agent-test} crilettest1 10.92.0.0/16 crilet-agent-test
${CRILET_GC_TEST_DIR:-/tmp/crilet-gc-test} crilettest3 10.94.0.0/16 crilet-gc-test" ;;
    containerd2) echo "/tmp/crilet-c2-test crilettest10 10.101.0.0/16 crilet-c2-test
/tmp/crilet-c2-agent crilettest11 10.102.0.0/16 crilet-c2-agent
/tmp/crilet-c2-gc crilettest12 10.103.0.0/16 crilet-c2-gc" ;;
    crio) echo "/tmp/crilet-crio-test crilettest13 10.104.0.0/16 crilet-crio-test
/tmp/crilet-crio-agent crilettest14 10.105.0.0/16 crilet-crio-agent
/tmp/crilet-crio-gc crilettest15 10.106.0.0/16 crilet-crio-gc" ;;
    *) die "unknown runtime '$1' in CRILET_TEST_RUNTIMES" ;;
  esac
}
apiserver_of() { # KIND -> "state-dir port etcd-port" of its pass's API server
  case "$1" in
    containerd1) echo "/tmp/crilet-apiserver-test 16443 12379" ;;
    containerd2) echo "/tmp/crilet-apiserver-c2 16444 12381" ;;
    crio) echo "/tmp/crilet-apiserver-crio 16445 12383" ;;
  esac
}
# A runtime's own log (crio.log, containerd.log) is in its state dir, which
# the cleanup purges: each is copied to $TIMES/runtime-<dir>.log first, so a
# failure can be read after the run (a runtime that died mid-pass, say).
keep_runtime_log() { # DIR: prints the kept file's path, if it had a log
  local log kept=$TIMES/runtime-$(basename "$1").log
  log=$(runtime_log_of "$1") || return 0
  cp -f "$log" "$kept" && echo "$kept"
}
show_runtime_logs() { # KIND: the tail of each of its instances' logs, and where the whole is
  local dir kept
  while read -r dir _; do
    kept=$(keep_runtime_log "$dir")
    [ -n "$kept" ] || continue
    say "[$1] the last 40 lines of the runtime's log in $dir (whole: $kept):"
    tail -n 40 "$kept" >&2
  done < <(instances "$1")
}
cleanup() {
  local rc=$? entry pid
  for pid in "${JOBS[@]}"; do pkill -TERM -P "$pid" 2>/dev/null || true; kill -- "$pid" 2>/dev/null || true; done
  say "stopping the private runtimes and the API servers (their logs kept in $TIMES/runtime-*.log and $TIMES/parity-*.log)"
  for entry in "${UP_NOW[@]}"; do
    keep_runtime_log "${entry#* }" >/dev/null || true
    bash "$RT" down "${entry%% *}" "${entry#* }" --purge >/dev/null 2>&1 || say "could not stop $entry"
  done
  for entry in "${PARITY_UP[@]}"; do
    bash "$ROOT/scripts/parity-env.sh" keep-logs "$entry" "$TIMES" || say "could not keep the parity logs of $entry"
    bash "$ROOT/scripts/parity-env.sh" down "$entry" >/dev/null 2>&1 || say "could not stop the parity instance of $entry"
  done
  for entry in "${APISERVERS[@]}"; do
    CRILET_KUBE_TEST_DIR=$entry bash "$ROOT/scripts/apiserver-env.sh" down >/dev/null 2>&1 ||
      say "could not stop the API server in $entry"
  done
  exit $rc
}
trap cleanup EXIT
up() { # KIND DIR BRIDGE CIDR CGROUP_ROOT [options]: the socket goes to $SOCKET
  # (not to stdout: a $(...) subshell would lose UP_NOW, and the cleanup with it)
  local kind=$1 dir=$2
  UP_NOW+=("$kind $dir")
  SOCKET=$(CTRLAB_BRIDGE=$3 CTRLAB_POD_CIDR=$4 CTRLAB_CGROUP_ROOT=$5 bash "$RT" up "$kind" "$dir" "${@:6}")
}

# The test binary, built once (the no-runtime pass above built it), run
# directly by each pass: three `cargo test` at once would wait on one
# another's lock of the target dir.
INTEGRATION=$(cargo test --test integration --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "integration":
        print(m["executable"])')
[ -x "$INTEGRATION" ] || die "no integration test binary (cargo test --test integration --no-run)"

mount_lingering_cgroups
say "starting containerd 1.6 with the loopback registry in $STATE"
up containerd1 "$STATE" crilettest0 10.89.0.0/16 crilet-test --registry
SOCK=$SOCKET
for kind in $RUNTIMES; do
  mapfile -t I < <(instances "$kind")
  read -r CRI_DIR CRI_BR CRI_CIDR CRI_CG <<<"${I[0]}"
  read -r AGENT_DIR AGENT_BR AGENT_CIDR AGENT_CG <<<"${I[1]}"
  read -r GC_DIR GC_BR GC_CIDR GC_CG <<<"${I[2]}"
  read -r API_DIR API_PORT API_ETCD <<<"$(apiserver_of "$kind")"
  say "[$kind] starting its kube-apiserver (scripts/apiserver-env.sh, port $API_PORT) and the CRI, agent and GC instances"
  APISERVERS+=("$API_DIR")
  KUBE_ENV=$(CRILET_KUBE_TEST_DIR=$API_DIR CRILET_KUBE_TEST_PORT=$API_PORT \
    CRILET_KUBE_TEST_ETCD_PORT=$API_ETCD bash "$ROOT/scripts/apiserver-env.sh" up)
  if [ "$kind" = containerd1 ]; then CRI_SOCK=$SOCK; else
    up "$kind" "$CRI_DIR" "$CRI_BR" "$CRI_CIDR" "$CRI_CG"; CRI_SOCK=$SOCKET; fi
  up "$kind" "$AGENT_DIR" "$AGENT_BR" "$AGENT_CIDR" "$AGENT_CG"; AGENT_SOCK=$SOCKET
  up "$kind" "$GC_DIR" "$GC_BR" "$GC_CIDR" "$GC_CG" --root-fs loop:512M; GC_SOCK=$SOCKET
  say "[$kind] integration tests that need a runtime (#[ignore]d) against unix://$CRI_SOCK, unix://$AGENT_SOCK and unix://$GC_SOCK (in the background)"
  job "integration-$kind" env $(sed -n 's/^export //p' <<<"$KUBE_ENV") \
    CRILET_TEST_RUNTIME="$kind" \
    CRILET_TEST_ENDPOINT="unix://$CRI_SOCK" CRILET_TEST_POD_CIDR="$CRI_CIDR" \
    CRILET_TEST_CGROUP_ROOT="$CRI_CG" \
    CRILET_AGENT_TEST_ENDPOINT="unix://$AGENT_SOCK" CRILET_AGENT_TEST_DIR="$AGENT_DIR" \
    CRILET_AGENT_TEST_BRIDGE="$AGENT_BR" CRILET_AGENT_TEST_POD_CIDR="$AGENT_CIDR" \
    CRILET_AGENT_TEST_CGROUP_ROOT="$AGENT_CG" \
    CRILET_GC_TEST_ENDPOINT="unix://$GC_SOCK" CRILET_GC_TEST_DIR="$GC_DIR" \
    CRILET_GC_TEST_CGROUP_ROOT="$GC_CG" \
    RUSTC_BOOTSTRAP=1 "$INTEGRATION" --ignored -Z unstable-options --report-time
done

# The soak brings up (and purges) its own containerd 1.6, on a bridge, CIDR,
# cgroup root and directory no other instance here uses.
# It runs the debug crilet the integration tests ran (CARGO_BIN_EXE_crilet,
# which cargo links to $CARGO_TARGET_DIR/debug/crilet): its own
# `cargo build --bin crilet` would build a second debug crilet, and again 34
# of its dependencies, whose features differ without the dev-dependencies
# (tokio's test-util, hyper's server), about two minutes here for the same code.
say "churn-and-kill soak, ${CRILET_SOAK_MINUTES:-2} minute(s) (scripts/soak.sh; in the background)"
job soak env SOAK_CRILET="$CARGO_TARGET_DIR/debug/crilet" \
  SOAK_DIR=/tmp/crilet-soak SOAK_BRIDGE=crilettest16 SOAK_POD_CIDR=10.107.0.0/16 \
  SOAK_CGROUP_ROOT=crilet-soak SOAK_ARGS="--churn-seconds 20" \
  bash "$ROOT/scripts/soak.sh" "${CRILET_SOAK_MINUTES:-2}"

# The long-lived soak's 2-minute version: one crilet never killed, 30
# probed pods with churn, a crash loop and a flapping probe on containerd
# 2.1; fails on growth of its descriptors or tasks, or of its RSS by more
# than 1 MiB, after 45 s (bash scripts/bench.sh runs the 30-minute one on
# every runtime).
say "long-lived soak, 2 minutes (scripts/soak.sh --long; in the background)"
job soak-long env SOAK_CRILET="$CARGO_TARGET_DIR/debug/crilet" \
  SOAK_DIR=/tmp/crilet-soak-long SOAK_BRIDGE=crilettest17 SOAK_POD_CIDR=10.108.0.0/16 \
  SOAK_CGROUP_ROOT=crilet-soak-long SOAK_RUNTIME=containerd2 \
  SOAK_LONG_ARGS="--pods 30 --warmup-minutes 0.75 --churn-seconds 30" \
  bash "$ROOT/scripts/soak.sh" --long 2

# Wait for each, in the order started, and print what it wrote.
failed=()
t0=$(date +%s)
for i in "${!JOBS[@]}"; do
  name=${JOB_NAMES[$i]} rc=0
  wait "${JOBS[$i]}" || rc=$?
  say "[$name] ended with status $rc after $(( $(date +%s) - t0 )) s of waiting; its output ($TIMES/$name.log):"
  cat "$TIMES/$name.log" >&2
  case $name in integration-*)
    python3 -B "$ROOT/scripts/slowest_tests.py" --title "[$name]" "$TIMES/$name.log" >&2 || true
    [ "$rc" = 0 ] || show_runtime_logs "${name#integration-}" ;;
  esac
  [ "$rc" = 0 ] || failed+=("$name")
done
JOBS=() JOB_NAMES=()
[ ${#failed[@]} = 0 ] || die "failed: ${failed[*]} (their output is above and in $TIMES)"

# The differential harness (parity/): the corpus under the real kubelet
# v1.32.13 and under crilet, one agent at a time, on a runtime instance of
# its own (scripts/parity-env.sh), with the pass's API server; once the
# passes above are done, so the two agents' runs share the machine with
# nothing else but each other. containerd 1.6 and CRI-O 1.32 by default
# (CRILET_PARITY_RUNTIMES; `scripts/bench.sh parity` adds containerd 2.1).
# Then, on the same instance, a node moved from the kubelet to crilet and
# back (parity/takeover.rs). Each run's captures, report and both agents' logs stay in
# /tmp/crilet-parity-run-<runtime> (parity-env.sh down removes them at the
# end: a failed run's report is printed whole first).
PARITY=$(cargo test --test parity --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "parity":
        print(m["executable"])')
[ -x "$PARITY" ] || die "no parity test binary (cargo test --test parity --no-run)"
for kind in ${CRILET_PARITY_RUNTIMES:-containerd1 crio}; do
  [[ " $RUNTIMES " == *" $kind "* ]] || { say "[parity-$kind] skipped: no $kind pass ran (CRILET_TEST_RUNTIMES)"; continue; }
  read -r API_DIR API_PORT API_ETCD <<<"$(apiserver_of "$kind")"
  KUBE_ENV=$(CRILET_KUBE_TEST_DIR=$API_DIR CRILET_KUBE_TEST_PORT=$API_PORT \
    CRILET_KUBE_TEST_ETCD_PORT=$API_ETCD bash "$ROOT/scripts/apiserver-env.sh" up)
  PARITY_UP+=("$kind")
  PARITY_ENV=$(bash "$ROOT/scripts/parity-env.sh" up "$kind")
  say "[parity-$kind] the kubelet and crilet over parity/corpus, then the takeover, on $kind (in the background)"
  job "parity-$kind" env $(sed -n 's/^export //p' <<<"$KUBE_ENV") $(sed -n 's/^export //p' <<<"$PARITY_ENV") \
    "$PARITY" --ignored --exact --test-threads 1 kubelet_and_crilet_agree_over_the_corpus \
    takeover::crilet_takes_the_node_over_from_the_kubelet_and_hands_it_back --nocapture
done
for i in "${!JOBS[@]}"; do
  name=${JOB_NAMES[$i]} rc=0
  wait "${JOBS[$i]}" || rc=$?
  say "[$name] ended with status $rc; its output ($TIMES/$name.log):"
  cat "$TIMES/$name.log" >&2
  [ "$rc" = 0 ] || failed+=("$name")
done
JOBS=()
[ ${#failed[@]} = 0 ] || die "failed: ${failed[*]} (their output is above and in $TIMES)"

# The short fleet run: 50 hollow nodes x 5 pods (`crilet hollow`, the
# release binary) on a kube-apiserver, etcd and controller manager of its
# own, through start, a steady window, and the API server killed and back
# after 60 s; each goal checked (scripts/fleet.sh). Alone, last: its
# figures are the API server's, which nothing else should load.
say "short fleet run: 50 hollow nodes x 5 pods (scripts/fleet.sh, goals checked)"
FLEET_CHECK=1 FLEET_WARMUP=60 FLEET_WINDOW=120 FLEET_OUTAGE=60 FLEET_SETTLE=60 \
  bash "$ROOT/scripts/fleet.sh" 50 5 >"$TIMES/fleet.log" 2>&1 || {
  cat "$TIMES/fleet.log" >&2
  die "the short fleet run failed (its output: $TIMES/fleet.log; its logs: /tmp/crilet-fleet.logs)"
}
grep '^fleet:' "$TIMES/fleet.log" >&2
say "all passed"
