//! The simulated world's resources and faults, each checked on a small run: replication and its
//! trigger, Sentinel failover and TILT, persistence, network delay, dropped connections,
//! min-replicas-to-write.

use std::sync::Arc;

use locksim::runner::{RunOutput, run};
use locksim::scenario::Scenario;
use model::history::{Event, EventKind};

fn run_json(json: &str, seed: u64) -> RunOutput {
    let scenario = Arc::new(Scenario::parse(json, "inline.json").unwrap_or_else(|e| panic!("{e}")));
    run(&scenario, 0, seed).unwrap()
}

fn sentinel(events: &[Event], what: &str) -> Vec<(u64, String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Sentinel {
                what: w, detail, ..
            } if w == what => Some((e.t_us, e.node.clone(), detail.clone())),
            _ => None,
        })
        .collect()
}

fn replication(events: &[Event], node: &str, what: &str) -> Vec<(u64, String)> {
    events
        .iter()
        .filter(|e| e.node == node)
        .filter_map(|e| match &e.kind {
            EventKind::Replication { what: w, detail } if w == what => {
                Some((e.t_us, detail.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn replicas_apply_the_stream_and_the_replicated_trigger_fires() {
    let out = run_json(
        r#"{ "name": "r", "duration_ms": 2000,
             "topology": { "replicas": 2 },
             "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
             "clients": { "count": 1, "acquisitions": 3 },
             "faults": [ { "kind": "pause", "node": "client-1", "duration_ms": 50,
                           "on": { "event": "replicated", "node": "redis-1-replica-2", "nth": 2 } } ] }"#,
        1,
    );
    let applied: Vec<&Event> = out
        .events
        .iter()
        .filter(|e| e.name() == "replicated" && e.node == "redis-1-replica-2")
        .collect();
    assert!(applied.len() >= 2, "{applied:?}");
    let commands: Vec<&str> = applied
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Replicated { command, .. } => Some(command.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        commands
            .iter()
            .any(|c| c.starts_with("SET lock ") && c.contains(" PXAT ")),
        "TTLs travel as absolute times: {commands:?}"
    );
    assert!(commands.contains(&"DEL lock"), "{commands:?}");
    let pause = out
        .events
        .iter()
        .find(|e| e.name() == "fault")
        .expect("the trigger fired");
    assert_eq!(
        pause.t_us, applied[1].t_us,
        "after_ms 0: at the instant of the event"
    );
}

#[test]
fn a_crashed_master_is_replaced_by_its_replica_and_demoted_when_back() {
    let out = run_json(
        r#"{ "name": "f", "duration_ms": 30000,
             "topology": { "replicas": 1, "sentinels": 3, "sentinel_down_after_ms": 1000 },
             "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
             "clients": { "count": 2, "acquisitions": 1000 },
             "faults": [ { "kind": "crash", "node": "redis-1", "restart_after_ms": 5000, "at_ms": 2000 } ] }"#,
        3,
    );
    let switched = sentinel(&out.events, "+switch-master");
    assert_eq!(switched.len(), 3, "every Sentinel switched: {switched:?}");
    assert!(
        switched
            .iter()
            .all(|(_, _, d)| d.ends_with("10.4.1.1 6379"))
    );
    let promoted = replication(&out.events, "redis-1-replica-1", "role");
    assert!(
        promoted.iter().any(|(_, d)| d.starts_with("master")),
        "{promoted:?}"
    );
    // The old master restarts as a master, is converted to a replica of the new one.
    assert!(!sentinel(&out.events, "+convert-to-slave").is_empty());
    let demoted = replication(&out.events, "redis-1", "role");
    assert!(
        demoted
            .iter()
            .any(|(_, d)| d == "replica of redis-1-replica-1"),
        "{demoted:?}"
    );
    // Clients follow the failover: someone acquires on the new master.
    assert!(out.events.iter().any(|e| matches!(&e.kind,
        EventKind::Executed { command, reply, .. }
            if e.node == "redis-1-replica-1" && command.starts_with("SET lock") && reply == "OK")));
    assert_eq!(out.result.verdicts.liveness.as_str(), "ok");
}

#[test]
fn a_sentinel_whose_clock_jumps_enters_tilt_and_does_not_act() {
    let out = run_json(
        r#"{ "name": "t", "duration_ms": 12000,
             "topology": { "replicas": 1, "sentinels": 3, "sentinel_down_after_ms": 1000 },
             "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
             "clients": { "count": 1, "acquisitions": 1000 },
             "faults": [
               { "kind": "clock_jump", "node": "sentinel-1", "delta_ms": 5000, "at_ms": 1000 },
               { "kind": "clock_jump", "node": "sentinel-2", "delta_ms": -5000, "at_ms": 1000 },
               { "kind": "crash", "node": "redis-1", "at_ms": 3000 } ] }"#,
        2,
    );
    let tilts = sentinel(&out.events, "+tilt");
    let mut nodes: Vec<&str> = tilts.iter().map(|(_, n, _)| n.as_str()).collect();
    nodes.sort();
    assert_eq!(nodes, vec!["sentinel-1", "sentinel-2"], "{tilts:?}");
    // Two of three Sentinels in TILT for 30 s: no quorum, no failover.
    assert!(sentinel(&out.events, "+odown").is_empty());
    assert!(sentinel(&out.events, "+switch-master").is_empty());
}

#[test]
fn a_forced_failover_leaves_two_masters_until_the_old_one_is_converted() {
    let out = run_json(
        r#"{ "name": "ff", "duration_ms": 40000,
             "topology": { "replicas": 1, "sentinels": 3, "sentinel_down_after_ms": 2000 },
             "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
             "clients": { "count": 2, "acquisitions": 100000 },
             "faults": [ { "kind": "failover", "at_ms": 2000 } ] }"#,
        5,
    );
    assert!(out.events.iter().any(
        |e| matches!(&e.kind, EventKind::Sentinel { what, .. } if what == "failover-requested")
    ));
    let promoted = replication(&out.events, "redis-1-replica-1", "role");
    let demoted = replication(&out.events, "redis-1", "role");
    let (t_promoted, t_demoted) = (promoted[1].0, demoted[0].0);
    assert!(
        t_demoted > t_promoted + 8_000_000,
        "the old master stays a master ≥ 8 s: {promoted:?} {demoted:?}"
    );
}

/// The machine going down loses the page cache that was never fsynced (a process `crash` keeps
/// it: `matrix.rs` a_process_crash_keeps_the_aof_a_power_loss_loses_what_was_not_fsynced).
#[test]
fn a_power_loss_loses_what_was_not_fsynced_a_process_crash_keeps_it() {
    let scenario = |kind: &str, fsync: &str, after_ms: u64| {
        format!(
            r#"{{ "name": "p", "duration_ms": 3000,
                 "topology": {{ "appendfsync": "{fsync}" }},
                 "scheme": {{ "name": "set-nx-px-lua", "ttl_ms": 10000 }},
                 "clients": {{ "count": 1, "acquisitions": 1, "hold_ms": [2000, 2000] }},
                 "faults": [ {{ "kind": "{kind}", "node": "redis-1", "restart_after_ms": 10,
                               "on": {{ "event": "acquired", "nth": 1 }}, "after_ms": {after_ms} }} ] }}"#
        )
    };
    // A power loss takes the page cache with it: only what was fsynced survives.
    for (fsync, loaded) in [
        ("no", "loaded 0 commands from the AOF"),
        ("off", "loaded 0 commands from the AOF"),
        ("always", "loaded 1 commands from the AOF"),
    ] {
        let out = run_json(&scenario("power_loss", fsync, 0), 1);
        let restart = replication(&out.events, "redis-1", "restart");
        assert_eq!(restart[0].1, loaded, "power_loss, appendfsync {fsync}");
    }
    // everysec: a power loss more than a second after the write finds it fsynced.
    let out = run_json(&scenario("power_loss", "everysec", 1100), 1);
    let restart = replication(&out.events, "redis-1", "restart");
    assert_eq!(restart[0].1, "loaded 1 commands from the AOF");
    // A process crash (kill -9) leaves the kernel's page cache: whatever was written to the AOF
    // is loaded again, fsynced or not (measured on redis-server 7.0.15: docs/fidelity.md).
    for (fsync, loaded) in [
        ("no", "loaded 1 commands from the AOF"),
        ("everysec", "loaded 1 commands from the AOF"),
        ("off", "loaded 0 commands from the AOF"),
    ] {
        let out = run_json(&scenario("crash", fsync, 0), 1);
        let restart = replication(&out.events, "redis-1", "restart");
        assert_eq!(restart[0].1, loaded, "crash, appendfsync {fsync}");
    }
}

