//! The state `locksim serve`'s connection tasks share on its one thread, as `redis-server`'s
//! event loop does: the simulated Redis (`RedisServer`), the connections, what one command
//! delivers to others (pub/sub messages, answers to blocked clients, CLIENT KILL), and, while a
//! script runs past `lua-time-limit`, the service Redis gives everyone else meanwhile
//! (`script.c` `scriptInterrupt` → `processEventsWhileBlocked`): the thread is inside the
//! script, so the monitor reads and writes the connections' sockets itself (they are
//! non-blocking; the tasks owning them are suspended), answers `-BUSY`, obeys `SCRIPT KILL`, and
//! accepts new connections, which get their task once the script is over.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::os::fd::RawFd;
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use model::redis::{
    ClientAddr, ClientId, Outcome, Protocol, RedisServer, Reply, RequestParser, ScriptMonitor,
    ScriptProgress, ScriptVerdict,
};
use tokio::sync::Notify;

/// The wall clock, Unix ms (Redis's `mstime()`).
pub fn now_ms() -> i64 {
    now_us().div_euclid(1000)
}

/// The wall clock, Unix µs (Redis's `ustime()`: MONITOR's timestamps).
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// What a connection is doing between commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    Ready,
    /// BLPOP/BRPOP: answered by `deliver` (served or timed out).
    Blocked,
    /// WAIT with replicas to wait for: answered 0 at the deadline (`None`: never).
    Waiting(Option<Instant>),
}

/// A connection's buffers, shared by its task and the busy-script monitor.
pub struct ConnIo {
    pub input: BytesMut,
    pub parser: RequestParser,
    /// Parsed commands not run yet.
    pub queued: VecDeque<Vec<Vec<u8>>>,
    /// A protocol error to answer after the queued commands, then close.
    pub protocol_error: Option<Reply>,
    /// Replies not written yet.
    pub output: Vec<u8>,
    /// The task is writing: the monitor must not write to the socket meanwhile.
    pub writing: bool,
    /// The connection is in `Host::unflushed`: its replies go out when every ready connection
    /// has run.
    pub flush_queued: bool,
    /// The socket took only part of the replies: the task writes the rest when it can.
    pub write_blocked: bool,
    /// The task let go of the socket: its descriptor may belong to another connection now.
    pub released: bool,
    pub state: ConnState,
    /// A busy script made a command of this connection wait for it.
    pub deferred: bool,
    pub closing: bool,
    /// The monitor read the end of the stream.
    pub eof: bool,
    /// `parse_input` left commands in `input` until the one before has run.
    pub held_back: bool,
}

/// One connection.
pub struct Conn {
    /// The model's client (a connection accepted during a busy script gets one afterwards).
    pub client: Cell<Option<ClientId>>,
    pub addr: ClientAddr,
    pub fd: RawFd,
    pub io: RefCell<ConnIo>,
    /// Something for this connection's task: commands to run, replies to write, or a close.
    pub wake: Notify,
    /// The client has yet to AUTH, as of its last command (the busy-script monitor parses while
    /// the server is busy, so the host keeps it here).
    pub auth_required: Cell<bool>,
}

impl Conn {
    pub fn new(addr: ClientAddr, fd: RawFd) -> Rc<Conn> {
        Rc::new(Conn {
            client: Cell::new(None),
            addr,
            fd,
            io: RefCell::new(ConnIo {
                input: BytesMut::new(),
                parser: RequestParser::new(),
                queued: VecDeque::new(),
                protocol_error: None,
                output: Vec::new(),
                writing: false,
                flush_queued: false,
                write_blocked: false,
                released: false,
                state: ConnState::Ready,
                deferred: false,
                closing: false,
                eof: false,
                held_back: false,
            }),
            wake: Notify::new(),
            auth_required: Cell::new(false),
        })
    }

