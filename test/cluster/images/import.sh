#!/usr/bin/env bash
# Imports every image archive that build.sh made into containerd's k8s.io namespace (the one
# the kubelet's CRI uses), skipping images already there with the same manifest digest.
#
#   import.sh <containerd-address>      e.g. import.sh /run/containerd/containerd.sock
#
# Set CODEMODE_SNAPSHOTTER to unpack into a snapshotter other than ctr's default (overlayfs);
# it must match the CRI plugin's snapshotter.
set -euo pipefail

CACHE="${CODEMODE_CACHE:-$HOME/.cache/codemode}"
OUT="$CACHE/images"
LOG="$OUT/logs/import.log"

fail() {
  printf '[images] FAILED: %s See %s\n' "$1" "$LOG" >&2
  exit 1
}

[[ $# -eq 1 && -n "$1" ]] || { printf 'usage: %s <containerd-address>\n' "$0" >&2; exit 2; }
ADDR="$1"
[[ -S "$ADDR" ]] || { printf '[images] FAILED: %s is not a containerd socket (is containerd running?).\n' "$ADDR" >&2; exit 1; }
mkdir -p "$OUT/logs"
: > "$LOG"

ctr_() { ctr -a "$ADDR" -n k8s.io "$@"; }

shopt -s nullglob
archives=("$OUT"/*.oci.tar)
(( ${#archives[@]} )) || { printf '[images] FAILED: no image archives in %s; run build.sh first.\n' "$OUT" >&2; exit 1; }

ctr_ version >>"$LOG" 2>&1 || fail "ctr cannot talk to containerd at $ADDR."

snap=()
[[ -n "${CODEMODE_SNAPSHOTTER:-}" ]] && snap=(--snapshotter "$CODEMODE_SNAPSHOTTER")

for archive in "${archives[@]}"; do
  # The ref and manifest digest of the archive, from its index.json.
  read -r ref digest < <(tar -xOf "$archive" index.json | python3 -c '
import json, sys
m = json.load(sys.stdin)["manifests"][0]
print(m["annotations"]["io.containerd.image.name"], m["digest"])') \
    || fail "$archive is not an OCI archive made by build.sh."
  have="$(ctr_ images ls "name==$ref" 2>>"$LOG" | awk -v r="$ref" '$1 == r { print $3 }')"
  stale=""
  [[ -f "$archive.failed" ]] && stale=" WARNING: stale, the last build.sh of this image failed"
  if [[ "$have" == "$digest" ]]; then
    printf '[images] %s: already present (%s)%s\n' "$ref" "$digest" "$stale"
    continue
  fi
  printf '== import %s (%s)\n' "$archive" "$ref" >>"$LOG"
  ctr_ images import "${snap[@]}" "$archive" >>"$LOG" 2>&1 || fail "Importing $archive into $ADDR failed."
  have="$(ctr_ images ls "name==$ref" 2>>"$LOG" | awk -v r="$ref" '$1 == r { print $3 }')"
  [[ "$have" == "$digest" ]] || fail "After importing $archive, containerd has $ref at '${have:-nothing}', not $digest."
  printf '[images] %s: imported (%s)%s\n' "$ref" "$digest" "$stale"
done
