//! The shared state of one simulated run: the history being recorded, every node's clock, the
//! node registry, and the fault triggers watching the history.
//!
//! Everything runs on one madsim runtime thread; the mutex only satisfies `Send` for madsim's
//! spawn and is never contended.

pub mod net;
pub mod time;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};

use madsim::runtime::NodeHandle;
use madsim::task::NodeId;
use madsim::time::Instant;
use model::history::{Event, EventKind};
use model::locks::SchemeSpec;
use tokio::sync::mpsc::UnboundedSender;

use crate::faults::When;
use crate::nodes::persistence::Disk;
use crate::scenario::Scenario;
use crate::signal::Signal;
use crate::world::time::NodeClock;

pub struct World {
    pub scenario: Arc<Scenario>,
    pub scheme: SchemeSpec,
    pub seed: u64,
    start: Instant,
    state: Mutex<State>,
    /// Itself, for injecting a triggered fault at the instant of its event (`record`).
    me: Weak<World>,
}

#[derive(Default)]
struct State {
    events: Vec<Event>,
    clocks: BTreeMap<String, NodeClock>,
    node_ids: BTreeMap<String, NodeId>,
    ip_names: BTreeMap<IpAddr, String>,
    /// Lock values → the client that wrote them, for attributing key owners.
    tokens: BTreeMap<String, String>,
    /// Event-triggered faults still waiting for their nth event.
    triggers: Vec<Trigger>,
    /// Where a fired trigger sends its fault index (the nemesis).
    fire: Option<UnboundedSender<usize>>,
    /// Clients that finished their workload, or crashed for good.
    clients_done: std::collections::BTreeSet<String>,
    /// How many times each node was resumed from a pause.
    resumes: BTreeMap<String, u64>,
    /// How many active faults clog each directed link, so overlapping faults heal correctly.
    clogs: BTreeMap<(String, String), u32>,
    /// Extra one-way latency (µs) of each directed link, summed over active `delay` faults.
    delays: BTreeMap<(String, String), u64>,
    /// Open connections: (local, peer) and the switch that resets them.
    conns: BTreeMap<u64, (String, String, Signal)>,
    next_conn: u64,
    /// The node that runs the network's writer queues (see `netlayer`).
    network: Option<NodeHandle>,
    /// The node that runs the nemesis: faults are injected and healed there.
    nemesis: Option<NodeHandle>,
    /// How many times each node's process was started (1 = first start).
    starts: BTreeMap<String, u32>,
    /// What each node keeps on disk (AOF, redis.conf), surviving its crashes.
    disks: BTreeMap<String, Disk>,
    /// The lock key's owner on each Redis node, as last recorded.
    key_owners: BTreeMap<String, String>,
    /// How many active faults of a kind hold each node (pauses, crashes).
    holds: BTreeMap<(String, String), u32>,
}

struct Trigger {
    fault: usize,
    event: String,
    node: Option<String>,
    command: Option<String>,
    nth: u64,
    seen: u64,
    /// 0: the fault is injected at the event's instant, before the node that saw the event
    /// takes another step.
    after_ms: u64,
}

