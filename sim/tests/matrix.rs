//! The fault matrix (`scenarios/matrix/`): every scheme row runs in every fault class, the report
//! shows the whole matrix, and the cells the literature settles come out as it says. The full
//! seed ranges and every recorded expectation are `locksim check`'s job in CI (release); here,
//! in debug, each file runs on one seed and the literature cells on three.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use locksim::cli::catalog::{load_all, scenario_files};
use locksim::cli::compare::{CompareOptions, compare};
use locksim::runner::{default_jobs, run_parallel};
use locksim::scenario::Scenario;
use locksim::scenario::range::SeedRange;
use model::result::{Liveness, RunResult, Safety};

fn matrix_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/matrix"))
}

fn matrix_file(name: &str) -> Arc<Scenario> {
    let path = scenario_files(&[matrix_dir()])
        .unwrap()
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(&format!("-{name}.json")))
        .unwrap_or_else(|| panic!("no matrix file for {name}"));
    Arc::new(Scenario::load(&path).unwrap())
}

/// One row of a matrix scenario on seeds `0..=last`.
fn runs(scenario: &Arc<Scenario>, row: &str, last: u64) -> Vec<RunResult> {
    let index = scenario
        .schemes
        .iter()
        .position(|s| s.label() == row)
        .unwrap_or_else(|| panic!("{} has no row {row}", scenario.name));
    let mut results = Vec::new();
    let work = (0..=last).map(|seed| (index, seed)).collect();
    run_parallel(scenario, work, default_jobs(), |out| {
        results.push(out.unwrap().result)
    });
    results
}

#[test]
fn every_scheme_runs_in_every_matrix_scenario_and_the_report_shows_them() {
    let files = scenario_files(&[matrix_dir()]).unwrap();
    let scenarios = load_all(&files).unwrap();
    assert!(scenarios.len() >= 15, "one file per fault class");
    let rows: Vec<String> = model::locks::matrix_rows()
        .iter()
        .map(|r| r.label())
        .collect();
    for scenario in &scenarios {
        assert!(
            scenario.all_schemes,
            "{} runs \"schemes\": \"all\"",
            scenario.path
        );
        assert!(
            scenario.matrix.is_some(),
            "{} has a column header",
            scenario.path
        );
    }
    let out = std::env::temp_dir().join(format!("locksim-matrix-test-{}", std::process::id()));
    let opts = CompareOptions {
        seeds: Some(SeedRange { first: 1, last: 1 }),
        seeds_per_scenario: 0,
        jobs: default_jobs(),
        out: out.clone(),
        progress: false,
        shard: None,
    };
    let summary = compare(&scenarios, &opts, &AtomicBool::new(false)).unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    assert_eq!(
        summary
            .matrix_rows
            .iter()
            .map(|r| r.scheme.clone())
            .collect::<Vec<_>>(),
        rows
    );
    assert_eq!(summary.matrix_columns().len(), scenarios.len());
    for scenario in &scenarios {
        for row in &rows {
            let cell = summary
                .cell(&scenario.name, row)
                .unwrap_or_else(|| panic!("{row} missing from {}", scenario.name));
            assert!(cell.stats.seeds_run > 0, "{row} × {}", scenario.name);
        }
    }
    // Every count agrees with summary.json and the terminal; no chart or timeline overprints.
    common::audit_report(
        &out,
        &summary,
        &locksim::cli::compare::summary_text(&summary, &out),
    );
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    // Sections by their headings' ids (the stylesheet's comments name sections too).
    let section = |id: &str| {
        html.find(&format!("<h2 id=\"{id}\">"))
            .unwrap_or_else(|| panic!("the {id} section"))
    };
    let advice = section("advice");
    let matrix = section("matrix");
    let debate = section("debate");
    let catalog = section("catalog");
    assert!(
        advice < matrix && matrix < debate && debate < catalog,
        "the answer, then the matrix"
    );
    assert!(out.join("charts/matrix.svg").is_file());
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| redlock:redsync |"),
        "the matrix table in report.md"
    );
    let _ = std::fs::remove_dir_all(&out);
}

fn all(results: &[RunResult], f: impl Fn(&RunResult) -> bool) -> bool {
    !results.is_empty() && results.iter().all(f)
}

/// Kleppmann 2016: fencing keeps the resource safe under a pause, but not when a failover to a
/// lagging replica hands out the same token again.
#[test]
fn fencing_survives_a_pause_but_not_a_failover() {
    let pause = runs(&matrix_file("gc-pause"), "fencing", 2);
    assert!(all(&pause, |r| r.verdicts.mutual_exclusion
        == Safety::Violated
        && r.verdicts.resource_safety == Safety::Holds
        && r.counts.stale_writes_rejected > 0));
    let failover = runs(&matrix_file("failover-lagging-replica"), "fencing", 2);
    assert!(all(&failover, |r| r.verdicts.resource_safety
        == Safety::Violated));
}

