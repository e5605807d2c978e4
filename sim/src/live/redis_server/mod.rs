//! Real `redis-server` and `redis-sentinel` processes for a scenario's topology (issue 26 item
//! 2): the process layer of `locksim live --backend redis-server` and of `locksim fidelity`.
//!
//! Every process gets its own loopback address (`127.a.b.c`, Redis on 6379, Sentinel on
//! 26379) and binds both its listener and its outgoing connections to it (`bind`,
//! `bind-source-addr`), so whoever sits between them (a bridge) can tell who connects by the
//! peer address; `replica-announce-ip/port` and `sentinel announce-ip/port` are written when
//! the caller gives announced addresses. Configuration comes from the scenario's topology:
//! `appendonly`/`appendfsync`, `min-replicas-to-write`/`min-replicas-max-lag`, `replicaof`,
//! and for Sentinel `monitor` (quorum S/2+1, as the simulation), `down-after-milliseconds`,
//! `failover-timeout`. Each process has its own folder with its config file (Sentinel's
//! `CONFIG REWRITE` and sentinel.conf persist roles and epochs across a restart, as in the
//! simulation's `world::storage`), its AOF and its log.
//!
//! Faults: `pause` = SIGSTOP/SIGCONT of the process group; `crash` = SIGKILL, then `restart`
//! starts it again from its own config and AOF (what a `kill -9` leaves: the kernel keeps the
//! page cache, so an `everysec`/`no` AOF keeps what was written — the machine crash,
//! `power_loss`, cannot be produced on loopback); `failover` = `SENTINEL FAILOVER`;
//! `clock_jump`/`clock_drift` = the process's own clock (`clock`: an LD_PRELOAD shim every
//! process runs with, reading a clock file per node that `set_clock` rewrites).
//!
//! Every process is started by `live::process::Supervisor` (own process group, death signal,
//! guardian): nothing outlives the cluster or locksim. Start-up errors name the node and what
//! failed: a missing binary, an address already in use, a process that exits during start-up
//! (with the last lines of its log).

pub mod backend;
pub mod clock;
pub mod links;
pub mod lock_writes;
pub mod resp;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use model::redis::Reply;

use super::process::{Process, Spec, Supervisor, stop_requested};
use crate::scenario::Topology;
use clock::ClockFile;
pub use resp::call;

/// Redis's and Sentinel's ports on each process's own address.
pub const REDIS_PORT: u16 = 6379;
pub const SENTINEL_PORT: u16 = 26379;

/// How long a process may take to answer PING after it starts (an AOF replay included).
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The programs to run (`redis-server`, `redis-sentinel` on the PATH by default).
#[derive(Clone, Debug)]
pub struct Binaries {
    pub redis_server: OsString,
    pub redis_sentinel: OsString,
}

impl Default for Binaries {
    fn default() -> Self {
        Binaries {
            redis_server: "redis-server".into(),
            redis_sentinel: "redis-sentinel".into(),
        }
    }
}

/// What kind of process a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Redis,
    Sentinel,
}

/// The node names of a topology, as the simulation names them: `redis-N`,
/// `redis-N-replica-M`, `sentinel-N`.
pub fn node_names(topology: &Topology) -> Vec<(String, Kind)> {
    let mut names = Vec::new();
    for m in 1..=topology.masters {
        names.push((format!("redis-{m}"), Kind::Redis));
        for r in 1..=topology.replicas {
            names.push((format!("redis-{m}-replica-{r}"), Kind::Redis));
        }
    }
    for s in 1..=topology.sentinels {
        names.push((format!("sentinel-{s}"), Kind::Sentinel));
    }
    names
}

/// Where each node listens; by default a fresh `127.a.b.c` per node with its port free.
#[derive(Clone, Debug, Default)]
pub struct Addresses {
    pub listen: BTreeMap<String, SocketAddr>,
    /// What a node announces to the others instead (a bridge's address), if anything.
    pub announce: BTreeMap<String, SocketAddr>,
}

impl Addresses {
    /// A fresh loopback address for every node of `topology`, its port checked free.
    pub fn free(topology: &Topology) -> Result<Addresses, String> {
        static CLUSTERS: AtomicU32 = AtomicU32::new(0);
        let mut listen = BTreeMap::new();
        for (index, (name, kind)) in node_names(topology).into_iter().enumerate() {
            let port = match kind {
                Kind::Redis => REDIS_PORT,
                Kind::Sentinel => SENTINEL_PORT,
            };
            let mut found = None;
            for _ in 0..64 {
                // 127.64.0.0/10 by process id, then the cluster: runs at once rarely meet, and
                // a taken address is skipped.
                let n = CLUSTERS.fetch_add(1, Ordering::Relaxed);
                let a = 64 + (std::process::id() % 64) as u8;
                let ip = Ipv4Addr::new(127, a, n as u8, (index + 1) as u8);
                let addr = SocketAddr::new(ip.into(), port);
                if TcpListener::bind(addr).is_ok() {
                    found = Some(addr);
                    break;
                }
            }
            let addr = found.ok_or_else(|| format!("{name}: no free loopback address found"))?;
            listen.insert(name, addr);
        }
        Ok(Addresses {
            listen,
            announce: BTreeMap::new(),
        })
    }

