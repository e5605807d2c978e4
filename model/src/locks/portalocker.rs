//! `pubsub`: a lock held by a pub/sub subscription instead of a key — portalocker's
//! `RedisLock` (wolph/portalocker@v4.4.2, `portalocker/redis.py`; every `:line` below is in that
//! file). Nothing expires: the lock lasts while the holder's subscription connection does, and
//! a waiter that finds a subscriber silent kills its connection.
//!
//! An exclusive `acquire(timeout)` (`acquire`, :3132-3292) makes attempts paced by
//! `_timeout_generator` (:1167-1221: the first at once, then `check_interval × U[0.5, 1.5)`,
//! never past the deadline); each attempt (`_acquire_attempt`, :3294-3358):
//! 1. opens a new subscription client named `<channel>-lock-<holder_id>` (`client_name`,
//!    :1110-1133; `_make_subscription_client`, :1299-1344: `CLIENT SETNAME` in the handshake)
//!    and `SUBSCRIBE <channel>` (`_start_subscription`, :1421-1449), whose reader thread
//!    (`PubSubWorkerThread`, :457-603, reading every `thread_sleep_time`) answers every ping on
//!    the channel by `PUBLISH <response_channel> {"holder_id": ..., "mode": ..., "protocol": 1,
//!    "elected": ...}` on the command connection (`channel_handler`, :1013-1107);
//! 2. counts the channel's subscribers (`PUBSUB NUMSUB`, :1009-1011): alone, it takes the lock
//!    (:3402-3405); otherwise it probes (`_collect_lock_holders`, :2312-2493): subscribes to a
//!    private `<channel>-<uuid4 hex>`, counts again, publishes `{"message": "ping",
//!    "response_channel": ...}` on the channel, drains the replies (`_drain_probe_replies`,
//!    :2247-2310), counting again while some are missing, and once more at the end; a count
//!    that moved makes the probe inconclusive, and fewer replies than subscribers kill the
//!    silent holders' connections (`CLIENT LIST`, `CLIENT KILL ID`, `_kill_unavailable_locks`,
//!    :2173-2245) and make it inconclusive too;
//! 3. decides (`_resolve_lock_holders`, :2712-2819, `_resolve_exclusive_writer`, :2821-2927,
//!    `_writer_is_elected`, :2534-2643, `_must_forfeit`, :2645-2710): an exclusive holder
//!    present, a lost election or an inconclusive probe drop the subscription (`_unsubscribe`,
//!    :3844-3959) and the attempt fails; the lowest pending holder id wins;
//! 4. confirms a promotion (`_confirm_exclusive_promotion`, :2999-3097): counts again, alone
//!    confirms, else one more probe judged by `_confirm_probe_verdict` (:2929-2997).
//!
//! After the last attempt `release()` and `AlreadyLocked` (:3291-3292): a refusal. `release()`
//! (:4006-4090) stops the reader thread, joins it (the thread notices within its current read
//! of `thread_sleep_time`), closes the connection (no `UNSUBSCRIBE`: the thread's `pubsub.close()`
//! already dropped it) and sleeps 10 ms (:3917-3925): no command at all. A holder whose
//! connection is killed or breaks has lost the lock (`_on_worker_exception`, :1518-1638); its
//! `release()` still succeeds. Not modelled: shared (reader) locks, `fencing`,
//! `self_check_interval` (all off by default), and portalocker ≤ 3.2.0 holders (replies that
//! are not holder records count as legacy exclusive holders, as the source does).
//!
//! Parameters: `key` (the channel, `lock`), `check_interval_ms` (250, `utils.py:67`),
//! `thread_sleep_time_ms` (100, :151), `unavailable_timeout_ms` (1000, :148),
//! `fail_when_locked` (false, `utils.py:68`); the acquire timeout is the workload's.
//!
//! What breaks it: a holder that cannot answer a ping within `unavailable_timeout` (a GC pause,
//! a slow link) is killed by the next waiter, which then takes the lock while the old holder
//! still believes it holds it until its reader notices the dead connection.

use std::cell::Cell;
use std::rc::Rc;

use async_trait::async_trait;
use serde_json::Value;

