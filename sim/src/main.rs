//! `locksim`: run lock scenarios on a simulated Redis and judge them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use locksim::bench::bench;
use locksim::runner::{RunOutput, default_jobs, run};
use locksim::scenario::{Scenario, SeedRange};
use model::history::trace_jsonl;

#[derive(Parser)]
#[command(
    name = "locksim",
    version,
    about = "Deterministic simulation testbed for Redis distributed locks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario on one seed and report what happened.
    Run {
        /// The scenario file (JSON).
        file: PathBuf,
        /// The seed (default: the scenario's `seed`).
        #[arg(long)]
        seed: Option<u64>,
        /// Only this scheme, for a scenario with a `schemes` list (id or id:preset).
        #[arg(long)]
        scheme: Option<String>,
        /// Print the result object (one JSON line per scheme) instead of the summary.
        #[arg(long)]
        json: bool,
        /// Also write result.json, trace.jsonl and timeline.svg here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// List every lock scheme: id, one-line summary, source.
    Schemes {
        /// Print a JSON array of {id, summary, source, default_ttl_ms} instead.
        #[arg(long)]
        json: bool,
    },
    /// Measure simulator speed: seeds per second and simulated seconds per wall second.
    Bench {
        /// The scenario to run.
        #[arg(default_value = "scenarios/baseline-set-nx-px-lua.json")]
        file: PathBuf,
        /// Seeds to run, both ends included.
        #[arg(long, default_value = "0..49")]
        seeds: String,
        /// Parallel jobs (default: 1, to measure one core).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
    },
}

fn main() -> ExitCode {
    match execute(Cli::parse().command) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("locksim: error: {message}");
            ExitCode::from(2)
        }
    }
}

fn load(file: &Path) -> Result<Arc<Scenario>, String> {
    Scenario::load(file).map(Arc::new)
}

fn execute(command: Command) -> Result<ExitCode, String> {
    match command {
        Command::Run {
            file,
            seed,
            scheme,
            json,
            out,
        } => {
            let scenario = load(&file)?;
            let seed = seed.unwrap_or(scenario.seed);
            let indices: Vec<usize> = (0..scenario.schemes.len())
                .filter(|&i| {
                    scheme.as_ref().is_none_or(|s| {
                        *s == scenario.schemes[i].label() || *s == scenario.schemes[i].name
                    })
                })
                .collect();
            if indices.is_empty() {
                let labels: Vec<String> = scenario.schemes.iter().map(|s| s.label()).collect();
                return Err(format!(
                    "--scheme: {} has no scheme {:?} (it has: {})",
                    file.display(),
                    scheme.unwrap_or_default(),
                    labels.join(", ")
                ));
            }
            for &index in &indices {
                let output = run(&scenario, index, seed)?;
                if json {
                    println!(
                        "{}",
                        serde_json::to_string(&output.result).expect("results serialise")
                    );
                } else {
                    print!(
                        "{}",
                        reports::text::summary(&output.result, &scenario.description)
                    );
                }
                if let Some(dir) = &out {
                    let dir = if indices.len() > 1 {
                        dir.join(&output.result.scheme)
                    } else {
                        dir.clone()
                    };
                    write_run(&dir, &scenario, &output)?;
                    if !json {
                        println!("wrote {}", dir.display());
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Schemes { json } => {
            print!("{}", locksim::schemes_listing(json));
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench { file, seeds, jobs } => {
            let scenario = load(&file)?;
            let seeds = SeedRange::parse(&seeds).map_err(|e| format!("--seeds: {e}"))?;
            let jobs = if jobs == 0 { default_jobs() } else { jobs };
            let report = bench(&scenario, seeds, jobs)?;
            println!("{}: {report}", scenario.name);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Writes `result.json`, `trace.jsonl` and `timeline.svg` of one run into `dir`.
fn write_run(dir: &Path, scenario: &Scenario, output: &RunOutput) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let write = |name: &str, content: String| {
        let path = dir.join(name);
        std::fs::write(&path, content).map_err(|e| format!("{}: cannot write: {e}", path.display()))
    };
    write(
        "result.json",
        serde_json::to_string_pretty(&output.result).expect("results serialise") + "\n",
    )?;
    write("trace.jsonl", trace_jsonl(&output.events))?;
    let timeline = reports::timeline::Timeline {
        title: format!(
            "{} — {} — seed {}",
            scenario.name, output.result.scheme, output.result.seed
        ),
        clients: scenario.owner_names(),
        servers: scenario.redis_names(),
        end_us: output.result.sim_ms * 1000,
    };
    write(
        "timeline.svg",
        timeline.render(&output.events, &output.result.violations),
    )
}
