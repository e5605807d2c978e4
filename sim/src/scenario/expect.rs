//! Expectations: the verdicts a scenario file promises (`expect`: on every seed of its range,
//! `expect_some`: on at least one), and whether a run's results keep them — what `locksim
//! check`, `compare` and the catalog tests ask.

use model::result::{Liveness, RunResult, Safety};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `expect` / `expect_some`: verdicts a seed range must (or must at least once) produce.
/// `fairness` (holds|violated) is optional and outside the result's three verdicts: naming it
/// makes the run judge FIFO order (`fifo_order` violations, see `model::check::fairness`).
/// `max_wait_ms` bounds starvation: no owner may wait longer than that for the lock (the
/// result's `max_wait_ms`); in `expect_some`, at least one seed stays within the bound.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Expect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mutual_exclusion: Option<SafetyExpect>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_safety: Option<SafetyExpect>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness: Option<LivenessExpect>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<SafetyExpect>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u64>,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SafetyExpect {
    Holds,
    Violated,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LivenessExpect {
    Ok,
    Stuck,
}

impl SafetyExpect {
    fn of(verdict: Safety) -> SafetyExpect {
        match verdict {
            Safety::Holds => SafetyExpect::Holds,
            Safety::Violated => SafetyExpect::Violated,
        }
    }
}

impl Expect {
    /// Exactly the verdicts of this run (`fairness` too when the scenario judges it).
    pub fn of_run(r: &RunResult, judges_fairness: bool) -> Expect {
        let v = &r.verdicts;
        Expect {
            mutual_exclusion: Some(SafetyExpect::of(v.mutual_exclusion)),
            resource_safety: Some(SafetyExpect::of(v.resource_safety)),
            liveness: Some(match v.liveness {
                Liveness::Ok => LivenessExpect::Ok,
                Liveness::Stuck => LivenessExpect::Stuck,
            }),
            fairness: judges_fairness
                .then(|| SafetyExpect::of(Safety::from_violated(r.lost_fifo_order()))),
            max_wait_ms: None,
        }
    }
}

/// The verdicts a run broke, by name: `mutual_exclusion`, `resource_safety` (violated),
/// `liveness` (stuck), and `fairness` (violated) when the scenario judges it.
pub fn broken_verdicts(r: &RunResult, judges_fairness: bool) -> Vec<&'static str> {
    let v = &r.verdicts;
    let mut out = Vec::new();
    if v.mutual_exclusion == Safety::Violated {
        out.push("mutual_exclusion");
    }
    if v.resource_safety == Safety::Violated {
        out.push("resource_safety");
    }
    if v.liveness == Liveness::Stuck {
        out.push("liveness");
    }
    if judges_fairness && r.lost_fifo_order() {
        out.push("fairness");
    }
    out
}

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
