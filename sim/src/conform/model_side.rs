//! Side (b) of a situation: the modelled scheme — the same `LockScheme` code the simulation
//! runs — against model Redis servers on a virtual clock, each watched by a MONITOR client as
//! the real side's `locksim serve` instances are.
//!
//! The clock (`model::locks::virtual_time`, shared with the scheme unit tests) only moves
//! when every task waits: commands
//! take no time, a sleep wakes at its deadline, and every 100 ms the servers' cron runs (active
//! expiry, the end of a CLIENT PAUSE). A command a pause holds back waits for the pause's end
//! or the client's own timeout; on that timeout the client drops the connection, as the
//! simulation's clients do (`nodes/client/env.rs`), and the server forgets the held command.
//! The next command on a connection waits for the one before it.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use model::locks::virtual_time::{EPOCH_MS, Mailboxes, VirtualTime, XorShift};
use model::locks::{
    CallError, LocalBoxFuture, LockEnv, LockScheme, SchemeSpec, Subscription, TaskGuard,
};
use model::redis::{ClientAddr, ClientId, Outcome, RedisServer, Reply, ServerConfig};

use super::situation::{Op, Situation, Step};
use super::transcript::{Line, parse_line};

/// `hz 10`: the cron's period.
const CRON_MS: u64 = 100;
/// The address of the harness's silent subscribers (`Step::SilentSubscriber`).
const SILENT_PEER: &str = "127.0.0.1:3";
/// A situation that has not ended after this much virtual time is a mistake.
const MAX_VIRTUAL_MS: u64 = 4 * 3600 * 1000;

struct Master {
    server: RefCell<RedisServer>,
    monitor: ClientId,
    admin: ClientId,
    lines: RefCell<Vec<Line>>,
    /// Replies of commands a pause held, by connection, once they ran.
    replies: RefCell<BTreeMap<ClientId, Reply>>,
    /// Connections whose last command is still held.
    held: RefCell<BTreeSet<ClientId>>,
    /// Pub/sub messages for subscribed connections.
    mailboxes: Mailboxes,
}

struct World {
    /// The virtual clock and the clients' background tasks.
    time: VirtualTime,
    masters: Vec<Master>,
    next_port: Cell<u32>,
}

impl World {
    fn new(masters: usize) -> Rc<World> {
        let masters = (0..masters)
            .map(|_| {
                let mut server = RedisServer::new(ServerConfig::default());
                let monitor = server.connect_from(addr("127.0.0.1:1"), EPOCH_MS);
                let admin = server.connect_from(addr("127.0.0.1:2"), EPOCH_MS);
                server.execute(monitor, EPOCH_MS, &[b"MONITOR".to_vec()]);
                Master {
                    server: RefCell::new(server),
                    monitor,
                    admin,
                    lines: RefCell::default(),
                    replies: RefCell::default(),
                    held: RefCell::default(),
                    mailboxes: Mailboxes::default(),
                }
            })
            .collect();
        Rc::new(World {
            time: VirtualTime::default(),
            masters,
            next_port: Cell::new(40_000),
        })
    }

    fn wall_ms(&self) -> i64 {
        self.time.wall_ms()
    }

    fn now_ms(&self) -> u64 {
        self.time.now_ms()
    }

    fn connect(&self, master: usize) -> ClientId {
        let port = self.next_port.get();
        self.next_port.set(port + 1);
        self.masters[master]
            .server
            .borrow_mut()
            .connect_from(addr(&format!("127.0.0.1:{port}")), self.wall_ms())
    }

    fn disconnect(&self, master: usize, client: ClientId) {
        let m = &self.masters[master];
        m.server.borrow_mut().disconnect(client);
        m.held.borrow_mut().remove(&client);
        m.replies.borrow_mut().remove(&client);
    }

