//! The history recorder: the run's events in the order they happen, what the checkers need to
//! attribute them (which client wrote each lock value, who owns the lock key on each Redis
//! node), and the event triggers of scripted faults (`on`: the `nth` matching event).
//!
//! Recording reports which triggers an event completed; injecting their faults is the fault
//! layer's job (`World::record`), so the recorder knows nothing of faults beyond their index.
//!
//! It also keeps, for scenarios whose faults need them, which client's write each Redis node's
//! lock key holds (`lock_writers`): the moments `lock_written` (a client's command left the key
//! written on a node) and `lock_granted` (a client's writes now stand on a quorum of the
//! scheme's masters) are triggers, not events of the trace, and `{holder_master}` is resolved
//! from them. Writers are the connections' clients, so schemes whose lock value names nobody
//! (`set`, `incr-semaphore`) are followed too.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use foldhash::fast::FixedState;

use model::history::{Event, EventKind, owner_node};

use crate::signal::Signal;

/// A scripted fault waiting for its `nth` event.
pub struct Trigger {
    /// The fault's index in the scenario's `faults`.
    pub fault: usize,
    pub event: String,
    pub node: Option<String>,
    /// For `command_sent`: the command's first word (any case).
    pub command: Option<String>,
    pub nth: u64,
    /// 0: the fault is injected at the event's instant, before the node that saw the event
    /// takes another step.
    pub after_ms: u64,
}

/// A trigger that its event completed: the fault's index, its `after_ms`, and the client the
/// event names (the `{holder}` of the fault's placeholders).
pub struct Fired {
    pub fault: usize,
    pub after_ms: u64,
    pub holder: Option<String>,
}

/// How much one run's history may hold. A run that reaches it stops (its tasks park at their
/// next event) and is reported as an error, so that no product of scenario fields (clients ×
/// threads × duration × polling rate × faults) can run for hours or fill the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub events: usize,
    /// As `Event::size_bytes` counts them.
    pub bytes: usize,
    /// The work of every Lua script of the run together, in the units of the simulated
    /// `lua-time-limit` (`model::redis::script_limits::ScriptProgress::work`), and of the large
    /// replies (see `nodes::redis`): a script that runs away, or returns millions of elements
    /// at every attempt, records few events however long it runs, and simulated time stands
    /// still while it does (issue 31).
    pub script_work: u64,
}

impl Budget {
    /// 1,000,000 events — 50 times the catalog's busiest run (18,783 events); 3 s of one core
    /// for two clients, 14 s for a thousand (measured in release on the project's 2-core
    /// machine) — or 256 MiB — or 4,000,000,000 units of script work: twenty scripts stopped at
    /// the default `lua_time_limit_work`, two at its largest, about 10 s of one core (a runaway
    /// script stopped at the default limit costs 0.5 s; the catalog's scripts do a few thousand
    /// units per run).
    pub const DEFAULT: Budget = Budget {
        events: 1_000_000,
        bytes: 256 << 20,
        script_work: 4_000_000_000,
    };
}

pub struct History {
    state: Mutex<State>,
    /// Set when the budget runs out (the runner waits on it).
    filled: Signal,
}

/// Triggers that count the same events (one event name, node and command) share one count:
/// each event then costs a lookup per group instead of a visit to every trigger, so a scenario
/// with many triggered faults is not quadratic (issue 15).
struct TriggerGroup {
    node: Option<String>,
    command: Option<String>,
    /// Matching events seen so far.
    seen: u64,
    /// The faults (index, `after_ms`) each count fires, in the scenario's order.
    by_nth: BTreeMap<u64, Vec<(usize, u64)>>,
}

fn group(triggers: Vec<Trigger>) -> BTreeMap<String, Vec<TriggerGroup>> {
    let mut groups: BTreeMap<String, Vec<TriggerGroup>> = BTreeMap::new();
    for t in triggers {
        let same_event = groups.entry(t.event).or_default();
        let index = match same_event
            .iter()
            .position(|g| g.node == t.node && g.command == t.command)
        {
            Some(index) => index,
            None => {
                same_event.push(TriggerGroup {
                    node: t.node,
                    command: t.command,
                    seen: 0,
                    by_nth: BTreeMap::new(),
                });
                same_event.len() - 1
            }
        };
        same_event[index]
            .by_nth
            .entry(t.nth)
            .or_default()
            .push((t.fault, t.after_ms));
    }
    groups
}

