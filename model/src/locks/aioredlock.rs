//! `redlock` preset `aioredlock@0.7.3`: aioredlock's `Aioredlock` (joanvila/aioredlock@v0.7.3,
//! PyPI's latest, on aioredis 1.3.1), a Redlock of its own whose every step differs from the
//! other presets', so it lives in a file of its own:
//!
//! - three scripts (`aioredlock/redis.py:33-65`), each sent with the leading blanks of every
//!   line removed (`:125`): its lock script *re-sets* a key that holds its own value and
//!   answers `error_reply('ERROR')` to another's; its unset script answers `OK` for a missing
//!   key; an instance loads all three with `SCRIPT LOAD` on its first use (`connect`,
//!   `:118-131, :168-170`) and again before the retried `EVALSHA` when one answered NOSCRIPT
//!   (`:203-205, :279-281`);
//! - a master's answer (`Instance.set_lock`/`unset_lock`, `:183-222, :263-298`): an error
//!   reply is `LockAcquiringError`, a connection error `LockRuntimeError`; aioredis has no
//!   command timeout, so a stalled master is waited for;
//! - one try (`Redis.set_lock`, `:328-357`): the lock script on every master at once, every
//!   reply awaited (`asyncio.gather`), granted on `N/2 + 1` successes, else the first
//!   `LockRuntimeError`, `LockAcquiringError` or a `LockError` is raised (`raise_error`,
//!   `:21-28`);
//! - `lock` (`aioredlock/algorithm.py:59-103, :122-149`): one `uuid4` per call, kept by every
//!   try; up to `retry_count` (3) tries, `uniform(retry_delay_min, retry_delay_max)` (0.1–0.3
//!   s) before each but the first; a try whose `lease − elapsed − (lease·0.01 + 2 ms) <= 0`
//!   failed ('Lock timeout'); when every try failed the last error is raised and the unset
//!   script runs on every master in the background (its failure suppressed);
//! - without a `lock_timeout` the lease is `internal_lock_timeout` (10 s) and a watchdog
//!   extends it every `0.6 ×` that (`_auto_extend`, `:105-120`) until `unlock` cancels it; an
//!   extension that fails unlocks, which cancels the watchdog running it before its unset
//!   script is sent (`:172-175, :189-192`): the watchdog ends;
//! - `extend` (`:151-175`): the lock's tries again with the same value (`RuntimeError` for a
//!   lock no longer valid); when they fail, `unlock` and the error;
//! - `unlock` (`:177-205`, `redis.py:388-419`): marks the lock invalid, cancels the watchdog,
//!   the unset script on every master, a quorum of successes or the error.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use async_trait::async_trait;

use super::redlock::Fanin;
use super::{
    CallError, Extension, Grant, Lease, LocalBoxFuture, LockEnv, LockScheme, Params, PresetInfo,
    RAISED, Release, TaskGuard, argv, script_command, script_sha, unit_random, uuid4,
};
use crate::redis::Reply;

pub(super) const PRESET: PresetInfo = PresetInfo {
    name: "aioredlock@0.7.3",
    summary: "aioredlock 0.7.3: its own scripts (SCRIPT LOAD first), every reply awaited, 3 tries 100-300 ms apart with one value, validity lease - elapsed - drift; a watchdog without lock_timeout",
    lease: Lease::Ms,
    // A library preset of Redlock with the validity check, as pottery's: `redlock:redsync`'s
    // row of the matrix stands for it.
    same_as: Some("redlock:redsync"),
};

