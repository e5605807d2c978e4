//! The comparison report a reader opens (issue 30): every count of seeds on the page, in the
//! heat maps and in the terminal agrees with `summary.json`; no chart or timeline draws text
//! over text or off its canvas; the page answers "which lock?" first; and every command
//! locksim prints runs as printed. (`sim/tests/matrix.rs` audits the whole matrix the same
//! way; `scripts/check-report.sh` the whole default comparison.)

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::AtomicBool;

use locksim::cli::catalog::load_all;
use locksim::cli::compare::{CompareOptions, compare, summary_text};
use locksim::runner::default_jobs;
use locksim::scenario::range::SeedRange;

use common::{audit_report, catalog, repo, temp_dir};

/// A catalog scenario, an incident pair whose fixed control still breaks something else (two
/// holders at once: redsync 4.0.4's fixed Extend, its lease still runs out under a long hold),
/// a Sentinel failover (its lane of decisions), faults that overlap in time (their labels), a
/// shrunk regression.
fn subset() -> Vec<PathBuf> {
    vec![
        catalog("kleppmann-gc-pause.json"),
        catalog("network-delay-write-fenced.json"),
        catalog("sentinel-failover-lagging-replica.json"),
        catalog("nemesis-sentinel-swarm.json"),
        catalog("incidents/redsync-extend-stolen-lock.json"),
        catalog("incidents/redsync-extend-stolen-lock-fixed.json"),
        catalog("shrunk/nemesis-setnx-expire-client-crashes-seed0-shrunk.json"),
    ]
}

#[test]
fn every_count_agrees_and_every_chart_and_timeline_is_clean() {
    let dir = temp_dir("report");
    let scenarios = load_all(&subset()).unwrap();
    let opts = CompareOptions {
        seeds: Some(SeedRange { first: 0, last: 1 }),
        seeds_per_scenario: 0,
        jobs: default_jobs(),
        out: dir.clone(),
        progress: false,
        shard: None,
    };
    let summary = compare(&scenarios, &opts, &AtomicBool::new(false)).unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    audit_report(&dir, &summary, &summary_text(&summary, &dir));
    let page = std::fs::read_to_string(dir.join("index.html")).unwrap();
    // The fixed control: the reported failure on no seed, and what else broke, both counted.
    let fixed = summary
        .cell("redsync-extend-stolen-lock-fixed", "redlock:redsync@4.0.4")
        .unwrap();
    assert_eq!(fixed.expect_broken_seeds.as_deref(), Some(&[][..]));
    assert!(fixed.stats.seeds_violating > 0);
    assert!(page.contains("reported failure on <span class=\"n\" data-cell=\"cell-redsync-extend-stolen-lock-fixed--redlock-redsync-4-0-4\" data-count=\"reported\">0/2</span>"), "{page}");
    // The catalog lists only the schemes a scenario runs: no row of "—".
    assert!(!page.contains(">—</td>"));
    // The Sentinel failover's timeline names nodes, not addresses.
    let timeline = std::fs::read_to_string(
        dir.join("runs/sentinel-failover-lagging-replica/set-nx-px-lua/seed-0/timeline.svg"),
    )
    .unwrap();
    assert!(
        timeline.contains("+switch-master redis-1 → redis-1-replica-1"),
        "{timeline}"
    );
    assert!(!timeline.contains("10.1.0.1"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The command printed to reproduce a failing seed, from a `sweep` run the way `how` runs it.
fn printed_replay(how: &str, cwd: &std::path::Path) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_locksim"));
    cmd.current_dir(cwd)
        .args([
            "sweep",
            &catalog("kleppmann-gc-pause.json").display().to_string(),
        ])
        .args(["--seeds", "0..1", "--out", "sweep"]);
    match how {
        "cargo" => cmd.env("CARGO", "cargo"),
        _ => cmd.env_remove("CARGO"),
    };
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (_, after) = text
        .split_once("reproduce it with:\n  ")
        .unwrap_or_else(|| panic!("{text}"));
    after.lines().next().unwrap().to_string()
}

#[test]
fn printed_commands_run_as_printed() {
    let dir = temp_dir("printed-commands");
    // Run by its path (as `./target/release/locksim` would be): the command starts with it
    // and runs, as printed, in a shell.
    let printed = printed_replay("path", &dir);
    let exe = env!("CARGO_BIN_EXE_locksim");
    assert!(printed.starts_with(&format!("{exe} replay ")), "{printed}");
    let status = Command::new("sh")
        .args(["-c", &printed])
        .current_dir(&dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{printed}");
    assert!(
        dir.join("replay/kleppmann-gc-pause-seed0/events.txt")
            .is_file()
    );
    // Run by `cargo run` (the README's way): the command starts the same way, and what follows
    // is what the binary takes.
    let printed = printed_replay("cargo", &dir);
    let rest = printed
        .strip_prefix("cargo run -- ")
        .unwrap_or_else(|| panic!("{printed}"));
    let status = Command::new("sh")
        .args(["-c", &format!("{exe} {rest}")])
        .current_dir(&dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{printed}");
    // The README's commands go through cargo the same way.
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(readme.contains("cargo run --release -- compare"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// README and docs/schemes.md say how many rows the matrix has: the number the scheme table
/// gives (`"schemes": "all"`).
#[test]
fn the_docs_count_the_matrix_rows_it_has() {
    let rows = model::locks::matrix_rows().len();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let schemes = std::fs::read_to_string(repo().join("docs/schemes.md")).unwrap();
    assert!(
        readme.contains(&format!("{rows} lock schemes (rows")),
        "README's matrix picture: {rows} rows"
    );
    assert!(
        schemes.contains(&format!("): {rows} rows.")),
        "docs/schemes.md: {rows} rows"
    );
}

/// `scripts/check-report.sh`: the audit of a report folder written by a whole `compare`
/// (`LOCKSIM_REPORT_DIR`) and of the terminal output it printed (`LOCKSIM_REPORT_TERMINAL`).
#[test]
#[ignore = "run by scripts/check-report.sh on the whole default comparison"]
fn a_whole_report_folder() {
    let dir = PathBuf::from(
        std::env::var("LOCKSIM_REPORT_DIR").expect("LOCKSIM_REPORT_DIR: the report folder"),
    );
    let terminal = std::fs::read_to_string(
        std::env::var("LOCKSIM_REPORT_TERMINAL")
            .expect("LOCKSIM_REPORT_TERMINAL: compare's stdout"),
    )
    .unwrap();
    let summary: reports::summary::Summary =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    audit_report(&dir, &summary, &terminal);
    println!(
        "{}: {} cells, every count and every chart and timeline clean",
        dir.display(),
        summary.cells.len()
    );
}
