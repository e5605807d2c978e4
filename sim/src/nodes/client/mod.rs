//! A client node: the workload of the contract, run through a lock scheme — acquire, read the
//! resource, hold, write it back decremented, release, think — `clients.acquisitions` times
//! (seed 000's stock decrement), on each of its `clients.threads` worker threads. What the
//! scheme sees of the world is `env` (`ClientEnv`, `LockEnv`).

mod env;

use model::marks::{Mark, mark};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use model::history::{EventKind, owner_name};
use model::locks::{LockEnv, LockScheme};
use model::redis::Reply;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::nodes::resource::RESOURCE_PORT;
use crate::nodes::resp::{RespConn, with_timeout};
use crate::scenario::Extend;
use crate::scenario::range::MsRange;
use crate::world::{World, stream_seed};
use env::{ClientEnv, ThreadEnv};

/// The resource's client side: one connection, reopened after a failure.
struct ResourceClient {
    conn: Option<RespConn>,
    world: Arc<World>,
    name: String,
    timeout: Duration,
}

impl ResourceClient {
    /// Opens the connection unless it is open, within the command timeout; false if it could
    /// not.
    async fn connect(&mut self) -> bool {
        if self.conn.is_none() {
            self.conn = with_timeout(
                &self.world,
                &self.name,
                self.timeout,
                RespConn::connect(&self.world, &self.name, "resource", RESOURCE_PORT),
            )
            .await
            .and_then(Result::ok);
        }
        self.conn.is_some()
    }

    async fn call(&mut self, words: &[String]) -> Option<Reply> {
        if !self.connect().await {
            return None;
        }
        let argv: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        let (world, name, limit) = (self.world.clone(), self.name.clone(), self.timeout);
        match with_timeout(&world, &name, limit, self.conn.as_mut()?.call(&argv)).await {
            Some(Ok(reply)) => Some(reply),
            _ => {
                mark(Mark::ResourceCallFailed);
                self.conn = None;
                None
            }
        }
    }

    /// The critical section: read the counter, hold (extending the lease as `clients.extend`
    /// asks), write it back decremented. A refused or failed read skips the hold and the write,
    /// as an application would on an exception; so does a failed extension (the library said the
    /// lock is lost).
    async fn decrement(
        &mut self,
        lease: &mut Lease<'_>,
        fence: Option<u64>,
        hold_ms: u64,
        extend: Option<Extend>,
    ) {
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
        if !lease.hold(hold_ms, extend).await {
            return;
        }
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

/// The held lock during the critical section: the hold, with its extensions.
struct Lease<'a> {
    world: &'a World,
    env: &'a ClientEnv,
    dyn_env: &'a Rc<dyn LockEnv>,
    scheme: &'a mut Box<dyn LockScheme>,
    thread: Option<u32>,
}

impl Lease<'_> {
    /// Sleeps `hold_ms`, extending every `every_ms` of it or once at its end; false when an
    /// extension failed.
    async fn hold(&mut self, hold_ms: u64, extend: Option<Extend>) -> bool {
        let Some(extend) = extend else {
            self.env.sleep_ms(hold_ms).await;
            return true;
        };
        let mut left_ms = hold_ms;
        if let Some(every_ms) = extend.every_ms {
            while left_ms > every_ms {
                self.env.sleep_ms(every_ms).await;
                left_ms -= every_ms;
                if !self.extend().await {
                    return false;
                }
            }
        }
        self.env.sleep_ms(left_ms).await;
        !extend.before_write || self.extend().await
    }

    async fn extend(&mut self) -> bool {
        let name = self.env.name().to_string();
        self.world
            .emit(&name, self.thread, EventKind::ExtendStarted)
            .await;
        let extension = self.scheme.extend(self.dyn_env).await;
        let ok = extension.ok;
        mark(if ok {
            Mark::ExtendGranted
        } else {
            Mark::ExtendFailed
        });
        self.world
            .emit(
                &name,
                self.thread,
                EventKind::Extended {
                    ok,
                    detail: extension.detail,
                },
            )
            .await;
        ok
    }
}

fn draw(rng: &mut ChaCha8Rng, range: MsRange) -> u64 {
    rng.gen_range(range.min..=range.max)
}

