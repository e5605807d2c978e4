//! `setnx-expire`: `SETNX key token`, then `EXPIRE key seconds` as a second command; `DEL` to
//! release.
//!
//! Sources: seed 001 (《Redis实现分布式锁》) 错误示例1 — `if (jedis.setnx(lockKey, requestId) == 1)
//! { /* 若在这里程序突然崩溃, 则无法设置过期时间, 将发生死锁 */ jedis.expire(lockKey, expireTime); }`;
//! seed 002 (《通过 redis + lua 实现分布式事务锁》), "SETNX key value / EXPIRE key seconds", which adds
//! that a SETNX that times out is followed by a GET: "比较返回的值与自身持有的标识符是否相同";
//! seed 004: "// STEP 1 SETNX key value ... // STEP 2 EXPIRE key expireTime". All three name the
//! flaw: the two commands are not atomic, so a crash between them leaves a key without TTL.
//!
//! The client acquires once SETNX answered 1 (or, after a SETNX that timed out, once a GET shows
//! its own token), sends EXPIRE, and holds whatever EXPIRE answers (seed 001 ignores it).
//!
//! Parameters: `key` (`lock`), `ttl_ms` (whole seconds, default 10 000; the seeds give no figure),
//! `retry_delay_ms` (100), `preset`:
//! - `seeds` (default): as above.
//! - `laravel@5.7`: Laravel's cache lock (`Cache::lock($name, $seconds)->block($wait)`) on its
//!   Redis store, laravel/framework@v5.7.28 `src/Illuminate/Cache/RedisLock.php:34-53`: `SETNX
//!   name 1` (phpredis's answer cast to int, `Redis/Connections/PhpRedisConnection.php:92-95`),
//!   then `EXPIRE name seconds` when it answered 1 and `seconds > 0`; every process writes the
//!   same value `1`, so it names nobody (not registered as an owner token); `release()` is
//!   `DEL name` whoever holds it and returns nothing; `block()` (`Lock.php:82-101`) sleeps
//!   250 ms after each failed try and gives up when the wall clock, in whole seconds
//!   (`Support/InteractsWithTime.php:60-63`), is `$wait` past the second it began in: no try
//!   after the last sleep, `LockTimeoutException`; a Redis error escapes. `Cache::lock`'s
//!   default `$seconds` is 0 (`RedisStore.php:175-178`), no `EXPIRE` at all: without `ttl_ms`
//!   the preset sets none. A holder whose release comes after its lock expired deletes the
//!   next holder's lock, and a third process gets in (laravel/framework#26213).
//! - `laravel@5.8`: laravel/framework@v5.8.0 (PR 26645): the value is the lock's owner,
//!   `Str::random()` (16 letters and digits, `Lock.php:43-52`; a new `Cache::lock()` object,
//!   so a new owner, per acquisition), and `release()` runs `LuaScripts::releaseLock()`
//!   (`LuaScripts.php:15-24`, the compare-and-delete of redis.io) by `EVAL`
//!   (`RedisLock.php:51-54`), still returning nothing: a release that deleted nothing looks
//!   like one that did. Acquire stays so up to v6.11.0 (release returns the script's answer
//!   from v6.0.0, dca45985ab): a process that dies (or loses Redis) between `SETNX` and
//!   `EXPIRE` leaves a key without TTL (issue 31166).
//! - `laravel@6.12`: laravel/framework@v6.12.0 `RedisLock.php:35-42` (PR 31168, 8683a3d): with
//!   seconds given, one `SET name owner EX seconds NX` (phpredis 5.1.1 orders the options so,
//!   `redis_commands.c:1369-1372`); without, `SETNX` as before; `release()` returns
//!   `(bool)` the script's answer (`:49-52`).
//!
//! The three are checked against transcripts written from their sources at the tags
//! (`conformance/situations/laravel@*/`): the key is the store's prefix and the name (an empty
//! prefix there), block() begins at a whole second of the model's clock.
//!
//! What breaks it: a crash between SETNX and EXPIRE — the key never expires (liveness `stuck`);
//! with `laravel@5.7`, a release delayed past the lock's seconds deletes the next holder's lock.

