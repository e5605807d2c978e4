//! `incr-semaphore`: a counting semaphore on `INCRBY key -1` — no TTL, and a timeout leaks a permit.
//!
//! Source: seed 002 (《通过 redis + lua 实现分布式事务锁》), second scheme, "INCRBY key increment":
//! "我们可以预设一个值, 并通过 incrby 传入 -1 来实现加锁操作, 返回大于等于 0 则表示加锁成功, 否则表示
//! 失败, 失败后需再次调用 incrby 传入 1 来恢复此次加锁失败造成的影响". Release gives the permit
//! back with `INCRBY key 1`.
//!
//! The preset value ("预设一个值"): the article leaves it to the operator. Here each client
//! presets it idempotently before its first attempt with `SET key permits NX`, so a scenario
//! needs no setup step and a later client never resets a counter in use. With `permits` > 1 it
//! is a semaphore, not a lock: that many clients hold it at once by design.
//!
//! Faithful flaws, both named by the article itself: a holder that dies never gives its permit
//! back (no TTL), and an `INCRBY -1` whose reply is lost (timeout) may have taken a permit the
//! client does not know it has — "安全起见, 他不能假设自己已经获取到锁, 因此重新获取锁" — so it
//! retries without giving it back, and the permit is gone for good.
//!
//! Parameters: `key` (`lock`), `permits` (1), `retry_delay_ms` (100; the article gives none).
//! What breaks it: a holder crash (liveness `stuck`).

use std::rc::Rc;

use async_trait::async_trait;

use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, command, not_acquired,
    retry_until,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "incr-semaphore",
    summary: "INCRBY k -1 >= 0 takes a permit (undo with +1 on failure), INCRBY k 1 gives it back; no TTL",
    source: "seed 002 (redis + lua 分布式事务锁), scheme 'INCRBY key increment'",
    default_ttl_ms: 0,
    family: Family::TwoStep,
    lease: Lease::None,
    in_all: true,
    presets: &[],
    build,
};

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(IncrSemaphore {
        key: params.key()?,
        permits: params.positive("permits", 1)?,
        retry_delay_ms: params.positive("retry_delay_ms", 100)?,
        preset: false,
        held: false,
    }))
}

pub struct IncrSemaphore {
    key: String,
    permits: u64,
    retry_delay_ms: u64,
    /// Whether this client already sent its `SET key permits NX`.
    preset: bool,
    held: bool,
}

#[async_trait(?Send)]
impl LockScheme for IncrSemaphore {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let key = self.key.clone();
        let permits = self.permits.to_string();
        let mut preset = self.preset;
        let grant = retry_until(env, timeout_ms, self.retry_delay_ms, async || {
            if !preset {
                match command(env, 0, &["SET", &key, &permits, "NX"]).await {
                    Ok(Reply::Status(_)) | Ok(Reply::Nil) => preset = true,
                    _ => return None,
                }
            }
            match command(env, 0, &["INCRBY", &key, "-1"]).await {
                Ok(Reply::Integer(left)) if left >= 0 => Some(Grant {
                    token: format!("permit {left}"),
                    fence: None,
                }),
                Ok(Reply::Integer(_)) => {
                    // "失败后需再次调用 incrby 传入 1 来恢复"
                    let _ = command(env, 0, &["INCRBY", &key, "1"]).await;
                    None
                }
                // A lost reply: the permit may be taken, the client cannot know; it tries again.
                _ => None,
            }
        })
        .await;
        self.preset = preset;
        let grant = grant?;
        self.held = true;
        Ok(grant)
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        if !std::mem::take(&mut self.held) {
            return not_acquired();
        }
        match command(env, 0, &["INCRBY", &self.key, "1"]).await {
            Ok(Reply::Integer(n)) => Release {
                ok: true,
                detail: format!("{n} permits free"),
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
    use crate::locks::testing::{DirectEnv, Mishap, Shared, block_on};
    use crate::locks::{LockEnv, LockScheme, SchemeSpec};
    use crate::redis::Reply;
    use std::rc::Rc;

    fn scheme(permits: u64) -> Box<dyn LockScheme> {
        SchemeSpec::from_json(
            &serde_json::json!({"name": "incr-semaphore", "permits": permits}),
            "scheme",
        )
        .unwrap()
        .build("s")
        .unwrap()
    }

    #[test]
    fn one_permit_excludes_and_the_failed_attempt_is_undone() {
        let shared = Shared::new();
        let (a, b) = (
            DirectEnv::new(&shared, "a", 1),
            DirectEnv::new(&shared, "b", 2),
        );
        let (mut la, mut lb) = (scheme(1), scheme(1));
        block_on(la.acquire(&a, 100)).unwrap();
        assert!(block_on(lb.acquire(&b, 250)).is_err());
        assert_eq!(shared.command(&["GET", "lock"]), Reply::bulk("0"));
        assert!(block_on(la.release(&a)).ok);
        assert!(block_on(lb.acquire(&b, 100)).is_ok());
    }

    #[test]
    fn two_permits_admit_two_holders() {
        let shared = Shared::new();
        let (a, b) = (
            DirectEnv::new(&shared, "a", 1),
            DirectEnv::new(&shared, "b", 2),
        );
        let (mut la, mut lb) = (scheme(2), scheme(2));
        block_on(la.acquire(&a, 100)).unwrap();
        block_on(lb.acquire(&b, 100)).unwrap();
    }

    #[test]
    fn a_lost_reply_leaks_the_permit_for_good() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        let b = DirectEnv::new(&shared, "b", 2);
        a.mishap("INCRBY", Mishap::LoseReply);
        let mut la = scheme(1);
        // a's first INCRBY took the permit but a never heard; its retries find none left.
        assert!(block_on(la.acquire(&a_dyn, 1000)).is_err());
        assert!(
            block_on(scheme(1).acquire(&b, 1000)).is_err(),
            "nobody can ever acquire"
        );
    }
}
