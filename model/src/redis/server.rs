//! The server: clients, roles, command dispatch (`server.c` `processCommand` / `call`), lazy
//! expiry (`db.c` `expireIfNeeded`), active expiry (`expire.c` `activeExpireCycle`) and the
//! propagation of effects to replicas and the AOF (`server.c` `alsoPropagate`).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use super::commands::{self, CommandSpec, Kind, flags};
use super::keyspace::{Db, Entry};
use super::lua::LuaEngine;
use super::reply::Reply;

pub type ClientId = u64;

/// Static configuration of one server.
#[derive(Clone, Debug, Default)]
pub struct ServerConfig {
    /// Seeds the order in which active expiry walks the keys with a TTL (real Redis: the random
    /// hash seed of its dict). Lua's `math.random` is *not* affected: Redis 7.0 starts every
    /// process with the same `rand48` state, and so do we.
    pub seed: u64,
}

/// What `execute` asks of the host.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Reply(Reply),
    /// WAIT: the host (sim node) must block and answer with the number of acks.
    Wait {
        numreplicas: i64,
        timeout_ms: i64,
    },
}

impl Outcome {
    /// The reply, if this is not a WAIT.
    pub fn into_reply(self) -> Option<Reply> {
        match self {
            Outcome::Reply(r) => Some(r),
            Outcome::Wait { .. } => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Master,
    Replica {
        master_host: String,
        master_port: u16,
    },
}

/// One connected replica as its master sees it (INFO replication `slaveN`, ROLE).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicaInfo {
    pub ip: String,
    pub port: u16,
    pub offset: i64,
    /// Seconds since the last ack.
    pub lag: i64,
}

/// Replication state the host tracks and the server prints (INFO replication, ROLE).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicationInfo {
    /// Master side: connected replicas.
    pub replicas: Vec<ReplicaInfo>,
    pub master_repl_offset: i64,
    pub master_replid: String,
    /// Replica side: is the link to the master up.
    pub master_link_up: bool,
    /// Replica side: seconds since the last interaction with the master (-1 if never).
    pub master_last_io_seconds_ago: i64,
    /// Replica side: the offset processed from the master's stream.
    pub slave_repl_offset: i64,
}

impl Default for ReplicationInfo {
    fn default() -> Self {
        ReplicationInfo {
            replicas: Vec::new(),
            master_repl_offset: 0,
            master_replid: "0000000000000000000000000000000000000001".to_string(),
            master_link_up: false,
            master_last_io_seconds_ago: -1,
            slave_repl_offset: 0,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct ClientState {
    /// Channels in subscription order.
    pub channels: Vec<Vec<u8>>,
}

/// Everything but the Lua state: what a command needs.
pub(crate) struct Core {
    pub db: Db,
    pub role: Role,
    pub repl: ReplicationInfo,
    pub clients: BTreeMap<ClientId, ClientState>,
    next_client: ClientId,
    /// Subscribers of each channel, in subscription order.
    pub channels: BTreeMap<Vec<u8>, Vec<ClientId>>,
    /// The script cache: sha1 → body (`eval.c` `lctx.lua_scripts`).
    pub scripts: BTreeMap<String, Vec<u8>>,
    pub pushes: Vec<(ClientId, Reply)>,
    pub propagated: Vec<Vec<Vec<u8>>>,
    /// Effects of the command being executed (`server.also_propagate`).
    pending: Vec<Vec<Vec<u8>>>,
    /// Set by the host when writes must be refused (min-replicas-to-write not met): the error.
    pub write_refusal: Option<String>,
}

/// The context of one command: the core, who runs it, and the frozen clock.
pub(crate) struct Ctx<'a> {
    pub core: &'a mut Core,
    pub client: ClientId,
    pub now: i64,
    /// Run from the master's replication stream: keys never expire.
    pub from_master: bool,
}

impl Ctx<'_> {
    /// `db.c` `expireIfNeeded`: true if the key is logically expired. A master deletes it and
    /// propagates `DEL`; a replica only reports it (and sees nothing expired in its master's
    /// stream).
    pub fn expire_if_needed(&mut self, key: &[u8]) -> bool {
        if !self.core.db.is_expired(key, self.now) {
            return false;
        }
        if matches!(self.core.role, Role::Replica { .. }) {
            return !self.from_master;
        }
        self.core.db.remove(key);
        self.propagate(vec![b"DEL".to_vec(), key.to_vec()]);
        true
    }

    /// `lookupKeyRead` / `lookupKeyWrite`.
    pub fn lookup(&mut self, key: &[u8]) -> Option<&Entry> {
        if self.expire_if_needed(key) {
            return None;
        }
        self.core.db.get(key)
    }

    pub fn lookup_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        if self.expire_if_needed(key) {
            return None;
        }
        self.core.db.get_mut(key)
    }

    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.lookup(key).is_some()
    }

    /// `alsoPropagate`: queue an effect of this command for replicas and the AOF.
    pub fn propagate(&mut self, argv: Vec<Vec<u8>>) {
        self.core.pending.push(argv);
    }

    pub fn is_replica(&self) -> bool {
        matches!(self.core.role, Role::Replica { .. })
    }
}

