//! `locksim sweep FILE --seeds A..B`: one scenario over many seeds (every scheme it lists),
//! streaming each finished run as one JSON line to `results.jsonl`, so an interrupted sweep
//! keeps what finished and a re-run skips every (scenario, scheme, seed) already there. The
//! summary is accumulated run by run (`reports::accumulate`), so memory stays flat however many
//! seeds a sweep runs.

use std::fmt::Write as _;
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use model::result::RunResult;
use reports::accumulate::CellAccumulator;
use reports::summary::{CellStats, fmt_ms};

use crate::cli::artifacts::{path_component, write_file};
use crate::cli::batch::{Job, progress_bar, run_jobs, within_run_limit};
use crate::cli::catalog::{replay_command, scheme_spec_json, select_schemes};
use crate::cli::results::{Line, MANIFEST, Manifest};
use crate::cli::shard::Shard;
use crate::cli::{interrupt, shrink};
use crate::runner::jobs_for;
use crate::scenario::Scenario;
use crate::scenario::range::SeedRange;

#[derive(clap::Args)]
pub struct Args {
    /// The scenario file (JSON).
    file: PathBuf,
    /// Seeds to run, both ends included (default: the scenario's `seeds`).
    #[arg(long)]
    seeds: Option<String>,
    /// Only this scheme, for a scenario with a `schemes` list.
    #[arg(long)]
    scheme: Option<String>,
    /// Parallel jobs (default and most: every core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Where results.jsonl goes (default: sweeps/<scenario>/).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only shard I of N of the (scheme, seed) runs (`I/N`, or `env/N` in a Kubernetes
    /// Indexed Job: I from JOB_COMPLETION_INDEX).
    #[arg(long)]
    shard: Option<String>,
    /// Then shrink the first failing seed of each scheme (`locksim shrink`) into
    /// shrunk/<name>.json.
    #[arg(long)]
    shrink: bool,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let scenario = super::load(&args.file)?;
    let seeds = match args.seeds {
        Some(text) => super::seed_range(&text)?,
        None => scenario.seeds,
    };
    let opts = SweepOptions {
        seeds,
        schemes: select_schemes(&scenario, &args.file, args.scheme.as_deref())?,
        jobs: jobs_for(args.jobs),
        dir: args.out.unwrap_or_else(|| default_dir(&scenario)),
        shard: Shard::from_arg(args.shard.as_deref())?,
        progress: true,
    };
    interrupt::install();
    let report = sweep(&scenario, &opts, interrupt::flag())?;
    print!("{}", summary_text(&scenario, &opts, &report));
    let mut failed = !report.errors.is_empty();
    if args.shrink && !report.interrupted {
        for (scheme, seed) in first_failing_seeds(&opts, &report) {
            match shrink::shrink(&scenario, scheme, seed, None, shrink::DEFAULT_MAX_RUNS) {
                Ok(shrunk) => print!("{}", shrunk.render()),
                Err(e) => {
                    println!("shrink: {e}");
                    failed = true;
                }
            }
        }
    }
    Ok(super::exit_code(report.interrupted, failed))
}

/// The lowest violating seed of each scheme the sweep ran, in scheme order.
fn first_failing_seeds(opts: &SweepOptions, report: &SweepReport) -> Vec<(usize, u64)> {
    opts.schemes
        .iter()
        .zip(&report.cells)
        .filter_map(|(&index, cell)| cell.first_failing_seed.map(|seed| (index, seed)))
        .collect()
}

/// Where a sweep writes by default: `sweeps/<scenario>/`.
pub fn default_dir(scenario: &Scenario) -> PathBuf {
    Path::new("sweeps").join(path_component(&scenario.name))
}

pub struct SweepOptions {
    pub seeds: SeedRange,
    /// Scheme indices to run.
    pub schemes: Vec<usize>,
    pub jobs: usize,
    pub dir: PathBuf,
    /// Only this shard of the runs.
    pub shard: Option<Shard>,
    pub progress: bool,
}

/// What a sweep did.
pub struct SweepReport {
    pub results_path: PathBuf,
    /// One cell per requested scheme (in `SweepOptions::schemes` order), over every result of
    /// its seeds: loaded from the file or run now.
    pub cells: Vec<CellStats>,
    /// How many results the cells hold.
    pub runs: u64,
    pub new_runs: u64,
    pub already_done: u64,
    pub wall_s: f64,
    pub jobs: usize,
    pub interrupted: bool,
    pub errors: Vec<String>,
    /// Lines of the existing file that could not be read (e.g. cut short by a kill).
    pub unreadable_lines: u64,
}

