//! The server: clients, roles, command dispatch (`server.c` `processCommand` / `call`), lazy
//! expiry (`db.c` `expireIfNeeded`), active expiry (`expire.c` `activeExpireCycle`), the
//! propagation of effects to replicas and the AOF (`server.c` `alsoPropagate`), the keys those
//! effects touch (`multi.c` `touchWatchedKey`) and the blocked clients they serve (`blocked.c`
//! `handleClientsBlockedOnKeys`).

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use super::client::{ClientAddr, ClientState, WatchedKey};
use super::commands::{self, CommandSpec, Kind, flags};
use super::keyspace::{Db, Entry};
use super::lua::LuaEngine;
use super::reply::{Protocol, Reply};
use super::script_limits::{DEFAULT_SCRIPT_WORK, ScriptBudget, ScriptMonitor};

pub use super::client::ClientId;

/// Static configuration of one server (`redis.conf`).
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Seeds the order in which active expiry walks the keys with a TTL (real Redis: the random
    /// hash seed of its dict). Lua's `math.random` is *not* affected: Redis 7.0 starts every
    /// process with the same `rand48` state, and so do we.
    pub seed: u64,
    /// `databases` (16).
    pub databases: usize,
    /// `requirepass`: the default user's password; `None` = no password (`nopass`).
    pub requirepass: Option<Vec<u8>>,
    /// `port`, as INFO and CONFIG GET print it.
    pub port: u16,
    /// `maxclients`, as INFO and CONFIG GET print it (the host enforces it).
    pub maxclients: u64,
    /// `lua-time-limit` / `busy-reply-threshold` in ms, as CONFIG GET prints it (the host's
    /// script monitor enforces it).
    pub lua_time_limit_ms: u64,
    /// The most memory Lua's heap may use; an allocation beyond it fails with Lua's
    /// `not enough memory` error (Redis has no such limit: its process would be killed).
    pub lua_memory_limit_bytes: usize,
    /// The work (see [`ScriptProgress::work`](super::ScriptProgress::work)) after which the
    /// default monitor, the deterministic [`ScriptBudget`], stops a script: the simulation's
    /// `lua-time-limit` (a host with its own monitor, `locksim serve`, ignores it).
    pub script_work_limit: u64,
    /// Whether anything reads the effects the commands propagate (replicas, the AOF: the
    /// simulation's nodes). `false` (`locksim serve`, which has neither) is Redis with no
    /// replica, no backlog and the AOF off, where `replicationFeedSlaves` returns at once
    /// (replication.c) and `feedAppendOnlyFile` is not called (server.c `propagateNow`):
    /// effects then only touch the keys they write, and a SET's value is moved into the
    /// keyspace rather than copied.
    pub propagates_effects: bool,
}

/// 1 GiB: far above what any lock script needs, far below what takes a machine down.
pub const DEFAULT_LUA_MEMORY_LIMIT_BYTES: usize = 1 << 30;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            seed: 0,
            databases: 16,
            requirepass: None,
            port: 6379,
            maxclients: 10_000,
            lua_time_limit_ms: 5000,
            lua_memory_limit_bytes: DEFAULT_LUA_MEMORY_LIMIT_BYTES,
            script_work_limit: DEFAULT_SCRIPT_WORK,
            propagates_effects: true,
        }
    }
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
    /// BLPOP/BRPOP found nothing: no reply now. The client stays blocked until the server
    /// serves it (`take_unblocked`) or it times out (`expire_blocked`); its next commands wait.
    Blocked,
    /// QUIT (or CLIENT KILL of itself): send the reply, then close the connection.
    Close(Reply),
}