/// `Instance.SET_LOCK_SCRIPT` (`aioredlock/redis.py:36-42`) as `_register_scripts` sends it
/// (`re.sub(r'^\s+', '', script, flags=re.M).strip()`, `:125`).
const SET_LOCK_SCRIPT: &str = "local identifier = redis.call('get', KEYS[1])\nif not identifier or identifier == ARGV[1] then\nreturn redis.call(\"set\", KEYS[1], ARGV[1], 'PX', ARGV[2])\nelse\nreturn redis.error_reply('ERROR')\nend";
/// `Instance.UNSET_LOCK_SCRIPT` (`:46-54`), as sent.
const UNSET_LOCK_SCRIPT: &str = "local identifier = redis.call('get', KEYS[1])\nif not identifier then\nreturn redis.status_reply('OK')\nelseif identifier == ARGV[1] then\nreturn redis.call(\"del\", KEYS[1])\nelse\nreturn redis.error_reply('ERROR')\nend";
/// `Instance.GET_LOCK_TTL_SCRIPT` (`:57-65`), as sent: loaded, never run by lock, extend or
/// unlock.
const GET_LOCK_TTL_SCRIPT: &str = "local identifier = redis.call('get', KEYS[1])\nif not identifier then\nreturn redis.error_reply('ERROR')\nelseif identifier == ARGV[1] then\nreturn redis.call(\"TTL\", KEYS[1])\nelse\nreturn redis.error_reply('ERROR')\nend";

/// The order `_register_scripts` loads them in (`:120-124`).
const SCRIPTS: [&str; 3] = [SET_LOCK_SCRIPT, UNSET_LOCK_SCRIPT, GET_LOCK_TTL_SCRIPT];

/// What one master's call raised (`Instance.set_lock`/`unset_lock`), or a try's error.
#[derive(Clone, Debug, PartialEq)]
enum Failure {
    /// `LockAcquiringError`: an error reply (the scripts' `ERROR`).
    Acquiring(String),
    /// `LockRuntimeError`: the connection failed.
    Runtime(String),
    /// `LockError`: a try without a quorum and no error of the two kinds, or 'Lock timeout'.
    Lock(String),
}

impl Failure {
    /// The caller's view: a `LockRuntimeError` is an exception of the connection, the others
    /// the library's no.
    fn detail(&self) -> String {
        match self {
            Failure::Acquiring(why) => format!("LockAcquiringError: {why}"),
            Failure::Runtime(why) => format!("{RAISED}LockRuntimeError: {why}"),
            Failure::Lock(why) => format!("LockError: {why}"),
        }
    }
}

/// What the lock manager keeps across calls.
struct Manager {
    key: String,
    /// `lock_timeout` (or `internal_lock_timeout` with the watchdog), sent as
    /// `int(lock_timeout × 1000)` ms (`redis.py:192`).
    lease_ms: u64,
    /// No `lock_timeout`: the lease is `internal_lock_timeout`, extended by the watchdog.
    watchdog: bool,
    retry_count: u64,
    retry_delay_min_ms: u64,
    retry_delay_max_ms: u64,
    /// `drift = lease_time × 0.01 + 0.002` (`algorithm.py:65`).
    drift_factor: f64,
    drift_const_ms: f64,
    /// Per master, whether its `Instance` holds the scripts' sha1s (set by the first
    /// `connect`, never cleared: `:168-170`).
    registered: RefCell<Vec<bool>>,
}

/// aioredlock's lock manager with its one lock.
pub struct Aioredlock {
    manager: Rc<Manager>,
    /// The lock's `id`, '' before the first `lock`.
    id: String,
    /// `Lock.valid`, shared with the watchdog.
    valid: Rc<Cell<bool>>,
    watchdog: Option<Box<dyn TaskGuard>>,
}

pub(super) fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    let key = params.key()?;
    let manager = Manager {
        key,
        lease_ms: params.positive("ttl_ms", 10_000)?,
        watchdog: params.bool("watchdog", false)?,
        retry_count: params.positive("retry_count", 3)?,
        retry_delay_min_ms: params.positive("retry_delay_min_ms", 100)?,
        retry_delay_max_ms: params.positive("retry_delay_max_ms", 300)?,
        drift_factor: params.f64("drift_factor", 0.01)?,
        drift_const_ms: params.f64("drift_const_ms", 2.0)?,
        registered: RefCell::new(Vec::new()),
    };
    if manager.retry_delay_max_ms < manager.retry_delay_min_ms {
        return Err(format!(
            "{}.retry_delay_max_ms: {} is below retry_delay_min_ms {}",
            params.field(),
            manager.retry_delay_max_ms,
            manager.retry_delay_min_ms
        ));
    }
    Ok(Box::new(Aioredlock {
        manager: Rc::new(manager),
        id: String::new(),
        valid: Rc::new(Cell::new(false)),
        watchdog: None,
    }))
}

