//! The scenario JSON Schema (`docs/scenario.schema.json`): it is what `locksim schema`
//! generates from the loader's types (regenerate it with `locksim schema >
//! docs/scenario.schema.json` after changing a scenario field), every catalog file names it
//! and is valid under it, and it rejects what the loader rejects.

use std::path::PathBuf;

use locksim::cli::catalog::json_files_under;
use locksim::cli::schema::schema_text;
use locksim::scenario::Scenario;
use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(&schema_text()).unwrap();
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

#[test]
fn the_committed_schema_is_the_generated_one() {
    let committed = std::fs::read_to_string(repo().join("docs/scenario.schema.json")).unwrap();
    assert!(
        committed == schema_text(),
        "docs/scenario.schema.json is out of date: run `cargo run --release -- schema > docs/scenario.schema.json`"
    );
}

#[test]
fn every_catalog_file_names_the_schema_and_is_valid_under_it() {
    let validator = validator();
    let scenarios = repo().join("scenarios");
    let mut files = Vec::new();
    json_files_under(&scenarios, &mut files).unwrap();
    assert!(files.len() > 40, "the catalog, subfolders included");
    assert!(
        files
            .iter()
            .any(|f| f.parent() != Some(scenarios.as_path()))
    );
    for file in files {
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
        let depth = file.strip_prefix(&scenarios).unwrap().components().count();
        let expected = format!("{}docs/scenario.schema.json", "../".repeat(depth));
        assert_eq!(
            value["$schema"],
            json!(expected),
            "{}: \"$schema\" names the schema relative to the file, for editors",
            file.display()
        );
    }
}

fn rejected_by_both(validator: &jsonschema::Validator, file: &Value, what: &str) {
    assert!(!validator.is_valid(file), "the schema accepts a bad {what}");
    assert!(
        Scenario::parse(&file.to_string(), "bad.json").is_err(),
        "the loader accepts a bad {what}"
    );
}

/// What the loader rejects, the schema rejects too (so an editor flags it as it is typed).
#[test]
fn the_schema_rejects_what_the_loader_rejects() {
    let validator = validator();
    let valid = json!({
        "name": "n", "seeds": "0..4",
        "scheme": { "name": "redlock", "preset": "redsync", "ttl_ms": 1000 },
        "topology": { "masters": 3, "appendfsync": "always" },
        "clients": { "count": 2, "hold_ms": [10, 50] },
        "faults": [{ "kind": "pause", "node": "client-1", "duration_ms": 5,
                     "on": { "event": "acquired", "nth": 1 }, "after_ms": 0 }],
        "nemesis": { "clock_jump": { "every_ms": [100, 200], "delta_ms": [-50, 50] } },
        "expect": { "mutual_exclusion": "holds", "liveness": "ok" }
    });
    assert!(validator.is_valid(&valid));
    Scenario::parse(&valid.to_string(), "valid.json").unwrap();
    let broken = |path: &str, value: Value| {
        let mut file = valid.clone();
        *file.pointer_mut(path).unwrap() = value;
        file
    };
    for (what, file) in [
        ("unknown field", {
            let mut f = valid.clone();
            f["clientz"] = json!({});
            f
        }),
        ("unknown scheme", broken("/scheme", json!("nope"))),
        ("unknown preset", broken("/scheme/preset", json!("bogus"))),
        (
            "unknown scheme parameter",
            broken("/scheme/ttl_ms", json!("long")),
        ),
        (
            "appendfsync",
            broken("/topology/appendfsync", json!("sometimes")),
        ),
        ("ms range", broken("/clients/hold_ms", json!([1, 2, 3]))),
        ("fault kind", broken("/faults/0/kind", json!("paws"))),
        (
            "trigger event",
            broken("/faults/0/on/event", json!("acquird")),
        ),
        ("verdict", broken("/expect/liveness", json!("fine"))),
        ("seed range", broken("/seeds", json!("a..b"))),
        (
            "nemesis field",
            broken(
                "/nemesis/clock_jump",
                json!({ "every_ms": 5, "delta_ms": 5, "rate": 2 }),
            ),
        ),
        (
            "nemesis kind",
            broken("/nemesis", json!({ "paws": { "every_ms": 5 } })),
        ),
        (
            "nemesis required field",
            broken("/nemesis", json!({ "pause": { "every_ms": 5 } })),
        ),
    ] {
        rejected_by_both(&validator, &file, what);
    }
}

