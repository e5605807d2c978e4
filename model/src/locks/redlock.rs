//! `redlock` and `redlock-no-validity`: the Redlock algorithm over N independent masters
//! (redis.io "Distributed Locks with Redis"; seeds 000, 003, 004; the debate: Kleppmann 2016
//! "How to do distributed locking", antirez 2016 "Is Redlock safe?").
//!
//! One attempt: a random value locked on every master, each call bounded by a per-instance
//! timeout; the lock is held iff a majority (N/2+1) granted it and — for the libraries that check
//! it — the validity `ttl − elapsed − drift` measured on the client's own clock is still positive.
//! `preset` picks a library at a named version (every setting can still be overridden):
//!
//! - `leandromoreira/redlock-rb` (default; alias `redlock-rb`), release 2.0.6,
//!   `lib/redlock/client.rb`: 4 tries (`retry_count` 3 + 1, `:22, :268`), 200 + rand(50) ms
//!   before each retry (`:23-24, :286-298`), a new `SecureRandom.uuid` per try (`:301`), masters
//!   one after another (`:306`), each by `EVALSHA` of its lock script (set if absent or already
//!   ours, `lib/redlock/scripts.rb:16-20`; on `NOSCRIPT` all three scripts are `SCRIPT LOAD`ed
//!   and the call retried once, `client.rb:233-263`) with a 100 ms timeout (`:21, :49-53`);
//!   drift `ttl·0.01 + 2` (`:361-366`), validity ≥ 0 on the monotonic clock (`:30-36, :314-316`);
//!   on failure every master is unlocked by `EVALSHA` of its compare-and-delete (`:319`).
//! - `antirez/redlock-rb`, commit 2af803d (the repository has no tags), `redlock.rb`: 3 tries
//!   (`DefaultRetryCount`, `:4, :57`), one value per `lock` call (20 random bytes, each written
//!   in base 32, `:46-53`), `set k v nx px ttl` (lower case: redis-rb 3.x writes its symbols
//!   as they are) on each master in turn (`:30-36`) with redis-rb 3.x's
//!   5 s default timeout (redis/redis-rb@v3.1.0 `lib/redis/client.rb:14`), validity > 0 on the
//!   wall clock `Time.now` (`:59-68`), unlock by `eval` (`:38-44, :75-77`), and a random
//!   rand(200) ms sleep after *every* failed try, the last included (`:80`).
//! - `redsync`, go-redsync/redsync@v4.17.0: `redsync.go:30-42` 8 s expiry, 32 tries, rand[50, 250)
//!   ms delay, drift factor 0.01 without the 2 ms, timeout factor 0.05; `mutex.go:75-134` one
//!   value per `Lock` (16 random bytes, base64, `:212-219`), go-redis's `SetNX` (`set k v ex s
//!   nx` for a whole number of seconds, else `px ms`: redis/go-redis@v9.7.0
//!   `string_commands.go:249-267`) on all masters in parallel waiting for every reply
//!   (`:269-321`), valid iff `now.Before(until)` on Go's
//!   monotonic clock (`:114-116`), every master released on failure with the same timeout;
//!   `Unlock` (`:142-150`) with go-redis's 3 s default read timeout; releases by `EVALSHA` of its
//!   delete script, `EVAL` on `NOSCRIPT` (`scripts.go:5-14`, `redis/goredis/v9/goredis.go:51-66`).
//! - `redsync@4.0.3` / `redsync@4.0.4`, go-redsync/redsync@v4.0.3 / v4.0.4: as `redsync`, but a
//!   constant 500 ms between tries (`redsync.go:27`), no timeout of its own per call (the
//!   client's), its first `deleteScript` (`mutex.go:154-160`, no `-1`), no validity check after
//!   `Extend`; v4.0.3 compares the script replies as `interface{}` with untyped constants
//!   (`status != 0`, `status != "ERR"`, `mutex.go:172, :193`), so `Unlock` and `Extend` report
//!   success whatever the masters answered; v4.0.4 compares with `int64(0)` (PR 61).
//! - `redsync@4.3.0`, go-redsync/redsync@v4.3.0: v4.0.4 with `redsync.go:33-35`'s rand[50, 250)
//!   ms between tries: no timeout of its own per call (v4.5.0 added `timeoutFactor`), the
//!   first `deleteScript` (`mutex.go:167-173`), and `ExtendContext` (`mutex.go:108-116`) a
//!   quorum of touches (`:196-207`, `status != int64(0)`) with no validity check (PR 71 added
//!   it in v4.4.0): a touch that ran just before the key's expiry extends it, however long
//!   the call took. The rest (`LockContext` `:51-84`, `UnlockContext` `:92-100`, go-redis v8's
//!   `SetNX`, `EVALSHA` then `EVAL` on `NOSCRIPT`, `redis/goredis/v8/goredis.go:42-66`) as v4.0.4.
//! - `node-redlock`, mike-marcacci/node-redlock@v5.0.0-beta.2 `src/index.ts`: one value per
//!   `acquire` (16 random bytes, hex, `:276-278, :306`); its acquire script (`:12-27`) votes
//!   *against* a key that exists, even one holding its own value; every master at once,
//!   decided as soon as a quorum is for or against (`:470-543`), by `EVALSHA`, `EVAL` on
//!   `NOSCRIPT` (`:545-618`), with ioredis's default of no command timeout (here the
//!   workload's); up to `retryCount` 10 retries 200 ± 100 ms apart (`:105-111, :438-467`)
//!   *without* releasing between them, so its own keys from an earlier try make later tries
//!   fail; only when all fail is the lock released, once (`:330-339`); no validity check (an
//!   expiration is computed, `:316-328`, and never compared); `release` (`:350-364`) retries
//!   the release script up to 10 times until a quorum deleted the value.
//!
//! - `node-redlock@4.2.0`, mike-marcacci/node-redlock@v4.2.0 `redlock.js`: its own scripts (v5's
//!   with tabs, `:9-38`), one value per `lock` (`:448-450`), every master at once and the try
//!   decided when the *last* reply came (`:408-411`); a failed try unlocks every master
//!   (waiting for every reply) before the next one (`:424-431`), up to `retryCount` 10 retries
//!   200 ± 100 ms apart (`:58-63, :428`); valid iff `votes >= quorum && expiration >
//!   Date.now()` with `expiration = start + ttl − (round(0.01 × ttl) + 2)` (`:415-419`);
//!   `unlock` (`:232-283`) runs the unlock script once on every master and succeeds on a
//!   quorum of deletions; `EVALSHA`, `EVAL` on NOSCRIPT (`:452-463`).
//!
//! - `pottery@3.0.1`, brainix/pottery@v3.0.1 `pottery/redlock.py`: a library of its own, modelled
//!   in `pottery.rs` (a `SET NX PX` per master at once, a quorum with validity > 0 returns at
//!   once, uniform(0, 200 ms) between tries for the caller's whole timeout).
//!
//! - `aioredlock@0.7.3`, joanvila/aioredlock@v0.7.3: a library of its own, modelled in
//!   `aioredlock.rs` (its three scripts loaded first, every reply awaited, 3 tries with one
//!   value 100–300 ms apart, a watchdog without `lock_timeout`).
//!
//! - `redis-semaphore@5.8.0`, the `RedlockMutex` of swarthy/redis-semaphore 5.8.0 (npm): a
//!   library of its own, modelled in `redis_semaphore_redlock.rs` (`SET PX NX` on every master
//!   at once, a quorum wins with no validity check, otherwise delete-if-equal everywhere and
//!   10 ms until the acquire timeout; a refresh timer that re-sets the masters it lost).
//!
//! `redlock-no-validity` is Redlock without the validity check: by default node-redlock, or any
//! preset with its check removed (`validity_check: false` on `redlock` does the same).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use async_trait::async_trait;