    /// Parses what was read; a protocol error ends the input. A client that has yet to AUTH is
    /// held to Redis's limits for it (10 arguments, 16 KB each) and gets one command parsed at
    /// a time, the next after this one ran (`processInputBuffer` runs each command before it
    /// parses the next, so an AUTH lifts the limits for what follows it).
    pub fn parse_input(&self) {
        let auth_required = self.auth_required.get();
        let mut io = self.io.borrow_mut();
        let io = &mut *io;
        if io.protocol_error.is_some() {
            io.input.clear();
            return;
        }
        io.parser.set_unauthenticated(auth_required);
        io.held_back = false;
        loop {
            if auth_required && !io.queued.is_empty() {
                io.held_back = !io.input.is_empty();
                break;
            }
            match io.parser.parse(&mut io.input) {
                Ok(Some(argv)) => io.queued.push_back(argv),
                Ok(None) => break,
                Err(e) => {
                    io.protocol_error = Some(e.reply());
                    io.input.clear();
                    break;
                }
            }
        }
        if io.input.is_empty() {
            // Its memory goes back: an idle connection keeps no input buffer, and one that sent
            // a 512 MB value does not keep 512 MB.
            io.input = BytesMut::new();
        }
    }
}

/// A connection accepted by the monitor during a busy script, waiting for its task.
pub struct Accepted {
    pub conn: Rc<Conn>,
    pub unix: bool,
}

/// Everything the connection tasks share.
pub struct Host {
    pub server: RefCell<RedisServer>,
    pub conns: RefCell<BTreeMap<ClientId, Rc<Conn>>>,
    pub clients: Cell<usize>,
    pub maxclients: usize,
    /// The listening sockets, for accepting during a busy script: (fd, is Unix).
    pub listeners: RefCell<Vec<(RawFd, bool)>>,
    /// The connection whose command is running (`protectClient`).
    running: Cell<Option<ClientId>>,
    /// Accepted during a busy script; `serve.rs` gives them tasks afterwards.
    pub accepted: RefCell<Vec<Accepted>>,
    /// Connections the monitor gave work to.
    touched: RefCell<Vec<Rc<Conn>>>,
    /// A client blocked with a deadline: the timer task looks again.
    pub timers: Notify,
    /// Connections with replies to write once every ready connection has run.
    unflushed: RefCell<Vec<Rc<Conn>>>,
    /// `unflushed` got its first connection: the flushing task runs after the ready ones.
    pub flush: Notify,
    lua_time_limit: Duration,
    /// `requirepass` is set: a connection accepted during a busy script must AUTH.
    password_required: bool,
}

impl Host {
    pub fn new(server: RedisServer, maxclients: usize, lua_time_limit: Duration) -> Rc<Host> {
        let password_required = server.auth_required(None);
        let host = Rc::new(Host {
            server: RefCell::new(server),
            conns: RefCell::new(BTreeMap::new()),
            clients: Cell::new(0),
            maxclients,
            listeners: RefCell::new(Vec::new()),
            running: Cell::new(None),
            accepted: RefCell::new(Vec::new()),
            touched: RefCell::new(Vec::new()),
            timers: Notify::new(),
            unflushed: RefCell::new(Vec::new()),
            flush: Notify::new(),
            lua_time_limit,
            password_required,
        });
        host.server
            .borrow_mut()
            .set_script_monitor(Box::new(BusyMonitor {
                host: Rc::downgrade(&host),
                started: Instant::now(),
                killed: false,
            }));
        host
    }

    /// A new connection known to the model.
    pub fn connect(&self, conn: &Rc<Conn>) {
        let client = self
            .server
            .borrow_mut()
            .connect_from(conn.addr.clone(), now_ms());
        conn.auth_required
            .set(self.server.borrow().auth_required(Some(client)));
        conn.client.set(Some(client));
        self.conns.borrow_mut().insert(client, conn.clone());
    }

    pub fn disconnect(&self, conn: &Conn) {
        if let Some(client) = conn.client.take() {
            self.conns.borrow_mut().remove(&client);
            self.server.borrow_mut().disconnect(client);
        }
    }

