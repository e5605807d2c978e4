#!/usr/bin/env python3
"""Mutation fuzz of the scenario catalog: bad input must never hang, abort or panic `locksim`.

Each mutant is a catalog scenario with one or two changes — numbers to extremes, negatives,
huge values and fractions; strings to empty, long, Unicode or control characters; arrays
emptied, duplicated or grown; fields dropped, added or given another type — plus the issue-17
cases (a 10^15 ms run with 2^32-1 acquisitions, empty or duplicated partition groups, a fault
every millisecond, a 50 MB string, seed ranges to 2^64-1, a zero-latency loop, an extension
every millisecond, a 1 ms lease). Each runs as `locksim run MUTANT` under a bound of CPU time
and a 4 GiB address-space limit (so a runaway allocation aborts instead of swapping) and is
classified:

  error     exit 2, stderr `locksim: error: FILE: ...` naming the mutant file (a clean error)
  ok        exit 0: the mutant was valid and ran
  unclear   exit 2 without the file named, or any other exit code
  panic     stderr says a thread panicked
  abort     killed by a signal (SIGABRT after a failed allocation, SIGSEGV, ...)
  overtime  more CPU time than the bound (BOUND CPU-seconds per scheme run; `"schemes": "all"`
            is 24 runs), or still running after ten times that in wall-clock time

It prints the counts, the slowest run per scheme and each bad mutant (kept in --keep DIR for
reproduction); the exit status is 1 if any mutant is unclear, panic, abort or overtime. Mutant
I of a file is drawn from (--seed, file, I), so a run is reproducible. This checkout's binary is
built first (`cargo build --release`), unless --binary names another (e.g. an older build, to
compare).

Usage: python3 scripts/fuzz-scenarios.py [--mutants-per-scenario N] [--minutes M] [--bound-s S]
                                         [--jobs J] [--seed K] [--keep DIR] [--binary PATH]
                                         [FILE...]
"""

import argparse
import copy
import glob
import json
import os
import random
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


def run_one(binary, path, doc, bound_s):
    """Runs `locksim run` on one mutant; returns (class, CPU-seconds, detail). The bound is CPU
    time (user + system, every thread), which other work on the machine does not stretch as it
    does wall-clock time; a wall-clock guard ten times longer catches a run that hangs idle."""
    cpu_bound = bound_s * schemes_run(doc)
    guard = 10 * cpu_bound
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([binary, "run", path], stdout=subprocess.DEVNULL, stderr=err,
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
    seconds = usage.ru_utime + usage.ru_stime
    first = stderr.strip().splitlines()[0][:300] if stderr.strip() else ""
    if seconds > cpu_bound or proc.returncode == -signal.SIGXCPU:
        return "overtime", seconds, f"{seconds:.1f} CPU-s (bound {cpu_bound:g} s)"
    if "panicked" in stderr:
        return "panic", seconds, first
    if proc.returncode < 0:
        return "abort", seconds, f"signal {-proc.returncode}: {first}"
    if proc.returncode == 0:
        return "ok", seconds, ""
    if proc.returncode == 2 and stderr.startswith(f"locksim: error: {path}: "):
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
    args = parser.parse_args()

    binary = args.binary or BINARY
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
        path = os.path.join(tmp, f"m{index:03d}-{name}")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
        verdict, seconds, detail = run_one(binary, path, doc, args.bound_s)
        seconds /= schemes_run(doc)
        if verdict in ("ok", "error") or not args.keep:
            os.unlink(path)
        else:
            os.replace(path, os.path.join(args.keep, os.path.basename(path)))
        return name, description, verdict, seconds, detail, os.path.basename(path)

    counts = {k: 0 for k in ("error", "ok", "unclear", "panic", "abort", "overtime")}
    bad = []
    slowest = (0.0, "")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for result in pool.map(job, work):
            if result is None:
                continue
            name, description, verdict, seconds, detail, kept = result
            counts[verdict] += 1
            if seconds > slowest[0]:
                slowest = (seconds, f"{name}: {description} ({verdict})")
            if verdict not in ("ok", "error"):
                bad.append(f"{verdict:8} {kept}: {name}: {description}: {detail}")
                print(bad[-1], file=sys.stderr, flush=True)
    total = sum(counts.values())
    print(f"fuzz: {total} of {len(work)} mutants of {len(files)} scenarios in "
          f"{time.monotonic() - started:.0f} s (seed {args.seed}, bound {args.bound_s:g} CPU-s per scheme run)")
    print("  " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print(f"  slowest per scheme run: {slowest[0]:.1f} CPU-s, {slowest[1]}")
    for line in bad:
        print("  " + line)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
