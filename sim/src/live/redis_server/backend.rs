//! `locksim live --backend redis-server`: the scenario's masters, replicas and Sentinels are
//! real redis-server and redis-sentinel processes (the process layer, `super::Cluster`), and
//! the rest of the live executor is unchanged — the world paced to the real clock, the clients'
//! bridges, the resource, the fault schedule, the checkers.
//!
//! Each Redis or Sentinel node of the simulated world runs a forwarder (`server_node`) in place
//! of the simulated server: a simulated connection accepted on the node's address becomes a
//! real connection to its process. A client's bridged connection is therefore still a
//! simulated connection from `client-i` to the node, and every fault on that link (partition,
//! one-way cut, isolation, delay, dropped connections) applies there, as does a failover asked
//! of a Sentinel (the nemesis's `SENTINEL FAILOVER` reaches the real Sentinel through it). The
//! processes' connections to one another (replication, Sentinel) are bridged the same way, as
//! connections from their source node (`links`).
//! Sentinel replies carry the processes' real addresses: each is registered as another
//! address of its node, so the bridges rewrite them to the client's own ports.
//!
//! Faults on a server node go to its process (`ExternalProcesses`, in the one place here):
//!
//! | fault | on the process |
//! |---|---|
//! | `pause` | `killpg(SIGSTOP)` … `killpg(SIGCONT)`; the forwarder keeps relaying, as the kernel of a stopped process keeps receiving |
//! | `crash` | `killpg(SIGKILL)` (the forwarder's connections die with the node); at the node's restart (+ `restart_delay_ms`) the process starts again from its own config and AOF |
//! | `power_loss` | realised as `crash` only: a machine crash cannot be produced on loopback (the kernel keeps the un-fsynced AOF tail) — reported *not applied* |
//! | `failover` | `SENTINEL FAILOVER` through the Sentinel's forwarder |
//! | `clock_jump`, `clock_drift` | the process's own clock (`super::clock`: an LD_PRELOAD shim reading the node's clock file, rewritten at every change of the node's simulated clock; a jump steps the wall clock only, a drift makes both clocks run at its rate; timers still fire on the kernel's clock) |
//! | network faults between two servers, `replica_lag_ms` | on the simulated connections that carry the processes' own links (`links`) |
//! | a fault triggered `on` `lock_written`, `lock_granted`, `replicated`, `command_sent` | fires from what the relays see (`lock_writes`, `links::PeerTap`, `bridge::ClientTap`; docs/live.md) |
//!
//! What was not applied is listed in `faults-applied.json` and `result.json`
//! (`faults_not_applied`), never skipped silently.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::mpsc::unbounded_channel;

use super::links::Links;
use super::lock_writes::LockWrites;
use super::{Addresses, Binaries, Cluster};
use crate::live::Inbound;
use crate::live::bridge::{ADOPTION_PORT, Tap, node_port, pump, real_socket};
use crate::live::clients::{Applied, Clients};
use crate::live::pacer::{Inbox, real_unix_us};
use crate::live::process::Supervisor;
use crate::scenario::Scenario;
use crate::scenario::faults::FaultKind;
use crate::world::World;
use crate::world::net::socket::{NetConn, NetListener};
use crate::world::procs::ExternalProcesses;

/// How long the processes may take to settle (replication links up, every Sentinel knows the
/// replicas and the other Sentinels: Sentinel hellos go every 2 s).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);

/// What the process thread is asked to do, in order.
enum Command {
    Pause(String),
    Resume(String),
    Crash(String),
    Restart(String),
    /// The node's wall-clock offset (ms) and rate, as the simulation's `Time` tells them.
    Clock(String, i64, f64),
}

/// The real server processes of one live run, driven from the simulation.
pub struct Servers {
    commands: Mutex<Option<Sender<Command>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Where each node's process listens (its private port: `links`).
    listen: BTreeMap<String, SocketAddr>,
    /// The processes' connections to one another, bridged (`links`).
    links: Arc<Links>,
    inbox: Arc<Inbox<Inbound>>,
    runtime: tokio::runtime::Handle,
    applied: Arc<Mutex<Vec<Applied>>>,
    /// The scenario's faults (or parts of them) that this backend does not apply.
    not_applied: Vec<String>,
}

