//! Unit tests of the server through its public API, replies checked as RESP bytes.

use super::*;

const T0: i64 = 1_700_000_000_000;

fn argv(line: &str) -> Vec<Vec<u8>> {
    resp::split_args(line.as_bytes()).expect("balanced quotes")
}

fn exec(server: &mut RedisServer, client: ClientId, now: i64, line: &str) -> Reply {
    match server.execute(client, now, &argv(line)) {
        Outcome::Reply(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

fn wire(server: &mut RedisServer, client: ClientId, now: i64, line: &str) -> String {
    String::from_utf8(exec(server, client, now, line).encode()).unwrap()
}

fn new_server() -> (RedisServer, ClientId) {
    let mut s = RedisServer::new(ServerConfig::default());
    let c = s.connect();
    (s, c)
}

fn props(server: &mut RedisServer) -> Vec<String> {
    server
        .take_propagated()
        .iter()
        .map(|a| {
            a.iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn set_get_and_options() {
    let (mut s, c) = new_server();
    assert_eq!(wire(&mut s, c, T0, "SET k v"), "+OK\r\n");
    assert_eq!(wire(&mut s, c, T0, "get k"), "$1\r\nv\r\n");
    assert_eq!(wire(&mut s, c, T0, "SET k w NX"), "$-1\r\n");
    assert_eq!(wire(&mut s, c, T0, "SET k w XX GET"), "$1\r\nv\r\n");
    assert_eq!(wire(&mut s, c, T0, "SET n v XX"), "$-1\r\n");
    assert_eq!(
        wire(&mut s, c, T0, "SET k v NX XX"),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, "SET k v EX 0"),
        "-ERR invalid expire time in 'set' command\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, "SET k v PX abc"),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, "SET k v KEEPTTL EX 1"),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, "get"),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, "foo a b"),
        "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n"
    );
}

#[test]
fn expiry_is_absolute_and_lazy() {
    let (mut s, c) = new_server();
    wire(&mut s, c, T0, "SET k v PX 100");
    assert_eq!(wire(&mut s, c, T0 + 40, "PTTL k"), ":60\r\n");
    assert_eq!(
        wire(&mut s, c, T0 + 100, "GET k"),
        "$1\r\nv\r\n",
        "expired iff now > when"
    );
    assert_eq!(wire(&mut s, c, T0 + 101, "GET k"), "$-1\r\n");
    assert_eq!(wire(&mut s, c, T0 + 101, "PTTL k"), ":-2\r\n");
    assert_eq!(
        props(&mut s),
        vec![format!("SET k v PXAT {}", T0 + 100), "DEL k".to_string()]
    );
    wire(&mut s, c, T0, "SET k v EX 10");
    wire(&mut s, c, T0, "SET k v2 KEEPTTL");
    assert_eq!(wire(&mut s, c, T0 + 2000, "TTL k"), ":8\r\n");
    wire(&mut s, c, T0, "SET k v3");
    assert_eq!(wire(&mut s, c, T0, "PTTL k"), ":-1\r\n");
}

#[test]
fn active_expiry_deletes_and_propagates() {
    let (mut s, c) = new_server();
    for i in 0..100 {
        wire(&mut s, c, T0, &format!("SET k{i} v PX {}", 10 + i));
    }
    wire(&mut s, c, T0, "SET keep v");
    s.take_propagated();
    s.active_expire_cycle(T0 + 1000);
    assert_eq!(s.dbsize(), 1);
    let p = props(&mut s);
    assert_eq!(p.len(), 100);
    assert!(p.iter().all(|c| c.starts_with("DEL k")));
}

#[test]
fn pexpire_incr_del() {
    let (mut s, c) = new_server();
    assert_eq!(wire(&mut s, c, T0, "PEXPIRE k 100"), ":0\r\n");
    assert_eq!(wire(&mut s, c, T0, "INCR k"), ":1\r\n");
    assert_eq!(wire(&mut s, c, T0, "PEXPIRE k 100"), ":1\r\n");
    assert_eq!(wire(&mut s, c, T0, "INCR k"), ":2\r\n");
    assert_eq!(
        wire(&mut s, c, T0 + 50, "PTTL k"),
        ":50\r\n",
        "INCR keeps the TTL"
    );
    assert_eq!(wire(&mut s, c, T0, "DEL k k nokey"), ":1\r\n");
    wire(&mut s, c, T0, "SET s abc");
    assert_eq!(
        wire(&mut s, c, T0, "INCR s"),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        props(&mut s),
        vec![
            "INCR k".to_string(),
            format!("PEXPIREAT k {}", T0 + 100),
            "INCR k".to_string(),
            "DEL k k nokey".to_string(),
            "SET s abc".to_string(),
        ]
    );
}

#[test]
fn eval_compare_and_delete() {
    let (mut s, c) = new_server();
    let script = "\"if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end\"";
    wire(&mut s, c, T0, "SET lock tok1 PX 1000");
    assert_eq!(
        wire(&mut s, c, T0, &format!("EVAL {script} 1 lock tok2")),
        ":0\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, &format!("EVAL {script} 1 lock tok1")),
        ":1\r\n"
    );
    assert_eq!(wire(&mut s, c, T0, "EXISTS lock"), ":0\r\n");
    let sha = lua::sha1_hex(argv(&format!("x {script}"))[1].as_slice());
    assert_eq!(
        wire(&mut s, c, T0, &format!("EVALSHA {sha} 1 lock x")),
        ":0\r\n"
    );
    assert_eq!(wire(&mut s, c, T0, "SCRIPT FLUSH"), "+OK\r\n");
    assert_eq!(
        wire(&mut s, c, T0, &format!("EVALSHA {sha} 1 lock x")),
        "-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
}

#[test]
fn lua_conversions_and_errors() {
    let (mut s, c) = new_server();
    assert_eq!(
        wire(&mut s, c, T0, "EVAL \"return {1,2,nil,3}\" 0"),
        "*2\r\n:1\r\n:2\r\n"
    );
    assert_eq!(wire(&mut s, c, T0, "EVAL \"return 3.99\" 0"), ":3\r\n");
    assert_eq!(
        wire(&mut s, c, T0, "EVAL \"return {ok='fine'}\" 0"),
        "+fine\r\n"
    );
    assert_eq!(wire(&mut s, c, T0, "EVAL \"return false\" 0"), "$-1\r\n");
    assert_eq!(wire(&mut s, c, T0, "EVAL \"return true\" 0"), ":1\r\n");
    assert_eq!(
        wire(&mut s, c, T0, "EVAL \"return math.random(1000000)\" 0"),
        ":396465\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, "EVAL \"return x\" 0"),
        "-ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 03c387736bb5cc009ff35151572cee04677aa374, on @user_script:1.\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, "EVAL \"return (\" 0"),
        "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, "EVAL \"return redis.call('nonexistent')\" 0"),
        "-ERR Unknown Redis command called from script script: d289e0fdfb7b59e998ec0042d740bb15eb0c05f7, on @user_script:1.\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, "EVAL \"return redis.pcall('get')\" 0"),
        "-ERR Wrong number of args calling Redis command from script\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, "EVAL \"x = 1\" 0"),
        "-ERR user_script:1: Attempt to modify a readonly table script: 34bce5f775de97f557a34088509c8bfe1ea17e52, on @user_script:1.\r\n"
    );
}

#[test]
fn script_effects_are_wrapped_in_multi_exec() {
    let (mut s, c) = new_server();
    wire(
        &mut s,
        c,
        T0,
        "EVAL \"redis.call('set','a','1') redis.call('setnx','a','2') redis.call('incr','a')\" 0",
    );
    assert_eq!(props(&mut s), vec!["MULTI", "set a 1", "incr a", "EXEC"]);
}