impl World {
    pub fn new(scenario: Arc<Scenario>, scheme: SchemeSpec, seed: u64) -> Arc<World> {
        let mut state = State::default();
        for (fault, f) in scenario.faults.iter().enumerate() {
            if let When::On {
                event,
                node,
                nth,
                command,
                after_ms,
            } = &f.when
            {
                state.triggers.push(Trigger {
                    fault,
                    event: event.clone(),
                    node: node.clone(),
                    command: command.clone(),
                    nth: *nth,
                    seen: 0,
                    after_ms: *after_ms,
                });
            }
        }
        Arc::new_cyclic(|me| World {
            scenario,
            scheme,
            seed,
            start: Instant::now(),
            state: Mutex::new(state),
            me: me.clone(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("the world is only used from the simulation thread")
    }

    /// True simulated time since the start of the run.
    pub fn now_us(&self) -> u64 {
        Instant::now().duration_since(self.start).as_micros() as u64
    }

    pub fn register_node(&self, name: &str, id: NodeId, ip: IpAddr) {
        let mut state = self.state();
        state.node_ids.insert(name.to_string(), id);
        state.ip_names.insert(ip, name.to_string());
        state.clocks.entry(name.to_string()).or_default();
    }

    pub fn node_id(&self, name: &str) -> NodeId {
        self.state().node_ids[name]
    }

    pub fn node_ids(&self) -> Vec<NodeId> {
        self.state().node_ids.values().copied().collect()
    }

    /// The node name behind an IP address (a server names the client of a connection).
    pub fn name_of(&self, ip: IpAddr) -> String {
        self.state()
            .ip_names
            .get(&ip)
            .cloned()
            .unwrap_or_else(|| ip.to_string())
    }

    pub fn set_fault_channel(&self, fire: UnboundedSender<usize>) {
        self.state().fire = Some(fire);
    }

    /// Appends an event to the history and fires any fault trigger it completes. Returns true
    /// when a fault was injected at this very instant (a trigger with `after_ms` 0): the caller
    /// should yield (`emit`) so that a pause or crash of its own node stops it before its next
    /// step, as the scenario says.
    pub fn record(&self, node: &str, kind: EventKind) -> bool {
        self.record_thread(node, None, kind)
    }

    /// Records an event of a task that can go on running, and yields if the event injected a
    /// fault at its instant: madsim stops a paused or killed node's task only where it yields.
    pub async fn emit(&self, node: &str, thread: Option<u32>, kind: EventKind) {
        if self.record_thread(node, thread, kind) {
            madsim::task::yield_now().await;
        }
    }

    /// Like `record`, for an event of one worker thread of a client (`clients.threads` > 1).
    /// Triggers match on the node, whichever thread observed the event.
    pub fn record_thread(&self, node: &str, thread: Option<u32>, kind: EventKind) -> bool {
        let event = Event {
            t_us: self.now_us(),
            node: node.to_string(),
            thread,
            kind,
        };
        let mut state = self.state();
        let name = event.name();
        let command_word = match &event.kind {
            EventKind::CommandSent { command, .. } => command.split(' ').next(),
            _ => None,
        };
        let mut fired = Vec::new();
        for trigger in state.triggers.iter_mut() {
            let matches = trigger.event == name
                && trigger.node.as_deref().is_none_or(|n| n == node)
                && trigger
                    .command
                    .as_deref()
                    .is_none_or(|c| command_word.is_some_and(|w| w.eq_ignore_ascii_case(c)));
            if matches {
                trigger.seen += 1;
                if trigger.seen == trigger.nth {
                    fired.push((trigger.fault, trigger.after_ms));
                }
            }
        }
        if let EventKind::KeyOwner { owner, .. } = &event.kind {
            match owner {
                Some(owner) => state.key_owners.insert(node.to_string(), owner.clone()),
                None => state.key_owners.remove(node),
            };
        }
        state.events.push(event);
        let mut now = Vec::new();
        for (fault, after_ms) in fired {
            if after_ms == 0 {
                now.push(fault);
            } else if let Some(fire) = &state.fire {
                // The nemesis lives to the end of the run; a send can only fail after it.
                let _ = fire.send(fault);
            }
        }
        drop(state);
        let world = self
            .me
            .upgrade()
            .expect("a world records only while it lives");
        for &fault in &now {
            crate::faults::fire_now(&world, fault);
        }
        !now.is_empty()
    }

    pub fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut self.state().events)
    }

    /// The node's wall clock (Unix ms) now.
    pub fn wall_ms(&self, node: &str) -> i64 {
        let now = self.now_us();
        self.state()
            .clocks
            .entry(node.to_string())
            .or_default()
            .wall_ms(now)
    }

    /// The node's monotonic clock (ms) now.
    pub fn mono_ms(&self, node: &str) -> u64 {
        let now = self.now_us();
        self.state()
            .clocks
            .entry(node.to_string())
            .or_default()
            .mono_ms(now)
    }

    /// True time that passes while `node`'s clock advances `local_ms`: a sleep measured by a
    /// drifting oscillator.
    pub fn true_duration_us(&self, node: &str, local_ms: u64) -> u64 {
        self.state()
            .clocks
            .entry(node.to_string())
            .or_default()
            .true_duration_us(local_ms)
    }

    pub fn with_clock<R>(&self, node: &str, f: impl FnOnce(&mut NodeClock, u64) -> R) -> R {
        let now = self.now_us();
        f(
            self.state().clocks.entry(node.to_string()).or_default(),
            now,
        )
    }

    pub fn register_token(&self, token: &str, client: &str) {
        self.state()
            .tokens
            .insert(token.to_string(), client.to_string());
    }

    /// The client whose token `value` is, if any.
    pub fn owner_of(&self, value: &[u8]) -> Option<String> {
        let value = std::str::from_utf8(value).ok()?;
        self.state().tokens.get(value).cloned()
    }

    pub fn resumed(&self, node: &str) {
        *self.state().resumes.entry(node.to_string()).or_default() += 1;
    }

    /// How many times `node` was resumed from a pause so far.
    pub fn resumes(&self, node: &str) -> u64 {
        self.state().resumes.get(node).copied().unwrap_or(0)
    }

    pub fn client_done(&self, name: &str) {
        self.state().clients_done.insert(name.to_string());
    }

    /// A node crashed and will not restart: a client of it will never finish.
    pub fn gone(&self, name: &str) {
        if name.starts_with("client-") {
            self.client_done(name);
        }
    }

    pub fn clients_done(&self) -> u32 {
        self.state().clients_done.len() as u32
    }

    /// Adds one clog on the directed link; true when the link was open before.
    pub fn clog(&self, from: &str, to: &str) -> bool {
        let mut state = self.state();
        let count = state
            .clogs
            .entry((from.to_string(), to.to_string()))
            .or_default();
        *count += 1;
        *count == 1
    }

    /// Whether a fault currently cuts the directed link.
    pub fn is_clogged(&self, from: &str, to: &str) -> bool {
        self.state()
            .clogs
            .contains_key(&(from.to_string(), to.to_string()))
    }

    /// Removes one clog; true when the link is open again.
    pub fn unclog(&self, from: &str, to: &str) -> bool {
        let mut state = self.state();
        let key = (from.to_string(), to.to_string());
        match state.clogs.get_mut(&key) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            Some(_) => {
                state.clogs.remove(&key);
                true
            }
            None => false,
        }
    }
}

