//! Aggregates many runs: per scenario × scheme cell (seeds run, seeds violating, the first failing
//! seed, verdict counts, acquire latency across seeds, throughput) and per scheme over a whole
//! report. `summary.json` is [`Summary`] serialised; `sweep`, `compare`, the HTML and the Markdown
//! renderers all read these numbers, so they agree.
//!
//! Latency across seeds: every run reports its own acquire p50/p90/p99/max; a cell's p50 is the
//! median of its runs' p50, its p99 the median of its runs' p99 (the tail of a typical seed), and
//! its max the largest of all. Runs without a single acquisition have no latency and are left out
//! of the latency figures (they still count as runs).

use model::result::{Liveness, RunResult, Safety};
use serde::{Deserialize, Serialize};

/// How many seeds gave each verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SafetyCounts {
    pub holds: u64,
    pub violated: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LivenessCounts {
    pub ok: u64,
    pub stuck: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictCounts {
    pub mutual_exclusion: SafetyCounts,
    pub resource_safety: SafetyCounts,
    pub liveness: LivenessCounts,
    /// Runs with a `fifo_order` violation (only scenarios that judge fairness look for them).
    #[serde(default)]
    pub fifo_violated: u64,
    /// Runs on which two clients held the lock at once or an update was lost (either verdict
    /// violated): what "two holders or a lost update" counts.
    #[serde(default)]
    pub unsafe_runs: u64,
}

impl VerdictCounts {
    /// Counts one run's verdicts.
    pub fn add(&mut self, r: &RunResult) {
        let v = &r.verdicts;
        match v.mutual_exclusion {
            Safety::Holds => self.mutual_exclusion.holds += 1,
            Safety::Violated => self.mutual_exclusion.violated += 1,
        }
        match v.resource_safety {
            Safety::Holds => self.resource_safety.holds += 1,
            Safety::Violated => self.resource_safety.violated += 1,
        }
        match v.liveness {
            Liveness::Ok => self.liveness.ok += 1,
            Liveness::Stuck => self.liveness.stuck += 1,
        }
        if r.lost_fifo_order() {
            self.fifo_violated += 1;
        }
        if v.mutual_exclusion == Safety::Violated || v.resource_safety == Safety::Violated {
            self.unsafe_runs += 1;
        }
    }
}

/// Acquire latency across seeds, in simulated ms (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// Runs that had at least one acquisition (the ones these figures come from).
    pub runs: u64,
}

/// The worst thing that happened in a cell, for its colour. Ordered from best to worst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// No run finished (interrupted, or every run errored).
    NoRuns,
    /// Every seed: mutual exclusion holds, the resource is safe, liveness ok.
    Ok,
    /// Some seed served a waiter before an earlier one (`fifo_order`), but nothing unsafe
    /// happened: the fair lock's promise broke (only scenarios that judge fairness look).
    Unfair,
    /// Some seed got stuck (liveness), but nothing unsafe happened.
    Stuck,
    /// Two clients held the lock at once, but the resource stayed consistent (e.g. fencing).
    Overlap,
    /// The resource lost an update on some seed.
    Corrupted,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::NoRuns => "no_runs",
            Outcome::Ok => "ok",
            Outcome::Unfair => "unfair",
            Outcome::Stuck => "stuck",
            Outcome::Overlap => "overlap",
            Outcome::Corrupted => "corrupted",
        }
    }

    /// A sentence for legends.
    pub fn legend(self) -> &'static str {
        match self {
            Outcome::NoRuns => "no finished runs",
            Outcome::Ok => "every seed safe and live",
            Outcome::Unfair => "FIFO order lost on some seed (nothing unsafe)",
            Outcome::Stuck => "liveness stuck on some seed (nothing unsafe)",
            Outcome::Overlap => "lock held twice at once, but no update lost (e.g. fencing)",
            Outcome::Corrupted => "resource corrupted: a lost update on some seed",
        }
    }

    pub const ALL: [Outcome; 6] = [
        Outcome::Ok,
        Outcome::Unfair,
        Outcome::Stuck,
        Outcome::Overlap,
        Outcome::Corrupted,
        Outcome::NoRuns,
    ];
}

