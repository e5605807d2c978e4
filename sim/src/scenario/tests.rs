use super::*;
use faults::FaultKind;

const MINIMAL: &str = r#"{ "name": "m", "scheme": "set-nx-px-lua" }"#;

#[test]
fn omitted_fields_take_their_defaults() {
    let s = Scenario::parse(MINIMAL, "m.json").unwrap();
    assert_eq!(s.topology.masters, 1);
    assert_eq!(s.clients.count, 2);
    assert_eq!(s.network.latency_ms, MsRange { min: 1, max: 5 });
    assert_eq!(s.seeds, DEFAULT_SEEDS);
    assert_eq!(
        s.node_names(),
        vec!["redis-1", "client-1", "client-2", "resource"]
    );
    assert_eq!(s.liveness_window_ms(&s.schemes[0]), 61_000);
    let leaseless = Scenario::parse(r#"{ "name": "m", "scheme": "setnx-del" }"#, "m.json").unwrap();
    assert_eq!(
        leaseless.liveness_window_ms(&leaseless.schemes[0]),
        21_000,
        "a lease-less scheme is judged as with a 10 s lease, not on 1 s"
    );
    let long_hold = Scenario::parse(
        r#"{ "name": "m", "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
             "clients": { "hold_ms": [100, 5000] } }"#,
        "m.json",
    )
    .unwrap();
    assert_eq!(long_hold.liveness_window_ms(&long_hold.schemes[0]), 11_000);
}