    /// Runs one command now, then whatever it released (held commands, blocked clients).
    fn execute(&self, master: usize, client: ClientId, argv: &[Vec<u8>]) -> Outcome {
        let outcome = self.masters[master].server.borrow_mut().execute_at_us(
            client,
            self.wall_ms() * 1000,
            argv,
        );
        self.deliver(master);
        outcome
    }

    /// MONITOR lines, pub/sub messages, and the commands a pause's end released (run now).
    fn deliver(&self, master: usize) {
        let m = &self.masters[master];
        loop {
            let (pushes, unblocked, resumed) = {
                let mut server = m.server.borrow_mut();
                (
                    server.take_pushes(),
                    server.take_unblocked(),
                    server.take_resumed(),
                )
            };
            for (to, push) in pushes {
                if to == m.monitor {
                    if let Reply::Status(text) = &push
                        && let Some(line) = parse_line(text)
                    {
                        m.lines.borrow_mut().push(line);
                    }
                } else {
                    m.mailboxes.deliver(to, push);
                }
            }
            for (client, reply) in unblocked {
                m.replies.borrow_mut().insert(client, reply);
            }
            // The host closes what CLIENT KILL named (`take_killed`).
            let killed = m.server.borrow_mut().take_killed();
            for client in killed {
                self.disconnect(master, client);
            }
            if resumed.is_empty() {
                return;
            }
            for (client, argv) in resumed {
                let outcome =
                    m.server
                        .borrow_mut()
                        .execute_at_us(client, self.wall_ms() * 1000, &argv);
                if let Some(reply) = outcome.into_reply() {
                    m.replies.borrow_mut().insert(client, reply);
                }
            }
        }
    }

    /// `serverCron` of every master.
    fn cron(&self) {
        for (i, m) in self.masters.iter().enumerate() {
            {
                let mut server = m.server.borrow_mut();
                server.active_expire_cycle(self.wall_ms());
                server.expire_blocked(self.wall_ms());
                server.take_propagated();
            }
            self.deliver(i);
        }
    }

    fn admin(&self, master: usize, command: &[String]) {
        let argv: Vec<Vec<u8>> = command.iter().map(|a| a.as_bytes().to_vec()).collect();
        let admin = self.masters[master].admin;
        self.execute(master, admin, &argv);
    }

    /// A connection from `SILENT_PEER` named `name`, subscribed to `channel`, never read.
    fn silent_subscriber(&self, master: usize, name: &str, channel: &str) {
        let conn = self.masters[master]
            .server
            .borrow_mut()
            .connect_from(addr(SILENT_PEER), self.wall_ms());
        self.subscribe(master, conn, Some(name), channel);
    }

    /// Names connection `conn` (when a name is given) and subscribes it to `channel`: a
    /// library's subscription and the harness's silent subscriber alike.
    fn subscribe(&self, master: usize, conn: ClientId, name: Option<&str>, channel: &str) {
        if let Some(name) = name {
            self.execute(
                master,
                conn,
                &[b"CLIENT".to_vec(), b"SETNAME".to_vec(), name.into()],
            );
        }
        self.execute(master, conn, &[b"SUBSCRIBE".to_vec(), channel.into()]);
    }

    /// Drives every task until `done` says so or virtual time reaches `until_ms`.
    /// As the real side's drain: a call a pause still holds is in flight, and is over only
    /// once it ran (or its client gave up on it).
    fn run_until_quiet(&self) -> Result<(), String> {
        self.run(MAX_VIRTUAL_MS, &|| {
            !self
                .masters
                .iter()
                .any(|m| m.server.borrow().holds_paused_commands())
        })
    }

