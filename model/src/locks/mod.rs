//! Lock schemes: the client-side algorithms, one file each, written against two small traits so
//! they run unchanged in the simulated world (`sim`) and against the bare model in unit tests.
//!
//! - [`LockEnv`]: what a client process can do — send a command to a Redis server and await the
//!   reply (or its own timeout), read its clocks, sleep, draw random numbers, run a background task.
//! - [`LockScheme`]: acquire (retrying until a deadline) and release, exactly as the source does.
//!
//! Every scheme cites its source; where a seed article gets something wrong, the scheme does it
//! wrong the same way, so the testbed can show the consequence.

pub mod aioredlock;
pub mod fair;
pub mod fencing;
pub mod incr_semaphore;
pub mod lua_setnx_expire;
pub mod params;
pub mod portalocker;
pub mod pottery;
pub mod python_redis_lock;
pub mod redis_semaphore;
pub mod redis_semaphore_redlock;
pub mod redisson;
pub mod redlock;
pub mod reentrant;
pub mod script;
pub mod set;
pub mod set_nx_px_del;
pub mod set_nx_px_get_del;
pub mod set_nx_px_lua;
pub mod setex;
pub mod setnx_del;
pub mod setnx_expire;
pub mod setnx_getset;
pub mod virtual_time;
pub mod watchdog;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::redis::Reply;
pub use params::{ParamKind, Params, SchemeSpec, declared_params};

/// A `!Send` boxed future: clients run on one simulated node, on one thread.
pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// How a scheme's `Err` (or a release's or extension's detail) starts when the library raises
/// the failure to its caller as an exception rather than answering no (`false`, a refusal):
/// the conformance suite tells the two apart.
pub const RAISED: &str = "raised: ";

/// Why a command got no reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The client's own command timeout passed. The server may still execute the command.
    Timeout,
    /// The connection could not be opened or broke (peer crashed, connection dropped).
    Disconnected(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Timeout => write!(f, "timeout"),
            CallError::Disconnected(why) => write!(f, "disconnected: {why}"),
        }
    }
}

/// A background task of a client (a watchdog). Dropping the guard does not stop it; `cancel` does.
pub trait TaskGuard {
    fn cancel(&self);
}

/// A subscription to one pub/sub channel on one server, on a connection of its own: how
/// Redisson waits for an unlock message instead of polling (RedissonLock `subscribe` +
/// `LockPubSub`), and portalocker's `RedisLock` holds its lock (the subscription *is* the lock,
/// portalocker 4.4.2 `portalocker/redis.py:14-21`).
#[async_trait(?Send)]
pub trait Subscription {
    /// The next message published on the channel, or `None` once `timeout_ms` (by the client's
    /// clock) passed or the connection broke.
    async fn next_message(&self, timeout_ms: u64) -> Option<Vec<u8>>;
    /// Whether the connection is gone: closed here, killed by the server (`CLIENT KILL`) or
    /// broken. `next_message` then only ever answers `None`.
    fn closed(&self) -> bool;
    /// Closes the connection without `UNSUBSCRIBE`, as redis-py's `PubSub.close()` does: the
    /// server drops the subscription with the connection.
    fn close(&self);
    /// Sends `UNSUBSCRIBE <channel>` and reads up to its confirmation, dropping messages still
    /// in flight; the connection stays open, out of subscribed mode (Redisson's
    /// `PublishSubscribeService.unsubscribe`, which keeps it in its pool). Nothing to do on a
    /// closed connection; a failure closes it (the server then drops the subscription too).
    async fn unsubscribe(&self);
}

/// Whether `reply` is the server's confirmation of an `UNSUBSCRIBE` (`["unsubscribe", channel,
/// count]`, an array in RESP2 and a push in RESP3, `pubsub.c` `addReplyPubsubUnsubscribed`).
pub fn is_unsubscribe_confirmation(reply: &Reply) -> bool {
    matches!(reply, Reply::Array(parts) | Reply::Push(parts)
        if parts.first().and_then(Reply::as_bulk) == Some(b"unsubscribe"))
}

