//! What `sweep`, `compare` and `check --out` leave in their folder for `locksim report`:
//! `results.jsonl` (one run a line) and `run.json` (what was asked: the shard, the seed
//! policy, how many runs were planned and done; a sweep's describes its last invocation).

use std::path::Path;

use model::result::RunResult;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cli::artifacts::write_file;
use crate::cli::shard::Shard;

/// One line of `results.jsonl`: the run's result (the contract's object, so any line parses as
/// a `RunResult`), plus the full scheme it ran (id and parameters) and the scenario file, so
/// that `locksim report` can find the scenario again.
#[derive(Serialize)]
pub struct Line<'a> {
    #[serde(flatten)]
    pub result: &'a RunResult,
    pub scheme_spec: Value,
    pub scenario_file: &'a str,
}

/// A line read back (older lines may lack `scheme_spec` and `scenario_file`).
#[derive(Deserialize)]
pub struct StoredLine {
    #[serde(flatten)]
    pub result: RunResult,
    #[serde(default)]
    pub scheme_spec: Option<Value>,
    #[serde(default)]
    pub scenario_file: Option<String>,
}

/// `run.json`: one command's batch (or one shard of it).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// `sweep`, `compare` or `check`.
    pub command: String,
    pub shard: Option<Shard>,
    /// Which seeds each scenario ran (`compare`'s policy in words).
    pub seed_policy: String,
    pub runs_planned: u64,
    pub runs_done: u64,
    pub interrupted: bool,
    /// Runs that failed (a panic in the simulation), as their messages.
    pub errors: Vec<String>,
}

/// The file name of the manifest in a results folder.
pub const MANIFEST: &str = "run.json";
/// The file name of the results in a results folder.
pub const RESULTS: &str = "results.jsonl";

/// Writes `results.jsonl` and `run.json` into `dir`; `lines` in the order given.
pub fn write_batch<'a>(
    dir: &Path,
    lines: impl IntoIterator<Item = Line<'a>>,
    manifest: &Manifest,
) -> Result<(), String> {
    let mut text = String::new();
    for line in lines {
        text.push_str(&serde_json::to_string(&line).expect("results serialise"));
        text.push('\n');
    }
    write_file(&dir.join(RESULTS), text)?;
    write_file(
        &dir.join(MANIFEST),
        serde_json::to_string_pretty(manifest).expect("manifests serialise") + "\n",
    )
}

/// Reads a `results.jsonl`: its lines, and how many could not be read (cut short by a kill).
pub fn read_lines(path: &Path) -> Result<(Vec<StoredLine>, u64), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = Vec::new();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<StoredLine>(line) {
            Ok(l) => lines.push(l),
            Err(_) => bad += 1,
        }
    }
    Ok((lines, bad))
}

/// Reads a `run.json`, if the folder has one.
pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>, String> {
    let path = dir.join(MANIFEST);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: cannot read: {e}", path.display())),
    }
}
