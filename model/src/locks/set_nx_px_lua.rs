//! `set-nx-px-lua`: `SET key token NX PX ttl` to acquire, a Lua compare-and-delete to release.
//!
//! Sources: redis.io "Distributed Locks with Redis", single-instance pattern; seed 000 scheme 4,
//! seed 001 (正确示例), seed 003 §1.1, seed 004. Safe on one Redis node as long as the holder
//! finishes within its lease: a pause or delay longer than `ttl_ms` breaks it (Kleppmann 2016).

use std::rc::Rc;

use async_trait::async_trait;

use super::{
    COMPARE_AND_DELETE, Grant, LockEnv, LockScheme, Params, Release, SchemeInfo, argv, eval,
    random_token, retry_until,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "set-nx-px-lua",
    summary: "SET NX PX with a random token; release with a Lua compare-and-delete",
    source: "redis.io single-instance pattern; seeds 000 (scheme 4), 001, 003, 004",
    default_ttl_ms: 30_000,
    build,
};

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(SetNxPxLua {
        key: params.key()?,
        ttl_ms: params.positive("ttl_ms", INFO.default_ttl_ms)?,
        retry_delay_ms: params.positive("retry_delay_ms", 50)?,
        token: None,
    }))
}

pub struct SetNxPxLua {
    key: String,
    ttl_ms: u64,
    /// redis.io: "the client should retry after a while"; the seeds poll at 50–100 ms.
    retry_delay_ms: u64,
    token: Option<String>,
}

/// One `SET key token NX PX ttl`: true when this client set the key.
pub async fn set_nx_px(
    env: &Rc<dyn LockEnv>,
    server: usize,
    key: &str,
    token: &str,
    ttl_ms: u64,
) -> bool {
    let reply = env
        .call(
            server,
            argv(&["SET", key, token, "NX", "PX", &ttl_ms.to_string()]),
        )
        .await;
    matches!(reply, Ok(Reply::Status(ref s)) if s == "OK")
}

/// The compare-and-delete release: true when the key held `token` and was deleted.
pub async fn compare_and_delete(
    env: &Rc<dyn LockEnv>,
    server: usize,
    key: &str,
    token: &str,
) -> Release {
    match eval(env, server, COMPARE_AND_DELETE, &[key], &[token]).await {
        Ok(Reply::Integer(1)) => Release {
            ok: true,
            detail: "deleted".into(),
        },
        Ok(Reply::Integer(_)) => Release {
            ok: false,
            detail: "not the owner any more".into(),
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

#[async_trait(?Send)]
impl LockScheme for SetNxPxLua {
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
    use super::*;
    use crate::locks::SchemeSpec;
    use crate::locks::testing::{DirectEnv, Shared, block_on};

    fn scheme(ttl_ms: u64) -> Box<dyn LockScheme> {
        let spec = SchemeSpec::from_json(
            &serde_json::json!({"name": "set-nx-px-lua", "ttl_ms": ttl_ms}),
            "scheme",
        );
        spec.unwrap().build("scheme").unwrap()
    }

    #[test]
    fn excludes_until_release_then_hands_over() {
        let shared = Shared::new();
        let (a, b) = (
            DirectEnv::new(&shared, "a", 1),
            DirectEnv::new(&shared, "b", 2),
        );
        let (mut la, mut lb) = (scheme(10_000), scheme(10_000));
        let grant = block_on(la.acquire(&a, 1000)).unwrap();
        assert_eq!(shared.command(&["GET", "lock"]), Reply::bulk(&grant.token));
        assert!(
            block_on(lb.acquire(&b, 500)).is_err(),
            "b must wait while a holds the lock"
        );
        assert!(block_on(la.release(&a)).ok);
        assert!(block_on(lb.acquire(&b, 500)).is_ok());
    }

    #[test]
    fn the_lease_expires_and_the_late_release_deletes_nothing() {
        let shared = Shared::new();
        let (a, b) = (
            DirectEnv::new(&shared, "a", 1),
            DirectEnv::new(&shared, "b", 2),
        );
        let (mut la, mut lb) = (scheme(1000), scheme(1000));
        block_on(la.acquire(&a, 100)).unwrap();
        shared.advance(1001);
        let grant_b = block_on(lb.acquire(&b, 100)).unwrap();
        let late = block_on(la.release(&a));
        assert!(!late.ok, "a's lease ran out: {late:?}");
        assert_eq!(
            shared.command(&["GET", "lock"]),
            Reply::bulk(&grant_b.token)
        );
    }
}
