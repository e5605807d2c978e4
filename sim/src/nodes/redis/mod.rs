//! A Redis node: the model's `RedisServer` behind a simulated TCP listener (the madsim-etcd-client
//! pattern: a pure state machine wrapped by a thin simulated server), plus what a real
//! `redis-server` process does around it: replication (`replication`), the AOF
//! (`persistence`), and the host-side commands that change the process rather than the
//! dataset (`REPLICAOF`, `PSYNC`/`REPLCONF`, `CLIENT KILL`, `CONFIG REWRITE`, `WAIT`).
//!
//! Expiry follows this node's own wall clock, as real Redis's `mstime()` does; active expiry
//! runs every 100 ms (hz 10). Every command a client executes is recorded, so a command that runs
//! after its client gave up is visible in the trace, and every change of the lock key's owner too.
//! A restarted process replays its AOF and takes the role its redis.conf says; with
//! `restart_delay_ms` it stays down (not listening) that long first — antirez's delayed restart.

pub mod persistence;
pub mod replication;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use madsim::task::JoinHandle;
use madsim::time::sleep;
use model::history::{EventKind, owner_node, render_command, render_reply};
use model::marks::{Mark, mark};
use model::redis::keyspace::Value;
use model::redis::{
    ClientId, Outcome, RedisServer, Reply, RequestParser, Role, ScriptBudget, ScriptMonitor,
    ScriptProgress, ScriptVerdict, ServerConfig,
};
use tokio::sync::oneshot;

use crate::nodes::REDIS_PORT;
use crate::world::net::socket::{NetConn, NetListener, NetWriter};
use crate::world::{World, stream_seed};
use persistence::Fsync;
use replication::Repl;

/// Redis's `hz 10`: the active expire cycle runs ten times a second.
const ACTIVE_EXPIRE_PERIOD_MS: u64 = 100;

pub struct Node {
    pub world: Arc<World>,
    pub name: String,
    pub server: RefCell<RedisServer>,
    pub repl: RefCell<Repl>,
    pub fsync: Fsync,
    /// The replica side of the replication link, while this node is a replica.
    pub replica_task: RefCell<Option<JoinHandle<()>>>,
    lock_key: Vec<u8>,
    /// The lock key's owner as last observed, with the value that names it (for `key_owner`
    /// events).
    owner: RefCell<Option<(Vec<u8>, String)>>,
    /// Every client connection: its peer and writer (pub/sub pushes, CLIENT KILL).
    conns: RefCell<BTreeMap<ClientId, (String, NetWriter)>>,
    /// Clients blocked in BLPOP/BRPOP: where their reply goes once the server serves them or
    /// their timeout passes on this node's clock.
    blocked: RefCell<BTreeMap<ClientId, oneshot::Sender<Reply>>>,
}

/// What a command sends back.
enum Response {
    Reply(Reply),
    /// Raw bytes (the start of a replication stream).
    Raw(Vec<u8>),
    /// Nothing (`REPLCONF ACK`).
    Nothing,
    /// QUIT: the reply, then the connection closes.
    Close(Reply),
}

/// The simulated `lua-time-limit` of one script ([`ScriptBudget`]), and each script's work
/// counted into the run's budget (`Budget::script_work`) at its checkpoints: once the run's
/// scripts together spent it, the running script is stopped and the run ends with an error
/// (issue 31: each runaway attempt cost 0.5 s of CPU while simulated time stood still, so a
/// thousand clients retrying would have run for hours).
struct RunScriptWork {
    per_script: ScriptBudget,
    world: Arc<World>,
    /// The running script's work already counted.
    counted: u64,
}

impl ScriptMonitor for RunScriptWork {
    fn start(&mut self) {
        self.counted = 0;
    }

    fn check(&mut self, progress: &ScriptProgress) -> ScriptVerdict {
        let work = progress.work();
        let spent = self
            .world
            .history
            .add_script_work(work.saturating_sub(self.counted));
        self.counted = work;
        if spent {
            return ScriptVerdict::Kill;
        }
        self.per_script.check(progress)
    }
}

