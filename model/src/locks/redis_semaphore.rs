//! `watchdog:redis-semaphore@5.8.0`: the `Mutex` of swarthy/redis-semaphore 5.8.0 (node), a
//! lock renewed while held like seed 003's watchdog, with the library's own timings, scripts
//! and loss handling. Cited from the npm package `redis-semaphore@5.8.0` (`lib/`, compiled from
//! its `src/` at the tag; checked command for command by `conformance/situations/
//! redis-semaphore@5.8.0/`):
//!
//! - one identifier per lock object, `crypto.randomUUID()` (`lib/Lock.js:86-89, :108-111`),
//!   the key `mutex:<name>` (`lib/RedisMutex.js`): the preset's `key` is the Redis key, so a
//!   library told `lock` is `"key": "mutex:lock"` here;
//! - acquire (`lib/mutex/acquire.js:11-28`): `end = Date.now() + acquireTimeout` (the wall
//!   clock); while `Date.now() < end` and `++attempt <= acquireAttemptsLimit`: `SET key id PX
//!   lockTimeout NX` (PX before NX, as ioredis sends the call's arguments), `OK` wins, anything
//!   else waits `retryInterval` — after the last attempt too — and tries again; then `acquire`
//!   throws `TimeoutError` (`lib/Lock.js:122-128`), which a caller sees as a refusal. A command
//!   that fails (an error reply, a broken connection) rejects the acquire at once. Defaults
//!   (`lib/misc.js:5-10`): lockTimeout 10 000 ms (`ttl_ms`), retryInterval 10 ms
//!   (`retry_delay_ms`), no attempts limit (`attempts_limit`, 0 = none);
//! - refresh (`lib/Lock.js:52-75, :112-115, :139-141`): a `setInterval` every
//!   `refreshInterval` (`refresh_interval_ms`, default `Math.round(0.8 × lockTimeout)`, `:45, :48`;
//!   0 = none) runs `expireIfEqualLua` (`lib/mutex/refresh.js:11-31`: `pexpire` if the value
//!   is the identifier); a tick while the previous refresh is in flight is skipped. A refresh
//!   that answers 0 marks the lock lost and stops the interval (`onLockLost`, whose default
//!   throws on the timer: node ends the process). A refresh that fails (a rejected promise)
//!   escapes the timer as an unhandled rejection, which ends a node process: the model stops
//!   refreshing there;
//! - release (`lib/Lock.js:144-154`): stops the interval, then only if the lock is still
//!   believed held `delIfEqualLua` (`lib/mutex/release.js:42-56`), its answer ignored: a
//!   release never reports that someone else held the key, and one after a loss sends nothing;
//! - scripts by `EVALSHA`, on `NOSCRIPT` by `EVAL` of the text (`lib/utils/createEval.js:17-38`).
//!
//! The matrix runs the `watchdog` row for it (`same_as`).

use std::cell::Cell;
use std::rc::Rc;

use async_trait::async_trait;

use super::{
    Grant, LockEnv, LockScheme, Params, RAISED, Release, TaskGuard, argv, evalsha_or_eval,
    not_acquired, uuid4,
};
use crate::redis::Reply;

/// `expireIfEqualLua`, byte for byte (its sha1 is what `EVALSHA` sends): `lib/mutex/refresh.js:11-24`.
pub const EXPIRE_IF_EQUAL: &str = "
  local key = KEYS[1]
  local identifier = ARGV[1]
  local lockTimeout = ARGV[2]

  local value = redis.call('get', key)

  if value == identifier then
    redis.call('pexpire', key, lockTimeout)
    return 1
  end

  return 0
  ";

/// `delIfEqualLua`, byte for byte: `lib/mutex/release.js:42-51`.
pub const DEL_IF_EQUAL: &str = "
  local key = KEYS[1]
  local identifier = ARGV[1]

  if redis.call('get', key) == identifier then
    return redis.call('del', key)
  end

  return 0
  ";

/// `REFRESH_INTERVAL_COEF` (`lib/Lock.js:45`).
const REFRESH_COEF: f64 = 0.8;

