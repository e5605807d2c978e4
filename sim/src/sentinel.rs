//! Redis Sentinel (`sentinel.c`, Redis 7.0), one process per `sentinel-N` node, monitoring every
//! master group `redis-N` with quorum S/2+1.
//!
//! Monitoring half (always, even in TILT): each instance (masters, replicas, the other
//! Sentinels) has a command link; a PING goes out once a second (`min(down-after, 1 s)`), INFO
//! every 10 s (every second for the replicas of a master in ODOWN or failover), and a hello with
//! this Sentinel's view of the master's configuration to every other Sentinel every 2 s (sent
//! directly, as `PUBLISH __sentinel__:hello` to the Sentinel; the copy Redis also relays through
//! the monitored instances' Pub/Sub is not simulated). A hello with a higher config epoch for a
//! master makes this Sentinel adopt its address.
//!
//! Acting half (skipped in TILT): SDOWN when an instance has not answered a PING for
//! `down-after-milliseconds` (or a master reports itself a replica for long); ODOWN when the
//! master is SDOWN for the quorum (asked with `SENTINEL is-master-down-by-addr` every second);
//! then a failover: a new epoch, a vote request to every Sentinel (each votes once per epoch,
//! for the first asker), and the winner (majority and quorum) promotes the replica with the
//! best priority and replication offset (`REPLICAOF NO ONE`, `CONFIG REWRITE`, `CLIENT KILL`),
//! re-points the other replicas one at a time, and switches the master address. An old master
//! that comes back reporting itself a master is converted to a replica of the new one only after
//! it has been seen that way for 8 s (`SENTINEL_PUBLISH_PERIOD*4`) and its INFO says so again —
//! until then it accepts writes that the new master never sees.
//!
//! TILT (`sentinelCheckTiltCondition`): the timer measures wall-clock time between its calls; a
//! negative delta or one over 2 s (a clock jump, or the process paused) puts the Sentinel in TILT
//! for 30 s: it keeps monitoring but does not act (no SDOWN/ODOWN, no failover, no
//! reconfiguration) and answers `is-master-down-by-addr` with 0.
//!
//! Every time is this node's wall clock (`mstime()`), so a jumping or drifting clock misleads it
//! exactly as it would the real process. The state Redis writes to sentinel.conf (epochs, votes,
//! master addresses, known replicas) survives a crash of the Sentinel.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use madsim::net::TcpListener;
use model::history::EventKind;
use model::redis::{Reply, RequestParser};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::conn::{RespConn, encode_command};
use crate::netlayer::{NetConn, NetReader, NetWriter};
use crate::world::{World, stream_seed};
use crate::{REDIS_PORT, SENTINEL_PORT, node_ip};

const PING_PERIOD: i64 = 1000;
const INFO_PERIOD: i64 = 10_000;
const ASK_PERIOD: i64 = 1000;
const PUBLISH_PERIOD: i64 = 2000;
const TILT_TRIGGER: i64 = 2000;
const TILT_PERIOD: i64 = PING_PERIOD * 30;
const SLAVE_RECONF_TIMEOUT: i64 = 10_000;
const MIN_LINK_RECONNECT_PERIOD: i64 = 15_000;
const ELECTION_TIMEOUT: i64 = 10_000;
const MAX_DESYNC: i64 = 1000;
const MAX_PENDING_COMMANDS: usize = 100;
const PARALLEL_SYNCS: usize = 1;
const HELLO_CHANNEL: &str = "__sentinel__:hello";

/// What a Sentinel keeps in sentinel.conf.
#[derive(Clone, Debug, Default)]
pub struct SentinelConf {
    pub current_epoch: u64,
    pub masters: BTreeMap<String, MasterConf>,
}

#[derive(Clone, Debug, Default)]
pub struct MasterConf {
    pub addr: String,
    pub config_epoch: u64,
    pub leader: Option<String>,
    pub leader_epoch: u64,
    pub replicas: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum FailoverState {
    None,
    WaitStart,
    SelectSlave,
    SendSlaveofNoOne,
    WaitPromotion,
    ReconfSlaves,
    UpdateConfig,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Unknown,
    Master,
    Slave,
}

/// An instance as one master group sees it (`sentinelRedisInstance`, minus the link).
#[derive(Clone, Debug)]
struct Inst {
    s_down: bool,
    s_down_since: i64,
    info_refresh: i64,
    role_reported: Role,
    role_reported_time: i64,
    slave_master_host: Option<String>,
    slave_master_link_up: bool,
    slave_repl_offset: i64,
    master_link_down_time: i64,
    slave_conf_change_time: i64,
    promoted: bool,
    reconf_sent: bool,
    reconf_inprog: bool,
    reconf_done: bool,
    slave_reconf_sent_time: i64,
}

impl Inst {
    fn new(now: i64) -> Inst {
        Inst {
            s_down: false,
            s_down_since: 0,
            info_refresh: 0,
            role_reported: Role::Unknown,
            role_reported_time: now,
            slave_master_host: None,
            slave_master_link_up: false,
            slave_repl_offset: 0,
            master_link_down_time: 0,
            slave_conf_change_time: now,
            promoted: false,
            reconf_sent: false,
            reconf_inprog: false,
            reconf_done: false,
            slave_reconf_sent_time: 0,
        }
    }

