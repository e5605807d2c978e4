//! `locksim fidelity [--repeat N] [--out docs/fidelity.md] [--simulated-only]`: runs every
//! probe of `crate::fidelity` in the simulation and against real redis-server/redis-sentinel
//! processes, and writes the comparison (`docs/fidelity.md`). SIGINT/SIGTERM stop it with
//! every real process reaped.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::fidelity;
use crate::live::process::install_stop_signals;
use crate::live::redis_server::Binaries;

#[derive(clap::Args)]
pub struct Args {
    /// Repeats of every probe on each side (seeds 0..N-1 in the simulation).
    #[arg(long, default_value_t = 10)]
    repeat: u32,
    /// Where the report goes.
    #[arg(long, default_value = "docs/fidelity.md")]
    out: PathBuf,
    /// Only the simulation's side (no redis-server needed).
    #[arg(long)]
    simulated_only: bool,
    /// The redis-server to run.
    #[arg(long, default_value = "redis-server")]
    redis_server: String,
    /// The redis-sentinel to run.
    #[arg(long, default_value = "redis-sentinel")]
    redis_sentinel: String,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    if args.repeat == 0 || args.repeat > 1000 {
        return Err(format!(
            "--repeat: give 1 to 1000 repeats, got {}",
            args.repeat
        ));
    }
    install_stop_signals();
    let dir = std::env::temp_dir().join(format!("locksim-fidelity-{}", std::process::id()));
    let binaries = Binaries {
        redis_server: args.redis_server.into(),
        redis_sentinel: args.redis_sentinel.into(),
    };
    let figures = fidelity::measure(args.repeat, args.simulated_only, binaries, &dir, &|what| {
        eprintln!("fidelity: {what}")
    });
    let _ = std::fs::remove_dir_all(&dir);
    let figures = figures?;
    let page = fidelity::report::markdown(&figures);
    std::fs::write(&args.out, &page)
        .map_err(|e| format!("{}: cannot write: {e}", args.out.display()))?;
    eprintln!("wrote {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}
