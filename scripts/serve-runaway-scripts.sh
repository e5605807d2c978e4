#!/usr/bin/env bash
# Runaway scripts at full size against `locksim serve` with its default limits (issue 13;
# the tests exercise the same code with the limits scaled down): a 200-million-instruction
# script, scripts that want 3 GB, and an endless loop stopped with SCRIPT KILL, while another
# client sends PING every 50 ms. Prints how long each script ran, what it got back, the longest
# wait of the other client and the server's peak resident memory; fails if the server dies,
# if a script does not get the expected reply, or if the other client ever waits longer than
# lua-time-limit (5 s) plus one second. Not part of CI (it needs a few seconds of a free core).
# Usage: bash scripts/serve-runaway-scripts.sh
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUSTFLAGS
cargo build --release --quiet
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
./target/release/locksim serve --port "$port" 2>/dev/null &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done

python3 - "$port" "$pid" <<'EOF'
import socket, sys, threading, time

sys.path.insert(0, "scripts")
from resp import command

port, pid = int(sys.argv[1]), int(sys.argv[2])
LIMIT_S = 5.0

def connect():
    return socket.create_connection(("127.0.0.1", port)).makefile("rwb", buffering=0)

def reply(conn):
    line = conn.readline()
    if line[:1] == b"$":
        n = int(line[1:])
        return line if n < 0 else conn.read(n + 2)[:-2]
    return line.rstrip(b"\r\n")

def call(conn, *args):
    conn.write(command(*args))
    return reply(conn)

def peak_rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return line.split(":")[1].strip()

stop = threading.Event()
waits = []
def pinger():
    conn = connect()
    while not stop.is_set():
        sent = time.monotonic()
        got = call(conn, "PING")
        waits.append((time.monotonic() - sent, got))
        time.sleep(0.05)
threading.Thread(target=pinger, daemon=True).start()

runner = connect()
failures = []
def run(name, script, expect):
    waits.clear()
    started = time.monotonic()
    got = call(runner, "EVAL", script, 0)
    elapsed = time.monotonic() - started
    time.sleep(0.2)
    longest = max(w for w, _ in waits)
    busy = sum(1 for _, g in waits if g.startswith(b"-BUSY"))
    ok = expect(got)
    print(f"{name}: {elapsed:.1f} s, reply {got[:90].decode(errors='replace')!r}; "
          f"the other client: longest wait {longest * 1000:.0f} ms, {busy} of {len(waits)} PINGs got -BUSY")
    if not ok:
        failures.append(f"{name}: unexpected reply {got[:200]!r}")
    if longest > LIMIT_S + 1:
        failures.append(f"{name}: the other client waited {longest:.1f} s")

oom = lambda r: r.startswith(b"-ERR Error running script ") and r.endswith(b", not enough memory")
run("200 million instructions", "local n = 0 for i = 1, 2e8 do n = n + 1 end return n",
    lambda r: r == b":200000000")
run("3 GB in three strings", "local t = {} for i = 1, 3 do t[i] = string.rep('x', 1e9) end return #t", oom)
run("a 3 GB string", "return #string.rep('xxx', 1e9)", oom)
run("doubling a string 40 times", "local s = 'x' for i = 1, 40 do s = s .. s end return #s", oom)
run("a table of 400 million integers", "local t = {} for i = 1, 4e8 do t[i] = i end return #t", oom)

def kill_later():
    time.sleep(LIMIT_S + 0.5)
    print("SCRIPT KILL:", call(connect(), "SCRIPT", "KILL").decode())
threading.Thread(target=kill_later, daemon=True).start()
run("an endless loop, SCRIPT KILL after the time limit", "while true do end",
    lambda r: r.startswith(b"-ERR Script killed by user with SCRIPT KILL"))
stop.set()
print(f"the server still answers: {call(runner, 'PING').decode()}; peak RSS {peak_rss()}")
if failures:
    sys.exit("\n".join(failures))
EOF
