//! `redlock` and `redlock-no-validity`: the Redlock algorithm over N independent masters.
//!
//! Sources: redis.io "Distributed Locks with Redis" (the Redlock algorithm), antirez/redlock-rb
//! and its maintained successor leandromoreira/redlock-rb (`lib/redlock/client.rb`),
//! go-redsync/redsync (`mutex.go`, `redsync.go`), mike-marcacci/node-redlock v5
//! (`src/index.ts`); seeds 000, 003, 004. The debate: Kleppmann 2016 ("How to do distributed
//! locking") and antirez 2016 ("Is Redlock safe?").
//!
//! One attempt: a fresh random value, `SET key value NX PX ttl` on every master (each call
//! bounded by a short per-instance timeout), then — for `redlock` — the validity check on the
//! client's own clock: `validity = ttl − elapsed − drift`, `drift = ttl·0.01 + 2 ms` (Redis's
//! 1 ms expiry precision plus 1 ms for small TTLs). The lock is held iff a majority (N/2+1)
//! said OK and the validity is still positive; otherwise the client unlocks every master and
//! retries after a random delay. `redlock-no-validity` skips the check, as node-redlock v5
//! (which computes an expiration but never compares it) and Redisson's RedissonRedLock do: a
//! client paused while its replies were in flight goes on to use a lock that already expired.
//!
//! `preset` picks a library's defaults (every one can still be overridden):
//!
//! | preset | tries | retry delay | drift | validity | clock | instances | per-instance timeout |
//! |---|---|---|---|---|---|---|---|
//! | `redlock-rb` (default) | retry_count 3 + 1 | 200 + rand(50) ms | ttl·0.01 + 2 | ≥ 0 | monotonic | one after another | 100 ms |
//! | `redsync` | 32 | rand[50, 250) ms | ttl·0.01 | > 0 | monotonic (Go `time.Now`) | in parallel, all replies | ttl·0.05 |
//! | `node-redlock` | retryCount 10 + 1 | 200 ± 100 ms | — | none | wall (`Date.now`) | in parallel, until a quorum for or against | none (the client's command timeout) |
//!
//! node-redlock locks with an `EVALSHA` of its acquire script (falling back to `EVAL` on
//! `NOSCRIPT`, as after a restart) and releases with its release script; the others use
//! `SET NX PX` and the compare-and-delete script.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use async_trait::async_trait;

use super::{
    COMPARE_AND_DELETE, CallError, Grant, LocalBoxFuture, LockEnv, LockScheme, Params, Release,
    SchemeInfo, argv, random_token,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "redlock",
    summary: "Redlock: SET NX PX on N masters, majority + validity check on the client's clock, unlock all on failure",
    source: "redis.io distlock; antirez/redlock-rb, redsync, node-redlock (preset); seeds 000/003/004",
    default_ttl_ms: 10_000,
    build: build_redlock,
};

pub const NO_VALIDITY_INFO: SchemeInfo = SchemeInfo {
    id: "redlock-no-validity",
    summary: "Redlock without the validity check (node-redlock v5, Redisson RedLock): a majority of OKs is enough",
    source: "mike-marcacci/node-redlock v5 src/index.ts; Redisson RedissonRedLock",
    default_ttl_ms: 10_000,
    build: build_no_validity,
};

/// node-redlock v5's acquire script (one key).
const NODE_ACQUIRE: &str = "-- Return 0 if an entry already exists.\nfor i, key in ipairs(KEYS) do\n  if redis.call(\"exists\", key) == 1 then\n    return 0\n  end\nend\n\n-- Create an entry for each provided key.\nfor i, key in ipairs(KEYS) do\n  redis.call(\"set\", key, ARGV[1], \"PX\", ARGV[2])\nend\n\n-- Return the number of entries added.\nreturn #KEYS\n";

