//! `setnx-getset`: the lock value is the holder's expiry time by its own wall clock; an expired
//! lock is taken over with `GETSET`; `DEL` releases.
//!
//! Sources: seed 001 (《Redis实现分布式锁》) 错误示例2 `wrongGetLock2`:
//! `expires = System.currentTimeMillis() + expireTime; if (jedis.setnx(lockKey, expiresStr) == 1)
//! return true; currentValueStr = jedis.get(lockKey); if (currentValueStr != null &&
//! Long.parseLong(currentValueStr) < System.currentTimeMillis()) { oldValueStr =
//! jedis.getSet(lockKey, expiresStr); if (oldValueStr != null && oldValueStr.equals(currentValueStr))
//! return true; } return false;` — and the Redis `SETNX` documentation's "Handling deadlocks"
//! pattern it comes from (GETSET the new expiry, acquired if the old value was the expired one).
//! Release is seed 001's `jedis.del(lockKey)` (错误示例1 of unlocking: no owner check).
//!
//! The article lists its flaws: expiry times come from the clients' clocks, which must all be in
//! sync; a losing GETSET still overwrites the winner's expiry; the lock names no owner, so anyone
//! can unlock it. A client whose clock runs ahead sees every other client's lock as expired and
//! takes it.
//!
//! Parameters: `key` (`lock`), `ttl_ms` (`expireTime`, default 10 000; the article gives none),
//! `retry_delay_ms` (100: the article returns false at once; the workload retries).
//! What breaks it: client clock skew (`clock_jump` / `clock_drift` on a client).

use std::rc::Rc;

use async_trait::async_trait;

use super::set::del_release;
use super::setnx_del::setnx;
use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, command, not_acquired,
    retry_until,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "setnx-getset",
    summary: "SETNX k <own wall-clock expiry>; an expired value is taken over with GETSET / DEL: trusts client clocks",
    source: "seed 001 错误示例2 (wrongGetLock2); Redis SETNX docs, 'Handling deadlocks'",
    default_ttl_ms: 10_000,
    family: Family::TwoStep,
    lease: Lease::Ms,
    in_all: true,
    presets: &[],
    build,
};

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(SetnxGetset {
        key: params.key()?,
        ttl_ms: params.positive("ttl_ms", INFO.default_ttl_ms)?,
        retry_delay_ms: params.positive("retry_delay_ms", 100)?,
        held: false,
    }))
}

pub struct SetnxGetset {
    key: String,
    ttl_ms: u64,
    retry_delay_ms: u64,
    held: bool,
}

/// `wrongGetLock2` once: `Ok(Some(value))` when acquired with that value.
async fn wrong_get_lock2(
    env: &Rc<dyn LockEnv>,
    key: &str,
    ttl_ms: u64,
) -> Result<Option<String>, String> {
    let expires = (env.wall_ms() + ttl_ms as i64).to_string();
    // The value is only a timestamp: two clients can write the same one. It is registered as
    // this client's only once it won, so a loser's equal value does not take the key over on
    // the timeline.
    if setnx(env, key, &expires).await? {
        env.register_token(&expires);
        return Ok(Some(expires));
    }
    let current = match command(env, 0, &["GET", key]).await {
        Ok(Reply::Bulk(v)) => Some(String::from_utf8_lossy(&v).into_owned()),
        Ok(_) => None,
        Err(e) => return Err(e.to_string()),
    };
    if let Some(current) = current {
        // Long.parseLong throws on anything that is not a number.
        let at: i64 = current
            .parse()
            .map_err(|_| format!("NumberFormatException: For input string: \"{current}\""))?;
        if at < env.wall_ms() {
            let old = match command(env, 0, &["GETSET", key, &expires]).await {
                Ok(Reply::Bulk(v)) => Some(v),
                Ok(_) => None,
                Err(e) => return Err(e.to_string()),
            };
            if old.as_deref() == Some(current.as_bytes()) {
                env.register_token(&expires);
                return Ok(Some(expires));
            }
        }
    }
    Ok(None)
}

