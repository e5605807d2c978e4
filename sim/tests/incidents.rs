//! Every incident pair reproduces its report's mechanism, not only its verdict (issue 29): each
//! test finds, in the failing version's trace, the sequence of events the report describes, and
//! asserts that the fixed control's trace has none. The first two seeds of each side run here;
//! the catalog test judges every seed against the files' `expect`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use locksim::runner::run;
use locksim::scenario::Scenario;
use model::check::mutual_exclusion::foreign_releases;
use model::history::{Event, EventKind, FaultPhase, owner_node};

/// Seeds of each side traced here.
const SEEDS: usize = 2;

fn traces(name: &str) -> Vec<(u64, Vec<Event>)> {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/incidents"
    ))
    .join(format!("{name}.json"));
    let scenario = Arc::new(Scenario::load(&path).unwrap_or_else(|e| panic!("{e}")));
    scenario
        .seeds
        .iter()
        .take(SEEDS)
        .map(|seed| {
            let output = run(&scenario, 0, seed).unwrap_or_else(|e| panic!("{name}: {e}"));
            (seed, output.events)
        })
        .collect()
}

/// `mechanism` describes the sequence it finds in a trace; the failing version's traces all have
/// it, the fixed control's none.
fn pair(case: &str, mechanism: impl Fn(&[Event]) -> Option<String>) {
    for (seed, events) in traces(case) {
        assert!(
            mechanism(&events).is_some(),
            "{case} seed {seed}: the reported mechanism is not in the trace"
        );
    }
    let fixed = format!("{case}-fixed");
    for (seed, events) in traces(&fixed) {
        if let Some(found) = mechanism(&events) {
            panic!("{fixed} seed {seed}: the control shows the mechanism: {found}");
        }
    }
}

/// What the history says just before each event: the lock key's owner on each node (its
/// `key_owner` events) and the owners that believe they hold the lock (acquired, no release
/// started, not crashed).
#[derive(Default)]
struct State {
    owners: BTreeMap<String, String>,
    holding: BTreeSet<String>,
}

impl State {
    fn owner(&self, node: &str) -> Option<&str> {
        self.owners.get(node).map(String::as_str)
    }

    fn holds(&self, owner: &str) -> bool {
        self.holding.contains(owner)
    }

    /// Another owner than `owner` that believes it holds the lock.
    fn other_holder(&self, owner: &str) -> Option<&str> {
        self.holding
            .iter()
            .find(|h| h.as_str() != owner)
            .map(String::as_str)
    }

    fn apply(&mut self, event: &Event) {
        match &event.kind {
            EventKind::KeyOwner { owner, .. } => match owner {
                Some(o) => {
                    self.owners.insert(event.node.clone(), o.clone());
                }
                None => {
                    self.owners.remove(&event.node);
                }
            },
            EventKind::Acquired { .. } => {
                self.holding.insert(event.owner());
            }
            EventKind::ReleaseStarted => {
                self.holding.remove(&event.owner());
            }
            EventKind::Fault {
                fault,
                phase: FaultPhase::Injected,
                ..
            } if fault == "crash" => self.holding.retain(|h| owner_node(h) != event.node),
            _ => {}
        }
    }
}

/// Walks the trace with its [`State`]: `step` sees each event and the state just before it.
fn walk<T>(
    events: &[Event],
    mut step: impl FnMut(usize, &Event, &State) -> Option<T>,
) -> Option<T> {
    let mut state = State::default();
    for (i, event) in events.iter().enumerate() {
        if let Some(found) = step(i, event, &state) {
            return Some(found);
        }
        state.apply(event);
    }
    None
}

/// [`walk`] whose `step` sees only the events from index `from` on, each with the state the whole
/// trace before it built (who holds the lock, whose value each node has).
fn walk_from<T>(
    events: &[Event],
    from: usize,
    mut step: impl FnMut(usize, &Event, &State) -> Option<T>,
) -> Option<T> {
    walk(
        events,
        |i, e, s| if i < from { None } else { step(i, e, s) },
    )
}

/// An `executed` event: (server, client, command, reply).
fn executed(event: &Event) -> Option<(&str, &str, &str, &str)> {
    match &event.kind {
        EventKind::Executed {
            client,
            command,
            reply,
        } => Some((&event.node, client, command, reply)),
        _ => None,
    }
}

