//! `locksim live SCENARIO [-- CMD ARGS...]`: the scenario on the real clock, its clients real
//! processes (the user's command, or the built-in scheme), judged by the simulation's
//! checkers (`crate::live`). Each run writes result.json, trace.jsonl and timeline.svg as a
//! simulated run does, plus history.jsonl (jepsen.history fields), faults-applied.json (the
//! faults as realised on the processes, with wall times) and logs/ (each client's stderr).
//! `--repeat N` reports each verdict's rate with a Wilson 95 % interval: live runs are not
//! replayable. `live-adapter` is the hidden client mode that runs a built-in scheme.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::artifacts::{write_file, write_run};
use super::catalog::select_schemes;
use crate::live::clients::ClientCommand;
use crate::live::redis_server::Binaries;
use crate::live::{LiveOutput, Options, process};
use crate::scenario::Scenario;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// locksim's own model of Redis and Sentinel, paced to the real clock.
    Model,
    /// Real redis-server and redis-sentinel processes (issue 26).
    RedisServer,
}

#[derive(clap::Args)]
pub struct Args {
    /// The scenario file (JSON).
    file: PathBuf,
    /// The scheme whose lease and lock key the workload uses, and which runs when no command
    /// is given (id or id:preset; required when the scenario lists several).
    #[arg(long)]
    scheme: Option<String>,
    /// What serves Redis and Sentinel.
    #[arg(long, value_enum, default_value = "model")]
    backend: Backend,
    /// The redis-server to run with `--backend redis-server`.
    #[arg(long, default_value = "redis-server")]
    redis_server: OsString,
    /// The redis-sentinel to run with `--backend redis-server`.
    #[arg(long, default_value = "redis-sentinel")]
    redis_sentinel: OsString,
    /// Run it N times and report each verdict's rate with a Wilson 95 % interval.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// How many runs at once (each has its own ports and processes).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Where to write each run's outputs (default: a new folder under the system's temp dir).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Unmodified services that only read the environment (no driver protocol): verdicts from
    /// the resource and the servers' own lock history.
    #[arg(long)]
    observe: bool,
    /// The seed of the world's random draws (default: the scenario's `seed`).
    #[arg(long)]
    seed: Option<u64>,
    /// How long a client may take to answer an operation beyond the operation's own wait or
    /// hold, before the run stops with an error naming it.
    #[arg(long, default_value_t = 10_000)]
    op_timeout_ms: u64,
    /// How long a client gets to exit after SIGTERM at the end of the run before SIGKILL.
    #[arg(long, default_value_t = 1_000)]
    grace_ms: u64,
    /// The client command and its arguments (after `--`); without it, the built-in scheme.
    #[arg(last = true)]
    command: Vec<OsString>,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    if args.observe && args.command.is_empty() {
        return Err(
            "--observe: give the service to observe after `--` (locksim live SCENARIO --observe -- CMD ARGS...)"
                .into(),
        );
    }
    if args.repeat == 0 {
        return Err("--repeat: give at least 1".into());
    }
    let scenario = super::load(&args.file)?;
    let indices = select_schemes(&scenario, &args.file, args.scheme.as_deref())?;
    if indices.len() != 1 {
        return Err(format!(
            "{}: the scenario lists {} schemes: choose one with --scheme",
            args.file.display(),
            indices.len()
        ));
    }
    let scheme_index = indices[0];
    let command = args
        .command
        .split_first()
        .map(|(program, rest)| ClientCommand {
            program: program.clone(),
            args: rest.to_vec(),
        });
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!(
            "locksim-live-{}-{}",
            std::process::id(),
            crate::live::pacer::real_unix_us()
        )),
    };
    process::install_stop_signals();
    let seed = args.seed.unwrap_or(scenario.seed);
    let runs: Vec<u32> = (1..=args.repeat).collect();
    let dir_of = |k: u32| {
        if args.repeat == 1 {
            out.clone()
        } else {
            out.join(format!("run-{k}"))
        }
    };
    let servers = (args.backend == Backend::RedisServer).then(|| Binaries {
        redis_server: args.redis_server.clone(),
        redis_sentinel: args.redis_sentinel.clone(),
    });
    let jobs = args.jobs.max(1).min(runs.len());
    let queue = Arc::new(std::sync::Mutex::new(runs.into_iter()));
    let (tx, rx) = std::sync::mpsc::channel();
    let mut workers = Vec::new();
    for _ in 0..jobs {
        let (queue, tx, scenario, command, servers) = (
            queue.clone(),
            tx.clone(),
            scenario.clone(),
            command.clone(),
            servers.clone(),
        );
        let dirs: Vec<PathBuf> = (1..=args.repeat).map(dir_of).collect();
        let (op_timeout_ms, grace) = (args.op_timeout_ms, Duration::from_millis(args.grace_ms));
        let observe = args.observe;
        workers.push(std::thread::spawn(move || {
            loop {
                let next = queue.lock().expect("never poisoned").next();
                let Some(k) = next else { break };
                if process::stop_requested() {
                    break;
                }
                let dir = dirs[k as usize - 1].clone();
                let options = Options {
                    scenario: scenario.clone(),
                    scheme_index,
                    seed,
                    command: command.clone(),
                    log_dir: dir.join("logs"),
                    op_timeout_ms,
                    grace,
                    observe,
                    servers: servers.clone(),
                };
                // Each run on a fresh thread: the simulation's runtime is made there.
                let result = std::thread::spawn(move || crate::live::run(options))
                    .join()
                    .unwrap_or_else(|_| Err("the live run panicked".into()));
                if tx.send((k, dir, result)).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let mut results = Vec::new();
    let mut first_error = None;
    for (k, dir, result) in rx {
        match result {
            Ok(mut output) => {
                if command.is_some() {
                    output.run.result.scheme = format!("live: {}", command_label(&args.command));
                }
                if args.backend == Backend::RedisServer {
                    output.run.result.scheme.push_str(" (redis-server)");
                }
                write_live(&dir, &scenario.for_scheme(scheme_index), &output)?;
                if args.repeat == 1 {
                    print!(
                        "{}",
                        reports::text::summary(&output.run.result, &scenario.description)
                    );
                } else {
                    let v = &output.run.result.verdicts;
                    println!(
                        "run {k}: mutual_exclusion {}, resource_safety {}, liveness {}",
                        v.mutual_exclusion.as_str(),
                        v.resource_safety.as_str(),
                        v.liveness.as_str()
                    );
                }
                for note in &output.killed {
                    eprintln!("locksim live: {note}");
                }
                results.push(output.run.result);
            }
            Err(e) => {
                eprintln!("locksim live: run {k}: {e}");
                first_error.get_or_insert(e);
            }
        }
    }
    for worker in workers {
        let _ = worker.join();
    }
    if process::stop_requested() {
        eprintln!("locksim live: interrupted; every client process was stopped and reaped");
        return Ok(ExitCode::from(super::INTERRUPTED));
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    if args.repeat > 1 {
        print!("{}", rates(&results));
        let summary: Vec<_> = results.iter().map(|r| r.verdicts).collect();
        write_file(
            &out.join("rates.json"),
            serde_json::to_string_pretty(&rates_json(&summary)).expect("serialises") + "\n",
        )?;
    }
    println!(
        "wrote {} (live runs are not replayable: real time and real processes)",
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn command_label(command: &[OsString]) -> String {
    command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// One run's outputs: the simulation's, and the live ones.
fn write_live(dir: &Path, scenario: &Scenario, output: &LiveOutput) -> Result<(), String> {
    write_run(dir, scenario, &output.run)?;
    if !output.not_applied.is_empty() {
        // result.json says what of the scenario the real processes did not get.
        let mut result = serde_json::to_value(&output.run.result).expect("results serialise");
        result["faults_not_applied"] = serde_json::json!(output.not_applied);
        write_file(
            &dir.join("result.json"),
            serde_json::to_string_pretty(&result).expect("serialises") + "\n",
        )?;
    }
    write_file(&dir.join("history.jsonl"), &output.history)?;
    let applied = serde_json::json!({
        "start_unix_us": output.start_unix_us,
        "note": "trace times are µs of true time since start_unix_us; applied are the faults as realised on the client processes",
        "applied": output.applied,
    });
    write_file(
        &dir.join("faults-applied.json"),
        serde_json::to_string_pretty(&applied).expect("serialises") + "\n",
    )
}

/// A Wilson score interval at 95 % for `k` successes of `n`.
pub fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (k as f64, n as f64);
    let z = 1.959_963_984_540_054_f64;
    let p = k / n;
    let denominator = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

fn counts(verdicts: &[model::result::Verdicts]) -> [(&'static str, usize); 3] {
    use model::result::{Liveness, Safety};
    [
        (
            "mutual_exclusion violated",
            verdicts
                .iter()
                .filter(|v| v.mutual_exclusion == Safety::Violated)
                .count(),
        ),
        (
            "resource_safety violated",
            verdicts
                .iter()
                .filter(|v| v.resource_safety == Safety::Violated)
                .count(),
        ),
        (
            "liveness stuck",
            verdicts
                .iter()
                .filter(|v| v.liveness == Liveness::Stuck)
                .count(),
        ),
    ]
}

fn rates(results: &[model::result::RunResult]) -> String {
    let verdicts: Vec<_> = results.iter().map(|r| r.verdicts).collect();
    let n = verdicts.len();
    let mut out = format!("{n} live runs (not replayable: rates, with Wilson 95 % intervals):\n");
    for (name, k) in counts(&verdicts) {
        let (low, high) = wilson(k, n);
        out.push_str(&format!(
            "  {name}: {k}/{n} ({:.0} %, 95 % CI {:.0}–{:.0} %)\n",
            100.0 * k as f64 / n as f64,
            100.0 * low,
            100.0 * high
        ));
    }
    out
}

fn rates_json(verdicts: &[model::result::Verdicts]) -> serde_json::Value {
    let n = verdicts.len();
    let rows: Vec<_> = counts(verdicts)
        .into_iter()
        .map(|(name, k)| {
            let (low, high) = wilson(k, n);
            serde_json::json!({"verdict": name, "runs": k, "of": n, "wilson_95": [low, high]})
        })
        .collect();
    serde_json::json!({"repeats": n, "rates": rows})
}

/// `locksim live-adapter SCENARIO --scheme ID`: a built-in scheme as a live client.
#[derive(clap::Args)]
pub struct AdapterArgs {
    file: PathBuf,
    #[arg(long)]
    scheme: String,
}

pub fn execute_adapter(args: AdapterArgs) -> Result<ExitCode, String> {
    crate::live::adapter::main(&args.file, &args.scheme)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_intervals_match_the_published_values() {
        // Wilson (1927) / Newcombe (1998) table: 0/10 → 0–27.8 %, 10/10 → 72.2–100 %,
        // 5/10 → 23.7–76.3 %.
        let (l, h) = wilson(0, 10);
        assert!(l.abs() < 1e-9 && (h - 0.2775).abs() < 0.001, "{l} {h}");
        let (l, h) = wilson(10, 10);
        assert!(
            (l - 0.7225).abs() < 0.001 && (h - 1.0).abs() < 1e-9,
            "{l} {h}"
        );
        let (l, h) = wilson(5, 10);
        assert!((l - 0.2366).abs() < 0.001 && (h - 0.7634).abs() < 0.001);
    }
}