use super::{
    CallError, Extension, Family, Grant, Lease, LocalBoxFuture, LockEnv, LockScheme, Params,
    PresetInfo, RAISED, Release, SchemeInfo, argv, uuid4,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "redlock",
    summary: "Redlock: lock on N masters, majority + validity check on the client's clock, unlock all on failure",
    source: "redis.io distlock; leandromoreira/redlock-rb 2.0.6 (presets: antirez/redlock-rb, redsync v4.17.0, node-redlock v5.0.0-beta.2); seeds 000/003/004",
    default_ttl_ms: 10_000,
    family: Family::Redlock,
    lease: Lease::Ms,
    in_all: true,
    presets: PRESET_ROWS,
    build: build_redlock,
};

pub const NO_VALIDITY_INFO: SchemeInfo = SchemeInfo {
    id: "redlock-no-validity",
    summary: "Redlock without the validity check (node-redlock v5): a majority of votes is enough; retries keep earlier keys",
    source: "mike-marcacci/node-redlock v5.0.0-beta.2 src/index.ts",
    default_ttl_ms: 10_000,
    family: Family::Redlock,
    lease: Lease::Ms,
    in_all: true,
    presets: &[],
    build: build_no_validity,
};

/// `redlock`'s named presets besides the default (`leandromoreira/redlock-rb`), as rows of
/// `locksim schemes`: `node-redlock` has no validity check, which makes it `redlock-no-validity`,
/// and `redlock-rb` is the default's old name.
const PRESET_ROWS: &[PresetInfo] = &[
    PresetInfo {
        name: "antirez/redlock-rb",
        summary: "antirez's original (commit 2af803d): SET NX PX on each master in turn, validity > 0 on the wall clock, 3 tries",
        lease: Lease::Ms,
        same_as: None,
    },
    PresetInfo {
        name: "redsync",
        summary: "go-redsync v4.17.0: masters in parallel, 8 s expiry, 32 tries 50-250 ms apart, drift ttl*0.01",
        lease: Lease::Ms,
        same_as: None,
    },
    PresetInfo {
        name: "node-redlock",
        summary: "node-redlock v5.0.0-beta.2: no validity check, retries keep earlier keys",
        lease: Lease::Ms,
        same_as: Some("redlock-no-validity"),
    },
    PresetInfo {
        name: "redlock-rb",
        summary: "the default's former name (leandromoreira/redlock-rb 2.0.6)",
        lease: Lease::Ms,
        same_as: Some("redlock"),
    },
    PresetInfo {
        name: "leandromoreira/redlock-rb@2.0.1",
        summary: "redlock-rb 2.0.1: a timed-out lock reply escapes as an error and the keys already set are never unlocked (issue 76)",
        lease: Lease::Ms,
        same_as: None,
    },
    PresetInfo {
        name: "node-redlock@4.2.0",
        summary: "node-redlock v4.2.0: waits for every reply, checks the validity (expiration > Date.now()), unlocks after every failed try, releases once",
        lease: Lease::Ms,
        same_as: None,
    },
    super::pottery::PRESET,
    super::aioredlock::PRESET,
    super::redis_semaphore_redlock::PRESET,
    PresetInfo {
        name: "redsync@4.0.3",
        summary: "redsync v4.0.3: 500 ms between tries, no per-call timeout, Unlock() and Extend() report success whatever the masters answered (PR 61)",
        lease: Lease::Ms,
        same_as: Some("redlock:redsync"),
    },
    PresetInfo {
        name: "redsync@4.0.4",
        summary: "redsync v4.0.4: as v4.0.3 with Unlock() and Extend() counting real successes, no validity check after Extend",
        lease: Lease::Ms,
        same_as: Some("redlock:redsync"),
    },
    PresetInfo {
        name: "redsync@4.3.0",
        summary: "redsync v4.3.0: v4.0.4 with rand[50, 250) ms between tries; Extend() a quorum of touches with no validity check (PR 71 added it in v4.4.0)",
        lease: Lease::Ms,
        same_as: Some("redlock:redsync"),
    },
];

/// antirez/redlock-rb's `UnlockScript`.
const ANTIREZ_UNLOCK: &str = "\n    if redis.call(\"get\",KEYS[1]) == ARGV[1] then\n        return redis.call(\"del\",KEYS[1])\n    else\n        return 0\n    end";

/// leandromoreira/redlock-rb 2.0.6's scripts, byte for byte (their SHA-1s are what it sends).
const RB_UNLOCK: &str = "      if redis.call(\"get\",KEYS[1]) == ARGV[1] then\n        return redis.call(\"del\",KEYS[1])\n      else\n        return 0\n      end\n";
const RB_LOCK: &str = "      if (redis.call(\"exists\", KEYS[1]) == 0 and ARGV[3] == \"yes\") or redis.call(\"get\", KEYS[1]) == ARGV[1] then\n        return redis.call(\"set\", KEYS[1], ARGV[1], \"PX\", ARGV[2])\n      end\n";
const RB_PTTL: &str =
    "      return { redis.call(\"get\", KEYS[1]), redis.call(\"pttl\", KEYS[1]) }\n";

/// redsync v4.17.0's `deleteScript`.
const REDSYNC_DELETE: &str = "\n\tlocal val = redis.call(\"GET\", KEYS[1])\n\tif val == ARGV[1] then\n\t\treturn redis.call(\"DEL\", KEYS[1])\n\telseif val == false then\n\t\treturn -1\n\telse\n\t\treturn 0\n\tend\n";

/// redsync v4.0.3's and v4.0.4's `deleteScript` (`mutex.go:154-160`; v4.3.0 `mutex.go:167-173`):
/// no `-1` for a key that is gone.
const REDSYNC_4_0_DELETE: &str = "\n\tif redis.call(\"GET\", KEYS[1]) == ARGV[1] then\n\t\treturn redis.call(\"DEL\", KEYS[1])\n\telse\n\t\treturn 0\n\tend\n";

