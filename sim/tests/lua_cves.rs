//! The Lua-side security fixes Redis shipped (`model/vendor/lua/README.md`, issue 31), at the
//! binary's level: each script below crashed `locksim serve` (SIGSEGV) or misbehaved before, and
//! the same scripts in a scenario's `script` scheme killed `locksim run` with exit 139. Each must
//! give Redis's answer both ways. The answers are Debian's redis-server 7.0.15 (1~deb12u6 and
//! later carry every fix), and the serve test checks them against the installed redis-server
//! when there is one. `model/tests/conformance/21-lua-security.txt` has many more cases of each.
//! The read-only library cases: the tables scripts share are proxies in locksim, which the
//! encoders used to see as empty (`cjson.encode(string)` gave `{}`; found by the differential
//! Lua fuzz); they must see the table behind, as in Redis.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{locksim, redis_server, serve, temp_dir};
use model::redis::Reply;
use model::redis::resp::encode_command;
use serde_json::{Value, json};

/// (what it exercises, a script returning a string, Redis's string)
const CASES: &[(&str, &str, &str)] = &[
    (
        "CVE-2024-31449: bit.tohex with INT_MIN digits",
        "return bit.tohex(65535, -2147483648)",
        "0000FFFF",
    ),
    (
        "CVE-2025-46817: unpack's count overflows",
        "return select(2, pcall(unpack, {}, -2, 2147483647))",
        "too many results to unpack",
    ),
    (
        "CVE-2025-46817: unpack from INT_MIN",
        "return select(2, pcall(unpack, {}, -2147483648, 2147483647))",
        "too many results to unpack",
    ),
    (
        "CVE-2025-49844: a collection in load's reader freed the chunk's name",
        "local n, keep = 0, {}
         local f, e = load(function()
           n = n + 1
           if n == 1 then return '' end
           if n == 2 then
             collectgarbage('collect')
             for i = 1, 5000 do keep[i] = string.format('%07d', i) end
             return '$'
           end
         end)
         return e",
        "(load):1: unexpected symbol near '$'",
    ),
    (
        "CVE-2025-46819: long brackets (a nested [[ is no longer an error)",
        "return [[a [[b]]",
        "a [[b",
    ),
    (
        "CVE-2015-4335: bytecode is parsed as source",
        "return select(2, loadstring(string.dump(function() return 7 end)))",
        "[string \"\x1bLuaQ\"]:1: unexpected symbol near 'char(27)'",
    ),
    (
        "CVE-2025-46818: the strings' metatable is read-only",
        "local changed = pcall(function()
           getmetatable('').__index = {upper = function() return 'pwned' end}
         end)
         return tostring(changed) .. ' ' .. ('abc'):upper()",
        "false ABC",
    ),
    (
        "noscript: SHUTDOWN is refused, not unknown",
        "local ok, e = pcall(redis.call, 'shutdown') return type(e) == 'table' and e.err or e",
        "ERR This Redis command is not allowed from script",
    ),
    (
        "noscript: DEBUG is refused, not unknown",
        "local ok, e = pcall(redis.call, 'debug', 'sleep', 0) return type(e) == 'table' and e.err or e",
        "ERR This Redis command is not allowed from script",
    ),
    (
        "read-only libraries: cjson.encode fails on the functions inside one",
        "return select(2, pcall(cjson.encode, {string}))",
        "Cannot serialise function: type not supported",
    ),
    (
        "read-only libraries: cjson.encode of math (numbers and functions)",
        "return select(2, pcall(cjson.encode, math))",
        "Cannot serialise function: type not supported",
    ),
    (
        "read-only libraries: cjson.encode of redis, nested",
        "return select(2, pcall(cjson.encode, {lib = redis}))",
        "Cannot serialise function: type not supported",
    ),
    (
        "read-only libraries: cjson.encode of the strings' metatable",
        "return select(2, pcall(cjson.encode, getmetatable('')))",
        "Cannot serialise function: type not supported",
    ),
    (
        "read-only libraries: cmsgpack.pack of string packs its functions as nil",
        "return (string.gsub(cmsgpack.pack(string), '.', function(c) return string.format('%02x', c:byte()) end))",
        "8fa3737562c0a57570706572c0a36c656ec0a56766696e64c0a3726570c0a466696e64c0a56d61746368c0a463686172c0a464756d70c0a6676d61746368c0a772657665727365c0a462797465c0a6666f726d6174c0a467737562c0a56c6f776572c0",
    ),
    (
        "read-only libraries: cmsgpack.pack of bit and struct, nested",
        "return (string.gsub(cmsgpack.pack({bit, struct}), '.', function(c) return string.format('%02x', c:byte()) end))",
        "928ca462616e64c0a6727368696674c0a3626f72c0a4626e6f74c0a56273776170c0a462786f72c0a5746f626974c0a3726f72c0a66c7368696674c0a5746f686578c0a3726f6cc0a761727368696674c083a47061636bc0a473697a65c0a6756e7061636bc0",
    ),
    (
        "read-only libraries: cmsgpack.pack of table",
        "return (string.gsub(cmsgpack.pack(table), '.', function(c) return string.format('%02x', c:byte()) end))",
        "89a47365746ec0a6696e73657274c0a46765746ec0a8666f726561636869c0a46d61786ec0a7666f7265616368c0a6636f6e636174c0a4736f7274c0a672656d6f7665c0",
    ),
];