/// Did this run break anything it was judged on (FIFO order only where the scenario asks)?
pub fn is_violating(r: &RunResult) -> bool {
    r.verdicts.mutual_exclusion == Safety::Violated
        || r.verdicts.resource_safety == Safety::Violated
        || r.verdicts.liveness == Liveness::Stuck
        || r.lost_fifo_order()
        || r.counts.stolen_extensions > 0
}

pub(crate) fn outcome_of(r: &RunResult) -> Outcome {
    if r.verdicts.resource_safety == Safety::Violated {
        Outcome::Corrupted
    } else if r.verdicts.mutual_exclusion == Safety::Violated {
        Outcome::Overlap
    } else if r.verdicts.liveness == Liveness::Stuck {
        Outcome::Stuck
    } else if r.lost_fifo_order() {
        Outcome::Unfair
    } else if r.counts.stolen_extensions > 0 {
        // An extension of a lock the client no longer held: it believed it held it.
        Outcome::Overlap
    } else {
        Outcome::Ok
    }
}

/// The numbers of one scenario × scheme cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellStats {
    pub scenario: String,
    pub scheme: String,
    pub seeds_run: u64,
    pub seeds_violating: u64,
    /// The lowest seed that broke something (the one to replay).
    pub first_failing_seed: Option<u64>,
    /// Every violating seed, ascending (a streamed cell, `accumulate`, keeps the lowest
    /// `KEPT_SEEDS`; `seeds_violating` counts them all).
    pub violating_seeds: Vec<u64>,
    pub outcome: Outcome,
    pub verdicts: VerdictCounts,
    pub acquire_ms: LatencySummary,
    /// Mean over runs of successful acquisitions per simulated second.
    pub throughput_per_s: f64,
    pub acquisitions: u64,
    pub acquire_failures: u64,
    /// Starvation: the longest wait of any owner, per seed; `max` over the seeds and the median
    /// seed's (see `model::check::liveness`).
    #[serde(default)]
    pub max_wait_ms: WaitSummary,
    /// 95% Wilson score interval of the share of seeds violating (what a random-rate column
    /// reports: the rate the seeds estimate, and how sure that estimate is).
    #[serde(default)]
    pub violating_ci95: [f64; 2],
}

/// The 95% Wilson score interval of a proportion `k` of `n` (Wilson 1927): unlike the normal
/// approximation it stays within [0, 1] and is not zero-width at 0 or n.
pub fn wilson_ci95(k: u64, n: u64) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let z = 1.959_963_984_540_054_f64;
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z * ((p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt()) / (1.0 + z2 / n);
    [
        round3((centre - half).max(0.0)),
        round3((centre + half).min(1.0)),
    ]
}

/// The longest wait for the lock across seeds: each seed's `max_wait_ms`, summarised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitSummary {
    pub median: f64,
    pub max: f64,
}

impl WaitSummary {
    pub fn from_results<'a>(results: impl IntoIterator<Item = &'a RunResult>) -> WaitSummary {
        let mut waits: Vec<f64> = results.into_iter().map(|r| r.max_wait_ms).collect();
        WaitSummary {
            max: waits.iter().copied().fold(0.0, f64::max),
            median: median(&mut waits),
        }
    }
}

pub(crate) fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        round3((values[n / 2 - 1] + values[n / 2]) / 2.0)
    }
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Latency across the runs that acquired at least once.
pub fn latency_summary<'a>(results: impl IntoIterator<Item = &'a RunResult>) -> LatencySummary {
    let with_samples: Vec<&RunResult> = results
        .into_iter()
        .filter(|r| r.counts.acquisitions > 0)
        .collect();
    let pick = |f: fn(&RunResult) -> f64| {
        let mut v: Vec<f64> = with_samples.iter().map(|r| f(r)).collect();
        median(&mut v)
    };
    LatencySummary {
        p50: pick(|r| r.latency_ms.acquire.p50),
        p90: pick(|r| r.latency_ms.acquire.p90),
        p99: pick(|r| r.latency_ms.acquire.p99),
        max: with_samples
            .iter()
            .map(|r| r.latency_ms.acquire.max)
            .fold(0.0, f64::max),
        runs: with_samples.len() as u64,
    }
}

