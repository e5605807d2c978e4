//! The GC-pause case is a mechanism, not a tuned seed: scenarios written to the contract with
//! other numbers (lease, pause, latency, clients, hold and think times) give the same verdicts.

use std::sync::Arc;

use locksim::runner::{default_jobs, run_parallel};
use locksim::scenario::Scenario;
use locksim::scenario::expect::mismatches;

/// A GC-pause scenario: the pause outlasts the lease by `pause_ms - ttl_ms`.
fn scenario(
    ttl_ms: u64,
    pause_ms: u64,
    latency: [u64; 2],
    clients: u32,
    fenced: bool,
) -> Arc<Scenario> {
    let (scheme, resource_safety) = if fenced {
        ("fencing", "holds")
    } else {
        ("set-nx-px-lua", "violated")
    };
    let json = format!(
        r#"{{
        "name": "gc-pause-ttl{ttl_ms}-pause{pause_ms}-c{clients}-{scheme}",
        "duration_ms": 60000,
        "network": {{ "latency_ms": [{}, {}] }},
        "scheme": {{ "name": "{scheme}", "ttl_ms": {ttl_ms} }},
        "clients": {{ "count": {clients}, "acquisitions": 12, "hold_ms": [20, 60], "think_ms": [0, 40],
                      "acquire_timeout_ms": {}, "command_timeout_ms": 300 }},
        "resource": {{ "fencing": {fenced} }},
        "faults": [ {{ "kind": "pause", "node": "client-1", "duration_ms": {pause_ms},
                       "on": {{ "event": "acquired", "node": "client-1", "nth": 2 }}, "after_ms": 15 }} ],
        "expect": {{ "mutual_exclusion": "violated", "resource_safety": "{resource_safety}", "liveness": "ok" }}
    }}"#,
        latency[0],
        latency[1],
        pause_ms * 2
    );
    Arc::new(Scenario::parse(&json, "variant.json").unwrap())
}

#[test]
fn other_numbers_give_the_same_verdicts() {
    let variants = [
        scenario(500, 1500, [1, 3], 2, false),
        scenario(3000, 4000, [2, 10], 3, false),
        scenario(800, 5000, [1, 1], 4, false),
        scenario(500, 1500, [1, 3], 2, true),
        scenario(3000, 4000, [2, 10], 3, true),
    ];
    let mut failures = Vec::new();
    for scenario in variants {
        let mut results = Vec::new();
        run_parallel(
            &scenario,
            (0..10).map(|seed| (0, seed)).collect(),
            default_jobs(),
            |r| results.push(r.unwrap().result),
        );
        failures.extend(mismatches(
            &scenario.expect,
            &scenario.expect_some,
            &results,
        ));
    }
    assert!(
        failures.is_empty(),
        "{}",
        failures
            .iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_pause_shorter_than_the_lease_is_harmless() {
    let json = r#"{ "name": "short-pause", "scheme": { "name": "set-nx-px-lua", "ttl_ms": 2000 },
        "clients": { "count": 3, "acquisitions": 10 },
        "faults": [ { "kind": "pause", "node": "client-1", "duration_ms": 500,
                      "on": { "event": "acquired", "node": "client-1" }, "after_ms": 5 } ],
        "expect": { "mutual_exclusion": "holds", "resource_safety": "holds", "liveness": "ok" } }"#;
    let scenario = Arc::new(Scenario::parse(json, "short.json").unwrap());
    let mut results = Vec::new();
    run_parallel(
        &scenario,
        (0..10).map(|seed| (0, seed)).collect(),
        default_jobs(),
        |r| results.push(r.unwrap().result),
    );
    let failures = mismatches(&scenario.expect, &scenario.expect_some, &results);
    assert!(
        failures.is_empty(),
        "{}",
        failures
            .iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
