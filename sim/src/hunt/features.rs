//! What a run reached, for the corpus to learn from: its features and its watermarks.
//!
//! Features (Mallory, Meng et al. CCS 2023, rewards unseen event pairs; moonpool-explorer and
//! TigerBeetle steer by marks): each mark that fired (`m:key_expired`), each ordered pair of
//! marks — `a` fired before some firing of `b` (`p:wait_short>replica_promoted`) — and each mark
//! with a fault kind active when it fired (`f:replica_promoted@pause`). A fault is active from
//! its `injected` event to its `healed` event in the trace; an instantaneous one (failover,
//! drop_connections) for [`RECENT_MS`] after it.
//!
//! Watermark (to steer before the first violation): the least margin between the end of a
//! holder's ownership of the lock key on the servers (the trace's `key_owner` events: the key
//! expired, was deleted, overwritten, lost in a crash or a failover) and that holder's last
//! resource write while it believed it held the lock. Negative: it wrote after its lease was
//! gone (a resource-safety violation in the making); small and positive: close to one.

use std::collections::{BTreeMap, BTreeSet};

use model::history::{Event, EventKind, FaultPhase};
use model::marks::{Hit, Mark};

/// How long an instantaneous fault counts as active after it fired.
pub const RECENT_MS: u64 = 5_000;

/// A run's features and watermark.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reached {
    pub features: BTreeSet<String>,
    /// The first time (µs) each mark fired.
    pub first_us: BTreeMap<Mark, u64>,
    /// Least (ownership end − last write while holding), ms; `None` when no holder wrote.
    pub least_write_margin_ms: Option<i64>,
}

/// Fault kinds active at each instant, from the trace's fault events.
struct ActiveFaults {
    /// (t_us, kind, +1 injected / −1 healed), in time order.
    changes: Vec<(u64, String, i32)>,
}

impl ActiveFaults {
    fn of(events: &[Event]) -> ActiveFaults {
        let mut changes = Vec::new();
        for e in events {
            let EventKind::Fault { fault, phase, .. } = &e.kind else {
                continue;
            };
            if fault == "nemesis" {
                continue;
            }
            match phase {
                FaultPhase::Injected => {
                    changes.push((e.t_us, fault.clone(), 1));
                    if fault == "failover" || fault == "drop_connections" {
                        changes.push((e.t_us + RECENT_MS * 1000, fault.clone(), -1));
                    }
                }
                FaultPhase::Healed => changes.push((e.t_us, fault.clone(), -1)),
            }
        }
        changes.sort_by_key(|c| c.0);
        ActiveFaults { changes }
    }
}

/// The features and watermark of one run: its mark hits (in time order) and its trace.
pub fn reached(hits: &[Hit], events: &[Event]) -> Reached {
    let mut out = Reached::default();
    let mut last_us: BTreeMap<Mark, u64> = BTreeMap::new();
    let active = ActiveFaults::of(events);
    let mut open: BTreeMap<String, i32> = BTreeMap::new();
    let mut next_change = 0;
    for hit in hits {
        out.first_us.entry(hit.mark).or_insert(hit.t_us);
        last_us.insert(hit.mark, hit.t_us);
        while next_change < active.changes.len() && active.changes[next_change].0 <= hit.t_us {
            let (_, kind, delta) = &active.changes[next_change];
            *open.entry(kind.clone()).or_default() += delta;
            next_change += 1;
        }
        for (kind, n) in &open {
            if *n > 0 {
                out.features.insert(format!("f:{}@{kind}", hit.mark.name()));
            }
        }
    }
    for (mark, first) in &out.first_us {
        out.features.insert(format!("m:{}", mark.name()));
        for (other, last) in &last_us {
            if other != mark && first < last {
                out.features
                    .insert(format!("p:{}>{}", mark.name(), other.name()));
            }
        }
    }
    out.least_write_margin_ms = least_write_margin_ms(events);
    out
}