use super::{
    CallError, Family, Grant, Lease, LockEnv, LockScheme, Params, PresetInfo, RAISED, Release,
    SchemeInfo, Subscription, TaskGuard, argv, undashed, unit_random, uuid4,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "pubsub",
    summary: "the lock is a pub/sub subscription on its own named connection; a waiter counts subscribers, pings them and kills the silent (portalocker RedisLock)",
    source: "wolph/portalocker@v4.4.2 portalocker/redis.py",
    default_ttl_ms: 0,
    family: Family::Renewed,
    lease: Lease::None,
    // A new mechanism: `"schemes": "all"` in the existing catalog stays as it was.
    in_all: false,
    presets: PRESETS,
    build,
};

const PRESETS: &[PresetInfo] = &[PresetInfo {
    name: "portalocker@4.4.2",
    summary: "portalocker 4.4.2 RedisLock, exclusive, its defaults (the scheme's default)",
    lease: Lease::None,
    same_as: Some("pubsub"),
}];

/// `REDIS_LOCK_PROTOCOL_VERSION` (:154).
const PROTOCOL_VERSION: i64 = 1;
/// `_PROBE_REPLY_GRACE` (:161), ms.
const PROBE_REPLY_GRACE_MS: u64 = 5;
/// The `time.sleep(0.01)` after joining the reader thread (:3925), ms.
const JOIN_SETTLE_MS: u64 = 10;

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    params.choice("preset", &["portalocker@4.4.2"], "portalocker@4.4.2")?;
    let channel = params.key()?;
    let config = Config {
        check_interval_ms: params.positive("check_interval_ms", 250)?,
        thread_sleep_time_ms: params.positive("thread_sleep_time_ms", 100)?,
        unavailable_timeout_ms: params.positive("unavailable_timeout_ms", 1000)?,
        fail_when_locked: params.bool("fail_when_locked", false)?,
    };
    Ok(Box::new(PubSubLock {
        channel,
        config,
        holder_id: None,
        state: Rc::new(State::default()),
        subscription: None,
        reader: None,
    }))
}

#[derive(Clone, Copy, Debug)]
struct Config {
    check_interval_ms: u64,
    thread_sleep_time_ms: u64,
    unavailable_timeout_ms: u64,
    fail_when_locked: bool,
}

/// `RedisLockMode` (:397-418).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Mode {
    Exclusive,
    #[default]
    Pending,
    Shared,
}

impl Mode {
    fn wire(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Pending => "pending",
            Mode::Shared => "shared",
        }
    }
}

/// What the lock and its reader task share (`mode`, `writer_elected`, the loss).
#[derive(Default)]
struct State {
    mode: Cell<Mode>,
    elected: Cell<bool>,
    /// The connection died under the reader (`_on_worker_exception`, :1518-1638).
    lost: Cell<bool>,
    /// `PubSubWorkerThread.stop()` was asked (:535-542).
    stop: Cell<bool>,
    /// The reader has ended (a stopped or dead thread).
    reader_done: Cell<bool>,
    /// When the reader's current `get_message(timeout=thread_sleep_time)` ends (client's
    /// monotonic ms): a join waits for it.
    read_until_ms: Cell<u64>,
}

/// One answer to a ping (`RedisLockHolder`, :420-454).
#[derive(Clone, Debug, PartialEq)]
struct Holder {
    id: String,
    mode: Mode,
    legacy: bool,
    elected: Option<bool>,
}

/// `_ConfirmVerdict` (:378-394).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Confirmed,
    Retry,
    Demote,
}

/// `exceptions.AlreadyLocked` raised out of a decision (`fail_when_locked`).
struct AlreadyLocked;

pub struct PubSubLock {
    channel: String,
    config: Config,
    /// `uuid.uuid4().hex`, drawn once per lock object (:922).
    holder_id: Option<String>,
    state: Rc<State>,
    subscription: Option<Rc<dyn Subscription>>,
    reader: Option<Box<dyn TaskGuard>>,
}

/// `_timeout_generator` (:1167-1221): the first turn at once, then each after sleeping
/// `interval × U[0.5, 1.5)` (at most what is left), none once the deadline passed.
struct Turns {
    deadline_ms: u64,
    interval_ms: u64,
    first: bool,
}

