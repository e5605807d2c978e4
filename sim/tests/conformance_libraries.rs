//! Every modelled lock library against the real library, command for command (issue 28,
//! `locksim::conform`): each situation of `conformance/situations/` runs with the real library
//! against `locksim serve` (Python libraries from the venvs, node ones from npm, all installed
//! by `scripts/client-suites.sh setup` into `target/client-suites/`) and with the scheme that
//! models it; a library not runnable here is checked against the transcripts its situations
//! quote from its source. Every situation must be identical, and every library that runs here
//! needs at least 8.
//!
//! Without the setup the Python and node suites are skipped with a notice, unless
//! `LOCKSIM_REQUIRE_CLIENT_SUITES=1` (as in CI), where they fail.

use std::collections::BTreeMap;
use std::path::PathBuf;

use locksim::conform::real_side::RealSetup;
use locksim::conform::situation::{Runtime, Situation, load_situation, situation_files};

mod common;

fn setup() -> RealSetup {
    RealSetup {
        locksim: PathBuf::from(env!("CARGO_BIN_EXE_locksim")),
        repo: common::repo(),
        suites: common::repo().join("target/client-suites"),
    }
}

fn situations() -> Vec<Situation> {
    let repo = common::repo();
    let files = situation_files(&[repo.join("conformance/situations")]).expect("the situations");
    files
        .iter()
        .map(|f| load_situation(f, &repo.join("conformance/libraries")).expect("a valid situation"))
        .collect()
}

