//! The fault kinds of a scenario file: one `FaultKind` variant per kind, its name in scenarios
//! and traces, its description, the nodes it names and the links a network fault cuts. What a
//! kind does to the world is `crate::faults::kinds`.

use std::collections::BTreeMap;

/// `redis-N`: a master group's name (not a replica).
pub fn is_master_name(name: &str) -> bool {
    name.strip_prefix("redis-")
        .is_some_and(|n| n.parse::<u32>().is_ok())
}

#[derive(Clone, Debug, PartialEq)]
pub enum FaultKind {
    /// Stop-the-world pause (GC): every task of the node stops; timers keep running.
    Pause { node: String },
    /// The process dies (`kill -9`): its tasks and timers are gone and whatever it kept only in
    /// memory is lost, but its machine lives on: the bytes it wrote to its sockets arrive, then
    /// its peers read EOF, and what it wrote to files (the AOF's page cache) stays. It restarts
    /// afresh after `restart_after_ms`, or stays down.
    Crash {
        node: String,
        restart_after_ms: Option<u64>,
    },
    /// The node's machine loses power (or its kernel panics): the process dies as in `Crash`,
    /// and with it what the machine had not yet made durable — the un-fsynced page cache, the
    /// bytes still in flight — and its peers hear nothing at all (no FIN; connection attempts go
    /// unanswered) until their own timeouts give up or the machine is back after
    /// `restart_after_ms`, when its old connections are reset.
    PowerLoss {
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

/// Every fault kind of the contract; the ones not listed in `FaultKind` are not built yet.
pub const FAULT_KINDS: &[&str] = &[
    "pause",
    "crash",
    "power_loss",
    "clock_jump",
    "clock_drift",
    "partition",
    "isolate",
    "delay",
    "drop_connections",
    "failover",
];

impl FaultKind {
    /// The node of a fault on one node (pause, crash, power loss, clock, isolate, dropped
    /// connections); `None` for the faults on links or a failover.
    pub fn single_node_mut(&mut self) -> Option<&mut String> {
        match self {
            FaultKind::Pause { node }
            | FaultKind::Crash { node, .. }
            | FaultKind::PowerLoss { node, .. }
            | FaultKind::ClockJump { node, .. }
            | FaultKind::ClockDrift { node, .. }
            | FaultKind::Isolate { node }
            | FaultKind::DropConnections { node } => Some(node),
            FaultKind::Delay { .. } | FaultKind::Failover { .. } | FaultKind::Partition { .. } => {
                None
            }
        }
    }

    /// Every node name the fault gives (placeholders included).
    pub fn node_names(&self) -> Vec<&str> {
        match self {
            FaultKind::Pause { node }
            | FaultKind::Crash { node, .. }
            | FaultKind::PowerLoss { node, .. }
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

    /// How long a `crash` or `power_loss` keeps its node down (`None`: for good); `None` for
    /// every other kind.
    pub fn restart_after_ms(&self) -> Option<Option<u64>> {
        match self {
            FaultKind::Crash {
                restart_after_ms, ..
            }
            | FaultKind::PowerLoss {
                restart_after_ms, ..
            } => Some(*restart_after_ms),
            _ => None,
        }
    }

    /// The kind's name in scenarios and traces.
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::Pause { .. } => "pause",
            FaultKind::Crash { .. } => "crash",
            FaultKind::PowerLoss { .. } => "power_loss",
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
            FaultKind::PowerLoss { node, .. } => format!("{node}'s machine lost power"),
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
}