impl Servers {
    /// Starts every process of `scenario`'s topology under `dir` on a thread of its own (made
    /// here, before the simulation: madsim refuses new threads inside it) and waits until they
    /// settled. Any failure stops what was started and names the node.
    pub fn start(
        scenario: &Scenario,
        binaries: Binaries,
        dir: PathBuf,
        inbox: Arc<Inbox<Inbound>>,
        runtime: tokio::runtime::Handle,
    ) -> Result<Servers, String> {
        let (commands, requests) = channel();
        let (ready, started) = channel();
        let applied: Arc<Mutex<Vec<Applied>>> = Arc::default();
        let topology = scenario.topology.clone();
        let thread_applied = applied.clone();
        // Another run on the machine can take a checked-free address before it is bound here:
        // a few fresh tries.
        let mut tries = 0;
        let (addresses, links) = loop {
            tries += 1;
            let attempt = Addresses::free(&topology).and_then(|mut addresses| {
                let links = Links::listen(&mut addresses, inbox.clone(), runtime.clone())?;
                Ok((addresses, links))
            });
            match attempt {
                Ok(done) => break done,
                Err(e) if tries >= 5 => return Err(format!("--backend redis-server: {e}")),
                Err(_) => {}
            }
        };
        let thread = std::thread::Builder::new()
            .name("live-servers".into())
            .spawn(move || {
                serve_commands(
                    binaries,
                    topology,
                    addresses,
                    dir,
                    ready,
                    requests,
                    thread_applied,
                )
            })
            .map_err(|e| format!("cannot start the servers' thread: {e}"))?;
        let listen = match started.recv() {
            Ok(Ok(listen)) => listen,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = thread.join();
                return Err("the servers' thread ended during start-up".into());
            }
        };
        let not_applied = not_applied(scenario);
        {
            let mut notes = applied.lock().expect("never poisoned");
            for why in &not_applied {
                notes.push(Applied {
                    wall_us: real_unix_us(),
                    node: "servers".into(),
                    action: "scenario".into(),
                    applied: false,
                    not_applied_because: Some(why.clone()),
                });
            }
        }
        let servers = Servers {
            commands: Mutex::new(Some(commands)),
            thread: Mutex::new(Some(thread)),
            listen,
            links,
            inbox,
            runtime,
            applied,
            not_applied,
        };
        // Settled: from now on the simulation carries their links (dropping `servers` on an
        // error stops every process).
        servers.links.hand_over()?;
        Ok(servers)
    }

    /// Where each node's process listens.
    pub fn addresses(&self) -> &BTreeMap<String, SocketAddr> {
        &self.listen
    }

    /// The scenario's faults, or parts of them, that the processes did not get: what the
    /// scenario asks that they cannot, and each fault that failed or could not be realised
    /// when it fired (a server's clock fault whose node a placeholder named).
    pub fn not_applied(&self) -> Vec<String> {
        let mut notes = self.not_applied.clone();
        for note in self.applied() {
            if let (false, Some(why), false) = (
                note.applied,
                &note.not_applied_because,
                note.node == "servers",
            ) {
                notes.push(format!("{} {}: {why}", note.node, note.action));
            }
        }
        notes
    }

    /// The faults as realised on the processes, in order.
    pub fn applied(&self) -> Vec<Applied> {
        self.applied.lock().expect("never poisoned").clone()
    }

    /// Stops and reaps every process (idempotent; also on drop).
    pub fn stop(&self) {
        drop(self.commands.lock().expect("never poisoned").take());
        if let Some(thread) = self.thread.lock().expect("never poisoned").take() {
            let _ = thread.join();
        }
    }

    fn send(&self, command: Command) {
        if let Some(commands) = self.commands.lock().expect("never poisoned").as_ref() {
            let _ = commands.send(command);
        }
    }

    fn owns(&self, node: &str) -> bool {
        self.listen.contains_key(node)
    }

    /// The clock listener for server nodes: the process's clock file is rewritten.
    pub fn clock(&self, node: &str, offset_ms: i64, rate: f64) {
        if self.owns(node) {
            self.send(Command::Clock(node.to_string(), offset_ms, rate));
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop();
    }
}