/// Reads a `results.jsonl`: the results it holds and how many lines were unreadable (none
/// when there is no file yet).
pub fn read_results(path: &Path) -> Result<(Vec<RunResult>, u64), String> {
    let mut results = Vec::new();
    let bad = for_each_result(path, |r| results.push(r))?;
    Ok((results, bad))
}

/// Streams a `results.jsonl` line by line (a million seeds' file need not fit in memory): each
/// result to `f`; returns how many lines were unreadable. A missing file holds nothing.
pub fn for_each_result(path: &Path, mut f: impl FnMut(RunResult)) -> Result<u64, String> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
    };
    let mut bad = 0;
    // Bytes, not `lines()`: a line cut inside a UTF-8 character by a kill is one unreadable
    // line (its seed runs again), not an error that stops every resume (issue 17).
    for line in std::io::BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let line = String::from_utf8_lossy(&line);
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<RunResult>(&line) {
            Ok(r) => f(r),
            Err(_) => bad += 1,
        }
    }
    Ok(bad)
}

/// Which seeds of a range are done, one bit each.
struct SeedSet {
    first: u64,
    bits: Vec<u64>,
}

impl SeedSet {
    fn new(seeds: SeedRange) -> SeedSet {
        SeedSet {
            first: seeds.first,
            bits: vec![0; seeds.len().div_ceil(64) as usize],
        }
    }

    /// Marks `seed` (within the range); false when it was already marked.
    fn insert(&mut self, seed: u64) -> bool {
        let i = seed - self.first;
        let (word, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        let fresh = self.bits[word] & bit == 0;
        self.bits[word] |= bit;
        fresh
    }

    fn contains(&self, seed: u64) -> bool {
        let i = seed - self.first;
        self.bits[(i / 64) as usize] & (1u64 << (i % 64)) != 0
    }
}

/// Runs the seeds of `opts` not yet in `DIR/results.jsonl`, appending each as it finishes.
pub fn sweep(
    scenario: &Arc<Scenario>,
    opts: &SweepOptions,
    stop: &AtomicBool,
) -> Result<SweepReport, String> {
    let start = std::time::Instant::now();
    within_run_limit(opts.seeds.len() * opts.schemes.len() as u64)?;
    std::fs::create_dir_all(&opts.dir)
        .map_err(|e| format!("{}: cannot create: {e}", opts.dir.display()))?;
    let path = opts.dir.join("results.jsonl");
    let labels: Vec<String> = scenario.schemes.iter().map(|s| s.label()).collect();
    let in_shard = |i: usize, seed: u64| {
        opts.shard
            .is_none_or(|shard| shard.holds(&scenario.name, &labels[i], seed))
    };
    // Per requested scheme (position in `opts.schemes`): the seeds done and their cell.
    let mut done: Vec<SeedSet> = opts
        .schemes
        .iter()
        .map(|_| SeedSet::new(opts.seeds))
        .collect();
    let mut cells: Vec<CellAccumulator> = vec![CellAccumulator::default(); opts.schemes.len()];
    let mut runs = 0;
    // Results already there for this scenario's requested schemes and seeds; the first line wins.
    let unreadable_lines = for_each_result(&path, |r| {
        if r.scenario != scenario.name || !(opts.seeds.first..=opts.seeds.last).contains(&r.seed) {
            return;
        }
        let Some(k) = opts.schemes.iter().position(|&i| labels[i] == r.scheme) else {
            return;
        };
        if in_shard(opts.schemes[k], r.seed) && done[k].insert(r.seed) {
            cells[k].add(&r);
            runs += 1;
        }
    })?;
    let already_done = runs;
    let done = &done;
    let work = opts
        .schemes
        .iter()
        .enumerate()
        .flat_map(|(k, &i)| opts.seeds.iter().map(move |seed| (k, i, seed)))
        .filter(|&(k, i, seed)| in_shard(i, seed) && !done[k].contains(seed))
        .map(|(_, scheme, seed)| Job {
            scenario: scenario.clone(),
            scheme,
            seed,
        });
    // The runs this invocation owns (its shard of the schemes × seeds).
    let planned = opts
        .schemes
        .iter()
        .map(|&i| opts.seeds.iter().filter(|&seed| in_shard(i, seed)).count() as u64)
        .sum::<u64>();

    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("{}: cannot open for appending: {e}", path.display()))?;
    // A line cut short by a kill must not glue onto the next one.
    let ends_cleanly = std::fs::read(&path)
        .map(|b| b.last().is_none_or(|&c| c == b'\n'))
        .unwrap_or(true);
    if !ends_cleanly {
        file.write_all(b"\n")
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }

