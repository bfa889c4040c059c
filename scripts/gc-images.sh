#!/usr/bin/env bash
# gc-images.sh — build single-layer OCI image archives of known sizes for the
# image-GC tests, offline: each layer is one file of random bytes, stored
# uncompressed so the image's size is the layer's size plus a few KiB.
#
# Usage: gc-images.sh OUT_DIR NAME:MIB [NAME:MIB ...]
#   writes OUT_DIR/NAME.tar (an OCI layout archive) whose image is named
#   crilet.test/gc/NAME:1; an existing archive of the same size is kept.
#   Import with: ctr -a SOCK -n k8s.io images import --platform linux/amd64 OUT_DIR/NAME.tar
# Needs jq, tar, sha256sum (containerd-up.sh installs them).
set -euo pipefail

[ $# -ge 2 ] || { echo "usage: $0 OUT_DIR NAME:MIB..." >&2; exit 2; }
OUT=$1; shift
mkdir -p "$OUT"
SDE=1704067200

put() { # file layout -> digest hex (file moved into the layout's blobs)
  local d; d=$(sha256sum "$1" | cut -d' ' -f1)
  mkdir -p "$2/blobs/sha256"
  mv -f "$1" "$2/blobs/sha256/$d"
  echo "$d"
}

for spec in "$@"; do
  name=${spec%%:*}; mib=${spec#*:}
  [ -f "$OUT/$name.tar" ] && [ "$(cat "$OUT/$name.mib" 2>/dev/null)" = "$mib exec" ] && continue
  tmp=$(mktemp -d "$OUT/.build-$name.XXXX")
  layout=$tmp/layout
  mkdir -p "$tmp/rootfs" "$layout"
  head -c "$((mib * 1024 * 1024))" /dev/urandom >"$tmp/rootfs/data-$name"
  chmod 0755 "$tmp/rootfs/data-$name"   # runc create (CRI-O) checks the command can run
  tar --sort=name --mtime=@$SDE --owner=0 --group=0 --numeric-owner --format=gnu \
      -C "$tmp/rootfs" -cf "$tmp/layer.tar" .
  lsize=$(stat -c %s "$tmp/layer.tar")
  ldig=$(put "$tmp/layer.tar" "$layout")
  jq -cn --arg diff "sha256:$ldig" --arg cmd "/data-$name" '{
      created: "2024-01-01T00:00:00Z", architecture: "amd64", os: "linux",
      config: { Cmd: [ $cmd ] },
      rootfs: { type: "layers", diff_ids: [ $diff ] } }' | tr -d '\n' >"$tmp/config.json"
  csize=$(stat -c %s "$tmp/config.json")
  cdig=$(put "$tmp/config.json" "$layout")
  jq -cn --arg c "sha256:$cdig" --argjson cs "$csize" --arg l "sha256:$ldig" --argjson ls "$lsize" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs },
      layers: [ { mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $l, size: $ls } ]
    }' | tr -d '\n' >"$tmp/manifest.json"
  msize=$(stat -c %s "$tmp/manifest.json")
  mdig=$(put "$tmp/manifest.json" "$layout")
  jq -n --arg m "sha256:$mdig" --argjson ms "$msize" --arg ref "crilet.test/gc/$name:1" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: [ { mediaType: "application/vnd.oci.image.manifest.v1+json",
                     digest: $m, size: $ms,
                     platform: { architecture: "amd64", os: "linux" },
                     annotations: { "io.containerd.image.name": $ref,
                                    "org.opencontainers.image.ref.name": "1" } } ]
    }' >"$layout/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
  tar --format=gnu -C "$layout" -cf "$OUT/$name.tar" oci-layout index.json blobs
  echo "sha256:$cdig" >"$OUT/$name.id"
  echo "$mib exec" >"$OUT/$name.mib"   # "exec": the data file is executable
  rm -rf "$tmp"
done