/// redsync's `touchScript` (the same text in v4.0.3 and v4.17.0) and v4.12.0's
/// `touchWithSetNXScript` (`WithSetNXOnExtend`, PR 149).
const REDSYNC_TOUCH: &str = "\n\tif redis.call(\"GET\", KEYS[1]) == ARGV[1] then\n\t\treturn redis.call(\"PEXPIRE\", KEYS[1], ARGV[2])\n\telse\n\t\treturn 0\n\tend\n";
const REDSYNC_TOUCH_SET_NX: &str = "\n\tif redis.call(\"GET\", KEYS[1]) == ARGV[1] then\n\t\treturn redis.call(\"PEXPIRE\", KEYS[1], ARGV[2])\n\telseif redis.call(\"SET\", KEYS[1], ARGV[1], \"PX\", ARGV[2], \"NX\") then\n\t\treturn 1\n\telse\n\t\treturn 0\n\tend\n";

/// node-redlock v5.0.0-beta.2's acquire and release scripts, byte for byte.
const NODE_ACQUIRE: &str = "\n  -- Return 0 if an entry already exists.\n  for i, key in ipairs(KEYS) do\n    if redis.call(\"exists\", key) == 1 then\n      return 0\n    end\n  end\n\n  -- Create an entry for each provided key.\n  for i, key in ipairs(KEYS) do\n    redis.call(\"set\", key, ARGV[1], \"PX\", ARGV[2])\n  end\n\n  -- Return the number of entries added.\n  return #KEYS\n";
const NODE_RELEASE: &str = "\n  local count = 0\n  for i, key in ipairs(KEYS) do\n    -- Only remove entries for *this* lock value.\n    if redis.call(\"get\", key) == ARGV[1] then\n      redis.pcall(\"del\", key)\n      count = count + 1\n    end\n  end\n\n  -- Return the number of entries removed.\n  return count\n";

/// node-redlock v4.2.0's lock and unlock scripts (`redlock.js:9-38`): v5's with tabs.
const NODE4_ACQUIRE: &str = "\n\t-- Return 0 if an entry already exists.\n\tfor i, key in ipairs(KEYS) do\n\t\tif redis.call(\"exists\", key) == 1 then\n\t\t\treturn 0\n\t\tend\n\tend\n\n\t-- Create an entry for each provided key.\n\tfor i, key in ipairs(KEYS) do\n\t\tredis.call(\"set\", key, ARGV[1], \"PX\", ARGV[2])\n\tend\n\n\t-- Return the number of entries added.\n\treturn #KEYS\n";
const NODE4_RELEASE: &str = "\n\tlocal count = 0\n\tfor i, key in ipairs(KEYS) do\n\t\t-- Only remove entries for *this* lock value.\n\t\tif redis.call(\"get\", key) == ARGV[1] then\n\t\t\tredis.pcall(\"del\", key)\n\t\t\tcount = count + 1\n\t\tend\n\tend\n\n\t-- Return the number of entries removed.\n\treturn count\n";

/// The library a preset follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Library {
    AntirezRb,
    LeandroRb,
    Redsync,
    NodeRedlock,
    /// node-redlock v4.2.0: waits for every reply, unlocks after every failed try, releases
    /// once.
    NodeRedlock4,
}

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
    /// `validity >= 0` (leandromoreira/redlock-rb).
    NonNegative,
    /// `validity > 0` (antirez/redlock-rb, redsync's `now.Before(until)`).
    Positive,
    /// No check (node-redlock).
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delay {
    /// `base + rand(jitter)` (leandromoreira/redlock-rb; antirez's `rand(200)` has base 0).
    BasePlusJitter,
    /// `rand[min, max)` (redsync).
    Range,
    /// `base ± jitter` (node-redlock: `retryDelay + floor((rand·2 − 1)·retryJitter)`).
    Symmetric,
}

#[derive(Clone, Debug)]
pub struct Redlock {
    library: Library,
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
    /// Per-instance timeout of the lock calls (and of the unlocks after a failed try);
    /// `None`: the client's own command timeout.
    lock_timeout_ms: Option<u64>,
    /// Per-instance timeout of `unlock` after a successful acquire.
    unlock_timeout_ms: Option<u64>,
    /// leandromoreira/redlock-rb up to 2.0.1: an error of one master's lock call (a timeout)
    /// escapes `lock` at once, with no unlock and no retry.
    errors_abort: bool,
    /// How `extend` (`clients.extend`) goes.
    extension: ExtendRule,
    /// redsync before v4.5.0 (v4.0.3, v4.0.4, v4.3.0): no timeout of its own per call (v4.5.0
    /// added `timeoutFactor`), its first `deleteScript` (no `-1`); `Some(true)` for v4.0.3,
    /// whose `release` compares the script's `int64` reply with the untyped `0` (`status != 0`
    /// on an `interface{}`: always true), so `Unlock` reports success whatever the masters
    /// answered (fixed by PR 61 in v4.0.4).
    redsync_pre_4_5: Option<bool>,
    token: Option<String>,
}

/// What each library's extend operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ExtendRule {
    /// antirez/redlock-rb and node-redlock here: not modelled.
    None,
    /// leandromoreira/redlock-rb `lock(resource, ttl, extend: lock_info)`: its lock script
    /// once with the same value; with `extend_only_if_locked` only where the key still holds it,
    /// otherwise also where the key is gone (re-created).
    RbLock { only_if_locked: bool },
    /// redsync `Extend`: its touch script on every master. `any_reply`: v4.0.0–v4.0.3 count
    /// any reply as success (`status != "ERR"`); `validity`: since v4.4.0 (PR 71) the extension
    /// must end before the new `until` (`mutex.go:113-128` at v4.4.0); `set_nx`:
    /// `WithSetNXOnExtend()` re-creates a missing key.
    Redsync {
        any_reply: bool,
        validity: bool,
        set_nx: bool,
    },
}

fn build_redlock(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    build(params, false)
}

fn build_no_validity(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    build(params, true)
}

const PRESETS: &[&str] = &[
    "leandromoreira/redlock-rb",
    "redlock-rb",
    "leandromoreira/redlock-rb@2.0.1",
    "antirez/redlock-rb",
    "redsync",
    "redsync@4.0.3",
    "redsync@4.0.4",
    "redsync@4.3.0",
    "node-redlock",
    "node-redlock@4.2.0",
    "pottery@3.0.1",
    "aioredlock@0.7.3",
    "redis-semaphore@5.8.0",
];

