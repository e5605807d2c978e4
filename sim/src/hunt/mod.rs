//! `locksim hunt`: a search over fault schedules that learns where the bugs are (issue 33).
//!
//! Each run is one scenario row (one scheme) with a scripted fault schedule and no random
//! nemesis (the schedule is the whole input, and a corpus entry or a failing schedule is a
//! scenario file `locksim run` replays), or the random nemesis's own run, whose injected faults
//! then are its schedule. Inputs come from these places:
//! - fresh inputs, which hunt's sequence contains unchanged: the random nemesis's own runs
//!   (`Origin::Nemesis`: the row with its nemesis, swarm off, on seeds from the first on; the
//!   campaign's first run is the first of them) and swarm draws (`swarm`: each kind of the
//!   scenario's `nemesis` on with p = ½, its rates and durations log-uniform) on a stream of
//!   their own, so that hunt's k-th swarm draw is a swarm-only campaign's k-th run and its j-th
//!   nemesis run the random nemesis's j-th: what hunt learns adds runs between them, never
//!   changes them;
//! - children of corpus entries (`corpus`, `mutate`): a parent drawn by the rarity of its
//!   rarest feature, mutated AFL-style, run on the parent's seed;
//! - prefix branches (moonpool-explorer: branch where a rare mark first fires): when a run
//!   first reaches a mark at time t, children keep its faults before t and redraw the rest.
//!   Runs start their faults in sequence (`faults_in_sequence`, `faults::schedule`), so a
//!   child's run is its parent's up to t, exactly;
//! - anchored insertions (`anchor`): when a run first reaches a feature at time t, children
//!   replay its faults up to t and insert one fault right after, its kind, offset and duration
//!   drawn around the scenario's time scales by what earlier children of the campaign taught.
//!
//! - directed (`directed`, `--toward`): runs that fired more of a path's marks in order are
//!   the parents, and anchor at the last of them they reached.
//!
//! What a run reached (`features`): its marks (`model::marks`), ordered mark pairs, (mark,
//! active fault kind), and the watermark. A run is kept in the corpus when it reaches a
//! feature no earlier run had, or a better watermark. The campaign stops at the first run
//! that breaks a verdict (the caller shrinks it), or when its budget is spent.

pub mod anchor;
pub mod bench;
pub mod bounds;
pub mod corpus;
pub mod directed;
pub mod features;
pub mod mutate;
pub mod swarm;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use model::marks::{self, Hit};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::runner::{Executor, RunOutput, run_with_executor};
use crate::scenario::Scenario;
use crate::scenario::expect::broken_verdicts;
use crate::scenario::faults::Fault;
use crate::scenario::nemesis::NemesisSpec;
use crate::world::history::Budget;
use crate::world::stream_seed;
use anchor::{Anchors, Choice, TimeScales};
use corpus::{Corpus, Entry, Watermark, Watermarks};
use features::Reached;
use swarm::KindDraw;

/// Share of runs that are fresh draws once the corpus has entries.
pub const FRESH_SHARE: f64 = 0.5;

/// Share of runs that are fresh draws when no run reached a new feature in the last
/// [`STALL_RUNS`] runs: the corpus has stalled, new ground comes from elsewhere.
pub const STALLED_FRESH_SHARE: f64 = 0.75;

/// Runs without a new feature after which the corpus counts as stalled.
pub const STALL_RUNS: u64 = 16;

/// Share of the learnt runs (not fresh) that are anchored insertions while anchors wait; the
/// others are mutants.
pub const ANCHOR_SHARE: f64 = 0.5;

/// A run anchors where it reached a feature at most this many runs of the campaign reached
/// (itself included): 1, only the features it was the first to reach. Anchoring at features
/// reached twice too measured worse (scripts/hunt-bench.sh rows: WAIT class 67 runs, 16/20,
/// against 51.5, 18/20; the re-sent acquire class 3 of its first 12 campaigns found): more
/// anchors, each with less of the campaign's runs.
pub const RARE_HITS: u64 = 1;

/// Share of hunt's fresh inputs that are the random nemesis's own runs (the first run always
/// is) before either source has paid; the others are swarm draws. Each source's share is
/// then weighted by what its runs reached ([`FreshSources`]).
pub const NEMESIS_SHARE: f64 = 0.25;

/// Share of mutated runs whose parent is the entry with the best of a watermark (one of the
/// three, drawn evenly: they steer before the first violation); the others are drawn by
/// rarity.
pub const WATERMARK_SHARE: f64 = 0.25;

/// Share of the learnt runs (not fresh) that are queued prefix children while some wait.
pub const PREFIX_SHARE: f64 = 0.33;

/// Prefix children kept waiting; past it the oldest go.
pub const MAX_QUEUED: usize = 32;

/// Prefix children queued for each mark a run reaches first.
pub const PREFIX_CHILDREN: usize = 2;

/// Inputs drawn per round: a round's inputs are all drawn before any of them runs, so that
/// `--jobs N` runs them in parallel and learns from them in order, and a campaign is the same
/// whatever N is.
pub const ROUND: usize = 4;

/// One run with marks on: the run (on a thread of its own, whose thread-local marks record
/// only this run) and its hits in order.
/// Marks change nothing of the run: its trace hash is the one `runner::run` gives.
pub fn run_marked(scenario: &Arc<Scenario>, seed: u64) -> Result<(RunOutput, Vec<Hit>), String> {
    let scenario = scenario.clone();
    let path = scenario.path.clone();
    std::thread::Builder::new()
        .name(format!("hunt-{seed}"))
        .spawn(move || {
            let executor = Executor {
                start: Box::new(|world| marks::start(world.time.reader())),
                ..Executor::simulated()
            };
            let output = run_with_executor(&scenario, 0, seed, Budget::DEFAULT, executor);
            let hits = marks::stop();
            output.map(|o| (o, hits))
        })
        .map_err(|e| format!("cannot start a simulation thread: {e}"))?
        .join()
        .map_err(|_| format!("{path}: the simulation of seed {seed} panicked"))?
}

