//! `locksim report DIR|results.jsonl...`: merges the results of shards (`compare --shard`,
//! `check --shard --out`, `sweep --shard`) into one report, the same `index.html`, `report.md`
//! and `summary.json` as `compare` (through `compare::report`).
//!
//! The scenarios come from the files the results name (`scenario_file` of each line) or from
//! `--scenarios`; each result is matched to its scenario by name and to its scheme by its
//! `scheme_spec`. The first failing seed of each cell runs again for its timeline, and must
//! give the trace hash its shard recorded (else the binary or the scenario changed since).
//! With `run.json` manifests of sharded runs, every shard 0..N must be there and complete,
//! else the report is marked partial and says which shards are missing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use model::result::RunResult;

use crate::cli::catalog::{load_all, scenario_files, scheme_spec_json, sort_as_folder_walk};
use crate::cli::compare::{ReportInput, report, summary_text};
use crate::cli::results::{MANIFEST, Manifest, RESULTS, StoredLine, read_lines, read_manifest};
use crate::runner::run;
use crate::scenario::Scenario;
use crate::scenario::range::SeedRange;

#[derive(clap::Args)]
pub struct Args {
    /// Folders with results.jsonl (and run.json), or results.jsonl files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The scenario files or folders the results came from (default: the files the results
    /// name).
    #[arg(long, num_args = 1..)]
    scenarios: Vec<PathBuf>,
    /// The report folder.
    #[arg(long, default_value = crate::cli::compare::DEFAULT_OUT)]
    out: PathBuf,
    /// Exit 1 when an expectation is not met (as `locksim check`).
    #[arg(long)]
    check: bool,
    /// Also write the expectations as JUnit XML to FILE.
    #[arg(long)]
    junit: Option<PathBuf>,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let merged = merge(&args.inputs, &args.scenarios)?;
    let summary = merged.write(&args.out)?;
    print!("{}", summary_text(&summary, &args.out));
    let mismatched = summary.cells.iter().any(|c| !c.mismatches.is_empty());
    if let Some(path) = &args.junit {
        crate::cli::artifacts::write_file(
            path,
            reports::junit::from_summary(&summary, "locksim report"),
        )?;
    }
    let failed = !summary.errors.is_empty() || (args.check && mismatched);
    Ok(super::exit_code(false, failed))
}

/// The inputs read and matched to their scenarios.
pub struct Merged {
    pub scenarios: Vec<Arc<Scenario>>,
    /// (scenario index, scheme index) → results, sorted by seed.
    pub results: BTreeMap<(usize, usize), Vec<RunResult>>,
    pub seed_policy: String,
    /// Runs that failed in the shards, missing or incomplete shards, unreadable lines.
    pub errors: Vec<String>,
    /// Some shard is missing or was interrupted.
    pub partial: bool,
}

/// Reads every input and matches each result to its scenario and scheme.
pub fn merge(inputs: &[PathBuf], scenario_paths: &[PathBuf]) -> Result<Merged, String> {
    let mut lines: Vec<(PathBuf, StoredLine)> = Vec::new();
    let mut manifests: Vec<(PathBuf, Manifest)> = Vec::new();
    let mut errors = Vec::new();
    for input in inputs {
        let (file, dir) = if input.is_dir() {
            (input.join(RESULTS), input.clone())
        } else {
            let dir = input.parent().unwrap_or(Path::new("")).to_path_buf();
            (input.clone(), dir)
        };
        let (read, unreadable) = read_lines(&file)?;
        if unreadable > 0 {
            errors.push(format!(
                "{}: {unreadable} unreadable line(s) left out",
                file.display()
            ));
        }
        lines.extend(read.into_iter().map(|l| (file.clone(), l)));
        if let Some(manifest) = read_manifest(&dir)? {
            manifests.push((dir.join(MANIFEST), manifest));
        }
    }
    let scenarios = if scenario_paths.is_empty() {
        let mut files = BTreeSet::new();
        for (file, line) in &lines {
            let named = line.scenario_file.clone().ok_or_else(|| {
                format!(
                    "{}: a result of {} does not name its scenario file (older than scenario_file): give --scenarios",
                    file.display(),
                    line.result.scenario
                )
            })?;
            files.insert(PathBuf::from(named));
        }
        let mut files: Vec<PathBuf> = files.into_iter().collect();
        sort_as_folder_walk(&mut files);
        load_all(&files)?
    } else {
        load_all(&scenario_files(scenario_paths)?)?
    };
    let results = match_results(&scenarios, lines)?;
    let (seed_policy, partial) = check_shards(&manifests, &mut errors);
    Ok(Merged {
        scenarios,
        results,
        seed_policy,
        errors,
        partial,
    })
}