struct State {
    budget: Budget,
    events: Vec<Event>,
    /// What `events` holds, as `Event::size_bytes` counts it.
    bytes: usize,
    /// The budget ran out: nothing more is recorded.
    full: bool,
    /// Script work done so far (see [`Budget::script_work`]).
    script_work: u64,
    /// Lock values → whose they are, for attributing key owners. Hashed (never iterated):
    /// looked up after every command a Redis node executes, an ordered map's search compared
    /// about eight 40-byte tokens each time (issue 32).
    tokens: HashMap<String, Token, FixedState>,
    /// The worker thread (`client-1/t2`) that last sent a command on each client connection,
    /// by the connection's client address, for attributing a key change to the thread whose
    /// command made it: the threads of a process share its pooled connections, and the server
    /// knows only the process. Kept only for scenarios whose clients run several threads.
    senders: BTreeMap<std::net::SocketAddr, String>,
    /// The lock key's owner on each Redis node, as last recorded.
    key_owners: BTreeMap<String, String>,
    /// The triggers by event name, in groups that count the same events.
    triggers: BTreeMap<String, Vec<TriggerGroup>>,
    /// The client whose write each Redis node's lock key holds, while it exists.
    lock_writers: BTreeMap<String, String>,
    /// Clients whose writes stand on a quorum of the masters (`lock_granted` fired).
    granted: BTreeSet<String>,
}

/// Whose a lock value is.
enum Token {
    /// One owner's (a client, or one worker thread of it).
    Owner(String),
    /// Shared by the worker threads of this process (seed 003's one clientId per lock
    /// instance): the key is the thread's whose command wrote it.
    Threads(String),
}