/// What a campaign searches: one scheme row of a scenario, and the kinds its nemesis lists.
pub struct Target {
    /// The row (one scheme, index 0), its nemesis removed: runs set its faults.
    pub row: Scenario,
    /// The row with its nemesis, swarm off: the random nemesis's own runs, which hunt's
    /// sequence contains (`Origin::Nemesis`) and the benchmark's `random` search runs.
    pub random_row: Arc<Scenario>,
    pub nemesis: NemesisSpec,
    pub heal_at_ms: u64,
    /// The scheme's lease (`None`: lease-less), for the grant-validity watermark.
    pub lease_ms: Option<u64>,
    /// Where an anchored insertion draws its offsets and durations.
    pub scales: TimeScales,
    judges_fairness: bool,
}

impl Target {
    /// Scheme row `scheme` of `scenario`, which must have a `nemesis` (the kinds to draw).
    pub fn new(scenario: &Scenario, scheme: usize) -> Result<Target, String> {
        let mut row = scenario.for_scheme(scheme);
        row.schemes = vec![scenario.schemes[scheme].clone()];
        let mut random_row = row.clone();
        if let Some(nemesis) = random_row.nemesis.as_mut() {
            nemesis.swarm = false;
        }
        let Some(nemesis) = row.nemesis.take() else {
            return Err(format!(
                "{}: hunt draws its faults from the scenario's `nemesis` (the kinds, their ranges and nodes): the file has none",
                scenario.path
            ));
        };
        let heal_at_ms = scenario.heal_at_ms(&scenario.schemes[scheme]);
        row.schemes = vec![scenario.schemes[scheme].clone()];
        row.faults.clear();
        // A prefix branch's run then replays its parent's up to the branch point.
        row.faults_in_sequence = true;
        let judges_fairness = row.judges_fairness();
        let scheme_spec = &row.schemes[0];
        let lease_ms = (scheme_spec.lease() != model::locks::Lease::None
            && scheme_spec.ttl_ms() > 0)
            .then(|| scheme_spec.ttl_ms());
        let scales = TimeScales::of(&row, lease_ms);
        Ok(Target {
            row,
            random_row: Arc::new(random_row),
            nemesis,
            heal_at_ms,
            lease_ms,
            scales,
            judges_fairness,
        })
    }

    /// The row with `faults` as its scripted faults.
    pub fn with_faults(&self, faults: &[Fault]) -> Arc<Scenario> {
        let mut row = self.row.clone();
        row.faults = faults.to_vec();
        Arc::new(row)
    }

    /// Runs `faults` on `seed`: what it reached and the verdicts it broke.
    pub fn try_schedule(&self, faults: &[Fault], seed: u64) -> Result<Trial, String> {
        let (output, hits) = run_marked(&self.with_faults(faults), seed)?;
        let broken = broken_verdicts(&output.result, self.judges_fairness);
        Ok(Trial {
            reached: features::reached(&hits, &output.events, self.lease_ms),
            broken,
            trace_hash: output.result.trace_hash,
            events: output.events,
        })
    }

    /// The random nemesis's own run of `seed` (every kind on, as `locksim sweep` runs it with
    /// swarm off): what it reached, and the faults it injected as a scripted schedule (cut at
    /// the heal, as it cut them), which the corpus keeps and children branch from.
    pub fn try_nemesis(&self, seed: u64) -> Result<(Vec<Fault>, Trial), String> {
        let (output, hits) = run_marked(&self.random_row, seed)?;
        let mut faults: Vec<Fault> = output
            .nemesis_faults
            .iter()
            .map(|f| crate::faults::nemesis::as_scripted(f, self.heal_at_ms))
            .collect();
        swarm::sort_by_time(&mut faults);
        let broken = broken_verdicts(&output.result, self.judges_fairness);
        let trial = Trial {
            reached: features::reached(&hits, &output.events, self.lease_ms),
            broken,
            trace_hash: output.result.trace_hash,
            events: output.events,
        };
        Ok((faults, trial))
    }

    /// A child of `faults` branching at `t_us`: the faults that fired up to then (`at_ms` up to
    /// t, and the triggered ones, as they are), the rest redrawn after t. With
    /// `faults_in_sequence` its run is its parent's up to t.
    pub fn prefix_child(&self, faults: &[Fault], t_us: u64, rng: &mut ChaCha8Rng) -> Vec<Fault> {
        let t_ms = t_us / 1000;
        let mut child: Vec<Fault> = faults
            .iter()
            .filter(|f| swarm::at_ms(f) <= t_ms)
            .cloned()
            .collect();
        let kinds = swarm::draw_kinds(&self.nemesis, rng);
        child.extend(swarm::draw_schedule(&kinds, t_ms, self.heal_at_ms, rng));
        child.truncate(swarm::MAX_FAULTS);
        child
    }

    /// Every kind of the nemesis, each at log-uniformly drawn means (what `add a fault` and
    /// `redraw a fault` draw from).
    fn all_kinds(&self, rng: &mut ChaCha8Rng) -> Vec<KindDraw> {
        self.nemesis
            .kinds
            .iter()
            .map(|kind| KindDraw {
                kind: kind.clone(),
                mean_every_ms: swarm::log_uniform(rng, kind.every_ms),
                mean_duration_ms: kind.duration_ms.map(|r| swarm::log_uniform(rng, r)),
                uniform: false,
            })
            .collect()
    }
}

