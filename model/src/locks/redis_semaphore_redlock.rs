//! `redlock` preset `redis-semaphore@5.8.0`: the `RedlockMutex` of swarthy/redis-semaphore
//! 5.8.0 (node), a Redlock of its own: no validity check, every reply awaited, the library's
//! refresh timer over every master. Cited from the npm package `redis-semaphore@5.8.0`
//! (`lib/`, compiled from its `src/` at the tag; checked command for command by
//! `conformance/situations/redis-semaphore-redlock@5.8.0/`):
//!
//! - the key `mutex:<name>` (`lib/RedlockMutex.js:22`): the preset's `key` is the Redis key, so
//!   a library told `lock` is `"key": "mutex:lock"` here; one identifier per lock object,
//!   `crypto.randomUUID()` (`lib/Lock.js:86-89, :108-111`), kept by every attempt;
//! - the quorum `Math.round((N + 1) / 2)` (`lib/utils/redlock.js:5-7`), which is `N/2 + 1`;
//! - acquire (`lib/redlockMutex/acquire.js:12-37`): `end = Date.now() + acquireTimeout` (the
//!   wall clock); while `Date.now() < end` and `++attempt <= acquireAttemptsLimit`: `SET key id
//!   PX lockTimeout NX` on every master at once, every reply awaited (`Promise.all`), `OK`
//!   counts 1, anything else (a refusal, an error reply, a broken connection) 0 (`:20-24`);
//!   a quorum wins at once, with no validity check (`:25-27`); otherwise `delIfEqualLua` on
//!   every master, every reply awaited, errors ignored (`:30-31`), then `retryInterval` —
//!   after the last attempt too (`:32`); then `acquire` throws `TimeoutError`
//!   (`lib/Lock.js:122-128`), which a caller sees as a refusal. Defaults (`lib/misc.js:5-10`):
//!   lockTimeout 10 000 ms (`ttl_ms`), acquireTimeout 10 s (the operation's timeout),
//!   retryInterval 10 ms (`retry_delay_ms`), no attempts limit (`attempts_limit`, 0 = none);
//! - refresh (`lib/Lock.js:52-75, :112-115, :139-141`, `lib/redlockMutex/refresh.js:12-46`):
//!   a `setInterval` every `refreshInterval` (`refresh_interval_ms`, default
//!   `Math.round(0.8 × lockTimeout)`, `lib/Lock.js:45, :48`; 0 = none); a tick while a refresh
//!   is in flight is skipped. A refresh runs `expireIfEqualLua` on every master (errors count
//!   0); with a quorum it is refreshed, and the masters that answered 0 get `SET key id PX
//!   lockTimeout NX` (`:23-38`); without one `delIfEqualLua` runs on every master and the lock
//!   is lost (`:41-45`): `_acquired` false, the interval stopped, `onLockLost` called;
//! - release (`lib/Lock.js:144-154`, `lib/redlockMutex/release.js:10-15`): stops the
//!   interval, then only if the lock is still believed held `delIfEqualLua` on every master,
//!   every reply awaited and ignored: a release never says no;
//! - scripts by `EVALSHA`, on `NOSCRIPT` by `EVAL` of the text (`lib/utils/createEval.js:17-38`);
//!   ioredis 6.0.0 has no command timeout.

use std::cell::Cell;
use std::rc::Rc;

use async_trait::async_trait;

use super::redis_semaphore::{DEL_IF_EQUAL, EXPIRE_IF_EQUAL, Options, identifier_to_release};
use super::redlock::Fanin;
use super::{
    Grant, Lease, LocalBoxFuture, LockEnv, LockScheme, Params, PresetInfo, Release, TaskGuard,
    argv, evalsha_or_eval, uuid4,
};
use crate::redis::Reply;

pub(super) const PRESET: PresetInfo = PresetInfo {
    name: "redis-semaphore@5.8.0",
    summary: "redis-semaphore 5.8.0 RedlockMutex: SET PX NX on every master at once, a quorum wins (no validity check), otherwise delete-if-equal everywhere and 10 ms; a refresh every 0.8 ttl that re-sets the masters it lost",
    lease: Lease::Ms,
    // A Redlock without a validity check: `redlock-no-validity`'s row of the matrix stands for it.
    same_as: Some("redlock-no-validity"),
};

pub(super) fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(RedlockMutex {
        options: Options::parse(params)?,
        identifier: None,
        acquired: Rc::new(Cell::new(false)),
        refresh: None,
    }))
}

pub struct RedlockMutex {
    options: Options,
    /// Drawn once per lock object (its constructor), at its first acquire here.
    identifier: Option<String>,
    /// `_acquired`: set by a won acquire, cleared by a lost refresh and by release.
    acquired: Rc<Cell<bool>>,
    refresh: Option<Box<dyn TaskGuard>>,
}