/// The world as one lock client sees it.
#[async_trait(?Send)]
pub trait LockEnv {
    /// This client's node name (`client-1`).
    fn name(&self) -> &str;
    /// How many independent Redis masters the client knows (Redlock uses them all).
    fn servers(&self) -> usize;
    /// How many replicas each master has (Redisson 3.12 sends `WAIT` after locking when its
    /// Sentinel reported any).
    fn replicas(&self) -> usize;
    /// Whether the client finds its masters through Sentinel (Redisson's `useSentinelServers`,
    /// which sends `WAIT` after lock scripts) rather than being given their addresses
    /// (`useSingleServer`, which never does).
    fn sentinel(&self) -> bool {
        false
    }
    /// Sends one command to master `server` and awaits its reply, or the client's command timeout.
    async fn call(&self, server: usize, argv: Vec<Vec<u8>>) -> Result<Reply, CallError>;
    /// As `call`, but waits `timeout_ms` by the client's clock instead of the workload's command
    /// timeout: for a library whose own response timeout the scheme models (Redisson's `timeout`).
    async fn call_with_timeout(
        &self,
        server: usize,
        argv: Vec<Vec<u8>>,
        timeout_ms: u64,
    ) -> Result<Reply, CallError> {
        let _ = timeout_ms;
        self.call(server, argv).await
    }
    /// Opens a dedicated connection to master `server` subscribed to `channel`; with a
    /// `client_name`, the connection first sends `CLIENT SETNAME` (redis-py's `client_name`
    /// connection argument, `redis/connection.py` `on_connect`).
    async fn subscribe(
        &self,
        server: usize,
        channel: &str,
        client_name: Option<&str>,
    ) -> Result<Box<dyn Subscription>, CallError>;
    /// The client's wall clock (Unix ms): `System.currentTimeMillis()`; it can jump.
    fn wall_ms(&self) -> i64;
    /// The client's monotonic clock (ms since the client started): `System.nanoTime()`; it can
    /// drift but never jumps.
    fn mono_ms(&self) -> u64;
    async fn sleep_ms(&self, ms: u64);
    /// The client's own deterministic random stream.
    fn random_u64(&self) -> u64;
    /// Tells the world which value this client writes into the lock key, so a server-side key
    /// change can be attributed to its owner (for the timeline and the foreign-release count).
    fn register_token(&self, token: &str);
    /// Runs `task` in the background on this client's node (it stops when the node pauses or dies).
    fn spawn(&self, task: LocalBoxFuture<'static, ()>) -> Box<dyn TaskGuard>;
}

/// What a successful acquire gives the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The value that identifies this holder in Redis.
    pub token: String,
    /// A fencing token, for schemes that issue one (Kleppmann 2016).
    pub fence: Option<u64>,
}

/// The scheme's own view of how a release went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    pub ok: bool,
    pub detail: String,
}

/// The library's own answer to an extension of the lease (`clients.extend`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extension {
    pub ok: bool,
    pub detail: String,
}

/// A lock client algorithm. One instance per client (per lock object in the source's terms).
#[async_trait(?Send)]
pub trait LockScheme {
    /// Tries until the lock is held or `timeout_ms` has passed by the scheme's own clock.
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String>;
    /// Releases what the last successful `acquire` got.
    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release;

    /// Another handle onto this same lock object, for another thread of the same process
    /// (`clients.threads` > 1). Schemes whose source keeps per-object state that threads share
    /// (seed 003's one clientId per lock instance, Redisson's one client UUID and renewal map)
    /// return one over the shared state; each handle keeps what the source keeps per thread
    /// (a `ThreadLocal` count, a thread id). The default, `None`, means the source has no such
    /// state: every thread builds its own instance.
    fn share(&self) -> Option<Box<dyn LockScheme>> {
        None
    }

    /// Whether the library followed (with these parameters) has an operation that extends a
    /// held lock's lease, which `clients.extend` calls. Schemes without one make a scenario
    /// that asks for extensions an error naming `clients.extend`.
    fn can_extend(&self) -> bool {
        false
    }

    /// Extends the lease of what the last successful `acquire` got, exactly as the library's
    /// extend operation does, including what it answers when the lock is no longer the
    /// client's. Only called when `can_extend`.
    async fn extend(&mut self, env: &Rc<dyn LockEnv>) -> Extension {
        let _ = env;
        Extension {
            ok: false,
            detail: "this scheme has no extend operation".into(),
        }
    }
}

/// A scheme's entry in the catalog: `locksim schemes` prints it; `build` makes a client instance.
pub struct SchemeInfo {
    pub id: &'static str,
    pub summary: &'static str,
    pub source: &'static str,
    /// The lease of the source's defaults, when the scenario does not give `ttl_ms`.
    pub default_ttl_ms: u64,
    /// The group the comparison matrix shows it in.
    pub family: Family,
    /// What its `ttl_ms` is (a scenario's `lease_ms` sets it where there is one).
    pub lease: Lease,
    /// Whether `"schemes": "all"` runs it (not `script`, which needs its scripts).
    pub in_all: bool,
    /// Its named presets besides the default, each a row of `locksim schemes`.
    pub presets: &'static [PresetInfo],
    pub build: fn(&mut Params) -> Result<Box<dyn LockScheme>, String>,
}

