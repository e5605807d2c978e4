//! Scripts that run away (issue 17): the deterministic budget stops endless loops, also loops on
//! C functions that run few instructions, and `pcall` cannot catch the stop for long; the heap
//! limit turns huge allocations into Lua's "not enough memory" error. Nothing hangs, aborts or
//! panics, the outcome is the same every time, and the server keeps serving.

use model::redis::script_limits::is_runaway_script_error;
use model::redis::{
    Outcome, RedisServer, Reply, ScriptMonitor, ScriptProgress, ScriptVerdict, ServerConfig,
};

const NOW: i64 = 1_700_000_000_000;

fn command(server: &mut RedisServer, argv: &[&str]) -> Reply {
    let client = server.connect();
    let argv: Vec<Vec<u8>> = argv.iter().map(|a| a.as_bytes().to_vec()).collect();
    match server.execute(client, NOW, &argv) {
        Outcome::Reply(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

fn eval(server: &mut RedisServer, script: &str) -> String {
    let reply = command(server, &["EVAL", script, "0"]);
    reply.error_text().unwrap_or_else(|| format!("{reply:?}"))
}

fn killed(text: &str) -> bool {
    text.starts_with("ERR Script killed by user with SCRIPT KILL... script: ")
        && text.ends_with(", on @user_script:1.")
}

fn out_of_memory(text: &str) -> bool {
    text.starts_with("ERR Error running script ") && text.ends_with(", not enough memory")
}

/// The limits scaled down (the same code paths as the defaults, 200 million work units and
/// 1 GiB, which `scripts/serve-runaway-scripts.sh` exercises at full size): the budget is
/// large next to the heap, so a script that only allocates meets the heap limit first.
fn small_limits() -> RedisServer {
    RedisServer::new(ServerConfig {
        script_work_limit: 16_000_000,
        lua_memory_limit_bytes: 16 << 20,
        ..ServerConfig::default()
    })
}

#[test]
fn endless_loops_are_stopped_by_the_budget_the_same_way_every_time() {
    let mut server = small_limits();
    for script in [
        "while true do end",
        // C work, few instructions: 100 kB per iteration (issue 17: 50 s at 100 % CPU).
        "while true do local s = string.rep('x', 100000) end",
        "while true do local s = table.concat({'a', 'b', 'c'}) .. string.format('%s', 'x') end",
        // pcall catches the stop once; the next instruction of the script raises it again.
        "while true do pcall(function() while true do end end) end",
        "while true do local ok = pcall(string.rep, 'x', 1e6) end",
        // Inside a coroutine.
        "local co = coroutine.wrap(function() while true do end end) co()",
    ] {
        let first = eval(&mut server, script);
        assert!(killed(&first), "{script}: {first}");
        assert_eq!(eval(&mut server, script), first, "{script}: deterministic");
    }
    assert_eq!(
        command(&mut server, &["PING"]),
        Reply::Status("PONG".into())
    );
}

#[test]
fn the_budget_is_the_configured_one() {
    let mut server = small_limits();
    let within = "local n = 0 for i = 1, 4e6 do n = n + 1 end return n";
    assert_eq!(eval(&mut server, within), "Integer(4000000)");
    let past = "local n = 0 for i = 1, 8e6 do n = n + 1 end return n";
    assert!(killed(&eval(&mut server, past)));
}

#[test]
fn a_single_huge_request_is_stopped_before_it_runs() {
    let mut server = small_limits();
    let text = eval(&mut server, "return #string.rep('x', 1e12)");
    assert!(killed(&text), "{text}");
}

#[test]
fn a_script_that_wrote_is_stopped_with_its_own_error_and_keeps_its_writes() {
    let mut server = small_limits();
    let text = eval(&mut server, "redis.call('set', 'k', 'v') while true do end");
    assert!(
        text.starts_with("ERR Script exceeded the simulated lua-time-limit after it wrote")
            && text.ends_with(", on @user_script:1."),
        "{text}"
    );
    assert!(is_runaway_script_error(text.as_bytes()));
    assert_eq!(command(&mut server, &["GET", "k"]), Reply::bulk("v"));
}

#[test]
fn allocations_past_the_heap_limit_fail_with_luas_not_enough_memory() {
    let mut server = small_limits();
    for script in [
        "local s = 'x' for i = 1, 40 do s = s .. s end return #s",
        "local t = {} for i = 1, 1e8 do t[i] = i end return #t",
    ] {
        let text = eval(&mut server, script);
        assert!(out_of_memory(&text), "{script}: {text}");
        assert!(is_runaway_script_error(text.as_bytes()), "{text}");
    }
    // The garbage is collected: the next script has its whole allowance.
    assert_eq!(
        eval(&mut server, "local s = string.rep('x', 2000000) return #s"),
        "Integer(2000000)"
    );
    // A big reply still works: it is built outside Lua's heap.
    let reply = command(
        &mut server,
        &[
            "EVAL",
            "local t = {} for i = 1, 3e5 do t[i] = i end return t",
            "0",
        ],
    );
    assert!(matches!(reply, Reply::Array(ref items) if items.len() == 300_000));
}

/// A host's monitor: kills at the first checkpoint, as `SCRIPT KILL` after `lua-time-limit`.
struct KillAtOnce;

impl ScriptMonitor for KillAtOnce {
    fn check(&mut self, _progress: &ScriptProgress) -> ScriptVerdict {
        ScriptVerdict::Kill
    }
}

#[test]
fn the_hosts_monitor_decides() {
    let mut server = RedisServer::new(ServerConfig::default());
    server.set_script_monitor(Box::new(KillAtOnce));
    let text = eval(&mut server, "local n = 0 while true do n = n + 1 end");
    assert!(killed(&text), "{text}");
    assert_eq!(eval(&mut server, "return 1"), "Integer(1)");
}

/// The heap follows the same course in every Lua state, wherever its objects are: tables keyed
/// by tables are laid out by address, and Lua 5.1's incremental collector, which stops a step
/// after a fixed amount of work, got further or less far through them, so the heap in use, what
/// a script allocated (a freed string is allocated again) and which limit a runaway script met
/// first changed from one process to the next. The servers here live side by side, at different
/// addresses; with the collector's default steps their courses differ.
#[test]
fn the_heap_follows_the_same_course_at_any_address() {
    let script = "local keyed, seen = {}, {} \
        for i = 1, 2000 do \
          local key = {} \
          for j = 1, i % 13 do key[j] = j end \
          keyed[key] = i \
          local garbage = string.rep('g', i % 97) .. i \
          seen[#seen + 1] = collectgarbage('count') \
        end \
        return table.concat(seen, ',')";
    let mut servers: Vec<RedisServer> = Vec::new();
    let mut courses = Vec::new();
    for _ in 0..8 {
        let mut server = RedisServer::new(ServerConfig::default());
        courses.push(eval(&mut server, script));
        servers.push(server);
    }
    assert!(courses[0].starts_with("Bulk("), "{}", courses[0]);
    assert!(courses.iter().all(|c| *c == courses[0]));
}

/// `redis.call` builds the reply in Lua's heap: a reply past the heap limit is the script's
/// error (raised where the call is), `pcall` catches it as a string, and the server goes on.
#[test]
fn a_reply_too_big_for_the_heap_ends_the_script_with_a_memory_error() {
    let mut server = small_limits();
    let big = "x".repeat(20 << 20);
    command(&mut server, &["SET", "big", &big]);
    let text = eval(&mut server, "return redis.call('GET', 'big')");
    assert!(
        text.starts_with("ERR memory error: not enough memory script: ")
            && text.ends_with(", on @user_script:1."),
        "{text}"
    );
    assert_eq!(
        eval(&mut server, "return redis.pcall('GET', 'big')"),
        "ERR memory error: not enough memory"
    );
    let caught = command(
        &mut server,
        &[
            "EVAL",
            "local ok, e = pcall(redis.call, 'GET', 'big') return {tostring(ok), e}",
            "0",
        ],
    );
    assert_eq!(
        caught,
        Reply::Array(vec![
            Reply::Bulk(b"false".to_vec()),
            Reply::Bulk(b"memory error: not enough memory".to_vec())
        ])
    );
    assert_eq!(
        eval(&mut server, "return redis.call('STRLEN', 'big')"),
        "Integer(20971520)"
    );
}
