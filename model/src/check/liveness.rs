//! Liveness (redis.io "Distributed Locks with Redis", Liveness property A: deadlock free) and
//! starvation, in one pass over the history.
//!
//! - **Stuck** means the lock can no longer be granted: once the last fault has healed (a
//!   permanent fault: once injected), some live client wants the lock and *no* client acquires
//!   it for a whole window — e.g. a lock without TTL held by a crashed client (seed 000 scheme 1,
//!   seed 004). One client waiting while others keep acquiring is not stuck.
//! - **Starvation** is measured, not judged: each owner's longest wait, from the first attempt of
//!   a run of attempts to the grant (or to the end of its wish: done, crashed, end of run).
//!   `expect.max_wait_ms` bounds it where a scenario wants a bound; FIFO order is the fairness
//!   checker's job.

use std::collections::BTreeMap;

use super::ms;
use crate::check::CheckContext;
use crate::history::{Event, EventKind, FaultPhase, owner_node};
use crate::result::Violation;

/// The time from which the system counts as healed: the last fault event of any kind.
pub fn healed_at_us(events: &[Event]) -> u64 {
    events
        .iter()
        .rev()
        .find(|e| matches!(e.kind, EventKind::Fault { .. }))
        .map_or(0, |e| e.t_us)
}

/// What the liveness pass found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LivenessReport {
    /// Windows after healing in which live clients wanted the lock and nobody got it.
    pub violations: Vec<Violation>,
    /// Each owner's longest wait (µs); owners that never asked are absent.
    pub max_wait_us: BTreeMap<String, u64>,
}

/// The owners that want the lock now (since when), and when nobody has been granted it since.
struct Demand {
    wanting: BTreeMap<String, u64>,
    /// Since when no client has been granted the lock while someone wanted it.
    idle_since_us: u64,
}

