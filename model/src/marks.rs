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
    /// An acquisition was granted (the client believes it holds the lock).
    AcquireGranted,
    /// A lease extension (renewal) succeeded.
    ExtendGranted,
    /// The lock's key on a master ran out while a client's token was in it (a lease ended by time, not by a release).
    LockKeyExpired,
    /// The lock's key on a master went from one client's token to another's between two commands, never seen empty.
    LockOwnerReplaced,
    /// A replica became a master without the lock's key in its dataset.
    PromotedWithoutLockKey,
    /// A master refused a write with NOREPLICAS (`min-replicas-to-write`).
    MinReplicasRefused,
    /// A replica refused a write with READONLY (a client still writing to a demoted master).
    ReadOnlyRefused,
    /// EVALSHA answered NOSCRIPT (a restarted, flushed or promoted server without the script).
    NoScript,
    /// A replica loaded a master's whole dataset (FULLRESYNC).
    ReplicaFullResync,
    /// A replica continued from its offset (+CONTINUE).
    ReplicaPartialResync,
    /// A machine lost power with AOF bytes not yet fsynced.
    AofTailLost,
    /// A Sentinel judged an instance subjectively down (+sdown).
    SentinelSdown,
    /// A Sentinel judged a master objectively down (+odown).
    SentinelOdown,
    /// A Sentinel entered TILT (its timer jumped: a clock jump or a pause).
    SentinelTilt,
    /// A Sentinel was elected to lead a failover.
    SentinelLeaderElected,
    /// A Sentinel announced a new master (+switch-master).
    SentinelSwitchMaster,
    /// A Sentinel reconfigured a returning old master as a replica (+convert-to-slave): its writes since the failover are dropped.
    OldMasterDemoted,
    /// A client's connection to a server closed under it (EOF or reset).
    ConnectionLost,
    /// Redlock granted with less than a tenth of its TTL left as validity.
    RedlockGrantLowValidity,
    /// `WAIT` returned at its timeout acknowledged by some replicas but fewer than it asked
    /// for: a write a failover to one of the others loses (Redisson #5256's first step).
    WaitPartiallyAcked,
    /// A replica became a master whose lock key is not the holder's — gone, or a previous
    /// holder's whose release never reached it — while a client believed it held the lock:
    /// the promotion hands that lock to the next acquirer (or back to the previous holder,
    /// whose re-entrant lock script finds its own key).
    PromotedWhileHeld,
    /// A client re-sent a command whose reply had timed out: its first attempt may have run
    /// (Redisson 3.12 re-sends the lock script at once, `RedisExecutor.java:312-331`).
    TimedOutCommandResent,
    /// A server's wall clock jumped forward while a client believed it held the lock whose key
    /// that server keeps: the lease ends early by the jump, as Redis expires keys by its wall
    /// clock (`keyIsExpired`, redis 7.0.15 `src/db.c` 1616-1650: `mstime()`).
    ClockJumpWhileHeld,
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
        Mark::AcquireGranted,
        Mark::ExtendGranted,
        Mark::LockKeyExpired,
        Mark::LockOwnerReplaced,
        Mark::PromotedWithoutLockKey,
        Mark::MinReplicasRefused,
        Mark::ReadOnlyRefused,
        Mark::NoScript,
        Mark::ReplicaFullResync,
        Mark::ReplicaPartialResync,
        Mark::AofTailLost,
        Mark::SentinelSdown,
        Mark::SentinelOdown,
        Mark::SentinelTilt,
        Mark::SentinelLeaderElected,
        Mark::SentinelSwitchMaster,
        Mark::OldMasterDemoted,
        Mark::ConnectionLost,
        Mark::RedlockGrantLowValidity,
        Mark::WaitPartiallyAcked,
        Mark::PromotedWhileHeld,
        Mark::TimedOutCommandResent,
        Mark::ClockJumpWhileHeld,
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
            Mark::AcquireGranted => "acquire_granted",
            Mark::ExtendGranted => "extend_granted",
            Mark::LockKeyExpired => "lock_key_expired",
            Mark::LockOwnerReplaced => "lock_owner_replaced",
            Mark::PromotedWithoutLockKey => "promoted_without_lock_key",
            Mark::MinReplicasRefused => "min_replicas_refused",
            Mark::ReadOnlyRefused => "read_only_refused",
            Mark::NoScript => "no_script",
            Mark::ReplicaFullResync => "replica_full_resync",
            Mark::ReplicaPartialResync => "replica_partial_resync",
            Mark::AofTailLost => "aof_tail_lost",
            Mark::SentinelSdown => "sentinel_sdown",
            Mark::SentinelOdown => "sentinel_odown",
            Mark::SentinelTilt => "sentinel_tilt",
            Mark::SentinelLeaderElected => "sentinel_leader_elected",
            Mark::SentinelSwitchMaster => "sentinel_switch_master",
            Mark::OldMasterDemoted => "old_master_demoted",
            Mark::ConnectionLost => "connection_lost",
            Mark::RedlockGrantLowValidity => "redlock_grant_low_validity",
            Mark::WaitPartiallyAcked => "wait_partially_acked",
            Mark::PromotedWhileHeld => "promoted_while_held",
            Mark::TimedOutCommandResent => "timed_out_command_resent",
            Mark::ClockJumpWhileHeld => "clock_jump_while_held",
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

/// Whether marks are on for this thread: a mark whose state costs more than a read to
/// establish (a scan of the history) checks this first, so that it stays free when off.
pub fn on() -> bool {
    SINK.with(|sink| sink.try_borrow().is_ok_and(|sink| sink.is_some()))
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
        assert!(!on());
        let now = std::rc::Rc::new(std::cell::Cell::new(5u64));
        let clock = now.clone();
        start(Box::new(move || clock.get()));
        assert!(on());
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
        assert!(!on());
    }

    #[test]
    fn every_mark_is_listed_once_with_a_distinct_name() {
        let names: std::collections::BTreeSet<_> = Mark::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names.len(), Mark::ALL.len());
    }
}
