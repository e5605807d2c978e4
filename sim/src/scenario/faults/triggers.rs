//! When a fault fires: at `at_ms`, or `after_ms` after the `nth` occurrence of an event (`on`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scenario::faults::placeholder;

/// `on`: the event whose `nth` occurrence (on `node`, for `command_sent` of `command`) fires
/// the fault `after_ms` later.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerSpec {
    #[schemars(schema_with = "crate::scenario::schema::trigger_event_schema")]
    pub event: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nth: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum When {
    At {
        at_ms: u64,
    },
    On {
        event: String,
        node: Option<String>,
        nth: u64,
        command: Option<String>,
        after_ms: u64,
    },
}

/// Trigger events of the contract. `lock_written` and `lock_granted` are not events of the
/// trace but moments the world observes on the lock key (see `world::history`): a client's
/// command left the key written on a Redis node (its `on.node` is that node), and a client's
/// writes now stand on a quorum of the scheme's masters (its `on.node` is the client).
pub const TRIGGER_EVENTS: &[&str] = &[
    "acquired",
    "acquire_started",
    "released",
    "command_sent",
    "replicated",
    "lock_written",
    "lock_granted",
];

/// The trigger events that name a client (`{holder}`): every one but `replicated`.
pub fn names_a_client(event: &str) -> bool {
    event != "replicated"
}

impl When {
    /// The `at_ms`, `on` and `after_ms` of fault `field`, validated; `node` checks a trigger's
    /// `on.node` against the row's nodes.
    pub fn from_spec(
        field: &str,
        at_ms: Option<u64>,
        on: Option<&TriggerSpec>,
        after_ms: Option<u64>,
        node: impl FnOnce(&str) -> Result<String, String>,
    ) -> Result<When, String> {
        match (at_ms, on) {
            (Some(_), Some(_)) => Err(format!("{field}: give at_ms or on, not both")),
            (None, None) => Err(format!(
                "{field}: missing at_ms or on (when the fault fires)"
            )),
            (Some(at_ms), None) => {
                if after_ms.is_some() {
                    return Err(format!("{field}.after_ms: only with on (use at_ms alone)"));
                }
                Ok(When::At { at_ms })
            }
            (None, Some(on)) => {
                if !TRIGGER_EVENTS.contains(&on.event.as_str()) {
                    return Err(format!(
                        "{field}.on.event: unknown event \"{}\" (known: {})",
                        on.event,
                        TRIGGER_EVENTS.join(", ")
                    ));
                }
                if on.command.is_some() != (on.event == "command_sent") {
                    return Err(format!(
                        "{field}.on.command: goes with event command_sent, and only with it"
                    ));
                }
                if on.nth == Some(0) {
                    return Err(format!("{field}.on.nth: counts from 1"));
                }
                let node = match &on.node {
                    Some(n) if placeholder::is_placeholder(n) => {
                        return Err(format!(
                            "{field}.on.node: a trigger names a node of the scenario, not a placeholder"
                        ));
                    }
                    Some(n) => Some(node(n)?),
                    None => None,
                };
                Ok(When::On {
                    event: on.event.clone(),
                    node,
                    nth: on.nth.unwrap_or(1),
                    command: on.command.clone(),
                    after_ms: after_ms.unwrap_or(0),
                })
            }
        }
    }

    /// Whether the event that fires the fault names a client (`{holder}` resolves to it).
    pub fn fires_on_a_client(&self) -> bool {
        matches!(self, When::On { event, .. } if names_a_client(event))
    }
}