fn build(params: &mut Params, no_validity: bool) -> Result<Box<dyn LockScheme>, String> {
    let default_preset = if no_validity {
        "node-redlock"
    } else {
        "leandromoreira/redlock-rb"
    };
    let preset = params.choice("preset", PRESETS, default_preset)?;
    if preset == super::pottery::PRESET.name {
        return super::pottery::build(params, no_validity);
    }
    if preset == super::aioredlock::PRESET.name {
        return super::aioredlock::build(params);
    }
    if preset == super::redis_semaphore_redlock::PRESET.name {
        return super::redis_semaphore_redlock::build(params);
    }
    let key = params.key()?;
    let mut s = match preset.as_str() {
        "antirez/redlock-rb" => Redlock {
            errors_abort: false,
            extension: ExtendRule::None,
            library: Library::AntirezRb,
            key,
            ttl_ms: INFO.default_ttl_ms,
            tries: 3,
            delay: Delay::BasePlusJitter,
            retry_delay_ms: 0,
            retry_jitter_ms: 200,
            drift_factor: 0.01,
            drift_const_ms: 2,
            validity: Validity::Positive,
            clock: Clock::Wall,
            fanout: Fanout::Sequential,
            lock_timeout_ms: Some(5000),
            unlock_timeout_ms: Some(5000),
            redsync_pre_4_5: None,
            token: None,
        },
        "redsync" | "redsync@4.0.3" | "redsync@4.0.4" | "redsync@4.3.0" => Redlock {
            redsync_pre_4_5: match preset.as_str() {
                "redsync@4.0.3" => Some(true),
                "redsync@4.0.4" | "redsync@4.3.0" => Some(false),
                _ => None,
            },
            errors_abort: false,
            extension: ExtendRule::Redsync {
                any_reply: preset == "redsync@4.0.3",
                validity: preset == "redsync",
                set_nx: false,
            },
            library: Library::Redsync,
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
            lock_timeout_ms: Some(400),
            unlock_timeout_ms: Some(3000),
            token: None,
        },
        "node-redlock" | "node-redlock@4.2.0" => Redlock {
            errors_abort: false,
            extension: ExtendRule::None,
            library: if preset == "node-redlock@4.2.0" {
                Library::NodeRedlock4
            } else {
                Library::NodeRedlock
            },
            key,
            ttl_ms: INFO.default_ttl_ms,
            tries: 11,
            delay: Delay::Symmetric,
            retry_delay_ms: 200,
            retry_jitter_ms: 100,
            drift_factor: 0.01,
            drift_const_ms: 2,
            // v4.2.0 `redlock.js:415-419`: `votes >= quorum && lock.expiration > Date.now()`.
            validity: if preset == "node-redlock@4.2.0" {
                Validity::Positive
            } else {
                Validity::None
            },
            clock: Clock::Wall,
            // v4.2.0 `redlock.js:408-411`: a try is decided when the last reply came.
            fanout: if preset == "node-redlock@4.2.0" {
                Fanout::ParallelAll
            } else {
                Fanout::ParallelQuorum
            },
            lock_timeout_ms: None,
            unlock_timeout_ms: None,
            redsync_pre_4_5: None,
            token: None,
        },
        _ => Redlock {
            errors_abort: preset == "leandromoreira/redlock-rb@2.0.1",
            extension: ExtendRule::RbLock {
                only_if_locked: false,
            },
            library: Library::LeandroRb,
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
            lock_timeout_ms: Some(100),
            unlock_timeout_ms: Some(100),
            redsync_pre_4_5: None,
            token: None,
        },
    };
    s.ttl_ms = params.positive("ttl_ms", s.ttl_ms)?;
    if s.library == Library::Redsync && s.redsync_pre_4_5.is_none() {
        // redsync (v4.5.0+): timeoutFactor 0.05 of the expiry.
        s.lock_timeout_ms = Some((s.ttl_ms / 20).max(1));
    }
    if s.redsync_pre_4_5.is_some() {
        // Before v4.5.0 no per-call timeout (the client's own, go-redis's read timeout), for
        // locking and unlocking alike (v4.3.0 `mutex.go:51-116`: no context deadline).
        s.lock_timeout_ms = None;
        s.unlock_timeout_ms = None;
    }
    if matches!(preset.as_str(), "redsync@4.0.3" | "redsync@4.0.4") {
        // v4.0.x `redsync.go:27`: `delayFunc` is a constant 500 ms (v4.3.0 `redsync.go:33-35`
        // draws rand[50, 250) as later releases).
        s.retry_delay_ms = 500;
        s.retry_jitter_ms = 0;
    }
    // The Ruby libraries and node-redlock count retries after the first try; redsync counts
    // tries; antirez's `retry_count` is the number of tries.
    let retries_default = match s.library {
        Library::AntirezRb => s.tries,
        _ => s.tries - 1,
    };
    let retry_count = params.u64("retry_count", retries_default)?;
    s.tries = match s.library {
        Library::AntirezRb => retry_count,
        _ => retry_count + 1,
    };
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
    if params.given("instance_timeout_ms") {
        let ms = params.u64("instance_timeout_ms", 0)?;
        s.lock_timeout_ms = (ms > 0).then_some(ms);
        s.unlock_timeout_ms = s.lock_timeout_ms;
    }
    match &mut s.extension {
        ExtendRule::RbLock { only_if_locked } => {
            *only_if_locked = params.bool("extend_only_if_locked", false)?;
        }
        ExtendRule::Redsync { set_nx, .. } => {
            *set_nx = params.bool("set_nx_on_extend", false)?;
        }
        ExtendRule::None => {}
    }
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

/// Drives every future to completion, or until `done` says the outcome is decided; the futures
/// still running then are handed to `env.spawn` so that their requests complete normally.
pub(super) struct Fanin<T> {
    pub(super) futures: Vec<Option<LocalBoxFuture<'static, T>>>,
    pub(super) results: Vec<Option<T>>,
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
pub(super) struct FaninUntil<'a, T, F: Fn(&[Option<T>]) -> bool> {
    pub(super) fanin: &'a mut Fanin<T>,
    pub(super) decided: F,
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

/// One command to one master, bounded by the library's own timeout when it has one.
async fn send(
    env: &Rc<dyn LockEnv>,
    server: usize,
    command: Vec<Vec<u8>>,
    timeout_ms: Option<u64>,
) -> Result<Reply, CallError> {
    match timeout_ms {
        Some(ms) => env.call_with_timeout(server, command, ms).await,
        None => env.call(server, command).await,
    }
}

fn script_command(word: &str, script_or_sha: &str, key: &str, args: &[&str]) -> Vec<Vec<u8>> {
    let mut cmd = argv(&[word, script_or_sha, "1", key]);
    cmd.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    cmd
}

/// `EVALSHA`, and on `NOSCRIPT` what the library does: `EVAL` the text (node-redlock, redsync),
/// or `SCRIPT LOAD` all its scripts and `EVALSHA` once more (leandromoreira/redlock-rb).
async fn evalsha(
    env: &Rc<dyn LockEnv>,
    server: usize,
    library: Library,
    script: &'static str,
    key: &str,
    args: &[&str],
    timeout_ms: Option<u64>,
) -> Result<Reply, CallError> {
    let sha = super::script_sha(script);
    let call = script_command("EVALSHA", &sha, key, args);
    match send(env, server, call.clone(), timeout_ms).await? {
        Reply::Error(e) if e.starts_with(b"NOSCRIPT") => {
            if library == Library::LeandroRb {
                for text in [RB_UNLOCK, RB_LOCK, RB_PTTL] {
                    send(env, server, argv(&["SCRIPT", "LOAD", text]), timeout_ms).await?;
                }
                return send(env, server, call, timeout_ms).await;
            }
            let eval = script_command("EVAL", script, key, args);
            send(env, server, eval, timeout_ms).await
        }
        other => Ok(other),
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

    /// A fresh lock value as the library makes one.
    fn new_value(&self, env: &Rc<dyn LockEnv>) -> String {
        let bytes = |n: usize| -> Vec<u8> {
            (0..n.div_ceil(8))
                .flat_map(|_| env.random_u64().to_le_bytes())
                .take(n)
                .collect()
        };
        match self.library {
            // `b.to_s(32)` of 20 bytes from /dev/urandom.
            Library::AntirezRb => bytes(20).iter().map(|b| base32(*b)).collect(),
            Library::LeandroRb => uuid4(env.as_ref()),
            Library::Redsync => base64(&bytes(16)),
            Library::NodeRedlock | Library::NodeRedlock4 => crate::history::hex(&bytes(16)),
        }
    }

    /// One master's lock command: `Ok(true)` when it granted the lock, the error when the call
    /// failed (timeout, connection).
    fn lock_one(
        &self,
        env: &Rc<dyn LockEnv>,
        server: usize,
        value: &str,
    ) -> LocalBoxFuture<'static, Result<bool, CallError>> {
        let (env, key, value) = (env.clone(), self.key.clone(), value.to_string());
        let (ttl, timeout, library) = (self.ttl_ms.to_string(), self.lock_timeout_ms, self.library);
        let ttl_ms = self.ttl_ms;
        Box::pin(async move {
            match library {
                Library::AntirezRb => {
                    // `redis.client.call([:set,resource,val,:nx,:px,ttl])` (`redlock.rb:32`):
                    // redis-rb 3.x writes each symbol with `to_s`, lower case as written
                    // (redis/redis-rb@v3.1.0 `lib/redis/connection/command_helper.rb:7-22`).
                    let cmd = argv(&["set", &key, &value, "nx", "px", &ttl]);
                    let reply = send(&env, server, cmd, timeout).await?;
                    Ok(matches!(reply, Reply::Status(ref s) if s == "OK"))
                }
                Library::Redsync => {
                    // go-redis `SetNX` (redis/go-redis@v9.7.0 `string_commands.go:249-267`,
                    // `commands.go:25-27`): `set k v ex s nx` for whole seconds, else `px ms`.
                    let cmd = if ttl_ms.is_multiple_of(1000) {
                        let secs = (ttl_ms / 1000).to_string();
                        argv(&["set", &key, &value, "ex", &secs, "nx"])
                    } else {
                        argv(&["set", &key, &value, "px", &ttl, "nx"])
                    };
                    let reply = send(&env, server, cmd, timeout).await?;
                    Ok(matches!(reply, Reply::Status(ref s) if s == "OK"))
                }
                Library::LeandroRb => {
                    let args = [value.as_str(), &ttl, "yes"];
                    let reply =
                        evalsha(&env, server, library, RB_LOCK, &key, &args, timeout).await?;
                    Ok(matches!(reply, Reply::Status(ref s) if s == "OK"))
                }
                Library::NodeRedlock | Library::NodeRedlock4 => {
                    let script = if library == Library::NodeRedlock4 {
                        NODE4_ACQUIRE
                    } else {
                        NODE_ACQUIRE
                    };
                    let args = [value.as_str(), &ttl];
                    let reply =
                        evalsha(&env, server, library, script, &key, &args, timeout).await?;
                    Ok(matches!(reply, Reply::Integer(1)))
                }
            }
        })
    }

    /// One master's unlock: true when it deleted this value.
    fn unlock_one(
        &self,
        env: &Rc<dyn LockEnv>,
        server: usize,
        value: &str,
        timeout: Option<u64>,
    ) -> LocalBoxFuture<'static, Result<bool, CallError>> {
        let (env, key, value) = (env.clone(), self.key.clone(), value.to_string());
        let (library, redsync_pre_4_5) = (self.library, self.redsync_pre_4_5);
        Box::pin(async move {
            let reply = match library {
                Library::AntirezRb => {
                    // `redis.client.call([:eval,UnlockScript,1,resource,val])` (`redlock.rb:40`).
                    let cmd = script_command("eval", ANTIREZ_UNLOCK, &key, &[&value]);
                    send(&env, server, cmd, timeout).await
                }
                Library::LeandroRb => {
                    evalsha(&env, server, library, RB_UNLOCK, &key, &[&value], timeout).await
                }
                Library::Redsync => {
                    let script = match redsync_pre_4_5 {
                        Some(_) => REDSYNC_4_0_DELETE,
                        None => REDSYNC_DELETE,
                    };
                    let reply =
                        evalsha(&env, server, library, script, &key, &[&value], timeout).await?;
                    // v4.0.3 `status != 0`: any reply that is not an error counts.
                    if redsync_pre_4_5 == Some(true) && !matches!(reply, Reply::Error(_)) {
                        return Ok(true);
                    }
                    Ok(reply)
                }
                Library::NodeRedlock | Library::NodeRedlock4 => {
                    let script = if library == Library::NodeRedlock4 {
                        NODE4_RELEASE
                    } else {
                        NODE_RELEASE
                    };
                    evalsha(&env, server, library, script, &key, &[&value], timeout).await
                }
            };
            reply.map(|r| matches!(r, Reply::Integer(n) if n > 0))
        })
    }

    /// Sends one operation to every master as the library does; returns the per-master
    /// outcomes known when the decision was made.
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

    /// One master's extension of `value`: `Ok(true)` when the library counts it as extended.
    fn extend_one(
        &self,
        env: &Rc<dyn LockEnv>,
        server: usize,
        value: &str,
    ) -> LocalBoxFuture<'static, Result<bool, CallError>> {
        let (env, key, value) = (env.clone(), self.key.clone(), value.to_string());
        // redsync's touches run on the caller's context: go-redis's read timeout, as `Unlock`
        // (its `timeoutFactor` bounds only `lockContext`'s calls, v4.17.0 `mutex.go:107, :122`).
        let timeout = match self.extension {
            ExtendRule::Redsync { .. } => self.unlock_timeout_ms,
            _ => self.lock_timeout_ms,
        };
        let (ttl, library) = (self.ttl_ms.to_string(), self.library);
        let rule = self.extension;
        Box::pin(async move {
            match rule {
                ExtendRule::RbLock { only_if_locked } => {
                    let allow_new_lock = if only_if_locked { "no" } else { "yes" };
                    let args = [value.as_str(), &ttl, allow_new_lock];
                    let reply =
                        evalsha(&env, server, library, RB_LOCK, &key, &args, timeout).await?;
                    Ok(matches!(reply, Reply::Status(ref s) if s == "OK"))
                }
                ExtendRule::Redsync {
                    any_reply, set_nx, ..
                } => {
                    let script = if set_nx {
                        REDSYNC_TOUCH_SET_NX
                    } else {
                        REDSYNC_TOUCH
                    };
                    let args = [value.as_str(), &ttl];
                    let reply =
                        evalsha(&env, server, library, script, &key, &args, timeout).await?;
                    Ok(match reply {
                        // go-redis turns an error reply into `err`.
                        Reply::Error(_) => false,
                        // v4.0.3 `touch`: `status != "ERR"` compares an int64 with a string.
                        _ if any_reply => true,
                        reply => reply != Reply::Integer(0),
                    })
                }
                ExtendRule::None => Ok(false),
            }
        })
    }

    /// Unlocks every master once; how many deleted this value.
    async fn unlock_all(&self, env: &Rc<dyn LockEnv>, value: &str, timeout: Option<u64>) -> usize {
        let results = self
            .fan_out(
                env,
                |s| self.unlock_one(env, s, value, timeout),
                |r| matches!(r, Ok(true)),
            )
            .await;
        results
            .iter()
            .filter(|r| matches!(r, Some(Ok(true))))
            .count()
    }
}