/// One run's outcome.
pub struct Trial {
    pub reached: Reached,
    pub broken: Vec<&'static str>,
    pub trace_hash: String,
    /// The run's trace (who held the lock when an anchor is set).
    pub events: Vec<model::history::Event>,
}

/// How long a campaign may search.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_runs: u64,
    pub budget: Option<Duration>,
}

/// How a campaign chooses its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// Swarm draws, the corpus, mutations and prefix branches: `locksim hunt`.
    Guided,
    /// Fresh swarm draws only, nothing learnt (the benchmark's "swarm").
    SwarmOnly,
}

/// Where a campaign stands (printed as progress).
#[derive(Clone, Debug, Default)]
pub struct Progress {
    pub runs: u64,
    pub features: usize,
    pub corpus: usize,
    /// The best of each watermark so far (`features::Reached`).
    pub least_write_margin_ms: Option<i64>,
    pub least_grant_validity_ms: Option<i64>,
    pub largest_failover_lag_ms: Option<i64>,
    /// Violating runs that did not take the campaign's path (`Campaign::stop_at_path`): learnt
    /// from as any other run, counted.
    pub other_violations: u64,
    /// Directed (`--toward`): the furthest progress along the path and its length.
    pub toward: Option<(usize, usize)>,
}

impl Progress {
    pub fn line(&self) -> String {
        let ms = |m: Option<i64>| m.map_or("-".to_string(), |m| format!("{m} ms"));
        let toward = self
            .toward
            .map_or(String::new(), |(k, n)| format!(" · path {k}/{n}"));
        format!(
            "runs {}{toward} · features {} · corpus {} · least write margin {} · least validity at a grant {} · largest failover lag {}",
            self.runs,
            self.features,
            self.corpus,
            ms(self.least_write_margin_ms),
            ms(self.least_grant_validity_ms),
            ms(self.largest_failover_lag_ms),
        )
    }

    /// Takes a run's watermarks; whether any is better than the best so far.
    fn improve(&mut self, reached: &Reached) -> bool {
        let mut better = false;
        let mut take = |best: &mut Option<i64>, run: Option<i64>, lower_is_better: bool| {
            if let Some(run) = run
                && best.is_none_or(|b| if lower_is_better { run < b } else { run > b })
            {
                *best = Some(run);
                better = true;
            }
        };
        take(
            &mut self.least_write_margin_ms,
            reached.least_write_margin_ms,
            true,
        );
        take(
            &mut self.least_grant_validity_ms,
            reached.least_grant_validity_ms,
            true,
        );
        take(
            &mut self.largest_failover_lag_ms,
            reached.largest_failover_lag_ms,
            false,
        );
        better
    }
}

/// A schedule that broke verdicts.
pub struct Found {
    pub faults: Vec<Fault>,
    pub seed: u64,
    pub broken: Vec<&'static str>,
    /// Where the input came from.
    pub origin: Origin,
    /// The features its run reached that no run before it had.
    pub first_reached: Vec<String>,
    /// The marks its run fired, in the order of their first hits (which path it took).
    pub marks: Vec<model::marks::Mark>,
}

/// Where an input came from (what found a violation tells whether the learning helped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A swarm draw.
    Swarm,
    /// The random nemesis's own run of a seed (swarm off).
    Nemesis,
    /// A mutated corpus entry.
    Mutant,
    /// A prefix branch of a run that reached a new mark.
    Prefix,
    /// A fault inserted right after the point a run first reached a feature.
    Anchored,
    /// A corpus entry of an earlier campaign (`--resume`).
    Resumed,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Swarm => "a swarm draw",
            Origin::Nemesis => "a random nemesis run",
            Origin::Mutant => "a mutant",
            Origin::Prefix => "a prefix branch",
            Origin::Anchored => "an anchored insertion",
            Origin::Resumed => "a resumed entry",
        }
    }
}

/// One run of a campaign: where its input came from, its seed and its trace hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tried {
    pub origin: Origin,
    pub seed: u64,
    pub trace_hash: String,
}

/// The end of a campaign.
pub struct Outcome {
    pub progress: Progress,
    pub found: Option<Found>,
    pub corpus: Corpus,
    /// Every run, in order.
    pub tried: Vec<Tried>,
}

/// A campaign: the search state.
pub struct Campaign<'a> {
    target: &'a Target,
    /// The fresh swarm draws' stream, and only theirs: hunt's k-th swarm draw is the k-th run
    /// of a swarm-only campaign of the same seed (same schedule, same seed), so that what hunt
    /// learns only adds runs to swarm's sequence, never changes it.
    rng: ChaCha8Rng,
    /// Every other draw of the campaign: which generator gives the next input, and the
    /// children's faults.
    learn_rng: ChaCha8Rng,
    /// Seed of the next random nemesis run (`Origin::Nemesis`): hunt's j-th such run is the
    /// random nemesis's own run of the j-th seed, as `locksim sweep` runs it.
    next_nemesis_seed: u64,
    pub corpus: Corpus,
    /// Prefix children waiting to run: (faults, seed).
    queue: Vec<(Vec<Fault>, u64)>,
    /// Points to insert a fault after, and what their children taught.
    anchors: Anchors,
    /// Runs since one reached a feature no run before it had.
    runs_since_new: u64,
    progress: Progress,
    /// Seed of the next fresh swarm draw.
    next_seed: u64,
    search: Search,
    /// Whether the campaign ends at the first violating run (otherwise that run is learnt
    /// from as any other: the benchmark's feature count over a fixed number of runs).
    stop_at_violation: bool,
    /// The path a violation must take to end the campaign (`stop_at_path`); empty: any.
    path: Vec<model::marks::Mark>,
    /// Parallel runs per round.
    jobs: usize,
    /// Every run so far, in order.
    tried: Vec<Tried>,
    /// What the two fresh sources' runs reached.
    fresh: FreshSources,
    /// `--toward`'s path (`directed`); empty: a blind search.
    toward: Vec<model::marks::Mark>,
    /// The furthest progress a run made along it.
    furthest: usize,
}

