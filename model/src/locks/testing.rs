//! Unit-test harness for schemes: a `LockEnv` wired straight to an in-process `RedisServer`,
//! with a manual clock. No network, no madsim: a scheme's logic against the real command model,
//! step by step.
//!
//! Time only moves when everything is waiting: `block_on` polls the future under test and every
//! background task (`spawn`: watchdogs), and when none can go on it advances the shared clock to
//! the earliest pending sleep. So a watchdog renews at its period while the test sleeps, exactly
//! as it would in the simulation, but without madsim.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;

use super::virtual_time::{Mailboxes, VirtualTime, XorShift};
use super::{CallError, LocalBoxFuture, LockEnv, Subscription, TaskGuard};
use crate::redis::{ClientId, Outcome, RedisServer, Reply, ServerConfig};

pub use super::virtual_time::EPOCH_MS;

/// One Redis server shared by several `DirectEnv` clients, and the time they all see.
pub struct Shared {
    pub server: RefCell<RedisServer>,
    /// Pub/sub messages delivered to each subscribed connection.
    mailboxes: Mailboxes,
    /// Everyone's wall and monotonic clock (ms since the test started), and the background
    /// tasks (`LockEnv::spawn`) `block_on` polls.
    time: VirtualTime,
    /// A down server refuses every command (connection refused).
    pub down: Cell<bool>,
    /// How much the client's clock advances while a command to this server is in flight.
    pub latency_ms: Cell<u64>,
}

thread_local! {
    /// The `Shared` worlds of this test thread, for `block_on` to drive.
    static WORLDS: RefCell<Vec<Weak<Shared>>> = const { RefCell::new(Vec::new()) };
}

impl Shared {
    pub fn new() -> Rc<Shared> {
        let shared = Rc::new(Shared {
            server: RefCell::new(RedisServer::new(ServerConfig::default())),
            mailboxes: Mailboxes::default(),
            time: VirtualTime::default(),
            down: Cell::new(false),
            latency_ms: Cell::new(0),
        });
        WORLDS.with(|w| w.borrow_mut().push(Rc::downgrade(&shared)));
        shared
    }

    pub fn advance(&self, ms: u64) {
        self.time.advance(ms);
    }

    /// Runs a command as an administrator would (outside any client).
    pub fn command(&self, words: &[&str]) -> Reply {
        let id = self.server.borrow_mut().connect();
        let argv: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        self.execute(id, &argv)
    }

    /// Runs a command on connection `client` (a connection of the test's own, from
    /// `server.connect()`).
    pub fn command_as(&self, client: ClientId, words: &[&str]) -> Reply {
        let argv: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        self.execute(client, &argv)
    }

    /// How many background tasks are still running (not finished, not cancelled).
    pub fn running_tasks(&self) -> usize {
        self.time.running_tasks()
    }

    /// Executes on the server at the shared time and routes any pub/sub messages.
    fn execute(&self, client: ClientId, argv: &[Vec<u8>]) -> Reply {
        self.execute_at(client, self.time.now_ms(), argv)
    }

    /// Executes at `now_ms` (ms since the test started): the clock of another `Shared` when
    /// several servers serve one client.
    fn execute_at(&self, client: ClientId, now_ms: u64, argv: &[Vec<u8>]) -> Reply {
        let mut server = self.server.borrow_mut();
        let reply = match server.execute(client, EPOCH_MS + now_ms as i64, argv) {
            Outcome::Reply(reply) | Outcome::Close(reply) => reply,
            // No replicas: WAIT acknowledges nobody.
            Outcome::Wait { .. } => Reply::Integer(0),
            // No scheme blocks; a test client that does gets the timeout's answer.
            Outcome::Blocked => Reply::NilArray,
        };
        for (to, push) in server.take_pushes() {
            self.mailboxes.deliver(to, push);
        }
        // The host closes what CLIENT KILL named (`take_killed`).
        for killed in server.take_killed() {
            server.disconnect(killed);
        }
        reply
    }
}

/// What a `DirectEnv` does to the next command with a given name (for failure tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mishap {
    /// The server executes it, the reply is lost: the client sees a timeout.
    LoseReply,
    /// It never reaches the server: the client sees a timeout.
    Drop,
    /// The server executes it and the client never hears again: the process died right after
    /// sending it (the future stays pending for ever).
    Hang,
    /// The server executes it and the client stops for this many ms before it sees the reply
    /// (a GC pause): other clients and background tasks go on meanwhile.
    PauseAfter(u64),
}

pub struct DirectEnv {
    name: String,
    shared: Rc<Shared>,
    client: ClientId,
    rng: XorShift,
    replicas: Cell<usize>,
    sentinel: Cell<bool>,
    mishaps: RefCell<Vec<(String, Mishap)>>,
    /// Commands this client sent, as text, for assertions.
    pub sent: RefCell<Vec<String>>,
    /// Servers 1.. (server 0 is `shared`, whose clock every server follows).
    others: Vec<(Rc<Shared>, ClientId)>,
}