    fn addr(&self, node: &str) -> SocketAddr {
        self.listen[node]
    }

    /// The address the others are told about.
    fn announced(&self, node: &str) -> SocketAddr {
        self.announce
            .get(node)
            .copied()
            .unwrap_or_else(|| self.addr(node))
    }
}

/// One node's process and where it lives.
struct Instance {
    kind: Kind,
    dir: PathBuf,
    process: Option<Process>,
    /// Its clock (kept across restarts, as a machine's clock outlives a process).
    clock: ClockFile,
}

/// The real processes of one topology. Dropping it stops every one of them.
pub struct Cluster<'s> {
    supervisor: &'s Supervisor,
    binaries: Binaries,
    addresses: Addresses,
    nodes: BTreeMap<String, Instance>,
    /// The clock shim every process is started with (`clock`).
    clock_shim: PathBuf,
}

impl<'s> Cluster<'s> {
    /// Writes every node's config under `dir` and starts them all, masters first; returns once
    /// every process answers PING. Any failure stops what was started and names the node.
    pub fn start(
        supervisor: &'s Supervisor,
        binaries: Binaries,
        topology: &Topology,
        addresses: Addresses,
        dir: &Path,
    ) -> Result<Cluster<'s>, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut cluster = Cluster {
            supervisor,
            binaries,
            addresses,
            nodes: BTreeMap::new(),
            clock_shim: clock::install_library(dir)?,
        };
        for (name, kind) in node_names(topology) {
            let node_dir = dir.join(&name);
            std::fs::create_dir_all(&node_dir)
                .map_err(|e| format!("{name}: cannot create {}: {e}", node_dir.display()))?;
            let conf = match kind {
                Kind::Redis => cluster.redis_conf(topology, &name, &node_dir),
                Kind::Sentinel => cluster.sentinel_conf(topology, &name, &node_dir),
            };
            let path = node_dir.join(conf_file(kind));
            std::fs::write(&path, conf)
                .map_err(|e| format!("{name}: cannot write {}: {e}", path.display()))?;
            let clock =
                ClockFile::create(node_dir.join("clock")).map_err(|e| format!("{name}: {e}"))?;
            cluster.nodes.insert(
                name.clone(),
                Instance {
                    kind,
                    dir: node_dir,
                    process: None,
                    clock,
                },
            );
            cluster.launch(&name)?;
        }
        Ok(cluster)
    }

    fn redis_conf(&self, topology: &Topology, name: &str, dir: &Path) -> String {
        let addr = self.addresses.addr(name);
        let mut conf = common_conf(addr, dir);
        if topology.appendfsync == "off" {
            conf.push_str("appendonly no\n");
        } else {
            conf.push_str(&format!(
                "appendonly yes\nappendfsync {}\n",
                topology.appendfsync
            ));
        }
        // The simulation sends a full resync's snapshot at once (no fork, no diskless delay).
        conf.push_str("repl-diskless-sync-delay 0\n");
        if topology.min_replicas_to_write > 0 {
            conf.push_str(&format!(
                "min-replicas-to-write {}\nmin-replicas-max-lag {}\n",
                topology.min_replicas_to_write,
                topology.min_replicas_max_lag_ms / 1000
            ));
        }
        if let Some((master, _)) = name.split_once("-replica-") {
            let master = self.addresses.announced(master);
            conf.push_str(&format!("replicaof {} {}\n", master.ip(), master.port()));
        }
        if let Some(announce) = self.addresses.announce.get(name) {
            conf.push_str(&format!(
                "replica-announce-ip {}\nreplica-announce-port {}\n",
                announce.ip(),
                announce.port()
            ));
        }
        conf
    }

    fn sentinel_conf(&self, topology: &Topology, name: &str, dir: &Path) -> String {
        let addr = self.addresses.addr(name);
        let mut conf = common_conf(addr, dir);
        if let Some(announce) = self.addresses.announce.get(name) {
            conf.push_str(&format!(
                "sentinel announce-ip {}\nsentinel announce-port {}\n",
                announce.ip(),
                announce.port()
            ));
        }
        let quorum = topology.sentinels / 2 + 1;
        for m in 1..=topology.masters {
            let group = format!("redis-{m}");
            let master = self.addresses.announced(&group);
            conf.push_str(&format!(
                "sentinel monitor {group} {} {} {quorum}\n\
                 sentinel down-after-milliseconds {group} {}\n\
                 sentinel failover-timeout {group} {}\n",
                master.ip(),
                master.port(),
                topology.sentinel_down_after_ms,
                topology.sentinel_failover_timeout_ms
            ));
        }
        conf
    }

    /// Starts `node`'s process from its config and waits until it answers PING.
    fn launch(&mut self, node: &str) -> Result<(), String> {
        let instance = &self.nodes[node];
        let program = match instance.kind {
            Kind::Redis => self.binaries.redis_server.clone(),
            Kind::Sentinel => self.binaries.redis_sentinel.clone(),
        };
        let conf = instance.dir.join(conf_file(instance.kind));
        let log = instance.dir.join("log.txt");
        let spec = Spec {
            label: node.to_string(),
            program: program.clone(),
            args: vec![conf.into_os_string()],
            env: vec![
                (
                    "LD_PRELOAD".into(),
                    self.clock_shim.clone().into_os_string(),
                ),
                (
                    clock::FILE_ENV.into(),
                    instance.clock.path().as_os_str().to_owned(),
                ),
            ],
            piped: false,
            stderr: Some(log.clone()),
            cwd: Some(instance.dir.clone()),
        };
        let mut process = self.supervisor.spawn(spec).map_err(|e| {
            format!(
                "{e} (is {} installed? `apt-get install redis-server redis-sentinel`)",
                program.to_string_lossy()
            )
        })?;
        let addr = self.addresses.addr(node);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = process.exited() {
                self.supervisor.kill(&mut process);
                return Err(format!(
                    "{node}: {} exited during start-up ({status}) on {addr}: {}",
                    program.to_string_lossy(),
                    log_tail(&log)
                ));
            }
            match call(addr, &["PING"], Duration::from_millis(500)) {
                Ok(Reply::Status(s)) if s == "PONG" => break,
                _ if Instant::now() > deadline => {
                    self.supervisor.kill(&mut process);
                    return Err(format!(
                        "{node}: {} did not answer PING on {addr} within {} s: {}",
                        program.to_string_lossy(),
                        START_TIMEOUT.as_secs(),
                        log_tail(&log)
                    ));
                }
                _ if stop_requested() => {
                    self.supervisor.kill(&mut process);
                    return Err("interrupted".into());
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        self.nodes.get_mut(node).expect("a known node").process = Some(process);
        Ok(())
    }

    /// Where `node` listens.
    pub fn addr(&self, node: &str) -> SocketAddr {
        self.addresses.addr(node)
    }

    /// The names of the nodes of one kind.
    pub fn names(&self, kind: Kind) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, i)| i.kind == kind)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Waits until every replica's link is up and every Sentinel knows its masters' replicas
    /// and the other Sentinels (what a scenario's start assumes), or `timeout` passes.
    pub fn wait_settled(&self, topology: &Topology, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut waiting_for = String::new();
        while Instant::now() < deadline {
            if stop_requested() {
                return Err("interrupted".into());
            }
            waiting_for = self.unsettled(topology).unwrap_or_default();
            if waiting_for.is_empty() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "the processes did not settle within {} s: {waiting_for}",
            timeout.as_secs()
        ))
    }

    /// What is not settled yet, if anything.
    fn unsettled(&self, topology: &Topology) -> Option<String> {
        let short = Duration::from_millis(500);
        for (name, instance) in &self.nodes {
            if instance.kind == Kind::Redis && name.contains("-replica-") {
                let info = info(self.addr(name), "replication", short).unwrap_or_default();
                if !info.contains("master_link_status:up") {
                    return Some(format!("{name}'s replication link is not up"));
                }
            }
        }
        for sentinel in self.names(Kind::Sentinel) {
            for m in 1..=topology.masters {
                let reply = match call(
                    self.addr(&sentinel),
                    &["SENTINEL", "MASTER", &format!("redis-{m}")],
                    short,
                ) {
                    Ok(reply) => reply,
                    Err(e) => return Some(format!("{sentinel}: {e}")),
                };
                let fields = pairs(&reply);
                let replicas = fields.get("num-slaves").map(String::as_str);
                let others = fields.get("num-other-sentinels").map(String::as_str);
                if replicas != Some(topology.replicas.to_string().as_str())
                    || others != Some((topology.sentinels - 1).to_string().as_str())
                {
                    return Some(format!(
                        "{sentinel} knows {} replicas and {} other Sentinels of redis-{m}",
                        replicas.unwrap_or("?"),
                        others.unwrap_or("?")
                    ));
                }
            }
        }
        None
    }

    fn process(&self, node: &str) -> Result<&Process, String> {
        self.nodes
            .get(node)
            .ok_or_else(|| format!("no node {node} in this cluster"))?
            .process
            .as_ref()
            .ok_or_else(|| format!("{node} is not running"))
    }

    /// `pause`: SIGSTOP of the node's process group.
    pub fn pause(&self, node: &str) -> Result<(), String> {
        let pid = self.process(node)?.pid;
        self.supervisor.signal(pid, libc::SIGSTOP);
        Ok(())
    }

    /// The end of a `pause`: SIGCONT.
    pub fn resume(&self, node: &str) -> Result<(), String> {
        let pid = self.process(node)?.pid;
        self.supervisor.signal(pid, libc::SIGCONT);
        Ok(())
    }

    /// `crash`: SIGKILL, reaped; its folder (config, AOF) stays for `restart`.
    pub fn crash(&mut self, node: &str) -> Result<(), String> {
        self.process(node)?;
        let instance = self.nodes.get_mut(node).expect("checked");
        let mut process = instance.process.take().expect("checked");
        self.supervisor.kill(&mut process);
        Ok(())
    }

    /// The end of a `crash`: the process starts again from its own config and AOF.
    pub fn restart(&mut self, node: &str) -> Result<(), String> {
        match self.nodes.get(node) {
            None => Err(format!("no node {node} in this cluster")),
            Some(i) if i.process.is_some() => Err(format!("{node} is running already")),
            Some(_) => self.launch(node),
        }
    }

    /// `clock_jump`/`clock_drift`: from now on `node`'s wall clock reads true time +
    /// `offset_ms`, and its clocks run at `rate` (see `clock`). A node that is down gets it too:
    /// its restart reads the same clock.
    pub fn set_clock(&mut self, node: &str, offset_ms: i64, rate: f64) -> Result<(), String> {
        let instance = self
            .nodes
            .get_mut(node)
            .ok_or_else(|| format!("no node {node} in this cluster"))?;
        if let Some(process) = &instance.process
            && !clock::loaded_in(process.pid)
        {
            return Err(format!(
                "{node}: the clock shim is not loaded in process {} (a static binary ignores LD_PRELOAD)",
                process.pid
            ));
        }
        instance.clock.set(offset_ms, rate)
    }

    /// `failover`: `SENTINEL FAILOVER <master>` to the first Sentinel that accepts it; its reply.
    pub fn failover(&self, master: &str) -> Result<String, String> {
        let mut last = format!("no Sentinel to ask for a failover of {master}");
        for sentinel in self.names(Kind::Sentinel) {
            match call(
                self.addr(&sentinel),
                &["SENTINEL", "FAILOVER", master],
                Duration::from_secs(1),
            ) {
                Ok(Reply::Status(s)) => return Ok(format!("{sentinel}: {s}")),
                Ok(other) => last = format!("{sentinel}: {other:?}"),
                Err(e) => last = format!("{sentinel}: {e}"),
            }
        }
        Err(last)
    }
}