    /// `sentinelRedisInstanceNoDownFor`.
    fn no_down_for(&self, now: i64, ms: i64) -> bool {
        !self.s_down && (self.s_down_since == 0 || now - self.s_down_since > ms)
    }
}

/// Another Sentinel, as one master group sees it.
#[derive(Clone, Debug, Default)]
struct Peer {
    master_down: bool,
    leader: Option<String>,
    leader_epoch: u64,
    last_master_down_reply_time: i64,
    last_pub_time: i64,
}

struct Master {
    name: String,
    addr: String,
    config_epoch: u64,
    inst: Inst,
    o_down: bool,
    replicas: BTreeMap<String, Inst>,
    peers: BTreeMap<String, Peer>,
    leader: Option<String>,
    leader_epoch: u64,
    failover_state: FailoverState,
    force_failover: bool,
    failover_epoch: u64,
    failover_start_time: i64,
    failover_state_change_time: i64,
    promoted: Option<String>,
}

/// The command link to one instance (shared by every master group that knows it).
struct Link {
    writer: Option<NetWriter>,
    connecting: bool,
    generation: u64,
    pending: VecDeque<Callback>,
    cc_conn_time: i64,
    last_avail_time: i64,
    act_ping_time: i64,
    last_ping_time: i64,
    last_pong_time: i64,
    last_reconn_time: i64,
}

impl Link {
    fn new(now: i64) -> Link {
        Link {
            writer: None,
            connecting: false,
            generation: 0,
            pending: VecDeque::new(),
            cc_conn_time: 0,
            last_avail_time: now,
            act_ping_time: now,
            last_ping_time: 0,
            last_pong_time: now,
            last_reconn_time: 0,
        }
    }

    fn disconnected(&self) -> bool {
        self.writer.is_none()
    }
}

#[derive(Clone, Debug)]
enum Callback {
    Discard,
    Ping,
    Info,
    IsMasterDown { master: String },
}

struct State {
    world: Arc<World>,
    name: String,
    current_epoch: u64,
    tilt: bool,
    tilt_start_time: i64,
    previous_time: i64,
    masters: Vec<Master>,
    links: BTreeMap<String, Link>,
    down_after: i64,
    failover_timeout: i64,
    quorum: usize,
    rng: ChaCha8Rng,
}

type Shared = Rc<RefCell<State>>;

impl State {
    fn now(&self) -> i64 {
        self.world.wall_ms(&self.name)
    }

    fn event(&self, what: &str, master: &str, detail: String) {
        self.world.record(
            &self.name,
            EventKind::Sentinel {
                what: what.into(),
                master: master.into(),
                detail,
            },
        );
    }

    /// `sentinelFlushConfig`: sentinel.conf is rewritten (and fsynced) on every change.
    fn flush_config(&self) {
        let conf = SentinelConf {
            current_epoch: self.current_epoch,
            masters: self
                .masters
                .iter()
                .enumerate()
                .map(|(m, master)| {
                    // rewriteConfigSentinelOption: the current address (the promoted replica
                    // once it acknowledged), and the old master among the replicas instead.
                    let addr = self.current_master_addr(m);
                    let replicas = master
                        .replicas
                        .keys()
                        .map(|r| {
                            if *r == addr {
                                master.addr.clone()
                            } else {
                                r.clone()
                            }
                        })
                        .collect();
                    (
                        master.name.clone(),
                        MasterConf {
                            addr,
                            config_epoch: master.config_epoch,
                            leader: master.leader.clone(),
                            leader_epoch: master.leader_epoch,
                            replicas,
                        },
                    )
                })
                .collect(),
        };
        self.world
            .with_disk(&self.name, |d| d.sentinel = Some(conf));
    }

    fn link(&mut self, node: &str) -> &mut Link {
        let now = self.now();
        self.links
            .entry(node.to_string())
            .or_insert_with(|| Link::new(now))
    }

    /// Queues a command on an instance's link; false when the link is down.
    fn send(&mut self, node: &str, argv: Vec<Vec<u8>>, callback: Callback) -> bool {
        let link = self.link(node);
        let Some(writer) = &link.writer else {
            return false;
        };
        if writer.send(encode_command(&argv)).is_err() {
            return false;
        }
        link.pending.push_back(callback);
        true
    }

    fn send_words(&mut self, node: &str, words: &[&str], callback: Callback) -> bool {
        self.send(
            node,
            words.iter().map(|w| w.as_bytes().to_vec()).collect(),
            callback,
        )
    }

    /// `instanceLinkCloseConnection`.
    fn close_link(&mut self, node: &str) {
        let link = self.link(node);
        if let Some(writer) = link.writer.take() {
            writer.reset();
        }
        link.pending.clear();
        link.generation += 1;
    }

    /// `sentinelGetCurrentMasterAddress`: once the promoted replica acknowledged its promotion,
    /// this Sentinel already reports it (to clients and in hellos).
    fn current_master_addr(&self, m: usize) -> String {
        let master = &self.masters[m];
        match &master.promoted {
            Some(p) if master.failover_state >= FailoverState::ReconfSlaves => p.clone(),
            _ => master.addr.clone(),
        }
    }

    fn master_index(&self, name: &str) -> Option<usize> {
        self.masters.iter().position(|m| m.name == name)
    }

    fn ip_name(&self, ip: &str) -> String {
        ip.parse()
            .map(|ip| self.world.name_of(ip))
            .unwrap_or_else(|_| ip.to_string())
    }

    // ------------------------------------------------------------------ replies

    fn on_reply(&mut self, node: &str, callback: Callback, reply: Reply) {
        let now = self.now();
        match callback {
            Callback::Discard => {}
            Callback::Ping => {
                let link = self.link(node);
                let valid = match &reply {
                    Reply::Status(s) => s.starts_with("PONG"),
                    Reply::Error(e) => e.starts_with(b"LOADING") || e.starts_with(b"MASTERDOWN"),
                    _ => false,
                };
                if valid {
                    link.last_avail_time = now;
                    link.act_ping_time = 0;
                }
                link.last_pong_time = now;
            }
            Callback::Info => {
                if let Reply::Bulk(text) = reply {
                    let text = String::from_utf8_lossy(&text).into_owned();
                    for m in 0..self.masters.len() {
                        if self.masters[m].addr == node
                            || self.masters[m].replicas.contains_key(node)
                        {
                            self.refresh_info(m, node, &text);
                        }
                    }
                }
            }
            Callback::IsMasterDown { master } => {
                let Reply::Array(items) = reply else { return };
                if items.len() != 3 {
                    return;
                }
                let (Some(down), Some(leader), Some(epoch)) = (
                    items[0].as_integer(),
                    items[1]
                        .as_bulk()
                        .map(|b| String::from_utf8_lossy(b).into_owned()),
                    items[2].as_integer(),
                ) else {
                    return;
                };
                let Some(m) = self.master_index(&master) else {
                    return;
                };
                let peer = self.masters[m].peers.entry(node.to_string()).or_default();
                peer.last_master_down_reply_time = now;
                peer.master_down = down == 1;
                if leader != "*" {
                    peer.leader = Some(leader);
                    peer.leader_epoch = epoch as u64;
                }
            }
        }
    }

