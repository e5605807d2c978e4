//! The scheme's view of the world (`LockEnv`) from one client process: RESP over the simulated
//! network to the Redis masters — pooled connections, the client's own command timeout, the
//! masters found through the Sentinels when there are any — and the node's clocks and random
//! stream. `ThreadEnv` is one worker thread's view of its process.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use madsim::time::sleep;
use model::history::{EventKind, render_command, render_reply};
use model::locks::{
    CallError, LocalBoxFuture, LockEnv, Subscription, TaskGuard, is_unsubscribe_confirmation,
};
use model::redis::Reply;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::nodes::resp::{RespConn, with_timeout};
use crate::nodes::{REDIS_PORT, SENTINEL_PORT};
use crate::world::{World, stream_seed};

pub struct ClientEnv {
    world: Arc<World>,
    name: String,
    /// The master group of each server index (`redis-N`).
    groups: Vec<String>,
    /// The node each group's master is believed to be: the group itself without Sentinel,
    /// else what a Sentinel answered last.
    current: RefCell<Vec<String>>,
    /// Idle connections per master; a command takes one (or opens one) and gives it back.
    idle: RefCell<Vec<Vec<RespConn>>>,
    /// Idle connections to the Sentinels, by name, in the order they are asked.
    sentinels: RefCell<Vec<(String, Option<RespConn>)>>,
    rng: RefCell<ChaCha8Rng>,
    command_timeout: Duration,
}

/// Records a `command_failed` if a call is dropped before it finished: a scheme that races its
/// own per-instance timeout against the call abandons it (the server may still execute it).
struct Abandoned<'a> {
    env: &'a ClientEnv,
    server: String,
    command: String,
    finished: bool,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        // A crashed process's tasks are dropped too: a dead process observes nothing.
        if !self.finished && !self.env.world.procs.is_crashed(&self.env.name) {
            self.env.world.record(
                &self.env.name,
                EventKind::CommandFailed {
                    server: std::mem::take(&mut self.server),
                    command: std::mem::take(&mut self.command),
                    error: "abandoned (the scheme's own timeout)".into(),
                },
            );
        }
    }
}

impl ClientEnv {
    /// One command on a connection of its own (a subscription's), within the command timeout.
    async fn call_on(&self, conn: &mut RespConn, argv: &[Vec<u8>]) -> Result<Reply, CallError> {
        match with_timeout(
            &self.world,
            &self.name,
            self.command_timeout,
            conn.call(argv),
        )
        .await
        {
            Some(Ok(reply)) => Ok(reply),
            Some(Err(e)) => Err(CallError::Disconnected(e.to_string())),
            None => Err(CallError::Timeout),
        }
    }

    /// `incarnation` tells a restarted process from its earlier life (`""` for the first,
    /// `"#2"` for the second start): it seeds the token stream.
    pub fn new(world: Arc<World>, name: &str, incarnation: &str) -> ClientEnv {
        let groups = world.scenario.master_names();
        ClientEnv {
            idle: RefCell::new(groups.iter().map(|_| Vec::new()).collect()),
            current: RefCell::new(groups.clone()),
            sentinels: RefCell::new(
                world
                    .scenario
                    .sentinel_names()
                    .into_iter()
                    .map(|s| (s, None))
                    .collect(),
            ),
            rng: RefCell::new(ChaCha8Rng::seed_from_u64(stream_seed(
                world.seed,
                &format!("{name}{incarnation}/lock"),
            ))),
            command_timeout: Duration::from_millis(world.scenario.clients.command_timeout_ms),
            groups,
            name: name.to_string(),
            world,
        }
    }

    /// `timeout_ms` by this client's clock, in true time.
    fn timeout(&self, timeout_ms: u64) -> Duration {
        Duration::from_micros(self.world.time.true_duration_us(&self.name, timeout_ms))
    }

    /// Opens a connection to `node`, bounded by the command timeout.
    async fn open(&self, node: &str, port: u16) -> Result<RespConn, CallError> {
        self.open_within(node, port, self.command_timeout).await
    }

