//! `redlock` preset `pottery@3.0.1`: pottery's `Redlock` (brainix/pottery@v3.0.1,
//! `pottery/redlock.py`), a Redlock of its own over one redis-py 8 client per master. It is a
//! `redlock` preset (the algorithm of redis.io's distlock) whose every step differs from the
//! other presets', so it lives in a file of its own:
//!
//! - the Redis key is `redlock:<name>` (`pottery/base.py:320-322`, `_KEY_PREFIX` `redlock.py:228`):
//!   the scheme's `key` is that Redis key;
//! - one try (`_acquire_masters`, `:318-353`): a new `uuid.uuid4()` (`:322`), `SET key uuid NX
//!   PX ttl` on every master at once, each in a thread (`:278-285, :325-329`); as soon as more
//!   than half granted *and* the validity `ttl − (ttl·0.01 + 2 ms) − elapsed` (`:315-316,
//!   :343-348`, `ContextTimer`'s monotonic `perf_counter`) is positive, the try has succeeded and
//!   the other replies are not awaited (`BailOutExecutor`, `pottery/executor.py:30-63`);
//!   otherwise every reply is awaited, the release runs (its failure suppressed) and the try
//!   fails (`:350-353`);
//! - `acquire(blocking=True, timeout)` (`:409-432`): tries while the time since the call is below
//!   `timeout` (checked *before* each try), sleeping `random.uniform(0, 0.2)` s after each failed
//!   one; `blocking=False` tries once;
//! - `release` (`:555-599`): its release script on every master, done as soon as more than half
//!   deleted, else `ReleaseUnlockedLock`; it uses the value of the last try, which pottery never
//!   clears (a second release sends the scripts again);
//! - `extend` (`:503-553`): at most `num_extensions` (3) per acquire (`TooManyExtensions`, no
//!   command), its extend script (`PEXPIRE` while the value is ours) on every master, done as
//!   soon as more than half extended, else `ExtendUnlockedLock`; no validity check;
//! - a Redis error of a master is a missing vote; with `raise_on_redis_errors` more than half of
//!   them raise `QuorumIsImpossible` (`pottery/base.py:324-336`);
//! - every command goes through redis-py 8's client: its default retries of a timed-out command
//!   (`set_nx_px_lua::redis_py_call`), scripts by `EVALSHA`, `SCRIPT LOAD` and `EVALSHA` again on
//!   `NOSCRIPT` (`set_nx_px_lua::redis_py_script`).

use std::rc::Rc;

use async_trait::async_trait;

use super::redlock::{Fanin, FaninUntil};
use super::set_nx_px_lua::{redis_py_call, redis_py_script};
use super::{
    Extension, Grant, Lease, LocalBoxFuture, LockEnv, LockScheme, Params, PresetInfo, RAISED,
    Release, argv, uuid4,
};
use crate::redis::Reply;

pub(super) const PRESET: PresetInfo = PresetInfo {
    name: "pottery@3.0.1",
    summary: "pottery 3.0.1 Redlock: SET NX PX on every master at once, done at a quorum with validity > 0; uniform(0, 200 ms) between tries; 3 extensions",
    lease: Lease::Ms,
    same_as: Some("redlock:redsync"),
};

/// `Scripts.__register_extend_script` (`pottery/redlock.py:128-134`), byte for byte.
const EXTEND_SCRIPT: &str = "\n                if redis.call('get', KEYS[1]) == ARGV[1] then\n                    return redis.call('pexpire', KEYS[1], ARGV[2])\n                else\n                    return 0\n                end\n            ";
/// `Scripts.__register_release_script` (`pottery/redlock.py:142-148`), byte for byte.
const RELEASE_SCRIPT: &str = "\n                if redis.call('get', KEYS[1]) == ARGV[1] then\n                    return redis.call('del', KEYS[1])\n                else\n                    return 0\n                end\n            ";

/// pottery's `Redlock`.
#[derive(Clone, Debug)]
pub struct Pottery {
    key: String,
    /// `auto_release_time` (10 s, `:229`), sent as `PX int(auto_release_time × 1000)`.
    ttl_ms: u64,
    /// `_CLOCK_DRIFT_FACTOR` 0.01 and the constant 2 ms (`:230, :315-316`).
    drift_factor: f64,
    drift_const_ms: u64,
    /// The upper end of `random.uniform(0, _RETRY_DELAY)` (0.2 s, `:231, :423`).
    retry_delay_ms: u64,
    /// `num_extensions` (3, `:232`).
    num_extensions: u64,
    /// `acquire(blocking=...)`.
    blocking: bool,
    validity_check: bool,
    raise_on_redis_errors: bool,
    /// `_uuid`: the value of the last try ('' before any), kept after a release.
    uuid: String,
    /// `_extension_num`, reset by every try.
    extension_num: u64,
}

