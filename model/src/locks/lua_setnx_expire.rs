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
//! seconds, default 5000 as the class), `preset`:
//! - `seed-002` (default): `TechlogLock` as above.
//! - `sherlock@0.4.0`: py-sherlock's `RedisLock` (py-sherlock/sherlock@v0.4.0
//!   `sherlock/lock.py:367-520`), the same SETNX-then-EXPIRE in one script but with
//!   `ARGV = [owner, expire]` (`_acquire_script`, `:414-420`), a new owner `str(uuid.uuid4())`
//!   per try (`:482-491`), key `<namespace>_<name>` with a namespace (`:474-480`; the `key`
//!   parameter), `expire` 60 s, `timeout` 10 s and `retry_interval` 0.1 s
//!   (`sherlock/__init__.py:476-486`; `ttl_ms`, the workload's acquire timeout,
//!   `retry_delay_ms`); `acquire` counts the timeout down by `retry_interval` per failed try
//!   in Python floats and sleeps while some is left (`lock.py:177-190`, see
//!   `sherlock_countdown`); scripts by redis-py's `Script` (`register_script`, `:470-472`:
//!   EVALSHA, SCRIPT LOAD + EVALSHA on NOSCRIPT); `release` runs `_release_script`
//!   (compare-and-delete, `:422-429`), 0 raises `LockException` and keeps the owner
//!   (`:493-503`). Its `renew()` (`clients.extend`) calls `_release_func` instead of
//!   `_renew_func` (`:505-514`): it *deletes* the lock it holds and answers True (issue 66),
//!   so another process gets in.
//! - `sherlock@0.4.1`: `renew()` runs `_renew_script` (`EXPIRE` if the owner still holds it,
//!   `:431-442`), as it was meant to (fix of issue 66; the one line of `lock.py` that differs
//!   from v0.4.0, `:510`).
//!
//! Both checked against the real library (PyPI `sherlock` 0.4.0 and 0.4.1, redis-py 4.6.0),
//! command for command: `conformance/situations/sherlock@0.4.*/`.
//!
//! What breaks it: a hold longer than the TTL — the next holder gets the lock and the first one's
//! DEL removes it (foreign release, mutual exclusion violated); `sherlock@0.4.0`'s renew.

use std::rc::Rc;

use async_trait::async_trait;

use super::set::del_release;
use super::set_nx_px_lua::raised_by_redis_py;
use super::{
    CallError, Extension, Family, Grant, Lease, LockEnv, LockScheme, Params, PresetInfo, RAISED,
    Release, SchemeInfo, command, evalsha, not_acquired, uuid1, uuid4, whole_seconds,
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
    presets: PRESETS,
    build,
};

/// Named presets besides the default (`seed-002`): py-sherlock's Redis lock before and after
/// the fix of its `renew()`. Not matrix rows (without `clients.extend` both are
/// SETNX+EXPIRE in one script, as this scheme's row).
const PRESETS: &[PresetInfo] = &[
    PresetInfo {
        name: "sherlock@0.4.0",
        summary: "py-sherlock 0.4.0 RedisLock: SETNX+EXPIRE script, compare-and-delete release; renew() runs the release script (issue 66)",
        lease: Lease::Seconds,
        same_as: Some("lua-setnx-expire"),
    },
    PresetInfo {
        name: "sherlock@0.4.1",
        summary: "py-sherlock 0.4.1 RedisLock: as 0.4.0, renew() runs the renew script (EXPIRE while the owner holds it)",
        lease: Lease::Seconds,
        same_as: Some("lua-setnx-expire"),
    },
];

/// py-sherlock's `RedisLock._acquire_script`.
const SHERLOCK_ACQUIRE: &str = "
    local result = redis.call('SETNX', KEYS[1], ARGV[1])
    if result == 1 and ARGV[2] ~= -1 then
        redis.call('EXPIRE', KEYS[1], ARGV[2])
    end
    return result
    ";

/// py-sherlock's `RedisLock._release_script`.
const SHERLOCK_RELEASE: &str = "
    local result = 0
    if redis.call('GET', KEYS[1]) == ARGV[1] then
        redis.call('DEL', KEYS[1])
        result = 1
    end
    return result
    ";

/// py-sherlock's `RedisLock._renew_script`.
const SHERLOCK_RENEW: &str = "
    local result = 0
    if redis.call('GET', KEYS[1]) == ARGV[1] then
        if ARGV[2] ~= -1 then
            redis.call('EXPIRE', KEYS[1], ARGV[2])
        else
            redis.call('PERSIST', KEYS[1])
        end
        result = 1
    end
    return result
    ";