fn connect(port: u16) -> TcpStream {
    let conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    conn
}

/// Sends one command and reads its whole reply (empty if the server closed the connection).
fn call(conn: &mut TcpStream, argv: &[&str]) -> Vec<u8> {
    conn.write_all(&encode_command(argv)).unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 65536];
    while !matches!(Reply::decode_resp3(&out), Ok(Some(_))) {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    out
}

fn bulk(text: &str) -> Vec<u8> {
    format!("${}\r\n{text}\r\n", text.len()).into_bytes()
}

#[test]
fn locksim_serve_answers_the_cve_scripts_as_redis_and_keeps_serving() {
    let server = serve(&[]);
    let redis = redis_server(&[]);
    let mut conn = connect(server.port);
    let mut other = connect(server.port);
    for (what, script, expected) in CASES {
        if let Some(redis) = &redis {
            let answer = call(&mut connect(redis.port), &["EVAL", script, "0"]);
            assert_eq!(
                String::from_utf8_lossy(&answer),
                String::from_utf8_lossy(&bulk(expected)),
                "redis-server: {what}"
            );
        }
        let answer = call(&mut conn, &["EVAL", script, "0"]);
        assert_eq!(
            String::from_utf8_lossy(&answer),
            String::from_utf8_lossy(&bulk(expected)),
            "locksim serve: {what}"
        );
        assert_eq!(call(&mut other, &["PING"]), b"+PONG\r\n", "after {what}");
    }
}

/// One client, one acquisition whose acquire script is `script`, successful when it returns
/// `expected`; the run must end normally (not by a signal) with the lock acquired.
fn run_script_scheme(name: &str, script: &str, expected: &str) {
    let dir = temp_dir(name);
    let scenario = json!({
        "name": name, "seed": 1, "duration_ms": 5000,
        "clients": { "count": 1, "acquisitions": 1, "acquire_timeout_ms": 1000 },
        "scheme": { "name": "script",
            "acquire": { "script": script, "args": [], "success": { "equals": expected } },
            "release": { "script": "return 1", "args": [], "success": { "equals": 1 } } }
    });
    let file = dir.join("scenario.json");
    std::fs::write(&file, scenario.to_string()).unwrap();
    let out = dir.join("out");
    let output = locksim(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{name}: locksim run: {} {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    let events: Vec<Value> = trace
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let acquired = events.iter().filter(|e| e["event"] == "acquired").count();
    assert_eq!(
        acquired, 1,
        "{name}: the script did not return {expected:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_cve_scripts_in_a_script_scheme_give_redis_answers_in_the_simulation() {
    for (i, (what, script, expected)) in CASES.iter().enumerate() {
        println!("{what}");
        run_script_scheme(&format!("lua-cve-{i}"), script, expected);
    }
}