impl Outcome {
    /// The reply, if there is one now.
    pub fn into_reply(self) -> Option<Reply> {
        match self {
            Outcome::Reply(r) | Outcome::Close(r) => Some(r),
            Outcome::Wait { .. } | Outcome::Blocked => None,
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

/// Counters INFO prints (`server.stat_*`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Stats {
    pub started_ms: Option<i64>,
    pub connections_received: u64,
    pub commands_processed: u64,
    pub expired_keys: u64,
    /// Error replies by their code (`errorstat_ERR`), in code order as Redis's rax.
    pub errors: BTreeMap<String, u64>,
    /// Calls by command full name (`cmdstat_get`).
    pub calls: BTreeMap<&'static str, u64>,
}

/// Everything but the Lua state: what a command needs.
pub(crate) struct Core {
    pub config: ServerConfig,
    pub dbs: Vec<Db>,
    pub role: Role,
    pub repl: ReplicationInfo,
    pub clients: BTreeMap<ClientId, ClientState>,
    next_client: ClientId,
    /// Subscribers of each channel, in subscription order.
    pub channels: BTreeMap<Vec<u8>, Vec<ClientId>>,
    /// Subscribers of each pattern, in subscription order (`server.pubsub_patterns`).
    pub patterns: BTreeMap<Vec<u8>, Vec<ClientId>>,
    /// The script cache: sha1 → body (`eval.c` `lctx.lua_scripts`).
    pub scripts: BTreeMap<String, Vec<u8>>,
    pub pushes: Vec<(ClientId, Reply)>,
    pub propagated: Vec<Vec<Vec<u8>>>,
    /// Effects of the command being executed (`server.also_propagate`), with their database.
    pending: Vec<(usize, Vec<Vec<u8>>)>,
    /// The database of the last propagated effect: a `SELECT` goes out when it changes.
    propagated_db: usize,
    /// The database the master's stream writes to (its last `SELECT`).
    replicated_db: usize,
    /// Set by the host when writes must be refused (min-replicas-to-write not met): the error.
    pub write_refusal: Option<String>,
    /// `db->watched_keys`: who watches each (db, key).
    pub watched_keys: BTreeMap<(usize, Vec<u8>), Vec<ClientId>>,
    /// `db->blocking_keys`: clients blocked on each (db, key), in blocking order.
    pub blocking_keys: BTreeMap<(usize, Vec<u8>), VecDeque<ClientId>>,
    /// `server.ready_keys`: keys written since the last serving of blocked clients.
    pub ready_keys: Vec<(usize, Vec<u8>)>,
    /// Replies to clients that were blocked, for the host.
    pub unblocked: Vec<(ClientId, Reply)>,
    /// Connections CLIENT KILL closed, for the host.
    pub killed: Vec<ClientId>,
    pub stats: Stats,
    /// The running script's write flag (`SCRIPT_WRITE_DIRTY`), shared with the Lua engine.
    pub script_wrote: Rc<Cell<bool>>,
    /// MONITOR clients, in the order they started (`server.monitors`).
    pub monitors: Vec<ClientId>,
    /// CLIENT PAUSE in effect (`server.client_pause_type`, `client_pause_end_time`).
    pub pause: Option<ClientPause>,
    /// Clients whose command a pause holds back, in the order they were held
    /// (`server.postponed_clients`).
    pub postponed: Vec<ClientId>,
    /// Held commands released by the end of a pause, for the host to run again.
    pub resumed: Vec<(ClientId, Vec<Vec<u8>>)>,
    /// The time of the command being run, in microseconds: MONITOR's timestamps.
    pub now_us: i64,
    /// EXEC is running its queue (`server.in_exec`; the caller is `CLIENT_DENY_BLOCKING`).
    pub in_exec: bool,
    /// The state behind SPOP's picks (Redis: libc `random()`, for `dictGetFairRandomKey` and
    /// `intsetRandom`), seeded from `config.seed` so a run is reproducible.
    random_state: u64,
}

/// One CLIENT PAUSE (`pause_event` of `PAUSE_BY_CLIENT_COMMAND`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientPause {
    /// `CLIENT_PAUSE_ALL`; otherwise `CLIENT_PAUSE_WRITE`: only commands that may write or
    /// replicate are held.
    pub all: bool,
    /// Unix ms; the pause is over once the server's time is past it.
    pub end_ms: i64,
}

/// The context of one command: the core, who runs it, and the frozen clock.
pub(crate) struct Ctx<'a> {
    pub core: &'a mut Core,
    pub client: ClientId,
    /// The database the command works on (the client's, or the script's after a SELECT).
    pub db: usize,
    /// The protocol of whoever receives the reply (the client, or the Lua client).
    pub protocol: Protocol,
    pub now: i64,
    /// Run from the master's replication stream: keys never expire.
    pub from_master: bool,
    /// Inside MULTI/EXEC or a script: blocking commands act as timed out (`CLIENT_DENY_BLOCKING`).
    pub deny_blocking: bool,
    /// Set by a blocking command that found nothing to pop.
    pub block: Option<super::client::Blocked>,
    /// Run by a script's `redis.call` (`CLIENT_SCRIPT`): SORT then sorts a set it would not.
    pub in_script: bool,
}

impl<'a> Ctx<'a> {
    pub fn new(core: &'a mut Core, client: ClientId, now: i64) -> Ctx<'a> {
        let (db, protocol) = core
            .clients
            .get(&client)
            .map_or((0, Protocol::Resp2), |c| (c.db, c.protocol));
        Ctx {
            core,
            client,
            db,
            protocol,
            now,
            from_master: false,
            deny_blocking: false,
            block: None,
            in_script: false,
        }
    }

    /// The database this command works on.
    pub fn db(&mut self) -> &mut Db {
        &mut self.core.dbs[self.db]
    }

    /// `db.c` `expireIfNeeded`: true if the key is logically expired. A master deletes it and
    /// propagates `DEL`; a replica only reports it (and sees nothing expired in its master's
    /// stream).
    pub fn expire_if_needed(&mut self, key: &[u8]) -> bool {
        if !self.core.dbs[self.db].is_expired(key, self.now) {
            return false;
        }
        if matches!(self.core.role, Role::Replica { .. }) {
            return !self.from_master;
        }
        // A pause keeps the dataset as it is: expired, but not deleted (db.c:1708-1712).
        if self.core.paused(self.now) {
            return true;
        }
        self.db().remove(key);
        self.core.stats.expired_keys += 1;
        crate::marks::mark(crate::marks::Mark::KeyExpired);
        self.propagate(vec![b"DEL".to_vec(), key.to_vec()]);
        true
    }

    /// `lookupKeyRead` / `lookupKeyWrite`.
    pub fn lookup(&mut self, key: &[u8]) -> Option<&Entry> {
        if self.expire_if_needed(key) {
            return None;
        }
        self.core.dbs[self.db].get(key)
    }

    pub fn lookup_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        if self.expire_if_needed(key) {
            return None;
        }
        self.core.dbs[self.db].get_mut(key)
    }

    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.lookup(key).is_some()
    }

    /// Argument `at` of the command for the keyspace to keep: moved out of `argv` when nothing
    /// reads the command's arguments after it ran (no propagation, no MONITOR; Redis shares
    /// the argument object instead), copied otherwise.
    pub fn take_arg(&self, argv: &mut [Vec<u8>], at: usize) -> Vec<u8> {
        if self.core.config.propagates_effects || !self.core.monitors.is_empty() {
            argv[at].clone()
        } else {
            std::mem::take(&mut argv[at])
        }
    }

    /// `alsoPropagate`: queue an effect of this command for replicas and the AOF.
    pub fn propagate(&mut self, argv: Vec<Vec<u8>>) {
        self.core.pending.push((self.db, argv));
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
    /// Decides at each checkpoint of a running script (lua-time-limit); survives SCRIPT FLUSH.
    pub(crate) monitor: Rc<RefCell<Box<dyn ScriptMonitor>>>,
}

