//! `locksim serve`: the simulated Redis (`model::redis::RedisServer`) behind a real
//! `std::net::TcpListener`, on the real clock, for redis-cli, client libraries and benchmarks.
//!
//! Plain threads, no madsim: one thread owns the server (its Lua state is `!Send`) and runs
//! active expiry every 100 ms; each connection has a reader thread (RESP parsing) and a writer
//! thread, talking to the server thread over channels. A protocol error gets `-ERR Protocol
//! error: ...` and closes that connection only. WAIT is answered as a master without replicas
//! does: at once when no acknowledgement is needed, otherwise 0 after the timeout.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use model::redis::{ClientId, Outcome, RedisServer, Reply, RequestParser, ServerConfig};

/// Active expiry period (hz 10).
const EXPIRE_PERIOD: Duration = Duration::from_millis(100);

/// What a connection writer sends: bytes, or the end of the connection.
enum Out {
    Bytes(Vec<u8>),
    Close,
}

/// Messages to the server thread.
enum ToServer {
    Connect {
        out: Sender<Out>,
        id: Sender<ClientId>,
    },
    Command {
        client: ClientId,
        argv: Vec<Vec<u8>>,
    },
    ProtocolError {
        client: ClientId,
        reply: Reply,
    },
    Disconnect {
        client: ClientId,
    },
}

/// Serves forever on an already bound listener.
pub fn serve_listener(listener: TcpListener) -> io::Result<()> {
    let (to_server, inbox) = mpsc::channel();
    thread::Builder::new()
        .name("redis-server".into())
        .spawn(move || server_loop(inbox))?;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let to_server = to_server.clone();
        thread::Builder::new()
            .name("redis-conn".into())
            .spawn(move || connection(stream, to_server))?;
    }
    Ok(())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A client connection: a writer thread drains `Out`, this thread reads and parses.
fn connection(stream: TcpStream, to_server: Sender<ToServer>) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let (out_tx, out_rx) = mpsc::channel::<Out>();
    let (id_tx, id_rx) = mpsc::channel();
    if to_server
        .send(ToServer::Connect {
            out: out_tx,
            id: id_tx,
        })
        .is_err()
    {
        return;
    }
    let Ok(client) = id_rx.recv() else { return };
    let writer_thread = thread::spawn(move || {
        for msg in out_rx {
            match msg {
                Out::Bytes(bytes) => {
                    if writer.write_all(&bytes).is_err() {
                        break;
                    }
                }
                Out::Close => break,
            }
        }
        let _ = writer.shutdown(Shutdown::Both);
    });
    read_requests(stream, client, &to_server);
    let _ = to_server.send(ToServer::Disconnect { client });
    let _ = writer_thread.join();
}

fn read_requests(mut stream: TcpStream, client: ClientId, to_server: &Sender<ToServer>) {
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        loop {
            match parser.parse(&mut buf) {
                Ok(Some(argv)) => {
                    if to_server.send(ToServer::Command { client, argv }).is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = to_server.send(ToServer::ProtocolError {
                        client,
                        reply: e.reply(),
                    });
                    return;
                }
            }
        }
    }
}

/// A connected client as the server thread sees it.
struct Conn {
    out: Sender<Out>,
    /// Set while a WAIT blocks the client: when it answers. `None` = forever.
    blocked_until: Option<Option<Instant>>,
    /// Commands that arrived while blocked, run in order once unblocked.
    queued: VecDeque<Vec<Vec<u8>>>,
}

