//! What a run reached, for the corpus to learn from: its features and its watermarks.
//!
//! Features (Mallory, Meng et al. CCS 2023, rewards unseen event pairs; moonpool-explorer and
//! TigerBeetle steer by marks): each mark that fired (`m:key_expired`), each ordered pair of
//! marks — `b` fired within [`PAIR_WINDOW_MS`] after a firing of `a`
//! (`p:wait_short>replica_promoted`) — each mark with a fault kind active when it fired
//! (`f:replica_promoted@pause`), and each watermark's bucket (`w:failover_lag>=2000ms`). A fault is active from
//! its `injected` event to its `healed` event in the trace; an instantaneous one (failover,
//! drop_connections) for [`RECENT_MS`] after it.
//!
//! Watermarks (to steer before the first violation; the three):
//! - write margin: the least margin between the end of a holder's ownership of the lock key on
//!   the servers (the trace's `key_owner` events: the key expired, was deleted, overwritten,
//!   lost in a crash or a failover) and that holder's last resource write while it believed it
//!   held the lock. Negative: it wrote after its lease was gone (a resource-safety violation in
//!   the making); small and positive: close to one.
//! - grant validity: the least lease left when a client is told it holds the lock — the
//!   scheme's lease from the first write of the key for it since its acquire began, minus the
//!   time to the grant (Redlock's validity, for every scheme with a lease). Small or negative:
//!   the holder starts its work on a lease about to end.
//! - failover lag: the largest time a replica promoted to master had gone without the lock key
//!   as a master last wrote it (`key_owner` events by a command, an expiry or a restart, not
//!   by replication). Large: the new master lacks a lock a client was granted.

use std::collections::{BTreeMap, BTreeSet};

use model::history::{Event, EventKind, FaultPhase};
use model::marks::{Hit, Mark};

/// How long an instantaneous fault counts as active after it fired.
pub const RECENT_MS: u64 = 5_000;

/// A pair of marks is a feature when the second fires within this time after the first: an
/// ordered step of a path (a WAIT short of its replicas, then a promotion), not two unrelated
/// points of the run.
pub const PAIR_WINDOW_MS: u64 = 2_000;

/// A run's features and watermark.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reached {
    pub features: BTreeSet<String>,
    /// The first time (µs) each mark fired.
    pub first_us: BTreeMap<Mark, u64>,
    /// For each mark, pair and (mark, fault kind) feature: the mark whose hit first reached it
    /// and when (µs) — where an anchored child inserts its fault (`anchor`).
    pub first_at: BTreeMap<String, (Mark, u64)>,
    /// Least (ownership end − last write while holding), ms; `None` when no holder wrote.
    pub least_write_margin_ms: Option<i64>,
    /// Least lease left at a grant, ms; `None` without a lease or a grant.
    pub least_grant_validity_ms: Option<i64>,
    /// Largest time a promoted replica's lock key was behind the master's, ms; `None` without
    /// a promotion.
    pub largest_failover_lag_ms: Option<i64>,
}

