//! The probes: one distributed behaviour each, measured in the simulation (a small scenario
//! run on several seeds, read from its trace) and on real redis-server/redis-sentinel
//! processes (`live::redis_server`), with the same topology and fault.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use model::history::{Event, EventKind};
use model::redis::Reply;

use crate::live::process::{Supervisor, stop_requested};
use crate::live::redis_server::{Addresses, Binaries, Cluster, Kind, call};
use crate::runner;
use crate::scenario::Scenario;

/// One probe's figures: per series (a Sentinel, an `appendfsync`), the samples of each side.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    pub simulated: BTreeMap<String, Vec<f64>>,
    pub real: BTreeMap<String, Vec<f64>>,
}

/// What every probe needs to reach real processes.
pub struct Real<'a> {
    pub supervisor: &'a Supervisor,
    pub binaries: Binaries,
    pub dir: &'a Path,
}

/// A sub-second phase for repeat `i` (ms): faults land anywhere within the wall-clock second,
/// in both worlds, as they do for a real operator.
fn phase_ms(i: u32) -> u64 {
    (u64::from(i) * 379 + 113) % 1000
}

fn simulate(json: &str, seed: u64) -> Result<Vec<Event>, String> {
    let scenario = Arc::new(Scenario::parse(json, "fidelity-probe.json")?);
    Ok(runner::run(&scenario, 0, seed)?.events)
}

fn stopped() -> Result<(), String> {
    if stop_requested() {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// A fresh cluster of `json`'s topology in its own folder `name` under the probes' folder.
fn start<'s>(real: &Real<'s>, json: &str, name: &str) -> Result<Cluster<'s>, String> {
    let topology = topology(json)?;
    Cluster::start(
        real.supervisor,
        real.binaries.clone(),
        &topology,
        Addresses::free(&topology)?,
        &real.dir.join(name),
    )
}

fn topology(json: &str) -> Result<crate::scenario::Topology, String> {
    Ok(Scenario::parse(json, "fidelity-probe.json")?
        .topology
        .clone())
}

/// `min-replicas-to-write 1`, `min-replicas-max-lag 1`: how long after its only replica stops
/// (a pause: SIGSTOP) the master answers a write with NOREPLICAS.
pub mod min_replicas {
    use super::*;

