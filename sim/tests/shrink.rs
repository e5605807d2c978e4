//! `locksim shrink`: a random-nemesis failure becomes a small scripted scenario that breaks the
//! same verdicts on its own and passes `locksim check`.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use locksim::cli::catalog::load_all;
use locksim::cli::check::{CheckOptions, check};
use locksim::cli::shrink::{DEFAULT_MAX_RUNS, shrink};
use locksim::scenario::Scenario;

use common::{catalog, temp_dir};

/// `locksim check` on the shrunk file alone meets its `expect`.
fn check_passes(file: &Path) {
    let report = check(
        &load_all(&[file.to_path_buf()]).unwrap(),
        &CheckOptions {
            seeds: None,
            jobs: 1,
            shard: None,
            progress: false,
        },
        &AtomicBool::new(false),
    )
    .unwrap();
    assert!(report.passed(), "{}", report.render());
}

#[test]
fn a_nemesis_lock_out_shrinks_to_a_few_scripted_crashes_that_check_passes() {
    let dir = temp_dir("shrink");
    let original =
        Arc::new(Scenario::load(&catalog("nemesis-setnx-expire-client-crashes.json")).unwrap());
    let out = dir.join("shrunk.json");
    let shrunk = shrink(&original, 0, 0, Some(out.clone()), DEFAULT_MAX_RUNS).unwrap();
    assert_eq!(shrunk.target, vec!["liveness"]);
    assert!(shrunk.nemesis_before > 10, "{}", shrunk.render());
    assert!(
        shrunk.faults_after >= 1 && shrunk.faults_after <= 5,
        "{}",
        shrunk.render()
    );

    let written = Scenario::load(&out).unwrap();
    assert!(
        written.nemesis.is_none(),
        "the nemesis is replaced by scripted faults"
    );
    assert_eq!(written.faults.len(), shrunk.faults_after);
    assert!(
        written
            .source
            .contains("nemesis-setnx-expire-client-crashes.json --seed 0")
    );
    assert_eq!(written.seeds.len(), 1);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains(r#""liveness": "stuck""#), "{text}");

    check_passes(&out);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One row of a `"schemes": "all"` matrix file shrinks into a file of that one scheme: the
/// other rows' expectations, the matrix column and the nemesis's node groups are gone, and the
/// result passes `check` on its own.
#[test]
fn a_matrix_row_shrinks_into_a_one_scheme_file() {
    let dir = temp_dir("shrink-matrix");
    let original =
        Arc::new(Scenario::load(&catalog("matrix/15-random-redis-crashes.json")).unwrap());
    let row = original
        .schemes
        .iter()
        .position(|s| s.label() == "incr-semaphore")
        .unwrap();
    let out = dir.join("row.json");
    let shrunk = shrink(&original, row, 0, Some(out.clone()), DEFAULT_MAX_RUNS).unwrap();
    assert_eq!(shrunk.target, vec!["liveness"]);
    assert!(
        shrunk.faults_after < shrunk.nemesis_before,
        "{}",
        shrunk.render()
    );

    let text = std::fs::read_to_string(&out).unwrap();
    let file: serde_json::Value = serde_json::from_str(&text).unwrap();
    for gone in [
        "schemes",
        "expect_by_scheme",
        "expect_some_by_scheme",
        "matrix",
        "nemesis",
    ] {
        assert!(file.get(gone).is_none(), "{gone} in {text}");
    }
    assert_eq!(file["scheme"]["name"], "incr-semaphore");
    assert_eq!(
        file["lease_ms"],
        original.lease_ms.unwrap(),
        "the row's lease judges it"
    );
    let written = Scenario::load(&out).unwrap();
    assert_eq!(written.schemes.len(), 1);
    assert!(
        written.source.contains("--scheme incr-semaphore"),
        "{}",
        written.source
    );
    check_passes(&out);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_seed_that_breaks_nothing_is_a_clear_error() {
    let dir = temp_dir("shrink-nothing");
    let baseline = Arc::new(Scenario::load(&catalog("baseline-set-nx-px-lua.json")).unwrap());
    let err = shrink(&baseline, 0, 0, Some(dir.join("x.json")), 10)
        .err()
        .expect("nothing to shrink");
    assert!(
        err.contains("nothing to shrink, every verdict holds"),
        "{err}"
    );
    assert!(!dir.join("x.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