/// Runs every situation whose library `runs` selects; fails on any mismatch.
fn run_suite(what: &str, runs: impl Fn(&Runtime) -> bool) {
    let setup = setup();
    let mut per_library: BTreeMap<String, Vec<Situation>> = BTreeMap::new();
    for situation in situations() {
        if runs(&situation.library.runtime) {
            per_library
                .entry(situation.library.id.clone())
                .or_default()
                .push(situation);
        }
    }
    assert!(!per_library.is_empty(), "no {what} situations");
    let mut failures = Vec::new();
    for (library, list) in &per_library {
        let runtime = &list[0].library.runtime;
        if *runtime != Runtime::Source {
            if let Err(missing) = setup.available(runtime) {
                if std::env::var("LOCKSIM_REQUIRE_CLIENT_SUITES").as_deref() == Ok("1") {
                    panic!("{library}: {missing}");
                }
                eprintln!("\n!!! {library} SKIPPED: {missing} !!!\n");
                continue;
            }
            assert!(
                list.len() >= 8,
                "{library}: {} situations, every library that runs here needs at least 8",
                list.len()
            );
        }
        let mut identical = 0;
        for situation in list {
            let outcome = locksim::conform::check(&setup, situation);
            match (outcome.error, outcome.mismatch) {
                (Some(e), _) => failures.push(format!("{}: could not run: {e}", outcome.name)),
                (None, Some(m)) => failures.push(format!("{}: MISMATCH\n{m}", outcome.name)),
                (None, None) => identical += 1,
            }
        }
        println!("{library}: {identical}/{} situations identical", list.len());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One suite at a time: the real libraries' timings must not depend on another suite's load on
/// a small machine (pottery 3.0.1's acquire returns at its quorum and leaves the other masters'
/// calls to background threads, `pottery/executor.py` `BailOutExecutor`: under load one had not
/// reached its master when the situation ended).
static ONE_SUITE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn python_libraries_conform() {
    let _one = ONE_SUITE_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    run_suite("Python", |r| matches!(r, Runtime::Python { .. }));
}

#[test]
fn node_libraries_conform() {
    let _one = ONE_SUITE_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    run_suite("node", |r| matches!(r, Runtime::Node { .. }));
}

#[test]
fn libraries_from_source_conform() {
    let _one = ONE_SUITE_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    run_suite("source", |r| *r == Runtime::Source);
}

/// `locksim conform --show` prints, for an identical situation, the reference's transcript
/// (here the source's) in the left column and the model's in the right one; it once printed
/// the model's in both.
#[test]
fn conform_show_puts_the_reference_beside_the_model() {
    let repo = common::repo();
    let situation = "conformance/situations/redlock-rb@2.0.6/08-expired-before-release.json";
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_locksim"))
        .current_dir(&repo)
        .args(["conform", "--show", situation])
        .output()
        .expect("locksim runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("08-expired-before-release: identical"),
        "{text}"
    );
    let headers: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_end().ends_with("| model"))
        .collect();
    assert_eq!(headers.len(), 3, "one header per master: {text}");
    assert!(
        headers
            .iter()
            .all(|h| h.trim_start().starts_with("source ")),
        "the left column is the source's: {text}"
    );
    // The release's outcome as the source says it, beside the model's.
    assert!(
        text.lines()
            .any(|l| l.starts_with("  outcome 2: release: granted")
                && l.contains("| release: granted")),
        "{text}"
    );
}

/// The delays between a watchdog's refreshes are compared, not only their number: the
/// redis-semaphore Mutex model refreshing every 900 ms instead of the library's
/// `round(0.8 × lockTimeout)` = 800 ms sends as many refreshes in situation 06 (at 0.9 and
/// 1.8 s instead of 0.8 and 1.6 s) and was once found identical.
#[test]
fn a_changed_refresh_interval_is_caught() {
    let repo = common::repo();
    let path = repo.join("conformance/situations/redis-semaphore@5.8.0/06-refresh-keeps-it.json");
    let situation =
        load_situation(&path, &repo.join("conformance/libraries")).expect("a valid situation");
    let reference = locksim::conform::model_transcript(&situation).expect("the model runs");
    assert_eq!(reference.refresh_delays_ms, vec![800.0]);
    assert_eq!(
        locksim::conform::compare(&situation, &reference, &reference, "real"),
        None
    );
    let mut changed = situation.clone();
    changed.scheme["refresh_interval_ms"] = serde_json::json!(900);
    let model = locksim::conform::model_transcript(&changed).expect("the model runs");
    assert_eq!(
        model.masters, reference.masters,
        "the same commands: only their timing differs"
    );
    let mismatch =
        locksim::conform::compare(&situation, &reference, &model, "real").expect("a mismatch");
    assert!(
        mismatch.contains("a delay of the model between refreshes, 900 ms"),
        "{mismatch}"
    );
}

/// A from-source expectation names the source's script texts, not the model's: a situation
/// whose expected `EVALSHA` digest is none of its library's `scripts` (here the digest of the
/// text the Redisson model once laid out anew, `b9fe37ff`) does not load.
#[test]
fn an_expected_script_is_one_of_the_sources() {
    let repo = common::repo();
    let dir = std::env::temp_dir().join(format!("locksim-conform-scripts-{}", std::process::id()));
    let (libraries, situations) = (dir.join("libraries"), dir.join("redisson@4.7.0"));
    std::fs::create_dir_all(&libraries).expect("a scratch folder");
    std::fs::create_dir_all(&situations).expect("a scratch folder");
    std::fs::copy(
        repo.join("conformance/libraries/redisson@4.7.0.json"),
        libraries.join("redisson@4.7.0.json"),
    )
    .expect("the library copied");
    let text = std::fs::read_to_string(
        repo.join("conformance/situations/redisson@4.7.0/01-acquire-release.json"),
    )
    .expect("the situation");
    let source_lock = "149c5a8bf18676fd99e9e6e24923bd64d9b62f94";
    assert!(text.contains(source_lock), "{text}");
    let path = situations.join("01-acquire-release.json");
    std::fs::write(
        &path,
        text.replace(source_lock, "b9fe37ff02d7e0cf606d81454e85f247b4a30c85"),
    )
    .expect("the changed situation");
    let loaded = load_situation(&path, &libraries);
    std::fs::remove_dir_all(&dir).expect("the scratch folder removed");
    let error = loaded.expect_err("a script the source does not have");
    assert!(
        error.contains(
            "script b9fe37ff02d7e0cf606d81454e85f247b4a30c85 is none of redisson@4.7.0's source `scripts`"
        ),
        "{error}"
    );
}