    fn scenario(at_ms: u64) -> String {
        format!(
            r#"{{ "name": "probe-min-replicas", "duration_ms": {end},
                 "topology": {{ "replicas": 1, "min_replicas_to_write": 1, "min_replicas_max_lag_ms": 1000 }},
                 "scheme": {{ "name": "set-nx-px-lua", "ttl_ms": 500 }},
                 "clients": {{ "count": 1, "acquisitions": 1000000, "hold_ms": [1, 1], "think_ms": [5, 5],
                              "acquire_timeout_ms": 100000 }},
                 "faults": [ {{ "kind": "pause", "node": "redis-1-replica-1", "at_ms": {at_ms}, "duration_ms": 6000 }} ] }}"#,
            end = at_ms + 5000
        )
    }

    pub fn simulated(repeats: u32) -> Result<Vec<f64>, String> {
        let mut out = Vec::new();
        for i in 0..repeats {
            let at_ms = 3000 + phase_ms(i);
            let events = simulate(&scenario(at_ms), u64::from(i))?;
            let refused = events.iter().find(|e| {
                e.t_us >= at_ms * 1000
                    && e.node == "redis-1"
                    && matches!(&e.kind, EventKind::Executed { reply, .. } if reply.contains("NOREPLICAS"))
            });
            if let Some(e) = refused {
                out.push((e.t_us - at_ms * 1000) as f64 / 1000.0);
            }
        }
        Ok(out)
    }

    pub fn real(real: &Real, repeats: u32) -> Result<Vec<f64>, String> {
        let topology = topology(&scenario(0))?;
        let mut out = Vec::new();
        for i in 0..repeats {
            stopped()?;
            let cluster = start(real, &scenario(0), &format!("min-replicas-{i}"))?;
            cluster.wait_settled(&topology, Duration::from_secs(30))?;
            wait_good_replicas(&cluster)?;
            std::thread::sleep(Duration::from_millis(phase_ms(i)));
            cluster.pause("redis-1-replica-1")?;
            let start = Instant::now();
            let master = cluster.addr("redis-1");
            while start.elapsed() < Duration::from_secs(10) {
                stopped()?;
                let reply = call(master, &["SET", "k", "v"], Duration::from_secs(1))?;
                if matches!(&reply, Reply::Error(e) if e.starts_with(b"NOREPLICAS")) {
                    out.push(start.elapsed().as_secs_f64() * 1000.0);
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            cluster.resume("redis-1-replica-1")?;
        }
        Ok(out)
    }

    /// The master counts its replica as good (its first sync done and acknowledged).
    fn wait_good_replicas(cluster: &Cluster) -> Result<(), String> {
        let master = cluster.addr("redis-1");
        for _ in 0..600 {
            let info =
                crate::live::redis_server::info(master, "replication", Duration::from_secs(1))?;
            if info.contains("min_slaves_good_slaves:1") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err("redis-1 never counted its replica as good".into())
    }
}

/// One master, one replica, three Sentinels (down-after 1000 ms): how long after the master's
/// SIGKILL each Sentinel answers `get-master-addr-by-name` with the replica.
pub mod failover {
    use super::*;

    const SCENARIO: &str = r#"{ "name": "probe-failover", "duration_ms": 12000,
        "topology": { "replicas": 1, "sentinels": 3, "sentinel_down_after_ms": 1000 },
        "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
        "clients": { "count": 1, "acquisitions": 1000000, "hold_ms": [100, 100], "think_ms": [200, 200],
                     "acquire_timeout_ms": 100000 },
        "faults": [ { "kind": "crash", "node": "redis-1", "at_ms": AT } ] }"#;

    /// Per Sentinel: when it first reports the replica — the leader from its `+promoted-slave`
    /// (`sentinelGetCurrentMasterAddress` answers the promoted replica from then on), the others
    /// from their `+switch-master`.
    pub fn simulated(repeats: u32) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for i in 0..repeats {
            let at_ms = 5000 + phase_ms(i);
            let events = simulate(&SCENARIO.replace("AT", &at_ms.to_string()), u64::from(i))?;
            let mut seen = BTreeMap::new();
            for e in &events {
                if let EventKind::Sentinel { what, .. } = &e.kind
                    && (what == "+promoted-slave" || what == "+switch-master")
                    && e.t_us > at_ms * 1000
                {
                    seen.entry(e.node.clone())
                        .or_insert((e.t_us - at_ms * 1000) as f64 / 1000.0);
                }
            }
            for (sentinel, ms) in seen {
                out.entry(sentinel).or_default().push(ms);
            }
        }
        Ok(out)
    }

    pub fn real(real: &Real, repeats: u32) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let json = SCENARIO.replace("AT", "0");
        let topology = topology(&json)?;
        let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for i in 0..repeats {
            stopped()?;
            let mut cluster = start(real, &json, &format!("failover-{i}"))?;
            cluster.wait_settled(&topology, Duration::from_secs(30))?;
            std::thread::sleep(Duration::from_millis(1000 + phase_ms(i)));
            let replica = cluster.addr("redis-1-replica-1");
            let sentinels = cluster.names(Kind::Sentinel);
            cluster.crash("redis-1")?;
            let start = Instant::now();
            let mut pending = sentinels.clone();
            while !pending.is_empty() && start.elapsed() < Duration::from_secs(30) {
                stopped()?;
                pending.retain(|s| {
                    let reply = call(
                        cluster.addr(s),
                        &["SENTINEL", "get-master-addr-by-name", "redis-1"],
                        Duration::from_millis(500),
                    );
                    let answered = matches!(&reply, Ok(Reply::Array(a))
                        if a.first().and_then(Reply::as_bulk) == Some(replica.ip().to_string().as_bytes()));
                    if answered {
                        out.entry(s.clone())
                            .or_default()
                            .push(start.elapsed().as_secs_f64() * 1000.0);
                    }
                    !answered
                });
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(out)
    }
}

/// Acknowledged writes a `crash` (kill -9) loses, per `appendfsync`: 20 `SET key v PX 20000`
/// acknowledged, the master killed at once, restarted from its AOF: how many keys are back.
/// The simulation also runs the machine's `power_loss`, which loopback processes cannot.
pub mod crash_aof {
    use super::*;

    pub const POLICIES: [&str; 3] = ["no", "everysec", "always"];
    const WRITES: usize = 20;

    /// The probe's scenario; `kind`: `crash` or `power_loss`.
    fn scenario(kind: &str, appendfsync: &str) -> String {
        format!(
            r#"{{ "name": "probe-crash-aof", "duration_ms": 3000,
                 "topology": {{ "appendfsync": "{appendfsync}" }},
                 "scheme": {{ "name": "set-nx-px-lua", "ttl_ms": 20000 }},
                 "clients": {{ "count": 1, "acquisitions": 1, "hold_ms": [1000, 1000] }},
                 "faults": [ {{ "kind": "{kind}", "node": "redis-1", "restart_after_ms": 100,
                               "on": {{ "event": "acquired", "node": "client-1", "nth": 1 }}, "after_ms": 0 }} ] }}"#
        )
    }

    /// The lock key written by the one acquisition: 1 when the restarted node has it again
    /// (a `key_owner` event of the restart), else 0 — as a share of acknowledged writes.
    pub fn simulated(kind: &str, appendfsync: &str, repeats: u32) -> Result<Vec<f64>, String> {
        let mut out = Vec::new();
        for i in 0..repeats {
            let events = simulate(&scenario(kind, appendfsync), u64::from(i))?;
            let kept = events.iter().any(|e| {
                matches!(&e.kind, EventKind::KeyOwner { owner: Some(_), by, .. } if by == "restart")
            });
            out.push(if kept { 1.0 } else { 0.0 });
        }
        Ok(out)
    }

    pub fn real(real: &Real, appendfsync: &str, repeats: u32) -> Result<Vec<f64>, String> {
        let mut out = Vec::new();
        for i in 0..repeats {
            stopped()?;
            let mut cluster = start(
                real,
                &scenario("crash", appendfsync),
                &format!("crash-{appendfsync}-{i}"),
            )?;
            let master = cluster.addr("redis-1");
            let mut conn =
                crate::live::redis_server::resp::Conn::open(master, Duration::from_secs(1))?;
            for k in 0..WRITES {
                conn.call(&["SET", &format!("lock-{k}"), "tok", "NX", "PX", "20000"])?;
            }
            drop(conn);
            cluster.crash("redis-1")?;
            cluster.restart("redis-1")?;
            let reply = call(master, &["DBSIZE"], Duration::from_secs(1))?;
            let kept = reply.as_integer().unwrap_or(0) as f64;
            out.push(kept / WRITES as f64);
        }
        Ok(out)
    }
}

