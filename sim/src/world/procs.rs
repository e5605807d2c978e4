//! The process table: every node's name, madsim id and address, and the life of its process —
//! how often it started, whether a fault holds it paused or crashed, when a client is done.
//!
//! Fault hooks: `pause`/`resume` (`pause`), `crash`/`restart` (`crash`, `power_loss`), `gone` (a
//! crash without restart). Overlapping faults of one kind on one node are counted: the node resumes (restarts)
//! when the last of them heals.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, OnceLock};

use madsim::runtime::{Handle, NodeHandle};
use madsim::task::NodeId;

use crate::signal::Signal;

/// The simulated IP address of a node, from its name: `redis-N` 10.1.x.x, `client-N` 10.2.x.x,
/// `resource` 10.3.0.1, `redis-N-replica-M` 10.4.N.M, `sentinel-N` 10.5.x.x, `nemesis` 10.9.0.1,
/// `network` 10.9.0.2, `pacer` (live runs) 10.9.0.3.
pub fn node_ip(name: &str) -> IpAddr {
    if let Some((master, replica)) = name
        .strip_prefix("redis-")
        .and_then(|rest| rest.split_once("-replica-"))
    {
        let m = master.parse::<u8>().unwrap_or(0);
        let r = replica.parse::<u8>().unwrap_or(0);
        return IpAddr::V4(Ipv4Addr::new(10, 4, m, r));
    }
    let (net, index) = if let Some(n) = name.strip_prefix("redis-") {
        (1, n.parse::<u32>().unwrap_or(0))
    } else if let Some(n) = name.strip_prefix("sentinel-") {
        (5, n.parse::<u32>().unwrap_or(0))
    } else if name == "network" {
        (9, 2)
    } else if name == "pacer" {
        (9, 3)
    } else if let Some(n) = name.strip_prefix("client-") {
        (2, n.parse::<u32>().unwrap_or(0))
    } else if name == "resource" {
        (3, 1)
    } else {
        (9, 1)
    };
    IpAddr::V4(Ipv4Addr::new(
        10,
        net,
        (index >> 8) as u8,
        (index & 0xff) as u8,
    ))
}

#[derive(Default)]
pub struct Procs {
    state: Mutex<State>,
    /// Bumped whenever a client is done (`clients_done` grew): the runner waits on it.
    client_finished: Signal,
    /// Real processes behind nodes (a live run's client processes): told of every pause,
    /// resume and crash, after the simulated node's own.
    external: OnceLock<Arc<dyn ExternalProcesses>>,
}

/// A controller of real processes that stand behind some nodes (`live`): each call is the one
/// place where that fault is realised on the real process, for a node it owns (it ignores the
/// others).
pub trait ExternalProcesses: Send + Sync {
    /// Pauses the real process behind `node`; true when there is one. Then the simulated node
    /// is not paused: its tasks are the kernel's side of the process (its bridged sockets),
    /// and a kernel keeps receiving bytes for a stopped process.
    fn pause(&self, node: &str) -> bool;
    /// Resumes it; true when `node` has a real process (see `pause`).
    fn resume(&self, node: &str) -> bool;
    fn crash(&self, node: &str);
}

#[derive(Default)]
struct State {
    ids: BTreeMap<String, NodeId>,
    names: BTreeMap<IpAddr, String>,
    /// How many times each node's process was started (1 = first start).
    starts: BTreeMap<String, u32>,
    /// How many active faults of a kind hold each node (pauses, crashes).
    holds: BTreeMap<(String, String), u32>,
    /// How many times each node was resumed from a pause.
    resumes: BTreeMap<String, u64>,
    /// Clients that finished their workload, or crashed for good.
    clients_done: BTreeSet<String>,
    /// The node that runs the nemesis: faults are injected and healed there.
    nemesis: Option<NodeHandle>,
}

