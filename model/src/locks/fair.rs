//! `fair`: Redisson's `RedissonFairLock` — the `redisson` hash lock plus a FIFO queue of waiting
//! threads (`redisson_lock_queue:{name}`, a list) and their deadlines (`redisson_lock_timeout:
//! {name}`, a sorted set scored with the *client's* wall-clock milliseconds). Seed 003 advertises
//! "公平 / 非公平鎖" (its own class ignores the flag — see `reentrant`).
//!
//! `preset` names the Redisson release followed (github.com/redisson/redisson tags, paths under
//! `redisson/src/main/java/org/redisson/`); the wait loop, watchdog, client configuration and
//! thread handles are `redisson`'s of the same release:
//!
//! - `redisson-4.7` (default), Redisson 4.7.0 `RedissonFairLock.java`:
//!   - lock (`tryLockInnerAsync`, `:152-229`, `KEYS = [name, queue, timeouts]`, `ARGV = [lease,
//!     uuid:thread, wait, currentTime]`): pop every queue head whose deadline ≤ `currentTime`
//!     (stale waiters); if the lock is free and the queue empty or headed by us, pop us, lower
//!     every other deadline by `wait`, take the lock (`HSET`, `PEXPIRE`) and return nil; a
//!     re-entry increments; a thread already queued is told the lock's `PTTL` (since 3.32.0,
//!     redisson issue 4705); else it queues at the tail with deadline = (the previous tail's
//!     deadline − `currentTime`, or the lock's `PTTL`) + `wait` + `currentTime`.
//!   - `wait` is `tryLock`'s own wait time (since 3.13.3, issue 2883; `:101-104`), or
//!     `fairLockWaitTimeout` (300 000 ms, `config/Config.java:85`) for a `lock()` without one.
//!   - unlock (`:234-285`) with the unlock latch as `redisson`'s: drop stale heads; a missing
//!     lock answers 1 after waking the head; no field → nil; decrement; at 0 `DEL` and `PUBLISH
//!     redisson_lock__channel:{name}:<head> 0` — only the queue head is woken.
//!   - acquire failed (`tryLock` timed out, `:69-97`): leave the queue, lowering the deadlines
//!     of those behind by `wait`.
//! - `redisson-3.12`, the scripts of Redisson 3.11.1–3.13.2 (3.12.5 `RedissonFairLock.java`):
//!   `wait` is the constructor's `threadWaitTime`, 5000 ms whatever `tryLock` waits (`:48-50`);
//!   a queued thread is told its own deadline − `wait` − `currentTime` (`:196-202`); no latch.
//!   With more waiters than fit in 5 s the deadlines of live waiters pass while they wait: the
//!   next lock attempt of anyone drops them from the queue as stale, and the thread that comes
//!   back queues at the tail again (redisson issues 2883, 3004, 4705): FIFO order is lost and
//!   some waiters starve until their `tryLock` gives up.
//!
//! `currentTime` is `System.currentTimeMillis()` of the caller: a client whose clock runs ahead
//! sees every waiter's deadline as passed, removes them all, and goes first — FIFO order is lost
//! (mutual exclusion is not: the hash is still one holder).
//!
//! Parameters: as `redisson`, plus `thread_wait_ms`: 3.12's `threadWaitTime` (5000), 4.7's
//! `fairLockWaitTimeout` (300 000, used only when `tryLock` waits 0 ms).
//! What breaks it: client clock skew (`clock_jump` on a client) breaks FIFO order; with
//! `redisson-3.12`, contention alone (`scheme-fair-redisson-3.12-starvation`); as `redisson`,
//! pauses and partitions longer than the lease break mutual exclusion.

use std::rc::Rc;

use super::redisson::{Failure, RedissonLock, UNLOCK_MESSAGE, Version, prefix_name, synced_eval};
use super::{Family, Lease, LockEnv, LockScheme, Params, PresetInfo, SchemeInfo};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "fair",
    summary: "Redisson RedissonFairLock: lock hash + waiter queue list + deadline zset scored with the client's wall clock",
    source: "redisson/redisson@redisson-4.7.0 RedissonFairLock.java (preset redisson-3.12: 3.12.5); seed 003 (公平鎖, named)",
    default_ttl_ms: 30_000,
    family: Family::Renewed,
    lease: Lease::Ms,
    in_all: true,
    presets: PRESETS,
    build,
};