/// The instant of the first injected fault of `kind` in a trace (µs), if any.
fn injected_us(events: &[Event], kind: &str) -> Option<u64> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::Fault { fault, phase, .. }
            if fault == kind && *phase == model::history::FaultPhase::Injected =>
        {
            Some(e.t_us)
        }
        _ => None,
    })
}

/// Key expiry after a forward clock jump of one node: one master, one replica, the lock key set
/// with a 10 s TTL, then the master's or the replica's clock jumps 20 s ahead. Per series (the
/// node jumped → the node read): whether a read of the key on that node answers nil within
/// 1 s (a share of the runs). Redis decides expiry on each node's own `mstime()`
/// (`keyIsExpired`, 7.0.15 `src/db.c` 1616-1650): the jumped master expires the key and sends
/// its DEL to the replica; a jumped replica answers nil itself but deletes nothing and sends
/// nothing (`expireIfNeeded`, `src/db.c` 1698-1701), so the master keeps the key.
pub mod clock_expiry {
    use super::*;

    /// The nodes whose clock jumps.
    pub const JUMPED: [&str; 2] = ["redis-1", "redis-1-replica-1"];
    const JUMP_MS: i64 = 20_000;
    const WINDOW: Duration = Duration::from_secs(1);

    fn scenario(jumped: &str, after_ms: u64) -> String {
        format!(
            r#"{{ "name": "probe-clock-expiry", "duration_ms": 6000,
                 "topology": {{ "replicas": 1 }},
                 "scheme": {{ "name": "set-nx-px-lua", "ttl_ms": 10000 }},
                 "clients": {{ "count": 1, "acquisitions": 1, "hold_ms": [5000, 5000] }},
                 "faults": [ {{ "kind": "clock_jump", "node": "{jumped}", "delta_ms": {JUMP_MS},
                               "on": {{ "event": "acquired", "node": "client-1", "nth": 1 }}, "after_ms": {after_ms} }} ] }}"#
        )
    }

    /// The series' name: the node jumped, the node read.
    fn series(jumped: &str, read: &str) -> String {
        let role = |n: &str| {
            if n.contains("-replica-") {
                "replica"
            } else {
                "master"
            }
        };
        format!("{} jumped, read on the {}", role(jumped), role(read))
    }

    /// The lock key's owner on the read node becomes none (logically expired, or deleted by
    /// the master's DEL) within the window after the jump.
    pub fn simulated(repeats: u32) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for jumped in JUMPED {
            for i in 0..repeats {
                let events = simulate(&scenario(jumped, 500 + phase_ms(i)), u64::from(i))?;
                let at_us = injected_us(&events, "clock_jump").ok_or_else(|| {
                    format!("probe-clock-expiry (seed {i}): the jump never fired")
                })?;
                let window_us = WINDOW.as_micros() as u64;
                for read in JUMPED {
                    let gone = events.iter().any(|e| {
                        e.node == read
                            && (at_us..=at_us + window_us).contains(&e.t_us)
                            && matches!(&e.kind, EventKind::KeyOwner { owner: None, .. })
                    });
                    out.entry(series(jumped, read))
                        .or_default()
                        .push(if gone { 1.0 } else { 0.0 });
                }
            }
        }
        Ok(out)
    }

    pub fn real(real: &Real, repeats: u32) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let json = scenario("redis-1", 0);
        let topology = topology(&json)?;
        let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for jumped in JUMPED {
            let mut cluster = start(real, &json, &format!("clock-expiry-{jumped}"))?;
            cluster.wait_settled(&topology, Duration::from_secs(30))?;
            for i in 0..repeats {
                stopped()?;
                let key = format!("lock-{i}");
                let master = cluster.addr("redis-1");
                let replica = cluster.addr("redis-1-replica-1");
                call(
                    master,
                    &["SET", &key, "tok", "PX", "10000"],
                    Duration::from_secs(1),
                )?;
                let replicated = (0..200).any(|_| {
                    let got = call(replica, &["GET", &key], Duration::from_secs(1));
                    let there = matches!(&got, Ok(Reply::Bulk(v)) if v == b"tok");
                    if !there {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    there
                });
                if !replicated {
                    return Err(format!("{key} never reached the replica"));
                }
                std::thread::sleep(Duration::from_millis(phase_ms(i)));
                cluster.set_clock(jumped, JUMP_MS, 1.0)?;
                let start = Instant::now();
                let mut gone = BTreeMap::new();
                while start.elapsed() < WINDOW {
                    for read in JUMPED {
                        let reply =
                            call(cluster.addr(read), &["GET", &key], Duration::from_secs(1))?;
                        if matches!(reply, Reply::Nil) {
                            gone.insert(read, ());
                        }
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                for read in JUMPED {
                    out.entry(series(jumped, read))
                        .or_default()
                        .push(if gone.contains_key(read) { 1.0 } else { 0.0 });
                }
                cluster.set_clock(jumped, 0, 1.0)?;
            }
        }
        Ok(out)
    }
}

/// Sentinel TILT after a clock jump: one master, one replica, one Sentinel (quorum 1,
/// down-after 1000 ms); the Sentinel's clock jumps 10 s ahead, and 500 ms later the master is
/// killed. `sentinelCheckTiltCondition` (7.0.15 `src/sentinel.c` 5344-5354) sees two timer
/// ticks more than 2 s apart on `mstime()` and enters TILT; for 30 s it monitors but does not
/// act (`sentinelHandleRedisInstance`, `src/sentinel.c` 5271-5279): no SDOWN, no failover.
/// Figures: the time from the jump to TILT, and whether a failover happened within 4 s of the
/// kill (without the jump one takes about 2 s: see the failover table).
pub mod tilt {
    use super::*;

    const JUMP_MS: i64 = 10_000;
    const KILL_AFTER_MS: u64 = 500;
    const WINDOW: Duration = Duration::from_secs(4);

    fn scenario(at_ms: u64) -> String {
        format!(
            r#"{{ "name": "probe-tilt", "duration_ms": {end},
                 "topology": {{ "replicas": 1, "sentinels": 1, "sentinel_down_after_ms": 1000 }},
                 "scheme": {{ "name": "set-nx-px-lua", "ttl_ms": 1000 }},
                 "clients": {{ "count": 1, "acquisitions": 1000000, "hold_ms": [100, 100], "think_ms": [200, 200],
                              "acquire_timeout_ms": 100000 }},
                 "faults": [ {{ "kind": "clock_jump", "node": "sentinel-1", "delta_ms": {JUMP_MS}, "at_ms": {at_ms} }},
                             {{ "kind": "crash", "node": "redis-1", "at_ms": {kill} }} ] }}"#,
            kill = at_ms + KILL_AFTER_MS,
            end = at_ms + KILL_AFTER_MS + WINDOW.as_millis() as u64
        )
    }

    /// The series: `tilt` (ms from the jump to `+tilt`), `failover` (1 when the Sentinel
    /// promoted the replica within the window after the kill, else 0).
    pub fn simulated(repeats: u32) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for i in 0..repeats {
            let at_ms = 3000 + phase_ms(i);
            let events = simulate(&scenario(at_ms), u64::from(i))?;
            let sentinel = |what: &'static str| {
                events.iter().find(move |e| {
                    e.t_us >= at_ms * 1000
                        && matches!(&e.kind, EventKind::Sentinel { what: w, .. } if w == what)
                })
            };
            if let Some(e) = sentinel("+tilt") {
                out.entry("tilt".into())
                    .or_default()
                    .push((e.t_us - at_ms * 1000) as f64 / 1000.0);
            }
            let failed_over = sentinel("+promoted-slave").is_some();
            out.entry("failover".into())
                .or_default()
                .push(if failed_over { 1.0 } else { 0.0 });
        }
        Ok(out)
    }

    pub fn real(real: &Real, repeats: u32) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let json = scenario(0);
        let topology = topology(&json)?;
        let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for i in 0..repeats {
            stopped()?;
            let mut cluster = start(real, &json, &format!("tilt-{i}"))?;
            cluster.wait_settled(&topology, Duration::from_secs(30))?;
            std::thread::sleep(Duration::from_millis(1000 + phase_ms(i)));
            let sentinel = cluster.addr("sentinel-1");
            let replica = cluster.addr("redis-1-replica-1");
            cluster.set_clock("sentinel-1", JUMP_MS, 1.0)?;
            let start = Instant::now();
            let mut tilt = None;
            while start.elapsed() < Duration::from_millis(KILL_AFTER_MS) {
                if tilt.is_none()
                    && crate::live::redis_server::info(
                        sentinel,
                        "sentinel",
                        Duration::from_secs(1),
                    )?
                    .contains("sentinel_tilt:1")
                {
                    tilt = Some(start.elapsed().as_secs_f64() * 1000.0);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            if let Some(ms) = tilt {
                out.entry("tilt".into()).or_default().push(ms);
            }
            cluster.crash("redis-1")?;
            let killed = Instant::now();
            let mut failed_over = false;
            while !failed_over && killed.elapsed() < WINDOW {
                stopped()?;
                let reply = call(
                    sentinel,
                    &["SENTINEL", "get-master-addr-by-name", "redis-1"],
                    Duration::from_millis(500),
                );
                failed_over = matches!(&reply, Ok(Reply::Array(a))
                    if a.first().and_then(Reply::as_bulk) == Some(replica.ip().to_string().as_bytes()));
                std::thread::sleep(Duration::from_millis(20));
            }
            out.entry("failover".into())
                .or_default()
                .push(if failed_over { 1.0 } else { 0.0 });
        }
        Ok(out)
    }
}

