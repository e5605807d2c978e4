// The real node lock libraries of the conformance suite (sim/src/conform/), unmodified, driven
// one operation at a time; the protocol is driver.py's (JSON lines on stdin and stdout):
//   line 1: {"library": "redlock-5", "ports": [...], "key": "lock", "config": {...}}
//   answer: {"ready": true} once every client is connected
//   then:   {"op": "acquire" | "release" | "extend", "lock": 0, "until_ms": n?}
//   answer: {"outcome": "granted" | "refused" | "error" | "pending", "detail": "..."}
//   last:   {"op": "drain", "limit_ms": n}
//   answer: {"drained": true | false, "detail": "..."} once every command sent has its reply
// locksim copies this file beside target/client-suites/node/node_modules and runs it there.
import readline from 'node:readline';
import Client from 'ioredis';

const outcome = (kind, detail = '') => ({ outcome: kind, detail: String(detail) });

function classify(error, refusals) {
  const name = error?.name ?? error?.constructor?.name ?? 'Error';
  return outcome(refusals.has(name) ? 'refused' : 'error', `${name}: ${error?.message ?? error}`);
}

// ioredis with its defaults (no command timeout), one client per master, connected (a PING,
// not a command of the lock) before the first operation.
const everyClient = [];
async function clients(ports) {
  const list = ports.map((port) => new Client({ host: '127.0.0.1', port }));
  everyClient.push(...list);
  await Promise.all(list.map((c) => c.ping()));
  return list;
}

// node-redlock v5 (src/index.ts): acquire/release/extend of a Lock; ExecutionError when no
// quorum was reached within the retries.
async function redlock5(setup) {
  const { default: Redlock } = await import('redlock');
  const redlock = new Redlock(await clients(setup.ports), setup.config.settings ?? {});
  const held = new Map();
  return {
    refusals: new Set(['ExecutionError', 'ResourceLockedError']),
    async acquire(n) {
      held.set(n, await redlock.acquire([setup.key], setup.config.ttl));
      return outcome('granted', 'acquired');
    },
    async release(n) {
      await held.get(n).release();
      return outcome('granted', 'released');
    },
    async extend(n) {
      held.set(n, await held.get(n).extend(setup.config.ttl));
      return outcome('granted', 'extended');
    },
  };
}

// node-redlock v4.2.0 (redlock.js): lock/unlock/extend; LockError on failure.
async function redlock4(setup) {
  const { default: Redlock } = await import('redlock-4.2.0');
  const redlock = new Redlock(await clients(setup.ports), setup.config.settings ?? {});
  redlock.on('clientError', () => {});
  const held = new Map();
  return {
    refusals: new Set(['LockError']),
    async acquire(n) {
      held.set(n, await redlock.lock(setup.key, setup.config.ttl));
      return outcome('granted', 'acquired');
    },
    async release(n) {
      await held.get(n).unlock();
      return outcome('granted', 'released');
    },
    async extend(n) {
      held.set(n, await held.get(n).extend(setup.config.ttl));
      return outcome('granted', 'extended');
    },
  };
}

// redis-semaphore 5.8.0 (lib/RedisMutex.js, lib/RedlockMutex.js, lib/Lock.js): one Mutex
// per lock object on the first master, or one RedlockMutex per lock object over every master;
// its options as given (`config.options`); `acquire` throws TimeoutError when not acquired (a
// plain `class extends Error`, whose `name` is "Error": told apart by its class), `release`
// never says no. `onLockLost` is set to do nothing: its default throws on the refresh timer
// (lib/misc.js:11-13), which would end the driver.
async function redisSemaphore(setup, redlock = false) {
  const module = await import('redis-semaphore');
  const { Mutex, RedlockMutex, TimeoutError } = module.Mutex ? module : module.default;
  const masters = await clients(setup.ports);
  const mutexes = new Map();
  const mutex = (n) => {
    if (!mutexes.has(n)) {
      const options = { ...setup.config.options, onLockLost: () => {} };
      mutexes.set(
        n,
        redlock ? new RedlockMutex(masters, setup.key, options) : new Mutex(masters[0], setup.key, options),
      );
    }
    return mutexes.get(n);
  };
  return {
    refusals: new Set(['TimeoutError']),
    async acquire(n) {
      try {
        await mutex(n).acquire();
      } catch (e) {
        if (e instanceof TimeoutError) return outcome('refused', `TimeoutError: ${e.message}`);
        throw e;
      }
      return outcome('granted', 'acquired');
    },
    async release(n) {
      await mutex(n).release();
      return outcome('granted', 'released');
    },
    async extend() {
      throw new Error('redis-semaphore has no extend: its refresh runs on a timer');
    },
  };
}

// Waits until every command a library sent has its reply: node-redlock v5 decides at a quorum
// and leaves the other masters' calls running (src/index.ts:470-543). ioredis keeps the
// commands written and not yet answered in `commandQueue`, those not yet written in
// `offlineQueue`. Answered outside the operations' queue, so a pending operation does not hold it.
async function drain(limitMs) {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const busy = everyClient.filter((c) => c.commandQueue.length > 0 || c.offlineQueue.length > 0);
    if (busy.length === 0) return { drained: true, detail: 'every command answered' };
    if (Date.now() >= deadline) return { drained: false, detail: `${busy.length} clients still wait for replies` };
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const LIBRARIES = {
  'redlock-5': redlock5,
  'redlock-4': redlock4,
  'redis-semaphore': redisSemaphore,
  'redis-semaphore-redlock': (setup) => redisSemaphore(setup, true),
};

const lines = readline.createInterface({ input: process.stdin });
let library = null;
let queue = Promise.resolve();

lines.on('line', (text) => {
  const request = JSON.parse(text);
  if (request.op === 'drain') {
    drain(request.limit_ms).then((answer) => process.stdout.write(`${JSON.stringify(answer)}\n`));
    return;
  }
  queue = queue.then(async () => {
    if (library === null) {
      library = await LIBRARIES[request.library](request);
      process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
      return;
    }
    const call = library[request.op](request.lock ?? 0).catch((e) => {
      process.stderr.write(`${e?.stack ?? e}\n`);
      return classify(e, library.refusals);
    });
    let answer;
    if (request.until_ms == null) {
      answer = await call;
    } else {
      let timer;
      const pending = new Promise((resolve) => {
        timer = setTimeout(() => resolve(outcome('pending', `still running after ${request.until_ms} ms`)), request.until_ms);
      });
      answer = await Promise.race([call, pending]);
      clearTimeout(timer);
    }
    process.stdout.write(`${JSON.stringify(answer)}\n`);
  });
});
lines.on('close', () => process.exit(0));