fn failure_of(error: CallError) -> Failure {
    Failure::Runtime(format!("{error}"))
}

impl Manager {
    fn registered(&self, server: usize) -> bool {
        self.registered
            .borrow()
            .get(server)
            .copied()
            .unwrap_or(false)
    }

    /// `_register_scripts` (`:118-131`): the three loads on one connection, all sent; the
    /// sha1s kept only when all three answered.
    async fn register(&self, env: &Rc<dyn LockEnv>, server: usize) -> Result<(), Failure> {
        let mut first_failure = None;
        for script in SCRIPTS {
            let failure = match env.call(server, argv(&["SCRIPT", "LOAD", script])).await {
                Ok(Reply::Error(e)) => {
                    Some(Failure::Acquiring(String::from_utf8_lossy(&e).into_owned()))
                }
                Ok(_) => None,
                Err(e) => Some(failure_of(e)),
            };
            first_failure = first_failure.or(failure);
        }
        if let Some(failure) = first_failure {
            return Err(failure);
        }
        let mut registered = self.registered.borrow_mut();
        if registered.len() <= server {
            registered.resize(server + 1, false);
        }
        registered[server] = true;
        Ok(())
    }

    /// One `Instance` call of `script` (`set_lock`, `unset_lock`): the scripts loaded first when
    /// this instance never did, `EVALSHA`, and on NOSCRIPT the loads and `EVALSHA` again.
    async fn instance_call(
        &self,
        env: &Rc<dyn LockEnv>,
        server: usize,
        script: &'static str,
        args: &[&str],
    ) -> Result<(), Failure> {
        if !self.registered(server) {
            self.register(env, server).await?;
        }
        let call = script_command("EVALSHA", &script_sha(script), &[&self.key], args);
        loop {
            match env.call(server, call.clone()).await.map_err(failure_of)? {
                Reply::Error(e) if e.starts_with(b"NOSCRIPT") => {
                    self.register(env, server).await?;
                }
                Reply::Error(e) => {
                    return Err(Failure::Acquiring(String::from_utf8_lossy(&e).into_owned()));
                }
                _ => return Ok(()),
            }
        }
    }

    /// `Redis.set_lock` / `unset_lock` (`redis.py:328-357, :388-419`): `script` on every
    /// master at once, every reply awaited; a quorum of successes, else `raise_error`.
    async fn every_master(
        self: &Rc<Self>,
        env: &Rc<dyn LockEnv>,
        script: &'static str,
        args: Vec<String>,
        what: &str,
    ) -> Result<(), Failure> {
        let n = env.servers();
        let mut fanin = Fanin {
            futures: (0..n)
                .map(|s| {
                    let (this, env, args) = (self.clone(), env.clone(), args.clone());
                    let future: LocalBoxFuture<'static, Result<(), Failure>> =
                        Box::pin(async move {
                            let args: Vec<&str> = args.iter().map(String::as_str).collect();
                            this.instance_call(&env, s, script, &args).await
                        });
                    Some(future)
                })
                .collect(),
            results: (0..n).map(|_| None).collect(),
        };
        (&mut fanin).await;
        let results: Vec<Result<(), Failure>> = fanin.results.into_iter().flatten().collect();
        let successes = results.iter().filter(|r| r.is_ok()).count();
        // `>= int(len(self.instances) / 2) + 1`.
        if successes > n / 2 {
            return Ok(());
        }
        Err(raise_error(&results, what))
    }

