//! The benchmark of issue 33 ("Measure it"): on one scenario row, campaigns of three searches,
//! each on its own seeds, each counting the runs to its first violation within a fixed budget
//! of runs:
//! - `random`: the scenario's own random nemesis with every listed kind on (`swarm` off), one
//!   run per seed, seeds `c × budget ..` for campaign `c` — what `locksim sweep` does;
//! - `swarm`: hunt's fresh inputs only (each kind on with p = ½, rates and durations
//!   log-uniform), nothing learnt;
//! - `hunt`: the guided search (`Search::Guided`), blind, fresh runs on the same seeds as
//!   `swarm`;
//! - `hunt --toward` (with `Bench::toward`): the same search directed along a path of marks
//!   (`directed`), on the same seeds.
//!
//! It also counts the distinct features (`features`) a campaign reaches in its first N runs,
//! over campaigns that do not stop at a violation. Every figure is a function of the scenario,
//! the settings and the campaign numbers: campaigns run in parallel, each alone on its thread.

use std::collections::{BTreeMap, BTreeSet};

use model::marks::Mark;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::hunt::{Campaign, Limits, Search, Target};
use crate::scenario::Scenario;

/// A campaign's result and the features it reached, or why it could not run.
type Ran = Result<(CampaignResult, usize), String>;

/// The three searches compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Random,
    Swarm,
    Hunt,
    /// Hunt directed along `Bench::toward`'s marks.
    Toward,
}

impl Method {
    /// The searches every bench compares ([`Method::Toward`] joins them with a path).
    pub const ALL: [Method; 3] = [Method::Random, Method::Swarm, Method::Hunt];

    pub fn name(self) -> &'static str {
        match self {
            Method::Random => "random",
            Method::Swarm => "swarm",
            Method::Hunt => "hunt",
            Method::Toward => "hunt --toward",
        }
    }
}

/// What the benchmark runs.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub campaigns: u64,
    /// Runs each campaign may spend to find a violation.
    pub max_runs: u64,
    /// Runs of each feature-counting campaign.
    pub feature_runs: u64,
    /// How many feature-counting campaigns per search.
    pub feature_campaigns: u64,
    /// Campaigns run at once.
    pub jobs: usize,
}

/// Whether a run that fired `marks` (in the order of their first hits) took the path
/// `mechanism`: its marks in that order, others between them allowed (empty: every run).
pub fn took_path(marks: &[Mark], mechanism: &[Mark]) -> bool {
    crate::hunt::directed::fired_in_order(marks, mechanism) == mechanism.len()
}

/// One campaign's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CampaignResult {
    /// Runs up to and including the first violating one; `None` when the budget ran out.
    pub runs_to_violation: Option<u64>,
    /// The verdicts that run broke.
    pub broken: Vec<&'static str>,
    /// For swarm and hunt: where the violating input came from (`Origin::name`) and the
    /// features its run reached first.
    pub found_by: Option<(&'static str, Vec<String>)>,
    /// The marks the violating run fired, in the order of their first hits (empty when none
    /// was found).
    pub marks: Vec<Mark>,
    /// For swarm and hunt: the campaign's runs by where their inputs came from
    /// (`Origin::name`), what a violation per origin is measured against.
    pub runs_by_origin: BTreeMap<&'static str, u64>,
    /// Violating runs before the end of the campaign that did not take the bench's path
    /// (`Bench::path`): seen, counted, not stopped at.
    pub other_violations: u64,
}

/// One search's figures on one row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodFigures {
    pub method: Method,
    pub campaigns: Vec<CampaignResult>,
    /// Distinct features of each feature-counting campaign.
    pub features: Vec<usize>,
}

impl MethodFigures {
    pub fn found(&self) -> usize {
        self.campaigns
            .iter()
            .filter(|c| c.runs_to_violation.is_some())
            .count()
    }

    /// Median runs to the first violation, a campaign that found none counting as more than
    /// the budget; `None` when that median is past the budget.
    pub fn median_runs(&self) -> Option<f64> {
        let mut runs: Vec<u64> = self
            .campaigns
            .iter()
            .map(|c| c.runs_to_violation.unwrap_or(u64::MAX))
            .collect();
        runs.sort_unstable();
        median(&runs)
    }

