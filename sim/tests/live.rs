//! `locksim live`: real client processes under the scenario's faults, on the real clock.
//!
//! Verdicts are asserted only where the live run's timing cannot change them (a 1.5 s SIGSTOP
//! of the holder against a 500 ms lease; no fault at all). No timing assertions. Every test
//! checks that nothing the run started is left: each child carries `LOCKSIM_LIVE_RUN=<locksim
//! pid>-<n>` (`live::process::MARKER_ENV`), looked for in /proc/*/environ.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn scenario(name: &str) -> PathBuf {
    root().join("examples/live/scenarios").join(name)
}

fn out_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("locksim-live-test-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn locksim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_locksim"))
}

/// Processes whose environment carries a marker of locksim process `pid`.
fn leftovers(pid: u32) -> Vec<String> {
    let marker = format!("LOCKSIM_LIVE_RUN={pid}-");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc") {
        let Ok(entry) = entry else { continue };
        let path = entry.path().join("environ");
        let Ok(environ) = std::fs::read(&path) else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // A zombie is gone for every purpose but its parent's wait.
        if stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')) {
            continue;
        }
        if environ
            .split(|&b| b == 0)
            .any(|var| var.starts_with(marker.as_bytes()))
        {
            found.push(format!("{} {}", entry.file_name().to_string_lossy(), stat));
        }
    }
    found
}

/// Waits (bounded) until no process of locksim `pid` is left; the leftovers otherwise.
fn wait_no_leftovers(pid: u32) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = leftovers(pid);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs locksim to its end, bounded: killed after 120 s.
fn run(mut command: Command) -> (Output, u32) {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("locksim starts");
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            if std::fs::metadata(format!("/proc/{pid}")).is_err() {
                return;
            }
        }
        // SAFETY: our own child, bounded test.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    });
    let output = child.wait_with_output().expect("locksim runs");
    let _ = watchdog.join();
    (output, pid)
}

fn result_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("result.json")).expect("result.json written");
    serde_json::from_str(&text).expect("result.json is JSON")
}

#[test]
fn a_built_in_scheme_under_a_pause_longer_than_its_lease_violates_mutual_exclusion() {
    let dir = out_dir("builtin-pause");
    let mut command = locksim();
    command
        .arg("live")
        .arg(scenario("gc-pause.json"))
        .arg("--out")
        .arg(&dir);
    let (output, pid) = run(command);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let result = result_json(&dir);
    assert_eq!(
        result["verdicts"]["mutual_exclusion"], "violated",
        "{result}"
    );
    for file in [
        "trace.jsonl",
        "timeline.svg",
        "history.jsonl",
        "faults-applied.json",
        "logs/client-1.log",
    ] {
        assert!(dir.join(file).exists(), "{file} missing");
    }
    let applied = std::fs::read_to_string(dir.join("faults-applied.json")).unwrap();
    assert!(
        applied.contains("SIGSTOP") && applied.contains("SIGCONT"),
        "{applied}"
    );
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(history.lines().next().unwrap()).unwrap();
    for field in ["index", "time", "process", "type", "f", "value"] {
        assert!(
            first.get(field).is_some(),
            "history.jsonl lacks {field}: {first}"
        );
    }
    assert!(history.contains("\"process\":\"nemesis\""));
    assert_eq!(wait_no_leftovers(pid), Vec::<String>::new());
}

/// The built-in scheme's paused holder had sent its `LOCKSIM.READ` when it was stopped; the
/// reply arrives during the pause, and on SIGCONT the adapter reads it (not "timeout", although
/// its 500 ms command timer expired too) and writes back a value computed before the other
/// client's updates: a lost update, resource safety violated — as in the simulation, where
/// set-nx-px-lua violates both on every seed of this scenario and of
/// scenarios/matrix/02-gc-pause.json. (A run whose holder is stopped before it sends the read
/// reads afresh and loses nothing: hence 2 of 3, not 3 of 3.)
#[test]
fn a_built_in_scheme_reads_the_reply_that_arrived_during_its_pause() {
    let (dir, rates) = repeat_runs("builtin-pause-resource", "gc-pause.json", 3, &[], &[]);
    assert!(
        violations(&rates, "resource_safety violated") >= 2,
        "{rates} ({})",
        dir.display()
    );
}

