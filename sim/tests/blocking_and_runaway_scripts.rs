//! Two things a simulated Redis node must survive: a client blocked in BLPOP (served by a later
//! push, or answered when its timeout passes on the node's simulated clock), and a `script`
//! scheme whose Lua runs away (each attempt fails with the script's error; the run goes on and
//! stays deterministic).

use std::sync::Arc;
use std::time::Duration;

use locksim::nodes::REDIS_PORT;
use locksim::nodes::redis::redis_node;
use locksim::nodes::resp::RespConn;
use locksim::runner::{run, world_with_network};
use locksim::scenario::Scenario;
use locksim::world::procs::node_ip;
use model::redis::Reply;

fn argv(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

#[test]
fn blpop_waits_in_simulated_time_and_is_served_or_times_out() {
    let scenario = Arc::new(
        Scenario::parse(
            r#"{ "name": "blocking", "scheme": { "name": "set-nx-px-lua" } }"#,
            "inline.json",
        )
        .unwrap(),
    );
    let runtime = madsim::runtime::Runtime::with_seed_and_config(7, madsim::Config::default());
    let outcome = runtime.block_on(async move {
        let handle = madsim::runtime::Handle::current();
        let world = world_with_network(&handle, &scenario, 7);
        let (w, name) = (world.clone(), "redis-1".to_string());
        let redis = handle
            .create_node()
            .name("redis-1")
            .ip(node_ip("redis-1"))
            .init(move || redis_node(w.clone(), name.clone()))
            .build();
        world
            .procs
            .register("redis-1", redis.id(), node_ip("redis-1"));
        let outcome = Arc::new(std::sync::Mutex::new(None));
        let (w, slot) = (world.clone(), outcome.clone());
        let client = handle
            .create_node()
            .name("client-1")
            .ip(node_ip("client-1"))
            .init(move || {
                let (w, slot) = (w.clone(), slot.clone());
                async move {
                    madsim::time::sleep(Duration::from_millis(10)).await;
                    let mut a = RespConn::connect(&w, "client-1", "redis-1", REDIS_PORT)
                        .await
                        .unwrap();
                    let mut b = RespConn::connect(&w, "client-1", "redis-1", REDIS_PORT)
                        .await
                        .unwrap();
                    let started = madsim::time::Instant::now();
                    let timed_out = a.call(&argv(&["BLPOP", "q", "0.5"])).await.unwrap();
                    let waited = started.elapsed();
                    a.send(&argv(&["BLPOP", "q", "5"])).unwrap();
                    madsim::time::sleep(Duration::from_millis(100)).await;
                    let pushed = b.call(&argv(&["RPUSH", "q", "x", "y"])).await.unwrap();
                    let served = a.read_reply().await.unwrap();
                    let left = b.call(&argv(&["LRANGE", "q", "0", "-1"])).await.unwrap();
                    *slot.lock().unwrap() = Some((timed_out, waited, pushed, served, left));
                }
            })
            .build();
        world
            .procs
            .register("client-1", client.id(), node_ip("client-1"));
        let outcome = loop {
            madsim::time::sleep(Duration::from_millis(50)).await;
            if let Some(outcome) = outcome.lock().unwrap().take() {
                break outcome;
            }
        };
        handle.kill(client.id());
        handle.kill(redis.id());
        outcome
    });
    let (timed_out, waited, pushed, served, left) = outcome;
    assert_eq!(timed_out, Reply::Nil, "RESP2's null array reads as nil");
    assert!(waited >= Duration::from_millis(500), "{waited:?}");
    assert!(waited < Duration::from_millis(700), "{waited:?}");
    assert_eq!(pushed, Reply::Integer(2));
    assert_eq!(
        served,
        Reply::Array(vec![Reply::bulk("q"), Reply::bulk("x")])
    );
    assert_eq!(left, Reply::Array(vec![Reply::bulk("y")]));
}

/// A `script` scheme whose acquire script loops on C work (issue 17: 50 s at 100 % CPU per
/// attempt, retried for ever).
fn runaway_scenario(script: &str) -> Arc<Scenario> {
    let json = serde_json::json!({
        "name": "runaway-script",
        "duration_ms": 20000,
        "scheme": {
            "name": "script",
            "acquire": { "script": script, "success": { "status": "OK" } },
            "release": { "script": "return redis.call('del', KEYS[1])", "args": [],
                         "success": { "at_least": 0 } }
        },
        "clients": { "count": 2, "acquisitions": 2 },
        // The limits scaled down from the defaults (200 million units, 1 GiB): the same code.
        "topology": { "lua_time_limit_work": 4000000, "lua_memory_limit_mb": 16 }
    });
    Arc::new(Scenario::parse(&json.to_string(), "inline.json").unwrap())
}

#[test]
fn a_runaway_script_fails_each_attempt_and_the_run_goes_on() {
    for script in [
        "while true do local s = string.rep('x', 100000) end",
        "local s = 'x' for i = 1, 40 do s = s .. s end return s",
    ] {
        let scenario = runaway_scenario(script);
        let first = run(&scenario, 0, 1).unwrap();
        assert_eq!(first.result.counts.acquisitions, 0, "{script}");
        assert_eq!(first.result.counts.acquire_failures, 4, "{script}");
        let again = run(&scenario, 0, 1).unwrap();
        assert_eq!(first.result.trace_hash, again.result.trace_hash, "{script}");
    }
}
