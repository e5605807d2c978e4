#!/usr/bin/env bash
# Looks at the comparison report as a person would: runs `locksim compare` into a temporary
# folder and screenshots its index.html in headless Chromium at 1280 px wide.
#
#   bash scripts/screenshot-report.sh [OUT.png] [compare arguments...]
#
# Installs Debian's chromium when it is missing. Not part of CI. Never sets RUSTFLAGS (that would
# drop .cargo/config.toml's --cfg madsim).
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUSTFLAGS

png="${1:-report-screenshot.png}"
shift || true
case "$png" in /*) ;; *) png="$PWD/$png" ;; esac

if ! command -v chromium >/dev/null 2>&1; then
  echo "installing chromium (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cargo run --release --quiet -- compare "$@" --out "$work/report"

chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$work/profile" --hide-scrollbars \
  --window-size=1280,2000 --screenshot="$png" "file://$work/report/index.html" 2>/dev/null
echo "screenshot: $png"