use std::rc::Rc;

use async_trait::async_trait;

use super::set::{del_release, told_released};
use super::set_nx_px_lua::compare_and_delete;
use super::setnx_del::setnx;
use super::{
    COMPARE_AND_DELETE, CallError, Family, Grant, Lease, LockEnv, LockScheme, Params, PresetInfo,
    RAISED, Release, SchemeInfo, command, eval, not_acquired, retry_until, uuid4, whole_seconds,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "setnx-expire",
    summary: "SETNX k token then EXPIRE k ttl as a second command / DEL: a crash in between leaves the key for ever",
    source: "seed 001 错误示例1; seed 002 (SETNX + EXPIRE, GET after a timeout); seed 004 (STEP 1/STEP 2)",
    default_ttl_ms: 10_000,
    family: Family::TwoStep,
    lease: Lease::Seconds,
    in_all: true,
    presets: PRESETS,
    build,
};

/// Named presets besides the default (`seeds`): Laravel's cache lock before and after its
/// owner tokens. Neither is a matrix row: `setnx-expire` stands for the algorithm.
const PRESETS: &[PresetInfo] = &[
    PresetInfo {
        name: "laravel@5.7",
        summary: "Laravel 5.7 cache lock: SETNX k 1 then EXPIRE k seconds, release DEL, 250 ms polling (issue 26213)",
        lease: Lease::None,
        same_as: Some("setnx-expire"),
    },
    PresetInfo {
        name: "laravel@5.8",
        summary: "Laravel 5.8-6.11 cache lock: SETNX k <random owner> then EXPIRE, release by a compare-and-delete script (PR 26645)",
        lease: Lease::None,
        same_as: Some("setnx-expire"),
    },
    PresetInfo {
        name: "laravel@6.12",
        summary: "Laravel 6.12 cache lock: one SET k <owner> EX seconds NX, release by the compare-and-delete script (issue 31166)",
        lease: Lease::None,
        same_as: Some("set-nx-px-lua"),
    },
];

/// Whose code the lock follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    /// Seeds 001, 002, 004.
    Seeds,
    /// Laravel 5.7: the value `1`, a plain `DEL`.
    Laravel57,
    /// Laravel 5.8 to 6.11: a random owner, a compare-and-delete.
    Laravel58,
    /// Laravel 6.12: as 5.8, acquired by one `SET ... EX ... NX`.
    Laravel612,
}

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    let preset = params.choice(
        "preset",
        &["seeds", "laravel@5.7", "laravel@5.8", "laravel@6.12"],
        "seeds",
    )?;
    let flavour = match preset.as_str() {
        "laravel@5.7" => Flavour::Laravel57,
        "laravel@5.8" => Flavour::Laravel58,
        "laravel@6.12" => Flavour::Laravel612,
        _ => Flavour::Seeds,
    };
    let key = params.key()?;
    let ttl_s = match flavour {
        Flavour::Seeds => Some(whole_seconds(params, INFO.default_ttl_ms)?),
        // Cache::lock($name, $seconds = 0): no EXPIRE unless seconds are given.
        _ if params.given("ttl_ms") => Some(whole_seconds(params, INFO.default_ttl_ms)?),
        _ => None,
    };
    let retry_delay_ms = match flavour {
        Flavour::Seeds => params.positive("retry_delay_ms", 100)?,
        _ => params.positive("retry_delay_ms", 250)?,
    };
    Ok(Box::new(SetnxExpire {
        key,
        ttl_s,
        retry_delay_ms,
        flavour,
        token: None,
    }))
}