/// What a scheme's lease is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    /// None: the key stays until someone deletes it (`set`, `incr-semaphore`, `setnx-del`,
    /// redis-py's `timeout=None`).
    None,
    /// `ttl_ms`, sent in milliseconds.
    Ms,
    /// `ttl_ms`, which the source sends in whole seconds (`SETEX`, `EXPIRE`): a multiple of 1000.
    Seconds,
}

/// A named preset: a library at a version, or another setting of the same algorithm.
pub struct PresetInfo {
    pub name: &'static str,
    pub summary: &'static str,
    pub lease: Lease,
    /// The row that runs this very algorithm when it is not a row of its own
    /// (`redlock` with `node-redlock` is `redlock-no-validity`).
    pub same_as: Option<&'static str>,
}

/// The groups of the comparison matrix, in the order it shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    /// `SET` / `SETEX` without NX: every client "holds" the lock at once.
    NoExclusion,
    /// Exclusion from SETNX or a counter, the TTL (if any) a separate step or the client's clock.
    TwoStep,
    /// One atomic `SET NX PX` on one instance.
    SetNxPx,
    /// A lease renewed while held (watchdogs, Redisson).
    Renewed,
    /// Redlock over independent masters.
    Redlock,
    /// A lease plus a fencing token the resource checks.
    Fencing,
}

impl Family {
    pub const ALL: [Family; 6] = [
        Family::NoExclusion,
        Family::TwoStep,
        Family::SetNxPx,
        Family::Renewed,
        Family::Redlock,
        Family::Fencing,
    ];

    /// The group's heading in reports.
    pub fn title(self) -> &'static str {
        match self {
            Family::NoExclusion => "no exclusion (SET, SETEX)",
            Family::TwoStep => "SETNX / counter, two steps",
            Family::SetNxPx => "SET NX PX, one instance",
            Family::Renewed => "renewed leases",
            Family::Redlock => "Redlock, independent masters",
            Family::Fencing => "fencing tokens",
        }
    }
}

/// One row of the comparison: a scheme with its default settings, or one of its presets.
#[derive(Clone, Copy)]
pub struct Row {
    pub scheme: &'static SchemeInfo,
    pub preset: Option<&'static PresetInfo>,
}

impl Row {
    /// `id`, or `id:preset` (as `SchemeSpec::label`).
    pub fn label(&self) -> String {
        match self.preset {
            Some(p) => format!("{}:{}", self.scheme.id, p.name),
            None => self.scheme.id.to_string(),
        }
    }

    pub fn summary(&self) -> &'static str {
        self.preset.map_or(self.scheme.summary, |p| p.summary)
    }

    pub fn lease(&self) -> Lease {
        self.preset.map_or(self.scheme.lease, |p| p.lease)
    }

    /// The scheme object a scenario would write for this row.
    pub fn spec_json(&self) -> serde_json::Value {
        match self.preset {
            Some(p) => serde_json::json!({ "name": self.scheme.id, "preset": p.name }),
            None => serde_json::json!({ "name": self.scheme.id }),
        }
    }
}

/// Every row of `locksim schemes`, in catalog order: each scheme, then its named presets
/// (including those that only stand for another row).
pub fn all_rows() -> Vec<Row> {
    SCHEMES
        .iter()
        .flat_map(|scheme| {
            std::iter::once(Row {
                scheme,
                preset: None,
            })
            .chain(scheme.presets.iter().map(move |p| Row {
                scheme,
                preset: Some(p),
            }))
        })
        .collect()
}

/// The rows `"schemes": "all"` runs: every row of `locksim schemes` except `script` (it needs
/// scripts) and presets that stand for another row.
pub fn matrix_rows() -> Vec<Row> {
    all_rows()
        .into_iter()
        .filter(|r| r.scheme.in_all && r.preset.is_none_or(|p| p.same_as.is_none()))
        .collect()
}

/// Every scheme, by stable id (DESIGN.md's table).
pub const SCHEMES: &[SchemeInfo] = &[
    set::INFO,
    setex::INFO,
    incr_semaphore::INFO,
    setnx_del::INFO,
    setnx_expire::INFO,
    setnx_getset::INFO,
    lua_setnx_expire::INFO,
    set_nx_px_del::INFO,
    set_nx_px_get_del::INFO,
    set_nx_px_lua::INFO,
    watchdog::INFO,
    reentrant::INFO,
    redisson::INFO,
    fair::INFO,
    redlock::INFO,
    redlock::NO_VALIDITY_INFO,
    fencing::INFO,
    portalocker::INFO,
    script::INFO,
];

