//! The network: which directed links a fault cuts, the latency of each link, the listening
//! ports, every open connection, and the `network` node that retransmits across cut links
//! (`socket`: the connections processes hold and how their bytes travel).
//!
//! Fault hooks: `clog`/`unclog` (`partition`, `isolate`, `power_loss`: counted per directed
//! link, so overlapping faults heal correctly), `add_delay`/`remove_delay` (`delay`),
//! `drop_connections` (`drop_connections`), `silence_peers`/`reset_silenced` (`power_loss`).

pub mod socket;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::NodeHandle;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use socket::{Backlog, Pipe};

pub struct Network {
    state: Mutex<State>,
    /// Chunks processes sent (`socket::NetWriter::send`): the unit of `locksim bench`'s cost per
    /// message. Not part of the trace.
    messages: AtomicU64,
}

struct State {
    /// One-way latency of every link (ns, both ends included): the scenario's `network.latency_ms`.
    latency_ns: (u64, u64),
    /// The run's own stream for latencies (`stream_seed(seed, "network")`).
    rng: ChaCha8Rng,
    /// How many active faults clog each directed link.
    clogs: BTreeMap<(String, String), u32>,
    /// Extra one-way latency (µs) of each directed link, summed over active `delay` faults.
    delays: BTreeMap<(String, String), u64>,
    /// Listening sockets: (node, port) and their accept queue.
    listeners: BTreeMap<(String, u16), Arc<Backlog>>,
    /// Open connections: both directions, and how many of the two ends are still open.
    conns: BTreeMap<u64, Conn>,
    next_conn: u64,
    /// The node that runs the retransmitters of cut links (`socket`).
    node: Option<NodeHandle>,
}

struct Conn {
    /// `pipes[0]` carries the connecting end's bytes, `pipes[1]` the accepting end's.
    pipes: [Arc<Pipe>; 2],
    open_ends: u8,
}

fn link(from: &str, to: &str) -> (String, String) {
    (from.to_string(), to.to_string())
}

