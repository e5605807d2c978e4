//! `redisson`: Redisson's `RLock` — a hash `{uuid:threadId → hold count}` with a lease that a
//! watchdog renews every `lockWatchdogTimeout / 3`, waiters woken through pub/sub. Seed 000 方案五
//! and seed 001 use it, seed 003 §1.3 describes it.
//!
//! `preset` names the Redisson release followed (tags of github.com/redisson/redisson; paths under
//! `redisson/src/main/java/org/redisson/`):
//!
//! - `redisson-4.7` (default), Redisson 4.7.0:
//!   - lock script `RedissonLock.java:214-224`, unlock script with the unlock latch
//!     `redisson_unlock_latch:{name}:<requestId>` that makes a retried unlock idempotent
//!     (`RedissonLock.java:347-371`), latch TTL `(timeout + retryDelay(retryAttempts)) ·
//!     retryAttempts` and the latch `DEL` after it (`RedissonBaseLock.java:218-247`);
//!   - `tryLock` `RedissonLock.java:227-311`: a response timeout inside the wait loop makes it
//!     return false (`:276`); `tryAcquire` is retried up to `retryAttempts` times when no replica
//!     acknowledged (`connection/ServiceManager.java:611-645`), after undoing the lock (`handleNoSync`,
//!     `RedissonBaseLock.java:281-283`);
//!   - the watchdog is `renewal/LockTask.java:45-103` run by `renewal/RenewalTask.java`: one
//!     timer chain per client, re-armed after *every* renewal, failed or not (`:169-185`), stopped
//!     only when no lock is left to renew (`:97-134`). A new lock after the last unlock starts
//!     a new chain while the old one's timer is still pending (`:136-152`), so several may run;
//!   - commands (`command/RedisExecutor.java`): each attempt waits `timeout` (3000 ms,
//!     `config/BaseConfig.java:58`) for its reply; a connection error is retried after the retry
//!     delay, a response timeout is re-sent after it (`:436-504`) except for the lock and
//!     unlock scripts, sent "no retry" (`RedissonBaseLock.java:80-82`); `retryAttempts` 4
//!     (`BaseConfig.java:62`), delay `EqualJitterDelay(1000 ms, 2000 ms)` (`BaseConfig.java:67`,
//!     `config/EqualJitterDelay.java:51`); scripts by `EVALSHA`, `SCRIPT LOAD` on `NOSCRIPT`
//!     (`useScriptCache` true, `config/Config.java:95`; `command/CommandAsyncService.java:578-659`);
//!   - `WAIT` (`command/CommandAsyncService.java:1095-1235`): never with a single-server configuration;
//!     through Sentinel (`LockEnv::sentinel`) a one-off `WAIT 0 0` + `WAITAOF 0 0 0` probe
//!     (Redis 7.0 lacks `WAITAOF`, which Redisson then stops using), the replica count from
//!     `INFO ALL` (`connected_slaves`, asked again whenever a `WAIT` acknowledged another number),
//!     and the script sent as a batch by `EVAL` followed by `WAIT <replicas> 1000` when there
//!     are replicas; none acknowledging fails the call ("None of slaves were synced").
//! - `redisson-3.12`, Redisson 3.12.5 (the watchdog of every release up to 3.43):
//!   - lock, unlock (no latch) and renew scripts `RedissonLock.java:351-367, 569-585, 312-321`,
//!     each sent as a batch by `EVAL` (`:342-349`) followed by `WAIT <replicas> 1000` when the
//!     Sentinel reported replicas, its result unchecked (`:369-379`);
//!   - the watchdog `renewExpiration` (`:265-299`): one timer per lock, re-armed only after a
//!     renewal that returned 1; a failed renewal is logged and the watchdog is over;
//!   - `timeout` 3000, `retryAttempts` 3, `retryInterval` 1500 ms (`config/BaseConfig.java:54-58`);
//!     a response timeout is re-sent at once (`command/RedisExecutor.java:312-331`).
//!
//! - `redisson-3.12.0`, Redisson 3.12.0: as 3.12.5 (the same unlock and renew scripts, by
//!   `EVAL`: `useScriptCache` false, `config/Config.java:84`; `timeout` 3000, `retryAttempts` 3,
//!   `retryInterval` 1500, `config/BaseConfig.java:61-65`), but
//!   - its lock script takes a free lock by `HSET` (`RedissonLock.java:342-358`), and every
//!     script goes by `commandExecutor.evalWriteAsync` alone: no batch, never a `WAIT`
//!     (3.12.5's `WAIT` came with its `evalWriteAsync` batch);
//!   - an `unlock()` whose script answered nil (the lock had expired:
//!     `IllegalMonitorStateException`) leaves the lock's renewal entry in place
//!     (`RedissonLock.java:567-591`), so the next lock of that name finds it and schedules no
//!     watchdog (`scheduleExpirationRenewal`, `:301-310`): it expires under its holder after
//!     `lockWatchdogTimeout` (issue 2515, fixed by PR 2518 in 3.12.1).
//! - `redisson-2.11`, Redisson 2.11.5 (`timeout` 3000, `retryAttempts` 3, `retryInterval` 1500,
//!   `config/BaseConfig.java:61-65`; every script by `EVAL`, no script cache, no `WAIT`,
//!   `command/CommandAsyncService.java:392-395, :440-449`):
//!   - lock script with `HSET` (`RedissonLock.java:245-261`); unlock script that answers 1
//!     after publishing when the lock no longer exists (`:446-467`), so unlocking an expired
//!     (or never taken) lock succeeds;
//!   - one renewal timer per lock name (`:198-236`), created only when none is pending and
//!     renewing the thread that created it; its entry is removed when the renewal's reply
//!     comes, re-created after a 1, so a failed or refused renewal ends the watchdog;
//!   - `unlock()` (`:363-372`, `unlockAsync` `:469-497`) cancels the renewal only when the
//!     script answered 1: an unlock that failed (a timeout, a broken connection) leaves the
//!     watchdog renewing a lock its holder thinks it released, for ever (issue 1602, fixed in
//!     2.13.1/3.8.1: cancelled whatever the outcome);
//!   - a command whose reply does not come within `timeout` fails at once: the retry timer
//!     only re-sends a command not yet written (`command/CommandAsyncService.java:519-590,
//!     :699-706`).
//! - `redisson-3.19`, Redisson 3.19.3 (`timeout` 3000, `retryAttempts` 3, `retryInterval` 1500,
//!   `config/BaseConfig.java:56-60`; `useScriptCache` false, `config/Config.java:79`: `EVAL`):
//!   - 4.7.0's lock script text (`RedissonLock.java:197-207`), 3.12.5's unlock and renew texts
//!     (`:322-338`, `RedissonBaseLock.java:179-188`);
//!   - every script through `RedissonBaseLock.evalWriteAsync` (`:209-241`): when the entry
//!     has replicas (through Sentinel here) an `INFO REPLICATION` first, then the script
//!     batched with `WAIT <connected_slaves> 1000`; none acknowledging fails the call
//!     (`IllegalStateException: None of slaves were synced`) although the script ran: the
//!     hold count it added stays, and the same thread's next lock re-enters it (issues
//!     4706, 4822; 3.20.0 undoes the lock first, `handleNoSync`, as `redisson-4.7`);
//!   - the watchdog (`RedissonBaseLock.java:123-160`) removes its entry after a renewal that
//!     failed and cancels it after one that answered 0, so the next lock starts a new one;
//!   - a response timeout is re-sent after `retryInterval` (`command/RedisExecutor.java:
//!     377-393`).
//!
//! The scripts are Redisson's own texts, byte for byte, of each release (so their `EVALSHA`
//! digests are the real ones), built from the Java concatenations cited at each constant.
//! Threads (`clients.threads`) share one Redisson client (`LockScheme::share`): one UUID, one
//! renewal entry; thread ids are 1, 2, ... A waiter subscribes to the unlock channel after its
//! first try and, in `tryLock`'s `finally`, sends `UNSUBSCRIBE` in the background. Not modelled:
//! the subscription entry and semaphore the threads of one process share (each thread here
//! subscribes and unsubscribes on its own connection, where Redisson sends one `SUBSCRIBE` for
//! the first waiter and one `UNSUBSCRIBE` when the last leaves), `WAITAOF` (Redis 7.0 has none),
//! cluster slots.
//!
//! Parameters: `key` (`lock`), `preset`, `ttl_ms` (`lockWatchdogTimeout`, 30 000), `lease_ms` (an
//! explicit `leaseTime`: the lock then expires after it and no watchdog runs), and the client's
//! `timeout_ms` (3000), `retry_attempts` (4 / 3), `retry_interval_ms` (a constant delay; 4.7's
//! default is the jittered one above, 3.12's 1500).
//! What breaks it: a stop-the-world pause longer than the lease (the watchdog stops too); a
//! partition longer than the lease; with `redisson-3.12` and short timeouts (`timeout_ms` 500,
//! `retry_attempts` 0) any partition that fails one renewal, as the watchdog never resumes.