    /// Runs the connection's queued commands until it blocks, closes or has none left.
    pub fn run_queued(&self, conn: &Rc<Conn>) {
        loop {
            let argv = {
                let mut io = conn.io.borrow_mut();
                io.deferred = false;
                if io.state != ConnState::Ready || io.closing {
                    return;
                }
                match io.queued.pop_front() {
                    Some(argv) => argv,
                    None if io.held_back => {
                        drop(io);
                        conn.parse_input();
                        continue;
                    }
                    None => {
                        if let Some(error) = io.protocol_error.take() {
                            error.encode_with(Protocol::Resp2, &mut io.output);
                            io.closing = true;
                        }
                        return;
                    }
                }
            };
            let Some(client) = conn.client.get() else {
                return;
            };
            self.running.set(Some(client));
            let outcome = self
                .server
                .borrow_mut()
                .execute_owned_at_us(client, now_us(), argv);
            self.running.set(None);
            let (protocol, own_pushes) = {
                let mut server = self.server.borrow_mut();
                conn.auth_required.set(server.auth_required(Some(client)));
                (server.protocol(client), server.take_pushes_for(client))
            };
            {
                let mut io = conn.io.borrow_mut();
                for push in own_pushes {
                    push.encode_with(protocol, &mut io.output);
                }
                match outcome {
                    Outcome::Reply(reply) => reply.encode_with(protocol, &mut io.output),
                    Outcome::Close(reply) => {
                        reply.encode_with(protocol, &mut io.output);
                        io.closing = true;
                    }
                    Outcome::Wait {
                        numreplicas,
                        timeout_ms,
                    } => {
                        if numreplicas <= 0 {
                            Reply::Integer(0).encode_with(protocol, &mut io.output);
                        } else {
                            io.state = ConnState::Waiting((timeout_ms > 0).then(|| {
                                Instant::now() + Duration::from_millis(timeout_ms as u64)
                            }));
                        }
                    }
                    Outcome::Blocked => {
                        io.state = ConnState::Blocked;
                        self.timers.notify_one();
                    }
                }
            }
            self.deliver();
            self.after_busy();
        }
    }

    /// Pub/sub messages and MONITOR lines, answers to unblocked clients, the commands a
    /// CLIENT PAUSE held and its end released, and CLIENT KILL's victims.
    pub fn deliver(&self) {
        let (pushes, unblocked, resumed, killed) = {
            let mut server = self.server.borrow_mut();
            (
                server.take_pushes(),
                server.take_unblocked(),
                server.take_resumed(),
                server.take_killed(),
            )
        };
        if pushes.is_empty() && unblocked.is_empty() && resumed.is_empty() && killed.is_empty() {
            return;
        }
        let conns = self.conns.borrow();
        for (client, argv) in resumed {
            let Some(conn) = conns.get(&client) else {
                continue;
            };
            let mut io = conn.io.borrow_mut();
            io.queued.push_front(argv);
            io.state = ConnState::Ready;
            conn.wake.notify_one();
        }
        for (client, reply) in pushes.into_iter().chain(unblocked) {
            let Some(conn) = conns.get(&client) else {
                continue;
            };
            let protocol = self.server.borrow().protocol(client);
            let mut io = conn.io.borrow_mut();
            reply.encode_with(protocol, &mut io.output);
            if io.state == ConnState::Blocked && !matches!(reply, Reply::Push(_)) {
                io.state = ConnState::Ready;
            }
            conn.wake.notify_one();
        }
        for client in killed {
            if let Some(conn) = conns.get(&client) {
                conn.io.borrow_mut().closing = true;
                conn.wake.notify_one();
            }
        }
    }

    /// After a busy script: the connections it gave work to are woken.
    fn after_busy(&self) {
        let touched = std::mem::take(&mut *self.touched.borrow_mut());
        for conn in touched {
            conn.wake.notify_one();
        }
    }

