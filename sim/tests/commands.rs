//! The multi-run commands end to end: `check` reports a wrong expectation, `compare` writes its
//! three files, `sweep` names the failing seed and its replay command, `replay` writes events.txt.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use locksim::cli::catalog::{load_all, scenario_files};
use locksim::cli::check::{CheckOptions, check};
use locksim::cli::compare::{CompareOptions, compare};
use locksim::scenario::range::SeedRange;

use common::{catalog, locksim, temp_dir};

/// The GC-pause scenario with a wrong expectation: the resource is said to stay safe.
fn wrong_expectation(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(catalog("kleppmann-gc-pause.json")).unwrap();
    let wrong = text
        .replace("\"seeds\": \"0..19\"", "\"seeds\": \"0..2\"")
        .replace(
            "\"resource_safety\": \"violated\"",
            "\"resource_safety\": \"holds\"",
        );
    assert_ne!(text, wrong);
    let path = dir.join("wrong.json");
    std::fs::write(&path, wrong).unwrap();
    path
}

#[test]
fn check_reports_a_wrong_expectation() {
    let dir = temp_dir("check");
    let file = wrong_expectation(&dir);

    // The library: every seed of the range is a mismatch, with its replay command.
    let scenarios = load_all(&scenario_files(std::slice::from_ref(&file)).unwrap()).unwrap();
    let opts = CheckOptions {
        seeds: None,
        jobs: 2,
        shard: None,
        progress: false,
    };
    let report = check(&scenarios, &opts, &AtomicBool::new(false)).unwrap();
    assert!(!report.passed());
    assert_eq!(report.runs, 3);
    assert_eq!(report.mismatches.len(), 3);
    let (first, replay) = &report.mismatches[0];
    assert_eq!(
        (first.scenario.as_str(), first.scheme.as_str(), first.seed),
        ("kleppmann-gc-pause", "set-nx-px-lua", Some(0))
    );
    assert_eq!(
        (first.property, first.expected.as_str()),
        ("resource_safety", "holds")
    );
    assert_eq!(first.got, "violated");
    assert!(replay.as_deref().unwrap().ends_with("wrong.json --seed 0"));

    // The binary: a non-zero exit and a message naming scenario, scheme, seed, expected and got.
    let out = locksim(&["check", file.to_str().unwrap(), "--jobs", "2"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "kleppmann-gc-pause [set-nx-px-lua] seed 0: resource_safety expected holds, got violated"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("check: FAILED"), "{stdout}");

    // The same scenario with its real expectation passes, with the one-line summary.
    let out = locksim(&[
        "check",
        catalog("kleppmann-gc-pause.json").to_str().unwrap(),
        "--seeds",
        "0..2",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert_eq!(
        stdout.trim(),
        "check: 1 scenarios, 3 runs, all expectations met"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compare_writes_the_three_files_and_the_failing_seed() {
    let dir = temp_dir("compare");
    let out = dir.join("report");
    let scenarios = load_all(&[catalog("kleppmann-gc-pause.json")]).unwrap();
    let opts = CompareOptions {
        seeds: Some(SeedRange::parse("3..5").unwrap()),
        seeds_per_scenario: 10,
        jobs: 2,
        out: out.clone(),
        shard: None,
        progress: false,
    };
    let summary = compare(&scenarios, &opts, &AtomicBool::new(false)).unwrap();
    assert_eq!(summary.runs, 3);
    let cell = summary.cell("kleppmann-gc-pause", "set-nx-px-lua").unwrap();
    assert_eq!(cell.stats.seeds_run, 3);
    assert_eq!(cell.stats.seeds_violating, 3);
    assert_eq!(cell.stats.first_failing_seed, Some(3));
    assert!(cell.mismatches.is_empty(), "{:?}", cell.mismatches);
    let timeline = cell.timeline.as_deref().unwrap();
    assert_eq!(
        timeline,
        "runs/kleppmann-gc-pause/set-nx-px-lua/seed-3/timeline.svg"
    );
    assert!(out.join(timeline).is_file());

    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        html.contains(
            r#"data-cell="cell-kleppmann-gc-pause--set-nx-px-lua" data-count="violating">3/3<"#
        ) && html.contains(timeline),
        "{html}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| kleppmann-gc-pause | set-nx-px-lua | corrupted | 3 | 3 |"),
        "{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(json["cells"][0]["seeds_violating"], 3);
    assert_eq!(
        json["cells"][0]["verdicts"]["resource_safety"]["violated"],
        3
    );
    // Without the matrix: the catalog's heat map and one latency chart of the cells.
    for chart in ["violations.svg", "cost-cells.svg"] {
        let svg = std::fs::read_to_string(out.join("charts").join(chart)).unwrap();
        assert!(svg.starts_with("<svg"), "{chart}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sweep_names_the_failing_seed_and_replay_writes_its_event_log() {
    let dir = temp_dir("sweep");
    let file = catalog("kleppmann-gc-pause.json");
    let file = file.to_str().unwrap();
    let sweep_dir = dir.join("sweep");
    let out = locksim(&[
        "sweep",
        file,
        "--seeds",
        "0..3",
        "--out",
        sweep_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("4/4 seeds violating"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "reproduce it with:\n  {} replay {file} --seed 0",
            env!("CARGO_BIN_EXE_locksim")
        )),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(sweep_dir.join("results.jsonl"))
            .unwrap()
            .lines()
            .count(),
        4
    );

    let replay_dir = dir.join("replay");
    let out = locksim(&[
        "replay",
        file,
        "--seed",
        "0",
        "--out",
        replay_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    for name in ["trace.jsonl", "result.json", "timeline.svg", "events.txt"] {
        assert!(replay_dir.join(name).is_file(), "{name}");
    }
    let events = std::fs::read_to_string(replay_dir.join("events.txt")).unwrap();
    assert!(
        events.contains("== violation 1: mutual_exclusion"),
        "{events}"
    );
    assert!(
        events.contains(" ms  client-2  acquired token="),
        "{events}"
    );

    // Same seed, same trace: the sweep's line and the replay agree.
    let line = std::fs::read_to_string(sweep_dir.join("results.jsonl")).unwrap();
    let replayed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(replay_dir.join("result.json")).unwrap())
            .unwrap();
    let hash = replayed["trace_hash"].as_str().unwrap();
    assert!(line.contains(hash));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_and_files_are_clear_errors() {
    let out = locksim(&["check", "/nonexistent/scenario.json"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/nonexistent/scenario.json: cannot read"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));
    let out = locksim(&[
        "sweep",
        catalog("kleppmann-gc-pause.json").to_str().unwrap(),
        "--seeds",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--seeds: \"x\" is not a seed range"));
}
