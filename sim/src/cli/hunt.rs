//! `locksim hunt FILE [--scheme ID] [--budget-s N] [--max-runs N] [--out DIR] [--resume]
//! [--toward MARK,MARK]`: searches fault schedules drawn from the scenario's `nemesis` for one
//! that breaks a verdict (`crate::hunt`; with `--toward`, directed along those marks:
//! `crate::hunt::directed`), printing its progress; at the first such run it writes the failing schedule
//! as a scenario (`DIR/failing.json`) and shrinks it (`locksim shrink`) into one that fails on
//! its own (`DIR/shrunk.json`). The corpus it kept is written to `DIR/corpus/`, one scenario file
//! per entry (each replays with `locksim run`); `--resume` counts those again and continues.
//!
//! Exit code: 0 when a violation was found and written, 1 when the limits were reached first.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Map, Value, json};

use super::artifacts::{path_component, write_file};
use super::catalog::select_one_scheme;
use super::shrink::{DEFAULT_MAX_RUNS, ordered_json, read_object, rebase, row_file, shrink};
use crate::hunt::bench::{Bench, Settings, table};
use crate::hunt::directed::parse_marks;
use crate::hunt::{Campaign, Limits, Origin, Target};
use crate::scenario::Scenario;
use crate::scenario::faults::{Fault, FaultSpec};