/// The simulated Redis 7.0 server: a deterministic state machine.
pub struct RedisServer {
    pub(crate) core: Core,
    pub(crate) lua: Option<LuaEngine>,
    /// `rand.c` state behind Lua's `math.random`; survives SCRIPT FLUSH like the C global does.
    pub(crate) rand48: Rc<Cell<u64>>,
}

impl RedisServer {
    pub fn new(config: ServerConfig) -> Self {
        RedisServer {
            core: Core {
                db: Db::new(config.seed),
                role: Role::Master,
                repl: ReplicationInfo::default(),
                clients: BTreeMap::new(),
                next_client: 1,
                channels: BTreeMap::new(),
                scripts: BTreeMap::new(),
                pushes: Vec::new(),
                propagated: Vec::new(),
                pending: Vec::new(),
                write_refusal: None,
            },
            lua: None,
            rand48: Rc::new(Cell::new(super::lua::RAND48_INITIAL)),
        }
    }

    pub fn connect(&mut self) -> ClientId {
        let id = self.core.next_client;
        self.core.next_client += 1;
        self.core.clients.insert(id, ClientState::default());
        id
    }

    /// Drops the client and its subscriptions.
    pub fn disconnect(&mut self, client: ClientId) {
        if let Some(state) = self.core.clients.remove(&client) {
            for channel in state.channels {
                self.core.unsubscribe_channel(client, &channel);
            }
        }
    }

    /// Runs one command of `client` at `now_ms` (this node's wall clock, Unix ms).
    pub fn execute(&mut self, client: ClientId, now_ms: i64, argv: &[Vec<u8>]) -> Outcome {
        self.core.clients.entry(client).or_default();
        let outcome = self.process_command(client, now_ms, argv);
        self.core.flush_pending();
        outcome
    }

    /// `server.c` `processCommand`: lookup, arity, role and pubsub-context checks, then `call`.
    fn process_command(&mut self, client: ClientId, now: i64, argv: &[Vec<u8>]) -> Outcome {
        let spec = match commands::lookup_checked(argv) {
            Ok(spec) => spec,
            Err(reply) => return Outcome::Reply(reply),
        };
        if spec.flags & flags::WRITE != 0 && matches!(self.core.role, Role::Replica { .. }) {
            return Outcome::Reply(Reply::error(
                "READONLY You can't write against a read only replica.",
            ));
        }
        if spec.flags & flags::WRITE != 0
            && let Some(error) = &self.core.write_refusal
        {
            return Outcome::Reply(Reply::Error(error.clone()));
        }
        let subscribed = self
            .core
            .clients
            .get(&client)
            .is_some_and(|c| !c.channels.is_empty());
        if subscribed && spec.flags & flags::PUBSUB_CONTEXT == 0 {
            return Outcome::Reply(Reply::Error(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                spec.full_name
            )));
        }
        self.call(spec, client, now, argv)
    }

    fn call(
        &mut self,
        spec: &'static CommandSpec,
        client: ClientId,
        now: i64,
        argv: &[Vec<u8>],
    ) -> Outcome {
        match spec.kind {
            Kind::Plain(handler) => {
                let mut ctx = Ctx {
                    core: &mut self.core,
                    client,
                    now,
                    from_master: false,
                };
                Outcome::Reply(one_line_errors(handler(&mut ctx, argv)))
            }
            Kind::Server(handler) => match handler(self, client, now, argv) {
                Outcome::Reply(r) => Outcome::Reply(one_line_errors(r)),
                wait => wait,
            },
        }
    }

    /// Active expiry (`expire.c` `activeExpireCycle`, slow cycle, hz 10): the host calls it
    /// every 100 ms of its clock. Samples 20 keys with a TTL at a time, deleting the expired
    /// ones, and repeats while more than 10% of a sample was expired. Replicas do nothing.
    pub fn active_expire_cycle(&mut self, now_ms: i64) {
        const KEYS_PER_LOOP: usize = 20;
        const ACCEPTABLE_STALE_PERCENT: usize = 10;
        const MAX_LOOPS: usize = 1000;
        if matches!(self.core.role, Role::Replica { .. }) {
            return;
        }
        for _ in 0..MAX_LOOPS {
            let sample = self.core.db.sample_volatile(KEYS_PER_LOOP);
            if sample.is_empty() {
                break;
            }
            let mut expired = 0;
            for key in &sample {
                if self.core.db.is_expired(key, now_ms) {
                    self.core.db.remove(key);
                    self.core.pending.push(vec![b"DEL".to_vec(), key.clone()]);
                    self.core.flush_pending();
                    expired += 1;
                }
            }
            if expired * 100 <= sample.len() * ACCEPTABLE_STALE_PERCENT {
                break;
            }
        }
    }

    /// Messages for other connections (PUBLISH → subscribers), in order.
    pub fn take_pushes(&mut self) -> Vec<(ClientId, Reply)> {
        std::mem::take(&mut self.core.pushes)
    }

    /// Every write performed since the last call, as Redis 7.0 propagates it to replicas and
    /// the AOF (without the leading `SELECT 0`).
    pub fn take_propagated(&mut self) -> Vec<Vec<Vec<u8>>> {
        std::mem::take(&mut self.core.propagated)
    }

    pub fn role(&self) -> &Role {
        &self.core.role
    }

    pub fn set_role(&mut self, role: Role) {
        self.core.role = role;
    }

    /// `min-replicas-to-write` (`checkGoodReplicasStatus`): the host counts good replicas and,
    /// when too few, sets the error every write command (also from a script) gets instead.
    pub fn refuse_writes(&mut self, error: Option<String>) {
        self.core.write_refusal = error;
    }

    pub fn set_replication_info(&mut self, info: ReplicationInfo) {
        self.core.repl = info;
    }

    pub fn replication_info(&self) -> &ReplicationInfo {
        &self.core.repl
    }

    /// A replica applying its master's stream: no reply, and keys are never considered expired
    /// (the master sends DEL for those). MULTI/EXEC markers are accepted and ignored: the
    /// stream is applied in order anyway.
    pub fn apply_replicated(&mut self, now_ms: i64, argv: &[Vec<u8>]) {
        let Some(name) = argv.first().map(|n| n.to_ascii_lowercase()) else {
            return;
        };
        if name == b"multi" || name == b"exec" {
            return;
        }
        let Ok(spec) = commands::lookup_checked(argv) else {
            return;
        };
        if let Kind::Plain(handler) = spec.kind {
            let mut ctx = Ctx {
                core: &mut self.core,
                client: 0,
                now: now_ms,
                from_master: true,
            };
            handler(&mut ctx, argv);
        }
        self.core.pending.clear();
    }

    /// Number of keys (DBSIZE, including logically expired ones not yet deleted).
    pub fn dbsize(&self) -> usize {
        self.core.db.len()
    }

    /// Read-only view of the keyspace (for persistence and inspection).
    pub fn db(&self) -> &Db {
        &self.core.db
    }
}