/// The options both of redis-semaphore's mutexes take (`Mutex` and `RedlockMutex`: `lib/Lock.js`
/// constructor, defaults `lib/misc.js:5-10`), named as the scenario's scheme parameters.
pub(super) struct Options {
    pub(super) key: String,
    pub(super) lock_timeout_ms: u64,
    pub(super) retry_interval_ms: u64,
    /// 0: no refresh.
    pub(super) refresh_interval_ms: u64,
    /// `None`: `Number.POSITIVE_INFINITY`.
    pub(super) attempts_limit: Option<u64>,
}

impl Options {
    pub(super) fn parse(params: &mut Params) -> Result<Self, String> {
        let key = params.key()?;
        let lock_timeout_ms = params.positive("ttl_ms", 10_000)?;
        let refresh_default = (lock_timeout_ms as f64 * REFRESH_COEF).round() as u64;
        Ok(Options {
            key,
            lock_timeout_ms,
            retry_interval_ms: params.positive("retry_delay_ms", 10)?,
            refresh_interval_ms: params.u64("refresh_interval_ms", refresh_default)?,
            attempts_limit: match params.u64("attempts_limit", 0)? {
                0 => None,
                n => Some(n),
            },
        })
    }
}

/// The preset's scheme (see the module doc); `watchdog`'s `build` hands it the parameters.
pub fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(Mutex {
        options: Options::parse(params)?,
        identifier: None,
        acquired: Rc::new(Cell::new(false)),
        refresh: None,
    }))
}

pub struct Mutex {
    options: Options,
    /// Drawn once per lock object (its constructor), at its first acquire here.
    identifier: Option<String>,
    /// `_acquired`: set by a won acquire, cleared by a failed refresh and by release.
    acquired: Rc<Cell<bool>>,
    refresh: Option<Box<dyn TaskGuard>>,
}

/// How both of redis-semaphore's mutexes begin a release (`lib/Lock.js:144-154`): stop the
/// refresh, then go on only with an identifier whose lock is still held (`_acquired`).
pub(super) fn identifier_to_release(
    refresh: &mut Option<Box<dyn TaskGuard>>,
    identifier: &Option<String>,
    acquired: &Cell<bool>,
) -> Result<String, Release> {
    if let Some(refresh) = refresh.take() {
        refresh.cancel();
    }
    let identifier = match identifier {
        Some(id) if acquired.get() => id.clone(),
        Some(_) => {
            return Err(Release {
                ok: true,
                detail: "not held (lost, or never acquired): release sends nothing".into(),
            });
        }
        None => return Err(not_acquired()),
    };
    acquired.set(false);
    Ok(identifier)
}

fn raised(what: &str, e: impl std::fmt::Display) -> String {
    format!("{RAISED}{what}: {e}")
}

/// The refresh interval of a held lock (`_startRefresh` / `_processRefresh`).
fn start_refresh(
    env: &Rc<dyn LockEnv>,
    key: &str,
    identifier: &str,
    lock_timeout_ms: u64,
    every_ms: u64,
    acquired: Rc<Cell<bool>>,
) -> Box<dyn TaskGuard> {
    let (task_env, key, identifier, ttl) = (
        env.clone(),
        key.to_string(),
        identifier.to_string(),
        lock_timeout_ms.to_string(),
    );
    env.spawn(Box::pin(async move {
        let start = task_env.mono_ms();
        let mut tick = 1;
        loop {
            // setInterval's ticks keep their schedule; those that fell while a refresh was
            // in flight were skipped (`_refreshing`).
            let now = task_env.mono_ms();
            while start + tick * every_ms <= now {
                tick += 1;
            }
            task_env.sleep_ms(start + tick * every_ms - now).await;
            let reply =
                evalsha_or_eval(&task_env, 0, EXPIRE_IF_EQUAL, &[&key], &[&identifier, &ttl]).await;
            match reply {
                // `+result === 1`
                Ok(Reply::Integer(1)) => {}
                Ok(Reply::Error(_)) | Err(_) => return,
                Ok(_) => {
                    if acquired.get() {
                        acquired.set(false);
                        return;
                    }
                }
            }
        }
    }))
}

