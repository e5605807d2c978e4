//! `watchdog`: the single-instance lock plus a background renewal — `PEXPIRE` the key if it still
//! holds our token, every ttl/3 — stopped on release.
//!
//! Sources: seed 000 (《Redis实现分布式锁的几种方案》) 方案五 and "什么是缓存续命": "看门狗 ... 定期检查
//! (每1/3的锁时间检查1次), 如果线程还持有锁, 则刷新锁过期时间"; seed 003 (《基于Redis方案的分布式鎖
//! 的Java實現》) `RedisDistributedLock.WatchDog`: `while (running && !isInterrupted()) {
//! Thread.sleep(renewalInterval); jedis.eval("if redis.call('get', KEYS[1]) == ARGV[1] then return
//! redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end", [lockKey], [clientId,
//! expireTime]); }` with `renewalInterval = expireTime / 3`, exceptions printed and ignored, and a
//! renewal that returns 0 does not stop it. `unlock` stops the watchdog first, then releases with
//! the compare-and-delete script. Acquire is `SET key token NX PX expireTime`, retried every
//! 100 ms (seed 003's `Thread.sleep(100)`).
//!
//! This is seed 003's lock without its reentrancy and with one token per acquisition (see
//! `reentrant` for the class as written). The watchdog is a task of the client process: a
//! stop-the-world pause stops it too, and a partition makes its renewals fail; either way the
//! lease runs out while the holder still believes it holds the lock.
//!
//! Parameters: `key` (`lock`), `ttl_ms` (30 000: seed 003's example and Redisson's default),
//! `retry_delay_ms` (100), `renew_every_ms` (ttl/3), `preset`: `seed-003` (this), or
//! `redis-semaphore@5.8.0` (its own file, `redis_semaphore.rs`).
//! What breaks it: a pause longer than the lease; a partition between the holder and Redis that
//! outlasts the lease.

use std::rc::Rc;

use async_trait::async_trait;

use super::set_nx_px_lua::{compare_and_delete, set_nx_px};
use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, PresetInfo, Release, SchemeInfo, TaskGuard,
    eval, not_acquired, random_token, redis_semaphore, retry_until,
};

pub const INFO: SchemeInfo = SchemeInfo {
    id: "watchdog",
    summary: "SET NX PX + Lua compare-and-delete, renewed by a background PEXPIRE-if-owner every ttl/3",
    source: "seed 000 方案五 (缓存续命); seed 003 RedisDistributedLock.WatchDog",
    default_ttl_ms: 30_000,
    family: Family::Renewed,
    lease: Lease::Ms,
    in_all: true,
    presets: &[PresetInfo {
        name: "redis-semaphore@5.8.0",
        summary: "redis-semaphore 5.8.0 Mutex (node): SET NX PX every 10 ms, refreshed every 0.8 × lockTimeout until a refresh fails, release by a Lua compare-and-delete",
        lease: Lease::Ms,
        same_as: Some("watchdog"),
    }],
    build,
};

/// Seed 003's renewal script.
pub const RENEW_IF_OWNER: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    // `seed-003`: this file; a library's preset is its own file.
    if params.choice("preset", &["seed-003", "redis-semaphore@5.8.0"], "seed-003")?
        == "redis-semaphore@5.8.0"
    {
        return redis_semaphore::build(params);
    }
    let ttl_ms = params.positive("ttl_ms", INFO.default_ttl_ms)?;
    Ok(Box::new(Watchdog {
        key: params.key()?,
        ttl_ms,
        retry_delay_ms: params.positive("retry_delay_ms", 100)?,
        renew_every_ms: params.positive("renew_every_ms", (ttl_ms / 3).max(1))?,
        held: None,
    }))
}

pub struct Watchdog {
    key: String,
    ttl_ms: u64,
    retry_delay_ms: u64,
    renew_every_ms: u64,
    held: Option<(String, Box<dyn TaskGuard>)>,
}

/// Starts seed 003's watchdog thread: renew every `every_ms` until cancelled, whatever happens.
pub fn start_watchdog(
    env: &Rc<dyn LockEnv>,
    key: &str,
    token: &str,
    ttl_ms: u64,
    every_ms: u64,
) -> Box<dyn TaskGuard> {
    let (task_env, key, token, ttl) = (
        env.clone(),
        key.to_string(),
        token.to_string(),
        ttl_ms.to_string(),
    );
    env.spawn(Box::pin(async move {
        loop {
            task_env.sleep_ms(every_ms).await;
            // "記錄異常但繼續運行": errors and a lost lock alike are ignored.
            let _ = eval(&task_env, 0, RENEW_IF_OWNER, &[&key], &[&token, &ttl]).await;
        }
    }))
}

#[async_trait(?Send)]
impl LockScheme for Watchdog {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let token = random_token(env.as_ref());
        env.register_token(&token);
        let (key, ttl_ms) = (self.key.clone(), self.ttl_ms);
        let grant = retry_until(env, timeout_ms, self.retry_delay_ms, async || {
            set_nx_px(env, 0, &key, &token, ttl_ms)
                .await
                .then(|| Grant {
                    token: token.clone(),
                    fence: None,
                })
        })
        .await?;
        let dog = start_watchdog(env, &self.key, &grant.token, ttl_ms, self.renew_every_ms);
        self.held = Some((grant.token.clone(), dog));
        Ok(grant)
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let Some((token, dog)) = self.held.take() else {
            return not_acquired();
        };
        dog.cancel();
        compare_and_delete(env, 0, &self.key, &token).await
    }
}

#[cfg(test)]
mod tests {

    use crate::locks::testing::{block_on, pass, two_clients};
    use crate::redis::Reply;

    #[test]
    fn the_watchdog_keeps_the_lease_alive_until_release() {
        let (shared, (a, mut la), (b, mut lb)) =
            two_clients(serde_json::json!({"name": "watchdog", "ttl_ms": 900}));
        block_on(la.acquire(&a, 100)).unwrap();
        // Ten leases later the key is still there, renewed every 300 ms.
        assert!(block_on(lb.acquire(&b, 9000)).is_err());
        assert!(matches!(shared.command(&["PTTL", "lock"]), Reply::Integer(t) if t > 500));
        assert_eq!(shared.running_tasks(), 1);
        assert!(block_on(la.release(&a)).ok);
        pass(&shared, 1000);
        assert_eq!(shared.running_tasks(), 0, "release stops the watchdog");
        assert!(block_on(lb.acquire(&b, 100)).is_ok());
    }
}
