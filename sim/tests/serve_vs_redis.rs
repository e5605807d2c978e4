//! `locksim serve` against a real `redis-server` 7.0, over TCP, byte for byte, in RESP2 and in
//! RESP3 (`HELLO 3` first): the lock commands and scripts a client library sends, the
//! connection and transaction commands libraries send around them, their error paths, and
//! malformed requests on one connection that must leave the other connections served.
//!
//! This corpus is separate from `model/tests/conformance/` on purpose: that one drives the model
//! in-process; this one goes through the `locksim` binary's listener, parser and writer threads.
//! Fails if `redis-server` cannot be started, unless `LOCKSIM_SKIP_REDIS=1`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use model::redis::resp::encode_command;
use model::redis::{Protocol, Reply};

/// A child process killed when dropped (also when an assertion fails).
struct Process {
    child: Child,
    port: u16,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port the kernel just handed out (and took back): free unless someone races us for it.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().unwrap().port()
}

/// Starts `program args --port P`, retrying on another port if it dies (port taken).
fn start(program: &str, args: &[&str]) -> Result<Process, String> {
    let mut last = String::new();
    for _ in 0..10 {
        let port = free_port();
        let child = Command::new(program)
            .args(args)
            .args(["--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        let mut process = Process { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = process.child.try_wait() {
                last = format!("{program} exited with {status}");
                break;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(process);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Err(last)
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// A connection speaking `protocol` (RESP3: after `HELLO 3`, whose reply is not compared).
fn connect_with(port: u16, protocol: Protocol) -> TcpStream {
    let mut s = connect(port);
    if protocol == Protocol::Resp3 {
        roundtrip(&mut s, &["HELLO", "3"]);
    }
    s
}

/// Sends one command and reads exactly one reply.
fn roundtrip(conn: &mut TcpStream, argv: &[&str]) -> Vec<u8> {
    conn.write_all(&encode_command(argv)).unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    while !matches!(Reply::decode_resp3(&out), Ok(Some(_))) {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    out
}

/// Sends raw bytes on a new connection and reads until the output ends with `last`.
fn until_reply(port: u16, protocol: Protocol, bytes: &[u8], last: &[u8]) -> Vec<u8> {
    let mut conn = connect_with(port, protocol);
    conn.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    while !out.ends_with(last) {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    out
}

/// Sends raw bytes and reads until the server closes the connection.
fn until_closed(port: u16, protocol: Protocol, bytes: &[u8]) -> Vec<u8> {
    let mut conn = connect_with(port, protocol);
    conn.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = conn.read_to_end(&mut out);
    out
}

const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
const REDISSON_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
const FENCED: &str = "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('incr', KEYS[2]) end return false";

/// The requests, in order, as a lock client and its operator would send them.
fn corpus() -> Vec<Vec<&'static str>> {
    vec![
        vec!["FLUSHALL"],
        vec!["PING"],
        vec!["PING", "hello"],
        vec!["SET", "lock", "tok-a", "NX", "PX", "30000"],
        vec!["SET", "lock", "tok-b", "NX", "PX", "30000"],
        vec!["GET", "lock"],
        vec!["TTL", "lock"],
        vec!["SET", "lock", "x", "NX", "XX"],
        vec!["SET", "lock", "x", "PX", "0"],
        vec!["SET", "lock", "x", "EX", "-5"],
        vec!["SET", "lock", "x", "PX", "abc"],
        vec!["SET", "lock", "tok-c", "XX", "GET", "KEEPTTL"],
        vec!["TTL", "lock"],
        vec!["EVAL", RELEASE, "1", "lock", "tok-a"],
        vec!["EVAL", RELEASE, "1", "lock", "tok-c"],
        vec!["EXISTS", "lock"],
        vec!["SETNX", "legacy", "1700000000000"],
        vec!["SETNX", "legacy", "1700000009999"],
        vec!["GETSET", "legacy", "1700000005000"],
        vec!["EXPIRE", "legacy", "10", "NX"],
        vec!["EXPIRE", "legacy", "10", "NX"],
        vec!["EXPIRE", "legacy", "5", "GT"],
        vec!["EXPIRE", "legacy", "5", "LT"],
        vec!["PERSIST", "legacy"],
        vec!["TTL", "legacy"],
        vec!["GETDEL", "legacy"],
        vec!["INCR", "fence"],
        vec!["INCRBY", "fence", "10"],
        vec!["INCRBY", "fence", "ten"],
        vec!["DECRBY", "fence", "9223372036854775807"],
        vec!["DECRBY", "fence", "9223372036854775807"],
        vec!["EVAL", FENCED, "2", "flock", "fence", "tok-f", "30000"],
        vec!["EVAL", FENCED, "2", "flock", "fence", "tok-g", "30000"],
        vec!["EVAL", REDISSON_LOCK, "1", "rlock", "30000", "uuid:1"],
        vec!["EVAL", REDISSON_LOCK, "1", "rlock", "30000", "uuid:1"],
        vec!["HGETALL", "rlock"],
        vec!["HINCRBY", "rlock", "uuid:1", "-1"],
        vec!["HGET", "rlock", "uuid:2"],
        vec!["HDEL", "rlock", "uuid:1", "uuid:2"],
        vec!["HLEN", "rlock"],
        vec!["SCRIPT", "LOAD", RELEASE],
        vec![
            "SCRIPT",
            "EXISTS",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            "0000",
        ],
        vec![
            "EVALSHA",
            "ffffffffffffffffffffffffffffffffffffffff",
            "1",
            "lock",
            "t",
        ],
        vec!["EVAL", "return redis.call('incr', KEYS[1])", "1", "lock"],
        vec!["SET", "s", "text"],
        vec!["EVAL", "return redis.call('incr', KEYS[1])", "1", "s"],
        vec![
            "EVAL",
            "return redis.pcall('lpush', KEYS[1], 'x')",
            "1",
            "s",
        ],
        vec![
            "EVAL",
            "return {1, 'two', {3}, false, redis.status_reply('OK')}",
            "0",
        ],
        vec!["EVAL", "return 3.99", "0"],
        vec!["EVAL", "return redis.error_reply('MY own error')", "0"],
        vec!["EVAL", "syntax error here", "0"],
        vec!["EVAL", "return 1", "-1"],
        vec!["EVAL", "return 1", "2", "onlyone"],
        vec!["RPUSH", "queue", "a", "b", "c"],
        vec!["LRANGE", "queue", "0", "-1"],
        vec!["LINDEX", "queue", "-1"],
        vec!["LREM", "queue", "0", "b"],
        vec!["LPOP", "queue"],
        vec!["RPOP", "queue", "5"],
        vec!["LPOP", "queue", "2"],
        vec!["ZADD", "timeouts", "1700000030000", "uuid:1:t1"],
        vec!["ZADD", "timeouts", "XX", "NX", "1", "m"],
        vec!["ZINCRBY", "timeouts", "5.5", "uuid:1:t1"],
        vec!["ZRANGE", "timeouts", "0", "-1", "WITHSCORES"],
        vec!["ZRANGEBYSCORE", "timeouts", "-inf", "+inf"],
        vec!["ZSCORE", "timeouts", "nope"],
        vec!["ZREM", "timeouts", "uuid:1:t1"],
        vec!["ZCARD", "timeouts"],
        vec!["TYPE", "fence"],
        vec!["TYPE", "nothing"],
        vec!["GET"],
        vec!["NOSUCHCOMMAND", "a", "b"],
        vec!["SELECT", "0"],
        vec!["SELECT", "9"],
        vec!["SET", "in9", "nine"],
        vec!["SELECT", "16"],
        vec!["SELECT", "0"],
        vec!["GET", "in9"],
        vec!["CLIENT", "SETNAME", "lock-client"],
        vec!["CLIENT", "GETNAME"],
        vec!["CLIENT", "SETINFO", "LIB-NAME", "redis-py"],
        vec!["CLIENT", "NO-EVICT", "on"],
        vec!["AUTH", "secret"],
        vec!["MULTI"],
        vec!["SET", "tx", "1"],
        vec!["INCR", "tx"],
        vec!["EVAL", RELEASE, "1", "tx", "2"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["SET", "tx", "1"],
        vec!["NOSUCHCOMMAND"],
        vec!["EXEC"],
        vec!["WATCH", "tx"],
        vec!["SET", "tx", "changed"],
        vec!["MULTI"],
        vec!["GET", "tx"],
        vec!["EXEC"],
        vec!["DISCARD"],
        vec!["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "tx"],
        vec!["EVAL_RO", "return redis.call('del', KEYS[1])", "1", "tx"],
        vec!["KEYS", "t*"],
        vec!["SCAN", "0", "MATCH", "t*"],
        vec!["LINDEX", "nokey", "notanint"],
        vec!["BLPOP", "nolist", "0.01"],
        vec!["RPUSH", "nolist", "a"],
        vec!["BRPOP", "nolist", "0"],
        vec!["HSET", "h", "f", "v"],
        vec!["HGETALL", "h"],
        vec!["ZADD", "z", "1.5", "m"],
        vec!["ZSCORE", "z", "m"],
        vec!["CONFIG", "GET", "maxmemory"],
        vec![
            "EVAL",
            "redis.setresp(3) return redis.call('hgetall', KEYS[1])",
            "1",
            "h",
        ],
        vec!["DEL", "h", "z", "tx"],
        vec!["PUBLISH", "redisson_lock__channel:{rlock}", "0"],
        vec!["WAIT", "0", "0"],
        vec!["DEL", "lock", "flock", "fence", "s"],
        vec!["UNLINK", "rlock", "queue"],
        vec!["DBSIZE"],
        vec!["ECHO", "bye"],
        vec!["INFO", "keyspace"],
    ]
}

#[test]
fn locksim_serve_answers_like_redis_server() {
    let real = match start(
        "redis-server",
        &["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    ) {
        Ok(p) => p,
        Err(e) if std::env::var("LOCKSIM_SKIP_REDIS").as_deref() == Ok("1") => {
            eprintln!("\n!!! LOCKSIM_SKIP_REDIS=1: serve-vs-redis test SKIPPED ({e}) !!!\n");
            return;
        }
        Err(e) => panic!(
            "redis-server could not be started ({e}); install it (apt-get install redis-server) or set LOCKSIM_SKIP_REDIS=1"
        ),
    };
    let ours = start(env!("CARGO_BIN_EXE_locksim"), &["serve"]).expect("locksim serve");
    let mut mismatches = Vec::new();
    let corpus = corpus();
    let mut compared = 0;
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let mut theirs_conn = connect_with(real.port, protocol);
        let mut ours_conn = connect_with(ours.port, protocol);
        for argv in &corpus {
            let theirs = roundtrip(&mut theirs_conn, argv);
            let mine = roundtrip(&mut ours_conn, argv);
            assert!(!theirs.is_empty(), "redis-server did not answer {argv:?}");
            compared += 1;
            if theirs != mine {
                mismatches.push(format!(
                    "{protocol:?} {}\n  redis-server:  {:?}\n  locksim serve: {:?}",
                    argv.join(" "),
                    String::from_utf8_lossy(&theirs),
                    String::from_utf8_lossy(&mine)
                ));
            }
        }
        // Malformed requests: both answer with the same protocol error (the offending byte
        // raw, CR/LF as spaces) and close that connection.
        for bad in [
            &b"*1\r\n$x\r\n"[..],
            b"*2\r\n$3\r\nGET\r\n:1\r\n",
            b"\"unbalanced\r\n",
            b"*1\r\n\xff\r\n",
            b"*1\r\n\n\r\n",
            b"PING\r\n*1\r\n\xe9\r\n",
        ] {
            let theirs = until_closed(real.port, protocol, bad);
            let mine = until_closed(ours.port, protocol, bad);
            assert!(
                theirs.windows(19).any(|w| w == b"-ERR Protocol error"),
                "{theirs:?}"
            );
            compared += 1;
            if theirs != mine {
                mismatches.push(format!(
                    "{protocol:?} raw {:?}\n  redis-server:  {:?}\n  locksim serve: {:?}",
                    String::from_utf8_lossy(bad),
                    String::from_utf8_lossy(&theirs),
                    String::from_utf8_lossy(&mine)
                ));
            }
        }
        // One connection's whole exchange, sent at once and read up to its last reply.
        let mut exchange = |what: &str, lines: &[&str], last: &[u8]| {
            let bytes = lines
                .iter()
                .map(|line| encode_command(&line.split(' ').collect::<Vec<_>>()))
                .collect::<Vec<_>>()
                .concat();
            let theirs = until_reply(real.port, protocol, &bytes, last);
            let mine = until_reply(ours.port, protocol, &bytes, last);
            compared += 1;
            if theirs != mine {
                mismatches.push(format!(
                    "{protocol:?} {what}\n  redis-server:  {:?}\n  locksim serve: {:?}",
                    String::from_utf8_lossy(&theirs),
                    String::from_utf8_lossy(&mine)
                ));
            }
        };
        // RESP3: a connection that publishes to its own channel and pattern gets the pushes
        // before PUBLISH's reply (Redis writes them into its buffer during the command).
        if protocol == Protocol::Resp3 {
            exchange(
                "publish to itself",
                &["SUBSCRIBE own", "PSUBSCRIBE ow*", "PUBLISH own m"],
                b":2\r\n",
            );
        }
        // UNSUBSCRIBE as Redisson's waiter sends it when it leaves (one channel of a
        // connection subscribed to two), then of all that is left, then with nothing left (a
        // nil channel); the connection is out of subscribed mode again: PING's plain reply.
        exchange(
            "unsubscribe",
            &[
                "SUBSCRIBE redisson_lock__channel:{rlock} other",
                "UNSUBSCRIBE redisson_lock__channel:{rlock}",
                "UNSUBSCRIBE",
                "UNSUBSCRIBE",
                "PING",
            ],
            b"+PONG\r\n",
        );
        // ... and every other connection is still served, old and new.
        assert_eq!(roundtrip(&mut ours_conn, &["PING"]), b"+PONG\r\n");
        assert_eq!(roundtrip(&mut connect(ours.port), &["PING"]), b"+PONG\r\n");
    }
    assert!(
        mismatches.is_empty(),
        "{} of {compared} requests answered differently:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
