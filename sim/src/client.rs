//! A client node: the workload of the contract, run through a lock scheme.
//!
//! `ClientEnv` is the scheme's view of the world (`LockEnv`): RESP over madsim TCP to the Redis
//! masters with the client's own command timeout, the node's clocks, its random stream.
//! `client_node` is the workload: acquire, read the resource, hold, write it back decremented,
//! release, think — `clients.acquisitions` times (seed 000's stock decrement).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use madsim::time::sleep;
use model::history::{EventKind, render_command, render_reply};
use model::locks::{CallError, LocalBoxFuture, LockEnv, Subscription, TaskGuard};
use model::redis::Reply;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::conn::{RespConn, with_timeout};
use crate::resource::RESOURCE_PORT;
use crate::scenario::MsRange;
use crate::world::{World, stream_seed};
use crate::{REDIS_PORT, node_ip};

pub struct ClientEnv {
    world: Arc<World>,
    name: String,
    masters: Vec<(String, SocketAddr)>,
    /// Idle connections per master; a command takes one (or opens one) and gives it back.
    idle: RefCell<Vec<Vec<RespConn>>>,
    rng: RefCell<ChaCha8Rng>,
    command_timeout: Duration,
}

impl ClientEnv {
    pub fn new(world: Arc<World>, name: &str) -> ClientEnv {
        let masters: Vec<(String, SocketAddr)> = world
            .scenario
            .master_names()
            .into_iter()
            .map(|m| {
                let addr = SocketAddr::new(node_ip(&m), REDIS_PORT);
                (m, addr)
            })
            .collect();
        ClientEnv {
            idle: RefCell::new(masters.iter().map(|_| Vec::new()).collect()),
            rng: RefCell::new(ChaCha8Rng::seed_from_u64(stream_seed(
                world.seed,
                &format!("{name}/lock"),
            ))),
            command_timeout: Duration::from_millis(world.scenario.clients.command_timeout_ms),
            masters,
            name: name.to_string(),
            world,
        }
    }

    async fn connection(&self, server: usize) -> Result<RespConn, CallError> {
        if let Some(conn) = self.idle.borrow_mut()[server].pop() {
            return Ok(conn);
        }
        let (name, addr) = &self.masters[server];
        match with_timeout(
            &self.world,
            &self.name,
            self.command_timeout,
            RespConn::connect(&self.world, &self.name, name, *addr),
        )
        .await
        {
            Some(Ok(conn)) => Ok(conn),
            Some(Err(e)) => Err(CallError::Disconnected(e.to_string())),
            None => Err(CallError::Timeout),
        }
    }
}

#[async_trait(?Send)]
impl LockEnv for ClientEnv {
    fn name(&self) -> &str {
        &self.name
    }

    fn servers(&self) -> usize {
        self.masters.len()
    }

    fn replicas(&self) -> usize {
        self.world.scenario.topology.replicas as usize
    }

    async fn subscribe(
        &self,
        server: usize,
        channel: &str,
    ) -> Result<Box<dyn Subscription>, CallError> {
        let mut conn = self.connection(server).await?;
        let argv = vec![b"SUBSCRIBE".to_vec(), channel.as_bytes().to_vec()];
        match with_timeout(
            &self.world,
            &self.name,
            self.command_timeout,
            conn.call(&argv),
        )
        .await
        {
            Some(Ok(Reply::Array(_))) => Ok(Box::new(PubSub {
                conn: RefCell::new(Some(conn)),
                world: self.world.clone(),
                name: self.name.clone(),
            })),
            Some(Ok(other)) => Err(CallError::Disconnected(format!(
                "SUBSCRIBE answered {other:?}"
            ))),
            Some(Err(e)) => Err(CallError::Disconnected(e.to_string())),
            None => Err(CallError::Timeout),
        }
    }

    async fn call(&self, server: usize, argv: Vec<Vec<u8>>) -> Result<Reply, CallError> {
        let server_name = self.masters[server].0.clone();
        let command = render_command(&argv);
        self.world.record(
            &self.name,
            EventKind::CommandSent {
                server: server_name.clone(),
                command: command.clone(),
            },
        );
        let result = match self.connection(server).await {
            Err(e) => Err(e),
            Ok(mut conn) => match with_timeout(
                &self.world,
                &self.name,
                self.command_timeout,
                conn.call(&argv),
            )
            .await
            {
                Some(Ok(reply)) => {
                    self.idle.borrow_mut()[server].push(conn);
                    Ok(reply)
                }
                Some(Err(e)) => Err(CallError::Disconnected(e.to_string())),
                // Like Jedis, a timed-out connection is out of step with its replies: drop it.
                // The server may still execute the command; the trace shows when.
                None => Err(CallError::Timeout),
            },
        };
        let kind = match &result {
            Ok(reply) => EventKind::CommandReply {
                server: server_name,
                reply: render_reply(reply),
            },
            Err(e) => EventKind::CommandFailed {
                server: server_name,
                command,
                error: e.to_string(),
            },
        };
        self.world.record(&self.name, kind);
        result
    }