    /// `Aioredlock._set_lock` (`algorithm.py:59-103`): the tries; when all failed, the
    /// background clean-up and the last error.
    async fn set_lock(
        self: &Rc<Self>,
        env: &Rc<dyn LockEnv>,
        id: &str,
        lease_ms: u64,
    ) -> Result<(), Failure> {
        let drift_ms = lease_ms as f64 * self.drift_factor + self.drift_const_ms;
        let mut error = Failure::Lock("Retry count less then one".into());
        for n in 0..self.retry_count {
            if n != 0 {
                let span = (self.retry_delay_max_ms - self.retry_delay_min_ms) as f64;
                let delay = self.retry_delay_min_ms as f64 + span * unit_random(env.as_ref());
                env.sleep_ms(delay as u64).await;
            }
            let started = env.mono_ms();
            let args = vec![id.to_string(), lease_ms.to_string()];
            let what = format!("Can not acquire the lock \"{}\"", self.key);
            if let Err(e) = self.every_master(env, SET_LOCK_SCRIPT, args, &what).await {
                error = e;
                continue;
            }
            let elapsed_ms = env.mono_ms().saturating_sub(started) as f64;
            if lease_ms as f64 - elapsed_ms - drift_ms <= 0.0 {
                error = Failure::Lock("Lock timeout".into());
                continue;
            }
            return Ok(());
        }
        let (this, task_env, id) = (self.clone(), env.clone(), id.to_string());
        let cleanup: LocalBoxFuture<'static, ()> = Box::pin(async move {
            let _ = this.unset_lock(&task_env, &id).await;
        });
        // `asyncio.ensure_future(cleanup())`: it runs on, nobody cancels it.
        let _ = env.spawn(cleanup);
        Err(error)
    }

    async fn unset_lock(self: &Rc<Self>, env: &Rc<dyn LockEnv>, id: &str) -> Result<(), Failure> {
        let args = vec![id.to_string()];
        self.every_master(env, UNSET_LOCK_SCRIPT, args, "Can not release the lock")
            .await
    }
}

/// `raise_error` (`redis.py:21-28`): the first `LockRuntimeError`, else the first
/// `LockAcquiringError`, else a `LockError`.
fn raise_error(results: &[Result<(), Failure>], what: &str) -> Failure {
    let errors: Vec<&Failure> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    let first = |pick: fn(&Failure) -> bool| errors.iter().find(|f| pick(f)).map(|f| (*f).clone());
    first(|f| matches!(f, Failure::Runtime(_)))
        .or_else(|| first(|f| matches!(f, Failure::Acquiring(_))))
        .unwrap_or_else(|| Failure::Lock(what.to_string()))
}

impl Aioredlock {
    /// `unlock` (`algorithm.py:177-205`).
    async fn unlock(&mut self, env: &Rc<dyn LockEnv>) -> Result<(), Failure> {
        self.valid.set(false);
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.cancel();
        }
        self.manager.unset_lock(env, &self.id).await
    }

    /// `_auto_extend` (`algorithm.py:105-120`): every `0.6 × internal_lock_timeout` the lock's
    /// tries again; a failed extension unlocks, whose first step cancels this very task.
    fn spawn_watchdog(&mut self, env: &Rc<dyn LockEnv>) {
        let (manager, task_env, id, valid) = (
            self.manager.clone(),
            env.clone(),
            self.id.clone(),
            self.valid.clone(),
        );
        let period_ms = (manager.lease_ms as f64 * 0.6) as u64;
        let task: LocalBoxFuture<'static, ()> = Box::pin(async move {
            loop {
                task_env.sleep_ms(period_ms).await;
                if manager
                    .set_lock(&task_env, &id, manager.lease_ms)
                    .await
                    .is_err()
                {
                    valid.set(false);
                    return;
                }
            }
        });
        self.watchdog = Some(env.spawn(task));
    }
}