#[test]
fn a_delayed_link_holds_bytes_in_order_for_the_extra_latency() {
    let out = run_json(
        r#"{ "name": "d", "duration_ms": 5000,
             "scheme": { "name": "set-nx-px-lua", "ttl_ms": 10000 },
             "clients": { "count": 1, "acquisitions": 5, "command_timeout_ms": 2000 },
             "faults": [ { "kind": "delay", "from": "client-1", "to": "redis-1", "extra_ms": 300,
                           "at_ms": 0, "duration_ms": 1000 } ] }"#,
        1,
    );
    let mut sent = None;
    let mut latencies = Vec::new();
    for e in &out.events {
        match &e.kind {
            EventKind::CommandSent { .. } if e.node == "client-1" => sent = Some(e.t_us),
            EventKind::CommandReply { .. } if e.node == "client-1" => {
                latencies.push((sent.unwrap(), e.t_us - sent.unwrap()))
            }
            _ => {}
        }
    }
    assert!(
        latencies
            .iter()
            .filter(|(t, _)| *t < 600_000)
            .all(|(_, l)| *l > 300_000)
    );
    assert!(
        latencies
            .iter()
            .filter(|(t, _)| *t > 1_100_000)
            .all(|(_, l)| *l < 20_000)
    );
}

#[test]
fn dropped_connections_are_reopened() {
    let out = run_json(
        r#"{ "name": "dc", "duration_ms": 3000,
             "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
             "clients": { "count": 2, "acquisitions": 1000 },
             "faults": [ { "kind": "drop_connections", "node": "redis-1",
                           "on": { "event": "command_sent", "command": "SET", "node": "client-1", "nth": 20 } } ] }"#,
        4,
    );
    // Dropped while client-1's 20th SET is on its way: that command fails.
    let dropped_us = out
        .events
        .iter()
        .find(|e| e.name() == "fault")
        .expect("the trigger fired")
        .t_us;
    let failed = out.events.iter().filter(|e| {
        matches!(&e.kind, EventKind::CommandFailed { error, .. } if error.contains("reset") || error.contains("closed"))
            && e.node == "client-1"
            && e.t_us >= dropped_us
    });
    assert!(failed.count() >= 1);
    assert!(
        out.events
            .iter()
            .any(|e| e.name() == "acquired" && e.t_us > dropped_us + 100_000)
    );
}

