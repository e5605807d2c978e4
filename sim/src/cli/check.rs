//! `locksim check [DIR|FILE...]`: the catalog regression. Runs every scenario over its seeds
//! (every scheme it lists) and compares the verdicts with its `expect` / `expect_some` (and
//! per row `expect_by_scheme` / `expect_some_by_scheme`). `--junit FILE` writes the same as
//! JUnit XML. With `--shard I/N` it runs and judges one shard (`expect` only: `expect_some`
//! needs every seed); `--out DIR` keeps its results for `locksim report --check`, which
//! judges both over all shards. `--record` writes what it observed into the `"schemes": "all"`
//! files instead (`cli::record`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use model::result::RunResult;

use reports::junit::Case;

use crate::cli::artifacts::write_file;
use crate::cli::batch::{Job, every_run, progress_bar, run_jobs};
use crate::cli::catalog::{
    load_all, replay_command, scenario_files, scheme_labels, scheme_spec_json,
};
use crate::cli::interrupt;
use crate::cli::results::{Line, Manifest, write_batch};
use crate::cli::shard::Shard;
use crate::runner::jobs_for;
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
    /// Parallel jobs (default and most: every core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Only shard I of N of the (scenario, scheme, seed) runs (`I/N`, or `env/N` in a
    /// Kubernetes Indexed Job).
    #[arg(long)]
    shard: Option<String>,
    /// Write results.jsonl and run.json into DIR, for `locksim report`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the verdicts as JUnit XML to FILE (one testcase per scenario × scheme).
    #[arg(long)]
    junit: Option<PathBuf>,
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
        jobs: jobs_for(args.jobs),
        shard: Shard::from_arg(args.shard.as_deref())?,
        progress: true,
    };
    if args.record && seeds.is_some() {
        return Err("--record: records on each scenario's own seeds; leave out --seeds".into());
    }
    if args.record && (opts.shard.is_some() || args.out.is_some() || args.junit.is_some()) {
        return Err(
            "--record: records every seed of each scenario into its file; leave out --shard, --out and --junit".into(),
        );
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
    if let Some(dir) = &args.out {
        write_batch(
            dir,
            report.results.iter().flat_map(|(&(si, k), rs)| {
                let scenario = &scenarios[si];
                rs.iter().map(move |result| Line {
                    result,
                    scheme_spec: scheme_spec_json(scenario, k),
                    scenario_file: &scenario.path,
                })
            }),
            &report.manifest(&opts),
        )?;
    }
    if let Some(path) = &args.junit {
        write_file(path, report.junit())?;
    }
    print!("{}", report.render());
    Ok(super::exit_code(report.interrupted, !report.passed()))
}

pub struct CheckOptions {
    /// Overrides every scenario's own `seeds`.
    pub seeds: Option<SeedRange>,
    pub jobs: usize,
    /// Only this shard of the runs.
    pub shard: Option<Shard>,
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
    /// Every scenario × scheme judged: (scenario, scheme label, runs, its mismatches as a
    /// range of `mismatches`), in catalog order.
    pub cases: Vec<(String, String, u64, std::ops::Range<usize>)>,
    /// Every run's result by (scenario index, scheme index), in seed order.
    pub results: BTreeMap<(usize, usize), Vec<RunResult>>,
    /// The runs planned (this shard's, with `--shard`).
    pub planned: u64,
    pub shard: Option<Shard>,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty() && self.errors.is_empty() && !self.interrupted
    }

    /// The verdicts as JUnit XML: a testcase per scenario × scheme, each mismatch and its
    /// replay command in its failure.
    pub fn junit(&self) -> String {
        let cases: Vec<Case> = self
            .cases
            .iter()
            .map(|(scenario, scheme, runs, found)| Case {
                classname: scenario.clone(),
                name: scheme.clone(),
                runs: *runs,
                failures: self.mismatches[found.clone()]
                    .iter()
                    .map(|(m, replay)| match replay {
                        Some(replay) => format!("{m}\n  reproduce: {replay}"),
                        None => m.to_string(),
                    })
                    .collect(),
            })
            .collect();
        let mut errors = self.errors.clone();
        if self.interrupted {
            errors
                .push("interrupted before the end: only the runs that finished were judged".into());
        }
        reports::junit::render("locksim check", &cases, &errors)
    }

    /// `run.json` for `--out`.
    pub fn manifest(&self, opts: &CheckOptions) -> Manifest {
        Manifest {
            command: "check".into(),
            shard: self.shard,
            seed_policy: match opts.seeds {
                Some(seeds) => format!("{seeds} for every scenario"),
                None => "each scenario's own seed range".into(),
            },
            runs_planned: self.planned,
            runs_done: self.runs,
            interrupted: self.interrupted,
            errors: self.errors.clone(),
        }
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
        if let Some(shard) = self.shard {
            let _ = writeln!(
                out,
                "  shard {shard}: {} of the runs; expect_some is judged over every shard by `locksim report --check`",
                self.planned
            );
        }
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
    let work: Vec<_> = every_run(scenarios, |s| opts.seeds.unwrap_or(s.seeds))?
        .into_iter()
        .filter(|job| {
            opts.shard.is_none_or(|shard| {
                let label = job.scenario.schemes[job.scheme].label();
                shard.holds(&job.scenario.name, &label, job.seed)
            })
        })
        .collect();
    let planned = work.len() as u64;
    let bar = progress_bar(work.len() as u64, opts.progress);
    let mut results: BTreeMap<(usize, usize), Vec<RunResult>> = BTreeMap::new();
    let mut errors = Vec::new();
    let mut runs = 0;
    run_jobs(
        work,
        opts.jobs,
        || stop.load(Ordering::SeqCst),
        Job::run_summary,
        |job, output| {
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
        },
    );
    bar.finish_and_clear();
    let interrupted = stop.load(Ordering::SeqCst);
    let mut found = Vec::new();
    let mut cases = Vec::new();
    for rs in results.values_mut() {
        rs.sort_by_key(|r| r.seed);
    }
    for (si, scenario) in scenarios.iter().enumerate() {
        for (scheme, label) in scheme_labels(scenario).into_iter().enumerate() {
            let Some(rs) = results.get(&(si, scheme)) else {
                continue;
            };
            let (expect, expect_some) = scenario.expectations(scheme);
            // `expect_some` needs every seed: an interrupted or sharded check judges only
            // `expect`.
            let expect_some = if interrupted || opts.shard.is_some() {
                Expect::default()
            } else {
                expect_some
            };
            let before = found.len();
            for m in mismatches(&expect, &expect_some, rs) {
                let replay = m.seed.map(|seed| replay_command(scenario, scheme, seed));
                found.push((m, replay));
            }
            cases.push((
                scenario.name.clone(),
                label,
                rs.len() as u64,
                before..found.len(),
            ));
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
        cases,
        results,
        planned,
        shard: opts.shard,
    })
}