/// Whether `owner` acquired the lock at some event after index `from` while `other` held it.
fn acquires_while_held(events: &[Event], from: usize, owner: &str, other: &str) -> bool {
    walk_from(events, from, |_, e, s| {
        (matches!(e.kind, EventKind::Acquired { .. }) && e.owner() == owner && s.holds(other))
            .then_some(())
    })
    .is_some()
}

/// Some client acquired the lock while another one held it, from index `from` on: (who, whom).
fn overlap_from(events: &[Event], from: usize) -> Option<(String, String)> {
    walk_from(events, from, |_, e, s| match e.kind {
        EventKind::Acquired { .. } => s
            .other_holder(&e.owner())
            .map(|other| (e.owner(), other.to_string())),
        _ => None,
    })
}

#[test]
fn jepsen_the_cut_off_master_grants_after_the_promotion() {
    pair("jepsen-redis-minority-master", |events| {
        let promoted = events.iter().position(
            |e| matches!(&e.kind, EventKind::Sentinel { what, .. } if what == "+promoted-slave"),
        )?;
        events[promoted..].iter().find_map(|e| {
            let (server, client, command, reply) = executed(e)?;
            (server == "redis-1"
                && client == "client-1"
                && command.starts_with("SET ")
                && reply == "OK")
                .then(|| {
                    format!(
                        "redis-1 granted client-1 at {:.0} ms, after a replica was promoted",
                        e.t_ms()
                    )
                })
        })
    });
}

#[test]
fn node_redlock_returns_a_lock_already_expired() {
    pair("node-redlock-no-validity-check", |events| {
        walk(events, |_, e, s| {
            if !matches!(e.kind, EventKind::Acquired { .. }) || e.node != "client-1" {
                return None;
            }
            let mine = s
                .owners
                .values()
                .filter(|o| o.as_str() == "client-1")
                .count();
            (mine < 3).then(|| {
                format!(
                    "client-1 acquired at {:.0} ms with its value on {mine} of the 5 masters",
                    e.t_ms()
                )
            })
        })
    });
}

#[test]
fn redbeat_pexpire_extends_the_new_holders_live_key() {
    pair("redbeat-pexpire-extends-any-owner", |events| {
        walk(events, |_, e, s| {
            let (server, client, command, reply) = executed(e)?;
            (client == "client-1"
                && command.starts_with("PEXPIRE ")
                && reply == "(integer) 1"
                && s.owner(server) == Some("client-2")
                && s.holds("client-2"))
            .then(|| {
                format!(
                    "client-1's PEXPIRE extended client-2's live key at {:.0} ms",
                    e.t_ms()
                )
            })
        })
    });
}

#[test]
fn redis_7_promoted_replica_drops_a_held_lock() {
    pair("redis-7-absolute-ttl-replica-clock", |events| {
        let replica = "redis-1-replica-1";
        let absolute = events.iter().any(|e| {
            e.node == replica
                && matches!(&e.kind, EventKind::Replicated { command, .. } if command.contains(" PXAT "))
        });
        let granted = walk(events, |_, e, s| {
            let (server, client, command, reply) = executed(e)?;
            (server == replica
                && client == "client-2"
                && command.starts_with("SET ")
                && reply == "OK"
                && s.holds("client-1"))
            .then(|| {
                format!(
                    "the promoted replica granted client-2 at {:.0} ms while client-1 held",
                    e.t_ms()
                )
            })
        })?;
        absolute.then_some(granted)
    });
}

#[test]
fn redis_py_a_thread_releases_its_siblings_lock() {
    pair("redis-py-shared-lock-token", |events| {
        foreign_releases(events)
            .into_iter()
            .find(|v| owner_node(&v.nodes[0]) == owner_node(&v.nodes[1]))
            .map(|v| v.detail)
    });
}

