//! Checkers: one per property, each a pure function of the history (Jepsen's checker role).
//! `check_all` composes them into the verdicts, counts and violations of a `RunResult`.

pub mod extension;
pub mod fairness;
pub mod latency;
pub mod liveness;
pub mod mutual_exclusion;
pub mod resource;

use std::collections::BTreeMap;

use crate::history::{Event, EventKind, FaultPhase};
use crate::result::{Counts, Latencies, Liveness, Safety, Verdicts, Violation};

/// What the checkers need besides the events.
#[derive(Clone, Debug)]
pub struct CheckContext {
    /// The lock owners, in order: client node names, or one `client-1/t2` per worker thread of
    /// a client running several (`clients.threads`).
    pub clients: Vec<String>,
    /// True simulated time at which the run ended.
    pub end_us: u64,
    /// How long the lock may go ungranted while live clients want it, once every fault has
    /// healed, before the run is `stuck`.
    pub liveness_window_ms: u64,
    /// The independent masters (`redis-1..N`): a lock is held while its owner's token is on a
    /// majority of them (the extension checker).
    pub masters: Vec<String>,
}

/// Everything the checkers concluded about one run.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckReport {
    pub verdicts: Verdicts,
    pub counts: Counts,
    pub latency_ms: Latencies,
    pub throughput_per_s: f64,
    /// The longest any owner waited for the lock (starvation, see `liveness`).
    pub max_wait_ms: f64,
    /// Each owner's longest wait.
    pub max_wait_ms_by_client: BTreeMap<String, f64>,
    /// The first violations of every kind, earliest first.
    pub violations: Vec<Violation>,
}

/// How many violations of each kind a result lists (the full list is in the trace).
pub const MAX_VIOLATIONS_PER_KIND: usize = 10;

pub fn check_all(events: &[Event], ctx: &CheckContext) -> CheckReport {
    let exclusion = mutual_exclusion::check(events, ctx.end_us);
    let resource = resource::check(events);
    let liveness = liveness::check(events, ctx);
    let latency_ms = latency::check(events);
    let stolen_extensions = extension::check(events, &ctx.masters);
    let max_wait_ms_by_client: BTreeMap<String, f64> = liveness
        .max_wait_us
        .iter()
        .map(|(owner, us)| (owner.clone(), round3(ms(*us))))
        .collect();
    let max_wait_ms = max_wait_ms_by_client.values().copied().fold(0.0, f64::max);

    let counts = Counts {
        acquisitions: count(events, |k| matches!(k, EventKind::Acquired { .. })),
        acquire_failures: count(events, |k| matches!(k, EventKind::AcquireFailed { .. })),
        lock_overlaps: exclusion.len() as u64,
        resource_conflicts: resource.conflicts.len() as u64,
        stale_writes_rejected: resource.rejected,
        foreign_releases: mutual_exclusion::foreign_releases(events).len() as u64,
        faults_injected: count(events, |k| {
            matches!(
                k,
                EventKind::Fault {
                    phase: FaultPhase::Injected,
                    ..
                }
            )
        }),
        stolen_extensions: stolen_extensions.len() as u64,
    };
    let verdicts = Verdicts {
        mutual_exclusion: Safety::from_violated(!exclusion.is_empty()),
        resource_safety: Safety::from_violated(!resource.conflicts.is_empty()),
        liveness: if liveness.violations.is_empty() {
            Liveness::Ok
        } else {
            Liveness::Stuck
        },
    };
    let mut violations = Vec::new();
    for list in [
        exclusion,
        mutual_exclusion::foreign_releases(events),
        resource.conflicts,
        liveness.violations,
        stolen_extensions,
    ] {
        violations.extend(list.into_iter().take(MAX_VIOLATIONS_PER_KIND));
    }
    violations.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
    let sim_s = ctx.end_us as f64 / 1e6;
    let throughput_per_s = if sim_s > 0.0 {
        round3(counts.acquisitions as f64 / sim_s)
    } else {
        0.0
    };
    CheckReport {
        verdicts,
        counts,
        latency_ms,
        throughput_per_s,
        max_wait_ms,
        max_wait_ms_by_client,
        violations,
    }
}

fn count(events: &[Event], pred: impl Fn(&EventKind) -> bool) -> u64 {
    events.iter().filter(|e| pred(&e.kind)).count() as u64
}

pub(crate) fn ms(t_us: u64) -> f64 {
    t_us as f64 / 1000.0
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
