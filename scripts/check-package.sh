#!/usr/bin/env bash
# Builds the .deb (scripts/package.sh) and checks what an operator installs:
#   - the release binary needs nothing beyond glibc, libgcc_s and libm (ldd);
#   - the package's fields (Recommends: containerd | cri-o, Depends from
#     dpkg-shlibdeps, and glibc 2.36 when the binary's relocations are
#     packed), its files and its conffile;
#   - installed with `dpkg --root` into a scratch root: the installed
#     `crilet --version` names this checkout's commit, the man pages render,
#     the bash completion loads, `systemd-analyze verify` passes on the unit
#     without a word, an edited config survives a reinstall, and a purge
#     leaves nothing behind.
# Prints the binary's size and the package's. Usage: scripts/check-package.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

DEB=$(bash "$ROOT/scripts/package.sh")
BIN=$CARGO_TARGET_DIR/release/crilet
fail() { die "package check: $*"; }

# Shared libraries: glibc's (libc, libm, the loader), libgcc_s and the vDSO.
bad=$(ldd "$BIN" | awk '{print $1}' | grep -Ev '^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|/lib64/ld-linux-x86-64\.so\.2|ld-linux-x86-64\.so\.2)$' || true)
[ -z "$bad" ] || fail "the binary needs more than glibc, libgcc_s and libm: $bad"

field() { dpkg-deb -f "$DEB" "$1"; }
[ "$(field Package)" = crilet ] || fail "Package: $(field Package)"
# The crate's version with Debian revision 1.
VERSION=$(cargo metadata --no-deps --format-version 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["packages"][0]["version"])')
[ "$(field Version)" = "$VERSION-1" ] || fail "Version: $(field Version), not $VERSION-1"
[ "$(field Recommends)" = "containerd | cri-o" ] || fail "Recommends: $(field Recommends)"
field Depends | grep -q 'libc6' || fail "Depends lacks libc6: $(field Depends)"
# Packed relocations (DT_RELR) need a loader of glibc 2.36 or later, which
# dpkg-shlibdeps does not derive from the binary's version needs.
if readelf -V "$BIN" | grep -q GLIBC_ABI_DT_RELR; then
  field Depends | grep -qF 'libc6 (>= 2.36)' || fail "the binary's relocations are packed (glibc 2.36), but Depends says: $(field Depends)"
fi
CONTENTS=$(dpkg-deb -c "$DEB" | awk '{print $6}')
for path in ./usr/bin/crilet ./lib/systemd/system/crilet.service ./etc/crilet/config.yaml \
  ./usr/share/man/man1/crilet.1.gz ./usr/share/man/man1/crilet-run.1.gz \
  ./usr/share/bash-completion/completions/crilet ./usr/share/zsh/vendor-completions/_crilet \
  ./usr/share/fish/vendor_completions.d/crilet.fish; do
  grep -qx -- "$path" <<<"$CONTENTS" || fail "$path is not in the package"
done
dpkg-deb -I "$DEB" conffiles | grep -qx /etc/crilet/config.yaml || fail "/etc/crilet/config.yaml is not a conffile"

R=$(mktemp -d /tmp/crilet-pkgroot.XXXX)
trap 'rm -rf "$R"' EXIT
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates"
touch "$R/var/lib/dpkg/status"
# --force-depends: the scratch root has no libc6 package of its own.
# Its complaints about that, and about the host's targets lent below, are
# shown only when dpkg fails.
inst() {
  local out
  out=$(dpkg --root="$R" --log=/dev/null --force-depends "$@" 2>&1) || fail "dpkg --root $*: $out"
}
inst -i "$DEB"
want="crilet $VERSION (commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown))"
got=$("$R/usr/bin/crilet" --version)
[ "$got" = "$want" ] || fail "installed crilet --version says '$got', not '$want'"
MANWIDTH=120 man -P cat -l "$R/usr/share/man/man1/crilet-run.1.gz" 2>/dev/null | grep -q -- '--pod-manifest-path' \
  || fail "crilet-run(1) does not render with --pod-manifest-path"
bash -c "source '$R/usr/share/bash-completion/completions/crilet' && complete -p crilet" >/dev/null \
  || fail "the bash completion does not register for crilet"
# systemd-analyze resolves After=/WantedBy= targets in the root: lend it the
# host's targets (and runtimes' units, where installed).
cp -a /lib/systemd/system/*.target "$R/lib/systemd/system/"
for u in containerd.service crio.service; do
  [ -e "/lib/systemd/system/$u" ] && cp -a "/lib/systemd/system/$u" "$R/lib/systemd/system/"
done
out=$(systemd-analyze verify --man=no --root="$R" crilet.service 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify warns: $out"
unit=$R/lib/systemd/system/crilet.service
for line in Type=notify Restart=always KillMode=process \
  'ExecStart=/usr/bin/crilet run --config=/etc/crilet/config.yaml $CRILET_ARGS'; do
  grep -qxF -- "$line" "$unit" || fail "the unit lacks '$line'"
done
grep -qE '^After=.*containerd\.service.*crio\.service' "$unit" || fail "the unit does not start after containerd and CRI-O"
echo "# edited by the operator" >>"$R/etc/crilet/config.yaml"
inst -i "$DEB"
grep -q "edited by the operator" "$R/etc/crilet/config.yaml" || fail "a reinstall replaced the edited conffile"
inst --purge crilet
left=$(cd "$R" && find usr etc -type f 2>/dev/null | grep crilet || true)
[ -z "$left" ] || fail "the purge left: $left"
say "package ok: $(basename "$DEB") $(du -k "$DEB" | cut -f1) KiB; binary $(stat -c %s "$BIN") bytes ($(awk "BEGIN{printf \"%.1f\", $(stat -c %s "$BIN")/1048576}") MiB), needs $(ldd "$BIN" | awk '{print $1}' | tr '\n' ' ')"