impl Turns {
    fn new(env: &Rc<dyn LockEnv>, timeout_ms: u64, interval_ms: u64) -> Turns {
        Turns {
            deadline_ms: env.mono_ms() + timeout_ms,
            interval_ms,
            first: true,
        }
    }

    async fn next(&mut self, env: &Rc<dyn LockEnv>) -> bool {
        if std::mem::take(&mut self.first) {
            return true;
        }
        let now = env.mono_ms();
        if now >= self.deadline_ms {
            return false;
        }
        let jittered = self.interval_ms as f64 * (0.5 + unit_random(env.as_ref()));
        env.sleep_ms((jittered.round() as u64).min(self.deadline_ms - now))
            .await;
        true
    }
}

/// JSON text as Python's `json.dumps` writes it (`", "` and `": "` separators).
fn py_json(fields: &[(&str, Value)]) -> String {
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}: {v}", Value::String((*k).to_string())))
        .collect();
    format!("{{{}}}", body.join(", "))
}

/// `channel_handler` (:1013-1107): a JSON object with a non-empty `response_channel` string
/// gets this holder's record published there on the command connection; anything else is
/// ignored.
async fn answer_ping(env: &Rc<dyn LockEnv>, state: &State, holder_id: &str, payload: &[u8]) {
    let Ok(Value::Object(data)) = serde_json::from_slice::<Value>(payload) else {
        return;
    };
    let Some(Value::String(response_channel)) = data.get("response_channel") else {
        return;
    };
    if response_channel.is_empty() {
        return;
    }
    let record = py_json(&[
        ("holder_id", Value::String(holder_id.to_string())),
        ("mode", Value::String(state.mode.get().wire().to_string())),
        ("protocol", Value::from(PROTOCOL_VERSION)),
        ("elected", Value::Bool(state.elected.get())),
    ]);
    let _ = env
        .call(
            0,
            vec![
                b"PUBLISH".to_vec(),
                response_channel.as_bytes().to_vec(),
                record.into_bytes(),
            ],
        )
        .await;
}

/// `_parse_lock_response` (:2098-2171): a protocol record, or a legacy exclusive holder.
fn parse_holder(payload: &[u8], legacy_index: usize) -> Holder {
    let record = serde_json::from_slice::<Value>(payload).ok().and_then(|v| {
        let data = v.as_object()?;
        if data.get("protocol")?.as_i64()? != PROTOCOL_VERSION {
            return None;
        }
        let id = data.get("holder_id")?.as_str()?.to_string();
        let mode = match data.get("mode")?.as_str()? {
            "exclusive" => Mode::Exclusive,
            "pending" => Mode::Pending,
            "shared" => Mode::Shared,
            _ => return None,
        };
        Some(Holder {
            id,
            mode,
            legacy: false,
            elected: data.get("elected").and_then(Value::as_bool),
        })
    });
    record.unwrap_or_else(|| Holder {
        id: format!("legacy-{legacy_index}"),
        mode: Mode::Exclusive,
        legacy: true,
        elected: None,
    })
}

/// `PUBSUB NUMSUB <channel>`'s count (`_get_subscriber_count`, :1009-1011).
async fn subscriber_count(env: &Rc<dyn LockEnv>, channel: &str) -> Result<i64, CallError> {
    match env.call(0, argv(&["PUBSUB", "NUMSUB", channel])).await? {
        Reply::Array(parts) | Reply::Push(parts) => {
            Ok(parts.get(1).and_then(Reply::as_integer).unwrap_or(0))
        }
        other => Err(CallError::Disconnected(format!(
            "PUBSUB NUMSUB answered {other:?}"
        ))),
    }
}

/// `(id, name)` of every line of a `CLIENT LIST` reply.
fn client_list(reply: &Reply) -> Vec<(String, String)> {
    let text = match reply {
        Reply::Bulk(b) | Reply::Verbatim { text: b, .. } => String::from_utf8_lossy(b).into_owned(),
        _ => return Vec::new(),
    };
    text.lines()
        .map(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                    .unwrap_or("")
                    .to_string()
            };
            (field("id"), field("name"))
        })
        .collect()
}

impl PubSubLock {
    fn holder_id(&self) -> &str {
        self.holder_id.as_deref().unwrap_or("")
    }

    /// `legacy_client_name` (:1135-1165).
    fn legacy_client_name(&self) -> String {
        format!("{}-lock", self.channel)
    }

