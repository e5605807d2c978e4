//! Resource safety: the protected counter never loses an update.
//!
//! The critical section is the seeds' stock decrement (seed 000: read `goods:001`, write
//! total−1): a write computed from a read of an older version than the current one overwrites
//! somebody's update — the lost update / oversell the lock was meant to prevent. With fencing the
//! resource refuses stale tokens instead, and those refusals are counted, not violations.

use super::ms;
use crate::history::{Event, EventKind};
use crate::result::Violation;

pub struct ResourceReport {
    pub conflicts: Vec<Violation>,
    pub rejected: u64,
}

pub fn check(events: &[Event]) -> ResourceReport {
    let mut conflicts = Vec::new();
    let mut rejected = 0;
    let mut last_writer: Option<(&str, u64)> = None;
    for event in events {
        match &event.kind {
            EventKind::ResourceWrite {
                client,
                value,
                based_on_version,
                version,
                lost_update,
                ..
            } => {
                if *lost_update {
                    let (other, other_t) = last_writer.unwrap_or(("?", 0));
                    conflicts.push(Violation {
                        kind: "lost_update".into(),
                        t_ms: event.t_ms(),
                        nodes: vec![client.clone(), other.to_string()],
                        detail: format!(
                            "{client} wrote {value} computed from version {based_on_version}, but the \
                             resource was at version {} (last written by {other} at {:.3} ms): that update is lost",
                            version - 1,
                            ms(other_t)
                        ),
                    });
                }
                last_writer = Some((client.as_str(), event.t_us));
            }
            EventKind::ResourceRejected { .. } => rejected += 1,
            _ => {}
        }
    }
    ResourceReport {
        conflicts,
        rejected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(t: u64, client: &str, based_on_version: u64, version: u64, lost: bool) -> Event {
        Event {
            t_us: t,
            node: "resource".into(),
            thread: None,
            kind: EventKind::ResourceWrite {
                client: client.into(),
                value: 9,
                based_on_version,
                version,
                fence: None,
                lost_update: lost,
            },
        }
    }

    #[test]
    fn a_lost_update_names_both_writers() {
        let events = vec![write(1, "b", 0, 1, false), write(2, "a", 0, 2, true)];
        let report = check(&events);
        assert_eq!(report.conflicts.len(), 1);
        assert_eq!(report.conflicts[0].nodes, vec!["a", "b"]);
        assert_eq!(report.rejected, 0);
    }
}
