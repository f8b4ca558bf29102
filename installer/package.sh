#!/usr/bin/env bash
# Builds Hailfire's release artefacts.
#
#   installer/package.sh [--out DIR] [--no-build] [--windows EXE] [--macos BIN]
#
# On Linux (this is what CI runs), into DIR (default target/dist):
#   hailfire_VERSION_ARCH.deb                  Debian/Ubuntu package (dpkg-deb)
#   hailfire-server_VERSION_ARCH.deb           the server build alone, for a VPS: no
#                                              window, GPU, audio or gamepad libraries
#   hailfire-VERSION-linux-x86_64.tar.gz       portable: unpack and double-click
#   SHA256SUMS
# --windows EXE: a Windows build of the game (made on Windows, see docs/RELEASING.md)
#   is packed into hailfire-VERSION-windows-x86_64-setup.exe with NSIS (makensis) and a
#   .zip. --macos BIN: a macOS build is laid out as Hailfire.app in a .tar.gz.
# --no-build uses target/release/hailfire as it is.
#
# Needs: cargo, dpkg-deb and dpkg-shlibdeps (dpkg-dev), strip; makensis for --windows.
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/dist
build=1
win_exe=""
mac_bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --windows) win_exe="$2"; shift 2 ;;
    --macos) mac_bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "package.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# Who the packages name as their maintainer; a release sets the real address.
maintainer="${HAILFIRE_MAINTAINER:-The Hailfire developers <packages@hailfire.invalid>}"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[ -n "$version" ] || { echo "package.sh: no version in Cargo.toml" >&2; exit 1; }
if [ "$build" = 1 ]; then
  cargo build --release
fi
bin=target/release/hailfire
[ -x "$bin" ] || { echo "package.sh: $bin is missing (build it, or drop --no-build)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
work="$out/work"
rm -rf "$work"
mkdir -p "$work"
artefacts=()

# Icons, drawn by the game itself.
"$bin" icon --out "$work/icons" >/dev/null

# Licences: the game's, and those of the fonts compiled into it (egui's defaults).
lic="$work/licenses"
mkdir -p "$lic"
cp LICENSE-MIT LICENSE-APACHE assets/LICENSES.md "$lic/"
fonts=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name 'epaint_default_fonts-*' 2>/dev/null | sort | tail -1)
if [ -n "$fonts" ]; then
  for f in UFL.txt OFL.txt Hack-Regular.txt emoji-icon-font-mit-license.txt egui-icons.txt; do
    [ -f "$fonts/fonts/$f" ] && cp "$fonts/fonts/$f" "$lic/font-$f"
  done
else
  echo "package.sh: warning: the font licences (epaint_default_fonts) were not found" >&2