    /// Violating runs of other paths, over every campaign, and the campaigns that saw one.
    pub fn other_violations(&self) -> (u64, usize) {
        let runs = self.campaigns.iter().map(|c| c.other_violations).sum();
        let campaigns = self
            .campaigns
            .iter()
            .filter(|c| c.other_violations > 0)
            .count();
        (runs, campaigns)
    }

    /// Per origin (`Origin::name`): the violations its inputs found and the runs they took
    /// over every campaign, most violations first.
    pub fn origins(&self) -> Vec<(&'static str, usize, u64)> {
        let mut counts: BTreeMap<&'static str, (usize, u64)> = BTreeMap::new();
        for c in &self.campaigns {
            if let Some((origin, _)) = c.found_by {
                counts.entry(origin).or_default().0 += 1;
            }
            for (origin, runs) in &c.runs_by_origin {
                counts.entry(origin).or_default().1 += runs;
            }
        }
        let mut counts: Vec<(&'static str, usize, u64)> =
            counts.into_iter().map(|(o, (n, r))| (o, n, r)).collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        counts
    }

    pub fn median_features(&self) -> Option<f64> {
        let mut f: Vec<u64> = self.features.iter().map(|&n| n as u64).collect();
        f.sort_unstable();
        median(&f)
    }
}

/// The median of sorted values; `None` if it involves a `u64::MAX` (not found).
fn median(sorted: &[u64]) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let (a, b) = (sorted[(n - 1) / 2], sorted[n / 2]);
    if a == u64::MAX || b == u64::MAX {
        return None;
    }
    Some((a as f64 + b as f64) / 2.0)
}

/// The bench's view of a scenario row: hunt's target and the random nemesis's row.
pub struct Bench {
    target: Target,
    /// The path a violation must take to end a campaign (`took_path`); empty: any violation.
    path: Vec<Mark>,
    /// The path [`Method::Toward`] is directed along; empty: no such search.
    toward: Vec<Mark>,
}

impl Bench {
    pub fn new(scenario: &Scenario, scheme: usize) -> Result<Bench, String> {
        let target = Target::new(scenario, scheme)?;
        Ok(Bench {
            target,
            path: Vec::new(),
            toward: Vec::new(),
        })
    }

    /// Adds the search [`Method::Toward`]: hunt directed along `marks` (`directed`).
    pub fn toward(mut self, marks: &[Mark]) -> Bench {
        self.toward = marks.to_vec();
        self
    }

    /// The searches this bench compares.
    pub fn methods(&self) -> Vec<Method> {
        let mut methods = Method::ALL.to_vec();
        if !self.toward.is_empty() {
            methods.push(Method::Toward);
        }
        methods
    }

    /// Campaigns stop only at a violation whose run fired `path`'s marks in order; the others
    /// are counted (`CampaignResult::other_violations`). A class named after one bug is
    /// measured on that bug, not on whichever other its faults also reach.
    pub fn stop_at_path(mut self, path: &[Mark]) -> Bench {
        self.path = path.to_vec();
        self
    }

    /// The first seed of campaign `c`: campaigns never share a fresh seed.
    fn first_seed(&self, c: u64, settings: &Settings) -> u64 {
        self.target.row.seed + c * settings.max_runs.max(settings.feature_runs)
    }

    /// The random nemesis on `runs` consecutive seeds from `first`: the runs to the first
    /// violation (when `stop`), and the features reached.
    fn random_campaign(&self, first: u64, runs: u64, stop: bool) -> Ran {
        let mut reached = BTreeSet::new();
        let mut other_violations = 0;
        for i in 0..runs {
            let (_, trial) = self.target.try_nemesis(first + i)?;
            let marks = trial.reached.marks_in_order();
            reached.extend(trial.reached.features);
            let broken = trial.broken;
            if broken.is_empty() {
                continue;
            }
            if !took_path(&marks, &self.path) {
                other_violations += 1;
                continue;
            }
            if stop {
                let result = CampaignResult {
                    runs_to_violation: Some(i + 1),
                    broken,
                    found_by: None,
                    marks,
                    runs_by_origin: BTreeMap::new(),
                    other_violations,
                };
                return Ok((result, reached.len()));
            }
        }
        let result = CampaignResult {
            runs_to_violation: None,
            broken: Vec::new(),
            found_by: None,
            marks: Vec::new(),
            runs_by_origin: BTreeMap::new(),
            other_violations,
        };
        Ok((result, reached.len()))
    }

