//! Many runs across scenarios, schemes and seeds on N worker threads, for `sweep`, `compare`
//! and `check`. Like `runner::run_parallel` (each worker's seeds run on its simulation thread
//! via `runner::run` or `runner::run_summary`), but the work may span several scenarios and a stop
//! flag (Ctrl-C) keeps workers from starting new runs; the runs in progress finish and are
//! reported.

use std::sync::Arc;

use crate::runner::{RunOutput, RunSummary, on_workers, run_keeping_events, run_summary};
use crate::scenario::Scenario;
use crate::scenario::limits::MAX_RUNS;
use crate::scenario::range::SeedRange;

/// One run to do.
#[derive(Clone)]
pub struct Job {
    pub scenario: Arc<Scenario>,
    pub scheme: usize,
    pub seed: u64,
}

impl Job {
    /// The run with its events only when it violates a property (`compare`: the first failing
    /// run of a cell is written with its trace), the others' freed where they were made.
    pub fn run_keeping_violating(&self) -> Result<RunOutput, String> {
        run_keeping_events(
            &self.scenario,
            self.scheme,
            self.seed,
            reports::summary::is_violating,
        )
    }

    /// The run's result only, its events freed where they were made (`check`, `sweep`).
    pub fn run_summary(&self) -> Result<RunSummary, String> {
        run_summary(&self.scenario, self.scheme, self.seed)
    }
}

/// Refuses more than [`MAX_RUNS`] runs in one command, before they are listed.
pub fn within_run_limit(runs: u64) -> Result<(), String> {
    if runs > MAX_RUNS {
        return Err(format!(
            "{runs} runs (scenarios × schemes × seeds) in one command (limit {MAX_RUNS}): narrow --seeds, --scheme or the scenarios"
        ));
    }
    Ok(())
}

/// Every scheme of every scenario on each of its seeds, in that order.
pub fn every_run(
    scenarios: &[Arc<Scenario>],
    seeds_for: impl Fn(&Scenario) -> SeedRange,
) -> Result<Vec<Job>, String> {
    within_run_limit(
        scenarios
            .iter()
            .map(|s| s.schemes.len() as u64 * seeds_for(s).len())
            .sum(),
    )?;
    let mut work = Vec::new();
    for scenario in scenarios {
        let seeds = seeds_for(scenario);
        for scheme in 0..scenario.schemes.len() {
            for seed in seeds.iter() {
                work.push(Job {
                    scenario: scenario.clone(),
                    scheme,
                    seed,
                });
            }
        }
    }
    Ok(work)
}

/// Runs `work` on `jobs` threads, calling `on_done` in the caller's thread as each run finishes
/// (completion order). Stops taking new work once `stop()` says so (see `runner::on_workers`).
pub fn run_jobs<T: Send>(
    work: impl IntoIterator<Item = Job, IntoIter: Send>,
    jobs: usize,
    stop: impl Fn() -> bool + Sync,
    run_one: fn(&Job) -> Result<T, String>,
    mut on_done: impl FnMut(&Job, Result<T, String>),
) {
    on_workers(work, jobs, stop, run_one, |job, output| {
        on_done(&job, output)
    });
}

/// A progress bar on stderr when it is a terminal, hidden otherwise (pipes, CI, tests).
pub fn progress_bar(total: u64, show: bool) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !show || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:40.cyan/blue}] {pos}/{len} runs ({per_sec}, eta {eta}) {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
