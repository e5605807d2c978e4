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
//!   crashed holder keeps the lock for ever. Its `extend(ttl)` (redis/redis-py@v8.1.0
//!   `redis/lock.py:287-323`, `LUA_EXTEND_SCRIPT` `:45-66`) adds `ttl_ms` to the key's TTL if
//!   the token is still the value, else raises `LockNotOwnedError`; without `ttl_ms` it raises
//!   "Cannot extend a lock with no timeout", so `clients.extend` needs `ttl_ms`. Every command
//!   goes through the client's default `Retry` (a timed-out or broken call sent again on a new
//!   connection up to 10 times, `random() × 10 ms × 2^failures` apart, at most 1 s), and the
//!   last error is raised to the caller: an acquire does not poll on through errors (checked against redis-py
//!   8.1.0 by `conformance/situations/redis-py@8.1.0/`).
//! - `redis-py@2.10.1`: as `redis-py`, but one `Lock` object shared by a process's threads
//!   (`clients.threads`) keeps one token for all of them (redis/redis-py@2.10.1
//!   `redis/lock.py`: `self.token`, set by a successful `acquire`, read by `release` and
//!   `extend`): a thread whose lease ran out releases or extends with the token of the thread
//!   that took the lock after it (issue 416). 2.10.2 keeps the token in `threading.local()` by
//!   default (`thread_local=True`, PR 491/492), which is the `redis-py` preset: each thread its
//!   own token. 2.10.1's `StrictRedis.lock()` makes a `LuaLock` (`redis/client.py:480-511`):
//!   it acquires with its `LUA_ACQUIRE_SCRIPT` (SETNX, then PEXPIRE unless the timeout is
//!   `''`), extends with its own `LUA_EXTEND_SCRIPT` (adds the time to the PTTL, two
//!   arguments), and its three `Script` objects, class attributes shared by the process, send
//!   `EVALSHA ''` until the first NOSCRIPT makes them `SCRIPT LOAD` (`:2576-2599`). Its
//!   `acquire` checks `time.time() > stop_trying_at` after a failed try (`redis/lock.py:60-86`),
//!   so it tries once more than redis-py 3+; a call's error is raised, without retries.
//! - `redbeat@1.0.0` / `redbeat@2.0.0`: celery-redbeat's scheduler lock, a redis-py (8.1.0)
//!   `Lock` with `timeout=lock_timeout` (`ttl_ms`, default 1 500 000: 5 × celery's
//!   `DEFAULT_MAX_INTERVAL` of 300 s, the class attribute `max_interval` at the time
//!   `__init__` reads it) and `sleep=max_interval` (`retry_delay_ms`, default 300 000), no
//!   blocking timeout, extended on every beat tick (`clients.extend`). 1.0.0 extends with a
//!   plain `PEXPIRE lock ttl` whose reply it ignores (sibson/redbeat@v1.0.0
//!   `redbeat/schedulers.py:444-447`): it extends whoever holds the key (issue 127). 2.0.0 calls
//!   `lock.extend(int(lock_timeout))` with its `LUA_EXTEND_TO_SCRIPT` (sibson/redbeat@v2.0.0
//!   `redbeat/schedulers.py:36-56, :463-466, :504-520`; PR 128): whole seconds, redis-py's
//!   third argument `"0"`, and the token must still be the value, else `LockNotOwnedError`.
//! - `python-redis-lock@4.0.1`: ionelmc/python-redis-lock's `Lock`, whose waiters `BLPOP` a
//!   signal list the release pushes: a library of its own, in `python_redis_lock.rs`.

use std::cell::RefCell;
use std::rc::Rc;

use async_trait::async_trait;