/// The two sources of fresh inputs, the random nemesis's own runs and swarm draws, each with
/// its successes (a run that reached a feature no run had, or a violation on the path) and
/// tries. Which pays depends on the scenario: a bug that needs every kind of fault at once is
/// out of most swarm draws' reach (each kind on with p = ½), one that a kind masks is out of
/// the nemesis's. Each source's sequence is unchanged (its own stream, its own seeds): only how
/// many runs each gets is learnt.
#[derive(Clone, Copy, Debug, Default)]
struct FreshSources {
    nemesis: (u64, u64),
    swarm: (u64, u64),
}

impl FreshSources {
    /// The share of fresh inputs that are nemesis runs: [`NEMESIS_SHARE`] weighted by each
    /// source's (successes + 1) / (tries + 2).
    fn nemesis_share(&self) -> f64 {
        let weight = |(wins, tries): (u64, u64)| (wins as f64 + 1.0) / (tries as f64 + 2.0);
        let nemesis = NEMESIS_SHARE * weight(self.nemesis);
        let swarm = (1.0 - NEMESIS_SHARE) * weight(self.swarm);
        nemesis / (nemesis + swarm)
    }

    fn credit(&mut self, origin: Origin, success: bool) {
        let source = match origin {
            Origin::Nemesis => &mut self.nemesis,
            Origin::Swarm => &mut self.swarm,
            _ => return,
        };
        source.0 += u64::from(success);
        source.1 += 1;
    }
}

