//! `locksim serve`: the simulated Redis (`model::redis::RedisServer`) behind a real TCP port, on
//! the real clock, for redis-cli, client libraries and benchmarks.
//!
//! Like `redis-server`, one thread does everything: a tokio runtime (the real one; `--cfg madsim`
//! only switches madsim's own types) runs one task per connection, so idle connections cost a
//! few kilobytes and no thread; a task parses what it reads and runs the commands in the model
//! (`host.rs`), and once every connection woken with it has run, one task writes each one's
//! replies at once on its `TCP_NODELAY` socket: pipelined commands cost one write per batch,
//! and the writes come after the reads, as Redis's `beforeSleep` has them
//! (`Host::flush`). Like `redis-server` too:
//! `maxclients` (10000) is enforced with its `-ERR max number of clients reached`, the open-files
//! limit is raised for it (`adjustOpenFilesLimit`), an `accept` failing for lack of descriptors
//! waits instead of spinning, a script past `lua-time-limit` leaves the others `-BUSY` and
//! yields to `SCRIPT KILL`, and SIGINT/SIGTERM stop the server cleanly.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use model::redis::resp::PROTO_MBULK_BIG_ARG;
use model::redis::{ClientAddr, RedisServer, ServerConfig};
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

mod host;

use host::{Conn, ConnState, Host, now_ms};

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

/// `tcp-backlog`'s default: connections the kernel completes before the server accepts them
/// (Rust's `TcpListener::bind` asks for 128: 200 clients connecting at once waited for SYN
/// retransmissions, 42.8 s to reach 10,000 connections against Redis's 0.9 s).
const TCP_BACKLOG: libc::c_int = 511;

