//! The world of one run: its identity (scenario, scheme, seed) and the simulated resources it is
//! made of. Each resource is a module that owns its state and the hooks its faults call:
//!
//! | part | module | owns | fault hooks |
//! |---|---|---|---|
//! | `time` | `time` | true time since the start, per-node clocks | `clock_jump`, `clock_drift` |
//! | `net` | `net` (`net::socket`) | cut links, link latencies and delays, listening ports, open connections, the `network` node | `partition`, `isolate`, `delay`, `drop_connections`, `power_loss` |
//! | `disks` | `storage` | every node's disk: AOF (fsynced or not), config files | `power_loss` |
//! | `procs` | `procs` | node names, ids and addresses; starts, pauses, crashes; the `nemesis` node | `pause`, `crash`, `power_loss` |
//! | `history` | `history` | the events, lock tokens, key owners, event triggers | — |
//!
//! The world only composes them, and records events: `record` appends to the history and hands
//! the triggers an event completed to the fault layer through the hook the runner registers
//! (`set_fault_hook`), so that nothing here depends on the faults.
//!
//! Everything runs on one madsim runtime thread; each part's mutex only satisfies `Send` for
//! madsim's spawn and is never contended (no part calls another while holding its lock).

pub mod history;
pub mod net;
pub mod procs;
pub mod storage;
pub mod time;

use std::sync::{Arc, OnceLock, Weak};

use model::history::{Event, EventKind};
use model::locks::SchemeSpec;
use tokio::sync::mpsc::UnboundedSender;

use crate::scenario::Scenario;
use crate::scenario::faults::When;
use history::{Budget, Fired, History, Trigger};
use net::Network;
use procs::Procs;
use storage::Disks;
use time::Time;

pub struct World {
    pub scenario: Arc<Scenario>,
    pub scheme: SchemeSpec,
    pub seed: u64,
    pub time: Time,
    pub net: Network,
    pub disks: Disks,
    pub procs: Procs,
    pub history: History,
    /// What becomes of a fired trigger (registered by the runner).
    fault_hook: OnceLock<FaultHook>,
    /// See `tracks_lock_writes`.
    tracks_lock_writes: bool,
    /// Itself, for injecting a triggered fault at the instant of its event (`record`).
    me: Weak<World>,
}

/// How the fault layer takes the faults whose trigger fired, each with the client its event
/// names (the `{holder}` of its placeholders).
pub struct FaultHook {
    /// A fault whose trigger has `after_ms` > 0, by index: the scripted nemesis schedules it.
    pub later: UnboundedSender<(usize, Option<String>)>,
    /// Injects a fault whose trigger has `after_ms` 0 at once, from the recording task.
    pub now: fn(&Arc<World>, usize, Option<String>),
}

impl World {
    pub fn new(
        scenario: Arc<Scenario>,
        scheme: SchemeSpec,
        seed: u64,
        budget: Budget,
    ) -> Arc<World> {
        let mut triggers = Vec::new();
        for (fault, f) in scenario.faults.iter().enumerate() {
            if let When::On {
                event,
                node,
                nth,
                command,
                after_ms,
            } = &f.when
            {
                triggers.push(Trigger {
                    fault,
                    event: event.clone(),
                    node: node.clone(),
                    command: command.clone(),
                    nth: *nth,
                    after_ms: *after_ms,
                });
            }
        }
        let tracks_lock_writes = scenario.faults.iter().any(|f| f.needs_lock_writers());
        let latency = scenario.network.latency_ms;
        let net = Network::new((latency.min, latency.max), stream_seed(seed, "network"));
        Arc::new_cyclic(|me| World {
            scenario,
            scheme,
            seed,
            time: Time::new(),
            net,
            disks: Disks::default(),
            procs: Procs::default(),
            history: History::new(triggers, budget),
            fault_hook: OnceLock::new(),
            tracks_lock_writes,
            me: me.clone(),
        })
    }

    /// Where fired triggers go from now on (once, before any node runs).
    pub fn set_fault_hook(&self, hook: FaultHook) {
        if self.fault_hook.set(hook).is_err() {
            panic!("the runner registers the fault hook once");
        }
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
        let injected = self.record_thread(node, thread, kind);
        if self.history.full() {
            // The run is over (the history's budget is spent): the task stops here, so that even
            // a loop that takes no simulated time lets the runner see it.
            std::future::pending::<()>().await;
        }
        if injected {
            madsim::task::yield_now().await;
        }
    }

    /// Like `record`, for an event of one worker thread of a client (`clients.threads` > 1).
    /// Triggers match on the node, whichever thread observed the event.
    pub fn record_thread(&self, node: &str, thread: Option<u32>, kind: EventKind) -> bool {
        let event = Event {
            t_us: self.time.now_us(),
            node: node.to_string(),
            thread,
            kind,
        };
        let fired = self.history.record(event);
        self.fire(fired)
    }

    /// Hands fired triggers to the fault layer; true when one was injected at this instant.
    fn fire(&self, fired: Vec<Fired>) -> bool {
        let Some(hook) = self.fault_hook.get() else {
            return false;
        };
        let mut now = Vec::new();
        for f in fired {
            if f.after_ms == 0 {
                now.push((f.fault, f.holder));
            } else {
                // The nemesis lives to the end of the run; a send can only fail after it.
                let _ = hook.later.send((f.fault, f.holder));
            }
        }
        if now.is_empty() {
            return false;
        }
        let world = self
            .me
            .upgrade()
            .expect("a world records only while it lives");
        for (fault, holder) in now {
            (hook.now)(&world, fault, holder);
        }
        true
    }

    /// Whether Redis nodes report lock-key writes (`lock_written`): only when a fault needs
    /// them, so other runs pay nothing.
    pub fn tracks_lock_writes(&self) -> bool {
        self.tracks_lock_writes
    }

    /// `client`'s command left the lock key written on `node`: fires the `lock_written` and
    /// `lock_granted` triggers it completes.
    pub fn lock_written(&self, node: &str, client: &str) {
        let masters = self.scenario.master_names();
        let fired = self
            .history
            .lock_written(node, client, &masters, masters.len() / 2 + 1);
        self.fire(fired);
    }

    /// The lock key on `node` is gone (deleted, expired, lost).
    pub fn lock_gone(&self, node: &str) {
        if self.tracks_lock_writes {
            let masters = self.scenario.master_names();
            self.history
                .lock_gone(node, &masters, masters.len() / 2 + 1);
        }
    }

    /// `node` lost its dataset (a crash): records that its lock key has no owner any more.
    pub fn lost_key_owner(&self, node: &str, by: &str) {
        if self.history.has_key_owner(node) {
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
