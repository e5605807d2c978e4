#!/usr/bin/env bash
# Connection scale of `locksim serve` (issue 13): 10,000 idle connections held open (each
# answered a PING first), then 1000 concurrent clients each running a lock cycle
# (SET NX PX, GET, EVAL compare-and-delete) 20 times while the idle ones stay connected; prints
# the server's resident memory and thread count at each step. Needs ~11,000 descriptors for
# each side (raised with ulimit -n up to the hard limit). Not part of CI. SERVER=redis-server
# measures redis-server the same way; LOCKSIM=path another locksim binary.
# Usage: bash scripts/serve-connections.sh [IDLE] [CONCURRENT]
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUSTFLAGS
idle=${1:-10000}
concurrent=${2:-1000}
ulimit -n "$(ulimit -Hn)"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
maxclients=$((idle + concurrent + 100))
if [ "${SERVER:-locksim}" = redis-server ]; then
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --maxclients "$maxclients" >/dev/null &
else
    locksim=${LOCKSIM:-./target/release/locksim}
    [ -n "${LOCKSIM:-}" ] || cargo build --release --quiet
    "$locksim" serve --port "$port" --maxclients "$maxclients" 2>/dev/null &
fi
pid=$!
trap 'kill "$pid" 2>/dev/null; wait 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done

python3 - "$port" "$pid" "$idle" "$concurrent" "${SERVER:-locksim serve}" <<'EOF'
import asyncio, sys, time

sys.path.insert(0, "scripts")
from resp import command

port, pid, idle, concurrent = (int(a) for a in sys.argv[1:5])
server = sys.argv[5]

def server_status():
    fields = {}
    for line in open(f"/proc/{pid}/status"):
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return f"RSS {fields['VmRSS']}, {fields['Threads']} threads"

async def reply(reader):
    line = await reader.readline()
    kind = line[:1]
    if kind == b"$":
        n = int(line[1:])
        return None if n < 0 else (await reader.readexactly(n + 2))[:-2]
    if kind == b"-":
        raise RuntimeError(line.decode())
    return line[1:].strip()

async def main():
    print(f"{server}, pid {pid}: at start {server_status()}")
    conns = []
    started = time.monotonic()
    for i in range(idle):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(command("PING"))
        conns.append((r, w))
    for r, w in conns:
        await w.drain()
        assert await reply(r) == b"PONG"
    print(f"{idle} idle connections open and answered in {time.monotonic() - started:.1f} s: {server_status()}")

    release = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
    async def client(n):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        for cycle in range(20):
            key, token = f"lock:{n % 50}", f"{n}-{cycle}"
            w.write(command("SET", key, token, "NX", "PX", 1000))
            w.write(command("GET", key))
            w.write(command("EVAL", release, 1, key, token))
            await w.drain()
            got = await reply(r)
            owner = await reply(r)
            deleted = int(await reply(r))
            assert got in (b"OK", None) and deleted == (1 if got == b"OK" else 0), (got, owner, deleted)
        w.close()
        return 20
    started = time.monotonic()
    done = sum(await asyncio.gather(*(client(n) for n in range(concurrent))))
    elapsed = time.monotonic() - started
    print(f"{concurrent} concurrent clients ran {done} lock cycles ({3 * done} commands) in {elapsed:.1f} s "
          f"with the idle ones still open: {server_status()}")
    for r, w in conns[:10]:
        w.write(command("PING"))
        await w.drain()
        assert await reply(r) == b"PONG"
    print("the idle connections still answer")
    for _, w in conns:
        w.close()

asyncio.run(main())
EOF
