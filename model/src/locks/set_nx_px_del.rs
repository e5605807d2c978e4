//! `set-nx-px-del`: `SET key token NX PX ttl` to acquire (atomic, with a TTL), plain `DEL` to
//! release.
//!
//! Sources: seed 000 (《Redis实现分布式锁的几种方案》) 方案二 — `setIfAbsent(REDIS_LOCK, value, 10L,
//! TimeUnit.SECONDS)` with the unchanged `finally { redisTemplate.delete(REDIS_LOCK); }`; seed 004
//! (《大家所推崇的Redis分布式锁真的就万无一失吗》): "SET lockKey lockValue PX 10000 NX ... 解锁的时候还是
//! 使用DEL命令来解锁". Both go on to name the flaw (seed 000 方案三, seed 004): a holder that
//! outlives its 10 s TTL deletes the lock somebody else has taken since.
//!
//! Parameters: `key` (`lock`), `ttl_ms` (10 000, both seeds), `retry_delay_ms` (100; seed 000
//! fails at once and the workload retries).
//! What breaks it: a hold longer than the TTL (foreign release, mutual exclusion violated).

use std::rc::Rc;

use async_trait::async_trait;

use super::set::del_release;
use super::set_nx_px_lua::set_nx_px;
use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, not_acquired,
    retry_until, undashed, uuid4,
};

pub const INFO: SchemeInfo = SchemeInfo {
    id: "set-nx-px-del",
    summary: "SET k token NX PX ttl / plain DEL: a holder past its TTL deletes the next holder's lock",
    source: "seed 000 方案二; seed 004 (SET NX PX, DEL)",
    default_ttl_ms: 10_000,
    family: Family::SetNxPx,
    lease: Lease::Ms,
    in_all: true,
    presets: &[],
    build,
};

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(SetNxPxDel {
        key: params.key()?,
        ttl_ms: params.positive("ttl_ms", INFO.default_ttl_ms)?,
        retry_delay_ms: params.positive("retry_delay_ms", 100)?,
        held: false,
    }))
}

pub struct SetNxPxDel {
    key: String,
    ttl_ms: u64,
    retry_delay_ms: u64,
    held: bool,
}

#[async_trait(?Send)]
impl LockScheme for SetNxPxDel {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let token = undashed(&uuid4(env.as_ref()));
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

    use crate::locks::testing::{block_on, two_clients};
    use crate::redis::Reply;

    #[test]
    fn a_late_release_deletes_the_next_holders_lock() {
        let (shared, (a, mut la), (b, mut lb)) =
            two_clients(serde_json::json!({"name": "set-nx-px-del", "ttl_ms": 1000}));
        block_on(la.acquire(&a, 100)).unwrap();
        assert!(block_on(lb.acquire(&b, 300)).is_err());
        shared.advance(1001);
        block_on(lb.acquire(&b, 100)).unwrap();
        block_on(la.release(&a));
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(0));
    }
}