pub(super) fn build(params: &mut Params, no_validity: bool) -> Result<Box<dyn LockScheme>, String> {
    let key = params.key()?;
    Ok(Box::new(Pottery {
        key,
        ttl_ms: params.positive("ttl_ms", 10_000)?,
        drift_factor: params.f64("drift_factor", 0.01)?,
        drift_const_ms: params.u64("drift_const_ms", 2)?,
        retry_delay_ms: params.u64("retry_delay_ms", 200)?,
        num_extensions: params.u64("num_extensions", 3)?,
        blocking: params.bool("blocking", true)?,
        validity_check: !no_validity && params.bool("validity_check", true)?,
        raise_on_redis_errors: params.bool("raise_on_redis_errors", false)?,
        uuid: String::new(),
        extension_num: 0,
    }))
}

/// One master's answer: `Ok(true)` a vote for, `Ok(false)` against, `Err` a Redis error
/// (redis-py raised: a timeout, a dropped connection, an error reply).
type Vote = Result<bool, String>;

/// Runs `make` on every master at once; done as soon as `decided` holds for the votes so far
/// (the rest go on in the background, as `BailOutExecutor` leaves them), else when every master
/// answered.
async fn scatter(
    env: &Rc<dyn LockEnv>,
    make: impl Fn(usize) -> LocalBoxFuture<'static, Vote>,
    decided: impl Fn(usize) -> bool + Unpin,
) -> Vec<Option<Vote>> {
    let n = env.servers();
    let mut fanin = Fanin {
        futures: (0..n).map(|s| Some(make(s))).collect(),
        results: (0..n).map(|_| None).collect(),
    };
    FaninUntil {
        fanin: &mut fanin,
        decided: |results: &[Option<Vote>]| {
            decided(
                results
                    .iter()
                    .filter(|r| matches!(r, Some(Ok(true))))
                    .count(),
            )
        },
    }
    .await;
    for future in fanin.futures.into_iter().flatten() {
        let task: LocalBoxFuture<'static, ()> = Box::pin(async move {
            let _ = future.await;
        });
        let _ = env.spawn(task);
    }
    fanin.results
}

fn votes_for(results: &[Option<Vote>]) -> usize {
    results
        .iter()
        .filter(|r| matches!(r, Some(Ok(true))))
        .count()
}

fn redis_errors(results: &[Option<Vote>]) -> usize {
    results.iter().filter(|r| matches!(r, Some(Err(_)))).count()
}

/// A reply as redis-py hands it over: an error reply is raised (`ResponseError`).
fn vote(reply: Result<Reply, super::CallError>, yes: impl Fn(&Reply) -> bool) -> Vote {
    match reply {
        Ok(Reply::Error(e)) => Err(String::from_utf8_lossy(&e).into_owned()),
        Ok(reply) => Ok(yes(&reply)),
        Err(e) => Err(format!("{e:?}")),
    }
}

impl Pottery {
    /// `_check_enough_masters_up` (`pottery/base.py:324-336`).
    fn check_enough_masters_up(&self, errors: usize, servers: usize) -> Result<(), String> {
        if self.raise_on_redis_errors && errors > servers / 2 {
            return Err(format!(
                "{RAISED}QuorumIsImpossible: {errors}/{servers} masters raised Redis errors"
            ));
        }
        Ok(())
    }

    /// Whether a lease of `ttl_ms` taken `elapsed_ms` ago is still valid (`:343-348`).
    fn valid(&self, elapsed_ms: u64) -> bool {
        let drift_ms = self.ttl_ms as f64 * self.drift_factor + self.drift_const_ms as f64;
        !self.validity_check || self.ttl_ms as f64 - drift_ms - elapsed_ms as f64 > 0.0
    }