use std::cell::RefCell;
use std::rc::Rc;

use async_trait::async_trait;

use super::fair;
use super::{
    CallError, Family, Grant, Lease, LockEnv, LockScheme, Params, PresetInfo, RAISED, Release,
    SchemeInfo, Subscription, argv, uuid4,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "redisson",
    summary: "Redisson RLock: hash {uuid:thread -> count}, 30 s lease renewed every 10 s, pub/sub wake-up, WAIT through Sentinel",
    source: "redisson/redisson@redisson-4.7.0 RedissonLock.java, renewal/LockTask.java (preset redisson-3.12: 3.12.5)",
    default_ttl_ms: 30_000,
    family: Family::Renewed,
    lease: Lease::Ms,
    in_all: true,
    presets: PRESETS,
    build,
};

/// Named presets besides the default (`redisson-4.7`). The releases that differ from 3.12.5 only
/// in one reported defect are not matrix rows (`redisson-3.12` stands for them).
const PRESETS: &[PresetInfo] = &[
    PresetInfo {
        name: "redisson-3.12",
        summary: "Redisson 3.12.5: the same hash lock by EVAL, WAIT after every script through Sentinel, a watchdog that one failed renewal ends",
        lease: Lease::Ms,
        same_as: None,
    },
    PresetInfo {
        name: "redisson-3.12.0",
        summary: "Redisson 3.12.0: an unlock of an expired lock keeps its renewal entry, so the next lock gets no watchdog (issue 2515)",
        lease: Lease::Ms,
        same_as: Some("redisson:redisson-3.12"),
    },
    PresetInfo {
        name: "redisson-2.11",
        summary: "Redisson 2.11.5: a failed unlock leaves the watchdog renewing the lock for ever (issue 1602)",
        lease: Lease::Ms,
        same_as: Some("redisson:redisson-3.12"),
    },
    PresetInfo {
        name: "redisson-3.19",
        summary: "Redisson 3.19.3: WAIT checked, \"None of slaves were synced\" fails the lock without undoing it (issues 4706, 4822)",
        lease: Lease::Ms,
        same_as: Some("redisson:redisson-3.12"),
    },
];

/// The presets `fair` shares (its scripts are those of 3.12.5 and 4.7.0).
pub(crate) const FAIR_PRESETS: &[&str] = &["redisson-4.7", "redisson-3.12"];

/// Every `preset` of `redisson`.
const LOCK_PRESETS: &[&str] = &[
    "redisson-4.7",
    "redisson-3.12",
    "redisson-3.12.0",
    "redisson-2.11",
    "redisson-3.19",
];

/// `tryLockInnerAsync`'s script: `RedissonLock.java:216-222` at 4.7.0 (sha1 149c5a8b); the same
/// text at 3.19.3 (`RedissonLock.java:199-205`).
const LOCK: &str = concat!(
    "if ((redis.call('exists', KEYS[1]) == 0) ",
    "or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then ",
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return nil; ",
    "end; ",
    "return redis.call('pttl', KEYS[1]);",
);

/// Redisson 3.12.5's lock script: `RedissonLock.java:355-365` (sha1 dad0f8d6).
const LOCK_3_12: &str = concat!(
    "if (redis.call('exists', KEYS[1]) == 0) then ",
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return nil; ",
    "end; ",
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then ",
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return nil; ",
    "end; ",
    "return redis.call('pttl', KEYS[1]);",
);

/// Redisson 2.11.5's and 3.12.0's lock script: a free lock taken by `HSET` (2.11.5
/// `RedissonLock.java:249-259`, 3.12.0 `RedissonLock.java:346-356`; sha1 9401052d).
const LOCK_HSET: &str = concat!(
    "if (redis.call('exists', KEYS[1]) == 0) then ",
    "redis.call('hset', KEYS[1], ARGV[2], 1); ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return nil; ",
    "end; ",
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then ",
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return nil; ",
    "end; ",
    "return redis.call('pttl', KEYS[1]);",
);

/// `unlockInnerAsync`'s script, with the unlock latch: `RedissonLock.java:349-367` at 4.7.0
/// (sha1 68664592).
const UNLOCK: &str = concat!(
    "local val = redis.call('get', KEYS[3]); ",
    "if val ~= false then ",
    "return tonumber(val);",
    "end; ",
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then ",
    "return nil;",
    "end; ",
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ",
    "if (counter > 0) then ",
    "redis.call('pexpire', KEYS[1], ARGV[2]); ",
    "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); ",
    "return 0; ",
    "else ",
    "redis.call('del', KEYS[1]); ",
    "redis.call(ARGV[4], KEYS[2], ARGV[1]); ",
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); ",
    "return 1; ",
    "end; ",
);

/// Redisson 3.12.5's unlock script, no latch: `RedissonLock.java:571-583` (sha1 3ffe249c); the
/// same text at 3.12.0 (`:550-562`) and 3.19.3 (`:324-336`).
const UNLOCK_3_12: &str = concat!(
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then ",
    "return nil;",
    "end; ",
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ",
    "if (counter > 0) then ",
    "redis.call('pexpire', KEYS[1], ARGV[2]); ",
    "return 0; ",
    "else ",
    "redis.call('del', KEYS[1]); ",
    "redis.call('publish', KEYS[2], ARGV[1]); ",
    "return 1; ",
    "end; ",
    "return nil;",
);

/// Redisson 2.11.5's unlock script: a lock that no longer exists answers 1 (released) after
/// publishing the unlock message, so the unlock of an expired lock succeeds
/// (`RedissonLock.java:448-464`; sha1 93cfc048).
const UNLOCK_2_11: &str = concat!(
    "if (redis.call('exists', KEYS[1]) == 0) then ",
    "redis.call('publish', KEYS[2], ARGV[1]); ",
    "return 1; ",
    "end;",
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then ",
    "return nil;",
    "end; ",
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ",
    "if (counter > 0) then ",
    "redis.call('pexpire', KEYS[1], ARGV[2]); ",
    "return 0; ",
    "else ",
    "redis.call('del', KEYS[1]); ",
    "redis.call('publish', KEYS[2], ARGV[1]); ",
    "return 1; ",
    "end; ",
    "return nil;",
);

/// Redisson 3.12.5's `renewExpirationAsync`: `RedissonLock.java:314-318` (sha1 8e19a1dd); the
/// same text at 2.11.5 (`:208-212`), 3.12.0 (`:314-318`) and 3.19.3 (`RedissonBaseLock.java:
/// 181-185`).
const RENEW_3_12: &str = concat!(
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return 1; ",
    "end; ",
    "return 0;",
);