impl Procs {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("never poisoned")
    }

    pub fn register(&self, name: &str, id: NodeId, ip: IpAddr) {
        let mut state = self.state();
        state.ids.insert(name.to_string(), id);
        state.names.insert(ip, name.to_string());
    }

    pub fn id(&self, name: &str) -> NodeId {
        self.state().ids[name]
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.state().ids.values().copied().collect()
    }

    /// The node name behind an IP address (a server names the client of a connection).
    pub fn name_of(&self, ip: IpAddr) -> String {
        self.state()
            .names
            .get(&ip)
            .cloned()
            .unwrap_or_else(|| ip.to_string())
    }

    /// Counts a start of `node`'s process; returns which start this is (1 = the first).
    pub fn started(&self, node: &str) -> u32 {
        let mut state = self.state();
        let n = state.starts.entry(node.to_string()).or_default();
        *n += 1;
        *n
    }

    pub fn client_done(&self, name: &str) {
        if self.state().clients_done.insert(name.to_string()) {
            self.client_finished.bump();
        }
    }

    /// Changes each time a client is done.
    pub fn client_finished(&self) -> &Signal {
        &self.client_finished
    }

    pub fn clients_done(&self) -> u32 {
        self.state().clients_done.len() as u32
    }

    /// A node crashed and will not restart: a client of it will never finish.
    pub fn gone(&self, name: &str) {
        if name.starts_with("client-") {
            self.client_done(name);
        }
    }

    /// How many times `node` was resumed from a pause so far.
    pub fn resumes(&self, node: &str) -> u64 {
        self.state().resumes.get(node).copied().unwrap_or(0)
    }

    /// Whether a fault holds `node` paused now.
    pub fn is_paused(&self, node: &str) -> bool {
        self.state()
            .holds
            .contains_key(&("pause".to_string(), node.to_string()))
    }

    /// Whether `node`'s process is down (crashed, not yet restarted): it observes nothing.
    pub fn is_crashed(&self, node: &str) -> bool {
        self.state()
            .holds
            .contains_key(&("crash".to_string(), node.to_string()))
    }

    /// One more active `kind` fault on `node`.
    fn hold(&self, kind: &str, node: &str) {
        *self
            .state()
            .holds
            .entry((kind.to_string(), node.to_string()))
            .or_default() += 1;
    }

    /// One `kind` fault on `node` healed; true when it was the last one.
    fn release(&self, kind: &str, node: &str) -> bool {
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

    /// Registers the controller of the real processes behind nodes (once, before any runs).
    pub fn set_external(&self, external: Arc<dyn ExternalProcesses>) {
        if self.external.set(external).is_err() {
            panic!("a run registers one external process controller");
        }
    }

    /// Stop-the-world pause: every task of the node stops; timers keep running.
    pub fn pause(&self, node: &str) {
        self.hold("pause", node);
        let external = self.external.get().is_some_and(|e| e.pause(node));
        if !external {
            Handle::current().pause(self.id(node));
        }
    }

    /// One pause of `node` healed: it resumes when it was the last.
    pub fn resume(&self, node: &str) {
        if self.release("pause", node) {
            *self.state().resumes.entry(node.to_string()).or_default() += 1;
            let external = self.external.get().is_some_and(|e| e.resume(node));
            if !external {
                Handle::current().resume(self.id(node));
            }
        }
    }

    /// The process dies: its tasks and timers are gone and its peers read EOF.
    pub fn crash(&self, node: &str) {
        self.hold("crash", node);
        Handle::current().kill(self.id(node));
        if let Some(external) = self.external.get() {
            external.crash(node);
        }
    }

    /// One crash of `node` healed: the process starts afresh when it was the last. (madsim: a
    /// restart without a prior kill keeps the old sockets; kill first.)
    pub fn restart(&self, node: &str) {
        if self.release("crash", node) {
            let handle = Handle::current();
            handle.kill(self.id(node));
            handle.restart(self.id(node));
        }
    }

    pub fn set_nemesis(&self, node: NodeHandle) {
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
}
