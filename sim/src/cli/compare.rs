//! `locksim compare [DIR|FILE...]`: every scenario × every scheme it lists × its seeds, into one
//! report folder: `index.html` (self-contained), `report.md`, `summary.json`, `charts/*.svg`,
//! and for each cell with failures its first failing seed under
//! `runs/<scenario>/<scheme>/seed-<N>/` (`result.json`, `trace.jsonl`, `timeline.svg`); the
//! runs themselves in `results.jsonl` and `run.json`. With `--shard I/N` only that shard's runs,
//! and only `results.jsonl` and `run.json`: `locksim report` merges the shards through the
//! same [`report`] that `compare` ends with.
//!
//! Seeds: by default each scenario's own `seeds` range — the one its expectations are checked
//! on, chosen per file to fit the budget (the matrix's scripted worst cases 10 seeds, its
//! random-rate columns 20, the catalog mostly 20): the whole catalog and matrix take about
//! as long on two cores as 100 seeds of the catalog alone did. `--seeds A..B` runs that range
//! on every scenario, `--seeds-per-scenario K` K seeds from each scenario's first.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use model::locks::{Family, Lease};
use model::result::RunResult;
use reports::charts::ChartSet;
use reports::summary::{
    Cell, CellStats, MatrixColumn, MatrixRow, ScenarioInfo, SchemeStats, Summary, is_violating,
};

use crate::cli::artifacts::{path_component, write_file, write_run};
use crate::cli::batch::{Job, every_run, progress_bar, run_jobs};
use crate::cli::catalog::{
    load_all, replay_command, scenario_files, scheme_labels, scheme_spec_json,
};
use crate::cli::interrupt;
use crate::cli::results::{Line, Manifest, RESULTS, write_batch};
use crate::cli::shard::Shard;
use crate::runner::RunOutput;
use crate::runner::jobs_for;
use crate::scenario::Scenario;
use crate::scenario::expect::Expect;
use crate::scenario::expect::{broken, mismatches};
use crate::scenario::limits::MAX_SEEDS;
use crate::scenario::range::SeedRange;

#[derive(clap::Args)]
pub struct Args {
    /// Scenario files or folders of them (default: scenarios/).
    paths: Vec<PathBuf>,
    /// Seeds for every scenario, both ends included (default: each scenario's own `seeds`).
    #[arg(long)]
    seeds: Option<String>,
    /// Without --seeds: this many seeds from each scenario's first (0: its own `seeds`, the
    /// default).
    #[arg(long, default_value_t = 0)]
    seeds_per_scenario: u64,
    /// Parallel jobs (default and most: every core).
    #[arg(long)]
    jobs: Option<usize>,
    /// The report folder.
    #[arg(long, default_value = DEFAULT_OUT)]
    out: PathBuf,
    /// Only shard I of N of the (scenario, scheme, seed) runs (`I/N`, or `env/N` in a
    /// Kubernetes Indexed Job): writes results.jsonl and run.json to --out, no report;
    /// `locksim report` merges the shards.
    #[arg(long)]
    shard: Option<String>,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let seeds = args.seeds.as_deref().map(super::seed_range).transpose()?;
    if args.seeds_per_scenario > MAX_SEEDS {
        return Err(format!(
            "--seeds-per-scenario: {} seeds (limit {MAX_SEEDS} in one range)",
            args.seeds_per_scenario
        ));
    }
    let scenarios = load_all(&scenario_files(&args.paths)?)?;
    let opts = CompareOptions {
        seeds,
        seeds_per_scenario: args.seeds_per_scenario,
        jobs: jobs_for(args.jobs),
        out: args.out,
        shard: Shard::from_arg(args.shard.as_deref())?,
        progress: true,
    };
    interrupt::install();
    if opts.shard.is_some() {
        let finished = run_all(&scenarios, &opts, interrupt::flag())?;
        let manifest = opts.manifest(&finished);
        write_results(&scenarios, &finished, &manifest, &opts.out)?;
        print!("{}", shard_text(&manifest, &opts.out));
        return Ok(super::exit_code(
            finished.interrupted,
            !finished.errors.is_empty(),
        ));
    }
    let summary = compare(&scenarios, &opts, interrupt::flag())?;
    print!("{}", summary_text(&summary, &opts.out));
    Ok(super::exit_code(
        summary.interrupted,
        !summary.errors.is_empty(),
    ))
}

/// The default report folder.
pub const DEFAULT_OUT: &str = "report";

pub struct CompareOptions {
    /// Overrides every scenario's own range.
    pub seeds: Option<SeedRange>,
    /// Without `seeds`: this many seeds from each scenario's first (0 = its own range).
    pub seeds_per_scenario: u64,
    pub jobs: usize,
    pub out: PathBuf,
    /// Only this shard of the runs.
    pub shard: Option<Shard>,
    pub progress: bool,
}