#[async_trait(?Send)]
impl LockScheme for Mutex {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let identifier = self
            .identifier
            .get_or_insert_with(|| uuid4(env.as_ref()))
            .clone();
        env.register_token(&identifier);
        let ttl = self.options.lock_timeout_ms.to_string();
        let end = env.wall_ms() + timeout_ms as i64;
        let mut attempt = 0;
        while env.wall_ms() < end && {
            attempt += 1;
            self.options
                .attempts_limit
                .is_none_or(|limit| attempt <= limit)
        } {
            let set = argv(&["SET", &self.options.key, &identifier, "PX", &ttl, "NX"]);
            match env.call(0, set).await {
                Ok(Reply::Status(ok)) if ok == "OK" => {
                    self.acquired.set(true);
                    if self.options.refresh_interval_ms > 0 {
                        self.refresh = Some(start_refresh(
                            env,
                            &self.options.key,
                            &identifier,
                            self.options.lock_timeout_ms,
                            self.options.refresh_interval_ms,
                            self.acquired.clone(),
                        ));
                    }
                    return Ok(Grant {
                        token: identifier,
                        fence: None,
                    });
                }
                Ok(Reply::Error(e)) => {
                    return Err(raised("SET", String::from_utf8_lossy(&e)));
                }
                Err(e) => return Err(raised("SET", e)),
                Ok(_) => env.sleep_ms(self.options.retry_interval_ms).await,
            }
        }
        Err(format!(
            "TimeoutError: Acquire mutex {} timeout",
            self.options.key
        ))
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let identifier =
            match identifier_to_release(&mut self.refresh, &self.identifier, &self.acquired) {
                Ok(identifier) => identifier,
                Err(release) => return release,
            };
        match evalsha_or_eval(env, 0, DEL_IF_EQUAL, &[&self.options.key], &[&identifier]).await {
            Ok(Reply::Error(e)) => Release {
                ok: false,
                detail: raised("release", String::from_utf8_lossy(&e)),
            },
            Ok(reply) => Release {
                ok: true,
                detail: format!("released (delIfEqual answered {reply:?}, ignored)"),
            },
            Err(e) => Release {
                ok: false,
                detail: raised("release", e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::locks::testing::{block_on, pass, two_clients};
    use crate::redis::Reply;

    fn preset(extra: serde_json::Value) -> serde_json::Value {
        let mut spec = json!({"name": "watchdog", "preset": "redis-semaphore@5.8.0"});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        spec
    }

    #[test]
    fn the_refresh_keeps_the_lock_until_release_and_release_deletes_it() {
        let (shared, (a, mut la), (b, mut lb)) = two_clients(preset(json!({"ttl_ms": 1000})));
        block_on(la.acquire(&a, 100)).unwrap();
        // Refreshed every 800 ms: still held 5 s later.
        let refused = block_on(lb.acquire(&b, 5000)).unwrap_err();
        assert!(refused.starts_with("TimeoutError"), "{refused}");
        assert!(matches!(shared.command(&["PTTL", "lock"]), Reply::Integer(t) if t > 0));
        assert!(block_on(la.release(&a)).ok);
        assert_eq!(shared.running_tasks(), 0, "release stops the refresh");
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(0));
    }

    #[test]
    fn a_stolen_lock_stops_the_refresh_and_release_sends_nothing() {
        let (shared, (a, mut la), _) = two_clients(preset(json!({"ttl_ms": 1000})));
        block_on(la.acquire(&a, 100)).unwrap();
        shared.command(&["SET", "lock", "thief"]);
        pass(&shared, 900);
        assert_eq!(
            shared.running_tasks(),
            0,
            "a refresh that answers 0 ends it"
        );
        let release = block_on(la.release(&a));
        assert!(release.ok, "{release:?}");
        assert_eq!(
            shared.command(&["GET", "lock"]),
            Reply::Bulk(b"thief".to_vec())
        );
    }

    #[test]
    fn the_attempts_limit_bounds_the_tries_and_each_waits_the_retry_interval() {
        let (_shared, (a, mut la), (b, mut lb)) = two_clients(preset(
            json!({"ttl_ms": 60000, "retry_delay_ms": 300, "attempts_limit": 3}),
        ));
        block_on(la.acquire(&a, 100)).unwrap();
        let before = b.mono_ms();
        assert!(block_on(lb.acquire(&b, 60_000)).is_err());
        // Three tries, each followed by its 300 ms wait.
        assert_eq!(b.mono_ms() - before, 900);
    }
}
