//! `set-nx-px-del`: `SET key token NX PX ttl` to acquire (atomic, with a TTL), plain `DEL` to
//! release.
//!
//! Sources: seed 000 (《Redis实现分布式锁的几种方案》) 方案二 — `setIfAbsent(REDIS_LOCK, value, 10L,
//! TimeUnit.SECONDS)` with the unchanged `finally { redisTemplate.delete(REDIS_LOCK); }`; seed 004
//! (《大家所推崇的Redis分布式锁真的就万无一失吗》): "SET lockKey lockValue PX 10000 NX ... 解锁的时候还是
//! 使用DEL命令来解锁". Both go on to name the flaw (seed 000 方案三, seed 004): a holder that
//! outlives its 10 s TTL deletes the lock somebody else has taken since.
//!
//! Parameters: `key` (`lock`), `ttl_ms` (10 000, both seeds), `retry_delay_ms` (100; seed 000
//! fails at once and the workload retries), `preset`:
//! - `seeds` (default): as above.
//! - `spring-integration@5.1.1`: Spring Integration's `RedisLockRegistry` lock,
//!   spring-projects/spring-integration@v5.1.1.RELEASE `spring-integration-redis/src/main/java/
//!   org/springframework/integration/redis/util/RedisLockRegistry.java`: the key is
//!   `registryKey:path` (`:194-196`; the `key` parameter), the value the registry's `clientId`
//!   (`UUID.randomUUID()`, `:110`; one per scheme object, a process's registry), taken by
//!   `OBTAIN_LOCK_SCRIPT` (`:83-92`: `SET key clientId PX expireAfter` when free, `PEXPIRE`
//!   when already this client's, so a second hold of the same thread is granted) through Spring
//!   Data's script executor (`EVALSHA`, `EVAL` on `NOSCRIPT`); `tryLock(time)` (`:260-282`)
//!   sleeps 100 ms after a failed try while the wall clock is before its end, so one try
//!   follows the end; `expireAfter` 60 s (`:81`); `unlock()` (`:294-321`) lets a reentrant hold
//!   go locally and otherwise removes the key whoever holds it: `UNLINK` once `INFO server`
//!   showed Redis 4 or later (`:323-330`, `RedisUtils.isUnlinkAvailable`, `RedisUtils.java:59-71`),
//!   else `DEL`. A holder whose lock expired deletes the next holder's.
//! - `spring-integration@5.1.2`: PR 2661: `unlock()` first reads the key
//!   (`isAcquiredInThisProcess`, a `GET`) and, when it no longer holds this `clientId`, throws
//!   `IllegalStateException` ("Lock was released in the store due to expiration") instead of
//!   removing it (@v5.1.2.RELEASE `:306-310`); the rest of the lock is 5.1.1's (the diff of the
//!   file between the tags moves fields and makes `obtainLock` null-safe, `:283-295`).
//!
//! Both are checked against transcripts written from their sources at the tags
//! (`conformance/situations/spring-integration@5.1.*/`).
//!
//! What breaks it: a hold longer than the TTL (foreign release, mutual exclusion violated).

use std::rc::Rc;

use async_trait::async_trait;

use super::set::del_release;
use super::set_nx_px_lua::set_nx_px;
use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, PresetInfo, RAISED, Release, SchemeInfo,
    command, evalsha_or_eval, not_acquired, retry_until, undashed, uuid4,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "set-nx-px-del",
    summary: "SET k token NX PX ttl / plain DEL: a holder past its TTL deletes the next holder's lock",
    source: "seed 000 方案二; seed 004 (SET NX PX, DEL)",
    default_ttl_ms: 10_000,
    family: Family::SetNxPx,
    lease: Lease::Ms,
    in_all: true,
    presets: PRESETS,
    build,
};

/// Named presets besides the default (`seeds`): Spring Integration's `RedisLockRegistry` before
/// and after PR 2661. Not matrix rows: `set-nx-px-del` stands for the algorithm.
const PRESETS: &[PresetInfo] = &[
    PresetInfo {
        name: "spring-integration@5.1.1",
        summary: "Spring Integration 5.1.1 RedisLockRegistry: SET k clientId PX by script, 60 s, 100 ms polling; unlock UNLINKs whoever holds it",
        lease: Lease::Ms,
        same_as: Some("set-nx-px-del"),
    },
    PresetInfo {
        name: "spring-integration@5.1.2",
        summary: "Spring Integration 5.1.2: unlock GETs the key first and throws instead of removing another client's lock (PR 2661)",
        lease: Lease::Ms,
        same_as: Some("set-nx-px-del"),
    },
];

/// `RedisLockRegistry.OBTAIN_LOCK_SCRIPT` (5.1.x).
const SPRING_OBTAIN_LOCK: &str = "local lockClientId = redis.call('GET', KEYS[1])
if lockClientId == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return true
elseif not lockClientId then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return true
end
return false";