    /// `_acquire_masters`: one try; `Ok(true)` when it holds the lock.
    async fn try_once(&mut self, env: &Rc<dyn LockEnv>) -> Result<bool, String> {
        self.uuid = uuid4(env.as_ref());
        env.register_token(&self.uuid);
        self.extension_num = 0;
        let servers = env.servers();
        let started = env.mono_ms();
        let (key, uuid, ttl) = (self.key.clone(), self.uuid.clone(), self.ttl_ms.to_string());
        let this = self.clone();
        let clock = env.clone();
        let results = scatter(
            env,
            |s| {
                let (env, key, uuid, ttl) = (env.clone(), key.clone(), uuid.clone(), ttl.clone());
                Box::pin(async move {
                    // redis-py 8.1.0 `set(name, value, px=, nx=True)` puts `NX` before the
                    // expiry (`redis/commands/core.py:4431-4453`): `SET k v NX PX ms`.
                    let set = argv(&["SET", &key, &uuid, "NX", "PX", &ttl]);
                    vote(
                        redis_py_call(&env, s, set).await,
                        |r| matches!(r, Reply::Status(s) if s == "OK"),
                    )
                })
            },
            move |granted| {
                granted > servers / 2 && this.valid(clock.mono_ms().saturating_sub(started))
            },
        )
        .await;
        let granted = votes_for(&results);
        let elapsed = env.mono_ms().saturating_sub(started);
        if granted > servers / 2 && self.valid(elapsed) {
            return Ok(true);
        }
        // Not decided early: `as_completed` waited for every master. The release's own
        // failure (`ReleaseUnlockedLock`) is suppressed (`:350-351`).
        self.release_masters(env).await?;
        self.check_enough_masters_up(redis_errors(&results), servers)?;
        Ok(false)
    }

    /// The release script on every master; `(deleted, redis errors)` (`:573-594`).
    async fn release_masters(&self, env: &Rc<dyn LockEnv>) -> Result<usize, String> {
        let servers = env.servers();
        let (key, uuid) = (self.key.clone(), self.uuid.clone());
        let results = scatter(
            env,
            |s| {
                let (env, key, uuid) = (env.clone(), key.clone(), uuid.clone());
                Box::pin(async move {
                    let reply = redis_py_script(&env, s, RELEASE_SCRIPT, &[&key], &[&uuid]).await;
                    vote(reply, |r| matches!(r, Reply::Integer(n) if *n > 0))
                })
            },
            move |deleted| deleted > servers / 2,
        )
        .await;
        let deleted = votes_for(&results);
        if deleted <= servers / 2 {
            self.check_enough_masters_up(redis_errors(&results), servers)?;
        }
        Ok(deleted)
    }
}

