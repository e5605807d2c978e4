//! Redis Sentinel (`sentinel.c`, Redis 7.0), one process per `sentinel-N` node, monitoring every
//! master group `redis-N` with quorum S/2+1.
//!
//! This module is the process: its state (a `Master` per group, an `Inst` per instance, a
//! `Link` per instance), the timer (`sentinelTimer`, `sentinelHandleRedisInstance`) and the
//! commands it answers. Sentinel's phases are the submodules:
//! - `links`: the command link to every instance, and the replies' callbacks;
//! - `monitoring` (always, even in TILT): PING, INFO and hello; SDOWN and ODOWN;
//! - `election`: epochs, votes, the leader of a failover;
//! - `failover`: promotion, reconfiguration of the replicas, the address switch, and the
//!   conversion of a master that comes back;
//! - `config`: sentinel.conf — epochs, votes, master addresses, known replicas — which
//!   survives a crash of the Sentinel.
//!
//! TILT (`sentinelCheckTiltCondition`, checked by the timer here): the timer measures
//! wall-clock time between its calls; a negative delta or one over 2 s (a clock jump, or the
//! process paused) puts the Sentinel in TILT for 30 s: it keeps monitoring but does not act (no
//! SDOWN/ODOWN, no failover, no reconfiguration) and answers `is-master-down-by-addr` with 0.
//!
//! Every time is this node's wall clock (`mstime()`), so a jumping or drifting clock misleads it
//! exactly as it would the real process.

mod config;
mod election;
mod failover;
mod introspection;
mod links;
mod monitoring;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use foldhash::fast::FixedState;
use model::history::EventKind;
use model::marks::{Mark, mark};
use model::redis::{Protocol, Reply, RequestParser};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::nodes::{REDIS_PORT, SENTINEL_PORT};
use crate::world::net::socket::{NetConn, NetListener, NetWriter};
use crate::world::procs::node_ip;
use crate::world::{World, stream_seed};

const PING_PERIOD: i64 = 1000;
const INFO_PERIOD: i64 = 10_000;
const PUBLISH_PERIOD: i64 = 2000;
const TILT_TRIGGER: i64 = 2000;
const TILT_PERIOD: i64 = PING_PERIOD * 30;
const HELLO_CHANNEL: &str = "__sentinel__:hello";

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
    /// By instance name, hashed with a fixed seed: looked up several times per instance per
    /// tick (a `BTreeMap`'s string comparisons were 17 % of a failover run, issue 32) and never
    /// iterated, so the order of its entries reaches nothing.
    links: HashMap<String, Link, FixedState>,
    down_after: i64,
    failover_timeout: i64,
    quorum: usize,
    rng: ChaCha8Rng,
}

type Shared = Rc<RefCell<State>>;

impl State {
    fn now(&self) -> i64 {
        self.world.time.wall_ms(&self.name)
    }

    fn event(&self, what: &str, master: &str, detail: String) {
        if let Some(m) = sentinel_mark(what) {
            mark(m);
        }
        self.world.record(
            &self.name,
            EventKind::Sentinel {
                what: what.into(),
                master: master.into(),
                detail,
            },
        );
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
            .map(|ip| self.world.procs.name_of(ip))
            .unwrap_or_else(|_| ip.to_string())
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
                    self.is_master_down_by_addr(&word(2), word(4).parse().unwrap_or(0), &word(5))
                }
                "failover" => self.failover_command(&word(2)),
                other => self.introspect(other, argv).unwrap_or_else(|| {
                    Reply::error(format!(
                        "ERR unknown subcommand '{}'. Try SENTINEL HELP.",
                        word(1)
                    ))
                }),
            },
            "role" => self.role(),
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

async fn serve_connection(shared: Shared, conn: NetConn) {
    let (mut reader, writer) = conn.split();
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::with_capacity(512);
    let mut protocol = Protocol::Resp2;
    loop {
        match reader.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut out = Vec::new();
        while let Ok(Some(argv)) = parser.parse(&mut buf) {
            let reply = if argv[0].eq_ignore_ascii_case(b"hello") {
                let (reply, now_speaking) = State::hello(&argv, protocol);
                protocol = now_speaking;
                reply.encode_for(protocol)
            } else {
                shared.borrow_mut().serve(&argv).encode_for(protocol)
            };
            out.extend_from_slice(&reply);
        }
        if writer.send(out).is_err() {
            return;
        }
    }
}

/// A Sentinel process: loads sentinel.conf, listens on 26379, runs its timer.
pub async fn sentinel_node(world: Arc<World>, name: String) {
    let scenario = world.scenario.clone();
    let start = world.procs.started(&name);
    let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(world.seed, &format!("{name}/{start}")));
    let now = world.time.wall_ms(&name);
    let sentinels = scenario.sentinel_names();
    let (current_epoch, masters) = config::load(&world, &name, now);
    let timer_seed: u64 = rng.r#gen();
    let shared: Shared = Rc::new(RefCell::new(State {
        current_epoch,
        tilt: false,
        tilt_start_time: 0,
        previous_time: now,
        masters,
        links: HashMap::with_hasher(FixedState::with_seed(0)),
        down_after: scenario.topology.sentinel_down_after_ms as i64,
        failover_timeout: scenario.topology.sentinel_failover_timeout_ms as i64,
        quorum: sentinels.len() / 2 + 1,
        rng,
        world: world.clone(),
        name: name.clone(),
    }));
    shared.borrow().flush_config();
    let listener = NetListener::bind(&world, &name, SENTINEL_PORT);
    madsim::task::spawn_local(timer(shared.clone(), timer_seed));
    loop {
        let (conn, _) = listener.accept().await;
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
        let period = world.time.true_duration_us(&name, 1000 / hz);
        madsim::time::sleep(Duration::from_micros(period)).await;
        let shared2 = shared.clone();
        shared.borrow_mut().timer(&shared2);
    }
}

/// The mark of a Sentinel event, for the events `locksim hunt` steers by.
fn sentinel_mark(what: &str) -> Option<Mark> {
    Some(match what {
        "+sdown" => Mark::SentinelSdown,
        "+odown" => Mark::SentinelOdown,
        "+tilt" => Mark::SentinelTilt,
        "+elected-leader" => Mark::SentinelLeaderElected,
        "+switch-master" => Mark::SentinelSwitchMaster,
        "+convert-to-slave" => Mark::OldMasterDemoted,
        _ => return None,
    })
}