#[async_trait(?Send)]
impl LockScheme for SetnxGetset {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let (key, ttl_ms) = (self.key.clone(), self.ttl_ms);
        // An exception (timeout, unparsable value) makes this attempt fail; the workload's loop
        // tries again after the delay.
        let grant =
            retry_until(
                env,
                timeout_ms,
                self.retry_delay_ms,
                async || match wrong_get_lock2(env, &key, ttl_ms).await {
                    Ok(Some(value)) => Some(Grant {
                        token: value,
                        fence: None,
                    }),
                    _ => None,
                },
            )
            .await?;
        self.held = true;
        Ok(grant)
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        if !std::mem::take(&mut self.held) {
            return not_acquired();
        }
        del_release(env, &self.key).await
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use async_trait::async_trait;

    use crate::locks::testing::{DirectEnv, Shared, block_on};
    use crate::locks::{CallError, LocalBoxFuture, LockEnv, SchemeSpec, Subscription, TaskGuard};
    use crate::redis::Reply;

    /// A client whose wall clock runs `skew_ms` ahead of everybody's.
    struct Skewed(DirectEnv, i64);

    #[async_trait(?Send)]
    impl LockEnv for Skewed {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn servers(&self) -> usize {
            1
        }
        fn replicas(&self) -> usize {
            0
        }
        async fn call(&self, s: usize, argv: Vec<Vec<u8>>) -> Result<Reply, CallError> {
            self.0.call(s, argv).await
        }
        async fn subscribe(
            &self,
            s: usize,
            c: &str,
            name: Option<&str>,
        ) -> Result<Box<dyn Subscription>, CallError> {
            self.0.subscribe(s, c, name).await
        }
        fn wall_ms(&self) -> i64 {
            self.0.wall_ms() + self.1
        }
        fn mono_ms(&self) -> u64 {
            self.0.mono_ms()
        }
        async fn sleep_ms(&self, ms: u64) {
            self.0.sleep_ms(ms).await
        }
        fn random_u64(&self) -> u64 {
            self.0.random_u64()
        }
        fn register_token(&self, _: &str) {}
        fn spawn(&self, task: LocalBoxFuture<'static, ()>) -> Box<dyn TaskGuard> {
            self.0.spawn(task)
        }
    }

    fn spec() -> SchemeSpec {
        SchemeSpec::from_json(
            &serde_json::json!({"name": "setnx-getset", "ttl_ms": 1000}),
            "scheme",
        )
        .unwrap()
    }

    #[test]
    fn an_expired_timestamp_is_taken_over_with_getset() {
        let shared = Shared::new();
        let (a, b) = (
            DirectEnv::new(&shared, "a", 1),
            DirectEnv::new(&shared, "b", 2),
        );
        let first = block_on(spec().build("s").unwrap().acquire(&a, 100)).unwrap();
        assert!(block_on(spec().build("s").unwrap().acquire(&b, 500)).is_err());
        shared.advance(1001);
        let second = block_on(spec().build("s").unwrap().acquire(&b, 100)).unwrap();
        assert!(second.token.parse::<i64>().unwrap() > first.token.parse::<i64>().unwrap());
    }

    #[test]
    fn a_fast_clock_steals_a_live_lock() {
        let shared = Shared::new();
        let a = DirectEnv::new(&shared, "a", 1);
        let b: Rc<dyn LockEnv> = Rc::new(Skewed(DirectEnv::concrete(&shared, "b", 2), 5000));
        block_on(spec().build("s").unwrap().acquire(&a, 100)).unwrap();
        // a's lock has 1 s left by the true time, but b's clock says it expired 4 s ago.
        assert!(block_on(spec().build("s").unwrap().acquire(&b, 100)).is_ok());
    }
}
