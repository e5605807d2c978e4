//! `set-nx-px-lua` preset `python-redis-lock@4.0.1`: ionelmc/python-redis-lock@v4.0.1's
//! `redis_lock.Lock` (`src/redis_lock/__init__.py`) over a redis-py 8 client. A single-instance
//! `SET NX` lock with a compare-and-delete release like the scheme's, but its waiting is a
//! signal list (`BLPOP`) instead of polling, so it lives in a file of its own:
//!
//! - the Redis key is `lock:<name>`, the signal list `lock-signal:<name>` (`:166-167`): the
//!   scheme's `key` is that Redis key, the signal list is named after it;
//! - one id per `Lock` object, `b64encode(urandom(18))` (`:155-156`), used by every acquire;
//! - `acquire(blocking=True, timeout=None)` (`:205-245`): first `GET` of the key, and
//!   `AlreadyAcquired` when it holds this id (`_held`, `:186-187, :199-203, :214-215`);
//!   `TimeoutTooLarge` for a timeout above the expiry without auto-renewal (`:225-226`); then
//!   `SET key id NX EX expire` (`NX` alone without an expiry, `:232`), and while busy
//!   `BLPOP signal (timeout or expire or 0)` (`:229, :237`): a pop (a release's signal) tries
//!   again at once; after a `BLPOP` that timed out with a `timeout` given, one more `SET`, then
//!   `False` (`:233-235`); `blocking=False` returns `False` after the first `SET`;
//! - `auto_renewal` (`:168, :243-244, :272-310`): a thread extends every `expire × 2/3` s until
//!   the release stops it; an extension that fails ends the thread (its exception is not
//!   caught);
//! - `extend()` (`:247-270`): its script, `EXPIRE key expire` while the id is ours and the key
//!   has a TTL: 1 `NotAcquired`, 2 `NotExpirable`;
//! - `release()` (`:337-354`): stops the renewal, then its script: while the id is ours, the
//!   signal list is re-created with one element (`DEL`, `LPUSH 1`, `PEXPIRE signal_expire`,
//!   1000 ms) and the key deleted; 1 is `NotAcquired`;
//! - commands through redis-py 8 (`set_nx_px_lua::redis_py_call`, `redis_py_script`).
//!
//! The scenario's acquire timeout is `acquire`'s `timeout`, in whole seconds (`int(timeout)`,
//! `:221`); below one second it is `None`.

use std::rc::Rc;

use async_trait::async_trait;

use super::redlock::base64;
use super::set_nx_px_lua::{raised_by_redis_py, redis_py_call, redis_py_script};
use super::{
    CallError, Extension, Grant, Lease, LockEnv, LockScheme, Params, PresetInfo, RAISED, Release,
    TaskGuard, argv,
};
use crate::redis::Reply;

pub(super) const PRESET: PresetInfo = PresetInfo {
    name: "python-redis-lock@4.0.1",
    summary: "python-redis-lock 4.0.1: SET NX EX with one id per Lock, waits by BLPOP on a signal list the release pushes, optional auto-renewal every expire × 2/3",
    lease: Lease::Seconds,
    same_as: Some("set-nx-px-lua:redis-py"),
};

/// `UNLOCK_SCRIPT` (`:20-30`), byte for byte.
const UNLOCK_SCRIPT: &str = "\n    if redis.call(\"get\", KEYS[1]) ~= ARGV[1] then\n        return 1\n    else\n        redis.call(\"del\", KEYS[2])\n        redis.call(\"lpush\", KEYS[2], 1)\n        redis.call(\"pexpire\", KEYS[2], ARGV[2])\n        redis.call(\"del\", KEYS[1])\n        return 0\n    end\n";
/// `EXTEND_SCRIPT` (`:33-42`), byte for byte.
const EXTEND_SCRIPT: &str = "\n    if redis.call(\"get\", KEYS[1]) ~= ARGV[1] then\n        return 1\n    elseif redis.call(\"ttl\", KEYS[1]) < 0 then\n        return 2\n    else\n        redis.call(\"expire\", KEYS[1], ARGV[2])\n        return 0\n    end\n";

pub struct PythonRedisLock {
    key: String,
    signal: String,
    /// `expire`, whole seconds; `None`: the key never expires (the library's default).
    expire_s: Option<u64>,
    blocking: bool,
    auto_renewal: bool,
    signal_expire_ms: u64,
    /// `_id`, drawn when first needed and kept for the object's life.
    id: Option<String>,
    renewal: Option<Box<dyn TaskGuard>>,
}

