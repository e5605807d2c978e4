//! Mutual exclusion: no two owners hold the lock at the same true time.
//!
//! A holding interval runs from the client's `acquired` (after any validity check) to its first
//! release command (`release_started`), its crash, or the end of the run (DESIGN.md, checker
//! definitions). Only true simulated time counts: every node's own clock may be wrong.
//!
//! An acquire whose outcome is unknown (`acquire_unknown`: a live client answered `info`)
//! counts as possibly held, from the attempt's start until its lease ends or the owner's next
//! release starts (jepsen.history: an `info` operation may have taken effect); the violation
//! it takes part in says so.
//!
//! Holds are keyed by owner: the client node, or `client-1/t2` for one worker thread of a
//! client running several (`clients.threads`), so two threads of one process are two owners. A
//! crash of the node ends the holds of all its threads.

use super::ms;
use crate::history::{Event, EventKind, FaultPhase, owner_node};
use crate::result::Violation;

/// One client's belief that it holds the lock, in true simulated time.
#[derive(Clone, Debug, PartialEq)]
pub struct Hold {
    pub owner: String,
    pub start_us: u64,
    pub end_us: u64,
    pub fence: Option<u64>,
    /// From an acquire whose outcome is unknown: the lock may or may not have been held.
    pub possible: bool,
}

/// Every holding interval in the history, by start time.
pub fn holds(events: &[Event], end_us: u64) -> Vec<Hold> {
    let mut open: Vec<Hold> = Vec::new();
    let mut done = Vec::new();
    // Each owner's latest attempt start: where an unknown acquire may have taken the lock.
    let mut attempts: std::collections::BTreeMap<String, u64> = Default::default();
    for event in events {
        match &event.kind {
            EventKind::AcquireStarted { .. } => {
                attempts.insert(event.owner(), event.t_us);
            }
            EventKind::Acquired { fence, .. } => {
                open.push(Hold {
                    owner: event.owner(),
                    start_us: event.t_us,
                    end_us,
                    fence: *fence,
                    possible: false,
                });
            }
            EventKind::AcquireUnknown { lease_ms, .. } => {
                let owner = event.owner();
                let start_us = attempts.get(&owner).copied().unwrap_or(event.t_us);
                open.push(Hold {
                    owner,
                    start_us,
                    end_us: (start_us + lease_ms * 1000).min(end_us),
                    fence: None,
                    possible: true,
                });
            }
            EventKind::ReleaseStarted => {
                let owner = event.owner();
                while let Some(i) = open.iter().position(|h| h.owner == owner) {
                    let mut hold = open.remove(i);
                    hold.end_us = hold.end_us.min(event.t_us);
                    done.push(hold);
                }
            }
            EventKind::Fault {
                fault,
                phase: FaultPhase::Injected,
                ..
            } if fault == "crash" => {
                while let Some(i) = open.iter().position(|h| owner_node(&h.owner) == event.node) {
                    let mut hold = open.remove(i);
                    hold.end_us = event.t_us;
                    done.push(hold);
                }
            }
            _ => {}
        }
    }
    done.extend(open);
    done.sort_by_key(|h| (h.start_us, h.end_us));
    done
}

/// One violation per pair of overlapping holds by different owners.
pub fn check(events: &[Event], end_us: u64) -> Vec<Violation> {
    let holds = holds(events, end_us);
    let mut violations = Vec::new();
    for (i, a) in holds.iter().enumerate() {
        for b in holds[i + 1..].iter().take_while(|b| b.start_us < a.end_us) {
            if a.owner == b.owner {
                continue;
            }
            let overlap_us = a.end_us.min(b.end_us) - b.start_us;
            let mut detail = format!(
                "{} held the lock from {:.3} ms to {:.3} ms; {} acquired it at {:.3} ms: both held it for {:.3} ms",
                a.owner,
                ms(a.start_us),
                ms(a.end_us),
                b.owner,
                ms(b.start_us),
                ms(overlap_us)
            );
            for hold in [a, b].into_iter().filter(|h| h.possible) {
                detail.push_str(&format!(
                    " ({}'s acquire had an unknown outcome: it may have held the lock)",
                    hold.owner
                ));
            }
            violations.push(Violation {
                kind: "mutual_exclusion".into(),
                t_ms: ms(b.start_us),
                nodes: vec![a.owner.clone(), b.owner.clone()],
                detail,
            });
        }
    }
    violations
}

