"""The real lock libraries of the conformance suite (sim/src/conform/), unmodified, driven one
operation at a time. locksim starts this with the library's own Python (a venv under
target/client-suites/) and talks JSON lines:

  stdin  line 1: {"library": "redis-py", "ports": [p1, ...], "key": "lock", "config": {...}}
  stdout:        {"ready": true} once the library is set up and connected
  stdin  then:   {"op": "acquire" | "release" | "extend", "lock": 0, "until_ms": n?}
  stdout:        {"outcome": "granted" | "refused" | "error" | "pending", "detail": "..."}
  stdin  last:   {"op": "drain", "limit_ms": n}
  stdout:        {"drained": true | false, "detail": "..."} once the library's background calls
                 are done (see `drain`), or after limit_ms

`granted`: the call succeeded (acquired, released, extended). `refused`: the library said no
(acquire returned False, a LockError / LockNotOwnedError). `error`: any other exception
reached the caller (a timeout, a connection error). `pending`: the call had not returned
`until_ms` after it started (a lock that waits for ever), it keeps running.

Every operation runs on one worker thread, as one program would call the library (redis-py
keeps a lock's token in a `threading.local`). Before the first operation the client connects
(a PING, not a command of the lock), so the first one does not pay for the connection.
"""
import json
import queue
import sys
import threading
import time
import traceback
import types


def outcome(kind, detail=""):
    return {"outcome": kind, "detail": detail}


def classify(exc, refusals):
    name = type(exc).__name__
    kind = "refused" if name in refusals else "error"
    return outcome(kind, f"{name}: {exc}")


class LockObject:
    """A library with one lock object per `lock` (`self.lock(n)`) whose `release()` and
    `extend()` take no arguments."""

    def keep(self, setup, *clients):
        """Connects the clients (a PING each) and keeps what the lock objects are made from."""
        for client in clients:
            client.ping()
        self.cfg = setup["config"]
        self.key = setup["key"]
        self.locks = {}

    def connect(self, setup):
        """One redis-py `StrictRedis` client on the first port, with the situation's
        `socket_timeout` if any (None: redis-py's default, no timeout)."""
        from redis import StrictRedis

        self.client = StrictRedis(
            host="127.0.0.1",
            port=setup["ports"][0],
            socket_timeout=setup["config"].get("socket_timeout"),
        )
        self.keep(setup, self.client)

    def release(self, n):
        self.lock(n).release()
        return outcome("granted", "released")

    def extend(self, n):
        self.lock(n).extend()
        return outcome("granted", "extended")


class RedisPy(LockObject):
    """redis-py's `Redis.lock()` (redis/lock.py; 2.10.x picks its LuaLock there)."""

    REFUSALS = {"LockError", "LockNotOwnedError"}

    def __init__(self, setup):
        import redis

        cfg = setup["config"]
        kwargs = {"host": "127.0.0.1", "port": setup["ports"][0]}
        if cfg.get("socket_timeout") is not None:
            kwargs["socket_timeout"] = cfg["socket_timeout"]
        client_class = getattr(redis, "StrictRedis", redis.Redis)
        self.client = client_class(**kwargs)
        self.keep(setup, self.client)

    def lock(self, n):
        if n not in self.locks:
            kwargs = {"timeout": self.cfg.get("timeout"), "sleep": self.cfg.get("sleep", 0.1)}
            if self.cfg.get("blocking_timeout") is not None:
                kwargs["blocking_timeout"] = self.cfg["blocking_timeout"]
            self.locks[n] = self.client.lock(self.key, **kwargs)
        return self.locks[n]

    def acquire(self, n):
        got = self.lock(n).acquire()
        return outcome("granted" if got else "refused", f"acquire returned {got}")

    def extend(self, n):
        self.lock(n).extend(self.cfg["extend_by"])
        return outcome("granted", "extended")