use super::{
    COMPARE_AND_DELETE, CallError, Extension, Family, Grant, Lease, LockEnv, LockScheme, Params,
    PresetInfo, Release, SchemeInfo, argv, command, eval, random_token, retry_until, try_until,
    undashed, uuid1,
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

/// redis-py's `Lock.LUA_EXTEND_SCRIPT`.
const REDIS_PY_EXTEND: &str = "
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        local expiration = redis.call('pttl', KEYS[1])
        if not expiration then
            expiration = 0
        end
        if expiration < 0 then
            return 0
        end

        local newttl = ARGV[2]
        if ARGV[3] == \"0\" then
            newttl = ARGV[2] + expiration
        end
        redis.call('pexpire', KEYS[1], newttl)
        return 1
    ";

/// redbeat v2.0.0's `LUA_EXTEND_TO_SCRIPT`.
const REDBEAT_EXTEND_TO: &str = "
    local token = redis.call('get', KEYS[1])
    if not token or token ~= ARGV[1] then
        return 0
    end
    local expiration = redis.call('pttl', KEYS[1])
    if not expiration then
        expiration = 0
    end
    if expiration < 0 then
        return 0
    end
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1
";

/// redis-py 2.10.1's `LuaLock.LUA_ACQUIRE_SCRIPT` (`redis/lock.py:199-206`): SETNX, then
/// PEXPIRE unless the timeout is `''`.
const REDIS_PY_2_10_ACQUIRE: &str = "
        if redis.call('setnx', KEYS[1], ARGV[1]) == 1 then
            if ARGV[2] ~= '' then
                redis.call('pexpire', KEYS[1], ARGV[2])
            end
            return 1
        end
        return 0
    ";

/// redis-py 2.10.1's `LuaLock.LUA_EXTEND_SCRIPT` (`redis/lock.py:222-236`): adds ARGV[2] ms to
/// the PTTL.
const REDIS_PY_2_10_EXTEND: &str = "
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        local expiration = redis.call('pttl', KEYS[1])
        if not expiration then
            expiration = 0
        end
        if expiration < 0 then
            return 0
        end
        redis.call('pexpire', KEYS[1], expiration + ARGV[2])
        return 1
    ";

/// redis-py 2.10.1's three `Script` objects (`LuaLock.register_scripts`), class attributes of
/// the process: each starts with the sha `''` (`redis/client.py:2579-2582`), so its first
/// EVALSHA gets NOSCRIPT, and keeps the sha `SCRIPT LOAD` answered (`:2593-2599`).
#[derive(Default)]
struct LuaLockScripts {
    acquire: RefCell<String>,
    release: RefCell<String>,
    extend: RefCell<String>,
}

/// `Script.__call__` of redis-py 2.10.1 for one of the three scripts.
async fn lua_lock_script(
    env: &Rc<dyn LockEnv>,
    sha: &RefCell<String>,
    script: &str,
    key: &str,
    args: &[&str],
) -> Result<Reply, CallError> {
    let call = |sha: &str| {
        let mut cmd = argv(&["EVALSHA", sha, "1", key]);
        cmd.extend(args.iter().map(|a| a.as_bytes().to_vec()));
        cmd
    };
    let first = sha.borrow().clone();
    match env.call(0, call(&first)).await? {
        Reply::Error(e) if e.starts_with(b"NOSCRIPT") => {
            let loaded = env.call(0, argv(&["SCRIPT", "LOAD", script])).await?;
            if let Some(new) = loaded.as_bulk() {
                *sha.borrow_mut() = String::from_utf8_lossy(new).into_owned();
            }
            let again = sha.borrow().clone();
            env.call(0, call(&again)).await
        }
        reply => Ok(reply),
    }
}

/// How a preset extends a held lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ExtendBy {
    /// redis.io's pattern has no extension.
    None,
    /// redis-py `Lock.extend(ttl)`.
    RedisPy,
    /// redbeat 1.0.0: `PEXPIRE`, reply ignored.
    Pexpire,
    /// redbeat 2.0.0: `lock.extend` with `LUA_EXTEND_TO_SCRIPT`.
    ExtendTo,
}

