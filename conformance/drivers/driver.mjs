// The real node lock libraries of the conformance suite (sim/src/conform/), unmodified, driven
// one operation at a time; the protocol is driver.py's (JSON lines on stdin and stdout):
//   line 1: {"library": "redlock-5", "ports": [...], "key": "lock", "config": {...}}
//   answer: {"ready": true} once every client is connected
//   then:   {"op": "acquire" | "release" | "extend", "lock": 0, "until_ms": n?}
//   answer: {"outcome": "granted" | "refused" | "error" | "pending", "detail": "..."}
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
async function clients(ports) {
  const list = ports.map((port) => new Client({ host: '127.0.0.1', port }));
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

// redis-semaphore 5.8.0 (lib/RedisMutex.js, lib/Lock.js): one Mutex per lock object on the
// first master, its options as given (`config.options`); `acquire` throws TimeoutError when
// not acquired (a plain `class extends Error`, whose `name` is "Error": told apart by its
// class), `release` never says no. `onLockLost` is set to do nothing: its default throws on
// the refresh timer (lib/misc.js:11-13), which would end the driver.
async function redisSemaphore(setup) {
  const module = await import('redis-semaphore');
  const { Mutex, TimeoutError } = module.Mutex ? module : module.default;
  const [client] = await clients(setup.ports);
  const mutexes = new Map();
  const mutex = (n) => {
    if (!mutexes.has(n)) {
      const options = { ...setup.config.options, onLockLost: () => {} };
      mutexes.set(n, new Mutex(client, setup.key, options));
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

const LIBRARIES = { 'redlock-5': redlock5, 'redlock-4': redlock4, 'redis-semaphore': redisSemaphore };

const lines = readline.createInterface({ input: process.stdin });
let library = null;
let queue = Promise.resolve();

lines.on('line', (text) => {
  const request = JSON.parse(text);
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
