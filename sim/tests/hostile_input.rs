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

/// Two concatenated scenarios, or one with a word after it, are errors: before, the first value
/// ran and every size limit was skipped (a `u64::MAX` lease then wrapped the liveness window).
#[test]
fn bytes_after_the_object_are_an_error_and_the_limits_still_hold() {
    let dir = temp_dir("trailing");
    let one = gc_pause(|_| {});
    refused(
        &write(&dir, "two.json", &format!("{one}\n{one}")),
        "trailing characters at line",
    );
    refused(
        &write(&dir, "word.json", &format!("{one} x")),
        "trailing characters",
    );
    let huge_lease = gc_pause(|d| d["lease_ms"] = json!(u64::MAX));
    refused(
        &write(&dir, "lease.json", &format!("{huge_lease} x")),
        "trailing characters",
    );
    refused(
        &write(&dir, "lease-alone.json", &huge_lease),
        "lease_ms: 18446744073709551615 ms is more than a year",
    );
}

/// A key given twice is an error wherever it is, `scheme` and `nemesis` included (before, those
/// two free-form objects kept the last one silently).
#[test]
fn keys_given_twice_are_errors_naming_the_field() {
    let dir = temp_dir("twice");
    let scheme =
        r#"{ "name": "s", "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000, "ttl_ms": 5 } }"#;
    refused(
        &write(&dir, "scheme.json", scheme),
        "scheme.ttl_ms: given twice in one object",
    );
    let nemesis = r#"{ "name": "n", "scheme": "set-nx-px-lua",
        "nemesis": { "pause": { "every_ms": [100, 200], "duration_ms": [1, 2] },
                     "pause": { "every_ms": [10, 20], "duration_ms": [1, 2] } } }"#;
    refused(
        &write(&dir, "nemesis.json", nemesis),
        "nemesis.pause: given twice in one object",
    );
    let top = r#"{ "name": "a", "name": "b", "scheme": "set-nx-px-lua" }"#;
    refused(&write(&dir, "top.json", top), "name: given twice");
}

/// A device is read no further than the file limit (`/dev/zero` reads 0 bytes long and had been
/// read until the memory ran out); a FIFO without a writer is refused at once instead of
/// blocking for ever; a directory is refused too.
#[test]
fn devices_fifos_and_folders_are_not_scenario_files() {
    let dir = temp_dir("special");
    refused(Path::new("/dev/zero"), "a device, not a scenario file");
    refused(Path::new("/dev/null"), "a device, not a scenario file");
    let fifo = dir.join("fifo.json");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    refused(&fifo, "a FIFO, not a scenario file");
    refused(&dir, "a directory, not a scenario file");
    refused(&dir.join("missing.json"), "cannot read: No such file");
    std::fs::write(dir.join("bytes.json"), b"{ \"name\": \"\xe9\" }").unwrap();
    refused(
        &dir.join("bytes.json"),
        "not UTF-8 text (an invalid byte at offset 11)",
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

/// `shrink`'s default output is `shrunk/<name>.json` with the name made one path component,
/// as `sweep` and `replay` make their folders: a name that climbs (`../../x`) or is absolute
/// stays inside `shrunk/`.
#[test]
fn a_shrunk_scenario_stays_inside_shrunk_whatever_its_name() {
    let dir = temp_dir("shrink-name");
    let cwd = dir.join("a/b");
    std::fs::create_dir_all(&cwd).unwrap();
    let absolute = dir.join("escaped-abs");
    for (name, file) in [
        ("../../escaped", "shrunk/.._.._escaped-seed1-shrunk.json"),
        (
            absolute.to_str().unwrap(),
            &format!(
                "shrunk/{}-seed1-shrunk.json",
                absolute.to_str().unwrap().replace('/', "_")
            ),
        ),
    ] {
        let scenario = write(&dir, "named.json", &gc_pause(|d| d["name"] = json!(name)));
        let out = Command::new(env!("CARGO_BIN_EXE_locksim"))
            .args(["shrink", scenario.to_str().unwrap(), "--seed", "1"])
            .current_dir(&cwd)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(cwd.join(file).is_file(), "{name}: no {file}");
    }
    let escaped: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("escaped"))
        .collect();
    assert!(escaped.is_empty(), "written outside shrunk/: {escaped:?}");
}

/// A disk that fills stops a sweep at the first line it cannot append: the runs not yet started
/// never start, and `run.json` keeps what the last finished sweep wrote (before, every
/// remaining seed ran after the first failed write). The disk is a file size limit
/// (`RLIMIT_FSIZE`, with `SIGXFSZ` ignored so the write fails with EFBIG as on a full disk).
#[test]
fn a_sweep_stops_at_the_first_line_it_cannot_write() {
    let dir = temp_dir("full-disk");
    let file = catalog("kleppmann-gc-pause.json");
    let out_dir = dir.join("sweep");
    let sweep = |seeds: &str, limit_bytes: Option<u64>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_locksim"));
        command.args([
            "sweep",
            file.to_str().unwrap(),
            "--seeds",
            seeds,
            "--jobs",
            "1",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        if let Some(limit) = limit_bytes {
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                command.pre_exec(move || {
                    libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                    let rlimit = libc::rlimit {
                        rlim_cur: limit,
                        rlim_max: limit,
                    };
                    if libc::setrlimit(libc::RLIMIT_FSIZE, &rlimit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        command.output().unwrap()
    };
    let first = sweep("0..1", None);
    assert!(first.status.success());
    let manifest = std::fs::read_to_string(out_dir.join("run.json")).unwrap();
    let results = std::fs::read(out_dir.join("results.jsonl")).unwrap();
    let out = sweep("0..99", Some(results.len() as u64 + 10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let prefix = format!(
        "locksim: error: {}: cannot write: ",
        out_dir.join("results.jsonl").display()
    );
    assert!(stderr.starts_with(&prefix), "{stderr}");
    assert!(
        stderr.contains("the sweep stopped there: 0 new run(s) written, "),
        "{stderr}"
    );
    // One worker: the run whose line failed and at most the one it had taken meanwhile.
    let not_run: u64 = stderr
        .split("written, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(not_run >= 96, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(out_dir.join("run.json")).unwrap(),
        manifest
    );
    // With room again the same command resumes: the torn line's seed runs again.
    let resumed = sweep("0..3", None);
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success(), "{stdout}");
    assert!(
        stdout.contains("4 run(s) — 2 new, 2 already in"),
        "{stdout}"
    );
}
