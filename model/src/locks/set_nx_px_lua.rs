//! `set-nx-px-lua`: `SET key token NX PX ttl` to acquire, a Lua compare-and-delete to release.
//!
//! Sources: redis.io "Distributed Locks with Redis", single-instance pattern; seed 000 scheme 4,
//! seed 001 (正确示例), seed 003 §1.1, seed 004. Safe on one Redis node as long as the holder
//! finishes within its lease: a pause or delay longer than `ttl_ms` breaks it (Kleppmann 2016).
//!
//! Parameters: `key` (`lock`), `ttl_ms` (30 000), `retry_delay_ms` (50 — locksim's choice: redis.io
//! says only "the client should retry after a while", and of the seeds only seed 003 polls, at
//! 100 ms, in the class `reentrant` follows), `preset`:
//! - `redis.io` (default): a 20-byte random hex token, `SET NX PX`, the redis.io
//!   compare-and-delete script with `EVAL`.
//! - `redis-py`: redis-py's `Lock` (`redis/lock.py`) as `r.lock(name, blocking_timeout=...)`
//!   makes it: token `uuid.uuid1().hex` (from the client's wall clock), `sleep=0.1` between tries
//!   (so `retry_delay_ms` defaults to 100), `timeout=None` — **no TTL at all** unless `ttl_ms`
//!   is given (then `SET NX PX`), a monotonic `blocking_timeout`, and release by its
//!   `LUA_RELEASE_SCRIPT` (`local token = redis.call('get', KEYS[1]) if not token or token ~=
//!   ARGV[1] then return 0 end redis.call('del', KEYS[1]) return 1`) through a script object
//!   (`EVALSHA`, `SCRIPT LOAD` on `NOSCRIPT`); 0 raises `LockNotOwnedError`. Without a TTL a
//!   crashed holder keeps the lock for ever.

use std::rc::Rc;

use async_trait::async_trait;

use super::{
    COMPARE_AND_DELETE, Family, Grant, Lease, LockEnv, LockScheme, Params, PresetInfo, Release,
    SchemeInfo, argv, command, eval, evalsha, random_token, retry_until, undashed, uuid1,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "set-nx-px-lua",
    summary: "SET NX PX with a random token; release with a Lua compare-and-delete",
    source: "redis.io single-instance pattern; seeds 000 (scheme 4), 001, 003, 004",
    default_ttl_ms: 30_000,
    family: Family::SetNxPx,
    lease: Lease::Ms,
    in_all: true,
    presets: PRESETS,
    build,
};

/// Named presets besides the default (`redis.io`).
const PRESETS: &[PresetInfo] = &[PresetInfo {
    name: "redis-py",
    summary: "redis-py Lock: uuid1 token, 100 ms polling, no TTL unless ttl_ms (timeout=None), release script by EVALSHA",
    lease: Lease::None,
    same_as: None,
}];

/// redis-py's `Lock.LUA_RELEASE_SCRIPT`.
pub const REDIS_PY_RELEASE: &str = "
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        redis.call('del', KEYS[1])
        return 1
    ";

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    let redis_py = params.choice("preset", &["redis.io", "redis-py"], "redis.io")? == "redis-py";
    let key = params.key()?;
    Ok(Box::new(if redis_py {
        let ttl_ms = if params.given("ttl_ms") {
            Some(params.positive("ttl_ms", INFO.default_ttl_ms)?)
        } else {
            None
        };
        SetNxPxLua {
            key,
            ttl_ms,
            retry_delay_ms: params.positive("retry_delay_ms", 100)?,
            token: None,
            redis_py,
        }
    } else {
        SetNxPxLua {
            key,
            ttl_ms: Some(params.positive("ttl_ms", INFO.default_ttl_ms)?),
            retry_delay_ms: params.positive("retry_delay_ms", 50)?,
            token: None,
            redis_py,
        }
    }))
}

pub struct SetNxPxLua {
    key: String,
    /// `None`: redis-py's `timeout=None`, a lock without TTL.
    ttl_ms: Option<u64>,
    /// The polling period (see the module doc).
    retry_delay_ms: u64,
    token: Option<String>,
    /// The `redis-py` preset.
    redis_py: bool,
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
        let token = if self.redis_py {
            undashed(&uuid1(env.as_ref()))
        } else {
            random_token(env.as_ref())
        };
        env.register_token(&token);
        let (key, ttl_ms) = (self.key.clone(), self.ttl_ms);
        let grant = retry_until(env, timeout_ms, self.retry_delay_ms, async || {
            let set = match ttl_ms {
                Some(ttl_ms) => set_nx_px(env, 0, &key, &token, ttl_ms).await,
                None => matches!(
                    command(env, 0, &["SET", &key, &token, "NX"]).await,
                    Ok(Reply::Status(ref s)) if s == "OK"
                ),
            };
            set.then(|| Grant {
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
            return Release {
                ok: false,
                detail: "not acquired".into(),
            };
        };
        if !self.redis_py {
            return compare_and_delete(env, 0, &self.key, &token).await;
        }
        match evalsha(env, 0, REDIS_PY_RELEASE, &[&self.key], &[&token]).await {
            Ok(Reply::Integer(1)) => Release {
                ok: true,
                detail: "deleted".into(),
            },
            Ok(Reply::Integer(_)) => Release {
                ok: false,
                detail: "LockNotOwnedError: Cannot release a lock that's no longer owned".into(),
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
    fn the_redis_py_preset_polls_every_100_ms_without_a_ttl() {
        let shared = Shared::new();
        let spec = SchemeSpec::from_json(
            &serde_json::json!({"name": "set-nx-px-lua", "preset": "redis-py"}),
            "scheme",
        )
        .unwrap();
        assert_eq!(spec.label(), "set-nx-px-lua:redis-py");
        let a = std::rc::Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: std::rc::Rc<dyn LockEnv> = a.clone();
        let b = std::rc::Rc::new(DirectEnv::concrete(&shared, "b", 2));
        let b_dyn: std::rc::Rc<dyn LockEnv> = b.clone();
        let (mut la, mut lb) = (spec.build("s").unwrap(), spec.build("s").unwrap());
        let grant = block_on(la.acquire(&a_dyn, 1000)).unwrap();
        assert_eq!(grant.token.len(), 32, "uuid1().hex");
        assert_eq!(&grant.token[12..13], "1", "a version-1 UUID");
        assert_eq!(
            shared.command(&["PTTL", "lock"]),
            Reply::Integer(-1),
            "no TTL"
        );
        assert!(block_on(lb.acquire(&b_dyn, 1000)).is_err());
        // Tries at 0, 100, ..., 1000 ms: the next would start past the 1 s blocking_timeout.
        assert_eq!(b.sent.borrow().len(), 11);
        assert!(block_on(la.release(&a_dyn)).ok);
        assert!(a.sent.borrow().iter().any(|c| c.starts_with("EVALSHA ")));
        let again = block_on(la.release(&a_dyn));
        assert!(!again.ok);
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