/// node-redlock v5's release script.
const NODE_RELEASE: &str = "local count = 0\nfor i, key in ipairs(KEYS) do\n  -- Only remove entries for *this* lock value.\n  if redis.call(\"get\", key) == ARGV[1] then\n    redis.pcall(\"del\", key)\n    count = count + 1\n  end\nend\n\n-- Return the number of entries removed.\nreturn count\n";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fanout {
    /// One master after the other (redlock-rb).
    Sequential,
    /// All at once, waiting for every reply (redsync's `actOnPoolsAsync`).
    ParallelAll,
    /// All at once, deciding as soon as a quorum is for or against (node-redlock).
    ParallelQuorum,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Clock {
    Mono,
    Wall,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Validity {
    /// `validity >= 0` (redlock-rb).
    NonNegative,
    /// `validity > 0` (antirez's original, redsync's `now.Before(until)`).
    Positive,
    /// No check (node-redlock, Redisson RedLock).
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delay {
    /// `base + rand(jitter)`.
    BasePlusJitter,
    /// `rand[min, max)` (redsync).
    Range,
    /// `base ± jitter` (node-redlock: `retryDelay + floor((rand·2 − 1)·retryJitter)`).
    Symmetric,
}

#[derive(Clone, Debug)]
pub struct Redlock {
    key: String,
    ttl_ms: u64,
    tries: u64,
    delay: Delay,
    retry_delay_ms: u64,
    retry_jitter_ms: u64,
    drift_factor: f64,
    drift_const_ms: u64,
    validity: Validity,
    clock: Clock,
    fanout: Fanout,
    /// `None`: only the client's own command timeout.
    instance_timeout_ms: Option<u64>,
    /// node-redlock's EVALSHA scripts instead of SET NX PX.
    scripts: bool,
    token: Option<String>,
}

fn build_redlock(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    build(params, false)
}

fn build_no_validity(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    build(params, true)
}

fn build(params: &mut Params, no_validity: bool) -> Result<Box<dyn LockScheme>, String> {
    let default_preset = if no_validity {
        "node-redlock"
    } else {
        "redlock-rb"
    };
    let preset = params.choice(
        "preset",
        &["redlock-rb", "redsync", "node-redlock"],
        default_preset,
    )?;
    let key = params.key()?;
    let mut s = match preset.as_str() {
        "redsync" => Redlock {
            key,
            ttl_ms: 8000,
            tries: 32,
            delay: Delay::Range,
            retry_delay_ms: 50,
            retry_jitter_ms: 200,
            drift_factor: 0.01,
            drift_const_ms: 0,
            validity: Validity::Positive,
            clock: Clock::Mono,
            fanout: Fanout::ParallelAll,
            instance_timeout_ms: Some(400),
            scripts: false,
            token: None,
        },
        "node-redlock" => Redlock {
            key,
            ttl_ms: INFO.default_ttl_ms,
            tries: 11,
            delay: Delay::Symmetric,
            retry_delay_ms: 200,
            retry_jitter_ms: 100,
            drift_factor: 0.01,
            drift_const_ms: 2,
            validity: Validity::None,
            clock: Clock::Wall,
            fanout: Fanout::ParallelQuorum,
            instance_timeout_ms: None,
            scripts: true,
            token: None,
        },
        _ => Redlock {
            key,
            ttl_ms: INFO.default_ttl_ms,
            tries: 4,
            delay: Delay::BasePlusJitter,
            retry_delay_ms: 200,
            retry_jitter_ms: 50,
            drift_factor: 0.01,
            drift_const_ms: 2,
            validity: Validity::NonNegative,
            clock: Clock::Mono,
            fanout: Fanout::Sequential,
            instance_timeout_ms: Some(100),
            scripts: false,
            token: None,
        },
    };
    s.ttl_ms = params.positive("ttl_ms", s.ttl_ms)?;
    if preset == "redsync" {
        // redsync: timeoutFactor 0.05 of the expiry.
        s.instance_timeout_ms = Some((s.ttl_ms / 20).max(1));
    }
    // redlock-rb and node-redlock count retries after the first try; redsync counts tries.
    let retries_default = s.tries - 1;
    s.tries = params.u64("retry_count", retries_default)? + 1;
    s.retry_delay_ms = params.u64("retry_delay_ms", s.retry_delay_ms)?;
    s.retry_jitter_ms = params.u64("retry_jitter_ms", s.retry_jitter_ms)?;
    s.drift_factor = params.f64("drift_factor", s.drift_factor)?;
    s.drift_const_ms = params.u64("drift_const_ms", s.drift_const_ms)?;
    let default_clock = match s.clock {
        Clock::Mono => "mono",
        Clock::Wall => "wall",
    };
    s.clock = match params
        .choice("clock", &["mono", "wall"], default_clock)?
        .as_str()
    {
        "wall" => Clock::Wall,
        _ => Clock::Mono,
    };
    let default_timeout = s.instance_timeout_ms.unwrap_or(0);
    s.instance_timeout_ms = match params.u64("instance_timeout_ms", default_timeout)? {
        0 => None,
        ms => Some(ms),
    };
    if no_validity {
        s.validity = Validity::None;
    } else if params.bool("validity_check", s.validity != Validity::None)? {
        if s.validity == Validity::None {
            s.validity = Validity::Positive;
        }
    } else {
        s.validity = Validity::None;
    }
    Ok(Box::new(s))
}

/// Polls `a` and `b`; the first to finish wins (`a` when both are ready).
struct Race<A, B> {
    a: A,
    b: Pin<Box<B>>,
}

enum Either<L, R> {
    Left(L),
    Right(R),
}

impl<A: Future + Unpin, B: Future> Future for Race<A, B> {
    type Output = Either<A::Output, B::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(a) = Pin::new(&mut self.a).poll(cx) {
            return Poll::Ready(Either::Left(a));
        }
        if let Poll::Ready(b) = self.b.as_mut().poll(cx) {
            return Poll::Ready(Either::Right(b));
        }
        Poll::Pending
    }
}

/// How long a socket read that timed out during a stop-the-world pause still gets: the reply
/// that arrived meanwhile is already in the socket buffer and is read at once on resume.
const RESUME_GRACE_MS: u64 = 5;

/// Runs `call`, giving up after `timeout_ms` of the client's clock (a socket timeout). If the
/// timeout ran out while the process was stopped (its clock moved far more than the timeout),
/// a reply that arrived during the pause still wins, as a read after the pause finds it.
async fn bounded<T>(
    env: &Rc<dyn LockEnv>,
    timeout_ms: Option<u64>,
    call: impl Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    let Some(ms) = timeout_ms else {
        return call.await;
    };
    let started = env.mono_ms();
    let mut call = Box::pin(call);
    let race = Race {
        a: call.as_mut(),
        b: Box::pin(env.sleep_ms(ms)),
    };
    if let Either::Left(result) = race.await {
        return result;
    }
    if env.mono_ms().saturating_sub(started) > ms + RESUME_GRACE_MS {
        let race = Race {
            a: call.as_mut(),
            b: Box::pin(env.sleep_ms(RESUME_GRACE_MS)),
        };
        if let Either::Left(result) = race.await {
            return result;
        }
    }
    Err(CallError::Timeout)
}

/// Drives every future to completion, or until `done` says the outcome is decided; the futures
/// still running then are handed to `env.spawn` so that their requests complete normally.
struct Fanin<T> {
    futures: Vec<Option<LocalBoxFuture<'static, T>>>,
    results: Vec<Option<T>>,
}

impl<T: Clone + Unpin + 'static> Future for Fanin<T> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut pending = false;
        let this = &mut *self;
        for (i, slot) in this.futures.iter_mut().enumerate() {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => {
                        this.results[i] = Some(value);
                        *slot = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

/// A step of `Fanin` that returns as soon as `decided` holds for the results so far.
struct FaninUntil<'a, T, F: Fn(&[Option<T>]) -> bool> {
    fanin: &'a mut Fanin<T>,
    decided: F,
}

impl<T: Clone + Unpin + 'static, F: Fn(&[Option<T>]) -> bool + Unpin> Future
    for FaninUntil<'_, T, F>
{
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let all = Pin::new(&mut *this.fanin).poll(cx);
        if all.is_ready() || (this.decided)(&this.fanin.results) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Redlock {
    fn now(&self, env: &Rc<dyn LockEnv>) -> i64 {
        match self.clock {
            Clock::Mono => env.mono_ms() as i64,
            Clock::Wall => env.wall_ms(),
        }
    }

    fn retry_delay(&self, env: &Rc<dyn LockEnv>) -> u64 {
        let r = env.random_u64();
        match self.delay {
            // redlock-rb `retry_delay + rand(retry_jitter)`; redsync `rand.Intn(max-min) + min`.
            Delay::BasePlusJitter | Delay::Range => {
                self.retry_delay_ms + r.checked_rem(self.retry_jitter_ms).unwrap_or(0)
            }
            Delay::Symmetric => {
                // Math.floor((Math.random() * 2 - 1) * retryJitter)
                let unit = (r >> 11) as f64 / (1u64 << 53) as f64;
                let jitter = ((unit * 2.0 - 1.0) * self.retry_jitter_ms as f64).floor() as i64;
                (self.retry_delay_ms as i64 + jitter).max(0) as u64
            }
        }
    }

    /// One master's lock command: true when it granted the lock.
    fn lock_one(
        &self,
        env: &Rc<dyn LockEnv>,
        server: usize,
        value: &str,
    ) -> LocalBoxFuture<'static, bool> {
        let (env, key, value) = (env.clone(), self.key.clone(), value.to_string());
        let (ttl, timeout, scripts) = (self.ttl_ms, self.instance_timeout_ms, self.scripts);
        Box::pin(async move {
            if scripts {
                let reply = bounded(
                    &env,
                    timeout,
                    eval_cached(
                        &env,
                        server,
                        NODE_ACQUIRE,
                        &key,
                        &[&value, &ttl.to_string()],
                    ),
                )
                .await;
                matches!(reply, Ok(Reply::Integer(n)) if n > 0)
            } else {
                let cmd = argv(&["SET", &key, &value, "NX", "PX", &ttl.to_string()]);
                let reply = bounded(&env, timeout, env.call(server, cmd)).await;
                matches!(reply, Ok(Reply::Status(ref s)) if s == "OK")
            }
        })
    }

    /// One master's unlock: true when it deleted this value.
    fn unlock_one(
        &self,
        env: &Rc<dyn LockEnv>,
        server: usize,
        value: &str,
    ) -> LocalBoxFuture<'static, Result<bool, CallError>> {
        let (env, key, value) = (env.clone(), self.key.clone(), value.to_string());
        let (timeout, scripts) = (self.instance_timeout_ms, self.scripts);
        Box::pin(async move {
            let reply = if scripts {
                bounded(
                    &env,
                    timeout,
                    eval_cached(&env, server, NODE_RELEASE, &key, &[&value]),
                )
                .await
            } else {
                let cmd = argv(&["EVAL", COMPARE_AND_DELETE, "1", &key, &value]);
                bounded(&env, timeout, env.call(server, cmd)).await
            };
            reply.map(|r| matches!(r, Reply::Integer(n) if n > 0))
        })
    }

    /// Sends one operation to every master as the preset does; returns the per-master outcomes
    /// known when the decision was made.
    async fn fan_out<T: Clone + Unpin + 'static>(
        &self,
        env: &Rc<dyn LockEnv>,
        make: impl Fn(usize) -> LocalBoxFuture<'static, T>,
        vote_for: impl Fn(&T) -> bool + Unpin,
    ) -> Vec<Option<T>> {
        let n = env.servers();
        match self.fanout {
            Fanout::Sequential => {
                let mut out = Vec::with_capacity(n);
                for server in 0..n {
                    out.push(Some(make(server).await));
                }
                out
            }
            Fanout::ParallelAll | Fanout::ParallelQuorum => {
                let mut fanin = Fanin {
                    futures: (0..n).map(|s| Some(make(s))).collect(),
                    results: (0..n).map(|_| None).collect(),
                };
                let quorum = n / 2 + 1;
                let early = self.fanout == Fanout::ParallelQuorum;
                FaninUntil {
                    fanin: &mut fanin,
                    decided: move |results: &[Option<T>]| {
                        let done: Vec<&T> = results.iter().flatten().collect();
                        let yes = done.iter().filter(|r| vote_for(r)).count();
                        early && (yes >= quorum || done.len() - yes >= quorum)
                    },
                }
                .await;
                for future in fanin.futures.into_iter().flatten() {
                    // node-redlock does not wait for the rest; they still complete.
                    let task: LocalBoxFuture<'static, ()> = Box::pin(async move {
                        future.await;
                    });
                    let _ = env.spawn(task);
                }
                fanin.results
            }
        }
    }

    async fn unlock_all(&self, env: &Rc<dyn LockEnv>, value: &str) -> usize {
        let results = self
            .fan_out(
                env,
                |s| self.unlock_one(env, s, value),
                |r| matches!(r, Ok(true)),
            )
            .await;
        results
            .iter()
            .filter(|r| matches!(r, Some(Ok(true))))
            .count()
    }
}