impl CompareOptions {
    /// `run.json` for what `run_all` did with these options.
    pub fn manifest(&self, finished: &Finished) -> Manifest {
        Manifest {
            command: "compare".into(),
            shard: self.shard,
            seed_policy: self.policy(),
            runs_planned: finished.planned,
            runs_done: finished.results.values().map(|rs| rs.len() as u64).sum(),
            interrupted: finished.interrupted,
            errors: finished.errors.clone(),
        }
    }

    /// The seeds one scenario runs.
    pub fn seeds_for(&self, scenario: &Scenario) -> SeedRange {
        match self.seeds {
            Some(seeds) => seeds,
            None if self.seeds_per_scenario > 0 => SeedRange {
                first: scenario.seeds.first,
                last: scenario
                    .seeds
                    .first
                    .saturating_add(self.seeds_per_scenario - 1),
            },
            None => scenario.seeds,
        }
    }

    fn policy(&self) -> String {
        match (self.seeds, self.seeds_per_scenario) {
            (Some(seeds), _) => format!("{seeds} for every scenario"),
            (None, 0) => {
                "each scenario's own seed range (--seeds A..B or --seeds-per-scenario K for others)"
                    .into()
            }
            (None, k) => format!("{k} seeds from each scenario's first"),
        }
    }
}

/// The runs of a comparison (or of one shard of it) as they finished.
pub struct Finished {
    /// (scenario index, scheme index) → its results, sorted by seed.
    pub results: BTreeMap<(usize, usize), Vec<RunResult>>,
    /// The lowest violating seed's full output per cell (for its timeline).
    pub first_failing: BTreeMap<(usize, usize), RunOutput>,
    pub errors: Vec<String>,
    pub interrupted: bool,
    pub planned: u64,
}

/// Runs every (scenario, scheme, seed) of `opts` (its shard only, with `--shard`).
pub fn run_all(
    scenarios: &[Arc<Scenario>],
    opts: &CompareOptions,
    stop: &AtomicBool,
) -> Result<Finished, String> {
    let labels: Vec<Vec<String>> = scenarios
        .iter()
        .map(|s| s.schemes.iter().map(|spec| spec.label()).collect())
        .collect();
    let index_of: BTreeMap<String, usize> = scenarios
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), i))
        .collect();
    let work: Vec<_> = every_run(scenarios, |s| opts.seeds_for(s))?
        .into_iter()
        .filter(|job| {
            opts.shard.is_none_or(|shard| {
                let si = index_of[&job.scenario.name];
                shard.holds(&job.scenario.name, &labels[si][job.scheme], job.seed)
            })
        })
        .collect();
    let planned = work.len() as u64;
    let bar = progress_bar(planned, opts.progress);
    let mut results: BTreeMap<(usize, usize), Vec<RunResult>> = BTreeMap::new();
    let mut first_failing: BTreeMap<(usize, usize), RunOutput> = BTreeMap::new();
    let mut errors = Vec::new();
    let mut violating = 0;
    run_jobs(
        work,
        opts.jobs,
        || stop.load(Ordering::SeqCst),
        Job::run_keeping_violating,
        |job, output| {
            bar.inc(1);
            let key = (index_of[&job.scenario.name], job.scheme);
            match output {
                Ok(output) => {
                    if is_violating(&output.result) {
                        violating += 1;
                        bar.set_message(format!("{violating} violating"));
                        let lower = first_failing
                            .get(&key)
                            .is_none_or(|o| output.result.seed < o.result.seed);
                        if lower {
                            first_failing.insert(
                                key,
                                RunOutput {
                                    result: output.result.clone(),
                                    ..output
                                },
                            );
                        }
                    }
                    results.entry(key).or_default().push(output.result);
                }
                Err(e) => errors.push(e),
            }
        },
    );
    bar.finish_and_clear();
    for rs in results.values_mut() {
        rs.sort_by_key(|r| r.seed);
    }
    Ok(Finished {
        results,
        first_failing,
        errors,
        interrupted: stop.load(Ordering::SeqCst),
        planned,
    })
}

/// Writes `results.jsonl` (cell by cell, seed by seed) and `run.json` for `locksim report`.
pub fn write_results(
    scenarios: &[Arc<Scenario>],
    finished: &Finished,
    manifest: &Manifest,
    out: &Path,
) -> Result<(), String> {
    let lines = finished.results.iter().flat_map(|(&(si, k), rs)| {
        rs.iter().map(move |result| Line {
            result,
            scheme_spec: scheme_spec_json(&scenarios[si], k),
            scenario_file: &scenarios[si].path,
        })
    });
    write_batch(out, lines, manifest)
}

