//! `fair`: Redisson's `RedissonFairLock` — the `redisson` hash lock plus a FIFO queue of waiting
//! threads (`redisson_lock_queue:{name}`, a list) and their deadlines (`redisson_lock_timeout:
//! {name}`, a sorted set scored with the *client's* wall-clock milliseconds).
//!
//! Sources: Redisson `redisson/src/main/java/org/redisson/RedissonFairLock.java` (the zset
//! design, Redisson 3.13–3.2x: `tryLockInnerAsync`, `unlockInnerAsync`, `acquireFailedAsync`,
//! per-thread channels); seed 003 advertises "公平 / 非公平鎖" (its own class ignores the flag —
//! see `reentrant`). The scripts below make the same Redis calls as Redisson's (reformatted):
//! - lock (`KEYS = [name, queue, timeouts]`, `ARGV = [lease, uuid:thread, wait, currentTime]`):
//!   pop every queue head whose deadline ≤ `currentTime` (stale waiters); if the lock is free and
//!   the queue empty or headed by us, pop us, lower every other deadline by `wait`, take the
//!   lock (`HSET`, `PEXPIRE`) and return nil; a re-entry increments; if we already queue, return
//!   our deadline − `wait` − `currentTime`; else queue at the tail with deadline = (the previous
//!   tail's deadline − `currentTime`, or the lock's `PTTL`) + `wait` + `currentTime`, and return
//!   that TTL.
//! - unlock (`ARGV = [0, lease, uuid:thread, currentTime]`): drop stale heads; a missing lock
//!   answers 1 after waking the head; no field → nil; decrement; at 0 `DEL` and `PUBLISH
//!   redisson_lock__channel:{name}:<head> 0` — only the queue head is woken.
//! - acquire failed (`tryLock` timed out): remove us from the queue, lowering the deadlines of
//!   those behind us by `wait`.
//!
//! `currentTime` is `System.currentTimeMillis()` of the caller: a client whose clock runs ahead
//! sees every waiter's deadline as passed, removes them all, and goes first — FIFO order is lost
//! (mutual exclusion is not: the hash is still one holder). The wait loop, renewal watchdog and
//! thread handles are `redisson`'s.
//!
//! Parameters: `key` (`lock`), `ttl_ms` (`lockWatchdogTimeout`, 30 000), `lease_ms` (none),
//! `thread_wait_ms` (the scripts' `wait`, default 5000 — Redisson ≤ 3.12's fixed
//! `threadWaitTime`; 3.13+ pass `tryLock`'s `waitTime` instead when one is given, and 300 000
//! for `lock()`: set `thread_wait_ms` to the scenario's `acquire_timeout_ms` to model that;
//! the default `acquire_timeout_ms` is also 5000).
//! What breaks it: client clock skew (`clock_jump` on a client) breaks FIFO order; as `redisson`,
//! pauses and partitions longer than the lease break mutual exclusion.

use std::rc::Rc;

use super::redisson::{RedissonLock, UNLOCK_MESSAGE, prefix_name};
use super::{LockEnv, LockScheme, Params, SchemeInfo, eval};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "fair",
    summary: "Redisson RedissonFairLock: lock hash + waiter queue list + deadline zset scored with the client's wall clock",
    source: "Redisson RedissonFairLock.java (3.13-3.2x); seed 003 (公平鎖, named)",
    default_ttl_ms: 30_000,
    build,
};

/// The fair lock's settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub thread_wait_ms: u64,
}

const LOCK: &str = "while true do
    local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
    if firstThreadId2 == false then
        break;
    end;
    local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));
    if timeout <= tonumber(ARGV[4]) then
        redis.call('zrem', KEYS[3], firstThreadId2);
        redis.call('lpop', KEYS[2]);
    else
        break;
    end;
end;
if (redis.call('exists', KEYS[1]) == 0)
        and ((redis.call('exists', KEYS[2]) == 0)
            or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
    redis.call('lpop', KEYS[2]);
    redis.call('zrem', KEYS[3], ARGV[2]);
    local keys = redis.call('zrange', KEYS[3], 0, -1);
    for i = 1, #keys, 1 do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);
    end;
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
local timeout = redis.call('zscore', KEYS[3], ARGV[2]);
if timeout ~= false then
    return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);