/// Named presets besides the default (`redis.io`).
///
/// The version presets of the incident catalog differ from `redis-py` only where the matrix does
/// not look (one process thread; their `extend`; redbeat's timing parameters), so its `redis-py`
/// row stands for them there.
const PRESETS: &[PresetInfo] = &[
    PresetInfo {
        name: "redis-py",
        summary: "redis-py Lock: uuid1 token, 100 ms polling, no TTL unless ttl_ms (timeout=None), release script by EVALSHA",
        lease: Lease::None,
        same_as: None,
    },
    PresetInfo {
        name: "redis-py@2.10.1",
        summary: "redis-py 2.10.1: one token shared by the threads of a process (issue 416); otherwise redis-py",
        lease: Lease::None,
        same_as: Some("set-nx-px-lua:redis-py"),
    },
    PresetInfo {
        name: "redbeat@1.0.0",
        summary: "celery-redbeat 1.0.0's scheduler lock: redis-py's Lock, 1500 s lease, 300 s polling, extended by a bare PEXPIRE (issue 127)",
        lease: Lease::Ms,
        same_as: Some("set-nx-px-lua:redis-py"),
    },
    PresetInfo {
        name: "redbeat@2.0.0",
        summary: "celery-redbeat 2.0.0's scheduler lock: as 1.0.0, extended only while the token is the value (PR 128)",
        lease: Lease::Ms,
        same_as: Some("set-nx-px-lua:redis-py"),
    },
    super::python_redis_lock::PRESET,
];

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
    let preset = params.choice(
        "preset",
        &[
            "redis.io",
            "redis-py",
            "redis-py@2.10.1",
            "redbeat@1.0.0",
            "redbeat@2.0.0",
            super::python_redis_lock::PRESET.name,
        ],
        "redis.io",
    )?;
    if preset == super::python_redis_lock::PRESET.name {
        return super::python_redis_lock::build(params);
    }
    let key = params.key()?;
    let (redis_py, extend_by) = match preset.as_str() {
        "redis-py" | "redis-py@2.10.1" => (true, ExtendBy::RedisPy),
        "redbeat@1.0.0" => (true, ExtendBy::Pexpire),
        "redbeat@2.0.0" => (true, ExtendBy::ExtendTo),
        _ => (false, ExtendBy::None),
    };
    let shared = preset == "redis-py@2.10.1";
    Ok(Box::new(match preset.as_str() {
        "redis-py" | "redis-py@2.10.1" => {
            let ttl_ms = if params.given("ttl_ms") {
                Some(params.positive("ttl_ms", INFO.default_ttl_ms)?)
            } else {
                None
            };
            SetNxPxLua {
                key,
                ttl_ms,
                retry_delay_ms: params.positive("retry_delay_ms", 100)?,
                token: Rc::default(),
                redis_py,
                extend_by,
                shared,
                lua_lock: shared.then(Rc::default),
            }
        }
        "redis.io" => SetNxPxLua {
            key,
            ttl_ms: Some(params.positive("ttl_ms", INFO.default_ttl_ms)?),
            retry_delay_ms: params.positive("retry_delay_ms", 50)?,
            token: Rc::default(),
            redis_py,
            extend_by,
            shared,
            lua_lock: None,
        },
        // redbeat: `lock_timeout` = 5 × the class's `max_interval`, celery's
        // `DEFAULT_MAX_INTERVAL` of 300 s (sibson/redbeat@v1.0.0 `redbeat/schedulers.py:351,
        // :356-359`; v2.0.0 `:366, :371-376`): 1500 s; `sleep=max_interval`, 300 s
        // (v1.0.0 `:495`, v2.0.0 `:515`).
        _ => SetNxPxLua {
            key,
            ttl_ms: Some(params.positive("ttl_ms", 1_500_000)?),
            retry_delay_ms: params.positive("retry_delay_ms", 300_000)?,
            token: Rc::default(),
            redis_py,
            extend_by,
            shared,
            lua_lock: None,
        },
    }))
}

pub struct SetNxPxLua {
    key: String,
    /// `None`: redis-py's `timeout=None`, a lock without TTL.
    ttl_ms: Option<u64>,
    /// The polling period (see the module doc).
    retry_delay_ms: u64,
    /// The token of the last successful acquire: per thread, or shared by the threads of a
    /// process with `redis-py@2.10.1`.
    token: Rc<RefCell<Option<String>>>,
    /// `redis-py@2.10.1`: threads share this object's token.
    shared: bool,
    /// redis-py's `Lock` (the `redis-py` and `redbeat@*` presets).
    redis_py: bool,
    extend_by: ExtendBy,
    /// redis-py 2.10.1's `LuaLock`: its scripts (shared by the threads of a process).
    lua_lock: Option<Rc<LuaLockScripts>>,
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
    let reply = eval(env, server, COMPARE_AND_DELETE, &[key], &[token]).await;
    let (ok, detail) = owner_checked(reply, "deleted", "not the owner any more");
    Release { ok, detail }
}

