//! Fairness: waiters get the lock in the order they started waiting (FIFO), as a fair lock
//! (Redisson's `RedissonFairLock`) promises. Not one of the contract's three verdicts: it is
//! judged only when a scenario asks for it (`expect.fairness`), and reported as violations of
//! kind `fifo_order`.
//!
//! A wait runs from an owner's `acquire_started` to its `acquired` or `acquire_failed` (or its
//! node's crash, or its `client_done`, or the end of the run). An acquisition by B *overtakes* A
//! when A started waiting more than `slack_us` before B did and was still waiting when B got the
//! lock. The slack absorbs what no lock can order: two requests a few network latencies apart
//! may reach the server in either order.

use std::collections::BTreeMap;

use super::ms;
use crate::history::{Event, EventKind, FaultPhase, owner_node};
use crate::result::Violation;

/// The violation kind this checker reports.
pub const FIFO_ORDER: &str = "fifo_order";

#[derive(Clone, Debug)]
struct Wait {
    owner: String,
    start_us: u64,
    end_us: u64,
    acquired: bool,
}

fn waits(events: &[Event]) -> Vec<Wait> {
    let mut open: BTreeMap<String, u64> = BTreeMap::new();
    let mut done = Vec::new();
    let mut close = |owner: String, start_us: u64, end_us: u64, acquired: bool| {
        done.push(Wait {
            owner,
            start_us,
            end_us,
            acquired,
        })
    };
    for event in events {
        match &event.kind {
            EventKind::AcquireStarted { .. } => {
                open.insert(event.owner(), event.t_us);
            }
            EventKind::Acquired { .. }
            | EventKind::AcquireFailed { .. }
            | EventKind::ClientDone => {
                let owner = event.owner();
                if let Some(start) = open.remove(&owner) {
                    let acquired = matches!(event.kind, EventKind::Acquired { .. });
                    close(owner, start, event.t_us, acquired);
                }
            }
            EventKind::Fault {
                fault,
                phase: FaultPhase::Injected,
                ..
            } if fault == "crash" => {
                let gone: Vec<String> = open
                    .keys()
                    .filter(|o| owner_node(o) == event.node)
                    .cloned()
                    .collect();
                for owner in gone {
                    let start = open.remove(&owner).expect("listed above");
                    close(owner, start, event.t_us, false);
                }
            }
            _ => {}
        }
    }
    for (owner, start) in open {
        close(owner, start, u64::MAX, false);
    }
    done.sort_by_key(|w| (w.start_us, w.end_us));
    done
}

/// One `fifo_order` violation per acquisition that overtook an earlier waiter (naming the
/// earliest one it overtook).
pub fn check(events: &[Event], slack_us: u64) -> Vec<Violation> {
    let waits = waits(events);
    let mut violations = Vec::new();
    for b in waits.iter().filter(|w| w.acquired) {
        let overtaken = waits.iter().find(|a| {
            a.owner != b.owner && a.start_us + slack_us < b.start_us && a.end_us > b.end_us
        });
        if let Some(a) = overtaken {
            violations.push(Violation {
                kind: FIFO_ORDER.into(),
                t_ms: ms(b.end_us),
                nodes: vec![b.owner.clone(), a.owner.clone()],
                detail: format!(
                    "{} got the lock at {:.3} ms after waiting since {:.3} ms, ahead of {} waiting since {:.3} ms",
                    b.owner,
                    ms(b.end_us),
                    ms(b.start_us),
                    a.owner,
                    ms(a.start_us)
                ),
            });
        }
    }
    violations.sort_by(|x, y| x.t_ms.total_cmp(&y.t_ms));
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t_ms: u64, node: &str, kind: EventKind) -> Event {
        Event::new(t_ms * 1000, node, kind)
    }
    fn start(t: u64, n: &str) -> Event {
        ev(t, n, EventKind::AcquireStarted { attempt: 1 })
    }
    fn got(t: u64, n: &str) -> Event {
        ev(
            t,
            n,
            EventKind::Acquired {
                token: n.into(),
                fence: None,
            },
        )
    }

    #[test]
    fn first_come_first_served_is_fair() {
        let events = vec![start(0, "a"), start(10, "b"), got(20, "a"), got(40, "b")];
        assert!(check(&events, 5000).is_empty());
        assert!(check(&events, 0).is_empty());
    }

    #[test]
    fn overtaking_an_earlier_waiter_is_reported() {
        let events = vec![start(0, "a"), start(100, "b"), got(120, "b"), got(200, "a")];
        let v = check(&events, 20_000);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].nodes, vec!["b", "a"]);
        assert_eq!(v[0].kind, "fifo_order");
        // Within the slack the order is the network's to decide.
        assert!(check(&events, 100_000).is_empty());
    }

    #[test]
    fn a_waiter_that_gives_up_later_was_still_overtaken() {
        let failed = ev(
            500,
            "a",
            EventKind::AcquireFailed {
                reason: "timeout".into(),
            },
        );
        let events = vec![start(0, "a"), start(100, "b"), got(120, "b"), failed];
        assert_eq!(check(&events, 0).len(), 1);
    }
}