    /// `sentinelRefreshInstanceInfo`.
    fn refresh_info(&mut self, m: usize, node: &str, info: &str) {
        let now = self.now();
        let tilt = self.tilt;
        let mut role = Role::Unknown;
        let mut new_replicas = Vec::new();
        let is_master_addr = self.masters[m].addr == node;
        {
            let master = &mut self.masters[m];
            let inst = if is_master_addr {
                &mut master.inst
            } else {
                master
                    .replicas
                    .get_mut(node)
                    .expect("checked by the caller")
            };
            inst.master_link_down_time = 0;
            for line in info.split("\r\n") {
                if is_master_addr
                    && line.starts_with("slave")
                    && line[5..].starts_with(|c: char| c.is_ascii_digit())
                    && let Some(ip) = line
                        .split(['=', ','])
                        .skip_while(|w| !w.ends_with("ip"))
                        .nth(1)
                {
                    new_replicas.push(ip.to_string());
                }
                if let Some(v) = line.strip_prefix("master_link_down_since_seconds:") {
                    inst.master_link_down_time = v.parse::<i64>().unwrap_or(0) * 1000;
                }
                if line == "role:master" {
                    role = Role::Master;
                } else if line == "role:slave" {
                    role = Role::Slave;
                }
                if role == Role::Slave {
                    if let Some(host) = line.strip_prefix("master_host:")
                        && inst.slave_master_host.as_deref() != Some(host)
                    {
                        inst.slave_master_host = Some(host.to_string());
                        inst.slave_conf_change_time = now;
                    }
                    if let Some(status) = line.strip_prefix("master_link_status:") {
                        inst.slave_master_link_up = status == "up";
                    }
                    if let Some(off) = line.strip_prefix("slave_repl_offset:") {
                        inst.slave_repl_offset = off.parse().unwrap_or(0);
                    }
                }
            }
            inst.info_refresh = now;
            if role != inst.role_reported {
                inst.role_reported_time = now;
                inst.role_reported = role;
                if role == Role::Slave {
                    inst.slave_conf_change_time = now;
                }
            }
        }
        for ip in new_replicas {
            let name = self.ip_name(&ip);
            let master = &mut self.masters[m];
            if name != master.addr && !master.replicas.contains_key(&name) {
                master.replicas.insert(name.clone(), Inst::new(now));
                let group = master.name.clone();
                self.event("+slave", &group, name);
                self.flush_config();
            }
        }
        if tilt {
            return;
        }
        if is_master_addr {
            // A master claiming to be a replica: nothing to do, it will go SDOWN eventually.
            return;
        }
        let master_addr = self.masters[m].addr.clone();
        let group = self.masters[m].name.clone();
        let master_sane = self.master_looks_sane(m);
        let failover_timeout = self.failover_timeout;
        let inst = self.masters[m].replicas[node].clone();
        if role == Role::Master {
            let in_promotion =
                inst.promoted && self.masters[m].failover_state == FailoverState::WaitPromotion;
            if in_promotion {
                let master = &mut self.masters[m];
                master.config_epoch = master.failover_epoch;
                master.failover_state = FailoverState::ReconfSlaves;
                master.failover_state_change_time = now;
                self.flush_config();
                self.event("+promoted-slave", &group, node.to_string());
                self.event("+failover-state-reconf-slaves", &group, String::new());
                // sentinelForceHelloUpdateForMaster: tell the others at once.
                for peer in self.masters[m].peers.values_mut() {
                    peer.last_pub_time = 0;
                }
            } else {
                let wait_time = PUBLISH_PERIOD * 4;
                if !inst.promoted
                    && master_sane
                    && inst.no_down_for(now, wait_time)
                    && now - inst.role_reported_time > wait_time
                    && self.send_slaveof(node, Some(&master_addr))
                {
                    self.event("+convert-to-slave", &group, node.to_string());
                }
            }
        }
        let replicating_elsewhere = role == Role::Slave
            && inst
                .slave_master_host
                .as_deref()
                .map(|h| self.ip_name(h))
                .as_deref()
                != Some(master_addr.as_str());
        if replicating_elsewhere
            && master_sane
            && inst.no_down_for(now, failover_timeout)
            && now - inst.slave_conf_change_time > failover_timeout
            && self.send_slaveof(node, Some(&master_addr))
        {
            self.event("+fix-slave-config", &group, node.to_string());
        }
        if role == Role::Slave && (inst.reconf_sent || inst.reconf_inprog) {
            let promoted = self.masters[m].promoted.clone();
            let host_is_promoted = inst
                .slave_master_host
                .as_deref()
                .map(|h| self.ip_name(h))
                .is_some_and(|h| Some(&h) == promoted.as_ref());
            let r = self.masters[m].replicas.get_mut(node).expect("still there");
            if r.reconf_sent && host_is_promoted {
                r.reconf_sent = false;
                r.reconf_inprog = true;
                self.event("+slave-reconf-inprog", &group, node.to_string());
            }
            let r = self.masters[m].replicas.get_mut(node).expect("still there");
            if r.reconf_inprog && r.slave_master_link_up {
                r.reconf_inprog = false;
                r.reconf_done = true;
                self.event("+slave-reconf-done", &group, node.to_string());
            }
        }
    }

    /// `sentinelMasterLooksSane`.
    fn master_looks_sane(&self, m: usize) -> bool {
        let master = &self.masters[m];
        master.inst.role_reported == Role::Master
            && !master.inst.s_down
            && !master.o_down
            && self.now() - master.inst.info_refresh < INFO_PERIOD * 2
    }

