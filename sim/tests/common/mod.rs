//! What the command tests share: the catalog's files, a fresh temporary folder, the binary.
#![allow(dead_code)] // each test crate uses some of these

use std::path::PathBuf;
use std::process::Command;

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// A file of the catalog (`scenarios/NAME`).
pub fn catalog(name: &str) -> PathBuf {
    repo().join("scenarios").join(name)
}

/// A fresh temporary folder for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("locksim-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the `locksim` binary with `args`.
pub fn locksim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_locksim"))
        .args(args)
        .output()
        .expect("the locksim binary runs")
}
