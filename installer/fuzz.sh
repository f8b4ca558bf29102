#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets) for a bounded time, on a scratch copy of the
# committed seed corpus. Needs the nightly toolchain (for cargo fuzz only; the game builds
# on stable) and cargo-fuzz: both are installed when missing.
#   installer/fuzz.sh [SECONDS_PER_TARGET]    (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
if ! rustup toolchain list | grep -q '^nightly'; then
  if ! rustup toolchain install nightly --profile minimal; then
    echo "fuzz: SKIPPED: no nightly toolchain here and none could be installed" >&2
    exit 0
  fi
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r fuzz/corpus "$work/corpus"
cd fuzz
cargo +nightly fuzz build -O
for t in client_msg server_msg content secure_datagram mod_files enet_guard worker_frames media_png media_sound replay; do
  mkdir -p "$work/corpus/$t"
  echo "fuzz: $t for ${secs}s"
  if ! cargo +nightly fuzz run -O "$t" "$work/corpus/$t" -- -max_total_time="$secs" -max_len=8192 \
      -print_final_stats=1 >"$work/$t.log" 2>&1; then
    tail -n 60 "$work/$t.log"
    echo "fuzz: $t found a crash (the input is under fuzz/artifacts/$t)" >&2
    exit 1
  fi
  grep -E '^stat::(number_of_executed_units|peak_rss_mb)|cov: ' "$work/$t.log" | tail -n 3 || true
done