pub async fn redis_node(world: Arc<World>, name: String) {
    let start = world.procs.started(&name);
    if start > 1 && world.scenario.topology.restart_delay_ms > 0 {
        // Delayed restart: the process is not back (not listening) before this.
        sleep(Duration::from_millis(
            world.scenario.topology.restart_delay_ms,
        ))
        .await;
    }
    let fsync = Fsync::parse(&world.scenario.topology.appendfsync)
        .expect("appendfsync is validated when the scenario loads");
    let config = ServerConfig {
        seed: stream_seed(world.seed, &format!("{name}/{start}")),
        port: REDIS_PORT,
        script_work_limit: world.scenario.topology.lua_time_limit_work,
        lua_memory_limit_bytes: (world.scenario.topology.lua_memory_limit_mb << 20) as usize,
        ..ServerConfig::default()
    };
    let mut server = RedisServer::new(config);
    server.set_script_monitor(Box::new(RunScriptWork {
        per_script: ScriptBudget {
            work: world.scenario.topology.lua_time_limit_work,
        },
        world: world.clone(),
        counted: 0,
    }));
    let node = Rc::new(Node {
        lock_key: world.scheme.key().into_bytes(),
        server: RefCell::new(server),
        repl: RefCell::new(Repl::new(world.seed, &format!("{name}/{start}"))),
        fsync,
        replica_task: RefCell::new(None),
        owner: RefCell::new(None),
        conns: RefCell::default(),
        blocked: RefCell::default(),
        world,
        name,
    });
    if start > 1 {
        let now_ms = node.world.time.wall_ms(&node.name);
        let loaded = persistence::load(
            &node.world,
            &node.name,
            &mut node.server.borrow_mut(),
            now_ms,
        );
        node.world.record(
            &node.name,
            EventKind::Replication {
                what: "restart".into(),
                detail: format!("loaded {loaded} commands from the AOF"),
            },
        );
        node.observe_owner("restart", now_ms);
    }
    let listener = NetListener::bind(&node.world, &node.name, REDIS_PORT);
    replication::start(&node);
    madsim::task::spawn_local(active_expiry(node.clone()));
    madsim::task::spawn_local(replication::cron(node.clone()));
    madsim::task::spawn_local(persistence::flush_loop(
        node.world.clone(),
        node.name.clone(),
        fsync,
    ));
    loop {
        let (conn, client) = listener.accept().await;
        let peer = conn.peer_addr();
        madsim::task::spawn_local(serve_connection(node.clone(), conn, client, peer));
    }
}

/// A blocked client's timeout on this node's clock (`clientsHandleTimeout`): sleeps until its
/// deadline (again after a clock jump backwards), then lets the server answer it.
async fn block_timeout(node: Rc<Node>, client: ClientId) {
    while node.blocked.borrow().contains_key(&client) {
        let Some(deadline) = node.server.borrow().block_deadline(client) else {
            return;
        };
        let now_ms = node.world.time.wall_ms(&node.name);
        if deadline > now_ms {
            let wait = node
                .world
                .time
                .true_duration_us(&node.name, (deadline - now_ms) as u64);
            sleep(Duration::from_micros(wait.max(1))).await;
            continue;
        }
        node.server.borrow_mut().expire_blocked(now_ms);
        node.deliver_unblocked();
    }
}

async fn active_expiry(node: Rc<Node>) {
    loop {
        let period = node
            .world
            .time
            .true_duration_us(&node.name, ACTIVE_EXPIRE_PERIOD_MS);
        sleep(Duration::from_micros(period)).await;
        let now_ms = node.world.time.wall_ms(&node.name);
        node.server.borrow_mut().active_expire_cycle(now_ms);
        replication::propagate(&node);
        node.observe_owner("expiry", now_ms);
    }
}

/// Replies of at least this many bytes count into the run's work budget (`Budget::script_work`):
/// a script can return millions of elements at every attempt (a 2,000,000-element reply costs
/// about 0.3 s to build, send and read), few events record them and simulated time barely
/// moves. Smaller replies are what every scheme exchanges, bounded by the event budget.
const LARGE_REPLY_BYTES: usize = 64 << 10;

/// Work units per byte of a large reply: about its cost next to the script's own units (a unit
/// is about 2.5 ns, a reply byte encoded, carried and parsed about 15 ns).
const WORK_PER_REPLY_BYTE: u64 = 6;

