//! `fencing`: the single-instance lock plus a fencing token, checked by the resource.
//!
//! Source: seed 004 relaying Kleppmann 2016 ("How to do distributed locking", section "Making the
//! lock safe with fencing"): every grant comes with a number that increases with each grant; the
//! storage rejects any request carrying a lower number than one it has already seen. Here the
//! grant and the token come from one script on the lock's master: `SET NX PX`, then `INCR` of a
//! counter key next to the lock.
//!
//! The counter is only as monotonic as that master's data. Replication is asynchronous: after a
//! failover to a replica that missed the last `INCR`, the next grant gets the same token again,
//! and the storage (which refuses only *lower* tokens) accepts both holders
//! (`fencing-failover-lagging-replica`). Kleppmann's tokens come from a consensus-backed counter
//! (ZooKeeper's `zxid`); a Redis master is not one.
//!
//! Parameters: `key` (`lock`), `fence_key` (`<key>:fence`), `ttl_ms` (30 000), `retry_delay_ms`
//! (50: locksim's choice, as for `set-nx-px-lua`; neither Kleppmann nor seed 004 polls).

use std::rc::Rc;

use async_trait::async_trait;

use super::set_nx_px_lua::compare_and_delete;
use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, eval, random_token,
    retry_until,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "fencing",
    summary: "SET NX PX + an INCR fencing token on the lock's master; the resource rejects lower tokens (a failover can repeat one)",
    source: "seed 004 / Kleppmann 2016, fencing tokens",
    default_ttl_ms: 30_000,
    family: Family::Fencing,
    lease: Lease::Ms,
    in_all: true,
    presets: &[],
    build,
};

/// Grants the lock and returns the next fencing token, or 0 when the lock is taken.
const ACQUIRE: &str = "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n    return redis.call('incr', KEYS[2])\nelse\n    return 0\nend";

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    let key = params.key()?;
    Ok(Box::new(Fencing {
        fence_key: params.string("fence_key", &format!("{key}:fence"))?,
        key,
        ttl_ms: params.positive("ttl_ms", INFO.default_ttl_ms)?,
        retry_delay_ms: params.positive("retry_delay_ms", 50)?,
        token: None,
    }))
}

pub struct Fencing {
    key: String,
    fence_key: String,
    ttl_ms: u64,
    retry_delay_ms: u64,
    token: Option<String>,
}

#[async_trait(?Send)]
impl LockScheme for Fencing {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let token = random_token(env.as_ref());
        env.register_token(&token);
        let ttl = self.ttl_ms.to_string();
        let (key, fence_key) = (self.key.clone(), self.fence_key.clone());
        let grant = retry_until(env, timeout_ms, self.retry_delay_ms, async || {
            match eval(env, 0, ACQUIRE, &[&key, &fence_key], &[&token, &ttl]).await {
                Ok(Reply::Integer(fence)) if fence > 0 => Some(Grant {
                    token: token.clone(),
                    fence: Some(fence as u64),
                }),
                _ => None,
            }
        })
        .await?;
        self.token = Some(grant.token.clone());
        Ok(grant)
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        match self.token.take() {
            Some(token) => compare_and_delete(env, 0, &self.key, &token).await,
            None => Release {
                ok: false,
                detail: "not acquired".into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {

    use crate::locks::testing::{block_on, two_clients};

    #[test]
    fn every_grant_carries_a_larger_token() {
        let (shared, (a, mut la), (b, mut lb)) =
            two_clients(serde_json::json!({"name": "fencing", "ttl_ms": 1000}));
        let first = block_on(la.acquire(&a, 100)).unwrap();
        assert!(block_on(lb.acquire(&b, 100)).is_err());
        shared.advance(1001);
        let second = block_on(lb.acquire(&b, 100)).unwrap();
        assert_eq!((first.fence, second.fence), (Some(1), Some(2)));
    }
}