/// Whose code the lock follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    Seeds,
    /// `RedisLockRegistry` 5.1.1.
    Spring511,
    /// `RedisLockRegistry` 5.1.2.
    Spring512,
}

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    let preset = params.choice(
        "preset",
        &[
            "seeds",
            "spring-integration@5.1.1",
            "spring-integration@5.1.2",
        ],
        "seeds",
    )?;
    let flavour = match preset.as_str() {
        "spring-integration@5.1.1" => Flavour::Spring511,
        "spring-integration@5.1.2" => Flavour::Spring512,
        _ => Flavour::Seeds,
    };
    let default_ttl_ms = match flavour {
        Flavour::Seeds => INFO.default_ttl_ms,
        _ => 60_000,
    };
    Ok(Box::new(SetNxPxDel {
        key: params.key()?,
        ttl_ms: params.positive("ttl_ms", default_ttl_ms)?,
        retry_delay_ms: params.positive("retry_delay_ms", 100)?,
        flavour,
        client_id: None,
        unlink: None,
        holds: 0,
        held: false,
    }))
}

pub struct SetNxPxDel {
    key: String,
    ttl_ms: u64,
    retry_delay_ms: u64,
    flavour: Flavour,
    /// Spring: the registry's `clientId`, made at its first lock.
    client_id: Option<String>,
    /// Spring: whether `UNLINK` is available, once `INFO server` told.
    unlink: Option<bool>,
    /// Spring: the local `ReentrantLock`'s hold count.
    holds: u32,
    held: bool,
}

impl SetNxPxDel {
    /// `RedisLock.tryLock(time)` (`RedisLockRegistry.java:260-282`): the local `ReentrantLock`
    /// (held already by this thread: a second hold), then the obtain script (`obtainLock`,
    /// `:284-292`: `SET` when free, `PEXPIRE` when already this client's) until it answers true,
    /// sleeping 100 ms after a failed try while `System.currentTimeMillis() < expire`: the
    /// try after the last sleep comes even when the time is up by then. An exception escapes
    /// as `CannotAcquireLockException` (`:226-228`).
    async fn spring_try_lock(
        &mut self,
        env: &Rc<dyn LockEnv>,
        timeout_ms: u64,
    ) -> Result<Grant, String> {
        let client_id = self
            .client_id
            .get_or_insert_with(|| uuid4(env.as_ref()))
            .clone();
        env.register_token(&client_id);
        let (key, expire_after) = (self.key.clone(), self.ttl_ms.to_string());
        let expire = env.wall_ms() + timeout_ms as i64;
        let raised = |why: String| {
            format!("{RAISED}CannotAcquireLockException: Failed to lock mutex at {key}: {why}")
        };
        loop {
            let reply = evalsha_or_eval(
                env,
                0,
                SPRING_OBTAIN_LOCK,
                &[&key],
                &[&client_id, &expire_after],
            )
            .await;
            let acquired = match reply {
                Ok(Reply::Integer(n)) => n == 1,
                Ok(Reply::Nil) => false,
                Ok(other) => return Err(raised(format!("{other:?}"))),
                Err(e) => return Err(raised(e.to_string())),
            };
            if acquired {
                self.holds += 1;
                return Ok(Grant {
                    token: client_id,
                    fence: None,
                });
            }
            if env.wall_ms() >= expire {
                return Err(format!("tryLock returned false after {timeout_ms} ms"));
            }
            env.sleep_ms(self.retry_delay_ms).await;
        }
    }

    /// `RedisLock.unlock()`: 5.1.2 first checks the key still holds this client's id; then
    /// `removeLockKey()`, `UNLINK` on Redis 4 and later.
    async fn spring_unlock(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let client_id = self.client_id.clone().unwrap_or_default();
        if self.flavour == Flavour::Spring512 {
            match command(env, 0, &["GET", &self.key]).await {
                Ok(Reply::Bulk(v)) if v == client_id.as_bytes() => {}
                Ok(_) => {
                    return Release {
                        ok: false,
                        detail: format!(
                            "{RAISED}IllegalStateException: Lock was released in the store due to expiration. The integrity of data protected by this lock may have been compromised."
                        ),
                    };
                }
                Err(e) => {
                    return Release {
                        ok: false,
                        detail: format!("{RAISED}{e}"),
                    };
                }
            }
        }
        if self.unlink.is_none() {
            let info = command(env, 0, &["INFO", "server"]).await;
            // A bulk string (RESP2), or a verbatim string (RESP3).
            let major = match &info {
                Ok(Reply::Bulk(text) | Reply::Verbatim { text, .. }) => {
                    String::from_utf8_lossy(text)
                        .lines()
                        .find_map(|l| l.strip_prefix("redis_version:"))
                        .and_then(|v| v.split('.').next()?.trim().parse::<u32>().ok())
                }
                _ => None,
            };
            match major {
                Some(major) => self.unlink = Some(major >= 4),
                None => {
                    return Release {
                        ok: false,
                        detail: format!("INFO server answered {info:?}"),
                    };
                }
            }
        }
        let word = if self.unlink == Some(true) {
            "UNLINK"
        } else {
            "DEL"
        };
        match command(env, 0, &[word, &self.key]).await {
            Ok(Reply::Integer(n)) => Release {
                ok: true,
                detail: format!("{word} removed {n} key(s)"),
            },
            Ok(other) => Release {
                ok: false,
                detail: format!("unexpected reply {other:?}"),
            },
            Err(e) => Release {
                ok: false,
                detail: format!("{RAISED}{e}"),
            },
        }
    }
}