    fn run(&self, until_ms: u64, done: &dyn Fn() -> bool) -> Result<(), String> {
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            // Tasks spawned while polling are polled in the next round.
            loop {
                self.time.clear_wakeups();
                if !self.time.poll_tasks(&mut cx) {
                    break;
                }
            }
            if done() || self.now_ms() >= until_ms {
                return Ok(());
            }
            let now = self.now_ms();
            let cron = (now / CRON_MS + 1) * CRON_MS;
            let next = self
                .time
                .next_wakeup()
                .map_or(cron, |w| w.min(cron))
                .min(until_ms);
            if next > MAX_VIRTUAL_MS {
                return Err(format!(
                    "the model's run did not end within {} virtual hours",
                    MAX_VIRTUAL_MS / 3_600_000
                ));
            }
            self.time.set_now_ms(next);
            if next.is_multiple_of(CRON_MS) {
                self.cron();
            }
        }
    }
}

fn addr(peer: &str) -> ClientAddr {
    ClientAddr {
        peer: peer.to_string(),
        ..ClientAddr::default()
    }
}

/// One lock object's client: its own connection to each master.
struct Env {
    world: Rc<World>,
    name: String,
    conns: RefCell<Vec<Option<ClientId>>>,
    rng: XorShift,
    command_timeout_ms: Option<u64>,
}

impl Env {
    fn conn(&self, master: usize) -> ClientId {
        let mut conns = self.conns.borrow_mut();
        *conns[master].get_or_insert_with(|| self.world.connect(master))
    }

    async fn call_within(
        &self,
        master: usize,
        argv: Vec<Vec<u8>>,
        timeout_ms: Option<u64>,
    ) -> Result<Reply, CallError> {
        let deadline = timeout_ms.map(|t| self.world.now_ms() + t);
        let conn = self.conn(master);
        let m = &self.world.masters[master];
        // The connection's previous command first (a pipelining client's).
        let turn = std::future::poll_fn(|_| {
            if !m.held.borrow().contains(&conn) {
                return Poll::Ready(true);
            }
            if deadline.is_some_and(|d| self.world.now_ms() >= d) {
                return Poll::Ready(false);
            }
            if let Some(d) = deadline {
                self.world.time.wake_at(d);
            }
            Poll::Pending
        })
        .await;
        if !turn {
            self.drop_conn(master, conn);
            return Err(CallError::Timeout);
        }
        match self.world.execute(master, conn, &argv) {
            Outcome::Reply(reply) => Ok(reply),
            Outcome::Close(reply) => {
                self.drop_conn(master, conn);
                Ok(reply)
            }
            Outcome::Wait { .. } => Ok(Reply::Integer(0)),
            Outcome::Blocked => {
                m.held.borrow_mut().insert(conn);
                let reply = std::future::poll_fn(|_| {
                    if let Some(reply) = m.replies.borrow_mut().remove(&conn) {
                        m.held.borrow_mut().remove(&conn);
                        return Poll::Ready(Some(reply));
                    }
                    if deadline.is_some_and(|d| self.world.now_ms() >= d) {
                        return Poll::Ready(None);
                    }
                    if let Some(d) = deadline {
                        self.world.time.wake_at(d);
                    }
                    Poll::Pending
                })
                .await;
                match reply {
                    Some(reply) => Ok(reply),
                    None => {
                        self.drop_conn(master, conn);
                        Err(CallError::Timeout)
                    }
                }
            }
        }
    }

    fn drop_conn(&self, master: usize, conn: ClientId) {
        self.world.disconnect(master, conn);
        self.conns.borrow_mut()[master] = None;
    }
}

