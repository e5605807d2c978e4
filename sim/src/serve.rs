//! `locksim serve`: the simulated Redis (`model::redis::RedisServer`) behind a real TCP port, on
//! the real clock, for redis-cli, client libraries and benchmarks.
//!
//! Outside the simulation: a tokio runtime (the real one; `--cfg madsim` only switches madsim's
//! own types) does the networking, one task per connection, so idle connections cost a few
//! kilobytes and no thread. Each read is parsed on the connection's task and sent as one batch to
//! the server thread (`serve_host.rs`), which answers with one buffer, written at once on a
//! `TCP_NODELAY` socket: pipelined commands cost one write per batch, as in Redis
//! (`networking.c` `writeToClient`). Like `redis-server`: `maxclients` (10000) is enforced with
//! its `-ERR max number of clients reached`, the open-files limit is raised for it
//! (`adjustOpenFilesLimit`), an `accept` failing for lack of descriptors waits instead of
//! spinning, and SIGINT/SIGTERM stop the server cleanly.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

use bytes::BytesMut;
use model::redis::{ClientAddr, RequestParser, ServerConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::serve_host::{self, ConnKey, Event, Out, Outbox};

/// What `locksim serve` is started with.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub bind: String,
    pub port: u16,
    pub requirepass: Option<String>,
    pub maxclients: u64,
    pub lua_time_limit_ms: u64,
    pub lua_memory_limit_bytes: usize,
    /// Also listen on this Unix socket (`unixsocket`).
    pub unixsocket: Option<std::path::PathBuf>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        let config = ServerConfig::default();
        ServeOptions {
            bind: "127.0.0.1".to_string(),
            port: 6379,
            requirepass: None,
            maxclients: config.maxclients,
            lua_time_limit_ms: config.lua_time_limit_ms,
            lua_memory_limit_bytes: config.lua_memory_limit_bytes,
            unixsocket: None,
        }
    }
}

/// Descriptors Redis keeps for itself (`CONFIG_MIN_RESERVED_FDS`).
const RESERVED_FDS: u64 = 32;

/// `adjustOpenFilesLimit`: raises the soft `RLIMIT_NOFILE` to `maxclients + 32` (up to the
/// hard limit) and returns the number of clients the limit allows.
fn adjust_open_files_limit(maxclients: u64) -> u64 {
    let wanted = maxclients + RESERVED_FDS;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return maxclients;
        }
        if limit.rlim_cur < wanted {
            let raised = libc::rlimit {
                rlim_cur: wanted.min(limit.rlim_max),
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit.rlim_cur = raised.rlim_cur;
            }
        }
    }
    if limit.rlim_cur < wanted {
        let allowed = limit.rlim_cur.saturating_sub(RESERVED_FDS).max(1);
        eprintln!(
            "locksim serve: the open files limit ({}) allows {allowed} clients, not maxclients {maxclients}",
            limit.rlim_cur
        );
        allowed
    } else {
        maxclients
    }
}

/// Serves on `listener` until SIGINT or SIGTERM.
pub fn serve(listener: std::net::TcpListener, options: ServeOptions) -> io::Result<()> {
    let maxclients = adjust_open_files_limit(options.maxclients);
    let port = listener.local_addr()?.port();
    let config = ServerConfig {
        seed: serve_seed(),
        port,
        maxclients,
        requirepass: options.requirepass.clone().map(String::into_bytes),
        lua_time_limit_ms: options.lua_time_limit_ms,
        lua_memory_limit_bytes: options.lua_memory_limit_bytes,
        ..ServerConfig::default()
    };
    let (to_server, inbox) = mpsc::channel();
    let outbox = Arc::new(Outbox::default());
    let server_outbox = outbox.clone();
    let server_thread = std::thread::Builder::new()
        .name("redis-server".into())
        .spawn(move || serve_host::run(config, inbox, server_outbox))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let unixsocket = options.unixsocket.clone();
    let result = local.block_on(&runtime, async move {
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let unix = match &unixsocket {
            Some(path) => {
                let _ = std::fs::remove_file(path);
                Some((
                    UnixListener::bind(path)?,
                    path.to_string_lossy().into_owned(),
                ))
            }
            None => None,
        };
        let shared = Rc::new(Shared {
            to_server,
            clients: AtomicUsize::new(0),
            next_key: AtomicU64::new(1),
            maxclients: maxclients as usize,
            mailboxes: RefCell::new(HashMap::new()),
        });
        tokio::task::spawn_local(dispatch(outbox, shared.clone()));
        if let Some((listener, path)) = unix {
            tokio::task::spawn_local(unix_accept_loop(listener, path, shared.clone()));
        }
        // What tools waiting for a redis-server to come up look for in its output.
        eprintln!("locksim serve: Ready to accept connections");
        tokio::select! {
            result = accept_loop(listener, shared) => result,
            signal = stop_signal() => {
                eprintln!("locksim serve: {signal}, shutting down");
                Ok(())
            }
        }
    });
    drop(local);
    if let Some(path) = &options.unixsocket {
        let _ = std::fs::remove_file(path);
    }
    // Dropping the runtime closes every connection; the server thread ends with its inbox.
    drop(runtime);
    let _ = server_thread.join();
    result
}

/// The active expiry's hash seed: any value will do outside the simulation.
fn serve_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

async fn stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

/// What the networking thread's tasks share.
struct Shared {
    to_server: Sender<Event>,
    clients: AtomicUsize,
    next_key: AtomicU64,
    maxclients: usize,
    /// Each connection task's mailbox, for `dispatch`.
    mailboxes: RefCell<HashMap<ConnKey, UnboundedSender<Out>>>,
}