/// Redisson 4.7's `LockTask` chunk script, one result per lock name: `renewal/LockTask.java:84-93`
/// at 4.7.0 (sha1 6a3d3157).
const RENEW: &str = concat!(
    "local result = {} ",
    "for i = 1, #KEYS, 1 do ",
    "if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then ",
    "redis.call('pexpire', KEYS[i], ARGV[1]); ",
    "table.insert(result, 1); ",
    "else ",
    "table.insert(result, 0); ",
    "end; ",
    "end; ",
    "return result;",
);

/// `LockPubSub.UNLOCK_MESSAGE`, as `LongCodec` writes it.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// `slavesSyncTimeout` default (`Config.java:89`; 3.12.5's `syncSlaves(.., 1, SECONDS)`).
const SLAVES_SYNC_TIMEOUT_MS: u64 = 1000;
const NO_SYNC: &str = "None of slaves were synced. Try to increase slavesSyncTimeout setting or set checkLockSyncedSlaves = false.";

/// The Redisson scripts and watchdog a preset follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    /// 3.12.5's client and watchdog (also 2.11.5, 3.12.0, 3.19.3, with their [`Tag`]'s
    /// differences).
    V3_12,
    /// 4.7.0.
    V4_7,
}

/// The release a preset follows, where it differs from its [`Version`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tag {
    /// 2.11.5: its own lock and unlock scripts; unlock cancels the renewal only once
    /// released; a renewal's outcome removes its entry; no `WAIT`; no re-send after a timeout.
    R2_11_5,
    /// 3.12.0: the `HSET` lock script; no `WAIT`; an unlock answered nil keeps the renewal
    /// entry.
    R3_12_0,
    /// 3.12.5.
    R3_12_5,
    /// 3.19.3: 4.7.0's lock script; `INFO REPLICATION` and a checked `WAIT`, no undo; a
    /// failed renewal removes its entry; a timeout re-sent after `retryInterval`.
    R3_19_3,
    /// 4.7.0.
    R4_7_0,
}

/// The client configuration (`Config`, `BaseConfig`) the lock depends on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    pub(crate) version: Version,
    pub(crate) tag: Tag,
    /// `timeout`: how long one attempt of a command waits for its reply.
    timeout_ms: u64,
    /// `retryAttempts`.
    retry_attempts: u64,
    /// `retryInterval` (a `ConstantDelay` in 4.x); `None`: 4.x's `EqualJitterDelay(1 s, 2 s)`.
    retry_interval_ms: Option<u64>,
    /// `lockWatchdogTimeout`.
    watchdog_ms: u64,
}

impl Config {
    /// The `preset` (one of `presets`) and client parameters shared by `redisson` and `fair`.
    pub(crate) fn from_params(params: &mut Params, presets: &[&str]) -> Result<Config, String> {
        let tag = match params.choice("preset", presets, "redisson-4.7")?.as_str() {
            "redisson-3.12" => Tag::R3_12_5,
            "redisson-3.12.0" => Tag::R3_12_0,
            "redisson-2.11" => Tag::R2_11_5,
            "redisson-3.19" => Tag::R3_19_3,
            _ => Tag::R4_7_0,
        };
        let version = match tag {
            Tag::R4_7_0 => Version::V4_7,
            _ => Version::V3_12,
        };
        let (attempts, interval) = match version {
            Version::V3_12 => (3, Some(1500)),
            Version::V4_7 => (4, None),
        };
        let retry_interval_ms = if params.given("retry_interval_ms") {
            Some(params.u64("retry_interval_ms", 0)?)
        } else {
            interval
        };
        Ok(Config {
            version,
            tag,
            timeout_ms: params.positive("timeout_ms", 3000)?,
            retry_attempts: params.u64("retry_attempts", attempts)?,
            retry_interval_ms,
            watchdog_ms: params.positive("ttl_ms", INFO.default_ttl_ms)?,
        })
    }

    /// `retryDelay.calcDelay(attempt)`: the constant interval, or `EqualJitterDelay`: half of
    /// `min(1000 · 2^attempt, 2000)` plus a random part up to the other half.
    fn retry_delay_ms(&self, env: &Rc<dyn LockEnv>, attempt: u64) -> u64 {
        if let Some(ms) = self.retry_interval_ms {
            return ms;
        }
        let (base, max) = (1000u64, 2000u64);
        let exponential = if attempt >= 63 || (1u64 << attempt) > max / base {
            max
        } else {
            (base << attempt).min(max)
        };
        let half = exponential / 2;
        half + env.random_u64() % (half + 1)
    }
}

/// An exception of a Redisson call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// `RedisResponseTimeoutException`: the last attempt got no reply in time.
    ResponseTimeout(String),
    /// 4.7's `NoSyncedSlavesException`; 3.19.3's `IllegalStateException("None of slaves were
    /// synced")` (`old`).
    NoSync { old: bool },
    /// Any other exception (a connection error, an error reply).
    Other(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::ResponseTimeout(s) | Failure::Other(s) => write!(f, "{s}"),
            Failure::NoSync { old: true } => {
                write!(f, "IllegalStateException: None of slaves were synced")
            }
            Failure::NoSync { old: false } => write!(f, "{NO_SYNC}"),
        }
    }
}

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(RedissonLock::new(params, None)?))
}

/// The state one Redisson client (process) keeps for one lock name.
pub(crate) struct Client {
    pub(crate) key: String,
    pub(crate) config: Config,
    /// `internalLockLeaseTime`: the watchdog timeout, or the last explicit lease.
    pub(crate) internal_lock_lease_time: u64,
    /// An explicit `leaseTime` for every `tryLock`.
    lease_ms: Option<u64>,
    /// `ServiceManager.getId()`: a UUID per Redisson client, made at first use.
    id: Option<String>,
    /// This lock's renewal entry: thread id → how many times it scheduled renewal, in insertion
    /// order (3.12's `ExpirationEntry`, 4.7's `LockEntry`).
    renewal: Option<Vec<(u64, u32)>>,
    /// 3.12: the entry's timer.
    timer: Option<Box<dyn super::TaskGuard>>,
    /// 4.7: `RenewalTask.running`.
    renewal_running: bool,
    /// Thread ids handed out.
    threads: u64,
    /// 4.7 through Sentinel: whether the `WAIT`/`WAITAOF` probe was done.
    wait_probed: bool,
    /// 4.7 through Sentinel: `MasterSlaveEntry.availableSlaves`, -1 until `INFO` tells.
    available_slaves: i64,
    /// `Some` for `RedissonFairLock`.
    pub(crate) fair: Option<fair::Config>,
}

/// One thread's handle on a Redisson lock object.
pub struct RedissonLock {
    pub(crate) client: Rc<RefCell<Client>>,
    pub(crate) thread_id: u64,
}

impl RedissonLock {
    pub(crate) fn new(params: &mut Params, fair: Option<fair::Config>) -> Result<Self, String> {
        let key = params.key()?;
        let presets = if fair.is_some() {
            FAIR_PRESETS
        } else {
            LOCK_PRESETS
        };
        let config = Config::from_params(params, presets)?;
        let lease_ms = if params.given("lease_ms") {
            Some(params.positive("lease_ms", 0)?)
        } else {
            None
        };
        Ok(RedissonLock {
            client: Rc::new(RefCell::new(Client {
                key,
                config,
                internal_lock_lease_time: config.watchdog_ms,
                lease_ms,
                id: None,
                renewal: None,
                timer: None,
                renewal_running: false,
                threads: 1,
                wait_probed: false,
                available_slaves: -1,
                fair,
            })),
            thread_id: 1,
        })
    }

    pub(crate) fn key(&self) -> String {
        self.client.borrow().key.clone()
    }