/// An old master rejoining after a failover: one master, one replica, three Sentinels
/// (down-after 1000 ms); the lock key is written (and replicated), the master is paused
/// (SIGSTOP) 4 s, long enough for the replica to be promoted, then resumed, and 200 ms later the
/// lock's release (a DEL) is acknowledged by it, on the connection the client already had. The
/// Sentinels leave a resumed old master alone for four publish periods after it first reports
/// itself a master, then send it `REPLICAOF` (`+convert-to-slave`, 7.0.15 `src/sentinel.c`
/// 2704-2718, checked at each `INFO` reply); its resync from the new master replaces its data
/// set, so the release it acknowledged meanwhile is undone: the key is back on both nodes.
/// Series: `demoted` (ms from the resume until the old master is a replica) and `write
/// dropped` (1 when the key is on both nodes once the old master replicates).
pub mod rejoin {
    use super::*;

    const PAUSE_MS: u64 = 4000;
    const RELEASE_AFTER_MS: u64 = 200;
    /// How long the old master may stay a master after its resume (about 8 s + an INFO period).
    const DEMOTION_WINDOW: Duration = Duration::from_secs(25);

    /// The client's second acquisition only keeps the run going (a run ends when its clients
    /// are done): it comes after the end.
    fn scenario(at_ms: u64) -> String {
        format!(
            r#"{{ "name": "probe-rejoin", "duration_ms": {end},
                 "topology": {{ "replicas": 1, "sentinels": 3, "sentinel_down_after_ms": 1000 }},
                 "scheme": {{ "name": "set-nx-px-lua", "ttl_ms": 60000 }},
                 "clients": {{ "count": 1, "acquisitions": 2, "hold_ms": [{hold}, {hold}],
                              "think_ms": [60000, 60000], "acquire_timeout_ms": 100000 }},
                 "faults": [ {{ "kind": "pause", "node": "redis-1", "at_ms": {at_ms}, "duration_ms": {PAUSE_MS} }} ] }}"#,
            hold = at_ms + PAUSE_MS + RELEASE_AFTER_MS,
            end = at_ms + PAUSE_MS + DEMOTION_WINDOW.as_millis() as u64
        )
    }

    pub fn simulated(repeats: u32) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for i in 0..repeats {
            let at_ms = 3000 + phase_ms(i);
            let events = simulate(&scenario(at_ms), u64::from(i))?;
            let resumed_us = (at_ms + PAUSE_MS) * 1000;
            let demoted = events.iter().find(|e| {
                e.node == "redis-1"
                    && e.t_us >= resumed_us
                    && matches!(&e.kind, EventKind::Replication { what, detail }
                        if what == "role" && detail.starts_with("replica of"))
            });
            let Some(demoted) = demoted else {
                continue;
            };
            out.entry("demoted".into())
                .or_default()
                .push((demoted.t_us - resumed_us) as f64 / 1000.0);
            let released_on_old_master = events.iter().any(|e| {
                e.node == "redis-1"
                    && (resumed_us..demoted.t_us).contains(&e.t_us)
                    && matches!(&e.kind, EventKind::KeyOwner { owner: None, by, .. } if by.starts_with("client-"))
            });
            // The key's owner on each node by the end of the run.
            let held_at_end = |node: &str| {
                events
                    .iter()
                    .rev()
                    .find_map(|e| match &e.kind {
                        EventKind::KeyOwner { owner, .. } if e.node == node => {
                            Some(owner.is_some())
                        }
                        _ => None,
                    })
                    .unwrap_or(false)
            };
            if released_on_old_master {
                let dropped = held_at_end("redis-1") && held_at_end("redis-1-replica-1");
                out.entry("write dropped".into())
                    .or_default()
                    .push(if dropped { 1.0 } else { 0.0 });
            }
        }
        Ok(out)
    }

    pub fn real(real: &Real, repeats: u32) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let json = scenario(0);
        let topology = topology(&json)?;
        let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let replication = |addr| {
            crate::live::redis_server::info(addr, "replication", Duration::from_secs(1))
                .unwrap_or_default()
        };
        for i in 0..repeats {
            stopped()?;
            let cluster = start(real, &json, &format!("rejoin-{i}"))?;
            cluster.wait_settled(&topology, Duration::from_secs(30))?;
            let old = cluster.addr("redis-1");
            let promoted = cluster.addr("redis-1-replica-1");
            let mut conn =
                crate::live::redis_server::resp::Conn::open(old, Duration::from_secs(1))?;
            conn.call(&["SET", "lock", "tok", "PX", "60000"])?;
            conn.call(&["WAIT", "1", "1000"])?;
            std::thread::sleep(Duration::from_millis(phase_ms(i)));
            cluster.pause("redis-1")?;
            std::thread::sleep(Duration::from_millis(PAUSE_MS));
            cluster.resume("redis-1")?;
            let resumed = Instant::now();
            std::thread::sleep(Duration::from_millis(RELEASE_AFTER_MS));
            let released = conn.call(&["DEL", "lock"])?.as_integer() == Some(1);
            drop(conn);
            let mut demoted = None;
            while demoted.is_none() && resumed.elapsed() < DEMOTION_WINDOW {
                stopped()?;
                if replication(old).contains("role:slave") {
                    demoted = Some(resumed.elapsed().as_secs_f64() * 1000.0);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let Some(ms) = demoted else {
                continue;
            };
            out.entry("demoted".into()).or_default().push(ms);
            let synced = (0..500).any(|_| {
                let up = replication(old).contains("master_link_status:up");
                if !up {
                    std::thread::sleep(Duration::from_millis(10));
                }
                up
            });
            if released && synced {
                let present = |addr| {
                    call(addr, &["EXISTS", "lock"], Duration::from_secs(1))
                        .map(|r| r.as_integer() == Some(1))
                };
                let dropped = present(old)? && present(promoted)?;
                out.entry("write dropped".into())
                    .or_default()
                    .push(if dropped { 1.0 } else { 0.0 });
            }
        }
        Ok(out)
    }
}

