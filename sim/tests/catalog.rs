//! Every scenario of the catalog (`scenarios/*.json`) gives the verdicts its `expect` promises,
//! on every seed of its range, for every scheme it sweeps (the CI regression set). The fault
//! matrix (`scenarios/matrix/`, ~6,000 runs) is checked in release by `locksim check` in CI;
//! `tests/matrix.rs` runs each of its files on one seed here.

use std::path::PathBuf;
use std::sync::Arc;

use locksim::runner::{default_jobs, run_parallel};
use locksim::scenario::Scenario;
use locksim::scenario::expect::mismatches;

/// Every scenario file of the catalog, subfolders included (`incidents/`, `shrunk/`), sorted by path.
fn catalog() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios"));
    let mut files = Vec::new();
    locksim::cli::catalog::json_files_under(&dir, &mut files)
        .expect("the scenarios/ catalog exists");
    files.sort();
    files
}

#[test]
fn every_catalog_scenario_meets_its_expectations() {
    let files = catalog();
    assert!(files.len() >= 3, "the catalog has its scenarios");
    let mut failures = Vec::new();
    for file in files {
        let scenario = Arc::new(Scenario::load(&file).unwrap_or_else(|e| panic!("{e}")));
        for scheme in 0..scenario.schemes.len() {
            let mut results = Vec::new();
            let work = scenario.seeds.iter().map(|seed| (scheme, seed)).collect();
            run_parallel(&scenario, work, default_jobs(), |output| {
                results.push(output.unwrap_or_else(|e| panic!("{e}")).result)
            });
            results.sort_by_key(|r| r.seed);
            assert_eq!(results.len() as u64, scenario.seeds.len());
            let (expect, expect_some) = scenario.expectations(scheme);
            failures.extend(mismatches(&expect, &expect_some, &results));
        }
    }
    assert!(
        failures.is_empty(),
        "catalog mismatches:\n{}",
        failures
            .iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The acceptance figures for the GC-pause pair, checked directly on the counts.
#[test]
fn the_fenced_pause_rejects_the_stale_write_every_time() {
    let file = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/kleppmann-gc-pause-fenced.json"
    ));
    let scenario = Arc::new(Scenario::load(&file).unwrap());
    let work = scenario.seeds.iter().map(|seed| (0, seed)).collect();
    run_parallel(&scenario, work, default_jobs(), |output| {
        let r = output.unwrap().result;
        assert!(
            r.counts.stale_writes_rejected >= 1,
            "seed {}: {:?}",
            r.seed,
            r.counts
        );
        assert!(
            r.counts.lock_overlaps >= 1,
            "seed {}: {:?}",
            r.seed,
            r.counts
        );
        assert_eq!(r.counts.resource_conflicts, 0, "seed {}", r.seed);
    });
}
