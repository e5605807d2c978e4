//! The `faults` of a scenario file, as written (`FaultSpec`) and validated (`Fault`): their
//! kinds (`kinds`), when each fires (`triggers`), the placeholders that stand for node names
//! (`placeholder`) and their validation against the scenario's nodes (`validate`). What a
//! fault does to the world is `crate::faults`.
//!
//! A fault fires at `at_ms`, or `after_ms` after the `nth` occurrence of an event (`on`); it
//! lasts `duration_ms`, or to the end of the run when that is omitted.

mod kinds;
pub mod placeholder;
mod triggers;
mod validate;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use kinds::{FAULT_KINDS, FaultKind, is_master_name};
pub use placeholder::RowNodes;
pub use triggers::{TRIGGER_EVENTS, TriggerSpec, When, names_a_client};

/// A fault as written in the scenario file, before validation (and as `locksim shrink`
/// writes one back: absent fields are left out).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    #[schemars(schema_with = "crate::scenario::schema::fault_kind_schema")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::scenario::schema::fault_node_schema")]
    pub node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_after_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::scenario::schema::partition_groups_schema")]
    pub groups: Option<Vec<Vec<String>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_way: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::scenario::schema::fault_node_schema")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::scenario::schema::fault_node_schema")]
    pub to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on: Option<TriggerSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_ms: Option<u64>,
}

/// A validated fault.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub kind: FaultKind,
    pub when: When,
    /// `None`: the fault lasts to the end of the run.
    pub duration_ms: Option<u64>,
}

impl From<&Fault> for FaultSpec {
    /// The fault as a scenario file writes it; validating the result gives `fault` back.
    fn from(fault: &Fault) -> FaultSpec {
        let mut spec = FaultSpec {
            kind: fault.kind.name().to_string(),
            duration_ms: fault.duration_ms,
            ..FaultSpec::default()
        };
        match &fault.kind {
            FaultKind::Pause { node }
            | FaultKind::Isolate { node }
            | FaultKind::DropConnections { node }
            | FaultKind::Failover { master: node } => spec.node = Some(node.clone()),
            FaultKind::Crash {
                node,
                restart_after_ms,
            }
            | FaultKind::PowerLoss {
                node,
                restart_after_ms,
            } => {
                spec.node = Some(node.clone());
                spec.restart_after_ms = *restart_after_ms;
            }
            FaultKind::ClockJump { node, delta_ms } => {
                spec.node = Some(node.clone());
                spec.delta_ms = Some(*delta_ms);
            }
            FaultKind::ClockDrift { node, rate } => {
                spec.node = Some(node.clone());
                spec.rate = Some(*rate);
            }
            FaultKind::Partition { groups, one_way } => {
                spec.groups = Some(groups.clone());
                spec.one_way = one_way.then_some(true);
            }
            FaultKind::Delay { from, to, extra_ms } => {
                spec.from = Some(from.clone());
                spec.to = Some(to.clone());
                spec.extra_ms = Some(*extra_ms);
            }
        }
        match &fault.when {
            When::At { at_ms } => spec.at_ms = Some(*at_ms),
            When::On {
                event,
                node,
                nth,
                command,
                after_ms,
            } => {
                spec.on = Some(TriggerSpec {
                    event: event.clone(),
                    node: node.clone(),
                    nth: Some(*nth),
                    command: command.clone(),
                });
                spec.after_ms = Some(*after_ms);
            }
        }
        spec
    }
}

impl Fault {
    /// Whether the world must follow lock-key writes for this fault: it fires on
    /// `lock_written` / `lock_granted`, or names the holder's masters.
    pub fn needs_lock_writers(&self) -> bool {
        let on_writes = matches!(&self.when, When::On { event, .. }
            if event == "lock_written" || event == "lock_granted");
        on_writes
            || self
                .kind
                .node_names()
                .iter()
                .any(|n| *n == placeholder::HOLDER_MASTER || *n == placeholder::HOLDER_MASTERS)
    }
}
