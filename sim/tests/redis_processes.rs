//! The real-process layer (`live::redis_server`) against Debian's redis-server and
//! redis-sentinel 7.0 (`.ci/run` installs them): a topology starts and settles, a `kill -9`
//! and restart keeps what an `everysec` AOF was given, and bad starts are clear errors — with
//! no process left behind after success, error, SIGINT or SIGKILL of locksim.

mod common;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use locksim::live::process::Supervisor;
use locksim::live::redis_server::{Addresses, Binaries, Cluster, call};
use locksim::scenario::{Scenario, Topology};
use model::redis::Reply;

fn topology(json: &str) -> Topology {
    let scenario = format!(r#"{{ "name": "t", "scheme": "set-nx-px-lua", "topology": {json} }}"#);
    Scenario::parse(&scenario, "t.json")
        .unwrap()
        .topology
        .clone()
}

/// The processes whose working folder is under `dir` (every real process runs in its node's
/// folder). Not the supervisor's marker: redis-server rewrites its process title over its
/// environment (setproctitle), so `/proc/<pid>/environ` loses the marker.
fn running_in(dir: &std::path::Path) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .is_ok_and(|s| s.split(' ').nth(2) == Some("Z"));
        if !zombie && cwd.starts_with(dir) {
            pids.push(pid);
        }
    }
    pids
}