#[test]
fn the_same_workload_without_the_pause_holds_and_two_runs_share_the_machine() {
    let dirs = [out_dir("control-1"), out_dir("control-2")];
    let runs: Vec<_> = dirs
        .iter()
        .map(|dir| {
            let mut command = locksim();
            command
                .arg("live")
                .arg(scenario("no-faults.json"))
                .arg("--out")
                .arg(dir);
            std::thread::spawn(move || run(command))
        })
        .collect();
    for (handle, dir) in runs.into_iter().zip(&dirs) {
        let (output, pid) = handle.join().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let result = result_json(dir);
        assert_eq!(result["verdicts"]["mutual_exclusion"], "holds", "{result}");
        assert_eq!(result["verdicts"]["resource_safety"], "holds", "{result}");
        assert_eq!(result["counts"]["acquisitions"], 6, "{result}");
        assert_eq!(wait_no_leftovers(pid), Vec::<String>::new());
    }
}

/// A client command that breaks the protocol stops the run with an error naming the client
/// and the operation, and leaves nothing running.
fn bad_client(test: &str, script: &str, expected: &[&str]) {
    let dir = out_dir(test);
    let mut command = locksim();
    command
        .arg("live")
        .arg(scenario("no-faults.json"))
        .arg("--out")
        .arg(&dir)
        .args([
            "--op-timeout-ms",
            "1000",
            "--grace-ms",
            "300",
            "--",
            "sh",
            "-c",
        ])
        .arg(script);
    let (output, pid) = run(command);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("client-1: op ") || stderr.contains("client-2: op "),
        "{stderr}"
    );
    for text in expected {
        assert!(stderr.contains(text), "expected {text:?} in: {stderr}");
    }
    assert_eq!(wait_no_leftovers(pid), Vec::<String>::new());
}

#[test]
fn a_client_that_exits_at_once() {
    bad_client(
        "exits",
        "echo 'broken adapter' >&2; exit 3",
        &[
            "op init (id 1): the process ended",
            "exit status: 3",
            "broken adapter",
        ],
    );
}

#[test]
fn a_client_that_never_answers() {
    bad_client(
        "silent",
        "exec sleep 100",
        &["op init (id 1): no answer within 1000 ms"],
    );
}

#[test]
fn a_client_that_writes_garbage() {
    bad_client(
        "garbage",
        "read line; echo 'hello there'; exec sleep 100",
        &[
            "op init (id 1): answered something that is not a driver-protocol answer",
            "hello there",
        ],
    );
}

#[test]
fn a_client_that_ignores_sigterm_is_killed() {
    bad_client(
        "stubborn",
        r#"trap '' TERM; read line; echo '{"re":1,"type":"ok"}'; while :; do sleep 1; done"#,
        &[
            "op acquire (id 2): no answer",
            "killed (SIGKILL) after ignoring SIGTERM",
        ],
    );
}

/// Starts a live run whose clients stay busy, waits until they run, and returns locksim.
fn start_long_run(test: &str) -> std::process::Child {
    let dir = out_dir(test);
    let child = locksim()
        .arg("live")
        .arg(scenario("no-faults.json"))
        .arg("--out")
        .arg(&dir)
        .args(["--op-timeout-ms", "60000", "--", "sh", "-c"])
        .arg("read line; exec sleep 60")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("locksim starts");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while leftovers(pid).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(leftovers(pid).len(), 2, "the two clients did not start");
    child
}