    fn wall_ms(&self) -> i64 {
        self.world.wall_ms(&self.name)
    }

    fn mono_ms(&self) -> u64 {
        self.world.mono_ms(&self.name)
    }

    async fn sleep_ms(&self, ms: u64) {
        sleep(Duration::from_micros(
            self.world.true_duration_us(&self.name, ms),
        ))
        .await
    }

    fn random_u64(&self) -> u64 {
        self.rng.borrow_mut().r#gen()
    }

    fn register_token(&self, token: &str) {
        self.world.register_token(token, &self.name);
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
}

#[async_trait(?Send)]
impl Subscription for PubSub {
    async fn next_message(&self, timeout_ms: u64) -> Option<Vec<u8>> {
        let mut conn = self.conn.borrow_mut().take()?;
        let wait = Duration::from_micros(self.world.true_duration_us(&self.name, timeout_ms));
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
}

struct Background(madsim::task::JoinHandle<()>);

impl TaskGuard for Background {
    fn cancel(&self) {
        self.0.abort();
    }
}

/// The resource's client side: one connection, reopened after a failure.
struct ResourceClient {
    conn: Option<RespConn>,
    world: Arc<World>,
    name: String,
    timeout: Duration,
}

impl ResourceClient {
    async fn call(&mut self, words: &[String]) -> Option<Reply> {
        if self.conn.is_none() {
            let addr = SocketAddr::new(node_ip("resource"), RESOURCE_PORT);
            self.conn = with_timeout(
                &self.world,
                &self.name,
                self.timeout,
                RespConn::connect(&self.world, &self.name, "resource", addr),
            )
            .await?
            .ok();
        }
        let argv: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        let (world, name, limit) = (self.world.clone(), self.name.clone(), self.timeout);
        match with_timeout(&world, &name, limit, self.conn.as_mut()?.call(&argv)).await {
            Some(Ok(reply)) => Some(reply),
            _ => {
                self.conn = None;
                None
            }
        }
    }

    /// The critical section: read the counter, hold, write it back decremented. A refused or
    /// failed read skips the write, as an application would on an exception.
    async fn decrement(&mut self, env: &ClientEnv, fence: Option<u64>, hold_ms: u64) {
        let fence = fence.map_or("-".to_string(), |f| f.to_string());
        let read = self
            .call(&["READ".into(), self.name.clone(), fence.clone()])
            .await;
        let Some(Reply::Array(fields)) = read else {
            return;
        };
        let (Some(value), Some(version)) = (fields[0].as_integer(), fields[1].as_integer()) else {
            return;
        };
        env.sleep_ms(hold_ms).await;
        let write = [
            "WRITE".into(),
            self.name.clone(),
            (value - 1).to_string(),
            version.to_string(),
            fence,
        ];
        self.call(&write).await;
    }
}

fn draw(rng: &mut ChaCha8Rng, range: MsRange) -> u64 {
    rng.gen_range(range.min..=range.max)
}

/// The client node's whole life: the workload, then done.
pub async fn client_node(world: Arc<World>, name: String) {
    let env = Rc::new(ClientEnv::new(world.clone(), &name));
    let dyn_env: Rc<dyn LockEnv> = env.clone();
    let mut scheme = world
        .scheme
        .build("scheme")
        .expect("schemes are validated when the scenario loads");
    let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(world.seed, &format!("{name}/workload")));
    let clients = world.scenario.clients.clone();
    let mut resource = ResourceClient {
        conn: None,
        world: world.clone(),
        name: name.clone(),
        timeout: Duration::from_millis(clients.command_timeout_ms),
    };
    for attempt in 1..=clients.acquisitions {
        world.record(&name, EventKind::AcquireStarted { attempt });
        match scheme.acquire(&dyn_env, clients.acquire_timeout_ms).await {
            Ok(grant) => {
                world.record(
                    &name,
                    EventKind::Acquired {
                        token: grant.token.clone(),
                        fence: grant.fence,
                    },
                );
                resource
                    .decrement(&env, grant.fence, draw(&mut rng, clients.hold_ms))
                    .await;
                world.record(&name, EventKind::ReleaseStarted);
                let release = scheme.release(&dyn_env).await;
                world.record(
                    &name,
                    EventKind::Released {
                        ok: release.ok,
                        detail: release.detail,
                    },
                );
            }
            Err(reason) => world.record(&name, EventKind::AcquireFailed { reason }),
        }
        env.sleep_ms(draw(&mut rng, clients.think_ms)).await;
    }
    world.record(&name, EventKind::ClientDone);
    world.client_done(&name);
}