    pub(crate) fn config(&self) -> Config {
        self.client.borrow().config
    }

    pub(crate) fn lease(&self) -> u64 {
        self.client.borrow().internal_lock_lease_time
    }

    fn is_fair(&self) -> bool {
        self.client.borrow().fair.is_some()
    }

    fn handle(&self, thread_id: u64) -> RedissonLock {
        RedissonLock {
            client: self.client.clone(),
            thread_id,
        }
    }

    /// `getLockName(threadId)`: `uuid:threadId`.
    pub(crate) fn lock_name(&self, env: &Rc<dyn LockEnv>) -> String {
        let mut client = self.client.borrow_mut();
        let id = client.id.get_or_insert_with(|| uuid4(env.as_ref())).clone();
        format!("{id}:{}", self.thread_id)
    }

    /// `prefixName("redisson_lock__channel", name)`.
    pub(crate) fn channel_name(&self) -> String {
        prefix_name("redisson_lock__channel", &self.key())
    }

    /// `tryAcquire`: `Ok(None)` acquired, `Ok(Some(ttl))` held by someone else. 4.7 runs it
    /// through `ServiceManager.execute`, which retries it when no replica acknowledged.
    async fn try_acquire(
        &mut self,
        env: &Rc<dyn LockEnv>,
        wait_ms: u64,
    ) -> Result<Option<i64>, Failure> {
        let config = self.config();
        let mut attempts = 0;
        loop {
            match self.try_acquire_once(env, wait_ms).await {
                Err(Failure::NoSync { .. })
                    if config.version == Version::V4_7 && attempts < config.retry_attempts =>
                {
                    attempts += 1;
                    env.sleep_ms(config.retry_delay_ms(env, attempts)).await;
                }
                result => return result,
            }
        }
    }

    /// `tryAcquireAsync`: the lock script (undone when no replica acknowledged), then the
    /// watchdog or the explicit lease.
    async fn try_acquire_once(
        &mut self,
        env: &Rc<dyn LockEnv>,
        wait_ms: u64,
    ) -> Result<Option<i64>, Failure> {
        let (explicit, lease) = {
            let c = self.client.borrow();
            (c.lease_ms, c.lease_ms.unwrap_or(c.config.watchdog_ms))
        };
        let result = if self.is_fair() {
            fair::try_lock_inner(self, env, wait_ms, lease).await
        } else {
            let name = self.lock_name(env);
            let key = self.key();
            let script = match self.config().tag {
                Tag::R2_11_5 | Tag::R3_12_0 => LOCK_HSET,
                Tag::R3_12_5 => LOCK_3_12,
                Tag::R3_19_3 | Tag::R4_7_0 => LOCK,
            };
            synced_eval(
                self,
                env,
                script,
                &[&key],
                &[&lease.to_string(), &name],
                false,
            )
            .await
            .and_then(|reply| match reply {
                Reply::Nil => Ok(None),
                Reply::Integer(ttl) => Ok(Some(ttl)),
                other => Err(Failure::Other(format!("unexpected reply {other:?}"))),
            })
        };
        let ttl = match result {
            // handleNoSync (3.20.0 on): undo the lock, then fail. 3.19.3 just fails, the hold
            // count the script added left in place.
            Err(Failure::NoSync { old: false }) => {
                let _ = self.unlock_inner(env, None).await;
                return Err(Failure::NoSync { old: false });
            }
            other => other?,
        };
        if ttl.is_none() {
            match explicit {
                Some(lease) => self.client.borrow_mut().internal_lock_lease_time = lease,
                None => self.schedule_expiration_renewal(env),
            }
        }
        Ok(ttl)
    }

    /// `unlockInnerAsync`; 4.7 with the latch of `request_id` (a new one when `None`), then
    /// the latch's `DEL` in the background.
    async fn unlock_inner(
        &self,
        env: &Rc<dyn LockEnv>,
        request_id: Option<String>,
    ) -> Result<Reply, Failure> {
        let config = self.config();
        let request_id = request_id.unwrap_or_else(|| generate_id(env));
        let latch = format!(
            "{}:{request_id}",
            prefix_name("redisson_unlock_latch", &self.key())
        );
        // (timeout + retryDelay.calcDelay(retryAttempts)) * retryAttempts, at least 1.
        let latch_ttl = ((config.timeout_ms + config.retry_delay_ms(env, config.retry_attempts))
            * config.retry_attempts)
            .max(1);
        let reply = if self.is_fair() {
            fair::unlock_inner(self, env, &latch, latch_ttl).await?
        } else {
            let lease = self.lease().to_string();
            let name = self.lock_name(env);
            let (key, channel) = (self.key(), self.channel_name());
            match config.version {
                Version::V3_12 => {
                    let script = match config.tag {
                        Tag::R2_11_5 => UNLOCK_2_11,
                        _ => UNLOCK_3_12,
                    };
                    synced_eval(
                        self,
                        env,
                        script,
                        &[&key, &channel],
                        &[UNLOCK_MESSAGE, &lease, &name],
                        true,
                    )
                    .await?
                }
                Version::V4_7 => {
                    synced_eval(
                        self,
                        env,
                        UNLOCK,
                        &[&key, &channel, &latch],
                        &[
                            UNLOCK_MESSAGE,
                            &lease,
                            &name,
                            "PUBLISH",
                            &latch_ttl.to_string(),
                        ],
                        false,
                    )
                    .await?
                }
            }
        };
        if config.version == Version::V4_7 {
            // The latch is deleted asynchronously; unlock does not wait for it.
            let del_env = env.clone();
            let _ = env.spawn(Box::pin(async move {
                let _ = execute(config, &del_env, argv(&["DEL", &latch]), true, 0).await;
            }));
        }
        Ok(reply)
    }

    /// `scheduleExpirationRenewal(threadId)`.
    fn schedule_expiration_renewal(&self, env: &Rc<dyn LockEnv>) {
        let version = self.config().version;
        let mut client = self.client.borrow_mut();
        let tag = client.config.tag;
        if let Some(entry) = client.renewal.as_mut() {
            // 2.11.5 (`RedissonLock.java:198-201`): an entry for the lock name schedules nothing
            // and counts nothing; its renewal renews the thread that created it.
            if tag != Tag::R2_11_5 {
                add_thread(entry, self.thread_id);
            }
            return;
        }
        client.renewal = Some(vec![(self.thread_id, 1)]);
        match version {
            Version::V3_12 => {
                drop(client);
                self.renew_expiration_3_12(env);
            }
            // RenewalTask.add: a new timer chain unless one is running.
            Version::V4_7 if !client.renewal_running => {
                client.renewal_running = true;
                drop(client);
                self.renewal_task(env);
            }
            Version::V4_7 => {}
        }
    }

    /// 3.12's `renewExpiration()`: a timer every `internalLockLeaseTime / 3`, re-armed after
    /// each renewal that returned 1 (here: a loop); an exception ends it.
    fn renew_expiration_3_12(&self, env: &Rc<dyn LockEnv>) {
        let client = self.client.clone();
        let task_env = env.clone();
        let task = env.spawn(Box::pin(async move {
            loop {
                let period = client.borrow().internal_lock_lease_time / 3;
                task_env.sleep_ms(period).await;
                let first = client
                    .borrow()
                    .renewal
                    .as_ref()
                    .and_then(|e| e.first().map(|(t, _)| *t));
                let Some(thread_id) = first else { return };
                let renewer = RedissonLock {
                    client: client.clone(),
                    thread_id,
                };
                let name = renewer.lock_name(&task_env);
                let lease = renewer.lease().to_string();
                let key = renewer.key();
                let renewed = synced_eval(
                    &renewer,
                    &task_env,
                    RENEW_3_12,
                    &[&key],
                    &[&lease, &name],
                    true,
                )
                .await;
                // "Can't update lock ... expiration" is logged; nothing re-arms the timer. 2.11.5
                // removes the entry whatever the outcome before it re-arms (`RedissonLock.java:
                // 215-228`), 3.19.3 after an exception or a 0 (`RedissonBaseLock.java:142-155`),
                // so the next lock starts a new watchdog; 3.12.x keeps it until the unlock.
                if renewed != Ok(Reply::Integer(1)) {
                    let tag = client.borrow().config.tag;
                    if matches!(tag, Tag::R2_11_5 | Tag::R3_19_3) {
                        let mut c = client.borrow_mut();
                        c.renewal = None;
                        // This task is the timer: it ends here, nothing to cancel.
                        drop(c.timer.take());
                    }
                    return;
                }
            }
        }));
        self.client.borrow_mut().timer = Some(task);
    }

