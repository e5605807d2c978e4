//! Asynchronous master → replica replication (`replication.c`), over the simulated network.
//!
//! - The stream is the master's propagated effects (`take_propagated`, Redis 7.0: absolute
//!   `PXAT`/`PEXPIREAT`, `DEL` on expiry; Redis 6.2's relative TTLs with
//!   `topology.ttl_propagation`, `ttl`), RESP-encoded; every byte advances the replication
//!   offset, and the last `BACKLOG_SIZE` bytes stay in a backlog for partial resyncs.
//! - A replica connects to its master's port and sends `PSYNC <replid> <offset+1>`; the master
//!   answers `+CONTINUE` and the missing tail of its backlog when it can
//!   (`masterTryPartialResynchronization`: same replid, or the previous one up to
//!   `second_replid_offset`, and the offset still in the backlog), else `+FULLRESYNC` and a
//!   snapshot of its dataset: the replica flushes everything it had and loads the snapshot.
//! - Replicas apply the stream in order with `apply_replicated` (they never expire keys
//!   themselves) and acknowledge their offset once a second (`REPLCONF ACK`, sent by
//!   `replicationCron`) and whenever the master asks (`REPLCONF GETACK *`, sent by `WAIT`).
//! - The master notes each ACK's time in whole seconds of its own wall clock (`repl_ack_time =
//!   server.unixtime`, redis 7.0.15 `src/replication.c` 1194), and every lag is `server.unixtime
//!   - repl_ack_time`: `min-replicas-max-lag`, `repl-timeout`, INFO's `lag`. The number of good
//!   replicas that `min-replicas-to-write` checks is not counted per command: it is refreshed
//!   once a second by `replicationCron` and when a replica comes online or goes away
//!   (`refreshGoodSlavesCount`, `src/replication.c` 3381-3398, called at 3758, 806, 1281 and
//!   `src/networking.c` 1695), and writes are refused on that count (`src/server.c` 3911). A
//!   replica that stops acknowledging is therefore refused on about 1-3 s later with
//!   `min-replicas-max-lag 1` (measured against redis-server 7.0.15: `docs/fidelity.md`).
//! - The master pings its replicas every 10 s (`repl-ping-replica-period`); either side drops a
//!   link silent for 60 s (`repl-timeout`); a replica whose link is down retries every second
//!   (`replicationCron`).
//! - `REPLICAOF NO ONE` turns a replica into a master: a new replid, the old one kept as replid2
//!   so its former siblings can continue partially (`shiftReplicationId`). `REPLICAOF host port`
//!   turns a master into a replica that tries to continue with its own replid and offset; a
//!   demoted master that accepted writes the new master never saw is refused and fully resynced,
//!   losing them.
//!
//! The state (`Repl`), role changes and the cron are here; the master's side of the link is
//! `master`, the replica's side `replica`.

mod master;
mod replica;
mod ttl;

use model::marks::{self, Mark, mark};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use model::history::EventKind;
use model::redis::{ClientId, ReplicaInfo, ReplicationInfo, Role};

use super::Node;
use super::persistence;
use crate::nodes::REDIS_PORT;
use crate::nodes::resp::{encode_command, encode_commands};
use crate::signal::Signal;
use crate::world::net::socket::NetWriter;
use crate::world::procs::node_ip;
pub use master::{ack, psync, replica_gone, wait};

/// `repl-backlog-size` (1 MB).
pub const BACKLOG_SIZE: usize = 1 << 20;
/// `repl-timeout` (60 s).
pub const REPL_TIMEOUT: Duration = Duration::from_secs(60);
/// `repl-ping-replica-period` (10 s).
pub const PING_PERIOD_MS: u64 = 10_000;

/// One connected replica, as its master sees it.
pub struct ReplicaLink {
    pub name: String,
    writer: NetWriter,
    pub ack_offset: i64,
    /// `repl_ack_time`: the master's wall clock in whole seconds at the last ACK (or when the
    /// replica came online).
    pub ack_unix_s: i64,
}