/// Waits (bounded) until no process runs under `dir`.
fn none_left(dir: &std::path::Path) -> Vec<i32> {
    for _ in 0..200 {
        let left = running_in(dir);
        if left.is_empty() {
            return left;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    running_in(dir)
}

#[test]
fn a_topology_starts_settles_and_a_kill_9_keeps_the_everysec_aof() {
    let dir = common::temp_dir("redis-processes-cluster");
    let supervisor = Supervisor::new().unwrap();
    let topology = topology(
        r#"{ "replicas": 1, "sentinels": 3, "sentinel_down_after_ms": 1000, "appendfsync": "everysec" }"#,
    );
    {
        let mut cluster = Cluster::start(
            &supervisor,
            Binaries::default(),
            &topology,
            Addresses::free(&topology).unwrap(),
            &dir,
        )
        .unwrap();
        cluster
            .wait_settled(&topology, Duration::from_secs(60))
            .unwrap();
        let master = cluster.addr("redis-1");
        let ok = call(
            master,
            &["SET", "lock", "tok", "NX", "PX", "20000"],
            Duration::from_secs(2),
        )
        .unwrap();
        assert_eq!(ok, Reply::Status("OK".into()));
        // kill -9 right after the reply: the AOF was written, not fsynced; the kernel keeps it.
        cluster.crash("redis-1").unwrap();
        assert!(call(master, &["PING"], Duration::from_millis(200)).is_err());
        cluster.restart("redis-1").unwrap();
        let value = call(master, &["GET", "lock"], Duration::from_secs(2)).unwrap();
        assert_eq!(value, Reply::Bulk(b"tok".to_vec()));
        let ttl = call(master, &["PTTL", "lock"], Duration::from_secs(2))
            .unwrap()
            .as_integer()
            .unwrap();
        assert!((1..=20_000).contains(&ttl), "PTTL {ttl}");
        assert_eq!(running_in(&dir).len(), 5, "five processes run");
    }
    assert_eq!(none_left(&dir), Vec::<i32>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_binary_names_the_node_and_the_program() {
    let dir = common::temp_dir("redis-processes-missing");
    let supervisor = Supervisor::new().unwrap();
    let topology = topology(r#"{ "replicas": 1 }"#);
    let binaries = Binaries {
        redis_server: "/nonexistent/redis-server".into(),
        ..Binaries::default()
    };
    let error = Cluster::start(
        &supervisor,
        binaries,
        &topology,
        Addresses::free(&topology).unwrap(),
        &dir,
    )
    .err()
    .expect("no redis-server there");
    assert!(
        error.starts_with("redis-1: cannot start /nonexistent/redis-server"),
        "{error}"
    );
    assert!(error.contains("apt-get install redis-server"), "{error}");
    assert_eq!(none_left(&dir), Vec::<i32>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_address_in_use_names_the_node_and_stops_the_others() {
    let dir = common::temp_dir("redis-processes-taken");
    let supervisor = Supervisor::new().unwrap();
    let topology = topology(r#"{ "replicas": 1 }"#);
    let addresses = Addresses::free(&topology).unwrap();
    // The replica's address is taken once the master started.
    let _squatter = TcpListener::bind(addresses.listen["redis-1-replica-1"]).unwrap();
    let error = Cluster::start(&supervisor, Binaries::default(), &topology, addresses, &dir)
        .err()
        .expect("the address is taken");
    assert!(
        error.starts_with("redis-1-replica-1: redis-server exited during start-up"),
        "{error}"
    );
    assert!(error.contains("Address already in use"), "{error}");
    assert_eq!(none_left(&dir), Vec::<i32>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `locksim` with `args`, waits (bounded) until a real process runs under `work`, then
/// sends it `signal`: none may outlive it (the stop flag reaps them; after a SIGKILL the
/// guardian kills them).
fn signal_leaves_no_redis_process(args: &[&std::ffi::OsStr], work: &std::path::Path, signal: i32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_locksim"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let work = if work.as_os_str().is_empty() {
        // `locksim fidelity` runs its processes under this folder.
        std::env::temp_dir().join(format!("locksim-fidelity-{}", child.id()))
    } else {
        work.to_path_buf()
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    while running_in(&work).is_empty() && Instant::now() < deadline {
        assert!(
            child.try_wait().unwrap().is_none(),
            "locksim ended before starting a process"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!running_in(&work).is_empty(), "no redis process started");
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let _ = child.wait();
    assert_eq!(none_left(&work), Vec::<i32>::new(), "after signal {signal}");
}

/// `locksim fidelity` stopped by SIGINT, then killed by SIGKILL, while its real processes run:
/// none outlives it.
#[test]
fn sigint_and_sigkill_of_locksim_leave_no_redis_process() {
    for signal in [libc::SIGINT, libc::SIGKILL] {
        let out = common::temp_dir(&format!("redis-processes-signal-{signal}"));
        let report = out.join("fidelity.md");
        let args = [
            "fidelity".as_ref(),
            "--repeat".as_ref(),
            "1".as_ref(),
            "--out".as_ref(),
            report.as_os_str(),
        ];
        signal_leaves_no_redis_process(&args, std::path::Path::new(""), signal);
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// `locksim live --backend redis-server` stopped by SIGINT, then killed by SIGKILL, while its
/// redis-server, replica and Sentinels run (the clients stay busy): none outlives it.
#[test]
fn sigint_and_sigkill_of_a_live_run_leave_no_redis_process() {
    let scenario = common::repo().join("examples/live/scenarios/failover-lagging-replica.json");
    for signal in [libc::SIGINT, libc::SIGKILL] {
        let out = common::temp_dir(&format!("live-backend-signal-{signal}"));
        let args = [
            "live".as_ref(),
            scenario.as_os_str(),
            "--backend".as_ref(),
            "redis-server".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
            "--op-timeout-ms".as_ref(),
            "60000".as_ref(),
            "--".as_ref(),
            "sh".as_ref(),
            "-c".as_ref(),
            "read line; exec sleep 60".as_ref(),
        ];
        signal_leaves_no_redis_process(&args, &out.join("servers"), signal);
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// One `locksim live --backend redis-server` run of an `examples/live/scenarios` file with its
/// built-in scheme; its result.json. Nothing may be left running after it.
fn live_run(test: &str, file: &str, extra: &[&str]) -> (std::process::Output, serde_json::Value) {
    let (output, result, _) = live_run_with_trace(test, file, extra);
    (output, result)
}

/// `live_run`, with the run's trace events.
fn live_run_with_trace(
    test: &str,
    file: &str,
    extra: &[&str],
) -> (
    std::process::Output,
    serde_json::Value,
    Vec<serde_json::Value>,
) {
    let out = common::temp_dir(test);
    let scenario = common::repo().join("examples/live/scenarios").join(file);
    let output = Command::new(env!("CARGO_BIN_EXE_locksim"))
        .arg("live")
        .arg(&scenario)
        .args(["--backend", "redis-server", "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(none_left(&out.join("servers")), Vec::<i32>::new());
    let result = std::fs::read_to_string(out.join("result.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(serde_json::Value::Null);
    let trace = std::fs::read_to_string(out.join("trace.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let _ = std::fs::remove_dir_all(&out);
    (output, result, trace)
}

/// Server-to-server faults and live triggers on real processes
/// (examples/live/scenarios/replica-partition.json): the master's replication stream to its
/// replica crosses the simulated network, so a partition between them holds it — each lock
/// written on the master during the cut reaches the real replica only after the cut heals —
/// and a pause triggered `on: lock_granted` fires from the real master's reply, before the
/// client has its answer (`acquired`).
#[test]
fn live_backend_a_master_replica_partition_holds_replication_and_lock_granted_fires() {
    let (output, result, trace) = live_run_with_trace(
        "live-backend-replica-partition",
        "replica-partition.json",
        &[],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(result.get("faults_not_applied"), None, "{result:#}");
    let t = |e: &serde_json::Value| e["t_us"].as_u64().unwrap();
    let first = |pred: &dyn Fn(&serde_json::Value) -> bool| trace.iter().find(|e| pred(e)).map(t);
    let fault = |kind: &str, phase: &str| {
        first(&|e| e["event"] == "fault" && e["fault"] == kind && e["phase"] == phase)
            .unwrap_or_else(|| panic!("no {kind} {phase} in the trace"))
    };
    // The pause: at the first grant, after the first SET left the client, before its answer.
    let set = |e: &serde_json::Value| {
        e["event"] == "command_sent" && e["command"].as_str().unwrap().starts_with("SET lock ")
    };
    let first_set = first(&set).expect("the client sent SET");
    let paused = fault("pause", "injected");
    let acquired = first(&|e| e["event"] == "acquired").expect("the client got the lock");
    assert!(
        first_set <= paused && paused < acquired,
        "{first_set} {paused} {acquired}"
    );
    // The partition: every lock written during the cut is replicated, after it heals.
    let (cut, healed) = (fault("partition", "injected"), fault("partition", "healed"));
    let token = |e: &serde_json::Value| {
        e["command"]
            .as_str()
            .unwrap()
            .split(' ')
            .nth(2)
            .map(str::to_string)
    };
    let during: Vec<String> = trace
        .iter()
        .filter(|e| set(e) && (cut..healed).contains(&t(e)))
        .filter_map(token)
        .collect();
    assert!(!during.is_empty(), "no lock was written during the cut");
    for written in &during {
        let replicated = trace
            .iter()
            .find(|e| {
                e["event"] == "replicated"
                    && e["node"] == "redis-1-replica-1"
                    && token(e).as_ref() == Some(written)
            })
            .map(t);
        assert!(
            replicated.is_some_and(|at| at >= healed),
            "{written}: written during the cut ({cut}..{healed} µs), replicated at {replicated:?}"
        );
    }
}

/// The built-in set-nx-px-lua on a real redis-server, its holder paused (SIGSTOP) 1.5 s, three
/// times its 500 ms lease: the real key expires, the other client takes the lock, and the
/// paused one writes after waking — the overlap the simulation finds in matrix 02.
#[test]
fn live_backend_a_pause_longer_than_the_lease_overlaps_on_real_redis() {
    let (output, result) = live_run("live-backend-gc-pause", "gc-pause.json", &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        result["verdicts"]["mutual_exclusion"], "violated",
        "{result:#}"
    );
    assert_eq!(result["scheme"], "set-nx-px-lua (redis-server)");
}

/// The master killed (SIGKILL) right after client-1's grant and restarted at once, AOF
/// `everysec`: the restarted redis-server reloads the key from what the kernel kept, so
/// client-2 waits for the release — no overlap (matrix 11a's verdict for set-nx-px-lua).
#[test]
fn live_backend_a_master_kill_9_with_everysec_keeps_the_lock() {
    let (output, result) = live_run("live-backend-crash", "master-crash-everysec.json", &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        result["verdicts"]["mutual_exclusion"], "holds",
        "{result:#}"
    );
    assert_eq!(result["verdicts"]["liveness"], "ok", "{result:#}");
    assert!(
        result["counts"]["acquisitions"].as_u64().unwrap_or(0) >= 3,
        "both clients got the lock after the restart: {result:#}"
    );
}

/// Matrix 19 live, the set-nx-px-lua cell: the holder's master's clock jumps 4 s forward (past
/// the 2 s lease) through the clock shim, the real redis-server expires the key at once and the
/// other client takes the lock — the violation the simulation finds on every seed — and nothing
/// of the scenario is reported not applied.
#[test]
fn live_backend_a_server_clock_jump_expires_the_lock_on_real_redis() {
    let out = common::temp_dir("live-backend-server-clock-jump");
    let output = Command::new(env!("CARGO_BIN_EXE_locksim"))
        .arg("live")
        .arg(common::repo().join("scenarios/matrix/19-server-clock-jump.json"))
        .args([
            "--scheme",
            "set-nx-px-lua",
            "--backend",
            "redis-server",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(none_left(&out.join("servers")), Vec::<i32>::new());
    let result: serde_json::Value = std::fs::read_to_string(out.join("result.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(serde_json::Value::Null);
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Written only when something was not applied.
    assert_eq!(
        result["faults_not_applied"],
        serde_json::Value::Null,
        "{result:#}"
    );
    assert_eq!(
        result["verdicts"]["mutual_exclusion"], "violated",
        "{result:#}"
    );
}

/// A missing redis-server is a clear error naming the node and the program, before any client.
#[test]
fn live_backend_a_missing_binary_is_a_clear_error() {
    let (output, _) = live_run(
        "live-backend-missing",
        "no-faults.json",
        &["--redis-server", "/nonexistent/redis-server"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("redis-1: cannot start /nonexistent/redis-server"),
        "{stderr}"
    );
}

/// A bounded subset of `locksim fidelity`'s probes (3 repeats each side): the bands are what
/// Redis's own mechanisms allow, not speeds. min-replicas refuses only once a whole-second lag
/// passed `min-replicas-max-lag 1` at a 1 Hz `replicationCron` (the model had refused within
/// 40 ms); no Sentinel answers the promoted replica before `down-after` (1 s), and every one
/// does within a few seconds. With the link to one of two replicas cut while writes go on, the
/// other, up-to-date replica is promoted whichever one is behind (one run each): Sentinel ranks
/// by offset before run id (`compareSlavesForPromotion`, 7.0.15 `src/sentinel.c` 4920-4946).
#[test]
fn the_probes_agree_with_redis() {
    use locksim::fidelity::probes::{Real, failover, min_replicas, promotion};
    let dir = common::temp_dir("redis-processes-probes");
    let supervisor = Supervisor::new().unwrap();
    let real = Real {
        supervisor: &supervisor,
        binaries: Binaries::default(),
        dir: &dir,
    };
    let simulated = min_replicas::simulated(3).unwrap();
    let measured = min_replicas::real(&real, 3).unwrap();
    for (side, samples) in [("simulation", &simulated), ("redis-server", &measured)] {
        assert_eq!(samples.len(), 3, "{side}: {samples:?}");
        for ms in samples {
            assert!(
                (500.0..3500.0).contains(ms),
                "{side}: NOREPLICAS after {ms} ms"
            );
        }
    }
    let simulated = failover::simulated(3).unwrap();
    let measured = failover::real(&real, 3).unwrap();
    for (side, per_sentinel) in [("simulation", &simulated), ("redis-sentinel", &measured)] {
        assert_eq!(per_sentinel.len(), 3, "{side}: {per_sentinel:?}");
        for (sentinel, samples) in per_sentinel {
            assert_eq!(samples.len(), 3, "{side} {sentinel}: {samples:?}");
            for ms in samples {
                assert!(
                    (1000.0..6000.0).contains(ms),
                    "{side}: {sentinel} answered the new master {ms} ms after the kill"
                );
            }
        }
    }
    let simulated = promotion::simulated(2).unwrap();
    let measured = promotion::real(&real, env!("CARGO_BIN_EXE_locksim").as_ref(), 2).unwrap();
    for (side, series) in [("simulation", &simulated), ("redis-sentinel", &measured)] {
        assert_eq!(series[promotion::NONE], [0.0, 0.0], "{side}: {series:?}");
        for held in ["redis-1-replica-1", "redis-1-replica-2"] {
            assert_eq!(
                series.get(&format!("{held} held, the other promoted")),
                Some(&vec![1.0]),
                "{side}: {series:?}"
            );
        }
    }
    assert_eq!(none_left(&dir), Vec::<i32>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The clock, WAIT and rejoin probes (2 repeats, the rejoin 1), simulated and on real processes
/// with the clock shim: each side's majority verdict is Redis's own. A forward jump of the master
/// expires the key on it and (by its DEL) on the replica; a jumped replica answers nil but the
/// master keeps the key (`src/db.c` 1698-1701). A jumped Sentinel enters TILT and does not fail
/// over a master killed during it. With one of two replicas stopped, `WAIT 1` and `WAIT 2` both
/// answer 1, `WAIT 2` only once its timeout passed. A resumed old master is demoted and the
/// release it acknowledged meanwhile is undone.
#[test]
fn the_clock_wait_and_rejoin_probes_agree_with_redis() {
    use locksim::fidelity::probes::{Real, clock_expiry, rejoin, tilt, wait};
    let dir = common::temp_dir("redis-processes-clock-probes");
    let supervisor = Supervisor::new().unwrap();
    let real = Real {
        supervisor: &supervisor,
        binaries: Binaries::default(),
        dir: &dir,
    };
    let majority = |samples: &[f64]| samples.iter().sum::<f64>() * 2.0 >= samples.len() as f64;
    let expected = [
        ("master jumped, read on the master", true),
        ("master jumped, read on the replica", true),
        ("replica jumped, read on the master", false),
        ("replica jumped, read on the replica", true),
    ];
    let simulated = clock_expiry::simulated(2).unwrap();
    let measured = clock_expiry::real(&real, 2).unwrap();
    for (side, series) in [("simulation", &simulated), ("redis-server", &measured)] {
        for (name, nil) in expected {
            let samples = &series[name];
            assert_eq!(samples.len(), 2, "{side} {name}: {samples:?}");
            assert_eq!(majority(samples), nil, "{side} {name}: {samples:?}");
        }
    }
    let simulated = tilt::simulated(2).unwrap();
    let measured = tilt::real(&real, 2).unwrap();
    for (side, series) in [("simulation", &simulated), ("redis-sentinel", &measured)] {
        assert_eq!(
            series["tilt"].len(),
            2,
            "{side}: TILT in every run: {series:?}"
        );
        assert_eq!(series["failover"], [0.0, 0.0], "{side}: {series:?}");
    }
    let simulated = wait::simulated(2).unwrap();
    let measured = wait::real(&real, 2).unwrap();
    for (side, series) in [("simulation", &simulated), ("redis-server", &measured)] {
        assert_eq!(
            series["WAIT 1 1000: replicas"],
            [1.0, 1.0],
            "{side}: {series:?}"
        );
        assert_eq!(
            series["WAIT 2 1000: replicas"],
            [1.0, 1.0],
            "{side}: {series:?}"
        );
        for ms in &series["WAIT 2 1000: ms"] {
            assert!(
                *ms >= 1000.0,
                "{side}: WAIT 2 1000 answered before its timeout: {ms} ms"
            );
        }
    }
    let simulated = rejoin::simulated(1).unwrap();
    let measured = rejoin::real(&real, 1).unwrap();
    for (side, series) in [("simulation", &simulated), ("redis 7.0", &measured)] {
        assert_eq!(
            series.get("demoted").map(Vec::len),
            Some(1),
            "{side}: {series:?}"
        );
        assert_eq!(
            series.get("write dropped").map(Vec::as_slice),
            Some(&[1.0][..]),
            "{side}: {series:?}"
        );
    }
    assert_eq!(none_left(&dir), Vec::<i32>::new());
    let _ = std::fs::remove_dir_all(&dir);
}
