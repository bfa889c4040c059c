#!/usr/bin/env bash
# Builds crilet's Debian package: the release binary, its man pages
# (`crilet man --out-dir`, gzipped) and completions (`crilet completion`) into
# $CARGO_TARGET_DIR/release/pkg (scripts/lib.sh), then `cargo deb --no-build` (assets and fields in
# Cargo.toml's [package.metadata.deb]). Prints the .deb's path (the only
# stdout line). Installs cargo-deb and dpkg-dev when missing.
# Usage: scripts/package.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
need_toolchain
need_packaging_tools

T=$CARGO_TARGET_DIR
say "cargo build --release (the profile in Cargo.toml: LTO, one codegen unit, stripped)"
cargo build --release --locked --quiet
BIN=$T/release/crilet
PKG=$T/release/pkg
rm -rf "$PKG" && mkdir -p "$PKG/man" "$PKG/completions"
"$BIN" man --out-dir "$PKG/man" >/dev/null
gzip -9n "$PKG"/man/*.1
"$BIN" completion bash >"$PKG/completions/crilet.bash"
"$BIN" completion zsh >"$PKG/completions/_crilet"
"$BIN" completion fish >"$PKG/completions/crilet.fish"
OUT=$T/debian
rm -rf "$OUT"
say "cargo deb --no-build"
cargo deb --no-build --quiet --output "$OUT/" >&2
DEB=$(ls "$OUT"/crilet_*.deb)
[ -f "$DEB" ] || die "cargo deb wrote no package in $OUT"
echo "$DEB"