/// One client connection (from `peer`): parses and executes requests in order; replies, pub/sub
/// messages and (for a replica's connection) the replication stream all go through its one
/// writer.
async fn serve_connection(node: Rc<Node>, conn: NetConn, client: String, peer: SocketAddr) {
    let (mut reader, writer) = conn.split();
    let id = node.server.borrow_mut().connect();
    node.conns
        .borrow_mut()
        .insert(id, (client.clone(), writer.clone()));
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::with_capacity(512);
    'connection: loop {
        match reader.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let mut out = Vec::new();
        loop {
            match parser.parse(&mut buf) {
                Ok(Some(argv)) => {
                    let response = node.execute(id, &client, peer, &writer, &argv).await;
                    let protocol = node.server.borrow().protocol(id);
                    match response {
                        Response::Reply(reply) => reply.encode_with(protocol, &mut out),
                        Response::Raw(bytes) => out.extend(bytes),
                        Response::Nothing => {}
                        Response::Close(reply) => {
                            reply.encode_with(protocol, &mut out);
                            let _ = writer.send(out);
                            break 'connection;
                        }
                    }
                    node.deliver_pushes();
                }
                Ok(None) => break,
                Err(error) => {
                    // networking.c: reply with the protocol error, then close the connection.
                    Reply::error(format!("ERR {error}")).encode_into(&mut out);
                    let _ = writer.send(out);
                    break 'connection;
                }
            }
        }
        if out.len() >= LARGE_REPLY_BYTES {
            node.world
                .history
                .add_script_work(out.len() as u64 * WORK_PER_REPLY_BYTE);
        }
        if !out.is_empty() && writer.send(out).is_err() {
            break;
        }
    }
    node.conns.borrow_mut().remove(&id);
    replication::replica_gone(&node, id);
    node.server.borrow_mut().disconnect(id);
}

fn word(argv: &[Vec<u8>], i: usize) -> String {
    argv.get(i)
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .unwrap_or_default()
}

impl Node {
    async fn execute(
        self: &Rc<Self>,
        id: ClientId,
        client: &str,
        peer: SocketAddr,
        writer: &NetWriter,
        argv: &[Vec<u8>],
    ) -> Response {
        let command = word(argv, 0);
        // The replication handshake and acks: the connection becomes a replica link.
        match command.as_str() {
            "replconf" => {
                if word(argv, 1) == "ack" {
                    let offset = word(argv, 2).parse().unwrap_or(0);
                    replication::ack(self, id, offset);
                    return Response::Nothing;
                }
                return Response::Reply(Reply::ok());
            }
            "psync" | "sync" => {
                if !matches!(self.server.borrow().role(), Role::Master) {
                    return Response::Reply(Reply::error(
                        "NOMASTERLINK Can't SYNC while not connected with my master",
                    ));
                }
                let replid = String::from_utf8_lossy(argv.get(1).map_or(&b"?"[..], |a| a));
                let offset = word(argv, 2).parse().unwrap_or(-1);
                return Response::Raw(replication::psync(
                    self,
                    id,
                    client,
                    writer.clone(),
                    &replid,
                    offset,
                ));
            }
            _ => {}
        }
        // Lock-key writes by clients are followed only when a fault needs them.
        let before = (self.world.tracks_lock_writes() && client.starts_with("client-"))
            .then(|| self.lock_entry(self.world.time.wall_ms(&self.name)));
        let (reply, close) = match self.host_command(id, &command, argv) {
            Some(reply) => (reply, false),
            None => self.execute_in_model(id, argv).await,
        };
        // Sentinel's monitoring (PING, INFO once a second per instance) would drown the trace;
        // what it changes (REPLICAOF, CLIENT KILL) is recorded.
        let monitoring = client.starts_with("sentinel-")
            && matches!(
                command.as_str(),
                "ping" | "info" | "role" | "publish" | "subscribe"
            );
        if !monitoring {
            self.world.record(
                &self.name,
                EventKind::Executed {
                    client: client.into(),
                    command: render_command(argv),
                    reply: render_reply(&reply),
                },
            );
        }
        let now_ms = self.world.time.wall_ms(&self.name);
        // A key change is the doing of the worker thread that sent the command, when the
        // process runs several (they share its connections; Redis knows only the process).
        let sender = (self.world.scenario.clients.threads > 1)
            .then(|| self.world.history.sender(peer))
            .flatten();
        self.observe_owner(sender.as_deref().unwrap_or(client), now_ms);
        if let Some(before) = before {
            let after = self.lock_entry(now_ms);
            if after.is_some() && after != before {
                self.world.lock_written(&self.name, client);
            }
        }
        if close {
            Response::Close(reply)
        } else {
            Response::Reply(reply)
        }
    }