/// Each result's (scenario, scheme); a run present twice must have the same trace hash.
fn match_results(
    scenarios: &[Arc<Scenario>],
    lines: Vec<(PathBuf, StoredLine)>,
) -> Result<BTreeMap<(usize, usize), Vec<RunResult>>, String> {
    let mut by_run: BTreeMap<(usize, usize, u64), RunResult> = BTreeMap::new();
    for (file, line) in lines {
        let r = line.result;
        let si = scenarios
            .iter()
            .position(|s| s.name == r.scenario)
            .ok_or_else(|| {
                format!(
                    "{}: a result of scenario \"{}\", which none of the scenario files has",
                    file.display(),
                    r.scenario
                )
            })?;
        let scenario = &scenarios[si];
        let k = (0..scenario.schemes.len())
            .find(|&k| match &line.scheme_spec {
                Some(spec) => *spec == scheme_spec_json(scenario, k),
                None => scenario.schemes[k].label() == r.scheme,
            })
            .ok_or_else(|| {
                format!(
                    "{}: {} seed {}: scheme {} is not one of {}'s (the scenario changed since the run?)",
                    file.display(),
                    r.scenario,
                    r.seed,
                    line.scheme_spec
                        .as_ref()
                        .map_or(r.scheme.clone(), |s| s.to_string()),
                    scenario.path
                )
            })?;
        match by_run.get(&(si, k, r.seed)) {
            Some(seen) if seen.trace_hash != r.trace_hash => {
                return Err(format!(
                    "{}: {} [{}] seed {} ran twice with different traces ({} and {}): the inputs come from different binaries or scenarios",
                    file.display(),
                    r.scenario,
                    r.scheme,
                    r.seed,
                    seen.trace_hash,
                    r.trace_hash
                ));
            }
            Some(_) => {}
            None => {
                by_run.insert((si, k, r.seed), r);
            }
        }
    }
    let mut results: BTreeMap<(usize, usize), Vec<RunResult>> = BTreeMap::new();
    for ((si, k, _), r) in by_run {
        results.entry((si, k)).or_default().push(r);
    }
    Ok(results)
}

/// The seed policy the manifests agree on, and whether shards are missing or incomplete
/// (each such problem is added to `errors`).
fn check_shards(manifests: &[(PathBuf, Manifest)], errors: &mut Vec<String>) -> (String, bool) {
    let mut partial = false;
    let mut counts: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for (path, m) in manifests {
        errors.extend(m.errors.iter().cloned());
        if m.interrupted || m.runs_done < m.runs_planned {
            partial = true;
            errors.push(format!(
                "{}: {} of {} runs done{}",
                path.display(),
                m.runs_done,
                m.runs_planned,
                if m.interrupted { " (interrupted)" } else { "" }
            ));
        }
        if let Some(shard) = m.shard {
            counts.entry(shard.count).or_default().insert(shard.index);
        }
    }
    for (count, present) in &counts {
        let missing: Vec<String> = (0..*count)
            .filter(|i| !present.contains(i))
            .map(|i| format!("{i}/{count}"))
            .collect();
        if !missing.is_empty() {
            partial = true;
            errors.push(format!(
                "shard(s) {} missing: their runs are not in this report",
                missing.join(", ")
            ));
        }
    }
    if counts.len() > 1 {
        errors.push(format!(
            "the inputs split the runs in different ways ({} shards): some runs may be missing",
            counts
                .keys()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        partial = true;
    }
    let policies: BTreeSet<&str> = manifests
        .iter()
        .map(|(_, m)| m.seed_policy.as_str())
        .collect();
    let policy = match policies.iter().next() {
        Some(policy) if policies.len() == 1 => policy.to_string(),
        _ => "the seeds the merged results ran".to_string(),
    };
    (policy, partial)
}

impl Merged {
    /// The seeds each scenario ran: from its lowest to its highest merged seed.
    pub fn seeds_for(&self, scenario: &Scenario) -> SeedRange {
        let si = self.scenarios.iter().position(|s| s.name == scenario.name);
        let seeds: Vec<u64> = self
            .results
            .iter()
            .filter(|((s, _), _)| Some(*s) == si)
            .flat_map(|(_, rs)| rs.iter().map(|r| r.seed))
            .collect();
        match (seeds.iter().min(), seeds.iter().max()) {
            (Some(&first), Some(&last)) => SeedRange { first, last },
            _ => scenario.seeds,
        }
    }

    /// Writes the report into `out` (runs each cell's first failing seed again for its
    /// timeline, checking its trace hash).
    pub fn write(self, out: &Path) -> Result<reports::summary::Summary, String> {
        let start = std::time::Instant::now();
        std::fs::create_dir_all(out)
            .map_err(|e| format!("{}: cannot create: {e}", out.display()))?;
        let ranges: Vec<SeedRange> = self.scenarios.iter().map(|s| self.seeds_for(s)).collect();
        let recorded: BTreeMap<(usize, usize, u64), String> = self
            .results
            .iter()
            .flat_map(|(&(si, k), rs)| {
                rs.iter()
                    .map(move |r| ((si, k, r.seed), r.trace_hash.clone()))
            })
            .collect();
        let scenarios = &self.scenarios;
        let seeds_for = |s: &Scenario| {
            scenarios
                .iter()
                .position(|x| x.name == s.name)
                .map_or(s.seeds, |i| ranges[i])
        };
        report(
            ReportInput {
                scenarios,
                seeds_for: &seeds_for,
                seed_policy: self.seed_policy,
                results: self.results,
                errors: self.errors,
                interrupted: self.partial,
                start,
            },
            out,
            |si, k, seed| {
                let output = run(&scenarios[si], k, seed)?;
                let expected = &recorded[&(si, k, seed)];
                if output.result.trace_hash != *expected {
                    return Err(format!(
                        "{} [{}] seed {}: running it again gives trace {}, its shard recorded {expected}: the binary or the scenario changed since",
                        scenarios[si].name, output.result.scheme, seed, output.result.trace_hash
                    ));
                }
                Ok(output)
            },
        )
    }
}
