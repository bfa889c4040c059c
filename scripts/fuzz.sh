#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for SECONDS each (default 60), one
# after the other, each in one process (libFuzzer's default: no -jobs or
# -workers), and prints each target's execution count and the total.
#   scripts/fuzz.sh [SECONDS]
# Needs the nightly toolchain; installs cargo-fuzz when missing.
# The committed seeds (fuzz/corpus/<target>) are only read: what the fuzzer
# finds goes to a scratch corpus, $CRILET_FUZZ_DIR/<target> (default
# /tmp/crilet-fuzz), kept between runs. A crash, timeout or OOM leaves its
# input in fuzz/artifacts/<target>/ and makes the script exit 1 after the
# other targets ran. To keep one as a regression, fix the bug, then copy it
# to fuzz/regressions/<target>/: `cargo test --lib fuzzing` replays those
# and the seeds.
# Environment: CRILET_FUZZ_DIR, CRILET_FUZZ_TARGETS (default: all).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT/fuzz"
need_toolchain
# fuzz/ is a workspace of its own (nightly, sanitizers): its own directory
# under the shared target dir, so it neither rebuilds nor locks the main one.
export CARGO_TARGET_DIR=$CARGO_TARGET_DIR/fuzz

SECS=${1:-60}
[[ $SECS =~ ^[0-9]+$ && $SECS -gt 0 ]] || die "SECONDS must be a positive integer, not '$SECS'"
SCRATCH=${CRILET_FUZZ_DIR:-/tmp/crilet-fuzz}
mkdir -p "$SCRATCH"
# Two runs on one scratch directory would share its logs (and the counts).
exec 9>"$SCRATCH/.lock"
flock -n 9 || die "another scripts/fuzz.sh is running on $SCRATCH"

cargo +nightly --version >/dev/null 2>&1 || die "no nightly toolchain: rustup toolchain install nightly"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  say "installing cargo-fuzz"
  env -u CARGO_TARGET_DIR cargo install cargo-fuzz --locked
fi

read -r -a TARGETS <<<"${CRILET_FUZZ_TARGETS:-$(cargo +nightly fuzz list | tr '\n' ' ')}"
say "building ${#TARGETS[@]} targets: ${TARGETS[*]}"
cargo +nightly fuzz build

declare -A RUNS
failed=()
total=0
for t in "${TARGETS[@]}"; do
  mkdir -p "$SCRATCH/$t" "artifacts/$t"
  log="$SCRATCH/$t.log"
  say "$t: ${SECS}s"
  # New inputs go to the first corpus directory, the scratch one.
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: 1 GiB is an OOM.
  rc=0
  cargo +nightly fuzz run "$t" "$SCRATCH/$t" "corpus/$t" -- \
    -max_total_time="$SECS" -timeout=10 -rss_limit_mb=1024 -max_len=16384 \
    -print_final_stats=1 >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  runs=${runs:-0}
  RUNS[$t]=$runs
  total=$((total + runs))
  if ((rc != 0)); then
    failed+=("$t")
    say "$t FAILED (exit $rc); log: $log"
    grep -E '^(==[0-9]+==|SUMMARY|artifact_prefix|Test unit written|thread .* panicked)' "$log" | head -n 20 >&2 || true
  fi
done

echo
printf '%-20s %15s\n' target executions
for t in "${TARGETS[@]}"; do
  printf '%-20s %15s\n' "$t" "${RUNS[$t]}"
done
printf '%-20s %15s\n' total "$total"
if ((${#failed[@]})); then
  die "crashes, timeouts or OOMs in: ${failed[*]} (inputs under fuzz/artifacts/)"
fi