    /// Queues the connection's replies for `flush`; false if they cannot go that way (the
    /// socket was full last time: the task waits until it takes more and writes them itself).
    pub fn queue_flush(&self, conn: &Rc<Conn>) -> bool {
        let mut io = conn.io.borrow_mut();
        if io.flush_queued {
            return true;
        }
        if io.write_blocked {
            return false;
        }
        io.flush_queued = true;
        let mut unflushed = self.unflushed.borrow_mut();
        if unflushed.is_empty() {
            self.flush.notify_one();
        }
        unflushed.push(conn.clone());
        true
    }

    /// Writes the queued connections' replies, each in one `send` when the socket takes it all
    /// (Redis's `beforeSleep` → `handleClientsWithPendingWrites`, redis@7.0.15
    /// `src/server.c:1669`, `src/networking.c:2041`): called once every connection woken with the queued ones has
    /// run, so that no reply goes out between two connections' commands. A reply written then
    /// wakes its client, which the scheduler puts on this CPU and runs in this thread's place
    /// (a context switch per write, twice redis-server's under `EVALSHA -P 16`). What the
    /// socket does not take is left for the connection's task; a failed write closes it.
    pub fn flush(&self) {
        let unflushed = std::mem::take(&mut *self.unflushed.borrow_mut());
        for conn in unflushed {
            let mut io = conn.io.borrow_mut();
            io.flush_queued = false;
            if io.released || io.writing || io.output.is_empty() {
                continue;
            }
            match send_nonblocking(conn.fd, &io.output) {
                Ok(written) if written == io.output.len() => io.output.clear(),
                Ok(written) => {
                    io.output.drain(..written);
                    io.write_blocked = true;
                    conn.wake.notify_one();
                }
                Err(_) => {
                    io.output.clear();
                    io.closing = true;
                    conn.wake.notify_one();
                }
            }
        }
    }

    /// The next time the timer task must look: the next active expiry cycle or BLPOP timeout.
    pub fn next_block_deadline(&self) -> Option<Instant> {
        let deadline = self.server.borrow().next_block_deadline()?;
        let ms = (deadline - now_ms()).max(0) as u64;
        Some(Instant::now() + Duration::from_millis(ms))
    }
}

/// `lua-time-limit` on the real clock: past it, every checkpoint of the running script serves
/// the other connections.
struct BusyMonitor {
    host: Weak<Host>,
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
        let Some(host) = self.host.upgrade() else {
            return ScriptVerdict::Continue;
        };
        if self.started.elapsed() < host.lua_time_limit {
            return ScriptVerdict::Continue;
        }
        self.accept(&host);
        let conns: Vec<Rc<Conn>> = host
            .conns
            .borrow()
            .values()
            .cloned()
            .chain(host.accepted.borrow().iter().map(|a| a.conn.clone()))
            .collect();
        for conn in readable(&conns) {
            self.serve(&host, &conn, progress);
        }
        if self.killed {
            ScriptVerdict::Kill
        } else {
            ScriptVerdict::Continue
        }
    }
}

impl BusyMonitor {
    /// New connections, as `acceptCommonHandler` (maxclients included); their tasks come later.
    fn accept(&self, host: &Host) {
        let listeners = host.listeners.borrow().clone();
        for (fd, unix) in listeners {
            loop {
                // SAFETY: accept4 on our own listening socket; the new descriptor is ours.
                let client = unsafe {
                    libc::accept4(
                        fd,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    )
                };
                if client < 0 {
                    break;
                }
                if host.clients.get() >= host.maxclients {
                    write_all(client, b"-ERR max number of clients reached\r\n");
                    // SAFETY: closing the descriptor we just accepted.
                    unsafe { libc::close(client) };
                    continue;
                }
                host.clients.set(host.clients.get() + 1);
                let addr = ClientAddr {
                    peer: String::from("?:0"),
                    local: String::from("?:0"),
                    unix_socket: None,
                };
                let conn = Conn::new(addr, client);
                conn.auth_required.set(host.password_required);
                host.accepted.borrow_mut().push(Accepted { conn, unix });
            }
        }
    }

