//! `reentrant`: seed 003's `RedisDistributedLock` as written — one clientId per lock *instance*,
//! a `ThreadLocal` reentrancy count, 100 ms polling, a watchdog thread per holder.
//!
//! Source: seed 003 (《基于Redis方案的分布式鎖的Java實現》), class `RedisDistributedLock implements
//! Lock` and its `RedisLockExample` (one instance shared by a pool of threads):
//! - the constructor sets `clientId = Thread.currentThread().getName() + "-" +
//!   System.currentTimeMillis() + "-" + (int)(Math.random() * 10000)` — once per instance, so
//!   every thread using the instance writes the same value. The example builds it in `main`; here
//!   it is made at the instance's first acquire, from that moment's wall clock, as `main-<ms>-<n>`.
//! - `tryLock()`: if this thread's count > 0, count + 1 (reentry); else `SET key clientId NX PX
//!   expireTime`, and on `OK` count = 1 and a new `WatchDog` thread.
//! - `tryLock(time, unit)`: `startTime = System.currentTimeMillis()`, one `tryLock()`, then
//!   `while (System.currentTimeMillis() - startTime < timeoutMillis) { tryLock(); Thread.sleep(100) }`
//!   — the timeout runs on the wall clock.
//! - `unlock()`: count 0 → `IllegalMonitorStateException`; count − 1; at 0 stop the watchdog,
//!   then `EVAL` compare-and-delete with clientId, a result other than 1 → `IllegalMonitorState
//!   Exception("Failed to release lock")`; the count and watchdog ThreadLocals are cleared.
//! - `WatchDog`: every `expireTime / 3`, `PEXPIRE key expireTime` if the key holds clientId;
//!   exceptions printed, the loop goes on.
//! - `isFair` is stored and never read: the "公平鎖" the article advertises does not exist
//!   (parameter `fair` is accepted and changes nothing, as in the source).
//!
//! Threads (`clients.threads`) share one instance (`LockScheme::share`): one clientId, a count
//! and a watchdog per thread. Because the value names the instance, not the thread, once a lease
//! runs out under thread 1 (a pause, a partition) thread 2 can take the lock with the same value;
//! thread 1's watchdog then renews thread 2's lock and its unlock deletes it.
//!
//! Parameters: `key` (`lock`), `ttl_ms` (`expireTime`, 30 000 as the example), `fair` (false).
//! What breaks it: two threads of one process sharing the instance when a lease runs out (a
//! pause or partition longer than the lease); and, like `watchdog`, any such pause across
//! processes.

use std::cell::RefCell;
use std::rc::Rc;

use async_trait::async_trait;

use super::watchdog::start_watchdog;
use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, TaskGuard, eval,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "reentrant",
    summary: "seed 003 RedisDistributedLock: one clientId per instance, ThreadLocal count, 100 ms polling, watchdog",
    source: "seed 003 RedisDistributedLock / RedisLockExample",
    default_ttl_ms: 30_000,
    family: Family::Renewed,
    lease: Lease::Ms,
    in_all: true,
    presets: &[],
    build,
};

/// Seed 003's unlock script.
const UNLOCK: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    let key = params.key()?;
    let expire_time = params.positive("ttl_ms", INFO.default_ttl_ms)?;
    // Stored, never read — as `isFair` in the source.
    let _is_fair = params.bool("fair", false)?;
    Ok(Box::new(RedisDistributedLock {
        instance: Rc::new(RefCell::new(Instance {
            key,
            expire_time,
            client_id: None,
        })),
        count: 0,
        watch_dog: None,
    }))
}

/// What the threads of one process share: the lock object's fields.
struct Instance {
    key: String,
    expire_time: u64,
    client_id: Option<String>,
}

/// One thread's handle on the shared instance, with that thread's ThreadLocals.
pub struct RedisDistributedLock {
    instance: Rc<RefCell<Instance>>,
    /// `reentrantCount` for this thread.
    count: u32,
    /// `watchDog` for this thread.
    watch_dog: Option<Box<dyn TaskGuard>>,
}

impl RedisDistributedLock {
    fn client_id(&self, env: &Rc<dyn LockEnv>) -> String {
        let mut instance = self.instance.borrow_mut();
        instance
            .client_id
            .get_or_insert_with(|| format!("main-{}-{}", env.wall_ms(), env.random_u64() % 10_000))
            .clone()
    }

    /// `tryLock()`: `Err` is a Jedis exception, which propagates.
    async fn try_lock(&mut self, env: &Rc<dyn LockEnv>) -> Result<bool, String> {
        if self.count > 0 {
            self.count += 1;
            return Ok(true);
        }
        let client_id = self.client_id(env);
        let (key, expire_time) = {
            let i = self.instance.borrow();
            (i.key.clone(), i.expire_time)
        };
        let reply = env
            .call(
                0,
                super::argv(&[
                    "SET",
                    &key,
                    &client_id,
                    "NX",
                    "PX",
                    &expire_time.to_string(),
                ]),
            )
            .await
            .map_err(|e| format!("JedisConnectionException: {e}"))?;
        if matches!(reply, Reply::Status(ref s) if s == "OK") {
            self.count = 1;
            self.watch_dog = Some(start_watchdog(
                env,
                &key,
                &client_id,
                expire_time,
                expire_time / 3,
            ));
            return Ok(true);
        }
        Ok(false)
    }
}