impl World {
    pub fn set_network_node(&self, node: NodeHandle) {
        self.state().network = Some(node);
    }

    pub fn set_nemesis_node(&self, node: NodeHandle) {
        self.state().nemesis = Some(node);
    }

    /// Runs a task of the nemesis (waiting out and healing a fault), beyond any fault's reach.
    pub fn spawn_on_nemesis(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let node = self
            .state()
            .nemesis
            .clone()
            .expect("the runner creates the nemesis node before any client");
        node.spawn(task);
    }

    /// Runs a task of the network itself (a connection's writer queue): no fault pauses or
    /// kills it.
    pub fn spawn_on_network(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let node = self
            .state()
            .network
            .clone()
            .expect("the runner creates the network node first");
        node.spawn(task);
    }

    pub fn register_conn(&self, local: &str, peer: &str, reset: Signal) -> u64 {
        let mut state = self.state();
        state.next_conn += 1;
        let id = state.next_conn;
        state
            .conns
            .insert(id, (local.to_string(), peer.to_string(), reset));
        id
    }

    pub fn unregister_conn(&self, id: u64) {
        self.state().conns.remove(&id);
    }

    /// Resets one connection end (and, through the peer's EOF, the connection).
    pub fn reset_conn(&self, id: u64) {
        let reset = self.state().conns.get(&id).map(|(_, _, r)| r.clone());
        if let Some(reset) = reset {
            reset.set();
        }
    }

    /// Resets every connection with `node` at either end; returns how many ends were reset.
    pub fn drop_connections(&self, node: &str) -> usize {
        let resets: Vec<Signal> = self
            .state()
            .conns
            .values()
            .filter(|(local, peer, _)| local == node || peer == node)
            .map(|(_, _, reset)| reset.clone())
            .collect();
        for reset in &resets {
            reset.set();
        }
        resets.len()
    }

    /// The extra one-way latency of the directed link now, in µs.
    pub fn extra_delay_us(&self, from: &str, to: &str) -> u64 {
        self.state()
            .delays
            .get(&(from.to_string(), to.to_string()))
            .copied()
            .unwrap_or(0)
    }

    pub fn add_delay(&self, from: &str, to: &str, extra_us: u64) {
        *self
            .state()
            .delays
            .entry((from.to_string(), to.to_string()))
            .or_default() += extra_us;
    }

    pub fn remove_delay(&self, from: &str, to: &str, extra_us: u64) {
        let mut state = self.state();
        let key = (from.to_string(), to.to_string());
        if let Some(d) = state.delays.get_mut(&key) {
            *d = d.saturating_sub(extra_us);
            if *d == 0 {
                state.delays.remove(&key);
            }
        }
    }

    pub fn with_disk<R>(&self, node: &str, f: impl FnOnce(&mut Disk) -> R) -> R {
        f(self.state().disks.entry(node.to_string()).or_default())
    }

    /// `node` lost its dataset (a crash): records that its lock key has no owner any more.
    pub fn lost_key_owner(&self, node: &str, by: &str) {
        let had_owner = self.state().key_owners.contains_key(node);
        if had_owner {
            self.record(
                node,
                EventKind::KeyOwner {
                    key: self.scheme.key(),
                    owner: None,
                    by: by.to_string(),
                },
            );
        }
    }

    /// One more active `kind` fault on `node`.
    pub fn hold(&self, kind: &str, node: &str) {
        *self
            .state()
            .holds
            .entry((kind.to_string(), node.to_string()))
            .or_default() += 1;
    }

    /// Whether `node`'s process is down (crashed, not yet restarted): it observes nothing.
    pub fn is_crashed(&self, node: &str) -> bool {
        self.state()
            .holds
            .contains_key(&("crash".to_string(), node.to_string()))
    }

    /// One `kind` fault on `node` healed; true when it was the last one.
    pub fn release(&self, kind: &str, node: &str) -> bool {
        let mut state = self.state();
        let key = (kind.to_string(), node.to_string());
        match state.holds.get_mut(&key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => {
                state.holds.remove(&key);
                true
            }
        }
    }

    /// Counts a start of `node`'s process; returns which start this is (1 = the first).
    pub fn started(&self, node: &str) -> u32 {
        let mut state = self.state();
        let n = state.starts.entry(node.to_string()).or_default();
        *n += 1;
        *n
    }
}

/// The seed of one named random stream of a run (`client-1/workload`, `redis-1`): separate
/// streams mean adding a client does not perturb any other node's draws.
pub fn stream_seed(seed: u64, stream: &str) -> u64 {
    use sha1::{Digest, Sha1};
    let mut hasher = Sha1::new();
    hasher.update(seed.to_le_bytes());
    hasher.update(stream.as_bytes());
    let digest = hasher.finalize();
    u64::from_le_bytes(digest[..8].try_into().expect("a SHA-1 digest has 20 bytes"))
}
