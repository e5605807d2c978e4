//! The `faults` of a scenario file: one `FaultKind` variant per fault kind, when each fires
//! (`When`), and their validation against the scenario's nodes. What a fault does to the world
//! is `crate::faults`.
//!
//! A fault fires at `at_ms`, or `after_ms` after the `nth` occurrence of an event (`on`); it
//! lasts `duration_ms`, or to the end of the run when that is omitted.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scenario::limits::MAX_LIST_ITEMS;

/// `redis-N`: a master group's name (not a replica).
pub fn is_master_name(name: &str) -> bool {
    name.strip_prefix("redis-")
        .is_some_and(|n| n.parse::<u32>().is_ok())
}

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

/// A validated fault.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub kind: FaultKind,
    pub when: When,
    /// `None`: the fault lasts to the end of the run.
    pub duration_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum FaultKind {
    /// Stop-the-world pause (GC): every task of the node stops; timers keep running.
    Pause { node: String },
    /// The process dies: its tasks and timers are gone, its peers see the connection close, and
    /// whatever it kept only in memory is lost. It restarts afresh after `restart_after_ms`, or
    /// stays down.
    Crash {
        node: String,
        restart_after_ms: Option<u64>,
    },
    /// Step the node's wall clock by `delta_ms` (±).
    ClockJump { node: String, delta_ms: i64 },
    /// The node's clocks run at `rate` × true time.
    ClockDrift { node: String, rate: f64 },
    /// Two listed nodes can talk iff some group holds both (groups may overlap: Jepsen's bridge).
    /// `one_way`: only the direction from an earlier group to a later one is cut (the later
    /// group's messages still arrive), as a one-directional firewall rule does.
    Partition {
        groups: Vec<Vec<String>>,
        one_way: bool,
    },
    /// The node can talk to nobody.
    Isolate { node: String },
    /// `extra_ms` more one-way latency on the `from` → `to` link (bytes keep their order).
    Delay {
        from: String,
        to: String,
        extra_ms: u64,
    },
    /// Every TCP connection of the node is reset at once; clients reconnect.
    DropConnections { node: String },
    /// `SENTINEL FAILOVER <master>` sent to the first Sentinel that answers: a forced failover,
    /// without agreement from the other Sentinels and with the old master still up.
    Failover { master: String },
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

/// Every fault kind of the contract; the ones not listed in `FaultKind` are not built yet.
pub const FAULT_KINDS: &[&str] = &[
    "pause",
    "crash",
    "clock_jump",
    "clock_drift",
    "partition",
    "isolate",
    "delay",
    "drop_connections",
    "failover",
];

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

/// Placeholders a fault may give instead of node names, so that one fault works for every
/// scheme row of a scenario (whose node sets differ: Redlock rows have more masters).
///
/// Resolved when the fault fires, from the world's own state:
/// - `{holder}`: the client whose event fired the fault's trigger;
/// - `{peer}`: the first client, in name order, that is not the holder;
/// - `{holder_master}`: the last master (`redis-N`, in name order) whose lock key holds the
///   holder's write (for Redlock's bare majority `redis-1..3`, that is `redis-3`, the master
///   the other majority shares); `redis-1` when none does;
/// - in partition groups, `{holder_masters}`: every such master (or `{holder_master}`), and
///   `{rest}`: every Redis, Sentinel and client node the other groups do not name.
///
/// Expanded per scheme row when the scenario loads, in partition groups: `{masters}` (every
/// master), `{first_majority}` (`redis-1..Q`, Q = N/2+1) and `{last_majority}`
/// (`redis-(N-Q+1)..N`): two bare majorities sharing one master, as in Kleppmann's
/// and redis.io's Redlock examples; with one master, both are `redis-1`.
pub mod placeholder {
    pub const HOLDER: &str = "{holder}";
    pub const PEER: &str = "{peer}";
    pub const HOLDER_MASTER: &str = "{holder_master}";
    pub const HOLDER_MASTERS: &str = "{holder_masters}";
    pub const REST: &str = "{rest}";
    pub const MASTERS: &str = "{masters}";
    pub const FIRST_MAJORITY: &str = "{first_majority}";
    pub const LAST_MAJORITY: &str = "{last_majority}";

    /// Placeholders that stand for one node.
    pub const SINGLE: &[&str] = &[HOLDER, PEER, HOLDER_MASTER];
    /// Placeholders a partition group may also hold.
    pub const GROUP: &[&str] = &[HOLDER_MASTERS, REST, MASTERS, FIRST_MAJORITY, LAST_MAJORITY];

    /// Whether resolving `name` needs the client that fired the trigger.
    pub fn needs_holder(name: &str) -> bool {
        [HOLDER, PEER, HOLDER_MASTER, HOLDER_MASTERS].contains(&name)
    }

    pub fn is_placeholder(name: &str) -> bool {
        name.starts_with('{')
    }
}

/// What a fault is validated against: one scheme row's nodes.
pub struct RowNodes {
    pub nodes: BTreeSet<String>,
    /// The row's masters, `redis-1..N`.
    pub masters: Vec<String>,
}

impl RowNodes {
    /// The bare majority `redis-1..Q` or `redis-(N-Q+1)..N`.
    fn majority(&self, first: bool) -> Vec<String> {
        let n = self.masters.len();
        let q = n / 2 + 1;
        if first {
            self.masters[..q].to_vec()
        } else {
            self.masters[n - q..].to_vec()
        }
    }
}

impl FaultSpec {
    /// Validates against one scheme row's node names; `field` is e.g. `faults[2]`. Static
    /// placeholders are expanded here; the ones resolved at fire time stay in the fault.
    pub fn validate(&self, field: &str, row: &RowNodes) -> Result<Fault, String> {
        let nodes = &row.nodes;
        let holder_needed = std::cell::Cell::new(None::<String>);
        let node_field = |name: &str, value: &Option<String>| -> Result<String, String> {
            let node = value
                .clone()
                .ok_or_else(|| format!("{field}.{name}: missing (a node name)"))?;
            if placeholder::is_placeholder(&node) {
                if !placeholder::SINGLE.contains(&node.as_str()) {
                    return Err(format!(
                        "{field}.{name}: unknown placeholder {node} (a node: {})",
                        placeholder::SINGLE.join(", ")
                    ));
                }
                if node == placeholder::PEER && !nodes.contains("client-2") {
                    return Err(format!(
                        "{field}.{name}: {node} is another client than the holder: give clients.count of 2 or more"
                    ));
                }
                holder_needed.set(Some(format!("{field}.{name}: {node}")));
                return Ok(node);
            }
            if !nodes.contains(&node) {
                return Err(format!(
                    "{field}.{name}: no node \"{node}\" in this scenario (nodes: {})",
                    nodes.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
            Ok(node)
        };
        let mut allowed: Vec<&str> = vec!["kind", "duration_ms", "at_ms", "on", "after_ms"];
        let kind = match self.kind.as_str() {
            "pause" => {
                allowed.push("node");
                FaultKind::Pause {
                    node: node_field("node", &self.node)?,
                }
            }
            "crash" => {
                allowed.extend(["node", "restart_after_ms"]);
                let node = node_field("node", &self.node)?;
                if node == "resource" {
                    return Err(format!(
                        "{field}.node: the protected resource does not crash (it stands for durable storage)"
                    ));
                }
                if self.duration_ms.is_some() {
                    return Err(format!(
                        "{field}.duration_ms: a crash lasts until restart_after_ms (omit it to stay down)"
                    ));
                }
                FaultKind::Crash {
                    node,
                    restart_after_ms: self.restart_after_ms,
                }
            }
            "clock_jump" => {
                allowed.extend(["node", "delta_ms"]);
                let delta_ms = self
                    .delta_ms
                    .ok_or_else(|| format!("{field}.delta_ms: missing (ms, ±)"))?;
                FaultKind::ClockJump {
                    node: node_field("node", &self.node)?,
                    delta_ms,
                }
            }
            "clock_drift" => {
                allowed.extend(["node", "rate"]);
                let rate = self
                    .rate
                    .ok_or_else(|| format!("{field}.rate: missing (e.g. 1.5 = runs 50% fast)"))?;
                if !(rate.is_finite() && rate > 0.0 && rate <= 100.0) {
                    return Err(format!("{field}.rate: must be in (0, 100], got {rate}"));
                }
                FaultKind::ClockDrift {
                    node: node_field("node", &self.node)?,
                    rate,
                }
            }
            "partition" => {
                allowed.extend(["groups", "one_way"]);
                let groups = self
                    .groups
                    .clone()
                    .ok_or_else(|| format!("{field}.groups: missing (lists of node names)"))?;
                let entries: usize = groups.iter().map(Vec::len).sum();
                if entries > MAX_LIST_ITEMS {
                    return Err(format!(
                        "{field}.groups: {entries} node names in all (limit {MAX_LIST_ITEMS})"
                    ));
                }
                let mut expanded = Vec::new();
                for (g, group) in groups.iter().enumerate() {
                    if group.is_empty() {
                        return Err(format!(
                            "{field}.groups[{g}]: an empty group (list the nodes on each side)"
                        ));
                    }
                    let mut members = Vec::new();
                    for (n, node) in group.iter().enumerate() {
                        if group[..n].contains(node) {
                            return Err(format!(
                                "{field}.groups[{g}][{n}]: \"{node}\" is already in this group"
                            ));
                        }
                        match node.as_str() {
                            placeholder::MASTERS => members.extend(row.masters.clone()),
                            placeholder::FIRST_MAJORITY => members.extend(row.majority(true)),
                            placeholder::LAST_MAJORITY => members.extend(row.majority(false)),
                            placeholder::REST => members.push(node.clone()),
                            placeholder::HOLDER_MASTERS => {
                                holder_needed
                                    .set(Some(format!("{field}.groups[{g}][{n}]: {node}")));
                                members.push(node.clone());
                            }
                            _ if placeholder::is_placeholder(node)
                                && !placeholder::SINGLE.contains(&node.as_str()) =>
                            {
                                return Err(format!(
                                    "{field}.groups[{g}][{n}]: unknown placeholder {node} (known: {}, {})",
                                    placeholder::SINGLE.join(", "),
                                    placeholder::GROUP.join(", ")
                                ));
                            }
                            _ => members.push(node_field(
                                &format!("groups[{g}][{n}]"),
                                &Some(node.clone()),
                            )?),
                        }
                    }
                    expanded.push(members);
                }
                let kind = FaultKind::Partition {
                    groups: expanded,
                    one_way: self.one_way.unwrap_or(false),
                };
                let nodes: Vec<String> = nodes.iter().cloned().collect();
                if kind.count_links(&nodes, 0) == 0 {
                    return Err(format!(
                        "{field}.groups: cuts no link (every two listed nodes share a group; a partition needs two nodes kept apart)"
                    ));
                }
                kind
            }
            "isolate" => {
                allowed.push("node");
                FaultKind::Isolate {
                    node: node_field("node", &self.node)?,
                }
            }
            "delay" => {
                allowed.extend(["from", "to", "extra_ms"]);
                let from = node_field("from", &self.from)?;
                let to = node_field("to", &self.to)?;
                if from == to {
                    return Err(format!("{field}.to: a link joins two different nodes"));
                }
                let extra_ms = self.extra_ms.filter(|ms| *ms > 0).ok_or_else(|| {
                    format!("{field}.extra_ms: missing (ms > 0 of extra one-way latency)")
                })?;
                FaultKind::Delay { from, to, extra_ms }
            }
            "drop_connections" => {
                allowed.push("node");
                if self.duration_ms.is_some() {
                    return Err(format!(
                        "{field}.duration_ms: dropping connections is instantaneous (omit it)"
                    ));
                }
                FaultKind::DropConnections {
                    node: node_field("node", &self.node)?,
                }
            }
            "failover" => {
                allowed.push("node");
                if !nodes.contains("sentinel-1") {
                    return Err(format!(
                        "{field}.kind: a failover needs Sentinels (topology.sentinels)"
                    ));
                }
                if self.duration_ms.is_some() {
                    return Err(format!(
                        "{field}.duration_ms: a failover is not undone (omit it)"
                    ));
                }
                let master = match &self.node {
                    None => "redis-1".to_string(),
                    Some(_) => node_field("node", &self.node)?,
                };
                if !is_master_name(&master) && master != placeholder::HOLDER_MASTER {
                    return Err(format!(
                        "{field}.node: \"{master}\" is not a master group (redis-N)"
                    ));
                }
                FaultKind::Failover { master }
            }
            other => {
                return Err(format!(
                    "{field}.kind: unknown fault kind \"{other}\" (known: {})",
                    FAULT_KINDS.join(", ")
                ));
            }
        };
        for (name, present) in [
            ("node", self.node.is_some()),
            ("restart_after_ms", self.restart_after_ms.is_some()),
            ("delta_ms", self.delta_ms.is_some()),
            ("rate", self.rate.is_some()),
            ("groups", self.groups.is_some()),
            ("one_way", self.one_way.is_some()),
            ("from", self.from.is_some()),
            ("to", self.to.is_some()),
            ("extra_ms", self.extra_ms.is_some()),
        ] {
            if present && !allowed.contains(&name) {
                return Err(format!(
                    "{field}.{name}: not a field of a {} fault",
                    self.kind
                ));
            }
        }
        if self.duration_ms == Some(0) {
            return Err(format!(
                "{field}.duration_ms: must be greater than 0 (omit it for a permanent fault)"
            ));
        }
        let when = match (&self.at_ms, &self.on) {
            (Some(_), Some(_)) => return Err(format!("{field}: give at_ms or on, not both")),
            (None, None) => {
                return Err(format!(
                    "{field}: missing at_ms or on (when the fault fires)"
                ));
            }
            (Some(at_ms), None) => {
                if self.after_ms.is_some() {
                    return Err(format!("{field}.after_ms: only with on (use at_ms alone)"));
                }
                When::At { at_ms: *at_ms }
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
                    Some(n) => Some(node_field("on.node", &Some(n.clone()))?),
                    None => None,
                };
                When::On {
                    event: on.event.clone(),
                    node,
                    nth: on.nth.unwrap_or(1),
                    command: on.command.clone(),
                    after_ms: self.after_ms.unwrap_or(0),
                }
            }
        };
        if let Some(what) = holder_needed.take() {
            let fires_on_a_client =
                matches!(&when, When::On { event, .. } if names_a_client(event));
            if !fires_on_a_client {
                return Err(format!(
                    "{what} needs the client whose event fires the fault: give an `on` trigger on one of {}",
                    TRIGGER_EVENTS
                        .iter()
                        .filter(|e| names_a_client(e))
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        Ok(Fault {
            kind,
            when,
            duration_ms: self.duration_ms,
        })
    }
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

impl FaultKind {
    /// Every node name the fault gives (placeholders included).
    pub fn node_names(&self) -> Vec<&str> {
        match self {
            FaultKind::Pause { node }
            | FaultKind::Crash { node, .. }
            | FaultKind::ClockJump { node, .. }
            | FaultKind::ClockDrift { node, .. }
            | FaultKind::Isolate { node }
            | FaultKind::DropConnections { node } => vec![node],
            FaultKind::Delay { from, to, .. } => vec![from, to],
            FaultKind::Failover { master } => vec![master],
            FaultKind::Partition { groups, .. } => {
                groups.iter().flatten().map(String::as_str).collect()
            }
        }
    }

    /// The directed links this network fault cuts: for a partition, between every two listed
    /// nodes that share no group (with `one_way`, only from a node's first group to a later
    /// one); for `isolate`, every link of the node.
    pub fn links(&self, nodes: &[String]) -> Vec<(String, String)> {
        let mut links = Vec::new();
        self.visit_links(nodes, |a, b| {
            links.push((a.clone(), b.clone()));
            true
        });
        links
    }

    /// How many directed links this fault cuts, counting no further than `max + 1`.
    pub fn count_links(&self, nodes: &[String], max: u64) -> u64 {
        let mut count = 0;
        self.visit_links(nodes, |_, _| {
            count += 1;
            count <= max
        });
        count
    }

    /// Calls `visit` with each directed link [`FaultKind::links`] lists, in its order, until
    /// `visit` returns false.
    fn visit_links(&self, nodes: &[String], mut visit: impl FnMut(&String, &String) -> bool) {
        match self {
            FaultKind::Partition { groups, one_way } => {
                // Each listed node's groups, in order: the first is where it is first listed.
                let mut member_of: BTreeMap<&String, Vec<usize>> = BTreeMap::new();
                for (g, group) in groups.iter().enumerate() {
                    for node in group {
                        member_of.entry(node).or_default().push(g);
                    }
                }
                for (a, a_groups) in &member_of {
                    for (b, b_groups) in &member_of {
                        let together = a_groups.iter().any(|g| b_groups.contains(g));
                        let cut_direction = !one_way || a_groups[0] < b_groups[0];
                        if a != b && !together && cut_direction && !visit(a, b) {
                            return;
                        }
                    }
                }
            }
            FaultKind::Isolate { node } => {
                for n in nodes.iter().filter(|n| *n != node) {
                    if !visit(node, n) || !visit(n, node) {
                        return;
                    }
                }
            }
            _ => {}
        }
    }

    /// The kind's name in scenarios and traces.
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::Pause { .. } => "pause",
            FaultKind::Crash { .. } => "crash",
            FaultKind::ClockJump { .. } => "clock_jump",
            FaultKind::ClockDrift { .. } => "clock_drift",
            FaultKind::Partition { .. } => "partition",
            FaultKind::Isolate { .. } => "isolate",
            FaultKind::Delay { .. } => "delay",
            FaultKind::DropConnections { .. } => "drop_connections",
            FaultKind::Failover { .. } => "failover",
        }
    }

    /// The node the fault's events are recorded on: its node (a delay's `from`), the nemesis
    /// for a partition.
    pub fn target(&self) -> &str {
        match self {
            FaultKind::Partition { .. } => "nemesis",
            _ => self.node_names()[0],
        }
    }

    pub fn describe(&self) -> String {
        match self {
            FaultKind::Pause { node } => format!("{node} paused (stop the world)"),
            FaultKind::Crash { node, .. } => format!("{node} crashed"),
            FaultKind::ClockJump { node, delta_ms } => {
                format!("{node}'s wall clock jumps {delta_ms:+} ms")
            }
            FaultKind::ClockDrift { node, rate } => format!("{node}'s clock runs at {rate}x"),
            FaultKind::Partition {
                groups,
                one_way: false,
            } => format!("partition {groups:?}"),
            FaultKind::Partition {
                groups,
                one_way: true,
            } => format!("one-way partition {groups:?} (earlier groups cannot reach later ones)"),
            FaultKind::Isolate { node } => format!("{node} isolated"),
            FaultKind::Delay { from, to, extra_ms } => {
                format!("{from} -> {to}: +{extra_ms} ms one-way latency")
            }
            FaultKind::DropConnections { node } => format!("every connection of {node} reset"),
            FaultKind::Failover { master } => format!("SENTINEL FAILOVER {master}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> RowNodes {
        RowNodes {
            nodes: ["redis-1", "client-1", "client-2", "resource"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            masters: vec!["redis-1".into()],
        }
    }

    fn five_masters() -> RowNodes {
        let mut row = nodes();
        row.masters = (1..=5).map(|i| format!("redis-{i}")).collect();
        row.nodes.extend(row.masters.clone());
        row
    }

    #[test]
    fn placeholders_expand_per_row_or_wait_for_the_trigger() {
        let bridge = spec(
            r#"{ "kind": "partition", "at_ms": 0,
                 "groups": [["client-1", "{first_majority}"], ["client-2", "{last_majority}"]] }"#,
        );
        let groups = |row: &RowNodes| match bridge.validate("faults[0]", row).unwrap().kind {
            FaultKind::Partition { groups, .. } => groups,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            groups(&five_masters()),
            vec![
                vec!["client-1", "redis-1", "redis-2", "redis-3"],
                vec!["client-2", "redis-3", "redis-4", "redis-5"]
            ]
        );
        assert_eq!(
            groups(&nodes()),
            vec![vec!["client-1", "redis-1"], vec!["client-2", "redis-1"]]
        );
        let crash = spec(
            r#"{ "kind": "crash", "node": "{holder_master}", "restart_after_ms": 1,
                 "on": { "event": "acquired" } }"#,
        )
        .validate("faults[1]", &nodes())
        .unwrap();
        assert_eq!(
            crash.kind,
            FaultKind::Crash {
                node: "{holder_master}".into(),
                restart_after_ms: Some(1)
            }
        );
        let err = spec(r#"{ "kind": "pause", "node": "{holder}", "at_ms": 5 }"#)
            .validate("faults[2]", &nodes())
            .unwrap_err();
        assert!(
            err.starts_with(
                "faults[2].node: {holder} needs the client whose event fires the fault"
            ),
            "{err}"
        );
        let err = spec(r#"{ "kind": "pause", "node": "{holdr}", "on": { "event": "acquired" } }"#)
            .validate("faults[3]", &nodes())
            .unwrap_err();
        assert!(
            err.starts_with("faults[3].node: unknown placeholder {holdr}"),
            "{err}"
        );
    }

    fn spec(json: &str) -> FaultSpec {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_triggered_pause_validates() {
        let f = spec(r#"{ "kind": "pause", "node": "client-1", "duration_ms": 2000,
                          "on": { "event": "acquired", "node": "client-1", "nth": 1 }, "after_ms": 5 }"#)
            .validate("faults[0]", &nodes())
            .unwrap();
        assert_eq!(
            f.kind,
            FaultKind::Pause {
                node: "client-1".into()
            }
        );
        assert_eq!(
            f.when,
            When::On {
                event: "acquired".into(),
                node: Some("client-1".into()),
                nth: 1,
                command: None,
                after_ms: 5
            }
        );
    }

    /// What `locksim shrink` writes back validates to the same fault, for every kind.
    #[test]
    fn a_fault_written_back_validates_to_itself() {
        let mut nodes = nodes();
        nodes.nodes.insert("sentinel-1".into());
        for json in [
            r#"{ "kind": "pause", "node": "client-1", "duration_ms": 20, "at_ms": 5 }"#,
            r#"{ "kind": "crash", "node": "redis-1", "restart_after_ms": 0, "at_ms": 5 }"#,
            r#"{ "kind": "crash", "node": "client-2", "at_ms": 5 }"#,
            r#"{ "kind": "clock_jump", "node": "redis-1", "delta_ms": -300, "at_ms": 5 }"#,
            r#"{ "kind": "clock_drift", "node": "client-1", "rate": 1.25, "duration_ms": 9, "at_ms": 1 }"#,
            r#"{ "kind": "partition", "groups": [["client-1"], ["redis-1"]], "one_way": true, "at_ms": 1 }"#,
            r#"{ "kind": "isolate", "node": "redis-1", "duration_ms": 9, "at_ms": 1 }"#,
            r#"{ "kind": "delay", "from": "client-1", "to": "resource", "extra_ms": 700, "at_ms": 1 }"#,
            r#"{ "kind": "drop_connections", "node": "redis-1", "at_ms": 1 }"#,
            r#"{ "kind": "failover", "node": "redis-1", "at_ms": 1 }"#,
            r#"{ "kind": "pause", "node": "client-1", "on": { "event": "command_sent", "command": "EXPIRE" }, "after_ms": 0 }"#,
            r#"{ "kind": "pause", "node": "{holder}", "duration_ms": 5, "on": { "event": "lock_granted" }, "after_ms": 0 }"#,
            r#"{ "kind": "partition", "groups": [["{holder}", "{holder_masters}"], ["{rest}"]], "on": { "event": "acquired" }, "after_ms": 0 }"#,
        ] {
            let fault = spec(json).validate("f", &nodes).unwrap();
            let written = serde_json::to_string(&FaultSpec::from(&fault)).unwrap();
            assert_eq!(
                spec(&written).validate("f", &nodes).unwrap(),
                fault,
                "{written}"
            );
        }
    }

    #[test]
    fn bad_faults_name_the_field() {
        let err = |json: &str| spec(json).validate("faults[3]", &nodes()).unwrap_err();
        assert_eq!(
            err(r#"{ "kind": "paws", "at_ms": 1 }"#)
                .split(" (")
                .next()
                .unwrap(),
            "faults[3].kind: unknown fault kind \"paws\""
        );
        assert!(
            err(r#"{ "kind": "pause", "node": "client-9", "at_ms": 1 }"#)
                .starts_with("faults[3].node: no node \"client-9\"")
        );
        assert_eq!(
            err(r#"{ "kind": "pause", "node": "client-1" }"#),
            "faults[3]: missing at_ms or on (when the fault fires)"
        );
        assert_eq!(
            err(r#"{ "kind": "pause", "node": "client-1", "rate": 2, "at_ms": 1 }"#),
            "faults[3].rate: not a field of a pause fault"
        );
        assert!(
            err(r#"{ "kind": "pause", "node": "client-1", "on": { "event": "acquird" } }"#)
                .starts_with("faults[3].on.event: unknown event")
        );
    }

    #[test]
    fn partition_cuts_only_links_between_groups() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // A bridge: b talks to both sides, a and c cannot talk; d is unlisted and unaffected.
        let bridge = FaultKind::Partition {
            groups: vec![names(&["a", "b"]), names(&["b", "c"])],
            one_way: false,
        };
        let links = bridge.links(&names(&["a", "b", "c", "d"]));
        assert_eq!(
            links,
            vec![
                ("a".to_string(), "c".to_string()),
                ("c".to_string(), "a".to_string())
            ]
        );
        // One way: the earlier group's messages to the later group are cut, not the replies.
        let one_way = FaultKind::Partition {
            groups: vec![names(&["a"]), names(&["b", "c"])],
            one_way: true,
        };
        assert_eq!(
            one_way.links(&names(&["a", "b", "c"])),
            vec![
                ("a".to_string(), "b".to_string()),
                ("a".to_string(), "c".to_string())
            ]
        );
        let isolate = FaultKind::Isolate { node: "b".into() };
        assert_eq!(isolate.links(&names(&["a", "b", "c"])).len(), 4);
    }

    /// A partition that keeps no two nodes apart is no fault: an error naming the group.
    #[test]
    fn partitions_that_cut_nothing_are_errors() {
        let err = |groups: &str| {
            spec(&format!(
                r#"{{ "kind": "partition", "groups": {groups}, "at_ms": 1 }}"#
            ))
            .validate("faults[0]", &nodes())
            .unwrap_err()
        };
        assert_eq!(
            err("[[], []]"),
            "faults[0].groups[0]: an empty group (list the nodes on each side)"
        );
        assert_eq!(
            err(r#"[["client-1", "client-1"]]"#),
            "faults[0].groups[0][1]: \"client-1\" is already in this group"
        );
        for groups in [
            r#"[["client-1"]]"#,
            r#"[["client-1"], ["client-1"]]"#,
            r#"[["client-1", "redis-1"], ["redis-1", "client-1"]]"#,
        ] {
            assert!(
                err(groups).starts_with("faults[0].groups: cuts no link"),
                "{groups}"
            );
        }
        assert!(
            spec(r#"{ "kind": "partition", "groups": [["client-1"], ["redis-1"]], "at_ms": 1 }"#)
                .validate("faults[0]", &nodes())
                .is_ok()
        );
    }
}
