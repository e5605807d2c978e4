//! `locksim check [DIR|FILE...]`: the catalog regression. Runs every scenario over its seeds
//! (every scheme it lists) and compares the verdicts with its `expect` / `expect_some` (and
//! per row `expect_by_scheme` / `expect_some_by_scheme`). `--record` writes what it observed
//! into the `"schemes": "all"` files instead (`cli::record`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use model::result::RunResult;

use crate::cli::batch::{every_run, progress_bar, run_jobs};
use crate::cli::catalog::{load_all, replay_command, scenario_files};
use crate::cli::interrupt;
use crate::scenario::Scenario;
use crate::scenario::expect::Expect;
use crate::scenario::expect::{Mismatch, mismatches};
use crate::scenario::range::SeedRange;

#[derive(clap::Args)]
pub struct Args {
    /// Scenario files or folders of them (default: scenarios/).
    paths: Vec<PathBuf>,
    /// Seeds for every scenario, both ends included (default: each scenario's own `seeds`).
    #[arg(long)]
    seeds: Option<String>,
    /// Parallel jobs (default: every core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Write the observed verdicts of each `"schemes": "all"` scenario into its file as
    /// `expect_by_scheme` / `expect_some_by_scheme` (review them with `git diff`).
    #[arg(long)]
    record: bool,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let seeds = args.seeds.as_deref().map(super::seed_range).transpose()?;
    let scenarios = load_all(&scenario_files(&args.paths)?)?;
    let opts = CheckOptions {
        seeds,
        jobs: super::jobs_or_default(args.jobs),
        progress: true,
    };
    if args.record && seeds.is_some() {
        return Err("--record: records on each scenario's own seeds; leave out --seeds".into());
    }
    interrupt::install();
    let report = check(&scenarios, &opts, interrupt::flag())?;
    if args.record {
        if report.interrupted || !report.errors.is_empty() {
            print!("{}", report.render());
            return Err("--record: nothing written (the check did not finish cleanly)".into());
        }
        for line in super::record::record(&scenarios, &report.results)? {
            println!("{line}");
        }
        return Ok(std::process::ExitCode::SUCCESS);
    }
    print!("{}", report.render());
    Ok(super::exit_code(report.interrupted, !report.passed()))
}

pub struct CheckOptions {
    /// Overrides every scenario's own `seeds`.
    pub seeds: Option<SeedRange>,
    pub jobs: usize,
    pub progress: bool,
}

/// What `check` found.
pub struct CheckReport {
    pub scenarios: usize,
    pub runs: u64,
    /// Each mismatch, with the command that replays its seed.
    pub mismatches: Vec<(Mismatch, Option<String>)>,
    pub errors: Vec<String>,
    pub interrupted: bool,
    /// Scenarios that expect nothing (they only ran).
    pub without_expectations: Vec<String>,
    /// Every run's result by (scenario index, scheme index), in seed order.
    pub results: BTreeMap<(usize, usize), Vec<RunResult>>,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty() && self.errors.is_empty() && !self.interrupted
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for (m, replay) in &self.mismatches {
            let _ = writeln!(out, "  mismatch: {m}");
            if let Some(replay) = replay {
                let _ = writeln!(out, "      reproduce: {replay}");
            }
        }
        for e in &self.errors {
            let _ = writeln!(out, "  error: {e}");
        }
        let note = if self.without_expectations.is_empty() {
            String::new()
        } else {
            format!(
                " ({} without expectations: {})",
                self.without_expectations.len(),
                self.without_expectations.join(", ")
            )
        };
        if self.passed() {
            let _ = writeln!(
                out,
                "check: {} scenarios, {} runs, all expectations met{note}",
                self.scenarios, self.runs
            );
        } else {
            let mut problems = Vec::new();
            if !self.mismatches.is_empty() {
                problems.push(format!("{} expectation(s) not met", self.mismatches.len()));
            }
            if !self.errors.is_empty() {
                problems.push(format!("{} run(s) failed", self.errors.len()));
            }
            if self.interrupted {
                problems.push("interrupted before the end".into());
            }
            let _ = writeln!(
                out,
                "check: FAILED — {} scenarios, {} runs: {}{note}",
                self.scenarios,
                self.runs,
                problems.join(", ")
            );
        }
        out
    }
}

pub fn check(
    scenarios: &[Arc<Scenario>],
    opts: &CheckOptions,
    stop: &AtomicBool,
) -> Result<CheckReport, String> {
    let work = every_run(scenarios, |s| opts.seeds.unwrap_or(s.seeds))?;
    let bar = progress_bar(work.len() as u64, opts.progress);
    let mut results: BTreeMap<(usize, usize), Vec<RunResult>> = BTreeMap::new();
    let mut errors = Vec::new();
    let mut runs = 0;
    run_jobs(work, opts.jobs, stop, |job, output| {
        bar.inc(1);
        match output {
            Ok(output) => {
                runs += 1;
                let si = scenarios
                    .iter()
                    .position(|s| Arc::ptr_eq(s, &job.scenario))
                    .unwrap_or(0);
                results
                    .entry((si, job.scheme))
                    .or_default()
                    .push(output.result);
            }
            Err(e) => errors.push(e),
        }
    });
    bar.finish_and_clear();
    let interrupted = stop.load(Ordering::SeqCst);
    let mut found = Vec::new();
    for rs in results.values_mut() {
        rs.sort_by_key(|r| r.seed);
    }
    for (si, scenario) in scenarios.iter().enumerate() {
        for scheme in 0..scenario.schemes.len() {
            let Some(rs) = results.get(&(si, scheme)) else {
                continue;
            };
            let (expect, expect_some) = scenario.expectations(scheme);
            // `expect_some` needs every seed: an interrupted check judges only `expect`.
            let expect_some = if interrupted {
                Expect::default()
            } else {
                expect_some
            };
            for m in mismatches(&expect, &expect_some, rs) {
                let replay = m.seed.map(|seed| replay_command(scenario, scheme, seed));
                found.push((m, replay));
            }
        }
    }
    Ok(CheckReport {
        scenarios: scenarios.len(),
        runs,
        mismatches: found,
        errors,
        interrupted,
        without_expectations: scenarios
            .iter()
            .filter(|s| !s.expects_anything())
            .map(|s| s.name.clone())
            .collect(),
        results,
    })
}
