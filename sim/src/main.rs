//! `locksim`: run lock scenarios on a simulated Redis and judge them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use locksim::artifacts::write_run;
use locksim::bench::bench;
use locksim::catalog::{load_all, scenario_files, select_schemes};
use locksim::runner::{default_jobs, run};
use locksim::scenario::{Scenario, SeedRange};
use locksim::{check, compare, interrupt, replay, sweep};

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
    /// Run one scenario over many seeds; stream each result to DIR/results.jsonl (seeds already
    /// there are skipped) and summarise: verdicts, violating seeds, latency, the replay command.
    Sweep {
        /// The scenario file (JSON).
        file: PathBuf,
        /// Seeds to run, both ends included (default: the scenario's `seeds`).
        #[arg(long)]
        seeds: Option<String>,
        /// Only this scheme, for a scenario with a `schemes` list.
        #[arg(long)]
        scheme: Option<String>,
        /// Parallel jobs (default: every core).
        #[arg(long)]
        jobs: Option<usize>,
        /// Where results.jsonl goes (default: sweeps/<scenario>/).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Re-run one seed and write its trace, result, timeline and a readable event log around
    /// each violation (events.txt).
    Replay {
        /// The scenario file (JSON).
        file: PathBuf,
        /// The seed to replay.
        #[arg(long)]
        seed: u64,
        /// Only this scheme, for a scenario with a `schemes` list.
        #[arg(long)]
        scheme: Option<String>,
        /// Where to write (default: replay/<scenario>-seed<N>/).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Compare every scheme on every scenario: index.html, report.md and summary.json.
    Compare {
        /// Scenario files or folders of them (default: scenarios/).
        paths: Vec<PathBuf>,
        /// Seeds for every scenario, both ends included (default: --seeds-per-scenario
        /// seeds from each scenario's first one).
        #[arg(long)]
        seeds: Option<String>,
        /// Without --seeds: this many seeds from each scenario's first (0: its own `seeds`).
        #[arg(long, default_value_t = compare::DEFAULT_SEEDS_PER_SCENARIO)]
        seeds_per_scenario: u64,
        /// Parallel jobs (default: every core).
        #[arg(long)]
        jobs: Option<usize>,
        /// The report folder.
        #[arg(long, default_value = compare::DEFAULT_OUT)]
        out: PathBuf,
    },
    /// The regression: every scenario's `expect` on every seed of its range; exit 1 on a mismatch.
    Check {
        /// Scenario files or folders of them (default: scenarios/).
        paths: Vec<PathBuf>,
        /// Seeds for every scenario, both ends included (default: each scenario's own `seeds`).
        #[arg(long)]
        seeds: Option<String>,
        /// Parallel jobs (default: every core).
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// Serve the simulated Redis on a real TCP port (real clock), for redis-cli, client
    /// libraries and redis-benchmark.
    Serve {
        /// The port to listen on.
        #[arg(long, default_value_t = 6379)]
        port: u16,
        /// The address to bind.
        #[arg(long, default_value = "127.0.0.1")]
        bind: String,
        /// The default user's password (`requirepass`): clients must AUTH.
        #[arg(long)]
        requirepass: Option<String>,
        /// The most clients connected at once (`maxclients`).
        #[arg(long, default_value_t = 10_000)]
        maxclients: u64,
        /// After this long a running script makes other clients get -BUSY and can be stopped
        /// with SCRIPT KILL (`lua-time-limit`, ms).
        #[arg(long, default_value_t = 5000)]
        lua_time_limit: u64,
        /// The most memory Lua may use, in MB; a script that wants more fails with Lua's
        /// "not enough memory" error.
        #[arg(long, default_value_t = 1024)]
        lua_memory_limit_mb: usize,
        /// Also listen on this Unix socket path (`unixsocket`).
        #[arg(long)]
        unixsocket: Option<PathBuf>,
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
    restore_sigpipe();
    match execute(Cli::parse().command) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("locksim: error: {message}");
            ExitCode::from(2)
        }
    }
}

/// Rust ignores SIGPIPE, so printing to a closed pipe (`locksim run ... | head`) would panic.
/// Restore the default: the process ends quietly, like any Unix tool.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn load(file: &Path) -> Result<Arc<Scenario>, String> {
    Scenario::load(file).map(Arc::new)
}

fn seed_range(text: &str) -> Result<SeedRange, String> {
    SeedRange::parse(text).map_err(|e| format!("--seeds: {e}"))
}

fn jobs_or_default(jobs: Option<usize>) -> usize {
    match jobs {
        None | Some(0) => default_jobs(),
        Some(n) => n,
    }
}