/// Ruby's `Integer#to_s(32)` of one byte.
fn base32(b: u8) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuv";
    if b < 32 {
        (DIGITS[b as usize] as char).to_string()
    } else {
        format!(
            "{}{}",
            DIGITS[(b / 32) as usize] as char,
            DIGITS[(b % 32) as usize] as char
        )
    }
}

/// Go's `base64.StdEncoding` (and Python's `b64encode`).
pub(super) fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |acc, b| (acc << 8) | *b as u32) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[async_trait(?Send)]
impl LockScheme for Redlock {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let quorum = env.servers() / 2 + 1;
        let started = env.mono_ms();
        // antirez, redsync and node-redlock draw one value per lock call; leandromoreira one
        // per try.
        let mut value = self.new_value(env);
        env.register_token(&value);
        let last = RefCell::new(String::new());
        for attempt in 0..self.tries {
            if attempt > 0 && self.library != Library::AntirezRb {
                let delay = self.retry_delay(env);
                if env.mono_ms().saturating_sub(started) + delay > timeout_ms {
                    break;
                }
                env.sleep_ms(delay).await;
                if self.library == Library::LeandroRb {
                    value = self.new_value(env);
                    env.register_token(&value);
                }
            }
            let start = self.now(env);
            let results = if self.errors_abort {
                // redlock-rb ≤ 2.0.1 `lock_instances`: `@servers.select { |s| s.lock ... }`
                // lets the first error escape `lock`: no unlock, no retry (issue 76).
                let mut results = Vec::new();
                for server in 0..env.servers() {
                    let result = self.lock_one(env, server, &value).await;
                    if let Err(e) = result {
                        // The caller gets the exception, not `false`: redis-client's
                        // `ReadTimeoutError` / `ConnectionError` out of `Client#lock`.
                        let class = match e {
                            CallError::Timeout => "RedisClient::ReadTimeoutError",
                            CallError::Disconnected(_) => "RedisClient::ConnectionError",
                        };
                        return Err(format!(
                            "{RAISED}{class} from the lock call to master {} ({e}): the error escapes lock, nothing is unlocked",
                            server + 1
                        ));
                    }
                    results.push(Some(result));
                }
                results
            } else {
                self.fan_out(
                    env,
                    |s| self.lock_one(env, s, &value),
                    |r| matches!(r, Ok(true)),
                )
                .await
            };
            let locked = results
                .iter()
                .filter(|r| matches!(r, Some(Ok(true))))
                .count();
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
                if validity < self.ttl_ms as i64 / 10 {
                    crate::marks::mark(crate::marks::Mark::RedlockGrantLowValidity);
                }
                self.token = Some(value.clone());
                return Ok(Grant {
                    token: value,
                    fence: None,
                });
            }
            crate::marks::mark(if locked >= quorum {
                crate::marks::Mark::RedlockValidityExpired
            } else {
                crate::marks::Mark::RedlockNoQuorum
            });
            *last.borrow_mut() =
                format!("{locked}/{} masters, validity {validity} ms", env.servers());
            // node-redlock keeps what it got and tries again with the same value.
            if self.library != Library::NodeRedlock {
                self.unlock_all(env, &value, self.lock_timeout_ms).await;
            }
            if self.library == Library::AntirezRb {
                let delay = self.retry_delay(env);
                if env.mono_ms().saturating_sub(started) + delay > timeout_ms {
                    break;
                }
                env.sleep_ms(delay).await;
            }
        }
        if self.library == Library::NodeRedlock {
            // "release any partial lock state": one attempt, errors ignored.
            self.unlock_all(env, &value, self.lock_timeout_ms).await;
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
        let quorum = env.servers() / 2 + 1;
        let servers = env.servers();
        if matches!(self.library, Library::LeandroRb | Library::AntirezRb) {
            // `Client#unlock` is `@servers.each { |s| s.unlock(...) }` and
            // `RedisInstance#unlock` rescues every error: it returns the server list whatever
            // the masters answered, so the caller is told nothing (leandromoreira/redlock-rb@2.0.6
            // `client.rb:104-106, :211-219`, @2.0.1 `client.rb:94-96, :177-185`;
            // antirez/redlock-rb@2af803d `redlock.rb:38-44, :85-89`).
            let deleted = self.unlock_all(env, &value, self.unlock_timeout_ms).await;
            return Release {
                ok: true,
                detail: format!(
                    "unlock reports nothing (deleted on {deleted}/{servers} masters, unseen by the caller)"
                ),
            };
        }
        if self.library != Library::NodeRedlock {
            let deleted = self.unlock_all(env, &value, self.unlock_timeout_ms).await;
            return Release {
                ok: deleted >= quorum,
                detail: format!("deleted on {deleted}/{servers} masters"),
            };
        }
        // node-redlock's `release` is `_execute` of the release script with the retry settings:
        // a master where the value is gone votes against, and the release is tried again.
        let mut deleted = 0;
        for attempt in 0..self.tries {
            if attempt > 0 {
                env.sleep_ms(self.retry_delay(env)).await;
            }
            deleted = self.unlock_all(env, &value, self.unlock_timeout_ms).await;
            if deleted >= quorum {
                return Release {
                    ok: true,
                    detail: format!("deleted on {deleted}/{servers} masters"),
                };
            }
        }
        Release {
            ok: false,
            detail: format!(
                "ExecutionError: the operation was unable to achieve a quorum during its retry window (last: deleted on {deleted}/{servers} masters)"
            ),
        }
    }

    fn can_extend(&self) -> bool {
        self.extension != ExtendRule::None
    }

    /// leandromoreira/redlock-rb 2.0.6 `lock(resource, ttl, extend: lock_info)`
    /// (`client.rb:78-98, :266-281, :300-322`): one try of `lock_instances` with the same
    /// value, the same validity rule, and every master unlocked when it fails. redsync
    /// `ExtendContext` (v4.17.0 `mutex.go:157-173, :250-267`; v4.0.3 `mutex.go:93-106,
    /// :183-194`): the touch script on every master in parallel, a quorum of successes, and
    /// since v4.4.0 a new `until` that must still be ahead.
    async fn extend(&mut self, env: &Rc<dyn LockEnv>) -> Extension {
        let Some(value) = self.token.clone() else {
            return Extension {
                ok: false,
                detail: "not acquired".into(),
            };
        };
        let quorum = env.servers() / 2 + 1;
        let servers = env.servers();
        let start = self.now(env);
        let results = self
            .fan_out(
                env,
                |s| self.extend_one(env, s, &value),
                |r| matches!(r, Ok(true)),
            )
            .await;
        let extended = results
            .iter()
            .filter(|r| matches!(r, Some(Ok(true))))
            .count();
        let elapsed = self.now(env) - start;
        let drift = (self.ttl_ms as f64 * self.drift_factor) as i64 + self.drift_const_ms as i64;
        let validity = self.ttl_ms as i64 - elapsed - drift;
        let (ok, checked) = match self.extension {
            ExtendRule::RbLock { .. } => {
                let valid = match self.validity {
                    Validity::NonNegative => validity >= 0,
                    Validity::Positive => validity > 0,
                    Validity::None => true,
                };
                (extended >= quorum && valid, true)
            }
            ExtendRule::Redsync { validity: v, .. } => {
                (extended >= quorum && (!v || validity > 0), v)
            }
            ExtendRule::None => (false, false),
        };
        if !ok && matches!(self.extension, ExtendRule::RbLock { .. }) {
            // `lock_instances` unlocks every master when the try fails.
            self.unlock_all(env, &value, self.lock_timeout_ms).await;
        }
        let validity_note = if checked {
            format!(", validity {validity} ms")
        } else {
            String::new()
        };
        Extension {
            ok,
            detail: format!("extended on {extended}/{servers} masters{validity_note}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::SchemeSpec;
    use crate::locks::testing::{DirectEnv, Shared, block_on, masters};

    fn scheme(json: serde_json::Value) -> Box<dyn LockScheme> {
        SchemeSpec::from_json(&json, "scheme")
            .unwrap()
            .build("scheme")
            .unwrap()
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
    fn each_redlock_rb_sends_what_its_version_sends() {
        let m = masters(3);
        let a = DirectEnv::concrete_multi(&m, "a", 1);
        let env: Rc<dyn LockEnv> = a.clone();
        let mut la = scheme(serde_json::json!({"name": "redlock"}));
        block_on(la.acquire(&env, 10_000)).unwrap();
        block_on(la.release(&env));
        let sent = a.sent.borrow().clone();
        // leandromoreira/redlock-rb 2.0.6: EVALSHA of LOCK_SCRIPT (the SHA-1 of its exact text),
        // NOSCRIPT on a fresh server, SCRIPT LOAD of its three scripts, EVALSHA again.
        assert!(
            sent[0].starts_with("EVALSHA ceb2b2062e40c51a2b3963fd078bc71f11bdc65c 1 lock "),
            "{sent:?}"
        );
        assert!(sent[1..4].iter().all(|c| c.starts_with("SCRIPT LOAD")));
        assert!(sent[4].starts_with("EVALSHA ceb2b"), "{sent:?}");
        assert!(sent[0].ends_with(" 10000 yes"), "{sent:?}");
        assert!(
            sent.iter()
                .any(|c| c.starts_with("EVALSHA 8e4905cee18e7c3188d10f2b8b170e403baed34f")),
            "unlock by EVALSHA of UNLOCK_SCRIPT: {sent:?}"
        );
        assert!(!sent.iter().any(|c| c.starts_with("SET ")));

        let b = DirectEnv::concrete_multi(&m, "b", 2);
        let env: Rc<dyn LockEnv> = b.clone();
        let mut lb = scheme(serde_json::json!({"name": "redlock", "preset": "antirez/redlock-rb"}));
        block_on(lb.acquire(&env, 10_000)).unwrap();
        block_on(lb.release(&env));
        let sent = b.sent.borrow().clone();
        // redis-rb 3.x sends its symbols as written, `nx px` (the test env shows command
        // names in upper case).
        assert!(
            sent[0].starts_with("SET lock ") && sent[0].ends_with(" nx px 10000"),
            "{sent:?}"
        );
        assert!(
            sent[3].starts_with("EVAL \"\\n    if redis.call"),
            "{sent:?}"
        );
    }

    /// node-redlock v5 retries with the same value and keeps the keys it got: its acquire script
    /// votes against a key that holds its own value, so a try that got a minority makes every
    /// later try fail. leandromoreira/redlock-rb unlocks and succeeds on its next try.
    #[test]
    fn node_redlock_keeps_partial_locks_between_retries() {
        let outcome = |preset: &str| {
            let m = masters(5);
            for (i, master) in m.iter().enumerate().take(3) {
                let px = if i == 2 { "50" } else { "60000" };
                master.command(&["SET", "lock", "someone-else", "PX", px]);
            }
            let a = DirectEnv::multi(&m, "a", 1);
            let mut la = scheme(serde_json::json!({"name": "redlock", "preset": preset,
                                                   "retry_count": 2}));
            let result = block_on(la.acquire(&a, 10_000));
            (result.is_ok(), holder(&m[3..]))
        };
        assert_eq!(
            outcome("node-redlock"),
            (false, 0),
            "fails, then releases its partial keys"
        );
        assert_eq!(outcome("leandromoreira/redlock-rb"), (true, 2));
    }

    /// The Ruby libraries' `unlock` returns the server list whatever the masters answered: a
    /// release of a lock that expired everywhere still tells the caller nothing is wrong.
    #[test]
    fn ruby_unlock_reports_nothing_even_when_nothing_was_deleted() {
        for preset in [
            "leandromoreira/redlock-rb",
            "leandromoreira/redlock-rb@2.0.1",
            "antirez/redlock-rb",
        ] {
            let m = masters(3);
            let a = DirectEnv::concrete_multi(&m, "a", 1);
            let env: Rc<dyn LockEnv> = a.clone();
            let mut la = scheme(serde_json::json!({"name": "redlock", "preset": preset}));
            block_on(la.acquire(&env, 10_000)).unwrap();
            for master in &m {
                master.command(&["DEL", "lock"]);
            }
            let release = block_on(la.release(&env));
            assert!(release.ok, "{preset}: {release:?}");
            assert!(
                release.detail.contains("deleted on 0/3"),
                "{preset}: {release:?}"
            );
        }
    }

    /// node-redlock's release retries (10 times, 200 ± 100 ms apart) until a quorum deleted
    /// its value; once the keys expired on a majority it never gets one.
    #[test]
    fn node_redlock_release_retries_until_a_quorum_deletes() {
        let m = masters(5);
        let a = DirectEnv::concrete_multi(&m, "a", 1);
        let env: Rc<dyn LockEnv> = a.clone();
        let mut la = scheme(serde_json::json!({"name": "redlock-no-validity"}));
        block_on(la.acquire(&env, 10_000)).unwrap();
        for master in &m[..3] {
            master.command(&["DEL", "lock"]);
        }
        let before = a.sent.borrow().len();
        let release = block_on(la.release(&env));
        assert!(release.detail.starts_with("ExecutionError"), "{release:?}");
        let release_sha = crate::locks::script_sha(NODE_RELEASE);
        let sent = a.sent.borrow();
        let releases = sent[before..]
            .iter()
            .filter(|c| c.starts_with(&format!("EVALSHA {release_sha}")))
            .count();
        assert_eq!(releases, 11 * 5, "11 attempts on 5 masters");
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

    /// a's lease runs out and b takes the lock; then a extends.
    fn extend_after_b_took_it(json: serde_json::Value) -> Extension {
        let (shared, (a, mut la), (b, mut lb)) = crate::locks::testing::two_clients(json);
        block_on(la.acquire(&a, 1000)).unwrap();
        crate::locks::testing::pass(&shared, 2500);
        let grant = block_on(lb.acquire(&b, 1000)).unwrap();
        let extension = block_on(la.extend(&a));
        assert_eq!(
            shared.command(&["GET", "lock"]),
            Reply::Bulk(grant.token.into_bytes()),
            "an extension never takes another holder's key"
        );
        extension
    }

    #[test]
    fn redsync_4_0_3_counts_a_refused_touch_as_an_extension() {
        let json =
            |preset: &str| serde_json::json!({"name": "redlock", "preset": preset, "ttl_ms": 2000});
        let old = extend_after_b_took_it(json("redsync@4.0.3"));
        assert!(
            old.ok,
            "v4.0.3 compares the integer reply with \"ERR\": {old:?}"
        );
        for fixed in ["redsync@4.0.4", "redsync"] {
            let new = extend_after_b_took_it(json(fixed));
            assert!(!new.ok, "{fixed}: {new:?}");
        }
        let held = extend_after_b_took_it(json("redsync@4.0.4"));
        assert_eq!(held.detail, "extended on 0/1 masters");
    }

    /// a's lease runs out and nobody takes the lock; then a extends. Returns the extension and
    /// the key's value afterwards.
    fn extend_expired(json: serde_json::Value) -> (Extension, Reply) {
        let (shared, (a, mut la), _) = crate::locks::testing::two_clients(json);
        block_on(la.acquire(&a, 1000)).unwrap();
        crate::locks::testing::pass(&shared, 2500);
        assert_eq!(shared.command(&["GET", "lock"]), Reply::Nil);
        let extension = block_on(la.extend(&a));
        (extension, shared.command(&["GET", "lock"]))
    }

    #[test]
    fn extensions_that_re_create_an_expired_key_and_those_that_refuse() {
        let recreating = [
            serde_json::json!({"name": "redlock", "preset": "redsync", "ttl_ms": 2000, "set_nx_on_extend": true}),
            serde_json::json!({"name": "redlock", "ttl_ms": 2000}),
        ];
        for json in recreating {
            let (extension, value) = extend_expired(json.clone());
            assert!(extension.ok, "{json}: {extension:?}");
            assert_ne!(value, Reply::Nil, "{json}: the key is set again");
        }
        let refusing = [
            serde_json::json!({"name": "redlock", "preset": "redsync", "ttl_ms": 2000}),
            serde_json::json!({"name": "redlock", "ttl_ms": 2000, "extend_only_if_locked": true}),
        ];
        for json in refusing {
            let (extension, value) = extend_expired(json.clone());
            assert!(!extension.ok, "{json}: {extension:?}");
            assert_eq!(value, Reply::Nil, "{json}");
        }
    }

    #[test]
    fn a_held_lock_is_extended_and_only_libraries_with_an_extend_can() {
        let (shared, (a, mut la), _) = crate::locks::testing::two_clients(
            serde_json::json!({"name": "redlock", "preset": "redsync", "ttl_ms": 2000}),
        );
        block_on(la.acquire(&a, 1000)).unwrap();
        crate::locks::testing::pass(&shared, 1500);
        assert!(block_on(la.extend(&a)).ok);
        assert!(matches!(shared.command(&["PTTL", "lock"]), Reply::Integer(ms) if ms > 1900));
        for preset in ["antirez/redlock-rb", "node-redlock"] {
            let s = scheme(serde_json::json!({"name": "redlock", "preset": preset}));
            assert!(!s.can_extend(), "{preset}");
        }
    }

    #[test]
    fn redlock_rb_2_0_1_lets_a_lock_call_error_escape_without_unlocking() {
        use crate::locks::testing::Mishap;
        let run = |preset: &str| {
            let shared = Shared::new();
            for script in [RB_UNLOCK, RB_LOCK, RB_PTTL] {
                shared.command(&["SCRIPT", "LOAD", script]);
            }
            let a = DirectEnv::concrete(&shared, "a", 1);
            a.mishap("EVALSHA", Mishap::LoseReply);
            let a: Rc<dyn LockEnv> = Rc::new(a);
            let mut la =
                scheme(serde_json::json!({"name": "redlock", "preset": preset, "ttl_ms": 10000}));
            let result = block_on(la.acquire(&a, 300));
            (result, shared.command(&["EXISTS", "lock"]))
        };
        let (old, left) = run("leandromoreira/redlock-rb@2.0.1");
        let raised = old.unwrap_err();
        assert!(
            raised.starts_with(RAISED) && raised.contains("nothing is unlocked"),
            "the caller gets an exception, not a refusal: {raised}"
        );
        assert_eq!(left, Reply::Integer(1), "2.0.1 leaves the key it set");
        let (_, left) = run("leandromoreira/redlock-rb");
        assert_eq!(
            left,
            Reply::Integer(0),
            "2.0.6 unlocks every server after an error"
        );
    }

    #[test]
    fn node_redlock_4_2_0_checks_the_expiration_that_v5_ignores() {
        use crate::locks::testing::Mishap;
        let run = |preset: &str| {
            let shared = Shared::new();
            let a = DirectEnv::concrete(&shared, "a", 1);
            a.mishap("EVAL", Mishap::PauseAfter(3000));
            let a: Rc<dyn LockEnv> = Rc::new(a);
            let mut la = scheme(
                serde_json::json!({"name": "redlock", "preset": preset, "ttl_ms": 2000, "retry_count": 0}),
            );
            block_on(la.acquire(&a, 10_000))
        };
        assert!(
            run("node-redlock").is_ok(),
            "v5 takes a lock that expired while it paused"
        );
        assert!(run("node-redlock@4.2.0").is_err());
    }
}
