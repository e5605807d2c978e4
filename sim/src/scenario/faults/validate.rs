//! Validation of a fault as written (`FaultSpec`) against one scheme row's nodes: its kind's
//! fields, its node names and placeholders, and when it fires.

use crate::scenario::faults::placeholder::{self, RowNodes};
use crate::scenario::faults::{
    FAULT_KINDS, Fault, FaultKind, FaultSpec, TRIGGER_EVENTS, When, is_master_name, names_a_client,
};
use crate::scenario::limits::MAX_LIST_ITEMS;

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
            kind @ ("crash" | "power_loss") => {
                allowed.extend(["node", "restart_after_ms"]);
                let node = node_field("node", &self.node)?;
                if node == "resource" {
                    return Err(format!(
                        "{field}.node: the protected resource does not {} (it stands for durable storage)",
                        if kind == "crash" {
                            "crash"
                        } else {
                            "lose power"
                        }
                    ));
                }
                if self.duration_ms.is_some() {
                    return Err(format!(
                        "{field}.duration_ms: a {kind} lasts until restart_after_ms (omit it to stay down)"
                    ));
                }
                let restart_after_ms = self.restart_after_ms;
                if kind == "crash" {
                    FaultKind::Crash {
                        node,
                        restart_after_ms,
                    }
                } else {
                    FaultKind::PowerLoss {
                        node,
                        restart_after_ms,
                    }
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
                        if let Some(stands_for) = row.expand(node) {
                            members.extend(stands_for);
                            continue;
                        }
                        match node.as_str() {
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
        let when = When::from_spec(field, self.at_ms, self.on.as_ref(), self.after_ms, |node| {
            node_field("on.node", &Some(node.to_string()))
        })?;
        if let Some(what) = holder_needed.take()
            && !when.fires_on_a_client()
        {
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
        Ok(Fault {
            kind,
            when,
            duration_ms: self.duration_ms,
        })
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
            r#"{ "kind": "power_loss", "node": "redis-1", "restart_after_ms": 40, "at_ms": 5 }"#,
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