    /// `sentinelSendSlaveOf`: REPLICAOF, CONFIG REWRITE, CLIENT KILL (pipelined; MULTI/EXEC
    /// is not simulated — the node runs the pipeline without interleaving anyway).
    fn send_slaveof(&mut self, node: &str, master: Option<&str>) -> bool {
        let (host, port) = match master {
            None => ("NO".to_string(), "ONE".to_string()),
            Some(m) => (node_ip(m).to_string(), REDIS_PORT.to_string()),
        };
        if self.link(node).disconnected() {
            return false;
        }
        self.send_words(node, &["REPLICAOF", &host, &port], Callback::Discard)
            && self.send_words(node, &["CONFIG", "REWRITE"], Callback::Discard)
            && self.send_words(
                node,
                &["CLIENT", "KILL", "TYPE", "normal"],
                Callback::Discard,
            )
            && self.send_words(
                node,
                &["CLIENT", "KILL", "TYPE", "pubsub"],
                Callback::Discard,
            )
    }

    // ------------------------------------------------------------------ timer

    /// `sentinelCheckTiltCondition`.
    fn check_tilt(&mut self) {
        let now = self.now();
        let delta = now - self.previous_time;
        if !(0..=TILT_TRIGGER).contains(&delta) {
            if !self.tilt {
                self.event(
                    "+tilt",
                    "",
                    format!("#tilt mode entered (timer delta {delta} ms)"),
                );
            }
            self.tilt = true;
            self.tilt_start_time = now;
        }
        self.previous_time = now;
    }

    fn reconnect(&mut self, node: &str, shared: &Shared) {
        let now = self.now();
        let link = self.link(node);
        if !link.disconnected() || link.connecting || now - link.last_reconn_time < PING_PERIOD {
            return;
        }
        link.last_reconn_time = now;
        link.connecting = true;
        link.generation += 1;
        let generation = link.generation;
        madsim::task::spawn_local(connect_link(shared.clone(), node.to_string(), generation));
    }

    /// `sentinelSendPeriodicCommands`.
    fn periodic(&mut self, m: usize, node: &str, kind: Kind) {
        let now = self.now();
        let master = &self.masters[m];
        let (info_refresh, replica_needs_fast_info) = match kind {
            Kind::Master => (master.inst.info_refresh, false),
            Kind::Replica => {
                let r = &master.replicas[node];
                (
                    r.info_refresh,
                    master.o_down
                        || master.failover_state != FailoverState::None
                        || r.master_link_down_time != 0,
                )
            }
            Kind::Sentinel => (0, false),
        };
        let last_pub_time = master.peers.get(node).map_or(0, |p| p.last_pub_time);
        let hello = format!(
            "{},{},{},{},{},{},{},{}",
            node_ip(&self.name),
            SENTINEL_PORT,
            self.name,
            self.current_epoch,
            master.name,
            node_ip(&self.current_master_addr(m)),
            REDIS_PORT,
            master.config_epoch
        );
        let down_after = self.down_after;
        let link = self.link(node);
        if link.disconnected() || link.pending.len() >= MAX_PENDING_COMMANDS {
            return;
        }
        let info_period = if replica_needs_fast_info {
            1000
        } else {
            INFO_PERIOD
        };
        let ping_period = down_after.min(PING_PERIOD);
        let send_ping =
            now - link.last_pong_time > ping_period && now - link.last_ping_time > ping_period / 2;
        if kind != Kind::Sentinel && (info_refresh == 0 || now - info_refresh > info_period) {
            self.send_words(node, &["INFO", "replication"], Callback::Info);
        }
        if send_ping && self.send_words(node, &["PING"], Callback::Ping) {
            let link = self.link(node);
            link.last_ping_time = now;
            if link.act_ping_time == 0 {
                link.act_ping_time = now;
            }
        }
        if kind == Kind::Sentinel
            && now - last_pub_time > PUBLISH_PERIOD
            && self.send_words(node, &["PUBLISH", HELLO_CHANNEL, &hello], Callback::Discard)
            && let Some(peer) = self.masters[m].peers.get_mut(node)
        {
            peer.last_pub_time = now;
        }
    }

    /// `sentinelCheckSubjectivelyDown`.
    fn check_sdown(&mut self, m: usize, node: &str, kind: Kind) {
        let now = self.now();
        let down_after = self.down_after;
        let group = self.masters[m].name.clone();
        let link = self.link(node);
        let elapsed = if link.act_ping_time != 0 {
            now - link.act_ping_time
        } else if link.disconnected() {
            now - link.last_avail_time
        } else {
            0
        };
        if !link.disconnected()
            && now - link.cc_conn_time > MIN_LINK_RECONNECT_PERIOD
            && link.act_ping_time != 0
            && now - link.act_ping_time > down_after / 2
            && now - link.last_pong_time > down_after / 2
        {
            self.close_link(node);
        }
        if kind == Kind::Sentinel {
            return;
        }
        let master = &mut self.masters[m];
        let inst = match kind {
            Kind::Master => &mut master.inst,
            _ => master.replicas.get_mut(node).expect("known replica"),
        };
        let misreported = kind == Kind::Master
            && inst.role_reported == Role::Slave
            && now - inst.role_reported_time > down_after + INFO_PERIOD * 2;
        if elapsed > down_after || misreported {
            if !inst.s_down {
                inst.s_down = true;
                inst.s_down_since = now;
                self.event("+sdown", &group, node.to_string());
            }
        } else if inst.s_down {
            inst.s_down = false;
            self.event("-sdown", &group, node.to_string());
        }
    }

    /// `sentinelCheckObjectivelyDown`.
    fn check_odown(&mut self, m: usize) {
        let now = self.now();
        let quorum = self.quorum;
        let master = &mut self.masters[m];
        let mut votes = 0;
        if master.inst.s_down {
            votes = 1 + master.peers.values().filter(|p| p.master_down).count();
        }
        let odown = master.inst.s_down && votes >= quorum;
        let (group, addr) = (master.name.clone(), master.addr.clone());
        if odown && !master.o_down {
            master.o_down = true;
            let _ = now;
            self.event("+odown", &group, format!("{addr} #quorum {votes}/{quorum}"));
        } else if !odown && master.o_down {
            master.o_down = false;
            self.event("-odown", &group, addr);
        }
    }

