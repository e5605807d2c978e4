#!/usr/bin/env python3
"""Mutation fuzz of the scenario catalog: bad input must never hang, abort or panic `locksim`.

Each mutant is a catalog scenario with one or two changes — numbers to extremes, negatives,
huge values and fractions; strings to empty, long, Unicode or control characters; arrays
emptied, duplicated or grown; fields dropped, added or given another type — plus the issue-17
cases (a 10^15 ms run with 2^32-1 acquisitions, empty or duplicated partition groups, a fault
every millisecond, a 50 MB string, seed ranges to 2^64-1, a zero-latency loop, an extension
every millisecond, a 1 ms lease). A share of the random mutants (--bytes-share) is then
changed as text, where a JSON document cannot go (issue 31): bytes after the object (a word, a
second copy, a NUL), a key given twice (at the top, in `scheme`, in `nemesis`), the text cut
short, Unicode or invalid UTF-8 inserted, a number replaced by an extreme that only text can
hold (1e400, -0, 2^64, 1e-400, 123456789012345678901234567890). Each runs under one command
drawn from --commands (`run FILE`, `check FILE --seeds 0..0`, `sweep FILE --seeds 0..0 --out
TMP`, `shrink FILE --seed 0 --max-runs 3 --out TMP`) with --jobs 1, under a bound of CPU time
and a 4 GiB address-space limit (so a runaway allocation aborts instead of swapping), and is
classified:

  error     exit 2, stderr `locksim: error: ...` naming the mutant file (a clean error)
  ok        exit 0: the mutant was valid and ran (for `check`, also exit 1: expectations
            not met)
  unclear   exit 2 without the file named, or any other exit code
  panic     stderr says a thread panicked
  abort     killed by a signal (SIGABRT after a failed allocation, SIGSEGV, ...)
  overtime  more CPU time than the bound (BOUND CPU-seconds per scheme run; `"schemes": "all"`
            is 24 runs; `shrink` makes up to 3), or still running after ten times that in
            wall-clock time

It prints the counts, the slowest run per scheme and each bad mutant (kept in --keep DIR for
reproduction); the exit status is 1 if any mutant is unclear, panic, abort or overtime. Mutant
I of a file is drawn from (--seed, file, I), so a run is reproducible. This checkout's binary is
built first (`cargo build --release`), unless --binary names another (e.g. an older build, to
compare).

Usage: python3 scripts/fuzz-scenarios.py [--mutants-per-scenario N] [--minutes M] [--bound-s S]
                                         [--jobs J] [--seed K] [--keep DIR] [--binary PATH]
                                         [--commands run,check,sweep,shrink] [--bytes-share F]
                                         [FILE...]
"""

import argparse
import copy
import glob
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "target", "release", "locksim")
ADDRESS_SPACE_BYTES = 4 << 30

NUMBERS = [0, -1, 1, 2, 3, 7, 2**31 - 1, 2**32 - 1, 2**32, 2**53, 2**63 - 1, 2**64 - 1, 2**64,
           10**15, -10**15, -(2**63), 1e308, -1e308, 0.5, 1e-9, 1000000, 60000, 3600000]
STRINGS = ["", " ", "é🔒ü", "\u0000\r\n", "\ud7ff\ue000", "x" * 100_000, "🔒" * 30_000,
           "client-1", "redis-1", "sentinel-1", "resource", "nemesis", "{", "}", "{key}",
           "0..18446744073709551615", "18446744073709551615..0", "5..5", "-1", "1e3",
           "return redis.call('ping')", "while true do end", "set-nx-px-lua", "script"]
VALUES = [None, True, False, 0, -1, 2**64, 1.5, "", "x", [], {}, [1, 2], [[]], {"x": 1},
          [-5, 5], [0, 0], [2**63, 2**64]]


