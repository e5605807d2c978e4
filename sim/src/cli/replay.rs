//! `locksim replay FILE --seed N`: re-runs one seed (same scenario + seed ⇒ the same trace) and
//! writes everything needed to understand it: `trace.jsonl`, `result.json`, `timeline.svg` and
//! `events.txt`, the readable log around each violation.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::artifacts::{path_component, write_file, write_run};
use crate::cli::catalog::select_schemes;
use crate::runner::{RunOutput, run};
use crate::scenario::Scenario;

#[derive(clap::Args)]
pub struct Args {
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
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let scenario = super::load(&args.file)?;
    let indices = select_schemes(&scenario, &args.file, args.scheme.as_deref())?;
    let base = args
        .out
        .unwrap_or_else(|| default_dir(&scenario, args.seed));
    for &index in &indices {
        let dir = if indices.len() > 1 {
            base.join(path_component(&scenario.schemes[index].label()))
        } else {
            base.clone()
        };
        let output = replay(&scenario, index, args.seed, &dir)?;
        print!(
            "{}",
            reports::text::summary(&output.result, &scenario.description)
        );
        println!(
            "wrote {0}/events.txt (the {1} events before and {2} after each violation), {0}/timeline.svg, {0}/trace.jsonl, {0}/result.json",
            dir.display(),
            EVENTS_BEFORE,
            EVENTS_AFTER
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Events shown before and after each violation in `events.txt`.
pub const EVENTS_BEFORE: usize = 40;
pub const EVENTS_AFTER: usize = 10;

/// Where a replay writes by default: `replay/<scenario>-seed<N>/`.
pub fn default_dir(scenario: &Scenario, seed: u64) -> PathBuf {
    Path::new("replay").join(format!("{}-seed{seed}", path_component(&scenario.name)))
}

/// The text of `events.txt`.
pub fn events_text(scenario: &Scenario, output: &RunOutput) -> String {
    let r = &output.result;
    reports::events::around_violations(
        &format!(
            "{} — scheme {} — seed {} — trace {}",
            r.scenario, r.scheme, r.seed, r.trace_hash
        ),
        &output.events,
        &r.violations,
        EVENTS_BEFORE,
        EVENTS_AFTER,
    ) + &format!(
        "\nreplay: {}\n",
        crate::cli::catalog::replay_command(
            scenario,
            scenario
                .schemes
                .iter()
                .position(|s| s.label() == r.scheme)
                .unwrap_or(0),
            r.seed
        )
    )
}

/// Runs one scheme of `scenario` on `seed` and writes the four files into `dir`.
pub fn replay(
    scenario: &std::sync::Arc<Scenario>,
    scheme: usize,
    seed: u64,
    dir: &Path,
) -> Result<RunOutput, String> {
    let output = run(scenario, scheme, seed)?;
    write_run(dir, &scenario.for_scheme(scheme), &output)?;
    write_file(&dir.join("events.txt"), events_text(scenario, &output))?;
    Ok(output)
}
