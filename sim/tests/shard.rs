//! `--shard I/N` and `locksim report`: N shards of a batch, merged, are the unsharded batch —
//! the same runs with the same trace hashes and the same summary; a missing shard is named;
//! `check --junit` writes well-formed JUnit XML.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use locksim::cli::catalog::load_all;
use locksim::cli::compare::{CompareOptions, compare, run_all, write_results};
use locksim::cli::report::merge;
use locksim::cli::shard::Shard;
use locksim::scenario::range::SeedRange;

use common::{catalog, locksim, temp_dir};

/// (scenario, scheme spec, seed) → trace hash, from results.jsonl files.
fn hashes(files: &[PathBuf]) -> BTreeMap<(String, String, u64), String> {
    let mut out = BTreeMap::new();
    for file in files {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            let r: serde_json::Value = serde_json::from_str(line).unwrap();
            let key = (
                r["scenario"].as_str().unwrap().to_string(),
                r["scheme_spec"].to_string(),
                r["seed"].as_u64().unwrap(),
            );
            assert!(out.insert(key, r["trace_hash"].to_string()).is_none());
        }
    }
    out
}

fn summary_without_wall_time(dir: &Path) -> serde_json::Value {
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    json.as_object_mut().unwrap().remove("wall_s");
    json
}

#[test]
fn three_shards_merged_are_the_unsharded_comparison_hash_for_hash() {
    let dir = temp_dir("shards");
    // A matrix file too: its `"schemes": "all"` rows are told apart by their scheme spec. In
    // the order `compare scenarios/` runs them (a folder's files before its subfolders), which
    // the merge restores from the results.
    let scenarios = load_all(&[
        catalog("kleppmann-gc-pause.json"),
        catalog("nemesis-setnx-expire-client-crashes.json"),
        catalog("matrix/08-holder-crash.json"),
    ])
    .unwrap();
    let rows = scenarios[2].schemes.len() as u64;
    assert!(rows > 20, "every row of locksim schemes");
    let runs = 40 + rows * 10;
    let opts = |out: PathBuf, shard: Option<Shard>| CompareOptions {
        seeds: None,
        seeds_per_scenario: 0,
        jobs: 2,
        out,
        shard,
        progress: false,
    };
    let stop = AtomicBool::new(false);
    compare(&scenarios, &opts(dir.join("whole"), None), &stop).unwrap();

    let mut shard_dirs = Vec::new();
    let mut sizes = Vec::new();
    for index in 0..3 {
        let out = dir.join(format!("shard-{index}"));
        let o = opts(out.clone(), Some(Shard { index, count: 3 }));
        let finished = run_all(&scenarios, &o, &stop).unwrap();
        write_results(&scenarios, &finished, &o.manifest(&finished), &out).unwrap();
        sizes.push(finished.planned);
        shard_dirs.push(out);
    }
    assert_eq!(sizes.iter().sum::<u64>(), runs, "every run in one shard");
    assert!(sizes.iter().all(|&n| n > 0), "{sizes:?}");

    let whole = hashes(&[dir.join("whole/results.jsonl")]);
    let sharded = hashes(
        &shard_dirs
            .iter()
            .map(|d| d.join("results.jsonl"))
            .collect::<Vec<_>>(),
    );
    assert_eq!(whole.len() as u64, runs);
    assert_eq!(whole, sharded);

    // The merge finds the scenarios from the results and writes the same report.
    let merged = merge(&shard_dirs, &[]).unwrap();
    assert_eq!(
        merged.seeds_for(&scenarios[0]),
        SeedRange { first: 0, last: 19 }
    );
    merged.write(&dir.join("merged")).unwrap();
    assert_eq!(
        summary_without_wall_time(&dir.join("whole")),
        summary_without_wall_time(&dir.join("merged"))
    );
    for file in ["index.html", "report.md"] {
        assert!(dir.join("merged").join(file).is_file());
    }
    let timeline = "runs/kleppmann-gc-pause/set-nx-px-lua/seed-0/timeline.svg";
    assert_eq!(
        std::fs::read(dir.join("whole").join(timeline)).unwrap(),
        std::fs::read(dir.join("merged").join(timeline)).unwrap(),
        "the first failing seed, run again, draws the same timeline"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A JUnit testcase: (classname, name).
type Testcase = (String, String);

/// `locksim check FILE --shard I/2 --out DIR/kI --junit DIR/kI.xml` for both shards: each
/// shard's folder, stdout and JUnit testcases.
fn check_two_shards(dir: &Path, file: &str) -> Vec<(PathBuf, String, Vec<Testcase>)> {
    (0..2)
        .map(|index| {
            let out = dir.join(format!("k{index}"));
            let junit = dir.join(format!("k{index}.xml"));
            let output = locksim(&[
                "check",
                file,
                "--shard",
                &format!("{index}/2"),
                "--out",
                out.to_str().unwrap(),
                "--junit",
                junit.to_str().unwrap(),
                "--jobs",
                "2",
            ]);
            let stdout = String::from_utf8_lossy(&output.stdout).to_string();
            assert!(output.status.success(), "{stdout}");
            let cases = testcases(&std::fs::read_to_string(&junit).unwrap()).0;
            (out, stdout, cases)
        })
        .collect()
}

/// `locksim report SHARDS... --check --junit`: its exit status, stdout and JUnit XML.
fn report_check(dir: &Path, shards: &[&Path]) -> (bool, String, String) {
    let junit = dir.join("merged.xml");
    let mut args = vec!["report".to_string()];
    args.extend(shards.iter().map(|d| d.display().to_string()));
    for arg in [
        "--out",
        dir.join("merged").to_str().unwrap(),
        "--check",
        "--junit",
    ] {
        args.push(arg.to_string());
    }
    args.push(junit.display().to_string());
    let output = locksim(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let xml = std::fs::read_to_string(&junit).unwrap_or_default();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).to_string(),
        xml,
    )
}

/// A JUnit file's testcases and its `failures` count.
fn testcases(xml: &str) -> (Vec<Testcase>, String) {
    let doc = roxmltree::Document::parse(xml).expect("well-formed JUnit XML");
    let cases = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|n| {
            (
                n.attribute("classname").unwrap().to_string(),
                n.attribute("name").unwrap().to_string(),
            )
        })
        .collect();
    let failures = doc
        .root_element()
        .attribute("failures")
        .unwrap_or("")
        .to_string();
    (cases, failures)
}

