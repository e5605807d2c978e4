//! `locksim live`: a scenario on the real clock with real client processes — the real-time
//! executor (issue 27; the executor side of issue 26).
//!
//! It is the simulated world itself, paced to the real clock (`pacer`), with real loopback
//! ports bridged into its network (`bridge`, `resource`): the Redis nodes, replication,
//! Sentinel, AOF, node clocks, the resource, the fault schedule with its triggers, the network
//! faults, the history, the checkers and every output are the simulation's own. Only the
//! clients are real: one OS process per `client-i` (`clients`, on `process`'s hygiene),
//! driven over stdin/stdout by a task on the simulated node `client-i` (`driver`). Without a
//! command the process is locksim itself running the scenario's built-in scheme over real TCP
//! (`adapter`), so a built-in scheme and a user's lock take exactly the same path.
//!
//! Live runs are not replayable: real threads and real time can be repeated, not replayed.
//!
//! `redis_server` (issue 26, helper H9): real redis-server and redis-sentinel processes for a
//! topology, on `process`'s hygiene.

pub mod adapter;
pub mod bridge;
pub mod clients;
pub mod driver;
pub mod history;
pub mod observe;
pub mod pacer;
pub mod process;
pub mod redis_server;
pub mod resource;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::Handle;
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::runner::{ClientTask, Executor, NodeTasks, RunOutput, run_with_executor};
use crate::scenario::Scenario;
use crate::scenario::faults::FaultKind;
use crate::world::World;
use crate::world::history::Budget;
use crate::world::procs::node_ip;
use bridge::Ports;
use clients::{Applied, ClientCommand, Clients, Setup};
use history::Op;
use pacer::{Inbox, pace};
use redis_server::backend::{self, Servers};

/// What the real side hands the simulation (through the pacer).
pub enum Inbound {
    /// A real connection was accepted on `client`'s port for `node` (or from the server
    /// node `client`'s process to `node`'s: `redis_server::links`; `adopt`: it continues a
    /// connection that existed before the run).
    Open {
        conn: u64,
        client: String,
        node: String,
        to_real: UnboundedSender<Vec<u8>>,
        adopt: Option<u64>,
    },
    /// A real connection the simulation opened (to a real server process:
    /// `redis_server::backend`): where its bytes go.
    Dialed {
        conn: u64,
        to_sim: UnboundedSender<Vec<u8>>,
    },
    /// Bytes read from a real connection.
    Data { conn: u64, bytes: Vec<u8> },
    /// The real connection closed.
    Closed { conn: u64 },
    /// A line of a client process's stdout (`None`: its stdout closed).
    Line {
        client: String,
        incarnation: u32,
        line: Option<String>,
    },
}

/// One live run, as the drivers and the pacer share it.
pub struct Live {
    pub clients: Arc<Clients>,
    /// The lease the workload asks for (`ttl_ms` of `acquire`).
    pub ttl_ms: u64,
    /// How long a client may take to answer an operation, beyond the operation's own time.
    pub op_timeout_ms: u64,
    /// `--observe`: the clients are unmodified services, without the driver protocol.
    pub observe: bool,
    ports: Arc<Ports>,
    scenario: Arc<Scenario>,
    abort: Mutex<Option<String>>,
    ops: Mutex<Vec<Op>>,
    /// How many clients have answered their first `init`: the workloads start together.
    ready: AtomicU32,
}

impl Live {
    /// Stops the run with `why` (the first reason wins).
    pub fn abort(&self, why: String) {
        let mut abort = self.abort.lock().expect("never poisoned");
        if abort.is_none() {
            *abort = Some(why);
        }
    }