/// What the library's calls to one master need.
#[derive(Clone)]
struct Call {
    env: Rc<dyn LockEnv>,
    key: String,
    identifier: String,
    ttl: String,
}

impl Call {
    /// `client.set(key, identifier, 'PX', lockTimeout, 'NX')`: 1 for `OK`, 0 for anything
    /// else, errors included (`.catch(() => 0)`).
    async fn set_nx(self, server: usize) -> u64 {
        let set = argv(&["SET", &self.key, &self.identifier, "PX", &self.ttl, "NX"]);
        match self.env.call(server, set).await {
            Ok(Reply::Status(ok)) if ok == "OK" => 1,
            _ => 0,
        }
    }

    /// `delIfEqualLua(client, [key, identifier]).catch(() => 0)`: its answer is not used.
    async fn del_if_equal(self, server: usize) -> u64 {
        let _ = evalsha_or_eval(
            &self.env,
            server,
            DEL_IF_EQUAL,
            &[&self.key],
            &[&self.identifier],
        )
        .await;
        0
    }

    /// `expireIfEqualLua(...).then(result => +result).catch(() => 0)`.
    async fn expire_if_equal(self, server: usize) -> u64 {
        let args = [self.identifier.as_str(), self.ttl.as_str()];
        match evalsha_or_eval(&self.env, server, EXPIRE_IF_EQUAL, &[&self.key], &args).await {
            Ok(Reply::Integer(n)) if n > 0 => n as u64,
            _ => 0,
        }
    }

    /// `Promise.all` of one call per master in `servers`, each master's result in order.
    async fn on_all<F>(&self, servers: &[usize], one: F) -> Vec<u64>
    where
        F: Fn(Call, usize) -> LocalBoxFuture<'static, u64>,
    {
        let mut fanin = Fanin {
            futures: servers
                .iter()
                .map(|&s| Some(one(self.clone(), s)))
                .collect(),
            results: servers.iter().map(|_| None).collect(),
        };
        (&mut fanin).await;
        fanin.results.into_iter().map(|r| r.unwrap_or(0)).collect()
    }
}

fn set_nx(call: Call, server: usize) -> LocalBoxFuture<'static, u64> {
    Box::pin(call.set_nx(server))
}

fn del_if_equal(call: Call, server: usize) -> LocalBoxFuture<'static, u64> {
    Box::pin(call.del_if_equal(server))
}

fn expire_if_equal(call: Call, server: usize) -> LocalBoxFuture<'static, u64> {
    Box::pin(call.expire_if_equal(server))
}

/// `Math.round((clientCount + 1) / 2)` (`lib/utils/redlock.js:5-7`).
fn quorum(masters: usize) -> u64 {
    ((masters as f64 + 1.0) / 2.0).round() as u64
}

/// `refreshRedlockMutex` (`lib/redlockMutex/refresh.js:12-46`): whether it was refreshed.
async fn refresh_once(call: &Call) -> bool {
    let every: Vec<usize> = (0..call.env.servers()).collect();
    let results = call.on_all(&every, expire_if_equal).await;
    if results.iter().sum::<u64>() >= quorum(every.len()) {
        let failed: Vec<usize> = every.iter().copied().filter(|&s| results[s] == 0).collect();
        if !failed.is_empty() {
            call.on_all(&failed, set_nx).await;
        }
        return true;
    }
    call.on_all(&every, del_if_equal).await;
    false
}

/// The refresh interval of a held lock (`_startRefresh` / `_processRefresh`).
fn start_refresh(call: Call, every_ms: u64, acquired: Rc<Cell<bool>>) -> Box<dyn TaskGuard> {
    let env = call.env.clone();
    env.spawn(Box::pin(async move {
        let start = call.env.mono_ms();
        let mut tick = 1;
        loop {
            // setInterval's ticks keep their schedule; those that fell while a refresh was
            // in flight were skipped (`_refreshing`).
            let now = call.env.mono_ms();
            while start + tick * every_ms <= now {
                tick += 1;
            }
            call.env.sleep_ms(start + tick * every_ms - now).await;
            if !refresh_once(&call).await {
                // Lost (`_acquired = false`, `stopRefresh()`, `onLockLost`); or released
                // meanwhile, which already stopped the interval.
                acquired.set(false);
                return;
            }
        }
    }))
}