#[test]
fn sharded_checks_merge_into_a_verdict_and_a_missing_shard_is_named() {
    let dir = temp_dir("check-shards");
    let file = catalog("nemesis-setnx-expire-client-crashes.json");
    let shards = check_two_shards(&dir, file.to_str().unwrap());
    for (index, (_, stdout, cases)) in shards.iter().enumerate() {
        assert!(stdout.contains(&format!("shard {index}/2")), "{stdout}");
        assert_eq!(
            cases,
            &[(
                "nemesis-setnx-expire-client-crashes".to_string(),
                "setnx-expire".to_string()
            )]
        );
    }
    let (k0, k1) = (&shards[0].0, &shards[1].0);
    let (passed, stdout, xml) = report_check(&dir, &[k0, k1]);
    assert!(passed, "{stdout}");
    assert_eq!(
        testcases(&xml).1,
        "0",
        "expect_some (stuck on some seed) is met over both shards: {xml}"
    );

    let output = locksim(&[
        "report",
        k0.to_str().unwrap(),
        "--out",
        dir.join("partial").to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("shard(s) 1/2 missing"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_junit_lists_each_mismatch_with_its_replay_command() {
    let dir = temp_dir("junit");
    let text = std::fs::read_to_string(catalog("kleppmann-gc-pause.json")).unwrap();
    let wrong = text
        .replace("\"seeds\": \"0..19\"", "\"seeds\": \"0..1\"")
        .replace(
            "\"resource_safety\": \"violated\"",
            "\"resource_safety\": \"holds\"",
        );
    let file = dir.join("wrong <&> \"quoted\".json");
    std::fs::write(&file, wrong).unwrap();
    let junit = dir.join("junit.xml");
    let output = locksim(&[
        "check",
        file.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed despite <&> in the path");
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(
        failure.attribute("message"),
        Some("2 expectation(s) not met on 2 run(s)")
    );
    let text = failure.text().unwrap();
    assert!(
        text.contains("seed 1: resource_safety expected holds, got violated"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "reproduce: {} replay",
            env!("CARGO_BIN_EXE_locksim")
        )) && text.contains("wrong <&> "),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `"schemes": "all"` file checked in two shards: one JUnit testcase per row it ran, and
/// the merged verdict over both shards judges every row's `expect_by_scheme` /
/// `expect_some_by_scheme`.
#[test]
fn a_matrix_file_checks_in_shards_with_one_testcase_per_row() {
    let dir = temp_dir("matrix-shards");
    let file = catalog("matrix/10-random-client-crashes.json");
    let rows = load_all(std::slice::from_ref(&file)).unwrap()[0]
        .schemes
        .len();
    let shards = check_two_shards(&dir, file.to_str().unwrap());
    for (_, _, cases) in &shards {
        assert!(!cases.is_empty() && cases.len() <= rows, "{cases:?}");
        assert!(
            cases
                .iter()
                .all(|(c, _)| c == "matrix-random-client-crashes")
        );
    }
    let (passed, stdout, xml) = report_check(&dir, &[&shards[0].0, &shards[1].0]);
    assert!(passed, "{stdout}");
    let (cases, failures) = testcases(&xml);
    assert_eq!(cases.len(), rows, "one testcase per row: {cases:?}");
    assert_eq!(failures, "0", "{xml}");
    let _ = std::fs::remove_dir_all(&dir);
}