#[test]
fn min_replicas_to_write_refuses_writes_once_the_replica_lags() {
    let out = run_json(
        r#"{ "name": "m", "duration_ms": 16000,
             "topology": { "replicas": 1, "min_replicas_to_write": 1 },
             "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
             "clients": { "count": 1, "acquisitions": 100000, "acquire_timeout_ms": 20000 },
             "faults": [ { "kind": "pause", "node": "redis-1-replica-1", "at_ms": 0, "duration_ms": 100 },
                         { "kind": "partition", "at_ms": 1000,
                           "groups": [["redis-1"], ["redis-1-replica-1"]] } ] }"#,
        1,
    );
    let refused: Vec<u64> = out
        .events
        .iter()
        .filter(|e| {
            matches!(&e.kind, EventKind::Executed { reply, .. } if reply.contains("NOREPLICAS"))
        })
        .map(|e| e.t_us)
        .collect();
    // Refused before the replica first connected (it is paused for its first 100 ms), accepted
    // while it acknowledges, refused again once its last ACK is older than min-replicas-max-lag
    // (10 s) — also inside scripts.
    assert!(refused[0] < 20_000, "{refused:?}");
    let later = refused
        .iter()
        .find(|t| **t > 1_000_000)
        .expect("refused again");
    assert!(
        (10_000_000..12_000_000).contains(later),
        "refused at {later} µs"
    );
}