#[test]
fn redisson_fairlock_waiter_sleeps_past_its_wait_and_gives_up() {
    pair("redisson-fairlock-evicts-live-waiters", |events| {
        // Each client's last answer from the lock script: (time, TTL it was told).
        let mut told: BTreeMap<&str, (f64, i64)> = BTreeMap::new();
        let mut waiting: BTreeMap<&str, f64> = BTreeMap::new();
        for e in events {
            match &e.kind {
                EventKind::AcquireStarted { .. } => {
                    waiting.insert(&e.node, e.t_ms());
                }
                EventKind::CommandReply { reply, .. } => {
                    if let Some(ttl) = reply
                        .strip_prefix("(integer) ")
                        .and_then(|n| n.parse().ok())
                    {
                        told.insert(&e.node, (e.t_ms(), ttl));
                    }
                }
                EventKind::AcquireFailed { .. } => {
                    let (at, ttl) = *told.get(e.node.as_str())?;
                    let others_acquired = events.iter().any(|o| {
                        matches!(o.kind, EventKind::Acquired { .. })
                            && o.node != e.node
                            && o.t_ms() > at
                            && o.t_ms() < e.t_ms()
                    });
                    // Told to sleep past its wait, it never came back before giving up, while
                    // others took the lock (their unlocks woke the queue's head, not it).
                    if at + ttl as f64 >= e.t_ms() && others_acquired {
                        return Some(format!(
                            "{} was told {ttl} ms at {at:.0} ms and gave up at {:.0} ms, {:.0} ms after it started waiting",
                            e.node,
                            e.t_ms(),
                            e.t_ms() - waiting.get(e.node.as_str()).copied().unwrap_or(0.0)
                        ));
                    }
                }
                _ => {}
            }
        }
        None
    });
}

#[test]
fn redisson_watchdog_stops_after_one_failed_renewal() {
    pair("redisson-watchdog-stops-after-failed-renewal", |events| {
        let failed = events.iter().position(|e| {
            e.node == "client-1"
                && matches!(&e.kind, EventKind::CommandFailed { command, .. } if is_renewal(command))
        })?;
        // The timed-out renewal itself may still run once the partition heals; what 3.12 lacks
        // is a renewal sent after it.
        let renewed_after = events[failed + 1..].iter().any(|e| {
            e.node == "client-1"
                && matches!(&e.kind, EventKind::CommandSent { command, .. } if is_renewal(command))
        });
        let expired = walk_from(events, failed, |_, e, s| {
            matches!(&e.kind, EventKind::KeyOwner { owner: None, by, .. } if by == "expiry")
                .then_some(())
                .filter(|()| s.holds("client-1"))
        });
        (!renewed_after && expired.is_some()).then(|| {
            format!(
                "client-1's renewal failed at {:.0} ms, no renewal was sent after it and its key expired while it held the lock",
                events[failed].t_ms()
            )
        })
    });
}

#[test]
fn redlock_rb_extend_recreates_an_expired_key() {
    pair("redlock-rb-extend-recreates-key", |events| {
        let mut gone_since_grant = false;
        walk(events, |_, e, s| {
            match &e.kind {
                EventKind::KeyOwner { owner: None, .. } if s.holds("client-1") => {
                    gone_since_grant = true;
                }
                EventKind::KeyOwner {
                    owner: Some(o), by, ..
                } if o == "client-1"
                    && by == "client-1"
                    && s.holds("client-1")
                    && gone_since_grant =>
                {
                    return Some(format!(
                        "client-1's extension re-created its expired key at {:.0} ms",
                        e.t_ms()
                    ));
                }
                _ => {}
            }
            None
        })
    });
}

#[test]
fn redlock_rb_a_timed_out_lock_call_leaves_its_key() {
    pair("redlock-rb-timeout-leaves-lock", |events| {
        let timed_out = events.iter().position(|e| {
            e.node == "client-1"
                && matches!(&e.kind, EventKind::CommandFailed { error, .. } if error == "timeout")
        })?;
        // The key the timed-out call set goes by expiry, not by an unlock of client-1's.
        walk_from(events, timed_out, |_, e, s| {
            matches!(&e.kind, EventKind::KeyOwner { owner: None, by, .. } if by == "expiry")
                .then_some(())
                .filter(|()| s.owner(&e.node) == Some("client-1") && !s.holds("client-1"))
                .map(|()| {
                    format!(
                        "client-1's lock call timed out at {:.0} ms; the key it set stayed until it expired at {:.0} ms",
                        events[timed_out].t_ms(),
                        e.t_ms()
                    )
                })
        })
    });
}