class RedBeat:
    """celery-redbeat's scheduler lock: `acquire_distributed_beat_lock` (the beat_init
    handler), `RedBeatScheduler.tick` (extends it) and `close` (releases it)."""

    REFUSALS = {"LockError", "LockNotOwnedError"}

    def __init__(self, setup):
        from celery import Celery

        cfg = setup["config"]
        self.app = Celery("conformance")
        self.app.conf.redbeat_redis_url = f"redis://127.0.0.1:{setup['ports'][0]}/0"
        self.app.conf.redbeat_lock_key = setup["key"]
        if cfg.get("beat_max_loop_interval") is not None:
            self.app.conf.beat_max_loop_interval = cfg["beat_max_loop_interval"]
        if cfg.get("redbeat_lock_timeout") is not None:
            self.app.conf.redbeat_lock_timeout = cfg["redbeat_lock_timeout"]
        self.schedulers = {}
        from redbeat.schedulers import get_redis

        get_redis(self.app).ping()

    def scheduler(self, n):
        from redbeat.schedulers import RedBeatScheduler

        if n not in self.schedulers:
            self.schedulers[n] = RedBeatScheduler(app=self.app, lazy=True)
        return self.schedulers[n]

    def acquire(self, n):
        from redbeat.schedulers import acquire_distributed_beat_lock

        acquire_distributed_beat_lock(sender=types.SimpleNamespace(scheduler=self.scheduler(n)))
        return outcome("granted", "beat lock acquired")

    def extend(self, n):
        self.scheduler(n).tick()
        return outcome("granted", "tick extended the lock")

    def release(self, n):
        scheduler = self.scheduler(n)
        lock = scheduler.lock
        scheduler.lock = None
        lock.release()
        return outcome("granted", "released")


class Pottery(LockObject):
    """pottery's `Redlock` (pottery/redlock.py): `acquire(blocking=, timeout=)`, `extend()`,
    `release()` over one redis-py client per master. Its refusals are the exceptions it raises
    for a lock not held (`ReleaseUnlockedLock`, `ExtendUnlockedLock`) and `TooManyExtensions`."""

    REFUSALS = {"ReleaseUnlockedLock", "ExtendUnlockedLock", "TooManyExtensions"}

    def __init__(self, setup):
        from redis import Redis

        cfg = setup["config"]
        self.masters = [
            Redis(host="127.0.0.1", port=port, socket_timeout=cfg.get("socket_timeout"))
            for port in setup["ports"]
        ]
        self.keep(setup, *self.masters)

    def lock(self, n):
        from pottery import Redlock

        if n not in self.locks:
            kwargs = {"key": self.key, "masters": self.masters}
            for name in ("auto_release_time", "num_extensions"):
                if self.cfg.get(name) is not None:
                    kwargs[name] = self.cfg[name]
            self.locks[n] = Redlock(**kwargs)
        return self.locks[n]

    def acquire(self, n):
        if self.cfg.get("blocking", True):
            got = self.lock(n).acquire(timeout=self.cfg.get("timeout", -1))
        else:
            got = self.lock(n).acquire(blocking=False)
        return outcome("granted" if got else "refused", f"acquire returned {got}")



class PythonRedisLock(LockObject):
    """python-redis-lock's `redis_lock.Lock` (src/redis_lock/__init__.py): `acquire(blocking=,
    timeout=)`, `extend()`, `release()`; `NotAcquired` is its refusal."""

    REFUSALS = {"NotAcquired"}

    def __init__(self, setup):
        self.connect(setup)

    def lock(self, n):
        import redis_lock

        if n not in self.locks:
            self.locks[n] = redis_lock.Lock(
                self.client,
                self.key,
                expire=self.cfg.get("expire"),
                auto_renewal=self.cfg.get("auto_renewal", False),
            )
        return self.locks[n]

    def acquire(self, n):
        blocking = self.cfg.get("blocking", True)
        got = self.lock(n).acquire(blocking=blocking, timeout=self.cfg.get("timeout"))
        return outcome("granted" if got else "refused", f"acquire returned {got}")



