//! `locksim live --observe`: unmodified services as the clients. They get the same
//! environment (`LOCKSIM_REDIS`, `LOCKSIM_SENTINELS`, `LOCKSIM_RESOURCE`, ...) and no driver
//! protocol: locksim sends them nothing (stdin is closed at once) and keeps their stdout in their
//! log. The verdicts come from what the servers saw, not from what the clients said:
//!
//! - the resource's own order of reads, writes and fences (lost updates, stale tokens), as in
//!   every run;
//! - the servers' own lock history: each command a client sends to a Redis node that names the
//!   lock key (the scheme's `key`, `lock` by default) registers its long arguments (16 bytes or
//!   more: the random tokens lock libraries write, redis-py's `uuid1().hex`, Redisson's
//!   `uuid:threadId`) as that client's possible tokens, so the nodes' `key_owner` events name
//!   the client whose token the key holds, as the simulation's do.
//!
//! From these, each client's holds are derived after the run ([`derive_holds`]) and judged by
//! the simulation's checkers: a hold starts when the client's own command gives it the key on
//! a Redis node, and ends at its own release (its command removes its token), or — when the key
//! was taken from it (expiry, another owner) — at its last resource access after that: a client
//! still reading or writing the resource evidently believed it held the lock.

use std::collections::BTreeMap;
use std::sync::Arc;

use model::history::{Event, EventKind, owner_node};

use super::Live;
use crate::world::World;

/// The shortest argument registered as a possible token.
pub const MIN_TOKEN_BYTES: usize = 16;

/// An observed client node's life: start its process, close its stdin, keep its stdout in its
/// log until it ends (then the client is done, as a driven client is after its workload).
pub async fn observe_node(world: Arc<World>, name: String, live: Arc<Live>) {
    let start = world.procs.started(&name);
    let mut lines = match live.clients.start(&name, start) {
        Ok(lines) => lines,
        Err(e) => {
            live.abort(e);
            return std::future::pending().await;
        }
    };
    // A pause that began before the process existed holds it from its start.
    live.clients.stop_if_paused(&world.procs, &name);
    live.clients.finish(&name);
    while let Some(Some(line)) = lines.recv().await {
        live.clients.log_stdout(&name, &line);
    }
    world.emit(&name, None, EventKind::ClientDone).await;
    world.procs.client_done(&name);
}

/// Registers the long arguments of a command from `client` that names `key` as `client`'s
/// possible tokens (before the command reaches the node, so its `key_owner` names `client`).
pub fn register_tokens(world: &World, client: &str, key: &[u8], argv: &[Vec<u8>]) {
    if !argv.iter().skip(1).any(|arg| arg.as_slice() == key) {
        return;
    }
    for arg in argv.iter().skip(1) {
        if arg.len() >= MIN_TOKEN_BYTES
            && arg.as_slice() != key
            && let Ok(token) = std::str::from_utf8(arg)
        {
            world.history.register_token(token, client);
        }
    }
}

/// What the checkers need of an observed run: its events with each client's holds, derived from
/// the servers' `key_owner` events and the resource's accesses (see the module doc), as the
/// `acquired` and `release_started` events a driven client records.
pub fn derive_holds(events: &[Event]) -> Vec<Event> {
    /// One client's current hold.
    struct Hold {
        /// Whether the key was taken from it, and when its last sign of holding was.
        lapsed: bool,
        last_us: u64,
    }
    let mut holds: BTreeMap<String, Hold> = BTreeMap::new();
    // Who holds the key on each node, as its `key_owner` events say.
    let mut owners: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::with_capacity(events.len() + events.len() / 4);
    let end = |client: &str, t_us: u64| Event {
        t_us,
        node: client.to_string(),
        thread: None,
        kind: EventKind::ReleaseStarted,
    };
    for event in events {
        let mut after = Vec::new();
        match &event.kind {
            EventKind::KeyOwner { owner, by, .. } => {
                let before = match owner {
                    Some(owner) => owners.insert(event.node.clone(), owner_node(owner).to_string()),
                    None => owners.remove(&event.node),
                };
                let by = owner_node(by).to_string();
                // The key left `before`: its own release ends its hold; anything else lapses it.
                if let Some(before) = before
                    && owner.as_deref().map(owner_node) != Some(before.as_str())
                    && let Some(hold) = holds.get_mut(&before)
                {
                    if by == before && owner.is_none() {
                        holds.remove(&before);
                        after.push(end(&before, event.t_us));
                    } else {
                        hold.lapsed = true;
                        hold.last_us = event.t_us;
                    }
                }
                if let Some(owner) = owner.as_deref().map(owner_node)
                    && owner == by
                {
                    // A lapsed hold of the same client ends where its last access was.
                    let renewed = holds.get(owner).is_some_and(|h| !h.lapsed);
                    if !renewed {
                        if let Some(old) = holds.remove(owner) {
                            out.push(end(owner, old.last_us));
                        }
                        holds.insert(
                            owner.to_string(),
                            Hold {
                                lapsed: false,
                                last_us: event.t_us,
                            },
                        );
                        after.push(Event {
                            t_us: event.t_us,
                            node: owner.to_string(),
                            thread: None,
                            kind: EventKind::Acquired {
                                token: String::new(),
                                fence: None,
                            },
                        });
                    }
                }
            }
            EventKind::ResourceRead { client, .. }
            | EventKind::ResourceWrite { client, .. }
            | EventKind::ResourceRejected { client, .. } => {
                if let Some(hold) = holds.get_mut(owner_node(client)) {
                    hold.last_us = event.t_us;
                }
            }
            _ => {}
        }
        out.push(event.clone());
        out.extend(after);
    }
    // A lapsed hold ends at its last access; one still held lasts to the end of the run.
    for (client, hold) in holds {
        if hold.lapsed {
            out.push(end(&client, hold.last_us));
        }
    }
    out.sort_by_key(|e| e.t_us);
    out
}