    /// `_start_subscription` (:1346-1462): the named subscription client, `SUBSCRIBE`, and the
    /// reader task that answers pings until stopped or the connection dies.
    async fn start_subscription(&mut self, env: &Rc<dyn LockEnv>) -> Result<(), CallError> {
        let name = format!("{}-{}", self.legacy_client_name(), self.holder_id());
        let subscription: Rc<dyn Subscription> =
            Rc::from(env.subscribe(0, &self.channel, Some(&name)).await?);
        self.state.lost.set(false);
        self.state.stop.set(false);
        self.state.reader_done.set(false);
        let (sub, state, task_env) = (subscription.clone(), self.state.clone(), env.clone());
        let holder_id = self.holder_id().to_string();
        let sleep_ms = self.config.thread_sleep_time_ms;
        self.reader = Some(env.spawn(Box::pin(async move {
            // `_read_until_stopped` (:571-603).
            while !state.stop.get() {
                if sub.closed() {
                    state.lost.set(true);
                    break;
                }
                state.read_until_ms.set(task_env.mono_ms() + sleep_ms);
                if let Some(payload) = sub.next_message(sleep_ms).await {
                    answer_ping(&task_env, &state, &holder_id, &payload).await;
                }
            }
            sub.close();
            state.reader_done.set(true);
        })));
        self.subscription = Some(subscription);
        Ok(())
    }

    /// `_unsubscribe` (:3844-3959): stop the reader, join it (it notices at the end of its
    /// current read), close the connection, `time.sleep(0.01)`.
    async fn unsubscribe(&mut self, env: &Rc<dyn LockEnv>) {
        let Some(subscription) = self.subscription.take() else {
            return;
        };
        self.state.stop.set(true);
        if !self.state.reader_done.get() {
            let until = self.state.read_until_ms.get();
            let now = env.mono_ms();
            if until > now {
                env.sleep_ms(until - now).await;
            }
        }
        if let Some(reader) = self.reader.take() {
            reader.cancel();
        }
        subscription.close();
        self.state.reader_done.set(true);
        env.sleep_ms(JOIN_SETTLE_MS).await;
    }

    /// `_collect_lock_holders` (:2312-2493): `None` when inconclusive.
    async fn collect_holders(
        &self,
        env: &Rc<dyn LockEnv>,
        expected: i64,
        timeout_ms: u64,
    ) -> Result<Option<Vec<Holder>>, CallError> {
        let response_channel = format!("{}-{}", self.channel, undashed(&uuid4(env.as_ref())));
        let check_interval_ms = self.config.thread_sleep_time_ms.min(timeout_ms / 10);
        // `pubsub.subscribe` and the wait for its confirmation (:2423-2430).
        let probe = env.subscribe(0, &response_channel, None).await?;
        let result = self
            .probe_with(
                env,
                probe.as_ref(),
                &response_channel,
                expected,
                timeout_ms,
                check_interval_ms,
            )
            .await;
        probe.close();
        result
    }

    async fn probe_with(
        &self,
        env: &Rc<dyn LockEnv>,
        probe: &dyn Subscription,
        response_channel: &str,
        expected: i64,
        timeout_ms: u64,
        check_interval_ms: u64,
    ) -> Result<Option<Vec<Holder>>, CallError> {
        if subscriber_count(env, &self.channel).await? != expected {
            return Ok(None);
        }
        let ping = py_json(&[
            ("message", Value::String("ping".into())),
            (
                "response_channel",
                Value::String(response_channel.to_string()),
            ),
        ]);
        env.call(
            0,
            vec![
                b"PUBLISH".to_vec(),
                self.channel.as_bytes().to_vec(),
                ping.into_bytes(),
            ],
        )
        .await?;
        let mut holders: Vec<Holder> = Vec::new();
        // A zero interval paces by `thread_sleep_time` (:1207-1209).
        let pace_ms = match check_interval_ms {
            0 => self.config.thread_sleep_time_ms,
            ms => ms,
        };
        let mut turns = Turns::new(env, timeout_ms, pace_ms);
        while turns.next(env).await {
            drain_replies(probe, &mut holders, expected, check_interval_ms).await;
            if holders.len() as i64 >= expected {
                break;
            }
            if subscriber_count(env, &self.channel).await? != expected {
                return Ok(None);
            }
        }
        if subscriber_count(env, &self.channel).await? != expected {
            return Ok(None);
        }
        if (holders.len() as i64) < expected {
            self.kill_unavailable(env, &holders).await?;
            return Ok(None);
        }
        Ok(Some(holders))
    }