impl History {
    pub fn new(triggers: Vec<Trigger>, budget: Budget) -> History {
        History {
            state: Mutex::new(State {
                budget,
                events: Vec::new(),
                bytes: 0,
                full: false,
                script_work: 0,
                tokens: HashMap::with_hasher(FixedState::with_seed(0)),
                senders: BTreeMap::new(),
                key_owners: BTreeMap::new(),
                triggers: group(triggers),
                lock_writers: BTreeMap::new(),
                granted: BTreeSet::new(),
            }),
            filled: Signal::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("never poisoned")
    }

    /// Appends an event; returns the triggers it completed, in the scenario's order. Once the
    /// budget is spent nothing more is recorded (see [`Budget`]).
    pub fn record(&self, event: Event) -> Vec<Fired> {
        let mut state = self.state();
        if state.full {
            return Vec::new();
        }
        state.bytes += event.size_bytes();
        state.full =
            state.events.len() + 1 >= state.budget.events || state.bytes >= state.budget.bytes;
        if state.full {
            self.filled.set();
        }
        let command_word = match &event.kind {
            EventKind::CommandSent { command, .. } => command.split(' ').next(),
            _ => None,
        };
        // Client events name their client; `replicated` (a replica's) names none.
        let holder = match event.kind {
            EventKind::AcquireStarted { .. }
            | EventKind::Acquired { .. }
            | EventKind::Released { .. }
            | EventKind::CommandSent { .. } => Some(event.node.as_str()),
            _ => None,
        };
        let fired = state.matching(event.name(), &event.node, command_word, holder);
        if let EventKind::KeyOwner { owner, .. } = &event.kind {
            match owner {
                Some(owner) => state.key_owners.insert(event.node.clone(), owner.clone()),
                None => state.key_owners.remove(&event.node),
            };
        }
        state.events.push(event);
        fired
    }

    /// Room for `events` events up front (at most the budget's): a history grown by doubling
    /// copies itself into fresh memory at each step (see `runner::expected_events`).
    pub fn reserve(&self, events: usize) {
        let mut state = self.state();
        let events = events.min(state.budget.events);
        state.events.reserve(events);
    }

    /// Whether the run's budget is spent: the run must stop.
    pub fn full(&self) -> bool {
        self.state().full
    }

    /// Set once the run's budget is spent.
    pub fn filled(&self) -> &Signal {
        &self.filled
    }

    /// Counts `units` of script work; past the budget's `script_work` the run must stop, as
    /// when its events fill the budget. Returns whether the budget is spent.
    pub fn add_script_work(&self, units: u64) -> bool {
        let mut state = self.state();
        state.script_work = state.script_work.saturating_add(units);
        if state.script_work > state.budget.script_work && !state.full {
            state.full = true;
            self.filled.set();
        }
        state.full
    }

    /// The script work counted so far, when it is what spent the budget.
    pub fn script_work_spent(&self) -> Option<u64> {
        let state = self.state();
        (state.script_work > state.budget.script_work).then_some(state.script_work)
    }

    /// Events and bytes recorded so far.
    pub fn size(&self) -> (usize, usize) {
        let state = self.state();
        (state.events.len(), state.bytes)
    }

    /// `client`'s command left the lock key written on `node`: fires `lock_written`, and
    /// `lock_granted` when this makes the client's writes stand on `quorum` of `masters`.
    pub fn lock_written(
        &self,
        node: &str,
        client: &str,
        masters: &[String],
        quorum: usize,
    ) -> Vec<Fired> {
        let mut state = self.state();
        state
            .lock_writers
            .insert(node.to_string(), client.to_string());
        state.regrant(masters, quorum);
        let mut fired = state.matching("lock_written", node, None, Some(client));
        if state.standing(client, masters) >= quorum && state.granted.insert(client.to_string()) {
            fired.extend(state.matching("lock_granted", client, None, Some(client)));
        }
        fired
    }

    /// The lock key on `node` is gone (deleted, expired, lost in a crash): a client whose writes
    /// fall below the quorum can be granted again.
    pub fn lock_gone(&self, node: &str, masters: &[String], quorum: usize) {
        let mut state = self.state();
        if state.lock_writers.remove(node).is_some() {
            state.regrant(masters, quorum);
        }
    }

    /// The nodes whose lock key holds `client`'s write, in name order.
    pub fn lock_written_by(&self, client: &str) -> Vec<String> {
        self.state()
            .lock_writers
            .iter()
            .filter(|(_, w)| *w == client)
            .map(|(node, _)| node.clone())
            .collect()
    }

    /// Whether a client believes it holds the lock now: its last `acquired` has no `released`
    /// after it. A scan of the history, for a mark that fires rarely (`ClockJumpWhileHeld`).
    pub fn some_client_holds(&self) -> bool {
        !self.holders_and_key_owner(None).0.is_empty()
    }

    /// Whether a client believes it holds the lock while `node`'s lock key is not its write:
    /// gone (`has_key` false) or, by `node`'s last `key_owner` event, another client's (a
    /// previous holder's release that never reached it). A scan of the history, for a mark
    /// that fires rarely (`PromotedWhileHeld`).
    pub fn holder_lacks_key_on(&self, node: &str, has_key: bool) -> bool {
        let (holding, key_owner) = self.holders_and_key_owner(Some(node));
        let owner = key_owner.as_deref().filter(|_| has_key);
        holding.iter().any(|holder| {
            owner
                .is_none_or(|o| model::history::owner_node(o) != model::history::owner_node(holder))
        })
    }

    /// The clients whose last `acquired` has no `released` after it, and the owner `node`'s
    /// last `key_owner` event named (none without a node).
    fn holders_and_key_owner(&self, node: Option<&str>) -> (BTreeSet<String>, Option<String>) {
        let state = self.state();
        let mut holding = BTreeSet::new();
        let mut key_owner: Option<String> = None;
        for e in &state.events {
            match &e.kind {
                EventKind::Acquired { .. } => {
                    holding.insert(model::history::owner_name(&e.node, e.thread));
                }
                EventKind::Released { .. } => {
                    holding.remove(&model::history::owner_name(&e.node, e.thread));
                }
                EventKind::KeyOwner { owner, .. } if Some(e.node.as_str()) == node => {
                    key_owner = owner.clone();
                }
                _ => {}
            }
        }
        (holding, key_owner)
    }

    pub fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut self.state().events)
    }

    /// `client` (a process, or one of its worker threads) writes `token` into the lock key. A
    /// value another thread of the same process registered too names the process's threads;
    /// one registered by another process is the last registrant's.
    pub fn register_token(&self, token: &str, client: &str) {
        let mut state = self.state();
        let token_owner = match state.tokens.get(token) {
            Some(Token::Owner(o)) if o != client && owner_node(o) == owner_node(client) => {
                Token::Threads(owner_node(client).to_string())
            }
            Some(Token::Threads(process)) if process == owner_node(client) => return,
            _ => Token::Owner(client.to_string()),
        };
        state.tokens.insert(token.to_string(), token_owner);
    }

    /// `owner` sends the next command on the connection from `addr`.
    pub fn sent_by(&self, addr: std::net::SocketAddr, owner: &str) {
        let mut state = self.state();
        if state.senders.get(&addr).is_none_or(|o| o != owner) {
            state.senders.insert(addr, owner.to_string());
        }
    }

    /// The worker thread that last sent a command on the connection from `addr`, if recorded.
    pub fn sender(&self, addr: std::net::SocketAddr) -> Option<String> {
        self.state().senders.get(&addr).cloned()
    }

    /// Whether `value` is a registered lock value.
    pub fn is_token(&self, value: &[u8]) -> bool {
        std::str::from_utf8(value).is_ok_and(|v| self.state().tokens.contains_key(v))
    }

    /// The owner `value` names when `writer` (a client, a worker thread, or a cause such as
    /// `replication`) just wrote it: its one owner, or for a value the threads of a process
    /// share, the thread that wrote it (the process when the writer is not one of them).
    pub fn owner_of(&self, value: &[u8], writer: &str) -> Option<String> {
        let value = std::str::from_utf8(value).ok()?;
        match self.state().tokens.get(value)? {
            Token::Owner(owner) => Some(owner.clone()),
            Token::Threads(process) if owner_node(writer) == process && writer != process => {
                Some(writer.to_string())
            }
            Token::Threads(process) => Some(process.clone()),
        }
    }

    /// Whether the lock key on `node` has an owner, as last recorded.
    pub fn has_key_owner(&self, node: &str) -> bool {
        self.state().key_owners.contains_key(node)
    }
}

