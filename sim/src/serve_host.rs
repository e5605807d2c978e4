//! The thread of `locksim serve` that owns the simulated Redis (`RedisServer`, whose Lua state
//! is `!Send`): it takes batches of parsed commands from the connections (see `serve.rs`), runs
//! them in arrival order as Redis's single thread does, and sends each connection one buffer of
//! replies per batch. Around the model it does what `redis-server`'s event loop does: active
//! expiry every 100 ms (`serverCron`), blocked clients (BLPOP, WAIT) and their timeouts, and,
//! while a script runs past `lua-time-limit`, answers everyone else `-BUSY` and obeys
//! `SCRIPT KILL` (`script.c` `scriptInterrupt` → `processEventsWhileBlocked`).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use model::redis::{
    ClientAddr, ClientId, Outcome, Protocol, RedisServer, Reply, ScriptMonitor, ScriptProgress,
    ScriptVerdict, ServerConfig,
};
use tokio::sync::Notify;

/// Active expiry period (hz 10).
const EXPIRE_PERIOD: Duration = Duration::from_millis(100);

/// The I/O side's name for a connection (the model's `ClientId` is assigned on `Connect`).
pub type ConnKey = u64;

/// What a connection's writer receives: reply bytes, or the order to close.
#[derive(Debug)]
pub enum Out {
    Bytes(Vec<u8>),
    Close,
}

/// From the server thread to the connections: everything for them since the last wake-up, so
/// the networking thread is woken once per round of commands, not once per connection.
#[derive(Debug, Default)]
pub struct Outbox {
    queue: Mutex<Vec<(ConnKey, Out)>>,
    pub ready: Notify,
}

impl Outbox {
    /// What arrived since the last call.
    pub fn take(&self) -> Vec<(ConnKey, Out)> {
        self.queue
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default()
    }

    fn ship(&self, mut items: Vec<(ConnKey, Out)>) {
        if items.is_empty() {
            return;
        }
        if let Ok(mut q) = self.queue.lock() {
            q.append(&mut items);
        }
        self.ready.notify_one();
    }
}

/// From the connections to the server thread.
pub enum Event {
    Connect {
        key: ConnKey,
        addr: ClientAddr,
    },
    /// Commands parsed from one read, in order; a protocol error ends the connection after them.
    Commands {
        key: ConnKey,
        commands: Vec<Vec<Vec<u8>>>,
        error: Option<Reply>,
    },
    Disconnect {
        key: ConnKey,
    },
}

/// The wall clock, Unix ms (Redis's `mstime()`).
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A connection as this thread sees it.
struct Conn {
    /// The model's client, once connected (a connection accepted during a busy script waits
    /// for it).
    client: Option<ClientId>,
    addr: ClientAddr,
    /// Replies of the batch being processed, sent in one write.
    pending: Vec<u8>,
    /// While blocked (BLPOP, WAIT) or deferred by a busy script: its next commands, in order.
    queued: VecDeque<Vec<Vec<u8>>>,
    /// A protocol error to answer once the queue is empty, then close.
    error: Option<Reply>,
    /// WAIT: when it answers 0 (`None`: never).
    wait_until: Option<Option<Instant>>,
    /// BLPOP/BRPOP in progress (answered by the model).
    blocked: bool,
    /// Commands deferred by a busy script: processed after it (an ALLOW_BUSY command arrived).
    deferred: bool,
    closing: bool,
}

/// State shared by the loop and the busy-script monitor (which runs inside `execute`).
struct Host {
    inbox: Receiver<Event>,
    conns: BTreeMap<ConnKey, Conn>,
    by_client: BTreeMap<ClientId, ConnKey>,
    /// Disconnects that arrived while a script was busy.
    after_script: Vec<Event>,
    /// Connections accepted but not yet known to the model.
    unconnected: Vec<ConnKey>,
    /// The connection whose script is running (`protectClient`).
    running: Option<ConnKey>,
    lua_time_limit: Duration,
    /// Connections with replies not yet sent.
    dirty: BTreeSet<ConnKey>,
    /// Connections blocked in WAIT.
    waits: BTreeSet<ConnKey>,
    /// A busy script deferred something: look for it once the script is over.
    busy_happened: bool,
    outbox: Arc<Outbox>,
    /// What goes to the connections at the next `ship`.
    outgoing: Vec<(ConnKey, Out)>,
}

impl Host {
    /// A new connection: answered at once (even `-BUSY`), known to the model at the next
    /// opportunity (`connect_pending`).
    fn register(&mut self, key: ConnKey, addr: ClientAddr) {
        self.conns.insert(
            key,
            Conn {
                client: None,
                addr,
                pending: Vec::new(),
                queued: VecDeque::new(),
                error: None,
                wait_until: None,
                blocked: false,
                deferred: false,
                closing: false,
            },
        );
        self.unconnected.push(key);
    }