/// `WAIT` with one replica stopped: one master, two replicas, the second paused (SIGSTOP); a
/// client writes a key and sends `WAIT 1 1000`, then `WAIT 2 1000`. `waitCommand` (7.0.15
/// `src/replication.c` 3461-3495) answers at once when enough replicas acknowledged the
/// offset, else blocks until the timeout and answers how many did: `WAIT 1` gets 1 at once
/// (the running replica acknowledges after `REPLCONF GETACK`), `WAIT 2` gets 1 after 1000 ms.
/// Series per command: the replicas it answered and how long it took. The simulation's side
/// sends the same commands to its Redis nodes from a client of its own (the lock schemes send
/// no `WAIT 1`).
pub mod wait {
    use super::*;

    use madsim::runtime::{Handle, Runtime};
    use std::sync::Mutex;

    use crate::nodes::REDIS_PORT;
    use crate::nodes::resp::RespConn;
    use crate::runner::redis_world;
    use crate::world::procs::node_ip;

    pub const COMMANDS: [&str; 2] = ["WAIT 1 1000", "WAIT 2 1000"];
    const TOPOLOGY: &str =
        r#"{ "name": "probe-wait", "topology": { "replicas": 2 }, "scheme": "set-nx-px-lua" }"#;
    const STOPPED: &str = "redis-1-replica-2";