    /// `_kill_unavailable_locks` (:2173-2245): `CLIENT KILL ID` every connection named as a
    /// holder of this channel whose id did not answer (a legacy name, when no legacy answer
    /// came).
    async fn kill_unavailable(
        &self,
        env: &Rc<dyn LockEnv>,
        responding: &[Holder],
    ) -> Result<(), CallError> {
        let legacy = self.legacy_client_name();
        let legacy_responded = responding.iter().any(|h| h.legacy);
        let list = env.call(0, argv(&["CLIENT", "LIST"])).await?;
        for (id, name) in client_list(&list) {
            let holder = name
                .strip_prefix(&legacy)
                .and_then(|rest| rest.strip_prefix('-'))
                .filter(|id| {
                    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                });
            let unavailable = (name == legacy && !legacy_responded)
                || holder.is_some_and(|h| !responding.iter().any(|r| !r.legacy && r.id == h));
            if unavailable {
                env.call(0, argv(&["CLIENT", "KILL", "ID", &id])).await?;
            }
        }
        Ok(())
    }

    /// `_writer_is_elected` (:2534-2643).
    fn writer_is_elected(&self, holders: &[Holder]) -> bool {
        if holders.iter().any(|h| h.mode == Mode::Exclusive) {
            return false;
        }
        if holders
            .iter()
            .any(|h| h.elected == Some(true) && h.id != self.holder_id())
        {
            return false;
        }
        holders
            .iter()
            .filter(|h| h.mode == Mode::Pending)
            .map(|h| h.id.as_str())
            .min()
            == Some(self.holder_id())
    }

    /// `_must_forfeit` (:2645-2710).
    fn must_forfeit(&self, holders: &[Holder]) -> bool {
        let me = self.holder_id();
        holders.iter().filter(|h| h.id != me).any(|h| {
            let lower = h.id.as_str() < me;
            h.mode == Mode::Exclusive
                || (h.elected == Some(true) && lower)
                || (h.mode == Mode::Pending && h.elected.is_none() && lower)
        })
    }

    /// `_resolve_exclusive_writer` (:2821-2927): `Some(held)`, or `None` for the give-up branch.
    async fn resolve_exclusive_writer(
        &mut self,
        env: &Rc<dyn LockEnv>,
        holders: &[Holder],
    ) -> Result<Option<bool>, AlreadyLocked> {
        let shared_present = holders.iter().any(|h| h.mode == Mode::Shared);
        if self.state.elected.get() {
            if self.must_forfeit(holders) {
                return Ok(None);
            }
            let me = self.holder_id();
            let undecided_lower = holders.iter().any(|h| {
                h.id != me
                    && h.mode == Mode::Pending
                    && h.elected == Some(false)
                    && h.id.as_str() < me
            });
            if shared_present || undecided_lower {
                return Ok(Some(false));
            }
            self.state.mode.set(Mode::Exclusive);
            return Ok(Some(true));
        }
        if !self.writer_is_elected(holders) {
            return Ok(None);
        }
        if !shared_present {
            self.state.elected.set(true);
            self.state.mode.set(Mode::Exclusive);
            return Ok(Some(true));
        }
        if self.config.fail_when_locked {
            self.unsubscribe(env).await;
            return Err(AlreadyLocked);
        }
        self.state.elected.set(true);
        Ok(Some(false))
    }

    /// `_resolve_lock_holders` (:2712-2819), for an exclusive lock (it never joins holders).
    async fn resolve_holders(
        &mut self,
        env: &Rc<dyn LockEnv>,
        holders: Option<Vec<Holder>>,
    ) -> Result<bool, AlreadyLocked> {
        if let Some(list) = &holders
            && let Some(held) = self.resolve_exclusive_writer(env, list).await?
        {
            return Ok(held);
        }
        if holders.is_none() && self.state.elected.get() {
            return Ok(false);
        }
        self.state.elected.set(false);
        self.unsubscribe(env).await;
        if self.config.fail_when_locked && holders.is_some() {
            return Err(AlreadyLocked);
        }
        Ok(false)
    }