/// A client process that crashes and restarts is a new process: it must not draw the tokens of
/// its earlier life again (a token a stale lock still holds would let it release that lock).
#[test]
fn a_restarted_client_draws_new_tokens() {
    let out = run_json(
        r#"{ "name": "restart-tokens", "duration_ms": 20000,
             "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
             "clients": { "count": 1, "acquisitions": 2, "hold_ms": [100, 100] },
             "faults": [ { "kind": "crash", "node": "client-1", "restart_after_ms": 100,
                           "on": { "event": "acquired", "node": "client-1", "nth": 1 }, "after_ms": 10 } ] }"#,
        0,
    );
    let tokens: Vec<&str> = out
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Acquired { token, .. } => Some(token.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tokens.len(), 3, "{tokens:?}");
    let mut distinct = tokens.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "a token was drawn twice: {tokens:?}");
}

/// A one-way partition cuts one direction only: with client-1's group first, its requests never
/// reach redis-1; reversed, requests on a connection opened before the cut still arrive and
/// execute but the replies never come back (a new connection cannot even be set up, as in TCP).
#[test]
fn a_one_way_partition_cuts_one_direction() {
    let run_with = |groups: &str, at_ms: u64| {
        run_json(
            &format!(
                r#"{{ "name": "one-way", "duration_ms": 3000, "scheme": {{ "name": "set-nx-px-lua", "ttl_ms": 1000 }},
                     "clients": {{ "count": 2, "acquisitions": 10, "acquire_timeout_ms": 1000 }},
                     "faults": [ {{ "kind": "partition", "one_way": true, "at_ms": {at_ms}, "groups": {groups} }} ] }}"#
            ),
            0,
        )
    };
    let cut_at_us = 200_000;
    // Messages already in flight at the cut (one-way latency ≤ 5 ms) still land.
    let after_cut_us = cut_at_us + 10_000;
    let count = |out: &RunOutput, from_us: u64, what: &dyn Fn(&Event) -> bool| {
        out.events
            .iter()
            .filter(|e| e.t_us > from_us && what(e))
            .count()
    };
    let sent_by_1 =
        |e: &Event| e.node == "client-1" && matches!(e.kind, EventKind::CommandSent { .. });
    let executed_for_1 =
        |e: &Event| matches!(&e.kind, EventKind::Executed { client, .. } if client == "client-1");
    let reply_to_1 =
        |e: &Event| e.node == "client-1" && matches!(e.kind, EventKind::CommandReply { .. });
    let requests_cut = run_with(r#"[["client-1"], ["redis-1"]]"#, 200);
    assert!(count(&requests_cut, cut_at_us, &sent_by_1) > 0);
    assert_eq!(count(&requests_cut, after_cut_us, &executed_for_1), 0);
    let replies_cut = run_with(r#"[["redis-1"], ["client-1"]]"#, 200);
    assert!(count(&replies_cut, cut_at_us, &executed_for_1) > 0);
    assert_eq!(count(&replies_cut, after_cut_us, &reply_to_1), 0);
    assert!(
        replies_cut.result.counts.acquisitions >= 3,
        "client-2 is unaffected"
    );
}

/// Seed 001's own case (错误示例1): the process dies right after SETNX left it, before EXPIRE.
/// A process crash leaves what it wrote to the kernel, which delivers it: the SETNX runs, the
/// key has no TTL, and nobody gets the lock again.
#[test]
fn a_crash_right_after_sending_still_delivers_the_command() {
    let out = run_json(
        r#"{ "name": "c", "duration_ms": 8000,
             "scheme": { "name": "setnx-expire", "ttl_ms": 1000 },
             "clients": { "count": 1, "acquisitions": 3 },
             "faults": [ { "kind": "crash", "node": "client-1", "after_ms": 0, "restart_after_ms": 500,
                           "on": { "event": "command_sent", "command": "SETNX", "node": "client-1" } } ] }"#,
        3,
    );
    let sent = out
        .events
        .iter()
        .position(|e| {
            e.node == "client-1"
                && matches!(&e.kind, EventKind::CommandSent { command, .. } if command.starts_with("SETNX"))
        })
        .expect("client-1 sent its SETNX");
    let crash = &out.events[sent + 1];
    assert_eq!(crash.name(), "fault", "the crash is the very next event");
    assert_eq!(
        crash.t_us, out.events[sent].t_us,
        "at the instant of the send"
    );
    let restarted = out
        .events
        .iter()
        .position(|e| e.name() == "fault" && e.node == "client-1" && e.t_us > crash.t_us)
        .expect("the restart");
    assert!(
        out.events[sent + 2..restarted]
            .iter()
            .all(|e| e.node != "client-1"),
        "a dead process observes nothing"
    );
    let executed: Vec<&str> = out
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Executed {
                client, command, ..
            } if client == "client-1" => Some(command.as_str()),
            _ => None,
        })
        .collect();
    assert!(executed[0].starts_with("SETNX lock "), "{executed:?}");
    assert!(
        !executed[..2].iter().any(|c| c.starts_with("EXPIRE")),
        "no EXPIRE before the restart: {executed:?}"
    );
    assert_eq!(
        out.result.verdicts.liveness,
        model::result::Liveness::Stuck,
        "the restarted client can never take a key without TTL: {:?}",
        out.result.violations
    );
}

