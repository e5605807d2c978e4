//! `locksim conform`: each conformance situation (`conformance/situations/`) run with the real
//! library against `locksim serve` and with the scheme that models it, compared command for
//! command (`crate::conform`); a summary per library. Exit 1 when any situation differs or
//! could not run.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::conform::real_side::RealSetup;
use crate::conform::situation::{load_situation, situation_files};

#[derive(clap::Args)]
pub struct Args {
    /// Situation files or folders (default: conformance/situations).
    paths: Vec<PathBuf>,
    /// Only the situations of this library (`redis-py@8.1.0`).
    #[arg(long)]
    library: Option<String>,
    /// Also print the transcripts of identical situations: the real library's (or the
    /// source's) beside the model's.
    #[arg(long)]
    show: bool,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let repo = std::env::current_dir().map_err(|e| format!("conform: {e}"))?;
    let paths = if args.paths.is_empty() {
        vec![repo.join("conformance/situations")]
    } else {
        args.paths
    };
    let setup = RealSetup {
        locksim: std::env::current_exe().map_err(|e| format!("conform: {e}"))?,
        suites: repo.join("target/client-suites"),
        repo: repo.clone(),
    };
    let libraries = repo.join("conformance/libraries");
    let mut summary: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut failed = false;
    for file in situation_files(&paths)? {
        let situation = load_situation(&file, &libraries)?;
        if args
            .library
            .as_ref()
            .is_some_and(|l| *l != situation.library.id)
        {
            continue;
        }
        let outcome = crate::conform::check(&setup, &situation);
        let entry = summary.entry(outcome.library.clone()).or_default();
        entry.1 += 1;
        match (&outcome.error, &outcome.mismatch) {
            (Some(error), _) => {
                failed = true;
                println!("{}: COULD NOT RUN: {error}", outcome.name);
            }
            (None, Some(mismatch)) => {
                failed = true;
                println!("{}: MISMATCH\n{mismatch}", outcome.name);
            }
            (None, None) => {
                entry.0 += 1;
                println!("{}: identical", outcome.name);
                if args.show
                    && let Some(both) = outcome.side_by_side()
                {
                    print!("{both}");
                }
            }
        }
    }
    println!("conform:");
    for (library, (identical, total)) in &summary {
        println!("  {library}: {identical}/{total} situations identical");
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