/// A node's replication state, both roles.
pub struct Repl {
    pub replid: String,
    pub replid2: String,
    /// Up to which offset `replid2` is valid (-1: none).
    pub second_offset: i64,
    /// Master: bytes produced (`master_repl_offset`); replica: bytes processed from its master.
    pub offset: i64,
    backlog: VecDeque<u8>,
    /// Master side: connected replicas, by the connection's client id.
    pub replicas: BTreeMap<ClientId, ReplicaLink>,
    /// Replica side: the link to the master, once the handshake succeeded.
    master_writer: Option<NetWriter>,
    pub link_up: bool,
    pub last_io_us: Option<u64>,
    pub link_down_since_us: Option<u64>,
    /// Master side: bumped on every ACK, so `WAIT` can wait for them.
    acks: Signal,
    /// Master side: `repl_good_slaves_count`, as last refreshed (`refresh_good_replicas`).
    pub good_replicas: usize,
    replids_made: u64,
    last_ping_us: u64,
}

impl Repl {
    pub fn new(seed: u64, node: &str) -> Repl {
        let mut repl = Repl {
            replid: String::new(),
            replid2: "0".repeat(40),
            second_offset: -1,
            offset: 0,
            backlog: VecDeque::new(),
            replicas: BTreeMap::new(),
            master_writer: None,
            link_up: false,
            last_io_us: None,
            link_down_since_us: None,
            acks: Signal::new(),
            good_replicas: 0,
            replids_made: 0,
            last_ping_us: 0,
        };
        repl.replid = repl.new_replid(seed, node);
        repl
    }

    /// A fresh 40-hex-digit replication id, deterministic per seed, node and start.
    fn new_replid(&mut self, seed: u64, node: &str) -> String {
        use sha1::{Digest, Sha1};
        self.replids_made += 1;
        let mut h = Sha1::new();
        h.update(seed.to_le_bytes());
        h.update(node.as_bytes());
        h.update(self.replids_made.to_le_bytes());
        model::history::hex(&h.finalize())
    }

    /// The first offset still in the backlog (`repl_backlog->offset`).
    fn backlog_first(&self) -> i64 {
        self.offset - self.backlog.len() as i64 + 1
    }

    fn append_backlog(&mut self, bytes: &[u8]) {
        self.offset += bytes.len() as i64;
        self.backlog.extend(bytes);
        let excess = self.backlog.len().saturating_sub(BACKLOG_SIZE);
        self.backlog.drain(..excess);
    }

    /// Master side: appends to the stream and sends it to every replica.
    fn feed(&mut self, bytes: &[u8]) {
        self.append_backlog(bytes);
        for link in self.replicas.values() {
            let _ = link.writer.send(bytes.to_vec());
        }
    }

    /// `refreshGoodSlavesCount`: counts the replicas whose lag in whole seconds is at most
    /// `min-replicas-max-lag`; nothing is counted while `min-replicas-to-write` is off.
    fn refresh_good_replicas(&mut self, now_unix_s: i64, min_to_write: u32, max_lag_ms: u64) {
        if min_to_write == 0 || max_lag_ms == 0 {
            return;
        }
        let max_lag_s = (max_lag_ms / 1000) as i64;
        self.good_replicas = self
            .replicas
            .values()
            .filter(|r| now_unix_s - r.ack_unix_s <= max_lag_s)
            .count();
    }

    fn acked(&self, target: i64) -> i64 {
        self.replicas
            .values()
            .filter(|r| r.ack_offset >= target)
            .count() as i64
    }
}

/// The host's view for INFO replication and ROLE.
pub fn replication_info(node: &Node) -> ReplicationInfo {
    let repl = node.repl.borrow();
    let now = node.world.time.now_us();
    let now_unix_s = unix_s(node);
    let replicas = repl
        .replicas
        .values()
        .map(|r| ReplicaInfo {
            ip: node_ip(&r.name).to_string(),
            port: REDIS_PORT,
            offset: r.ack_offset,
            lag: now_unix_s - r.ack_unix_s,
        })
        .collect();
    ReplicationInfo {
        replicas,
        master_repl_offset: repl.offset,
        master_replid: repl.replid.clone(),
        master_link_up: repl.link_up,
        master_last_io_seconds_ago: repl
            .last_io_us
            .map_or(-1, |t| (now.saturating_sub(t) / 1_000_000) as i64),
        slave_repl_offset: repl.offset,
    }
}