#[test]
fn sigint_stops_the_run_and_reaps_every_client() {
    let mut child = start_long_run("sigint");
    let pid = child.id();
    // SAFETY: our own child.
    unsafe {
        libc::kill(pid as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(wait_no_leftovers(pid), Vec::<String>::new());
}

#[test]
fn sigkill_of_locksim_leaves_no_client_behind() {
    let mut child = start_long_run("sigkill");
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    // The guardian sees its pipe close and kills every group.
    assert_eq!(wait_no_leftovers(pid), Vec::<String>::new());
}

/// The client libraries `scripts/client-suites.sh setup` installs; `None` (after a notice)
/// when missing and CI (`LOCKSIM_REQUIRE_CLIENT_SUITES=1`) does not require them.
fn suite(what: &str, path: PathBuf) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    if std::env::var("LOCKSIM_REQUIRE_CLIENT_SUITES").as_deref() == Ok("1") {
        panic!("{what} is not installed: run `bash scripts/client-suites.sh setup`");
    }
    eprintln!("\n!!! {what} SKIPPED: run `bash scripts/client-suites.sh setup` first !!!\n");
    None
}

/// `--repeat` runs of an adapter (the built-in scheme when `adapter` is empty), with `env` set
/// for locksim and its clients; returns the output folder and `rates.json`, how many runs
/// violated each verdict.
fn repeat_runs(
    test: &str,
    file: &str,
    repeat: u32,
    adapter: &[&str],
    env: &[(&str, &Path)],
) -> (PathBuf, serde_json::Value) {
    let repeat = repeat.to_string();
    let dir = live_run(
        test,
        file,
        &["--repeat", &repeat, "--jobs", "2"],
        adapter,
        env,
    );
    let text = std::fs::read_to_string(dir.join("rates.json")).expect("rates.json");
    (dir, serde_json::from_str(&text).unwrap())
}

fn violations(rates: &serde_json::Value, verdict: &str) -> u64 {
    rates["rates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["verdict"] == verdict)
        .and_then(|r| r["runs"].as_u64())
        .unwrap()
}

/// The live clock-jump scenario (examples/live/scenarios/client-clock-jump.json) for an
/// adapter: the simulation's verdict for a lock whose lease is the server's TTL (set-nx-px-lua
/// and redlock in scenarios/matrix/20-client-clock-jump.json: holds), with the jump really
/// applied (libfaketime) and every acquisition made after it — a client broken by the jump
/// would hold mutual exclusion trivially.
fn assert_a_clock_jump_changes_nothing(test: &str, adapter: &[&str], env: &[(&str, &Path)]) {
    let (dir, rates) = repeat_runs(test, "client-clock-jump.json", 2, adapter, env);
    assert_eq!(
        violations(&rates, "mutual_exclusion violated"),
        0,
        "{rates}"
    );
    for k in 1..=2 {
        let run = dir.join(format!("run-{k}"));
        let applied = std::fs::read_to_string(run.join("faults-applied.json")).unwrap();
        assert!(applied.contains("libfaketime"), "{applied}");
        assert!(!applied.contains("not applied"), "{applied}");
        let result = result_json(&run);
        assert_eq!(result["counts"]["acquisitions"], 6, "run {k}: {result}");
    }
}

/// redis-py through redis-py's own `Sentinel` and node-redlock (plain ioredis, no Sentinel)
/// under the live failover to a lagging replica
/// (examples/live/scenarios/failover-lagging-replica.json).
fn failover(test: &str, adapter: &[&str], env: &[(&str, &Path)]) -> serde_json::Value {
    repeat_runs(test, "failover-lagging-replica.json", 3, adapter, env).1
}

fn redis_py_adapter() -> Option<[String; 2]> {
    let python = suite(
        "redis-py (target/client-suites/venv)",
        root().join("target/client-suites/venv/bin/python"),
    )?;
    let adapter = root().join("examples/live/redis_py_lock.py");
    Some([
        python.to_string_lossy().into_owned(),
        adapter.to_string_lossy().into_owned(),
    ])
}

/// node and the adapter, and `LOCKSIM_NODE_MODULES` (where the adapter finds node-redlock).
fn node_redlock_adapter() -> Option<([String; 2], PathBuf)> {
    let modules = suite(
        "node-redlock (target/client-suites/node)",
        root().join("target/client-suites/node/node_modules/redlock"),
    )?;
    let require_from = modules
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("package.json");
    let adapter = root().join("examples/live/node_redlock.mjs");
    Some((
        ["node".into(), adapter.to_string_lossy().into_owned()],
        require_from,
    ))
}

/// redis-py's `Lock` (examples/live/redis_py_lock.py) gets the simulation's verdicts for the
/// matching built-in scheme, set-nx-px-lua (`SET NX PX` + a Lua compare-and-delete, redis-py's
/// own): mutual exclusion violated under a pause longer than the lease (scenarios/matrix/
/// 02-gc-pause.json: violated on every seed), never without the pause, and resource safety
/// kept by a fenced resource.
#[test]
fn redis_py_lock_under_a_pause_longer_than_its_lease() {
    let Some(adapter) = redis_py_adapter() else {
        return;
    };
    let adapter = adapter.each_ref().map(String::as_str);
    let (_, paused) = repeat_runs("redis-py-pause", "gc-pause.json", 10, &adapter, &[]);
    assert!(
        violations(&paused, "mutual_exclusion violated") >= 9,
        "{paused}"
    );
    let (_, control) = repeat_runs("redis-py-control", "no-faults.json", 10, &adapter, &[]);
    assert_eq!(
        violations(&control, "mutual_exclusion violated"),
        0,
        "{control}"
    );
    let (_, fenced) = repeat_runs("redis-py-fenced", "gc-pause-fenced.json", 3, &adapter, &[]);
    assert_eq!(
        violations(&fenced, "resource_safety violated"),
        0,
        "{fenced}"
    );
    assert_eq!(
        violations(&fenced, "mutual_exclusion violated"),
        3,
        "{fenced}"
    );
}

/// redis-py's `Lock` through its `Sentinel` client (`HELLO 3`, `SENTINEL masters`): violated,
/// as set-nx-px-lua:redis-py is in scenarios/matrix/16-failover-lagging-replica.json. Live, the
/// second client's acquire usually ends `info` (its connection to the crashed master closed, or
/// no master during the failover: redis-py raises the last retry's error, so the outcome is
/// unknown) while the first holds the lock — a possible overlap — where the simulated client
/// gets a definite grant from the promoted replica.
#[test]
fn redis_py_lock_under_a_failover_to_a_lagging_replica() {
    let Some(adapter) = redis_py_adapter() else {
        return;
    };
    let rates = failover(
        "redis-py-failover",
        &adapter.each_ref().map(String::as_str),
        &[],
    );
    assert!(
        violations(&rates, "mutual_exclusion violated") >= 2,
        "{rates}"
    );
}

#[test]
fn redis_py_lock_under_a_client_clock_jump() {
    let Some(adapter) = redis_py_adapter() else {
        return;
    };
    assert_a_clock_jump_changes_nothing(
        "redis-py-clock",
        &adapter.each_ref().map(String::as_str),
        &[],
    );
}

/// node-redlock v5 (examples/live/node_redlock.mjs) under the same pause: violated, as the
/// simulation's redlock:node-redlock rows are in scenarios/matrix/02-gc-pause.json.
#[test]
fn node_redlock_under_a_pause_longer_than_its_lease() {
    let Some((adapter, modules)) = node_redlock_adapter() else {
        return;
    };
    let env = [("LOCKSIM_NODE_MODULES", modules.as_path())];
    let adapter = adapter.each_ref().map(String::as_str);
    let (_, rates) = repeat_runs("node-redlock", "gc-pause.json", 3, &adapter, &env);
    assert!(
        violations(&rates, "mutual_exclusion violated") >= 2,
        "{rates}"
    );
}

/// node-redlock with its one instance: the crashed master refuses every later acquisition, so
/// nobody takes the lock twice — holds, as redlock:node-redlock@4.2.0 does in
/// scenarios/matrix/16-failover-lagging-replica.json.
#[test]
fn node_redlock_under_a_failover_to_a_lagging_replica() {
    let Some((adapter, modules)) = node_redlock_adapter() else {
        return;
    };
    let env = [("LOCKSIM_NODE_MODULES", modules.as_path())];
    let rates = failover(
        "node-redlock-failover",
        &adapter.each_ref().map(String::as_str),
        &env,
    );
    assert_eq!(
        violations(&rates, "mutual_exclusion violated"),
        0,
        "{rates}"
    );
}

#[test]
fn node_redlock_under_a_client_clock_jump() {
    let Some((adapter, modules)) = node_redlock_adapter() else {
        return;
    };
    let env = [("LOCKSIM_NODE_MODULES", modules.as_path())];
    assert_a_clock_jump_changes_nothing(
        "node-redlock-clock",
        &adapter.each_ref().map(String::as_str),
        &env,
    );
}

/// The history's operations of `f` that completed with `kind` (ok, fail, info).
fn completed(dir: &Path, f: &str, kind: &str) -> usize {
    let history = std::fs::read_to_string(dir.join("history.jsonl")).expect("history.jsonl");
    history
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|op| op["f"] == f && op["type"] == kind)
        .count()
}

/// One live run of `file` with `adapter` (the built-in scheme when empty); its output folder.
fn single_run(test: &str, file: &str, adapter: &[&str], env: &[(&str, &Path)]) -> PathBuf {
    live_run(test, file, &[], adapter, env)
}

/// `locksim live` of `file` with `options`, `adapter` (the built-in scheme when empty) and `env`
/// set for locksim and its clients, asserted to succeed and leave no process; its output folder.
fn live_run(
    test: &str,
    file: &str,
    options: &[&str],
    adapter: &[&str],
    env: &[(&str, &Path)],
) -> PathBuf {
    let dir = out_dir(test);
    let mut command = locksim();
    command.envs(env.iter().copied());
    command
        .arg("live")
        .arg(scenario(file))
        .arg("--out")
        .arg(&dir)
        .args(options);
    if !adapter.is_empty() {
        command.arg("--").args(adapter);
    }
    let (output, pid) = run(command);
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(wait_no_leftovers(pid), Vec::<String>::new());
    dir
}

/// `clients.extend`: a 1.2 s hold on a 500 ms lease, extended every 200 ms, keeps the lock
/// (every extension ok, no overlap); the same workload with the holder stopped for 1.5 s has
/// its next extension refused, so it skips its write (resource safety holds) while the two
/// holds overlapped (mutual exclusion violated) — the simulation's verdicts for this scheme.
fn assert_extensions(test: &str, adapter: &[&str], env: &[(&str, &Path)]) {
    let dir = single_run(
        &format!("{test}-heartbeat"),
        "extend-heartbeat.json",
        adapter,
        env,
    );
    let result = result_json(&dir);
    assert_eq!(result["verdicts"]["mutual_exclusion"], "holds", "{result}");
    assert_eq!(result["verdicts"]["resource_safety"], "holds", "{result}");
    // 4 holds of 1.2 s, each extended 5 times (after 200, 400, ..., 1000 ms).
    assert_eq!(completed(&dir, "extend", "ok"), 20, "{}", dir.display());
    assert_eq!(completed(&dir, "extend", "fail"), 0, "{}", dir.display());
    let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    assert!(
        trace.contains("\"event\":\"extended\""),
        "{}",
        dir.display()
    );

    let dir = single_run(
        &format!("{test}-pause"),
        "extend-gc-pause.json",
        adapter,
        env,
    );
    let result = result_json(&dir);
    assert_eq!(
        result["verdicts"]["mutual_exclusion"], "violated",
        "{result}"
    );
    assert_eq!(result["verdicts"]["resource_safety"], "holds", "{result}");
    assert!(
        completed(&dir, "extend", "fail") >= 1,
        "the paused holder's extension is refused ({})",
        dir.display()
    );
}

#[test]
fn a_built_in_scheme_extends_its_lease_as_the_workload_asks() {
    assert_extensions("builtin-extend", &[], &[]);
}

#[test]
fn redis_py_lock_extends_its_lease_as_the_workload_asks() {
    let Some(adapter) = redis_py_adapter() else {
        return;
    };
    assert_extensions(
        "redis-py-extend",
        &adapter.each_ref().map(String::as_str),
        &[],
    );
}

/// `--observe`: an unmodified redis-py service (examples/live/observed_service.py), judged from
/// the servers' key history and the resource alone. Its first holder stalls 1.5 s inside the
/// lock (500 ms lease): the overlap and the lost update are found; with STALL_MS=0, neither.
#[test]
fn an_observed_service_shows_the_overlap_the_servers_saw() {
    let Some(adapter) = redis_py_adapter() else {
        return;
    };
    let service = root().join("examples/live/observed_service.py");
    let observe = |test: &str, stall_ms: &str| {
        let service = [adapter[0].as_str(), service.to_str().unwrap()];
        let env = [("STALL_MS", Path::new(stall_ms))];
        let dir = live_run(test, "no-faults.json", &["--observe"], &service, &env);
        (result_json(&dir), dir)
    };
    let (stalled, dir) = observe("observe-stall", "1500");
    assert_eq!(
        stalled["verdicts"]["mutual_exclusion"], "violated",
        "{stalled}"
    );
    assert_eq!(
        stalled["verdicts"]["resource_safety"], "violated",
        "{stalled}"
    );
    // 3 turns of each client, seen as the servers' own key changes.
    assert_eq!(stalled["counts"]["acquisitions"], 6, "{stalled}");
    let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    assert!(
        trace.contains("\"owner\":\"client-1\"") && trace.contains("\"owner\":\"client-2\""),
        "key_owner names both clients ({})",
        dir.display()
    );
    let (control, _) = observe("observe-control", "0");
    assert_eq!(
        control["verdicts"]["mutual_exclusion"], "holds",
        "{control}"
    );
    assert_eq!(control["verdicts"]["resource_safety"], "holds", "{control}");
    assert_eq!(control["counts"]["acquisitions"], 6, "{control}");
}

#[test]
fn observe_refuses_a_fault_waiting_for_a_clients_own_event() {
    let (output, _) = run({
        let mut c = locksim();
        c.arg("live")
            .arg(scenario("gc-pause.json"))
            .args(["--observe", "--", "true"]);
        c
    });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("faults[0].on.event acquired") && stderr.contains("--observe"),
        "{stderr}"
    );
}

