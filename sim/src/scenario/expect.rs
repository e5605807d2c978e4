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
/// `starved_over_ms` is the opposite: some owner waits longer than that.
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
    /// Starvation expected: some owner waits longer than this for the lock (the failing side
    /// of a case whose fixed side `max_wait_ms` bounds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starved_over_ms: Option<u64>,
    /// `holds`: no extension (`clients.extend`) of a lock the client no longer held
    /// (`counts.stolen_extensions` is 0); `violated`: at least one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extension_safety: Option<SafetyExpect>,
    /// `holds`: no release deleted a key holding another owner's token
    /// (`counts.foreign_releases` is 0); `violated`: at least one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release_safety: Option<SafetyExpect>,
}

impl Expect {
    /// This, with every property `other` names taken from `other`.
    pub fn overridden_by(&self, other: &Expect) -> Expect {
        Expect {
            mutual_exclusion: other.mutual_exclusion.or(self.mutual_exclusion),
            resource_safety: other.resource_safety.or(self.resource_safety),
            liveness: other.liveness.or(self.liveness),
            fairness: other.fairness.or(self.fairness),
            max_wait_ms: other.max_wait_ms.or(self.max_wait_ms),
            starved_over_ms: other.starved_over_ms.or(self.starved_over_ms),
            extension_safety: other.extension_safety.or(self.extension_safety),
            release_safety: other.release_safety.or(self.release_safety),
        }
    }
}

/// `unasserted_by_scheme`: per scheme row, the properties deliberately left unasserted, each
/// with the reason (a verdict that a rare seed outside the budget's range breaks, say). `check`
/// judges none of them on that row, whatever `expect` says, and `check --record` writes none of
/// them back. The three properties `check --record` writes, no others: the rest are never
/// recorded, so leaving them out of `expect` already leaves them unasserted.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Unasserted {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mutual_exclusion: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_safety: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness: Option<String>,
}

impl Unasserted {
    /// (property, reason) of each property left unasserted.
    pub fn properties(&self) -> Vec<(&'static str, &str)> {
        [
            ("mutual_exclusion", &self.mutual_exclusion),
            ("resource_safety", &self.resource_safety),
            ("liveness", &self.liveness),
        ]
        .into_iter()
        .filter_map(|(property, reason)| reason.as_deref().map(|r| (property, r)))
        .collect()
    }

    /// Whether `property` is left unasserted.
    pub fn names(&self, property: &str) -> bool {
        self.properties().iter().any(|(p, _)| *p == property)
    }

    /// `expect` without the properties left unasserted.
    pub fn removed_from(&self, expect: &Expect) -> Expect {
        let mut kept = expect.clone();
        if self.mutual_exclusion.is_some() {
            kept.mutual_exclusion = None;
        }
        if self.resource_safety.is_some() {
            kept.resource_safety = None;
        }
        if self.liveness.is_some() {
            kept.liveness = None;
        }
        kept
    }
}

impl Expect {
    /// Whether this names `property` (`mutual_exclusion`, `resource_safety` or `liveness`).
    pub fn names(&self, property: &str) -> bool {
        match property {
            "mutual_exclusion" => self.mutual_exclusion.is_some(),
            "resource_safety" => self.resource_safety.is_some(),
            "liveness" => self.liveness.is_some(),
            _ => false,
        }
    }
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
    /// Exactly the verdicts of this run (`fairness` too when the scenario judges it,
    /// `extension_safety` when its clients extend their leases).
    pub fn of_run(r: &RunResult, judges_fairness: bool, judges_extensions: bool) -> Expect {
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
            extension_safety: judges_extensions
                .then(|| SafetyExpect::of(Safety::from_violated(r.counts.stolen_extensions > 0))),
            ..Expect::default()
        }
    }
}

