//! The driver of one live client: a task on the simulated node `client-i` (in place of the
//! simulation's scheme worker) that starts the real process, generates the workload from
//! `clients` exactly as the simulation draws it (the same random streams), and speaks the
//! driver protocol to the process — JSON lines, one operation at a time:
//!
//! ```text
//! → {"id":1,"op":"init","client":"client-1","redis":[...],"sentinels":[...],"resource":"...", ...}
//! → {"id":2,"op":"acquire","lock":"lock","ttl_ms":1000,"wait_ms":5000}
//! ← {"re":2,"type":"ok","fence":7,"token":"..."}   | "fail" (definitely not held) | "info" (unknown)
//! → {"id":3,"op":"work","hold_ms":30}               (read the resource, hold, write it back)
//! → {"id":4,"op":"release"}
//! ```
//!
//! It records the lock events in the world's history at the simulated instant of each answer,
//! so a trigger such as `on: {event: acquired}, after_ms: 0` fires (pausing or killing the
//! process) before the next operation is sent, as in the simulation. Every operation goes into
//! `history.jsonl` (invoke and completion, jepsen.history fields). A process that exits, goes
//! silent or answers something else than the protocol stops the run with an error naming the
//! client and the operation.

use std::sync::Arc;
use std::time::Duration;

use model::history::EventKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::Live;
use super::history::Op;
use crate::scenario::Extend;
use crate::scenario::range::MsRange;
use crate::world::{World, stream_seed};

/// A driver-protocol answer.
#[derive(Debug)]
struct Answer {
    kind: AnswerType,
    fence: Option<u64>,
    token: Option<String>,
    error: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AnswerType {
    Ok,
    Fail,
    Info,
}

impl AnswerType {
    fn as_str(self) -> &'static str {
        match self {
            AnswerType::Ok => "ok",
            AnswerType::Fail => "fail",
            AnswerType::Info => "info",
        }
    }
}

/// Parses one line of a client's stdout as the answer to operation `id`.
fn parse_answer(line: &str, id: u64) -> Result<Answer, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let object = value.as_object().ok_or("not a JSON object")?;
    let re = object.get("re").and_then(Value::as_u64);
    if re != Some(id) {
        return Err(format!("\"re\" is {:?}, not {id}", object.get("re")));
    }
    let kind = match object.get("type").and_then(Value::as_str) {
        Some("ok") => AnswerType::Ok,
        Some("fail") => AnswerType::Fail,
        Some("info") => AnswerType::Info,
        other => return Err(format!("\"type\" is {other:?}, not ok, fail or info")),
    };
    let fence = match object.get("fence") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or("\"fence\" is not a non-negative integer")?,
        ),
    };
    let text = |field: &str| {
        object.get(field).and_then(|v| match v {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        })
    };
    Ok(Answer {
        kind,
        fence,
        token: text("token"),
        error: text("error"),
    })
}

/// One driver's conversation with its process.
struct Session {
    world: Arc<World>,
    live: Arc<Live>,
    name: String,
    lines: UnboundedReceiver<Option<String>>,
    next_id: u64,
    /// The jepsen.history process: a new one after a crash or an `info` (jepsen.history: a
    /// process that ended with `info` never invokes again).
    process: u64,
}

impl Session {
    /// Sends one operation and waits for its answer. Stops the run (never returns) if the
    /// process breaks the protocol.
    async fn op(&mut self, op: &str, mut fields: Value) -> Answer {
        let id = self.next_id;
        self.next_id += 1;
        fields["id"] = json!(id);
        fields["op"] = json!(op);
        let value = fields.clone();
        let line = fields.to_string();
        self.live.record_op(Op::invoke(
            &self.world,
            self.process,
            op,
            value_without_protocol(&value),
        ));
        if let Err(e) = self.live.clients.send(&self.name, &line) {
            // Its stdin's reader is gone (EPIPE): say how the process ended, not just the errno.
            let report = self.live.clients.exit_report(&self.name);
            let message = format!("the process ended before reading it ({report}; {e})");
            self.fail(op, id, &message).await;
        }
        let budget = Duration::from_millis(self.live.op_timeout_ms + op_time_ms(&value));
        let answer = loop {
            let resumes = self.world.procs.resumes(&self.name);
            match madsim::time::timeout(budget, self.lines.recv()).await {
                Ok(Some(Some(line))) => match parse_answer(&line, id) {
                    Ok(answer) => break answer,
                    Err(why) => {
                        let message = format!(
                            "answered something that is not a driver-protocol answer ({why}): {}",
                            truncate(&line)
                        );
                        self.fail(op, id, &message).await;
                    }
                },
                Ok(Some(None)) | Ok(None) => {
                    let report = self.live.clients.exit_report(&self.name);
                    self.fail(op, id, &format!("the process ended ({report})"))
                        .await;
                }
                // A paused client cannot answer; its waiting starts again after the pause.
                Err(_)
                    if self.world.procs.is_paused(&self.name)
                        || self.world.procs.resumes(&self.name) != resumes =>
                {
                    continue;
                }
                Err(_) => {
                    let message = format!("no answer within {} ms", budget.as_millis());
                    self.fail(op, id, &message).await;
                }
            }
        };
        let mut value = value_without_protocol(&value);
        if let Some(fence) = answer.fence {
            value["fence"] = json!(fence);
        }
        self.live.record_op(Op::complete(
            &self.world,
            self.process,
            answer.kind.as_str(),
            op,
            value,
            answer.error.clone(),
        ));
        answer
    }