    /// `sentinelStartFailoverIfNeeded` + `sentinelStartFailover`.
    fn start_failover_if_needed(&mut self, m: usize) -> bool {
        let now = self.now();
        let master = &self.masters[m];
        if !master.o_down || master.failover_state != FailoverState::None {
            return false;
        }
        if now - master.failover_start_time < self.failover_timeout * 2 {
            return false;
        }
        self.start_failover(m);
        true
    }

    fn start_failover(&mut self, m: usize) {
        let now = self.now();
        self.current_epoch += 1;
        let desync = self.rng.gen_range(0..MAX_DESYNC);
        let epoch = self.current_epoch;
        let master = &mut self.masters[m];
        master.failover_state = FailoverState::WaitStart;
        master.failover_epoch = epoch;
        master.failover_start_time = now + desync;
        master.failover_state_change_time = now;
        let group = master.name.clone();
        self.flush_config();
        self.event("+new-epoch", &group, epoch.to_string());
        self.event("+try-failover", &group, String::new());
    }

    /// `sentinelAskMasterStateToOtherSentinels`.
    fn ask_others(&mut self, m: usize, forced: bool) {
        let now = self.now();
        let master = &mut self.masters[m];
        let addr = node_ip(&master.addr).to_string();
        let runid = if master.failover_state > FailoverState::None {
            self.name.clone()
        } else {
            "*".to_string()
        };
        let s_down = master.inst.s_down;
        let group = master.name.clone();
        let mut ask = Vec::new();
        for (name, peer) in master.peers.iter_mut() {
            if now - peer.last_master_down_reply_time > ASK_PERIOD * 5 {
                peer.master_down = false;
                peer.leader = None;
            }
            if !s_down {
                continue;
            }
            if !forced && now - peer.last_master_down_reply_time < ASK_PERIOD {
                continue;
            }
            ask.push(name.clone());
        }
        let epoch = self.current_epoch.to_string();
        let port = REDIS_PORT.to_string();
        for peer in ask {
            self.send_words(
                &peer,
                &[
                    "SENTINEL",
                    "is-master-down-by-addr",
                    &addr,
                    &port,
                    &epoch,
                    &runid,
                ],
                Callback::IsMasterDown {
                    master: group.clone(),
                },
            );
        }
    }

    /// `sentinelVoteLeader`.
    fn vote_leader(&mut self, m: usize, req_epoch: u64, req_runid: &str) -> (Option<String>, u64) {
        let now = self.now();
        let group = self.masters[m].name.clone();
        if req_epoch > self.current_epoch {
            self.current_epoch = req_epoch;
            self.flush_config();
            self.event("+new-epoch", &group, req_epoch.to_string());
        }
        let current = self.current_epoch;
        let desync = self.rng.gen_range(0..MAX_DESYNC);
        let myid = self.name.clone();
        let master = &mut self.masters[m];
        if master.leader_epoch < req_epoch && current <= req_epoch {
            master.leader = Some(req_runid.to_string());
            master.leader_epoch = current;
            if req_runid != myid {
                master.failover_start_time = now + desync;
            }
            self.flush_config();
            self.event("+vote-for-leader", &group, format!("{req_runid} {current}"));
        }
        let master = &self.masters[m];
        (master.leader.clone(), master.leader_epoch)
    }

    /// `sentinelGetLeader`.
    fn get_leader(&mut self, m: usize, epoch: u64) -> Option<String> {
        let current = self.current_epoch;
        let master = &self.masters[m];
        let voters = master.peers.len() + 1;
        let mut counters: BTreeMap<String, usize> = BTreeMap::new();
        for peer in master.peers.values() {
            if let Some(leader) = &peer.leader
                && peer.leader_epoch == current
            {
                *counters.entry(leader.clone()).or_default() += 1;
            }
        }
        let mut winner: Option<String> = None;
        let mut max_votes = 0;
        for (runid, votes) in &counters {
            if *votes > max_votes {
                max_votes = *votes;
                winner = Some(runid.clone());
            }
        }
        let candidate = winner.clone().unwrap_or_else(|| self.name.clone());
        let (myvote, leader_epoch) = self.vote_leader(m, epoch, &candidate);
        if let Some(myvote) = myvote
            && leader_epoch == epoch
        {
            let votes = counters.entry(myvote.clone()).or_default();
            *votes += 1;
            if *votes > max_votes {
                max_votes = *votes;
                winner = Some(myvote);
            }
        }
        let voters_quorum = voters / 2 + 1;
        winner.filter(|_| max_votes >= voters_quorum && max_votes >= self.quorum)
    }

    /// `sentinelSelectSlave`.
    fn select_slave(&mut self, m: usize) -> Option<String> {
        let now = self.now();
        let master = &self.masters[m];
        let mut max_master_down_time = 0;
        if master.inst.s_down {
            max_master_down_time += now - master.inst.s_down_since;
        }
        max_master_down_time += self.down_after * 10;
        let info_validity = if master.inst.s_down {
            PING_PERIOD * 5
        } else {
            INFO_PERIOD * 3
        };
        let mut candidates: Vec<(i64, String)> = Vec::new();
        for (name, r) in &master.replicas {
            let Some(link) = self.links.get(name) else {
                continue;
            };
            if r.s_down || link.disconnected() || now - link.last_avail_time > PING_PERIOD * 5 {
                continue;
            }
            if now - r.info_refresh > info_validity {
                continue;
            }
            if r.master_link_down_time > max_master_down_time {
                continue;
            }
            candidates.push((r.slave_repl_offset, name.clone()));
        }
        // Same priority for every replica: the best offset, then the smaller run id (name).
        candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        candidates.into_iter().next().map(|(_, name)| name)
    }

