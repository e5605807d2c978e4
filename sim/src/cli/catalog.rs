//! Which scenario files a command works on (`compare`/`check` take files and folders; a folder
//! means every `*.json` in it and in its subfolders, `scenarios/matrix/` included; nothing
//! means `scenarios/`), which schemes of a scenario, and the command that replays one seed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cli::artifacts::shell_quote;
use crate::scenario::Scenario;

/// The catalog folder `compare` and `check` use by default.
pub const DEFAULT_CATALOG: &str = "scenarios";

/// Expands files and folders into scenario files: a folder gives its `*.json` files and those
/// of its subfolders, recursively, sorted by path (a folder's own files before its
/// subfolders', each level by name), so the order never depends on the file system. Errors
/// name the path.
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
            let before = files.len();
            json_files_under(path, &mut files)?;
            if files.len() == before {
                return Err(format!(
                    "{}: no *.json scenario files in it",
                    path.display()
                ));
            }
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// Appends the `*.json` files of `dir` (sorted), then those of each subfolder (sorted).
pub fn json_files_under(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: cannot read the folder: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    files.extend(
        entries
            .iter()
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
            .cloned(),
    );
    for sub in entries.iter().filter(|p| p.is_dir()) {
        json_files_under(sub, files)?;
    }
    Ok(())
}

/// Sorts scenario files as `json_files_under` lists a folder: at each level the files (by
/// name) before the subfolders (by name) — so that `report` orders the scenarios it finds in
/// results as the unsharded `compare` of that folder did.
pub fn sort_as_folder_walk(files: &mut [PathBuf]) {
    files.sort_by_cached_key(|path| {
        let parts: Vec<_> = path
            .components()
            .map(|c| c.as_os_str().to_owned())
            .collect();
        let last = parts.len().saturating_sub(1);
        parts
            .into_iter()
            .enumerate()
            .map(|(i, part)| (i != last, part))
            .collect::<Vec<_>>()
    });
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

/// The one scheme `--scheme` selects, for a command that works on one row (`what` it does
/// with it names it in the message when the selection is several rows).
pub fn select_one_scheme(
    scenario: &Scenario,
    file: &Path,
    scheme: Option<&str>,
    what: &str,
) -> Result<usize, String> {
    let schemes = select_schemes(scenario, file, scheme)?;
    let [scheme] = schemes[..] else {
        let labels: Vec<String> = scenario.schemes.iter().map(|s| s.label()).collect();
        return Err(format!(
            "--scheme: {} runs {} schemes ({}): name the one to {what}",
            file.display(),
            labels.len(),
            labels.join(", ")
        ));
    };
    Ok(scheme)
}

/// The indices of the schemes `--scheme` selects (all without it): the rows with that label
/// (`redlock:redsync`), or when none has it, every row of that scheme id. `file` is for the
/// message.
pub fn select_schemes(
    scenario: &Scenario,
    file: &Path,
    scheme: Option<&str>,
) -> Result<Vec<usize>, String> {
    let rows = 0..scenario.schemes.len();
    let by_label: Vec<usize> = rows
        .clone()
        .filter(|&i| scheme.is_none_or(|s| s == scenario.schemes[i].label()))
        .collect();
    let indices = if by_label.is_empty() {
        rows.filter(|&i| scheme.is_some_and(|s| s == scenario.schemes[i].name))
            .collect()
    } else {
        by_label
    };
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

/// A scheme as `{ "name": id, ...params }`: how results name the scheme they ran, and how
/// `shrink` writes it back.
pub fn scheme_spec_json(scenario: &Scenario, index: usize) -> serde_json::Value {
    let spec = &scenario.schemes[index];
    let mut map = serde_json::Map::new();
    map.insert("name".into(), serde_json::Value::String(spec.name.clone()));
    map.extend(spec.params.clone());
    serde_json::Value::Object(map)
}

/// The exact command that reproduces one seed (`--scheme` when the scenario sweeps schemes),
/// started the way locksim was run (`cli::invocation`).
pub fn replay_command(scenario: &Scenario, scheme: usize, seed: u64) -> String {
    let mut cmd = format!("replay {} --seed {seed}", shell_quote(&scenario.path));
    if scenario.schemes.len() > 1 {
        cmd.push_str(&format!(
            " --scheme {}",
            shell_quote(&scenario.schemes[scheme].label())
        ));
    }
    crate::cli::invocation::command(&cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Folders are walked recursively, in a fixed order: a folder's files by name, then its
    /// subfolders' by name (`scenarios/*.json`, then `scenarios/matrix/*.json`).
    #[test]
    fn folders_expand_recursively_in_a_fixed_order() {
        let dir = std::env::temp_dir().join(format!("locksim-catalog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for file in [
            "b.json",
            "a.json",
            "z/c.json",
            "m/y/e.json",
            "m/d.json",
            "m/notes.txt",
        ] {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "{}").unwrap();
        }
        let found: Vec<String> = scenario_files(std::slice::from_ref(&dir))
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap().display().to_string())
            .collect();
        assert_eq!(
            found,
            ["a.json", "b.json", "m/d.json", "m/y/e.json", "z/c.json"]
        );
        let mut shuffled: Vec<PathBuf> = ["z/c.json", "m/y/e.json", "b.json", "m/d.json", "a.json"]
            .iter()
            .map(|f| dir.join(f))
            .collect();
        sort_as_folder_walk(&mut shuffled);
        let sorted: Vec<String> = shuffled
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap().display().to_string())
            .collect();
        assert_eq!(
            sorted, found,
            "report orders the files it finds as the walk did"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `--scheme redlock` means the row labelled `redlock`, not every preset of it; an id that
    /// labels no row selects all of its rows.
    #[test]
    fn a_label_selects_its_row_an_id_all_of_them() {
        let s = Scenario::parse(r#"{ "name": "s", "schemes": "all" }"#, "s.json").unwrap();
        let pick = |name: &str| {
            select_schemes(&s, Path::new("s.json"), Some(name))
                .unwrap()
                .iter()
                .map(|&i| s.schemes[i].label())
                .collect::<Vec<_>>()
        };
        assert_eq!(pick("redlock"), ["redlock"]);
        assert_eq!(pick("redlock:redsync"), ["redlock:redsync"]);
        let lua = Scenario::parse(
            r#"{ "name": "s", "schemes": [{ "name": "set-nx-px-lua", "preset": "redis-py" }] }"#,
            "s.json",
        )
        .unwrap();
        assert_eq!(
            select_schemes(&lua, Path::new("s.json"), Some("set-nx-px-lua")).unwrap(),
            [0]
        );
    }
}