#[test]
fn errors_name_the_file_and_the_field() {
    let err = Scenario::parse(
        r#"{ "name": "m", "scheme": "set-nx-px-lua", "clientz": {} }"#,
        "f.json",
    )
    .unwrap_err();
    assert!(err.starts_with("f.json: "), "{err}");
    assert!(err.contains("unknown field `clientz`"), "{err}");
    let err = Scenario::parse(
        r#"{ "name": "m", "scheme": "set-nx-px-lua", "clients": { "count": "two" } }"#,
        "f.json",
    )
    .unwrap_err();
    assert!(err.starts_with("f.json: clients.count: "), "{err}");
    let err = Scenario::parse(
        r#"{ "name": "m", "scheme": "set-nx-px-lua", "network": { "latency_ms": [5, 1] } }"#,
        "f.json",
    )
    .unwrap_err();
    assert!(
        err.contains("network.latency_ms") && err.contains("min is greater than max"),
        "{err}"
    );
    let err = Scenario::parse(r#"{ "name": "m", "scheme": "nope" }"#, "f.json").unwrap_err();
    assert!(
        err.starts_with("f.json: scheme.name: unknown scheme"),
        "{err}"
    );
    let err = Scenario::parse(
        r#"{ "name": "m", "scheme": "fencing", "seeds": "9..2" }"#,
        "f.json",
    )
    .unwrap_err();
    assert!(err.starts_with("f.json: seeds: "), "{err}");
    let err = Scenario::parse("{ not json", "f.json").unwrap_err();
    assert!(err.starts_with("f.json: "), "{err}");
}

/// Unbounded work is refused with the field and the limit (issue 17).
#[test]
fn work_beyond_the_limits_is_an_error_naming_the_field() {
    let err = |fields: &str| {
        Scenario::parse(
            &format!(r#"{{ "name": "m", "scheme": "set-nx-px-lua", {fields} }}"#),
            "f.json",
        )
        .unwrap_err()
    };
    assert_eq!(
        err(r#""duration_ms": 1000000000000000, "clients": { "acquisitions": 4294967295 }"#),
        "f.json: duration_ms: 1000000000000000 ms is longer than a run may be (limit 3600000 ms, one simulated hour)"
    );
    assert_eq!(
        err(r#""clients": { "acquisitions": 4294967295 }"#),
        "f.json: clients.acquisitions: 4294967295 per worker (limit 1000000; the run also ends at duration_ms)"
    );
    assert_eq!(
        err(r#""clients": { "count": 100, "threads": 64 }"#),
        "f.json: clients.threads: 100 clients × 64 threads is 6400 lock owners (limit 1000)"
    );
    assert!(
        err(r#""clients": { "hold_ms": [10, 1e300] }"#).starts_with("f.json: clients.hold_ms[1]: ")
    );
    let faults = vec![r#"{ "kind": "pause", "node": "client-1", "at_ms": 1 }"#; 1001];
    assert_eq!(
        err(&format!(r#""faults": [{}]"#, faults.join(","))),
        "f.json: faults: 1001 scripted faults (limit 1000; a random nemesis draws many more)"
    );
    let clients: Vec<String> = (1..=1000).map(|i| format!("\"client-{i}\"")).collect();
    let split = format!(
        r#"{{ "kind": "partition", "groups": [[{}], [{}]], "at_ms": 1 }}"#,
        clients[..500].join(","),
        clients[500..].join(",")
    );
    assert_eq!(
        err(&format!(
            r#""clients": {{ "count": 1000 }}, "faults": [{split}, {split}, {split}]"#
        )),
        "f.json: faults[2]: the partitions and isolations up to this one cut and heal more than 2000000 links (limit 2000000 link changes)"
    );
    assert!(
        err(r#""clients": { "count": 1000 }, "duration_ms": 30000,
               "nemesis": { "partition": { "every_ms": [1000, 2000], "duration_ms": 100 } }"#)
            .starts_with("f.json: nemesis.partition: up to 31 faults, each cutting and healing up to 1002001 links of its 1001 nodes")
    );
    let value = "x".repeat(50 << 20);
    let err = Scenario::parse(
        &format!(r#"{{ "name": "m", "scheme": {{ "name": "set", "value": "{value}" }} }}"#),
        "f.json",
    )
    .unwrap_err();
    assert_eq!(
        err,
        "f.json: scheme.value: a string of 52428800 bytes (limit 65536 bytes)"
    );
    let err = Scenario::parse(
        r#"{ "name": "m", "scheme": "fencing", "seeds": "0..18446744073709551615" }"#,
        "f.json",
    )
    .unwrap_err();
    assert!(err.starts_with("f.json: seeds: ") && err.ends_with("(limit 1000000 in one range)"));
    assert!(
        Scenario::parse(
            r#"{ "name": "m", "scheme": "set-nx-px-lua", "duration_ms": 3600000,
                 "clients": { "count": 1000, "acquisitions": 1000000 } }"#,
            "f.json"
        )
        .is_ok()
    );
}

#[test]
fn replicas_and_sentinels_are_nodes() {
    let s = Scenario::parse(
        r#"{ "name": "m", "scheme": "fencing", "topology": { "replicas": 1, "sentinels": 3 } }"#,
        "f.json",
    )
    .unwrap();
    assert_eq!(
        s.node_names(),
        vec![
            "redis-1",
            "redis-1-replica-1",
            "sentinel-1",
            "sentinel-2",
            "sentinel-3",
            "client-1",
            "client-2",
            "resource"
        ]
    );
    let err = Scenario::parse(
        r#"{ "name": "m", "scheme": "fencing", "topology": { "min_replicas_to_write": 1 } }"#,
        "f.json",
    )
    .unwrap_err();
    assert!(err.contains("topology.min_replicas_to_write"), "{err}");
}

#[test]
fn threads_name_one_owner_each() {
    let s = Scenario::parse(
        r#"{ "name": "m", "scheme": "reentrant", "clients": { "count": 2, "threads": 2 } }"#,
        "f.json",
    )
    .unwrap();
    assert_eq!(
        s.owner_names(),
        vec!["client-1/t1", "client-1/t2", "client-2/t1", "client-2/t2"]
    );
    assert_eq!(
        Scenario::parse(MINIMAL, "m.json").unwrap().owner_names(),
        vec!["client-1", "client-2"]
    );
    let err = Scenario::parse(
        r#"{ "name": "m", "scheme": "reentrant", "clients": { "threads": 0 } }"#,
        "f.json",
    )
    .unwrap_err();
    assert_eq!(err, "f.json: clients.threads: must be from 1 to 64, got 0");
}

/// `"schemes": "all"` runs every row of `locksim schemes` but `script`; `lease_ms` becomes
/// the `ttl_ms` of every scheme with a lease, and the window of those without one; Redlock
/// rows get their own masters, and the faults are validated for each node set.
#[test]
fn all_schemes_with_one_lease_and_redlock_masters() {
    let s = Scenario::parse(
        r#"{ "name": "a", "schemes": "all", "lease_ms": 2000,
             "faults": [ { "kind": "partition", "at_ms": 0,
                           "groups": [["client-1", "{first_majority}"], ["client-2", "{last_majority}"]] },
                         { "kind": "crash", "node": "{holder_master}", "restart_after_ms": 1,
                           "on": { "event": "acquired" } } ],
             "expect_by_scheme": { "redlock": { "mutual_exclusion": "violated" } } }"#,
        "a.json",
    )
    .unwrap();
    let labels: Vec<String> = s.schemes.iter().map(SchemeSpec::label).collect();
    assert_eq!(labels.len(), model::locks::matrix_rows().len());
    assert!(!labels.contains(&"script".to_string()));
    let row = |label: &str| labels.iter().position(|l| l == label).unwrap();
    assert_eq!(s.schemes[row("fencing")].ttl_ms(), 2000);
    assert_eq!(s.schemes[row("setex")].ttl_ms(), 2000);
    assert!(!s.schemes[row("setnx-del")].params.contains_key("ttl_ms"));
    assert_eq!(
        s.liveness_window_ms(&s.schemes[row("setnx-del")]),
        5000,
        "a lease-less row is judged on lease_ms"
    );
    let redlock = s.for_scheme(row("redlock:redsync"));
    assert_eq!(redlock.master_names().len(), 5);
    assert_eq!(
        s.for_scheme(row("set-nx-px-lua")).master_names(),
        ["redis-1"]
    );
    let FaultKind::Partition { groups, .. } = &redlock.faults[0].kind else {
        panic!("a partition");
    };
    assert_eq!(groups[1], ["client-2", "redis-3", "redis-4", "redis-5"]);
    let (expect, _) = s.expectations(row("redlock"));
    assert_eq!(
        expect.mutual_exclusion,
        Some(expect::SafetyExpect::Violated)
    );
    assert_eq!(s.expectations(row("fencing")).0, Expect::default());
}

/// `unasserted_by_scheme` takes a row's property out of `expect` and `expect_some`, and its bad
/// values are errors naming the file and the field.
#[test]
fn unasserted_properties_are_not_judged_and_bad_ones_are_named() {
    let s = Scenario::parse(
        r#"{ "name": "u", "schemes": ["set", "setex"],
             "expect": { "mutual_exclusion": "holds", "liveness": "ok" },
             "expect_some": { "resource_safety": "violated" },
             "unasserted_by_scheme": { "set": { "mutual_exclusion": "rare", "resource_safety": "rare" } } }"#,
        "u.json",
    )
    .unwrap();
    let (expect, expect_some) = s.expectations(0);
    assert_eq!(expect.mutual_exclusion, None);
    assert_eq!(expect.liveness, Some(expect::LivenessExpect::Ok));
    assert_eq!(expect_some, Expect::default());
    assert_eq!(s.for_scheme(0).expect, expect);
    let (setex, _) = s.expectations(1);
    assert_eq!(
        setex.mutual_exclusion,
        Some(expect::SafetyExpect::Holds),
        "only the row named"
    );
    let err = |by: &str| {
        Scenario::parse(
            &format!(r#"{{ "name": "u", "schemes": ["set"], {by} }}"#),
            "u.json",
        )
        .unwrap_err()
    };
    for (by, message) in [
        (
            r#""unasserted_by_scheme": { "set": { "mutual_exclusion": " " } }"#,
            "u.json: unasserted_by_scheme.set.mutual_exclusion: give the reason it is not asserted (it is empty)",
        ),
        (
            r#""unasserted_by_scheme": { "set": {} }"#,
            "u.json: unasserted_by_scheme.set: names no property",
        ),
        (
            r#""unasserted_by_scheme": { "sett": { "liveness": "why" } }"#,
            "u.json: unasserted_by_scheme.sett: no scheme row \"sett\"",
        ),
        (
            r#""unasserted_by_scheme": { "set": { "fairness": "why" } }"#,
            "u.json: unasserted_by_scheme.set.fairness: unknown field `fairness`",
        ),
        (
            r#""unasserted_by_scheme": { "set": { "liveness": 3 } }"#,
            "u.json: unasserted_by_scheme.set.liveness: invalid type",
        ),
        (
            r#""unasserted_by_scheme": { "set": { "liveness": "why" } },
               "expect_some_by_scheme": { "set": { "liveness": "stuck" } }"#,
            "u.json: unasserted_by_scheme.set.liveness: expect_some_by_scheme.set asserts liveness",
        ),
    ] {
        let got = err(by);
        assert!(got.starts_with(message), "{got}");
    }
}

#[test]
fn matrix_fields_are_checked() {
    let err = |json: &str| Scenario::parse(json, "m.json").unwrap_err();
    assert!(
        err(r#"{ "name": "m", "schemes": "al" }"#)
            .starts_with("m.json: schemes: expected a list of schemes or \"all\""),
    );
    assert!(
        err(r#"{ "name": "m", "schemes": "all", "lease_ms": 1500 }"#).starts_with(
            "m.json: lease_ms: 1500 ms is not a whole number of seconds, which setex needs"
        )
    );
    let unknown = err(
        r#"{ "name": "m", "schemes": "all", "expect_by_scheme": { "redlok": { "liveness": "ok" } } }"#,
    );
    assert!(
        unknown.starts_with("m.json: expect_by_scheme.redlok: no scheme row \"redlok\""),
        "{unknown}"
    );
    let redis_4 = err(r#"{ "name": "m", "schemes": ["set-nx-px-lua", "redlock"],
             "faults": [ { "kind": "pause", "node": "redis-4", "at_ms": 1, "duration_ms": 5 } ] }"#);
    assert!(
        redis_4.starts_with("m.json: faults[0].node: no node \"redis-4\""),
        "{redis_4}"
    );
    let masters = |json: &str| {
        let s = Scenario::parse(json, "m.json").unwrap();
        s.masters_for(&s.schemes[0])
    };
    assert_eq!(masters(r#"{ "name": "m", "scheme": "redlock" }"#), 5);
    assert_eq!(
        masters(r#"{ "name": "m", "scheme": "redlock", "topology": { "masters": 3 } }"#),
        3,
        "as before redlock_masters existed"
    );
    assert_eq!(
        masters(
            r#"{ "name": "m", "scheme": "redlock", "topology": { "masters": 3, "redlock_masters": 7 } }"#
        ),
        7
    );
}

/// The nemesis heals two liveness windows before the end by default, so that a lock-out
/// after healing can be seen; a heal time that leaves no whole window is an error.
#[test]
fn a_random_nemesis_leaves_room_to_judge_liveness() {
    let with = |extra: &str| {
        Scenario::parse(
            &format!(
                r#"{{ "name": "n", "duration_ms": 20000,
                      "scheme": {{ "name": "setnx-expire", "ttl_ms": 2000 }},
                      "nemesis": {{ "crash": {{ "every_ms": [1000, 2000], "duration_ms": [0, 500] }} {extra} }} }}"#
            ),
            "n.json",
        )
    };
    let s = with("").unwrap();
    assert_eq!(s.liveness_window_ms(&s.schemes[0]), 5000);
    assert_eq!(s.heal_at_ms(&s.schemes[0]), 10_000);
    assert!(with(r#", "heal_at_ms": 14999"#).is_ok());
    let err = with(r#", "heal_at_ms": 15000"#).unwrap_err();
    assert!(
        err.starts_with("n.json: nemesis.heal_at_ms: healing at 15000 ms leaves 5000 ms"),
        "{err}"
    );
    let short = Scenario::parse(
        r#"{ "name": "n", "duration_ms": 10000, "scheme": { "name": "setnx-expire", "ttl_ms": 2000 },
             "nemesis": { "crash": { "every_ms": [1000, 2000], "duration_ms": [0, 500] } } }"#,
        "n.json",
    )
    .unwrap_err();
    assert!(
        short.starts_with("n.json: duration_ms: 10000 ms leaves no time for random faults"),
        "{short}"
    );
}

#[test]
fn extensions_incidents_and_topology_options_are_validated() {
    let parse = |json: &str| Scenario::parse(json, "x.json");
    let err = parse(
        r#"{ "name": "m", "scheme": "set-nx-px-lua", "clients": { "extend": { "before_write": true } } }"#,
    )
    .unwrap_err();
    assert!(
        err.contains("clients.extend: scheme (set-nx-px-lua) has no extend operation"),
        "{err}"
    );
    let err = parse(
        r#"{ "name": "m", "scheme": "redlock", "clients": { "extend": { "every_ms": 100, "before_write": true } } }"#,
    )
    .unwrap_err();
    assert!(err.contains("clients.extend: give exactly one of"), "{err}");
    let ok = parse(
        r#"{ "name": "m", "schemes": ["redlock", { "name": "redlock", "preset": "redsync@4.0.3" }],
             "clients": { "extend": { "every_ms": 100 } } }"#,
    )
    .unwrap();
    assert_eq!(ok.clients.extend.and_then(|e| e.every_ms), Some(100));
    let err =
        parse(r#"{ "name": "m", "scheme": "redlock", "topology": { "ttl_propagation": "6.2" } }"#)
            .unwrap_err();
    assert!(err.contains("topology.ttl_propagation"), "{err}");
    let err = parse(
        r#"{ "name": "m", "scheme": "redlock", "topology": { "min_replicas_max_lag_ms": 1500 } }"#,
    )
    .unwrap_err();
    assert!(err.contains("topology.min_replicas_max_lag_ms"), "{err}");
    for (topology, field) in [
        (
            r#"{ "lua_time_limit_work": 0 }"#,
            "topology.lua_time_limit_work",
        ),
        (
            r#"{ "lua_memory_limit_mb": 0 }"#,
            "topology.lua_memory_limit_mb",
        ),
    ] {
        let json = format!(r#"{{ "name": "m", "scheme": "redlock", "topology": {topology} }}"#);
        let err = parse(&json).unwrap_err();
        assert!(err.contains(field), "{err}");
    }
    let err = parse(
        r#"{ "name": "m", "scheme": "redlock", "incident": { "case": "c", "library": "l",
             "version": "1", "role": "broken", "link": "https://x", "mechanism": "m" } }"#,
    )
    .unwrap_err();
    assert!(err.contains("incident.role"), "{err}");
}