impl Drop for Cluster<'_> {
    fn drop(&mut self) {
        for instance in self.nodes.values_mut() {
            if let Some(mut process) = instance.process.take() {
                self.supervisor
                    .terminate(&mut process, Duration::from_millis(500));
            }
        }
    }
}

fn conf_file(kind: Kind) -> &'static str {
    match kind {
        Kind::Redis => "redis.conf",
        Kind::Sentinel => "sentinel.conf",
    }
}

/// What every process's config starts with: its own address for listening and connecting,
/// its folder, its log, no RDB snapshots (the simulation has none).
fn common_conf(addr: SocketAddr, dir: &Path) -> String {
    format!(
        "bind {ip}\nbind-source-addr {ip}\nport {port}\nprotected-mode no\ndaemonize no\n\
         dir {dir}\nlogfile {log}\nsave \"\"\n",
        ip = addr.ip(),
        port = addr.port(),
        dir = dir.display(),
        log = dir.join("log.txt").display()
    )
}

/// The last lines of a process's log, for an error message.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    if tail.is_empty() {
        "its log is empty".into()
    } else {
        tail
    }
}

/// `INFO section` as text.
pub fn info(addr: SocketAddr, section: &str, timeout: Duration) -> Result<String, String> {
    match call(addr, &["INFO", section], timeout)? {
        Reply::Bulk(text) => Ok(String::from_utf8_lossy(&text).into_owned()),
        other => Err(format!("INFO {section}: unexpected reply {other:?}")),
    }
}

/// A flat array of field, value pairs (`SENTINEL MASTER`) as a map.
pub fn pairs(reply: &Reply) -> BTreeMap<String, String> {
    let Reply::Array(items) = reply else {
        return BTreeMap::new();
    };
    items
        .chunks(2)
        .filter_map(|pair| match pair {
            [Reply::Bulk(k), Reply::Bulk(v)] => Some((
                String::from_utf8_lossy(k).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )),
            _ => None,
        })
        .collect()
}
