//! Placeholders a fault may give instead of node names, so that one fault works for every
//! scheme row of a scenario (whose node sets differ: Redlock rows have more masters).
//!
//! Resolved when the fault fires, from the world's own state (`crate::faults::targets`):
//! - `{holder}`: the client whose event fired the fault's trigger;
//! - `{peer}`: the first client, in name order, that is not the holder;
//! - `{holder_master}`: the last master (`redis-N`, in name order) whose lock key holds the
//!   holder's write (for Redlock's bare majority `redis-1..3`, that is `redis-3`, the master
//!   the other majority shares); `redis-1` when none does;
//! - in partition groups, `{holder_masters}`: every such master (or `{holder_master}`), and
//!   `{rest}`: every Redis, Sentinel and client node the other groups do not name.
//!
//! Expanded per scheme row when the scenario loads (`RowNodes::expand`), in partition groups:
//! `{masters}` (every master), `{first_majority}` (`redis-1..Q`, Q = N/2+1) and
//! `{last_majority}` (`redis-(N-Q+1)..N`): two bare majorities sharing one master, as in
//! Kleppmann's and redis.io's Redlock examples; with one master, both are `redis-1`.

use std::collections::BTreeSet;

pub const HOLDER: &str = "{holder}";
pub const PEER: &str = "{peer}";
pub const HOLDER_MASTER: &str = "{holder_master}";
pub const HOLDER_MASTERS: &str = "{holder_masters}";
pub const REST: &str = "{rest}";
pub const MASTERS: &str = "{masters}";
pub const FIRST_MAJORITY: &str = "{first_majority}";
pub const LAST_MAJORITY: &str = "{last_majority}";

/// Placeholders that stand for one node.
pub const SINGLE: &[&str] = &[HOLDER, PEER, HOLDER_MASTER];
/// Placeholders a partition group may also hold.
pub const GROUP: &[&str] = &[HOLDER_MASTERS, REST, MASTERS, FIRST_MAJORITY, LAST_MAJORITY];

/// Whether resolving `name` needs the client that fired the trigger.
pub fn needs_holder(name: &str) -> bool {
    [HOLDER, PEER, HOLDER_MASTER, HOLDER_MASTERS].contains(&name)
}

pub fn is_placeholder(name: &str) -> bool {
    name.starts_with('{')
}

/// What a fault is validated against: one scheme row's nodes.
pub struct RowNodes {
    pub nodes: BTreeSet<String>,
    /// The row's masters, `redis-1..N`.
    pub masters: Vec<String>,
}

impl RowNodes {
    /// The nodes a placeholder expanded when the scenario loads stands for in this row, or
    /// `None` for any other name.
    pub fn expand(&self, name: &str) -> Option<Vec<String>> {
        match name {
            MASTERS => Some(self.masters.clone()),
            FIRST_MAJORITY => Some(self.majority(true)),
            LAST_MAJORITY => Some(self.majority(false)),
            _ => None,
        }
    }

    /// The bare majority `redis-1..Q` or `redis-(N-Q+1)..N`.
    fn majority(&self, first: bool) -> Vec<String> {
        let n = self.masters.len();
        let q = n / 2 + 1;
        if first {
            self.masters[..q].to_vec()
        } else {
            self.masters[n - q..].to_vec()
        }
    }
}