pub fn check(events: &[Event], ctx: &CheckContext) -> LivenessReport {
    let healed_us = healed_at_us(events);
    let window_us = ctx.liveness_window_ms * 1000;
    let mut report = LivenessReport::default();
    let mut demand = Demand {
        wanting: BTreeMap::new(),
        idle_since_us: 0,
    };
    let judge = |demand: &Demand, until_us: u64, report: &mut LivenessReport| {
        let from = demand.idle_since_us.max(healed_us);
        if until_us <= from || until_us - from <= window_us {
            return;
        }
        let waiting: Vec<String> = demand.wanting.keys().cloned().collect();
        report.violations.push(Violation {
            kind: "liveness".into(),
            t_ms: ms(from + window_us),
            nodes: waiting.clone(),
            detail: format!(
                "nobody acquired the lock from {:.3} ms to {:.3} ms ({} ms window after healing at {:.3} ms) while {} wanted it",
                ms(from),
                ms(until_us),
                ctx.liveness_window_ms,
                ms(healed_us),
                waiting.join(", ")
            ),
        });
    };
    let stop_wanting =
        |demand: &mut Demand, owner: &str, t_us: u64, report: &mut LivenessReport| {
            if let Some(since) = demand.wanting.remove(owner) {
                let longest = report.max_wait_us.entry(owner.to_string()).or_default();
                // A wait that began after the run's end (the runner notices the end up to 10 ms
                // late, and events of those last milliseconds are kept) lasted nothing.
                *longest = (*longest).max(t_us.saturating_sub(since));
            }
        };
    for event in events {
        match &event.kind {
            EventKind::AcquireStarted { .. } => {
                if demand.wanting.is_empty() {
                    demand.idle_since_us = event.t_us;
                }
                demand.wanting.entry(event.owner()).or_insert(event.t_us);
            }
            EventKind::Acquired { .. } => {
                if !demand.wanting.is_empty() {
                    judge(&demand, event.t_us, &mut report);
                }
                stop_wanting(&mut demand, &event.owner(), event.t_us, &mut report);
                demand.idle_since_us = event.t_us;
            }
            EventKind::ClientDone => {
                let owner = event.owner();
                if demand.wanting.len() == 1 && demand.wanting.contains_key(&owner) {
                    judge(&demand, event.t_us, &mut report);
                }
                stop_wanting(&mut demand, &owner, event.t_us, &mut report);
            }
            // A crashed client is not live: no thread of it wants anything until it restarts.
            EventKind::Fault {
                fault,
                phase: FaultPhase::Injected,
                ..
            } if fault == "crash" => {
                let crashed: Vec<String> = demand
                    .wanting
                    .keys()
                    .filter(|owner| owner_node(owner) == event.node)
                    .cloned()
                    .collect();
                if !crashed.is_empty() && crashed.len() == demand.wanting.len() {
                    judge(&demand, event.t_us, &mut report);
                }
                for owner in crashed {
                    stop_wanting(&mut demand, &owner, event.t_us, &mut report);
                }
            }
            _ => {}
        }
    }
    if !demand.wanting.is_empty() {
        judge(&demand, ctx.end_us, &mut report);
        let owners: Vec<String> = demand.wanting.keys().cloned().collect();
        for owner in owners {
            stop_wanting(&mut demand, &owner, ctx.end_us, &mut report);
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t_ms: u64, node: &str, kind: EventKind) -> Event {
        Event {
            t_us: t_ms * 1000,
            node: node.into(),
            thread: None,
            kind,
        }
    }
    fn ctx(end_ms: u64) -> CheckContext {
        CheckContext {
            masters: vec!["redis-1".into()],
            clients: vec!["a".into(), "b".into()],
            end_us: end_ms * 1000,
            liveness_window_ms: 3000,
        }
    }
    fn started(t_ms: u64, node: &str) -> Event {
        ev(t_ms, node, EventKind::AcquireStarted { attempt: 1 })
    }
    fn acquired(t_ms: u64, node: &str) -> Event {
        ev(
            t_ms,
            node,
            EventKind::Acquired {
                token: "t".into(),
                fence: None,
            },
        )
    }
    fn fault(t_ms: u64, node: &str, fault: &str, phase: FaultPhase) -> Event {
        ev(
            t_ms,
            node,
            EventKind::Fault {
                fault: fault.into(),
                phase,
                detail: String::new(),
            },
        )
    }

    #[test]
    fn nobody_acquiring_for_longer_than_the_window_is_stuck() {
        let events = vec![started(0, "a")];
        assert_eq!(check(&events, &ctx(3000)).violations.len(), 0);
        let report = check(&events, &ctx(3001));
        assert_eq!(report.violations.len(), 1);
        assert_eq!(report.violations[0].nodes, vec!["a".to_string()]);
        assert_eq!(report.max_wait_us["a"], 3_001_000);
    }

    /// A client that starts waiting after the run's end (events of the runner's last few
    /// milliseconds) waited 0 ms, not 2^64 µs.
    #[test]
    fn a_wait_that_starts_after_the_end_lasts_nothing() {
        let events = vec![acquired(10, "a"), started(3005, "b")];
        let report = check(&events, &ctx(3000));
        assert!(report.violations.is_empty());
        assert_eq!(report.max_wait_us["b"], 0);
    }

    #[test]
    fn the_window_starts_when_the_last_fault_heals() {
        let events = vec![
            started(0, "a"),
            fault(5000, "x", "pause", FaultPhase::Healed),
            acquired(7000, "a"),
        ];
        let report = check(&events, &ctx(10_000));
        assert!(report.violations.is_empty());
        assert_eq!(report.max_wait_us["a"], 7_000_000);
    }

    #[test]
    fn failed_attempts_keep_the_client_waiting() {
        let events = vec![
            started(0, "a"),
            ev(
                2000,
                "a",
                EventKind::AcquireFailed {
                    reason: "timeout".into(),
                },
            ),
            ev(2100, "a", EventKind::AcquireStarted { attempt: 2 }),
            acquired(3500, "a"),
        ];
        assert_eq!(check(&events, &ctx(10_000)).violations.len(), 1);
    }

    /// One client waiting long while another keeps getting the lock is starvation, measured
    /// as its longest wait, not a deadlock.
    #[test]
    fn starvation_is_measured_not_stuck() {
        let mut events = vec![started(0, "a"), started(0, "b")];
        for i in 0..10 {
            events.push(acquired(1000 * i + 500, "b"));
            events.push(started(1000 * i + 600, "b"));
        }
        events.push(acquired(10_500, "a"));
        let report = check(&events, &ctx(11_000));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert_eq!(report.max_wait_us["a"], 10_500_000);
        assert_eq!(
            report.max_wait_us["b"], 1_400_000,
            "still waiting at the end"
        );
    }

    /// A grant to anyone restarts the window, also for the clients that did not get it.
    #[test]
    fn the_window_counts_from_the_last_grant_to_anyone() {
        let run = |a_gets_it_ms| {
            let events = vec![
                started(0, "a"),
                started(0, "b"),
                acquired(2000, "b"),
                acquired(a_gets_it_ms, "a"),
            ];
            check(&events, &ctx(7000)).violations.len()
        };
        assert_eq!(run(5000), 0);
        assert_eq!(run(5001), 1);
    }

    /// A crashed client wants nothing: a run whose only waiter crashed is not stuck, and a
    /// lock-out after the crash heals is.
    #[test]
    fn a_crashed_client_stops_wanting() {
        let events = vec![
            started(0, "a"),
            fault(100, "a", "crash", FaultPhase::Injected),
        ];
        let report = check(&events, &ctx(10_000));
        assert!(report.violations.is_empty());
        assert_eq!(report.max_wait_us["a"], 100_000);
        let events = vec![
            started(0, "b"),
            fault(100, "a", "crash", FaultPhase::Injected),
        ];
        assert_eq!(check(&events, &ctx(10_000)).violations.len(), 1);
    }

    /// The check is one pass: a client that finished does not want the lock any more.
    #[test]
    fn a_finished_client_stops_wanting() {
        let events = vec![started(0, "a"), ev(4000, "a", EventKind::ClientDone)];
        let report = check(&events, &ctx(10_000));
        assert_eq!(report.violations.len(), 1);
        assert_eq!(
            report.violations[0].detail.split(" (").next().unwrap(),
            "nobody acquired the lock from 0.000 ms to 4000.000 ms"
        );
        let events = vec![started(0, "a"), ev(2000, "a", EventKind::ClientDone)];
        assert!(check(&events, &ctx(10_000)).violations.is_empty());
    }
}