/// `setnxttl`'s script, as the article's Python source lays it out.
pub const SETNX_TTL: &str = r#"
            local ret = redis.call("setnx", KEYS[1], KEYS[2])
            if(ret == 0) then
                return 0
            end
            return redis.call("expire", KEYS[1], KEYS[3]) + 1
            "#;

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    let preset = params.choice(
        "preset",
        &["seed-002", "sherlock@0.4.0", "sherlock@0.4.1"],
        "seed-002",
    )?;
    if preset == "seed-002" {
        return Ok(Box::new(TechlogLock {
            key: params.key()?,
            expiretime: whole_seconds(params, INFO.default_ttl_ms)?,
            held: false,
        }));
    }
    Ok(Box::new(SherlockLock {
        key: params.key()?,
        expire_s: whole_seconds(params, 60_000)?,
        retry_interval_ms: params.positive("retry_delay_ms", 100)?,
        renew_runs_release: preset == "sherlock@0.4.0",
        owner: None,
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

/// py-sherlock's `RedisLock`.
pub struct SherlockLock {
    key: String,
    /// `expire`, whole seconds.
    expire_s: u64,
    /// `retry_interval`.
    retry_interval_ms: u64,
    /// 0.4.0: `renew()` calls `_release_func`.
    renew_runs_release: bool,
    /// `_owner`: set by a successful `_acquire`.
    owner: Option<String>,
}

/// What a sherlock script answered: 1, or the exception redis-py raised (an error reply is a
/// `ResponseError`; no reply a `TimeoutError` / `ConnectionError`), which escapes to the caller.
fn sherlock_one(reply: Result<Reply, CallError>) -> Result<bool, String> {
    match reply {
        Ok(Reply::Integer(n)) => Ok(n == 1),
        Ok(Reply::Error(e)) => Err(format!(
            "{RAISED}ResponseError: {}",
            String::from_utf8_lossy(&e)
        )),
        Ok(_) => Ok(false),
        Err(e) => Err(format!("{RAISED}{}", raised_by_redis_py(&e))),
    }
}

/// `BaseLock.acquire(blocking=True)`'s countdown in Python floats (py-sherlock/sherlock@v0.4.0
/// `sherlock/lock.py:177-185`): one item per try, `timeout` (s) less `retry_interval` (s) after
/// it, `Some(retry_interval_ms)` when the rest is still `> 0` (a sleep before the next try),
/// `None` when it is 0 (the next try at once); no more tries once it is below 0. Float
/// subtraction decides the last try: 0.3 s by 0.1 s leaves -2.8e-17 after 3 tries (whole ms
/// would leave 0 and try a fourth time at once), 0.5 s leaves +2.8e-17 after 5 and sleeps once
/// more before a sixth. Both are `ms / 1000.0`, the doubles Python reads for `0.3`, `0.1`.
fn sherlock_countdown(
    timeout_ms: u64,
    retry_interval_ms: u64,
) -> impl Iterator<Item = Option<u64>> {
    let retry_interval = retry_interval_ms as f64 / 1000.0;
    let mut timeout = timeout_ms as f64 / 1000.0;
    std::iter::from_fn(move || {
        if timeout < 0.0 {
            return None;
        }
        timeout -= retry_interval;
        Some((timeout > 0.0).then_some(retry_interval_ms))
    })
}

#[async_trait(?Send)]
impl LockScheme for SherlockLock {
    /// `BaseLock.acquire(blocking=True)` (`lock.py:167-192`): one try of `_acquire` (a new
    /// `str(uuid.uuid4())` each, `:482-491`) per step of [`sherlock_countdown`], the sleep it
    /// says after a failed one; `LockTimeoutException` when the countdown ends; an exception
    /// of redis-py escapes.
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        for sleep_ms in sherlock_countdown(timeout_ms, self.retry_interval_ms) {
            let owner = uuid4(env.as_ref());
            env.register_token(&owner);
            let expire = self.expire_s.to_string();
            let reply = evalsha(env, 0, SHERLOCK_ACQUIRE, &[&self.key], &[&owner, &expire]).await;
            if sherlock_one(reply)? {
                self.owner = Some(owner.clone());
                return Ok(Grant {
                    token: owner,
                    fence: None,
                });
            }
            if let Some(ms) = sleep_ms {
                env.sleep_ms(ms).await;
            }
        }
        Err(format!(
            "LockTimeoutException: Timeout elapsed after {} seconds while trying to acquiring lock.",
            timeout_ms as f64 / 1000.0
        ))
    }

    /// `_release` (`lock.py:493-503`): `_owner` is cleared only when the script answered 1; a
    /// release that raised keeps it, so the next `release()` runs the script again.
    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let Some(owner) = self.owner.clone() else {
            return Release {
                ok: false,
                detail: "LockException: Lock was not set by this process.".into(),
            };
        };
        let reply = evalsha(env, 0, SHERLOCK_RELEASE, &[&self.key], &[&owner]).await;
        match sherlock_one(reply) {
            Ok(true) => {
                self.owner = None;
                Release {
                    ok: true,
                    detail: "deleted".into(),
                }
            }
            Ok(false) => Release {
                ok: false,
                detail: "LockException: Lock could not be released because it was not acquired by this instance.".into(),
            },
            Err(e) => Release {
                ok: false,
                detail: e,
            },
        }
    }

    fn can_extend(&self) -> bool {
        true
    }

    /// `renew()` (`lock.py:505-514`): 0.4.0 runs the release script (the lock is deleted, True
    /// is answered), 0.4.1 the renew script; either way `_owner` stays.
    async fn extend(&mut self, env: &Rc<dyn LockEnv>) -> Extension {
        let Some(owner) = self.owner.clone() else {
            return Extension {
                ok: false,
                detail: "LockException: Lock was not set by this process.".into(),
            };
        };
        let script = if self.renew_runs_release {
            SHERLOCK_RELEASE
        } else {
            SHERLOCK_RENEW
        };
        let expire = self.expire_s.to_string();
        let reply = evalsha(env, 0, script, &[&self.key], &[&owner, &expire]).await;
        match sherlock_one(reply) {
            Ok(ok) => Extension {
                ok,
                detail: if ok { "renewed" } else { "not renewed" }.into(),
            },
            Err(e) => Extension {
                ok: false,
                detail: e,
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
    fn sherlock_0_4_0_renew_deletes_the_lock_and_0_4_1_extends_it() {
        use crate::locks::testing::two_clients;
        for (preset, deleted) in [("sherlock@0.4.0", true), ("sherlock@0.4.1", false)] {
            let (shared, (a, mut la), (b, mut lb)) = two_clients(serde_json::json!(
                {"name": "lua-setnx-expire", "preset": preset, "ttl_ms": 2000}
            ));
            let grant = block_on(la.acquire(&a, 100)).unwrap();
            assert_eq!(grant.token.len(), 36, "str(uuid.uuid4())");
            assert_eq!(shared.command(&["TTL", "lock"]), Reply::Integer(2));
            assert!(block_on(la.extend(&a)).ok, "{preset}: renew() says True");
            assert_eq!(
                block_on(lb.acquire(&b, 0)).is_ok(),
                deleted,
                "{preset}: b gets the lock a still holds"
            );
        }
    }

    #[test]
    fn sherlock_counts_its_timeout_down_in_python_floats() {
        let tries = |timeout_ms, retry_ms| {
            super::sherlock_countdown(timeout_ms, retry_ms).collect::<Vec<_>>()
        };
        assert_eq!(
            tries(300, 100),
            [Some(100), Some(100), None],
            "-2.8e-17 s left"
        );
        let half = tries(500, 100);
        assert_eq!(half.len(), 6);
        assert_eq!(half[4], Some(100), "2.8e-17 s left: one more sleep");
        assert_eq!(
            tries(200, 100),
            [Some(100), None, None],
            "0.0 left: a try at once"
        );
        assert_eq!(tries(0, 100), [None]);
    }

    #[test]
    fn a_sherlock_release_that_fails_keeps_the_owner() {
        use crate::locks::testing::two_clients;
        let (shared, (a, mut la), _) = two_clients(serde_json::json!(
            {"name": "lua-setnx-expire", "preset": "sherlock@0.4.1", "ttl_ms": 1000}
        ));
        let grant = block_on(la.acquire(&a, 0)).unwrap();
        shared.command(&["SET", "lock", "thief"]);
        assert!(!block_on(la.release(&a)).ok);
        shared.command(&["SET", "lock", &grant.token]);
        assert!(
            block_on(la.release(&a)).ok,
            "the second release sends its owner again"
        );
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