class AioRedlock:
    """aioredlock's `Aioredlock` (aioredlock/algorithm.py): one lock manager per `lock` (its own
    aioredis pools, so its own `SCRIPT LOAD`s), `lock(key, lock_timeout=)`, `extend(lock)`,
    `unlock(lock)`, each awaited on one event loop that runs on between operations (the
    watchdog, the background clean-up). `LockError` and `LockAcquiringError` are its no; a
    `LockRuntimeError` (the connection failed) and any other exception are errors."""

    REFUSALS = {"LockError", "LockAcquiringError"}

    def __init__(self, setup):
        import asyncio

        import aioredlock  # imported before the first operation, which it would slow down

        self.asyncio = asyncio
        self.aioredlock = aioredlock
        self.cfg = setup["config"]
        self.key = setup["key"]
        self.ports = setup["ports"]
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.managers = {}
        self.locks = {}

    def run(self, coroutine):
        return self.asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def manager(self, n):
        if n not in self.managers:
            names = ("retry_count", "retry_delay_min", "retry_delay_max", "internal_lock_timeout")
            kwargs = {name: self.cfg[name] for name in names if self.cfg.get(name) is not None}
            connections = [{"host": "127.0.0.1", "port": port} for port in self.ports]

            async def make():
                return self.aioredlock.Aioredlock(redis_connections=connections, **kwargs)

            self.managers[n] = self.run(make())
        return self.managers[n]

    def acquire(self, n):
        manager = self.manager(n)
        self.locks[n] = self.run(manager.lock(self.key, lock_timeout=self.cfg.get("lock_timeout")))
        return outcome("granted", f"lock {self.locks[n].id}")

    def release(self, n):
        self.run(self.manager(n).unlock(self.locks[n]))
        return outcome("granted", "unlocked")

    def extend(self, n):
        self.run(self.manager(n).extend(self.locks[n]))
        return outcome("granted", "extended")

    def busy(self):
        """The event loop's tasks still at work: a watchdog's extension (`_auto_extend`,
        aioredlock/algorithm.py:105-120), the unset a failed `lock` leaves to
        `asyncio.ensure_future(cleanup())` (:93-101), an operation still pending. A watchdog
        asleep until its next extension is idle: it never ends while its lock is held."""
        asyncio = self.asyncio

        def idle_watchdog(task):
            coro = task.get_coro()
            if getattr(coro, "__qualname__", "") != "Aioredlock._auto_extend":
                return False
            while hasattr(getattr(coro, "cr_await", None), "cr_await"):
                coro = coro.cr_await
            return coro.__qualname__ == "sleep"

        def idle_reader(task):
            """A connection's reader loop lives as long as the connection (aioredis 1.3.1
            connection.py:162, :180): it is at work only while a command waits for its reply
            (`_waiters`, :354)."""
            coro = task.get_coro()
            if getattr(coro, "__qualname__", "") != "RedisConnection._read_data":
                return False
            frame = getattr(coro, "cr_frame", None)
            conn = frame.f_locals.get("self") if frame is not None else None
            return conn is not None and not conn._waiters

        async def running():
            me = asyncio.current_task()
            return [
                getattr(task.get_coro(), "__qualname__", repr(task))
                for task in asyncio.all_tasks()
                if task is not me
                and not task.done()
                and not idle_watchdog(task)
                and not idle_reader(task)
            ]

        return self.run(running())


class Portalocker(LockObject):
    """portalocker's `RedisLock` (portalocker/redis.py): one lock object per `lock`, each on the
    driver's one redis-py client (`connection=`), `acquire()` with the configured `timeout`,
    `check_interval`, `fail_when_locked`, `thread_sleep_time` and `unavailable_timeout`;
    `AlreadyLocked` is its no, any other `LockException` ("This lock is already active") an
    error."""

    REFUSALS = {"AlreadyLocked"}

    def __init__(self, setup):
        from redis import Redis

        self.client = Redis(host="127.0.0.1", port=setup["ports"][0])
        self.keep(setup, self.client)

    def lock(self, n):
        from portalocker import RedisLock

        if n not in self.locks:
            names = (
                "timeout",
                "check_interval",
                "fail_when_locked",
                "thread_sleep_time",
                "unavailable_timeout",
            )
            kwargs = {name: self.cfg[name] for name in names if name in self.cfg}
            self.locks[n] = RedisLock(self.key, connection=self.client, **kwargs)
        return self.locks[n]

    def acquire(self, n):
        self.lock(n).acquire()
        return outcome("granted", "acquired")