def paths(value, path=()):
    """Every (path, value) of a JSON document, the root included."""
    yield path, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths(child, path + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from paths(child, path + (i,))


def get(doc, path):
    for step in path:
        doc = doc[step]
    return doc


def put(doc, path, value):
    if not path:
        return value
    get(doc, path[:-1])[path[-1]] = value
    return doc


def mutate_once(rng, doc):
    """One random change somewhere in `doc` (returned, maybe a new root), and its description."""
    path, value = rng.choice(list(paths(doc)))
    where = ".".join(str(p) for p in path) or "(root)"
    parent = get(doc, path[:-1]) if path else None
    choice = rng.random()
    if isinstance(value, bool) or value is None:
        new = rng.choice(VALUES)
    elif isinstance(value, (int, float)) and choice < 0.8:
        if rng.random() < 0.5:
            new = rng.choice(NUMBERS)
        else:
            new = rng.choice([value * 2, value // 2 if isinstance(value, int) else value / 2,
                              value + 1, value - 1, -value, value * 10, value * 1000, value * 10**9])
    elif isinstance(value, str) and choice < 0.7:
        new = rng.choice(STRINGS)
    elif isinstance(value, list) and choice < 0.7:
        op = rng.randrange(5)
        if op == 0:
            new = []
        elif op == 1 and value:
            new = value + [copy.deepcopy(rng.choice(value)) for _ in range(rng.choice([1, 2, 50]))]
        elif op == 2:
            new = value * rng.choice([2, 3, 200])
        elif op == 3:
            new = [[]] * rng.choice([1, 2]) if rng.random() < 0.5 else [value]
        else:
            new = list(reversed(value))
    elif isinstance(value, dict) and choice < 0.7 and value:
        key = rng.choice(list(value))
        if rng.random() < 0.5:
            del value[key]
            return doc, f"drop {where}.{key}"
        value["unknown_" + key] = value[key]
        return doc, f"add {where}.unknown_{key}"
    elif parent is not None and isinstance(parent, dict) and rng.random() < 0.3:
        del parent[path[-1]]
        return doc, f"drop {where}"
    else:
        new = rng.choice(VALUES)
    shown = json.dumps(new)
    if len(shown) > 40:
        shown = shown[:40] + f"… ({len(shown)} chars)"
    return put(doc, path, new), f"{where} = {shown}"


def targeted(doc):
    """The issue's cases, applied to one scenario: (mutant, description) pairs."""
    out = []

    def variant(description, change):
        d = copy.deepcopy(doc)
        change(d)
        out.append((d, description))

    def huge_run(d):
        d["duration_ms"] = 10**15
        d.setdefault("clients", {})["acquisitions"] = 2**32 - 1

    def partition(groups):
        def change(d):
            d["faults"] = [{"kind": "partition", "groups": groups, "at_ms": 10, "duration_ms": 100}]
        return change

    def every_ms(d):
        d["nemesis"] = {k: {"every_ms": [1, 1], "duration_ms": [1, 1]}
                        for k in ("pause", "partition", "crash", "isolate")}
        d["nemesis"]["heal_at_ms"] = 1000
        d["duration_ms"] = 1000 + 10**6
        d["liveness_window_ms"] = 1000

    def big_value(d):
        d.pop("schemes", None)
        d["scheme"] = {"name": "set", "value": "x" * (50 << 20)}

    def zero_time(d):
        d["network"] = {"latency_ms": [0, 0]}
        c = d.setdefault("clients", {})
        c.update({"hold_ms": 0, "think_ms": 0, "acquisitions": 2**32 - 1, "count": 1000})

    def seeds(d):
        d["seeds"] = "0..18446744073709551615"

    def partition_storm(d):
        d.setdefault("clients", {})["count"] = 1000
        d["nemesis"] = {"partition": {"every_ms": [10, 20], "duration_ms": [5, 10]}}
        d["duration_ms"] = 60000
        d["liveness_window_ms"] = 1000

    def jump_storm(d):
        d["nemesis"] = {"clock_jump": {"every_ms": [10, 10], "delta_ms": [31536000000, 31536000000]},
                        "heal_at_ms": 3_500_000}
        d["duration_ms"] = 3_600_000
        d["liveness_window_ms"] = 1000

    def extend_storm(d):
        d.setdefault("clients", {})["extend"] = {"every_ms": 1}
        d["clients"]["hold_ms"] = 3_000_000
        d["duration_ms"] = 3_600_000

    def tiny_lease(d):
        d["lease_ms"] = 1
        rows = d.get("schemes") if isinstance(d.get("schemes"), list) else [d.get("scheme")]
        for row in rows:
            if isinstance(row, dict):
                row.pop("ttl_ms", None)
        d["duration_ms"] = 3_600_000

    variant("duration_ms = 10^15, clients.acquisitions = 2^32-1", huge_run)
    variant("partition groups [[], []]", partition([[], []]))
    variant("partition groups [[client-1, client-1]]", partition([["client-1", "client-1"]]))
    variant("partition groups [[client-1], [client-1]]", partition([["client-1"], ["client-1"]]))
    variant("nemesis every_ms [1, 1] for a million ms", every_ms)
    variant("scheme set with a 50 MB value", big_value)
    variant("zero latency, no hold, no think, 1000 clients, 2^32-1 acquisitions", zero_time)
    variant("seeds 0..2^64-1", seeds)
    variant("a clock jump of a year every 10 ms for an hour", jump_storm)
    variant("1000 clients, a partition every 10 ms", partition_storm)
    variant("clients.extend every 1 ms of a 50-minute hold", extend_storm)
    variant("lease_ms = 1 for an hour", tiny_lease)
    return out


# Numbers only JSON text can hold: out of f64's range, below its precision, beyond u64.
TEXT_NUMBERS = ["1e400", "-1e400", "1e-400", "-0", "-0.0", "18446744073709551616",
                "123456789012345678901234567890", "9007199254740993", "0e0", "1E+2"]
UNICODE = ["é", "🔒", "\u2028", "\ufeff", "\u0000"]


def mutate_text(rng, text):
    """One change to the scenario's text (str), as bytes, and its description."""
    data = text.encode("utf-8")
    op = rng.randrange(7)
    if op == 0:
        tail = rng.choice([b" x", b"\n" + data, b"\x00", b"}", b" {}", b" 1", b"\n//c"])
        return data + tail, f"bytes after the object: {tail[:20]!r}"
    if op == 1:
        # A key given twice: at the top, or inside the first `scheme` / `nemesis` object.
        anchors = [m for m in (b'"scheme": {', b'"nemesis": {') if m in data]
        anchor = rng.choice(anchors) if anchors and rng.random() < 0.7 else b"{"
        at = data.index(anchor) + len(anchor)
        inner = data[at:].lstrip()
        if inner.startswith(b'"'):
            key = inner[:inner.index(b'"', 1) + 1]
            dup = key + b": " + rng.choice([b"1", b'"x"', b"null", b"{}"]) + b", "
        else:
            dup = b'"name": "twice", "name": "again", '
        return data[:at] + b" " + dup + data[at:], f"key given twice after {anchor.decode()}"
    if op == 2:
        cut = rng.randrange(len(data))
        return data[:cut], f"cut at byte {cut} of {len(data)}"
    if op == 3:
        at = rng.randrange(len(data) + 1)
        piece = rng.choice(UNICODE).encode("utf-8") if rng.random() < 0.5 else \
            rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"])
        return data[:at] + piece + data[at:], f"{piece!r} inserted at byte {at}"
    if op == 4:
        numbers = [(m.start(), m.end()) for m in re.finditer(
            rb"(?<![\w.\"])-?\d+(\.\d+)?([eE][+-]?\d+)?(?![\w\"])", data)]
        if numbers:
            start, end = rng.choice(numbers)
            new = rng.choice(TEXT_NUMBERS).encode()
            return data[:start] + new + data[end:], \
                f"number at byte {start} ({data[start:end].decode()}) = {new.decode()}"
    if op == 5:
        return b"\xef\xbb\xbf" + data, "a UTF-8 byte-order mark first"
    depth = rng.choice([200, 10_000])
    return data[:-1] + b', "deep": ' + b"[" * depth + b"]" * depth + b"}", f"nesting {depth} deep"


def mutant(file, index, seed):
    """Mutant `index` of `file`: the targeted cases first, then random ones, each drawn from its
    own stream (so any mutant can be made again without the others, and none is kept in memory
    before it runs). Returns (mutant document, description)."""
    with open(file, encoding="utf-8") as f:
        base = json.load(f)
    cases = targeted(base)
    if index < len(cases):
        return cases[index]
    rng = random.Random(f"{seed}/{os.path.basename(file)}/{index}")
    doc = base
    # Most mutants run one scheme of a `schemes` list, so the bound is per scheme.
    if isinstance(doc.get("schemes"), list) and doc["schemes"] and rng.random() < 0.8:
        doc["schemes"] = [rng.choice(doc["schemes"])]
    changes = []
    for _ in range(1 if rng.random() < 0.7 else 2):
        doc, change = mutate_once(rng, doc)
        changes.append(change)
    return doc, "; ".join(changes)


TARGETED = len(targeted({}))


def limits(cpu_s):
    """The child's limits: 4 GiB of address space, and `cpu_s` CPU-seconds (then SIGXCPU)."""
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    return apply


# `"schemes": "all"` runs every row of the fault matrix (README, "Which lock survives what").
MATRIX_ROWS = 24


def schemes_run(doc):
    """How many scheme runs `locksim run` makes of the mutant: the bound is per run."""
    if isinstance(doc, dict) and isinstance(doc.get("schemes"), list):
        return max(1, len(doc["schemes"]))
    if isinstance(doc, dict) and doc.get("schemes") == "all":
        return MATRIX_ROWS
    return 1


def command_line(binary, command, path, out):
    """The invocation of `command` on the mutant at `path`; `out` is a scratch path."""
    return {
        "run": [binary, "run", path],
        "check": [binary, "check", path, "--seeds", "0..0", "--jobs", "1"],
        "sweep": [binary, "sweep", path, "--seeds", "0..0", "--jobs", "1", "--out", out],
        "shrink": [binary, "shrink", path, "--seed", "0", "--max-runs", "3", "--out", out],
    }[command]


def run_one(binary, command, path, doc, bound_s):
    """Runs `command` on one mutant; returns (class, CPU-seconds, detail). The bound is CPU
    time (user + system, every thread), which other work on the machine does not stretch as it
    does wall-clock time; a wall-clock guard ten times longer catches a run that hangs idle."""
    cpu_bound = bound_s * schemes_run(doc) * (3 if command == "shrink" else 1)
    guard = 10 * cpu_bound
    out = path + ".out"
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command_line(binary, command, path, out),
                                stdout=subprocess.DEVNULL, stderr=err,
                                preexec_fn=limits(int(cpu_bound) + 1))
        start = time.monotonic()
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > guard:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = -9
                return "overtime", usage.ru_utime + usage.ru_stime, \
                    f"still running after {guard:g} s of wall-clock time"
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    shutil.rmtree(out, ignore_errors=True)
    if os.path.exists(out):
        os.unlink(out)
    seconds = usage.ru_utime + usage.ru_stime
    first = stderr.strip().splitlines()[0][:300] if stderr.strip() else ""
    if seconds > cpu_bound or proc.returncode == -signal.SIGXCPU:
        return "overtime", seconds, f"{seconds:.1f} CPU-s (bound {cpu_bound:g} s)"
    if "panicked" in stderr:
        return "panic", seconds, first
    if proc.returncode < 0:
        return "abort", seconds, f"signal {-proc.returncode}: {first}"
    if proc.returncode == 0 or (command == "check" and proc.returncode == 1):
        return "ok", seconds, ""
    if proc.returncode == 2 and stderr.startswith("locksim: error: ") and path in first:
        return "error", seconds, first
    return "unclear", seconds, f"exit {proc.returncode}: {first}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help="scenario files (default: scenarios/**/*.json)")
    parser.add_argument("--mutants-per-scenario", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=5.0,
                        help="stop starting new mutants after this long")
    parser.add_argument("--bound-s", type=float, default=20.0,
                        help="CPU-seconds bound per scheme run of a mutant")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--keep", default=None, help="copy every bad mutant here")
    parser.add_argument("--binary", default=None,
                        help="an already built locksim to try (default: build this checkout's)")
    parser.add_argument("--commands", default="run",
                        help="commands to draw from, comma-separated: run, check, sweep, shrink")
    parser.add_argument("--bytes-share", type=float, default=0.0,
                        help="share of the random mutants also changed as text (0 to 1)")
    args = parser.parse_args()

    binary = args.binary or BINARY
    commands = args.commands.split(",")
    unknown = set(commands) - {"run", "check", "sweep", "shrink"}
    if unknown:
        parser.error(f"--commands: unknown {sorted(unknown)}")
    if not args.binary:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True,
                       env={k: v for k, v in os.environ.items() if k != "RUSTFLAGS"})
    files = args.files or sorted(
        f for f in glob.glob(os.path.join(ROOT, "scenarios", "**", "*.json"), recursive=True)
        if not f.endswith(".schema.json"))
    work = [(file, index) for file in files
            for index in range(TARGETED + args.mutants_per_scenario)]
    random.Random(args.seed).shuffle(work)
    deadline = time.monotonic() + args.minutes * 60
    tmp = tempfile.mkdtemp(prefix="locksim-fuzz-")
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)

    def job(item):
        file, index = item
        if time.monotonic() > deadline:
            return None
        name = os.path.basename(file)
        doc, description = mutant(file, index, args.seed)
        rng = random.Random(f"{args.seed}/{name}/{index}/text")
        data = json.dumps(doc, ensure_ascii=False, indent=1).encode("utf-8")
        if index >= TARGETED and rng.random() < args.bytes_share:
            data, change = mutate_text(rng, data.decode("utf-8"))
            description += "; " + change
        command = rng.choice(commands)
        description = f"{command}: {description}"
        path = os.path.join(tmp, f"m{index:03d}-{name}")
        with open(path, "wb") as f:
            f.write(data)
        verdict, seconds, detail = run_one(binary, command, path, doc, args.bound_s)
        # shrink makes up to three runs of each scheme (--max-runs 3), as its bound says.
        seconds /= schemes_run(doc) * (3 if command == "shrink" else 1)
        if verdict in ("ok", "error") or not args.keep:
            os.unlink(path)
        else:
            os.replace(path, os.path.join(args.keep, os.path.basename(path)))
        return name, description, verdict, seconds, detail, os.path.basename(path)

    counts = {k: 0 for k in ("error", "ok", "unclear", "panic", "abort", "overtime")}
    by_command = {c: 0 for c in commands}
    bad = []
    slowest = (0.0, "")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for result in pool.map(job, work):
            if result is None:
                continue
            name, description, verdict, seconds, detail, kept = result
            counts[verdict] += 1
            by_command[description.split(":")[0]] += 1
            if seconds > slowest[0]:
                slowest = (seconds, f"{name}: {description} ({verdict})")
            if verdict not in ("ok", "error"):
                bad.append(f"{verdict:8} {kept}: {name}: {description}: {detail}")
                print(bad[-1], file=sys.stderr, flush=True)
    total = sum(counts.values())
    print(f"fuzz: {total} of {len(work)} mutants of {len(files)} scenarios in "
          f"{time.monotonic() - started:.0f} s (seed {args.seed}, bound {args.bound_s:g} CPU-s per scheme run)")
    print("  " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print("  by command: " + ", ".join(f"{k} {v}" for k, v in by_command.items()))
    print(f"  slowest per scheme run: {slowest[0]:.1f} CPU-s, {slowest[1]}")
    for line in bad:
        print("  " + line)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
