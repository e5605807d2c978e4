//! `locksim serve` against what redis-server 7.0 does with the same abuse (issue 31): an
//! unauthenticated client may not make it buffer large requests, its listen backlog is
//! `tcp-backlog`'s 511, a large value is read in place and its memory given back, and an idle
//! connection holds no buffers. The protocol answers are checked against the installed
//! redis-server (unless `LOCKSIM_SKIP_REDIS=1`); memory is read from `/proc`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Serve, redis_server, serve};

fn connect(port: u16) -> TcpStream {
    let conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    conn
}

/// Sends `bytes` (ignoring a reset once the server closed) and reads until the server closes
/// the connection.
fn until_closed(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut conn = connect(port);
    let _ = conn.write_all(bytes);
    let mut out = Vec::new();
    let _ = conn.read_to_end(&mut out);
    out
}

/// Sends `bytes` and reads until `expected.len()` bytes arrived.
fn exchange(conn: &mut TcpStream, bytes: &[u8], expected: &[u8]) -> Vec<u8> {
    conn.write_all(bytes).unwrap();
    let mut out = vec![0u8; expected.len()];
    conn.read_exact(&mut out).unwrap();
    out
}

/// `DEL x x ...`, N arguments in all (a known command of any arity: Redis checks the command's
/// existence and arity before authentication).
fn many_arguments(n: usize) -> Vec<u8> {
    let mut request = format!("*{n}\r\n$3\r\nDEL\r\n").into_bytes();
    for _ in 1..n {
        request.extend_from_slice(b"$1\r\nx\r\n");
    }
    request
}

const NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";

#[test]
fn an_unauthenticated_client_is_closed_past_ten_arguments_or_a_16_kb_bulk_as_redis_does() {
    let locksim = serve(&["--requirepass", "secret"]);
    let redis = redis_server(&["--requirepass", "secret"]);
    let mut servers: Vec<(&str, &Serve)> = vec![("locksim serve", &locksim)];
    if let Some(redis) = &redis {
        servers.push(("redis-server", redis));
    }
    for (name, server) in servers {
        let mut bystander = connect(server.port);
        assert_eq!(
            exchange(&mut bystander, b"AUTH secret\r\n", b"+OK\r\n"),
            b"+OK\r\n"
        );
        // 10 arguments and a 16384-byte bulk are allowed (and refused with NOAUTH).
        let mut conn = connect(server.port);
        assert_eq!(
            exchange(&mut conn, &many_arguments(10), NOAUTH),
            NOAUTH,
            "{name}"
        );
        let bulk = format!("*2\r\n$4\r\nECHO\r\n$16384\r\n{}\r\n", "y".repeat(16384));
        assert_eq!(
            exchange(&mut conn, bulk.as_bytes(), NOAUTH),
            NOAUTH,
            "{name}"
        );
        // One more argument or one more byte: the error, and the connection is closed before
        // the bulk is read.
        assert_eq!(
            String::from_utf8_lossy(&until_closed(server.port, &many_arguments(11))),
            "-ERR Protocol error: unauthenticated multibulk length\r\n",
            "{name}"
        );
        assert_eq!(
            String::from_utf8_lossy(&until_closed(
                server.port,
                b"*2\r\n$4\r\nECHO\r\n$16385\r\n"
            )),
            "-ERR Protocol error: unauthenticated bulk length\r\n",
            "{name}"
        );
        assert_eq!(
            String::from_utf8_lossy(&until_closed(
                server.port,
                b"*2\r\n$4\r\nECHO\r\n$536870913\r\n"
            )),
            "-ERR Protocol error: invalid bulk length\r\n",
            "{name}: past proto-max-bulk-len"
        );
        // AUTH in the same packet lifts the limits for what follows it.
        let mut request = b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n".to_vec();
        let mut echo = vec!["ECHO".to_string()];
        echo.extend((0..10).map(|i| i.to_string()));
        request.extend_from_slice(&model::redis::resp::encode_command(&echo));
        let value = "z".repeat(20000);
        request.extend_from_slice(&model::redis::resp::encode_command(&["ECHO", &value]));
        let mut conn = connect(server.port);
        let expected = format!(
            "+OK\r\n-ERR wrong number of arguments for 'echo' command\r\n$20000\r\n{value}\r\n"
        );
        assert_eq!(
            String::from_utf8_lossy(&exchange(&mut conn, &request, expected.as_bytes())),
            expected,
            "{name}"
        );
        assert_eq!(
            exchange(&mut bystander, b"PING\r\n", b"+PONG\r\n"),
            b"+PONG\r\n",
            "{name}: the others are served"
        );
    }
}

