//! Unit-test harness for schemes: a `LockEnv` wired straight to an in-process `RedisServer`,
//! with a manual clock that `sleep_ms` advances. No network, no madsim: a scheme's logic
//! against the real command model, step by step.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;

use super::{CallError, LocalBoxFuture, LockEnv, Subscription, TaskGuard};
use crate::redis::{ClientId, Outcome, RedisServer, Reply, ServerConfig};

/// One Redis server shared by several `DirectEnv` clients, and the time they all see.
pub struct Shared {
    pub server: RefCell<RedisServer>,
    /// Pub/sub messages delivered to each subscribed connection, oldest first.
    mailboxes: RefCell<std::collections::BTreeMap<ClientId, std::collections::VecDeque<Reply>>>,
    /// Milliseconds since the test started; everyone's wall and monotonic clock.
    pub now_ms: Cell<u64>,
    /// A down server refuses every command (connection refused).
    pub down: Cell<bool>,
    /// How much the client's clock advances while a command to this server is in flight.
    pub latency_ms: Cell<u64>,
}

pub const EPOCH_MS: i64 = 1_700_000_000_000;

impl Shared {
    pub fn new() -> Rc<Shared> {
        Rc::new(Shared {
            server: RefCell::new(RedisServer::new(ServerConfig::default())),
            mailboxes: RefCell::default(),
            now_ms: Cell::new(0),
            down: Cell::new(false),
            latency_ms: Cell::new(0),
        })
    }

    pub fn advance(&self, ms: u64) {
        self.now_ms.set(self.now_ms.get() + ms);
    }

    /// Runs a command as an administrator would (outside any client).
    pub fn command(&self, words: &[&str]) -> Reply {
        let id = self.server.borrow_mut().connect();
        let argv: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        self.execute(id, &argv)
    }

    /// Executes on the server at the shared time and routes any pub/sub messages.
    fn execute(&self, client: ClientId, argv: &[Vec<u8>]) -> Reply {
        self.execute_at(client, self.now_ms.get(), argv)
    }

    /// Executes at `now_ms` (ms since the test started): the clock of another `Shared` when
    /// several servers serve one client.
    fn execute_at(&self, client: ClientId, now_ms: u64, argv: &[Vec<u8>]) -> Reply {
        let mut server = self.server.borrow_mut();
        let reply = match server.execute(client, EPOCH_MS + now_ms as i64, argv) {
            Outcome::Reply(reply) => reply,
            Outcome::Wait { .. } => Reply::Integer(0),
        };
        let mut mailboxes = self.mailboxes.borrow_mut();
        for (to, push) in server.take_pushes() {
            mailboxes.entry(to).or_default().push_back(push);
        }
        reply
    }
}

pub struct DirectEnv {
    name: String,
    shared: Rc<Shared>,
    client: ClientId,
    rng: Cell<u64>,
    /// Commands this client sent, as text, for assertions.
    pub sent: RefCell<Vec<String>>,
    /// Servers 1.. (server 0 is `shared`, whose clock every server follows).
    others: Vec<(Rc<Shared>, ClientId)>,
}

impl DirectEnv {
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
            rng: Cell::new(seed | 1),
            sent: RefCell::default(),
            others: Vec::new(),
        }
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
        Ok(target.execute_at(client, self.shared.now_ms.get(), &argv))
    }
    fn replicas(&self) -> usize {
        0
    }
    async fn subscribe(
        &self,
        _server: usize,
        channel: &str,
    ) -> Result<Box<dyn Subscription>, CallError> {
        let client = self.shared.server.borrow_mut().connect();
        self.shared.execute(
            client,
            &[b"SUBSCRIBE".to_vec(), channel.as_bytes().to_vec()],
        );
        Ok(Box::new(DirectSubscription {
            shared: self.shared.clone(),
            client,
        }))
    }
    fn wall_ms(&self) -> i64 {
        EPOCH_MS + self.shared.now_ms.get() as i64
    }
    fn mono_ms(&self) -> u64 {
        self.shared.now_ms.get()
    }
    async fn sleep_ms(&self, ms: u64) {
        self.shared.advance(ms);
    }
    fn random_u64(&self) -> u64 {
        // xorshift64*: plenty for distinct tokens in tests.
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn register_token(&self, _token: &str) {}
    fn spawn(&self, _task: LocalBoxFuture<'static, ()>) -> Box<dyn TaskGuard> {
        panic!("DirectEnv runs no background tasks; test watchdogs in the simulation")
    }
}

struct DirectSubscription {
    shared: Rc<Shared>,
    client: ClientId,
}

#[async_trait(?Send)]
impl Subscription for DirectSubscription {
    /// A waiting message at once; otherwise the whole timeout passes with none.
    async fn next_message(&self, timeout_ms: u64) -> Option<Vec<u8>> {
        let message = self
            .shared
            .mailboxes
            .borrow_mut()
            .get_mut(&self.client)
            .and_then(|m| m.pop_front());
        match message {
            Some(Reply::Array(parts)) if parts.len() == 3 => parts[2].as_bulk().map(<[u8]>::to_vec),
            _ => {
                self.shared.advance(timeout_ms);
                None
            }
        }
    }
}

/// Drives a future that never really waits (everything in `DirectEnv` is immediate).
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1_000_000 {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
    panic!("a DirectEnv future kept pending: it is waiting on something the test never provides");
}