impl RedisServer {
    pub fn new(config: ServerConfig) -> Self {
        let databases = config.databases.max(1);
        let budget = ScriptBudget {
            work: config.script_work_limit,
        };
        let config_seed = config.seed;
        RedisServer {
            core: Core {
                dbs: (0..databases).map(|_| Db::new(config.seed)).collect(),
                config,
                role: Role::Master,
                repl: ReplicationInfo::default(),
                clients: BTreeMap::new(),
                next_client: 1,
                channels: BTreeMap::new(),
                patterns: BTreeMap::new(),
                scripts: BTreeMap::new(),
                pushes: Vec::new(),
                propagated: Vec::new(),
                pending: Vec::new(),
                propagated_db: 0,
                replicated_db: 0,
                write_refusal: None,
                watched_keys: BTreeMap::new(),
                blocking_keys: BTreeMap::new(),
                ready_keys: Vec::new(),
                unblocked: Vec::new(),
                killed: Vec::new(),
                stats: Stats::default(),
                script_wrote: Rc::new(Cell::new(false)),
                monitors: Vec::new(),
                pause: None,
                postponed: Vec::new(),
                resumed: Vec::new(),
                now_us: 0,
                in_exec: false,
                random_state: config_seed,
            },
            lua: None,
            rand48: Rc::new(Cell::new(super::lua::RAND48_INITIAL)),
            monitor: Rc::new(RefCell::new(Box::new(budget))),
        }
    }

    /// Replaces the script monitor (default: the deterministic [`ScriptBudget`]).
    pub fn set_script_monitor(&mut self, monitor: Box<dyn ScriptMonitor>) {
        *self.monitor.borrow_mut() = monitor;
    }

    pub fn connect(&mut self) -> ClientId {
        let id = self.core.next_client;
        self.core.next_client += 1;
        self.core.stats.connections_received += 1;
        let authenticated = self.core.config.requirepass.is_none();
        self.core.clients.insert(
            id,
            ClientState {
                authenticated,
                last_command: "NULL",
                ..ClientState::default()
            },
        );
        id
    }

    /// A new connection with its addresses (`ip:port`) and the time it was accepted, for
    /// CLIENT LIST / CLIENT KILL ADDR.
    pub fn connect_from(&mut self, addr: ClientAddr, now_ms: i64) -> ClientId {
        let id = self.connect();
        if let Some(state) = self.core.clients.get_mut(&id) {
            state.addr = addr;
            state.created_ms = now_ms;
            state.last_interaction_ms = now_ms;
        }
        self.core.stats.started_ms.get_or_insert(now_ms);
        id
    }

    /// Whether `client` is still connected (not disconnected, not closed by CLIENT KILL).
    pub fn is_connected(&self, client: ClientId) -> bool {
        self.core.clients.contains_key(&client)
    }

    /// Drops the client, its subscriptions, watched keys, blocking and monitoring state.
    pub fn disconnect(&mut self, client: ClientId) {
        self.core.monitors.retain(|c| *c != client);
        self.core.postponed.retain(|c| *c != client);
        self.core.resumed.retain(|(c, _)| *c != client);
        if let Some(state) = self.core.clients.remove(&client) {
            self.core.leave_all(client, state.channels, state.patterns);
            for watched in state.watched {
                self.core.unwatch(client, &watched);
            }
            if let Some(blocked) = state.blocked {
                self.core.remove_blocked(client, &blocked);
            }
        }
    }

    /// The protocol `client` speaks (its replies and pushes are encoded for it).
    pub fn protocol(&self, client: ClientId) -> Protocol {
        self.core
            .clients
            .get(&client)
            .map_or(Protocol::Resp2, |c| c.protocol)
    }

    /// Whether the client still has to AUTH (`authRequired`): the host's parser then holds it
    /// to Redis's limits for unauthenticated clients. A connection the model does not know yet
    /// must if there is a password.
    pub fn auth_required(&self, client: Option<ClientId>) -> bool {
        match client.and_then(|client| self.core.clients.get(&client)) {
            Some(state) => !state.authenticated,
            None => self.core.config.requirepass.is_some(),
        }
    }

    /// Runs one command of `client` at `now_ms` (this node's wall clock, Unix ms).
    pub fn execute(&mut self, client: ClientId, now_ms: i64, argv: &[Vec<u8>]) -> Outcome {
        self.execute_at_us(client, now_ms.saturating_mul(1000), argv)
    }

    /// `execute` on a clock with microseconds (`locksim serve`'s real one): MONITOR prints them.
    pub fn execute_at_us(&mut self, client: ClientId, now_us: i64, argv: &[Vec<u8>]) -> Outcome {
        self.execute_args(client, now_us, Cow::Borrowed(argv))
    }

    /// `execute_at_us` of arguments the server may keep: a value read into one buffer is
    /// stored as it is ([`ServerConfig::propagates_effects`]).
    pub fn execute_owned_at_us(
        &mut self,
        client: ClientId,
        now_us: i64,
        argv: Vec<Vec<u8>>,
    ) -> Outcome {
        self.execute_args(client, now_us, Cow::Owned(argv))
    }