#[async_trait(?Send)]
impl LockScheme for Aioredlock {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, _timeout_ms: u64) -> Result<Grant, String> {
        self.id = uuid4(env.as_ref());
        env.register_token(&self.id);
        let manager = self.manager.clone();
        manager
            .set_lock(env, &self.id, manager.lease_ms)
            .await
            .map_err(|f| f.detail())?;
        self.valid.set(true);
        if manager.watchdog {
            self.spawn_watchdog(env);
        }
        Ok(Grant {
            token: self.id.clone(),
            fence: None,
        })
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let servers = env.servers();
        match self.unlock(env).await {
            Ok(()) => Release {
                ok: true,
                detail: format!("unset on a quorum of {servers} masters"),
            },
            Err(f) => Release {
                ok: false,
                detail: f.detail(),
            },
        }
    }

    fn can_extend(&self) -> bool {
        true
    }

    async fn extend(&mut self, env: &Rc<dyn LockEnv>) -> Extension {
        if !self.valid.get() {
            return Extension {
                ok: false,
                detail: format!("{RAISED}RuntimeError: Lock is not valid"),
            };
        }
        let manager = self.manager.clone();
        match manager.set_lock(env, &self.id, manager.lease_ms).await {
            Ok(()) => Extension {
                ok: true,
                detail: format!("extended to {} ms", manager.lease_ms),
            },
            Err(f) => {
                // `with contextlib.suppress(LockError): await self.unlock(lock)`.
                let _ = self.unlock(env).await;
                Extension {
                    ok: false,
                    detail: f.detail(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::testing::{DirectEnv, block_on, masters, scheme_with};

    fn aioredlock(extra: serde_json::Value) -> Box<dyn LockScheme> {
        scheme_with(
            serde_json::json!({"name": "redlock", "preset": "aioredlock@0.7.3"}),
            extra,
        )
    }

    #[test]
    fn the_scripts_are_sent_as_register_scripts_strips_them() {
        // The sha1s of the texts aioredlock 0.7.3 sends, computed with its own `re.sub`.
        let shas: Vec<String> = SCRIPTS.iter().map(|s| script_sha(s).to_string()).collect();
        assert_eq!(
            shas,
            [
                "c75a9bf1538efcdb1f383acc3e273c5089d57e58",
                "241e4ca540a1cc4ec1f32d9eb9f879e607d7e6e5",
                "f908d3f43dbcabc68fc0c9ecaf1fa4a285ecdb0a"
            ]
        );
    }

    #[test]
    fn a_quorum_grants_and_the_release_skips_another_s_key() {
        let m = masters(3);
        m[2].command(&["SET", "lock", "other", "PX", "60000"]);
        let a = DirectEnv::multi(&m, "a", 1);
        let mut la = aioredlock(serde_json::json!({}));
        let grant = block_on(la.acquire(&a, 10_000)).unwrap();
        assert_eq!(grant.token.len(), 36, "a uuid4: {}", grant.token);
        assert!(block_on(la.release(&a)).ok, "2 of 3 unsets are a quorum");
        assert_eq!(
            m[2].command(&["GET", "lock"]),
            Reply::Bulk(b"other".to_vec())
        );
    }

    #[test]
    fn held_on_a_majority_fails_every_try_as_lock_acquiring_error() {
        let m = masters(3);
        for held in &m[..2] {
            held.command(&["SET", "lock", "other", "PX", "60000"]);
        }
        let a = DirectEnv::multi(&m, "a", 1);
        let mut la = aioredlock(serde_json::json!({"retry_count": 2}));
        let err = block_on(la.acquire(&a, 10_000)).unwrap_err();
        assert!(err.starts_with("LockAcquiringError: "), "{err}");
    }

    #[test]
    fn a_lease_below_the_drift_is_a_lock_timeout() {
        let m = masters(1);
        let a = DirectEnv::multi(&m, "a", 1);
        let mut la = aioredlock(serde_json::json!({"ttl_ms": 1, "retry_count": 1}));
        assert_eq!(
            block_on(la.acquire(&a, 10_000)).unwrap_err(),
            "LockError: Lock timeout"
        );
    }

    #[test]
    fn a_stolen_lock_is_not_extended_and_is_no_longer_valid() {
        let m = masters(1);
        let a = DirectEnv::multi(&m, "a", 1);
        let mut la = aioredlock(serde_json::json!({"retry_count": 1}));
        block_on(la.acquire(&a, 10_000)).unwrap();
        m[0].command(&["SET", "lock", "thief"]);
        let first = block_on(la.extend(&a));
        assert!(!first.ok && first.detail.starts_with("LockAcquiringError"));
        let second = block_on(la.extend(&a));
        assert_eq!(
            second.detail,
            format!("{RAISED}RuntimeError: Lock is not valid")
        );
    }
}