    /// Each command's reply (replicas) and duration (ms), in order.
    type Answers = Vec<(i64, f64)>;

    fn record(out: &mut BTreeMap<String, Vec<f64>>, answers: &Answers) {
        for (command, (replicas, ms)) in COMMANDS.iter().zip(answers) {
            out.entry(format!("{command}: replicas"))
                .or_default()
                .push(*replicas as f64);
            out.entry(format!("{command}: ms")).or_default().push(*ms);
        }
    }

    fn words(line: &str) -> Vec<Vec<u8>> {
        line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    /// One run in the simulation: the Redis nodes of the topology and a client of ours.
    fn simulate_once(seed: u64, pause_after_ms: u64) -> Result<Answers, String> {
        let scenario = Arc::new(Scenario::parse(TOPOLOGY, "probe-wait.json")?);
        let answers: Arc<Mutex<Result<Answers, String>>> =
            Arc::new(Mutex::new(Err("the probe's client never ran".into())));
        let out = answers.clone();
        std::thread::spawn(move || {
            let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
            runtime.block_on(async move {
                let handle = Handle::current();
                let world = redis_world(&handle, &scenario, seed);
                madsim::time::sleep(Duration::from_millis(pause_after_ms)).await;
                world.procs.pause(STOPPED);
                let w = world.clone();
                let client = handle
                    .create_node()
                    .name("client-1")
                    .ip(node_ip("client-1"))
                    .init(move || {
                        let (w, out) = (w.clone(), out.clone());
                        async move {
                            let result = async {
                                let mut conn =
                                    RespConn::connect(&w, "client-1", "redis-1", REDIS_PORT)
                                        .await
                                        .map_err(|e| format!("probe-wait: {e:?}"))?;
                                conn.call(&words("SET k v"))
                                    .await
                                    .map_err(|e| format!("probe-wait: {e:?}"))?;
                                let mut answers = Vec::new();
                                for command in COMMANDS {
                                    let start = w.time.now_us();
                                    let reply = conn
                                        .call(&words(command))
                                        .await
                                        .map_err(|e| format!("probe-wait: {e:?}"))?;
                                    let ms = (w.time.now_us() - start) as f64 / 1000.0;
                                    let replicas = reply.as_integer().ok_or_else(|| {
                                        format!("probe-wait: {command} answered {reply:?}")
                                    })?;
                                    answers.push((replicas, ms));
                                }
                                Ok(answers)
                            }
                            .await;
                            *out.lock().expect("never poisoned") = result;
                        }
                    })
                    .build();
                world
                    .procs
                    .register("client-1", client.id(), node_ip("client-1"));
                madsim::time::sleep(Duration::from_secs(5)).await;
                for id in world.procs.ids() {
                    handle.kill(id);
                }
            });
        })
        .join()
        .map_err(|_| "probe-wait: the simulation panicked".to_string())?;
        answers.lock().expect("never poisoned").clone()
    }

    pub fn simulated(repeats: u32) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let mut out = BTreeMap::new();
        for i in 0..repeats {
            record(&mut out, &simulate_once(u64::from(i), 500 + phase_ms(i))?);
        }
        Ok(out)
    }