impl<'a> Campaign<'a> {
    /// A campaign on `target`, its own draws from `campaign_seed`, its fresh runs on seeds
    /// from the scenario's `seed` on.
    pub fn new(target: &'a Target, campaign_seed: u64) -> Campaign<'a> {
        Campaign {
            target,
            rng: ChaCha8Rng::seed_from_u64(stream_seed(campaign_seed, "hunt")),
            learn_rng: ChaCha8Rng::seed_from_u64(stream_seed(campaign_seed, "hunt/learnt")),
            next_nemesis_seed: target.row.seed,
            corpus: Corpus::default(),
            queue: Vec::new(),
            anchors: Anchors::default(),
            runs_since_new: 0,
            progress: Progress::default(),
            next_seed: target.row.seed,
            search: Search::Guided,
            stop_at_violation: true,
            path: Vec::new(),
            jobs: 1,
            tried: Vec::new(),
            fresh: FreshSources::default(),
            toward: Vec::new(),
            furthest: 0,
        }
    }

    /// Directs the search along `path` (`directed`): parents and anchors favour the runs that
    /// fired more of its marks in order, anchors sit at the last of them a run reached.
    pub fn toward(mut self, path: &[model::marks::Mark]) -> Self {
        self.toward = path.to_vec();
        self
    }

    /// Fresh runs on seeds from `seed` on (the benchmark gives each campaign its own seeds).
    pub fn first_seed(mut self, seed: u64) -> Self {
        self.next_seed = seed;
        self.next_nemesis_seed = seed;
        self
    }

    pub fn search(mut self, search: Search) -> Self {
        self.search = search;
        self
    }

    /// Keep searching after a violating run (it is learnt from as any other).
    pub fn past_violations(mut self) -> Self {
        self.stop_at_violation = false;
        self
    }

    /// Only a violation whose run fired the marks `path` in that order (`bench::took_path`)
    /// is found and ends the campaign; any other is counted (`Progress::other_violations`)
    /// and learnt from as any run. A class's benchmark measures the bug it is named after,
    /// not whichever other bug its faults also reach.
    pub fn stop_at_path(mut self, path: &[model::marks::Mark]) -> Self {
        self.path = path.to_vec();
        self
    }

    /// Runs up to `jobs` inputs of a round at once; the campaign is the same for every value.
    pub fn jobs(mut self, jobs: usize) -> Self {
        self.jobs = jobs.max(1);
        self
    }

    /// Counts an entry that an earlier campaign kept (`--resume`): it is run again, as it
    /// is deterministic, to count its features.
    pub fn resume_with(&mut self, faults: Vec<Fault>, seed: u64) -> Result<Option<Found>, String> {
        self.next_seed = self.next_seed.max(seed.saturating_add(1));
        let faults = bounds::confine(&faults, &self.target.nemesis, self.target.heal_at_ms);
        let trial = self.target.try_schedule(&faults, seed)?;
        Ok(self.learn(
            Input {
                faults,
                seed,
                origin: Origin::Resumed,
                choice: None,
            },
            trial,
            true,
        ))
    }

    /// The next input, within the nemesis's bounds (`bounds`): whatever a generator drew
    /// is confined to the schedules the random nemesis could have drawn.
    fn next_input(&mut self) -> Input {
        let mut input = self.draw_input();
        input.faults = bounds::confine(&input.faults, &self.target.nemesis, self.target.heal_at_ms);
        input
    }

    /// The next fresh swarm draw: each kind on with p = ½, on the next fresh seed, from the
    /// fresh stream only (a swarm-only campaign's sequence).
    fn swarm_draw(&mut self) -> Input {
        let seed = self.next_seed;
        self.next_seed += 1;
        let kinds = swarm::draw_kinds(&self.target.nemesis, &mut self.rng);
        Input {
            faults: swarm::draw_schedule(&kinds, 0, self.target.heal_at_ms, &mut self.rng),
            seed,
            origin: Origin::Swarm,
            choice: None,
        }
    }

    /// The random nemesis's own run of the next nemesis seed; its faults are known once it
    /// has run (`Target::try_nemesis`).
    fn nemesis_run(&mut self) -> Input {
        let seed = self.next_nemesis_seed;
        self.next_nemesis_seed += 1;
        Input {
            faults: Vec::new(),
            seed,
            origin: Origin::Nemesis,
            choice: None,
        }
    }

    /// A random nemesis run, a fresh swarm draw, a queued prefix child, an anchored insertion
    /// or a mutated corpus entry, as drawn.
    fn draw_input(&mut self) -> Input {
        let heal_at_ms = self.target.heal_at_ms;
        if self.search == Search::SwarmOnly {
            return self.swarm_draw();
        }
        // The campaign's first run is the random nemesis's own run of its first seed: where one
        // fault of the scenario's own shape breaks a verdict at once, hunt is as fast.
        if self.next_nemesis_seed == self.next_seed && self.progress.runs == 0 {
            return self.nemesis_run();
        }
        // Directed, with an anchor on the path: most runs branch there.
        let on_path = self.anchors.furthest() > 0;
        let fresh_share = if on_path {
            directed::DIRECTED_FRESH_SHARE
        } else if self.runs_since_new >= STALL_RUNS {
            STALLED_FRESH_SHARE
        } else {
            FRESH_SHARE
        };
        if self.corpus.entries.is_empty() || self.learn_rng.gen_bool(fresh_share) {
            return if self.learn_rng.gen_bool(self.fresh.nemesis_share()) {
                self.nemesis_run()
            } else {
                self.swarm_draw()
            };
        }
        if self.learn_rng.gen_bool(PREFIX_SHARE)
            && let Some((faults, seed)) = self.queue.pop()
        {
            return Input {
                faults,
                seed,
                origin: Origin::Prefix,
                choice: None,
            };
        }
        let anchor_share = if on_path {
            directed::DIRECTED_ANCHOR_SHARE
        } else {
            ANCHOR_SHARE
        };
        let hits = &self.corpus.hits;
        let mark_hits = |mark: model::marks::Mark| {
            hits.get(&format!("m:{}", mark.name()))
                .copied()
                .unwrap_or(1)
        };
        if !self.anchors.is_empty()
            && self.learn_rng.gen_bool(anchor_share)
            && let Some((faults, seed, choice)) = {
                let furthest = on_path && self.learn_rng.gen_bool(directed::FURTHEST_ANCHOR_SHARE);
                self.anchors.child(
                    &self.target.nemesis,
                    &self.target.scales,
                    heal_at_ms,
                    furthest,
                    &mark_hits,
                    &mut self.learn_rng,
                )
            }
        {
            return Input {
                faults,
                seed,
                origin: Origin::Anchored,
                choice: Some(choice),
            };
        }
        let kinds = self.target.all_kinds(&mut self.learn_rng);
        let by_watermark = self.learn_rng.gen_bool(WATERMARK_SHARE);
        let watermark = Watermark::ALL[self.learn_rng.gen_range(0..Watermark::ALL.len())];
        let furthest =
            !self.toward.is_empty() && self.learn_rng.gen_bool(directed::FURTHEST_PARENT_SHARE);
        let parent = furthest
            .then(|| self.corpus.choose_furthest(&mut self.learn_rng))
            .flatten()
            .or_else(|| {
                by_watermark
                    .then(|| self.corpus.best_by(watermark))
                    .flatten()
            })
            .or_else(|| self.corpus.choose(&mut self.learn_rng))
            .cloned()
            .expect("not empty");
        let other = self
            .corpus
            .any(&mut self.learn_rng)
            .map(|e| e.faults.clone())
            .unwrap_or_default();
        let child = mutate::mutate(
            &parent.faults,
            &other,
            &kinds,
            heal_at_ms,
            &mut self.learn_rng,
        );
        Input {
            faults: child,
            seed: parent.seed,
            origin: Origin::Mutant,
            choice: None,
        }
    }

    /// Learns from one run: counts its features, keeps it when it reached something new, queues
    /// its prefix children; the violation when it broke a verdict on the campaign's path.
    fn learn(&mut self, input: Input, trial: Trial, keep: bool) -> Option<Found> {
        let Input {
            faults,
            seed,
            origin,
            choice,
        } = input;
        self.progress.runs += 1;
        self.tried.push(Tried {
            origin,
            seed,
            trace_hash: trial.trace_hash.clone(),
        });
        let new = self.corpus.count(&trial.reached.features);
        self.runs_since_new = if new.is_empty() {
            self.runs_since_new + 1
        } else {
            0
        };
        let marks = trial.reached.marks_in_order();
        let on_path = bench::took_path(&marks, &self.path);
        if !trial.broken.is_empty() && !on_path {
            self.progress.other_violations += 1;
        }
        let (progress, last_on_path) = directed::progress(&trial.reached, &self.toward);
        let further = progress > self.furthest;
        // A violation of another path is no success for the path searched.
        let success = !new.is_empty() || (!trial.broken.is_empty() && on_path);
        if let Some(choice) = &choice {
            // Directed: a child succeeds when it went further along the path than its anchor.
            let child_success = if self.toward.is_empty() {
                success
            } else {
                progress > choice.anchor_progress || (!trial.broken.is_empty() && on_path)
            };
            self.anchors.prior.credit(choice, child_success);
        }
        self.fresh.credit(origin, success);
        let found = (!trial.broken.is_empty() && on_path).then(|| Found {
            faults: faults.clone(),
            seed,
            broken: trial.broken.clone(),
            origin,
            first_reached: new.clone(),
            marks,
        });
        if found.is_some() && self.stop_at_violation {
            self.progress.features = self.corpus.hits.len();
            return found;
        }
        let better_watermark = self.progress.improve(&trial.reached);
        let learns = self.search == Search::Guided;
        // A random nemesis run's faults, replayed as a scripted schedule, do not replay its
        // trace (madsim's scheduling draws differ without the nemesis's tasks, as `shrink`
        // reports): its times are no branch points. Its schedule is still a parent for mutants.
        let replays = origin != Origin::Nemesis;
        if learns && replays && progress > 0 && progress >= self.furthest {
            let last = last_on_path.expect("progress along the path");
            self.anchors.add_on_path(
                &faults,
                seed,
                last,
                progress,
                &trial.events,
                self.target.heal_at_ms,
            );
        }
        self.furthest = self.furthest.max(progress);
        if !self.toward.is_empty() {
            self.progress.toward = Some((self.furthest, self.toward.len()));
        }
        if learns && replays {
            let reached_at: Vec<(model::marks::Mark, u64)> = trial
                .reached
                .first_at
                .iter()
                .filter(|(f, _)| self.corpus.hits.get(*f).is_some_and(|&n| n <= RARE_HITS))
                .map(|(_, at)| *at)
                .collect();
            self.anchors.add(
                &faults,
                seed,
                &reached_at,
                &trial.events,
                self.target.heal_at_ms,
            );
        }
        if learns && (keep || !new.is_empty() || better_watermark || further) {
            if replays {
                self.branch_prefixes(&faults, seed, &new, &trial.reached);
            }
            let watermarks = Watermarks::of(&trial.reached);
            self.corpus.entries.push(Entry {
                faults,
                seed,
                features: trial.reached.features,
                watermarks,
                progress,
            });
        }
        self.progress.features = self.corpus.hits.len();
        self.progress.corpus = self.corpus.entries.len();
        found
    }

    /// Queues children that keep the faults before each newly reached mark's first time and
    /// redraw the rest.
    fn branch_prefixes(&mut self, faults: &[Fault], seed: u64, new: &[String], reached: &Reached) {
        let new: BTreeSet<&str> = new.iter().filter_map(|f| f.strip_prefix("m:")).collect();
        for (mark, t_us) in &reached.first_us {
            if !new.contains(mark.name()) {
                continue;
            }
            for _ in 0..PREFIX_CHILDREN {
                let child = self.target.prefix_child(faults, *t_us, &mut self.learn_rng);
                self.queue.push((child, seed));
                let over = self.queue.len().saturating_sub(MAX_QUEUED);
                self.queue.drain(..over);
            }
        }
    }

    /// Searches until a run breaks a verdict or the limits are reached; `report` is called
    /// after every run.
    pub fn run(
        mut self,
        limits: Limits,
        mut report: impl FnMut(&Progress),
    ) -> Result<Outcome, String> {
        let start = Instant::now();
        let mut found = None;
        'rounds: while self.progress.runs < limits.max_runs
            && limits.budget.is_none_or(|b| start.elapsed() < b)
        {
            let left = limits.max_runs - self.progress.runs;
            let mut inputs: Vec<Input> = (0..left.min(ROUND as u64))
                .map(|_| self.next_input())
                .collect();
            let trials = run_all(self.target, &mut inputs, self.jobs)?;
            for (input, trial) in inputs.into_iter().zip(trials) {
                let this = self.learn(input, trial, false);
                report(&self.progress);
                if this.is_some() && found.is_none() {
                    found = this;
                    if self.stop_at_violation {
                        break 'rounds;
                    }
                }
            }
        }
        Ok(Outcome {
            progress: self.progress,
            found,
            corpus: self.corpus,
            tried: self.tried,
        })
    }
}

/// One input of a campaign: a schedule, the seed it runs on, where it came from.
struct Input {
    faults: Vec<Fault>,
    seed: u64,
    origin: Origin,
    /// An anchored insertion's arms, credited when its run is learnt from.
    choice: Option<Choice>,
}

/// A run's trial, and for a random nemesis run the faults it injected.
type Ran = (Option<Vec<Fault>>, Trial);

/// Runs one input: a random nemesis run (its faults, known now, filled in) or a schedule.
fn run_input(target: &Target, input: &Input) -> Result<Ran, String> {
    if input.origin == Origin::Nemesis {
        let (faults, trial) = target.try_nemesis(input.seed)?;
        return Ok((Some(faults), trial));
    }
    Ok((None, target.try_schedule(&input.faults, input.seed)?))
}

/// Runs `inputs` on `target`, up to `jobs` at once; the trials in the inputs' order (a random
/// nemesis run's input gets the faults it injected).
fn run_all(target: &Target, inputs: &mut [Input], jobs: usize) -> Result<Vec<Trial>, String> {
    let mut ran: Vec<Ran> = Vec::with_capacity(inputs.len());
    if jobs <= 1 || inputs.len() <= 1 {
        for input in inputs.iter() {
            ran.push(run_input(target, input)?);
        }
    } else {
        for chunk in inputs.chunks(jobs) {
            let chunk_ran: Vec<Result<Ran, String>> = std::thread::scope(|scope| {
                let handles: Vec<_> = chunk
                    .iter()
                    .map(|i| scope.spawn(move || run_input(target, i)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err("a hunt run's thread panicked".to_string()))
                    })
                    .collect()
            });
            for r in chunk_ran {
                ran.push(r?);
            }
        }
    }
    let mut trials = Vec::with_capacity(ran.len());
    for (input, (faults, trial)) in inputs.iter_mut().zip(ran) {
        if let Some(faults) = faults {
            input.faults = faults;
        }
        trials.push(trial);
    }
    Ok(trials)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::run;
    use crate::scenario::faults::FaultKind;