    let bar = progress_bar(planned - already_done, opts.progress);
    let mut new_runs = 0;
    let mut written = 0;
    let mut violating = 0;
    let mut errors = Vec::new();
    let mut write_error = None;
    // The first append that fails (a full disk) stops the sweep: no run starts after it.
    let write_failed = AtomicBool::new(false);
    let should_stop = || stop.load(Ordering::SeqCst) || write_failed.load(Ordering::SeqCst);
    run_jobs(
        work,
        opts.jobs,
        should_stop,
        Job::run_summary,
        |job, output| {
            bar.inc(1);
            match output {
                Ok(output) => {
                    let line = Line {
                        result: &output.result,
                        scheme_spec: scheme_spec_json(scenario, job.scheme),
                        scenario_file: &scenario.path,
                    };
                    let mut text = serde_json::to_string(&line).expect("results serialise");
                    text.push('\n');
                    if write_error.is_none()
                        && let Err(e) = file.write_all(text.as_bytes())
                    {
                        write_failed.store(true, Ordering::SeqCst);
                        write_error = Some(e);
                    }
                    if write_error.is_none() {
                        written += 1;
                    }
                    if reports::summary::is_violating(&output.result) {
                        violating += 1;
                        bar.set_message(format!("{violating} violating"));
                    }
                    new_runs += 1;
                    runs += 1;
                    let k = opts
                        .schemes
                        .iter()
                        .position(|&i| i == job.scheme)
                        .expect("every job is of a requested scheme");
                    cells[k].add(&output.result);
                }
                Err(e) => errors.push(e),
            }
        },
    );
    bar.finish_and_clear();
    if let Some(e) = write_error {
        // `run.json` is left as it was: it describes the last sweep that finished writing.
        return Err(format!(
            "{}: cannot write: {e}; the sweep stopped there: {written} new run(s) written, {} not run (make room and run the same command again to resume)",
            path.display(),
            planned - already_done - new_runs - errors.len() as u64
        ));
    }
    let interrupted = stop.load(Ordering::SeqCst);
    // What this invocation asked, for `locksim report` (which shards are there).
    let manifest = Manifest {
        command: "sweep".into(),
        shard: opts.shard,
        seed_policy: format!("seeds {}", opts.seeds),
        runs_planned: planned,
        runs_done: runs,
        interrupted,
        errors: errors.clone(),
    };
    write_file(
        &opts.dir.join(MANIFEST),
        serde_json::to_string_pretty(&manifest).expect("manifests serialise") + "\n",
    )?;
    let cells = cells
        .into_iter()
        .zip(&opts.schemes)
        .map(|(cell, &i)| cell.finish(&scenario.name, &labels[i]))
        .collect();
    Ok(SweepReport {
        results_path: path,
        cells,
        runs,
        new_runs,
        already_done,
        wall_s: start.elapsed().as_secs_f64(),
        jobs: opts.jobs,
        interrupted,
        errors,
        unreadable_lines,
    })
}

/// A list of seeds, the first `max` of them, of `count` in all.
fn seed_list(seeds: &[u64], count: u64, max: usize) -> String {
    let shown: Vec<String> = seeds.iter().take(max).map(u64::to_string).collect();
    let mut text = shown.join(", ");
    if count > max as u64 {
        let _ = write!(text, ", … ({} more)", count - max as u64);
    }
    text
}