    fn send_pending(&mut self, key: ConnKey) {
        if let Some(conn) = self.conns.get_mut(&key)
            && !conn.pending.is_empty()
        {
            let bytes = std::mem::take(&mut conn.pending);
            self.outgoing.push((key, Out::Bytes(bytes)));
        }
    }

    fn close(&mut self, key: ConnKey) {
        self.outgoing.push((key, Out::Close));
    }

    /// Hands everything to the networking thread, waking it once.
    fn ship(&mut self) {
        let items = std::mem::take(&mut self.outgoing);
        self.outbox.ship(items);
    }

    fn append(&mut self, key: ConnKey, reply: &Reply, protocol: Protocol) {
        if let Some(conn) = self.conns.get_mut(&key) {
            reply.encode_with(protocol, &mut conn.pending);
            self.dirty.insert(key);
        }
    }
}

/// The `lua-time-limit` of `locksim serve` on the real clock: past it, every checkpoint serves
/// the other connections (`-BUSY`, `SCRIPT KILL`), as `scriptInterrupt` does.
struct BusyMonitor {
    host: Rc<RefCell<Host>>,
    started: Instant,
    killed: bool,
}

const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

impl ScriptMonitor for BusyMonitor {
    fn start(&mut self) {
        self.started = Instant::now();
        self.killed = false;
    }

    fn check(&mut self, progress: &ScriptProgress) -> ScriptVerdict {
        let shared = self.host.clone();
        let Ok(mut host) = shared.try_borrow_mut() else {
            return ScriptVerdict::Continue;
        };
        if self.started.elapsed() < host.lua_time_limit {
            return ScriptVerdict::Continue;
        }
        host.busy_happened = true;
        loop {
            let Ok(event) = host.inbox.try_recv() else {
                break;
            };
            match event {
                Event::Commands {
                    key,
                    commands,
                    error,
                } => self.busy_commands(&mut host, key, commands, error, progress),
                Event::Connect { key, addr } => host.register(key, addr),
                other => host.after_script.push(other),
            }
        }
        if self.killed {
            ScriptVerdict::Kill
        } else {
            ScriptVerdict::Continue
        }
    }
}

impl BusyMonitor {
    /// `processCommand` during a busy script: SCRIPT KILL, QUIT and SHUTDOWN NOSAVE are obeyed;
    /// other ALLOW_BUSY commands (AUTH, HELLO, MULTI, WATCH, ...) need the server and wait for
    /// the script with the rest of their connection's commands; everything else gets `-BUSY`.
    fn busy_commands(
        &mut self,
        host: &mut Host,
        key: ConnKey,
        commands: Vec<Vec<Vec<u8>>>,
        error: Option<Reply>,
        progress: &ScriptProgress,
    ) {
        let running = host.running;
        let Some(conn) = host.conns.get_mut(&key) else {
            return;
        };
        let protocol = Protocol::Resp2;
        for argv in commands {
            let name = argv
                .first()
                .map(|a| a.to_ascii_lowercase())
                .unwrap_or_default();
            let sub = argv
                .get(1)
                .map(|a| a.to_ascii_lowercase())
                .unwrap_or_default();
            if conn.deferred || conn.blocked || conn.wait_until.is_some() || running == Some(key) {
                conn.queued.push_back(argv);
                continue;
            }
            let reply = match (name.as_slice(), sub.as_slice()) {
                (b"script", b"kill") if argv.len() == 2 => {
                    if progress.wrote {
                        Reply::error(
                            "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
                        )
                    } else {
                        self.killed = true;
                        Reply::ok()
                    }
                }
                (b"shutdown", b"nosave") => {
                    eprintln!("locksim serve: SHUTDOWN NOSAVE during a busy script, exiting");
                    std::process::exit(0);
                }
                (b"quit", _) => {
                    conn.closing = true;
                    Reply::ok()
                }
                (
                    b"auth" | b"hello" | b"reset" | b"multi" | b"discard" | b"watch" | b"unwatch",
                    _,
                ) => {
                    conn.deferred = true;
                    conn.queued.push_back(argv);
                    continue;
                }
                _ => Reply::error(BUSY),
            };
            reply.encode_with(protocol, &mut conn.pending);
            if conn.closing {
                break;
            }
        }
        if let Some(e) = error {
            if conn.deferred || conn.blocked || conn.wait_until.is_some() {
                conn.error = Some(e);
            } else {
                e.encode_with(protocol, &mut conn.pending);
                conn.closing = true;
            }
        }
        let close = conn.closing;
        host.send_pending(key);
        if close {
            host.close(key);
        }
        host.ship();
    }
}

