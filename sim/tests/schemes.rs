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