#[derive(clap::Args)]
pub struct Args {
    /// The scenario file (JSON); its `nemesis` lists the fault kinds to draw.
    file: PathBuf,
    /// The scheme, for a scenario with a `schemes` list.
    #[arg(long)]
    scheme: Option<String>,
    /// Stop after this many seconds of searching.
    #[arg(long)]
    budget_s: Option<u64>,
    /// Stop after this many runs.
    #[arg(long, default_value_t = 10_000)]
    max_runs: u64,
    /// The campaign's own seed (its draws and mutations; runs use seeds from the file's `seed`).
    #[arg(long, default_value_t = 0)]
    campaign_seed: u64,
    /// Where the corpus and the failing scenario go (default: hunt/<name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue the campaign whose corpus is in the output folder.
    #[arg(long)]
    resume: bool,
    /// At most this many runs for shrinking the failing schedule.
    #[arg(long, default_value_t = DEFAULT_MAX_RUNS)]
    shrink_max_runs: u64,
    /// Runs in parallel: the inputs of a round (hunt), or whole campaigns (`--bench`); the
    /// results are the same for every value.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Benchmark instead of searching: `--campaigns` campaigns each of the random nemesis, swarm
    /// draws and hunt, each with `--max-runs` runs, and print runs to the first violation,
    /// successes and features reached (`crate::hunt::bench`).
    #[arg(long)]
    bench: bool,
    /// `--bench`: campaigns per search.
    #[arg(long, default_value_t = 20)]
    campaigns: u64,
    /// `--bench`: runs of each feature-counting campaign (N in "features reached in N runs").
    #[arg(long, default_value_t = 50)]
    feature_runs: u64,
    /// `--bench`: feature-counting campaigns per search.
    #[arg(long, default_value_t = 5)]
    feature_campaigns: u64,
    /// `--bench`: the path of the bug the class is after, as marks in order (e.g.
    /// `wait_partially_acked,promoted_while_held`); a campaign stops only at a violation whose
    /// run fired them in that order, and the table counts the other violations seen.
    #[arg(long, value_delimiter = ',')]
    mechanism: Vec<String>,
    /// Look near here: the marks of the path you suspect, in order (e.g.
    /// `clock_jump_while_held,lock_key_expired`). Runs that fire more of them in that order
    /// are the parents, and the faults are inserted right after the last of them a run
    /// reached. With `--bench`: adds the search `hunt --toward` to the table.
    #[arg(long, value_delimiter = ',')]
    toward: Vec<String>,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let scenario = super::load(&args.file)?;
    let scheme = select_one_scheme(&scenario, &args.file, args.scheme.as_deref(), "hunt on")?;
    if args.bench {
        return bench(&args, &scenario, scheme);
    }
    let toward = parse_marks("--toward", &args.toward)?;
    let target = Target::new(&scenario, scheme)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("hunt").join(path_component(&scenario.name)));
    let mut base = row_file(read_object(&scenario.path)?, &scenario, scheme);
    // The row's own masters (a Redlock row of a one-master file runs 5): the faults name them.
    let topology = base
        .entry("topology")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(topology) = topology {
        topology.insert("masters".into(), json!(target.row.topology.masters));
    }
    // The runs hunt made: a written schedule replays as it ran (`Target::new`).
    base.insert("faults_in_sequence".into(), json!(true));
    let mut nemesis = read_object(&scenario.path)?
        .remove("nemesis")
        .unwrap_or(Value::Null);
    if let Value::Object(nemesis) = &mut nemesis {
        nemesis.insert("swarm".into(), json!(false));
    }
    let writer = ScenarioWriter {
        base,
        nemesis,
        from: PathBuf::from(&scenario.path),
    };
    let corpus_dir = out.join("corpus");
    let mut campaign = Campaign::new(&target, args.campaign_seed)
        .jobs(args.jobs)
        .toward(&toward);
    let mut resumed = 0;
    if args.resume {
        for (faults, seed) in read_corpus(&corpus_dir)? {
            resumed += 1;
            if let Some(found) = campaign.resume_with(faults, seed)? {
                return Err(format!(
                    "{}: a corpus entry breaks {} on seed {}: shrink it with `locksim shrink`",
                    corpus_dir.display(),
                    found.broken.join(", "),
                    found.seed
                ));
            }
        }
        println!(
            "resumed {resumed} corpus entries from {}",
            corpus_dir.display()
        );
    }
    let limits = Limits {
        max_runs: args.max_runs,
        budget: args.budget_s.map(std::time::Duration::from_secs),
    };
    let outcome = campaign.run(limits, |p| {
        if p.runs.is_power_of_two() || p.runs % 100 == 0 {
            println!("{}", p.line());
        }
    })?;
    println!("{}", outcome.progress.line());
    for (i, entry) in outcome.corpus.entries.iter().enumerate().skip(resumed) {
        let path = corpus_dir.join(format!("entry-{i:05}.json"));
        writer.write(&path, &entry.faults, entry.seed, &scenario.name)?;
    }
    let Some(found) = outcome.found else {
        println!(
            "no violation within the limits; corpus of {} in {}",
            outcome.corpus.entries.len(),
            corpus_dir.display()
        );
        return Ok(ExitCode::FAILURE);
    };
    let failing = out.join("failing.json");
    if found.origin == Origin::Nemesis {
        // The random nemesis's own run: the file with its nemesis (swarm off) on that seed fails
        // as it ran; shrinking turns its faults into a scripted schedule.
        writer.write_nemesis(&failing, found.seed, &scenario.name)?;
    } else {
        writer.write(&failing, &found.faults, found.seed, &scenario.name)?;
    }
    println!(
        "run {} breaks {} (seed {}, {} faults, {}): {}",
        outcome.progress.runs,
        found.broken.join(", "),
        found.seed,
        found.faults.len(),
        found.origin.name(),
        failing.display()
    );
    let failing_scenario = Scenario::load(&failing)?;
    let shrunk = shrink(
        &std::sync::Arc::new(failing_scenario),
        0,
        found.seed,
        Some(out.join("shrunk.json")),
        args.shrink_max_runs,
    )?;
    print!("{}", shrunk.render());
    Ok(ExitCode::SUCCESS)
}