/// Exit code of a command stopped by Ctrl-C (128 + SIGINT).
const INTERRUPTED: u8 = 130;

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
            let indices = select_schemes(&scenario, &file, scheme.as_deref())?;
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
                        dir.join(locksim::artifacts::path_component(&output.result.scheme))
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
        Command::Sweep {
            file,
            seeds,
            scheme,
            jobs,
            out,
        } => {
            let scenario = load(&file)?;
            let seeds = match seeds {
                Some(text) => seed_range(&text)?,
                None => scenario.seeds,
            };
            let opts = sweep::SweepOptions {
                seeds,
                schemes: select_schemes(&scenario, &file, scheme.as_deref())?,
                jobs: jobs_or_default(jobs),
                dir: out.unwrap_or_else(|| sweep::default_dir(&scenario)),
                progress: true,
            };
            interrupt::install();
            let report = sweep::sweep(&scenario, &opts, interrupt::flag())?;
            print!("{}", sweep::summary_text(&scenario, &opts, &report));
            Ok(if report.interrupted {
                ExitCode::from(INTERRUPTED)
            } else if !report.errors.is_empty() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Replay {
            file,
            seed,
            scheme,
            out,
        } => {
            let scenario = load(&file)?;
            let indices = select_schemes(&scenario, &file, scheme.as_deref())?;
            let base = out.unwrap_or_else(|| replay::default_dir(&scenario, seed));
            for &index in &indices {
                let dir = if indices.len() > 1 {
                    base.join(locksim::artifacts::path_component(
                        &scenario.schemes[index].label(),
                    ))
                } else {
                    base.clone()
                };
                let output = replay::replay(&scenario, index, seed, &dir)?;
                print!(
                    "{}",
                    reports::text::summary(&output.result, &scenario.description)
                );
                println!(
                    "wrote {0}/events.txt (the {1} events before and {2} after each violation), {0}/timeline.svg, {0}/trace.jsonl, {0}/result.json",
                    dir.display(),
                    replay::EVENTS_BEFORE,
                    replay::EVENTS_AFTER
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare {
            paths,
            seeds,
            seeds_per_scenario,
            jobs,
            out,
        } => {
            let seeds = seeds.as_deref().map(seed_range).transpose()?;
            let scenarios = load_all(&scenario_files(&paths)?)?;
            let opts = compare::CompareOptions {
                seeds,
                seeds_per_scenario,
                jobs: jobs_or_default(jobs),
                out,
                progress: true,
            };
            interrupt::install();
            let summary = compare::compare(&scenarios, &opts, interrupt::flag())?;
            print!("{}", compare::summary_text(&summary, &opts.out));
            Ok(if summary.interrupted {
                ExitCode::from(INTERRUPTED)
            } else if !summary.errors.is_empty() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Check { paths, seeds, jobs } => {
            let seeds = seeds.as_deref().map(seed_range).transpose()?;
            let scenarios = load_all(&scenario_files(&paths)?)?;
            let opts = check::CheckOptions {
                seeds,
                jobs: jobs_or_default(jobs),
                progress: true,
            };
            interrupt::install();
            let report = check::check(&scenarios, &opts, interrupt::flag());
            print!("{}", report.render());
            Ok(if report.interrupted {
                ExitCode::from(INTERRUPTED)
            } else if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Serve {
            port,
            bind,
            requirepass,
            maxclients,
            lua_time_limit,
            lua_memory_limit_mb,
            unixsocket,
        } => {
            let listener = std::net::TcpListener::bind((bind.as_str(), port))
                .map_err(|e| format!("serve: cannot listen on {bind}:{port}: {e}"))?;
            let port = listener.local_addr().map_or(port, |a| a.port());
            eprintln!(
                "locksim serve: the simulated Redis 7.0 listening on {bind}:{port} (Ctrl-C stops it)"
            );
            let options = locksim::serve::ServeOptions {
                bind,
                port,
                requirepass,
                maxclients,
                lua_time_limit_ms: lua_time_limit,
                lua_memory_limit_bytes: lua_memory_limit_mb.saturating_mul(1 << 20),
                unixsocket,
            };
            locksim::serve::serve(listener, options).map_err(|e| format!("serve: {e}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench { file, seeds, jobs } => {
            let scenario = load(&file)?;
            let seeds = seed_range(&seeds)?;
            let jobs = if jobs == 0 { default_jobs() } else { jobs };
            let report = bench(&scenario, seeds, jobs)?;
            println!("{}: {report}", scenario.name);
            Ok(ExitCode::SUCCESS)
        }
    }
}
