//! Expectations: does a scenario give the verdicts its file promises, on every seed of its
//! range (`expect`) or on at least one (`expect_some`)? `locksim check` and the catalog tests
//! both ask this.

use model::result::{Liveness, RunResult, Safety};

use crate::scenario::{Expect, LivenessExpect, SafetyExpect};

/// One verdict that differs from what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub scenario: String,
    pub scheme: String,
    /// `None` for an `expect_some` verdict that no seed produced.
    pub seed: Option<u64>,
    pub property: &'static str,
    pub expected: String,
    pub got: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.seed {
            Some(seed) => write!(
                f,
                "{} [{}] seed {}: {} expected {}, got {}",
                self.scenario, self.scheme, seed, self.property, self.expected, self.got
            ),
            None => write!(
                f,
                "{} [{}]: expect_some {} {} on at least one seed, got {}",
                self.scenario, self.scheme, self.property, self.expected, self.got
            ),
        }
    }
}

fn safety(e: SafetyExpect) -> Safety {
    match e {
        SafetyExpect::Holds => Safety::Holds,
        SafetyExpect::Violated => Safety::Violated,
    }
}

fn liveness(e: LivenessExpect) -> Liveness {
    match e {
        LivenessExpect::Ok => Liveness::Ok,
        LivenessExpect::Stuck => Liveness::Stuck,
    }
}

/// One expectation judged on one run: property, expected, got, met.
type Judged = (&'static str, String, String, bool);

/// (property, expected, got, met) for every verdict `expect` names.
fn compare(expect: &Expect, r: &RunResult) -> Vec<Judged> {
    let v = &r.verdicts;
    let mut out = Vec::new();
    let mut verdict = |property, expected: &'static str, got: &'static str| {
        out.push((
            property,
            expected.to_string(),
            got.to_string(),
            expected == got,
        ));
    };
    if let Some(e) = expect.mutual_exclusion {
        verdict(
            "mutual_exclusion",
            safety(e).as_str(),
            v.mutual_exclusion.as_str(),
        );
    }
    if let Some(e) = expect.resource_safety {
        verdict(
            "resource_safety",
            safety(e).as_str(),
            v.resource_safety.as_str(),
        );
    }
    if let Some(e) = expect.liveness {
        verdict("liveness", liveness(e).as_str(), v.liveness.as_str());
    }
    if let Some(e) = expect.fairness {
        let got = Safety::from_violated(r.lost_fifo_order());
        verdict("fairness", safety(e).as_str(), got.as_str());
    }
    if let Some(bound) = expect.max_wait_ms {
        out.push((
            "max_wait_ms",
            format!("≤ {bound}"),
            format!("{:.3}", r.max_wait_ms),
            r.max_wait_ms <= bound as f64,
        ));
    }
    out
}

/// Mismatches of the results of one scenario × scheme over its seeds.
pub fn mismatches(expect: &Expect, expect_some: &Expect, results: &[RunResult]) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for r in results {
        for (property, expected, got, ok) in compare(expect, r) {
            if !ok {
                out.push(Mismatch {
                    scenario: r.scenario.clone(),
                    scheme: r.scheme.clone(),
                    seed: Some(r.seed),
                    property,
                    expected,
                    got,
                });
            }
        }
    }
    if let Some(first) = results.first() {
        for (i, (property, expected, _, _)) in compare(expect_some, first).into_iter().enumerate() {
            let seen = results.iter().any(|r| compare(expect_some, r)[i].3);
            if !seen {
                out.push(Mismatch {
                    scenario: first.scenario.clone(),
                    scheme: first.scheme.clone(),
                    seed: None,
                    property,
                    expected,
                    got: format!("never on {} seeds", results.len()),
                });
            }
        }
    }
    out
}