pub struct SetnxExpire {
    key: String,
    /// `None`: Laravel's `$seconds = 0`, no `EXPIRE`.
    ttl_s: Option<u64>,
    retry_delay_ms: u64,
    flavour: Flavour,
    /// The value of the lock held, if any; Laravel: the owner of the lock object last used.
    token: Option<String>,
}

/// Laravel's `Str::random()`: 16 letters and digits.
fn laravel_random(env: &dyn LockEnv) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    (0..16)
        .map(|_| char::from(ALPHABET[(env.random_u64() % ALPHABET.len() as u64) as usize]))
        .collect()
}

#[async_trait(?Send)]
impl LockScheme for SetnxExpire {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        if self.flavour != Flavour::Seeds {
            return self.laravel_block(env, timeout_ms).await;
        }
        // seed 001's requestId / seed 002's "自己唯一的标识符".
        let token = uuid4(env.as_ref());
        env.register_token(&token);
        let (key, ttl) = (self.key.clone(), self.ttl_s.unwrap_or(0).to_string());
        let grant = retry_until(env, timeout_ms, self.retry_delay_ms, async || {
            let mine = match setnx(env, &key, &token).await {
                Ok(won) => won,
                // seed 002: a SETNX without a reply is settled with a GET.
                Err(_) => matches!(
                    command(env, 0, &["GET", &key]).await,
                    Ok(Reply::Bulk(v)) if v == token.as_bytes()
                ),
            };
            if !mine {
                return None;
            }
            // STEP 2 — a crash before this line leaves the key without a TTL.
            let _ = command(env, 0, &["EXPIRE", &key, &ttl]).await;
            Some(Grant {
                token: token.clone(),
                fence: None,
            })
        })
        .await?;
        self.token = Some(grant.token.clone());
        Ok(grant)
    }

    /// Laravel's `release()` asks nobody whether the lock was acquired: it runs on a lock
    /// object that never got the lock too (a fresh `Cache::lock()` has its owner already).
    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        if self.flavour == Flavour::Seeds {
            if self.token.take().is_none() {
                return not_acquired();
            }
            return del_release(env, &self.key).await;
        }
        let token = match &self.token {
            Some(token) => token.clone(),
            None => {
                let token = self.laravel_owner(env.as_ref());
                self.token = Some(token.clone());
                token
            }
        };
        self.laravel_release(env, &token).await
    }
}

impl SetnxExpire {
    /// Laravel's `block($seconds)` (`Lock.php:82-101` at v5.7.28, `:105-126` at v5.8.0 and
    /// v6.12.0): `acquire()` (SETNX, then EXPIRE when it answered 1 and seconds were given;
    /// 6.12: one SET ... EX ... NX), and after each failed one `usleep(250 * 1000)`, then
    /// `LockTimeoutException` once `currentTime() - $seconds >= $starting`: `currentTime()` is
    /// the wall clock in whole seconds (`Support/InteractsWithTime.php:60-63`,
    /// `Carbon::now()->getTimestamp()`), so the wait ends at the first whole second `$seconds`
    /// after the one it began in, and no try follows the last sleep. A Redis error escapes.
    async fn laravel_block(
        &mut self,
        env: &Rc<dyn LockEnv>,
        timeout_ms: u64,
    ) -> Result<Grant, String> {
        let token = self.laravel_owner(env.as_ref());
        // The owner of the lock object this acquisition uses, got or not.
        self.token = Some(token.clone());
        let seconds = timeout_ms as f64 / 1000.0;
        let current_time = || env.wall_ms().div_euclid(1000) as f64;
        let starting = current_time();
        while !self.laravel_acquire(env, &token).await? {
            env.sleep_ms(self.retry_delay_ms).await;
            if current_time() - seconds >= starting {
                return Err("LockTimeoutException".into());
            }
        }
        Ok(Grant { token, fence: None })
    }