impl CellStats {
    /// Aggregates the runs of one cell (any order; all of the same scenario and scheme).
    pub fn from_results(scenario: &str, scheme: &str, results: &[RunResult]) -> CellStats {
        let mut verdicts = VerdictCounts::default();
        let mut violating_seeds = Vec::new();
        let mut outcome = if results.is_empty() {
            Outcome::NoRuns
        } else {
            Outcome::Ok
        };
        for r in results {
            verdicts.add(r);
            if is_violating(r) {
                violating_seeds.push(r.seed);
            }
            outcome = outcome.max(outcome_of(r));
        }
        violating_seeds.sort_unstable();
        violating_seeds.dedup();
        let violating = violating_seeds.len() as u64;
        let runs = results.len() as f64;
        CellStats {
            scenario: scenario.to_string(),
            scheme: scheme.to_string(),
            seeds_run: results.len() as u64,
            seeds_violating: violating_seeds.len() as u64,
            first_failing_seed: violating_seeds.first().copied(),
            violating_seeds,
            outcome,
            verdicts,
            acquire_ms: latency_summary(results),
            throughput_per_s: if results.is_empty() {
                0.0
            } else {
                round3(results.iter().map(|r| r.throughput_per_s).sum::<f64>() / runs)
            },
            acquisitions: results.iter().map(|r| r.counts.acquisitions).sum(),
            acquire_failures: results.iter().map(|r| r.counts.acquire_failures).sum(),
            max_wait_ms: WaitSummary::from_results(results),
            violating_ci95: wilson_ci95(violating, results.len() as u64),
        }
    }

    /// The share of seeds that broke something, 0..=1.
    pub fn violating_share(&self) -> f64 {
        if self.seeds_run == 0 {
            0.0
        } else {
            self.seeds_violating as f64 / self.seeds_run as f64
        }
    }
}

/// One scenario of a report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScenarioInfo {
    pub name: String,
    pub file: String,
    pub description: String,
    pub source: String,
    /// The seeds this report ran, `A..B` (both ends included).
    pub seeds: String,
    /// How many lock owners contend (clients × threads): 1 is the uncontended cost.
    #[serde(default)]
    pub clients: u64,
    /// The reported failure it reproduces (`scenarios/incidents/`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub incident: Option<Incident>,
    /// Its column in the fault matrix, for a `"schemes": "all"` scenario.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub matrix: Option<MatrixColumn>,
}

/// `incident` in a scenario file, and in `summary.json`'s scenarios.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Incident {
    /// The case both files share (`redsync-extend-stolen-lock`).
    pub case: String,
    /// The library (or server) as its repository names it (`go-redsync/redsync`).
    pub library: String,
    /// The version this file runs (`v4.0.3`).
    pub version: String,
    /// `failing` or `fixed`.
    #[schemars(extend("enum" = ["failing", "fixed"]))]
    pub role: String,
    /// The issue or pull request that reported or fixed it.
    pub link: String,
    /// What goes wrong, in one sentence.
    pub mechanism: String,
}

impl Incident {
    pub fn validate(&self) -> Result<(), String> {
        for (field, value) in [
            ("case", &self.case),
            ("library", &self.library),
            ("version", &self.version),
            ("link", &self.link),
            ("mechanism", &self.mechanism),
        ] {
            if value.trim().is_empty() {
                return Err(format!("incident.{field}: must not be empty"));
            }
        }
        if !["failing", "fixed"].contains(&self.role.as_str()) {
            return Err(format!(
                "incident.role: \"{}\" is not one of failing, fixed",
                self.role
            ));
        }
        if !self.link.starts_with("https://") {
            return Err(format!(
                "incident.link: \"{}\" is not an https:// link to the issue or pull request",
                self.link
            ));
        }
        Ok(())
    }