    /// The lock key as a client would read it at `now_ms`: `None` when absent or expired.
    fn lock_entry(&self, now_ms: i64) -> Option<model::redis::keyspace::Entry> {
        self.server
            .borrow()
            .db()
            .get(&self.lock_key)
            .filter(|e| e.expire_at.is_none_or(|at| now_ms <= at))
            .cloned()
    }

    /// Commands the process handles itself; `None` for the dataset's commands.
    fn host_command(
        self: &Rc<Self>,
        id: ClientId,
        command: &str,
        argv: &[Vec<u8>],
    ) -> Option<Reply> {
        match command {
            "replicaof" | "slaveof" if argv.len() == 3 => Some(self.replicaof(argv)),
            "config" if word(argv, 1) == "rewrite" => {
                // CONFIG REWRITE: redis.conf now says what this node's role is.
                let master = match self.server.borrow().role() {
                    Role::Master => None,
                    Role::Replica { master_host, .. } => master_host
                        .parse()
                        .ok()
                        .map(|ip| self.world.procs.name_of(ip)),
                };
                self.world.disks.with(&self.name, |d| d.replicaof = master);
                Some(Reply::ok())
            }
            "client" if word(argv, 1) == "kill" && word(argv, 2) == "type" => {
                // CLIENT KILL TYPE normal|pubsub: every client but this one and the replicas.
                let replicas: Vec<ClientId> = self.repl.borrow().replicas.keys().copied().collect();
                let victims: Vec<NetWriter> = self
                    .conns
                    .borrow()
                    .iter()
                    .filter(|(c, (peer, _))| {
                        **c != id && !replicas.contains(c) && !peer.starts_with("sentinel-")
                    })
                    .map(|(_, (_, w))| w.clone())
                    .collect();
                for w in &victims {
                    w.reset();
                }
                Some(Reply::Integer(victims.len() as i64))
            }
            _ => None,
        }
    }

