"""An unmodified service for `locksim live --observe`: no driver protocol, only the environment.

    locksim live SCENARIO --observe -- python3 examples/live/observed_service.py

Each copy takes redis-py's Lock (500 ms lease) three times around a read-modify-write of the
resource. The first copy to get it stalls inside the lock for STALL_MS (default 1500: three
leases, a long GC pause of its own), so the other copy takes the expired lock meanwhile: locksim
sees both holds on the server and the lost update on the resource. STALL_MS=0 is the control.
"""
import os
import time

import redis
from redis.exceptions import LockError


def connect(address):
    host, port = address.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=5)


r = connect(os.environ["LOCKSIM_REDIS"].split(",")[0])
resource = connect(os.environ["LOCKSIM_RESOURCE"])
stall_s = int(os.environ.get("STALL_MS", "1500")) / 1000
for turn in range(3):
    lock = r.lock("lock", timeout=0.5, blocking_timeout=5)
    if not lock.acquire():
        print("not acquired within 5 s", flush=True)
        continue
    value = int(resource.execute_command("LOCKSIM.READ"))
    # Only the first holder of the run stalls (the first to set this marker key).
    if stall_s and r.set("stalled", os.environ["LOCKSIM_CLIENT"], nx=True):
        time.sleep(stall_s)
    else:
        time.sleep(0.02)
    resource.execute_command("LOCKSIM.WRITE", value - 1)
    try:
        lock.release()
    except LockError as e:
        print(f"release: {e}", flush=True)
