//! Differential conformance test: the corpus in `tests/conformance/*.txt` runs against a real
//! `redis-server` (7.0, Debian package) and against `RedisServer` (through `RequestParser`,
//! `execute` and `Reply::encode_with`); replies must be byte-identical. Every file runs twice:
//! in RESP2, and in RESP3 (every connection, on both sides, starts with `HELLO 3`).
//!
//! Corpus format: one command per line, arguments quoted like redis-cli (`sdssplitargs`).
//! `#` starts a comment line. Directives:
//! - `@script NAME` ... `@end`: a multi-line Lua body; `{{NAME}}` in an argument is replaced by
//!   it, `{{SHA:NAME}}` by its sha1.
//! - `{{NOW}}`, `{{NOW+N}}` / `{{NOW-N}}` (ms) and `{{NOWS+N}}` (seconds) in arguments: the wall
//!   clock when the command is sent (the same value goes to both servers).
//! - `@client N`: send the following commands on connection N (created on first use).
//! - `@sleep MS`: let real time pass (the model runs on the same wall clock).
//! - `@range LO HI <cmd>`: both replies must be integers in [LO, HI] (timing-dependent values).
//! - `@info <cmd>`: both replies are INFO texts with the same field names in the same order.
//! - `@inline <text>`: send `<text>\r\n` as an inline command.
//! - `@raw <bytes>`: send raw bytes (`\r`, `\n`, `\xHH` escapes) on a fresh connection and
//!   compare everything received until the server closes it or goes quiet.
//! - `@pushes N`: compare the messages pending for connection N (PUBLISH deliveries).
//! - `@known-diff <cmd>`: a documented difference (docs/redis.md): both run, not compared.
//! - `@send <cmd>`: send without waiting for a reply (a blocking command); `@pushes N` later
//!   compares what connection N received meanwhile (the model's expired blocks are answered
//!   first).
//! - `@sorted <cmd>`: compare with the elements of every array sorted (Redis answers in hash
//!   order: KEYS, SCAN).
//! - `@ids <cmd>`: compare with client ids masked (HELLO's `id`, CLIENT ID).
//! - `@fields <cmd>`: compare the `name=` fields of every line (CLIENT INFO / LIST).
//! - `@monitor N`: as `@pushes N` for a MONITOR connection: its lines compared byte for byte
//!   with each timestamp (`seconds.micros`, checked for that shape) masked. Every model
//!   connection has its real twin's address, so the `[db ip:port]` parts compare too.
//!
//! Fails if `redis-server` cannot be started, unless `LOCKSIM_SKIP_REDIS=1`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use model::redis::resp::encode_command;
use model::redis::{
    ClientAddr, ClientId, Outcome, Protocol, RedisServer, Reply, RequestParser, ServerConfig,
};

