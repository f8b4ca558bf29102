#!/usr/bin/env bash
# Checks what installer/package.sh made (CI runs it after packaging):
#   installer/check-packages.sh [DIR]      (default target/dist)
# - the .deb holds the binary, the content, the desktop entry, the icons, the metainfo,
#   the man page and the server unit, and declares its dependencies;
# - desktop-file-validate and appstreamcli validate pass;
# - the extracted .deb and the unpacked tarball each run `mods check`, `--version` and a
#   dedicated server for 2 s from a temporary folder with a fresh HOME (their own
#   content, found beside the binary);
# - the checksums match;
# - lintian reports no errors on either package (where lintian is installed; CI has it);
# - as root, on a machine with neither package installed: the server package installs,
#   makes its account, runs --dedicated as that account with owner-only files, keeps its
#   state on remove and loses it (account and /var/lib/hailfire) on purge;
# - the NSIS script compiles (with a stand-in payload that is deleted, never shipped).
set -euo pipefail
cd "$(dirname "$0")/.."
dist=$(cd "${1:-target/dist}" && pwd)
fail() { echo "check-packages: $*" >&2; exit 1; }

deb=$(ls "$dist"/hailfire_*.deb | head -1)
sdeb=$(ls "$dist"/hailfire-server_*.deb 2>/dev/null | head -1 || true)
tarball=$(ls "$dist"/hailfire-*-linux-x86_64.tar.gz | head -1)
[ -f "$deb" ] && [ -f "$tarball" ] || fail "no .deb or tarball in $dist"
(cd "$dist" && sha256sum -c --quiet SHA256SUMS) || fail "SHA256SUMS does not match"

listing=$(dpkg-deb -c "$deb")
for f in ./usr/games/hailfire ./usr/share/hailfire/content/mod.toml ./usr/share/hailfire/mods/ \
  ./usr/share/applications/io.hailfire.Hailfire.desktop ./usr/share/metainfo/io.hailfire.Hailfire.metainfo.xml \
  ./usr/share/icons/hicolor/32x32/apps/hailfire.png ./usr/share/icons/hicolor/512x512/apps/hailfire.png \
  ./usr/share/icons/hicolor/scalable/apps/hailfire.svg ./usr/share/man/man6/hailfire.6.gz \
  ./usr/lib/systemd/system/hailfire-server.service ./usr/share/doc/hailfire/copyright; do
  grep -qF " $f" <<<"$listing" || fail "$deb lacks $f"
done
depends=$(dpkg-deb -f "$deb" Depends)
for d in libc6 libasound2 libudev1 libvulkan1; do
  grep -q "$d" <<<"$depends" || fail "Depends lacks $d: $depends"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp/deb"
desktop-file-validate "$tmp/deb/usr/share/applications/io.hailfire.Hailfire.desktop"
appstreamcli validate --no-net "$tmp/deb/usr/share/metainfo/io.hailfire.Hailfire.metainfo.xml" >/dev/null \
  || appstreamcli validate --no-net "$tmp/deb/usr/share/metainfo/io.hailfire.Hailfire.metainfo.xml"
mkdir -p "$tmp/tar"
tar -C "$tmp/tar" -xzf "$tarball"
tardir=$(ls -d "$tmp"/tar/hailfire-*)

layouts=("$tmp/deb/usr/games/hailfire" "$tardir/hailfire")
# The server package: the server build, the content and the unit, and no desktop library
# (neither declared nor linked).
if [ -n "$sdeb" ]; then
  slisting=$(dpkg-deb -c "$sdeb")
  for f in ./usr/bin/hailfire ./usr/share/hailfire/content/mod.toml ./usr/lib/systemd/system/hailfire-server.service \
    ./usr/share/doc/hailfire-server/copyright; do
    grep -qF " $f" <<<"$slisting" || fail "$sdeb lacks $f"
  done
  sdepends=$(dpkg-deb -f "$sdeb" Depends)
  grep -q libc6 <<<"$sdepends" || fail "server Depends lacks libc6: $sdepends"
  if grep -Eiq 'asound|udev|vulkan|x11|xkb|wayland|dbus' <<<"$sdepends"; then
    fail "the server package depends on a desktop library: $sdepends"
  fi
  mkdir -p "$tmp/sdeb"
  dpkg-deb -x "$sdeb" "$tmp/sdeb/root"
  if ldd "$tmp/sdeb/root/usr/bin/hailfire" | grep -Ei 'asound|udev|dbus|x11|xcb|wayland|vulkan'; then
    fail "the server package's binary links a desktop library (above)"
  fi
  layouts+=("$tmp/sdeb/root/usr/bin/hailfire")
  echo "ok: $sdeb ($(du -k "$sdeb" | cut -f1) KiB; Depends: $sdepends)"
else
  fail "no server package in $dist"
fi

if command -v lintian >/dev/null; then
  lint=$(lintian --tag-display-limit 0 "$deb" "$sdeb" 2>&1 | grep -v 'running with root privileges' || true)
  if grep -q '^E:' <<<"$lint"; then
    fail "lintian reports errors: $lint"
  fi
  echo "ok: lintian, no errors${lint:+ ($(grep -c '^W:' <<<"$lint") warning(s))}"
  [ -z "$lint" ] || echo "$lint"
else
  echo "check-packages: lintian is not installed: the packages were not linted" >&2
fi

