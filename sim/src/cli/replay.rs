//! `locksim replay FILE --seed N`: re-runs one seed (same scenario + seed ⇒ the same trace) and
//! writes everything needed to understand it: `trace.jsonl`, `result.json`, `timeline.svg` and
//! `events.txt`, the readable log around each violation.

use std::path::{Path, PathBuf};

use crate::cli::artifacts::{path_component, write_file, write_run};
use crate::runner::{RunOutput, run};
use crate::scenario::Scenario;

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
    write_run(dir, scenario, &output)?;
    write_file(&dir.join("events.txt"), events_text(scenario, &output))?;
    Ok(output)
}
