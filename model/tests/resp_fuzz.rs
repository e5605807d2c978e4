//! Property/fuzz test: arbitrary bytes and mutated commands through `RequestParser` and the
//! dispatcher must never panic, and the parser must consume input consistently (seeded, so a
//! failure reproduces).

use bytes::BytesMut;
use model::redis::resp::encode_command;
use model::redis::{Outcome, RedisServer, Reply, RequestParser, ServerConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const NAMES: &[&str] = &[
    "get",
    "set",
    "setnx",
    "setex",
    "psetex",
    "getset",
    "getdel",
    "incr",
    "decr",
    "incrby",
    "decrby",
    "mget",
    "append",
    "strlen",
    "del",
    "unlink",
    "exists",
    "type",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "persist",
    "dbsize",
    "flushdb",
    "flushall",
    "select",
    "hset",
    "hget",
    "hgetall",
    "hincrby",
    "hexists",
    "hdel",
    "hlen",
    "lpush",
    "rpush",
    "lpop",
    "rpop",
    "lindex",
    "lrange",
    "lrem",
    "llen",
    "zadd",
    "zscore",
    "zrem",
    "zrange",
    "zrangebyscore",
    "zcard",
    "zincrby",
    "publish",
    "subscribe",
    "unsubscribe",
    "ping",
    "echo",
    "info",
    "role",
    "time",
    "wait",
    "eval",
    "evalsha",
    "script",
    "nosuch",
];

const ARGS: &[&str] = &[
    "k",
    "k2",
    "h",
    "l",
    "z",
    "0",
    "1",
    "-1",
    "2",
    "100",
    "-100",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "1.5",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "(1",
    "(",
    "-",
    "+",
    "[a",
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "KEEPTTL",
    "GET",
    "WITHSCORES",
    "LIMIT",
    "BYSCORE",
    "BYLEX",
    "REV",
    "load",
    "exists",
    "flush",
    "kill",
    "sync",
    "async",
    "replication",
    "",
    "\0",
    "x\r\ny",
    "return 1",
    "return redis.call('get', KEYS[1])",
    "return redis.call(ARGV[1], KEYS[1])",
    "return redis.pcall('set', KEYS[1], ARGV[1], 'px', ARGV[2])",
    "return {ok=ARGV[1]}",
    "return {err=ARGV[1]}",
    "error(ARGV[1])",
    "return redis.error_reply(ARGV[1])",
    "return math.random(ARGV[1])",
    "while false do end",
    "return (",
    "local t = {} for i=1,10 do t[i] = redis.call('incr', KEYS[1]) end return t",
];

fn random_argv(rng: &mut ChaCha8Rng) -> Vec<Vec<u8>> {
    let mut argv = vec![NAMES[rng.gen_range(0..NAMES.len())].as_bytes().to_vec()];
    for _ in 0..rng.gen_range(0..7) {
        if rng.gen_bool(0.1) {
            let len = rng.gen_range(0..12);
            argv.push((0..len).map(|_| rng.r#gen::<u8>()).collect());
        } else {
            argv.push(ARGS[rng.gen_range(0..ARGS.len())].as_bytes().to_vec());
        }
    }
    argv
}

fn mutate(rng: &mut ChaCha8Rng, bytes: &mut Vec<u8>) {
    for _ in 0..rng.gen_range(1..4) {
        if bytes.is_empty() {
            bytes.push(rng.r#gen());
            continue;
        }
        let i = rng.gen_range(0..bytes.len());
        match rng.gen_range(0..5) {
            0 => bytes[i] ^= 1 << rng.gen_range(0..8),
            1 => bytes.truncate(i),
            2 => bytes.insert(
                i,
                *b"*$\r\n-0123456789\" '\\"
                    .get(rng.gen_range(0..19))
                    .unwrap(),
            ),
            3 => {
                bytes.remove(i);
            }
            _ => bytes[i] = rng.r#gen(),
        }
    }
}

/// Feeds `input` in random-sized chunks, executing every parsed command; returns whether a
/// protocol error closed the connection.
fn drive(server: &mut RedisServer, rng: &mut ChaCha8Rng, input: &[u8], now: i64) -> bool {
    let client = server.connect();
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut pos = 0;
    let mut closed = false;
    while pos < input.len() && !closed {
        let step = rng.gen_range(1..=input.len() - pos);
        buf.extend_from_slice(&input[pos..pos + step]);
        pos += step;
        loop {
            let before = buf.len();
            match parser.parse(&mut buf) {
                Ok(Some(argv)) => {
                    assert!(!argv.is_empty(), "the parser never yields an empty command");
                    assert!(buf.len() < before, "a parsed command consumes input");
                    match server.execute(client, now, &argv) {
                        Outcome::Reply(r) => {
                            let bytes = r.encode();
                            assert!(!bytes.is_empty());
                        }
                        Outcome::Close(r) => assert!(!r.encode().is_empty()),
                        Outcome::Wait { timeout_ms, .. } => assert!(timeout_ms >= 0),
                        Outcome::Blocked => {}
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    assert!(e.0.starts_with(b"Protocol error: "), "{e}");
                    closed = true;
                    break;
                }
            }
        }
    }
    server.disconnect(client);
    server.take_pushes();
    server.take_propagated();
    closed
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0001);
    let mut server = RedisServer::new(ServerConfig {
        seed: 1,
        ..ServerConfig::default()
    });
    for case in 0..3000 {
        let len = rng.gen_range(0..200);
        let input: Vec<u8> = (0..len)
            .map(|_| {
                if rng.gen_bool(0.3) {
                    b"*$\r\n0123456789"[rng.gen_range(0..14)]
                } else {
                    rng.r#gen()
                }
            })
            .collect();
        drive(&mut server, &mut rng, &input, 1_700_000_000_000 + case);
    }
}

#[test]
fn mutated_commands_never_panic() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0002);
    let mut server = RedisServer::new(ServerConfig {
        seed: 2,
        ..ServerConfig::default()
    });
    let mut closed = 0;
    for case in 0..5000 {
        let mut input = Vec::new();
        for _ in 0..rng.gen_range(1..5) {
            let argv = random_argv(&mut rng);
            if rng.gen_bool(0.2) {
                let line: Vec<String> = argv
                    .iter()
                    .map(|a| format!("{:?}", String::from_utf8_lossy(a)))
                    .collect();
                input.extend_from_slice(line.join(" ").as_bytes());
                input.extend_from_slice(b"\r\n");
            } else {
                input.extend_from_slice(&encode_command(&argv));
            }
        }
        if rng.gen_bool(0.5) {
            mutate(&mut rng, &mut input);
        }
        if drive(&mut server, &mut rng, &input, 1_700_000_000_000 + case * 7) {
            closed += 1;
        }
        if case % 500 == 0 {
            server.active_expire_cycle(1_700_000_000_000 + case * 7);
        }
    }
    assert!(closed > 0, "some mutations must hit protocol errors");
}

#[test]
fn valid_commands_round_trip_through_the_parser() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0003);
    for _ in 0..2000 {
        let argv = random_argv(&mut rng);
        let bytes = encode_command(&argv);
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut got = None;
        for chunk in bytes.chunks(rng.gen_range(1..8)) {
            buf.extend_from_slice(chunk);
            if let Some(parsed) = parser.parse(&mut buf).unwrap() {
                got = Some(parsed);
            }
        }
        assert_eq!(got.as_ref(), Some(&argv));
        assert!(buf.is_empty());
    }
}

#[test]
fn dispatcher_handles_random_argv() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0004);
    let mut server = RedisServer::new(ServerConfig::default());
    let client = server.connect();
    for i in 0..5000 {
        let argv = random_argv(&mut rng);
        if let Outcome::Reply(Reply::Error(e)) =
            server.execute(client, 1_700_000_000_000 + i, &argv)
        {
            assert!(
                !e.contains(&b'\n') && !e.contains(&b'\r'),
                "error replies are one line: {e:?}"
            );
        }
        if argv[0] == b"subscribe" {
            server.execute(client, 0, &[b"unsubscribe".to_vec()]);
        }
    }
}
