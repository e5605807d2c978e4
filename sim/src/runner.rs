//! Runs one scenario × scheme × seed: builds the world on a fresh madsim runtime, lets the
//! clients work until they finish or `duration_ms` passes, kills every node, and judges the
//! history with the checkers.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::{Handle, Runtime};
use model::check::{CheckContext, check_all};
use model::history::{Event, trace_hash};
use model::result::RunResult;

use crate::faults::nemesis::{NemesisLog, random_nemesis};
use crate::faults::schedule::{fire_now, scripted_nemesis, start_initial};
use crate::nodes::client::client_node;
use crate::nodes::redis::redis_node;
use crate::nodes::resource::resource_node;
use crate::nodes::sentinel::sentinel_node;
use crate::scenario::Scenario;
use crate::scenario::faults::Fault;
use crate::world::history::Budget;
use crate::world::procs::node_ip;
use crate::world::{FaultHook, World};

/// One finished run: the result of the contract and the full history behind it.
pub struct RunOutput {
    pub result: RunResult,
    pub events: Vec<Event>,
    /// Messages the processes sent (not in the result contract: `locksim bench` divides by it).
    pub messages: u64,
    /// The faults the random nemesis injected, as drawn (empty without a `nemesis`).
    pub nemesis_faults: Vec<Fault>,
}

/// Runs one seed on the caller's simulation thread (one per calling thread, kept from seed to
/// seed: see `on_own_thread`), never on the caller's own: madsim's runtime takes over the
/// thread's context while it runs.
pub fn run(scenario: &Arc<Scenario>, scheme_index: usize, seed: u64) -> Result<RunOutput, String> {
    run_within(scenario, scheme_index, seed, Budget::DEFAULT)
}

/// As [`run`], with the history's budget given: past it the run stops and is an error.
pub fn run_within(
    scenario: &Arc<Scenario>,
    scheme_index: usize,
    seed: u64,
    budget: Budget,
) -> Result<RunOutput, String> {
    on_own_thread(scenario, scheme_index, seed, budget, |output| output)
}

/// A run's result and its sizes, for callers that do not look at the events.
pub struct RunSummary {
    pub result: RunResult,
    pub events: usize,
    pub messages: u64,
}

/// As [`run`], the events freed on the run's own thread: freed by the caller, every event's
/// strings were frees across threads (2.5 % of a Redlock bench's profile, issue 15).
pub fn run_summary(
    scenario: &Arc<Scenario>,
    scheme_index: usize,
    seed: u64,
) -> Result<RunSummary, String> {
    on_own_thread(scenario, scheme_index, seed, Budget::DEFAULT, |output| {
        RunSummary {
            result: output.result,
            events: output.events.len(),
            messages: output.messages,
        }
    })
}

/// As [`run`], with the events only when `keep(result)` says so: the others are freed on the
/// run's own thread (`compare` keeps the failing runs' traces only; it used to receive every
/// run's events and free them all on its one collecting thread, issue 32).
pub fn run_keeping_events(
    scenario: &Arc<Scenario>,
    scheme_index: usize,
    seed: u64,
    keep: fn(&RunResult) -> bool,
) -> Result<RunOutput, String> {
    on_own_thread(
        scenario,
        scheme_index,
        seed,
        Budget::DEFAULT,
        move |mut output| {
            if !keep(&output.result) {
                output.events = Vec::new();
            }
            output
        },
    )
}

