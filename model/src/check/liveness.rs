//! Liveness: once the last fault has healed (a permanent fault: once injected), every live client
//! that wants the lock gets it within the window (default 2×ttl + 1 s), else the run is `stuck` —
//! e.g. a lock without TTL held by a crashed client (seed 000 scheme 1, seed 004).

use super::ms;
use crate::check::CheckContext;
use crate::history::{Event, EventKind, FaultPhase, owner_node};
use crate::result::Violation;

/// The time from which the system counts as healed: the last fault event of any kind.
pub fn healed_at_us(events: &[Event]) -> u64 {
    events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Fault { .. }))
        .map(|e| e.t_us)
        .max()
        .unwrap_or(0)
}

pub fn check(events: &[Event], ctx: &CheckContext) -> Vec<Violation> {
    let healed_us = healed_at_us(events);
    let window_us = ctx.liveness_window_ms * 1000;
    let mut violations = Vec::new();
    for client in &ctx.clients {
        let mut wanting_since: Option<u64> = None;
        let mut judge = |since: u64, until: u64, got_it: bool| {
            let from = since.max(healed_us);
            if until > from && until - from > window_us {
                violations.push(Violation {
                    kind: "liveness".into(),
                    t_ms: ms(from + window_us),
                    nodes: vec![client.clone()],
                    detail: format!(
                        "{client} wanted the lock from {:.3} ms and {} ({} ms window after healing at {:.3} ms)",
                        ms(since),
                        if got_it {
                            format!("only got it at {:.3} ms", ms(until))
                        } else {
                            format!("still did not have it at {:.3} ms", ms(until))
                        },
                        ctx.liveness_window_ms,
                        ms(healed_us)
                    ),
                });
            }
        };
        // `client` is an owner: a node, or one worker thread of it (`client-1/t2`). A crash is
        // recorded on the node and ends every thread's wish.
        let node = owner_node(client);
        let mine = |e: &Event| {
            e.node == node && (&e.owner() == client || matches!(e.kind, EventKind::Fault { .. }))
        };
        for event in events.iter().filter(|e| mine(e)) {
            match &event.kind {
                EventKind::AcquireStarted { .. } => {
                    wanting_since.get_or_insert(event.t_us);
                }
                EventKind::Acquired { .. } => {
                    if let Some(since) = wanting_since.take() {
                        judge(since, event.t_us, true);
                    }
                }
                EventKind::ClientDone => wanting_since = None,
                // A crashed client is not live: it no longer wants anything until it restarts.
                EventKind::Fault {
                    fault,
                    phase: FaultPhase::Injected,
                    ..
                } if fault == "crash" => wanting_since = None,
                _ => {}
            }
        }
        if let Some(since) = wanting_since {
            judge(since, ctx.end_us, false);
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
    fn ctx(end_ms: u64) -> CheckContext {
        CheckContext {
            clients: vec!["a".into()],
            end_us: end_ms * 1000,
            liveness_window_ms: 3000,
        }
    }

    #[test]
    fn waiting_longer_than_the_window_is_stuck() {
        let events = vec![ev(0, "a", EventKind::AcquireStarted { attempt: 1 })];
        assert_eq!(check(&events, &ctx(3000)).len(), 0);
        assert_eq!(check(&events, &ctx(3001)).len(), 1);
    }

    #[test]
    fn the_window_starts_when_the_last_fault_heals() {
        let heal = ev(
            5000,
            "x",
            EventKind::Fault {
                fault: "pause".into(),
                phase: FaultPhase::Healed,
                detail: String::new(),
            },
        );
        let events = vec![
            ev(0, "a", EventKind::AcquireStarted { attempt: 1 }),
            heal,
            ev(
                7000,
                "a",
                EventKind::Acquired {
                    token: "t".into(),
                    fence: None,
                },
            ),
        ];
        assert!(check(&events, &ctx(10_000)).is_empty());
    }

    #[test]
    fn failed_attempts_keep_the_client_waiting() {
        let events = vec![
            ev(0, "a", EventKind::AcquireStarted { attempt: 1 }),
            ev(
                2000,
                "a",
                EventKind::AcquireFailed {
                    reason: "timeout".into(),
                },
            ),
            ev(2100, "a", EventKind::AcquireStarted { attempt: 2 }),
            ev(
                3500,
                "a",
                EventKind::Acquired {
                    token: "t".into(),
                    fence: None,
                },
            ),
        ];
        assert_eq!(check(&events, &ctx(10_000)).len(), 1);
    }
}