    pub fn failing(&self) -> bool {
        self.role == "failing"
    }
}

/// A column of the fault matrix (one `"schemes": "all"` scenario).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixColumn {
    /// The short header.
    pub column: String,
    /// The fault family the column is grouped under.
    pub family: String,
    /// A random nemesis drives it: its cells are rates over the seeds, not worst cases.
    pub random: bool,
}

/// A row of the fault matrix: a scheme (or preset) with its group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixRow {
    pub scheme: String,
    /// The group heading (`model::locks::Family::title`).
    pub family: String,
    /// False for a scheme without a lease (the key stays until deleted).
    pub lease: bool,
}

/// One cell of the matrix as the report shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    #[serde(flatten)]
    pub stats: CellStats,
    /// The scenario's expectations that these runs did not meet (`expect`, and `expect_some`
    /// when the whole of the scenario's own seed range ran), one sentence each.
    pub mismatches: Vec<String>,
    /// The first failing seed's picture, relative to the report folder.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub timeline: Option<String>,
    /// The command that reproduces the first failing seed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub replay: Option<String>,
    /// For incident scenarios: the seeds on which a property the scenario's `expect` names is
    /// broken (the incidents section's verdict).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expect_broken_seeds: Option<Vec<u64>>,
}

/// Per scheme over the whole report (all its cells pooled): what the charts plot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SchemeStats {
    pub scheme: String,
    pub scenarios: u64,
    pub runs: u64,
    pub seeds_violating: u64,
    pub acquire_ms: LatencySummary,
    pub throughput_per_s: f64,
    #[serde(default)]
    pub max_wait_ms: WaitSummary,
}

impl SchemeStats {
    pub fn from_results<'a>(
        scheme: &str,
        scenarios: u64,
        results: impl IntoIterator<Item = &'a RunResult> + Clone,
    ) -> SchemeStats {
        let runs = results.clone().into_iter().count() as u64;
        let throughput: f64 = results
            .clone()
            .into_iter()
            .map(|r| r.throughput_per_s)
            .sum();
        SchemeStats {
            scheme: scheme.to_string(),
            scenarios,
            runs,
            seeds_violating: results
                .clone()
                .into_iter()
                .filter(|r| is_violating(r))
                .count() as u64,
            acquire_ms: latency_summary(results.clone()),
            max_wait_ms: WaitSummary::from_results(results.clone()),
            throughput_per_s: if runs == 0 {
                0.0
            } else {
                round3(throughput / runs as f64)
            },
        }
    }
}

/// `summary.json`: everything `compare` measured, machine-readable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Which seeds ran, in words (`each scenario's first 10 seeds`, `seeds 0..49`).
    pub seed_policy: String,
    /// True when Ctrl-C stopped the comparison: the cells hold the runs that finished.
    pub interrupted: bool,
    pub runs: u64,
    pub wall_s: f64,
    /// Scenarios in report order (columns of the matrix).
    pub scenarios: Vec<ScenarioInfo>,
    /// Schemes in order of first appearance (rows of the matrix).
    pub schemes: Vec<String>,
    /// The rows of the fault matrix, grouped by family, when the report has matrix columns.
    #[serde(default)]
    pub matrix_rows: Vec<MatrixRow>,
    pub cells: Vec<Cell>,
    pub scheme_totals: Vec<SchemeStats>,
    /// Runs that could not be simulated, one message each.
    pub errors: Vec<String>,
}

impl Summary {
    /// The fault matrix's columns, in report order.
    pub fn matrix_columns(&self) -> Vec<&ScenarioInfo> {
        self.scenarios
            .iter()
            .filter(|s| s.matrix.is_some())
            .collect()
    }

