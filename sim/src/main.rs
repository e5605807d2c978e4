//! `locksim`: run lock scenarios on a simulated Redis and judge them.
//!
//! The command line only: which commands there are and how they are parsed. Each command is
//! `locksim::cli::<command>` (its arguments and what it does).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use locksim::cli;

/// mimalloc: a simulation allocates and frees small objects all the time (buffers, events,
/// futures); it cut CPU 12–18 % against glibc's allocator with identical trace hashes (issue 15).
/// It builds from C source with the compiler the vendored Lua already needs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    Run(cli::run::Args),
    /// List every lock scheme: id, one-line summary, source.
    Schemes(cli::schemes::Args),
    /// Run one scenario over many seeds; stream each result to DIR/results.jsonl (seeds already
    /// there are skipped) and summarise: verdicts, violating seeds, latency, the replay command.
    Sweep(cli::sweep::Args),
    /// Re-run one seed and write its trace, result, timeline and a readable event log around
    /// each violation (events.txt).
    Replay(cli::replay::Args),
    /// Compare every scheme on every scenario: index.html, report.md and summary.json.
    Compare(cli::compare::Args),
    /// The regression: every scenario's `expect` on every seed of its range; exit 1 on a mismatch.
    Check(cli::check::Args),
    /// Merge the results of shards (`--shard I/N` of sweep, compare, check) into one report:
    /// index.html, report.md and summary.json, as compare writes them.
    Report(cli::report::Args),
    /// Shrink a failing seed to a minimal scripted fault schedule that breaks the same
    /// verdicts, written as a new scenario file with `expect` filled in.
    Shrink(cli::shrink::Args),
    /// Search fault schedules drawn from the scenario's nemesis for one that breaks a verdict,
    /// guided by marks (swarm draws, a corpus, AFL-style mutations); shrink what it finds.
    Hunt(cli::hunt::Args),
    /// Print the JSON Schema of scenario files (docs/scenario.schema.json is its output).
    Schema(cli::schema::Args),
    /// Serve the simulated Redis on a real TCP port (real clock), for redis-cli, client
    /// libraries and redis-benchmark.
    Serve(cli::serve::Args),
    /// Measure simulator speed: seeds per second and simulated seconds per wall second.
    Bench(cli::bench::Args),
    /// Run a scenario on the real clock with real client processes: the built-in scheme, or
    /// your own lock after `--` (driver protocol: docs/live.md). Not replayable.
    Live(cli::live::Args),
    /// A built-in scheme as a live client process (started by `locksim live`).
    #[command(hide = true)]
    LiveAdapter(cli::live::AdapterArgs),
    /// Measure the simulated world against real redis-server and redis-sentinel processes
    /// (probes on both sides) and write docs/fidelity.md.
    Fidelity(cli::fidelity::Args),
    /// Run each conformance situation with the real lock library (against locksim serve) and
    /// with the scheme that models it; compare them command for command.
    Conform(cli::conform::Args),
}

fn main() -> ExitCode {
    restore_sigpipe();
    cli::invocation::record();
    let result = match Cli::parse().command {
        Command::Run(args) => cli::run::execute(args),
        Command::Schemes(args) => cli::schemes::execute(args),
        Command::Sweep(args) => cli::sweep::execute(args),
        Command::Replay(args) => cli::replay::execute(args),
        Command::Compare(args) => cli::compare::execute(args),
        Command::Check(args) => cli::check::execute(args),
        Command::Report(args) => cli::report::execute(args),
        Command::Shrink(args) => cli::shrink::execute(args),
        Command::Hunt(args) => cli::hunt::execute(args),
        Command::Schema(args) => cli::schema::execute(args),
        Command::Serve(args) => cli::serve::execute(args),
        Command::Bench(args) => cli::bench::execute(args),
        Command::Live(args) => cli::live::execute(args),
        Command::LiveAdapter(args) => cli::live::execute_adapter(args),
        Command::Fidelity(args) => cli::fidelity::execute(args),
        Command::Conform(args) => cli::conform::execute(args),
    };
    result.unwrap_or_else(|message| {
        eprintln!("locksim: error: {message}");
        ExitCode::from(2)
    })
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
