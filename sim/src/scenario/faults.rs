//! The `faults` of a scenario file: one `FaultKind` variant per fault kind, when each fires
//! (`When`), and their validation against the scenario's nodes. What a fault does to the world
//! is `crate::faults`.
//!
//! A fault fires at `at_ms`, or `after_ms` after the `nth` occurrence of an event (`on`); it
//! lasts `duration_ms`, or to the end of the run when that is omitted.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::scenario::limits::MAX_LIST_ITEMS;

/// `redis-N`: a master group's name (not a replica).
pub fn is_master_name(name: &str) -> bool {
    name.strip_prefix("redis-")
        .is_some_and(|n| n.parse::<u32>().is_ok())
}

/// A fault as written in the scenario file, before validation.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub kind: String,
    pub node: Option<String>,
    pub duration_ms: Option<u64>,
    pub restart_after_ms: Option<u64>,
    pub delta_ms: Option<i64>,
    pub rate: Option<f64>,
    pub groups: Option<Vec<Vec<String>>>,
    pub one_way: Option<bool>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub extra_ms: Option<u64>,
    pub at_ms: Option<u64>,
    pub on: Option<TriggerSpec>,
    pub after_ms: Option<u64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerSpec {
    pub event: String,
    pub node: Option<String>,
    pub nth: Option<u64>,
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

/// Trigger events of the contract.
pub const TRIGGER_EVENTS: &[&str] = &[
    "acquired",
    "acquire_started",
    "released",
    "command_sent",
    "replicated",
];

impl FaultSpec {
    /// Validates against the scenario's node names; `field` is e.g. `faults[2]`.
    pub fn validate(&self, field: &str, nodes: &BTreeSet<String>) -> Result<Fault, String> {
        let node_field = |name: &str, value: &Option<String>| -> Result<String, String> {
            let node = value
                .clone()
                .ok_or_else(|| format!("{field}.{name}: missing (a node name)"))?;
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
                for (g, group) in groups.iter().enumerate() {
                    if group.is_empty() {
                        return Err(format!(
                            "{field}.groups[{g}]: an empty group (list the nodes on each side)"
                        ));
                    }
                    for (n, node) in group.iter().enumerate() {
                        node_field(&format!("groups[{g}][{n}]"), &Some(node.clone()))?;
                        if group[..n].contains(node) {
                            return Err(format!(
                                "{field}.groups[{g}][{n}]: \"{node}\" is already in this group"
                            ));
                        }
                    }
                }
                let kind = FaultKind::Partition {
                    groups,
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
                if !is_master_name(&master) {
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
        Ok(Fault {
            kind,
            when,
            duration_ms: self.duration_ms,
        })
    }
}

impl FaultKind {
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

    /// The node the fault's events are recorded on (the nemesis for network-wide faults).
    pub fn target(&self) -> &str {
        match self {
            FaultKind::Pause { node }
            | FaultKind::Crash { node, .. }
            | FaultKind::ClockJump { node, .. }
            | FaultKind::ClockDrift { node, .. }
            | FaultKind::Isolate { node }
            | FaultKind::DropConnections { node } => node,
            FaultKind::Delay { from, .. } => from,
            FaultKind::Failover { master } => master,
            FaultKind::Partition { .. } => "nemesis",
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

    fn nodes() -> BTreeSet<String> {
        ["redis-1", "client-1", "client-2", "resource"]
            .iter()
            .map(|s| s.to_string())
            .collect()
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