    /// 4.7's `RenewalTask`: every `lockWatchdogTimeout / 3` after the previous renewal, renew
    /// the lock for its first thread; whatever the outcome, go on while `running`.
    fn renewal_task(&self, env: &Rc<dyn LockEnv>) {
        let client = self.client.clone();
        let task_env = env.clone();
        let _ = env.spawn(Box::pin(async move {
            loop {
                let period = client.borrow().config.watchdog_ms / 3;
                task_env.sleep_ms(period).await;
                let first = client
                    .borrow()
                    .renewal
                    .as_ref()
                    .and_then(|e| e.first().map(|(t, _)| *t));
                if let Some(thread_id) = first {
                    let renewer = RedissonLock {
                        client: client.clone(),
                        thread_id,
                    };
                    let name = renewer.lock_name(&task_env);
                    let (key, lease) = (renewer.key(), renewer.config().watchdog_ms.to_string());
                    let renewed =
                        synced_eval(&renewer, &task_env, RENEW, &[&key], &[&lease, &name], true)
                            .await;
                    // ContainsDecoder: a name whose hash field is gone stops being renewed.
                    if let Ok(Reply::Array(results)) = renewed
                        && results.first() != Some(&Reply::Integer(1))
                    {
                        renewer.cancel_expiration_renewal(Some(thread_id));
                    }
                }
                if !client.borrow().renewal_running {
                    return;
                }
            }
        }));
    }

    /// `cancelExpirationRenewal(threadId)`: `None` cancels for every thread.
    fn cancel_expiration_renewal(&self, thread_id: Option<u64>) {
        let mut client = self.client.borrow_mut();
        let Some(entry) = client.renewal.as_mut() else {
            return;
        };
        if let Some(t) = thread_id {
            remove_thread(entry, t);
        }
        if thread_id.is_none() || entry.is_empty() {
            client.renewal = None;
            if let Some(timer) = client.timer.take() {
                timer.cancel();
            }
            // RenewalTask.stop(): the pending timer fires once more and then ends.
            client.renewal_running = false;
        }
    }

    async fn acquire_failed(&self, env: &Rc<dyn LockEnv>, wait_ms: u64) {
        if self.is_fair() {
            fair::acquire_failed(self, env, wait_ms).await;
        }
    }

    async fn subscribe(&self, env: &Rc<dyn LockEnv>) -> Result<Box<dyn Subscription>, String> {
        let channel = if self.is_fair() {
            format!("{}:{}", self.channel_name(), self.lock_name(env))
        } else {
            self.channel_name()
        };
        env.subscribe(0, &channel, None)
            .await
            .map_err(|e| e.to_string())
    }

    /// `tryLock(waitTime, MILLISECONDS)` with the lease of the parameters.
    async fn try_lock(&mut self, env: &Rc<dyn LockEnv>, wait_ms: u64) -> Result<bool, Failure> {
        let mut time = wait_ms as i64;
        let mut current = env.wall_ms();
        if self.try_acquire(env, wait_ms).await?.is_none() {
            return Ok(true);
        }
        time -= env.wall_ms() - current;
        if time <= 0 {
            self.acquire_failed(env, wait_ms).await;
            return Ok(false);
        }
        current = env.wall_ms();
        // subscribeFuture.get(time, MILLISECONDS)
        let subscription = match self.subscribe(env).await {
            Ok(s) => s,
            Err(_) => {
                self.acquire_failed(env, wait_ms).await;
                return Ok(false);
            }
        };
        time -= env.wall_ms() - current;
        let result = self
            .wait_for_unlock(env, wait_ms, time, &*subscription)
            .await;
        // `finally { unsubscribe(...) }` (4.7.0 `RedissonLock.java:307-309`, 3.12.5 :455-457):
        // `PublishSubscribe.unsubscribe` sends `UNSUBSCRIBE` once the channel's last waiter
        // left (4.7.0 `pubsub/PublishSubscribe.java:44-58`, 3.12.5 :49-67), asynchronously:
        // `tryLock` returns without waiting for it.
        let _ = env.spawn(Box::pin(async move { subscription.unsubscribe().await }));
        result
    }

    /// The part of `tryLock` inside its `try`: try again, wait for an unlock message (the
    /// latch) up to the TTL or the time left, until the lock is had or `time` is spent.
    async fn wait_for_unlock(
        &mut self,
        env: &Rc<dyn LockEnv>,
        wait_ms: u64,
        mut time: i64,
        subscription: &dyn Subscription,
    ) -> Result<bool, Failure> {
        if time <= 0 {
            self.acquire_failed(env, wait_ms).await;
            return Ok(false);
        }
        loop {
            let mut current_time = env.wall_ms();
            let ttl = match self.try_acquire(env, wait_ms).await {
                Err(Failure::ResponseTimeout(_)) if self.config().version == Version::V4_7 => {
                    self.acquire_failed(env, wait_ms).await;
                    return Ok(false);
                }
                other => other?,
            };
            let Some(ttl) = ttl else {
                return Ok(true);
            };
            time -= env.wall_ms() - current_time;
            if time <= 0 {
                self.acquire_failed(env, wait_ms).await;
                return Ok(false);
            }
            current_time = env.wall_ms();
            let wait = if ttl >= 0 && ttl < time { ttl } else { time };
            subscription.next_message(wait.max(0) as u64).await;
            time -= env.wall_ms() - current_time;
            if time <= 0 {
                self.acquire_failed(env, wait_ms).await;
                return Ok(false);
            }
        }
    }

    /// `unlock()`: 4.7 retries the unlock (same request id, so the latch answers a repeat) when
    /// no replica acknowledged; the renewal is cancelled after every attempt.
    async fn unlock(&mut self, env: &Rc<dyn LockEnv>) -> Result<Reply, Failure> {
        let config = self.config();
        let request_id = generate_id(env);
        let mut attempts = 0;
        loop {
            let result = self.unlock_inner(env, Some(request_id.clone())).await;
            let cancels = match config.tag {
                // `if (opStatus) cancelExpirationRenewal()`: only once released.
                Tag::R2_11_5 => result == Ok(Reply::Integer(1)),
                // `opStatus == null` fails before the cancel.
                Tag::R3_12_0 => result != Ok(Reply::Nil),
                _ => true,
            };
            if cancels {
                // 2.11.5's `cancelExpirationRenewal()` drops the lock name's entry whichever
                // thread unlocks (`RedissonLock.java:238-243`).
                let thread = (config.tag != Tag::R2_11_5).then_some(self.thread_id);
                self.cancel_expiration_renewal(thread);
            }
            if config.version == Version::V4_7 && !matches!(result, Ok(Reply::Integer(0))) {
                let mut client = self.client.borrow_mut();
                client.internal_lock_lease_time = config.watchdog_ms;
            }
            match result {
                Err(Failure::NoSync { .. })
                    if config.version == Version::V4_7 && attempts < config.retry_attempts =>
                {
                    attempts += 1;
                    env.sleep_ms(config.retry_delay_ms(env, attempts)).await;
                }
                result => return result,
            }
        }
    }
}