    /// The catalog's scenarios: every one that is not a matrix column.
    pub fn catalog_scenarios(&self) -> Vec<&ScenarioInfo> {
        self.scenarios
            .iter()
            .filter(|s| s.matrix.is_none())
            .collect()
    }

    pub fn cell(&self, scenario: &str, scheme: &str) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.stats.scenario == scenario && c.stats.scheme == scheme)
    }

    pub fn mismatch_count(&self) -> usize {
        self.cells.iter().map(|c| c.mismatches.len()).sum()
    }

    /// A one-line description of what ran.
    pub fn headline(&self) -> String {
        format!(
            "{} scenario(s) × {} scheme(s): {} run(s) in {:.1} s wall; seeds: {}",
            self.scenarios.len(),
            self.schemes.len(),
            self.runs,
            self.wall_s,
            self.seed_policy
        )
    }
}

impl Cell {
    /// The verdict counts worth showing: only the ones that are not all good.
    pub fn verdict_notes(&self) -> Vec<String> {
        let v = &self.stats.verdicts;
        let mut notes = Vec::new();
        if v.mutual_exclusion.violated > 0 {
            notes.push(format!("exclusion ✗ {}", v.mutual_exclusion.violated));
        }
        if v.resource_safety.violated > 0 {
            notes.push(format!("resource ✗ {}", v.resource_safety.violated));
        }
        if v.liveness.stuck > 0 {
            notes.push(format!("stuck {}", v.liveness.stuck));
        }
        if v.fifo_violated > 0 {
            notes.push(format!("FIFO order ✗ {}", v.fifo_violated));
        }
        notes
    }
}

