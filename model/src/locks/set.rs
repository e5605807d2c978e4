//! `set`: `SET key value` and treat the reply as "acquired" — no exclusion at all.
//!
//! Source: seed 002 (《通过 redis + lua 实现分布式事务锁》), first scheme, "SET key value": the
//! article claims that SET "returns the number of changed entries", so that when several
//! processes set the same key to the same value only the first gets 1 and the others 0. It does
//! not: SET always answers `OK`, so every client believes it holds the lock at once. Release is
//! `DEL key` (the article's "通过 delete 操作来实现锁的释放").
//!
//! Faithful details: every process writes the same value (parameter `value`, default `"1"`, "对一个
//! key 设置相同的值"), so the value identifies nobody and is not registered as an owner token;
//! there is no TTL. A failed SET (timeout) is retried every `retry_delay_ms` (the article gives no
//! figure; default 100 ms) until the acquire timeout.
//!
//! Parameters: `key` (default `lock`), `value` (`"1"`), `retry_delay_ms` (100).
//! What breaks it: anything — two clients and no faults violate mutual exclusion.

use std::rc::Rc;

use async_trait::async_trait;

use super::{
    CallError, Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, command,
    not_acquired, retry_until,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "set",
    summary: "SET k v and take the reply as acquired (seed 002 believes SET returns a change count): no exclusion at all",
    source: "seed 002 (redis + lua 分布式事务锁), scheme 'SET key value'",
    default_ttl_ms: 0,
    family: Family::NoExclusion,
    lease: Lease::None,
    in_all: true,
    presets: &[],
    build,
};

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(Set {
        key: params.key()?,
        value: params.string("value", "1")?,
        retry_delay_ms: params.positive("retry_delay_ms", 100)?,
        held: false,
    }))
}

pub struct Set {
    key: String,
    value: String,
    retry_delay_ms: u64,
    held: bool,
}

#[async_trait(?Send)]
impl LockScheme for Set {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let (key, value) = (self.key.clone(), self.value.clone());
        let grant = retry_until(env, timeout_ms, self.retry_delay_ms, async || {
            // Any reply at all is taken as "the set went through, so the lock is mine".
            match command(env, 0, &["SET", &key, &value]).await {
                Ok(Reply::Error(_)) | Err(_) => None,
                Ok(_) => Some(Grant {
                    token: value.clone(),
                    fence: None,
                }),
            }
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

/// `DEL key`, whoever holds it: the release of every scheme without an owner check.
pub async fn del_release(env: &Rc<dyn LockEnv>, key: &str) -> Release {
    let reply = command(env, 0, &["DEL", key]).await;
    told_released(reply, "nothing to delete (the key was already gone)")
}

/// A release whose caller is told it released whatever the count of keys deleted: 1 is
/// "deleted", any other count `nothing` (the caller cannot tell the two apart); only an
/// error or another reply fails it.
pub fn told_released(reply: Result<Reply, CallError>, nothing: &str) -> Release {
    match reply {
        Ok(Reply::Integer(1)) => Release {
            ok: true,
            detail: "deleted".into(),
        },
        Ok(Reply::Integer(_)) => Release {
            ok: true,
            detail: nothing.into(),
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

#[cfg(test)]
mod tests {

    use crate::locks::testing::{block_on, two_clients};

    #[test]
    fn everyone_acquires_at_once() {
        let (_shared, (a, mut la), (b, mut lb)) = two_clients(serde_json::json!("set"));
        assert!(block_on(la.acquire(&a, 100)).is_ok());
        assert!(
            block_on(lb.acquire(&b, 100)).is_ok(),
            "SET answers OK to everybody: both hold the lock"
        );
        assert!(block_on(la.release(&a)).ok);
        let second = block_on(lb.release(&b));
        assert!(
            second.ok && second.detail.contains("already gone"),
            "{second:?}"
        );
    }
}