    /// `REPLICAOF host port` / `REPLICAOF NO ONE` (`replicaofCommand`).
    fn replicaof(self: &Rc<Self>, argv: &[Vec<u8>]) -> Reply {
        let host = String::from_utf8_lossy(&argv[1]).into_owned();
        let port = String::from_utf8_lossy(&argv[2]).into_owned();
        if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") {
            replication::become_master(self);
            return Reply::ok();
        }
        let Ok(ip) = host.parse() else {
            return Reply::error("ERR Invalid master address");
        };
        let master = self.world.procs.name_of(ip);
        if let Role::Replica { master_host, .. } = self.server.borrow().role()
            && *master_host == host
        {
            return Reply::Status("OK Already connected to specified master".into());
        }
        replication::become_replica(self, &master);
        Reply::ok()
    }

    /// Runs a command in the model: its reply, and whether the connection closes after it.
    async fn execute_in_model(self: &Rc<Self>, id: ClientId, argv: &[Vec<u8>]) -> (Reply, bool) {
        let now_ms = self.world.time.wall_ms(&self.name);
        // A lease that ran out before this command is the clock's doing, not this client's.
        self.observe_owner("expiry", now_ms);
        let info = replication::replication_info(self);
        // `checkGoodReplicasStatus` (redis 7.0.15 `src/server.c` 3911): the count the last
        // `replicationCron` (or a replica coming or going) left, not one made now.
        let min = self.world.scenario.topology.min_replicas_to_write;
        let refuse = min > 0
            && matches!(self.server.borrow().role(), Role::Master)
            && self.repl.borrow().good_replicas < min as usize;
        {
            let mut server = self.server.borrow_mut();
            server.set_replication_info(info);
            server.refuse_writes(
                refuse.then(|| "NOREPLICAS Not enough good replicas to write.".to_string()),
            );
        }
        let outcome = self.server.borrow_mut().execute(id, now_ms, argv);
        if let Outcome::Reply(Reply::Error(e)) | Outcome::Close(Reply::Error(e)) = &outcome {
            mark_refusal(e);
        }
        replication::propagate(self);
        self.deliver_unblocked();
        self.close_killed();
        match outcome {
            Outcome::Reply(reply) => (reply, false),
            Outcome::Close(reply) => (reply, true),
            Outcome::Wait {
                numreplicas,
                timeout_ms,
            } => (
                Reply::Integer(replication::wait(self, numreplicas, timeout_ms).await),
                false,
            ),
            Outcome::Blocked => {
                let (tx, rx) = oneshot::channel();
                self.blocked.borrow_mut().insert(id, tx);
                madsim::task::spawn_local(block_timeout(self.clone(), id));
                (rx.await.unwrap_or(Reply::NilArray), false)
            }
        }
    }

    /// Answers the clients the last command unblocked (BLPOP served, CLIENT UNBLOCK).
    fn deliver_unblocked(&self) {
        let unblocked = self.server.borrow_mut().take_unblocked();
        for (client, reply) in unblocked {
            if let Some(waiter) = self.blocked.borrow_mut().remove(&client) {
                let _ = waiter.send(reply);
            }
        }
    }

    /// Resets the connections CLIENT KILL closed.
    fn close_killed(&self) {
        let killed = self.server.borrow_mut().take_killed();
        let conns = self.conns.borrow();
        for client in killed {
            if let Some((_, writer)) = conns.get(&client) {
                writer.reset();
            }
        }
    }

    /// Sends pub/sub messages produced by the last command to their subscribers.
    fn deliver_pushes(&self) {
        let pushes = self.server.borrow_mut().take_pushes();
        let conns = self.conns.borrow();
        for (client, reply) in pushes {
            if let Some((_, out)) = conns.get(&client) {
                let _ = out.send(reply.encode());
            }
        }
    }

    /// Records a `key_owner` event when the lock key's owner changed, attributing it to `by`;
    /// tells the world when the key is gone (for `lock_written` followers).
    pub fn observe_owner(&self, by: &str, now_ms: i64) {
        if self.world.tracks_lock_writes() && self.lock_entry(now_ms).is_none() {
            self.world.lock_gone(&self.name);
        }
        let token = {
            let server = self.server.borrow();
            let token = lock_token(&server, &self.lock_key, now_ms, |value| {
                self.world.history.is_token(value)
            });
            // The same value names the same owner: only a value that changes is attributed
            // anew (to the thread that wrote it, for a value the threads of a process share).
            // Most commands leave the key as it was: a baseline run observes after every
            // command and every expiry cycle, and did a lookup and two copies each (issue 32).
            if token
                == self
                    .owner
                    .borrow()
                    .as_ref()
                    .map(|(value, _)| value.as_slice())
            {
                return;
            }
            token.map(<[u8]>::to_vec)
        };
        let mut last = self.owner.borrow_mut();
        let owner = token
            .as_ref()
            .and_then(|token| self.world.history.owner_of(token, by));
        if last.as_ref().map(|(_, o)| o) != owner.as_ref() {
            match (&*last, &owner) {
                (Some(_), None) if by == "expiry" => mark(Mark::LockKeyExpired),
                (Some(_), Some(_)) => mark(Mark::LockOwnerReplaced),
                _ => {}
            }
            let key = String::from_utf8_lossy(&self.lock_key).into_owned();
            // Expiry only ever removes a token. A token that appears between commands was
            // written earlier by its owner, whose client named it only once it saw the reply
            // (setnx-getset's value is its expiry time).
            let by = match (&owner, by) {
                (Some(o), "expiry") => owner_node(o).to_string(),
                _ => by.to_string(),
            };
            self.world.record(
                &self.name,
                EventKind::KeyOwner {
                    key,
                    owner: owner.clone(),
                    by,
                },
            );
        }
        *last = token.zip(owner);
    }
}

/// Marks a write refused for the replication state or a missing script.
fn mark_refusal(error: &[u8]) {
    if error.starts_with(b"NOREPLICAS") {
        mark(Mark::MinReplicasRefused);
    } else if error.starts_with(b"READONLY") {
        mark(Mark::ReadOnlyRefused);
    } else if error.starts_with(b"NOSCRIPT") {
        mark(Mark::NoScript);
    }
}

/// The first of the values that can identify the lock's owner for which `is_token` holds,
/// without touching the keyspace: a string's value, or one of a hash's field names (Redisson
/// stores `uuid:threadId → count`). A logically expired key has none.
fn lock_token<'a>(
    server: &'a RedisServer,
    key: &[u8],
    now_ms: i64,
    is_token: impl Fn(&[u8]) -> bool,
) -> Option<&'a [u8]> {
    let entry = server.db().get(key)?;
    if entry.expire_at.is_some_and(|at| now_ms > at) {
        return None;
    }
    match &entry.value {
        Value::Str(value) => is_token(value).then_some(value.as_slice()),
        Value::Hash(hash) => hash
            .iter()
            .map(|(field, _)| field.as_slice())
            .find(|field| is_token(field)),
        _ => None,
    }
}