    /// A swarm or hunt campaign of `runs` runs (`stop`: until its first violation).
    fn search_campaign(&self, method: Method, c: u64, first: u64, runs: u64, stop: bool) -> Ran {
        let search = if method == Method::Swarm {
            Search::SwarmOnly
        } else {
            Search::Guided
        };
        let mut campaign = Campaign::new(&self.target, c)
            .first_seed(first)
            .search(search)
            .stop_at_path(&self.path);
        if method == Method::Toward {
            campaign = campaign.toward(&self.toward);
        }
        if !stop {
            campaign = campaign.past_violations();
        }
        let limits = Limits {
            max_runs: runs,
            budget: None,
        };
        let outcome = campaign.run(limits, |_| {})?;
        let other_violations = outcome.progress.other_violations;
        let mut runs_by_origin: BTreeMap<&'static str, u64> = BTreeMap::new();
        for tried in &outcome.tried {
            *runs_by_origin.entry(tried.origin.name()).or_default() += 1;
        }
        let result = match (&outcome.found, stop) {
            (Some(found), true) => CampaignResult {
                runs_to_violation: Some(outcome.progress.runs),
                broken: found.broken.clone(),
                found_by: Some((found.origin.name(), found.first_reached.clone())),
                marks: found.marks.clone(),
                runs_by_origin,
                other_violations,
            },
            _ => CampaignResult {
                runs_to_violation: None,
                broken: Vec::new(),
                found_by: None,
                marks: Vec::new(),
                runs_by_origin,
                other_violations,
            },
        };
        Ok((result, outcome.corpus.hits.len()))
    }

    fn campaign(&self, method: Method, c: u64, runs: u64, stop: bool, settings: &Settings) -> Ran {
        let first = self.first_seed(c, settings);
        match method {
            Method::Random => self.random_campaign(first, runs, stop),
            Method::Swarm | Method::Hunt | Method::Toward => {
                self.search_campaign(method, c, first, runs, stop)
            }
        }
    }

    /// Every campaign of every search; `progress` is told of each finished campaign.
    pub fn run(
        &self,
        settings: &Settings,
        progress: impl Fn(Method, u64, &CampaignResult) + Sync,
    ) -> Result<Vec<MethodFigures>, String> {
        // Jobs: (method, campaign, stops at its first violation).
        let mut jobs: Vec<(Method, u64, bool)> = Vec::new();
        let methods = self.methods();
        for &method in &methods {
            jobs.extend((0..settings.campaigns).map(|c| (method, c, true)));
            jobs.extend((0..settings.feature_campaigns).map(|c| (method, c, false)));
        }
        let results: Mutex<Vec<Option<Ran>>> = Mutex::new(vec![None; jobs.len()]);
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..settings.jobs.max(1) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(&(method, c, stop)) = jobs.get(i) else {
                            break;
                        };
                        let runs = if stop {
                            settings.max_runs
                        } else {
                            settings.feature_runs
                        };
                        let result = self.campaign(method, c, runs, stop, settings);
                        if let Ok((r, _)) = &result
                            && stop
                        {
                            progress(method, c, r);
                        }
                        results.lock().expect("not poisoned")[i] = Some(result);
                    }
                });
            }
        });
        let results = results.into_inner().expect("not poisoned");
        let mut figures: Vec<MethodFigures> = methods
            .iter()
            .map(|&method| MethodFigures {
                method,
                campaigns: Vec::new(),
                features: Vec::new(),
            })
            .collect();
        for ((method, _, stop), result) in jobs.iter().zip(results) {
            let (result, features) = result.expect("every job ran")?;
            let f = figures
                .iter_mut()
                .find(|f| f.method == *method)
                .expect("every method");
            if *stop {
                f.campaigns.push(result);
            } else {
                f.features.push(features);
            }
        }
        Ok(figures)
    }
}