/// The scenario's faults that wait for a client's own event, which an observed client never
/// records (its holds are derived after the run): a clear error instead of a fault that never
/// fires.
pub fn refuse_client_triggers(scenario: &crate::scenario::Scenario) -> Result<(), String> {
    use crate::scenario::faults::When;
    for (i, fault) in scenario.faults.iter().enumerate() {
        if let When::On { event, .. } = &fault.when
            && matches!(
                event.as_str(),
                "acquired" | "acquire_started" | "released" | "command_sent"
            )
        {
            return Err(format!(
                "{}: faults[{i}].on.event {event}: an observed client (--observe) records no events of its own; trigger on lock_written or lock_granted (the servers see those), or at at_ms",
                scenario.path
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t_us: u64, node: &str, kind: EventKind) -> Event {
        Event {
            t_us,
            node: node.into(),
            thread: None,
            kind,
        }
    }

    fn owner(t_us: u64, owner: Option<&str>, by: &str) -> Event {
        ev(
            t_us,
            "redis-1",
            EventKind::KeyOwner {
                key: "lock".into(),
                owner: owner.map(str::to_string),
                by: by.into(),
            },
        )
    }

    fn write(t_us: u64, client: &str) -> Event {
        ev(
            t_us,
            "resource",
            EventKind::ResourceWrite {
                client: client.into(),
                value: 0,
                based_on_version: 0,
                version: 1,
                fence: None,
                lost_update: false,
            },
        )
    }

    fn holds(events: &[Event]) -> Vec<(u64, String, &'static str)> {
        derive_holds(events)
            .into_iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EventKind::Acquired { .. } | EventKind::ReleaseStarted
                )
            })
            .map(|e| (e.t_us, e.node.clone(), e.name()))
            .collect()
    }

    #[test]
    fn a_hold_runs_from_the_clients_own_grant_to_its_own_release() {
        let events = [
            owner(10, Some("client-1"), "client-1"),
            write(20, "client-1"),
            owner(30, None, "client-1"),
        ];
        assert_eq!(
            holds(&events),
            [
                (10, "client-1".into(), "acquired"),
                (30, "client-1".into(), "release_started")
            ]
        );
    }

    #[test]
    fn a_hold_taken_away_lasts_to_the_clients_last_access_and_overlaps_the_next() {
        let events = [
            owner(10, Some("client-1"), "client-1"),
            owner(500, None, "expiry"),
            owner(600, Some("client-2"), "client-2"),
            write(1500, "client-1"),
            owner(1600, None, "client-2"),
        ];
        assert_eq!(
            holds(&events),
            [
                (10, "client-1".into(), "acquired"),
                (600, "client-2".into(), "acquired"),
                (1500, "client-1".into(), "release_started"),
                (1600, "client-2".into(), "release_started"),
            ]
        );
        let checked = model::check::mutual_exclusion::check(&derive_holds(&events), 2000);
        assert!(!checked.is_empty(), "the overlap is found");
    }
}
