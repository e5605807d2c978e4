"""locksim live adapter for pottery's Redlock (pottery 3.0.1), in the library's own idiom.

    locksim live SCENARIO -- python3 examples/live/pottery_redlock.py

Reads one JSON operation a line on stdin, answers on stdout (docs/live.md); logs go to stderr.
Every master of the scenario is one of the Redlock's `masters` (the key is `redlock:<lock>`).
pottery extends a lease at most `num_extensions` times (3 by default: pottery/redlock.py,
`_NUM_EXTENSIONS`), then raises TooManyExtensions: an `extend` answers fail then, as the
library tells its caller the lock is not extended.
"""
import json
import sys
import time

from pottery import Redlock
from pottery.exceptions import PrimitiveError
from redis import Redis
from redis.exceptions import ConnectionError, TimeoutError


def answer(request, kind, **fields):
    sys.stdout.write(json.dumps({"re": request["id"], "type": kind, **fields}) + "\n")
    sys.stdout.flush()


def connect(address, timeout):
    host, port = address.rsplit(":", 1)
    return Redis(host=host, port=int(port), socket_timeout=timeout, socket_connect_timeout=timeout)


masters = resource = lock = value = None
fencing = False
fence = None
for line in sys.stdin:
    request = json.loads(line)
    op = request["op"]
    try:
        if op == "init":
            timeout = request["command_timeout_ms"] / 1000
            masters = {connect(address, timeout) for address in request["redis"]}
            resource = connect(request["resource"], timeout)
            fencing = request["fencing"]
            answer(request, "ok")
        elif op == "acquire":
            lock = Redlock(key=request["lock"], masters=masters,
                           auto_release_time=request["ttl_ms"] / 1000)
            if lock.acquire(timeout=request["wait_ms"] / 1000):
                fence = next(iter(masters)).incr(request["lock"] + ":fence") if fencing else None
                answer(request, "ok", token=lock._uuid, fence=fence)
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
            lock.extend()
            answer(request, "ok")
        else:
            answer(request, "fail", error=f"unknown op {op}")
    except (TimeoutError, ConnectionError) as e:
        # The command may have run: the outcome is unknown.
        print(f"{op}: {e!r}", file=sys.stderr)
        answer(request, "info", error=str(e))
    except PrimitiveError as e:
        # QuorumNotAchieved, TooManyExtensions, ExtendUnlockedLock, ReleaseUnlockedLock.
        print(f"{op}: {e!r}", file=sys.stderr)
        answer(request, "fail", error=repr(e))