/// Runs the comparison and writes the report (and `results.jsonl`); returns its summary.
pub fn compare(
    scenarios: &[Arc<Scenario>],
    opts: &CompareOptions,
    stop: &AtomicBool,
) -> Result<Summary, String> {
    let start = std::time::Instant::now();
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| format!("{}: cannot create: {e}", opts.out.display()))?;
    let mut finished = run_all(scenarios, opts, stop)?;
    write_results(scenarios, &finished, &opts.manifest(&finished), &opts.out)?;
    let mut first_failing = std::mem::take(&mut finished.first_failing);
    report(
        ReportInput {
            scenarios,
            seeds_for: &|s| opts.seeds_for(s),
            seed_policy: opts.policy(),
            results: finished.results,
            errors: finished.errors,
            interrupted: finished.interrupted,
            start,
        },
        &opts.out,
        |si, k, seed| match first_failing.remove(&(si, k)) {
            Some(output) if output.result.seed == seed => Ok(output),
            _ => crate::runner::run(&scenarios[si], k, seed),
        },
    )
}

/// What a report is made from: the scenarios, which seeds each was to run, and the results.
pub struct ReportInput<'a> {
    pub scenarios: &'a [Arc<Scenario>],
    pub seeds_for: &'a dyn Fn(&Scenario) -> SeedRange,
    pub seed_policy: String,
    /// (scenario index, scheme index) → its results, sorted by seed.
    pub results: BTreeMap<(usize, usize), Vec<RunResult>>,
    pub errors: Vec<String>,
    pub interrupted: bool,
    pub start: std::time::Instant,
}