/// Bytes a process wrote before it crashed arrive even when its link is slow: the delay is the
/// network's, and the network does not die with the process.
#[test]
fn a_crash_under_a_delay_still_delivers_what_was_written() {
    let out = run_json(
        r#"{ "name": "c", "duration_ms": 3000,
             "scheme": { "name": "setnx-expire", "ttl_ms": 1000 },
             "clients": { "count": 1, "acquisitions": 3 },
             "faults": [
               { "kind": "delay", "from": "client-1", "to": "redis-1", "extra_ms": 300, "at_ms": 0 },
               { "kind": "crash", "node": "client-1", "after_ms": 0, "restart_after_ms": 1000,
                 "on": { "event": "command_sent", "command": "SETNX", "node": "client-1" } } ] }"#,
        1,
    );
    let sent_us = out
        .events
        .iter()
        .find(|e| e.name() == "command_sent")
        .expect("sent")
        .t_us;
    let executed = out
        .events
        .iter()
        .find(|e| e.name() == "executed" && e.node == "redis-1")
        .expect("the SETNX still reaches Redis");
    assert!(
        executed.t_us >= sent_us + 300_000,
        "{} vs {sent_us}",
        executed.t_us
    );
}

/// `after_ms` 0 injects the fault at the event's instant, before the node that saw the event
/// takes another step: a pause on `acquired` stops the client before it reads the resource.
#[test]
fn a_fault_after_0_ms_fires_before_the_nodes_next_step() {
    let out = run_json(
        r#"{ "name": "p", "duration_ms": 3000,
             "scheme": { "name": "set-nx-px-lua", "ttl_ms": 5000 },
             "clients": { "count": 1, "acquisitions": 2 },
             "faults": [ { "kind": "pause", "node": "client-1", "duration_ms": 700, "after_ms": 0,
                           "on": { "event": "acquired", "node": "client-1" } } ] }"#,
        2,
    );
    let acquired = out
        .events
        .iter()
        .position(|e| e.name() == "acquired")
        .expect("acquired");
    let pause = &out.events[acquired + 1];
    assert_eq!(pause.name(), "fault");
    assert_eq!(pause.t_us, out.events[acquired].t_us);
    let read = out
        .events
        .iter()
        .find(|e| matches!(&e.kind, EventKind::ResourceRead { client, .. } if client == "client-1"))
        .expect("the client reads the resource after the pause");
    assert!(
        read.t_us >= pause.t_us + 700_000,
        "{} vs {}",
        read.t_us,
        pause.t_us
    );
}

