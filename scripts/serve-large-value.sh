#!/usr/bin/env bash
# A large value against `locksim serve` and redis-server (issue 31): one client SETs a value of
# SIZE_MB (default 500) while another sends PING in a loop; prints how long the SET took, the
# longest PING wait during it, the server's peak resident memory (VmHWM) and its resident memory
# 2 s after DEL. Needs ~4x SIZE_MB of free memory. Not part of CI. LOCKSIM=path measures another
# locksim binary (e.g. main's, for a before/after).
# Usage: bash scripts/serve-large-value.sh [SIZE_MB]
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUSTFLAGS
size_mb=${1:-500}
locksim=${LOCKSIM:-./target/release/locksim}
[ -n "${LOCKSIM:-}" ] || cargo build --release --quiet
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true' EXIT

measure() {
    local name=$1 port=$2
    for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
    python3 - "$name" "$port" "$pid" "$size_mb" <<'EOF'
import socket, sys, threading, time

name, port, pid, size_mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def status(field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    raise KeyError(field)

def connect():
    return socket.create_connection(("127.0.0.1", port))

def call(conn, request, expected):
    conn.sendall(request)
    got = b""
    while len(got) < len(expected):
        chunk = conn.recv(65536)
        if not chunk:
            raise RuntimeError(f"{name} closed the connection")
        got += chunk
    assert got == expected, got

value = b"v" * (size_mb << 20)
request = b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n" % len(value)
pinger, setter = connect(), connect()
call(pinger, b"PING\r\n", b"+PONG\r\n")
at_start = status("VmRSS")
done = threading.Event()
longest = [0.0]

def ping_loop():
    while not done.is_set():
        started = time.monotonic()
        call(pinger, b"PING\r\n", b"+PONG\r\n")
        longest[0] = max(longest[0], time.monotonic() - started)
        time.sleep(0.01)

thread = threading.Thread(target=ping_loop)
thread.start()
started = time.monotonic()
setter.sendall(request)
setter.sendall(memoryview(value))
call(setter, b"\r\n", b"+OK\r\n")
took = time.monotonic() - started
done.set()
thread.join()
peak = status("VmHWM")
call(setter, b"DEL big\r\n", b":1\r\n")
time.sleep(2)
after = status("VmRSS")
print(f"{name}: SET of {size_mb} MB in {took:.2f} s, longest PING wait {longest[0]:.2f} s, "
      f"resident {at_start} MB at start, peak {peak} MB, {after} MB 2 s after DEL")
EOF
}

port=$(free_port)
"$locksim" serve --port "$port" 2>/dev/null &
pid=$!
measure "locksim serve" "$port"
kill "$pid"; wait "$pid" 2>/dev/null || true

port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
pid=$!
measure "redis-server $(redis-server --version | grep -o 'v=[0-9.]*')" "$port"
kill "$pid"; wait "$pid" 2>/dev/null || true
pid=