    fn execute_args(&mut self, client: ClientId, now_us: i64, argv: Cow<'_, [Vec<u8>]>) -> Outcome {
        let now_ms = now_us.div_euclid(1000);
        self.core.now_us = now_us;
        self.core.stats.started_ms.get_or_insert(now_ms);
        let state = self.core.clients.entry(client).or_default();
        state.last_interaction_ms = now_ms;
        let outcome = self.process_command(client, now_ms, argv);
        self.core.flush_pending();
        if let Outcome::Reply(reply) | Outcome::Close(reply) = &outcome {
            self.core.count_errors(reply);
        }
        self.serve_blocked_clients(now_ms);
        outcome
    }

    /// `server.c` `processCommand`: lookup, arity, authentication, the replica / min-replicas /
    /// pubsub-context checks, MULTI queueing, then `call`. A command rejected inside MULTI
    /// flags the transaction (`flagTransaction`), a rejected EXEC aborts it.
    fn process_command(&mut self, client: ClientId, now: i64, argv: Cow<'_, [Vec<u8>]>) -> Outcome {
        let spec = match commands::lookup_checked(&argv) {
            Ok(spec) => spec,
            Err(reply) => {
                let known = commands::lookup(&argv);
                return Outcome::Reply(self.reject(client, known, reply));
            }
        };
        let state = self.core.clients.entry(client).or_default();
        state.last_command = spec.full_name;
        if !state.authenticated && spec.flags & flags::NO_AUTH == 0 {
            return Outcome::Reply(self.reject(
                client,
                Some(spec),
                Reply::error("NOAUTH Authentication required."),
            ));
        }
        let in_multi = state.multi.is_some();
        // Once per command: a script's flags come from its shebang, found by its sha1.
        let flags = commands::effective_flags(spec, &argv, &self.core.scripts);
        let is_write = if spec.name == "exec" {
            state
                .multi
                .as_ref()
                .is_some_and(|m| m.flags & flags::WRITE != 0)
        } else {
            flags & flags::WRITE != 0
        };
        if is_write && let Some(error) = &self.core.write_refusal {
            let error = Reply::error(error.clone());
            return Outcome::Reply(self.reject(client, Some(spec), error));
        }
        if is_write && matches!(self.core.role, Role::Replica { .. }) {
            let error = Reply::error("READONLY You can't write against a read only replica.");
            return Outcome::Reply(self.reject(client, Some(spec), error));
        }
        let state = &self.core.clients[&client];
        let may_replicate = if spec.name == "exec" {
            state
                .multi
                .as_ref()
                .is_some_and(|m| m.flags & (flags::WRITE | flags::MAY_REPLICATE) != 0)
        } else {
            flags & (flags::WRITE | flags::MAY_REPLICATE) != 0
        };
        let monitor = state.monitor;
        if state.subscribed()
            && state.protocol == Protocol::Resp2
            && spec.flags & flags::PUBSUB_CONTEXT == 0
        {
            let error = Reply::error(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                spec.full_name
            ));
            return Outcome::Reply(self.reject(client, Some(spec), error));
        }
        // A MONITOR client is a replica to Redis (`CLIENT_SLAVE`): no keyspace access
        // (server.c:3990-3995), and never paused.
        if monitor && (may_replicate || commands::touches_keyspace(spec)) {
            let error = Reply::error("ERR Replica can't interact with the keyspace");
            return Outcome::Reply(self.reject(client, Some(spec), error));
        }
        // CLIENT PAUSE holds the command, even one MULTI would only queue (server.c:3997-4005).
        if !monitor
            && let Some(pause) = self.core.pause
            && (pause.all || may_replicate)
        {
            if let Some(state) = self.core.clients.get_mut(&client) {
                state.postponed = Some(argv.into_owned());
            }
            self.core.postponed.push(client);
            return Outcome::Blocked;
        }
        if in_multi
            && !matches!(
                spec.name,
                "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
            )
        {
            if let Some(multi) = self
                .core
                .clients
                .get_mut(&client)
                .and_then(|c| c.multi.as_mut())
                && !multi.dirty_exec
            {
                multi.commands.push(argv.into_owned());
                multi.flags |= flags;
            }
            return Outcome::Reply(Reply::Status("QUEUED".to_string()));
        }
        self.call(spec, client, now, argv, false)
    }

    /// `rejectCommand`: flags an open transaction; a rejected EXEC discards it with EXECABORT.
    fn reject(
        &mut self,
        client: ClientId,
        spec: Option<&'static CommandSpec>,
        reply: Reply,
    ) -> Reply {
        let Some(state) = self.core.clients.get_mut(&client) else {
            return reply;
        };
        if spec.is_some_and(|s| s.name == "exec") {
            // `execCommandAbort`: the reason without a generic `ERR ` code; MONITOR sees the
            // EXEC that ends the MULTI it saw (multi.c:136-146).
            self.discard_transaction(client);
            self.core
                .feed_client_to_monitors(client, &[b"exec".to_vec()]);
            let Reply::Error(text) = reply else {
                return reply;
            };
            let reason = text.strip_prefix(b"ERR ").unwrap_or(&text);
            let mut out = b"EXECABORT Transaction discarded because of: ".to_vec();
            out.extend_from_slice(reason);
            return one_line_errors(Reply::Error(out));
        }
        if let Some(multi) = state.multi.as_mut() {
            multi.dirty_exec = true;
        }
        reply
    }

    /// `call`: runs the command. `deny_blocking` inside EXEC.
    pub(crate) fn call(
        &mut self,
        spec: &'static CommandSpec,
        client: ClientId,
        now: i64,
        mut argv: Cow<'_, [Vec<u8>]>,
        deny_blocking: bool,
    ) -> Outcome {
        self.core.stats.commands_processed += 1;
        *self.core.stats.calls.entry(spec.full_name).or_default() += 1;
        let outcome = self.run_handler(spec, client, now, &mut argv, deny_blocking);
        // `call` shows the command to MONITOR after it ran, in the database it left the client
        // in (server.c:3451-3457).
        if spec.flags & (flags::ADMIN | flags::SKIP_MONITOR) == 0 {
            self.core.feed_client_to_monitors(client, &argv);
        }
        outcome
    }

    fn run_handler(
        &mut self,
        spec: &'static CommandSpec,
        client: ClientId,
        now: i64,
        argv: &mut Cow<'_, [Vec<u8>]>,
        deny_blocking: bool,
    ) -> Outcome {
        match spec.kind {
            Kind::Plain(handler) => {
                let mut ctx = Ctx::new(&mut self.core, client, now);
                ctx.deny_blocking = deny_blocking;
                let reply = one_line_errors(handler.run(&mut ctx, argv));
                let (db, block) = (ctx.db, ctx.block.take());
                if let Some(state) = self.core.clients.get_mut(&client) {
                    state.db = db;
                }
                match block {
                    Some(blocked) => {
                        self.core.block_client(client, blocked);
                        Outcome::Blocked
                    }
                    None => Outcome::Reply(reply),
                }
            }
            Kind::Server(handler) => match handler(self, client, now, argv) {
                Outcome::Reply(r) => Outcome::Reply(one_line_errors(r)),
                Outcome::Close(r) => Outcome::Close(one_line_errors(r)),
                other => other,
            },
        }
    }

    /// `discardTransaction`: leaves MULTI and unwatches everything.
    pub(crate) fn discard_transaction(&mut self, client: ClientId) {
        let Some(state) = self.core.clients.get_mut(&client) else {
            return;
        };
        state.multi = None;
        state.dirty_cas = false;
        let watched = std::mem::take(&mut state.watched);
        for w in &watched {
            self.core.unwatch(client, w);
        }
    }

    /// Active expiry (`expire.c` `activeExpireCycle`, slow cycle, hz 10): the host calls it
    /// every 100 ms of its clock. Samples 20 keys with a TTL at a time, deleting the expired
    /// ones, and repeats while more than 10% of a sample was expired. Replicas do nothing.
    ///
    /// This is also where a CLIENT PAUSE whose time is up ends (`serverCron` and
    /// `activeExpireCycle` check it, server.c:1397, expire.c:141), and nothing expires while
    /// one is in effect.
    pub fn active_expire_cycle(&mut self, now_ms: i64) {
        const KEYS_PER_LOOP: usize = 20;
        const ACCEPTABLE_STALE_PERCENT: usize = 10;
        const MAX_LOOPS: usize = 1000;
        if self.core.paused(now_ms) {
            return;
        }
        if matches!(self.core.role, Role::Replica { .. }) {
            return;
        }
        for db in 0..self.core.dbs.len() {
            for _ in 0..MAX_LOOPS {
                let sample = self.core.dbs[db].sample_volatile(KEYS_PER_LOOP);
                if sample.is_empty() {
                    break;
                }
                let mut expired = 0;
                for key in &sample {
                    if self.core.dbs[db].is_expired(key, now_ms) {
                        self.core.dbs[db].remove(key);
                        self.core.stats.expired_keys += 1;
                        crate::marks::mark(crate::marks::Mark::KeyExpired);
                        self.core
                            .pending
                            .push((db, vec![b"DEL".to_vec(), key.clone()]));
                        self.core.flush_pending();
                        expired += 1;
                    }
                }
                if expired * 100 <= sample.len() * ACCEPTABLE_STALE_PERCENT {
                    break;
                }
            }
        }
    }

    /// Messages for other connections (PUBLISH → subscribers), in order.
    pub fn take_pushes(&mut self) -> Vec<(ClientId, Reply)> {
        std::mem::take(&mut self.core.pushes)
    }

    /// The messages for `client` itself, in order: a RESP3 connection that PUBLISHes to a
    /// channel (or pattern) it subscribed to gets the push before the command's reply, as Redis
    /// writes it into the same buffer during the command.
    pub fn take_pushes_for(&mut self, client: ClientId) -> Vec<Reply> {
        if !self.core.pushes.iter().any(|(c, _)| *c == client) {
            return Vec::new();
        }
        let (own, others) = std::mem::take(&mut self.core.pushes)
            .into_iter()
            .partition::<Vec<_>, _>(|(c, _)| *c == client);
        self.core.pushes = others;
        own.into_iter().map(|(_, reply)| reply).collect()
    }

    /// Whether a CLIENT PAUSE holds some client's command back (it runs when the pause ends).
    pub fn holds_paused_commands(&self) -> bool {
        !self.core.postponed.is_empty()
    }

    /// Commands a CLIENT PAUSE held back and its end released, in the order they were held:
    /// the host runs each again (it may be held again) before that client's next commands
    /// (`processUnblockedClients`).
    pub fn take_resumed(&mut self) -> Vec<(ClientId, Vec<Vec<u8>>)> {
        std::mem::take(&mut self.core.resumed)
    }

    /// Replies to clients that were blocked (BLPOP served or timed out, CLIENT UNBLOCK), in
    /// order. Each of these clients is unblocked: the host runs its waiting commands.
    pub fn take_unblocked(&mut self) -> Vec<(ClientId, Reply)> {
        std::mem::take(&mut self.core.unblocked)
    }

    /// Connections closed by CLIENT KILL: the host closes them (without a reply).
    pub fn take_killed(&mut self) -> Vec<ClientId> {
        std::mem::take(&mut self.core.killed)
    }

    /// The earliest time a blocked client times out.
    pub fn next_block_deadline(&self) -> Option<i64> {
        self.core
            .clients
            .values()
            .filter_map(|c| c.blocked.as_ref().and_then(|b| b.deadline_ms))
            .min()
    }

    /// When `client`, blocked, times out: `None` if it is not blocked or waits for ever.
    pub fn block_deadline(&self, client: ClientId) -> Option<i64> {
        self.core
            .clients
            .get(&client)
            .and_then(|c| c.blocked.as_ref())
            .and_then(|b| b.deadline_ms)
    }

    /// Answers blocked clients whose timeout passed with the null array (`clientsHandleTimeout`).
    pub fn expire_blocked(&mut self, now_ms: i64) {
        let due: Vec<ClientId> = self
            .core
            .clients
            .iter()
            .filter(|(_, c)| {
                c.blocked
                    .as_ref()
                    .and_then(|b| b.deadline_ms)
                    .is_some_and(|d| d <= now_ms)
            })
            .map(|(id, _)| *id)
            .collect();
        for client in due {
            self.core.unblock(client, Reply::NilArray);
        }
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
    /// stream is applied in order anyway. `SELECT n` switches the database of what follows.
    pub fn apply_replicated(&mut self, now_ms: i64, argv: &[Vec<u8>]) {
        let Some(name) = argv.first().map(|n| n.to_ascii_lowercase()) else {
            return;
        };
        if name == b"multi" || name == b"exec" {
            return;
        }
        if name == b"select" {
            if let Some(db) = argv
                .get(1)
                .and_then(|a| super::number::string2ll(a))
                .and_then(|d| usize::try_from(d).ok())
                .filter(|d| *d < self.core.dbs.len())
            {
                self.core.replicated_db = db;
            }
            return;
        }
        let Ok(spec) = commands::lookup_checked(argv) else {
            return;
        };
        if let Kind::Plain(handler) = spec.kind {
            let db = self.core.replicated_db;
            let mut ctx = Ctx::new(&mut self.core, 0, now_ms);
            ctx.db = db;
            ctx.from_master = true;
            ctx.deny_blocking = true;
            handler.run(&mut ctx, &mut Cow::Borrowed(argv));
        }
        let pending = std::mem::take(&mut self.core.pending);
        for (db, effect) in &pending {
            self.core.touch_effect(*db, effect);
        }
        self.serve_blocked_clients(now_ms);
    }

    /// Number of keys of database 0 (including logically expired ones not yet deleted).
    pub fn dbsize(&self) -> usize {
        self.core.dbs[0].len()
    }

    /// Read-only view of database 0 (for persistence and inspection).
    pub fn db(&self) -> &Db {
        &self.core.dbs[0]
    }

    /// Every database, by index.
    pub fn dbs(&self) -> &[Db] {
        &self.core.dbs
    }

    /// `handleClientsBlockedOnKeys`: serves clients blocked on keys written since the last call,
    /// in the order they blocked; each pop is propagated as `LPOP`/`RPOP key` on its own.
    fn serve_blocked_clients(&mut self, now: i64) {
        while !self.core.ready_keys.is_empty() {
            let ready = std::mem::take(&mut self.core.ready_keys);
            for (db, key) in ready {
                commands::serve_blocked_on_key(&mut self.core, db, &key, now);
            }
        }
    }
}

