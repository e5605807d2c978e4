//! `set-nx-px-get-del`: `SET key token NX PX ttl`; release checks the owner with `GET` and then
//! deletes with `DEL` — two commands, not atomic.
//!
//! Sources: seed 000 (《Redis实现分布式锁的几种方案》) 方案三 — `finally { if (template.opsForValue()
//! .get(REDIS_LOCK).equals(value)) { redisTemplate.delete(REDIS_LOCK); } }`, whose 方案四 names
//! the flaw ("finally块的判断和del的删除操作不是原子操作"); seed 001 (《Redis实现分布式锁》) 解锁
//! 错误示例2 `wrongReleaseLock2`: `if (requestId.equals(jedis.get(lockKey))) { /* 若在此时, 这把锁
//! 突然不是这个客户端的, 则会误解锁 */ jedis.del(lockKey); }`.
//!
//! A missing key makes seed 000's `get(...).equals(value)` throw a NullPointerException: the
//! release reports it and deletes nothing.
//!
//! Parameters: `key` (`lock`), `ttl_ms` (10 000, seed 000), `retry_delay_ms` (100).
//! What breaks it: the key expiring between the GET and the DEL (a pause after the GET), so the
//! DEL removes the next holder's lock.

use std::rc::Rc;

use async_trait::async_trait;

use super::set::del_release;
use super::set_nx_px_lua::set_nx_px;
use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, command, not_acquired,
    retry_until, undashed, uuid4,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "set-nx-px-get-del",
    summary: "SET k token NX PX ttl / GET == token then DEL (two commands): the key can change hands in between",
    source: "seed 000 方案三; seed 001 解锁错误示例2 (wrongReleaseLock2)",
    default_ttl_ms: 10_000,
    family: Family::SetNxPx,
    lease: Lease::Ms,
    in_all: true,
    presets: &[],
    build,
};

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(SetNxPxGetDel {
        key: params.key()?,
        ttl_ms: params.positive("ttl_ms", INFO.default_ttl_ms)?,
        retry_delay_ms: params.positive("retry_delay_ms", 100)?,
        token: None,
    }))
}

pub struct SetNxPxGetDel {
    key: String,
    ttl_ms: u64,
    retry_delay_ms: u64,
    token: Option<String>,
}

#[async_trait(?Send)]
impl LockScheme for SetNxPxGetDel {
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
        self.token = Some(grant.token.clone());
        Ok(grant)
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let Some(token) = self.token.take() else {
            return not_acquired();
        };
        match command(env, 0, &["GET", &self.key]).await {
            // 谁加的锁, 谁才能删除 — but the key may change hands before the DEL lands.
            Ok(Reply::Bulk(v)) if v == token.as_bytes() => del_release(env, &self.key).await,
            Ok(Reply::Bulk(_)) => Release {
                ok: false,
                detail: "somebody else's lock: not deleted".into(),
            },
            Ok(Reply::Nil) => Release {
                ok: false,
                detail: "NullPointerException: get(REDIS_LOCK) is null (the lock expired)".into(),
            },
            Ok(other) => Release {
                ok: false,
                detail: format!("unexpected reply {other:?}"),
            },
            Err(e) => Release {
                ok: false,
                detail: e.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use crate::locks::testing::{DirectEnv, Mishap, Shared, block_on};
    use crate::locks::{LockEnv, SchemeSpec};
    use crate::redis::Reply;

    #[test]
    fn get_then_del_is_two_commands() {
        let shared = Shared::new();
        let spec = SchemeSpec::from_json(
            &serde_json::json!({"name": "set-nx-px-get-del", "ttl_ms": 1000}),
            "scheme",
        )
        .unwrap();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        let mut la = spec.build("s").unwrap();
        block_on(la.acquire(&a_dyn, 100)).unwrap();
        assert!(block_on(la.release(&a_dyn)).ok);
        let sent = a.sent.borrow();
        assert!(
            sent[1].starts_with("GET lock") && sent[2] == "DEL lock",
            "{sent:?}"
        );
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(0));
    }

    #[test]
    fn an_expired_lock_is_not_deleted_by_the_late_holder() {
        let shared = Shared::new();
        let spec = SchemeSpec::from_json(
            &serde_json::json!({"name": "set-nx-px-get-del", "ttl_ms": 1000}),
            "scheme",
        )
        .unwrap();
        let (a, b) = (
            DirectEnv::new(&shared, "a", 1),
            DirectEnv::new(&shared, "b", 2),
        );
        let (mut la, mut lb) = (spec.build("s").unwrap(), spec.build("s").unwrap());
        block_on(la.acquire(&a, 100)).unwrap();
        shared.advance(1001);
        block_on(lb.acquire(&b, 100)).unwrap();
        // The check works when nothing happens between GET and DEL.
        assert!(!block_on(la.release(&a)).ok);
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(1));
    }

    #[test]
    fn a_pause_between_get_and_del_deletes_the_next_holders_lock() {
        let shared = Shared::new();
        let spec = SchemeSpec::from_json(
            &serde_json::json!({"name": "set-nx-px-get-del", "ttl_ms": 1000}),
            "scheme",
        )
        .unwrap();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        let b = DirectEnv::new(&shared, "b", 2);
        let mut la = spec.build("s").unwrap();
        block_on(la.acquire(&a_dyn, 100)).unwrap();
        // b keeps trying in the background while a releases.
        let got = Rc::new(std::cell::RefCell::new(None));
        let (got2, b2, mut lb) = (got.clone(), b.clone(), spec.build("s").unwrap());
        let _task = b.spawn(Box::pin(async move {
            *got2.borrow_mut() = Some(lb.acquire(&b2, 5000).await);
        }));
        // a's GET sees its token, then a stops 1.5 s before the DEL.
        a.mishap("GET", Mishap::PauseAfter(1500));
        assert!(
            block_on(la.release(&a_dyn)).ok,
            "a believes it released its own lock"
        );
        let b_grant = got.borrow().clone().expect("b acquired meanwhile").unwrap();
        // ...but it deleted b's, which b still believes it holds.
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(0));
        assert_eq!(b_grant.token.len(), 32);
    }
}