/// A float in ms for people: `7.3`, `1027`, `0.45`.
pub fn fmt_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 1.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.2}")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use model::result::{Counts, Latencies, Quantiles, Verdicts};

    /// A result with the given verdicts and acquire latency (p50, p99).
    pub fn result(
        scenario: &str,
        scheme: &str,
        seed: u64,
        verdicts: (Safety, Safety, Liveness),
        acquire: (f64, f64),
    ) -> RunResult {
        RunResult {
            scenario: scenario.into(),
            scheme: scheme.into(),
            seed,
            trace_hash: "0".repeat(40),
            sim_ms: 1000,
            wall_ms: 1,
            verdicts: Verdicts {
                mutual_exclusion: verdicts.0,
                resource_safety: verdicts.1,
                liveness: verdicts.2,
            },
            counts: Counts {
                acquisitions: if acquire.0 > 0.0 { 10 } else { 0 },
                ..Counts::default()
            },
            latency_ms: Latencies {
                acquire: Quantiles {
                    p50: acquire.0,
                    p90: acquire.0,
                    p99: acquire.1,
                    max: acquire.1,
                },
                release: Quantiles::default(),
            },
            throughput_per_s: 10.0,
            max_wait_ms: acquire.1,
            max_wait_ms_by_client: Default::default(),
            violations: vec![],
        }
    }

    pub const OK: (Safety, Safety, Liveness) = (Safety::Holds, Safety::Holds, Liveness::Ok);
    pub const BAD: (Safety, Safety, Liveness) = (Safety::Violated, Safety::Violated, Liveness::Ok);
    pub const FENCED: (Safety, Safety, Liveness) = (Safety::Violated, Safety::Holds, Liveness::Ok);

    #[test]
    fn a_cell_counts_verdicts_and_finds_the_first_failing_seed() {
        let results = vec![
            result("s", "x", 7, BAD, (5.0, 50.0)),
            result("s", "x", 3, OK, (1.0, 10.0)),
            result("s", "x", 5, FENCED, (3.0, 30.0)),
            result("s", "x", 9, OK, (0.0, 0.0)),
        ];
        let c = CellStats::from_results("s", "x", &results);
        assert_eq!(c.seeds_run, 4);
        assert_eq!(c.seeds_violating, 2);
        assert_eq!(c.first_failing_seed, Some(5));
        assert_eq!(c.violating_seeds, vec![5, 7]);
        assert_eq!(c.outcome, Outcome::Corrupted);
        assert_eq!(c.verdicts.mutual_exclusion.violated, 2);
        assert_eq!(c.verdicts.resource_safety.violated, 1);
        assert_eq!(c.verdicts.liveness.ok, 4);
        // The run without acquisitions is left out of latency: median of 1, 3, 5.
        assert_eq!(c.acquire_ms.p50, 3.0);
        assert_eq!(c.acquire_ms.p99, 30.0);
        assert_eq!(c.acquire_ms.max, 50.0);
        assert_eq!(c.acquire_ms.runs, 3);
        assert_eq!(c.throughput_per_s, 10.0);
        // Each seed's longest wait (here its p99): median of 0, 10, 30, 50 and the largest.
        assert_eq!(
            c.max_wait_ms,
            WaitSummary {
                median: 20.0,
                max: 50.0
            }
        );
    }

    #[test]
    fn wilson_intervals_stay_inside_zero_and_one() {
        assert_eq!(wilson_ci95(0, 20), [0.0, 0.161]);
        assert_eq!(wilson_ci95(20, 20), [0.839, 1.0]);
        assert_eq!(wilson_ci95(10, 20), [0.299, 0.701]);
        assert_eq!(wilson_ci95(0, 0), [0.0, 1.0]);
    }

    #[test]
    fn outcomes_order_from_best_to_worst() {
        let c = CellStats::from_results("s", "x", &[result("s", "x", 1, FENCED, (1.0, 1.0))]);
        assert_eq!(c.outcome, Outcome::Overlap);
        let empty = CellStats::from_results("s", "x", &[]);
        assert_eq!(empty.outcome, Outcome::NoRuns);
        assert_eq!(empty.first_failing_seed, None);
        assert!(Outcome::Corrupted > Outcome::Overlap && Outcome::Stuck > Outcome::Ok);
    }

    #[test]
    fn a_lost_fifo_order_fails_the_seed_without_making_it_unsafe() {
        let mut unfair = result("s", "fair", 4, OK, (1.0, 2.0));
        unfair.violations.push(model::result::Violation {
            kind: "fifo_order".into(),
            t_ms: 100.0,
            nodes: vec!["client-2".into(), "client-1".into()],
            detail: "client-2 overtook client-1".into(),
        });
        let c = CellStats::from_results(
            "s",
            "fair",
            &[result("s", "fair", 3, OK, (1.0, 2.0)), unfair],
        );
        assert_eq!(c.outcome, Outcome::Unfair);
        assert_eq!((c.seeds_violating, c.first_failing_seed), (1, Some(4)));
        assert_eq!(c.verdicts.fifo_violated, 1);
        assert_eq!(c.verdicts.mutual_exclusion.violated, 0);
        assert!(Outcome::Ok < Outcome::Unfair && Outcome::Unfair < Outcome::Stuck);
    }

    #[test]
    fn summary_json_has_the_cell_counts() {
        let cell = Cell {
            stats: CellStats::from_results("s", "x", &[result("s", "x", 2, BAD, (1.0, 2.0))]),
            mismatches: vec![],
            timeline: Some("runs/s/x/seed-2/timeline.svg".into()),
            replay: None,
            expect_broken_seeds: None,
        };
        let json = serde_json::to_value(&cell).unwrap();
        assert_eq!(json["seeds_run"], 1);
        assert_eq!(json["seeds_violating"], 1);
        assert_eq!(json["first_failing_seed"], 2);
        assert_eq!(json["outcome"], "corrupted");
        assert_eq!(json["verdicts"]["mutual_exclusion"]["violated"], 1);
        assert_eq!(json["acquire_ms"]["p99"], 2.0);
        let back: Cell = serde_json::from_value(json).unwrap();
        assert_eq!(back, cell);
    }
}
