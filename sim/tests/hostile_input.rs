//! What a hostile user tried on the commands (issue 31) ends in a clear error or a bounded run,
//! never a panic, a signal, a hang or a file written outside the output folder: bytes after the
//! JSON object, keys given twice, devices and FIFOs as scenario files, `--jobs 1000000`, a
//! scenario `name` that is a path, a disk that fills during a sweep.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{catalog, locksim, temp_dir};
use serde_json::{Value, json};

/// The GC-pause scenario with `change` applied, as text.
fn gc_pause(change: impl FnOnce(&mut Value)) -> String {
    let text = std::fs::read_to_string(catalog("kleppmann-gc-pause.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    change(&mut doc);
    serde_json::to_string_pretty(&doc).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `locksim run FILE` fails with exit 2 and an error that starts with `FILE: ` and holds `what`.
fn refused(file: &Path, what: &str) {
    let out = locksim(&["run", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}: {stderr}", file.display());
    assert!(
        stderr.starts_with(&format!("locksim: error: {}: ", file.display()))
            && stderr.contains(what),
        "{}: expected {what:?}: {stderr}",
        file.display()
    );
}

/// `--jobs` beyond the machine's cores runs on its cores (never more threads than runs):
/// before, a million jobs spawned threads until the system refused and `batch.rs` panicked.
#[test]
fn a_million_jobs_run_on_the_machines_cores() {
    let dir = temp_dir("jobs");
    let file = catalog("kleppmann-gc-pause.json");
    let cores = std::thread::available_parallelism().unwrap().get();
    let out_dir = dir.join("sweep");
    for args in [
        vec![
            "sweep",
            "--seeds",
            "0..2",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        vec!["check", "--seeds", "0..2"],
        vec!["bench", "--seeds", "0..2"],
    ] {
        let mut all = vec![args[0], file.to_str().unwrap(), "--jobs", "1000000"];
        all.extend(&args[1..]);
        let out = locksim(&all);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.is_empty(),
            "{all:?}: {stdout}{stderr}"
        );
        if args[0] != "check" {
            assert!(
                stdout.contains(&format!("on {cores} job(s)")),
                "{all:?}: {stdout}"
            );
        }
    }
}
