//! The result of one run (DESIGN.md "Result (contract)"): what `locksim run --json` prints and
//! what sweeps, checks and reports consume.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub scenario: String,
    pub scheme: String,
    pub seed: u64,
    /// SHA-1 of the canonical trace: same scenario + seed ⇒ same hash.
    pub trace_hash: String,
    /// Simulated time the run covered.
    pub sim_ms: u64,
    /// Real time the run took (the only non-deterministic field).
    pub wall_ms: u64,
    pub verdicts: Verdicts,
    pub counts: Counts,
    pub latency_ms: Latencies,
    pub throughput_per_s: f64,
    /// The longest any lock owner waited for the lock, from its first attempt to the grant (or
    /// to the end of its wish): starvation, which `liveness` does not judge.
    #[serde(default)]
    pub max_wait_ms: f64,
    /// Each owner's longest wait (owners that never asked for the lock are absent).
    #[serde(default)]
    pub max_wait_ms_by_client: BTreeMap<String, f64>,
    pub violations: Vec<Violation>,
}

impl RunResult {
    /// Did some waiter get overtaken? Only runs of scenarios that judge fairness look
    /// (`model::check::fairness`).
    pub fn lost_fifo_order(&self) -> bool {
        self.violations
            .iter()
            .any(|v| v.kind == crate::check::fairness::FIFO_ORDER)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdicts {
    pub mutual_exclusion: Safety,
    pub resource_safety: Safety,
    pub liveness: Liveness,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Safety {
    Holds,
    Violated,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    Ok,
    Stuck,
}

impl Safety {
    pub fn from_violated(violated: bool) -> Safety {
        if violated {
            Safety::Violated
        } else {
            Safety::Holds
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Safety::Holds => "holds",
            Safety::Violated => "violated",
        }
    }
}

impl Liveness {
    pub fn as_str(self) -> &'static str {
        match self {
            Liveness::Ok => "ok",
            Liveness::Stuck => "stuck",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub acquisitions: u64,
    pub acquire_failures: u64,
    pub lock_overlaps: u64,
    pub resource_conflicts: u64,
    pub stale_writes_rejected: u64,
    pub foreign_releases: u64,
    pub faults_injected: u64,
    /// Extensions the library reported as successful although the client no longer held the
    /// lock (`model::check::extension`): only runs with `clients.extend` make any.
    #[serde(default)]
    pub stolen_extensions: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latencies {
    pub acquire: Quantiles,
    pub release: Quantiles,
}

/// One property violation, with enough to find it in the trace: the time, the nodes involved
/// and a sentence a person can read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    pub kind: String,
    pub t_ms: f64,
    pub nodes: Vec<String>,
    pub detail: String,
}