/// `listen(2)` again with Redis's backlog (Linux takes a new backlog on a listening socket).
fn set_backlog(fd: std::os::fd::RawFd) -> io::Result<()> {
    // SAFETY: listen(2) on a socket we own.
    if unsafe { libc::listen(fd, TCP_BACKLOG) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
        // No replicas, no AOF: a value is stored as it was read, not copied for a stream.
        propagates_effects: false,
        ..ServerConfig::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let unixsocket = options.unixsocket.clone();
    let result = local.block_on(&runtime, async move {
        listener.set_nonblocking(true)?;
        set_backlog(listener.as_raw_fd())?;
        let listener = TcpListener::from_std(listener)?;
        let host = Host::new(
            RedisServer::new(config),
            maxclients as usize,
            Duration::from_millis(options.lua_time_limit_ms),
        );
        host.listeners
            .borrow_mut()
            .push((listener.as_raw_fd(), false));
        if let Some(path) = &unixsocket {
            let _ = std::fs::remove_file(path);
            let unix = UnixListener::bind(path)?;
            set_backlog(unix.as_raw_fd())?;
            host.listeners.borrow_mut().push((unix.as_raw_fd(), true));
            let label = path.to_string_lossy().into_owned();
            tokio::task::spawn_local(unix_accept_loop(unix, label, host.clone()));
        }
        tokio::task::spawn_local(timers(host.clone()));
        tokio::task::spawn_local(flush_replies(host.clone()));
        // What tools waiting for a redis-server to come up look for in its output.
        eprintln!("locksim serve: Ready to accept connections");
        tokio::select! {
            result = accept_loop(listener, host) => result,
            signal = stop_signal() => {
                eprintln!("locksim serve: {signal}, shutting down");
                Ok(())
            }
        }
    });
    // Dropping the tasks closes every connection.
    drop(local);
    drop(runtime);
    if let Some(path) = &options.unixsocket {
        let _ = std::fs::remove_file(path);
    }
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

/// Active expiry every 100 ms (`serverCron`, hz 10) and blocked clients' timeouts.
async fn timers(host: Rc<Host>) {
    const EXPIRE_PERIOD: Duration = Duration::from_millis(100);
    let mut next_expire = Instant::now() + EXPIRE_PERIOD;
    loop {
        let wake = host
            .next_block_deadline()
            .map_or(next_expire, |d| d.min(next_expire));
        tokio::select! {
            _ = tokio::time::sleep_until(wake.into()) => {}
            _ = host.timers.notified() => {}
        }
        if Instant::now() >= next_expire {
            let mut server = host.server.borrow_mut();
            server.active_expire_cycle(now_ms());
            next_expire = Instant::now() + EXPIRE_PERIOD;
            // Freed memory goes back to the system (mimalloc purges what stayed free past its
            // delay only when asked or when the thread allocates again): a 512 MB value DELeted
            // on an idle server kept its 512 MB, and the copies a SET made of it theirs, as
            // jemalloc's background purge gives them back in redis-server.
            // SAFETY: mi_collect has no preconditions.
            unsafe { libmimalloc_sys::mi_collect(false) };
        }
        host.server.borrow_mut().expire_blocked(now_ms());
        host.deliver();
    }
}

/// Writes the replies of the connections that ran: woken by the first of them, it runs after
/// every connection the same readiness woke (tasks run in the order they were woken).
async fn flush_replies(host: Rc<Host>) {
    loop {
        host.flush.notified().await;
        host.flush();
    }
}

async fn accept_loop(listener: TcpListener, host: Rc<Host>) -> io::Result<()> {
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
        if host.clients.get() >= host.maxclients {
            tokio::task::spawn_local(reject(stream));
            continue;
        }
        let _ = stream.set_nodelay(true);
        let addr = ClientAddr {
            peer: peer.to_string(),
            local: stream
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            unix_socket: None,
        };
        let conn = Conn::new(addr, stream.as_raw_fd());
        host.clients.set(host.clients.get() + 1);
        host.connect(&conn);
        let (reader, writer) = stream.into_split();
        tokio::task::spawn_local(connection(host.clone(), conn, reader, writer));
    }
}

/// Connections on the Unix socket (`addr=<path>:0`, as Redis prints them).
async fn unix_accept_loop(listener: UnixListener, path: String, host: Rc<Host>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) if is_fd_exhaustion(&e) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Err(_) => continue,
        };
        if host.clients.get() >= host.maxclients {
            let (_, mut writer) = stream.into_split();
            let _ = writer
                .write_all(b"-ERR max number of clients reached\r\n")
                .await;
            continue;
        }
        let addr = ClientAddr {
            peer: format!("{path}:0"),
            local: format!("{path}:0"),
            unix_socket: Some(path.clone()),
        };
        let conn = Conn::new(addr, stream.as_raw_fd());
        host.clients.set(host.clients.get() + 1);
        host.connect(&conn);
        let (reader, writer) = stream.into_split();
        tokio::task::spawn_local(connection(host.clone(), conn, reader, writer));
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

/// Gives tasks to the connections a busy script's monitor accepted.
fn adopt_accepted(host: &Rc<Host>) {
    let accepted = std::mem::take(&mut *host.accepted.borrow_mut());
    for entry in accepted {
        host.connect(&entry.conn);
        let fd = entry.conn.fd;
        if entry.unix {
            // SAFETY: `fd` is the connected socket the monitor accepted, owned by nobody else.
            let std = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
            if let Ok(stream) = UnixStream::from_std(std) {
                let (reader, writer) = stream.into_split();
                tokio::task::spawn_local(connection(host.clone(), entry.conn, reader, writer));
            }
        } else {
            // SAFETY: as above.
            let std = unsafe { std::net::TcpStream::from_raw_fd(fd) };
            let _ = std.set_nodelay(true);
            if let Ok(stream) = TcpStream::from_std(std) {
                let (reader, writer) = stream.into_split();
                tokio::task::spawn_local(connection(host.clone(), entry.conn, reader, writer));
            }
        }
    }
}

/// `PROTO_IOBUF_LEN`: what one read asks for.
const IOBUF_LEN: usize = 16 * 1024;

/// The read half of a TCP or a Unix connection: the task waits for it to be readable with no
/// buffer, then reads what is there into the connection's input, so an idle connection holds
/// no input buffer (`readQueryFromClient` allocates on a read event too).
trait ReadHalf {
    async fn readable(&self) -> io::Result<()>;
    fn try_read_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize>;
    /// Forgets the readiness of the socket for reading, until the runtime sees it again.
    fn clear_read_readiness(&self);
}