#[async_trait(?Send)]
impl LockScheme for SetNxPxDel {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        if self.flavour != Flavour::Seeds {
            return self.spring_try_lock(env, timeout_ms).await;
        }
        let token = undashed(&uuid4(env.as_ref()));
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
        self.held = true;
        Ok(grant)
    }

    /// Spring's `unlock()` (`RedisLockRegistry.java:294-321`): not held by this thread,
    /// `IllegalStateException` without a command; held more than once, only the local lock is
    /// let go; else the key is removed (5.1.2: after its check) and the local lock let go.
    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        if self.flavour != Flavour::Seeds {
            return match self.holds {
                0 => Release {
                    ok: false,
                    detail: format!(
                        "{RAISED}IllegalStateException: You do not own lock at {}",
                        self.key
                    ),
                },
                1 => {
                    self.holds = 0;
                    self.spring_unlock(env).await
                }
                _ => {
                    self.holds -= 1;
                    Release {
                        ok: true,
                        detail: "a reentrant hold let go (hold count > 1)".into(),
                    }
                }
            };
        }
        if !std::mem::take(&mut self.held) {
            return not_acquired();
        }
        del_release(env, &self.key).await
    }
}

#[cfg(test)]
mod tests {

    use crate::locks::testing::{block_on, two_clients};
    use crate::redis::Reply;

    #[test]
    fn a_late_release_deletes_the_next_holders_lock() {
        let (shared, (a, mut la), (b, mut lb)) =
            two_clients(serde_json::json!({"name": "set-nx-px-del", "ttl_ms": 1000}));
        block_on(la.acquire(&a, 100)).unwrap();
        assert!(block_on(lb.acquire(&b, 300)).is_err());
        shared.advance(1001);
        block_on(lb.acquire(&b, 100)).unwrap();
        block_on(la.release(&a));
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(0));
    }

    #[test]
    fn spring_5_1_1_unlinks_the_next_holders_lock_and_5_1_2_refuses() {
        for (preset, removed) in [
            ("spring-integration@5.1.1", true),
            ("spring-integration@5.1.2", false),
        ] {
            let (shared, (a, mut la), (b, mut lb)) = two_clients(
                serde_json::json!({"name": "set-nx-px-del", "preset": preset, "ttl_ms": 1000}),
            );
            let grant = block_on(la.acquire(&a, 100)).unwrap();
            assert_eq!(grant.token.len(), 36, "UUID.randomUUID().toString()");
            assert!(block_on(lb.acquire(&b, 300)).is_err());
            shared.advance(1001);
            block_on(lb.acquire(&b, 100)).unwrap();
            let release = block_on(la.release(&a));
            assert_eq!(release.ok, removed, "{preset}: {release:?}");
            assert_eq!(
                shared.command(&["EXISTS", "lock"]),
                Reply::Integer(i64::from(!removed)),
                "{preset}"
            );
        }
    }

    #[test]
    fn spring_try_lock_tries_once_past_its_time_and_holds_reentrantly() {
        use std::rc::Rc;

        use crate::locks::LockEnv;
        use crate::locks::testing::{DirectEnv, Shared, scheme};

        let shared = Shared::new();
        shared.command(&["SET", "lock", "someone-else"]);
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        let mut lock = scheme(
            serde_json::json!({"name": "set-nx-px-del", "preset": "spring-integration@5.1.1"}),
        );
        assert!(block_on(lock.acquire(&a_dyn, 250)).is_err());
        let tries = a
            .sent
            .borrow()
            .iter()
            .filter(|c| c.starts_with("EVALSHA"))
            .count();
        assert_eq!(
            tries, 4,
            "at 0, 100, 200 and 300 ms: the last past the 250 ms"
        );
        shared.command(&["DEL", "lock"]);
        block_on(lock.acquire(&a_dyn, 0)).unwrap();
        block_on(lock.acquire(&a_dyn, 0)).unwrap();
        assert!(block_on(lock.release(&a_dyn)).ok);
        assert_eq!(
            shared.command(&["EXISTS", "lock"]),
            Reply::Integer(1),
            "a reentrant hold let go"
        );
        assert!(block_on(lock.release(&a_dyn)).ok);
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(0));
        assert!(
            !block_on(lock.release(&a_dyn)).ok,
            "not held: IllegalStateException"
        );
    }
}
