#!/usr/bin/env bash
# Fetches the pinned llama.cpp source into third_party/llama.cpp.
#
# node-llama-cpp@3.21.1 ships llama.cpp release v0.4.0 as a git bundle. We take
# only its tarball (npm pack: no dependencies, no install scripts), check it
# against the integrity hash recorded in package-lock.json, and clone the bundle.
# Idempotent: does nothing when the checkout is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=third_party/llama.cpp
if [ -f "$dest/CMakeLists.txt" ]; then
    exit 0
fi

version=$(node -e 'console.log(require("./package-lock.json").packages["node_modules/node-llama-cpp"].version)')
integrity=$(node -e 'console.log(require("./package-lock.json").packages["node_modules/node-llama-cpp"].integrity)')

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch-llama: npm pack node-llama-cpp@$version"
(cd "$work" && npm pack --silent "node-llama-cpp@$version" > /dev/null)
tarball="$work/node-llama-cpp-$version.tgz"

actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$actual" != "$integrity" ]; then
    echo "fetch-llama: integrity mismatch for node-llama-cpp@$version" >&2
    echo "  expected $integrity" >&2
    echo "  got      $actual" >&2
    exit 1
fi

tar -xzf "$tarball" -C "$work" package/llama/gitRelease.bundle
mkdir -p third_party
rm -rf "$dest.tmp"
git -c advice.detachedHead=false clone --quiet "$work/package/llama/gitRelease.bundle" "$dest.tmp"
mv "$dest.tmp" "$dest"
echo "fetch-llama: llama.cpp $(git -C "$dest" rev-parse --short HEAD) in $dest"