end;
local lastThreadId = redis.call('lindex', KEYS[2], -1);
local ttl;
if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
    ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);
else
    ttl = redis.call('pttl', KEYS[1]);
end;
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2]);
end;
return ttl;
";

const UNLOCK: &str = "while true do
    local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
    if firstThreadId2 == false then
        break;
    end;
    local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));
    if timeout <= tonumber(ARGV[4]) then
        redis.call('zrem', KEYS[3], firstThreadId2);
        redis.call('lpop', KEYS[2]);
    else
        break;
    end;
end;
if (redis.call('exists', KEYS[1]) == 0) then
    local nextThreadId = redis.call('lindex', KEYS[2], 0);
    if nextThreadId ~= false then
        redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
    end;
    return 1;
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 0;
end;
redis.call('del', KEYS[1]);
local nextThreadId = redis.call('lindex', KEYS[2], 0);
if nextThreadId ~= false then
    redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
end;
return 1;
";

const ACQUIRE_FAILED: &str = "local queue = redis.call('lrange', KEYS[1], 0, -1);
local i = 1;
while i <= #queue and queue[i] ~= ARGV[1] do
    i = i + 1;
end;
i = i + 1;
while i <= #queue do
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);
    i = i + 1;
end;
redis.call('zrem', KEYS[2], ARGV[1]);
redis.call('lrem', KEYS[1], 0, ARGV[1]);
";

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    let config = Config {
        thread_wait_ms: params.positive("thread_wait_ms", 5000)?,
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

fn wait(lock: &RedissonLock) -> String {
    let client = lock.client.borrow();
    client.fair.map_or(5000, |c| c.thread_wait_ms).to_string()
}

fn exception(reply: Result<Reply, super::CallError>) -> Result<Reply, String> {
    match reply {
        Ok(Reply::Error(e)) => Err(String::from_utf8_lossy(&e).into_owned()),
        Ok(reply) => Ok(reply),
        Err(e) => Err(e.to_string()),
    }
}

/// `tryLockInnerAsync` (`EVAL_LONG`): `Ok(None)` acquired, `Ok(Some(ttl))` queued.
pub(crate) async fn try_lock_inner(
    lock: &RedissonLock,
    env: &Rc<dyn LockEnv>,
    lease: u64,
) -> Result<Option<i64>, String> {
    let (queue, timeouts, key) = names(lock);
    let name = lock.lock_name(env);
    let current_time = env.wall_ms().to_string();
    let reply = exception(
        eval(
            env,
            0,
            LOCK,
            &[&key, &queue, &timeouts],
            &[&lease.to_string(), &name, &wait(lock), &current_time],
        )
        .await,
    )?;
    match reply {
        Reply::Nil => Ok(None),
        Reply::Integer(ttl) => Ok(Some(ttl)),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// `unlockInnerAsync`.
pub(crate) async fn unlock_inner(
    lock: &RedissonLock,
    env: &Rc<dyn LockEnv>,
) -> Result<Reply, String> {
    let (queue, timeouts, key) = names(lock);
    let name = lock.lock_name(env);
    let lease = lock.lease().to_string();
    let current_time = env.wall_ms().to_string();
    exception(
        eval(
            env,
            0,
            UNLOCK,
            &[&key, &queue, &timeouts, &lock.channel_name()],
            &[UNLOCK_MESSAGE, &lease, &name, &current_time],
        )
        .await,
    )
}

/// `acquireFailedAsync`: leave the queue. Errors are the caller's exception; ignored here as the
/// `tryLock` that calls it returns false either way.
pub(crate) async fn acquire_failed(lock: &RedissonLock, env: &Rc<dyn LockEnv>) {
    let (queue, timeouts, _) = names(lock);
    let name = lock.lock_name(env);
    let _ = eval(
        env,
        0,
        ACQUIRE_FAILED,
        &[&queue, &timeouts],
        &[&name, &wait(lock)],
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
