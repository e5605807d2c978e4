//! Lock schemes: the client-side algorithms, one file each, written against two small traits so
//! they run unchanged in the simulated world (`sim`) and against the bare model in unit tests.
//!
//! - [`LockEnv`]: what a client process can do — send a command to a Redis server and await the
//!   reply (or its own timeout), read its clocks, sleep, draw random numbers, run a background task.
//! - [`LockScheme`]: acquire (retrying until a deadline) and release, exactly as the source does.
//!
//! Every scheme cites its source; where a seed article gets something wrong, the scheme does it
//! wrong the same way, so the testbed can show the consequence.

pub mod fencing;
pub mod params;
pub mod redlock;
pub mod set_nx_px_lua;

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use async_trait::async_trait;

use crate::redis::Reply;
pub use params::{Params, SchemeSpec};

/// A `!Send` boxed future: clients run on one simulated node, on one thread.
pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

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

/// A subscription to one pub/sub channel on one server: how Redisson waits for an unlock
/// message instead of polling (RedissonLock `subscribe` + `LockPubSub`).
#[async_trait(?Send)]
pub trait Subscription {
    /// The next message published on the channel, or `None` once `timeout_ms` (by the client's
    /// clock) passed or the connection broke.
    async fn next_message(&self, timeout_ms: u64) -> Option<Vec<u8>>;
}

/// The world as one lock client sees it.
#[async_trait(?Send)]
pub trait LockEnv {
    /// This client's node name (`client-1`).
    fn name(&self) -> &str;
    /// How many independent Redis masters the client knows (Redlock uses them all).
    fn servers(&self) -> usize;
    /// How many replicas each master has (Redisson sends `WAIT` after locking when there are any).
    fn replicas(&self) -> usize;
    /// Sends one command to master `server` and awaits its reply, or the client's command timeout.
    async fn call(&self, server: usize, argv: Vec<Vec<u8>>) -> Result<Reply, CallError>;
    /// Opens a dedicated connection to master `server` subscribed to `channel`.
    async fn subscribe(
        &self,
        server: usize,
        channel: &str,
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

/// A lock client algorithm. One instance per client (per lock object in the source's terms).
#[async_trait(?Send)]
pub trait LockScheme {
    /// Tries until the lock is held or `timeout_ms` has passed by the scheme's own clock.
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String>;
    /// Releases what the last successful `acquire` got.
    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release;
}

/// A scheme's entry in the catalog: `locksim schemes` prints it; `build` makes a client instance.
pub struct SchemeInfo {
    pub id: &'static str,
    pub summary: &'static str,
    pub source: &'static str,
    /// The lease of the source's defaults, when the scenario does not give `ttl_ms`.
    pub default_ttl_ms: u64,
    pub build: fn(&mut Params) -> Result<Box<dyn LockScheme>, String>,
}

/// Every scheme, by stable id (DESIGN.md's table).
pub const SCHEMES: &[SchemeInfo] = &[
    set_nx_px_lua::INFO,
    fencing::INFO,
    redlock::INFO,
    redlock::NO_VALIDITY_INFO,
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
    let start = env.mono_ms();
    loop {
        if let Some(grant) = attempt().await {
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