#[async_trait(?Send)]
impl LockScheme for Pottery {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let started = env.mono_ms();
        let mut tries = 0;
        loop {
            // `while timeout == -1 or timer.elapsed() / 1000 < timeout` (`:417`).
            if self.blocking && env.mono_ms().saturating_sub(started) >= timeout_ms {
                return Err(format!(
                    "acquire returned False: not acquired within {timeout_ms} ms ({tries} tries)"
                ));
            }
            tries += 1;
            if self.try_once(env).await? {
                return Ok(Grant {
                    token: self.uuid.clone(),
                    fence: None,
                });
            }
            if !self.blocking {
                return Err("acquire returned False: no quorum (blocking=False: one try)".into());
            }
            // `random.uniform(0, self._RETRY_DELAY)` (`:423-424`).
            let unit = (env.random_u64() >> 11) as f64 / (1u64 << 53) as f64;
            env.sleep_ms((unit * self.retry_delay_ms as f64) as u64)
                .await;
        }
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let servers = env.servers();
        match self.release_masters(env).await {
            Err(raised) => Release {
                ok: false,
                detail: raised,
            },
            Ok(deleted) if deleted > servers / 2 => Release {
                ok: true,
                detail: format!("deleted on {deleted}/{servers} masters"),
            },
            Ok(deleted) => Release {
                ok: false,
                detail: format!("ReleaseUnlockedLock: deleted on {deleted}/{servers} masters"),
            },
        }
    }

    fn can_extend(&self) -> bool {
        true
    }

    async fn extend(&mut self, env: &Rc<dyn LockEnv>) -> Extension {
        if self.extension_num >= self.num_extensions {
            return Extension {
                ok: false,
                detail: format!(
                    "TooManyExtensions: {} of {} already",
                    self.extension_num, self.num_extensions
                ),
            };
        }
        let servers = env.servers();
        let (key, uuid, ttl) = (self.key.clone(), self.uuid.clone(), self.ttl_ms.to_string());
        let results = scatter(
            env,
            |s| {
                let (env, key, uuid, ttl) = (env.clone(), key.clone(), uuid.clone(), ttl.clone());
                Box::pin(async move {
                    let reply =
                        redis_py_script(&env, s, EXTEND_SCRIPT, &[&key], &[&uuid, &ttl]).await;
                    vote(reply, |r| matches!(r, Reply::Integer(n) if *n > 0))
                })
            },
            move |extended| extended > servers / 2,
        )
        .await;
        let extended = votes_for(&results);
        if extended > servers / 2 {
            self.extension_num += 1;
            return Extension {
                ok: true,
                detail: format!("extended on {extended}/{servers} masters"),
            };
        }
        if let Err(raised) = self.check_enough_masters_up(redis_errors(&results), servers) {
            return Extension {
                ok: false,
                detail: raised,
            };
        }
        Extension {
            ok: false,
            detail: format!("ExtendUnlockedLock: extended on {extended}/{servers} masters"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::testing::{DirectEnv, Shared, block_on, masters, scheme_with};

    fn pottery(extra: serde_json::Value) -> Box<dyn LockScheme> {
        scheme_with(
            serde_json::json!({"name": "redlock", "preset": "pottery@3.0.1"}),
            extra,
        )
    }

    fn holders(masters: &[Rc<Shared>], key: &str) -> usize {
        masters
            .iter()
            .filter(|m| m.command(&["GET", key]) != Reply::Nil)
            .count()
    }

    #[test]
    fn a_quorum_grants_and_the_key_carries_pottery_s_prefix() {
        let m = masters(3);
        m[2].command(&["SET", "redlock:lock", "other", "PX", "60000"]);
        let a = DirectEnv::multi(&m, "a", 1);
        let mut la = pottery(serde_json::json!({"key": "redlock:lock"}));
        let grant = block_on(la.acquire(&a, 10_000)).unwrap();
        assert_eq!(grant.token.len(), 36, "a uuid4: {}", grant.token);
        assert!(block_on(la.release(&a)).ok, "2 of 3 deletions are a quorum");
        assert_eq!(holders(&m, "redlock:lock"), 1, "the other value stays");
    }

    #[test]
    fn a_refused_try_releases_and_non_blocking_tries_once() {
        let m = masters(3);
        for held in &m[..2] {
            held.command(&["SET", "lock", "other", "PX", "60000"]);
        }
        let a = DirectEnv::multi(&m, "a", 1);
        let mut la = pottery(serde_json::json!({"blocking": false}));
        let err = block_on(la.acquire(&a, 10_000)).unwrap_err();
        assert!(err.contains("one try"), "{err}");
        assert_eq!(m[2].command(&["GET", "lock"]), Reply::Nil, "unlocked again");
        // pottery keeps the value of the last try: a release sends its scripts and is refused.
        let release = block_on(la.release(&a));
        assert!(!release.ok && release.detail.starts_with("ReleaseUnlockedLock"));
    }

    #[test]
    fn a_lease_too_short_for_the_drift_is_never_valid() {
        // 1 ms lease: 1 − (0.01 + 2) < 0 whatever the elapsed time; `validity_check: false` takes it.
        let m = masters(3);
        let a = DirectEnv::multi(&m, "a", 1);
        let mut la = pottery(serde_json::json!({"ttl_ms": 1, "blocking": false}));
        assert!(block_on(la.acquire(&a, 10_000)).is_err());
        let mut lb =
            pottery(serde_json::json!({"ttl_ms": 1, "blocking": false, "validity_check": false}));
        assert!(block_on(lb.acquire(&a, 10_000)).is_ok());
    }

    #[test]
    fn extensions_are_counted_and_refused_once_stolen() {
        let m = masters(3);
        let a = DirectEnv::multi(&m, "a", 1);
        let mut la = pottery(serde_json::json!({"num_extensions": 1}));
        block_on(la.acquire(&a, 10_000)).unwrap();
        assert!(block_on(la.extend(&a)).ok);
        let again = block_on(la.extend(&a));
        assert!(
            !again.ok && again.detail.starts_with("TooManyExtensions"),
            "{again:?}"
        );
        assert!(block_on(la.release(&a)).ok);
        let mut lb = pottery(serde_json::json!({}));
        block_on(lb.acquire(&a, 10_000)).unwrap();
        for stolen in &m[..2] {
            stolen.command(&["SET", "lock", "thief"]);
        }
        let refused = block_on(lb.extend(&a));
        assert!(
            !refused.ok && refused.detail.starts_with("ExtendUnlockedLock"),
            "{refused:?}"
        );
    }

    #[test]
    fn unknown_settings_of_other_presets_are_refused() {
        let json =
            serde_json::json!({"name": "redlock", "preset": "pottery@3.0.1", "retry_count": 3});
        let err = crate::locks::SchemeSpec::from_json(&json, "scheme")
            .and_then(|s| s.build("scheme").map(|_| ()))
            .unwrap_err();
        assert!(err.contains("retry_count"), "{err}");
    }
}
