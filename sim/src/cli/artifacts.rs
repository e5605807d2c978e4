//! What a run leaves on disk: `result.json`, `trace.jsonl` and `timeline.svg` (`run --out`,
//! `replay`, and the first failing seed of each `compare` cell all use [`write_run`]).

use std::path::Path;

use model::history::trace_jsonl;

use crate::runner::RunOutput;
use crate::scenario::Scenario;

/// Writes `content` to `path`, with an error that names the file.
pub fn write_file(path: &Path, content: impl AsRef<[u8]>) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    }
    std::fs::write(path, content).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// Writes `result.json`, `trace.jsonl` and `timeline.svg` of one run into `dir`; `scenario`
/// is the run's row (`Scenario::for_scheme`), whose Redis nodes the timeline shows.
pub fn write_run(dir: &Path, scenario: &Scenario, output: &RunOutput) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    write_file(
        &dir.join("result.json"),
        serde_json::to_string_pretty(&output.result).expect("results serialise") + "\n",
    )?;
    write_file(&dir.join("trace.jsonl"), trace_jsonl(&output.events))?;
    let timeline = reports::timeline::Timeline {
        title: format!(
            "{} — {} — seed {}",
            scenario.name, output.result.scheme, output.result.seed
        ),
        clients: scenario.owner_names(),
        servers: scenario.redis_names(),
        end_us: output.result.sim_ms * 1000,
        addresses: scenario
            .redis_names()
            .into_iter()
            .chain(scenario.sentinel_names())
            .map(|name| (crate::world::procs::node_ip(&name).to_string(), name))
            .collect(),
    };
    write_file(
        &dir.join("timeline.svg"),
        timeline.render(&output.events, &output.result.violations),
    )
}

/// A scenario or scheme name as one safe path component (and URL segment): letters, digits,
/// `.`, `_` and `-` are kept, anything else becomes `_`.
pub fn path_component(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    match safe.as_str() {
        "" | "." | ".." => format!("_{safe}"),
        _ => safe,
    }
}

/// Quotes `arg` for a POSIX shell when it needs it.
pub fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_safe_path_components() {
        assert_eq!(path_component("set-nx-px-lua"), "set-nx-px-lua");
        assert_eq!(path_component("redisson:wait"), "redisson_wait");
        assert_eq!(path_component("../x y"), ".._x_y");
        assert_eq!(path_component(".."), "_..");
        assert_eq!(shell_quote("scenarios/a.json"), "scenarios/a.json");
        assert_eq!(shell_quote("my file's.json"), r"'my file'\''s.json'");
    }
}