/// redis.io and seeds 001/003/004: a single instance with a replica loses the lock when the
/// master dies before the key reached the replica. Redisson 4.7 is the exception: its WAIT after
/// the lock script never sees the lagging replica acknowledge, so it never locks at all.
/// client-1 holds 7 s, so the verdict does not rest on when client-2 reconnects (Redisson 3.12's:
/// 0.7, 2.2, 4.7 s after the crash) nor on how long the failover takes (about 2.3 s).
#[test]
fn single_instance_schemes_lose_the_lock_on_failover() {
    let failover = matrix_file("failover-lagging-replica");
    for row in [
        "setnx-expire",
        "setnx-getset",
        "lua-setnx-expire",
        "set-nx-px-del",
        "set-nx-px-get-del",
        "set-nx-px-lua",
        "watchdog",
        "reentrant",
        "redisson:redisson-3.12",
        "fair:redisson-3.12",
    ] {
        let results = runs(&failover, row, 2);
        assert!(
            all(&results, |r| r.verdicts.mutual_exclusion
                == Safety::Violated),
            "{row}: {:?}",
            results.iter().map(|r| r.verdicts).collect::<Vec<_>>()
        );
    }
    for row in ["redisson", "fair"] {
        let results = runs(&failover, row, 2);
        assert!(all(&results, |r| r.verdicts.mutual_exclusion
            == Safety::Holds
            && r.verdicts.liveness == Liveness::Stuck
            && r.counts.acquisitions == 0));
    }
}

/// redis.io and Kleppmann 2016: Redlock holds a master crash without persistence when the
/// holder's lock stands on the other masters, but not when the crashed master was in its bare
/// majority.
#[test]
fn redlock_survives_a_master_crash_unless_it_was_in_a_bare_majority() {
    let crash = matrix_file("master-crash-restart");
    let bare = matrix_file("master-crash-bare-majority");
    for row in ["redlock", "redlock:redsync", "redlock-no-validity"] {
        let held = runs(&crash, row, 2);
        assert!(
            all(&held, |r| r.verdicts.mutual_exclusion == Safety::Holds
                && r.verdicts.resource_safety == Safety::Holds),
            "{row}"
        );
        let broken = runs(&bare, row, 2);
        assert!(
            all(&broken, |r| r.verdicts.mutual_exclusion == Safety::Violated),
            "{row}"
        );
    }
    assert!(all(&runs(&crash, "set-nx-px-lua", 2), |r| {
        r.verdicts.mutual_exclusion == Safety::Violated
    }));
}

/// Issue 26 item 3, antirez 2016 and Kleppmann 2016: with `appendfsync everysec` a killed
/// process keeps its lock key (the kernel's page cache outlives it, as `kill -9` of redis-server
/// 7.0.15 shows), a machine that loses power does not — for one instance, and for Redlock when
/// the machine was in the holder's bare majority; `fsync always` keeps it through a power loss.
#[test]
fn a_process_crash_keeps_the_aof_a_power_loss_loses_what_was_not_fsynced() {
    let killed = matrix_file("master-crash-everysec");
    let powered_off = matrix_file("master-power-loss-everysec");
    let bare_killed = matrix_file("bare-majority-crash-everysec");
    let bare_powered_off = matrix_file("bare-majority-power-loss-everysec");
    let always = matrix_file("master-crash-aof-always");
    let holds = |r: &RunResult| {
        r.verdicts.mutual_exclusion == Safety::Holds && r.verdicts.resource_safety == Safety::Holds
    };
    let violated = |r: &RunResult| r.verdicts.mutual_exclusion == Safety::Violated;
    for row in ["set-nx-px-lua", "watchdog"] {
        assert!(all(&runs(&killed, row, 2), holds), "{row} after kill -9");
        assert!(
            all(&runs(&powered_off, row, 2), violated),
            "{row} after a power loss"
        );
    }
    for row in ["redlock", "redlock:redsync"] {
        assert!(
            all(&runs(&bare_killed, row, 2), holds),
            "{row} after kill -9"
        );
        assert!(
            all(&runs(&bare_powered_off, row, 2), violated),
            "{row} after a power loss"
        );
        assert!(
            all(&runs(&always, row, 2), holds),
            "{row} with fsync always"
        );
    }
}

/// Seeds 000 and 004: SETNX + DEL without a TTL stays locked for ever after its holder dies.
#[test]
fn setnx_del_is_stuck_after_a_holder_crash() {
    let crash = matrix_file("holder-crash");
    assert!(all(&runs(&crash, "setnx-del", 2), |r| {
        r.verdicts.liveness == Liveness::Stuck
    }));
    assert!(all(&runs(&crash, "set-nx-px-lua", 2), |r| {
        r.verdicts.liveness == Liveness::Ok
    }));
}
