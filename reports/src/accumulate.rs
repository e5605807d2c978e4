//! A cell's numbers (`summary::CellStats`) accumulated one run at a time, in memory that does not
//! grow with the number of seeds: what `locksim sweep` feeds, so a million seeds need no more
//! memory than a thousand (issue 15; keeping every result was ~0.75 KB per seed).
//!
//! Counts and maxima are exact. The medians across seeds are exact up to `EXACT_VALUES` runs (the
//! same numbers `CellStats::from_results` gives); past that each one folds into a histogram with
//! 3 significant digits, so a median is then within 0.1 % of the exact one. Of the violating
//! seeds, the `KEPT_SEEDS` lowest are kept; `seeds_violating` counts them all.

use std::collections::BTreeSet;

use hdrhistogram::Histogram;
use model::result::RunResult;

use crate::summary::{
    CellStats, LatencySummary, Outcome, VerdictCounts, WaitSummary, is_violating, median,
    outcome_of, round3, wilson_ci95,
};

/// Runs whose values a median keeps exactly.
pub const EXACT_VALUES: usize = 65_536;

/// How many of the lowest violating seeds a cell keeps (a sweep prints the first 20).
pub const KEPT_SEEDS: usize = 100;

/// The median of values (ms, 3 decimals) across seeds, exact while few.
#[derive(Clone, Debug)]
enum Median {
    Exact(Vec<f64>),
    /// µs, after `EXACT_VALUES` values.
    Sketch(Histogram<u64>),
}

impl Default for Median {
    fn default() -> Self {
        Median::Exact(Vec::new())
    }
}

/// Records `ms` in µs; the histogram grows to hold it.
fn record(sketch: &mut Histogram<u64>, ms: f64) {
    let us = (ms.max(0.0) * 1000.0).round() as u64;
    sketch
        .record(us.min(u64::MAX >> 2))
        .expect("an auto-resizing histogram takes every value up to its bound");
}

impl Median {
    fn add(&mut self, ms: f64) {
        if let Median::Exact(values) = self {
            if values.len() < EXACT_VALUES {
                values.push(ms);
                return;
            }
            let mut sketch = Histogram::new(3).expect("valid histogram precision");
            for &v in values.iter() {
                record(&mut sketch, v);
            }
            *self = Median::Sketch(sketch);
        }
        if let Median::Sketch(sketch) = self {
            record(sketch, ms);
        }
    }

    fn value(&mut self) -> f64 {
        match self {
            Median::Exact(values) => median(values),
            Median::Sketch(sketch) => {
                round3(sketch.lowest_equivalent(sketch.value_at_quantile(0.5)) as f64 / 1000.0)
            }
        }
    }
}

/// One scenario × scheme cell, fed run by run (any order).
#[derive(Clone, Debug, Default)]
pub struct CellAccumulator {
    seeds_run: u64,
    seeds_violating: u64,
    lowest_violating: BTreeSet<u64>,
    outcome: Option<Outcome>,
    verdicts: VerdictCounts,
    acquire_p50: Median,
    acquire_p90: Median,
    acquire_p99: Median,
    acquire_max: f64,
    acquire_runs: u64,
    throughput_sum: f64,
    acquisitions: u64,
    acquire_failures: u64,
    max_wait: Median,
    max_wait_max: f64,
}

impl CellAccumulator {
    pub fn add(&mut self, r: &RunResult) {
        self.seeds_run += 1;
        self.verdicts.add(r);
        if is_violating(r) {
            self.seeds_violating += 1;
            self.lowest_violating.insert(r.seed);
            if self.lowest_violating.len() > KEPT_SEEDS {
                self.lowest_violating.pop_last();
            }
        }
        let outcome = outcome_of(r);
        self.outcome = Some(self.outcome.map_or(outcome, |o| o.max(outcome)));
        if r.counts.acquisitions > 0 {
            let a = &r.latency_ms.acquire;
            self.acquire_p50.add(a.p50);
            self.acquire_p90.add(a.p90);
            self.acquire_p99.add(a.p99);
            self.acquire_max = self.acquire_max.max(a.max);
            self.acquire_runs += 1;
        }
        self.throughput_sum += r.throughput_per_s;
        self.acquisitions += r.counts.acquisitions;
        self.acquire_failures += r.counts.acquire_failures;
        self.max_wait.add(r.max_wait_ms);
        self.max_wait_max = self.max_wait_max.max(r.max_wait_ms);
    }