/// A `redis-server` child process, killed when dropped (also on panic).
struct RedisProcess {
    child: Child,
    port: u16,
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pseudo_random(salt: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut x =
        nanos ^ (u64::from(std::process::id()) << 32) ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

fn start_redis() -> Result<RedisProcess, String> {
    let mut last_error = String::new();
    for attempt in 0..20 {
        let port = 20_000 + (pseudo_random(attempt) % 40_000) as u16;
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--daemonize", "no", "--logfile", ""])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run redis-server: {e}"))?;
        let mut process = RedisProcess { child, port };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = process.child.try_wait() {
                last_error = format!("redis-server exited with {status} (port {port} taken?)");
                break;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(process);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Err(last_error)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Number of complete top-level RESP frames in `buf`.
fn count_frames(mut buf: &[u8]) -> usize {
    let mut n = 0;
    while let Ok(Some((_, used))) = Reply::decode_resp3(buf) {
        n += 1;
        buf = &buf[used..];
    }
    n
}

/// The real server: one TCP connection per corpus client.
struct RealSide {
    port: u16,
    conns: BTreeMap<usize, TcpStream>,
    protocol: Protocol,
}

/// Reads one complete reply (what `HELLO 3` answers) and drops it.
fn skip_one_reply(s: &mut TcpStream) {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while count_frames(&got) < 1 {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(_) => continue,
        }
    }
}

impl RealSide {
    fn open(&self) -> TcpStream {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to redis-server");
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        if self.protocol == Protocol::Resp3 {
            s.write_all(&encode_command(&[b"HELLO".to_vec(), b"3".to_vec()]))
                .unwrap();
            skip_one_reply(&mut s);
        }
        s
    }

    /// The address the server sees for connection `client` (`ip:port`).
    fn peer(&mut self, client: usize) -> String {
        self.conn(client)
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default()
    }

    fn conn(&mut self, client: usize) -> &mut TcpStream {
        if !self.conns.contains_key(&client) {
            let s = self.open();
            self.conns.insert(client, s);
        }
        self.conns.get_mut(&client).expect("opened above")
    }

    /// Sends and reads until `frames` replies arrived (or 5 s passed).
    fn roundtrip(&mut self, client: usize, bytes: &[u8], frames: usize) -> Vec<u8> {
        let conn = self.conn(client);
        if conn.write_all(bytes).is_err() {
            return b"<closed>".to_vec();
        }
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut chunk = [0u8; 65536];
        while count_frames(&out) < frames && Instant::now() < deadline {
            match conn.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(_) => continue,
            }
        }
        out
    }

    /// Whatever arrives within a short quiet period.
    fn drain(&mut self, client: usize, quiet: Duration) -> Vec<u8> {
        let conn = self.conn(client);
        conn.set_read_timeout(Some(quiet)).unwrap();
        let mut out = Vec::new();
        let mut chunk = [0u8; 65536];
        while let Ok(n) = conn.read(&mut chunk) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&chunk[..n]);
        }
        conn.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        out
    }

    /// Raw bytes on a fresh connection: everything until close or 300 ms of silence.
    fn raw(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut s = self.open();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        s.write_all(bytes).unwrap();
        let mut out = Vec::new();
        let mut chunk = [0u8; 65536];
        while let Ok(n) = s.read(&mut chunk) {
            if n == 0 {
                out.extend_from_slice(b"<closed>");
                break;
            }
            out.extend_from_slice(&chunk[..n]);
        }
        let _ = s.shutdown(Shutdown::Both);
        out
    }
}

/// The model, hosted like a connection-per-client server.
struct ModelSide {
    server: RedisServer,
    conns: BTreeMap<usize, (ClientId, RequestParser, BytesMut)>,
    pushes: BTreeMap<ClientId, Vec<u8>>,
    protocol: Protocol,
}

impl ModelSide {
    /// A new connection, switched to RESP3 in that pass.
    fn open(&mut self) -> ClientId {
        self.open_as(None)
    }

    /// A new connection with the real twin's address (`peer`), if known.
    fn open_as(&mut self, peer: Option<String>) -> ClientId {
        let id = match peer {
            Some(peer) => self.server.connect_from(
                ClientAddr {
                    peer,
                    ..ClientAddr::default()
                },
                now_ms(),
            ),
            None => self.server.connect(),
        };
        if self.protocol == Protocol::Resp3 {
            self.server
                .execute(id, now_ms(), &[b"HELLO".to_vec(), b"3".to_vec()]);
        }
        id
    }

    /// Opens connection `client` as the real side's twin (same address), once.
    fn open_twin(&mut self, client: usize, real: &mut RealSide) {
        if !self.conns.contains_key(&client) {
            let id = self.open_as(Some(real.peer(client)));
            self.conns
                .insert(client, (id, RequestParser::new(), BytesMut::new()));
        }
    }

    fn client(&mut self, client: usize) -> ClientId {
        if !self.conns.contains_key(&client) {
            let id = self.open();
            self.conns
                .insert(client, (id, RequestParser::new(), BytesMut::new()));
        }
        self.conns[&client].0
    }

