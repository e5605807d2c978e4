//! `locksim run FILE`: one scenario on one seed (every scheme it lists, or `--scheme`), printed
//! as the summary or as the result object, optionally written out (`--out`).

use std::path::PathBuf;
use std::process::ExitCode;

use super::artifacts::{path_component, write_run};
use super::catalog::select_schemes;
use crate::runner::run;

#[derive(clap::Args)]
pub struct Args {
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
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let scenario = super::load(&args.file)?;
    let seed = args.seed.unwrap_or(scenario.seed);
    let indices = select_schemes(&scenario, &args.file, args.scheme.as_deref())?;
    for &index in &indices {
        let output = run(&scenario, index, seed)?;
        if args.json {
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
        if let Some(dir) = &args.out {
            let dir = if indices.len() > 1 {
                dir.join(path_component(&output.result.scheme))
            } else {
                dir.clone()
            };
            write_run(&dir, &scenario.for_scheme(index), &output)?;
            if !args.json {
                println!("wrote {}", dir.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