impl ExternalProcesses for Servers {
    fn pause(&self, node: &str) -> bool {
        if !self.owns(node) {
            return false;
        }
        self.send(Command::Pause(node.to_string()));
        true
    }

    fn resume(&self, node: &str) -> bool {
        if !self.owns(node) {
            return false;
        }
        self.send(Command::Resume(node.to_string()));
        true
    }

    fn crash(&self, node: &str) {
        if self.owns(node) {
            self.send(Command::Crash(node.to_string()));
        }
    }
}

/// The clients' and the servers' processes as the world's one external controller.
pub struct Processes {
    pub clients: Arc<Clients>,
    pub servers: Option<Arc<Servers>>,
}

impl ExternalProcesses for Processes {
    fn pause(&self, node: &str) -> bool {
        self.clients.pause(node) || self.servers.as_ref().is_some_and(|s| s.pause(node))
    }

    fn resume(&self, node: &str) -> bool {
        self.clients.resume(node) || self.servers.as_ref().is_some_and(|s| s.resume(node))
    }

    fn crash(&self, node: &str) {
        self.clients.crash(node);
        if let Some(servers) = &self.servers {
            servers.crash(node);
        }
    }
}

fn note(applied: &Mutex<Vec<Applied>>, node: &str, action: String, why: Option<String>) {
    applied.lock().expect("never poisoned").push(Applied {
        wall_us: real_unix_us(),
        node: node.to_string(),
        action,
        applied: why.is_none(),
        not_applied_because: why,
    });
}

/// The process thread: starts the cluster, reports its addresses (or why it failed), then
/// realises each fault in order until the run drops its end of the channel; the cluster (every
/// process) is stopped and reaped when it returns.
fn serve_commands(
    binaries: Binaries,
    topology: crate::scenario::Topology,
    addresses: Addresses,
    dir: PathBuf,
    ready: Sender<Result<BTreeMap<String, SocketAddr>, String>>,
    requests: Receiver<Command>,
    applied: Arc<Mutex<Vec<Applied>>>,
) {
    let supervisor = match Supervisor::new() {
        Ok(supervisor) => supervisor,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot start the guardian: {e}")));
            return;
        }
    };
    let listen = addresses.listen.clone();
    let started =
        Cluster::start(&supervisor, binaries, &topology, addresses, &dir).and_then(|cluster| {
            cluster.wait_settled(&topology, SETTLE_TIMEOUT)?;
            Ok((cluster, listen))
        });
    let mut cluster = match started {
        Ok((cluster, listen)) => {
            let _ = ready.send(Ok(listen));
            cluster
        }
        Err(e) => {
            let _ = ready.send(Err(format!("--backend redis-server: {e}")));
            return;
        }
    };
    for command in requests {
        let (node, action, done) = match command {
            Command::Clock(node, offset_ms, rate) => {
                let done = cluster.set_clock(&node, offset_ms, rate);
                let action = format!("clock shim {offset_ms:+} ms x{rate}");
                note(&applied, &node, action, done.err());
                continue;
            }
            Command::Pause(node) => {
                let done = cluster.pause(&node);
                (node, "killpg(SIGSTOP)", done)
            }
            Command::Resume(node) => {
                let done = cluster.resume(&node);
                (node, "killpg(SIGCONT)", done)
            }
            Command::Crash(node) => {
                let done = cluster.crash(&node);
                (node, "killpg(SIGKILL)", done)
            }
            Command::Restart(node) => {
                let done = cluster.restart(&node);
                (node, "restart from its config and AOF", done)
            }
        };
        note(&applied, &node, action.to_string(), done.err());
    }
}

/// The fault placeholders that resolve to Redis nodes (`faults::targets`).
const SERVER_PLACEHOLDERS: &[&str] = &[
    "{holder_master}",
    "{holder_masters}",
    "{masters}",
    "{first_majority}",
    "{last_majority}",
    "{written}",
    "{rest}",
];