    /// A small row: two clients, set-nx-px-lua with a long TTL, short pauses and a Redis
    /// crash drawn by hunt.
    fn target() -> Target {
        let text = r#"{
          "name": "hunt-unit",
          "description": "hunt's unit tests",
          "source": "sim/src/hunt/mod.rs",
          "seed": 3,
          "duration_ms": 4000,
          "topology": { "masters": 1 },
          "network": { "latency_ms": [1, 5] },
          "scheme": { "name": "set-nx-px-lua", "ttl_ms": 5000 },
          "clients": { "count": 2, "acquisitions": 20, "hold_ms": [10, 40], "think_ms": [0, 20],
                       "acquire_timeout_ms": 1000, "command_timeout_ms": 300 },
          "liveness_window_ms": 1000,
          "nemesis": {
            "pause": { "every_ms": [100, 1500], "duration_ms": [10, 400], "nodes": ["client-1", "client-2"] },
            "crash": { "every_ms": [500, 3000], "duration_ms": [10, 500], "nodes": ["redis-1"] }
          }
        }"#;
        let scenario = Scenario::parse(text, "hunt-unit.json").expect("a valid scenario");
        Target::new(&scenario, 0).expect("a nemesis")
    }

    #[test]
    fn the_fresh_source_that_pays_gets_more_of_the_fresh_runs() {
        let mut fresh = FreshSources::default();
        assert!((fresh.nemesis_share() - NEMESIS_SHARE).abs() < 1e-9);
        for _ in 0..20 {
            fresh.credit(Origin::Nemesis, true);
            fresh.credit(Origin::Swarm, false);
        }
        assert!(fresh.nemesis_share() > 0.85, "{fresh:?}");
        // Other origins are not fresh draws: they change nothing.
        let before = fresh.nemesis_share();
        fresh.credit(Origin::Anchored, true);
        fresh.credit(Origin::Mutant, false);
        assert_eq!(fresh.nemesis_share(), before);
        let mut fresh = FreshSources::default();
        for _ in 0..20 {
            fresh.credit(Origin::Nemesis, false);
            fresh.credit(Origin::Swarm, true);
        }
        assert!(fresh.nemesis_share() < 0.05, "{fresh:?}");
    }

    #[test]
    fn marks_leave_the_trace_as_it_was() {
        let target = target();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut marked_runs = 0;
        for seed in 0..3 {
            let kinds = swarm::draw_kinds(&target.nemesis, &mut rng);
            let faults = swarm::draw_schedule(&kinds, 0, target.heal_at_ms, &mut rng);
            let scenario = target.with_faults(&faults);
            let plain = run(&scenario, 0, seed).expect("runs");
            let (marked, hits) = run_marked(&scenario, seed).expect("runs");
            assert_eq!(plain.result.trace_hash, marked.result.trace_hash);
            assert!(hits.windows(2).all(|w| w[0].t_us <= w[1].t_us));
            marked_runs += usize::from(!hits.is_empty());
        }
        assert!(marked_runs > 0, "no run fired a mark");
        // Off again: a plain run on this thread records nothing.
        assert!(marks::stop().is_empty());
    }

    /// A prefix child's trace is its parent's up to the branch point; run with a waiting task
    /// per fault from the start (not in sequence), the same schedules part before it.
    #[test]
    fn a_prefix_child_replays_its_parent_up_to_the_branch_point() {
        let target = target();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (mut branched, mut parted_without_sequence) = (0, 0);
        for seed in 0..4 {
            let kinds = swarm::nemesis_kinds(&target.nemesis);
            let parent = swarm::draw_schedule(&kinds, 0, target.heal_at_ms, &mut rng);
            let (parent_run, hits) = run_marked(&target.with_faults(&parent), seed).expect("runs");
            // A mark about halfway to the heal: a prefix with faults, a tail to redraw.
            let Some(t_us) = hits
                .iter()
                .map(|h| h.t_us)
                .rfind(|&t| t < target.heal_at_ms * 500)
            else {
                continue;
            };
            let child = target.prefix_child(&parent, t_us, &mut rng);
            assert_ne!(child, parent, "seed {seed}: the tail was not redrawn");
            let before = |events: &[model::history::Event]| -> Vec<model::history::Event> {
                events.iter().filter(|e| e.t_us < t_us).cloned().collect()
            };
            let child_run = run(&target.with_faults(&child), 0, seed).expect("runs");
            assert!(!before(&parent_run.events).is_empty());
            assert_eq!(
                before(&parent_run.events),
                before(&child_run.events),
                "seed {seed}: the child's run left its parent's before {t_us} µs"
            );
            branched += 1;
            let unsequenced = |faults: &[Fault]| {
                let mut row = (*target.with_faults(faults)).clone();
                row.faults_in_sequence = false;
                run(&Arc::new(row), 0, seed).expect("runs").events
            };
            if before(&unsequenced(&parent)) != before(&unsequenced(&child)) {
                parted_without_sequence += 1;
            }
        }
        assert!(
            branched >= 2,
            "only {branched} runs had a mark to branch at"
        );
        assert!(
            parted_without_sequence > 0,
            "the prefixes matched without faults_in_sequence too: the test shows nothing"
        );
    }

    /// Hunt's sequence holds swarm's and the random nemesis's unchanged: its swarm draws are a
    /// swarm-only campaign's runs in order (same seeds, same traces), its nemesis runs the
    /// random nemesis's own runs of consecutive seeds (as `locksim sweep` runs them, swarm off),
    /// its first run the first of them; learnt inputs only come between.
    #[test]
    fn hunt_holds_the_swarm_and_the_nemesis_sequences_unchanged() {
        let target = target();
        let limits = Limits {
            max_runs: 24,
            budget: None,
        };
        let hunt = Campaign::new(&target, 4)
            .past_violations()
            .run(limits, |_| {})
            .expect("runs");
        let swarm = Campaign::new(&target, 4)
            .search(Search::SwarmOnly)
            .past_violations()
            .run(limits, |_| {})
            .expect("runs");
        assert_eq!(hunt.tried.len(), 24);
        assert_eq!(hunt.tried[0].origin, Origin::Nemesis);
        assert_eq!(hunt.tried[0].seed, target.row.seed);
        let of =
            |origin| -> Vec<&Tried> { hunt.tried.iter().filter(|t| t.origin == origin).collect() };
        let (hunt_swarm, nemesis) = (of(Origin::Swarm), of(Origin::Nemesis));
        assert!(hunt_swarm.len() >= 3, "{:?}", hunt.tried);
        assert!(hunt_swarm.len() < swarm.tried.len());
        for (k, (h, s)) in hunt_swarm.iter().zip(&swarm.tried).enumerate() {
            assert_eq!(*h, s, "hunt's swarm draw {k} is not swarm's run {k}");
        }
        assert!(nemesis.len() >= 2, "{:?}", hunt.tried);
        for (j, t) in nemesis.iter().enumerate() {
            assert_eq!(t.seed, target.row.seed + j as u64);
            let plain = run(&target.random_row, 0, t.seed).expect("runs");
            assert_eq!(plain.result.trace_hash, t.trace_hash, "nemesis run {j}");
        }
        assert!(
            hunt.tried.len() > hunt_swarm.len() + nemesis.len(),
            "no learnt input ran: the test shows nothing"
        );
    }

    /// A random nemesis run's schedule does not replay its trace: a parent, never an anchor
    /// or a prefix branch point.
    #[test]
    fn a_random_nemesis_run_is_kept_but_not_branched_at() {
        let target = target();
        let mut campaign = Campaign::new(&target, 2);
        let mut inputs = vec![campaign.next_input()];
        assert_eq!(inputs[0].origin, Origin::Nemesis);
        let trials = run_all(&target, &mut inputs, 1).expect("runs");
        let input = inputs.pop().expect("one input");
        assert!(
            !input.faults.is_empty(),
            "the nemesis injected nothing: the test shows nothing"
        );
        let trial = trials.into_iter().next().expect("one trial");
        assert!(!trial.reached.first_us.is_empty(), "no mark fired");
        campaign.learn(input, trial, true);
        assert_eq!(campaign.corpus.entries.len(), 1);
        assert!(campaign.anchors.is_empty());
        assert!(campaign.queue.is_empty());
    }

    #[test]
    fn a_campaign_is_a_function_of_its_seed() {
        let target = target();
        let limits = Limits {
            max_runs: 6,
            budget: None,
        };
        let campaign = |seed, jobs| {
            let outcome = Campaign::new(&target, seed)
                .jobs(jobs)
                .run(limits, |_| {})
                .expect("runs");
            let entries: Vec<(Vec<Fault>, u64, BTreeSet<String>)> = outcome
                .corpus
                .entries
                .iter()
                .map(|e| (e.faults.clone(), e.seed, e.features.clone()))
                .collect();
            (
                outcome.progress.runs,
                outcome.found.map(|f| (f.faults, f.seed)),
                entries,
            )
        };
        let first = campaign(11, 1);
        assert_eq!(first, campaign(11, 1));
        // Parallel runs learn in the same order: the same campaign.
        assert_eq!(first, campaign(11, 3));
        assert!(first.0 >= 1);
    }

    #[test]
    fn a_found_schedule_breaks_the_same_verdicts_when_run_alone() {
        let target = target();
        let limits = Limits {
            max_runs: 60,
            budget: None,
        };
        let outcome = Campaign::new(&target, 1).run(limits, |_| {}).expect("runs");
        let found = outcome
            .found
            .expect("a Redis crash without persistence loses the lock key within 60 runs");
        // A random nemesis run fails as the row with its nemesis (what `hunt` writes for it,
        // to be shrunk); any other input as its scripted schedule.
        let alone = if found.origin == Origin::Nemesis {
            run(&target.random_row, 0, found.seed)
        } else {
            run(&target.with_faults(&found.faults), 0, found.seed)
        }
        .expect("runs");
        assert_eq!(
            broken_verdicts(&alone.result, target.judges_fairness),
            found.broken
        );
    }

    #[test]
    fn a_fault_triggered_on_a_grant_names_the_holders_master() {
        let target = target();
        let crash_after_grant = Fault {
            kind: FaultKind::Crash {
                node: crate::scenario::faults::placeholder::HOLDER_MASTER.into(),
                restart_after_ms: Some(300),
            },
            when: crate::scenario::faults::When::On {
                event: "acquired".into(),
                node: None,
                nth: 2,
                command: None,
                after_ms: 1,
            },
            duration_ms: None,
        };
        let output = run(&target.with_faults(&[crash_after_grant]), 0, 3).expect("runs");
        let crashed = output.events.iter().any(|e| {
            e.node == "redis-1"
                && matches!(&e.kind, model::history::EventKind::Fault { fault, .. } if fault == "crash")
        });
        assert!(crashed, "the crash after the second grant never fired");
    }
}
