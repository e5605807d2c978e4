//! The network: which directed links a fault cuts, the extra latency of each link, every open
//! connection, and the `network` node that carries bytes in flight (`socket`: the connections
//! processes hold, over madsim TCP).
//!
//! Fault hooks: `clog`/`unclog` (`partition`, `isolate`, `power_loss`: counted per directed
//! link, so overlapping faults heal correctly), `add_delay`/`remove_delay` (`delay`),
//! `drop_connections` (`drop_connections`), `silence_peers`/`reset_silenced` (`power_loss`).

pub mod socket;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use madsim::net::NetSim;
use madsim::runtime::NodeHandle;
use madsim::task::NodeId;

use crate::signal::Signal;

#[derive(Default)]
pub struct Network {
    state: Mutex<State>,
    /// Chunks processes sent (`socket::NetWriter::send`): the unit of `locksim bench`'s cost per
    /// message. Not part of the trace.
    messages: AtomicU64,
}

#[derive(Default)]
struct State {
    /// How many active faults clog each directed link.
    clogs: BTreeMap<(String, String), u32>,
    /// Extra one-way latency (µs) of each directed link, summed over active `delay` faults.
    delays: BTreeMap<(String, String), u64>,
    /// Open connections, by id.
    conns: BTreeMap<u64, Conn>,
    next_conn: u64,
    /// The node that runs the connections' writer queues (`socket`).
    node: Option<NodeHandle>,
}

/// One registered connection end.
struct Conn {
    local: String,
    peer: String,
    /// Resets this end (reads and writes fail), as a TCP RST does.
    reset: Signal,
    /// Set when the peer's machine lost power: this end hears nothing more (`socket`).
    silence: Signal,
}

fn link(from: &str, to: &str) -> (String, String) {
    (from.to_string(), to.to_string())
}

impl Network {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("never poisoned")
    }

    /// Adds one clog on the directed link (`ids`: its ends); madsim cuts it when it was open.
    pub fn clog(&self, from: &str, to: &str, ids: (NodeId, NodeId)) {
        let first = {
            let mut state = self.state();
            let count = state.clogs.entry(link(from, to)).or_default();
            *count += 1;
            *count == 1
        };
        if first {
            NetSim::current().clog_link(ids.0, ids.1);
        }
    }

    /// Removes one clog; madsim opens the link when it was the last.
    pub fn unclog(&self, from: &str, to: &str, ids: (NodeId, NodeId)) {
        let last = {
            let mut state = self.state();
            let key = link(from, to);
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
        };
        if last {
            NetSim::current().unclog_link(ids.0, ids.1);
        }
    }

    /// Whether a fault currently cuts the directed link.
    pub fn is_clogged(&self, from: &str, to: &str) -> bool {
        let state = self.state();
        !state.clogs.is_empty() && state.clogs.contains_key(&link(from, to))
    }

    /// The extra one-way latency of the directed link now, in µs. Asked on every send: without
    /// a `delay` fault it answers without building the link's key.
    pub fn extra_delay_us(&self, from: &str, to: &str) -> u64 {
        let state = self.state();
        if state.delays.is_empty() {
            return 0;
        }
        state.delays.get(&link(from, to)).copied().unwrap_or(0)
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

    pub fn register_conn(&self, local: &str, peer: &str, reset: Signal, silence: Signal) -> u64 {
        let mut state = self.state();
        state.next_conn += 1;
        let id = state.next_conn;
        let conn = Conn {
            local: local.to_string(),
            peer: peer.to_string(),
            reset,
            silence,
        };
        state.conns.insert(id, conn);
        id
    }

    pub fn unregister_conn(&self, id: u64) {
        self.state().conns.remove(&id);
    }

    /// Resets one connection end (and, through the peer's EOF, the connection).
    pub fn reset_conn(&self, id: u64) {
        let reset = self.state().conns.get(&id).map(|c| c.reset.clone());
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
            .filter(|c| c.local == node || c.peer == node)
            .map(|c| c.reset.clone())
            .collect();
        for reset in &resets {
            reset.set();
        }
        resets.len()
    }

    /// `node`'s machine lost power: every other end of its connections hears nothing more — no
    /// bytes still in flight, no FIN — until its own timeouts, or until the machine is back
    /// (`reset_silenced`). Writes to it vanish, as unacknowledged segments do.
    pub fn silence_peers(&self, node: &str) {
        for c in self.state().conns.values() {
            if c.peer == node && c.local != node {
                c.silence.set();
            }
        }
    }

    /// `node`'s machine is back: its kernel answers the old connections' segments with RST, so
    /// every end it silenced is reset.
    pub fn reset_silenced(&self, node: &str) {
        let resets: Vec<Signal> = self
            .state()
            .conns
            .values()
            .filter(|c| c.peer == node && c.silence.is_set())
            .map(|c| c.reset.clone())
            .collect();
        for reset in &resets {
            reset.set();
        }
    }

    pub fn set_node(&self, node: NodeHandle) {
        self.state().node = Some(node);
    }

    /// Runs a task of the network itself (a connection's writer queue): no fault pauses or
    /// kills it.
    pub fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let node = self
            .state()
            .node
            .clone()
            .expect("the runner creates the network node first");
        node.spawn(task);
    }
}