/// Named presets besides the default (`redisson-4.7`).
const PRESETS: &[PresetInfo] = &[PresetInfo {
    name: "redisson-3.12",
    summary: "the fair-lock scripts of Redisson 3.11.1-3.13.2: a fixed 5 s threadWaitTime, a queued waiter told deadline - wait - now",
    lease: Lease::Ms,
    same_as: None,
}];

/// The fair lock's settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// 3.12: `threadWaitTime`; 4.7: `fairLockWaitTimeout`.
    pub thread_wait_ms: u64,
}

/// Redisson 4.7.0's lock script (`EVAL_LONG`): `RedissonFairLock.java:155-226` (sha1 8f6ed299).
const LOCK: &str = concat!(
    "while true do ",
    "local firstThreadId2 = redis.call('lindex', KEYS[2], 0);",
    "if firstThreadId2 == false then ",
    "break;",
    "end;",
    "local timeout = redis.call('zscore', KEYS[3], firstThreadId2);",
    "if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then ",
    "redis.call('zrem', KEYS[3], firstThreadId2);",
    "redis.call('lpop', KEYS[2]);",
    "else ",
    "break;",
    "end;",
    "end;",
    "if (redis.call('exists', KEYS[1]) == 0) ",
    "and ((redis.call('exists', KEYS[2]) == 0) ",
    "or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then ",
    "redis.call('lpop', KEYS[2]);",
    "redis.call('zrem', KEYS[3], ARGV[2]);",
    "local keys = redis.call('zrange', KEYS[3], 0, -1);",
    "for i = 1, #keys, 1 do ",
    "redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);",
    "end;",
    "redis.call('hset', KEYS[1], ARGV[2], 1);",
    "redis.call('pexpire', KEYS[1], ARGV[1]);",
    "return nil;",
    "end;",
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then ",
    "redis.call('hincrby', KEYS[1], ARGV[2],1);",
    "redis.call('pexpire', KEYS[1], ARGV[1]);",
    "return nil;",
    "end;",
    "local timeout = redis.call('zscore', KEYS[3], ARGV[2]);",
    "if timeout ~= false then ",
    "local ttl = redis.call('pttl', KEYS[1]);",
    "return math.max(0, ttl); ",
    "end;",
    "local lastThreadId = redis.call('lindex', KEYS[2], -1);",
    "local ttl;",
    "if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then ",
    "ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);",
    "else ",
    "ttl = redis.call('pttl', KEYS[1]);",
    "end;",
    "local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);",
    "if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then ",
    "redis.call('rpush', KEYS[2], ARGV[2]);",
    "end;",
    "return ttl;",
);

/// Redisson 3.12.5's lock script (`EVAL_LONG`): `RedissonFairLock.java:149-218` (sha1 762bfafa).
const LOCK_3_12: &str = concat!(
    "while true do ",
    "local firstThreadId2 = redis.call('lindex', KEYS[2], 0);",
    "if firstThreadId2 == false then ",
    "break;",
    "end;",
    "local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));",
    "if timeout <= tonumber(ARGV[4]) then ",
    "redis.call('zrem', KEYS[3], firstThreadId2);",
    "redis.call('lpop', KEYS[2]);",
    "else ",
    "break;",
    "end;",
    "end;",
    "if (redis.call('exists', KEYS[1]) == 0) ",
    "and ((redis.call('exists', KEYS[2]) == 0) ",
    "or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then ",
    "redis.call('lpop', KEYS[2]);",
    "redis.call('zrem', KEYS[3], ARGV[2]);",
    "local keys = redis.call('zrange', KEYS[3], 0, -1);",
    "for i = 1, #keys, 1 do ",
    "redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);",
    "end;",
    "redis.call('hset', KEYS[1], ARGV[2], 1);",
    "redis.call('pexpire', KEYS[1], ARGV[1]);",
    "return nil;",
    "end;",
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then ",
    "redis.call('hincrby', KEYS[1], ARGV[2],1);",
    "redis.call('pexpire', KEYS[1], ARGV[1]);",
    "return nil;",
    "end;",
    "local timeout = redis.call('zscore', KEYS[3], ARGV[2]);",
    "if timeout ~= false then ",
    "return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);",
    "end;",
    "local lastThreadId = redis.call('lindex', KEYS[2], -1);",
    "local ttl;",
    "if lastThreadId ~= false and lastThreadId ~= ARGV[2] then ",
    "ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);",
    "else ",
    "ttl = redis.call('pttl', KEYS[1]);",
    "end;",
    "local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);",
    "if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then ",
    "redis.call('rpush', KEYS[2], ARGV[2]);",
    "end;",
    "return ttl;",
);