impl DirectEnv {
    /// A client as schemes take it; `concrete` for a test that also wants its mishaps and log.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(shared: &Rc<Shared>, name: &str, seed: u64) -> Rc<dyn LockEnv> {
        Rc::new(Self::concrete(shared, name, seed))
    }

    pub fn concrete(shared: &Rc<Shared>, name: &str, seed: u64) -> DirectEnv {
        let client = shared.server.borrow_mut().connect();
        DirectEnv {
            name: name.into(),
            shared: shared.clone(),
            client,
            rng: XorShift::seeded(seed),
            replicas: Cell::new(0),
            sentinel: Cell::new(false),
            mishaps: RefCell::default(),
            sent: RefCell::default(),
            others: Vec::new(),
        }
    }

    /// Pretends each master has `n` replicas (they never acknowledge anything).
    pub fn set_replicas(&self, n: usize) {
        self.replicas.set(n);
    }

    /// Pretends the client finds its masters through Sentinel (`LockEnv::sentinel`).
    pub fn set_sentinel(&self, sentinel: bool) {
        self.sentinel.set(sentinel);
    }

    /// The next command named `command` (any case) meets `mishap`.
    pub fn mishap(&self, command: &str, mishap: Mishap) {
        self.mishaps
            .borrow_mut()
            .push((command.to_ascii_uppercase(), mishap));
    }

    fn take_mishap(&self, argv: &[Vec<u8>]) -> Option<Mishap> {
        let name = String::from_utf8_lossy(argv.first()?).to_ascii_uppercase();
        let mut mishaps = self.mishaps.borrow_mut();
        let i = mishaps.iter().position(|(c, _)| *c == name)?;
        Some(mishaps.remove(i).1)
    }

    /// A client of several independent servers (Redlock's masters); the first one's clock is
    /// the time everyone sees.
    pub fn multi(servers: &[Rc<Shared>], name: &str, seed: u64) -> Rc<dyn LockEnv> {
        Self::concrete_multi(servers, name, seed)
    }

    pub fn concrete_multi(servers: &[Rc<Shared>], name: &str, seed: u64) -> Rc<DirectEnv> {
        let mut env = Self::concrete(&servers[0], name, seed);
        env.others = servers[1..]
            .iter()
            .map(|s| {
                let client = s.server.borrow_mut().connect();
                (s.clone(), client)
            })
            .collect();
        Rc::new(env)
    }

    async fn call_inner(
        &self,
        server: usize,
        argv: Vec<Vec<u8>>,
        timeout_ms: Option<u64>,
    ) -> Result<Reply, CallError> {
        self.sent
            .borrow_mut()
            .push(crate::history::render_command(&argv));
        let (target, client) = match server {
            0 => (&self.shared, self.client),
            n => {
                let (s, c) = &self.others[n - 1];
                (s, *c)
            }
        };
        if target.down.get() {
            return Err(CallError::Disconnected("connection refused".into()));
        }
        self.shared.advance(target.latency_ms.get());
        let execute = || target.execute_at(client, self.shared.time.now_ms(), &argv);
        match self.take_mishap(&argv) {
            None => Ok(execute()),
            Some(Mishap::Drop) => {
                self.sleep_ms(timeout_ms.unwrap_or(0)).await;
                Err(CallError::Timeout)
            }
            Some(Mishap::LoseReply) => {
                execute();
                self.sleep_ms(timeout_ms.unwrap_or(0)).await;
                Err(CallError::Timeout)
            }
            Some(Mishap::Hang) => {
                execute();
                std::future::pending().await
            }
            Some(Mishap::PauseAfter(ms)) => {
                let reply = execute();
                self.sleep_ms(ms).await;
                Ok(reply)
            }
        }
    }
}

#[async_trait(?Send)]
impl LockEnv for DirectEnv {
    fn name(&self) -> &str {
        &self.name
    }
    fn servers(&self) -> usize {
        1 + self.others.len()
    }
    async fn call(&self, server: usize, argv: Vec<Vec<u8>>) -> Result<Reply, CallError> {
        self.call_inner(server, argv, None).await
    }
    /// A lost or dropped reply is seen `timeout_ms` later (`call` sees it at once).
    async fn call_with_timeout(
        &self,
        server: usize,
        argv: Vec<Vec<u8>>,
        timeout_ms: u64,
    ) -> Result<Reply, CallError> {
        self.call_inner(server, argv, Some(timeout_ms)).await
    }
    fn sentinel(&self) -> bool {
        self.sentinel.get()
    }
    fn replicas(&self) -> usize {
        self.replicas.get()
    }
    async fn subscribe(
        &self,
        _server: usize,
        channel: &str,
        client_name: Option<&str>,
    ) -> Result<Box<dyn Subscription>, CallError> {
        let client = self.shared.server.borrow_mut().connect();
        if let Some(name) = client_name {
            self.shared.execute(
                client,
                &[b"CLIENT".to_vec(), b"SETNAME".to_vec(), name.into()],
            );
        }
        self.shared.execute(
            client,
            &[b"SUBSCRIBE".to_vec(), channel.as_bytes().to_vec()],
        );
        Ok(Box::new(DirectSubscription {
            shared: self.shared.clone(),
            client,
            channel: channel.as_bytes().to_vec(),
        }))
    }
    fn wall_ms(&self) -> i64 {
        self.shared.time.wall_ms()
    }
    fn mono_ms(&self) -> u64 {
        self.shared.time.now_ms()
    }
    async fn sleep_ms(&self, ms: u64) {
        self.shared.time.sleep_ms(ms).await
    }
    fn random_u64(&self) -> u64 {
        self.rng.next_u64()
    }
    fn register_token(&self, _token: &str) {}
    fn spawn(&self, task: LocalBoxFuture<'static, ()>) -> Box<dyn TaskGuard> {
        self.shared.time.spawn(task)
    }
}

