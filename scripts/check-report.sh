#!/usr/bin/env bash
# The whole default comparison, audited (issue 30): runs `locksim compare` (or takes an existing
# report folder and the terminal output it printed), then `reports::audit` over everything in it
# — every count of seeds on the page, in the heat maps and in the terminal against
# summary.json; every chart and every timeline for text over text, text or shapes off the
# canvas, cells over cells. `cargo test` runs the same audit on a reduced comparison
# (sim/tests/report.rs, sim/tests/matrix.rs); this is the full one (about 90 CPU-seconds).
#
#   bash scripts/check-report.sh                       # compare into a temporary folder
#   bash scripts/check-report.sh REPORT_DIR TERMINAL   # an existing report and compare's stdout
#
# Never sets RUSTFLAGS (that would drop .cargo/config.toml's --cfg madsim).
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUSTFLAGS

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ $# -ge 2 ]]; then
  report="$(cd "$1" && pwd)"
  terminal="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
else
  report="$work/report"
  terminal="$work/compare.txt"
  nice -n 5 cargo run --release --quiet -- compare --out "$report" >"$terminal"
fi
LOCKSIM_REPORT_DIR="$report" LOCKSIM_REPORT_TERMINAL="$terminal" \
  cargo test --quiet -p locksim --test report -- --ignored --exact a_whole_report_folder