/// pottery's Redlock (examples/live/pottery_redlock.py) under the pause longer than its lease:
/// violated, as the simulation's Redlock rows are in scenarios/matrix/02-gc-pause.json.
#[test]
fn pottery_redlock_under_a_pause_longer_than_its_lease() {
    let Some(python) = suite(
        "pottery (target/client-suites/venv-pottery)",
        root().join("target/client-suites/venv-pottery/bin/python"),
    ) else {
        return;
    };
    let adapter = root().join("examples/live/pottery_redlock.py");
    let adapter = [python.to_str().unwrap(), adapter.to_str().unwrap()];
    let (_, rates) = repeat_runs("pottery", "gc-pause.json", 3, &adapter, &[]);
    assert!(
        violations(&rates, "mutual_exclusion violated") >= 2,
        "{rates}"
    );
    let (_, control) = repeat_runs("pottery-control", "no-faults.json", 2, &adapter, &[]);
    assert_eq!(
        violations(&control, "mutual_exclusion violated"),
        0,
        "{control}"
    );
}

/// redis-semaphore's Mutex (examples/live/redis_semaphore_mutex.mjs) under the same pause: its
/// refresh timer stops with the process, the lease runs out, the other client takes the lock.
#[test]
fn redis_semaphore_mutex_under_a_pause_longer_than_its_lease() {
    let Some((_, modules)) = node_redlock_adapter() else {
        return;
    };
    let env = [("LOCKSIM_NODE_MODULES", modules.as_path())];
    let adapter = root().join("examples/live/redis_semaphore_mutex.mjs");
    let adapter = ["node", adapter.to_str().unwrap()];
    let (_, rates) = repeat_runs("redis-semaphore", "gc-pause.json", 3, &adapter, &env);
    assert!(
        violations(&rates, "mutual_exclusion violated") >= 2,
        "{rates}"
    );
    let (_, control) = repeat_runs(
        "redis-semaphore-control",
        "no-faults.json",
        2,
        &adapter,
        &env,
    );
    assert_eq!(
        violations(&control, "mutual_exclusion violated"),
        0,
        "{control}"
    );
}