/// Causes of a key change that are not a client's command: the lease running out, the
/// replication stream (the deleting command ran on the master and is counted there), a crash
/// losing the dataset, a restart reloading it.
pub const NOT_A_RELEASE: &[&str] = &["expiry", "replication", "crash", "restart"];

/// Releases that deleted a key holding another owner's token (seed 000 scheme 3, seed 001
/// 错误示例: a client whose lease expired deletes the next holder's lock), whatever process sent
/// them: `by` names the owner whose command deleted it — the worker thread (`client-1/t1`) when
/// the process runs several — so a thread deleting its sibling's lock with the sibling's token
/// (redis-py 2.10.1's shared `Lock`, redis/redis-py#416) is foreign too. A key whose owner is a
/// whole process (a value its threads share, written by none of them) is any of its threads'.
pub fn foreign_releases(events: &[Event]) -> Vec<Violation> {
    let mut owner: std::collections::BTreeMap<(&str, &str), Option<&str>> = Default::default();
    let mut violations = Vec::new();
    for event in events {
        if let EventKind::KeyOwner {
            key,
            owner: new_owner,
            by,
        } = &event.kind
        {
            let slot = owner
                .entry((event.node.as_str(), key.as_str()))
                .or_insert(None);
            if let (Some(previous), None) = (*slot, new_owner)
                && by != previous
                && owner_node(by) != previous
                && !NOT_A_RELEASE.contains(&by.as_str())
            {
                violations.push(Violation {
                    kind: "foreign_release".into(),
                    t_ms: event.t_ms(),
                    nodes: vec![by.clone(), previous.to_string()],
                    detail: format!(
                        "{by} deleted {key} on {} while it held {previous}'s token",
                        event.node
                    ),
                });
            }
            *slot = new_owner.as_deref();
        }
    }
    violations
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
    fn acquired(t: u64, node: &str) -> Event {
        ev(
            t,
            node,
            EventKind::Acquired {
                token: node.into(),
                fence: None,
            },
        )
    }
    fn release(t: u64, node: &str) -> Event {
        ev(t, node, EventKind::ReleaseStarted)
    }

    fn unknown(t: u64, node: &str, lease_ms: u64) -> Event {
        ev(
            t,
            node,
            EventKind::AcquireUnknown {
                reason: "timeout".into(),
                lease_ms,
            },
        )
    }
    fn attempt(t: u64, node: &str) -> Event {
        ev(t, node, EventKind::AcquireStarted { attempt: 1 })
    }

    #[test]
    fn an_unknown_acquire_may_hold_from_its_start_until_its_lease_ends() {
        // a's attempt starts at 0 and times out at 600 with its lease 1000 ms: b at 800 overlaps.
        let events = vec![
            attempt(0, "a"),
            unknown(600, "a", 1000),
            attempt(800, "b"),
            acquired(800, "b"),
            release(900, "b"),
        ];
        let v = check(&events, 100_000_000);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].nodes, vec!["a", "b"]);
        assert!(v[0].detail.contains("unknown outcome"), "{}", v[0].detail);
        // After the lease, nothing.
        let events = vec![
            attempt(0, "a"),
            unknown(600, "a", 1000),
            acquired(1000, "b"),
            release(1100, "b"),
        ];
        assert!(check(&events, 100_000_000).is_empty());
    }

    #[test]
    fn a_later_release_ends_an_unknown_acquire() {
        let events = vec![
            attempt(0, "a"),
            unknown(600, "a", 5000),
            attempt(700, "a"),
            acquired(700, "a"),
            release(750, "a"),
            acquired(800, "b"),
            release(900, "b"),
        ];
        assert!(check(&events, 100_000_000).is_empty());
    }

    #[test]
    fn sequential_holds_are_fine() {
        let events = vec![
            acquired(0, "a"),
            release(10, "a"),
            acquired(10, "b"),
            release(20, "b"),
        ];
        assert!(check(&events, 100_000_000).is_empty());
    }

    #[test]
    fn overlap_is_reported_with_both_clients_and_its_length() {
        let events = vec![
            acquired(0, "a"),
            acquired(1000, "b"),
            release(1500, "b"),
            release(2000, "a"),
        ];
        let v = check(&events, 100_000_000);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].nodes, vec!["a", "b"]);
        assert_eq!(v[0].t_ms, 1000.0);
        assert!(
            v[0].detail.contains("both held it for 500.000 ms"),
            "{}",
            v[0].detail
        );
    }

    #[test]
    fn a_hold_never_released_lasts_to_the_end_and_a_crash_ends_it() {
        let events = vec![acquired(0, "a"), acquired(50, "b")];
        assert_eq!(check(&events, 60_000).len(), 1);
        let crash = ev(
            40,
            "a",
            EventKind::Fault {
                fault: "crash".into(),
                phase: FaultPhase::Injected,
                detail: String::new(),
            },
        );
        let events = vec![acquired(0, "a"), crash, acquired(50, "b")];
        assert!(check(&events, 60_000).is_empty());
    }

    #[test]
    fn two_threads_of_one_process_are_two_owners_and_a_crash_ends_both() {
        let threaded = |t, thread, kind| Event {
            thread: Some(thread),
            ..ev(t, "c", kind)
        };
        let acq = |t, thread| {
            threaded(
                t,
                thread,
                EventKind::Acquired {
                    token: "x".into(),
                    fence: None,
                },
            )
        };
        let events = vec![
            acq(0, 1),
            acq(5, 2),
            threaded(10, 2, EventKind::ReleaseStarted),
            threaded(20, 1, EventKind::ReleaseStarted),
        ];
        let v = check(&events, 100_000_000);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].nodes, vec!["c/t1", "c/t2"]);
        let crash = ev(
            3,
            "c",
            EventKind::Fault {
                fault: "crash".into(),
                phase: FaultPhase::Injected,
                detail: String::new(),
            },
        );
        let h = holds(&[acq(0, 1), acq(1, 2), crash], 100_000_000);
        assert!(h.iter().all(|h| h.end_us == 3000), "{h:?}");
    }

    /// redis-1's `lock` now owned by `o`, changed by `by`.
    fn owner(t_ms: u64, o: Option<&str>, by: &str) -> Event {
        ev(
            t_ms,
            "redis-1",
            EventKind::KeyOwner {
                key: "lock".into(),
                owner: o.map(Into::into),
                by: by.into(),
            },
        )
    }

    #[test]
    fn deleting_anothers_key_is_a_foreign_release() {
        let events = vec![
            owner(0, Some("a"), "a"),
            owner(10, None, "expiry"),
            owner(11, Some("b"), "b"),
            owner(20, None, "a"),
        ];
        let v = foreign_releases(&events);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].nodes, vec!["a", "b"]);
    }

    #[test]
    fn a_thread_deleting_its_siblings_key_is_a_foreign_release() {
        let events = vec![
            owner(0, Some("c/t2"), "c/t2"),
            owner(10, None, "c/t1"),
            owner(11, Some("c/t1"), "c/t1"),
            owner(20, None, "c/t1"),
        ];
        let v = foreign_releases(&events);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].nodes, vec!["c/t1", "c/t2"]);
        // A key owned by the whole process (a value its threads share) is any thread's.
        let events = vec![owner(0, Some("c"), "replication"), owner(10, None, "c/t1")];
        assert!(foreign_releases(&events).is_empty());
    }
}
