//! `setnx-expire`: `SETNX key token`, then `EXPIRE key seconds` as a second command; `DEL` to
//! release.
//!
//! Sources: seed 001 (《Redis实现分布式锁》) 错误示例1 — `if (jedis.setnx(lockKey, requestId) == 1)
//! { /* 若在这里程序突然崩溃, 则无法设置过期时间, 将发生死锁 */ jedis.expire(lockKey, expireTime); }`;
//! seed 002 (《通过 redis + lua 实现分布式事务锁》), "SETNX key value / EXPIRE key seconds", which adds
//! that a SETNX that times out is followed by a GET: "比较返回的值与自身持有的标识符是否相同";
//! seed 004: "// STEP 1 SETNX key value ... // STEP 2 EXPIRE key expireTime". All three name the
//! flaw: the two commands are not atomic, so a crash between them leaves a key without TTL.
//!
//! The client acquires once SETNX answered 1 (or, after a SETNX that timed out, once a GET shows
//! its own token), sends EXPIRE, and holds whatever EXPIRE answers (seed 001 ignores it).
//!
//! Parameters: `key` (`lock`), `ttl_ms` (whole seconds, default 10 000; the seeds give no figure),
//! `retry_delay_ms` (100).
//! What breaks it: a crash between SETNX and EXPIRE — the key never expires (liveness `stuck`).

use std::rc::Rc;

use async_trait::async_trait;

use super::set::del_release;
use super::setnx_del::setnx;
use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, command, not_acquired,
    retry_until, uuid4, whole_seconds,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "setnx-expire",
    summary: "SETNX k token then EXPIRE k ttl as a second command / DEL: a crash in between leaves the key for ever",
    source: "seed 001 错误示例1; seed 002 (SETNX + EXPIRE, GET after a timeout); seed 004 (STEP 1/STEP 2)",
    default_ttl_ms: 10_000,
    family: Family::TwoStep,
    lease: Lease::Seconds,
    in_all: true,
    presets: &[],
    build,
};

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(SetnxExpire {
        key: params.key()?,
        ttl_s: whole_seconds(params, INFO.default_ttl_ms)?,
        retry_delay_ms: params.positive("retry_delay_ms", 100)?,
        held: false,
    }))
}

pub struct SetnxExpire {
    key: String,
    ttl_s: u64,
    retry_delay_ms: u64,
    held: bool,
}

#[async_trait(?Send)]
impl LockScheme for SetnxExpire {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        // seed 001's requestId / seed 002's "自己唯一的标识符".
        let token = uuid4(env.as_ref());
        env.register_token(&token);
        let (key, ttl) = (self.key.clone(), self.ttl_s.to_string());
        let grant = retry_until(env, timeout_ms, self.retry_delay_ms, async || {
            let mine = match setnx(env, &key, &token).await {
                Ok(won) => won,
                // seed 002: a SETNX without a reply is settled with a GET.
                Err(_) => matches!(
                    command(env, 0, &["GET", &key]).await,
                    Ok(Reply::Bulk(v)) if v == token.as_bytes()
                ),
            };
            if !mine {
                return None;
            }
            // STEP 2 — a crash before this line leaves the key without a TTL.
            let _ = command(env, 0, &["EXPIRE", &key, &ttl]).await;
            Some(Grant {
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
    use std::rc::Rc;

    use crate::locks::testing::{DirectEnv, Mishap, Shared, block_on, pass, run_until_stalled};
    use crate::locks::{LockEnv, SchemeSpec};
    use crate::redis::Reply;

    fn spec() -> SchemeSpec {
        SchemeSpec::from_json(
            &serde_json::json!({"name": "setnx-expire", "ttl_ms": 2000}),
            "scheme",
        )
        .unwrap()
    }

    #[test]
    fn two_commands_and_the_key_expires() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        block_on(spec().build("s").unwrap().acquire(&a_dyn, 100)).unwrap();
        let sent = a.sent.borrow();
        assert!(sent[0].starts_with("SETNX lock "), "{sent:?}");
        assert_eq!(sent[1], "EXPIRE lock 2");
        assert_eq!(shared.command(&["TTL", "lock"]), Reply::Integer(2));
    }

    #[test]
    fn a_crash_between_setnx_and_expire_leaves_the_lock_for_ever() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        a.mishap("SETNX", Mishap::Hang);
        assert!(run_until_stalled(spec().build("s").unwrap().acquire(&a_dyn, 100)).is_none());
        pass(&shared, 3_600_000);
        assert_eq!(shared.command(&["PTTL", "lock"]), Reply::Integer(-1));
        let b = DirectEnv::new(&shared, "b", 2);
        assert!(block_on(spec().build("s").unwrap().acquire(&b, 2000)).is_err());
    }

    #[test]
    fn a_lost_setnx_reply_is_settled_by_get() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        a.mishap("SETNX", Mishap::LoseReply);
        block_on(spec().build("s").unwrap().acquire(&a_dyn, 100)).unwrap();
        assert!(a.sent.borrow()[1].starts_with("GET lock"));
    }
}