    /// One `extend {ttl_ms}`, recorded as the simulated client's extension is: `extend_started`,
    /// then `extended` ok only on an `ok` answer (an `info` is the library raising a timeout: the
    /// client takes the lock as lost, as the simulation's clients do). True when extended.
    async fn extend(&mut self) -> bool {
        self.world
            .emit(&self.name, None, EventKind::ExtendStarted)
            .await;
        let answer = self.op("extend", json!({"ttl_ms": self.live.ttl_ms})).await;
        let ok = answer.kind == AnswerType::Ok;
        let detail = match (answer.kind, answer.error) {
            (AnswerType::Ok, _) => "extended".to_string(),
            (kind, error) => format!("{}: {}", kind.as_str(), error.unwrap_or_default()),
        };
        self.world
            .emit(&self.name, None, EventKind::Extended { ok, detail })
            .await;
        ok
    }

    /// Stops the run with an error naming the client and the operation; never returns.
    async fn fail(&self, op: &str, id: u64, why: &str) -> ! {
        self.live
            .abort(format!("{}: op {op} (id {id}): {why}", self.name));
        std::future::pending::<()>().await;
        unreachable!("a pending future never completes")
    }
}

/// The operation's own time (wait or hold), added to the answer budget.
fn op_time_ms(value: &Value) -> u64 {
    ["wait_ms", "hold_ms"]
        .iter()
        .filter_map(|k| value.get(*k).and_then(Value::as_u64))
        .sum()
}

fn value_without_protocol(value: &Value) -> Value {
    let mut value = value.clone();
    if let Some(object) = value.as_object_mut() {
        object.remove("id");
        object.remove("op");
    }
    value
}

fn truncate(line: &str) -> String {
    if line.len() > 200 {
        let mut end = 200;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &line[..end])
    } else {
        line.to_string()
    }
}

/// The parts of a critical section of `hold_ms` under `clients.extend`, as the simulated
/// client's `Lease::hold` runs it (sim/src/nodes/client/mod.rs): a hold of `every_ms` then an
/// extension while more than `every_ms` is left, the rest of the hold, and with `before_write`
/// one extension before the write. Each part: (hold_ms, extend after it).
fn hold_parts(hold_ms: u64, extend: Extend) -> Vec<(u64, bool)> {
    let mut parts = Vec::new();
    let mut left_ms = hold_ms;
    if let Some(every_ms) = extend.every_ms {
        while left_ms > every_ms {
            parts.push((every_ms, true));
            left_ms -= every_ms;
        }
    }
    parts.push((left_ms, extend.before_write));
    parts
}

/// The critical section: one `work {hold_ms}` without `clients.extend`; with it, the hold in
/// `work` parts (`read` only in the first, `write` only in the last) with an `extend {ttl_ms}`
/// between them where the workload extends. As in the simulation, a part that does not answer
/// `ok` (its read failed) or an extension that does not (`fail`, or `info`: the library raised)
/// ends the critical section without its write; the client then releases.
async fn critical_section(session: &mut Session, hold_ms: u64, extend: Option<Extend>) {
    let Some(extend) = extend else {
        session.op("work", json!({"hold_ms": hold_ms})).await;
        return;
    };
    let parts = hold_parts(hold_ms, extend);
    for (i, (part_ms, extend_after)) in parts.iter().copied().enumerate() {
        let last = i + 1 == parts.len();
        let write = last && !extend_after;
        let fields = json!({"hold_ms": part_ms, "read": i == 0, "write": write});
        if session.op("work", fields).await.kind != AnswerType::Ok || write {
            return;
        }
        if !session.extend().await {
            return;
        }
        if last {
            let fields = json!({"hold_ms": 0, "read": false, "write": true});
            session.op("work", fields).await;
        }
    }
}

fn draw(rng: &mut ChaCha8Rng, range: MsRange) -> u64 {
    rng.gen_range(range.min..=range.max)
}