/// `--bench`: the table of `crate::hunt::bench` for the row; exit 0.
fn bench(args: &Args, scenario: &Scenario, scheme: usize) -> Result<ExitCode, String> {
    if args.budget_s.is_some() || args.resume || args.out.is_some() {
        return Err(
            "--bench counts runs, not seconds, and writes nothing: drop --budget-s, --resume and --out"
                .into(),
        );
    }
    let settings = Settings {
        campaigns: args.campaigns,
        max_runs: args.max_runs,
        feature_runs: args.feature_runs,
        feature_campaigns: args.feature_campaigns,
        jobs: args.jobs,
    };
    let mechanism = parse_marks("--mechanism", &args.mechanism)?;
    let toward = parse_marks("--toward", &args.toward)?;
    let bench = Bench::new(scenario, scheme)?
        .stop_at_path(&mechanism)
        .toward(&toward);
    let figures = bench.run(&settings, |method, c, result| {
        eprintln!(
            "{} campaign {c}: {}{}{}{}",
            method.name(),
            result
                .runs_to_violation
                .map_or(format!("nothing in {} runs", settings.max_runs), |n| {
                    format!("{} after {n} runs", result.broken.join(", "))
                }),
            if result.marks.is_empty() {
                String::new()
            } else {
                format!(
                    " [marks: {}]",
                    result
                        .marks
                        .iter()
                        .map(|m| m.name())
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            },
            result
                .found_by
                .as_ref()
                .map_or(String::new(), |(origin, first)| format!(
                    " (by {origin}; reached first: {})",
                    if first.is_empty() {
                        "nothing".to_string()
                    } else {
                        first.join(" ")
                    }
                )),
            if result.other_violations > 0 {
                format!(
                    "; {} violating runs of other paths on the way",
                    result.other_violations
                )
            } else {
                String::new()
            }
        );
    })?;
    let name = format!(
        "{} ({})",
        args.file.display(),
        scenario.schemes[scheme].label()
    );
    print!("{}", table(&name, &settings, &figures, &mechanism));
    Ok(ExitCode::SUCCESS)
}

/// Writes schedules as scenario files of the hunted row.
struct ScenarioWriter {
    base: Map<String, Value>,
    /// The hunted file's `nemesis`, swarm off (as hunt's random nemesis runs run it).
    nemesis: Value,
    /// The hunted file (its `$schema` is rebased from its folder).
    from: PathBuf,
}

impl ScenarioWriter {
    /// The hunted row with its random nemesis (swarm off) on `seed`, no scripted fault.
    fn write_nemesis(&self, path: &Path, seed: u64, name: &str) -> Result<(), String> {
        let mut base = self.base.clone();
        base.insert("nemesis".into(), self.nemesis.clone());
        base.remove("faults_in_sequence");
        ScenarioWriter {
            base,
            nemesis: Value::Null,
            from: self.from.clone(),
        }
        .write(path, &[], seed, name)
    }

    fn write(&self, path: &Path, faults: &[Fault], seed: u64, name: &str) -> Result<(), String> {
        let mut map = self.base.clone();
        let specs: Vec<Value> = faults
            .iter()
            .map(|f| serde_json::to_value(FaultSpec::from(f)).expect("faults serialise"))
            .collect();
        map.insert("faults".into(), Value::Array(specs));
        map.insert("seed".into(), json!(seed));
        map.insert("seeds".into(), json!(format!("{seed}..{seed}")));
        map.insert(
            "source".into(),
            json!(format!(
                "locksim hunt {}: a fault schedule the search kept or found; original source: {}",
                self.from.display(),
                self.base
                    .get("source")
                    .and_then(Value::as_str)
                    .unwrap_or("-")
            )),
        );
        map.insert("name".into(), json!(format!("{name}-hunt-seed{seed}")));
        if let Some(Value::String(schema)) = map.get("$schema") {
            let from = self.from.parent().unwrap_or(Path::new(""));
            let to = path.parent().unwrap_or(Path::new(""));
            let rebased = rebase(schema, from, to);
            map.insert("$schema".into(), json!(rebased));
        }
        write_file(path, ordered_json(&Value::Object(map)) + "\n")
    }
}

/// The corpus entries of an earlier campaign, in their order: (faults, seed).
fn read_corpus(dir: &Path) -> Result<Vec<(Vec<Fault>, u64)>, String> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("--resume: {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let s = Scenario::load(p)?;
            Ok((s.faults, s.seed))
        })
        .collect()
}