/// The summary a sweep prints.
pub fn summary_text(scenario: &Scenario, opts: &SweepOptions, report: &SweepReport) -> String {
    let mut out = String::new();
    let runs = report.runs;
    let rate = if report.wall_s > 0.0 {
        report.new_runs as f64 / report.wall_s
    } else {
        0.0
    };
    let shard = opts
        .shard
        .map(|s| format!(" (shard {s})"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "sweep {} ({}), seeds {}{shard}: {} run(s) — {} new, {} already in {} — {:.1} s wall, {:.1} seeds/s on {} job(s)",
        scenario.name,
        scenario.path,
        opts.seeds,
        runs,
        report.new_runs,
        report.already_done,
        report.results_path.display(),
        report.wall_s,
        rate,
        report.jobs
    );
    if report.interrupted {
        let _ = writeln!(
            out,
            "  interrupted: {} of {} run(s) done; run the same command again to finish the rest",
            runs,
            opts.seeds.len() * opts.schemes.len() as u64
        );
    }
    if report.unreadable_lines > 0 {
        let _ = writeln!(
            out,
            "  note: {} unreadable line(s) in {} were ignored (their seeds ran again)",
            report.unreadable_lines,
            report.results_path.display()
        );
    }
    let mut first_failing: Option<(usize, u64)> = None;
    for (&index, cell) in opts.schemes.iter().zip(&report.cells) {
        let label = &cell.scheme;
        let v = &cell.verdicts;
        let _ = write!(
            out,
            "  {label}: {}/{} seeds violating — mutual exclusion violated {}, resource safety violated {}, liveness stuck {}",
            cell.seeds_violating,
            cell.seeds_run,
            v.mutual_exclusion.violated,
            v.resource_safety.violated,
            v.liveness.stuck
        );
        if v.fifo_violated > 0 {
            let _ = write!(out, ", FIFO order lost {}", v.fifo_violated);
        }
        out.push('\n');
        if !cell.violating_seeds.is_empty() {
            let _ = writeln!(
                out,
                "    violating seeds: {}",
                seed_list(&cell.violating_seeds, cell.seeds_violating, 20)
            );
        }
        if cell.acquire_ms.runs > 0 {
            let _ = writeln!(
                out,
                "    acquire latency across seeds (median of each seed's quantile): p50 {} ms, p99 {} ms; max {} ms",
                fmt_ms(cell.acquire_ms.p50),
                fmt_ms(cell.acquire_ms.p99),
                fmt_ms(cell.acquire_ms.max)
            );
        }
        if cell.seeds_run > 0 {
            let _ = writeln!(
                out,
                "    longest wait for the lock (starvation): {} ms on the median seed, {} ms at most",
                fmt_ms(cell.max_wait_ms.median),
                fmt_ms(cell.max_wait_ms.max)
            );
        }
        if let Some(seed) = cell.first_failing_seed
            && first_failing.is_none_or(|(_, s)| seed < s)
        {
            first_failing = Some((index, seed));
        }
    }
    for e in &report.errors {
        let _ = writeln!(out, "  error: {e}");
    }
    match first_failing {
        Some((index, seed)) => {
            let _ = writeln!(
                out,
                "first failing seed: {seed} ({}); reproduce it with:\n  {}",
                scenario.schemes[index].label(),
                replay_command(scenario, index, seed)
            );
        }
        None => {
            let _ = writeln!(out, "no seed violated anything");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Arc<Scenario> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scenarios/kleppmann-gc-pause.json"
        );
        Arc::new(Scenario::load(Path::new(path)).unwrap())
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("locksim-sweep-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_second_sweep_skips_the_seeds_already_in_results_jsonl() {
        let scenario = scenario();
        let dir = temp_dir("resume");
        let opts = |seeds: &str| SweepOptions {
            seeds: SeedRange::parse(seeds).unwrap(),
            schemes: vec![0],
            jobs: 2,
            dir: dir.clone(),
            shard: None,
            progress: false,
        };
        let stop = AtomicBool::new(false);
        let first = sweep(&scenario, &opts("0..2"), &stop).unwrap();
        assert_eq!((first.new_runs, first.already_done), (3, 0));
        let lines = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
        assert_eq!(lines.lines().count(), 3);
        assert!(
            lines.contains(r#""scheme_spec":{"name":"set-nx-px-lua""#),
            "{lines}"
        );

        // Simulate a kill in the middle of writing a line, inside a character (the first byte
        // of "—").
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("results.jsonl"))
            .unwrap();
        f.write_all(b"{\"scenario\":\"kleppmann-gc-pause\",\"sch\xe2")
            .unwrap();

        let second = sweep(&scenario, &opts("0..4"), &stop).unwrap();
        assert_eq!((second.new_runs, second.already_done), (2, 3));
        assert_eq!(second.unreadable_lines, 1);
        assert_eq!(second.runs, 5);
        // kleppmann-gc-pause breaks every seed: all five are in the cell, once each.
        assert_eq!(second.cells[0].violating_seeds, vec![0, 1, 2, 3, 4]);
        let (back, bad) = read_results(&dir.join("results.jsonl")).unwrap();
        assert_eq!((back.len(), bad), (5, 1));
        let text = summary_text(&scenario, &opts("0..4"), &second);
        assert!(text.contains("2 new, 3 already in"), "{text}");
        assert!(
            text.contains("reproduce it with:\n  locksim replay ") && text.contains("--seed 0"),
            "{text}"
        );

        // A stopped sweep starts nothing and says so.
        stop.store(true, Ordering::SeqCst);
        let third = sweep(&scenario, &opts("0..9"), &stop).unwrap();
        assert_eq!(third.new_runs, 0);
        assert!(third.interrupted);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
