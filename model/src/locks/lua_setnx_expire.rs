//! `lua-setnx-expire`: seed 002's `TechlogLock` — SETNX and EXPIRE in one Lua script whose every
//! argument is passed as a KEY; a plain `DEL` to release.
//!
//! Source: seed 002 (《通过 redis + lua 实现分布式事务锁》), class `TechlogLock` (Python, redis-py).
//! `setnxttl` registers the script
//! `local ret = redis.call("setnx", KEYS[1], KEYS[2]) if(ret == 0) then return 0 end return
//! redis.call("expire", KEYS[1], KEYS[3]) + 1` and calls it with `keys=[key, value, ttl]`
//! (0: taken, 1: set but EXPIRE failed, 2: set with TTL). redis-py's script object sends
//! `EVALSHA`, loading the script on `NOSCRIPT`. `acquire` loops:
//! - the script raised (timeout, error reply) → `GET key`; equal to its own `uuid1` → acquired
//!   (a `None` value makes `str(None, encoding='utf-8')` raise `TypeError`, which escapes
//!   `acquire`); otherwise it falls through with the *previous* `res`;
//! - `res == 2` → acquired; `res == 1` → "acquire success but expire error, so delete and fail":
//!   `DEL key`, and try again;
//! - `if not block: break` — the loop tests the `block` *argument*, while the SIGALRM timeout
//!   handler only clears `self._block`: a blocking acquire never times out. The workload's acquire
//!   timeout is therefore ignored, as in the source.
//! - no sleep between attempts: it busy-polls Redis.
//!
//! `release` is `self._redis.delete(self._lockkey)`: no owner check, so a holder whose TTL ran out
//! deletes the next holder's lock.
//!
//! Parameters: `key` (`lock`; the class hard-codes `techloglock`), `ttl_ms` (`expiretime`, whole
//! seconds, default 5000 as the class).
//! What breaks it: a hold longer than the TTL — the next holder gets the lock and the first one's
//! DEL removes it (foreign release, mutual exclusion violated).

use std::rc::Rc;

use async_trait::async_trait;

use super::set::del_release;
use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, command, evalsha,
    not_acquired, uuid1, whole_seconds,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "lua-setnx-expire",
    summary: "TechlogLock: EVALSHA setnx+expire script (KEYS=[key, value, ttl]), GET own id after an error / plain DEL",
    source: "seed 002, class TechlogLock (redis-py)",
    default_ttl_ms: 5000,
    family: Family::TwoStep,
    lease: Lease::Seconds,
    in_all: true,
    presets: &[],
    build,
};

/// `setnxttl`'s script, as the article's Python source lays it out.
pub const SETNX_TTL: &str = r#"
            local ret = redis.call("setnx", KEYS[1], KEYS[2])
            if(ret == 0) then
                return 0
            end
            return redis.call("expire", KEYS[1], KEYS[3]) + 1
            "#;

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(TechlogLock {
        key: params.key()?,
        expiretime: whole_seconds(params, INFO.default_ttl_ms)?,
        held: false,
    }))
}

pub struct TechlogLock {
    key: String,
    expiretime: u64,
    held: bool,
}

#[async_trait(?Send)]
impl LockScheme for TechlogLock {
    /// `acquire(block=True, timeout=...)`: the timeout never takes effect (see the module doc).
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, _timeout_ms: u64) -> Result<Grant, String> {
        let randid = uuid1(env.as_ref());
        env.register_token(&randid);
        let ttl = self.expiretime.to_string();
        let mut res = 0;
        loop {
            let raised = match evalsha(env, 0, SETNX_TTL, &[&self.key, &randid, &ttl], &[]).await {
                Ok(Reply::Integer(n)) => {
                    res = n;
                    None
                }
                Ok(Reply::Error(e)) => Some(String::from_utf8_lossy(&e).into_owned()),
                Ok(_) => {
                    // Not an int: no branch below matches it.
                    res = -1;
                    None
                }
                Err(e) => Some(e.to_string()),
            };
            if raised.is_some() {
                let redisrandid = match command(env, 0, &["GET", &self.key]).await {
                    Ok(Reply::Bulk(v)) => v,
                    Ok(Reply::Nil) => {
                        return Err(
                            "TypeError: decoding to str: need a bytes-like object, NoneType found"
                                .into(),
                        );
                    }
                    Ok(other) => return Err(format!("unexpected reply {other:?}")),
                    Err(e) => return Err(e.to_string()),
                };
                if redisrandid == randid.as_bytes() {
                    self.held = true;
                    return Ok(Grant {
                        token: randid,
                        fence: None,
                    });
                }
            }
            if res == 2 {
                self.held = true;
                return Ok(Grant {
                    token: randid,
                    fence: None,
                });
            }
            if res == 1 {
                let _ = command(env, 0, &["DEL", &self.key]).await;
            }
            // `if not block: break` — block is True: loop again at once.
        }
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

    use crate::locks::testing::{DirectEnv, Mishap, Shared, block_on};
    use crate::locks::{LockEnv, SchemeSpec};
    use crate::redis::Reply;

    fn spec() -> SchemeSpec {
        SchemeSpec::from_json(
            &serde_json::json!({"name": "lua-setnx-expire", "ttl_ms": 1000}),
            "scheme",
        )
        .unwrap()
    }

    #[test]
    fn loads_the_script_then_locks_with_a_ttl_and_deletes_anyones_lock() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        let b = DirectEnv::new(&shared, "b", 2);
        let mut la = spec().build("s").unwrap();
        let grant = block_on(la.acquire(&a_dyn, 100)).unwrap();
        assert_eq!(grant.token.len(), 36, "str(uuid.uuid1())");
        let sent = a.sent.borrow().clone();
        assert!(sent[0].starts_with("EVALSHA "), "{sent:?}");
        assert!(sent[1].starts_with("SCRIPT LOAD"), "{sent:?}");
        assert_eq!(shared.command(&["TTL", "lock"]), Reply::Integer(1));
        // a holds too long; b takes the expired lock; a's release deletes b's lock.
        shared.advance(1001);
        let mut lb = spec().build("s").unwrap();
        let b_grant = block_on(lb.acquire(&b, 100)).unwrap();
        assert_eq!(
            shared.command(&["GET", "lock"]),
            Reply::bulk(&b_grant.token)
        );
        assert!(block_on(la.release(&a_dyn)).ok);
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(0));
    }

    #[test]
    fn a_lost_script_reply_is_settled_by_get() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        shared.command(&["SCRIPT", "LOAD", super::SETNX_TTL]);
        a.mishap("EVALSHA", Mishap::LoseReply);
        block_on(spec().build("s").unwrap().acquire(&a_dyn, 100)).unwrap();
        assert!(a.sent.borrow()[1].starts_with("GET lock"));
    }
}