/// The fault events of a run: (t_us, node, detail) of each injection.
fn injected(events: &[Event]) -> Vec<(u64, String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Fault {
                phase: model::history::FaultPhase::Injected,
                detail,
                ..
            } => Some((e.t_us, e.node.clone(), detail.clone())),
            _ => None,
        })
        .collect()
}

/// Placeholders resolve when the fault fires, from the world's state: `{holder_master}` is the
/// last master holding the holder's write (redis-3 for a bare majority redis-1..3), `{peer}` the
/// other client, `{rest}` every Redis, Sentinel and client node the other groups leave out.
#[test]
fn holder_placeholders_land_on_the_holders_nodes() {
    let out = run_json(
        r#"{ "name": "p", "duration_ms": 4000, "lease_ms": 2000,
             "scheme": "redlock",
             "clients": { "count": 2, "acquisitions": 1, "hold_ms": [300, 300] },
             "faults": [
               { "kind": "pause", "node": "client-2", "at_ms": 0, "duration_ms": 200 },
               { "kind": "partition", "at_ms": 0,
                 "groups": [["client-1", "{first_majority}"], ["client-2", "{last_majority}"]] },
               { "kind": "clock_jump", "node": "{holder_master}", "delta_ms": 10,
                 "on": { "event": "acquired" } },
               { "kind": "clock_jump", "node": "{peer}", "delta_ms": 10,
                 "on": { "event": "acquired" } } ] }"#,
        1,
    );
    let faults = injected(&out.events);
    let jumps: Vec<&str> = faults
        .iter()
        .filter(|(_, _, d)| d.contains("jumps"))
        .map(|(_, node, _)| node.as_str())
        .collect();
    assert_eq!(jumps, ["redis-3", "client-2"], "{faults:?}");

    let split = run_json(
        r#"{ "name": "s", "duration_ms": 3000,
             "topology": { "replicas": 1, "sentinels": 3 },
             "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
             "clients": { "count": 2, "acquisitions": 2 },
             "faults": [ { "kind": "partition", "duration_ms": 500, "on": { "event": "acquired" },
                           "groups": [["{holder}", "{holder_masters}"], ["{rest}"]] } ] }"#,
        1,
    );
    let partition = injected(&split.events)
        .into_iter()
        .find(|(_, _, d)| d.starts_with("partition"))
        .expect("the partition fired");
    let holder = split
        .events
        .iter()
        .find(|e| e.name() == "acquired")
        .map(|e| e.node.clone())
        .unwrap();
    let peer = if holder == "client-1" {
        "client-2"
    } else {
        "client-1"
    };
    assert_eq!(
        partition.2,
        format!(
            "partition [[\"{holder}\", \"redis-1\"], [\"redis-1-replica-1\", \"sentinel-1\", \"sentinel-2\", \"sentinel-3\", \"{peer}\"]]"
        )
    );
}