/// Redisson 4.7.0's unlock script, with the unlock latch (`KEYS[5]`): `RedissonFairLock.java:237-281`
/// (sha1 367f80bd).
const UNLOCK: &str = concat!(
    "local val = redis.call('get', KEYS[5]); ",
    "if val ~= false then ",
    "return tonumber(val);",
    "end; ",
    "while true do ",
    "local firstThreadId2 = redis.call('lindex', KEYS[2], 0);",
    "if firstThreadId2 == false then ",
    "break;",
    "end; ",
    "local timeout = redis.call('zscore', KEYS[3], firstThreadId2);",
    "if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then ",
    "redis.call('zrem', KEYS[3], firstThreadId2); ",
    "redis.call('lpop', KEYS[2]); ",
    "else ",
    "break;",
    "end; ",
    "end;",
    "if (redis.call('exists', KEYS[1]) == 0) then ",
    "local nextThreadId = redis.call('lindex', KEYS[2], 0); ",
    "if nextThreadId ~= false then ",
    "redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); ",
    "end; ",
    "redis.call('set', KEYS[5], 1, 'px', ARGV[6]); ",
    "return 1; ",
    "end;",
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then ",
    "return nil;",
    "end; ",
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ",
    "if (counter > 0) then ",
    "redis.call('pexpire', KEYS[1], ARGV[2]); ",
    "redis.call('set', KEYS[5], 0, 'px', ARGV[6]); ",
    "return 0; ",
    "end; ",
    "redis.call('del', KEYS[1]); ",
    "redis.call('set', KEYS[5], 1, 'px', ARGV[6]); ",
    "local nextThreadId = redis.call('lindex', KEYS[2], 0); ",
    "if nextThreadId ~= false then ",
    "redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); ",
    "end; ",
    "return 1; ",
);

/// Redisson 3.12.5's unlock script: `RedissonFairLock.java:230-265` (sha1 35d32367).
const UNLOCK_3_12: &str = concat!(
    "while true do ",
    "local firstThreadId2 = redis.call('lindex', KEYS[2], 0);",
    "if firstThreadId2 == false then ",
    "break;",
    "end; ",
    "local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));",
    "if timeout <= tonumber(ARGV[4]) then ",
    "redis.call('zrem', KEYS[3], firstThreadId2); ",
    "redis.call('lpop', KEYS[2]); ",
    "else ",
    "break;",
    "end; ",
    "end;",
    "if (redis.call('exists', KEYS[1]) == 0) then ",
    "local nextThreadId = redis.call('lindex', KEYS[2], 0); ",
    "if nextThreadId ~= false then ",
    "redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); ",
    "end; ",
    "return 1; ",
    "end;",
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then ",
    "return nil;",
    "end; ",
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ",
    "if (counter > 0) then ",
    "redis.call('pexpire', KEYS[1], ARGV[2]); ",
    "return 0; ",
    "end; ",
    "redis.call('del', KEYS[1]); ",
    "local nextThreadId = redis.call('lindex', KEYS[2], 0); ",
    "if nextThreadId ~= false then ",
    "redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); ",
    "end; ",
    "return 1; ",
);

/// `acquireFailedAsync`'s script: `RedissonFairLock.java:78-93` at 4.7.0, the same text as 3.12.5's
/// :76-91 (sha1 d1ddef65).
const ACQUIRE_FAILED: &str = concat!(
    "local queue = redis.call('lrange', KEYS[1], 0, -1);",
    "local i = 1;",
    "while i <= #queue and queue[i] ~= ARGV[1] do ",
    "i = i + 1;",
    "end;",
    "i = i + 1;",
    "while i <= #queue do ",
    "redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);",
    "i = i + 1;",
    "end;",
    "redis.call('zrem', KEYS[2], ARGV[1]);",
    "redis.call('lrem', KEYS[1], 0, ARGV[1]);",
);

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    let old = params.value("preset").and_then(|v| v.as_str()) == Some("redisson-3.12");
    let config = Config {
        thread_wait_ms: params.positive("thread_wait_ms", if old { 5000 } else { 300_000 })?,
    };
    Ok(Box::new(RedissonLock::new(params, Some(config))?))
}

fn names(lock: &RedissonLock) -> (String, String, String) {
    let key = lock.key();
    (
        prefix_name("redisson_lock_queue", &key),
        prefix_name("redisson_lock_timeout", &key),
        key,
    )
}