/// The node's whole life: start the process, `init`, then the workload; at its end the
/// process's stdin is closed.
pub async fn driver_node(world: Arc<World>, name: String, live: Arc<Live>) {
    let start = world.procs.started(&name);
    let incarnation = match start {
        1 => String::new(),
        n => format!("#{n}"),
    };
    let lines = match live.clients.start(&name, start) {
        Ok(lines) => lines,
        Err(e) => {
            live.abort(e);
            return std::future::pending().await;
        }
    };
    let index: u64 = name
        .strip_prefix("client-")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let count = u64::from(world.scenario.clients.count);
    let mut session = Session {
        world: world.clone(),
        live: live.clone(),
        name: name.clone(),
        lines,
        next_id: 1,
        process: index - 1 + count * u64::from(start - 1) * 16,
    };
    let init = live.init_fields(&name);
    let answer = session.op("init", init).await;
    if answer.kind != AnswerType::Ok {
        session
            .fail(
                "init",
                1,
                &format!(
                    "answered {}: {}",
                    answer.kind.as_str(),
                    answer.error.unwrap_or_default()
                ),
            )
            .await;
    }
    if start == 1 {
        live.start_together().await;
    }
    // A pause that began before the process could be stopped (at `at_ms: 0`) holds it now, and
    // its workload waits for the resume, as the simulation's paused client does not start.
    if live.clients.stop_if_paused(&world.procs, &name) {
        while world.procs.is_paused(&name) {
            madsim::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let record = |kind| world.emit(&name, None, kind);
    let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(
        world.seed,
        &format!("{name}{incarnation}/workload"),
    ));
    let clients = world.scenario.clients.clone();
    let lock = world.scheme.key();
    let ttl_ms = live.ttl_ms;
    for attempt in 1..=clients.acquisitions {
        record(EventKind::AcquireStarted { attempt }).await;
        let answer = session
            .op(
                "acquire",
                json!({"lock": lock, "ttl_ms": ttl_ms, "wait_ms": clients.acquire_timeout_ms}),
            )
            .await;
        match answer.kind {
            AnswerType::Ok => {
                let token = answer.token.unwrap_or_default();
                if !token.is_empty() {
                    world.history.register_token(&token, &name);
                }
                record(EventKind::Acquired {
                    token,
                    fence: answer.fence,
                })
                .await;
                let hold_ms = draw(&mut rng, clients.hold_ms);
                critical_section(&mut session, hold_ms, clients.extend).await;
                record(EventKind::ReleaseStarted).await;
                let release = session.op("release", json!({})).await;
                record(EventKind::Released {
                    ok: release.kind == AnswerType::Ok,
                    detail: release.error.unwrap_or_default(),
                })
                .await;
            }
            AnswerType::Fail => {
                record(EventKind::AcquireFailed {
                    reason: answer.error.unwrap_or_else(|| "fail".into()),
                })
                .await
            }
            AnswerType::Info => {
                record(EventKind::AcquireUnknown {
                    reason: answer.error.unwrap_or_else(|| "info".into()),
                    lease_ms: ttl_ms,
                })
                .await;
                session.process += count;
            }
        }
        madsim::time::sleep(Duration::from_millis(draw(&mut rng, clients.think_ms))).await;
    }
    record(EventKind::ClientDone).await;
    world.procs.client_done(&name);
    live.clients.finish(&name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_is_split_where_the_simulated_client_extends() {
        let every = |every_ms| Extend {
            every_ms: Some(every_ms),
            before_write: false,
        };
        assert_eq!(
            hold_parts(1000, every(300)),
            [(300, true), (300, true), (300, true), (100, false)]
        );
        assert_eq!(hold_parts(300, every(300)), [(300, false)]);
        let before_write = Extend {
            every_ms: None,
            before_write: true,
        };
        assert_eq!(hold_parts(50, before_write), [(50, true)]);
    }

    #[test]
    fn answers_are_checked_field_by_field() {
        let ok = parse_answer(r#"{"re":2,"type":"ok","fence":7,"token":"t"}"#, 2).unwrap();
        assert_eq!(ok.kind, AnswerType::Ok);
        assert_eq!(ok.fence, Some(7));
        assert_eq!(ok.token.as_deref(), Some("t"));
        let info = parse_answer(r#"{"re":3,"type":"info","error":"timeout"}"#, 3).unwrap();
        assert_eq!(info.kind, AnswerType::Info);
        assert_eq!(info.error.as_deref(), Some("timeout"));
        assert!(
            parse_answer("hello", 1)
                .unwrap_err()
                .starts_with("not JSON")
        );
        assert!(parse_answer(r#"{"re":1,"type":"maybe"}"#, 1).is_err());
        assert!(parse_answer(r#"{"re":4,"type":"ok"}"#, 1).is_err());
        assert!(parse_answer(r#"{"re":1,"type":"ok","fence":-1}"#, 1).is_err());
    }
}