/// `{rest}` resolves however the fault fires: at 0 ms (before any node runs), at a later
/// `at_ms`, on a trigger at once and on a trigger `after_ms` later, through the one resolution
/// every injection goes through (issue 31: fired at `at_ms`, it reached the world as a node
/// name and the run panicked in `procs.rs`). The random nemesis takes no such placeholder: the
/// file is refused when it loads, naming the field.
#[test]
fn rest_resolves_however_the_fault_fires() {
    for when in [
        r#""at_ms": 0"#,
        r#""at_ms": 50"#,
        r#""on": { "event": "acquired" }"#,
        r#""on": { "event": "acquired" }, "after_ms": 20"#,
    ] {
        let out = run_json(
            &format!(
                r#"{{ "name": "rest", "duration_ms": 2000,
                     "topology": {{ "sentinels": 1 }},
                     "scheme": {{ "name": "set-nx-px-lua", "ttl_ms": 500 }},
                     "clients": {{ "count": 2, "acquisitions": 2 }},
                     "faults": [ {{ "kind": "partition", "duration_ms": 300, {when},
                                   "groups": [["client-1", "redis-1"], ["{{rest}}"]] }} ] }}"#
            ),
            1,
        );
        let partition = injected(&out.events)
            .into_iter()
            .find(|(_, _, d)| d.starts_with("partition"))
            .unwrap_or_else(|| panic!("{when}: the partition fired"));
        assert_eq!(
            partition.2, r#"partition [["client-1", "redis-1"], ["sentinel-1", "client-2"]]"#,
            "{when}"
        );
    }
    let err = Scenario::parse(
        r#"{ "name": "n", "scheme": "set-nx-px-lua",
             "nemesis": { "partition": { "every_ms": [100, 200], "duration_ms": [10, 20],
                                         "nodes": ["client-1", "{rest}"] } } }"#,
        "n.json",
    )
    .unwrap_err();
    assert!(
        err.starts_with(
            "n.json: nemesis.partition.nodes[1]: {rest} is not a placeholder of the nemesis"
        ),
        "{err}"
    );
}

/// `lock_granted` fires the instant a client's writes stand on a quorum of the masters (the
/// third of Redlock's five), before the client has seen the reply; `lock_written` on the first
/// write (SETNX, before setnx-expire's EXPIRE).
#[test]
fn lock_write_triggers_fire_on_the_server_side_grant() {
    let out = run_json(
        r#"{ "name": "g", "duration_ms": 6000, "lease_ms": 2000,
             "scheme": "redlock",
             "clients": { "count": 1, "acquisitions": 1 },
             "faults": [ { "kind": "pause", "node": "{holder}", "duration_ms": 100,
                           "on": { "event": "lock_granted" } } ] }"#,
        1,
    );
    let owned: Vec<u64> = out
        .events
        .iter()
        .filter(
            |e| matches!(&e.kind, EventKind::KeyOwner { owner: Some(o), .. } if o == "client-1"),
        )
        .map(|e| e.t_us)
        .collect();
    let (paused_at, node, _) = injected(&out.events)[0].clone();
    assert_eq!(node, "client-1");
    assert_eq!(paused_at, owned[2], "at the third master's write");
    let acquired = out.events.iter().find(|e| e.name() == "acquired").unwrap();
    assert!(acquired.t_us > paused_at + 100_000);

    let crash = run_json(
        r#"{ "name": "w", "duration_ms": 2000,
             "scheme": { "name": "setnx-expire", "ttl_ms": 1000 },
             "clients": { "count": 1, "acquisitions": 1 },
             "faults": [ { "kind": "crash", "node": "{holder}", "on": { "event": "lock_written" } } ] }"#,
        1,
    );
    let commands: Vec<String> = crash
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Executed { command, .. } => Some(command.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(commands.len(), 1, "{commands:?}");
    assert!(commands[0].starts_with("SETNX lock"), "{commands:?}");
    assert_eq!(injected(&crash.events)[0].1, "client-1");
}