    fn abort_failover(&mut self, m: usize, why: &str) {
        let now = self.now();
        let master = &mut self.masters[m];
        master.failover_state = FailoverState::None;
        master.force_failover = false;
        master.failover_state_change_time = now;
        if let Some(p) = master.promoted.take()
            && let Some(r) = master.replicas.get_mut(&p)
        {
            r.promoted = false;
        }
        let group = master.name.clone();
        self.event(why, &group, String::new());
    }

    /// `sentinelFailoverStateMachine`.
    fn failover_state_machine(&mut self, m: usize) {
        let now = self.now();
        let group = self.masters[m].name.clone();
        match self.masters[m].failover_state {
            FailoverState::None | FailoverState::UpdateConfig => {}
            FailoverState::WaitStart => {
                let epoch = self.masters[m].failover_epoch;
                let leader = self.get_leader(m, epoch);
                let is_leader = leader.as_deref() == Some(self.name.as_str());
                if !is_leader && !self.masters[m].force_failover {
                    let timeout = ELECTION_TIMEOUT.min(self.failover_timeout);
                    if now - self.masters[m].failover_start_time > timeout {
                        self.abort_failover(m, "-failover-abort-not-elected");
                    }
                    return;
                }
                self.event("+elected-leader", &group, format!("epoch {epoch}"));
                let master = &mut self.masters[m];
                master.failover_state = FailoverState::SelectSlave;
                master.failover_state_change_time = now;
            }
            FailoverState::SelectSlave => match self.select_slave(m) {
                None => self.abort_failover(m, "-failover-abort-no-good-slave"),
                Some(slave) => {
                    self.event("+selected-slave", &group, slave.clone());
                    let master = &mut self.masters[m];
                    if let Some(r) = master.replicas.get_mut(&slave) {
                        r.promoted = true;
                    }
                    master.promoted = Some(slave);
                    master.failover_state = FailoverState::SendSlaveofNoOne;
                    master.failover_state_change_time = now;
                }
            },
            FailoverState::SendSlaveofNoOne => {
                let promoted = self.masters[m].promoted.clone().expect("selected");
                if self.link(&promoted).disconnected() {
                    if now - self.masters[m].failover_state_change_time > self.failover_timeout {
                        self.abort_failover(m, "-failover-abort-slave-timeout");
                    }
                    return;
                }
                if self.send_slaveof(&promoted, None) {
                    self.event("+failover-state-wait-promotion", &group, promoted);
                    let master = &mut self.masters[m];
                    master.failover_state = FailoverState::WaitPromotion;
                    master.failover_state_change_time = now;
                }
            }
            FailoverState::WaitPromotion => {
                if now - self.masters[m].failover_state_change_time > self.failover_timeout {
                    self.abort_failover(m, "-failover-abort-slave-timeout");
                }
            }
            FailoverState::ReconfSlaves => self.reconf_next_slave(m),
        }
    }

    /// `sentinelFailoverReconfNextSlave` + `sentinelFailoverDetectEnd`.
    fn reconf_next_slave(&mut self, m: usize) {
        let now = self.now();
        let group = self.masters[m].name.clone();
        let promoted = self.masters[m].promoted.clone().expect("promoted");
        let mut in_progress = self.masters[m]
            .replicas
            .values()
            .filter(|r| r.reconf_sent || r.reconf_inprog)
            .count();
        let names: Vec<String> = self.masters[m].replicas.keys().cloned().collect();
        for name in names {
            if in_progress >= PARALLEL_SYNCS {
                break;
            }
            let r = self.masters[m].replicas.get_mut(&name).expect("listed");
            if r.promoted || r.reconf_done {
                continue;
            }
            if r.reconf_sent && now - r.slave_reconf_sent_time > SLAVE_RECONF_TIMEOUT {
                r.reconf_sent = false;
                r.reconf_done = true;
                self.event("-slave-reconf-sent-timeout", &group, name.clone());
            }
            let r = &self.masters[m].replicas[&name];
            if r.reconf_sent || r.reconf_inprog || r.reconf_done {
                continue;
            }
            if self.link(&name).disconnected() {
                continue;
            }
            if self.send_slaveof(&name, Some(&promoted)) {
                let r = self.masters[m].replicas.get_mut(&name).expect("listed");
                r.reconf_sent = true;
                r.slave_reconf_sent_time = now;
                self.event("+slave-reconf-sent", &group, name.clone());
                in_progress += 1;
            }
        }
        // sentinelFailoverDetectEnd
        let master = &self.masters[m];
        if master.replicas.get(&promoted).is_none_or(|p| p.s_down) {
            return;
        }
        let not_reconfigured = master
            .replicas
            .values()
            .filter(|r| !(r.promoted || r.reconf_done || r.s_down))
            .count();
        let timeout = now - master.failover_state_change_time > self.failover_timeout;
        if not_reconfigured == 0 || timeout {
            if timeout {
                self.event("+failover-end-for-timeout", &group, String::new());
            }
            self.event("+failover-end", &group, String::new());
            let master = &mut self.masters[m];
            master.failover_state = FailoverState::UpdateConfig;
            master.failover_state_change_time = now;
        }
    }

    /// `sentinelResetMasterAndChangeAddress`.
    fn switch_master(&mut self, m: usize, new_addr: &str) {
        let now = self.now();
        let master = &mut self.masters[m];
        let old = master.addr.clone();
        let mut replicas: Vec<String> = master
            .replicas
            .keys()
            .filter(|r| *r != new_addr)
            .cloned()
            .collect();
        if old != new_addr {
            replicas.push(old.clone());
        }
        master.addr = new_addr.to_string();
        master.replicas = replicas.into_iter().map(|r| (r, Inst::new(now))).collect();
        master.inst = Inst::new(now);
        master.o_down = false;
        master.failover_state = FailoverState::None;
        master.force_failover = false;
        master.failover_start_time = 0;
        master.failover_state_change_time = 0;
        master.promoted = None;
        master.leader = None;
        for peer in master.peers.values_mut() {
            peer.master_down = false;
            peer.leader = None;
        }
        let group = master.name.clone();
        self.flush_config();
        self.event(
            "+switch-master",
            &group,
            format!(
                "{group} {} {} {} {}",
                node_ip(&old),
                REDIS_PORT,
                node_ip(new_addr),
                REDIS_PORT
            ),
        );
    }