    /// The cell's numbers; `violating_seeds` holds the `KEPT_SEEDS` lowest.
    pub fn finish(mut self, scenario: &str, scheme: &str) -> CellStats {
        let violating_seeds: Vec<u64> = self.lowest_violating.into_iter().collect();
        CellStats {
            scenario: scenario.to_string(),
            scheme: scheme.to_string(),
            seeds_run: self.seeds_run,
            seeds_violating: self.seeds_violating,
            first_failing_seed: violating_seeds.first().copied(),
            violating_seeds,
            outcome: self.outcome.unwrap_or(Outcome::NoRuns),
            verdicts: self.verdicts,
            acquire_ms: LatencySummary {
                p50: self.acquire_p50.value(),
                p90: self.acquire_p90.value(),
                p99: self.acquire_p99.value(),
                max: self.acquire_max,
                runs: self.acquire_runs,
            },
            throughput_per_s: if self.seeds_run == 0 {
                0.0
            } else {
                round3(self.throughput_sum / self.seeds_run as f64)
            },
            acquisitions: self.acquisitions,
            acquire_failures: self.acquire_failures,
            max_wait_ms: WaitSummary {
                median: self.max_wait.value(),
                max: self.max_wait_max,
            },
            violating_ci95: wilson_ci95(self.seeds_violating, self.seeds_run),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::result::{Liveness, Safety};

    /// Results with varied verdicts, latencies and waits, seeds in a shuffled order.
    fn results(n: u64) -> Vec<RunResult> {
        let base =
            crate::summary::tests::result("s", "x", 0, crate::summary::tests::OK, (1.0, 1.0));
        (0..n)
            .map(|i| {
                let seed = (i * 7_919) % n;
                let mut r = base.clone();
                r.seed = seed;
                r.verdicts.mutual_exclusion = if seed.is_multiple_of(3) {
                    Safety::Violated
                } else {
                    Safety::Holds
                };
                r.verdicts.liveness = if seed.is_multiple_of(11) {
                    Liveness::Stuck
                } else {
                    Liveness::Ok
                };
                r.counts.acquisitions = seed % 5;
                r.latency_ms.acquire.p50 = round3((seed % 97) as f64 * 1.37);
                r.latency_ms.acquire.p90 = round3((seed % 89) as f64 * 2.11);
                r.latency_ms.acquire.p99 = round3((seed % 83) as f64 * 3.03);
                r.latency_ms.acquire.max = round3((seed % 79) as f64 * 5.7);
                r.max_wait_ms = round3((seed % 101) as f64 * 10.01);
                r.throughput_per_s = 0.5;
                r
            })
            .collect()
    }

    #[test]
    fn streamed_numbers_are_those_of_all_the_results() {
        let all = results(2_000);
        let mut acc = CellAccumulator::default();
        for r in &all {
            acc.add(r);
        }
        let streamed = acc.finish("s", "x");
        let mut expected = CellStats::from_results("s", "x", &all);
        assert!(expected.violating_seeds.len() > KEPT_SEEDS);
        expected.violating_seeds.truncate(KEPT_SEEDS);
        assert_eq!(streamed, expected);
    }

    #[test]
    fn past_the_exact_limit_medians_stay_within_a_tenth_of_a_percent() {
        let all = results(EXACT_VALUES as u64 + 5_000);
        let mut acc = CellAccumulator::default();
        for r in &all {
            acc.add(r);
        }
        let streamed = acc.finish("s", "x");
        let expected = CellStats::from_results("s", "x", &all);
        assert_eq!(streamed.seeds_violating, expected.seeds_violating);
        assert_eq!(streamed.verdicts, expected.verdicts);
        for (got, want) in [
            (streamed.acquire_ms.p50, expected.acquire_ms.p50),
            (streamed.acquire_ms.p99, expected.acquire_ms.p99),
            (streamed.max_wait_ms.median, expected.max_wait_ms.median),
        ] {
            assert!(
                (got - want).abs() <= want * 0.001 + 0.001,
                "{got} vs {want}"
            );
        }
    }
}