impl State {
    /// On how many of `masters` the lock key holds `client`'s write.
    fn standing(&self, client: &str, masters: &[String]) -> usize {
        masters
            .iter()
            .filter(|m| self.lock_writers.get(*m).is_some_and(|w| w == client))
            .count()
    }

    /// Forgets the grants of clients whose writes no longer stand on a quorum: they can be
    /// granted again.
    fn regrant(&mut self, masters: &[String], quorum: usize) {
        let still: BTreeSet<String> = self
            .granted
            .iter()
            .filter(|c| self.standing(c, masters) >= quorum)
            .cloned()
            .collect();
        self.granted = still;
    }

    /// Counts the event against every waiting trigger; returns the ones it completed.
    fn matching(
        &mut self,
        name: &str,
        node: &str,
        command_word: Option<&str>,
        holder: Option<&str>,
    ) -> Vec<Fired> {
        let mut fired = Vec::new();
        let Some(groups) = self.triggers.get_mut(name) else {
            return fired;
        };
        for group in groups {
            let matches = group.node.as_deref().is_none_or(|n| n == node)
                && group
                    .command
                    .as_deref()
                    .is_none_or(|c| command_word.is_some_and(|w| w.eq_ignore_ascii_case(c)));
            if !matches {
                continue;
            }
            group.seen += 1;
            for &(fault, after_ms) in group.by_nth.get(&group.seen).into_iter().flatten() {
                fired.push(Fired {
                    fault,
                    after_ms,
                    holder: holder.map(str::to_string),
                });
            }
        }
        // In the scenario's order, as when every trigger was visited in turn.
        fired.sort_by_key(|f| f.fault);
        fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(
        fault: usize,
        event: &str,
        node: Option<&str>,
        command: Option<&str>,
        nth: u64,
    ) -> Trigger {
        Trigger {
            fault,
            event: event.into(),
            node: node.map(Into::into),
            command: command.map(Into::into),
            nth,
            after_ms: fault as u64,
        }
    }

    fn sent(history: &History, node: &str, command: &str) -> Vec<usize> {
        let kind = EventKind::CommandSent {
            command: command.into(),
            server: "redis-1".into(),
        };
        let fired = history.record(Event {
            t_us: 0,
            node: node.into(),
            thread: None,
            kind,
        });
        fired.iter().map(|f| f.fault).collect()
    }

    #[test]
    fn each_trigger_fires_on_its_nth_matching_event_in_scenario_order() {
        let history = History::new(
            vec![
                trigger(0, "command_sent", Some("c1"), Some("set"), 2),
                trigger(1, "command_sent", None, None, 1),
                trigger(2, "command_sent", Some("c1"), Some("SET"), 2),
                trigger(3, "command_sent", Some("c1"), Some("set"), 1),
                trigger(4, "acquired", None, None, 1),
                trigger(5, "command_sent", Some("c2"), None, 1),
                trigger(6, "command_sent", None, None, 3),
            ],
            Budget::DEFAULT,
        );
        assert_eq!(sent(&history, "c1", "SET k v"), vec![1, 3]);
        assert_eq!(sent(&history, "c2", "GET k"), vec![5]);
        assert_eq!(sent(&history, "c1", "set k v"), vec![0, 2, 6]);
        assert_eq!(sent(&history, "c1", "SET k v"), Vec::<usize>::new());
    }
}
