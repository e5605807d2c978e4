//! Client libraries against `locksim serve`, at the versions `scripts/client-suites.sh setup`
//! installs into `target/client-suites/` (CI runs it in `.ci/run`):
//! - redis-py's own lock tests (`tests/test_lock.py` and its asyncio twin), in redis-py's default
//!   protocol (RESP3 since redis-py 8);
//! - portalocker's RedisLock tests against a live server (a lock held by a pub/sub subscription:
//!   SUBSCRIBE, PUBLISH, PUBSUB NUMSUB, CLIENT LIST TYPE pubsub, CLIENT KILL);
//! - `scripts/node-client-checks.mjs`: node-redlock, redis-semaphore (sorted-set semaphores),
//!   ioredis and node-redis in RESP2 and RESP3.
//!
//! Every test passes. Without that setup a test is skipped with a notice, unless
//! `LOCKSIM_REQUIRE_CLIENT_SUITES=1` (as in CI), where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

fn suites() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/client-suites")
}

/// `None` (after a notice) when the suite is not installed and CI does not require it.
fn require<T>(what: &str, found: Option<T>) -> Option<T> {
    if found.is_none() {
        if std::env::var("LOCKSIM_REQUIRE_CLIENT_SUITES").as_deref() == Ok("1") {
            panic!("{what} is not installed: run `bash scripts/client-suites.sh setup`");
        }
        eprintln!("\n!!! {what} SKIPPED: run `bash scripts/client-suites.sh setup` first !!!\n");
    }
    found
}

/// The unpacked sdist under `suites` whose name starts with `prefix` and holds `marker`.
fn unpacked(suites: &Path, prefix: &str, marker: &str) -> Option<PathBuf> {
    std::fs::read_dir(suites)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
                && p.join(marker).exists()
        })
}

/// The last line of pytest's output must report passes and no failure.
fn assert_pytest_passed(what: &str, source: &Path, output: &Output) {
    let text = String::from_utf8_lossy(&output.stdout);
    let summary = text.lines().last().unwrap_or_default().to_string();
    println!("{what} ({}): {summary}", source.display());
    assert!(
        output.status.success()
            && summary.contains(" passed")
            && !summary.contains("failed")
            && !summary.contains("error"),
        "{what} against locksim serve:\n{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn redis_py_lock_tests_pass_against_locksim_serve() {
    let suites = suites();
    let python = suites.join("venv/bin/python");
    let found = unpacked(&suites, "redis-", "tests/test_lock.py").filter(|_| python.is_file());
    let Some(source) = require("the redis-py client suite", found) else {
        return;
    };
    let server = common::serve(&[]);
    let output = Command::new(&python)
        .current_dir(&source)
        .args([
            "-m",
            "pytest",
            "tests/test_lock.py",
            "tests/test_asyncio/test_lock.py",
            "-q",
            "-p",
            "no:cacheprovider",
            &format!("--redis-url=redis://127.0.0.1:{}/0", server.port),
        ])
        .output()
        .expect("pytest runs");
    assert_pytest_passed("redis-py", &source, &output);
}

#[test]
fn portalocker_redis_lock_tests_pass_against_locksim_serve() {
    let suites = suites();
    let python = suites.join("venv-portalocker/bin/python");
    let found = unpacked(&suites, "portalocker-", "portalocker_tests/test_redis.py")
        .filter(|_| python.is_file());
    let Some(source) = require("the portalocker client suite", found) else {
        return;
    };
    let server = common::serve(&[]);
    let output = Command::new(&python)
        .current_dir(&source)
        .env("PORTALOCKER_REDIS_TESTS_REQUIRED", "1")
        .env("REDIS_HOST", "127.0.0.1")
        .env("REDIS_PORT", server.port.to_string())
        .args([
            "-m",
            "pytest",
            "portalocker_tests/test_redis.py",
            "portalocker_tests/test_redis_random_sleep.py",
            "portalocker_tests/test_redis_reply_deadline.py",
            // Each test also runs against fakeredis: only the live half is about us.
            "-k",
            "live",
            "-q",
            "-p",
            "no:cacheprovider",
            // Its own addopts want 100 % coverage of portalocker.
            "-o",
            "addopts=--timeout=20",
        ])
        .output()
        .expect("pytest runs");
    assert_pytest_passed("portalocker", &source, &output);
}

#[test]
fn node_lock_library_checks_pass_against_locksim_serve() {
    let work = suites().join("node");
    let found = work
        .join("node_modules/redis-semaphore")
        .is_dir()
        .then_some(());
    if require("the node client checks", found).is_none() {
        return;
    }
    // ES modules resolve imports next to the importing file: run a copy beside node_modules.
    let checks = work.join("checks.mjs");
    std::fs::copy(
        common::repo().join("scripts/node-client-checks.mjs"),
        &checks,
    )
    .expect("the checks are copied");
    let server = common::serve(&[]);
    let output = Command::new("node")
        .current_dir(&work)
        .arg(&checks)
        .arg(server.port.to_string())
        .output()
        .expect("node runs");
    let text = String::from_utf8_lossy(&output.stdout);
    println!("{text}");
    assert!(
        output.status.success(),
        "the node client checks against locksim serve:\n{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
