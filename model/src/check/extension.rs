//! Stolen extensions: a lease extension (`clients.extend`) that the library reported as
//! successful although the client no longer held the lock — redsync v4.0.0–v4.0.3 counting a
//! refused touch as done (go-redsync/redsync PR 61), redbeat's plain `PEXPIRE` extending
//! whoever holds the key (sibson/redbeat issue 127), an extension that re-creates an expired
//! key (leandromoreira/redlock-rb issue 36, redsync `WithSetNXOnExtend`). The client then keeps
//! using the resource as if nothing happened: a lost update, sometimes with no instant at which
//! two clients held the key.
//!
//! "Held" is the servers' truth, from `key_owner` events: from its grant on, an owner holds the
//! lock while its token is the lock key's value on a majority (N/2+1) of the `masters` (one
//! master: that one). The lock *lapsed* at the first instant after the grant it held it on
//! fewer — the key expired, was deleted, or another owner's token replaced it. A successful
//! extension after a lapse, before the owner's next release, is stolen. A replica promoted by
//! a failover is not one of the `masters`: extensions across a failover are not judged.

use std::collections::BTreeMap;

use crate::history::{Event, EventKind};
use crate::result::Violation;

/// The violation kind this checker reports.
pub const STOLEN_EXTENSION: &str = "stolen_extension";

/// An owner's current grant, as the checker follows it.
struct Hold {
    /// When the lock lapsed, and why (`None`: still held).
    lapsed: Option<(f64, String)>,
}

