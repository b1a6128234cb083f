#!/usr/bin/env bash
# Installs the Debian packages reap.cpp needs, only those that are missing, so
# that a second run costs a dpkg query and nothing else.
set -euo pipefail

packages=(
    build-essential cmake git ccache pkg-config
    nlohmann-json3-dev libssl-dev libgtest-dev
    nodejs npm
    python3 python3-numpy python3-torch libopenblas0-pthread python3-matplotlib
    man-db groff-base strace
    clang libclang-rt-dev
    time bc
    universal-ctags # scripts/check_sizes.sh: function lengths for the size rule
    librsvg2-bin    # rsvg-convert: the tests draw reap report's SVG figures
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        # node and npm may come from outside Debian (nvm, a tarball): accept the commands.
        case "$p" in
            nodejs) command -v node > /dev/null && continue ;;
            npm)    command -v npm  > /dev/null && continue ;;
        esac
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

echo "setup-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