    /// Counts this client ready and waits until every client of the scenario is: an
    /// interpreter can start seconds after another on a loaded machine, and a workload that
    /// began alone would meet no competitor (a pause triggered by the first grant would be over
    /// before the second client asks). Polled on the run's clock; a client that never answers
    /// `init` stops the run, and with it this wait.
    pub async fn start_together(&self) {
        self.ready.fetch_add(1, Ordering::SeqCst);
        let count = self.scenario.clients.count;
        while self.ready.load(Ordering::SeqCst) < count && self.stop_reason().is_none() {
            madsim::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    fn stop_reason(&self) -> Option<String> {
        if let Some(why) = self.abort.lock().expect("never poisoned").clone() {
            return Some(why);
        }
        process::stop_requested()
            .then(|| "interrupted (SIGINT or SIGTERM): the run was stopped".to_string())
    }

    pub fn record_op(&self, op: Op) {
        self.ops.lock().expect("never poisoned").push(op);
    }

    /// The `init` operation's fields for `client`.
    pub fn init_fields(&self, client: &str) -> Value {
        let scenario = &self.scenario;
        json!({
            "client": client,
            "redis": self.ports.addresses(client, &scenario.master_names()),
            "sentinels": self.ports.addresses(client, &scenario.sentinel_names()),
            "resource": self.ports.addresses(client, &["resource".to_string()]).first(),
            "masters": scenario.master_names(),
            "fencing": scenario.resource.fencing,
            "command_timeout_ms": scenario.clients.command_timeout_ms,
        })
    }
}

/// What one live run is given.
pub struct Options {
    pub scenario: Arc<Scenario>,
    pub scheme_index: usize,
    pub seed: u64,
    /// The user's client command; `None` runs the built-in scheme (`locksim live-adapter`).
    pub command: Option<ClientCommand>,
    /// Where the clients' logs and libfaketime files go.
    pub log_dir: PathBuf,
    pub op_timeout_ms: u64,
    /// How long a client gets to exit after SIGTERM at the end.
    pub grace: Duration,
    /// `--observe`: run `command` as unmodified services (`observe`).
    pub observe: bool,
    /// Real redis-server and redis-sentinel processes behind the server nodes
    /// (`--backend redis-server`); `None`: the simulation's own servers.
    pub servers: Option<redis_server::Binaries>,
}

/// A finished live run.
pub struct LiveOutput {
    pub run: RunOutput,
    /// `history.jsonl`.
    pub history: String,
    /// The faults as realised on the client processes, with wall times.
    pub applied: Vec<Applied>,
    /// Clients that had to be SIGKILLed at the end.
    pub killed: Vec<String>,
    /// The run's real start (Unix µs): the trace's true time 0.
    pub start_unix_us: u64,
    /// With real server processes: the scenario's faults (or parts) they did not get.
    pub not_applied: Vec<String>,
}

/// Runs one live run on this thread (call it on a fresh thread: the simulation's runtime is
/// made here).
pub fn run(options: Options) -> Result<LiveOutput, String> {
    let scenario = Arc::new(options.scenario.for_scheme(options.scheme_index));
    refuse_unsupported(&scenario)?;
    if options.observe {
        observe::refuse_client_triggers(&scenario)?;
    }
    // The drivers write to the clients' stdin from this thread.
    process::block_sigpipe_on_this_thread();
    let runtime = RealRuntime::start()?;
    let inbox = Arc::new(Inbox::new().map_err(|e| format!("cannot create an eventfd: {e}"))?);
    let mut nodes = scenario.redis_names();
    nodes.extend(scenario.sentinel_names());
    nodes.push("resource".to_string());
    let ports = Arc::new(bridge::listen(
        &runtime.handle,
        &scenario.client_names(),
        &nodes,
        inbox.clone(),
    )?);
    let command = match options.command {
        Some(command) => command,
        None => adapter::command(&scenario, options.scheme_index)?,
    };
    let servers = match options.servers {
        Some(binaries) => Some(Arc::new(Servers::start(
            &scenario,
            binaries,
            options.log_dir.with_file_name("servers"),
            inbox.clone(),
            runtime.handle.clone(),
        )?)),
        None => None,
    };
    let clients = Arc::new(Clients::new(Setup {
        command,
        ports: ports.clone(),
        masters: scenario.master_names(),
        sentinels: scenario.sentinel_names(),
        seed: options.seed,
        log_dir: options.log_dir,
        runtime: runtime.handle.clone(),
        inbox: inbox.clone(),
        client_clock_faults: client_clock_faults(&scenario),
    })?);
    let live = Arc::new(Live {
        clients: clients.clone(),
        ttl_ms: scenario.schemes[options.scheme_index].ttl_ms(),
        op_timeout_ms: options.op_timeout_ms,
        observe: options.observe,
        ports: ports.clone(),
        scenario: scenario.clone(),
        abort: Mutex::new(None),
        ops: Mutex::new(Vec::new()),
        ready: AtomicU32::new(0),
    });
    let start_unix_us = pacer::real_unix_us();
    let executor = Executor {
        client: {
            let live = live.clone();
            Arc::new(move |world, name| {
                if live.observe {
                    Box::pin(observe::observe_node(world, name, live.clone()))
                } else {
                    Box::pin(driver::driver_node(world, name, live.clone()))
                }
            })
        },
        start: {
            let (live, inbox, ports) = (live.clone(), inbox.clone(), ports.clone());
            let servers = servers.clone();
            Box::new(move |world: &Arc<World>| start(world, live, inbox, ports, servers))
        },
        stop: Some({
            let live = live.clone();
            Arc::new(move || live.stop_reason())
        }),
        server: servers.clone().map(|servers| {
            Arc::new(move |world, name| {
                Box::pin(backend::server_node(world, name, servers.clone())) as ClientTask
            }) as NodeTasks
        }),
    };
    let result = run_with_executor(
        &scenario,
        options.scheme_index,
        options.seed,
        Budget::DEFAULT,
        executor,
    );
    let killed = clients.stop_all(options.grace);
    let mut applied = clients.applied();
    let mut not_applied = Vec::new();
    if let Some(servers) = &servers {
        servers.stop();
        applied.extend(servers.applied());
        applied.sort_by_key(|a| a.wall_us);
        not_applied = servers.not_applied();
    }
    drop(runtime);
    let mut run = result.map_err(|e| {
        if killed.is_empty() {
            e
        } else {
            format!("{e}\n{}", killed.join("\n"))
        }
    })?;
    if options.observe {
        // The holds the servers saw, judged as a driven client's (`observe`).
        run.events = observe::derive_holds(&run.events);
        let wall_ms = run.result.wall_ms;
        let end_us = run.result.sim_ms * 1000;
        run.result = crate::runner::judge(
            &scenario,
            options.scheme_index,
            options.seed,
            &run.events,
            end_us,
            wall_ms,
        );
    }
    let mut ops = std::mem::take(&mut *live.ops.lock().expect("never poisoned"));
    ops.extend(history::nemesis_ops(&run.events));
    Ok(LiveOutput {
        history: history::jsonl(ops),
        applied,
        not_applied,
        killed,
        start_unix_us,
        run,
    })
}

/// The real tokio runtime of the sockets and pipes, on a thread of its own started before the
/// simulation (madsim refuses new OS threads inside it); it stops when this is dropped.
struct RealRuntime {
    handle: tokio::runtime::Handle,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RealRuntime {
    fn start() -> Result<RealRuntime, String> {
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("live-sockets".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = handle_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = handle_tx.send(Ok(runtime.handle().clone()));
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })
            .map_err(|e| format!("cannot start the socket thread: {e}"))?;
        let handle = handle_rx
            .recv()
            .map_err(|_| "the socket thread ended at once".to_string())?
            .map_err(|e| format!("cannot start the socket runtime: {e}"))?;
        Ok(RealRuntime {
            handle,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }
}

impl Drop for RealRuntime {
    fn drop(&mut self) {
        drop(self.shutdown.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the live executor does not run yet, as a clear error.
fn refuse_unsupported(scenario: &Scenario) -> Result<(), String> {
    if scenario.clients.threads > 1 {
        return Err(format!(
            "{}: clients.threads is {}: live runs drive one worker per client process (run it with clients.threads 1)",
            scenario.path, scenario.clients.threads
        ));
    }
    Ok(())
}

/// Whether any fault can change a client's clock (a scripted one on a client or a
/// placeholder, or a nemesis that draws clock faults).
fn client_clock_faults(scenario: &Scenario) -> bool {
    let scripted = scenario.faults.iter().any(|f| match &f.kind {
        FaultKind::ClockJump { node, .. } | FaultKind::ClockDrift { node, .. } => {
            !node.starts_with("redis-") && !node.starts_with("sentinel-")
        }
        _ => false,
    });
    let nemesis = scenario.nemesis.as_ref().is_some_and(|n| {
        n.kinds.iter().any(|k| {
            k.kind.starts_with("clock_") && k.nodes.iter().any(|n| n.starts_with("client-"))
        })
    });
    scripted || nemesis
}

/// Inside the simulation, before any client runs: registers the client processes as the
/// real processes behind the client nodes, and starts the pacer on a node of its own.
fn start(
    world: &Arc<World>,
    live: Arc<Live>,
    inbox: Arc<Inbox<Inbound>>,
    ports: Arc<Ports>,
    servers: Option<Arc<Servers>>,
) {
    world.procs.set_external(Arc::new(backend::Processes {
        clients: live.clients.clone(),
        servers: servers.clone(),
    }));
    // A real process's address is another address of its node: Sentinel replies naming it
    // are rewritten to the asking client's ports as the simulated addresses are.
    for (node, addr) in servers.iter().flat_map(|s| s.addresses()) {
        world.procs.register(node, world.procs.id(node), addr.ip());
    }
    let clients = live.clients.clone();
    world
        .time
        .set_external(Arc::new(move |node, offset_ms, rate| {
            clients.clock(node, offset_ms, rate);
            if let Some(servers) = &servers {
                servers.clock(node, offset_ms, rate);
            }
        }));
    let handle = Handle::current();
    let node = handle
        .create_node()
        .name("pacer")
        .ip(node_ip("pacer"))
        .build();
    world.procs.register("pacer", node.id(), node_ip("pacer"));
    let world = world.clone();
    let mut conns: HashMap<u64, UnboundedSender<Vec<u8>>> = HashMap::new();
    let mut versions: BTreeMap<String, Arc<AtomicU64>> = BTreeMap::new();
    node.spawn(pace(inbox, move |item| match item {
        Inbound::Open {
            conn,
            client,
            node,
            to_real,
            adopt,
        } => {
            let (tx, rx) = unbounded_channel();
            conns.insert(conn, tx);
            let Some(client_node) = Handle::current().get_node(world.procs.id(&client)) else {
                return;
            };
            let (world, ports) = (world.clone(), ports.clone());
            if node == "resource" {
                let version = versions.entry(client.clone()).or_default().clone();
                client_node.spawn(async move {
                    madsim::task::spawn_local(resource::relay(world, client, version, rx, to_real));
                });
            } else {
                let observe = live.observe;
                client_node.spawn(async move {
                    // A client process's connection, or a real server's own (replication,
                    // Sentinel): each has its tap.
                    if world.scenario.client_names().contains(&client) {
                        let tap = bridge::ClientTap::new(
                            world.clone(),
                            ports,
                            client.clone(),
                            node.clone(),
                            observe,
                        );
                        madsim::task::spawn_local(bridge::relay(
                            world, client, node, adopt, rx, to_real, tap,
                        ));
                    } else {
                        let tap = redis_server::links::PeerTap::new(
                            &world,
                            &client,
                            &node,
                            adopt.is_some(),
                        );
                        madsim::task::spawn_local(bridge::relay(
                            world, client, node, adopt, rx, to_real, tap,
                        ));
                    }
                });
            }
        }
        Inbound::Dialed { conn, to_sim } => {
            conns.insert(conn, to_sim);
        }
        Inbound::Data { conn, bytes } => {
            if let Some(tx) = conns.get(&conn) {
                let _ = tx.send(bytes);
            }
        }
        Inbound::Closed { conn } => {
            conns.remove(&conn);
        }
        Inbound::Line {
            client,
            incarnation,
            line,
        } => live.clients.route(&client, incarnation, line),
    }));
}