/// The table of one row's figures (Markdown, as the README shows it); with a `mechanism` (the
/// path the campaigns stopped at, `Bench::stop_at_path`), a column of the violations of other
/// paths seen on the way, and under the table where hunt's violations came from.
pub fn table(
    name: &str,
    settings: &Settings,
    figures: &[MethodFigures],
    mechanism: &[Mark],
) -> String {
    let mut out = format!(
        "{name}: {} campaigns of at most {} runs each; features over {} campaigns of {} runs\n",
        settings.campaigns, settings.max_runs, settings.feature_campaigns, settings.feature_runs
    );
    let path = mechanism
        .iter()
        .map(|m| m.name())
        .collect::<Vec<_>>()
        .join(" > ");
    if !mechanism.is_empty() {
        out.push_str(&format!(
            "a campaign stops only at a violation whose run fired {path} in that order\n"
        ));
    }
    out.push('\n');
    let path_column = if mechanism.is_empty() {
        String::new()
    } else {
        " other-path violations seen: runs (campaigns) |".to_string()
    };
    out.push_str(&format!("| search | median runs to a violation | found within budget |{path_column} median features in N runs | verdicts broken |\n"));
    out.push_str(&format!(
        "|---|---|---|{}---|---|\n",
        if mechanism.is_empty() { "" } else { "---|" }
    ));
    for f in figures {
        let median = f
            .median_runs()
            .map_or(format!("> {}", settings.max_runs), |m| format!("{m}"));
        let features = f
            .median_features()
            .map_or("-".to_string(), |m| format!("{m}"));
        let mut broken: Vec<&str> = f
            .campaigns
            .iter()
            .flat_map(|c| c.broken.iter().copied())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if broken.is_empty() {
            broken.push("-");
        }
        let by_path = if mechanism.is_empty() {
            String::new()
        } else {
            let (runs, campaigns) = f.other_violations();
            format!(" {runs} ({campaigns}) |")
        };
        out.push_str(&format!(
            "| {} | {median} | {}/{} |{by_path} {features} | {} |\n",
            f.method.name(),
            f.found(),
            f.campaigns.len(),
            broken.join(", ")
        ));
    }
    for f in figures {
        let origins = f.origins();
        if matches!(f.method, Method::Hunt | Method::Toward) && !origins.is_empty() {
            let origins: Vec<String> = origins
                .iter()
                .map(|(o, n, runs)| format!("{o} {n} in {runs} runs"))
                .collect();
            out.push_str(&format!(
                "\n{} violations found by: {}\n",
                f.method.name(),
                origins.join(", ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(runs: Option<u64>) -> CampaignResult {
        CampaignResult {
            runs_to_violation: runs,
            broken: Vec::new(),
            found_by: None,
            marks: Vec::new(),
            runs_by_origin: BTreeMap::new(),
            other_violations: 0,
        }
    }

    #[test]
    fn the_median_counts_a_campaign_that_found_nothing_as_past_the_budget() {
        let figures = |runs: &[Option<u64>]| MethodFigures {
            method: Method::Random,
            campaigns: runs.iter().map(|&r| result(r)).collect(),
            features: vec![3, 1, 2],
        };
        assert_eq!(figures(&[Some(4), Some(2), None]).median_runs(), Some(4.0));
        assert_eq!(figures(&[Some(4), None, None]).median_runs(), None);
        assert_eq!(
            figures(&[Some(4), Some(2), None, Some(1)]).median_runs(),
            Some(3.0)
        );
        assert_eq!(figures(&[]).median_features(), Some(2.0));
        assert_eq!(figures(&[Some(1), None]).found(), 1);
    }

    #[test]
    fn the_figures_are_a_function_of_the_settings_whatever_the_jobs() {
        let text = r#"{
          "name": "hunt-bench-unit",
          "description": "the benchmark's unit test: a Redis crash without persistence loses the lock key",
          "source": "sim/src/hunt/bench.rs",
          "seed": 5,
          "duration_ms": 3000,
          "topology": { "masters": 1 },
          "network": { "latency_ms": [1, 5] },
          "scheme": { "name": "set-nx-px-lua", "ttl_ms": 5000 },
          "clients": { "count": 2, "acquisitions": 20, "hold_ms": [200, 400], "think_ms": [0, 20],
                       "acquire_timeout_ms": 1000, "command_timeout_ms": 300 },
          "liveness_window_ms": 800,
          "nemesis": {
            "crash": { "every_ms": [200, 1500], "duration_ms": [10, 50], "nodes": ["redis-1"] }
          }
        }"#;
        let scenario = Scenario::parse(text, "hunt-bench-unit.json").expect("a valid scenario");
        let bench = Bench::new(&scenario, 0).expect("a nemesis");
        let settings = |jobs| Settings {
            campaigns: 2,
            max_runs: 8,
            feature_runs: 2,
            feature_campaigns: 1,
            jobs,
        };
        let one = bench.run(&settings(1), |_, _, _| {}).expect("runs");
        assert_eq!(one, bench.run(&settings(3), |_, _, _| {}).expect("runs"));
        let methods: Vec<Method> = one.iter().map(|f| f.method).collect();
        assert_eq!(methods, Method::ALL);
        for f in &one {
            assert_eq!(f.campaigns.len(), 2);
            assert_eq!(f.features.len(), 1);
            assert!(f.features[0] > 0, "{f:?}");
            for c in &f.campaigns {
                assert!(c.runs_to_violation.is_none_or(|n| (1..=8).contains(&n)));
                assert_eq!(c.runs_to_violation.is_some(), !c.broken.is_empty());
            }
        }
        // A crash of the only Redis every few hundred ms, restarted within 50 ms, loses the key of
        // a hold of 200-400 ms that the other client then takes: found.
        assert!(one.iter().any(|f| f.found() > 0), "{one:?}");
        let table = table("unit", &settings(1), &one, &[]);
        assert!(
            table.contains("| random |") && table.contains("| hunt |"),
            "{table}"
        );
        // Stopping only at a path this world cannot take (no replica to promote): no campaign
        // finds one, every violation is counted as another path's, and the searches go on
        // past them to the budget.
        let promoted = [Mark::PromotedWhileHeld];
        let on_path = Bench::new(&scenario, 0)
            .expect("a nemesis")
            .stop_at_path(&promoted)
            .run(&settings(2), |_, _, _| {})
            .expect("runs");
        for (with_path, without) in on_path.iter().zip(&one) {
            assert_eq!(with_path.found(), 0, "{with_path:?}");
            let (runs, campaigns) = with_path.other_violations();
            assert_eq!(campaigns, without.found(), "{with_path:?}");
            assert!(runs >= campaigns as u64, "{with_path:?}");
        }
        let text = super::table("unit", &settings(2), &on_path, &promoted);
        assert!(
            text.contains("stops only at a violation whose run fired promoted_while_held"),
            "{text}"
        );
        // Directed along a mark this world reaches: a fourth search, as reproducible.
        let toward = [Mark::AcquireGranted, Mark::LockKeyExpired];
        let directed = Bench::new(&scenario, 0).expect("a nemesis").toward(&toward);
        assert_eq!(directed.methods().last(), Some(&Method::Toward));
        let figures = directed.run(&settings(1), |_, _, _| {}).expect("runs");
        assert_eq!(figures.len(), 4);
        assert_eq!(figures[..3], one[..]);
        assert_eq!(
            figures,
            directed.run(&settings(3), |_, _, _| {}).expect("runs")
        );
        let text = super::table("unit", &settings(1), &figures, &[]);
        assert!(text.contains("| hunt --toward |"), "{text}");
    }

    #[test]
    fn a_path_is_its_marks_in_order_with_others_between() {
        use Mark::{PromotedWhileHeld as P, WaitPartiallyAcked as W};
        assert!(took_path(&[W, P], &[W, P]));
        assert!(took_path(&[W, Mark::ReplicaPromoted, P], &[W, P]));
        assert!(!took_path(&[P, W], &[W, P]));
        assert!(!took_path(&[W], &[W, P]));
        assert!(took_path(&[], &[]));
    }
}