/// What a script that acts only for the lock's owner answered: 1 when it acted (`done`), 0 when
/// the key is gone or someone else's (`refused`, in the library's words).
fn owner_checked(reply: Result<Reply, CallError>, done: &str, refused: &str) -> (bool, String) {
    match reply {
        Ok(Reply::Integer(1)) => (true, done.into()),
        Ok(Reply::Integer(_)) => (false, refused.into()),
        Ok(other) => (false, format!("unexpected reply {other:?}")),
        Err(e) => (false, e.to_string()),
    }
}

/// [`owner_checked`] for redis-py, which raises the error of a call to its caller.
fn owner_checked_raising(
    reply: Result<Reply, CallError>,
    done: &str,
    refused: &str,
) -> (bool, String) {
    match reply {
        Err(e) => (
            false,
            format!("{}{}", super::RAISED, raised_by_redis_py(&e)),
        ),
        reply => owner_checked(reply, done, refused),
    }
}

/// redis-py 2.10.1 `Lock.acquire` (`redis/lock.py:60-86`) with `LuaLock.do_acquire`
/// (`:248-252`): the acquire script (`ARGV[2]` the timeout in ms, or `''` without one), and
/// after a try that failed, `time.time() > stop_trying_at` ends it (the wall clock, checked
/// after the try: one more try than redis-py 3+'s `next_try_at > stop_trying_at`), else a
/// sleep. An error of a call escapes to the caller.
async fn lua_lock_acquire(
    env: &Rc<dyn LockEnv>,
    scripts: &LuaLockScripts,
    key: &str,
    token: &str,
    ttl_ms: Option<u64>,
    retry_delay_ms: u64,
    timeout_ms: u64,
) -> Result<Grant, String> {
    let ttl = ttl_ms.map_or(String::new(), |t| t.to_string());
    let started = env.wall_ms();
    loop {
        match lua_lock_script(
            env,
            &scripts.acquire,
            REDIS_PY_2_10_ACQUIRE,
            key,
            &[token, &ttl],
        )
        .await
        {
            Ok(Reply::Integer(1)) => {
                return Ok(Grant {
                    token: token.to_string(),
                    fence: None,
                });
            }
            Ok(_) => {}
            Err(e) => return Err(format!("{}{}", super::RAISED, raised_by_redis_py(&e))),
        }
        if env.wall_ms() - started > timeout_ms as i64 {
            return Err(format!("not acquired within {timeout_ms} ms"));
        }
        env.sleep_ms(retry_delay_ms).await;
    }
}

