"""locksim live adapter for redis-py's Lock (redis.lock.Lock), in the library's own idiom.

    locksim live SCENARIO -- python3 examples/live/redis_py_lock.py

Reads one JSON operation a line on stdin, answers on stdout (docs/live.md); logs go to stderr.
With the scenario's resource fenced, the critical section passes a fencing token: an INCR of
`<lock>:fence` right after acquiring (Kleppmann 2016, "Making the lock safe with fencing").
"""
import json
import os
import select
import sys
import time

# Under a client clock fault locksim preloads libfaketime with FAKETIME_DONT_FAKE_MONOTONIC=1.
# libfaketime 0.9.10 (Debian 12's) then breaks clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME),
# which time.sleep uses from Python 3.11 on: EINVAL (wolfcw/libfaketime#426, fixed after
# 0.9.10). Sleep on a relative timeout instead, before redis-py binds time.sleep (redis/retry.py).
if "FAKETIME_TIMESTAMP_FILE" in os.environ:
    def relative_sleep(seconds):
        select.select([], [], [], seconds)

    time.sleep = relative_sleep

import redis  # noqa: E402
from redis.sentinel import Sentinel  # noqa: E402
from redis.exceptions import LockError, LockNotOwnedError, TimeoutError, ConnectionError  # noqa: E402


def answer(request, kind, **fields):
    sys.stdout.write(json.dumps({"re": request["id"], "type": kind, **fields}) + "\n")
    sys.stdout.flush()


def connect(address, timeout):
    host, port = address.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=timeout,
                       socket_connect_timeout=timeout)


r = resource = lock = value = None
fencing = False
fence = None
for line in sys.stdin:
    request = json.loads(line)
    op = request["op"]
    try:
        if op == "init":
            timeout = request["command_timeout_ms"] / 1000
            if request["sentinels"]:
                sentinels = [(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1]))
                             for a in request["sentinels"]]
                sentinel = Sentinel(sentinels, socket_timeout=timeout)
                r = sentinel.master_for(request["masters"][0], socket_timeout=timeout)
            else:
                r = connect(request["redis"][0], timeout)
            resource = connect(request["resource"], timeout)
            fencing = request["fencing"]
            answer(request, "ok")
        elif op == "acquire":
            lock = r.lock(request["lock"], timeout=request["ttl_ms"] / 1000)
            if lock.acquire(blocking_timeout=request["wait_ms"] / 1000):
                fence = r.incr(request["lock"] + ":fence") if fencing else None
                answer(request, "ok", token=lock.local.token.decode(), fence=fence)
            else:
                answer(request, "fail", error="not acquired within wait_ms")
        elif op == "work":
            # One critical section, or a part of one split by extends (read first, write last).
            extra = [fence] if fence is not None else []
            if request.get("read", True):
                value = int(resource.execute_command("LOCKSIM.READ", *extra))
            time.sleep(request["hold_ms"] / 1000)
            if request.get("write", True):
                resource.execute_command("LOCKSIM.WRITE", value - 1, *extra)
            answer(request, "ok")
        elif op == "release":
            lock.release()
            answer(request, "ok")
        elif op == "extend":
            # redis-py's default: ttl_ms more on the lease left (redis/lock.py, Lock.extend).
            lock.extend(request["ttl_ms"] / 1000)
            answer(request, "ok")
        else:
            answer(request, "fail", error=f"unknown op {op}")
    except (TimeoutError, ConnectionError) as e:
        # The command may have run: the outcome is unknown. (Even MasterNotFoundError: redis-py
        # retries a command whose connection broke, and raises the last attempt's error.)
        print(f"{op}: {e!r}", file=sys.stderr)
        answer(request, "info", error=str(e))
    except (LockError, LockNotOwnedError, redis.ResponseError) as e:
        print(f"{op}: {e!r}", file=sys.stderr)
        answer(request, "fail", error=str(e))