/// Takes what the server thread shipped and hands it to the connection tasks (all on this
/// thread: no further wake-up crosses threads).
async fn dispatch(outbox: Arc<Outbox>, shared: Rc<Shared>) {
    loop {
        outbox.ready.notified().await;
        for (key, out) in outbox.take() {
            if let Some(mailbox) = shared.mailboxes.borrow().get(&key) {
                let _ = mailbox.send(out);
            }
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Rc<Shared>) -> io::Result<()> {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) if is_fd_exhaustion(&e) => {
                // Out of descriptors: the connection stays in the backlog; try again later
                // rather than spin on the ready listener.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Err(_) => continue,
        };
        if shared.clients.load(Ordering::Relaxed) >= shared.maxclients {
            tokio::task::spawn_local(reject(stream));
            continue;
        }
        shared.clients.fetch_add(1, Ordering::Relaxed);
        let shared = shared.clone();
        tokio::task::spawn_local(async move {
            let _ = stream.set_nodelay(true);
            let addr = ClientAddr {
                peer: peer.to_string(),
                local: stream
                    .local_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default(),
            };
            let (reader, writer) = stream.into_split();
            connection(reader, writer, addr, &shared).await;
            shared.clients.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Connections on the Unix socket (`addr=<path>:0`, as Redis prints them).
async fn unix_accept_loop(listener: UnixListener, path: String, shared: Rc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) if is_fd_exhaustion(&e) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Err(_) => continue,
        };
        if shared.clients.load(Ordering::Relaxed) >= shared.maxclients {
            let (_, mut writer) = stream.into_split();
            let _ = writer
                .write_all(b"-ERR max number of clients reached\r\n")
                .await;
            continue;
        }
        shared.clients.fetch_add(1, Ordering::Relaxed);
        let (shared, path) = (shared.clone(), path.clone());
        tokio::task::spawn_local(async move {
            let addr = ClientAddr {
                peer: format!("{path}:0"),
                local: format!("{path}:0"),
            };
            let (reader, writer) = stream.into_split();
            connection(reader, writer, addr, &shared).await;
            shared.clients.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

fn is_fd_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// `acceptCommonHandler` past `maxclients`.
async fn reject(mut stream: TcpStream) {
    let _ = stream
        .write_all(b"-ERR max number of clients reached\r\n")
        .await;
}

/// One connection: parses what it reads into batches for the server thread and writes what the
/// server answers.
async fn connection<R, W>(mut reader: R, mut writer: W, addr: ClientAddr, shared: &Shared)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let key: ConnKey = shared.next_key.fetch_add(1, Ordering::Relaxed);
    let (out_tx, mut out_rx) = unbounded_channel();
    shared.mailboxes.borrow_mut().insert(key, out_tx);
    let connected = shared.to_server.send(Event::Connect { key, addr });
    if connected.is_err() {
        shared.mailboxes.borrow_mut().remove(&key);
        return;
    }
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut reading = true;
    loop {
        tokio::select! {
            out = out_rx.recv() => match out {
                Some(Out::Bytes(bytes)) => {
                    if writer.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                Some(Out::Close) | None => break,
            },
            read = reader.read_buf(&mut buf), if reading => {
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let mut commands = Vec::new();
                let mut error = None;
                loop {
                    match parser.parse(&mut buf) {
                        Ok(Some(argv)) => commands.push(argv),
                        Ok(None) => break,
                        Err(e) => {
                            // networking.c: the commands before it run, then the error, then
                            // the connection closes.
                            error = Some(e.reply());
                            reading = false;
                            break;
                        }
                    }
                }
                if (!commands.is_empty() || error.is_some())
                    && shared
                        .to_server
                        .send(Event::Commands { key, commands, error })
                        .is_err()
                {
                    break;
                }
            }
        }
    }
    let _ = writer.shutdown().await;
    shared.mailboxes.borrow_mut().remove(&key);
    let _ = shared.to_server.send(Event::Disconnect { key });
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Instant;

    use super::*;

    fn start() -> u16 {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || serve(listener, ServeOptions::default()));
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
        bad.write_all(b"PING\r\n*1\r\nx\r\n").unwrap();
        let mut got = Vec::new();
        bad.read_to_end(&mut got).unwrap();
        assert_eq!(
            got,
            b"+PONG\r\n-ERR Protocol error: expected '$', got 'x'\r\n"
        );
        roundtrip(&mut good, b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n");
        roundtrip(&mut good, b"GET k\r\n", b"$1\r\nv\r\n");
    }

    #[test]
    fn pipelining_pubsub_wait_blocking_and_expiry() {
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
        let mut c = connect(port);
        c.write_all(b"BLPOP q 0\r\nPING\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        roundtrip(&mut a, b"RPUSH q x\r\n", b":1\r\n");
        assert_eq!(read_n(&mut c, 25), b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n+PONG\r\n");
        roundtrip(&mut c, b"BRPOP q 0.1\r\n", b"*-1\r\n");
        roundtrip(&mut a, b"SET e v PX 50\r\nDBSIZE\r\n", b"+OK\r\n:1\r\n");
        std::thread::sleep(Duration::from_millis(400));
        roundtrip(&mut a, b"DBSIZE\r\n", b":0\r\n");
        roundtrip(&mut a, b"QUIT\r\n", b"+OK\r\n");
        let mut rest = Vec::new();
        let _ = a.read_to_end(&mut rest);
        assert!(rest.is_empty());
    }
}