/// `ServiceManager.generateId()`: 16 random bytes in hex.
fn generate_id(env: &Rc<dyn LockEnv>) -> String {
    format!("{:016x}{:016x}", env.random_u64(), env.random_u64())
}

fn add_thread(entry: &mut Vec<(u64, u32)>, thread_id: u64) {
    match entry.iter_mut().find(|(t, _)| *t == thread_id) {
        Some((_, n)) => *n += 1,
        None => entry.push((thread_id, 1)),
    }
}

fn remove_thread(entry: &mut Vec<(u64, u32)>, thread_id: u64) {
    if let Some(i) = entry.iter().position(|(t, _)| *t == thread_id) {
        entry[i].1 -= 1;
        if entry[i].1 == 0 {
            entry.remove(i);
        }
    }
}

/// `RedissonObject.prefixName`: `prefix:{name}`, or `prefix:name` when the name has a hash tag.
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// One command as `RedisExecutor` sends it: each attempt waits `timeout` (+ `extra_ms`) for
/// its reply; a connection error is retried after the retry delay; a response timeout is
/// re-sent when `resend` (3.12 at once, 4.7 after the retry delay); at most `retryAttempts`
/// more attempts.
async fn execute(
    config: Config,
    env: &Rc<dyn LockEnv>,
    command: Vec<Vec<u8>>,
    resend: bool,
    extra_ms: u64,
) -> Result<Reply, Failure> {
    batch(config, env, vec![command], resend, extra_ms)
        .await
        .map(|mut replies| replies.remove(0))
}

