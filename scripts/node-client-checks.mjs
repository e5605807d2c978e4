// The operations node lock users run, through node-redlock 5 + ioredis, redis-semaphore 5 +
// ioredis and node-redis (RESP3, its default, and RESP2), each a named check; exits 1 if any
// fails. Run by `bash scripts/client-suites.sh node [server]`, and in CI by
// sim/tests/client_suites.rs, as `node checks.mjs PORT` from a copy in target/client-suites/node
// (where its packages are).
import Redis from "ioredis";
import Redlock, { ExecutionError } from "redlock";
import { createClient } from "redis";
import { Mutex, MultiSemaphore, RedlockMutex, RedlockSemaphore, Semaphore } from "redis-semaphore";

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

// redis-semaphore 5: its Lua scripts keep a semaphore as a sorted set of holders scored by their
// acquisition time (ZREMRANGEBYSCORE drops the expired, ZCARD counts, ZADD/ZSCORE/ZREM), a mutex
// as a key (SET NX PX, GET, PEXPIRE, DEL).
const sem = [3, 4, 5].map((db) => new Redis({ port, db, maxRetriesPerRequest: 1 }));
const quick = { acquireTimeout: 300, retryInterval: 20 };
await check("redis-semaphore: Mutex excludes, releases", async () => {
  const a = new Mutex(sem[0], "m1", quick);
  const b = new Mutex(sem[0], "m1", quick);
  await a.acquire();
  assert((await sem[0].get("mutex:m1")) === a.identifier, "the key holds the identifier");
  assert(!(await b.tryAcquire()), "a held mutex is refused");
  await a.release();
  assert((await sem[0].exists("mutex:m1")) === 0, "released");
  await b.acquire();
  await b.release();
});
await check("redis-semaphore: Mutex refresh keeps it past its timeout", async () => {
  const a = new Mutex(sem[0], "m2", { ...quick, lockTimeout: 300, refreshInterval: 100 });
  await a.acquire();
  await sleep(700);
  assert(a.isAcquired && (await sem[0].pttl("mutex:m2")) > 0, "still held");
  await a.release();
});
await check("redis-semaphore: a lost Mutex calls onLockLost", async () => {
  let lost = null;
  const a = new Mutex(sem[0], "m3", {
    ...quick,
    lockTimeout: 300,
    refreshInterval: 50,
    onLockLost: (e) => (lost = e),
  });
  await a.acquire();
  await sem[0].del("mutex:m3");
  await sleep(200);
  assert(lost !== null && !a.isAcquired, "lost");
});
await check("redis-semaphore: Semaphore admits its limit", async () => {
  const holders = [0, 1, 2].map(() => new Semaphore(sem[0], "s1", 2, quick));
  await holders[0].acquire();
  await holders[1].acquire();
  assert((await sem[0].zcard("semaphore:s1")) === 2, "two holders");
  assert(!(await holders[2].tryAcquire()), "the third is refused");
  await holders[0].release();
  assert(await holders[2].tryAcquire(), "admitted after a release");
  await holders[1].release();
  await holders[2].release();
  assert((await sem[0].exists("semaphore:s1")) === 0, "empty");
});
await check("redis-semaphore: an expired holder's permit is taken back", async () => {
  // One attempt each: tryAcquire otherwise retries for acquireTimeout.
  const once = { acquireAttemptsLimit: 1, lockTimeout: 300, refreshInterval: 0 };
  const a = new Semaphore(sem[0], "s2", 1, once);
  const b = new Semaphore(sem[0], "s2", 1, once);
  await a.acquire();
  assert(!(await b.tryAcquire()), "held");
  await sleep(400);
  assert(await b.tryAcquire(), "expired holder dropped");
  await b.release();
});
await check("redis-semaphore: MultiSemaphore counts permits", async () => {
  const two = new MultiSemaphore(sem[0], "ms", 3, 2, quick);
  const twoMore = new MultiSemaphore(sem[0], "ms", 3, 2, quick);
  const one = new MultiSemaphore(sem[0], "ms", 3, 1, quick);
  await two.acquire();
  assert(!(await twoMore.tryAcquire()), "2 + 2 > 3");
  assert(await one.tryAcquire(), "2 + 1 = 3");
  await two.release();
  await one.release();
  assert((await sem[0].exists("semaphore:ms")) === 0, "empty");
});
await check("redis-semaphore: RedlockMutex and RedlockSemaphore over three servers", async () => {
  const m = new RedlockMutex(sem, "rm", quick);
  const other = new RedlockMutex(sem, "rm", quick);
  await m.acquire();
  assert(!(await other.tryAcquire()), "quorum held");
  await m.release();
  const s = [0, 1, 2].map(() => new RedlockSemaphore(sem, "rs", 2, quick));
  await s[0].acquire();
  await s[1].acquire();
  assert(!(await s[2].tryAcquire()), "limit reached on a quorum");
  await s[0].release();
  await s[1].release();
});
for (const c of sem) await c.quit();

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