/// What of `scenario`'s faults the processes do not get (see the module's table).
fn not_applied(scenario: &Scenario) -> Vec<String> {
    // A placeholder that names servers counts as one: it is resolved only when the fault fires.
    let is_server = |n: &str| {
        n.starts_with("redis-") || n.starts_with("sentinel-") || SERVER_PLACEHOLDERS.contains(&n)
    };
    let mut notes = Vec::new();
    for (i, fault) in scenario.faults.iter().enumerate() {
        let kind = &fault.kind;
        let why = match kind {
            FaultKind::PowerLoss { node, .. } if is_server(node) => Some(format!(
                "power_loss of {node} is realised as a process crash (SIGKILL): a machine crash cannot be produced on loopback, the kernel keeps the un-fsynced AOF tail and peers see FIN/RST, not silence"
            )),
            _ => None,
        };
        if let Some(why) = why {
            notes.push(format!("faults[{i}] {why}"));
        }
    }
    if let Some(nemesis) = &scenario.nemesis {
        for spec in &nemesis.kinds {
            let servers: Vec<&String> = spec.nodes.iter().filter(|n| is_server(n)).collect();
            if !servers.is_empty() && spec.kind == "power_loss" {
                notes.push(format!(
                    "nemesis {} on {}: not applied to the processes' machines (run as kill -9)",
                    spec.kind,
                    servers
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    // Not a fault but a server version: redis-server 7.0 always propagates a TTL as an absolute
    // time (`SET ... PXAT`: 7.0.15 `src/t_string.c` 115-121), so Redis 6.2's relative stream
    // cannot be had from it.
    if scenario.topology.ttl_propagation == "relative" && scenario.topology.replicas > 0 {
        notes.push(
            "topology.ttl_propagation relative (Redis 6.2's `SET ... PX` replication stream) is not applied: redis-server 7.0 propagates every TTL as `SET ... PXAT` (src/t_string.c 115-121), so its replicas get absolute expiry times".to_string(),
        );
    }
    notes
}

/// The task of a Redis or Sentinel node: at a restart (after `restart_delay_ms`, as the
/// simulated server waits) its process is started again; then every simulated connection
/// accepted on the node's address is relayed to the real process, and every one accepted on
/// its adoption port continues a real connection to it that existed before the run
/// (`links`).
pub async fn server_node(world: Arc<World>, name: String, servers: Arc<Servers>) {
    let start = world.procs.started(&name);
    if start > 1 {
        let delay_ms = world.scenario.topology.restart_delay_ms;
        if delay_ms > 0 {
            madsim::time::sleep(Duration::from_millis(delay_ms)).await;
        }
        servers.send(Command::Restart(name.clone()));
    }
    let Some(&real) = servers.listen.get(&name) else {
        return;
    };
    let listener = NetListener::bind(&world, &name, node_port(&name));
    let adoptions = NetListener::bind(&world, &name, ADOPTION_PORT);
    loop {
        let ((conn, client), adopt) = tokio::select! {
            accepted = listener.accept() => (accepted, false),
            accepted = adoptions.accept() => (accepted, true),
        };
        let servers = servers.clone();
        let world = world.clone();
        if adopt {
            madsim::task::spawn_local(adopted(world, servers, conn));
        } else {
            madsim::task::spawn_local(forward(world, servers, conn, real, name.clone(), client));
        }
    }
}

/// One accepted connection relayed to the process at `real`: a real connection is opened (its
/// bytes reach the simulation through the pacer, as a bridge's do); either side's close ends
/// both.
/// With a trigger on `lock_written` or `lock_granted`, a client's commands are followed
/// (`lock_writes`).
async fn forward(
    world: Arc<World>,
    servers: Arc<Servers>,
    conn: NetConn,
    real: SocketAddr,
    node: String,
    client: String,
) {
    // Far above the bridges' numbering (from 1): one inbox, one space of connection ids.
    static NEXT: AtomicU64 = AtomicU64::new(1 << 62);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let (to_sim, from_real) = unbounded_channel();
    // Queued before the real connection exists, so its bytes always find their way.
    servers.inbox.push(Inbound::Dialed { conn: id, to_sim });
    let (to_real, from_sim) = unbounded_channel();
    let inbox = servers.inbox.clone();
    servers.runtime.spawn(async move {
        match tokio::net::TcpStream::connect(real).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                real_socket(stream, id, from_sim, inbox).await;
            }
            Err(_) => inbox.push(Inbound::Closed { conn: id }),
        }
    });
    if world.tracks_lock_writes()
        && world.scenario.client_names().contains(&client)
        && !node.starts_with("sentinel-")
    {
        let mut tap = LockWrites::new(&node, &client, &world.scheme.key());
        pump(&world, conn, from_real, to_real, &mut tap).await;
    } else {
        pump(&world, conn, from_real, to_real, &mut Plain).await;
    }
}

/// A connection on the adoption port: its first 8 bytes name the real connection it continues
/// (`links::Links::hand_over`); the rest is relayed as `forward` does.
async fn adopted(world: Arc<World>, servers: Arc<Servers>, mut conn: NetConn) {
    let mut buf = BytesMut::with_capacity(64);
    while buf.len() < 8 {
        match conn.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
    let id = u64::from_le_bytes(buf.split_to(8)[..].try_into().expect("8 bytes"));
    let Some((from_real, to_real)) = servers.links.adopt(id) else {
        return;
    };
    if !buf.is_empty() && to_real.send(buf.to_vec()).is_err() {
        return;
    }
    pump(&world, conn, from_real, to_real, &mut Plain).await;
}

/// A relay that only carries bytes.
struct Plain;

impl Tap for Plain {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_the_processes_cannot_get_are_listed_and_the_others_are_not() {
        let scenario = Scenario::parse(
            r#"{"name": "t", "description": "t", "source": "t", "duration_ms": 4000,
                "lease_ms": 500, "schemes": ["set-nx-px-lua"],
                "topology": {"replicas": 1, "sentinels": 3},
                "clients": {"count": 2, "acquisitions": 1, "hold_ms": [10, 10],
                            "think_ms": [0, 0], "acquire_timeout_ms": 1000,
                            "command_timeout_ms": 200},
                "faults": [
                  {"kind": "pause", "node": "redis-1", "at_ms": 10, "duration_ms": 10},
                  {"kind": "partition", "groups": [["client-1"], ["redis-1"]], "at_ms": 10, "duration_ms": 10},
                  {"kind": "isolate", "node": "redis-1", "at_ms": 10, "duration_ms": 10},
                  {"kind": "clock_jump", "node": "redis-1", "delta_ms": 5000, "at_ms": 10},
                  {"kind": "clock_jump", "node": "client-1", "delta_ms": 5000, "at_ms": 10},
                  {"kind": "pause", "node": "{holder}", "duration_ms": 10, "on": {"event": "lock_granted"}},
                  {"kind": "pause", "node": "{holder}", "duration_ms": 10, "on": {"event": "acquired"}},
                  {"kind": "power_loss", "node": "{holder_master}", "restart_after_ms": 1, "on": {"event": "acquired"}}
                ]}"#,
            "t.json",
        )
        .expect("a valid scenario");
        let notes = not_applied(&scenario);
        assert_eq!(notes.len(), 1, "{notes:#?}");
        assert!(
            notes[0].starts_with(
                "faults[7] power_loss of {holder_master} is realised as a process crash"
            )
        );
    }

    /// Redis 6.2's relative TTLs on the replication stream (`ttl_propagation: relative`) are a
    /// server version, which redis-server 7.0 is not: listed (the default `absolute` is not).
    #[test]
    fn relative_ttl_propagation_is_listed_as_not_applied() {
        let scenario = |propagation: &str| {
            Scenario::parse(
                &format!(
                    r#"{{"name": "t", "duration_ms": 4000, "scheme": {{"name": "set-nx-px-lua"}},
                        "topology": {{"replicas": 1, "ttl_propagation": "{propagation}"}},
                        "clients": {{"count": 1, "acquisitions": 1}}}}"#
                ),
                "t.json",
            )
            .expect("a valid scenario")
        };
        let notes = not_applied(&scenario("relative"));
        assert_eq!(notes.len(), 1, "{notes:#?}");
        assert!(notes[0].starts_with("topology.ttl_propagation relative"));
        assert_eq!(not_applied(&scenario("absolute")), Vec::<String>::new());
    }
}