/// See the module doc: per owner, the servers whose lock key it owns, and its last resource
/// write since it began owning one.
fn least_write_margin_ms(events: &[Event]) -> Option<i64> {
    let mut owner_of: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut owned: BTreeMap<String, usize> = BTreeMap::new();
    let mut ended_us: BTreeMap<String, u64> = BTreeMap::new();
    let mut pending_write_us: BTreeMap<String, u64> = BTreeMap::new();
    let mut least: Option<i64> = None;
    let mut note = |margin_us: i64| {
        let margin_ms = margin_us.div_euclid(1000);
        least = Some(least.map_or(margin_ms, |l: i64| l.min(margin_ms)));
    };
    for e in events {
        match &e.kind {
            EventKind::KeyOwner { key, owner, .. } => {
                let slot = (e.node.clone(), key.clone());
                let before = owner_of.remove(&slot);
                if let Some(before) = &before
                    && owner.as_ref() != Some(before)
                {
                    let n = owned.entry(before.clone()).or_default();
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        ended_us.insert(before.clone(), e.t_us);
                        if let Some(w) = pending_write_us.remove(before) {
                            note(e.t_us as i64 - w as i64);
                        }
                    }
                }
                if let Some(owner) = owner {
                    if before.as_ref() != Some(owner) {
                        *owned.entry(owner.clone()).or_default() += 1;
                        ended_us.remove(owner);
                    }
                    owner_of.insert(slot, owner.clone());
                }
            }
            EventKind::ResourceWrite { client, .. } => {
                if owned.get(client).copied().unwrap_or(0) > 0 {
                    pending_write_us.insert(client.clone(), e.t_us);
                } else if let Some(end) = ended_us.get(client) {
                    note(*end as i64 - e.t_us as i64);
                }
            }
            EventKind::Released { .. } => {
                pending_write_us.remove(&model::history::owner_name(&e.node, e.thread));
            }
            _ => {}
        }
    }
    least
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(t_ms: u64, node: &str, kind: EventKind) -> Event {
        Event {
            t_us: t_ms * 1000,
            node: node.into(),
            thread: None,
            kind,
        }
    }

    fn fault(t_ms: u64, name: &str, phase: FaultPhase) -> Event {
        event(
            t_ms,
            "redis-1",
            EventKind::Fault {
                fault: name.into(),
                phase,
                detail: String::new(),
            },
        )
    }

    fn owner(t_ms: u64, owner: Option<&str>) -> Event {
        event(
            t_ms,
            "redis-1",
            EventKind::KeyOwner {
                key: "lock".into(),
                owner: owner.map(String::from),
                by: "x".into(),
            },
        )
    }

    fn write(t_ms: u64, client: &str) -> Event {
        event(
            t_ms,
            "resource",
            EventKind::ResourceWrite {
                client: client.into(),
                value: 1,
                based_on_version: 0,
                version: 1,
                fence: None,
                lost_update: false,
            },
        )
    }

    fn hit(mark: Mark, t_ms: u64) -> Hit {
        Hit {
            mark,
            t_us: t_ms * 1000,
        }
    }

    #[test]
    fn marks_pairs_and_active_fault_kinds_are_features() {
        let events = vec![
            fault(100, "pause", FaultPhase::Injected),
            fault(300, "pause", FaultPhase::Healed),
            fault(400, "failover", FaultPhase::Injected),
        ];
        let hits = [
            hit(Mark::WaitShort, 200),
            hit(Mark::ReplicaPromoted, 500),
            hit(Mark::WaitShort, 600),
        ];
        let r = reached(&hits, &events);
        let expected: BTreeSet<String> = [
            "m:wait_short",
            "m:replica_promoted",
            "p:wait_short>replica_promoted",
            "p:replica_promoted>wait_short",
            "f:wait_short@pause",
            "f:replica_promoted@failover",
            "f:wait_short@failover",
        ]
        .map(String::from)
        .into();
        assert_eq!(r.features, expected);
        assert_eq!(r.first_us[&Mark::WaitShort], 200_000);
        let once = reached(&hits[..2], &events);
        assert!(!once.features.contains("p:replica_promoted>wait_short"));
    }

    #[test]
    fn the_write_margin_is_negative_for_a_write_after_the_key_was_lost() {
        let safe = vec![
            owner(0, Some("client-1")),
            write(700, "client-1"),
            owner(1000, None),
        ];
        assert_eq!(least_write_margin_ms(&safe), Some(300));
        let late = vec![
            owner(0, Some("client-1")),
            owner(1000, Some("client-2")),
            write(1200, "client-1"),
        ];
        assert_eq!(least_write_margin_ms(&late), Some(-200));
        assert_eq!(least_write_margin_ms(&[owner(0, Some("client-1"))]), None);
    }
}