    /// `_confirm_probe_verdict` (:2929-2997).
    fn confirm_verdict(&self, holders: &[Holder]) -> Verdict {
        let me = self.holder_id();
        let mut verdict = Verdict::Confirmed;
        for h in holders.iter().filter(|h| h.id != me) {
            if h.mode == Mode::Shared {
                return Verdict::Demote;
            }
            let lower = h.id.as_str() < me;
            if h.mode == Mode::Exclusive {
                if h.legacy || h.elected.is_none() || lower {
                    return Verdict::Demote;
                }
                continue;
            }
            if !lower {
                continue;
            }
            if h.elected.is_none() {
                return Verdict::Demote;
            }
            verdict = Verdict::Retry;
        }
        verdict
    }

    /// `_confirm_exclusive_promotion` (:2999-3097) and `_demote_unconfirmed_promotion`
    /// (:3099-3130).
    async fn confirm_promotion(
        &mut self,
        env: &Rc<dyn LockEnv>,
    ) -> Result<Result<bool, AlreadyLocked>, CallError> {
        let timeout_ms = self.config.unavailable_timeout_ms;
        let mut turns = Turns::new(env, timeout_ms, self.config.thread_sleep_time_ms);
        while turns.next(env).await {
            let subscribers = subscriber_count(env, &self.channel).await?;
            if subscribers <= 1 {
                return Ok(Ok(true));
            }
            let Some(holders) = self.collect_holders(env, subscribers, timeout_ms).await? else {
                continue;
            };
            match self.confirm_verdict(&holders) {
                Verdict::Confirmed => return Ok(Ok(true)),
                Verdict::Demote => break,
                Verdict::Retry => {}
            }
        }
        self.state.mode.set(Mode::Pending);
        self.state.elected.set(false);
        self.unsubscribe(env).await;
        if self.config.fail_when_locked {
            return Ok(Err(AlreadyLocked));
        }
        Ok(Ok(false))
    }

    /// `_probe_and_decide` (:3360-3426).
    async fn probe_and_decide(
        &mut self,
        env: &Rc<dyn LockEnv>,
    ) -> Result<Result<bool, AlreadyLocked>, CallError> {
        let subscribers = subscriber_count(env, &self.channel).await?;
        if subscribers == 1 {
            self.state.mode.set(Mode::Exclusive);
        } else {
            let timeout_ms = self.config.unavailable_timeout_ms;
            let holders = self.collect_holders(env, subscribers, timeout_ms).await?;
            match self.resolve_holders(env, holders).await {
                Ok(true) => {}
                other => return Ok(other),
            }
        }
        match self.confirm_promotion(env).await? {
            Ok(true) => {}
            other => return Ok(other),
        }
        // `_confirm_or_abandon` (:3499-3513) with `_confirm_held` (:1884-1923).
        if self.state.lost.get() || self.state.reader_done.get() {
            self.abandon_attempt(env).await;
            return Ok(Ok(false));
        }
        Ok(Ok(true))
    }

    /// `_abandon_failed_attempt` (:1945-1980).
    async fn abandon_attempt(&mut self, env: &Rc<dyn LockEnv>) {
        self.state.lost.set(false);
        self.state.mode.set(Mode::Pending);
        self.state.elected.set(false);
        self.unsubscribe(env).await;
    }

    /// `_acquire_attempt` (:3294-3358): a connection error is a failed attempt (retried within
    /// the timeout, `_is_transient_connection_error`).
    async fn attempt(&mut self, env: &Rc<dyn LockEnv>) -> Result<bool, AlreadyLocked> {
        if self.subscription.is_some() && (self.state.lost.get() || self.state.reader_done.get()) {
            self.abandon_attempt(env).await;
        }
        if self.subscription.is_none() && self.start_subscription(env).await.is_err() {
            return Ok(false);
        }
        match self.probe_and_decide(env).await {
            Ok(decision) => decision,
            Err(_) => {
                self.abandon_attempt(env).await;
                Ok(false)
            }
        }
    }
}