fn server_loop(inbox: Receiver<ToServer>) {
    let mut server = RedisServer::new(ServerConfig {
        seed: now_ms() as u64,
        ..ServerConfig::default()
    });
    let mut conns: BTreeMap<ClientId, Conn> = BTreeMap::new();
    let mut next_expire = Instant::now() + EXPIRE_PERIOD;
    loop {
        let wake = conns
            .values()
            .filter_map(|c| c.blocked_until.flatten())
            .fold(next_expire, Instant::min);
        let msg = inbox.recv_timeout(wake.saturating_duration_since(Instant::now()));
        match msg {
            Ok(ToServer::Connect { out, id }) => {
                let client = server.connect();
                conns.insert(
                    client,
                    Conn {
                        out,
                        blocked_until: None,
                        queued: VecDeque::new(),
                    },
                );
                let _ = id.send(client);
            }
            Ok(ToServer::Command { client, argv }) => {
                if let Some(conn) = conns.get_mut(&client) {
                    if conn.blocked_until.is_some() {
                        conn.queued.push_back(argv);
                    } else {
                        run(&mut server, &mut conns, client, &argv);
                    }
                }
            }
            Ok(ToServer::ProtocolError { client, reply }) => {
                if let Some(conn) = conns.get(&client) {
                    let _ = conn.out.send(Out::Bytes(reply.encode()));
                    let _ = conn.out.send(Out::Close);
                }
            }
            Ok(ToServer::Disconnect { client }) => {
                if let Some(conn) = conns.remove(&client) {
                    let _ = conn.out.send(Out::Close);
                }
                server.disconnect(client);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = Instant::now();
        if now >= next_expire {
            server.active_expire_cycle(now_ms());
            server.take_propagated();
            next_expire = now + EXPIRE_PERIOD;
        }
        let expired: Vec<ClientId> = conns
            .iter()
            .filter(|(_, c)| c.blocked_until.flatten().is_some_and(|t| t <= now))
            .map(|(id, _)| *id)
            .collect();
        for client in expired {
            unblock(&mut server, &mut conns, client, Reply::Integer(0));
        }
    }
}

/// Runs one command and delivers its reply and any pubsub messages.
fn run(
    server: &mut RedisServer,
    conns: &mut BTreeMap<ClientId, Conn>,
    client: ClientId,
    argv: &[Vec<u8>],
) {
    let outcome = server.execute(client, now_ms(), argv);
    server.take_propagated();
    match outcome {
        Outcome::Reply(reply) | Outcome::Close(reply) => send(conns, client, &reply),
        Outcome::Blocked => {}
        Outcome::Wait {
            numreplicas,
            timeout_ms,
        } => {
            if numreplicas <= 0 {
                send(conns, client, &Reply::Integer(0));
            } else if let Some(conn) = conns.get_mut(&client) {
                let deadline = (timeout_ms > 0)
                    .then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
                conn.blocked_until = Some(deadline);
            }
        }
    }
    for (to, push) in server.take_pushes() {
        send(conns, to, &push);
    }
}

fn unblock(
    server: &mut RedisServer,
    conns: &mut BTreeMap<ClientId, Conn>,
    client: ClientId,
    reply: Reply,
) {
    let Some(conn) = conns.get_mut(&client) else {
        return;
    };
    conn.blocked_until = None;
    send(conns, client, &reply);
    while let Some(argv) = conns.get_mut(&client).and_then(|c| c.queued.pop_front()) {
        run(server, conns, client, &argv);
        if conns.get(&client).is_none_or(|c| c.blocked_until.is_some()) {
            break;
        }
    }
}

fn send(conns: &BTreeMap<ClientId, Conn>, client: ClientId, reply: &Reply) {
    if let Some(conn) = conns.get(&client) {
        let _ = conn.out.send(Out::Bytes(reply.encode()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> u16 {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || serve_listener(listener));
        port
    }

    fn connect(port: u16) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }

    /// Reads until `expected` bytes arrived (or EOF).
    fn read_n(s: &mut TcpStream, expected: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut chunk = [0u8; 4096];
        while out.len() < expected {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
            }
        }
        out
    }

    fn roundtrip(s: &mut TcpStream, request: &[u8], reply: &[u8]) {
        s.write_all(request).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&read_n(s, reply.len())),
            String::from_utf8_lossy(reply)
        );
    }

    #[test]
    fn malformed_input_closes_only_that_connection() {
        let port = start();
        let mut good = connect(port);
        let mut bad = connect(port);
        roundtrip(&mut good, b"SET k v PX 100000\r\n", b"+OK\r\n");
        bad.write_all(b"*1\r\nx\r\n").unwrap();
        let mut got = Vec::new();
        bad.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"-ERR Protocol error: expected '$', got 'x'\r\n");
        roundtrip(&mut good, b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n");
        roundtrip(&mut good, b"GET k\r\n", b"$1\r\nv\r\n");
    }

    #[test]
    fn pipelining_pubsub_wait_and_expiry() {
        let port = start();
        let mut a = connect(port);
        let mut b = connect(port);
        roundtrip(
            &mut a,
            b"PING\r\nECHO hi\r\nWAIT 0 0\r\n",
            b"+PONG\r\n$2\r\nhi\r\n:0\r\n",
        );
        roundtrip(
            &mut b,
            b"SUBSCRIBE ch\r\n",
            b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
        );
        roundtrip(&mut a, b"PUBLISH ch msg\r\n", b":1\r\n");
        assert_eq!(
            read_n(&mut b, 32),
            b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\nmsg\r\n"
        );
        let started = Instant::now();
        roundtrip(&mut a, b"WAIT 1 200\r\nPING\r\n", b":0\r\n+PONG\r\n");
        assert!(started.elapsed() >= Duration::from_millis(200));
        roundtrip(&mut a, b"SET e v PX 50\r\nDBSIZE\r\n", b"+OK\r\n:1\r\n");
        thread::sleep(Duration::from_millis(400));
        roundtrip(&mut a, b"DBSIZE\r\n", b":0\r\n");
    }
}