/// Results + scenarios → [`Summary`] → the report folder (`compare` and `report` both end
/// here): each cell's counts and expectation mismatches, its first failing seed's artifacts
/// (`first_failing(scenario, scheme, seed)` gives that run's full output), the scheme totals,
/// and `index.html`, `report.md`, `summary.json`, `charts/`. `expect` is judged on the seeds
/// of the scenario's own range that ran (what it promises), `expect_some` only when all of
/// them ran.
pub fn report(
    input: ReportInput,
    out: &Path,
    mut first_failing: impl FnMut(usize, usize, u64) -> Result<RunOutput, String>,
) -> Result<Summary, String> {
    let ReportInput {
        scenarios,
        seeds_for,
        seed_policy,
        mut results,
        errors,
        interrupted,
        start,
    } = input;
    let mut schemes: Vec<String> = Vec::new();
    let mut cells = Vec::new();
    let mut by_scheme: BTreeMap<String, (Vec<RunResult>, u64)> = BTreeMap::new();
    for (si, scenario) in scenarios.iter().enumerate() {
        let labels = scheme_labels(scenario);
        let own = scenario.seeds;
        for (k, label) in labels.iter().enumerate() {
            if !schemes.contains(label) {
                schemes.push(label.clone());
            }
            let rs = results.remove(&(si, k)).unwrap_or_default();
            let stats = CellStats::from_results(&scenario.name, label, &rs);
            let in_range: Vec<RunResult> = rs
                .iter()
                .filter(|r| (own.first..=own.last).contains(&r.seed))
                .cloned()
                .collect();
            // `expect_some` is about the scenario's own range: judge it only on all of it.
            let whole_range = in_range.len() as u64 == own.len();
            let (expect, expect_some) = scenario.expectations(k);
            let expect_some = if whole_range {
                expect_some
            } else {
                Expect::default()
            };
            let found = if in_range.is_empty() {
                Vec::new()
            } else {
                mismatches(&expect, &expect_some, &in_range)
            };
            let mut cell = Cell {
                stats,
                mismatches: found.iter().map(|m| m.to_string()).collect(),
                timeline: None,
                replay: None,
                expect_broken_seeds: scenario.incident.is_some().then(|| {
                    rs.iter()
                        .filter(|r| broken(&scenario.expect, r))
                        .map(|r| r.seed)
                        .collect()
                }),
            };
            if let Some(seed) = cell.stats.first_failing_seed {
                let output = first_failing(si, k, seed)?;
                let rel = format!(
                    "runs/{}/{}/seed-{seed}",
                    path_component(&scenario.name),
                    path_component(label),
                );
                write_run(&out.join(&rel), &scenario.for_scheme(k), &output)?;
                cell.timeline = Some(format!("{rel}/timeline.svg"));
                cell.replay = Some(replay_command(scenario, k, seed));
            }
            let entry = by_scheme.entry(label.clone()).or_default();
            entry.0.extend(rs);
            entry.1 += 1;
            cells.push(cell);
        }
    }
    let scheme_totals = schemes
        .iter()
        .map(|label| {
            let (rs, n) = &by_scheme[label];
            SchemeStats::from_results(label, *n, rs.iter())
        })
        .collect();
    let summary = Summary {
        seed_policy,
        interrupted,
        runs: cells.iter().map(|c| c.stats.seeds_run).sum(),
        wall_s: (start.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        scenarios: scenarios
            .iter()
            .map(|s| ScenarioInfo {
                name: s.name.clone(),
                file: s.path.clone(),
                description: s.description.clone(),
                source: s.source.clone(),
                seeds: seeds_for(s).to_string(),
                clients: s.owner_names().len() as u64,
                incident: s.incident.clone(),
                matrix: matrix_column(s),
            })
            .collect(),
        matrix_rows: matrix_rows(scenarios),
        schemes,
        cells,
        scheme_totals,
        errors,
    };
    write_report(out, &summary)?;
    Ok(summary)
}

/// A `"schemes": "all"` scenario's column of the fault matrix (its `matrix` header, or its
/// name under "other").
fn matrix_column(scenario: &Scenario) -> Option<MatrixColumn> {
    scenario.all_schemes.then(|| {
        let (column, family) = match &scenario.matrix {
            Some(m) => (m.column.clone(), m.family.clone()),
            None => (scenario.name.clone(), "other".to_string()),
        };
        MatrixColumn {
            column,
            family,
            random: scenario.nemesis.is_some(),
        }
    })
}

/// The fault matrix's rows: every row of the `"schemes": "all"` scenarios, grouped by family.
fn matrix_rows(scenarios: &[Arc<Scenario>]) -> Vec<MatrixRow> {
    let mut rows: Vec<(Family, MatrixRow)> = Vec::new();
    for scenario in scenarios.iter().filter(|s| s.all_schemes) {
        for spec in &scenario.schemes {
            let label = spec.label();
            if rows.iter().any(|(_, r)| r.scheme == label) {
                continue;
            }
            let family = spec.info().map_or(Family::SetNxPx, |i| i.family);
            rows.push((
                family,
                MatrixRow {
                    scheme: label,
                    family: family.title().to_string(),
                    lease: spec.lease() != Lease::None,
                },
            ));
        }
    }
    rows.sort_by_key(|(family, _)| *family);
    rows.into_iter().map(|(_, row)| row).collect()
}

/// Writes `index.html`, `report.md`, `summary.json` and `charts/*.svg` into `out`.
pub fn write_report(out: &Path, summary: &Summary) -> Result<(), String> {
    let charts = ChartSet::render(summary);
    for chart in &charts.charts {
        write_file(&out.join("charts").join(chart.file), &chart.svg)?;
    }
    write_file(
        &out.join("summary.json"),
        serde_json::to_string_pretty(summary).expect("summaries serialise") + "\n",
    )?;
    write_file(
        &out.join("report.md"),
        reports::markdown::render(summary, &charts),
    )?;
    write_file(
        &out.join("index.html"),
        reports::html::render(summary, &charts),
    )
}

/// What a sharded `compare` or `check` prints: its share, and how to merge the shards.
pub fn shard_text(manifest: &Manifest, out: &Path) -> String {
    let shard = manifest.shard.map(|s| s.to_string()).unwrap_or_default();
    let mut text = format!(
        "{} shard {shard}: {} of {} run(s) done, results in {}\n",
        manifest.command,
        manifest.runs_done,
        manifest.runs_planned,
        out.join(RESULTS).display()
    );
    for e in &manifest.errors {
        let _ = writeln!(text, "  error: {e}");
    }
    let _ = writeln!(
        text,
        "merge every shard's folder into one report: {}",
        crate::cli::invocation::command("report DIR...")
    );
    text
}

/// What `compare` prints: one line per cell, then where the report is.
pub fn summary_text(summary: &Summary, out: &Path) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "compare: {}", summary.headline());
    if summary.interrupted {
        let _ = writeln!(
            text,
            "  interrupted: the report covers the runs that finished"
        );
    }
    let width = summary
        .cells
        .iter()
        .map(|c| c.stats.scenario.len() + c.stats.scheme.len() + 3)
        .max()
        .unwrap_or(0);
    for cell in &summary.cells {
        let s = &cell.stats;
        let name = format!("{} × {}", s.scenario, s.scheme);
        let _ = write!(
            text,
            "  {name:<width$}  {:>3}/{:<3} violating  {:<9}",
            s.seeds_violating,
            s.seeds_run,
            s.outcome.as_str()
        );
        if let Some(seed) = s.first_failing_seed {
            let _ = write!(text, "  first failing seed {seed}");
        }
        if !cell.mismatches.is_empty() {
            let _ = write!(text, "  ({} unexpected)", cell.mismatches.len());
        }
        let end = text.trim_end().len();
        text.truncate(end);
        text.push('\n');
    }
    for e in &summary.errors {
        let _ = writeln!(text, "  error: {e}");
    }
    let _ = writeln!(
        text,
        "wrote {0}/index.html, {0}/report.md, {0}/summary.json",
        out.display()
    );
    text
}