#[test]
fn redlock_a_master_restarts_empty_and_grants_the_other_side() {
    pair("redlock-restart-without-persistence", |events| {
        let wiped = events.iter().position(|e| {
            e.node == "redis-3"
                && matches!(&e.kind, EventKind::KeyOwner { owner: None, by, .. } if by == "crash")
        })?;
        walk_from(events, wiped, |i, e, s| match &e.kind {
            EventKind::KeyOwner {
                owner: Some(o), by, ..
            } if e.node == "redis-3" && by == o => {
                let holder = s.other_holder(o)?.to_string();
                acquires_while_held(events, i, o, &holder).then(|| {
                    format!(
                        "redis-3 restarted empty and granted {o} at {:.0} ms, which then got a majority while {holder} held",
                        e.t_ms()
                    )
                })
            }
            _ => None,
        })
    });
}

#[test]
fn redsync_extend_counts_a_refused_touch() {
    pair("redsync-extend-stolen-lock", |events| {
        walk(events, |_, e, s| match &e.kind {
            EventKind::Extended { ok: true, .. }
                if e.node == "client-1" && s.owner("redis-1") == Some("client-2") =>
            {
                Some(format!(
                    "client-1's Extend reported success at {:.0} ms on client-2's key",
                    e.t_ms()
                ))
            }
            _ => None,
        })
    });
}

#[test]
fn laravel_a_late_del_deletes_the_next_holders_lock() {
    pair("laravel-release-deletes-next-holders-lock", |events| {
        walk(events, |i, e, s| {
            let (_, client, command, reply) = executed(e)?;
            if client != "client-1" || command != "DEL lock" || reply != "(integer) 1" {
                return None;
            }
            let victim = s.other_holder("client-1")?.to_string();
            let (third, _) = overlap_from(events, i)?;
            Some(format!(
                "client-1's DEL removed {victim}'s lock at {:.0} ms and {third} took it while {victim} held it",
                e.t_ms()
            ))
        })
    });
}

#[test]
fn spring_a_late_unlock_removes_the_next_holders_lock() {
    pair(
        "spring-lock-registry-unlock-deletes-next-holders-lock",
        |events| {
            let release = foreign_releases(events).into_iter().next()?;
            let from = events.iter().position(|e| e.t_ms() >= release.t_ms)?;
            let (third, victim) = overlap_from(events, from)?;
            Some(format!(
                "{}; then {third} took the lock while {victim} held it",
                release.detail
            ))
        },
    );
}

#[test]
fn sherlock_renew_deletes_the_lock_it_renews() {
    pair("sherlock-renew-runs-release-script", |events| {
        let mut renewing = false;
        walk(events, |i, e, s| {
            match &e.kind {
                EventKind::ExtendStarted if e.node == "client-1" => renewing = true,
                EventKind::Extended { .. } if e.node == "client-1" => renewing = false,
                EventKind::KeyOwner {
                    owner: None, by, ..
                } if renewing && by == "client-1" && s.owner(&e.node) == Some("client-1") => {
                    return acquires_while_held(events, i, "client-2", "client-1").then(|| {
                        format!(
                            "client-1's renew() deleted its own key at {:.0} ms and client-2 took the lock while client-1 held it",
                            e.t_ms()
                        )
                    });
                }
                _ => {}
            }
            None
        })
    });
}

/// Whether `command` is a Redisson renewal script: `hexists` then `pexpire`, where the lock and
/// unlock scripts also count holds (`hincrby`).
fn is_renewal(command: &str) -> bool {
    command.contains("'hexists'") && command.contains("'pexpire'") && !command.contains("hincrby")
}

/// A Redisson renewal executed for `client`.
fn redisson_renewal(event: &Event, client: &str) -> bool {
    matches!(executed(event), Some((_, c, command, _)) if c == client && is_renewal(command))
}

#[test]
fn redisson_the_next_lock_gets_no_watchdog() {
    pair("redisson-next-lock-without-watchdog", |events| {
        let refused = events.iter().position(|e| {
            e.node == "client-1"
                && matches!(&e.kind, EventKind::Released { ok: false, detail } if detail.starts_with("raised: IllegalMonitorStateException"))
        })?;
        let relocked = refused
            + events[refused..].iter().position(|e| {
                e.node == "client-1" && matches!(e.kind, EventKind::Acquired { .. })
            })?;
        let mut renewed = false;
        walk_from(events, relocked, |_, e, s| {
            renewed |= redisson_renewal(e, "client-1");
            (matches!(&e.kind, EventKind::KeyOwner { owner: None, by, .. } if by == "expiry")
                && s.holds("client-1")
                && !renewed)
                .then(|| {
                    format!(
                        "after the refused unlock at {:.0} ms, client-1's next lock was never renewed and expired at {:.0} ms under it",
                        events[refused].t_ms(),
                        e.t_ms()
                    )
                })
        })
    });
}