#[async_trait(?Send)]
impl LockScheme for RedisDistributedLock {
    /// `tryLock(timeout, MILLISECONDS)`.
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let client_id = self.client_id(env);
        env.register_token(&client_id);
        let grant = Grant {
            token: client_id,
            fence: None,
        };
        let start_time = env.wall_ms();
        if self.try_lock(env).await? {
            return Ok(grant);
        }
        while env.wall_ms() - start_time < timeout_ms as i64 {
            if self.try_lock(env).await? {
                return Ok(grant);
            }
            env.sleep_ms(100).await;
        }
        Err(format!(
            "not acquired within {timeout_ms} ms (by the wall clock)"
        ))
    }

    /// `unlock()`.
    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        if self.count == 0 {
            return Release {
                ok: false,
                detail: "IllegalMonitorStateException: Attempt to unlock lock, not locked by current thread".into(),
            };
        }
        self.count -= 1;
        if self.count > 0 {
            return Release {
                ok: true,
                detail: format!("still held (reentrant count {})", self.count),
            };
        }
        if let Some(dog) = self.watch_dog.take() {
            dog.cancel();
        }
        let client_id = self.client_id(env);
        let key = self.instance.borrow().key.clone();
        match eval(env, 0, UNLOCK, &[&key], &[&client_id]).await {
            Ok(Reply::Integer(1)) => Release {
                ok: true,
                detail: "deleted".into(),
            },
            Ok(_) => Release {
                ok: false,
                detail: "IllegalMonitorStateException: Failed to release lock".into(),
            },
            Err(e) => Release {
                ok: false,
                detail: format!("JedisConnectionException: {e}"),
            },
        }
    }

    /// Another thread using the same `RedisDistributedLock` object.
    fn share(&self) -> Option<Box<dyn LockScheme>> {
        Some(Box::new(RedisDistributedLock {
            instance: self.instance.clone(),
            count: 0,
            watch_dog: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::locks::testing::{DirectEnv, Mishap, Shared, block_on};
    use crate::locks::{LockEnv, LockScheme, SchemeSpec};
    use crate::redis::Reply;
    use std::rc::Rc;

    fn lock(ttl_ms: u64) -> Box<dyn LockScheme> {
        SchemeSpec::from_json(
            &serde_json::json!({"name": "reentrant", "ttl_ms": ttl_ms}),
            "scheme",
        )
        .unwrap()
        .build("s")
        .unwrap()
    }

    #[test]
    fn reentry_counts_and_only_the_last_unlock_deletes() {
        let shared = Shared::new();
        let a = DirectEnv::new(&shared, "a", 1);
        let mut l = lock(30_000);
        let first = block_on(l.acquire(&a, 100)).unwrap();
        assert!(first.token.starts_with("main-"));
        block_on(l.acquire(&a, 100)).unwrap();
        let inner = block_on(l.release(&a));
        assert!(inner.ok && inner.detail.contains("count 1"), "{inner:?}");
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(1));
        assert!(block_on(l.release(&a)).ok);
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(0));
        let extra = block_on(l.release(&a));
        assert!(extra.detail.starts_with("IllegalMonitorStateException"));
    }

    #[test]
    fn threads_of_one_instance_exclude_each_other_while_the_lease_lasts() {
        let shared = Shared::new();
        let env = DirectEnv::new(&shared, "p", 1);
        let mut t1 = lock(3000);
        let mut t2 = t1.share().unwrap();
        let g1 = block_on(t1.acquire(&env, 100)).unwrap();
        assert!(
            block_on(t2.acquire(&env, 10_000)).is_err(),
            "the watchdog keeps it"
        );
        assert!(block_on(t1.release(&env)).ok);
        let g2 = block_on(t2.acquire(&env, 100)).unwrap();
        assert_eq!(g1.token, g2.token, "one clientId per instance");
    }

    #[test]
    fn after_a_lost_lease_one_threads_unlock_deletes_the_others_lock() {
        let shared = Shared::new();
        let p = Rc::new(DirectEnv::concrete(&shared, "p", 1));
        let env: Rc<dyn LockEnv> = p.clone();
        let mut t1 = lock(900);
        let mut t2 = t1.share().unwrap();
        block_on(t1.acquire(&env, 100)).unwrap();
        // The watchdog's renewals never arrive (say a partition): the lease runs out.
        for _ in 0..3 {
            p.mishap("EVAL", Mishap::Drop);
        }
        assert!(
            block_on(t2.acquire(&env, 1200)).is_ok(),
            "thread 2 takes the lapsed lock"
        );
        // Thread 1 still believes it holds the lock; its unlock matches the shared clientId.
        assert!(block_on(t1.release(&env)).ok);
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(0));
        let t2_unlock = block_on(t2.release(&env));
        assert_eq!(
            t2_unlock.detail,
            "IllegalMonitorStateException: Failed to release lock"
        );
    }
}
