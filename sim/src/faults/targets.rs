//! The placeholders of a scripted fault (`scenario::faults::placeholder`), resolved when it
//! fires from the world's own state: the client its trigger named, the history's lock-key
//! writers, the row's node names. Deterministic: every choice is by name order.

use crate::scenario::faults::FaultKind;
use crate::scenario::faults::placeholder::{HOLDER, HOLDER_MASTER, HOLDER_MASTERS, PEER, REST};
use crate::world::World;

/// The masters (in name order) whose lock key holds `holder`'s write.
fn holder_masters(world: &World, holder: &str) -> Vec<String> {
    let written = world.history.lock_written_by(holder);
    world
        .scenario
        .master_names()
        .into_iter()
        .filter(|m| written.contains(m))
        .collect()
}

/// One node placeholder (or a plain name, unchanged).
fn single(name: &str, world: &World, holder: &str) -> String {
    match name {
        HOLDER => holder.to_string(),
        PEER => world
            .scenario
            .client_names()
            .into_iter()
            .find(|c| c != holder)
            .expect("validated: {peer} needs two clients"),
        HOLDER_MASTER => holder_masters(world, holder)
            .pop()
            .unwrap_or_else(|| "redis-1".to_string()),
        other => other.to_string(),
    }
}

/// The fault with its placeholders replaced by node names. `holder` is the client whose event
/// fired the trigger (validation guarantees one wherever a placeholder needs it).
pub fn resolve(kind: &FaultKind, world: &World, holder: Option<&str>) -> FaultKind {
    let holder = holder.unwrap_or_default();
    let one = |name: &String| single(name, world, holder);
    match kind {
        FaultKind::Pause { node } => FaultKind::Pause { node: one(node) },
        FaultKind::Crash {
            node,
            restart_after_ms,
        } => FaultKind::Crash {
            node: one(node),
            restart_after_ms: *restart_after_ms,
        },
        FaultKind::PowerLoss {
            node,
            restart_after_ms,
        } => FaultKind::PowerLoss {
            node: one(node),
            restart_after_ms: *restart_after_ms,
        },
        FaultKind::ClockJump { node, delta_ms } => FaultKind::ClockJump {
            node: one(node),
            delta_ms: *delta_ms,
        },
        FaultKind::ClockDrift { node, rate } => FaultKind::ClockDrift {
            node: one(node),
            rate: *rate,
        },
        FaultKind::Isolate { node } => FaultKind::Isolate { node: one(node) },
        FaultKind::DropConnections { node } => FaultKind::DropConnections { node: one(node) },
        FaultKind::Delay { from, to, extra_ms } => FaultKind::Delay {
            from: one(from),
            to: one(to),
            extra_ms: *extra_ms,
        },
        FaultKind::Failover { master } => FaultKind::Failover {
            master: one(master),
        },
        FaultKind::Partition { groups, one_way } => {
            let mut resolved: Vec<Vec<String>> = groups
                .iter()
                .map(|group| {
                    group
                        .iter()
                        .flat_map(|name| match name.as_str() {
                            HOLDER_MASTERS => {
                                let masters = holder_masters(world, holder);
                                if masters.is_empty() {
                                    vec![single(HOLDER_MASTER, world, holder)]
                                } else {
                                    masters
                                }
                            }
                            REST => vec![name.clone()],
                            _ => vec![one(name)],
                        })
                        .collect()
                })
                .collect();
            // `{rest}`: every Redis, Sentinel and client node no other group names.
            let named: Vec<String> = resolved
                .iter()
                .flatten()
                .filter(|n| *n != REST)
                .cloned()
                .collect();
            let rest: Vec<String> = world
                .scenario
                .node_names()
                .into_iter()
                .filter(|n| n != "resource" && !named.contains(n))
                .collect();
            for group in &mut resolved {
                if group.iter().any(|n| n == REST) {
                    group.retain(|n| n != REST);
                    group.extend(rest.iter().cloned());
                }
            }
            FaultKind::Partition {
                groups: resolved,
                one_way: *one_way,
            }
        }
    }
}