/// Several commands sent as one unit (a `CommandBatchService` on one connection) and retried as
/// one, as `execute`.
async fn batch(
    config: Config,
    env: &Rc<dyn LockEnv>,
    commands: Vec<Vec<Vec<u8>>>,
    resend: bool,
    extra_ms: u64,
) -> Result<Vec<Reply>, Failure> {
    let timeout_ms = config.timeout_ms + extra_ms;
    let mut attempt = 0;
    loop {
        let started = env.mono_ms();
        let mut replies = Vec::with_capacity(commands.len());
        let mut error = None;
        for command in &commands {
            match env.call_with_timeout(0, command.clone(), timeout_ms).await {
                Ok(reply) => replies.push(reply),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        let Some(error) = error else {
            return Ok(replies);
        };
        let retry = attempt < config.retry_attempts;
        match error {
            // 2.11.5 fails a command whose reply did not come in time (its retry timer only
            // re-sends one not yet written, `command/CommandAsyncService.java:519-590, :699-706`).
            CallError::Timeout if retry && resend && config.tag != Tag::R2_11_5 => {
                crate::marks::mark(crate::marks::Mark::TimedOutCommandResent);
                // 3.12.x re-sends at once (`command/RedisExecutor.java:312-331` at 3.12.5); 3.19.3
                // after `retryInterval` (`:377-393`), as 4.7 after its retry delay.
                if matches!(config.tag, Tag::R3_19_3 | Tag::R4_7_0) {
                    env.sleep_ms(config.retry_delay_ms(env, attempt)).await;
                }
            }
            CallError::Timeout => {
                return Err(Failure::ResponseTimeout(format!(
                    "Redis server response timeout ({timeout_ms} ms) occurred after {attempt} of {} retry attempts",
                    config.retry_attempts
                )));
            }
            CallError::Disconnected(_) if retry => {
                let delay = config.retry_delay_ms(env, attempt);
                let spent = env.mono_ms().saturating_sub(started);
                env.sleep_ms(delay.saturating_sub(spent)).await;
            }
            CallError::Disconnected(why) => {
                return Err(Failure::Other(format!(
                    "{why} after {attempt} of {} retry attempts",
                    config.retry_attempts
                )));
            }
        }
        attempt += 1;
    }
}

fn eval_command(script: &str, keys: &[&str], args: &[&str]) -> Vec<Vec<u8>> {
    let mut cmd = vec![
        b"EVAL".to_vec(),
        script.as_bytes().to_vec(),
        keys.len().to_string().into_bytes(),
    ];
    cmd.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
    cmd.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    cmd
}

/// An error reply is an exception.
fn exception(reply: Reply) -> Result<Reply, Failure> {
    match reply {
        Reply::Error(e) => Err(Failure::Other(String::from_utf8_lossy(&e).into_owned())),
        reply => Ok(reply),
    }
}

/// `CommandAsyncService.syncedEval` (see the module doc); `retry` is false for the "no retry"
/// lock and unlock scripts.
pub(crate) async fn synced_eval(
    lock: &RedissonLock,
    env: &Rc<dyn LockEnv>,
    script: &'static str,
    keys: &[&str],
    args: &[&str],
    retry: bool,
) -> Result<Reply, Failure> {
    let config = lock.config();
    let eval = eval_command(script, keys, args);
    if config.version == Version::V3_12 {
        let mut replicas = match config.tag {
            // 2.11.5's and 3.12.0's scripts go by `commandExecutor.evalWriteAsync` alone
            // (2.11.5 `RedissonLock.java:248`, 3.12.0 `:345`): no batch, no `WAIT`.
            Tag::R2_11_5 | Tag::R3_12_0 => 0,
            _ if env.sentinel() => env.replicas() as i64,
            _ => 0,
        };
        if config.tag == Tag::R3_19_3 && replicas > 0 {
            // evalWriteAsync: INFO REPLICATION, then WAIT for the connected_slaves it shows.
            let info =
                exception(execute(config, env, argv(&["INFO", "REPLICATION"]), true, 0).await?)?;
            replicas = connected_slaves(&info);
        }
        let mut commands = vec![eval];
        if replicas > 0 {
            let wait = SLAVES_SYNC_TIMEOUT_MS.to_string();
            commands.push(argv(&["WAIT", &replicas.to_string(), &wait]));
        }
        let extra = if replicas > 0 {
            SLAVES_SYNC_TIMEOUT_MS
        } else {
            0
        };
        let replies = batch(config, env, commands, true, extra).await?;
        if config.tag == Tag::R3_19_3 && replicas > 0 && replies.get(1) == Some(&Reply::Integer(0))
        {
            return Err(Failure::NoSync { old: true });
        }
        return exception(replies.into_iter().next().unwrap_or(Reply::Nil));
    }
    if !env.sentinel() {
        return exception(evalsha(config, env, script, eval, retry).await?);
    }
    if !lock.client.borrow().wait_probed {
        let probe = vec![argv(&["WAIT", "0", "0"]), argv(&["WAITAOF", "0", "0", "0"])];
        let replies = batch(config, env, probe, true, 0).await?;
        if let Some(Reply::Error(e)) = replies.first() {
            return Err(Failure::Other(String::from_utf8_lossy(e).into_owned()));
        }
        lock.client.borrow_mut().wait_probed = true;
    }
    if lock.client.borrow().available_slaves < 0 {
        let info = exception(execute(config, env, argv(&["INFO", "ALL"]), true, 0).await?)?;
        lock.client.borrow_mut().available_slaves = connected_slaves(&info);
    }
    let replicas = lock.client.borrow().available_slaves;
    let mut commands = vec![eval];
    let mut extra = 0;
    if replicas > 0 {
        let wait = SLAVES_SYNC_TIMEOUT_MS.to_string();
        commands.push(argv(&["WAIT", &replicas.to_string(), &wait]));
        extra = SLAVES_SYNC_TIMEOUT_MS;
    }
    // The batch executor is created with noRetry false, whatever the caller asked.
    let replies = batch(config, env, commands, true, extra).await?;
    let synced = match replies.get(1) {
        Some(Reply::Integer(n)) => *n,
        _ => 0,
    };
    if synced != replicas {
        lock.client.borrow_mut().available_slaves = -1;
    }
    if synced == 0 && replicas > 0 {
        return Err(Failure::NoSync { old: false });
    }
    exception(replies.into_iter().next().unwrap_or(Reply::Nil))
}

/// `evalAsync` with the script cache: `EVALSHA`, and on `NOSCRIPT` a `SCRIPT LOAD` and the
/// `EVALSHA` again.
async fn evalsha(
    config: Config,
    env: &Rc<dyn LockEnv>,
    script: &'static str,
    mut eval: Vec<Vec<u8>>,
    resend: bool,
) -> Result<Reply, Failure> {
    eval[0] = b"EVALSHA".to_vec();
    eval[1] = super::script_sha(script).as_bytes().to_vec();
    match execute(config, env, eval.clone(), resend, 0).await? {
        Reply::Error(e) if e.starts_with(b"NOSCRIPT") => {
            let load = vec![
                b"SCRIPT".to_vec(),
                b"LOAD".to_vec(),
                script.as_bytes().to_vec(),
            ];
            exception(execute(config, env, load, true, 0).await?)?;
            execute(config, env, eval, resend, 0).await
        }
        reply => Ok(reply),
    }
}

/// `connected_slaves` of an `INFO` reply (0 when absent, as Redisson's `getOrDefault`).
fn connected_slaves(info: &Reply) -> i64 {
    let text = info
        .as_bulk()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[async_trait(?Send)]
impl LockScheme for RedissonLock {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let name = self.lock_name(env);
        env.register_token(&name);
        match self.try_lock(env, timeout_ms).await {
            Ok(true) => Ok(Grant {
                token: name,
                fence: None,
            }),
            Ok(false) => Err(format!("tryLock({timeout_ms} ms) returned false")),
            // An exception of a call `tryLock` does not catch reaches its caller.
            Err(e) => Err(format!("{RAISED}{e}")),
        }
    }

    /// `unlock()`: every failure is an exception its caller sees — nil from the script is
    /// `IllegalMonitorStateException` (4.7.0 `RedissonBaseLock.java:172-176`, rethrown unwrapped
    /// by `unlock()` :185-194; 3.12.5 `RedissonLock.java:475-484, :600-605`), any other is the
    /// call's own (`RedisResponseTimeoutException`, "None of slaves were synced", ...).
    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let raised = |detail: String| Release {
            ok: false,
            detail: format!("{RAISED}{detail}"),
        };
        match self.unlock(env).await {
            Ok(Reply::Integer(1)) => Release {
                ok: true,
                detail: "unlocked".into(),
            },
            Ok(Reply::Integer(_)) => Release {
                ok: true,
                detail: "still held (reentrant)".into(),
            },
            Ok(Reply::Nil) => raised(format!(
                "IllegalMonitorStateException: attempt to unlock lock, not locked by current thread by node id: {} thread-id: {}",
                self.client.borrow().id.clone().unwrap_or_default(),
                self.thread_id
            )),
            Ok(other) => raised(format!("unexpected reply {other:?}")),
            Err(e) => raised(e.to_string()),
        }
    }

    /// Another thread of the same Redisson client.
    fn share(&self) -> Option<Box<dyn LockScheme>> {
        let thread_id = {
            let mut client = self.client.borrow_mut();
            client.threads += 1;
            client.threads
        };
        Some(Box::new(self.handle(thread_id)))
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use crate::locks::testing::{DirectEnv, Mishap, Shared, block_on, pass};
    use crate::locks::{LockEnv, LockScheme, SchemeSpec};
    use crate::redis::Reply;

    fn scheme(json: serde_json::Value) -> Box<dyn LockScheme> {
        SchemeSpec::from_json(&json, "scheme")
            .unwrap()
            .build("s")
            .unwrap()
    }

    fn lock(ttl_ms: u64) -> Box<dyn LockScheme> {
        scheme(serde_json::json!({"name": "redisson", "ttl_ms": ttl_ms}))
    }

    #[test]
    fn a_hash_field_per_thread_renewed_by_the_watchdog() {
        let shared = Shared::new();
        let (a, b) = (
            DirectEnv::new(&shared, "a", 1),
            DirectEnv::new(&shared, "b", 2),
        );
        let (mut la, mut lb) = (lock(3000), lock(3000));
        let grant = block_on(la.acquire(&a, 100)).unwrap();
        assert!(
            grant.token.ends_with(":1"),
            "uuid:threadId, {}",
            grant.token
        );
        assert_eq!(
            shared.command(&["HGET", "lock", &grant.token]),
            Reply::bulk("1")
        );
        // b waits 10 s: the watchdog renews every second, so b never gets it.
        assert!(block_on(lb.acquire(&b, 10_000)).is_err());
        assert!(matches!(shared.command(&["PTTL", "lock"]), Reply::Integer(t) if t > 1500));
        assert!(block_on(la.release(&a)).ok);
        // The latch DEL, and the renewal chain until its timer fires once more.
        pass(&shared, 1000);
        assert_eq!(shared.running_tasks(), 0);
        assert_eq!(
            shared.command(&["DBSIZE"]),
            Reply::Integer(0),
            "lock and latch gone"
        );
    }

    #[test]
    fn scripts_go_by_evalsha_and_are_loaded_on_noscript() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        block_on(lock(30_000).acquire(&a_dyn, 100)).unwrap();
        let sent = a.sent.borrow();
        assert!(sent[0].starts_with("EVALSHA "), "{sent:?}");
        assert!(sent[1].starts_with("SCRIPT LOAD "), "{sent:?}");
        assert!(sent[2].starts_with("EVALSHA "), "{sent:?}");
        let old = scheme(serde_json::json!({"name": "redisson", "preset": "redisson-3.12"}));
        let b = Rc::new(DirectEnv::concrete(&shared, "b", 2));
        let b_dyn: Rc<dyn LockEnv> = b.clone();
        let _ = block_on({ old }.acquire(&b_dyn, 100));
        assert!(
            b.sent.borrow()[0].starts_with("EVAL \""),
            "3.12 does not cache scripts"
        );
    }

    #[test]
    fn a_waiter_is_woken_by_the_unlock_message() {
        let shared = Shared::new();
        let (a, b) = (
            DirectEnv::new(&shared, "a", 1),
            DirectEnv::new(&shared, "b", 2),
        );
        let mut la = lock(30_000);
        block_on(la.acquire(&a, 100)).unwrap();
        let got = Rc::new(std::cell::RefCell::new(None));
        let (got2, b2, mut lb) = (got.clone(), b.clone(), lock(30_000));
        let _t = b.spawn(Box::pin(async move {
            *got2.borrow_mut() = Some(lb.acquire(&b2, 60_000).await);
        }));
        pass(&shared, 500);
        assert!(got.borrow().is_none(), "b waits (for up to the 30 s TTL)");
        let channel = "redisson_lock__channel:{lock}";
        assert_eq!(
            shared.command(&["PUBSUB", "NUMSUB", channel]),
            Reply::Array(vec![Reply::bulk(channel), Reply::Integer(1)]),
            "b waits subscribed"
        );
        block_on(la.release(&a));
        pass(&shared, 1);
        assert!(
            matches!(*got.borrow(), Some(Ok(_))),
            "the PUBLISH woke b at once"
        );
        // The UNSUBSCRIBE goes out in the background, after tryLock returned.
        pass(&shared, 1);
        assert_eq!(
            shared.command(&["PUBSUB", "NUMSUB", channel]),
            Reply::Array(vec![Reply::bulk(channel), Reply::Integer(0)]),
            "tryLock's finally unsubscribed b"
        );
    }

    /// `unlock()` of a lock the thread does not hold throws `IllegalMonitorStateException`:
    /// the caller sees an exception, not a refusal.
    #[test]
    fn unlock_of_a_lock_not_held_raises() {
        for preset in ["redisson-4.7", "redisson-3.12"] {
            let shared = Shared::new();
            let a = DirectEnv::new(&shared, "a", 1);
            let mut la = scheme(serde_json::json!({"name": "redisson", "preset": preset}));
            let release = block_on(la.release(&a));
            assert!(!release.ok);
            assert!(
                release
                    .detail
                    .starts_with("raised: IllegalMonitorStateException: attempt to unlock lock"),
                "{preset}: {release:?}"
            );
        }
    }

    /// A renewal that gets no reply: Redisson 4.7 waits its 3 s `timeout`, re-sends it after
    /// the retry delay, and the watchdog goes on; 3.12 with a 500 ms timeout and no retries
    /// gives up and never renews again.
    #[test]
    fn a_lost_renewal_reply_is_retried_and_the_watchdog_goes_on() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        let mut la = lock(30_000);
        block_on(la.acquire(&a_dyn, 100)).unwrap();
        a.mishap("EVALSHA", Mishap::Drop);
        // The renewal at 10 s is lost; it is re-sent at 13.5–14 s and renewed; so are the next.
        pass(&shared, 40_000);
        assert_eq!(
            shared.command(&["EXISTS", "lock"]),
            Reply::Integer(1),
            "still renewed"
        );
        assert!(block_on(la.release(&a_dyn)).ok);

        let old = Shared::new();
        let b = Rc::new(DirectEnv::concrete(&old, "b", 2));
        let b_dyn: Rc<dyn LockEnv> = b.clone();
        let mut lb = scheme(
            serde_json::json!({"name": "redisson", "preset": "redisson-3.12",
            "ttl_ms": 3000, "timeout_ms": 500, "retry_attempts": 0}),
        );
        block_on(lb.acquire(&b_dyn, 100)).unwrap();
        b.mishap("EVAL", Mishap::Drop);
        pass(&old, 1600);
        assert_eq!(old.running_tasks(), 0, "the first failed renewal ended it");
        pass(&old, 2000);
        assert_eq!(old.command(&["EXISTS", "lock"]), Reply::Integer(0));
        let unlock = block_on(lb.release(&b_dyn));
        assert!(
            unlock
                .detail
                .starts_with("raised: IllegalMonitorStateException"),
            "{unlock:?}"
        );
    }

    #[test]
    fn reentry_and_threads_of_one_client() {
        let shared = Shared::new();
        let env = DirectEnv::new(&shared, "p", 1);
        let mut t1 = lock(30_000);
        let mut t2 = t1.share().unwrap();
        let g1 = block_on(t1.acquire(&env, 100)).unwrap();
        block_on(t1.acquire(&env, 100)).unwrap();
        assert_eq!(
            shared.command(&["HGET", "lock", &g1.token]),
            Reply::bulk("2")
        );
        assert!(
            block_on(t2.acquire(&env, 200)).is_err(),
            "thread 2 is another owner"
        );
        assert_eq!(block_on(t1.release(&env)).detail, "still held (reentrant)");
        assert!(block_on(t1.release(&env)).ok);
        let g2 = block_on(t2.acquire(&env, 100)).unwrap();
        assert_eq!(g1.token[..36], g2.token[..36], "one client UUID");
        assert!(g2.token.ends_with(":2"));
    }

    /// `WAIT` goes out only where Redisson sends it: never to a single server (even one with
    /// replicas), and through Sentinel only when `INFO` reports replicas.
    #[test]
    fn wait_only_through_sentinel_and_only_with_replicas() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        a.set_replicas(1);
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        block_on(lock(30_000).acquire(&a_dyn, 100)).unwrap();
        assert!(!a.sent.borrow().iter().any(|c| c.starts_with("WAIT")));

        let via = Shared::new();
        let b = Rc::new(DirectEnv::concrete(&via, "b", 2));
        b.set_sentinel(true);
        let b_dyn: Rc<dyn LockEnv> = b.clone();
        block_on(lock(30_000).acquire(&b_dyn, 100)).unwrap();
        let sent = b.sent.borrow();
        assert_eq!(sent[..3], ["WAIT 0 0", "WAITAOF 0 0 0", "INFO ALL"]);
        assert!(sent[3].starts_with("EVAL \""), "{sent:?}");
        assert_eq!(sent.len(), 4, "no replica, no WAIT: {sent:?}");
    }

    /// An unlock whose reply never comes: 3.12.5 sends it again once its `timeout` passed and
    /// the lock is released; 2.11.5 fails the call (`command/CommandAsyncService.java:699-706`)
    /// and, the script not having answered 1, leaves its watchdog renewing (issue 1602).
    #[test]
    fn a_lost_unlock_is_resent_by_3_12_and_fails_in_2_11_which_renews_on() {
        for (preset, resent) in [("redisson-3.12", true), ("redisson-2.11", false)] {
            let shared = Shared::new();
            let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
            let a_dyn: Rc<dyn LockEnv> = a.clone();
            let mut la = scheme(serde_json::json!({"name": "redisson", "preset": preset,
                "ttl_ms": 3000, "timeout_ms": 500}));
            block_on(la.acquire(&a_dyn, 100)).unwrap();
            a.mishap("EVAL", Mishap::Drop);
            let release = block_on(la.release(&a_dyn));
            let unlocks = a
                .sent
                .borrow()
                .iter()
                .filter(|c| c.contains("redisson_lock__channel"))
                .count();
            assert_eq!(release.ok, resent, "{preset}: {release:?}");
            assert_eq!(unlocks, if resent { 2 } else { 1 }, "{preset}");
            pass(&shared, 10_000);
            let exists = if resent { 0 } else { 1 };
            assert_eq!(
                shared.command(&["EXISTS", "lock"]),
                Reply::Integer(exists),
                "{preset}: the watchdog renews the lock only after 2.11.5's failed unlock"
            );
        }
    }

    /// Through Sentinel with a replica, 3.12.5's batch ends with `WAIT 1 1000`; 3.12.0 and
    /// 2.11.5 send the script alone (`commandExecutor.evalWriteAsync`), and take a free lock by
    /// `HSET`.
    #[test]
    fn only_3_12_5_batches_a_wait_and_older_ones_lock_by_hset() {
        for (preset, waits) in [
            ("redisson-3.12", true),
            ("redisson-3.12.0", false),
            ("redisson-2.11", false),
        ] {
            let shared = Shared::new();
            let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
            a.set_sentinel(true);
            a.set_replicas(1);
            let a_dyn: Rc<dyn LockEnv> = a.clone();
            let mut la = scheme(serde_json::json!({"name": "redisson", "preset": preset}));
            block_on(la.acquire(&a_dyn, 100)).unwrap();
            let sent = a.sent.borrow();
            assert_eq!(
                sent.iter().any(|c| c.starts_with("WAIT 1 1000")),
                waits,
                "{preset}: {sent:?}"
            );
            assert_eq!(
                sent[0].contains("'hset'"),
                !waits,
                "{preset}: its own lock script, {sent:?}"
            );
        }
    }

    #[test]
    fn presets_and_parameters() {
        let err = SchemeSpec::from_json(
            &serde_json::json!({"name": "redisson", "preset": "redisson-2.0"}),
            "scheme",
        )
        .unwrap_err();
        assert!(err.starts_with("scheme.preset:"), "{err}");
        let err = SchemeSpec::from_json(
            &serde_json::json!({"name": "redisson", "timeout_ms": 0}),
            "scheme",
        )
        .unwrap_err();
        assert!(err.starts_with("scheme.timeout_ms:"), "{err}");
    }
}
