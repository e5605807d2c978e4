#!/usr/bin/env python3
"""Records COMMAND INFO and COMMAND DOCS of every command locksim implements from a real
redis-server 7.0 into model/src/redis/commands/docs.json (RESP3 replies as tagged JSON trees),
so the model answers them byte for byte. Run it again after adding a command:

    python3 scripts/gen-command-docs.py            # starts redis-server on a free port
"""
import json
import os
import re
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "model/src/redis/commands/mod.rs")
OUT = os.path.join(ROOT, "model/src/redis/commands/docs.json")


def implemented():
    """Top-level names and subcommand full names from the command table, in table order."""
    text = open(TABLE).read()
    names = re.findall(r'(?:cmd|server_cmd|container)\(\s*"([a-z_\-|]+)"', text)
    names += re.findall(r'name: "([a-z_\-]+)",\s*\n\s*full_name', text)
    subs = re.findall(r'sub\(\s*"([a-z_\-]+\|[a-z_\-]+)"', text)
    seen, out = set(), []
    for n in names + subs:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.read()

    def line(self):
        while b"\r\n" not in self.buf:
            self.buf += self.s.recv(65536)
        i = self.buf.index(b"\r\n")
        l, self.buf = self.buf[:i], self.buf[i + 2:]
        return l

    def exact(self, n):
        while len(self.buf) < n + 2:
            self.buf += self.s.recv(65536)
        d, self.buf = self.buf[:n], self.buf[n + 2:]
        return d

    def read(self):
        l = self.line()
        t, rest = l[:1], l[1:].decode()
        if t == b"+":
            return {"t": "status", "v": rest}
        if t == b"-":
            raise RuntimeError(rest)
        if t == b":":
            return {"t": "int", "v": int(rest)}
        if t == b"$":
            return {"t": "bulk", "v": self.exact(int(rest)).decode()}
        if t == b"_":
            return {"t": "null"}
        if t in (b"*", b"~"):
            return {"t": "arr" if t == b"*" else "set", "v": [self.read() for _ in range(int(rest))]}
        if t == b"%":
            return {"t": "map", "v": [[self.read(), self.read()] for _ in range(int(rest))]}
        raise RuntimeError("unexpected %r" % l)


def main():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                conn = Conn(port)
                break
            except OSError:
                time.sleep(0.05)
        version = conn.send("HELLO", "3")
        conn.send("PING")
        info, docs = {}, {}
        for name in implemented():
            reply = conn.send("COMMAND", "INFO", name)
            if reply["v"][0]["t"] != "null":
                info[name] = reply["v"][0]
            reply = conn.send("COMMAND", "DOCS", name)
            if reply["v"]:
                docs[name] = reply["v"][0][1]
        json.dump({"info": info, "docs": docs}, open(OUT, "w"), indent=None, separators=(",", ":"), sort_keys=True)
        print("wrote %s: %d commands (%s)" % (OUT, len(info), version["v"][1][1]["v"]), file=sys.stderr)
    finally:
        server.kill()


if __name__ == "__main__":
    main()
