#!/usr/bin/env bash
# Records the trace hash of every catalog scenario × scheme × seed, one line each, sorted:
#   scenario<TAB>scheme spec (JSON)<TAB>seed<TAB>trace_hash
# Refactors and speed work must leave this list unchanged (compare with `diff`).
# Usage: bash scripts/trace-hashes.sh [SEEDS] > hashes.txt   (SEEDS default 0..19)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-0..19}
cargo build --release --quiet
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
find scenarios -name '*.json' -not -name '*.schema.json' | sort | while read -r file; do
  ./target/release/locksim sweep "$file" --seeds "$seeds" --out "$tmp/$(echo "$file" | tr / _)" >/dev/null 2>&1 \
    || echo "sweep failed: $file" >&2
done
cat "$tmp"/*/results.jsonl \
  | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    spec = r.get("scheme_spec") or r["scheme"]
    print(r["scenario"], json.dumps(spec, sort_keys=True, separators=(",", ":")), r["seed"], r["trace_hash"], sep="\t")
' | sort