    /// A new `Cache::lock()` object's owner: 5.7 writes `1` (the value names nobody); from
    /// 5.8, `Str::random()` (`Lock.php:43-52`).
    fn laravel_owner(&self, env: &dyn LockEnv) -> String {
        if self.flavour == Flavour::Laravel57 {
            return "1".to_string();
        }
        let owner = laravel_random(env);
        env.register_token(&owner);
        owner
    }

    /// `RedisLock::acquire()`; a Redis error (phpredis's `RedisException`) escapes it.
    async fn laravel_acquire(&self, env: &Rc<dyn LockEnv>, token: &str) -> Result<bool, String> {
        let raised = |e: CallError| format!("{RAISED}RedisException: {e}");
        let key = self.key.as_str();
        if let (Flavour::Laravel612, Some(ttl_s)) = (self.flavour, self.ttl_s) {
            let set = command(env, 0, &["SET", key, token, "EX", &ttl_s.to_string(), "NX"])
                .await
                .map_err(raised)?;
            return Ok(matches!(set, Reply::Status(ref s) if s == "OK"));
        }
        let won = match command(env, 0, &["SETNX", key, token]).await {
            Ok(Reply::Integer(n)) => n == 1,
            Ok(Reply::Error(e)) => {
                return Err(format!(
                    "{RAISED}RedisException: {}",
                    String::from_utf8_lossy(&e)
                ));
            }
            Ok(_) => false,
            Err(e) => return Err(raised(e)),
        };
        if won && let Some(ttl_s) = self.ttl_s {
            command(env, 0, &["EXPIRE", key, &ttl_s.to_string()])
                .await
                .map_err(raised)?;
        }
        Ok(won)
    }

    /// `RedisLock::release()`: 5.7 `DEL` (`RedisLock.php:50-53` at v5.7.28), 5.8 the
    /// compare-and-delete script (`:51-54` at v5.8.0), both returning nothing: the caller learns
    /// only of an error, a release that deleted nothing looks like one that did. 6.12 returns
    /// the script's answer as a bool (`:49-52`, since v6.0.0).
    async fn laravel_release(&self, env: &Rc<dyn LockEnv>, token: &str) -> Release {
        match self.flavour {
            Flavour::Laravel58 => {
                let reply = eval(env, 0, COMPARE_AND_DELETE, &[&self.key], &[token]).await;
                told_released(reply, "release() returns nothing (not the owner any more)")
            }
            Flavour::Laravel612 => compare_and_delete(env, 0, &self.key, token).await,
            _ => del_release(env, &self.key).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use crate::locks::testing::{DirectEnv, Mishap, Shared, block_on, pass, run_until_stalled};
    use crate::locks::{LockEnv, SchemeSpec};
    use crate::redis::Reply;

    fn spec() -> SchemeSpec {
        SchemeSpec::from_json(
            &serde_json::json!({"name": "setnx-expire", "ttl_ms": 2000}),
            "scheme",
        )
        .unwrap()
    }

    #[test]
    fn two_commands_and_the_key_expires() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        block_on(spec().build("s").unwrap().acquire(&a_dyn, 100)).unwrap();
        let sent = a.sent.borrow();
        assert!(sent[0].starts_with("SETNX lock "), "{sent:?}");
        assert_eq!(sent[1], "EXPIRE lock 2");
        assert_eq!(shared.command(&["TTL", "lock"]), Reply::Integer(2));
    }

    #[test]
    fn a_crash_between_setnx_and_expire_leaves_the_lock_for_ever() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        a.mishap("SETNX", Mishap::Hang);
        assert!(run_until_stalled(spec().build("s").unwrap().acquire(&a_dyn, 100)).is_none());
        pass(&shared, 3_600_000);
        assert_eq!(shared.command(&["PTTL", "lock"]), Reply::Integer(-1));
        let b = DirectEnv::new(&shared, "b", 2);
        assert!(block_on(spec().build("s").unwrap().acquire(&b, 2000)).is_err());
    }