/// Error replies never span lines: CR and LF in them become spaces, as `addReplyErrorFormat`
/// does for texts that echo user input.
pub(crate) fn one_line_errors(reply: Reply) -> Reply {
    match reply {
        Reply::Error(mut e) if e.contains(&b'\r') || e.contains(&b'\n') => {
            for b in e.iter_mut() {
                if *b == b'\r' || *b == b'\n' {
                    *b = b' ';
                }
            }
            Reply::Error(e)
        }
        Reply::Sequence(items) => Reply::Sequence(items.into_iter().map(one_line_errors).collect()),
        other => other,
    }
}

impl Core {
    /// A uniform index below `n` (> 0) for a random pick (splitmix64 over `random_state`).
    pub(crate) fn random_below(&mut self, n: usize) -> usize {
        self.random_state = self.random_state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.random_state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((u128::from(z) * n as u128) >> 64) as usize
    }

    /// `pauseClients` (networking.c:3941-3961): a pause on top of one keeps the later end and
    /// the stricter mode.
    pub(crate) fn pause_clients(&mut self, pause: ClientPause, now_ms: i64) {
        let merged = match self.pause {
            Some(old) => ClientPause {
                all: old.all || pause.all,
                end_ms: old.end_ms.max(pause.end_ms),
            },
            None => pause,
        };
        self.pause = Some(merged);
        self.update_pause(now_ms);
    }

