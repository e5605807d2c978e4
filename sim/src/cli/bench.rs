//! `locksim bench`: how fast the simulator runs a scenario over a seed range, in seeds per second,
//! simulated seconds per wall-clock second, CPU µs per trace event and per message; with
//! `--floor` also madsim's own floor (`floor.rs`), in interleaved rounds, and the ratio. Build
//! with `--release` before quoting figures.
//!
//! Costs are CPU time (`getrusage`), not wall time: on a shared machine another process's load
//! stretches wall time but not the CPU time this process used, so the ratio of two phases run at
//! different moments stays meaningful. The floor runs in rounds interleaved with the scenario's
//! (issue 32: one floor phase timed over 0.2 s gave ratios from 3.1 to 6.3×), each round's ratio
//! taken on its own, and the median printed with the spread.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use super::floor::{Floor, FloorReport, cpu_seconds};
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
    /// as many messages per seed as the scenario sent, in rounds interleaved with the
    /// scenario's, and print the median ratio per message and its spread.
    #[arg(long)]
    floor: bool,
    /// With `--floor`: how many interleaved rounds the seeds are split into.
    #[arg(long, default_value_t = 5)]
    rounds: u64,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let scenario = super::load(&args.file)?;
    let seeds = super::seed_range(&args.seeds)?;
    let jobs = jobs_for(Some(args.jobs));
    if !args.floor {
        let report = bench(&scenario, seeds, jobs)?;
        println!("{}: {report}", scenario.name);
        return Ok(ExitCode::SUCCESS);
    }
    if args.rounds == 0 || args.rounds > seeds.len() {
        return Err(format!(
            "--rounds {}: give between 1 and the number of seeds ({})",
            args.rounds,
            seeds.len()
        ));
    }
    let latency = scenario.network.latency_ms;
    let clients = scenario.clients.count.max(1) as usize;
    let mut total: Option<BenchReport> = None;
    let mut floor_total = FloorReport::default();
    let mut round_trips = Vec::new();
    let mut cpu_ratios = Vec::new();
    let mut wall_ratios = Vec::new();
    for round in split(seeds, args.rounds) {
        let report = bench(&scenario, round, jobs)?;
        let per_seed = report.messages / report.runs.max(1);
        let floor = Floor {
            clients,
            round_trips: (per_seed / (2 * clients as u64)).max(1),
            latency_ms: (latency.min, latency.max),
        };
        let measured = floor.run(round.iter())?;
        cpu_ratios.push(report.cpu_us_per_message() / measured.cpu_us_per_message());
        wall_ratios.push(report.us_per_message() / measured.us_per_message());
        round_trips.push(floor.round_trips);
        floor_total.add(&measured);
        match &mut total {
            Some(total) => total.add(&report),
            None => total = Some(report),
        }
    }
    let total = total.expect("at least one round");
    println!("{}: {total}", scenario.name);
    println!(
        "madsim floor: {} runs of {} clients × {}–{} round trips (latency {}..{} ms) in {:.2} s wall, {:.2} CPU s: {} messages, {:.2} CPU µs per message",
        floor_total.runs,
        clients,
        round_trips.iter().min().copied().unwrap_or(0),
        round_trips.iter().max().copied().unwrap_or(0),
        latency.min,
        latency.max,
        floor_total.wall_s,
        floor_total.cpu_s,
        floor_total.messages,
        floor_total.cpu_us_per_message()
    );
    let (cpu_median, cpu_min, cpu_max) = median_and_spread(&mut cpu_ratios);
    let (wall_median, _, _) = median_and_spread(&mut wall_ratios);
    println!(
        "ratio: {cpu_median:.2}× madsim's floor per message (CPU time, median of {} interleaved rounds, {cpu_min:.2}–{cpu_max:.2}); by wall time {wall_median:.2}×",
        cpu_ratios.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `seeds` in `rounds` consecutive ranges of (nearly) equal length.
fn split(seeds: SeedRange, rounds: u64) -> Vec<SeedRange> {
    let (len, mut first) = (seeds.len(), seeds.first);
    (0..rounds)
        .map(|i| {
            let size = len / rounds + u64::from(i < len % rounds);
            let range = SeedRange {
                first,
                last: first + size - 1,
            };
            first += size;
            range
        })
        .collect()
}

/// The median of `values` and their smallest and largest.
fn median_and_spread(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    (median, values[0], values[n - 1])
}

#[derive(Clone, Debug)]
pub struct BenchReport {
    pub runs: u64,
    pub jobs: usize,
    pub wall_s: f64,
    pub cpu_s: f64,
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

    /// Wall µs per job per message sent.
    pub fn us_per_message(&self) -> f64 {
        self.wall_s * self.jobs as f64 * 1e6 / self.messages as f64
    }

    /// CPU µs per trace event: the cost of one event.
    pub fn cpu_us_per_event(&self) -> f64 {
        self.cpu_s * 1e6 / self.events as f64
    }

    /// CPU µs per message sent.
    pub fn cpu_us_per_message(&self) -> f64 {
        self.cpu_s * 1e6 / self.messages as f64
    }

    /// Simulated seconds per CPU second: per wall second of a core of one's own.
    pub fn sim_s_per_cpu_s(&self) -> f64 {
        self.sim_s / self.cpu_s
    }

    fn add(&mut self, other: &BenchReport) {
        self.runs += other.runs;
        self.wall_s += other.wall_s;
        self.cpu_s += other.cpu_s;
        self.sim_s += other.sim_s;
        self.events += other.events;
        self.messages += other.messages;
    }
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} runs on {} job(s) in {:.2} s wall, {:.2} CPU s: {:.2} seeds/s, {:.1} simulated s per wall s, {:.1} per CPU s ({:.1} simulated s in all, {} events, {} messages); {:.2} CPU µs per event, {:.2} CPU µs per message",
            self.runs,
            self.jobs,
            self.wall_s,
            self.cpu_s,
            self.seeds_per_s(),
            self.sim_s_per_wall_s(),
            self.sim_s_per_cpu_s(),
            self.sim_s,
            self.events,
            self.messages,
            self.cpu_us_per_event(),
            self.cpu_us_per_message()
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
    let cpu_start = cpu_seconds();
    let mut report = BenchReport {
        runs: 0,
        jobs,
        wall_s: 0.0,
        cpu_s: 0.0,
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
    report.cpu_s = cpu_seconds() - cpu_start;
    match first_error {
        Some(e) => Err(e),
        None => Ok(report),
    }
}
