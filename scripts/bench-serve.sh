#!/usr/bin/env bash
# Throughput of `locksim serve` next to redis-server 7.0 (each on a free loopback port), in
# paired runs: every test runs RUNS times on each server in turn (serve, redis, serve, redis,
# ...), so a machine whose speed drifts moves both alike, and the ratio serve / redis-server is
# taken pair by pair; printed: each server's median requests per second and the median ratio
# with its smallest and largest, then (lock tests) each server's CPU time per request, user +
# system from /proc/PID/stat around each run, and their ratio redis / serve pair by pair: the
# other processes of a loaded machine stretch wall time (requests per second) more than the
# server's own CPU time; and their context switches per 1,000 requests (/proc/PID/status),
# voluntary (waiting for input) and not (preempted, mostly by redis-benchmark woken by a reply
# and run on the server's CPU).
#
# Tests: redis-benchmark's default PING/SET/GET/INCR at -P 16, and the lock commands on 100k
# random keys (issue 32) at -P 16 and -P 1: `SET key val NX PX`, and EVAL / EVALSHA of the
# compare-and-delete release script.
# Usage: bash scripts/bench-serve.sh [RUNS]      (RUNS default 5; not part of CI)
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUSTFLAGS
runs=${1:-5}

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

release='if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end'
sha=$(redis-cli -p "$redis_port" script load "$release")
redis-cli -p "$serve_port" script load "$release" >/dev/null

# One redis-benchmark run: its CSV rows (test, requests per second, latencies), header dropped.
bench() {
  local port=$1
  shift
  redis-benchmark -p "$port" --csv "$@" 2>/dev/null | tail -n +2
}

# A test: a label and redis-benchmark's arguments after the port (`@release`: the script text).
tests=(
  "default -P 16|-n 100000 -t ping,set,get,incr -P 16"
  "SET NX PX -P 16|-r 100000 -n 100000 -P 16 SET key:__rand_int__ val NX PX 10000"
  "SET NX PX -P 1|-r 100000 -n 30000 -P 1 SET key:__rand_int__ val NX PX 10000"
  "EVAL release -P 16|-r 100000 -n 100000 -P 16 EVAL @release 1 key:__rand_int__ val"
  "EVAL release -P 1|-r 100000 -n 30000 -P 1 EVAL @release 1 key:__rand_int__ val"
  "EVALSHA release -P 16|-r 100000 -n 100000 -P 16 EVALSHA $sha 1 key:__rand_int__ val"
  "EVALSHA release -P 1|-r 100000 -n 30000 -P 1 EVALSHA $sha 1 key:__rand_int__ val"
)

rows=$(mktemp)
trap 'kill "$redis_pid" "$serve_pid" 2>/dev/null; wait 2>/dev/null || true; rm -f "$rows"' EXIT
# A process's CPU time so far, in clock ticks (utime + stime).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# A process's context switches so far: voluntary, then not.
ctxt_switches() { awk '/^voluntary_ctxt_switches/ {v = $2} /^nonvoluntary_ctxt_switches/ {n = $2} END {print v, n}' "/proc/$1/status"; }
echo "locksim serve vs redis-server: $runs paired runs per test ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ))"
for test in "${tests[@]}"; do
  label=${test%%|*}
  read -r -a args <<< "${test#*|}"
  for i in "${!args[@]}"; do [ "${args[$i]}" = @release ] && args[$i]=$release; done
  for run in $(seq 1 "$runs"); do
    for server in serve redis; do
      if [ "$server" = serve ]; then port=$serve_port pid=$serve_pid; else port=$redis_port pid=$redis_pid; fi
      before=$(cpu_ticks "$pid")
      read -r vol_before invol_before <<< "$(ctxt_switches "$pid")"
      out=$(bench "$port" "${args[@]}")
      ticks=$(($(cpu_ticks "$pid") - before))
      read -r vol_after invol_after <<< "$(ctxt_switches "$pid")"
      switches="$((vol_after - vol_before))\t$((invol_after - invol_before))"
      if [ -n "$out" ]; then sed "s/^/$label\t$run\t$server\t$ticks\t$switches\t/" <<< "$out" >> "$rows"; fi
    done
  done
done
python3 - "$rows" "$(getconf CLK_TCK)" "${tests[@]}" <<'PY'
import collections, statistics, sys
tick_s = 1 / int(sys.argv[2])
# Requests per run of each lock test (its -n); the default list's run is several tests at once.
requests = {}
for test in sys.argv[3:]:
    label, args = test.split("|", 1)
    words = args.split()
    if not label.startswith("default") and "-n" in words:
        requests[label] = int(words[words.index("-n") + 1])
rps = collections.defaultdict(dict)  # test -> {(run, server): rps}
cpu_us = collections.defaultdict(dict)  # lock test -> {(run, server): CPU µs per request}
switches = collections.defaultdict(dict)  # lock test -> {(run, server): (voluntary, not) per 1k requests}
for line in open(sys.argv[1]):
    label, run, server, ticks, voluntary, involuntary, row = line.rstrip("\n").split("\t", 6)
    if label in requests:
        cpu_us[label][(run, server)] = int(ticks) * tick_s * 1e6 / requests[label]
        per_1k = 1000 / requests[label]
        switches[label][(run, server)] = (int(voluntary) * per_1k, int(involuntary) * per_1k)
    # The test's name may hold unescaped quotes and commas (a script): the 7 figures end the row.
    fields = row.rsplit(",", 7)
    test, value = fields[0].strip('"'), fields[1].strip('"')
    name = test if label.startswith("default") else label
    rps[name][(run, server)] = float(value)
print(f"{'test':<22} {'redis-server':>14} {'locksim serve':>14} {'ratio (min-max)':>22}")
for name, runs in rps.items():
    pairs = sorted({r for r, _ in runs})
    ratios = [runs[(r, "serve")] / runs[(r, "redis")] for r in pairs if (r, "serve") in runs and (r, "redis") in runs]
    redis = statistics.median(runs[(r, "redis")] for r in pairs if (r, "redis") in runs)
    serve = statistics.median(runs[(r, "serve")] for r in pairs if (r, "serve") in runs)
    print(f"{name:<22} {redis:>14,.0f} {serve:>14,.0f} {statistics.median(ratios):>8.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
print(f"\nCPU per request, us (redis-server / locksim serve: above 1, serve needs less)")
print(f"{'test':<22} {'redis-server':>14} {'locksim serve':>14} {'ratio (min-max)':>22}")
for name, runs in cpu_us.items():
    pairs = sorted({r for r, _ in runs})
    ratios = [runs[(r, "redis")] / runs[(r, "serve")] for r in pairs if (r, "redis") in runs and runs.get((r, "serve"))]
    redis = statistics.median(runs[(r, "redis")] for r in pairs if (r, "redis") in runs)
    serve = statistics.median(runs[(r, "serve")] for r in pairs if (r, "serve") in runs)
    spread = f"{statistics.median(ratios):>8.2f} ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-"
    print(f"{name:<22} {redis:>14.2f} {serve:>14.2f} {spread}")
print(f"\nContext switches per 1,000 requests of the server, median: voluntary / preempted")
print(f"{'test':<22} {'redis-server':>14} {'locksim serve':>14}")
for name, runs in switches.items():
    pairs = sorted({r for r, _ in runs})
    def median_of(server):
        rows = [runs[(r, server)] for r in pairs if (r, server) in runs]
        return f"{statistics.median(v for v, _ in rows):.1f} / {statistics.median(n for _, n in rows):.1f}"
    print(f"{name:<22} {median_of('redis'):>14} {median_of('serve'):>14}")
PY