pub(super) fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    let key = params.key()?;
    let name = key.strip_prefix("lock:").unwrap_or(&key);
    let signal = format!("lock-signal:{name}");
    let expire_s = if params.given("ttl_ms") {
        Some(super::whole_seconds(params, 10_000)?)
    } else {
        None
    };
    let auto_renewal = params.bool("auto_renewal", false)?;
    if auto_renewal && expire_s.is_none() {
        // `:141-142`.
        return Err(format!(
            "{}.auto_renewal: python-redis-lock needs an expiry (ttl_ms) to renew",
            params.field()
        ));
    }
    Ok(Box::new(PythonRedisLock {
        key,
        signal,
        expire_s,
        blocking: params.bool("blocking", true)?,
        auto_renewal,
        signal_expire_ms: params.u64("signal_expire_ms", 1000)?,
        id: None,
        renewal: None,
    }))
}

fn raised(error: &CallError) -> String {
    format!("{RAISED}{}", raised_by_redis_py(error))
}

/// `extend_script(...)`: its reply code, 0 when extended.
async fn extend_script(
    env: &Rc<dyn LockEnv>,
    keys: [&str; 2],
    id: &str,
    expire_s: u64,
) -> Result<Reply, CallError> {
    redis_py_script(env, 0, EXTEND_SCRIPT, &keys, &[id, &expire_s.to_string()]).await
}

impl PythonRedisLock {
    fn id(&mut self, env: &Rc<dyn LockEnv>) -> String {
        self.id
            .get_or_insert_with(|| {
                let bytes: Vec<u8> = (0..3)
                    .flat_map(|_| env.random_u64().to_le_bytes())
                    .take(18)
                    .collect();
                let id = base64(&bytes);
                env.register_token(&id);
                id
            })
            .clone()
    }

    /// `_start_lock_renewer` / `_lock_renewer` (`:272-310`): every `expire × 2/3` s an extension,
    /// until one fails or the release cancels it.
    fn start_renewal(&mut self, env: &Rc<dyn LockEnv>, id: String, expire_s: u64) {
        let interval_ms = expire_s * 2000 / 3;
        let (task_env, key, signal) = (env.clone(), self.key.clone(), self.signal.clone());
        let task = Box::pin(async move {
            loop {
                task_env.sleep_ms(interval_ms).await;
                let reply = extend_script(&task_env, [&key, &signal], &id, expire_s).await;
                if !matches!(reply, Ok(Reply::Integer(0))) {
                    return;
                }
            }
        });
        self.renewal = Some(env.spawn(task));
    }
}