/// Runs one seed on this caller's simulation thread and hands `finish(output)` back from it.
///
/// The thread is kept for the caller's next seed: a fresh OS thread per seed set up a stack and
/// an empty allocator heap for every run (issue 32: `bench` of the baseline, 200 seeds, 838
/// page faults against 256 kept). A second runtime on a thread keeps what the first seeded:
/// std's `RandomState` keys (madsim seeds them from the seed only on a thread's first runtime,
/// madsim-0.2.34 src/sim/rand.rs:176) and the thread's heap addresses. Neither reaches a trace:
/// the world's hash maps use a fixed hasher, madsim iterates its std maps only where the order
/// changes nothing (its simulators at `runtime/mod.rs:408` and `task/mod.rs:368`, which draw
/// nothing; `net/network.rs:146` drops sockets the world never opens, it has its own), and
/// Lua's collector runs whole cycles (`model/src/redis/lua_alloc.rs`);
/// `a_reused_thread_runs_every_seed_as_a_fresh_one` holds it. A thread whose run panicked is
/// not used again.
fn on_own_thread<T: Send + 'static>(
    scenario: &Arc<Scenario>,
    scheme_index: usize,
    seed: u64,
    budget: Budget,
    finish: impl FnOnce(RunOutput) -> T + Send + 'static,
) -> Result<T, String> {
    let (path, name) = (scenario.path.clone(), scenario.name.clone());
    let scenario = scenario.clone();
    let outcome = SimThread::run_here(move || {
        run_on_this_thread(&scenario, scheme_index, seed, budget).map(finish)
    })?;
    outcome.map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        format!("{path}: the simulation of {name} seed {seed} panicked: {message}")
    })?
}

/// A job for a [`SimThread`]: runs there, sends its outcome back itself.
type SimJob = Box<dyn FnOnce() + Send>;

/// The thread that runs the seeds of one calling thread, one after another (see
/// [`on_own_thread`]). It ends when its caller does (the job sender, a thread-local of the
/// caller, is dropped with it) or after a job panicked.
struct SimThread {
    jobs: std::sync::mpsc::Sender<SimJob>,
    thread: Option<std::thread::JoinHandle<()>>,
}

thread_local! {
    static SIM_THREAD: std::cell::RefCell<Option<SimThread>> =
        const { std::cell::RefCell::new(None) };
}

impl SimThread {
    fn start() -> Result<SimThread, String> {
        let (jobs, queue) = std::sync::mpsc::channel::<SimJob>();
        let thread = std::thread::Builder::new()
            .name("simulation".to_string())
            .spawn(move || {
                for job in queue {
                    job();
                }
            })
            .map_err(|e| format!("cannot start a simulation thread: {e}"))?;
        Ok(SimThread {
            jobs,
            thread: Some(thread),
        })
    }

    /// Runs `job` on the caller's simulation thread (started if there is none) and waits for
    /// it: its value, or what it panicked with.
    fn run_here<T: Send + 'static>(
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<std::thread::Result<T>, String> {
        let (done, outcome) = std::sync::mpsc::channel();
        let job: SimJob = Box::new(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            let _ = done.send(result);
        });
        SIM_THREAD.with(|slot| {
            let mut slot = slot.borrow_mut();
            let thread = match slot.take() {
                Some(thread) => thread,
                None => SimThread::start()?,
            };
            thread
                .jobs
                .send(job)
                .map_err(|_| "the simulation thread has stopped".to_string())?;
            match outcome.recv() {
                Ok(Ok(value)) => {
                    *slot = Some(thread);
                    Ok(Ok(value))
                }
                Ok(Err(panic)) => Ok(Err(panic)),
                Err(_) => Err("the simulation thread stopped during a run".to_string()),
            }
        })
    }
}