/// The scripts' `wait`: 3.12's `threadWaitTime`; 4.7's `tryLock` wait time when positive.
fn wait(lock: &RedissonLock, wait_ms: u64) -> String {
    let thread_wait = lock.client.borrow().fair.map_or(5000, |c| c.thread_wait_ms);
    match lock.config().version {
        Version::V4_7 if wait_ms > 0 => wait_ms,
        _ => thread_wait,
    }
    .to_string()
}

/// `tryLockInnerAsync` (`EVAL_LONG`): `Ok(None)` acquired, `Ok(Some(ttl))` queued.
pub(crate) async fn try_lock_inner(
    lock: &RedissonLock,
    env: &Rc<dyn LockEnv>,
    wait_ms: u64,
    lease: u64,
) -> Result<Option<i64>, Failure> {
    let (queue, timeouts, key) = names(lock);
    let name = lock.lock_name(env);
    let current_time = env.wall_ms().to_string();
    let script = match lock.config().version {
        Version::V3_12 => LOCK_3_12,
        Version::V4_7 => LOCK,
    };
    let (lease, wait) = (lease.to_string(), wait(lock, wait_ms));
    let args = [lease.as_str(), &name, &wait, &current_time];
    match synced_eval(lock, env, script, &[&key, &queue, &timeouts], &args, false).await? {
        Reply::Nil => Ok(None),
        Reply::Integer(ttl) => Ok(Some(ttl)),
        other => Err(Failure::Other(format!("unexpected reply {other:?}"))),
    }
}

/// `unlockInnerAsync`; 4.7 with the unlock latch `latch` living `latch_ttl_ms`.
pub(crate) async fn unlock_inner(
    lock: &RedissonLock,
    env: &Rc<dyn LockEnv>,
    latch: &str,
    latch_ttl_ms: u64,
) -> Result<Reply, Failure> {
    let (queue, timeouts, key) = names(lock);
    let name = lock.lock_name(env);
    let lease = lock.lease().to_string();
    let current_time = env.wall_ms().to_string();
    let channel = lock.channel_name();
    match lock.config().version {
        Version::V3_12 => {
            synced_eval(
                lock,
                env,
                UNLOCK_3_12,
                &[&key, &queue, &timeouts, &channel],
                &[UNLOCK_MESSAGE, &lease, &name, &current_time],
                true,
            )
            .await
        }
        Version::V4_7 => {
            synced_eval(
                lock,
                env,
                UNLOCK,
                &[&key, &queue, &timeouts, &channel, latch],
                &[
                    UNLOCK_MESSAGE,
                    &lease,
                    &name,
                    &current_time,
                    "PUBLISH",
                    &latch_ttl_ms.to_string(),
                ],
                false,
            )
            .await
        }
    }
}