    /// Opens a connection to `node`, bounded by `timeout`.
    async fn open_within(
        &self,
        node: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<RespConn, CallError> {
        match with_timeout(
            &self.world,
            &self.name,
            timeout,
            RespConn::connect(&self.world, &self.name, node, port),
        )
        .await
        {
            Some(Ok(conn)) => Ok(conn),
            Some(Err(e)) => Err(CallError::Disconnected(e.to_string())),
            None => Err(CallError::Timeout),
        }
    }

    /// Asks the Sentinels, in order, for the group's master (`SENTINEL get-master-addr-by-name`,
    /// as Jedis and redis-py do on every new connection); the first that answers wins and is
    /// asked first next time.
    async fn discover(&self, server: usize) -> Result<String, CallError> {
        let group = self.groups[server].clone();
        let count = self.sentinels.borrow().len();
        let argv = vec![
            b"SENTINEL".to_vec(),
            b"get-master-addr-by-name".to_vec(),
            group.as_bytes().to_vec(),
        ];
        let command = render_command(&argv);
        let mut last_error = CallError::Disconnected("no Sentinel".into());
        for i in 0..count {
            let (sentinel, idle) = {
                let mut sentinels = self.sentinels.borrow_mut();
                (sentinels[i].0.clone(), sentinels[i].1.take())
            };
            let idle = idle.and_then(|c| (!c.is_closed()).then_some(c));
            let conn = match idle {
                Some(conn) => Ok(conn),
                None => self.open(&sentinel, SENTINEL_PORT).await,
            };
            let result = match conn {
                Err(e) => Err(e),
                Ok(mut conn) => match self.send(&mut conn, &sentinel, &argv, &command).await {
                    Err(e) => Err(e),
                    Ok(()) => match with_timeout(
                        &self.world,
                        &self.name,
                        self.command_timeout,
                        conn.read_reply(),
                    )
                    .await
                    {
                        Some(Ok(reply)) => {
                            self.sentinels.borrow_mut()[i].1 = Some(conn);
                            Ok(reply)
                        }
                        Some(Err(e)) => Err(CallError::Disconnected(e.to_string())),
                        None => Err(CallError::Timeout),
                    },
                },
            };
            let kind = match &result {
                Ok(reply) => EventKind::CommandReply {
                    server: sentinel.clone(),
                    reply: render_reply(reply),
                },
                Err(e) => EventKind::CommandFailed {
                    server: sentinel.clone(),
                    command: command.clone(),
                    error: e.to_string(),
                },
            };
            self.world.record(&self.name, kind);
            match result {
                Ok(Reply::Array(parts)) if parts.len() == 2 => {
                    let ip = parts[0]
                        .as_bulk()
                        .and_then(|b| std::str::from_utf8(b).ok())
                        .and_then(|s| s.parse().ok());
                    if let Some(ip) = ip {
                        let master = self.world.procs.name_of(ip);
                        if i > 0 {
                            let mut sentinels = self.sentinels.borrow_mut();
                            let first = sentinels.remove(i);
                            sentinels.insert(0, first);
                        }
                        return Ok(master);
                    }
                    last_error = CallError::Disconnected("bad Sentinel reply".into());
                }
                Ok(other) => {
                    last_error = CallError::Disconnected(format!(
                        "No master found for {group}: {}",
                        render_reply(&other)
                    ))
                }
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    /// Writes one command on `conn` and records that it was sent: `command_sent` means the
    /// bytes left the process (a crash from now on still delivers them), not that it meant to.
    /// `command` is `argv` rendered for the trace (the caller has it already).
    async fn send(
        &self,
        conn: &mut RespConn,
        server: &str,
        argv: &[Vec<u8>],
        command: &str,
    ) -> Result<(), CallError> {
        conn.send(argv)
            .map_err(|e| CallError::Disconnected(e.to_string()))?;
        self.world
            .emit(
                &self.name,
                None,
                EventKind::CommandSent {
                    server: server.to_string(),
                    command: command.to_string(),
                },
            )
            .await;
        Ok(())
    }

    /// A pooled connection to the group's master, or the node to open one to (asking the
    /// Sentinels first when there are any).
    async fn pooled_or_target(
        &self,
        server: usize,
    ) -> Result<(String, Option<RespConn>), CallError> {
        while let Some(conn) = self.idle.borrow_mut()[server].pop() {
            if !conn.is_closed() {
                return Ok((self.current.borrow()[server].clone(), Some(conn)));
            }
        }
        if !self.sentinels.borrow().is_empty() {
            let master = self.discover(server).await?;
            self.current.borrow_mut()[server] = master;
        }
        Ok((self.current.borrow()[server].clone(), None))
    }

    /// One command of `owner` (this process, or one of its worker threads) to the group's
    /// master, its connection and its reply bounded by `timeout`; every step is in the trace.
    async fn call_within(
        &self,
        owner: &str,
        server: usize,
        argv: Vec<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Reply, CallError> {
        // The guard holds the rendering, which the trace needs again only if the call fails
        // (it was copied for the guard on every call, issue 32).
        let mut guard = Abandoned {
            env: self,
            server: self.current.borrow()[server].clone(),
            command: render_command(&argv),
            finished: false,
        };
        let target = self.pooled_or_target(server).await;
        if let Ok((node, _)) = &target
            && guard.server != *node
        {
            guard.server = node.clone();
        }
        let connection = match target {
            Err(e) => Err(e),
            Ok((node, Some(conn))) => Ok((node, conn)),
            Ok((node, None)) => self
                .open_within(&node, REDIS_PORT, timeout)
                .await
                .map(|c| (node, c)),
        };
        let sent = match connection {
            Err(e) => Err(e),
            Ok((node, mut conn)) => {
                if self.world.scenario.clients.threads > 1 {
                    self.world.history.sent_by(conn.local_addr(), owner);
                }
                self.send(&mut conn, &node, &argv, &guard.command)
                    .await
                    .map(|()| conn)
            }
        };
        let result = match sent {
            Err(e) => Err(e),
            Ok(mut conn) => {
                match with_timeout(&self.world, &self.name, timeout, conn.read_reply()).await {
                    // redis-py's SentinelManagedConnection: a master that turned replica answers
                    // READONLY; drop the connection so the next one asks the Sentinels again.
                    Some(Ok(Reply::Error(e)))
                        if e.starts_with(b"READONLY") && !self.sentinels.borrow().is_empty() =>
                    {
                        Err(CallError::Disconnected(
                            String::from_utf8_lossy(&e).into_owned(),
                        ))
                    }
                    Some(Ok(reply)) => {
                        self.idle.borrow_mut()[server].push(conn);
                        Ok(reply)
                    }
                    Some(Err(e)) => Err(CallError::Disconnected(e.to_string())),
                    // Like Jedis, a timed-out connection is out of step with its replies: drop it.
                    // The server may still execute the command; the trace shows when.
                    None => Err(CallError::Timeout),
                }
            }
        };
        guard.finished = true;
        let server_name = std::mem::take(&mut guard.server);
        let kind = match &result {
            Ok(reply) => EventKind::CommandReply {
                server: server_name,
                reply: render_reply(reply),
            },
            Err(e) => EventKind::CommandFailed {
                server: server_name,
                command: std::mem::take(&mut guard.command),
                error: e.to_string(),
            },
        };
        self.world.record(&self.name, kind);
        result
    }
}

#[async_trait(?Send)]
impl LockEnv for ClientEnv {
    fn name(&self) -> &str {
        &self.name
    }

    fn servers(&self) -> usize {
        self.groups.len()
    }

    fn replicas(&self) -> usize {
        self.world.scenario.topology.replicas as usize
    }

    async fn subscribe(
        &self,
        server: usize,
        channel: &str,
        client_name: Option<&str>,
    ) -> Result<Box<dyn Subscription>, CallError> {
        let mut conn = match self.pooled_or_target(server).await? {
            (_, Some(conn)) => conn,
            (node, None) => self.open(&node, REDIS_PORT).await?,
        };
        if let Some(name) = client_name {
            let argv = vec![b"CLIENT".to_vec(), b"SETNAME".to_vec(), name.into()];
            match self.call_on(&mut conn, &argv).await? {
                Reply::Status(_) => {}
                other => {
                    return Err(CallError::Disconnected(format!(
                        "CLIENT SETNAME answered {other:?}"
                    )));
                }
            }
        }
        let argv = vec![b"SUBSCRIBE".to_vec(), channel.as_bytes().to_vec()];
        match self.call_on(&mut conn, &argv).await? {
            Reply::Array(_) => Ok(Box::new(PubSub {
                conn: RefCell::new(Some(conn)),
                world: self.world.clone(),
                name: self.name.clone(),
                channel: channel.as_bytes().to_vec(),
                command_timeout: self.command_timeout,
            })),
            other => Err(CallError::Disconnected(format!(
                "SUBSCRIBE answered {other:?}"
            ))),
        }
    }

    fn sentinel(&self) -> bool {
        !self.sentinels.borrow().is_empty()
    }

    async fn call(&self, server: usize, argv: Vec<Vec<u8>>) -> Result<Reply, CallError> {
        self.call_within(&self.name, server, argv, self.command_timeout)
            .await
    }

    async fn call_with_timeout(
        &self,
        server: usize,
        argv: Vec<Vec<u8>>,
        timeout_ms: u64,
    ) -> Result<Reply, CallError> {
        let timeout = self.timeout(timeout_ms);
        self.call_within(&self.name, server, argv, timeout).await
    }

    fn wall_ms(&self) -> i64 {
        self.world.time.wall_ms(&self.name)
    }

    fn mono_ms(&self) -> u64 {
        self.world.time.mono_ms(&self.name)
    }

    async fn sleep_ms(&self, ms: u64) {
        sleep(Duration::from_micros(
            self.world.time.true_duration_us(&self.name, ms),
        ))
        .await
    }

    fn random_u64(&self) -> u64 {
        self.rng.borrow_mut().r#gen()
    }

    fn register_token(&self, token: &str) {
        self.world.history.register_token(token, &self.name);
    }

    fn spawn(&self, task: LocalBoxFuture<'static, ()>) -> Box<dyn TaskGuard> {
        Box::new(Background(madsim::task::spawn_local(task)))
    }
}

/// A connection in subscribed mode; it is closed (and `next_message` gives `None` for ever)
/// after any error.
struct PubSub {
    conn: RefCell<Option<RespConn>>,
    world: Arc<World>,
    name: String,
    channel: Vec<u8>,
    /// How long `unsubscribe` waits for its confirmation.
    command_timeout: Duration,
}

#[async_trait(?Send)]
impl Subscription for PubSub {
    async fn next_message(&self, timeout_ms: u64) -> Option<Vec<u8>> {
        let mut conn = self.conn.borrow_mut().take()?;
        let wait = Duration::from_micros(self.world.time.true_duration_us(&self.name, timeout_ms));
        match with_timeout(&self.world, &self.name, wait, conn.read_reply()).await {
            Some(Ok(Reply::Array(parts)))
                if parts.len() == 3 && parts[0].as_bulk() == Some(b"message") =>
            {
                *self.conn.borrow_mut() = Some(conn);
                parts[2].as_bulk().map(<[u8]>::to_vec)
            }
            Some(Ok(_)) | None => {
                *self.conn.borrow_mut() = Some(conn);
                None
            }
            Some(Err(_)) => None,
        }
    }
    fn closed(&self) -> bool {
        self.conn.borrow().is_none()
    }
    fn close(&self) {
        self.conn.borrow_mut().take();
    }
    async fn unsubscribe(&self) {
        let Some(mut conn) = self.conn.borrow_mut().take() else {
            return;
        };
        if conn
            .send(&[b"UNSUBSCRIBE".to_vec(), self.channel.clone()])
            .is_err()
        {
            return;
        }
        let confirmed = with_timeout(&self.world, &self.name, self.command_timeout, async {
            loop {
                match conn.read_reply().await {
                    Ok(reply) if is_unsubscribe_confirmation(&reply) => return true,
                    Ok(_) => {}
                    Err(_) => return false,
                }
            }
        })
        .await;
        if confirmed == Some(true) {
            *self.conn.borrow_mut() = Some(conn);
        }
    }
}

struct Background(madsim::task::JoinHandle<()>);

impl TaskGuard for Background {
    fn cancel(&self) {
        self.0.abort();
    }
}

/// One worker thread's view of its process: the process's `ClientEnv` (connections, clocks,
/// random stream), except that the lock values it writes belong to this thread, so the key's
/// owner on the timeline and in the foreign-release count is `client-1/t2`.
pub(super) struct ThreadEnv {
    pub(super) process: Rc<ClientEnv>,
    pub(super) owner: String,
}

#[async_trait(?Send)]
impl LockEnv for ThreadEnv {
    fn name(&self) -> &str {
        self.process.name()
    }
    fn servers(&self) -> usize {
        self.process.servers()
    }
    fn replicas(&self) -> usize {
        self.process.replicas()
    }
    fn sentinel(&self) -> bool {
        self.process.sentinel()
    }
    async fn call(&self, server: usize, argv: Vec<Vec<u8>>) -> Result<Reply, CallError> {
        let timeout = self.process.command_timeout;
        self.process
            .call_within(&self.owner, server, argv, timeout)
            .await
    }
    async fn call_with_timeout(
        &self,
        server: usize,
        argv: Vec<Vec<u8>>,
        timeout_ms: u64,
    ) -> Result<Reply, CallError> {
        let timeout = self.process.timeout(timeout_ms);
        self.process
            .call_within(&self.owner, server, argv, timeout)
            .await
    }
    async fn subscribe(
        &self,
        server: usize,
        channel: &str,
        client_name: Option<&str>,
    ) -> Result<Box<dyn Subscription>, CallError> {
        self.process.subscribe(server, channel, client_name).await
    }
    fn wall_ms(&self) -> i64 {
        self.process.wall_ms()
    }
    fn mono_ms(&self) -> u64 {
        self.process.mono_ms()
    }
    async fn sleep_ms(&self, ms: u64) {
        self.process.sleep_ms(ms).await
    }
    fn random_u64(&self) -> u64 {
        self.process.random_u64()
    }
    fn register_token(&self, token: &str) {
        self.process
            .world
            .history
            .register_token(token, &self.owner);
    }
    fn spawn(&self, task: LocalBoxFuture<'static, ()>) -> Box<dyn TaskGuard> {
        self.process.spawn(task)
    }
}