/// `locksim shrink --live`: each candidate runs up to K times. Without its pause the gc-pause
/// scenario holds in both repeats, so the pause is kept, and the result still violates.
#[test]
fn shrink_live_keeps_the_fault_a_live_failure_needs() {
    let dir = out_dir("shrink-live");
    let out = dir.join("shrunk.json");
    let mut command = locksim();
    command
        .arg("shrink")
        .arg(scenario("gc-pause.json"))
        .args(["--live", "--repeats", "2", "--max-runs", "4", "--out"])
        .arg(&out);
    let (output, pid) = run(command);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("every candidate ran up to 2 times"),
        "{stdout}"
    );
    assert_eq!(wait_no_leftovers(pid), Vec::<String>::new());
    let shrunk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(shrunk["faults"].as_array().unwrap().len(), 1, "{shrunk}");
    assert_eq!(shrunk["faults"][0]["kind"], "pause", "{shrunk}");
    assert_eq!(shrunk["expect"]["mutual_exclusion"], "violated", "{shrunk}");
}

/// A pause at `at_ms: 0` comes before any client process exists (the run's clock starts before
/// the clients do), so its SIGSTOP finds none; the client is still held, as the simulation's
/// paused client does not start: stopped once it answered `init`, its workload begins only
/// after the resume (SIGCONT), while the other client's does not wait for it. Ordered events,
/// not durations: 3 s of pause against a start-up of well under a second.
#[test]
fn a_client_paused_from_the_start_is_held_until_its_resume() {
    let dir = out_dir("paused-from-the-start");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("paused-from-the-start.json");
    std::fs::write(
        &file,
        r#"{ "name": "paused-from-the-start", "duration_ms": 8000,
             "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
             "clients": { "count": 2, "acquisitions": 1, "hold_ms": [50, 50], "think_ms": [0, 0],
                          "acquire_timeout_ms": 5000, "command_timeout_ms": 500 },
             "faults": [ { "kind": "pause", "node": "client-2", "at_ms": 0, "duration_ms": 3000 } ] }"#,
    )
    .unwrap();
    let out = dir.join("out");
    let mut command = locksim();
    command.arg("live").arg(&file).arg("--out").arg(&out);
    let (output, pid) = run(command);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let applied: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("faults-applied.json")).unwrap())
            .unwrap();
    let actions: Vec<(String, bool)> = applied["applied"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["node"] == "client-2")
        .map(|a| {
            (
                a["action"].as_str().unwrap().to_string(),
                a["applied"].as_bool().unwrap(),
            )
        })
        .collect();
    let stopped = actions
        .iter()
        .position(|(action, ok)| *ok && action.ends_with("SIGSTOP)"));
    let continued = actions
        .iter()
        .position(|(action, ok)| *ok && action.ends_with("SIGCONT)"));
    assert!(
        matches!((stopped, continued), (Some(s), Some(c)) if s < c),
        "client-2 was not stopped before its resume: {actions:?}"
    );
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    let first_acquire = |client: &str| {
        trace
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|e| e["node"] == client && e["event"] == "acquire_started")
            .and_then(|e| e["t_us"].as_u64())
            .unwrap_or_else(|| panic!("{client} never started an acquisition"))
    };
    assert!(
        first_acquire("client-2") >= 3_000_000,
        "client-2 acquired during its pause"
    );
    assert!(
        first_acquire("client-1") < first_acquire("client-2"),
        "client-1 waited for the paused client-2"
    );
    assert_eq!(wait_no_leftovers(pid), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&dir);
}