/// The server thread: runs until every sender of `inbox` is gone.
pub fn run(config: ServerConfig, inbox: Receiver<Event>, outbox: Arc<Outbox>) {
    let lua_time_limit = Duration::from_millis(config.lua_time_limit_ms);
    let mut server = RedisServer::new(config);
    let host = Rc::new(RefCell::new(Host {
        inbox,
        conns: BTreeMap::new(),
        by_client: BTreeMap::new(),
        after_script: Vec::new(),
        unconnected: Vec::new(),
        running: None,
        lua_time_limit,
        dirty: BTreeSet::new(),
        waits: BTreeSet::new(),
        busy_happened: false,
        outbox,
        outgoing: Vec::new(),
    }));
    server.set_script_monitor(Box::new(BusyMonitor {
        host: host.clone(),
        started: Instant::now(),
        killed: false,
    }));
    let mut next_expire = Instant::now() + EXPIRE_PERIOD;
    loop {
        let wake = wake_time(&host.borrow(), &server, next_expire);
        let event = host
            .borrow()
            .inbox
            .recv_timeout(wake.saturating_duration_since(Instant::now()));
        match event {
            Ok(event) => {
                handle(&host, &mut server, event);
                // Whatever else is already there, before housekeeping.
                loop {
                    let next = host.borrow().inbox.try_recv();
                    match next {
                        Ok(event) => handle(&host, &mut server, event),
                        Err(_) => break,
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = Instant::now();
        if now >= next_expire {
            server.active_expire_cycle(now_ms());
            server.take_propagated();
            next_expire = now + EXPIRE_PERIOD;
        }
        server.expire_blocked(now_ms());
        deliver(&host, &mut server);
        let due: Vec<ConnKey> = {
            let h = host.borrow();
            h.waits
                .iter()
                .filter(|k| {
                    h.conns
                        .get(k)
                        .is_none_or(|c| c.wait_until.flatten().is_some_and(|t| t <= now))
                })
                .copied()
                .collect()
        };
        for key in due {
            let mut h = host.borrow_mut();
            h.waits.remove(&key);
            if let Some(conn) = h.conns.get_mut(&key) {
                conn.wait_until = None;
                h.append(key, &Reply::Integer(0), Protocol::Resp2);
            }
            drop(h);
            resume(&host, &mut server, key);
        }
        flush_all(&host);
    }
}

/// When the loop must wake up: the next expiry cycle, WAIT timeout or BLPOP timeout.
fn wake_time(host: &Host, server: &RedisServer, next_expire: Instant) -> Instant {
    let mut wake = next_expire;
    for key in &host.waits {
        if let Some(Some(t)) = host.conns.get(key).and_then(|c| c.wait_until) {
            wake = wake.min(t);
        }
    }
    if let Some(deadline) = server.next_block_deadline() {
        let ms = (deadline - now_ms()).max(0) as u64;
        wake = wake.min(Instant::now() + Duration::from_millis(ms));
    }
    wake
}

fn handle(host: &Rc<RefCell<Host>>, server: &mut RedisServer, event: Event) {
    match event {
        Event::Connect { key, addr } => {
            host.borrow_mut().register(key, addr);
            connect_pending(host, server);
        }
        Event::Commands {
            key,
            commands,
            error,
        } => {
            {
                let mut h = host.borrow_mut();
                let Some(conn) = h.conns.get_mut(&key) else {
                    return;
                };
                conn.queued.extend(commands);
                if error.is_some() {
                    conn.error = error;
                }
            }
            resume(host, server, key);
            flush_all(host);
        }
        Event::Disconnect { key } => {
            let removed = host.borrow_mut().conns.remove(&key);
            if let Some(conn) = removed
                && let Some(client) = conn.client
            {
                host.borrow_mut().by_client.remove(&client);
                server.disconnect(client);
            }
        }
    }
}

/// Runs a connection's queued commands until it blocks, closes or has none left.
fn resume(host: &Rc<RefCell<Host>>, server: &mut RedisServer, key: ConnKey) {
    loop {
        let (argv, client) = {
            let mut h = host.borrow_mut();
            let Some(conn) = h.conns.get_mut(&key) else {
                return;
            };
            conn.deferred = false;
            if conn.blocked || conn.wait_until.is_some() || conn.closing {
                return;
            }
            let Some(client) = conn.client else { return };
            match conn.queued.pop_front() {
                Some(argv) => (argv, client),
                None => {
                    if let Some(error) = conn.error.take() {
                        let protocol = server.protocol(client);
                        error.encode_with(protocol, &mut conn.pending);
                        conn.closing = true;
                        h.send_pending(key);
                        h.close(key);
                    }
                    return;
                }
            }
        };
        host.borrow_mut().running = Some(key);
        let outcome = server.execute(client, now_ms(), &argv);
        host.borrow_mut().running = None;
        server.take_propagated();
        let protocol = server.protocol(client);
        let mut close = false;
        match outcome {
            Outcome::Reply(reply) => host.borrow_mut().append(key, &reply, protocol),
            Outcome::Close(reply) => {
                host.borrow_mut().append(key, &reply, protocol);
                close = true;
            }
            Outcome::Wait {
                numreplicas,
                timeout_ms,
            } => {
                if numreplicas <= 0 {
                    host.borrow_mut().append(key, &Reply::Integer(0), protocol);
                } else {
                    let mut h = host.borrow_mut();
                    if let Some(conn) = h.conns.get_mut(&key) {
                        conn.wait_until =
                            Some((timeout_ms > 0).then(|| {
                                Instant::now() + Duration::from_millis(timeout_ms as u64)
                            }));
                        h.waits.insert(key);
                    }
                }
            }
            Outcome::Blocked => {
                if let Some(conn) = host.borrow_mut().conns.get_mut(&key) {
                    conn.blocked = true;
                }
            }
        }
        deliver(host, server);
        handle_after_script(host, server);
        if close {
            let mut h = host.borrow_mut();
            if let Some(conn) = h.conns.get_mut(&key) {
                conn.closing = true;
            }
            h.send_pending(key);
            h.close(key);
            return;
        }
    }
}

/// Pub/sub messages, answers to unblocked clients, and CLIENT KILL's victims.
fn deliver(host: &Rc<RefCell<Host>>, server: &mut RedisServer) {
    let pushes = server.take_pushes();
    let unblocked = server.take_unblocked();
    let killed = server.take_killed();
    let mut resumed = Vec::new();
    {
        let mut h = host.borrow_mut();
        for (client, reply) in pushes {
            if let Some(&key) = h.by_client.get(&client) {
                let protocol = server.protocol(client);
                h.append(key, &reply, protocol);
            }
        }
        for (client, reply) in unblocked {
            if let Some(&key) = h.by_client.get(&client) {
                let protocol = server.protocol(client);
                h.append(key, &reply, protocol);
                if let Some(conn) = h.conns.get_mut(&key) {
                    conn.blocked = false;
                }
                resumed.push(key);
            }
        }
        for client in killed {
            if let Some(key) = h.by_client.remove(&client)
                && let Some(conn) = h.conns.get_mut(&key)
            {
                conn.client = None;
                conn.closing = true;
                h.close(key);
            }
        }
    }
    for key in resumed {
        resume(host, server, key);
    }
}

/// Makes the model know the connections accepted since (`CLIENT LIST`, `HELLO`'s id), and runs
/// what they sent meanwhile.
fn connect_pending(host: &Rc<RefCell<Host>>, server: &mut RedisServer) {
    let keys = std::mem::take(&mut host.borrow_mut().unconnected);
    for key in keys {
        let addr = match host.borrow().conns.get(&key) {
            Some(conn) => conn.addr.clone(),
            None => continue,
        };
        let client = server.connect_from(addr, now_ms());
        {
            let mut h = host.borrow_mut();
            h.by_client.insert(client, key);
            if let Some(conn) = h.conns.get_mut(&key) {
                conn.client = Some(client);
            }
        }
        resume(host, server, key);
    }
}

/// Connects and disconnects that arrived while a script was busy, and the connections whose
/// commands waited for it.
fn handle_after_script(host: &Rc<RefCell<Host>>, server: &mut RedisServer) {
    if !std::mem::take(&mut host.borrow_mut().busy_happened) {
        return;
    }
    connect_pending(host, server);
    let events = std::mem::take(&mut host.borrow_mut().after_script);
    for event in events {
        handle(host, server, event);
    }
    let deferred: Vec<ConnKey> = host
        .borrow()
        .conns
        .iter()
        .filter(|(_, c)| c.deferred)
        .map(|(k, _)| *k)
        .collect();
    for key in deferred {
        resume(host, server, key);
    }
}

/// Sends every connection its batch of replies: one write each.
fn flush_all(host: &Rc<RefCell<Host>>) {
    let mut h = host.borrow_mut();
    let keys = std::mem::take(&mut h.dirty);
    for key in keys {
        h.send_pending(key);
    }
    h.ship();
}