/// The fields of the matrix and the incidents: `"schemes": "all"`, `lease_ms`, the Redlock
/// topology fields, `clients.extend`, `incident`, `matrix`, `expect_by_scheme`,
/// `unasserted_by_scheme`, the newer expectations, node placeholders and the lock-key trigger
/// events — accepted by both, and their bad values rejected by both.
#[test]
fn the_schema_covers_the_matrix_and_incident_fields() {
    let validator = validator();
    let valid = json!({
        "name": "m", "seeds": "0..1", "schemes": "all", "lease_ms": 2000,
        "topology": { "replicas": 1, "sentinels": 3, "redlock_masters": 5, "replica_lag_ms": 50,
                      "ttl_propagation": "relative", "min_replicas_max_lag_ms": 1000 },
        "clients": { "count": 2 },
        "faults": [
            { "kind": "pause", "node": "{holder}", "duration_ms": 5,
              "on": { "event": "lock_granted" } },
            { "kind": "partition", "duration_ms": 5, "on": { "event": "acquired" },
              "groups": [["{holder}", "{holder_masters}"], ["{rest}"]] },
            { "kind": "crash", "node": "{holder_master}", "restart_after_ms": 0,
              "on": { "event": "lock_written", "node": "redis-1" } }
        ],
        "nemesis": { "pause": { "every_ms": [100, 200], "duration_ms": 50, "nodes": ["{clients}"] } },
        "matrix": { "column": "pause", "family": "pauses" },
        "incident": { "case": "c", "library": "l", "version": "1", "role": "failing",
                      "link": "https://example.org", "mechanism": "m" },
        "expect": { "starved_over_ms": 100, "max_wait_ms": 5000, "extension_safety": "holds" },
        "expect_by_scheme": { "set": { "liveness": "ok" } },
        "expect_some_by_scheme": { "set": { "mutual_exclusion": "violated" } },
        "unasserted_by_scheme": { "setex": { "resource_safety": "rare: seed 123 only" } }
    });
    let extending = json!({
        "name": "e", "scheme": { "name": "redlock", "preset": "redsync" },
        "clients": { "extend": { "every_ms": 500 } }
    });
    for file in [&valid, &extending] {
        let errors: Vec<String> = validator.iter_errors(file).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:#?}");
        Scenario::parse(&file.to_string(), "valid.json").unwrap();
    }
    let mut bad_extend = extending.clone();
    bad_extend["clients"]["extend"] = json!({ "every_sec": 1 });
    rejected_by_both(&validator, &bad_extend, "extend");
    for (what, path, value) in [
        (
            "schemes other than a list or all",
            "/schemes",
            json!("most"),
        ),
        (
            "ttl_propagation",
            "/topology/ttl_propagation",
            json!("sideways"),
        ),
        ("placeholder", "/faults/0/node", json!("{holdr}")),
        (
            "group placeholder",
            "/faults/1/groups/1/0",
            json!("{everyone}"),
        ),
        (
            "nemesis node group",
            "/nemesis/pause/nodes/0",
            json!("{servers}"),
        ),
        ("incident role", "/incident/role", json!("broken")),
        (
            "matrix field",
            "/matrix",
            json!({ "column": "c", "family": "f", "row": 1 }),
        ),
        (
            "per-scheme verdict",
            "/expect_by_scheme/set/liveness",
            json!("fine"),
        ),
        (
            "unasserted property's reason",
            "/unasserted_by_scheme/setex/resource_safety",
            json!(false),
        ),
        (
            "unasserted property",
            "/unasserted_by_scheme/setex",
            json!({ "fairness": "why" }),
        ),
        (
            "extension verdict",
            "/expect/extension_safety",
            json!("sometimes"),
        ),
    ] {
        let mut file = valid.clone();
        *file.pointer_mut(path).unwrap() = value;
        rejected_by_both(&validator, &file, what);
    }
}