    /// `unpauseClients` (networking.c:3964-3969).
    pub(crate) fn unpause_clients(&mut self) {
        if self.pause.take().is_some() {
            self.resume_postponed();
        }
    }

    /// `checkClientPauseTimeoutAndReturnIfPaused` (networking.c:3979-3986): ends a pause whose
    /// time is up, then tells whether one is in effect.
    pub(crate) fn paused(&mut self, now_ms: i64) -> bool {
        if self.pause.is_some() {
            self.update_pause(now_ms);
        }
        self.pause.is_some()
    }

    /// `updateClientPauseTypeAndEndTime`: an expired pause ends (`end < mstime`), and every
    /// held client is released when the mode got less strict.
    fn update_pause(&mut self, now_ms: i64) {
        if self.pause.is_some_and(|p| p.end_ms < now_ms) {
            self.pause = None;
            self.resume_postponed();
        }
    }

    /// `unblockPostponedClients`.
    fn resume_postponed(&mut self) {
        for client in std::mem::take(&mut self.postponed) {
            if let Some(argv) = self
                .clients
                .get_mut(&client)
                .and_then(|c| c.postponed.take())
            {
                self.resumed.push((client, argv));
            }
        }
    }

    /// `replicationFeedMonitors` for a command of `client`, in its current database.
    pub(crate) fn feed_client_to_monitors(&mut self, client: ClientId, argv: &[Vec<u8>]) {
        if self.monitors.is_empty() {
            return;
        }
        let Some(state) = self.clients.get(&client) else {
            return;
        };
        let line = commands::monitor_line(
            self.now_us,
            state.db,
            commands::MonitorSender::Client(&state.addr),
            argv,
        );
        self.feed_monitors(line);
    }