/// What `try_io` is told when the caller knows the socket has nothing more to read: tokio
/// clears the readiness it had seen (not one reported since), as after a read that failed
/// with `EAGAIN`.
fn drained() -> io::Result<()> {
    Err(io::ErrorKind::WouldBlock.into())
}

impl ReadHalf for tokio::net::tcp::OwnedReadHalf {
    async fn readable(&self) -> io::Result<()> {
        tokio::net::tcp::OwnedReadHalf::readable(self).await
    }

    fn try_read_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        tokio::net::tcp::OwnedReadHalf::try_read_buf(self, buf)
    }

    fn clear_read_readiness(&self) {
        let _ = self.as_ref().try_io(Interest::READABLE, drained);
    }
}

impl ReadHalf for tokio::net::unix::OwnedReadHalf {
    async fn readable(&self) -> io::Result<()> {
        tokio::net::unix::OwnedReadHalf::readable(self).await
    }

    fn try_read_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        tokio::net::unix::OwnedReadHalf::try_read_buf(self, buf)
    }

    fn clear_read_readiness(&self) {
        let _ = self.as_ref().try_io(Interest::READABLE, drained);
    }
}

/// One read into the connection's input (`readQueryFromClient`): 16 KiB, or, inside a bulk of
/// 32 KiB or more, the rest of that bulk, into a buffer made its size when it began
/// (`sdsMakeRoomForNonGreedy`) so that the bulk is read in place, without a buffer doubling
/// under it, and becomes the argument as it is (`RequestParser`).
fn read_input(conn: &Conn, reader: &impl ReadHalf) -> io::Result<usize> {
    let mut io = conn.io.borrow_mut();
    let io = &mut *io;
    let input = &mut io.input;
    let readlen = match io.parser.pending_bulk_len() {
        Some(len) if len >= PROTO_MBULK_BIG_ARG && input.len() < len + 2 => {
            if input.capacity() < len + 2 {
                let mut whole = BytesMut::with_capacity(len + 2);
                whole.extend_from_slice(input);
                *input = whole;
            }
            len + 2 - input.len()
        }
        _ => IOBUF_LEN,
    };
    input.reserve(readlen);
    let read = reader.try_read_buf(&mut input.limit(readlen));
    if matches!(read, Ok(n) if n > 0 && n < readlen) {
        // A short read emptied the socket's receive queue: without this, the next wait for
        // input found the socket still marked readable and paid a `recv` that failed with
        // `EAGAIN` after every request (Redis reads once per readable event too).
        reader.clear_read_readiness();
    }
    if input.is_empty() {
        // Nothing came (a readiness that was stale, or the end): no buffer is kept for it.
        *input = BytesMut::new();
    }
    read
}

