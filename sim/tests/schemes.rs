//! `locksim schemes`: every scheme of DESIGN.md's table (but the Redlocks, built elsewhere) is
//! listed, with a summary, a source and its default lease.

#[test]
fn the_listing_names_every_scheme() {
    let json: serde_json::Value =
        serde_json::from_str(&locksim::cli::schemes::listing(true)).expect("valid JSON");
    let ids: Vec<&str> = json
        .as_array()
        .expect("an array")
        .iter()
        .map(|s| s["id"].as_str().expect("an id"))
        .collect();
    for id in [
        "set",
        "setex",
        "incr-semaphore",
        "setnx-del",
        "setnx-expire",
        "setnx-getset",
        "lua-setnx-expire",
        "set-nx-px-del",
        "set-nx-px-get-del",
        "set-nx-px-lua",
        "watchdog",
        "reentrant",
        "redisson",
        "fair",
        "fencing",
        "script",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    for scheme in json.as_array().unwrap() {
        assert!(!scheme["summary"].as_str().unwrap().is_empty());
        assert!(!scheme["source"].as_str().unwrap().is_empty());
        assert!(scheme["default_ttl_ms"].is_u64());
    }
    let text = locksim::cli::schemes::listing(false);
    assert!(text.lines().any(|l| l.starts_with("redisson ")), "{text}");
}

/// `"schemes": "all"` runs every row of the listing: each scheme but `script`, and each named
/// preset except the ones that stand for another row.
#[test]
fn the_listing_shows_every_row_of_all() {
    let text = locksim::cli::schemes::listing(false);
    let labels: Vec<String> = model::locks::matrix_rows()
        .iter()
        .map(|r| r.label())
        .collect();
    assert_eq!(
        labels,
        [
            "set",
            "setex",
            "incr-semaphore",
            "setnx-del",
            "setnx-expire",
            "setnx-getset",
            "lua-setnx-expire",
            "set-nx-px-del",
            "set-nx-px-get-del",
            "set-nx-px-lua",
            "set-nx-px-lua:redis-py",
            "watchdog",
            "reentrant",
            "redisson",
            "redisson:redisson-3.12",
            "fair",
            "fair:redisson-3.12",
            "redlock",
            "redlock:antirez/redlock-rb",
            "redlock:redsync",
            "redlock:leandromoreira/redlock-rb@2.0.1",
            "redlock:node-redlock@4.2.0",
            "redlock-no-validity",
            "fencing",
        ]
    );
    for label in &labels {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{label} "))),
            "{label} missing from the listing:\n{text}"
        );
    }
    assert!(text.contains("redlock:node-redlock"), "{text}");
    assert!(text.contains("same as redlock-no-validity"), "{text}");
    assert!(
        text.contains("not in \"all\""),
        "script is listed, not run by all"
    );
}