#[async_trait(?Send)]
impl LockEnv for Env {
    fn name(&self) -> &str {
        &self.name
    }
    fn servers(&self) -> usize {
        self.world.masters.len()
    }
    fn replicas(&self) -> usize {
        0
    }
    async fn call(&self, server: usize, argv: Vec<Vec<u8>>) -> Result<Reply, CallError> {
        self.call_within(server, argv, self.command_timeout_ms)
            .await
    }
    async fn call_with_timeout(
        &self,
        server: usize,
        argv: Vec<Vec<u8>>,
        timeout_ms: u64,
    ) -> Result<Reply, CallError> {
        self.call_within(server, argv, Some(timeout_ms)).await
    }
    async fn subscribe(
        &self,
        server: usize,
        channel: &str,
        client_name: Option<&str>,
    ) -> Result<Box<dyn Subscription>, CallError> {
        let conn = self.world.connect(server);
        self.world.subscribe(server, conn, client_name, channel);
        Ok(Box::new(Sub {
            world: self.world.clone(),
            master: server,
            conn,
            channel: channel.as_bytes().to_vec(),
        }))
    }
    fn wall_ms(&self) -> i64 {
        self.world.wall_ms()
    }
    fn mono_ms(&self) -> u64 {
        self.world.now_ms()
    }
    async fn sleep_ms(&self, ms: u64) {
        self.world.time.sleep_ms(ms).await
    }
    fn random_u64(&self) -> u64 {
        self.rng.next_u64()
    }
    fn register_token(&self, _token: &str) {}
    fn spawn(&self, task: LocalBoxFuture<'static, ()>) -> Box<dyn TaskGuard> {
        self.world.time.spawn(task)
    }
}

struct Sub {
    world: Rc<World>,
    master: usize,
    conn: ClientId,
    channel: Vec<u8>,
}

#[async_trait(?Send)]
impl Subscription for Sub {
    /// A wait of 0 ms lasts to the next virtual ms. Commands take no virtual time here, so a
    /// library that waits 0 ms and tries again (Redisson at a lock's exact expiry: the key
    /// lives while now ≤ its expiry, `PTTL` answers 0, `latch.tryAcquire(0, ms)` returns at
    /// once, `RedissonLock.java:295-296` at 4.7.0) would send its next command at the same
    /// instant for ever; a real client's next command reaches the server a round trip later,
    /// which the millisecond clock rounds up to its next tick.
    async fn next_message(&self, timeout_ms: u64) -> Option<Vec<u8>> {
        self.world.masters[self.master]
            .mailboxes
            .next_message(&self.world.time, self.conn, timeout_ms.max(1))
            .await
    }
    fn closed(&self) -> bool {
        !self.world.masters[self.master]
            .server
            .borrow()
            .is_connected(self.conn)
    }
    fn close(&self) {
        self.world.disconnect(self.master, self.conn);
    }
    async fn unsubscribe(&self) {
        if !self.closed() {
            let argv = [b"UNSUBSCRIBE".to_vec(), self.channel.clone()];
            self.world.execute(self.master, self.conn, &argv);
        }
    }
}

/// What the model did in a situation.
pub struct ModelRun {
    /// Every master's MONITOR lines.
    pub lines: Vec<Vec<Line>>,
    /// `(outcome, detail)` of each operation.
    pub outcomes: Vec<(String, String)>,
    /// The lines of the first master each operation spans, `[start, end)` by index.
    pub ops: Vec<(usize, usize)>,
    /// The harness's own connections on each master, whose commands are not the lock's.
    pub skip: Vec<Vec<String>>,
}

/// A scheme's failure that the library raises to its caller rather than returning (an
/// exception, not `false`): its text starts with this.
pub use model::locks::RAISED;

fn classify(ok: Result<String, String>) -> (String, String) {
    match ok {
        Ok(detail) => ("granted".into(), detail),
        Err(detail) if detail.starts_with(RAISED) => ("error".into(), detail),
        Err(detail) => ("refused".into(), detail),
    }
}

type Slot = Rc<RefCell<Option<(String, String)>>>;

/// A lock object of the situation, shared by the steps that use it.
type SharedScheme = Rc<RefCell<Box<dyn LockScheme>>>;