pub fn scheme_info(id: &str) -> Option<&'static SchemeInfo> {
    SCHEMES.iter().find(|s| s.id == id)
}

/// A random lock value: 20 random bytes in hex, as redis.io's single-instance pattern suggests
/// ("a random string ... 20 bytes from /dev/urandom").
pub fn random_token(env: &dyn LockEnv) -> String {
    let mut out = String::with_capacity(40);
    for _ in 0..3 {
        out.push_str(&format!("{:016x}", env.random_u64()));
    }
    out.truncate(40);
    out
}

/// A draw in [0, 1) from the client's stream, as Python's `random.random()` makes one: 53
/// random bits.
pub fn unit_random(env: &dyn LockEnv) -> f64 {
    (env.random_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Java's `UUID.randomUUID().toString()`: a version-4 UUID, lower-case hex with dashes.
pub fn uuid4(env: &dyn LockEnv) -> String {
    let (hi, lo) = (env.random_u64(), env.random_u64());
    let hi = (hi & !0xf000) | 0x4000; // version 4
    let lo = (lo & !(0b11 << 62)) | (0b10 << 62); // IETF variant
    dashed(hi, lo)
}

/// Python's `uuid.uuid1()`: a version-1 UUID from the client's *wall* clock (100 ns ticks since
/// 1582-10-15), a random 14-bit clock sequence and a random node id with the multicast bit set
/// (what Python uses when it cannot read a MAC address). The sub-millisecond ticks are random,
/// standing in for Python's guarantee that two calls never give the same timestamp.
pub fn uuid1(env: &dyn LockEnv) -> String {
    const GREGORIAN_OFFSET_TICKS: u64 = 0x01b2_1dd2_1381_4000;
    let ms = env.wall_ms().max(0) as u64;
    let ticks = GREGORIAN_OFFSET_TICKS + ms * 10_000 + env.random_u64() % 10_000;
    let time_low = ticks & 0xffff_ffff;
    let time_mid = (ticks >> 32) & 0xffff;
    let time_hi = ((ticks >> 48) & 0x0fff) | 0x1000; // version 1
    let clock_seq = (env.random_u64() & 0x3fff) | 0x8000; // IETF variant
    let node = (env.random_u64() & 0xffff_ffff_ffff) | 0x0100_0000_0000; // multicast bit
    let hi = (time_low << 32) | (time_mid << 16) | time_hi;
    let lo = (clock_seq << 48) | node;
    dashed(hi, lo)
}

fn dashed(hi: u64, lo: u64) -> String {
    let hex = format!("{hi:016x}{lo:016x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A UUID without its dashes: seed 000's `UUID.randomUUID().toString().replace("-","")`,
/// Python's `uuid.uuid1().hex`.
pub fn undashed(uuid: &str) -> String {
    uuid.replace('-', "")
}

/// Sends one command given as words.
pub async fn command(
    env: &Rc<dyn LockEnv>,
    server: usize,
    words: &[&str],
) -> Result<Reply, CallError> {
    env.call(server, argv(words)).await
}

/// Whole seconds for a source that takes seconds (`SETEX`, `EXPIRE`): `ttl_ms` must be a
/// positive multiple of 1000, else an error naming the field.
pub fn whole_seconds(params: &mut Params, default_ms: u64) -> Result<u64, String> {
    let ttl_ms = params.positive("ttl_ms", default_ms)?;
    if ttl_ms % 1000 != 0 {
        return Err(format!(
            "{}.ttl_ms: this scheme's source sets the TTL in whole seconds: give a multiple of 1000, got {ttl_ms}",
            params.field()
        ));
    }
    Ok(ttl_ms / 1000)
}

/// A release that did not happen because nothing was acquired.
pub fn not_acquired() -> Release {
    Release {
        ok: false,
        detail: "not acquired".into(),
    }
}

/// Converts command words to argv.
pub fn argv(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// The compare-and-delete release script of redis.io's single-instance pattern and seeds 000–004.
pub const COMPARE_AND_DELETE: &str = "if redis.call(\"get\",KEYS[1]) == ARGV[1] then\n    return redis.call(\"del\",KEYS[1])\nelse\n    return 0\nend";

/// EVAL a script with keys and args.
pub async fn eval(
    env: &Rc<dyn LockEnv>,
    server: usize,
    script: &str,
    keys: &[&str],
    args: &[&str],
) -> Result<Reply, CallError> {
    let mut cmd = vec![
        b"EVAL".to_vec(),
        script.as_bytes().to_vec(),
        keys.len().to_string().into_bytes(),
    ];
    cmd.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
    cmd.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    env.call(server, cmd).await
}

/// The sha1 of one of our lock scripts, hashed once per process as the libraries hash theirs
/// once per script object (redis-py `Script.__init__`, redsync `NewScript`, Redisson's script
/// cache); hashed on every call it was 1 % of a Redlock run (issue 15). Keyed by the text's
/// address: the scripts are constants.
pub fn script_sha(script: &'static str) -> Arc<str> {
    static SHAS: Mutex<BTreeMap<(usize, usize), Arc<str>>> = Mutex::new(BTreeMap::new());
    let key = (script.as_ptr() as usize, script.len());
    let mut shas = SHAS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    shas.entry(key)
        .or_insert_with(|| crate::redis::lua::sha1_hex(script.as_bytes()).into())
        .clone()
}

/// `EVAL script` or `EVALSHA sha` (`word`, `body`) with its keys and arguments.
fn script_command(word: &str, body: &str, keys: &[&str], args: &[&str]) -> Vec<Vec<u8>> {
    let mut cmd = vec![
        word.as_bytes().to_vec(),
        body.as_bytes().to_vec(),
        keys.len().to_string().into_bytes(),
    ];
    cmd.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
    cmd.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    cmd
}

/// A script object as redis-py's `register_script` makes one (and Jedis/Redisson's script
/// caches): `EVALSHA sha`, and on `NOSCRIPT` a `SCRIPT LOAD` then `EVALSHA` again.
pub async fn evalsha(
    env: &Rc<dyn LockEnv>,
    server: usize,
    script: &'static str,
    keys: &[&str],
    args: &[&str],
) -> Result<Reply, CallError> {
    let sha = script_sha(script);
    let call = |sha: &str| script_command("EVALSHA", sha, keys, args);
    match env.call(server, call(&sha)).await? {
        Reply::Error(e) if e.starts_with(b"NOSCRIPT") => {
            env.call(
                server,
                vec![
                    b"SCRIPT".to_vec(),
                    b"LOAD".to_vec(),
                    script.as_bytes().to_vec(),
                ],
            )
            .await?;
            env.call(server, call(&sha)).await
        }
        reply => Ok(reply),
    }
}

/// A script as Spring Data Redis's `DefaultScriptExecutor` runs one: `EVALSHA`, and on
/// `NOSCRIPT` the text by `EVAL` (spring-projects/spring-data-redis `ScriptUtils`).
pub async fn evalsha_or_eval(
    env: &Rc<dyn LockEnv>,
    server: usize,
    script: &'static str,
    keys: &[&str],
    args: &[&str],
) -> Result<Reply, CallError> {
    let command = |word: &str, body: &str| script_command(word, body, keys, args);
    match env
        .call(server, command("EVALSHA", &script_sha(script)))
        .await?
    {
        Reply::Error(e) if e.starts_with(b"NOSCRIPT") => {
            env.call(server, command("EVAL", script)).await
        }
        reply => Ok(reply),
    }
}

/// Retries `attempt` every `retry_delay_ms` until it yields a grant or the deadline (by the
/// client's monotonic clock) passes. Most single-instance sources loop exactly like this.
pub async fn retry_until<F>(
    env: &Rc<dyn LockEnv>,
    timeout_ms: u64,
    retry_delay_ms: u64,
    mut attempt: F,
) -> Result<Grant, String>
where
    F: AsyncFnMut() -> Option<Grant>,
{
    try_until(
        env,
        timeout_ms,
        retry_delay_ms,
        async || Ok(attempt().await),
    )
    .await
}

/// As [`retry_until`], for an attempt that can also give up at once: `Err(reason)` ends the
/// acquire with that reason, where retrying could only fail the same way.
pub async fn try_until<F>(
    env: &Rc<dyn LockEnv>,
    timeout_ms: u64,
    retry_delay_ms: u64,
    mut attempt: F,
) -> Result<Grant, String>
where
    F: AsyncFnMut() -> Result<Option<Grant>, String>,
{
    let start = env.mono_ms();
    loop {
        if let Some(grant) = attempt().await? {
            return Ok(grant);
        }
        if env.mono_ms().saturating_sub(start) + retry_delay_ms > timeout_ms {
            return Err(format!("not acquired within {timeout_ms} ms"));
        }
        env.sleep_ms(retry_delay_ms).await;
    }
}

#[cfg(test)]
pub mod testing;