# Installing the server package for real (root only, and never over an installed one).
if [ "$(id -u)" = 0 ] && ! dpkg -s hailfire >/dev/null 2>&1 && ! dpkg -s hailfire-server >/dev/null 2>&1 \
  && ! getent passwd hailfire >/dev/null; then
  dpkg -i "$sdeb" >/dev/null || fail "dpkg -i $sdeb"
  getent passwd hailfire >/dev/null || { dpkg --purge hailfire-server; fail "the package made no hailfire account"; }
  if ldd /usr/bin/hailfire | grep -Ei 'asound|udev|dbus|x11|xcb|wayland|vulkan'; then
    dpkg --purge hailfire-server; fail "the installed server links a desktop library"
  fi
  port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  # As the unit runs it: its account, its folders, its umask.
  out=$(cd / && umask 0077 && runuser -u hailfire -- env -i PATH=/usr/bin:/bin HAILFIRE_CONFIG_DIR=/var/lib/hailfire/config \
    HAILFIRE_DATA_DIR=/var/lib/hailfire/data /usr/bin/hailfire --dedicated --bind "127.0.0.1:$port" --exit-after 2 \
    </dev/null 2>&1) || { dpkg --purge hailfire-server; fail "the installed server: $out"; }
  grep -q "server stopped cleanly" <<<"$out" || { dpkg --purge hailfire-server; fail "installed server: $out"; }
  for f in /var/lib/hailfire/config/server.toml /var/lib/hailfire/data/server_key; do
    mode=$(stat -c '%a %U' "$f" 2>/dev/null || echo missing)
    [ "$mode" = "600 hailfire" ] || { dpkg --purge hailfire-server; fail "$f is $mode, not 600 hailfire"; }
  done
  dpkg -r hailfire-server >/dev/null || fail "dpkg -r"
  [ -f /var/lib/hailfire/config/server.toml ] && getent passwd hailfire >/dev/null \
    || { dpkg --purge hailfire-server; fail "remove (not purge) lost the server's state or account"; }
  dpkg --purge hailfire-server >/dev/null || fail "dpkg --purge"
  [ ! -e /var/lib/hailfire ] && ! getent passwd hailfire >/dev/null \
    || fail "purge left /var/lib/hailfire or the account"
  echo "ok: $sdeb installs, runs as its account (0600 files), keeps its state on remove, purges it"
elif [ "$(id -u)" = 0 ]; then
  echo "check-packages: a hailfire package or account is already here: the install check was not run" >&2
fi

# Each layout from a neutral folder with a fresh HOME: nothing from the source tree or
# the user's folders may be what makes it work.
n=0
for layout in "${layouts[@]}"; do
  n=$((n + 1))
  home="$tmp/home-$n"
  mkdir -p "$home" "$tmp/cwd"
  run() { (cd "$tmp/cwd" && env -i PATH=/usr/bin:/bin HOME="$home" "$layout" "$@"); }
  run --version | grep -q "^hailfire " || fail "$layout --version"
  out=$(run mods check 2>&1) || fail "$layout mods check failed: $out"
  own=""
  for d in "$(dirname "$layout")/content" "$(dirname "$layout")/../share/hailfire/content"; do
    if [ -f "$d/mod.toml" ]; then own=$(realpath "$d"); break; fi
  done
  [ -n "$own" ] || fail "no content beside $layout"
  grep -qF "base content: $own" <<<"$(run mods list)" \
    || fail "$layout does not use its own content: $(run mods list)"
  port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  out=$(run --dedicated --bind "127.0.0.1:$port" --exit-after 2 </dev/null 2>&1) || fail "$layout --dedicated: $out"
  grep -q "server stopped cleanly" <<<"$out" || fail "$layout --dedicated did not stop cleanly: $out"
  # The console over the admin socket, with standard input closed as under systemd.
  (cd "$tmp/cwd" && env -i PATH=/usr/bin:/bin HOME="$home" "$layout" --dedicated --bind "127.0.0.1:$port" \
    --exit-after 20 </dev/null >"$tmp/dedicated.out" 2>&1) &
  ded=$!
  said=""
  for _ in $(seq 1 100); do
    if said=$(run console --run status 2>&1); then break; fi
    said=""
    sleep 0.2
  done
  grep -q "instances:" <<<"$said" || { kill "$ded" 2>/dev/null; fail "$layout console --run status: $said $(cat "$tmp/dedicated.out")"; }
  run console --run stop >/dev/null || fail "$layout console --run stop"
  wait "$ded" || fail "$layout: the server stopped from the console did not exit cleanly"
  echo "ok: $layout (mods check, its own content, --dedicated, console)"
done

if command -v makensis >/dev/null; then
  stage="$tmp/nsis"
  mkdir -p "$stage/licenses"
  echo "stand-in payload for a syntax check; this installer is deleted" > "$stage/hailfire.exe"
  cp -r content mods README.md "$stage/"
  cp LICENSE-MIT "$stage/licenses/"
  cp assets/icon/hailfire.ico "$stage/"
  makensis -V1 -DVERSION=0.0.0-check -DSTAGE="$stage" -DOUTFILE="$tmp/nsis-check.exe" installer/windows/hailfire.nsi \
    || fail "the NSIS script does not compile"
  rm -f "$tmp/nsis-check.exe"
  echo "ok: installer/windows/hailfire.nsi compiles"
fi
echo "check-packages: all good"