#[async_trait(?Send)]
impl LockScheme for RedlockMutex {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let identifier = self
            .identifier
            .get_or_insert_with(|| uuid4(env.as_ref()))
            .clone();
        env.register_token(&identifier);
        let call = Call {
            env: env.clone(),
            key: self.options.key.clone(),
            identifier: identifier.clone(),
            ttl: self.options.lock_timeout_ms.to_string(),
        };
        let every: Vec<usize> = (0..env.servers()).collect();
        let end = env.wall_ms() + timeout_ms as i64;
        let mut attempt = 0;
        while env.wall_ms() < end && {
            attempt += 1;
            self.options
                .attempts_limit
                .is_none_or(|limit| attempt <= limit)
        } {
            let granted: u64 = call.on_all(&every, set_nx).await.iter().sum();
            if granted >= quorum(every.len()) {
                self.acquired.set(true);
                if self.options.refresh_interval_ms > 0 {
                    self.refresh = Some(start_refresh(
                        call,
                        self.options.refresh_interval_ms,
                        self.acquired.clone(),
                    ));
                }
                return Ok(Grant {
                    token: identifier,
                    fence: None,
                });
            }
            call.on_all(&every, del_if_equal).await;
            env.sleep_ms(self.options.retry_interval_ms).await;
        }
        Err(format!(
            "TimeoutError: Acquire redlock-mutex {} timeout",
            self.options.key
        ))
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let identifier =
            match identifier_to_release(&mut self.refresh, &self.identifier, &self.acquired) {
                Ok(identifier) => identifier,
                Err(release) => return release,
            };
        let call = Call {
            env: env.clone(),
            key: self.options.key.clone(),
            identifier,
            ttl: self.options.lock_timeout_ms.to_string(),
        };
        let every: Vec<usize> = (0..env.servers()).collect();
        call.on_all(&every, del_if_equal).await;
        Release {
            ok: true,
            detail: "released (delIfEqual on every master, answers ignored)".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use serde_json::json;

    use crate::locks::LockEnv;
    use crate::locks::testing::{DirectEnv, block_on, masters, pass, scheme};
    use crate::redis::Reply;

    fn preset(extra: serde_json::Value) -> Box<dyn crate::locks::LockScheme> {
        let mut spec =
            json!({"name": "redlock", "preset": "redis-semaphore@5.8.0", "key": "mutex:lock"});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        scheme(spec)
    }

    #[test]
    fn a_quorum_wins_and_release_deletes_everywhere() {
        let m = masters(3);
        m[1].command(&["SET", "mutex:lock", "other", "PX", "60000"]);
        let a = DirectEnv::concrete_multi(&m, "a", 1);
        let env: Rc<dyn LockEnv> = a.clone();
        let mut la = preset(json!({}));
        block_on(la.acquire(&env, 1000)).unwrap();
        assert!(block_on(la.release(&env)).ok);
        for (i, master) in m.iter().enumerate() {
            let left = master.command(&["GET", "mutex:lock"]);
            let expected = if i == 1 {
                Reply::Bulk(b"other".to_vec())
            } else {
                Reply::Nil
            };
            assert_eq!(left, expected, "master {i}");
        }
    }

    #[test]
    fn without_a_quorum_every_attempt_unlocks_and_waits_until_the_timeout() {
        let m = masters(3);
        for master in &m[..2] {
            master.command(&["SET", "mutex:lock", "other", "PX", "60000"]);
        }
        let a = DirectEnv::concrete_multi(&m, "a", 1);
        let env: Rc<dyn LockEnv> = a.clone();
        let mut la = preset(json!({"retry_delay_ms": 100, "attempts_limit": 3}));
        let refused = block_on(la.acquire(&env, 60_000)).unwrap_err();
        assert!(refused.starts_with("TimeoutError"), "{refused}");
        assert_eq!(m[2].command(&["EXISTS", "mutex:lock"]), Reply::Integer(0));
        let sets = a
            .sent
            .borrow()
            .iter()
            .filter(|c| c.starts_with("SET "))
            .count();
        assert_eq!(sets, 3 * 3, "3 attempts on 3 masters");
    }

    #[test]
    fn a_refresh_with_a_quorum_re_sets_the_master_it_lost() {
        let m = masters(3);
        let a = DirectEnv::concrete_multi(&m, "a", 1);
        let env: Rc<dyn LockEnv> = a.clone();
        let mut la = preset(json!({"ttl_ms": 1000}));
        block_on(la.acquire(&env, 1000)).unwrap();
        m[2].command(&["DEL", "mutex:lock"]);
        // The refresh at 800 ms: two of three masters extend, the third is re-set.
        pass(&m[0], 850);
        assert!(matches!(m[2].command(&["PTTL", "mutex:lock"]), Reply::Integer(t) if t > 900));
        assert!(block_on(la.release(&env)).ok);
    }
}
