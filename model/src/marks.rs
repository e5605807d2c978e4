//! Marks: named points in the code where an interesting state occurs (a promoted replica, a WAIT
//! short of its replicas, a Redlock quorum whose validity ran out), for `locksim hunt` to steer
//! by — TigerBeetle's `marks` (tigerbeetle/tigerbeetle `src/testing/marks.zig`), Mallory's
//! "observations" (Meng et al., CCS 2023). Each mark is one line at its site: `mark(Mark::X)`.
//!
//! A mark is an observation, not an event of the trace: it draws no randomness, sends nothing,
//! records nothing in the history, so every trace hash stays what it was. Off (no [`Sink`] on
//! the thread, as in every run but hunt's) it costs one thread-local read. A run is on a thread
//! of its own (`sim::runner`), so the sink is the run's.

use std::cell::RefCell;

/// The marks, in the order `locksim hunt` lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mark {
    /// A key's TTL ran out and the master deleted it (lazily or in the active cycle).
    KeyExpired,
    /// A replica became a master (`REPLICAOF NO ONE`).
    ReplicaPromoted,
    /// `WAIT` returned at its timeout with fewer acknowledgements than it asked for.
    WaitShort,
    /// `WAIT` returned with every acknowledgement it asked for.
    WaitMet,
    /// Sentinel chose a replica to promote.
    SentinelReplicaSelected,
    /// Sentinel aborted a failover.
    SentinelFailoverAborted,
    /// A command's reply did not arrive within the client's timeout.
    CommandTimedOut,
    /// Redlock reached a quorum whose validity (ttl − elapsed − drift) was not positive.
    RedlockValidityExpired,
    /// Redlock failed to reach a quorum of masters on a try.
    RedlockNoQuorum,
    /// An acquisition gave up (timeout or refusal).
    AcquireFailed,
    /// A lease extension (renewal) failed.
    ExtendFailed,
    /// A release reported failure (the key was gone or held by another token).
    ReleaseFailed,
    /// The resource refused a fencing token older than one it had seen.
    ResourceStaleFenceRejected,
    /// The resource took a write based on a version another write had replaced.
    ResourceLostUpdate,
    /// A client's call to the resource failed or timed out.
    ResourceCallFailed,
}

impl Mark {
    pub const ALL: &'static [Mark] = &[
        Mark::KeyExpired,
        Mark::ReplicaPromoted,
        Mark::WaitShort,
        Mark::WaitMet,
        Mark::SentinelReplicaSelected,
        Mark::SentinelFailoverAborted,
        Mark::CommandTimedOut,
        Mark::RedlockValidityExpired,
        Mark::RedlockNoQuorum,
        Mark::AcquireFailed,
        Mark::ExtendFailed,
        Mark::ReleaseFailed,
        Mark::ResourceStaleFenceRejected,
        Mark::ResourceLostUpdate,
        Mark::ResourceCallFailed,
    ];

    /// The mark's name in hunt's output and corpus files.
    pub fn name(self) -> &'static str {
        match self {
            Mark::KeyExpired => "key_expired",
            Mark::ReplicaPromoted => "replica_promoted",
            Mark::WaitShort => "wait_short",
            Mark::WaitMet => "wait_met",
            Mark::SentinelReplicaSelected => "sentinel_replica_selected",
            Mark::SentinelFailoverAborted => "sentinel_failover_aborted",
            Mark::CommandTimedOut => "command_timed_out",
            Mark::RedlockValidityExpired => "redlock_validity_expired",
            Mark::RedlockNoQuorum => "redlock_no_quorum",
            Mark::AcquireFailed => "acquire_failed",
            Mark::ExtendFailed => "extend_failed",
            Mark::ReleaseFailed => "release_failed",
            Mark::ResourceStaleFenceRejected => "resource_stale_fence_rejected",
            Mark::ResourceLostUpdate => "resource_lost_update",
            Mark::ResourceCallFailed => "resource_call_failed",
        }
    }
}

/// One time a mark fired, at the run's simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    pub mark: Mark,
    pub t_us: u64,
}

/// Hits a sink keeps; past it a run's later hits are dropped (a run marks a few thousand times).
pub const MAX_HITS: usize = 1 << 20;

/// Where a run's hits go while marks are on.
struct Sink {
    /// The run's simulated time in µs (the sim's clock; `model` has none of its own).
    clock: Box<dyn Fn() -> u64>,
    hits: Vec<Hit>,
}

thread_local! {
    static SINK: RefCell<Option<Sink>> = const { RefCell::new(None) };
}

/// Records that `mark` fired, when marks are on for this thread.
#[inline]
pub fn mark(mark: Mark) {
    SINK.with(|sink| {
        if let Ok(mut sink) = sink.try_borrow_mut()
            && let Some(sink) = sink.as_mut()
            && sink.hits.len() < MAX_HITS
        {
            let t_us = (sink.clock)();
            sink.hits.push(Hit { mark, t_us });
        }
    });
}

/// Turns marks on for this thread, stamping hits with `clock`; hits of an earlier sink are
/// dropped.
pub fn start(clock: Box<dyn Fn() -> u64>) {
    SINK.with(|sink| {
        *sink.borrow_mut() = Some(Sink {
            clock,
            hits: Vec::new(),
        })
    });
}

/// Turns marks off for this thread and returns the hits since [`start`], in order.
pub fn stop() -> Vec<Hit> {
    SINK.with(|sink| sink.borrow_mut().take())
        .map(|sink| sink.hits)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_kept_only_between_start_and_stop() {
        mark(Mark::KeyExpired);
        assert!(stop().is_empty());
        let now = std::rc::Rc::new(std::cell::Cell::new(5u64));
        let clock = now.clone();
        start(Box::new(move || clock.get()));
        mark(Mark::WaitShort);
        now.set(9);
        mark(Mark::ReplicaPromoted);
        let hits = stop();
        assert_eq!(
            hits,
            vec![
                Hit {
                    mark: Mark::WaitShort,
                    t_us: 5
                },
                Hit {
                    mark: Mark::ReplicaPromoted,
                    t_us: 9
                }
            ]
        );
        mark(Mark::KeyExpired);
        assert!(stop().is_empty());
    }

    #[test]
    fn every_mark_is_listed_once_with_a_distinct_name() {
        let names: std::collections::BTreeSet<_> = Mark::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names.len(), Mark::ALL.len());
    }
}