    /// Feeds bytes to a connection; returns the replies and whether the connection was closed.
    fn feed(
        server: &mut RedisServer,
        conn: &mut (ClientId, RequestParser, BytesMut),
        bytes: &[u8],
    ) -> (Vec<u8>, bool) {
        let (id, parser, buf) = conn;
        buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            match parser.parse(buf) {
                Ok(Some(argv)) => {
                    let outcome = server.execute(*id, now_ms(), &argv);
                    let protocol = server.protocol(*id);
                    match outcome {
                        Outcome::Reply(r) => r.encode_with(protocol, &mut out),
                        Outcome::Wait { .. } => Reply::Integer(0).encode_with(protocol, &mut out),
                        Outcome::Blocked => {}
                        Outcome::Close(r) => {
                            r.encode_with(protocol, &mut out);
                            return (out, true);
                        }
                    }
                }
                Ok(None) => return (out, false),
                Err(e) => {
                    e.reply().encode_with(server.protocol(*id), &mut out);
                    return (out, true);
                }
            }
        }
    }

    fn send(&mut self, client: usize, bytes: &[u8]) -> Vec<u8> {
        self.client(client);
        let conn = self.conns.get_mut(&client).unwrap();
        let (out, _) = Self::feed(&mut self.server, conn, bytes);
        self.collect_pushes();
        out
    }

    fn raw(&mut self, bytes: &[u8]) -> Vec<u8> {
        let id = self.open();
        let mut conn = (id, RequestParser::new(), BytesMut::new());
        let (mut out, closed) = Self::feed(&mut self.server, &mut conn, bytes);
        self.server.disconnect(id);
        if closed {
            out.extend_from_slice(b"<closed>");
        }
        out
    }

    /// Pub/sub messages, MONITOR lines and the replies of unblocked clients (and of the
    /// commands a CLIENT PAUSE held), per connection.
    fn collect_pushes(&mut self) {
        let mut pending = self.server.take_pushes();
        pending.extend(self.server.take_unblocked());
        for (client, argv) in self.server.take_resumed() {
            if let Some(reply) = self.server.execute(client, now_ms(), &argv).into_reply() {
                pending.extend(self.server.take_pushes());
                pending.push((client, reply));
            }
        }
        for (client, reply) in pending {
            let protocol = self.server.protocol(client);
            reply.encode_with(protocol, self.pushes.entry(client).or_default());
        }
    }

    fn take_pushes(&mut self, client: usize) -> Vec<u8> {
        let id = self.client(client);
        self.server.expire_blocked(now_ms());
        // serverCron: a CLIENT PAUSE whose time is up ends here.
        self.server.active_expire_cycle(now_ms());
        self.collect_pushes();
        self.pushes.remove(&id).unwrap_or_default()
    }
}