/// Propagates what the last command(s) changed: to the AOF, and from a master to its replicas.
pub fn propagate(node: &Node) {
    let commands = node.server.borrow_mut().take_propagated();
    if commands.is_empty() {
        return;
    }
    persistence::append(&node.world, &node.name, node.fsync, &commands);
    if matches!(node.server.borrow().role(), Role::Master) {
        let commands = if node.world.scenario.topology.ttl_propagation == "relative" {
            ttl::relative(commands, node.world.time.wall_ms(&node.name))
        } else {
            commands
        };
        node.repl.borrow_mut().feed(&encode_commands(&commands));
    }
}

/// `server.unixtime` of `node`: its wall clock in whole seconds.
pub fn unix_s(node: &Node) -> i64 {
    node.world.time.wall_ms(&node.name).div_euclid(1000)
}

/// `refreshGoodSlavesCount` on `node` now, with the scenario's `min-replicas-*`.
pub fn refresh_good_replicas(node: &Node) {
    let topology = &node.world.scenario.topology;
    node.repl.borrow_mut().refresh_good_replicas(
        unix_s(node),
        topology.min_replicas_to_write,
        topology.min_replicas_max_lag_ms,
    );
}

/// `replicationCron`, once a second: a master drops the replicas silent for `repl-timeout`
/// (`src/replication.c` 3681), pings them every 10 s and refreshes its count of good replicas
/// (3758); a replica acknowledges its offset (3610).
pub async fn cron(node: Rc<Node>) {
    loop {
        let period = node.world.time.true_duration_us(&node.name, 1000);
        madsim::time::sleep(Duration::from_micros(period)).await;
        let now = node.world.time.now_us();
        let now_unix_s = unix_s(&node);
        let is_master = matches!(node.server.borrow().role(), Role::Master);
        let mut repl = node.repl.borrow_mut();
        if is_master {
            let timed_out: Vec<ClientId> = repl
                .replicas
                .iter()
                .filter(|(_, r)| now_unix_s - r.ack_unix_s > REPL_TIMEOUT.as_secs() as i64)
                .map(|(id, _)| *id)
                .collect();
            for id in timed_out {
                if let Some(link) = repl.replicas.remove(&id) {
                    link.writer.reset();
                }
            }
            let ping_every = node.world.time.true_duration_us(&node.name, PING_PERIOD_MS);
            if !repl.replicas.is_empty() && now.saturating_sub(repl.last_ping_us) >= ping_every {
                repl.last_ping_us = now;
                repl.feed(&encode_command(&[b"PING".to_vec()]));
            }
            drop(repl);
            refresh_good_replicas(&node);
        } else if repl.link_up
            && let Some(writer) = &repl.master_writer
        {
            let offset = repl.offset.to_string().into_bytes();
            let _ = writer.send(encode_command(&[
                b"REPLCONF".to_vec(),
                b"ACK".to_vec(),
                offset,
            ]));
        }
    }
}

/// `REPLICAOF NO ONE`: the replica becomes a master (`replicationUnsetMaster`).
pub fn become_master(node: &Node) {
    if matches!(node.server.borrow().role(), Role::Master) {
        return;
    }
    stop_replica_link(node);
    {
        let mut repl = node.repl.borrow_mut();
        repl.replid2 = repl.replid.clone();
        repl.second_offset = repl.offset + 1;
        let seed = node.world.seed;
        repl.replid = repl.new_replid(seed, &node.name);
        repl.link_up = false;
        repl.master_writer = None;
    }
    node.server.borrow_mut().set_role(Role::Master);
    mark(Mark::ReplicaPromoted);
    let has_key = node
        .lock_entry(node.world.time.wall_ms(&node.name))
        .is_some();
    if !has_key {
        mark(Mark::PromotedWithoutLockKey);
    }
    if marks::on() && node.world.history.holder_lacks_key_on(&node.name, has_key) {
        mark(Mark::PromotedWhileHeld);
    }
    node.world.record(
        &node.name,
        EventKind::Replication {
            what: "role".into(),
            detail: "master (REPLICAOF NO ONE)".into(),
        },
    );
}

