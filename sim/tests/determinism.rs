//! Determinism is the product: the same scenario and seed give the same trace, byte for byte,
//! on every run, on any thread.

use std::path::PathBuf;
use std::sync::Arc;

use locksim::runner::run;
use locksim::scenario::Scenario;
use model::history::trace_jsonl;

fn load(name: &str) -> Arc<Scenario> {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios")).join(name);
    Arc::new(Scenario::load(&path).unwrap())
}

#[test]
fn same_seed_same_trace_across_runs_and_threads() {
    let scenario = load("kleppmann-gc-pause.json");
    let first = run(&scenario, 0, 7).unwrap();
    let second = run(&scenario, 0, 7).unwrap();
    let s = scenario.clone();
    let from_another_thread = std::thread::spawn(move || run(&s, 0, 7).unwrap())
        .join()
        .unwrap();
    assert_eq!(first.result.trace_hash, second.result.trace_hash);
    assert_eq!(
        first.result.trace_hash,
        from_another_thread.result.trace_hash
    );
    assert_eq!(
        trace_jsonl(&first.events),
        trace_jsonl(&from_another_thread.events)
    );
    let mut a = first.result.clone();
    let mut b = second.result.clone();
    a.wall_ms = 0;
    b.wall_ms = 0;
    assert_eq!(a, b, "every field but wall time is reproducible");
}

#[test]
fn different_seeds_explore_different_schedules() {
    let scenario = load("baseline-set-nx-px-lua.json");
    let a = run(&scenario, 0, 1).unwrap();
    let b = run(&scenario, 0, 2).unwrap();
    assert_ne!(a.result.trace_hash, b.result.trace_hash);
}

/// Every fault at once — replication, Sentinel failovers, a scripted crash with an AOF, the
/// random nemesis (pauses, partitions, clock jumps, crashes, delays, dropped connections,
/// forced failovers) — still replays byte for byte.
#[test]
fn replication_sentinel_crash_and_nemesis_replay_exactly() {
    let scenario = load("nemesis-sentinel-swarm.json");
    for seed in [3, 16] {
        let first = run(&scenario, 0, seed).unwrap();
        let s = scenario.clone();
        let again = std::thread::spawn(move || run(&s, 0, seed).unwrap())
            .join()
            .unwrap();
        assert_eq!(
            first.result.trace_hash, again.result.trace_hash,
            "seed {seed}"
        );
        assert_eq!(trace_jsonl(&first.events), trace_jsonl(&again.events));
        let names: std::collections::BTreeSet<&str> =
            first.events.iter().map(|e| e.name()).collect();
        for expected in ["replicated", "replication", "sentinel", "fault"] {
            assert!(names.contains(expected), "seed {seed}: no {expected} event");
        }
    }
}

/// A caller's runs share one simulation thread (its heap kept from seed to seed): every seed
/// gives the trace it gives as the first run of a fresh thread, whatever ran before it there.
#[test]
fn a_reused_thread_runs_every_seed_as_a_fresh_one() {
    let rows = [
        ("baseline-set-nx-px-lua.json", 0),
        ("nemesis-sentinel-swarm.json", 0),
        ("redlock-clock-jump.json", 0),
        ("kleppmann-gc-pause.json", 0),
    ];
    let scenarios: Vec<(Arc<Scenario>, usize)> = rows
        .iter()
        .map(|&(name, scheme)| (load(name), scheme))
        .collect();
    let seeds = [0u64, 5, 11];
    let jobs: Vec<(usize, u64)> = (0..scenarios.len())
        .flat_map(|row| seeds.iter().map(move |&seed| (row, seed)))
        .collect();
    let fresh: Vec<String> = jobs
        .iter()
        .map(|&(row, seed)| {
            let (scenario, scheme) = scenarios[row].clone();
            std::thread::spawn(move || run(&scenario, scheme, seed).unwrap().result.trace_hash)
                .join()
                .unwrap()
        })
        .collect();
    for reversed in [false, true] {
        let (scenarios, jobs) = (scenarios.clone(), jobs.clone());
        let reused: Vec<String> = std::thread::spawn(move || {
            let mut hashes = vec![String::new(); jobs.len()];
            let mut indices: Vec<usize> = (0..jobs.len()).collect();
            if reversed {
                indices.reverse();
            }
            for i in indices {
                let (row, seed) = jobs[i];
                let (scenario, scheme) = &scenarios[row];
                hashes[i] = run(scenario, *scheme, seed).unwrap().result.trace_hash;
            }
            hashes
        })
        .join()
        .unwrap();
        assert_eq!(fresh, reused, "reversed: {reversed}");
    }
}