fi
# Some come out of the cargo registry executable; a text is not a program.
chmod 0644 "$lic"/*

# ---------------------------------------------------------------- Debian package
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
deb="$work/deb"
# A game goes in /usr/games (Debian's policy; lintian holds a "games" package to it).
mkdir -p "$deb/DEBIAN" "$deb/usr/games" "$deb/usr/share/hailfire" "$deb/usr/share/applications" \
  "$deb/usr/share/metainfo" "$deb/usr/share/man/man6" "$deb/usr/share/doc/hailfire" \
  "$deb/usr/lib/systemd/system" "$deb/usr/share/icons/hicolor/scalable/apps"
install -m 0755 "$bin" "$deb/usr/games/hailfire"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$deb/usr/games/hailfire"
cp -r content mods "$deb/usr/share/hailfire/"
sed 's|^Exec=hailfire|Exec=/usr/games/hailfire|' installer/linux/io.hailfire.Hailfire.desktop \
  > "$deb/usr/share/applications/io.hailfire.Hailfire.desktop"
chmod 0644 "$deb/usr/share/applications/io.hailfire.Hailfire.desktop"
install -m 0644 installer/linux/io.hailfire.Hailfire.metainfo.xml "$deb/usr/share/metainfo/"
for s in 16 32 48 64 128 256 512; do
  mkdir -p "$deb/usr/share/icons/hicolor/${s}x${s}/apps"
  install -m 0644 "$work/icons/hailfire-$s.png" "$deb/usr/share/icons/hicolor/${s}x${s}/apps/hailfire.png"
done
install -m 0644 "$work/icons/hailfire.svg" "$deb/usr/share/icons/hicolor/scalable/apps/hailfire.svg"
gzip -9n -c installer/linux/hailfire.6 > "$deb/usr/share/man/man6/hailfire.6.gz"
# The server unit, for the packaged paths (the content is found from the binary, in
# ../share/hailfire). The server package's binary is in /usr/bin instead.
# Its opening comment says how to install by hand; the package did that already.
{
  echo "# systemd unit for a Hailfire dedicated server, installed by this package with the"
  echo "# system user 'hailfire' (home /var/lib/hailfire). Start it at boot:"
  echo "#   systemctl enable --now hailfire-server"
  sed -n '/^# Settings:/,$p' installer/hailfire-server.service \
    | sed -e 's|/usr/local/bin/hailfire|/usr/games/hailfire|' -e '/HAILFIRE_CONTENT=/d'
} > "$deb/usr/lib/systemd/system/hailfire-server.service"
cp README.md docs/SERVER.md docs/MODDING.md "$deb/usr/share/doc/hailfire/"
{
  echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: hailfire"
  echo
  echo "Files: *"
  echo "Copyright: 2026 The Hailfire developers"
  echo "License: MIT or Apache-2.0"
  echo "Comment: the full texts and the licences of the bundled fonts are in"
  echo " /usr/share/doc/hailfire/licenses/."
} > "$deb/usr/share/doc/hailfire/copyright"
cp -r "$lic" "$deb/usr/share/doc/hailfire/licenses"
# Runtime dependencies: the libraries the binary links (dpkg-shlibdeps), plus those winit
# and wgpu open at run time (X11 or Wayland, xkbcommon, the Vulkan loader).
shlib=$(mktemp -d)
mkdir -p "$shlib/debian"
printf 'Source: hailfire\n\nPackage: hailfire\nArchitecture: any\n' > "$shlib/debian/control"
linked=$(cd "$shlib" && dpkg-shlibdeps -O "$deb/usr/games/hailfire" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
rm -rf "$shlib"
[ -n "$linked" ] || { echo "package.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
depends="$linked, libvulkan1, libxkbcommon0, libx11-6 | libwayland-client0, libxcursor1 | libwayland-cursor0"
size=$(du -sk "$deb/usr" | cut -f1)
cat > "$deb/DEBIAN/control" <<EOF
Package: hailfire
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $depends
Recommends: mesa-vulkan-drivers | vulkan-icd
Section: games
Priority: optional
Description: co-op bullet-hell dungeon game
 Friends meet in a hub, step through a portal into a dungeon, fight waves of
 enemies and a boss with several phases, and dodge bullet patterns written in
 Lua. Host and play with one click, join a friend by address or from the list
 of games on the local network, or run the dedicated server (a systemd unit,
 hailfire-server.service, is included but not enabled).
EOF
# The changelog Debian expects of a native package (the version's line; README.md and the
# git history have the rest), dated by the last commit so a rebuild is the same.
changelog() {
  local pkg=$1 when
  when=$(date -R -u -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")
  printf '%s (%s) unstable; urgency=medium\n\n  * Release %s: see README.md.\n\n -- %s  %s\n' \
    "$pkg" "$version" "$version" "$maintainer" "$when" | gzip -9n > "$2"
}
changelog hailfire "$deb/usr/share/doc/hailfire/changelog.gz"
# Removing the package stops the server; purging it also removes its account and its
# state (/var/lib/hailfire: settings, bans, keys, logs). A plain remove keeps them.
cat > "$deb/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ] && command -v deb-systemd-invoke >/dev/null; then
  deb-systemd-invoke stop hailfire-server.service >/dev/null 2>&1 || true
fi
EOF
cat > "$deb/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = purge ]; then
  rm -rf /var/lib/hailfire
  if getent passwd hailfire >/dev/null; then
    userdel hailfire >/dev/null 2>&1 || true
  fi
  if getent group hailfire >/dev/null; then
    groupdel hailfire >/dev/null 2>&1 || true
  fi
fi
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
EOF
chmod 0755 "$deb/DEBIAN/prerm" "$deb/DEBIAN/postrm"
cat > "$deb/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
# The dedicated server's account, for hailfire-server.service (not enabled by default).
if [ "$1" = configure ] && ! getent passwd hailfire >/dev/null; then
  useradd --system --home-dir /var/lib/hailfire --create-home --shell /usr/sbin/nologin hailfire || true
fi
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
EOF
chmod 0755 "$deb/DEBIAN/postinst"
debfile="$out/hailfire_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$deb" "$debfile" >/dev/null
artefacts+=("$debfile")

# ---------------------------------------------------------------- portable tarball
name="hailfire-$version-linux-x86_64"
tdir="$work/$name"
mkdir -p "$tdir"
install -m 0755 "$deb/usr/games/hailfire" "$tdir/hailfire"
cp -r content mods README.md "$tdir/"
cp -r "$lic" "$tdir/licenses"
install -m 0644 "$work/icons/hailfire-256.png" "$tdir/hailfire.png"
install -m 0644 installer/linux/io.hailfire.Hailfire.desktop "$tdir/hailfire.desktop"
cat > "$tdir/install-desktop-entry.sh" <<'EOF'
#!/bin/sh
# Adds Hailfire (from this folder) to your desktop's menu; run it again if you move it.
here=$(cd "$(dirname "$0")" && pwd)
apps="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
mkdir -p "$apps"
sed -e "s|^Exec=.*|Exec=\"$here/hailfire\"|" -e "s|^Icon=.*|Icon=$here/hailfire.png|" \
  "$here/hailfire.desktop" > "$apps/io.hailfire.Hailfire.desktop"
echo "added $apps/io.hailfire.Hailfire.desktop"
EOF
chmod 0755 "$tdir/install-desktop-entry.sh"
tarball="$out/$name.tar.gz"
tar -C "$work" --owner=0 --group=0 -czf "$tarball" "$name"
artefacts+=("$tarball")

# ---------------------------------------------------------------- server package
# The server build (`--no-default-features`: --dedicated, console, bot, mods, bench,
# replay --check) with the content and the systemd unit, for a VPS: it pulls no Vulkan,
# X11, Wayland, ALSA or udev. It takes target/release/hailfire's place while it is built;
# the game's binary is put back afterwards.
if [ "$build" = 1 ]; then
  cp "$bin" "$work/hailfire-desktop"
  cargo build --release --no-default-features
  cp "$bin" "$work/hailfire-server"
  # Never written through: $bin is a hard link to cargo's own copy of the server build,
  # which would then hold the game and be handed out as the server by the next build.
  cp --remove-destination "$work/hailfire-desktop" "$bin"
  sdeb="$work/server-deb"
  mkdir -p "$sdeb/DEBIAN" "$sdeb/usr/bin" "$sdeb/usr/share/hailfire" "$sdeb/usr/lib/systemd/system" \
    "$sdeb/usr/share/doc/hailfire-server" "$sdeb/usr/share/man/man6"
  install -m 0755 "$work/hailfire-server" "$sdeb/usr/bin/hailfire"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$sdeb/usr/bin/hailfire"
  cp -r content mods "$sdeb/usr/share/hailfire/"
  sed 's|/usr/games/hailfire|/usr/bin/hailfire|' "$deb/usr/lib/systemd/system/hailfire-server.service" \
    > "$sdeb/usr/lib/systemd/system/hailfire-server.service"
  chmod 0644 "$sdeb/usr/lib/systemd/system/hailfire-server.service"
  cp "$deb/usr/share/man/man6/hailfire.6.gz" "$sdeb/usr/share/man/man6/"
  cp README.md docs/SERVER.md docs/MODDING.md docs/REPLAYS.md "$sdeb/usr/share/doc/hailfire-server/"
  sed 's|/usr/share/doc/hailfire/|/usr/share/doc/hailfire-server/|' "$deb/usr/share/doc/hailfire/copyright" \
    > "$sdeb/usr/share/doc/hailfire-server/copyright"
  cp LICENSE-MIT LICENSE-APACHE "$sdeb/usr/share/doc/hailfire-server/"
  shlib=$(mktemp -d)
  mkdir -p "$shlib/debian"
  printf 'Source: hailfire\n\nPackage: hailfire-server\nArchitecture: any\n' > "$shlib/debian/control"
  slinked=$(cd "$shlib" && dpkg-shlibdeps -O "$sdeb/usr/bin/hailfire" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
  rm -rf "$shlib"
  [ -n "$slinked" ] || { echo "package.sh: dpkg-shlibdeps found no dependencies (server)" >&2; exit 1; }
  ssize=$(du -sk "$sdeb/usr" | cut -f1)
  cat > "$sdeb/DEBIAN/control" <<EOF
Package: hailfire-server
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $ssize
Depends: $slinked
Conflicts: hailfire
Section: net
Priority: optional
Description: co-op bullet-hell dungeon game (dedicated server)
 The Hailfire server build alone, for a VPS: the dedicated server with its
 systemd unit (hailfire-server.service, not enabled), the console (hailfire
 console), headless bots, the mod checker and replay checks. No window, GPU,
 audio or gamepad libraries. Players use the game package.
EOF
  cp "$deb/DEBIAN/postinst" "$deb/DEBIAN/prerm" "$deb/DEBIAN/postrm" "$sdeb/DEBIAN/"
  changelog hailfire-server "$sdeb/usr/share/doc/hailfire-server/changelog.gz"
  sdebfile="$out/hailfire-server_${version}_${arch}.deb"
  dpkg-deb --root-owner-group -Zxz --build "$sdeb" "$sdebfile" >/dev/null
  artefacts+=("$sdebfile")
else
  echo "package.sh: --no-build: no server package (it needs its own build)" >&2
fi

# ---------------------------------------------------------------- Windows installer
if [ -n "$win_exe" ]; then
  command -v makensis >/dev/null || { echo "package.sh: --windows needs makensis (apt install nsis)" >&2; exit 1; }
  file "$win_exe" 2>/dev/null | grep -q 'PE32+' || { echo "package.sh: $win_exe is not a Windows x86-64 executable" >&2; exit 1; }
  wstage="$work/windows"
  mkdir -p "$wstage"
  cp "$win_exe" "$wstage/hailfire.exe"
  cp -r content mods README.md "$wstage/"
  cp -r "$lic" "$wstage/licenses"
  cp "$work/icons/hailfire.ico" "$wstage/"
  setup="$out/hailfire-$version-windows-x86_64-setup.exe"
  makensis -V2 -DVERSION="$version" -DSTAGE="$wstage" -DOUTFILE="$setup" installer/windows/hailfire.nsi
  artefacts+=("$setup")
  if command -v python3 >/dev/null; then
    zip="$out/hailfire-$version-windows-x86_64.zip"
    (cd "$work" && mv windows "hailfire-$version-windows-x86_64" \
      && python3 -m zipfile -c "$zip" "hailfire-$version-windows-x86_64" && mv "hailfire-$version-windows-x86_64" windows)
    artefacts+=("$zip")
  fi
fi

# ---------------------------------------------------------------- macOS app bundle
if [ -n "$mac_bin" ]; then
  app="$work/Hailfire.app/Contents"
  mkdir -p "$app/MacOS" "$app/Resources"
  install -m 0755 "$mac_bin" "$app/MacOS/hailfire"
  sed "s/@VERSION@/$version/g" installer/macos/Info.plist > "$app/Info.plist"
  cp "$work/icons/hailfire.icns" "$app/Resources/"
  # The game finds its content in ../Resources/content from Contents/MacOS.
  cp -r content mods "$app/Resources/"
  cp -r "$lic" "$app/Resources/licenses"
  mac="$out/hailfire-$version-macos.tar.gz"
  tar -C "$work" -czf "$mac" Hailfire.app
  artefacts+=("$mac")
fi

(cd "$out" && sha256sum "${artefacts[@]##*/}" > SHA256SUMS)
for a in "${artefacts[@]}" "$out/SHA256SUMS"; do
  echo "$a ($(du -h "$a" | cut -f1))"
done
