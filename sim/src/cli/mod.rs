//! The commands of the `locksim` binary, one module each, and what several of them share.
//!
//! Each command module starts with its `Args` (clap) and `execute`; `main.rs` only lists the
//! commands and parses the command line. Commands: `run`, `schemes`, `sweep`, `replay`,
//! `compare`, `check`, `report`, `shrink`, `hunt`, `schema`, `serve`, `bench`, `live`, `fidelity`,
//! `conform`. Their helpers: `batch` (many runs on worker threads with a stop flag), `catalog`
//! (which scenario files and schemes), `shard` (`--shard I/N`), `results` (results.jsonl and
//! run.json), `artifacts` (what a run writes), `interrupt` (Ctrl-C), `record` (`check
//! --record`), `invocation` (the printed commands start the way locksim was run).

pub mod artifacts;
pub mod batch;
pub mod bench;
pub mod catalog;
pub mod check;
pub mod compare;
pub mod conform;
pub mod fidelity;
pub mod floor;
pub mod hunt;
pub mod interrupt;
pub mod invocation;
pub mod live;
pub mod record;
pub mod replay;
pub mod report;
pub mod results;
pub mod run;
pub mod schema;
pub mod schemes;
pub mod serve;
pub mod shard;
pub mod shrink;
pub mod sweep;

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use crate::scenario::Scenario;
use crate::scenario::range::SeedRange;

/// Exit code of a command stopped by Ctrl-C (128 + SIGINT).
pub const INTERRUPTED: u8 = 130;

fn load(file: &Path) -> Result<Arc<Scenario>, String> {
    Scenario::load(file).map(Arc::new)
}

fn seed_range(text: &str) -> Result<SeedRange, String> {
    SeedRange::parse(text).map_err(|e| format!("--seeds: {e}"))
}

/// The exit code of a multi-run command: interrupted, failed, or success.
fn exit_code(interrupted: bool, failed: bool) -> ExitCode {
    if interrupted {
        ExitCode::from(INTERRUPTED)
    } else if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
