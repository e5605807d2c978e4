#!/usr/bin/env bash
# Pipelined throughput of `locksim serve` next to redis-server, measured in the same run:
#   redis-benchmark -q -n 100000 -t ping,set,get,incr -P 16
# against both (each on a free loopback port), then the ratio serve / redis-server per test.
# With farm-bench on PATH it also times RUNS paired runs (serve, redis, serve, redis, ...) of the
# whole benchmark and prints its min/median/max and the paired ratio.
# Usage: bash scripts/bench-serve.sh [RUNS]      (RUNS default 5; not part of CI)
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUSTFLAGS
runs=${1:-5}
args=(-q -n 100000 -t ping,set,get,incr -P 16)

cargo build --release --quiet
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 1 100); do
    redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "nothing answers on port $1" >&2
  return 1
}

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  --logfile '' >/dev/null 2>&1 &
redis_pid=$!
serve_port=$(free_port)
./target/release/locksim serve --port "$serve_port" 2>/dev/null &
serve_pid=$!
trap 'kill "$redis_pid" "$serve_pid" 2>/dev/null; wait 2>/dev/null || true' EXIT
wait_port "$redis_port"
wait_port "$serve_port"

bench() { redis-benchmark -p "$1" "${args[@]}" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | grep -v 'rps='; }
echo "redis-benchmark ${args[*]}   ($(nproc) cores, $(date -u +%Y-%m-%d))"
redis_out=$(bench "$redis_port")
serve_out=$(bench "$serve_port")
printf '%-12s %16s %16s %8s\n' test redis-server "locksim serve" ratio
paste <(echo "$redis_out") <(echo "$serve_out") | while IFS=$'\t' read -r r s; do
  name=${r%%:*}
  rr=$(echo "$r" | awk '{print $2}')
  sr=$(echo "$s" | awk '{print $2}')
  printf '%-12s %16s %16s %8.2f\n' "$name" "$rr" "$sr" "$(echo "$sr / $rr" | bc -l)"
done

if command -v farm-bench >/dev/null 2>&1; then
  echo
  echo "farm-bench: $runs paired runs of the whole benchmark, A = locksim serve, B = redis-server"
  echo "(wall-time ratio A/B: the throughput ratio is its inverse)"
  farm-bench -n "$runs" --timeout 600 --vs "redis-benchmark -p $redis_port ${args[*]}" \
    -- redis-benchmark -p "$serve_port" "${args[@]}"
fi
