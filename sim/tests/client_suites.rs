//! redis-py's own lock tests (`tests/test_lock.py` and its asyncio twin), at the version
//! `scripts/client-suites.sh setup` installs (CI runs it in `.ci/run`), in redis-py's default
//! protocol (RESP3 since redis-py 8), against `locksim serve`: every test passes.
//! Without that setup the test is skipped with a notice, unless
//! `LOCKSIM_REQUIRE_CLIENT_SUITES=1` (as in CI), where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

/// redis-py's unpacked sdist (`redis-<version>/tests/test_lock.py`) and the venv's python.
fn installed(suites: &Path) -> Option<(PathBuf, PathBuf)> {
    let python = suites.join("venv/bin/python");
    let source = std::fs::read_dir(suites)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("redis-"))
                && p.join("tests/test_lock.py").is_file()
        })?;
    python.is_file().then_some((python, source))
}

#[test]
fn redis_py_lock_tests_pass_against_locksim_serve() {
    let suites = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/client-suites");
    let Some((python, source)) = installed(&suites) else {
        if std::env::var("LOCKSIM_REQUIRE_CLIENT_SUITES").as_deref() == Ok("1") {
            panic!(
                "redis-py and its tests are not installed: run `bash scripts/client-suites.sh setup`"
            );
        }
        eprintln!(
            "\n!!! redis-py client suite SKIPPED: run `bash scripts/client-suites.sh setup` first !!!\n"
        );
        return;
    };
    let server = common::serve(&[]);
    let port = server.port;
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
            &format!("--redis-url=redis://127.0.0.1:{port}/0"),
        ])
        .output()
        .expect("pytest runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let summary = text.lines().last().unwrap_or_default().to_string();
    println!("redis-py ({}): {summary}", source.display());
    assert!(
        output.status.success() && summary.contains(" passed") && !summary.contains("failed"),
        "redis-py's lock tests against locksim serve:\n{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