class Sherlock(LockObject):
    """py-sherlock's `RedisLock` (sherlock/lock.py): one lock object per `lock`, each on the
    driver's one redis-py client (`client=`, the situation's `socket_timeout` if any; sherlock
    sets none), with the situation's `expire`, `timeout`, `retry_interval` and `namespace`
    where given (else sherlock's defaults, `__init__.py:476-486`); `acquire()` (blocking, or
    `blocking=False`), `release()`, `renew()`. `LockTimeoutException` (a blocking acquire ran
    out of tries) and `LockException` (not held: release; renew) are its no, as is `renew()`
    returning False; any other exception (a Redis error, a timeout) is an error."""

    REFUSALS = {"LockTimeoutException", "LockException"}

    def __init__(self, setup):
        self.connect(setup)

    def lock(self, n):
        from sherlock import RedisLock

        if n not in self.locks:
            names = ("expire", "timeout", "retry_interval", "namespace")
            kwargs = {name: self.cfg[name] for name in names if name in self.cfg}
            self.locks[n] = RedisLock(self.key, client=self.client, **kwargs)
        return self.locks[n]

    def acquire(self, n):
        got = self.lock(n).acquire(blocking=self.cfg.get("blocking", True))
        return outcome("granted" if got else "refused", f"acquire returned {got}")

    def extend(self, n):
        got = self.lock(n).renew()
        return outcome("granted" if got else "refused", f"renew returned {got}")


LIBRARIES = {
    "redis-py": RedisPy,
    "redbeat": RedBeat,
    "pottery": Pottery,
    "python-redis-lock": PythonRedisLock,
    "aioredlock": AioRedlock,
    "portalocker": Portalocker,
    "sherlock": Sherlock,
}


def worker(requests, answers, libraries):
    setup = requests.get()
    library = LIBRARIES[setup["library"]](setup)
    libraries.append(library)
    answers.put({"ready": True})
    while True:
        request = requests.get()
        try:
            answer = getattr(library, request["op"])(request.get("lock", 0))
        except Exception as exc:  # every failure is reported, none ends the driver
            answer = classify(exc, library.REFUSALS)
            sys.stderr.write(traceback.format_exc())
        answers.put(answer)


def drain(library, limit_ms):
    """Waits until no call the library left to the background is still running: pottery
    returns at its quorum and leaves the other masters' calls to a `BailOutExecutor`, a
    `concurrent.futures.ThreadPoolExecutor` shut down with `wait=False` (pottery/executor.py),
    whose worker threads end once their calls returned; aioredlock's asyncio tasks are the
    library's `busy()`. Answered by the main thread, so a pending operation on the worker does
    not hold it."""
    deadline = time.monotonic() + limit_ms / 1000
    while True:
        running = [
            t.name
            for t in threading.enumerate()
            if t.is_alive() and t.name.startswith("ThreadPoolExecutor")
        ]
        if hasattr(library, "busy"):
            running += library.busy()
        if not running:
            return {"drained": True, "detail": "no background call running"}
        if time.monotonic() >= deadline:
            return {"drained": False, "detail": f"still running: {', '.join(running)}"}
        time.sleep(0.005)


def main():
    requests, answers, libraries = queue.Queue(), queue.Queue(), []
    threading.Thread(target=worker, args=(requests, answers, libraries), daemon=True).start()
    requests.put(json.loads(sys.stdin.readline()))
    sys.stdout.write(json.dumps(answers.get()) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "drain":
            sys.stdout.write(json.dumps(drain(libraries[0], request["limit_ms"])) + "\n")
            sys.stdout.flush()
            continue
        requests.put(request)
        until_ms = request.get("until_ms")
        try:
            answer = answers.get(timeout=None if until_ms is None else until_ms / 1000)
        except queue.Empty:
            answer = outcome("pending", f"still running after {until_ms} ms")
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
