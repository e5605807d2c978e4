//! `locksim bench`: how fast the simulator runs a scenario over a seed range, in seeds per second,
//! simulated seconds per wall-clock second, µs per trace event and per message; with `--floor`
//! also madsim's own floor (`floor.rs`) in the same invocation, and the ratio. Build with
//! `--release` before quoting figures.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use super::floor::Floor;
use crate::cli::batch::within_run_limit;
use crate::runner::{jobs_for, run_parallel};
use crate::scenario::Scenario;
use crate::scenario::range::SeedRange;

#[derive(clap::Args)]
pub struct Args {
    /// The scenario to run.
    #[arg(default_value = "scenarios/baseline-set-nx-px-lua.json")]
    file: PathBuf,
    /// Seeds to run, both ends included.
    #[arg(long, default_value = "0..49")]
    seeds: String,
    /// Parallel jobs (default: 1, to measure one core; at most every core).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Also run a bare madsim TcpStream ping-pong with the scenario's latency and client count,
    /// as many messages per seed as the scenario sent, and print the ratio per message.
    #[arg(long)]
    floor: bool,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let scenario = super::load(&args.file)?;
    let seeds = super::seed_range(&args.seeds)?;
    let jobs = jobs_for(Some(args.jobs));
    let report = bench(&scenario, seeds, jobs)?;
    println!("{}: {report}", scenario.name);
    if args.floor {
        let latency = scenario.network.latency_ms;
        let clients = scenario.clients.count.max(1) as usize;
        let per_seed = report.messages / report.runs.max(1);
        let floor = Floor {
            clients,
            round_trips: (per_seed / (2 * clients as u64)).max(1),
            latency_ms: (latency.min, latency.max),
        };
        let measured = floor.run(seeds.iter())?;
        println!(
            "madsim floor: {} runs of {} clients × {} round trips (latency {}..{} ms) in {:.2} s wall: {} messages, {:.2} µs per message",
            measured.runs,
            clients,
            floor.round_trips,
            latency.min,
            latency.max,
            measured.wall_s,
            measured.messages,
            measured.us_per_message()
        );
        println!(
            "ratio: {:.2}× madsim's floor per message",
            report.us_per_message() / measured.us_per_message()
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Clone, Debug)]
pub struct BenchReport {
    pub runs: u64,
    pub jobs: usize,
    pub wall_s: f64,
    pub sim_s: f64,
    pub events: u64,
    /// Messages the processes sent (`world::net::Network::messages`).
    pub messages: u64,
}

impl BenchReport {
    pub fn seeds_per_s(&self) -> f64 {
        self.runs as f64 / self.wall_s
    }

    pub fn sim_s_per_wall_s(&self) -> f64 {
        self.sim_s / self.wall_s
    }

    /// Wall µs per job per trace event: the CPU cost of one event.
    pub fn us_per_event(&self) -> f64 {
        self.wall_s * self.jobs as f64 * 1e6 / self.events as f64
    }

    /// Wall µs per job per message sent.
    pub fn us_per_message(&self) -> f64 {
        self.wall_s * self.jobs as f64 * 1e6 / self.messages as f64
    }
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} runs on {} job(s) in {:.2} s wall: {:.2} seeds/s, {:.1} simulated s per wall s ({:.1} simulated s in all, {} events, {} messages); {:.2} µs per event, {:.2} µs per message",
            self.runs,
            self.jobs,
            self.wall_s,
            self.seeds_per_s(),
            self.sim_s_per_wall_s(),
            self.sim_s,
            self.events,
            self.messages,
            self.us_per_event(),
            self.us_per_message()
        )
    }
}

/// Runs every scheme of `scenario` over `seeds` on `jobs` threads and measures it.
pub fn bench(
    scenario: &Arc<Scenario>,
    seeds: SeedRange,
    jobs: usize,
) -> Result<BenchReport, String> {
    within_run_limit(scenario.schemes.len() as u64 * seeds.len())?;
    let work: Vec<(usize, u64)> = (0..scenario.schemes.len())
        .flat_map(|s| seeds.iter().map(move |seed| (s, seed)))
        .collect();
    let start = std::time::Instant::now();
    let mut report = BenchReport {
        runs: 0,
        jobs,
        wall_s: 0.0,
        sim_s: 0.0,
        events: 0,
        messages: 0,
    };
    let mut first_error = None;
    run_parallel(scenario, work, jobs, |output| match output {
        Ok(output) => {
            report.runs += 1;
            report.sim_s += output.result.sim_ms as f64 / 1000.0;
            report.events += output.events as u64;
            report.messages += output.messages;
        }
        Err(e) => {
            first_error.get_or_insert(e);
        }
    });
    report.wall_s = start.elapsed().as_secs_f64();
    match first_error {
        Some(e) => Err(e),
        None => Ok(report),
    }
}
