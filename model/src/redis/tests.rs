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

/// More distinct scripts than mlua's reference thread has slots (Lua 5.1 caps it near 8,000):
/// every one stays cached and runs, by EVAL and by EVALSHA.
#[test]
fn ten_thousand_distinct_scripts_stay_cached() {
    let (mut s, c) = new_server();
    for i in 0..10_000 {
        assert_eq!(
            wire(&mut s, c, T0, &format!("EVAL \"return {i}\" 0")),
            format!(":{i}\r\n")
        );
    }
    for i in [0, 1023, 1024, 9_999] {
        let sha = lua::sha1_hex(format!("return {i}").as_bytes());
        assert_eq!(
            wire(&mut s, c, T0, &format!("EVALSHA {sha} 0")),
            format!(":{i}\r\n")
        );
        assert_eq!(
            wire(&mut s, c, T0, &format!("SCRIPT EXISTS {sha}")),
            "*1\r\n:1\r\n"
        );
    }
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

#[test]
fn propagation_rewrites_like_redis_7() {
    let (mut s, c) = new_server();
    for line in [
        "set a 1",
        "set a 2 ex 100",
        "set a 3 px 100 nx",
        "set a 3 px 100 xx get",
        "set b 1 pxat 99999999999999 nx get",
        "set b 1 keepttl get",
        "setnx a 1",
        "setex c 100 v",
        "psetex c 100 v",
        "getset c x",
        "getdel c",
        "getdel c",
        "expire a 100",
        "pexpire a 100 nx",
        "pexpire a 100000 xx",
        "expireat a 1",
        "del zz a b",
        "eval \"return 1\" 0",
        "eval \"redis.call('set','k','v')\" 0",
        "eval \"redis.call('setnx','k','v')\" 0",
        "publish ch m",
        "lpop l 0",
        "zadd z 1 a",
        "zadd z 1 a",
        "persist z",
    ] {
        exec(&mut s, c, T0, line);
    }
    assert_eq!(
        props(&mut s),
        vec![
            "set a 1".to_string(),
            format!("SET a 2 PXAT {}", T0 + 100_000),
            format!("SET a 3 PXAT {}", T0 + 100),
            "SET b 1 PXAT 99999999999999".to_string(),
            "set b 1 keepttl".to_string(),
            format!("SET c v PXAT {}", T0 + 100_000),
            format!("SET c v PXAT {}", T0 + 100),
            "SET c x".to_string(),
            "DEL c".to_string(),
            format!("PEXPIREAT a {}", T0 + 100_000),
            format!("PEXPIREAT a {} xx", T0 + 100_000),
            "DEL a".to_string(),
            "del zz a b".to_string(),
            "set k v".to_string(),
            "publish ch m".to_string(),
            "zadd z 1 a".to_string(),
        ]
    );
}

/// What Redis 7.0.15 sends its replicas for MSET, GETEX, SETRANGE, INCRBYFLOAT, HINCRBYFLOAT,
/// RENAME (recorded from a real master's replication stream).
#[test]
fn propagation_of_string_and_rename_commands_like_redis_7() {
    let (mut s, c) = new_server();
    for line in [
        "set g v",
        "getex g ex 100",
        "getex g px 100",
        "getex g exat 99999999999",
        "getex g pxat 99999999999999",
        "getex g persist",
        "getex g persist",
        "getex g",
        "getex g exat 1",
        "getex g pxat 1",
        "mset a 1 b 2",
        "msetnx a 1 c 3",
        "msetnx c 3 d 4",
        "setrange a 3 xy",
        "setrange a 3 \"\"",
        "setrange nokey 3 \"\"",
        "incrbyfloat f 1.5",
        "set f 1 ex 100",
        "incrbyfloat f 0.1",
        "incrbyfloat f inf",
        "hincrbyfloat h f 1.5",
        "hincrbyfloat h f 1e10",
        "rename a z",
        "rename z z",
        "renamenx z c",
        "renamenx z zz",
        "rename missing x",
    ] {
        exec(&mut s, c, T0, line);
    }
    assert_eq!(
        props(&mut s),
        vec![
            "set g v".to_string(),
            format!("PEXPIREAT g {}", T0 + 100_000),
            format!("PEXPIREAT g {}", T0 + 100),
            "PEXPIREAT g 99999999999000".to_string(),
            "PEXPIREAT g 99999999999999".to_string(),
            "PERSIST g".to_string(),
            "DEL g".to_string(),
            "mset a 1 b 2".to_string(),
            "msetnx c 3 d 4".to_string(),
            "setrange a 3 xy".to_string(),
            "SET f 1.5 KEEPTTL".to_string(),
            format!("SET f 1 PXAT {}", T0 + 100_000),
            "SET f 1.1 KEEPTTL".to_string(),
            "HSET h f 1.5".to_string(),
            "HSET h f 10000000001.5".to_string(),
            "rename a z".to_string(),
            "renamenx z zz".to_string(),
        ]
    );
    // An expired key met by MSET / RENAME is deleted first: both effects go out in MULTI/EXEC.
    exec(&mut s, c, T0, "set t v px 1");
    exec(&mut s, c, T0, "set u v px 1");
    s.take_propagated();
    exec(&mut s, c, T0 + 10, "mset t w");
    exec(&mut s, c, T0 + 10, "rename u x");
    assert_eq!(
        props(&mut s),
        vec!["MULTI", "DEL t", "mset t w", "EXEC", "DEL u"]
    );
    // COPY goes out verbatim when it copied; TOUCH never.
    for line in [
        "set x v",
        "copy x y",
        "copy x y",
        "copy x y replace",
        "copy x y db 2",
        "copy missing y",
        "touch x y",
    ] {
        exec(&mut s, c, T0 + 10, line);
    }
    assert_eq!(
        props(&mut s),
        vec!["set x v", "copy x y", "copy x y replace", "copy x y db 2"]
    );
    // An expired destination in another database: its DEL goes out there, as Redis sends it.
    exec(&mut s, c, T0, "select 1");
    exec(&mut s, c, T0, "set d x px 1");
    exec(&mut s, c, T0, "select 0");
    s.take_propagated();
    exec(&mut s, c, T0 + 10, "copy x d db 1");
    assert_eq!(
        props(&mut s),
        vec!["MULTI", "DEL d", "SELECT 0", "copy x d db 1", "EXEC"]
    );
}

/// What a real 7.0.15 replica received (MONITOR on it) for the same commands: set writes
/// propagate verbatim when they changed something, STORE variants also when they only deleted
/// the destination, and nothing otherwise.
#[test]
fn set_commands_propagate_like_redis_7() {
    let (mut s, c) = new_server();
    for line in [
        "sadd s 1 2 3",
        "sadd s 1",
        "srem s 9",
        "srem s 1",
        "smove s d 2",
        "smove s d 9",
        "smove s s 3",
        "sadd d 7",
        "sinterstore dst s d",
        "sinterstore dst s nokey",
        "sunionstore u s d",
        "sunionstore u n1 n2",
        "sdiffstore df d s",
        "sdiffstore df d d",
        "sdiffstore df d d",
        "set str v",
        "sinterstore str s d",
        "sunionstore str s",
        "srem s 3",
        "sintercard 1 d",
        "smembers d",
        "set ex v px 50",
    ] {
        exec(&mut s, c, T0, line);
    }
    exec(&mut s, c, T0 + 100, "sinterstore e d ex");
    exec(&mut s, c, T0 + 100, "sadd q 1");
    exec(&mut s, c, T0 + 100, "set ex2 v px 50");
    exec(&mut s, c, T0 + 200, "sinterstore ex2 q");
    assert_eq!(
        props(&mut s),
        vec![
            "sadd s 1 2 3",
            "srem s 1",
            "smove s d 2",
            "sadd d 7",
            "sunionstore u s d",
            "sunionstore u n1 n2",
            "sdiffstore df d s",
            "sdiffstore df d d",
            "set str v",
            "sinterstore str s d",
            "sunionstore str s",
            "srem s 3",
            &format!("SET ex v PXAT {}", T0 + 50),
            "DEL ex",
            "sadd q 1",
            &format!("SET ex2 v PXAT {}", T0 + 150),
            "MULTI",
            "DEL ex2",
            "sinterstore ex2 q",
            "EXEC",
        ]
    );
}

/// What the sorted set, hash and list writes propagate, as recorded from a replica of
/// redis-server 7.0.15 (MONITOR on the replica): verbatim when they changed something, nothing
/// otherwise.
#[test]
fn zset_hash_list_writes_propagate_like_redis_7() {
    let (mut s, c) = new_server();
    let cases: &[(&str, &[&str])] = &[
        (
            "zadd z 1 a 2 b 3 c 4 d 5 e",
            &["zadd z 1 a 2 b 3 c 4 d 5 e"],
        ),
        ("zremrangebyscore z -inf 1", &["zremrangebyscore z -inf 1"]),
        ("zremrangebyscore z -inf 1", &[]),
        ("zremrangebyrank z 0 0", &["zremrangebyrank z 0 0"]),
        ("zremrangebyrank z 10 20", &[]),
        ("zremrangebylex z [d [d", &["zremrangebylex z [d [d"]),
        ("zremrangebylex z [zz [zzz", &[]),
        ("zpopmin z", &["zpopmin z"]),
        ("zpopmin z 0", &[]),
        ("zpopmin nokey", &[]),
        ("zpopmax z 5", &["zpopmax z 5"]),
        ("zpopmax z 5", &[]),
        ("zadd l 0 a 0 b", &["zadd l 0 a 0 b"]),
        ("zrangestore d l 0 -1", &["zrangestore d l 0 -1"]),
        ("zrangestore d nokey 0 -1", &["zrangestore d nokey 0 -1"]),
        ("zrangestore d nokey 0 -1", &[]),
        (
            "zrangestore d l +inf -inf byscore rev limit 0 1",
            &["zrangestore d l +inf -inf byscore rev limit 0 1"],
        ),
        ("hmset h a 1 b 2", &["hmset h a 1 b 2"]),
        ("hmset h a 1", &["hmset h a 1"]),
        ("hsetnx h a 2", &[]),
        ("hsetnx h c 3", &["hsetnx h c 3"]),
        ("rpush q a b c a b c", &["rpush q a b c a b c"]),
        ("ltrim q 0 -1", &[]),
        ("ltrim q 1 -1", &["ltrim q 1 -1"]),
        ("ltrim nokey 0 1", &[]),
        ("lset q 0 X", &["lset q 0 X"]),
        ("lset q 99 X", &[]),
        ("linsert q BEFORE c C", &["linsert q BEFORE c C"]),
        ("linsert q BEFORE zz C", &[]),
        ("lpushx q p", &["lpushx q p"]),
        ("lpushx nokey p", &[]),
        ("rpushx q p", &["rpushx q p"]),
        ("rpushx nokey p", &[]),
        ("rpoplpush q l2", &["rpoplpush q l2"]),
        ("rpoplpush nokey l2", &[]),
        ("lmove q l2 LEFT right", &["lmove q l2 LEFT right"]),
        ("lmove nokey l2 LEFT right", &[]),
        ("blmove q l2 right LEFT 0", &["LMOVE q l2 right LEFT"]),
        ("brpoplpush q l2 0", &["RPOPLPUSH q l2"]),
        ("ltrim q 1 0", &["ltrim q 1 0"]),
    ];
    for (line, expected) in cases {
        exec(&mut s, c, T0, line);
        assert_eq!(props(&mut s), *expected, "{line}");
    }
}

/// A served BLMOVE / BRPOPLPUSH propagates as LMOVE (sides in lower case) / RPOPLPUSH, one
/// effect per served client; a destination of the wrong type answers WRONGTYPE and pops nothing.
#[test]
fn served_blocking_moves_propagate_like_redis_7() {
    let (mut s, c) = new_server();
    let (b1, b2, b3) = (s.connect(), s.connect(), s.connect());
    exec(&mut s, c, T0, "set str x");
    for (client, line) in [
        (b1, "blmove src dst LEFT RIGHT 0"),
        (b2, "brpoplpush src dst2 0"),
        (b3, "blmove src str left left 0"),
    ] {
        assert!(matches!(
            s.execute(client, T0, &argv(line)),
            Outcome::Blocked
        ));
    }
    props(&mut s);
    exec(&mut s, c, T0, "rpush src a b c");
    assert_eq!(
        s.take_unblocked(),
        vec![
            (b1, Reply::Bulk(b"a".to_vec())),
            (b2, Reply::Bulk(b"c".to_vec())),
            (
                b3,
                Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value")
            ),
        ]
    );
    assert_eq!(
        props(&mut s),
        vec![
            "rpush src a b c",
            "LMOVE src dst left right",
            "RPOPLPUSH src dst2"
        ]
    );
    assert_eq!(wire(&mut s, c, T0, "lrange src 0 -1"), "*1\r\n$1\r\nb\r\n");
}

#[test]
fn lazy_expiry_deletes_are_wrapped_with_the_command() {
    let (mut s, c) = new_server();
    for key in ["s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"] {
        exec(&mut s, c, T0, &format!("set {key} v px 50"));
    }
    s.take_propagated();
    let later = T0 + 200;
    exec(&mut s, c, later, "set s2 x");
    exec(
        &mut s,
        c,
        later,
        "eval \"redis.call('get','s3') redis.call('set','s4','y')\" 0",
    );
    exec(&mut s, c, later, "eval \"return redis.call('get','s5')\" 0");
    assert_eq!(exec(&mut s, c, later, "del s6"), Reply::Integer(0));
    exec(&mut s, c, later, "set s7 v nx");
    assert_eq!(exec(&mut s, c, later, "exists s8 s9"), Reply::Integer(0));
    assert_eq!(
        props(&mut s),
        vec![
            "MULTI",
            "DEL s2",
            "set s2 x",
            "EXEC",
            "MULTI",
            "DEL s3",
            "DEL s4",
            "set s4 y",
            "EXEC",
            "DEL s5",
            "DEL s6",
            "MULTI",
            "DEL s7",
            "set s7 v nx",
            "EXEC",
            "MULTI",
            "DEL s8",
            "DEL s9",
            "EXEC",
        ]
    );
}

#[test]
fn replica_is_read_only_and_never_expires_keys_itself() {
    let (mut master, mc) = new_server();
    let (mut replica, rc) = new_server();
    replica.set_role(Role::Replica {
        master_host: "10.0.0.1".into(),
        master_port: 6379,
    });
    exec(&mut master, mc, T0, "set k v px 100");
    exec(&mut master, mc, T0, "hset h f 1");
    exec(
        &mut master,
        mc,
        T0,
        "eval \"redis.call('incr','n') redis.call('incr','n')\" 0",
    );
    for argv in master.take_propagated() {
        replica.apply_replicated(T0, &argv);
    }
    assert_eq!(wire(&mut replica, rc, T0, "get k"), "$1\r\nv\r\n");
    assert_eq!(wire(&mut replica, rc, T0, "get n"), "$1\r\n2\r\n");
    assert_eq!(wire(&mut replica, rc, T0, "hget h f"), "$1\r\n1\r\n");
    // logically expired by the replica's own clock: nil, but the key stays until the master's DEL
    assert_eq!(wire(&mut replica, rc, T0 + 500, "get k"), "$-1\r\n");
    assert_eq!(wire(&mut replica, rc, T0 + 500, "ttl k"), ":-2\r\n");
    replica.active_expire_cycle(T0 + 500);
    assert_eq!(replica.dbsize(), 3);
    assert!(replica.take_propagated().is_empty());
    // the master's stream is applied even for keys the replica thinks are expired
    replica.apply_replicated(T0 + 500, &argv("SET k w KEEPTTL"));
    assert_eq!(
        replica.db().get(b"k").map(|e| e.value.clone()),
        Some(keyspace::Value::Str(b"w".to_vec()))
    );
    replica.apply_replicated(T0 + 500, &argv("DEL k"));
    assert_eq!(replica.dbsize(), 2);
    assert_eq!(
        wire(&mut replica, rc, T0, "set a b"),
        "-READONLY You can't write against a read only replica.\r\n"
    );
    assert_eq!(
        wire(
            &mut replica,
            rc,
            T0,
            r#"eval "return redis.call(\"set\",\"a\",\"b\")" 0"#
        ),
        "-READONLY You can't write against a read only replica. script: 554a95710d45ea243cdf37846a5028cfac292109, on @user_script:1.\r\n"
    );
    assert_eq!(
        wire(
            &mut replica,
            rc,
            T0,
            "eval \"return redis.call('get','n')\" 0"
        ),
        "$1\r\n2\r\n"
    );
    assert!(
        wire(&mut replica, rc, T0, "wait 0 0")
            .starts_with("-ERR WAIT cannot be used with replica instances.")
    );
    assert_eq!(
        wire(&mut replica, rc, T0, "role"),
        "*5\r\n$5\r\nslave\r\n$8\r\n10.0.0.1\r\n:6379\r\n$7\r\nconnect\r\n:-1\r\n"
    );
    // a promoted replica expires on its own clock
    replica.set_role(Role::Master);
    exec(&mut replica, rc, T0, "set e v px 10");
    replica.take_propagated();
    replica.active_expire_cycle(T0 + 100);
    assert_eq!(props(&mut replica), vec!["DEL e"]);
}

#[test]
fn wait_is_left_to_the_host() {
    let (mut s, c) = new_server();
    assert_eq!(
        s.execute(c, T0, &argv("WAIT 1 100")),
        Outcome::Wait {
            numreplicas: 1,
            timeout_ms: 100
        }
    );
    assert_eq!(
        wire(&mut s, c, T0, "WAIT 0 -1"),
        "-ERR timeout is negative\r\n"
    );
    assert_eq!(
        wire(&mut s, c, T0, "WAIT x 0"),
        "-ERR value is not an integer or out of range\r\n"
    );
}

#[test]
fn pubsub_pushes_go_to_subscribers() {
    let (mut s, a) = new_server();
    let b = s.connect();
    assert_eq!(
        wire(&mut s, b, T0, "subscribe ch"),
        "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
    );
    assert_eq!(wire(&mut s, a, T0, "publish ch hi"), ":1\r\n");
    let pushes = s.take_pushes();
    assert_eq!(pushes.len(), 1);
    assert_eq!(pushes[0].0, b);
    assert_eq!(
        pushes[0].1.encode(),
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
    );
    s.disconnect(b);
    assert_eq!(wire(&mut s, a, T0, "publish ch hi"), ":0\r\n");
}

#[test]
fn runaway_scripts_are_killed() {
    let (mut s, c) = new_server();
    let reply = wire(&mut s, c, T0, "EVAL \"while true do end\" 0");
    assert!(
        reply.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{reply}"
    );
    assert_eq!(wire(&mut s, c, T0, "EVAL \"return 1\" 0"), ":1\r\n");
}

/// CLIENT LIST counts channels (`sub=`) and patterns (`psub=`) apart; RESET drops both.
#[test]
fn client_list_counts_patterns_and_reset_drops_them() {
    let (mut s, c) = new_server();
    let other = s.connect();
    exec(&mut s, c, T0, "psubscribe a* b*");
    exec(&mut s, c, T0, "subscribe x");
    let list = wire(&mut s, other, T0, "client list");
    assert!(list.contains("sub=1 psub=2"), "{list}");
    assert_eq!(wire(&mut s, other, T0, "pubsub numpat"), ":2\r\n");
    assert_eq!(wire(&mut s, other, T0, "publish abc m"), ":1\r\n");
    exec(&mut s, c, T0, "reset");
    assert_eq!(wire(&mut s, other, T0, "pubsub numpat"), ":0\r\n");
    assert_eq!(wire(&mut s, other, T0, "publish abc m"), ":0\r\n");
}

/// Bitmap writes as a replica of redis-server 7.0.15 received them (MONITOR on the replica):
/// SETBIT verbatim when it created, grew or flipped, BITOP verbatim when it stored or deleted
/// its destination; an expired destination is deleted first (DEL, then BITOP, in MULTI/EXEC).
#[test]
fn bitmap_writes_propagate_like_redis_7() {
    let (mut s, c) = new_server();
    for line in [
        "setbit b 0 1",
        "setbit b 0 1",
        "setbit b 0 0",
        "setbit b 20 0",
        "setbit b 20 0",
        "setbit b 4294967296 1",
        "getbit b 20",
        "bitcount b",
        "bitpos b 1",
        "bitop and d nokey nokey2",
        "bitop or d2 b",
        "set d3 x",
        "bitop or d3 nokey",
        "bitop not d4 b",
        "bitop xor d4 nokey",
        "set ex v px 50",
    ] {
        exec(&mut s, c, T0, line);
    }
    exec(&mut s, c, T0 + 100, "bitop or ex b");
    assert_eq!(
        props(&mut s),
        vec![
            "setbit b 0 1".to_string(),
            "setbit b 0 0".to_string(),
            "setbit b 20 0".to_string(),
            "bitop or d2 b".to_string(),
            "set d3 x".to_string(),
            "bitop or d3 nokey".to_string(),
            "bitop not d4 b".to_string(),
            "bitop xor d4 nokey".to_string(),
            format!("SET ex v PXAT {}", T0 + 50),
            "MULTI".to_string(),
            "DEL ex".to_string(),
            "bitop or ex b".to_string(),
            "EXEC".to_string(),
        ]
    );
}

/// SORT as a replica of redis-server 7.0.15 received it (MONITOR on the replica): with STORE,
/// verbatim when it stored or deleted its destination; without STORE, SORT_RO, or on a score
/// error, nothing. A STORE into an expired key deletes it first.
#[test]
fn sort_propagates_like_redis_7() {
    let (mut s, c) = new_server();
    for line in [
        "rpush l 3 1 2",
        "sort l",
        "sort l store d",
        "sort l store d",
        "sort nokey store d",
        "sort nokey store d",
        "sort_ro l",
        "rpush bad x",
        "sort bad store d2",
        "sadd s b a",
        "sort s by nosort store d3",
        "eval \"return redis.call('sort','l','store','d4')\" 0",
        "set ex v px 50",
    ] {
        exec(&mut s, c, T0, line);
    }
    exec(&mut s, c, T0 + 100, "sort l store ex");
    exec(&mut s, c, T0 + 100, "sort l limit 0 0 store d");
    assert_eq!(
        props(&mut s),
        vec![
            "rpush l 3 1 2".to_string(),
            "sort l store d".to_string(),
            "sort l store d".to_string(),
            "sort nokey store d".to_string(),
            "rpush bad x".to_string(),
            "sadd s b a".to_string(),
            "sort s by nosort store d3".to_string(),
            "sort l store d4".to_string(),
            format!("SET ex v PXAT {}", T0 + 50),
            "MULTI".to_string(),
            "DEL ex".to_string(),
            "sort l store ex".to_string(),
            "EXEC".to_string(),
        ]
    );
}

/// SCAN's guarantee under writes between calls: deleting every key a call returned (the
/// `scan_iter` + DEL pattern) or adding keys skips none of the keys present throughout.
#[test]
fn scan_walks_survive_writes_between_calls() {
    let (mut s, c) = new_server();
    for i in 0..300 {
        exec(&mut s, c, T0, &format!("set k{i} v"));
        exec(&mut s, c, T0, &format!("hset h f{i} v"));
    }
    for (scan, del) in [("scan", "del"), ("hscan h", "hdel h")] {
        let only = if scan == "scan" { " match k*" } else { "" };
        let (mut cursor, mut seen) = ("0".to_string(), 0);
        loop {
            let Reply::Array(parts) =
                exec(&mut s, c, T0, &format!("{scan} {cursor} count 7{only}"))
            else {
                panic!("not an array");
            };
            let (Reply::Bulk(next), Reply::Array(items)) = (&parts[0], &parts[1]) else {
                panic!("not a scan reply");
            };
            let step = if scan == "scan" { 1 } else { 2 };
            for item in items.iter().step_by(step) {
                let Reply::Bulk(name) = item else { panic!() };
                let name = String::from_utf8_lossy(name).to_string();
                exec(&mut s, c, T0, &format!("{del} {name}"));
                exec(&mut s, c, T0, &format!("set new{seen} v"));
                seen += 1;
            }
            cursor = String::from_utf8_lossy(next).to_string();
            if cursor == "0" {
                break;
            }
        }
        assert!(seen >= 300, "{scan}: {seen} of 300");
    }
}