/// The client node's whole life: the workload on each of its `clients.threads` worker threads
/// (one lock object shared between them where the scheme's source shares one), then done.
pub async fn client_node(world: Arc<World>, name: String) {
    // A restarted process draws new tokens and timings: its random streams are per start.
    let incarnation = match world.procs.started(&name) {
        1 => String::new(),
        n => format!("#{n}"),
    };
    let env = Rc::new(ClientEnv::new(world.clone(), &name, &incarnation));
    let threads = world.scenario.clients.threads;
    let build = || {
        world
            .scheme
            .build("scheme")
            .expect("schemes are validated when the scenario loads")
    };
    let first = build();
    let mut others: Vec<Box<dyn LockScheme>> = (2..=threads)
        .map(|_| first.share().unwrap_or_else(build))
        .collect();
    if threads == 1 {
        let dyn_env: Rc<dyn LockEnv> = env.clone();
        worker(
            world.clone(),
            env,
            dyn_env,
            first,
            None,
            incarnation.clone(),
        )
        .await;
    } else {
        let mut workers = Vec::new();
        for (thread, scheme) in (1..=threads).zip(std::iter::once(first).chain(others.drain(..))) {
            let dyn_env: Rc<dyn LockEnv> = Rc::new(ThreadEnv {
                process: env.clone(),
                owner: owner_name(&name, Some(thread)),
            });
            workers.push(madsim::task::spawn_local(worker(
                world.clone(),
                env.clone(),
                dyn_env,
                scheme,
                Some(thread),
                incarnation.clone(),
            )));
        }
        for handle in workers {
            // A worker only ends by finishing its workload (a crash takes the whole node).
            let _ = handle.await;
        }
    }
    world.procs.client_done(&name);
}

/// One worker thread's workload: `clients.acquisitions` rounds of acquire, critical section,
/// release, think. `thread` is `None` for a single-threaded client.
async fn worker(
    world: Arc<World>,
    env: Rc<ClientEnv>,
    dyn_env: Rc<dyn LockEnv>,
    mut scheme: Box<dyn LockScheme>,
    thread: Option<u32>,
    incarnation: String,
) {
    let name = env.name().to_string();
    let owner = owner_name(&name, thread);
    let record = |kind| world.emit(&name, thread, kind);
    let stream = match thread {
        None => format!("{name}{incarnation}/workload"),
        Some(_) => format!("{owner}{incarnation}/workload"),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(world.seed, &stream));
    let clients = world.scenario.clients.clone();
    let mut resource = ResourceClient {
        conn: None,
        world: world.clone(),
        name: owner.clone(),
        timeout: Duration::from_millis(clients.command_timeout_ms),
    };
    // An application keeps its storage connection open: it connects before its first lock, so
    // that its first critical section starts as every later one does, with the read right
    // after the grant (a fault timed after the grant meets the read on its way).
    resource.connect().await;
    for attempt in 1..=clients.acquisitions {
        record(EventKind::AcquireStarted { attempt }).await;
        match scheme.acquire(&dyn_env, clients.acquire_timeout_ms).await {
            Ok(grant) => {
                mark(Mark::AcquireGranted);
                record(EventKind::Acquired {
                    token: grant.token.clone(),
                    fence: grant.fence,
                })
                .await;
                let hold_ms = draw(&mut rng, clients.hold_ms);
                let mut lease = Lease {
                    world: &world,
                    env: &env,
                    dyn_env: &dyn_env,
                    scheme: &mut scheme,
                    thread,
                };
                resource
                    .decrement(&mut lease, grant.fence, hold_ms, clients.extend)
                    .await;
                record(EventKind::ReleaseStarted).await;
                let release = scheme.release(&dyn_env).await;
                if !release.ok {
                    mark(Mark::ReleaseFailed);
                }
                record(EventKind::Released {
                    ok: release.ok,
                    detail: release.detail,
                })
                .await;
            }
            Err(reason) => {
                mark(Mark::AcquireFailed);
                record(EventKind::AcquireFailed { reason }).await
            }
        }
        env.sleep_ms(draw(&mut rng, clients.think_ms)).await;
    }
    record(EventKind::ClientDone).await;
}