/// `_drain_probe_replies` (:2247-2310): the first read waits `check_interval`, then the
/// buffered replies, each gap bridged by one `_PROBE_REPLY_GRACE` read; stops at `expected`
/// distinct holders.
async fn drain_replies(
    probe: &dyn Subscription,
    holders: &mut Vec<Holder>,
    expected: i64,
    check_interval_ms: u64,
) {
    let grace_ms = PROBE_REPLY_GRACE_MS.min(check_interval_ms);
    let mut message = probe.next_message(check_interval_ms).await;
    while let Some(payload) = message {
        let legacy_index = holders.iter().filter(|h| h.legacy).count();
        let holder = parse_holder(&payload, legacy_index);
        match holders.iter_mut().find(|h| h.id == holder.id) {
            Some(known) => *known = holder,
            None => holders.push(holder),
        }
        if holders.len() as i64 >= expected {
            return;
        }
        message = probe.next_message(0).await;
        if message.is_none() && grace_ms > 0 {
            message = probe.next_message(grace_ms).await;
        }
    }
}

#[async_trait(?Send)]
impl LockScheme for PubSubLock {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        if self.subscription.is_some() {
            // :3256-3257.
            return Err(format!(
                "{RAISED}LockException: This lock is already active"
            ));
        }
        if self.holder_id.is_none() {
            let id = undashed(&uuid4(env.as_ref()));
            env.register_token(&id);
            self.holder_id = Some(id);
        }
        self.state.lost.set(false);
        self.state.mode.set(Mode::Pending);
        self.state.elected.set(false);
        let deadline_ms = env.mono_ms() + timeout_ms;
        let mut turns = Turns::new(env, timeout_ms, self.config.check_interval_ms);
        let mut first = true;
        while turns.next(env).await {
            if !first && env.mono_ms() >= deadline_ms {
                break;
            }
            first = false;
            match self.attempt(env).await {
                Ok(true) => {
                    return Ok(Grant {
                        token: self.holder_id().to_string(),
                        fence: None,
                    });
                }
                Ok(false) => {}
                Err(AlreadyLocked) => break,
            }
        }
        self.release(env).await;
        Err("AlreadyLocked".to_string())
    }

    /// Dropping the subscription is the release (:4006-4090); it never fails on a loss.
    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        self.state.elected.set(false);
        let held = self.subscription.is_some();
        self.unsubscribe(env).await;
        Release {
            ok: true,
            detail: if held {
                "released".into()
            } else {
                "nothing to release".into()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::SchemeSpec;
    use crate::locks::testing::{DirectEnv, Shared, block_on};
    use serde_json::json;

    fn lock(params: serde_json::Value) -> Box<dyn LockScheme> {
        SchemeSpec::from_json(&params, "scheme")
            .unwrap()
            .build("scheme")
            .unwrap()
    }

    #[test]
    fn a_free_channel_is_taken_alone_and_a_second_lock_is_refused() {
        let shared = Shared::new();
        let (a, b) = (
            DirectEnv::new(&shared, "client-1", 1),
            DirectEnv::new(&shared, "client-2", 2),
        );
        let mut first = lock(json!({"name": "pubsub"}));
        let mut second = lock(json!({"name": "pubsub"}));
        block_on(async {
            assert!(first.acquire(&a, 0).await.is_ok());
            let refused = second.acquire(&b, 0).await;
            assert_eq!(refused, Err("AlreadyLocked".to_string()));
            assert!(first.release(&a).await.ok);
            assert!(second.acquire(&b, 0).await.is_ok());
        });
    }

    #[test]
    fn a_silent_subscriber_is_killed_and_the_next_attempt_takes_the_lock() {
        let shared = Shared::new();
        let env = DirectEnv::new(&shared, "client-1", 1);
        // A crashed holder: its connection subscribed, nobody reading it.
        let dead = shared.server.borrow_mut().connect();
        shared.command_as(
            dead,
            &[
                "CLIENT",
                "SETNAME",
                "lock-lock-0123456789abcdef0123456789abcdef",
            ],
        );
        shared.command_as(dead, &["SUBSCRIBE", "lock"]);
        let mut waiter = lock(json!({"name": "pubsub", "unavailable_timeout_ms": 200}));
        block_on(async {
            assert!(waiter.acquire(&env, 2000).await.is_ok());
        });
        assert!(!shared.server.borrow().is_connected(dead));
    }
}
