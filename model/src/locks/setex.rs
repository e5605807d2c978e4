//! `setex`: `SETEX key seconds value`, the reply taken as "acquired" — a TTL, still no exclusion.
//!
//! Source: seed 002 (《通过 redis + lua 实现分布式事务锁》), the SETEX variant: to avoid the
//! deadlock of a holder that dies, the article puts a TTL on the lock with `SETEX key seconds
//! value` ("它相当于 SET key value; EXPIRE key seconds"). It keeps the first scheme's belief that
//! the reply tells who won; SETEX always answers `OK`, so every client acquires at once. Release
//! is `DEL key`. As in `set`, every process writes the same value.
//!
//! Parameters: `key` (`lock`), `ttl_ms` (whole seconds, default 10 000: the article gives no
//! figure; seeds 000 and 004 use 10 s), `value` (`"1"`), `retry_delay_ms` (100, only after a
//! failed SETEX).
//! What breaks it: anything — two clients and no faults violate mutual exclusion.

use std::rc::Rc;

use async_trait::async_trait;

use super::set::del_release;
use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, command, not_acquired,
    retry_until, whole_seconds,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "setex",
    summary: "SETEX k ttl v and take the reply as acquired: a TTL, still no exclusion at all",
    source: "seed 002 (redis + lua 分布式事务锁), SETEX variant",
    default_ttl_ms: 10_000,
    family: Family::NoExclusion,
    lease: Lease::Seconds,
    in_all: true,
    presets: &[],
    build,
};

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(Setex {
        key: params.key()?,
        ttl_s: whole_seconds(params, INFO.default_ttl_ms)?,
        value: params.string("value", "1")?,
        retry_delay_ms: params.positive("retry_delay_ms", 100)?,
        held: false,
    }))
}

pub struct Setex {
    key: String,
    ttl_s: u64,
    value: String,
    retry_delay_ms: u64,
    held: bool,
}

#[async_trait(?Send)]
impl LockScheme for Setex {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let (key, value, ttl) = (self.key.clone(), self.value.clone(), self.ttl_s.to_string());
        let grant = retry_until(
            env,
            timeout_ms,
            self.retry_delay_ms,
            async || match command(env, 0, &["SETEX", &key, &ttl, &value]).await {
                Ok(Reply::Error(_)) | Err(_) => None,
                Ok(_) => Some(Grant {
                    token: value.clone(),
                    fence: None,
                }),
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
    use crate::locks::SchemeSpec;
    use crate::locks::testing::{block_on, two_clients};
    use crate::redis::Reply;

    #[test]
    fn both_acquire_and_the_key_has_a_ttl() {
        let (shared, (a, mut la), (b, mut lb)) =
            two_clients(serde_json::json!({"name": "setex", "ttl_ms": 3000}));
        assert!(block_on(la.acquire(&a, 100)).is_ok());
        assert!(block_on(lb.acquire(&b, 100)).is_ok());
        assert_eq!(shared.command(&["TTL", "lock"]), Reply::Integer(3));
    }

    #[test]
    fn ttl_must_be_whole_seconds() {
        let err = SchemeSpec::from_json(
            &serde_json::json!({"name": "setex", "ttl_ms": 1500}),
            "scheme",
        )
        .unwrap_err();
        assert!(err.starts_with("scheme.ttl_ms: "), "{err}");
    }
}
