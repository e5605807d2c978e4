// locksim live adapter for redis-semaphore's Mutex (v5, with ioredis), in the library's own idiom.
//
//   locksim live SCENARIO -- node examples/live/redis_semaphore_mutex.mjs
//
// Reads one JSON operation a line on stdin, answers on stdout (docs/live.md); logs go to
// stderr. Packages: `npm install redis-semaphore@5 ioredis` (scripts/client-suites.sh setup puts
// them in target/client-suites/node; set LOCKSIM_NODE_MODULES to its package.json).
//
// redis-semaphore has no extend call: a Mutex refreshes its lease itself, every 80 % of
// `lockTimeout` (lib/Lock.js, REFRESH_INTERVAL_COEF), and calls `onLockLost` when a refresh finds
// the key gone. So `extend` answers what the library knows: ok while `isAcquired`, else fail.
// Its key is `mutex:<lock>` (lib/RedisMutex.js).
import { createInterface } from "node:readline";
import { createRequire } from "node:module";

const require = createRequire(process.env.LOCKSIM_NODE_MODULES ?? import.meta.url);
const Redis = require("ioredis");
const { Mutex } = require("redis-semaphore");

const answer = (request, type, fields = {}) =>
  process.stdout.write(JSON.stringify({ re: request.id, type, ...fields }) + "\n");

const parse = (address) => {
  const at = address.lastIndexOf(":");
  return { host: address.slice(0, at), port: Number(address.slice(at + 1)) };
};

let redis, resource, mutex, fencing, fence, value;
const lines = createInterface({ input: process.stdin });
lines.on("close", () => process.exit(0));

for await (const line of lines) {
  const request = JSON.parse(line);
  try {
    switch (request.op) {
      case "init": {
        const options = { commandTimeout: request.command_timeout_ms, maxRetriesPerRequest: 0, enableOfflineQueue: false };
        redis = new Redis({ ...parse(request.redis[0]), ...options });
        resource = new Redis({ ...parse(request.resource), ...options });
        for (const c of [redis, resource]) c.on("error", (e) => console.error(`redis: ${e.message}`));
        fencing = request.fencing;
        await Promise.all([redis, resource].map((c) => c.status === "ready" ? null
          : new Promise((ok) => ["ready", "error", "close"].forEach((event) => c.once(event, ok)))));
        answer(request, "ok");
        break;
      }
      case "acquire": {
        mutex = new Mutex(redis, request.lock, {
          lockTimeout: request.ttl_ms,
          acquireTimeout: request.wait_ms,
          retryInterval: 100,
          onLockLost: (e) => console.error(`onLockLost: ${e.message}`),
        });
        if (!(await mutex.tryAcquire())) {
          answer(request, "fail", { error: "not acquired within wait_ms" });
          break;
        }
        fence = fencing ? await redis.incr(`${request.lock}:fence`) : undefined;
        answer(request, "ok", { token: mutex.identifier, fence });
        break;
      }
      case "work": {
        // One critical section, or a part of one split by extends (read first, write last).
        const extra = fence === undefined ? [] : [fence];
        if (request.read ?? true) value = Number(await resource.call("LOCKSIM.READ", ...extra));
        await new Promise((ok) => setTimeout(ok, request.hold_ms));
        if (request.write ?? true) await resource.call("LOCKSIM.WRITE", value - 1, ...extra);
        answer(request, "ok");
        break;
      }
      case "release":
        await mutex.release();
        answer(request, "ok");
        break;
      case "extend":
        if (mutex.isAcquired) answer(request, "ok");
        else answer(request, "fail", { error: "LostLockError: a refresh found the lock gone" });
        break;
      default:
        answer(request, "fail", { error: `unknown op ${request.op}` });
    }
  } catch (e) {
    console.error(`${request.op}: ${e?.stack ?? e}`);
    // A timeout may have left the command running: unknown outcome.
    const unknown = /timed? ?out|Command timed out/i.test(String(e?.message));
    answer(request, unknown ? "info" : "fail", { error: String(e?.message ?? e) });
  }
}