/// Steps run one at a time, so no other operation borrows this lock while it awaits.
#[allow(clippy::await_holding_refcell_ref)]
fn op_future(
    op: Op,
    scheme: SharedScheme,
    env: Rc<dyn LockEnv>,
    timeout_ms: u64,
    slot: Slot,
) -> LocalBoxFuture<'static, ()> {
    Box::pin(async move {
        let mut scheme = scheme.borrow_mut();
        let result = match op {
            Op::Acquire => scheme
                .acquire(&env, timeout_ms)
                .await
                .map(|g| format!("token {}", g.token)),
            Op::Release => {
                let r = scheme.release(&env).await;
                if r.ok { Ok(r.detail) } else { Err(r.detail) }
            }
            Op::Extend => {
                let e = scheme.extend(&env).await;
                if e.ok { Ok(e.detail) } else { Err(e.detail) }
            }
        };
        *slot.borrow_mut() = Some(classify(result));
    })
}

/// Runs a situation on the model.
pub fn run(situation: &Situation) -> Result<ModelRun, String> {
    let spec = SchemeSpec::from_json(&situation.scheme, "scheme")
        .map_err(|e| format!("{}: {e}", situation.path.display()))?;
    let world = World::new(situation.masters);
    for (master, commands) in situation.initial.iter().enumerate() {
        for command in commands {
            world.admin(master, command);
        }
    }
    let mut locks: BTreeMap<usize, (SharedScheme, Rc<dyn LockEnv>)> = BTreeMap::new();
    let mut outcomes = Vec::new();
    let mut ops = Vec::new();
    let lines_now = || world.masters[0].lines.borrow().len();
    for step in &situation.steps {
        match step {
            Step::Admin { master, command } => world.admin(*master, command),
            Step::SilentSubscriber {
                master,
                name,
                channel,
            } => world.silent_subscriber(*master, name, channel),
            Step::Sleep { ms } => {
                let until = world.now_ms() + ms;
                world.run(until, &|| false)?;
            }
            Step::Quiet => world.run_until_quiet()?,
            Step::Op {
                op,
                lock,
                timeout_ms,
                until_ms,
            } => {
                if !locks.contains_key(lock) {
                    let scheme = spec
                        .build("scheme")
                        .map_err(|e| format!("{}: {e}", situation.path.display()))?;
                    let env: Rc<dyn LockEnv> = Rc::new(Env {
                        world: world.clone(),
                        name: format!("client-{}", lock + 1),
                        conns: RefCell::new(vec![None; situation.masters]),
                        rng: XorShift::seeded(*lock as u64 + 1),
                        command_timeout_ms: situation.command_timeout_ms,
                    });
                    locks.insert(*lock, (Rc::new(RefCell::new(scheme)), env));
                }
                let (scheme, env) = locks[lock].clone();
                if scheme.try_borrow_mut().is_err() {
                    return Err(format!(
                        "{}: lock {lock} is still busy with an earlier operation (until_ms)",
                        situation.path.display()
                    ));
                }
                let slot: Slot = Rc::default();
                let start = lines_now();
                world
                    .time
                    .spawn(op_future(*op, scheme, env, *timeout_ms, slot.clone()));
                let limit = until_ms.map_or(MAX_VIRTUAL_MS, |u| world.now_ms() + u);
                world.run(limit, &|| slot.borrow().is_some())?;
                let result = slot.borrow_mut().take();
                let end = if result.is_some() {
                    lines_now()
                } else {
                    usize::MAX
                };
                ops.push((start, end));
                outcomes.push(match result {
                    Some(outcome) => outcome,
                    None => (
                        "pending".to_string(),
                        format!("still running after {} ms", until_ms.unwrap_or(0)),
                    ),
                });
            }
        }
    }
    let until = world.now_ms() + situation.settle_ms;
    world.run(until, &|| false)?;
    world.run_until_quiet()?;
    let lines: Vec<Vec<Line>> = world.masters.iter().map(|m| m.lines.take()).collect();
    let skip = vec![vec!["127.0.0.1:2".to_string(), SILENT_PEER.to_string()]; lines.len()];
    Ok(ModelRun {
        lines,
        outcomes,
        ops,
        skip,
    })
}