    #[test]
    fn laravel_5_7_deletes_whoever_holds_the_key_and_5_8_only_its_own() {
        use crate::locks::testing::two_clients;
        for (preset, deleted) in [("laravel@5.7", true), ("laravel@5.8", false)] {
            let (shared, (a, mut la), (b, mut lb)) = two_clients(serde_json::json!(
                {"name": "setnx-expire", "preset": preset, "ttl_ms": 2000}
            ));
            let first = block_on(la.acquire(&a, 100)).unwrap();
            assert_eq!(first.token == "1", preset == "laravel@5.7", "{first:?}");
            assert_eq!(shared.command(&["TTL", "lock"]), Reply::Integer(2));
            pass(&shared, 2001);
            block_on(lb.acquire(&b, 100)).unwrap();
            block_on(la.release(&a));
            assert_eq!(
                shared.command(&["EXISTS", "lock"]),
                Reply::Integer(i64::from(!deleted)),
                "{preset}"
            );
        }
        // 6.12 sets the value and its TTL in one command.
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        let spec = SchemeSpec::from_json(
            &serde_json::json!({"name": "setnx-expire", "preset": "laravel@6.12", "ttl_ms": 2000}),
            "scheme",
        )
        .unwrap();
        block_on(spec.build("s").unwrap().acquire(&a_dyn, 100)).unwrap();
        let sent = a.sent.borrow();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(
            sent[0].starts_with("SET lock ") && sent[0].ends_with(" EX 2 NX"),
            "{sent:?}"
        );
        // Without seconds, Cache::lock sets no TTL.
        let (shared, (a, mut la), _) =
            two_clients(serde_json::json!({"name": "setnx-expire", "preset": "laravel@5.7"}));
        block_on(la.acquire(&a, 100)).unwrap();
        assert_eq!(shared.command(&["TTL", "lock"]), Reply::Integer(-1));
    }

    #[test]
    fn laravel_block_counts_whole_seconds_of_the_wall_clock() {
        // The clock starts at a whole second: block(1) begun there tries at 0, 250, 500 and
        // 750 ms; begun 600 ms in, at 600 and 850 ms.
        for (start_ms, tries) in [(0, 4), (600, 2)] {
            let shared = Shared::new();
            shared.command(&["SET", "lock", "someone-else"]);
            pass(&shared, start_ms);
            let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
            let a_dyn: Rc<dyn LockEnv> = a.clone();
            let mut lock = crate::locks::testing::scheme(
                serde_json::json!({"name": "setnx-expire", "preset": "laravel@5.7", "ttl_ms": 10000}),
            );
            assert!(block_on(lock.acquire(&a_dyn, 1000)).is_err());
            let sent = a.sent.borrow();
            assert_eq!(sent.len(), tries, "begun at {start_ms} ms: {sent:?}");
        }
    }

    #[test]
    fn laravel_release_runs_for_any_lock_object_and_only_6_12_reports_it() {
        use crate::locks::testing::two_clients;
        for (preset, ok, left) in [
            ("laravel@5.7", true, 0),
            ("laravel@5.8", true, 1),
            ("laravel@6.12", false, 1),
        ] {
            let (shared, (a, mut la), (b, mut lb)) = two_clients(serde_json::json!(
                {"name": "setnx-expire", "preset": preset, "ttl_ms": 2000}
            ));
            block_on(la.acquire(&a, 0)).unwrap();
            let release = block_on(lb.release(&b));
            assert_eq!(release.ok, ok, "{preset}: {release:?}");
            assert_eq!(
                shared.command(&["EXISTS", "lock"]),
                Reply::Integer(left),
                "{preset}"
            );
        }
    }

    #[test]
    fn a_lost_setnx_reply_is_settled_by_get() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        a.mishap("SETNX", Mishap::LoseReply);
        block_on(spec().build("s").unwrap().acquire(&a_dyn, 100)).unwrap();
        assert!(a.sent.borrow()[1].starts_with("GET lock"));
    }
}