fn unescape(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b'r' => out.push(b'\r'),
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'\\' => out.push(b'\\'),
                b'x' if i + 3 < b.len() => {
                    out.push(u8::from_str_radix(&text[i + 2..i + 4], 16).unwrap());
                    i += 2;
                }
                other => out.push(other),
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn sha1_hex(body: &[u8]) -> String {
    model::redis::lua::sha1_hex(body)
}

fn substitute(arg: &[u8], scripts: &BTreeMap<String, Vec<u8>>, now: i64) -> Vec<u8> {
    let text = String::from_utf8_lossy(arg);
    if !text.contains("{{") {
        return arg.to_vec();
    }
    let mut out = Vec::new();
    let mut rest: &str = &text;
    while let Some(start) = rest.find("{{") {
        out.extend_from_slice(&rest.as_bytes()[..start]);
        let end = rest[start..].find("}}").expect("unclosed {{") + start;
        let name = &rest[start + 2..end];
        let value: Vec<u8> = if let Some(script) = name.strip_prefix("SHA:") {
            sha1_hex(&scripts[script]).into_bytes()
        } else if let Some(delta) = name.strip_prefix("NOWS") {
            (now / 1000 + delta.parse::<i64>().unwrap_or(0))
                .to_string()
                .into_bytes()
        } else if let Some(delta) = name.strip_prefix("NOW") {
            (now + delta.parse::<i64>().unwrap_or(0))
                .to_string()
                .into_bytes()
        } else {
            scripts
                .get(name)
                .unwrap_or_else(|| panic!("unknown script {name}"))
                .clone()
        };
        out.extend_from_slice(&value);
        rest = &rest[end + 2..];
    }
    out.extend_from_slice(rest.as_bytes());
    out
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .replace('\r', "\\r")
        .replace('\n', "\\n")
}

fn info_fields(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .split("\r\n")
        .skip(1)
        .filter_map(|l| l.split(':').next().map(str::to_string))
        .collect()
}

fn integer(bytes: &[u8]) -> Option<i64> {
    match Reply::decode_resp3(bytes) {
        Ok(Some((Reply::Integer(i), _))) => Some(i),
        _ => None,
    }
}

/// Every reply in `bytes`, decoded.
fn decode_all(mut bytes: &[u8]) -> Vec<Reply> {
    let mut out = Vec::new();
    while let Ok(Some((reply, used))) = Reply::decode_resp3(bytes) {
        out.push(reply);
        bytes = &bytes[used..];
    }
    out
}

/// `@monitor`: each `+seconds.micros ` timestamp replaced by `+T `, or `None` when a line does
/// not start with one.
fn masked_timestamps(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    for line in text.split_inclusive("\r\n") {
        let Some(rest) = line.strip_prefix('+') else {
            out.push_str(line);
            continue;
        };
        let (stamp, rest) = rest.split_once(' ')?;
        let (secs, micros) = stamp.split_once('.')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(secs) || micros.len() != 6 || !digits(micros) {
            return None;
        }
        out.push_str("+T ");
        out.push_str(rest);
    }
    Some(out)
}

/// `@sorted`: the elements of every array (and set) in sorted order.
fn sorted(reply: Reply) -> Reply {
    match reply {
        Reply::Array(items) | Reply::Set(items) => {
            let mut items: Vec<Reply> = items.into_iter().map(sorted).collect();
            items.sort_by_key(|r| format!("{r:?}"));
            Reply::Array(items)
        }
        Reply::Map(pairs) => {
            let mut pairs: Vec<(Reply, Reply)> = pairs
                .into_iter()
                .map(|(k, v)| (sorted(k), sorted(v)))
                .collect();
            pairs.sort_by_key(|(k, _)| format!("{k:?}"));
            Reply::Map(pairs)
        }
        other => other,
    }
}

/// `@ids`: client ids replaced by 0 (a bare integer, or the value of an `id` map key).
fn masked_ids(reply: Reply) -> Reply {
    match reply {
        Reply::Integer(_) => Reply::Integer(0),
        Reply::Map(pairs) => {
            // The decoder's map is unordered: compare pairs sorted (their order is checked
            // byte for byte everywhere else).
            let mut pairs: Vec<(Reply, Reply)> = pairs
                .into_iter()
                .map(|(k, v)| match (&k, v) {
                    (Reply::Bulk(name), Reply::Integer(_)) if name == b"id" => {
                        (k, Reply::Integer(0))
                    }
                    (_, v) => (k, v),
                })
                .collect();
            pairs.sort_by_key(|(k, _)| format!("{k:?}"));
            Reply::Map(pairs)
        }
        Reply::Array(items) => {
            // RESP2 flattens maps: an `id` bulk followed by an integer.
            let mut out = Vec::with_capacity(items.len());
            let mut after_id = false;
            for item in items {
                let item = match item {
                    Reply::Integer(_) if after_id => Reply::Integer(0),
                    other => other,
                };
                after_id = item == Reply::Bulk(b"id".to_vec());
                out.push(item);
            }
            Reply::Array(out)
        }
        other => other,
    }
}

/// `@fields`: the `name=` field names of each line of CLIENT INFO / LIST.
fn client_fields(bytes: &[u8]) -> Vec<Vec<String>> {
    decode_all(bytes)
        .iter()
        .map(|r| match r {
            Reply::Bulk(t) | Reply::Verbatim { text: t, .. } => String::from_utf8_lossy(t)
                .lines()
                .map(|l| {
                    l.split(' ')
                        .map(|f| f.split('=').next().unwrap_or("").to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect(),
            other => vec![format!("{other:?}")],
        })
        .collect()
}

struct Outcomes {
    compared: usize,
    known_diffs: usize,
    failures: Vec<String>,
}

fn run_corpus(
    name: &str,
    text: &str,
    real: &mut RealSide,
    model: &mut ModelSide,
    out: &mut Outcomes,
) {
    let mut scripts: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut client = 0usize;
    model.open_twin(client, real);
    let mut lines = text.lines().enumerate();
    while let Some((lineno, line)) = lines.next() {
        let line = line.trim_end();
        let place = format!("{name}:{}", lineno + 1);
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if let Some(script) = line.strip_prefix("@script ") {
            let mut body = Vec::new();
            for (_, l) in lines.by_ref() {
                if l.trim_end() == "@end" {
                    break;
                }
                body.push(l);
            }
            scripts.insert(script.trim().to_string(), body.join("\n").into_bytes());
            continue;
        }
        if let Some(ms) = line.strip_prefix("@sleep ") {
            std::thread::sleep(Duration::from_millis(ms.trim().parse().unwrap()));
            continue;
        }
        if let Some(n) = line.strip_prefix("@client ") {
            client = n.trim().parse().unwrap();
            model.open_twin(client, real);
            continue;
        }
        let pushes = line
            .strip_prefix("@pushes ")
            .map(|n| (n, false))
            .or_else(|| line.strip_prefix("@monitor ").map(|n| (n, true)));
        if let Some((n, monitor)) = pushes {
            let n: usize = n.trim().parse().unwrap();
            model.open_twin(n, real);
            let mine = model.take_pushes(n);
            let theirs = real.drain(n, Duration::from_millis(100));
            out.compared += 1;
            let same = if monitor {
                let masked = masked_timestamps(&mine);
                masked.is_some() && masked == masked_timestamps(&theirs)
            } else {
                mine == theirs
            };
            if !same {
                out.failures.push(format!(
                    "{place}: {line}\n  redis: {}\n  model: {}",
                    show(&theirs),
                    show(&mine)
                ));
            }
            continue;
        }
        if let Some(raw) = line.strip_prefix("@raw ") {
            let bytes = unescape(raw);
            let theirs = real.raw(&bytes);
            let mine = model.raw(&bytes);
            out.compared += 1;
            if mine != theirs {
                out.failures.push(format!(
                    "{place}: {line}\n  redis: {}\n  model: {}",
                    show(&theirs),
                    show(&mine)
                ));
            }
            continue;
        }
        let (mode, command) = match line.split_once(' ') {
            Some((
                m
                @ ("@known-diff" | "@info" | "@inline" | "@send" | "@sorted" | "@ids" | "@fields"),
                rest,
            )) => (m, rest.to_string()),
            Some(("@range", rest)) => {
                let mut parts = rest.splitn(3, ' ');
                let lo = parts.next().unwrap();
                let hi = parts.next().unwrap();
                ("@range", format!("{lo} {hi} {}", parts.next().unwrap()))
            }
            _ => ("", line.to_string()),
        };
        let (bounds, command) = if mode == "@range" {
            let mut parts = command.splitn(3, ' ');
            let lo: i64 = parts.next().unwrap().parse().unwrap();
            let hi: i64 = parts.next().unwrap().parse().unwrap();
            (Some((lo, hi)), parts.next().unwrap().to_string())
        } else {
            (None, command)
        };
        let bytes = if mode == "@inline" {
            let mut b = command.clone().into_bytes();
            b.extend_from_slice(b"\r\n");
            b
        } else {
            let argv = model::redis::resp::split_args(command.as_bytes())
                .unwrap_or_else(|| panic!("{place}: unbalanced quotes"));
            let now = now_ms();
            let argv: Vec<Vec<u8>> = argv.iter().map(|a| substitute(a, &scripts, now)).collect();
            encode_command(&argv)
        };
        if mode == "@send" {
            model.send(client, &bytes);
            let _ = real.conn(client).write_all(&bytes);
            continue;
        }
        let mine = model.send(client, &bytes);
        let theirs = real.roundtrip(client, &bytes, count_frames(&mine).max(1));
        let ok = match mode {
            "@known-diff" => {
                out.known_diffs += 1;
                println!(
                    "known difference at {place}: {command}\n  redis: {}\n  model: {}",
                    show(&theirs),
                    show(&mine)
                );
                continue;
            }
            "@info" => info_fields(&mine) == info_fields(&theirs),
            "@sorted" => {
                let norm =
                    |b: &[u8]| -> Vec<Reply> { decode_all(b).into_iter().map(sorted).collect() };
                norm(&mine) == norm(&theirs)
            }
            "@ids" => {
                let norm = |b: &[u8]| -> Vec<Reply> {
                    decode_all(b).into_iter().map(masked_ids).collect()
                };
                norm(&mine) == norm(&theirs)
            }
            "@fields" => client_fields(&mine) == client_fields(&theirs),
            "@range" => {
                let (lo, hi) = bounds.unwrap();
                let inside = |b: &[u8]| integer(b).is_some_and(|i| (lo..=hi).contains(&i));
                inside(&mine) && inside(&theirs)
            }
            _ => mine == theirs,
        };
        out.compared += 1;
        if !ok {
            out.failures.push(format!(
                "{place}: {line}\n  redis: {}\n  model: {}",
                show(&theirs),
                show(&mine)
            ));
        }
    }
}

#[test]
fn corpus_matches_real_redis() {
    if let Err(e) = start_redis() {
        if std::env::var("LOCKSIM_SKIP_REDIS").as_deref() == Ok("1") {
            eprintln!("\n!!! LOCKSIM_SKIP_REDIS=1: conformance test SKIPPED ({e}) !!!\n");
            return;
        }
        panic!(
            "redis-server could not be started ({e}); install it (apt-get install redis-server) or set LOCKSIM_SKIP_REDIS=1"
        );
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "txt"));
    files.sort();
    let mut outcomes = Outcomes {
        compared: 0,
        known_diffs: 0,
        failures: Vec::new(),
    };
    let mut per_protocol: BTreeMap<String, usize> = BTreeMap::new();
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            let name = format!(
                "{} ({protocol:?})",
                file.file_name().unwrap().to_string_lossy()
            );
            // A fresh redis-server per file: Lua's math.random stream starts over, like the
            // model's.
            let redis = start_redis().expect("redis-server");
            let mut real = RealSide {
                port: redis.port,
                conns: BTreeMap::new(),
                protocol,
            };
            let mut model = ModelSide {
                server: RedisServer::new(ServerConfig::default()),
                conns: BTreeMap::new(),
                pushes: BTreeMap::new(),
                protocol,
            };
            let before = outcomes.compared;
            run_corpus(&name, &text, &mut real, &mut model, &mut outcomes);
            *per_protocol.entry(format!("{protocol:?}")).or_insert(0) += outcomes.compared - before;
        }
    }
    println!(
        "conformance: {} commands compared ({}), {} known differences, {} mismatches",
        outcomes.compared,
        per_protocol
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        outcomes.known_diffs,
        outcomes.failures.len()
    );
    assert!(
        outcomes.compared >= 400,
        "the corpus must hold at least 400 compared commands"
    );
    assert!(
        outcomes.failures.is_empty(),
        "mismatches:\n{}",
        outcomes.failures.join("\n")
    );
}