/// Error replies never span lines: CR and LF in them become spaces, as `addReplyErrorFormat`
/// does for texts that echo user input.
fn one_line_errors(reply: Reply) -> Reply {
    match reply {
        Reply::Error(e) if e.contains(['\r', '\n']) => Reply::Error(e.replace(['\r', '\n'], " ")),
        Reply::Sequence(items) => Reply::Sequence(items.into_iter().map(one_line_errors).collect()),
        other => other,
    }
}

impl Core {
    /// `propagatePendingCommands`: several effects of one command go out wrapped in MULTI/EXEC.
    pub(crate) fn flush_pending(&mut self) {
        match self.pending.len() {
            0 => {}
            1 => self
                .propagated
                .push(self.pending.pop().expect("one pending")),
            _ => {
                self.propagated.push(vec![b"MULTI".to_vec()]);
                self.propagated.append(&mut self.pending);
                self.propagated.push(vec![b"EXEC".to_vec()]);
            }
        }
    }

    pub(crate) fn unsubscribe_channel(&mut self, client: ClientId, channel: &[u8]) {
        if let Some(subs) = self.channels.get_mut(channel) {
            subs.retain(|c| *c != client);
            if subs.is_empty() {
                self.channels.remove(channel);
            }
        }
    }

    /// Runs a command for a script (`script.c` `scriptCall`); `read_only` for `no-writes`
    /// scripts. `Err` carries the error text of
    /// checks that fail before the command runs.
    pub(crate) fn call_from_script(
        &mut self,
        client: ClientId,
        now: i64,
        argv: &[Vec<u8>],
        read_only: bool,
    ) -> Result<Reply, String> {
        let Some(spec) = commands::lookup(argv) else {
            return Err("Unknown Redis command called from script".to_string());
        };
        if !spec.arity_ok(argv.len()) {
            return Err("Wrong number of args calling Redis command from script".to_string());
        }
        if spec.flags & flags::NOSCRIPT != 0 {
            return Err("This Redis command is not allowed from script".to_string());
        }
        if read_only && spec.flags & (flags::WRITE | flags::MAY_REPLICATE) != 0 {
            return Err("Write commands are not allowed from read-only scripts.".to_string());
        }
        if spec.flags & flags::WRITE != 0 && matches!(self.role, Role::Replica { .. }) {
            return Err("-READONLY You can't write against a read only replica.".to_string());
        }
        if spec.flags & flags::WRITE != 0
            && let Some(error) = &self.write_refusal
        {
            return Err(format!("-{error}"));
        }
        match spec.kind {
            Kind::Plain(handler) => {
                let mut ctx = Ctx {
                    core: self,
                    client,
                    now,
                    from_master: false,
                };
                Ok(one_line_errors(handler(&mut ctx, argv)))
            }
            Kind::Server(_) => Err("This Redis command is not allowed from script".to_string()),
        }
    }
}