impl Drop for SimThread {
    /// Ends the thread (its queue closed, it leaves its loop) and waits for it.
    fn drop(&mut self) {
        let (jobs, _) = std::sync::mpsc::channel();
        drop(std::mem::replace(&mut self.jobs, jobs));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The most events a run of each scenario row (file, name, scheme) recorded in this process.
/// Each run reserves that and an eighth more: grown by doubling, a 100-client history (40 MB)
/// was copied and page-faulted into fresh memory step by step, 10 % of the run (issue 15). The
/// most, not the last: runs of one row differ up to 6-fold (a Redlock under contention), and a
/// run just past its reservation would copy its whole history once. Only memory it writes is
/// resident. The capacity changes no behaviour; a run longer than any before still grows.
static EVENTS_RECORDED: Mutex<BTreeMap<(String, String, usize), usize>> =
    Mutex::new(BTreeMap::new());

/// Rows remembered in `EVENTS_RECORDED`; past it the memory starts again.
const EVENTS_RECORDED_ROWS_MAX: usize = 4096;

fn events_recorded() -> std::sync::MutexGuard<'static, BTreeMap<(String, String, usize), usize>> {
    EVENTS_RECORDED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn row_key(scenario: &Scenario, scheme_index: usize) -> (String, String, usize) {
    (scenario.path.clone(), scenario.name.clone(), scheme_index)
}

/// What a run of this row may record (0: no run of it yet).
fn expected_events(scenario: &Scenario, scheme_index: usize) -> usize {
    let most = events_recorded()
        .get(&row_key(scenario, scheme_index))
        .copied()
        .unwrap_or(0);
    most + most / 8
}

fn remember_events(scenario: &Scenario, scheme_index: usize, events: usize) {
    let mut recorded = events_recorded();
    if recorded.len() >= EVENTS_RECORDED_ROWS_MAX {
        recorded.clear();
    }
    let most = recorded.entry(row_key(scenario, scheme_index)).or_default();
    *most = (*most).max(events);
}

/// Called once with the world, before any client runs.
pub type StartHook = Box<dyn FnOnce(&Arc<World>) + Send>;

/// What runs on the client nodes of a run, and what else the run does: the simulation's own
/// clients ([`Executor::simulated`]), or the drivers of real client processes paced to the
/// real clock (`live`).
pub struct Executor {
    /// Makes the task a client node runs (at each start of the node).
    pub client: Arc<dyn Fn(Arc<World>, String) -> ClientTask + Send + Sync>,
    /// Called once the world's nodes exist, before any client runs (the live pacer starts here).
    pub start: StartHook,
    /// Why the run must stop now (a live client broke the protocol, Ctrl-C), if it must: asked
    /// every 10 ms of simulated time. `None` for the simulation's own clients, which never stop
    /// a run early.
    pub stop: Option<StopCheck>,
    /// Makes the task a Redis or Sentinel node runs in place of the simulated server (a live
    /// run's real processes: `live::redis_server::backend`); `None`: the simulation's own.
    pub server: Option<NodeTasks>,
}

/// Makes the task a node runs (at each start of the node).
pub type NodeTasks = Arc<dyn Fn(Arc<World>, String) -> ClientTask + Send + Sync>;

/// See [`Executor::stop`].
pub type StopCheck = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// The task of one client node.
pub type ClientTask = std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

impl Executor {
    /// The simulation's own clients: the workload through the scheme on simulated time.
    pub fn simulated() -> Executor {
        Executor {
            client: Arc::new(|world, name| Box::pin(client_node(world, name))),
            start: Box::new(|_| {}),
            stop: None,
            server: None,
        }
    }
}

fn run_on_this_thread(
    scenario: &Arc<Scenario>,
    scheme_index: usize,
    seed: u64,
    budget: Budget,
) -> Result<RunOutput, String> {
    run_with_executor(scenario, scheme_index, seed, budget, Executor::simulated())
}

/// One run on this thread with the given executor (see [`run`] for the thread it runs on).
pub fn run_with_executor(
    scenario: &Arc<Scenario>,
    scheme_index: usize,
    seed: u64,
    budget: Budget,
    executor: Executor,
) -> Result<RunOutput, String> {
    let wall_start = std::time::Instant::now();
    // The row's own world: its masters, faults and expectations.
    let scenario = &Arc::new(scenario.for_scheme(scheme_index));
    // Latencies are the world's (`world::net`): madsim's own network is not used.
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let world_scenario = scenario.clone();
    let log = NemesisLog::default();
    let (events, end_us, messages) = runtime.block_on(simulate(
        world_scenario,
        scheme_index,
        seed,
        budget,
        log.clone(),
        executor,
    ))?;
    drop(runtime);
    remember_events(scenario, scheme_index, events.len());
    let wall_ms = wall_start.elapsed().as_millis() as u64;

    let result = judge(scenario, scheme_index, seed, &events, end_us, wall_ms);
    let nemesis_faults = std::mem::take(&mut *log.lock().expect("never poisoned"));
    Ok(RunOutput {
        result,
        events,
        messages,
        nemesis_faults,
    })
}

/// The checkers' verdicts on a history of `scenario`'s row `scheme_index` (already the row's
/// own scenario) that ended at `end_us`.
pub fn judge(
    scenario: &Scenario,
    scheme_index: usize,
    seed: u64,
    events: &[Event],
    end_us: u64,
    wall_ms: u64,
) -> RunResult {
    let scheme = &scenario.schemes[scheme_index];
    let ctx = CheckContext {
        clients: scenario.owner_names(),
        end_us,
        liveness_window_ms: scenario.liveness_window_ms(scheme),
        masters: scenario.master_names(),
    };
    let mut report = check_all(events, &ctx);
    if scenario.judges_fairness() {
        let slack_us = scenario.fifo_slack_ms() * 1000;
        report.violations.extend(
            model::check::fairness::check(events, slack_us)
                .into_iter()
                .take(model::check::MAX_VIOLATIONS_PER_KIND),
        );
        report.violations.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
    }
    RunResult {
        scenario: scenario.name.clone(),
        scheme: scheme.label(),
        seed,
        trace_hash: trace_hash(events),
        sim_ms: end_us / 1000,
        wall_ms,
        verdicts: report.verdicts,
        counts: report.counts,
        latency_ms: report.latency_ms,
        throughput_per_s: report.throughput_per_s,
        max_wait_ms: report.max_wait_ms,
        max_wait_ms_by_client: report.max_wait_ms_by_client,
        violations: report.violations,
    }
}

/// A fresh world of `scenario`'s first scheme and its `network` node (whose tasks carry bytes
/// across cut links), on the current runtime, with no process yet: for probes and tests that
/// start their own nodes.
pub fn world_with_network(handle: &Handle, scenario: &Arc<Scenario>, seed: u64) -> Arc<World> {
    let world = World::new(
        scenario.clone(),
        scenario.schemes[0].clone(),
        seed,
        Budget::DEFAULT,
    );
    let network = handle
        .create_node()
        .name("network")
        .ip(node_ip("network"))
        .build();
    world.net.set_node(network);
    world
}

/// A world of Redis nodes only (no clients, Sentinels or faults), for probes and tests that
/// drive the nodes with a client of their own: the network's node, every replica's `replicaof`
/// and the Redis nodes, started on the current runtime.
pub(crate) fn redis_world(handle: &Handle, scenario: &Arc<Scenario>, seed: u64) -> Arc<World> {
    let world = world_with_network(handle, scenario, seed);
    for master in scenario.master_names() {
        for replica in scenario.replica_names(&master) {
            world
                .disks
                .with(&replica, |disk| disk.replicaof = Some(master.clone()));
        }
    }
    for name in scenario.redis_names() {
        add_node(handle, &world, &name, redis_node);
    }
    world
}

pub(crate) fn add_node<F, Fut>(handle: &Handle, world: &Arc<World>, name: &str, init: F)
where
    F: Fn(Arc<World>, String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let ip: IpAddr = node_ip(name);
    let (w, n) = (world.clone(), name.to_string());
    let node = handle
        .create_node()
        .name(name)
        .ip(ip)
        .init(move || init(w.clone(), n.clone()))
        .build();
    world.procs.register(name, node.id(), ip);
}

/// The simulation proper; returns the history, the true time the run ended and the messages
/// sent, or why the run was stopped (its history's budget ran out).
async fn simulate(
    scenario: Arc<Scenario>,
    scheme_index: usize,
    seed: u64,
    budget: Budget,
    nemesis_log: NemesisLog,
    executor: Executor,
) -> Result<(Vec<Event>, u64, u64), String> {
    let handle = Handle::current();
    let world = World::new(
        scenario.clone(),
        scenario.schemes[scheme_index].clone(),
        seed,
        budget,
    );
    world
        .history
        .reserve(expected_events(&scenario, scheme_index));
    let (fire, fired) = tokio::sync::mpsc::unbounded_channel();
    world.set_fault_hook(FaultHook {
        later: fire,
        now: fire_now,
    });

    // The network's own tasks (retransmissions across cut links) run here, beyond any fault's
    // reach.
    let network_node = handle
        .create_node()
        .name("network")
        .ip(node_ip("network"))
        .build();
    world.net.set_node(network_node);
    let lag_us = scenario.topology.replica_lag_ms * 1000;
    for master in scenario.master_names() {
        for replica in scenario.replica_names(&master) {
            // redis.conf of a replica: `replicaof <master> 6379`.
            world
                .disks
                .with(&replica, |disk| disk.replicaof = Some(master.clone()));
            if lag_us > 0 {
                world.net.add_delay(&master, &replica, lag_us);
            }
        }
    }
    match &executor.server {
        None => {
            for name in scenario.redis_names() {
                add_node(&handle, &world, &name, redis_node);
            }
            for name in scenario.sentinel_names() {
                add_node(&handle, &world, &name, sentinel_node);
            }
        }
        Some(server) => {
            for name in scenario
                .redis_names()
                .into_iter()
                .chain(scenario.sentinel_names())
            {
                let server = server.clone();
                add_node(&handle, &world, &name, move |world, name| {
                    server(world, name)
                });
            }
        }
    }
    add_node(&handle, &world, "resource", |world, _| resource_node(world));
    let nemesis_node = handle
        .create_node()
        .name("nemesis")
        .ip(node_ip("nemesis"))
        .build();
    world
        .procs
        .register("nemesis", nemesis_node.id(), node_ip("nemesis"));
    world.procs.set_nemesis(nemesis_node.clone());
    nemesis_node.spawn(scripted_nemesis(world.clone(), fired));
    if let Some(spec) = scenario.nemesis.clone() {
        let heal_at_ms = scenario.heal_at_ms(&scenario.schemes[scheme_index]);
        nemesis_node.spawn(random_nemesis(world.clone(), spec, heal_at_ms, nemesis_log));
    }
    (executor.start)(&world);
    for name in scenario.client_names() {
        let client = executor.client.clone();
        add_node(&handle, &world, &name, move |world, name| {
            client(world, name)
        });
    }
    for healer in start_initial(&world) {
        nemesis_node.spawn(healer);
    }

    let duration_us = scenario.duration_ms * 1000;
    let left = Duration::from_micros(duration_us.saturating_sub(world.time.now_us()));
    let clients = scenario.clients.count;
    let stopped = match &executor.stop {
        // The simulation's own clients: woken when a client is done or the budget fills, with
        // no polling task of the runner's own (each madsim poll draws from the run's RNG).
        None => {
            let _ = world.time.timeout(left, all_done(&world, clients)).await;
            None
        }
        Some(stop) => world
            .time
            .timeout(left, stop_or_done(&world, clients, stop.as_ref()))
            .await
            .ok()
            .flatten(),
    };
    let end_us = world.time.now_us().min(duration_us);
    // madsim leaks the tasks of live nodes when the runtime drops: kill every node first.
    for id in world.procs.ids() {
        handle.kill(id);
    }
    if let Some(why) = stopped {
        return Err(why);
    }
    if let Some(work) = world.history.script_work_spent() {
        return Err(format!(
            "{}: {} seed {seed}: stopped at {:.3} s of simulated time: its Lua scripts and their large replies did {work} units of work (limit {} for a run, about 10 s of one core); make the script end sooner or return less, or lower topology.lua_time_limit_work, clients.acquisitions, clients.count or clients.threads",
            scenario.path,
            scenario.schemes[scheme_index].label(),
            end_us as f64 / 1e6,
            budget.script_work
        ));
    }
    if world.history.full() {
        let (events, bytes) = world.history.size();
        return Err(format!(
            "{}: {} seed {seed}: stopped at {:.3} s of simulated time with {events} events ({} MiB) recorded (limit {} events, {} MiB): the run would go on too long; shorten duration_ms, or lower clients.count, clients.threads, clients.acquisitions or the nemesis's rate",
            scenario.path,
            scenario.schemes[scheme_index].label(),
            end_us as f64 / 1e6,
            bytes >> 20,
            budget.events,
            budget.bytes >> 20
        ));
    }
    Ok((world.history.take_events(), end_us, world.net.messages()))
}

/// Waits as [`all_done`], asking `stop` every 10 ms; returns its reason when it gave one.
async fn stop_or_done(
    world: &World,
    clients: u32,
    stop: &(dyn Fn() -> Option<String> + Send + Sync),
) -> Option<String> {
    while world.procs.clients_done() < clients && !world.history.full() {
        madsim::time::sleep(Duration::from_millis(10)).await;
        if let Some(why) = stop() {
            return Some(why);
        }
    }
    None
}

/// Resolves once every client is done or the run's budget is spent: woken by those two
/// changes only (a loop that looked every 10 ms was a task poll per 10 ms of every run).
async fn all_done(world: &World, clients: u32) {
    loop {
        let seen = world.procs.client_finished().value();
        if world.procs.clients_done() >= clients || world.history.full() {
            return;
        }
        tokio::select! {
            biased;
            _ = world.history.filled().wait_set() => {}
            _ = world.procs.client_finished().changed_from(seen) => {}
        }
    }
}

/// Runs many (scheme, seed) jobs on `jobs` worker threads (each with its simulation thread),
/// calling `on_done` in the caller's thread as each finishes, in completion order.
pub fn run_parallel(
    scenario: &Arc<Scenario>,
    work: Vec<(usize, u64)>,
    jobs: usize,
    mut on_done: impl FnMut(Result<RunSummary, String>),
) {
    on_workers(
        work,
        jobs,
        || false,
        |&(scheme_index, seed)| run_summary(scenario, scheme_index, seed),
        |_, output| on_done(output),
    );
}

/// Runs `run_one` on each item of `work` on up to `jobs` worker threads, never more than there
/// are items, calling `on_done` in the caller's thread as each finishes (completion order).
/// Takes no new item once `stop()` says so. The items are drawn as the workers need them, so a
/// sweep of a million seeds need not list them first. A worker the system refuses to start
/// (too many threads) is done without: the others take its share, or with none the caller's
/// thread does the work (issue 31: `--jobs 1000000` panicked in `thread::spawn`).
/// A worker hands each output over in a rendezvous (a channel of no capacity): it takes its
/// next item only once the caller's thread has received the last one, so when `on_done` makes
/// `stop()` true (a sweep's failed write) at most one more item per worker has started,
/// whatever the load (with an unbounded channel a worker ran on while the caller's thread
/// waited for a core: `hostile_input.rs` saw three runs past a failed write).
pub fn on_workers<W: Send, T: Send>(
    work: impl IntoIterator<Item = W, IntoIter: Send>,
    jobs: usize,
    stop: impl Fn() -> bool + Sync,
    run_one: impl Fn(&W) -> T + Sync,
    mut on_done: impl FnMut(W, T),
) {
    let work = work.into_iter();
    let items_at_most = work.size_hint().1.unwrap_or(usize::MAX);
    let workers = jobs.clamp(1, items_at_most.max(1));
    let queue = Mutex::new(work);
    let next = || {
        if stop() {
            return None;
        }
        queue
            .lock()
            .expect("no worker panics holding the queue")
            .next()
    };
    let run_one = &run_one;
    let (tx, rx) = std::sync::mpsc::sync_channel(0);
    std::thread::scope(|scope| {
        let mut started = 0;
        for worker in 0..workers {
            let tx = tx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("worker-{worker}"))
                .spawn_scoped(scope, move || {
                    while let Some(item) = next() {
                        let output = run_one(&item);
                        if tx.send((item, output)).is_err() {
                            break;
                        }
                    }
                });
            if spawned.is_err() {
                break;
            }
            started += 1;
        }
        drop(tx);
        if started == 0 {
            while let Some(item) = next() {
                let output = run_one(&item);
                on_done(item, output);
            }
        }
        for (item, output) in rx {
            on_done(item, output);
        }
    });
}

/// How many jobs to run at once by default: every core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The jobs to run at once for `--jobs N`: every core for none or 0, and never more than the
/// cores (each run keeps one core busy: more threads only share them, and a million of them
/// is more than the system starts).
pub fn jobs_for(requested: Option<usize>) -> usize {
    match requested {
        None | Some(0) => default_jobs(),
        Some(n) => n.min(default_jobs()),
    }
}
