#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages Hailfire needs, only those missing.
#   installer/deps.sh         what building and playing need
#   installer/deps.sh --test  plus what the test suite needs (software Vulkan, Xvfb, xdotool, imagemagick;
#                             iproute2, nftables and miniupnpd for the network-namespace tests)
#   installer/deps.sh --package  plus what installer/package.sh and check-packages.sh need
set -euo pipefail
pkgs="pkg-config libasound2-dev libudev-dev libdbus-1-dev"
if [ "${1:-}" = "--test" ]; then
  pkgs="$pkgs mesa-vulkan-drivers libvulkan1 xvfb xauth xdotool imagemagick iproute2 nftables miniupnpd-nftables"
fi
if [ "${1:-}" = "--package" ]; then
  pkgs="$pkgs dpkg-dev desktop-file-utils appstream nsis file python3 lintian"
fi
command -v dpkg >/dev/null 2>&1 || { echo "deps.sh: not a Debian-like system; install the equivalents of: $pkgs" >&2; exit 0; }
missing=$(for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done | tr '\n' ' ')
[ -z "${missing// }" ] && exit 0
if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
echo "installing: $missing"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