#[test]
fn redisson_a_failed_unlock_leaves_the_watchdog_renewing() {
    pair("redisson-failed-unlock-renewed-for-ever", |events| {
        let failed = events.iter().position(|e| {
            e.node == "client-1" && matches!(&e.kind, EventKind::Released { ok: false, .. })
        })?;
        let mut renewals = 0;
        walk_from(events, failed, |_, e, s| {
            if redisson_renewal(e, "client-1") && !s.holds("client-1") {
                renewals += 1;
            }
            (renewals >= 3).then(|| {
                format!(
                    "client-1's unlock failed at {:.0} ms and its watchdog went on renewing the lock ({renewals} renewals by {:.0} ms)",
                    events[failed].t_ms(),
                    e.t_ms()
                )
            })
        })
    });
}

#[test]
fn redisson_no_synced_replica_leaves_a_hold_count() {
    pair("redisson-no-synced-slaves-leaves-hold-count", |events| {
        let no_sync = events.iter().position(|e| {
            matches!(&e.kind, EventKind::AcquireFailed { reason } if reason.contains("None of slaves were synced"))
        })?;
        events[no_sync..].iter().find_map(|e| match &e.kind {
            EventKind::Released { ok: true, detail } if detail.contains("still held") => Some(format!(
                "{}'s lock failed with no synced replica at {:.0} ms; at {:.0} ms its unlock left the lock held",
                events[no_sync].node,
                events[no_sync].t_ms(),
                e.t_ms()
            )),
            _ => None,
        })
    });
}

#[test]
fn redisson_grants_a_lock_no_replica_has() {
    pair("redisson-wait-result-unchecked", |events| {
        // Each client's last executed command: whether it was a WAIT that no replica answered.
        let mut unsynced: BTreeMap<String, bool> = BTreeMap::new();
        walk(events, |i, e, _| {
            if let Some((_, client, command, reply)) = executed(e) {
                unsynced.insert(
                    client.to_string(),
                    command.starts_with("WAIT ") && reply == "(integer) 0",
                );
            }
            if !matches!(e.kind, EventKind::Acquired { .. })
                || unsynced.get(e.node.as_str()) != Some(&true)
            {
                return None;
            }
            let (other, _) = overlap_from(events, i)?;
            Some(format!(
                "{} took the lock at {:.0} ms though its WAIT answered 0, and {other} took it after the failover while it held",
                e.node,
                e.t_ms()
            ))
        })
    });
}

#[test]
fn redsync_extend_succeeds_after_the_lock_expired() {
    pair("redsync-extend-without-validity", |events| {
        walk(events, |_, e, s| match &e.kind {
            EventKind::Extended { ok: true, .. }
                if e.node == "client-1" && s.owner("redis-1") != Some("client-1") =>
            {
                Some(format!(
                    "client-1's Extend reported success at {:.0} ms; the key was {:?}'s",
                    e.t_ms(),
                    s.owner("redis-1")
                ))
            }
            _ => None,
        })
    });
}

#[test]
fn laravel_a_crash_between_setnx_and_expire_locks_for_ever() {
    pair("laravel-setnx-without-expire", |events| {
        let crash = events.iter().position(|e| {
            e.node == "client-1"
                && matches!(&e.kind, EventKind::Fault { fault, phase: FaultPhase::Injected, .. } if fault == "crash")
        })?;
        let setnx_last = events[..crash]
            .iter()
            .filter_map(executed)
            .rfind(|(_, client, _, _)| *client == "client-1")
            .is_some_and(|(_, _, command, _)| command.starts_with("SETNX "));
        let key_stays = !events[crash..]
            .iter()
            .any(|e| matches!(&e.kind, EventKind::KeyOwner { owner: None, .. }));
        (setnx_last && key_stays).then(|| {
            format!(
                "client-1 died at {:.0} ms between its SETNX and its EXPIRE; its key never went away",
                events[crash].t_ms()
            )
        })
    });
}
