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