    /// Each MONITOR client gets the line as a status reply.
    pub(crate) fn feed_monitors(&mut self, line: String) {
        for &monitor in &self.monitors {
            self.pushes.push((monitor, Reply::Status(line.clone())));
        }
    }

    /// `propagatePendingCommands`: several effects of one command go out wrapped in MULTI/EXEC;
    /// `SELECT` precedes an effect on another database than the last one. Every effect touches
    /// the keys it names (WATCH) and marks lists ready for blocked clients.
    pub(crate) fn flush_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        for (db, effect) in &pending {
            self.touch_effect(*db, effect);
        }
        if !self.config.propagates_effects {
            return;
        }
        let wrap = pending.len() > 1;
        if wrap {
            self.select_for_propagation(pending[0].0);
            self.propagated.push(vec![b"MULTI".to_vec()]);
        }
        for (db, effect) in pending {
            self.select_for_propagation(db);
            self.propagated.push(effect);
        }
        if wrap {
            self.propagated.push(vec![b"EXEC".to_vec()]);
        }
    }

    fn select_for_propagation(&mut self, db: usize) {
        if db != self.propagated_db {
            self.propagated
                .push(vec![b"SELECT".to_vec(), db.to_string().into_bytes()]);
            self.propagated_db = db;
        }
    }

    /// The keys an effect writes: they touch WATCHers and may serve blocked clients.
    fn touch_effect(&mut self, db: usize, effect: &[Vec<u8>]) {
        if self.watched_keys.is_empty() && self.blocking_keys.is_empty() {
            return;
        }
        let Some(name) = effect.first() else { return };
        if name.eq_ignore_ascii_case(b"copy") {
            // COPY writes only its destination, maybe in another database (`DB n`).
            let dst_db = effect
                .windows(2)
                .skip(2)
                .find(|w| w[0].eq_ignore_ascii_case(b"db"))
                .and_then(|w| std::str::from_utf8(&w[1]).ok()?.parse().ok())
                .unwrap_or(db);
            if let Some(key) = effect.get(2) {
                self.touch_key(dst_db, key);
            }
            return;
        }
        let keys: Vec<&Vec<u8>> = match name.to_ascii_lowercase().as_slice() {
            b"del" | b"unlink" => effect[1..].iter().collect(),
            b"mset" | b"msetnx" => effect[1..].iter().step_by(2).collect(),
            b"rename" | b"renamenx" | b"lmove" | b"rpoplpush" => {
                effect[1..].iter().take(2).collect()
            }
            b"bitop" => effect.get(2).into_iter().collect(),
            // SORT ... STORE writes only its destination (`setKey` / `dbDelete`).
            b"sort" => commands::sort_store_key(effect).into_iter().collect(),
            b"publish" | b"select" | b"multi" | b"exec" | b"flushdb" | b"flushall" => Vec::new(),
            _ => effect[1..].iter().take(1).collect(),
        };
        for key in keys {
            self.touch_key(db, key);
        }
    }

    /// `signalModifiedKey` plus `signalKeyAsReady`: WATCHers and blocked clients of (db, key).
    fn touch_key(&mut self, db: usize, key: &[u8]) {
        self.touch_watched_key(db, key);
        if self.blocking_keys.contains_key(&(db, key.to_vec()))
            && !self.ready_keys.iter().any(|(d, k)| *d == db && k == key)
        {
            self.ready_keys.push((db, key.to_vec()));
        }
    }

    /// `touchWatchedKey`: every client watching (db, key) fails its next EXEC, unless it watched
    /// an already expired key that is now merely deleted.
    pub(crate) fn touch_watched_key(&mut self, db: usize, key: &[u8]) {
        let Some(watchers) = self.watched_keys.get(&(db, key.to_vec())).cloned() else {
            return;
        };
        let exists = self.dbs[db].contains(key);
        for client in watchers {
            let Some(state) = self.clients.get_mut(&client) else {
                continue;
            };
            if let Some(w) = state
                .watched
                .iter_mut()
                .find(|w| w.db == db && w.key == key)
                && w.expired
                && !exists
            {
                w.expired = false;
                continue;
            }
            state.dirty_cas = true;
            let watched = std::mem::take(&mut state.watched);
            for w in &watched {
                self.unwatch(client, w);
            }
        }
    }

    /// `touchAllWatchedKeysInDb` (FLUSHDB, FLUSHALL): before the database is emptied.
    pub(crate) fn touch_all_watched_in_db(&mut self, db: usize) {
        let keys: Vec<Vec<u8>> = self
            .watched_keys
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect();
        for key in keys {
            if !self.dbs[db].contains(&key) {
                continue;
            }
            for client in self
                .watched_keys
                .get(&(db, key.clone()))
                .cloned()
                .unwrap_or_default()
            {
                let Some(state) = self.clients.get_mut(&client) else {
                    continue;
                };
                match state
                    .watched
                    .iter_mut()
                    .find(|w| w.db == db && w.key == key)
                {
                    Some(w) if w.expired => w.expired = false,
                    _ => state.dirty_cas = true,
                }
            }
        }
    }

    pub(crate) fn unwatch(&mut self, client: ClientId, watched: &WatchedKey) {
        let slot = (watched.db, watched.key.clone());
        if let Some(list) = self.watched_keys.get_mut(&slot) {
            list.retain(|c| *c != client);
            if list.is_empty() {
                self.watched_keys.remove(&slot);
            }
        }
    }

    pub(crate) fn unsubscribe_channel(&mut self, client: ClientId, channel: &[u8]) {
        remove_subscriber(&mut self.channels, client, channel);
    }

    pub(crate) fn unsubscribe_pattern(&mut self, client: ClientId, pattern: &[u8]) {
        remove_subscriber(&mut self.patterns, client, pattern);
    }

    /// Drops `client` from every channel and pattern it had (RESET, disconnection).
    pub(crate) fn leave_all(
        &mut self,
        client: ClientId,
        channels: Vec<Vec<u8>>,
        patterns: Vec<Vec<u8>>,
    ) {
        for channel in channels {
            remove_subscriber(&mut self.channels, client, &channel);
        }
        for pattern in patterns {
            remove_subscriber(&mut self.patterns, client, &pattern);
        }
    }

    /// `blockForKeys`.
    fn block_client(&mut self, client: ClientId, blocked: super::client::Blocked) {
        for key in &blocked.keys {
            let queue = self
                .blocking_keys
                .entry((blocked.db, key.clone()))
                .or_default();
            if !queue.contains(&client) {
                queue.push_back(client);
            }
        }
        if let Some(state) = self.clients.get_mut(&client) {
            state.blocked = Some(blocked);
        }
    }

    pub(crate) fn remove_blocked(&mut self, client: ClientId, blocked: &super::client::Blocked) {
        for key in &blocked.keys {
            let slot = (blocked.db, key.clone());
            if let Some(queue) = self.blocking_keys.get_mut(&slot) {
                queue.retain(|c| *c != client);
                if queue.is_empty() {
                    self.blocking_keys.remove(&slot);
                }
            }
        }
    }

    /// `unblockClient` with the reply it gets (an error one counts in `errorstats`, as
    /// `afterErrorReply` counts it). False if it was not blocked.
    pub(crate) fn unblock(&mut self, client: ClientId, reply: Reply) -> bool {
        let Some(blocked) = self.clients.get_mut(&client).and_then(|c| c.blocked.take()) else {
            return false;
        };
        self.remove_blocked(client, &blocked);
        self.count_errors(&reply);
        self.unblocked.push((client, reply));
        true
    }

    /// `errorstat_*`: error replies counted by their code.
    fn count_errors(&mut self, reply: &Reply) {
        match reply {
            Reply::Error(e) => {
                let code = e.split(|b| *b == b' ').next().unwrap_or(b"ERR");
                *self
                    .stats
                    .errors
                    .entry(String::from_utf8_lossy(code).into_owned())
                    .or_default() += 1;
            }
            Reply::Sequence(items) | Reply::Array(items) => {
                items.iter().for_each(|r| self.count_errors(r));
            }
            _ => {}
        }
    }

    /// Runs a command for a script (`script.c` `scriptCall`) as the Lua client `lua`. `Err`
    /// carries the error text of checks that fail before the command runs.
    pub(crate) fn call_from_script(
        &mut self,
        lua: &mut ScriptClient,
        now: i64,
        argv: &[Vec<u8>],
    ) -> Result<Reply, String> {
        let Some(spec) = commands::lookup(argv) else {
            let refusal = commands::refused_in_scripts(argv)
                .unwrap_or("Unknown Redis command called from script");
            return Err(refusal.to_string());
        };
        if !spec.arity_ok(argv.len()) {
            return Err("Wrong number of args calling Redis command from script".to_string());
        }
        if spec.flags & flags::NOSCRIPT != 0 {
            return Err("This Redis command is not allowed from script".to_string());
        }
        if lua.read_only && spec.flags & (flags::WRITE | flags::MAY_REPLICATE) != 0 {
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
        if spec.flags & flags::WRITE != 0 {
            self.script_wrote.set(true);
        }
        match spec.kind {
            Kind::Plain(handler) => {
                let mut ctx = Ctx::new(self, lua.caller, now);
                ctx.db = lua.db;
                ctx.protocol = lua.protocol;
                ctx.deny_blocking = true;
                ctx.in_script = true;
                let mut argv = Cow::Borrowed(argv);
                let reply = one_line_errors(handler.run(&mut ctx, &mut argv));
                if spec.name == "select" && !reply.is_error() {
                    lua.db = ctx.db;
                }
                if !self.monitors.is_empty() && spec.flags & flags::ADMIN == 0 {
                    let line = commands::monitor_line(
                        self.now_us,
                        lua.db,
                        commands::MonitorSender::Lua,
                        &argv,
                    );
                    self.feed_monitors(line);
                }
                Ok(reply)
            }
            Kind::Server(_) => Err("This Redis command is not allowed from script".to_string()),
        }
    }
}

/// The fake client a script's `redis.call` runs as (`lctx.lua_client`): the caller's database
/// at the start (a SELECT inside the script does not change the caller's), RESP2 until
/// `redis.setresp(3)`.
pub(crate) struct ScriptClient {
    pub caller: ClientId,
    pub db: usize,
    pub protocol: Protocol,
    /// `#!lua flags=no-writes` or EVAL_RO: write commands are refused.
    pub read_only: bool,
}

/// Drops `client` from the subscribers of `name`, and `name` once nobody is left.
fn remove_subscriber(map: &mut BTreeMap<Vec<u8>, Vec<ClientId>>, client: ClientId, name: &[u8]) {
    if let Some(subs) = map.get_mut(name) {
        subs.retain(|c| *c != client);
        if subs.is_empty() {
            map.remove(name);
        }
    }
}