/// One connection: reads, runs, writes, until either side closes it.
async fn connection<R, W>(host: Rc<Host>, conn: Rc<Conn>, reader: R, mut writer: W)
where
    R: ReadHalf,
    W: AsyncWrite + Unpin,
{
    loop {
        host.run_queued(&conn);
        if !host.accepted.borrow().is_empty() {
            adopt_accepted(&host);
        }
        // Replies go out with the other ready connections' (`Host::flush`), except the last
        // ones before a close and what a full socket did not take.
        let (has_output, closing) = {
            let io = conn.io.borrow();
            (!io.output.is_empty(), io.closing)
        };
        if has_output && (closing || !host.queue_flush(&conn)) {
            let output = {
                let mut io = conn.io.borrow_mut();
                io.writing = true;
                std::mem::take(&mut io.output)
            };
            let written = writer.write_all(&output).await;
            {
                let mut io = conn.io.borrow_mut();
                io.writing = false;
                io.write_blocked = false;
            }
            if written.is_err() {
                break;
            }
            continue;
        }
        let (state, runnable) = {
            let io = conn.io.borrow();
            (
                io.state,
                io.state == ConnState::Ready
                    && (!io.queued.is_empty() || io.protocol_error.is_some()),
            )
        };
        if closing {
            break;
        }
        if runnable {
            continue;
        }
        let wait_until = match state {
            ConnState::Waiting(Some(at)) => Some(at),
            _ => None,
        };
        tokio::select! {
            ready = reader.readable() => {
                if ready.is_err() {
                    break;
                }
                match read_input(&conn, &reader) {
                    Ok(0) => break,
                    Ok(_) => conn.parse_input(),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => break,
                }
            }
            _ = conn.wake.notified() => {}
            _ = sleep_until(wait_until), if wait_until.is_some() => {
                // WAIT's timeout: no replica acknowledged.
                let mut io = conn.io.borrow_mut();
                io.state = ConnState::Ready;
                io.output.extend_from_slice(b":0\r\n");
            }
        }
    }
    conn.io.borrow_mut().released = true;
    let _ = writer.shutdown().await;
    host.disconnect(&conn);
    host.clients.set(host.clients.get().saturating_sub(1));
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
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

    /// MONITOR lines carry the real clock in microseconds and the peer; a WRITE pause holds a
    /// write (and the connection's later commands) until CLIENT UNPAUSE, then runs it.
    #[test]
    fn monitor_and_client_pause() {
        let port = start();
        let mut admin = connect(port);
        let mut monitor = connect(port);
        let mut writer = connect(port);
        roundtrip(&mut monitor, b"MONITOR\r\n", b"+OK\r\n");
        roundtrip(&mut admin, b"CLIENT PAUSE 60000 WRITE\r\n", b"+OK\r\n");
        writer.write_all(b"SET k v\r\nGET k\r\n").unwrap();
        roundtrip(&mut admin, b"GET k\r\n", b"$-1\r\n");
        writer
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        assert!(read_n(&mut writer, 1).is_empty(), "the SET waits");
        writer
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        roundtrip(&mut admin, b"CLIENT UNPAUSE\r\n", b"+OK\r\n");
        assert_eq!(read_n(&mut writer, 12), b"+OK\r\n$1\r\nv\r\n");
        let peer = |s: &TcpStream| s.local_addr().unwrap().to_string();
        let expected = [
            format!("[0 {}] \"GET\" \"k\"", peer(&admin)),
            format!("[0 {}] \"SET\" \"k\" \"v\"", peer(&writer)),
            format!("[0 {}] \"GET\" \"k\"", peer(&writer)),
        ];
        // `+` ten digits `.` six digits, a space, the rest, CRLF.
        let size: usize = expected.iter().map(|rest| 20 + rest.len() + 2).sum();
        let lines = String::from_utf8(read_n(&mut monitor, size)).unwrap();
        for (line, expected) in lines.split("\r\n").zip(expected) {
            let (stamp, rest) = line.trim_start_matches('+').split_once(' ').unwrap();
            let (secs, micros) = stamp.split_once('.').unwrap();
            assert!(secs.parse::<u64>().unwrap() > 1_600_000_000 && micros.len() == 6);
            assert_eq!(rest, expected);
        }
    }

    /// A reply larger than the socket takes at once: the rest goes out as the client reads it,
    /// before the next reply, and the other connections are served meanwhile.
    #[test]
    fn a_reply_the_socket_cannot_take_at_once_is_finished_in_order() {
        const VALUE_BYTES: usize = 32 << 20;
        let port = start();
        let mut other = connect(port);
        let value = vec![b'x'; VALUE_BYTES];
        let set = model::redis::resp::encode_command(&[b"SET".as_slice(), b"big", &value]);
        roundtrip(&mut other, &set, b"+OK\r\n");
        let mut slow = connect(port);
        slow.write_all(b"GET big\r\nPING\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        roundtrip(&mut other, b"PING\r\n", b"+PONG\r\n");
        let mut expected = format!("${VALUE_BYTES}\r\n").into_bytes();
        expected.extend_from_slice(&value);
        expected.extend_from_slice(b"\r\n+PONG\r\n");
        let got = read_n(&mut slow, expected.len());
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "the reply's bytes differ");
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
