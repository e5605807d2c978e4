// The operations node lock users run, through node-redlock 5 + ioredis and node-redis (RESP3,
// its default, and RESP2), each a named check; exits 1 if any fails. Run by
// `bash scripts/client-suites.sh node [server]` (not in CI): node scripts/node-client-checks.mjs PORT
import Redis from "ioredis";
import Redlock, { ExecutionError } from "redlock";
import { createClient } from "redis";

const port = Number(process.argv[2] ?? 6379);
const results = [];
async function check(name, body) {
  try {
    await body();
    results.push([name, "ok"]);
  } catch (e) {
    results.push([name, `FAILED: ${e && e.message}`]);
  }
}
function assert(condition, what) {
  if (!condition) throw new Error(what);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// node-redlock 5 over three ioredis clients on the same server (three databases stand for three
// masters).
const clients = [0, 1, 2].map((db) => new Redis({ port, db, maxRetriesPerRequest: 1 }));
const redlock = new Redlock(clients, { retryCount: 3, retryDelay: 50, retryJitter: 10 });
await check("redlock: acquire and release", async () => {
  const lock = await redlock.acquire(["r:a"], 2000);
  assert((await clients[0].get("r:a")) === lock.value, "value set");
  await lock.release();
  assert((await clients[0].get("r:a")) === null, "released");
});
await check("redlock: a held lock is refused to another", async () => {
  const lock = await redlock.acquire(["r:b"], 2000);
  let refused = false;
  try {
    await redlock.acquire(["r:b"], 2000, { retryCount: 1 });
  } catch (e) {
    refused = e instanceof ExecutionError;
  }
  await lock.release();
  assert(refused, "second acquire refused");
});
await check("redlock: extend pushes the expiry", async () => {
  const lock = await redlock.acquire(["r:c"], 500);
  const extended = await lock.extend(3000);
  const ttl = await clients[1].pttl("r:c");
  await extended.release();
  assert(ttl > 1000, `pttl ${ttl}`);
});
await check("redlock: the lease expires", async () => {
  await redlock.acquire(["r:d"], 200);
  await sleep(400);
  const lock = await redlock.acquire(["r:d"], 200);
  await lock.release();
});
await check("redlock: several resources at once", async () => {
  const lock = await redlock.acquire(["r:e1", "r:e2"], 2000);
  assert((await clients[2].exists("r:e1", "r:e2")) === 2, "both set");
  await lock.release();
});
await check("redlock: using() runs a routine under the lock", async () => {
  let ran = false;
  await redlock.using(["r:f"], 1000, async () => {
    ran = (await clients[0].get("r:f")) !== null;
  });
  assert(ran, "held inside using");
});
await check("ioredis: MULTI/EXEC and WATCH", async () => {
  const results = await clients[0].multi().set("m", "1").incr("m").exec();
  assert(results[1][1] === 2, JSON.stringify(results));
  await clients[0].watch("m");
  await clients[1].select(0);
  await clients[1].set("m", "changed");
  await clients[1].select(1);
  const aborted = await clients[0].multi().set("m", "mine").exec();
  assert(aborted === null, "watched key changed: null");
});
await check("ioredis: SCAN stream", async () => {
  await clients[0].set("scan:1", "a");
  await clients[0].set("scan:2", "b");
  const keys = [];
  for await (const batch of clients[0].scanStream({ match: "scan:*" })) keys.push(...batch);
  assert(keys.sort().join() === "scan:1,scan:2", keys.join());
});
await check("ioredis: QUIT", async () => {
  for (const c of clients) assert((await c.quit()) === "OK", "OK");
});

// node-redis 6: RESP3 by default, and RESP2.
for (const RESP of [3, 2]) {
  const client = createClient({ socket: { port }, RESP });
  await check(`node-redis RESP${RESP}: connect, SET/GET, HSET/HGETALL`, async () => {
    await client.connect();
    await client.set("n:k", "v");
    assert((await client.get("n:k")) === "v", "get");
    await client.hSet("n:h", { a: "1" });
    const all = await client.hGetAll("n:h");
    assert(all.a === "1", JSON.stringify(all));
  });
  await check(`node-redis RESP${RESP}: MULTI/EXEC`, async () => {
    const replies = await client.multi().set("n:m", "1").incr("n:m").exec();
    assert(Number(replies[1]) === 2, JSON.stringify(replies));
  });
  await check(`node-redis RESP${RESP}: CLIENT SETNAME/GETNAME, SCAN`, async () => {
    await client.clientSetName("locksim-check");
    assert((await client.clientGetName()) === "locksim-check", "name");
    const keys = [];
    for await (const batch of client.scanIterator({ MATCH: "n:*" })) keys.push(...batch);
    assert(keys.length >= 3, keys.join());
  });
  await check(`node-redis RESP${RESP}: EVAL and QUIT`, async () => {
    const n = await client.eval("return redis.call('incr', KEYS[1])", { keys: ["n:e"] });
    assert(Number(n) === 1 || Number(n) > 0, String(n));
    await client.del(["n:k", "n:h", "n:m", "n:e"]);
    await client.quit();
  });
}

let failed = 0;
for (const [name, outcome] of results) {
  if (outcome !== "ok") failed++;
  console.log(`${outcome === "ok" ? "ok  " : "FAIL"} ${name}${outcome === "ok" ? "" : ": " + outcome}`);
}
console.log(`${results.length - failed}/${results.length} checks passed`);
process.exit(failed ? 1 : 0);