struct DirectSubscription {
    shared: Rc<Shared>,
    client: ClientId,
    channel: Vec<u8>,
}

#[async_trait(?Send)]
impl Subscription for DirectSubscription {
    /// The next message delivered to this connection, or `None` after `timeout_ms`.
    async fn next_message(&self, timeout_ms: u64) -> Option<Vec<u8>> {
        self.shared
            .mailboxes
            .next_message(&self.shared.time, self.client, timeout_ms)
            .await
    }
    fn closed(&self) -> bool {
        !self.shared.server.borrow().is_connected(self.client)
    }
    fn close(&self) {
        self.shared.server.borrow_mut().disconnect(self.client);
    }
    async fn unsubscribe(&self) {
        if !self.closed() {
            self.shared.execute(
                self.client,
                &[b"UNSUBSCRIBE".to_vec(), self.channel.clone()],
            );
        }
    }
}

/// Drives `future` with every background task of this thread's `Shared` worlds, advancing time
/// whenever all of them wait. `None` if it can never finish (nothing left to wait for).
pub fn run_until_stalled<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1_000_000 {
        let worlds: Vec<Rc<Shared>> = WORLDS.with(|w| {
            let mut w = w.borrow_mut();
            w.retain(|s| s.strong_count() > 0);
            w.iter().filter_map(Weak::upgrade).collect()
        });
        for shared in &worlds {
            shared.time.clear_wakeups();
        }
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
        for shared in &worlds {
            shared.time.poll_tasks(&mut cx);
        }
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
        // Everything waits: move the clock of the world with the nearest deadline.
        let next = worlds
            .iter()
            .filter_map(|s| Some((s.time.next_wakeup()? - s.time.now_ms(), s)))
            .min_by_key(|(delta, _)| *delta);
        match next {
            Some((delta, shared)) => shared.advance(delta),
            None => return None,
        }
    }
    panic!("a DirectEnv future did not finish in a million steps");
}

/// Drives a future to completion (see `run_until_stalled`).
pub fn block_on<F: Future>(future: F) -> F::Output {
    run_until_stalled(future).expect(
        "a DirectEnv future kept pending: it is waiting on something the test never provides",
    )
}

/// Lets simulated time pass (background tasks run) for `ms`.
pub fn pass(shared: &Rc<Shared>, ms: u64) {
    block_on(shared.time.sleep_ms(ms));
}

/// Builds a scheme from its scenario JSON (`"set"` or `{"name": ..., ...}`); panics on a bad
/// spec, which is a bug in the test.
pub fn scheme(json: serde_json::Value) -> Box<dyn super::LockScheme> {
    super::SchemeSpec::from_json(&json, "scheme")
        .and_then(|spec| spec.build("scheme"))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `n` independent masters.
pub fn masters(n: usize) -> Vec<Rc<Shared>> {
    (0..n).map(|_| Shared::new()).collect()
}

/// The scheme `base` names with the parameters of `extra` merged over it.
pub fn scheme_with(
    base: serde_json::Value,
    extra: serde_json::Value,
) -> Box<dyn super::LockScheme> {
    let mut json = base;
    if let (Some(map), Some(extra)) = (json.as_object_mut(), extra.as_object()) {
        map.extend(extra.clone());
    }
    scheme(json)
}

/// One server and two clients, `a` and `b`, each with its own instance of the scheme: the
/// setting of most scheme tests.
#[allow(clippy::type_complexity)]
pub fn two_clients(
    json: serde_json::Value,
) -> (
    Rc<Shared>,
    (Rc<dyn LockEnv>, Box<dyn super::LockScheme>),
    (Rc<dyn LockEnv>, Box<dyn super::LockScheme>),
) {
    let shared = Shared::new();
    let a = DirectEnv::new(&shared, "a", 1);
    let b = DirectEnv::new(&shared, "b", 2);
    (shared, (a, scheme(json.clone())), (b, scheme(json)))
}
