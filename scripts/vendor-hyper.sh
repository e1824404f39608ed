#!/usr/bin/env bash
# Rebuilds vendor/hyper from the published crate and vendor/hyper.patch, or
# with --check, says whether vendor/hyper is exactly that (exit 1 if not).
#
# The published crate is fetched from crates.io and checked against the
# checksum hyper had in Cargo.lock before it was patched. To move to a newer
# hyper: set VERSION and SHA256 to its release, run this script, mend the
# patch if it no longer applies, and run the paced bench (bench/paced.sh)
# to see that the connection buffers are still what vendor/README.md says.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=1.12.0
SHA256=2c3e324da4c95177d6291d4c8730197c0d1822f8a9766814a4a44fa5ab797c9c
CHECK=0
[[ "${1:-}" == --check ]] && CHECK=1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 3 -o "$tmp/hyper.crate" "https://static.crates.io/crates/hyper/hyper-$VERSION.crate"
echo "$SHA256  $tmp/hyper.crate" | sha256sum -c --quiet -
tar -xzf "$tmp/hyper.crate" -C "$tmp"
src="$tmp/hyper-$VERSION"
rm -f "$src/.cargo-ok"
patch -s -d "$src" -p1 < vendor/hyper.patch

if ((CHECK)); then
  if diff -r "$src" vendor/hyper >/dev/null; then
    echo "vendor/hyper is hyper $VERSION with vendor/hyper.patch"
  else
    echo "vendor/hyper differs from hyper $VERSION with vendor/hyper.patch:" >&2
    diff -r "$src" vendor/hyper >&2 || true
    exit 1
  fi
else
  rm -rf vendor/hyper
  cp -r "$src" vendor/hyper
  echo "vendor/hyper rebuilt: hyper $VERSION with vendor/hyper.patch"
fi
