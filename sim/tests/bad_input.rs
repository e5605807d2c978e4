//! Bad input never hangs, aborts or panics (issue 17): each case the issue names ends with exit
//! 2 and an error naming the file, the field and the limit; a run whose fields multiply into too
//! much work stops at its history's budget with an error; a results.jsonl whose last line was
//! cut inside a character is resumed like any torn line.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{catalog, locksim, temp_dir};

use locksim::runner::run_within;
use locksim::scenario::Scenario;
use locksim::world::history::Budget;
use serde_json::{Value, json};

/// The GC-pause scenario with `change` applied, written to `dir/name.json`.
fn variant(dir: &Path, name: &str, change: impl FnOnce(&mut Value)) -> PathBuf {
    let text = std::fs::read_to_string(catalog("kleppmann-gc-pause.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    change(&mut doc);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
    path
}

/// A change to a scenario document.
type Change = Box<dyn FnOnce(&mut Value)>;

#[test]
fn the_issues_cases_are_errors_naming_the_file_and_the_field() {
    let dir = temp_dir("cases");
    let cases: Vec<(&str, Change, &str)> = vec![
        (
            "endless",
            Box::new(|d| {
                d["duration_ms"] = json!(1_000_000_000_000_000u64);
                d["clients"]["acquisitions"] = json!(u32::MAX);
            }),
            "duration_ms: 1000000000000000 ms is longer than a run may be (limit 3600000 ms",
        ),
        (
            "acquisitions",
            Box::new(|d| d["clients"]["acquisitions"] = json!(u32::MAX)),
            "clients.acquisitions: 4294967295 per worker (limit 1000000",
        ),
        (
            "empty-groups",
            Box::new(|d| {
                d["faults"] = json!([{ "kind": "partition", "groups": [[], []], "at_ms": 10 }]);
            }),
            "faults[0].groups[0]: an empty group",
        ),
        (
            "node-twice",
            Box::new(|d| {
                d["faults"] = json!([{ "kind": "partition", "groups": [["client-1", "client-1"]], "at_ms": 10 }]);
            }),
            "faults[0].groups[0][1]: \"client-1\" is already in this group",
        ),
        (
            "apart-nowhere",
            Box::new(|d| {
                d["faults"] = json!([{ "kind": "partition", "groups": [["client-1"], ["client-1"]], "at_ms": 10 }]);
            }),
            "faults[0].groups: cuts no link",
        ),
        (
            "one-master-majorities",
            Box::new(|d| {
                d["faults"] = json!([{ "kind": "partition", "at_ms": 10,
                                       "groups": [["{first_majority}"], ["{last_majority}"]] }]);
            }),
            "faults[0].groups: cuts no link",
        ),
        (
            "extend-storm",
            Box::new(|d| d["clients"]["extend"] = json!({ "every_ms": 1 })),
            "clients.extend.every_ms: an extension every 1 ms is too frequent (limit: at least 10 ms)",
        ),
        (
            "owners",
            Box::new(|d| {
                d["clients"]["count"] = json!(1000);
                d["clients"]["threads"] = json!(64);
            }),
            "clients.threads: 1000 clients × 64 threads is 64000 lock owners (limit 1000)",
        ),
        (
            "lua-work",
            Box::new(|d| d["topology"]["lua_time_limit_work"] = json!(u64::MAX)),
            "topology.lua_time_limit_work: must be from 1 to 2000000000 (ten times the default), got 18446744073709551615",
        ),
        (
            "lua-memory",
            Box::new(|d| d["topology"]["lua_memory_limit_mb"] = json!(1 << 20)),
            "topology.lua_memory_limit_mb: must be from 1 to 4096, got 1048576",
        ),
        (
            "value",
            Box::new(|d| d["scheme"] = json!({ "name": "set", "value": "x".repeat(50 << 20) })),
            "scheme.value: a string of 52428800 bytes (limit 65536 bytes)",
        ),
        (
            "nemesis",
            Box::new(|d| {
                d["nemesis"] = json!({ "pause": { "every_ms": [1, 1], "duration_ms": 1 } });
            }),
            "nemesis.pause.every_ms: faults 1 ms apart are too frequent (limit: at least 10 ms)",
        ),
        (
            "seeds",
            Box::new(|d| d["seeds"] = json!("0..18446744073709551615")),
            "seeds: \"0..18446744073709551615\": 18446744073709551616 seeds (limit 1000000",
        ),
    ];
    for (name, change, expected) in cases {
        let file = variant(&dir, name, change);
        let out = locksim(&["run", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        let want = format!("locksim: error: {}: {expected}", file.display());
        assert!(
            stderr.starts_with(&want),
            "{name}:\n{stderr}\nwanted {want}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A command may not list more runs than it could ever finish (schemes × seeds).
#[test]
fn too_many_runs_for_one_command_are_an_error() {
    let file = catalog("schemes-no-faults.json");
    for command in ["sweep", "check", "compare", "bench"] {
        let out = locksim(&[command, file.to_str().unwrap(), "--seeds", "0..999999"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.starts_with("locksim: error: 15000000 runs (scenarios × schemes × seeds) in one command (limit 1000000)"),
            "{command}: {stderr}"
        );
    }
    // `"schemes": "all"` is one run per matrix row on each seed.
    let all = catalog("matrix/01-no-faults.json");
    let out = locksim(&["check", all.to_str().unwrap(), "--seeds", "0..99999"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("locksim: error: 2400000 runs (scenarios × schemes × seeds)"),
        "{stderr}"
    );
}

/// What no single field bounds, the history's budget does: the run stops and says which fields
/// to lower.
#[test]
fn a_run_past_its_history_budget_stops_with_an_error() {
    let path = catalog("kleppmann-gc-pause.json");
    let scenario = Arc::new(Scenario::load(&path).unwrap());
    for budget in [
        Budget {
            events: 500,
            bytes: usize::MAX,
            script_work: u64::MAX,
        },
        Budget {
            events: usize::MAX,
            bytes: 50_000,
            script_work: u64::MAX,
        },
    ] {
        let err = match run_within(&scenario, 0, 1, budget) {
            Ok(_) => panic!("{budget:?}: the run should stop"),
            Err(e) => e,
        };
        assert!(
            err.starts_with(&format!(
                "{}: set-nx-px-lua seed 1: stopped at ",
                path.display()
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!("(limit {} events", budget.events))
                && err.contains("shorten duration_ms, or lower clients.count"),
            "{err}"
        );
    }
    assert!(run_within(&scenario, 0, 1, Budget::DEFAULT).is_ok());
}

/// A runaway `script` scheme records a few events per attempt however long each runs, and
/// simulated time stands still meanwhile: the work of the run's scripts together is counted
/// into its budget, so a thousand retries stop with an error naming the fields to lower
/// (issue 31: 1,000 clients x 1,000 acquisitions passed validation and would have taken ~300
/// CPU-hours). Small limits here: 1,000,000 units per script, 10,000,000 for the run.
#[test]
fn runaway_scripts_stop_at_the_runs_script_work_budget() {
    let scenario = Scenario::parse(
        r#"{ "name": "runaway", "duration_ms": 600000,
             "topology": { "lua_time_limit_work": 1000000 },
             "scheme": { "name": "script",
                         "acquire": { "script": "while true do end", "keys": ["{key}"],
                                      "success": { "status": "OK" } },
                         "release": { "script": "return 1", "keys": ["{key}"],
                                      "success": { "equals": 1 } } },
             "clients": { "count": 10, "acquisitions": 1000 } }"#,
        "runaway.json",
    )
    .unwrap();
    let budget = Budget {
        script_work: 10_000_000,
        ..Budget::DEFAULT
    };
    let err = match run_within(&Arc::new(scenario), 0, 1, budget) {
        Ok(out) => panic!("the run should stop: {:?}", out.result),
        Err(e) => e,
    };
    assert!(
        err.starts_with("runaway.json: script seed 1: stopped at "),
        "{err}"
    );
    assert!(
        err.contains("its Lua scripts and their large replies did ")
            && err.contains("units of work (limit 10000000 for a run")
            && err.contains("lower topology.lua_time_limit_work, clients.acquisitions"),
        "{err}"
    );
}

/// A script that returns a large reply at every attempt is stopped by the same budget: its
/// replies count. Here 100 KB from one `string.rep`, a few instructions and never a checkpoint
/// of the script's own work, so only the replies can spend the budget.
#[test]
fn large_replies_count_into_the_runs_work_budget() {
    let scenario = Scenario::parse(
        r#"{ "name": "large", "duration_ms": 600000,
             "scheme": { "name": "script",
                         "acquire": { "script": "return string.rep('x', 100000)",
                                      "keys": ["{key}"], "success": { "status": "OK" } },
                         "release": { "script": "return 1", "keys": ["{key}"],
                                      "success": { "equals": 1 } } },
             "clients": { "count": 10, "acquisitions": 1000 } }"#,
        "large.json",
    )
    .unwrap();
    let budget = Budget {
        script_work: 20_000_000,
        ..Budget::DEFAULT
    };
    let err = match run_within(&Arc::new(scenario), 0, 1, budget) {
        Ok(out) => panic!("the run should stop: {:?}", out.result),
        Err(e) => e,
    };
    assert!(
        err.starts_with("large.json: script seed 1: stopped at ")
            && err.contains("units of work (limit 20000000 for a run"),
        "{err}"
    );
}

#[test]
fn a_results_line_cut_inside_a_character_is_skipped_and_its_seed_runs_again() {
    let dir = temp_dir("torn");
    let file = catalog("kleppmann-gc-pause.json");
    let sweep = |seeds: &str| {
        locksim(&[
            "sweep",
            file.to_str().unwrap(),
            "--seeds",
            seeds,
            "--jobs",
            "2",
            "--out",
            dir.to_str().unwrap(),
        ])
    };
    assert_eq!(sweep("0..1").status.code(), Some(0));
    let results = dir.join("results.jsonl");
    let mut bytes = std::fs::read(&results).unwrap();
    // The first byte of "—" (e2 80 94): the cut a kill leaves inside a character.
    bytes.extend_from_slice(b"{\"scenario\":\"kleppmann-gc-pause\",\"seed\":2,\"x\":\"\xe2");
    std::fs::write(&results, bytes).unwrap();
    let out = sweep("0..2");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 new, 2 already in"), "{stdout}");
    assert!(stdout.contains("note: 1 unreadable line(s) in"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}