/// `EVALSHA` with a fall back to `EVAL` on NOSCRIPT (node-redlock `_attemptOperationOnClient`).
async fn eval_cached(
    env: &Rc<dyn LockEnv>,
    server: usize,
    script: &str,
    key: &str,
    args: &[&str],
) -> Result<Reply, CallError> {
    let sha = sha1_hex(script);
    let mut cmd = argv(&["EVALSHA", &sha, "1", key]);
    cmd.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    match env.call(server, cmd).await? {
        Reply::Error(e) if e.starts_with(b"NOSCRIPT") => {
            let mut cmd = argv(&["EVAL", script, "1", key]);
            cmd.extend(args.iter().map(|a| a.as_bytes().to_vec()));
            env.call(server, cmd).await
        }
        other => Ok(other),
    }
}

fn sha1_hex(text: &str) -> String {
    use sha1::{Digest, Sha1};
    crate::history::hex(&Sha1::digest(text.as_bytes()))
}

#[async_trait(?Send)]
impl LockScheme for Redlock {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let quorum = env.servers() / 2 + 1;
        let started = env.mono_ms();
        // redsync and node-redlock draw one value per lock call; redlock-rb one per attempt.
        let mut value = random_token(env.as_ref());
        env.register_token(&value);
        let last = RefCell::new(String::new());
        for attempt in 0..self.tries {
            if attempt > 0 {
                let delay = self.retry_delay(env);
                if env.mono_ms().saturating_sub(started) + delay > timeout_ms {
                    break;
                }
                env.sleep_ms(delay).await;
                if self.fanout == Fanout::Sequential {
                    value = random_token(env.as_ref());
                    env.register_token(&value);
                }
            }
            let start = self.now(env);
            let results = self
                .fan_out(env, |s| self.lock_one(env, s, &value), |ok| *ok)
                .await;
            let locked = results.iter().filter(|r| matches!(r, Some(true))).count();
            let elapsed = self.now(env) - start;
            let drift =
                (self.ttl_ms as f64 * self.drift_factor) as i64 + self.drift_const_ms as i64;
            let validity = self.ttl_ms as i64 - elapsed - drift;
            let valid = match self.validity {
                Validity::NonNegative => validity >= 0,
                Validity::Positive => validity > 0,
                Validity::None => true,
            };
            if locked >= quorum && valid {
                self.token = Some(value.clone());
                return Ok(Grant {
                    token: value,
                    fence: None,
                });
            }
            *last.borrow_mut() =
                format!("{locked}/{} masters, validity {validity} ms", env.servers());
            self.unlock_all(env, &value).await;
        }
        Err(format!(
            "not acquired after {} tries (last: {})",
            self.tries,
            last.borrow()
        ))
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let Some(value) = self.token.take() else {
            return Release {
                ok: false,
                detail: "not acquired".into(),
            };
        };
        let deleted = self.unlock_all(env, &value).await;
        let quorum = env.servers() / 2 + 1;
        Release {
            ok: deleted >= quorum,
            detail: format!("deleted on {deleted}/{} masters", env.servers()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::SchemeSpec;
    use crate::locks::testing::{DirectEnv, Shared, block_on};

    fn scheme(json: serde_json::Value) -> Box<dyn LockScheme> {
        SchemeSpec::from_json(&json, "scheme")
            .unwrap()
            .build("scheme")
            .unwrap()
    }

    fn masters(n: usize) -> Vec<Rc<Shared>> {
        (0..n).map(|_| Shared::new()).collect()
    }

    fn holder(masters: &[Rc<Shared>]) -> usize {
        masters
            .iter()
            .filter(|m| m.command(&["GET", "lock"]) != Reply::Nil)
            .count()
    }

    #[test]
    fn a_majority_grants_and_excludes_until_release() {
        let m = masters(5);
        let (a, b) = (DirectEnv::multi(&m, "a", 1), DirectEnv::multi(&m, "b", 2));
        let (mut la, mut lb) = (
            scheme(serde_json::json!({"name": "redlock", "ttl_ms": 10000})),
            scheme(serde_json::json!({"name": "redlock", "ttl_ms": 10000})),
        );
        block_on(la.acquire(&a, 10_000)).unwrap();
        assert_eq!(holder(&m), 5);
        assert!(block_on(lb.acquire(&b, 10_000)).is_err());
        assert!(block_on(la.release(&a)).ok);
        assert_eq!(holder(&m), 0);
        assert!(block_on(lb.acquire(&b, 10_000)).is_ok());
    }

    #[test]
    fn a_minority_is_not_enough_and_is_unlocked() {
        let m = masters(5);
        for down in &m[..3] {
            down.down.set(true);
        }
        let a = DirectEnv::multi(&m, "a", 1);
        let mut la = scheme(serde_json::json!({"name": "redlock", "ttl_ms": 10000}));
        let err = block_on(la.acquire(&a, 10_000)).unwrap_err();
        assert!(err.contains("2/5 masters"), "{err}");
        assert_eq!(holder(&m[3..]), 0, "the partial grants were unlocked");
    }

    #[test]
    fn the_validity_check_rejects_a_slow_acquisition() {
        // Every SET takes 3 s of the client's clock: 5 × 3 s > the 10 s lease.
        let m = masters(5);
        for s in &m {
            s.latency_ms.set(3000);
        }
        let a = DirectEnv::multi(&m, "a", 1);
        let mut la = scheme(serde_json::json!({"name": "redlock", "ttl_ms": 10000,
                                               "instance_timeout_ms": 0, "retry_count": 0}));
        let err = block_on(la.acquire(&a, 60_000)).unwrap_err();
        assert!(err.contains("5/5 masters"), "{err}");
        let mut lb = scheme(
            serde_json::json!({"name": "redlock-no-validity", "ttl_ms": 10000,
                                               "retry_count": 0}),
        );
        let b = DirectEnv::multi(&m, "b", 2);
        assert!(block_on(lb.acquire(&b, 60_000)).is_ok());
    }

    #[test]
    fn node_redlock_falls_back_to_eval_after_noscript() {
        let m = masters(3);
        let a = DirectEnv::concrete_multi(&m, "a", 1);
        let env: Rc<dyn LockEnv> = a.clone();
        let mut la = scheme(serde_json::json!({"name": "redlock", "preset": "node-redlock"}));
        block_on(la.acquire(&env, 10_000)).unwrap();
        let sent = a.sent.borrow();
        assert!(sent[0].starts_with("EVALSHA"), "{sent:?}");
        assert!(sent.iter().any(|c| c.starts_with("EVAL \"")), "{sent:?}");
    }

    #[test]
    fn presets_and_parameters() {
        let spec = SchemeSpec::from_json(
            &serde_json::json!({"name": "redlock", "preset": "redsync"}),
            "scheme",
        )
        .unwrap();
        assert_eq!(spec.label(), "redlock:redsync");
        let err = SchemeSpec::from_json(
            &serde_json::json!({"name": "redlock", "preset": "zookeeper"}),
            "scheme",
        )
        .unwrap_err();
        assert!(err.contains("scheme.preset"), "{err}");
    }
}
