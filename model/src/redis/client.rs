//! What the server keeps per connection (`server.h` `struct client`): protocol, selected
//! database, name, authentication, the MULTI queue, watched keys, a blocking pop in progress and
//! the fields `CLIENT LIST` prints.

use super::reply::Protocol;

pub type ClientId = u64;

/// `c->mstate`: the commands queued since MULTI.
#[derive(Clone, Debug, Default)]
pub struct MultiState {
    pub commands: Vec<Vec<Vec<u8>>>,
    /// `CLIENT_DIRTY_EXEC`: a command was rejected while queueing; EXEC answers EXECABORT.
    pub dirty_exec: bool,
    /// The union of the queued commands' flags (`mstate.cmd_flags`): is EXEC a write.
    pub flags: u32,
}

/// One WATCHed key (`multi.c` `watchedKey`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchedKey {
    pub db: usize,
    pub key: Vec<u8>,
    /// The key was already logically expired when WATCHed (Redis 7.0: its deletion is not a
    /// change).
    pub expired: bool,
}

/// A client blocked in BLPOP/BRPOP/BLMOVE/BRPOPLPUSH (`c->bpop`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub db: usize,
    pub keys: Vec<Vec<u8>>,
    /// Pop from the head (BLPOP, BLMOVE LEFT) or the tail (BRPOP, BLMOVE RIGHT).
    pub head: bool,
    /// Absolute wall-clock ms when it times out; `None` waits for ever.
    pub deadline_ms: Option<i64>,
    /// BLMOVE / BRPOPLPUSH: where the popped element goes.
    pub target: Option<MoveTarget>,
}

/// The push side of a blocked BLMOVE / BRPOPLPUSH (`c->bpop.target`, `blockpos.whereto`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveTarget {
    pub key: Vec<u8>,
    /// Push at the head (LEFT) or the tail (RIGHT).
    pub head: bool,
    /// Blocked in BRPOPLPUSH: served, it propagates as RPOPLPUSH rather than LMOVE.
    pub rpoplpush: bool,
}

/// The connection's addresses as `CLIENT LIST` prints them (`ip:port`), set by the host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientAddr {
    pub peer: String,
    pub local: String,
    /// Connected on the Unix socket at this path (`CLIENT_UNIX_SOCKET`): MONITOR shows
    /// `unix:<path>` instead of the peer.
    pub unix_socket: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct ClientState {
    /// Channels in subscription order.
    pub channels: Vec<Vec<u8>>,
    /// Patterns in subscription order (`c->pubsub_patterns`, a list).
    pub patterns: Vec<Vec<u8>>,
    pub protocol: Protocol,
    /// The selected database (SELECT).
    pub db: usize,
    /// CLIENT SETNAME / HELLO SETNAME; empty = no name.
    pub name: Vec<u8>,
    /// AUTH passed (or no password is required).
    pub authenticated: bool,
    /// `Some` between MULTI and EXEC/DISCARD.
    pub multi: Option<MultiState>,
    pub watched: Vec<WatchedKey>,
    /// `CLIENT_DIRTY_CAS`: a watched key changed; the next EXEC fails.
    pub dirty_cas: bool,
    pub blocked: Option<Blocked>,
    /// CLIENT NO-EVICT ON.
    pub no_evict: bool,
    pub addr: ClientAddr,
    pub created_ms: i64,
    pub last_interaction_ms: i64,
    /// `cmd=` of CLIENT LIST: the last command's full name.
    pub last_command: &'static str,
    /// MONITOR was called (`CLIENT_MONITOR|CLIENT_SLAVE`): it receives every command as a line,
    /// is never paused, and may not touch the keyspace.
    pub monitor: bool,
    /// A command CLIENT PAUSE holds back (`BLOCKED_POSTPONE`): it runs once the pause ends.
    pub postponed: Option<Vec<Vec<u8>>>,
}

impl ClientState {
    pub fn subscribed(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty()
    }
}