#[async_trait(?Send)]
impl LockScheme for PythonRedisLock {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let id = self.id(env);
        let owner = redis_py_call(env, 0, argv(&["GET", &self.key]))
            .await
            .map_err(|e| raised(&e))?;
        if owner.as_bulk() == Some(id.as_bytes()) {
            return Err(format!(
                "{RAISED}AlreadyAcquired: Already acquired from this Lock instance."
            ));
        }
        let timeout_s = (self.blocking && timeout_ms >= 1000).then_some(timeout_ms / 1000);
        if let (Some(timeout), Some(expire)) = (timeout_s, self.expire_s)
            && !self.auto_renewal
            && timeout > expire
        {
            return Err(format!(
                "{RAISED}TimeoutTooLarge: Timeout ({timeout}) cannot be greater than expire ({expire})"
            ));
        }
        let blpop_timeout = timeout_s.or(self.expire_s).unwrap_or(0).to_string();
        let expire = self.expire_s.map(|s| s.to_string());
        let set = match &expire {
            // redis-py 8.1.0 puts `NX` before the expiry (`redis/commands/core.py:4431-4453`).
            Some(seconds) => argv(&["SET", &self.key, &id, "NX", "EX", seconds]),
            None => argv(&["SET", &self.key, &id, "NX"]),
        };
        let mut timed_out = false;
        loop {
            let reply = redis_py_call(env, 0, set.clone())
                .await
                .map_err(|e| raised(&e))?;
            if matches!(reply, Reply::Status(ref s) if s == "OK") {
                break;
            }
            if timed_out {
                return Err(format!(
                    "acquire returned False: still held after the {blpop_timeout} s wait"
                ));
            }
            if !self.blocking {
                return Err("acquire returned False: held (blocking=False)".into());
            }
            let popped = redis_py_call(env, 0, argv(&["BLPOP", &self.signal, &blpop_timeout]))
                .await
                .map_err(|e| raised(&e))?;
            timed_out = matches!(popped, Reply::Nil | Reply::NilArray) && timeout_s.is_some();
        }
        if self.auto_renewal
            && let Some(expire_s) = self.expire_s
        {
            self.start_renewal(env, id.clone(), expire_s);
        }
        Ok(Grant {
            token: id,
            fence: None,
        })
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        if let Some(renewal) = self.renewal.take() {
            renewal.cancel();
        }
        let id = self.id(env);
        let signal_expire = self.signal_expire_ms.to_string();
        let keys = [self.key.as_str(), self.signal.as_str()];
        match redis_py_script(env, 0, UNLOCK_SCRIPT, &keys, &[&id, &signal_expire]).await {
            Ok(Reply::Integer(0)) => Release {
                ok: true,
                detail: "released, signal pushed".into(),
            },
            Ok(Reply::Integer(1)) => Release {
                ok: false,
                detail: "NotAcquired: the lock is not acquired or it already expired".into(),
            },
            Ok(other) => Release {
                ok: false,
                detail: format!("{RAISED}RuntimeError: unsupported reply {other:?}"),
            },
            Err(e) => Release {
                ok: false,
                detail: raised(&e),
            },
        }
    }

    fn can_extend(&self) -> bool {
        self.expire_s.is_some()
    }

    async fn extend(&mut self, env: &Rc<dyn LockEnv>) -> Extension {
        let Some(expire_s) = self.expire_s else {
            return Extension {
                ok: false,
                detail: format!("{RAISED}TypeError: extend needs an expire"),
            };
        };
        let id = self.id(env);
        let keys = [self.key.as_str(), self.signal.as_str()];
        let (ok, detail) = match extend_script(env, keys, &id, expire_s).await {
            Ok(Reply::Integer(0)) => (true, format!("expires in {expire_s} s")),
            Ok(Reply::Integer(1)) => (false, "NotAcquired: not acquired or already expired".into()),
            Ok(Reply::Integer(2)) => (false, format!("{RAISED}NotExpirable: the key has no TTL")),
            Ok(other) => (
                false,
                format!("{RAISED}RuntimeError: unsupported reply {other:?}"),
            ),
            Err(e) => (false, raised(&e)),
        };
        Extension { ok, detail }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::testing::{DirectEnv, Shared, block_on, pass, scheme_with};

    fn lock(extra: serde_json::Value) -> Box<dyn LockScheme> {
        scheme_with(
            serde_json::json!({"name": "set-nx-px-lua",
                               "preset": "python-redis-lock@4.0.1", "key": "lock:x"}),
            extra,
        )
    }

    #[test]
    fn one_id_per_object_and_the_release_pushes_the_signal() {
        let m = Shared::new();
        let a = DirectEnv::new(&m, "a", 1);
        let mut la = lock(serde_json::json!({"ttl_ms": 10000}));
        let first = block_on(la.acquire(&a, 0)).unwrap();
        assert_eq!(
            first.token.len(),
            24,
            "b64encode(urandom(18)): {}",
            first.token
        );
        assert!(m.command(&["TTL", "lock:x"]) == Reply::Integer(10));
        let again = block_on(la.acquire(&a, 0)).unwrap_err();
        assert!(again.contains("AlreadyAcquired"), "{again}");
        assert!(block_on(la.release(&a)).ok);
        assert_eq!(m.command(&["LLEN", "lock-signal:x"]), Reply::Integer(1));
        assert_eq!(block_on(la.acquire(&a, 0)).unwrap().token, first.token);
        assert!(block_on(la.release(&a)).ok);
        assert!(!block_on(la.release(&a)).ok, "NotAcquired");
    }

    #[test]
    fn a_waiter_gives_up_after_one_more_try_and_timeouts_above_the_expiry_are_refused() {
        let m = Shared::new();
        m.command(&["SET", "lock:x", "other", "EX", "60"]);
        let a = DirectEnv::new(&m, "a", 1);
        let mut la = lock(serde_json::json!({"ttl_ms": 10000}));
        let err = block_on(la.acquire(&a, 2000)).unwrap_err();
        assert!(err.contains("returned False"), "{err}");
        let err = block_on(la.acquire(&a, 20_000)).unwrap_err();
        assert!(err.contains("TimeoutTooLarge"), "{err}");
        let mut lb = lock(serde_json::json!({"ttl_ms": 10000, "blocking": false}));
        assert!(block_on(lb.acquire(&a, 2000)).is_err());
    }

    #[test]
    fn auto_renewal_extends_until_the_release() {
        let m = Shared::new();
        let a = DirectEnv::new(&m, "a", 1);
        let mut la = lock(serde_json::json!({"ttl_ms": 3000, "auto_renewal": true}));
        block_on(la.acquire(&a, 0)).unwrap();
        pass(&m, 2500);
        assert_eq!(
            m.command(&["TTL", "lock:x"]),
            Reply::Integer(3),
            "renewed at 2 s"
        );
        assert!(block_on(la.release(&a)).ok);
        assert_eq!(m.running_tasks(), 0, "the renewal stopped");
    }
}