    /// `processCommand` during a busy script, for one connection's new input.
    fn serve(&mut self, host: &Host, conn: &Rc<Conn>, progress: &ScriptProgress) {
        let running = host.running.get();
        let own = conn.client.get().is_some() && conn.client.get() == running;
        {
            let mut io = conn.io.borrow_mut();
            match read_available(conn.fd, &mut io.input) {
                ReadResult::Data => {}
                ReadResult::Closed => {
                    io.eof = true;
                    return;
                }
                ReadResult::Nothing => return,
            }
        }
        conn.parse_input();
        let mut io = conn.io.borrow_mut();
        let io = &mut *io;
        let mut rest = VecDeque::new();
        while let Some(argv) = io.queued.pop_front() {
            if own || io.deferred || io.closing || io.state != ConnState::Ready {
                rest.push_back(argv);
                continue;
            }
            let name = argv
                .first()
                .map(|a| a.to_ascii_lowercase())
                .unwrap_or_default();
            let sub = argv
                .get(1)
                .map(|a| a.to_ascii_lowercase())
                .unwrap_or_default();
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
                    io.closing = true;
                    Reply::ok()
                }
                (
                    b"auth" | b"hello" | b"reset" | b"multi" | b"discard" | b"watch" | b"unwatch",
                    _,
                ) => {
                    io.deferred = true;
                    rest.push_back(argv);
                    continue;
                }
                _ => Reply::error(BUSY),
            };
            // Errors and +OK read the same in RESP2 and RESP3.
            reply.encode_with(Protocol::Resp2, &mut io.output);
        }
        io.queued = rest;
        if !io.writing && !io.output.is_empty() {
            let written = write_all(conn.fd, &io.output);
            io.output.drain(..written);
        }
        host.touched.borrow_mut().push(conn.clone());
    }
}

/// The connections with input waiting (`poll`, no timeout).
fn readable(conns: &[Rc<Conn>]) -> Vec<Rc<Conn>> {
    let candidates: Vec<&Rc<Conn>> = conns
        .iter()
        .filter(|c| c.io.try_borrow().is_ok_and(|io| !io.eof))
        .collect();
    let mut fds: Vec<libc::pollfd> = candidates
        .iter()
        .map(|c| libc::pollfd {
            fd: c.fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: poll over a valid array of our own descriptors, not blocking.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    if ready <= 0 {
        return Vec::new();
    }
    candidates
        .into_iter()
        .zip(&fds)
        .filter(|(_, p)| p.revents != 0)
        .map(|(c, _)| c.clone())
        .collect()
}

enum ReadResult {
    Data,
    Nothing,
    Closed,
}

/// Reads what is there (at most 64 KiB), without blocking.
fn read_available(fd: RawFd, input: &mut BytesMut) -> ReadResult {
    let mut chunk = [0u8; 16 * 1024];
    let mut got = false;
    for _ in 0..4 {
        // SAFETY: read into a local buffer of the given size from our own descriptor.
        let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
        match n {
            0 => return ReadResult::Closed,
            n if n < 0 => break,
            n => {
                input.extend_from_slice(&chunk[..n as usize]);
                got = true;
            }
        }
    }
    if got {
        ReadResult::Data
    } else {
        ReadResult::Nothing
    }
}

/// Writes as much as the socket takes now without blocking (`MSG_NOSIGNAL`: a closed peer is
/// an error, not a SIGPIPE); how many bytes.
fn send_nonblocking(fd: RawFd, mut bytes: &[u8]) -> std::io::Result<usize> {
    let total = bytes.len();
    while !bytes.is_empty() {
        // SAFETY: send from a live slice on our own descriptor.
        let n = unsafe {
            libc::send(
                fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let error = std::io::Error::last_os_error();
            match error.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock => break,
                _ => return Err(error),
            }
        }
        bytes = &bytes[n as usize..];
    }
    Ok(total - bytes.len())
}

/// Writes as much as the socket takes now; how many bytes.
fn write_all(fd: RawFd, mut bytes: &[u8]) -> usize {
    let total = bytes.len();
    while !bytes.is_empty() {
        // SAFETY: write from a live slice to our own descriptor.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            break;
        }
        bytes = &bytes[n as usize..];
    }
    total - bytes.len()
}
