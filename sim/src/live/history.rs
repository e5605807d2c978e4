//! `history.jsonl`: a live run's operations in jepsen.history's fields (jepsen-io/history
//! README): `index`, `time` (ns since the start of the run), `process`, `type` (`invoke`,
//! `ok`, `fail`, `info`), `f`, `value`, `error`. The driver records each client operation's
//! invocation and completion; faults are operations of the process `nemesis` (`f` = the fault
//! kind, `value` = what it did), taken from the run's trace.

use model::history::{Event, EventKind, FaultPhase};
use serde_json::{Value, json};

use crate::world::World;

/// One operation, without its index (numbered when the history is written, in time order).
#[derive(Clone, Debug)]
pub struct Op {
    pub time_ns: u64,
    pub process: Value,
    pub kind: &'static str,
    pub f: String,
    pub value: Value,
    pub error: Option<String>,
}

impl Op {
    pub fn invoke(world: &World, process: u64, f: &str, value: Value) -> Op {
        Op {
            time_ns: world.time.now_us() * 1000,
            process: json!(process),
            kind: "invoke",
            f: f.to_string(),
            value,
            error: None,
        }
    }

    pub fn complete(
        world: &World,
        process: u64,
        kind: &'static str,
        f: &str,
        value: Value,
        error: Option<String>,
    ) -> Op {
        Op {
            time_ns: world.time.now_us() * 1000,
            process: json!(process),
            kind,
            f: f.to_string(),
            value,
            error,
        }
    }
}

/// The nemesis's operations from the trace: an injected fault is an `info` invocation of the
/// fault, its healing an `info` of `heal-<fault>` (jepsen's nemesis completes with `info`).
pub fn nemesis_ops(events: &[Event]) -> Vec<Op> {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::Fault {
                fault,
                phase,
                detail,
            } => Some(Op {
                time_ns: event.t_us * 1000,
                process: json!("nemesis"),
                kind: "info",
                f: match phase {
                    FaultPhase::Injected => fault.clone(),
                    FaultPhase::Healed => format!("heal-{fault}"),
                },
                value: json!({"node": event.node, "detail": detail}),
                error: None,
            }),
            _ => None,
        })
        .collect()
}

/// The history as JSON lines, every operation numbered in time order.
pub fn jsonl(mut ops: Vec<Op>) -> String {
    ops.sort_by_key(|op| op.time_ns);
    let mut out = String::new();
    for (index, op) in ops.into_iter().enumerate() {
        let mut line = json!({
            "index": index,
            "time": op.time_ns,
            "process": op.process,
            "type": op.kind,
            "f": op.f,
            "value": op.value,
        });
        if let Some(error) = op.error {
            line["error"] = json!(error);
        }
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}