    pub fn real(real: &Real, repeats: u32) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let topology = topology(TOPOLOGY)?;
        let mut out = BTreeMap::new();
        let cluster = start(real, TOPOLOGY, "wait")?;
        cluster.wait_settled(&topology, Duration::from_secs(30))?;
        for i in 0..repeats {
            stopped()?;
            std::thread::sleep(Duration::from_millis(phase_ms(i)));
            cluster.pause(STOPPED)?;
            let result = (|| {
                let mut conn = crate::live::redis_server::resp::Conn::open(
                    cluster.addr("redis-1"),
                    Duration::from_secs(3),
                )?;
                conn.call(&["SET", "k", &format!("v{i}")])?;
                let mut answers = Vec::new();
                for command in COMMANDS {
                    let start = Instant::now();
                    let args: Vec<&str> = command.split(' ').collect();
                    let reply = conn.call(&args)?;
                    let ms = start.elapsed().as_secs_f64() * 1000.0;
                    let replicas = reply
                        .as_integer()
                        .ok_or_else(|| format!("{command} answered {reply:?}"))?;
                    answers.push((replicas, ms));
                }
                Ok::<_, String>(answers)
            })();
            cluster.resume(STOPPED)?;
            record(&mut out, &result?);
            // The resumed replica catches up before the next round.
            std::thread::sleep(Duration::from_millis(300));
        }
        Ok(out)
    }
}

/// Which replica Sentinel promotes when their offsets differ: one master, two replicas, three
/// Sentinels (`down-after-milliseconds 1000`); a client writes all along (a `set-nx-px-lua`
/// lock taken and released every ~40 ms), the replication link from the master to one replica
/// is cut from 1 s on (a partition in the simulated network, which the real replication link
/// crosses too: `live/redis_server/links.rs`), so that replica's offset stops while the other's
/// follows the master; at 3 s the master is killed. Redis 7.0.15 ranks the candidates by
/// `replica-priority`, then the greater replication offset, then the smaller run id
/// (`compareSlavesForPromotion`, `src/sentinel.c` 4920-4946, the `qsort` of
/// `sentinelSelectSlave` at 4985). The held replica alternates between runs: with equal offsets
/// the tie-break would pick either (Redis: random run ids; the model: the smaller name,
/// `replica-1`), so only the offset makes the up-to-date replica win in every run. Per held replica: the share of runs
/// whose promoted replica is the other, up-to-date one.
pub mod promotion {
    use super::*;

    const CUT_AT_MS: u64 = 1000;
    /// The series of runs without a promotion by the end of the run.
    pub const NONE: &str = "no promotion within 8 s of the kill";