impl Network {
    /// The network of a run: `latency_ms` is the one-way latency range of every link (both ends
    /// included), drawn from a stream of the run's own.
    pub fn new(latency_ms: (u64, u64), rng_seed: u64) -> Network {
        Network {
            state: Mutex::new(State {
                latency_ns: (latency_ms.0 * 1_000_000, latency_ms.1 * 1_000_000),
                rng: ChaCha8Rng::seed_from_u64(rng_seed),
                clogs: BTreeMap::new(),
                delays: BTreeMap::new(),
                listeners: BTreeMap::new(),
                conns: BTreeMap::new(),
                next_conn: 0,
                node: None,
            }),
            messages: AtomicU64::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("never poisoned")
    }

    /// Adds one clog on the directed link: bytes sent on it wait (`socket`), connections across
    /// it are not answered.
    pub fn clog(&self, from: &str, to: &str) {
        *self.state().clogs.entry(link(from, to)).or_default() += 1;
    }

    /// Removes one clog; the link opens when it was the last.
    pub fn unclog(&self, from: &str, to: &str) {
        let mut state = self.state();
        let key = link(from, to);
        match state.clogs.get_mut(&key) {
            Some(count) if *count > 1 => *count -= 1,
            Some(_) => {
                state.clogs.remove(&key);
            }
            None => {}
        }
    }

    /// Whether a fault currently cuts the directed link.
    pub fn is_clogged(&self, from: &str, to: &str) -> bool {
        let state = self.state();
        !state.clogs.is_empty() && state.clogs.contains_key(&link(from, to))
    }

    /// How long bytes sent now on the directed link take to arrive: a latency drawn from the
    /// link's range plus its `delay` faults' extra; `None` while a fault cuts it. Asked on every
    /// send: without faults it builds no key.
    pub fn transit(&self, from: &str, to: &str) -> Option<Duration> {
        self.draw(from, to, true)
    }

    /// How long a connection's handshake packet takes on the directed link: its latency
    /// without the extra of `delay` faults, which slow the bytes a link carries (as they always
    /// have here); `None` while a fault cuts it.
    pub fn handshake(&self, from: &str, to: &str) -> Option<Duration> {
        self.draw(from, to, false)
    }

    fn draw(&self, from: &str, to: &str, delayed: bool) -> Option<Duration> {
        let mut state = self.state();
        let state = &mut *state;
        let key = (!state.clogs.is_empty() || !state.delays.is_empty()).then(|| link(from, to));
        if let Some(key) = &key
            && state.clogs.contains_key(key)
        {
            return None;
        }
        let extra_us = key
            .filter(|_| delayed)
            .and_then(|key| state.delays.get(&key).copied())
            .unwrap_or(0);
        let latency_ns = state.rng.gen_range(state.latency_ns.0..=state.latency_ns.1);
        Some(Duration::from_nanos(latency_ns) + Duration::from_micros(extra_us))
    }

    /// Counts one message sent (see `messages`).
    pub fn count_message(&self) {
        self.messages.fetch_add(1, Ordering::Relaxed);
    }

    /// Messages sent so far in this run.
    pub fn messages(&self) -> u64 {
        self.messages.load(Ordering::Relaxed)
    }

    pub fn add_delay(&self, from: &str, to: &str, extra_us: u64) {
        *self.state().delays.entry(link(from, to)).or_default() += extra_us;
    }

    pub fn remove_delay(&self, from: &str, to: &str, extra_us: u64) {
        let mut state = self.state();
        let key = link(from, to);
        if let Some(d) = state.delays.get_mut(&key) {
            *d = d.saturating_sub(extra_us);
            if *d == 0 {
                state.delays.remove(&key);
            }
        }
    }

    /// Starts listening on `node`'s `port`, in place of any earlier listener there (the socket
    /// of a process that is gone).
    fn listen(&self, node: &str, port: u16, backlog: Arc<Backlog>) {
        self.state()
            .listeners
            .insert((node.to_string(), port), backlog);
    }

    /// Stops listening, unless another listener took the port since.
    fn unlisten(&self, node: &str, port: u16, backlog: &Arc<Backlog>) {
        let mut state = self.state();
        let key = (node.to_string(), port);
        if state
            .listeners
            .get(&key)
            .is_some_and(|b| Arc::ptr_eq(b, backlog))
        {
            state.listeners.remove(&key);
        }
    }

    fn listener(&self, node: &str, port: u16) -> Option<Arc<Backlog>> {
        self.state()
            .listeners
            .get(&(node.to_string(), port))
            .cloned()
    }

    /// Registers a new connection's two directions; returns its id.
    fn register_conn(&self, pipes: [Arc<Pipe>; 2]) -> u64 {
        let mut state = self.state();
        state.next_conn += 1;
        let id = state.next_conn;
        state.conns.insert(
            id,
            Conn {
                pipes,
                open_ends: 2,
            },
        );
        id
    }

    /// One end of the connection was closed; it is forgotten when both are.
    fn end_closed(&self, id: u64) {
        let mut state = self.state();
        if let Some(conn) = state.conns.get_mut(&id) {
            conn.open_ends -= 1;
            if conn.open_ends == 0 {
                state.conns.remove(&id);
            }
        }
    }

    /// Resets every connection with `node` at either end; returns how many ends were reset.
    pub fn drop_connections(&self, node: &str) -> usize {
        let pipes: Vec<Arc<Pipe>> = self
            .state()
            .conns
            .values()
            .filter(|c| c.pipes[0].touches(node))
            .flat_map(|c| c.pipes.iter().cloned())
            .collect();
        for pipe in &pipes {
            pipe.reset_receiver();
        }
        pipes.len()
    }

    /// `node`'s machine lost power: its connections carry nothing more either way — no bytes
    /// still in flight, no FIN — until its peers' own timeouts, or until the machine is back
    /// (`reset_silenced`). Writes to it vanish, as unacknowledged segments do.
    pub fn silence_peers(&self, node: &str) {
        for conn in self.state().conns.values() {
            let [outgoing, incoming] = &conn.pipes;
            if outgoing.touches(node) && outgoing.sender() != incoming.sender() {
                outgoing.silence();
                incoming.silence();
            }
        }
    }

    /// `node`'s machine is back: its kernel answers the old connections' segments with RST, so
    /// every peer end it silenced is reset.
    pub fn reset_silenced(&self, node: &str) {
        let toward_peers: Vec<Arc<Pipe>> = self
            .state()
            .conns
            .values()
            .flat_map(|conn| conn.pipes.iter())
            .filter(|pipe| pipe.sender() == node && pipe.is_silenced())
            .cloned()
            .collect();
        for pipe in &toward_peers {
            pipe.reset_receiver();
        }
    }

    pub fn set_node(&self, node: NodeHandle) {
        self.state().node = Some(node);
    }

    /// Runs a task of the network itself (a retransmitter): no fault pauses or kills it.
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let node = self
            .state()
            .node
            .clone()
            .expect("the runner creates the network node first");
        node.spawn(task);
    }
}
