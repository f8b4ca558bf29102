#!/usr/bin/env bash
# Builds the dedicated server's container image and checks it.
#
#   installer/container.sh [--tag NAME] [--no-image]
#
# 1. The server build, linked statically (`crt-static`, glibc), in target/static.
# 2. Its root file system, staged: /usr/bin/hailfire, the content, an empty /data.
# 3. Whatever the machine allows, in this order (each says what it did or why not):
#    - the staged root, read-only, in a chroot of its own (new mount and PID namespaces,
#      /proc, a writable /data and nothing else) runs `--dedicated --exit-after 5` as
#      user 10001: the image's contents work with no library and no write outside /data
#      (needs root and unshare);
#    - `podman build` (or `buildah bud`) makes the image from installer/container/Containerfile
#      (skipped with --no-image);
#    - `podman run --read-only` runs it for 5 s with a volume for /data, where this
#      machine can run containers.
#
# Needs: cargo, the C library's static archives (libc6-dev, as on any Debian with a C
# compiler), file; podman or buildah for the image.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "container.sh: $*" >&2; exit 1; }

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
tag="hailfire-server:$version"
image=1
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="$2"; shift 2 ;;
    --no-image) image=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) fail "unknown argument '$1' (see --help)" ;;
  esac
done

triple=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --no-default-features \
  --target "$triple" --target-dir target/static
bin="target/static/$triple/release/hailfire"
file -L "$bin" | grep -Eq 'statically linked|static-pie linked' || fail "$bin is not statically linked: $(file -L "$bin")"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$bin" "$stage/hailfire"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/hailfire"
cp -r content mods "$stage/"
mkdir -p "$stage/data"
cp installer/container/Containerfile "$stage/"
echo "ok: static server build ($(du -k "$stage/hailfire" | cut -f1) KiB)"

# The image's root file system, read-only, as the image's user.
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  root="$stage/root"
  mkdir -p "$root/usr/bin" "$root/usr/share/hailfire" "$root/data" "$root/proc"
  cp "$stage/hailfire" "$root/usr/bin/"
  cp -r "$stage/content" "$stage/mods" "$root/usr/share/hailfire/"
  chown 10001:10001 "$root/data"
  port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  sleep 1
  touch "$stage/before-run"
  out=$(unshare --mount --pid --fork sh -c '
    set -e
    root=$1; port=$2
    mount --bind "$root" "$root"
    mount --bind "$root/data" "$root/data"
    mount -o remount,bind,ro "$root"
    mount -t proc proc "$root/proc"
    # The environment the Containerfile sets, and nothing else.
    exec env -i HAILFIRE_DATA_DIR=/data HAILFIRE_CONFIG_DIR=/data HOME=/data \
      /usr/sbin/chroot --userspec=10001:10001 "$root" /usr/bin/hailfire --dedicated --bind "127.0.0.1:$port" --exit-after 5
  ' sh "$root" "$port" </dev/null 2>&1) || fail "the image's root file system, read-only: $out"
  grep -q "server stopped cleanly" <<<"$out" || fail "the read-only root did not run the server: $out"
  [ -s "$root/data/server.toml" ] && [ -s "$root/data/server_key" ] || fail "the server wrote nothing under /data"
  if [ "$(find "$root" -path "$root/data" -prune -o -path "$root/proc" -prune -o -newer "$stage/before-run" -print | wc -l)" != 0 ]; then
    fail "something was written outside /data"
  fi
  echo "ok: the image's root, read-only, runs --dedicated as user 10001 and writes only /data"
else
  echo "container.sh: SKIPPED the read-only root check (needs root and unshare)" >&2
fi

[ "$image" = 1 ] || exit 0
if command -v podman >/dev/null; then
  build=(podman build)
elif command -v buildah >/dev/null; then
  build=(buildah bud)
else
  echo "container.sh: SKIPPED the image: neither podman nor buildah is installed (apt install podman)" >&2
  exit 0
fi
"${build[@]}" -q -t "$tag" -f "$stage/Containerfile" "$stage" >/dev/null || fail "${build[*]} failed"
echo "ok: built the image $tag"
command -v podman >/dev/null || { echo "container.sh: SKIPPED running it: no podman" >&2; exit 0; }
vol="hailfire-check-$$"
if out=$(podman run --rm --read-only -v "$vol:/data" --network host "$tag" --bind 127.0.0.1:0 --exit-after 5 2>&1); then
  podman volume rm -f "$vol" >/dev/null 2>&1 || true
  grep -q "server stopped cleanly" <<<"$out" || fail "the container did not run the server: $out"
  echo "ok: podman run --read-only $tag --exit-after 5"
else
  podman volume rm -f "$vol" >/dev/null 2>&1 || true
  if grep -Eqi 'OCI runtime|crun:|runc:|cannot set|permission denied|operation not permitted' <<<"$out"; then
    echo "container.sh: SKIPPED running the image: this machine cannot run containers: $(head -c 300 <<<"$out")" >&2
  else
    fail "podman run $tag: $out"
  fi
fi
