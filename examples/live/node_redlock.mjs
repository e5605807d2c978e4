// locksim live adapter for node-redlock v5 (with ioredis), in the library's own idiom.
//
//   locksim live SCENARIO -- node examples/live/node_redlock.mjs
//
// Reads one JSON operation a line on stdin, answers on stdout (docs/live.md); logs go to
// stderr. Packages: `npm install redlock@5.0.0-beta.2 ioredis` (scripts/client-suites.sh setup
// puts them in target/client-suites/node; set NODE_PATH there or run from that folder).
import { createInterface } from "node:readline";
import { createRequire } from "node:module";

const require = createRequire(process.env.LOCKSIM_NODE_MODULES ?? import.meta.url);
const Redis = require("ioredis");
const { default: Redlock, ResourceLockedError, ExecutionError } = require("redlock");

const answer = (request, type, fields = {}) =>
  process.stdout.write(JSON.stringify({ re: request.id, type, ...fields }) + "\n");

const parse = (address) => {
  const at = address.lastIndexOf(":");
  return { host: address.slice(0, at), port: Number(address.slice(at + 1)) };
};

let redlock, resource, lock, fencing, fence, value;
const lines = createInterface({ input: process.stdin });
lines.on("close", () => process.exit(0));

for await (const line of lines) {
  const request = JSON.parse(line);
  try {
    switch (request.op) {
      case "init": {
        const timeout = request.command_timeout_ms;
        const options = { commandTimeout: timeout, maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: false };
        const clients = request.redis.map((a) => new Redis({ ...parse(a), ...options }));
        for (const c of clients) c.on("error", (e) => console.error(`redis: ${e.message}`));
        // One attempt per call: `acquire` below retries itself until wait_ms; a retryCount of -1
        // would retry the release of a lock lost to another client forever (redlock
        // dist/cjs/index.js `_execute`: -1 is Infinity), and the driver would see no answer.
        redlock = new Redlock(clients, { retryCount: 0, retryDelay: 100, retryJitter: 50 });
        resource = new Redis({ ...parse(request.resource), ...options });
        resource.on("error", (e) => console.error(`resource: ${e.message}`));
        fencing = request.fencing;
        // Ready or refused: a master that crashed before this client started must not hang init
        // (ioredis keeps reconnecting; later commands fail until it is back).
        await Promise.all([...clients, resource].map((c) => c.status === "ready" ? null
          : new Promise((ok) => ["ready", "error", "close"].forEach((event) => c.once(event, ok)))));
        answer(request, "ok");
        break;
      }
      case "acquire": {
        const deadline = Date.now() + request.wait_ms;
        lock = null;
        while (!lock && Date.now() < deadline) {
          try {
            lock = await redlock.acquire([request.lock], request.ttl_ms, { retryCount: 0 });
          } catch (e) {
            if (!(e instanceof ExecutionError || e instanceof ResourceLockedError)) throw e;
            await new Promise((ok) => setTimeout(ok, 100 + Math.random() * 50));
          }
        }
        if (!lock) { answer(request, "fail", { error: "not acquired within wait_ms" }); break; }
        fence = fencing ? await redlock.clients.values().next().value.incr(`${request.lock}:fence`) : undefined;
        answer(request, "ok", { token: lock.value, fence });
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
        await lock.release();
        answer(request, "ok");
        break;
      case "extend":
        lock = await lock.extend(request.ttl_ms);
        answer(request, "ok");
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
