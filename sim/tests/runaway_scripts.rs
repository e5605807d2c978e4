//! A `script` scheme whose Lua runs away, at the `locksim run` level (issue 17): the server stops
//! the script (its work budget counts work inside C functions too; Lua's heap is limited, so a
//! huge allocation is Lua's `not enough memory`), the attempt fails at once with the server's
//! error instead of retrying the same script until its timeout, and the run goes on to its
//! next attempt and its end. A script that returns a million elements is fine: the trace keeps
//! the head and the count of its reply.
//!
//! The bounds themselves are the model's (`model/src/redis/`, `model/tests/script_limits.rs`):
//! the string, table and heap cases need them. Each run is a child process limited to 4 GiB of
//! address space, so a script that escapes them fails its test with an abort instead of taking
//! the machine down, and is killed after a generous wall-clock guard instead of hanging.

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::temp_dir;
use serde_json::{Value, json};

/// A hang guard, not a speed test: each script is stopped within a few seconds.
const GUARD: Duration = Duration::from_secs(300);
const ADDRESS_SPACE_BYTES: u64 = 4 << 30;

/// One client, two attempts, the acquire script given; returns the run's trace.
fn run_acquire_script(name: &str, script: &str, success: Value) -> Vec<Value> {
    let dir = temp_dir(name);
    let scenario = json!({
        "name": name, "seed": 1, "duration_ms": 10000,
        "clients": { "count": 1, "acquisitions": 2, "acquire_timeout_ms": 1000 },
        "scheme": { "name": "script",
            "acquire": { "script": script, "success": success },
            "release": { "script": "return redis.call('del', KEYS[1])", "args": [],
                         "success": { "at_least": 0 } } }
    });
    let file = dir.join("scenario.json");
    std::fs::write(&file, scenario.to_string()).unwrap();
    let out = dir.join("out");
    let mut command = Command::new(env!("CARGO_BIN_EXE_locksim"));
    command
        .args([
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: only setrlimit between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: ADDRESS_SPACE_BYTES,
                rlim_max: ADDRESS_SPACE_BYTES,
            };
            libc::setrlimit(libc::RLIMIT_AS, &limit);
            Ok(())
        });
    }
    let mut child = command.spawn().expect("the locksim binary runs");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > GUARD {
            let _ = child.kill();
            panic!("{name}: still running after {GUARD:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{name}: {status}: {stderr}");
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn events<'a>(trace: &'a [Value], name: &str) -> Vec<&'a Value> {
    trace.iter().filter(|e| e["event"] == name).collect()
}

/// Both attempts fail at once with the server's error, each after one run of the script, and
/// the client finishes its workload.
fn assert_stopped(name: &str, script: &str, error: &str) {
    let trace = run_acquire_script(name, script, json!({ "status": "OK" }));
    let failed = events(&trace, "acquire_failed");
    assert_eq!(failed.len(), 2, "{name}: {failed:?}");
    for f in &failed {
        let reason = f["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("the acquire script runs away: ERR ") && reason.contains(error),
            "{name}: {reason}"
        );
    }
    assert_eq!(
        events(&trace, "command_sent").len(),
        2,
        "{name}: one EVAL per attempt"
    );
    assert_eq!(events(&trace, "client_done").len(), 1, "{name}");
}

#[test]
fn an_endless_lua_loop_fails_its_attempt() {
    assert_stopped(
        "loop",
        "while true do end",
        "Script killed by user with SCRIPT KILL",
    );
}

/// The budget counts work inside C functions (`model/src/redis/script_limits.rs`).
#[test]
fn a_loop_on_string_rep_fails_its_attempt() {
    assert_stopped(
        "string-rep",
        "while true do local s = string.rep('x', 100000) end",
        "Script killed by user with SCRIPT KILL",
    );
}

/// Lua's heap is limited: 2^40 bytes fail with Lua's own error.
#[test]
fn doubling_a_string_forty_times_fails_its_attempt() {
    assert_stopped(
        "doubling",
        "local s = 'x' for i = 1, 40 do s = s .. s end return #s",
        "not enough memory",
    );
}

/// Lua's heap limit or the budget's count of allocated bytes stops it, whichever comes first.
#[test]
fn filling_a_hundred_million_element_table_fails_its_attempt() {
    let trace = run_acquire_script(
        "table",
        "local t = {} for i = 1, 1e8 do t[i] = i end return #t",
        json!({ "status": "OK" }),
    );
    let failed = events(&trace, "acquire_failed");
    assert_eq!(failed.len(), 2, "{failed:?}");
    for f in failed {
        let reason = f["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("the acquire script runs away: ")
                && (reason.contains("not enough memory")
                    || reason.contains("Script killed by user with SCRIPT KILL")),
            "{reason}"
        );
    }
}

/// A million-element reply is legal: the script succeeds, and the trace keeps its head and how
/// many elements it left out.
#[test]
fn returning_a_million_element_table_is_kept_short_in_the_trace() {
    let trace = run_acquire_script(
        "big-reply",
        "local t = {} for i = 1, 1e6 do t[i] = i end return t",
        json!({ "not_nil": true }),
    );
    assert_eq!(events(&trace, "acquired").len(), 2);
    let replies = events(&trace, "command_reply");
    let first = replies[0]["reply"].as_str().unwrap();
    assert!(
        first.starts_with("[(integer) 1, (integer) 2, "),
        "{first:.60}"
    );
    assert!(first.ends_with(" more)]"), "{}", &first[first.len() - 30..]);
    assert!(first.len() < 17_000, "{}", first.len());
    let executed = events(&trace, "executed");
    assert_eq!(executed[0]["reply"].as_str().unwrap(), first);
}