    /// The replica whose link is cut in run `i`.
    fn held(i: u32) -> &'static str {
        if i.is_multiple_of(2) {
            "redis-1-replica-1"
        } else {
            "redis-1-replica-2"
        }
    }

    fn up_to_date(held: &str) -> &'static str {
        if held == "redis-1-replica-1" {
            "redis-1-replica-2"
        } else {
            "redis-1-replica-1"
        }
    }

    fn series(held: &str) -> String {
        format!("{held} held, the other promoted")
    }

    /// The master is killed at `crash_ms`; the run lasts long enough for the failover (about
    /// 2.3 s after the kill, see the failover probe) with a margin for a loaded machine.
    fn scenario(held: &str, crash_ms: u64) -> String {
        format!(
            r#"{{ "name": "probe-promotion", "duration_ms": {end},
                 "topology": {{ "replicas": 2, "sentinels": 3, "sentinel_down_after_ms": 1000 }},
                 "scheme": {{ "name": "set-nx-px-lua", "ttl_ms": 1000 }},
                 "clients": {{ "count": 1, "acquisitions": 1000000, "hold_ms": [20, 20],
                              "think_ms": [20, 20], "acquire_timeout_ms": 100000 }},
                 "faults": [ {{ "kind": "partition", "groups": [["redis-1"], ["{held}"]],
                               "at_ms": {CUT_AT_MS}, "duration_ms": {cut} }},
                             {{ "kind": "crash", "node": "redis-1", "at_ms": {crash_ms} }} ] }}"#,
            end = crash_ms + 8000,
            cut = crash_ms + 8000 - CUT_AT_MS,
        )
    }

    /// A run without any promotion (an election that did not reach a majority is retried only
    /// after twice the failover timeout, `sentinelStartFailoverIfNeeded`) counts in its own
    /// series, not as a wrong choice.
    fn record(out: &mut BTreeMap<String, Vec<f64>>, held: &str, promoted: Option<&str>) {
        out.entry(NONE.to_string())
            .or_default()
            .push(if promoted.is_none() { 1.0 } else { 0.0 });
        if let Some(promoted) = promoted {
            let share = if promoted == up_to_date(held) {
                1.0
            } else {
                0.0
            };
            out.entry(series(held)).or_default().push(share);
        }
    }

    /// The first `+promoted-slave` of the trace names the replica.
    pub fn simulated(repeats: u32) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let mut out = BTreeMap::new();
        for i in 0..repeats {
            let held = held(i);
            let json = scenario(held, 3000 + phase_ms(i));
            let events = simulate(&json, u64::from(i))?;
            let promoted = events.iter().find_map(|e| match &e.kind {
                EventKind::Sentinel { what, detail, .. } if what == "+promoted-slave" => {
                    Some(detail.as_str())
                }
                _ => None,
            });
            record(&mut out, held, promoted);
        }
        Ok(out)
    }

    /// Each run is `locksim live --backend redis-server` of the probe's scenario (its client
    /// is `client_program live-adapter`); the promoted replica is read from the Sentinels'
    /// logs (`+promoted-slave slave <ip>:<port> …`, logged by the leader) and named by the
    /// address each replica binds (its `redis.conf`).
    pub fn real(
        real: &Real,
        client_program: &Path,
        repeats: u32,
    ) -> Result<BTreeMap<String, Vec<f64>>, String> {
        let mut out = BTreeMap::new();
        for i in 0..repeats {
            stopped()?;
            let held = held(i);
            let dir = real.dir.join(format!("promotion-{i}"));
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let path = dir.join("probe-promotion.json");
            std::fs::write(&path, scenario(held, 3000 + phase_ms(i)))
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            let scenario = Arc::new(Scenario::load(&path)?);
            let options = crate::live::Options {
                command: Some(crate::live::adapter::command_of(
                    client_program.to_path_buf(),
                    &scenario,
                    0,
                )?),
                scenario,
                scheme_index: 0,
                seed: u64::from(i),
                log_dir: dir.join("logs"),
                op_timeout_ms: 10_000,
                grace: Duration::from_secs(1),
                observe: false,
                servers: Some(real.binaries.clone()),
            };
            // A fresh thread: the live run makes its simulation's runtime there.
            std::thread::spawn(move || crate::live::run(options))
                .join()
                .map_err(|_| "the live run panicked".to_string())??;
            let servers = dir.join("servers");
            let promoted = promoted_in_logs(&servers)?;
            let node = promoted
                .map(|ip| node_bound_to(&servers, &ip))
                .transpose()?
                .flatten();
            record(&mut out, held, node.as_deref());
        }
        Ok(out)
    }

    /// The address of the first `+promoted-slave` in the Sentinels' logs under `servers`
    /// (redis-sentinel's log line: `pid:X 27 Nov 2026 14:20:06.930 # +promoted-slave slave
    /// 127.0.2.3:6379 127.0.2.3 6379 @ redis-1 …`; the earliest by its time of day: the
    /// Sentinels run in one run of a few seconds).
    fn promoted_in_logs(servers: &Path) -> Result<Option<String>, String> {
        let mut first: Option<(String, String)> = None;
        for entry in std::fs::read_dir(servers)
            .map_err(|e| format!("cannot read {}: {e}", servers.display()))?
        {
            let dir = entry
                .map_err(|e| format!("cannot read {}: {e}", servers.display()))?
                .path();
            if !dir.join("sentinel.conf").exists() {
                continue;
            }
            let log = dir.join("log.txt");
            let text = std::fs::read_to_string(&log)
                .map_err(|e| format!("cannot read {}: {e}", log.display()))?;
            for line in text.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                let Some(at) = words.iter().position(|w| *w == "+promoted-slave") else {
                    continue;
                };
                let (Some(time), Some(addr)) = (
                    at.checked_sub(2).and_then(|k| words.get(k)),
                    words.get(at + 2),
                ) else {
                    continue;
                };
                let ip = addr.rsplit_once(':').map_or(*addr, |(ip, _)| ip);
                if first.as_ref().is_none_or(|(t, _)| time < &t.as_str()) {
                    first = Some((time.to_string(), ip.to_string()));
                }
            }
        }
        Ok(first.map(|(_, ip)| ip))
    }

    /// The node whose `redis.conf` under `servers` binds `ip`.
    fn node_bound_to(servers: &Path, ip: &str) -> Result<Option<String>, String> {
        for entry in std::fs::read_dir(servers)
            .map_err(|e| format!("cannot read {}: {e}", servers.display()))?
        {
            let dir = entry
                .map_err(|e| format!("cannot read {}: {e}", servers.display()))?
                .path();
            let Ok(conf) = std::fs::read_to_string(dir.join("redis.conf")) else {
                continue;
            };
            if conf.lines().any(|l| l == format!("bind {ip}")) {
                return Ok(dir.file_name().map(|n| n.to_string_lossy().into_owned()));
            }
        }
        Ok(None)
    }
}