pub fn check(events: &[Event], masters: &[String]) -> Vec<Violation> {
    let quorum = masters.len() / 2 + 1;
    // The lock key's owner on each master.
    let mut owners: BTreeMap<&str, String> = BTreeMap::new();
    let mut holds: BTreeMap<String, Hold> = BTreeMap::new();
    let mut violations = Vec::new();
    let held_on = |owners: &BTreeMap<&str, String>, owner: &str| {
        owners.values().filter(|o| o.as_str() == owner).count()
    };
    for event in events {
        match &event.kind {
            EventKind::Acquired { .. } => {
                let owner = event.owner();
                let lapsed = (held_on(&owners, &owner) < quorum).then(|| {
                    (
                        event.t_ms(),
                        "its token was not on a majority of the masters at its grant".to_string(),
                    )
                });
                holds.insert(owner, Hold { lapsed });
            }
            EventKind::ReleaseStarted => {
                holds.remove(&event.owner());
            }
            EventKind::KeyOwner { owner, by, .. } if masters.contains(&event.node) => {
                match owner {
                    Some(o) => owners.insert(event.node.as_str(), o.clone()),
                    None => owners.remove(event.node.as_str()),
                };
                for (holder, hold) in holds.iter_mut() {
                    if hold.lapsed.is_none() && held_on(&owners, holder) < quorum {
                        let why = match owner {
                            Some(o) if o != holder => format!("{o} took the key on {}", event.node),
                            _ => format!("the key on {} was removed by {by}", event.node),
                        };
                        hold.lapsed = Some((event.t_ms(), why));
                    }
                }
            }
            EventKind::Extended { ok: true, detail } => {
                let owner = event.owner();
                let Some(hold) = holds.get_mut(&owner) else {
                    continue;
                };
                let Some((lapsed_ms, why)) = hold.lapsed.clone() else {
                    continue;
                };
                let others: Vec<&str> = owners
                    .values()
                    .filter(|o| **o != owner)
                    .map(String::as_str)
                    .collect();
                let now = match others.first() {
                    Some(other) => format!("; the key is {other}'s now"),
                    None => String::new(),
                };
                let mut nodes = vec![owner.clone()];
                nodes.extend(others.first().map(|o| o.to_string()));
                violations.push(Violation {
                    kind: STOLEN_EXTENSION.into(),
                    t_ms: event.t_ms(),
                    nodes,
                    detail: format!(
                        "{owner}'s extension reported success ({detail}), but its lock had lapsed at {lapsed_ms:.3} ms ({why}{now}): it extended a lock it no longer held"
                    ),
                });
                // An extension that re-created the key holds it again from here.
                if held_on(&owners, &owner) >= quorum {
                    hold.lapsed = None;
                }
            }
            _ => {}
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t_ms: u64, node: &str, kind: EventKind) -> Event {
        Event::new(t_ms * 1000, node, kind)
    }

    fn owner(t_ms: u64, node: &str, owner: Option<&str>, by: &str) -> Event {
        ev(
            t_ms,
            node,
            EventKind::KeyOwner {
                key: "lock".into(),
                owner: owner.map(str::to_string),
                by: by.into(),
            },
        )
    }

    fn acquired(t_ms: u64, client: &str) -> Event {
        ev(
            t_ms,
            client,
            EventKind::Acquired {
                token: "t".into(),
                fence: None,
            },
        )
    }

    fn extended(t_ms: u64, client: &str, ok: bool) -> Event {
        ev(
            t_ms,
            client,
            EventKind::Extended {
                ok,
                detail: "d".into(),
            },
        )
    }

    fn masters(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("redis-{i}")).collect()
    }

    #[test]
    fn an_extension_of_a_held_lock_is_fine() {
        let events = vec![
            owner(1, "redis-1", Some("client-1"), "client-1"),
            acquired(2, "client-1"),
            extended(5, "client-1", true),
        ];
        assert!(check(&events, &masters(1)).is_empty());
    }

    #[test]
    fn a_successful_extension_after_another_owner_took_the_key_is_stolen() {
        let events = vec![
            owner(1, "redis-1", Some("client-1"), "client-1"),
            acquired(2, "client-1"),
            owner(10, "redis-1", None, "expiry"),
            owner(11, "redis-1", Some("client-2"), "client-2"),
            acquired(12, "client-2"),
            extended(20, "client-1", true),
        ];
        let v = check(&events, &masters(1));
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].kind, STOLEN_EXTENSION);
        assert_eq!(v[0].nodes, vec!["client-1".to_string(), "client-2".into()]);
        assert!(
            v[0].detail.contains("lapsed at 10.000 ms"),
            "{}",
            v[0].detail
        );
        assert!(
            v[0].detail.contains("the key is client-2's now"),
            "{}",
            v[0].detail
        );
    }

    #[test]
    fn a_refused_extension_and_a_re_created_key_are_judged_apart() {
        let refused = vec![
            owner(1, "redis-1", Some("client-1"), "client-1"),
            acquired(2, "client-1"),
            owner(10, "redis-1", None, "expiry"),
            extended(20, "client-1", false),
        ];
        assert!(check(&refused, &masters(1)).is_empty());
        let recreated = vec![
            owner(1, "redis-1", Some("client-1"), "client-1"),
            acquired(2, "client-1"),
            owner(10, "redis-1", None, "expiry"),
            owner(19, "redis-1", Some("client-1"), "client-1"),
            extended(20, "client-1", true),
            extended(30, "client-1", true),
        ];
        // The re-creating extension is stolen; the next one extends a key it holds again.
        assert_eq!(check(&recreated, &masters(1)).len(), 1);
    }

    #[test]
    fn a_minority_master_losing_the_key_is_not_a_lapse() {
        let mut events: Vec<Event> = (1..=5)
            .map(|i| owner(1, &format!("redis-{i}"), Some("client-1"), "client-1"))
            .collect();
        events.push(acquired(2, "client-1"));
        events.push(owner(5, "redis-1", None, "crash"));
        events.push(owner(6, "redis-2", None, "crash"));
        events.push(extended(7, "client-1", true));
        assert!(check(&events, &masters(5)).is_empty());
        events.push(owner(8, "redis-3", None, "crash"));
        events.push(extended(9, "client-1", true));
        assert_eq!(check(&events, &masters(5)).len(), 1);
    }
}