    /// One timer call (`sentinelTimer`).
    fn timer(&mut self, shared: &Shared) {
        self.check_tilt();
        for m in 0..self.masters.len() {
            let master_addr = self.masters[m].addr.clone();
            self.handle_instance(m, &master_addr, Kind::Master, shared);
            let replicas: Vec<String> = self.masters[m].replicas.keys().cloned().collect();
            for r in replicas {
                self.handle_instance(m, &r, Kind::Replica, shared);
            }
            let peers: Vec<String> = self.masters[m].peers.keys().cloned().collect();
            for p in peers {
                self.handle_instance(m, &p, Kind::Sentinel, shared);
            }
            if self.masters[m].failover_state == FailoverState::UpdateConfig {
                let promoted = self.masters[m].promoted.clone().expect("promoted");
                self.switch_master(m, &promoted);
            }
        }
    }

    /// `sentinelHandleRedisInstance`.
    fn handle_instance(&mut self, m: usize, node: &str, kind: Kind, shared: &Shared) {
        self.reconnect(node, shared);
        self.periodic(m, node, kind);
        if self.tilt {
            if self.now() - self.tilt_start_time < TILT_PERIOD {
                return;
            }
            self.tilt = false;
            self.event("-tilt", "", "#tilt mode exited".into());
        }
        self.check_sdown(m, node, kind);
        if kind == Kind::Master {
            self.check_odown(m);
            if self.start_failover_if_needed(m) {
                self.ask_others(m, true);
            }
            self.failover_state_machine(m);
            self.ask_others(m, false);
        }
    }

    // ------------------------------------------------------------------ serving

    /// `sentinelProcessHelloMessage`.
    fn process_hello(&mut self, hello: &str) {
        let parts: Vec<&str> = hello.split(',').collect();
        if parts.len() != 8 {
            return;
        }
        let (Ok(epoch), Ok(master_epoch)) = (parts[3].parse::<u64>(), parts[7].parse::<u64>())
        else {
            return;
        };
        let Some(m) = self.master_index(parts[4]) else {
            return;
        };
        let group = parts[4].to_string();
        if epoch > self.current_epoch {
            self.current_epoch = epoch;
            self.flush_config();
            self.event("+new-epoch", &group, epoch.to_string());
        }
        let addr = self.ip_name(parts[5]);
        if self.masters[m].config_epoch < master_epoch {
            self.masters[m].config_epoch = master_epoch;
            if self.masters[m].addr != addr {
                self.event(
                    "+config-update-from",
                    &group,
                    format!("sentinel {}", parts[2]),
                );
                self.switch_master(m, &addr);
            }
            self.flush_config();
        }
    }