/// redis-py 8's default `Retry` of every command (redis/redis-py@v8.1.0
/// `redis/client.py:284-290, :866-915`, `redis/retry.py:101-135`, `redis/backoff.py:158-179`,
/// `redis/_defaults.py:37-39`): a command whose reply timed out or whose connection broke is
/// sent again on a new connection (the client drops the old one, and with it a command the
/// server still holds), up to 10 more times, after `random() × 10 ms × 2^failures` (at most
/// 1 s); then the last error is raised. Measured against locksim serve under CLIENT PAUSE:
/// 11 connections and 6.3 s before `TimeoutError` with `socket_timeout=0.2`.
pub(super) async fn redis_py_call(
    env: &Rc<dyn LockEnv>,
    server: usize,
    command: Vec<Vec<u8>>,
) -> Result<Reply, CallError> {
    const RETRIES: u32 = 10;
    let mut failures = 0;
    loop {
        match env.call(server, command.clone()).await {
            Ok(reply) => return Ok(reply),
            Err(error) => {
                failures += 1;
                if failures > RETRIES {
                    return Err(error);
                }
                let unit = (env.random_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let backoff_ms = (unit * 10.0 * f64::from(1u32 << failures)).min(1000.0);
                env.sleep_ms(backoff_ms as u64).await;
            }
        }
    }
}

/// redis-py 6+'s `Script.__call__` (`redis/commands/core.py:10917-10942`) over
/// [`redis_py_call`]: EVALSHA of the script's sha1, and on NOSCRIPT a SCRIPT LOAD and EVALSHA
/// again.
pub(super) async fn redis_py_script(
    env: &Rc<dyn LockEnv>,
    server: usize,
    script: &'static str,
    keys: &[&str],
    args: &[&str],
) -> Result<Reply, CallError> {
    let call = super::script_command("EVALSHA", &super::script_sha(script), keys, args);
    match redis_py_call(env, server, call.clone()).await? {
        Reply::Error(e) if e.starts_with(b"NOSCRIPT") => {
            redis_py_call(env, server, argv(&["SCRIPT", "LOAD", script])).await?;
            redis_py_call(env, server, call).await
        }
        reply => Ok(reply),
    }
}

/// The exception redis-py raises for a call that got no reply.
pub(super) fn raised_by_redis_py(error: &CallError) -> String {
    match error {
        CallError::Timeout => "TimeoutError: Timeout reading from socket".to_string(),
        CallError::Disconnected(why) => format!("ConnectionError: {why}"),
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
        if let Some(scripts) = &self.lua_lock {
            let grant = lua_lock_acquire(
                env,
                scripts,
                &self.key,
                &token,
                self.ttl_ms,
                self.retry_delay_ms,
                timeout_ms,
            )
            .await?;
            *self.token.borrow_mut() = Some(grant.token.clone());
            return Ok(grant);
        }
        let (key, ttl_ms) = (self.key.clone(), self.ttl_ms);
        if self.redis_py {
            // redis-py `Lock.acquire` / `do_acquire` (v8.1.0 `redis/lock.py:190-245`): SET NX
            // [PX], the next try only if it would start before `blocking_timeout`, and an error
            // of the SET (after the client's retries) raised to the caller.
            let grant = try_until(env, timeout_ms, self.retry_delay_ms, async || {
                let ttl = ttl_ms.map(|t| t.to_string());
                let mut set = vec!["SET", key.as_str(), token.as_str(), "NX"];
                if let Some(ttl) = &ttl {
                    set.extend(["PX", ttl.as_str()]);
                }
                match redis_py_call(env, 0, argv(&set)).await {
                    Ok(Reply::Status(ok)) if ok == "OK" => Ok(Some(Grant {
                        token: token.clone(),
                        fence: None,
                    })),
                    Ok(_) => Ok(None),
                    Err(e) => Err(format!("{}{}", super::RAISED, raised_by_redis_py(&e))),
                }
            })
            .await?;
            *self.token.borrow_mut() = Some(grant.token.clone());
            return Ok(grant);
        }
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
        *self.token.borrow_mut() = Some(grant.token.clone());
        Ok(grant)
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let taken = self.token.borrow_mut().take();
        let Some(token) = taken else {
            return Release {
                ok: false,
                detail: "not acquired".into(),
            };
        };
        if !self.redis_py {
            return compare_and_delete(env, 0, &self.key, &token).await;
        }
        if let Some(scripts) = &self.lua_lock {
            let reply = lua_lock_script(
                env,
                &scripts.release,
                REDIS_PY_RELEASE,
                &self.key,
                &[&token],
            )
            .await;
            let (ok, detail) = owner_checked_raising(
                reply,
                "deleted",
                "LockError: Cannot release a lock that's no longer owned",
            );
            return Release { ok, detail };
        }
        let reply = redis_py_script(env, 0, REDIS_PY_RELEASE, &[&self.key], &[&token]).await;
        let (ok, detail) = owner_checked_raising(
            reply,
            "deleted",
            "LockNotOwnedError: Cannot release a lock that's no longer owned",
        );
        Release { ok, detail }
    }

    fn can_extend(&self) -> bool {
        self.extend_by != ExtendBy::None && self.ttl_ms.is_some()
    }

    fn share(&self) -> Option<Box<dyn LockScheme>> {
        self.shared.then(|| {
            Box::new(SetNxPxLua {
                key: self.key.clone(),
                ttl_ms: self.ttl_ms,
                retry_delay_ms: self.retry_delay_ms,
                token: self.token.clone(),
                shared: true,
                redis_py: self.redis_py,
                extend_by: self.extend_by,
                lua_lock: self.lua_lock.clone(),
            }) as Box<dyn LockScheme>
        })
    }

    async fn extend(&mut self, env: &Rc<dyn LockEnv>) -> Extension {
        let token = self.token.borrow().clone();
        let (Some(token), Some(ttl_ms)) = (token, self.ttl_ms) else {
            return Extension {
                ok: false,
                detail: "LockError: Cannot extend an unlocked lock".into(),
            };
        };
        let ttl = ttl_ms.to_string();
        let key = self.key.as_str();
        let reply = match self.extend_by {
            ExtendBy::Pexpire => {
                // redbeat 1.0.0 ignores the reply: 0 (no such key) goes unnoticed too.
                return match redis_py_call(env, 0, argv(&["PEXPIRE", key, &ttl])).await {
                    Ok(reply) => Extension {
                        ok: true,
                        detail: format!("PEXPIRE answered {reply:?}, not checked"),
                    },
                    Err(e) => Extension {
                        ok: false,
                        detail: format!("{}{}", super::RAISED, raised_by_redis_py(&e)),
                    },
                };
            }
            ExtendBy::ExtendTo => {
                // `self.lock.extend(int(self.lock_timeout))`: whole seconds, then redis-py's
                // `int(additional_time * 1000)` and its `replace_ttl` argument "0".
                let whole_ms = (ttl_ms / 1000 * 1000).to_string();
                redis_py_script(env, 0, REDBEAT_EXTEND_TO, &[key], &[&token, &whole_ms, "0"]).await
            }
            ExtendBy::RedisPy => match &self.lua_lock {
                Some(scripts) => {
                    let reply = lua_lock_script(
                        env,
                        &scripts.extend,
                        REDIS_PY_2_10_EXTEND,
                        key,
                        &[&token, &ttl],
                    )
                    .await;
                    let (ok, detail) = owner_checked_raising(
                        reply,
                        "extended",
                        "LockError: Cannot extend a lock that's no longer owned",
                    );
                    return Extension { ok, detail };
                }
                None => {
                    redis_py_script(env, 0, REDIS_PY_EXTEND, &[key], &[&token, &ttl, "0"]).await
                }
            },
            ExtendBy::None => {
                return Extension {
                    ok: false,
                    detail: "no extend operation".into(),
                };
            }
        };
        let (ok, detail) = owner_checked_raising(
            reply,
            "extended",
            "LockNotOwnedError: Cannot extend a lock that's no longer owned",
        );
        Extension { ok, detail }
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

    #[test]
    fn redbeat_1_0_0_extends_whoever_holds_the_key_and_2_0_0_refuses() {
        use crate::locks::testing::{pass, two_clients};
        for (preset, stolen) in [("redbeat@1.0.0", true), ("redbeat@2.0.0", false)] {
            let (shared, (a, mut la), (b, mut lb)) = two_clients(serde_json::json!(
                {"name": "set-nx-px-lua", "preset": preset, "ttl_ms": 2000, "retry_delay_ms": 100}
            ));
            assert!(la.can_extend());
            block_on(la.acquire(&a, 1000)).unwrap();
            pass(&shared, 2500);
            block_on(lb.acquire(&b, 1000)).unwrap();
            pass(&shared, 1500);
            let extension = block_on(la.extend(&a));
            assert_eq!(extension.ok, stolen, "{preset}: {extension:?}");
            let pttl = shared.command(&["PTTL", "lock"]);
            assert_eq!(
                matches!(pttl, Reply::Integer(ms) if ms > 1900),
                stolen,
                "{preset}: b's key extended by a: {pttl:?}"
            );
        }
    }

    #[test]
    fn redis_py_2_10_1_threads_share_one_token() {
        use crate::locks::testing::pass;
        let shared = Shared::new();
        let env = DirectEnv::new(&shared, "a", 1);
        let json = |preset: &str| serde_json::json!({"name": "set-nx-px-lua", "preset": preset, "ttl_ms": 1000});
        let mut t1 = scheme_json(json("redis-py@2.10.1"));
        let mut t2 = t1.share().expect("2.10.1 shares its Lock object");
        block_on(t1.acquire(&env, 1000)).unwrap();
        pass(&shared, 1500);
        let second = block_on(t2.acquire(&env, 1000)).unwrap();
        // t1's lease ran out; with t2's token it extends and releases t2's lock.
        assert!(block_on(t1.extend(&env)).ok);
        assert!(block_on(t1.release(&env)).ok);
        assert_eq!(shared.command(&["GET", "lock"]), Reply::Nil, "{second:?}");
        assert!(scheme_json(json("redis-py")).share().is_none());
    }

    fn scheme_json(json: serde_json::Value) -> Box<dyn LockScheme> {
        SchemeSpec::from_json(&json, "scheme")
            .unwrap()
            .build("scheme")
            .unwrap()
    }
}