/// `REPLICAOF <master>` (`replicationSetMaster`): stop serving replicas, start the link.
pub fn become_replica(node: &Rc<Node>, master: &str) {
    stop_replica_link(node);
    {
        let mut repl = node.repl.borrow_mut();
        for link in std::mem::take(&mut repl.replicas).into_values() {
            link.writer.reset();
        }
        repl.link_up = false;
        repl.master_writer = None;
        repl.link_down_since_us = Some(node.world.time.now_us());
    }
    refresh_good_replicas(node);
    node.server.borrow_mut().set_role(Role::Replica {
        master_host: node_ip(master).to_string(),
        master_port: REDIS_PORT,
    });
    node.world.record(
        &node.name,
        EventKind::Replication {
            what: "role".into(),
            detail: format!("replica of {master}"),
        },
    );
    let task = madsim::task::spawn_local(replica::replica_link(node.clone(), master.to_string()));
    *node.replica_task.borrow_mut() = Some(task);
}

fn stop_replica_link(node: &Node) {
    if let Some(task) = node.replica_task.borrow_mut().take() {
        task.abort();
    }
    if let Some(writer) = node.repl.borrow_mut().master_writer.take() {
        writer.reset();
    }
}

/// Initial role of a node at start: what its redis.conf says.
pub fn start(node: &Rc<Node>) {
    let replicaof = node.world.disks.with(&node.name, |d| d.replicaof.clone());
    if let Some(master) = replicaof {
        become_replica(node, &master);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use madsim::runtime::{Handle, Runtime};
    use model::redis::Reply;

    use crate::nodes::REDIS_PORT;
    use crate::nodes::resp::RespConn;
    use crate::runner::redis_world;
    use crate::scenario::Scenario;
    use crate::world::procs::node_ip;

    fn words(line: &str) -> Vec<Vec<u8>> {
        line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    /// WAIT counts the replicas that acknowledged the write, not the ones that exist: with one
    /// replica's link 2 s slow, `WAIT 2 500` returns 1 after its timeout, `WAIT 2 5000` returns
    /// 2 once the slow replica caught up.
    #[test]
    fn wait_returns_the_acks_actually_received() {
        let scenario = Arc::new(
            Scenario::parse(
                r#"{ "name": "w", "topology": { "replicas": 2 }, "scheme": "set-nx-px-lua",
                     "faults": [ { "kind": "delay", "from": "redis-1", "to": "redis-1-replica-2",
                                   "extra_ms": 2000, "at_ms": 100 } ] }"#,
                "w.json",
            )
            .unwrap(),
        );
        let results: Arc<Mutex<Vec<(Reply, u64)>>> = Arc::default();
        let out = results.clone();
        std::thread::spawn(move || {
            let runtime = Runtime::with_seed_and_config(1, madsim::Config::default());
            runtime.block_on(async move {
                let handle = Handle::current();
                let world = redis_world(&handle, &scenario, 1);
                madsim::time::sleep(Duration::from_millis(500)).await;
                world
                    .net
                    .add_delay("redis-1", "redis-1-replica-2", 2_000_000);
                let (w, out) = (world.clone(), out.clone());
                let client = handle
                    .create_node()
                    .name("client-1")
                    .ip(node_ip("client-1"))
                    .init(move || {
                        let (w, out) = (w.clone(), out.clone());
                        async move {
                            let mut conn = RespConn::connect(&w, "client-1", "redis-1", REDIS_PORT)
                                .await
                                .unwrap();
                            for line in ["SET k v", "WAIT 2 500", "SET k w", "WAIT 2 5000"] {
                                let start = w.time.now_us();
                                let reply = conn.call(&words(line)).await.unwrap();
                                out.lock()
                                    .unwrap()
                                    .push((reply, (w.time.now_us() - start) / 1000));
                            }
                        }
                    })
                    .build();
                world
                    .procs
                    .register("client-1", client.id(), node_ip("client-1"));
                madsim::time::sleep(Duration::from_secs(10)).await;
                for id in world.procs.ids() {
                    handle.kill(id);
                }
            });
        })
        .join()
        .unwrap();
        let r = results.lock().unwrap();
        assert_eq!(r[1].0, Reply::Integer(1), "{r:?}");
        assert!((500..520).contains(&r[1].1), "{r:?}");
        assert_eq!(r[3].0, Reply::Integer(2), "{r:?}");
        assert!((2000..4100).contains(&r[3].1), "{r:?}");
    }
}