/// `acquireFailedAsync`: leave the queue. Errors are the caller's exception; ignored here as the
/// `tryLock` that calls it returns false either way.
pub(crate) async fn acquire_failed(lock: &RedissonLock, env: &Rc<dyn LockEnv>, wait_ms: u64) {
    let (queue, timeouts, _) = names(lock);
    let name = lock.lock_name(env);
    let wait = wait(lock, wait_ms);
    let _ = synced_eval(
        lock,
        env,
        ACQUIRE_FAILED,
        &[&queue, &timeouts],
        &[&name, &wait],
        true,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use crate::locks::testing::{DirectEnv, Shared, block_on, pass};
    use crate::locks::{LockEnv, LockScheme, SchemeSpec};
    use crate::redis::Reply;

    fn lock() -> Box<dyn LockScheme> {
        SchemeSpec::from_json(
            &serde_json::json!({"name": "fair", "ttl_ms": 30_000}),
            "scheme",
        )
        .unwrap()
        .build("s")
        .unwrap()
    }

    /// Starts `env`'s acquire in the background; its result lands in the cell.
    fn wait_for(
        env: &Rc<dyn LockEnv>,
        mut l: Box<dyn LockScheme>,
    ) -> Rc<RefCell<Option<Result<crate::locks::Grant, String>>>> {
        let got = Rc::new(RefCell::new(None));
        let (got2, env2) = (got.clone(), env.clone());
        let _ = env.spawn(Box::pin(async move {
            let r = l.acquire(&env2, 20_000).await;
            *got2.borrow_mut() = Some(r);
            // Keep the lock object (and its watchdog) alive: hold for ever.
            std::future::pending::<()>().await;
        }));
        got
    }

    fn preset_lock(preset: &str) -> Box<dyn LockScheme> {
        SchemeSpec::from_json(
            &serde_json::json!({"name": "fair", "ttl_ms": 3000, "preset": preset}),
            "scheme",
        )
        .unwrap()
        .build("s")
        .unwrap()
    }

    /// a holds the lock for 9 s (its watchdog renews the 3 s lease) while b waits (`tryLock`
    /// 20 s); then c tries once, briefly, and a unlocks. Returns the queue after c's try and
    /// whether b got the lock right after the unlock.
    fn waiter_behind_a_long_holder(preset: &str) -> (Reply, bool) {
        let shared = Shared::new();
        // Each command takes 1 ms, as over a network: a waiter told a TTL of 0 retries at once.
        shared.latency_ms.set(1);
        let a = DirectEnv::new(&shared, "a", 1);
        let mut la = preset_lock(preset);
        block_on(la.acquire(&a, 100)).unwrap();
        let b = DirectEnv::new(&shared, "b", 3);
        let got_b = wait_for(&b, preset_lock(preset));
        pass(&shared, 9000);
        let c = DirectEnv::new(&shared, "c", 5);
        assert!(block_on(preset_lock(preset).acquire(&c, 100)).is_err());
        let queue = shared.command(&["LLEN", "redisson_lock_queue:{lock}"]);
        assert!(block_on(la.release(&a)).ok);
        pass(&shared, 100);
        let b_got_it = matches!(*got_b.borrow(), Some(Ok(_)));
        (queue, b_got_it)
    }

    /// Redisson 4.7 queues b with `tryLock`'s 20 s wait and keeps telling it the lock's TTL:
    /// b keeps its place and the unlock wakes it.
    #[test]
    fn a_waiter_behind_a_long_holder_keeps_its_place() {
        assert_eq!(
            waiter_behind_a_long_holder("redisson-4.7"),
            (Reply::Integer(1), true)
        );
    }

    /// Redisson 3.11.1–3.13.2 (redisson issues 2883, 4705): b's deadline is the lease plus the
    /// fixed 5 s `threadWaitTime`; once it passes, b is told a negative TTL and sleeps its whole
    /// wait, c's try drops it from the queue as stale, and the unlock wakes nobody.
    #[test]
    fn redisson_3_12_drops_a_live_waiter_behind_a_long_holder() {
        assert_eq!(
            waiter_behind_a_long_holder("redisson-3.12"),
            (Reply::Integer(0), false)
        );
    }

    #[test]
    fn waiters_get_the_lock_in_arrival_order() {
        let shared = Shared::new();
        let a = DirectEnv::new(&shared, "a", 1);
        let mut la = lock();
        block_on(la.acquire(&a, 100)).unwrap();
        let c = DirectEnv::new(&shared, "c", 5);
        let b = DirectEnv::new(&shared, "b", 3);
        let got_c = wait_for(&c, lock());
        pass(&shared, 10);
        let got_b = wait_for(&b, lock());
        pass(&shared, 10);
        assert_eq!(
            shared.command(&["LLEN", "redisson_lock_queue:{lock}"]),
            Reply::Integer(2)
        );
        block_on(la.release(&a));
        pass(&shared, 1);
        assert!(
            matches!(*got_c.borrow(), Some(Ok(_))),
            "c queued first, c goes first"
        );
        assert!(got_b.borrow().is_none());
    }

    #[test]
    fn a_client_whose_clock_runs_ahead_empties_the_queue_and_goes_first() {
        let shared = Shared::new();
        let a = DirectEnv::new(&shared, "a", 1);
        let mut la = lock();
        block_on(la.acquire(&a, 100)).unwrap();
        let b = DirectEnv::new(&shared, "b", 3);
        let got_b = wait_for(&b, lock());
        pass(&shared, 10);
        // c's wall clock is 10 minutes ahead: b's deadline (now + ~35 s) looks long past. One
        // attempt of c, as its lock script runs with c's currentTime:
        let (queue, timeouts) = ("redisson_lock_queue:{lock}", "redisson_lock_timeout:{lock}");
        let c_now = (crate::locks::testing::EPOCH_MS + 600_000).to_string();
        let lock_script_reply = shared.command(&[
            "EVAL",
            super::LOCK,
            "3",
            "lock",
            queue,
            timeouts,
            "30000",
            "c-uuid:1",
            "5000",
            &c_now,
        ]);
        assert!(matches!(lock_script_reply, Reply::Integer(_)));
        assert_eq!(
            shared.command(&["LRANGE", queue, "0", "-1"]),
            Reply::Array(vec![Reply::bulk("c-uuid:1")]),
            "b was dropped from the queue as stale; c is now first"
        );
        assert!(got_b.borrow().is_none());
    }
}