impl Reached {
    /// The marks fired, in the order of their first hits.
    pub fn marks_in_order(&self) -> Vec<Mark> {
        let mut marks: Vec<(u64, Mark)> = self.first_us.iter().map(|(m, t)| (*t, *m)).collect();
        marks.sort();
        marks.into_iter().map(|(_, m)| m).collect()
    }
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

/// The features and watermarks of one run: its mark hits (in time order), its trace and the
/// scheme's lease (`None`: lease-less).
pub fn reached(hits: &[Hit], events: &[Event], lease_ms: Option<u64>) -> Reached {
    let mut out = Reached::default();
    let mut last_us: BTreeMap<Mark, u64> = BTreeMap::new();
    let active = ActiveFaults::of(events);
    let mut open: BTreeMap<String, i32> = BTreeMap::new();
    let mut next_change = 0;
    for hit in hits {
        out.first_us.entry(hit.mark).or_insert(hit.t_us);
        for (before, t_us) in &last_us {
            if *before != hit.mark && hit.t_us.saturating_sub(*t_us) <= PAIR_WINDOW_MS * 1000 {
                let pair = format!("p:{}>{}", before.name(), hit.mark.name());
                out.first_at
                    .entry(pair.clone())
                    .or_insert((hit.mark, hit.t_us));
                out.features.insert(pair);
            }
        }
        last_us.insert(hit.mark, hit.t_us);
        while next_change < active.changes.len() && active.changes[next_change].0 <= hit.t_us {
            let (_, kind, delta) = &active.changes[next_change];
            *open.entry(kind.clone()).or_default() += delta;
            next_change += 1;
        }
        for (kind, n) in &open {
            if *n > 0 {
                let under = format!("f:{}@{kind}", hit.mark.name());
                out.first_at
                    .entry(under.clone())
                    .or_insert((hit.mark, hit.t_us));
                out.features.insert(under);
            }
        }
    }
    for (mark, t_us) in &out.first_us {
        let name = format!("m:{}", mark.name());
        out.first_at.insert(name.clone(), (*mark, *t_us));
        out.features.insert(name);
    }
    out.least_write_margin_ms = least_write_margin_ms(events);
    out.least_grant_validity_ms = lease_ms.and_then(|lease| least_grant_validity_ms(events, lease));
    out.largest_failover_lag_ms = largest_failover_lag_ms(events);
    let lows = [
        ("write_margin", out.least_write_margin_ms),
        ("grant_validity", out.least_grant_validity_ms),
    ];
    for (name, value) in lows {
        if let Some(v) = value {
            out.features.insert(format!("w:{name}{}", at_most(v)));
        }
    }
    if let Some(lag) = out.largest_failover_lag_ms {
        out.features
            .insert(format!("w:failover_lag{}", at_least(lag)));
    }
    out
}

/// The bounds of watermark buckets, ms: a run whose watermark falls in a bucket no run reached
/// before reaches a new feature, so the corpus keeps every step towards a violation (AFL's
/// hit-count buckets, applied to a distance).
pub const WATERMARK_BUCKETS_MS: [i64; 8] = [0, 100, 250, 500, 1000, 2000, 4000, 8000];

/// The bucket of a watermark where lower is closer to a violation: `<0`, `<=100ms`, ...
fn at_most(value_ms: i64) -> String {
    match WATERMARK_BUCKETS_MS.iter().find(|&&b| value_ms <= b) {
        _ if value_ms < 0 => "<0".to_string(),
        Some(b) => format!("<={b}ms"),
        None => ">8000ms".to_string(),
    }
}

/// The bucket of a watermark where higher is closer to a violation: `>=0ms`, `>=100ms`, ...
fn at_least(value_ms: i64) -> String {
    let b = WATERMARK_BUCKETS_MS
        .iter()
        .rev()
        .find(|&&b| value_ms >= b)
        .copied()
        .unwrap_or(0);
    format!(">={b}ms")
}

/// See the module doc: per owner, the first time since its acquire began that a master took
/// the key for it; at its grant, the lease left.
fn least_grant_validity_ms(events: &[Event], lease_ms: u64) -> Option<i64> {
    let mut written_us: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let mut least: Option<i64> = None;
    for e in events {
        match &e.kind {
            EventKind::AcquireStarted { .. } => {
                written_us.insert(model::history::owner_name(&e.node, e.thread), None);
            }
            EventKind::KeyOwner {
                owner: Some(owner),
                by,
                ..
            } if by != "replication" => {
                if let Some(first @ None) = written_us.get_mut(owner) {
                    *first = Some(e.t_us);
                }
            }
            EventKind::Acquired { .. } => {
                let owner = model::history::owner_name(&e.node, e.thread);
                if let Some(Some(w)) = written_us.remove(&owner) {
                    let left_us = (w + lease_ms * 1000) as i64 - e.t_us as i64;
                    let left_ms = left_us.div_euclid(1000);
                    least = Some(least.map_or(left_ms, |l| l.min(left_ms)));
                }
            }
            _ => {}
        }
    }
    least
}

/// See the module doc: the lock key's owner per node, and per key the owner and time of its
/// last change on a master; at each promotion, how long the promoted node had been without it.
fn largest_failover_lag_ms(events: &[Event]) -> Option<i64> {
    let mut owner_of: BTreeMap<(String, String), Option<String>> = BTreeMap::new();
    let mut master_wrote: BTreeMap<String, (Option<String>, u64)> = BTreeMap::new();
    // Nodes a `role` event made replicas (or masters); before one, the topology's names say.
    let mut replica: BTreeMap<String, bool> = BTreeMap::new();
    let mut largest: Option<i64> = None;
    for e in events {
        let is_replica = |replica: &BTreeMap<String, bool>| {
            replica
                .get(&e.node)
                .copied()
                .unwrap_or_else(|| e.node.contains("-replica-"))
        };
        match &e.kind {
            EventKind::KeyOwner { key, owner, by } => {
                owner_of.insert((e.node.clone(), key.clone()), owner.clone());
                if by != "replication" && !is_replica(&replica) {
                    master_wrote.insert(key.clone(), (owner.clone(), e.t_us));
                }
            }
            EventKind::Replication { what, detail }
                if what == "role" && !detail.starts_with("master") =>
            {
                replica.insert(e.node.clone(), true);
            }
            EventKind::Replication { what, .. } if what == "role" => {
                replica.insert(e.node.clone(), false);
                let mut lag_us = 0u64;
                for (key, (owner, at_us)) in &master_wrote {
                    let here = owner_of
                        .get(&(e.node.clone(), key.clone()))
                        .cloned()
                        .flatten();
                    if here != *owner {
                        lag_us = lag_us.max(e.t_us.saturating_sub(*at_us));
                    }
                }
                let lag_ms = (lag_us / 1000) as i64;
                largest = Some(largest.map_or(lag_ms, |l| l.max(lag_ms)));
            }
            _ => {}
        }
    }
    largest
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
pub(super) mod tests {
    use super::*;

    /// A trace event at `t_ms` on `node` (the anchor tests build theirs with it too).
    pub(in crate::hunt) fn event(t_ms: u64, node: &str, kind: EventKind) -> Event {
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
        let r = reached(&hits, &events, None);
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
        // Where each was first reached: the pair at its second mark, the mark under a fault
        // kind at its first hit while the kind was active.
        assert_eq!(
            r.first_at["p:replica_promoted>wait_short"],
            (Mark::WaitShort, 600_000)
        );
        assert_eq!(
            r.first_at["f:wait_short@failover"],
            (Mark::WaitShort, 600_000)
        );
        assert_eq!(
            r.first_at["m:replica_promoted"],
            (Mark::ReplicaPromoted, 500_000)
        );
        assert!(r.first_at.keys().all(|f| r.features.contains(f)));
        let once = reached(&hits[..2], &events, None);
        assert!(!once.features.contains("p:replica_promoted>wait_short"));
        // Past the window, an order is no pair.
        let late = [hit(Mark::WaitShort, 200), hit(Mark::KeyExpired, 2_300)];
        let r = reached(&late, &[], None);
        assert!(
            !r.features.iter().any(|f| f.starts_with("p:")),
            "{:?}",
            r.features
        );
    }

    fn started(t_ms: u64, client: &str) -> Event {
        event(t_ms, client, EventKind::AcquireStarted { attempt: 1 })
    }

    fn acquired(t_ms: u64, client: &str) -> Event {
        event(
            t_ms,
            client,
            EventKind::Acquired {
                token: "t".into(),
                fence: None,
            },
        )
    }

    pub(in crate::hunt) fn key(t_ms: u64, node: &str, owner: Option<&str>, by: &str) -> Event {
        event(
            t_ms,
            node,
            EventKind::KeyOwner {
                key: "lock".into(),
                owner: owner.map(String::from),
                by: by.into(),
            },
        )
    }

    #[test]
    fn the_grant_validity_is_the_lease_left_from_the_first_write_for_the_acquire() {
        let events = vec![
            started(0, "client-1"),
            key(100, "redis-1", Some("client-1"), "client-1"),
            key(101, "redis-1-replica-1", Some("client-1"), "replication"),
            acquired(400, "client-1"),
            started(1000, "client-2"),
            key(3000, "redis-1", Some("client-2"), "client-2"),
            acquired(3900, "client-2"),
        ];
        // client-1: 100 + 1000 − 400; client-2: 3000 + 1000 − 3900.
        assert_eq!(least_grant_validity_ms(&events, 1000), Some(100));
        let r = reached(&[], &events, Some(1000));
        assert_eq!(r.least_grant_validity_ms, Some(100));
        assert!(
            r.features.contains("w:grant_validity<=100ms"),
            "{:?}",
            r.features
        );
        assert_eq!(reached(&[], &events, None).least_grant_validity_ms, None);
    }

    #[test]
    fn the_failover_lag_is_how_long_the_promoted_replica_missed_the_masters_key() {
        let promoted = |t_ms, node: &str| {
            event(
                t_ms,
                node,
                EventKind::Replication {
                    what: "role".into(),
                    detail: "master (REPLICAOF NO ONE)".into(),
                },
            )
        };
        let caught_up = vec![
            key(100, "redis-1", Some("client-1"), "client-1"),
            key(102, "redis-1-replica-1", Some("client-1"), "replication"),
            promoted(5000, "redis-1-replica-1"),
        ];
        assert_eq!(largest_failover_lag_ms(&caught_up), Some(0));
        let behind = vec![
            key(100, "redis-1", Some("client-1"), "client-1"),
            key(102, "redis-1-replica-1", Some("client-1"), "replication"),
            key(1000, "redis-1", Some("client-2"), "client-2"),
            promoted(3500, "redis-1-replica-2"),
        ];
        assert_eq!(largest_failover_lag_ms(&behind), Some(2500));
        let r = reached(&[], &behind, None);
        assert!(
            r.features.contains("w:failover_lag>=2000ms"),
            "{:?}",
            r.features
        );
        assert_eq!(largest_failover_lag_ms(&behind[..3]), None);
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