/// The verdicts a run broke, by name: `mutual_exclusion`, `resource_safety` (violated),
/// `liveness` (stuck), `extension_safety` (a stolen extension), and `fairness` (violated) when
/// the scenario judges it — what `reports::summary::is_violating` counts.
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
    if r.counts.stolen_extensions > 0 {
        out.push("extension_safety");
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
    if let Some(e) = expect.extension_safety {
        let got = Safety::from_violated(r.counts.stolen_extensions > 0);
        verdict("extension_safety", safety(e).as_str(), got.as_str());
    }
    if let Some(e) = expect.release_safety {
        let got = Safety::from_violated(r.counts.foreign_releases > 0);
        verdict("release_safety", safety(e).as_str(), got.as_str());
    }
    if let Some(bound) = expect.starved_over_ms {
        out.push((
            "starved_over_ms",
            format!("> {bound}"),
            format!("{:.3}", r.max_wait_ms),
            r.max_wait_ms > bound as f64,
        ));
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

/// Whether `r` broke a property `expect` names: a safety verdict violated, liveness stuck,
/// FIFO order lost, a stolen extension, a foreign release, a wait over the bound. Incident scenarios name exactly
/// the properties of their case, so this is their verdict per seed.
pub fn broken(expect: &Expect, r: &RunResult) -> bool {
    let bad = Expect {
        mutual_exclusion: expect.mutual_exclusion.map(|_| SafetyExpect::Violated),
        resource_safety: expect.resource_safety.map(|_| SafetyExpect::Violated),
        liveness: expect.liveness.map(|_| LivenessExpect::Stuck),
        fairness: expect.fairness.map(|_| SafetyExpect::Violated),
        max_wait_ms: None,
        starved_over_ms: expect.starved_over_ms.or(expect.max_wait_ms),
        extension_safety: expect.extension_safety.map(|_| SafetyExpect::Violated),
        release_safety: expect.release_safety.map(|_| SafetyExpect::Violated),
    };
    compare(&bad, r).iter().any(|(_, _, _, met)| *met)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(max_wait_ms: f64, stolen_extensions: u64) -> RunResult {
        let q = serde_json::json!({"p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0});
        serde_json::from_value(serde_json::json!({
            "scenario": "s", "scheme": "x", "seed": 3, "trace_hash": "0", "sim_ms": 1,
            "wall_ms": 1, "throughput_per_s": 0.0, "max_wait_ms": max_wait_ms, "violations": [],
            "verdicts": {"mutual_exclusion": "violated", "resource_safety": "holds", "liveness": "ok"},
            "counts": {"acquisitions": 1, "acquire_failures": 0, "lock_overlaps": 1,
                       "resource_conflicts": 0, "stale_writes_rejected": 0, "foreign_releases": 0,
                       "faults_injected": 1, "stolen_extensions": stolen_extensions},
            "latency_ms": {"acquire": q, "release": q}
        }))
        .unwrap()
    }

    #[test]
    fn broken_looks_only_at_the_properties_expect_names() {
        let extension = Expect {
            extension_safety: Some(SafetyExpect::Holds),
            ..Expect::default()
        };
        // Mutual exclusion is violated, but this expectation does not judge it.
        assert!(!broken(&extension, &run(10.0, 0)));
        assert!(broken(&extension, &run(10.0, 2)));
        let starved = Expect {
            starved_over_ms: Some(5000),
            ..Expect::default()
        };
        let bounded = Expect {
            max_wait_ms: Some(5000),
            ..Expect::default()
        };
        for e in [&starved, &bounded] {
            assert!(broken(e, &run(9000.0, 0)) && !broken(e, &run(4000.0, 0)));
        }
        assert!(mismatches(&starved, &Expect::default(), &[run(9000.0, 0)]).is_empty());
        let missed = mismatches(&starved, &Expect::default(), &[run(4000.0, 0)]);
        assert_eq!(
            missed[0].to_string(),
            "s [x] seed 3: starved_over_ms expected > 5000, got 4000.000"
        );
    }
}