    fn serve(&mut self, argv: &[Vec<u8>]) -> Reply {
        let word = |i: usize| {
            argv.get(i)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .unwrap_or_default()
        };
        match word(0).to_ascii_lowercase().as_str() {
            "ping" => Reply::Status("PONG".into()),
            "publish" if word(1) == HELLO_CHANNEL => {
                self.process_hello(&word(2));
                Reply::Integer(1)
            }
            "sentinel" => match word(1).to_ascii_lowercase().as_str() {
                "get-master-addr-by-name" => match self.master_index(&word(2)) {
                    None => Reply::Nil,
                    Some(m) => Reply::Array(vec![
                        Reply::bulk(node_ip(&self.current_master_addr(m)).to_string()),
                        Reply::bulk(REDIS_PORT.to_string()),
                    ]),
                },
                "is-master-down-by-addr" if argv.len() == 6 => {
                    let addr = self.ip_name(&word(2));
                    let req_epoch: u64 = word(4).parse().unwrap_or(0);
                    let runid = word(5);
                    let Some(m) = self.masters.iter().position(|m| m.addr == addr) else {
                        return Reply::Array(vec![
                            Reply::Integer(0),
                            Reply::bulk("*"),
                            Reply::Integer(0),
                        ]);
                    };
                    let isdown = !self.tilt && self.masters[m].inst.s_down;
                    let (leader, epoch) = if runid != "*" {
                        self.vote_leader(m, req_epoch, &runid)
                    } else {
                        (None, 0)
                    };
                    Reply::Array(vec![
                        Reply::Integer(i64::from(isdown)),
                        Reply::bulk(leader.unwrap_or_else(|| "*".into())),
                        Reply::Integer(epoch as i64),
                    ])
                }
                "failover" => match self.master_index(&word(2)) {
                    None => Reply::error("ERR No such master with that name"),
                    Some(m) if self.masters[m].failover_state != FailoverState::None => {
                        Reply::error("INPROG Failover already in progress")
                    }
                    Some(m) => {
                        if self.select_slave(m).is_none() {
                            return Reply::error("NOGOODSLAVE No suitable replica to promote");
                        }
                        let group = self.masters[m].name.clone();
                        self.event("+failover-requested", &group, "SENTINEL FAILOVER".into());
                        self.start_failover(m);
                        self.masters[m].force_failover = true;
                        Reply::ok()
                    }
                },
                _ => Reply::error("ERR Unknown sentinel subcommand"),
            },
            other => Reply::error(format!("ERR unknown command '{other}'")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Master,
    Replica,
    Sentinel,
}

/// Opens an instance link; on success starts reading its replies.
async fn connect_link(shared: Shared, node: String, generation: u64) {
    let world = shared.borrow().world.clone();
    let me = shared.borrow().name.clone();
    let port = if node.starts_with("sentinel-") {
        SENTINEL_PORT
    } else {
        REDIS_PORT
    };
    let addr = SocketAddr::new(node_ip(&node), port);
    let result = madsim::time::timeout(
        Duration::from_secs(5),
        NetConn::connect(&world, &me, &node, addr),
    )
    .await;
    let mut state = shared.borrow_mut();
    let now = state.now();
    let link = state.link(&node);
    if link.generation != generation {
        return;
    }
    link.connecting = false;
    let Ok(Ok(conn)) = result else {
        return;
    };
    let (reader, writer) = conn.split();
    link.writer = Some(writer);
    link.cc_conn_time = now;
    link.pending.clear();
    // sentinelReconnectInstance: send a PING as soon as the link is up.
    if state.send_words(&node, &["PING"], Callback::Ping) {
        let link = state.link(&node);
        link.last_ping_time = now;
        if link.act_ping_time == 0 {
            link.act_ping_time = now;
        }
    }
    drop(state);
    madsim::task::spawn_local(read_replies(shared, node, generation, reader));
}

async fn read_replies(shared: Shared, node: String, generation: u64, mut reader: NetReader) {
    let mut buf = BytesMut::with_capacity(1024);
    loop {
        while let Ok(Some((reply, used))) = Reply::decode(&buf) {
            let _ = buf.split_to(used);
            let mut state = shared.borrow_mut();
            let link = state.link(&node);
            if link.generation != generation {
                return;
            }
            let callback = link.pending.pop_front().unwrap_or(Callback::Discard);
            state.on_reply(&node, callback, reply);
        }
        let read = reader.read_buf(&mut buf).await;
        if !matches!(read, Ok(n) if n > 0) {
            let mut state = shared.borrow_mut();
            if state.link(&node).generation == generation {
                state.close_link(&node);
            }
            return;
        }
    }
}

async fn serve_connection(shared: Shared, conn: NetConn) {
    let (mut reader, writer) = conn.split();
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::with_capacity(512);
    loop {
        match reader.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut out = Vec::new();
        while let Ok(Some(argv)) = parser.parse(&mut buf) {
            shared.borrow_mut().serve(&argv).encode_into(&mut out);
        }
        if writer.send(out).is_err() {
            return;
        }
    }
}

/// A Sentinel process: loads sentinel.conf, listens on 26379, runs its timer.
pub async fn sentinel_node(world: Arc<World>, name: String) {
    let scenario = world.scenario.clone();
    let start = world.started(&name);
    let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(world.seed, &format!("{name}/{start}")));
    let conf = world.with_disk(&name, |d| d.sentinel.clone());
    let now = world.wall_ms(&name);
    let sentinels = scenario.sentinel_names();
    let mut masters = Vec::new();
    for group in scenario.master_names() {
        let saved = conf.as_ref().and_then(|c| c.masters.get(&group)).cloned();
        let saved = saved.unwrap_or_else(|| MasterConf {
            addr: group.clone(),
            replicas: scenario.replica_names(&group),
            ..MasterConf::default()
        });
        masters.push(Master {
            name: group.clone(),
            addr: saved.addr.clone(),
            config_epoch: saved.config_epoch,
            inst: Inst::new(now),
            o_down: false,
            replicas: saved
                .replicas
                .iter()
                .filter(|r| **r != saved.addr)
                .map(|r| (r.clone(), Inst::new(now)))
                .collect(),
            peers: sentinels
                .iter()
                .filter(|s| **s != name)
                .map(|s| (s.clone(), Peer::default()))
                .collect(),
            leader: saved.leader,
            leader_epoch: saved.leader_epoch,
            failover_state: FailoverState::None,
            force_failover: false,
            failover_epoch: 0,
            failover_start_time: 0,
            failover_state_change_time: 0,
            promoted: None,
        });
    }
    let timer_seed: u64 = rng.r#gen();
    let shared: Shared = Rc::new(RefCell::new(State {
        current_epoch: conf.as_ref().map_or(0, |c| c.current_epoch),
        tilt: false,
        tilt_start_time: 0,
        previous_time: now,
        masters,
        links: BTreeMap::new(),
        down_after: scenario.topology.sentinel_down_after_ms as i64,
        failover_timeout: scenario.topology.sentinel_failover_timeout_ms as i64,
        quorum: sentinels.len() / 2 + 1,
        rng,
        world: world.clone(),
        name: name.clone(),
    }));
    shared.borrow().flush_config();
    let listener = TcpListener::bind(("0.0.0.0", SENTINEL_PORT))
        .await
        .expect("the Sentinel port is free");
    madsim::task::spawn_local(timer(shared.clone(), timer_seed));
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let client = world.name_of(peer.ip());
        let conn = NetConn::new(&world, &name, &client, stream);
        madsim::task::spawn_local(serve_connection(shared.clone(), conn));
    }
}

/// The timer: `server.hz` is redrawn in [10, 20) after every call so that Sentinels started
/// together do not stay in lockstep (and split votes forever).
async fn timer(shared: Shared, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    loop {
        let hz = 10 + rng.gen_range(0..10u64);
        let (world, name) = {
            let s = shared.borrow();
            (s.world.clone(), s.name.clone())
        };
        let period = world.true_duration_us(&name, 1000 / hz);
        madsim::time::sleep(Duration::from_micros(period)).await;
        let shared2 = shared.clone();
        shared.borrow_mut().timer(&shared2);
    }
}

/// The `failover` fault: `SENTINEL FAILOVER <master>` to the first Sentinel that answers.
pub async fn request_failover(world: Arc<World>, master: String) {
    for sentinel in world.scenario.sentinel_names() {
        let addr = SocketAddr::new(node_ip(&sentinel), SENTINEL_PORT);
        let attempt = async {
            let mut conn = RespConn::connect(&world, "nemesis", &sentinel, addr).await?;
            conn.call(&[
                b"SENTINEL".to_vec(),
                b"FAILOVER".to_vec(),
                master.as_bytes().to_vec(),
            ])
            .await
        };
        if let Ok(Ok(reply)) = madsim::time::timeout(Duration::from_secs(1), attempt).await {
            world.record(
                "nemesis",
                EventKind::Sentinel {
                    what: "failover-requested".into(),
                    master: master.clone(),
                    detail: format!("{sentinel}: {}", model::history::render_reply(&reply)),
                },
            );
            return;
        }
    }
}
