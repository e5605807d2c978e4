//! Which scenario files a command works on (`compare`/`check` take files and folders; a folder
//! means every `*.json` in it and in its subfolders; nothing means `scenarios/`), which schemes
//! of a scenario, and the command that replays one seed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cli::artifacts::shell_quote;
use crate::scenario::Scenario;

/// The catalog folder `compare` and `check` use by default.
pub const DEFAULT_CATALOG: &str = "scenarios";

/// Expands files and folders into scenario files: a folder gives the `*.json` files in it and
/// in its subfolders (`scenarios/incidents/`), sorted by path. Errors name the path.
pub fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let defaults = [PathBuf::from(DEFAULT_CATALOG)];
    let paths = if paths.is_empty() {
        &defaults[..]
    } else {
        paths
    };
    let mut files = Vec::new();
    for path in paths {
        let meta =
            std::fs::metadata(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            json_files_under(path, &mut found)?;
            if found.is_empty() {
                return Err(format!(
                    "{}: no *.json scenario files in it",
                    path.display()
                ));
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// Every `*.json` file in `dir` and its subfolders, in no particular order.
fn json_files_under(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: cannot read the folder: {e}", dir.display()))?;
    for path in entries.filter_map(|entry| entry.ok().map(|e| e.path())) {
        if path.is_dir() {
            json_files_under(&path, out)?;
        } else if path.is_file() && path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    Ok(())
}

/// Loads every file; two scenarios may not share a name (their results would mix).
pub fn load_all(files: &[PathBuf]) -> Result<Vec<Arc<Scenario>>, String> {
    let mut by_name: BTreeMap<String, String> = BTreeMap::new();
    let mut scenarios = Vec::new();
    for file in files {
        let scenario = Scenario::load(file)?;
        if let Some(other) = by_name.insert(scenario.name.clone(), scenario.path.clone()) {
            return Err(format!(
                "{}: scenario name \"{}\" is also used by {other}; names must be unique",
                scenario.path, scenario.name
            ));
        }
        scenarios.push(Arc::new(scenario));
    }
    Ok(scenarios)
}

/// The indices of the schemes `--scheme` selects (all without it). `file` is for the message.
pub fn select_schemes(
    scenario: &Scenario,
    file: &Path,
    scheme: Option<&str>,
) -> Result<Vec<usize>, String> {
    let indices: Vec<usize> = (0..scenario.schemes.len())
        .filter(|&i| {
            scheme.is_none_or(|s| s == scenario.schemes[i].label() || s == scenario.schemes[i].name)
        })
        .collect();
    if indices.is_empty() {
        let labels: Vec<String> = scenario.schemes.iter().map(|s| s.label()).collect();
        return Err(format!(
            "--scheme: {} has no scheme {:?} (it has: {})",
            file.display(),
            scheme.unwrap_or_default(),
            labels.join(", ")
        ));
    }
    Ok(indices)
}

/// Report labels of a scenario's schemes, unique within it: a label used twice (the same id
/// with other parameters) gets `#N`, its position in the list.
pub fn scheme_labels(scenario: &Scenario) -> Vec<String> {
    let labels: Vec<String> = scenario.schemes.iter().map(|s| s.label()).collect();
    labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if labels.iter().filter(|x| *x == l).count() > 1 {
                format!("{l}#{}", i + 1)
            } else {
                l.clone()
            }
        })
        .collect()
}

/// The exact command that reproduces one seed (`--scheme` when the scenario sweeps schemes).
pub fn replay_command(scenario: &Scenario, scheme: usize, seed: u64) -> String {
    let mut cmd = format!(
        "locksim replay {} --seed {seed}",
        shell_quote(&scenario.path)
    );
    if scenario.schemes.len() > 1 {
        cmd.push_str(&format!(
            " --scheme {}",
            shell_quote(&scenario.schemes[scheme].label())
        ));
    }
    cmd
}