/// `/proc/<pid>/status` fields in kB.
fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn the_listen_backlog_is_tcp_backlogs_511() {
    const CLIENTS: usize = 300;
    let server = serve(&[]);
    let pid = server.child.id() as i32;
    let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .map_or(4096, |s| s.trim().parse().unwrap_or(4096));
    // Stopped, the server accepts nothing: the kernel completes only as many handshakes as
    // the backlog holds (128 with Rust's default; the rest wait for SYN retransmissions).
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let sockets: Vec<i32> = (0..CLIENTS)
        .map(|_| connect_nonblocking(server.port))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut connected = 0;
    while Instant::now() < deadline {
        connected = sockets.iter().filter(|&&fd| is_connected(fd)).count();
        if connected == CLIENTS {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above; then closing our own sockets.
    unsafe {
        libc::kill(pid, libc::SIGCONT);
        for fd in sockets {
            libc::close(fd);
        }
    }
    assert!(
        connected >= CLIENTS.min(somaxconn),
        "{connected} of {CLIENTS} connections completed while the server was stopped"
    );
    let mut conn = connect(server.port);
    assert_eq!(exchange(&mut conn, b"PING\r\n", b"+PONG\r\n"), b"+PONG\r\n");
}

/// A non-blocking `connect` to the loopback port; the descriptor.
fn connect_nonblocking(port: u16) -> i32 {
    // SAFETY: a socket of our own, and a sockaddr_in on the stack for connect(2).
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        libc::connect(
            fd,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        fd
    }
}

/// Whether the handshake of a non-blocking connect completed.
fn is_connected(fd: i32) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: poll(2) on one descriptor of ours, not blocking.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready == 1 && poll.revents & libc::POLLOUT != 0 && poll.revents & libc::POLLERR == 0
}

#[test]
fn a_large_value_is_read_in_place_and_its_memory_given_back() {
    const VALUE_BYTES: usize = 64 << 20;
    let server = serve(&[]);
    let pid = server.child.id();
    let mut conn = connect(server.port);
    assert_eq!(exchange(&mut conn, b"PING\r\n", b"+PONG\r\n"), b"+PONG\r\n");
    let before_kb = status_kb(pid, "VmRSS:");
    let value = vec![b'v'; VALUE_BYTES];
    let request = model::redis::resp::encode_command(&[b"SET".as_slice(), b"big", &value]);
    assert_eq!(exchange(&mut conn, &request, b"+OK\r\n"), b"+OK\r\n");
    let peak_kb = status_kb(pid, "VmHWM:");
    assert_eq!(
        exchange(&mut conn, b"STRLEN big\r\n", b":67108864\r\n"),
        b":67108864\r\n"
    );
    // The value is read into one buffer, which becomes the argument and then the stored
    // value: one copy of it in memory. Before, the keyspace's copy and the copy propagated to
    // (absent) replicas made three (and the input buffer doubling under it four or five);
    // the bound leaves a whole value of margin.
    let value_kb = (VALUE_BYTES / 1024) as u64;
    assert!(
        peak_kb < before_kb + 2 * value_kb,
        "peak {peak_kb} kB for a {value_kb} kB value (at start {before_kb} kB)"
    );
    assert_eq!(exchange(&mut conn, b"DEL big\r\n", b":1\r\n"), b":1\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after_kb = status_kb(pid, "VmRSS:");
    while after_kb > before_kb + value_kb / 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        after_kb = status_kb(pid, "VmRSS:");
    }
    assert!(
        after_kb <= before_kb + value_kb / 4,
        "{after_kb} kB resident after DEL (at start {before_kb} kB)"
    );
}

#[test]
fn idle_connections_hold_no_buffers() {
    const CONNECTIONS: usize = 1000;
    let server = serve(&["--maxclients", "2000"]);
    let pid = server.child.id();
    let mut warm = connect(server.port);
    assert_eq!(exchange(&mut warm, b"PING\r\n", b"+PONG\r\n"), b"+PONG\r\n");
    let before_kb = status_kb(pid, "VmRSS:");
    let mut conns: Vec<TcpStream> = (0..CONNECTIONS).map(|_| connect(server.port)).collect();
    for conn in &mut conns {
        conn.write_all(b"PING\r\n").unwrap();
    }
    for conn in &mut conns {
        let mut pong = [0u8; 7];
        conn.read_exact(&mut pong).unwrap();
        assert_eq!(&pong, b"+PONG\r\n");
    }
    let per_connection_bytes =
        status_kb(pid, "VmRSS:").saturating_sub(before_kb) * 1024 / CONNECTIONS as u64;
    // A 16 KiB read buffer and a 1 KiB input buffer per connection made it about 20 KiB.
    assert!(
        per_connection_bytes < 8 * 1024,
        "{per_connection_bytes} bytes resident per idle connection"
    );
}
